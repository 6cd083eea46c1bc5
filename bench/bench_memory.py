"""Memory of trace building and lowering for LLaMA-2 7B (32 layers, TP8 PP4, H100 servers of 8 GPUs).

Python-heap peaks by tracemalloc (numpy arrays included), per phase, and the process's peak RSS:
``build_trace`` for ``--dp`` data-parallel replicas, then (unless ``--no-lower``) ``lower``, reported as
bytes per DAG op above the trace (peak while lowering, and held by the finished FlowDag). Targets (issue 15):
lowering <= 40 B per DAG op; a 16,384-GPU trace (``--dp 512``) under 2 GB.

    python bench/bench_memory.py --dp 32                        # 1,024 GPUs, trace + lowering
    python bench/bench_memory.py --dp 512 --microbatches 8 --no-lower   # 16,384 GPUs, trace only
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

from cosim.collectives.lower import lower
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dp", type=int, default=32)
    ap.add_argument("--microbatches", type=int, default=4, help="micro-batches per data-parallel replica")
    ap.add_argument("--no-lower", action="store_true")
    args = ap.parse_args()
    rss_mb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # noqa: E731
    tracemalloc.start()
    t, c = time.perf_counter(), time.process_time()
    trace = build_trace(get_model("llama2-7b"),
                        ParallelismSpec(tp=8, pp=4, dp=args.dp, micro_batch_size=1,
                                        global_batch_size=args.microbatches * args.dp),
                        get_hardware("h100", gpus_per_host=8))
    held, peak = tracemalloc.get_traced_memory()
    print(f"trace  {trace.n_ranks} GPUs {trace.n_ops} ops: {time.perf_counter() - t:.1f} s wall, "
          f"{time.process_time() - c:.1f} s cpu, peak {peak / 1e6:.0f} MB, held {held / 1e6:.0f} MB, "
          f"peak RSS {rss_mb():.0f} MB")
    if args.no_lower:
        return
    tracemalloc.reset_peak()
    t, c = time.perf_counter(), time.process_time()
    dag = lower(trace)
    now, peak = tracemalloc.get_traced_memory()
    print(f"lower  {dag.n_ops} DAG ops {dag.dep_idx.size} deps: {time.perf_counter() - t:.1f} s wall, "
          f"{time.process_time() - c:.1f} s cpu, peak {(peak - held) / dag.n_ops:.0f} B/op, "
          f"held {(now - held) / dag.n_ops:.0f} B/op, peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
