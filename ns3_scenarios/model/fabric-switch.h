/**
 * @file
 * @ingroup cosim
 * An output-queued switch with a shared-buffer MMU, PFC, RED/ECN marking and a choice of routing among
 * equal-cost ports (ECMP hashing, static pinning, flowlets, adaptive, spraying).
 */
#ifndef COSIM_FABRIC_SWITCH_H
#define COSIM_FABRIC_SWITCH_H

#include "ecmp-hash.h"
#include "egress-port.h"
#include "fabric-node.h"
#include "flowlet-table.h"
#include "group-routes.h"
#include "link-telemetry.h"
#include "shared-buffer-mmu.h"

#include "ns3/event-id.h"
#include "ns3/random-variable-stream.h"
#include "ns3/traced-callback.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Where every node attaches to the fabric, shared by all switches of a run.
 *
 * A host has one link, so its route from any switch but its own leaf is its leaf's route: switches keep
 * routes per leaf (memory and build time grow with leaves, not hosts) and this table adds the last hop.
 */
struct HostAttachments
{
    static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max(); ///< no leaf

    /// The attachment of one node.
    struct Entry
    {
        uint32_t leafNode{kNone};  ///< node id of the switch the host hangs off (kNone: switch or unattached)
        uint32_t leafIndex{kNone}; ///< that switch's row in every switch's route table
        uint16_t leafPort{0};      ///< the leaf's port towards the host
    };

    std::vector<Entry> byNode; ///< indexed by node id
};

/**
 * @ingroup cosim
 * @brief Switch: per-destination table of equal-cost egress ports, per-flow ECMP hashing, ingress
 * buffer accounting (SharedBufferMmu) with PFC, and ECN marking on egress queue length.
 *
 * The table is CSR over destination leaves: the candidates for host d on leaf row r =
 * HostAttachments::byNode[d].leafIndex are m_routePorts[m_routeStart[r] .. m_routeStart[r+1]); on d's own
 * leaf the only candidate is the port to d. Routing picks one of the candidates per packet:
 * - ecmp (default): a hash of the EcmpHashFields, the node and EcmpSeed, so a flow always takes the same
 *   candidate, its packets stay in order and distinct flows can collide on a port, as in real fabrics;
 * - pinned: candidate (destination node id mod count), a static flow-to-uplink map (InfiniBand's
 *   destination-mod-k fat-tree routing);
 * - flowlet: a flow keeps its port while its packets come closer than FlowletTimeout; after a longer gap
 *   the next one takes the least-loaded candidate;
 * - adaptive: every packet takes the least-loaded candidate (fewest bytes queued; the hashed one wins
 *   ties), as InfiniBand adaptive routing does; receivers must tolerate reordering;
 * - spray: packets take the candidates in turn whatever their load (RoCE packet spraying).
 * - stripe: data packets take the candidates in turn, control packets follow the ECMP hash: a multi-plane
 *   NIC's port selector (cosim.network.planes), whose data splits over its ports to one packet whatever
 *   the ACKs it also sends.
 *
 * ECN (the DCQCN congestion point): a data packet seeing an egress queue of q bytes is marked with
 * probability 0 below Kmin, EcnPmax x (q - Kmin) / (Kmax - Kmin) between, 1 above Kmax. EcnMarkingPoint
 * says when it sees the queue: as it joins it (enqueue, q before it) or as it leaves it for the wire
 * (dequeue, q behind it, as the HPCC-derived ns-3 models do).
 *
 * Dragonfly routing (DragonflyRouting; a fabric whose switches are in groups, SetGroupRoutes): a packet
 * bound to another group goes towards it along GroupRoutes (inside its own group, then one link into the
 * target: local then global hop), and inside the destination's group by the table above; minimal is that.
 * Valiant and UGAL-L decide at the source's switch, for a data packet bound to another group: an
 * intermediate group (neither the source's nor the destination's) is drawn from the packet's ECMP hash (so
 * per flow under flow hashing, per packet where the entropy changes per packet, as under Ultra Ethernet);
 * Valiant always sends the packet there, UGAL-L only when the queue of the best port towards it times the
 * router hops of that path is below the queue of the best minimal port times the minimal hops. The packet
 * carries the group in FabricPacket::aux (group + 1; 0 = minimal) and goes there along GroupRoutes; the
 * first switch of that group clears aux, and the rest of the way is minimal. Control packets always go
 * minimally.
 *
 * Packet trimming (Ultra Ethernet; TrimThresholdBytes > 0, shared-buffer switches): a data packet that
 * arrives to an egress queue holding TrimThresholdBytes or more at its priority, or that the buffer would
 * drop, is cut to its header (TrimmedPacketBytes, no payload) and forwarded at TrimPriority, so its
 * receiver learns at once which packet to ask for again.
 */
