"""ECMP collisions on a multi-leaf rail-optimized fabric: finish time of a rail-local permutation over the
spines, as a multiple of the ideal, for ECMP hashing against adaptive routing (docs/fabrics.md).

    python bench/bench_rail_ecmp.py [servers] [gpus_per_server] [switch_radix] [messages] [link_gbps]

A rail-optimized fabric of ``switch_radix``-port switches (defaults: 8 servers x 4 GPUs, radix 8: every
rail of 8 NICs is 2 leaves of 4 NICs with 4 uplinks, 4 spines; every uplink its own link and ECMP member),
no oversubscription, DCQCN off. NIC g of server s sends ``messages`` (16) concurrent 64 KiB messages to
NIC g of the server one leaf further along its rail (s + servers per leaf): every flow crosses a spine and
every leaf has exactly as many senders as uplinks, so perfect balance finishes at the ideal (one pair's
bytes at the link rate). Prints finish / ideal and the busiest and idlest leaf uplink as a multiple of
the mean, per setting and transport.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from cosim import engine
from cosim.network import clos, topology
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet

MESSAGE_BYTES, MTU, HEADER = 64 * 1024, 4096, 82

SETTINGS = {
    "5-tuple, 1 QP": {"ecmp_hash": "five-tuple"},
    "per-flow hash": {"ecmp_hash": "flow"},
    "5-tuple+QP, 4 QPs": {"ecmp_hash": "five-tuple-qp", "qps_per_connection": 4},
    "adaptive": {"ecmp_hash": "five-tuple", "routing": "adaptive"},
    "spray": {"ecmp_hash": "five-tuple", "routing": "spray"},
}


def main(servers: int, gps: int, radix: int, messages: int, link_gbps: float) -> None:
    fab = clos.rail_clos(servers=servers, gpus_per_server=gps, switch_radix=radix, host_link_gbps=link_gbps,
                         host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    per_leaf = -(-servers // fab.params["leaves_per_rail"])
    host = np.arange(fab.n_hosts)
    server, gpu = host // gps, host % gps
    dst_host = ((server + per_leaf) % servers) * gps + gpu
    src = np.repeat(host, messages).astype(np.int32)
    dst = np.repeat(dst_host, messages).astype(np.int32)
    flows = FlowSet(src=src, dst=dst, size_bytes=np.full(src.size, MESSAGE_BYTES, np.int64),
                    start_ns=np.zeros(src.size), priority=np.zeros(src.size, np.uint8))
    ideal_ns = messages * -(-MESSAGE_BYTES // MTU) * (MTU + HEADER) * 8 / link_gbps
    leaf = np.isin(np.arange(fab.n_nodes), fab.tier_ids(1))
    spine = np.isin(np.arange(fab.n_nodes), fab.tier_ids(2))
    p = fab.params
    print(f"{fab.n_hosts} hosts ({servers} servers x {gps}), radix {radix}: {p['leaves_per_rail']} leaves per rail, "
          f"{p['uplinks_per_leaf']} uplinks per leaf, {p['spines']} spines x {p['uplinks_per_spine']} links; "
          f"{messages} x 64 KiB per pair; ideal {ideal_ns / 1e3:.1f} us")
    print(f"{'setting':20} {'transport':9} {'finish/ideal':>12} {'max/mean':>9} {'min/mean':>9} {'wall s':>7}")
    one_switch = topology.rail_optimized(servers=servers, gpus_per_server=gps, spines=p["spines"],
                                         host_link_gbps=link_gbps, host_link_delay_ns=1000.0,
                                         fabric_link_delay_ns=1000.0)
    out = engine.simulate(one_switch, flows, seed=1, attributes=transport_attributes("roce", dcqcn=False)
                          | mechanism_attributes(ecmp_hash="five-tuple"))
    print(f"{'one switch per rail':20} {'roce':9} {np.nanmax(out.finish_ns) / ideal_ns:12.2f}   (no radix: "
          "the rail's flows never reach a spine)")
    for label, options in SETTINGS.items():
        for transport in ("roce", "ib"):
            attrs = transport_attributes(transport, dcqcn=False) | mechanism_attributes(**options)
            t0 = time.perf_counter()
            out = engine.simulate(fab, flows, seed=1, attributes=attrs)
            wall = time.perf_counter() - t0
            ports = out.ports
            uplink = leaf[ports["node"]] & spine[ports["peer"]]
            load = ports["tx_bytes"][uplink].astype(float)
            load /= load.mean()
            assert (out.delivered_bytes == MESSAGE_BYTES).all()
            print(f"{label:20} {transport:9} {np.nanmax(out.finish_ns) / ideal_ns:12.2f} {load.max():9.2f} "
                  f"{load.min():9.2f} {wall:7.1f}")


if __name__ == "__main__":
    args = [int(x) for x in sys.argv[1:5]]
    defaults = [8, 4, 8, 16]
    args += defaults[len(args):]
    main(*args, float(sys.argv[5]) if len(sys.argv) > 5 else 100.0)
