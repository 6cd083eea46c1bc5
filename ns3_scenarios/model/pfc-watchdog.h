/**
 * @file
 * @ingroup cosim
 * The PFC watchdog of a switch: disables an egress queue that stays paused too long (a pause storm).
 */
#ifndef COSIM_PFC_WATCHDOG_H
#define COSIM_PFC_WATCHDOG_H

#include "fabric-node.h"

#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <vector>

namespace ns3
{

class EgressPort;

/**
 * @ingroup cosim
 * @brief Watches every PFC egress queue (port, priority) of one switch, as the PFC watchdogs of data-center
 * switches do (SONiC pfcwd, Arista and Cisco "PFC watchdog", action drop).
 *
 * A queue whose priority stays paused by the peer for DetectionTime without a break is *stormed*: the
 * watchdog disables it (EgressPort::DisableQueue): the packets it holds are dropped, packets arriving for
 * it are dropped before they take buffer (FabricSwitch), and PAUSE frames for it are ignored. The switch
 * buffer it held is freed, so the switch resumes its own upstream senders and traffic that only shared
 * a buffer or an input port with the storm moves again. Once RestorationTime has passed without an
 * ignored PAUSE frame for it, the queue is enabled again (obeys PAUSE, forwards). Go-back-N at the
 * senders recovers the dropped packets.
 *
 * Cost: nothing while Enabled is false (no trace is connected). Enabled, the watchdog follows the ports'
 * PfcPause and PauseIgnored trace sources and keeps at most one pending check per queue: a detection
 * check DetectionTime after a pause began, rescheduled to the current pause's deadline if the pause broke
 * and resumed meanwhile, and a restoration check while the queue is disabled. Each action fires the
 * Action trace source (port, priority, true = disabled / false = restored).
 */
class PfcWatchdog : public Object
{
  public:
    /// @return the TypeId of PfcWatchdog
    static TypeId GetTypeId();

    PfcWatchdog() = default;
    PfcWatchdog(const PfcWatchdog&) = delete;
    PfcWatchdog& operator=(const PfcWatchdog&) = delete;

    /// @return true if the watchdog acts at all (the Enabled attribute)
    bool IsEnabled() const
    {
        return m_enabled;
    }

    /// Watch every egress port of switch @p sw (its links run PFC); does nothing unless enabled.
    void Watch(Ptr<FabricNode> sw);

    /// @return queues disabled plus queues restored so far
    uint64_t GetActions() const
    {
        return m_actions;
    }

  protected:
    void DoDispose() override;

  private:
    /// What the watchdog knows of one (port, priority) queue.
    struct QueueState
    {
        int64_t pauseStartPs{-1};     ///< start of the ongoing pause, in ps (-1: not paused)
        int64_t lastIgnoredPs{0};     ///< while disabled: last PAUSE frame ignored (or the disable), in ps
        bool checkPending{false};     ///< a detection check is scheduled
        bool disabled{false};         ///< the queue is disabled
    };

    /// @return the state of queue (@p port, @p prio)
    QueueState& StateOf(uint32_t port, uint8_t prio)
    {
        return m_queues[port * kNumPriorities + prio];
    }

    /// Trace sink of EgressPort::PfcPause of port @p port.
    void OnPause(uint32_t port, uint8_t prio, bool paused);
    /// Trace sink of EgressPort::PauseIgnored of port @p port.
    void OnPauseIgnored(uint32_t port, uint8_t prio);
    /// Event: has queue (@p port, @p prio) been paused for DetectionTime?
    void CheckStorm(uint32_t port, uint8_t prio);
    /// Event: has queue (@p port, @p prio) seen no PAUSE frame for RestorationTime?
    void CheckRestore(uint32_t port, uint8_t prio);

    bool m_enabled{false};    ///< act at all
    Time m_detectionTime;     ///< uninterrupted pause that disables a queue
    Time m_restorationTime;   ///< time without PAUSE frames that enables it again

    Ptr<FabricNode> m_switch;            ///< the switch watched
    std::vector<QueueState> m_queues;    ///< per (port, priority), port-major
    uint64_t m_actions{0};               ///< disables plus restorations
    /// an action: (port, priority, true = queue disabled / false = restored)
    TracedCallback<uint32_t, uint8_t, bool> m_actionTrace;
};

} // namespace ns3

#endif // COSIM_PFC_WATCHDOG_H
