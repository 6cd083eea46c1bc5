"""Routing among equal-cost ports and the ECMP entropy of training traffic, on a two-tier fabric.

The scenario is a synthetic low-entropy collective: two leaves of 8 hosts, 8 spines (no
oversubscription), host i of one leaf exchanging 16 concurrent messages with host i of the other (a
pairwise exchange step, as a ring or all-to-all makes). Every leaf uplink could carry one pair's traffic
at line rate, so the ideal finish is one pair's bytes at 100 Gbps.
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim import engine
from cosim.network import topology
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet

HOSTS_PER_LEAF, SPINES, MESSAGES, MESSAGE_BYTES = 8, 8, 16, 64 * 1024
MTU, HEADER = 4096, 82


def fabric():
    return topology.leaf_spine(hosts=2 * HOSTS_PER_LEAF, hosts_per_leaf=HOSTS_PER_LEAF, spines=SPINES,
                               host_link_gbps=100.0, host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)


def exchange(fab) -> FlowSet:
    """Host i of leaf 0 and host i of leaf 1 send each other MESSAGES messages at once."""
    hosts = fab.host_ids
    a, b = hosts[:HOSTS_PER_LEAF], hosts[HOSTS_PER_LEAF:]
    src = np.repeat(np.concatenate([a, b]), MESSAGES).astype(np.int32)
    dst = np.repeat(np.concatenate([b, a]), MESSAGES).astype(np.int32)
    n = src.size
    return FlowSet(src=src, dst=dst, size_bytes=np.full(n, MESSAGE_BYTES, np.int64), start_ns=np.zeros(n),
                   priority=np.zeros(n, np.uint8))


def run(transport="roce", seed=3, extra=None, **options):
    fab = fabric()
    attrs = transport_attributes(transport, dcqcn=False) | mechanism_attributes(**options) | (extra or {})
    attrs["FabricSwitch::EcmpSeed"] = str(seed)
    out = engine.simulate(fab, exchange(fab), seed=seed, attributes=attrs)
    assert out.status == "complete"
    return fab, out


def uplink_bytes(fab, out) -> np.ndarray:
    """Wire bytes each leaf sent up to the spines, per uplink (leaves in order)."""
    ports = out.ports
    leaves, spines = fab.tier_ids(1), fab.tier_ids(2)
    up = np.isin(ports["node"], leaves) & np.isin(ports["peer"], spines)
    order = np.lexsort((ports["peer"][up], ports["node"][up]))
    return ports["tx_bytes"][up][order]


def ideal_ns() -> float:
    packets = -(-MESSAGES * MESSAGE_BYTES // MTU)
    return packets * (MTU + HEADER) * 8 / 100.0


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_five_tuple_hashing_collides_and_qp_hashing_restores_throughput(transport):
    """One path per host pair (5-tuple, one UDP source port) leaves uplinks idle while others carry two or
    three (about 3x the ideal finish); 16 QPs per connection with the destination QP in the hash spread
    the pairs' messages over the spines and bring the finish time under 2x the ideal."""
    fab, plain = run(transport, ecmp_hash="five-tuple", qps_per_connection=MESSAGES)
    _, scaled = run(transport, ecmp_hash="five-tuple-qp", qps_per_connection=MESSAGES)
    per_pair = MESSAGES * -(-MESSAGE_BYTES // MTU) * (MTU + HEADER)
    up = uplink_bytes(fab, plain)
    assert (up < per_pair / 2).sum() >= 2, "expected idle uplinks under 5-tuple hashing"
    assert up.max() >= 2 * per_pair, "expected an uplink carrying two pairs"
    finish_plain = np.nanmax(plain.finish_ns)
    finish_scaled = np.nanmax(scaled.finish_ns)
    assert finish_plain > 1.8 * ideal_ns()
    assert finish_scaled < 0.65 * finish_plain and finish_scaled < 2.0 * ideal_ns()
    assert (uplink_bytes(fab, scaled) > per_pair / 4).all(), "QP hashing should use every uplink"


def test_one_qp_per_connection_hashes_like_the_five_tuple():
    """With a single QP per host pair the destination QP adds no entropy: the same paths as the 5-tuple."""
    fab, plain = run(ecmp_hash="five-tuple")
    _, qp = run(ecmp_hash="five-tuple-qp")
    np.testing.assert_array_equal(uplink_bytes(fab, plain) > 0, uplink_bytes(fab, qp) > 0)


@pytest.mark.parametrize("transport,routing", [("ib", "adaptive"), ("roce", "adaptive"), ("roce", "spray")])
def test_per_packet_routing_balances_uplinks_within_a_few_percent(transport, routing):
    """Adaptive routing (least-loaded port per packet) and spraying even out the uplinks that 5-tuple
    hashing left idle: every uplink within 5% of the mean, finish near the ideal, with receivers placing
    out-of-order packets instead of NAKing them."""
    fab, out = run(transport, ecmp_hash="five-tuple", routing=routing)
    up = uplink_bytes(fab, out).astype(float)
    assert np.abs(up / up.mean() - 1).max() < 0.05
    assert np.nanmax(out.finish_ns) < 1.2 * ideal_ns() + 10_000
    assert out.counters["naks_sent"] == 0 and out.counters["retransmitted_packets"] == 0
    assert out.delivered_bytes.sum() == MESSAGES * MESSAGE_BYTES * 2 * HOSTS_PER_LEAF


def test_pinned_routing_maps_destinations_to_uplinks_statically():
    """Path pinning sends everything for destination d up uplink d mod 8 (destination-mod-k): for this
    exchange, whose 8 destinations per leaf are consecutive node ids, each uplink carries exactly one pair's
    data (and the ACKs to the same destination): all uplinks equal, whatever the seed."""
    assert (fabric().host_ids == np.arange(2 * HOSTS_PER_LEAF)).all()
    per_pair = MESSAGES * -(-MESSAGE_BYTES // MTU) * (MTU + HEADER)
    for seed in (1, 2):
        fab, out = run(ecmp_hash="five-tuple", routing="pinned", seed=seed)
        up = uplink_bytes(fab, out)
        assert (up == up[0]).all()
        assert per_pair <= up[0] < 1.05 * per_pair


def test_flowlets_without_gaps_keep_paths_and_order():
    """Flows at line rate leave no gap above the flowlet timeout: each keeps its first path, so nothing is
    reordered (go-back-N receivers never NAK). With a zero timeout every packet is a flowlet and the
    uplinks balance as with adaptive routing."""
    fab, kept = run(ecmp_hash="five-tuple", routing="flowlet")
    assert kept.counters["naks_sent"] == 0
    _, every = run(ecmp_hash="five-tuple", routing="flowlet",
                   extra={"FabricSwitch::FlowletTimeout": "0ns", "HostNic::ReorderTolerant": "true"})
    up = uplink_bytes(fab, every).astype(float)
    assert np.abs(up / up.mean() - 1).max() < 0.05


def test_default_routing_is_per_flow_ecmp_bit_for_bit():
    """Setting the defaults explicitly changes nothing: ecmp routing on the per-flow hash is the plain model."""
    _, plain = run()
    _, explicit = run(extra={"FabricSwitch::Routing": "ecmp", "FabricSwitch::EcmpHashFields": "flow",
                             "HostNic::QueuePairsPerConnection": "1"})
    np.testing.assert_array_equal(plain.finish_ns, explicit.finish_ns)
    np.testing.assert_array_equal(plain.ports["tx_bytes"], explicit.ports["tx_bytes"])


def two_paths(slow_delay_ns: float):
    """A sender and a receiver on two leaves joined by two spines, one of them slow by its link delay."""
    from cosim.network.topology import HOST, SWITCH, Fabric

    delays = [1000.0, 1000.0, 1000.0, 1000.0, slow_delay_ns, slow_delay_ns]
    return Fabric(name="two-paths", node_kind=np.array([HOST, HOST, SWITCH, SWITCH, SWITCH, SWITCH], np.uint8),
                  link_a=np.array([0, 1, 2, 4, 2, 5], np.int32), link_b=np.array([2, 3, 4, 3, 5, 3], np.int32),
                  link_rate_bps=np.full(6, 100e9), link_delay_ns=np.array(delays))


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_spraying_over_unequal_paths_reorders_and_tolerant_receivers_place_it(transport):
    """Spraying one flow over a fast and a slow spine (+4 us) reorders nearly every other packet. A
    reorder-tolerant receiver places them and delivers every byte once, without NAK or retransmission, in
    about the slow path's latency plus the flow at line rate; go-back-N receivers NAK the gaps and the
    sender goes back again and again (RoCE), so the same flow takes several times longer."""
    fab = two_paths(3000.0)
    size = 256 * 1024
    flows = FlowSet(src=np.array([0], np.int32), dst=np.array([1], np.int32), size_bytes=np.array([size]),
                    start_ns=np.zeros(1), priority=np.zeros(1, np.uint8))
    attrs = transport_attributes(transport, dcqcn=False) | mechanism_attributes(routing="spray")
    tolerant = engine.simulate(fab, flows, attributes=attrs)
    assert tolerant.status == "complete" and tolerant.delivered_bytes[0] == size
    assert tolerant.counters["reordered_packets"] > size // MTU // 4
    assert tolerant.counters["naks_sent"] == 0 and tolerant.counters["retransmitted_packets"] == 0
    line_ns = -(-size // MTU) * (MTU + HEADER) * 8 / 100.0
    assert tolerant.finish_ns[0] < line_ns + 3 * 3000.0 + 4 * (MTU + HEADER) * 8 / 100.0
    if transport == "roce":
        strict = engine.simulate(fab, flows, attributes=attrs | {"HostNic::ReorderTolerant": "false"})
        assert strict.status == "complete" and strict.delivered_bytes[0] == size
        assert strict.counters["naks_sent"] > 0 and strict.counters["retransmitted_packets"] > 0
        assert strict.finish_ns[0] > 2 * tolerant.finish_ns[0]
