/**
 * @file
 * @ingroup cosim
 * Base of every node of cosim's fabric (host NIC, switch): a set of egress ports and a receive hook.
 */
#ifndef COSIM_FABRIC_NODE_H
#define COSIM_FABRIC_NODE_H

#include "fabric-packet.h"

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"

#include <array>
#include <vector>

namespace ns3
{

class EgressPort;
class PacketPool;

/**
 * @ingroup cosim
 * @brief A fabric node: owns its egress ports; a peer's port delivers packets through Receive().
 */
class FabricNode : public Object
{
  public:
    /// @return the TypeId of FabricNode
    static TypeId GetTypeId();

    FabricNode() = default;
    FabricNode(const FabricNode&) = delete;
    FabricNode& operator=(const FabricNode&) = delete;

    /**
     * @brief Take a packet whose last bit just arrived on port @p inPort.
     * @param p the packet (ownership passes to the node)
     * @param inPort index of the port it arrived on (the reverse direction of the link)
     */
    virtual void Receive(FabricPacket* p, uint32_t inPort) = 0;

    /**
     * @brief Port @p port starts serializing @p p, which left the port's queues (not control frames).
     * Switches release the packet's ingress buffer here; the default does nothing.
     */
    virtual void TransmitStarted(FabricPacket* p, uint32_t port)
    {
    }

    /**
     * @brief Port @p port dropped @p p from its queue (PFC watchdog): free what the packet holds at this
     * node and return it to the pool. The default only returns it.
     */
    virtual void DropQueued(FabricPacket* p, uint32_t port);

    /// @return the node id (index in the fabric's node arrays)
    uint32_t GetNodeId() const
    {
        return m_nodeId;
    }

    /// Set the node id and the packet pool every packet of this node comes from and returns to.
    void Bind(uint32_t nodeId, PacketPool* pool)
    {
        m_nodeId = nodeId;
        m_pool = pool;
    }

    /// Attach @p port as the next port; @return its index.
    virtual uint32_t AddPort(Ptr<EgressPort> port);

    /// @return port number @p i
    Ptr<EgressPort> GetPort(uint32_t i) const
    {
        return m_ports[i];
    }

    /// @return number of ports
    uint32_t GetNPorts() const
    {
        return static_cast<uint32_t>(m_ports.size());
    }

    /// @return input buffer per port and virtual lane that credits advertise (credit mode), in bytes
    uint64_t GetVlBufferBytes() const
    {
        return m_vlBufferBytes;
    }

    /// @return credit-update packets sent (credit mode)
    uint64_t GetCreditPacketsSent() const
    {
        return m_creditPacketsSent;
    }

  protected:
    void DoDispose() override;

    /// Act on a PFC PAUSE frame that arrived on @p inPort (pauses our egress on that link) and free it.
    void ApplyPause(FabricPacket* p, uint32_t inPort);

    /// Act on an IB credit update that arrived on @p inPort (credits for our egress there) and free it.
    void ApplyCredit(FabricPacket* p, uint32_t inPort);

    /**
     * @brief Credit mode: @p blocks of input buffer of lane @p vl on @p port were freed. They go back to
     * the upstream sender in a credit packet once CreditUpdateBytes have gathered, or after at most
     * CreditUpdateInterval.
     */
    void ReturnCredits(uint32_t port, uint8_t vl, uint32_t blocks);

    /// Send every lane's gathered credits of @p port upstream now.
    void FlushCredits(uint32_t port);

    /// The CreditUpdateInterval deadline of @p port: send what gathered.
    void CreditTimer(uint32_t port);

    uint64_t m_vlBufferBytes{0};     ///< input buffer per (port, lane) covered by credits, in bytes
    uint64_t m_creditUpdateBytes{0}; ///< freed bytes that trigger an immediate credit update, in bytes
    Time m_creditUpdateInterval;     ///< longest delay of a credit update
    uint32_t m_creditPacketBytes{0}; ///< wire size of a credit update, in bytes
    uint64_t m_creditPacketsSent{0}; ///< credit updates sent
    std::vector<std::array<uint32_t, kNumPriorities>> m_pendingCredits; ///< per port: freed blocks per lane
    std::vector<bool> m_creditTimerArmed; ///< per port: a CreditTimer is scheduled

    std::vector<Ptr<EgressPort>> m_ports; ///< egress ports, indexed by port number
    PacketPool* m_pool{nullptr};          ///< packet allocator of the run (not owned)
    uint32_t m_nodeId{0};                 ///< index in the fabric's node arrays
};

} // namespace ns3

#endif // COSIM_FABRIC_NODE_H
