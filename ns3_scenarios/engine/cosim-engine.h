/**
 * @file
 * @ingroup cosim
 * The one C++ interface Python sees (through cppyy): build a fabric and flows from arrays, run, read
 * results back into caller-provided arrays; and the lowering's array helper, PlacementOrder.
 *
 * This header includes no ns-3 header on purpose: cppyy parses it in milliseconds, and the ns-3 types stay
 * behind the pimpl. Arrays cross as raw pointers plus lengths (numpy buffers), never one call per object.
 */
#ifndef COSIM_ENGINE_H
#define COSIM_ENGINE_H

#include "shared-codes.h"

#include <cstdint>
#include <memory>
#include <string>

namespace ns3
{
class LinkFaultModel;
}

namespace cosim
{

/**
 * @brief One simulation: fabric, flows, telemetry. At most one Engine exists at a time (ns-3's
 * simulator is a process-wide singleton).
 */
class Engine
{
  public:
    /// Reset the simulator and seed ns-3's random streams with @p seed.
    explicit Engine(uint64_t seed);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    /// @return the ns-3 version the library was built against, e.g. "3.44"
    static std::string Ns3Version();

    /**
     * @brief The codes Python shares with the models (shared-codes.h), for a check at load time.
     * @return newline-separated `key=value` lines: `op_kind.<DagOpKind>`, `node_kind.<NodeKind>`,
     * `run_status.<RunStatus>`, `priorities`, `default.mtu_bytes` and `default.header_bytes` (in bytes)
     */
    static std::string SharedCodes();

    /**
     * @brief Every attribute of every cosim model (TypeIds of group "Cosim"), sorted by name.
     * @return one line per attribute, tab-separated: `Type::Attribute`, value type, current default, what
     * its checker accepts ("uint32_t 1:8", "pfc|credit"; empty if it does not say), help
     */
    static std::string ListAttributes();

    /**
     * @brief Every event log the engine records (NumLogRows, GetLogColumn), in declaration order.
     * @return one line per column, tab-separated: log name, column name, type ("int8", "int32", "int64"),
     * role ("time": when, in ps, the first column; "key": what the event happened to, node and port first;
     * "value": what happened), unit ("ps" for times, "" for ids, codes and states), description
     */
    static std::string ListEventLogs();

    /// @return rows of event log @p log so far (throws std::invalid_argument for a log ListEventLogs lacks)
    uint64_t NumLogRows(const std::string& log) const;

    /**
     * @brief Copy column @p column of event log @p log, in the order recorded (time order), to
     * @p out[NumLogRows(log)]. Throws std::invalid_argument for an unknown log or column, or an @p out whose
     * type is not the column's (the overloads below take the other types).
     */
    void GetLogColumn(const std::string& log, const std::string& column, int64_t* out) const;
    /// GetLogColumn for an int32 column.
    void GetLogColumn(const std::string& log, const std::string& column, int32_t* out) const;
    /// GetLogColumn for an int8 column.
    void GetLogColumn(const std::string& log, const std::string& column, int8_t* out) const;

    /**
     * @brief Every fabric-wide counter GetCounter reads, in declaration order.
     * @return one line per counter, tab-separated: name, combine rule ("sum", "max" or "min": how the values
     * of its switches, NICs and other sources combine, and those of the parts of a decomposed run), unit
     * ("packets", "frames", "events", "B"), description
     */
    static std::string ListCounters();

    /**
     * @brief Config::SetDefault(@p path, @p value) for models created later.
     *
     * Throws std::invalid_argument naming the attribute for a value the models cannot take: malformed for
     * its value type, outside its checker's range, a rate outside 1 Mbit/s..1 Pbit/s, a negative time or
     * one beyond 1e5 s, a model object (pointer) set from text, or a value its model defines as invalid.
     */
    void SetDefault(const std::string& path, const std::string& value);

    /// @return the current default of attribute @p path ("ns3::Type::Attribute"); throws std::invalid_argument
    std::string GetDefault(const std::string& path) const;

