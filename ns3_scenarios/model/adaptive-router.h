/**
 * @file
 * @ingroup cosim
 * Adaptive routing's choice: the least-loaded egress port among a destination's equal-cost ports.
 */
#ifndef COSIM_ADAPTIVE_ROUTER_H
#define COSIM_ADAPTIVE_ROUTER_H

#include "egress-port.h"

#include "ns3/assert.h"
#include "ns3/ptr.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Picks, among equal-cost egress ports, the one with the fewest bytes queued (all priorities), as
 * InfiniBand switches' adaptive routing does with their local queue depths.
 *
 * The scan starts at a preferred candidate (the ECMP hash's), which wins ties: on an idle fabric every
 * packet of a flow takes the hashed path, so reordering happens only where queues differ.
 */
class AdaptiveRouter
{
  public:
    /**
     * @param candidates the equal-cost port numbers
     * @param count number of candidates (at least 1)
     * @param preferred index into @p candidates that wins ties
     * @param ports the switch's egress ports, by port number
     * @return the chosen port number
     */
    static uint32_t LeastLoaded(const uint16_t* candidates,
                                uint32_t count,
                                uint32_t preferred,
                                const std::vector<Ptr<EgressPort>>& ports)
    {
        NS_ASSERT_MSG(count > 0 && preferred < count, "adaptive routing needs a preferred candidate among them");
        uint32_t best = candidates[preferred];
        uint64_t bestBytes = ports[best]->GetQueueBytes();
        for (uint32_t k = 1; k < count && bestBytes != 0; ++k)
        {
            const uint32_t port = candidates[(preferred + k) % count];
            const uint64_t bytes = ports[port]->GetQueueBytes();
            if (bytes < bestBytes)
            {
                best = port;
                bestBytes = bytes;
            }
        }
        return best;
    }
};

} // namespace ns3

#endif // COSIM_ADAPTIVE_ROUTER_H
