/**
 * @file
 * @ingroup cosim
 * Detects a link-level flow-control deadlock (PFC or credits): a cycle of switch egress queues, each
 * blocked by the next one's switch, none of which has moved a data packet for an interval.
 */
#ifndef COSIM_DEADLOCK_WATCHDOG_H
#define COSIM_DEADLOCK_WATCHDOG_H

#include "egress-port.h"
#include "fabric-node.h"

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Finds cyclic buffer dependencies among switch egress queues and stops the run on one.
 *
 * A vertex is a switch egress queue (node, port, q): q is the priority with PFC, the virtual lane with
 * credits. It is *blocked* if it holds a packet and may not send it: PFC, its priority is paused by the
 * peer; credits, its lane holds fewer credits than the head packet needs. It is *stuck* if it is blocked
 * and sent no data packet from that queue during the last Interval (its port may still send other
 * priorities or lanes).
 *
 * Wait-for graph: stuck vertex A = (n, i, q), whose link leads to switch m where it arrives on input
 * port j, waits for stuck vertex B = (m, k, q) if B's queue holds a packet that arrived on j. Those are
 * the packets whose departure frees the ingress buffer (PFC: the accounting of (j, q) that paused A;
 * credits: the input lane of j that owes A its credits). A cycle of this graph cannot make progress by
 * itself: a deadlock.
 *
 * The watchdog costs nothing while no switch port is paused or credit-stalled: the first pause or
 * stall schedules a check after Interval, and checks repeat only while some switch queue is blocked.
 * A check is read-only unless it finds a cycle; then it records the cycle (GetCycle) and stops the
 * simulator. Checks are bookkeeping, not model events (GetChecks lets the engine leave them out of
 * its event count).
 */
class DeadlockWatchdog : public Object
{
  public:
    /// One vertex of a wait-for cycle.
    struct Element
    {
        uint32_t node;  ///< switch node id
        uint32_t port;  ///< egress port number at the switch
        uint8_t queue;  ///< priority (PFC) or virtual lane (credits)
    };

    /// @return the TypeId of DeadlockWatchdog
    static TypeId GetTypeId();

    DeadlockWatchdog() = default;
    ~DeadlockWatchdog() override = default;

    /// Watch every egress port of switch @p sw (call for each switch, after its links exist, then Start).
    void AddSwitch(Ptr<FabricNode> sw);

    /// Resolve the links between watched switches and listen for pauses and stalls (if Enabled).
    void Start();

    /// @return true once a deadlock was found (the run stopped)
    bool Deadlocked() const
    {
        return m_deadlocked;
    }

    /// @return the cycle found, each element waiting for the next and the last for the first (empty if none)
    const std::vector<Element>& GetCycle() const
    {
        return m_cycle;
    }

    /// @return check events executed so far
    uint64_t GetChecks() const
    {
        return m_checks;
    }

  protected:
    void DoDispose() override;

  private:
    /// A watched egress port and where its link leads.
    struct Watched
    {
        Ptr<EgressPort> port; ///< the port
        uint32_t node;        ///< its switch's node id
        uint32_t index;       ///< its port number there
        int64_t peerFirst;    ///< index in m_ports of the peer switch's port 0 (-1: the peer is a host)
        uint32_t peerCount;   ///< ports of the peer switch
    };

    /// Trace sink of PfcPause and CreditStall: a queue of a watched port was blocked (or released).
    void OnBlockChange(uint8_t queue, bool blocked);
    /// Remember every watched queue's data packets sent and check again after Interval.
    void Arm();
    /// Look for stuck queues and a cycle among them; re-arm while any queue is blocked.
    void Check();
    /// @return true if queue @p q of @p port holds a packet it may not send now
    static bool IsBlocked(const EgressPort& port, uint8_t q);
    /// @return true if queue @p q of @p port holds a packet that arrived on input port @p ingress
    static bool HoldsFrom(const EgressPort& port, uint8_t q, uint32_t ingress);
    /// Depth-first search of the wait-for graph over the stuck vertices @p stuck (index: port x priority);
    /// @return true if a cycle was found (stored in m_cycle)
    bool FindCycle(const std::vector<uint8_t>& stuck);

    bool m_enabled{true};                ///< watch at all
    Time m_interval;                     ///< time without movement that makes a blocked queue stuck
    std::vector<Watched> m_ports;        ///< every switch egress port, by node id then port number
    std::vector<uint64_t> m_txSnapshot;  ///< data packets each watched queue (port x q) had sent at the last Arm
    bool m_armed{false};                 ///< a check is scheduled
    bool m_deadlocked{false};            ///< a cycle was found
    uint64_t m_checks{0};                ///< check events executed
    std::vector<Element> m_cycle;        ///< the cycle found
};

} // namespace ns3

#endif // COSIM_DEADLOCK_WATCHDOG_H
