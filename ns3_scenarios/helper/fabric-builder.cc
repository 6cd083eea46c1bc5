#include "fabric-builder.h"

#include "ns3/abort.h"

#include <deque>
#include <limits>

namespace ns3
{

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
FabricBuilder::ComputeRoutes()
{
    const uint32_t n = GetNNodes();
    constexpr uint32_t kUnreached = std::numeric_limits<uint32_t>::max();
    // Each switch's routes as CSR (start offset per destination node, then the equal-cost ports), filled
    // destination by destination in id order, so no per-(switch, destination) container is ever built:
    // memory is one offset per (switch, node) plus the ports themselves.
    std::vector<std::vector<uint32_t>> start(n);
    std::vector<std::vector<uint16_t>> ports(n);
    for (uint32_t s = 0; s < n; ++s)
    {
        if (m_switches[s])
        {
            start[s].reserve(n + 1);
        }
    }
    std::vector<uint32_t> dist(n);
    std::deque<uint32_t> frontier;
    for (uint32_t d = 0; d < n; ++d)
    {
        for (uint32_t s = 0; s < n; ++s)
        {
            if (m_switches[s])
            {
                start[s].push_back(static_cast<uint32_t>(ports[s].size()));
            }
        }
        if (!m_hosts[d])
        {
            continue;
        }
        // BFS from the destination; hosts are never transit nodes.
        std::fill(dist.begin(), dist.end(), kUnreached);
        dist[d] = 0;
        frontier.assign(1, d);
        while (!frontier.empty())
        {
            const uint32_t u = frontier.front();
            frontier.pop_front();
            if (u != d && m_hosts[u])
            {
                continue;
            }
            for (uint32_t p = 0; p < m_nodes[u]->GetNPorts(); ++p)
            {
                const uint32_t v = m_nodes[u]->GetPort(p)->GetPeer()->GetNodeId();
                if (dist[v] == kUnreached)
                {
                    dist[v] = dist[u] + 1;
                    frontier.push_back(v);
                }
            }
        }
        for (uint32_t s = 0; s < n; ++s)
        {
            if (!m_switches[s] || dist[s] == kUnreached)
            {
                continue;
            }
            for (uint32_t p = 0; p < m_nodes[s]->GetNPorts(); ++p)
            {
                const uint32_t v = m_nodes[s]->GetPort(p)->GetPeer()->GetNodeId();
                if (dist[v] + 1 == dist[s])
                {
                    ports[s].push_back(static_cast<uint16_t>(p));
                }
            }
        }
    }
    for (uint32_t s = 0; s < n; ++s)
    {
        if (m_switches[s])
        {
            start[s].push_back(static_cast<uint32_t>(ports[s].size()));
            ports[s].shrink_to_fit();
            m_switches[s]->SetRoutes(std::move(start[s]), std::move(ports[s]));
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
        for (uint32_t p = 0; p < m_nodes[s]->GetNPorts(); ++p)
        {
            Ptr<EgressPort> port = m_nodes[s]->GetPort(p);
            if (port->GetFlowControl() == EgressPort::FlowControl::CREDIT)
            {
                port->InitCredits(port->GetPeer()->GetVlBufferBytes(), maxPacketBytes);
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
