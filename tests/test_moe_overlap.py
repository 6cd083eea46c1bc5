"""Overlap of MoE dispatch and combine with compute (``parallelism.moe_overlap``).

A DeepSeek-V3-shaped job cut to one dense and two MoE layers, EP8 over four servers of two GPUs, two
sequences per micro-batch (or one, split into its two token halves): the two-micro-batch schedule moves the
same bytes and FLOPs as the plain one, hides EP communication behind the other half's compute, keeps one
compute stream per GPU, and its compute loses DeepEP's SM share while the dispatch and combine are in
flight. Forward-backward pairing (DualPipe's, pp = 1) reorders the same ops and hides EP communication too.
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim.errors import CosimInputError
from cosim.run import run
from cosim.spec import make
from cosim.workload import flops as fl
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import GroupKind, OpKind
from cosim.workload.validate import check_trace

SHAPE = dict(num_layers=3, first_dense_layers=1, seq_length=1024, hidden_size=1024, vocab_size=4096,
             max_routed_nodes=2)
PAR = dict(dp=8, ep=8, micro_batch_size=2, global_batch_size=16)
#: the SMs DeepEP's high-throughput kernels hold on an H100: HardwareSpec.deepep_sms / sm_count
DEEPEP_SHARE = 20 / 132


def _trace(overlap: str, kernel: str = "nccl", **par):
    return build_trace(get_model("deepseek-v3", **SHAPE, moe_kernel=kernel),
                       ParallelismSpec(**(PAR | par), moe_overlap=overlap), get_hardware("h100", gpus_per_host=2))


def _run(overlap: str, kernel: str = "nccl", attributes: dict | None = None, **par):
    exp = make("training", transport="roce", topology="single-switch", gpus_per_server=2,
               **{"workload.model": "deepseek-v3", "workload.model_overrides": SHAPE | {"moe_kernel": kernel},
                  "workload.parallelism": PAR | par | {"moe_overlap": overlap},
                  "network.attributes": {"DagExecutor::CommComputeSlowdown": "0", **(attributes or {})}})
    rec = run(exp)
    assert rec.summary["status"] == "complete" and rec.summary["drops"] == 0
    return rec


#: one sequence per micro-batch: the halves are its two token halves
ONE_SEQUENCE = dict(micro_batch_size=1, global_batch_size=8)


@pytest.mark.parametrize("par", [{}, {"recompute": True}, dict(tp=2, sequence_parallel=True), ONE_SEQUENCE,
                                 ONE_SEQUENCE | {"recompute": True},
                                 ONE_SEQUENCE | dict(tp=2, sequence_parallel=True)])
def test_halves_move_the_same_bytes_and_flops(par):
    """Per rank, the overlapped trace's FLOPs, EP all-to-all bytes (dispatch and combine, forward and
    backward) and every other op's bytes equal the plain trace's exactly: the halves hold ceil(b/2) and
    floor(b/2) whole sequences, or with b = 1 the sequence's first and second s/2 tokens, and every FLOP
    count and message size adds up over them. The overlapped trace is valid, splits only the MoE layers, and
    has twice their EP ops."""
    plain, tbo = _trace("none", **par), _trace("two_microbatch", **par)
    check_trace(tbo)
    for t in (plain, tbo):
        assert not np.any(t.op_half()[t.layer < 1] >= 0)  # the dense layer, embedding and head are not split
    for r in range(plain.n_ranks):
        assert plain.flops[plain.rank == r].sum() == tbo.flops[tbo.rank == r].sum() > 0
        assert _sent_bytes(plain, r) == _sent_bytes(tbo, r)
        assert all(v > 0 for v in _sent_bytes(plain, r).values())
    ep_ops = [int(((t.op_group_kind() == GroupKind.EP) & (t.kind != OpKind.RECV)).sum()) for t in (plain, tbo)]
    assert ep_ops[1] == 2 * ep_ops[0]


@pytest.mark.parametrize("tp", [1, 2])
def test_token_halves_attend_causally(tp):
    """With one sequence per micro-batch the halves are its token halves: every op of a half but attention
    has the FLOPs and bytes of s/2 tokens, the same in both; the second half's queries see the first half's
    keys whole and their own causally, so its attention core counts 3× the first's FLOPs (3/4 of the
    sequence's full-matrix count) and its attention kernels, forward and backward, take longer; its experts
    take the same time."""
    par = ONE_SEQUENCE | (dict(tp=2, sequence_parallel=True) if tp == 2 else {})
    plain, tbo = _trace("none", **par), _trace("two_microbatch", **par)
    labels = tbo.label_array().astype(str)
    mine = tbo.rank == 0
    attn = {f: tbo.flops[mine & (labels == f"fwd/mb0/L1/{f}/attn")] for f in "ab"}
    assert attn["a"].size == attn["b"].size == 1
    whole = plain.flops[(plain.rank == 0) & (plain.label_array().astype(str) == "fwd/mb0/L1/attn")]
    assert attn["a"][0] + attn["b"][0] == whole[0]
    for op in ("router", "experts"):
        fa, fb = (tbo.flops[mine & (labels == f"fwd/mb0/L1/{h}/{op}")] for h in "ab")
        assert fa[0] == fb[0] > 0
        da, db = (tbo.duration_ns[mine & (labels == f"fwd/mb0/L1/{h}/{op}")] for h in "ab")
        assert da[0] == db[0]
    for op in ("attn", "attn_dgrad"):
        da, db = (tbo.duration_ns[mine & (labels == f"{'fwd' if op == 'attn' else 'bwd'}/mb0/L1/{h}/{op}")]
                  for h in "ab")
        assert db[0] > da[0]
    # the projections are the same in both halves, so the attention ops differ by B's core minus A's:
    # 3/4 - 1/4 of the sequence's, twice that of a sequence of s/2 tokens
    spec = ParallelismSpec(**(PAR | par))
    half_seq = fl.layer_forward_flops(get_model("deepseek-v3", **(SHAPE | {"seq_length": 512})), spec)
    assert 4 * half_seq.core_flops == fl.layer_forward_flops(get_model("deepseek-v3", **SHAPE), spec).core_flops
    assert attn["b"][0] - attn["a"][0] == 2 * half_seq.core_flops


@pytest.mark.parametrize("kernel", ["deepep-high-throughput", "deepep-low-latency"])
def test_deepep_halves_route_their_own_tokens(kernel):
    """With DeepEP's kernels each half routes its own tokens (its own seed), so the messages follow two
    routings instead of one: the bytes sent over all ranks stay within 1 % of the plain trace's (the token
    copies are the same; those routed to the sender's own experts, and with the high-throughput kernels
    the per-node deduplication, vary with the routing), and the halves' routings differ."""
    plain, tbo = _trace("none", kernel), _trace("two_microbatch", kernel)
    check_trace(tbo)
    for what in ("moe_dispatch", "moe_combine"):
        a = sum(_sent_bytes(plain, r)[what] for r in range(plain.n_ranks))
        b = sum(_sent_bytes(tbo, r)[what] for r in range(tbo.n_ranks))
        assert b == pytest.approx(a, rel=0.01)
    labels = tbo.label_array().astype(str)
    sent = [tbo.bytes[(tbo.kind == OpKind.SEND) & (labels == f"fwd/mb0/L1/{h}/moe_dispatch_alltoall")]
            for h in "ab"]
    assert sent[0].sum() > 0 and sent[1].sum() > 0 and not np.array_equal(sent[0], sent[1])


