#include "partition-exchange.h"

#include "egress-port.h"
#include "fabric-node.h"
#include "packet-pool.h"
#include "reusable-event.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

namespace ns3
{

IncomingWire::IncomingWire(FabricNode* node, uint32_t port)
    : m_node(node),
      m_port(port),
      m_event(Create<ReusableEvent<IncomingWire, &IncomingWire::Deliver>>(this))
{
}

void
IncomingWire::Arrive(FabricPacket* p, int64_t duePs)
{
    if (m_wire.Empty())
    {
        m_headDuePs = duePs;
        Simulator::Schedule(TimeStep(duePs - Simulator::Now().GetTimeStep()), m_event);
    }
    else
    {
        m_wire.Back()->nextDueTimePs = duePs;
    }
    m_wire.Push(p);
}

void
IncomingWire::Deliver()
{
    FabricPacket* p = m_wire.Pop();
    if (!m_wire.Empty())
    {
        m_headDuePs = p->nextDueTimePs;
        Simulator::Schedule(TimeStep(m_headDuePs - Simulator::Now().GetTimeStep()), m_event);
    }
    m_node->Receive(p, m_port);
}

void
PartitionExchange::Post(int64_t duePs, uint32_t node, uint32_t port, const FabricPacket* p)
{
    ++m_posted;
    ExchangeRecord& r = m_outbox.emplace_back();
    r.duePs = duePs;
    r.node = int32_t(node);
    r.port = int32_t(port);
    std::memcpy(r.packet, static_cast<const void*>(p), sizeof(FabricPacket));
}

void
PartitionExchange::Take(ExchangeRecord* out)
{
    std::copy(m_outbox.begin(), m_outbox.end(), out);
    m_outbox.clear();
}

void
PartitionExchange::AddWire(FabricNode* node, uint32_t port)
{
    const uint32_t id = node->GetNodeId();
    if (m_wireAt.size() <= id)
    {
        m_wireAt.resize(id + 1);
    }
    if (m_wireAt[id].size() <= port)
    {
        m_wireAt[id].resize(port + 1, nullptr);
    }
    m_wires.push_back(std::make_unique<IncomingWire>(node, port));
    m_wireAt[id][port] = m_wires.back().get();
}

std::string
PartitionExchange::Inject(ExchangeRecord* records, uint64_t n, PacketPool* pool)
{
    // one order for every layout of partitions over processes; (arrival, node, port) is unique, since a
    // port's packets arrive a serialization apart
    std::sort(records, records + n, [](const ExchangeRecord& a, const ExchangeRecord& b) {
        return std::tie(a.duePs, a.node, a.port) < std::tie(b.duePs, b.node, b.port);
    });
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const auto wireOf = [this](const ExchangeRecord& r) -> IncomingWire* {
        if (r.node < 0 || uint64_t(r.node) >= m_wireAt.size() || r.port < 0 ||
            uint64_t(r.port) >= m_wireAt[r.node].size())
        {
            return nullptr;
        }
        return m_wireAt[r.node][r.port];
    };
    for (uint64_t i = 0; i < n; ++i)
    {
        if (wireOf(records[i]) == nullptr || records[i].duePs < nowPs)
        {
            return "exchange record " + std::to_string(i) + " names node " + std::to_string(records[i].node) +
                   " port " + std::to_string(records[i].port) + " at " + std::to_string(records[i].duePs) +
                   " ps, which is no cut link's end of this fabric at " + std::to_string(nowPs) + " ps";
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        FabricPacket* p = pool->Allocate();
        std::memcpy(static_cast<void*>(p), records[i].packet, sizeof(FabricPacket));
        wireOf(records[i])->Arrive(p, records[i].duePs);
    }
    return "";
}

} // namespace ns3
