#include "dag-executor.h"

#include "simulation-clock.h"

#include "ns3/double.h"
#include "ns3/simulator.h"

#include <cmath>

#include <algorithm>
#include <sstream>
#include <string>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(DagExecutor);

namespace
{

/**
 * The dependents of every row of a dependency CSR (@p depPtr over @p n rows), as a CSR in ascending row
 * order. Row r's entry k names row base[r] + depIdx[k] (rows of a template name each other by local index:
 * base is the template's first row; empty @p base: 0 for every row), and each dependent is stored as its
 * own row less its base.
 */
template <typename Out>
void
InvertDependencies(uint64_t n,
                   const int64_t* depPtr,
                   const int64_t* depIdx,
                   const std::vector<uint64_t>& base,
                   std::vector<uint64_t>& outPtr,
                   std::vector<Out>& outIdx)
{
    auto baseOf = [&base](uint64_t r) { return base.empty() ? 0 : base[r]; };
    outPtr.assign(n + 1, 0);
    for (uint64_t r = 0; r < n; ++r)
    {
        for (int64_t k = depPtr[r]; k < depPtr[r + 1]; ++k)
        {
            ++outPtr[baseOf(r) + depIdx[k] + 1];
        }
    }
    for (uint64_t r = 0; r < n; ++r)
    {
        outPtr[r + 1] += outPtr[r];
    }
    outIdx.assign(outPtr[n], 0);
    std::vector<uint64_t> fill(outPtr.begin(), outPtr.end() - 1);
    for (uint64_t r = 0; r < n; ++r)
    {
        for (int64_t k = depPtr[r]; k < depPtr[r + 1]; ++k)
        {
            outIdx[fill[baseOf(r) + depIdx[k]]++] = Out(r - baseOf(r));
        }
    }
}

} // namespace

TypeId
DagExecutor::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::DagExecutor")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<DagExecutor>()
            .AddAttribute("NvlinkDataRate",
                          "NVLink bandwidth of one GPU in one direction, in bit/s (default 450 GB/s, "
                          "an H100's 18 NVLink-4 links).",
                          DataRateValue(DataRate("3600Gbps")),
                          MakeDataRateAccessor(&DagExecutor::m_nvlinkRate),
                          MakeDataRateChecker())
            .AddAttribute("NvlinkLatency",
                          "Fixed cost of one intra-server copy (launch, NVSwitch hop, completion), a time.",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&DagExecutor::m_nvlinkLatency),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("CollectiveTimeout",
                          "Collective watchdog, like NCCL's: a collective not complete this long after it "
                          "started (every member ready) fails the job and stops the run, a time "
                          "(0 = no watchdog).",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&DagExecutor::m_collectiveTimeout),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("CommComputeSlowdown",
                          "Fraction (dimensionless) of its compute rate a GPU loses while it has a transfer in flight: the "
                          "share of its SMs NCCL's kernels hold (one thread block per channel), in [0, 0.95] "
                          "(0 = compute and communication never interfere).",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&DagExecutor::m_commSlowdown),
                          MakeDoubleChecker<double>(0.0, 0.95))
            .AddAttribute("ExpertCommComputeSlowdown",
                          "Fraction (dimensionless) of its compute rate a GPU loses while it has an expert-parallel "
                          "transfer of DeepEP's high-throughput kernels in flight (Engine::SetCommClasses): the "
                          "share of its SMs those kernels hold, in [0, 0.95].",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&DagExecutor::m_expertSlowdown),
                          MakeDoubleChecker<double>(0.0, 0.95));
    return tid;
}

DagExecutor::DagExecutor() = default;
DagExecutor::~DagExecutor() = default;

