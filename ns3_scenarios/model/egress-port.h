/**
 * @file
 * @ingroup cosim
 * One direction of a point-to-point link: priority queues, serialization at the link rate, then
 * propagation to the peer node (store-and-forward).
 */
#ifndef COSIM_EGRESS_PORT_H
#define COSIM_EGRESS_PORT_H

#include "credit-arbiter.h"
#include "fabric-packet.h"
#include "packet-source.h"
#include "pfc-arbiter.h"
#include "reusable-event.h"

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/traced-callback.h"

#include <array>
#include <vector>

namespace ns3
{

class FabricNode;
class PacketPool;
class PartitionExchange;
struct PortFault;

/**
 * @ingroup cosim
 * @brief Egress side of one link direction: strict-priority FIFOs, a serializer and a pipe.
 *
 * A packet is serialized at DataRate (wire bytes, headers included), then arrives at the peer after
 * PropagationDelay, whole (store-and-forward). The port keeps at most two pending events, whatever its
 * load: the end of the current serialization and the arrival of the oldest packet on the wire (packets
 * on the wire are kept in arrival order, as htsim's pipes do). Nothing is allocated per packet.
 *
 * Which packet goes next is the link's flow control (LinkFlowControl): link-level control frames first,
 * then the PfcArbiter (strict priority over what the peer has not paused) or the CreditArbiter (weighted
 * round robin over virtual lanes holding credits); the source is asked only for what they allow.
 */
class EgressQueueSampler;

class EgressPort : public Object
{
  public:
    /// Link-level flow control of the link this port transmits on.
    enum class FlowControl : uint8_t
    {
        PFC = 0,    ///< Ethernet priority flow control: the peer pauses priorities (RoCE)
        CREDIT = 1, ///< per-virtual-lane credits advertised by the peer's input buffer (InfiniBand)
    };

    /// @return the TypeId of EgressPort
    static TypeId GetTypeId();

    EgressPort();
    ~EgressPort() override;
    EgressPort(const EgressPort&) = delete;
    EgressPort& operator=(const EgressPort&) = delete;

    /**
     * @brief Wire the port: it belongs to @p owner as port @p index and delivers to @p peer.
     * @param owner node that transmits on this port
     * @param index this port's number at @p owner
     * @param peer node at the far end of the link
     * @param peerPort number of the port at @p peer that leads back (the packet's input port there)
     * @param pool packet allocator of the run
     */
    void Connect(FabricNode* owner, uint32_t index, FabricNode* peer, uint32_t peerPort, PacketPool* pool);

    /**
     * @brief Cut the link (a partitioned run): its far end is simulated in another partition, so each packet
     * is posted to @p exchange as it starts serializing, for arrival there, instead of delivered from here.
     * @param exchange the run's exchange (not owned), or null to deliver again
     */
    void SetExchange(PartitionExchange* exchange)
    {
        m_exchange = exchange;
    }

    /// Pull packets from @p source whenever the port's own queues are empty (not owned; may be null).
    void SetSource(PacketSource* source);

    /// Queue @p p at its priority and start transmitting if the port is idle.
    void Enqueue(FabricPacket* p);

    /// Tell the port its source may have a packet: transmit if idle.
    void Wake();

    /// Queue a link-level control frame (PFC PAUSE, IB credit update): sent first, never paused itself.
    void EnqueueControl(FabricPacket* p);

    /// Report queue changes to @p sampler as its watched port number @p index (not owned).
    void SetSampler(EgressQueueSampler* sampler, uint32_t index)
    {
        m_sampler = sampler;
        m_samplerIndex = index;
    }

    /// The sampler read this port: report the next queue change again.
    void ClearSampleMark()
    {
        m_sampleMarked = false;
    }

    /// @return the link-level flow control this port obeys (the LinkFlowControl attribute)
    FlowControl GetFlowControl() const
    {
        return m_flowControl;
    }

    /// @return the queue (priority class or, with credits, virtual lane) packets of @p prio use
    uint8_t QueueOf(uint8_t prio) const
    {
        return m_flowControl == FlowControl::CREDIT ? uint8_t(prio % m_dataVls) : prio;
    }

    /**
     * @brief Credit mode: what the peer's input buffer of this link advertises, and the largest packet sent.
     * @param reservedBlocks credits every virtual lane starts with (the peer's reservation), in 64-byte blocks
     * @param capacityBlocks the peer's whole input buffer of this link (a lane never holds more credits)
     * @param maxPacketBytes largest wire packet a source behind this port sends, in bytes
     */
    void InitCredits(uint32_t reservedBlocks, uint32_t capacityBlocks, uint32_t maxPacketBytes);

