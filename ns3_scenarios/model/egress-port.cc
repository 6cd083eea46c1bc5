#include "egress-port.h"

#include "egress-queue-sampler.h"
#include "fabric-node.h"
#include "packet-pool.h"

#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/string.h"

#include <sstream>
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
            .AddAttribute("DataVls",
                          "Credit mode: data virtual lanes; priority (service level) p uses lane "
                          "p mod DataVls. Link packets (credit updates) bypass the lanes, like VL15.",
                          UintegerValue(2),
                          MakeUintegerAccessor(&EgressPort::m_dataVls),
                          MakeUintegerChecker<uint32_t>(1, kNumPriorities))
            .AddAttribute("VlArbitrationWeights",
                          "Credit mode: weighted round robin between lanes with data and credits; comma-"
                          "separated weights per lane, in units of 64 bytes per turn (IB VLArbitration).",
                          StringValue("64,64,64,64,64,64,64,64"),
                          MakeStringAccessor(&EgressPort::SetVlWeights, &EgressPort::GetVlWeights),
                          MakeStringChecker())
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
                            "ns3::EgressPort::PauseCallback")
            .AddTraceSource("CreditStall",
                            "A virtual lane with data waiting ran out of credits (true) or got them back.",
                            MakeTraceSourceAccessor(&EgressPort::m_stallTrace),
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
    const uint8_t q = QueueOf(p->priority);
    m_queues[q].Push(p);
    m_nonEmptyMask |= uint8_t(1u << q);
    m_queuedBytes += p->wireBytes;
    NoteQueueChange();
    if (m_queuedBytes > m_peakQueueBytes)
    {
        m_peakQueueBytes = m_queuedBytes;
    }
    TrySend();
}

void
EgressPort::MarkForSampler()
{
    m_sampler->MarkDirty(m_samplerIndex);
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
    NS_ASSERT_MSG(m_pausedMask & (1u << prio), "priority " << int(prio) << " resumed without a pause");
    m_pausedMask &= uint8_t(~(1u << prio));
    m_pausedPs[prio] += Simulator::Now().GetTimeStep() - m_pauseStartPs[prio];
    m_pauseTrace(prio, false);
    TrySend();
}

void
EgressPort::SetVlWeights(std::string weights)
{
    std::stringstream in(weights);
    std::string item;
    m_vlWeight.fill(64);
    for (uint32_t vl = 0; vl < kNumPriorities && std::getline(in, item, ','); ++vl)
    {
        const unsigned long w = std::stoul(item);
        NS_ABORT_MSG_IF(w == 0 || w > 255, "VlArbitrationWeights entries are 1..255 (units of 64 bytes)");
        m_vlWeight[vl] = uint32_t(w);
    }
}

std::string
EgressPort::GetVlWeights() const
{
    std::string out;
    for (uint32_t vl = 0; vl < kNumPriorities; ++vl)
    {
        out += (vl ? "," : "") + std::to_string(m_vlWeight[vl]);
    }
    return out;
}

void
EgressPort::InitCredits(uint64_t peerBufferBytes, uint32_t maxPacketBytes)
{
    m_peerLaneBlocks = peerBufferBytes / kCreditBlockBytes;
    m_credits.fill(m_peerLaneBlocks);
    m_maxPacketBlocks = CreditBlocks(maxPacketBytes);
    m_lowCreditMask = m_credits[0] < m_maxPacketBlocks ? 0xff : 0;
    m_vlPrios.fill(0);
    for (uint32_t prio = 0; prio < kNumPriorities; ++prio)
    {
        m_vlPrios[prio % m_dataVls] |= uint8_t(1u << prio);
    }
}

void
EgressPort::AddCredits(uint8_t vl, uint32_t blocks)
{
    NS_ASSERT_MSG(m_credits[vl] + blocks <= m_peerLaneBlocks,
                  "lane " << int(vl) << " credited beyond the peer's buffer of " << m_peerLaneBlocks << " blocks");
    m_credits[vl] += blocks;
    if (m_credits[vl] >= m_maxPacketBlocks)
    {
        m_lowCreditMask &= uint8_t(~(1u << vl));
    }
    UpdateStalls();
    TrySend();
}

int64_t
EgressPort::GetCreditStallPs(uint8_t vl) const
{
    int64_t total = m_stallPs[vl];
    if (m_stalledMask & (1u << vl))
    {
        total += Simulator::Now().GetTimeStep() - m_stallStartPs[vl];
    }
    return total;
}