std::string
DagExecutor::Load(const uint8_t* kind,
                  const int32_t* gpu,
                  const int64_t* bytes,
                  const int64_t* durationPs,
                  const int64_t* depPtr,
                  const int64_t* depIdx,
                  uint64_t n)
{
    if (depPtr[0] != 0)
    {
        return "dep_ptr[0] must be 0";
    }
    if (n >= uint64_t(1) << (63 - kSubBits))
    {
        return std::to_string(n) + " ops, the executor takes fewer than 2^" + std::to_string(63 - kSubBits);
    }
    int32_t maxGpu = -1;
    uint64_t blockOps = 0;
    for (uint64_t i = 0; i < n; ++i)
    {
        blockOps += kind[i] == uint8_t(DagOpKind::BLOCK) ? 1 : 0;
        if (kind[i] > uint8_t(DagOpKind::BLOCK))
        {
            return "op " + std::to_string(i) + " has an unknown kind";
        }
        if (depPtr[i + 1] < depPtr[i] || bytes[i] < 0 || durationPs[i] < 0)
        {
            return "op " + std::to_string(i) + " has decreasing dep_ptr or a negative size or duration";
        }
        for (int64_t k = depPtr[i]; k < depPtr[i + 1]; ++k)
        {
            if (depIdx[k] < 0 || uint64_t(depIdx[k]) >= i)
            {
                return "op " + std::to_string(i) + " depends on op " + std::to_string(depIdx[k]) +
                       " (dependencies must point to earlier ops)";
            }
        }
        if (kind[i] == uint8_t(DagOpKind::NVLINK) && gpu[i] < 0)
        {
            return "NVLINK op " + std::to_string(i) + " has no sending GPU";
        }
        maxGpu = std::max(maxGpu, gpu[i]);
    }
    if (const std::string problem = BusyTimeProblem(kind, bytes, durationPs, n, 0.0); !problem.empty())
    {
        return problem;
    }
    m_kind.assign(kind, kind + n);
    m_gpu.assign(gpu, gpu + n);
    m_bytes.assign(bytes, bytes + n);
    m_durationPs.assign(durationPs, durationPs + n);
    m_waiting.assign(n, 0);
    for (uint64_t i = 0; i < n; ++i)
    {
        m_waiting[i] = uint32_t(depPtr[i + 1] - depPtr[i]);
    }
    InvertDependencies(n, depPtr, depIdx, {}, m_outPtr, m_outIdx);
    m_startPs.assign(n, -1);
    m_finishPs.assign(n, -1);
    m_nvlinkFreePs.clear();
    m_transfers.clear();
    m_running.clear();
    CoverGpus(maxGpu);
    m_commClass.clear();
    m_done = 0;
    m_blockOps = blockOps;
    m_blockTmpl.clear();
    m_subsDone = 0;
    return "";
}

void
DagExecutor::CoverGpus(int32_t maxGpu)
{
    const size_t gpus = std::max(m_nvlinkFreePs.size(), size_t(maxGpu + 1));
    m_nvlinkFreePs.resize(gpus, 0);
    m_transfers.resize(gpus, {});
    m_running.resize(gpus);
}

