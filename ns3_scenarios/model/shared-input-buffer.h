/**
 * @file
 * @ingroup cosim
 * The receive side of InfiniBand credit flow control: per input port, one buffer shared by the virtual
 * lanes, each lane with a reservation of its own.
 */
#ifndef COSIM_SHARED_INPUT_BUFFER_H
#define COSIM_SHARED_INPUT_BUFFER_H

#include "fabric-packet.h"

#include "ns3/assert.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Input buffers of one node's ports under credit flow control, in 64-byte blocks.
 *
 * Each port has a buffer of capacity C shared by its data lanes. Lane v keeps a reservation R (the credits
 * its upstream sender starts with); the rest, C - lanes x R, is a pool any lane may borrow from. A lane's
 * grant is what its sender is entitled to have in the buffer (occupied blocks plus credits held, in flight
 * or not yet returned); grants never sum above C, so the link is lossless whatever the lanes do.
 *
 * - A packet arriving on lane v lends it blocks of the pool, as many as the packet took, while the pool
 *   has them: the sender gets those credits back at once, as if the buffer had grown (Admit).
 * - A packet leaving the buffer frees its blocks; they go back to its lane as credits (Release), unless
 *   the pool is exhausted, the lane holds borrowed blocks and another lane of the port is starved (its
 *   sender may lack credits for a full packet): then the blocks move to that lane. A lane thus keeps the pool while
 *   it is alone and gives it up, packet by packet, to a lane that needs it, but never its reservation.
 *
 * Plain arrays indexed by (port, lane); no allocation after Setup.
 */
class SharedInputBuffer
{
  public:
    /**
     * @brief Size the buffers.
     * @param capacityBlocks shared buffer of every port, in 64-byte blocks
     * @param reservedBlocks reservation of each data lane of every port, in 64-byte blocks
     * @param dataVls data lanes per port
     * @param maxPacketBlocks blocks of the largest packet (a lane below it is starved)
     */
    void Setup(const std::vector<uint32_t>& capacityBlocks,
               const std::vector<uint32_t>& reservedBlocks,
               uint32_t dataVls,
               uint32_t maxPacketBlocks);

    /**
     * @brief A packet of @p blocks blocks arrived on lane @p vl of @p port: it occupies the buffer.
     * @return blocks of the pool lent to the lane now (credits to return to its sender)
     */
    uint32_t Admit(uint32_t port, uint8_t vl, uint32_t blocks)
    {
        Lane& lane = m_lanes[port * kNumPriorities + vl];
        Port& p = m_ports[port];
        lane.used += blocks;
        if (lane.used > lane.grant)
        {
            ++m_violations; // the sender had no credits for it: a flow-control bug, never normal
        }
        m_peakLaneBlocks = std::max(m_peakLaneBlocks, lane.used);
        const uint32_t lend = std::min(blocks, p.poolFree);
        p.poolFree -= lend;
        lane.grant += lend;
        if (lane.grant - lane.used < m_maxPacketBlocks)
        {
            p.starvedMask |= uint8_t(1u << vl);
        }
        return lend;
    }

    /**
     * @brief A packet of @p blocks blocks on lane @p vl of @p port left the buffer.
     * @return the lane whose sender gets the freed blocks as credits (@p vl, or a starved lane)
     */
    uint8_t Release(uint32_t port, uint8_t vl, uint32_t blocks)
    {
        Lane& lane = m_lanes[port * kNumPriorities + vl];
        Port& p = m_ports[port];
        NS_ASSERT_MSG(lane.used >= blocks,
                      "input lane " << int(vl) << " of port " << port << " releases " << blocks
                                    << " blocks holding " << lane.used);
        lane.used -= blocks;
        const uint8_t bit = uint8_t(1u << vl);
        if ((p.starvedMask & bit) && lane.grant - lane.used >= m_maxPacketBlocks)
        {
            p.starvedMask &= uint8_t(~bit);
        }
        if ((p.starvedMask & ~bit) && p.poolFree == 0 && lane.grant >= p.reserved + blocks)
        {
            return HandOver(port, vl, blocks);
        }
        return vl;
    }

    /**
     * @brief A node that consumes what it receives at once (a NIC): a packet of @p blocks blocks arrived on
     * lane @p vl of @p port and left the buffer in the same instant.
     * @return the credits to return to the lane's sender: the packet's, plus what the pool lends the lane
     */
    uint32_t PassThrough(uint32_t port, uint8_t vl, uint32_t blocks)
    {
        Lane& lane = m_lanes[port * kNumPriorities + vl];
        Port& p = m_ports[port];
        if (lane.used + blocks > lane.grant)
        {
            ++m_violations;
        }
        m_peakLaneBlocks = std::max(m_peakLaneBlocks, blocks);
        const uint32_t lend = std::min(blocks, p.poolFree);
        p.poolFree -= lend;
        lane.grant += lend;
        return blocks + lend;
    }

    /// @return the shared buffer of @p port, in 64-byte blocks
    uint32_t GetCapacityBlocks(uint32_t port) const
    {
        return m_ports[port].capacity;
    }

    /// @return the reservation of each data lane of @p port (the credits its sender starts with), in blocks
    uint32_t GetReservedBlocks(uint32_t port) const
    {
        return m_ports[port].reserved;
    }

    /// @return blocks lane @p vl of @p port is granted (occupied plus credits its sender may still use)
    uint32_t GetGrantBlocks(uint32_t port, uint8_t vl) const
    {
        return m_lanes[port * kNumPriorities + vl].grant;
    }

    /// @return blocks lane @p vl of @p port occupies
    uint32_t GetUsedBlocks(uint32_t port, uint8_t vl) const
    {
        return m_lanes[port * kNumPriorities + vl].used;
    }

    /// @return packets that arrived beyond their lane's grant: impossible unless credits are wrong
    uint64_t GetViolations() const
    {
        return m_violations;
    }

    /// @return the largest occupancy of one lane of one port seen, in blocks
    uint32_t GetPeakLaneBlocks() const
    {
        return m_peakLaneBlocks;
    }

  private:
    /// One lane of one port.
    struct Lane
    {
        uint32_t used{0};  ///< blocks occupied
        uint32_t grant{0}; ///< blocks its sender is entitled to: used + credits outstanding
    };

    /// One port: its buffer and what of the pool is not lent.
    struct Port
    {
        uint32_t capacity{0}; ///< shared buffer, in blocks
        uint32_t reserved{0}; ///< reservation per data lane, in blocks
        uint32_t poolFree{0}; ///< pool blocks no lane is granted
        uint8_t starvedMask{0}; ///< bit v: lane v's sender may lack credits for a full packet
    };

    /// Pool exhausted, lane @p vl holds borrowed blocks: give @p blocks to a starved lane; @return its lane.
    uint8_t HandOver(uint32_t port, uint8_t vl, uint32_t blocks);

    std::vector<Lane> m_lanes;   ///< indexed by port x kNumPriorities + lane
    std::vector<Port> m_ports;   ///< indexed by port
    uint32_t m_dataVls{1};       ///< data lanes per port
    uint32_t m_maxPacketBlocks{1}; ///< blocks of the largest packet
    uint64_t m_violations{0};    ///< arrivals beyond a lane's grant
    uint32_t m_peakLaneBlocks{0}; ///< high-water mark of one lane, in blocks
};

} // namespace ns3

#endif // COSIM_SHARED_INPUT_BUFFER_H
