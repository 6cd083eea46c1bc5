#include "link-fault-model.h"

#include "egress-port.h"
#include "fabric-node.h"
#include "fabric-switch.h"

#include "ns3/log.h"
#include "ns3/simulator.h"

#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("LinkFaultModel");
NS_OBJECT_ENSURE_REGISTERED(LinkFaultModel);

namespace
{
/// splitmix64: a small, fast, well-mixed generator; one state per port keeps streams independent.
uint64_t
NextRandom(uint64_t& state)
{
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
} // namespace

bool
PortFault::Corrupts(uint64_t wireBytes)
{
    if (log1mBer == 0.0)
    {
        return false;
    }
    // P(corrupt) = 1 - (1 - BER)^bits, computed without cancellation for tiny BERs
    const double p = -std::expm1(double(wireBytes) * 8.0 * log1mBer);
    const double u = double(NextRandom(rngState) >> 11) * 0x1.0p-53;
    return u < p;
}

std::string
LinkFaultModel::ActionNames()
{
    return "down,up,reroute,degrade,restore";
}

TypeId
LinkFaultModel::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::LinkFaultModel")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<LinkFaultModel>()
            .AddAttribute("RouteConvergenceDelay",
                          "Time from a link going down (or up) to the switches' equal-cost groups dropping "
                          "(or taking back) it, a time: failure detection plus routing-protocol convergence. "
                          "Until then packets routed to a dead link are lost (lossy links) or wait (credit "
                          "links).",
                          TimeValue(MicroSeconds(100)),
                          MakeTimeAccessor(&LinkFaultModel::m_convergenceDelay),
                          MakeTimeChecker(Time(0)));
    return tid;
}

LinkFaultModel::LinkFaultModel() = default;
LinkFaultModel::~LinkFaultModel() = default;

void
LinkFaultModel::Attach(std::vector<FabricNode*> nodes,
                       std::vector<int32_t> linkA,
                       std::vector<int32_t> linkB,
                       RerouteFn reroute)
{
    NS_ASSERT_MSG(m_nodes.empty(), "LinkFaultModel attached twice");
    m_nodes = std::move(nodes);
    m_reroute = std::move(reroute);
    m_linkA = std::move(linkA);
    m_linkB = std::move(linkB);
    const uint32_t n = uint32_t(m_nodes.size());
    // ports are numbered per node in link order (FabricBuilder::AddLinks)
    std::vector<uint32_t> next(n, 0);
    m_portA.resize(m_linkA.size());
    m_portB.resize(m_linkA.size());
    m_originalRateBps.resize(m_linkA.size());
    for (size_t i = 0; i < m_linkA.size(); ++i)
    {
        m_portA[i] = next[m_linkA[i]]++;
        m_portB[i] = next[m_linkB[i]]++;
    }
    m_state.resize(n);
    for (uint32_t id = 0; id < n; ++id)
    {
        FabricNode* node = m_nodes[id];
        NS_ASSERT_MSG(node->GetNPorts() == next[id], "node " << id << " has ports the link arrays do not name");
        m_state[id].resize(node->GetNPorts());
        for (uint32_t p = 0; p < node->GetNPorts(); ++p)
        {
            m_state[id][p].model = this;
            node->GetPort(p)->SetFault(&m_state[id][p]);
        }
    }
    for (size_t i = 0; i < m_linkA.size(); ++i)
    {
        m_originalRateBps[i] = PortsOf(uint32_t(i)).first->GetRateBps();
    }
}

std::pair<EgressPort*, EgressPort*>
LinkFaultModel::PortsOf(uint32_t link) const
{
    return {PeekPointer(m_nodes[m_linkA[link]]->GetPort(m_portA[link])),
            PeekPointer(m_nodes[m_linkB[link]]->GetPort(m_portB[link]))};
}

void
LinkFaultModel::ScheduleState(uint32_t link, int64_t atPs, bool up, int32_t fault)
{
    NS_ASSERT_MSG(link < GetNLinks(), "link " << link << " out of range");
    Simulator::Schedule(TimeStep(atPs) - Simulator::Now(), &LinkFaultModel::SetState, this, link, up, fault);
}

void
LinkFaultModel::ScheduleRate(uint32_t link, int64_t atPs, double rateBps, int32_t fault)
{
    NS_ASSERT_MSG(link < GetNLinks(), "link " << link << " out of range");
    Simulator::Schedule(TimeStep(atPs) - Simulator::Now(), &LinkFaultModel::SetRate, this, link, rateBps, fault);
}

