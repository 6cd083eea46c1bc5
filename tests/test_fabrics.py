"""Fabrics built from switches of a radix (cosim.network.clos), partial fat trees, and fabric files
(cosim.network.fabric_file): structure against the port arithmetic, per-tier oversubscription measured from
the arrays, a short permutation through the real simulator on each, a file round trip, bad files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import CosimInputError
from cosim.network import clos, fabric_file, fabrics
from cosim.network import topology as topo
from cosim.network.names import node_names
from cosim.network.spec import NetworkSpec

DELAYS = {"host_link_delay_ns": 500.0, "fabric_link_delay_ns": 1000.0}
ARRAYS = ("node_kind", "node_tier", "link_a", "link_b", "link_rate_bps", "link_delay_ns", "link_tier", "host_server",
          "host_gpu")


def small_fabrics() -> dict[str, topo.Fabric]:
    """One small fabric of every new kind (each with several switches per tier)."""
    return {
        # 8 NICs per rail, 4 per 8-port leaf: 2 leaves per rail, 4 uplinks each over 2 spines
        "rail-two-tier": clos.rail_clos(servers=8, gpus_per_server=2, switch_radix=8, host_link_gbps=100.0,
                                        **DELAYS),
        "rail-three-tier": clos.rail_clos(servers=8, gpus_per_server=2, switch_radix=4, host_link_gbps=100.0,
                                          tiers=3, **DELAYS),
        "three-tier": clos.zoned_clos(hosts=16, gpus_per_server=2, switch_radix=4, host_link_gbps=100.0, **DELAYS),
        "leaf-spine-breakout": clos.zoned_clos(hosts=16, switch_radix=4, switch_port_gbps=200.0,
                                               host_link_gbps=100.0, tiers=2, **DELAYS),
        "fat-tree-partial": topo.fat_tree(k=4, link_gbps=100.0, link_delay_ns=500.0, hosts=10),
    }


def ports_used(fabric: topo.Fabric) -> np.ndarray:
    """Physical ports of every node: links to switches, plus host links over the breakout per port."""
    b = int(fabric.params.get("breakout", 1))
    host = fabric.node_kind == topo.HOST
    used = np.zeros(fabric.n_nodes)
    for end, other in ((fabric.link_a, fabric.link_b), (fabric.link_b, fabric.link_a)):
        np.add.at(used, end, np.where(host[other], 1.0 / b, 1.0))
    return np.ceil(used - 1e-9)


@pytest.mark.parametrize("name", list(small_fabrics()))
def test_permutation_reaches_every_host_and_conserves_bytes(name, engine_ns):
    """Every host sends to the host half the fabric away and receives from one: every byte arrives, no
    packet is dropped (lossless), and no flow beats its serialization at the host rate."""
    from cosim import engine
    from cosim.workload import flows

    fabric = small_fabrics()[name]
    size = 20_000
    fs = flows.permutation(fabric.host_ids, shift=fabric.n_hosts // 2, size_bytes=size)
    out = engine.simulate(fabric, fs, seed=1)
    assert out.status == "complete"
    assert (out.delivered_bytes == size).all()
    assert int(out.ports["drops"].sum()) == 0
    assert (out.finish_ns >= size * 8 / (fabric.link_rate_bps.min() / 1e9)).all()
    # the traffic used the top tier: every flow crossed the fabric, not one switch
    top = np.isin(out.ports["node"], fabric.tier_ids(int(fabric.node_tier.max())))
    assert out.ports["tx_bytes"][top].sum() > 0


@pytest.mark.parametrize("name", list(small_fabrics()))
def test_radix_is_respected_and_names_are_unique(name):
    """No switch uses more ports than its radix (breakout counted); node names are unique; the fabric is
    rebuilt from its stored description (port labels of plots)."""
    fabric = small_fabrics()[name]
    radix = fabric.params.get("switch_radix", fabric.params.get("k"))
    assert ports_used(fabric)[fabric.switch_ids].max() <= radix
    names = node_names(fabric)
    assert len(set(names)) == fabric.n_nodes and names[0] == "host0"
    again = fabrics.rebuild(json.loads(json.dumps(fabric.describe())))  # what results files keep
    assert again is not None and all(np.array_equal(getattr(fabric, a), getattr(again, a)) for a in ARRAYS)


@pytest.mark.parametrize("radix,port_gbps,o1,o2,gps", [
    (8, 100.0, 1.0, 1.0, 2),    # 4 + 4 ports at the leaf, 4 + 4 at the aggregation switch
    (8, 100.0, 3.0, 3.0, 2),    # 6 + 2, 6 + 2
    (16, 100.0, 1.0, 7.0, 4),   # 8 + 8 at the leaf, 14 + 2 above the zone
    (64, 200.0, 1.0, 7.0, 8),   # breakout: 32 ports of 2 NICs + 32 uplinks; 56 + 8 above the zone
])
def test_per_tier_oversubscription_equals_requested(radix, port_gbps, o1, o2, gps):
    """Full zones of a three-tier fabric: every leaf realizes o1 and every aggregation switch o2, measured
    from the link arrays, and no switch exceeds its radix."""
    nics, _ = clos._leaf_size(radix, port_gbps, 100.0, o1)
    zone_leaves, _ = clos.split_ports(radix, port_gbps, port_gbps, o2)
    hosts = 2 * zone_leaves * nics  # two full zones
    f = clos.zoned_clos(hosts=hosts, gpus_per_server=gps, switch_radix=radix, switch_port_gbps=port_gbps,
                        host_link_gbps=100.0, oversubscription=o1, zone_oversubscription=o2, **DELAYS)
    assert f.params["zones"] == 2
    assert np.allclose(f.oversubscription(1), o1, rtol=1e-12)
    assert np.allclose(f.oversubscription(2), o2, rtol=1e-12)
    assert ports_used(f)[f.switch_ids].max() <= radix
    tiers = {t["tier"]: t for t in f.describe()["tiers"]}
    assert tiers[2]["oversubscription"] == {"min": o2, "max": o2}


def test_rail_leaves_as_the_radix_needs():
    """A rail of more NICs than a leaf holds is several leaves; every NIC of rail g sits on a rail-g leaf;
    every leaf joins every spine and every uplink is its own link (parallel links, no merged fat link)."""
    f = small_fabrics()["rail-two-tier"]
    assert f.params["leaves_per_rail"] == 2 and f.params["spines"] == 2 and f.params["uplinks_per_spine"] == 2
    names = node_names(f)
    leaf_of_host = f.link_b[:f.n_hosts]
    assert all(names[leaf].startswith(f"rail{g}-") for leaf, g in zip(leaf_of_host, f.host_gpu))
    fabric_links = f.link_tier == topo.TIER_SPINE
    assert np.all(f.link_rate_bps[fabric_links] == 100e9)  # port rate, not a leaf's share
    pairs = np.stack([f.link_a[fabric_links], f.link_b[fabric_links]], 1)
    _, counts = np.unique(pairs, axis=0, return_counts=True)
    assert counts.size == 4 * 2 and np.all(counts == 2)
    assert np.allclose(f.oversubscription(1), 1.0)


def test_sixteen_thousand_gpus_three_tiers_build():
    """16,384 GPUs in zones of 64-port 800G switches (breakout to 400G NICs), 7:1 above the zones."""
    f = clos.rail_clos(servers=2048, gpus_per_server=8, switch_radix=64, switch_port_gbps=800.0,
                       host_link_gbps=400.0, zone_oversubscription=7.0, tiers=3, **DELAYS)
    assert f.n_hosts == 16384 and f.params["zones"] == 5
    assert ports_used(f)[f.switch_ids].max() <= 64
    assert np.nanmax(f.oversubscription(2)) == 7.0 and np.allclose(f.oversubscription(1), 1.0)
    full = fabrics.for_network(NetworkSpec(topology="fat-tree", link_gbps=400.0), servers=2048, gpus_per_server=8,
                               hosts_per_leaf=8)
    assert full.n_hosts == 16384 and full.params["k"] == 48  # partial: pods filled in order


def test_partial_fat_tree_fills_pods_in_order_and_full_one_is_unchanged():
    """A fat tree of any host count builds the edges and pods it needs; k³/4 hosts is Al-Fares' tree."""
    p = topo.fat_tree(k=4, link_gbps=100.0, link_delay_ns=500.0, hosts=10)
    assert p.tier_ids(1).size == 5 and p.tier_ids(2).size == 6 and p.tier_ids(3).size == 4
    one_pod = topo.fat_tree(k=4, link_gbps=100.0, link_delay_ns=500.0, hosts=3)
    assert one_pod.tier_ids(3).size == 0
    full, same = topo.fat_tree(k=4, link_gbps=100.0, link_delay_ns=500.0), topo.fat_tree(
        k=4, link_gbps=100.0, link_delay_ns=500.0, hosts=16)
    assert all(np.array_equal(getattr(full, a), getattr(same, a)) for a in ARRAYS)


