"""Independent parts of a run's traffic (cosim.decompose.parts): components of the links ECMP can use."""

import numpy as np
import pytest

from cosim.decompose.parts import describe_parts, flow_parts, shortest_routes
from cosim.network import ideal, topology


def _rails(servers=4, gps=4, spines=2):
    return topology.rail_optimized(servers=servers, gpus_per_server=gps, spines=spines, host_link_gbps=400.0,
                                   host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)


def test_same_rail_rings_are_one_part_per_rail_and_spines_stay_idle():
    """Data-parallel rings along each rail (NIC g of every server) never leave their rail switch: one part
    per rail, and every spine uplink is unused."""
    fab, servers, gps = _rails(), 4, 4
    src = np.array([s * gps + g for g in range(gps) for s in range(servers)])
    dst = np.array([((s + 1) % servers) * gps + g for g in range(gps) for s in range(servers)])
    parts = flow_parts(fab, fab.host_ids[src], fab.host_ids[dst])
    assert parts.n_parts == gps
    # flows of one rail share a part, flows of different rails never do
    rail = src % gps
    for g in range(gps):
        assert np.unique(parts.flow_part[rail == g]).size == 1
    assert np.unique(parts.flow_part).size == gps
    assert (parts.switches_per_part(fab) == 1).all()
    d = describe_parts(fab, fab.host_ids[src], fab.host_ids[dst])
    assert d["independent_parts"] == gps and d["flows_per_part"] == [servers]
    assert d["unused_links"] == fab.n_links - servers * gps  # only the host links carry traffic


def test_a_cross_rail_flow_joins_every_rail_it_can_reach_through_the_spines():
    """One flow from rail 0 to rail 1 may take any spine, so rails 0 and 1 (and the spines) become one part."""
    fab = _rails()
    src = fab.host_ids[np.array([0, 1, 2, 4])]  # 0 → 5 crosses rails 0 and 1
    dst = fab.host_ids[np.array([5, 9, 10, 8])]
    parts = flow_parts(fab, src, dst)
    assert parts.flow_part[0] == parts.flow_part[1]  # rail 1 ring joined to the cross-rail flow
    assert parts.flow_part[2] != parts.flow_part[0]  # rail 2 stays apart
    assert parts.n_parts == 2
    assert parts.switches_per_part(fab).max() == 2 + 2  # two rail switches and both spines


@pytest.mark.parametrize("hosts", [4, 8])
def test_single_switch_is_one_part(hosts):
    """Every flow on a single switch shares it: one part, whatever the pattern."""
    fab = topology.single_switch(hosts=hosts, link_gbps=100.0, link_delay_ns=1000.0)
    h = fab.host_ids
    parts = flow_parts(fab, h[:-1], np.roll(h, 1)[:-1])
    assert parts.n_parts == 1 and (parts.flow_part == 0).all()



def _pairwise_reference(fab, src, dst):
    """Per flow, the links on some shortest path and the hop count, from a breadth-first search at each
    endpoint (transit through switches only): the definition, flow by flow."""
    a, b = fab.link_a.astype(np.int64), fab.link_b.astype(np.int64)
    links, hops = [], []
    for s, t in zip(src.tolist(), dst.tolist()):
        ds, dt = ideal.hop_counts(fab, s), ideal.hop_counts(fab, t)
        total = int(ds[t])
        if s == t or total < 0:
            links.append(frozenset())
            hops.append(0)
            continue
        on = (((ds[a] >= 0) & (dt[b] >= 0) & (ds[a] + 1 + dt[b] == total))
              | ((ds[b] >= 0) & (dt[a] >= 0) & (ds[b] + 1 + dt[a] == total)))
        links.append(frozenset(np.flatnonzero(on).tolist()))
        hops.append(total)
    return links, hops


@pytest.mark.parametrize("fabric", [
    lambda: topology.fat_tree(k=4, link_gbps=100.0, link_delay_ns=500.0),
    lambda: topology.leaf_spine(hosts=12, hosts_per_leaf=4, spines=2, host_link_gbps=100.0,
                                host_link_delay_ns=500.0, fabric_link_delay_ns=500.0),
    _rails,
], ids=["fat_tree", "leaf_spine", "rails"])
def test_routes_searched_per_source_switch_equal_the_per_flow_definition(fabric):
    """Searching once per source switch finds, for random flows, exactly the links and the equal-cost
    multiplicity (more links than hops) that the per-flow breadth-first definition gives."""
    fab = fabric()
    rng = np.random.default_rng(7)
    h = fab.host_ids.astype(np.int64)
    src, dst = rng.choice(h, 60), rng.choice(h, 60)
    src[:3] = dst[:3]  # a host to itself uses no link
    links, hops = _pairwise_reference(fab, src, dst)
    routes = shortest_routes(fab, src, dst)
    assert routes.routed.tolist() == [bool(r) for r in links]
    assert set(np.flatnonzero(routes.used_link).tolist()) == set().union(*links)
    assert routes.multipath.tolist() == [len(r) > n for r, n in zip(links, hops)]
    assert routes.multipath.any()  # every one of these fabrics has equal-cost paths between some hosts
