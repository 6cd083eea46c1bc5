#include "egress-port.h"

#include "fabric-node.h"
#include "packet-pool.h"

#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("EgressPort");
NS_OBJECT_ENSURE_REGISTERED(EgressPort);

TypeId
EgressPort::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::EgressPort")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<EgressPort>()
            .AddAttribute("DataRate",
                          "Link rate (bit/s) at which wire bytes are serialized.",
                          DataRateValue(DataRate("100Gbps")),
                          MakeDataRateAccessor(&EgressPort::SetDataRate, &EgressPort::GetDataRate),
                          MakeDataRateChecker())
            .AddAttribute("PropagationDelay",
                          "One-way propagation delay of the link (time from last bit sent to last bit "
                          "received).",
                          TimeValue(NanoSeconds(1000)),
                          MakeTimeAccessor(&EgressPort::SetPropagationDelay,
                                           &EgressPort::GetPropagationDelay),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("LinkFlowControl",
                          "Link-level flow control: pfc (802.1Qbb PAUSE per priority, RoCE) or credit "
                          "(per-virtual-lane credits of 64-byte blocks, InfiniBand).",
                          EnumValue(FlowControl::PFC),
                          MakeEnumAccessor<FlowControl>(&EgressPort::m_flowControl),
                          MakeEnumChecker(FlowControl::PFC, "pfc", FlowControl::CREDIT, "credit"))
            .AddAttribute("MaxQueueBytes",
                          "Tail-drop limit on queued wire bytes over all priorities, in bytes "
                          "(0 = unlimited; switches with a shared-buffer MMU leave it at 0).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&EgressPort::m_maxQueueBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddTraceSource("Tx",
                            "A packet starts serialization on the link.",
                            MakeTraceSourceAccessor(&EgressPort::m_txTrace),
                            "ns3::FabricPacket::TracedCallback")
            .AddTraceSource("Drop",
                            "A packet is tail-dropped at enqueue.",
                            MakeTraceSourceAccessor(&EgressPort::m_dropTrace),
                            "ns3::FabricPacket::TracedCallback")
            .AddTraceSource("PfcPause",
                            "A priority of this port was paused (true) or resumed (false) by the peer.",
                            MakeTraceSourceAccessor(&EgressPort::m_pauseTrace),
                            "ns3::EgressPort::PauseCallback");
    return tid;
}

EgressPort::EgressPort()
    : m_txDoneEvent(Create<ReusableEvent<EgressPort, &EgressPort::TransmitDone>>(this)),
      m_deliverEvent(Create<ReusableEvent<EgressPort, &EgressPort::DeliverHead>>(this))
{
}

EgressPort::~EgressPort() = default;

void
EgressPort::Connect(FabricNode* owner,
                    uint32_t index,
                    FabricNode* peer,
                    uint32_t peerPort,
                    PacketPool* pool)
{
    m_owner = owner;
    m_index = index;
    m_peer = peer;
    m_peerPort = peerPort;
    m_pool = pool;
}

void
EgressPort::SetSource(PacketSource* source)
{
    m_source = source;
}

void
EgressPort::SetDataRate(DataRate rate)
{
    NS_ABORT_MSG_IF(rate.GetBitRate() == 0, "EgressPort DataRate must be positive");
    m_rate = rate;
    m_rateBps = rate.GetBitRate();
    constexpr uint64_t kBitPsPerByte = 8000000000000ull; // 8 bits x 1e12 ps/s
    m_psPerByte = kBitPsPerByte % m_rateBps == 0 ? int64_t(kBitPsPerByte / m_rateBps) : 0;
}

void
EgressPort::SetPropagationDelay(Time delay)
{
    m_delay = delay;
    m_delayPs = delay.GetPicoSeconds();
}

int64_t
EgressPort::SerializationPs(uint64_t wireBytes) const
{
    // Exact integer ceil(bits * 1e12 / rate): no drift over millions of packets. Common rates (25, 100,
    // 400 Gbps...) divide 8e12 exactly, and then one multiplication does it.
    if (m_psPerByte != 0)
    {
        return int64_t(wireBytes) * m_psPerByte;
    }
    const unsigned __int128 bitsTimesPs = static_cast<unsigned __int128>(wireBytes) * 8u * 1000000000000ull;
    return static_cast<int64_t>((bitsTimesPs + m_rateBps - 1) / m_rateBps);
}

