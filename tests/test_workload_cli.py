"""``cosim trace`` through click's CliRunner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cosim.cli.trace import trace
from cosim.workload.trace import read_trace
from cosim.workload.validate import check_trace

REPO = Path(__file__).resolve().parents[1]


def run(*args):
    return CliRunner().invoke(trace, list(args), catch_exceptions=False)


def test_list_models_and_gpus():
    res = run("--list-models")
    assert res.exit_code == 0
    for name in ("llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b", "mixtral-8x7b"):
        assert name in res.output
    assert "6.74B" in res.output
    res = run("--list-gpus")
    assert res.exit_code == 0 and "h100" in res.output and "989" in res.output and "a100" in res.output


def test_small_trace_to_file_with_summary_and_chakra(tmp_path):
    out = tmp_path / "x.h5"
    et = tmp_path / "et"
    res = run("--model", "llama2-7b", "--set", "model.layers=2", "--tp", "2", "--pp", "2", "--dp", "2",
              "--micro-batch", "1", "--global-batch", "8", "--gpu", "h100", "-o", str(out), "--chakra", str(et))
    assert res.exit_code == 0, res.output
    for text in ("all_reduce     tp", "send           pp", "model FLOPs per iteration", "compute time",
                 "pipeline bubble fraction", "(p-1)/(v·m) = 0.2500", f"wrote {out}"):
        assert text in res.output
    tr = read_trace(out)
    check_trace(tr)
    assert tr.spec_dict()["model"]["num_layers"] == 2 and tr.n_ranks == 8
    assert len(list(et.glob("cosim.*.et"))) == 8 and (et / "comm_group.json").is_file()


def test_overrides_and_options_reach_the_specs(tmp_path):
    out = tmp_path / "y.h5"
    res = run("--model", "mixtral-8x7b", "--set", "model.num_layers=2", "--set", "model.seq=512", "--tp", "2",
              "--sp", "--dp", "4", "--ep", "2", "--zero", "1", "--efficiency", "0.4", "--gpus", "8",
              "--set", "parallelism.dp_bucket_bytes=1e6", "--set", "hardware.gpus_per_host=4", "-o", str(out))
    assert res.exit_code == 0, res.output
    specs = read_trace(out).spec_dict()
    assert specs["model"]["seq_length"] == 512 and specs["parallelism"]["ep"] == 2
    assert specs["parallelism"]["dp_bucket_bytes"] == 1_000_000 and specs["parallelism"]["zero_stage"] == 1
    assert specs["hardware"]["compute_efficiency"] == 0.4 and specs["hardware"]["gpus_per_host"] == 4
    assert "all_to_all     ep" in res.output


def test_bad_values_exit_2_with_one_line():
    for args, text in ((["--tp", "6"], "parallelism.tp: 32 heads are not divisible by tp=6"),
                       (["--tp", "2", "--gpus", "16"], "≠ 16 GPUs"),
                       (["--set", "model.layerz=2"], "model.layerz: is not a model field"),
                       (["--set", "model.num_layers=two"], "cannot read 'two' as int"),
                       (["--set", "nonsense"], "is not SCOPE.FIELD=VALUE"),
                       (["--model", "gpt5"], "unknown model preset")):
        res = CliRunner().invoke(trace, args)
        assert res.exit_code == 2, (args, res.output)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and text in lines[0], res.output


def test_click_usage_errors_exit_2():
    res = CliRunner().invoke(trace, ["--zero", "2"])
    assert res.exit_code == 2 and "Invalid value" in res.output


def test_module_top_level_imports_only_click():
    code = ("import sys, cosim.cli.trace; "
            "bad = [m for m in ('numpy', 'h5py', 'google.protobuf') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]"