    /**
     * @brief Choose the simulator's event scheduler (ns-3's SchedulerType), created at BuildFabric so that
     * attribute defaults set before apply to it. Every ns-3 scheduler gives the same event order (time, then
     * insertion); they differ in speed. Without a call ns-3's own default (MapScheduler) is used.
     * @param typeName an ns3::Scheduler subclass, e.g. "ns3::TimingWheelScheduler"; throws
     * std::invalid_argument for another name, std::logic_error after BuildFabric
     */
    void SetScheduler(const std::string& typeName);

    /**
     * @brief Give switches their own SharedBufferMmu::BufferBytes (before BuildFabric), e.g. one per
     *        switch class: @p bufferBytes[id] for every node id below @p nNodes, 0 = the attribute's default
     *        (entries of hosts are ignored). Throws std::logic_error after BuildFabric.
     */
    void SetSwitchBufferBytes(const uint64_t* bufferBytes, uint64_t nNodes);

    /**
     * @brief Give switches their ECN marking random stream (before BuildFabric): @p stream[id] for every
     *        node id below @p nNodes, -1 = the switch's node id (entries of hosts are ignored). Switches given
     *        one stream draw the same numbers, so identical switches seeing identical packets mark alike.
     *        Throws std::logic_error after BuildFabric.
     */
    void SetSwitchStreams(const int64_t* stream, uint64_t nNodes);

    /**
     * @brief Put switches in groups (a dragonfly's, before BuildFabric): @p group[id] for every node id
     *        below @p nNodes, -1 = in no group. Switches then also route towards groups, which
     *        FabricSwitch::DragonflyRouting valiant and ugal need. Throws std::logic_error after BuildFabric.
     */
    void SetSwitchGroups(const int32_t* group, uint64_t nNodes);

    /// SetSwitchRouting entry: keep the FabricSwitch::Routing default.
    static constexpr uint8_t kDefaultRouting = 255;

    /**
     * @brief Give switches their own FabricSwitch::Routing (before BuildFabric): @p routing[id] for every
     *        node id below @p nNodes, a FabricSwitch::Routing code, kDefaultRouting = the attribute's default
     *        (entries of hosts are ignored). A multi-plane NIC's port selector stripes its data packets over
     *        its ports whatever the fabric's switches do. Throws std::logic_error after BuildFabric.
     */
    void SetSwitchRouting(const uint8_t* routing, uint64_t nNodes);

    /**
     * @brief Pin routes (before BuildFabric; a fabric file's routes): row i says that at switch
     *        @p switchId[i], packets for the hosts of switch @p toLeaf[i] may leave towards its neighbour
     *        @p via[i]; the rows of one (switch, leaf) pair replace its shortest-path ports by the ports to
     *        every neighbour they list (under link faults, by those that are up, or the shortest ones if
     *        none is). BuildFabric throws std::invalid_argument for a row that is not a switch, another
     *        switch with hosts and a neighbour. Throws std::logic_error after BuildFabric.
     * @param n number of rows
     */
    void SetRouteOverrides(const int32_t* switchId, const int32_t* toLeaf, const int32_t* via, uint64_t n);

    /**
     * @brief Create the fabric.
     * @param kind NodeKind per node
     * @param nNodes number of nodes
     * @param linkA first endpoint of each link
     * @param linkB second endpoint of each link
     * @param rateBps rate of each link, in bit/s (1e6..1e15)
     * @param delayPs propagation delay of each link, in ps (0..1e12)
     * @param nLinks number of links
     */
    void BuildFabric(const uint8_t* kind,
                     uint64_t nNodes,
                     const int32_t* linkA,
                     const int32_t* linkB,
                     const double* rateBps,
                     const int64_t* delayPs,
                     uint64_t nLinks);

    /**
     * @brief Add flows (after BuildFabric).
     * @param src source host node id per flow
     * @param dst destination host node id per flow
     * @param sizeBytes payload per flow, in bytes
     * @param startPs start time per flow, in ps
     * @param priority priority class per flow (below kNumPriorities)
     * @param n number of flows
     */
    void AddFlows(const int32_t* src,
                  const int32_t* dst,
                  const int64_t* sizeBytes,
                  const int64_t* startPs,
                  const uint8_t* priority,
                  uint64_t n);