class FabricSwitch : public FabricNode
{
  public:
    /// @return the TypeId of FabricSwitch
    static TypeId GetTypeId();

    FabricSwitch();
    ~FabricSwitch() override;

    /**
     * @brief Install the forwarding table.
     * @param hosts where every host attaches (shared by the switches of the fabric)
     * @param routeStart CSR offsets, one per leaf row plus one
     * @param routePorts egress port numbers, grouped by destination leaf
     */
    void SetRoutes(std::shared_ptr<const HostAttachments> hosts,
                   std::vector<uint32_t> routeStart,
                   std::vector<uint16_t> routePorts);

    /**
     * @brief Routes changed around the dead link of @p port (credit links): forward the packets queued on
     * it again, each to the port its route gives now (the same one if it has no other). Buffer accounting
     * is unchanged: a packet holds its input lane wherever it waits.
     */
    void ForwardQueued(uint32_t port);

    /**
     * @brief Install the routes towards groups (dragonfly): non-minimal routing needs them.
     * @param groups every node's group, shared by the switches of the fabric
     * @param routes this switch's ports and hops towards every group and leaf row
     */
    void SetGroupRoutes(std::shared_ptr<const SwitchGroups> groups, GroupRoutes routes);

    /// @return the CSR offsets of the route table, per destination leaf row plus one (SetRoutes)
    const std::vector<uint32_t>& GetRouteStart() const
    {
        return m_routeStart;
    }

    /// @return the equal-cost egress ports of the route table, grouped by destination leaf (SetRoutes)
    const std::vector<uint16_t>& GetRoutePorts() const
    {
        return m_routePorts;
    }

    /// @return the ports and hops towards every group (SetGroupRoutes; empty on a fabric without groups)
    const GroupRoutes& GetGroupRoutes() const
    {
        return m_groupRoutes;
    }

    /// @return where every host attaches (SetRoutes)
    std::shared_ptr<const HostAttachments> GetAttachments() const
    {
        return m_attachments;
    }

    /**
     * @brief Size the MMU (or, with credits, the input lanes) and ECN thresholds from the ports, after all
     * links are attached.
     * @param maxPacketBytes largest wire packet the NICs send, in bytes
     * @return an empty string, or why the buffer settings are impossible
     */
    std::string SetupBuffers(uint32_t maxPacketBytes);

    /// Use random stream @p stream for ECN marking; @return streams used (1)
    int64_t AssignStreams(int64_t stream);

    void Receive(FabricPacket* p, uint32_t inPort) override;
    void TransmitStarted(FabricPacket* p, uint32_t port) override;
    void DropQueued(FabricPacket* p, uint32_t port) override;

    /// How the switch chooses among equal-cost egress ports (the Routing attribute).
    enum class Routing : uint8_t
    {
        ECMP = 0,     ///< per-flow hash of the EcmpHashFields
        PINNED = 1,   ///< static: destination node id mod the number of candidates
        FLOWLET = 2,  ///< per flowlet: least loaded after a gap above FlowletTimeout
        ADAPTIVE = 3, ///< per packet: least loaded
        SPRAY = 4,    ///< per packet: round robin
        STRIPE = 5,   ///< per data packet: round robin; control packets per-flow hash (a NIC's port selector)
    };

