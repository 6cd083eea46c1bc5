"""Dragonfly (cosim.network.dragonfly, FabricSwitch::DragonflyRouting): structure against Kim et al.'s
arithmetic, one-line refusals, a lossless run that conserves bytes, and the routing physics through the real
simulator: adversarial traffic (group i to group i+1) is held to one global link by minimal routing and
spread by Valiant and UGAL; all-to-all traffic is not slower minimally than through Valiant's detours."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import engine
from cosim.errors import CosimInputError
from cosim.network import fabrics
from cosim.network.dragonfly import balanced, dragonfly, router_groups
from cosim.network.names import node_names
from cosim.network.spec import NetworkSpec
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet, permutation

#: p=2, a=4, h=2, g=9: 72 hosts, 36 routers of 7 ports
SIZES = {"hosts_per_router": 2, "routers_per_group": 4, "global_links_per_router": 2, "groups": 9}
LINK_GBPS = 100.0
HOSTS_PER_GROUP = 8
ADVERSARIAL_FLOW_BYTES = 256 * 1024


@pytest.fixture(scope="module")
def fabric():
    return dragonfly(**SIZES, host_link_gbps=LINK_GBPS, host_link_delay_ns=1000.0)


def _router_hops(f) -> np.ndarray:
    """Hops between every pair of routers (BFS over router-to-router links)."""
    routers = f.switch_ids
    index = {int(r): i for i, r in enumerate(routers)}
    between = np.isin(f.link_a, routers) & np.isin(f.link_b, routers)
    adj = [[] for _ in routers]
    for a, b in zip(f.link_a[between].tolist(), f.link_b[between].tolist()):
        adj[index[a]].append(index[b])
        adj[index[b]].append(index[a])
    hops = np.full((routers.size, routers.size), -1)
    for s in range(routers.size):
        hops[s, s], frontier, d = 0, [s], 0
        while frontier:
            d, nxt = d + 1, []
            for v in (v for u in frontier for v in adj[u] if hops[s, v] < 0):
                hops[s, v] = d
                nxt.append(v)
            frontier = nxt
    return hops


def test_structure_follows_the_parameters(fabric):
    """72 hosts, a·g routers of p + (a-1) + h ports, g·a(a-1)/2 local links, one global link per pair of groups,
    router diameter 3 (local, global, local); the balanced dragonfly of 72 hosts is this one."""
    p, a, h, g = (SIZES[k] for k in ("hosts_per_router", "routers_per_group", "global_links_per_router", "groups"))
    assert balanced(72) == SIZES and balanced(6)["groups"] == 3 and balanced(4, 2)["hosts_per_router"] == 2
    assert fabric.n_hosts == p * a * g and fabric.n_switches == a * g
    assert set(fabric.degree()[fabric.switch_ids].tolist()) == {p + (a - 1) + h}
    assert np.bincount(fabric.link_tier).tolist() == [0, p * a * g, g * a * (a - 1) // 2, g * (g - 1) // 2]
    groups = router_groups(fabric)
    glob = fabric.link_tier == 3
    pairs = np.sort(np.stack([groups[fabric.link_a[glob]], groups[fabric.link_b[glob]]]), axis=0)
    assert np.unique(pairs, axis=1).shape[1] == g * (g - 1) // 2  # every pair once
    local = fabric.link_tier == 2
    assert (groups[fabric.link_a[local]] == groups[fabric.link_b[local]]).all()
    assert _router_hops(fabric).max() == 3
    assert fabric.describe()["tiers"][2]["n_links"] == g * (g - 1) // 2


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({**SIZES, "groups": 10}, "groups", "at most 9 groups"),
    ({**SIZES, "hosts": 73}, "hosts", "do not fit"),
    ({**SIZES, "gpus_per_server": 4}, "gpus_per_server", "one router"),
    ({**SIZES, "routers_per_group": 0}, "routers_per_group", "at least 1"),
])
def test_bad_sizes_are_one_line_errors(fields, field, words):
    """Sizes a dragonfly cannot have name their field and say why."""
    with pytest.raises(CosimInputError, match=words) as exc:
        dragonfly(**fields, host_link_gbps=LINK_GBPS, host_link_delay_ns=1000.0)
    assert exc.value.field == field


@pytest.mark.parametrize(("network", "field"), [
    ({"topology": "leaf-spine", "hosts_per_router": 2}, "network.hosts_per_router"),
    ({"topology": "dragonfly", "dragonfly_routing": "valiant"}, "network.dragonfly_routing"),
    ({"topology": "dragonfly", "dragonfly_routing": "ugal", "transport": "ib"}, "network.dragonfly_routing"),
])
def test_spec_refuses_what_does_not_apply(network, field):
    """Dragonfly fields on another topology, and non-minimal routes on a lossless transport (no virtual
    channel per phase: they could deadlock), are refused before anything runs."""
    with pytest.raises(CosimInputError) as exc:
        NetworkSpec(**network)
    assert exc.value.field == field


def test_network_spec_sizes_the_balanced_dragonfly():
    """topology dragonfly without sizes is the balanced one that holds the hosts; a given size wins."""
    net = NetworkSpec(topology="dragonfly", transport="uec", dragonfly_routing="ugal")
    f = fabrics.for_network(net, servers=72, gpus_per_server=1, hosts_per_leaf=4)
    assert f.params["groups"] == 9 and f.n_switches == 36
    f = fabrics.for_network(NetworkSpec(topology="dragonfly", routers_per_group=6), servers=72, gpus_per_server=1,
                            hosts_per_leaf=4)
    assert f.params["routers_per_group"] == 6 and f.params["groups"] == 13 and f.n_hosts == 72
    with pytest.raises(CosimInputError) as exc:
        fabrics.for_network(NetworkSpec(topology="dragonfly", dragonfly_groups=2), servers=72, gpus_per_server=1,
                            hosts_per_leaf=4)
    assert exc.value.field == "network.hosts"


def _run(f, flows, transport="uec", routing="minimal"):
    attrs = transport_attributes(transport) | mechanism_attributes(dragonfly_routing=routing)
    out = engine.simulate(f, flows, attributes=attrs, seed=1)
    assert out.status == "complete"
    assert (out.delivered_bytes == flows.size_bytes).all()
    return out


def _all_to_all(f, size_bytes):
    src, dst = np.meshgrid(f.host_ids, f.host_ids, indexing="ij")
    keep = src != dst
    return FlowSet.from_arrays(src[keep], dst[keep], size_bytes)


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_lossless_minimal_run_conserves_bytes(fabric, transport, engine_ns):
    """Adversarial traffic minimally on RoCE (PFC) and InfiniBand (credits): every byte arrives, nothing is
    dropped, and the single global link of each pair of groups carries all of its groups' bytes."""
    flows = permutation(fabric.host_ids, shift=HOSTS_PER_GROUP, size_bytes=ADVERSARIAL_FLOW_BYTES)
    out = _run(fabric, flows, transport)
    assert out.counters["switch_drops"] == 0 and out.ports["drops"].sum() == 0
    groups = router_groups(fabric)
    node, peer = out.ports["node"], out.ports["peer"]
    is_router = (node >= fabric.n_hosts) & (peer >= fabric.n_hosts)
    crossing = is_router & (groups[node] != groups[np.where(is_router, peer, node)])
    carried = out.ports["tx_bytes"][crossing]
    payload = HOSTS_PER_GROUP * ADVERSARIAL_FLOW_BYTES
    assert (np.sort(carried)[-SIZES["groups"]:] >= payload).all()  # one link per group pair carries it all
    assert np.count_nonzero(carried >= payload) == SIZES["groups"]