std::string
DagExecutor::SetBlocks(const int32_t* blockTmpl,
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
    NS_ASSERT_MSG(m_done == 0, "blocks are set before the graph runs");
    if (n != m_kind.size())
    {
        return "SetBlocks needs one template per op (" + std::to_string(m_kind.size()) + "), got " + std::to_string(n);
    }
    if (tmplPtr[0] != 0 || uint64_t(tmplPtr[nTemplates]) != nSubs)
    {
        return "block template pointers must run from 0 to the number of subs (" + std::to_string(nSubs) + ")";
    }
    if (subDepPtr[0] != 0)
    {
        return "block sub dep_ptr[0] must be 0";
    }
    for (uint64_t t = 0; t < nTemplates; ++t)
    {
        if (tmplPtr[t + 1] < tmplPtr[t] || uint64_t(tmplPtr[t + 1] - tmplPtr[t]) >= kSubMask)
        {
            return "block template " + std::to_string(t) + " has decreasing pointers or " +
                   std::to_string(kSubMask) + " subs or more";
        }
    }
    // Busy time per template, for the clock bound: every BLOCK op adds its template's.
    std::vector<double> tmplBusyPs(nTemplates, 0.0);
    for (uint64_t t = 0; t < nTemplates; ++t)
    {
        for (int64_t g = tmplPtr[t]; g < tmplPtr[t + 1]; ++g)
        {
            const int64_t local = g - tmplPtr[t];
            const bool flow = subKind[g] == uint8_t(DagOpKind::FLOW);
            if ((!flow && subKind[g] != uint8_t(DagOpKind::NVLINK)) || subGpu[g] < 0 || subDst[g] < 0 ||
                subBytes[g] < 0 || subDurationPs[g] < 0 || subDepPtr[g + 1] < subDepPtr[g])
            {
                return "block template " + std::to_string(t) + " sub " + std::to_string(local) +
                       " is neither NVLINK nor FLOW, has no sending or receiving GPU, a negative size or "
                       "duration, or decreasing dep_ptr";
            }
            for (int64_t k = subDepPtr[g]; k < subDepPtr[g + 1]; ++k)
            {
                if (subDepIdx[k] < 0 || subDepIdx[k] >= local)
                {
                    return "block template " + std::to_string(t) + " sub " + std::to_string(local) +
                           " depends on sub " + std::to_string(subDepIdx[k]) +
                           " (dependencies must point to earlier subs of the template)";
                }
            }
            if (!flow) // a flow's time is the network's, bounded by the simulation's stop time
            {
                tmplBusyPs[t] +=
                    NvlinkWirePs(subBytes[g]) + double(subDurationPs[g]) + double(m_nvlinkLatency.GetTimeStep());
            }
        }
    }
    double blockPs = 0;
    for (uint64_t i = 0; i < n; ++i)
    {
        const bool block = m_kind[i] == uint8_t(DagOpKind::BLOCK);
        if (block ? (blockTmpl[i] < 0 || uint64_t(blockTmpl[i]) >= nTemplates) : blockTmpl[i] != -1)
        {
            return "op " + std::to_string(i) + " has block template " + std::to_string(blockTmpl[i]) +
                   (block ? ": a BLOCK op needs one below " + std::to_string(nTemplates)
                          : ": only BLOCK ops have one (others -1)");
        }
        blockPs += block ? tmplBusyPs[blockTmpl[i]] : 0.0;
    }
    if (const std::string problem =
            BusyTimeProblem(m_kind.data(), m_bytes.data(), m_durationPs.data(), n, blockPs);
        !problem.empty())
    {
        return problem;
    }
    m_blockTmpl.assign(blockTmpl, blockTmpl + n);
    m_tmplPtr.assign(tmplPtr, tmplPtr + nTemplates + 1);
    m_subKind.assign(subKind, subKind + nSubs);
    m_subGpu.assign(subGpu, subGpu + nSubs);
    m_subDst.assign(subDst, subDst + nSubs);
    m_subBytes.assign(subBytes, subBytes + nSubs);
    m_subDurationPs.assign(subDurationPs, subDurationPs + nSubs);
    m_subDeps.assign(nSubs, 0);
    std::vector<uint64_t> firstSub(nSubs); // every sub's template's first sub: its local indices' base
    for (uint64_t t = 0; t < nTemplates; ++t)
    {
        for (int64_t g = tmplPtr[t]; g < tmplPtr[t + 1]; ++g)
        {
            m_subDeps[g] = uint32_t(subDepPtr[g + 1] - subDepPtr[g]);
            firstSub[g] = uint64_t(tmplPtr[t]);
        }
    }
    InvertDependencies(nSubs, subDepPtr, subDepIdx, firstSub, m_subOutPtr, m_subOutIdx);
    const auto maxGpu = nSubs > 0 ? *std::max_element(subGpu, subGpu + nSubs) : -1;
    CoverGpus(maxGpu);
    m_blockRuns.clear();
    m_freeRuns.clear();
    return "";
}

std::string
DagExecutor::StartProblem() const
{
    if (m_blockOps > 0 && m_blockTmpl.empty())
    {
        return "the graph has " + std::to_string(m_blockOps) + " BLOCK ops and no block templates (SetBlocks)";
    }
    return "";
}

