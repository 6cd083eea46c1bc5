"""One training iteration at 1,024 GPUs with exact decomposition: wall time, CPU time and peak RSS.

Workload: LLaMA-2 7B, all 32 layers, sequence 4096, TP 8 inside each 8-GPU H100 server (NVLink), PP 4 and
DP 32 along the rails, micro-batch 1, the default global batch (micro-batch x DP x 4 x PP: 16 micro-batches
per data-parallel replica). Fabric: rail-optimized, 128 servers x 8 rails at 400 Gbps, 8 spines, 1 us links. The TP
collectives couple the 8 rails, which are identical: with ``limits.decompose = auto`` one rail (and the
collective barriers between rails) is simulated and copied to the others (cosim.decompose.exact).

The switches get the buffer of their class (cosim.network.buffers: a 136-port 400 Gbps rail switch is a
51.2 Tbps-class switch); ``--buffer-mib`` sets one explicitly instead.

Each configuration runs in a fresh process, so its peak RSS (ru_maxrss) and CPU time are its own.

    python bench/bench_decompose.py                       # decompose auto (minutes)
    python bench/bench_decompose.py --decompose off       # the whole run (tens of minutes)
    python bench/bench_decompose.py --layers 4 --dp 8     # a smaller case
    python bench/bench_decompose.py --json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def run_one(args: argparse.Namespace) -> dict:
    """Plan and co-simulate one iteration in this process; return the figures."""
    from cosim.plan import compile as compile_plan
    from cosim.run import experiments_of, run

    t0 = time.perf_counter()
    doc = {"name": args.transport, "network": {
        "transport": args.transport, "topology": "rail-optimized", "gpus_per_server": args.tp, "spines": args.spines,
        "link_gbps": args.gbps, "link_delay_ns": 1000.0,
        "attributes": {} if args.buffer_mib is None else {"SharedBufferMmu::BufferBytes": str(args.buffer_mib << 20)}},
        "workload": {"kind": "training", "model": "llama2-7b", "gpu": "h100", "iterations": 1,
                     "model_overrides": {"num_layers": args.layers},
                     "parallelism": {"tp": args.tp, "pp": args.pp, "dp": args.dp}},
        "limits": {"decompose": args.decompose}}
    exp = experiments_of(doc)[0]
    planned = compile_plan(exp)
    t_plan = time.perf_counter() - t0
    rec = run(exp, plan=planned, jobs=args.jobs)
    total = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    s, d = rec.summary, rec.config["decomposition"]
    return {
        "fabric": args.transport, "decompose": d["decompose"], "layers": args.layers, "ranks": s["n_ranks"],
        "dag_ops": s["n_dag_ops"], "ops_simulated": d.get("decompose_ops_per_run_max", s["n_dag_ops"]),
        "flows": s["n_flows"], "status": s["status"], "iteration_ms": (s["iteration_time_ns"] or float("nan")) / 1e6,
        "plan_s": t_plan, "sim_s": s["wall_time_s"], "total_s": total,
        "cpu_s": usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime,
        "peak_rss_mb": max(usage.ru_maxrss, children.ru_maxrss) / 1024, "packet_hops": s["packet_hops"],
        "reason": d["decompose_reason"],
    }


COLUMNS = (("fabric", "{}"), ("decompose", "{}"), ("ranks", "{:d}"), ("dag_ops", "{:d}"), ("ops_simulated", "{:d}"),
           ("flows", "{:d}"), ("status", "{}"), ("iteration_ms", "{:.3f}"), ("plan_s", "{:.1f}"), ("sim_s", "{:.1f}"),
           ("total_s", "{:.1f}"), ("cpu_s", "{:.1f}"), ("peak_rss_mb", "{:.0f}"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transport", choices=("roce", "ib"), default="roce")
    p.add_argument("--decompose", choices=("auto", "off"), default="auto")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--pp", type=int, default=4)
    p.add_argument("--dp", type=int, default=32)
    p.add_argument("--gbps", type=float, default=400.0)
    p.add_argument("--spines", type=int, default=8)
    p.add_argument("--buffer-mib", type=int, default=None,
                   help="switch buffer, MiB [the switch class's default: see the module docstring]")
    p.add_argument("--jobs", type=int, default=1, help="local processes for independent parts")
    p.add_argument("--json", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(run_one(args)))
        return
    cmd = [sys.executable, __file__, "--worker"] + [a for a in sys.argv[1:] if a != "--json"]
    row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(row, indent=1))
        return
    print(" | ".join(name for name, _ in COLUMNS))
    print(" | ".join(fmt.format(row[name]) for name, fmt in COLUMNS))
    print(f"({row['reason']})")


if __name__ == "__main__":
    main()
