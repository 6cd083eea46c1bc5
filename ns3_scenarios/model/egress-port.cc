#include "egress-port.h"

#include "egress-queue-sampler.h"
#include "fabric-node.h"
#include "link-fault-model.h"
#include "packet-pool.h"
#include "partition-exchange.h"
#include "simulation-clock.h"

#include "ns3/boolean.h"
#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <algorithm>

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
                          "One-way propagation delay of the link, a time (from last bit sent to last bit "
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
            .AddAttribute("LinkLevelRetry",
                          "UEC link layer LLR (link level retry): the two ends of this hop number its frames and "
                          "the sender keeps them in a retry buffer; a frame the receiver finds corrupted (its CRC "
                          "fails) is NACKed, and the sender goes back N: it sends that frame and every frame sent "
                          "after it again, before anything new. Each corrupted frame costs the hop about its own "
                          "serialization plus a link round trip; nothing is lost end to end. Off: a corrupted "
                          "frame is dropped (pfc) or resent as InfiniBand's link layer does (credit).",
                          BooleanValue(false),
                          MakeBooleanAccessor(&EgressPort::m_llr),
                          MakeBooleanChecker())
            .AddAttribute("DataVls",
                          "Credit mode: number of data virtual lanes (a count); priority (service level) p uses lane "
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
            .AddTraceSource("PauseIgnored",
                            "A PAUSE frame for a priority the PFC watchdog disabled arrived and was ignored.",
                            MakeTraceSourceAccessor(&EgressPort::m_pauseIgnoredTrace),
                            "ns3::EgressPort::PriorityCallback")
            .AddTraceSource("CreditStall",
                            "A virtual lane with data waiting ran out of credits (true) or got them back.",
                            MakeTraceSourceAccessor(&EgressPort::m_stallTrace),
                            "ns3::EgressPort::PauseCallback");
    return tid;
}

EgressPort::EgressPort() = default;

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
        m_owner->NoteLoss(m_index, cosim::LossCause::TAIL_DROP);
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
    if (IsQueueDisabled(prio))
    {
        if (quanta != 0)
        {
            m_pauseIgnoredTrace(prio);
        }
        return;
    }
    if (quanta == 0)
    {
        if (m_pfcArbiter.IsPaused(prio))
        {
            m_pauseExpiry[prio].Cancel();
            EndPause(prio);
        }
        return;
    }
    if (m_pfcArbiter.OnXoff(prio, cosim::NowPs()))
    {
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
    m_pfcArbiter.Resume(prio, cosim::NowPs());
    m_pauseTrace(prio, false);
    TrySend();
}

void
EgressPort::DisableQueue(uint8_t prio)
{
    NS_ASSERT_MSG(m_flowControl == FlowControl::PFC, "only a PFC queue can be disabled by the PFC watchdog");
    NS_ASSERT_MSG(prio < kNumPriorities && !IsQueueDisabled(prio), "queue " << int(prio) << " is already disabled");
    m_disabledMask |= uint8_t(1u << prio);
    // Dropped while still paused: a buffer release below may resume senders and wake this very port,
    // which must not serve the queue being emptied.
    while (!m_queues[prio].Empty())
    {
        m_owner->DropQueued(PopQueue(prio), m_index);
    }
    if (m_pfcArbiter.IsPaused(prio))
    {
        m_pauseExpiry[prio].Cancel();
        EndPause(prio);
    }
}

void
EgressPort::EnableQueue(uint8_t prio)
{
    NS_ASSERT_MSG(IsQueueDisabled(prio), "queue " << int(prio) << " is not disabled");
    m_disabledMask &= uint8_t(~(1u << prio));
}

int64_t
EgressPort::GetPausedPs(uint8_t prio) const
{
    return m_pfcArbiter.GetPausedPs(prio, cosim::NowPs());
}

void
EgressPort::SetVlWeights(std::string weights)
{
    m_creditArbiter.SetWeights(weights);
}

std::string
EgressPort::GetVlWeights() const
{
    return m_creditArbiter.GetWeights();
}

void
EgressPort::InitCredits(uint32_t reservedBlocks, uint32_t capacityBlocks, uint32_t maxPacketBytes)
{
    m_creditArbiter.Init(reservedBlocks, capacityBlocks, maxPacketBytes, m_dataVls);
}

void
EgressPort::AddCredits(uint8_t vl, uint32_t blocks)
{
    m_creditArbiter.Add(vl, blocks);
    UpdateStalls();
    TrySend();
}

int64_t
EgressPort::GetCreditStallPs(uint8_t vl) const
{
    return m_creditArbiter.GetStallPs(vl, cosim::NowPs());
}

