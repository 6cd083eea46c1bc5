"""``cosim calibrate``: refits known coefficients from synthetic profiles in Vidur's mlp.csv format, writes a
coefficients file that --gpu accepts, and refuses malformed CSVs with one line naming the column."""

from __future__ import annotations

import csv
import tomllib

import numpy as np
import pytest
from click.testing import CliRunner

from cosim.cli.calibrate import calibrate
from cosim.cli.trace import trace
from cosim.workload.calibrate import (
    GEMM_OPS,
    PROFILE_OPS,
    STREAM_OPS,
    Profiles,
    find_profiles,
    predict_ns,
    read_profiles,
)
from cosim.workload.hardware import get_hardware

#: the coefficients the synthetic profiles are generated from (an H100 with made-up, distinct values)
TRUTH = dict(compute_efficiency=0.7, gemm_memory_efficiency=0.85, gemm_small_m=150.0, gemm_small_n=120.0,
             gemm_small_k=60.0, gemm_wave_weight=0.3, gemm_roofline_sharpness=3.0, gemm_launch_ns=4000.0,
             memory_efficiency=0.9, memory_launch_ns=1500.0, norm_memory_efficiency=0.35, norm_launch_ns=3500.0,
             rope_memory_efficiency=0.45, rope_launch_ns=2000.0, activation_memory_efficiency=0.55,
             activation_launch_ns=2500.0, embedding_memory_efficiency=0.2, embedding_launch_ns=3000.0)
SHAPES = ({"n_head": 32, "n_kv_head": 32, "n_embd": 4096, "n_expanded_embd": 11008},
          {"n_head": 64, "n_kv_head": 8, "n_embd": 8192, "n_expanded_embd": 28672})
