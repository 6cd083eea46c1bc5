#include "shared-input-buffer.h"

namespace ns3
{

void
SharedInputBuffer::Setup(const std::vector<uint32_t>& capacityBlocks,
                         const std::vector<uint32_t>& reservedBlocks,
                         uint32_t dataVls,
                         uint32_t maxPacketBlocks)
{
    NS_ASSERT_MSG(capacityBlocks.size() == reservedBlocks.size(), "one capacity and one reservation per port");
    NS_ASSERT_MSG(dataVls >= 1 && dataVls <= kNumPriorities,
                  "data lanes " << dataVls << " outside 1.." << kNumPriorities);
    m_dataVls = dataVls;
    m_maxPacketBlocks = maxPacketBlocks;
    m_ports.assign(capacityBlocks.size(), Port{});
    m_lanes.assign(capacityBlocks.size() * kNumPriorities, Lane{});
    for (std::size_t i = 0; i < capacityBlocks.size(); ++i)
    {
        Port& p = m_ports[i];
        NS_ASSERT_MSG(uint64_t(reservedBlocks[i]) * dataVls <= capacityBlocks[i],
                      "port " << i << " reserves more than its buffer");
        p.capacity = capacityBlocks[i];
        p.reserved = reservedBlocks[i];
        p.poolFree = capacityBlocks[i] - reservedBlocks[i] * dataVls;
        for (uint32_t vl = 0; vl < dataVls; ++vl)
        {
            m_lanes[i * kNumPriorities + vl].grant = reservedBlocks[i];
        }
    }
}

uint8_t
SharedInputBuffer::HandOver(uint32_t port, uint8_t vl, uint32_t blocks)
{
    for (uint32_t w = 0; w < m_dataVls; ++w)
    {
        Lane& other = m_lanes[port * kNumPriorities + w];
        if (w != vl && other.grant - other.used < m_maxPacketBlocks)
        {
            NS_ASSERT_MSG(m_lanes[port * kNumPriorities + vl].grant >= blocks, "lane gives more than it holds");
            m_lanes[port * kNumPriorities + vl].grant -= blocks;
            other.grant += blocks;
            if (other.grant - other.used >= m_maxPacketBlocks)
            {
                m_ports[port].starvedMask &= uint8_t(~(1u << w));
            }
            return uint8_t(w);
        }
    }
    // No lane is starved any more: the marks were stale (their credits came back since).
    m_ports[port].starvedMask = 0;
    return vl;
}

} // namespace ns3
