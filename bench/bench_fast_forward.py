"""Steady-state fast-forward against the exact run: GPT-13B on 128 GPUs (bench_gpt13b.py's scenario).

Both runs in this process, exact first: simulator events (deterministic: the primary figure), iteration time,
every collective's time and the p99 flow completion time, with the relative error of the fast-forwarded run;
wall and CPU time of each (plan, simulation, record) as the median over ``--repeat`` pairs, and the
simulation's own wall time (``wall_time_s`` of the summary) of the last pair (all noisy on a shared machine).

    python bench/bench_fast_forward.py                               # RoCE, one pair
    python bench/bench_fast_forward.py --transport ib --repeat 3
    python bench/bench_fast_forward.py --tolerance 0.05 --layers 4
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gpt13b  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transport", choices=("roce", "ib"), default="roce")
    ap.add_argument("--microbatches", type=int, default=1, help="micro-batches per data-parallel replica")
    ap.add_argument("--layers", type=int, default=40, help="transformer layers (GPT-13B has 40)")
    ap.add_argument("--tolerance", type=float, default=0.01, help="limits.fast_forward_tolerance")
    ap.add_argument("--repeat", type=int, default=1, help="exact / fast-forward pairs (wall time: medians)")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="Type::Attribute=value",
                    help="an ns-3 attribute of both runs, e.g. FastForwardController::MinSpan=50us (repeatable)")
    args = ap.parse_args()

    from cosim import fast_forward  # noqa: PLC0415
    from cosim.plan import compile as compile_plan  # noqa: PLC0415
    from cosim.record import record  # noqa: PLC0415
    from cosim.run import execute  # noqa: PLC0415

    exact_exp = bench_gpt13b.experiment(args.transport, args.microbatches, args.layers)
    if args.settings:
        attributes = tuple(exact_exp.network.attributes) + tuple(tuple(a.split("=", 1)) for a in args.settings)
        exact_exp = dataclasses.replace(exact_exp, network=dataclasses.replace(exact_exp.network,
                                                                                attributes=attributes))
    ff_exp = dataclasses.replace(exact_exp, limits=dataclasses.replace(
        exact_exp.limits, fast_forward=True, fast_forward_tolerance=args.tolerance))
    walls: dict[str, list[float]] = {"exact": [], "fast_forward": []}
    cpus: dict[str, list[float]] = {"exact": [], "fast_forward": []}
    records, outcomes = {}, {}
    for _ in range(args.repeat):
        for name, exp in (("exact", exact_exp), ("fast_forward", ff_exp)):
            t0, c0 = time.perf_counter(), time.process_time()
            plan = compile_plan(exp)
            outcomes[name] = execute(plan)
            records[name] = record(plan, outcomes[name])
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
    exact, ff = records["exact"].summary, records["fast_forward"].summary
    errors = fast_forward.time_errors(outcomes["exact"].out, outcomes["fast_forward"].out, outcomes["exact"].dag)
    errors |= fast_forward.summary_errors(exact, ff)
    rows = {
        "transport": args.transport, "tolerance": args.tolerance, "decompose": records["exact"].config.get(
            "decomposition", {}).get("decompose", "?"),
        "events exact": exact["events"], "events fast-forward": ff["events"],
        "events ratio": exact["events"] / max(ff["events"], 1),
        "iteration exact ms": exact["iteration_time_ns"] / 1e6, "iteration fast-forward ms": ff["iteration_time_ns"] / 1e6,
        "spans": ff.get("fast_forward_spans", 0), "spans cut": ff.get("fast_forward_spans_cut", 0),
        "flows uncredited": ff.get("fast_forward_flows_uncredited", 0),
        "credited GB": ff.get("fast_forward_credited_bytes", 0) / 1e9,
        "payload GB": exact["payload_bytes"] / 1e9,
        "wall exact s (median)": statistics.median(walls["exact"]),
        "wall fast-forward s (median)": statistics.median(walls["fast_forward"]),
        "cpu exact s (median)": statistics.median(cpus["exact"]),
        "cpu fast-forward s (median)": statistics.median(cpus["fast_forward"]),
        "event loop exact s": exact["wall_time_s"], "event loop fast-forward s": ff["wall_time_s"],
        "pairs": args.repeat,
    } | errors
    width = max(len(k) for k in rows)
    for key, value in rows.items():
        text = f"{value:.4g}" if isinstance(value, float) and np.isfinite(value) else str(value)
        print(f"{key:<{width}}  {text}")


if __name__ == "__main__":
    main()
