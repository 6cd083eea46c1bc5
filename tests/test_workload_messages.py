"""Message sizes, op counts, FLOPs and dependencies of built traces against the published formulas."""

from __future__ import annotations

import re

import numpy as np
import pytest

from cosim.workload import sizes as sz
from cosim.workload.builder import build_trace
from cosim.workload.flops import gpt_flops_formula, model_flops_per_iteration
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model, norm_params, total_params
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import CollKind, GroupKind, OpKind, Phase
from cosim.workload.validate import check_trace


def build(model="llama2-7b", gpu="h100", model_over=None, **par):
    m = get_model(model, **(model_over or {}))
    p = ParallelismSpec(**par)
    tr = build_trace(m, p, get_hardware(gpu))
    check_trace(tr)
    return m, p, tr


def select(tr, pattern, rank=None):
    """Op indices whose label matches the regex ``pattern`` (optionally on one rank)."""
    rx = re.compile(pattern)
    hit = np.array([bool(rx.search(s)) for s in tr.labels])
    sel = hit[tr.label]
    if rank is not None:
        sel &= tr.rank == rank
    return np.flatnonzero(sel)


def test_tp_allreduce_size_h5120_s2048_b1():
    m, p, tr = build("llama2-13b", model_over=dict(num_layers=2, seq_length=2048), tp=2, global_batch_size=1)
    ops = select(tr, r"^fwd/mb0/L0/attn_tp_allreduce$", rank=0)
    assert ops.size == 1
    assert tr.bytes[ops[0]] == 20_971_520 == 2 * 1 * 2048 * 5120
    assert tr.coll_kind[ops[0]] == CollKind.ALL_REDUCE
    assert tr.group_kind[tr.group[ops[0]]] == GroupKind.TP


def test_two_tp_allreduces_per_layer_forward_and_two_backward():
    m, p, tr = build(model_over=dict(num_layers=4), tp=4, pp=2, global_batch_size=3)
    layers_local = 2
    for phase in ("fwd", "bwd"):
        ops = select(tr, rf"^{phase}/mb\d+/L\d+/\w+_tp_allreduce$", rank=0)
        assert ops.size == 2 * layers_local * p.num_microbatches
        assert np.all(tr.bytes[ops] == 2 * 1 * 4096 * 4096)


def test_sequence_parallel_replaces_allreduce_with_reducescatter_and_allgather():
    m, p, tr = build(model_over=dict(num_layers=2), tp=4, sequence_parallel=True, global_batch_size=2)
    layer_ops = select(tr, r"/L\d+/", rank=0)
    assert not np.any(tr.coll_kind[layer_ops] == CollKind.ALL_REDUCE)
    for phase in ("fwd", "bwd"):
        rs = select(tr, rf"^{phase}/mb\d+/L\d+/\w+_tp_reducescatter$", rank=0)
        ag = select(tr, rf"^{phase}/mb\d+/L\d+/\w+_tp_allgather$", rank=0)
        assert rs.size == ag.size == 2 * 2 * 2  # 2 per layer, 2 layers, 2 micro-batches
        assert np.all(tr.bytes[rs] == sz.tp_activation_bytes(m, p)) and np.all(tr.bytes[ag] == 2 * 4096 * 4096)


@pytest.mark.parametrize("sp", [False, True])
def test_pp_send_recv_size_and_count(sp):
    m, p, tr = build(model_over=dict(num_layers=4), tp=2, pp=4, sequence_parallel=sp, global_batch_size=8)
    sends = np.flatnonzero(tr.kind == OpKind.SEND)
    expected = 2 * 1 * 4096 * 4096 // 2  # 2·b·s·h/t: each TP rank sends its slice (Megatron scatter/gather)
    assert np.all(tr.bytes[sends] == expected)
    # 3 boundaries × 8 micro-batches × 2 directions × 2 TP ranks
    assert sends.size == 3 * 8 * 2 * 2
    assert np.all(tr.group_kind[tr.group[sends]] == GroupKind.PP)
    # without SP the receiving stage rebuilds the full 2·b·s·h over TP (NVLink), once per RECV
    gathers = select(tr, r"/vs\d+/pp_allgather$")
    recvs = np.flatnonzero(tr.kind == OpKind.RECV)
    assert gathers.size == (0 if sp else recvs.size)
    assert np.all(tr.bytes[gathers] == 2 * 4096 * 4096) and np.all(tr.coll_kind[gathers] == CollKind.ALL_GATHER)
    assert all(tr.deps(int(g)).tolist() == [int(g) - 1] and tr.kind[g - 1] == OpKind.RECV for g in gathers)


