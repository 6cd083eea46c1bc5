"""Soak the input contract with thousands of generated inputs (tests/test_fuzz_contract.py runs a dozen each).

    python bench/fuzz_contract.py --examples 1000            # CLI options, damaged traces, damaged results
    python bench/fuzz_contract.py --examples 300 --only trace

Each example runs cosim in a child process (about 1-3 s each on 2 cores); a failure prints the input and the
child's output and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_contract import (  # noqa: E402
    TRACE,
    check_contract,
    cli_args,
    damage_results,
    damage_trace,
    run_cosim,
    trace_damage,
)
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000, help="examples per kind of input")
    ap.add_argument("--only", choices=("cli", "trace", "results"), default=None)
    args = ap.parse_args()
    many = settings(max_examples=args.examples, deadline=None, phases=(Phase.generate,), database=None,
                    suppress_health_check=list(HealthCheck))
    work = Path(tempfile.mkdtemp(prefix="cosim-fuzz-"))
    valid = work / "valid.h5"
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

    for name, fn in (("cli", cli), ("trace", trace), ("results", results)):
        if args.only in (None, name):
            fn()
            print(f"{name}: {args.examples} examples kept the contract")


if __name__ == "__main__":
    main()
