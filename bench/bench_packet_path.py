"""Cost per packet-hop of cosim's packet path, beside stock ns-3's in the same run (issue 3 benchmark).

Scenario: 16-host leaf-spine (4 leaves of 4 hosts, 4 spines), 400 Gbps, 1 us links; every host sends
4 MB to host (i+1) mod 16, plus a 15-to-1 incast of 1 MB flows, all at t=0, RoCE with DCQCN.
Stock ns-3: PointToPointNetDevice + DropTail queues forwarding the same number of packet-hops over
chains of the same mean hop count (bench/stock_ns3.py). Target: cosim's cost per packet-hop at most 1/4 of
stock's. Reported with peak RSS.

    python bench/bench_packet_path.py
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def scenario(scale: int = 1):
    """The fabric and flows; ``scale`` multiplies every flow's size (callgrind counts use scale 1)."""
    from cosim.network import topology
    from cosim.workload import flows as fl

    fabric = topology.leaf_spine(hosts=16, hosts_per_leaf=4, spines=4, host_link_gbps=400.0,
                                 host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    hosts = fabric.host_ids
    perm = fl.permutation(hosts, size_bytes=4_000_000 * scale)
    inc = fl.incast(hosts, size_bytes=1_000_000 * scale)
    flows = fl.FlowSet.from_arrays(np.concatenate([perm.src, inc.src]), np.concatenate([perm.dst, inc.dst]),
                                   np.concatenate([perm.size_bytes, inc.size_bytes]))
    return fabric, flows


def main() -> None:
    import argparse

    import stock_ns3

    from cosim import engine
    from cosim.network.transport import transport_attributes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="cosim/stock run pairs; the median ratio is reported")
    ap.add_argument("--transport", choices=["roce", "ib"], default="roce", help="transport whose packet path is timed")
    ap.add_argument("--scale", type=int, default=8,
                    help="flow sizes x this (8: ~420k data packet-hops, ~0.2 s per run, long enough that "
                         "start-up and cold caches do not dominate either side)")
    args = ap.parse_args()

    fabric, flows = scenario(args.scale)
    engine.load()
    stock_ns3.load()
    attributes = transport_attributes(args.transport)
    runs, stocks = [], []
    # each pair: a cosim run, then right after it a stock run of the same number of data packet-hops, so
    # both sides of a ratio see the same machine load; a first unpaired run of each warms caches and the JIT
    engine.simulate(fabric, flows, seed=1, attributes=attributes)
    for i in range(args.repeat + 1):
        o = engine.simulate(fabric, flows, seed=1, attributes=attributes)
        hops = o.data_packet_hops  # stock ns-3 moves data only; cosim's ACKs and credits count as cost
        mean_hops = max(1, round(hops / max(1, int(np.sum(-(-flows.size_bytes // 4096))))))
        stock = stock_ns3.stock_packet_hop_cost(n_packet_hops=hops, hops=mean_hops, rate_gbps=400,
                                               delay_ns=1000, n_senders=16)
        if i:
            runs.append(o)
            stocks.append(stock)
    out = runs[0]
    assert all(o.status == "complete" and o.packet_hops == out.packet_hops for o in runs), "runs differ"
    hops = out.data_packet_hops
    cosim_costs = np.array([o.run_wall_time_s / hops for o in runs])
    stock_costs = np.array([s["s_per_packet_hop"] for s in stocks])
    ratios = cosim_costs / stock_costs
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"cosim ({args.transport}, scale {args.scale}): {hops} data packet-hops (+{out.packet_hops - hops} of "
          f"ACK/CNP/PFC/credit packets), {out.events / hops:.2f} events per data packet-hop, simulated "
          f"{out.sim_time_ns / 1e3:.1f} us; peak RSS {rss_mb:.0f} MB")
    print(f"  event loop: median {np.median(cosim_costs) * 1e6:.3f} us per data packet-hop "
          f"(min {cosim_costs.min() * 1e6:.3f}, max {cosim_costs.max() * 1e6:.3f})")
    print(f"stock ns-3 P2P+DropTail: median {np.median(stock_costs) * 1e6:.3f} us per packet-hop "
          f"(min {stock_costs.min() * 1e6:.3f}, max {stock_costs.max() * 1e6:.3f}; "
          f"{stocks[0]['events_per_packet_hop']:.2f} events per packet-hop, {stocks[0]['hops']} hops per chain)")
    print(f"ratio cosim/stock over {len(ratios)} pairs: median {med:.3f} (quartiles {q1:.3f}-{q3:.3f}, "
          f"min {ratios.min():.3f}, max {ratios.max():.3f})")


if __name__ == "__main__":
    main()