    /// Adaptive routing's tie-break among equally loaded ports (the AdaptiveTies attribute).
    enum class AdaptiveTies : uint8_t
    {
        HASH = 0,   ///< the flow's ECMP-hash port first
        ROTATE = 1, ///< the next port in turn first (per switch)
    };

    /// Minimal or non-minimal routing on a grouped fabric (the DragonflyRouting attribute).
    enum class DragonflyRouting : uint8_t
    {
        MINIMAL = 0, ///< shortest paths only
        VALIANT = 1, ///< every data packet bound to another group via an intermediate group
        UGAL = 2,    ///< UGAL-L: via the intermediate group when its queue x hops is the smaller
    };

    /// Where ECN marking reads the egress queue (the EcnMarkingPoint attribute).
    enum class EcnMarkingPoint : uint8_t
    {
        ENQUEUE = 0, ///< when the packet joins the queue (the queue ahead of it)
        DEQUEUE = 1, ///< when it leaves the queue for the wire (the queue behind it)
    };

    /// @return the egress port @p p takes (spraying, flowlets: updates their state)
    uint32_t SelectPort(const FabricPacket& p);
    /// SelectPort among @p count > 1 @p candidates by any Routing but ECMP (out of line: ECMP's path stays short)
    uint32_t SelectOtherPort(const FabricPacket& p, const uint16_t* candidates, uint32_t count, uint64_t salt);

    /**
     * @brief The egress ports packets like @p p can take here, without changing any state: the one port
     * of a single route, ECMP hashing or pinning; every equal-cost candidate where the choice depends on
     * load or order (flowlet, adaptive, spray).
     * @param p a packet of the flow (its hash fields and destination)
     * @param out receives the ports (cleared first)
     */
    void RouteCandidates(const FabricPacket& p, std::vector<uint32_t>* out) const;

    /// @return data packets this switch sent towards an intermediate group (Valiant, UGAL)
    uint64_t GetNonMinimalPackets() const
    {
        return m_nonMinimal;
    }

    /// @return flowlets started (Routing flowlet)
    uint64_t GetFlowlets() const
    {
        return m_flowlets.GetFlowlets();
    }

    /// @return the ECN marking probability for a queue of @p queueBytes on port @p port
    double MarkProbability(uint32_t port, uint64_t queueBytes) const;

    /// @return whether a data packet joining a queue of @p queueBytes on @p port is marked (draws the RNG)
    bool DecideMark(uint32_t port, uint64_t queueBytes);

    /// @return the buffer manager
    Ptr<SharedBufferMmu> GetMmu() const
    {
        return m_mmu;
    }

    /// @return packets dropped for lack of buffer
    uint64_t GetDrops() const
    {
        return m_drops;
    }

    /// @return data packets trimmed to their header here
    uint64_t GetTrimmedPackets() const
    {
        return m_trims;
    }

    /// @return data packets ECN-marked here
    uint64_t GetEcnMarks() const
    {
        return m_ecnMarks;
    }

    /// @return PAUSE frames (XOFF and refreshes) sent
    uint64_t GetPauseFramesSent() const
    {
        return m_pauseFramesSent;
    }

    /// @return packets dropped because the PFC watchdog disabled their egress queue (queued or arriving)
    uint64_t GetWatchdogDrops() const
    {
        return m_watchdogDrops;
    }

    /// @return packets that arrived on a credit lane beyond its grant: impossible unless credits are wrong
    uint64_t GetCreditViolations() const
    {
        return m_inputs.GetViolations();
    }

    /// @return the largest occupancy of one input lane of one port seen (credit mode), in bytes
    uint64_t GetPeakLaneBytes() const
    {
        return uint64_t(m_inputs.GetPeakLaneBlocks()) * kCreditBlockBytes;
    }

