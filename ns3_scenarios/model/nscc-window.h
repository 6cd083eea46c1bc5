/**
 * @file
 * @ingroup cosim
 * Ultra Ethernet's network-signal congestion control (NSCC): a sender window driven by ECN marks and the
 * measured round trip against a target queueing delay.
 */
#ifndef COSIM_NSCC_WINDOW_H
#define COSIM_NSCC_WINDOW_H

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Window state of one UEC flow under NSCC. Plain data; the NIC owns one per queue pair.
 */
struct NsccState
{
    double cwndBytes{0};         ///< congestion window: payload allowed in flight, in bytes
    int64_t minRttPs{0};         ///< smallest round trip this flow measured, in ps (0: none yet)
    int64_t lastDecreasePs{-1};  ///< time of the last multiplicative decrease, in ps (-1: none)
    int64_t periodEndPs{-1};     ///< end of the current quick-adapt period, in ps (-1: not started)
    uint64_t periodAckedBytes{0}; ///< payload acknowledged in the current quick-adapt period, in bytes
    bool periodCongested{false}; ///< the period saw a trimmed packet or a delay above QuickAdaptThreshold
    uint64_t lowDelayBytes{0};   ///< payload acknowledged in a row below FastIncreaseThreshold, in bytes
    double avgDelayPs{0};        ///< smoothed queueing delay (UEC NSCC avg_delay), in ps
};

/**
 * @ingroup cosim
 * @brief The NSCC algorithm of UEC 1.0 (congestion management sublayer) and its parameters, one instance
 * per NIC.
 *
 * Every acknowledgement carries two signals: the ECN bit its data packet collected, and the queueing
 * delay, the measured round trip minus the base RTT (the smaller of BaseRtt and the least round trip the
 * flow saw). The window reacts by quadrant:
 * - no ECN, delay below TargetQdelay: proportional increase, Alpha x MTU x (target - delay) / target per
 *   window acknowledged; fast increase (the window grows by what is acknowledged, doubling per round
 *   trip) once a whole window came back with a delay below FastIncreaseThreshold;
 * - no ECN, delay at or above target: fair increase, FairIncreaseMtus x MTU per window acknowledged
 *   (additive, so competing flows converge to equal shares);
 * - ECN, delay at or above target: multiplicative decrease, if the smoothed delay avg_delay (an average
 *   over acknowledgements, each weighted DelayAverageWeight) is above the target too, by
 *   Gamma x (avg_delay - target) / avg_delay, at most MaxDecrease, at most once per base RTT. A few marks
 *   behind a short collision of sprayed packets leave the average, and so the window, alone; a standing
 *   queue raises it within a few dozen acknowledgements;
 * - ECN, delay below target: no change (the mark comes from a queue on this packet's path only; the
 *   entropy feedback moves traffic off it).
 * Quick adapt: at the end of each period of one base RTT plus the target, if the period saw a trimmed
 * packet (a NACK) or a delay above QuickAdaptThreshold, the window drops at once to the payload
 * acknowledged in that period: what the network actually delivered (incast onset). The window stays in
 * [MinWindowBytes, MaxWindowBytes] and starts at its maximum (no slow start: UEC sends at line rate from
 * the first packet).
 */
class NsccWindow : public Object
{
  public:
    /// @return the TypeId of NsccWindow
    static TypeId GetTypeId();

    NsccWindow();
    ~NsccWindow() override;

    /// @return the state of a new flow on a link of @p lineRateBps with packets of @p mtuBytes payload
    NsccState Initial(double lineRateBps, uint32_t mtuBytes) const;

    /**
     * @brief An acknowledgement of @p ackedBytes in-flight payload arrived: one delay sample.
     * @param s the flow's state
     * @param ackedBytes payload it newly acknowledged, in bytes
     * @param markedBytes of which came in ECN-marked packets, in bytes (the rest came through clean)
     * @param rttPs the round trip of the data packet that triggered it, in ps
     * @param nowPs the current time, in ps
     */
    void OnAck(NsccState& s, uint64_t ackedBytes, uint64_t markedBytes, int64_t rttPs, int64_t nowPs) const;

    /// A NACK of a trimmed packet arrived at @p nowPs (ps): congestion beyond doubt.
    void OnNack(NsccState& s, int64_t nowPs) const;

    /// @return the largest window of a flow on a link of @p lineRateBps, in bytes
    double MaxWindowBytes(double lineRateBps) const;

  private:
    /// @return the base RTT of flow @p s, in ps
    int64_t BaseRttPs(const NsccState& s) const;
    /// Count @p ackedBytes towards the quick-adapt period; adapt at its end if it was congested.
    void QuickAdapt(NsccState& s, uint64_t ackedBytes, bool congested, int64_t nowPs) const;
    /// Multiplicative decrease by @p factor (< 1), at most once per base RTT.
    void Decrease(NsccState& s, double factor, int64_t nowPs) const;
    /// Keep the window within its bounds.
    void Clamp(NsccState& s) const;

    Time m_baseRtt;              ///< BaseRtt attribute
    Time m_targetQdelay;         ///< TargetQdelay attribute
    Time m_quickAdaptThreshold;  ///< QuickAdaptThreshold attribute
    Time m_fastIncreaseThreshold; ///< FastIncreaseThreshold attribute
    double m_alpha;              ///< Alpha attribute (MTUs per window)
    double m_fairIncreaseMtus;   ///< FairIncreaseMtus attribute (MTUs per window)
    double m_gamma;              ///< Gamma attribute (dimensionless)
    double m_delayAverageWeight; ///< DelayAverageWeight attribute (dimensionless)
    double m_maxDecrease;        ///< MaxDecrease attribute (dimensionless)
    double m_maxWindowBdps;      ///< MaxWindowBdps attribute (bandwidth-delay products)
    uint64_t m_minWindowBytes;   ///< MinWindowBytes attribute, in bytes
    mutable double m_maxWindowBytes{0}; ///< the window bound of the flows on this NIC, in bytes
    mutable uint32_t m_mtuBytes{1};     ///< payload of a full packet, in bytes
};

} // namespace ns3

#endif // COSIM_NSCC_WINDOW_H
