/**
 * @file
 * @ingroup cosim
 * Routes towards groups of switches (dragonfly groups), for non-minimal routing via an intermediate group.
 */
#ifndef COSIM_GROUP_ROUTES_H
#define COSIM_GROUP_ROUTES_H

#include "ns3/assert.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Which group every node of a grouped fabric (dragonfly) is in, shared by its switches.
 */
struct SwitchGroups
{
    std::vector<int32_t> groupOfNode; ///< group of every node id (-1: a host, or a switch in no group)
    uint32_t nGroups{0};              ///< number of groups
};

/**
 * @ingroup cosim
 * @brief One switch's routes towards every group: the equal-cost ports on its shortest paths to the group
 * that cross no third group (inside its own group, then one link into the target: a dragonfly's local then
 * global hop) or, where failed links leave no such path, its shortest paths over any links; CSR by group,
 * and the router hops that takes.
 */
struct GroupRoutes
{
    std::vector<uint32_t> start;    ///< CSR offsets into ports, one per group plus one
    std::vector<uint16_t> ports;    ///< equal-cost egress ports, grouped by destination group
    std::vector<uint8_t> groupHops; ///< router hops to the group (0 inside it)
};

/**
 * @ingroup cosim
 * @brief The intermediate group number @p draw picks among the @p nGroups groups other than @p a and @p b
 * (a != b, nGroups >= 3): uniform when @p draw is.
 */
inline uint32_t
IntermediateGroup(uint64_t draw, uint32_t nGroups, uint32_t a, uint32_t b)
{
    NS_ASSERT_MSG(nGroups >= 3 && a != b && a < nGroups && b < nGroups, "an intermediate group needs a third group");
    const uint32_t lo = a < b ? a : b;
    const uint32_t hi = a < b ? b : a;
    uint32_t k = uint32_t(draw % (nGroups - 2));
    k += (k >= lo);
    k += (k >= hi);
    return k;
}

} // namespace ns3

#endif // COSIM_GROUP_ROUTES_H
