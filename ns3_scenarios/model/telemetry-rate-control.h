/**
 * @file
 * @ingroup cosim
 * Switch-telemetry congestion control for RoCE queue pairs: HPCC's sender (Li et al., SIGCOMM 2019)
 * driven by the most utilized hop of the path, as switches stamp it (LinkTelemetry) and receivers echo
 * it in their ACKs.
 */
#ifndef COSIM_TELEMETRY_RATE_CONTROL_H
#define COSIM_TELEMETRY_RATE_CONTROL_H

#include "ns3/data-rate.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Telemetry congestion-control state of one queue pair. Plain data; the NIC owns one per QP.
 *
 * The current rate is the QP's rate limiter's (HostNic's QueuePair::cc.rateBps); this holds the
 * reference HPCC updates once per round trip.
 */
struct TelemetryCcState
{
    double referenceRateBps{0};     ///< Rc: the rate as of the last once-per-RTT update, in bit/s
    uint64_t lastUpdateSeqBytes{0}; ///< bytes sent at that update: an ACK beyond them ends the round (0: none yet)
    uint32_t incStage{0};           ///< additive increases since the last multiplicative change (a count)
};

/**
 * @ingroup cosim
 * @brief HPCC's rate and window computation from the path's largest utilization U (one per NIC).
 *
 * On every ACK (HPCC's fast reaction) with k = U / TargetUtilization: if k >= 1 or MaxStage additive
 * steps were taken, R = Rc / k + R_AI (multiplicative, towards the target utilization), else
 * R = Rc + R_AI; R stays within [MinRate, line rate]. The reference Rc and the stage advance only
 * once per round trip (the first ACK beyond the bytes sent at the previous update), so a round's ACKs
 * do not compound. The window is W = R x BaseRtt (HPCC's W = Rc T form), never below one packet and
 * one ACK interval. A new QP starts at line rate with a window of one bandwidth-delay product.
 */
class TelemetryRateControl : public Object
{
  public:
    /// @return the TypeId of TelemetryRateControl
    static TypeId GetTypeId();

    TelemetryRateControl();
    ~TelemetryRateControl() override;

    /// @return the state of a new QP on a link of @p lineRateBps (bit/s)
    TelemetryCcState Initial(double lineRateBps) const;

    /**
     * @brief An ACK echoing path utilization code @p code arrived for the QP in @p s.
     * @param s the QP's state
     * @param code the echoed FabricPacket::pathUtilization (UtilizationCode)
     * @param ackedBytes the ACK's cumulative acknowledgement, in bytes
     * @param sentBytes payload the QP has sent so far, in bytes
     * @param lineRateBps the NIC's line rate, in bit/s
     * @param rateBps the QP's current rate, in bit/s
     * @return the QP's new rate, in bit/s
     */
    double OnAck(TelemetryCcState& s, uint8_t code, uint64_t ackedBytes, uint64_t sentBytes, double lineRateBps,
                 double rateBps) const;

    /// @return the window of a QP at @p rateBps (bit/s): payload it may have unacknowledged, in bytes
    uint64_t WindowBytes(double rateBps) const
    {
        return uint64_t(rateBps * double(m_baseRtt.GetTimeStep()) * 1e-12 / 8);
    }

  private:
    double m_targetUtilization{0.95}; ///< eta (dimensionless)
    double m_additiveIncrease{0.003125}; ///< R_AI, as a fraction of the line rate (dimensionless)
    uint32_t m_maxStage{5};           ///< additive steps before a multiplicative increase (a count)
    Time m_baseRtt;                   ///< T
    DataRate m_minRate;               ///< floor of the rate
};

} // namespace ns3

#endif // COSIM_TELEMETRY_RATE_CONTROL_H
