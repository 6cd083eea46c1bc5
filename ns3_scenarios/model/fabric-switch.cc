#include "fabric-switch.h"

#include "adaptive-router.h"
#include "egress-port.h"
#include "packet-pool.h"
#include "simulation-clock.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/enum.h"
#include "ns3/pointer.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <cmath>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(FabricSwitch);

namespace
{
/// ECN thresholds given for 25 Gbps, scaled linearly with the port rate (DCQCN deployment practice).
constexpr double kKminBytesPer25G = 100e3;
constexpr double kKmaxBytesPer25G = 400e3;
} // namespace

TypeId
FabricSwitch::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FabricSwitch")
            .SetParent<FabricNode>()
            .SetGroupName("Cosim")
            .AddConstructor<FabricSwitch>()
            .AddAttribute("EcmpSeed",
                          "Seed mixed into the per-flow ECMP hash (dimensionless).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FabricSwitch::m_ecmpSeed),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("Routing",
                          "Choice among a destination's equal-cost egress ports: ecmp (per-flow hash of "
                          "EcmpHashFields), pinned (destination node id mod the number of ports: a static "
                          "flow-to-uplink map), flowlet (a flow keeps its port until a gap above "
                          "FlowletTimeout, then takes the least-loaded one), adaptive (every packet takes the "
                          "least-loaded port, fewest bytes queued; receivers need HostNic::ReorderTolerant) or "
                          "spray (packets take the ports in turn; RoCE packet spraying, same receiver need) or stripe "
                          "(data packets take the ports in turn, control packets the ECMP hash: a multi-plane "
                          "NIC's port selector).",
                          EnumValue(Routing::ECMP),
                          MakeEnumAccessor<Routing>(&FabricSwitch::m_routing),
                          MakeEnumChecker(Routing::ECMP, "ecmp", Routing::PINNED, "pinned", Routing::FLOWLET,
                                          "flowlet", Routing::ADAPTIVE, "adaptive", Routing::SPRAY, "spray",
                                          Routing::STRIPE, "stripe"))
            .AddAttribute("AdaptiveTies",
                          "Which of the least-loaded ports adaptive routing takes when several tie (e.g. all "
                          "empty): hash (the flow's ECMP-hash port first, so on an idle fabric a flow keeps one "
                          "path) or rotate (the scan starts at the next port in turn, per switch, so packets "
                          "spread over equally loaded ports as per-packet adaptive routing with NIC reordering "
                          "does; Spectrum-X-like).",
                          EnumValue(AdaptiveTies::HASH),
                          MakeEnumAccessor<AdaptiveTies>(&FabricSwitch::m_adaptiveTies),
                          MakeEnumChecker(AdaptiveTies::HASH, "hash", AdaptiveTies::ROTATE, "rotate"))
            .AddAttribute("DragonflyRouting",
                          "Routing on a fabric of switch groups (dragonfly): minimal (inside the source's "
                          "group, over a global link into the destination's, to its switch: local-global-local), "
                          "valiant (every data packet bound to another group goes via an "
                          "intermediate group drawn from its ECMP hash, then minimally) or ugal (UGAL-L: at the "
                          "source's switch, via the intermediate group only when its port's queue x its router "
                          "hops is below the minimal port's queue x the minimal hops). No effect on a fabric "
                          "without groups.",
                          EnumValue(DragonflyRouting::MINIMAL),
                          MakeEnumAccessor<DragonflyRouting>(&FabricSwitch::m_dragonflyRouting),
                          MakeEnumChecker(DragonflyRouting::MINIMAL, "minimal", DragonflyRouting::VALIANT,
                                          "valiant", DragonflyRouting::UGAL, "ugal"))
            .AddAttribute("EcmpHashFields",
                          "Packet fields the ECMP hash covers (Routing ecmp and flowlet): flow (each flow, "
                          "i.e. each message, hashes alone: more entropy than real NICs give), five-tuple "
                          "(source and destination host, one UDP source port per host pair: all queue pairs "
                          "of a host pair share a path) or five-tuple-qp (plus the destination queue pair, "
                          "enhanced ECMP: see HostNic::QueuePairsPerConnection).",
                          EnumValue(EcmpHashFields::FLOW),
                          MakeEnumAccessor<EcmpHashFields>(&FabricSwitch::m_hashFields),
                          MakeEnumChecker(EcmpHashFields::FLOW, "flow", EcmpHashFields::FIVE_TUPLE, "five-tuple",
                                          EcmpHashFields::FIVE_TUPLE_QP, "five-tuple-qp"))
            .AddAttribute("FlowletTimeout",
                          "Routing flowlet: a gap between two packets of a flow longer than this ends its "
                          "flowlet, and the next packet may take another port (time). Reordering-free when it "
                          "exceeds the largest difference of path delays.",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&FabricSwitch::m_flowletTimeout),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("FlowletTableEntries",
                          "Routing flowlet: buckets of the switch's flowlet table, indexed by ECMP hash "
                          "(a count; flows sharing a bucket end each other's flowlets).",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&FabricSwitch::m_flowletEntries),
                          MakeUintegerChecker<uint32_t>(1, 1 << 24))
            .AddAttribute("PauseQuanta",
                          "Pause time carried by an XOFF frame, in quanta of 512 bit times; XOFF is "
                          "refreshed every half of it while it holds.",
                          UintegerValue(0xffff),
                          MakeUintegerAccessor(&FabricSwitch::m_pauseQuanta),
                          MakeUintegerChecker<uint32_t>(2, 0xffff))
            .AddAttribute("PauseFrameBytes",
                          "Wire size of a PFC frame (64 B frame + preamble and gap), in bytes.",
                          UintegerValue(84),
                          MakeUintegerAccessor(&FabricSwitch::m_pauseFrameBytes),
                          MakeUintegerChecker<uint32_t>(64, 1 << 16))
            .AddAttribute("AllowLossyHeadroom",
                          "Accept a HeadroomBytes below what a port has in flight when it pauses: the switch "
                          "may then drop packets (counted in switch_drops), and the run is no longer lossless.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&FabricSwitch::m_allowLossyHeadroom),
                          MakeBooleanChecker())
            .AddAttribute("HeadroomBytes",
                          "PFC headroom per (ingress port, lossless priority), in bytes (0 = per port: "
                          "2 x link bandwidth-delay product + 3 maximum packets + 2 PFC frames). A fixed "
                          "value below that need of a port is refused unless AllowLossyHeadroom.",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FabricSwitch::m_headroomBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnEnabled",
                          "Mark ECN on data packets (the DCQCN congestion point).",
                          BooleanValue(true),
                          MakeBooleanAccessor(&FabricSwitch::m_ecnEnabled),
                          MakeBooleanChecker())
            .AddAttribute("EcnMarkingPoint",
                          "When a data packet is ECN/FECN-marked by the egress queue length: enqueue (as it "
                          "joins the queue, by the bytes ahead of it) or dequeue (as it leaves for the wire, "
                          "by the bytes behind it, as the HPCC-derived ns-3 models mark: the signal is "
                          "fresher by the queue's drain time).",
                          EnumValue(EcnMarkingPoint::ENQUEUE),
                          MakeEnumAccessor<EcnMarkingPoint>(&FabricSwitch::m_ecnPoint),
                          MakeEnumChecker(EcnMarkingPoint::ENQUEUE, "enqueue", EcnMarkingPoint::DEQUEUE,
                                          "dequeue"))
            .AddAttribute("EcnKminBytes",
                          "Egress queue length where marking starts, in bytes (0 = 100 KB per 25 Gbps "
                          "of the port's rate).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FabricSwitch::m_kminBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnKmaxBytes",
                          "Egress queue length where the marking probability reaches EcnPmax, beyond "
                          "which every packet is marked, in bytes (0 = 400 KB per 25 Gbps of port rate).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FabricSwitch::m_kmaxBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnPmax",
                          "Marking probability at Kmax (dimensionless).",
                          DoubleValue(0.2),
                          MakeDoubleAccessor(&FabricSwitch::m_pmax),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("TrimThresholdBytes",
                          "Packet trimming (UEC 1.0 network layer, a data packet that would congest is cut "
                          "to its header): a data packet joining an egress queue that holds this many bytes "
                          "at its priority, or that the buffer would drop, is forwarded as TrimmedPacketBytes "
                          "at TrimPriority, in bytes (0 = no trimming: such packets wait or are dropped).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FabricSwitch::m_trimThresholdBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("TrimmedPacketBytes",
                          "Wire size of a trimmed packet (UEC trimmed header: Ethernet, IP, UDP, PDS and SES "
                          "headers without payload), in bytes.",
                          UintegerValue(64),
                          MakeUintegerAccessor(&FabricSwitch::m_trimmedBytes),
                          MakeUintegerChecker<uint32_t>(16, 1 << 16))
            .AddAttribute("TrimPriority",
                          "Priority class trimmed packets are forwarded at (UEC: a high-priority traffic class, "
                          "so the NACK comes back within a round trip; 0..7).",
                          UintegerValue(7),
                          MakeUintegerAccessor(&FabricSwitch::m_trimPriority),
                          MakeUintegerChecker<uint8_t>(0, 7))
            .AddAttribute("Mmu",
                          "The shared-buffer memory management unit (ingress accounting, PFC).",
                          PointerValue(),
                          MakePointerAccessor(&FabricSwitch::m_mmu),
                          MakePointerChecker<SharedBufferMmu>())
            .AddAttribute("Telemetry",
                          "In-band telemetry of the egress ports (LinkTelemetry::Enabled switches it on).",
                          PointerValue(),
                          MakePointerAccessor(&FabricSwitch::m_telemetry),
                          MakePointerChecker<LinkTelemetry>())
            .AddTraceSource("Drop",
                            "A packet found no buffer space and was dropped.",
                            MakeTraceSourceAccessor(&FabricSwitch::m_dropTrace),
                            "ns3::FabricPacket::TracedCallback");
    return tid;
}

