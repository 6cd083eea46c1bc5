"""The per-operator compute model against measured kernel times, and its physics (monotonic, backward ≈ 2×
forward, nothing free), on the shipped presets."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from cosim.workload import kernels as kn
from cosim.workload.builder import build_trace
from cosim.workload.compute import (
    Attention,
    Gemm,
    Stream,
    attention_efficiency,
    gemm_coefficients,
    gemm_time_ns,
    kernel_ns,
    kernels_ns,
)
from cosim.workload.hardware import CALIBRATION_DIR, get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import OpKind

LLAMA2_7B = dict(h=4096, heads=32, kv_heads=32, f=11008)
LLAMA2_70B = dict(h=8192, heads=64, kv_heads=8, f=28672)

# Measured medians (ms) from microsoft/vidur commit 7d47513 (MIT), data/ compute profiles, mlp.csv:
#   h100/Llama-2-7b-hf line 2 (num_tokens 4096, TP 1)    h100/Llama-2-70b-hf line 785 (4096, TP 8)
#   a100/Llama-2-7b-hf line 328 (2048, TP 2)             a100/Llama-2-70b-hf line 524 (4096, TP 4)
MEASURED = [
    ("h100", LLAMA2_7B, 4096, 1, {"attn_pre_proj": 0.584, "attn_post_proj": 0.193, "mlp_up_proj": 0.987,
                                  "mlp_down_proj": 0.441, "input_layernorm": 0.0665, "attn_rope": 0.0835,
                                  "mlp_act": 0.139, "add": 0.031, "emb": 0.119}),
    ("h100", LLAMA2_70B, 4096, 8, {"attn_pre_proj": 0.1505, "attn_post_proj": 0.094, "mlp_up_proj": 0.643,
                                   "mlp_down_proj": 0.296, "input_layernorm": 0.112, "attn_rope": 0.016,
                                   "mlp_act": 0.052, "add": 0.063, "emb": 0.203}),
    ("a100", LLAMA2_7B, 2048, 2, {"attn_pre_proj": 0.438, "attn_post_proj": 0.1535, "mlp_up_proj": 0.803,
                                  "mlp_down_proj": 0.4545, "input_layernorm": 0.042, "attn_rope": 0.0365,
                                  "mlp_act": 0.071, "add": 0.025, "emb": 0.112}),
    ("a100", LLAMA2_70B, 4096, 4, {"attn_pre_proj": 0.6845, "attn_post_proj": 0.716, "mlp_up_proj": 3.835,
                                   "mlp_down_proj": 1.981, "input_layernorm": 0.185, "attn_rope": 0.044,
                                   "mlp_act": 0.169, "add": 0.112, "emb": 0.414}),
]


def profiled_kernel(op: str, shape: dict, n: int, t: int):
    """The compute-model kernel of one profiled op (shapes as in cosim.workload.calibrate)."""
    h, f = shape["h"], shape["f"]
    kv = shape["kv_heads"] * h // shape["heads"]
    return {"attn_pre_proj": Gemm(n, (h + 2 * kv) // t, h), "attn_post_proj": Gemm(n, h, h // t),
            "mlp_up_proj": Gemm(n, 2 * f // t, h), "mlp_down_proj": Gemm(n, h, f // t),
            "input_layernorm": Stream("norm", kn.NORM_FWD * n * h),
            "attn_rope": Stream("rope", kn.ROPE_FWD * n * (h + kv) // t),
            "mlp_act": Stream("activation", 6 * n * f // t), "add": Stream("elementwise", kn.ADD_FWD * n * h),
            "emb": Stream("embedding", kn.EMBED_FWD * n * h)}[op]


def shipped_errors(gpu: str) -> dict:
    with open(CALIBRATION_DIR / f"{gpu}.toml", "rb") as fh:
        return tomllib.load(fh)["provenance"]["error"]


@pytest.mark.parametrize("gpu, shape, n, t, measured", MEASURED,
                         ids=[f"{g}-h{s['h']}-n{n}-tp{t}" for g, s, n, t, _ in MEASURED])
def test_predicted_kernel_times_match_measured_rows_within_the_reported_error(gpu, shape, n, t, measured):
    """Each op's prediction is within the in-sample error the shipped coefficients report for it (max over
    training-sized rows, num_tokens ≥ 1024)."""
    hw = get_hardware(gpu)
    errors = shipped_errors(gpu)
    for op, ms in measured.items():
        predicted_ns = kernel_ns(hw, profiled_kernel(op, shape, n, t))
        rel = abs(predicted_ns / (ms * 1e6) - 1)
        assert rel <= errors[op]["max_large"] + 1e-3, (op, predicted_ns, ms)
    # and the GEMMs, which dominate a layer, within 20 % at these points
    for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"):
        assert kernel_ns(hw, profiled_kernel(op, shape, n, t)) == pytest.approx(measured[op] * 1e6, rel=0.2)


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_shipped_error_tables_cover_every_profiled_op(gpu):
    """The fitted presets record median and max in-sample error per operator; medians are small: GEMMs over
    every row, memory-bound operators over the rows of ≥ 1024 tokens (their HBM efficiency is fitted to
    the large rows, where training runs; smaller ones partly run from L2 and are predicted slow)."""
    errors = shipped_errors(gpu)
    assert set(errors) == {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "emb",
                           "input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add"}
    for op, e in errors.items():
        assert 0 <= e["median"] <= e["max"] and e["points"] == 2088
        if op.endswith("proj"):
            assert e["median"] < 0.1, op
        else:
            assert e["median_large"] < 0.13 and e["median"] < 0.3, op


@pytest.mark.parametrize("gpu", ["a100", "h100", "h200", "b200"])
def test_kernel_times_grow_with_size(gpu):
    """Bigger GEMMs along any dimension, and more bytes, never take less time."""
    hw = get_hardware(gpu)
    sizes = np.unique(np.concatenate([np.arange(1, 9000, 37), 2 ** np.arange(14)]))
    kw = gemm_coefficients(hw)
    for other in (512, 4096, 11008):
        for axis in range(3):
            dims = [np.full(sizes.size, other), np.full(sizes.size, other), np.full(sizes.size, other)]
            dims[axis] = sizes
            t = gemm_time_ns(*dims, **kw)
            assert np.all(np.diff(t) >= 0), (axis, other)
    for kind in ("elementwise", "norm", "rope", "activation", "embedding"):
        t = [kernel_ns(hw, Stream(kind, int(b))) for b in sizes * 4096]
        assert np.all(np.diff(t) > 0) and t[0] > 0
    t = [kernel_ns(hw, Attention(queries=s, keys=s, heads=8, head_dim=128)) for s in (512, 1024, 4096)]
    assert t[0] < t[1] < t[2]


@pytest.mark.parametrize("gpu", ["a100", "h100"])
@pytest.mark.parametrize("model", ["llama2-7b", "llama2-70b", "gpt3-175b"])
def test_backward_gemms_take_about_twice_the_forward(gpu, model):
    """dgrad + wgrad GEMMs of a layer cost ≈ 2× its forward GEMMs (same FLOPs, transposed shapes)."""
    hw = get_hardware(gpu)
    m = get_model(model)
    blocks = kn.block_kernels(m, ParallelismSpec(tp=8, global_batch_size=1))

    def gemm_ns(*names):
        return sum(kernel_ns(hw, k) for name in names for k in blocks[name] if isinstance(k, Gemm))

    ratio = gemm_ns("attn_dgrad", "attn_wgrad", "mlp_dgrad", "mlp_wgrad") / gemm_ns("attn", "mlp")
    assert 1.8 < ratio < 2.2


def test_every_compute_op_takes_time_and_memory_bound_ops_count():
    """Norms, rope, activations, adds, embedding and loss have nonzero time: each block is longer than its
    GEMMs and attention alone, and the trace has no free compute op."""
    hw = get_hardware("h100")
    m, par = get_model("llama2-7b", num_layers=2), ParallelismSpec(tp=2, pp=2, global_batch_size=4)
    blocks = kn.block_kernels(m, par)
    for name, ks in blocks.items():
        assert kernels_ns(hw, ks) > 0, name
        streams = [k for k in ks if isinstance(k, Stream)]
        if streams and len(streams) < len(ks):
            assert kernels_ns(hw, ks) > kernels_ns(hw, [k for k in ks if not isinstance(k, Stream)]), name
    kinds = {k.kind for ks in blocks.values() for k in ks if isinstance(k, Stream)}
    assert kinds == {"elementwise", "norm", "rope", "activation", "embedding"}
    tr = build_trace(m, par, hw)
    comp = tr.kind == OpKind.COMPUTE
    assert np.all(tr.duration_ns[comp] > 0)
    labels = tr.label_array()[comp]
    assert any(str(x).endswith("embed/lookup") for x in labels)
    assert any(str(x).endswith("embed/lookup_wgrad") for x in labels)


def test_sequence_parallel_shards_norms_and_adds():
    """With SP the norms and residual adds run on b·s/t tokens, so they move t× fewer bytes."""
    m = get_model("llama2-7b")
    plain = kn.block_kernels(m, ParallelismSpec(tp=4, global_batch_size=1))["mlp"]
    sp = kn.block_kernels(m, ParallelismSpec(tp=4, sequence_parallel=True, global_batch_size=1))["mlp"]
    for a, b in zip(plain, sp):
        if isinstance(a, Stream) and a.kind in ("norm", "elementwise"):
            assert a.nbytes == 4 * b.nbytes
        else:
            assert a == b


def test_gemm_efficiency_override_scales_compute_bound_gemms():
    """hardware.compute_efficiency (--efficiency) still sets the GEMM rate: half of it, twice the time."""
    big = Gemm(8192, 8192, 8192)
    fitted = get_hardware("h100")
    half = get_hardware("h100", compute_efficiency=fitted.compute_efficiency / 2)
    launch = fitted.gemm_launch_ns
    assert (kernel_ns(half, big) - launch) / (kernel_ns(fitted, big) - launch) == pytest.approx(2, rel=0.02)


def test_a_lower_sustained_clock_slows_compute_bound_kernels_only():
    """sustained_clock_ratio r divides compute-bound time (GEMM FLOP term, flash attention, FP8 GEMMs) by r
    and leaves HBM-bound kernels and the launch terms alone; the datasheet peak (MFU's denominator) stays."""
    full, slow = get_hardware("h100"), get_hardware("h100", sustained_clock_ratio=0.8)
    launch = full.gemm_launch_ns
    for kernel in (Gemm(8192, 8192, 8192), Gemm(8192, 8192, 8192, precision="fp8-block"),
                   Attention(queries=4096, keys=4096, heads=32, head_dim=128, backward=True)):
        assert (kernel_ns(slow, kernel) - launch) / (kernel_ns(full, kernel) - launch) == pytest.approx(1.25,
                                                                                                          rel=0.01)
    stream = Stream("norm", 1 << 30)
    assert kernel_ns(slow, stream) == kernel_ns(full, stream)
    assert slow.peak_flops_per_s == full.peak_flops_per_s


def test_derived_presets_scale_h100_by_datasheet_ratios():
    """H200 and B200 carry H100's fitted coefficients, marked derived: memory-bound time scales with the
    HBM bandwidth ratio and compute-bound time with the peak FLOP/s ratio."""
    h100, h200, b200 = (get_hardware(g) for g in ("h100", "h200", "b200"))
    assert h100.calibration.startswith("fitted") and h200.calibration.startswith("derived, not fitted")
    assert b200.calibration.startswith("derived, not fitted")
    for field in ("compute_efficiency", "norm_memory_efficiency", "gemm_small_k", "attention_efficiency"):
        assert getattr(h200, field) == getattr(b200, field) == getattr(h100, field)
    norm = Stream("norm", 1 << 30)
    ratio = (kernel_ns(h200, norm) - h200.norm_launch_ns) / (kernel_ns(h100, norm) - h100.norm_launch_ns)
    assert ratio == pytest.approx(3.35 / 4.8)
    flash = Attention(queries=8192, keys=8192, heads=64, head_dim=128)
    ratio = (kernel_ns(b200, flash) - b200.gemm_launch_ns) / (kernel_ns(h100, flash) - h100.gemm_launch_ns)
    assert ratio == pytest.approx(989 / 2250)


def test_presets_hold_datasheet_numbers():
    """Peak bf16 dense, HBM, NVLink per direction, NIC per GPU, SMs (NVIDIA datasheets)."""
    rows = {"a100": (312e12, 2.039e12, 300e9, 25e9, 108), "h100": (989e12, 3.35e12, 450e9, 50e9, 132),
            "h200": (989e12, 4.8e12, 450e9, 50e9, 132), "b200": (2.25e15, 8e12, 900e9, 50e9, 148)}
    for gpu, row in rows.items():
        h = get_hardware(gpu)
        assert (h.peak_flops_per_s, h.hbm_bytes_per_s, h.nvlink_bytes_per_s, h.nic_bytes_per_s, h.sm_count) == row



#: FlashAttention-3 on H100 (Shah et al. 2024, head size 128, bf16), TFLOP/s at 512 ... 16k keys
FA3_FWD_CAUSAL = (292, 423, 521, 579, 602, 616)
FA3_FWD = (467, 565, 625, 638, 646, 648)
FA3_BWD = (316, 424, 501, 542, 559, 561)
KEYS = np.array([512, 1024, 2048, 4096, 8192, 16384])


def test_attention_times_follow_the_published_flash_attention_figures():
    """The shipped H100 preset times one causal flash-attention forward at the published FlashAttention-3
    throughput within 2 % at every key count, and the non-causal forward and backward (costed as causal
    kernels over twice the keys) within 10 %; the efficiency rises with the keys, and the backward stays below the forward."""
    hw = get_hardware("h100")
    heads, d = 16, 128
    for figures, causal, backward, tolerance in ((FA3_FWD_CAUSAL, True, False, 0.02), (FA3_FWD, False, False, 0.10),
                                                 (FA3_BWD, False, True, 0.10)):
        for s, tflops in zip(KEYS, figures):
            kernel = Attention(queries=int(s), keys=int(s), heads=heads, head_dim=d, causal=causal,
                               backward=backward)
            seconds = (kernel_ns(hw, kernel) - hw.gemm_launch_ns) * 1e-9
            assert kernel.executed_flops / seconds / 1e12 == pytest.approx(tflops, rel=tolerance)
    for gpu in ("a100", "h100", "b200"):
        hw = get_hardware(gpu)
        fwd, bwd = (attention_efficiency(hw, KEYS, backward=b) for b in (False, True))
        assert np.all(np.diff(fwd) > 0) and np.all(np.diff(bwd) > 0) and np.all(bwd < fwd) and fwd[-1] < 1


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_unfused_attention_pays_for_the_score_matrix_in_hbm(gpu):
    """Megatron-2021's unfused attention writes and reads the b·heads·s² scores: its forward is slower than
    flash attention by at least the softmax and dropout passes over them at full HBM bandwidth, its
    backward likewise, and its batched GEMMs do the causal-blind 4·b·s²·h/t FLOPs each way (×2 backward)."""
    hw = get_hardware(gpu)
    flash = get_model("megatron-gpt-7.5b", attention_kernel="flash", attention_dropout=0.0)
    unfused = get_model("megatron-gpt-7.5b")
    par = ParallelismSpec(tp=4, micro_batch_size=4, global_batch_size=4)
    scores = 4 * (32 // 4) * 2048 * 2048
    for block, passes in (("attn", kn.SOFTMAX_FWD + kn.DROPOUT), ("attn_dgrad", kn.SOFTMAX_BWD + kn.DROPOUT)):
        slow, fast = (kernels_ns(hw, kn.block_kernels(m, par)[block]) for m in (unfused, flash))
        extra = slow - fast
        assert extra > passes * scores / hw.hbm_bytes_per_s * 1e9
    fwd = [k for k in kn.block_kernels(unfused, par)["attn"] if isinstance(k, Gemm) and k.count > 1]
    bwd = [k for k in kn.block_kernels(unfused, par)["attn_dgrad"] if isinstance(k, Gemm) and k.count > 1]
    core = 4 * 4 * 2048 * 2048 * 4096 // 4
    assert sum(k.flops for k in fwd) == core and sum(k.flops for k in bwd) == 2 * core


def test_the_software_stack_sets_the_memory_bound_kernels():
    """Learned positions replace the rotary kernels by a position add in the embedding; hidden dropout
    turns each residual add into a dropout-add (7 B instead of 6 per element); fp16 loss scaling adds an
    8 B/param pass to the optimizer step, the gradient norm a 4 B/param one."""
    par = ParallelismSpec(tp=2, global_batch_size=1)
    llama = kn.block_kernels(get_model("llama2-7b"), par)
    gpt = kn.block_kernels(get_model("megatron-gpt-3.6b"), par)
    kinds = lambda blocks: {k.kind for ks in blocks.values() for k in ks if isinstance(k, Stream)}  # noqa: E731
    assert "rope" in kinds(llama) and "rope" not in kinds(gpt)
    assert len(gpt["lookup"]) == 3 and len(llama["lookup"]) == 1  # gather, position add, dropout
    n, h = 2048, 3072
    adds = [k for k in gpt["mlp"] if isinstance(k, Stream) and k.kind == "elementwise"]
    assert adds == [Stream("elementwise", kn.DROPOUT_ADD * n * h)]
    plain = kn.optimizer_kernels(1000, 32)
    fp16 = kn.optimizer_kernels(1000, 32, loss_scaling=True)
    assert sum(k.nbytes for k in plain) == (32 + kn.GRAD_NORM_BYTES_PER_PARAM) * 1000
    assert sum(k.nbytes for k in fp16) - sum(k.nbytes for k in plain) == kn.LOSS_SCALE_BYTES_PER_PARAM * 1000


@pytest.mark.parametrize("size, billions", [("1.7b", 1.7), ("3.6b", 3.6), ("7.5b", 7.5), ("18.4b", 18.4),
                                            ("39.1b", 39.1), ("76.1b", 76.1), ("145.6b", 145.6)])
def test_megatron_presets_have_the_parameters_of_table_1(size, billions):
    """The megatron-gpt-* presets hold the published parameter counts (Narayanan et al. SC'21, Table 1, to
    the 0.1 B it prints), and Megatron's FLOP count is its closed form 96·B·s·l·h²(1 + s/6h + V/16lh)."""
    from cosim.workload.flops import megatron_flops_per_iteration, megatron_gpt_formula
    from cosim.workload.model import total_params

    m = get_model(f"megatron-gpt-{size}")
    assert total_params(m) / 1e9 == pytest.approx(billions, abs=0.06)
    assert megatron_flops_per_iteration(m, 512, recompute=True) == pytest.approx(megatron_gpt_formula(m, 512),
                                                                                 rel=1e-12)


@pytest.mark.parametrize("field, value", [("attention_kernel", "xformers"), ("attention_dropout", 1.0),
                                          ("hidden_dropout", -0.1), ("loss_scaling", "yes")])
def test_stack_fields_are_checked(field, value):
    """A wrong software-stack field is an input error naming the field."""
    from cosim.errors import CosimInputError

    with pytest.raises(CosimInputError, match=f"model.{field}"):
        get_model("llama2-7b", **{field: value})
