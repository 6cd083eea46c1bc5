"""Mixture-of-experts presets at production shape: parameters and FLOPs against the published totals,
multi-head latent attention, shared experts, leading dense layers, FP8 dispatch sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosim.errors import CosimInputError
from cosim.workload import flops as fl
from cosim.workload import sizes as sz
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import (
    active_params,
    get_model,
    layer_params,
    mla_params,
    mtp_params,
    total_params,
)
from cosim.workload.parallelism import ParallelismSpec


@pytest.mark.parametrize("name, total, active", [
    ("deepseek-v3", 671e9, 37e9),  # technical report, without the 14B MTP module
    ("mixtral-8x22b", 141e9, 39e9),  # Mistral AI model card
    ("qwen3-235b-a22b", 235e9, 22e9),  # Qwen3 model card
])
def test_moe_presets_match_published_total_and_active_parameters(name, total, active):
    """Total and per-token active parameters are within 2 % of what each model's authors publish."""
    m = get_model(name)
    assert total_params(m) == pytest.approx(total, rel=0.02)
    assert active_params(m) == pytest.approx(active, rel=0.02)


def test_deepseek_v3_mla_and_mtp_parameters_by_hand():
    """MLA's projections counted by hand from the released config; one MTP module adds an MoE layer plus its
    2h×h projection and two norms, which with the checkpoint's copies of embedding and head gives 685B."""
    m = get_model("deepseek-v3")
    h, r_q, r_kv, heads = 7168, 1536, 512, 128
    hand = (h * r_q + r_q + r_q * heads * (128 + 64)  # query: down, norm, up
            + h * (r_kv + 64) + r_kv + r_kv * heads * (128 + 128)  # latent KV + shared rope key, norm, up
            + heads * 128 * h)  # output
    assert mla_params(m) == hand
    mtp = get_model("deepseek-v3", mtp_layers=1)
    assert total_params(mtp) - total_params(m) == mtp_params(m) == layer_params(m) + 2 * h * h + 2 * h
    copies = 2 * m.vocab_size * h  # the released checkpoint stores the MTP's embedding and head again
    assert total_params(mtp) + copies == pytest.approx(685e9, rel=0.01)


def test_dense_leading_layers_and_shared_expert_counts():
    """DeepSeek-V3: 3 dense layers of FFN 18432, 58 MoE layers of 257 experts (256 routed + 1 shared)."""
    m = get_model("deepseek-v3")
    assert (m.num_moe_layers, m.is_moe_layer(2), m.is_moe_layer(3)) == (58, False, True)
    expert = 3 * 7168 * 2048
    assert layer_params(m, moe=True) - layer_params(m, moe=False) == 257 * expert + 256 * 7168 - 3 * 7168 * 18432


def test_moe_flops_count_shared_and_routed_experts_and_mla():
    """Per-layer forward FLOPs: experts 2·n·(k + shared)·h·3f_e; MLA as its projections plus the core."""
    m = get_model("deepseek-v3", seq_length=1024)
    par = ParallelismSpec(tp=1, dp=1)
    n, h = 1024, 7168
    lf = fl.layer_forward_flops(m, par)
    assert lf.experts_flops == 2 * n * 9 * h * 3 * 2048
    assert lf.router_flops == 2 * n * h * 256
    qkv = 2 * n * (h * 1536 + h * 576 + 1536 * 128 * 192 + 512 * 128 * 256)
    assert (lf.qkv_flops, lf.core_flops, lf.oproj_flops) == (qkv, 2 * n * n * 128 * (192 + 128), 2 * n * 128 * 128 * h)
    dense = fl.layer_forward_flops(m, par, moe=False)
    assert dense.mlp_flops == 2 * n * h * 3 * 18432 and dense.experts_flops == 0
    # 6·N per token: model FLOPs are 3 × forward, about 6 × active parameters per token plus attention
    per_token = fl.model_flops_per_iteration(m, 1) / m.seq_length
    assert 6 * active_params(m) < per_token < 6 * active_params(m) * 1.3


def test_qwen3_explicit_head_size_widens_the_query():
    """Qwen3-235B: 64 query heads of 128 make q 8192 wide on a 4096 model; K and V are 4 heads of 128."""
    m = get_model("qwen3-235b-a22b")
    assert (m.head_dim, m.q_size, m.kv_size) == (128, 8192, 512)
    lf = fl.layer_forward_flops(m, ParallelismSpec())
    n = m.seq_length
    assert lf.qkv_flops == 2 * n * 4096 * (8192 + 2 * 512) and lf.oproj_flops == 2 * n * 8192 * 4096