std::string
DagExecutor::BusyTimeProblem(const uint8_t* kind, const int64_t* bytes, const int64_t* durationPs, uint64_t n,
                             double blockNvlinkPs) const
{
    // The ops' busy times, added up, bound when the last one can end: kept far inside ns-3's clock, or a copy
    // at a tiny NVLink rate would schedule its end at a wrapped-around, negative time.
    double computePs = 0;
    double nvlinkPs = blockNvlinkPs;
    for (uint64_t i = 0; i < n; ++i)
    {
        if (kind[i] == uint8_t(DagOpKind::COMPUTE))
        {
            computePs += double(durationPs[i]);
        }
        else if (kind[i] == uint8_t(DagOpKind::NVLINK))
        {
            nvlinkPs += NvlinkWirePs(bytes[i]) + double(durationPs[i]) + double(m_nvlinkLatency.GetTimeStep());
        }
    }
    if (computePs + nvlinkPs <= kMaxTotalBusyPs)
    {
        return "";
    }
    std::ostringstream why;
    why.precision(3);
    why << "ops add up to " << (computePs + nvlinkPs) / 1e12 << " s of busy time, beyond the "
        << kMaxTotalBusyPs / 1e12 << " s ns-3's clock holds: ";
    if (nvlinkPs > computePs)
    {
        why << "raise DagExecutor::NvlinkDataRate (now " << m_nvlinkRate.GetBitRate()
            << " bit/s) or lower DagExecutor::NvlinkLatency";
    }
    else
    {
        why << "shorten the COMPUTE ops";
    }
    return why.str();
}

double
DagExecutor::NvlinkWirePs(int64_t bytes) const
{
    return double(bytes) * 8e12 / double(m_nvlinkRate.GetBitRate());
}

std::string
DagExecutor::SetCollectives(const int64_t* startOp, const int64_t* endOp, uint64_t n)
{
    NS_ASSERT_MSG(m_done == 0 && m_failedCollective < 0, "collectives are set before the graph runs");
    const uint64_t nOps = m_kind.size();
    for (uint64_t c = 0; c < n; ++c)
    {
        if (startOp[c] < 0 || uint64_t(startOp[c]) >= nOps || endOp[c] < startOp[c] || uint64_t(endOp[c]) >= nOps)
        {
            return "collective " + std::to_string(c) + " has start or end ops outside the graph (or the end "
                   "before the start)";
        }
    }
    m_collOfStartOp.clear();
    m_collEndOp.clear();
    if (m_collectiveTimeout.IsZero() || n == 0)
    {
        return ""; // nothing watched: Begin pays one empty() test per op
    }
    m_collOfStartOp.assign(nOps, -1);
    for (uint64_t c = 0; c < n; ++c)
    {
        if (m_collOfStartOp[startOp[c]] >= 0)
        {
            return "collectives " + std::to_string(m_collOfStartOp[startOp[c]]) + " and " + std::to_string(c) +
                   " share start op " + std::to_string(startOp[c]);
        }
        m_collOfStartOp[startOp[c]] = int32_t(c);
    }
    m_collEndOp.assign(endOp, endOp + n);
    return "";
}

std::string
DagExecutor::SetLaunchGroups(const int32_t* partition, uint64_t n)
{
    NS_ASSERT_MSG(m_done == 0, "launch groups are set before the graph runs");
    if (n != m_kind.size())
    {
        return "launch groups for " + std::to_string(n) + " ops, the graph has " + std::to_string(m_kind.size());
    }
    const auto [lo, hi] = std::minmax_element(partition, partition + n);
    if (n > 0 && (*lo < 0 || *hi >= 1 << 16))
    {
        return "partition " + std::to_string(*lo < 0 ? *lo : *hi) + " is outside 0..65535";
    }
    m_launchGroup.assign(partition, partition + n);
    const uint32_t groups = n > 0 ? uint32_t(*hi) + 1 : 1;
    m_launch.assign(groups, {});
    m_launchPending.assign(groups, 0);
    return "";
}

void
DagExecutor::CheckCollective(uint64_t c)
{
    NS_ASSERT_MSG(c < m_collEndOp.size(), "timeout check of an unknown collective " << c);
    if (m_finishPs[m_collEndOp[c]] >= 0 || m_failedCollective >= 0)
    {
        return; // completed in time, or the job already failed on another
    }
    m_failedCollective = int64_t(c);
    m_failedAtPs = cosim::NowPs();
    Simulator::Stop();
}