FabricSwitch::FabricSwitch()
    : m_mmu(CreateObject<SharedBufferMmu>()),
      m_telemetry(CreateObject<LinkTelemetry>()),
      m_uniform(CreateObject<UniformRandomVariable>())
{
}

FabricSwitch::~FabricSwitch() = default;

void
FabricSwitch::SetRoutes(std::shared_ptr<const HostAttachments> hosts,
                        std::vector<uint32_t> routeStart,
                        std::vector<uint16_t> routePorts)
{
    m_attachments = std::move(hosts);
    m_routeStart = std::move(routeStart);
    m_routePorts = std::move(routePorts);
}

void
FabricSwitch::SetGroupRoutes(std::shared_ptr<const SwitchGroups> groups, GroupRoutes routes)
{
    NS_ASSERT_MSG(groups && routes.start.size() == groups->nGroups + 1 &&
                      routes.groupHops.size() == groups->nGroups,
                  "group routes need one row per group");
    m_groups = std::move(groups);
    m_groupRoutes = std::move(routes);
}

std::string
FabricSwitch::SetupBuffers(uint32_t maxPacketBytes)
{
    if (m_headroomBytes != 0 && m_headroomBytes < maxPacketBytes)
    {
        return "FabricSwitch::HeadroomBytes " + std::to_string(m_headroomBytes) +
               " B is below one maximum packet (" + std::to_string(maxPacketBytes) +
               " B): set it to 0 (automatic) or at least " + std::to_string(maxPacketBytes);
    }
    SetupEcnThresholds();
    m_markAtEnqueue = m_ecnEnabled && m_ecnPoint == EcnMarkingPoint::ENQUEUE;
    m_markAtDequeue = m_ecnEnabled && m_ecnPoint == EcnMarkingPoint::DEQUEUE;
    m_telemetryOn = m_telemetry->Configure(m_ports.size());
    m_flowletTimeoutPs = m_flowletTimeout.GetTimeStep();
    if (m_routing == Routing::FLOWLET)
    {
        m_flowlets.Resize(m_flowletEntries);
    }
    m_refresh.resize(m_ports.size());
    // The switch obeys the flow control of its links, which all run the same (the LinkFlowControl default).
    m_flowControl = m_ports.empty() ? EgressPort::FlowControl::PFC : PortAt(0)->GetFlowControl();
    for (const Ptr<EgressPort>& port : m_ports)
    {
        NS_ABORT_MSG_IF(port->GetFlowControl() != m_flowControl,
                        "switch " << m_nodeId << " has ports with different LinkFlowControl");
    }
    switch (m_flowControl)
    {
    case EgressPort::FlowControl::PFC:
        return SetupSharedBuffer(maxPacketBytes);
    case EgressPort::FlowControl::CREDIT:
        return ""; // the input buffers: FabricNode::SetupInputBuffers, as for every node
    }
    return "";
}

