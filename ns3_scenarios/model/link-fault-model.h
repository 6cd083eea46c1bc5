/**
 * @file
 * @ingroup cosim
 * Network faults of a run: links that go down and up, run slower or corrupt packets, and the switches'
 * routes converging around them.
 */
#ifndef COSIM_LINK_FAULT_MODEL_H
#define COSIM_LINK_FAULT_MODEL_H

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ns3
{

class EgressPort;
class FabricNode;
class LinkFaultModel;

/**
 * @ingroup cosim
 * @brief The fault state of one egress port (one direction of a link), read by EgressPort when it
 * delivers a packet. Ports of a run without faults have none (EgressPort::m_fault is null).
 */
struct PortFault
{
    LinkFaultModel* model{nullptr}; ///< owner: counters and logs
    bool down{false};               ///< the link is down now
    int64_t lastDownPs{-1};         ///< when it last went down, in ps (-1: never)
    double log1mBer{0.0};           ///< log(1 - bit error rate); 0: no bit errors
    uint64_t rngState{0};           ///< splitmix64 state of the port's loss stream

    /// @return true if a packet of @p wireBytes is corrupted (draws the port's stream; no bit errors: false)
    bool Corrupts(uint64_t wireBytes);
};

/**
 * @ingroup cosim
 * @brief Applies scheduled network faults to a built fabric and logs what it did.
 *
 * Link down: both directions. On a lossy link (PFC flow control) every packet on the wire is lost, and
 * what the ports send while the link is down is lost too (a dead link is a black hole at line rate: the
 * switch buffers drain as usual, the NICs' go-back-N recovers). A credit link (InfiniBand) loses nothing:
 * what was on the wire still arrives, the ports stop sending, and what waits at a dead switch port is
 * forwarded on the new routes once they converge (FabricSwitch::ForwardQueued); a NIC's dead link holds
 * its packets until it is up. After RouteConvergenceDelay the switches recompute their equal-cost groups
 * on the surviving links (one breadth-first search per leaf) and replace the tables that changed; a
 * destination left without a surviving path keeps its old group.
 *
 * Bit errors: a packet of b wire bits is corrupted with probability 1 - (1 - BER)^b, drawn from a stream
 * per port seeded from the run (deterministic). Lossy links drop it (the receiver's CRC check); credit
 * links resend it after a NAK round trip (2 x propagation delay + its serialization), packets behind it
 * on the wire waiting for it, in order (the resend's serialization time is not charged to the link). A port
 * with EgressPort::LinkLevelRetry (LLR) replays it instead, go-back-N on the hop, on either flow control.
 */
class LinkFaultModel : public Object
{
  public:
    /// What a fault-log row records (the codes of cosim.faults.ACTIONS).
    enum class Action : int8_t
    {
        DOWN = 0,    ///< a link went down
        UP = 1,      ///< a link came back
        REROUTE = 2, ///< a switch's routes converged around the changes
        DEGRADE = 3, ///< a link's rate or bit error rate changed
        RESTORE = 4, ///< a link's rate or bit error rate went back to its original
    };

    /// @return the names of Action in code order, comma-separated ("down,up,...")
    static std::string ActionNames();

    /// @return the TypeId of LinkFaultModel
    static TypeId GetTypeId();

    LinkFaultModel();
    ~LinkFaultModel() override;
    LinkFaultModel(const LinkFaultModel&) = delete;
    LinkFaultModel& operator=(const LinkFaultModel&) = delete;

    /// Recomputes the switches' routes without the dead ports (dead[node][port] != 0); @return the switches
    /// whose tables changed (FabricBuilder::Reroute).
    using RerouteFn = std::function<std::vector<uint32_t>(const std::vector<std::vector<uint8_t>>&)>;

    /**
     * @brief Attach to a built fabric: every port gets a PortFault.
     * @param nodes every node by id (they outlive this model's events)
     * @param linkA first endpoint of each link (as built)
     * @param linkB second endpoint of each link
     * @param reroute recomputes routes around dead ports
     */
    void Attach(std::vector<FabricNode*> nodes, std::vector<int32_t> linkA, std::vector<int32_t> linkB,
                RerouteFn reroute);

    /// @return number of links
    uint32_t GetNLinks() const
    {
        return static_cast<uint32_t>(m_linkA.size());
    }

    /// Link @p link goes down (@p up false) or up at @p atPs; @p fault is logged with it.
    void ScheduleState(uint32_t link, int64_t atPs, bool up, int32_t fault);

    /// Link @p link runs at @p rateBps from @p atPs (<= 0: its original rate again).
    void ScheduleRate(uint32_t link, int64_t atPs, double rateBps, int32_t fault);

    /// Link @p link corrupts bits at @p ber from @p atPs, loss stream seeded by @p seed (0 ber: none).
    void ScheduleBitErrorRate(uint32_t link, int64_t atPs, double ber, uint64_t seed, int32_t fault);

    /// @return number of fault-log rows
    uint64_t GetNActions() const
    {
        return m_logTimePs.size();
    }

    /// Copy the log (time in ps, fault index, Action, link id or -1, node id or -1) to arrays of GetNActions().
    void GetActions(int64_t* timePs, int32_t* fault, int8_t* action, int32_t* link, int32_t* node) const;

    /// @return packets lost on dead links
    uint64_t GetFaultDrops() const
    {
        return m_faultDrops;
    }

    /// @return packets lost to bit errors (lossy links)
    uint64_t GetBerDrops() const
    {
        return m_berDrops;
    }

    /// @return corrupted packets resent by credit links
    uint64_t GetLinkRetransmissions() const
    {
        return m_linkRetransmissions;
    }

    /// @return LLR: corrupted frames that started a go-back-N replay on their hop (EgressPort::LinkLevelRetry)
    uint64_t GetLlrRetries() const
    {
        return m_llrRetries;
    }

    /// @return LLR: frames sent again by replays (each corrupted frame and those sent after it on its hop)
    uint64_t GetLlrReplayedFrames() const
    {
        return m_llrReplayedFrames;
    }

    /// @return switch route tables replaced
    uint64_t GetReroutes() const
    {
        return m_reroutes;
    }

    /// A packet was lost on a dead link.
    void CountFaultDrop()
    {
        ++m_faultDrops;
    }

    /// A packet was lost to bit errors (lossy link).
    void CountBerDrop()
    {
        ++m_berDrops;
    }

    /// A corrupted packet was resent by the link (credit link).
    void CountLinkRetransmission()
    {
        ++m_linkRetransmissions;
    }

    /// LLR: a corrupted frame started a replay on its hop.
    void CountLlrRetry()
    {
        ++m_llrRetries;
    }

    /// LLR: a replay sent @p frames frames again.
    void CountLlrReplayedFrames(uint64_t frames)
    {
        m_llrReplayedFrames += frames;
    }

  protected:
    void DoDispose() override;

  private:
    /// Event: set link @p link down or up.
    void SetState(uint32_t link, bool up, int32_t fault);
    /// Event: set link @p link's rate (<= 0: original).
    void SetRate(uint32_t link, double rateBps, int32_t fault);
    /// Event: set link @p link's bit error rate.
    void SetBer(uint32_t link, double ber, uint64_t seed, int32_t fault);
    /// Event: recompute the switches' routes on the links up now.
    void Reconverge(int32_t fault);
    /// Append a log row.
    void Log(int32_t fault, Action action, int32_t link, int32_t node);
    /// @return the two ports of link @p link (a's towards b, b's towards a)
    std::pair<EgressPort*, EgressPort*> PortsOf(uint32_t link) const;

    Time m_convergenceDelay;               ///< RouteConvergenceDelay
    std::vector<FabricNode*> m_nodes;      ///< the fabric's nodes by id
    RerouteFn m_reroute;                   ///< route recomputation
    std::vector<int32_t> m_linkA;          ///< first endpoint per link
    std::vector<int32_t> m_linkB;          ///< second endpoint per link
    std::vector<uint32_t> m_portA;         ///< port number of each link at its first endpoint
    std::vector<uint32_t> m_portB;         ///< port number at its second endpoint
    std::vector<uint64_t> m_originalRateBps; ///< each link's rate as built, in bit/s
    std::vector<std::vector<PortFault>> m_state; ///< per node, per port
    std::vector<int64_t> m_logTimePs;      ///< log: time, in ps
    std::vector<int32_t> m_logFault, m_logLink, m_logNode; ///< log: fault index, link, node (-1: none)
    std::vector<int8_t> m_logAction;       ///< log: Action
    uint64_t m_faultDrops{0};              ///< packets lost on dead links
    uint64_t m_berDrops{0};                ///< packets lost to bit errors (lossy links)
    uint64_t m_linkRetransmissions{0};     ///< corrupted packets resent by credit links
    uint64_t m_llrRetries{0};              ///< LLR: corrupted frames that started a replay
    uint64_t m_llrReplayedFrames{0};       ///< LLR: frames sent again by replays
    uint64_t m_reroutes{0};                ///< switch route tables replaced
};

} // namespace ns3

#endif // COSIM_LINK_FAULT_MODEL_H