void
DagExecutor::SetFlowStarter(Callback<void, uint64_t> starter)
{
    m_startFlow = starter;
}

void
DagExecutor::SetOnDone(Callback<void> done)
{
    m_onDone = done;
}

void
DagExecutor::Start()
{
    NS_ASSERT_MSG(StartProblem().empty(), StartProblem());
    std::vector<uint64_t> ready;
    for (uint64_t i = 0; i < m_kind.size(); ++i)
    {
        if (m_waiting[i] == 0)
        {
            Begin(i, ready);
        }
    }
    Drain(ready);
}

void
DagExecutor::Begin(uint64_t op, std::vector<uint64_t>& ready)
{
    const int64_t nowPs = cosim::NowPs();
    m_startPs[op] = nowPs;
    if (!m_collOfStartOp.empty() && m_collOfStartOp[op] >= 0)
    {
        Simulator::Schedule(m_collectiveTimeout, &DagExecutor::CheckCollective, this, uint64_t(m_collOfStartOp[op]));
    }
    switch (DagOpKind(m_kind[op]))
    {
    case DagOpKind::NOP:
        ready.push_back(op);
        break;
    case DagOpKind::COMPUTE:
        if (m_durationPs[op] == 0)
        {
            ready.push_back(op);
        }
        else if (Interferes() && m_gpu[op] >= 0)
        {
            BeginSlowable(op, m_gpu[op]);
        }
        else
        {
            Simulator::Schedule(TimeStep(m_durationPs[op]), &DagExecutor::Finish, this, op);
        }
        break;
    case DagOpKind::NVLINK:
    case DagOpKind::FLOW:
        QueueLaunch(GroupOf(op), op << kSubBits);
        break;
    case DagOpKind::BLOCK:
        BeginBlock(op, ready);
        break;
    }
}

void
DagExecutor::QueueLaunch(uint32_t group, uint64_t key)
{
    // Ops that take a GPU's copy engine or a NIC's queue in turn are launched together, in op order,
    // after every event of this instant scheduled before now: which of two ops ready at the same time
    // goes first then depends on the graph alone, not on the order ns-3 ran the events that readied them.
    // Sub s of BLOCK op b sorts as (b << kSubBits) | (s + 1): where op b + s of the materialized graph would.
    m_launch[group].push_back(key);
    if (!m_launchPending[group])
    {
        m_launchPending[group] = 1;
        Simulator::ScheduleNow(&DagExecutor::Launch, this, group);
    }
}

void
DagExecutor::BeginBlock(uint64_t op, std::vector<uint64_t>& ready)
{
    const int32_t t = m_blockTmpl[op];
    const uint64_t lo = m_tmplPtr[t];
    const uint64_t subs = m_tmplPtr[t + 1] - lo;
    if (subs == 0)
    {
        ready.push_back(op);
        return;
    }
    uint32_t slot;
    if (m_freeRuns.empty())
    {
        slot = uint32_t(m_blockRuns.size());
        m_blockRuns.emplace_back();
    }
    else
    {
        slot = m_freeRuns.back();
        m_freeRuns.pop_back();
    }
    BlockRun& run = m_blockRuns[slot];
    run.waiting.assign(m_subDeps.begin() + lo, m_subDeps.begin() + lo + subs);
    run.remaining = uint32_t(subs);
    m_waiting[op] = slot;
    const uint32_t group = GroupOf(op);
    for (uint64_t s = 0; s < subs; ++s)
    {
        if (run.waiting[s] == 0)
        {
            QueueLaunch(group, (op << kSubBits) | (s + 1));
        }
    }
}