void
FabricSwitch::SetupEcnThresholds()
{
    m_portKmin.resize(m_ports.size());
    m_portKmax.resize(m_ports.size());
    for (std::size_t i = 0; i < m_ports.size(); ++i)
    {
        const double scale = double(PortAt(i)->GetDataRate().GetBitRate()) / 25e9;
        m_portKmin[i] = m_kminBytes ? double(m_kminBytes) : kKminBytesPer25G * scale;
        m_portKmax[i] = m_kmaxBytes ? double(m_kmaxBytes) : kKmaxBytesPer25G * scale;
    }
}

std::string
FabricSwitch::SetupSharedBuffer(uint32_t maxPacketBytes)
{
    std::vector<uint64_t> headroom(m_ports.size());
    for (std::size_t i = 0; i < m_ports.size(); ++i)
    {
        const Ptr<EgressPort>& port = m_ports[i];
        // Headroom: what arrives after we decide to pause. The packet that entered headroom and triggered
        // XOFF; one our egress may be serializing ahead of the PAUSE; the link's round trip at its rate;
        // the PAUSE frame's own time; and the packet the peer is serializing when the PAUSE lands. Fewer
        // than three packets overflows when the dynamic threshold falls under a port's use (measured).
        const double bdpBytes =
            double(port->GetDataRate().GetBitRate()) * port->GetPropagationDelay().GetSeconds() / 8.0;
        const uint64_t needBytes =
            uint64_t(std::ceil(2 * bdpBytes)) + 3 * uint64_t(maxPacketBytes) + 2 * m_pauseFrameBytes;
        if (m_headroomBytes != 0 && m_headroomBytes < needBytes && !m_allowLossyHeadroom)
        {
            return "FabricSwitch::HeadroomBytes " + std::to_string(m_headroomBytes) + " B is below the " +
                   std::to_string(needBytes) + " B in flight on port " + std::to_string(i) + " of switch " +
                   std::to_string(m_nodeId) + " (2 x BDP + 3 maximum packets + 2 PAUSE frames): raise it, set 0 "
                   "(automatic), or set FabricSwitch::AllowLossyHeadroom=true to run lossy";
        }
        headroom[i] = m_headroomBytes ? m_headroomBytes : needBytes;
    }
    if (!Mmu().Setup(headroom, maxPacketBytes))
    {
        return "SharedBufferMmu::BufferBytes is too small for the reserved space and PFC headroom of every "
               "port and lossless priority: raise it, or lower SharedBufferMmu::LosslessPriorityMask, "
               "ReservedBytes or FabricSwitch::HeadroomBytes";
    }
    return "";
}