@pytest.mark.parametrize("zero", [0, 1])
def test_dp_gradient_bytes_are_4P_over_tp(zero):
    m, p, tr = build(model_over=dict(num_layers=4), tp=2, pp=2, dp=2, zero_stage=zero, global_batch_size=4)
    t = 2
    kind = CollKind.ALL_REDUCE if zero == 0 else CollKind.REDUCE_SCATTER
    dp = (tr.kind == OpKind.COLLECTIVE) & (tr.phase == Phase.GRAD_SYNC) & (tr.coll_kind == kind)
    dp &= tr.op_group_kind() == GroupKind.DP
    per_rank = np.bincount(tr.rank[dp], weights=tr.bytes[dp], minlength=tr.n_ranks)
    # exact: Σ over the stages of one TP rank = 4·(sharded/t + TP-replicated norms)
    replicated = (2 * m.num_layers + 1) * norm_params(m)
    stage_params = tr.spec_dict()["derived"]["params_per_gpu_by_stage"]  # rank 0: stage 0, rank 2: stage 1
    assert per_rank[0] == 4 * stage_params[0] and per_rank[2] == 4 * stage_params[1]
    assert per_rank[0] + per_rank[2] == 4 * ((total_params(m) - replicated) // t + replicated)
    # and each stage is close to Megatron's 4·P/(t·p)
    assert per_rank[0] == pytest.approx(4 * total_params(m) / (t * 2), rel=0.05)
    if zero == 1:
        ag = (tr.coll_kind == CollKind.ALL_GATHER) & (tr.phase == Phase.OPTIMIZER)
        ag_rank = np.bincount(tr.rank[ag], weights=tr.bytes[ag], minlength=tr.n_ranks)
        assert np.array_equal(2 * per_rank, 4 * ag_rank)  # all-gather 2·P/(t·p) vs reduce-scatter 4·P/(t·p)


def test_distributed_optimizer_formula_on_balanced_config():
    # no embedding/head imbalance: check 4·P_local and 2·P_local per bucket sum exactly
    m, p, tr = build(model_over=dict(num_layers=2), dp=4, zero_stage=1, global_batch_size=4)
    rs = select(tr, r"dp_reducescatter$", rank=0)
    ag = select(tr, r"dp_allgather$", rank=0)
    assert tr.bytes[rs].sum() == 4 * total_params(m) and tr.bytes[ag].sum() == 2 * total_params(m)
    assert np.array_equal(tr.bytes[rs], 2 * tr.bytes[ag])


def test_dp_buckets_overlap_backward():
    m, p, tr = build(model_over=dict(num_layers=4), dp=2, dp_bucket_bytes=1, global_batch_size=2)
    buckets = select(tr, r"^grad/.*dp_allreduce$", rank=0)
    assert buckets.size == 4 + 2  # one per layer (bucket size 1 B) + embedding + head
    last_bwd = select(tr, r"^bwd/", rank=0).max()
    first = buckets[0]
    assert first < last_bwd  # issued while backward compute remains
    deps = tr.deps(first)
    compute_deps = [d for d in deps if tr.kind[d] == OpKind.COMPUTE]
    assert compute_deps and all("wgrad" in tr.label_of(d) for d in compute_deps)
    assert all(tr.microbatch[d] == p.num_microbatches - 1 for d in compute_deps)
    opt = select(tr, r"^opt/step$", rank=0)[0]
    assert set(buckets) <= set(tr.deps(opt).tolist())
    assert tr.duration_ns[opt] > 0 and tr.kind[opt] == OpKind.COMPUTE


@pytest.mark.parametrize("par", [
    dict(tp=2, pp=2, dp=2, global_batch_size=8),
    dict(tp=2, cp=2, pp=2, global_batch_size=4),
    dict(pp=2, vpp=2, dp=2, global_batch_size=8, recompute=False),
])
def test_model_flops_equal_megatron_formula_for_gpt(par):
    m, p, tr = build("gpt3-175b", model_over=dict(num_layers=4, seq_length=1024), **par)
    B, s, l, h, V = p.global_batch_size, m.seq_length, m.num_layers, m.hidden_size, m.vocab_size
    exact = 72 * B * s * l * h * h + 12 * B * s * s * l * h + 6 * B * s * h * V  # 72Bslh²(1 + s/6h + V/12lh)
    compute = tr.kind == OpKind.COMPUTE
    assert int(tr.flops[compute].sum()) == exact == model_flops_per_iteration(m, B)
    assert exact == pytest.approx(gpt_flops_formula(m, B), rel=1e-12)


def test_recomputation_adds_one_forward_per_layer():
    base = build("gpt3-175b", model_over=dict(num_layers=2, seq_length=512), tp=2, global_batch_size=2)[2]
    m, p, rec = build("gpt3-175b", model_over=dict(num_layers=2, seq_length=512), tp=2, global_batch_size=2,
                      recompute=True)
    s, h = m.seq_length, m.hidden_size
    fwd_layers = 2 * (24 * s * h * h + 4 * s * s * h)  # per sequence, without the logits
    assert int(rec.flops.sum()) - int(base.flops.sum()) == 2 * fwd_layers
    recomputed_ar = select(rec, r"recompute_\w+_tp_allreduce$", rank=0)
    assert recomputed_ar.size == 2 * 2 * 2 and np.all(rec.phase[recomputed_ar] == Phase.BACKWARD)


def test_compute_durations_are_the_sums_of_their_kernels():
    """Every compute op lasts the predicted time of its kernels (cosim.workload.kernels), never 0."""
    from cosim.workload.compute import kernels_ns
    from cosim.workload.kernels import block_kernels

    m, p, tr = build(model_over=dict(num_layers=2), gpu="a100", tp=2, global_batch_size=1)
    hw = get_hardware("a100")
    blocks = {name: kernels_ns(hw, ks) for name, ks in block_kernels(m, p).items()}
    comp = np.flatnonzero((tr.kind == OpKind.COMPUTE) & (tr.phase != Phase.OPTIMIZER))
    for i in comp:
        block = tr.label_of(int(i)).rsplit("/", 1)[1].removeprefix("recompute_")
        assert tr.duration_ns[i] == blocks[block], tr.label_of(int(i))
    assert np.all(tr.duration_ns[tr.kind == OpKind.COMPUTE] > 0)


def test_moe_all_to_all_dispatch_and_combine():
    m, p, tr = build("mixtral-8x7b", model_over=dict(num_layers=2), tp=2, sequence_parallel=True, dp=4, ep=4,
                     global_batch_size=4)
    for phase in ("fwd", "bwd"):
        a2a = select(tr, rf"^{phase}/mb0/L0/moe_\w+_alltoall$", rank=0)
        assert a2a.size == 2
        assert np.all(tr.bytes[a2a] == 2 * 1 * 4096 // 2 * 2 * 4096)  # 2·b·s/t·k·h
        assert np.all(tr.group_kind[tr.group[a2a]] == GroupKind.EP)
        tp_moe = select(tr, rf"^{phase}/mb0/L0/moe_tp_\w+$", rank=0)
        assert tp_moe.size == 2 and np.all(tr.bytes[tp_moe] == 2 * 4096 * 2 * 4096)
    members = tr.group_members(tr.group[select(tr, r"moe_dispatch_alltoall$", rank=0)[0]])
    assert members.tolist() == [0, 2, 4, 6]  # EP = consecutive DP ranks of the same TP rank


def test_context_parallel_ring_sends():
    m, p, tr = build("llama2-70b", model_over=dict(num_layers=2, seq_length=8192), tp=8, cp=4,
                     global_batch_size=1)
    kv = 2 * 2 * 1 * (8192 // 4) * 8 * 128 // 8  # 2 (K,V) · 2 B · b · s/cp · kv_heads·d / t
    fwd = select(tr, r"^fwd/mb0/L0/cp_send_kv_s\d$", rank=0)
    bwd = select(tr, r"^bwd/mb0/L0/cp_send_kvgrad_s\d$", rank=0)
    assert fwd.size == bwd.size == 3  # cp - 1 ring steps
    assert np.all(tr.bytes[fwd] == kv) and np.all(tr.bytes[bwd] == 2 * kv)
    assert np.all(tr.peer[fwd] == 8)  # next CP rank (TP ranks are 0..7)
    tp_ar = select(tr, r"^fwd/mb0/L0/attn_tp_allreduce$", rank=0)
    assert tr.bytes[tp_ar[0]] == 2 * 1 * (8192 // 4) * 8192  # local sequence s/cp


def test_zero3_gathers_and_scatters_every_layer_and_micro_batch():
    m, p, tr = build(model_over=dict(num_layers=2), dp=4, zero_stage=3, global_batch_size=8)
    layer = sz.layer_unit_params(m, p).dense
    for pattern, nbytes in ((r"^fwd/mb\d/L\d/zero3_allgather$", 2 * layer), (r"^bwd/mb\d/L\d/zero3_allgather$",
                            2 * layer), (r"^bwd/mb\d/L\d/zero3_reducescatter$", 4 * layer)):
        ops = select(tr, pattern, rank=0)
        assert ops.size == 2 * 2 and np.all(tr.bytes[ops] == nbytes)
    assert select(tr, r"^grad/", rank=0).size == 0  # no buckets with ZeRO-3


def test_tied_embeddings_synchronised_between_first_and_last_stage():
    m, p, tr = build("gpt3-175b", model_over=dict(num_layers=4, seq_length=256), tp=2, pp=4, global_batch_size=4)
    emb = select(tr, r"^grad/embd_allreduce$")
    assert emb.size == 4  # 2 TP ranks × (first + last stage)
    assert np.all(tr.bytes[emb] == 4 * m.vocab_size * m.hidden_size // 2)
    assert sorted(set(tr.rank[emb].tolist())) == [0, 1, 6, 7]


def test_sequence_parallel_replicated_grads_allreduce():
    # GPT-3 shape: 2 layernorms (2h each) and 2 row-parallel biases (h each) per layer + the final layernorm;
    # the learned position embedding is not all-reduced (its grads are complete on every TP rank)
    m, p, tr = build("gpt3-175b", model_over=dict(num_layers=2, seq_length=256), tp=2, sequence_parallel=True,
                     global_batch_size=1)
    h = m.hidden_size
    ar = select(tr, r"^grad/tp_replicated_allreduce$", rank=0)
    assert ar.size == 1 and tr.bytes[ar[0]] == 4 * (2 * (2 * 2 * h + 2 * h) + 2 * h)
