#include "fabric-node.h"

#include "egress-port.h"
#include "packet-pool.h"

#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(FabricNode);

TypeId
FabricNode::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FabricNode")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddAttribute("VlBufferBytes",
                          "Credit mode: input buffer per port and virtual lane, advertised to the upstream "
                          "sender as credits of 64-byte blocks, in bytes.",
                          UintegerValue(256 * 1024),
                          MakeUintegerAccessor(&FabricNode::m_vlBufferBytes),
                          MakeUintegerChecker<uint64_t>(kCreditBlockBytes))
            .AddAttribute("CreditUpdateBytes",
                          "Credit mode: freed input buffer that triggers a credit update at once, in bytes, "
                          "capped at a quarter of VlBufferBytes (less is sent at the latest after "
                          "CreditUpdateInterval).",
                          UintegerValue(64 * 1024),
                          MakeUintegerAccessor(&FabricNode::m_creditUpdateBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("CreditUpdateInterval",
                          "Credit mode: longest time freed buffer waits before its credits are sent, a time.",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&FabricNode::m_creditUpdateInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("CreditPacketBytes",
                          "Credit mode: wire size of a flow-control (credit update) packet, in bytes.",
                          UintegerValue(8),
                          MakeUintegerAccessor(&FabricNode::m_creditPacketBytes),
                          MakeUintegerChecker<uint32_t>(1, 1 << 16));
    return tid;
}

void
FabricNode::ApplyCredit(FabricPacket* p, uint32_t inPort)
{
    m_ports[inPort]->AddCredits(p->priority, p->aux);
    m_pool->Release(p);
}

void
FabricNode::ReturnCredits(uint32_t port, uint8_t vl, uint32_t blocks)
{
    if (m_pendingCredits.size() != m_ports.size())
    {
        m_pendingCredits.resize(m_ports.size(), {});
        m_creditTimerArmed.resize(m_ports.size(), false);
    }
    uint32_t& pending = m_pendingCredits[port][vl];
    pending += blocks;
    // Never hold back more than a quarter of the lane: with a small buffer, a large CreditUpdateBytes
    // would otherwise starve the sender until the interval timer fires.
    const uint64_t trigger = std::min(m_creditUpdateBytes, std::max<uint64_t>(m_vlBufferBytes / 4, 1));
    if (uint64_t(pending) * kCreditBlockBytes >= trigger)
    {
        FlushCredits(port);
    }
    else if (!m_creditTimerArmed[port])
    {
        m_creditTimerArmed[port] = true;
        Simulator::Schedule(m_creditUpdateInterval, &FabricNode::CreditTimer, this, port);
    }
}

void
FabricNode::CreditTimer(uint32_t port)
{
    m_creditTimerArmed[port] = false;
    FlushCredits(port);
}

void
FabricNode::FlushCredits(uint32_t port)
{
    // The interval timer is not cancelled when a threshold flush comes first: it fires anyway and sends
    // what gathered since (sooner than needed, never later), which costs fewer events than rescheduling.
    for (uint8_t vl = 0; vl < kNumPriorities; ++vl)
    {
        uint32_t& pending = m_pendingCredits[port][vl];
        if (pending == 0)
        {
            continue;
        }
        // Incremental credits: links never lose packets here, so the absolute counters IB carries
        // (FCCL) to recover from a lost update are not needed.
        FabricPacket* c = m_pool->Allocate();
        c->kind = PacketKind::CREDIT;
        c->priority = vl;
        c->aux = pending;
        c->src = m_nodeId;
        c->dst = m_ports[port]->GetPeer()->GetNodeId();
        c->wireBytes = m_creditPacketBytes;
        pending = 0;
        ++m_creditPacketsSent;
        m_ports[port]->EnqueueControl(c);
    }
}

uint32_t
FabricNode::AddPort(Ptr<EgressPort> port)
{
    m_ports.push_back(port);
    return static_cast<uint32_t>(m_ports.size() - 1);
}

void
FabricNode::DropQueued(FabricPacket* p, uint32_t)
{
    m_pool->Release(p);
}

void
FabricNode::ApplyPause(FabricPacket* p, uint32_t inPort)
{
    m_ports[inPort]->Pause(p->priority, p->aux);
    m_pool->Release(p);
}

void
FabricNode::DoDispose()
{
    for (auto& port : m_ports)
    {
        port->Dispose();
    }
    m_ports.clear();
    Object::DoDispose();
}

} // namespace ns3