def test_adversarial_traffic_is_spread_by_valiant_and_ugal(fabric, engine_ns):
    """Every host of group i to a host of group i+1: minimal routing takes the one global link between them,
    so the last byte arrives no earlier than the group's bytes at that link's rate; Valiant and UGAL-L
    send through other groups and finish well before that bound."""
    flows = permutation(fabric.host_ids, shift=HOSTS_PER_GROUP, size_bytes=ADVERSARIAL_FLOW_BYTES)
    bound_ns = HOSTS_PER_GROUP * ADVERSARIAL_FLOW_BYTES * 8 / LINK_GBPS
    done = {r: float(_run(fabric, flows, "uec", r).finish_ns.max()) for r in ("minimal", "valiant", "ugal")}
    assert done["minimal"] >= bound_ns
    assert done["valiant"] < 0.6 * bound_ns and done["ugal"] < 0.6 * bound_ns, done


def test_uniform_traffic_is_not_slower_minimally(fabric, engine_ns):
    """All-to-all: every pair of groups has equal load, and Valiant's second global hop only doubles it:
    minimal finishes first, UGAL-L (which stays minimal while queues are even) no later than Valiant."""
    flows = _all_to_all(fabric, 16 * 1024)
    done = {r: float(_run(fabric, flows, "uec", r).finish_ns.max()) for r in ("minimal", "valiant", "ugal")}
    assert done["minimal"] <= done["ugal"] <= done["valiant"], done
    host_bound_ns = (fabric.n_hosts - 1) * 16 * 1024 * 8 / LINK_GBPS
    assert done["minimal"] >= host_bound_ns


