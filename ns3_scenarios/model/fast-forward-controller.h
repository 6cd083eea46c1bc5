/**
 * @file
 * @ingroup cosim
 * Steady-state fast-forward: flows whose rates, queues and flow-control state have settled are frozen and
 * credited analytically until the next event that can change them.
 */
#ifndef COSIM_FAST_FORWARD_CONTROLLER_H
#define COSIM_FAST_FORWARD_CONTROLLER_H

#include "fabric-node.h"
#include "flow-table.h"

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace ns3
{

class HostNic;

/**
 * @ingroup cosim
 * @brief Finds steady flows and fast-forwards them (opt-in; the engine creates it only when Enabled).
 *
 * Every CheckInterval, while some flow sends and is not frozen, it samples each sending flow (bytes handed to the
 * port; DCQCN rate or IB CCTI) and every egress port on the flow's data path (queued bytes; time paused by PFC or
 * stalled for credits). A flow is steady when, over the last StabilityWindow, its sending rate in the window's
 * second half is within RateTolerance of the first half's, its congestion-control rate moved by less than
 * RateTolerance, and every port on its path was neither paused nor credit-stalled and kept its queue within
 * QueueToleranceBytes (or RateTolerance of its size). Flows sharing a port form a component; a component all of
 * whose flows are steady is frozen: its senders stop injecting (HostNic::FreezeFlow), their congestion-control
 * timers are held, packets in flight drain. Its span ends at the earliest time a flow of it would finish at its
 * measured rate, less FinishMargin, so every flow still ends packet by packet; or, when a new flow starts on one of
 * its ports, as soon as its packets in flight drained (a span is credited only with nothing in flight). Spans
 * shorter than MinSpan are not taken. At the end each flow is credited its rate times the span less its rate's
 * share of the component's standing queue, in whole packets (HostNic::ThawFlow; the remainder is owed to its next
 * span), and the ports on its path count those packets as sent. Frozen flows keep their place in their NIC's round
 * robin, and all flows of a span are thawed before any sends, so that flows sharing a NIC stay in the order they
 * had.
 *
 * Paths follow the switches' routing (FabricSwitch::RouteCandidates): one port per hop with ECMP or
 * pinning, every candidate of a hop with flowlets, adaptive routing or spraying.
 */
class FastForwardController : public Object
{
  public:
    /// @return the TypeId of FastForwardController
    static TypeId GetTypeId();

    FastForwardController();
    ~FastForwardController() override;
    FastForwardController(const FastForwardController&) = delete;
    FastForwardController& operator=(const FastForwardController&) = delete;

    /**
     * @brief Watch the flows of @p flows on the fabric of @p nodes (indexed by node id; hosts are HostNic)
     * and schedule the first check. Hooks FlowTable::onStart.
     */
    void Start(FlowTable* flows, std::vector<Ptr<FabricNode>> nodes);

    /// @return the Enabled attribute
    bool IsEnabled() const
    {
        return m_enabled;
    }

    /// @return spans taken: components frozen and credited
    uint64_t GetSpans() const
    {
        return m_spans;
    }

    /// @return spans ended early by a new flow on one of their ports
    uint64_t GetSpansCut() const
    {
        return m_spansCut;
    }

    /// @return the sum over frozen flows of the time they were frozen, in ps
    int64_t GetFlowTimePs() const
    {
        return m_flowTimePs;
    }

    /// @return payload credited to flows at the end of spans, in bytes
    uint64_t GetCreditedBytes() const
    {
        return m_creditedBytes;
    }

    /// @return data packet-hops the credited packets stand for (each packet times the hops of its path)
    uint64_t GetSkippedPacketHops() const
    {
        return m_skippedHops;
    }

    /// @return flows a span ended for while packets of theirs were still in flight: their credit waits for
    /// their next span
    uint64_t GetUncreditedFlows() const
    {
        return m_uncredited;
    }

    /// @return checks made (each one a simulator event)
    uint64_t GetChecks() const
    {
        return m_checksMade;
    }

  protected:
    void DoDispose() override;

  private:
    /// A sending flow under watch.
    struct Watch
    {
        uint64_t flowId{0};           ///< the flow
        uint32_t firstPort{0};        ///< its path's ports: m_pathPorts[firstPort, firstPort + nPorts)
        uint32_t nPorts{0};           ///< ports on its path (all candidates of a multi-path hop)
        uint32_t hops{0};             ///< links on its path
        uint32_t samples{0};          ///< consecutive checks sampled (the history holds min(samples, ring))
        std::vector<uint64_t> sent;   ///< ring: bytes handed to the port at each check, in bytes
        std::vector<int64_t> mark;    ///< ring: the QP's pacing mark (HostNic::GetFlowPacingMarkPs), in ps
        std::vector<double> ccRate;   ///< ring: DCQCN rate in bit/s, or -CCTI with IB congestion control
        int32_t component{-1};        ///< index into m_frozen while frozen, else -1
        double rateBytesPerPs{0};     ///< frozen: the rate it is credited at, in bytes per ps
        double baseDelayPs{0};        ///< one full packet's way through empty queues (serialization and
                                      ///< propagation at every hop), in ps
        double queuedBytes{0};        ///< frozen: its bytes in flight at the freeze beyond rate x baseDelayPs
                                      ///< (its share of the standing queues; may be negative), in bytes
        double owedBytes{0};          ///< delivery its past spans earned but were not credited (a fraction of
                                      ///< a packet, or a whole span thawed with packets in flight), in bytes
    };

    /// A frozen component.
    struct Frozen
    {
        std::vector<uint64_t> flows;  ///< its flows
        std::vector<uint32_t> ports;  ///< the ports of their paths
        int64_t startPs{0};           ///< when it was frozen, in ps
        int64_t endPs{0};             ///< when its span is planned to end, in ps
        EventId thaw;                 ///< the planned end
        uint32_t retries{0};          ///< ends deferred in a row with packets in flight and none arriving
        uint64_t rcvdBytes{0};        ///< its flows' payload received when its end was last deferred, in bytes
        bool cut{false};              ///< a new flow on one of its ports ends it as soon as its packets drained
        bool live{false};             ///< this slot holds a frozen component
    };

    /// The check event: sample, find steady components, freeze them; schedule the next check.
    void Check();
    /// Schedule the next check, unless one is pending: the next tick of the running grid of checks, or one
    /// CheckInterval from now when checks had stopped.
    void ScheduleCheck();
    /// FlowTable::onStart: a flow started; end at once every span it would share a port with.
    void OnFlowStart(uint64_t flowId);
    /// Compute the path of flow @p flowId into m_pathPorts; @return its watch.
    Watch MakeWatch(uint64_t flowId);
    /// Sample the ports of @p w's path at check m_checks (each port once per check).
    void SamplePorts(const Watch& w);
    /// @return true if every port of @p w's path is steady over the window
    bool PortsSteady(const Watch& w) const;
    /// @return true if flow @p w is steady over the window
    bool FlowSteady(const Watch& w) const;
    /// @return the sending rate of @p w over the window, in bytes per ps: bytes between the pacing marks of
    /// the window's first and last sample over the time between them (whole packets, exactly timed)
    double WindowRate(const Watch& w) const;
    /// Freeze the flows of watch indices [@p first, @p last) for a span ending at @p endPs (ps).
    void Freeze(const uint32_t* first, const uint32_t* last, int64_t endPs);
    /// @return true if no packet of component @p c's flows is in flight
    bool Drained(const Frozen& f) const;
    /// The planned end of component @p c: thaw it, or wait one more check if packets are still in flight.
    void PlannedThaw(uint32_t c);
    /// A new flow starts on a port of component @p c: thaw it now, or as soon as its packets drained.
    void Cut(uint32_t c);
    /// End the span of component @p c now; @p cut: a new flow cut it short.
    void Thaw(uint32_t c, bool cut);
    /// @return the sender NIC of flow @p flowId
    HostNic& Sender(uint64_t flowId) const;
    /// @return the egress port with global index @p port
    EgressPort& PortAt(uint32_t port) const;
    /// @return union-find root of @p i in m_parent
    uint32_t Find(uint32_t i);

    bool m_enabled{false};          ///< the engine creates the controller
    Time m_interval;                ///< CheckInterval
    Time m_window;                  ///< StabilityWindow
    double m_rateTolerance{0.01};   ///< RateTolerance (relative)
    uint64_t m_queueToleranceBytes{0}; ///< QueueToleranceBytes
    Time m_minSpan;                 ///< MinSpan
    Time m_finishMargin;            ///< FinishMargin
    Time m_idleStop;                ///< IdleStop
    int64_t m_idleSincePs{-1};      ///< since when no watched flow progressed and nothing was frozen, in ps (-1: it did)
    uint32_t m_ring{0};             ///< samples a history holds: window / interval + 1

    FlowTable* m_flows{nullptr};               ///< the run's flows
    std::vector<Ptr<FabricNode>> m_nodes;      ///< by node id
    std::vector<uint32_t> m_portBase;          ///< global index of each node's port 0
    std::vector<uint32_t> m_portNode;          ///< node of each global port
    std::vector<uint32_t> m_pathPorts;         ///< the watches' path ports, concatenated (compacted at checks)
    static constexpr uint32_t kNoWatch = std::numeric_limits<uint32_t>::max(); ///< m_watchOf: not watched
    std::vector<uint32_t> m_watchOf;           ///< flow id -> index in m_watches (kNoWatch: none)
    std::vector<Watch> m_watches;              ///< flows under watch
    // per global port: a ring of samples, and the check it was last sampled at
    std::vector<uint64_t> m_portQueue;         ///< [port * ring + slot]: queued bytes
    std::vector<int64_t> m_portBlocked;        ///< [port * ring + slot]: paused + stalled time so far, in ps
    std::vector<uint64_t> m_portLastCheck;     ///< check of the port's latest sample (0: never)
    std::vector<uint32_t> m_portSamples;       ///< consecutive checks sampled
    std::vector<int32_t> m_portFrozenBy;       ///< component frozen on the port, -1 if none
    std::vector<uint32_t> m_parent;            ///< union-find over watches (scratch)
    std::vector<int32_t> m_portOwner;          ///< first watch seen on each port at this check (scratch)
    std::vector<uint32_t> m_touched;           ///< ports given an owner at this check (scratch)
    std::vector<uint8_t> m_bad;                ///< per component root: a flow of it is not steady (scratch)
    std::vector<double> m_spanPs;              ///< per component root: the span it could take, in ps (scratch)
    std::vector<uint32_t> m_order;             ///< unfrozen watches grouped by component (scratch)
    std::vector<Frozen> m_frozen;              ///< frozen components (slots reused)
    std::vector<uint64_t> m_started;           ///< flows started since the last check
    EventId m_checkEvent;                      ///< the next check
    int64_t m_lastTickPs{-1};                  ///< time of the last check, in ps (-1: checks stopped)
    uint64_t m_ticksToCheck{1};                ///< check intervals from the last check to the next

    uint64_t m_checks{0};        ///< the history rings' clock: grows by the intervals between two checks on one
                                 ///< grid (skipped ticks included), by one across a stop of the checks
    uint64_t m_checksMade{0};    ///< checks made
    uint64_t m_spans{0};         ///< spans taken
    uint64_t m_spansCut{0};      ///< spans cut short by a new flow
    int64_t m_flowTimePs{0};     ///< frozen flow-time, in ps
    uint64_t m_creditedBytes{0}; ///< payload credited, in bytes
    uint64_t m_skippedHops{0};   ///< data packet-hops credited
    uint64_t m_uncredited{0};    ///< flows thawed with packets in flight, their credit deferred
};

} // namespace ns3

#endif // COSIM_FAST_FORWARD_CONTROLLER_H
