/**
 * @file
 * @ingroup cosim
 * An output-queued switch: forwards each packet to an egress port chosen among equal-cost next hops.
 */
#ifndef COSIM_FABRIC_SWITCH_H
#define COSIM_FABRIC_SWITCH_H

#include "fabric-node.h"

#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Switch with a per-destination table of equal-cost egress ports and per-flow ECMP hashing.
 *
 * The table is CSR: the candidates for destination node d are m_routePorts[m_routeStart[d] ..
 * m_routeStart[d+1]). A flow always takes the same candidate (hash of flow id and EcmpSeed), so
 * packets of a flow stay in order and distinct flows can collide on a port, as in real fabrics.
 */
class FabricSwitch : public FabricNode
{
  public:
    /// @return the TypeId of FabricSwitch
    static TypeId GetTypeId();

    FabricSwitch();
    ~FabricSwitch() override;

    /**
     * @brief Install the forwarding table.
     * @param routeStart CSR offsets, one per node plus one
     * @param routePorts egress port numbers, grouped by destination node
     */
    void SetRoutes(std::vector<uint32_t> routeStart, std::vector<uint16_t> routePorts);

    void Receive(FabricPacket* p, uint32_t inPort) override;

    /// @return the egress port a packet of flow @p flowId to node @p dst takes
    uint32_t SelectPort(uint64_t flowId, uint32_t dst) const;

  private:
    std::vector<uint32_t> m_routeStart; ///< CSR offsets into m_routePorts, per destination node
    std::vector<uint16_t> m_routePorts; ///< equal-cost egress ports
    uint32_t m_ecmpSeed{0};             ///< perturbs the ECMP hash (per run)
};

} // namespace ns3

#endif // COSIM_FABRIC_SWITCH_H
