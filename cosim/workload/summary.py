"""Per-iteration summary of a trace: bytes per collective kind, FLOPs, compute time, pipeline bubble.

Definitions:

- ``bytes_total``: Σ of S over calls (a collective call counted once, not once per member; p2p: Σ sends).
- ``bytes_per_rank_max``: the largest Σ of S over one rank's ops of that kind.
- ``model_flops``: 3·B·F_seq (forward + backward, no recomputation; :mod:`cosim.workload.flops`);
  ``megatron_flops``: Megatron's count (the recomputed forward counted, Narayanan et al. SC'21);
  ``executed_flops``: Σ of all compute ops' FLOPs (includes recomputation).
- ``compute_ns_max``: the largest Σ of compute durations of one rank.
- ``iteration_ns_compute_only``: makespan with zero-time communication (:mod:`cosim.workload.timeline`).
- ``bubble_fraction``: (T − C)/C, T the span from the first to the last forward/backward compute in that
  timeline, C the largest per-rank forward/backward compute time; compare ``bubble_fraction_ideal`` =
  (p−1)/(v·m).
- ``domain_crossings``: per group kind meant to stay on NVLink (TP, EP), (groups touching more than one
  NVLink domain of ``gpus_per_host`` GPUs, groups): their collectives go over the fabric.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.workload.layout import domains_spanned
from cosim.workload.timeline import compute_only_timeline
from cosim.workload.trace import (
    NO_GROUP_KIND,
    CollKind,
    GroupKind,
    OpKind,
    Phase,
    Trace,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommRow:
    """Traffic of one (operation, group kind) pair over the iteration."""

    op: str  #: collective kind (all_reduce, …) or "send"
    group_kind: str  #: tp, dp, … ("-" if unknown)
    calls: int  #: collective calls, or messages
    bytes_total: int  #: Σ S over calls (or messages), B
    bytes_per_rank_max: int  #: max over ranks of Σ S of that rank, B


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSummary:
    """Numbers printed by ``cosim trace`` (module docstring)."""

    n_ranks: int
    n_ops: int
    comm: tuple[CommRow, ...]
    model_flops: int | None
    megatron_flops: int | None
    executed_flops: int
    compute_ns_max: int
    iteration_ns_compute_only: int
    bubble_fraction: float
    bubble_fraction_ideal: float | None
    total_params: int | None
    model_state_bytes_per_gpu_max: int | None
    hbm_bytes: int | None
    peak_flops_per_s: float | None
    gpus_per_host: int = 8  #: GPUs of one NVLink domain
    #: (group kind, groups spanning several NVLink domains, groups) for TP and EP
    domain_crossings: tuple[tuple[str, int, int], ...] = ()

    @property
    def mfu_compute_only(self) -> float | None:
        """Model FLOPs utilisation if communication were free: model_flops / (T·GPUs·peak)."""
        if not self.model_flops or not self.peak_flops_per_s or self.iteration_ns_compute_only <= 0:
            return None
        return self.model_flops / (self.iteration_ns_compute_only * 1e-9 * self.n_ranks * self.peak_flops_per_s)

    @property
    def megatron_flop_per_s_per_gpu_compute_only(self) -> float | None:
        """Megatron's FLOPs per iteration / (T·GPUs) if communication were free, FLOP/s per GPU."""
        if not self.megatron_flops or self.iteration_ns_compute_only <= 0:
            return None
        return self.megatron_flops / (self.iteration_ns_compute_only * 1e-9 * self.n_ranks)


