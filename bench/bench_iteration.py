"""One full training iteration of LLaMA-2 7B co-simulated packet by packet: wall time, packet-hops/s, peak RSS.

Workload (cosim.workload): LLaMA-2 7B, all 32 layers, sequence 4096, TP 8 inside each 8-GPU H100 server
(NVLink), DP 8 across 8 servers, micro-batch 1, global batch 32 (4 micro-batches per rank), gradient
all-reduce buckets overlapping the backward pass (no ZeRO unless --zero). Fabric: rail-optimized, 8 rails
of 8 NICs at 400 Gbps, 4 spines, 1 µs links. Each fabric runs in a fresh process, so the peak RSS of a row
is that fabric's alone (ru_maxrss of the worker: trace, lowering, simulation and result tables).

    python bench/bench_iteration.py                  # both fabrics, one after the other (minutes)
    python bench/bench_iteration.py --transport roce --layers 8
    python bench/bench_iteration.py --json           # the rows as JSON
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _fabric_workers  # noqa: E402


def run_one(args: argparse.Namespace) -> dict:
    """Build, lower and co-simulate one iteration on ``args.transport`` in this process; return the figures."""
    from cosim.run import run
    from cosim.spec import make
    from cosim.workload.builder import build_trace
    from cosim.workload.hardware import get_hardware
    from cosim.workload.model import get_model
    from cosim.workload.parallelism import ParallelismSpec

    t0 = time.perf_counter()
    trace = build_trace(get_model("llama2-7b", num_layers=args.layers),
                        ParallelismSpec(tp=args.tp, dp=args.dp, micro_batch_size=1, global_batch_size=args.global_batch,
                                        zero_stage=args.zero),
                        get_hardware("h100", gpus_per_host=args.tp))
    t_trace = time.perf_counter() - t0
    exp = make("training", name=args.transport, transport=args.transport, topology="rail-optimized",
               gpus_per_server=args.tp, spines=args.spines, link_gbps=args.gbps, link_delay_ns=1000.0,
               iterations=1, queue_sample_interval_ns=args.queue_interval_ns, max_sim_time_ns=1e11,
               decompose=args.decompose)
    t1 = time.perf_counter()
    rec = run(exp, trace=trace)
    t_total = time.perf_counter() - t0
    s = rec.summary
    return {
        "fabric": args.transport, "layers": args.layers, "ranks": s["n_ranks"], "trace_ops": s["n_ops"],
        "dag_ops": s["n_dag_ops"], "flows": s["n_flows"], "status": s["status"],
        "iteration_ms": (s["iteration_time_ns"] or float("nan")) / 1e6, "exposed_comm_ms":
            (s["exposed_comm_ns"] or float("nan")) / 1e6, "compute_ms": s["compute_time_ns"] / 1e6,
        "trace_s": t_trace, "lower_and_setup_s": (time.perf_counter() - t1) - s["wall_time_s"],
        "sim_s": s["wall_time_s"], "total_s": t_total, "packet_hops": s["packet_hops"],
        "packet_hops_per_s": s["packet_hops_per_s"], "events": s["events"],
        "events_per_s": s["events"] / s["wall_time_s"] if s["wall_time_s"] else 0.0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "pfc_paused_us": s["pfc_paused_ns"] / 1e3, "credit_stall_us": s["credit_stall_ns"] / 1e3,
    }


COLUMNS = (("fabric", "{}"), ("layers", "{:d}"), ("ranks", "{:d}"), ("dag_ops", "{:d}"), ("flows", "{:d}"),
           ("status", "{}"), ("iteration_ms", "{:.2f}"), ("exposed_comm_ms", "{:.2f}"), ("sim_s", "{:.1f}"),
           ("total_s", "{:.1f}"), ("packet_hops", "{:d}"), ("packet_hops_per_s", "{:.3g}"),
           ("events_per_s", "{:.3g}"), ("peak_rss_mb", "{:.0f}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _fabric_workers.add_arguments(ap)
    ap.add_argument("--layers", type=int, default=32, help="transformer layers (LLaMA-2 7B has 32)")
    ap.add_argument("--tp", type=int, default=8, help="tensor parallelism = GPUs per server")
    ap.add_argument("--dp", type=int, default=8, help="data parallelism = servers")
    ap.add_argument("--global-batch", type=int, default=32, help="sequences per iteration")
    ap.add_argument("--zero", type=int, choices=(0, 1, 3), default=0, help="ZeRO stage")
    ap.add_argument("--gbps", type=float, default=400.0, help="link rate")
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--queue-interval-ns", type=float, default=10_000.0,
                    help="queue sampling interval (1 µs keeps ~10^7 queue records on this run)")
    ap.add_argument("--decompose", choices=("off", "auto"), default="off",
                    help="off: the whole run (the packet path's cost); auto: the 8 rails folded to one "
                         "(bench_decompose.py measures that)")
    _fabric_workers.main(__file__, ap.parse_args(), run_one, COLUMNS)


if __name__ == "__main__":
    main()
