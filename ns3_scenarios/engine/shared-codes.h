/**
 * @file
 * @ingroup cosim
 * The codes and defaults the C++ models and the Python package share, defined once here.
 *
 * Python reads them at load time through cosim::Engine::SharedCodes() and checks its own constants
 * against them, so a code changed on one side only fails loudly instead of mislabelling results. This
 * header includes no ns-3 header: the engine header includes it, and cppyy parses both in milliseconds.
 */
#ifndef COSIM_SHARED_CODES_H
#define COSIM_SHARED_CODES_H

#include <cstdint>

namespace cosim
{

/// Priorities (traffic classes / virtual lanes) a port keeps queues for; a flow's priority is below it.
constexpr uint32_t kNumPriorities = 8;

/// Default payload of a full data packet (HostNic::MtuBytes), in bytes.
constexpr uint32_t kDefaultMtuBytes = 4096;

/// Default wire overhead of a data packet (HostNic::HeaderBytes), in bytes: RoCEv2 (Ethernet 14 + IPv4 20
/// + UDP 8 + BTH 12 + ICRC 4 + FCS 4) plus preamble/SFD 8 and inter-frame gap 12.
constexpr uint32_t kDefaultHeaderBytes = 82;

/// Kind of a fabric node in the node-kind array of Engine::BuildFabric.
enum class NodeKind : uint8_t
{
    HOST = 0,   ///< an endpoint with a NIC (one GPU's NIC)
    SWITCH = 1, ///< a packet switch
};

/// What a co-simulation DAG op does (the op-kind array of Engine::LoadDag).
enum class DagOpKind : uint8_t
{
    FLOW = 0,    ///< inter-server transfer through a NIC and the packet-level fabric
    COMPUTE = 1, ///< busy time on a GPU
    NVLINK = 2,  ///< intra-server GPU-to-GPU copy (latency + bytes at the NVLink rate, per sender in order)
    NOP = 3,     ///< zero-time join or barrier
};

/// Why Engine::RunUntil returned.
enum class RunStatus : int
{
    TIME_REACHED = 0,   ///< the simulated clock reached the requested time; flows remain
    ALL_FLOWS_DONE = 1, ///< every flow has delivered its last byte (with a DAG: every op finished)
    NO_EVENTS = 2,      ///< nothing left to simulate yet flows remain (a stalled or lossy fabric)
    DEADLOCK = 3,       ///< the DeadlockWatchdog found a cycle of ports waiting on each other (Engine::GetDeadlockCycle)
    COLLECTIVE_TIMEOUT = 4, ///< a collective ran past DagExecutor::CollectiveTimeout: the job failed (Engine::FailedCollective)
};

/// The fabric-wide counters Engine::GetCounter reads; the value indexes kCounterNames.
enum class Counter : uint8_t
{
    ECN_MARKS = 0,                ///< data packets ECN/FECN-marked by switches
    CNPS_SENT = 1,                ///< CNPs (or IB BECNs) sent by receivers
    CNPS_RECEIVED = 2,            ///< CNPs (or IB BECNs) received by senders
    SWITCH_DROPS = 3,             ///< packets switches dropped for lack of buffer
    PAUSE_FRAMES_SENT = 4,        ///< PFC XOFF frames (and refreshes) sent
    PEAK_HEADROOM_USED_BYTES = 5, ///< largest PFC headroom use of any (port, priority), in bytes
    MIN_HEADROOM_BYTES = 6,       ///< smallest PFC headroom configured on a switch port, in bytes
    ACKS = 7,                     ///< ACKs received by senders
    CREDIT_VIOLATIONS = 8,        ///< arrivals beyond an input lane's advertised buffer (a bug if not 0)
    PEAK_LANE_BYTES = 9,          ///< largest input-lane occupancy of any switch (credit mode), in bytes
    CREDIT_PACKETS_SENT = 10,     ///< IB credit-update packets sent by switches and NICs
    RETRANSMITTED_PACKETS = 11,   ///< data packets senders resent after a go-back-N rewind (NAK or timeout)
    NAKS_SENT = 12,               ///< go-back-N NAKs (PSN sequence errors) sent by receivers
    TIMEOUTS = 13,                ///< retransmission timeouts of senders
    REORDERED_PACKETS = 14,       ///< data packets reorder-tolerant receivers held beyond a gap
    ADMISSION_GRANTS = 15,        ///< clear-to-send grants receivers sent (receiver-driven admission)
    PEAK_QP_INFLIGHT_BYTES = 16,  ///< most payload a QP had unacknowledged (tracked with a QP window), in bytes
    PFC_WATCHDOG_ACTIONS = 17,    ///< switch egress queues the PFC watchdog disabled or restored
    PFC_WATCHDOG_DROPPED_PACKETS = 18, ///< packets dropped at queues the PFC watchdog disabled
    PAUSE_STORM_FRAMES_SENT = 19, ///< PAUSE frames sent by pause-storming NICs (a fault)
};

/// Number of Counter values.
constexpr uint32_t kNumCounters = 20;

/// Name of each Counter, as GetCounter accepts it and Python stores it, indexed by the Counter value.
inline constexpr const char* kCounterNames[kNumCounters] = {
    "ecn_marks",
    "cnps_sent",
    "cnps_received",
    "switch_drops",
    "pause_frames_sent",
    "peak_headroom_used_bytes",
    "min_headroom_bytes",
    "acks",
    "credit_violations",
    "peak_lane_bytes",
    "credit_packets_sent",
    "retransmitted_packets",
    "naks_sent",
    "timeouts",
    "reordered_packets",
    "admission_grants",
    "peak_qp_inflight_bytes",
    "pfc_watchdog_actions",
    "pfc_watchdog_dropped_packets",
    "pause_storm_frames_sent",
};

} // namespace cosim

#endif // COSIM_SHARED_CODES_H
