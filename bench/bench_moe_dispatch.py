"""DeepEP dispatch + combine per EP size, both kernels, RoCE and IB, beside the closed-form lower bound.

One FP8 dispatch (7,392 B per DeepSeek-V3 token) and one bf16 combine (14,336 B) of ``--tokens`` tokens
per rank, 256 experts top-8 limited to 4 nodes (DeepSeek-V3's routing), uniform or Zipf-skewed, EP ranks on
servers of 8 GPUs on a rail-optimized fabric at 400 Gb/s, co-simulated packet by packet
(:func:`cosim.workload.deepep.dispatch_combine_trace`). The lower bound is, for the dispatch and then the
combine, the larger of the busiest NIC's bytes (a rank's fabric bytes sent or received, whichever is
larger) at line rate and the busiest GPU's NVLink bytes at H100 NVLink rate (450 GB/s per direction);
latency is left out of it.

    python bench/bench_moe_dispatch.py                          # EP 8, 16, 32, 64
    python bench/bench_moe_dispatch.py --ep 16 --transports ib --zipf 1.2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cosim.run import run
from cosim.spec import make
from cosim.workload.deepep import (
    KERNELS,
    combine_messages,
    dispatch_combine_trace,
    dispatch_messages,
)
from cosim.workload.routing import RoutingSpec, route_tokens, routed_counts

DISPATCH_TOKEN_BYTES = 7168 + 4 * 56  #: FP8 + one fp32 scale per 128
COMBINE_TOKEN_BYTES = 2 * 7168  #: bf16
GPUS_PER_SERVER = 8


NVLINK_BYTES_PER_NS = 450.0  #: H100 NVLink per direction


def busiest_bytes(messages, sel: np.ndarray) -> float:
    """The most bytes any rank sends or receives among ``messages[sel]``."""
    n = int(max(messages.src.max(), messages.dst.max())) + 1
    out = np.bincount(messages.src[sel], weights=messages.bytes[sel], minlength=n)
    into = np.bincount(messages.dst[sel], weights=messages.bytes[sel], minlength=n)
    return float(max(out.max(), into.max()))


def bound_ns(messages, gpus_per_node: int, link_gbps: float) -> float:
    """max(busiest NIC at line rate, busiest GPU's NVLink at NVLink rate), ns."""
    remote = messages.src // gpus_per_node != messages.dst // gpus_per_node
    return max(busiest_bytes(messages, remote) * 8 / link_gbps, busiest_bytes(messages, ~remote) / NVLINK_BYTES_PER_NS)


def point(ep: int, kernel: str, transport: str, tokens: int, zipf: float, link_gbps: float) -> dict:
    routing = RoutingSpec(distribution="zipf" if zipf else "uniform", zipf_exponent=zipf or 1.0, max_nodes=4, seed=1)
    experts = route_tokens(routing, tokens_per_rank=tokens, ep=ep, num_experts=256, top_k=8,
                           gpus_per_node=GPUS_PER_SERVER)
    counts = routed_counts(experts, num_experts=256, gpus_per_node=GPUS_PER_SERVER)
    trace = dispatch_combine_trace(counts, kernel=kernel, dispatch_token_bytes=DISPATCH_TOKEN_BYTES,
                                   combine_token_bytes=COMBINE_TOKEN_BYTES)
    bound = (bound_ns(dispatch_messages(counts, kernel, DISPATCH_TOKEN_BYTES), GPUS_PER_SERVER, link_gbps)
             + bound_ns(combine_messages(counts, kernel, COMBINE_TOKEN_BYTES), GPUS_PER_SERVER, link_gbps))
    exp = make("training", transport=transport, topology="rail-optimized", gpus_per_server=GPUS_PER_SERVER,
               link_gbps=link_gbps)
    start = time.perf_counter()
    rec = run(exp, trace=trace)
    s = rec.summary
    return dict(ep=ep, kernel=kernel, transport=transport, status=s["status"], time_us=s["iteration_time_ns"] / 1e3,
                bound_us=bound / 1e3, fabric_mb=s["delivered_bytes"] / 1e6, wall_s=time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ep", default="8,16,32,64", help="EP sizes, multiples of 8 (comma-separated)")
    ap.add_argument("--transports", default="roce,ib")
    ap.add_argument("--tokens", type=int, default=128, help="tokens per rank")
    ap.add_argument("--zipf", type=float, default=0.0, help="Zipf exponent of expert popularity (0: uniform)")
    ap.add_argument("--link-gbps", type=float, default=400.0)
    args = ap.parse_args()
    print(f"{'EP':>4} {'kernel':16} {'fabric':6} {'status':9} {'time us':>9} {'bound us':>9} {'ratio':>6} "
          f"{'fabric MB':>10} {'wall s':>7}")
    for ep in (int(x) for x in args.ep.split(",")):
        for kernel in KERNELS:
            for transport in args.transports.split(","):
                r = point(ep, kernel, transport, args.tokens, args.zipf, args.link_gbps)
                print(f"{r['ep']:>4} {r['kernel']:16} {r['transport']:6} {r['status']:9} {r['time_us']:9.1f} "
                      f"{r['bound_us']:9.1f} {r['time_us'] / r['bound_us']:6.2f} {r['fabric_mb']:10.1f} "
                      f"{r['wall_s']:7.1f}", flush=True)


if __name__ == "__main__":
    main()