def test_network_spec_dispatch_and_defaults():
    """for_network: a radix turns rail-optimized into several leaves per rail; three-tier without a radix
    takes the smallest switch class that holds the hosts; without a radix rail-optimized is unchanged."""
    legacy = fabrics.for_network(NetworkSpec(topology="rail-optimized"), servers=8, gpus_per_server=2,
                                 hosts_per_leaf=4)
    assert legacy.tier_ids(1).size == 2 and "switch_radix" not in legacy.params
    multi = fabrics.for_network(NetworkSpec(topology="rail-optimized", switch_radix=8), servers=8,
                                gpus_per_server=2, hosts_per_leaf=4)
    assert multi.tier_ids(1).size == 4
    three = fabrics.for_network(NetworkSpec(topology="three-tier", zone_oversubscription=7.0), servers=64,
                                gpus_per_server=8, hosts_per_leaf=4)
    assert three.params["switch_radix"] == 64 and three.tier_ids(3).size > 0
    assert clos.default_radix(70_000) == 128 and clos.default_radix(10**7) == 256
    with pytest.raises(CosimInputError, match="network.topology_file"):
        NetworkSpec(topology="file")
    for bad, field in (({"topology": "single-switch", "switch_radix": 8}, "network.switch_radix"),
                       ({"topology": "leaf-spine", "switch_port_gbps": 800.0}, "network.switch_port_gbps"),
                       ({"topology": "rail-optimized", "zone_oversubscription": 7.0}, "network.zone_oversubscription"),
                       ({"topology": "leaf-spine", "topology_file": "f.json"}, "network.topology_file"),
                       ({"topology": "three-tier", "spines": 4}, "network.spines"),
                       ({"topology": "leaf-spine", "switch_radix": 8, "hosts_per_leaf": 4}, "network.hosts_per_leaf")):
        with pytest.raises(CosimInputError) as err:
            NetworkSpec(**bad)
        assert err.value.field == field
    with pytest.raises(CosimInputError, match="network.switch_radix: 32 leaves"):
        fabrics.for_network(NetworkSpec(topology="rail-optimized", switch_radix=8), servers=32, gpus_per_server=4,
                            hosts_per_leaf=4)
    with pytest.raises(CosimInputError, match="network.switch_port_gbps"):
        fabrics.for_network(NetworkSpec(topology="three-tier", switch_radix=8, switch_port_gbps=50.0), servers=8,
                            gpus_per_server=1, hosts_per_leaf=4)