void
EgressPort::UpdateStalls()
{
    uint8_t stalled = 0;
    for (uint32_t vl = 0; vl < m_dataVls; ++vl)
    {
        if (!(m_lowCreditMask & (1u << vl)))
        {
            continue; // any packet fits: no stall on this lane, whatever waits
        }
        const PacketFifo& q = m_queues[vl];
        uint64_t need = q.Empty() ? 0 : CreditBlocks(q.Front()->wireBytes);
        if (need == 0 && m_source != nullptr)
        {
            need = m_source->HasPending(m_vlPrios[vl]) ? m_maxPacketBlocks : 0;
        }
        if (need > m_credits[vl])
        {
            stalled |= uint8_t(1u << vl);
        }
    }
    const uint8_t changed = stalled ^ m_stalledMask;
    if (changed == 0)
    {
        return;
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    for (uint32_t vl = 0; vl < m_dataVls; ++vl)
    {
        if (changed & (1u << vl))
        {
            const bool on = stalled & (1u << vl);
            if (on)
            {
                m_stallStartPs[vl] = nowPs;
            }
            else
            {
                m_stallPs[vl] += nowPs - m_stallStartPs[vl];
            }
            m_stallTrace(uint8_t(vl), on);
        }
    }
    m_stalledMask = stalled;
}

FabricPacket*
EgressPort::PopQueue(uint8_t q)
{
    NS_ASSERT_MSG(!m_queues[q].Empty() && (m_nonEmptyMask & (1u << q)),
                  "pop from queue " << int(q) << " that is empty or not in the non-empty mask");
    FabricPacket* p = m_queues[q].Pop();
    NS_ASSERT_MSG(m_queuedBytes >= p->wireBytes, "port queue byte count below its packets' bytes");
    m_queuedBytes -= p->wireBytes;
    if (m_queues[q].Empty())
    {
        m_nonEmptyMask &= uint8_t(~(1u << q));
    }
    NoteQueueChange();
    return p;
}

FabricPacket*
EgressPort::NextCreditPacket()
{
    uint32_t ready = 0;
    for (uint32_t bits = m_nonEmptyMask; bits != 0; bits &= bits - 1)
    {
        const uint32_t vl = uint32_t(__builtin_ctz(bits));
        if (CreditBlocks(m_queues[vl].Front()->wireBytes) <= m_credits[vl])
        {
            ready |= 1u << vl;
        }
    }
    if (ready == 0)
    {
        return nullptr;
    }
    if (!(ready & (1u << m_arbVl)) || m_arbBudgetBytes <= 0)
    {
        // Next lane in round-robin order that can send; it gets a fresh turn of its weight.
        uint32_t vl = m_arbVl;
        do
        {
            vl = (vl + 1) % m_dataVls;
        } while (!(ready & (1u << vl)));
        m_arbVl = uint8_t(vl);
        m_arbBudgetBytes = int64_t(m_vlWeight[vl]) * kCreditBlockBytes;
    }
    FabricPacket* p = PopQueue(m_arbVl);
    m_arbBudgetBytes -= p->wireBytes;
    return p;
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
        p = m_control.Pop(); // link-level frames: never paused, need no credits, hold no switch buffer
    }
    else
    {
        switch (m_flowControl)
        {
        case FlowControl::PFC:
            p = ArbitratePfc();
            break;
        case FlowControl::CREDIT:
            p = ArbitrateCredit();
            break;
        }
        if (p == nullptr)
        {
            return;
        }
    }
    StartTransmission(p);
}

void
EgressPort::HandOver(FabricPacket* p)
{
    m_busy = true; // first: TransmitStarted may queue control frames on this very port
    m_owner->TransmitStarted(p, m_index);
}

FabricPacket*
EgressPort::ArbitratePfc()
{
    FabricPacket* p = nullptr;
    const uint32_t ready = m_nonEmptyMask & ~m_pausedMask;
    if (ready != 0)
    {
        p = PopQueue(uint8_t(31u - uint32_t(__builtin_clz(ready)))); // strict priority: highest ready
    }
    else if (m_source != nullptr)
    {
        p = m_source->PullPacket(m_index, m_pausedMask);
    }
    if (p != nullptr)
    {
        HandOver(p);
    }
    return p;
}

FabricPacket*
EgressPort::ArbitrateCredit()
{
    FabricPacket* p = NextCreditPacket();
    if (p == nullptr && m_source != nullptr)
    {
        uint8_t blocked = 0; // priorities whose lane cannot take a full packet now
        for (uint32_t bits = m_lowCreditMask; bits != 0; bits &= bits - 1)
        {
            blocked |= m_vlPrios[__builtin_ctz(bits)];
        }
        p = m_source->PullPacket(m_index, blocked);
    }
    if (p != nullptr)
    {
        ChargeCredits(*p);
        HandOver(p);
    }
    if ((m_lowCreditMask | m_stalledMask) != 0)
    {
        UpdateStalls(); // only a lane short of credits can start or end a stall
    }
    return p;
}

void
EgressPort::ChargeCredits(const FabricPacket& p)
{
    const uint8_t vl = QueueOf(p.priority);
    const uint32_t blocks = CreditBlocks(p.wireBytes);
    NS_ASSERT_MSG(m_credits[vl] >= blocks,
                  "lane " << int(vl) << " sends " << blocks << " blocks holding " << m_credits[vl] << " credits");
    m_credits[vl] -= blocks;
    if (m_credits[vl] < m_maxPacketBlocks)
    {
        m_lowCreditMask |= uint8_t(1u << vl);
    }
}

void
EgressPort::StartTransmission(FabricPacket* p)
{
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const int64_t serPs = SerializationPs(p->wireBytes);
    m_busy = true;
    ++m_txPackets;
    m_txDataPackets += p->kind == PacketKind::DATA;
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
    NS_ASSERT_MSG(!m_onWire.Empty(), "delivery event with no packet on the wire");
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
    m_sampler = nullptr;
    Object::DoDispose();
}

} // namespace ns3
