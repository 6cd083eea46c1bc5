#include "fabric-node.h"

#include "egress-port.h"
#include "packet-pool.h"

#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <limits>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(FabricNode);

TypeId
FabricNode::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FabricNode")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddAttribute("InputBufferBytes",
                          "Credit mode: input buffer of one physical port of InputBufferPortRate, shared by its "
                          "virtual lanes, in bytes. A faster link stands for ceil(its rate / InputBufferPortRate) "
                          "ports (a trunk) and gets that many buffers. Default: 12.8 us of the port rate, the "
                          "input buffer of Mellanox's "
                          "InfiniScale IV (1000 64-byte flits at 40 Gb/s) scaled to a 400 Gb/s NDR port.",
                          UintegerValue(640000),
                          MakeUintegerAccessor(&FabricNode::m_inputBufferBytes),
                          MakeUintegerChecker<uint64_t>(kCreditBlockBytes))
            .AddAttribute("InputBufferPortRate",
                          "Credit mode: rate of the physical port whose input buffer is InputBufferBytes (bit/s).",
                          DataRateValue(DataRate("400Gbps")),
                          MakeDataRateAccessor(&FabricNode::m_inputBufferPortRate),
                          MakeDataRateChecker())
            .AddAttribute("VlReservedBytes",
                          "Credit mode: part of a physical port's InputBufferBytes reserved for each data virtual "
                          "lane, in bytes (the credits its sender starts with); the rest is a pool any lane may "
                          "borrow. Default: a fifth of the buffer, as Mellanox's InfiniScale IV model reserves "
                          "(200 of 1000 flits).",
                          UintegerValue(128000),
                          MakeUintegerAccessor(&FabricNode::m_vlReservedBytes),
                          MakeUintegerChecker<uint64_t>(kCreditBlockBytes))
            .AddAttribute("CreditUpdateBytes",
                          "Credit mode: freed input buffer that triggers a credit update at once, in bytes, "
                          "capped at a quarter of the port's input buffer (less is sent at the latest after "
                          "CreditUpdateInterval).",
                          UintegerValue(64 * 1024),
                          MakeUintegerAccessor(&FabricNode::m_creditUpdateBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("CreditUpdateInterval",
                          "Credit mode: longest time freed buffer waits before its credits are sent, a time.",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&FabricNode::m_creditUpdateInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("CreditPacketBytes",
                          "Credit mode: wire size of a flow-control (credit update) packet, in bytes.",
                          UintegerValue(8),
                          MakeUintegerAccessor(&FabricNode::m_creditPacketBytes),
                          MakeUintegerChecker<uint32_t>(1, 1 << 16))
            .AddTraceSource("Loss",
                            "A port lost a packet, trimmed it or sent it again: (port number, cosim::LossCause).",
                            MakeTraceSourceAccessor(&FabricNode::m_lossTrace),
                            "ns3::FabricNode::LossCallback");
    return tid;
}

void
FabricNode::ApplyCredit(FabricPacket* p, uint32_t inPort)
{
    m_ports[inPort]->AddCredits(p->priority, p->aux);
    m_pool->Release(p);
}

void
FabricNode::ReturnCredits(uint32_t port, uint8_t vl, uint32_t blocks)
{
    NS_ASSERT_MSG(port < m_creditTriggerBlocks.size(),
                  "credits returned on port " << port << " before SetupInputBuffers");
    uint32_t& pending = m_pendingCredits[port][vl];
    pending += blocks;
    if (pending >= m_creditTriggerBlocks[port])
    {
        FlushCredits(port);
    }
    else if (!m_creditTimerArmed[port])
    {
        m_creditTimerArmed[port] = true;
        Simulator::Schedule(m_creditUpdateInterval, &FabricNode::CreditTimer, this, port);
    }
}

void
FabricNode::CreditTimer(uint32_t port)
{
    m_creditTimerArmed[port] = false;
    FlushCredits(port);
}

void
FabricNode::FlushCredits(uint32_t port)
{
    // The interval timer is not cancelled when a threshold flush comes first: it fires anyway and sends
    // what gathered since (sooner than needed, never later), which costs fewer events than rescheduling.
    for (uint8_t vl = 0; vl < kNumPriorities; ++vl)
    {
        uint32_t& pending = m_pendingCredits[port][vl];
        if (pending == 0)
        {
            continue;
        }
        // Incremental credits: links never lose packets here, so the absolute counters IB carries
        // (FCCL) to recover from a lost update are not needed.
        FabricPacket* c = m_pool->Allocate();
        c->kind = PacketKind::CREDIT;
        c->priority = vl;
        c->aux = pending;
        c->src = m_nodeId;
        c->dst = m_ports[port]->GetPeer()->GetNodeId();
        c->wireBytes = m_creditPacketBytes;
        pending = 0;
        ++m_creditPacketsSent;
        m_ports[port]->EnqueueControl(c);
    }
}

std::string
FabricNode::SetupInputBuffers(uint32_t maxPacketBytes)
{
    const uint32_t dataVls = m_ports.empty() ? 1 : m_ports[0]->GetDataVls();
    const uint64_t packetBlockBytes = uint64_t(CreditBlocks(maxPacketBytes)) * kCreditBlockBytes;
    if (m_vlReservedBytes / kCreditBlockBytes * kCreditBlockBytes < packetBlockBytes)
    {
        return "FabricNode::VlReservedBytes " + std::to_string(m_vlReservedBytes) +
               " B cannot hold one maximum packet (" + std::to_string(maxPacketBytes) +
               " B, in 64-byte credits): raise it to at least " + std::to_string(packetBlockBytes);
    }
    if (m_vlReservedBytes * dataVls > m_inputBufferBytes)
    {
        return "FabricNode::VlReservedBytes " + std::to_string(m_vlReservedBytes) + " B x " +
               std::to_string(dataVls) + " data lanes exceeds FabricNode::InputBufferBytes " +
               std::to_string(m_inputBufferBytes) + " B: lower the reservation or raise the buffer";
    }
    const uint64_t portBps = m_inputBufferPortRate.GetBitRate();
    if (portBps == 0)
    {
        return "FabricNode::InputBufferPortRate must be positive: set the rate of one physical port, e.g. 400Gbps";
    }
    m_pendingCredits.assign(m_ports.size(), {});
    m_creditTimerArmed.assign(m_ports.size(), false);
    m_creditTriggerBlocks.assign(m_ports.size(), 1);
    std::vector<uint32_t> capacity(m_ports.size());
    std::vector<uint32_t> reserved(m_ports.size());
    for (std::size_t i = 0; i < m_ports.size(); ++i)
    {
        // A trunk of k physical ports; a slack of a millionth keeps 3.2T / 400G from becoming 9 ports.
        const uint64_t rateBps = m_ports[i]->GetRateBps();
        const uint64_t k = std::max<uint64_t>(1, (rateBps - rateBps / 1000000 + portBps - 1) / portBps);
        const uint64_t capacityBlocks = k * (m_inputBufferBytes / kCreditBlockBytes);
        if (capacityBlocks > std::numeric_limits<uint32_t>::max())
        {
            return "FabricNode::InputBufferBytes " + std::to_string(m_inputBufferBytes) + " B x " +
                   std::to_string(k) + " ports of a trunk exceeds 2^32 credit blocks: lower it";
        }
        capacity[i] = uint32_t(capacityBlocks);
        reserved[i] = uint32_t(k * (m_vlReservedBytes / kCreditBlockBytes));
        // Never hold back more than a quarter of the port's buffer: with a small buffer, a large
        // CreditUpdateBytes would otherwise starve the sender until the interval timer fires.
        const uint64_t quarterBytes = std::max<uint64_t>(capacityBlocks * kCreditBlockBytes / 4, 1);
        const uint64_t triggerBytes = std::min(m_creditUpdateBytes, quarterBytes);
        m_creditTriggerBlocks[i] = uint32_t((triggerBytes + kCreditBlockBytes - 1) / kCreditBlockBytes);
    }
    m_inputs.Setup(capacity, reserved, dataVls, CreditBlocks(maxPacketBytes));
    return "";
}

uint32_t
FabricNode::AddPort(Ptr<EgressPort> port)
{
    m_ports.push_back(port);
    return static_cast<uint32_t>(m_ports.size() - 1);
}

void
FabricNode::DropQueued(FabricPacket* p, uint32_t)
{
    m_pool->Release(p);
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
