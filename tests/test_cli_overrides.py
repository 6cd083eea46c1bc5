"""One override syntax on the command line: ``--set`` takes any Experiment field (a dotted path or a
shorthand) beside ns-3 attributes, on ``cosim run`` and ``cosim sweep``; options never read '' as "the
default"."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_main

from cosim import results
from cosim.errors import CosimInputError

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "docs" / "examples" / "sweep.toml"


def _one_line_error(code, err, *needles):
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_set_dotted_paths_run_the_experiment_they_name(tmp_path, capsys, engine_ns):
    """--set network.*, workload.* and a shorthand make the run they say: 3 senders of 64 KiB each deliver
    exactly 3 x 64 KiB on InfiniBand, with nothing dropped (credit flow control is lossless)."""
    out = tmp_path / "r.h5"
    code, _, err = run_main(["run", "--set", "network.hosts=4", "--set", "workload.flow_bytes=64KiB",
                             "--set", "network.transport=ib", "--set", "seed=3", "-q", "-o", str(out)], capsys)
    assert code == 0, err
    run = results.read_results(out)["incast"]
    exp = run.config["experiment"]
    assert exp["network"]["transport"] == "ib" and exp["network"]["hosts"] == 4 and exp["seed"] == 3
    assert run.summary["flows_completed"] == 3 and run.summary["drops"] == 0
    assert int(run.flows["delivered_bytes"].sum()) == 3 * 64 * 1024


def test_set_reaches_nested_training_and_inference_fields(capsys):
    """workload.model, workload.parallelism.* (typed by ParallelismSpec) and an inference rate reach the
    resolved experiment that --dry-run prints; the plan follows (TP2 x PP2 x DP4 = 16 ranks)."""
    code, out, err = run_main(["run", "--set", "workload.model=llama2-13b", "--set", "workload.parallelism.tp=2",
                               "--set", "workload.parallelism.dp=4", "--transport", "roce", "--dry-run"], capsys)
    assert code == 0, err
    assert 'model = "llama2-13b"' in out and "\ntp = 2\n" in out and "\ndp = 4\n" in out and "ranks: 16" in out
    code, out, err = run_main(["run", "disaggregated-serving", "--set", "workload.rate_per_s=400", "--dry-run"],
                              capsys)
    assert code == 0, err
    assert "rate_per_s = 400.0" in out
    code, out, err = run_main(["run", "incast", "--set", "network.transport=both", "--dry-run"], capsys)
    assert code == 0 and "# run 'incast-roce'" in out and "# run 'incast-ib'" in out, err


def test_hardware_overrides_set_the_generated_traces_gpu():
    """workload.hardware_overrides.* reach the HardwareSpec the trace is generated on: a sustained clock of
    0.8 lengthens the compute-bound ops (a 2-layer Llama-2-7B's forward GEMMs) by up to 1/0.8, never its
    memory-bound ones, and the trace records the field; the resolved document keeps it."""
    from cosim.spec import from_document
    from cosim.spec.documents import to_document
    from cosim.workload.trace import OpKind

    def traced(**hardware):
        doc = {"workload": {"kind": "training", "model": "llama2-7b", "model_overrides": {"num_layers": 2},
                            "hardware_overrides": hardware}}
        exp = from_document(doc)[0]
        return exp, exp.workload.generate_trace(8)

    exp, slow = traced(sustained_clock_ratio=0.8)
    _, full = traced()
    compute = full.kind == OpKind.COMPUTE
    stretch = slow.duration_ns[compute] / full.duration_ns[compute]
    assert stretch.min() >= 1.0 and 1.15 < stretch.max() <= 1.25
    assert slow.spec_dict()["hardware"]["sustained_clock_ratio"] == 0.8
    assert "sustained_clock_ratio" not in full.spec_dict()["hardware"]
    assert to_document(exp)["workload"]["hardware_overrides"] == {"sustained_clock_ratio": 0.8}


@pytest.mark.parametrize("item,needles", [
    ("workload.hardware_overrides.clock=1", ("workload.hardware_overrides.clock", "sustained_clock_ratio")),
    ("workload.model=llama2-7b workload.hardware_overrides.sustained_clock_ratio=2",
     ("workload.hardware_overrides.sustained_clock_ratio", "(0, 1]")),
    ("workload.nope=1", ("workload.nope", "valid fields", "rate_per_s")),
    ("network.nope=1", ("network.nope", "link_gbps")),
    ("nope=1", ("nope", "not an experiment field", "network.link_gbps")),
    ("workload.parallelism.tq=2", ("workload.parallelism.tq", "tp, pp, dp")),
    ("workload.parallelism.tp=x", ("workload.parallelism.tp", "not an integer")),
    ("workload.iterations=0", ("workload.iterations", ">= 1")),
    ("network.transport=ethernet", ("network.transport", "roce, ib")),
    ("workload.iterations=", ("workload.iterations", "empty")),
    ("=3", ("NAME=VALUE",)),
    ("HostNic::MtuBytes=abc", ("HostNic::MtuBytes",)),
    ("faults=x", ("--fault",)),
    ("hosts=4 network.hosts=8", ("network.hosts", "twice", "hosts")),
])
def test_bad_set_is_one_line_naming_the_field(tmp_path, capsys, item, needles):
    """An unknown path lists the valid fields; a bad value names its field; nothing is written."""
    sets = [a for one in item.split(" ") for a in ("--set", one)]
    code, _, err = run_main(["run", *sets, "-o", str(tmp_path / "x.h5")], capsys)
    _one_line_error(code, err, *needles)
    assert not (tmp_path / "x.h5").exists()


def test_trace_set_takes_the_experiment_paths_of_its_fields(capsys):
    """cosim trace --set reads workload.parallelism.* and workload.model_overrides.* as cosim run does."""
    code, out, err = run_main(["trace", "--model", "llama2-7b", "--set", "workload.parallelism.tp=2",
                               "--set", "workload.model_overrides.num_layers=2"], capsys)
    assert code == 0, err
    assert " tp=2 " in out
    code, _, err = run_main(["trace", "--set", "workload.parallelism.tq=2"], capsys)
    _one_line_error(code, err, "parallelism.tq", "tp")


def test_set_and_its_own_option_together_is_refused(capsys):
    """A field given by its option and by --set would be decided by their order: refused."""
    code, _, err = run_main(["run", "--transport", "ib", "--set", "network.transport=roce", "--dry-run"], capsys)
    _one_line_error(code, err, "network.transport", "once")


def test_sweep_set_applies_to_every_point_and_not_to_swept_fields(tmp_path, capsys):
    """cosim sweep --set sets a field on every point (their files are new points); a swept field is refused."""
    code, plain, err = run_main(["sweep", str(SWEEP), "-o", str(tmp_path / "a"), "--dry-run"], capsys)
    assert code == 0, err
    code, fast, err = run_main(["sweep", str(SWEEP), "-o", str(tmp_path / "a"), "--set", "network.link_gbps=400",
                                "--dry-run"], capsys)
    assert code == 0, err
    files = lambda text: {line.split()[1] for line in text.splitlines() if line.strip()[:1].isdigit()}  # noqa: E731
    assert len(files(plain)) == len(files(fast)) == 7 and not files(plain) & files(fast)
    from cosim.sweep.spec import load_sweep

    sweep = load_sweep(SWEEP, {"network.link_gbps": 400.0})
    assert {p.experiment().network.link_gbps for p in sweep.points} == {400.0}
    code, _, err = run_main(["sweep", str(SWEEP), "--set", "dcqcn=false", "--dry-run"], capsys)
    _one_line_error(code, err, "dcqcn", "[grid]")


@pytest.mark.parametrize("args", [
    ["run", "--topology", ""], ["run", "--hosts", ""], ["run", "--transport", ""], ["run", "-o", ""],
    ["run", "--pattern", ""], ["run", "--name", ""], ["run", "--trace", ""], ["run", "--parts-dir", ""],
    ["run", "--max-sim-time-ms", " "], ["run", "--gpus-per-server", ""], ["run", "--shard", ""],
    ["sweep", str(SWEEP), "-o", ""], ["trace", "--model", ""], ["trace", "--model", "llama2-7b", "-o", ""],
    ["trace", "--model", "llama2-7b", "--gpu", ""],
    ["collective", "--topology", ""], ["collective", "-o", ""], ["collective", "--gpu", ""],
    ["collective", "--sizes", ""], ["collective", "--algorithm", ""],
    ["inspect", "--run", "", "x.h5"], ["plot", "-o", "", "x.h5"], ["plot", "--run", "", "x.h5"],
    ["report", "-o", "", "x.h5"], ["export", "--perfetto", "-o", "", "x.h5"], ["export", "--run", "", "x.h5"],
    ["merge", "-o", "", "sweep"], ["calibrate", "-o", "", "x.csv", "--gpu", "h100"],
])
def test_empty_option_values_are_refused(tmp_path, capsys, monkeypatch, args):
    """'' is never "the default": one line naming the option, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(args, capsys)
    option = next(a for a in args if a.startswith("-") and args[args.index(a) + 1].strip() == "")
    _one_line_error(code, err, option)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("field,value", [("hardware_overrides", {"sustained_clock_ratio": 0.9}),
                                         ("model_overrides", {"num_layers": 2}), ("parallelism", {"tp": 2})])
def test_generation_fields_on_a_trace_file_name_themselves(field, value):
    """A trace file carries its model, parallelism and GPU: the refusal names the generation field given."""
    from cosim.spec import from_document

    with pytest.raises(CosimInputError) as exc:
        from_document({"workload": {"kind": "training", "trace": "t.h5", field: value}})
    assert exc.value.field == f"workload.{field}" and "not to a trace file" in str(exc.value)
