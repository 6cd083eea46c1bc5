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

