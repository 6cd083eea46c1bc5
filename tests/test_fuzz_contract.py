"""The input contract under generated input (a small sample here; bench/fuzz_contract.py soaks thousands):
exit 0/1, or 2 with one ``Error:`` line, never a traceback, an abort or a half-written file."""

from __future__ import annotations

from fuzz_contract import (
    TRACE,
    check_contract,
    cli_args,
    damage_results,
    damage_trace,
    run_cosim,
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
