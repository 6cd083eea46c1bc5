#include "cosim-engine.h"

#include "event-log.h"

#include "../helper/fabric-builder.h"
#include "../helper/picosecond-resolution.h"
#include "../model/credit-arbiter.h"
#include "../model/dag-executor.h"
#include "../model/deadlock-watchdog.h"
#include "../model/egress-queue-sampler.h"
#include "../model/fast-forward-controller.h"
#include "../model/pause-storm-source.h"
#include "../model/pfc-watchdog.h"
#include "../model/link-fault-model.h"
#include "../model/partition-exchange.h"
#include "../model/timing-wheel-scheduler.h"

#include "ns3/config.h"
#include "ns3/data-rate.h"
#include "ns3/enum.h"
#include "ns3/pointer.h"
#include "ns3/nstime.h"
#include "ns3/object-factory.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/scheduler.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <numeric>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef COSIM_NS3_VERSION
#define COSIM_NS3_VERSION "unknown"
#endif

namespace cosim
{

using namespace ns3;

namespace
{
bool g_engineAlive = false; ///< ns-3's simulator is a singleton: one Engine at a time

/// Slowest and fastest rate of any DataRate attribute or link, in bit/s. Above 1 Pbit/s a byte's time on
/// the wire (8e-3 ps) rounds to nothing on the picosecond clock; below 1 Mbit/s is no cluster link, and one
/// packet would take seconds to serialize.
constexpr double kMinRateBps = 1e6;
constexpr double kMaxRateBps = 1e15;
/// Longest time any Time attribute may take, in s: about a day of simulated time, far inside ns-3's
/// picosecond clock (2^63 ps, 106 days) even when many such delays add up.
constexpr double kMaxAttributeTimeS = 1e5;
/// Longest link propagation delay, in ps (1 s)
constexpr int64_t kMaxLinkDelayPs = 1000000000000;

/// @return the attribute path without the "ns3::" prefix, as users write it
std::string
ShortName(const std::string& path)
{
    return path.rfind("ns3::", 0) == 0 ? path.substr(5) : path;
}

/// @return the seconds a Time string (well-formed: a number and an optional unit, seconds without one) means
double
TimeSeconds(const std::string& value)
{
    static const std::vector<std::pair<std::string, double>> units = {
        {"y", 365 * 86400.0}, {"d", 86400.0}, {"h", 3600.0}, {"min", 60.0}, {"s", 1.0}, {"ms", 1e-3},
        {"us", 1e-6},         {"ns", 1e-9},   {"ps", 1e-12}, {"fs", 1e-15}, {"", 1.0}};
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end); // beyond double: +-inf, which fails any bound
    for (const auto& [unit, seconds] : units)
    {
        if (unit == end)
        {
            return number * seconds;
        }
    }
    return number;
}

/**
 * ns-3's attribute parsers abort the process on a malformed string (NS_ABORT in DeserializeFromString)
 * instead of reporting it, so values are checked against the syntax of their value type first.
 * @return true if @p value is well-formed for an attribute whose value type is @p typeName
 */
bool
WellFormed(const std::string& typeName, const std::string& value)
{
    static const std::string number = R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)";
    static const std::regex uinteger(R"([0-9]+)");
    static const std::regex integer(R"([+-]?[0-9]+)");
    static const std::regex real(number);
    static const std::regex boolean(R"(true|false|1|0|t|f)");
    static const std::regex time(number + R"((y|d|h|min|s|ms|us|ns|ps|fs)?)");
    static const std::regex rate(number + R"(([kKMGT]i?)?(bps|b/s|Bps|B/s))");
    if (typeName == "ns3::UintegerValue")
    {
        return std::regex_match(value, uinteger);
    }
    if (typeName == "ns3::IntegerValue")
    {
        return std::regex_match(value, integer);
    }
    if (typeName == "ns3::DoubleValue")
    {
        return std::regex_match(value, real);
    }
    if (typeName == "ns3::BooleanValue")
    {
        return std::regex_match(value, boolean);
    }
    if (typeName == "ns3::TimeValue")
    {
        return std::regex_match(value, time);
    }
    if (typeName == "ns3::DataRateValue")
    {
        return std::regex_match(value, rate);
    }
    return true; // strings, enums, ...: their parsers report errors by return value
}

/**
 * Values the models cannot run with although their type parses them: objects given as strings, names
 * outside an enum or values outside a checker's bounds, rates a picosecond clock cannot serialize, and
 * negative times. ns-3 would abort later, when the model is built.
 * @return why @p value cannot be attribute @p path (checked by @p info), or "" if it can
 */
std::string
ValueProblem(const std::string& path, const TypeId::AttributeInformation& info, const std::string& value)
{
    const std::string type = info.checker->GetValueTypeName();
    if (type == "ns3::PointerValue" || type == "ns3::ObjectPtrContainerValue" || type == "ns3::CallbackValue")
    {
        return path + " is a model object, not a value: set the attributes of its own type instead";
    }
    if (type.find("EnumValue") != std::string::npos)
    {
        // an unknown name fails an NS_ASSERT inside the enum checker: match it against the names first
        const std::string names = info.checker->GetUnderlyingTypeInformation();
        std::stringstream in(names);
        std::string name;
        bool known = false;
        while (std::getline(in, name, '|'))
        {
            known = known || name == value;
        }
        if (!known)
        {
            return "'" + value + "' is not a value of " + path + " (accepted: " + names + ")";
        }
    }
    // Time parses beyond its 64-bit picosecond range without complaint (the value wraps around), so the
    // bound is checked on the number as written, before parsing
    if (type == "ns3::TimeValue" && !(std::fabs(TimeSeconds(value)) <= kMaxAttributeTimeS))
    {
        return path + " must be at most 1e5s (about a day of simulated time), got " + value;
    }
    const Ptr<AttributeValue> parsed = info.checker->CreateValidValue(StringValue(value));
    if (!parsed)
    {
        const std::string allowed = info.checker->GetUnderlyingTypeInformation();
        return "'" + value + "' is not a valid " + type + " for " + path +
               (allowed.empty() ? "" : " (accepted: " + allowed + ")");
    }
    if (const auto* rate = dynamic_cast<const DataRateValue*>(PeekPointer(parsed)))
    {
        const double bps = double(rate->Get().GetBitRate());
        if (bps < kMinRateBps || bps > kMaxRateBps)
        {
            return path + " must be between 1Mbps and 1000Tbps (the models count time in picoseconds), got " +
                   value;
        }
    }
    if (const auto* time = dynamic_cast<const TimeValue*>(PeekPointer(parsed)); time && time->Get().IsStrictlyNegative())
    {
        return path + " must not be negative, got " + value;
    }
    if (path == "ns3::EgressPort::VlArbitrationWeights")
    {
        const std::string problem = CreditArbiter::WeightsProblem(value);
        return problem.empty() ? "" : path + ": " + problem;
    }
    return "";
}

/// @return what SetDefault accepts for attribute @p info, in its checker's words ("uint32_t 1:8", "pfc|credit",
/// "Time +0ns:+100000s"), with the bounds ValueProblem adds to times and rates; "" if the checker says nothing
std::string
Accepted(const TypeId::AttributeInformation& info)
{
    const std::string type = info.checker->GetValueTypeName();
    const std::string checker =
        info.checker->HasUnderlyingTypeInformation() ? info.checker->GetUnderlyingTypeInformation() : "";
    if (type == "ns3::TimeValue")
    {
        return checker.substr(0, checker.find(':')) + ":+" + std::to_string(int64_t(kMaxAttributeTimeS)) + "s";
    }
    if (type == "ns3::DataRateValue")
    {
        return "DataRate " + std::to_string(int64_t(kMinRateBps)) + "bps:" + std::to_string(int64_t(kMaxRateBps)) +
               "bps";
    }
    return checker;
}

/// Event at the end of a RunUntil slice: note why the simulator stopped, then stop it.
void
StopAtLimit(bool* reached)
{
    *reached = true;
    Simulator::Stop();
}

/**
 * @name What the engine exports, declared once
 * Readers (Python's cosim.engine, the decomposition merge) list these tables through Engine::ListEventLogs
 * and Engine::ListCounters and read, sort and merge every entry by its declaration, never by its name: a new
 * log is one row of kEventLogs and the trace connection that appends to it (BuildFabric); a new counter is
 * one row of kCounters.
 * @{
 */

/// Index of each log in kEventLogs (the trace sinks append to Impl::logs[index]).
enum LogIndex : std::size_t
{
    PAUSES_LOG,
    STALLS_LOG,
    PFC_WATCHDOG_LOG,
    LOSSES_LOG,
    NUM_LOGS,
};

constexpr ColumnType I8 = ColumnType::INT8;
constexpr ColumnType I32 = ColumnType::INT32;
constexpr ColumnType I64 = ColumnType::INT64;
constexpr ColumnRole TIME = ColumnRole::TIME;
constexpr ColumnRole KEY = ColumnRole::KEY;
constexpr ColumnRole VALUE = ColumnRole::VALUE;

