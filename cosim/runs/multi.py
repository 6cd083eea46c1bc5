"""Several workloads on one fabric: training jobs, flow patterns and background traffic in one simulation.

An Experiment with ``[[workloads]]`` → :func:`plan` → :func:`run_shared` → a RunRecord. The pipeline::

    traces ─lower()/repeat()─► FlowDags ┐
    background specs ─► flow arrays ────┼─ placement: job slots → host ids ─► one DAG ─► engine.simulate_dag
    flow patterns ─► flow arrays ───────┘

Every workload keeps its own ops in one DAG the C++ executor runs: a training job's lowered ops (its ranks
on the hosts its placement gave, cosim.runs.placement), and for flow-level and background workloads one
FLOW op per flow, after a COMPUTE op on no GPU that lasts until the flow's start time. A workload's
``start_ns`` is such a delay before every op of it that has no dependency. Flows of a workload carry its
priority; on RoCE, PFC headroom is carved for the lossless workloads' priorities (and the ACK/CNP one) only,
and a lossy workload's priority is dropped instead of paused (SharedBufferMmu::LosslessPriorityMask).

Fabric: ``network.hosts`` NICs if given, else the servers the workloads ask for (filled to whole leaves),
``network.gpus_per_server`` per server (else the first training trace's, else 1); leaf-spine by default,
two servers per leaf unless ``network.hosts_per_leaf``.

Tables: as a training run's, over every workload, with a ``workload`` column (index into
``config["workloads"]``) on flows, ops, collectives and iterations; ops ranks are the job's own ranks.
Summary: the shared fabric's telemetry as for any run, and per workload ``<name>_<key>``: a training
job's training summary (iteration_time_ns, collectives, transfer slowdowns), any workload's flows,
flows_completed, fct_p50_ns, fct_p99_ns, fct_mean_ns and slowdowns; with ``alone = true`` also
``<name>_alone_iteration_time_ns`` (training) or ``<name>_alone_fct_mean_ns`` and
``<name>_sharing_slowdown`` (shared over alone: iteration time, or mean FCT), from the same workload run
on the same hosts of the idle fabric.

ECMP hashes a flow's id, a count over the whole run, so another workload's flows can move a job's flows
to other spines; on one spine, or when no two workloads share a link, a job runs as it runs alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim import engine
from cosim.collectives import DagOpKind, lower, repeat
from cosim.collectives.dag import csr_from_edges
from cosim.errors import CosimInputError
from cosim.network import telemetry, topology
from cosim.network.transport import run_attributes
from cosim.results import RunRecord
from cosim.runs import background, decompose_run, placement, time_limit, training
from cosim.runs.experiment import Experiment, Job, to_document
from cosim.values import Int
from cosim.workload import flows as patterns
from cosim.workload.trace import read_trace

#: leaf size of a shared leaf-spine when network.hosts_per_leaf is not set, in servers
DEFAULT_SERVERS_PER_LEAF = 2


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobPlan:
    """One workload resolved: its hosts, and its ops (training) or flows (every other kind)."""

    job: Job
    index: int
    hosts: np.ndarray  # int64, host node id of each slot (rank r of a training job on hosts[r])
    trace: object | None = None  # cosim.workload.trace.Trace of a training job
    dag: object | None = None  # its FlowDag, iterations chained
    flows: background.BackgroundFlows | None = None  # other kinds: start relative to the job's start

    @property
    def is_training(self) -> bool:
        """True for a training job (ops from a trace), False for flows."""
        return self.dag is not None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SharedDag:
    """The DAG of some workloads of a plan, as engine.simulate_dag takes it, and where each one's ops are."""

    columns: dict  # kind, gpu, src_node, dst_node, bytes_, duration_ns, priority, dep_ptr, dep_idx
    op_job: np.ndarray  # int32 [n_ops], workload index of each op
    first_op: dict  # workload index -> index of its first own op (a training job's DAG op 0)
    flow_ops: dict  # workload index -> int64 FLOW op of each of its flows (flow-level workloads)

    @property
    def n_ops(self) -> int:
        """Number of ops."""
        return int(self.op_job.size)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SharedPlan:
    """A shared-fabric Experiment resolved: fabric, every workload's plan, and the DAG of all of them."""

    fabric: object
    gpus_per_server: int
    jobs: tuple[JobPlan, ...]
    dag: SharedDag
    attributes: dict
    max_sim_time_ns: float  # limits.max_sim_time_ns, else derived from the workloads (cosim.runs.time_limit)

    def flows_of(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, bytes) of every FLOW op: what the fabric carries."""
        c = self.dag.columns
        flow = c["kind"] == DagOpKind.FLOW
        return c["src_node"][flow], c["dst_node"][flow], c["bytes_"][flow]


# --- planning (pure, apart from reading trace files) ------------------------------------------------------

def _trace_of(job: Job, gpus_per_server: int | None):
    work = job.work
    if work.trace is not None:
        return training.checked_trace(read_trace(work.trace), str(work.trace))
    if work.model is None:
        raise CosimInputError(f"workloads.{job.name}", "no training workload given",
                              "set trace (a cosim trace file) or model")
    return work.generate_trace(gpus_per_server)


def _gpus_per_server(exp: Experiment, traces: dict) -> int:
    if exp.network.gpus_per_server is not None:
        return exp.network.gpus_per_server
    for trace in traces.values():
        gps = trace.spec_dict().get("hardware", {}).get("gpus_per_host", 8)
        return Int(minimum=1).convert(gps, "trace hardware.gpus_per_host")
    return 1


def _servers_needed(exp: Experiment, traces: dict, gps: int) -> int:
    """Servers the workloads ask for: their policy servers plus the servers their explicit hosts are on
    (host h on server h // gps, as every generator numbers them)."""
    asked, named = 0, set()
    for i, j in enumerate(exp.workloads):
        if j.hosts is not None:
            named |= {h // gps for h in j.hosts}
        else:
            asked += -(-traces[i].n_ranks // gps) if i in traces else j.server_count
    return max(asked + len(named), max(named, default=-1) + 1, 1)


def build_fabric(exp: Experiment, traces: dict, gps: int):
    """The shared fabric (module docstring: its size and leaves)."""
    net = exp.network
    per_leaf = net.hosts_per_leaf or gps * DEFAULT_SERVERS_PER_LEAF
    if net.hosts is not None:
        if net.hosts % gps:
            raise CosimInputError("network.hosts", f"{net.hosts} NICs do not fill servers of {gps} GPUs",
                                  f"use a multiple of {gps}")
        return topology.for_network(net, servers=net.hosts // gps, gpus_per_server=gps, hosts_per_leaf=per_leaf)
    servers = _servers_needed(exp, traces, gps)
    if servers * gps < 2:
        servers = 2
    return topology.for_network(net, servers=servers, gpus_per_server=gps, hosts_per_leaf=per_leaf,
                                fill_leaves=True, hosts_field="network.hosts")


def _demands(exp: Experiment, traces: dict, gps: int) -> list[placement.Demand]:
    out = []
    for i, j in enumerate(exp.workloads):
        where = f"workloads.{j.name}." + ("hosts" if j.hosts is not None else "placement")
        seed = exp.seed if j.placement_seed is None else j.placement_seed
        if i in traces and j.hosts is not None and len(j.hosts) != traces[i].n_ranks:
            raise CosimInputError(where, f"lists {len(j.hosts)} hosts for {traces[i].n_ranks} ranks",
                                  "give one host per rank")
        servers = -(-traces[i].n_ranks // gps) if i in traces else j.server_count
        out.append(placement.Demand(name=j.name, where=where, servers=servers, policy=j.placement, hosts=j.hosts,
                                    seed=seed, rank_servers=gps if i in traces else 0))
    return out


def _host_link_gbps(fabric) -> np.ndarray:
    """float64 [n_hosts]: the rate of every host's link, Gbit/s."""
    rate = np.zeros(fabric.n_nodes)
    for end in (fabric.link_a, fabric.link_b):
        host = fabric.node_kind[end] == topology.HOST
        rate[end[host]] = fabric.link_rate_bps[host] / 1e9
    return rate


def _lowered(exp: Experiment, job: Job, trace, gps: int):
    work = job.work
    limit = training.dag_op_limit()
    if training.dag_ops_lower_bound(trace, work.chunk_bytes) * work.iterations > limit:
        raise CosimInputError(f"workloads.{job.name}.chunk_bytes", f"the job would lower to more than the "
                              f"{limit:.3g} DAG ops this machine can hold", "raise chunk_bytes or run fewer iterations")
    dag = lower(trace, gpus_per_server=gps, chunk_bytes=work.chunk_bytes, algorithm=work.algorithm)
    return repeat(dag, work.iterations) if work.iterations > 1 else dag


def _flows_of(exp: Experiment, i: int, job: Job, hosts: np.ndarray, slots: dict, link_gbps: np.ndarray):
    """The flows of a non-training workload (start relative to its start)."""
    rng = np.random.default_rng([exp.seed, i])
    work, where = job.work, f"workloads.{job.name}"
    try:
        if job.kind == "flows":
            fs = (patterns.incast(hosts, size_bytes=work.flow_bytes) if work.pattern == "incast"
                  else patterns.permutation(hosts, size_bytes=work.flow_bytes))
            return background.BackgroundFlows(src=fs.src.astype(np.int64), dst=fs.dst.astype(np.int64),
                                              size_bytes=fs.size_bytes, start_ns=fs.start_ns)
        if job.kind == "synthetic":
            return background.synthetic(work, hosts, link_gbps[hosts], rng)
        refs = work.clients if job.kind == "storage" else work.writers
        kinds = ("training", "flows") if job.kind == "storage" else ("training",)
        refs = refs or tuple(j.name for j in exp.workloads if j.kind in kinds)
        peers = np.concatenate([slots[r] for r in refs]) if refs else np.zeros(0, np.int64)
        if job.kind == "storage":
            return background.storage(work, hosts, peers, link_gbps[hosts], rng)
        return background.checkpoint(work, hosts, peers)
    except CosimInputError as exc:
        field = exc.field.replace("workload", where, 1) if exc.field.startswith("workload") else exc.field
        raise CosimInputError(field, exc.problem, exc.fix) from None


def plan(exp: Experiment) -> SharedPlan:
    """Resolve a shared-fabric ``exp``: traces, fabric, placement, lowered jobs, background flows, one DAG."""
    if not exp.is_shared:
        raise ValueError("plan() takes an Experiment with [[workloads]]")
    hint = exp.network.gpus_per_server
    traces = {i: _trace_of(j, hint) for i, j in enumerate(exp.workloads) if j.kind == "training"}
    gps = _gpus_per_server(exp, traces)
    fabric = build_fabric(exp, traces, gps)
    servers = placement.server_map(fabric, gps)
    placed = placement.place(servers, _demands(exp, traces, gps))
    # the hosts a job's traffic uses: a training job's ranks, every NIC of any other workload
    slots = {j.name: (placed[i][:traces[i].n_ranks] if i in traces else placed[i])
             for i, j in enumerate(exp.workloads)}
    link_gbps = _host_link_gbps(fabric)
    jobs = []
    for i, j in enumerate(exp.workloads):
        if i in traces:
            jobs.append(JobPlan(job=j, index=i, hosts=slots[j.name], trace=traces[i],
                                dag=_lowered(exp, j, traces[i], gps)))
        else:
            jobs.append(JobPlan(job=j, index=i, hosts=slots[j.name],
                                flows=_flows_of(exp, i, j, slots[j.name], slots, link_gbps)))
    dag = assemble(jobs)
    limit = training.dag_op_limit()
    if dag.n_ops > limit:
        raise CosimInputError("workloads", f"the workloads lower to {dag.n_ops:.3g} DAG ops, more than the "
                              f"{limit:.3g} this machine can hold", "shorten the background traffic or the jobs")
    attributes = run_attributes(exp.network, exp.seed, lossless_mask=exp.lossless_priority_mask())
    limit = exp.limits.max_sim_time_ns
    if limit is None:
        limit = time_limit.limit_ns(_ideal_ns(exp, fabric, jobs))
    return SharedPlan(fabric=fabric, gpus_per_server=gps, jobs=tuple(jobs), dag=dag, attributes=attributes,
                      max_sim_time_ns=limit)


def _ideal_ns(exp: Experiment, fabric, jobs) -> float:
    """Ideal time of the workloads together: the longest of their starts plus their own ideal times."""
    nic = training.nic_payload_bytes_per_s(exp.network)
    ends = [p.job.start_ns + (time_limit.dag_ideal_ns(p.dag, nic) if p.is_training else
                              time_limit.flows_ideal_ns(fabric, p.flows.src, p.flows.dst, p.flows.size_bytes,
                                                        p.flows.start_ns)) for p in jobs]
    return max(ends, default=0.0)


# --- one DAG of several workloads -----------------------------------------------------------------------

def _training_piece(p: JobPlan, base: int) -> dict:
    d, hosts, job = p.dag, p.hosts, p.job
    delay = job.start_ns > 0
    off = base + int(delay)
    flow = d.kind == DagOpKind.FLOW
    rank = np.asarray(d.rank, np.int64)
    owner, dep = d.dep_owner() + off, np.asarray(d.dep_idx, np.int64) + off
    if delay:  # every op without a dependency waits for the start delay
        roots = np.flatnonzero(np.diff(d.dep_ptr) == 0) + off
        owner, dep = np.concatenate([owner, roots]), np.concatenate([dep, np.full(roots.size, base)])
    head = lambda x, a: np.concatenate([[x], a]) if delay else a  # noqa: E731
    return {
        "kind": head(DagOpKind.COMPUTE, np.asarray(d.kind, np.uint8)),
        "gpu": head(-1, np.where(rank >= 0, hosts[np.maximum(rank, 0)], -1)),
        "src_node": head(-1, np.where(flow, hosts[np.maximum(d.src, 0)], -1)),
        "dst_node": head(-1, np.where(flow, hosts[np.maximum(d.dst, 0)], -1)),
        "bytes_": head(0, np.asarray(d.bytes, np.int64)),
        "duration_ns": head(job.start_ns, np.asarray(d.duration_ns, np.float64)),
        "priority": np.full(d.n_ops + int(delay), job.priority, np.uint8),
        "owner": owner, "dep": dep, "first": off, "flow_ops": None,
    }


def _flow_piece(p: JobPlan, base: int) -> dict:
    f, job = p.flows, p.job
    start = f.start_ns + job.start_ns
    delayed = start > 0
    width = 1 + delayed.astype(np.int64)  # a delay op before every flow that does not start at once
    first = base + np.cumsum(width) - width
    flow_op = first + delayed
    n = int(width.sum())
    kind = np.full(n, DagOpKind.FLOW, np.uint8)
    kind[first[delayed] - base] = DagOpKind.COMPUTE
    src, dst, size, duration = (np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int64),
                                np.zeros(n, np.float64))
    local = flow_op - base
    src[local], dst[local], size[local] = f.src, f.dst, f.size_bytes
    duration[first[delayed] - base] = start[delayed]
    return {"kind": kind, "gpu": np.full(n, -1, np.int64), "src_node": src, "dst_node": dst, "bytes_": size,
            "duration_ns": duration, "priority": np.full(n, job.priority, np.uint8),
            "owner": flow_op[delayed], "dep": first[delayed], "first": base, "flow_ops": flow_op}


def assemble(jobs, which=None) -> SharedDag:
    """One DAG of the workloads ``which`` (indices into ``jobs``; default all), in workload order."""
    which = range(len(jobs)) if which is None else which
    pieces, base = {}, 0
    for i in which:
        p = jobs[i]
        piece = _training_piece(p, base) if p.is_training else _flow_piece(p, base)
        pieces[i] = piece
        base += piece["kind"].size
    cat = lambda key, dtype: (np.concatenate([np.asarray(x[key], dtype) for x in pieces.values()])  # noqa: E731
                              if pieces else np.zeros(0, dtype))
    columns = {"kind": cat("kind", np.uint8), "gpu": cat("gpu", np.int32), "src_node": cat("src_node", np.int32),
               "dst_node": cat("dst_node", np.int32), "bytes_": cat("bytes_", np.int64),
               "duration_ns": cat("duration_ns", np.float64), "priority": cat("priority", np.uint8)}
    columns["dep_ptr"], columns["dep_idx"] = csr_from_edges(cat("owner", np.int64), cat("dep", np.int64), base)
    op_job = np.concatenate([np.full(x["kind"].size, i, np.int32) for i, x in pieces.items()]) if pieces \
        else np.zeros(0, np.int32)
    return SharedDag(columns=columns, op_job=op_job, first_op={i: x["first"] for i, x in pieces.items()},
                     flow_ops={i: x["flow_ops"] for i, x in pieces.items() if x["flow_ops"] is not None})


# --- running ----------------------------------------------------------------------------------------------

def simulate(exp: Experiment, p: SharedPlan, dag: SharedDag | None = None, *, progress=None,
             snapshot_ns=()) -> engine.DagOutput:
    """Run ``dag`` (default: every workload of ``p``) on ``p``'s fabric in ns-3."""
    dag = p.dag if dag is None else dag
    return engine.simulate_dag(p.fabric, **dag.columns, seed=exp.seed, attributes=p.attributes,
                               queue_sample_interval_ns=exp.telemetry.queue_sample_interval_ns,
                               max_sim_time_ns=p.max_sim_time_ns, progress=progress,
                               snapshot_ns=snapshot_ns)


def _flow_summary(flows: dict, sim_time_ns: float) -> dict:
    out = telemetry.summarize(flows, {}, {}, sim_time_ns=sim_time_ns)
    for key in ("sim_time_ns", "drops", "max_queue_bytes"):
        out.pop(key, None)
    fct = np.asarray(flows["fct_ns"], np.float64)
    fct = fct[np.isfinite(fct)]
    if fct.size:
        out["fct_mean_ns"] = float(fct.mean())
    return out


def _job_results(p: SharedPlan, j: JobPlan, dag: SharedDag, out, flows: dict) -> tuple[dict, dict, np.ndarray]:
    """(summary without prefix, training tables or {}, the job's rows of ``flows``) of job ``j`` in ``out``.

    Stores the job's flows' transfer rows (rows of ``flows``) in flows["transfer"]."""
    op_of_flow = out.flow_op
    rows = np.flatnonzero(dag.op_job[op_of_flow] == j.index)
    mine = {k: np.asarray(x)[rows] for k, x in flows.items() if k != "transfer"}
    summary = _flow_summary(mine, out.network.sim_time_ns)
    tables = {}
    if j.is_training:
        lo = dag.first_op[j.index]
        hi = lo + j.dag.n_ops
        tables = training.training_tables(j.trace, j.dag, out.op_start_ns[lo:hi], out.op_finish_ns[lo:hi])
        compute = tables.pop("_compute_time_ns")
        its = tables["iterations"]
        if j.job.start_ns > 0 and its["time_ns"].size:  # the first iteration starts at the job's start
            its["time_ns"][0] -= j.job.start_ns
            its["exposed_comm_ns"][0] = max(its["time_ns"][0] - compute, 0.0)
        summary |= training.training_summary(tables, compute)
        summary |= training.transfer_summary(p.fabric, out.network, j.dag, op_of_flow[rows] - lo, mine)
        flows["transfer"][rows] = rows[mine["transfer"]]
        summary["n_ranks"] = j.trace.n_ranks
    else:
        flows["transfer"][rows] = rows
    return summary, tables, rows


def run_shared(exp: Experiment, *, progress=None, planned: SharedPlan | None = None, jobs: int = 1,
               outcome=None) -> RunRecord:
    """Simulate every workload of ``exp`` on its shared fabric (and each ``alone`` one by itself); return
    the RunRecord (module docstring: tables and summary keys). ``jobs``: local processes for the
    independent parts of the run (cosim.runs.decompose_run); ``outcome``: (engine.DagOutput, decomposition
    info) of the shared run if already simulated (cosim.runs.decompose_batch)."""
    p = planned if planned is not None else plan(exp)
    out, how = outcome if outcome is not None else decompose_run.simulate_dag(
        exp, p.fabric, p.dag.columns, gpu_node=np.arange(p.fabric.n_nodes), attributes=p.attributes,
        max_sim_time_ns=p.max_sim_time_ns, progress=progress, jobs=jobs)
    net, fop, c = out.network, out.flow_op, p.dag.columns
    tables = telemetry.network_tables(p.fabric, net, src=c["src_node"][fop], dst=c["dst_node"][fop],
                                      size_bytes=c["bytes_"][fop], start_ns=out.flow_start_ns)
    flows = tables["flows"]
    flows["transfer"] = np.arange(fop.size, dtype=np.int64)
    flows["workload"] = p.dag.op_job[fop].astype(np.int32)
    summary = telemetry.network_summary(p.fabric, net, tables, queue_sample_interval_ns=exp.telemetry
                                        .queue_sample_interval_ns)
    parts: dict[str, list] = {"ops": [], "collectives": [], "iterations": []}
    for j in p.jobs:
        own, train, _ = _job_results(p, j, p.dag, out, flows)
        for group, table in train.items():
            table["workload"] = np.full(next(iter(table.values())).size, j.index, np.int32)
            parts[group].append(table)
        if j.job.alone:
            key, alone = _alone(exp, p, j)
            own[f"alone_{key}"] = alone
            if isinstance(own.get(key), float) and isinstance(alone, float) and alone > 0:
                own["sharing_slowdown"] = own[key] / alone
        summary |= {f"{j.job.name}_{k}": x for k, x in own.items()}
    for group, items in parts.items():
        if items:
            tables[group] = {k: np.concatenate([t[k] for t in items]) for k in items[0]}
    done = np.isfinite(out.op_finish_ns)
    summary |= {"mtu_bytes": net.mtu_bytes, "header_bytes": net.header_bytes, "n_dag_ops": p.dag.n_ops,
                "n_dag_ops_finished": int(done.sum()), "n_flows": int(fop.size), "n_workloads": len(p.jobs)}
    if net.status == "complete" and not done.all():
        summary["status"] = "stalled"
    config = {"experiment": to_document(exp), "workloads": [describe_job(p, j) for j in p.jobs],
              "fabric": p.fabric.describe(), "attributes": p.attributes, "decomposition": how}
    provenance = telemetry.provenance(seed=exp.seed, wall_time_s=net.wall_time_s)
    return RunRecord(name=exp.name, config=config, provenance=provenance, summary=summary, **tables)


def _alone(exp: Experiment, p: SharedPlan, j: JobPlan) -> tuple[str, float | None]:
    """(headline key, its value) of job ``j`` run alone on the same hosts of the idle fabric: the mean
    iteration time of a training job, the mean FCT of any other."""
    dag = assemble(p.jobs, [j.index])
    out = simulate(exp, p, dag)
    fop = out.flow_op
    c = dag.columns
    tables = telemetry.network_tables(p.fabric, out.network, src=c["src_node"][fop], dst=c["dst_node"][fop],
                                      size_bytes=c["bytes_"][fop], start_ns=out.flow_start_ns)
    tables["flows"]["transfer"] = np.arange(fop.size, dtype=np.int64)
    alone, _, _ = _job_results(p, j, dag, out, tables["flows"])
    key = "iteration_time_ns" if j.is_training else "fct_mean_ns"
    return key, alone.get(key)


def describe_job(p: SharedPlan, j: JobPlan) -> dict:
    """Where workload ``j`` runs and what it sends (JSON-able; stored as config["workloads"])."""
    hosts = np.asarray(j.hosts, np.int64)
    server = p.fabric.host_server[hosts]
    leaves = placement.server_map(p.fabric, p.gpus_per_server).leaf[np.unique(server)]
    d = {"name": j.job.name, "kind": j.job.kind, "hosts": hosts.tolist(), "servers": sorted(set(server.tolist())),
         "leaves": sorted(set(leaves.tolist())), "priority": j.job.priority, "lossless": j.job.lossless,
         "start_ns": j.job.start_ns}
    if j.is_training:
        d |= {"ranks": j.trace.n_ranks, "dag_ops": j.dag.n_ops}
    else:
        d |= {"flows": j.flows.n_flows, "payload_bytes": int(j.flows.size_bytes.sum())}
    return d


def workload_summaries(summary: dict, names) -> dict[str, dict]:
    """Per workload name, its summary keys without the ``<name>_`` prefix (for per-workload tables)."""
    return {n: {k[len(n) + 1:]: x for k, x in summary.items() if k.startswith(f"{n}_")} for n in names}


def workload_table(records) -> str:
    """The terminal table of shared-fabric runs: a column per run and workload (``roce job0``), a row per
    per-workload metric (iteration time, collectives, FCTs, slowdown from sharing)."""
    from cosim.results.metrics import WORKLOAD_KEYS, summary_table  # noqa: PLC0415

    columns = {}
    for r in records:
        names = [w["name"] for w in r.config.get("workloads", [])]
        for name, own in workload_summaries(r.summary, names).items():
            columns[f"{r.name} {name}"] = {k: x for k, x in own.items()
                                           if k in WORKLOAD_KEYS or k.startswith("coll_")}
    return summary_table(columns)

