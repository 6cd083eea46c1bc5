"""Dragonfly routing under adversarial and uniform traffic: when the last byte arrives with minimal, Valiant
and UGAL-L routing, on the balanced dragonfly of p hosts per router (a = 2p, h = p, g = a·h + 1).

    python bench/bench_dragonfly_routing.py [p]

p = 2 (default): 72 hosts, 36 routers, 100 Gbps and 1 us links everywhere, transport uec (the lossy one
Valiant and UGAL run on). Adversarial: every host of group i sends 256 KiB to the host of group i+1 at the
same place (one flow each); its bound is a group's bytes through the one global link of a pair of groups.
Uniform: all-to-all, 16 KiB per pair; its bound is a host's bytes through its own link. Times are simulated
(deterministic for a seed), in us.
"""

from __future__ import annotations

import sys

import numpy as np

from cosim import engine
from cosim.network.dragonfly import dragonfly
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet, permutation

LINK_GBPS = 100.0
ROUTINGS = ("minimal", "valiant", "ugal")


def main(p: int) -> None:
    fab = dragonfly(hosts_per_router=p, routers_per_group=2 * p, global_links_per_router=p,
                    host_link_gbps=LINK_GBPS, host_link_delay_ns=1000.0)
    per_group = p * 2 * p
    hosts = fab.host_ids
    src, dst = np.meshgrid(hosts, hosts, indexing="ij")
    pair = src != dst
    patterns = {
        "adversarial": (permutation(hosts, shift=per_group, size_bytes=256 * 1024),
                        per_group * 256 * 1024 * 8 / LINK_GBPS),
        "uniform": (FlowSet.from_arrays(src[pair], dst[pair], 16 * 1024),
                    (hosts.size - 1) * 16 * 1024 * 8 / LINK_GBPS),
    }
    print(f"dragonfly p={p} a={2 * p} h={p} g={2 * p * p + 1}: {fab.n_hosts} hosts, {fab.n_switches} routers")
    print(f"{'traffic':12} {'bound us':>9} " + " ".join(f"{r + ' us':>11}" for r in ROUTINGS)
          + " " + " ".join(f"{r + ' hops':>13}" for r in ROUTINGS))
    for name, (flows, bound_ns) in patterns.items():
        done, hops = [], []
        for routing in ROUTINGS:
            attrs = transport_attributes("uec") | mechanism_attributes(dragonfly_routing=routing)
            out = engine.simulate(fab, flows, seed=1, attributes=attrs)
            assert out.status == "complete" and (out.delivered_bytes == flows.size_bytes).all()
            done.append(float(out.finish_ns.max()) / 1e3)
            hops.append(out.data_packet_hops)
        print(f"{name:12} {bound_ns / 1e3:9.1f} " + " ".join(f"{d:11.1f}" for d in done) + " "
              + " ".join(f"{h:13d}" for h in hops))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
