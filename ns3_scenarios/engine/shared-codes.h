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
    BLOCK = 4,   ///< a collective's copies and flows held as one template instance (Engine::SetBlocks), run as
                 ///< the NVLINK and FLOW ops they stand for would be, in the op's place
};

/// Which kernels move a DAG transfer, for compute-communication interference (Engine::SetCommClasses).
enum class CommClass : uint8_t
{
    NCCL = 0,    ///< NCCL's kernels: DagExecutor::CommComputeSlowdown
    EXPERT = 1,  ///< DeepEP's high-throughput kernels: DagExecutor::ExpertCommComputeSlowdown
    SM_FREE = 2, ///< kernels that hold no SM while the transfer is in flight (DeepEP's low-latency hook mode)
};

/// Number of CommClass values.
constexpr uint32_t kCommClasses = 3;

/// Why a port lost a packet, or sent one again: the cause column of the "losses" event log
/// (FabricNode::NoteLoss, trace source FabricNode::Loss).
enum class LossCause : uint8_t
{
    TAIL_DROP = 0,          ///< an egress queue past EgressPort::MaxQueueBytes dropped it at enqueue
    BUFFER_DROP = 1,        ///< a switch's shared buffer had no room for it (lossy priorities)
    WATCHDOG_DROP = 2,      ///< a queue the PFC watchdog disabled dropped it
    LINK_DOWN = 3,          ///< it was on a link that was down, or went down, and was lost
    BIT_ERROR = 4,          ///< bit errors corrupted it on a lossy link and it was lost
    TRIMMED = 5,            ///< a switch trimmed it to its header (UEC packet trimming)
    LINK_RETRANSMITTED = 6, ///< bit errors corrupted it on a credit link or an LLR link, which sent it again
    RETRANSMITTED = 7,      ///< the sending NIC's transport sent it again (go-back-N rewind, selective resend)
    TIMEOUT = 8,            ///< a QP's retransmission timer expired with data unacknowledged (a NIC event)
};

/// Number of LossCause values.
constexpr uint32_t kLossCauses = 9;

/// Why Engine::RunUntil returned.
enum class RunStatus : int
{
    TIME_REACHED = 0,   ///< the simulated clock reached the requested time; flows remain
    ALL_FLOWS_DONE = 1, ///< every flow has delivered its last byte (with a DAG: every op finished)
    NO_EVENTS = 2,      ///< nothing left to simulate yet flows remain (a stalled or lossy fabric)
    DEADLOCK = 3,       ///< the DeadlockWatchdog found a cycle of ports waiting on each other (Engine::GetDeadlockCycle)
    COLLECTIVE_TIMEOUT = 4, ///< a collective ran past DagExecutor::CollectiveTimeout: the job failed (Engine::FailedCollective)
};

} // namespace cosim

#endif // COSIM_SHARED_CODES_H
