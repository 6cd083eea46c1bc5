"""ECMP routes computed per destination leaf (FabricBuilder::ComputeRoutes): every packet takes a shortest
path, and the equal-cost choices above the leaf spread flows over every upper-tier switch."""

from __future__ import annotations

import numpy as np

from cosim import engine
from cosim.network import topology
from cosim.workload import flows as fl


def _all_pairs(n_hosts: int) -> tuple[np.ndarray, np.ndarray]:
    src, dst = np.divmod(np.arange(n_hosts * n_hosts), n_hosts)
    keep = src != dst
    return src[keep], dst[keep]


def test_fat_tree_packets_take_shortest_paths_and_spread_over_every_core(engine_ns):
    k = 4
    fabric = topology.fat_tree(k=k, link_gbps=100.0, link_delay_ns=500.0)
    src, dst = _all_pairs(fabric.n_hosts)
    flows = fl.FlowSet.from_arrays(src, dst, 1000)  # one data packet per flow
    out = engine.simulate(fabric, flows)
    assert out.status == "complete" and out.counters["switch_drops"] == 0
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    half = k // 2
    same_edge = src // half == dst // half
    same_pod = src // (half * half) == dst // (half * half)
    shortest_links = np.where(same_edge, 2, np.where(same_pod, 4, 6))  # host-edge(-agg(-core-agg)-edge)-host
    assert out.data_packet_hops == int(shortest_links.sum())
    core = np.flatnonzero(fabric.node_tier == topology.TIER_CORE)
    tx = out.ports["tx_bytes"][np.isin(out.ports["node"], core)]
    per_core = np.bincount(np.searchsorted(core, out.ports["node"][np.isin(out.ports["node"], core)]),
                           weights=tx, minlength=core.size)
    assert np.all(per_core > 0)  # inter-pod flows hash over all (k/2)^2 cores


def test_leaf_spine_same_leaf_traffic_never_leaves_the_leaf(engine_ns):
    fabric = topology.leaf_spine(hosts=8, hosts_per_leaf=4, spines=2, host_link_gbps=100.0,
                                 host_link_delay_ns=500.0, fabric_link_delay_ns=500.0)
    src, dst = _all_pairs(fabric.n_hosts)
    local = src // 4 == dst // 4
    flows = fl.FlowSet.from_arrays(src[local], dst[local], 1000)
    out = engine.simulate(fabric, flows)
    assert out.status == "complete"
    assert out.data_packet_hops == 2 * int(local.sum())
    spines = np.flatnonzero(fabric.node_tier == topology.TIER_SPINE)
    assert out.ports["tx_bytes"][np.isin(out.ports["node"], spines)].sum() == 0
