"""Wall and CPU time of the merge, the record and the writing of a decomposed run, paired against another checkout.

    python bench/record_time.py capture /tmp/405b-2k.toml --set workload.flow_blocks=on \
        --set limits.fast_forward=true --engine-output /tmp/2k.pkl
    python bench/record_time.py replay /tmp/405b-2k.toml --set workload.flow_blocks=on \
        --set limits.fast_forward=true --engine-output /tmp/2k.pkl --repeat 3 --reference /tmp/base

``capture`` plans and simulates the run as ``cosim run`` does and pickles what the merge of its parts takes
(the decomposition, the parts' engine outputs, the settings), stopping there: a run that is not decomposed
has no merge and is refused. ``replay`` then runs, in fresh processes, this checkout and (with
``--reference DIR``, before it in every pair) another one on the same pickle: each plans the run again, then
merges, records and writes it, and prints wall and CPU seconds per phase and the file's size; the script
prints the medians, the ratio per pair, and requires the two files of every pair to hold the same datasets
(bench/same_datasets.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PHASES = ("merge", "record", "write")


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _plan(source: str, settings: list[str]):
    from cosim.plan import compile as compile_plan  # noqa: PLC0415 - the checkout on the path decides
    from cosim.run import experiments_of  # noqa: PLC0415

    return compile_plan(experiments_of(source, {k: _value(v) for k, v in (s.split("=", 1) for s in settings)})[0])


class _Captured(BaseException):
    """Unwinds the run once the merge's inputs are pickled (a BaseException: no handler of the run takes it)."""


def capture(args) -> None:
    from cosim.decompose import exact  # noqa: PLC0415
    from cosim.run import execute  # noqa: PLC0415

    def finish(fabric, columns, d, outs, settings, **_):
        with open(args.engine_output, "wb") as f:
            pickle.dump((d, outs, settings), f, protocol=pickle.HIGHEST_PROTOCOL)
        raise _Captured(f"captured {len(outs)} part output(s) in {args.engine_output}")

    exact.finish = finish
    try:
        execute(_plan(args.source, args.set))
    except _Captured as done:
        print(done)
        return
    raise SystemExit("the run was not decomposed: it has no merge to capture")


def replay_once(args) -> None:
    """One replay in this process: a line of JSON with (wall s, CPU s) per phase and the file's bytes."""
    from cosim.decompose import exact  # noqa: PLC0415
    from cosim.record import record  # noqa: PLC0415
    from cosim.results import write_results  # noqa: PLC0415
    from cosim.run import Outcome  # noqa: PLC0415

    plan = _plan(args.source, args.set)
    with open(args.engine_output, "rb") as f:
        d, outs, settings = pickle.load(f)
    stamps = [(time.perf_counter(), time.process_time())]
    out, _ = exact.finish(plan.fabric, plan.dag.columns(), d, outs, settings)
    del outs
    stamps.append((time.perf_counter(), time.process_time()))
    rec = record(plan, Outcome(out=out, dag=plan.dag, states=tuple(p.state for p in plan.jobs),
                               decomposition=d.describe()))
    stamps.append((time.perf_counter(), time.process_time()))
    write_results(args.output, [rec])
    stamps.append((time.perf_counter(), time.process_time()))
    print(json.dumps({phase: [b[0] - a[0], b[1] - a[1]] for phase, a, b in zip(PHASES, stamps, stamps[1:])}
                     | {"bytes": os.path.getsize(args.output)}))


def replay(args) -> None:
    sides = ([("reference", args.reference)] if args.reference else []) + [("this", HERE)]
    results = {name: [] for name, _ in sides}
    for i in range(args.repeat):
        files = {}
        for name, checkout in sides:
            files[name] = f"{args.engine_output}.{name}.h5"
            cmd = [sys.executable, str(Path(__file__).resolve()), "_replay", args.source, "--engine-output",
                   args.engine_output, "-o", files[name], *(f"--set={s}" for s in args.set)]
            done = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(checkout)), cwd=checkout,
                                  capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{checkout}: replay failed:\n{done.stderr}")
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            r = results[name][-1]
            print(f"  pair {i + 1} {name:9s} " + "  ".join(f"{p} {r[p][0]:6.2f} s ({r[p][1]:6.2f} CPU s)"
                                                         for p in PHASES) + f"  {r['bytes']:,} B", flush=True)
        if args.reference:
            same = subprocess.run([sys.executable, str(HERE / "bench" / "same_datasets.py"), files["reference"],
                                   files["this"]], capture_output=True, text=True, check=False)
            if same.returncode:
                raise SystemExit(f"the two checkouts wrote different results:\n{same.stdout}")
    for name, _ in sides:
        rs = results[name]
        print(f"{name:10s} " + "  ".join(f"{p} {statistics.median(r[p][0] for r in rs):6.2f} s" for p in PHASES))
    if args.reference:
        for p in (*PHASES, "record+write"):
            def wall(r, p=p):
                return r["record"][0] + r["write"][0] if p == "record+write" else r[p][0]
            ratios = [wall(b) / wall(a) for a, b in zip(results["reference"], results["this"])]
            print(f"this / reference, {p} wall per pair: {', '.join(f'{x:.2f}' for x in ratios)} "
                  f"(median {statistics.median(ratios):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("capture", "replay", "_replay"))
    parser.add_argument("source", help="a TOML path or shipped experiment name")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override")
    parser.add_argument("--engine-output", required=True, help="the pickle capture writes and replay reads")
    parser.add_argument("--repeat", type=int, default=3, help="replays of each checkout [3]")
    parser.add_argument("--reference", type=lambda p: Path(p).resolve(), help="another checkout, replayed first")
    parser.add_argument("-o", "--output", default=None, help="(_replay) the results file to write")
    args = parser.parse_args()
    args.engine_output = str(Path(args.engine_output).resolve())
    if Path(args.source).is_file():
        args.source = str(Path(args.source).resolve())
    {"capture": capture, "replay": replay, "_replay": replay_once}[args.mode](args)


if __name__ == "__main__":
    main()
