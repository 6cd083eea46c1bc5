"""Replace the expert-parallel all-to-alls of a training trace by DeepEP's routed messages.

A training trace (cosim.workload.builder) carries each MoE dispatch and combine as an ALL_TO_ALL collective
of the balanced size over its EP group. With ``moe_kernel`` "deepep-high-throughput" or
"deepep-low-latency" (cosim.workload.model), :func:`expand_ep_all_to_alls` routes the tokens of every
(layer, micro-batch, EP group) (cosim.workload.routing, from the model's routing fields and node limit)
and replaces each member's collective op by its point-to-point messages (cosim.workload.deepep):

- the forward dispatch and the backward of the combine (token gradients going to the experts) follow the
  dispatch pattern, the forward combine and the backward of the dispatch the combine pattern; the four calls
  of one (layer, micro-batch, group) share one routing (under two-micro-batch overlap, of one (layer,
  micro-batch, group, half): each half routes its own tokens);
- token size: the call's bytes over (tokens · top_k), the forward dispatch in FP8 when
  ``moe_dispatch_dtype`` is "fp8", everything else bf16;
- on each rank the collective op becomes, in issue order, its first-hop SENDs, its RECVs, its second-hop
  SENDs (forwards, or the reduced RDMA messages of the combine, each after the RECVs it carries) and a
  zero-length COMPUTE join waiting for all of them; every SEND and RECV also waits for the collective op's
  deps, and everything that waited for the collective op waits for the join.

The routed experts' compute follows the routing too: on each rank the compute ops holding its routed
experts (forward, recomputed forward, input and weight gradients) take the time of the grouped GEMMs for
the tokens the rank actually received (``kernels.routed_expert_kernels``; spread evenly over its local
experts) instead of the balanced count, so a hot expert's rank computes longer and the others wait for it at
the combine.

EP ranks on a node must be the same number on every node and consecutive among the group's members (true
of every placement cosim builds); a routing's node is the server the member sits on.
"""

from __future__ import annotations

import json

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload import deepep
from cosim.workload import kernels as kn
from cosim.workload.compute import kernels_ns
from cosim.workload.hardware import HardwareSpec
from cosim.workload.model import ModelSpec
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.routing import RoutingSpec, route_tokens, routed_counts
from cosim.workload.sizes import moe_token_bytes
from cosim.workload.trace import (
    AlgoHint,
    CollKind,
    GroupKind,
    OpKind,
    Phase,
    Trace,
    collective_call_ids,
)

#: the algo_hint of a kernel's SEND and RECV ops
HINT_OF = {"high-throughput": AlgoHint.DEEPEP_HIGH_THROUGHPUT, "low-latency": AlgoHint.DEEPEP_LOW_LATENCY}
_I64 = np.int64
_SUB_FIRST, _SUB_RECV, _SUB_SECOND, _SUB_JOIN = 0, 1, 2, 3


