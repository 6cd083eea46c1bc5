"""The analytic reliability model (cosim.reliability, ``cosim reliability``) against hand-computed cases."""

from __future__ import annotations

import math

import pytest
from conftest import help_output_loading_nothing_heavy, run_main

from cosim.errors import CosimInputError
from cosim.reliability import (
    PRESETS,
    ComponentCounts,
    FailureRates,
    clos_counts,
    daly_interval_s,
    ettr,
    evaluate,
    young_interval_s,
)


@pytest.mark.parametrize("gpus,radix,switches,links", [
    (64, 64, 1, 64),  # one switch holds every NIC
    (2048, 64, 2048 // 32 + 2048 // 64, 2 * 2048),  # two tiers: 64 leaves, 32 spines
    (16384, 64, 256 + 2 * 512, 3 * 16384),  # three tiers
])
def test_clos_counts_by_hand(gpus, radix, switches, links):
    """A non-blocking folded Clos: ceil(n/(r/2)) switches per lower tier, ceil(n/r) on top, n links per layer."""
    c = clos_counts(gpus, switch_radix=radix)
    assert (c.gpus, c.nics, c.hosts, c.switches, c.links) == (gpus, gpus, gpus // 8, switches, links)


def test_llama3_preset_reproduces_its_source_interruption_rate():
    """The preset is fitted to 419 interruptions in 54 days on 16,384 GPUs: the model gives them back."""
    job = evaluate(clos_counts(16384), PRESETS["llama3-h100"], checkpoint_write_s=60, restart_s=600)
    assert job.interruptions_per_day == pytest.approx(419 / 54, rel=1e-12)
    assert job.mttf_h == pytest.approx(54 * 24 / 419, rel=1e-12)


def test_mttf_is_the_inverse_of_summed_rates():
    """1,000 GPUs at 10^5 FIT and 10 switches at 10^6 FIT: (10^8 + 10^7) / 10^9 = 0.11 failures per hour."""
    counts = ComponentCounts(gpus=1000, hosts=125, nics=1000, links=2000, switches=10)
    job = evaluate(counts, FailureRates(gpu_fit=1e5, switch_fit=1e6), checkpoint_write_s=0, restart_s=0,
                   interval_s=3600)
    assert job.mttf_h == pytest.approx(1 / 0.11)
    assert job.interruptions_per_day == pytest.approx(0.11 * 24)


def test_young_and_daly_intervals_by_hand():
    """δ = 60 s, M = 3600 s: Young sqrt(2·60·3600) = 657.27 s; Daly's correction with x = δ/2M = 1/120:
    657.27·(1 + sqrt(x)/3 + x/9) − 60 = 617.88 s; δ ≥ 2M checkpoints every M."""
    assert young_interval_s(60, 3600) == pytest.approx(657.267, abs=1e-3)
    assert daly_interval_s(60, 3600) == pytest.approx(617.876, abs=1e-3)
    assert daly_interval_s(8000, 3600) == 3600


def test_ettr_by_hand_and_its_limits():
    """τ = 1000 s, δ = 100 s, R = 200 s, M = 10^4 s: 1000 / (10^4 · e^0.02 · (e^0.11 − 1)) = 0.84298;
    without failures only checkpoint writes cost: τ / (τ + δ); at first order in 1/M it is
    τ/(τ+δ) · (1 − (R + (τ+δ)/2) / M)."""
    assert ettr(interval_s=1000, checkpoint_write_s=100, restart_s=200, mttf_s=1e4) == pytest.approx(0.842978, abs=1e-6)
    assert ettr(interval_s=1000, checkpoint_write_s=100, restart_s=200, mttf_s=math.inf) == pytest.approx(1000 / 1100)
    m = 1e7
    first_order = 1000 / 1100 * (1 - (200 + 550) / m)
    assert ettr(interval_s=1000, checkpoint_write_s=100, restart_s=200, mttf_s=m) == pytest.approx(first_order, rel=1e-6)


@pytest.mark.parametrize("mttf_s", [1800.0, 3600.0 * 3, 3600.0 * 50])
def test_daly_interval_maximises_ettr(mttf_s):
    """Checkpointing 10 % more or less often than Daly's optimum keeps less of the wall-clock time."""
    best = daly_interval_s(60, mttf_s)
    at = [ettr(interval_s=best * f, checkpoint_write_s=60, restart_s=600, mttf_s=mttf_s) for f in (0.9, 1.0, 1.1)]
    assert at[1] > at[0] and at[1] > at[2]


def test_ettr_falls_and_tokens_rise_sublinearly_with_gpus():
    """More GPUs fail more often: ETTR falls monotonically, so tokens per day grow less than the GPU count."""
    jobs = [evaluate(clos_counts(n), PRESETS["llama3-h100"], checkpoint_write_s=60, restart_s=600, iteration_s=1.0,
                     tokens_per_gpu_iteration=4096) for n in (1024, 16384, 100000)]
    assert jobs[0].ettr > jobs[1].ettr > jobs[2].ettr
    assert jobs[0].tokens_per_day == pytest.approx(jobs[0].ettr * 86400 * 4096 * 1024)
    assert jobs[2].tokens_per_day / jobs[0].tokens_per_day < 100000 / 1024


def test_no_failures_means_no_checkpoint_cost():
    """The ``none`` preset: infinite MTTF, ETTR 1."""
    job = evaluate(clos_counts(4096), PRESETS["none"], checkpoint_write_s=60, restart_s=600)
    assert math.isinf(job.mttf_h) and job.ettr == 1.0


def test_bad_rates_are_input_errors():
    """A negative rate is a one-line input error naming the field."""
    with pytest.raises(CosimInputError, match="gpu_fit"):
        FailureRates(gpu_fit=-1.0)


def test_cli_table_plot_and_errors(tmp_path, capsys):
    """The table has a row per size with the model's ETTR; --plot writes a PNG; a bad --set or --gpus exits 2."""
    png = tmp_path / "ettr.png"
    code, out, err = run_main(["reliability", "--gpus", "1024,16384", "--iteration-ms", "1000",
                               "--tokens-per-gpu-iteration", "4096", "--plot", str(png)], capsys)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1024"], ["16384"])]
    want = evaluate(clos_counts(16384), PRESETS["llama3-h100"], checkpoint_write_s=60, restart_s=600)
    assert float(rows[1][7]) == pytest.approx(want.ettr, abs=1e-3)
    assert png.read_bytes()[:4] == b"\x89PNG"
    code, _, err = run_main(["reliability", "--set", "cpu_fit=1"], capsys)
    assert code == 2 and err.startswith("Error: ") and len(err.strip().splitlines()) == 1
    code, _, err = run_main(["reliability", "--gpus", "1e15"], capsys)  # no exponential overflow
    assert code == 2 and "must be 1 to 100,000,000" in err and len(err.strip().splitlines()) == 1
    assert "reliability" in help_output_loading_nothing_heavy([["reliability"]])