@pytest.mark.parametrize("fields, match", [
    (dict(kv_lora_rank=512), "qk_nope_head_dim"),
    (dict(q_lora_rank=64), "latent attention"),
    (dict(first_dense_layers=61), "no MoE layer"),
    (dict(gemm_precision="fp4"), "gemm_precision"),
    (dict(moe_dispatch_dtype="int8"), "moe_dispatch_dtype"),
    (dict(num_shared_experts=-1), "non-negative"),
])
def test_new_model_fields_are_validated(fields, match):
    """Each new field's bad value names the field."""
    base = "llama2-7b" if "kv_lora_rank" in fields or "q_lora_rank" in fields else "deepseek-v3"
    with pytest.raises(CosimInputError, match=match):
        get_model(base, **fields)


def test_fp8_dispatch_is_one_byte_per_element_plus_a_scale_per_128():
    """FP8 dispatch: h + 4·h/128 bytes per routed token copy; combine stays bf16 (2·h)."""
    m = get_model("deepseek-v3", moe_dispatch_dtype="fp8")
    assert sz.moe_token_bytes(m, fp8=True) == 7168 + 4 * 56
    par = ParallelismSpec(dp=8, ep=8)
    assert sz.moe_dispatch_bytes(m, par, forward_dispatch=True) * 2 * 7168 == \
        sz.moe_dispatch_bytes(m, par) * (7168 + 224)


def test_tiny_deepseek_shaped_trace_has_dense_then_moe_layers():
    """Two layers (one dense, one MoE): the dense layer has no all-to-all; the MoE layer's forward dispatch
    is FP8-sized and its combine bf16-sized, 8 routed copies per token."""
    m = get_model("deepseek-v3", num_layers=2, first_dense_layers=1, seq_length=512, moe_dispatch_dtype="fp8")
    par = ParallelismSpec(dp=4, ep=4, global_batch_size=4)
    t = build_trace(m, par, get_hardware("h100"))
    labels = np.asarray(t.labels)[t.label].astype(str)
    a2a = np.char.find(labels, "alltoall") >= 0
    assert not np.any(a2a & (t.layer == 0)) and np.any(a2a & (t.layer == 1))
    fwd_dispatch = np.char.find(labels, "fwd/mb0/L1/moe_dispatch") >= 0
    fwd_combine = np.char.find(labels, "fwd/mb0/L1/moe_combine") >= 0
    assert set(t.bytes[fwd_dispatch]) == {512 * 8 * (7168 + 224)}
    assert set(t.bytes[fwd_combine]) == {512 * 8 * 2 * 7168}
    derived = json.loads(t.specs)["derived"]
    assert derived["total_params"] == total_params(m)


@pytest.mark.parametrize("gpu, bf16_tflops, fp8_tflops", [("h100", 989, 1979), ("h200", 989, 1979),
                                                         ("b200", 2250, 4500)])
@pytest.mark.parametrize("recipe, overhead_field", [("fp8-tensor", "fp8_tensor_scaling_overhead"),
                                                    ("fp8-block", "fp8_block_scaling_overhead")])
def test_fp8_gemm_time_ratio_is_the_datasheet_ratio_over_the_scaling_overhead(gpu, bf16_tflops, fp8_tflops, recipe,
                                                                              overhead_field):
    """A large compute-bound GEMM runs (FP8 peak / bf16 peak) / (1 + overhead) times faster in FP8 (within 1 %:
    the memory roofline still adds a little); a small one gains less (memory-bound, launch)."""
    from cosim.workload.compute import Gemm, kernel_ns

    hw = get_hardware(gpu)
    big = (16384, 16384, 16384)
    ratio = kernel_ns(hw, Gemm(*big)) / kernel_ns(hw, Gemm(*big, 1, recipe))
    assert ratio == pytest.approx(fp8_tflops / bf16_tflops / (1 + getattr(hw, overhead_field)), rel=0.01)
    small = (256, 1024, 1024)
    assert kernel_ns(hw, Gemm(*small)) / kernel_ns(hw, Gemm(*small, 1, recipe)) < ratio


def test_fp8_training_shortens_the_linear_layers_only_and_needs_fp8_tensor_cores():
    """FP8 GEMMs shorten the experts and attention blocks but not the logits (kept in bf16); an A100 has no
    FP8 tensor cores: a one-line error naming the field."""
    from cosim.workload import kernels as kn
    from cosim.workload.compute import kernels_ns

    hw = get_hardware("h100")
    par = ParallelismSpec(dp=4, ep=4)
    bf16 = get_model("deepseek-v3", num_layers=2, first_dense_layers=1, seq_length=2048)
    fp8 = bf16.with_overrides(gemm_precision="fp8-block")
    t16 = {k: kernels_ns(hw, v) for k, v in kn.block_kernels(bf16, par).items()}
    t8 = {k: kernels_ns(hw, v) for k, v in kn.block_kernels(fp8, par).items()}
    for block in ("attn", "attn_dgrad", "experts", "experts_wgrad", "mlp"):
        assert t8[block] < t16[block], block
    assert t8["logits"] == t16["logits"] and t8["router"] == t16["router"]
    with pytest.raises(CosimInputError, match="no FP8 tensor cores"):
        build_trace(fp8, par, get_hardware("a100"))