def test_node_names_are_fault_elements():
    """The names of a radix-built fabric are what faults name: a link between a rail leaf and a spine."""
    from cosim.faults.elements import elements_of

    f = small_fabrics()["rail-two-tier"]
    el = elements_of(f)
    i = el.link_of["rail1-leaf0-spine1"]
    assert {node_names(f)[f.link_a[i]], node_names(f)[f.link_b[i]]} == {"rail1-leaf0", "spine1"}
    assert "rail1-leaf0-spine1#1" in el.link_of  # the parallel uplink is its own element
    g = small_fabrics()["three-tier"]
    assert "zone1-agg0" in elements_of(g).node_of and "plane0-core0" in elements_of(g).node_of


# --- fabric files ------------------------------------------------------------------------------------------

def test_file_round_trip_gives_identical_arrays_and_results(tmp_path, engine_ns):
    """Export a built fabric, read it back: identical arrays and names, and a tiny run gives identical
    results on both."""
    from cosim import engine
    from cosim.workload import flows

    f = small_fabrics()["rail-three-tier"]
    path = tmp_path / "fabric.json"
    fabric_file.write(f, str(path))
    g = fabric_file.read(str(path))
    for name in ARRAYS:
        assert np.array_equal(getattr(f, name), getattr(g, name)), name
        assert getattr(f, name).dtype == getattr(g, name).dtype, name
    assert g.node_names == f.node_names
    fs = flows.permutation(f.host_ids, shift=5, size_bytes=30_000)
    a, b = engine.simulate(f, fs, seed=3), engine.simulate(g, fs, seed=3)
    assert np.array_equal(a.finish_ns, b.finish_ns) and np.array_equal(a.ports["tx_bytes"], b.ports["tx_bytes"])
    toml = tmp_path / "fabric.toml"
    doc = fabric_file.to_document(f)
    toml.write_text(_as_toml(doc))
    h = fabric_file.read(str(toml))
    assert all(np.array_equal(getattr(f, n), getattr(h, n)) for n in ARRAYS)


