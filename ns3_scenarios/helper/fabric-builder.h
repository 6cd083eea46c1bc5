/**
 * @file
 * @ingroup cosim
 * Builds a fabric (host NICs, switches, links, ECMP routes) from plain arrays.
 */
#ifndef COSIM_FABRIC_BUILDER_H
#define COSIM_FABRIC_BUILDER_H

#include "../engine/shared-codes.h"
#include "../model/egress-port.h"
#include "../model/fabric-node.h"
#include "../model/fabric-switch.h"
#include "../model/flow-table.h"
#include "../model/host-nic.h"
#include "../model/packet-pool.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ns3
{

using cosim::NodeKind;

/**
 * @ingroup cosim
 * @brief Instantiates nodes and links from arrays and computes shortest-path ECMP tables.
 *
 * Nodes are created with the attribute defaults in force (Config::SetDefault), so every tunable of the
 * models can be set before building. Each link is full duplex: two EgressPorts, one per direction.
 */
class FabricBuilder
{
  public:
    /// Build into @p pool and @p flows (not owned; both outlive the builder's nodes).
    FabricBuilder(PacketPool* pool, FlowTable* flows);

    /// Create @p n nodes; @p kind holds a NodeKind per node. Node ids follow array order.
    void AddNodes(const uint8_t* kind, uint64_t n);

    /**
     * @brief Create @p n full-duplex links.
     * @param a first endpoint node id of each link
     * @param b second endpoint node id of each link
     * @param rateBps link rate of each link, in bit/s
     * @param delayPs one-way propagation delay of each link, in ps
     * @param n number of links
     */
    void AddLinks(const int32_t* a, const int32_t* b, const double* rateBps, const int64_t* delayPs, uint64_t n);

    /**
     * @brief Put switches in groups (a dragonfly's), before ComputeRoutes: every switch then also gets its
     * shortest-path ports towards every group (FabricSwitch::SetGroupRoutes), for non-minimal routing.
     * @param group group of each node id (-1: a host, or a switch in no group)
     * @param n number of nodes
     */
    void SetGroups(const int32_t* group, uint64_t n);

    /**
     * @brief Pin routes (after AddLinks, before ComputeRoutes): row i says that at switch @p switchId[i],
     * packets for the hosts of switch @p toLeaf[i] may leave towards its neighbour @p via[i]; the rows of
     * one (switch, leaf) pair together replace its shortest-path ports by every port whose peer they list.
     * @return an empty string, or why a row is not a switch, a leaf with hosts and a neighbour
     */
    std::string SetRouteOverrides(const int32_t* switchId, const int32_t* toLeaf, const int32_t* via, uint64_t n);

    /// Compute every switch's equal-cost shortest-path ports towards every host (and group, SetGroups),
    /// or the pinned ones (SetRouteOverrides).
    void ComputeRoutes();

    /**
     * @brief Recompute the routes on the links that are up (link faults): every leaf's shortest paths
     * again, without the ports @p dead marks; a switch whose table changed gets the new one. A destination
     * leaf a switch no longer reaches keeps its old candidates (its packets keep going to the dead link).
     * @param dead per node, per port: non-zero if the port's link is down
     * @return the switches whose tables changed
     */
    std::vector<uint32_t> Reroute(const std::vector<std::vector<uint8_t>>& dead);

    /// Size every switch's buffers, seed its random stream and give credit-mode ports their initial
    /// credits; @return an empty string, or why some buffer setting is impossible.
    std::string SetupSwitches();

    /// @return the switch at node @p id (null if @p id is a host)
    Ptr<FabricSwitch> GetSwitch(uint32_t id) const
    {
        return m_switches[id];
    }

    /// @return node @p id
    Ptr<FabricNode> GetNode(uint32_t id) const
    {
        return m_nodes[id];
    }

    /// @return the NIC of host node @p id (null if @p id is a switch)
    Ptr<HostNic> GetHost(uint32_t id) const
    {
        return m_hosts[id];
    }

    /// @return number of nodes
    uint32_t GetNNodes() const
    {
        return static_cast<uint32_t>(m_nodes.size());
    }

    /// Dispose every node and drop the references.
    void Dispose();

  private:
    /// ComputeRoutes without the ports @p dead marks (null: none); @return switches whose tables changed.
    std::vector<uint32_t> Routes(const std::vector<std::vector<uint8_t>>* dead);

    /**
     * @brief Every switch's ports and hops towards every group (SetGroups).
     * @param peerStart CSR offsets of every node's port peers
     * @param peer the peer node of every port
     * @param dead per node, per port: non-zero if the port's link is down (null: none)
     */
    void GroupRoutesFor(const std::vector<uint32_t>& peerStart,
                        const std::vector<uint32_t>& peer,
                        const std::vector<std::vector<uint8_t>>* dead);

    std::vector<int32_t> m_groupOfNode;    ///< group of every node (SetGroups; empty: no groups)
    /// (switch, leaf) -> the neighbours its packets for the leaf's hosts go to (SetRouteOverrides)
    std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> m_pinnedVia;
    PacketPool* m_pool;                    ///< packet allocator of the run
    FlowTable* m_flows;                    ///< flows of the run
    std::vector<Ptr<FabricNode>> m_nodes;  ///< all nodes by id
    std::vector<Ptr<HostNic>> m_hosts;     ///< NIC per node id (null for switches)
    std::vector<Ptr<FabricSwitch>> m_switches; ///< switch per node id (null for hosts)
};

} // namespace ns3

#endif // COSIM_FABRIC_BUILDER_H
