"""Placement policies (cosim.plan.placement) as properties over random fabrics and job mixes: no GPU twice,
whole servers, and the layout each policy promises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import CosimInputError
from cosim.network import topology
from cosim.plan import placement
from cosim.spec import PLACEMENTS


def fabric(leaves: int, servers_per_leaf: int, gps: int):
    return topology.leaf_spine(hosts=leaves * servers_per_leaf * gps, hosts_per_leaf=servers_per_leaf * gps,
                               spines=1, host_link_gbps=100.0, host_link_delay_ns=1.0, fabric_link_delay_ns=1.0,
                               gpus_per_server=gps)


@st.composite
def cases(draw):
    leaves, per_leaf, gps = draw(st.integers(1, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if leaves * per_leaf * gps < 2:
        gps = 2
    n_servers = leaves * per_leaf
    demands = []
    for i in range(draw(st.integers(1, 5))):
        if draw(st.booleans()) and i == 0:  # an explicit job first: some NICs of the first servers
            k = draw(st.integers(1, gps * min(2, n_servers)))
            demands.append(placement.Demand(name=f"j{i}", where="w", hosts=tuple(range(k))))
        else:
            demands.append(placement.Demand(name=f"j{i}", where="w", servers=draw(st.integers(1, 4)),
                                            policy=draw(st.sampled_from(PLACEMENTS)),
                                            seed=draw(st.integers(0, 2**32))))
    return fabric(leaves, per_leaf, gps), gps, demands


@settings(max_examples=300, deadline=None)
@given(cases())
def test_no_gpu_is_placed_twice_and_jobs_get_whole_servers(case):
    """Whatever the fabric and policies: no NIC goes to two jobs, a policy job gets all NICs of exactly the
    servers it asked for, and a mix that does not fit is a CosimInputError, never an overlap."""
    fab, gps, demands = case
    servers = placement.server_map(fab, gps)
    explicit = {h // gps for d in demands if d.hosts for h in d.hosts}
    asked = sum(d.servers for d in demands if d.hosts is None)
    try:
        placed = placement.place(servers, demands)
    except CosimInputError as exc:
        assert "needs" in exc.problem and asked + len(explicit) > servers.n_servers
        return
    everything = np.concatenate(placed)
    assert np.unique(everything).size == everything.size
    placement.check_disjoint(placed, [d.name for d in demands])
    for d, hosts in zip(demands, placed):
        if d.hosts is not None:
            assert hosts.tolist() == list(d.hosts)
            continue
        assert hosts.size == d.servers * gps
        on = fab.host_server[hosts]
        assert np.array_equal(np.bincount(on)[np.unique(on)], np.full(d.servers, gps))
        assert not set(on.tolist()) & explicit


def test_policies_lay_out_two_jobs_as_promised():
    """4 leaves of 2 servers: packed gives each job whole leaves; spread puts a job's consecutive servers
    under different leaves; fragmented spaces them evenly with holes; random is reproducible by seed."""
    servers = placement.server_map(fabric(4, 2, 1), 1)
    leaf = servers.leaf

    def lay(policy, seed=0):
        return placement.place(servers, [placement.Demand(name=n, where="w", servers=2, policy=policy, seed=seed)
                                         for n in ("a", "b")])

    a, b = lay("packed")
    assert a.tolist() == [0, 1] and b.tolist() == [2, 3]
    a, b = lay("spread")
    assert leaf[a[0]] != leaf[a[1]] and leaf[b[0]] != leaf[b[1]] and a.tolist() == [0, 2]
    a, b = lay("fragmented")
    assert a.tolist() == [0, 4] and b.tolist() == [1, 5]
    assert [x.tolist() for x in lay("random", 7)] == [x.tolist() for x in lay("random", 7)]


def test_packed_prefers_the_tightest_leaf_that_fits():
    """Best fit: a 1-server job takes the leaf with the fewest free servers that still holds it."""
    servers = placement.server_map(fabric(2, 3, 1), 1)
    first = placement.Demand(name="a", where="w", servers=2, policy="packed")
    small = placement.Demand(name="b", where="w", servers=1, policy="packed")
    a, b = placement.place(servers, [first, small])
    assert a.tolist() == [0, 1] and b.tolist() == [2]


def test_explicit_training_hosts_must_keep_server_groups():
    """Ranks the lowering put on one server must share a physical server (else NVLink copies would cross
    the fabric)."""
    servers = placement.server_map(fabric(2, 2, 2), 2)
    bad = placement.Demand(name="t", where="workloads.t.hosts", hosts=(0, 2, 1, 3), rank_servers=2)
    with pytest.raises(CosimInputError, match="share a server in its trace"):
        placement.place(servers, [bad])
    ok = placement.Demand(name="t", where="w", hosts=(2, 3, 0, 1), rank_servers=2)
    assert placement.place(servers, [ok])[0].tolist() == [2, 3, 0, 1]
