/**
 * @file
 * @ingroup cosim
 * A host's network interface: sends its flows as MTU-sized packets and sinks the flows addressed to it.
 */
#ifndef COSIM_HOST_NIC_H
#define COSIM_HOST_NIC_H

#include "egress-port.h"
#include "fabric-node.h"
#include "flow-table.h"

#include "ns3/traced-callback.h"

#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Host NIC with one port: segments flows into packets, round-robin over active flows.
 *
 * The NIC is its port's PacketSource: it builds a packet only when the port is ready to serialize one,
 * so a flow of any size costs memory for one packet at a time. A flow completes when its last payload
 * byte reaches the destination NIC; the completion time is recorded in the FlowTable.
 */
class HostNic : public FabricNode, public PacketSource
{
  public:
    /// @return the TypeId of HostNic
    static TypeId GetTypeId();

    HostNic();
    ~HostNic() override;

    /// Use @p table for every flow this NIC sends or receives (not owned; outlives the run).
    void SetFlowTable(FlowTable* table);

    /// Schedule flow @p flowId (whose src is this node) to start at its FlowTable start time.
    void AddFlow(uint64_t flowId);

    void Receive(FabricPacket* p, uint32_t inPort) override;
    FabricPacket* PullPacket(uint32_t port) override;

    /// @return payload bytes per full packet (the MTU payload), in bytes
    uint32_t GetMtuBytes() const
    {
        return m_mtuBytes;
    }

    /// @return header and framing bytes added to every data packet, in bytes
    uint32_t GetHeaderBytes() const
    {
        return m_headerBytes;
    }

  private:
    /// Make flow @p flowId eligible for transmission.
    void StartFlow(uint64_t flowId);

    FlowTable* m_flows{nullptr};        ///< the run's flows
    std::vector<uint64_t> m_active;     ///< flows with bytes left to send, served round-robin
    std::size_t m_next{0};              ///< round-robin cursor into m_active
    uint32_t m_mtuBytes{4096};          ///< payload bytes per full packet
    uint32_t m_headerBytes{0};          ///< per-packet header + framing bytes
    TracedCallback<uint64_t> m_flowFinishTrace; ///< flow id whose last byte arrived here
};

} // namespace ns3

#endif // COSIM_HOST_NIC_H
