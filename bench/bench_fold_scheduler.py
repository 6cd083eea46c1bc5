"""CPU time of the one simulated rail of a folded training iteration, with the timing wheel's buckets set.

LLaMA-2 7B (32 layers), TP8 x PP4 x DP``--dp`` on a rail-optimized 400 Gbps fabric (bench_decompose.py's
scenario): the run is planned and decomposed, then only the piece the fold simulates runs, in this
process, with ``TimingWheelScheduler::BucketWidth``, ``::Buckets`` and ``::Prefetch`` as given (if omitted, what the run
derives: engine.wheel_attributes).
The bucket settings change speed only, never the results: the piece's end time is printed to show it.

    python bench/bench_fold_scheduler.py --dp 128                                     # as a run derives them
    python bench/bench_fold_scheduler.py --dp 128 --bucket-width 4096ps --buckets 8192
    python bench/bench_fold_scheduler.py --dp 128 --prefetch false                    # no prefetch
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dp", type=int, default=32)
    ap.add_argument("--bucket-width", help="TimingWheelScheduler::BucketWidth, e.g. 4096ps [derived]")
    ap.add_argument("--buckets", help="TimingWheelScheduler::Buckets, e.g. 8192 [derived]")
    ap.add_argument("--prefetch", choices=("true", "false"), help="TimingWheelScheduler::Prefetch [true]")
    args = ap.parse_args()

    from cosim.decompose import exact as decompose_run  # noqa: PLC0415
    from cosim.plan import compile as compile_plan  # noqa: PLC0415
    from cosim.run import experiments_of  # noqa: PLC0415

    doc = {"name": "roce", "network": {"transport": "roce", "topology": "rail-optimized", "gpus_per_server": 8,
                                       "spines": 8, "link_gbps": 400.0, "link_delay_ns": 1000.0},
           "workload": {"kind": "training", "model": "llama2-7b", "gpu": "h100", "iterations": 1,
                        "parallelism": {"tp": 8, "pp": 4, "dp": args.dp}}}
    exp = experiments_of(doc)[0]
    plan = compile_plan(exp)
    attributes = dict(plan.attributes)
    for name, value in (("BucketWidth", args.bucket_width), ("Buckets", args.buckets),
                        ("Prefetch", args.prefetch)):
        if value is not None:
            attributes[f"TimingWheelScheduler::{name}"] = value
    columns = plan.dag.columns()  # the DAG's gpu column holds host node ids
    d = decompose_run.decomposition(plan.fabric, columns, gpu_node=np.arange(plan.fabric.n_nodes),
                                    attributes=attributes)
    settings = {"seed": exp.seed, "attributes": attributes, "max_sim_time_ns": plan.max_sim_time_ns,
                "queue_sample_interval_ns": exp.telemetry.queue_sample_interval_ns}
    piece = decompose_run.piece_columns(columns, d.pieces[0])
    cpu = time.process_time()
    out = decompose_run.run_piece(plan.fabric, piece, settings)
    print(f"dp {args.dp} ({d.mode}, {piece['kind'].size} ops simulated): {out.network.data_packet_hops} data "
          f"packet-hops, {time.process_time() - cpu:.1f} CPU s, last op ends at {np.nanmax(out.op_finish_ns):.3f} ns")


if __name__ == "__main__":
    main()
