"""Ultra Ethernet against RoCE (DCQCN, and PFC only) and InfiniBand (ECMP, and adaptive routing) on a larger leaf-spine than the tests:
incast, permutation and all-to-all, per transport the finish of the last flow against the busiest link's
wire time (a host link, or a leaf's uplinks shared evenly),
FCT p50 and p99 as multiples of a flow's own wire time, the largest switch queue, the packets trimmed,
retransmitted and paused, the ACKs senders received and the simulator's events. UEC runs four ways: a SACK
per data packet (HostNic::UecAckEveryBytes=1), coalesced SACKs (the default, NSCC), RCCC credits, and both.

    python bench/bench_uec.py [hosts_per_leaf] [leaves] [spines] [flow_kib]

Leaves of ``hosts_per_leaf`` hosts (default 8), ``leaves`` leaves (4), ``spines`` spines (4, so 2:1
oversubscribed by default), 100 Gbps and 1 us links. incast: every host of the other leaves sends
``flow_kib`` (1024) KiB to host 0; permutation: host i sends to host i + hosts_per_leaf; all-to-all: every
host sends ``flow_kib`` / hosts KiB to every other. Wall times are single runs on a shared machine: noisy.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from cosim import engine
from cosim.network import topology
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet

MTU = 4096
LINK_GBPS = 100.0
HEADERS = {"roce": 82, "roce-pfc-only": 82, "ib": 26, "ib-adaptive": 26, "uec-sack-per-packet": 122, "uec": 122,
           "uec-rccc": 122, "uec-both": 122}


def attributes(setting: str) -> dict[str, str]:
    if setting == "roce-pfc-only":
        return transport_attributes("roce", dcqcn=False)
    if setting == "ib-adaptive":
        return transport_attributes("ib") | mechanism_attributes(routing="adaptive")
    if setting == "uec-sack-per-packet":
        return transport_attributes("uec") | {"HostNic::UecAckEveryBytes": "1"}
    if setting in ("uec-rccc", "uec-both"):
        return transport_attributes("uec", uec_congestion_control=setting.removeprefix("uec-"))
    return transport_attributes(setting)


def patterns(hosts: int, per_leaf: int, flow_bytes: int) -> dict[str, FlowSet]:
    def flow_set(src, dst, size):
        src, dst = np.asarray(src, np.int32), np.asarray(dst, np.int32)
        return FlowSet(src=src, dst=dst, size_bytes=np.full(src.size, size, np.int64), start_ns=np.zeros(src.size),
                       priority=np.zeros(src.size, np.uint8))

    senders = np.arange(per_leaf, hosts)
    src, dst = np.meshgrid(np.arange(hosts), np.arange(hosts), indexing="ij")
    off = src != dst
    return {"incast": flow_set(senders, np.zeros_like(senders), flow_bytes),
            "permutation": flow_set(np.arange(hosts), (np.arange(hosts) + per_leaf) % hosts, flow_bytes),
            "all-to-all": flow_set(src[off], dst[off], max(MTU, flow_bytes // hosts))}


def wire_ns(payload: np.ndarray, header: int) -> np.ndarray:
    packets = -(-payload // MTU)
    return (payload + packets * header) * 8 / LINK_GBPS


def bottleneck_ns(flows: FlowSet, own_ns: np.ndarray, per_leaf: int, spines: int) -> float:
    """The busiest link's wire time: a host's link (what it sends, or receives) or a leaf's uplinks (what
    leaves it for other leaves, spread evenly over its ``spines`` uplinks at best)."""
    src, dst = np.asarray(flows.src), np.asarray(flows.dst)
    sent, received = np.bincount(src, weights=own_ns), np.bincount(dst, weights=own_ns)
    across = src // per_leaf != dst // per_leaf
    uplinks = np.bincount(src[across] // per_leaf, weights=own_ns[across]) / spines
    return float(max(sent.max(), received.max(), uplinks.max() if uplinks.size else 0.0))


def main(per_leaf: int, leaves: int, spines: int, flow_kib: int) -> None:
    hosts = per_leaf * leaves
    fab = topology.leaf_spine(hosts=hosts, hosts_per_leaf=per_leaf, spines=spines,
                              oversubscription=per_leaf / spines, host_link_gbps=LINK_GBPS,
                              host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    print(f"{hosts} hosts, {leaves} leaves of {per_leaf}, {spines} spines, {LINK_GBPS:g} Gbps, flows {flow_kib} KiB")
    print(f"{'pattern':<12} {'transport':<20} {'last/bound':>10} {'FCT p50':>8} {'FCT p99':>8} {'max queue KB':>12} "
          f"{'trimmed':>8} {'retx':>8} {'PAUSE':>7} {'ACKs':>7} {'events':>9} {'wall s':>7}")
    for name, flows in patterns(hosts, per_leaf, flow_kib << 10).items():
        for setting in HEADERS:
            start = time.perf_counter()
            out = engine.simulate(fab, flows, attributes=attributes(setting), max_sim_time_ns=1e9)
            wall = time.perf_counter() - start
            own = wire_ns(flows.size_bytes, HEADERS[setting])
            slow = np.asarray(out.finish_ns) / own
            bound = bottleneck_ns(flows, own, per_leaf, spines)
            c = out.counters
            print(f"{name:<12} {setting:<20} {np.max(out.finish_ns) / bound:>10.3f} {np.percentile(slow, 50):>8.2f} "
                  f"{np.percentile(slow, 99):>8.2f} {np.asarray(out.queues['bytes']).max() / 1e3:>12.0f} "
                  f"{c.get('trimmed_packets', 0):>8} {c['retransmitted_packets']:>8} {c['pause_frames_sent']:>7} "
                  f"{c['acks']:>7} {out.events:>9} {wall:>7.2f}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [8, 4, 4, 1024][len(args):]))
