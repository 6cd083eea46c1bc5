/**
 * @file
 * @ingroup cosim
 * Base of every node of cosim's fabric (host NIC, switch): a set of egress ports and a receive hook.
 */
#ifndef COSIM_FABRIC_NODE_H
#define COSIM_FABRIC_NODE_H

#include "fabric-packet.h"
#include "shared-input-buffer.h"

#include "../engine/shared-codes.h"

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"
#include "ns3/traced-callback.h"

#include <array>
#include <string>
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

    /**
     * @brief Port @p port lost a packet, trimmed it or sent it again, for @p cause: fires the Loss trace
     * source. Called on loss paths only, never per forwarded packet.
     */
    void NoteLoss(uint32_t port, cosim::LossCause cause)
    {
        m_lossTrace(port, static_cast<uint8_t>(cause));
    }

    /// Signature of the Loss trace source: (port number, cosim::LossCause code).
    typedef void (*LossCallback)(uint32_t port, uint8_t cause);

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

    /// @return port number @p i, for the packet path: without Ptr's out-of-line null check
    EgressPort* PortAt(uint32_t i) const
    {
        return PeekPointer(m_ports[i]);
    }

    /// @return number of ports
    uint32_t GetNPorts() const
    {
        return static_cast<uint32_t>(m_ports.size());
    }

    /**
     * @brief Credit mode: size the input buffer of every port, after all links are attached. A port whose
     * link is k times InputBufferPortRate stands for ceil(k) physical ports (a trunk) and gets that many
     * buffers and reservations.
     * @param maxPacketBytes largest wire packet on any link, in bytes
     * @return an empty string, or why the buffer settings are impossible (naming the attribute to change)
     */
    std::string SetupInputBuffers(uint32_t maxPacketBytes);

    /// @return credit mode: the shared input buffer of @p port, in 64-byte blocks (SetupInputBuffers)
    uint32_t GetInputCapacityBlocks(uint32_t port) const
    {
        return m_inputs.GetCapacityBlocks(port);
    }

    /// @return credit mode: the credits each data lane of @p port starts with (its reservation), in blocks
    uint32_t GetInputReservedBlocks(uint32_t port) const
    {
        return m_inputs.GetReservedBlocks(port);
    }

    /// @return the input buffers (credit mode), read-only
    const SharedInputBuffer& GetInputBuffers() const
    {
        return m_inputs;
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

    /// Credit mode: a packet of @p blocks arrived on lane @p vl of @p port; lend it what the pool allows.
    void AdmitInput(uint32_t port, uint8_t vl, uint32_t blocks)
    {
        const uint32_t lent = m_inputs.Admit(port, vl, blocks);
        if (lent != 0)
        {
            ReturnCredits(port, vl, lent);
        }
    }

    /// Credit mode: a packet of @p blocks on lane @p vl of @p port was consumed as it arrived (a NIC).
    void PassInput(uint32_t port, uint8_t vl, uint32_t blocks)
    {
        ReturnCredits(port, vl, m_inputs.PassThrough(port, vl, blocks));
    }

    /// Credit mode: a packet of @p blocks on lane @p vl of @p port left the input buffer: return its credits.
    void ReleaseInput(uint32_t port, uint8_t vl, uint32_t blocks)
    {
        ReturnCredits(port, m_inputs.Release(port, vl, blocks), blocks);
    }

    /// Send every lane's gathered credits of @p port upstream now.
    void FlushCredits(uint32_t port);

    /// The CreditUpdateInterval deadline of @p port: send what gathered.
    void CreditTimer(uint32_t port);

    uint64_t m_inputBufferBytes{0};  ///< shared input buffer of one physical port, in bytes
    DataRate m_inputBufferPortRate;  ///< rate of the physical port m_inputBufferBytes belongs to
    uint64_t m_vlReservedBytes{0};   ///< reservation of each data lane of one physical port, in bytes
    SharedInputBuffer m_inputs;      ///< credit mode: occupancy and grants of every (port, lane)
    uint64_t m_creditUpdateBytes{0}; ///< freed bytes that trigger an immediate credit update, in bytes
    Time m_creditUpdateInterval;     ///< longest delay of a credit update
    uint32_t m_creditPacketBytes{0}; ///< wire size of a credit update, in bytes
    uint64_t m_creditPacketsSent{0}; ///< credit updates sent
    std::vector<std::array<uint32_t, kNumPriorities>> m_pendingCredits; ///< per port: freed blocks per lane
    std::vector<bool> m_creditTimerArmed; ///< per port: a CreditTimer is scheduled
    std::vector<uint32_t> m_creditTriggerBlocks; ///< per port: gathered credits sent at once, in blocks

    std::vector<Ptr<EgressPort>> m_ports; ///< egress ports, indexed by port number
    TracedCallback<uint32_t, uint8_t> m_lossTrace; ///< (port, cosim::LossCause) of each loss or resend
    PacketPool* m_pool{nullptr};          ///< packet allocator of the run (not owned)
    uint32_t m_nodeId{0};                 ///< index in the fabric's node arrays
};

} // namespace ns3

#endif // COSIM_FABRIC_NODE_H
