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
 * ops ready at the same instant in op order), NOP at once. A BLOCK op (SetBlocks) stands for the NVLINK
 * and FLOW ops of a template ("subs") in its place: it runs them exactly as it would run those ops (same
 * times, same event order, its FLOW subs handed to the flow starter in the order the ops would be) and
 * finishes when the last one does. No Python runs in this loop.
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
     * @param commClass CommClass per op (read for FLOW, NVLINK and BLOCK ops: a block's subs are of its class)
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
     * @brief The templates of the graph's BLOCK ops (after Load, before the graph runs; needed iff the graph
     * has BLOCK ops). A BLOCK op at index b runs the subs of its template as NVLINK and FLOW ops at ids b,
     * b + 1, ... would run (the ops after b shifted): the subs without an internal dependency begin when b
     * begins, each other when its internal dependencies finished, and b finishes when the last sub does.
     * A FLOW sub goes to the flow starter as FlowKey(b, sub) and comes back through FlowFinished.
     * @param blockTmpl per op: the template of a BLOCK op, -1 for every other op
     * @param n number of ops (Load's)
     * @param tmplPtr subs of template t are tmplPtr[t]..tmplPtr[t + 1], [nTemplates + 1]
     * @param nTemplates number of templates
     * @param subKind DagOpKind per sub: NVLINK or FLOW
     * @param subGpu sending GPU per sub
     * @param subDst receiving GPU per sub (a FLOW sub's destination host)
     * @param subBytes payload per sub, in bytes
     * @param subDurationPs extra copy-engine time per sub, in ps
     * @param subDepPtr CSR row pointers of the subs' dependencies, [nSubs + 1]
     * @param subDepIdx dependencies, local to the template, each below its sub's own local index
     * @param nSubs number of subs of all templates
     * @return an empty string, or what is wrong with the arrays
     */
    std::string SetBlocks(const int32_t* blockTmpl,
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
                          uint64_t nSubs);

    /// @return why the graph cannot run yet (BLOCK ops without SetBlocks), or ""
    std::string StartProblem() const;

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

    /// Called with the FlowKey of a FLOW op or FLOW sub when it becomes ready; the owner starts the flow now.
    void SetFlowStarter(Callback<void, uint64_t> starter);

    /// @return the key a flow of FLOW op @p op (@p sub < 0) or of sub @p sub of BLOCK op @p op is started with
    static uint64_t FlowKey(uint64_t op, int64_t sub)
    {
        return (op << kSubBits) | (sub < 0 ? 0 : uint64_t(sub) + 1);
    }

    /// @return the op of flow key @p key (the BLOCK op of a sub)
    static uint64_t KeyOp(uint64_t key)
    {
        return key >> kSubBits;
    }

    /// @return the sub of flow key @p key, -1 for a FLOW op's
    static int64_t KeySub(uint64_t key)
    {
        return int64_t(key & kSubMask) - 1;
    }

    /// @return the source GPU (host), destination and bytes of the FLOW sub of flow key @p key
    void SubFlow(uint64_t key, int32_t& src, int32_t& dst, int64_t& bytes) const;

    /// Called once, when the last op finished.
    void SetOnDone(Callback<void> done);

    /// Start every op without dependencies (at the current time).
    void Start();

    /// The network delivered the last byte of the flow of FlowKey @p key.
    void FlowFinished(uint64_t key);

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

    /// @return number of subs of BLOCK ops finished
    uint64_t SubsFinished() const
    {
        return m_subsDone;
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

    /// Low bits of a launch sort key that number a sub of a BLOCK op (Launch)
    static constexpr unsigned kSubBits = 20;
    static constexpr uint64_t kSubMask = (uint64_t(1) << kSubBits) - 1;

    /// @return why the COMPUTE and NVLINK ops of a DAG (Load's arrays), with @p blockNvlinkPs of busy time
    /// of the subs of its BLOCK ops, take longer than kMaxTotalBusyPs altogether, naming the attribute to
    /// change, or "" if they fit
    std::string BusyTimeProblem(const uint8_t* kind, const int64_t* bytes, const int64_t* durationPs,
                                uint64_t n, double blockNvlinkPs) const;
    /// @return the time an NVLINK copy of @p bytes spends on the link at NvlinkDataRate, in ps
    double NvlinkWirePs(int64_t bytes) const;
    /// Op @p op finished now: release its dependents, and theirs, until nothing more is ready now.
    void Finish(uint64_t op);
    /// Start op @p op now; zero-time ops are queued on @p ready instead of recursing.
    void Begin(uint64_t op, std::vector<uint64_t>& ready);
    /// Queue the NVLINK or FLOW op, or sub, of launch sort key @p key on launch group @p group for Launch.
    void QueueLaunch(uint32_t group, uint64_t key);
    /// @return the launch group of op @p op
    uint32_t GroupOf(uint64_t op) const
    {
        return m_launchGroup.empty() ? 0 : m_launchGroup[op];
    }
    /// Start BLOCK op @p op now: begin its subs without internal dependencies (a template without subs
    /// finishes at once: queued on @p ready).
    void BeginBlock(uint64_t op, std::vector<uint64_t>& ready);
    /// Start sub @p sub (local index) of BLOCK op @p op: a copy on its GPU's copy engine, or a flow.
    void LaunchSub(uint64_t op, uint32_t sub, int64_t nowPs);
    /// Event: sub @p sub of BLOCK op @p op finished; begin the subs it releases, and finish the op after its
    /// last sub.
    void FinishSub(uint64_t op, uint32_t sub);
    /// @return the CommClass of the transfers of op @p op
    uint8_t ClassOf(uint64_t op) const
    {
        return m_commClass.empty() ? uint8_t(cosim::CommClass::NCCL) : m_commClass[op];
    }
    /// Drain @p ready: finish zero-time ops and begin what they release.
    void Drain(std::vector<uint64_t>& ready);
    /// Event: CollectiveTimeout after collective @p c started; fail the job if it has not completed.
    void CheckCollective(uint64_t c);
    /// Launch the NVLINK and FLOW ops of launch group @p group begun at this instant, in op order (NVLINK:
    /// take the GPU's copy engine in turn; FLOW: hand it to the network).
    void Launch(uint32_t group);
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
    /// A transfer of class @p cls starts (@p delta +1) or ends (-1) on GPU @p gpu (CountTransfer's work).
    void CountGpuTransfer(int32_t gpu, uint8_t cls, int delta);
    /// Grow the per-GPU state to cover GPUs 0..@p maxGpu.
    void CoverGpus(int32_t maxGpu);

    /// One COMPUTE op running on a GPU whose rate may change.
    struct RunningCompute
    {
        uint64_t op;         ///< the op
        double remainingPs;  ///< work left, in ps at the full rate
        int64_t sincePs;     ///< when remainingPs was last brought up to date
        EventId finish;      ///< its FinishSlowable event
    };

    /// The transient state of one running BLOCK op (a slot of m_blockRuns, reused once it finished).
    struct BlockRun
    {
        std::vector<uint32_t> waiting; ///< per sub (local index): unfinished internal dependencies
        uint32_t remaining{0};         ///< subs not finished
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
    /// per launch group: NVLINK and FLOW ops begun now, waiting for Launch
    std::vector<std::vector<uint64_t>> m_launch{std::vector<uint64_t>()};
    std::vector<uint8_t> m_commClass;     ///< CommClass per op (empty: every transfer is an NCCL one)
    std::vector<std::array<uint32_t, cosim::kCommClasses>> m_transfers; ///< per GPU and CommClass: transfers in flight
    std::vector<std::vector<RunningCompute>> m_running; ///< per GPU: its COMPUTE ops running (Interferes only)
    std::vector<uint8_t> m_launchPending{0}; ///< per launch group: a Launch is scheduled at the current time
    uint64_t m_blockOps{0};               ///< BLOCK ops of the graph
    std::vector<int32_t> m_blockTmpl;     ///< per op: the template of a BLOCK op, -1 (empty: no SetBlocks)
    std::vector<uint64_t> m_tmplPtr;      ///< subs of template t: m_tmplPtr[t]..m_tmplPtr[t + 1]
    std::vector<uint8_t> m_subKind;       ///< DagOpKind per sub (NVLINK or FLOW)
    std::vector<int32_t> m_subGpu;        ///< sending GPU per sub
    std::vector<int32_t> m_subDst;        ///< receiving GPU per sub
    std::vector<int64_t> m_subBytes;      ///< payload per sub, in bytes
    std::vector<int64_t> m_subDurationPs; ///< extra copy-engine time per sub, in ps
    std::vector<uint32_t> m_subDeps;      ///< internal dependencies per sub
    std::vector<uint64_t> m_subOutPtr;    ///< CSR of each sub's internal dependents: row pointers, [nSubs + 1]
    std::vector<uint32_t> m_subOutIdx;    ///< CSR of internal dependents: local sub indices, ascending
    /// running BLOCK ops' state; a running block's slot is kept in its m_waiting entry, which a begun op
    /// no longer needs
    std::vector<BlockRun> m_blockRuns;
    std::vector<uint32_t> m_freeRuns;     ///< slots of m_blockRuns free for reuse
    uint64_t m_subsDone{0};               ///< subs finished
    Callback<void, uint64_t> m_startFlow; ///< hands a FLOW op to the network
    Callback<void> m_onDone;              ///< called when the last op finished
};

} // namespace ns3

#endif // COSIM_DAG_EXECUTOR_H
