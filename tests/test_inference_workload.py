"""Inference workload model: KV-cache bytes per token against the attention formula of each kind, and
request streams (seeded Poisson process, CSV request traces)."""

from pathlib import Path

import numpy as np
import pytest

from cosim.errors import CosimInputError
from cosim.workload.inference.model import PRESETS, InferenceModel, get_inference_model
from cosim.workload.inference.requests import (
    Requests,
    offered_load,
    poisson_requests,
    read_request_csv,
    request_csv_text,
)
from cosim.workload.model import get_model

SAMPLE = Path(__file__).parents[1] / "cosim" / "workload" / "inference" / "data" / "sample_requests.csv"


def test_kv_bytes_per_token_follow_the_attention_formula_of_each_kind():
    # MHA: K and V of every head, bf16: LLaMA-2-7B 2·32·128·2 = 16 KiB per layer, 32 layers = 512 KiB
    assert get_inference_model("llama2-7b").kv_bytes_per_token_per_layer == 2 * 32 * 128 * 2
    assert get_inference_model("llama2-7b").kv_bytes_per_token == 32 * 16384
    # GQA: 8 KV heads of 128 for LLaMA-2-70B: 4 KiB per layer, 80 layers = 320 KiB per token
    m70 = get_inference_model("llama2-70b")
    assert m70.kv_bytes_per_token_per_layer == 2 * 8 * 128 * 2
    assert m70.kv_bytes_per_token == 327_680
    # MLA: latent 512 + rotary key 64 per layer, bf16: 1152 B, 61 layers
    ds = get_inference_model("deepseek-v3-like")
    assert ds.kv_bytes_per_token_per_layer == (512 + 64) * 2
    assert ds.kv_bytes_per_token == 61 * 1152
    # MLA caches ~57x less than MHA over the same 128 heads of 56
    mha = InferenceModel(spec=ds.spec, attention="mha")
    assert mha.kv_bytes_per_token_per_layer == 2 * 128 * 56 * 2


def test_kv_bytes_per_rank_split_kv_heads_over_tp_and_replicate_mla():
    m70 = get_inference_model("llama2-70b")
    assert m70.kv_bytes_per_token_per_rank(8) * 8 == m70.kv_bytes_per_token
    assert m70.kv_bytes_per_token_per_rank(16) == m70.kv_bytes_per_token_per_rank(8)  # one head at least
    ds = get_inference_model("deepseek-v3-like")
    assert ds.kv_bytes_per_token_per_rank(8) == ds.kv_bytes_per_token


def test_presets_are_consistent_and_overrides_apply():
    for model in PRESETS.values():
        assert model.kv_bytes_per_token > 0
    assert get_inference_model("Mixtral-8x7B").spec.is_moe
    assert get_inference_model("llama2-70b", num_layers=2).kv_bytes_per_token == 2 * 4096


def test_bad_attention_geometry_is_one_input_error():
    with pytest.raises(CosimInputError, match="gqa"):
        InferenceModel(spec=get_model("llama2-70b"), attention="mha")
    with pytest.raises(CosimInputError, match="latent rank"):
        InferenceModel(spec=get_model("llama2-7b"), attention="mla")
    with pytest.raises(CosimInputError, match="unknown inference model"):
        get_inference_model("gpt-5")


def test_poisson_requests_same_seed_same_requests_and_mean_rate():
    a = poisson_requests(2000, 50.0, seed=3)
    b = poisson_requests(2000, 50.0, seed=3)
    assert np.array_equal(a.arrival_ns, b.arrival_ns) and np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.arrival_ns, poisson_requests(2000, 50.0, seed=4).arrival_ns)
    assert a.arrival_ns[0] == 0 and np.all(np.diff(a.arrival_ns) >= 0)
    # mean inter-arrival 1/rate within 5 standard errors (exponential: sd = mean)
    gaps = np.diff(a.arrival_ns)
    assert abs(gaps.mean() - 2e7) < 5 * 2e7 / np.sqrt(gaps.size)
    # log-normal median prompt length
    assert 900 < np.median(a.prompt_tokens) < 1100


def test_request_csv_round_trip_and_shipped_sample(tmp_path):
    req = poisson_requests(20, 10.0, seed=1)
    path = tmp_path / "r.csv"
    path.write_text(request_csv_text(req))
    back = read_request_csv(path)
    assert np.allclose(back.arrival_ns, req.arrival_ns, atol=1.0)
    assert np.array_equal(back.output_tokens, req.output_tokens)
    sample = read_request_csv(SAMPLE)
    assert sample.n == 64 and 10 < offered_load(sample)["rate_per_s"] < 40
    assert read_request_csv(SAMPLE, limit=5).n == 5