def _sent_bytes(t, rank: int) -> dict[str, int]:
    """Bytes rank ``rank`` sends in EP ops of layer 1's forward, layer 2's backward, all dispatches and all
    combines, and in all its other ops."""
    mine = (t.rank == rank) & (t.kind != OpKind.RECV)
    ep = mine & (t.op_group_kind() == GroupKind.EP)
    labels = t.label_array().astype(str)
    out = {w: int(t.bytes[ep & (np.char.find(labels, w) >= 0)].sum())
           for w in ("fwd/mb0/L1/", "bwd/mb0/L2/", "moe_dispatch", "moe_combine")}
    out["other"] = int(t.bytes[mine & ~ep].sum())
    return out


@pytest.mark.parametrize("kernel, par", [("nccl", {}), ("deepep-high-throughput", {}),
                                         ("nccl", ONE_SEQUENCE), ("deepep-high-throughput", ONE_SEQUENCE)])
def test_overlap_hides_ep_communication_and_shortens_the_iteration(kernel, par, engine_ns):
    """Co-simulated on RoCE: the exposed EP communication (exposure split) falls by more than a quarter (NCCL's
    all-to-all: about 45 %, it outlasts the other half's compute; DeepEP's: about 80 %) and the iteration
    gets shorter, though each half's kernels run at half the tokens and so take more than half
    the time (the compute sum rises by the per-kernel launch and efficiency cost: checked here); with
    sequence halves and with the token halves of one sequence per micro-batch."""
    plain, tbo = _run("none", kernel, **par), _run("two_microbatch", kernel, **par)
    p, t = plain.summary, tbo.summary
    assert t["exposed_comm_ep_ns"] < 0.75 * p["exposed_comm_ep_ns"]
    assert t["iteration_time_ns"] < p["iteration_time_ns"]
    assert p["compute_time_ns"] < t["compute_time_ns"] < 1.2 * p["compute_time_ns"]


