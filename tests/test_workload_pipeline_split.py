"""Uneven pipeline splits (Megatron's and Llama 3's): layers per (virtual) stage, the compute each stage
carries, the errors of impossible splits, the Llama 3 presets, and a small uneven training run on ns-3."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from cosim.cli.trace import trace
from cosim.errors import CosimInputError
from cosim.run import experiments_of, run
from cosim.workload.builder import build_trace
from cosim.workload.flops import sequence_forward_flops
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model, total_params
from cosim.workload.parallelism import ParallelismSpec, virtual_stage_layers
from cosim.workload.trace import OpKind
from cosim.workload.validate import check_trace

H100 = get_hardware("h100")
#: a small LLaMA-shaped model: traces of a few layers build in well under a second
SMALL = {"hidden_size": 256, "num_heads": 4, "num_kv_heads": 4, "ffn_hidden_size": 512, "vocab_size": 1024,
         "seq_length": 128}


@pytest.mark.parametrize("layers, par, want", [
    (126, dict(pp=16, embedding_in_split=True, loss_in_split=True), (7,) + (8,) * 14 + (7,)),
    (126, dict(pp=16, first_stage_layers=7, last_stage_layers=7), (7,) + (8,) * 14 + (7,)),
    (126, dict(pp=16, pipeline_layers=(7,) + (8,) * 14 + (7,)), (7,) + (8,) * 14 + (7,)),
    # Megatron's account_for_embedding/loss with interleaving: the first and last *virtual* stage are lighter
    (126, dict(pp=16, vpp=2, global_batch_size=32, embedding_in_split=True, loss_in_split=True),
     (3,) + (4,) * 30 + (3,)),
    # per-stage counts split over the chunks, the later chunks taking the extra layer: stage 0 = 1 + 2
    (5, dict(pp=2, vpp=2, global_batch_size=4, pipeline_layers=(3, 2)), (1, 1, 2, 1)),
    (5, dict(pp=2, vpp=2, global_batch_size=4, pipeline_layers=(2, 1, 1, 1)), (2, 1, 1, 1)),
    (5, dict(pp=2, embedding_in_split=True), (2, 3)),
    (5, dict(pp=2, loss_in_split=True), (3, 2)),
    (6, dict(pp=3, last_stage_layers=0), (3, 3, 0)),  # the output layer alone on the last stage
    (8, dict(pp=2, vpp=2, global_batch_size=4), (2, 2, 2, 2)),  # even: as before
])
def test_virtual_stage_layers(layers, par, want):
    """Each way of giving the split yields the published layer counts per virtual stage (chunk·pp + stage)."""
    assert virtual_stage_layers(layers, ParallelismSpec(**par)) == want


@pytest.mark.parametrize("par", [
    dict(pp=2, pipeline_layers=(2, 3)),
    dict(pp=2, vpp=2, global_batch_size=4, pipeline_layers=(3, 2)),
    dict(pp=3, tp=2, dp=2, pipeline_layers=(1, 3, 1), zero_stage=1, sequence_parallel=True),
    dict(pp=3, pipeline_layers=(0, 5, 0)),  # embedding alone on stage 0, output layer alone on stage 2
    dict(pp=3, embedding_in_split=True, recompute=True, zero_stage=3, dp=2),  # 1, 2, 2 layers
])
def test_uneven_stages_carry_their_layers_and_their_share_of_the_model_flops(par):
    """Every rank of stage s computes exactly the layers of its virtual stages; a stage's FLOPs are those of
    its layers (plus the logits on the last stage), and the stages' FLOPs sum to the model's 3·B·F_seq."""
    model = get_model("llama2-7b", num_layers=5, **SMALL)
    p = ParallelismSpec(**par)
    tr = build_trace(model, p, H100)
    check_trace(tr)
    split = virtual_stage_layers(model.num_layers, p)
    start = np.concatenate([[0], np.cumsum(split)])
    stage = (np.arange(tr.n_ranks) // p.tp) % p.pp  # default order tp-cp-pp-dp
    comp = tr.kind == OpKind.COMPUTE
    head = 2 * model.seq_length * model.hidden_size * model.vocab_size
    per_layer = (sequence_forward_flops(model) - head) // model.num_layers
    extra = 1 if p.recompute else 0  # full recomputation runs each layer's forward once more
    total = 0
    for s in range(p.pp):
        mine = comp & (stage[tr.rank] == s)
        want_layers = {L for c in range(p.vpp) for L in range(start[c * p.pp + s], start[c * p.pp + s + 1])}
        assert set(np.unique(tr.layer[mine])) - {-1} == want_layers
        n_layers = sum(split[c * p.pp + s] for c in range(p.vpp))
        flops = int(tr.flops[mine].sum())  # each rank 1/tp of its replica's micro-batches
        want = p.global_batch_size * ((3 + extra) * n_layers * per_layer + (3 * head if s == p.pp - 1 else 0))
        assert flops == want
        total += flops
    assert total == 3 * p.global_batch_size * sequence_forward_flops(model) + (
        p.global_batch_size * (sequence_forward_flops(model) - head) if p.recompute else 0)


@pytest.mark.parametrize("even, given", [
    (dict(pp=4), dict(pp=4, pipeline_layers=(2, 2, 2, 2))),
    (dict(pp=2, vpp=2, global_batch_size=4), dict(pp=2, vpp=2, global_batch_size=4, pipeline_layers=(4, 4))),
    (dict(pp=2, vpp=2, global_batch_size=4), dict(pp=2, vpp=2, global_batch_size=4, pipeline_layers=(2,) * 4)),
    (dict(pp=2, tp=2), dict(pp=2, tp=2, first_stage_layers=4)),
])
def test_an_even_split_given_explicitly_is_todays_trace(even, given):
    """Layers per stage that happen to be even build exactly the trace of the implicit even split."""
    model = get_model("llama2-7b", num_layers=8, **SMALL)
    a, b = build_trace(model, ParallelismSpec(**even), H100), build_trace(model, ParallelismSpec(**given), H100)
    for col in ("rank", "kind", "phase", "duration_ns", "flops", "bytes", "coll_kind", "group", "peer", "match_id",
                "coll_id", "label", "microbatch", "layer", "dep_ptr", "dep_idx"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert a.labels == b.labels


@pytest.mark.parametrize("layers, par, message", [
    (5, dict(pp=2), "parallelism.pp: 5 layers are not divisible by pp·vpp = 2·1 = 2 (choose pp·vpp among 1, 5, "
     "or split unevenly with parallelism.pipeline_layers"),
    (5, dict(pp=2, pipeline_layers=(2, 2)), "parallelism.pipeline_layers: holds 4 layers, the model has 5"),
    (5, dict(pp=3, pipeline_layers=(1, 0, 4)), "parallelism.pipeline_layers: leaves virtual stage 1 (stage 1, "
     "chunk 0) without a layer"),
    (5, dict(pp=3, first_stage_layers=2), "parallelism.first_stage_layers: leaves 3 of 5 layers for 2 other stages"),
    (5, dict(pp=2, first_stage_layers=6), "parallelism.first_stage_layers: leaves -1 of 5 layers"),
    (5, dict(pp=4, embedding_in_split=True), "parallelism.pp: 5 layers + 1 (embedding/output counted as layers) "
     "= 6 are not divisible by pp·vpp = 4·1 = 4"),
])
def test_impossible_splits_are_one_line_errors_naming_the_field(layers, par, message):
    with pytest.raises(CosimInputError) as err:
        build_trace(get_model("llama2-7b", num_layers=layers, **SMALL), ParallelismSpec(**par), H100)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("par, message", [
    (dict(pp=2, pipeline_layers=(1, 2, 3)), "parallelism.pipeline_layers: has 3 numbers for pp=2, vpp=1 "
     "(give 2 numbers)"),
    (dict(pp=2, pipeline_layers=(2, -1)), "parallelism.pipeline_layers: must hold whole numbers of layers"),
    (dict(pp=2, pipeline_layers="2,x"), "parallelism.pipeline_layers: cannot read '2,x' as layer counts"),
    (dict(pp=2, pipeline_layers=(2, 3), loss_in_split=True), "parallelism.loss_in_split: cannot be combined with "
     "parallelism.pipeline_layers"),
    (dict(pp=2, first_stage_layers=2, embedding_in_split=True), "parallelism.embedding_in_split: cannot be "
     "combined with parallelism.first_stage_layers"),
    (dict(first_stage_layers=2), "parallelism.first_stage_layers: needs pp >= 2, got pp=1"),
])
def test_inconsistent_split_fields_are_refused_by_the_spec(par, message):
    with pytest.raises(CosimInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ParallelismSpec(**par)


@pytest.mark.parametrize("name, billions", [("llama3-8b", 8.03), ("llama3-70b", 70.6), ("llama3-405b", 405.9)])
def test_llama3_presets_have_their_published_parameter_counts(name, billions):
    """Meta's published sizes (8.0B, 70.6B, 405.9B with the untied 128,256-token embedding and output)."""
    assert total_params(get_model(name)) / 1e9 == pytest.approx(billions, abs=0.05)


