/**
 * @file
 * @ingroup cosim
 * The requester side of RoCE go-back-N loss recovery: cumulative ACKs, rewind on NAK, and the
 * retransmission timeout.
 */
#ifndef COSIM_GO_BACK_N_SENDER_H
#define COSIM_GO_BACK_N_SENDER_H

#include "ns3/assert.h"

#include <cstdint>

namespace ns3
{

/// Go-back-N state of one queue pair (sender side).
struct GoBackNState
{
    uint64_t ackedBytes{0};      ///< payload acknowledged in order (the last acked PSN), in bytes
    uint64_t resendBelowBytes{0}; ///< payload sent before the latest rewind: resending below it is a retransmission, in bytes
    int64_t lastActivityPs{0};   ///< last data packet sent or ACK progress, in ps
    bool timerPending{false};    ///< a retransmission-timer event is scheduled
};

/**
 * @ingroup cosim
 * @brief Decides a sender's go-back-N reactions: what an ACK or NAK acknowledges, where to resume
 * sending, and whether the retransmission timer has expired.
 *
 * The timeout counts from the queue pair's last activity (a data packet sent, or ACK progress), so a
 * queue pair that is still sending cannot time out; the HostNic therefore schedules its one timer event
 * only when the queue pair has handed its last byte to the port, and never cancels or moves it. When
 * the event fires, OnTimer says whether the queue pair has been silent for the whole timeout with
 * unacknowledged data (go back to the last acked PSN), whether to look again later (the deadline
 * moved), or whether the flow is fully acknowledged (stop). Plain logic owned by the HostNic, whose RetransmitTimeout
 * attribute sets the timeout.
 */
class GoBackNSender
{
  public:
    /// What the retransmission timer found when it fired.
    enum class TimerVerdict : uint8_t
    {
        IDLE,    ///< every byte is acknowledged: the timer stops
        REARM,   ///< not yet expired (activity since it was set): look again at the returned deadline
        TIMEOUT, ///< silent for the whole timeout with unacknowledged data: go back to the last acked PSN
    };

    /// Time out after @p ps picoseconds without sending or ACK progress (0: never).
    void SetTimeoutPs(int64_t ps)
    {
        m_timeoutPs = ps;
    }

    /// @return the retransmission timeout, in ps (0: none)
    int64_t GetTimeoutPs() const
    {
        return m_timeoutPs;
    }

    /// A cumulative ACK (or NAK) for @p seqBytes arrived at @p nowPs (ps); @return true if it acknowledged new bytes.
    static bool OnAck(GoBackNState& s, uint64_t seqBytes, int64_t nowPs)
    {
        if (seqBytes <= s.ackedBytes)
        {
            return false;
        }
        s.ackedBytes = seqBytes;
        s.lastActivityPs = nowPs;
        return true;
    }

    /**
     * @brief Rewind: the sender resumes at @p toBytes, having sent up to @p sentBytes.
     * @return true if there is anything to resend (@p toBytes below @p sentBytes)
     */
    static bool Rewind(GoBackNState& s, uint64_t toBytes, uint64_t sentBytes)
    {
        if (toBytes >= sentBytes)
        {
            return false;
        }
        s.resendBelowBytes = sentBytes > s.resendBelowBytes ? sentBytes : s.resendBelowBytes;
        return true;
    }

    /**
     * @brief The timer of a queue pair fired at @p nowPs.
     * @param s the queue pair's state
     * @param sentBytes payload the sender has put on the wire (its next PSN), in bytes
     * @param sizeBytes payload of the flow, in bytes
     * @param nowPs the current time, in ps
     * @param[out] deadlinePs REARM: when to fire again, in ps
     * @return the verdict
     */
    TimerVerdict OnTimer(const GoBackNState& s,
                         uint64_t sentBytes,
                         uint64_t sizeBytes,
                         int64_t nowPs,
                         int64_t* deadlinePs) const
    {
        NS_ASSERT_MSG(m_timeoutPs > 0, "retransmission timer fired with no timeout set");
        if (s.ackedBytes >= sizeBytes)
        {
            return TimerVerdict::IDLE;
        }
        const int64_t expiryPs = s.lastActivityPs + m_timeoutPs;
        if (s.ackedBytes < sentBytes && expiryPs <= nowPs)
        {
            return TimerVerdict::TIMEOUT;
        }
        // Not expired, or nothing unacknowledged in flight (the sender is resending what was acked).
        *deadlinePs = expiryPs > nowPs ? expiryPs : nowPs + m_timeoutPs;
        return TimerVerdict::REARM;
    }

  private:
    int64_t m_timeoutPs{0}; ///< silence after which unacked data is resent, in ps (0: never)
};

} // namespace ns3

#endif // COSIM_GO_BACK_N_SENDER_H