int64_t
FabricSwitch::AssignStreams(int64_t stream)
{
    m_uniform->SetStream(stream);
    return 1;
}

void
FabricSwitch::ForwardQueued(uint32_t port)
{
    std::vector<FabricPacket*> queued;
    PortAt(port)->TakeQueued(queued);
    for (FabricPacket* p : queued)
    {
        PortAt(SelectPort(*p))->Enqueue(p);
    }
}

uint32_t
FabricSwitch::DestinationGroup(const FabricPacket& p) const
{
    const uint32_t leaf = m_attachments->byNode[p.dst].leafNode;
    const int32_t group = leaf == HostAttachments::kNone ? -1 : m_groups->groupOfNode[leaf];
    return group < 0 ? kNoGroup : uint32_t(group);
}

uint32_t
FabricSwitch::TargetGroup(const FabricPacket& p) const
{
    if (p.kind == PacketKind::DATA && p.aux != 0)
    {
        NS_ASSERT_MSG(p.aux <= m_groups->nGroups, "intermediate group out of range");
        return p.aux - 1;
    }
    const uint32_t group = DestinationGroup(p);
    return group == uint32_t(m_groups->groupOfNode[m_nodeId]) ? kNoGroup : group;
}

void
FabricSwitch::SteerByGroup(FabricPacket* p, uint32_t inPort)
{
    const uint32_t here = uint32_t(m_groups->groupOfNode[m_nodeId]);
    if (p->aux != 0)
    {
        p->aux = p->aux - 1 == here ? 0 : p->aux; // in the intermediate group: minimal from here on
        return;
    }
    const HostAttachments::Entry& from = m_attachments->byNode[p->src];
    if (m_dragonflyRouting == DragonflyRouting::MINIMAL || from.leafNode != m_nodeId || from.leafPort != inPort ||
        m_groups->nGroups < 3)
    {
        return; // decided once, where the packet enters the fabric
    }
    const uint32_t there = DestinationGroup(*p);
    if (there == kNoGroup || there == here)
    {
        return;
    }
    // a salt apart from the ECMP port choice's, so the group drawn and the port taken are independent
    constexpr uint64_t kGroupSalt = 0x6a09e667f3bcc909ULL;
    const uint64_t draw = EcmpHash(*p, m_hashFields, (uint64_t(m_ecmpSeed) << 32 | m_nodeId) ^ kGroupSalt);
    const uint32_t group = IntermediateGroup(draw, m_groups->nGroups, here, there);
    if (m_dragonflyRouting == DragonflyRouting::VALIANT || NonMinimalIsShorter(there, group))
    {
        p->aux = group + 1;
        ++m_nonMinimal;
    }
}

