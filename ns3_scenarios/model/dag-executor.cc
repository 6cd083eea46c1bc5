#include "dag-executor.h"

#include "ns3/double.h"
#include "ns3/simulator.h"

#include <cmath>

#include <algorithm>
#include <sstream>
#include <string>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(DagExecutor);

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
    if (n >= (uint64_t(1) << (63 - kSubBits)))
    {
        return "the graph has " + std::to_string(n) + " ops, more than an op id of a launch key holds";
    }
    int32_t maxGpu = -1;
    for (uint64_t i = 0; i < n; ++i)
    {
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
    if (const std::string problem = BusyTimeProblem(kind, bytes, durationPs, n); !problem.empty())
    {
        return problem;
    }
    m_kind.assign(kind, kind + n);
    m_gpu.assign(gpu, gpu + n);
    m_bytes.assign(bytes, bytes + n);
    m_durationPs.assign(durationPs, durationPs + n);
    m_waiting.assign(n, 0);
    m_outPtr.assign(n + 1, 0);
    for (uint64_t i = 0; i < n; ++i)
    {
        m_waiting[i] = uint32_t(depPtr[i + 1] - depPtr[i]);
        for (int64_t k = depPtr[i]; k < depPtr[i + 1]; ++k)
        {
            ++m_outPtr[depIdx[k] + 1];
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        m_outPtr[i + 1] += m_outPtr[i];
    }
    m_outIdx.assign(m_outPtr[n], 0);
    std::vector<uint64_t> fill(m_outPtr.begin(), m_outPtr.end() - 1);
    for (uint64_t i = 0; i < n; ++i)
    {
        for (int64_t k = depPtr[i]; k < depPtr[i + 1]; ++k)
        {
            m_outIdx[fill[depIdx[k]]++] = i;
        }
    }
    m_startPs.assign(n, -1);
    m_finishPs.assign(n, -1);
    m_nvlinkFreePs.clear();
    m_transfers.clear();
    m_running.clear();
    SizeGpus(maxGpu);
    m_commClass.clear();
    m_blockTmpl.clear();
    m_done = 0;
    m_subsDone = 0;
    return "";
}

void
DagExecutor::SizeGpus(int32_t maxGpu)
{
    const size_t n = size_t(std::max<int32_t>(maxGpu + 1, 0));
    if (n > m_nvlinkFreePs.size())
    {
        m_nvlinkFreePs.resize(n, 0);
        m_transfers.resize(n, {});
        m_running.resize(n);
    }
}

std::string
DagExecutor::SetBlocks(const int32_t* blockTmpl,
                       uint64_t n,
                       const int64_t* tmplPtr,
                       uint64_t nTemplates,
                       const int32_t* subGpu,
                       const int64_t* subBytes,
                       const int64_t* subDurationPs,
                       const int64_t* subDepPtr,
                       const int64_t* subDepIdx,
                       uint64_t nSubs)
{
    NS_ASSERT_MSG(m_done == 0, "blocks are set before the graph runs");
    if (n != m_kind.size())
    {
        return "block templates for " + std::to_string(n) + " ops, the graph has " + std::to_string(m_kind.size());
    }
    if (tmplPtr[0] != 0 || uint64_t(tmplPtr[nTemplates]) != nSubs || subDepPtr[0] != 0)
    {
        return "block template pointers must start at 0 and end at the number of subs";
    }
    int32_t maxGpu = -1;
    double busyPs = 0;
    std::vector<double> tmplBusyPs(nTemplates, 0.0);
    for (uint64_t t = 0; t < nTemplates; ++t)
    {
        if (tmplPtr[t + 1] < tmplPtr[t] || uint64_t(tmplPtr[t + 1] - tmplPtr[t]) >= (uint64_t(1) << kSubBits) - 1)
        {
            return "block template " + std::to_string(t) + " has decreasing pointers or more subs than a launch "
                   "key holds";
        }
        for (int64_t s = tmplPtr[t]; s < tmplPtr[t + 1]; ++s)
        {
            if (subGpu[s] < 0 || subBytes[s] <= 0 || subDurationPs[s] < 0 || subDepPtr[s + 1] < subDepPtr[s])
            {
                return "sub " + std::to_string(s) + " of block template " + std::to_string(t) +
                       " has no GPU, no bytes, a negative duration or decreasing dep pointers";
            }
            for (int64_t k = subDepPtr[s]; k < subDepPtr[s + 1]; ++k)
            {
                if (subDepIdx[k] < 0 || subDepIdx[k] >= s - tmplPtr[t])
                {
                    return "sub " + std::to_string(s) + " of block template " + std::to_string(t) +
                           " depends on a sub that is not an earlier one of its template";
                }
            }
            maxGpu = std::max(maxGpu, subGpu[s]);
            tmplBusyPs[t] += NvlinkWirePs(subBytes[s]) + double(subDurationPs[s]) +
                             double(m_nvlinkLatency.GetTimeStep());
        }
    }
    for (uint64_t i = 0; i < n; ++i)
    {
        const bool isBlock = m_kind[i] == uint8_t(DagOpKind::BLOCK);
        if (isBlock != (blockTmpl[i] >= 0) || (isBlock && uint64_t(blockTmpl[i]) >= nTemplates))
        {
            return "op " + std::to_string(i) + (isBlock ? " is a BLOCK op without a valid template"
                                                        : " is not a BLOCK op but names a template");
        }
        busyPs += isBlock ? tmplBusyPs[blockTmpl[i]] : 0.0;
    }
    if (busyPs > kMaxTotalBusyPs)
    {
        return "the BLOCK ops' copies add up to more busy time than ns-3's clock holds: raise "
               "DagExecutor::NvlinkDataRate or lower DagExecutor::NvlinkLatency";
    }
    m_blockTmpl.assign(blockTmpl, blockTmpl + n);
    m_tmplPtr.assign(tmplPtr, tmplPtr + nTemplates + 1);
    m_subGpu.assign(subGpu, subGpu + nSubs);
    m_subBytes.assign(subBytes, subBytes + nSubs);
    m_subDurationPs.assign(subDurationPs, subDurationPs + nSubs);
    m_subDeps.assign(nSubs, 0);
    m_subOutPtr.assign(nSubs + 1, 0);
    for (uint64_t t = 0; t < nTemplates; ++t)
    {
        for (int64_t s = tmplPtr[t]; s < tmplPtr[t + 1]; ++s)
        {
            m_subDeps[s] = uint32_t(subDepPtr[s + 1] - subDepPtr[s]);
            for (int64_t k = subDepPtr[s]; k < subDepPtr[s + 1]; ++k)
            {
                ++m_subOutPtr[tmplPtr[t] + subDepIdx[k] + 1];
            }
        }
    }
    for (uint64_t s = 0; s < nSubs; ++s)
    {
        m_subOutPtr[s + 1] += m_subOutPtr[s];
    }
    m_subOutIdx.assign(m_subOutPtr[nSubs], 0);
    std::vector<uint64_t> fill(m_subOutPtr.begin(), m_subOutPtr.end() - 1);
    for (uint64_t t = 0; t < nTemplates; ++t)
    {
        for (int64_t s = tmplPtr[t]; s < tmplPtr[t + 1]; ++s) // in local order: each sub's dependents increase
        {
            for (int64_t k = subDepPtr[s]; k < subDepPtr[s + 1]; ++k)
            {
                m_subOutIdx[fill[tmplPtr[t] + subDepIdx[k]]++] = uint32_t(s - tmplPtr[t]);
            }
        }
    }
    SizeGpus(maxGpu);
    return "";
}

std::string
DagExecutor::BusyTimeProblem(const uint8_t* kind, const int64_t* bytes, const int64_t* durationPs, uint64_t n) const
{
    // The ops' busy times, added up, bound when the last one can end: kept far inside ns-3's clock, or a copy
    // at a tiny NVLink rate would schedule its end at a wrapped-around, negative time.
    double computePs = 0;
    double nvlinkPs = 0;
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
    m_failedAtPs = Simulator::Now().GetTimeStep();
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
    const int64_t nowPs = Simulator::Now().GetTimeStep();
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
        QueueLaunch(m_launchGroup.empty() ? 0 : m_launchGroup[op], op << kSubBits, kNoSlot, 0);
        break;
    case DagOpKind::BLOCK:
        BeginBlock(op, ready);
        break;
    }
}

