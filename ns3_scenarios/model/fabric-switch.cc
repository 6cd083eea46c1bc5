#include "fabric-switch.h"

#include "egress-port.h"
#include "packet-pool.h"

#include "ns3/abort.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(FabricSwitch);

namespace
{
/// 64-bit finalizer of MurmurHash3: cheap and well mixed, so consecutive flow ids spread evenly.
inline uint64_t
Mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
} // namespace

TypeId
FabricSwitch::GetTypeId()
{
    static TypeId tid = TypeId("ns3::FabricSwitch")
                            .SetParent<FabricNode>()
                            .SetGroupName("Cosim")
                            .AddConstructor<FabricSwitch>()
                            .AddAttribute("EcmpSeed",
                                          "Seed mixed into the per-flow ECMP hash (dimensionless).",
                                          UintegerValue(0),
                                          MakeUintegerAccessor(&FabricSwitch::m_ecmpSeed),
                                          MakeUintegerChecker<uint32_t>());
    return tid;
}

FabricSwitch::FabricSwitch() = default;
FabricSwitch::~FabricSwitch() = default;

void
FabricSwitch::SetRoutes(std::vector<uint32_t> routeStart, std::vector<uint16_t> routePorts)
{
    m_routeStart = std::move(routeStart);
    m_routePorts = std::move(routePorts);
}

uint32_t
FabricSwitch::SelectPort(uint64_t flowId, uint32_t dst) const
{
    const uint32_t begin = m_routeStart[dst];
    const uint32_t count = m_routeStart[dst + 1] - begin;
    NS_ABORT_MSG_IF(count == 0, "switch " << m_nodeId << " has no route to node " << dst);
    if (count == 1)
    {
        return m_routePorts[begin];
    }
    const uint64_t h = Mix64(flowId * 0x9e3779b97f4a7c15ULL ^ (uint64_t(m_ecmpSeed) << 32 | m_nodeId));
    return m_routePorts[begin + h % count];
}

void
FabricSwitch::Receive(FabricPacket* p, uint32_t /*inPort*/)
{
    m_ports[SelectPort(p->flowId, p->dst)]->Enqueue(p);
}

} // namespace ns3
