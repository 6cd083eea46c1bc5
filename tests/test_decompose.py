"""Independent parts of a run's traffic (cosim.runs.decompose): components of the links ECMP can use."""

import numpy as np
import pytest

from cosim.network import topology
from cosim.runs.decompose import describe_parts, flow_parts


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
    fab, gps = _rails(), 4
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