def test_cli_runs_a_dragonfly(tmp_path, capsys, engine_ns):
    """cosim run --topology dragonfly --dragonfly-routing ugal runs a permutation on uec; the dry run shows
    the local and global tiers; valiant on roce exits 2 with one line."""
    from conftest import run_main

    common = ["run", "--pattern", "permutation", "--hosts", "72", "--flow-bytes", "64KiB", "--topology",
              "dragonfly", "-q"]
    out = tmp_path / "r.h5"
    code, _, err = run_main([*common, "--transport", "uec", "--dragonfly-routing", "ugal", "-o", str(out)], capsys)
    assert code == 0 and out.exists(), err
    code, text, err = run_main([*common, "--dry-run"], capsys)
    assert code == 0 and "dragonfly" in text, err
    code, _, err = run_main([*common, "--dragonfly-routing", "valiant", "-o", str(tmp_path / "no.h5")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "dragonfly_routing" in err


def test_runs_are_never_split_into_parts(fabric):
    """Exact decomposition finds parts on shortest paths; dragonfly routes go by group, so runs stay whole
    (two flows inside two different groups would otherwise be independent parts)."""
    from cosim.collectives import DagOpKind
    from cosim.decompose.exact import decomposition

    columns = {"kind": np.full(2, DagOpKind.FLOW), "src_node": np.array([0, 8]), "dst_node": np.array([1, 9])}
    plan = decomposition(fabric, columns, gpu_node=fabric.host_ids, attributes={})
    assert plan.mode == "whole" and "dragonfly" in plan.reason


@pytest.mark.parametrize("transport", ["uec", "roce", "ib"])
def test_a_dead_global_link_reroutes_through_another_group(fabric, transport, engine_ns):
    """The one global link between groups 0 and 1 dies at t = 0: after the routes converge, minimal routing has
    no local-global-local path left, so group 0's routers fall back to shortest paths through a third group
    (two global hops) instead of having no route at all. Every byte arrives; every delivered byte crossed two
    global links; a lossless fabric drops nothing but what met the dead link before the routes converged."""
    from cosim import faults as fs

    groups = router_groups(fabric)
    glob = fabric.link_tier == 3
    between = glob & (np.minimum(groups[fabric.link_a], groups[fabric.link_b]) == 0) \
        & (np.maximum(groups[fabric.link_a], groups[fabric.link_b]) == 1)
    (link,) = np.flatnonzero(between)
    src = fabric.host_ids[:HOSTS_PER_GROUP]
    flows = FlowSet.from_arrays(src, src + HOSTS_PER_GROUP, ADVERSARIAL_FLOW_BYTES)
    names = node_names(fabric)
    fault = fs.Fault(kind="link_down", element=f"{names[fabric.link_a[link]]}-{names[fabric.link_b[link]]}",
                     at_ns=0.0)
    plan = fs.FaultPlan(resolved=fs.resolve([fault], fabric, max_sim_time_ns=1e8), fabric=fabric, seed=1,
                        stop_ps=int(1e8 * 1e3))
    attrs = transport_attributes(transport) | {"LinkFaultModel::RouteConvergenceDelay": "10us",
                                               "HostNic::RetransmitTimeout": "100us"}
    out = engine.simulate(fabric, flows, seed=1, attributes=attrs, max_sim_time_ns=1e8, setup=plan.setup)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    node, peer = out.ports["node"], out.ports["peer"]
    is_router = (node >= fabric.n_hosts) & (peer >= fabric.n_hosts)
    crossing = is_router & (groups[node] != groups[np.where(is_router, peer, node)])
    assert int(out.ports["tx_bytes"][crossing].sum()) >= 2 * int(flows.size_bytes.sum())
    if transport != "uec":
        assert out.counters["switch_drops"] == 0