def _as_toml(doc: dict) -> str:
    out = [f'format = "{doc["format"]}"', f'name = "{doc["name"]}"']
    for key in ("nodes", "links"):
        for row in doc[key]:
            out.append(f"[[{key}]]")
            out += [f"{k} = {json.dumps(v)}" for k, v in row.items()]
    return "\n".join(out) + "\n"


def test_hand_written_file_defaults_tiers_and_servers():
    """Tiers default to the hop distance from the hosts, servers to one per NIC; switches are ordered by
    tier whatever the file order."""
    doc = {"name": "tiny", "nodes": [{"name": "s", "kind": "switch"}, {"name": "a", "kind": "host"},
                                     {"name": "l0", "kind": "switch"}, {"name": "b", "kind": "host"},
                                     {"name": "l1", "kind": "switch"}],
           "links": [{"a": "a", "b": "l0", "rate_gbps": 100, "delay_ns": 10},
                     {"a": "b", "b": "l1", "rate_gbps": 100, "delay_ns": 10},
                     {"a": "l0", "b": "s", "rate_gbps": 400, "delay_ns": 10},
                     {"a": "l1", "b": "s", "rate_gbps": 400, "delay_ns": 10}]}
    f = fabric_file.from_document(doc)
    assert f.node_names == ("a", "b", "l0", "l1", "s")
    assert f.node_tier.tolist() == [0, 0, 1, 1, 2] and f.host_server.tolist() == [0, 1]
    assert f.oversubscription(1).tolist() == [0.25, 0.25]


def _tiny() -> dict:
    return {"format": "cosim-fabric/1", "name": "tiny",
            "nodes": [{"name": "h0", "kind": "host"}, {"name": "h1", "kind": "host"},
                      {"name": "leaf0", "kind": "switch", "radix": 4}, {"name": "leaf1", "kind": "switch"}],
            "links": [{"a": "h0", "b": "leaf0", "rate_gbps": 100, "delay_ns": 10},
                      {"a": "h1", "b": "leaf1", "rate_gbps": 100, "delay_ns": 10},
                      {"a": "leaf0", "b": "leaf1", "rate_gbps": 100, "delay_ns": 10}]}


