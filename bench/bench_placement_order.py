"""The lowering's placement order on a real trace: the plugin's pass (cosim::PlacementOrder) against the Python
pass it replaced (tests/test_placement_order.py keeps it as the reference), in one process, alternating.

The order numbers the DAG's ops, so both must give it item for item (checked every repeat).

    python bench/bench_placement_order.py                            # LLaMA-2-70B TP8 PP4 DP32, 1,024 GPUs
    python bench/bench_placement_order.py --model llama2-7b --dp 512 --microbatches 4   # 16,384 GPUs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from cosim import plugin
from cosim.collectives.lower import _calls, _match_recvs, _placement_order
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the reference lives in the repository's tests
from tests.test_placement_order import reference_order  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama2-70b")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--pp", type=int, default=4)
    ap.add_argument("--dp", type=int, default=32)
    ap.add_argument("--microbatches", type=int, default=None, help="per replica [the model's default batch]")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    batch = None if args.microbatches is None else args.microbatches * args.dp
    trace = build_trace(get_model(args.model), ParallelismSpec(tp=args.tp, pp=args.pp, dp=args.dp,
                                                               global_batch_size=batch),
                        get_hardware("h100", gpus_per_host=8))
    _, _, call_of_op, call_ops, call_ptr = _calls(trace)
    recv_of_send, _ = _match_recvs(trace)
    plugin.namespace()
    times = {"plugin": [], "python": []}
    for _ in range(args.repeat):
        t = time.perf_counter()
        item, is_call = _placement_order(trace, call_of_op, call_ptr, call_ops, recv_of_send)
        times["plugin"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ref_item, ref_call = reference_order(trace.dep_ptr, trace.dep_idx, call_of_op, call_ptr, call_ops,
                                             recv_of_send)
        times["python"].append(time.perf_counter() - t)
        if not (np.array_equal(item, ref_item) and np.array_equal(is_call, ref_call)):
            raise SystemExit("the plugin's order differs from the reference")
    print(f"{args.model} TP{args.tp} PP{args.pp} DP{args.dp}: {trace.n_ops:,} trace ops, {item.size:,} items placed "
          f"(the same order both ways), {args.repeat} repeats")
    for name, t in times.items():
        print(f"  {name:7s} {statistics.median(t):7.3f} s ({min(t):.3f}-{max(t):.3f})")


if __name__ == "__main__":
    main()
