/**
 * @file
 * @ingroup cosim
 * What an egress port pulls packets from when its own queues are empty (a NIC's scheduler).
 */
#ifndef COSIM_PACKET_SOURCE_H
#define COSIM_PACKET_SOURCE_H

#include "fabric-packet.h"

#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Supplies packets to an egress port when its own queues are empty (a NIC's scheduler).
 */
class PacketSource
{
  public:
    virtual ~PacketSource() = default;

    /**
     * @return the next packet to transmit on @p port, or nullptr if nothing is ready now
     * @param port the port asking
     * @param pausedMask bit p set: priority p may not send now (paused by PFC, or its virtual lane lacks
     * credits for a full packet) and must not be returned
     */
    virtual FabricPacket* PullPacket(uint32_t port, uint8_t pausedMask) = 0;

    /// @return true if the source has data waiting at any priority of @p prioMask (sent or not yet)
    virtual bool HasPending(uint8_t prioMask) const = 0;
};

} // namespace ns3

#endif // COSIM_PACKET_SOURCE_H