/// The event logs, in LogIndex order.
const EventLogDecl kEventLogs[] = {
    // PFC pause-state changes of egress ports (EgressPort::PfcPause)
    {"pauses",
     {{"time_ps", I64, TIME, "ps", "time of a PFC pause-state change"},
      {"node", I32, KEY, "", "node whose egress port changed state"},
      {"port", I32, KEY, "", "port number at the node"},
      {"priority", I32, KEY, "", "priority class"},
      {"paused", I8, VALUE, "", "1 paused, 0 resumed"}}},
    // credit-stall state changes of egress ports, InfiniBand (EgressPort::CreditStall)
    {"stalls",
     {{"time_ps", I64, TIME, "ps", "time of a credit-stall state change"},
      {"node", I32, KEY, "", "node whose egress port changed state"},
      {"port", I32, KEY, "", "port number at the node"},
      {"vl", I32, KEY, "", "virtual lane"},
      {"stalled", I8, VALUE, "", "1 stall began (data queued, no credits), 0 ended"}}},
    // PFC watchdog actions on switch egress queues (PfcWatchdog::Action)
    {"pfc_watchdog",
     {{"time_ps", I64, TIME, "ps", "time of the action"},
      {"node", I32, KEY, "", "switch node id"},
      {"port", I32, KEY, "", "egress port number at the switch"},
      {"priority", I32, KEY, "", "priority whose queue changed"},
      {"disabled", I8, VALUE, "", "1: queue disabled (paused past PfcWatchdog::DetectionTime), 0: restored"}}},
    // packets lost, trimmed or sent again, at the port that sent them (FabricNode::Loss); lossless runs have none
    {"losses",
     {{"time_ps", I64, TIME, "ps", "time of the loss (a NIC's resend: the time it was sent again)"},
      {"node", I32, KEY, "", "node whose egress port lost, trimmed or resent the packets"},
      {"port", I32, KEY, "", "port number at the node"},
      {"cause", I8, VALUE, "", "0 tail_drop, 1 buffer_drop, 2 watchdog_drop, 3 link_down, 4 bit_error, 5 trimmed, "
                              "6 link_retransmitted, 7 retransmitted, 8 timeout (cosim::LossCause); one packet "
                              "per row, a timeout one event"}}},
};
static_assert(std::size(kEventLogs) == NUM_LOGS, "one declaration per LogIndex");
static_assert(Engine::kExchangeRecordBytes == sizeof(ExchangeRecord), "Python reads records of this size");

/// How a counter's values over the objects it is read from, and over the parts of a decomposed run, combine.
enum class Combine : uint8_t
{
    SUM = 0,
    MAX = 1,
    MIN = 2,
};

/// @return the name of combine rule @p c, as ListCounters writes it
const char*
CombineName(Combine c)
{
    static const char* const names[] = {"sum", "max", "min"}; // in Combine order
    return names[std::size_t(c)];
}

/// Where a counter is read: each reader given is applied to every object of its kind.
struct CounterSources
{
    int64_t (*fromSwitch)(const FabricSwitch&) = nullptr;                ///< per switch
    int64_t (*fromSwitchPort)(const FabricSwitch&, uint32_t port) = nullptr; ///< per switch port
    int64_t (*fromNic)(const HostNic&) = nullptr;                        ///< per NIC
    int64_t (*fromPfcWatchdog)(const PfcWatchdog&) = nullptr;            ///< per PFC watchdog (one per switch)
    int64_t (*fromPauseStorm)(const PauseStormSource&) = nullptr;        ///< per pause storm
    /// from the fault model: such a counter is reported only by runs whose fault model acted
    int64_t (*fromFaults)(const LinkFaultModel&) = nullptr;
    /// from the fast-forward controller: such a counter is reported only by runs that fast-forward
    int64_t (*fromFastForward)(const FastForwardController&) = nullptr;
    /// from the exchange between partitions: such a counter is reported only by partitioned runs
    int64_t (*fromExchange)(const PartitionExchange&) = nullptr;
};

/// One fabric-wide counter.
struct CounterDecl
{
    const char* name;        ///< as GetCounter takes it and Python stores it
    Combine combine;         ///< how its values combine
    const char* unit;        ///< what it counts ("packets", "frames", "events") or "B"
    const char* description; ///< its meaning
    CounterSources read;     ///< where it is read
};

/// The counters, in the order Python reports them.
const CounterDecl kCounters[] = {
    {"ecn_marks", Combine::SUM, "packets", "data packets ECN/FECN-marked by switches",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetEcnMarks()); }}},
    {"cnps_sent", Combine::SUM, "packets", "CNPs (or IB BECNs) sent by receivers",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetCnpsSent()); }}},
    {"cnps_received", Combine::SUM, "packets", "CNPs (or IB BECNs) received by senders",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetCnpsReceived()); }}},
    {"switch_drops", Combine::SUM, "packets", "packets switches dropped for lack of buffer",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetDrops()); }}},
    {"pause_frames_sent", Combine::SUM, "frames", "PFC XOFF frames (and refreshes) sent",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetPauseFramesSent()); }}},
    {"peak_headroom_used_bytes", Combine::MAX, "B", "largest PFC headroom use of any (port, priority)",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetMmu()->GetPeakHeadroomUsed()); }}},
    {"min_headroom_bytes", Combine::MIN, "B", "smallest PFC headroom configured on a switch port",
     {.fromSwitchPort = [](const FabricSwitch& s, uint32_t p) { return int64_t(s.GetMmu()->GetHeadroomBytes(p)); }}},
    {"acks", Combine::SUM, "packets", "ACKs received by senders",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetAcksReceived()); }}},
    {"credit_violations", Combine::SUM, "packets",
     "arrivals beyond an input lane's advertised buffer (a bug if not 0)",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetCreditViolations()); }}},
    {"peak_lane_bytes", Combine::MAX, "B", "largest input-lane occupancy of any switch (credit mode)",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetPeakLaneBytes()); }}},
    {"credit_packets_sent", Combine::SUM, "packets", "IB credit-update packets sent by switches and NICs",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetCreditPacketsSent()); },
      .fromNic = [](const HostNic& n) { return int64_t(n.GetCreditPacketsSent()); }}},
    {"retransmitted_packets", Combine::SUM, "packets",
     "data packets senders resent after a go-back-N rewind (NAK or timeout)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetRetransmittedPackets()); }}},
    {"retransmitted_bytes", Combine::SUM, "B",
     "payload of the data packets senders resent (go-back-N rewinds, UEC selective retransmission)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetRetransmittedBytes()); }}},
    {"uec_loss_detections", Combine::SUM, "events",
     "UEC SACKs that declared packets sent well before theirs lost (HostNic::UecReorderWindow)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetReorderLosses()); }}},
    {"uec_sacks_sent", Combine::SUM, "packets",
     "UEC SACKs receivers sent (coalesced: one per HostNic::UecAckEveryBytes, and at once when due)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetSacksSent()); }}},
    {"uec_credits_sent", Combine::SUM, "packets",
     "UEC RCCC credit packets receivers sent (HostNic::UecCongestionControl rccc or both)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetCreditsSent()); }}},
    {"trimmed_packets", Combine::SUM, "packets", "data packets switches trimmed to their header (UEC trimming)",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetTrimmedPackets()); }}},
    {"naks_sent", Combine::SUM, "packets", "go-back-N NAKs (PSN sequence errors), or UEC NACKs of trimmed "
     "packets, sent by receivers",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetNaksSent()); }}},
    {"timeouts", Combine::SUM, "events", "retransmission timeouts of senders",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetTimeouts()); }}},
    {"reordered_packets", Combine::SUM, "packets", "data packets reorder-tolerant receivers held beyond a gap",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetReorderedPackets()); }}},
    {"admission_grants", Combine::SUM, "packets", "clear-to-send grants receivers sent (receiver-driven admission)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetGrantsSent()); }}},
    {"peak_qp_inflight_bytes", Combine::MAX, "B",
     "most payload a QP had unacknowledged (tracked with a QP window)",
     {.fromNic = [](const HostNic& n) { return int64_t(n.GetPeakInflightBytes()); }}},
    {"pfc_watchdog_actions", Combine::SUM, "events", "switch egress queues the PFC watchdog disabled or restored",
     {.fromPfcWatchdog = [](const PfcWatchdog& w) { return int64_t(w.GetActions()); }}},
    {"pfc_watchdog_dropped_packets", Combine::SUM, "packets", "packets dropped at queues the PFC watchdog disabled",
     {.fromSwitch = [](const FabricSwitch& s) { return int64_t(s.GetWatchdogDrops()); }}},
    {"pause_storm_frames_sent", Combine::SUM, "frames", "PAUSE frames sent by pause-storming NICs (a fault)",
     {.fromPauseStorm = [](const PauseStormSource& s) { return int64_t(s.GetFramesSent()); }}},
    {"fault_drops", Combine::SUM, "packets", "packets lost on dead links",
     {.fromFaults = [](const LinkFaultModel& f) { return int64_t(f.GetFaultDrops()); }}},
    {"ber_drops", Combine::SUM, "packets", "packets lost to bit errors (lossy links)",
     {.fromFaults = [](const LinkFaultModel& f) { return int64_t(f.GetBerDrops()); }}},
    {"link_retransmissions", Combine::SUM, "packets", "corrupted packets resent by credit links",
     {.fromFaults = [](const LinkFaultModel& f) { return int64_t(f.GetLinkRetransmissions()); }}},
    {"llr_retries", Combine::SUM, "frames", "corrupted frames link-level retry replayed on their hop "
     "(EgressPort::LinkLevelRetry)",
     {.fromFaults = [](const LinkFaultModel& f) { return int64_t(f.GetLlrRetries()); }}},
    {"llr_replayed_frames", Combine::SUM, "frames", "frames LLR replays sent again: each corrupted frame and the "
     "frames sent after it before its NACK came back (go-back-N on the hop)",
     {.fromFaults = [](const LinkFaultModel& f) { return int64_t(f.GetLlrReplayedFrames()); }}},
    {"reroutes", Combine::SUM, "events", "switch route tables replaced after link changes",
     {.fromFaults = [](const LinkFaultModel& f) { return int64_t(f.GetReroutes()); }}},
    {"fast_forward_spans", Combine::SUM, "events", "components of steady flows fast-forwarded (limits.fast_forward)",
     {.fromFastForward = [](const FastForwardController& c) { return int64_t(c.GetSpans()); }}},
    {"fast_forward_spans_cut", Combine::SUM, "events", "fast-forwarded spans ended early by a new flow on their ports",
     {.fromFastForward = [](const FastForwardController& c) { return int64_t(c.GetSpansCut()); }}},
    {"fast_forward_flow_time_ps", Combine::SUM, "ps", "time flows spent fast-forwarded, summed over flows",
     {.fromFastForward = [](const FastForwardController& c) { return c.GetFlowTimePs(); }}},
    {"fast_forward_credited_bytes", Combine::SUM, "B", "payload credited to flows by fast-forwarded spans",
     {.fromFastForward = [](const FastForwardController& c) { return int64_t(c.GetCreditedBytes()); }}},
    {"fast_forward_skipped_packet_hops", Combine::SUM, "packets",
     "data packet-hops the credited payload stands for (counted in the port and hop counters, never simulated)",
     {.fromFastForward = [](const FastForwardController& c) { return int64_t(c.GetSkippedPacketHops()); }}},
    {"fast_forward_flows_uncredited", Combine::SUM, "events",
     "flows whose fast-forwarded span ended with packets of theirs in flight (they got no credit)",
     {.fromFastForward = [](const FastForwardController& c) { return int64_t(c.GetUncreditedFlows()); }}},
    {"fast_forward_checks", Combine::SUM, "events", "steady-state checks of the fast-forward controller (events)",
     {.fromFastForward = [](const FastForwardController& c) { return int64_t(c.GetChecks()); }}},
    {"partition_windows", Combine::MAX, "events",
     "windows of a partitioned run: its partitions met this often to exchange the packets of cut links",
     {.fromExchange = [](const PartitionExchange& x) { return int64_t(x.GetWindows()); }}},
    {"partition_exchanged_packets", Combine::SUM, "packets",
     "packets that crossed a link between two partitions (each one exchanged between windows)",
     {.fromExchange = [](const PartitionExchange& x) { return int64_t(x.GetPosted()); }}},
};

