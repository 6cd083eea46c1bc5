#include "host-nic.h"

#include "packet-pool.h"
#include "simulation-clock.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/enum.h"
#include "ns3/pointer.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <limits>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(HostNic);

TypeId
HostNic::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::HostNic")
            .SetParent<FabricNode>()
            .SetGroupName("Cosim")
            .AddConstructor<HostNic>()
            .AddAttribute("MtuBytes",
                          "Payload bytes carried by a full data packet, in bytes.",
                          UintegerValue(cosim::kDefaultMtuBytes),
                          MakeUintegerAccessor(&HostNic::m_mtuBytes),
                          MakeUintegerChecker<uint32_t>(1, 1 << 20))
            .AddAttribute("HeaderBytes",
                          "Header and framing bytes added to every data packet on the wire, in bytes. "
                          "Default 82 = RoCEv2 (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4) "
                          "plus preamble/SFD 8 and inter-frame gap 12, which also occupy the link.",
                          UintegerValue(cosim::kDefaultHeaderBytes),
                          MakeUintegerAccessor(&HostNic::m_headerBytes),
                          MakeUintegerChecker<uint32_t>(0, 1 << 16))
            .AddAttribute("ControlPacketBytes",
                          "Wire size of ACK and CNP packets (RoCEv2 headers + AETH + framing; 30 on InfiniBand), in bytes.",
                          UintegerValue(86),
                          MakeUintegerAccessor(&HostNic::m_ackBytes),
                          MakeUintegerChecker<uint32_t>(16, 1 << 16))
            .AddAttribute("AckIntervalBytes",
                          "The receiver sends one coalesced ACK per this many payload bytes of a flow "
                          "(and one at its last byte), in bytes.",
                          UintegerValue(64 * 1024),
                          MakeUintegerAccessor(&HostNic::SetAckIntervalBytes, &HostNic::GetAckIntervalBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("ControlPriority",
                          "Priority class of ACK and CNP packets (0..7).",
                          UintegerValue(7),
                          MakeUintegerAccessor(&HostNic::m_controlPriority),
                          MakeUintegerChecker<uint8_t>(0, 7))
            .AddAttribute("DcqcnEnabled",
                          "Run DCQCN: rate limiting on CNPs at the sender, CNP generation at the receiver. "
                          "Off: every queue pair sends at line rate (PFC alone keeps the fabric lossless).",
                          BooleanValue(true),
                          MakeBooleanAccessor(&HostNic::m_dcqcn),
                          MakeBooleanChecker())
            .AddAttribute("IbCcEnabled",
                          "InfiniBand congestion control: a receiver answers FECN-marked packets with a "
                          "BECN (sent as a CNP, one per marked packet), the sender raises "
                          "the flow's CCTI and spaces packets by the congestion-control table.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&HostNic::m_ibCc),
                          MakeBooleanChecker())
            .AddAttribute("IbCc",
                          "The IB congestion-control reaction and its parameters (used when IbCcEnabled).",
                          PointerValue(),
                          MakePointerAccessor(&HostNic::m_ibCcAlgo),
                          MakePointerChecker<IbCcControl>())
            .AddAttribute("CctiIncrease",
                          "IB congestion control: CCTI added per BECN (dimensionless); sets "
                          "IbCcControl::CctiIncrease of this NIC.",
                          UintegerValue(IbCcControl::kDefaultCctiIncrease),
                          MakeUintegerAccessor(&HostNic::SetCctiIncrease, &HostNic::GetCctiIncrease),
                          MakeUintegerChecker<uint32_t>(1, 1024))
            .AddAttribute("CctiLimit",
                          "IB congestion control: largest CCTI, the last table entry (dimensionless); sets "
                          "IbCcControl::CctiLimit of this NIC.",
                          UintegerValue(IbCcControl::kDefaultCctiLimit),
                          MakeUintegerAccessor(&HostNic::SetCctiLimit, &HostNic::GetCctiLimit),
                          MakeUintegerChecker<uint32_t>(1, 16383))
            .AddAttribute("CctiTimer",
                          "IB congestion control: recovery period, a time; CCTI drops by one each period. Sets "
                          "IbCcControl::CctiTimer of this NIC.",
                          TimeValue(NanoSeconds(IbCcControl::kDefaultCctiTimerNs)),
                          MakeTimeAccessor(&HostNic::SetCctiTimer, &HostNic::GetCctiTimer),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("CctGapStep",
                          "IB congestion control: inter-packet delay per CCTI step, a time (a linear "
                          "congestion-control table: entry i delays each packet by i x CctGapStep). Sets "
                          "IbCcControl::CctGapStep of this NIC.",
                          TimeValue(NanoSeconds(IbCcControl::kDefaultCctGapStepNs)),
                          MakeTimeAccessor(&HostNic::SetCctGapStep, &HostNic::GetCctGapStep),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("TelemetryCcEnabled",
                          "Switch-telemetry congestion control (HPCC-like, TelemetryRateControl): switches stamp "
                          "their egress utilization on data packets (LinkTelemetry::Enabled), the receiver echoes "
                          "it in its ACKs, the sender sets each queue pair's rate and window from the most "
                          "utilized hop. Replaces DCQCN (DcqcnEnabled must be off).",
                          BooleanValue(false),
                          MakeBooleanAccessor(&HostNic::m_telemetryCc),
                          MakeBooleanChecker())
            .AddAttribute("TelemetryCc",
                          "The telemetry congestion-control algorithm and its parameters (TelemetryCcEnabled).",
                          PointerValue(),
                          MakePointerAccessor(&HostNic::m_telemetryAlgo),
                          MakePointerChecker<TelemetryRateControl>())
            .AddAttribute("CnpInterval",
                          "Notification point: at most one CNP per flow per this interval, a time (the "
                          "paper's 50 us).",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&HostNic::SetCnpInterval, &HostNic::GetCnpInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("Dcqcn",
                          "The DCQCN reaction-point algorithm and its parameters.",
                          PointerValue(),
                          MakePointerAccessor(&HostNic::m_dcqcnAlgo),
                          MakePointerChecker<DcqcnRateControl>())
            .AddAttribute("RetransmitTimeout",
                          "Go-back-N: a queue pair with unacknowledged data that has neither sent nor seen "
                          "ACK progress for this long resends from its last acked PSN (tail loss, lost NAK). "
                          "Default 4 ms: above the deepest lossless queueing (a 32 MB switch buffer drains in "
                          "2.7 ms at 100 Gbps), so PFC pauses never cause a spurious timeout; near the 4.096 us "
                          "x 2^10 of RoCE's local ACK timeout. 0 = no timer (NAKs alone). Only on links "
                          "without credits: InfiniBand links cannot lose packets.",
                          TimeValue(MilliSeconds(4)),
                          MakeTimeAccessor(&HostNic::m_retransmitTimeout),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("QueuePairsPerConnection",
                          "QP scaling: queue pairs a NIC spreads the flows (messages) to one destination host "
                          "over, round robin in start order, as collective libraries do (NCCL_IB_QPS_PER_"
                          "CONNECTION); a flow's index is in its packets, for FabricSwitch::EcmpHashFields "
                          "five-tuple-qp (dimensionless, 1 = one QP per host pair).",
                          UintegerValue(1),
                          MakeUintegerAccessor(&HostNic::m_qpsPerConnection),
                          MakeUintegerChecker<uint32_t>(1, 65535))
            .AddAttribute("QpWindowBytes",
                          "Per-QP window: payload a queue pair may have sent and not yet acknowledged, in bytes "
                          "(0 = no window). One bandwidth-delay product keeps a lone flow at line rate while "
                          "bounding incast queues; at least MtuBytes and AckIntervalBytes (ACKs free it).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&HostNic::m_windowBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("ReorderTolerant",
                          "The receiver places data packets that arrive beyond a gap and counts them delivered "
                          "once the gap fills (InfiniBand with adaptive routing, RoCE NICs for packet "
                          "spraying), instead of dropping them and NAKing the gap (go-back-N).",
                          BooleanValue(false),
                          MakeBooleanAccessor(&HostNic::m_reorderTolerant),
                          MakeBooleanChecker())
            .AddAttribute("AdmissionEnabled",
                          "Receiver-driven admission: a flow sends only what its receiver cleared it to send. "
                          "It starts with a REQUEST; the receiver answers with GRANTs of AdmissionChunkBytes "
                          "each (ACK-sized, at ControlPriority) while the payload granted and not yet arrived, "
                          "over all its senders, stays within AdmissionChannels x AdmissionBufferBytes.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&HostNic::m_admission),
                          MakeBooleanChecker())
            .AddAttribute("AdmissionChannels",
                          "Admission: channels of a receiver (dimensionless); its in-flight budget is "
                          "AdmissionChannels x AdmissionBufferBytes.",
                          UintegerValue(2),
                          MakeUintegerAccessor(&HostNic::m_admissionChannels),
                          MakeUintegerChecker<uint32_t>(1, 1024))
            .AddAttribute("AdmissionBufferBytes",
                          "Admission: receive buffer per channel, in bytes (the collective library's buffer).",
                          UintegerValue(512 * 1024),
                          MakeUintegerAccessor(&HostNic::m_admissionBufferBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("AdmissionChunkBytes",
                          "Admission: payload one clear-to-send allows, in bytes (a buffer slot: buffer / 8 "
                          "steps by default); a multiple of MtuBytes.",
                          UintegerValue(64 * 1024),
                          MakeUintegerAccessor(&HostNic::m_admissionChunkBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("UecEnabled",
                          "Run Ultra Ethernet's transport (UEC 1.0) instead of RoCE's: reliable unordered "
                          "delivery contexts opened by their first packet, per-packet entropy chosen by the "
                          "sender, coalesced SACKs with a bitmap and a NACK per trimmed packet, selective "
                          "retransmission, NSCC and/or RCCC (UecCongestionControl). Needs switches hashing the "
                          "entropy (FabricSwitch::EcmpHashFields five-tuple-qp) and ReorderTolerant receivers; "
                          "set by the uec transport.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&HostNic::m_uec),
                          MakeBooleanChecker())
            .AddAttribute("Nscc",
                          "The NSCC congestion-control algorithm of UEC flows and its parameters (UecEnabled).",
                          PointerValue(),
                          MakePointerAccessor(&HostNic::m_nscc),
                          MakePointerChecker<NsccWindow>())
            .AddAttribute("UecEntropyCount",
                          "UEC: entropy values (EVs, the UDP source ports of the UEC header) a flow sprays its "
                          "packets over in turn; each hashes to its own path at every multi-path hop "
                          "(dimensionless, 1..65536; 1 = no spraying).",
                          UintegerValue(256),
                          MakeUintegerAccessor(&HostNic::m_entropyCount),
                          MakeUintegerChecker<uint32_t>(1, 65536))
            .AddAttribute("UecEntropyRing",
                          "UEC path feedback (REPS, recycled entropy packet spraying): entropies whose "
                          "packets were acknowledged without an ECN mark that a flow keeps for reuse, and "
                          "uses before exploring new ones (dimensionless; 0 = no recycling: oblivious "
                          "round-robin spraying over UecEntropyCount values).",
                          UintegerValue(32),
                          MakeUintegerAccessor(&HostNic::m_entropyRing),
                          MakeUintegerChecker<uint32_t>(0, 65536))
            .AddAttribute("UecEntropyHold",
                          "UEC path feedback: an entropy whose packet came back ECN-marked or trimmed is not "
                          "explored again for this long, a time (0 = explore it in its turn).",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&HostNic::m_entropyHold),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("UecRetransmitTimeout",
                          "UEC PDS retransmission timeout: a data packet neither SACKed nor NACKed this long "
                          "after it was sent is sent again (a packet dropped, not trimmed), a time. Default "
                          "200 us: well above a round trip through trim-bounded queues. Only on links without "
                          "credits: on credit links (CBFC) nothing is lost, a packet is only held by credit "
                          "stalls, for which no bound holds.",
                          TimeValue(MicroSeconds(200)),
                          MakeTimeAccessor(&HostNic::m_uecRetransmitTimeout),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("UecReorderWindow",
                          "UEC loss detection by reordering: when a SACK arrives, a packet still in flight that "
                          "was sent more than this before the acknowledged one is declared lost and sent again, "
                          "a time (0 = the retransmission timeout alone). Above the largest queueing difference "
                          "of two sprayed paths, which trimming bounds: on a two-tier fabric paths differ in "
                          "their leaf uplink and spine queues, two trim thresholds of 20 us (the last hop is "
                          "shared); a smaller value resends packets that were only late. Only on links without "
                          "credits (CBFC holds packets for credit, it never drops them).",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&HostNic::m_uecReorderWindow),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("UecAckEveryBytes",
                          "UEC PDS ACK coalescing (the receiver's \"ACK every N bytes\"): a receiver sends one "
                          "SACK per this much payload received of a flow, in bytes; at once for a packet with "
                          "the AR (ack request) flag, an ECN-marked one, one that opens or closes a gap in the "
                          "flow, a duplicate and the flow's last byte; a trimmed packet is NACKed at once. "
                          "Default 16 KiB (four 4 KiB packets) is an assumption: the specification leaves the "
                          "coalescing to the implementation. 1 = a SACK per data packet.",
                          UintegerValue(16384),
                          MakeUintegerAccessor(&HostNic::m_uecAckEveryBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("UecCongestionControl",
                          "UEC congestion control (UEC 1.0 congestion management sublayer): nscc (the sender's "
                          "window, the Nscc attribute), rccc (receiver credit congestion control: a sender "
                          "sends UecRcccInitialCreditBytes unsolicited, then what its receiver grants; the "
                          "receiver paces grants of UecRcccCreditBytes at its line rate, round-robin over its "
                          "senders) or both (a packet needs window room and credit).",
                          EnumValue(UecCc::NSCC),
                          MakeEnumAccessor<UecCc>(&HostNic::m_uecCc),
                          MakeEnumChecker(UecCc::NSCC, "nscc", UecCc::RCCC, "rccc", UecCc::BOTH, "both"))
            .AddAttribute("UecDeliveryMode",
                          "UEC PDS delivery mode of every flow (UEC 1.0 PDC type): rud (reliable unordered "
                          "delivery: packets sprayed over the paths by entropy, placed in any order, selective "
                          "retransmission) or rod (reliable ordered delivery: the PDC keeps one entropy value, "
                          "so one path and the order it gives; the receiver accepts only the next packet in "
                          "order, drops what arrives beyond a gap (a loss or a trimmed packet) and NACKs the "
                          "gap once, and the sender goes back to it and resends from there).",
                          EnumValue(UecDelivery::RUD),
                          MakeEnumAccessor<UecDelivery>(&HostNic::m_uecDelivery),
                          MakeEnumChecker(UecDelivery::RUD, "rud", UecDelivery::ROD, "rod"))
            .AddAttribute("UecRcccInitialCreditBytes",
                          "UEC RCCC initial credit: payload a sender may send before its receiver grants any, "
                          "in bytes (its first packet is always allowed: it opens the delivery context and "
                          "tells the receiver the message length). Default 4 KiB, an assumption.",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&HostNic::m_rcccInitialCreditBytes),
                          MakeUintegerChecker<uint64_t>(0))
            .AddAttribute("UecRcccCreditBytes",
                          "UEC RCCC credit per grant: payload one credit packet of a receiver allows its sender, "
                          "in bytes; the receiver sends one grant per this much payload's wire time at its "
                          "line rate. Default 16 KiB, an assumption.",
                          UintegerValue(16384),
                          MakeUintegerAccessor(&HostNic::m_rcccCreditBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddTraceSource("FlowFinish",
                            "The last payload byte of a flow arrived at this NIC (argument: flow id).",
                            MakeTraceSourceAccessor(&HostNic::m_flowFinishTrace),
                            "ns3::TracedValueCallback::Uint64")
            .AddTraceSource("Rate",
                            "DCQCN changed the rate of a flow's queue pair (flow id, rate in bit/s).",
                            MakeTraceSourceAccessor(&HostNic::m_rateTrace),
                            "ns3::HostNic::RateCallback");
    return tid;
}

HostNic::HostNic()
    : m_dcqcnAlgo(CreateObject<DcqcnRateControl>()),
      m_ibCcAlgo(CreateObject<IbCcControl>()),
      m_telemetryAlgo(CreateObject<TelemetryRateControl>()),
      m_nscc(CreateObject<NsccWindow>())
{
}

HostNic::~HostNic() = default;

void
HostNic::NotifyConstructionCompleted()
{
    m_constructed = true;
    FabricNode::NotifyConstructionCompleted();
}

void
HostNic::SetCnpInterval(Time interval)
{
    m_np.SetIntervalPs(interval.GetTimeStep());
}

Time
HostNic::GetCnpInterval() const
{
    return TimeStep(m_np.GetIntervalPs());
}

void
HostNic::SetAckIntervalBytes(uint64_t bytes)
{
    m_acks.SetIntervalBytes(bytes);
}

uint64_t
HostNic::GetAckIntervalBytes() const
{
    return m_acks.GetIntervalBytes();
}

void
HostNic::ForwardToIbCc(const std::string& name, const AttributeValue& value, bool atRegistrationDefault)
{
    if (m_constructed || !atRegistrationDefault)
    {
        m_ibCcAlgo->SetAttribute(name, value);
    }
}

void
HostNic::SetCctiIncrease(uint32_t increase)
{
    ForwardToIbCc("CctiIncrease", UintegerValue(increase), increase == IbCcControl::kDefaultCctiIncrease);
}

uint32_t
HostNic::GetCctiIncrease() const
{
    return uint32_t(IbCcAttribute<UintegerValue>("CctiIncrease").Get());
}

void
HostNic::SetCctiLimit(uint32_t limit)
{
    ForwardToIbCc("CctiLimit", UintegerValue(limit), limit == IbCcControl::kDefaultCctiLimit);
}

uint32_t
HostNic::GetCctiLimit() const
{
    return uint32_t(IbCcAttribute<UintegerValue>("CctiLimit").Get());
}

void
HostNic::SetCctiTimer(Time period)
{
    ForwardToIbCc("CctiTimer", TimeValue(period), period == NanoSeconds(IbCcControl::kDefaultCctiTimerNs));
}

Time
HostNic::GetCctiTimer() const
{
    return IbCcAttribute<TimeValue>("CctiTimer").Get();
}

void
HostNic::SetCctGapStep(Time step)
{
    ForwardToIbCc("CctGapStep", TimeValue(step), step == NanoSeconds(IbCcControl::kDefaultCctGapStepNs));
}

Time
HostNic::GetCctGapStep() const
{
    return IbCcAttribute<TimeValue>("CctGapStep").Get();
}

void
HostNic::SetFlowTable(FlowTable* table)
{
    m_flows = table;
}

double
HostNic::LineRateBps() const
{
    return double(PortAt(0)->GetRateBps());
}

double
HostNic::GetFlowRateBps(uint64_t flowId) const
{
    const uint32_t qp = SenderQueuePair(flowId);
    return qp == FlowTable::kNoQueuePair ? LineRateBps() : m_qps[qp].cc.rateBps;
}

int64_t
HostNic::GetFlowPacingMarkPs(uint64_t flowId) const
{
    const uint32_t qp = SenderQueuePair(flowId);
    return qp == FlowTable::kNoQueuePair ? 0 : m_qps[qp].nextSendPs;
}

uint32_t
HostNic::GetFlowCcti(uint64_t flowId) const
{
    const uint32_t qp = SenderQueuePair(flowId);
    return qp == FlowTable::kNoQueuePair ? 0 : m_qps[qp].ibCc.ccti;
}

bool
HostNic::IsSending(uint64_t flowId) const
{
    const uint32_t qp = SenderQueuePair(flowId);
    return qp != FlowTable::kNoQueuePair && !m_qps[qp].done && !m_qps[qp].frozen &&
           m_flows->bytes[flowId].sentBytes < m_qps[qp].sizeBytes;
}

void
HostNic::FreezeFlow(uint64_t flowId)
{
    NS_ASSERT_MSG(IsSending(flowId), "flow " << flowId << " cannot be frozen: it is not sending from node " << m_nodeId);
    const uint32_t qpIndex = SenderQueuePair(flowId);
    QueuePair& qp = m_qps[qpIndex];
    NS_ASSERT_MSG(qp.activeSlot != kNotActive && m_active[qp.activeSlot].qp == qpIndex,
                  "flow " << flowId << " is sending but its queue pair is not active");
    NS_ASSERT_MSG(m_activeAtPrio[qp.priority] > 0, "priority " << int(qp.priority) << " has no active QP");
    // The QP keeps its place in the round robin (a pacing mark that never comes skips it), so that the
    // order in which its flows are served after the span is the order they had before it.
    --m_activeAtPrio[qp.priority];
    SetNextSend(qp, std::numeric_limits<int64_t>::max());
    qp.frozen = true;
    qp.increaseHeld = qp.increaseTimer.IsPending();
    qp.alphaHeld = qp.alphaTimer.IsPending();
    qp.increaseTimer.Cancel();
    qp.alphaTimer.Cancel();
    qp.cctiHeld = false;
}

void
HostNic::ThawFlow(uint64_t flowId, uint64_t creditBytes)
{
    const uint32_t qpIndex = SenderQueuePair(flowId);
    NS_ASSERT_MSG(qpIndex != FlowTable::kNoQueuePair && m_qps[qpIndex].frozen, "flow " << flowId << " is not frozen");
    QueuePair& qp = m_qps[qpIndex];
    FlowTable::Bytes& b = m_flows->bytes[flowId];
    NS_ASSERT_MSG(creditBytes == 0 || (b.rcvdBytes == b.sentBytes && b.sentBytes + creditBytes < qp.sizeBytes),
                  "flow " << flowId << ": a credit needs every sent byte delivered and must leave a packet to send");
    const int64_t nowPs = cosim::NowPs();
    if (creditBytes != 0)
    {
        b.sentBytes += creditBytes;
        b.rcvdBytes += creditBytes;
        qp.gbn.ackedBytes = std::max(qp.gbn.ackedBytes, b.sentBytes);
        UpdateSendLimit(qp);
    }
    qp.gbn.lastActivityPs = nowPs;
    qp.frozen = false;
    SetNextSend(qp, nowPs);
    ++m_activeAtPrio[qp.priority];
    if (qp.increaseHeld)
    {
        qp.increaseTimer =
            Simulator::Schedule(m_dcqcnAlgo->GetRateIncreasePeriod(), &HostNic::IncreaseTimer, this, qpIndex);
    }
    if (qp.alphaHeld)
    {
        qp.alphaTimer = Simulator::Schedule(m_dcqcnAlgo->GetAlphaUpdatePeriod(), &HostNic::AlphaTimer, this, qpIndex);
    }
    if (qp.cctiHeld)
    {
        Simulator::Schedule(m_ibCcAlgo->GetRecoveryPeriod(), &HostNic::CctiTimer, this, qpIndex);
    }
    qp.increaseHeld = qp.alphaHeld = qp.cctiHeld = false;
}

void
HostNic::WakeSender()
{
    PortAt(0)->Wake();
}

void
HostNic::AddFlow(uint64_t flowId)
{
    NS_ABORT_MSG_UNLESS(m_flows->src[flowId] == m_nodeId, "flow added to a NIC that is not its source");
    const int64_t delayPs = m_flows->startPs[flowId] - cosim::NowPs();
    Simulator::Schedule(TimeStep(delayPs > 0 ? delayPs : 0), &HostNic::StartFlow, this, flowId);
}

void
HostNic::StartFlow(uint64_t flowId)
{
    if (m_flows->bytes[flowId].sizeBytes == 0)
    {
        // An empty flow is delivered the moment it starts: nothing crosses the wire.
        FinishFlow(flowId);
        return;
    }
    NS_ABORT_MSG_IF(m_windowBytes != 0 && (m_windowBytes < m_mtuBytes || m_windowBytes < m_acks.GetIntervalBytes()),
                    "HostNic::QpWindowBytes " << m_windowBytes << " B is below MtuBytes or AckIntervalBytes: no "
                    "ACK would ever open it");
    NS_ABORT_MSG_IF(m_admission && m_admissionChunkBytes % m_mtuBytes != 0,
                    "HostNic::AdmissionChunkBytes " << m_admissionChunkBytes << " B is not a multiple of MtuBytes");
    if (m_qpsPerConnection > 1)
    {
        AssignQueuePair(flowId);
    }
    QueuePair qp{};
    qp.activeSlot = kNotActive;
    qp.flowId = flowId;
    qp.sizeBytes = m_flows->bytes[flowId].sizeBytes;
    qp.dst = m_flows->dst[flowId];
    qp.connectionQp = m_flows->qp[flowId];
    qp.priority = m_flows->priority[flowId];
    qp.cc = m_dcqcnAlgo->Initial(LineRateBps());
    qp.grantedBytes = m_admission ? 0 : kNoSendLimit;
    if (m_telemetryCc)
    {
        NS_ABORT_MSG_IF(m_dcqcn || m_ibCc || m_uec, "HostNic::TelemetryCcEnabled replaces DCQCN on RoCE: switch "
                        "DcqcnEnabled, IbCcEnabled and UecEnabled off");
        qp.tcc = m_telemetryAlgo->Initial(LineRateBps());
    }
    UpdateSendLimit(qp);
    m_flows->senderQp[flowId] = static_cast<uint32_t>(m_qps.size());
    m_qps.push_back(qp);
    Activate(m_flows->senderQp[flowId]);
    ++m_activeAtPrio[m_flows->priority[flowId]];
    if (m_uec)
    {
        NS_ABORT_MSG_IF(m_admission || m_windowBytes != 0,
                        "HostNic::UecEnabled runs NSCC windows: switch AdmissionEnabled and QpWindowBytes off");
        NS_ABORT_MSG_IF(qp.sizeBytes / m_mtuBytes >= std::numeric_limits<uint32_t>::max(),
                        "flow " << flowId << " has more packets than a UEC acknowledgement can count");
        m_entropy.Configure(m_entropyCount, m_entropyRing, m_entropyHold.GetTimeStep());
        auto u = std::make_unique<UecFlow>();
        u->pds.Configure(qp.sizeBytes, m_mtuBytes);
        u->cc = m_nscc->Initial(LineRateBps(), m_mtuBytes);
        u->entropy = m_entropy.Initial(flowId);
        u->creditBytes = RcccInitialCredit(qp.sizeBytes);
        m_uecFlows.push_back(std::move(u));
    }
    m_gbnTx.SetTimeoutPs(m_retransmitTimeout.GetTimeStep());
    m_rtoOn = m_gbnTx.GetTimeoutPs() > 0 && PortAt(0)->GetFlowControl() != EgressPort::FlowControl::CREDIT;
    m_uecLossless = PortAt(0)->GetFlowControl() == EgressPort::FlowControl::CREDIT;
    if (m_admission)
    {
        SendControl(PacketKind::REQUEST, flowId, m_flows->dst[flowId], m_flows->bytes[flowId].sizeBytes);
    }
    if (!m_flows->onStart.IsNull())
    {
        m_flows->onStart(flowId);
    }
    PortAt(0)->Wake();
}

void
HostNic::AssignQueuePair(uint64_t flowId)
{
    uint16_t& next = m_nextQp[m_flows->dst[flowId]];
    m_flows->qp[flowId] = next;
    next = uint16_t((next + 1u) % m_qpsPerConnection);
}

void
HostNic::UpdateSendLimit(QueuePair& qp)
{
    qp.limitBytes = qp.grantedBytes;
    if (m_windowBytes != 0)
    {
        qp.limitBytes = std::min(qp.limitBytes, qp.gbn.ackedBytes + m_windowBytes);
    }
    if (m_telemetryCc)
    {
        // never below one packet and one ACK interval, or no ACK would reopen it
        const uint64_t floor = std::max<uint64_t>(m_mtuBytes, m_acks.GetIntervalBytes());
        qp.limitBytes = std::min(qp.limitBytes,
                                 qp.gbn.ackedBytes + std::max(floor, m_telemetryAlgo->WindowBytes(qp.cc.rateBps)));
    }
    if (qp.activeSlot != kNotActive)
    {
        m_active[qp.activeSlot].limited = qp.limitBytes != kNoSendLimit;
    }
}

bool
HostNic::WithinSendLimit(const QueuePair& qp) const
{
    const uint64_t sent = m_flows->bytes[qp.flowId].sentBytes;
    const uint64_t left = qp.sizeBytes - sent;
    return sent + std::min<uint64_t>(left, m_mtuBytes) <= qp.limitBytes;
}

FabricPacket*
HostNic::PullPacket(uint32_t /*port*/, uint8_t pausedMask)
{
    const std::size_t n = m_active.size();
    if (n == 0)
    {
        return nullptr;
    }
    const int64_t nowPs = cosim::NowPs();
    if (m_uec)
    {
        return PullUec(pausedMask, nowPs);
    }
    int64_t earliestPs = std::numeric_limits<int64_t>::max();
    // the round robin from m_next, wrapping without a division per queue pair
    std::size_t idx = m_next < n ? m_next : m_next % n;
    for (std::size_t k = 0; k < n; ++k, idx = idx + 1 == n ? 0 : idx + 1)
    {
        const ActiveQp& a = m_active[idx];
        if (pausedMask & (1u << a.priority))
        {
            continue;
        }
        if (a.limited && !WithinSendLimit(m_qps[a.qp]))
        {
            continue; // held back by its grant or window until a GRANT or an ACK arrives
        }
        if (a.nextSendPs > nowPs)
        {
            earliestPs = std::min(earliestPs, a.nextSendPs);
            continue;
        }
        QueuePair& qp = m_qps[a.qp];
        FabricPacket* p = MakeDataPacket(qp);
        ChargeRate(qp, *p, nowPs);
        NoteSent(qp, *p, nowPs);
        if (m_windowBytes != 0)
        {
            m_peakInflightBytes =
                std::max(m_peakInflightBytes, m_flows->bytes[qp.flowId].sentBytes + p->payloadBytes - qp.gbn.ackedBytes);
        }
        Advance(qp, idx, *p);
        return p;
    }
    SchedulePaceWake(earliestPs, nowPs);
    return nullptr;
}

FabricPacket*
HostNic::MakeDataPacket(const QueuePair& qp)
{
    const uint64_t sent = m_flows->bytes[qp.flowId].sentBytes;
    NS_ASSERT_MSG(sent < qp.sizeBytes, "flow " << qp.flowId << " has no payload left but its queue pair is active");
    const uint64_t remaining = qp.sizeBytes - sent;
    const uint32_t payload = remaining < m_mtuBytes ? static_cast<uint32_t>(remaining) : m_mtuBytes;
    FabricPacket* p = m_pool->Allocate();
    p->flowId = qp.flowId;
    p->seqBytes = sent;
    p->src = m_nodeId;
    p->dst = qp.dst;
    p->payloadBytes = payload;
    p->wireBytes = payload + m_headerBytes;
    p->kind = PacketKind::DATA;
    p->priority = qp.priority;
    p->qp = qp.connectionQp;
    return p;
}

void
HostNic::ChargeRate(QueuePair& qp, const FabricPacket& p, int64_t nowPs)
{
    const double line = LineRateBps();
    if (m_dcqcn && m_dcqcnAlgo->OnBytesSent(qp.cc, p.wireBytes, line))
    {
        m_rateTrace(qp.flowId, qp.cc.rateBps);
    }
    // Below line rate, space packets by their size at the QP's rate. At line rate the port itself paces,
    // and no timer is needed. IB congestion control adds the CCT entry's delay to the serialization.
    SetNextSend(qp, qp.ibCc.ccti != 0 ? nowPs + PortAt(0)->SerializationPs(p.wireBytes) + m_ibCcAlgo->GapPs(qp.ibCc)
                    : qp.cc.rateBps < line ? nowPs + int64_t(double(p.wireBytes) * 8e12 / qp.cc.rateBps)
                                           : nowPs);
}

void
HostNic::NoteSent(QueuePair& qp, const FabricPacket& p, int64_t nowPs)
{
    const bool again = p.seqBytes < qp.gbn.resendBelowBytes;
    m_retransmittedPackets += again;
    m_retransmittedBytes += again ? p.payloadBytes : 0;
    if (again)
    {
        NoteLoss(0, cosim::LossCause::RETRANSMITTED);
    }
    qp.gbn.lastActivityPs = nowPs;
}

void
HostNic::Advance(QueuePair& qp, std::size_t idx, const FabricPacket& p)
{
    m_flows->bytes[qp.flowId].sentBytes += p.payloadBytes;
    if (m_flows->bytes[qp.flowId].sentBytes != qp.sizeBytes)
    {
        m_next = idx + 1;
        return;
    }
    NS_ASSERT_MSG(m_activeAtPrio[p.priority] > 0, "priority " << int(p.priority) << " has no active QP");
    qp.done = true;
    qp.increaseTimer.Cancel();
    qp.alphaTimer.Cancel();
    --m_activeAtPrio[p.priority];
    // A QP that still sends cannot time out (sending restarts the timeout), so the retransmission timer
    // starts only now, keeping the event queue short while flows run.
    if (m_rtoOn && !qp.gbn.timerPending)
    {
        ArmRetransmitTimer(m_active[idx].qp, m_gbnTx.GetTimeoutPs());
    }
    Deactivate(idx); // the QP swapped in is served next
    m_next = idx;
}

void
HostNic::Activate(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    NS_ASSERT_MSG(qp.activeSlot == kNotActive, "queue pair " << qpIndex << " is in the round robin already");
    qp.activeSlot = static_cast<uint32_t>(m_active.size());
    m_active.push_back(ActiveQp{qp.nextSendPs, qpIndex, qp.priority, qp.limitBytes != kNoSendLimit});
}

void
HostNic::Deactivate(std::size_t idx)
{
    NS_ASSERT_MSG(idx < m_active.size(), "round-robin entry " << idx << " beyond " << m_active.size());
    m_qps[m_active[idx].qp].activeSlot = kNotActive;
    m_active[idx] = m_active.back();
    m_active.pop_back();
    if (idx < m_active.size())
    {
        m_qps[m_active[idx].qp].activeSlot = static_cast<uint32_t>(idx);
    }
}

void
HostNic::SchedulePaceWake(int64_t earliestPs, int64_t nowPs)
{
    if (earliestPs != std::numeric_limits<int64_t>::max() && (m_paceAtPs < 0 || earliestPs < m_paceAtPs))
    {
        m_paceEvent.Cancel();
        m_paceAtPs = earliestPs;
        m_paceEvent = Simulator::Schedule(TimeStep(earliestPs - nowPs), &HostNic::PaceWake, this);
    }
}

bool
HostNic::HasPending(uint8_t prioMask) const
{
    for (uint32_t prio = 0; prio < kNumPriorities; ++prio)
    {
        if ((prioMask & (1u << prio)) && m_activeAtPrio[prio] != 0)
        {
            return true;
        }
    }
    return false;
}

void
HostNic::PaceWake()
{
    m_paceAtPs = -1;
    PortAt(0)->Wake();
}

void
HostNic::SendControl(PacketKind kind, uint64_t flowId, uint32_t to, uint64_t seqBytes, uint32_t aux)
{
    FabricPacket* c = m_pool->Allocate();
    c->kind = kind;
    c->flowId = flowId;
    c->src = m_nodeId;
    c->dst = to;
    c->seqBytes = seqBytes;
    c->aux = aux;
    c->wireBytes = m_ackBytes;
    c->priority = m_controlPriority;
    c->qp = m_flows->qp[flowId];
    c->pathUtilization = m_echoUtilization;
    PortAt(0)->Enqueue(c);
}

void
HostNic::FinishFlow(uint64_t flowId)
{
    m_flows->finishPs[flowId] = cosim::NowPs();
    ++m_flows->completed;
    m_flowFinishTrace(flowId);
    if (!m_flows->onFinish.IsNull())
    {
        m_flows->onFinish(flowId);
    }
}

void
HostNic::Receive(FabricPacket* p, uint32_t inPort)
{
    switch (p->kind)
    {
    case PacketKind::PAUSE:
        ApplyPause(p, inPort);
        return;
    case PacketKind::CREDIT:
        ApplyCredit(p, inPort);
        return;
    case PacketKind::DATA:
        OnData(*p);
        break;
    case PacketKind::ACK:
        OnAck(*p);
        break;
    case PacketKind::CNP:
        OnCnp(*p);
        break;
    case PacketKind::REQUEST:
        OnRequest(*p);
        break;
    case PacketKind::GRANT:
        OnGrant(*p);
        break;
    case PacketKind::SACK:
        OnSack(*p);
        break;
    case PacketKind::NACK:
        OnNack(*p);
        break;
    }
    Consume(p, inPort);
}

void
HostNic::Consume(FabricPacket* p, uint32_t inPort)
{
    if (PortAt(inPort)->GetFlowControl() == EgressPort::FlowControl::CREDIT)
    {
        // The NIC consumes what it receives at once: the buffer it occupied is free again.
        PassInput(inPort, PortAt(inPort)->QueueOf(p->priority), CreditBlocks(p->wireBytes));
    }
    m_pool->Release(p);
}

// Inlined into both receive paths: the in-order one runs per data packet.
inline __attribute__((always_inline)) void
HostNic::DeliverInOrder(uint64_t flowId, uint32_t src, uint64_t bytes)
{
    const uint64_t rcvd = (m_flows->bytes[flowId].rcvdBytes += bytes);
    NS_ASSERT_MSG(rcvd <= m_flows->bytes[flowId].sizeBytes, "flow " << flowId << " received more than its size");
    const bool last = rcvd == m_flows->bytes[flowId].sizeBytes;
    if (m_acks.OnData(m_flows->bytes[flowId].unackedBytes, uint32_t(std::min<uint64_t>(bytes, std::numeric_limits<uint32_t>::max())), last))
    {
        SendControl(PacketKind::ACK, flowId, src, rcvd);
    }
    if (last)
    {
        DcqcnNotificationPoint::Forget(m_flows->lastCnpPs[flowId]);
        FinishFlow(flowId);
    }
}

void
HostNic::OnData(const FabricPacket& p)
{
    const uint64_t flowId = p.flowId;
    const int64_t nowPs = cosim::NowPs();
    m_echoUtilization = p.pathUtilization;
    if (p.ecnMarked)
    {
        OnMarked(p, nowPs); // congestion is signalled whether or not the packet is delivered
    }
    if (m_uec)
    {
        OnDataUec(p, nowPs);
        return;
    }
    if (m_reorderTolerant)
    {
        OnDataAnyOrder(p, nowPs);
        return;
    }
    const uint64_t expected = m_flows->bytes[flowId].rcvdBytes;
    const GoBackNReceiver::Verdict verdict = m_gbnRx.OnData(flowId, p.seqBytes, expected);
    if (verdict != GoBackNReceiver::Verdict::DELIVER)
    {
        OnOutOfOrder(p, verdict, expected);
        return;
    }
    ++m_latency[LatencyBucket(uint64_t(nowPs - p.sendTimePs))];
    DeliverInOrder(flowId, p.src, p.payloadBytes);
    if (m_admission)
    {
        AdmitArrived(p.payloadBytes);
    }
}

void
HostNic::OnDataAnyOrder(const FabricPacket& p, int64_t nowPs)
{
    const uint64_t flowId = p.flowId;
    const uint64_t expected = m_flows->bytes[flowId].rcvdBytes;
    switch (m_reorder.OnData(flowId, p.seqBytes, expected, m_mtuBytes))
    {
    case ReorderBuffer::Verdict::DUPLICATE:
        SendControl(PacketKind::ACK, flowId, p.src, expected); // the sender went back: tell it where we are
        return;
    case ReorderBuffer::Verdict::HELD:
        ++m_reorderedPackets;
        ++m_latency[LatencyBucket(uint64_t(nowPs - p.sendTimePs))];
        break;
    case ReorderBuffer::Verdict::IN_ORDER: {
        ++m_latency[LatencyBucket(uint64_t(nowPs - p.sendTimePs))];
        const uint64_t held = m_reorder.TakeHeld(flowId, expected + p.payloadBytes, m_mtuBytes);
        const uint64_t left = m_flows->bytes[flowId].sizeBytes - expected;
        DeliverInOrder(flowId, p.src, std::min<uint64_t>(p.payloadBytes + held * m_mtuBytes, left));
        break;
    }
    }
    if (m_admission)
    {
        AdmitArrived(p.payloadBytes);
    }
}

void
HostNic::AdmitArrived(uint64_t bytes)
{
    m_cts.Arrived(bytes);
    GrantWhatFits();
}

void
HostNic::GrantWhatFits()
{
    uint64_t flowId = 0;
    uint64_t grantedTo = 0;
    while (m_cts.NextGrant(&flowId, &grantedTo))
    {
        ++m_grantsSent;
        SendControl(PacketKind::GRANT, flowId, m_flows->src[flowId], grantedTo);
    }
}

void
HostNic::OnRequest(const FabricPacket& p)
{
    m_cts.Configure(uint64_t(m_admissionChannels) * m_admissionBufferBytes, m_admissionChunkBytes);
    m_cts.Request(p.flowId, p.seqBytes);
    GrantWhatFits();
}

void
HostNic::OnGrant(const FabricPacket& p)
{
    if (m_uec)
    {
        OnRcccCredit(p);
        return;
    }
    const uint32_t qpIndex = SenderQueuePair(p.flowId);
    if (qpIndex == FlowTable::kNoQueuePair)
    {
        return;
    }
    QueuePair& qp = m_qps[qpIndex];
    if (p.seqBytes > qp.grantedBytes)
    {
        qp.grantedBytes = p.seqBytes;
        UpdateSendLimit(qp);
        PortAt(0)->Wake();
    }
}

void
HostNic::OnOutOfOrder(const FabricPacket& p, GoBackNReceiver::Verdict verdict, uint64_t expectedBytes)
{
    switch (verdict)
    {
    case GoBackNReceiver::Verdict::DUPLICATE:
        // The sender went back past what arrived (a timeout after lost ACKs): tell it where we are.
        SendControl(PacketKind::ACK, p.flowId, p.src, expectedBytes);
        return;
    case GoBackNReceiver::Verdict::NAK:
        ++m_naksSent;
        SendControl(PacketKind::ACK, p.flowId, p.src, expectedBytes, uint32_t(AckSyndrome::NAK));
        return;
    case GoBackNReceiver::Verdict::DROP:
    case GoBackNReceiver::Verdict::DELIVER:
        return;
    }
}

void
HostNic::OnMarked(const FabricPacket& p, int64_t nowPs)
{
    ++m_ecnReceived;
    // IB congestion control answers every FECN with a BECN; DCQCN's notification point paces CNPs per flow.
    if (m_ibCc || (m_dcqcn && m_np.OnMarked(m_flows->lastCnpPs[p.flowId], nowPs)))
    {
        ++m_cnpsSent;
        SendControl(PacketKind::CNP, p.flowId, p.src, 0);
    }
}

void
HostNic::OnAck(const FabricPacket& p)
{
    ++m_acksReceived;
    const bool nak = p.aux == uint32_t(AckSyndrome::NAK);
    if (!nak && !m_rtoOn && m_windowBytes == 0 && !m_telemetryCc)
    {
        return; // only the retransmission timer, a window and telemetry CC need to know what was acknowledged
    }
    const uint32_t qpIndex = SenderQueuePair(p.flowId);
    if (qpIndex == FlowTable::kNoQueuePair)
    {
        return;
    }
    GoBackNState& gbn = m_qps[qpIndex].gbn;
    const bool stale = p.seqBytes < gbn.ackedBytes; // overtaken by later ACKs: its gap was filled long ago
    GoBackNSender::OnAck(gbn, p.seqBytes, cosim::NowPs());
    if (gbn.timerPending && gbn.ackedBytes >= m_flows->bytes[p.flowId].sizeBytes)
    {
        // Every byte is acknowledged: take the timer out of the event queue rather than let it fire.
        Simulator::Remove(m_qps[qpIndex].rtoEvent);
        gbn.timerPending = false;
    }
    if (m_telemetryCc)
    {
        OnTelemetryAck(qpIndex, p);
    }
    if (m_windowBytes != 0 || m_telemetryCc)
    {
        UpdateSendLimit(m_qps[qpIndex]);
        PortAt(0)->Wake();
    }
    if (nak && !stale)
    {
        OnNak(qpIndex, p.seqBytes);
    }
}

void
HostNic::OnNak(uint32_t qpIndex, uint64_t seqBytes)
{
    Rewind(qpIndex, seqBytes);
}

void
HostNic::Rewind(uint32_t qpIndex, uint64_t toBytes)
{
    QueuePair& qp = m_qps[qpIndex];
    uint64_t& sent = m_flows->bytes[qp.flowId].sentBytes;
    if (!GoBackNSender::Rewind(qp.gbn, toBytes, sent))
    {
        return; // a stale NAK: the sender already went back at least that far
    }
    sent = toBytes;
    if (qp.done)
    {
        qp.done = false;
        Activate(qpIndex);
        ++m_activeAtPrio[m_flows->priority[qp.flowId]];
    }
    PortAt(0)->Wake();
}

void
HostNic::ArmRetransmitTimer(uint32_t qpIndex, int64_t delayPs)
{
    NS_ASSERT_MSG(!m_qps[qpIndex].gbn.timerPending, "QP " << qpIndex << " already has a retransmission timer");
    m_qps[qpIndex].gbn.timerPending = true;
    m_qps[qpIndex].rtoEvent = Simulator::Schedule(TimeStep(delayPs), &HostNic::RetransmitTimer, this, qpIndex);
}

void
HostNic::RetransmitTimer(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    qp.gbn.timerPending = false;
    const int64_t nowPs = cosim::NowPs();
    const uint64_t flowId = qp.flowId;
    int64_t deadlinePs = 0;
    switch (m_gbnTx.OnTimer(qp.gbn, m_flows->bytes[flowId].sentBytes, m_flows->bytes[flowId].sizeBytes, nowPs, &deadlinePs))
    {
    case GoBackNSender::TimerVerdict::IDLE:
        ++m_idleTimerEvents;
        return;
    case GoBackNSender::TimerVerdict::REARM:
        ++m_idleTimerEvents;
        ArmRetransmitTimer(qpIndex, deadlinePs - nowPs);
        return;
    case GoBackNSender::TimerVerdict::TIMEOUT:
        ++m_timeouts;
        NoteLoss(0, cosim::LossCause::TIMEOUT);
        qp.gbn.lastActivityPs = nowPs;
        ArmRetransmitTimer(qpIndex, m_gbnTx.GetTimeoutPs()); // first: the rewind may send at once
        Rewind(qpIndex, qp.gbn.ackedBytes);
        return;
    }
}

void
HostNic::OnCnp(const FabricPacket& p)
{
    ++m_cnpsReceived;
    const uint32_t qpIndex = SenderQueuePair(p.flowId);
    if (qpIndex == FlowTable::kNoQueuePair || m_qps[qpIndex].done || m_qps[qpIndex].frozen)
    {
        return; // the flow has handed its last byte to the port (or is fast-forwarded): nothing to slow down
    }
    if (m_ibCc)
    {
        OnBecn(qpIndex);
    }
    if (m_dcqcn)
    {
        OnDcqcnCnp(qpIndex);
    }
}

void
HostNic::OnBecn(uint32_t qpIndex)
{
    // Step up the congestion-control table; the recovery timer walks it back down.
    if (m_ibCcAlgo->OnBecn(m_qps[qpIndex].ibCc))
    {
        Simulator::Schedule(m_ibCcAlgo->GetRecoveryPeriod(), &HostNic::CctiTimer, this, qpIndex);
    }
}

void
HostNic::OnTelemetryAck(uint32_t qpIndex, const FabricPacket& p)
{
    QueuePair& qp = m_qps[qpIndex];
    if (qp.frozen)
    {
        return; // fast-forward holds the rate
    }
    const double rate = m_telemetryAlgo->OnAck(qp.tcc, p.pathUtilization, p.seqBytes,
                                               m_flows->bytes[qp.flowId].sentBytes, LineRateBps(), qp.cc.rateBps);
    if (rate != qp.cc.rateBps)
    {
        qp.cc.rateBps = rate;
        m_rateTrace(qp.flowId, rate);
    }
}

void
HostNic::OnDcqcnCnp(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    m_dcqcnAlgo->OnCnp(qp.cc);
    m_rateTrace(qp.flowId, qp.cc.rateBps);
    // The increase timer restarts with the counters (a CNP resets T and BC).
    qp.increaseTimer.Cancel();
    qp.increaseTimer =
        Simulator::Schedule(m_dcqcnAlgo->GetRateIncreasePeriod(), &HostNic::IncreaseTimer, this, qpIndex);
    StartTimers(qpIndex);
}

void
HostNic::StartTimers(uint32_t qp)
{
    if (!m_qps[qp].alphaTimer.IsPending())
    {
        m_qps[qp].alphaTimer =
            Simulator::Schedule(m_dcqcnAlgo->GetAlphaUpdatePeriod(), &HostNic::AlphaTimer, this, qp);
    }
}

void
HostNic::IncreaseTimer(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    const double line = LineRateBps();
    m_dcqcnAlgo->OnIncreaseTimer(qp.cc, line);
    m_rateTrace(qp.flowId, qp.cc.rateBps);
    if (!qp.done && m_dcqcnAlgo->IsThrottled(qp.cc, line))
    {
        qp.increaseTimer = Simulator::Schedule(m_dcqcnAlgo->GetRateIncreasePeriod(),
                                               &HostNic::IncreaseTimer, this, qpIndex);
    }
    // A faster rate may let the QP send earlier than its pacing slot said.
    SetNextSend(qp, std::min(qp.nextSendPs, cosim::NowPs()));
    PortAt(0)->Wake();
}

void
HostNic::CctiTimer(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    if (qp.frozen)
    {
        qp.cctiHeld = true; // fast-forward holds the CCTI: ThawFlow restarts the timer
        return;
    }
    if (m_ibCcAlgo->OnRecoveryTimer(qp.ibCc, qp.done))
    {
        Simulator::Schedule(m_ibCcAlgo->GetRecoveryPeriod(), &HostNic::CctiTimer, this, qpIndex);
    }
    SetNextSend(qp, std::min(qp.nextSendPs, cosim::NowPs() + m_ibCcAlgo->GapPs(qp.ibCc)));
    PortAt(0)->Wake();
}

void
HostNic::AlphaTimer(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    m_dcqcnAlgo->OnAlphaTimer(qp.cc);
    if (!qp.done)
    {
        qp.alphaTimer =
            Simulator::Schedule(m_dcqcnAlgo->GetAlphaUpdatePeriod(), &HostNic::AlphaTimer, this, qpIndex);
    }
}

FabricPacket*
HostNic::PullUec(uint8_t pausedMask, int64_t nowPs)
{
    const bool nscc = m_uecCc != UecCc::RCCC;
    const bool rccc = m_uecCc != UecCc::NSCC;
    std::size_t k = 0;
    while (k < m_active.size())
    {
        const std::size_t idx = (m_next + k) % m_active.size();
        const uint32_t qpIndex = m_active[idx].qp;
        QueuePair& qp = m_qps[qpIndex];
        uint64_t index = 0;
        bool retransmission = false;
        const bool paused = pausedMask & (1u << qp.priority);
        if (!m_uecFlows[qpIndex] || (!paused && !m_uecFlows[qpIndex]->pds.Next(&index, &retransmission)))
        {
            // Delivered, or its retransmit list held only packets acknowledged since: nothing to send.
            qp.done = true;
            --m_activeAtPrio[qp.priority];
            Deactivate(idx);
            continue;
        }
        UecFlow& u = *m_uecFlows[qpIndex];
        const uint32_t payload = paused ? 0 : u.pds.PayloadOf(index);
        const uint64_t inflight = u.pds.InflightBytes();
        // A full window waits for an answer. One is due if a packet with the AR flag is in flight, or if
        // the bytes in flight reach the receiver's coalescing threshold; otherwise (the window shrank below
        // what was sent without AR) one packet goes beyond the window with AR set, so the flow cannot stall.
        const bool windowFull = nscc && inflight != 0 && double(inflight + payload) > u.cc.cwndBytes;
        const bool answerDue =
            inflight >= m_uecAckEveryBytes || (u.arPsn != ~uint64_t(0) && u.pds.IsInFlight(u.arPsn));
        // A retransmission needs no new credit: it replaces a packet whose credit the network spent without
        // delivering it.
        if (paused || (windowFull && answerDue) ||
            (rccc && !retransmission && index * m_mtuBytes + payload > u.creditBytes))
        {
            ++k; // paused, or its NSCC window is full until an answer, or its credit until a grant, arrives
            continue;
        }
        // ROD keeps its PDC on one path: the order the network keeps is the order of delivery.
        const uint16_t entropy =
            m_uecDelivery == UecDelivery::ROD ? u.entropy.base : m_entropy.Choose(u.entropy, nowPs);
        FabricPacket* p = MakeUecPacket(qp, u, index, entropy);
        u.pds.OnSent(index, retransmission, nowPs, entropy);
        // Ask for an answer at once whenever the sender will wait for one: coalescing must not stall it.
        if (retransmission || !u.pds.HasWork() ||
            (nscc && double(u.pds.InflightBytes() + m_mtuBytes) > u.cc.cwndBytes))
        {
            p->seqBytes |= kUecAckRequestBit;
            u.arPsn = index;
        }
        if (retransmission)
        {
            ++m_retransmittedPackets;
            m_retransmittedBytes += payload;
            NoteLoss(0, cosim::LossCause::RETRANSMITTED);
        }
        else
        {
            m_flows->bytes[qp.flowId].sentBytes += payload;
        }
        if (!u.rtoPending && !m_uecLossless)
        {
            ArmUecTimer(qpIndex, nowPs + m_uecRetransmitTimeout.GetTimeStep(), nowPs);
        }
        if (u.pds.HasWork())
        {
            m_next = idx + 1;
        }
        else
        {
            qp.done = true;
            --m_activeAtPrio[qp.priority];
            Deactivate(idx);
            m_next = idx;
        }
        return p;
    }
    return nullptr;
}

FabricPacket*
HostNic::MakeUecPacket(const QueuePair& qp, const UecFlow& u, uint64_t index, uint16_t entropy)
{
    const uint32_t payload = u.pds.PayloadOf(index);
    FabricPacket* p = m_pool->Allocate();
    p->flowId = qp.flowId;
    p->seqBytes = index * m_mtuBytes;
    p->src = m_nodeId;
    p->dst = qp.dst;
    p->payloadBytes = payload;
    p->wireBytes = payload + m_headerBytes;
    p->kind = PacketKind::DATA;
    p->priority = qp.priority;
    p->qp = entropy;
    return p;
}

void
HostNic::ActivateUec(uint32_t qpIndex)
{
    QueuePair& qp = m_qps[qpIndex];
    if (qp.done)
    {
        qp.done = false;
        Activate(qpIndex);
        ++m_activeAtPrio[qp.priority];
    }
    PortAt(0)->Wake();
}

void
HostNic::ArmUecTimer(uint32_t qpIndex, int64_t atPs, int64_t nowPs)
{
    UecFlow& u = *m_uecFlows[qpIndex];
    NS_ASSERT_MSG(!u.rtoPending, "QP " << qpIndex << " already has a UEC retransmission timer");
    u.rtoPending = true;
    u.rtoEvent = Simulator::Schedule(TimeStep(atPs > nowPs ? atPs - nowPs : 0), &HostNic::UecTimer, this, qpIndex);
}

void
HostNic::UecTimer(uint32_t qpIndex)
{
    UecFlow& u = *m_uecFlows[qpIndex];
    u.rtoPending = false;
    const int64_t nowPs = cosim::NowPs();
    int64_t nextPs = -1;
    uint64_t lost = u.pds.OnTimeout(nowPs, m_uecRetransmitTimeout.GetTimeStep(), &nextPs);
    if (lost != 0 && m_uecDelivery == UecDelivery::ROD)
    {
        // The receiver dropped what followed the lost packet: go back to the first one not delivered.
        lost += u.pds.GoBack(u.pds.Base(), u.pds.Base());
        nextPs = -1;
    }
    if (nextPs >= 0)
    {
        ArmUecTimer(qpIndex, nextPs, nowPs); // the oldest packet still in flight; the next send arms it otherwise
    }
    if (lost != 0)
    {
        ++m_timeouts;
        NoteLoss(0, cosim::LossCause::TIMEOUT);
        ActivateUec(qpIndex); // last: waking the port may send, and arm the timer, at once
    }
    else
    {
        ++m_idleTimerEvents;
    }
}

void
HostNic::OnDataUec(const FabricPacket& p, int64_t nowPs)
{
    if (m_uecCc != UecCc::NSCC)
    {
        RcccNoteFlow(p);
    }
    if (m_uecDelivery == UecDelivery::ROD)
    {
        OnDataRod(p, nowPs);
        return;
    }
    if (p.payloadBytes == 0)
    {
        SendNack(p, p.seqBytes & ~kUecAckRequestBit, kUecNackTrimmed); // a switch trimmed it: ask for it again
        return;
    }
    const uint64_t flowId = p.flowId;
    const uint64_t seq = p.seqBytes & ~kUecAckRequestBit;
    const uint64_t expected = m_flows->bytes[flowId].rcvdBytes;
    const bool gapBefore = m_reorder.Holds(flowId);
    // At once: what the sender waits for (AR), what NSCC and the entropy feedback need per packet (ECN).
    bool now = (p.seqBytes & kUecAckRequestBit) != 0 || p.ecnMarked;
    bool finished = false;
    bool duplicate = false;
    switch (m_reorder.OnData(flowId, seq, expected, m_mtuBytes))
    {
    case ReorderBuffer::Verdict::DUPLICATE:
        now = duplicate = true; // a retransmission overtaken by the original: the sender lacks our state
        break;
    case ReorderBuffer::Verdict::HELD:
        ++m_reorderedPackets;
        ++m_latency[LatencyBucket(uint64_t(nowPs - p.sendTimePs))];
        m_flows->bytes[flowId].unackedBytes += p.payloadBytes;
        now = now || !gapBefore; // it opens a gap: the sender learns of the missing packet within a round trip
        break;
    case ReorderBuffer::Verdict::IN_ORDER: {
        ++m_latency[LatencyBucket(uint64_t(nowPs - p.sendTimePs))];
        const uint64_t held = m_reorder.TakeHeld(flowId, expected + p.payloadBytes, m_mtuBytes);
        const uint64_t size = m_flows->bytes[flowId].sizeBytes;
        const uint64_t rcvd = (m_flows->bytes[flowId].rcvdBytes +=
                               std::min<uint64_t>(p.payloadBytes + held * m_mtuBytes, size - expected));
        m_flows->bytes[flowId].unackedBytes += p.payloadBytes;
        finished = rcvd == size;
        now = now || held != 0 || finished; // a gap closed, or the flow is complete
        break;
    }
    }
    SackAndFinish(p, now, duplicate || (p.seqBytes & kUecAckRequestBit) != 0, finished);
}

void
HostNic::OnDataRod(const FabricPacket& p, int64_t nowPs)
{
    const uint64_t flowId = p.flowId;
    const uint64_t expected = m_flows->bytes[flowId].rcvdBytes;
    const uint64_t seq = p.seqBytes & ~kUecAckRequestBit;
    if (p.payloadBytes == 0)
    {
        // A trimmed header beyond the next packet in order opens a gap like a loss (one NACK per gap); the
        // next packet itself trimmed is NACKed every time, as its resend may be trimmed again. The sender
        // goes back to the gap; the code tells NSCC whether the gap itself was trimmed.
        const bool firstOfGap =
            seq >= expected &&
            m_gbnRx.OnData(flowId, expected + m_mtuBytes, expected) == GoBackNReceiver::Verdict::NAK;
        if (seq == expected || firstOfGap)
        {
            SendNack(p, expected, seq == expected ? kUecNackTrimmed : kUecNackRodOutOfOrder);
        }
        return;
    }
    bool now = (p.seqBytes & kUecAckRequestBit) != 0 || p.ecnMarked;
    bool finished = false;
    switch (m_gbnRx.OnData(flowId, seq, expected))
    {
    case GoBackNReceiver::Verdict::DUPLICATE:
        now = true;
        break;
    case GoBackNReceiver::Verdict::NAK:
        SendNack(p, expected, kUecNackRodOutOfOrder); // dropped: the sender goes back to the gap
        return;
    case GoBackNReceiver::Verdict::DROP:
        return; // beyond the gap already NACKed
    case GoBackNReceiver::Verdict::DELIVER: {
        ++m_latency[LatencyBucket(uint64_t(nowPs - p.sendTimePs))];
        const uint64_t rcvd = (m_flows->bytes[flowId].rcvdBytes += p.payloadBytes);
        m_flows->bytes[flowId].unackedBytes += p.payloadBytes;
        finished = rcvd == m_flows->bytes[flowId].sizeBytes;
        now = now || finished;
        break;
    }
    }
    SackAndFinish(p, now, true, finished);
}

void
HostNic::SackAndFinish(const FabricPacket& p, bool now, bool coverAboveCack, bool finished)
{
    const uint64_t flowId = p.flowId;
    if (now || m_flows->bytes[flowId].unackedBytes >= m_uecAckEveryBytes)
    {
        SendSack(p, coverAboveCack);
    }
    if (!finished)
    {
        return;
    }
    if (m_uecCc != UecCc::NSCC)
    {
        auto it = m_rcccFlows.find(flowId);
        NS_ASSERT_MSG(it == m_rcccFlows.end() || it->second.creditedBytes == it->second.sizeBytes,
                      "flow " << flowId << " completed with credit still owed");
        if (it != m_rcccFlows.end())
        {
            m_rcccFlows.erase(it);
        }
    }
    FinishFlow(flowId);
}

void
HostNic::SendNack(const FabricPacket& p, uint64_t seqBytes, UecNackCode code)
{
    ++m_naksSent;
    const uint64_t rcvd = m_flows->bytes[p.flowId].rcvdBytes;
    FabricPacket* c = NewPdsAnswer(PacketKind::NACK, p, (rcvd + m_mtuBytes - 1) / m_mtuBytes);
    c->seqBytes = seqBytes;
    c->payloadBytes = code;
    PortAt(0)->Enqueue(c);
}

FabricPacket*
HostNic::NewPdsAnswer(PacketKind kind, const FabricPacket& p, uint64_t cackPsn)
{
    FabricPacket* c = m_pool->Allocate();
    c->kind = kind;
    c->flowId = p.flowId;
    c->src = m_nodeId;
    c->dst = p.src;
    c->aux = static_cast<uint32_t>(cackPsn); // CACK_PSN
    c->qp = p.qp;                            // the entropy it answers, for the sender's path feedback
    c->ecnMarked = p.ecnMarked;              // ECN echo
    c->sendTimePs = p.sendTimePs;            // the sender measures the round trip from it
    c->wireBytes = m_ackBytes;
    c->priority = m_controlPriority;
    return c;
}

void
HostNic::SendSack(const FabricPacket& p, bool coverAboveCack)
{
    ++m_sacksSent;
    m_flows->bytes[p.flowId].unackedBytes = 0;
    const uint64_t rcvd = m_flows->bytes[p.flowId].rcvdBytes;
    const uint64_t cack = (rcvd + m_mtuBytes - 1) / m_mtuBytes;
    const int64_t ackPsn = int64_t((p.seqBytes & ~kUecAckRequestBit) / m_mtuBytes);
    // The bitmap ends at the packet that triggered the SACK, so it covers the packets that arrived since the
    // previous SACK; after a retransmission or a duplicate, it starts at CACK_PSN instead: what is held
    // beyond the next gap.
    const int64_t lastBit = int64_t(kUecSackBitmapPackets - 1);
    const int64_t sackOffset =
        coverAboveCack ? 0 : std::clamp<int64_t>(ackPsn - lastBit - int64_t(cack), 0, kUecSackOffsetMax);
    const int64_t ackOffset = ackPsn - int64_t(cack);
    const bool ackFits = ackOffset >= kUecAckOffsetMin && ackOffset <= kUecAckOffsetMax;
    FabricPacket* c = NewPdsAnswer(PacketKind::SACK, p, cack);
    c->seqBytes = m_reorder.ArrivedBitmap(p.flowId, int64_t(cack) + sackOffset, cack); // SACK_BITMAP
    c->payloadBytes = UecSackOffsets(uint16_t(sackOffset), ackFits ? int16_t(ackOffset) : kUecAckOffsetNone);
    PortAt(0)->Enqueue(c);
}

void
HostNic::OnSack(const FabricPacket& p)
{
    ++m_acksReceived;
    const uint32_t qpIndex = SenderQueuePair(p.flowId);
    if (qpIndex == FlowTable::kNoQueuePair || !m_uecFlows[qpIndex])
    {
        return; // not this NIC's flow, or every packet of it acknowledged already
    }
    UecFlow& u = *m_uecFlows[qpIndex];
    const int64_t nowPs = cosim::NowPs();
    const SackOutcome got = ApplySack(u.pds, m_entropy, u.entropy, DecodeSack(p), nowPs);
    if (got.ackedBytes != 0 && m_uecCc != UecCc::RCCC)
    {
        // One delay sample per SACK: the round trip of the packet that triggered it.
        m_nscc->OnAck(u.cc, got.ackedBytes, got.markedBytes, nowPs - p.sendTimePs, nowPs);
    }
    // ROD needs no reordering rule: its one path keeps the order, and the receiver NACKs a gap.
    const int64_t windowPs = m_uecDelivery == UecDelivery::RUD ? m_uecReorderWindow.GetTimeStep() : 0;
    if (windowPs != 0 && !m_uecLossless && u.pds.DetectLoss(p.sendTimePs, windowPs) != 0)
    {
        ++m_reorderLosses;
        ActivateUec(qpIndex);
    }
    AfterPdsAnswer(qpIndex);
}

void
HostNic::OnNack(const FabricPacket& p)
{
    ++m_acksReceived;
    const uint32_t qpIndex = SenderQueuePair(p.flowId);
    if (qpIndex == FlowTable::kNoQueuePair || !m_uecFlows[qpIndex])
    {
        return;
    }
    UecFlow& u = *m_uecFlows[qpIndex];
    const int64_t nowPs = cosim::NowPs();
    if (m_uecDelivery == UecDelivery::ROD)
    {
        // The receiver dropped what followed the gap: go back to it. Only a trimmed gap signals congestion.
        if (p.payloadBytes == kUecNackTrimmed && m_uecCc != UecCc::RCCC)
        {
            m_nscc->OnNack(u.cc, nowPs);
        }
        if (u.pds.GoBack(p.seqBytes / m_mtuBytes, p.aux) != 0)
        {
            ActivateUec(qpIndex);
        }
        AfterPdsAnswer(qpIndex);
        return;
    }
    m_entropy.OnFeedback(u.entropy, p.qp, true, nowPs);
    if (u.pds.OnNack(p.seqBytes / m_mtuBytes, p.aux))
    {
        if (m_uecCc != UecCc::RCCC)
        {
            m_nscc->OnNack(u.cc, nowPs);
        }
        ActivateUec(qpIndex);
    }
    AfterPdsAnswer(qpIndex);
}

void
HostNic::AfterPdsAnswer(uint32_t qpIndex)
{
    UecFlow& u = *m_uecFlows[qpIndex];
    if (u.pds.AllAcked())
    {
        if (u.rtoPending)
        {
            Simulator::Remove(u.rtoEvent); // every packet is delivered: take the timer out of the event queue
        }
        m_uecFlows[qpIndex].reset();
        return;
    }
    PortAt(0)->Wake(); // the window may have opened
}

uint64_t
HostNic::RcccInitialCredit(uint64_t sizeBytes) const
{
    const uint64_t first = std::min<uint64_t>(sizeBytes, m_mtuBytes);
    return std::min(sizeBytes, std::max(m_rcccInitialCreditBytes, first));
}

void
HostNic::RcccNoteFlow(const FabricPacket& p)
{
    const uint64_t flowId = p.flowId;
    const uint64_t size = m_flows->bytes[flowId].sizeBytes;
    if (m_flows->bytes[flowId].rcvdBytes == size || m_rcccFlows.count(flowId) != 0)
    {
        return; // known, or complete (a late duplicate)
    }
    const RcccFlow f{RcccInitialCredit(size), size, p.src};
    m_rcccFlows.emplace(flowId, f);
    if (f.creditedBytes < size)
    {
        m_rcccDemand.push_back(flowId);
        if (!m_rcccPacing)
        {
            RcccGrant();
        }
    }
}

void
HostNic::RcccGrant()
{
    m_rcccPacing = false;
    if (m_rcccDemand.empty())
    {
        return;
    }
    const uint64_t flowId = m_rcccDemand.front();
    m_rcccDemand.pop_front();
    RcccFlow& f = m_rcccFlows.at(flowId);
    NS_ASSERT_MSG(f.creditedBytes < f.sizeBytes, "flow " << flowId << " owed no credit");
    const uint64_t grant = std::min(m_rcccCreditBytes, f.sizeBytes - f.creditedBytes);
    f.creditedBytes += grant;
    ++m_rcccCreditsSent;
    SendControl(PacketKind::GRANT, flowId, f.src, f.creditedBytes);
    if (f.creditedBytes < f.sizeBytes)
    {
        m_rcccDemand.push_back(flowId);
    }
    // The next grant follows once the granted payload, in whole packets with their headers, could cross
    // this NIC's link: the senders together never send faster than the receiver drains.
    const uint64_t packets = (grant + m_mtuBytes - 1) / m_mtuBytes;
    const double wireBits = 8.0 * double(grant + packets * m_headerBytes);
    const int64_t gapPs = int64_t(wireBits / LineRateBps() * 1e12 + 0.5);
    m_rcccPacing = true;
    m_rcccEvent = Simulator::Schedule(TimeStep(gapPs), &HostNic::RcccGrant, this);
}

void
HostNic::OnRcccCredit(const FabricPacket& p)
{
    const uint32_t qpIndex = SenderQueuePair(p.flowId);
    if (qpIndex == FlowTable::kNoQueuePair || !m_uecFlows[qpIndex])
    {
        return;
    }
    UecFlow& u = *m_uecFlows[qpIndex];
    if (p.seqBytes > u.creditBytes)
    {
        u.creditBytes = p.seqBytes;
        PortAt(0)->Wake();
    }
}

} // namespace ns3