    /// Credit mode: the peer freed @p blocks 64-byte blocks of virtual lane @p vl.
    void AddCredits(uint8_t vl, uint32_t blocks);

    /// @return credits (64-byte blocks) held for virtual lane @p vl
    uint64_t GetCredits(uint8_t vl) const
    {
        return m_creditArbiter.GetCredits(vl);
    }

    /// @return total time virtual lane @p vl had data waiting but too few credits, in ps (ongoing: to now)
    int64_t GetCreditStallPs(uint8_t vl) const;

    /// @return number of data virtual lanes (credit mode)
    uint32_t GetDataVls() const
    {
        return m_dataVls;
    }

    /**
     * @brief A PAUSE frame for priority @p prio arrived from the peer: stop (or resume) that priority.
     * @param prio the priority class paused
     * @param quanta pause time in units of 512 bit times at this port's rate (0 = resume now)
     */
    void Pause(uint8_t prio, uint32_t quanta);

    /// @return bit p set if priority p is currently paused by the peer
    uint8_t GetPausedMask() const
    {
        return m_pfcArbiter.GetPausedMask();
    }

    /// @return total time priority @p prio spent paused so far, in ps (an ongoing pause counts up to now)
    int64_t GetPausedPs(uint8_t prio) const;

    /**
     * @brief PFC watchdog: disable the queue of priority @p prio (PFC links only): drop what it holds
     * (the owner frees each packet, FabricNode::DropQueued), end its pause, and ignore PAUSE frames for it
     * until EnableQueue. The owner drops what arrives for it meanwhile (FabricSwitch).
     */
    void DisableQueue(uint8_t prio);

    /// PFC watchdog: serve priority @p prio again and obey PAUSE frames for it.
    void EnableQueue(uint8_t prio);

    /// @return true if the PFC watchdog disabled the queue of priority @p prio
    bool IsQueueDisabled(uint8_t prio) const
    {
        return m_disabledMask & (1u << prio);
    }

    /// @return PAUSE frames (with non-zero quanta) received for priority @p prio
    uint64_t GetPauseFramesReceived(uint8_t prio) const
    {
        return m_pfcArbiter.GetPauseFrames(prio);
    }

    /// @return wire bytes queued over all priorities (not counting the packet being serialized), in bytes
    uint64_t GetQueueBytes() const
    {
        return m_queuedBytes;
    }

    /// @return wire bytes queued in the queue priority @p prio uses, in bytes
    uint64_t GetQueueBytes(uint8_t prio) const
    {
        return m_queues[QueueOf(prio)].Bytes();
    }

    /**
     * @brief Count @p packets data packets of @p wireBytes in all as sent, without sending them: the
     * packets a fast-forwarded span credited to flows crossing this port (FastForwardController), so that
     * byte and packet counters add up.
     */
    void CountSkipped(uint64_t packets, uint64_t wireBytes)
    {
        m_txPackets += packets;
        m_txDataPackets += packets;
        m_txBytes += wireBytes;
    }

    /// @return largest GetQueueBytes() seen at any enqueue, in bytes
    uint64_t GetPeakQueueBytes() const
    {
        return m_peakQueueBytes;
    }

    /// @return the link rate
    DataRate GetDataRate() const
    {
        return m_rate;
    }

    /// Set the link rate.
    void SetDataRate(DataRate rate);

    /// @return the link rate, in bit/s
    uint64_t GetRateBps() const
    {
        return m_rateBps;
    }

    /// @return the propagation delay
    Time GetPropagationDelay() const
    {
        return m_delay;
    }

    /// Set the propagation delay.
    void SetPropagationDelay(Time delay);

    /// @return time to serialize @p wireBytes at the link rate, in ps (rounded up)
    int64_t SerializationPs(uint64_t wireBytes) const;

    /// @return wire bytes transmitted so far, in bytes
    uint64_t GetTxBytes() const
    {
        return m_txBytes;
    }

    /// @return packets transmitted so far
    uint64_t GetTxPackets() const
    {
        return m_txPackets;
    }

    /// @return data packets transmitted so far
    uint64_t GetTxDataPackets() const
    {
        return m_txDataPackets;
    }

    /// @return data packets transmitted so far from queue @p q (priority with PFC, lane with credits)
    uint64_t GetTxDataPackets(uint8_t q) const
    {
        uint64_t sent = 0;
        for (uint8_t prio = 0; prio < kNumPriorities; ++prio)
        {
            sent += QueueOf(prio) == q ? m_txDataPerPriority[prio] : 0;
        }
        return sent;
    }

    /// @return packets dropped at enqueue because MaxQueueBytes would be exceeded
    uint64_t GetDrops() const
    {
        return m_drops;
    }