void
DagExecutor::QueueLaunch(uint32_t group, uint64_t key, uint32_t slot, uint32_t sub)
{
    // Ops that take a GPU's copy engine or a NIC's queue in turn are launched together, in op order, after
    // every event of this instant scheduled before now: which of two ops ready at the same time goes first
    // then depends on the graph alone, not on the order ns-3 ran the events that readied them.
    m_launch[group].push_back({key, slot, sub});
    if (!m_launchPending[group])
    {
        m_launchPending[group] = 1;
        Simulator::ScheduleNow(&DagExecutor::Launch, this, group);
    }
}

void
DagExecutor::BeginBlock(uint64_t op, std::vector<uint64_t>& ready)
{
    NS_ASSERT_MSG(!m_blockTmpl.empty() && m_blockTmpl[op] >= 0, "BLOCK op " << op << " has no template (SetBlocks)");
    const uint32_t tmpl = uint32_t(m_blockTmpl[op]);
    const uint64_t first = m_tmplPtr[tmpl];
    const uint32_t size = uint32_t(m_tmplPtr[tmpl + 1] - first);
    if (size == 0)
    {
        ready.push_back(op);
        return;
    }
    uint32_t slot;
    if (m_freeSlots.empty())
    {
        slot = uint32_t(m_blocks.size());
        m_blocks.emplace_back();
    }
    else
    {
        slot = m_freeSlots.back();
        m_freeSlots.pop_back();
    }
    RunningBlock& run = m_blocks[slot];
    run.op = op;
    run.tmpl = tmpl;
    run.remaining = size;
    run.waiting.assign(m_subDeps.begin() + first, m_subDeps.begin() + first + size);
    const uint32_t group = m_launchGroup.empty() ? 0 : m_launchGroup[op];
    for (uint32_t s = 0; s < size; ++s)
    {
        if (run.waiting[s] == 0)
        {
            QueueLaunch(group, (op << kSubBits) | (s + 1), slot, s);
        }
    }
}