/// @return the declaration of counter @p name (throws std::invalid_argument for another name)
const CounterDecl&
FindCounter(const std::string& name)
{
    for (const CounterDecl& c : kCounters)
    {
        if (name == c.name)
        {
            return c;
        }
    }
    throw std::invalid_argument("unknown counter " + name + " (Engine::ListCounters lists them)");
}

/// @}
} // namespace

struct Engine::Impl
{
    PacketPool pool;
    FlowTable flows;
    /// slice-limit events RunUntil scheduled that fired: not part of the model, so not counted as events
    uint64_t sliceStops = 0;
    FabricBuilder builder{&pool, &flows};
    /// queue samplers: one, or one per partition of a partitioned run (each partition's ticks its own events)
    std::vector<Ptr<EgressQueueSampler>> samplers;
    Ptr<DagExecutor> dag;              ///< co-simulation graph, if one was loaded
    Ptr<DeadlockWatchdog> watchdog;    ///< flow-control deadlock detection (BuildFabric)
    std::vector<Ptr<PfcWatchdog>> pfcWatchdogs; ///< one per switch, acting only if PfcWatchdog::Enabled
    std::vector<Ptr<PauseStormSource>> pauseStorms; ///< fault: NICs sending PAUSE frames (AddPauseStorms)
    Ptr<LinkFaultModel> faults;        ///< network faults, created by the first Schedule call
    Ptr<FastForwardController> fastForward; ///< steady-state fast-forward, only when its Enabled default is set
    std::vector<int32_t> linkA, linkB; ///< the links as built (the fault model's link ids)
    std::vector<int32_t> dagSrc;       ///< FLOW op -> source host node
    std::vector<int32_t> dagDst;       ///< FLOW op -> destination host node
    std::vector<uint8_t> dagPrio;      ///< FLOW op -> priority
    std::vector<int64_t> dagBytes;     ///< FLOW op -> payload, in bytes
    std::vector<int64_t> flowOp;       ///< flow id -> DagExecutor::FlowKey of the FLOW op or sub it carries
    bool built{false};
    std::vector<int32_t> nodePartition;   ///< SetPartitions: partition per node id (empty: not partitioned)
    std::vector<uint8_t> localPartition;  ///< SetPartitions: per partition, 1 if this process simulates it
    PartitionExchange exchange;           ///< packets leaving on cut links (partitioned runs)
    int64_t lookaheadPs{std::numeric_limits<int64_t>::max()}; ///< shortest cut link delay, in ps
    std::vector<int64_t> opFlow;          ///< SetOpPartitions: per DAG op, the id of its flow (FLOW ops)
    bool dagStarted{false};               ///< partitioned: the DAG's ops without dependencies have begun
    std::string schedulerType;         ///< SetScheduler's choice, applied at BuildFabric ("" = ns-3's default)
    std::vector<uint64_t> switchBufferBytes; ///< per node id: its MMU's BufferBytes (0 = the default)
    std::vector<int64_t> switchStreams;      ///< per node id: its ECN marking stream (-1 = its node id)
    std::vector<int32_t> switchGroups;       ///< per node id: its group (-1 = none; empty: no groups)
    std::vector<uint8_t> switchRouting;      ///< per node id: its Routing code (kDefaultRouting = the default)
    std::vector<int32_t> pinSwitch, pinLeaf, pinVia; ///< SetRouteOverrides' rows
    /// Defaults changed by SetDefault, with their previous values: restored when the Engine dies, so one
    /// run's settings never leak into the next run of the same process.
    std::vector<std::pair<std::string, std::string>> overridden;
    /// The event logs, one per kEventLogs row (same index); never resized, so the trace sinks keep pointers.
    std::vector<EventLog> logs{std::begin(kEventLogs), std::end(kEventLogs)};

    /**
     * Trace sink of a queue's state change (EgressPort::PfcPause and CreditStall, PfcWatchdog::Action),
     * bound to its log and to the node (and port) it watches: appends (now, node, port, queue, state).
     */
    static void RecordQueueState(EventLog* log, uint32_t node, uint32_t port, uint8_t queue, bool on)
    {
        log->Append({Simulator::Now().GetTimeStep(), int64_t(node), int64_t(port), int64_t(queue), on ? 1 : 0});
    }

    static void RecordLoss(EventLog* log, uint32_t node, uint32_t port, uint8_t cause)
    {
        log->Append({Simulator::Now().GetTimeStep(), int64_t(node), int64_t(port), int64_t(cause)});
    }

    /// @return log @p name (throws std::invalid_argument naming the logs)
    const EventLog& Log(const std::string& name) const
    {
        std::string names;
        for (const EventLog& log : logs)
        {
            if (name == log.Decl().name)
            {
                return log;
            }
            names += (names.empty() ? "" : ", ") + std::string(log.Decl().name);
        }
        throw std::invalid_argument("no event log " + name + " (the logs are " + names + ")");
    }

    /// @return counter @p c over every object it is read from, combined by its rule (0 if none holds it)
    int64_t ReadCounter(const CounterDecl& c) const;

    /// @return true if the run reports counter @p c: fault-model counters only once the fault model acted
    bool Reports(const CounterDecl& c) const
    {
        return (!c.read.fromFaults || (faults && faults->GetNActions() > 0)) &&
               (!c.read.fromFastForward || fastForward) && (!c.read.fromExchange || Partitioned());
    }

    /// Call @p f(nodeId, portIndex, port) for every egress port, ordered by node then port.
    template <typename F>
    void ForEachPort(F f) const
    {
        for (uint32_t id = 0; id < builder.GetNNodes(); ++id)
        {
            Ptr<FabricNode> n = builder.GetNode(id);
            for (uint32_t p = 0; p < n->GetNPorts(); ++p)
            {
                f(id, p, n->GetPort(p));
            }
        }
    }

    void OnFlowFinish(uint64_t flowId)
    {
        if (dag)
        {
            dag->FlowFinished(uint64_t(flowOp[flowId]));
        }
        else if (flows.completed == flows.Size())
        {
            Simulator::Stop();
        }
    }

    /// DagExecutor flow starter: the FLOW op or FLOW sub of flow key @p key is ready, so it becomes a flow
    /// starting now (a sub: its template's hosts and bytes, its BLOCK op's priority).
    void StartDagFlow(uint64_t key)
    {
        const int64_t nowPs = Simulator::Now().GetTimeStep();
        const uint64_t op = DagExecutor::KeyOp(key);
        int32_t src = dagSrc[op];
        int32_t dst = dagDst[op];
        int64_t bytes = dagBytes[op];
        if (DagExecutor::KeySub(key) >= 0)
        {
            dag->SubFlow(key, src, dst, bytes);
        }
        uint64_t id;
        if (opFlow.empty())
        {
            id = flows.Add(uint32_t(src), uint32_t(dst), uint64_t(bytes), nowPs, dagPrio[op]);
            flowOp.push_back(int64_t(key));
        }
        else
        {
            NS_ASSERT_MSG(DagExecutor::KeySub(key) < 0, "a partitioned run has no BLOCK op flows");
            id = uint64_t(opFlow[op]);
            flows.Set(id, uint32_t(src), uint32_t(dst), uint64_t(bytes), nowPs, dagPrio[op]);
            flowOp[id] = int64_t(key);
        }
        builder.GetHost(src)->AddFlow(id);
    }

    /// @return true if a flow may go from node @p src to node @p dst: two distinct hosts of the fabric
    bool HostPair(int32_t src, int32_t dst) const
    {
        const int64_t nNodes = builder.GetNNodes();
        return src >= 0 && dst >= 0 && src < nNodes && dst < nNodes && builder.GetHost(src) &&
               builder.GetHost(dst) && src != dst;
    }

    /// @return true for a partitioned run (SetPartitions)
    bool Partitioned() const
    {
        return !nodePartition.empty();
    }

    /// Partitioned: cut every link between two partitions (its ports post to the exchange) and note the
    /// shortest delay of a cut link.
    void CutLinks()
    {
        ForEachPort([this](uint32_t id, uint32_t, Ptr<EgressPort> port) {
            const uint32_t peer = port->GetPeer()->GetNodeId();
            if (nodePartition[id] != nodePartition[peer])
            {
                port->SetExchange(&exchange);
                exchange.AddWire(port->GetPeer(), port->GetPeerPort());
                TimeValue delay;
                port->GetAttribute("PropagationDelay", delay);
                lookaheadPs = std::min(lookaheadPs, delay.Get().GetTimeStep());
            }
        });
    }