bool
FabricSwitch::NonMinimalIsShorter(uint32_t dstGroup, uint32_t viaGroup) const
{
    const std::vector<uint32_t>& start = m_groupRoutes.start;
    const uint16_t* ports = m_groupRoutes.ports.data();
    const uint64_t minQueue = LeastQueueBytes(ports + start[dstGroup], start[dstGroup + 1] - start[dstGroup]);
    const uint64_t viaQueue = LeastQueueBytes(ports + start[viaGroup], start[viaGroup + 1] - start[viaGroup]);
    // router hops: to the group, then at most one local hop inside the destination group; via the
    // intermediate group, at most a local and a global hop more
    const uint64_t minHops = m_groupRoutes.groupHops[dstGroup] + 1;
    const uint64_t viaHops = m_groupRoutes.groupHops[viaGroup] + 3;
    return viaQueue * viaHops < minQueue * minHops;
}

uint64_t
FabricSwitch::LeastQueueBytes(const uint16_t* candidates, uint32_t count) const
{
    NS_ASSERT_MSG(count > 0, "a route needs at least one port");
    uint64_t least = std::numeric_limits<uint64_t>::max();
    for (uint32_t k = 0; k < count; ++k)
    {
        least = std::min(least, m_ports[candidates[k]]->GetQueueBytes());
    }
    return least;
}

uint32_t
FabricSwitch::SelectPort(const FabricPacket& p)
{
    const uint16_t* candidates;
    uint32_t count;
    const uint32_t group = m_groups ? TargetGroup(p) : kNoGroup;
    if (group != kNoGroup)
    {
        const uint32_t begin = m_groupRoutes.start[group];
        count = m_groupRoutes.start[group + 1] - begin;
        candidates = m_groupRoutes.ports.data() + begin;
    }
    else
    {
        const HostAttachments::Entry& at = m_attachments->byNode[p.dst];
        if (at.leafNode == m_nodeId)
        {
            return at.leafPort;
        }
        const uint32_t begin = at.leafIndex == HostAttachments::kNone ? 0 : m_routeStart[at.leafIndex];
        count = at.leafIndex == HostAttachments::kNone ? 0 : m_routeStart[at.leafIndex + 1] - begin;
        candidates = m_routePorts.data() + begin;
    }
    NS_ABORT_MSG_IF(count == 0, "switch " << m_nodeId << " has no route to node " << p.dst);
    if (count == 1)
    {
        return candidates[0];
    }
    const uint64_t salt = uint64_t(m_ecmpSeed) << 32 | m_nodeId;
    if (m_routing == Routing::ECMP)
    {
        return candidates[EcmpHash(p, m_hashFields, salt) % count];
    }
    return SelectOtherPort(p, candidates, count, salt);
}

