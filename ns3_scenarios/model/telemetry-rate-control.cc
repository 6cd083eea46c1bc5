#include "telemetry-rate-control.h"

#include "link-telemetry.h"

#include "ns3/double.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(TelemetryRateControl);

namespace
{
/// Smallest utilization a multiplicative step divides by: a path reporting none still has a finite step
constexpr double kLeastUtilization = 1.0 / UtilizationCode::kLinearSteps;
} // namespace

TypeId
TelemetryRateControl::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::TelemetryRateControl")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<TelemetryRateControl>()
            .AddAttribute("TargetUtilization",
                          "HPCC's eta: the utilization of the most utilized hop a sender aims for "
                          "(dimensionless, 0..1; HPCC's 0.95). Below 1 the bottleneck keeps a margin that "
                          "drains its queue.",
                          DoubleValue(0.95),
                          MakeDoubleAccessor(&TelemetryRateControl::m_targetUtilization),
                          MakeDoubleChecker<double>(0.01, 1.0))
            .AddAttribute("AdditiveIncrease",
                          "HPCC's W_AI as a rate, R_AI = W_AI / T, added at every update, as a fraction of the "
                          "line rate (dimensionless). Default 0.003125 = (1 - 0.95) / 16: HPCC's "
                          "W_AI = W_init (1 - eta) / N for N = 16 flows per link (312.5 Mbps at 100 Gbps): up "
                          "to N flows, their increases fit in the margin eta leaves. Rate differences between "
                          "n flows shrink by about n R_AI / line rate per round trip (the only force towards "
                          "fairness: multiplicative steps keep rate ratios).",
                          DoubleValue(0.003125),
                          MakeDoubleAccessor(&TelemetryRateControl::m_additiveIncrease),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("MaxStage",
                          "HPCC's maxStage: additive-increase rounds below the target before a multiplicative "
                          "increase (R = Rc / k + R_AI) takes the rest of the spare capacity (a count; HPCC's 5).",
                          UintegerValue(5),
                          MakeUintegerAccessor(&TelemetryRateControl::m_maxStage),
                          MakeUintegerChecker<uint32_t>(0, 1000))
            .AddAttribute("BaseRtt",
                          "HPCC's T, a time: the window is the rate times T. The longest round trip of the fabric "
                          "without queueing; set it equal to LinkTelemetry::BaseRtt.",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&TelemetryRateControl::m_baseRtt),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("MinRate",
                          "Lowest rate a queue pair is slowed to, in bit/s.",
                          DataRateValue(DataRate("100Mbps")),
                          MakeDataRateAccessor(&TelemetryRateControl::m_minRate),
                          MakeDataRateChecker());
    return tid;
}

TelemetryRateControl::TelemetryRateControl() = default;
TelemetryRateControl::~TelemetryRateControl() = default;

TelemetryCcState
TelemetryRateControl::Initial(double lineRateBps) const
{
    TelemetryCcState s;
    s.referenceRateBps = lineRateBps;
    return s;
}

double
TelemetryRateControl::OnAck(TelemetryCcState& s, uint8_t code, uint64_t ackedBytes, uint64_t sentBytes,
                            double lineRateBps, double rateBps) const
{
    NS_ASSERT_MSG(lineRateBps > 0, "a queue pair needs a line rate");
    if (s.lastUpdateSeqBytes == 0)
    {
        s.lastUpdateSeqBytes = sentBytes; // the first round: its telemetry predates any reaction
        return rateBps;
    }
    const double aiBps = lineRateBps * m_additiveIncrease;
    const double k = std::max(UtilizationCode::Decode(code), kLeastUtilization) / m_targetUtilization;
    double rate;
    uint32_t stage;
    if (k >= 1 || s.incStage >= m_maxStage)
    {
        rate = s.referenceRateBps / k + aiBps;
        stage = 0;
    }
    else
    {
        rate = s.referenceRateBps + aiBps;
        stage = s.incStage + 1;
    }
    rate = std::clamp(rate, std::min(double(m_minRate.GetBitRate()), lineRateBps), lineRateBps);
    if (ackedBytes > s.lastUpdateSeqBytes)
    {
        s.referenceRateBps = rate;
        s.incStage = stage;
        s.lastUpdateSeqBytes = sentBytes;
    }
    return rate;
}

} // namespace ns3
