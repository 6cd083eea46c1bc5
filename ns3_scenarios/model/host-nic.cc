#include "host-nic.h"

#include "packet-pool.h"

#include "ns3/abort.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(HostNic);

TypeId
HostNic::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::HostNic")
            .SetParent<FabricNode>()
            .SetGroupName("Cosim")
            .AddConstructor<HostNic>()
            .AddAttribute("MtuBytes",
                          "Payload bytes carried by a full data packet, in bytes.",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&HostNic::m_mtuBytes),
                          MakeUintegerChecker<uint32_t>(1, 1 << 20))
            .AddAttribute("HeaderBytes",
                          "Header and framing bytes added to every data packet on the wire, in bytes. "
                          "Default 82 = RoCEv2 (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4) "
                          "plus preamble/SFD 8 and inter-frame gap 12, which also occupy the link.",
                          UintegerValue(82),
                          MakeUintegerAccessor(&HostNic::m_headerBytes),
                          MakeUintegerChecker<uint32_t>(0, 1 << 16))
            .AddTraceSource("FlowFinish",
                            "The last payload byte of a flow arrived at this NIC (argument: flow id).",
                            MakeTraceSourceAccessor(&HostNic::m_flowFinishTrace),
                            "ns3::TracedValueCallback::Uint64");
    return tid;
}

HostNic::HostNic() = default;
HostNic::~HostNic() = default;

void
HostNic::SetFlowTable(FlowTable* table)
{
    m_flows = table;
}

void
HostNic::AddFlow(uint64_t flowId)
{
    NS_ABORT_MSG_UNLESS(m_flows->src[flowId] == m_nodeId, "flow added to a NIC that is not its source");
    const int64_t delayPs = m_flows->startPs[flowId] - Simulator::Now().GetTimeStep();
    Simulator::Schedule(TimeStep(delayPs > 0 ? delayPs : 0), &HostNic::StartFlow, this, flowId);
}

void
HostNic::StartFlow(uint64_t flowId)
{
    if (m_flows->sizeBytes[flowId] == 0)
    {
        // An empty flow is delivered the moment it starts: nothing crosses the wire.
        m_flows->finishPs[flowId] = Simulator::Now().GetTimeStep();
        ++m_flows->completed;
        if (!m_flows->onFinish.IsNull())
        {
            m_flows->onFinish(flowId);
        }
        return;
    }
    m_active.push_back(flowId);
    m_ports[0]->Wake();
}

FabricPacket*
HostNic::PullPacket(uint32_t /*port*/)
{
    if (m_active.empty())
    {
        return nullptr;
    }
    if (m_next >= m_active.size())
    {
        m_next = 0;
    }
    const uint64_t flowId = m_active[m_next];
    const uint64_t remaining = m_flows->sizeBytes[flowId] - m_flows->sentBytes[flowId];
    const uint32_t payload = remaining < m_mtuBytes ? static_cast<uint32_t>(remaining) : m_mtuBytes;

    FabricPacket* p = m_pool->Allocate();
    p->flowId = flowId;
    p->seqBytes = m_flows->sentBytes[flowId];
    p->src = m_nodeId;
    p->dst = m_flows->dst[flowId];
    p->payloadBytes = payload;
    p->wireBytes = payload + m_headerBytes;
    p->kind = PacketKind::DATA;
    p->priority = m_flows->priority[flowId];

    m_flows->sentBytes[flowId] += payload;
    if (m_flows->sentBytes[flowId] == m_flows->sizeBytes[flowId])
    {
        // Swap-remove: order among the remaining active flows does not matter for round-robin fairness.
        m_active[m_next] = m_active.back();
        m_active.pop_back();
    }
    else
    {
        ++m_next;
    }
    return p;
}

void
HostNic::Receive(FabricPacket* p, uint32_t /*inPort*/)
{
    if (p->kind == PacketKind::DATA)
    {
        const uint64_t flowId = p->flowId;
        m_flows->rcvdBytes[flowId] += p->payloadBytes;
        if (m_flows->rcvdBytes[flowId] == m_flows->sizeBytes[flowId])
        {
            m_flows->finishPs[flowId] = Simulator::Now().GetTimeStep();
            ++m_flows->completed;
            m_flowFinishTrace(flowId);
            if (!m_flows->onFinish.IsNull())
            {
                m_flows->onFinish(flowId);
            }
        }
    }
    m_pool->Release(p);
}

} // namespace ns3