@pytest.mark.parametrize("transport, parallelism", [
    ("roce", dict(dp=4, ep=4, global_batch_size=4)),
    ("ib", dict(tp=2, dp=2, ep=4, expert_tp=1, sequence_parallel=True, global_batch_size=2)),
])
def test_tiny_deepseek_shaped_training_iteration_runs_lossless_in_ns3(transport, parallelism, engine_ns):
    """A DeepSeek-V3-shaped iteration cut to one dense and one MoE layer (MLA, 256 experts top-8 + 1 shared,
    FP8 GEMMs and dispatch, h=1024) on EP4 over 2 servers (EP carved out of DP, or folded over TP2 × DP2):
    it completes, every flow delivers all its bytes, nothing is dropped, and the EP all-to-alls ran."""
    from cosim.run import run
    from cosim.spec import make

    overrides = dict(num_layers=2, first_dense_layers=1, seq_length=256, hidden_size=1024, moe_dispatch_dtype="fp8",
                     gemm_precision="fp8-block")
    exp = make("training", transport=transport, topology="single-switch", gpus_per_server=2,
               **{"workload.model": "deepseek-v3", "workload.model_overrides": overrides,
                  "workload.parallelism": parallelism})
    rec = run(exp)
    s, f = rec.summary, rec.flows
    assert s["status"] == "complete" and s["drops"] == 0
    assert np.array_equal(f["delivered_bytes"], f["size_bytes"]) and f["size_bytes"].size > 0
    assert s["coll_ep_all_to_all_count"] > 0


def test_expert_parallelism_folded_over_tensor_parallel_ranks():
    """expert_tp=1 with tp=2, dp=4: EP8 takes all 8 ranks of the stage (attention TP pairs included), the
    experts are whole (not TP-split) and the MoE layer has no TP all-gather / reduce-scatter; the default
    carves EP4 out of DP (every other rank) and gathers the routed tokens over TP. Same expert parameters per
    GPU either way (256/8 whole experts = 256/4 halves)."""
    from cosim.workload.layout import make_layout
    from cosim.workload.trace import GroupKind

    m = get_model("deepseek-v3", num_layers=2, first_dense_layers=1, seq_length=512)
    carved = ParallelismSpec(tp=2, dp=4, ep=4, sequence_parallel=True, global_batch_size=4)
    folded = ParallelismSpec(tp=2, dp=4, ep=8, expert_tp=1, sequence_parallel=True, global_batch_size=4)
    assert (carved.edp, folded.edp) == (1, 1)

    def ep_groups(par):
        lay = make_layout(par)
        return [lay.group_ranks[lay.group_ptr[g]:lay.group_ptr[g + 1]].tolist()
                for g in np.flatnonzero(lay.group_kind == GroupKind.EP)]

    assert ep_groups(carved) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert ep_groups(folded) == [list(range(8))]
    hw = get_hardware("h100")
    traces = {name: build_trace(m, par, hw) for name, par in (("carved", carved), ("folded", folded))}
    for name, t in traces.items():
        labels = np.asarray(t.labels)[t.label].astype(str)
        gathers = np.count_nonzero(np.char.find(labels, "moe_tp_allgather") >= 0)
        assert (gathers == 0) == (name == "folded"), name
        dispatch = np.char.find(labels, "fwd/mb0/L1/moe_dispatch") >= 0
        assert set(t.bytes[dispatch]) == {512 // 2 * 8 * 2 * 7168}  # each rank's sequence shard, top-8, bf16
    assert sz.layer_unit_params(m, carved).expert == sz.layer_unit_params(m, folded).expert
    # without TP, expert_tp=1 folds EP over the context-parallel ranks: EP8 over CP2 × DP4
    assert ep_groups(ParallelismSpec(cp=2, dp=4, ep=8, expert_tp=1, global_batch_size=4)) == [list(range(8))]
    with pytest.raises(CosimInputError, match="expert_tp"):
        ParallelismSpec(tp=4, dp=2, expert_tp=2)
    with pytest.raises(CosimInputError, match="tp·cp·dp"):
        ParallelismSpec(tp=2, dp=4, ep=16, expert_tp=1)
