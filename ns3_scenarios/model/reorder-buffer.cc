#include "reorder-buffer.h"

#include "ns3/assert.h"

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

} // namespace ns3
