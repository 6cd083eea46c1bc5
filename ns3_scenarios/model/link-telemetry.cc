#include "link-telemetry.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"

#include <algorithm>
#include <cmath>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(LinkTelemetry);

uint8_t
UtilizationCode::Encode(double u)
{
    const double linearTop = kLinearCodes / kLinearSteps;
    if (!(u > 0))
    {
        return 0;
    }
    if (u <= linearTop)
    {
        return uint8_t(std::lround(u * kLinearSteps));
    }
    const long code = long(kLinearCodes) + std::lround(std::log(u / linearTop) / std::log(kGeometricRatio));
    return uint8_t(std::min<long>(code, 255));
}

double
UtilizationCode::Decode(uint8_t code)
{
    if (code <= kLinearCodes)
    {
        return code / kLinearSteps;
    }
    return kLinearCodes / kLinearSteps * std::pow(kGeometricRatio, double(code - kLinearCodes));
}

TypeId
LinkTelemetry::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::LinkTelemetry")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<LinkTelemetry>()
            .AddAttribute("Enabled",
                          "Switches stamp in-band telemetry on data packets: the largest utilization of the "
                          "egress ports of their path (HPCC's INT in HPCC-PINT's one byte), for "
                          "HostNic::TelemetryCcEnabled senders.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&LinkTelemetry::m_enabled),
                          MakeBooleanChecker())
            .AddAttribute("BaseRtt",
                          "T, a time: a port's utilization is averaged over the last T, and its queue counted "
                          "in units of T at its rate (HPCC's base RTT: the longest round trip of the fabric "
                          "without queueing). Set it equal to TelemetryRateControl::BaseRtt.",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&LinkTelemetry::m_baseRtt),
                          MakeTimeChecker(NanoSeconds(1)));
    return tid;
}

LinkTelemetry::LinkTelemetry() = default;
LinkTelemetry::~LinkTelemetry() = default;

bool
LinkTelemetry::Configure(std::size_t ports)
{
    m_ports.assign(m_enabled ? ports : 0, PortUtilization{});
    return m_enabled;
}

void
LinkTelemetry::OnTransmit(FabricPacket* p, uint32_t port, uint64_t queueBytes, uint64_t rateBps, int64_t nowPs)
{
    NS_ASSERT_MSG(port < m_ports.size(), "telemetry of port " << port << " was not configured");
    NS_ASSERT_MSG(rateBps > 0, "port " << port << " has no rate");
    PortUtilization& s = m_ports[port];
    const int64_t basePs = m_baseRtt.GetTimeStep();
    const int64_t dtPs = s.lastPs < 0 ? basePs : std::min(nowPs - s.lastPs, basePs);
    const double psPerBit = 1e12 / double(rateBps);
    double u = double(queueBytes) * 8 * psPerBit / double(basePs);
    if (s.lastPs >= 0 && dtPs > 0)
    {
        u += double(s.lastWireBytes) * 8 * psPerBit / double(dtPs);
    }
    const double w = double(dtPs) / double(basePs);
    s.utilization = (1 - w) * s.utilization + w * u;
    s.lastPs = nowPs;
    s.lastWireBytes = p->wireBytes;
    if (p->kind == PacketKind::DATA)
    {
        p->pathUtilization = std::max(p->pathUtilization, UtilizationCode::Encode(s.utilization));
    }
}

double
LinkTelemetry::GetUtilization(uint32_t port) const
{
    return port < m_ports.size() ? m_ports[port].utilization : 0.0;
}

} // namespace ns3
