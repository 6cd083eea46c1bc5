"""The Spectrum-X-like profile beside RoCE with DCQCN and Ultra Ethernet (docs/models/spectrum-x.md): an incast
and a permutation on a 2:1 leaf-spine, per transport the last flow's finish over the busiest link's wire time,
FCT p50 and p99 as multiples of a flow's own wire time, the largest switch queue, the bottleneck queue once
the first round trips are over, and PAUSE frames.

    python bench/bench_spectrum_x.py [hosts_per_leaf] [leaves] [spines] [flow_kib]

Leaves of ``hosts_per_leaf`` hosts (default 8), ``leaves`` leaves (4), ``spines`` spines (4, so 2:1
oversubscribed by default), 100 Gbps and 1 us links. incast: every host of the other leaves sends ``flow_kib``
(1024) KiB to host 0; permutation: host i sends to host i + hosts_per_leaf. Every run goes through the
NetworkSpec a user's ``[network]`` would make, so the attributes are the ones ``cosim run`` sets. Simulated
figures repeat exactly; wall times are single runs on a shared machine, noisy.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from bench_uec import bottleneck_ns, wire_ns  # bench/, the script's own folder

from cosim import engine
from cosim.network import topology
from cosim.network.spec import NetworkSpec
from cosim.network.transport import run_attributes
from cosim.workload.flows import FlowSet

MTU = 4096
LINK_GBPS, DELAY_NS = 100.0, 1000.0
#: label → (NetworkSpec fields, data packet header bytes)
SETTINGS = {
    "roce (DCQCN, ECMP)": ({}, 82),
    "roce adaptive (DCQCN)": ({"routing": "adaptive"}, 82),
    "spectrum-x": ({"profile": "spectrum-x"}, 82),
    "uec": ({"transport": "uec"}, 122),
}


def flow_set(src, dst, size: int) -> FlowSet:
    src, dst = np.asarray(src, np.int32), np.asarray(dst, np.int32)
    return FlowSet(src=src, dst=dst, size_bytes=np.full(src.size, size, np.int64), start_ns=np.zeros(src.size),
                   priority=np.zeros(src.size, np.uint8))


def main(per_leaf: int, leaves: int, spines: int, flow_kib: int) -> None:
    hosts = per_leaf * leaves
    fab = topology.leaf_spine(hosts=hosts, hosts_per_leaf=per_leaf, spines=spines,
                              oversubscription=per_leaf / spines, host_link_gbps=LINK_GBPS,
                              host_link_delay_ns=DELAY_NS, fabric_link_delay_ns=DELAY_NS)
    size = flow_kib << 10
    senders = np.arange(per_leaf, hosts)
    patterns = {"incast": flow_set(senders, np.zeros_like(senders), size),
                "permutation": flow_set(np.arange(hosts), (np.arange(hosts) + per_leaf) % hosts, size)}
    print(f"{hosts} hosts, {leaves} leaves of {per_leaf}, {spines} spines, {LINK_GBPS:g} Gbps, flows {flow_kib} KiB")
    print("| pattern | transport | last / bound | FCT p50 | FCT p99 | max queue KB | steady queue KB | PAUSE | wall s |")
    for name, flows in patterns.items():
        for label, (fields, header) in SETTINGS.items():
            attrs = run_attributes(NetworkSpec(link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS, **fields), seed=1)
            start = time.perf_counter()
            out = engine.simulate(fab, flows, seed=1, attributes=attrs, max_sim_time_ns=1e9)
            wall = time.perf_counter() - start
            own = wire_ns(flows.size_bytes, header)
            slow = np.asarray(out.finish_ns) / own
            bound = bottleneck_ns(flows, own, per_leaf, spines)
            last = float(np.max(out.finish_ns))
            q, t = np.asarray(out.queues["bytes"]), np.asarray(out.queues["time_ns"])
            steady = (t >= 0.3 * last) & (t <= 0.7 * last)  # after the first round trips, before the tail
            print(f"| {name} | {label} | {last / bound:.3f} | {np.percentile(slow, 50):.2f} | "
                  f"{np.percentile(slow, 99):.2f} | {q.max() / 1e3:.0f} | {q[steady].max(initial=0) / 1e3:.0f} | "
                  f"{out.counters['pause_frames_sent']} | {wall:.2f} |")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [8, 4, 4, 1024][len(args):]))