    /// @return true when the run's work is done: every DAG op, or every flow without a DAG
    bool AllDone() const
    {
        return dag ? dag->Done() : flows.completed == flows.Size();
    }
};

Engine::Engine(uint64_t seed)
{
    if (g_engineAlive)
    {
        throw std::runtime_error("only one cosim Engine may exist at a time; delete the previous one");
    }
    EnsurePicosecondResolution();
    // The simulator made after this Destroy: ns-3's default core, event for event, with less work per event.
    Config::SetGlobal("SimulatorImplementationType", StringValue("ns3::LeanSimulatorImpl"));
    Simulator::Destroy();
    RngSeedManager::SetSeed(static_cast<uint32_t>(seed % 4294967295ull) + 1);
    RngSeedManager::SetRun(1);
    m_impl = std::make_unique<Impl>();
    m_impl->flows.onFinish = MakeCallback(&Impl::OnFlowFinish, m_impl.get());
    g_engineAlive = true;
}

Engine::~Engine()
{
    Simulator::Destroy();
    for (const Ptr<EgressQueueSampler>& s : m_impl->samplers)
    {
        s->Dispose();
    }
    if (m_impl->watchdog)
    {
        m_impl->watchdog->Dispose();
    }
    for (const Ptr<PfcWatchdog>& w : m_impl->pfcWatchdogs)
    {
        w->Dispose();
    }
    for (const Ptr<PauseStormSource>& s : m_impl->pauseStorms)
    {
        s->Dispose();
    }
    if (m_impl->faults)
    {
        m_impl->faults->Dispose();
    }
    if (m_impl->fastForward)
    {
        m_impl->fastForward->Dispose();
    }
    m_impl->builder.Dispose();
    for (auto it = m_impl->overridden.rbegin(); it != m_impl->overridden.rend(); ++it)
    {
        Config::SetDefaultFailSafe(it->first, StringValue(it->second));
    }
    m_impl.reset();
    g_engineAlive = false;
}

std::string
Engine::Ns3Version()
{
    return COSIM_NS3_VERSION;
}

std::string
Engine::SharedCodes()
{
    std::string out;
    auto line = [&out](const std::string& key, long value) { out += key + "=" + std::to_string(value) + "\n"; };
    line("op_kind.FLOW", long(DagOpKind::FLOW));
    line("op_kind.COMPUTE", long(DagOpKind::COMPUTE));
    line("op_kind.NVLINK", long(DagOpKind::NVLINK));
    line("op_kind.NOP", long(DagOpKind::NOP));
    line("op_kind.BLOCK", long(DagOpKind::BLOCK));
    line("comm_class.NCCL", long(CommClass::NCCL));
    line("comm_class.EXPERT", long(CommClass::EXPERT));
    line("comm_class.SM_FREE", long(CommClass::SM_FREE));
    static const char* const lossNames[] = {"TAIL_DROP",          "BUFFER_DROP",   "WATCHDOG_DROP",
                                            "LINK_DOWN",          "BIT_ERROR",     "TRIMMED",
                                            "LINK_RETRANSMITTED", "RETRANSMITTED", "TIMEOUT"};
    static_assert(std::size(lossNames) == kLossCauses, "one name per LossCause");
    for (uint32_t c = 0; c < kLossCauses; ++c)
    {
        line(std::string("loss_cause.") + lossNames[c], long(c));
    }
    line("node_kind.HOST", long(NodeKind::HOST));
    line("node_kind.SWITCH", long(NodeKind::SWITCH));
    line("run_status.TIME_REACHED", long(RunStatus::TIME_REACHED));
    line("run_status.ALL_FLOWS_DONE", long(RunStatus::ALL_FLOWS_DONE));
    line("run_status.NO_EVENTS", long(RunStatus::NO_EVENTS));
    line("run_status.DEADLOCK", long(RunStatus::DEADLOCK));
    line("run_status.COLLECTIVE_TIMEOUT", long(RunStatus::COLLECTIVE_TIMEOUT));
    line("priorities", long(kNumPriorities));
    line("default.mtu_bytes", long(kDefaultMtuBytes));
    line("default.header_bytes", long(kDefaultHeaderBytes));
    return out;
}

/// @return the type among @p tid and its parents that declares attribute @p name (which @p tid has)
TypeId
DeclaringType(TypeId tid, const std::string& name)
{
    for (;; tid = tid.GetParent())
    {
        for (std::size_t i = 0; i < tid.GetAttributeN(); ++i)
        {
            if (tid.GetAttribute(i).name == name)
            {
                return tid;
            }
        }
        NS_ASSERT_MSG(tid != tid.GetParent(), "attribute " << name << " is declared by no type");
    }
}

void
Engine::SetDefault(const std::string& path, const std::string& value)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetDefault must come before BuildFabric");
    }
    const std::string previous = GetDefault(path);
    const auto sep = path.rfind("::");
    const TypeId tid = TypeId::LookupByName(path.substr(0, sep));
    const std::string name = path.substr(sep + 2);
    TypeId::AttributeInformation info;
    tid.LookupAttributeByName(name, &info);
    if (!WellFormed(info.checker->GetValueTypeName(), value))
    {
        throw std::invalid_argument("'" + value + "' is not a valid " + info.checker->GetValueTypeName() +
                                    " for " + path);
    }
    if (const std::string problem = ValueProblem(path, info, value); !problem.empty())
    {
        throw std::invalid_argument(problem);
    }
    if (const TypeId owner = DeclaringType(tid, name); owner != tid)
    {
        // ns-3 sets a default only on the type that declares the attribute, which all its subtypes share
        const std::string declared = owner.GetName().substr(owner.GetName().rfind(':') + 1);
        throw std::invalid_argument(path + " is inherited: set " + declared + "::" + name + " (it applies to every " +
                                    declared + ")");
    }
    if (!Config::SetDefaultFailSafe(path, StringValue(value)))
    {
        throw std::invalid_argument("cannot set " + path + " to '" + value +
                                    "' (invalid value)");
    }
    m_impl->overridden.emplace_back(path, previous);
}

void
Engine::SetScheduler(const std::string& typeName)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetScheduler must come before BuildFabric");
    }
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(typeName, &tid) || !tid.IsChildOf(Scheduler::GetTypeId()) ||
        !tid.HasConstructor())
    {
        throw std::invalid_argument("'" + typeName + "' is not an ns-3 scheduler type (e.g. ns3::TimingWheelScheduler)");
    }
    m_impl->schedulerType = typeName;
}

std::string
Engine::ListAttributes()
{
    std::vector<std::string> lines;
    for (uint16_t t = 0; t < TypeId::GetRegisteredN(); ++t)
    {
        const TypeId tid = TypeId::GetRegistered(t);
        if (tid.GetGroupName() != "Cosim")
        {
            continue;
        }
        for (std::size_t a = 0; a < tid.GetAttributeN(); ++a)
        {
            const TypeId::AttributeInformation info = tid.GetAttribute(a);
            std::string help = info.help;
            std::replace(help.begin(), help.end(), '\t', ' '); // tabs and newlines separate the fields
            std::replace(help.begin(), help.end(), '\n', ' ');
            const std::string accepted = Accepted(info);
            lines.push_back(ShortName(tid.GetName()) + "::" + info.name + "\t" + info.checker->GetValueTypeName() +
                            "\t" + info.initialValue->SerializeToString(info.checker) + "\t" + accepted + "\t" +
                            help + "\n");
        }
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string& line : lines)
    {
        out += line;
    }
    return out;
}

std::string
Engine::GetDefault(const std::string& path) const
{
    const auto sep = path.rfind("::");
    if (sep == std::string::npos)
    {
        throw std::invalid_argument("attribute path must be ns3::Type::Attribute, got " + path);
    }
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(path.substr(0, sep), &tid))
    {
        throw std::invalid_argument("unknown type in " + path);
    }
    TypeId::AttributeInformation info;
    if (!tid.LookupAttributeByName(path.substr(sep + 2), &info))
    {
        throw std::invalid_argument("unknown attribute " + path);
    }
    return info.initialValue->SerializeToString(info.checker);
}

void
Engine::SetSwitchBufferBytes(const uint64_t* bufferBytes, uint64_t nNodes)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetSwitchBufferBytes must come before BuildFabric");
    }
    m_impl->switchBufferBytes.assign(bufferBytes, bufferBytes + nNodes);
}

void
Engine::SetSwitchStreams(const int64_t* stream, uint64_t nNodes)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetSwitchStreams must come before BuildFabric");
    }
    m_impl->switchStreams.assign(stream, stream + nNodes);
}

void
Engine::SetSwitchGroups(const int32_t* group, uint64_t nNodes)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetSwitchGroups must come before BuildFabric");
    }
    m_impl->switchGroups.assign(group, group + nNodes);
}

void
Engine::SetSwitchRouting(const uint8_t* routing, uint64_t nNodes)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetSwitchRouting must come before BuildFabric");
    }
    for (uint64_t id = 0; id < nNodes; ++id)
    {
        if (routing[id] != kDefaultRouting && routing[id] > uint8_t(FabricSwitch::Routing::STRIPE))
        {
            throw std::invalid_argument("SetSwitchRouting: node " + std::to_string(id) + " has routing code " +
                                        std::to_string(routing[id]));
        }
    }
    m_impl->switchRouting.assign(routing, routing + nNodes);
}

void
Engine::SetRouteOverrides(const int32_t* switchId, const int32_t* toLeaf, const int32_t* via, uint64_t n)
{
    if (m_impl->built)
    {
        throw std::logic_error("SetRouteOverrides must come before BuildFabric");
    }
    m_impl->pinSwitch.assign(switchId, switchId + n);
    m_impl->pinLeaf.assign(toLeaf, toLeaf + n);
    m_impl->pinVia.assign(via, via + n);
}