void
DagExecutor::Launch(uint32_t group)
{
    NS_ASSERT_MSG(m_launchPending[group], "Launch runs only when Begin scheduled it");
    m_launchPending[group] = 0;
    std::vector<uint64_t> ops;
    ops.swap(m_launch[group]);
    std::sort(ops.begin(), ops.end());
    const int64_t nowPs = cosim::NowPs();
    for (const uint64_t key : ops)
    {
        const uint64_t op = key >> kSubBits;
        if (const uint64_t sub = key & kSubMask; sub != 0)
        {
            LaunchSub(op, uint32_t(sub - 1), nowPs);
            continue;
        }
        CountTransfer(op, +1); // before the starter: an empty flow finishes inside it
        if (DagOpKind(m_kind[op]) == DagOpKind::FLOW)
        {
            m_startFlow(FlowKey(op, -1));
            continue;
        }
        // One copy engine per sending GPU: copies of a GPU run one after another, each taking the wire
        // time at the NVLink rate plus its own extra busy time (a protocol slower than the rate); the
        // fixed latency overlaps with the next copy.
        int64_t& freePs = m_nvlinkFreePs[m_gpu[op]];
        const int64_t begin = std::max(nowPs, freePs);
        const int64_t wirePs = int64_t(NvlinkWirePs(m_bytes[op])) + m_durationPs[op];
        freePs = begin + wirePs;
        Simulator::Schedule(TimeStep(freePs + m_nvlinkLatency.GetTimeStep() - nowPs), &DagExecutor::Finish,
                            this, op);
    }
}

void
DagExecutor::LaunchSub(uint64_t op, uint32_t sub, int64_t nowPs)
{
    const uint64_t g = m_tmplPtr[m_blockTmpl[op]] + sub;
    CountGpuTransfer(m_subGpu[g], ClassOf(op), +1);
    if (m_subKind[g] == uint8_t(DagOpKind::FLOW))
    {
        m_startFlow(FlowKey(op, sub));
        return;
    }
    // As Launch times an NVLINK op.
    int64_t& freePs = m_nvlinkFreePs[m_subGpu[g]];
    const int64_t begin = std::max(nowPs, freePs);
    const int64_t wirePs = int64_t(NvlinkWirePs(m_subBytes[g])) + m_subDurationPs[g];
    freePs = begin + wirePs;
    Simulator::Schedule(TimeStep(freePs + m_nvlinkLatency.GetTimeStep() - nowPs), &DagExecutor::FinishSub, this, op,
                        sub);
}

void
DagExecutor::FinishSub(uint64_t op, uint32_t sub)
{
    const uint64_t lo = m_tmplPtr[m_blockTmpl[op]];
    const uint64_t g = lo + sub;
    CountGpuTransfer(m_subGpu[g], ClassOf(op), -1);
    ++m_subsDone;
    const uint32_t slot = m_waiting[op];
    BlockRun& run = m_blockRuns[slot];
    // As Drain releases the dependents of a finished op, in ascending order.
    const uint32_t group = GroupOf(op);
    for (uint64_t k = m_subOutPtr[g]; k < m_subOutPtr[g + 1]; ++k)
    {
        const uint32_t next = m_subOutIdx[k];
        if (--run.waiting[next] == 0)
        {
            QueueLaunch(group, (op << kSubBits) | (uint64_t(next) + 1));
        }
    }
    NS_ASSERT_MSG(run.remaining > 0, "BLOCK op " << op << " finishes a sub it does not run");
    if (--run.remaining > 0)
    {
        return;
    }
    // The last sub is one no other waits for: its finish releases the op's dependents, as it would in
    // the materialized graph (their only dependencies on it are through its terminal subs).
    m_freeRuns.push_back(slot);
    m_waiting[op] = 0;
    Finish(op);
}

void
DagExecutor::Drain(std::vector<uint64_t>& ready)
{
    const int64_t nowPs = cosim::NowPs();
    while (!ready.empty())
    {
        const uint64_t op = ready.back();
        ready.pop_back();
        m_finishPs[op] = nowPs;
        ++m_done;
        for (uint64_t k = m_outPtr[op]; k < m_outPtr[op + 1]; ++k)
        {
            const uint64_t next = m_outIdx[k];
            if (--m_waiting[next] == 0)
            {
                Begin(next, ready);
            }
        }
    }
    if (Done() && !m_onDone.IsNull())
    {
        m_onDone();
    }
}

void
DagExecutor::BeginSlowable(uint64_t op, int32_t gpu)
{
    const double rate = ComputeRate(gpu);
    const double workPs = double(m_durationPs[op]);
    m_running[gpu].push_back(
        {op, workPs, cosim::NowPs(),
         Simulator::Schedule(TimeStep(std::llround(workPs / rate)), &DagExecutor::FinishSlowable, this, op)});
}