    /**
     * @brief Load a co-simulation DAG (after BuildFabric, instead of AddFlows): ops start when their
     * dependencies finish; FLOW ops become flows (ids in start order) between the given host nodes.
     * @param kind DagOpKind per op
     * @param gpu sending GPU per op (NVLINK copies of one GPU are serialized), -1 if none
     * @param srcNode FLOW: source host node id (else ignored)
     * @param dstNode FLOW: destination host node id (else ignored)
     * @param bytes payload per op, in bytes (FLOW, NVLINK)
     * @param durationPs busy time per op, in ps (COMPUTE)
     * @param priority FLOW: priority class (below kNumPriorities)
     * @param depPtr CSR row pointers of the dependencies, [n + 1]
     * @param depIdx dependency op indices, each below its own op's index
     * @param n number of ops
     */
    void LoadDag(const uint8_t* kind,
                 const int32_t* gpu,
                 const int32_t* srcNode,
                 const int32_t* dstNode,
                 const int64_t* bytes,
                 const int64_t* durationPs,
                 const uint8_t* priority,
                 const int64_t* depPtr,
                 const int64_t* depIdx,
                 uint64_t n);

    /**
     * @brief Watch the DAG's collectives with DagExecutor::CollectiveTimeout (after LoadDag; does nothing
     * while the timeout is 0). A collective not complete the timeout after it started fails the job:
     * RunUntil returns COLLECTIVE_TIMEOUT.
     * @param startOp DAG op whose start starts each collective (its start barrier)
     * @param endOp DAG op whose finish completes it
     * @param n number of collectives
     */
    void SetCollectives(const int64_t* startOp, const int64_t* endOp, uint64_t n);

    /**
     * @brief Which kernels move the DAG's transfers (after LoadDag, before RunUntil): a CommClass per op,
     * for compute-communication interference (DagExecutor::SetCommClasses). Without it every transfer is
     * an NCCL one.
     * @param commClass CommClass per DAG op
     * @param n number of DAG ops
     */
    void SetCommClasses(const uint8_t* commClass, uint64_t n);

