/**
 * @file
 * @ingroup cosim
 * A host's RDMA NIC: one queue pair per flow with a rate limiter, served round-robin to its port. The
 * mechanisms it combines live in their own classes: DCQCN's reaction point (DcqcnRateControl) and
 * notification point (DcqcnNotificationPoint), switch-telemetry congestion control (TelemetryRateControl),
 * InfiniBand congestion control (IbCcControl), ACK
 * coalescing (AckCoalescer), go-back-N loss recovery (GoBackNSender, GoBackNReceiver), out-of-order
 * placement (ReorderBuffer), receiver-driven admission (CtsAdmission), and Ultra Ethernet's packet
 * delivery (PdsScoreboard), congestion control (NsccWindow) and entropy choice (EntropySelector).
 */
#ifndef COSIM_HOST_NIC_H
#define COSIM_HOST_NIC_H

#include "ack-coalescer.h"
#include "cts-admission.h"
#include "dcqcn-notification-point.h"
#include "dcqcn-rate-control.h"
#include "egress-port.h"
#include "entropy-selector.h"
#include "fabric-node.h"
#include "flow-table.h"
#include "go-back-n-receiver.h"
#include "go-back-n-sender.h"
#include "ib-cc-control.h"
#include "nscc-window.h"
#include "pds-sack.h"
#include "pds-scoreboard.h"
#include "reorder-buffer.h"
#include "telemetry-rate-control.h"

