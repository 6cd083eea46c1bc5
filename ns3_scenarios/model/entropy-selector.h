/**
 * @file
 * @ingroup cosim
 * Ultra Ethernet packet spraying: the entropy value a sender puts in each packet, chosen REPS-style from
 * the path feedback its acknowledgements carry.
 */
#ifndef COSIM_ENTROPY_SELECTOR_H
#define COSIM_ENTROPY_SELECTOR_H

#include "ns3/assert.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/// Entropy state of one flow (sender side).
struct EntropyState
{
    uint16_t base{0};                  ///< the flow's first entropy value (spreads flows of one host pair)
    uint32_t next{0};                  ///< exploration: index of the next entropy to try, 0..count-1
    std::vector<uint16_t> good;        ///< ring of entropies whose packets came back clean (empty until the first)
    uint32_t goodHead{0};              ///< oldest entry of the ring
    uint32_t goodCount{0};             ///< entries in the ring
    std::vector<int64_t> avoidUntilPs; ///< per entropy index: not explored again until then, in ps (empty: none)
};

/**
 * @ingroup cosim
 * @brief Picks the entropy value of each data packet of a UEC flow (per-packet spraying chosen by the
 * sender), REPS-style (recycled entropy packet spraying): an entropy whose packet was acknowledged
 * without an ECN mark goes into a small ring of good entropies and is used again; a packet that comes
 * back ECN-marked or trimmed returns nothing to the ring, and its entropy is skipped by exploration for
 * HoldPs. With the ring empty (at the start, or when every path is congested) the flow explores: it takes
 * the next of its EntropyCount values in turn. Every value hashes to its own path at each multi-path hop,
 * so traffic concentrates on the paths that are not congested. Deterministic (no random draw), so runs
 * repeat bit for bit. Plain logic owned by the HostNic, one state per UEC queue pair.
 */
class EntropySelector
{
  public:
    /**
     * @brief Configure every flow of the NIC.
     * @param count entropy values a flow explores (1..65536)
     * @param ringSize good entropies a flow keeps for reuse (0: no recycling, plain oblivious spraying)
     * @param holdPs how long exploration skips a congested entropy, in ps
     */
    void Configure(uint32_t count, uint32_t ringSize, int64_t holdPs)
    {
        NS_ASSERT_MSG(count > 0 && count <= 65536, "entropy count " << count << " outside 1..65536");
        m_count = count;
        m_ringSize = ringSize;
        m_holdPs = holdPs;
    }

    /// @return the state of a new flow @p flowId
    EntropyState Initial(uint64_t flowId) const
    {
        EntropyState s;
        s.base = static_cast<uint16_t>((flowId * 0x9e3779b97f4a7c15ULL) >> 48);
        return s;
    }

    /// @return the entropy value of the flow's next packet, sent at @p nowPs
    uint16_t Choose(EntropyState& s, int64_t nowPs) const
    {
        if (s.goodCount != 0)
        {
            const uint16_t entropy = s.good[s.goodHead];
            s.goodHead = (s.goodHead + 1) % m_ringSize;
            --s.goodCount;
            return entropy;
        }
        uint32_t index = s.next;
        if (!s.avoidUntilPs.empty())
        {
            for (uint32_t k = 0; k < m_count; ++k)
            {
                const uint32_t candidate = (s.next + k) % m_count;
                if (s.avoidUntilPs[candidate] <= nowPs)
                {
                    index = candidate;
                    break;
                } // every entropy avoided: keep the turn
            }
        }
        s.next = (index + 1) % m_count;
        return static_cast<uint16_t>(s.base + index);
    }

    /// A packet sent with @p entropy came back at @p nowPs, congested (ECN-marked or trimmed) or not.
    void OnFeedback(EntropyState& s, uint16_t entropy, bool congested, int64_t nowPs) const
    {
        if (!congested)
        {
            Recycle(s, entropy);
            return;
        }
        const uint32_t index = static_cast<uint16_t>(entropy - s.base);
        if (m_holdPs == 0 || index >= m_count)
        {
            return;
        }
        if (s.avoidUntilPs.empty())
        {
            s.avoidUntilPs.assign(m_count, 0);
        }
        s.avoidUntilPs[index] = nowPs + m_holdPs;
    }

  private:
    /// Keep @p entropy for reuse; a full ring forgets its oldest entry.
    void Recycle(EntropyState& s, uint16_t entropy) const
    {
        if (m_ringSize == 0)
        {
            return;
        }
        if (s.good.empty())
        {
            s.good.resize(m_ringSize);
        }
        if (s.goodCount == m_ringSize)
        {
            s.goodHead = (s.goodHead + 1) % m_ringSize;
            --s.goodCount;
        }
        s.good[(s.goodHead + s.goodCount) % m_ringSize] = entropy;
        ++s.goodCount;
    }

    uint32_t m_count{256};   ///< entropy values per flow
    uint32_t m_ringSize{0};  ///< good entropies kept per flow
    int64_t m_holdPs{0};     ///< how long exploration skips a congested entropy, in ps
};

} // namespace ns3

#endif // COSIM_ENTROPY_SELECTOR_H
