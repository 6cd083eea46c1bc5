"""Lower a workload trace into a :class:`~cosim.collectives.dag.FlowDag` of flows, compute and joins.

Mapping of trace ops (trace schema: :mod:`cosim.workload.trace`):

- COMPUTE → one COMPUTE op; its deps are the DAG ops that complete the trace op's deps (``trace_done``).
- COLLECTIVE, per call (coll_id): a start barrier NOP (rank −1) waiting for the union of every member op's
  deps, the algorithm's flows (:mod:`cosim.collectives.algorithms`; entry flows wait for the barrier), and
  an end NOP waiting for the terminal flows (or for the barrier if the call moves no bytes, e.g. a
  one-member group). Every member's trace op starts at the barrier and is done at the end NOP.
- SEND → a delay of NCCL's fixed cost of a send (a COMPUTE op of the sender,
  :meth:`~cosim.collectives.tuning.TuningModel.send_latency_ns`) waiting for the SEND's deps, then its
  transfer split into ceil(bytes / chunk_bytes) sequential chunks (FLOW between servers, NVLINK inside
  one); done = last chunk. A zero-byte SEND is a NOP.
- RECV → a NOP waiting for the RECV's deps and for the matching SEND's last chunk (matched by match_id).

Order: trace ops and collective calls are placed in a topological order of the global graph (same-rank deps,
send → recv, collective joins) found by one Kahn pass over the trace ops (in the plugin,
``cosim::PlacementOrder``); a trace that can never finish raises CosimInputError. The DAG op counts of every
placed item are then known, so all ops are laid out with cumulative sums and filled with numpy: compute,
sends and recvs at once, collectives once per distinct (kind, group, size, algorithm) template, broadcast
over its calls. The deps go to the DagBuilder as sources of edge blocks (the trace's deps, each template's),
run when the CSR is built: counted per op, then written at their offsets, so a lowering never holds its
edges at once.

Algorithm choice (``algorithm="auto"``): the tuning model (:mod:`cosim.collectives.tuning`) estimates every
candidate of the call's kind on its group's shape and size and takes the fastest — ring or tree for
ALL_REDUCE (tree only across servers, or whenever the trace hints TREE; NVLS too inside one NVLink domain
of hardware with NVLink SHARP), ring for REDUCE_SCATTER / ALL_GATHER, PXN (or direct) for ALL_TO_ALL, chain
for BROADCAST. The idealized "hierarchical" scheme is used only when named; "nvls" named for a group
across domains, or on hardware without NVLink SHARP, runs the ring. An explicit name given as a string
applies to every collective kind that supports it (others stay "auto"); a mapping CollKind → name must name
an algorithm the kind supports. "ring" across servers is NCCL's rail-aligned channel rings (``n_channels``
of them, default two per NIC of a server).

Latency: every call's start barrier is a COMPUTE op of rank −1 lasting the tuning model's latency of the
algorithm used with its best protocol (:meth:`~cosim.collectives.tuning.TuningModel.start_latency_ns`:
launch, per-step synchronisation, network proxy — what the NVLink copies and the packet-level network do
not model); a NOP when that is 0 (a one-member group). The NVLINK ops of a ring inside one server carry
as ``duration_ns`` the extra copy time of its bus bandwidth (bytes ×
:meth:`~cosim.collectives.tuning.TuningModel.nvlink_extra_ns_per_byte`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim import plugin
from cosim.arrays import unique_inverse
from cosim.collectives.algorithms import SUPPORTED, Algorithm, pxn_applies, schedule
from cosim.collectives.dag import (
    INT32_MAX,
    MAX_BLOCK_SUBS,
    NUM_PRIORITIES,
    BlockTemplates,
    DagBuilder,
    DagOpKind,
    FlowDag,
    index_dtype,
    ragged_take,
    sorted_unique,
)
from cosim.collectives.tuning import CANDIDATES, P2P_LL_THRESHOLD_BYTES, Estimate, Shape, TuningModel
from cosim.errors import CosimInputError
from cosim.workload.trace import (
    NO_GROUP_KIND,
    AlgoHint,
    CollKind,
    GroupKind,
    OpKind,
    Trace,
)

#: algorithm names accepted by :func:`lower`
ALGORITHM_NAMES = ("auto", "ring", "tree", "halving_doubling", "direct", "pxn", "hierarchical", "chain", "nvls")
_BY_NAME = {"ring": Algorithm.RING, "tree": Algorithm.TREE, "halving_doubling": Algorithm.HALVING_DOUBLING,
            "direct": Algorithm.DIRECT, "pxn": Algorithm.PXN, "hierarchical": Algorithm.HIERARCHICAL,
            "chain": Algorithm.CHAIN, "nvls": Algorithm.NVLS}
_COLL_KINDS = tuple(k for k in CollKind if k != CollKind.NONE)
#: trace ops whose dep edges one block of _trace_edge_blocks holds (bounds its temporaries to about a MB)
_TRACE_BLOCK_OPS = 1 << 12
#: DAG ops (or dep edges) one block of a collective template's fill or dep blocks holds, at least one call
_TEMPLATE_BLOCK = 1 << 13


def _choices(kind: CollKind) -> list[str]:
    names = ["auto"] + [a.name.lower() for a in SUPPORTED[kind]]
    return names + (["ring"] if kind == CollKind.BROADCAST else [])


def algorithm_table(algorithm: str | Mapping) -> dict[CollKind, str]:
    """Validate ``algorithm`` and return the algorithm name for each collective kind."""
    valid = ", ".join(ALGORITHM_NAMES)
    if isinstance(algorithm, str):
        if algorithm not in ALGORITHM_NAMES:
            raise CosimInputError("algorithm", f"unknown algorithm {algorithm!r}", f"choose one of {valid}")
        return {k: (algorithm if algorithm in _choices(k) else "auto") for k in _COLL_KINDS}
    if not isinstance(algorithm, Mapping):
        raise CosimInputError("algorithm", f"must be a name or a mapping CollKind → name, got {algorithm!r}")
    table = {k: "auto" for k in _COLL_KINDS}
    for key, name in algorithm.items():
        try:
            kind = CollKind[key.upper()] if isinstance(key, str) else CollKind(key)
        except (KeyError, ValueError):
            raise CosimInputError("algorithm", f"unknown collective kind {key!r}",
                                  f"use one of {', '.join(k.name for k in _COLL_KINDS)}") from None
        if kind == CollKind.NONE:
            raise CosimInputError("algorithm", "NONE is not a collective kind")
        if name not in _choices(kind):
            raise CosimInputError("algorithm", f"{name!r} cannot lower {kind.name}",
                                  f"choose one of {', '.join(_choices(kind))}")
        table[kind] = name
    return table


def group_shape(members: np.ndarray, gpus_per_server: int) -> Shape:
    """The tuner's view of a group: n ranks, k servers, g per server (0 if the servers hold different counts)."""
    _, counts = np.unique(np.asarray(members) // gpus_per_server, return_counts=True)
    g = int(counts[0]) if counts.size and np.all(counts == counts[0]) else 0
    return Shape(int(np.size(members)), int(counts.size), g)


def resolve_algorithm(kind: CollKind, name: str, hint: int, members: np.ndarray, gpus_per_server: int,
                      tuning: TuningModel, size_bytes: int) -> Estimate:
    """The tuner's decision (algorithm, protocol, start latency, extra NVLink copy time per byte) for a call
    of ``kind`` on ``members`` under the choice ``name``."""
    kind = CollKind(kind)
    shape = group_shape(members, gpus_per_server)
    if name == "auto":
        cands = CANDIDATES[kind]
        if kind == CollKind.ALL_REDUCE and hint == AlgoHint.TREE:
            cands = (Algorithm.TREE,)
        elif kind == CollKind.ALL_REDUCE and shape.k < 2:
            cands = (Algorithm.RING, Algorithm.NVLS) if tuning.nvlink.nvls else (Algorithm.RING,)
        elif kind == CollKind.ALL_TO_ALL and not pxn_applies(members, gpus_per_server):
            cands = (Algorithm.DIRECT,)
        return tuning.choose(kind, shape, size_bytes, cands)
    algo = Algorithm.CHAIN if name == "ring" and kind == CollKind.BROADCAST else _BY_NAME[name]
    if algo == Algorithm.NVLS and (shape.k > 1 or not tuning.nvlink.nvls):
        algo = Algorithm.RING  # no NVLink SHARP across domains, nor on hardware without it
    return tuning.best_protocol(kind, algo, shape, size_bytes)


def _priority_table(priorities: Mapping | None) -> np.ndarray:
    table = np.zeros(len(GroupKind) + 1, dtype=np.uint8)  # last slot: ops without a group
    for key, value in (priorities or {}).items():
        try:
            gk = GroupKind[key.upper()] if isinstance(key, str) else GroupKind(key)
        except (KeyError, ValueError):
            raise CosimInputError("priorities", f"unknown group kind {key!r}",
                                  f"use one of {', '.join(k.name for k in GroupKind)}") from None
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < NUM_PRIORITIES:
            raise CosimInputError("priorities", f"priority of {gk.name} must be an integer "
                                  f"0..{NUM_PRIORITIES - 1}, got {value!r}")
        table[gk] = value
    return table


def _gpus_per_server(trace: Trace, gpus_per_server: int | None) -> int:
    if gpus_per_server is None:
        gpus_per_server = trace.spec_dict().get("hardware", {}).get("gpus_per_host", 8)
    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, (int, np.integer)) or gpus_per_server < 1:
        raise CosimInputError("gpus_per_server", f"must be an integer >= 1, got {gpus_per_server!r}")
    return int(gpus_per_server)