    /// @return true if the port runs link-level retry (the LinkLevelRetry attribute)
    bool GetLinkLevelRetry() const
    {
        return m_llr;
    }

    /// @return the node at the far end of the link
    FabricNode* GetPeer() const
    {
        return m_peer;
    }

    /// @return the port number at the peer that packets from this port arrive on (their input port there)
    uint32_t GetPeerPort() const
    {
        return m_peerPort;
    }

    /// Obey the fault state @p fault (LinkFaultModel; not owned; null: no faults, the default).
    void SetFault(PortFault* fault)
    {
        m_fault = fault;
    }

    /// The fault state said the link went down or up: a credit link stops or resumes sending.
    void LinkStateChanged();

    /// Move every queued data packet (by priority, each queue in order) to @p out: the port's queues empty.
    void TakeQueued(std::vector<FabricPacket*>& out);

    /// @return queue @p q (a priority or, with credits, a virtual lane), read-only for inspection
    const PacketFifo& GetQueue(uint8_t q) const
    {
        return m_queues[q];
    }

  protected:
    void DoDispose() override;

  private:
    /// Start serializing the next packet if idle and one is available: control frames first, then what
    /// the arbiter of the link's flow control picks.
    void TrySend();
    /// Serialize @p p now and put it on the wire (whatever its origin).
    void StartTransmission(FabricPacket* p);
    /// Cut link: @p p, serializing for @p serPs, is posted to the far partition for arrival at @p duePs.
    void PostToPartition(FabricPacket* p, int64_t duePs, int64_t serPs);
    /// @p p leaves the port's queues or source: mark the port busy and tell the owner (buffer release).
    void HandOver(FabricPacket* p);

    /// Event: the current serialization ended.
    void TransmitDone();
    /// Event: the oldest packet on the wire reached the peer.
    void DeliverHead();
    /// DeliverHead on a port with a fault state: lose, hold or resend the head as the link's state says.
    void DeliverThroughFault();
    /// Take the head off the wire and schedule the next arrival.
    FabricPacket* PopWire();
    /// Credit link without LLR, event: the receiver's NAK of a corrupted packet of @p wireBytes arrived; its
    /// resend takes the link for a serialization before anything queued (a LINK_RESEND frame, discarded on
    /// arrival: the held original is delivered in its place).
    void LinkResendNak(uint32_t wireBytes);
    /// LLR: the frame at the head of the wire arrived corrupted: the receiver discards it and what follows
    /// until the replay, and its NACK reaches this port one link delay later (LlrNackArrived). Counted by
    /// the fault model (LinkFaultModel::GetLlrRetries) and as a link_retransmitted loss row of this port.
    void LlrCorrupted();
    /// LLR: frames arriving while the receiver waits for the replay are discarded (kept for the replay).
    void LlrDiscardHead();
    /// LLR event: the receiver's NACK arrived; go back N: everything from the corrupted frame on is sent
    /// again, before anything new.
    void LlrNackArrived();
    /// The queue changed: tell the sampler once per sample.
    void NoteQueueChange()
    {
        if (!m_sampleMarked && m_sampler != nullptr)
        {
            m_sampleMarked = true;
            MarkForSampler();
        }
    }
    /// Out of line, so this header needs only a forward declaration of the sampler.
    void MarkForSampler();
    /// Take the head of queue @p q (priority or lane), keeping the byte count, mask and sampler in step.
    FabricPacket* PopQueue(uint8_t q);

    /// PFC: strict priority over unpaused queues, then the source; @return the packet handed over, or
    /// nullptr.
    FabricPacket* ArbitratePfc();
    /// PFC: the pause of priority @p prio ends (expiry or resume frame).
    void EndPause(uint8_t prio);

    /// Credits: queued lanes by weighted round robin, then the source for lanes that can take a full
    /// packet; @return the packet handed over (its credits charged), or nullptr.
    FabricPacket* ArbitrateCredit();
    /// Credits: recompute the credit-stalled lanes and report the changes.
    void UpdateStalls();
    /// Credits: VlArbitrationWeights attribute accessors.
    void SetVlWeights(std::string weights);
    std::string GetVlWeights() const;

