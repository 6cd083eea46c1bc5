/**
 * @file
 * @ingroup cosim
 * The PFC side of an egress port: which priorities the peer paused, and strict priority among the rest.
 */
#ifndef COSIM_PFC_ARBITER_H
#define COSIM_PFC_ARBITER_H

#include "fabric-packet.h"

#include "ns3/assert.h"

#include <array>
#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Egress arbitration under 802.1Qbb priority flow control: strict priority over the priorities
 * the peer has not paused, and the pause bookkeeping (paused time, PAUSE frames).
 *
 * Plain state owned by the EgressPort, which schedules the pause expiries and fires the traces.
 */
class PfcArbiter
{
  public:
    /// @return bit p set if priority p is paused by the peer
    uint8_t GetPausedMask() const
    {
        return m_pausedMask;
    }

    /// @return true if priority @p prio is paused
    bool IsPaused(uint8_t prio) const
    {
        return m_pausedMask & (1u << prio);
    }

    /// @return the highest priority of @p nonEmptyMask that is not paused, or -1 if none
    int Pick(uint8_t nonEmptyMask) const
    {
        const uint32_t ready = nonEmptyMask & ~uint32_t(m_pausedMask);
        return ready == 0 ? -1 : int(31u - uint32_t(__builtin_clz(ready)));
    }

    /// A PAUSE frame with non-zero quanta for @p prio arrived at @p nowPs (ps); @return true if it paused
    /// a running priority (not a refresh)
    bool OnXoff(uint8_t prio, int64_t nowPs)
    {
        ++m_pauseFrames[prio];
        if (IsPaused(prio))
        {
            return false;
        }
        m_pausedMask |= uint8_t(1u << prio);
        m_pauseStartPs[prio] = nowPs;
        return true;
    }

    /// The pause of @p prio ends at @p nowPs (ps).
    void Resume(uint8_t prio, int64_t nowPs)
    {
        NS_ASSERT_MSG(IsPaused(prio), "priority " << int(prio) << " resumed without a pause");
        m_pausedMask &= uint8_t(~(1u << prio));
        m_pausedPs[prio] += nowPs - m_pauseStartPs[prio];
    }

    /// @return total time @p prio spent paused up to @p nowPs (an ongoing pause included), in ps
    int64_t GetPausedPs(uint8_t prio, int64_t nowPs) const
    {
        return m_pausedPs[prio] + (IsPaused(prio) ? nowPs - m_pauseStartPs[prio] : 0);
    }

    /// @return PAUSE frames (with non-zero quanta) received for @p prio
    uint64_t GetPauseFrames(uint8_t prio) const
    {
        return m_pauseFrames[prio];
    }

  private:
    uint8_t m_pausedMask{0};                              ///< bit p: priority p paused by the peer
    std::array<int64_t, kNumPriorities> m_pauseStartPs{}; ///< start of the ongoing pause, in ps
    std::array<int64_t, kNumPriorities> m_pausedPs{};     ///< finished pause time, in ps
    std::array<uint64_t, kNumPriorities> m_pauseFrames{}; ///< PAUSE frames received
};

} // namespace ns3

#endif // COSIM_PFC_ARBITER_H