#include "ns3/event-id.h"
#include "ns3/traced-callback.h"

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{

/// Receive-latency histogram: 8 log-spaced buckets per power of two of the latency in ps.
constexpr uint32_t kLatencyBucketsPerOctave = 8;
/// Buckets of the latency histogram (covers 1 ps .. 2^64 ps).
constexpr uint32_t kLatencyBuckets = 64 * kLatencyBucketsPerOctave;

/// @return the latency-histogram bucket of a latency of @p ps picoseconds
inline uint32_t
LatencyBucket(uint64_t ps)
{
    if (ps < kLatencyBucketsPerOctave)
    {
        return static_cast<uint32_t>(ps); // exact below 8 ps
    }
    const uint32_t octave = 63 - static_cast<uint32_t>(__builtin_clzll(ps));
    const uint32_t sub = static_cast<uint32_t>(ps >> (octave - 3)) & (kLatencyBucketsPerOctave - 1);
    return octave * kLatencyBucketsPerOctave + sub;
}

/**
 * @ingroup cosim
 * @brief Host RDMA NIC with one port.
 *
 * The NIC is its port's PacketSource: it builds a data packet only when the port is ready for one, so a
 * flow of any size costs memory for one packet at a time. Active queue pairs are served round-robin,
 * each no faster than its current rate (the per-QP rate limiter); with DCQCN off every QP runs at line
 * rate. The receiver acknowledges every AckIntervalBytes (and the last byte) and, with DCQCN, sends at
 * most one CNP per flow per CnpInterval when ECN-marked packets arrive; with IB congestion control it
 * answers every FECN-marked packet with a BECN (carried as a CNP packet). A flow completes when its last
 * payload byte reaches the destination NIC in order.
 *
 * Loss recovery is go-back-N, as RoCE NICs do it: the receiver delivers only the expected PSN, drops
 * anything else and NAKs the first packet after a gap; the sender rewinds to the NAK'ed PSN, and on
 * links without credits (a lossy Ethernet priority) resends from the last acked PSN after
 * RetransmitTimeout without sending or ACK progress. Lossless runs never take these paths. With
 * ReorderTolerant the receiver places packets beyond a gap instead (ReorderBuffer): what adaptive routing
 * and packet spraying need.
 *
 * Transport mechanisms of large training fabrics, each off by default:
 * - QP scaling (QueuePairsPerConnection = k): the flows (messages) to one destination take queue-pair
 *   indices 0..k-1 in turn; switches hashing on the QP (FabricSwitch::EcmpHashFields five-tuple-qp) spread
 *   them over up to k paths. The index labels a flow for hashing: rate state stays per flow.
 * - a per-QP window (QpWindowBytes): payload sent and not yet acknowledged never exceeds it.
 * - receiver-driven admission (AdmissionEnabled): a flow first sends a REQUEST; the receiver's
 *   CtsAdmission grants it chunk by chunk (GRANT packets at ControlPriority), keeping the bytes granted
 *   and not yet arrived within AdmissionChannels x AdmissionBufferBytes.
 *
 * With UecEnabled the NIC runs Ultra Ethernet's transport instead of RoCE's (UEC 1.0): a flow is a
 * reliable unordered delivery (RUD) context, established by its first packet (no handshake). The sender
 * picks an entropy value per packet (EntropySelector: spraying over the equal-cost paths, REPS-style
 * reuse of the entropies that came back clean), keeps at most the NSCC window in flight (NsccWindow), and resends
 * only the packets that are lost (PdsScoreboard): a NACK names a trimmed one; a dropped one is found
 * when a packet sent more than UecReorderWindow after it is SACKed, or by the retransmission timeout
 * (UecRetransmitTimeout). The receiver places packets in any order (ReorderBuffer), NACKs a trimmed
 * header at once and coalesces its SACKs: one per UecAckEveryBytes received, and one at once for a
 * packet with the AR flag, an ECN-marked one, one that opens or closes a gap, a duplicate and the flow's
 * last byte. Each SACK carries the cumulative acknowledgement and a 64-packet bitmap (PDS CACK_PSN,
 * SACK_PSN_OFFSET, SACK_BITMAP). The sender sets AR on a retransmission, on its last packet and on one
 * that fills its window, so an answer is always due when it has to wait. UecCongestionControl chooses
 * NSCC (sender window), RCCC (receiver credits: the receiver paces grants of UecRcccCreditBytes at its
 * line rate, round-robin over its senders; a sender sends UecRcccInitialCreditBytes unsolicited) or both.
 * UecDeliveryMode rod makes every flow a reliable ordered delivery context instead: one entropy (one
 * path), a receiver that takes only the next packet in order and NACKs a gap once, go-back-N resends.
 */
class HostNic : public FabricNode, public PacketSource
{
  public:
    /// @return the TypeId of HostNic
    static TypeId GetTypeId();

    HostNic();
    ~HostNic() override;

    /// Use @p table for every flow this NIC sends or receives (not owned; outlives the run).
    void SetFlowTable(FlowTable* table);

    /// Schedule flow @p flowId (whose src is this node) to start at its FlowTable start time.
    void AddFlow(uint64_t flowId);

    void Receive(FabricPacket* p, uint32_t inPort) override;
    FabricPacket* PullPacket(uint32_t port, uint8_t pausedMask) override;
    bool HasPending(uint8_t prioMask) const override;

    /// @return payload bytes per full packet (the MTU payload), in bytes
    uint32_t GetMtuBytes() const
    {
        return m_mtuBytes;
    }

    /// @return header and framing bytes added to every data packet, in bytes
    uint32_t GetHeaderBytes() const
    {
        return m_headerBytes;
    }

    /// @return the receive-latency histogram of data packets (first bit sent to last bit received)
    const std::array<uint64_t, kLatencyBuckets>& GetLatencyHistogram() const
    {
        return m_latency;
    }

    /// @return CNPs this NIC sent (as a receiver)
    uint64_t GetCnpsSent() const
    {
        return m_cnpsSent;
    }

    /// @return CNPs this NIC received (as a sender)
    uint64_t GetCnpsReceived() const
    {
        return m_cnpsReceived;
    }

    /// @return ECN-marked data packets received
    uint64_t GetEcnMarkedReceived() const
    {
        return m_ecnReceived;
    }

    /// @return ACKs received
    uint64_t GetAcksReceived() const
    {
        return m_acksReceived;
    }

    /// @return data packets sent again after a go-back-N rewind (NAK or timeout)
    uint64_t GetRetransmittedPackets() const
    {
        return m_retransmittedPackets;
    }

    /// @return payload bytes of the data packets sent again (go-back-N rewinds, UEC selective retransmission)
    uint64_t GetRetransmittedBytes() const
    {
        return m_retransmittedBytes;
    }

    /// @return UEC SACKs that declared packets sent well before theirs lost (UecReorderWindow)
    uint64_t GetReorderLosses() const
    {
        return m_reorderLosses;
    }

    /// @return NAKs this NIC sent (as a receiver; with UecEnabled, NACKs of trimmed packets)
    uint64_t GetNaksSent() const
    {
        return m_naksSent;
    }

    /// @return retransmission timeouts that made a QP go back to its last acked PSN
    uint64_t GetTimeouts() const
    {
        return m_timeouts;
    }

    /// @return retransmission-timer events that found nothing to resend (bookkeeping, not model events)
    uint64_t GetIdleTimerEvents() const
    {
        return m_idleTimerEvents;
    }

    /// @return data packets that arrived beyond a gap and were held (ReorderTolerant)
    uint64_t GetReorderedPackets() const
    {
        return m_reorderedPackets;
    }

    /// @return UEC SACKs this NIC sent (as a receiver)
    uint64_t GetSacksSent() const
    {
        return m_sacksSent;
    }

    /// @return UEC RCCC credit packets this NIC sent (as a receiver)
    uint64_t GetCreditsSent() const
    {
        return m_rcccCreditsSent;
    }

    /// @return clear-to-send grants this NIC sent as a receiver (AdmissionEnabled)
    uint64_t GetGrantsSent() const
    {
        return m_grantsSent;
    }

    /// @return the most payload any of its QPs had sent and not yet acknowledged, in bytes (tracked only
    /// with a QpWindowBytes; 0 otherwise)
    uint64_t GetPeakInflightBytes() const
    {
        return m_peakInflightBytes;
    }

    /// @return current DCQCN rate of the QP of flow @p flowId, in bit/s (line rate if unknown)
    double GetFlowRateBps(uint64_t flowId) const;

    /// @return the rate limiter's next-send time of flow @p flowId's QP, in ps (0 if unknown): its last packet's
    /// send time plus the constant gap of its rate, so differences of it time whole packets exactly
    int64_t GetFlowPacingMarkPs(uint64_t flowId) const;

    /// @return the IB congestion-control table index (CCTI) of flow @p flowId's QP (0 if unknown)
    uint32_t GetFlowCcti(uint64_t flowId) const;

    /// @return true if flow @p flowId sends from this NIC, has payload left to hand to the port and is not
    /// frozen: what FreezeFlow needs
    bool IsSending(uint64_t flowId) const;

    /**
     * @brief Fast-forward (FastForwardController): flow @p flowId stops injecting packets; its
     * congestion-control timers are held (rate, alpha and CCTI stay as they are) and CNPs for it are
     * ignored until ThawFlow. Packets already sent drain normally.
     */
    void FreezeFlow(uint64_t flowId);

    /**
     * @brief Fast-forward: flow @p flowId resumes. @p creditBytes of payload (whole packets; 0 after a span
     * cut short) count as sent, delivered and acknowledged at once: its next PSN and its receiver's expected
     * PSN advance together. Its held timers restart with a full period. It sends from the next WakeSender:
     * the flows of a span are thawed together before any of them sends, so that the round robin resumes
     * in the phase it had at the freeze.
     */
    void ThawFlow(uint64_t flowId, uint64_t creditBytes);

    /// @brief Fast-forward: let the port send now what the flows thawed since it last sent allow.
    void WakeSender();

  protected:
    void NotifyConstructionCompleted() override;

  private:
    /// Per-flow sender state.
    struct QueuePair
    {
        uint64_t flowId;       ///< the flow it sends
        int64_t nextSendPs;    ///< rate limiter: earliest time of the next packet, in ps
        // The flow's fixed fields every packet needs, copied from the FlowTable at the start: one cache
        // line with the rate state instead of one per FlowTable column.
        uint64_t sizeBytes;    ///< the flow's payload, in bytes
        uint32_t dst;          ///< the flow's destination host node id
        uint16_t connectionQp; ///< the queue pair its packets carry (FlowTable::qp)
        uint8_t priority;      ///< the flow's priority
        DcqcnState cc;         ///< DCQCN rate state; cc.rateBps is the rate limiter's, also under telemetry CC
        TelemetryCcState tcc;  ///< telemetry congestion-control state (TelemetryCcEnabled)
        bool done;             ///< every byte handed to the port
        EventId increaseTimer; ///< DCQCN rate-increase timer
        EventId alphaTimer;    ///< DCQCN alpha-update timer
        IbCcState ibCc;        ///< IB congestion-control state
        GoBackNState gbn;      ///< go-back-N loss-recovery state
        EventId rtoEvent;      ///< go-back-N retransmission timer (while gbn.timerPending)
        uint64_t grantedBytes; ///< admission: payload offset the receiver cleared it to send up to, in bytes
        uint64_t limitBytes;   ///< no packet may end beyond this payload offset (grant, window), in bytes
        bool frozen;           ///< fast-forward: skipped by the round robin while its span is credited (FreezeFlow)
        bool increaseHeld;     ///< fast-forward: the DCQCN increase timer was pending at FreezeFlow
        bool alphaHeld;        ///< fast-forward: the DCQCN alpha timer was pending at FreezeFlow
        bool cctiHeld;         ///< fast-forward: the CCTI recovery timer fired while frozen
        uint32_t activeSlot;   ///< its entry in m_active, kNotActive while it is not there
    };

    /// QueuePair::activeSlot of a queue pair not in m_active
    static constexpr uint32_t kNotActive = UINT32_MAX;

    /// One queue pair of the round robin, with what the round robin reads of it: it passes many paced queue
    /// pairs per packet, and reading these from one dense array instead of each QueuePair's line keeps a
    /// NIC of many active queue pairs from missing the cache once per pair it passes.
    struct ActiveQp
    {
        int64_t nextSendPs; ///< the QueuePair's nextSendPs (SetNextSend keeps both), in ps
        uint32_t qp;        ///< index in m_qps
        uint8_t priority;   ///< the QueuePair's priority
        bool limited;       ///< its limitBytes is set (UpdateSendLimit keeps both): the round robin reads it
    };

    /// Ultra Ethernet state of one queue pair (UecEnabled), beside its QueuePair.
    struct UecFlow
    {
        PdsScoreboard pds;    ///< which packets are in flight, acknowledged or lost
        NsccState cc;         ///< NSCC window
        EntropyState entropy; ///< entropy choice and feedback
        EventId rtoEvent;     ///< retransmission timer (while rtoPending)
        uint64_t creditBytes{0}; ///< RCCC: payload offset new packets may reach (initial credit + grants), in bytes
        uint64_t arPsn{~uint64_t(0)}; ///< the newest packet sent with the AR flag (~0: none)
        bool rtoPending{false}; ///< the timer is scheduled
    };

    /// UecCongestionControl: which UEC congestion control limits a sender.
    enum class UecCc : uint8_t
    {
        NSCC, ///< sender window from ECN and delay
        RCCC, ///< receiver-granted credits
        BOTH, ///< a packet needs window room and credit
    };

    /// UecDeliveryMode: the PDS delivery mode of every flow.
    enum class UecDelivery : uint8_t
    {
        RUD, ///< reliable unordered delivery: sprayed, placed in any order, selective retransmission
        ROD, ///< reliable ordered delivery: one path, in order, go-back-N from a gap
    };

    /// RCCC receiver state of one flow towards this NIC, from its first packet to its last byte.
    struct RcccFlow
    {
        uint64_t creditedBytes; ///< payload offset its sender may send up to, in bytes
        uint64_t sizeBytes;     ///< the flow's payload (the message length of its first packet), in bytes
        uint32_t src;           ///< its sender's node id
    };

    /// QueuePair::limitBytes of a QP neither admission nor a window holds back.
    static constexpr uint64_t kNoSendLimit = ~uint64_t(0);

    /// UEC sender: @return the next packet of an active queue pair within its window, or nullptr.
    FabricPacket* PullUec(uint8_t pausedMask, int64_t nowPs);
    /// UEC sender: build packet @p index of @p qp's flow (@p entropy in its qp field).
    FabricPacket* MakeUecPacket(const QueuePair& qp, const UecFlow& u, uint64_t index, uint16_t entropy);
    /// UEC sender: QP @p qpIndex has packets to send again: make it active if it was not.
    void ActivateUec(uint32_t qpIndex);
    /// UEC sender: the retransmission timer of QP @p qpIndex fired.
    void UecTimer(uint32_t qpIndex);
    /// UEC sender: schedule the retransmission timer of QP @p qpIndex at @p atPs (ps).
    void ArmUecTimer(uint32_t qpIndex, int64_t atPs, int64_t nowPs);
    /// UEC receiver: data packet @p p arrived at @p nowPs (ps): place it, SACK it, or NACK it if trimmed.
    void OnDataUec(const FabricPacket& p, int64_t nowPs);
    /// UEC receiver: NACK (with @p code) the packet at @p seqBytes of data packet @p p's flow, at once.
    void SendNack(const FabricPacket& p, uint64_t seqBytes, UecNackCode code);
    /// UEC receiver, ROD: data packet @p p arrived at @p nowPs (ps): deliver it if it is the next in order.
    void OnDataRod(const FabricPacket& p, int64_t nowPs);
    /// UEC receiver: @p p's flow's in-order point moved; SACK it if @p now or the threshold is reached,
    /// then complete the flow if @p finished.
    void SackAndFinish(const FabricPacket& p, bool now, bool coverAboveCack, bool finished);
    /// UEC receiver: SACK flow @p p.flowId's state, triggered by data packet @p p (ACK_PSN); the bitmap
    /// starts at CACK_PSN if @p coverAboveCack, else it ends at ACK_PSN.
    void SendSack(const FabricPacket& p, bool coverAboveCack);
    /// A PDS answer (SACK or NACK) of @p kind to data packet @p p with cumulative acknowledgement @p cackPsn:
    /// addressed to its sender, echoing its entropy, ECN mark and send time; the caller sets the rest.
    FabricPacket* NewPdsAnswer(PacketKind kind, const FabricPacket& p, uint64_t cackPsn);
    /// UEC sender: a SACK (@p p) arrived.
    void OnSack(const FabricPacket& p);
    /// UEC sender: a NACK (@p p) arrived.
    void OnNack(const FabricPacket& p);
    /// UEC sender: the SACK or NACK @p p left QP @p qpIndex's flow; free its state once all is acknowledged.
    void AfterPdsAnswer(uint32_t qpIndex);
    /// @return the payload of a flow of @p sizeBytes its sender may send before any RCCC credit, in bytes
    uint64_t RcccInitialCredit(uint64_t sizeBytes) const;
    /// RCCC receiver: data packet @p p arrived; learn its flow on its first packet and start granting.
    void RcccNoteFlow(const FabricPacket& p);
    /// RCCC receiver: grant the next sender its credit, and pace the next grant at the line rate.
    void RcccGrant();
    /// RCCC sender: a credit (GRANT packet @p p) arrived.
    void OnRcccCredit(const FabricPacket& p);

    /// Receive handlers, one per packet kind the NIC consumes (Receive dispatches).
    void OnData(const FabricPacket& p);
    void OnAck(const FabricPacket& p);
    void OnCnp(const FabricPacket& p);
    void OnRequest(const FabricPacket& p);
    void OnGrant(const FabricPacket& p);
    /// Receiver, ReorderTolerant: data packet @p p arrived at @p nowPs (ps); deliver or hold it.
    void OnDataAnyOrder(const FabricPacket& p, int64_t nowPs);
    /// Receiver: @p bytes more payload of flow @p flowId (from @p src) are delivered in order; ACK and
    /// complete it as due.
    void DeliverInOrder(uint64_t flowId, uint32_t src, uint64_t bytes);
    /// Receiver, admission: @p bytes of granted payload arrived; grant what the budget allows now.
    void AdmitArrived(uint64_t bytes);
    /// Receiver, admission: send every grant the budget allows now.
    void GrantWhatFits();
    /// Sender: recompute the send limit of @p qp from its grant and window.
    void UpdateSendLimit(QueuePair& qp);
    /// @return true if the next packet of @p qp ends within its send limit
    bool WithinSendLimit(const QueuePair& qp) const;
    /// Sender, QP scaling: give flow @p flowId the next queue-pair index towards its destination.
    void AssignQueuePair(uint64_t flowId);    /// Receiver: @p p is not the expected PSN @p expectedBytes of its flow (@p verdict): drop it, NAK or re-ACK.
    void OnOutOfOrder(const FabricPacket& p, GoBackNReceiver::Verdict verdict, uint64_t expectedBytes);
    /// Sender: a NAK for @p seqBytes arrived for QP @p qp: go back to it.
    void OnNak(uint32_t qp, uint64_t seqBytes);
    /// Sender: resume QP @p qp at payload offset @p toBytes (go-back-N), re-activating it if it was done.
    void Rewind(uint32_t qp, uint64_t toBytes);
    /// Sender: the retransmission timer of QP @p qp fired.
    void RetransmitTimer(uint32_t qp);
    /// Sender: schedule the retransmission timer of QP @p qp in @p delayPs (ps).
    void ArmRetransmitTimer(uint32_t qp, int64_t delayPs);
    /// Sender: QP @p qp sends @p p at @p nowPs: count a retransmission, restart its timeout.
    void NoteSent(QueuePair& qp, const FabricPacket& p, int64_t nowPs);
    /// A BECN (IB congestion control) arrived for QP @p qp: step up its congestion-control table.
    void OnBecn(uint32_t qp);
    /// Telemetry CC: ACK @p p echoed its path's utilization to QP @p qp: set its rate and window.
    void OnTelemetryAck(uint32_t qp, const FabricPacket& p);
    /// DCQCN reaction point: a CNP arrived for QP @p qp: cut its rate and restart its timers.
    void OnDcqcnCnp(uint32_t qp);
    /// Receiver: the data packet @p p arrived ECN/FECN-marked at @p nowPs (ps); notify its sender if due.
    void OnMarked(const FabricPacket& p, int64_t nowPs);
    /// The NIC consumed @p p from @p inPort: return its credits (credit mode) and free it.
    void Consume(FabricPacket* p, uint32_t inPort);

    /// @return a new data packet carrying the next payload of @p qp's flow
    FabricPacket* MakeDataPacket(const QueuePair& qp);
    /// Rate limiter: QP @p qp just sent @p p at @p nowPs (ps); set the earliest time of its next packet.
    void ChargeRate(QueuePair& qp, const FabricPacket& p, int64_t nowPs);
    /// Put queue pair @p qpIndex at the end of the round robin.
    void Activate(uint32_t qpIndex);
    /// Take the queue pair at m_active[@p idx] out of the round robin; the last one takes its place.
    void Deactivate(std::size_t idx);
    /// Set @p qp's pacing mark to @p ps, in ps (in its m_active entry too).
    void SetNextSend(QueuePair& qp, int64_t ps)
    {
        qp.nextSendPs = ps;
        if (qp.activeSlot != kNotActive)
        {
            m_active[qp.activeSlot].nextSendPs = ps;
        }
    }
    /// Account @p p as sent by QP @p qp at m_active[@p idx]; retire the QP after its last byte.
    void Advance(QueuePair& qp, std::size_t idx, const FabricPacket& p);
    /// Pacing: wake the port at @p earliestPs (ps; INT64_MAX: no QP waits) unless a wake-up comes sooner.
    void SchedulePaceWake(int64_t earliestPs, int64_t nowPs);
    /// Pacing: wake the port when the earliest rate-limited QP may send.
    void PaceWake();

    /// IB congestion control: the CCTI recovery timer of QP @p qp fired.
    void CctiTimer(uint32_t qp);
    /// Make flow @p flowId eligible for transmission.
    void StartFlow(uint64_t flowId);
    /// Record the completion of @p flowId at the receiver.
    void FinishFlow(uint64_t flowId);
    /// Send a control packet (ACK, NAK or CNP) of flow @p flowId back to @p to (@p aux: the AckSyndrome).
    void SendControl(PacketKind kind, uint64_t flowId, uint32_t to, uint64_t seqBytes, uint32_t aux = 0);
    /// DCQCN timers of QP @p qp.
    void IncreaseTimer(uint32_t qp);
    void AlphaTimer(uint32_t qp);
    /// Start DCQCN timers of QP @p qp if not running.
    void StartTimers(uint32_t qp);
    /// @return line rate of the NIC port, in bit/s
    double LineRateBps() const;

    /// Attribute accessors that forward to the notification point, the ACK coalescer and IbCcControl.
    void SetCnpInterval(Time interval);
    Time GetCnpInterval() const;
    void SetAckIntervalBytes(uint64_t bytes);
    uint64_t GetAckIntervalBytes() const;
    void SetCctiIncrease(uint32_t increase);
    uint32_t GetCctiIncrease() const;
    void SetCctiLimit(uint32_t limit);
    uint32_t GetCctiLimit() const;
    void SetCctiTimer(Time period);
    Time GetCctiTimer() const;
    void SetCctGapStep(Time step);
    Time GetCctGapStep() const;
    /**
     * @brief Set IbCcControl attribute @p name of this NIC to @p value (HostNic::Ccti* and CctGapStep
     * name IbCcControl's attributes).
     *
     * Building the NIC applies HostNic's defaults, which share IbCcControl's registration values: one
     * still at that value must not undo an IbCcControl default the user changed, so until then only
     * changed values are forwarded.
     * @param name the IbCcControl attribute
     * @param value its new value
     * @param atRegistrationDefault @p value equals the attribute's registration default
     */
    void ForwardToIbCc(const std::string& name, const AttributeValue& value, bool atRegistrationDefault);

    /// @return IbCcControl attribute @p name of this NIC, as a @p V (UintegerValue, TimeValue)
    template <typename V>
    V IbCcAttribute(const std::string& name) const
    {
        V value;
        m_ibCcAlgo->GetAttribute(name, value);
        return value;
    }

    /// @return the index in m_qps of flow @p flowId's queue pair, FlowTable::kNoQueuePair if the flow is
    /// not this NIC's or has not started
    uint32_t SenderQueuePair(uint64_t flowId) const
    {
        return m_flows->src[flowId] == m_nodeId ? m_flows->senderQp[flowId] : FlowTable::kNoQueuePair;
    }

    // What a packet's send reads of the NIC (PullPacket, MakeDataPacket, ChargeRate), on two lines of their
    // own: a wide fabric evicts them between two packets of one NIC.
    alignas(64) FlowTable* m_flows{nullptr};       ///< the run's flows (with each flow's queue-pair index here)
    std::size_t m_next{0};                         ///< round-robin cursor into m_active
    bool m_uec{false};                             ///< Ultra Ethernet transport (UecEnabled)
    bool m_dcqcn{true};                            ///< DCQCN on (RP and NP)
    uint32_t m_mtuBytes{cosim::kDefaultMtuBytes};  ///< payload bytes per full packet
    uint32_t m_headerBytes{0};                     ///< per-packet header + framing bytes
    uint64_t m_windowBytes{0};                     ///< per-QP window: most payload unacknowledged, in bytes (0 = none)
    std::vector<QueuePair> m_qps;                  ///< queue pairs, in creation order
    std::vector<ActiveQp> m_active;                ///< QPs with bytes left to send, round-robin
    std::array<uint32_t, kNumPriorities> m_activeAtPrio{}; ///< QPs in m_active per priority
    EventId m_paceEvent;                           ///< pending pacing wake-up
    int64_t m_paceAtPs{-1};                        ///< time of m_paceEvent, in ps (-1: none)

    DcqcnNotificationPoint m_np; ///< receiver: CNP pacing per flow (DCQCN)
    AckCoalescer m_acks;         ///< receiver: when to acknowledge
    GoBackNReceiver m_gbnRx;     ///< receiver: in-order delivery, NAKs
    GoBackNSender m_gbnTx;       ///< sender: ACK/NAK reactions, retransmission timeout
    bool m_rtoOn{false};         ///< the retransmission timer runs (a timeout is set, the link has no credits)
    /// UEC on credit links (CBFC): nothing is lost, so neither the timer nor reordering declares a loss
    bool m_uecLossless{false};
    Time m_retransmitTimeout;    ///< RetransmitTimeout attribute (given to m_gbnTx when a flow starts)

    uint32_t m_ackBytes{0};        ///< wire size of ACK and CNP packets, in bytes
    uint8_t m_controlPriority{7};  ///< priority of ACK and CNP packets
    bool m_ibCc{false};            ///< InfiniBand congestion control on (FECN -> BECN -> CCTI)
    bool m_constructed{false};     ///< the attribute defaults have been applied
    Ptr<DcqcnRateControl> m_dcqcnAlgo; ///< DCQCN parameters and reactions
    Ptr<IbCcControl> m_ibCcAlgo;       ///< IB congestion-control parameters and reactions
    bool m_telemetryCc{false};         ///< switch-telemetry congestion control on (TelemetryCcEnabled)
    Ptr<TelemetryRateControl> m_telemetryAlgo; ///< telemetry congestion-control parameters and reactions
    uint8_t m_echoUtilization{0};      ///< receiver: path utilization of the last data packet, for its ACK

    std::array<uint64_t, kLatencyBuckets> m_latency{}; ///< receive latency histogram
    uint64_t m_cnpsSent{0};      ///< CNPs sent
    uint64_t m_cnpsReceived{0};  ///< CNPs received
    uint64_t m_ecnReceived{0};   ///< marked data packets received
    uint64_t m_acksReceived{0};  ///< ACKs received
    uint64_t m_retransmittedPackets{0}; ///< data packets resent after a rewind
    uint64_t m_retransmittedBytes{0};   ///< payload of the data packets resent, in bytes
    uint64_t m_naksSent{0};             ///< NAKs sent
    uint64_t m_timeouts{0};             ///< retransmission timeouts
    uint64_t m_idleTimerEvents{0};      ///< retransmission-timer firings that resent nothing

    uint32_t m_qpsPerConnection{1};     ///< QP scaling: queue pairs per destination host
    std::unordered_map<uint32_t, uint16_t> m_nextQp; ///< QP scaling: next queue-pair index per destination
    uint64_t m_peakInflightBytes{0};    ///< largest unacknowledged payload of a QP (with a window), in bytes
    bool m_reorderTolerant{false};      ///< receiver places packets beyond a gap (no go-back-N NAKs)
    ReorderBuffer m_reorder;            ///< receiver: packets held beyond a gap
    uint64_t m_reorderedPackets{0};     ///< data packets held beyond a gap
    bool m_admission{false};            ///< receiver-driven admission (REQUEST / GRANT)
    uint32_t m_admissionChannels{2};    ///< admission: channels per receiver
    uint64_t m_admissionBufferBytes{0}; ///< admission: receive buffer per channel, in bytes
    uint64_t m_admissionChunkBytes{0};  ///< admission: payload per grant, in bytes
    CtsAdmission m_cts;                 ///< receiver: grants within the budget
    uint64_t m_grantsSent{0};           ///< grants sent
    /// UEC state per queue pair (index as m_qps), freed once every packet is acknowledged: a run of many
    /// flows keeps only the state of those in progress
    std::vector<std::unique_ptr<UecFlow>> m_uecFlows;
    Ptr<NsccWindow> m_nscc;             ///< NSCC parameters and reactions
    EntropySelector m_entropy;          ///< entropy choice (UecEntropyCount, UecEntropyHold)
    uint32_t m_entropyCount{256};       ///< entropy values a flow sprays over
    uint32_t m_entropyRing{32};         ///< good entropies a flow keeps for reuse (REPS)
    Time m_entropyHold;                 ///< how long a congested entropy is avoided
    Time m_uecRetransmitTimeout;        ///< UEC: a packet unanswered this long is sent again
    Time m_uecReorderWindow;            ///< UEC: a packet this much older than one SACKed is lost
    uint64_t m_reorderLosses{0};        ///< UEC: SACKs that declared older packets lost
    uint64_t m_uecAckEveryBytes{16384}; ///< UEC receiver: payload received per coalesced SACK, in bytes
    uint64_t m_sacksSent{0};            ///< UEC: SACKs sent
    UecCc m_uecCc{UecCc::NSCC};         ///< UEC congestion control (UecCongestionControl)
    UecDelivery m_uecDelivery{UecDelivery::RUD}; ///< UEC delivery mode (UecDeliveryMode)
    uint64_t m_rcccInitialCreditBytes{4096}; ///< RCCC: payload a sender sends unsolicited, in bytes
    uint64_t m_rcccCreditBytes{16384};  ///< RCCC: payload one credit grants, in bytes
    std::unordered_map<uint64_t, RcccFlow> m_rcccFlows; ///< RCCC receiver: flows seen and not finished, by flow id
    std::deque<uint64_t> m_rcccDemand;  ///< RCCC receiver: flows still owed credit, round-robin
    EventId m_rcccEvent;                ///< RCCC receiver: the next paced grant
    bool m_rcccPacing{false};           ///< RCCC receiver: m_rcccEvent is scheduled
    uint64_t m_rcccCreditsSent{0};      ///< RCCC: credit packets sent
    TracedCallback<uint64_t> m_flowFinishTrace; ///< flow id whose last byte arrived here
    TracedCallback<uint64_t, double> m_rateTrace; ///< (flow id, new rate in bit/s) on DCQCN changes
};

} // namespace ns3

#endif // COSIM_HOST_NIC_H
