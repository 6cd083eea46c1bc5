"""Topology generators: counts against closed formulas, structure, oversubscription, input checks, and one
tiny leaf-spine through the real simulator."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import CosimInputError
from cosim.network import fabrics
from cosim.network import topology as topo

DELAYS = {"host_link_delay_ns": 500.0, "fabric_link_delay_ns": 1000.0}


def n_components(fabric: topo.Fabric) -> int:
    """Connected components by min-label propagation with pointer jumping (hosts included)."""
    a, b = fabric.link_a, fabric.link_b
    labels = np.arange(fabric.n_nodes)
    while True:
        m = np.minimum(labels[a], labels[b])
        new = labels.copy()
        np.minimum.at(new, a, m)
        np.minimum.at(new, b, m)
        new = new[new]
        if np.array_equal(new, labels):
            return int(np.unique(labels).size)
        labels = new


def neighbours(fabric: topo.Fabric, node: int) -> np.ndarray:
    """Peers of ``node``, one entry per link (parallel links repeat)."""
    return np.concatenate([fabric.link_b[fabric.link_a == node], fabric.link_a[fabric.link_b == node]])


def all_fabrics():
    return [
        topo.point_to_point(link_gbps=100.0, link_delay_ns=0.0),
        topo.single_switch(hosts=5, link_gbps=100.0, link_delay_ns=100.0),
        topo.leaf_spine(hosts=64, hosts_per_leaf=16, spines=4, host_link_gbps=100.0, **DELAYS),
        topo.leaf_spine(hosts=48, hosts_per_leaf=8, spines=3, oversubscription=2.0, host_link_gbps=400.0,
                        fabric_link_gbps=100.0, gpus_per_server=4, **DELAYS),
        topo.fat_tree(k=2, link_gbps=100.0, link_delay_ns=100.0),
        topo.fat_tree(k=6, link_gbps=100.0, link_delay_ns=100.0),
        topo.rail_optimized(servers=6, spines=2, host_link_gbps=400.0, **DELAYS),
        topo.rail_optimized(servers=5, gpus_per_server=4, spines=3, oversubscription=1.5, host_link_gbps=200.0,
                            fabric_link_gbps=100.0, **DELAYS),
    ]


# --- invariants every fabric satisfies -------------------------------------------------------------------

@pytest.mark.parametrize("fabric", all_fabrics(), ids=lambda f: f"{f.name}-{f.n_hosts}")
def test_hosts_first_degree_one_connected_and_dtypes(fabric):
    assert (fabric.node_kind[: fabric.n_hosts] == topo.HOST).all()
    assert (fabric.node_kind[fabric.n_hosts:] == topo.SWITCH).all()
    assert (fabric.degree()[fabric.host_ids] == 1).all()
    assert n_components(fabric) == 1
    assert (fabric.link_a != fabric.link_b).all()
    assert fabric.node_kind.dtype == np.uint8 and fabric.node_tier.dtype == np.uint8
    assert fabric.link_a.dtype == np.int32 and fabric.link_b.dtype == np.int32
    assert fabric.link_rate_bps.dtype == np.float64 and fabric.link_delay_ns.dtype == np.float64
    assert fabric.link_tier.dtype == np.uint8
    assert fabric.host_server.dtype == np.int32 and fabric.host_gpu.dtype == np.int32
    assert fabric.host_server.size == fabric.host_gpu.size == fabric.n_hosts
    # a link's tier is its upper endpoint's tier
    upper = np.maximum(fabric.node_tier[fabric.link_a], fabric.node_tier[fabric.link_b])
    assert np.array_equal(fabric.link_tier, upper)
    # every switch-to-switch link joins adjacent tiers
    a_sw = fabric.node_kind[fabric.link_a] == topo.SWITCH
    b_sw = fabric.node_kind[fabric.link_b] == topo.SWITCH
    gap = np.abs(fabric.node_tier[fabric.link_a].astype(int) - fabric.node_tier[fabric.link_b])
    assert (gap[a_sw & b_sw] == 1).all()
    # (server, gpu) names each NIC once
    pairs = fabric.host_server.astype(np.int64) * 1_000_000 + fabric.host_gpu
    assert np.unique(pairs).size == fabric.n_hosts
    json.dumps(fabric.describe(), allow_nan=False)


def test_existing_generators_keep_signature_and_defaults():
    star = topo.single_switch(hosts=3, link_gbps=25.0, link_delay_ns=10.0)
    assert star.n_nodes == 4 and star.n_links == 3
    assert star.node_tier.tolist() == [0, 0, 0, 1] and star.link_tier.tolist() == [1, 1, 1]
    assert star.host_server.tolist() == [0, 1, 2] and star.host_gpu.tolist() == [0, 0, 0]
    assert np.isnan(star.oversubscription()).all()  # no uplinks
    p2p = topo.point_to_point(link_gbps=100.0, link_delay_ns=5.0)
    assert p2p.node_tier.tolist() == [0, 0] and p2p.link_tier.tolist() == [0]
    assert p2p.link_rate_bps.tolist() == [100e9]


def test_hand_built_fabric_gets_defaults_and_checks():
    fabric = topo.Fabric(name="x", node_kind=[0, 0, 1], link_a=[0, 1], link_b=[2, 2],
                         link_rate_bps=[1e9, 1e9], link_delay_ns=[0.0, 0.0])
    assert fabric.link_a.dtype == np.int32 and fabric.node_tier.tolist() == [0, 0, 1]
    assert fabric.params == {}
    with pytest.raises(CosimInputError, match="host 0 has 2 links"):
        topo.Fabric(name="x", node_kind=[0, 0, 1, 1], link_a=[0, 0, 1], link_b=[2, 3, 2],
                    link_rate_bps=[1e9] * 3, link_delay_ns=[0.0] * 3)
    with pytest.raises(CosimInputError, match="hosts must come first"):
        topo.Fabric(name="x", node_kind=[1, 0, 0], link_a=[1, 2], link_b=[0, 0],
                    link_rate_bps=[1e9] * 2, link_delay_ns=[0.0] * 2)
    with pytest.raises(CosimInputError, match="fabric.link_a"):
        topo.Fabric(name="x", node_kind=[0, 0], link_a=[0], link_b=[7], link_rate_bps=[1e9], link_delay_ns=[0.0])
    with pytest.raises(CosimInputError, match="fabric.host_gpu"):
        topo.Fabric(name="x", node_kind=[0, 0], link_a=[0], link_b=[1], link_rate_bps=[1e9], link_delay_ns=[0.0],
                    host_gpu=[0])


# --- fat tree ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [2, 4, 6, 8, 16])
def test_fat_tree_counts(k):
    f = topo.fat_tree(k=k, link_gbps=100.0, link_delay_ns=100.0)
    assert f.n_hosts == k**3 // 4
    assert f.n_switches == 5 * k**2 // 4
    assert f.n_links == 3 * k**3 // 4
    assert [f.tier_ids(t).size for t in range(4)] == [k**3 // 4, k**2 // 2, k**2 // 2, k**2 // 4]
    assert [int(np.count_nonzero(f.link_tier == t)) for t in (1, 2, 3)] == [k**3 // 4] * 3


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_structure_is_al_fares(k):
    f = topo.fat_tree(k=k, link_gbps=100.0, link_delay_ns=100.0)
    half = k // 2
    assert (f.degree()[f.switch_ids] == k).all()
    edges, aggs, cores = f.tier_ids(1), f.tier_ids(2), f.tier_ids(3)
    pod_of = np.full(f.n_nodes, -1)
    pod_of[edges] = np.arange(edges.size) // half
    pod_of[aggs] = np.arange(aggs.size) // half
    for e in edges:  # k/2 hosts down, every agg of its own pod up, no parallel links
        peers = neighbours(f, e)
        assert np.count_nonzero(f.node_tier[peers] == 0) == half
        up = peers[f.node_tier[peers] == 2]
        assert sorted(up.tolist()) == sorted(aggs[pod_of[aggs] == pod_of[e]].tolist())
    for c in cores:  # exactly one aggregation switch in each pod
        peers = neighbours(f, c)
        assert (f.node_tier[peers] == 2).all()
        assert sorted(pod_of[peers].tolist()) == list(range(k))
    # hosts on edge h // (k/2)
    host_edge = f.link_b[: f.n_hosts]
    assert np.array_equal(host_edge, edges[np.arange(f.n_hosts) // half])


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_full_bisection(k):
    f = topo.fat_tree(k=k, link_gbps=100.0, link_delay_ns=100.0)
    assert np.allclose(f.oversubscription(1), 1.0) and np.allclose(f.oversubscription(2), 1.0)
    # cut the pods in two halves: the aggregation-core links leaving one half carry all its hosts' traffic
    half = k // 2
    aggs = f.tier_ids(2)
    first_half_aggs = aggs[: aggs.size // 2]  # pods 0..k/2-1
    core_links = np.isin(f.link_a, first_half_aggs) & (f.link_tier == 3)
    host_capacity = (f.n_hosts // 2) * 100e9
    assert f.link_rate_bps[core_links].sum() == pytest.approx(host_capacity)
    assert int(np.count_nonzero(core_links)) == k * half * half // 2


def test_fat_tree_servers_and_fabric_rates():
    f = topo.fat_tree(k=8, link_gbps=100.0, link_delay_ns=100.0, fabric_link_gbps=200.0,
                      fabric_link_delay_ns=300.0, gpus_per_server=4)
    assert f.n_servers == 32 and f.host_gpu.tolist()[:8] == [0, 1, 2, 3, 0, 1, 2, 3]
    # one server's NICs all share an edge switch
    edge_of_host = f.link_b[: f.n_hosts]
    for s in range(f.n_servers):
        assert np.unique(edge_of_host[f.host_server == s]).size == 1
    assert set(f.link_rate_bps[f.link_tier >= 2]) == {200e9}
    assert set(f.link_delay_ns[f.link_tier >= 2]) == {300.0}
    assert np.allclose(f.oversubscription(1), 0.5)


# --- leaf-spine -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("hosts", "per_leaf", "spines"), [(4, 2, 2), (64, 16, 4), (96, 32, 8), (8, 8, 1)])
def test_leaf_spine_counts(hosts, per_leaf, spines):
    f = topo.leaf_spine(hosts=hosts, hosts_per_leaf=per_leaf, spines=spines, host_link_gbps=100.0, **DELAYS)
    leaves = hosts // per_leaf
    assert f.n_hosts == hosts and f.n_switches == leaves + spines
    assert f.n_links == hosts + leaves * spines
    assert f.tier_ids(1).size == leaves and f.tier_ids(2).size == spines
    assert (f.degree()[f.tier_ids(1)] == per_leaf + spines).all()
    assert (f.degree()[f.tier_ids(2)] == leaves).all()
    # every leaf reaches every spine
    for leaf in f.tier_ids(1):
        peers = neighbours(f, leaf)
        assert sorted(peers[f.node_tier[peers] == 2].tolist()) == f.tier_ids(2).tolist()
    assert set(f.link_delay_ns[f.link_tier == 1]) == {500.0}
    assert set(f.link_delay_ns[f.link_tier == 2]) == {1000.0}


@pytest.mark.parametrize("o", [1.0, 1.5, 2.0, 3.0, 4.0, 7.0])
def test_leaf_spine_derived_rate_realizes_requested_oversubscription(o):
    f = topo.leaf_spine(hosts=96, hosts_per_leaf=24, spines=5, oversubscription=o, host_link_gbps=400.0, **DELAYS)
    assert f.n_links == 96 + 4 * 5  # one link per (leaf, spine) whatever the ratio
    assert np.allclose(f.oversubscription(1), o, rtol=1e-9)
    assert f.link_rate_bps[f.link_tier == 2] == pytest.approx(24 * 400e9 / o / 5)
    assert f.describe()["tiers"][0]["oversubscription"]["max"] == pytest.approx(o)


@pytest.mark.parametrize(("per_leaf", "host_gbps", "spines", "o", "fabric_gbps", "per_pair"), [
    (32, 400.0, 4, 1.0, 400.0, 8),  # 12.8 T of hosts over 32 x 400 G
    (32, 400.0, 4, 2.0, 400.0, 4),
    (32, 400.0, 8, 4.0, 400.0, 1),
    (16, 100.0, 4, 1.0, 100.0, 4),
    (8, 100.0, 2, 1.0, 800.0, 1),  # one link per spine is the floor: 1600 G up for 800 G down, 0.5:1
])
def test_leaf_spine_parallel_links_hit_exact_ratio(per_leaf, host_gbps, spines, o, fabric_gbps, per_pair):
    f = topo.leaf_spine(hosts=per_leaf * 3, hosts_per_leaf=per_leaf, spines=spines, oversubscription=o,
                        host_link_gbps=host_gbps, fabric_link_gbps=fabric_gbps, **DELAYS)
    assert f.params["uplinks_per_spine"] == per_pair
    assert f.n_links == per_leaf * 3 + 3 * spines * per_pair
    uplink_pairs = np.stack([f.link_a, f.link_b], 1)[f.link_tier == 2]
    _, counts = np.unique(uplink_pairs, axis=0, return_counts=True)
    assert counts.size == 3 * spines and (counts == per_pair).all()  # parallel links, all kept
    assert set(f.link_rate_bps[f.link_tier == 2]) == {fabric_gbps * 1e9}
    assert np.allclose(f.oversubscription(1), per_leaf * host_gbps / (spines * per_pair * fabric_gbps))
    if per_leaf * host_gbps / o % (spines * fabric_gbps) == 0:
        assert np.allclose(f.oversubscription(1), o)


def test_leaf_spine_inexact_ratio_rounds_up_capacity():
    # 16 x 100G hosts at 3:1 want 533 G up; 4 spines x 100 G: ceil(533/400) = 2 per spine -> realized 2:1
    f = topo.leaf_spine(hosts=64, hosts_per_leaf=16, spines=4, oversubscription=3.0, host_link_gbps=100.0,
                        fabric_link_gbps=100.0, **DELAYS)
    assert f.params["uplinks_per_spine"] == 2 and f.params["oversubscription"] == 3.0
    assert np.allclose(f.oversubscription(1), 2.0)


@settings(max_examples=60, deadline=None)
@given(per_leaf=st.integers(1, 40), leaves=st.integers(1, 12), spines=st.integers(1, 10),
       o=st.floats(1.0, 8.0), host_gbps=st.sampled_from([25.0, 100.0, 200.0, 400.0]),
       fabric_gbps=st.sampled_from([None, 100.0, 400.0, 800.0]))
def test_leaf_spine_properties(per_leaf, leaves, spines, o, host_gbps, fabric_gbps):
    hosts = per_leaf * leaves
    if hosts < 2:
        return
    f = topo.leaf_spine(hosts=hosts, hosts_per_leaf=per_leaf, spines=spines, oversubscription=o,
                        host_link_gbps=host_gbps, fabric_link_gbps=fabric_gbps, **DELAYS)
    realized = f.oversubscription(1)
    assert realized.size == leaves and np.ptp(realized) == pytest.approx(0.0, abs=1e-9)
    if fabric_gbps is None:
        assert np.allclose(realized, o, rtol=1e-9)
    else:  # never more oversubscribed than asked, and one fewer parallel link per spine would be
        m = f.params["uplinks_per_spine"]
        assert (realized <= o * (1 + 1e-9)).all()
        if m > 1:
            assert per_leaf * host_gbps / (spines * (m - 1) * fabric_gbps) > o
    assert (f.degree()[f.host_ids] == 1).all() and n_components(f) == 1


def test_leaf_spine_servers_share_a_leaf():
    f = topo.leaf_spine(hosts=32, hosts_per_leaf=16, spines=2, host_link_gbps=400.0, gpus_per_server=8, **DELAYS)
    assert f.n_servers == 4 and f.host_server.tolist() == np.repeat(np.arange(4), 8).tolist()
    assert f.host_gpu.tolist() == np.tile(np.arange(8), 4).tolist()
    assert f.describe()["nics_per_server"] == [8]


# --- rail-optimized ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("servers", "gpus", "spines"), [(4, 8, 2), (16, 8, 4), (3, 4, 1), (2, 1, 1)])
def test_rail_optimized_counts_and_rails(servers, gpus, spines):
    f = topo.rail_optimized(servers=servers, gpus_per_server=gpus, spines=spines, host_link_gbps=400.0, **DELAYS)
    assert f.n_hosts == servers * gpus and f.n_servers == servers
    assert f.tier_ids(1).size == gpus and f.tier_ids(2).size == spines
    assert f.n_links == servers * gpus + gpus * spines
    rails = f.tier_ids(1)
    host_switch = f.link_b[: f.n_hosts]
    for s in range(servers):
        for g in range(gpus):
            h = s * gpus + g
            assert f.host_server[h] == s and f.host_gpu[h] == g
            assert host_switch[h] == rails[g]  # NIC g of every server on rail g
    assert (f.degree()[rails] == servers + spines).all()
    assert (f.degree()[f.tier_ids(2)] == gpus).all()


@pytest.mark.parametrize("o", [1.0, 2.0, 2.5])
def test_rail_optimized_oversubscription(o):
    f = topo.rail_optimized(servers=8, spines=4, oversubscription=o, host_link_gbps=400.0, **DELAYS)
    assert np.allclose(f.oversubscription(1), o, rtol=1e-9)
    g = topo.rail_optimized(servers=8, spines=4, oversubscription=2.0, host_link_gbps=400.0,
                            fabric_link_gbps=400.0, **DELAYS)
    assert g.params["uplinks_per_spine"] == 1 and np.allclose(g.oversubscription(1), 2.0)


# --- dispatcher, description, large sizes -----------------------------------------------------------------

def test_for_network_dispatches_every_name():
    """for_network builds every topology in TOPOLOGIES from a NetworkSpec (its link rate and delay, servers
    of gpus_per_server NICs), pads leaf-spine leaves on request, and names bad input by its field."""
    from cosim.network.spec import NetworkSpec

    assert fabrics.TOPOLOGIES == ("single-switch", "leaf-spine", "fat-tree", "rail-optimized",
                                  "rail-optimized-three-tier", "three-tier", "dragonfly", "file")
    servers = {"single-switch": 2, "leaf-spine": 2, "fat-tree": 16, "rail-optimized": 2,
               "rail-optimized-three-tier": 2, "three-tier": 2, "dragonfly": 2}
    for name in servers:
        gps = 1 if name == "fat-tree" else 2
        net = NetworkSpec(topology=name, link_gbps=200.0, link_delay_ns=10.0)
        f = fabrics.for_network(net, servers=servers[name], gpus_per_server=gps, hosts_per_leaf=4)
        assert f.name == name and f.n_hosts == servers[name] * gps
        assert f.link_rate_bps.min() == 200e9 and np.all(f.link_delay_ns == 10.0)
        key = f.host_server.astype(np.int64) * gps + f.host_gpu
        assert np.array_equal(np.sort(key), np.arange(f.n_hosts))  # one NIC per (server, GPU)
    padded = fabrics.for_network(NetworkSpec(topology="leaf-spine"), servers=3, gpus_per_server=2,
                              hosts_per_leaf=4, fill_leaves=True)
    assert padded.n_hosts == 8  # idle servers fill the last leaf
    with pytest.raises(CosimInputError, match="unknown value 'torus'.*single-switch, leaf-spine") as err:
        NetworkSpec(topology="torus")
    assert err.value.field == "network.topology"
    with pytest.raises(CosimInputError) as err:
        fabrics.for_network(NetworkSpec(topology="fat-tree", switch_radix=4), servers=17, gpus_per_server=1,
                            hosts_per_leaf=4)
    assert err.value.field == "network.hosts"
    with pytest.raises(CosimInputError) as err:
        fabrics.for_network(NetworkSpec(topology="leaf-spine"), servers=2, gpus_per_server=3, hosts_per_leaf=4)
    assert err.value.field == "network.hosts_per_leaf"
    with pytest.raises(CosimInputError) as err:
        fabrics.for_network(NetworkSpec(topology="single-switch"), servers=0, gpus_per_server=1, hosts_per_leaf=4)
    assert err.value.field == "network.hosts"  # the field that sets the host count
    with pytest.raises(CosimInputError) as err:
        fabrics.for_network(NetworkSpec(topology="fat-tree", switch_radix=4), servers=17, gpus_per_server=1,
                            hosts_per_leaf=4, fill_leaves=True, hosts_field="network.topology")
    assert err.value.field == "network.topology"  # a training run's host count comes from its trace


def test_describe_reports_tiers_and_oversubscription():
    f = topo.leaf_spine(hosts=64, hosts_per_leaf=16, spines=4, oversubscription=2.0, host_link_gbps=100.0,
                        fabric_link_gbps=100.0, gpus_per_server=8, **DELAYS)
    d = json.loads(json.dumps(f.describe(), allow_nan=False))
    assert d["n_hosts"] == 64 and d["n_switches"] == 8 and d["n_servers"] == 8
    leaf, spine = d["tiers"]
    assert (leaf["tier"], leaf["n_switches"], leaf["n_links"], leaf["link_rates_gbps"]) == (1, 4, 64, [100.0])
    assert (spine["tier"], spine["n_switches"], spine["n_links"]) == (2, 4, 32)
    assert leaf["oversubscription"] == {"min": 2.0, "max": 2.0} and spine["oversubscription"] is None
    assert spine["capacity_gbps"] == 3200.0 and d["params"]["oversubscription"] == 2.0
    ft = topo.fat_tree(k=4, link_gbps=100.0, link_delay_ns=1.0).describe()
    assert [t["n_switches"] for t in ft["tiers"]] == [8, 8, 4]


def test_ten_thousand_hosts_build():
    f = topo.rail_optimized(servers=1280, spines=16, host_link_gbps=400.0, **DELAYS)
    assert f.n_hosts == 10240 and n_components(f) == 1
    g = topo.leaf_spine(hosts=10240, hosts_per_leaf=32, spines=16, host_link_gbps=400.0, fabric_link_gbps=400.0,
                        **DELAYS)
    assert g.n_links == 10240 + 320 * 16 * 2
    h = topo.fat_tree(k=34, link_gbps=400.0, link_delay_ns=100.0)
    assert h.n_hosts == 34**3 // 4 and (h.degree()[h.switch_ids] == 34).all()


# --- input checks -----------------------------------------------------------------------------------------

LS = {"hosts": 8, "hosts_per_leaf": 4, "spines": 2, "host_link_gbps": 100.0, **DELAYS}
RO = {"servers": 2, "spines": 2, "host_link_gbps": 100.0, **DELAYS}
FT = {"k": 4, "link_gbps": 100.0, "link_delay_ns": 10.0}


@pytest.mark.parametrize(("build", "changes", "field", "text"), [
    (topo.fat_tree, {"k": 5}, "k", "even k, got 5"),
    (topo.fat_tree, {"k": 0}, "k", "at least 2"),
    (topo.fat_tree, {"k": 4.5}, "k", "whole number"),
    (topo.fat_tree, {"k": True}, "k", "whole number"),
    (topo.fat_tree, {"link_gbps": 0.0}, "link_gbps", "positive"),
    (topo.fat_tree, {"link_delay_ns": -1.0}, "link_delay_ns", ">= 0"),
    (topo.fat_tree, {"gpus_per_server": 3}, "gpus_per_server", "k/2=2"),
    (topo.leaf_spine, {"oversubscription": 0.5}, "oversubscription", ">= 1"),
    (topo.leaf_spine, {"oversubscription": math.nan}, "oversubscription", "finite"),
    (topo.leaf_spine, {"hosts": 10}, "hosts", "10 hosts do not fill leaves of hosts_per_leaf=4"),
    (topo.leaf_spine, {"hosts_per_leaf": 2.5}, "hosts_per_leaf", "whole number"),
    (topo.leaf_spine, {"spines": 0}, "spines", "at least 1"),
    (topo.leaf_spine, {"spines": "4"}, "spines", "whole number"),
    (topo.leaf_spine, {"hosts": 1, "hosts_per_leaf": 1}, "hosts", "at least 2"),
    (topo.leaf_spine, {"host_link_gbps": -100.0}, "host_link_gbps", "positive"),
    (topo.leaf_spine, {"fabric_link_gbps": 0.0}, "fabric_link_gbps", "positive"),
    (topo.leaf_spine, {"fabric_link_delay_ns": math.inf}, "fabric_link_delay_ns", "finite"),
    (topo.leaf_spine, {"gpus_per_server": 3}, "gpus_per_server", "hosts_per_leaf=4"),
    (topo.rail_optimized, {"servers": 0}, "servers", "at least 1"),
    (topo.rail_optimized, {"servers": 1, "gpus_per_server": 1}, "servers", "at least 2"),
    (topo.rail_optimized, {"gpus_per_server": 0}, "gpus_per_server", "at least 1"),
    (topo.rail_optimized, {"oversubscription": 0.9}, "oversubscription", ">= 1"),
    (topo.rail_optimized, {"spines": 1.5}, "spines", "whole number"),
])
def test_bad_inputs_name_the_field(build, changes, field, text):
    base = {topo.fat_tree: FT, topo.leaf_spine: LS, topo.rail_optimized: RO}[build]
    with pytest.raises(CosimInputError, match=text) as err:
        build(**{**base, **changes})
    assert err.value.field == field
    assert str(err.value).startswith(field + ":") and "\n" not in str(err.value)


def test_integral_floats_from_config_files_are_accepted():
    f = topo.leaf_spine(**{**LS, "hosts": 8.0, "spines": 2.0})
    assert f.n_hosts == 8 and f.params["hosts"] == 8 and isinstance(f.params["hosts"], int)


# --- end to end -------------------------------------------------------------------------------------------

def test_tiny_leaf_spine_runs_in_the_simulator():
    from cosim import engine
    from cosim.workload import flows

    fabric = topo.leaf_spine(hosts=4, hosts_per_leaf=2, spines=2, host_link_gbps=100.0, **DELAYS)
    size = 50_000
    # shift 2 sends every flow across the spines (hosts 0,1 on leaf 0; 2,3 on leaf 1)
    fs = flows.permutation(fabric.host_ids, shift=2, size_bytes=size)
    out = engine.simulate(fabric, fs)
    assert out.status == "complete"
    assert (out.delivered_bytes == size).all()
    assert np.isfinite(out.finish_ns).all()
    # traffic crossed the spines
    spine_ports = np.isin(out.ports["node"], fabric.tier_ids(2))
    assert out.ports["tx_bytes"][spine_ports].sum() >= 4 * size
