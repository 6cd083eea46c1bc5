"""Pipeline schedules: 1F1B and interleaved order, the order of ops in traces, and the bubble."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.schedule import (
    Step,
    bubble_fraction,
    interleaved_one_f_one_b,
    one_f_one_b,
)
from cosim.workload.summary import summarize
from cosim.workload.timeline import compute_only_timeline
from cosim.workload.trace import OpKind, Phase


def fmt(steps: list[Step]) -> str:
    return " ".join(f"{'F' if s.forward else 'B'}{s.microbatch}" + (f".{s.chunk}" if s.chunk else "") for s in steps)


def test_1f1b_warmup_steady_cooldown():
    assert fmt(one_f_one_b(0, 4, 6)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5"
    assert fmt(one_f_one_b(2, 4, 6)) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5"
    assert fmt(one_f_one_b(3, 4, 6)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"
    assert fmt(one_f_one_b(0, 4, 2)) == "F0 F1 B0 B1"  # fewer micro-batches than stages


def test_interleaved_follows_megatron():
    steps = interleaved_one_f_one_b(0, 2, 4, 2)
    # warm-up (p-i-1)·2 + (v-1)·p = 4 forwards: chunk 0 of mb 0,1 then chunk 1 of mb 0,1
    assert fmt(steps[:4]) == "F0 F1 F0.1 F1.1"
    assert fmt(steps[4:6]) == "F2 B0.1"  # first backward is of the last chunk
    for stage in range(2):
        s = interleaved_one_f_one_b(stage, 2, 4, 2)
        assert len(s) == 2 * 4 * 2
        for chunk in range(2):
            fw = [x.microbatch for x in s if x.forward and x.chunk == chunk]
            bw = [x.microbatch for x in s if not x.forward and x.chunk == chunk]
            assert fw == bw == [0, 1, 2, 3]
    last = interleaved_one_f_one_b(1, 2, 4, 2)
    first_backward = next(k for k, x in enumerate(last) if not x.forward)
    assert first_backward == 2 + 1  # warm-up (v-1)·p = 2, then the steady state's forward
    with pytest.raises(ValueError):
        interleaved_one_f_one_b(0, 4, 6, 2)


def test_every_pass_after_its_dependencies():
    for p, m, v in ((4, 8, 1), (4, 8, 2), (3, 3, 3)):
        for stage in range(p):
            steps = interleaved_one_f_one_b(stage, p, m, v) if v > 1 else one_f_one_b(stage, p, m)
            seen = set()
            for s in steps:
                if not s.forward:
                    assert (True, s.microbatch, s.chunk) in seen
                seen.add((s.forward, s.microbatch, s.chunk))
            assert len(seen) == 2 * m * v


def _compute_passes(tr, rank, layers_per_chunk, p):
    """(forward?, micro-batch, chunk) of the rank's layer compute ops, consecutive duplicates collapsed."""
    lo, hi = tr.rank_ptr[rank], tr.rank_ptr[rank + 1]
    out = []
    for i in range(lo, hi):
        if tr.kind[i] != OpKind.COMPUTE or tr.layer[i] < 0:
            continue
        chunk = int(tr.layer[i]) // layers_per_chunk // p
        key = (tr.phase[i] == Phase.FORWARD, int(tr.microbatch[i]), chunk)
        if not out or out[-1] != key:
            out.append(key)
    return out


@pytest.mark.parametrize("pp, vpp, gb", [(4, 1, 6), (2, 2, 4), (4, 2, 8)])
def test_trace_ops_are_in_schedule_order(pp, vpp, gb):
    m = get_model("llama2-7b", num_layers=pp * vpp * 2, vocab_size=64)
    par = ParallelismSpec(pp=pp, vpp=vpp, global_batch_size=gb)
    tr = build_trace(m, par, get_hardware("h100"))
    for stage in range(pp):
        expected = [(s.forward, s.microbatch, s.chunk) for s in
                    (interleaved_one_f_one_b(stage, pp, gb, vpp) if vpp > 1 else one_f_one_b(stage, pp, gb))]
        assert _compute_passes(tr, stage, 2, pp) == expected
    # stage 1's first forward receives the activation, its backward receives the gradient
    lo = tr.rank_ptr[1]
    assert tr.label_of(lo) == "fwd/mb0/vs1/pp_recv" and tr.kind[lo] == OpKind.RECV


@pytest.mark.parametrize("pp, m, v", [(2, 4, 1), (4, 8, 1), (4, 4, 1), (4, 8, 2), (2, 4, 4), (3, 6, 2)])
def test_bubble_fraction_matches_formula(pp, m, v):
    # balanced stages, as the formula assumes: a tiny vocabulary so the logits do not load the last stage,
    # and memory-bound ops made free so the embedding lookup does not load the first one (what is left,
    # a few kernel launches of the embedding and head, is < 1 % of a stage)
    model = get_model("llama2-7b", num_layers=pp * v, vocab_size=8, seq_length=2048)
    hw = get_hardware("h100", hbm_bytes_per_s=1e16, memory_launch_ns=0.0, norm_launch_ns=0.0, rope_launch_ns=0.0,
                      activation_launch_ns=0.0, embedding_launch_ns=0.0)
    tr = build_trace(model, ParallelismSpec(pp=pp, vpp=v, global_batch_size=m), hw)
    s = summarize(tr)
    assert s.bubble_fraction_ideal == bubble_fraction(pp, m, v) == (pp - 1) / (v * m)
    assert s.bubble_fraction == pytest.approx((pp - 1) / (v * m), rel=1e-2)


def test_no_bubble_without_pipeline_and_compute_only_timeline_sane():
    tr = build_trace(get_model("llama2-7b", num_layers=2), ParallelismSpec(tp=2, dp=2, global_batch_size=4),
                     get_hardware("h100"))
    start, end = compute_only_timeline(tr)
    assert np.all(end >= start) and np.all(end - start == tr.duration_ns)
    for i in range(tr.n_ops):  # every op ends after all its deps
        assert all(end[d] <= start[i] for d in tr.deps(i))
    assert summarize(tr).bubble_fraction == pytest.approx(0.0, abs=1e-9)