void
EgressPort::Enqueue(FabricPacket* p)
{
    if (m_maxQueueBytes != 0 && m_queuedBytes + p->wireBytes > m_maxQueueBytes)
    {
        ++m_drops;
        m_dropTrace(p);
        m_pool->Release(p);
        return;
    }
    m_queues[p->priority].Push(p);
    m_nonEmptyMask |= uint8_t(1u << p->priority);
    m_queuedBytes += p->wireBytes;
    if (m_queuedBytes > m_peakQueueBytes)
    {
        m_peakQueueBytes = m_queuedBytes;
    }
    TrySend();
}

void
EgressPort::Wake()
{
    TrySend();
}

void
EgressPort::EnqueueControl(FabricPacket* p)
{
    m_control.Push(p);
    TrySend();
}

void
EgressPort::Pause(uint8_t prio, uint32_t quanta)
{
    if (quanta == 0)
    {
        if (m_pausedMask & (1u << prio))
        {
            m_pauseExpiry[prio].Cancel();
            EndPause(prio);
        }
        return;
    }
    ++m_pauseFrames[prio];
    if (!(m_pausedMask & (1u << prio)))
    {
        m_pausedMask |= uint8_t(1u << prio);
        m_pauseStartPs[prio] = Simulator::Now().GetTimeStep();
        m_pauseTrace(prio, true);
    }
    // A refresh restarts the pause timer (802.1Qbb): the pause lasts quanta x 512 bit times from now.
    m_pauseExpiry[prio].Cancel();
    m_pauseExpiry[prio] = Simulator::Schedule(TimeStep(SerializationPs(uint64_t(quanta) * 64)),
                                              &EgressPort::EndPause, this, prio);
}

void
EgressPort::EndPause(uint8_t prio)
{
    m_pausedMask &= uint8_t(~(1u << prio));
    m_pausedPs[prio] += Simulator::Now().GetTimeStep() - m_pauseStartPs[prio];
    m_pauseTrace(prio, false);
    TrySend();
}

int64_t
EgressPort::GetPausedPs(uint8_t prio) const
{
    int64_t total = m_pausedPs[prio];
    if (m_pausedMask & (1u << prio))
    {
        total += Simulator::Now().GetTimeStep() - m_pauseStartPs[prio];
    }
    return total;
}

void
EgressPort::TrySend()
{
    if (m_busy)
    {
        return;
    }
    FabricPacket* p = nullptr;
    if (!m_control.Empty())
    {
        p = m_control.Pop();
    }
    else
    {
        const uint32_t ready = m_nonEmptyMask & ~m_pausedMask;
        if (ready != 0)
        {
            const uint32_t prio = 31u - uint32_t(__builtin_clz(ready)); // highest ready priority
            p = m_queues[prio].Pop();
            m_queuedBytes -= p->wireBytes;
            if (m_queues[prio].Empty())
            {
                m_nonEmptyMask &= uint8_t(~(1u << prio));
            }
        }
        if (p == nullptr && m_source != nullptr)
        {
            p = m_source->PullPacket(m_index, m_pausedMask);
        }
        if (p == nullptr)
        {
            return;
        }
        m_owner->TransmitStarted(p, m_index);
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const int64_t serPs = SerializationPs(p->wireBytes);
    m_busy = true;
    ++m_txPackets;
    m_txBytes += p->wireBytes;
    ++p->hopCount;
    m_txTrace(p);
    if (p->hopCount == 1)
    {
        p->sendTimePs = nowPs;
    }
    p->dueTimePs = nowPs + serPs + m_delayPs;
    m_onWire.Push(p);
    Simulator::Schedule(TimeStep(serPs), m_txDoneEvent);
    if (!m_deliveryPending)
    {
        m_deliveryPending = true;
        Simulator::Schedule(TimeStep(serPs + m_delayPs), m_deliverEvent);
    }
}

void
EgressPort::TransmitDone()
{
    m_busy = false;
    TrySend();
}

void
EgressPort::DeliverHead()
{
    FabricPacket* p = m_onWire.Pop();
    if (!m_onWire.Empty())
    {
        const int64_t nowPs = Simulator::Now().GetTimeStep();
        Simulator::Schedule(TimeStep(m_onWire.Front()->dueTimePs - nowPs), m_deliverEvent);
    }
    else
    {
        m_deliveryPending = false;
    }
    m_peer->Receive(p, m_peerPort);
}

void
EgressPort::DoDispose()
{
    // Packets still queued or on the wire belong to the pool, which frees its blocks wholesale.
    m_owner = nullptr;
    m_peer = nullptr;
    m_source = nullptr;
    Object::DoDispose();
}

} // namespace ns3