void
DagExecutor::FinishSlowable(uint64_t op)
{
    auto& running = m_running[m_gpu[op]];
    const auto it = std::find_if(running.begin(), running.end(), [op](const RunningCompute& r) { return r.op == op; });
    NS_ASSERT_MSG(it != running.end(), "op " << op << " finishes but is not running");
    running.erase(it);
    Finish(op);
}

std::string
DagExecutor::SetCommClasses(const uint8_t* commClass, uint64_t n)
{
    if (n != m_kind.size())
    {
        return "SetCommClasses needs one class per op (" + std::to_string(m_kind.size()) + "), got " +
               std::to_string(n);
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        if (commClass[i] >= cosim::kCommClasses)
        {
            return "op " + std::to_string(i) + " has an unknown comm class";
        }
    }
    m_commClass.assign(commClass, commClass + n);
    return "";
}

double
DagExecutor::ComputeRate(int32_t gpu) const
{
    const auto& inFlight = m_transfers[gpu];
    const double lost = std::max(inFlight[uint8_t(cosim::CommClass::NCCL)] > 0 ? m_commSlowdown : 0.0,
                                 inFlight[uint8_t(cosim::CommClass::EXPERT)] > 0 ? m_expertSlowdown : 0.0);
    return 1.0 - lost;
}

void
DagExecutor::CountTransfer(uint64_t op, int delta)
{
    CountGpuTransfer(m_gpu[op], ClassOf(op), delta);
}

void
DagExecutor::CountGpuTransfer(int32_t gpu, uint8_t cls, int delta)
{
    if (!Interferes() || gpu < 0)
    {
        return;
    }
    NS_ASSERT_MSG(delta > 0 || m_transfers[gpu][cls] > 0, "GPU " << gpu << " ends a transfer it never started");
    const double oldRate = ComputeRate(gpu);
    m_transfers[gpu][cls] = uint32_t(int64_t(m_transfers[gpu][cls]) + delta);
    const double newRate = ComputeRate(gpu);
    if (oldRate == newRate)
    {
        return;
    }
    const int64_t nowPs = cosim::NowPs();
    for (RunningCompute& r : m_running[gpu])
    {
        r.remainingPs = std::max(0.0, r.remainingPs - double(nowPs - r.sincePs) * oldRate);
        r.sincePs = nowPs;
        r.finish.Cancel();
        r.finish = Simulator::Schedule(TimeStep(std::llround(r.remainingPs / newRate)), &DagExecutor::FinishSlowable,
                                       this, r.op);
    }
}

void
DagExecutor::Finish(uint64_t op)
{
    if (const auto kind = DagOpKind(m_kind[op]); kind == DagOpKind::FLOW || kind == DagOpKind::NVLINK)
    {
        CountTransfer(op, -1);
    }
    // A worklist of its own: Finish can run inside a FLOW starter's call chain (an empty flow).
    std::vector<uint64_t> ready{op};
    Drain(ready);
}

void
DagExecutor::FlowFinished(uint64_t key)
{
    if (const int64_t sub = KeySub(key); sub >= 0)
    {
        FinishSub(KeyOp(key), uint32_t(sub));
        return;
    }
    Finish(KeyOp(key));
}

void
DagExecutor::SubFlow(uint64_t key, int32_t& src, int32_t& dst, int64_t& bytes) const
{
    const uint64_t op = KeyOp(key);
    const int64_t sub = KeySub(key);
    NS_ASSERT_MSG(sub >= 0 && m_kind[op] == uint8_t(DagOpKind::BLOCK), "flow key " << key << " is no sub");
    const uint64_t g = m_tmplPtr[m_blockTmpl[op]] + uint64_t(sub);
    NS_ASSERT_MSG(m_subKind[g] == uint8_t(DagOpKind::FLOW), "sub " << sub << " of op " << op << " is no flow");
    src = m_subGpu[g];
    dst = m_subDst[g];
    bytes = m_subBytes[g];
}

} // namespace ns3
