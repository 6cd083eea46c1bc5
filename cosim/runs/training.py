"""Co-simulation of training iterations: a workload trace, lowered to flows and compute, run in ns-3.

``TrainingSpec`` (validated, frozen, saved with the results) → :func:`run_training` → a
:class:`cosim.results.RunRecord`. The pipeline, one direction only::

    Trace ──lower()/repeat()──► FlowDag ──ranks → host node ids──► engine.simulate_dag ──► RunRecord

Placement
---------
The fabric is sized to the trace: ``servers = ceil(n_ranks / gpus_per_server)`` servers with one NIC per
GPU. Rank ``r`` runs on server ``r // gpus_per_server`` as local GPU ``r % gpus_per_server`` and uses the
fabric host whose ``host_server``/``host_gpu`` are those (rail-optimized: NIC g of every server on rail g;
leaf-spine: a server's NICs on one leaf, ``hosts_per_leaf`` NICs per leaf, servers padded with idle ones to
fill the last leaf; single-switch: every NIC on one switch). Transfers between GPUs of one server are NVLink
copies (no network), others packet-level flows.

Iterations
----------
With ``iterations = k`` the one-iteration DAG is chained k times (:func:`cosim.collectives.repeat`: a rank
starts iteration i+1 when it finished iteration i). The first iteration starts on an empty fabric and
warms it up (DCQCN rates, queues); the reported ``iteration_time_ns`` is the mean over the later ones when
k > 1.

Tables (columns and units: ``cosim.results.DATASETS``)
------------------------------------------------------
- ``ops``: one row per trace op per iteration. ``start_ns`` is the start of the DAG op marking the trace
  op's start (for a collective member: the call's barrier, i.e. when every member was ready), ``finish_ns``
  the completion of the DAG op marking its completion (a send: its last chunk delivered).
- ``collectives``: one row per collective call per iteration; start = every member ready, finish = the
  call's last transfer done.
- ``iterations``: ``start_ns`` first op start, ``finish_ns`` last op finish of the iteration,
  ``time_ns = finish_ns[i] − finish_ns[i−1]`` (``finish_ns[0] − 0`` for the first), and
  ``exposed_comm_ns = max(0, time_ns − C)`` where ``C`` is the compute time of the busiest rank (largest
  sum of COMPUTE durations; ranks run their computes one at a time). It is the part of the iteration in
  which even the busiest GPU waits for communication (for the first iteration, ``time_ns`` includes
  nothing else; later ones can overlap the previous iteration's tail on other ranks, whence the clamp).
- ``flows``, ``queues``, ``ports``, ``pauses``, ``latency`` (and ``stalls`` when the engine reports credit
  stalls): the network telemetry, as :func:`cosim.runs.flows.run` stores it; flows in start order.

Summary keys (besides :func:`cosim.results.summarize`'s): ``iteration_time_ns``, ``iteration_time_first_ns``,
``iteration_times_ns`` (list), ``exposed_comm_ns`` (mean over the same iterations as ``iteration_time_ns``),
``compute_time_ns`` (busiest rank, per iteration), ``coll_<kind>_p50_ns``/``_p99_ns`` per collective kind
present (collective time finish − start over the same iterations), ``queue_p99_bytes`` (p99 of the sampled
depth of every switch egress queue over every sample of the run: each recorded change holds until the
next one; samples before a port's first change are 0), ``pfc_paused_ns``, ``credit_stall_ns``, ``n_ranks``,
``n_ops`` (trace ops per iteration), ``n_dag_ops``, ``n_flows``, plus status, events, packet_hops,
wall_time_s and packet_hops_per_s.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

import numpy as np

from cosim.network import telemetry
from cosim.errors import CosimInputError
from cosim.network.transport import FABRICS, check_attributes, run_attributes

#: topologies a training run can be placed on
TOPOLOGIES = ("rail-optimized", "leaf-spine", "single-switch")

#: CollKind value → the lower-case name used in summary keys (coll_all_reduce_p50_ns, ...)
COLL_KIND_NAMES = {1: "all_reduce", 2: "reduce_scatter", 3: "all_gather", 4: "all_to_all", 5: "broadcast"}


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_int(name: str, v, minimum: int) -> int:
    if not _is_int(v) or v < minimum:
        raise CosimInputError(name, f"must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _check_real(name: str, v, *, positive: bool = False, minimum: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise CosimInputError(name, f"must be a finite number, got {v!r}")
    if positive and not v > 0:
        raise CosimInputError(name, f"must be positive, got {v!r}")
    if minimum is not None and v < minimum:
        raise CosimInputError(name, f"must be >= {minimum:g}, got {v!r}")
    return float(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSpec:
    """A co-simulated training run: a workload trace on one fabric (units in the field names).

    Give the workload as ``trace_path`` (a cosim trace file) or ``trace`` (an in-memory Trace), or pass the
    Trace to :func:`run_training`. ``gpus_per_server`` defaults to the trace's ``hardware.gpus_per_host``
    (8 if absent); ``hosts_per_leaf`` (leaf-spine) to two servers' NICs.
    """

    name: str = "training"
    trace_path: str | None = None
    trace: object = field(default=None, compare=False, repr=False)  # cosim.workload.trace.Trace or None
    fabric: str = "roce"
    topology: str = "rail-optimized"
    gpus_per_server: int | None = None
    hosts_per_leaf: int | None = None
    spines: int = 2
    oversubscription: float = 1.0
    dcqcn: bool = True
    ib_cc: bool = False
    link_gbps: float = 100.0
    link_delay_ns: float = 1000.0
    iterations: int = 1
    chunk_bytes: int = 4 << 20
    algorithm: str = "auto"
    seed: int = 1
    queue_sample_interval_ns: float = 1000.0
    max_sim_time_ns: float = 1e11
    attributes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        from cosim.collectives.lower import ALGORITHM_NAMES  # noqa: PLC0415
        from cosim.workload.trace import Trace  # noqa: PLC0415

        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if not isinstance(self.name, str) or not self.name or "/" in self.name or self.name.startswith("."):
            raise CosimInputError("name", f"{self.name!r} is not a valid run name", "use letters, digits, - and _")
        if self.trace is not None and not isinstance(self.trace, Trace):
            raise CosimInputError("trace", f"must be a cosim.workload.trace.Trace, got {type(self.trace).__name__}")
        if self.trace_path is not None:
            if not isinstance(self.trace_path, (str, os.PathLike)):
                raise CosimInputError("trace_path", f"must be a file path, got {self.trace_path!r}")
            set_("trace_path", os.fspath(self.trace_path))
            if self.trace is not None:
                raise CosimInputError("trace_path", "give either trace_path or an in-memory trace, not both")
        if self.fabric not in FABRICS:
            raise CosimInputError("fabric", f"unknown fabric {self.fabric!r}", f"choose one of {', '.join(FABRICS)}")
        if self.topology not in TOPOLOGIES:
            raise CosimInputError("topology", f"unknown topology {self.topology!r}",
                                  f"choose one of {', '.join(TOPOLOGIES)}")
        if self.gpus_per_server is not None:
            set_("gpus_per_server", _check_int("gpus_per_server", self.gpus_per_server, 1))
        if self.hosts_per_leaf is not None:
            set_("hosts_per_leaf", _check_int("hosts_per_leaf", self.hosts_per_leaf, 1))
        set_("spines", _check_int("spines", self.spines, 1))
        o = _check_real("oversubscription", self.oversubscription)
        if o < 1:
            raise CosimInputError("oversubscription", f"must be >= 1 (down:up capacity), got {o:g}")
        set_("oversubscription", o)
        for flag in ("dcqcn", "ib_cc"):
            if not isinstance(getattr(self, flag), bool):
                raise CosimInputError(flag, f"must be true or false, got {getattr(self, flag)!r}")
        set_("link_gbps", _check_real("link_gbps", self.link_gbps, positive=True))
        set_("link_delay_ns", _check_real("link_delay_ns", self.link_delay_ns, minimum=0.0))
        set_("iterations", _check_int("iterations", self.iterations, 1))
        set_("chunk_bytes", _check_int("chunk_bytes", self.chunk_bytes, 1))
        if self.algorithm not in ALGORITHM_NAMES:
            raise CosimInputError("algorithm", f"unknown algorithm {self.algorithm!r}",
                                  f"choose one of {', '.join(ALGORITHM_NAMES)}")
        if not _is_int(self.seed) or self.seed < 0:
            raise CosimInputError("seed", f"must be an integer >= 0, got {self.seed!r}")
        set_("seed", int(self.seed))
        set_("queue_sample_interval_ns",
             _check_real("queue_sample_interval_ns", self.queue_sample_interval_ns, positive=True))
        set_("max_sim_time_ns", _check_real("max_sim_time_ns", self.max_sim_time_ns, positive=True))
        attrs = self.attributes
        if isinstance(attrs, Mapping):
            attrs = tuple(attrs.items())
        try:
            attrs = tuple((str(k), str(v)) for k, v in attrs)
        except (TypeError, ValueError):
            raise CosimInputError("attributes", "must be (name, value) pairs or a mapping name → value") from None
        set_("attributes", attrs)
        check_attributes(self.fabric, attrs)

    def to_json(self) -> dict:
        """The spec as a JSON-able dict (stored with the run); an in-memory trace is described, not stored."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}
        d["attributes"] = dict(self.attributes)
        d["trace_in_memory"] = self.trace is not None
        return d


