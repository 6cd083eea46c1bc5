/**
 * @file
 * @ingroup cosim
 * In-band network telemetry at a switch's egress ports: each port measures its own utilization and
 * stamps it on the data packets it sends when it is the most utilized hop of their path so far, the
 * one number HPCC's sender needs (HPCC, Li et al., SIGCOMM 2019), carried in one byte as HPCC-PINT does
 * (PINT, Ben Basat et al., SIGCOMM 2020).
 */
#ifndef COSIM_LINK_TELEMETRY_H
#define COSIM_LINK_TELEMETRY_H

#include "fabric-packet.h"

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief The one-byte code of a utilization (FabricPacket::pathUtilization).
 *
 * Codes 0..kLinearCodes are k / kLinearSteps (steps of 1/128 up to 1.5: fine where HPCC's target
 * utilization lies); codes above grow geometrically by kGeometricRatio per code, to about 59 at 255 (a
 * queue of 58 base-RTTs of the link), where they saturate. Monotonic, so the largest code is the
 * largest utilization.
 */
class UtilizationCode
{
  public:
    static constexpr double kLinearSteps = 128.0;  ///< codes per unit of utilization, linear range
    static constexpr uint32_t kLinearCodes = 192;  ///< last code of the linear range (utilization 1.5)
    static constexpr double kGeometricRatio = 1.06; ///< utilization ratio of two codes above the linear range

    /// @return the code of utilization @p u (dimensionless, >= 0; rounded to the nearest code)
    static uint8_t Encode(double u);

    /// @return the utilization code @p code stands for (dimensionless)
    static double Decode(uint8_t code);
};

/// Utilization state of one egress port. Plain data; LinkTelemetry owns one per port.
struct PortUtilization
{
    double utilization{0};     ///< U: time-weighted average over the base RTT (dimensionless; 1 = busy, no queue)
    int64_t lastPs{-1};        ///< when the port last started sending a packet, in ps (-1: never)
    uint32_t lastWireBytes{0}; ///< wire size of that packet, in bytes
};

/**
 * @ingroup cosim
 * @brief A switch's in-band telemetry: the utilization of each egress port, stamped on data packets.
 *
 * Each time a port starts sending a packet, it updates U = (1 - w) U + w u with w = min(dt, T) / T,
 * where dt is the time since it started the previous packet, T the BaseRtt, and
 * u = qlen / (B T) + (bytes of the previous packet / dt) / B: the queue left behind the packet in base
 * RTTs of the link plus the rate it sent at, over its rate B. This is HPCC's per-link estimate (its
 * sender computes it from per-hop queue length, byte counter and timestamp) computed at the switch, as
 * HPCC-PINT does, so that a packet carries one number: the largest code of its path (a data packet's
 * code rises at every hop whose utilization is higher). Other packets only count towards the rate.
 */
class LinkTelemetry : public Object
{
  public:
    /// @return the TypeId of LinkTelemetry
    static TypeId GetTypeId();

    LinkTelemetry();
    ~LinkTelemetry() override;

    /// Size the state for @p ports egress ports; @return true if telemetry is on (the Enabled attribute).
    bool Configure(std::size_t ports);

    /**
     * @brief Port @p port starts sending @p p: update the port's utilization and stamp it on @p p.
     * @param p the packet (a data packet's pathUtilization rises to the port's code if below it)
     * @param port the egress port
     * @param queueBytes bytes left queued at the port behind @p p, in bytes
     * @param rateBps the port's rate, in bit/s
     * @param nowPs the time, in ps
     */
    void OnTransmit(FabricPacket* p, uint32_t port, uint64_t queueBytes, uint64_t rateBps, int64_t nowPs);

    /// @return the utilization of port @p port (dimensionless), as of its last packet
    double GetUtilization(uint32_t port) const;

  private:
    bool m_enabled{false};               ///< stamp telemetry at all (Enabled)
    Time m_baseRtt;                      ///< T: averaging window and queue normalization (BaseRtt)
    std::vector<PortUtilization> m_ports; ///< per egress port
};

} // namespace ns3

#endif // COSIM_LINK_TELEMETRY_H
