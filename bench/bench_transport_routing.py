"""ECMP entropy against routing at a larger scale than the tests: finish time of a pairwise exchange over
the spines, as a multiple of the ideal, for each ECMP hash / QP scaling / routing setting.

    python bench/bench_transport_routing.py [hosts_per_leaf] [spines] [messages]

Two leaves of ``hosts_per_leaf`` hosts (default 16) and ``spines`` spines (16), no oversubscription; host
i of each leaf sends ``messages`` (16) concurrent 64 KiB messages to host i of the other, DCQCN off.
Prints one row per setting on both transports: finish / ideal, the busiest and idlest uplink as a
multiple of the mean, and the packets reorder-tolerant receivers placed out of order.
"""

from __future__ import annotations

import sys

import numpy as np

from cosim import engine
from cosim.network import topology
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet

MESSAGE_BYTES, MTU, HEADER = 64 * 1024, 4096, 82

SETTINGS = {
    "5-tuple, 1 QP": {"ecmp_hash": "five-tuple"},
    "5-tuple+QP, 4 QPs": {"ecmp_hash": "five-tuple-qp", "qps_per_connection": 4},
    "5-tuple+QP, 16 QPs": {"ecmp_hash": "five-tuple-qp", "qps_per_connection": 16},
    "per-flow hash": {"ecmp_hash": "flow"},
    "pinned (dst mod k)": {"routing": "pinned"},
    "flowlet": {"ecmp_hash": "five-tuple", "routing": "flowlet"},
    "adaptive": {"ecmp_hash": "five-tuple", "routing": "adaptive"},
    "spray": {"ecmp_hash": "five-tuple", "routing": "spray"},
}


def main(per_leaf: int, spines: int, messages: int) -> None:
    fab = topology.leaf_spine(hosts=2 * per_leaf, hosts_per_leaf=per_leaf, spines=spines, host_link_gbps=100.0,
                              host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    a, b = fab.host_ids[:per_leaf], fab.host_ids[per_leaf:]
    src = np.repeat(np.concatenate([a, b]), messages).astype(np.int32)
    dst = np.repeat(np.concatenate([b, a]), messages).astype(np.int32)
    flows = FlowSet(src=src, dst=dst, size_bytes=np.full(src.size, MESSAGE_BYTES, np.int64),
                    start_ns=np.zeros(src.size), priority=np.zeros(src.size, np.uint8))
    ideal_ns = messages * -(-MESSAGE_BYTES // MTU) * (MTU + HEADER) * 8 / 100.0
    up = np.isin(np.arange(fab.n_nodes), fab.tier_ids(1))
    spine = np.isin(np.arange(fab.n_nodes), fab.tier_ids(2))
    print(f"{2 * per_leaf} hosts, {spines} spines, {messages} x 64 KiB per pair; ideal {ideal_ns / 1e3:.1f} us")
    print(f"{'setting':22} {'transport':9} {'finish/ideal':>12} {'max/mean':>9} {'min/mean':>9} {'reordered':>10}")
    for label, options in SETTINGS.items():
        for transport in ("roce", "ib"):
            attrs = transport_attributes(transport, dcqcn=False) | mechanism_attributes(**options)
            out = engine.simulate(fab, flows, seed=1, attributes=attrs)
            ports = out.ports
            uplink = up[ports["node"]] & spine[ports["peer"]]
            load = ports["tx_bytes"][uplink].astype(float)
            load /= load.mean()
            print(f"{label:22} {transport:9} {np.nanmax(out.finish_ns) / ideal_ns:12.2f} {load.max():9.2f} "
                  f"{load.min():9.2f} {out.counters['reordered_packets']:10d}")


if __name__ == "__main__":
    args = [int(x) for x in sys.argv[1:]]
    main(*(args + [16, 16, 16][len(args):]))