void
Engine::BuildFabric(const uint8_t* kind,
                    uint64_t nNodes,
                    const int32_t* linkA,
                    const int32_t* linkB,
                    const double* rateBps,
                    const int64_t* delayPs,
                    uint64_t nLinks)
{
    if (m_impl->built)
    {
        throw std::logic_error("BuildFabric may be called once per Engine");
    }
    for (uint64_t i = 0; i < nLinks; ++i)
    {
        if (linkA[i] < 0 || linkB[i] < 0 || uint64_t(linkA[i]) >= nNodes || uint64_t(linkB[i]) >= nNodes ||
            linkA[i] == linkB[i])
        {
            throw std::invalid_argument("link " + std::to_string(i) + " joins invalid nodes");
        }
        if (!(rateBps[i] >= kMinRateBps && rateBps[i] <= kMaxRateBps))
        {
            throw std::invalid_argument("link " + std::to_string(i) + " rate " + std::to_string(rateBps[i]) +
                                        " bit/s is outside 1 Mbit/s..1 Pbit/s");
        }
        if (delayPs[i] < 0 || delayPs[i] > kMaxLinkDelayPs)
        {
            throw std::invalid_argument("link " + std::to_string(i) + " delay " + std::to_string(delayPs[i]) +
                                        " ps is outside 0..1 s");
        }
    }
    if (!m_impl->schedulerType.empty())
    {
        Simulator::SetScheduler(ObjectFactory(m_impl->schedulerType));
    }
    m_impl->builder.AddNodes(kind, nNodes);
    for (uint32_t id = 0; id < std::min<uint64_t>(nNodes, m_impl->switchBufferBytes.size()); ++id)
    {
        if (m_impl->switchBufferBytes[id] != 0 && m_impl->builder.GetSwitch(id))
        {
            m_impl->builder.GetSwitch(id)->GetMmu()->SetAttribute(
                "BufferBytes", UintegerValue(m_impl->switchBufferBytes[id]));
        }
    }
    for (uint32_t id = 0; id < std::min<uint64_t>(nNodes, m_impl->switchRouting.size()); ++id)
    {
        if (m_impl->switchRouting[id] != kDefaultRouting && m_impl->builder.GetSwitch(id))
        {
            m_impl->builder.GetSwitch(id)->SetAttribute(
                "Routing", EnumValue(FabricSwitch::Routing(m_impl->switchRouting[id])));
        }
    }
    m_impl->builder.AddLinks(linkA, linkB, rateBps, delayPs, nLinks);
    m_impl->linkA.assign(linkA, linkA + nLinks);
    m_impl->linkB.assign(linkB, linkB + nLinks);
    if (!m_impl->switchGroups.empty())
    {
        if (m_impl->switchGroups.size() != nNodes)
        {
            throw std::invalid_argument("SetSwitchGroups has " + std::to_string(m_impl->switchGroups.size()) +
                                        " nodes, the fabric " + std::to_string(nNodes));
        }
        m_impl->builder.SetGroups(m_impl->switchGroups.data(), nNodes);
    }
    const std::string badRoute = m_impl->builder.SetRouteOverrides(
        m_impl->pinSwitch.data(), m_impl->pinLeaf.data(), m_impl->pinVia.data(), m_impl->pinSwitch.size());
    if (!badRoute.empty())
    {
        throw std::invalid_argument(badRoute);
    }
    m_impl->builder.ComputeRoutes();
    const std::string problem = m_impl->builder.SetupSwitches();
    if (!problem.empty())
    {
        throw std::invalid_argument(problem);
    }
    for (uint32_t id = 0; id < std::min<uint64_t>(nNodes, m_impl->switchStreams.size()); ++id)
    {
        if (m_impl->switchStreams[id] >= 0 && m_impl->builder.GetSwitch(id))
        {
            m_impl->builder.GetSwitch(id)->AssignStreams(m_impl->switchStreams[id]);
        }
    }
    m_impl->ForEachPort([this](uint32_t id, uint32_t p, Ptr<EgressPort> port) {
        port->TraceConnectWithoutContext(
            "PfcPause", MakeBoundCallback(&Impl::RecordQueueState, &m_impl->logs[PAUSES_LOG], id, p));
        port->TraceConnectWithoutContext(
            "CreditStall", MakeBoundCallback(&Impl::RecordQueueState, &m_impl->logs[STALLS_LOG], id, p));
    });
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        m_impl->builder.GetNode(id)->TraceConnectWithoutContext(
            "Loss", MakeBoundCallback(&Impl::RecordLoss, &m_impl->logs[LOSSES_LOG], id));
    }
    m_impl->watchdog = CreateObject<DeadlockWatchdog>();
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        if (m_impl->builder.GetSwitch(id))
        {
            m_impl->watchdog->AddSwitch(m_impl->builder.GetNode(id));
        }
    }
    if (m_impl->Partitioned())
    {
        // a partition sees only its own waits: a cycle across partitions would be found in one process
        // and not in several, so partitioned runs go without the watchdog
        m_impl->CutLinks();
    }
    else
    {
        m_impl->watchdog->Start();
    }
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        if (!m_impl->builder.GetSwitch(id))
        {
            continue;
        }
        Ptr<PfcWatchdog> w = CreateObject<PfcWatchdog>();
        if (!w->IsEnabled())
        {
            break; // the Enabled default holds for every switch: none is watched
        }
        w->TraceConnectWithoutContext(
            "Action", MakeBoundCallback(&Impl::RecordQueueState, &m_impl->logs[PFC_WATCHDOG_LOG], id));
        w->Watch(m_impl->builder.GetNode(id));
        m_impl->pfcWatchdogs.push_back(w);
    }
    Ptr<FastForwardController> ff = CreateObject<FastForwardController>();
    if (ff->IsEnabled())
    {
        std::vector<Ptr<FabricNode>> nodes;
        for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
        {
            nodes.push_back(m_impl->builder.GetNode(id));
        }
        ff->Start(&m_impl->flows, std::move(nodes));
        m_impl->fastForward = ff;
    }
    m_impl->built = true;
}

void
Engine::AddFlows(const int32_t* src,
                 const int32_t* dst,
                 const int64_t* sizeBytes,
                 const int64_t* startPs,
                 const uint8_t* priority,
                 uint64_t n)
{
    if (!m_impl->built || m_impl->Partitioned())
    {
        throw std::logic_error("AddFlows needs BuildFabric first, and an unpartitioned run (partitions run a DAG)");
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        if (!m_impl->HostPair(src[i], dst[i]) || sizeBytes[i] < 0 || startPs[i] < 0 || priority[i] >= kNumPriorities)
        {
            throw std::invalid_argument("flow " + std::to_string(i) +
                                        " has invalid endpoints, size, start or priority");
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        const uint64_t id = m_impl->flows.Add(src[i], dst[i], sizeBytes[i], startPs[i], priority[i]);
        m_impl->builder.GetHost(src[i])->AddFlow(id);
    }
}

void
Engine::SampleSwitchQueues(int64_t intervalPs)
{
    if (!m_impl->built || !m_impl->samplers.empty())
    {
        throw std::logic_error("SampleSwitchQueues needs BuildFabric first and may be called once");
    }
    if (intervalPs < 1 || double(intervalPs) > kMaxAttributeTimeS * 1e12)
    {
        throw std::invalid_argument("queue sample interval " + std::to_string(intervalPs) +
                                    " ps is outside 1 ps..1e5 s");
    }
    const size_t nSamplers = m_impl->Partitioned() ? m_impl->localPartition.size() : 1;
    for (size_t i = 0; i < nSamplers; ++i)
    {
        m_impl->samplers.push_back(CreateObject<EgressQueueSampler>());
        m_impl->samplers.back()->SetAttribute("Interval", TimeValue(PicoSeconds(intervalPs)));
    }
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        if (m_impl->builder.GetHost(id))
        {
            continue;
        }
        Ptr<FabricNode> node = m_impl->builder.GetNode(id);
        EgressQueueSampler& sampler = *m_impl->samplers[m_impl->Partitioned() ? m_impl->nodePartition[id] : 0];
        for (uint32_t p = 0; p < node->GetNPorts(); ++p)
        {
            sampler.Watch(id, p, node->GetPort(p));
        }
    }
    for (const Ptr<EgressQueueSampler>& s : m_impl->samplers)
    {
        s->Start();
    }
}

void
Engine::LoadDag(const uint8_t* kind,
                const int32_t* gpu,
                const int32_t* srcNode,
                const int32_t* dstNode,
                const int64_t* bytes,
                const int64_t* durationPs,
                const uint8_t* priority,
                const int64_t* depPtr,
                const int64_t* depIdx,
                uint64_t n)
{
    if (!m_impl->built || m_impl->dag || m_impl->flows.Size() != 0)
    {
        throw std::logic_error("LoadDag needs BuildFabric first, once, and no AddFlows");
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        if (kind[i] != uint8_t(DagOpKind::FLOW))
        {
            continue;
        }
        if (!m_impl->HostPair(srcNode[i], dstNode[i]) || priority[i] >= kNumPriorities)
        {
            throw std::invalid_argument("FLOW op " + std::to_string(i) +
                                        " has invalid host endpoints or priority");
        }
    }
    Ptr<DagExecutor> dag = CreateObject<DagExecutor>();
    const std::string problem = dag->Load(kind, gpu, bytes, durationPs, depPtr, depIdx, n);
    if (!problem.empty())
    {
        throw std::invalid_argument("DAG: " + problem);
    }
    m_impl->dagSrc.assign(srcNode, srcNode + n);
    m_impl->dagDst.assign(dstNode, dstNode + n);
    m_impl->dagBytes.assign(bytes, bytes + n);
    m_impl->dagPrio.assign(priority, priority + n);
    dag->SetFlowStarter(MakeCallback(&Impl::StartDagFlow, m_impl.get()));
    m_impl->dag = dag;
    if (m_impl->Partitioned())
    {
        return; // the windows check completion; SetOpPartitions begins the DAG
    }
    dag->SetOnDone(MakeCallback(static_cast<void (*)()>(&Simulator::Stop)));
    Simulator::ScheduleNow(&DagExecutor::Start, dag);
}

