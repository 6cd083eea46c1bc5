"""A run compiled once: :func:`compile` turns an Experiment into a :class:`RunPlan` that everything after
reads (the engine, the record, the dry run, the estimates, decomposition, exports).

    plan = compile(exp)            # fabric, placement, one DAG, attributes, time limit, faults
    plan.dag.n_ops, plan.fabric.n_hosts, plan.attributes["ns3::..."]

Steps, in order (each job's kind does its part, cosim.kinds):

1. jobs: the ``[[workloads]]`` of the experiment, or its one ``[workload]`` as a one-job plan;
2. load: what each job needs before the fabric (a trace, requests);
3. fabric: ``network.hosts`` NICs when given, else the servers the jobs ask for (:func:`fabric_for`);
4. placement: hosts for every job (cosim.plan.placement; a lone job takes the servers in order);
5. lowering: each job's ops on its hosts, joined into one :class:`EngineDag` in host node ids;
6. attributes (the only place they are composed), time limit (explicit or derived), resolved faults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from cosim import engine, kinds
from cosim import faults as cosim_faults
from cosim.collectives import DagOpKind
from cosim.collectives.dag import BlockTemplates
from cosim.errors import CosimInputError
from cosim.kinds import time_limit, training
from cosim.kinds.base import JobPlan, LowerContext, Piece
from cosim.network import fabrics
from cosim.network.transport import FAST_FORWARD_SAMPLING, run_attributes
from cosim.parallel.partition import Partitioning, partition
from cosim.plan import placement, sizes
from cosim.spec import Experiment, Job

#: leaf size of a fabric with network.hosts and no network.hosts_per_leaf, NICs: this many, or two servers
MIN_HOSTS_PER_LEAF = 4


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class EngineDag:
    """The one DAG of a run, as the engine takes it: every job's ops in job order, in host node ids."""

    kind: np.ndarray  # uint8 [n], DagOpKind
    gpu: np.ndarray  # int32 [n], host node id of the GPU that runs the op (-1: none)
    src_node: np.ndarray  # int32 [n], source host of a FLOW op (-1 otherwise)
    dst_node: np.ndarray  # int32 [n], destination host of a FLOW op (-1 otherwise)
    bytes_: np.ndarray  # int32 or int64 [n], bytes a FLOW or NVLINK op moves
    duration_ns: np.ndarray  # float32 or float64 [n], duration of a COMPUTE op, ns
    priority: np.ndarray  # uint8 [n], traffic class of a FLOW op
    dep_ptr: np.ndarray  # int32 or int64 [n + 1], CSR of every op's dependencies
    dep_idx: np.ndarray  # int32 or int64 (a lone job: its FlowDag's own arrays)
    job_index: np.ndarray  # int32 [n_parts], the job (RunPlan.jobs index) of each part, in op order
    job_start_op: np.ndarray  # int64 [n_parts], first op of each part (its start-delay op, if any)
    first_op: np.ndarray  # int64 [n_parts], each part's own op 0 (after its start delay, if any)
    coll_start_op: np.ndarray  # int64 [n_collectives], start barrier op of every collective call
    coll_end_op: np.ndarray  # int64 [n_collectives], its end barrier op
    comm_class: np.ndarray | None = None  # uint8 [n], CommClass of every op (None: every transfer is NCCL's)
    block: np.ndarray | None = None  # int32 [n], template of every BLOCK op, -1 for the others (None: no BLOCK op)
    block_templates: BlockTemplates | None = None  # the copies BLOCK ops stand for, GPUs as host node ids

    @property
    def n_ops(self) -> int:
        """Number of ops."""
        return int(self.kind.size)

    def n_expanded_ops(self) -> int:
        """The ops this DAG stands for with every BLOCK op's subs materialized as NVLINK and FLOW ops."""
        return self.n_ops + int(self.block_sizes().sum()) - int(np.count_nonzero(self.kind == DagOpKind.BLOCK))

    def n_flows(self) -> int:
        """The flows the run starts: one per FLOW op and per FLOW sub of every BLOCK op."""
        return int(np.count_nonzero(self.kind == DagOpKind.FLOW)) + self.n_block_flows()

    def n_block_flows(self) -> int:
        """The flows the BLOCK ops start (their FLOW subs)."""
        return 0 if self.block is None else self.block_templates.n_flows(self.block)

    def block_sizes(self) -> np.ndarray:
        """int64 [n]: the subs every op stands for: its template's for a BLOCK op, 0 for the others."""
        if self.block is None:
            return np.zeros(self.n_ops, np.int64)
        return np.where(self.block >= 0, self.block_templates.sizes()[np.maximum(self.block, 0)], 0)

    def columns(self) -> dict[str, np.ndarray]:
        """The columns engine.simulate_dag takes (``comm_class`` only where some transfer is not NCCL's,
        ``block`` and ``block_templates`` only where there are BLOCK ops)."""
        names = ("kind", "gpu", "src_node", "dst_node", "bytes_", "duration_ns", "priority", "dep_ptr", "dep_idx")
        return {k: getattr(self, k) for k in names} | ({} if self.comm_class is None else
                                                       {"comm_class": self.comm_class}) | (
            {} if self.block is None else {"block": self.block, "block_templates": self.block_templates})

    def job_of(self, ops: np.ndarray) -> np.ndarray:
        """int32: the job (RunPlan.jobs index) each of ``ops`` belongs to."""
        return self.job_index[np.searchsorted(self.job_start_op, ops, side="right") - 1]

    def flows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, bytes, count) of what the fabric carries: every FLOW op (count 1), then every FLOW sub of
        the templates (count: the BLOCK ops that run it). The flows of a BLOCK op are never listed one by
        one: a 16,384-GPU iteration has 10^8 of them."""
        return flow_classes(self.columns())

    def flow_endpoints(self, flow_op: np.ndarray, flow_sub: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """(src, dst, int64 bytes) of flows that carried ``flow_op`` (a FLOW op, or the BLOCK op of the sub
        ``flow_sub`` names; None or -1: a FLOW op's flow), as engine.DagOutput lists them."""
        src, dst, size = self.src_node[flow_op], self.dst_node[flow_op], self.bytes_[flow_op].astype(np.int64)
        if flow_sub is not None and (sub := flow_sub >= 0).any():
            t = self.block_templates
            g = t.ptr[self.block[flow_op[sub]]] + flow_sub[sub]
            src[sub], dst[sub], size[sub] = t.gpu[g], t.dst[g], t.bytes[g]
        return src, dst, size


def flow_classes(columns: dict, ops: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(src, dst, int64 bytes, int64 count) of the flows of DAG ``columns`` (EngineDag.columns) among ``ops``
    (None: every op): each FLOW op's once, then each FLOW sub of a template once, counted as many times as
    BLOCK ops among ``ops`` run it."""
    kind = np.asarray(columns["kind"])
    sel = np.arange(kind.size) if ops is None else np.asarray(ops)
    flow = sel[kind[sel] == DagOpKind.FLOW]
    out = [np.asarray(columns[k])[flow] for k in ("src_node", "dst_node")]
    out += [np.asarray(columns["bytes_"])[flow].astype(np.int64), np.ones(flow.size, np.int64)]
    t = columns.get("block_templates")
    if t is None or not t.has_flows():
        return tuple(out)
    block = np.asarray(columns["block"])[sel]
    runs = np.bincount(block[block >= 0], minlength=t.n_templates)  # BLOCK ops per template
    subs = t.flow_subs()
    count = runs[t.template_of_sub()[subs]].astype(np.int64)
    subs, count = subs[count > 0], count[count > 0]
    return tuple(np.concatenate([x, y]) for x, y in zip(out, (t.gpu[subs], t.dst[subs], t.bytes[subs], count)))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunPlan:
    """An Experiment compiled (module docstring)."""

    experiment: Experiment
    fabric: object  # cosim.network.topology.Fabric
    gpus_per_server: int
    jobs: tuple[JobPlan, ...]
    dag: EngineDag
    attributes: dict  # ns-3 attribute -> value, everything the run sets
    max_sim_time_ns: float  # limits.max_sim_time_ns, else derived from the jobs (cosim.kinds.time_limit)
    faults: cosim_faults.FaultPlan | None  # None without faults
    host_of: np.ndarray | None  # int64 [n_ranks]: host of every rank of the run's one ranked job (rankN faults)
    #: limits.partitions > 1: the partitions of the parallel simulation (cosim.parallel), else None
    partitioning: Partitioning | None = None

    @property
    def whole_only(self) -> str | None:
        """Why the run cannot be simulated in parts, or None."""
        if self.faults is not None or self.experiment.limits.collective_timeout_ns > 0:
            return "faults or a collective timeout apply to the whole run"
        if self.partitioning is not None:
            return f"it is split into {self.partitioning.n_partitions} partitions for parallel simulation instead"
        return None


def jobs_of(exp: Experiment) -> tuple[Job, ...]:
    """The experiment's jobs: its ``[[workloads]]``, or its one ``[workload]`` as a job named by its kind."""
    return exp.workloads or (Job(name=exp.workload.kind, work=exp.workload),)


def compile(exp: Experiment, trace=None, *, n_channels: int | None = None) -> RunPlan:  # noqa: A001
    """The RunPlan of ``exp`` (``trace``: an in-memory Trace for its one training workload; ``n_channels``:
    rings of a ring collective across servers, default two per NIC of a server)."""
    jobs = jobs_of(exp)
    kind = [kinds.kind_of(j.kind) for j in jobs]
    for k, j in zip(kind, jobs):
        k.check(exp, j)
    if trace is None:
        sizes.check_plannable(exp)
    net = exp.network
    loaded = [k.load(exp, j, net.gpus_per_server, trace) for k, j in zip(kind, jobs)]
    gps = net.gpus_per_server or next((g for g in (k.gpus_per_server(x) for k, x in zip(kind, loaded)) if g), None) \
        or (8 if net.topology == "rail-optimized" else 1)
    ranks = [k.ranks(x) for k, x in zip(kind, loaded)]
    fabric = fabric_for(exp, jobs, ranks, gps)
    slots = _place(exp, fabric, jobs, ranks, gps)
    ctx = LowerContext(experiment=exp, fabric=fabric, gpus_per_server=gps, slots=slots,
                       index_of={j.name: i for i, j in enumerate(jobs)}, link_gbps=time_limit.host_rate_bytes_per_s(fabric) * 8 / 1e9,
                       others=jobs, n_channels=n_channels)
    planned = []
    for i, (k, j, x) in enumerate(zip(kind, jobs, loaded)):
        state, piece = k.lower(j, x, slots[j.name], ctx)
        planned.append(JobPlan(job=j, index=i, kind=k, hosts=slots[j.name], state=state, piece=piece))
    dag = assemble(planned)
    limit = training.dag_op_limit()
    if dag.n_ops > limit:
        raise CosimInputError("workloads" if exp.workloads else "workload.chunk_bytes",
                              f"the run lowers to {dag.n_ops:.3g} DAG ops, more than the {limit:.3g} this machine "
                              "can hold", "raise chunk_bytes, or shorten the workloads")
    stop_ns = _time_limit(exp, fabric, planned)
    ranked = [p for p in planned if p.kind.ranked]
    host_of = ranked[0].hosts if len(ranked) == 1 else None
    faults = cosim_faults.plan(exp.faults, fabric, host_of, seed=exp.seed, max_sim_time_ns=stop_ns)
    dag = with_stragglers(dag, planned, faults)
    return RunPlan(experiment=exp, fabric=fabric, gpus_per_server=gps, jobs=tuple(planned), dag=dag,
                   attributes=_attributes(exp, planned, dag), max_sim_time_ns=stop_ns, faults=faults,
                   host_of=host_of, partitioning=_partitioning(exp, fabric, planned, dag))


def _partitioning(exp: Experiment, fabric, planned, dag: EngineDag) -> Partitioning | None:
    """limits.partitions > 1: the run's partitions (cosim.parallel.partition), else None."""
    n = exp.limits.partitions
    if n == 1:
        return None
    iterating = next((p for p in planned if p.kind.iterates), None)
    if iterating is not None:
        raise CosimInputError("limits.partitions", f"workload {iterating.job.name} ({iterating.job.kind}) runs "
                              "step after step, each planned from the last, and cannot be split",
                              "set limits.partitions = 1")
    return partition(fabric, dag.columns(), gpu_node=np.arange(fabric.n_nodes), n_partitions=n)


# --- fabric and placement ---------------------------------------------------------------------------------

def fabric_for(exp: Experiment, jobs, ranks, gps: int):
    """The run's fabric: ``network.hosts`` NICs, else the servers the jobs ask for, filled to whole leaves
    (leaf-spine: two servers per leaf unless ``network.hosts_per_leaf``)."""
    net = exp.network
    if net.hosts is not None:
        if net.hosts % gps:
            raise CosimInputError("network.hosts", f"{net.hosts} NICs do not fill servers of {gps} GPUs",
                                  f"use a multiple of {gps} or set network.gpus_per_server")
        return fabrics.for_network(net, servers=net.hosts // gps, gpus_per_server=gps,
                                   hosts_per_leaf=net.hosts_per_leaf or max(MIN_HOSTS_PER_LEAF, 2 * gps))
    servers = _servers_needed(jobs, ranks, gps)
    if servers * gps > training.MAX_HOSTS:
        raise CosimInputError("network.gpus_per_server", f"the workloads need {servers * gps} NICs, more than the "
                              f"{training.MAX_HOSTS} a packet-level fabric can hold", "check the traces (damaged?)")
    if servers * gps < 2:
        raise CosimInputError("workload", f"{servers * gps} NIC: a fabric needs two",
                              "use a workload with more ranks, or fewer GPUs per server")
    per_leaf = net.hosts_per_leaf or gps * min(2, servers)
    return fabrics.for_network(net, servers=servers, gpus_per_server=gps, hosts_per_leaf=per_leaf,
                               fill_leaves=True, hosts_field="network.hosts")


def _servers_needed(jobs, ranks, gps: int) -> int:
    """Servers the jobs ask for: their policy servers plus the servers their explicit hosts are on (host h on
    server h // gps, as every generator numbers them)."""
    asked, named = 0, set()
    for j, n in zip(jobs, ranks):
        if j.hosts is not None:
            named |= {h // gps for h in j.hosts}
        else:
            asked += -(-n // gps) if n is not None else j.server_count
    return max(asked + len(named), max(named, default=-1) + 1, 1)


def _place(exp: Experiment, fabric, jobs, ranks, gps: int) -> dict[str, np.ndarray]:
    """Job name -> host ids of its slots (a ranked job's ranks; every NIC of its servers otherwise). A lone
    job without hosts or servers takes every server of a fabric of network.hosts NICs."""
    servers = placement.server_map(fabric, gps)
    demands = []
    for j, n in zip(jobs, ranks):
        where = (f"workloads.{j.name}." + ("hosts" if j.hosts is not None else "placement") if exp.workloads
                 else "workload")
        if n is not None and j.hosts is not None and len(j.hosts) != n:
            raise CosimInputError(where, f"lists {len(j.hosts)} hosts for {n} ranks", "give one host per rank")
        count = -(-n // gps) if n is not None else (
            servers.n_servers if len(jobs) == 1 and j.servers is None else j.server_count)
        demands.append(placement.Demand(name=j.name, where=where, servers=count, policy=j.placement, hosts=j.hosts,
                                        seed=exp.seed if j.placement_seed is None else j.placement_seed,
                                        rank_servers=gps if n is not None else 0))
    placed = placement.place(servers, demands)
    return {j.name: (hosts[:n] if n is not None else hosts) for j, n, hosts in zip(jobs, ranks, placed)}


# --- one DAG ----------------------------------------------------------------------------------------------

def assemble(jobs, pieces: dict[int, Piece] | None = None) -> EngineDag:
    """One DAG of ``jobs`` in job order (``pieces``: a job index -> the ops to use instead of its own).

    A ranked job that starts late waits behind one COMPUTE op on no GPU that lasts until its start; a job's
    priority is the class of every op its lowering left at 0. A lone job's columns are its piece's own
    arrays where their dtype already fits (a 1,024-GPU plan holds its 45 M ops once, not twice)."""
    parts, base = [], 0
    for p in jobs:
        piece = (pieces or {}).get(p.index, p.piece)
        lead = int(p.kind.ranked and p.job.start_ns > 0)
        parts.append((p, piece, base, lead))
        base += lead + piece.n_ops

    def cat(get, dtype, lead_value=lambda p: 0):
        """A column: each part's ``get(job, piece, first op)`` behind its delay op's ``lead_value(job)``
        (``dtype`` None: the pieces' own, promoted as concatenation promotes them)."""
        chunks = []
        for p, piece, b, lead in parts:
            column = np.asarray(get(p, piece, b + lead), dtype)
            if lead:  # a strongly typed value: a start time is not rounded to a float32 column
                value = np.asarray(lead_value(p))
                chunks.append(np.full(lead, value, np.result_type(column, value)))
            chunks.append(column)
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks) if chunks else np.zeros(0, dtype)

    def priority(p, piece, first):
        return piece.priority if p.job.priority == 0 else np.where(piece.priority == 0, p.job.priority,
                                                                   piece.priority)

    dep_ptr, dep_idx = _dependencies(parts, base)
    return EngineDag(
        kind=cat(lambda p, pc, f: pc.kind, np.uint8, lambda p: DagOpKind.COMPUTE),
        gpu=cat(lambda p, pc, f: pc.gpu, np.int32, lambda p: -1),
        src_node=cat(lambda p, pc, f: pc.src_node, np.int32, lambda p: -1),
        dst_node=cat(lambda p, pc, f: pc.dst_node, np.int32, lambda p: -1),
        bytes_=cat(lambda p, pc, f: pc.bytes_, None),
        duration_ns=cat(lambda p, pc, f: pc.duration_ns, None, lambda p: p.job.start_ns),
        priority=cat(priority, np.uint8, lambda p: p.job.priority),
        dep_ptr=dep_ptr, dep_idx=dep_idx,
        job_index=np.array([p.index for p, *_ in parts], np.int32),
        job_start_op=np.array([b for p, piece, b, lead in parts], np.int64),
        first_op=np.array([b + lead for p, piece, b, lead in parts], np.int64),
        coll_start_op=cat(lambda p, pc, f: np.asarray(pc.coll_start_op, np.int64) + f, np.int64),
        coll_end_op=cat(lambda p, pc, f: np.asarray(pc.coll_end_op, np.int64) + f, np.int64),
        comm_class=None if all(piece.comm_class is None for _, piece, _, _ in parts) else cat(
            lambda p, pc, f: np.zeros(pc.n_ops, np.uint8) if pc.comm_class is None else pc.comm_class, np.uint8),
        **_blocks(parts, cat))


def _blocks(parts, cat) -> dict:
    """The ``block`` column and ``block_templates`` of the joined DAG (each piece's templates after the
    earlier pieces'), or nothing when no piece has BLOCK ops."""
    with_blocks = [piece for _, piece, _, _ in parts if piece.block is not None]
    if not with_blocks:
        return {}
    offset = {id(piece): int(sum(pc.block_templates.n_templates for pc in with_blocks[:i]))
              for i, piece in enumerate(with_blocks)}

    def block(p, pc, f):
        if pc.block is None:
            return np.full(pc.n_ops, -1, np.int32)
        return pc.block if not offset[id(pc)] else np.where(pc.block >= 0, pc.block + offset[id(pc)], -1)

    return {"block": cat(block, np.int32, lambda p: -1),
            "block_templates": BlockTemplates.concatenate([pc.block_templates for pc in with_blocks])}


def _dependencies(parts, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(dep_ptr, dep_idx) of the joined DAG: each piece's CSR shifted to where its ops sit; a piece behind a
    start-delay op gets that op as the one dependency of each of its roots. A lone undelayed piece's CSR is
    used as it is."""
    ptrs, idxs, edges = [np.zeros(1, np.int64)], [], 0
    for p, piece, b, lead in parts:
        ptr, idx, first = piece.dep_ptr, piece.dep_idx, b + lead
        if len(parts) == 1 and not lead:
            return ptr, idx
        ptr, idx = np.asarray(ptr, np.int64), np.asarray(idx, np.int64) + first
        if lead:
            ptrs.append(np.full(lead, edges, np.int64))  # the delay op itself waits for nothing
            root = ptr[1:] == ptr[:-1]
            idx = np.insert(idx, ptr[:-1][root], b)
            ptr = ptr + np.concatenate([[0], np.cumsum(root)])
        ptrs.append(ptr[1:] + edges)
        idxs.append(idx)
        edges += idx.size
    dep_ptr = np.concatenate(ptrs)
    assert dep_ptr.size == n + 1
    return dep_ptr, np.concatenate(idxs) if idxs else np.zeros(0, np.int64)


# --- limits, attributes, faults ---------------------------------------------------------------------------

def _time_limit(exp: Experiment, fabric, jobs) -> float:
    """limits.max_sim_time_ns, else derived from the job that may end last: its start, then the limit of its
    ideal time (cosim.kinds.time_limit.limit_ns), or for a job without an ideal bound (a service) its last
    arrival plus UNBOUNDED_NS. A job that would run past the simulator's clock is refused naming its start."""
    if exp.limits.max_sim_time_ns is not None:
        return exp.limits.max_sim_time_ns
    nic = training.nic_payload_bytes_per_s(exp.network)
    ideal = [p.kind.ideal_ns(p, fabric, nic) for p in jobs]
    ends = [p.job.start_ns + (time_limit.limit_ns(x) if x is not None
                              else p.kind.last_arrival_ns(p) + time_limit.UNBOUNDED_NS) for p, x in zip(jobs, ideal)]
    last = int(np.argmax(ends)) if ends else 0
    if ends and ends[last] > engine.MAX_SIM_TIME_NS:
        p = jobs[last]
        where = f"workloads.{p.job.name}.start_ns" if exp.workloads else "limits.max_sim_time_ns"
        raise CosimInputError(where, f"the run could last until {ends[last]:.3g} ns (start {p.job.start_ns:.3g} ns, "
                              f"then {time_limit.SLACK:g} x its ideal time), past the {engine.MAX_SIM_TIME_NS:.3g} "
                              "ns the simulator's clock holds", "start it earlier, or set limits.max_sim_time_ns")
    return max(ends, default=time_limit.FLOOR_NS)


def _attributes(exp: Experiment, jobs, dag: EngineDag) -> dict[str, str]:
    """Every ns-3 attribute the run sets: its GPUs' NVLink model, the network's (a --set of the user wins
    over both), the collective timeout, fast-forward's (its transport's sampling unless --set)."""
    executor = [p.kind.executor_attributes(p) for p in jobs]
    executor = [x for x in executor if x]
    if any(x != executor[0] for x in executor):
        raise CosimInputError("workloads", "the jobs run on GPUs of different NVLink rates, and the engine has one "
                              "NVLink model", "give every job the same GPU")
    out = (executor[0] if executor else {}) | run_attributes(exp.network, exp.seed,
                                                           lossless_mask=exp.lossless_priority_mask())
    timeout_ns = exp.limits.collective_timeout_ns
    if timeout_ns > 0:
        if not dag.coll_start_op.size:
            raise CosimInputError("limits.collective_timeout_ns", "watches collectives, and this run has none",
                                  "remove it")
        out["DagExecutor::CollectiveTimeout"] = f"{int(round(timeout_ns * 1e3))}ps"
    if exp.limits.fast_forward:
        out["FastForwardController::Enabled"] = "true"
        out["FastForwardController::RateTolerance"] = repr(float(exp.limits.fast_forward_tolerance))
        out = FAST_FORWARD_SAMPLING.get(exp.network.transport, {}) | out
    return out


def with_stragglers(dag: EngineDag, jobs, faults, flow_dags=None) -> EngineDag:
    """``dag`` with its ranked job's op durations as ``faults`` leave them (a straggler slows its rank's
    COMPUTE ops, ``FaultPlan.durations_ns``); ``flow_dags``: job index -> the FlowDag its ops in ``dag`` came
    from, when a kind's execution lowered again."""
    ranked = next((p for p in jobs if p.kind.ranked), None)
    if faults is None or ranked is None or not len(faults.host_of):
        return dag
    flow_dag = (flow_dags or {}).get(ranked.index) or ranked.kind.flow_dag(ranked.state)
    lo = int(dag.first_op[ranked.index])
    own = dag.duration_ns[lo:lo + flow_dag.n_ops]
    slowed = faults.durations_ns(own, flow_dag.kind, flow_dag.rank, flow_dag.iteration)
    if slowed is own:
        return dag
    duration = dag.duration_ns.astype(np.float64)
    duration[lo:lo + flow_dag.n_ops] = slowed
    return dataclasses.replace(dag, duration_ns=duration)
