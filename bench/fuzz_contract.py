"""Soak the input contract with thousands of generated inputs (tests/test_fuzz_contract.py runs a few each).

    python bench/fuzz_contract.py --examples 1000            # every kind below
    python bench/fuzz_contract.py --examples 300 --only trace
    python bench/fuzz_contract.py --examples 100 --only parts faults writers calibration inference

Kinds: cli (generated `cosim run` options), trace (damaged traces), results (damaged results files), parts
(merges of mixed or damaged `--parts-dir` folders: a merge that succeeds is one experiment's run), faults
(overlapping and Poisson outages of one link: its down time is the union of its faults), writers (two
`cosim run --append` into one file at once: both runs kept, or one rescued with a message), calibration
(damaged and extreme profile CSV cells for `cosim calibrate`), inference (tiny and huge arrival rates).
Each example runs cosim in a child process (about 1-3 s each on 2 cores); a failure prints the input and the
child's output and exits 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_contract import (  # noqa: E402
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
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KINDS = ("cli", "trace", "results", "parts", "faults", "writers", "calibration", "inference")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000, help="examples per kind of input")
    ap.add_argument("--only", nargs="+", choices=KINDS, default=KINDS, help="kinds of input to generate")
    args = ap.parse_args()
    many = settings(max_examples=args.examples, deadline=None, phases=(Phase.generate,), database=None,
                    suppress_health_check=list(HealthCheck))
    work = Path(tempfile.mkdtemp(prefix="cosim-fuzz-"))
    valid = work / "valid.h5"
    if {"trace", "results"} & set(args.only):
        check_contract(run_cosim(["run", "--hosts", "4", "--flow-bytes", "64KiB", "--transport", "both", "-q",
                                  "-o", str(valid)], cwd=work))

    @many
    @given(options=cli_args())
    def cli(options):
        out = work / "r.h5"
        out.unlink(missing_ok=True)
        argv = ["run", "--max-sim-time-ms", "0.5", "--hosts", "4", "--flow-bytes", "16KiB"]
        for opt, value in options:
            argv += [opt, value]
        check_contract(run_cosim([*argv, "-q", "-o", str(out)], cwd=work), out)

    @many
    @given(damage=trace_damage())
    def trace(damage):
        bad, out = work / "bad-trace.h5", work / "t.h5"
        out.unlink(missing_ok=True)
        damage_trace(TRACE, bad, *damage)
        check_contract(run_cosim(["run", "--trace", str(bad), "--gpus-per-server", "4", "--max-sim-time-ms", "2",
                                  "-q", "-o", str(out)], cwd=work), out)

    @many
    @given(damage=trace_damage())
    def results(damage):
        folder = work / "merge"
        folder.mkdir(exist_ok=True)
        bad, merged = folder / "bad.h5", work / "m.h5"
        merged.unlink(missing_ok=True)
        _, kind, index, value = damage
        damage_results(valid, bad, "", kind, index, value)
        for verb in (["inspect", str(bad)], ["compare", str(bad)], ["merge", str(folder), "-o", str(merged)]):
            check_contract(run_cosim(verb, cwd=work), merged if verb[0] == "merge" else None)

    if "parts" in args.only:
        good_a, good_b = make_parts(work)

    @many
    @given(damage=parts_damage())
    def parts(damage):
        folder, merged = work / "damaged-parts", work / "pm.h5"
        shutil.rmtree(folder, ignore_errors=True)
        merged.unlink(missing_ok=True)
        merge_damaged_parts(good_a, good_b, folder, merged, damage, cwd=work)

    @many
    @given(faults=fault_options())
    def faults(faults):
        out = work / "f.h5"
        out.unlink(missing_ok=True)
        if run_with_faults(faults, out).returncode in (0, 1):
            check_down_time_is_the_union(out)

    @many
    @given(same_name=st.booleans(), stagger_ms=st.integers(0, 2500))
    def writers(same_name, stagger_ms):
        folder = work / "writers"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        concurrent_appends(folder, ("x", "x") if same_name else ("x", "y"), stagger_ms / 1000)

    @many
    @given(damage=calibration_damage())
    def calibration(damage):
        bad, out = work / "profile.csv", work / "coefficients.toml"
        out.unlink(missing_ok=True)
        damage_calibration(PROFILE, bad, *damage)
        check_contract(run_cosim(["calibrate", str(bad), "--gpu", "a100", "-q", "-o", str(out)], cwd=work), out)

    @many
    @given(setting=inference_settings())
    def inference(setting):
        rate, extra = setting
        argv = ["run", "disaggregated-serving", "--transport", "roce", "--set", f"workload.rate_per_s={rate}"]
        for s in extra:
            argv += ["--set", s]
        check_contract(run_cosim([*argv, "--dry-run"], cwd=work))

    kinds = {"cli": cli, "trace": trace, "results": results, "parts": parts, "faults": faults, "writers": writers,
             "calibration": calibration, "inference": inference}
    for name in args.only:
        kinds[name]()
        print(f"{name}: {args.examples} examples kept the contract")


if __name__ == "__main__":
    main()
