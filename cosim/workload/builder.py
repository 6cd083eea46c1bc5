"""Build the Trace of one training iteration from a model, a parallelism and a hardware spec.

Each pipeline stage gets one *program* (ops with symbolic groups and peers); every rank of that stage runs
the same program, instantiated with its own groups and neighbours (ranks of a stage differ only in
coordinates). Message sizes come from :mod:`cosim.workload.sizes`, FLOPs from :mod:`cosim.workload.flops`,
and each compute op's duration is the sum of the predicted times of its kernels (:mod:`cosim.workload.kernels`
lists them: GEMMs, flash attention, norms, rotary embedding, activation, residual adds, embedding lookup,
cross-entropy; :mod:`cosim.workload.compute` times them with the HardwareSpec's fitted coefficients).

Per layer and micro-batch (t = tp > 1; ops of size-1 groups are left out):

forward   [ZeRO-3 all-gather of the layer's params]
          attention: [SP: all-gather] compute attn [CP: qkv, ring send/recv of K,V with cp core chunks,
          oproj] → all-reduce (SP: reduce-scatter)
          dense MLP: [SP: all-gather] compute mlp → all-reduce (SP: reduce-scatter)
          MoE MLP:   compute router → all-to-all dispatch (EP) → [TP all-gather] → compute experts →
                     [TP reduce-scatter] → all-to-all combine (EP)
          two-micro-batch overlap (``moe_overlap``): an MoE layer as two halves of the micro-batch's
          sequences (one sequence: its two token halves, the second attending to the first),
          each half's attention, router, experts and collectives as above at its own size,
          interleaved on the compute stream so that one half's all-to-all flies during the other's compute
          (_moe_layer_fwd_overlapped, _moe_layer_bwd_overlapped; docs/models/moe.md); ``forward_backward``
          (pp = 1): the forward of micro-batch i + 1 and the backward of micro-batch i as alternating
          segments of one compute stream (_build_paired, DualPipe's chunk pairing)
backward  [ZeRO-3 all-gather] [recompute: the forward ops again] then in reverse: MLP input-gradient compute
          → its TP collective (the backward of the forward's: all-reduce, or AG before and RS after with
          SP; MoE: the all-to-alls and TP gather/scatter in reverse) → MLP weight-gradient compute; the same
          for attention (CP: ring of K,V,dK,dV); [ZeRO-3 reduce-scatter of the layer's grads]
embedding forward: lookup compute → all-reduce (SP: reduce-scatter) of the vocabulary-parallel lookup;
backward: the scatter-add of its gradient (compute). Output head: logits compute (final norm, logits GEMM,
cross-entropy; SP: all-gather before), backward input-gradient compute → all-reduce (SP: reduce-scatter)
→ weight-gradient compute. Cross-entropy's three small all-reduces are not modelled.

Pipeline: a forward on a stage other than the first starts with a RECV of the activation from the
previous (virtual) stage and ends with a SEND to the next; a backward the reverse, in 1F1B or interleaved
order (:mod:`cosim.workload.schedule`). Each TP rank sends its 1/t slice of the activation (Megatron's
scatter/gather); without SP the receiving stage then all-gathers the full tensor over TP. The backward SEND waits for the whole backward of the chunk,
weight gradients included (Megatron sends after autograd returns). Gradient sync: in the last micro-batch's backward, layers' gradients
are packed into buckets (``dp_bucket_bytes``, never splitting a layer; dense and expert parameters
separately, per model chunk) and each bucket's all-reduce (ZeRO-1: reduce-scatter) is issued as soon as
its layers' weight gradients are computed: it depends on those computes and on the previous bucket (one
communicator), not on the end of backward. Then, if SP, an all-reduce over TP of the replicated
parameters' grads; if tied embeddings with pp > 1, an all-reduce of the embedding grads over EMBD; then
the optimizer step (memory-bound compute, after every gradient collective of the rank); with ZeRO-1 the
parameter all-gathers (2 B/param) per bucket after it. ZeRO-3 replaces buckets with per-layer
reduce-scatters in every micro-batch's backward; its gathers form one chain and are prefetched at most
one layer ahead (a gather waits for the first compute of the previous layer).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload import flops as fl
from cosim.workload import kernels as kn
from cosim.workload import sizes as sz
from cosim.workload.compute import kernels_ns
from cosim.workload.hardware import HardwareSpec
from cosim.workload.layout import Layout, PeerKind, make_layout
from cosim.workload.model import ModelSpec, active_params, total_params
from cosim.workload.moe_expand import expand_ep_all_to_alls
from cosim.workload.parallelism import (
    SPLIT_FIELDS,
    ParallelismSpec,
    check_compatible,
    virtual_stage_layers,
)
from cosim.workload.schedule import bubble_fraction, pipeline_schedule
from cosim.workload.trace import (
    MICROBATCH_HALVES,
    OP_COLUMNS,
    AlgoHint,
    CollKind,
    GroupKind,
    OpKind,
    Phase,
    Trace,
    collective_call_ids,
)

FWD, BWD, SYNC, OPT = Phase.FORWARD, Phase.BACKWARD, Phase.GRAD_SYNC, Phase.OPTIMIZER
AR, RS, AG, A2A = CollKind.ALL_REDUCE, CollKind.REDUCE_SCATTER, CollKind.ALL_GATHER, CollKind.ALL_TO_ALL
TP, CP, PP, DP, EP, EDP, EMBD = (GroupKind.TP, GroupKind.CP, GroupKind.PP, GroupKind.DP, GroupKind.EP,
                                 GroupKind.EDP, GroupKind.EMBD)
INT64_MAX = (1 << 63) - 1


def _flat(deps: Any, out: set[int]) -> None:
    if deps is None:
        return
    if isinstance(deps, (list, tuple)):
        for d in deps:
            _flat(d, out)
    else:
        out.add(int(deps))


def pick(a: int | None, b: int | None) -> int | None:
    """``a`` unless it is None (an op that was left out), else ``b``."""
    return a if a is not None else b


class _Program:
    """Ops of one pipeline stage in issue order, groups and peers symbolic (GroupKind, PeerKind)."""

    def __init__(self, group_size: dict[GroupKind, int], block_ns: dict[str, int]):
        self.group_size = group_size
        self.block_ns = block_ns  # duration of each kind of compute op, ns
        self.cols: dict[str, list[int]] = {k: [] for k in (
            "kind", "phase", "duration_ns", "flops", "bytes", "coll_kind", "gkind", "pkind", "algo_hint",
            "microbatch", "layer")}
        self.labels: list[str] = []
        self.deps: list[list[int]] = []
        self.keys: list[tuple | None] = []
        self.last_compute: int | None = None  # compute ops of a rank form one chain (one compute stream)
        # the pass whose ops are being emitted (None, or "f" / "b" while a forward and a backward interleave)
        # and the last compute op each pass emitted: what a pass's own end waits for
        self.tag: str | None = None
        self.own_last: dict[str | None, int] = {}
        self.chain: dict[str, int] = {}  # last op per communicator stream (buckets, ZeRO gathers)
        self.compute_idx: list[int] = []

    def __len__(self) -> int:
        return len(self.labels)

    def _push(self, *, kind: OpKind, label: str, deps: Any, phase: Phase, mb: int, layer: int, flops: int = 0,
              duration_ns: int = 0, nbytes: int = 0, ckind: CollKind = CollKind.NONE, gkind: int = -1,
              pkind: int = -1, algo: AlgoHint = AlgoHint.AUTO, key: tuple | None = None) -> int:
        i = len(self.labels)
        d: set[int] = set()
        _flat(deps, d)
        c = self.cols
        c["kind"].append(int(kind))
        c["phase"].append(int(phase))
        c["duration_ns"].append(duration_ns)
        c["flops"].append(flops)
        c["bytes"].append(nbytes)
        c["coll_kind"].append(int(ckind))
        c["gkind"].append(int(gkind))
        c["pkind"].append(int(pkind))
        c["algo_hint"].append(int(algo))
        c["microbatch"].append(mb)
        c["layer"].append(layer)
        self.labels.append(label)
        self.deps.append(sorted(d))
        self.keys.append(key)
        return i

    def compute(self, label: str, flops: int, deps: Any, *, phase: Phase, mb: int, layer: int,
                block: str | None = None, duration_ns: int | None = None) -> int:
        """Append a compute op after the previous compute of the rank; its duration is that of the kernels of
        ``block`` (a key of kernels.block_kernels) unless ``duration_ns`` is given."""
        dur = self.block_ns[block] if duration_ns is None else duration_ns
        i = self._push(kind=OpKind.COMPUTE, label=label, deps=[deps, self.last_compute], phase=phase, mb=mb,
                       layer=layer, flops=flops, duration_ns=dur)
        self.last_compute = i
        self.own_last[self.tag] = i
        self.compute_idx.append(i)
        return i

    def last_own(self) -> int | None:
        """The last compute op of the pass being emitted (``last_compute`` unless passes interleave)."""
        return self.own_last.get(self.tag)

    def coll(self, label: str, ckind: CollKind, gkind: GroupKind, nbytes: int, deps: Any, *, phase: Phase,
             mb: int, layer: int, algo: AlgoHint = AlgoHint.RING, chain: str | None = None) -> int | None:
        """Append a collective, or return None if its group has one member (nothing to communicate)."""
        if self.group_size.get(gkind, 1) < 2 or nbytes <= 0:
            return None
        d = [deps, self.chain.get(chain)] if chain else deps
        i = self._push(kind=OpKind.COLLECTIVE, label=label, deps=d, phase=phase, mb=mb, layer=layer,
                       nbytes=nbytes, ckind=ckind, gkind=gkind, algo=algo)
        if chain:
            self.chain[chain] = i
        return i

    def p2p(self, kind: OpKind, label: str, pkind: PeerKind, gkind: GroupKind, nbytes: int, key: tuple,
            deps: Any, *, phase: Phase, mb: int, layer: int) -> int:
        """Append a SEND or RECV to neighbour ``pkind``; ``key`` names the message on both sides."""
        return self._push(kind=kind, label=label, deps=deps, phase=phase, mb=mb, layer=layer, nbytes=nbytes,
                          gkind=gkind, pkind=pkind, key=key)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Half:
    """One half of a micro-batch under two-micro-batch overlap: its own sequences, so its own kernel times
    (the compute model is per kernel and not linear in tokens), FLOPs and message sizes."""

    name: str  #: "a" or "b", the label part after the layer
    lf: fl.LayerFlops
    block_ns: dict[str, int]  #: duration of each kind of compute op for this half's tokens, ns
    tp_bytes: int
    a2a_bytes: int
    a2a_fwd_dispatch_bytes: int
    moe_tp_bytes: int


def _halves(m: ModelSpec, par: ParallelismSpec, hw: HardwareSpec) -> tuple[_Half, _Half]:
    """The two halves of a micro-batch of b sequences: ceil(b/2) and floor(b/2) sequences, or with b = 1 the
    sequence's first and second s/2 tokens (:func:`_token_halves`)."""
    if par.micro_batch_size == 1:
        return _token_halves(m, par, hw)
    out = []
    seqs = par.micro_batch_size
    for name, b in zip(MICROBATCH_HALVES, (seqs - seqs // 2, seqs // 2)):
        # the same job with b sequences per micro-batch (the batch fields only keep the spec valid)
        hp = dataclasses.replace(par, micro_batch_size=b, global_batch_size=b * par.dp * par.num_microbatches,
                                 moe_overlap="none")
        out.append(_Half(name=name, lf=fl.layer_forward_flops(m, hp),
                         block_ns={k: kernels_ns(hw, ks) for k, ks in kn.block_kernels(m, hp).items()},
                         tp_bytes=sz.tp_activation_bytes(m, hp), a2a_bytes=sz.moe_dispatch_bytes(m, hp),
                         a2a_fwd_dispatch_bytes=sz.moe_dispatch_bytes(m, hp, forward_dispatch=True),
                         moe_tp_bytes=sz.moe_tp_bytes(m, hp)))
    return out[0], out[1]


def _token_halves(m: ModelSpec, par: ParallelismSpec, hw: HardwareSpec) -> tuple[_Half, _Half]:
    """A micro-batch of one sequence of s tokens split by tokens, as DeepSeek-V3 and SGLang split a batch of
    one sequence: half A its first s/2 tokens, half B the last s/2. Every linear op and message of a half is
    that of s/2 tokens. Attention is causal: A's queries attend to A's keys only, B's to A's keys whole and
    to their own causally, so B's attention kernels run 3× A's work (``past_keys``). The FLOP convention
    counts a sequence's full s×s score matrix (twice its causal work, cosim.workload.flops); each half counts
    twice its own causal work, A (s/2)² and B the rest, 3/4 of the sequence's. Half B's FLOPs and bytes are
    the whole sequence's minus A's, so the halves add up to the plain schedule exactly."""
    s = m.seq_length
    hm = dataclasses.replace(m, seq_length=s // 2)
    whole = fl.layer_forward_flops(m, par)
    lf_a = fl.layer_forward_flops(hm, par)
    lf_b = fl.LayerFlops(**{f.name: getattr(whole, f.name) - getattr(lf_a, f.name)
                            for f in dataclasses.fields(fl.LayerFlops)})
    sizes = {"tp_bytes": sz.tp_activation_bytes, "a2a_bytes": sz.moe_dispatch_bytes,
             "a2a_fwd_dispatch_bytes": lambda mm, pp: sz.moe_dispatch_bytes(mm, pp, forward_dispatch=True),
             "moe_tp_bytes": sz.moe_tp_bytes}
    a_bytes = {k: f(hm, par) for k, f in sizes.items()}
    b_bytes = {k: f(m, par) - a_bytes[k] for k, f in sizes.items()}
    ns = [{k: kernels_ns(hw, ks) for k, ks in kn.block_kernels(hm, par, past_keys=past).items()}
          for past in (0, s // 2)]
    return (_Half(name=MICROBATCH_HALVES[0], lf=lf_a, block_ns=ns[0], **a_bytes),
            _Half(name=MICROBATCH_HALVES[1], lf=lf_b, block_ns=ns[1], **b_bytes))


@dataclass
class _Bucket:
    params: int = 0
    deps: list[int] = field(default_factory=list)


class _StageBuilder:
    """Writes the program of one pipeline stage."""

    def __init__(self, m: ModelSpec, par: ParallelismSpec, hw: HardwareSpec, stage: int,
                 group_size: dict[GroupKind, int]):
        self.m, self.par, self.hw, self.stage = m, par, hw, stage
        self.p, self.v, self.nmb = par.pp, par.vpp, par.num_microbatches
        self.n_vstages = self.p * self.v
        self.vstage_layers = virtual_stage_layers(m.num_layers, par)  # layers of each virtual stage
        self.first_layer = np.concatenate([[0], np.cumsum(self.vstage_layers)]).tolist()
        self.sp = par.sp
        self.lf = fl.layer_forward_flops(m, par)
        self.lf_dense = fl.layer_forward_flops(m, par, moe=False)  # leading dense layers of an MoE model
        self.head_flops = fl.head_forward_flops(m, par)
        # message sizes, formulas in cosim.workload.sizes (Megatron's):
        self.tp_bytes = sz.tp_activation_bytes(m, par)  # TP AR / SP RS+AG full tensor: 2·b·(s/cp)·h
        self.pp_bytes = sz.pp_activation_bytes(m, par)  # PP send/recv per TP rank: 2·b·(s/cp)·h/t
        self.kv_bytes = sz.cp_kv_bytes(m, par)  # CP ring step: 2·2·b·(s/cp)·kv·d/t (×2 in backward)
        self.a2a_bytes = sz.moe_dispatch_bytes(m, par)  # MoE all-to-all: 2·b·(s/cp)/t·k·h
        self.a2a_fwd_dispatch_bytes = sz.moe_dispatch_bytes(m, par, forward_dispatch=True)  # FP8 if so chosen
        self.moe_tp_bytes = sz.moe_tp_bytes(m, par)  # MoE TP AG/RS of routed tokens: 2·b·(s/cp)·k·h
        self.layer_p = sz.layer_unit_params(m, par)
        self.layer_p_dense = sz.layer_unit_params(m, par, moe=False)
        self.embed_p = sz.embedding_unit_params(m, par)
        self.head_p = sz.head_unit_params(m, par)
        self.prog = _Program(group_size, {name: kernels_ns(hw, ks) for name, ks in kn.block_kernels(m, par).items()})
        self.halves = _halves(m, par, hw) if par.moe_overlap == "two_microbatch" else None
        self.zero3 = par.zero_stage == 3
        self.acc = {DP: _Bucket(), EDP: _Bucket()}
        self.n_buckets = 0
        self.zero1_buckets: list[tuple[GroupKind, int, int, int]] = []
        self.sync_ops: list[int] = []
        self.gate: int | None = None  # first compute of the previous unit (ZeRO-3 prefetch limit)

    # --- structure -----------------------------------------------------------------------------------

    def units(self, chunk: int) -> list[tuple[str, int]]:
        """Units of model chunk ``chunk`` in forward order: [embed], layers, [head]."""
        vs = chunk * self.p + self.stage
        out: list[tuple[str, int]] = [("embed", -1)] if vs == 0 else []
        out += [("layer", L) for L in range(self.first_layer[vs], self.first_layer[vs + 1])]
        if vs == self.n_vstages - 1:
            out.append(("head", -1))
        return out

    def unit_params(self, unit: tuple[str, int]) -> sz.UnitParams:
        """Parameters one rank of this stage holds for ``unit``."""
        if unit[0] == "layer" and not self.m.is_moe_layer(unit[1]):
            return self.layer_p_dense
        return {"embed": self.embed_p, "layer": self.layer_p, "head": self.head_p}[unit[0]]

    def stage_params(self) -> sz.UnitParams:
        """All parameters one rank of this stage holds."""
        total = sz.UnitParams()
        for c in range(self.v):
            for u in self.units(c):
                total = total + self.unit_params(u)
        return total

    def build(self) -> _Program:
        """Emit the whole iteration of this stage."""
        if self.par.moe_overlap == "forward_backward":
            self._build_paired()
        else:
            for step in pipeline_schedule(self.stage, self.p, self.nmb, self.v):
                if step.forward:
                    self._forward(step.microbatch, step.chunk)
                else:
                    self._backward(step.microbatch, step.chunk)
        self._finalize()
        return self.prog

    def _build_paired(self) -> None:
        """DualPipe's overlap of a forward and a backward chunk (pp = 1): forward 0, then the forward of
        micro-batch i + 1 interleaved with the backward of micro-batch i, then the last backward. The two
        passes' segments (cut where the next compute waits for a communication: after an MoE dispatch or
        combine is issued, and between units) alternate on the one compute stream, so each pass's
        all-to-alls fly during the other's compute."""
        self._forward(0, 0)
        for mb in range(self.nmb - 1):
            passes = [(self._forward_steps(mb + 1, 0), "f"), (self._backward_steps(mb, 0), "b")]
            while passes:
                for gen, tag in list(passes):
                    self.prog.tag = tag
                    if next(gen, StopIteration) is StopIteration:
                        passes.remove((gen, tag))
            self.prog.tag = None
        self._backward(self.nmb - 1, 0)

    # --- passes --------------------------------------------------------------------------------------

    def _forward(self, mb: int, chunk: int) -> None:
        for _ in self._forward_steps(mb, chunk):
            pass

    def _forward_steps(self, mb: int, chunk: int):
        """The forward of (mb, chunk) as a generator pausing where its next compute waits for a communication
        (_build_paired interleaves it with a backward; run alone it emits the same ops in the same order)."""
        P = self.prog
        vs = chunk * self.p + self.stage
        x = None
        if vs > 0:  # Megatron p2p: activation from the previous virtual stage
            x = P.p2p(OpKind.RECV, f"fwd/mb{mb}/vs{vs}/pp_recv", PeerKind.PP_PREV, PP, self.pp_bytes,
                      ("pp_f", mb, vs - 1), [P.last_compute], phase=FWD, mb=mb, layer=-1)
            x = self._pp_gather(f"fwd/mb{mb}/vs{vs}/pp_allgather", x, FWD, mb)
        for unit in self.units(chunk):
            first = len(P.compute_idx)
            gather = self._zero3_gather(unit, f"fwd/mb{mb}/{self._unit_name(unit)}/", FWD, mb)
            if unit[0] == "embed":
                x = self._embed_fwd(mb, x, gather)
            elif unit[0] == "layer":
                x = yield from self._layer_fwd(unit[1], mb, x, gather, recompute=False)
            else:
                x = self._head_fwd(mb, x, gather)
            self._update_gate(first)
            yield
        if vs < self.n_vstages - 1:
            P.p2p(OpKind.SEND, f"fwd/mb{mb}/vs{vs}/pp_send", PeerKind.PP_NEXT, PP, self.pp_bytes,
                  ("pp_f", mb, vs), [pick(x, P.last_compute)], phase=FWD, mb=mb, layer=-1)

    def _backward(self, mb: int, chunk: int) -> None:
        for _ in self._backward_steps(mb, chunk):
            pass

    def _backward_steps(self, mb: int, chunk: int):
        """The backward of (mb, chunk) as a generator, as :meth:`_forward_steps`."""
        P = self.prog
        vs = chunk * self.p + self.stage
        g = None
        if vs < self.n_vstages - 1:  # gradient of our output from the next virtual stage
            g = P.p2p(OpKind.RECV, f"bwd/mb{mb}/vs{vs}/pp_recv", PeerKind.PP_NEXT, PP, self.pp_bytes,
                      ("pp_b", mb, vs + 1), [P.last_compute], phase=BWD, mb=mb, layer=-1)
            g = self._pp_gather(f"bwd/mb{mb}/vs{vs}/pp_allgather", g, BWD, mb)
        last_mb = mb == self.nmb - 1
        for unit in reversed(self.units(chunk)):
            first = len(P.compute_idx)
            pre = f"bwd/mb{mb}/{self._unit_name(unit)}/"
            gather = self._zero3_gather(unit, pre, BWD, mb) if unit[0] != "embed" else []
            if unit[0] == "embed":  # scatter-add of the output gradient into the embedding's gradient rows
                wgrads = [P.compute(pre + "lookup_wgrad", 0, [g], block="lookup_wgrad", phase=BWD, mb=mb, layer=-1)]
            elif unit[0] == "layer":
                g, wgrads = yield from self._layer_bwd(unit[1], mb, g, gather)
            else:
                g, wgrads = self._head_bwd(mb, gather)
            self._update_gate(first)
            wdeps = wgrads or [P.last_own()]
            up = self.unit_params(unit)
            layer = unit[1]
            if self.zero3:
                for gk, params, what in ((DP, up.dense, "zero3_reducescatter"),
                                         (EDP, up.expert, "zero3_expert_reducescatter")):
                    # ZeRO-3/FSDP: reduce-scatter this unit's fp32 grads every micro-batch, 4·P_unit_local
                    i = P.coll(pre + what, RS, gk, sz.grad_bytes(params), wdeps, phase=BWD, mb=mb, layer=layer,
                               chain=f"z3rs_{gk.name}")
                    if i is not None:
                        self.sync_ops.append(i)
            elif last_mb:
                self._bucket_add(chunk, up, wdeps)
            # no pause between units: the next MoE layer's combine backward is issued before the forward
            # runs, so it flies during the forward's segment (a pause here would leave a segment without compute)
        if last_mb and not self.zero3:
            self._bucket_flush(DP, chunk)
            self._bucket_flush(EDP, chunk)
        if vs > 0:
            P.p2p(OpKind.SEND, f"bwd/mb{mb}/vs{vs}/pp_send", PeerKind.PP_PREV, PP, self.pp_bytes,
                  ("pp_b", mb, vs), [g, P.last_own()], phase=BWD, mb=mb, layer=-1)

    def _pp_gather(self, label: str, recv: int, phase: Phase, mb: int) -> int:
        """Without SP, Megatron sends each TP rank's 1/t slice of the pipeline tensor and rebuilds the whole
        2·b·(s/cp)·h on the receiving stage with an all-gather over TP; with SP the tensor is already split."""
        if self.sp:
            return recv
        return pick(self.prog.coll(label, AG, TP, self.tp_bytes, [recv], phase=phase, mb=mb, layer=-1), recv)

    @staticmethod
    def _unit_name(unit: tuple[str, int]) -> str:
        return f"L{unit[1]}" if unit[0] == "layer" else unit[0]

    def _update_gate(self, first: int) -> None:
        if len(self.prog.compute_idx) > first:
            self.gate = self.prog.compute_idx[first]

    def _zero3_gather(self, unit: tuple[str, int], pre: str, phase: Phase, mb: int) -> list[int]:
        """ZeRO-3: all-gather the unit's bf16 params (2·P_unit_local) over DP (dense) and EDP (experts)."""
        if not self.zero3:
            return []
        up = self.unit_params(unit)
        out = []
        for gk, params, what in ((DP, up.dense, "zero3_allgather"), (EDP, up.expert, "zero3_expert_allgather")):
            # bf16 params of the unit on this (tp, pp) rank: 2·P_unit_local
            i = self.prog.coll(pre + what, AG, gk, sz.param_bytes(params), [self.gate], phase=phase, mb=mb,
                               layer=unit[1], chain="z3ag")
            if i is not None:
                out.append(i)
        return out

    # --- units ---------------------------------------------------------------------------------------

    def _tp_out(self, label: str, deps: Any, kw: dict, nbytes: int | None = None) -> int | None:
        """Row-parallel output collective: all-reduce, or reduce-scatter with sequence parallelism."""
        kind, name = (RS, "tp_reducescatter") if self.sp else (AR, "tp_allreduce")
        return self.prog.coll(f"{label}_{name}", kind, TP, self.tp_bytes if nbytes is None else nbytes, deps, **kw)

    def _tp_in(self, label: str, deps: Any, kw: dict, nbytes: int | None = None) -> int | None:
        """Column-parallel input all-gather (sequence parallelism only)."""
        if not self.sp:
            return None
        return self.prog.coll(f"{label}_tp_allgather", AG, TP, self.tp_bytes if nbytes is None else nbytes, deps,
                              **kw)

    def _embed_fwd(self, mb: int, x: int | None, gather: list[int]) -> int | None:
        P = self.prog
        kw = dict(phase=FWD, mb=mb, layer=-1)
        e = P.compute(f"fwd/mb{mb}/embed/lookup", 0, [gather], block="lookup", **kw)
        # vocabulary-parallel embedding: partial lookups summed over TP (2·b·s·h), SP scatters the sum
        o = self._tp_out(f"fwd/mb{mb}/embed/embed", [e], kw)
        return pick(o, e)

    def _head_fwd(self, mb: int, x: int | None, gather: list[int]) -> int:
        P = self.prog
        kw = dict(phase=FWD, mb=mb, layer=-1)
        inp = pick(self._tp_in(f"fwd/mb{mb}/head/head", [x], kw), x)
        return P.compute(f"fwd/mb{mb}/head/logits", self.head_flops, [inp, gather], block="logits", **kw)

    def _head_bwd(self, mb: int, gather: list[int]) -> tuple[int, list[int]]:
        P = self.prog
        kw = dict(phase=BWD, mb=mb, layer=-1)
        d = P.compute(f"bwd/mb{mb}/head/logits_dgrad", self.head_flops, [gather], block="logits_dgrad", **kw)
        # column-parallel output layer: input gradient all-reduced over TP (SP: reduce-scattered)
        o = self._tp_out(f"bwd/mb{mb}/head/head", [d], kw)
        w = P.compute(f"bwd/mb{mb}/head/logits_wgrad", self.head_flops, [d], block="logits_wgrad", **kw)
        return pick(o, d), [w]

    def _layer_fwd(self, L: int, mb: int, x: Any, gather: list[int], recompute: bool):
        """The layer's forward ops, a generator pausing after an MoE dispatch is issued; its output (the
        generator's value): one op, or one per half under two-micro-batch overlap."""
        P = self.prog
        pre = f"bwd/mb{mb}/L{L}/recompute_" if recompute else f"fwd/mb{mb}/L{L}/"
        kw = dict(phase=BWD if recompute else FWD, mb=mb, layer=L)
        if self.halves and self.m.is_moe_layer(L):
            return self._moe_layer_fwd_overlapped(pre, x, gather, kw)
        lf = self.lf
        inp = pick(self._tp_in(pre + "attn", [x], kw), x)
        if self.par.cp == 1:
            c = P.compute(pre + "attn", lf.attention_flops, [inp, gather], block="attn", **kw)
        else:
            c = self._ring_fwd(pre, inp, gather, kw, "r" if recompute else "f", mb, L)
        o = pick(self._tp_out(pre + "attn", [c], kw), c)
        if self.m.is_moe_layer(L):
            return (yield from self._moe_fwd(pre, o, kw))
        inp = pick(self._tp_in(pre + "mlp", [o], kw), o)
        c = P.compute(pre + "mlp", self.lf_dense.mlp_flops, [inp], block="mlp", **kw)
        return pick(self._tp_out(pre + "mlp", [c], kw), c)

    def _ring_fwd(self, pre: str, inp: int | None, gather: list[int], kw: dict, tag: str, mb: int, L: int) -> int:
        """Ring attention forward: cp-1 steps pass K,V chunks to the next CP rank while computing."""
        P, cp = self.prog, self.par.cp
        b, s, h, t = self.par.micro_batch_size, self.m.seq_length, self.m.hidden_size, self.par.tp
        chunk_flops = 4 * b * (s // cp) * (s // cp) * h // t  # core_flops / cp: one K,V chunk per step
        q = P.compute(pre + "qkv", self.lf.qkv_flops, [inp, gather], block="qkv", **kw)
        recvs: list[int | None] = [q] + [None] * (cp - 1)
        for j in range(1, cp):
            key = ("cp", tag, mb, L, j)
            P.p2p(OpKind.SEND, f"{pre}cp_send_kv_s{j}", PeerKind.CP_NEXT, CP, self.kv_bytes, key, [recvs[j - 1]], **kw)
            recvs[j] = P.p2p(OpKind.RECV, f"{pre}cp_recv_kv_s{j}", PeerKind.CP_PREV, CP, self.kv_bytes, key, [q],
                             **kw)
            P.compute(f"{pre}attn_core_c{j - 1}", chunk_flops, [recvs[j - 1]], block="attn_core_chunk", **kw)
        P.compute(f"{pre}attn_core_c{cp - 1}", chunk_flops, [recvs[cp - 1]], block="attn_core_chunk", **kw)
        return P.compute(pre + "oproj", self.lf.oproj_flops, [], block="oproj", **kw)

    def _ring_bwd(self, pre: str, inp: int | None, kw: dict, mb: int, L: int) -> int:
        """Ring attention backward: cp-1 steps pass K,V and partial dK,dV (twice the forward chunk)."""
        P, cp = self.prog, self.par.cp
        b, s, h, t = self.par.micro_batch_size, self.m.seq_length, self.m.hidden_size, self.par.tp
        chunk_flops = 2 * 4 * b * (s // cp) * (s // cp) * h // t  # backward of a core chunk: 2× forward
        d0 = P.compute(pre + "oproj_dgrad", self.lf.oproj_flops, [inp], block="oproj_dgrad", **kw)
        core = P.compute(pre + "attn_core_bwd_c0", chunk_flops, [d0], block="attn_core_bwd_chunk", **kw)
        recv: int | None = None
        nbytes = sz.cp_kv_grad_bytes(self.m, self.par)  # K, V, dK, dV: 2 × 2·2·b·(s/cp)·kv·d/t
        for j in range(1, cp):
            key = ("cp", "b", mb, L, j)
            P.p2p(OpKind.SEND, f"{pre}cp_send_kvgrad_s{j}", PeerKind.CP_NEXT, CP, nbytes, key, [core, recv], **kw)
            recv = P.p2p(OpKind.RECV, f"{pre}cp_recv_kvgrad_s{j}", PeerKind.CP_PREV, CP, nbytes, key, [d0], **kw)
            core = P.compute(f"{pre}attn_core_bwd_c{j}", chunk_flops, [recv], block="attn_core_bwd_chunk", **kw)
        return P.compute(pre + "qkv_dgrad", self.lf.qkv_flops, [core], block="qkv_dgrad", **kw)

    def _moe_fwd(self, pre: str, o: int, kw: dict):
        P, lf = self.prog, self.lf
        r = P.compute(pre + "router", lf.router_flops, [o], block="router", **kw)
        d = pick(P.coll(pre + "moe_dispatch_alltoall", A2A, EP, self.a2a_fwd_dispatch_bytes, [r],
                        algo=AlgoHint.PAIRWISE, **kw), r)
        yield  # the experts wait for the dispatch
        g = pick(P.coll(pre + "moe_tp_allgather", AG, TP, self.moe_tp_bytes, [d], **kw), d)
        e = P.compute(pre + "experts", lf.experts_flops, [g], block="experts", **kw)
        rs = pick(P.coll(pre + "moe_tp_reducescatter", RS, TP, self.moe_tp_bytes, [e], **kw), e)
        return pick(P.coll(pre + "moe_combine_alltoall", A2A, EP, self.a2a_bytes, [rs], algo=AlgoHint.PAIRWISE,
                           **kw), rs)

    def _moe_layer_fwd_overlapped(self, pre: str, x: Any, gather: list[int], kw: dict) -> tuple[int, int]:
        """An MoE layer's forward in two halves (two-batch overlap): compute in the order attention, router of
        A; attention, router of B; experts of A; experts of B, so that A's dispatch is in flight during B's
        attention, B's dispatch during A's experts, A's combine during B's experts and B's combine during the
        next layer's attention of A. Returns each half's output (its combine)."""
        P = self.prog
        xs = x if isinstance(x, tuple) else (x, x)
        routed = []
        for h, half in enumerate(self.halves):
            hp = _half_prefix(pre, half.name)
            inp = pick(self._tp_in(hp + "attn", [xs[h]], kw, half.tp_bytes), xs[h])
            c = P.compute(hp + "attn", half.lf.attention_flops, [inp, gather], duration_ns=half.block_ns["attn"],
                          **kw)
            o = pick(self._tp_out(hp + "attn", [c], kw, half.tp_bytes), c)
            r = P.compute(hp + "router", half.lf.router_flops, [o], duration_ns=half.block_ns["router"], **kw)
            d = pick(P.coll(hp + "moe_dispatch_alltoall", A2A, EP, half.a2a_fwd_dispatch_bytes, [r],
                            algo=AlgoHint.PAIRWISE, **kw), r)
            routed.append(pick(P.coll(hp + "moe_tp_allgather", AG, TP, half.moe_tp_bytes, [d], **kw), d))
        out = []
        for h, half in enumerate(self.halves):
            hp = _half_prefix(pre, half.name)
            e = P.compute(hp + "experts", half.lf.experts_flops, [routed[h]], duration_ns=half.block_ns["experts"],
                          **kw)
            rs = pick(P.coll(hp + "moe_tp_reducescatter", RS, TP, half.moe_tp_bytes, [e], **kw), e)
            out.append(pick(P.coll(hp + "moe_combine_alltoall", A2A, EP, half.a2a_bytes, [rs],
                                   algo=AlgoHint.PAIRWISE, **kw), rs))
        return out[0], out[1]

    def _moe_layer_bwd_overlapped(self, pre: str, g: Any, rec: Any, gather: list[int],
                                  kw: dict) -> tuple[tuple[int, int], list[int]]:
        """An MoE layer's backward in two halves, the forward's overlap reversed: both halves' combine
        backward in flight from the start; compute in the order experts input gradient of A, of B; experts
        weight gradient of A (beside both dispatch backwards); router and attention input gradient of A;
        experts weight gradient of B; router and attention input gradient of B; attention weight gradients
        of A and B (beside the next layer's combine backward). Returns each half's input gradient and the
        weight-gradient computes."""
        P = self.prog
        gs = g if isinstance(g, tuple) else (g, g)
        recs = rec if isinstance(rec, tuple) else (rec, rec)
        hps = [_half_prefix(pre, half.name) for half in self.halves]
        gathered = []
        for h, half in enumerate(self.halves):
            c1 = pick(P.coll(hps[h] + "moe_combine_alltoall", A2A, EP, half.a2a_bytes, [gs[h]],
                             algo=AlgoHint.PAIRWISE, **kw), gs[h])
            gathered.append(pick(P.coll(hps[h] + "moe_tp_allgather", AG, TP, half.moe_tp_bytes, [c1], **kw), c1))
        dgrads, dispatched = [], []
        for h, half in enumerate(self.halves):
            d = P.compute(hps[h] + "experts_dgrad", half.lf.experts_flops, [gathered[h], gather, recs[h]],
                          duration_ns=half.block_ns["experts_dgrad"], **kw)
            c3 = pick(P.coll(hps[h] + "moe_tp_reducescatter", RS, TP, half.moe_tp_bytes, [d], **kw), d)
            dgrads.append(d)
            dispatched.append(pick(P.coll(hps[h] + "moe_dispatch_alltoall", A2A, EP, half.a2a_bytes, [c3],
                                          algo=AlgoHint.PAIRWISE, **kw), c3))
        wgrads, attn_dgrads, outs = [], [], []
        for h, half in enumerate(self.halves):
            wgrads.append(P.compute(hps[h] + "experts_wgrad", half.lf.experts_flops, [dgrads[h]],
                                    duration_ns=half.block_ns["experts_wgrad"], **kw))
            rb = P.compute(hps[h] + "router_bwd", 2 * half.lf.router_flops, [dispatched[h]],
                           duration_ns=half.block_ns["router_bwd"], **kw)
            inp = pick(self._tp_in(hps[h] + "attn", [rb], kw, half.tp_bytes), rb)
            lf = half.lf
            d = P.compute(hps[h] + "attn_dgrad", lf.qkv_flops + 2 * lf.core_flops + lf.oproj_flops, [inp],
                          duration_ns=half.block_ns["attn_dgrad"], **kw)
            attn_dgrads.append(d)
            outs.append(pick(self._tp_out(hps[h] + "attn", [d], kw, half.tp_bytes), d))
        for h, half in enumerate(self.halves):
            lf = half.lf
            wgrads.append(P.compute(hps[h] + "attn_wgrad", lf.qkv_flops + lf.oproj_flops, [attn_dgrads[h]],
                                    duration_ns=half.block_ns["attn_wgrad"], **kw))
        return (outs[0], outs[1]), wgrads

    def _layer_bwd(self, L: int, mb: int, g: Any, gather: list[int]):
        """The layer's backward ops, a generator pausing after an MoE layer's combine and dispatch backwards
        are issued; its value: the input gradient and the weight-gradient computes."""
        P, lf = self.prog, self.lf
        pre = f"bwd/mb{mb}/L{L}/"
        kw = dict(phase=BWD, mb=mb, layer=L)
        rec = (yield from self._layer_fwd(L, mb, None, gather, recompute=True)) if self.par.recompute else None
        if self.halves and self.m.is_moe_layer(L):
            return self._moe_layer_bwd_overlapped(pre, g, rec, gather, kw)
        if self.m.is_moe_layer(L):
            c1 = pick(P.coll(pre + "moe_combine_alltoall", A2A, EP, self.a2a_bytes, [g], algo=AlgoHint.PAIRWISE,
                             **kw), g)
            yield  # the experts' input gradient waits for the combine's backward
            c2 = pick(P.coll(pre + "moe_tp_allgather", AG, TP, self.moe_tp_bytes, [c1], **kw), c1)
            d = P.compute(pre + "experts_dgrad", lf.experts_flops, [c2, gather, rec], block="experts_dgrad",
                          **kw)
            c3 = pick(P.coll(pre + "moe_tp_reducescatter", RS, TP, self.moe_tp_bytes, [d], **kw), d)
            c4 = pick(P.coll(pre + "moe_dispatch_alltoall", A2A, EP, self.a2a_bytes, [c3], algo=AlgoHint.PAIRWISE,
                             **kw), c3)
            yield  # the router's backward waits for the dispatch's backward
            rb = P.compute(pre + "router_bwd", 2 * lf.router_flops, [c4], block="router_bwd", **kw)
            w1 = P.compute(pre + "experts_wgrad", lf.experts_flops, [d], block="experts_wgrad", **kw)
            out = rb
        else:
            inp = pick(self._tp_in(pre + "mlp", [g], kw), g)
            mlp_flops = self.lf_dense.mlp_flops
            d = P.compute(pre + "mlp_dgrad", mlp_flops, [inp, gather, rec], block="mlp_dgrad", **kw)
            out = pick(self._tp_out(pre + "mlp", [d], kw), d)
            w1 = P.compute(pre + "mlp_wgrad", mlp_flops, [d], block="mlp_wgrad", **kw)
        inp = pick(self._tp_in(pre + "attn", [out], kw), out)
        if self.par.cp == 1:
            d = P.compute(pre + "attn_dgrad", lf.qkv_flops + 2 * lf.core_flops + lf.oproj_flops, [inp],
                          block="attn_dgrad", **kw)
        else:
            d = self._ring_bwd(pre, inp, kw, mb, L)
        out = pick(self._tp_out(pre + "attn", [d], kw), d)
        w2 = P.compute(pre + "attn_wgrad", lf.qkv_flops + lf.oproj_flops, [d], block="attn_wgrad", **kw)
        return out, [w1, w2]

    # --- gradient sync and optimizer -------------------------------------------------------------------

    def _bucket_add(self, chunk: int, up: sz.UnitParams, wdeps: list[int]) -> None:
        for gk, params in ((DP, up.dense), (EDP, up.expert)):
            if params == 0 or self.prog.group_size.get(gk, 1) < 2:
                continue
            acc = self.acc[gk]
            acc.params += params
            acc.deps.extend(wdeps)
            if sz.grad_bytes(acc.params) >= self.par.dp_bucket_bytes:
                self._bucket_flush(gk, chunk)

    def _bucket_flush(self, gk: GroupKind, chunk: int) -> None:
        acc = self.acc[gk]
        if acc.params == 0:
            return
        k = self.n_buckets
        self.n_buckets += 1
        name = "dp" if gk == DP else "edp"
        kind, what = (AR, "allreduce") if self.par.zero_stage == 0 else (RS, "reducescatter")
        # fp32 gradients of the bucket: 4·P_bucket (Σ over buckets = 4·P_local ≈ 4·P/(t·p))
        i = self.prog.coll(f"grad/c{chunk}/b{k}/{name}_{what}", kind, gk, sz.grad_bytes(acc.params), acc.deps,
                           phase=SYNC, mb=-1, layer=-1, chain=name)
        if i is not None:
            self.sync_ops.append(i)
            if self.par.zero_stage == 1:
                self.zero1_buckets.append((gk, acc.params, chunk, k))
        self.acc[gk] = _Bucket()

    def optimizer_params(self) -> int:
        """Parameters this rank updates: all it holds, or its 1/(dp·cp) (experts 1/edp) shard with ZeRO."""
        up = self.stage_params()
        if self.par.zero_stage == 0:
            return up.total
        return -(-up.dense // (self.par.dp * self.par.cp)) + -(-up.expert // self.par.edp)

    def _finalize(self) -> None:
        P = self.prog
        base = [self.sync_ops, P.last_compute]
        fin: list[int | None] = []
        up = self.stage_params()
        kw = dict(phase=SYNC, mb=-1, layer=-1)
        if self.sp:
            # Megatron all-reduces over TP the grads of params that see only the local sequence shard under SP
            # (norms, row-parallel biases, router): 4·replicated; learned positions are applied before the
            # scatter, so their grads are already complete on every TP rank and are left out.
            n_embed = sum(1 for c in range(self.v) for u in self.units(c) if u[0] == "embed")
            partial = up.replicated - n_embed * self.embed_p.replicated
            fin.append(P.coll("grad/tp_replicated_allreduce", AR, TP, sz.grad_bytes(partial), base, **kw))
        if self.m.tied_embeddings and self.p > 1 and self.stage in (0, self.p - 1):
            # tied embeddings: first and last stage sum their copies' grads, 4·V·h/t
            emb = self.m.vocab_size * self.m.hidden_size // self.par.tp
            fin.append(P.coll("grad/embd_allreduce", AR, EMBD, sz.grad_bytes(emb), [base, fin], **kw))
        opt_ns = kernels_ns(self.hw, kn.optimizer_kernels(self.optimizer_params(), sz.OPTIMIZER_BYTES_PER_PARAM,
                                                          loss_scaling=self.m.loss_scaling))
        opt = P.compute("opt/step", 0, [base, fin], phase=OPT, mb=-1, layer=-1, duration_ns=opt_ns)
        for gk, params, chunk, k in self.zero1_buckets:
            name = "dp" if gk == DP else "edp"
            # distributed optimizer: gather the updated bf16 params, 2·P_bucket
            P.coll(f"opt/c{chunk}/b{k}/{name}_allgather", AG, gk, sz.param_bytes(params), [opt], phase=OPT,
                   mb=-1, layer=-1, chain=name)


def _half_prefix(pre: str, half: str) -> str:
    """``pre`` (``fwd/mb0/L3/`` or ``bwd/mb0/L3/recompute_``) with the half as a path part after the layer
    (``fwd/mb0/L3/a/``, ``bwd/mb0/L3/a/recompute_``): the label's last part stays the op's block name."""
    where, tag = pre.rsplit("/", 1)
    return f"{where}/{half}/{tag}"


# --- instantiation -----------------------------------------------------------------------------------

@dataclass
class _Template:
    cols: dict[str, np.ndarray]
    labels: list[str]
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    keys: list[tuple | None]

    @property
    def n(self) -> int:
        return len(self.labels)


def _to_template(prog: _Program) -> _Template:
    cols = {k: np.asarray(v, dtype=np.int64) for k, v in prog.cols.items()}
    counts = np.fromiter((len(d) for d in prog.deps), dtype=np.int64, count=len(prog.deps))
    dep_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    dep_idx = np.fromiter((x for d in prog.deps for x in d), dtype=np.int64, count=int(dep_ptr[-1]))
    return _Template(cols=cols, labels=prog.labels, dep_ptr=dep_ptr, dep_idx=dep_idx, keys=prog.keys)


def _peer_stage(stage: int, pkind: int, pp: int) -> int:
    if pkind == PeerKind.PP_NEXT:
        return (stage + 1) % pp
    if pkind == PeerKind.PP_PREV:
        return (stage - 1) % pp
    return stage


def _instantiate(templates: list[_Template], layout: Layout, pp: int) -> dict[str, Any]:
    """Replicate each stage's template for every rank of that stage and resolve groups, peers, ids."""
    stage_of = layout.stage
    sizes = np.array([templates[s].n for s in stage_of], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(off[-1])
    dep_counts = np.array([templates[s].dep_idx.size for s in stage_of], dtype=np.int64)
    doff = np.concatenate([[0], np.cumsum(dep_counts)]).astype(np.int64)

    label_ids: dict[str, int] = {}
    for t in templates:
        for s in t.labels:
            label_ids.setdefault(s, len(label_ids))

    # columns in the Trace's own dtypes (Trace adopts them without a copy): a 16,384-GPU trace has ~10^7 ops,
    # so int64 everywhere would more than double the peak
    out = {k: np.zeros(n, dtype=OP_COLUMNS[k][0]) for k in (
        "kind", "phase", "duration_ns", "flops", "bytes", "coll_kind", "group", "peer", "match_id",
        "algo_hint", "label", "microbatch", "layer", "rank")}
    dep_ptr = np.zeros(n + 1, dtype=np.int64)
    dep_idx = np.zeros(int(doff[-1]), dtype=np.int64)

    # p2p: for each recv of a template, the local index of its send in the sender's template
    send_index = [{t.keys[j]: j for j in range(t.n) if t.cols["kind"][j] == OpKind.SEND} for t in templates]
    recv_partner = []
    for s, t in enumerate(templates):
        partner = np.full(t.n, -1, dtype=np.int64)
        for j in np.flatnonzero(t.cols["kind"] == OpKind.RECV):
            ps = _peer_stage(s, int(t.cols["pkind"][j]), pp)
            partner[j] = send_index[ps][t.keys[j]]
        recv_partner.append(partner)

    for s, t in enumerate(templates):
        ranks = np.flatnonzero(stage_of == s)
        if ranks.size == 0 or t.n == 0:
            continue
        pos = (off[ranks][:, None] + np.arange(t.n)[None, :]).ravel()
        for k in ("kind", "phase", "duration_ns", "flops", "bytes", "coll_kind", "algo_hint", "microbatch", "layer"):
            out[k][pos] = np.tile(t.cols[k], ranks.size)
        out["label"][pos] = np.tile(np.array([label_ids[x] for x in t.labels], dtype=np.int64), ranks.size)
        out["rank"][pos] = np.repeat(ranks, t.n)
        gk, pk = t.cols["gkind"], t.cols["pkind"]
        grp = layout.group_of[ranks][:, np.clip(gk, 0, None)]
        out["group"][pos] = np.where(gk[None, :] >= 0, grp, -1).ravel()
        peers = layout.peer_of[ranks][:, np.clip(pk, 0, None)]
        peers = np.where(pk[None, :] >= 0, peers, -1)
        out["peer"][pos] = peers.ravel()
        # match_id = global index of the SEND (same value on its RECV)
        is_send = (t.cols["kind"] == OpKind.SEND)[None, :]
        is_recv = (t.cols["kind"] == OpKind.RECV)[None, :]
        own = off[ranks][:, None] + np.arange(t.n)[None, :]
        theirs = off[np.clip(peers, 0, None)] + recv_partner[s][None, :]
        out["match_id"][pos] = np.where(is_send, own, np.where(is_recv, theirs, -1)).ravel()
        counts = np.diff(t.dep_ptr)
        dep_ptr[pos + 1] = np.tile(counts, ranks.size)
        dpos = (doff[ranks][:, None] + np.arange(t.dep_idx.size)[None, :]).ravel()
        dep_idx[dpos] = (off[ranks][:, None] + t.dep_idx[None, :]).ravel()
    dep_ptr = np.cumsum(dep_ptr)
    out["coll_id"] = collective_call_ids(out["rank"], out["kind"], out["group"], layout.group_kind.size)
    out["labels"] = tuple(label_ids)
    out["dep_ptr"], out["dep_idx"] = dep_ptr, dep_idx
    return out


def _spec_dict(spec: Any, optional: bool | None = None) -> dict[str, Any]:
    """The fields of ``spec``; its TRACE_OPTIONAL_FIELDS all (``optional`` True), none (False), or those not
    at their default (None)."""
    skip = getattr(spec, "TRACE_OPTIONAL_FIELDS", ())
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
            if f.name not in skip or optional or (optional is None and getattr(spec, f.name) != f.default)}


def stage_templates(model: ModelSpec, par: ParallelismSpec, hw: HardwareSpec) -> tuple[Layout, list[_Template]]:
    """The Layout of ``par`` and every pipeline stage's program as a template (``cols``: kind, bytes,
    coll_kind, gkind, pkind, ... of its ops, with symbolic groups and peers): what each rank of the stage runs,
    before :func:`build_trace` instantiates it for every rank. Its size does not grow with the data-parallel
    degree. (DeepEP's expansion of EP all-to-alls is not applied.)"""
    check_compatible(model, par)
    layout = make_layout(par, tied_embeddings=model.tied_embeddings)
    group_size = {GroupKind(k): layout.group_size(GroupKind(k)) for k in GroupKind}
    return layout, [_to_template(_StageBuilder(model, par, hw, s, group_size).build()) for s in range(par.pp)]


def build_trace(model: ModelSpec, par: ParallelismSpec, hw: HardwareSpec) -> Trace:
    """The trace of one training iteration of transformer ``model`` (presets in cosim.workload.model) under
    ``par`` (parallelism, batch sizes and placement) on ``hw`` (GPU type and efficiencies, which set the
    compute durations), with the three specs and derived numbers in ``trace.specs``. An impossible
    combination is a CosimInputError naming its numbers.
    """
    check_compatible(model, par)
    layout = make_layout(par, tied_embeddings=model.tied_embeddings)
    group_size = {GroupKind(k): layout.group_size(GroupKind(k)) for k in GroupKind}
    builders = [_StageBuilder(model, par, hw, s, group_size) for s in range(par.pp)]
    templates = [_to_template(b.build()) for b in builders]
    for t in templates:
        if t.cols["flops"].size and int(t.cols["flops"].max()) > INT64_MAX // 2:
            raise CosimInputError("parallelism.micro_batch_size", "FLOPs of one op overflow int64",
                                  "use a smaller micro-batch or sequence")
    cols = _instantiate(templates, layout, par.pp)
    stage_params = [b.stage_params() for b in builders]
    split = builders[0].vstage_layers
    state = []
    for b, up in zip(builders, stage_params):
        # model state per GPU: bf16 params (2) + fp32 grads (4) + Adam fp32 master, m, v (12) bytes/param
        if par.zero_stage == 0:
            state.append(18 * up.total)
        elif par.zero_stage == 1:
            state.append(6 * up.total + 12 * b.optimizer_params())
        else:
            state.append(18 * b.optimizer_params())
    derived = {
        "world_size": par.world_size,
        "num_microbatches": par.num_microbatches,
        "layers_per_chunk": model.num_layers // (par.pp * par.vpp) if len(set(split)) == 1 else None,
        "total_params": total_params(model),
        "active_params": active_params(model),
        "params_per_gpu_by_stage": [up.total for up in stage_params],
        "model_state_bytes_per_gpu_by_stage": state,
        "model_flops_per_iteration": fl.model_flops_per_iteration(model, par.global_batch_size),
        "megatron_flops_per_iteration": fl.megatron_flops_per_iteration(model, par.global_batch_size,
                                                                        par.recompute),
        "bubble_fraction_ideal": bubble_fraction(par.pp, par.num_microbatches, par.vpp),
    }
    par_dict = _spec_dict(par)
    if par.uneven_split:
        derived["layers_per_virtual_stage"] = list(split)
    else:  # an even split's trace stays the one written before the split fields existed, bit for bit
        for name in SPLIT_FIELDS:
            del par_dict[name]
    hw_dict = _spec_dict(hw, model.gemm_precision != "bf16")
    if hw.sustained_clock_ratio == 1.0:  # a trace at the profiles' clock stays the one written before the field
        del hw_dict["sustained_clock_ratio"]
    specs = {"model": _spec_dict(model), "parallelism": par_dict, "hardware": hw_dict, "derived": derived}
    trace = Trace(n_ranks=layout.n_ranks, rank=cols["rank"], kind=cols["kind"], phase=cols["phase"],
                  duration_ns=cols["duration_ns"], flops=cols["flops"], bytes=cols["bytes"],
                  coll_kind=cols["coll_kind"], group=cols["group"], peer=cols["peer"], match_id=cols["match_id"],
                  coll_id=cols["coll_id"], algo_hint=cols["algo_hint"], label=cols["label"],
                  microbatch=cols["microbatch"], layer=cols["layer"], dep_ptr=cols["dep_ptr"],
                  dep_idx=cols["dep_idx"], labels=cols["labels"], group_ptr=layout.group_ptr,
                  group_ranks=layout.group_ranks, group_kind=layout.group_kind,
                  specs=json.dumps(specs, sort_keys=True))
    # DeepEP kernels: the EP all-to-alls become routed point-to-point messages (cosim.workload.moe_expand)
    return expand_ep_all_to_alls(trace, model, par, hw)