void
EgressPort::UpdateStalls()
{
    const uint8_t changed = m_creditArbiter.UpdateStalls(m_queues, m_source, cosim::NowPs());
    for (uint32_t bits = changed; bits != 0; bits &= bits - 1)
    {
        const uint8_t vl = uint8_t(__builtin_ctz(bits));
        m_stallTrace(vl, m_creditArbiter.IsStalled(vl));
    }
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

void
EgressPort::TrySend()
{
    if (m_busy | m_txHeld)
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
    const int prio = m_pfcArbiter.Pick(m_nonEmptyMask);
    if (prio >= 0)
    {
        p = PopQueue(uint8_t(prio));
    }
    else if (m_source != nullptr)
    {
        p = m_source->PullPacket(m_index, m_pfcArbiter.GetPausedMask());
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
    FabricPacket* p = nullptr;
    const int vl = m_creditArbiter.PickLane(m_queues, m_nonEmptyMask);
    if (vl >= 0)
    {
        p = PopQueue(uint8_t(vl));
        m_creditArbiter.Served(p->wireBytes);
    }
    else if (m_source != nullptr)
    {
        p = m_source->PullPacket(m_index, m_creditArbiter.BlockedPriorities());
    }
    if (p != nullptr)
    {
        m_creditArbiter.Charge(QueueOf(p->priority), CreditBlocks(p->wireBytes));
        HandOver(p);
    }
    if (m_creditArbiter.MayStallChange())
    {
        UpdateStalls(); // only a lane short of credits can start or end a stall
    }
    return p;
}

void
EgressPort::StartTransmission(FabricPacket* p)
{
    const int64_t nowPs = cosim::NowPs();
    const int64_t serPs = SerializationPs(p->wireBytes);
    m_busy = true;
    ++m_txPackets;
    const bool data = p->kind == PacketKind::DATA;
    m_txDataPackets += data;
    m_txDataPerPriority[p->priority] += data; // by priority: no lane division on the packet path
    m_txBytes += p->wireBytes;
    m_txTrace(p);
    if (p->sendTimePs < 0)
    {
        p->sendTimePs = nowPs;
    }
    const int64_t duePs = nowPs + serPs + m_delayPs;
    if (m_exchange != nullptr)
    {
        PostToPartition(p, duePs, serPs);
        return;
    }
    if (m_onWire.Empty())
    {
        m_wireHeadDuePs = duePs;
    }
    else
    {
        m_onWire.Back()->nextDueTimePs = duePs;
    }
    m_onWire.Push(p);
    cosim::ScheduleInPs(serPs, m_txDoneEvent);
    if (!m_deliveryPending)
    {
        m_deliveryPending = true;
        cosim::ScheduleInPs(serPs + m_delayPs, m_deliverEvent);
    }
}

void
EgressPort::PostToPartition(FabricPacket* p, int64_t duePs, int64_t serPs)
{
    cosim::ScheduleInPs(serPs, m_txDoneEvent);
    m_exchange->Post(duePs, m_peer->GetNodeId(), m_peerPort, p);
    m_pool->Release(p);
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
    if (m_fault != nullptr)
    {
        DeliverThroughFault();
        return;
    }
    NS_ASSERT_MSG(!m_onWire.Empty(), "delivery event with no packet on the wire");
    m_peer->Receive(PopWire(), m_peerPort);
}

FabricPacket*
EgressPort::PopWire()
{
    FabricPacket* p = m_onWire.Pop();
    if (!m_onWire.Empty())
    {
        m_wireHeadDuePs = p->nextDueTimePs;
        const int64_t nowPs = cosim::NowPs();
        cosim::ScheduleInPs(std::max<int64_t>(m_wireHeadDuePs - nowPs, 0), m_deliverEvent);
    }
    else
    {
        m_deliveryPending = false;
    }
    return p;
}

void
EgressPort::DeliverThroughFault()
{
    PortFault& f = *m_fault;
    if (m_onWire.Empty())
    {
        m_deliveryPending = false; // an LLR replay took back what was on the wire when this was scheduled
        return;
    }
    FabricPacket* p = m_onWire.Front();
    const int64_t nowPs = cosim::NowPs();
    if (m_wireHeadDuePs > nowPs)
    {
        // held back by a credit link's resend or outage, or sent by an LLR replay after this was scheduled
        cosim::ScheduleInPs(m_wireHeadDuePs - nowPs, m_deliverEvent);
        return;
    }
    if (m_flowControl == FlowControl::CREDIT)
    {
        // a credit link loses nothing: what was on the wire when it went down still arrives (the link
        // layer completes it), what is queued waits for the link or for new routes (FabricSwitch::ForwardQueued)
        if (p->kind == PacketKind::LINK_RESEND)
        {
            m_pool->Release(PopWire()); // its packet was delivered when this copy's time on the link ended
            return;
        }
        if (m_llrAwaitingReplay)
        {
            LlrDiscardHead();
            return;
        }
        if (f.Corrupts(p->wireBytes))
        {
            if (m_llr)
            {
                LlrCorrupted();
                return;
            }
            // link-level retransmission: the receiver's NAK comes back, the sender resends (LinkResendNak:
            // the copy takes the link for a serialization, before any queued packet); what follows on the
            // wire waits for it (in-order delivery). The arrival assumes the resend starts as the NAK arrives:
            // a packet being serialized then delays the copy's own time on the link, not this arrival.
            f.model->CountLinkRetransmission();
            m_owner->NoteLoss(m_index, cosim::LossCause::LINK_RETRANSMITTED);
            Simulator::Schedule(TimeStep(m_delayPs), &EgressPort::LinkResendNak, this, p->wireBytes);
            const int64_t againPs = nowPs + 2 * m_delayPs + SerializationPs(p->wireBytes);
            m_wireHeadDuePs = std::max(m_wireHeadDuePs, againPs);
            for (FabricPacket* q = p; q != nullptr; q = q->next)
            {
                q->nextDueTimePs = std::max(q->nextDueTimePs, againPs);
            }
            cosim::ScheduleInPs(againPs - nowPs, m_deliverEvent);
            return;
        }
        m_peer->Receive(PopWire(), m_peerPort);
        return;
    }
    // lossy link: a packet is lost if the link is down or went down while it was on the wire
    const int64_t sentPs = m_wireHeadDuePs - m_delayPs - SerializationPs(p->wireBytes);
    const bool lost = f.down || f.lastDownPs >= sentPs;
    if (!lost && m_llrAwaitingReplay)
    {
        LlrDiscardHead();
        return;
    }
    const bool corrupted = !lost && f.Corrupts(p->wireBytes);
    if (corrupted && m_llr)
    {
        LlrCorrupted();
        return;
    }
    p = PopWire();
    if (lost || corrupted)
    {
        lost ? f.model->CountFaultDrop() : f.model->CountBerDrop();
        m_owner->NoteLoss(m_index, lost ? cosim::LossCause::LINK_DOWN : cosim::LossCause::BIT_ERROR);
        m_pool->Release(p);
        return;
    }
    m_peer->Receive(p, m_peerPort);
}

void
EgressPort::LinkResendNak(uint32_t wireBytes)
{
    FabricPacket* copy = m_pool->Allocate();
    copy->kind = PacketKind::LINK_RESEND;
    copy->wireBytes = wireBytes;
    m_control.Push(copy);
    TrySend();
}

void
EgressPort::LlrCorrupted()
{
    NS_ASSERT_MSG(m_llr && !m_llrAwaitingReplay, "LLR replay started twice, or without LinkLevelRetry");
    m_fault->model->CountLlrRetry();
    m_owner->NoteLoss(m_index, cosim::LossCause::LINK_RETRANSMITTED);
    m_llrAwaitingReplay = true;
    LlrDiscardHead();
    cosim::ScheduleInPs(m_delayPs, m_llrNackEvent);
}

void
EgressPort::LlrDiscardHead()
{
    m_llrReplay.Push(PopWire()); // out of sequence at the receiver: dropped there, kept in the retry buffer here
}

void
EgressPort::LlrNackArrived()
{
    NS_ASSERT_MSG(m_llrAwaitingReplay && !m_llrReplay.Empty(), "LLR NACK without a corrupted frame");
    // Go back N: everything still on the wire (the frame being serialized included) was sent after the
    // corrupted frame, and the receiver will discard it; the scheduled arrival finds the wire empty or
    // holding the replay (DeliverThroughFault).
    while (!m_onWire.Empty())
    {
        m_llrReplay.Push(m_onWire.Pop());
    }
    m_llrAwaitingReplay = false;
    m_fault->model->CountLlrReplayedFrames(m_llrReplay.Packets());
    // Sent as link-level frames: before anything new, paused by nothing, their credits and buffer already
    // taken when they were first handed over.
    m_control.PrependAll(m_llrReplay);
    TrySend();
}

void
EgressPort::LinkStateChanged()
{
    if (m_flowControl != FlowControl::CREDIT)
    {
        return; // lossy links keep sending into the dead link: what they send is lost at delivery
    }
    m_txHeld = m_fault->down;
    if (!m_txHeld)
    {
        TrySend();
    }
}

void
EgressPort::TakeQueued(std::vector<FabricPacket*>& out)
{
    for (uint8_t q = 0; q < kNumPriorities; ++q)
    {
        while (!m_queues[q].Empty())
        {
            out.push_back(PopQueue(q));
        }
    }
    if (m_flowControl == FlowControl::CREDIT)
    {
        UpdateStalls();
    }
}

void
EgressPort::DoDispose()
{
    // Packets still queued or on the wire belong to the pool, which frees its blocks wholesale.
    m_owner = nullptr;
    m_peer = nullptr;
    m_source = nullptr;
    m_sampler = nullptr;
    m_fault = nullptr;
    Object::DoDispose();
}

} // namespace ns3
