"""GPT-13B on 128 GPUs (TP8 x DP16, rail-optimized 400 Gbps): one iteration co-simulated packet by packet.

The scenario packet-level simulators of LLM training are compared on: GPT-3 13B (Brown et al. 2020: 40
layers, d_model 5120 as 40 heads x 128, FFN 4 x d_model, sequence 2048), tensor parallel 8 inside each
8-GPU H100 server (NVLink), data parallel 16 across 16 servers (fp32 gradient all-reduce over the rails),
micro-batch 1, ``--microbatches`` per replica. Fabric: rail-optimized, 8 rails of 16 NICs at 400 Gbit/s,
1 us links, the defaults for everything else (buffers per switch class, derived time limit). Target
(issue 15): one iteration <= 60 s.

Each fabric runs in a fresh worker process; a row gives its CPU seconds (user + system of the worker),
wall seconds and peak RSS (ru_maxrss: trace, lowering, simulation and tables). The machine is shared:
wall clock is noisy, CPU time less so.

    python bench/bench_gpt13b.py                    # RoCE, then InfiniBand
    python bench/bench_gpt13b.py --transport roce --microbatches 1
    python bench/bench_gpt13b.py --dry-run          # the plan only: DAG ops, flows, packet-hops
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _fabric_workers  # noqa: E402

#: GPT-3 13B on the gpt3-175b preset's architecture (layernorm, learned positions, 51,200 vocabulary)
GPT13B = {"num_layers": 40, "hidden_size": 5120, "num_heads": 40, "num_kv_heads": 40, "ffn_hidden_size": 20480}


def experiment(fabric: str, microbatches: int, layers: int):
    """The Experiment of one row."""
    from cosim.spec import from_document  # noqa: PLC0415

    doc = {"name": fabric,
           "network": {"transport": fabric, "topology": "rail-optimized", "link_gbps": 400.0,
                       "link_delay_ns": 1000.0},
           "workload": {"kind": "training", "model": "gpt3-175b", "model_overrides": GPT13B | {"num_layers": layers},
                        "parallelism": {"tp": 8, "dp": 16, "micro_batch_size": 1,
                                        "global_batch_size": 16 * microbatches}},
           "telemetry": {"queue_sample_interval_ns": 10_000.0}}
    return from_document(doc)[0]


def cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_one(args: argparse.Namespace) -> dict:
    """Plan and co-simulate one iteration on ``args.transport`` in this process; return the figures."""
    from cosim.plan import compile as compile_plan  # noqa: PLC0415
    from cosim.plan.describe import whole_work_estimate  # noqa: PLC0415
    from cosim.run import run  # noqa: PLC0415

    exp = experiment(args.transport, args.microbatches, args.layers)
    t0, c0 = time.perf_counter(), cpu_s()
    plan = compile_plan(exp)
    t_plan, c_plan = time.perf_counter() - t0, cpu_s() - c0
    trace, _ = plan.jobs[0].state
    row = {"fabric": args.transport, "microbatches": args.microbatches, "layers": args.layers,
           "ranks": trace.n_ranks, "dag_ops": plan.dag.n_ops, "plan_s": t_plan, "plan_cpu_s": c_plan,
           "max_sim_time_ms": plan.max_sim_time_ns / 1e6, "packet_hops_estimate": whole_work_estimate(plan)}
    if args.dry_run:
        return row | {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    c_sim = cpu_s()
    rec = run(exp, plan=plan)
    c_sim = cpu_s() - c_sim
    s = rec.summary
    return row | {
        "flows": s["n_flows"], "status": s["status"], "iteration_ms": (s["iteration_time_ns"] or float("nan")) / 1e6,
        "exposed_comm_ms": (s["exposed_comm_ns"] or float("nan")) / 1e6, "sim_s": s["wall_time_s"],
        "total_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0, "packet_hops": s["packet_hops"],
        "sim_cpu_s": c_sim, "cpu_ns_per_packet_hop": c_sim / max(s["packet_hops"], 1) * 1e9, "drops": s["drops"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


COLUMNS = (("fabric", "{}"), ("microbatches", "{:d}"), ("dag_ops", "{:d}"), ("packet_hops_estimate", "{:d}"),
           ("status", "{}"), ("iteration_ms", "{:.1f}"), ("plan_s", "{:.1f}"), ("sim_s", "{:.1f}"),
           ("total_s", "{:.1f}"), ("cpu_s", "{:.1f}"), ("cpu_ns_per_packet_hop", "{:.0f}"), ("drops", "{:d}"),
           ("peak_rss_mb", "{:.0f}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _fabric_workers.add_arguments(ap)
    ap.add_argument("--microbatches", type=int, default=1, help="micro-batches per data-parallel replica")
    ap.add_argument("--layers", type=int, default=40, help="transformer layers (GPT-13B has 40)")
    ap.add_argument("--dry-run", action="store_true", help="plan only (trace, lowering, fabric), no simulation")
    _fabric_workers.main(__file__, ap.parse_args(), run_one, COLUMNS)


if __name__ == "__main__":
    main()
