"""Ideal FCTs from the grouped BFS levels equal those of a breadth-first tree per source, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.network import topology
from cosim.network.ideal import _adjacency, _paths, ideal_fct_ns, shortest_path_tree
from cosim.network.topology import Fabric


def _reference_paths(fabric: Fabric, src: np.ndarray, dst: np.ndarray):
    """The brute force: one BFS tree per source (shortest_path_tree), walked from each destination."""
    n = src.size
    rows: list[tuple[int, list[float], list[float]]] = []
    for f in range(n):
        parent, in_rate, in_delay = shortest_path_tree(fabric, int(src[f]))
        cur, rates, delays = int(dst[f]), [], []
        if parent[cur] != -2:
            while cur != src[f]:
                rates.append(in_rate[cur])
                delays.append(in_delay[cur])
                cur = int(parent[cur])
        rows.append((f, rates[::-1], delays[::-1]))
    width = max((len(r) for _, r, _ in rows), default=0)
    rate, delay, hops = np.zeros((n, width)), np.zeros((n, width)), np.zeros(n, np.int64)
    for f, r, d in rows:
        rate[f, :len(r)], delay[f, :len(d)], hops[f] = r, d, len(r)
    return rate, delay, hops


def _two_speed_leaf_spine() -> Fabric:
    """A leaf-spine whose parallel uplinks differ in rate and delay: a different parent changes the result."""
    fab = topology.leaf_spine(hosts=12, hosts_per_leaf=4, spines=3, oversubscription=2.0, host_link_gbps=100.0,
                              host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    rate = fab.link_rate_bps.copy()
    delay = fab.link_delay_ns.copy()
    rate[-5:] *= 0.5
    delay[-7:] += 333.0
    return Fabric(**{**{f: getattr(fab, f) for f in fab.__dataclass_fields__}, "link_rate_bps": rate,
                     "link_delay_ns": delay})


FABRICS = {
    "single-switch": lambda: topology.single_switch(hosts=6, link_gbps=100.0, link_delay_ns=500.0),
    "leaf-spine": lambda: topology.leaf_spine(hosts=16, hosts_per_leaf=4, spines=2, oversubscription=2.0,
                                              host_link_gbps=100.0, host_link_delay_ns=1000.0,
                                              fabric_link_delay_ns=1200.0),
    "two-speed": _two_speed_leaf_spine,
    "fat-tree": lambda: topology.fat_tree(k=4, link_gbps=100.0, link_delay_ns=1000.0, fabric_link_gbps=200.0,
                                          fabric_link_delay_ns=1500.0),
    "rail-optimized": lambda: topology.rail_optimized(servers=4, gpus_per_server=4, spines=2, host_link_gbps=400.0,
                                                      fabric_link_gbps=400.0, host_link_delay_ns=500.0,
                                                      fabric_link_delay_ns=800.0),
}


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_paths_and_ideal_fcts_equal_the_per_source_trees(name):
    """Every (source, destination) pair of hosts, switches as destinations, dst == src and empty flows:
    the same hops (rate, delay, count) and the same ideal FCTs as a BFS tree per source."""
    fabric = FABRICS[name]()
    hosts = fabric.host_ids
    nodes = np.arange(fabric.n_nodes)
    src = np.concatenate([np.repeat(hosts, hosts.size), np.repeat(hosts[:3], fabric.n_nodes)])
    dst = np.concatenate([np.tile(hosts, hosts.size), np.tile(nodes, 3)])
    want, got = _reference_paths(fabric, src, dst), _paths(fabric, src, dst)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape and np.array_equal(w, g)
    size = np.random.default_rng(1).integers(0, 3 * 4096, src.size)
    rate, delay, hops = want
    ideal = ideal_fct_ns(fabric, src, dst, size, mtu_bytes=4096, header_bytes=60)
    assert np.all(ideal[(dst == src) & (size > 0)] == np.inf) and np.all(ideal[size == 0] == 0)
    assert np.all(ideal[(hops > 0) & (size > 0)] > delay.sum(1)[(hops > 0) & (size > 0)])


def test_unreachable_destinations_have_no_path():
    """Two islands: flows across them have 0 hops (ideal FCT inf), as with a tree per source."""
    a = topology.single_switch(hosts=3, link_gbps=100.0, link_delay_ns=500.0)
    ptr = _adjacency(a)[0]
    assert ptr[-1] == 2 * a.n_links
    src, dst = np.array([0, 1, 2]), np.array([1, 1, 0])
    want, got = _reference_paths(a, src, dst), _paths(a, src, dst)
    for w, g in zip(want, got):
        assert np.array_equal(w, g)


@pytest.mark.parametrize("cap", [None, 40])
def test_ideal_fcts_by_slices_with_a_path_cache_are_those_of_one_call(cap, monkeypatch):
    """Flows computed a slice at a time with one PathCache (pairs within a leaf first, then across the
    spines, so the cache widens; with a cap of 40 pairs it fills and walks the rest uncached) get the ideal
    FCTs of one call without it, bit for bit; every size computed once per (pair, size) or per flow alike."""
    from cosim.network import ideal

    if cap is not None:
        monkeypatch.setattr(ideal, "PATH_CACHE_PAIRS", cap)
    fabric = FABRICS["two-speed"]()
    hosts = fabric.host_ids
    rng = np.random.default_rng(7)
    near = np.repeat(hosts[:4], 4), np.tile(hosts[:4], 4)  # one leaf: 2 hops
    far = rng.choice(hosts, 3000), rng.choice(hosts, 3000)
    src, dst = np.concatenate([near[0], far[0]]), np.concatenate([near[1], far[1]])
    size = rng.choice([0, 1, 4096, 4097, 3 << 20], src.size)
    whole = ideal_fct_ns(fabric, src, dst, size, mtu_bytes=4096, header_bytes=60)
    cache = ideal.PathCache(fabric)
    cuts = [0, 16, 700, 701, 2000, src.size]
    sliced = np.concatenate([ideal_fct_ns(fabric, src[lo:hi], dst[lo:hi], size[lo:hi], mtu_bytes=4096,
                                          header_bytes=60, paths=cache) for lo, hi in zip(cuts, cuts[1:])])
    assert np.array_equal(sliced, whole)
    pairs = np.unique(src * fabric.n_nodes + dst).size
    assert cache._keys.size == pairs if cap is None else 16 <= cache._keys.size <= cap < pairs
