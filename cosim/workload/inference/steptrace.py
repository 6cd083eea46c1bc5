"""The step schedule of a disaggregated service as a cosim Trace: compute, collectives and KV transfers.

Ranks: prefill replicas first, then decode replicas, each on consecutive ranks from its ``base``
(:func:`replica_bases`: a replica that fits a server never straddles two, a larger one starts on a server
boundary; GPUs skipped so stay idle), stage s's TP rank t of a replica at ``base + s·tp + t``. Per step
(cosim.workload.inference.serving) and stage, on every TP rank:

- a prefill step's first stage waits for an ``arrival`` timer (a COMPUTE op from time 0 lasting the arrival
  of the batch's last request); a later stage waits for the activations of the stage before (a SEND from
  TP rank t to TP rank t of n·h·2/tp bytes, n·h·2 per boundary: cosim.workload.inference.traffic);
- per layer: ``attn`` compute, TP all-reduce of n·h·2 bytes, then ``mlp`` compute and a second all-reduce
  for a dense layer; for a MoE layer with ep > 1 ``router`` compute, EP all-to-all dispatch of
  ceil(n/ep)·k·h·2 bytes per rank, ``experts`` compute and the combine all-to-all of the same size;
- the first stage's first ``attn`` also embeds the tokens, the last stage's last compute holds the logits;
  with pp > 1 the sampled token ids (4 B per sequence) go back from the last stage to the first (a SEND
  per TP rank), which the next step of the replica waits for: a step goes through every stage before the
  next starts (no pipelining across steps).
- KV cache of each request, prefill rank → decode rank for every pair sharing layers and KV heads
  (:func:`kv_pairs`): ``layer`` mode one SEND per layer after that layer's ``attn`` (its K and V exist),
  ``whole`` mode one SEND of all the pair's layers after the rank's last compute of the step. The first
  token (4 B) goes from the prefill's last stage (TP rank 0) to every first-stage rank of the decode replica.
  A decode step admitting a request waits, on every rank, for that rank's KV and token RECVs.

A replica with expert parallelism across its GPUs (ep > tp, tp = pp = 1: attention data-parallel) runs
its steps as :mod:`cosim.workload.inference.dpep` describes: every GPU its own share of the batch, each MoE
layer's dispatch and combine as DeepEP's routed messages between the replica's GPUs; a request's KV cache
goes from the GPU that prefilled it to the one GPU of the decode replica that decodes it.

Every op's step, request and role are kept beside the trace (:class:`StepTrace`) to read times back.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np

from cosim.workload.deepep import HINTS, combine_messages, dispatch_messages
from cosim.workload.hardware import HardwareSpec
from cosim.workload.inference.dpep import Eplb, ExpertParallel, decode_gpus, emit_messages
from cosim.workload.inference.model import InferenceModel
from cosim.workload.inference.requests import Requests
from cosim.workload.inference.serving import ServingSchedule
from cosim.workload.inference.stepcost import StepCompute, split_prompts, stage_layers
from cosim.workload.inference.traffic import (
    ep_dispatch_bytes,
    pp_activation_bytes,
    tp_allreduce_bytes,
)
from cosim.workload.trace import CollKind, GroupKind, OpKind, Phase, Trace

TOKEN_ID_BYTES = 4  #: a sampled token id on the wire


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaShape:
    """Parallelism of one replica: tensor, pipeline and expert parallel degrees."""

    tp: int = 1
    pp: int = 1
    ep: int = 1

    @property
    def data_parallel(self) -> bool:
        """True when the experts spread over ep > tp GPUs that each serve their own batch (tp = pp = 1)."""
        return self.ep > self.tp

    @property
    def gpus(self) -> int:
        """GPUs of the replica: tp × pp (EP spreads the experts over the TP ranks of a stage), or ep when the
        experts spread over more GPUs than that (attention data-parallel over them)."""
        return self.ep if self.data_parallel else self.tp * self.pp


def _kv_heads_of(model: InferenceModel, tp: int) -> tuple[int, list[list[int]]]:
    """(KV heads, the heads each TP rank caches): contiguous blocks, or one replicated head per rank when
    tp exceeds the KV heads; MLA's latent is one "head" every rank holds."""
    if model.attention == "mla":
        return 1, [[0] for _ in range(tp)]
    heads = model.spec.num_kv_heads
    if tp <= heads:
        per = heads // tp
        return heads, [list(range(t * per, (t + 1) * per)) for t in range(tp)]
    return heads, [[t * heads // tp] for t in range(tp)]


def kv_pairs(model: InferenceModel, prefill: ReplicaShape,
             decode: ReplicaShape) -> list[tuple[int, int, int, int, int]]:
    """KV-cache routes of a request: (prefill stage·tp + TP rank, decode stage·tp + TP rank, first layer,
    last layer + 1, bytes per token per layer). A decode rank fetches each KV head it caches from one
    prefill rank holding it (replicated heads: spread over the holders by the decode rank)."""
    m = model.spec
    head_bytes = model.kv_bytes_per_token_per_layer // (1 if model.attention == "mla" else m.num_kv_heads)
    n_heads, p_heads = _kv_heads_of(model, prefill.tp)
    _, d_heads = _kv_heads_of(model, decode.tp)
    holders = [[t for t in range(prefill.tp) if h in p_heads[t]] for h in range(n_heads)]
    pb, db = stage_layers(m.num_layers, prefill.pp), stage_layers(m.num_layers, decode.pp)
    out = []
    for sd in range(decode.pp):
        for sp in range(prefill.pp):
            lo, hi = max(pb[sp], db[sd]), min(pb[sp + 1], db[sd + 1])
            if lo >= hi:
                continue
            for td in range(decode.tp):
                count = np.zeros(prefill.tp, np.int64)
                for h in d_heads[td]:
                    count[holders[h][td % len(holders[h])]] += 1
                for tp_ in np.flatnonzero(count):
                    out.append((sp * prefill.tp + int(tp_), sd * decode.tp + td, int(lo), int(hi),
                                int(count[tp_]) * head_bytes))
    return out


def replica_bases(prefill_replicas: int, decode_replicas: int, prefill: ReplicaShape, decode: ReplicaShape,
                  gpus_per_server: int) -> tuple[list[int], list[int], int]:
    """(first rank of every prefill replica, of every decode replica, ranks in all)."""
    bases, at = [], 0
    for shape in [prefill] * prefill_replicas + [decode] * decode_replicas:
        used = at % gpus_per_server
        if used and (shape.gpus > gpus_per_server or used + shape.gpus > gpus_per_server):
            at += gpus_per_server - used
        bases.append(at)
        at += shape.gpus
    return bases[:prefill_replicas], bases[prefill_replicas:], at


class _Ops:
    """Trace columns being built (ops in creation order; ranks sorted at the end)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {k: [] for k in ("rank", "kind", "phase", "duration_ns", "bytes", "coll_kind",
                                                      "group", "peer", "match", "call", "label", "layer",
                                                      "algo_hint")}
        self.deps: list[list[int]] = []
        self.labels: dict[str, int] = {}
        self.calls = 0
        # beside the trace: the step (prefill s ≥ 0, decode -1-s) and request of each op
        self.step: list[int] = []
        self.request: list[int] = []
        # 0: an EP dispatch message, 1: a combine message (+2: of half B of a two-batch layer), -1: neither
        self.ep_phase: list[int] = []

    def add(self, rank, kind, deps, label, *, duration=0, nbytes=0, coll_kind=0, group=-1, peer=-1, match=-1,
            call=-1, layer=-1, phase=Phase.FORWARD, step=0, request=-1, algo_hint=0, ep_phase=-1) -> int:
        c = self.cols
        i = len(c["rank"])
        for k, x in (("rank", rank), ("kind", kind), ("phase", phase), ("duration_ns", duration), ("bytes", nbytes),
                     ("coll_kind", coll_kind), ("group", group), ("peer", peer), ("match", match), ("call", call),
                     ("label", self.labels.setdefault(label, len(self.labels))), ("layer", layer),
                     ("algo_hint", algo_hint)):
            c[k].append(x)
        self.deps.append([d for d in deps if d >= 0])
        self.step.append(step)
        self.request.append(request)
        self.ep_phase.append(ep_phase)
        return i

    def send(self, src, dst, nbytes, deps, label, **kw) -> tuple[int, int]:
        s = self.add(src, OpKind.SEND, deps, label, nbytes=nbytes, peer=dst, **kw)
        self.cols["match"][s] = s
        r = self.add(dst, OpKind.RECV, [], label, nbytes=nbytes, peer=src, match=s, **kw)
        return s, r

    def collective(self, ranks, kind, group, nbytes, deps, label, **kw) -> list[int]:
        call = self.calls
        self.calls += 1
        return [self.add(r, OpKind.COLLECTIVE, d, label, nbytes=nbytes, coll_kind=kind, group=group, call=call, **kw)
                for r, d in zip(ranks, deps)]


@dataclass(frozen=True, slots=True, eq=False)
class StepTrace:
    """The trace and, per trace op, its step (prefill s as s, decode s as -1-s) and request (-1: none);
    per step the ops whose completion ends it; per request its KV SEND and RECV ops and token RECVs."""

    trace: Trace
    op_step: np.ndarray
    op_request: np.ndarray
    prefill_end_ops: list[list[int]]
    decode_end_ops: list[list[int]]
    kv_send_ops: list[list[int]]
    kv_recv_ops: list[list[int]]
    token_recv_ops: list[list[int]]
    kv_bytes: np.ndarray  #: int64 per request: KV-cache bytes moved (all pairs and layers)
    #: int64 per trace op: 0 a DeepEP dispatch message, 1 a combine message, 2 and 3 those of half B of a
    #: two-batch layer, -1 neither (None: no such ops)
    op_ep_phase: np.ndarray | None = None


def step_trace_ops_lower_bound(model: InferenceModel, sched: ServingSchedule, *, prefill: ReplicaShape,
                               decode: ReplicaShape, kv_mode: str) -> int:
    """At least how many ops :func:`build_step_trace` makes of ``sched``, counted without building them (a
    service too large to plan is refused before its trace exists): every step's per-layer compute and
    collective members on every TP rank, and every request's KV and first-token SEND/RECV pairs (arrival
    timers, logits and pipeline sends left out)."""
    m = model.spec

    def per_step(shape: ReplicaShape) -> int:
        coll = int(shape.tp > 1)
        # attn and its all-reduce, then router, dispatch, experts and combine, or mlp and its all-reduce
        moe = m.num_moe_layers if shape.ep > 1 else 0
        ops_of_layers = moe * (1 + coll + 4) + (m.num_layers - moe) * (2 + 2 * coll)
        return ops_of_layers * (shape.ep if shape.data_parallel else shape.tp)

    pairs = kv_pairs(model, prefill, decode)
    kv_sends = sum(hi - lo for _, _, lo, hi, _ in pairs) if kv_mode == "layer" else len(pairs)
    per_request = 2 * (kv_sends + decode.tp)
    return (sched.prefill.n * per_step(prefill) + sched.decode.n * per_step(decode)
            + int(sched.prefill.members.size) * per_request)


def build_step_trace(model: InferenceModel, hardware: HardwareSpec, req: Requests, sched: ServingSchedule, *,
                     prefill_replicas: int, decode_replicas: int, prefill: ReplicaShape, decode: ReplicaShape,
                     kv_mode: str, gpus_per_server: int, ep: ExpertParallel | None = None) -> StepTrace:
    """The Trace of ``sched`` (module docstring); ``ep`` says how an attention data-parallel side moves its
    tokens (needed when a side has ep > tp)."""
    if (prefill.data_parallel or decode.data_parallel) and ep is None:
        raise ValueError("a replica with ep > tp needs its ExpertParallel settings")
    m = model.spec
    ops = _Ops()
    n_req = req.n
    groups: list[tuple[int, list[int]]] = []  # (GroupKind, ranks)
    p_base, d_base, n_ranks = replica_bases(prefill_replicas, decode_replicas, prefill, decode, gpus_per_server)

    def stage_groups(base, shape):
        tp_g, ep_g = [], []
        for s in range(shape.pp):
            ranks = [base + s * shape.tp + t for t in range(shape.tp)]
            groups.append((GroupKind.TP, ranks))
            tp_g.append(len(groups) - 1)
            groups.append((GroupKind.EP, ranks))
            ep_g.append(len(groups) - 1)
        return tp_g, ep_g

    p_groups = [stage_groups(b, prefill) if not prefill.data_parallel else ([], []) for b in p_base]
    d_groups = [stage_groups(b, decode) if not decode.data_parallel else ([], []) for b in d_base]
    last = np.full(n_ranks, -1, np.int64)  # each rank's compute stream: its latest compute or collective
    pending: dict[int, list[int]] = {}  # rank -> RECVs its next step waits for (KV, token, token return)
    kv_send = [[] for _ in range(n_req)]
    kv_recv = [[] for _ in range(n_req)]
    tok_recv = [[] for _ in range(n_req)]
    kv_bytes = np.zeros(n_req, np.int64)
    pairs = kv_pairs(model, prefill, decode)
    p_cost = StepCompute(model=model, hardware=hardware, tp=prefill.tp, pp=prefill.pp, ep=prefill.ep,
                         redundant_experts=ep.redundant_experts if ep else 0)
    d_cost = StepCompute(model=model, hardware=hardware, tp=decode.tp, pp=decode.pp, ep=decode.ep,
                         redundant_experts=ep.redundant_experts if ep else 0)
    eplb = Eplb(ep) if ep else None  # hot copies re-placed from the load this build's steps route
    # attention data-parallel sides: the GPU of the decode replica that decodes each request
    d_gpu = decode_gpus(sched.decode_replica, decode.ep) if decode.data_parallel else None

    def kv_dst(q, d, dst):
        return d_base[d] + (int(d_gpu[q]) if d_gpu is not None else dst)

    def token_dsts(q, d):
        return [d_base[d] + int(d_gpu[q])] if d_gpu is not None else [d_base[d] + t for t in range(decode.tp)]

    def two_batch_layer(phase, step_id, layer, ranks, cost, tokens, halves, cur, carry, kv_hook):
        """One MoE layer as two halves on one compute stream per GPU (dpep's two-batch overlap): ``cur`` the
        deps of half A's first op, ``carry`` half B's message deps (None: none yet). Returns (cur, carry)
        after the layer: A's deps (the stream's last op and A's combine) and B's combine."""
        kernel = ep.kernel(phase)
        n_ep = len(ranks)
        in_a, in_b = (tuple(n) for n, _ in halves)
        rows = (((0,) * n_ep, in_a), (in_a, in_b))  # (first row, rows) of each GPU's tokens in the routing
        stream = [None] * n_ep
        router, moved = [], []
        for h, (n_h, attn_h) in enumerate(halves):
            deps = cur if h == 0 else [[stream[g], *(carry[g] if carry else [])] for g in range(n_ep)]
            a_ns = [a + (cost.embedding_ns(n) if layer == 0 else 0) for a, n in zip(attn_h, n_h)]
            attn = [ops.add(r, OpKind.COMPUTE, d, f"{phase}/attn", duration=max(1, a), layer=layer, step=step_id)
                    for r, d, a in zip(ranks, deps, a_ns)]
            router.append([ops.add(r, OpKind.COMPUTE, [o], f"{phase}/router",
                                   duration=max(1, cost.router_ns(n) if n else 1), layer=layer, step=step_id)
                           for r, o, n in zip(ranks, attn, n_h)])
            counts = ep.counts(phase, step_id, layer, tuple(tokens), n_ep, gpus_per_server, rows[h],
                               eplb.placement(phase, step_id, layer, n_ep, gpus_per_server))
            moved.append((counts, emit_messages(ops, ranks, dispatch_messages(counts, kernel,
                                                                              ep.dispatch_token_bytes(model)),
                                                router[h], f"{phase}/ep_dispatch", hint=HINTS[kernel], layer=layer,
                                                step=step_id, ep_phase=2 * h)))
            stream = [ops.add(r, OpKind.COMPUTE, [o], f"{phase}/shared_experts",
                              duration=max(1, cost.shared_experts_ns(n)), layer=layer, step=step_id)
                      for r, o, n in zip(ranks, router[h], n_h)] if m.num_shared_experts else router[h]
        eplb.observe(phase, step_id, layer, tuple(tokens), n_ep, gpus_per_server)
        kv_hook(0, ranks, attn, layer, False)  # both halves' K and V exist after B's attention
        combined = []
        for h, (n_h, _) in enumerate(halves):
            counts, mv = moved[h]
            copies = counts.expert_copies.sum(axis=0)
            stream = [ops.add(r, OpKind.COMPUTE, [o, *x], f"{phase}/experts",
                              duration=max(1, cost.routed_experts_ns(int(c), n)), layer=layer, step=step_id)
                      for r, o, x, c, n in zip(ranks, stream, mv, copies, n_h)]
            combined.append(emit_messages(ops, ranks, combine_messages(counts, kernel, ep.combine_token_bytes(model)),
                                          stream, f"{phase}/ep_combine", hint=HINTS[kernel], layer=layer,
                                          step=step_id, ep_phase=2 * h + 1))
        return [[o, *x] for o, x in zip(stream, combined[0])], combined[1]

    def run_dp_step(phase, step_id, base, shape, cost, tokens, attn, seqs, first_deps, kv_hook, halves=None):
        """One step of an attention data-parallel replica (cosim.workload.inference.dpep); ``halves``: per
        half (tokens, attention ns) per GPU with two-batch overlap. Returns the ops that end it."""
        ranks = [base + g for g in range(shape.ep)]
        cur = [[int(last[r]), *first_deps.get(r, []), *pending.pop(r, [])] for r in ranks]
        kernel = ep.kernel(phase)
        carry = None  # half B's combine messages, after a two-batch layer
        for layer in range(m.num_layers):
            if halves is not None and m.is_moe_layer(layer):
                cur, carry = two_batch_layer(phase, step_id, layer, ranks, cost, tokens, halves, cur, carry,
                                             kv_hook)
                if layer == m.num_layers - 1:
                    cur = [[*c, *x] for c, x in zip(cur, carry)]
                    tail = [cost.logits_ns(s) for s in seqs]
                    cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/logits", duration=max(1, t), layer=layer,
                                    step=step_id)] for r, d, t in zip(ranks, cur, tail)]
                continue
            if carry is not None:
                cur, carry = [[*c, *x] for c, x in zip(cur, carry)], None
            a_ns = [a + (cost.embedding_ns(n) if layer == 0 else 0) for a, n in zip(attn, tokens)]
            cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/attn", duration=max(1, a), layer=layer, step=step_id)]
                   for r, d, a in zip(ranks, cur, a_ns)]
            kv_hook(0, ranks, [c[0] for c in cur], layer, False)
            tail = [cost.logits_ns(s) if layer == m.num_layers - 1 else 0 for s in seqs]
            if not m.is_moe_layer(layer):
                cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/mlp", duration=max(1, cost.dense_mlp_ns(n) + t),
                                layer=layer, step=step_id)] for r, d, n, t in zip(ranks, cur, tokens, tail)]
                continue
            counts = ep.counts(phase, step_id, layer, tuple(tokens), shape.ep, gpus_per_server,
                               placement=eplb.placement(phase, step_id, layer, shape.ep, gpus_per_server))
            eplb.observe(phase, step_id, layer, tuple(tokens), shape.ep, gpus_per_server)
            copies = counts.expert_copies.sum(axis=0)
            router = [ops.add(r, OpKind.COMPUTE, d, f"{phase}/router", duration=max(1, cost.router_ns(n) if n else 1),
                              layer=layer, step=step_id) for r, d, n in zip(ranks, cur, tokens)]
            if m.num_shared_experts:  # beside the dispatch, as DeepEP's hook mode lets it run
                shared = [ops.add(r, OpKind.COMPUTE, [o], f"{phase}/shared_experts",
                                  duration=max(1, cost.shared_experts_ns(n)), layer=layer, step=step_id)
                          for r, o, n in zip(ranks, router, tokens)]
            else:
                shared = router
            moved = emit_messages(ops, ranks, dispatch_messages(counts, kernel, ep.dispatch_token_bytes(model)),
                                  router, f"{phase}/ep_dispatch", hint=HINTS[kernel], layer=layer, step=step_id,
                                  ep_phase=0)
            experts = [ops.add(r, OpKind.COMPUTE, [o, *mv], f"{phase}/experts",
                               duration=max(1, cost.routed_experts_ns(int(c), n)), layer=layer, step=step_id)
                       for r, o, mv, c, n in zip(ranks, shared, moved, copies, tokens)]
            moved = emit_messages(ops, ranks, combine_messages(counts, kernel, ep.combine_token_bytes(model)),
                                  experts, f"{phase}/ep_combine", hint=HINTS[kernel], layer=layer, step=step_id,
                                  ep_phase=1)
            cur = [[o, *mv] for o, mv in zip(experts, moved)]
            if any(tail):
                cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/logits", duration=max(1, t), layer=layer,
                                step=step_id)] for r, d, t in zip(ranks, cur, tail)]
        ends = []
        for r, c in zip(ranks, cur):
            if len(c) > 1:  # a join of the last combine's messages: the rank's stream ends on one op
                c = [ops.add(r, OpKind.COMPUTE, c, f"{phase}/combine_done", duration=0, step=step_id)]
            last[r] = c[0]
            ends.append(c[0])
        kv_hook(0, ranks, ends, m.num_layers - 1, True)
        return ends

    def run_step(phase, step_id, base, shape, cost, tp_g, ep_g, tokens, attn_ns, seqs, first_deps, kv_hook):
        """One step through the stages of a replica; returns the ops that end it."""
        bounds = stage_layers(m.num_layers, shape.pp)
        moe = m.is_moe and shape.ep > 1
        part_ns = ((cost.router_ns(tokens), cost.experts_ns(tokens)) if moe else (cost.mlp_ns(tokens),))
        dense_ns = cost.dense_mlp_ns(tokens) if m.is_moe and m.first_dense_layers else 0
        entry = first_deps
        ends = []
        for s in range(shape.pp):
            ranks = [base + s * shape.tp + t for t in range(shape.tp)]
            cur = [[int(last[r]), *entry.get(r, []), *pending.pop(r, [])] for r in ranks]
            layers = range(int(bounds[s]), int(bounds[s + 1]))
            for li, layer in enumerate(layers):
                first_of_stage, last_of_stage = li == 0, li == len(layers) - 1
                a_ns = attn_ns + (cost.embedding_ns(tokens) if s == 0 and first_of_stage else 0)
                cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/attn", duration=a_ns, layer=layer, step=step_id)]
                       for r, d in zip(ranks, cur)]
                kv_hook(s, ranks, [c[0] for c in cur], layer, False)
                if shape.tp > 1:
                    cur = [[c] for c in ops.collective(ranks, CollKind.ALL_REDUCE, tp_g[s],
                                                       tp_allreduce_bytes(model, tokens), cur,
                                                       f"{phase}/tp_allreduce", layer=layer, step=step_id)]
                tail = cost.logits_ns(seqs) if s == shape.pp - 1 and last_of_stage else 0
                if moe and m.is_moe_layer(layer):
                    a2a = ep_dispatch_bytes(model, tokens, shape.ep)
                    cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/router", duration=part_ns[0],
                                    layer=layer, step=step_id)] for r, d in zip(ranks, cur)]
                    cur = [[c] for c in ops.collective(ranks, CollKind.ALL_TO_ALL, ep_g[s], a2a, cur,
                                                       f"{phase}/ep_dispatch", layer=layer, step=step_id)]
                    cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/experts", duration=part_ns[1],
                                    layer=layer, step=step_id)] for r, d in zip(ranks, cur)]
                    cur = [[c] for c in ops.collective(ranks, CollKind.ALL_TO_ALL, ep_g[s], a2a, cur,
                                                       f"{phase}/ep_combine", layer=layer, step=step_id)]
                    if tail:
                        cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/logits", duration=tail, layer=layer,
                                        step=step_id)] for r, d in zip(ranks, cur)]
                else:
                    mlp_ns = part_ns[0] if m.is_moe_layer(layer) or not m.is_moe else dense_ns
                    cur = [[ops.add(r, OpKind.COMPUTE, d, f"{phase}/mlp", duration=mlp_ns + tail,
                                    layer=layer, step=step_id)] for r, d in zip(ranks, cur)]
                    if shape.tp > 1:
                        cur = [[c] for c in ops.collective(ranks, CollKind.ALL_REDUCE, tp_g[s],
                                                           tp_allreduce_bytes(model, tokens), cur,
                                                           f"{phase}/tp_allreduce", layer=layer, step=step_id)]
            for r, c in zip(ranks, cur):
                last[r] = c[0]
            kv_hook(s, ranks, [c[0] for c in cur], int(bounds[s + 1]) - 1, True)
            if s + 1 < shape.pp:
                nxt = [base + (s + 1) * shape.tp + t for t in range(shape.tp)]
                size = -(-pp_activation_bytes(model, tokens) // shape.tp)
                entry = {}
                for r, q, c in zip(ranks, nxt, cur):
                    _, rv = ops.send(r, q, size, c, f"{phase}/pp_activation", group=-1, step=step_id)
                    entry[q] = [rv]
            elif shape.pp > 1:
                firsts = [base + t for t in range(shape.tp)]
                for r, q, c in zip(ranks, firsts, cur):
                    _, rv = ops.send(r, q, TOKEN_ID_BYTES * seqs, c, f"{phase}/token_return", step=step_id)
                    pending.setdefault(q, []).append(rv)
                    ends.append(rv)
            else:
                ends += [c[0] for c in cur]
        return ends

    # steps in start order, prefill and decode interleaved, so every rank's ops come in time order
    P, D = sched.prefill, sched.decode
    order = sorted([(float(P.start_ns[s]), 0, s) for s in range(P.n)]
                   + [(float(D.start_ns[s]), 1, s) for s in range(D.n)])
    p_ends: list[list[int]] = [[] for _ in range(P.n)]
    d_ends: list[list[int]] = [[] for _ in range(D.n)]
    for _, is_decode, s in order:
        members = (D if is_decode else P).of(s)
        if not is_decode:
            r = int(P.replica[s])
            base = p_base[r]
            prompts = req.prompt_tokens[members]
            arrival = int(round(float(req.arrival_ns[members].max())))
            first_ranks = prefill.ep if prefill.data_parallel else prefill.tp
            timers = {base + t: [ops.add(base + t, OpKind.COMPUTE, [], "arrival", duration=arrival, phase=Phase.OTHER,
                                         step=s)] for t in range(first_ranks)} if arrival > 0 else {}
            dest = sched.decode_replica[members]
            # the GPU of an attention data-parallel prefill replica holding each member (TP rank 0 otherwise)
            p_gpu = split_prompts(prompts, prefill.ep) if prefill.data_parallel else np.zeros(len(members), np.int64)

            def kv_hook(stage, ranks, after, layer, stage_done, members=members, prompts=prompts, dest=dest, s=s,
                        p_gpu=p_gpu):
                for q, p_tok, d, g in zip(members, prompts, dest, p_gpu):
                    for src, dst, lo, hi, per in pairs:
                        if src // prefill.tp != stage:
                            continue
                        if kv_mode == "layer":
                            if stage_done or not lo <= layer < hi:
                                continue
                            nbytes = int(p_tok) * per
                        else:
                            if not stage_done:
                                continue
                            nbytes = int(p_tok) * per * (hi - lo)
                        at = src % prefill.tp + int(g)
                        to = kv_dst(q, d, dst)
                        sd, rv = ops.send(ranks[at], to, nbytes, [after[at]],
                                          "kv_cache", phase=Phase.OTHER, step=s, request=int(q), layer=layer)
                        kv_send[q].append(sd)
                        kv_recv[q].append(rv)
                        kv_bytes[q] += nbytes
                        pending.setdefault(to, []).append(rv)
                    if stage_done and stage == prefill.pp - 1:
                        for to in token_dsts(q, d):
                            _, rv = ops.send(ranks[g], to, TOKEN_ID_BYTES, [after[g]], "first_token",
                                             phase=Phase.OTHER, step=s, request=int(q))
                            tok_recv[q].append(rv)
                            pending.setdefault(to, []).append(rv)

            tg, eg = p_groups[r]
            if prefill.data_parallel:
                own = [prompts[p_gpu == k] for k in range(prefill.ep)]
                halves = None
                if ep.overlap == "two_microbatch":
                    split = [split_tokens(x) for x in own]
                    halves = [([int(a.sum()) for a, _, _ in split],
                               [p_cost.prefill_attention_ns(a) for a, _, _ in split]),
                              ([int(b.sum()) for _, b, _ in split],
                               [p_cost.prefill_attention_ns(b, c) for _, b, c in split])]
                p_ends[s] = run_dp_step("prefill", s, base, prefill, p_cost, [int(x.sum()) for x in own],
                                        [p_cost.prefill_attention_ns(x) for x in own], [x.size for x in own],
                                        timers, kv_hook, halves)
            else:
                p_ends[s] = run_step("prefill", s, base, prefill, p_cost, tg, eg, int(prompts.sum()),
                                     p_cost.prefill_attention_ns(prompts), len(members), timers, kv_hook)
        else:
            d = int(D.replica[s])
            ctx = D.context[D.ptr[s]:D.ptr[s + 1]]
            tg, eg = d_groups[d]
            # only this step's newly admitted requests may hold RECVs for it: others' caches are not here yet
            new = set(members[sched.first_decode_step[members] == s].tolist())
            base = d_base[d]
            keep = {}
            for rank in range(base, base + decode.gpus):
                mine = pending.pop(rank, [])
                wanted = [rv for rv in mine if ops.request[rv] < 0 or ops.request[rv] in new]
                keep[rank] = [rv for rv in mine if rv not in wanted]
                if wanted:
                    pending[rank] = wanted
            if decode.data_parallel:
                gpu = d_gpu[members]
                seqs = [int(np.count_nonzero(gpu == k)) for k in range(decode.ep)]
                attn = [d_cost.decode_attention_ns(n, int(ctx[gpu == k].sum())) for k, n in enumerate(seqs)]
                halves = None
                if ep.overlap == "two_microbatch":
                    own = [ctx[gpu == k] for k in range(decode.ep)]
                    a = [-(-n // 2) for n in seqs]
                    halves = [(a, [d_cost.decode_attention_ns(x, int(c[:x].sum())) for x, c in zip(a, own)]),
                              ([n - x for n, x in zip(seqs, a)],
                               [d_cost.decode_attention_ns(c.size - x, int(c[x:].sum())) for x, c in zip(a, own)])]
                d_ends[s] = run_dp_step("decode", -1 - s, base, decode, d_cost, seqs, attn, seqs, {},
                                        lambda *a: None, halves)
            else:
                d_ends[s] = run_step("decode", -1 - s, base, decode, d_cost, tg, eg, len(members),
                                     d_cost.decode_attention_ns(len(ctx), int(ctx.sum())), len(members), {},
                                     lambda *a: None)
            for rank, rest in keep.items():
                if rest:
                    pending.setdefault(rank, []).extend(rest)

    trace, perm = _finish(ops, n_ranks, groups, model, hardware)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    remap = lambda lists: [[int(inv[i]) for i in x] for x in lists]  # noqa: E731
    ep_phase = np.asarray(ops.ep_phase, np.int64)[perm]
    return StepTrace(trace=trace, op_step=np.asarray(ops.step, np.int64)[perm],
                     op_request=np.asarray(ops.request, np.int64)[perm], prefill_end_ops=remap(p_ends),
                     decode_end_ops=remap(d_ends), kv_send_ops=remap(kv_send), kv_recv_ops=remap(kv_recv),
                     token_recv_ops=remap(tok_recv), kv_bytes=kv_bytes,
                     op_ep_phase=ep_phase if np.any(ep_phase >= 0) else None)


def split_tokens(prompts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A GPU's ``prompts`` (in order) as the two halves of a two-batch prefill: (half A's prompt parts,
    half B's, and per B part the tokens of its prompt already in A). A takes the first ⌈n/2⌉ of the n
    tokens, so the prompt across the cut splits, its second part attending to its first."""
    p = np.asarray(prompts, np.int64)
    end = np.cumsum(p)
    cut = -(-int(end[-1]) // 2) if p.size else 0
    a = np.clip(cut - (end - p), 0, p)
    keep = p - a > 0
    return a[a > 0], (p - a)[keep], a[keep]


def _finish(ops: _Ops, n_ranks: int, groups, model: InferenceModel,
            hardware: HardwareSpec) -> tuple[Trace, np.ndarray]:
    """The Trace of ``ops`` with ops sorted by rank (creation order kept within a rank), and that order."""
    c = {k: np.asarray(x, np.int64) for k, x in ops.cols.items()}
    perm = np.argsort(c["rank"], kind="stable")
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    n = perm.size
    counts = np.array([len(d) for d in ops.deps], np.int64)[perm]
    dep_idx = np.array([inv[j] for i in perm for j in ops.deps[i]], np.int64)
    match = np.where(c["match"] >= 0, inv[np.maximum(c["match"], 0)], -1)[perm]
    call = c["call"][perm]
    coll_id = np.full(n, -1, np.int64)
    if np.any(call >= 0):
        sel = np.flatnonzero(call >= 0)
        low = np.full(ops.calls, n, np.int64)
        np.minimum.at(low, call[sel], sel)
        coll_id[sel] = low[call[sel]]
    sizes = [len(r) for _, r in groups]
    specs = {"model": dataclasses.asdict(model.spec), "hardware": dataclasses.asdict(hardware),
             "inference": {"attention": model.attention, "kv_bytes_per_token": model.kv_bytes_per_token}}
    trace = Trace(
        n_ranks=n_ranks, rank=c["rank"][perm], kind=c["kind"][perm], phase=c["phase"][perm],
        duration_ns=c["duration_ns"][perm], flops=np.zeros(n, np.int64), bytes=c["bytes"][perm],
        coll_kind=c["coll_kind"][perm], group=c["group"][perm], peer=c["peer"][perm], match_id=match,
        coll_id=coll_id, algo_hint=c["algo_hint"][perm], label=c["label"][perm],
        microbatch=np.full(n, -1, np.int64), layer=c["layer"][perm],
        dep_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), dep_idx=dep_idx,
        labels=tuple(ops.labels), group_ptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        group_ranks=np.array([x for _, r in groups for x in r], np.int64),
        group_kind=np.array([k for k, _ in groups], np.int64), specs=json.dumps(specs))
    return trace, perm
