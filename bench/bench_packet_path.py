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
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def scenario():
    from cosim.workload import flows as fl
    from cosim.network import topology

    fabric = topology.leaf_spine(hosts=16, hosts_per_leaf=4, spines=4, host_link_gbps=400.0,
                                 host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    hosts = fabric.host_ids
    perm = fl.permutation(hosts, size_bytes=4_000_000)
    inc = fl.incast(hosts, size_bytes=1_000_000)
    flows = fl.FlowSet.from_arrays(np.concatenate([perm.src, inc.src]), np.concatenate([perm.dst, inc.dst]),
                                   np.concatenate([perm.size_bytes, inc.size_bytes]))
    return fabric, flows


def main() -> None:
    import argparse

    from cosim import engine
    from cosim.network.transport import transport_attributes
    import stock_ns3

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="cosim/stock run pairs; the median ratio is reported")
    ap.add_argument("--fabric", choices=["roce", "ib"], default="roce", help="fabric whose packet path is timed")
    args = ap.parse_args()

    fabric, flows = scenario()
    engine.load()
    attributes = transport_attributes(args.fabric)
    outs, walls = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        outs.append(engine.simulate(fabric, flows, seed=1, attributes=attributes))
        walls.append(time.perf_counter() - t)
    out = outs[0]
    assert all(o.status == "complete" and o.packet_hops == out.packet_hops for o in outs), "runs differ"
    hops = out.data_packet_hops  # stock ns-3 moves data only; cosim's ACKs and credits count as cost
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    stock_ns3.load()
    mean_hops = max(1, round(hops / max(1, int(np.sum(-(-flows.size_bytes // 4096))))))
    ratios, cosim_costs, stock_costs = [], [], []
    for o in outs:  # one stock run right after each cosim run, so both see the same machine load
        stock = stock_ns3.stock_packet_hop_cost(n_packet_hops=hops, hops=mean_hops, rate_gbps=400,
                                               delay_ns=1000, n_senders=16)
        cosim_costs.append(o.run_wall_time_s / hops)
        stock_costs.append(stock["s_per_packet_hop"])
        ratios.append(cosim_costs[-1] / stock_costs[-1])
    med = float(np.median(ratios))
    print(f"cosim ({args.fabric}): {hops} data packet-hops (+{out.packet_hops - hops} of ACK/CNP/PFC/credit "
          f"packets), {out.events} events ({out.events / hops:.2f} per data packet-hop), simulated {out.sim_time_ns / 1e3:.1f} us; "
          f"whole simulate() median {np.median(walls):.3f} s; peak RSS {rss_mb:.0f} MB")
    print(f"  median {np.median(cosim_costs) * 1e6:.3f} us per data packet-hop in the event loop "
          f"({1 / np.median(cosim_costs) / 1e6:.2f} M data packet-hops/s)")
    print(f"stock ns-3 P2P+DropTail: median {np.median(stock_costs) * 1e6:.3f} us per packet-hop "
          f"({stock['events_per_packet_hop']:.2f} events per packet-hop, {mean_hops} hops per chain)")
    print(f"ratio cosim/stock over {len(ratios)} pairs: median {med:.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f} (target <= 0.25)")


if __name__ == "__main__":
    main()