__attribute__((noinline)) uint32_t
FabricSwitch::SelectOtherPort(const FabricPacket& p, const uint16_t* candidates, uint32_t count, uint64_t salt)
{
    switch (m_routing)
    {
    case Routing::ECMP:
        break;
    case Routing::PINNED:
        return candidates[p.dst % count];
    case Routing::FLOWLET:
        return SelectFlowletPort(p, candidates, count, EcmpHash(p, m_hashFields, salt));
    case Routing::ADAPTIVE:
        return AdaptiveRouter::LeastLoaded(candidates,
                                           count,
                                           m_adaptiveTies == AdaptiveTies::ROTATE
                                               ? uint32_t(m_sprayNext++ % count)
                                               : uint32_t(EcmpHash(p, m_hashFields, salt) % count),
                                           m_ports);
    case Routing::SPRAY:
        return candidates[m_sprayNext++ % count];
    case Routing::STRIPE:
        return p.kind == PacketKind::DATA ? candidates[m_sprayNext++ % count]
                                          : candidates[EcmpHash(p, m_hashFields, salt) % count];
    }
    NS_ABORT_MSG("unknown FabricSwitch::Routing " << int(m_routing));
    return candidates[0];
}

void
FabricSwitch::RouteCandidates(const FabricPacket& p, std::vector<uint32_t>* out) const
{
    out->clear();
    const HostAttachments::Entry& at = m_attachments->byNode[p.dst];
    if (at.leafNode == m_nodeId)
    {
        out->push_back(at.leafPort);
        return;
    }
    NS_ABORT_MSG_IF(at.leafIndex == HostAttachments::kNone, "switch " << m_nodeId << " has no route to " << p.dst);
    const uint32_t begin = m_routeStart[at.leafIndex];
    const uint32_t count = m_routeStart[at.leafIndex + 1] - begin;
    NS_ABORT_MSG_IF(count == 0, "switch " << m_nodeId << " has no route to node " << p.dst);
    const uint16_t* candidates = &m_routePorts[begin];
    const uint64_t salt = uint64_t(m_ecmpSeed) << 32 | m_nodeId;
    if (count == 1 || m_routing == Routing::ECMP)
    {
        out->push_back(candidates[count == 1 ? 0 : EcmpHash(p, m_hashFields, salt) % count]);
        return;
    }
    if (m_routing == Routing::PINNED)
    {
        out->push_back(candidates[p.dst % count]);
        return;
    }
    out->assign(candidates, candidates + count);
}

uint32_t
FabricSwitch::SelectFlowletPort(const FabricPacket& p, const uint16_t* candidates, uint32_t count, uint64_t hash)
{
    const int64_t nowPs = cosim::NowPs();
    const int32_t ongoing = m_flowlets.Continue(hash, nowPs, m_flowletTimeoutPs);
    if (ongoing >= 0)
    {
        return uint32_t(ongoing);
    }
    const uint32_t port = AdaptiveRouter::LeastLoaded(candidates, count, hash % count, m_ports);
    m_flowlets.Start(hash, nowPs, uint16_t(port));
    return port;
}

double
FabricSwitch::MarkProbability(uint32_t port, uint64_t queueBytes) const
{
    const double q = double(queueBytes);
    if (q <= m_portKmin[port])
    {
        return 0.0;
    }
    if (q > m_portKmax[port])
    {
        return 1.0;
    }
    return m_pmax * (q - m_portKmin[port]) / (m_portKmax[port] - m_portKmin[port]);
}

bool
FabricSwitch::DecideMark(uint32_t port, uint64_t queueBytes)
{
    const double prob = MarkProbability(port, queueBytes);
    return prob > 0 && (prob >= 1 || m_uniform->GetValue() < prob);
}