void
Engine::SetCollectives(const int64_t* startOp, const int64_t* endOp, uint64_t n)
{
    if (!m_impl->dag || m_impl->dag->Finished() != 0 || Simulator::Now().IsStrictlyPositive())
    {
        throw std::logic_error("SetCollectives needs LoadDag first and comes before RunUntil");
    }
    const std::string problem = m_impl->dag->SetCollectives(startOp, endOp, n);
    if (!problem.empty())
    {
        throw std::invalid_argument("DAG: " + problem);
    }
}

void
Engine::SetCommClasses(const uint8_t* commClass, uint64_t n)
{
    if (!m_impl->dag || m_impl->dag->Finished() != 0 || Simulator::Now().IsStrictlyPositive())
    {
        throw std::logic_error("SetCommClasses needs LoadDag first and comes before RunUntil");
    }
    const std::string problem = m_impl->dag->SetCommClasses(commClass, n);
    if (!problem.empty())
    {
        throw std::invalid_argument("DAG: " + problem);
    }
}

void
Engine::SetBlocks(const int32_t* blockTmpl,
                  uint64_t n,
                  const int64_t* tmplPtr,
                  uint64_t nTemplates,
                  const uint8_t* subKind,
                  const int32_t* subGpu,
                  const int32_t* subDst,
                  const int64_t* subBytes,
                  const int64_t* subDurationPs,
                  const int64_t* subDepPtr,
                  const int64_t* subDepIdx,
                  uint64_t nSubs)
{
    if (!m_impl->dag || m_impl->dag->Finished() != 0 || m_impl->dagStarted || Simulator::Now().IsStrictlyPositive())
    {
        throw std::logic_error("SetBlocks needs LoadDag first and comes before running");
    }
    bool flows = false;
    for (uint64_t g = 0; g < nSubs; ++g)
    {
        if (subKind[g] != uint8_t(DagOpKind::FLOW))
        {
            continue;
        }
        flows = true;
        if (!m_impl->HostPair(subGpu[g], subDst[g]))
        {
            throw std::invalid_argument("block sub " + std::to_string(g) + " is a FLOW with invalid host endpoints");
        }
    }
    if (flows && m_impl->Partitioned())
    {
        throw std::invalid_argument("a partitioned run takes no BLOCK ops with FLOW subs (materialize them)");
    }
    for (uint64_t i = 0; flows && i < n; ++i)
    {
        if (blockTmpl[i] >= 0 && m_impl->dagPrio[i] >= kNumPriorities)
        {
            throw std::invalid_argument("BLOCK op " + std::to_string(i) + " has an invalid priority for its flows");
        }
    }
    const std::string problem = m_impl->dag->SetBlocks(blockTmpl, n, tmplPtr, nTemplates, subKind, subGpu, subDst,
                                                       subBytes, subDurationPs, subDepPtr, subDepIdx, nSubs);
    if (!problem.empty())
    {
        throw std::invalid_argument("DAG: " + problem);
    }
}

void
Engine::CheckDagCanStart() const
{
    if (!m_impl->dag)
    {
        return;
    }
    if (const std::string problem = m_impl->dag->StartProblem(); !problem.empty())
    {
        throw std::invalid_argument("DAG: " + problem);
    }
}

int64_t
Engine::FailedCollective() const
{
    return m_impl->dag ? m_impl->dag->GetFailedCollective() : -1;
}

int64_t
Engine::FailedCollectiveAtPs() const
{
    return m_impl->dag ? m_impl->dag->GetFailedAtPs() : -1;
}

