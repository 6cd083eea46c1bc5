/**
 * @file
 * @ingroup cosim
 * The sender side of Ultra Ethernet's reliable unordered delivery (PDS RUD): which packets of a flow are
 * in flight, acknowledged or due for selective retransmission.
 */
#ifndef COSIM_PDS_SCOREBOARD_H
#define COSIM_PDS_SCOREBOARD_H

#include <cstdint>
#include <deque>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief One flow's selective-acknowledgement scoreboard (UEC 1.0 PDS, reliable unordered delivery).
 *
 * Packets are numbered by payload offset / MTU (the PSN). Every packet from the cumulative acknowledgement
 * (the receiver's CACK) up to the highest one sent has an entry: in flight (with its send time), acked
 * (a SACK arrived) or lost (a NACK of its trimmed header, or the retransmission timeout, put it on the
 * retransmit list). Only lost packets are sent again: selective retransmission, never go-back-N. Entries
 * leave from the front as the cumulative acknowledgement passes them, so memory follows the packets
 * outstanding, not the flow's size. Plain state owned by the HostNic, one per UEC queue pair.
 */
class PdsScoreboard
{
  public:
    /// Describe the flow: @p sizeBytes of payload cut into packets of @p mtuBytes.
    void Configure(uint64_t sizeBytes, uint32_t mtuBytes);

    /// @return payload of packet @p index, in bytes (a full MTU but perhaps the flow's last)
    uint32_t PayloadOf(uint64_t index) const;

    /**
     * @brief The packet to send next: the oldest one on the retransmit list, else the first never sent.
     * @param[out] index its PSN
     * @param[out] retransmission true if it was sent before
     * @return false if nothing is left to send (all sent, none lost)
     */
    bool Next(uint64_t* index, bool* retransmission);

    /// Packet @p index (from Next) went on the wire at @p nowPs (ps).
    void OnSent(uint64_t index, bool retransmission, int64_t nowPs);

    /**
     * @brief A SACK of packet @p index arrived, carrying the receiver's cumulative acknowledgement
     * @p cumulativePackets (every packet below it delivered).
     * @return payload newly known delivered that was in flight, in bytes (0 for a duplicate)
     */
    uint64_t OnAck(uint64_t index, uint64_t cumulativePackets);

    /// A NACK of packet @p index arrived (its header came back trimmed). @return true if it is now due for retransmission.
    bool OnNack(uint64_t index, uint64_t cumulativePackets);

    /**
     * @brief The retransmission timer fired at @p nowPs: every packet in flight since @p timeoutPs or
     * longer is lost.
     * @param[out] nextDeadlinePs when the oldest packet still in flight times out, in ps (-1: none in flight)
     * @return packets declared lost
     */
    uint64_t OnTimeout(int64_t nowPs, int64_t timeoutPs, int64_t* nextDeadlinePs);

    /**
     * @brief Loss detection by reordering: a SACK arrived for a packet sent at @p ackedSentPs, so every
     * packet still in flight that was sent more than @p windowPs before it is lost (spraying reorders
     * packets by at most the queueing difference of two paths, which trimming bounds).
     * Looks at the packets from the cumulative acknowledgement on, up to the first one in flight that is
     * recent enough (a retransmission sent late and lost again is left to the timeout).
     * @return packets declared lost
     */
    uint64_t DetectLoss(int64_t ackedSentPs, int64_t windowPs);

    /// @return payload in flight (sent, neither acknowledged nor declared lost), in bytes
    uint64_t InflightBytes() const
    {
        return m_inflightBytes;
    }

    /// @return true if every packet of the flow is acknowledged
    bool AllAcked() const
    {
        return m_base == m_packets;
    }

    /// @return true if a packet is waiting to be sent (new or lost)
    bool HasWork() const
    {
        return m_nextNew < m_packets || !m_retransmit.empty();
    }

    /// @return the first packet not cumulatively acknowledged (the sender's view of the CACK)
    uint64_t Base() const
    {
        return m_base;
    }

  private:
    /// What the sender knows of one packet.
    enum class State : uint8_t
    {
        IN_FLIGHT, ///< sent, no answer yet
        ACKED,     ///< selectively acknowledged
        LOST,      ///< on the retransmit list
    };

    /// One outstanding packet.
    struct Entry
    {
        int64_t sentPs; ///< time of its latest transmission, in ps
        State state;    ///< what is known of it
    };

    /// Advance the base over packets below @p cumulativePackets and acked ones; @return in-flight bytes this freed
    uint64_t AdvanceBase(uint64_t cumulativePackets);
    /// Mark entry @p index lost and queue it; its bytes leave the in-flight count.
    void MarkLost(uint64_t index);

    uint64_t m_sizeBytes{0};       ///< the flow's payload, in bytes
    uint32_t m_mtuBytes{1};        ///< payload of a full packet, in bytes
    uint64_t m_packets{0};         ///< packets of the flow
    uint64_t m_base{0};            ///< first packet not known delivered
    uint64_t m_nextNew{0};         ///< first packet never sent
    std::deque<Entry> m_entries;   ///< packets m_base .. m_nextNew - 1
    std::deque<uint64_t> m_retransmit; ///< lost packets to send again, oldest first
    uint64_t m_inflightBytes{0};   ///< payload in flight, in bytes
};

} // namespace ns3

#endif // COSIM_PDS_SCOREBOARD_H
