"""Model, hardware and parallelism specs: presets, parameter counts, validation messages, rank layout."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.errors import CosimInputError
from cosim.workload.hardware import get_hardware
from cosim.workload.layout import PeerKind, make_layout
from cosim.workload.model import (
    PRESETS,
    ModelSpec,
    get_model,
    layer_params,
    total_params,
)
from cosim.workload.parallelism import ParallelismSpec, check_compatible
from cosim.workload.trace import GroupKind

# --- model ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, params", [
    ("llama2-7b", 6_738_415_616),      # the released checkpoint's count
    ("llama2-13b", 13_015_864_320),
    ("llama2-70b", 68_976_648_192),
    ("mixtral-8x7b", 46_702_792_704),
])
def test_preset_parameter_counts_match_published_models(name, params):
    assert total_params(get_model(name)) == params


def test_gpt3_parameter_count_is_megatron_formula_plus_final_layernorm():
    m = get_model("gpt3-175b")
    l, h, V, s = m.num_layers, m.hidden_size, m.vocab_size, m.seq_length
    megatron = 12 * l * h * h + 13 * l * h + (V + s) * h  # 12lh²(1 + 13/12h + (V+s)/12lh)
    assert total_params(m) == megatron + 2 * h
    assert 174e9 < total_params(m) < 176e9


def test_preset_fields_are_the_public_numbers():
    m = get_model("llama2-70b")
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.ffn_hidden_size) == (80, 8192, 64, 8, 28672)
    x = get_model("mixtral-8x7b")
    assert (x.num_experts, x.top_k, x.num_kv_heads, x.ffn_hidden_size) == (8, 2, 8, 14336)
    g = get_model("GPT3-175B")
    assert (g.num_layers, g.hidden_size, g.num_heads, g.ffn_hidden_size, g.seq_length) == (96, 12288, 96, 49152, 2048)
    table1 = ("1.7b", "3.6b", "7.5b", "18.4b", "39.1b", "76.1b", "145.6b", "310.1b", "529.6b", "1t")
    assert set(PRESETS) >= {"llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b", "mixtral-8x7b",
                            "llama3-8b", "llama3-70b", "llama3-405b",
                            *(f"megatron-gpt-{size}" for size in table1)}
    for name, spec in PRESETS.items():  # each preset says which software stack it assumes
        legacy = name.startswith("megatron-gpt-")
        assert spec.attention_kernel == ("unfused" if legacy else "flash")
        assert (spec.attention_dropout, spec.hidden_dropout, spec.loss_scaling) == ((0.1, 0.1, True) if legacy
                                                                                    else (0.0, 0.0, False))


def test_gqa_shrinks_kv_projections():
    full = get_model("llama2-70b", num_kv_heads=64)
    gqa = get_model("llama2-70b")
    d = gqa.head_dim
    assert layer_params(full) - layer_params(gqa) == 2 * gqa.hidden_size * (64 - 8) * d


def test_overrides_field_by_field_and_unknown_fields():
    m = get_model("llama2-7b", num_layers=2, seq_length=1024)
    assert (m.num_layers, m.seq_length, m.hidden_size) == (2, 1024, 4096)
    with pytest.raises(CosimInputError, match="model.layerz"):
        get_model("llama2-7b", layerz=2)
    with pytest.raises(CosimInputError, match="unknown model preset"):
        get_model("llama9")


@pytest.mark.parametrize("fields, match", [
    (dict(hidden_size=4100), "hidden size 4100 is not divisible by 32 heads"),
    (dict(num_kv_heads=5), "32 heads are not divisible by 5 KV heads"),
    (dict(num_layers=0), "model.num_layers: must be a positive integer"),
    (dict(top_k=2), "top_k=2 exceeds num_experts=1"),
    (dict(norm="batchnorm"), "unknown norm"),
    (dict(hidden_size=10**10, num_heads=1, num_kv_heads=1), "model.hidden_size: must be at most 1048576"),
])
def test_model_validation(fields, match):
    with pytest.raises(CosimInputError, match=match):
        get_model("llama2-7b", **fields)


def test_model_spec_is_frozen():
    m = get_model("llama2-7b")
    with pytest.raises(AttributeError):
        m.num_layers = 3  # type: ignore[misc]
    assert isinstance(m, ModelSpec)


# --- hardware ---------------------------------------------------------------------------------------

def test_hardware_presets_and_compute_time():
    a, h = get_hardware("a100"), get_hardware("H100-SXM")
    assert (a.peak_flops_per_s, h.peak_flops_per_s) == (312e12, 989e12)
    assert (a.nvlink_bytes_per_s, h.nvlink_bytes_per_s) == (300e9, 450e9)
    assert a.gpus_per_host == h.gpus_per_host == 8
    assert 0.5 < h.compute_efficiency < 1  # fitted GEMM efficiency (tests/test_compute_model.py)
    half = get_hardware("h100", compute_efficiency=0.5)
    assert half.compute_ns(int(494.5e12)) == 1_000_000_000  # 1 s at half of peak
    assert half.compute_ns(0) == 0 and half.compute_ns(1) == 1
    assert get_hardware("h100", compute_efficiency=0.25).compute_ns(int(494.5e12)) == 2_000_000_000


def test_hardware_validation():
    with pytest.raises(CosimInputError, match="hardware.compute_efficiency: must be in"):
        get_hardware("h100", compute_efficiency=1.5)
    with pytest.raises(CosimInputError, match="unknown GPU preset"):
        get_hardware("v100")


# --- parallelism ------------------------------------------------------------------------------------

def _check(model: str, **par):
    check_compatible(get_model(model), ParallelismSpec(**par))


def test_heads_not_divisible_by_tp_message_names_the_numbers():
    with pytest.raises(CosimInputError) as err:
        _check("llama2-7b", tp=6)
    assert str(err.value) == ("parallelism.tp: 32 heads are not divisible by tp=6 "
                              "(choose tp among 1, 2, 4, 8, 16, 32)")


@pytest.mark.parametrize("model, par, message", [
    ("llama2-70b", dict(tp=16), "8 KV heads are not divisible by tp=16"),
    ("llama2-7b", dict(pp=3), "32 layers are not divisible by pp·vpp = 3·1 = 3"),
    ("llama2-7b", dict(pp=4, vpp=3, global_batch_size=4), "32 layers are not divisible by pp·vpp = 4·3 = 12"),
    ("mixtral-8x7b", dict(dp=6, ep=3, global_batch_size=6), "8 experts are not divisible by ep=3"),
    ("mixtral-8x7b", dict(tp=2), "needs sequence parallelism"),
    ("llama2-7b", dict(ep=2, dp=2), "ep=2 needs a mixture-of-experts model"),
    ("llama2-7b", dict(cp=3), "sequence length 4096 is not divisible by 2·cp = 6"),
    ("gpt3-175b", dict(tp=8), None),  # 51200 is padded: fine
])
def test_incompatible_combinations(model, par, message):
    if message is None:
        _check(model, **par)
        return
    with pytest.raises(CosimInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _check(model, **par)


def test_vocabulary_must_be_divisible_by_tp_with_padding_hint():
    with pytest.raises(CosimInputError, match=r"vocabulary 50257 is not divisible by tp=8 .*vocab_size=51200"):
        check_compatible(get_model("gpt3-175b", vocab_size=50257), ParallelismSpec(tp=8))


@pytest.mark.parametrize("par, message", [
    (dict(tp=2, pp=2, dp=2, num_gpus=16), "tp·cp·pp·dp = 2·1·2·2 = 8 ≠ 16 GPUs"),
    (dict(dp=4, micro_batch_size=2, global_batch_size=12), "12 is not divisible by micro_batch_size·dp = 2·4 = 8"),
    (dict(dp=4, ep=3), "ep=3 does not divide dp=4"),
    (dict(vpp=2), "vpp=2 needs pp >= 2"),
    (dict(pp=4, vpp=2, global_batch_size=6), "interleaved 1F1B needs micro-batches divisible by pp: m = 6, pp=4"),
    (dict(zero_stage=2), "unsupported ZeRO stage 2"),
    (dict(order="tp-pp-dp"), "is not an order of tp, cp, pp, dp"),
    (dict(tp=0), "parallelism.tp: must be a positive integer"),
])
def test_parallelism_spec_validation(par, message):
    with pytest.raises(CosimInputError, match=message):
        ParallelismSpec(**par)


def test_parallelism_defaults_and_derived_numbers():
    p = ParallelismSpec(tp=2, pp=2, dp=4, micro_batch_size=2)
    assert p.world_size == p.num_gpus == 16
    assert p.global_batch_size == 2 * 4 * 4 * 2 and p.num_microbatches == 8
    assert ParallelismSpec(order="TP_CP_EP_DP_PP").order == "tp-cp-dp-pp"  # Megatron-style, ep folded in DP
    assert ParallelismSpec(dp=4, ep=2, cp=2).edp == 4


# --- layout -----------------------------------------------------------------------------------------

def _groups(layout, kind):
    return [layout.group_ranks[layout.group_ptr[g]:layout.group_ptr[g + 1]].tolist()
            for g in np.flatnonzero(layout.group_kind == kind)]


def test_default_layout_puts_tp_inside_host_then_cp_pp_dp():
    lay = make_layout(ParallelismSpec(tp=4, cp=2, pp=2, dp=2))
    assert _groups(lay, GroupKind.TP)[0] == [0, 1, 2, 3]
    assert _groups(lay, GroupKind.CP)[0] == [0, 4]
    assert _groups(lay, GroupKind.PP)[0] == [0, 8]
    assert _groups(lay, GroupKind.DP)[0] == [0, 4, 16, 20]  # data parallel includes the CP ranks
    assert lay.peer_of[0, PeerKind.PP_NEXT] == 8 and lay.peer_of[8, PeerKind.PP_NEXT] == 0
    assert lay.peer_of[4, PeerKind.CP_NEXT] == 0 and lay.peer_of[0, PeerKind.CP_PREV] == 4
    assert sorted(sum(_groups(lay, GroupKind.TP), [])) == list(range(32))


def test_custom_order_and_expert_groups():
    lay = make_layout(ParallelismSpec(tp=2, dp=4, ep=2, order="dp-tp-pp-cp"))
    assert _groups(lay, GroupKind.DP)[0] == [0, 1, 2, 3]
    assert _groups(lay, GroupKind.TP)[0] == [0, 4]
    assert _groups(lay, GroupKind.EP) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert _groups(lay, GroupKind.EDP) == [[0, 2], [1, 3], [4, 6], [5, 7]]


def test_embedding_groups_only_with_tied_embeddings_and_pipeline():
    assert _groups(make_layout(ParallelismSpec(pp=4, dp=2), tied_embeddings=True), GroupKind.EMBD) == [[0, 3], [4, 7]]
    assert _groups(make_layout(ParallelismSpec(pp=4), tied_embeddings=False), GroupKind.EMBD) == []