void
Engine::AddPauseStorms(const int32_t* host, const uint8_t* priority, const int64_t* startPs,
                       const int64_t* durationPs, uint64_t n)
{
    if (!m_impl->built)
    {
        throw std::logic_error("AddPauseStorms needs BuildFabric first");
    }
    const uint32_t nNodes = m_impl->builder.GetNNodes();
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    for (uint64_t i = 0; i < n; ++i)
    {
        const std::string which = "pause storm " + std::to_string(i);
        if (host[i] < 0 || uint32_t(host[i]) >= nNodes || !m_impl->builder.GetHost(host[i]))
        {
            throw std::invalid_argument(which + ": node " + std::to_string(host[i]) + " is not a host NIC");
        }
        if (priority[i] >= kNumPriorities || startPs[i] < nowPs || durationPs[i] <= 0)
        {
            throw std::invalid_argument(which + " has a priority out of range, a start in the past or a "
                                        "duration that is not positive");
        }
        if (m_impl->builder.GetHost(host[i])->GetPort(0)->GetFlowControl() != EgressPort::FlowControl::PFC)
        {
            throw std::invalid_argument(which + ": a pause storm needs PFC links (RoCE); InfiniBand credit "
                                        "links have no PAUSE frames");
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        Ptr<PauseStormSource> storm = CreateObject<PauseStormSource>();
        storm->Start(m_impl->builder.GetHost(host[i])->GetPort(0), &m_impl->pool, uint32_t(host[i]), priority[i],
                     startPs[i], durationPs[i]);
        m_impl->pauseStorms.push_back(storm);
    }
}

uint64_t
Engine::DagOpsFinished() const
{
    return m_impl->dag ? m_impl->dag->Finished() : 0;
}

uint64_t
Engine::DagSubsFinished() const
{
    return m_impl->dag ? m_impl->dag->SubsFinished() : 0;
}

void
Engine::GetDagOpTimes(int64_t* startPs, int64_t* finishPs) const
{
    if (m_impl->dag)
    {
        std::copy(m_impl->dag->StartPs().begin(), m_impl->dag->StartPs().end(), startPs);
        std::copy(m_impl->dag->FinishPs().begin(), m_impl->dag->FinishPs().end(), finishPs);
    }
}

void
Engine::GetFlowOps(int64_t* out) const
{
    const auto& keys = m_impl->flowOp;
    for (uint64_t i = 0; i < m_impl->flows.Size(); ++i)
    {
        out[i] = i < keys.size() && keys[i] >= 0 ? int64_t(DagExecutor::KeyOp(uint64_t(keys[i]))) : -1;
    }
}

void
Engine::GetFlowSubs(int32_t* out) const
{
    const auto& keys = m_impl->flowOp;
    for (uint64_t i = 0; i < m_impl->flows.Size(); ++i)
    {
        out[i] = i < keys.size() && keys[i] >= 0 ? int32_t(DagExecutor::KeySub(uint64_t(keys[i]))) : -1;
    }
}

void
Engine::GetFlowStartPs(int64_t* out) const
{
    std::copy(m_impl->flows.startPs.begin(), m_impl->flows.startPs.end(), out);
}

int
Engine::RunUntil(int64_t stopPs)
{
    if (m_impl->Partitioned())
    {
        throw std::logic_error("a partitioned run advances by RunWindow or RunPartitions, not RunUntil");
    }
    CheckDagCanStart();
    const auto deadlocked = [this] { return m_impl->watchdog && m_impl->watchdog->Deadlocked(); };
    const auto failed = [this] { return m_impl->dag && m_impl->dag->Failed(); };
    if (failed())
    {
        return static_cast<int>(RunStatus::COLLECTIVE_TIMEOUT);
    }
    if (deadlocked())
    {
        return static_cast<int>(RunStatus::DEADLOCK);
    }
    if (m_impl->AllDone())
    {
        return static_cast<int>(RunStatus::ALL_FLOWS_DONE);
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    if (stopPs <= nowPs)
    {
        return static_cast<int>(RunStatus::TIME_REACHED);
    }
    bool limitReached = false;
    EventId stop = Simulator::Schedule(TimeStep(stopPs - nowPs), &StopAtLimit, &limitReached);
    Simulator::Run();
    Simulator::Cancel(stop);
    m_impl->sliceStops += limitReached ? 1 : 0;
    if (failed())
    {
        return static_cast<int>(RunStatus::COLLECTIVE_TIMEOUT);
    }
    if (deadlocked())
    {
        return static_cast<int>(RunStatus::DEADLOCK);
    }
    if (m_impl->AllDone())
    {
        return static_cast<int>(RunStatus::ALL_FLOWS_DONE);
    }
    // Run() returns for three reasons: our limit, completion (above), or an empty event queue.
    return static_cast<int>(limitReached ? RunStatus::TIME_REACHED : RunStatus::NO_EVENTS);
}

void
Engine::SetPartitions(const int32_t* partition, uint64_t nNodes, const uint8_t* local, uint32_t nPartitions)
{
    if (m_impl->built || m_impl->Partitioned())
    {
        throw std::logic_error("SetPartitions comes once, before BuildFabric");
    }
    if (nPartitions < 1 || nPartitions > 1u << 16)
    {
        throw std::invalid_argument("a partitioned run has 1..65536 partitions, not " + std::to_string(nPartitions));
    }
    for (uint64_t i = 0; i < nNodes; ++i)
    {
        if (partition[i] < 0 || uint32_t(partition[i]) >= nPartitions)
        {
            throw std::invalid_argument("node " + std::to_string(i) + " is in partition " +
                                        std::to_string(partition[i]) + ", outside 0.." +
                                        std::to_string(nPartitions - 1));
        }
    }
    m_impl->nodePartition.assign(partition, partition + nNodes);
    m_impl->localPartition.assign(local, local + nPartitions);
}

void
Engine::SetOpPartitions(const int32_t* partition, const int64_t* flowId, uint64_t n, uint64_t nFlows)
{
    if (!m_impl->Partitioned() || !m_impl->dag || m_impl->dagStarted)
    {
        throw std::logic_error("SetOpPartitions needs SetPartitions and LoadDag first, and comes before running");
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        if (partition[i] < 0 || uint64_t(partition[i]) >= m_impl->localPartition.size() ||
            !m_impl->localPartition[partition[i]])
        {
            throw std::invalid_argument("DAG op " + std::to_string(i) + " is in partition " +
                                        std::to_string(partition[i]) + ", which this process does not simulate");
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        const bool flow = DagOpKind(m_impl->dag->Kind(i)) == DagOpKind::FLOW;
        if (flow != (flowId[i] >= 0) || (flow && uint64_t(flowId[i]) >= nFlows))
        {
            throw std::invalid_argument("DAG op " + std::to_string(i) + " has flow id " + std::to_string(flowId[i]) +
                                        ": FLOW ops need one below " + std::to_string(nFlows) + ", others -1");
        }
    }
    const std::string problem = m_impl->dag->SetLaunchGroups(partition, n);
    if (!problem.empty())
    {
        throw std::invalid_argument("DAG: " + problem);
    }
    CheckDagCanStart();
    m_impl->opFlow.assign(flowId, flowId + n);
    m_impl->flows.Resize(nFlows);
    m_impl->flowOp.assign(nFlows, -1);
    m_impl->dagStarted = true;
    m_impl->dag->Start();
}

int64_t
Engine::LookaheadPs() const
{
    return m_impl->lookaheadPs;
}

int64_t
Engine::NextEventPs() const
{
    const TimingWheelScheduler* wheel = TimingWheelScheduler::Current();
    if (wheel == nullptr)
    {
        throw std::logic_error("NextEventPs needs the ns3::TimingWheelScheduler (SetScheduler)");
    }
    return wheel->IsEmpty() ? std::numeric_limits<int64_t>::max() : int64_t(wheel->PeekNext().key.m_ts);
}

int
Engine::RunWindow(int64_t endPs)
{
    if (!m_impl->Partitioned() || !m_impl->built || (m_impl->dag && !m_impl->dagStarted))
    {
        throw std::logic_error("RunWindow needs SetPartitions, BuildFabric, and LoadDag with SetOpPartitions first");
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    if (endPs < nowPs)
    {
        throw std::invalid_argument("window end " + std::to_string(endPs) + " ps is before now, " +
                                    std::to_string(nowPs) + " ps");
    }
    bool reached = false;
    EventId stop = Simulator::Schedule(TimeStep(endPs - nowPs), &StopAtLimit, &reached);
    Simulator::Run();
    if (reached)
    {
        m_impl->exchange.CountWindow();
    }
    else
    {
        Simulator::Remove(stop);
    }
    if (m_impl->dag && m_impl->dag->Failed())
    {
        return static_cast<int>(RunStatus::COLLECTIVE_TIMEOUT);
    }
    return static_cast<int>(RunStatus::TIME_REACHED);
}

uint64_t
Engine::NumOutgoing() const
{
    return m_impl->exchange.Pending();
}

void
Engine::TakeOutgoing(uint8_t* out)
{
    m_impl->exchange.Take(reinterpret_cast<ExchangeRecord*>(out));
}

void
Engine::InjectIncoming(uint8_t* records, uint64_t n)
{
    if (!m_impl->Partitioned() || !m_impl->built)
    {
        throw std::logic_error("InjectIncoming needs SetPartitions and BuildFabric first");
    }
    const std::string problem =
        m_impl->exchange.Inject(reinterpret_cast<ExchangeRecord*>(records), n, &m_impl->pool);
    if (!problem.empty())
    {
        throw std::invalid_argument(problem);
    }
}

bool
Engine::LocalDone() const
{
    return m_impl->AllDone();
}

int
Engine::RunPartitions(int64_t untilPs, int64_t limitPs)
{
    for (uint8_t local : m_impl->localPartition)
    {
        if (!local)
        {
            throw std::logic_error("RunPartitions runs every partition in this process; some are elsewhere");
        }
    }
    if (m_impl->lookaheadPs <= 0)
    {
        throw std::invalid_argument("a link between two partitions has no delay, so no window can run ahead of it");
    }
    std::vector<ExchangeRecord> arrivals;
    while (true)
    {
        if (m_impl->AllDone())
        {
            return static_cast<int>(RunStatus::ALL_FLOWS_DONE);
        }
        const int64_t nextPs = NextEventPs();
        if (nextPs == std::numeric_limits<int64_t>::max())
        {
            return static_cast<int>(RunStatus::NO_EVENTS);
        }
        if (nextPs >= untilPs || Simulator::Now().GetTimeStep() >= limitPs)
        {
            return static_cast<int>(RunStatus::TIME_REACHED);
        }
        const int status = RunWindow(WindowEndPs(nextPs, m_impl->lookaheadPs, limitPs));
        if (status != static_cast<int>(RunStatus::TIME_REACHED))
        {
            return status;
        }
        arrivals.resize(m_impl->exchange.Pending());
        m_impl->exchange.Take(arrivals.data());
        InjectIncoming(reinterpret_cast<uint8_t*>(arrivals.data()), arrivals.size());
    }
}

int64_t
Engine::WindowEndPs(int64_t nextPs, int64_t lookaheadPs, int64_t limitPs)
{
    return lookaheadPs >= limitPs - nextPs ? limitPs : nextPs + lookaheadPs; // no cut link: lookahead is max
}

int64_t
Engine::NowPs() const
{
    return Simulator::Now().GetTimeStep();
}

uint64_t
Engine::NumFlows() const
{
    return m_impl->flows.Size();
}

uint64_t
Engine::FlowsCompleted() const
{
    return m_impl->flows.completed;
}

void
Engine::GetFlowFinishPs(int64_t* out) const
{
    std::copy(m_impl->flows.finishPs.begin(), m_impl->flows.finishPs.end(), out);
}

void
Engine::GetFlowDeliveredBytes(int64_t* out) const
{
    for (const FlowTable::Bytes& b : m_impl->flows.bytes)
    {
        *out++ = b.rcvdBytes;
    }
}

uint64_t
Engine::NumQueueSamples() const
{
    uint64_t n = 0;
    for (const Ptr<EgressQueueSampler>& s : m_impl->samplers)
    {
        n += s->GetTimesPs().size();
    }
    return n;
}

void
Engine::GetQueueSamples(int64_t* timePs, int32_t* node, int32_t* port, int64_t* bytes) const
{
    uint64_t at = 0;
    for (const Ptr<EgressQueueSampler>& s : m_impl->samplers)
    {
        std::copy(s->GetTimesPs().begin(), s->GetTimesPs().end(), timePs + at);
        std::copy(s->GetNodes().begin(), s->GetNodes().end(), node + at);
        std::copy(s->GetPorts().begin(), s->GetPorts().end(), port + at);
        std::copy(s->GetBytes().begin(), s->GetBytes().end(), bytes + at);
        at += s->GetTimesPs().size();
    }
    if (m_impl->samplers.size() > 1)
    {
        // one sampler records a tick's changes in (node, port) order: give the partitions' samples that order
        std::vector<uint64_t> order(at);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
            return std::tie(timePs[a], node[a], port[a]) < std::tie(timePs[b], node[b], port[b]);
        });
        const auto permute = [&](auto* column) {
            std::vector<std::remove_pointer_t<decltype(column)>> copy(column, column + at);
            for (uint64_t i = 0; i < at; ++i)
            {
                column[i] = copy[order[i]];
            }
        };
        permute(timePs);
        permute(node);
        permute(port);
        permute(bytes);
    }
}

uint64_t
Engine::NumPorts() const
{
    uint64_t n = 0;
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        n += m_impl->builder.GetNode(id)->GetNPorts();
    }
    return n;
}

void
Engine::GetPortStats(int32_t* node,
                     int32_t* port,
                     int32_t* peer,
                     int64_t* txBytes,
                     int64_t* txPackets,
                     int64_t* drops,
                     int64_t* peakQueueBytes) const
{
    uint64_t k = 0;
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        Ptr<FabricNode> n = m_impl->builder.GetNode(id);
        for (uint32_t p = 0; p < n->GetNPorts(); ++p, ++k)
        {
            Ptr<EgressPort> e = n->GetPort(p);
            node[k] = static_cast<int32_t>(id);
            port[k] = static_cast<int32_t>(p);
            peer[k] = static_cast<int32_t>(e->GetPeer()->GetNodeId());
            txBytes[k] = static_cast<int64_t>(e->GetTxBytes());
            txPackets[k] = static_cast<int64_t>(e->GetTxPackets());
            drops[k] = static_cast<int64_t>(e->GetDrops());
            peakQueueBytes[k] = static_cast<int64_t>(e->GetPeakQueueBytes());
        }
    }
}

void
Engine::GetPortPausedPs(int64_t* out) const
{
    uint64_t k = 0;
    m_impl->ForEachPort([&](uint32_t, uint32_t, Ptr<EgressPort> port) {
        int64_t total = 0;
        for (uint8_t prio = 0; prio < kNumPriorities; ++prio)
        {
            total += port->GetPausedPs(prio);
        }
        out[k++] = total;
    });
}

void
Engine::GetPortCreditStallPs(int64_t* out) const
{
    uint64_t k = 0;
    m_impl->ForEachPort([&](uint32_t, uint32_t, Ptr<EgressPort> port) {
        int64_t total = 0;
        for (uint8_t vl = 0; vl < kNumPriorities; ++vl)
        {
            total += port->GetCreditStallPs(vl);
        }
        out[k++] = total;
    });
}

void
Engine::GetPortRateBps(double* out) const
{
    uint64_t k = 0;
    m_impl->ForEachPort([&](uint32_t, uint32_t, Ptr<EgressPort> port) { out[k++] = double(port->GetRateBps()); });
}

uint32_t
Engine::LatencyBuckets()
{
    return kLatencyBuckets;
}

double
Engine::LatencyBucketLowPs(uint32_t b)
{
    if (b < kLatencyBucketsPerOctave)
    {
        return b;
    }
    const uint32_t octave = b / kLatencyBucketsPerOctave;
    const uint32_t sub = b % kLatencyBucketsPerOctave;
    return std::ldexp(1.0 + double(sub) / kLatencyBucketsPerOctave, int(octave));
}

