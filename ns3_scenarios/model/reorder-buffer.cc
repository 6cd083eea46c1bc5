#include "reorder-buffer.h"

#include "ns3/assert.h"

#include <algorithm>

namespace ns3
{

ReorderBuffer::Verdict
ReorderBuffer::OnData(uint64_t flowId, uint64_t seqBytes, uint64_t expectedBytes, uint32_t mtuBytes)
{
    NS_ASSERT_MSG(seqBytes % mtuBytes == 0, "data packet at " << seqBytes << " B is not on a packet boundary");
    if (seqBytes == expectedBytes)
    {
        return Verdict::IN_ORDER;
    }
    if (seqBytes < expectedBytes)
    {
        return Verdict::DUPLICATE;
    }
    const uint64_t index = seqBytes / mtuBytes;
    Held& held = m_flows[flowId];
    if (held.bits.size() <= index / 64)
    {
        held.bits.resize(index / 64 + 1, 0);
    }
    uint64_t& word = held.bits[index / 64];
    const uint64_t bit = uint64_t(1) << (index % 64);
    if (word & bit)
    {
        return Verdict::DUPLICATE;
    }
    word |= bit;
    ++held.count;
    ++m_heldPackets;
    return Verdict::HELD;
}

uint64_t
ReorderBuffer::TakeHeld(uint64_t flowId, uint64_t expectedBytes, uint32_t mtuBytes)
{
    if (m_heldPackets == 0)
    {
        return 0;
    }
    auto it = m_flows.find(flowId);
    if (it == m_flows.end())
    {
        return 0;
    }
    Held& held = it->second;
    uint64_t released = 0;
    for (uint64_t index = expectedBytes / mtuBytes; index / 64 < held.bits.size(); ++index)
    {
        uint64_t& word = held.bits[index / 64];
        const uint64_t bit = uint64_t(1) << (index % 64);
        if (!(word & bit))
        {
            break;
        }
        word &= ~bit;
        ++released;
    }
    NS_ASSERT_MSG(held.count >= released && m_heldPackets >= released, "released more packets than held");
    held.count -= released;
    m_heldPackets -= released;
    if (held.count == 0)
    {
        m_flows.erase(it);
    }
    return released;
}

uint64_t
ReorderBuffer::ArrivedBitmap(uint64_t flowId, int64_t firstPacket, uint64_t cumulativePackets) const
{
    uint64_t bits = 0;
    // Delivered: the indices below the in-order point (and any below 0).
    const int64_t delivered = int64_t(cumulativePackets) - firstPacket;
    if (delivered >= 64)
    {
        return ~uint64_t(0);
    }
    if (delivered > 0)
    {
        bits = (uint64_t(1) << delivered) - 1;
    }
    auto it = m_heldPackets == 0 ? m_flows.end() : m_flows.find(flowId);
    if (it == m_flows.end())
    {
        return bits;
    }
    const std::vector<uint64_t>& held = it->second.bits;
    // Held: the 64 bits of the per-flow bit vector from firstPacket on (two words, shifted).
    const int64_t start = std::max<int64_t>(firstPacket, 0);
    const uint64_t word = uint64_t(start) / 64;
    const uint32_t shift = uint32_t(uint64_t(start) % 64);
    uint64_t window = word < held.size() ? held[word] >> shift : 0;
    if (shift != 0 && word + 1 < held.size())
    {
        window |= held[word + 1] << (64 - shift);
    }
    const int64_t lead = start - firstPacket; // bits below index 0, already set as delivered
    return bits | (lead >= 64 ? 0 : window << lead);
}

} // namespace ns3
