"""The input contract under generated input (a small sample here; bench/fuzz_contract.py soaks thousands):
exit 0/1, or 2 with one ``Error:`` line, never a traceback, an abort or a half-written file; where features
meet, a property on top: a merge is never a mix of experiments, an element is down for the union of its
faults, and two writers of one file never lose a run."""

from __future__ import annotations

import pytest
from fuzz_contract import (
    PROFILE,
    TRACE,
    calibration_damage,
    check_contract,
    check_down_time_is_the_union,
    cli_args,
    concurrent_appends,
    damage_calibration,
    damage_results,
    damage_trace,
    fault_options,
    inference_settings,
    make_parts,
    merge_damaged_parts,
    parts_damage,
    run_cosim,
    run_with_faults,
    trace_damage,
)
from hypothesis import HealthCheck, Phase, given, settings

FEW = settings(max_examples=12, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FEW
@given(options=cli_args())
def test_generated_run_options_keep_the_contract(options, tmp_path_factory):
    """`cosim run` with generated options (valid and hostile values, any mix) keeps the contract."""
    out = tmp_path_factory.mktemp("cli") / "r.h5"
    argv = ["run", "--max-sim-time-ms", "0.5", "--hosts", "4", "--flow-bytes", "16KiB"]
    for opt, value in options:
        argv += [opt, value]
    check_contract(run_cosim([*argv, "-q", "-o", str(out)], cwd=out.parent), out)


@FEW
@given(damage=trace_damage())
def test_damaged_trace_keeps_the_contract(damage, tmp_path_factory):
    """`cosim run --trace` of a trace with one dataset damaged keeps the contract."""
    folder = tmp_path_factory.mktemp("trace")
    bad, out = folder / "bad.h5", folder / "r.h5"
    damage_trace(TRACE, bad, *damage)
    proc = run_cosim(["run", "--trace", str(bad), "--gpus-per-server", "4", "--max-sim-time-ms", "2", "-q",
                      "-o", str(out)], cwd=folder)
    check_contract(proc, out)


@FEW
@given(damage=trace_damage())
def test_damaged_results_keep_the_contract(damage, valid_results, tmp_path_factory):
    """inspect, compare and merge of a results file with one dataset or attribute damaged keep the contract,
    and merge writes nothing from damaged input."""
    folder = tmp_path_factory.mktemp("results")
    bad = folder / "bad.h5"
    _, kind, index, value = damage
    damage_results(valid_results, bad, "", kind, index, value)
    for verb in (["inspect", str(bad)], ["compare", str(bad)], ["merge", str(folder), "-o", str(folder / "m.h5")]):
        check_contract(run_cosim(verb, cwd=folder), folder / "m.h5" if verb[0] == "merge" else None)


FEWER = settings(FEW, max_examples=5)


@pytest.fixture(scope="module")
def parts_folders(tmp_path_factory):
    """Complete parts folders of experiment A and of its edited version B (fuzz_contract.PARTS_VARIANTS)."""
    return make_parts(tmp_path_factory.mktemp("parts"))


@FEWER
@given(damage=parts_damage())
def test_merges_of_mixed_or_damaged_parts_keep_the_contract(damage, parts_folders, tmp_path_factory):
    """`cosim merge` of a parts folder with a part or manifest of another experiment, or one damaged, keeps
    the contract, and a merge that succeeds is one experiment's run (never a mix)."""
    folder = tmp_path_factory.mktemp("merge")
    damaged, merged = folder / "parts", folder / "m.h5"
    merge_damaged_parts(*parts_folders, damaged, merged, damage, cwd=folder)


@FEWER
@given(faults=fault_options())
def test_overlapping_and_poisson_faults_down_an_element_for_their_union(faults, tmp_path_factory):
    """Overlapping, nested and Poisson outages of one link keep the contract, and the link is down exactly
    while any of them is active (the faults table's down/up actions against the union of the outages)."""
    out = tmp_path_factory.mktemp("faults") / "f.h5"
    assert run_with_faults(faults, out).returncode in (0, 1)
    check_down_time_is_the_union(out)


@pytest.mark.parametrize("names", [("x", "y"), ("x", "x")])
def test_two_appends_at_once_never_lose_a_run(names, tmp_path):
    """Two `cosim run --append` into one file at once: both runs kept, or one saved elsewhere with a
    message (or, for the same run name, one refused before it simulated)."""
    concurrent_appends(tmp_path, names)


@settings(FEW, max_examples=8)
@given(damage=calibration_damage())
def test_damaged_calibration_profiles_keep_the_contract(damage, tmp_path_factory):
    """`cosim calibrate` of a profile CSV with a damaged or extreme cell, a dropped column or missing rows
    keeps the contract (a fit that fails is an error naming it, not coefficients written)."""
    folder = tmp_path_factory.mktemp("calibrate")
    bad, out = folder / "profile.csv", folder / "c.toml"
    damage_calibration(PROFILE, bad, *damage)
    check_contract(run_cosim(["calibrate", str(bad), "--gpu", "a100", "-q", "-o", str(out)], cwd=folder), out)


@settings(FEW, max_examples=4)
@given(setting=inference_settings())
def test_inference_arrival_rates_keep_the_contract(setting, tmp_path_factory):
    """A serving experiment with a tiny, huge or hostile arrival rate keeps the contract (its plan is made
    and checked by --dry-run)."""
    rate, extra = setting
    argv = ["run", "disaggregated-serving", "--transport", "roce", "--set", f"workload.rate_per_s={rate}"]
    for s in extra:
        argv += ["--set", s]
    check_contract(run_cosim([*argv, "--dry-run"], cwd=tmp_path_factory.mktemp("inference")))
