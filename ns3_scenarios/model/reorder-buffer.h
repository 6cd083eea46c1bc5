/**
 * @file
 * @ingroup cosim
 * A receiver that tolerates reordering: packets beyond a gap are placed and remembered, not dropped.
 */
#ifndef COSIM_REORDER_BUFFER_H
#define COSIM_REORDER_BUFFER_H

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Which packets of each flow arrived beyond its in-order point, for receivers that place data
 * out of order (InfiniBand with adaptive routing, RoCE NICs built for packet spraying).
 *
 * A flow's payload is delivered in order (FlowTable::Bytes::rcvdBytes is its in-order point), but a packet
 * beyond a gap is kept, as a bit per MTU-sized packet, instead of dropped and NAKed; when the gap fills,
 * the packets held after it count as delivered at once. Every data packet starts at a multiple of the
 * MTU (senders cut flows into full packets and go back only to packet boundaries). A flow costs memory
 * only while it has packets held. Plain state owned by the HostNic.
 */
class ReorderBuffer
{
  public:
    /// What a data packet is to the receiver.
    enum class Verdict : uint8_t
    {
        IN_ORDER,  ///< at the in-order point: deliver it, then TakeHeld
        HELD,      ///< beyond the in-order point, new: placed and remembered
        DUPLICATE, ///< delivered or held already (the sender went back): drop it
    };

    /**
     * @brief A data packet of flow @p flowId arrived.
     * @param flowId the flow
     * @param seqBytes byte offset of its payload, a multiple of @p mtuBytes
     * @param expectedBytes the flow's in-order point, in bytes
     * @param mtuBytes payload of a full packet, in bytes
     * @return what it is
     */
    Verdict OnData(uint64_t flowId, uint64_t seqBytes, uint64_t expectedBytes, uint32_t mtuBytes);

    /**
     * @brief The in-order point of flow @p flowId reached @p expectedBytes: release the packets held from
     * there on without a gap.
     * @return how many packets were released (each a full packet but perhaps the flow's last)
     */
    uint64_t TakeHeld(uint64_t flowId, uint64_t expectedBytes, uint32_t mtuBytes);

    /**
     * @brief Which packets of flow @p flowId have arrived, as a UEC SACK_BITMAP: bit i is set if packet
     * @p firstPacket + i (packet index = seqBytes / MTU) was delivered (it lies below @p cumulativePackets,
     * the in-order point in packets) or is held. Indices below 0 count as delivered.
     */
    uint64_t ArrivedBitmap(uint64_t flowId, int64_t firstPacket, uint64_t cumulativePackets) const;

    /// @return true if flow @p flowId holds packets beyond a gap
    bool Holds(uint64_t flowId) const
    {
        return m_heldPackets != 0 && m_flows.count(flowId) != 0;
    }

    /// @return packets held for flows with gaps now
    uint64_t GetHeldPackets() const
    {
        return m_heldPackets;
    }

  private:
    /// The packets one flow holds, a bit per packet index (seqBytes / MTU).
    struct Held
    {
        std::vector<uint64_t> bits; ///< bit i: packet i is held
        uint64_t count{0};          ///< bits set
    };

    std::unordered_map<uint64_t, Held> m_flows; ///< flows holding packets
    uint64_t m_heldPackets{0};                   ///< bits set over all flows
};

} // namespace ns3

#endif // COSIM_REORDER_BUFFER_H