@pytest.mark.parametrize("recompute", [False, True])
def test_one_compute_stream_per_gpu(recompute, engine_ns):
    """On every rank, no two compute ops of the overlapped run overlap in time (the halves interleave on one
    compute stream; DeepEP's zero-length joins are bookkeeping, not kernels), and some dispatch or combine
    of one half is in flight while the other half computes."""
    rec = _run("two_microbatch", "deepep-high-throughput", recompute=recompute)
    o = rec.ops
    start, finish = np.asarray(o["start_ns"]), np.asarray(o["finish_ns"])
    kernel = (np.asarray(o["kind"]) == OpKind.COMPUTE) & (finish > start)
    send = (np.asarray(o["kind"]) == OpKind.SEND) & (np.asarray(o["group_kind"]) == GroupKind.EP)
    for r in range(rec.summary["n_ranks"]):
        mine = np.asarray(o["rank"]) == r
        order = np.argsort(start[kernel & mine], kind="stable")
        s, f = start[kernel & mine][order], finish[kernel & mine][order]
        assert s.size > 0 and np.all(s[1:] >= f[:-1])
        assert _overlap_ns(s, f, start[send & mine], finish[send & mine]) > 0


def _overlap_ns(s: np.ndarray, f: np.ndarray, send_start: np.ndarray, send_finish: np.ndarray) -> float:
    """Time the intervals [s, f) (disjoint) spend inside the union of [send_start, send_finish)."""
    order = np.argsort(send_start)
    merged: list[list[float]] = []
    for a, b in zip(send_start[order], send_finish[order]):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return float(sum(max(0.0, min(b, y) - max(a, x)) for a, b in zip(s, f) for x, y in merged))


def test_overlapped_compute_loses_deepeps_sm_share_while_it_sends(engine_ns):
    """DagExecutor::ExpertCommComputeSlowdown at its default (deepep_sms / sm_count = 20/132) against 0: on
    every rank the compute of the overlapped run takes ΔC longer, with ΔC at most the share times the time
    its compute spends beside its own DeepEP sends (a send op's span covers its transmission) and at least
    0.8 of it (the span also holds the last bytes' flight, when the GPU no longer sends)."""
    free = _run("two_microbatch", "deepep-high-throughput", {"DagExecutor::ExpertCommComputeSlowdown": "0"})
    held = _run("two_microbatch", "deepep-high-throughput")
    assert held.summary["iteration_time_ns"] > free.summary["iteration_time_ns"]
    for r in range(held.summary["n_ranks"]):
        spans = []
        for rec in (free, held):
            o = rec.ops
            start, finish = np.asarray(o["start_ns"]), np.asarray(o["finish_ns"])
            mine = np.asarray(o["rank"]) == r
            kernel = mine & (np.asarray(o["kind"]) == OpKind.COMPUTE) & (finish > start)
            send = mine & (np.asarray(o["kind"]) == OpKind.SEND) & (np.asarray(o["group_kind"]) == GroupKind.EP)
            spans.append((float((finish - start)[kernel].sum()),
                          _overlap_ns(start[kernel], finish[kernel], start[send], finish[send])))
        lost = spans[1][0] - spans[0][0]
        beside = spans[1][1]
        assert 0.8 * DEEPEP_SHARE * beside <= lost <= DEEPEP_SHARE * beside + 1.0


#: four micro-batches per iteration (b = 2, dp = 8): three forward-backward pairs
FOUR_MICROBATCHES = 64


