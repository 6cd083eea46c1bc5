#include "fabric-node.h"

#include "egress-port.h"
#include "packet-pool.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(FabricNode);

TypeId
FabricNode::GetTypeId()
{
    static TypeId tid = TypeId("ns3::FabricNode").SetParent<Object>().SetGroupName("Cosim");
    return tid;
}

uint32_t
FabricNode::AddPort(Ptr<EgressPort> port)
{
    m_ports.push_back(port);
    return static_cast<uint32_t>(m_ports.size() - 1);
}

void
FabricNode::ApplyPause(FabricPacket* p, uint32_t inPort)
{
    m_ports[inPort]->Pause(p->priority, p->aux);
    m_pool->Release(p);
}

void
FabricNode::DoDispose()
{
    for (auto& port : m_ports)
    {
        port->Dispose();
    }
    m_ports.clear();
    Object::DoDispose();
}

} // namespace ns3