    /**
     * @brief The templates of the DAG's BLOCK ops (after LoadDag, before RunUntil; a DAG with BLOCK ops
     * needs it, DagExecutor::SetBlocks): a BLOCK op runs its template's NVLink copies and flows ("subs")
     * exactly as the NVLINK and FLOW ops they stand for would run in its place (a FLOW sub's flow has its
     * BLOCK op's priority). Throws std::invalid_argument for a bad array, and for FLOW subs in a
     * partitioned run.
     * @param blockTmpl per op: the template of a BLOCK op, -1 for every other op
     * @param n number of DAG ops
     * @param tmplPtr subs of template t are tmplPtr[t]..tmplPtr[t + 1], [nTemplates + 1]
     * @param nTemplates number of templates
     * @param subKind DagOpKind per sub: NVLINK or FLOW
     * @param subGpu sending GPU per sub (a label like LoadDag's gpu: the host node id)
     * @param subDst receiving GPU per sub (host node id; a FLOW sub's destination host)
     * @param subBytes payload per sub, in bytes
     * @param subDurationPs extra copy-engine time per sub, in ps (an NVLINK op's duration)
     * @param subDepPtr CSR row pointers of the subs' dependencies, [nSubs + 1]
     * @param subDepIdx dependencies, local to the template, each below its sub's own local index
     * @param nSubs number of subs of all templates
     */
    void SetBlocks(const int32_t* blockTmpl,
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

    /// @return the collective (SetCollectives index) that timed out, or -1
    int64_t FailedCollective() const;

    /// @return when it timed out, in ps (-1: none did)
    int64_t FailedCollectiveAtPs() const;

    /**
     * @brief Add PFC pause storms (a fault; after BuildFabric): each host NIC sends PAUSE frames for a
     * priority from a start time for a duration (PauseStormSource). Throws std::invalid_argument for a
     * node that is no host, a priority out of range, a start in the past, a non-positive duration, or a
     * fabric whose links run credits (InfiniBand has no PAUSE frames).
     * @param host node id of the storming NIC per storm
     * @param priority priority class paused per storm
     * @param startPs start per storm, in ps
     * @param durationPs length per storm, in ps
     * @param n number of storms
     */
    void AddPauseStorms(const int32_t* host, const uint8_t* priority, const int64_t* startPs,
                        const int64_t* durationPs, uint64_t n);

    /// @return number of DAG ops finished (0 without a DAG)
    uint64_t DagOpsFinished() const;

    /// @return number of subs of the DAG's BLOCK ops finished (0 without a DAG)
    uint64_t DagSubsFinished() const;

    /// Copy each DAG op's start and finish time in ps (-1: not yet) to arrays of the DAG's size.
    void GetDagOpTimes(int64_t* startPs, int64_t* finishPs) const;

    /// Copy, for each flow (in id order), the DAG op it carries (a sub's BLOCK op) to @p out[NumFlows()].
    void GetFlowOps(int64_t* out) const;

    /// Copy, for each flow (in id order), the sub of its BLOCK op it carries (-1: a FLOW op's) to
    /// @p out[NumFlows()].
    void GetFlowSubs(int32_t* out) const;

    /// Copy each flow's start time in ps to @p out[NumFlows()].
    void GetFlowStartPs(int64_t* out) const;

    /// Sample every switch egress queue each @p intervalPs ps (1 ps..1e5 s; records changes only).
    void SampleSwitchQueues(int64_t intervalPs);

    /// Simulate until @p stopPs ps, all flows done, or no events left; @return the RunStatus as int.
    int RunUntil(int64_t stopPs);

    /// Bytes of one packet crossing between partitions (ns3::ExchangeRecord; cosim/parallel.py's RECORD_DTYPE).
    static constexpr uint64_t kExchangeRecordBytes = 80;

    /**
     * @brief Partition the fabric for a conservative parallel run (before BuildFabric; docs/parallel.md).
     *
     * A link between nodes of two partitions is cut: each packet sent on it is posted for exchange
     * (TakeOutgoing) and arrives on the far side when injected (InjectIncoming), and the run advances in
     * windows no longer than the shortest cut link's delay (RunWindow, RunPartitions). Each partition has
     * its own queue sampler and DAG launches; there is no deadlock watchdog. The results depend on the
     * partitions, never on which process simulates which.
     * @param partition partition of every node id below @p nNodes, 0..@p nPartitions - 1
     * @param nNodes number of nodes
     * @param local per partition: 1 if this process simulates it
     * @param nPartitions number of partitions
     */
    void SetPartitions(const int32_t* partition, uint64_t nNodes, const uint8_t* local, uint32_t nPartitions);

    /**
     * @brief What every op of the loaded DAG is in a partitioned run (after LoadDag, before running), and
     * begin its ops without dependencies.
     *
     * Flows are numbered ahead, alike in every process: a packet's flow id is its ECMP hash key and its
     * UEC entropy's seed, and packets cross processes. Every process then holds all @p nFlows flows (the
     * flow arrays have that size; those it never starts keep start -1 and op -1).
     * @param partition the op's partition (simulated by this process)
     * @param flowId a FLOW op's flow id, below @p nFlows; -1 for other ops
     * @param n number of ops
     * @param nFlows flows of the whole run
     */
    void SetOpPartitions(const int32_t* partition, const int64_t* flowId, uint64_t n, uint64_t nFlows);

    /// @return the shortest delay of a cut link, in ps (INT64_MAX: none is cut): how far a window may reach
    int64_t LookaheadPs() const;

    /// @return the time of the earliest pending event, in ps (INT64_MAX: none); needs the TimingWheelScheduler
    int64_t NextEventPs() const;

    /// @return the end of the window that starts with an event at @p nextPs, in ps: a lookahead later, at
    ///         most @p limitPs
    static int64_t WindowEndPs(int64_t nextPs, int64_t lookaheadPs, int64_t limitPs);

    /**
     * @brief Partitioned: run the events before @p endPs (and those at @p endPs scheduled before this call).
     * @return the RunStatus as int: TIME_REACHED, or COLLECTIVE_TIMEOUT
     */
    int RunWindow(int64_t endPs);

    /// @return packets posted on cut links since the last TakeOutgoing
    uint64_t NumOutgoing() const;

    /// Move the packets posted on cut links to @p out[NumOutgoing() * kExchangeRecordBytes], in posting order.
    void TakeOutgoing(uint8_t* out);

    /**
     * @brief Schedule the arrival of @p n packets (kExchangeRecordBytes each, due at or after now) at their
     * receiving nodes, in (arrival, node, port) order (the records are sorted in place); throws
     * std::invalid_argument for one this fabric cannot receive.
     */
    void InjectIncoming(uint8_t* records, uint64_t n);

    /// @return true once every op of the loaded DAG (or every flow) finished
    bool LocalDone() const;

    /**
     * @brief Run a partitioned run whose partitions are all simulated here: window after window, each
     * window's packets of cut links injected in (arrival, node, port) order, until the next window would
     * start at or after @p untilPs (a progress slice; slices do not change the windows), the clock reaches
     * @p limitPs (the run's time limit), or every op finished (checked between windows).
     * @return the RunStatus as int
     */
    int RunPartitions(int64_t untilPs, int64_t limitPs);

    /// @return the simulated clock, in ps
    int64_t NowPs() const;

    /// @return number of flows
    uint64_t NumFlows() const;

    /// @return number of flows whose last byte arrived
    uint64_t FlowsCompleted() const;

    /// Copy each flow's finish time in ps (-1 if unfinished) to @p out[NumFlows()].
    void GetFlowFinishPs(int64_t* out) const;

    /// Copy each flow's delivered payload in bytes to @p out[NumFlows()].
    void GetFlowDeliveredBytes(int64_t* out) const;

    /// @return number of queue samples recorded
    uint64_t NumQueueSamples() const;

    /// Copy the queue samples (time in ps, node, port, queued bytes) to arrays of NumQueueSamples().
    void GetQueueSamples(int64_t* timePs, int32_t* node, int32_t* port, int64_t* bytes) const;

    /// @return number of egress ports (two per link)
    uint64_t NumPorts() const;

    /**
     * @brief Copy per-port counters to arrays of NumPorts(), ports ordered by node then port number.
     * @param node owning node id
     * @param port port number at the node
     * @param peer node id at the far end
     * @param txBytes wire bytes sent, in bytes
     * @param txPackets packets sent
     * @param drops packets dropped
     * @param peakQueueBytes largest queue, in bytes
     */
    void GetPortStats(int32_t* node,
                      int32_t* port,
                      int32_t* peer,
                      int64_t* txBytes,
                      int64_t* txPackets,
                      int64_t* drops,
                      int64_t* peakQueueBytes) const;

    /// Copy each egress port's total paused time over all priorities, in ps, to @p out[NumPorts()].
    void GetPortPausedPs(int64_t* out) const;

    /// Copy each egress port's total credit-stall time over all lanes, in ps, to @p out[NumPorts()].
    void GetPortCreditStallPs(int64_t* out) const;

    /// Copy each egress port's line rate, in bit/s, to @p out[NumPorts()].
    void GetPortRateBps(double* out) const;

    /// @return number of buckets of the receive-latency histogram
    static uint32_t LatencyBuckets();

    /// @return lower edge of latency bucket @p b, in ps
    static double LatencyBucketLowPs(uint32_t b);

    /// Copy the receive-latency histogram of data packets over all NICs to @p out[LatencyBuckets()].
    void GetLatencyHistogram(int64_t* out) const;

    /**
     * @return counter @p name (one ListCounters lists) over the whole fabric, combined by its rule; 0 while
     * nothing it is read from exists (throws std::invalid_argument for another name)
     */
    int64_t GetCounter(const std::string& name) const;

    /**
     * @return the counters this run reports, in declaration order, one `name<TAB>value` line each: every
     * counter, those of the fault model only once it acted (a run without faults reports none of them)
     */
    std::string ReportedCounters() const;

    /// @return simulator events executed so far
    uint64_t EventsExecuted() const; // model events only: slice limits and idle timer checks are not counted

    /// @return elements of the deadlock cycle the watchdog found (0: none; the run status is DEADLOCK otherwise)
    uint64_t DeadlockCycleLength() const;

    /**
     * @brief Copy the deadlock cycle to arrays of DeadlockCycleLength(): each switch egress queue waits
     * for the next (the last for the first).
     * @param node switch node id
     * @param port egress port number at that switch
     * @param queue priority (PFC) or virtual lane (credits)
     */
    void GetDeadlockCycle(int32_t* node, int32_t* port, int32_t* queue) const;

    /**
     * @brief Network faults (LinkFaultModel, after BuildFabric): link @p link[i] goes down (@p up[i] 0) or
     * up at @p timePs[i] ps; @p fault[i] is the fault it belongs to (logged with it).
     */
    void ScheduleLinkState(const int64_t* link, const int64_t* timePs, const uint8_t* up, const int32_t* fault,
                           uint64_t n);

    /// Link @p link[i] runs at @p rateBps[i] bit/s from @p timePs[i] (<= 0: its built rate again).
    void ScheduleLinkRate(const int64_t* link, const int64_t* timePs, const double* rateBps, const int32_t* fault,
                          uint64_t n);

    /// Link @p link[i] corrupts bits with probability @p ber[i] from @p timePs[i] (0: no errors); its loss
    /// stream is seeded by @p seed[i].
    void ScheduleLinkBitErrorRate(const int64_t* link,
                                  const int64_t* timePs,
                                  const double* ber,
                                  const uint64_t* seed,
                                  const int32_t* fault,
                                  uint64_t n);

    /// @return the fault actions' names in code order, comma-separated (LinkFaultModel::Action)
    static std::string FaultActionNames();

    /// @return rows of the fault log (0 without faults)
    uint64_t NumFaultActions() const;

    /**
     * @brief Copy the fault log, in time order, to arrays of NumFaultActions().
     * @param timePs time of the action, in ps
     * @param fault the fault it belongs to (as scheduled)
     * @param action LinkFaultModel::Action code
     * @param link link id acted on, -1 if none
     * @param node node id acted on (a rerouting switch), -1 if none
     */
    void GetFaultActions(int64_t* timePs, int32_t* fault, int8_t* action, int32_t* link, int32_t* node) const;

    /// @return packets serialized on any link so far (packet-hops), control packets included
    uint64_t PacketHops() const;

    /// @return data packets serialized on any link so far (data packet-hops)
    uint64_t DataPacketHops() const;

    /// @return packets the pool ever had to create (peak in flight), a measure of memory use
    uint64_t PacketPoolCapacity() const;

  private:
    /// The fault model, created and attached on first use (after BuildFabric).
    ns3::LinkFaultModel& Faults();

    /// Throw std::invalid_argument if the loaded DAG cannot start (BLOCK ops without SetBlocks).
    void CheckDagCanStart() const;

    struct Impl;
    std::unique_ptr<Impl> m_impl; ///< ns-3 side of the engine
};

/**
 * @brief The order in which a trace's ops and collective calls are laid out as DAG ops (the lowering,
 * cosim/collectives/lower.py): a Kahn pass over the trace ops level by level, each level (the ops that became
 * ready while the previous one was placed) in increasing op index, so that identical parts of a trace (the
 * rails of a training job) are laid out alike and fold (cosim.decompose.exact). An item is an op
 * outside any collective, placed when its dependencies (and, for a RECV, its SEND) are placed, or a whole
 * collective call, placed when the last of its member ops is ready; placing an item releases the dependents
 * of its op (of every member op, for a call), each in the order of its dependency lists.
 * @param depPtr CSR row pointers of the ops' dependencies, [nOps + 1]
 * @param depIdx dependency op indices
 * @param nOps trace ops (below 2^31: the pass holds op indices as int32)
 * @param callOfOp collective call of each op, -1 outside any
 * @param callPtr CSR row pointers of each call's member ops in @p callOps, [nCalls + 1]
 * @param callOps member ops of the calls
 * @param nCalls collective calls
 * @param recvOfSend the RECV op each SEND op is matched to, -1 if none (and for every other op), [nOps]
 * @param item out: per position, the op index, or the call index where @p isCall
 * @param isCall out: 1 where the item is a call
 * @param capacity room in @p item and @p isCall (the number of items: ops outside calls, plus calls)
 * @return items placed: fewer than @p capacity when some can never run (a dependency cycle or a deadlock)
 */
uint64_t PlacementOrder(const int64_t* depPtr,
                        const int64_t* depIdx,
                        uint64_t nOps,
                        const int32_t* callOfOp,
                        const int64_t* callPtr,
                        const int64_t* callOps,
                        uint64_t nCalls,
                        const int32_t* recvOfSend,
                        int64_t* item,
                        uint8_t* isCall,
                        uint64_t capacity);

} // namespace cosim

#endif // COSIM_ENGINE_H
