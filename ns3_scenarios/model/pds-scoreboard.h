/**
 * @file
 * @ingroup cosim
 * The sender side of Ultra Ethernet's reliable unordered delivery (PDS RUD): which packets of a flow are
 * in flight, acknowledged or due for selective retransmission.
 */
#ifndef COSIM_PDS_SCOREBOARD_H
#define COSIM_PDS_SCOREBOARD_H

#include "ns3/assert.h"

#include <algorithm>
#include <cstdint>
#include <deque>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief One flow's selective-acknowledgement scoreboard (UEC 1.0 PDS, reliable unordered delivery).
 *
 * Packets are numbered by payload offset / MTU (the PSN). Every packet from the cumulative acknowledgement
 * (the receiver's CACK) up to the highest one sent has an entry: in flight (with its send time and
 * entropy), acked (a SACK's bitmap or cumulative acknowledgement covered it) or lost (a NACK of its
 * trimmed header, reordering or the retransmission timeout put it on the retransmit list). Only lost
 * packets are sent again: selective retransmission (reliable ordered delivery goes back with GoBack). Entries
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

    /// Packet @p index (from Next) went on the wire at @p nowPs (ps) with entropy value @p entropy.
    void OnSent(uint64_t index, bool retransmission, int64_t nowPs, uint16_t entropy);

    /**
     * @brief A SACK arrived: the receiver's cumulative acknowledgement @p cumulativePackets (CACK_PSN: every
     * packet below it delivered) and its SACK_BITMAP @p bitmap (bit i: packet @p firstPacket + i arrived).
     * Calls @p onDelivered(index, entropy, wasInFlight) once for every packet it newly shows delivered,
     * with the entropy of that packet's latest transmission (so one SACK covering many packets still
     * gives per-packet path feedback) and whether it was in flight (not declared lost).
     * @return payload newly known delivered that was in flight, in bytes (0 for a duplicate)
     */
    template <typename F>
    uint64_t OnSack(uint64_t cumulativePackets, int64_t firstPacket, uint64_t bitmap, F&& onDelivered)
    {
        uint64_t freed = 0;
        // In packet order: what the cumulative acknowledgement covers, then the bitmap beyond it.
        while (!m_entries.empty() && m_base < cumulativePackets)
        {
            Entry& e = m_entries.front();
            if (e.state != State::ACKED)
            {
                freed += Deliver(m_base, e, onDelivered); // delivered, its SACK lost or coalesced
            }
            m_entries.pop_front();
            ++m_base;
        }
        const int64_t from = std::max<int64_t>(firstPacket, int64_t(m_base));
        const int64_t to = std::min<int64_t>(firstPacket + 64, int64_t(m_nextNew));
        for (int64_t i = from; i < to; ++i)
        {
            Entry& e = m_entries[uint64_t(i) - m_base];
            if (((bitmap >> (i - firstPacket)) & 1) && e.state != State::ACKED)
            {
                freed += Deliver(uint64_t(i), e, onDelivered);
            }
        }
        AdvanceBase(m_base); // past the packets the bitmap acknowledged at the front (nothing left in flight)
        return freed;
    }

    /// @return true if packet @p index was sent and is neither acknowledged nor declared lost
    bool IsInFlight(uint64_t index) const
    {
        return index >= m_base && index < m_nextNew && m_entries[index - m_base].state == State::IN_FLIGHT;
    }

    /// A NACK of packet @p index arrived (its header came back trimmed). @return true if it is now due for retransmission.
    bool OnNack(uint64_t index, uint64_t cumulativePackets);

    /**
     * @brief Reliable ordered delivery: the receiver dropped what arrived beyond packet @p index (a ROD_OOO
     * NACK, or a timeout), so every packet from @p index on that is in flight is sent again, and every lost
     * packet is resent lowest first (go-back-N).
     * @return packets declared lost
     */
    uint64_t GoBack(uint64_t index, uint64_t cumulativePackets);

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
     * Looks at the packets from the cumulative acknowledgement on, up to the first original transmission
     * in flight that is recent enough: originals leave in packet order, so every later one is recent too.
     * A recent retransmission is passed over, not stopped at: it would hide the older originals beyond
     * it, whose losses would then wait for the timeout.
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
        int64_t sentPs;   ///< time of its latest transmission, in ps
        uint16_t entropy; ///< entropy value of its latest transmission
        State state;      ///< what is known of it
        bool resent;      ///< its latest transmission is a retransmission (sent out of packet order)
    };

    /// Entry @p e (packet @p index) is delivered: report it to @p onDelivered; @return its in-flight bytes freed
    template <typename F>
    uint64_t Deliver(uint64_t index, Entry& e, F& onDelivered)
    {
        const bool inFlight = e.state == State::IN_FLIGHT;
        uint64_t freed = 0;
        if (inFlight)
        {
            freed = PayloadOf(index);
            NS_ASSERT_MSG(m_inflightBytes >= freed, "acknowledged more bytes than in flight");
            m_inflightBytes -= freed;
        }
        e.state = State::ACKED; // a lost one answered late needs no retransmission (Next skips it)
        onDelivered(index, e.entropy, inFlight);
        return freed;
    }

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