void
FabricSwitch::Receive(FabricPacket* p, uint32_t inPort)
{
    switch (p->kind)
    {
    case PacketKind::PAUSE:
        ApplyPause(p, inPort);
        return;
    case PacketKind::CREDIT:
        ApplyCredit(p, inPort);
        return;
    case PacketKind::DATA:
    case PacketKind::ACK:
    case PacketKind::CNP:
    case PacketKind::REQUEST:
    case PacketKind::GRANT:
    case PacketKind::SACK:
    case PacketKind::NACK:
        break;
    }
    if (m_groups && p->kind == PacketKind::DATA)
    {
        SteerByGroup(p, inPort);
    }
    const uint32_t out = SelectPort(*p);
    switch (m_flowControl)
    {
    case EgressPort::FlowControl::PFC:
        ReceiveInSharedBuffer(p, inPort, out);
        return;
    case EgressPort::FlowControl::CREDIT:
        ReceiveOnLane(p, inPort, out);
        return;
    }
}

void
FabricSwitch::ReceiveInSharedBuffer(FabricPacket* p, uint32_t inPort, uint32_t out)
{
    if (PortAt(out)->IsQueueDisabled(p->priority))
    {
        ++m_watchdogDrops; // before admission: a disabled queue takes no buffer
        NoteLoss(out, cosim::LossCause::WATCHDOG_DROP);
        m_pool->Release(p);
        return;
    }
    if (m_trimThresholdBytes != 0 && ShouldTrim(*p, out))
    {
        Trim(p, out);
    }
    BufferClass cls = Mmu().Admit(inPort, p->priority, p->wireBytes);
    if (cls == BufferClass::DROP && m_trimThresholdBytes != 0 && p->kind == PacketKind::DATA && p->payloadBytes != 0)
    {
        Trim(p, out); // the header still fits where the whole packet did not
        cls = Mmu().Admit(inPort, p->priority, p->wireBytes);
    }
    if (cls == BufferClass::DROP)
    {
        ++m_drops;
        m_dropTrace(p);
        NoteLoss(out, cosim::LossCause::BUFFER_DROP);
        m_pool->Release(p);
        return;
    }
    p->ingressPort = static_cast<uint16_t>(inPort);
    p->bufferClass = static_cast<uint8_t>(cls);
    if (Mmu().TakeXoff(inPort, p->priority))
    {
        m_xoffed.emplace_back(inPort, p->priority);
        SendPause(inPort, p->priority, m_pauseQuanta);
    }
    MarkAndEnqueue(p, out);
}

bool
FabricSwitch::ShouldTrim(const FabricPacket& p, uint32_t out) const
{
    return p.kind == PacketKind::DATA && p.payloadBytes != 0 &&
           PortAt(out)->GetQueueBytes(p.priority) >= m_trimThresholdBytes;
}

void
FabricSwitch::Trim(FabricPacket* p, uint32_t port)
{
    NS_ASSERT_MSG(p->kind == PacketKind::DATA && p->payloadBytes != 0, "only a data packet with payload is trimmed");
    ++m_trims;
    NoteLoss(port, cosim::LossCause::TRIMMED);
    p->payloadBytes = 0;
    p->wireBytes = m_trimmedBytes;
    p->priority = m_trimPriority;
}

// Inlined into both marking points: an out-of-line call per packet-hop costs ~0.4% of the packet path.
inline __attribute__((always_inline)) void
FabricSwitch::MarkByQueue(FabricPacket* p, uint32_t port)
{
    if (p->kind == PacketKind::DATA && !p->ecnMarked)
    {
        const double prob = MarkProbability(port, PortAt(port)->GetQueueBytes(p->priority));
        if (prob > 0 && (prob >= 1 || m_uniform->GetValue() < prob))
        {
            p->ecnMarked = true;
            ++m_ecnMarks;
        }
    }
}

void
FabricSwitch::MarkAndEnqueue(FabricPacket* p, uint32_t out)
{
    // ECN for DCQCN on RoCE, FECN for IB congestion control: the same marker on the egress queue.
    if (m_markAtEnqueue)
    {
        MarkByQueue(p, out);
    }
    PortAt(out)->Enqueue(p);
}

void
FabricSwitch::MarkOnDequeue(FabricPacket* p, uint32_t port)
{
    MarkByQueue(p, port); // the packet has left its queue: what it sees is the queue behind it
}