def _calls(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The collective calls, index c in coll_id order: (the COLLECTIVE ops, the call of each, call_of_op per
    trace op (−1 outside any), the member ops by call, their CSR pointers)."""
    coll_ops = np.flatnonzero(trace.kind == OpKind.COLLECTIVE)
    call_ids, call_inv = unique_inverse(trace.coll_id[coll_ops], below=trace.n_ops)
    call_of_op = np.full(trace.n_ops, -1, np.int32)  # call indices fit int32: there are fewer calls than trace ops
    call_of_op[coll_ops] = call_inv
    call_ops = coll_ops[np.argsort(call_inv, kind="stable")]
    call_ptr = np.concatenate([[0], np.cumsum(np.bincount(call_inv, minlength=call_ids.size))]).astype(np.int64)
    return coll_ops, call_inv, call_of_op, call_ops, call_ptr


def _placement_order(trace: Trace, call_of_op: np.ndarray, call_ptr: np.ndarray, call_ops: np.ndarray,
                     recv_of_send: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kahn order over items (a non-collective op or a whole collective call), deps before dependents:
    (item, is_call) per position, ``item`` the op index, or the call index where ``is_call``. The pass is the
    plugin's ``cosim::PlacementOrder`` (level by level, each level in increasing op index, so that identical
    parts of the graph, the rails of a training job, are laid out alike; one step per trace op)."""
    n = trace.n_ops
    n_calls = call_ptr.size - 1
    n_items = n - call_ops.size + n_calls
    item = np.empty(max(n_items, 1), np.int64)
    is_call = np.empty(max(n_items, 1), np.uint8)
    args = [np.ascontiguousarray(a, dtype) for a, dtype in ((trace.dep_ptr, np.int64), (trace.dep_idx, np.int64),
                                                            (call_of_op, np.int32), (call_ptr, np.int64),
                                                            (call_ops, np.int64), (recv_of_send, np.int32))]
    dep_ptr, dep_idx, call_of, ptr, ops, recv_of = (plugin.pointer(a) for a in args)
    placed = int(plugin.namespace().PlacementOrder(dep_ptr, dep_idx, n, call_of, ptr, ops, n_calls, recv_of, item,
                                                   is_call, n_items))
    item, is_call = item[:placed], is_call[:placed].view(np.bool_)
    if placed != n_items:
        done = np.zeros(n, bool)
        done[item[~is_call]] = True
        done[call_ops[np.isin(call_of_op[call_ops], item[is_call])]] = True
        i = int(np.argmin(done))
        raise CosimInputError("trace", f"dependency cycle or deadlock: {n_items - placed} of {n_items} ops and "
                              f"collective calls can never run, e.g. op {i} (rank {int(trace.rank[i])}, "
                              f"{trace.label_of(i)})", "check the trace with cosim.workload.validate.check_trace")
    return item, is_call


def _match_recvs(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(recv_of_send, send_of_recv) per op, −1 where not applicable."""
    n = trace.n_ops
    sends = np.flatnonzero(trace.kind == OpKind.SEND)
    recvs = np.flatnonzero(trace.kind == OpKind.RECV)
    recv_of_send = np.full(n, -1, np.int32)  # op ids of the trace: they fit int32 (trace.dep_idx's range)
    send_of_recv = np.full(n, -1, np.int32)
    if recvs.size:
        order = np.argsort(trace.match_id[sends], kind="stable")
        ms = trace.match_id[sends][order]
        pos = np.searchsorted(ms, trace.match_id[recvs])
        ok = (pos < ms.size) & (ms[np.minimum(pos, max(ms.size - 1, 0))] == trace.match_id[recvs]) if ms.size \
            else np.zeros(recvs.size, bool)
        if not np.all(ok):
            r = int(recvs[~ok][0])
            raise CosimInputError("trace.match_id", f"recv op {r} has no matching send (match_id "
                                  f"{int(trace.match_id[r])})")
        s = sends[order][pos]
        send_of_recv[recvs] = s
        recv_of_send[s] = recvs
    return recv_of_send, send_of_recv


def _trace_edge_blocks(trace: Trace, start_of_op: np.ndarray, done_of_op: np.ndarray):
    """Per block of trace ops, its dep edges as (owner trace op, owner's first DAG op, the dep's completing
    DAG op), in the trace's edge order."""
    ptr = trace.dep_ptr
    for lo in range(0, trace.n_ops, _TRACE_BLOCK_OPS):
        hi = min(trace.n_ops, lo + _TRACE_BLOCK_OPS)
        owner = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(ptr[lo:hi + 1]))
        yield owner, start_of_op[owner], done_of_op[trace.dep_idx[ptr[lo]:ptr[hi]]]


def _own_trace_dep_blocks(trace: Trace, start_of_op: np.ndarray, done_of_op: np.ndarray):
    """The trace deps of ops outside collectives, a block at a time (DagBuilder.dep_blocks)."""
    for owner, e_own, e_dep in _trace_edge_blocks(trace, start_of_op, done_of_op):
        own = trace.kind[owner] != OpKind.COLLECTIVE
        yield e_own[own], e_dep[own]


def _trace_deps(b: DagBuilder, trace: Trace, start_of_op: np.ndarray, done_of_op: np.ndarray, n_dag: int) -> None:
    """Trace deps: an op's first DAG op (a collective's barrier) waits for its deps' completing DAG ops."""
    b.dep_blocks(_own_trace_dep_blocks, trace, start_of_op, done_of_op)
    # the members of a call share their barrier: deduplicate those edges (once; kept until the CSR is built)
    keys = [np.zeros(0, np.int64)]
    for owner, e_own, e_dep in _trace_edge_blocks(trace, start_of_op, done_of_op):
        shared = trace.kind[owner] == OpKind.COLLECTIVE
        keys.append(e_own[shared].astype(np.int64) * n_dag + e_dep[shared])
    edge = sorted_unique(np.concatenate(keys))
    del keys
    b.deps(edge // n_dag, edge % n_dag)


def send_delays_ns(trace: Trace, sends: np.ndarray, gps: int, tuning: TuningModel) -> np.ndarray:
    """NCCL's fixed cost of each SEND (:meth:`TuningModel.send_latency_ns`), ns; 0 for a zero-byte send."""
    return send_costs_ns(trace.bytes[sends], trace.rank[sends] // gps == trace.peer[sends] // gps, tuning)


def send_costs_ns(nbytes: np.ndarray, same: np.ndarray, tuning: TuningModel) -> np.ndarray:
    """int64 ns: NCCL's fixed cost of sends of ``nbytes`` each, ``same`` server or not; 0 for zero bytes."""
    nbytes = np.asarray(nbytes)
    # the cost takes a handful of values (protocol × inside or across servers): compute each once
    keys = np.stack([np.minimum(nbytes, P2P_LL_THRESHOLD_BYTES + 1), same], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    cost = np.array([round(tuning.send_latency_ns(int(nb), bool(sv))) for nb, sv in uniq.tolist()], np.int64)
    out = cost[inv.ravel()] if nbytes.size else np.zeros(0, np.int64)
    return np.where(nbytes > 0, out, 0).astype(np.int64)


def call_schedule(kind: CollKind, name: str, hint: int, members: np.ndarray, size_bytes: int, *, gps: int,
                  tuning: TuningModel, chunk_bytes: int, n_channels: int | None) -> tuple[Estimate, tuple]:
    """(the tuner's decision, (algorithm used, Schedule)) of a call of ``kind`` on ``members`` moving
    ``size_bytes`` under the choice ``name``: what :func:`lower` makes of every call of one template."""
    best = resolve_algorithm(kind, name, hint, members, gps, tuning, size_bytes)
    return best, schedule(kind, best.algorithm, members, size_bytes, chunk_bytes, gps, n_channels, best.protocol)


def call_counts(s, gps: int, *, blocks: bool, flow_blocks: bool) -> tuple[int, int, bool]:
    """(DAG ops, flows between servers, whether its flows are a BLOCK op's) of one call lowered to
    schedule ``s``: its barrier and end NOP around its schedule's ops, or around the one BLOCK op that
    stands for them (:func:`lower`'s ``blocks`` and ``flow_blocks``)."""
    blocked = blocks and _blockable(s, gps, flow_blocks)
    return 2 + (1 if blocked else s.n_ops), int(np.count_nonzero(_transfer_kinds(s, gps) == DagOpKind.FLOW)), blocked


def send_op_counts(nbytes: np.ndarray, delay_ns: np.ndarray, chunk_bytes: int) -> np.ndarray:
    """int64 DAG ops of SENDs of ``nbytes`` each whose fixed costs are ``delay_ns``: the cost's delay (when
    above 0) and a chunk per ``chunk_bytes`` (one NOP for a zero-byte send)."""
    return np.maximum(1, -(-np.asarray(nbytes) // chunk_bytes)) + (np.asarray(delay_ns) > 0)


def _send_ops(b: DagBuilder, trace: Trace, sends: np.ndarray, op_base: np.ndarray, n_chunks: np.ndarray,
              chunk_bytes: int, gps: int, send_prio: np.ndarray, delay_ns: np.ndarray) -> None:
    """Every SEND: a delay of NCCL's fixed cost (``delay_ns``: a COMPUTE op of the sending rank, NCCL's send
    kernel starting and shaking hands; the executor runs it as a delay beside the rank's other work) then
    its chunks (FLOW or NVLINK), each after the previous one; a zero-byte SEND is one NOP. ``send_prio``: the
    network priority of each send."""
    C = n_chunks[sends]
    op = ragged_take(op_base[sends], C)
    s_of = np.repeat(sends, C)
    pos = op - op_base[s_of]
    c_idx = pos - np.repeat(delay_ns > 0, C)  # chunk index; −1 for the delay
    nbytes = np.minimum(chunk_bytes, trace.bytes[s_of] - np.maximum(c_idx, 0) * chunk_bytes)
    rank = trace.rank[s_of].astype(np.int64)
    peer = trace.peer[s_of].astype(np.int64)
    xfer = (nbytes > 0) & (c_idx >= 0)
    xk = np.where(c_idx < 0, DagOpKind.COMPUTE, np.where(
        ~xfer, DagOpKind.NOP, np.where(rank // gps == peer // gps, DagOpKind.NVLINK, DagOpKind.FLOW)))
    b.ops(op, kind=xk, rank=rank, dst=np.where(xfer, peer, -1),
          bytes=np.where(xfer, nbytes, 0), duration_ns=np.where(c_idx < 0, np.repeat(delay_ns, C), 0),
          priority=np.where(xfer, np.repeat(send_prio, C), 0), trace_op=s_of)
    b.deps(op[pos > 0], op[pos > 0] - 1)  # the delay, then the chunks of one send in order


def _template_dep_blocks(local_owner: np.ndarray, local_dep: np.ndarray, entry: np.ndarray, term: np.ndarray,
                         call_base: np.ndarray, call_end: np.ndarray):
    """The deps of a template's ops in each of its calls (``call_base``: their barriers, ``call_end``: their
    end NOPs), a block of calls at a time (DagBuilder.dep_blocks): the schedule's own deps (edges between
    flows ``local_owner`` → ``local_dep`` of one call), the ``entry`` flows' wait for the barrier, the end
    NOP's wait for the ``term`` flows."""
    step = max(1, _TEMPLATE_BLOCK // max(local_owner.size, entry.size, term.size, 1))
    for lo in range(0, call_base.size, step):
        base = call_base[lo:lo + step][:, None] + 1  # first flow of each call
        yield (base + local_owner).ravel(), (base + local_dep).ravel()
        yield (base + entry).ravel(), np.repeat(call_base[lo:lo + step], entry.size)
        yield np.repeat(call_end[lo:lo + step], term.size), (base + term).ravel()


def _blockable(s, gps: int, flows: bool) -> bool:
    """Whether schedule ``s`` can run as one BLOCK op: it moves bytes, in fewer transfers than a template
    holds (MAX_BLOCK_SUBS), every one inside a server unless ``flows``, and its entry and terminal transfers
    are exactly those with no dependency and no dependent (what the executor assumes of a template)."""
    if s.n_ops == 0 or s.n_ops > MAX_BLOCK_SUBS or (not flows and np.any(s.src // gps != s.dst // gps)):
        return False
    has_dependent = np.zeros(s.n_ops, bool)
    has_dependent[s.dep_idx] = True
    return np.array_equal(s.entry, np.diff(s.dep_ptr) == 0) and np.array_equal(s.terminal, ~has_dependent)


def _transfer_kinds(s, gps: int) -> np.ndarray:
    """uint8 per transfer of schedule ``s``: NVLINK inside a server, FLOW between servers."""
    return np.where(s.src // gps == s.dst // gps, DagOpKind.NVLINK, DagOpKind.FLOW).astype(np.uint8)


def _copy_extra_ns(s, kinds: np.ndarray, extra_ns_per_byte: float) -> np.ndarray:
    """int64 per transfer of schedule ``s``: the extra copy time of its NVLink copies, 0 for its flows."""
    return np.where(kinds == DagOpKind.NVLINK, np.rint(s.bytes * extra_ns_per_byte), 0).astype(np.int64)


def _block_templates(templates: list, blocked: np.ndarray, t_extra: np.ndarray, gps: int) -> BlockTemplates:
    """The BlockTemplates of the ``blocked`` templates, in template order (GPUs as ranks)."""
    chosen = [(s, t_extra[t], _transfer_kinds(s, gps)) for t, (_, s) in enumerate(templates) if blocked[t]]
    cat = lambda get, dtype: np.concatenate([np.asarray(get(s, x, k), dtype) for s, x, k in chosen])  # noqa: E731
    return BlockTemplates(
        ptr=np.concatenate([[0], np.cumsum([s.n_ops for s, _, _ in chosen])]).astype(np.int64),
        kind=cat(lambda s, x, k: k, np.uint8),
        gpu=cat(lambda s, x, k: s.src, np.int32), dst=cat(lambda s, x, k: s.dst, np.int32),
        bytes=cat(lambda s, x, k: s.bytes, np.int64),
        duration_ns=cat(lambda s, x, k: _copy_extra_ns(s, k, x), np.int64),
        dep_ptr=np.concatenate([[0], np.cumsum(cat(lambda s, x, k: np.diff(s.dep_ptr), np.int64))]),
        dep_idx=cat(lambda s, x, k: s.dep_idx, np.int32))


def _collective_ops(b: DagBuilder, templates: list, t_extra: np.ndarray, tmpl_of_call: np.ndarray,
                    call_base: np.ndarray, call_end: np.ndarray, call_ids: np.ndarray, c_prio: np.ndarray,
                    c_algo: np.ndarray, gps: int, blocked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every template's flows broadcast over its calls, between their barrier and end NOPs (``c_algo``
    receives the algorithm of every call); its NVLink copies carry ``t_extra[t]`` ns per byte of extra copy
    time (what the call's bus bandwidth loses against the copy rate, resolve_algorithm). A ``blocked``
    template's calls get one BLOCK op each instead of its copies. Ops are written a block of calls at a time
    and the deps given as blocks made when the CSR is built, so no template's broadcast is ever held whole.
    Returns the BLOCK ops (increasing) and the block template (ordinal among the blocked) of each."""
    order = np.argsort(tmpl_of_call, kind="stable")
    bounds = np.searchsorted(tmpl_of_call[order], np.arange(len(templates) + 1))
    block_ops, block_tmpl = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)]
    for t, (algo, s) in enumerate(templates):
        cs = order[bounds[t]:bounds[t + 1]]
        c_algo[cs] = algo
        if s.n_ops == 0:
            b.deps(call_end[cs], call_base[cs])
            continue
        if blocked[t]:
            ops = call_base[cs] + 1
            b.ops(ops, kind=DagOpKind.BLOCK, priority=c_prio[cs], trace_op=call_ids[cs])
            b.deps(ops, call_base[cs])
            b.deps(call_end[cs], ops)
            block_ops.append(ops)
            block_tmpl.append(np.full(cs.size, int(np.count_nonzero(blocked[:t])), np.int32))
            continue
        tk = _transfer_kinds(s, gps)
        extra = _copy_extra_ns(s, tk, t_extra[t])
        step = max(1, _TEMPLATE_BLOCK // s.n_ops)
        for lo in range(0, cs.size, step):
            cb = cs[lo:lo + step]
            idx = (call_base[cb][:, None] + 1 + np.arange(s.n_ops)).ravel()
            b.ops(idx, kind=np.tile(tk, cb.size), rank=np.tile(s.src, cb.size), dst=np.tile(s.dst, cb.size),
                  bytes=np.tile(s.bytes, cb.size), duration_ns=np.tile(extra, cb.size),
                  priority=np.repeat(c_prio[cb], s.n_ops), trace_op=np.repeat(call_ids[cb], s.n_ops))
        # what the deps need of the schedule, as int32 flow indices: the schedules themselves can go before the
        # CSR is built
        local = lambda a: np.asarray(a, np.int32)  # noqa: E731 (indices within one call: < MAX_DAG_OPS)
        b.dep_blocks(_template_dep_blocks, local(np.repeat(np.arange(s.n_ops), np.diff(s.dep_ptr))),
                     local(s.dep_idx), local(np.flatnonzero(s.entry)), local(np.flatnonzero(s.terminal)),
                     call_base[cs], call_end[cs])
    ops, tmpl = np.concatenate(block_ops), np.concatenate(block_tmpl)
    order = np.argsort(ops)
    return ops[order], tmpl[order]


def lower(trace: Trace, *, gpus_per_server: int | None = None, chunk_bytes: int = 4 << 20,
          algorithm: str | Mapping = "auto", priorities: Mapping | None = None, tuning: TuningModel | None = None,
          n_channels: int | None = None, send_costs: bool = True, blocks: bool = False,
          flow_blocks: bool = False) -> FlowDag:
    """Lower ``trace`` (one iteration) into a FlowDag of flows, NVLink copies, compute ops and joins.

    A server holds ``gpus_per_server`` GPUs (default: the trace's hardware.gpus_per_host, else 8) and
    transfers are split into chunks of at most ``chunk_bytes`` bytes. ``algorithm`` is "auto", an algorithm
    name, or a mapping CollKind → name (module docstring); ``priorities`` optionally maps a GroupKind to the
    network priority (0..7) of that group's transfers. ``tuning`` is the tuning model (default:
    TuningModel.for_hardware of the trace's hardware spec) and ``n_channels`` the rings of a ring collective
    across servers (default: two per NIC of a server). ``send_costs``: every SEND pays NCCL's fixed cost of
    a send before its first chunk (module docstring); off, a SEND is its chunks alone. ``blocks``: every call
    whose copies all stay inside one server becomes one BLOCK op standing for them (FlowDag.blocks; the
    executor runs them exactly as it would the NVLINK ops), so the DAG holds each distinct call's copies once.
    ``flow_blocks`` (with ``blocks``): calls across servers too, their flows started by the executor as it
    runs (the same flows in the same order), so the DAG no longer grows with their chunks.
    Bad arguments and a trace that deadlocks are a CosimInputError.
    """
    gps = _gpus_per_server(trace, gpus_per_server)
    if tuning is None:
        tuning = TuningModel.for_hardware(trace.spec_dict().get("hardware"))
    if n_channels is not None and (isinstance(n_channels, bool) or not isinstance(n_channels, (int, np.integer))
                                   or n_channels < 1):
        raise CosimInputError("n_channels", f"must be an integer >= 1, got {n_channels!r}")
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer)) or chunk_bytes < 1:
        raise CosimInputError("chunk_bytes", f"must be an integer >= 1, got {chunk_bytes!r}")
    chunk_bytes = int(chunk_bytes)
    algo_names = algorithm_table(algorithm)
    prio = _priority_table(priorities)
    n = trace.n_ops
    kind = trace.kind

    coll_ops, call_inv, call_of_op, call_ops, call_ptr = _calls(trace)
    n_calls = call_ptr.size - 1
    first = call_ops[call_ptr[:-1]]  # a representative member op per call
    call_ids = trace.coll_id[first]
    c_kind = trace.coll_kind[first]
    c_group = trace.group[first].astype(np.int64)
    c_bytes = trace.bytes[first]
    c_hint = trace.algo_hint[first]

    # --- templates: one schedule per distinct (kind, group, bytes, hint) ---
    keys = np.stack([c_kind.astype(np.int64), c_group, c_bytes, c_hint.astype(np.int64)], axis=1)
    if n_calls:
        uniq, tmpl_of_call = np.unique(keys, axis=0, return_inverse=True)
        tmpl_of_call = tmpl_of_call.ravel()
    else:
        uniq, tmpl_of_call = np.zeros((0, 4), np.int64), np.zeros(0, np.int64)
    templates = []
    t_latency = np.zeros(len(uniq), np.int64)
    t_extra = np.zeros(len(uniq), np.float64)
    for t, (kk, g, b, h) in enumerate(uniq.tolist()):
        members = trace.group_members(g).astype(np.int64)
        best, lowered = call_schedule(CollKind(kk), algo_names[CollKind(kk)], h, members, b, gps=gps,
                                      tuning=tuning, chunk_bytes=chunk_bytes, n_channels=n_channels)
        t_extra[t] = best.nvlink_extra_ns_per_byte
        templates.append(lowered)
        t_latency[t] = round(best.start_latency_ns) if members.size > 1 else 0
    counted = [call_counts(s, gps, blocks=blocks, flow_blocks=flow_blocks) for _, s in templates]
    blocked = np.array([c[2] for c in counted], bool)
    # DAG ops of a call between its barriers: its schedule's, or its one BLOCK op
    t_size = np.array([c[0] - 2 for c in counted], dtype=np.int64)

    # --- placement order and DAG layout ---
    recv_of_send, send_of_recv = _match_recvs(trace)
    item, is_call = _placement_order(trace, call_of_op, call_ptr, call_ops, recv_of_send)
    del call_of_op, recv_of_send, call_ops, call_ptr, first
    sends = np.flatnonzero(kind == OpKind.SEND)
    send_delay = send_delays_ns(trace, sends, gps, tuning) if send_costs else np.zeros(sends.size, np.int64)
    n_chunks = np.ones(n, np.int64)  # DAG ops of each trace op (a send: its delay and its chunks)
    n_chunks[sends] = send_op_counts(trace.bytes[sends], send_delay, chunk_bytes)
    is_op = ~is_call
    # DAG ops per item: an op's chunks (more than one only for a send); a call's barrier, schedule and end
    item_count = np.empty(item.size, np.int64)
    item_count[is_op] = n_chunks[item[is_op]]
    item_count[is_call] = 2 + t_size[tmpl_of_call[item[is_call]]]
    item_base = np.cumsum(item_count) - item_count
    n_dag = int(item_count.sum())
    op_id = index_dtype(n_dag)  # DAG op ids fit int32 whenever the DAG fits this machine
    op_base = np.full(n, -1, op_id)
    op_base[item[is_op]] = item_base[is_op]
    call_base = np.zeros(n_calls, np.int64)
    call_base[item[is_call]] = item_base[is_call]
    del item, is_call, is_op, item_count, item_base
    call_end = call_base + 1 + (t_size[tmpl_of_call] if n_calls else 0)
    start_of_op = op_base.copy()  # a collective's members start at its barrier and are done at its end NOP
    start_of_op[coll_ops] = call_base[call_inv]
    done_of_op = (op_base + (n_chunks - 1)).astype(op_id)
    done_of_op[coll_ops] = call_end[call_inv]
    start_of_op.flags.writeable = done_of_op.flags.writeable = False  # FlowDag adopts them without a copy
    del coll_ops, call_inv

    # bytes and durations as int32 when every one fits: a chunk and a compute op rarely exceed 2 GiB / 2 s
    longest = max(int(trace.duration_ns.max(initial=0)), int(t_latency.max(initial=0)),
                  max((int(np.rint(s.bytes.max(initial=0) * t_extra[t])) for t, (_, s) in enumerate(templates)),
                      default=0))
    gk = trace.op_group_kind()[sends].astype(np.int64)
    send_prio = prio[np.where(gk == NO_GROUP_KIND, len(GroupKind), gk)]
    recvs = np.flatnonzero(kind == OpKind.RECV)
    recv_waits = done_of_op[send_of_recv[recvs]]  # a RECV's NOP waits for its send's last chunk
    del gk, send_of_recv

    b = DagBuilder(n_dag, narrow=chunk_bytes <= INT32_MAX and longest <= INT32_MAX)
    _trace_deps(b, trace, start_of_op, done_of_op, n_dag)

    comp = np.flatnonzero(kind == OpKind.COMPUTE)
    b.ops(op_base[comp], kind=DagOpKind.COMPUTE, rank=trace.rank[comp], duration_ns=trace.duration_ns[comp],
          trace_op=comp)
    del comp

    _send_ops(b, trace, sends, op_base, n_chunks, chunk_bytes, gps, send_prio, send_delay)

    b.ops(op_base[recvs], kind=DagOpKind.NOP, rank=trace.rank[recvs], trace_op=recvs)
    b.deps(op_base[recvs], recv_waits)
    del op_base, n_chunks, sends, send_prio, send_delay, recvs, recv_waits

    # collectives: barrier and end NOPs, then each template broadcast over its calls
    # (a call's ops are the range call_base..call_end: FlowDag.coll derives from it which call an op is of)
    b.ops(np.concatenate([call_base, call_end]), kind=DagOpKind.NOP, rank=-1,
          trace_op=np.tile(call_ids, 2))
    latency = t_latency[tmpl_of_call] if n_calls else np.zeros(0, np.int64)
    slow = latency > 0  # the start barrier lasts the call's latency
    b.ops(call_base[slow], kind=DagOpKind.COMPUTE, duration_ns=latency[slow])
    c_prio = prio[trace.group_kind[c_group]] if n_calls else np.zeros(0, np.uint8)
    c_algo = np.zeros(n_calls, np.uint8)
    block_op, block_tmpl = _collective_ops(b, templates, t_extra, tmpl_of_call, call_base, call_end, call_ids,
                                           c_prio, c_algo, gps, blocked)
    block_templates = _block_templates(templates, blocked, t_extra, gps) if blocked.any() else None
    del latency, slow, templates
    # building the CSR is the peak of a lowering: it holds the columns, the CSR and one block of edges
    cols, dep_ptr, dep_idx = b.build()
    sizes = np.diff(trace.group_ptr)
    return FlowDag(
        n_ranks=trace.n_ranks, gpus_per_server=gps, n_iterations=1, n_trace_ops=n, **cols,
        dep_ptr=dep_ptr, dep_idx=dep_idx, trace_start=start_of_op, trace_done=done_of_op,
        coll_trace_id=call_ids, coll_kind=c_kind, coll_bytes=c_bytes, coll_group=c_group, coll_algo=c_algo,
        coll_start_op=call_base, coll_end_op=call_end, coll_iteration=np.zeros(n_calls, np.int32),
        coll_ranks_ptr=np.concatenate([[0], np.cumsum(sizes[c_group])]).astype(np.int64),
        coll_ranks=trace.group_ranks[ragged_take(trace.group_ptr[c_group], sizes[c_group])],
        block_op=block_op, block_tmpl=block_tmpl, blocks=block_templates)
