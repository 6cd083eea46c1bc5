/**
 * @file
 * @ingroup cosim
 * Ultra Ethernet packet spraying: the entropy value a sender puts in each packet, and path feedback that
 * avoids the congested ones for a while.
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
    uint16_t base{0};                 ///< the flow's first entropy value (spreads flows of one host pair)
    uint32_t next{0};                 ///< index of the next entropy to try, 0..count-1
    std::vector<int64_t> avoidUntilPs; ///< per entropy index: avoid it until then, in ps (empty: none avoided yet)
};

/**
 * @ingroup cosim
 * @brief Picks the entropy value of each data packet of a UEC flow (per-packet spraying chosen by the
 * sender) and retires entropies whose packets come back ECN-marked or trimmed for HoldPs, as REPS-style
 * load balancing does: a flow cycles through EntropyCount values (each a different ECMP hash, so a
 * different path at every multi-path hop) and skips those recently reported congested. Deterministic (no
 * random draw), so runs repeat bit for bit. Plain logic owned by the HostNic, one state per UEC queue pair.
 */
class EntropySelector
{
  public:
    /// Use @p count entropy values per flow and avoid a congested one for @p holdPs (ps; 0: never avoid).
    void Configure(uint32_t count, int64_t holdPs)
    {
        NS_ASSERT_MSG(count > 0 && count <= 65536, "entropy count " << count << " outside 1..65536");
        m_count = count;
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
                } // every entropy avoided: keep the round robin
            }
        }
        s.next = (index + 1) % m_count;
        return static_cast<uint16_t>(s.base + index);
    }

    /// A packet sent with @p entropy came back at @p nowPs, congested (ECN-marked or trimmed) or not.
    void OnFeedback(EntropyState& s, uint16_t entropy, bool congested, int64_t nowPs) const
    {
        if (!congested || m_holdPs == 0)
        {
            return;
        }
        const uint32_t index = static_cast<uint16_t>(entropy - s.base);
        if (index >= m_count)
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
    uint32_t m_count{256}; ///< entropy values per flow
    int64_t m_holdPs{0};   ///< how long a congested entropy is avoided, in ps
};

} // namespace ns3

#endif // COSIM_ENTROPY_SELECTOR_H