def _bad(change):
    doc = _tiny()
    change(doc)
    return doc


@pytest.mark.parametrize("change,needle", [
    (lambda d: d["links"].append({"a": "leaf0", "b": "spine9", "rate_gbps": 1, "delay_ns": 1}),
     "links[3].b: unknown node 'spine9' (a dangling link)"),
    (lambda d: d["links"].append({"a": "h0", "b": "leaf1", "rate_gbps": 1, "delay_ns": 1}),
     "host 'h0' has 2 links, a NIC has exactly 1"),
    (lambda d: d["links"].pop(), "host 'h1' cannot reach host 'h0'"),
    (lambda d: d["nodes"].append({"name": "h0", "kind": "host"}), "nodes[4].name: 'h0' is also nodes[0]"),
    (lambda d: d["nodes"][2].update(kind="router"), "nodes[2].kind: must be 'host' or 'switch'"),
    (lambda d: d["nodes"][2].update(radix=1), "switch 'leaf0' uses 2 ports, its radix is 1"),
    (lambda d: d["links"][0].update(rate_gbps=-1), "links[0].rate_gbps: must be positive"),
    (lambda d: d["links"][0].pop("delay_ns"), "links[0].delay_ns: missing"),
    (lambda d: d["links"][0].update(speed=1), "links[0].speed: not a link key"),
    (lambda d: d["nodes"][0].update(tier=2), "nodes[0].tier: is for switches"),
    (lambda d: d["nodes"].append({"name": "spare", "kind": "switch"}), "switch 'spare' is not connected"),
    (lambda d: d["nodes"][1].update(server=0, gpu=0) or d["nodes"][0].update(server=0, gpu=0),
     "host 'h1' has the server and gpu of another host"),
    (lambda d: d.update(format="other/2"), "format: unknown format 'other/2'"),
])
def test_bad_files_give_one_line_errors(change, needle):
    """Each broken file is refused with one line naming the entry."""
    with pytest.raises(CosimInputError) as err:
        fabric_file.from_document(_bad(change), where="f.json")
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("f.json")


def _ring(n: int, **extra) -> dict:
    """n switches in a ring, a host on each."""
    nodes = [{"name": f"h{i}", "kind": "host"} for i in range(n)] + [{"name": f"s{i}", "kind": "switch"}
                                                                     for i in range(n)]
    links = ([{"a": f"h{i}", "b": f"s{i}", "rate_gbps": 100, "delay_ns": 10} for i in range(n)]
             + [{"a": f"s{i}", "b": f"s{(i + 1) % n}", "rate_gbps": 100, "delay_ns": 10} for i in range(n)])
    return {"name": f"ring{n}", "nodes": nodes, "links": links, **extra}


def test_routes_that_can_deadlock_need_consent(engine_ns):
    """A ring of four switches routes s0 -> s1 -> s2 and so on around: its buffer dependencies make a cycle,
    refused unless the file allows it; a ring of three (one hop between any two switches) and every built
    Clos have none."""
    from cosim import engine
    from cosim.network.cycles import dependency_cycle
    from cosim.workload import flows

    with pytest.raises(CosimInputError, match=r"f.json: links: the shortest routes through s1 -> s2 -> s3 -> s0 -> s1 "
                                              r"wait on each other in a cycle.*allow_cyclic_routes = true"):
        fabric_file.from_document(_ring(4), where="f.json")
    ring = fabric_file.from_document(_ring(4, allow_cyclic_routes=True))
    assert fabric_file.to_document(ring)["allow_cyclic_routes"] is True
    assert dependency_cycle(fabric_file.from_document(_ring(3))) is None
    assert all(dependency_cycle(f) is None for f in small_fabrics().values())
    out = engine.simulate(ring, flows.permutation(ring.host_ids, shift=2, size_bytes=10_000), seed=1)
    assert out.status == "complete" and (out.delivered_bytes == 10_000).all()


