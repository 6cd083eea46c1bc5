#include "ib-cc-control.h"

#include "ns3/uinteger.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(IbCcControl);

TypeId
IbCcControl::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::IbCcControl")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<IbCcControl>()
            .AddAttribute("CctiIncrease",
                          "CCTI added per BECN (dimensionless).",
                          UintegerValue(kDefaultCctiIncrease),
                          MakeUintegerAccessor(&IbCcControl::m_cctiIncrease),
                          MakeUintegerChecker<uint32_t>(1, 1024))
            .AddAttribute("CctiLimit",
                          "Largest CCTI, the last table entry (dimensionless).",
                          UintegerValue(kDefaultCctiLimit),
                          MakeUintegerAccessor(&IbCcControl::m_cctiLimit),
                          MakeUintegerChecker<uint32_t>(1, 16383))
            .AddAttribute("CctiTimer",
                          "Recovery period, a time; CCTI drops by one each period.",
                          TimeValue(NanoSeconds(kDefaultCctiTimerNs)),
                          MakeTimeAccessor(&IbCcControl::m_cctiTimer),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("CctGapStep",
                          "Inter-packet delay per CCTI step, a time (a linear congestion-control table: entry i "
                          "delays each packet by i x CctGapStep).",
                          TimeValue(NanoSeconds(kDefaultCctGapStepNs)),
                          MakeTimeAccessor(&IbCcControl::m_cctGapStep),
                          MakeTimeChecker(Time(0)));
    return tid;
}

IbCcControl::IbCcControl() = default;
IbCcControl::~IbCcControl() = default;

} // namespace ns3
