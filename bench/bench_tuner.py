"""Does the tuner pick what the simulation finds fastest? All-reduce over sizes × server counts.

For every point (S bytes on k servers of 8 H100s, 400 Gb/s rail-optimized RoCE by default) it co-simulates
the call with every algorithm "auto" weighs (ring and tree), asks the tuner for its choice (the lowering's
own :func:`cosim.collectives.lower.resolve_algorithm`), and prints the simulated times, the tuner's
estimates, the choice and how much slower the choice simulates than the fastest algorithm ("regret").
The issue's acceptance: regret ≤ 10 % everywhere.

    python bench/bench_tuner.py                       # the full table: 8 B..1 GiB (×8) × 2..32 servers
    python bench/bench_tuner.py --sizes 8,1MiB --servers 2,4 --transport ib
    python bench/bench_tuner.py --dag-ops             # ops of a few tree and ring calls
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cosim.collectives.algorithms import Algorithm
from cosim.collectives.lower import group_shape, resolve_algorithm
from cosim.collectives.tuning import TuningModel
from cosim.kinds.training import tuning_model
from cosim.sweep.collective import CollectiveSweep, collective_trace, parse_sizes, run_point
from cosim.workload.trace import AlgoHint, CollKind

ALGORITHMS = ("ring", "tree")


def tuner_for(sweep: CollectiveSweep, transport: str, size: int) -> TuningModel:
    """The tuning model the lowering of this sweep's point uses."""
    trace = collective_trace(CollKind.ALL_REDUCE, size, sweep.n_ranks, gpus_per_server=sweep.gpus_per_server,
                             gpu=sweep.gpu)
    return tuning_model(sweep.experiment(transport, size).network, trace)


def point(k: int, size: int, transport: str, gps: int = 8) -> dict:
    """Simulated time of each algorithm, the tuner's estimates and its choice for one (servers, size)."""
    out = {"servers": k, "size": size}
    members = np.arange(k * gps)
    for name in ALGORITHMS:
        sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=k * gps, gpus_per_server=gps,
                                algorithm=name, transports=(transport,))
        row, _ = run_point(sweep, transport, size)
        out[name] = row.time_us
        tuner = tuner_for(sweep, transport, size)
        est = resolve_algorithm(CollKind.ALL_REDUCE, name, AlgoHint.AUTO, members, gps, tuner, size)
        out[f"{name}_est"] = est.time_ns / 1e3
    best = resolve_algorithm(CollKind.ALL_REDUCE, "auto", AlgoHint.AUTO, members, gps, tuner, size)
    out["shape"] = group_shape(members, gps)
    out["choice"] = Algorithm(best.algorithm).name.lower()
    out["regret"] = out[out["choice"]] / min(out[a] for a in ALGORITHMS) - 1
    return out


def dag_ops() -> None:
    """Ops one all-reduce's schedule holds, tree (the protocol the tuner picks for it) and ring."""
    from cosim.collectives.algorithms import schedule
    from cosim.collectives.tuning import Shape
    tuner = TuningModel.for_hardware({"name": "h100", "nvlink_bytes_per_s": 450e9})
    print(f"{'ranks':>6} {'size':>11} {'tree ops':>10} {'ring ops':>10}")
    for n, size in ((32, 4 << 20), (128, 16 << 20), (256, 128 << 20), (256, 1 << 30)):
        members = np.arange(n)
        proto = tuner.best_protocol(CollKind.ALL_REDUCE, Algorithm.TREE, Shape(n, n // 8, 8), size).protocol
        tree = schedule(CollKind.ALL_REDUCE, Algorithm.TREE, members, size, 4 << 20, 8, protocol=proto)[1]
        ring = schedule(CollKind.ALL_REDUCE, Algorithm.RING, members, size, 4 << 20, 8)[1]
        print(f"{n:>6} {size:>11} {tree.n_ops:>10} {ring.n_ops:>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="8..1GiB:8", help="sizes as cosim collective --sizes takes them")
    ap.add_argument("--servers", default="2,4,8,16,32", help="server counts, comma-separated")
    ap.add_argument("--transport", default="roce", choices=("roce", "ib"))
    ap.add_argument("--dag-ops", action="store_true", help="print the DAG ops of a few calls instead")
    args = ap.parse_args()
    if args.dag_ops:
        dag_ops()
        return
    sizes = parse_sizes(args.sizes)
    servers = [int(x) for x in args.servers.split(",")]
    print(f"{'servers':>7} {'size':>11} {'ring':>10} {'tree':>10} {'ring est':>10} {'tree est':>10} "
          f"{'choice':>6} {'regret':>7} {'wall':>6}")
    print(f"{'':>7} {'(B)':>11} {'(us)':>10} {'(us)':>10} {'(us)':>10} {'(us)':>10} {'':>6} {'(%)':>7} {'(s)':>6}")
    worst = 0.0
    for k in servers:
        for s in sizes:
            t0 = time.perf_counter()
            p = point(k, s, args.transport)
            worst = max(worst, p["regret"])
            print(f"{k:>7} {s:>11} {p['ring']:>10.2f} {p['tree']:>10.2f} {p['ring_est']:>10.2f} "
                  f"{p['tree_est']:>10.2f} {p['choice']:>6} {100 * p['regret']:>7.1f} "
                  f"{time.perf_counter() - t0:>6.1f}", flush=True)
    print(f"worst regret: {100 * worst:.1f} %")


if __name__ == "__main__":
    main()