  private:
    /// Per-port ECN thresholds: the attributes, or scaled with the port's rate.
    void SetupEcnThresholds();
    /// PFC: size every port's headroom and the MMU; @return an empty string, or why it cannot fit.
    std::string SetupSharedBuffer(uint32_t maxPacketBytes);
    /// Mark @p p (ECN or FECN) by the queue it joins on @p out (marking at enqueue), then queue it there.
    void MarkAndEnqueue(FabricPacket* p, uint32_t out);
    /// Mark @p p (a data packet not yet marked) by the queue of its priority on @p port, as DecideMark would.
    void MarkByQueue(FabricPacket* p, uint32_t port);
    /// Marking at dequeue: mark @p p by the queue it leaves behind on @p port.
    void MarkOnDequeue(FabricPacket* p, uint32_t port);
    /// Dragonfly: clear @p p's intermediate group once in it; at its source's switch (@p inPort its host's
    /// port), choose minimal or an intermediate group as DragonflyRouting says.
    void SteerByGroup(FabricPacket* p, uint32_t inPort);
    /// UGAL-L: @return whether the path via @p viaGroup beats the minimal one to @p dstGroup
    bool NonMinimalIsShorter(uint32_t dstGroup, uint32_t viaGroup) const;
    /// Grouped fabric: @return the group of @p p's destination's switch (kNoGroup: none)
    uint32_t DestinationGroup(const FabricPacket& p) const;
    /// Grouped fabric: @return the group @p p is routed towards from here (its intermediate group, else its
    /// destination's unless that is this switch's), or kNoGroup to route by the destination's leaf
    uint32_t TargetGroup(const FabricPacket& p) const;
    /// @return the fewest bytes queued on any of @p count @p candidates
    uint64_t LeastQueueBytes(const uint16_t* candidates, uint32_t count) const;
    /// Routing flowlet: the port of @p p among @p count @p candidates (@p hash: its ECMP hash).
    uint32_t SelectFlowletPort(const FabricPacket& p, const uint16_t* candidates, uint32_t count, uint64_t hash);
    /// Trimming: @return true if data packet @p p joining egress @p out is to be cut to its header.
    bool ShouldTrim(const FabricPacket& p, uint32_t out) const;
    /// Trimming: cut @p p, bound for egress @p port, to its header and lift it to the trim priority.
    void Trim(FabricPacket* p, uint32_t port);
    /// PFC: admit @p p to the shared buffer of @p inPort (pausing the sender if due) and queue it on @p out.
    void ReceiveInSharedBuffer(FabricPacket* p, uint32_t inPort, uint32_t out);
    /// PFC: @p p left for the wire: free its shared-buffer share and resume paused senders it allows.
    void ReleaseSharedBuffer(FabricPacket* p);
    /// Credit mode: account @p p in the shared input buffer of @p inPort (its lane) and queue it on @p out.
    void ReceiveOnLane(FabricPacket* p, uint32_t inPort, uint32_t out);
    /// Credit mode: @p p left for the wire: free its input lane and return the credits upstream.
    void ReleaseLane(FabricPacket* p);
    /// Send a PFC frame for @p prio out of @p port with @p quanta (0 = XON).
    void SendPause(uint32_t port, uint8_t prio, uint32_t quanta);
    /// Send XON for every paused (port, priority) whose buffer use allows it now.
    void ResumeWhereAllowed();
    /// Refresh an XOFF that still holds before the peer's pause timer expires.
    void RefreshPause(uint32_t port, uint8_t prio);

    std::shared_ptr<const HostAttachments> m_attachments; ///< each destination's leaf and last hop
    std::vector<uint32_t> m_routeStart; ///< CSR offsets into m_routePorts, per destination leaf row
    std::vector<uint16_t> m_routePorts; ///< equal-cost egress ports
    uint32_t m_ecmpSeed{0};             ///< perturbs the ECMP hash (per run)
    static constexpr uint32_t kNoGroup = std::numeric_limits<uint32_t>::max(); ///< route by leaf, not group
    std::shared_ptr<const SwitchGroups> m_groups; ///< every node's group (null: no groups)
    GroupRoutes m_groupRoutes;          ///< ports and hops towards every group (SetGroupRoutes)
    DragonflyRouting m_dragonflyRouting{DragonflyRouting::MINIMAL}; ///< minimal or via an intermediate group
    uint64_t m_nonMinimal{0};           ///< data packets sent towards an intermediate group
    Routing m_routing{Routing::ECMP};   ///< choice among equal-cost ports
    EcmpHashFields m_hashFields{EcmpHashFields::FLOW}; ///< what the ECMP hash covers
    uint64_t m_sprayNext{0}; ///< spray, stripe, adaptive ties rotated: packets so far (round-robin cursor)
    AdaptiveTies m_adaptiveTies{AdaptiveTies::HASH}; ///< adaptive routing's choice among equally loaded ports
    Time m_flowletTimeout;              ///< flowlet: gap that ends a flowlet
    int64_t m_flowletTimeoutPs{0};      ///< m_flowletTimeout in ps
    uint32_t m_flowletEntries{4096};    ///< flowlet: buckets of the flowlet table
    FlowletTable m_flowlets;            ///< flowlet: current flowlets