def test_bad_request_trace_is_one_input_error(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("time,prompt,output\n0,1,1\n")
    with pytest.raises(CosimInputError, match="header"):
        read_request_csv(path)
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n1.0,10,2\n0.5,10,2\n")
    with pytest.raises(CosimInputError, match="non-decreasing"):
        read_request_csv(path)
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,ten,2\n")
    with pytest.raises(CosimInputError, match="three numbers"):
        read_request_csv(path)
    with pytest.raises(CosimInputError):
        Requests(np.array([0.0]), np.array([0]), np.array([1]))


from cosim.workload.inference.batching import (  # noqa: E402
    StepCost,
    in_flight_time_integral_ns,
    schedule,
)


def test_zero_load_request_waits_for_nothing():
    req = Requests(np.array([5e6]), np.array([1000]), np.array([4]))
    cost = StepCost()
    s = schedule(req, prefill_replicas=1, decode_replicas=1, cost=cost)
    assert s.prefill_start_ns[0] == 5e6
    assert s.prefill_finish_ns[0] == 5e6 + cost.prefill_ns(1000)
    # 3 decode steps (the prefill made the first of 4 tokens), contexts 1001, 1002, 1003
    steps = sum(cost.decode_ns(1, 1000 + k) for k in (1, 2, 3))
    assert s.finish_ns[0] == pytest.approx(s.prefill_finish_ns[0] + steps)


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded"])
def test_littles_law_and_same_seed_same_schedule(policy):
    req = poisson_requests(300, 40.0, seed=11, prompt_median_tokens=500, output_median_tokens=30)
    kw = dict(prefill_replicas=2, decode_replicas=2, max_decode_batch=16, policy=policy)
    s = schedule(req, **kw)
    assert np.all(np.isfinite(s.finish_ns)) and np.all(s.finish_ns >= s.prefill_finish_ns)
    assert np.all(s.prefill_start_ns >= req.arrival_ns)
    # Little's law over the whole busy span: mean in-flight = throughput x mean latency, exactly
    span = s.finish_ns.max() - req.arrival_ns.min()
    mean_in_flight = in_flight_time_integral_ns(req.arrival_ns, s.finish_ns) / span
    assert mean_in_flight == pytest.approx(req.n / span * np.mean(s.finish_ns - req.arrival_ns), rel=1e-9)
    again = schedule(req, **kw)
    assert np.array_equal(again.finish_ns, s.finish_ns) and np.array_equal(again.decode_replica, s.decode_replica)


def test_continuous_batching_respects_the_decode_batch_and_token_budget():
    req = poisson_requests(100, 1000.0, seed=2, prompt_median_tokens=300, output_median_tokens=20)
    s = schedule(req, prefill_replicas=1, decode_replicas=1, max_decode_batch=8, prefill_token_budget=2048)
    # prefill batches: requests sharing a start time fit the budget unless alone
    for t in np.unique(s.prefill_start_ns):
        members = s.prefill_start_ns == t
        assert members.sum() == 1 or req.prompt_tokens[members].sum() <= 2048
    # at most 8 sequences decode at any step start
    dec = req.output_tokens > 1
    for t in np.unique(s.decode_start_ns[dec]):
        alive = dec & (s.decode_start_ns <= t) & (s.finish_ns > t)
        assert alive.sum() <= 8
    with pytest.raises(CosimInputError, match="policy"):
        schedule(req, prefill_replicas=1, decode_replicas=1, policy="random")


def test_shipped_sample_is_what_its_generator_makes():
    from cosim.workload.inference.requests import sample_requests  # noqa: PLC0415

    made = poisson_requests(64, 20.0, seed=7, prompt_median_tokens=1200, output_median_tokens=40)
    shipped = sample_requests()
    assert np.array_equal(shipped.prompt_tokens, made.prompt_tokens)
    assert np.allclose(shipped.arrival_ns, made.arrival_ns, atol=1.0)


from cosim.workload.inference import traffic  # noqa: E402


def test_decode_allreduce_sizes():
    m = get_inference_model("llama2-70b")
    # decode of 32 sequences: 32 tokens x 8192 x 2 B = 512 KiB per all-reduce, two per layer
    assert traffic.tp_allreduce_bytes(m, 32) == 512 * 1024
    assert traffic.tp_allreduces_per_layer(m, ep=1) == 2
    assert traffic.pp_activation_bytes(m, 1) == 8192 * 2


def test_ep_dispatch_bytes_for_top_k():
    mix = get_inference_model("mixtral-8x7b")
    # 100 tokens over 8 EP ranks: 13 local tokens, each to 2 experts, 4096 x 2 B each
    assert traffic.ep_dispatch_bytes(mix, 100, 8) == 13 * 2 * 4096 * 2
    ds = get_inference_model("deepseek-v3-like")
    assert traffic.ep_dispatch_bytes(ds, 64, 8) == 8 * 8 * 7168 * 2
    assert traffic.tp_allreduces_per_layer(ds, ep=8) == 1
    with pytest.raises(CosimInputError, match="divide"):
        traffic.ep_dispatch_bytes(mix, 10, 3)
    with pytest.raises(CosimInputError, match="no experts"):
        traffic.ep_dispatch_bytes(get_inference_model("llama2-70b"), 10, 1)


def test_kv_transfer_bytes_at_once_and_per_layer():
    m = get_inference_model("llama2-70b")
    at_once = traffic.kv_transfer_bytes(m, 1000, tp=8)
    assert at_once * 8 == 1000 * m.kv_bytes_per_token
    assert traffic.kv_transfer_bytes(m, 1000, tp=8, layer_by_layer=True) * 80 == at_once