# --- building blocks (pure functions) --------------------------------------------------------------------

def resolve_trace(spec: TrainingSpec, trace=None):
    """The Trace a run uses: ``trace`` if given, else ``spec.trace``, else the file ``spec.trace_path``."""
    from cosim.workload.trace import Trace, read_trace  # noqa: PLC0415

    if trace is not None:
        if not isinstance(trace, Trace):
            raise CosimInputError("trace", f"must be a cosim.workload.trace.Trace, got {type(trace).__name__}")
        return trace
    if spec.trace is not None:
        return spec.trace
    if spec.trace_path is None:
        raise CosimInputError("trace", "no workload given", "set trace_path (a cosim trace file) or pass a Trace")
    return read_trace(spec.trace_path)


def gpus_per_server_of(spec: TrainingSpec, trace) -> int:
    """``spec.gpus_per_server``, else the trace's hardware.gpus_per_host, else 8."""
    if spec.gpus_per_server is not None:
        return spec.gpus_per_server
    gps = trace.spec_dict().get("hardware", {}).get("gpus_per_host", 8)
    return _check_int("trace hardware.gpus_per_host", gps, 1)


def build_fabric(spec: TrainingSpec, n_ranks: int, gpus_per_server: int):
    """The fabric of ``spec`` sized for ``n_ranks`` ranks, ``gpus_per_server`` NICs per server."""
    from cosim.network import topology  # noqa: PLC0415

    gps = gpus_per_server
    servers = -(-n_ranks // gps)
    if servers * gps < 2:
        raise CosimInputError("trace", f"{n_ranks} rank on servers of {gps} GPU is one NIC; a fabric needs two",
                              "use a trace with more ranks")
    if spec.topology == "rail-optimized":
        return topology.rail_optimized(servers=servers, gpus_per_server=gps, spines=spec.spines,
                                       oversubscription=spec.oversubscription, host_link_gbps=spec.link_gbps,
                                       host_link_delay_ns=spec.link_delay_ns, fabric_link_delay_ns=spec.link_delay_ns)
    if spec.topology == "leaf-spine":
        per_leaf = spec.hosts_per_leaf if spec.hosts_per_leaf is not None else gps * min(2, servers)
        if per_leaf % gps:
            raise CosimInputError("hosts_per_leaf", f"{per_leaf} NICs per leaf do not hold whole servers of "
                                  f"{gps} GPUs", f"use a multiple of {gps}")
        servers_per_leaf = per_leaf // gps
        servers = -(-servers // servers_per_leaf) * servers_per_leaf  # idle NICs fill the last leaf
        return topology.leaf_spine(hosts=servers * gps, hosts_per_leaf=per_leaf, spines=spec.spines,
                                   oversubscription=spec.oversubscription, host_link_gbps=spec.link_gbps,
                                   host_link_delay_ns=spec.link_delay_ns, fabric_link_delay_ns=spec.link_delay_ns,
                                   gpus_per_server=gps)
    fabric = topology.single_switch(hosts=servers * gps, link_gbps=spec.link_gbps, link_delay_ns=spec.link_delay_ns)
    h = np.arange(servers * gps, dtype=np.int32)
    return replace(fabric, host_server=h // gps, host_gpu=h % gps,
                   params=dict(fabric.params) | {"gpus_per_server": gps})


def rank_hosts(fabric, n_ranks: int, gpus_per_server: int) -> np.ndarray:
    """int64 [n_ranks]: the host node id of every rank (server r // gps, local GPU r % gps)."""
    gps = gpus_per_server
    key = fabric.host_server.astype(np.int64) * gps + fabric.host_gpu.astype(np.int64)
    order = np.argsort(key, kind="stable")
    want = np.arange(n_ranks, dtype=np.int64)
    pos = np.searchsorted(key[order], want)
    ok = (pos < key.size) & (key[order][np.minimum(pos, key.size - 1)] == want)
    if not np.all(ok):
        r = int(want[~ok][0])
        raise CosimInputError("fabric", f"no NIC for rank {r} (server {r // gps}, GPU {r % gps})")
    return fabric.host_ids.astype(np.int64)[order[pos]]


def _finite_max(a: np.ndarray) -> float:
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else float("nan")


def _finite_min(a: np.ndarray) -> float:
    a = a[np.isfinite(a)]
    return float(a.min()) if a.size else float("nan")


def training_tables(trace, dag, op_start_ns: np.ndarray, op_finish_ns: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """ops / collectives / iterations tables (definitions in the module docstring)."""
    from cosim.workload.trace import OpKind  # noqa: PLC0415

    k, n = dag.n_iterations, trace.n_ops
    tile = lambda a: np.tile(a, k)  # noqa: E731
    ops = {
        "iteration": np.repeat(np.arange(k, dtype=np.int32), n),
        "trace_op": tile(np.arange(n, dtype=np.int64)),
        "rank": tile(trace.rank),
        "kind": tile(trace.kind),
        "phase": tile(trace.phase),
        "coll_id": tile(trace.coll_id),
        "start_ns": op_start_ns[dag.trace_start],
        "finish_ns": op_finish_ns[dag.trace_done],
    }
    colls = {
        "iteration": dag.coll_iteration.copy(),
        "coll_id": dag.coll_trace_id.copy(),
        "kind": dag.coll_kind.copy(),
        "group": dag.coll_group.copy(),
        "bytes": dag.coll_bytes.copy(),
        "algorithm": dag.coll_algo.copy(),
        "start_ns": op_start_ns[dag.coll_start_op],
        "finish_ns": op_finish_ns[dag.coll_end_op],
    }
    compute = trace.kind == OpKind.COMPUTE
    per_rank = np.zeros(trace.n_ranks, np.int64)
    np.add.at(per_rank, trace.rank[compute].astype(np.int64), trace.duration_ns[compute])
    busiest = int(per_rank.max()) if per_rank.size else 0
    it = dag.iteration
    start = np.array([_finite_min(op_start_ns[it == i]) for i in range(k)], np.float64)
    # an iteration with an unfinished op (a run cut by the time limit) has no finish time
    finish = np.array([_finite_max(op_finish_ns[it == i]) if np.all(np.isfinite(op_finish_ns[it == i]))
                       else np.nan for i in range(k)], np.float64)
    time_ns = finish - np.concatenate([[0.0], finish[:-1]])
    iterations = {
        "iteration": np.arange(k, dtype=np.int32), "start_ns": start, "finish_ns": finish, "time_ns": time_ns,
        "exposed_comm_ns": np.maximum(time_ns - busiest, 0.0),
    }
    return {"ops": ops, "collectives": colls, "iterations": iterations, "_compute_time_ns": busiest}


def training_summary(tables: Mapping[str, Mapping[str, np.ndarray]], compute_time_ns: int) -> dict:
    """iteration_time_ns, exposed_comm_ns, per-kind collective percentiles ... (module docstring)."""
    its = tables["iterations"]
    times = np.asarray(its["time_ns"], np.float64)
    steady = slice(1, None) if times.size > 1 else slice(None)
    num = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731 (unfinished iteration: None in JSON)
    out = {
        "iterations": int(times.size),
        "iteration_time_ns": num(np.mean(times[steady])),
        "iteration_time_first_ns": num(times[0]),
        "iteration_times_ns": [num(x) for x in times],
        "exposed_comm_ns": num(np.mean(np.asarray(its["exposed_comm_ns"], np.float64)[steady])),
        "compute_time_ns": int(compute_time_ns),
    }
    colls = tables["collectives"]
    measured = np.asarray(colls["iteration"]) >= (1 if times.size > 1 else 0)
    dur = np.asarray(colls["finish_ns"], np.float64) - np.asarray(colls["start_ns"], np.float64)
    for value, name in COLL_KIND_NAMES.items():
        d = dur[measured & (np.asarray(colls["kind"]) == value)]
        d = d[np.isfinite(d)]
        if d.size:
            out[f"coll_{name}_p50_ns"] = float(np.percentile(d, 50))
            out[f"coll_{name}_p99_ns"] = float(np.percentile(d, 99))
    return out


# --- the run ---------------------------------------------------------------------------------------------

def preflight(spec: TrainingSpec, trace=None) -> None:
    """Check that ``spec``'s fabric, rank placement and attributes can start, without simulating."""
    from cosim import engine  # noqa: PLC0415

    trace = resolve_trace(spec, trace)
    gps = gpus_per_server_of(spec, trace)
    fabric = build_fabric(spec, trace.n_ranks, gps)
    rank_hosts(fabric, trace.n_ranks, gps)
    engine.check_fabric(fabric, run_attributes(spec))


def run_training(spec: TrainingSpec, trace=None, progress=None):
    """Co-simulate ``spec`` (its trace, or ``trace``) and return its :class:`cosim.results.RunRecord`.

    @param progress  optional callable progress(sim_time_ns, ops_done, ops_total), called between slices
    @throws CosimInputError on a bad trace, fabric, attribute or a trace that deadlocks
    """
    from cosim import engine, results  # noqa: PLC0415
    from cosim.collectives import DagOpKind, lower, repeat  # noqa: PLC0415

    trace = resolve_trace(spec, trace)
    gps = gpus_per_server_of(spec, trace)
    dag = lower(trace, gpus_per_server=gps, chunk_bytes=spec.chunk_bytes, algorithm=spec.algorithm)
    if spec.iterations > 1:
        dag = repeat(dag, spec.iterations)
    fabric = build_fabric(spec, trace.n_ranks, gps)
    host_of = rank_hosts(fabric, trace.n_ranks, gps)
    flow = dag.kind == DagOpKind.FLOW
    src_node = np.where(flow, host_of[np.maximum(dag.src, 0)], -1).astype(np.int32)
    dst_node = np.where(flow, host_of[np.maximum(dag.dst, 0)], -1).astype(np.int32)
    attributes = run_attributes(spec)
    out = engine.simulate_dag(
        fabric, kind=dag.kind, gpu=dag.rank, src_node=src_node, dst_node=dst_node, bytes_=dag.bytes,
        duration_ns=dag.duration_ns, priority=dag.priority, dep_ptr=dag.dep_ptr, dep_idx=dag.dep_idx,
        seed=spec.seed, attributes=attributes, queue_sample_interval_ns=spec.queue_sample_interval_ns,
        max_sim_time_ns=spec.max_sim_time_ns, progress=progress)
    net = out.network
    fop = out.flow_op
    tables = telemetry.network_tables(fabric, net, src=src_node[fop], dst=dst_node[fop], size_bytes=dag.bytes[fop],
                            start_ns=out.flow_start_ns)
    train = training_tables(trace, dag, out.op_start_ns, out.op_finish_ns)
    compute_ns = train.pop("_compute_time_ns")
    tables |= train
    summary = telemetry.network_summary(fabric, net, tables, queue_sample_interval_ns=spec.queue_sample_interval_ns)
    summary |= training_summary(tables, compute_ns)
    done = np.isfinite(out.op_finish_ns)
    summary |= {"mtu_bytes": net.mtu_bytes, "header_bytes": net.header_bytes, "n_ranks": trace.n_ranks,
                "n_ops": trace.n_ops, "n_dag_ops": dag.n_ops, "n_dag_ops_finished": int(done.sum()),
                "n_flows": int(fop.size)}
    if net.status == "complete" and not done.all():
        summary["status"] = "stalled"  # the network went idle with ops left: cannot happen with a valid DAG
    provenance = telemetry.provenance(seed=spec.seed, wall_time_s=net.wall_time_s)
    config = {
        "training": spec.to_json(),
        "workload": {"n_ranks": trace.n_ranks, "n_ops": trace.n_ops, "gpus_per_server": gps,
                     "specs": trace.spec_dict()},
        "dag": dag.summary(),
        "fabric": fabric.describe(),
        "attributes": attributes,
    }
    return results.RunRecord(name=spec.name, config=config, provenance=provenance, summary=summary, **tables)
