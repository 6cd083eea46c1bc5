/**
 * @file
 * @ingroup cosim
 * Free-list allocator for FabricPacket: packets are carved from large blocks and recycled.
 */
#ifndef COSIM_PACKET_POOL_H
#define COSIM_PACKET_POOL_H

#include "fabric-packet.h"

#include <cstddef>
#include <memory>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Hands out FabricPackets from a free list; grows by blocks, never shrinks during a run.
 */
class PacketPool
{
  public:
    PacketPool() = default;
    PacketPool(const PacketPool&) = delete;
    PacketPool& operator=(const PacketPool&) = delete;

    /// @return a packet with every field zeroed
    FabricPacket* Allocate()
    {
        if (m_free == nullptr)
        {
            Grow();
        }
        FabricPacket* p = m_free;
        m_free = p->next;
        *p = FabricPacket{};
        ++m_inUse;
        return p;
    }

    /// Return @p p to the free list.
    void Release(FabricPacket* p)
    {
        p->next = m_free;
        m_free = p;
        --m_inUse;
    }

    /// @return packets currently handed out (in queues, on links or in NICs)
    std::size_t InUse() const
    {
        return m_inUse;
    }

    /// @return packets ever carved from blocks (the high-water mark of InUse)
    std::size_t Capacity() const
    {
        return m_blocks.size() * kBlockPackets;
    }

  private:
    static constexpr std::size_t kBlockPackets = 4096; ///< packets per allocation block

    /// Carve one more block into the free list.
    void Grow();

    std::vector<std::unique_ptr<FabricPacket[]>> m_blocks; ///< storage
    FabricPacket* m_free{nullptr};                         ///< free-list head
    std::size_t m_inUse{0};                                ///< packets handed out
};

} // namespace ns3

#endif // COSIM_PACKET_POOL_H
