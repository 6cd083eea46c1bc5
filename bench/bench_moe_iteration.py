"""A DeepSeek-V3-class training iteration at EP64 across 8 servers: NCCL all-to-all vs DeepEP's kernels.

DeepSeek-V3's shape cut to 4 layers (1 dense + 3 MoE: MLA, 1 shared + 256 routed experts, top-8, at most 4
nodes), FP8 block-scaled GEMMs and FP8 dispatch, attention TP8 inside each server with sequence parallelism
and EP64 folded over TP8 × DP8 (expert_tp=1), ZeRO-1, 2 micro-batches of 4096 tokens, on 8 servers of 8
H100s on a rail-optimized fabric at 400 Gb/s. The EP all-to-alls run as NCCL all-to-all collectives of the
balanced size, or as DeepEP's routed messages (high-throughput or low-latency kernels). Prints the
iteration time, the compute time of the busiest rank, the exposed communication (all of it: TP, EP, DP)
and the EP all-to-all call times where they are collectives.

    python bench/bench_moe_iteration.py                       # 3 kernels on RoCE, 2 on IB
    python bench/bench_moe_iteration.py --kernels nccl --transports ib
"""

from __future__ import annotations

import argparse
import time

from cosim.run import run
from cosim.spec import make

OVERRIDES = dict(num_layers=4, first_dense_layers=1, gemm_precision="fp8-block", moe_dispatch_dtype="fp8")
PARALLELISM = dict(tp=8, dp=8, ep=64, expert_tp=1, sequence_parallel=True, zero_stage=1, global_batch_size=16)


def point(kernel: str, transport: str) -> dict:
    exp = make("training", transport=transport, topology="rail-optimized", gpus_per_server=8, link_gbps=400.0,
               **{"workload.model": "deepseek-v3", "workload.model_overrides": OVERRIDES | {"moe_kernel": kernel},
                  "workload.parallelism": PARALLELISM})
    start = time.perf_counter()
    s = run(exp).summary
    return dict(kernel=kernel, transport=transport, status=s["status"], iteration_ms=s["iteration_time_ns"] / 1e6,
                compute_ms=s["compute_time_ns"] / 1e6, exposed_ms=s["exposed_comm_ns"] / 1e6,
                a2a_p50_us=s.get("coll_ep_all_to_all_p50_ns", float("nan")) / 1e3,
                a2a_p99_us=s.get("coll_ep_all_to_all_p99_ns", float("nan")) / 1e3,
                packet_hops=s["packet_hops"], wall_s=time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="nccl,deepep-high-throughput,deepep-low-latency")
    ap.add_argument("--transports", default="roce,ib")
    args = ap.parse_args()
    print(f"{'kernel':24} {'fabric':6} {'status':9} {'iter ms':>8} {'compute ms':>10} {'exposed ms':>10} "
          f"{'a2a p50 us':>10} {'a2a p99 us':>10} {'packet-hops':>12} {'wall s':>7}")
    for transport in args.transports.split(","):
        for kernel in args.kernels.split(","):
            r = point(kernel, transport)
            print(f"{r['kernel']:24} {r['transport']:6} {r['status']:9} {r['iteration_ms']:8.2f} "
                  f"{r['compute_ms']:10.2f} {r['exposed_ms']:10.2f} {r['a2a_p50_us']:10.1f} {r['a2a_p99_us']:10.1f} "
                  f"{r['packet_hops']:12d} {r['wall_s']:7.1f}", flush=True)


if __name__ == "__main__":
    main()