def test_cosim_trace_takes_an_uneven_split_and_refuses_an_impossible_one():
    """``--set parallelism.pipeline_layers=2,3`` builds a 5-layer PP2 trace; without it exit 2, one line."""
    base = ["--model", "llama2-7b", "--pp", "2", "--set", "model.num_layers=5"]
    base += [f"--set=model.{k}={v}" for k, v in SMALL.items()]
    ok = CliRunner().invoke(trace, [*base, "--set", "parallelism.pipeline_layers=2,3"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(trace, base)
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "parallelism.pp: 5 layers" in bad.output


def test_uneven_pipeline_training_run_delivers_every_byte(engine_ns):
    """5 layers on PP2 (2 + 3) × TP2 × DP2 on RoCE: the run completes, every flow delivers its bytes, the
    lossless fabric drops nothing, and each of the 2 iterations runs every op of the trace."""
    doc = {"network": {"transport": "roce", "topology": "leaf-spine", "hosts_per_leaf": 2, "gpus_per_server": 2},
           "workload": {"kind": "training", "model": "llama2-7b", "model_overrides": {"num_layers": 5, **SMALL},
                        "parallelism": {"tp": 2, "pp": 2, "dp": 2, "pipeline_layers": [2, 3],
                                        "global_batch_size": 4},
                        "iterations": 2, "chunk_bytes": "256KiB"}}
    rec = run(experiments_of(doc, {})[0])
    s, f = rec.summary, rec.flows
    assert s["status"] == "complete" and s["n_flows"] > 0
    assert np.array_equal(f["delivered_bytes"], f["size_bytes"]) and np.all(np.isfinite(f["finish_ns"]))
    assert s["drops"] == 0 and int(rec.ports["drops"].sum()) == 0
    assert np.all(np.isfinite(rec.ops["finish_ns"])) and rec.ops["finish_ns"].size == 2 * s["n_ops"]
    from cosim.analysis.describe import run_facts

    assert run_facts(rec.config)["parallelism"] == "TP2 PP2 DP2 (layers per stage 2/3)"


def test_an_experiment_with_layers_per_stage_round_trips_through_toml():
    """``pipeline_layers = [2, 3]`` in an experiment file is kept in the resolved document and its TOML."""
    import tomllib

    from cosim.spec import from_document, to_document, to_toml

    doc = {"workload": {"kind": "training", "model": "llama2-7b", "model_overrides": {"num_layers": 5},
                        "parallelism": {"pp": 2, "pipeline_layers": [2, 3]}}}
    exp = from_document(doc)[0]
    assert dict(exp.workload.parallelism)["pipeline_layers"] == (2, 3)
    again = from_document(tomllib.loads(to_toml(to_document(exp))))[0]
    assert again.workload == exp.workload
    with pytest.raises(CosimInputError, match="workload.parallelism.pipeline_layers: must be a single finite value "
                                              "or a list of integers"):
        from_document({"workload": {**doc["workload"], "parallelism": {"pp": 2, "pipeline_layers": [2.5, 2.5]}}})
