#include "nscc-window.h"

#include "ns3/assert.h"
#include "ns3/double.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(NsccWindow);

TypeId
NsccWindow::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::NsccWindow")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<NsccWindow>()
            .AddAttribute("BaseRtt",
                          "Round trip of the fabric without queueing, a time (UEC NSCC base_rtt, configured per "
                          "fabric). A flow uses the smaller of it and the least round trip it measured. Default "
                          "10 us: four 1 us hops each way of a leaf-spine plus serialization.",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&NsccWindow::m_baseRtt),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("TargetQdelay",
                          "Queueing delay NSCC steers to, a time (UEC NSCC target_Qdelay): below it the window "
                          "grows in proportion to the distance, above it ECN marks cut it.",
                          TimeValue(MicroSeconds(5)),
                          MakeTimeAccessor(&NsccWindow::m_targetQdelay),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("QuickAdaptThreshold",
                          "Queueing delay above which a quick-adapt period counts as congested, a time (UEC "
                          "NSCC qa_threshold; default 4 x TargetQdelay).",
                          TimeValue(MicroSeconds(20)),
                          MakeTimeAccessor(&NsccWindow::m_quickAdaptThreshold),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("FastIncreaseThreshold",
                          "Queueing delay below which a whole window of acknowledgements switches to fast "
                          "increase, a time (UEC NSCC fast increase: the path is nearly empty).",
                          TimeValue(NanoSeconds(500)),
                          MakeTimeAccessor(&NsccWindow::m_fastIncreaseThreshold),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("Alpha",
                          "Proportional-increase gain (UEC NSCC alpha): MTUs added per window acknowledged "
                          "at zero queueing delay, scaled by (target - delay) / target (dimensionless).",
                          DoubleValue(4.0),
                          MakeDoubleAccessor(&NsccWindow::m_alpha),
                          MakeDoubleChecker<double>(0))
            .AddAttribute("FairIncreaseMtus",
                          "Fair increase (UEC NSCC fi): MTUs added per window acknowledged while the delay "
                          "is above target without ECN (dimensionless).",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&NsccWindow::m_fairIncreaseMtus),
                          MakeDoubleChecker<double>(0))
            .AddAttribute("Gamma",
                          "Multiplicative-decrease gain (UEC NSCC gamma): the window shrinks by "
                          "Gamma x (delay - target) / delay (dimensionless).",
                          DoubleValue(0.8),
                          MakeDoubleAccessor(&NsccWindow::m_gamma),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("DelayAverageWeight",
                          "Weight of each acknowledgement's queueing delay in the smoothed delay the "
                          "multiplicative decrease reads (UEC NSCC avg_delay, an exponentially weighted "
                          "moving average updated per ACK; 0.0125 as in the consortium's reference model): an "
                          "ECN-marked ACK cuts the window only while avg_delay is above TargetQdelay, by "
                          "Gamma x (avg_delay - target) / avg_delay. 1 = the marked ACK's own delay "
                          "(dimensionless).",
                          DoubleValue(0.0125),
                          MakeDoubleAccessor(&NsccWindow::m_delayAverageWeight),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("MaxDecrease",
                          "Largest fraction one multiplicative decrease removes (UEC NSCC max_md_jump; "
                          "dimensionless).",
                          DoubleValue(0.5),
                          MakeDoubleAccessor(&NsccWindow::m_maxDecrease),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("MaxWindowBdps",
                          "Largest window in bandwidth-delay products of the NIC's line rate and BaseRtt "
                          "(UEC NSCC maxwnd = 1.5 BDP; dimensionless).",
                          DoubleValue(1.5),
                          MakeDoubleAccessor(&NsccWindow::m_maxWindowBdps),
                          MakeDoubleChecker<double>(0.01))
            .AddAttribute("MinWindowBytes",
                          "Smallest window, in bytes (UEC NSCC min_cwnd; at least one MTU is always allowed).",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&NsccWindow::m_minWindowBytes),
                          MakeUintegerChecker<uint64_t>(1));
    return tid;
}

NsccWindow::NsccWindow() = default;
NsccWindow::~NsccWindow() = default;

double
NsccWindow::MaxWindowBytes(double lineRateBps) const
{
    return m_maxWindowBdps * lineRateBps * m_baseRtt.GetSeconds() / 8.0;
}

NsccState
NsccWindow::Initial(double lineRateBps, uint32_t mtuBytes) const
{
    m_mtuBytes = mtuBytes;
    m_maxWindowBytes = std::max(MaxWindowBytes(lineRateBps), double(mtuBytes));
    NsccState s;
    s.cwndBytes = m_maxWindowBytes;
    return s;
}

int64_t
NsccWindow::BaseRttPs(const NsccState& s) const
{
    const int64_t configured = m_baseRtt.GetTimeStep();
    return s.minRttPs > 0 ? std::min(configured, s.minRttPs) : configured;
}

void
NsccWindow::Clamp(NsccState& s) const
{
    const double low = double(std::max<uint64_t>(m_minWindowBytes, m_mtuBytes));
    s.cwndBytes = std::min(std::max(s.cwndBytes, low), std::max(m_maxWindowBytes, low));
}

void
NsccWindow::Decrease(NsccState& s, double factor, int64_t nowPs) const
{
    if (s.lastDecreasePs >= 0 && nowPs - s.lastDecreasePs < BaseRttPs(s))
    {
        return; // one decrease per round trip: the marks of one window answer one overload
    }
    s.cwndBytes *= std::max(factor, 1.0 - m_maxDecrease);
    s.lastDecreasePs = nowPs;
}

void
NsccWindow::QuickAdapt(NsccState& s, uint64_t ackedBytes, bool congested, int64_t nowPs) const
{
    const int64_t periodPs = BaseRttPs(s) + m_targetQdelay.GetTimeStep();
    if (s.periodEndPs < 0)
    {
        s.periodEndPs = nowPs + periodPs;
    }
    s.periodAckedBytes += ackedBytes;
    s.periodCongested = s.periodCongested || congested;
    if (nowPs < s.periodEndPs)
    {
        return;
    }
    if (s.periodCongested && double(s.periodAckedBytes) < s.cwndBytes)
    {
        s.cwndBytes = double(s.periodAckedBytes); // what the network delivered in one round trip
        s.lastDecreasePs = nowPs;
        s.lowDelayBytes = 0;
    }
    s.periodAckedBytes = 0;
    s.periodCongested = false;
    s.periodEndPs = nowPs + periodPs;
}

void
NsccWindow::OnAck(NsccState& s, uint64_t ackedBytes, uint64_t markedBytes, int64_t rttPs, int64_t nowPs) const
{
    NS_ASSERT_MSG(rttPs >= 0, "negative round trip " << rttPs << " ps");
    NS_ASSERT_MSG(markedBytes <= ackedBytes, "marked " << markedBytes << " of " << ackedBytes << " bytes");
    if (rttPs > 0 && (s.minRttPs == 0 || rttPs < s.minRttPs))
    {
        s.minRttPs = rttPs;
    }
    const double delayPs = double(std::max<int64_t>(0, rttPs - BaseRttPs(s)));
    const double targetPs = double(m_targetQdelay.GetTimeStep());
    s.avgDelayPs += m_delayAverageWeight * (delayPs - s.avgDelayPs);
    QuickAdapt(s, ackedBytes, delayPs > double(m_quickAdaptThreshold.GetTimeStep()), nowPs);
    const uint64_t cleanBytes = ackedBytes - markedBytes;
    const double perWindow = double(cleanBytes) / s.cwndBytes; // fraction of a window acknowledged clean
    if (cleanBytes != 0 && delayPs < targetPs)
    {
        if (delayPs < double(m_fastIncreaseThreshold.GetTimeStep()))
        {
            s.lowDelayBytes += cleanBytes;
        }
        else
        {
            s.lowDelayBytes = 0;
        }
        if (double(s.lowDelayBytes) >= s.cwndBytes)
        {
            s.cwndBytes += double(cleanBytes); // fast increase
        }
        s.cwndBytes += m_alpha * m_mtuBytes * perWindow * (targetPs - delayPs) / targetPs;
    }
    else if (cleanBytes != 0)
    {
        s.lowDelayBytes = 0;
        s.cwndBytes += m_fairIncreaseMtus * m_mtuBytes * perWindow;
    }
    if (markedBytes != 0)
    {
        s.lowDelayBytes = 0;
        // A marked packet below the target saw a queue on its own path only: entropy feedback moves off it.
        if (delayPs >= targetPs && s.avgDelayPs > targetPs)
        {
            Decrease(s, 1.0 - m_gamma * (s.avgDelayPs - targetPs) / s.avgDelayPs, nowPs);
        }
    }
    Clamp(s);
}

void
NsccWindow::OnNack(NsccState& s, int64_t nowPs) const
{
    s.lowDelayBytes = 0;
    QuickAdapt(s, 0, true, nowPs);
    Decrease(s, 1.0 - m_gamma / 2, nowPs);
    Clamp(s);
}

} // namespace ns3
