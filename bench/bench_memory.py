"""Memory of trace building and lowering for LLaMA-2 7B (32 layers, TP8 PP4, H100 servers of 8 GPUs).

Python-heap peaks by tracemalloc (numpy arrays included), per phase, and the process's peak RSS:
``build_trace`` for ``--dp`` data-parallel replicas, then (unless ``--no-lower``) ``lower``, reported as
bytes per DAG op above the trace (peak while lowering, and held by the finished FlowDag, split into its op
columns, the CSR of the deps and the per-trace-op markers). Targets (issue 15): lowering <= 40 B per DAG op;
a 16,384-GPU trace (``--dp 512``) under 2 GB.

    python bench/bench_memory.py --dp 32                        # 1,024 GPUs, trace + lowering
    python bench/bench_memory.py --dp 32 --rss-only             # the same, RSS growth without tracemalloc
    python bench/bench_memory.py --dp 32 --iterations 2         # and chaining two iterations (repeat)
    python bench/bench_memory.py --dp 512 --microbatches 8 --no-lower   # 16,384 GPUs, trace only
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

from cosim.collectives.dag import OP_FIELDS, repeat
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
    ap.add_argument("--iterations", type=int, default=1,
                    help="also chain this many iterations (repeat) and report its bytes per op of the chain")
    ap.add_argument("--rss-only", action="store_true",
                    help="no tracemalloc (its own records inflate the RSS): report the growth of the peak RSS "
                         "while lowering, in B per DAG op")
    args = ap.parse_args()
    rss_mb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # noqa: E731
    traced = (lambda: tracemalloc.get_traced_memory()) if not args.rss_only else (lambda: (0, 0))  # noqa: E731
    if not args.rss_only:
        tracemalloc.start()
    t, c = time.perf_counter(), time.process_time()
    trace = build_trace(get_model("llama2-7b"),
                        ParallelismSpec(tp=8, pp=4, dp=args.dp, micro_batch_size=1,
                                        global_batch_size=args.microbatches * args.dp),
                        get_hardware("h100", gpus_per_host=8))
    held, peak = traced()
    rss_trace = rss_mb()
    heap = "" if args.rss_only else f"peak {peak / 1e6:.0f} MB, held {held / 1e6:.0f} MB, "
    print(f"trace  {trace.n_ranks} GPUs {trace.n_ops} ops: {time.perf_counter() - t:.1f} s wall, "
          f"{time.process_time() - c:.1f} s cpu, {heap}peak RSS {rss_trace:.0f} MB")
    if args.no_lower:
        return
    if not args.rss_only:
        tracemalloc.reset_peak()
    t, c = time.perf_counter(), time.process_time()
    dag = lower(trace)
    now, peak = traced()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    if args.rss_only:
        print(f"lower  {dag.n_ops} DAG ops: {wall:.1f} s wall, {cpu:.1f} s cpu, peak RSS {rss_mb():.0f} MB "
              f"(+{(rss_mb() - rss_trace) * 2**20 / dag.n_ops:.0f} B/op over the trace's)")
        return
    per_op = lambda *arrays: sum(a.nbytes for a in arrays) / dag.n_ops  # noqa: E731
    columns = per_op(*(getattr(dag, name) for name in OP_FIELDS))
    print(f"lower  {dag.n_ops} DAG ops {dag.dep_idx.size} deps: {wall:.1f} s wall, {cpu:.1f} s cpu, "
          f"peak {(peak - held) / dag.n_ops:.1f} B/op, held {(now - held) / dag.n_ops:.1f} B/op "
          f"(columns {columns:.0f}, dep_ptr {per_op(dag.dep_ptr):.1f}, dep_idx {per_op(dag.dep_idx):.1f}, "
          f"markers {per_op(dag.trace_start, dag.trace_done):.1f}), peak RSS {rss_mb():.0f} MB")
    if args.iterations > 1:
        tracemalloc.reset_peak()
        t, c = time.perf_counter(), time.process_time()
        chain = repeat(dag, args.iterations)
        grown, peak = (m - now for m in tracemalloc.get_traced_memory())
        print(f"repeat {args.iterations} iterations, {chain.n_ops} DAG ops: {time.perf_counter() - t:.1f} s wall, "
              f"{time.process_time() - c:.1f} s cpu, peak {peak / chain.n_ops:.1f} B/op, "
              f"held {grown / chain.n_ops:.1f} B/op, peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