@pytest.mark.parametrize("par", [{}, {"recompute": True}, dict(tp=2, sequence_parallel=True)])
@pytest.mark.parametrize("kernel", ["nccl", "deepep-high-throughput"])
def test_forward_backward_pairs_reorder_the_same_ops(par, kernel):
    """DualPipe's chunk pairing only reorders: per rank the paired trace has the plain trace's ops, each
    label with the same FLOPs and bytes (DeepEP's routing too: it is drawn per layer, micro-batch and
    group), and is valid; the forward of micro-batch i + 1 and the backward of micro-batch i interleave on
    the compute stream (a backward compute of mb 0 lies between the first and last forward compute of
    mb 1), and the first forward and last backward run alone."""
    plain = _trace("none", kernel, **(par | {"global_batch_size": FOUR_MICROBATCHES}))
    paired = _trace("forward_backward", kernel, **(par | {"global_batch_size": FOUR_MICROBATCHES}))
    check_trace(paired)
    for r in range(plain.n_ranks):
        a, b = (_by_label(t, r) for t in (plain, paired))
        assert a == b and len(a) > 0
    labels = paired.label_array().astype(str)
    mine = np.flatnonzero((paired.rank == 0) & (paired.kind == OpKind.COMPUTE))
    order = {str(lab): i for i, lab in enumerate(labels[mine])}
    fwd1 = [i for lab, i in order.items() if lab.startswith("fwd/mb1/")]
    bwd0 = [i for lab, i in order.items() if lab.startswith("bwd/mb0/")]
    assert min(fwd1) < min(bwd0) < max(fwd1) and min(fwd1) < max(bwd0)
    fwd0 = [i for lab, i in order.items() if lab.startswith("fwd/mb0/")]
    bwd3 = [i for lab, i in order.items() if lab.startswith("bwd/mb3/")]
    assert max(fwd0) < min(fwd1) and min(bwd3) > max(i for lab, i in order.items() if lab.startswith("fwd/"))


def _by_label(t, rank: int) -> dict[str, tuple[int, int, int]]:
    """Per label of rank ``rank``'s ops (sends, collectives and computes): count, FLOPs and bytes."""
    mine = (t.rank == rank) & (t.kind != OpKind.RECV)
    labels = t.label_array().astype(str)[mine]
    out: dict[str, tuple[int, int, int]] = {}
    for lab, f, b in zip(labels.tolist(), t.flops[mine].tolist(), t.bytes[mine].tolist()):
        n, f0, b0 = out.get(lab, (0, 0, 0))
        out[lab] = (n + 1, f0 + f, b0 + b)
    return out


@pytest.mark.parametrize("kernel", ["nccl", "deepep-high-throughput"])
def test_forward_backward_pairs_hide_ep_communication(kernel, engine_ns):
    """Co-simulated on RoCE with four micro-batches: pairing each forward with the previous micro-batch's
    backward hides part of the EP all-to-all time (the exposed EP time falls by more than a fifth; the first
    forward and the last backward stay unpaired) and shortens the iteration; with NCCL's all-to-alls the
    compute time is unchanged (the same kernels at the same sizes), with DeepEP's it grows by the SM share
    its sends hold while they overlap compute (under 10 % here)."""
    plain = _run("none", kernel, global_batch_size=FOUR_MICROBATCHES)
    paired = _run("forward_backward", kernel, global_batch_size=FOUR_MICROBATCHES)
    p, t = plain.summary, paired.summary
    assert t["exposed_comm_ep_ns"] < 0.8 * p["exposed_comm_ep_ns"]
    assert t["iteration_time_ns"] < p["iteration_time_ns"]
    if kernel == "nccl":
        assert t["compute_time_ns"] == p["compute_time_ns"]
    else:
        assert p["compute_time_ns"] <= t["compute_time_ns"] < 1.1 * p["compute_time_ns"]


@pytest.mark.parametrize("fields, model, shape, problem", [
    (dict(moe_overlap="three_microbatch"), "deepseek-v3", {}, "unknown schedule"),
    (dict(moe_overlap="two_microbatch", cp=2, dp=4, ep=4), "deepseek-v3", {}, "cp=2"),
    (dict(moe_overlap="two_microbatch", ep=1), "llama3-8b", {}, "no MoE layer"),
    (dict(moe_overlap="two_microbatch", tp=2, sequence_parallel=True) | ONE_SEQUENCE, "deepseek-v3",
     {"seq_length": 1026}, "two halves divisible by tp=2"),
    (dict(moe_overlap="forward_backward", pp=2, dp=4, ep=4), "deepseek-v3", {"num_layers": 4},
     "bidirectional pipeline"),
    (dict(moe_overlap="forward_backward", global_batch_size=16), "deepseek-v3", {}, "1 micro-batch"),
    (dict(moe_overlap="forward_backward", zero_stage=3, global_batch_size=32), "deepseek-v3", {}, "ZeRO-3"),
    (dict(moe_overlap="forward_backward", ep=1, global_batch_size=32), "llama3-8b", {}, "no MoE layer"),
])
def test_bad_overlap_names_its_field(fields, model, shape, problem):
    with pytest.raises(CosimInputError) as err:
        par = ParallelismSpec(**(PAR | fields))
        build_trace(get_model(model, **({} if model != "deepseek-v3" else SHAPE | shape)), par,
                    get_hardware("h100"))
    assert err.value.field == "parallelism.moe_overlap" and problem in str(err.value)