void
Engine::GetLatencyHistogram(int64_t* out) const
{
    std::fill(out, out + kLatencyBuckets, 0);
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        if (Ptr<HostNic> nic = m_impl->builder.GetHost(id))
        {
            const auto& h = nic->GetLatencyHistogram();
            for (uint32_t b = 0; b < kLatencyBuckets; ++b)
            {
                out[b] += int64_t(h[b]);
            }
        }
    }
}

LinkFaultModel&
Engine::Faults()
{
    Impl& impl = *m_impl;
    if (!impl.built)
    {
        throw std::logic_error("faults need BuildFabric first");
    }
    if (!impl.faults)
    {
        impl.faults = CreateObject<LinkFaultModel>();
        std::vector<FabricNode*> nodes(impl.builder.GetNNodes());
        for (uint32_t id = 0; id < nodes.size(); ++id)
        {
            nodes[id] = PeekPointer(impl.builder.GetNode(id));
        }
        FabricBuilder* builder = &impl.builder;
        impl.faults->Attach(std::move(nodes), impl.linkA, impl.linkB,
                            [builder](const std::vector<std::vector<uint8_t>>& dead) { return builder->Reroute(dead); });
    }
    return *impl.faults;
}

namespace
{
/// Check fault arrays: link ids in range, times not in the past.
void
CheckFaultRows(const LinkFaultModel& f, const int64_t* link, const int64_t* timePs, uint64_t n)
{
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    for (uint64_t i = 0; i < n; ++i)
    {
        if (link[i] < 0 || link[i] >= int64_t(f.GetNLinks()))
        {
            throw std::invalid_argument("fault " + std::to_string(i) + ": no link " + std::to_string(link[i]));
        }
        if (timePs[i] < nowPs)
        {
            throw std::invalid_argument("fault " + std::to_string(i) + ": time " + std::to_string(timePs[i]) +
                                        " ps is in the past");
        }
    }
}
} // namespace

void
Engine::ScheduleLinkState(const int64_t* link, const int64_t* timePs, const uint8_t* up, const int32_t* fault,
                          uint64_t n)
{
    LinkFaultModel& f = Faults();
    CheckFaultRows(f, link, timePs, n);
    for (uint64_t i = 0; i < n; ++i)
    {
        f.ScheduleState(uint32_t(link[i]), timePs[i], up[i] != 0, fault[i]);
    }
}

void
Engine::ScheduleLinkRate(const int64_t* link, const int64_t* timePs, const double* rateBps, const int32_t* fault,
                         uint64_t n)
{
    LinkFaultModel& f = Faults();
    CheckFaultRows(f, link, timePs, n);
    for (uint64_t i = 0; i < n; ++i)
    {
        if (rateBps[i] > 0 && !(rateBps[i] >= kMinRateBps && rateBps[i] <= kMaxRateBps))
        {
            throw std::invalid_argument("fault " + std::to_string(i) + ": rate " + std::to_string(rateBps[i]) +
                                        " bit/s is outside 1 Mbit/s..1 Pbit/s");
        }
        f.ScheduleRate(uint32_t(link[i]), timePs[i], rateBps[i], fault[i]);
    }
}

void
Engine::ScheduleLinkBitErrorRate(const int64_t* link,
                                 const int64_t* timePs,
                                 const double* ber,
                                 const uint64_t* seed,
                                 const int32_t* fault,
                                 uint64_t n)
{
    LinkFaultModel& f = Faults();
    CheckFaultRows(f, link, timePs, n);
    for (uint64_t i = 0; i < n; ++i)
    {
        if (!(ber[i] >= 0 && ber[i] < 1))
        {
            throw std::invalid_argument("fault " + std::to_string(i) + ": bit error rate must be in [0, 1)");
        }
        f.ScheduleBitErrorRate(uint32_t(link[i]), timePs[i], ber[i], seed[i], fault[i]);
    }
}

std::string
Engine::FaultActionNames()
{
    return LinkFaultModel::ActionNames();
}

uint64_t
Engine::NumFaultActions() const
{
    return m_impl->faults ? m_impl->faults->GetNActions() : 0;
}

void
Engine::GetFaultActions(int64_t* timePs, int32_t* fault, int8_t* action, int32_t* link, int32_t* node) const
{
    if (m_impl->faults)
    {
        m_impl->faults->GetActions(timePs, fault, action, link, node);
    }
}

int64_t
Engine::Impl::ReadCounter(const CounterDecl& c) const
{
    bool any = false;
    int64_t result = 0;
    auto add = [&](int64_t v) {
        if (!any)
        {
            result = v;
        }
        else if (c.combine == Combine::SUM)
        {
            result += v;
        }
        else
        {
            result = c.combine == Combine::MAX ? std::max(result, v) : std::min(result, v);
        }
        any = true;
    };
    const CounterSources& r = c.read;
    for (uint32_t id = 0; id < builder.GetNNodes(); ++id)
    {
        if (Ptr<FabricSwitch> sw = builder.GetSwitch(id))
        {
            if (r.fromSwitch)
            {
                add(r.fromSwitch(*sw));
            }
            for (uint32_t p = 0; r.fromSwitchPort && p < sw->GetNPorts(); ++p)
            {
                add(r.fromSwitchPort(*sw, p));
            }
        }
        if (Ptr<HostNic> nic = builder.GetHost(id); nic && r.fromNic)
        {
            add(r.fromNic(*nic));
        }
    }
    for (const Ptr<PfcWatchdog>& w : pfcWatchdogs)
    {
        if (r.fromPfcWatchdog)
        {
            add(r.fromPfcWatchdog(*w));
        }
    }
    for (const Ptr<PauseStormSource>& storm : pauseStorms)
    {
        if (r.fromPauseStorm)
        {
            add(r.fromPauseStorm(*storm));
        }
    }
    if (faults && r.fromFaults)
    {
        add(r.fromFaults(*faults));
    }
    if (fastForward && r.fromFastForward)
    {
        add(r.fromFastForward(*fastForward));
    }
    if (Partitioned() && r.fromExchange)
    {
        add(r.fromExchange(exchange));
    }
    return result;
}

std::string
Engine::ListEventLogs()
{
    std::string out;
    for (const EventLogDecl& log : kEventLogs)
    {
        for (const LogColumn& c : log.columns)
        {
            out += std::string(log.name) + "\t" + c.name + "\t" + TypeName(c.type) + "\t" + RoleName(c.role) + "\t" +
                   c.unit + "\t" + c.description + "\n";
        }
    }
    return out;
}

uint64_t
Engine::NumLogRows(const std::string& log) const
{
    return m_impl->Log(log).Rows();
}

void
Engine::GetLogColumn(const std::string& log, const std::string& column, int64_t* out) const
{
    const EventLog& l = m_impl->Log(log);
    l.Copy(l.ColumnIndex(column), out);
}

void
Engine::GetLogColumn(const std::string& log, const std::string& column, int32_t* out) const
{
    const EventLog& l = m_impl->Log(log);
    l.Copy(l.ColumnIndex(column), out);
}

void
Engine::GetLogColumn(const std::string& log, const std::string& column, int8_t* out) const
{
    const EventLog& l = m_impl->Log(log);
    l.Copy(l.ColumnIndex(column), out);
}

std::string
Engine::ListCounters()
{
    std::string out;
    for (const CounterDecl& c : kCounters)
    {
        out += std::string(c.name) + "\t" + CombineName(c.combine) + "\t" + c.unit + "\t" + c.description + "\n";
    }
    return out;
}

int64_t
Engine::GetCounter(const std::string& name) const
{
    return m_impl->ReadCounter(FindCounter(name));
}

std::string
Engine::ReportedCounters() const
{
    std::string out;
    for (const CounterDecl& c : kCounters)
    {
        if (m_impl->Reports(c))
        {
            out += std::string(c.name) + "\t" + std::to_string(m_impl->ReadCounter(c)) + "\n";
        }
    }
    return out;
}

uint64_t
Engine::EventsExecuted() const
{
    // How a run is cut into slices (for progress reports) must not change its results, counters included;
    // nor do the checks of the deadlock watchdog and the retransmission timers that found nothing to do.
    uint64_t bookkeeping =
        m_impl->sliceStops + m_impl->exchange.GetWindows() + (m_impl->watchdog ? m_impl->watchdog->GetChecks() : 0);
    for (uint32_t id = 0; id < m_impl->builder.GetNNodes(); ++id)
    {
        if (Ptr<HostNic> nic = m_impl->builder.GetHost(id))
        {
            bookkeeping += nic->GetIdleTimerEvents();
        }
    }
    return Simulator::GetEventCount() - bookkeeping;
}

uint64_t
Engine::DeadlockCycleLength() const
{
    return m_impl->watchdog ? m_impl->watchdog->GetCycle().size() : 0;
}

void
Engine::GetDeadlockCycle(int32_t* node, int32_t* port, int32_t* queue) const
{
    uint64_t k = 0;
    for (const DeadlockWatchdog::Element& e : m_impl->watchdog->GetCycle())
    {
        node[k] = int32_t(e.node);
        port[k] = int32_t(e.port);
        queue[k++] = e.queue;
    }
}

uint64_t
Engine::PacketHops() const
{
    uint64_t hops = 0;
    m_impl->ForEachPort([&](uint32_t, uint32_t, Ptr<EgressPort> port) { hops += port->GetTxPackets(); });
    return hops;
}

uint64_t
Engine::DataPacketHops() const
{
    uint64_t hops = 0;
    m_impl->ForEachPort([&](uint32_t, uint32_t, Ptr<EgressPort> port) { hops += port->GetTxDataPackets(); });
    return hops;
}

uint64_t
Engine::PacketPoolCapacity() const
{
    return m_impl->pool.Capacity();
}

} // namespace cosim