    // Members in the order of use per packet, from the port's two events on: what TransmitDone, DeliverHead,
    // TrySend and StartTransmission touch lies within the four cache lines from the event that runs, which
    // the scheduler prefetches (TimingWheelScheduler::Prefetch) before the event's turn; a port is touched
    // again only a serialization or a link delay later, by when a large fabric has evicted it.
    ReusableEvent<EgressPort, &EgressPort::TransmitDone> m_txDoneEvent{this}; ///< end of serialization
    ReusableEvent<EgressPort, &EgressPort::DeliverHead> m_deliverEvent{this}; ///< arrival at the peer
    PacketFifo m_onWire;                             ///< serialized or serializing packets, arrival order
    int64_t m_wireHeadDuePs{0};                      ///< time m_onWire's first packet has fully arrived, in ps
    FabricNode* m_peer{nullptr};                     ///< receiving node
    uint32_t m_peerPort{0};                          ///< input port number at m_peer
    bool m_busy{false};                              ///< a packet is being serialized
    bool m_txHeld{false};                            ///< a credit link is down: send nothing
    bool m_deliveryPending{false};                   ///< m_deliverEvent is scheduled
    uint8_t m_nonEmptyMask{0};                       ///< bit p: m_queues[p] holds a packet
    PortFault* m_fault{nullptr};                     ///< fault state (LinkFaultModel), null without faults
    PartitionExchange* m_exchange{nullptr};          ///< a cut link's exchange (SetExchange), else null
    uint8_t m_disabledMask{0};                       ///< bit p: the PFC watchdog disabled priority p
    FlowControl m_flowControl{FlowControl::PFC};     ///< link-level flow control mode
    bool m_sampleMarked{false};        ///< a change was reported and not yet sampled
    uint32_t m_index{0};               ///< port number at m_owner
    FabricNode* m_owner{nullptr};      ///< transmitting node
    PacketSource* m_source{nullptr};   ///< pulled when the queues are empty
    EgressQueueSampler* m_sampler{nullptr}; ///< told about queue changes (may be null)
    int64_t m_psPerByte{0};        ///< 8e12 / m_rateBps when that is an integer (exact shortcut), else 0
    int64_t m_delayPs{0};          ///< m_delay in ps
    uint64_t m_txBytes{0};         ///< wire bytes sent, in bytes
    uint64_t m_txPackets{0};       ///< packets sent
    uint64_t m_txDataPackets{0};   ///< data packets sent
    uint64_t m_queuedBytes{0};     ///< wire bytes in m_queues, in bytes
    uint64_t m_peakQueueBytes{0};  ///< high-water mark of m_queuedBytes, in bytes
    uint64_t m_maxQueueBytes{0};   ///< tail-drop limit, in bytes (0 = unlimited)
    PacketFifo m_control;                            ///< link-level control frames, served first
    std::array<PacketFifo, kNumPriorities> m_queues; ///< one FIFO per priority; higher index served first
    std::array<uint64_t, kNumPriorities> m_txDataPerPriority{}; ///< data packets sent, per priority
    PacketPool* m_pool{nullptr};       ///< packet allocator
    uint32_t m_samplerIndex{0};        ///< this port's number at m_sampler
    uint64_t m_rateBps{0};             ///< m_rate in bit/s

    uint64_t m_drops{0};                             ///< packets tail-dropped

    uint32_t m_dataVls{2};                              ///< data virtual lanes (credit mode)
    PfcArbiter m_pfcArbiter;                            ///< PFC: pause state, strict priority
    CreditArbiter m_creditArbiter;                      ///< credits: lane credits, WRR, stalls
    std::array<EventId, kNumPriorities> m_pauseExpiry;  ///< PFC: end of the current pause
    DataRate m_rate;      ///< link rate
    Time m_delay;         ///< propagation delay

    // Link-level retry: touched only on a corrupted frame and during its replay, so kept off the hot lines.
    bool m_llr{false};              ///< LinkLevelRetry attribute: corrupted frames are replayed on this hop
    bool m_llrAwaitingReplay{false}; ///< the receiver saw a corrupted frame and discards until the replay
    PacketFifo m_llrReplay;         ///< frames from the corrupted one on, in hop sequence order
    ReusableEvent<EgressPort, &EgressPort::LlrNackArrived> m_llrNackEvent{this}; ///< the receiver's NACK arrives

    TracedCallback<const FabricPacket*> m_txTrace;   ///< a packet starts serialization
    TracedCallback<const FabricPacket*> m_dropTrace; ///< a packet is tail-dropped
    /// pause state change: (priority, true = paused / false = resumed)
    TracedCallback<uint8_t, bool> m_pauseTrace;
    /// a PAUSE frame (non-zero quanta) for a queue the PFC watchdog disabled arrived and was ignored: (priority)
    TracedCallback<uint8_t> m_pauseIgnoredTrace;
    /// credit-stall state change: (virtual lane, true = stall began / false = ended)
    TracedCallback<uint8_t, bool> m_stallTrace;
};

} // namespace ns3

#endif // COSIM_EGRESS_PORT_H
