"""A fabric file's routing tables (``routes``, cosim.network.fabric_file): pinned next hops carry every byte
on the links they name and none on the others, under PFC (RoCE) and credits (InfiniBand); a file without
them spreads over every shortest path; they round-trip; every bad route is a one-line error; loops are
refused, and dependency cycles unless the file consents."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosim.errors import CosimInputError
from cosim.network import fabric_file
from cosim.network.transport import DEFAULT_MTU_BYTES, transport_attributes
from cosim.workload import flows as fl

FLOW_BYTES = 50 * DEFAULT_MTU_BYTES
#: leaf0's hosts each send this many flows to a host of leaf1: enough that ECMP hashes them onto both spines
FLOWS_PER_HOST = 4


def two_leaves(**extra) -> dict:
    """Hosts h0, h1 on leaf0 and h2, h3 on leaf1; both leaves linked to spine0 and spine1."""
    nodes = ([{"name": f"h{i}", "kind": "host"} for i in range(4)]
             + [{"name": n, "kind": "switch"} for n in ("leaf0", "leaf1", "spine0", "spine1")])
    link = {"rate_gbps": 100, "delay_ns": 1000}
    links = ([{"a": f"h{i}", "b": f"leaf{i // 2}", **link} for i in range(4)]
             + [{"a": f"leaf{i}", "b": f"spine{j}", **link} for i in range(2) for j in range(2)])
    return {"format": "cosim-fabric/1", "name": "two-leaves", "nodes": nodes, "links": links, **extra}


PIN = {"switch": "leaf0", "to": "leaf1", "via": ["spine0"]}


def _run(fabric, transport: str):
    from cosim import engine

    src = np.repeat([0, 1], FLOWS_PER_HOST)
    flows = fl.FlowSet.from_arrays(src, src + 2, FLOW_BYTES)
    out = engine.simulate(fabric, flows, attributes=transport_attributes(transport), seed=1)
    assert out.status == "complete"
    assert (out.delivered_bytes == FLOW_BYTES).all() and int(out.ports["drops"].sum()) == 0
    return out


def _tx_bytes(fabric, out, node: str, peer: str) -> int:
    """Bytes sent by ``node``'s ports towards ``peer``."""
    ids = {n: i for i, n in enumerate(fabric.node_names)}
    at = (out.ports["node"] == ids[node]) & (out.ports["peer"] == ids[peer])
    return int(out.ports["tx_bytes"][at].sum())


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_pinned_route_carries_everything_over_its_spine(engine_ns, transport):
    """leaf0 -> leaf1 pinned via spine0: spine1 carries no data from leaf0 to leaf1 (nothing at all under
    RoCE; InfiniBand's credit updates, less than the one data packet of an MTU), every byte arrives, no
    drops; the same file without routes sends data over both spines."""
    pinned = fabric_file.from_document(two_leaves(routes=[PIN]))
    out = _run(pinned, transport)
    limit = 0 if transport == "roce" else DEFAULT_MTU_BYTES - 1
    assert _tx_bytes(pinned, out, "leaf0", "spine1") <= limit and _tx_bytes(pinned, out, "spine1", "leaf1") <= limit
    assert _tx_bytes(pinned, out, "spine0", "leaf1") >= 2 * FLOWS_PER_HOST * FLOW_BYTES
    free = fabric_file.from_document(two_leaves())
    out = _run(free, transport)
    assert _tx_bytes(free, out, "spine0", "leaf1") > 0 and _tx_bytes(free, out, "spine1", "leaf1") > 0


def test_routes_round_trip_to_identical_arrays_and_results(tmp_path, engine_ns):
    """write, read back: the same routes as node ids, the same run bit for bit."""
    f = fabric_file.from_document(two_leaves(routes=[PIN]))
    assert f.params["routes"] == [[f.node_names.index("leaf0"), f.node_names.index("leaf1"),
                                   [f.node_names.index("spine0")]]]
    path = tmp_path / "f.json"
    fabric_file.write(f, str(path))
    g = fabric_file.read(str(path))
    assert g.params["routes"] == f.params["routes"] and g.node_names == f.node_names
    for name in ("node_kind", "node_tier", "link_a", "link_b", "link_rate_bps", "link_delay_ns"):
        assert np.array_equal(getattr(f, name), getattr(g, name)), name
    a, b = _run(f, "roce"), _run(g, "roce")
    assert np.array_equal(a.finish_ns, b.finish_ns) and np.array_equal(a.ports["tx_bytes"], b.ports["tx_bytes"])