def _ragged(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of the ranges [starts[i], starts[i] + counts[i])."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, _I64)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + np.arange(total, dtype=_I64) - offsets


def _ep_nodes(members: np.ndarray, gpus_per_node: int) -> int:
    """EP ranks per node of a group (the same on every node, consecutive), or CosimInputError."""
    node = members // gpus_per_node
    _, counts = np.unique(node, return_counts=True)
    if np.any(counts != counts[0]) or np.any(np.diff(node) < 0):
        raise CosimInputError("parallelism.ep", f"EP group {members.tolist()} holds different numbers of ranks "
                              f"on its servers of {gpus_per_node} GPUs (DeepEP's kernels need the same on each)",
                              "choose ep and the placement so that every server holds as many EP ranks")
    return int(counts[0])


def _routing_seed(seed: int, layer: int, microbatch: int, group: int, half: int) -> int:
    entropy = [seed, layer + 1, microbatch + 1, group] + ([half + 1] if half >= 0 else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def expand_ep_all_to_alls(trace: Trace, model: ModelSpec, par: ParallelismSpec, hw: HardwareSpec) -> Trace:
    """``trace`` (of ``model`` under ``par`` on ``hw``) with its EP all-to-alls replaced by ``model.moe_kernel``'s
    routed messages and its routed experts' compute timed for the tokens each rank received (module
    docstring); ``trace`` itself when the kernel is "nccl"."""
    gpus_per_node = hw.gpus_per_host
    if model.moe_kernel == "nccl":
        return trace
    kernel = deepep.KERNEL_OF_MOE_KERNEL[model.moe_kernel]
    coll = np.flatnonzero((trace.kind == OpKind.COLLECTIVE) & (trace.coll_kind == CollKind.ALL_TO_ALL)
                          & (trace.op_group_kind() == GroupKind.EP))
    if coll.size == 0:
        return trace
    labels = trace.label_array()
    half = trace.op_half()
    call_ids, call_of = np.unique(trace.coll_id[coll], return_inverse=True)
    dispatch_bytes = moe_token_bytes(model, fp8=model.moe_dispatch_dtype == "fp8")
    bf16_bytes = moe_token_bytes(model)
    counts_cache: dict[tuple, object] = {}
    # block ops, one array per field, appended per call
    blk = {k: [] for k in ("owner", "sub", "kind", "rank", "peer", "bytes", "msg")}
    second_deps: list[tuple[np.ndarray, np.ndarray]] = []  # (second-hop send msg, parent msg), global msg ids
    msg_base = 0
    for c in range(call_ids.size):
        ops = coll[call_of == c]  # one per member, in rank order
        g = int(trace.group[ops[0]])
        members = trace.group_ranks[trace.group_ptr[g]:trace.group_ptr[g + 1]].astype(_I64)
        op_of_member = ops[np.argsort(trace.rank[ops], kind="stable")]
        o = int(ops[0])
        label = str(labels[o])
        forward = int(trace.phase[o]) == Phase.FORWARD or "recompute_" in label
        is_dispatch_label = "moe_dispatch" in label
        dispatch_like = is_dispatch_label == forward
        token_bytes = dispatch_bytes if (forward and is_dispatch_label) else bf16_bytes
        size = int(trace.bytes[o])
        if size % (token_bytes * model.top_k):
            raise CosimInputError("model.moe_kernel", f"the all-to-all {label} of {size} B is not a whole number "
                                  f"of routed tokens of {token_bytes} B", "regenerate the trace with cosim trace")
        tokens = size // (token_bytes * model.top_k)
        per_node = _ep_nodes(members, gpus_per_node)
        key = (int(trace.layer[o]), int(trace.microbatch[o]), g, int(half[o]))
        if key not in counts_cache:
            spec = RoutingSpec(distribution=model.routing_distribution, zipf_exponent=model.routing_zipf_exponent,
                               expert_load=model.routing_expert_load, max_nodes=model.max_routed_nodes,
                               seed=_routing_seed(model.routing_seed, *key))
            experts = route_tokens(spec, tokens_per_rank=tokens, ep=members.size, num_experts=model.num_experts,
                                   top_k=model.top_k, gpus_per_node=per_node)
            counts_cache[key] = routed_counts(experts, num_experts=model.num_experts, gpus_per_node=per_node)
        counts = counts_cache[key]
        make = deepep.dispatch_messages if dispatch_like else deepep.combine_messages
        msg = make(counts, kernel, token_bytes)
        m = msg.src.size
        ids = msg_base + np.arange(m, dtype=_I64)
        src, dst = members[msg.src], members[msg.dst]
        send_owner, recv_owner = op_of_member[msg.src], op_of_member[msg.dst]
        for owner, sub, kind, rank, peer in ((send_owner, np.where(msg.second_hop, _SUB_SECOND, _SUB_FIRST),
                                              OpKind.SEND, src, dst),
                                             (recv_owner, np.full(m, _SUB_RECV), OpKind.RECV, dst, src)):
            blk["owner"].append(owner)
            blk["sub"].append(sub)
            blk["kind"].append(np.full(m, kind, _I64))
            blk["rank"].append(rank)
            blk["peer"].append(peer)
            blk["bytes"].append(msg.bytes)
            blk["msg"].append(ids)
        blk["owner"].append(op_of_member)
        blk["sub"].append(np.full(members.size, _SUB_JOIN))
        blk["kind"].append(np.full(members.size, OpKind.COMPUTE, _I64))
        blk["rank"].append(members)
        blk["peer"].append(np.full(members.size, -1, _I64))
        blk["bytes"].append(np.zeros(members.size, _I64))
        blk["msg"].append(np.full(members.size, -1, _I64))
        second_deps.append((ids[msg.dep_child], ids[msg.dep_parent]))
        msg_base += m
    b = {k: np.concatenate(v).astype(_I64) for k, v in blk.items()}
    duration = _routed_durations(trace, model, par, hw, half, counts_cache)
    return _rebuild(trace, coll, b, second_deps, duration, {"moe_kernel": model.moe_kernel}, HINT_OF[kernel])


def _routed_durations(trace: Trace, model: ModelSpec, par: ParallelismSpec, hw: HardwareSpec, half: np.ndarray,
                      counts_of: dict) -> np.ndarray:
    """The ops' durations with each rank's routed-expert compute timed for the tokens it received."""
    duration = trace.duration_ns.astype(_I64).copy()
    block = np.array([str(s).rsplit("/", 1)[-1] for s in trace.labels], dtype=object)[trace.label]
    ops = np.flatnonzero((trace.kind == OpKind.COMPUTE) & np.isin(block, kn.ROUTED_EXPERT_BLOCKS))
    if ops.size == 0:
        return duration
    local = model.num_experts // par.ep
    gathered = 1 if par.folded else par.tp  # the TP all-gather hands every TP rank the group's tokens
    # tokens per local expert of every (layer, micro-batch, EP group, half) and member, and the balanced count
    ep_group = np.full(trace.n_ranks, -1, _I64)
    tokens_of: dict[tuple, np.ndarray] = {}
    balanced: dict[tuple, int] = {}
    for key, counts in counts_of.items():
        g = key[2]
        members = trace.group_ranks[trace.group_ptr[g]:trace.group_ptr[g + 1]]
        ep_group[members] = g
        received = counts.expert_copies.sum(axis=0) * gathered
        tokens_of[key] = np.full(trace.n_ranks, -1, _I64)
        tokens_of[key][members] = np.rint(received / local).astype(_I64)
        balanced[key] = int(round(counts.expert_copies.sum() * gathered / (counts.ep * local)))
    cache: dict[tuple[str, int], int] = {}

    def routed_ns(name: str, tokens: int) -> int:
        if (name, tokens) not in cache:
            ks = kn.routed_expert_kernels(model, par, max(tokens, 0))[name] if tokens > 0 else ()
            cache[(name, tokens)] = kernels_ns(hw, ks)
        return cache[(name, tokens)]

    for i in ops.tolist():
        key = (int(trace.layer[i]), int(trace.microbatch[i]), int(ep_group[trace.rank[i]]), int(half[i]))
        if key not in tokens_of:
            continue
        name = block[i]
        tokens = int(tokens_of[key][trace.rank[i]])
        duration[i] = max(0, duration[i] - routed_ns(name, balanced[key]) + routed_ns(name, tokens))
    return duration


def _rebuild(trace: Trace, coll: np.ndarray, b: dict, second_deps: list, duration: np.ndarray,
             derived: dict, hint: AlgoHint) -> Trace:
    """The trace with the ops ``coll`` replaced by the block ops ``b`` (module docstring's order and deps)."""
    n = trace.n_ops
    replaced = np.zeros(n, bool)
    replaced[coll] = True
    keep = np.flatnonzero(~replaced)
    nb = b["owner"].size
    # pre-index space: original ops 0..n-1, block ops n..n+nb-1; order by (original position, sub, creation)
    pos = np.concatenate([keep, b["owner"]])
    sub = np.concatenate([np.zeros(keep.size, _I64), b["sub"]])
    pre = np.concatenate([keep, n + np.arange(nb, dtype=_I64)])
    order = np.lexsort((pre, sub, pos))
    new = np.full(n + nb, -1, _I64)
    new[pre[order]] = np.arange(order.size, dtype=_I64)
    is_join = b["sub"] == _SUB_JOIN
    join_of = np.full(n, -1, _I64)
    join_of[b["owner"][is_join]] = n + np.flatnonzero(is_join)
    target = np.where(replaced, join_of, np.arange(n, dtype=_I64))  # who stands for an original op as a dep

    deg = np.diff(trace.dep_ptr)
    # (a) deps of the kept ops
    a_op = np.repeat(keep, deg[keep])
    a_dep = target[trace.dep_idx[_ragged(trace.dep_ptr[keep], deg[keep])]]
    # (b) every send and recv waits for its collective op's deps (a relay with nothing to gather still waits)
    entry = np.flatnonzero(b["sub"] != _SUB_JOIN)
    owners = b["owner"][entry]
    b_op = n + np.repeat(entry, deg[owners])
    b_dep = target[trace.dep_idx[_ragged(trace.dep_ptr[owners], deg[owners])]]
    # (c) a second-hop send waits for the RECVs of the messages it carries
    msgs = b["msg"]
    recv_of_msg = np.full(int(msgs.max()) + 1 if msgs.size else 1, -1, _I64)
    is_recv = b["kind"] == OpKind.RECV
    recv_of_msg[msgs[is_recv]] = n + np.flatnonzero(is_recv)
    send_of_msg = np.full(recv_of_msg.size, -1, _I64)
    is_send = b["kind"] == OpKind.SEND
    send_of_msg[msgs[is_send]] = n + np.flatnonzero(is_send)
    child = np.concatenate([x for x, _ in second_deps]) if second_deps else np.zeros(0, _I64)
    parent = np.concatenate([y for _, y in second_deps]) if second_deps else np.zeros(0, _I64)
    c_op, c_dep = send_of_msg[child], recv_of_msg[parent]
    # (d) the join waits for every other block op of its collective op
    others = np.flatnonzero(~is_join)
    d_op = join_of[b["owner"][others]]
    d_dep = n + others
    dep_op = new[np.concatenate([a_op, b_op, c_op, d_op])]
    dep_on = new[np.concatenate([a_dep, b_dep, c_dep, d_dep])]
    srt = np.lexsort((dep_on, dep_op))
    dep_op, dep_on = dep_op[srt], dep_on[srt]
    if np.any(dep_on >= dep_op):
        raise AssertionError("a dependency does not precede its op")
    total = order.size
    ptr = np.concatenate([[0], np.cumsum(np.bincount(dep_op, minlength=total))]).astype(_I64)

    def column(name: str, block: np.ndarray) -> np.ndarray:
        return np.concatenate([getattr(trace, name)[keep], block])[order]

    owner = b["owner"]
    kind = column("kind", b["kind"])
    rank = column("rank", b["rank"])
    group = column("group", np.where(b["kind"] == OpKind.COMPUTE, -1, trace.group[owner]))
    match = np.full(total, -1, _I64)
    sends = np.flatnonzero(kind == OpKind.SEND)
    match[sends] = sends
    kept_recv = np.flatnonzero(trace.kind[keep] == OpKind.RECV)
    match[new[keep[kept_recv]]] = new[trace.match_id[keep[kept_recv]]]
    match[new[recv_of_msg[msgs[is_send]]]] = new[n + np.flatnonzero(is_send)]
    zeros = np.zeros(nb, _I64)
    specs = trace.spec_dict()
    specs.setdefault("derived", {}).update(derived)
    return Trace(n_ranks=trace.n_ranks, rank=rank, kind=kind, phase=column("phase", trace.phase[owner]),
                 duration_ns=np.concatenate([duration[keep], zeros])[order], flops=column("flops", zeros),
                 bytes=column("bytes", b["bytes"]), coll_kind=column("coll_kind", zeros), group=group,
                 peer=column("peer", b["peer"]), match_id=match,
                 coll_id=collective_call_ids(rank, kind, group, trace.n_groups),
                 algo_hint=column("algo_hint", np.where(b["kind"] == OpKind.COMPUTE, 0, hint)),
                 label=column("label", trace.label[owner]),
                 microbatch=column("microbatch", trace.microbatch[owner]), layer=column("layer", trace.layer[owner]),
                 dep_ptr=ptr, dep_idx=dep_on, labels=trace.labels, group_ptr=trace.group_ptr,
                 group_ranks=trace.group_ranks, group_kind=trace.group_kind, specs=json.dumps(specs, sort_keys=True))