def summarize(trace: Trace) -> TraceSummary:
    """Compute the TraceSummary of ``trace`` (runs the compute-only timeline)."""
    rows = []
    gk = trace.op_group_kind()
    for kind, name_of in ((OpKind.COLLECTIVE, lambda k: CollKind(k).name.lower()), (OpKind.SEND, lambda k: "send")):
        sel = trace.kind == kind
        if not np.any(sel):
            continue
        keys = sorted({(int(c), int(g)) for c, g in zip(trace.coll_kind[sel], gk[sel])})
        for c, g in keys:
            m = sel & (trace.coll_kind == c) & (gk == g)
            if kind == OpKind.COLLECTIVE:
                calls_first = m & (trace.coll_id == np.arange(trace.n_ops))
                calls = int(calls_first.sum())
                total = int(trace.bytes[calls_first].sum())
            else:
                calls = int(m.sum())
                total = int(trace.bytes[m].sum())
            per_rank = np.bincount(trace.rank[m], weights=trace.bytes[m].astype(np.float64), minlength=trace.n_ranks)
            rows.append(CommRow(op=name_of(c), group_kind=GroupKind(g).name.lower() if g != NO_GROUP_KIND else "-",
                                calls=calls, bytes_total=total, bytes_per_rank_max=int(per_rank.max())))
    start, end = compute_only_timeline(trace)
    compute = trace.kind == OpKind.COMPUTE
    busy = np.bincount(trace.rank[compute], weights=trace.duration_ns[compute].astype(np.float64),
                       minlength=trace.n_ranks)
    fb = compute & ((trace.phase == Phase.FORWARD) | (trace.phase == Phase.BACKWARD))
    if np.any(fb):
        span = int(end[fb].max() - start[fb].min())
        fb_busy = np.bincount(trace.rank[fb], weights=trace.duration_ns[fb].astype(np.float64), minlength=trace.n_ranks)
        bubble = (span - fb_busy.max()) / fb_busy.max() if fb_busy.max() > 0 else 0.0
    else:
        bubble = 0.0
    specs = trace.spec_dict()
    derived = specs.get("derived", {})
    hw = specs.get("hardware", {})
    state = derived.get("model_state_bytes_per_gpu_by_stage")
    return TraceSummary(
        n_ranks=trace.n_ranks, n_ops=trace.n_ops, comm=tuple(rows),
        model_flops=derived.get("model_flops_per_iteration"),
        megatron_flops=derived.get("megatron_flops_per_iteration"), executed_flops=int(trace.flops.sum()),
        compute_ns_max=int(busy.max()), iteration_ns_compute_only=int(end.max()) if end.size else 0,
        bubble_fraction=float(bubble), bubble_fraction_ideal=derived.get("bubble_fraction_ideal"),
        total_params=derived.get("total_params"),
        model_state_bytes_per_gpu_max=max(state) if state else None,
        hbm_bytes=hw.get("hbm_bytes"), peak_flops_per_s=hw.get("peak_flops_per_s"),
        gpus_per_host=int(hw.get("gpus_per_host", 8)), domain_crossings=_domain_crossings(trace, hw))


def _domain_crossings(trace: Trace, hw: dict) -> tuple[tuple[str, int, int], ...]:
    """(kind, groups spanning several NVLink domains, groups) for the TP and EP groups of ``trace``."""
    spans = domains_spanned(trace.group_ptr, trace.group_ranks, int(hw.get("gpus_per_host", 8)))
    kinds = np.asarray(trace.group_kind)
    out = []
    for kind in (GroupKind.TP, GroupKind.EP):
        sel = kinds == kind
        if np.any(sel):
            out.append((kind.name.lower(), int(np.count_nonzero(spans[sel] > 1)), int(np.count_nonzero(sel))))
    return tuple(out)


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def format_summary(s: TraceSummary) -> str:
    """Human-readable multi-line rendering of a TraceSummary."""
    lines = [f"ranks: {s.n_ranks}   ops: {s.n_ops}"]
    if s.total_params is not None:
        lines.append(f"parameters: {s.total_params / 1e9:.3f} B")
    lines.append("communication per iteration:")
    lines.append(f"  {'op':<15}{'group':<7}{'calls':>8}{'total (Σ S)':>16}{'max per rank':>16}")
    for r in s.comm:
        lines.append(f"  {r.op:<15}{r.group_kind:<7}{r.calls:>8}{_bytes(r.bytes_total):>16}"
                     f"{_bytes(r.bytes_per_rank_max):>16}")
    if s.model_flops is not None:
        lines.append(f"model FLOPs per iteration: {s.model_flops:.4e}   executed: {s.executed_flops:.4e}")
    else:
        lines.append(f"executed FLOPs per iteration: {s.executed_flops:.4e}")
    lines.append(f"compute time (busiest rank): {s.compute_ns_max / 1e6:.3f} ms")
    lines.append(f"iteration time with free communication: {s.iteration_ns_compute_only / 1e6:.3f} ms")
    ideal = f" (ideal (p-1)/(v·m) = {s.bubble_fraction_ideal:.4f})" if s.bubble_fraction_ideal is not None else ""
    lines.append(f"pipeline bubble fraction: {s.bubble_fraction:.4f}{ideal}")
    if s.mfu_compute_only is not None:
        lines.append(f"MFU with free communication: {100 * s.mfu_compute_only:.1f} %")
    if s.megatron_flop_per_s_per_gpu_compute_only is not None:
        lines.append(f"TFLOP/s per GPU with free communication (Megatron's count): "
                     f"{s.megatron_flop_per_s_per_gpu_compute_only / 1e12:.1f}")
    if s.model_state_bytes_per_gpu_max is not None:
        warn = ""
        if s.hbm_bytes and s.model_state_bytes_per_gpu_max > s.hbm_bytes:
            warn = "  WARNING: exceeds HBM (activations not counted)"
        lines.append(f"model state per GPU (params+grads+Adam): {_bytes(s.model_state_bytes_per_gpu_max)}{warn}")
    crossing = [f"{n} of {total} {kind} groups" for kind, n, total in s.domain_crossings if n]
    if crossing:
        lines.append(f"NOTE: {', '.join(crossing)} span several NVLink domains of {s.gpus_per_host} GPUs "
                     "(their collectives cross the fabric; tp·cp·pp·ep dividing the domain keeps them inside)")
    return "\n".join(lines)