def test_routes_round_trip_through_networkx():
    """The routes ride on the graph's ``routes`` attribute (networkx is optional)."""
    pytest.importorskip("networkx")
    f = fabric_file.from_document(two_leaves(routes=[PIN]))
    g = fabric_file.from_networkx(fabric_file.to_networkx(f), name=f.name)
    assert g.params["routes"] == f.params["routes"]


def _with(route: dict) -> dict:
    return two_leaves(routes=[PIN, route])


@pytest.mark.parametrize("doc,needle", [
    (_with({"switch": "spine9", "to": "leaf1", "via": ["leaf1"]}), "routes[1].switch: unknown node 'spine9'"),
    (_with({"switch": "h0", "to": "leaf1", "via": ["leaf0"]}), "routes[1].switch: 'h0' is a host"),
    (_with({"switch": "spine0", "to": "spine1", "via": ["leaf1"]}), "routes[1].to: switch 'spine1' has no hosts"),
    (_with({"switch": "spine0", "to": "leaf1", "via": ["spine1"]}),
     "routes[1].via[0]: 'spine1' is not linked to 'spine0'"),
    (_with({"switch": "leaf1", "to": "leaf1", "via": ["spine0"]}), "routes[1].to: is its switch 'leaf1'"),
    (_with(PIN), "routes[1]: routes 'leaf0' to 'leaf1' again (routes[0])"),
    (_with({"switch": "spine0", "to": "leaf1", "via": []}), "routes[1].via: must be a non-empty list"),
    (_with({"switch": "spine0", "to": "leaf1", "via": ["leaf1", "leaf1"]}), "routes[1].via[1]: 'leaf1' is listed"),
    (_with({"switch": "spine0", "to": "leaf1", "via": ["leaf0"], "weight": 2}), "routes[1].weight: not a route key"),
    (two_leaves(routes={"leaf0": "spine0"}), "routes: must be a list"),
    # spine0 sends leaf1's packets back to leaf0, which sends them to spine0
    (_with({"switch": "spine0", "to": "leaf1", "via": ["leaf0"]}),
     "routes[0]: packets for the hosts of 'leaf1' go round spine0 -> leaf0 -> spine0"),
])
def test_bad_routes_give_one_line_errors(doc, needle):
    with pytest.raises(CosimInputError) as err:
        fabric_file.from_document(doc, where="f.json")
    assert needle in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("f.json")


def test_engine_refuses_routes_that_are_no_neighbours(engine_ns):
    """The engine checks the routes it is handed too (a Fabric built in Python skips the file's checks)."""
    import dataclasses

    from cosim import engine

    f = fabric_file.from_document(two_leaves())
    leaf0, leaf1 = f.node_names.index("leaf0"), f.node_names.index("leaf1")
    bad = dataclasses.replace(f, params={"routes": [[leaf0, leaf1, [leaf1]]]})
    with pytest.raises(CosimInputError, match=f"route override 0: node {leaf1} is no neighbour of switch {leaf0}"):
        engine.simulate(bad, fl.FlowSet.from_arrays([0], [2], 4096))


