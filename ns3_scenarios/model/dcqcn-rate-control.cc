#include "dcqcn-rate-control.h"

#include "ns3/double.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(DcqcnRateControl);

TypeId
DcqcnRateControl::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::DcqcnRateControl")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<DcqcnRateControl>()
            .AddAttribute("G",
                          "EWMA gain g of the congestion estimate alpha (dimensionless).",
                          DoubleValue(1.0 / 256),
                          MakeDoubleAccessor(&DcqcnRateControl::m_g),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("InitialAlpha",
                          "Alpha of a new queue pair (dimensionless).",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&DcqcnRateControl::m_initialAlpha),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("AlphaUpdatePeriod",
                          "Alpha decays by (1 - g) after each such period without a CNP, a time (the paper's 55 us).",
                          TimeValue(MicroSeconds(55)),
                          MakeTimeAccessor(&DcqcnRateControl::m_alphaPeriod),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateIncreasePeriod",
                          "Period of the rate-increase timer, a time. A CNP restarts it, so it must be shorter "
                          "than the receivers' CnpInterval (50 us) or rates never recover under steady "
                          "marking; 20 us measured good at 100-400 Gbps.",
                          TimeValue(MicroSeconds(20)),
                          MakeTimeAccessor(&DcqcnRateControl::m_increasePeriod),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("ByteCounterBytes",
                          "Bytes sent per byte-counter increase stage, in bytes.",
                          UintegerValue(10 * 1000 * 1000),
                          MakeUintegerAccessor(&DcqcnRateControl::m_byteCounterBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("FastRecoverySteps",
                          "F: increase stages of fast recovery before additive increase (a count).",
                          UintegerValue(5),
                          MakeUintegerAccessor(&DcqcnRateControl::m_fastRecoverySteps),
                          MakeUintegerChecker<uint32_t>(1, 1000))
            .AddAttribute("RateAI",
                          "Additive increase step of the target rate (bit/s); the paper's 40 Mbps at 40 Gbps "
                          "recovers too slowly at 100-400 Gbps.",
                          DataRateValue(DataRate("2Gbps")),
                          MakeDataRateAccessor(&DcqcnRateControl::m_rateAi),
                          MakeDataRateChecker())
            .AddAttribute("RateHAI",
                          "Hyper increase step of the target rate (bit/s).",
                          DataRateValue(DataRate("10Gbps")),
                          MakeDataRateAccessor(&DcqcnRateControl::m_rateHai),
                          MakeDataRateChecker())
            .AddAttribute("MinRate",
                          "Lowest current rate a CNP can push a queue pair to (bit/s).",
                          DataRateValue(DataRate("100Mbps")),
                          MakeDataRateAccessor(&DcqcnRateControl::m_minRate),
                          MakeDataRateChecker());
    return tid;
}

DcqcnRateControl::DcqcnRateControl() = default;
DcqcnRateControl::~DcqcnRateControl() = default;

DcqcnState
DcqcnRateControl::Initial(double lineRateBps) const
{
    DcqcnState s;
    s.rateBps = lineRateBps;
    s.targetBps = lineRateBps;
    s.alpha = m_initialAlpha;
    return s;
}

void
DcqcnRateControl::OnCnp(DcqcnState& s) const
{
    s.targetBps = s.rateBps;
    s.rateBps = std::max(double(m_minRate.GetBitRate()), s.rateBps * (1.0 - s.alpha / 2.0));
    s.alpha = (1.0 - m_g) * s.alpha + m_g;
    s.timerStages = 0;
    s.byteStages = 0;
    s.bytesCounted = 0;
    s.cnpThisPeriod = true;
}

void
DcqcnRateControl::OnAlphaTimer(DcqcnState& s) const
{
    if (!s.cnpThisPeriod)
    {
        s.alpha = (1.0 - m_g) * s.alpha;
    }
    s.cnpThisPeriod = false;
}

void
DcqcnRateControl::OnIncreaseTimer(DcqcnState& s, double lineRateBps) const
{
    ++s.timerStages;
    Increase(s, lineRateBps);
}

bool
DcqcnRateControl::OnBytesSent(DcqcnState& s, uint64_t bytes, double lineRateBps) const
{
    s.bytesCounted += bytes;
    if (s.bytesCounted < m_byteCounterBytes)
    {
        return false;
    }
    s.bytesCounted -= m_byteCounterBytes;
    ++s.byteStages;
    Increase(s, lineRateBps);
    return true;
}

void
DcqcnRateControl::Increase(DcqcnState& s, double lineRateBps) const
{
    const uint32_t hi = std::max(s.timerStages, s.byteStages);
    const uint32_t lo = std::min(s.timerStages, s.byteStages);
    if (hi < m_fastRecoverySteps)
    {
        // fast recovery: close half the gap to the rate before the last cut
    }
    else if (lo > m_fastRecoverySteps)
    {
        s.targetBps += double(lo - m_fastRecoverySteps) * double(m_rateHai.GetBitRate());
    }
    else
    {
        s.targetBps += double(m_rateAi.GetBitRate());
    }
    s.targetBps = std::min(s.targetBps, lineRateBps);
    s.rateBps = std::min((s.targetBps + s.rateBps) / 2.0, lineRateBps);
}

} // namespace ns3
