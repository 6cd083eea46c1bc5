#include "deadlock-watchdog.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/callback.h"
#include "ns3/simulator.h"

#include <unordered_map>
#include <utility>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(DeadlockWatchdog);

TypeId
DeadlockWatchdog::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::DeadlockWatchdog")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<DeadlockWatchdog>()
            .AddAttribute("Enabled",
                          "Look for flow-control deadlocks (cycles of paused or credit-starved switch "
                          "queues) and end the run with status deadlock when one is found.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&DeadlockWatchdog::m_enabled),
                          MakeBooleanChecker())
            .AddAttribute("Interval",
                          "Time a blocked switch queue must go without sending a data packet to "
                          "count as stuck; also the period of the checks while any queue is blocked. "
                          "Default 1 ms: a thousand fabric round trips, so congestion (which moves "
                          "packets every few microseconds) is never mistaken for a standstill, and a "
                          "deadlock ends the run within two intervals.",
                          TimeValue(MilliSeconds(1)),
                          MakeTimeAccessor(&DeadlockWatchdog::m_interval),
                          MakeTimeChecker(NanoSeconds(1)));
    return tid;
}

void
DeadlockWatchdog::AddSwitch(Ptr<FabricNode> sw)
{
    for (uint32_t i = 0; i < sw->GetNPorts(); ++i)
    {
        m_ports.push_back({sw->GetPort(i), sw->GetNodeId(), i, -1, 0});
    }
}

void
DeadlockWatchdog::Start()
{
    if (!m_enabled)
    {
        return;
    }
    // The ports of one switch are consecutive, port 0 first: index them by the switch's node id.
    std::unordered_map<uint32_t, std::pair<int64_t, uint32_t>> byNode;
    for (std::size_t w = 0; w < m_ports.size(); ++w)
    {
        auto& entry = byNode.try_emplace(m_ports[w].node, int64_t(w), 0u).first->second;
        ++entry.second;
    }
    for (Watched& w : m_ports)
    {
        auto it = byNode.find(w.port->GetPeer()->GetNodeId());
        if (it != byNode.end())
        {
            w.peerFirst = it->second.first;
            w.peerCount = it->second.second;
        }
        w.port->TraceConnectWithoutContext("PfcPause", MakeCallback(&DeadlockWatchdog::OnBlockChange, this));
        w.port->TraceConnectWithoutContext("CreditStall", MakeCallback(&DeadlockWatchdog::OnBlockChange, this));
    }
    m_txSnapshot.assign(m_ports.size() * kNumPriorities, 0);
}

void
DeadlockWatchdog::OnBlockChange(uint8_t /*queue*/, bool blocked)
{
    if (blocked && !m_armed && !m_deadlocked)
    {
        Arm();
    }
}

void
DeadlockWatchdog::Arm()
{
    NS_ASSERT_MSG(!m_armed, "deadlock check armed twice");
    for (std::size_t w = 0; w < m_ports.size(); ++w)
    {
        for (uint8_t q = 0; q < kNumPriorities; ++q)
        {
            m_txSnapshot[w * kNumPriorities + q] = m_ports[w].port->GetTxDataPackets(q);
        }
    }
    m_armed = true;
    Simulator::Schedule(m_interval, &DeadlockWatchdog::Check, this);
}

bool
DeadlockWatchdog::IsBlocked(const EgressPort& port, uint8_t q)
{
    const PacketFifo& queue = port.GetQueue(q);
    if (queue.Empty())
    {
        return false;
    }
    switch (port.GetFlowControl())
    {
    case EgressPort::FlowControl::PFC:
        return port.GetPausedMask() & (1u << q);
    case EgressPort::FlowControl::CREDIT:
        return CreditBlocks(queue.Front()->wireBytes) > port.GetCredits(q);
    }
    return false;
}

bool
DeadlockWatchdog::HoldsFrom(const EgressPort& port, uint8_t q, uint32_t ingress)
{
    for (const FabricPacket* p = port.GetQueue(q).Front(); p != nullptr; p = p->next)
    {
        if (p->ingressPort == ingress)
        {
            return true;
        }
    }
    return false;
}

void
DeadlockWatchdog::Check()
{
    NS_ASSERT_MSG(m_armed, "deadlock check without Arm");
    ++m_checks;
    m_armed = false;
    bool anyBlocked = false;
    bool anyStuck = false;
    std::vector<uint8_t> stuck(m_ports.size() * kNumPriorities, 0);
    for (std::size_t w = 0; w < m_ports.size(); ++w)
    {
        const EgressPort& port = *m_ports[w].port;
        for (uint8_t q = 0; q < kNumPriorities; ++q)
        {
            if (IsBlocked(port, q))
            {
                // per queue: a port that keeps sending other priorities (or lanes) does not move this one
                const bool moved = port.GetTxDataPackets(q) != m_txSnapshot[w * kNumPriorities + q];
                anyBlocked = true;
                stuck[w * kNumPriorities + q] = !moved;
                anyStuck |= !moved;
            }
        }
    }
    if (anyStuck && FindCycle(stuck))
    {
        m_deadlocked = true;
        Simulator::Stop();
        return;
    }
    if (anyBlocked)
    {
        Arm();
    }
}

bool
DeadlockWatchdog::FindCycle(const std::vector<uint8_t>& stuck)
{
    constexpr uint32_t kP = kNumPriorities;
    enum Color : uint8_t
    {
        WHITE,
        GRAY, // on the DFS path
        BLACK,
    };
    std::vector<uint8_t> color(stuck.size(), WHITE);
    std::vector<std::pair<uint32_t, uint32_t>> path; // (vertex, next peer port to try)
    for (uint32_t root = 0; root < stuck.size(); ++root)
    {
        if (!stuck[root] || color[root] != WHITE)
        {
            continue;
        }
        color[root] = GRAY;
        path.assign(1, {root, 0});
        while (!path.empty())
        {
            const uint32_t u = path.back().first;
            const Watched& a = m_ports[u / kP];
            const uint8_t q = uint8_t(u % kP);
            const uint32_t k = path.back().second++;
            if (a.peerFirst < 0 || k >= a.peerCount)
            {
                color[u] = BLACK;
                path.pop_back();
                continue;
            }
            const uint32_t b = uint32_t(a.peerFirst + k) * kP + q;
            if (!stuck[b] || color[b] == BLACK || !HoldsFrom(*m_ports[b / kP].port, q, a.port->GetPeerPort()))
            {
                continue;
            }
            if (color[b] == GRAY)
            {
                std::size_t start = path.size();
                while (path[--start].first != b)
                {
                }
                m_cycle.clear();
                for (std::size_t i = start; i < path.size(); ++i)
                {
                    const Watched& e = m_ports[path[i].first / kP];
                    m_cycle.push_back({e.node, e.index, uint8_t(path[i].first % kP)});
                }
                return true;
            }
            color[b] = GRAY;
            path.emplace_back(b, 0);
        }
    }
    return false;
}

void
DeadlockWatchdog::DoDispose()
{
    m_ports.clear();
    Object::DoDispose();
}

} // namespace ns3
