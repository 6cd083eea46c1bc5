"""The training kind: a workload trace (a file, or generated from a model spec) lowered to one FlowDag, its
iterations chained, its ranks on the hosts placement gave it; with the pure functions it is made of
(checks, lowering limits, tables, summaries). One direction only::

    Trace ──lower()/repeat()──► FlowDag ──ranks → host node ids──► (cosim.plan) ──► (cosim.record)

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
- ``ops`` also holds ``group_kind`` (the trace GroupKind of the op's group, 255 for compute) and ``medium``
  (0 compute, 1 NVLink: every member in one server, 2 fabric: members on several servers).
- ``flows``, ``queues``, ``ports``, ``pauses``, ``latency`` (and ``stalls`` when the engine reports credit
  stalls): the network telemetry, as every run stores it (cosim.record); flows in (start time, DAG op)
  order (cosim.engine.canonical_order).

Summary keys (besides :func:`cosim.results.summarize`'s): ``iteration_time_ns``, ``iteration_time_first_ns``,
``iteration_times_ns`` (list), ``exposed_comm_ns`` (mean over the same iterations as ``iteration_time_ns``),
``compute_time_ns`` (busiest rank, per iteration), ``exposed_comm_<dim>_ns`` per parallelism dimension,
``exposed_comm_{nvlink,fabric,other_ranks}_ns`` and ``p2p_<dim>_send_{count,bytes,p50_ns,p99_ns}``
(:mod:`cosim.results.exposure`: each split sums to ``exposed_comm_ns``), ``mfu``, ``model_flop_per_s_per_gpu`` and
``megatron_flop_per_s_per_gpu`` (:func:`throughput_entries`), ``coll_<group>_<kind>_{count,p50_ns,p99_ns,
busbw_gbyte_per_s}`` per group kind (tp, dp, ...) and collective kind present (call time finish − start over
the same iterations, busbw as nccl-tests: :mod:`cosim.results.collectives`), ``queue_p99_bytes`` (p99 of the sampled
depth of every switch egress queue over every sample of the run: each recorded change holds until the
next one; samples before a port's first change are 0), ``pfc_paused_ns``, ``credit_stall_ns``, ``n_ranks``,
``n_ops`` (trace ops per iteration), ``n_dag_ops``, ``n_flows``, plus status, events, packet_hops,
wall_time_s and packet_hops_per_s.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim import engine, memory, telemetry
from cosim.arrays import unique_inverse
from cosim.collectives import DagOpKind, lower, repeat
from cosim.collectives.dag import index_dtype
from cosim.collectives.calibration import executor_attributes, nvlink_model
from cosim.collectives.tuning import TuningModel
from cosim.errors import CosimInputError
from cosim.kinds import time_limit
from cosim.kinds.base import LowerContext, Piece, WorkloadKind, register
from cosim.network.ideal import ideal_fct_ns
from cosim.network.transport import run_attributes
from cosim.results import collectives, exposure
from cosim.values import Int
from cosim.workload.trace import OpKind, Trace, read_trace

# --- building blocks (pure functions) --------------------------------------------------------------------

def resolve_trace(work, trace=None, gpus_per_server: int | None = None, *, where: str = "workload.trace"):
    """The checked Trace of training workload ``work``: ``trace`` (in memory) if given, else its trace file,
    else the one it generates for ``gpus_per_server`` GPUs per server."""
    if trace is not None:
        if not isinstance(trace, Trace):
            raise CosimInputError("trace", f"must be a cosim.workload.trace.Trace, got {type(trace).__name__}")
        if work.trace is not None or work.model is not None:
            raise CosimInputError("trace", "give either workload.trace / workload.model or an in-memory trace, "
                                  "not both", "the stored experiment must say what ran")
        return checked_trace(trace, "trace")
    if work.trace is not None:
        return checked_trace(read_trace(work.trace), str(work.trace))
    if work.model is None:
        raise CosimInputError(where, "no training workload given",
                              "set workload.trace (a cosim trace file) or workload.model, or pass a Trace")
    return work.generate_trace(gpus_per_server)


def checked_trace(trace, source: str):
    """``trace`` after the semantic checks across ranks (cosim.workload.validate.check_trace: sends match
    recvs of the same size, every collective has each member of its group with one size, no deadlock), which
    reading a file does not do; a violation is a CosimInputError naming ``source``."""
    from cosim.workload.validate import check_trace  # noqa: PLC0415

    try:
        check_trace(trace)
    except CosimInputError as exc:
        if source == "trace":
            raise
        raise CosimInputError(source, f"{exc.field}: {exc.problem}",
                              exc.fix or "regenerate the trace with 'cosim trace'") from None
    return trace


#: most DAG ops a training run may lower to (op ids are int32 throughout)
MAX_DAG_OPS = 500_000_000
#: most NICs a training fabric may have (a trace's n_ranks beyond this is damage, not a workload)
MAX_HOSTS = 1 << 17


def dag_op_limit() -> int:
    """The most DAG ops a run may have: MAX_DAG_OPS, or fewer if planning them would not fit in the memory
    available (cosim.memory.PLAN_BYTES_PER_DAG_OP; the simulation is checked when its size is known)."""
    mem = memory.available_bytes()
    return MAX_DAG_OPS if mem is None else max(1, min(MAX_DAG_OPS, mem // memory.PLAN_BYTES_PER_DAG_OP))


def too_many_ops(n_ops: float, how: str, work, trace, limit: int, where: str) -> CosimInputError:
    """The error of training workload ``work`` lowering to ``n_ops`` DAG ops, more than ``limit``, with the
    chunk size that would fit (``where``: its chunk_bytes field)."""
    comm = (trace.kind == OpKind.SEND) | (trace.kind == OpKind.COLLECTIVE)
    total = float(np.asarray(trace.bytes, np.float64)[comm].sum())
    budget = limit / work.iterations - trace.n_ops
    if budget > 0 and total > 0:
        chunk = 1 << max(10, int(np.ceil(np.log2(max(total / budget, 1.0)))))
        fix = f"raise workload.chunk_bytes to {chunk} or more, or run fewer workload.iterations"
    else:
        fix = f"run fewer workload.iterations (each has {trace.n_ops} trace ops)"
    return CosimInputError(where, f"the run would lower to {how}{n_ops:.3g} DAG ops "
                           f"(chunk_bytes {work.chunk_bytes} x {work.iterations} iterations), more than the "
                           f"{limit:.3g} this machine can plan at {memory.PLAN_BYTES_PER_DAG_OP} B per op", fix)


def uses_blocks(exp, work=None) -> bool:
    """Whether training workload ``work`` of ``exp`` (default: its one workload) lowers its calls inside one
    server to BLOCK ops (cosim.collectives.lower): when ``nvlink_blocks`` asks for it, except where a feature
    reads their copies one by one: faults and a collective timeout (which rank a failed collective names), a
    partitioned run (which partition launches each copy)."""
    work = exp.workload if work is None else work
    return (work.nvlink_blocks and not exp.faults and exp.limits.collective_timeout_ns == 0
            and exp.limits.partitions == 1)


def uses_flow_blocks(exp, work, dag_ops_bound: float) -> bool:
    """Whether training workload ``work`` of ``exp`` lowers its calls across servers to BLOCK ops as well,
    where it uses BLOCK ops (:func:`uses_blocks`): ``flow_blocks`` "on", or "auto" and ``dag_ops_bound`` (its
    DAG's lower bound without them) past the planning headroom (:func:`beyond_headroom`)."""
    mode = work.flow_blocks
    return uses_blocks(exp, work) and (mode == "on" or (mode == "auto" and beyond_headroom(dag_ops_bound)))


#: how far below this machine's op limit a generated job's DAG-op bound must stay to be planned: the bound
#: undercounts the ops (channels, a chunk per channel) by up to a third, and the limit is checked again after
#: lowering against the memory the plan left (cosim.plan.compile), so a job past half the limit is refused
#: there after minutes of planning instead of estimated at once
PLAN_HEADROOM = 2


def beyond_headroom(dag_ops_bound: float) -> bool:
    """True when a DAG of at least ``dag_ops_bound`` ops is past 1/:data:`PLAN_HEADROOM` of the ops this machine
    can plan (:func:`dag_op_limit`)."""
    return dag_ops_bound * PLAN_HEADROOM > dag_op_limit()


def dag_ops_lower_bound(trace, chunk_bytes: int, gpus_per_server: int | None = None,
                        every_call: bool = False) -> float:
    """A lower bound on the DAG ops of one lowered iteration, without lowering: an op per compute, a chunk
    per ``chunk_bytes`` of every send, and per collective member a chunk per ``chunk_bytes`` of the
    (n-1)/n x S bytes every algorithm makes a member of an n-rank group send at least, or 1/n of the call's one
    BLOCK op for a group inside one server of ``gpus_per_server`` GPUs (None: no BLOCK ops), or for every
    group with ``every_call`` (calls across servers held as BLOCK ops too)."""
    kind = np.asarray(trace.kind)
    size = np.asarray(trace.bytes, np.float64)
    send, coll = kind == OpKind.SEND, kind == OpKind.COLLECTIVE
    group = np.asarray(trace.group, np.int64)[coll]
    n = np.diff(np.asarray(trace.group_ptr, np.int64))[group].astype(np.float64)
    chunks = np.ceil(size[coll] * (n - 1) / np.maximum(n, 1) / chunk_bytes)
    if gpus_per_server is not None:
        inside = exposure.groups_inside_servers(trace.group_ptr, trace.group_ranks, gpus_per_server) | every_call
        chunks = np.where(inside[group], 1.0 / np.maximum(n, 1), chunks)
    return float(np.count_nonzero(kind == OpKind.COMPUTE) + np.ceil(size[send] / chunk_bytes).sum() + chunks.sum())


def _earliest(times_ns: np.ndarray) -> float:
    """The earliest time of ``times_ns`` ignoring NaN (an op not started), NaN if none; no copy."""
    t = float(np.fmin.reduce(times_ns, initial=np.inf))
    return t if np.isfinite(t) else float("nan")


def ops_table(trace, dag, op_start_ns: np.ndarray, op_finish_ns: np.ndarray,
              trace_ops: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The ops table (module docstring) of the rows of ``trace_ops`` (trace op indices, increasing; None: every
    op) in every iteration."""
    k, n = dag.n_iterations, trace.n_ops
    r = np.arange(n, dtype=np.int64) if trace_ops is None else np.asarray(trace_ops, np.int64)
    tile = lambda a: np.tile(a if trace_ops is None else a[r], k)  # noqa: E731
    at = None if trace_ops is None else (np.arange(k, dtype=np.int64)[:, None] * n + r).reshape(-1)
    of = lambda dag_ops: dag_ops if at is None else dag_ops[at]  # noqa: E731
    return {
        "iteration": np.repeat(np.arange(k, dtype=np.int32), r.size),
        "trace_op": np.tile(r, k),
        "rank": tile(trace.rank),
        "kind": tile(trace.kind),
        "phase": tile(trace.phase),
        "coll_id": tile(trace.coll_id),
        "start_ns": op_start_ns[of(dag.trace_start)],
        "finish_ns": op_finish_ns[of(dag.trace_done)],
        "group_kind": tile(trace.op_group_kind()),
        "medium": tile(exposure.op_media(trace.kind, trace.rank, trace.group, trace.peer, trace.group_ptr,
                                         trace.group_ranks, dag.gpus_per_server)),
    }


def kept_trace_ops(trace, op_table: str) -> np.ndarray | None:
    """The trace ops whose rows the ops table stores (telemetry.op_table; None: every op)."""
    if op_table == "all":
        return None
    if op_table == "none":
        return np.zeros(0, np.int64)
    return np.flatnonzero(trace.kind != OpKind.COMPUTE)


def training_tables(trace, dag, op_start_ns: np.ndarray, op_finish_ns: np.ndarray,
                    trace_ops: np.ndarray | None = None) -> dict[str, dict[str, np.ndarray]]:
    """ops / collectives / iterations tables (definitions in the module docstring); the ops table of the
    rows of ``trace_ops`` (ops_table)."""
    k = dag.n_iterations
    ops = ops_table(trace, dag, op_start_ns, op_finish_ns, trace_ops)
    colls = {
        "iteration": dag.coll_iteration.copy(),
        "coll_id": dag.coll_trace_id.copy(),
        "kind": dag.coll_kind.copy(),
        "group": dag.coll_group.copy(),
        "group_kind": trace.group_kind[dag.coll_group].astype(np.uint8),
        "ranks": np.diff(dag.coll_ranks_ptr).astype(np.int32),
        "bytes": dag.coll_bytes.copy(),
        "algorithm": dag.coll_algo.copy(),
        "start_ns": op_start_ns[dag.coll_start_op],
        "finish_ns": op_finish_ns[dag.coll_end_op],
    }
    compute = trace.kind == OpKind.COMPUTE
    per_rank = np.zeros(trace.n_ranks, np.int64)
    np.add.at(per_rank, trace.rank[compute].astype(np.int64), trace.duration_ns[compute])
    busiest = int(per_rank.max()) if per_rank.size else 0
    # an iteration's ops are one slice of the DAG (slices, not masks: no op-sized copies)
    its = [slice(int(lo), int(hi)) for lo, hi in zip(dag.iteration_ptr[:-1], dag.iteration_ptr[1:])]
    start = np.array([_earliest(op_start_ns[i]) for i in its], np.float64)
    # an iteration with an unfinished op (a run cut by the time limit) has no finish time
    finish = np.array([float(op_finish_ns[i].max()) if op_finish_ns[i].size and np.isfinite(op_finish_ns[i]).all()
                       else np.nan for i in its], np.float64)
    time_ns = finish - np.concatenate([[0.0], finish[:-1]])
    iterations = {
        "iteration": np.arange(k, dtype=np.int32), "start_ns": start, "finish_ns": finish, "time_ns": time_ns,
        "exposed_comm_ns": np.maximum(time_ns - busiest, 0.0),
    }
    return {"ops": ops, "collectives": colls, "iterations": iterations, "_compute_time_ns": busiest,
            "_busiest_rank": int(np.argmax(per_rank)) if per_rank.size else 0}


def transfer_roots(dag) -> np.ndarray:
    """int64 [n_ops]: for every FLOW op, the first FLOW op of its transfer; −1 for other ops.

    A transfer is everything one call (a collective or a send) moves from one rank to another in one
    iteration: the chunks of a message, and for a pipelined algorithm the messages of its steps, which
    follow each other on the same path. On an idle fabric it takes its ideal time, while each chunk alone,
    sharing the link with the chunks around it, looks up to 2× slower."""
    n = dag.kind.size
    flow = np.flatnonzero(dag.kind == DagOpKind.FLOW)
    if not flow.size:
        return np.full(n, -1, np.int64)
    columns = (dag.iteration, dag.coll, dag.trace_op, dag.src, dag.dst)
    key = lambda column: np.asarray(column)[flow].astype(np.int64, copy=False)  # noqa: E731
    # One int64 per flow when the key ranges' product fits (sorting it is many times faster than
    # np.unique(axis=1), which sorts rows as opaque bytes); the grouping is the same either way. Packed a
    # key at a time: a large run has millions of flows, and five keys of them at once are its record's peak.
    packed = np.zeros(flow.size, np.int64)
    span = 1
    for column in columns:
        k = key(column)
        lo = int(k.min())
        width = int(k.max()) - lo + 1
        span *= width
        if span >= 2**62:
            del packed, k
            _, group = np.unique(np.stack([key(c) for c in columns]), axis=1, return_inverse=True)
            break
        k -= lo
        packed *= width
        packed += k
    else:
        del k
        _, group = unique_inverse(packed)
        del packed
    group = group.reshape(-1)
    first = np.full(int(group.max()) + 1, n, np.int64)
    np.minimum.at(first, group, flow)
    roots = np.full(n, -1, np.int64)
    roots[flow] = first[group]
    return roots


def transfer_slowdowns(flows: Mapping[str, np.ndarray], row_root: np.ndarray, ideal_ns_of) -> np.ndarray:
    """Slowdown of every transfer: (last chunk's finish − first chunk's start) / ideal FCT of its bytes.

    ``row_root`` gives each flow row the row of its transfer's first chunk (−1: that one never started;
    those flows make one transfer); ``ideal_ns_of(src, dst, size_bytes)`` is the ideal FCT of a lone flow
    (cosim.network.ideal). Transfers in the order of their roots; the flows are read a slice at a time."""
    n = row_root.size
    # the transfers' distinct values, in order: −1 if some flow's root never started, then the roots
    seen = np.zeros(n, bool)
    unstarted = False
    for lo in range(0, n, telemetry.FLOW_SLICE_ROWS):
        part = row_root[lo:lo + telemetry.FLOW_SLICE_ROWS]
        seen[part[part >= 0]] = True
        unstarted = unstarted or bool((part < 0).any())
    roots = np.flatnonzero(seen)
    del seen
    if unstarted:
        roots = np.concatenate([[-1], roots])
    k = roots.size
    start = np.full(k, np.inf)
    finish = np.full(k, -np.inf)
    size = np.zeros(k, np.int64)
    first = np.full(k, n, np.int64)
    for lo in range(0, n, telemetry.FLOW_SLICE_ROWS):
        hi = min(lo + telemetry.FLOW_SLICE_ROWS, n)
        tid = np.searchsorted(roots, row_root[lo:hi])
        with np.errstate(invalid="ignore"):  # an unfinished chunk (nan) leaves its transfer unfinished (nan)
            np.minimum.at(start, tid, np.asarray(telemetry.flow_column(flows, "start_ns", lo, hi), np.float64))
            np.maximum.at(finish, tid, np.asarray(telemetry.flow_column(flows, "finish_ns", lo, hi), np.float64))
        np.add.at(size, tid, np.asarray(telemetry.flow_column(flows, "size_bytes", lo, hi), np.int64))
        np.minimum.at(first, tid, np.arange(lo, hi, dtype=np.int64))
    ideal = ideal_ns_of(np.asarray(flows["src"])[first], np.asarray(flows["dst"])[first], size)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ideal > 0, (finish - start) / ideal, np.nan)


def training_summary(tables: Mapping[str, Mapping[str, np.ndarray]], compute_time_ns: int) -> dict:
    """iteration_time_ns, exposed_comm_ns, collective statistics per group and kind ... (module docstring)."""
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
    out |= collectives.summary_entries(
        collectives.collective_stats(tables["collectives"], first_iteration=1 if times.size > 1 else 0))
    return out


def throughput_entries(specs: Mapping, iteration_time_ns: float | None, n_ranks: int) -> dict:
    """FLOP rates of a training run from its trace's ``specs`` (cosim.workload.flops has the conventions):

    - ``model_flop_per_s_per_gpu``: model FLOPs per iteration (3·B·F_seq, no recomputation, the full s×s
      attention matrix) / (iteration time · GPUs), FLOP/s;
    - ``megatron_flop_per_s_per_gpu``: the same with Megatron's count (recomputed forward counted, as
      Narayanan et al. SC'21 report per-GPU TFLOP/s), FLOP/s;
    - ``mfu``: model_flop_per_s_per_gpu / the GPU's peak dense bf16 FLOP/s (a fraction).

    Empty for a trace without a model (a hand-made trace) or an unfinished iteration."""
    derived, hw = specs.get("derived", {}), specs.get("hardware", {})
    model_flops = derived.get("model_flops_per_iteration")
    megatron = derived.get("megatron_flops_per_iteration")
    if megatron is None and model_flops is not None and "model" in specs and "parallelism" in specs:
        from cosim.workload.flops import megatron_flops_per_iteration  # noqa: PLC0415
        from cosim.workload.model import ModelSpec  # noqa: PLC0415

        par = specs["parallelism"]
        megatron = megatron_flops_per_iteration(ModelSpec(**specs["model"]), par["global_batch_size"],
                                                bool(par.get("recompute", False)))
    if not model_flops or not iteration_time_ns or iteration_time_ns <= 0 or n_ranks < 1:
        return {}
    seconds = iteration_time_ns * 1e-9
    out = {"model_flop_per_s_per_gpu": model_flops / (seconds * n_ranks)}
    if megatron:
        out["megatron_flop_per_s_per_gpu"] = megatron / (seconds * n_ranks)
    if hw.get("peak_flops_per_s"):
        out["mfu"] = out["model_flop_per_s_per_gpu"] / hw["peak_flops_per_s"]
    return out


def _sub_roots(t) -> np.ndarray:
    """int64 [n_subs]: for every sub of templates ``t``, the first sub (local index) of its template that moves
    between the same two GPUs: the sub whose flow is the first of its transfer (transfer_roots)."""
    tmpl = t.template_of_sub()
    width = int(max(t.gpu.max(initial=0), t.dst.max(initial=0))) + 1
    _, group = unique_inverse((tmpl * width + t.gpu) * width + t.dst)  # subs of one GPU pair of one template
    group = group.reshape(-1)
    first = np.full(int(group.max(initial=-1)) + 1, t.gpu.size, np.int64)
    np.minimum.at(first, group, np.arange(t.gpu.size))
    return first[group] - t.ptr[tmpl]


def transfer_rows(dag, fop: np.ndarray, fsub: np.ndarray | None) -> np.ndarray:
    """int64 per flow (FLOW op ``fop``, or sub ``fsub`` of BLOCK op ``fop``): the row of the first flow of its
    transfer (transfer_roots; a BLOCK op's: its first sub between the same two GPUs), -1 if that one never
    started."""
    rows = np.full(fop.size, -1, np.int64)
    plain = np.arange(fop.size) if fsub is None else np.flatnonzero(fsub < 0)
    row_of_op = np.full(dag.kind.size, -1, np.int64)
    row_of_op[fop[plain]] = plain
    rows[plain] = row_of_op[transfer_roots(dag)[fop[plain]]]
    del row_of_op  # op-sized: not kept through the slowdowns
    if fsub is None or plain.size == fop.size:
        return rows
    # every flow sub of a BLOCK op has a slot (the op's first slot plus the sub's place among its template's
    # flow subs) holding the row of its flow: a flow's root is then its root sub's slot, found a slice of
    # flows at a time without sorting
    t = dag.blocks
    of_sub = t.template_of_sub()
    is_flow = t.kind == DagOpKind.FLOW
    before = np.zeros(is_flow.size + 1, np.int64)  # flow subs before each sub
    np.cumsum(is_flow, out=before[1:])
    place = before[:-1] - before[t.ptr[:-1]][of_sub]
    first_slot = np.zeros(dag.block_op.size + 1, np.int64)
    np.cumsum(t.flow_counts()[dag.block_tmpl], out=first_slot[1:])
    root = _sub_roots(t) + t.ptr[of_sub]  # every sub's root sub, as an index into the subs
    del before, of_sub
    slot_row = np.full(int(first_slot[-1]), -1, index_dtype(fop.size))
    for fill in (True, False):
        for lo in range(0, fop.size, telemetry.FLOW_SLICE_ROWS):
            sub = np.flatnonzero(fsub[lo:lo + telemetry.FLOW_SLICE_ROWS] >= 0) + lo
            block = np.searchsorted(dag.block_op, fop[sub])
            g = t.ptr[dag.block_tmpl[block]] + fsub[sub]
            if fill:
                slot_row[first_slot[block] + place[g]] = sub
            else:
                r = root[g]
                rows[sub] = np.where(is_flow[r], slot_row[first_slot[block] + place[r]], -1)
    return rows


def transfer_summary(fabric, net, dag, fop: np.ndarray, flows: dict, fsub: np.ndarray | None = None) -> dict:
    """transfer_slowdown_p50/p99 over finished transfers; stores each flow's transfer in flows["transfer"]
    (the row of its first flow; transfer_rows)."""
    flows["transfer"] = transfer_rows(dag, fop, fsub)
    ideal = lambda src, dst, size: ideal_fct_ns(fabric, src, dst, size, mtu_bytes=net.mtu_bytes,  # noqa: E731
                                                header_bytes=net.header_bytes)
    slow = transfer_slowdowns(flows, flows["transfer"], ideal)
    slow = slow[np.isfinite(slow)]
    if not slow.size:
        return {}
    return {"transfer_slowdown_p50": float(np.percentile(slow, 50)),
            "transfer_slowdown_p99": float(np.percentile(slow, 99))}


def nic_payload_bytes_per_s(network) -> float:
    """Payload rate of one NIC of ``network``: the link rate less the per-packet headers, with the MTU and
    header size the engine applies for this network's settings."""
    names = ("HostNic::MtuBytes", "HostNic::HeaderBytes")
    mtu, header = (int(v) for v in engine.attribute_values(run_attributes(network, 0), names).values())
    return network.link_gbps * 1e9 / 8 * mtu / (mtu + header)


def flow_latency_ns(network) -> float:
    """Fixed time of one flow between GPUs on one rail of ``network``: two links (NIC → rail switch → NIC),
    each its propagation delay and one full packet's serialization, ns."""
    names = ("HostNic::MtuBytes", "HostNic::HeaderBytes")
    mtu, header = (int(v) for v in engine.attribute_values(run_attributes(network, 0), names).values())
    return 2 * (network.link_delay_ns + (mtu + header) * 8 / network.link_gbps)


def tuning_model(network, trace) -> TuningModel:
    """The collective tuner of a run: the trace's GPU and NVLink rate, the NIC rate of ``network``."""
    return tuning_for(network, trace.spec_dict().get("hardware"))


def tuning_for(network, hardware: dict | None) -> TuningModel:
    """The collective tuner of a trace whose ``hardware`` spec (a dict, as a trace holds it) runs on ``network``."""
    return TuningModel(nvlink=nvlink_model(hardware), nic_bytes_per_s=nic_payload_bytes_per_s(network),
                       flow_latency_ns=flow_latency_ns(network))


# --- the kind -----------------------------------------------------------------------------------------------

@register
class TrainingKind(WorkloadKind):
    """One training job: its trace's ranks, one per GPU; ops table, collectives and iterations."""

    name = "training"
    ranked = True

    def load(self, exp, job, gpus_per_server, trace=None):
        """The job's checked trace: ``trace`` (in memory), its file, or generated from its model."""
        return resolve_trace(job.work, trace, gpus_per_server,
                                      where="workload" if not exp.workloads else f"workloads.{job.name}.trace")

    def gpus_per_server(self, loaded):
        gps = loaded.spec_dict().get("hardware", {}).get("gpus_per_host", 8)
        return Int(minimum=1).convert(gps, "trace hardware.gpus_per_host")

    def ranks(self, loaded):
        return int(loaded.n_ranks)

    def lower(self, job, trace, hosts, ctx: LowerContext):
        work, exp = job.work, ctx.experiment
        where = _field(exp, job, "chunk_bytes")
        limit = dag_op_limit()
        blocks = uses_blocks(exp, work)
        gps = ctx.gpus_per_server if blocks else None
        bound = dag_ops_lower_bound(trace, work.chunk_bytes, gps) * work.iterations
        flow_blocks = uses_flow_blocks(exp, work, bound)
        if flow_blocks:
            bound = dag_ops_lower_bound(trace, work.chunk_bytes, gps, every_call=True) * work.iterations
        if bound > limit:
            raise too_many_ops(bound, "at least ", work, trace, limit, where)
        lowered = lambda flow_blocks: lower(  # noqa: E731
            trace, gpus_per_server=ctx.gpus_per_server, chunk_bytes=work.chunk_bytes, algorithm=work.algorithm,
            tuning=tuning_model(exp.network, trace), n_channels=ctx.n_channels, blocks=blocks,
            flow_blocks=flow_blocks)
        dag = lowered(flow_blocks)
        if dag.n_ops * work.iterations > limit and blocks and not flow_blocks and work.flow_blocks == "auto":
            # the bound missed this DAG (a chunk per channel where chunk_bytes exceeds a channel's share):
            # "auto" holds the calls across servers as BLOCK ops after all, rather than refuse the run
            del dag
            dag = lowered(True)
        if dag.n_ops * work.iterations > limit:
            raise too_many_ops(dag.n_ops * work.iterations, "", work, trace, limit, where)
        if work.iterations > 1:
            dag = repeat(dag, work.iterations)
        return (trace, dag), Piece.of_flow_dag(dag, hosts, trace)

    def ideal_ns(self, jp, fabric, nic_bytes_per_s):
        return time_limit.dag_ideal_ns(jp.state[1], nic_bytes_per_s)

    def flow_dag(self, state):
        return state[1]

    def executor_attributes(self, jp):
        return executor_attributes(jp.state[0].spec_dict().get("hardware"))

    def results(self, jp, out, rows, flows, first_op, *, fabric, state, alone, op_table="all"):
        trace, dag = state
        lo, hi = first_op, first_op + dag.n_ops
        kept = kept_trace_ops(trace, op_table)
        start_ns, finish_ns = out.op_start_ns[lo:hi], out.op_finish_ns[lo:hi]
        tables = training_tables(trace, dag, start_ns, finish_ns, kept)
        compute = tables.pop("_compute_time_ns")
        busiest = tables.pop("_busiest_rank")
        its = tables["iterations"]
        start = jp.job.start_ns
        if start > 0 and its["time_ns"].size:  # the first iteration starts at the job's start
            its["time_ns"][0] -= start
            its["exposed_comm_ns"][0] = max(its["time_ns"][0] - compute, 0.0)
        summary = training_summary(tables, compute)
        # the summary reads the busiest rank's ops and every send: a run that stores fewer rows (a large
        # run's compute ops are most of them) reads those rows only
        read = None if kept is None else np.flatnonzero((trace.rank == busiest) | (trace.kind == OpKind.SEND))
        ops = tables["ops"] if kept is None else ops_table(trace, dag, start_ns, finish_ns, read)
        summary |= exposure.exposure_entries(ops, its, busiest, job_start_ns=start,
                                             group_kinds=None if kept is None else trace.op_group_kind())
        summary |= exposure.p2p_entries(ops, np.tile(trace.bytes if read is None else trace.bytes[read],
                                                     dag.n_iterations),
                                        first_iteration=1 if its["time_ns"].size > 1 else 0)
        del ops, read
        if rows is None:  # every flow of the run, in order: its transfers are the column
            fop = out.flow_op - lo if lo else out.flow_op
            summary |= transfer_summary(fabric, out.network, dag, fop, flows, out.flow_sub)
        else:
            mine = {k: np.asarray(x)[rows] for k, x in flows.items() if k != "transfer"}
            fsub = None if out.flow_sub is None else out.flow_sub[rows]
            summary |= transfer_summary(fabric, out.network, dag, out.flow_op[rows] - lo, mine, fsub)
            # the job's rows of the run's column, in the run's row numbers
            flows["transfer"][rows] = np.where(mine["transfer"] >= 0, rows[mine["transfer"]], -1)
        summary |= throughput_entries(trace.spec_dict(), summary["iteration_time_ns"], trace.n_ranks)
        summary |= {"n_ranks": trace.n_ranks, "n_ops": trace.n_ops}
        return summary, tables

    def config(self, jp, state, plan):
        trace, dag = state
        work = jp.job.work
        return {"workload": {"n_ranks": trace.n_ranks, "n_ops": trace.n_ops, "gpus_per_server": plan.gpus_per_server,
                             "trace_in_memory": work.trace is None and work.model is None,
                             "specs": trace.spec_dict()},
                "dag": dag.summary()}

    def describe(self, jp):
        trace, dag = jp.state
        return {"ranks": trace.n_ranks, "trace_ops": trace.n_ops, "dag_ops": dag.n_ops}


def _field(exp, job, name: str) -> str:
    """The Experiment field ``name`` of ``job`` as errors name it."""
    return f"workload.{name}" if not exp.workloads else f"workloads.{job.name}.{name}"