TOKENS = (1, 8, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
STATS = ("min", "max", "mean", "median", "std")


def write_profile(path, hw, shape, ops=PROFILE_OPS):
    """A Vidur-format mlp.csv whose median times are ``hw``'s predictions (ms) for ``shape``."""
    rows = [dict(shape, vocab_size=32768, use_gated_mlp="True", num_tokens=n, num_tensor_parallel_workers=t)
            for t in (1, 2, 4, 8) for n in TOKENS]
    cols = {k: np.array([float(r[k]) for r in rows]) for k in ("n_head", "n_kv_head", "n_embd", "n_expanded_embd",
                                                             "vocab_size", "num_tokens", "num_tensor_parallel_workers")}
    cols["use_gated_mlp"] = np.ones(len(rows))
    fake = Profiles(shape=cols, times_ns={op: np.ones(len(rows)) for op in ops}, files=(), digests=())
    times = predict_ns(fake, hw)
    header = [f"time_stats.{op}.{s}" for op in ops for s in STATS] + [
        "n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
        "num_tensor_parallel_workers"]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        for i, r in enumerate(rows):
            out = dict(r)
            for op in ops:
                ms = times[op][i] / 1e6
                out.update({f"time_stats.{op}.{s}": (0.0 if s == "std" else ms) for s in STATS})
            w.writerow(out)


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    """Two models' synthetic profiles, in the directory layout of Vidur's data (gpu/model/mlp.csv)."""
    root = tmp_path_factory.mktemp("profiles") / "h100"
    truth = get_hardware("h100", **TRUTH)
    for name, shape in zip(("small", "large"), SHAPES):
        (root / name).mkdir(parents=True)
        write_profile(root / name / "mlp.csv", truth, shape)
    return root


def test_calibrate_recovers_known_coefficients(synthetic_dir, tmp_path):
    """The fit of noise-free profiles returns the generating coefficients, and its error table is ~0."""
    out = tmp_path / "fitted.toml"
    res = CliRunner().invoke(calibrate, [str(synthetic_dir), "-o", str(out), "--source", "synthetic"])
    assert res.exit_code == 0, res.output
    assert "attn_pre_proj" in res.output and f"wrote {out}" in res.output
    doc = tomllib.loads(out.read_text())
    assert doc["gpu"] == "h100"  # guessed from the path
    fitted = doc["coefficients"]
    for name in ("compute_efficiency", "gemm_memory_efficiency", "gemm_launch_ns") + tuple(
            k for k in TRUTH if not k.startswith(("gemm", "compute"))):
        assert fitted[name] == pytest.approx(TRUTH[name], rel=0.02), name
    for op in PROFILE_OPS:
        assert doc["provenance"]["error"][op]["max"] < 0.01, op
    assert doc["provenance"]["status"] == "fitted" and doc["provenance"]["source"] == "synthetic"
    assert len(doc["provenance"]["sha256"]) == 2 and doc["provenance"]["rows"] == 2 * 4 * len(TOKENS)
    # unfitted coefficients come from the base preset
    assert fitted["attention_efficiency"] == get_hardware("h100").attention_efficiency


def test_calibrated_file_is_a_gpu_for_trace_and_round_trips(synthetic_dir, tmp_path):
    """--gpu FILE.toml builds traces with the fitted coefficients; reading the file twice gives equal specs."""
    out = tmp_path / "mine.toml"
    assert CliRunner().invoke(calibrate, [str(synthetic_dir), "-o", str(out), "-q"]).exit_code == 0
    hw = get_hardware(str(out))
    assert hw == get_hardware(str(out)) and hw.name == "h100" and hw.calibration.startswith("fitted")
    assert hw.compute_efficiency == pytest.approx(TRUTH["compute_efficiency"], rel=0.02)
    res = CliRunner().invoke(trace, ["--set", "model.layers=1", "--gpu", str(out), "--kernels"])
    assert res.exit_code == 0, res.output
    assert "GEMM 4096x12288x4096" in res.output and "flash attention fwd" in res.output


def test_calibrate_with_datasheet_overrides_and_partial_ops(tmp_path):
    """A GPU given by --set datasheet numbers; a profile with only some ops fits those and keeps the rest."""
    truth = get_hardware("h100", hbm_bytes_per_s=4e12, **TRUTH)
    path = tmp_path / "gemms.csv"
    write_profile(path, truth, SHAPES[0], ops=GEMM_OPS + ("add",))
    out = tmp_path / "x.toml"
    res = CliRunner().invoke(calibrate, [str(path), "--gpu", "h100", "--set", "hbm_bytes_per_s=4e12", "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = tomllib.loads(out.read_text())
    assert doc["datasheet"] == {"hbm_bytes_per_s": 4e12}
    assert doc["coefficients"]["memory_efficiency"] == pytest.approx(TRUTH["memory_efficiency"], rel=0.02)
    assert doc["coefficients"]["norm_memory_efficiency"] == get_hardware("h100").norm_memory_efficiency
    assert doc["provenance"]["fitted_memory_kinds"] == ["elementwise"]
    assert get_hardware(str(out)).hbm_bytes_per_s == 4e12


def _one_line_error(args):
    res = CliRunner().invoke(calibrate, args)
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    return lines[0]


@pytest.mark.parametrize("edit, message", [
    (lambda rows: [{k: v for k, v in r.items() if k != "n_embd"} for r in rows], "column n_embd: is missing"),
    (lambda rows: [dict(r, **{"time_stats.add.median": "fast"}) if i == 3 else r for i, r in enumerate(rows)],
     ":5: column time_stats.add.median: cannot read 'fast' as a number"),
    (lambda rows: [dict(r, **{"time_stats.mlp_act.median": "-1"}) for r in rows],
     "column time_stats.mlp_act.median: a kernel time of '-1' ms is outside 1e-06..1e+06 ms"),
    (lambda rows: [dict(r, **{"time_stats.mlp_up_proj.median": "1e308"}) if i == 2 else r for i, r in enumerate(rows)],
     ":4: column time_stats.mlp_up_proj.median: a kernel time of '1e308' ms is outside"),
    (lambda rows: [dict(r, **{"time_stats.mlp_up_proj.median": "1e-300"}) if i == 2 else r for i, r in enumerate(rows)],
     ":4: column time_stats.mlp_up_proj.median: a kernel time of '1e-300' ms is outside"),
    (lambda rows: [dict(r, num_tokens="0") for r in rows], "column num_tokens: must be ≥ 1"),
    (lambda rows: [{k: v for k, v in r.items() if not k.startswith("time_stats")} for r in rows],
     "column time_stats.attn_pre_proj.median: is missing"),
    (lambda rows: [], "has no data rows"),
])
def test_malformed_csv_exits_2_with_one_line_naming_the_column(tmp_path, edit, message):
    """Each defect is reported as one ``Error:`` line with the file, line and column; nothing is written."""
    good = tmp_path / "good.csv"
    write_profile(good, get_hardware("h100"), SHAPES[0])
    with open(good, newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    rows = edit(rows)
    bad = tmp_path / "bad.csv"
    with open(bad, "w", newline="") as fh:
        fields = list(rows[0]) if rows else header
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "never.toml"
    line = _one_line_error([str(bad), "--gpu", "h100", "-o", str(out)])
    assert message in line and "bad.csv" in line
    assert not out.exists()


def test_other_bad_inputs_exit_2(tmp_path):
    """No CSV in the directory, no GPU to divide by, an unknown --set field: one line each."""
    (tmp_path / "empty").mkdir()
    assert "no .csv file" in _one_line_error([str(tmp_path / "empty"), "--gpu", "h100", "-o", str(tmp_path / "a")])
    write_profile(tmp_path / "p.csv", get_hardware("h100"), SHAPES[0])
    assert "--gpu" in _one_line_error([str(tmp_path / "p.csv"), "-o", str(tmp_path / "a.toml")])
    assert "choose among" in _one_line_error([str(tmp_path / "p.csv"), "--gpu", "h100", "--set", "colour=red",
                                              "-o", str(tmp_path / "a.toml")])
    assert find_profiles(tmp_path / "p.csv") == [tmp_path / "p.csv"]
    assert read_profiles([tmp_path / "p.csv"]).n_rows == 4 * len(TOKENS)
    assert set(STREAM_OPS.values()) == {"embedding", "norm", "rope", "activation", "elementwise"}


def test_a_fit_that_ends_where_it_started_is_refused_not_written():
    """A least-squares fit no step improved returns its start: calibrate refuses it naming the kernels, rather
    than writing the starting values as fitted coefficients."""
    from cosim.errors import CosimInputError
    from cosim.workload import calibrate

    assert list(calibrate._moved([0.6, 2000.0], [0.5, 3000.0], "norm kernels")) == [0.6, 2000.0]
    with pytest.raises(CosimInputError, match="did not move from its starting values") as exc:
        calibrate._moved([0.5, 3000.0], [0.5, 3000.0], "norm kernels (rms_norm)")
    assert exc.value.field == "norm kernels (rms_norm)"
