/**
 * @file
 * @ingroup cosim
 * Runs a dependency graph of compute steps, NVLink copies and network flows in simulated time.
 */
#ifndef COSIM_DAG_EXECUTOR_H
#define COSIM_DAG_EXECUTOR_H

#include "../engine/shared-codes.h"

#include "ns3/callback.h"
#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ns3
{

using cosim::DagOpKind;

/**
 * @ingroup cosim
 * @brief Starts each op of a DAG when its dependencies are done and records its start and finish.
 *
 * The graph arrives as arrays (CSR dependencies, every dependency index below the op's own: a topological
 * order, so no cycle is possible). FLOW ops are handed to the owner through the flow starter callback and
 * reported back with FlowFinished(); the rest is timed here: COMPUTE for its duration, NVLINK as
 * NvlinkLatency + bytes / NvlinkDataRate + its own duration (extra copy-engine time: what a protocol
 * slower than NvlinkDataRate adds), serialized per sending GPU (one copy engine per GPU, in ready order;
 * ops ready at the same instant in op order), NOP at once. A BLOCK op stands for a collective's NVLink
 * copies (SetBlocks): it runs its template's copies as the NVLINK ops they replace would run in its place,
 * ordered among other ops as their op ids would be, and finishes with the last. No Python runs in this loop.
 */
class DagExecutor : public Object
{
  public:
    /// @return the TypeId of DagExecutor
    static TypeId GetTypeId();
    DagExecutor();
    ~DagExecutor() override;

    /**
     * @brief Take the graph (copied).
     * @param kind DagOpKind per op
     * @param gpu sending GPU (rank) per op, used to serialize NVLINK copies of one GPU
     * @param bytes payload per op, in bytes (FLOW, NVLINK)
     * @param durationPs busy time per op, in ps (COMPUTE; NVLINK: extra copy-engine time on top of the wire)
     * @param depPtr CSR row pointers, [n + 1]
     * @param depIdx CSR dependency op indices, each below its op's index
     * @param n number of ops
     * @return an empty string, or what is wrong with the graph
     */
    std::string Load(const uint8_t* kind,
                     const int32_t* gpu,
                     const int64_t* bytes,
                     const int64_t* durationPs,
                     const int64_t* depPtr,
                     const int64_t* depIdx,
                     uint64_t n);

    /**
     * @brief The collectives of the graph, for the CollectiveTimeout watchdog (after Load; without it, or
     * with CollectiveTimeout 0, nothing is watched).
     * @param startOp op whose start starts each collective (its start barrier: every member ready)
     * @param endOp op whose finish completes it (its end barrier: every transfer done)
     * @param n number of collectives
     * @return an empty string, or what is wrong with the arrays
     */
    std::string SetCollectives(const int64_t* startOp, const int64_t* endOp, uint64_t n);

    /**
     * @brief Which kernels move the graph's transfers, for compute-communication interference (after Load;
     * without it every transfer is an NCCL one): per op a CommClass. A GPU computes at the rate the most
     * SM-hungry of its transfers in flight leaves it.
     * @param commClass CommClass per op (read for FLOW and NVLINK ops)
     * @param n number of ops (Load's)
     * @return an empty string, or what is wrong with the array
     */
    std::string SetCommClasses(const uint8_t* commClass, uint64_t n);

    /**
     * @brief Launch the transfers of each partition of a partitioned run apart (after Load): the transfers
     * ready at one instant are launched in op order within their partition, by one Launch per partition,
     * so what one partition runs never depends on when another's ops became ready.
     * @param partition partition of every op (below 2^16)
     * @param n number of ops (Load's)
     * @return an empty string, or what is wrong with the array
     */
    std::string SetLaunchGroups(const int32_t* partition, uint64_t n);

    /**
     * @brief The templates of the graph's BLOCK ops (after Load, before the run). Template t holds the copies
     * ("subs") tmplPtr[t]..tmplPtr[t+1]-1; sub s is an NVLink copy sent by GPU subGpu[s] of subBytes[s] bytes
     * with subDurationPs[s] of extra copy-engine time, after the subs subDepIdx[subDepPtr[s]..subDepPtr[s+1]]
     * of its template (local indices, each below its own). A sub with no dependency starts with its block.
     * @param blockTmpl per op: the template of a BLOCK op, -1 for any other op
     * @param n number of ops (Load's)
     * @param tmplPtr [nTemplates + 1]
     * @param nTemplates number of templates
     * @param subGpu sending GPU of every sub
     * @param subBytes bytes of every sub
     * @param subDurationPs extra copy-engine time of every sub, in ps
     * @param subDepPtr [nSubs + 1] CSR row pointers of the subs' dependencies
     * @param subDepIdx their local indices
     * @param nSubs number of subs over all templates
     * @return an empty string, or what is wrong with the arrays
     */
    std::string SetBlocks(const int32_t* blockTmpl,
                          uint64_t n,
                          const int64_t* tmplPtr,
                          uint64_t nTemplates,
                          const int32_t* subGpu,
                          const int64_t* subBytes,
                          const int64_t* subDurationPs,
                          const int64_t* subDepPtr,
                          const int64_t* subDepIdx,
                          uint64_t nSubs);

    /// @return the copies of BLOCK ops finished so far
    uint64_t SubsFinished() const
    {
        return m_subsDone;
    }

    /// @return true once a collective ran past CollectiveTimeout (the job failed; the simulator was stopped)
    bool Failed() const
    {
        return m_failedCollective >= 0;
    }

    /// @return the index of the collective that timed out (SetCollectives order), or -1
    int64_t GetFailedCollective() const
    {
        return m_failedCollective;
    }

    /// @return when the collective timed out, in ps (-1: none did)
    int64_t GetFailedAtPs() const
    {
        return m_failedAtPs;
    }

    /// Called with the op index when a FLOW op becomes ready; the owner starts the flow now.
    void SetFlowStarter(Callback<void, uint64_t> starter);

    /// Called once, when the last op finished.
    void SetOnDone(Callback<void> done);

    /// Start every op without dependencies (at the current time).
    void Start();

    /// The network delivered the last byte of FLOW op @p op.
    void FlowFinished(uint64_t op);

    /// @return true once every op finished
    bool Done() const
    {
        return m_done == m_kind.size();
    }

    /// @return the DagOpKind of op @p op
    uint8_t Kind(uint64_t op) const
    {
        return m_kind[op];
    }

    /// @return number of ops
    uint64_t Size() const
    {
        return m_kind.size();
    }

    /// @return number of ops finished
    uint64_t Finished() const
    {
        return m_done;
    }

    /// @return start time of every op, in ps (-1: not started)
    const std::vector<int64_t>& StartPs() const
    {
        return m_startPs;
    }

    /// @return finish time of every op, in ps (-1: not finished)
    const std::vector<int64_t>& FinishPs() const
    {
        return m_finishPs;
    }

  private:
    /// Longest total busy time of a DAG's ops, in ps: 2^62, half of ns-3's clock, leaving room for the network
    static constexpr double kMaxTotalBusyPs = 4611686018427387904.0;

    /// @return why the COMPUTE and NVLINK ops of a DAG (Load's arrays) take longer than kMaxTotalBusyPs
    /// altogether, naming the attribute to change, or "" if they fit
    std::string BusyTimeProblem(const uint8_t* kind, const int64_t* bytes, const int64_t* durationPs,
                                uint64_t n) const;
    /// @return the time an NVLINK copy of @p bytes spends on the link at NvlinkDataRate, in ps
    double NvlinkWirePs(int64_t bytes) const;
    /// Op @p op finished now: release its dependents, and theirs, until nothing more is ready now.
    void Finish(uint64_t op);
    /// Start op @p op now; zero-time ops are queued on @p ready instead of recursing.
    void Begin(uint64_t op, std::vector<uint64_t>& ready);
    /// Drain @p ready: finish zero-time ops and begin what they release.
    void Drain(std::vector<uint64_t>& ready);
    /// Event: CollectiveTimeout after collective @p c started; fail the job if it has not completed.
    void CheckCollective(uint64_t c);
    /// Launch the NVLINK and FLOW ops (and BLOCK ops' copies) of launch group @p group begun at this instant,
    /// in op order (NVLINK: take the GPU's copy engine in turn; FLOW: hand it to the network).
    void Launch(uint32_t group);
    /// Queue a transfer of launch group @p group for this instant's Launch (scheduled once per instant).
    void QueueLaunch(uint32_t group, uint64_t key, uint32_t slot, uint32_t sub);
    /// @return the time a copy of @p bytes and @p extraPs on GPU @p gpu ends, taking its copy engine from now
    int64_t TakeCopyEngine(int32_t gpu, int64_t bytes, int64_t extraPs, int64_t nowPs);
    /// Start BLOCK op @p op now: its template's subs without dependencies are queued for launch.
    void BeginBlock(uint64_t op, std::vector<uint64_t>& ready);
    /// Event: sub @p sub of the running block in slot @p slot finished its copy.
    void FinishSub(uint32_t slot, uint32_t sub);
    /// @return true if COMPUTE op timing depends on communication (a slowdown attribute > 0)
    bool Interferes() const
    {
        return m_commSlowdown > 0 || m_expertSlowdown > 0;
    }
    /// @return the fraction of its full rate GPU @p gpu computes at, given its transfers in flight
    double ComputeRate(int32_t gpu) const;
    /// Start COMPUTE op @p op of GPU @p gpu, at the rate its GPU's communication state allows.
    void BeginSlowable(uint64_t op, int32_t gpu);
    /// Event: slowable COMPUTE op @p op has done all its work.
    void FinishSlowable(uint64_t op);
    /// Transfer @p op starts (@p delta +1) or ends (-1) on its sending GPU; re-time the GPU's compute if
    /// that changes the rate it computes at.
    void CountTransfer(uint64_t op, int delta);
    /// A transfer of CommClass @p cls starts (@p delta +1) or ends (-1) on GPU @p gpu (CountTransfer's work).
    void CountTransferOn(int32_t gpu, uint8_t cls, int delta);
    /// @return the CommClass of op @p op
    uint8_t CommClassOf(uint64_t op) const
    {
        return m_commClass.empty() ? uint8_t(cosim::CommClass::NCCL) : m_commClass[op];
    }
    /// Size the per-GPU state for GPUs 0..@p maxGpu.
    void SizeGpus(int32_t maxGpu);

    /// Bits of a launch key below the op id: a BLOCK op's sub s sorts as (op << kSubBits) | (s + 1)
    static constexpr uint32_t kSubBits = 20;
    /// Slot of a launch item that is an op, not a sub
    static constexpr uint32_t kNoSlot = UINT32_MAX;

    /// A transfer waiting for this instant's Launch: an op, or a sub of a running block.
    struct LaunchItem
    {
        uint64_t key;  ///< op << kSubBits, or (op << kSubBits) | (sub + 1): the order of the ops it stands for
        uint32_t slot; ///< running block (kNoSlot: an op)
        uint32_t sub;  ///< local index of the sub in its template
    };

    /// A BLOCK op running: what its subs still wait for.
    struct RunningBlock
    {
        uint64_t op;                   ///< the BLOCK op
        uint32_t tmpl;                 ///< its template
        uint32_t remaining;            ///< subs not finished
        std::vector<uint32_t> waiting; ///< per sub: unfinished dependencies
    };

    /// One COMPUTE op running on a GPU whose rate may change.
    struct RunningCompute
    {
        uint64_t op;         ///< the op
        double remainingPs;  ///< work left, in ps at the full rate
        int64_t sincePs;     ///< when remainingPs was last brought up to date
        EventId finish;      ///< its FinishSlowable event
    };

    DataRate m_nvlinkRate; ///< per-direction NVLink bandwidth of one GPU
    Time m_nvlinkLatency;  ///< fixed cost of one NVLink copy
    Time m_collectiveTimeout; ///< longest a collective may run before the job fails (0 = no watchdog)
    double m_commSlowdown{0};   ///< fraction of compute rate lost while an NCCL transfer is in flight, [0, 1)
    double m_expertSlowdown{0}; ///< fraction lost while an expert-parallel (DeepEP) transfer is in flight

    std::vector<uint8_t> m_kind;          ///< DagOpKind per op
    std::vector<int32_t> m_gpu;           ///< sending GPU per op
    std::vector<int64_t> m_bytes;         ///< payload per op, in bytes
    std::vector<int64_t> m_durationPs;    ///< COMPUTE time per op, in ps
    std::vector<uint64_t> m_outPtr;       ///< CSR of dependents: row pointers
    std::vector<uint64_t> m_outIdx;       ///< CSR of dependents: op indices
    std::vector<uint32_t> m_waiting;      ///< unfinished dependencies per op
    std::vector<int64_t> m_startPs;       ///< start per op, in ps
    std::vector<int64_t> m_finishPs;      ///< finish per op, in ps
    std::vector<int64_t> m_nvlinkFreePs;  ///< per GPU: time its NVLink copy engine is free, in ps
    uint64_t m_done{0};                   ///< ops finished
    std::vector<int32_t> m_collOfStartOp; ///< per op: the collective it starts, -1 (empty: none watched)
    std::vector<int64_t> m_collEndOp;     ///< per collective: the op whose finish completes it
    int64_t m_failedCollective{-1};       ///< the collective that timed out, -1 if none
    int64_t m_failedAtPs{-1};             ///< when it timed out, in ps
    std::vector<uint16_t> m_launchGroup;  ///< per op: its launch group (SetLaunchGroups; empty: all in group 0)
    /// per launch group: NVLINK and FLOW ops (and subs) begun now, waiting for Launch
    std::vector<std::vector<LaunchItem>> m_launch{std::vector<LaunchItem>()};
    std::vector<int32_t> m_blockTmpl;      ///< per op: template of a BLOCK op, -1 otherwise (empty: no BLOCK op)
    std::vector<uint64_t> m_tmplPtr;       ///< per template: its first sub (CSR, nTemplates + 1)
    std::vector<int32_t> m_subGpu;         ///< per sub: sending GPU
    std::vector<int64_t> m_subBytes;       ///< per sub: bytes
    std::vector<int64_t> m_subDurationPs;  ///< per sub: extra copy-engine time, in ps
    std::vector<uint32_t> m_subDeps;       ///< per sub: number of dependencies
    std::vector<uint64_t> m_subOutPtr;     ///< per sub: CSR of its dependents (nSubs + 1)
    std::vector<uint32_t> m_subOutIdx;     ///< their local indices, increasing per sub
    std::vector<RunningBlock> m_blocks;    ///< running blocks by slot
    std::vector<uint32_t> m_freeSlots;     ///< slots of m_blocks free for reuse
    uint64_t m_subsDone{0};                ///< subs finished
    std::vector<uint8_t> m_commClass;     ///< CommClass per op (empty: every transfer is an NCCL one)
    std::vector<std::array<uint32_t, cosim::kCommClasses>> m_transfers; ///< per GPU and CommClass: transfers in flight
    std::vector<std::vector<RunningCompute>> m_running; ///< per GPU: its COMPUTE ops running (Interferes only)
    std::vector<uint8_t> m_launchPending{0}; ///< per launch group: a Launch is scheduled at the current time
    Callback<void, uint64_t> m_startFlow; ///< hands a FLOW op to the network
    Callback<void> m_onDone;              ///< called when the last op finished
};

} // namespace ns3

#endif // COSIM_DAG_EXECUTOR_H
