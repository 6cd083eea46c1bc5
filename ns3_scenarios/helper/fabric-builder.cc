#include "fabric-builder.h"

#include "ns3/abort.h"

#include <algorithm>
#include <limits>

namespace ns3
{

namespace
{
constexpr uint32_t kUnreached = std::numeric_limits<uint32_t>::max(); ///< BFS: no path
constexpr uint8_t kMaxHops = std::numeric_limits<uint8_t>::max();     ///< hop counts saturate here
} // namespace

FabricBuilder::FabricBuilder(PacketPool* pool, FlowTable* flows)
    : m_pool(pool),
      m_flows(flows)
{
}

void
FabricBuilder::AddNodes(const uint8_t* kind, uint64_t n)
{
    for (uint64_t i = 0; i < n; ++i)
    {
        Ptr<FabricNode> node;
        if (kind[i] == static_cast<uint8_t>(NodeKind::HOST))
        {
            Ptr<HostNic> nic = CreateObject<HostNic>();
            nic->SetFlowTable(m_flows);
            m_hosts.push_back(nic);
            m_switches.push_back(nullptr);
            node = nic;
        }
        else
        {
            NS_ABORT_MSG_UNLESS(kind[i] == static_cast<uint8_t>(NodeKind::SWITCH),
                                "node " << i << " has unknown kind " << int(kind[i]));
            Ptr<FabricSwitch> sw = CreateObject<FabricSwitch>();
            m_hosts.push_back(nullptr);
            m_switches.push_back(sw);
            node = sw;
        }
        node->Bind(static_cast<uint32_t>(m_nodes.size()), m_pool);
        m_nodes.push_back(node);
    }
}

void
FabricBuilder::AddLinks(const int32_t* a,
                        const int32_t* b,
                        const double* rateBps,
                        const int64_t* delayPs,
                        uint64_t n)
{
    for (uint64_t i = 0; i < n; ++i)
    {
        Ptr<FabricNode> na = m_nodes.at(a[i]);
        Ptr<FabricNode> nb = m_nodes.at(b[i]);
        Ptr<EgressPort> ab = CreateObject<EgressPort>();
        Ptr<EgressPort> ba = CreateObject<EgressPort>();
        for (const auto& port : {ab, ba})
        {
            port->SetDataRate(DataRate(static_cast<uint64_t>(rateBps[i])));
            port->SetPropagationDelay(PicoSeconds(delayPs[i]));
        }
        const uint32_t ia = na->AddPort(ab);
        const uint32_t ib = nb->AddPort(ba);
        ab->Connect(PeekPointer(na), ia, PeekPointer(nb), ib, m_pool);
        ba->Connect(PeekPointer(nb), ib, PeekPointer(na), ia, m_pool);
        if (m_hosts[a[i]])
        {
            NS_ABORT_MSG_IF(ia != 0, "host " << a[i] << " has more than one link");
            ab->SetSource(PeekPointer(m_hosts[a[i]]));
        }
        if (m_hosts[b[i]])
        {
            NS_ABORT_MSG_IF(ib != 0, "host " << b[i] << " has more than one link");
            ba->SetSource(PeekPointer(m_hosts[b[i]]));
        }
    }
}

void
FabricBuilder::SetGroups(const int32_t* group, uint64_t n)
{
    m_groupOfNode.assign(group, group + n);
}

std::string
FabricBuilder::SetRouteOverrides(const int32_t* switchId, const int32_t* toLeaf, const int32_t* via, uint64_t n)
{
    const auto peerOf = [this](uint32_t u, uint32_t v) {
        for (uint32_t p = 0; p < m_nodes[u]->GetNPorts(); ++p)
        {
            if (m_nodes[u]->GetPort(p)->GetPeer()->GetNodeId() == v)
            {
                return true;
            }
        }
        return false;
    };
    const auto hasHost = [this](uint32_t u) {
        for (uint32_t p = 0; p < m_nodes[u]->GetNPorts(); ++p)
        {
            if (m_hosts[m_nodes[u]->GetPort(p)->GetPeer()->GetNodeId()])
            {
                return true;
            }
        }
        return false;
    };
    const int64_t nNodes = GetNNodes();
    const auto isSwitch = [this, nNodes](int32_t u) { return u >= 0 && u < nNodes && m_switches[u]; };
    for (uint64_t i = 0; i < n; ++i)
    {
        const std::string row = "route override " + std::to_string(i) + ": ";
        if (!isSwitch(switchId[i]) || !isSwitch(toLeaf[i]) || !isSwitch(via[i]))
        {
            return row + "switch, leaf and via must be switch node ids";
        }
        if (switchId[i] == toLeaf[i] || !hasHost(toLeaf[i]))
        {
            return row + "leaf " + std::to_string(toLeaf[i]) + " must be another switch with hosts";
        }
        if (!peerOf(switchId[i], via[i]))
        {
            return row + "node " + std::to_string(via[i]) + " is no neighbour of switch " + std::to_string(switchId[i]);
        }
        m_pinnedVia[{uint32_t(switchId[i]), uint32_t(toLeaf[i])}].push_back(uint32_t(via[i]));
    }
    return "";
}

void
FabricBuilder::ComputeRoutes()
{
    Routes(nullptr);
}

std::vector<uint32_t>
FabricBuilder::Reroute(const std::vector<std::vector<uint8_t>>& dead)
{
    return Routes(&dead);
}

std::vector<uint32_t>
FabricBuilder::Routes(const std::vector<std::vector<uint8_t>>* dead)
{
    const uint32_t n = GetNNodes();
    // a dead port is no edge of the graph (its link is down in both directions)
    const auto up = [dead](uint32_t u, uint32_t p) { return dead == nullptr || (*dead)[u][p] == 0; };
    // Every host has exactly one link (AddLinks enforces it) and is never a transit node, so the BFS from
    // a host is the BFS from its leaf shifted by one hop: every other switch's equal-cost ports towards the
    // host are its ports towards the leaf, and the leaf itself has one, the host's port. Routes are thus
    // computed and stored per leaf (one BFS per leaf, one table row per leaf), not per host.
    auto attachments = std::make_shared<HostAttachments>();
    attachments->byNode.resize(n);
    std::vector<uint32_t> leaves; // node id of each leaf row, in order of first appearance by host id
    std::vector<uint32_t> rowOf(n, HostAttachments::kNone);
    for (uint32_t d = 0; d < n; ++d)
    {
        if (!m_hosts[d] || m_nodes[d]->GetNPorts() == 0)
        {
            continue;
        }
        Ptr<EgressPort> link = m_nodes[d]->GetPort(0);
        const uint32_t leaf = link->GetPeer()->GetNodeId();
        if (!m_switches[leaf])
        {
            continue; // host-to-host link: no switch routes to either end
        }
        if (rowOf[leaf] == HostAttachments::kNone)
        {
            rowOf[leaf] = static_cast<uint32_t>(leaves.size());
            leaves.push_back(leaf);
        }
        HostAttachments::Entry& at = attachments->byNode[d];
        at.leafNode = leaf;
        at.leafIndex = rowOf[leaf];
        at.leafPort = static_cast<uint16_t>(link->GetPeerPort());
    }
    // Each switch's routes as CSR (start offset per leaf row, then the equal-cost ports), filled leaf by
    // leaf, so no per-(switch, leaf) container is ever built.
    std::vector<std::vector<uint32_t>> start(n);
    std::vector<std::vector<uint16_t>> ports(n);
    for (uint32_t s = 0; s < n; ++s)
    {
        if (m_switches[s])
        {
            start[s].reserve(leaves.size() + 1);
        }
    }
    // The peers of every node's ports as flat CSR: the BFS below runs once per leaf over every link, so it
    // reads plain integers instead of chasing port and node objects.
    std::vector<uint32_t> peerStart(n + 1, 0);
    for (uint32_t u = 0; u < n; ++u)
    {
        peerStart[u + 1] = peerStart[u] + m_nodes[u]->GetNPorts();
    }
    std::vector<uint32_t> peer(peerStart[n]);
    std::vector<uint8_t> isSwitch(n);
    for (uint32_t u = 0; u < n; ++u)
    {
        for (uint32_t p = 0; p < m_nodes[u]->GetNPorts(); ++p)
        {
            peer[peerStart[u] + p] = m_nodes[u]->GetPort(p)->GetPeer()->GetNodeId();
        }
        isSwitch[u] = m_switches[u] ? 1 : 0;
    }
    std::vector<uint32_t> dist(n);
    std::vector<uint32_t> frontier;
    frontier.reserve(n);
    for (const uint32_t leaf : leaves)
    {
        for (uint32_t s = 0; s < n; ++s)
        {
            if (m_switches[s])
            {
                start[s].push_back(static_cast<uint32_t>(ports[s].size()));
            }
        }
        // BFS from the leaf over switches; hosts are never transit nodes and never on a shortest path to
        // another leaf (a host's only neighbour is its own leaf), so they are not visited at all.
        std::fill(dist.begin(), dist.end(), kUnreached);
        dist[leaf] = 0;
        frontier.assign(1, leaf);
        for (size_t head = 0; head < frontier.size(); ++head)
        {
            const uint32_t u = frontier[head];
            for (uint32_t j = peerStart[u]; j < peerStart[u + 1]; ++j)
            {
                const uint32_t v = peer[j];
                if (dist[v] == kUnreached && isSwitch[v] && up(u, j - peerStart[u]))
                {
                    dist[v] = dist[u] + 1;
                    frontier.push_back(v);
                }
            }
        }
        for (const uint32_t s : frontier)
        {
            if (s == leaf)
            {
                continue; // the leaf's route is the host's port (HostAttachments)
            }
            const size_t first = ports[s].size();
            for (uint32_t j = peerStart[s]; j < peerStart[s + 1]; ++j)
            {
                if (dist[peer[j]] + 1 == dist[s] && up(s, j - peerStart[s]))
                {
                    ports[s].push_back(static_cast<uint16_t>(j - peerStart[s]));
                }
            }
            const auto pinned = m_pinnedVia.find({s, leaf});
            if (pinned != m_pinnedVia.end())
            {
                // the pinned neighbours' up ports replace the shortest ones; none up: keep the shortest
                std::vector<uint16_t> via;
                for (uint32_t j = peerStart[s]; j < peerStart[s + 1]; ++j)
                {
                    const std::vector<uint32_t>& to = pinned->second;
                    if (std::find(to.begin(), to.end(), peer[j]) != to.end() && up(s, j - peerStart[s]))
                    {
                        via.push_back(static_cast<uint16_t>(j - peerStart[s]));
                    }
                }
                if (!via.empty())
                {
                    ports[s].resize(first);
                    ports[s].insert(ports[s].end(), via.begin(), via.end());
                }
            }
        }
        if (dead != nullptr)
        {
            // a switch cut off from this leaf keeps its old candidates
            const uint32_t row = static_cast<uint32_t>(start[leaves.front()].size()) - 1;
            for (uint32_t s = 0; s < n; ++s)
            {
                if (!m_switches[s] || s == leaf || ports[s].size() != start[s].back())
                {
                    continue;
                }
                const std::vector<uint32_t>& oldStart = m_switches[s]->GetRouteStart();
                const std::vector<uint16_t>& oldPorts = m_switches[s]->GetRoutePorts();
                ports[s].insert(ports[s].end(), oldPorts.begin() + oldStart[row], oldPorts.begin() + oldStart[row + 1]);
            }
        }
    }
    if (!m_groupOfNode.empty())
    {
        GroupRoutesFor(peerStart, peer, dead);
    }
    std::vector<uint32_t> changed;
    for (uint32_t s = 0; s < n; ++s)
    {
        if (m_switches[s])
        {
            start[s].push_back(static_cast<uint32_t>(ports[s].size()));
            ports[s].shrink_to_fit();
            if (dead != nullptr)
            {
                if (start[s] == m_switches[s]->GetRouteStart() && ports[s] == m_switches[s]->GetRoutePorts())
                {
                    continue;
                }
                changed.push_back(s);
            }
            m_switches[s]->SetRoutes(attachments, std::move(start[s]), std::move(ports[s]));
        }
    }
    return changed;
}

void
FabricBuilder::GroupRoutesFor(const std::vector<uint32_t>& peerStart,
                              const std::vector<uint32_t>& peer,
                              const std::vector<std::vector<uint8_t>>* dead)
{
    const uint32_t n = GetNNodes();
    NS_ABORT_MSG_IF(m_groupOfNode.size() != n, "SetGroups has " << m_groupOfNode.size() << " nodes, the fabric " << n);
    auto groups = std::make_shared<SwitchGroups>();
    groups->groupOfNode = m_groupOfNode;
    groups->nGroups = uint32_t(*std::max_element(m_groupOfNode.begin(), m_groupOfNode.end()) + 1);
    const auto up = [dead](uint32_t u, uint32_t p) { return dead == nullptr || (*dead)[u][p] == 0; };
    std::vector<GroupRoutes> routes(n);
    std::vector<uint32_t> dist(n);
    std::vector<uint32_t> anyDist(n);
    std::vector<uint32_t> frontier;
    frontier.reserve(n);
    // BFS backwards from every switch of group g over the up links that @p hop admits (hop(x, y): x may
    // forward to y); distances into @p out
    const auto towards = [&](uint32_t g, std::vector<uint32_t>& out, const auto& hop) {
        std::fill(out.begin(), out.end(), kUnreached);
        frontier.clear();
        for (uint32_t s = 0; s < n; ++s)
        {
            if (m_switches[s] && m_groupOfNode[s] == int32_t(g))
            {
                out[s] = 0;
                frontier.push_back(s);
            }
        }
        for (size_t head = 0; head < frontier.size(); ++head)
        {
            const uint32_t u = frontier[head];
            for (uint32_t j = peerStart[u]; j < peerStart[u + 1]; ++j)
            {
                const uint32_t v = peer[j];
                if (out[v] == kUnreached && m_switches[v] && hop(v, u) && up(u, j - peerStart[u]))
                {
                    out[v] = out[u] + 1;
                    frontier.push_back(v);
                }
            }
        }
    };
    const auto anyHop = [](uint32_t, uint32_t) { return true; };
    for (uint32_t g = 0; g < groups->nGroups; ++g)
    {
        // a hop from x to y on the way to group g: into g from outside it, or inside one group outside g
        const auto entersOrStays = [this, g](uint32_t x, uint32_t y) {
            const int32_t gx = m_groupOfNode[x];
            const int32_t gy = m_groupOfNode[y];
            return gy == int32_t(g) ? gx != int32_t(g) : gx == gy;
        };
        // minimal paths enter the target from their own group; a group whose global links to g are all down
        // goes through another group instead (shortest paths over any link), as a dragonfly's routing falls
        // back to a non-minimal route when a global link fails
        towards(g, dist, entersOrStays);
        bool cutOff = false; // some switch has no minimal path: only then the detours are needed
        for (uint32_t s = 0; s < n && !cutOff; ++s)
        {
            cutOff = m_switches[s] && dist[s] == kUnreached;
        }
        if (cutOff)
        {
            towards(g, anyDist, anyHop);
        }
        for (uint32_t s = 0; s < n; ++s)
        {
            if (!m_switches[s])
            {
                continue;
            }
            GroupRoutes& r = routes[s];
            r.start.push_back(uint32_t(r.ports.size()));
            const bool minimal = dist[s] != kUnreached;
            const std::vector<uint32_t>& d = minimal ? dist : anyDist;
            r.groupHops.push_back(uint8_t(std::min<uint32_t>(d[s], kMaxHops)));
            // a switch of the group is there (no ports)
            for (uint32_t j = peerStart[s]; d[s] != 0 && d[s] != kUnreached && j < peerStart[s + 1]; ++j)
            {
                if (d[peer[j]] + 1 == d[s] && (!minimal || entersOrStays(s, peer[j])) && up(s, j - peerStart[s]))
                {
                    r.ports.push_back(uint16_t(j - peerStart[s]));
                }
            }
            if (d[s] == kUnreached && dead != nullptr)
            {
                // cut off from the group: keep the old candidates, as the routes to hosts do (the packets
                // then meet the dead link and are counted as its drops)
                const GroupRoutes& old = m_switches[s]->GetGroupRoutes();
                r.ports.insert(r.ports.end(), old.ports.begin() + old.start[g], old.ports.begin() + old.start[g + 1]);
            }
        }
    }
    for (uint32_t s = 0; s < n; ++s)
    {
        if (m_switches[s])
        {
            routes[s].start.push_back(uint32_t(routes[s].ports.size()));
            m_switches[s]->SetGroupRoutes(groups, std::move(routes[s]));
        }
    }
}

std::string
FabricBuilder::SetupSwitches()
{
    // The largest packet on any wire: a full data packet of a NIC (every NIC shares the defaults).
    uint32_t maxPacketBytes = 0;
    for (const auto& host : m_hosts)
    {
        if (host)
        {
            maxPacketBytes = std::max(maxPacketBytes, host->GetMtuBytes() + host->GetHeaderBytes());
        }
    }
    std::string problem;
    for (uint32_t s = 0; s < GetNNodes(); ++s)
    {
        if (m_switches[s])
        {
            const std::string why = m_switches[s]->SetupBuffers(maxPacketBytes);
            problem = problem.empty() ? why : problem;
            m_switches[s]->AssignStreams(s);
        }
        if (m_nodes[s]->GetNPorts() > 0 &&
            m_nodes[s]->GetPort(0)->GetFlowControl() == EgressPort::FlowControl::CREDIT)
        {
            const std::string why = m_nodes[s]->SetupInputBuffers(maxPacketBytes);
            problem = problem.empty() ? why : problem;
        }
    }
    // Credits advertise the peer's input buffer, sized above: a second pass, once every node has its own.
    for (uint32_t s = 0; problem.empty() && s < GetNNodes(); ++s)
    {
        for (uint32_t p = 0; p < m_nodes[s]->GetNPorts(); ++p)
        {
            Ptr<EgressPort> port = m_nodes[s]->GetPort(p);
            if (port->GetFlowControl() == EgressPort::FlowControl::CREDIT)
            {
                const FabricNode* peer = port->GetPeer();
                port->InitCredits(peer->GetInputReservedBlocks(port->GetPeerPort()),
                                  peer->GetInputCapacityBlocks(port->GetPeerPort()),
                                  maxPacketBytes);
            }
        }
    }
    return problem;
}

void
FabricBuilder::Dispose()
{
    for (auto& node : m_nodes)
    {
        node->Dispose();
    }
    m_nodes.clear();
    m_hosts.clear();
    m_switches.clear();
}

} // namespace ns3