int64_t
DagExecutor::TakeCopyEngine(int32_t gpu, int64_t bytes, int64_t extraPs, int64_t nowPs)
{
    // One copy engine per sending GPU: copies of a GPU run one after another, each taking the wire time at
    // the NVLink rate plus its own extra busy time (a protocol slower than the rate); the fixed latency
    // overlaps with the next copy.
    int64_t& freePs = m_nvlinkFreePs[gpu];
    const int64_t begin = std::max(nowPs, freePs);
    freePs = begin + int64_t(NvlinkWirePs(bytes)) + extraPs;
    return freePs + m_nvlinkLatency.GetTimeStep();
}

void
DagExecutor::FinishSub(uint32_t slot, uint32_t sub)
{
    RunningBlock& run = m_blocks[slot];
    const uint64_t first = m_tmplPtr[run.tmpl];
    CountTransferOn(m_subGpu[first + sub], CommClassOf(run.op), -1);
    ++m_subsDone;
    const uint32_t group = m_launchGroup.empty() ? 0 : m_launchGroup[run.op];
    for (uint64_t k = m_subOutPtr[first + sub]; k < m_subOutPtr[first + sub + 1]; ++k)
    {
        const uint32_t next = m_subOutIdx[k];
        if (--run.waiting[next] == 0)
        {
            QueueLaunch(group, (run.op << kSubBits) | (next + 1), slot, next);
        }
    }
    if (--run.remaining == 0)
    {
        const uint64_t op = run.op;
        m_freeSlots.push_back(slot);
        Finish(op);
    }
}

void
DagExecutor::Launch(uint32_t group)
{
    NS_ASSERT_MSG(m_launchPending[group], "Launch runs only when Begin scheduled it");
    m_launchPending[group] = 0;
    std::vector<LaunchItem> items;
    items.swap(m_launch[group]);
    std::sort(items.begin(), items.end(), [](const LaunchItem& a, const LaunchItem& b) { return a.key < b.key; });
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    for (const LaunchItem& item : items)
    {
        if (item.slot != kNoSlot)
        {
            const RunningBlock& run = m_blocks[item.slot];
            const uint64_t s = m_tmplPtr[run.tmpl] + item.sub;
            CountTransferOn(m_subGpu[s], CommClassOf(run.op), +1);
            const int64_t endPs = TakeCopyEngine(m_subGpu[s], m_subBytes[s], m_subDurationPs[s], nowPs);
            Simulator::Schedule(TimeStep(endPs - nowPs), &DagExecutor::FinishSub, this, item.slot, item.sub);
            continue;
        }
        const uint64_t op = item.key >> kSubBits;
        CountTransfer(op, +1); // before the starter: an empty flow finishes inside it
        if (DagOpKind(m_kind[op]) == DagOpKind::FLOW)
        {
            m_startFlow(op);
            continue;
        }
        const int64_t endPs = TakeCopyEngine(m_gpu[op], m_bytes[op], m_durationPs[op], nowPs);
        Simulator::Schedule(TimeStep(endPs - nowPs), &DagExecutor::Finish, this, op);
    }
}

void
DagExecutor::Drain(std::vector<uint64_t>& ready)
{
    const int64_t nowPs = Simulator::Now().GetTimeStep();
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
        {op, workPs, Simulator::Now().GetTimeStep(),
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
    CountTransferOn(m_gpu[op], CommClassOf(op), delta);
}

void
DagExecutor::CountTransferOn(int32_t gpu, uint8_t cls, int delta)
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
    const int64_t nowPs = Simulator::Now().GetTimeStep();
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
DagExecutor::FlowFinished(uint64_t op)
{
    Finish(op);
}

} // namespace ns3
