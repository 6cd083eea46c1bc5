#include "partition-exchange.h"

#include "egress-port.h"
#include "fabric-node.h"
#include "packet-pool.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

namespace ns3
{

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
PartitionExchange::SortForInjection(std::vector<ExchangeRecord>& records)
{
    // (arrival, node, port) is unique: a port's packets arrive one serialization apart
    std::sort(records.begin(), records.end(), [](const ExchangeRecord& a, const ExchangeRecord& b) {
        return std::tie(a.duePs, a.node, a.port) < std::tie(b.duePs, b.node, b.port);
    });
}

std::string
PartitionExchange::Inject(const ExchangeRecord* records,
                          uint64_t n,
                          const std::vector<FabricNode*>& nodes,
                          PacketPool* pool)
{
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    for (uint64_t i = 0; i < n; ++i)
    {
        const ExchangeRecord& r = records[i];
        if (r.node < 0 || uint64_t(r.node) >= nodes.size() || r.port < 0 ||
            uint32_t(r.port) >= nodes[r.node]->GetNPorts() || r.duePs < nowPs)
        {
            return "exchange record " + std::to_string(i) + " names node " + std::to_string(r.node) + " port " +
                   std::to_string(r.port) + " at " + std::to_string(r.duePs) + " ps, which this fabric at " +
                   std::to_string(nowPs) + " ps cannot receive";
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        const ExchangeRecord& r = records[i];
        FabricPacket* p = pool->Allocate();
        std::memcpy(static_cast<void*>(p), r.packet, sizeof(FabricPacket));
        p->next = nullptr;
        Simulator::Schedule(TimeStep(r.duePs - nowPs), &FabricNode::Receive, nodes[r.node], p, uint32_t(r.port));
    }
    return "";
}

} // namespace ns3