    EgressPort::FlowControl m_flowControl{EgressPort::FlowControl::PFC}; ///< of every link (SetupBuffers)
    Ptr<SharedBufferMmu> m_mmu;            ///< ingress accounting and PFC decisions

    /// @return the MMU, for the packet path: without Ptr's out-of-line null check
    SharedBufferMmu& Mmu() const
    {
        return *PeekPointer(m_mmu);
    }

    Ptr<LinkTelemetry> m_telemetry;        ///< in-band telemetry of the egress ports
    bool m_telemetryOn{false};             ///< m_telemetry stamps packets (SetupBuffers)
    uint32_t m_pauseQuanta{0xffff};        ///< quanta carried by XOFF frames (512 bit times each)
    uint32_t m_pauseFrameBytes{84};        ///< wire size of a PFC frame, in bytes
    uint64_t m_headroomBytes{0};           ///< PFC headroom per (port, priority), in bytes (0 = auto)
    bool m_allowLossyHeadroom{false};      ///< accept a headroom below the bytes in flight (lossy PFC)
    std::vector<std::array<EventId, kNumPriorities>> m_refresh; ///< pending XOFF refresh per port
    std::vector<std::pair<uint32_t, uint8_t>> m_xoffed;         ///< (port, priority) pairs in XOFF

    bool m_ecnEnabled{true};                 ///< mark ECN at all
    EcnMarkingPoint m_ecnPoint{EcnMarkingPoint::ENQUEUE}; ///< when a packet sees the queue it is marked by
    bool m_markAtEnqueue{true};              ///< m_ecnEnabled and marking at enqueue (SetupBuffers)
    bool m_markAtDequeue{false};             ///< m_ecnEnabled and marking at dequeue (SetupBuffers)
    uint64_t m_kminBytes{0};                 ///< Kmin, in bytes (0 = 100 KB per 25 Gbps of port rate)
    uint64_t m_kmaxBytes{0};                 ///< Kmax, in bytes (0 = 400 KB per 25 Gbps of port rate)
    double m_pmax{0.2};                      ///< marking probability at Kmax
    std::vector<double> m_portKmin;          ///< Kmin per port, in bytes
    std::vector<double> m_portKmax;          ///< Kmax per port, in bytes
    Ptr<UniformRandomVariable> m_uniform;    ///< marking decisions

    uint64_t m_trimThresholdBytes{0}; ///< trim data packets joining a queue this long, in bytes (0 = never)
    uint32_t m_trimmedBytes{64};      ///< wire size of a trimmed packet, in bytes
    uint8_t m_trimPriority{7};        ///< priority class of trimmed packets
    uint64_t m_trims{0};              ///< data packets trimmed

    uint64_t m_drops{0};           ///< packets dropped for lack of buffer
    uint64_t m_ecnMarks{0};        ///< data packets marked
    uint64_t m_pauseFramesSent{0}; ///< PFC frames with non-zero quanta sent
    uint64_t m_watchdogDrops{0};   ///< packets dropped at queues the PFC watchdog disabled
    TracedCallback<const FabricPacket*> m_dropTrace; ///< a packet found no buffer
};

} // namespace ns3

#endif // COSIM_FABRIC_SWITCH_H