def test_cli_refuses_a_bad_route_in_one_line(tmp_path, capsys, engine_ns):
    """cosim run --topology file: a route to a switch without hosts exits 2 with one line, no traceback;
    the good file runs."""
    from conftest import run_main

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(two_leaves(routes=[PIN])))
    bad.write_text(json.dumps(_with({"switch": "spine0", "to": "spine1", "via": ["leaf1"]})))
    common = ["run", "--pattern", "permutation", "--hosts", "4", "--flow-bytes", "8KiB", "--topology", "file", "-q"]
    code, _, err = run_main([*common, "--topology-file", str(bad), "-o", str(tmp_path / "no.h5")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "has no hosts" in err and "Traceback" not in err
    code, _, err = run_main([*common, "--topology-file", str(good), "-o", str(tmp_path / "r.h5")], capsys)
    assert code == 0, err


def ring(n: int, **extra) -> dict:
    """n switches s0..s(n-1) in a ring, host h_i on s_i."""
    nodes = [{"name": f"h{i}", "kind": "host"} for i in range(n)] + [{"name": f"s{i}", "kind": "switch"}
                                                                     for i in range(n)]
    link = {"rate_gbps": 100, "delay_ns": 1000}
    links = ([{"a": f"h{i}", "b": f"s{i}", **link} for i in range(n)]
             + [{"a": f"s{i}", "b": f"s{(i + 1) % n}", **link} for i in range(n)])
    return {"name": f"ring{n}", "nodes": nodes, "links": links, **extra}


def test_routes_that_make_a_dependency_cycle_need_consent():
    """A ring of three has no cycle on its shortest paths (one hop between any two switches), but routes
    that send each switch's packets the long way round (s0 -> s2 -> s1 and so on) wait on each other in a
    cycle: refused, unless the file says allow_cyclic_routes."""
    long_way = [{"switch": "s0", "to": "s1", "via": ["s2"]}, {"switch": "s1", "to": "s2", "via": ["s0"]},
                {"switch": "s2", "to": "s0", "via": ["s1"]}]
    fabric_file.from_document(ring(3))
    with pytest.raises(CosimInputError, match=r"^f.json: routes: the routes through s\d -> s\d -> s\d -> s\d wait "
                                              r"on each other in a cycle.*allow_cyclic_routes = true"):
        fabric_file.from_document(ring(3, routes=long_way), where="f.json")
    f = fabric_file.from_document(ring(3, routes=long_way, allow_cyclic_routes=True))
    assert len(f.params["routes"]) == 3 and fabric_file.to_document(f)["allow_cyclic_routes"] is True


#: a ring of four routed as the line s0 - s1 - s2 - s3 (up/down on the spanning tree without link s3 - s0):
#: every (switch, to) pair whose shortest paths use that link
LINE_ROUTES = [{"switch": "s0", "to": "s3", "via": ["s1"]}, {"switch": "s0", "to": "s2", "via": ["s1"]},
               {"switch": "s3", "to": "s0", "via": ["s2"]}, {"switch": "s3", "to": "s1", "via": ["s2"]},
               {"switch": "s1", "to": "s3", "via": ["s2"]}, {"switch": "s2", "to": "s0", "via": ["s1"]}]


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_up_down_routes_on_a_ring_run_without_consent(engine_ns, transport):
    """The ring of four deadlocks on its shortest paths (refused); routed as a line it has no cycle, is
    accepted without consent, and an all-to-all completes losslessly without touching the link s3 - s0."""
    from cosim import engine

    with pytest.raises(CosimInputError, match="shortest routes through"):
        fabric_file.from_document(ring(4))
    f = fabric_file.from_document(ring(4, routes=LINE_ROUTES))
    src, dst = np.divmod(np.flatnonzero(~np.eye(4, dtype=bool)), 4)
    flows = fl.FlowSet.from_arrays(f.host_ids[src], f.host_ids[dst], 50_000)
    out = engine.simulate(f, flows, attributes=transport_attributes(transport, dcqcn=False), seed=1)
    assert out.status == "complete" and (out.delivered_bytes == 50_000).all()
    assert int(out.ports["drops"].sum()) == 0
    assert _tx_bytes(f, out, "s3", "s0") == 0 and _tx_bytes(f, out, "s0", "s3") == 0


def test_routes_keep_exact_decomposition_whole():
    """Parts are found on shortest paths, so a DAG on a fabric with routes is simulated whole."""
    from cosim.collectives import DagOpKind
    from cosim.decompose.exact import decomposition

    f = fabric_file.from_document(two_leaves(routes=[PIN]))
    columns = {"kind": np.array([DagOpKind.FLOW]), "src_node": np.array([0]), "dst_node": np.array([2])}
    d = decomposition(f, columns, gpu_node=f.host_ids, attributes={})
    assert d.mode == "whole" and "routes" in d.reason


def test_a_pinned_link_down_falls_back_to_the_shortest_paths(engine_ns):
    """leaf0 -> leaf1 pinned via spine0, and leaf0-spine0 dies at t = 0: once the routes converge leaf0 has
    no pinned port up, so it takes its shortest paths (spine1) and every byte arrives (InfiniBand: nothing
    is lost on the dead link either)."""
    from cosim import engine
    from cosim import faults as fs

    f = fabric_file.from_document(two_leaves(routes=[PIN]))
    src = np.repeat([0, 1], FLOWS_PER_HOST)
    flows = fl.FlowSet.from_arrays(src, src + 2, FLOW_BYTES)
    stop_ns = 1e8
    fault = fs.Fault(kind="link_down", element="leaf0-spine0", at_ns=0.0)
    plan = fs.FaultPlan(resolved=fs.resolve([fault], f, max_sim_time_ns=stop_ns), fabric=f, seed=1,
                        stop_ps=int(stop_ns * 1e3))
    out = engine.simulate(f, flows, seed=1, attributes=transport_attributes("ib"), max_sim_time_ns=stop_ns,
                          setup=plan.setup)
    assert out.status == "complete" and (out.delivered_bytes == FLOW_BYTES).all()
    assert out.counters["reroutes"] >= 1 and out.counters["fault_drops"] == 0
    assert _tx_bytes(f, out, "spine1", "leaf1") >= 2 * FLOWS_PER_HOST * FLOW_BYTES