void
LinkFaultModel::ScheduleBitErrorRate(uint32_t link, int64_t atPs, double ber, uint64_t seed, int32_t fault)
{
    NS_ASSERT_MSG(link < GetNLinks(), "link " << link << " out of range");
    Simulator::Schedule(TimeStep(atPs) - Simulator::Now(), &LinkFaultModel::SetBer, this, link, ber, seed, fault);
}

void
LinkFaultModel::SetState(uint32_t link, bool up, int32_t fault)
{
    const auto [a, b] = PortsOf(link);
    PortFault& fa = m_state[m_linkA[link]][m_portA[link]];
    PortFault& fb = m_state[m_linkB[link]][m_portB[link]];
    if (fa.down == !up)
    {
        return; // already in that state (overlapping faults on one link)
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    for (PortFault* f : {&fa, &fb})
    {
        f->down = !up;
        if (!up)
        {
            f->lastDownPs = nowPs;
        }
    }
    a->LinkStateChanged();
    b->LinkStateChanged();
    Log(fault, up ? Action::UP : Action::DOWN, int32_t(link), -1);
    Simulator::Schedule(m_convergenceDelay, &LinkFaultModel::Reconverge, this, fault);
}

void
LinkFaultModel::SetRate(uint32_t link, double rateBps, int32_t fault)
{
    const auto [a, b] = PortsOf(link);
    const bool restore = rateBps <= 0;
    const DataRate rate(restore ? m_originalRateBps[link] : uint64_t(rateBps));
    a->SetDataRate(rate);
    b->SetDataRate(rate);
    Log(fault, restore ? Action::RESTORE : Action::DEGRADE, int32_t(link), -1);
}

void
LinkFaultModel::SetBer(uint32_t link, double ber, uint64_t seed, int32_t fault)
{
    PortFault& fa = m_state[m_linkA[link]][m_portA[link]];
    PortFault& fb = m_state[m_linkB[link]][m_portB[link]];
    fa.log1mBer = fb.log1mBer = ber > 0 ? std::log1p(-ber) : 0.0;
    fa.rngState = seed * 2 + 1;
    fb.rngState = seed * 2 + 2;
    NextRandom(fa.rngState);
    NextRandom(fb.rngState);
    Log(fault, ber > 0 ? Action::DEGRADE : Action::RESTORE, int32_t(link), -1);
}

void
LinkFaultModel::Reconverge(int32_t fault)
{
    std::vector<std::vector<uint8_t>> dead(m_state.size());
    for (size_t id = 0; id < m_state.size(); ++id)
    {
        dead[id].resize(m_state[id].size());
        for (size_t p = 0; p < m_state[id].size(); ++p)
        {
            dead[id][p] = m_state[id][p].down ? 1 : 0;
        }
    }
    for (const uint32_t s : m_reroute(dead))
    {
        ++m_reroutes;
        Log(fault, Action::REROUTE, -1, int32_t(s));
    }
    // credit links lose nothing: what waits at a dead switch port takes the new routes
    for (size_t id = 0; id < m_state.size(); ++id)
    {
        auto* sw = dynamic_cast<FabricSwitch*>(m_nodes[id]);
        for (uint32_t p = 0; sw != nullptr && p < m_state[id].size(); ++p)
        {
            if (m_state[id][p].down && sw->GetPort(p)->GetFlowControl() == EgressPort::FlowControl::CREDIT)
            {
                sw->ForwardQueued(p);
            }
        }
    }
}

void
LinkFaultModel::Log(int32_t fault, Action action, int32_t link, int32_t node)
{
    m_logTimePs.push_back(Simulator::Now().GetTimeStep());
    m_logFault.push_back(fault);
    m_logAction.push_back(int8_t(action));
    m_logLink.push_back(link);
    m_logNode.push_back(node);
}

void
LinkFaultModel::GetActions(int64_t* timePs, int32_t* fault, int8_t* action, int32_t* link, int32_t* node) const
{
    std::copy(m_logTimePs.begin(), m_logTimePs.end(), timePs);
    std::copy(m_logFault.begin(), m_logFault.end(), fault);
    std::copy(m_logAction.begin(), m_logAction.end(), action);
    std::copy(m_logLink.begin(), m_logLink.end(), link);
    std::copy(m_logNode.begin(), m_logNode.end(), node);
}

void
LinkFaultModel::DoDispose()
{
    for (FabricNode* node : m_nodes)
    {
        for (uint32_t p = 0; node != nullptr && p < node->GetNPorts(); ++p)
        {
            node->GetPort(p)->SetFault(nullptr);
        }
    }
    m_nodes.clear();
    m_reroute = nullptr;
    Object::DoDispose();
}

} // namespace ns3
