#include "fast-forward-controller.h"

#include "egress-port.h"
#include "fabric-switch.h"
#include "host-nic.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(FastForwardController);

TypeId
FastForwardController::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FastForwardController")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<FastForwardController>()
            .AddAttribute("Enabled",
                          "Fast-forward steady flows (approximate; limits.fast_forward). Off: the engine creates "
                          "no controller and the run is exact.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&FastForwardController::m_enabled),
                          MakeBooleanChecker())
            .AddAttribute("CheckInterval",
                          "How often sending flows and the ports on their paths are sampled, a time.",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&FastForwardController::m_interval),
                          MakeTimeChecker(NanoSeconds(100)))
            .AddAttribute("StabilityWindow",
                          "A flow is steady when it and its path were stable over this long, a time (rounded "
                          "up to whole CheckIntervals, at least two).",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&FastForwardController::m_window),
                          MakeTimeChecker(NanoSeconds(200)))
            .AddAttribute("RateTolerance",
                          "Largest relative change of a flow's sending rate (second half of the window against "
                          "the first) and of its congestion-control rate over the window for it to count as "
                          "steady (dimensionless, e.g. 0.01 = 1 %).",
                          DoubleValue(0.01),
                          MakeDoubleAccessor(&FastForwardController::m_rateTolerance),
                          MakeDoubleChecker<double>(1e-6, 0.5))
            .AddAttribute("QueueToleranceBytes",
                          "A port's queue is steady when its samples over the window differ by at most this or "
                          "RateTolerance of the largest, whichever is more, in bytes.",
                          UintegerValue(16384),
                          MakeUintegerAccessor(&FastForwardController::m_queueToleranceBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("MinSpan",
                          "Shortest span worth fast-forwarding, a time (a few round trips: shorter ones save "
                          "little and each costs a drain and a refill).",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&FastForwardController::m_minSpan),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("FinishMargin",
                          "A span ends this long before the first of its flows would finish at its rate, a "
                          "time (about a round trip), so that every flow finishes packet by packet.",
                          TimeValue(MicroSeconds(3)),
                          MakeTimeAccessor(&FastForwardController::m_finishMargin),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("IdleStop",
                          "Checks stop after this long without progress of any watched flow and with nothing "
                          "frozen, a time, so that a run whose flows are stuck ends as stalled; the next flow "
                          "to start resumes them.",
                          TimeValue(MilliSeconds(1)),
                          MakeTimeAccessor(&FastForwardController::m_idleStop),
                          MakeTimeChecker(Time(0)));
    return tid;
}

FastForwardController::FastForwardController() = default;

FastForwardController::~FastForwardController() = default;

void
FastForwardController::DoDispose()
{
    if (m_flows != nullptr)
    {
        m_flows->onStart = MakeNullCallback<void, uint64_t>();
    }
    m_nodes.clear();
    Object::DoDispose();
}

void
FastForwardController::Start(FlowTable* flows, std::vector<Ptr<FabricNode>> nodes)
{
    NS_ASSERT_MSG(m_flows == nullptr, "FastForwardController::Start called twice");
    NS_ABORT_MSG_IF(m_window < m_interval * 2, "FastForwardController::StabilityWindow must be at least two "
                                               "CheckIntervals");
    m_flows = flows;
    m_nodes = std::move(nodes);
    const int64_t intervalPs = m_interval.GetTimeStep();
    m_ring = uint32_t((m_window.GetTimeStep() + intervalPs - 1) / intervalPs) + 1;
    if (m_ring % 2 == 0)
    {
        ++m_ring; // an even number of intervals, so the window splits into two halves
    }
    for (uint32_t id = 0; id < m_nodes.size(); ++id)
    {
        m_portBase.push_back(uint32_t(m_portNode.size()));
        for (uint32_t p = 0; p < m_nodes[id]->GetNPorts(); ++p)
        {
            m_portNode.push_back(id);
        }
    }
    const std::size_t nPorts = m_portNode.size();
    m_portQueue.assign(nPorts * m_ring, 0);
    m_portBlocked.assign(nPorts * m_ring, 0);
    m_portLastCheck.assign(nPorts, 0);
    m_portSamples.assign(nPorts, 0);
    m_portFrozenBy.assign(nPorts, -1);
    m_portOwner.assign(nPorts, -1);
    m_flows->onStart = MakeCallback(&FastForwardController::OnFlowStart, this);
}

HostNic&
FastForwardController::Sender(uint64_t flowId) const
{
    return static_cast<HostNic&>(*m_nodes[m_flows->src[flowId]]);
}

EgressPort&
FastForwardController::PortAt(uint32_t port) const
{
    const uint32_t node = m_portNode[port];
    return *m_nodes[node]->GetPort(port - m_portBase[node]);
}

FastForwardController::Watch
FastForwardController::MakeWatch(uint64_t flowId)
{
    Watch w;
    w.flowId = flowId;
    w.firstPort = uint32_t(m_pathPorts.size());
    w.sent.assign(m_ring, 0);
    w.mark.assign(m_ring, 0);
    w.ccRate.assign(m_ring, 0.0);
    // The packet the switches route: the hash fields of the flow's data packets.
    FabricPacket probe{};
    probe.flowId = uint32_t(flowId);
    probe.src = m_flows->src[flowId];
    probe.dst = m_flows->dst[flowId];
    probe.qp = m_flows->qp[flowId];
    probe.priority = m_flows->priority[flowId];
    probe.kind = PacketKind::DATA;
    // Walk hop by hop; a multi-path hop adds every candidate and continues from each distinct next node.
    std::vector<uint32_t> frontier{probe.src};
    std::vector<uint32_t> next;
    std::vector<uint32_t> candidates;
    const HostNic& nic = Sender(flowId);
    const uint64_t packetBytes = nic.GetMtuBytes() + nic.GetHeaderBytes();
    for (uint32_t hop = 0; !frontier.empty(); ++hop)
    {
        NS_ABORT_MSG_IF(hop > 64, "flow " << flowId << ": no path to node " << probe.dst << " within 64 hops");
        next.clear();
        for (uint32_t node : frontier)
        {
            if (node == probe.dst)
            {
                continue;
            }
            if (node == probe.src)
            {
                candidates.assign(1, 0); // a host's one port
            }
            else
            {
                static_cast<const FabricSwitch&>(*m_nodes[node]).RouteCandidates(probe, &candidates);
            }
            if (next.empty())
            {
                // the hop's first candidate stands for all: equal-cost ports have equal links
                const EgressPort& e = *m_nodes[node]->GetPort(candidates[0]);
                w.baseDelayPs += double(e.SerializationPs(packetBytes) + e.GetPropagationDelay().GetTimeStep());
            }
            for (uint32_t p : candidates)
            {
                m_pathPorts.push_back(m_portBase[node] + p);
                const uint32_t peer = m_nodes[node]->GetPort(p)->GetPeer()->GetNodeId();
                if (std::find(next.begin(), next.end(), peer) == next.end())
                {
                    next.push_back(peer);
                }
            }
        }
        w.hops += next.empty() ? 0 : 1;
        frontier.swap(next);
    }
    w.nPorts = uint32_t(m_pathPorts.size()) - w.firstPort;
    return w;
}

void
FastForwardController::OnFlowStart(uint64_t flowId)
{
    m_started.push_back(flowId);
    m_idleSincePs = -1;
    ScheduleCheck();
    bool frozenAny = false;
    for (const Frozen& f : m_frozen)
    {
        frozenAny = frozenAny || f.live;
    }
    if (!frozenAny)
    {
        return;
    }
    // A flow on a frozen component's port changes its rates: end that span now.
    const std::size_t mark = m_pathPorts.size();
    const Watch w = MakeWatch(flowId);
    for (uint32_t k = 0; k < w.nPorts; ++k)
    {
        const int32_t c = m_portFrozenBy[m_pathPorts[w.firstPort + k]];
        if (c >= 0)
        {
            Cut(uint32_t(c));
        }
    }
    m_pathPorts.resize(mark);
}

void
FastForwardController::SamplePorts(const Watch& w)
{
    for (uint32_t k = 0; k < w.nPorts; ++k)
    {
        const uint32_t port = m_pathPorts[w.firstPort + k];
        if (m_portLastCheck[port] == m_checks)
        {
            continue;
        }
        m_portSamples[port] = m_portLastCheck[port] + 1 == m_checks ? m_portSamples[port] + 1 : 1;
        m_portLastCheck[port] = m_checks;
        const EgressPort& e = PortAt(port);
        int64_t blocked = 0;
        for (uint8_t q = 0; q < kNumPriorities; ++q)
        {
            blocked += e.GetPausedPs(q);
        }
        if (e.GetFlowControl() == EgressPort::FlowControl::CREDIT)
        {
            for (uint8_t vl = 0; vl < e.GetDataVls(); ++vl)
            {
                blocked += e.GetCreditStallPs(vl);
            }
        }
        const std::size_t slot = std::size_t(port) * m_ring + m_checks % m_ring;
        m_portQueue[slot] = e.GetQueueBytes();
        m_portBlocked[slot] = blocked;
    }
}

bool
FastForwardController::PortsSteady(const Watch& w) const
{
    for (uint32_t k = 0; k < w.nPorts; ++k)
    {
        const uint32_t port = m_pathPorts[w.firstPort + k];
        if (m_portSamples[port] < m_ring || PortAt(port).GetPausedMask() != 0)
        {
            return false;
        }
        const std::size_t base = std::size_t(port) * m_ring;
        const std::size_t now = base + m_checks % m_ring;
        const std::size_t oldest = base + (m_checks + 1) % m_ring;
        if (m_portBlocked[now] != m_portBlocked[oldest])
        {
            return false;
        }
        const auto [lo, hi] = std::minmax_element(m_portQueue.begin() + base, m_portQueue.begin() + base + m_ring);
        if (double(*hi - *lo) > std::max(double(m_queueToleranceBytes), m_rateTolerance * double(*hi)))
        {
            return false;
        }
    }
    return true;
}

bool
FastForwardController::FlowSteady(const Watch& w) const
{
    if (w.samples < m_ring)
    {
        return false;
    }
    const uint32_t half = (m_ring - 1) / 2;
    const std::size_t now = m_checks % m_ring;
    const std::size_t mid = (m_checks + m_ring - half) % m_ring;
    const std::size_t oldest = (m_checks + 1) % m_ring;
    if (w.mark[now] <= w.mark[mid] || w.mark[mid] <= w.mark[oldest])
    {
        return false;
    }
    const double second = double(w.sent[now] - w.sent[mid]) / double(w.mark[now] - w.mark[mid]);
    const double first = double(w.sent[mid] - w.sent[oldest]) / double(w.mark[mid] - w.mark[oldest]);
    if (second <= 0 || std::fabs(second - first) > m_rateTolerance * second)
    {
        return false;
    }
    const auto [lo, hi] = std::minmax_element(w.ccRate.begin(), w.ccRate.end());
    return *hi - *lo <= m_rateTolerance * std::fabs(w.ccRate[m_checks % m_ring]);
}

double
FastForwardController::WindowRate(const Watch& w) const
{
    const std::size_t now = m_checks % m_ring;
    const std::size_t oldest = (m_checks + 1) % m_ring;
    return double(w.sent[now] - w.sent[oldest]) / double(w.mark[now] - w.mark[oldest]);
}

void
FastForwardController::Check()
{
    m_checks += m_ticksToCheck;
    ++m_checksMade;
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    // Keep watching the flows that still send or are frozen, compacted in place (their path ports too);
    // forget the others.
    uint32_t kept = 0;
    uint32_t keptPorts = 0;
    for (uint32_t i = 0; i < m_watches.size(); ++i)
    {
        Watch& w = m_watches[i];
        if (w.component < 0 && !Sender(w.flowId).IsSending(w.flowId))
        {
            m_watchOf[w.flowId] = kNoWatch;
            continue;
        }
        std::copy(m_pathPorts.begin() + w.firstPort, m_pathPorts.begin() + w.firstPort + w.nPorts,
                  m_pathPorts.begin() + keptPorts);
        w.firstPort = keptPorts;
        keptPorts += w.nPorts;
        m_watchOf[w.flowId] = kept;
        if (kept != i)
        {
            m_watches[kept] = std::move(w);
        }
        ++kept;
    }
    m_watches.resize(kept);
    m_pathPorts.resize(keptPorts);
    // Flows that started since the last check.
    if (m_watchOf.size() < m_flows->Size())
    {
        m_watchOf.resize(m_flows->Size(), kNoWatch);
    }
    for (uint64_t f : m_started)
    {
        if (m_watchOf[f] == kNoWatch && Sender(f).IsSending(f))
        {
            m_watchOf[f] = uint32_t(m_watches.size());
            m_watches.push_back(MakeWatch(f));
        }
    }
    m_started.clear();
    // Sample.
    const std::size_t slot = m_checks % m_ring;
    bool progress = false;
    for (Watch& w : m_watches)
    {
        if (w.component >= 0)
        {
            progress = true; // a span is running: it will end
            continue;
        }
        const uint64_t sent = m_flows->bytes[w.flowId].sentBytes;
        progress = progress || w.samples == 0 || sent != w.sent[(m_checks + m_ring - 1) % m_ring];
        w.sent[slot] = sent;
        const HostNic& nic = Sender(w.flowId);
        w.mark[slot] = nic.GetFlowPacingMarkPs(w.flowId);
        const uint32_t ccti = nic.GetFlowCcti(w.flowId);
        w.ccRate[slot] = ccti != 0 ? -double(ccti) : nic.GetFlowRateBps(w.flowId);
        ++w.samples;
        SamplePorts(w);
    }
    // Components of the flows that are not frozen, by shared ports (union-find over watch indices).
    const uint32_t nw = uint32_t(m_watches.size());
    m_parent.resize(nw);
    for (uint32_t i = 0; i < nw; ++i)
    {
        m_parent[i] = i;
    }
    m_touched.clear();
    for (uint32_t i = 0; i < nw; ++i)
    {
        if (m_watches[i].component >= 0)
        {
            continue;
        }
        for (uint32_t k = 0; k < m_watches[i].nPorts; ++k)
        {
            const uint32_t port = m_pathPorts[m_watches[i].firstPort + k];
            if (m_portOwner[port] < 0)
            {
                m_portOwner[port] = int32_t(i);
                m_touched.push_back(port);
            }
            else
            {
                m_parent[Find(i)] = Find(uint32_t(m_portOwner[port]));
            }
        }
    }
    for (uint32_t port : m_touched)
    {
        m_portOwner[port] = -1;
    }
    // A component is frozen only if each flow is steady, no port of it is frozen by another, and the span
    // is long enough.
    m_bad.assign(nw, 0);
    m_spanPs.assign(nw, std::numeric_limits<double>::infinity());
    m_order.clear();
    for (uint32_t i = 0; i < nw; ++i)
    {
        Watch& w = m_watches[i];
        if (w.component >= 0)
        {
            continue;
        }
        const uint32_t root = Find(i);
        m_order.push_back(i);
        bool steady = FlowSteady(w) && PortsSteady(w);
        for (uint32_t k = 0; steady && k < w.nPorts; ++k)
        {
            steady = m_portFrozenBy[m_pathPorts[w.firstPort + k]] < 0;
        }
        if (!steady)
        {
            m_bad[root] = 1;
            continue;
        }
        w.rateBytesPerPs = WindowRate(w);
        const uint64_t left = m_flows->bytes[w.flowId].sizeBytes - m_flows->bytes[w.flowId].sentBytes;
        m_spanPs[root] =
            std::min(m_spanPs[root], double(left) / w.rateBytesPerPs - double(m_finishMargin.GetTimeStep()));
    }
    // Each component's members side by side, in watch order within it.
    std::stable_sort(m_order.begin(), m_order.end(), [this](uint32_t a, uint32_t b) { return Find(a) < Find(b); });
    for (std::size_t lo = 0; lo < m_order.size();)
    {
        const uint32_t root = Find(m_order[lo]);
        std::size_t hi = lo + 1;
        while (hi < m_order.size() && Find(m_order[hi]) == root)
        {
            ++hi;
        }
        if (!m_bad[root] && m_spanPs[root] >= double(m_minSpan.GetTimeStep()))
        {
            Freeze(&m_order[lo], &m_order[hi], nowPs + int64_t(m_spanPs[root]));
        }
        lo = hi;
    }
    if (progress)
    {
        m_idleSincePs = -1;
    }
    else if (m_idleSincePs < 0)
    {
        m_idleSincePs = nowPs;
    }
    const bool idle = m_idleSincePs >= 0 && nowPs - m_idleSincePs >= m_idleStop.GetTimeStep();
    if (m_watches.empty() || idle)
    {
        m_lastTickPs = -1; // stopped: the next flow start begins a new grid of checks
        return;
    }
    m_lastTickPs = nowPs;
    // With every watched flow frozen a check has nothing to sample or freeze: the ticks until the next thaw or
    // flow start are skipped, on the same grid, so that the run is the one every tick would give.
    const bool sampling =
        std::any_of(m_watches.begin(), m_watches.end(), [](const Watch& w) { return w.component < 0; });
    if (sampling)
    {
        ScheduleCheck();
    }
}

void
FastForwardController::ScheduleCheck()
{
    if (m_checkEvent.IsPending())
    {
        return;
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const int64_t intervalPs = m_interval.GetTimeStep();
    m_ticksToCheck = m_lastTickPs < 0 ? 1 : uint64_t((nowPs - m_lastTickPs) / intervalPs + 1);
    const int64_t atPs = m_lastTickPs < 0 ? nowPs + intervalPs : m_lastTickPs + int64_t(m_ticksToCheck) * intervalPs;
    m_checkEvent = Simulator::Schedule(TimeStep(atPs - nowPs), &FastForwardController::Check, this);
}

uint32_t
FastForwardController::Find(uint32_t i)
{
    while (m_parent[i] != i)
    {
        m_parent[i] = m_parent[m_parent[i]];
        i = m_parent[i];
    }
    return i;
}

void
FastForwardController::Freeze(const uint32_t* first, const uint32_t* last, int64_t endPs)
{
    uint32_t c = 0;
    while (c < m_frozen.size() && m_frozen[c].live)
    {
        ++c;
    }
    if (c == m_frozen.size())
    {
        m_frozen.emplace_back();
    }
    Frozen& f = m_frozen[c];
    f.flows.clear();
    f.ports.clear();
    f.live = true;
    f.retries = 0;
    f.rcvdBytes = 0;
    f.cut = false;
    f.startPs = Simulator::Now().GetTimeStep();
    f.endPs = endPs;
    for (const uint32_t* i = first; i != last; ++i)
    {
        Watch& w = m_watches[*i];
        w.component = int32_t(c);
        const FlowTable::Bytes& b = m_flows->bytes[w.flowId];
        // Negative when fewer bytes than rate x empty-path delay are in flight at this instant: a packet more
        // or less in flight is sampling noise, and clamping it at zero would short every span's credit.
        const double inflight = double(b.sentBytes - b.rcvdBytes);
        w.queuedBytes = inflight - w.rateBytesPerPs * w.baseDelayPs;
        f.flows.push_back(w.flowId);
        for (uint32_t k = 0; k < w.nPorts; ++k)
        {
            const uint32_t port = m_pathPorts[w.firstPort + k];
            if (m_portFrozenBy[port] < 0)
            {
                m_portFrozenBy[port] = int32_t(c);
                f.ports.push_back(port);
            }
        }
        Sender(w.flowId).FreezeFlow(w.flowId);
    }
    // The component's standing queue is shared out in proportion to the flows' rates, as a FIFO holds its
    // senders' bytes. Flows that share a NIC at equal rates then get equal credits and keep the order the
    // round robin gave them; a flow's own bytes in flight at one instant depend on that round robin's phase,
    // and crediting by them puts equal flows a packet or two apart, which a ring of them amplifies step
    // after step.
    double queued = 0;
    double rate = 0;
    for (const uint32_t* i = first; i != last; ++i)
    {
        queued += m_watches[*i].queuedBytes;
        rate += m_watches[*i].rateBytesPerPs;
    }
    for (const uint32_t* i = first; i != last; ++i)
    {
        m_watches[*i].queuedBytes = queued * m_watches[*i].rateBytesPerPs / rate;
    }
    ++m_spans;
    f.thaw = Simulator::Schedule(TimeStep(endPs - f.startPs), &FastForwardController::PlannedThaw, this, c);
}

bool
FastForwardController::Drained(const Frozen& f) const
{
    return std::all_of(f.flows.begin(), f.flows.end(), [this](uint64_t flowId) {
        return m_flows->bytes[flowId].rcvdBytes == m_flows->bytes[flowId].sentBytes;
    });
}

void
FastForwardController::PlannedThaw(uint32_t c)
{
    Frozen& f = m_frozen[c];
    // Packets still in flight (a deep standing queue, a span cut soon after its freeze, a long pause
    // elsewhere): wait for them, one check interval at a time, as a flow is credited only with nothing in
    // flight; while they arrive the wait goes on, and after kMaxRetries intervals without an arrival the span
    // ends uncredited (a flow's credit stays below its size whatever the wait).
    constexpr uint32_t kMaxRetries = 8;
    uint64_t rcvd = 0;
    for (uint64_t flowId : f.flows)
    {
        rcvd += m_flows->bytes[flowId].rcvdBytes;
    }
    if (rcvd != f.rcvdBytes)
    {
        f.rcvdBytes = rcvd;
        f.retries = 0;
    }
    if (!Drained(f) && f.retries < kMaxRetries)
    {
        ++f.retries;
        f.thaw = Simulator::Schedule(m_interval, &FastForwardController::PlannedThaw, this, c);
        return;
    }
    Thaw(c, f.cut);
}

void
FastForwardController::Cut(uint32_t c)
{
    Frozen& f = m_frozen[c];
    if (f.cut)
    {
        return; // already ending as soon as it drained
    }
    f.cut = true;
    if (Drained(f))
    {
        Thaw(c, true);
        return;
    }
    // Thawed now, its flows would get no credit for the span (none is given with packets in flight) and fall
    // behind by all of it; held until they drained, the new flow has their ports to itself for that moment.
    f.thaw.Cancel();
    f.thaw = Simulator::Schedule(m_interval, &FastForwardController::PlannedThaw, this, c);
}

void
FastForwardController::Thaw(uint32_t c, bool cut)
{
    Frozen& f = m_frozen[c];
    NS_ASSERT_MSG(f.live, "component " << c << " is not frozen");
    f.thaw.Cancel();
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const double spanPs = double(nowPs - f.startPs);
    m_spansCut += cut ? 1 : 0;
    for (uint64_t flowId : f.flows)
    {
        Watch& w = m_watches[m_watchOf[flowId]];
        HostNic& nic = Sender(flowId);
        const FlowTable::Bytes& b = m_flows->bytes[flowId];
        const uint64_t mtu = nic.GetMtuBytes();
        // What the exact run delivers over the span is rate x span less the flow's share of the standing
        // queues, which drained during the span and which it refills after. The credit is whole packets,
        // leaving at least one byte to send packet by packet; what is not credited now (the fraction of a
        // packet, or all of it while packets are still in flight) is owed to the flow's next span, so that
        // neither rounding nor a span cut short before its queues drained slows the flow down.
        w.owedBytes = std::max(0.0, w.owedBytes + w.rateBytesPerPs * spanPs - w.queuedBytes);
        uint64_t credit = 0;
        m_uncredited += b.rcvdBytes == b.sentBytes ? 0 : 1;
        if (b.rcvdBytes == b.sentBytes)
        {
            const uint64_t wanted = uint64_t(w.owedBytes) / mtu * mtu;
            const uint64_t most = (b.sizeBytes - b.sentBytes - 1) / mtu * mtu;
            credit = std::min(wanted, most);
            // Held back by the flow's end: it finishes packet by packet and owes nothing more.
            w.owedBytes = credit == wanted ? w.owedBytes - double(credit) : 0.0;
        }
        nic.ThawFlow(flowId, credit);
        const uint64_t packets = credit / mtu;
        if (packets != 0)
        {
            const uint64_t wire = credit + packets * nic.GetHeaderBytes();
            // Each hop's packets go to its ports; a multi-path hop's are shared out among its candidates.
            std::vector<uint32_t> nodes;
            for (uint32_t k = 0; k < w.nPorts; ++k)
            {
                nodes.push_back(m_portNode[m_pathPorts[w.firstPort + k]]);
            }
            for (uint32_t k = 0; k < w.nPorts; ++k)
            {
                const uint32_t node = nodes[k];
                const uint64_t share = uint64_t(std::count(nodes.begin(), nodes.end(), node));
                PortAt(m_pathPorts[w.firstPort + k]).CountSkipped(packets / share, wire / share);
            }
        }
        m_creditedBytes += credit;
        m_skippedHops += packets * w.hops;
        m_flowTimePs += nowPs - f.startPs;
        w.component = -1;
        w.samples = 0; // its history restarts: the refill after a span is no steady state
    }
    // Every flow of the span is thawed before any sends (each NIC resumes its round robin in phase).
    for (uint64_t flowId : f.flows)
    {
        Sender(flowId).WakeSender();
    }
    for (uint32_t port : f.ports)
    {
        m_portFrozenBy[port] = -1;
        m_portSamples[port] = 0;
    }
    f.live = false;
    m_idleSincePs = -1;
    ScheduleCheck();
}

} // namespace ns3