void
FabricSwitch::ReceiveOnLane(FabricPacket* p, uint32_t inPort, uint32_t out)
{
    AdmitInput(inPort, PortAt(inPort)->QueueOf(p->priority), CreditBlocks(p->wireBytes));
    p->ingressPort = static_cast<uint16_t>(inPort);
    p->bufferClass = static_cast<uint8_t>(BufferClass::CREDIT);
    MarkAndEnqueue(p, out);
}

void
FabricSwitch::TransmitStarted(FabricPacket* p, uint32_t port)
{
    if (m_markAtDequeue)
    {
        MarkOnDequeue(p, port);
    }
    if (m_telemetryOn)
    {
        m_telemetry->OnTransmit(p, port, PortAt(port)->GetQueueBytes(), PortAt(port)->GetRateBps(),
                                cosim::NowPs());
    }
    switch (m_flowControl)
    {
    case EgressPort::FlowControl::PFC:
        ReleaseSharedBuffer(p);
        return;
    case EgressPort::FlowControl::CREDIT:
        ReleaseLane(p);
        return;
    }
}

void
FabricSwitch::DropQueued(FabricPacket* p, uint32_t port)
{
    ++m_watchdogDrops;
    NoteLoss(port, cosim::LossCause::WATCHDOG_DROP);
    switch (m_flowControl)
    {
    case EgressPort::FlowControl::PFC:
        ReleaseSharedBuffer(p);
        break;
    case EgressPort::FlowControl::CREDIT:
        ReleaseLane(p);
        break;
    }
    m_pool->Release(p);
}

void
FabricSwitch::ReleaseLane(FabricPacket* p)
{
    NS_ASSERT_MSG(p->bufferClass == static_cast<uint8_t>(BufferClass::CREDIT), "packet holds no input lane");
    const uint32_t in = p->ingressPort;
    p->bufferClass = static_cast<uint8_t>(BufferClass::NONE);
    ReleaseInput(in, PortAt(in)->QueueOf(p->priority), CreditBlocks(p->wireBytes));
}

void
FabricSwitch::ReleaseSharedBuffer(FabricPacket* p)
{
    const auto cls = static_cast<BufferClass>(p->bufferClass);
    const uint32_t in = p->ingressPort;
    Mmu().Release(in, p->priority, p->wireBytes, cls);
    p->bufferClass = static_cast<uint8_t>(BufferClass::NONE);
    if (!m_xoffed.empty() && (cls == BufferClass::SHARED || Mmu().IsXoff(in, p->priority)))
    {
        ResumeWhereAllowed();
    }
}

void
FabricSwitch::ResumeWhereAllowed()
{
    // Freeing shared buffer raises the dynamic threshold of every (port, priority), so a paused one may
    // resume although none of its own packets left: check them all, or it could stay paused for good
    // (its XOFF refreshed forever) once its own queue is empty.
    for (std::size_t k = 0; k < m_xoffed.size();)
    {
        const auto [port, prio] = m_xoffed[k];
        if (Mmu().TakeXon(port, prio))
        {
            m_xoffed[k] = m_xoffed.back();
            m_xoffed.pop_back();
            SendPause(port, prio, 0);
        }
        else
        {
            ++k;
        }
    }
}

void
FabricSwitch::SendPause(uint32_t port, uint8_t prio, uint32_t quanta)
{
    FabricPacket* f = m_pool->Allocate();
    f->kind = PacketKind::PAUSE;
    f->priority = prio;
    f->aux = quanta;
    f->src = m_nodeId;
    f->dst = PortAt(port)->GetPeer()->GetNodeId();
    f->wireBytes = m_pauseFrameBytes;
    PortAt(port)->EnqueueControl(f);
    m_refresh[port][prio].Cancel();
    if (quanta > 0)
    {
        ++m_pauseFramesSent;
        const int64_t pausePs = PortAt(port)->SerializationPs(uint64_t(quanta) * 64);
        m_refresh[port][prio] =
            Simulator::Schedule(TimeStep(pausePs / 2), &FabricSwitch::RefreshPause, this, port, prio);
    }
}

void
FabricSwitch::RefreshPause(uint32_t port, uint8_t prio)
{
    if (Mmu().IsXoff(port, prio))
    {
        SendPause(port, prio, m_pauseQuanta);
    }
}

} // namespace ns3