def test_cli_runs_a_fabric_file_and_refuses_a_bad_one(tmp_path, capsys, engine_ns):
    """cosim run --topology file --topology-file F: a permutation on the file's fabric; a broken file exits 2
    with one Error line and writes nothing; --export-fabric writes a file that reads back."""
    from conftest import run_main

    good, bad, out = tmp_path / "f.json", tmp_path / "bad.json", tmp_path / "r.h5"
    good.write_text(json.dumps(_tiny()))
    bad.write_text(json.dumps(_bad(lambda d: d["links"].pop())))
    common = ["run", "--pattern", "permutation", "--hosts", "2", "--flow-bytes", "8KiB", "--topology", "file", "-q"]
    code, _, err = run_main([*common, "--topology-file", str(good), "-o", str(out)], capsys)
    assert code == 0 and out.exists(), err
    code, _, err = run_main([*common, "--topology-file", str(bad), "-o", str(tmp_path / "no.h5")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot reach" in err
    assert not (tmp_path / "no.h5").exists()
    exported = tmp_path / "rail.json"
    code, _, err = run_main(["run", "--pattern", "permutation", "--hosts", "16", "--gpus-per-server", "2",
                             "--topology", "rail-optimized", "--switch-radix", "8", "--export-fabric", str(exported),
                             "--dry-run"], capsys)
    assert code == 0, err
    f = fabric_file.read(str(exported))
    assert f.n_hosts == 16 and f.tier_ids(1).size == 4


def test_networkx_graph_round_trip():
    """A networkx MultiGraph of a built fabric reads back to identical arrays (networkx is optional)."""
    pytest.importorskip("networkx")
    f = small_fabrics()["leaf-spine-breakout"]
    g = fabric_file.from_networkx(fabric_file.to_networkx(f), name=f.name)
    assert all(np.array_equal(getattr(f, n), getattr(g, n)) for n in ARRAYS)
    assert math.isfinite(g.link_rate_bps.sum())


def test_results_keep_the_fabric_and_its_names(tmp_path, engine_ns):
    """A run on a radix-built fabric stores a description that rebuilds it: port labels and Perfetto tracks
    use the same names as faults (rail0-leaf1), and the run's fault on that element resolves."""
    from cosim.analysis import perfetto
    from cosim.results import read_results, write_results
    from cosim.run import run
    from cosim.spec import make

    exp = make("flows", pattern="permutation", hosts=16, flow_bytes="16KiB", transport="roce",
               **{"network.topology": "rail-optimized", "network.switch_radix": 8, "network.gpus_per_server": 2,
                  "faults": [{"kind": "link_down", "element": "rail0-leaf1-spine0", "at_ns": 1000.0}]})
    record = run(exp)
    assert record.summary["flows_completed"] == 16
    write_results(str(tmp_path / "r.h5"), [record])
    (stored,) = read_results(str(tmp_path / "r.h5")).values()
    names = perfetto.context(stored).node_names
    assert "rail0-leaf1" in names and "spine1" in names


@settings(max_examples=60, deadline=None)
@given(radix=st.integers(4, 48), servers=st.integers(1, 300), gps=st.sampled_from([1, 2, 4, 8]),
       breakout=st.sampled_from([1, 2]), o1=st.sampled_from([1.0, 1.5, 2.0, 3.0]),
       o2=st.sampled_from([1.0, 2.0, 7.0]), rail=st.booleans(), tiers=st.sampled_from([2, 3]))
def test_any_radix_build_is_connected_within_radix_and_never_over_requested(radix, servers, gps, breakout, o1, o2,
                                                                           rail, tiers):
    """Whatever the sizes: every host has one link, the fabric is connected, no switch exceeds its radix,
    and no leaf or aggregation switch is more oversubscribed than requested (refusals are one-line input
    errors naming a field)."""
    kw = {"gpus_per_server": gps, "switch_radix": radix, "switch_port_gbps": 100.0 * breakout,
          "host_link_gbps": 100.0, "oversubscription": o1, "zone_oversubscription": o2, "tiers": tiers, **DELAYS}
    try:
        f = (clos.rail_clos(servers=servers, **kw) if rail
             else clos.zoned_clos(hosts=max(2, servers) * gps, **kw))
    except CosimInputError as exc:
        assert exc.field in ("switch_radix", "servers", "switch_port_gbps") and "\n" not in str(exc)
        return
    assert (fabric_file._hops_from(np.array([0]), f.link_a, f.link_b, f.n_nodes) >= 0).all()  # connected
    assert np.all(f.degree()[:f.n_hosts] == 1)
    assert ports_used(f)[f.switch_ids].max() <= radix
    assert np.nanmax(f.oversubscription(1)) <= o1 * (1 + 1e-12)
    if tiers == 3:
        assert np.nanmax(f.oversubscription(2)) <= o2 * (1 + 1e-12)
    key = f.host_server.astype(np.int64) * gps + f.host_gpu
    assert np.array_equal(key, np.arange(f.n_hosts))  # server-major host ids, as placement reads them


#: attribute sets that pass, and that fail the start-of-run checks in each way a node's ports can fail them
PROBE_ATTRIBUTES = [
    {},
    {"FabricSwitch::HeadroomBytes": "5000"},
    {"SharedBufferMmu::BufferBytes": "300000"},
    {"FabricSwitch::HeadroomBytes": "5000", "FabricSwitch::AllowLossyHeadroom": "true"},
    {"EgressPort::LinkFlowControl": "credit"},
    {"EgressPort::LinkFlowControl": "credit", "FabricNode::InputBufferBytes": "8192"},
    {"EgressPort::LinkFlowControl": "credit", "FabricNode::VlReservedBytes": "4096"},
    {"EgressPort::LinkFlowControl": "credit", "FabricNode::InputBufferBytes": "33280",
     "FabricNode::VlReservedBytes": "4160", "EgressPort::DataVls": "8"},
    {"HostNic::MtuBytes": "9000", "FabricSwitch::HeadroomBytes": "20000"},
]


@pytest.mark.parametrize("attributes", PROBE_ATTRIBUTES)
@pytest.mark.parametrize("name", ["rail-two-tier", "three-tier", "leaf-spine-breakout", "fat-tree-partial",
                                  "mixed-delays"])
def test_a_fabric_checked_through_its_probe_fails_as_the_whole_one(name, attributes, engine_ns):
    """engine.check_fabric through the probe (one switch of each kind, what a 100,000-host fabric is checked
    with) passes or fails exactly as building the whole fabric does: the same field and message, naming
    the same switch."""
    from cosim import engine
    from cosim.network.probe import probe_fabric

    fabrics = small_fabrics()
    ls = topo.leaf_spine(hosts=16, hosts_per_leaf=4, spines=2, host_link_gbps=100.0, host_link_delay_ns=100.0,
                         fabric_link_delay_ns=20_000.0, fabric_link_gbps=400.0)
    fabric = fabrics[name] if name in fabrics else ls
    outcomes = []
    for probe_min_nodes in (fabric.n_nodes, 0):  # whole, then through the probe
        try:
            engine.check_fabric(fabric, attributes, probe_min_nodes=probe_min_nodes)
            outcomes.append(None)
        except CosimInputError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    probe = probe_fabric(fabric)
    switches = int((fabric.node_kind == topo.SWITCH).sum())
    assert int((probe.fabric.node_kind == topo.SWITCH).sum()) < switches or switches <= 2
