#include "packet-pool.h"

namespace ns3
{

void
PacketPool::Grow()
{
    auto block = std::make_unique<FabricPacket[]>(kBlockPackets);
    for (std::size_t i = 0; i < kBlockPackets; ++i)
    {
        block[i].next = (i + 1 < kBlockPackets) ? &block[i + 1] : m_free;
    }
    m_free = &block[0];
    m_blocks.push_back(std::move(block));
}

} // namespace ns3
