"""Multi-plane fabrics (cosim.network.planes): each NIC's ports on independent copies of the fabric. Real runs
through ns-3: every host reaches every host on each plane alone, bytes are conserved and split evenly over
the planes to a packet, a dead link in one plane leaves the other plane's traffic as it was; one plane is
the single-plane fabric itself; bad settings fail in one line."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from cosim import engine
from cosim import faults as fs
from cosim.errors import CosimInputError
from cosim.faults.elements import elements_of
from cosim.network import clos, fabrics, planes
from cosim.network import topology as topo
from cosim.network.ideal import ideal_fct_ns
from cosim.network.spec import PLANE_TOPOLOGIES, NetworkSpec
from cosim.network.transport import transport_attributes
from cosim.workload.flows import FlowSet

NIC_GBPS, P = 400.0, 2
#: payload per packet (HostNic::MtuBytes) and per-packet header of each transport (HostNic::HeaderBytes), bytes
MTU, HEADER = 4096, {"roce": 82, "ib": 26, "uec": 122}


def one_plane() -> topo.Fabric:
    """A plane of :func:`dual_plane`: 16 NIC ports of 200G (8 servers of 2) on a rail-optimized fabric of
    8-port switches, two leaves of 4 NICs per rail, two spines."""
    return clos.rail_clos(servers=8, gpus_per_server=2, switch_radix=8, host_link_gbps=NIC_GBPS / P,
                          host_link_delay_ns=500.0, fabric_link_delay_ns=1000.0)


def dual_plane() -> topo.Fabric:
    """16 NICs of 400G, each with two 200G ports, one in each of two copies of :func:`one_plane`."""
    return planes.multi_plane(one_plane(), P, nic_link_gbps=NIC_GBPS)


def plane_tx(fabric: topo.Fabric, out) -> np.ndarray:
    """Bytes every port selector sent into each plane, int64 [n_hosts, planes]."""
    node_plane = planes.plane_of_node(fabric)
    node, peer, tx = out.ports["node"], out.ports["peer"], out.ports["tx_bytes"]
    at = np.isin(node, planes.selector_ids(fabric)) & (node_plane[peer] >= 0)
    sent = np.zeros((fabric.n_hosts, P), np.int64)
    np.add.at(sent, (node[at] - fabric.n_hosts, node_plane[peer[at]]), tx[at])
    return sent


def test_planes_are_disjoint_full_copies():
    """Every plane is the single-plane fabric (same switches, links, rates), no link joins two planes, a NIC
    has one link (to its selector, at the NIC rate) and the selector one port per plane; names carry the
    plane; the stored description rebuilds the same fabric."""
    f, base = dual_plane(), one_plane()
    n = f.n_hosts
    assert f.n_switches == n + P * base.n_switches and f.n_links == n + P * base.n_links
    node_plane = planes.plane_of_node(f)
    a, b = node_plane[f.link_a], node_plane[f.link_b]
    assert ((a == b) | (a < 0) | (b < 0)).all()  # no link between planes
    link_plane = planes.plane_of_link(f)
    for p in range(P):
        assert np.array_equal(np.sort(f.link_rate_bps[link_plane == p]), np.sort(base.link_rate_bps))
    assert np.array_equal(f.degree()[planes.selector_ids(f)], np.full(n, 1 + P))
    assert (f.link_rate_bps[:n] == NIC_GBPS * 1e9).all() and (f.link_delay_ns[:n] == 0).all()
    names = f.node_names
    assert "nicplane1-rail1-leaf1" in names and "nicplane0-spine1" in names and names[n] == "nic0"
    assert "nic5-nicplane1-rail1-leaf0" in elements_of(f).link_of
    again = fabrics.rebuild(json.loads(json.dumps(f.describe())))
    assert again is not None and again.node_names == names and np.array_equal(again.link_b, f.link_b)
    assert planes.multi_plane(base, 1, nic_link_gbps=NIC_GBPS) is base


@pytest.mark.parametrize("transport", ["roce", "ib", "uec"])
def test_permutation_splits_every_nic_evenly_over_the_planes(transport, engine_ns):
    """Each NIC sends 1 MiB across the fabric: every byte arrives, nothing is dropped, and every NIC put
    the same bytes into each plane to within one data packet (plus its flow's ACKs, which follow one path)."""
    f = dual_plane()
    size = 1 << 20
    fs_ = FlowSet.from_arrays(f.host_ids, np.roll(f.host_ids, -f.n_hosts // 2), size)
    out = engine.simulate(f, fs_, seed=1, attributes=transport_attributes(transport))
    assert out.status == "complete" and (out.delivered_bytes == size).all()
    assert int(out.ports["drops"].sum()) == 0
    sent = plane_tx(f, out)
    control = 4 * 64 * (size // (16 << 10) + 2)  # generous: a control packet per 16 KiB (UEC's SACKs)
    assert (np.abs(sent[:, 0] - sent[:, 1]) <= MTU + HEADER[transport] + control).all(), sent
    assert (out.finish_ns >= size * 8 / NIC_GBPS).all()
    # alone, a flow runs at the NIC's rate (both ports together), not at one port's; the ideal FCT counts
    # the NIC's rate too and stays below it by at most a packet's store-and-forward per plane hop (4 here)
    alone = engine.simulate(f, FlowSet.from_arrays([0], [9], size), seed=1, attributes=transport_attributes(transport))
    wire_ns = size * (MTU + HEADER[transport]) / MTU * 8 / NIC_GBPS
    assert wire_ns < alone.finish_ns[0] < wire_ns + 10_000
    ideal = ideal_fct_ns(f, [0], [9], [size], mtu_bytes=MTU, header_bytes=HEADER[transport])[0]
    assert ideal <= alone.finish_ns[0] <= ideal + 4 * (MTU + HEADER[transport]) * 8 / (NIC_GBPS / P)


def test_every_host_reaches_every_host_on_each_plane_alone(engine_ns):
    """With every NIC port of one plane down, an all-to-all still completes over the other plane alone,
    and the dead plane carries nothing: each plane connects every host to every host."""
    f = dual_plane()
    n = f.n_hosts
    src, dst = np.divmod(np.flatnonzero(~np.eye(n, dtype=bool)), n)
    flows = FlowSet.from_arrays(src, dst, 32 << 10, start_ns=5_000.0)
    link_of = elements_of(f).link_of
    for dead in range(P):
        ports = {link_of[x]: x for x in link_of if re.match(rf"nic\d+-nicplane{dead}-", x)}.values()
        assert len(ports) == n
        plan = fs.FaultPlan(resolved=fs.resolve([fs.Fault(kind="link_down", element=x, at_ns=0.0) for x in ports],
                                                f, max_sim_time_ns=1e8), fabric=f, seed=1, stop_ps=10**11)
        attrs = transport_attributes("uec") | {"LinkFaultModel::RouteConvergenceDelay": "1us"}
        out = engine.simulate(f, flows, seed=1, attributes=attrs, max_sim_time_ns=1e8, setup=plan.setup)
        assert out.status == "complete" and (out.delivered_bytes == 32 << 10).all()
        sent = plane_tx(f, out)
        assert (sent[:, dead] == 0).all() and (sent[:, 1 - dead] > 0).all()


def test_link_down_in_one_plane_leaves_the_other_plane_untouched(engine_ns):
    """A leaf uplink of plane 0 dies before the traffic starts: plane 0 routes around it, and every port of
    plane 1 carries the data packets it carries without the fault (plane 0's ports do not). ACKs follow
    their flow's hash over either plane, and plane 0's new paths change the order receivers see, so a port
    of plane 1 may carry an ACK more or less."""
    f = dual_plane()
    flows = FlowSet.from_arrays(f.host_ids, np.roll(f.host_ids, -5), 256 << 10, start_ns=5_000.0)
    # without DCQCN: its CNPs answer marks in plane 0 and may cross plane 1 (they follow their flow's hash)
    attrs = transport_attributes("roce", dcqcn=False) | {"LinkFaultModel::RouteConvergenceDelay": "1us"}
    uplink = "nicplane0-rail0-leaf0-nicplane0-spine0"
    plan = fs.FaultPlan(resolved=fs.resolve([fs.Fault(kind="link_down", element=uplink, at_ns=0.0)], f,
                                            max_sim_time_ns=1e8), fabric=f, seed=1, stop_ps=10**11)
    healthy = engine.simulate(f, flows, seed=1, attributes=attrs, max_sim_time_ns=1e8)
    broken = engine.simulate(f, flows, seed=1, attributes=attrs, max_sim_time_ns=1e8, setup=plan.setup)
    for out in (healthy, broken):
        assert out.status == "complete" and (out.delivered_bytes == 256 << 10).all()
        assert int(out.ports["drops"].sum()) == 0
    node_plane = planes.plane_of_node(f)
    plane1 = node_plane[healthy.ports["node"]] == 1
    before, after = healthy.ports["tx_bytes"][plane1], broken.ports["tx_bytes"][plane1]
    wire = MTU + HEADER["roce"]
    assert np.array_equal(before // wire, after // wire)  # the same data packets on every port of plane 1
    assert np.abs(before - after).max() <= 4 * 86  # and a few ACKs (86 B): plane 0 reorders what it delivers
    plane0 = node_plane[healthy.ports["node"]] == 0
    assert not np.array_equal(healthy.ports["tx_bytes"][plane0], broken.ports["tx_bytes"][plane0])


def test_network_spec_builds_planes_and_one_plane_is_todays_fabric():
    """nic_planes = 1 is the fabric as it was, array for array; 2 builds each plane at the port speed with
    the radix checked per plane (a 200G port holds a 200G NIC port, no breakout)."""
    net = NetworkSpec(topology="rail-optimized", link_gbps=400.0, switch_radix=8)
    one = fabrics.for_network(net, servers=8, gpus_per_server=4, hosts_per_leaf=4)
    same = fabrics.for_network(dataclasses.replace(net, nic_planes=1), servers=8, gpus_per_server=4,
                               hosts_per_leaf=4)
    for name in ("node_kind", "node_tier", "link_a", "link_b", "link_rate_bps", "link_delay_ns", "link_tier"):
        assert np.array_equal(getattr(one, name), getattr(same, name))
    two = fabrics.for_network(dataclasses.replace(net, nic_planes=2), servers=8, gpus_per_server=4,
                              hosts_per_leaf=4)
    assert two.params["nic_planes"] == 2 and two.params["nic_port_gbps"] == 200.0
    assert two.n_switches == two.n_hosts + 2 * one.n_switches
    assert set(np.unique(two.link_rate_bps[two.link_tier >= 2])) == {200e9}


@pytest.mark.parametrize("topology", PLANE_TOPOLOGIES)
def test_every_topology_builds_in_planes_and_delivers(topology, engine_ns):
    """Each topology that takes planes builds two copies of its single-plane fabric at the port speed, and a
    permutation over them delivers every byte."""
    net = NetworkSpec(topology=topology, link_gbps=200.0, hosts_per_leaf=None if topology != "leaf-spine" else 4)
    one = fabrics.for_network(net, servers=4, gpus_per_server=2, hosts_per_leaf=4)
    two = fabrics.for_network(dataclasses.replace(net, nic_planes=2), servers=4, gpus_per_server=2, hosts_per_leaf=4)
    assert two.n_hosts == one.n_hosts and two.n_switches == one.n_hosts + 2 * one.n_switches
    assert set(two.link_rate_bps[planes.plane_of_link(two) >= 0]) <= set(one.link_rate_bps / 2)  # port speed
    out = engine.simulate(two, FlowSet.from_arrays(two.host_ids, np.roll(two.host_ids, -3), 64 << 10), seed=1)
    assert out.status == "complete" and (out.delivered_bytes == 64 << 10).all()


@pytest.mark.parametrize("fields, needle", [
    ({"topology": "dragonfly", "nic_planes": 2}, "network.nic_planes: topology 'dragonfly' cannot"),
    ({"topology": "file", "topology_file": "x.json", "nic_planes": 2}, "network.nic_planes: topology 'file'"),
    ({"topology": "leaf-spine", "link_gbps": 100.0, "nic_planes": 3}, "not a whole number of bit/s"),
    ({"topology": "leaf-spine", "nic_planes": 17}, "network.nic_planes"),
])
def test_bad_plane_settings_fail_in_one_line(fields, needle):
    with pytest.raises(CosimInputError) as err:
        NetworkSpec(**fields)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_dry_run_prints_planes_and_switches_per_plane(capsys, engine_ns):
    """The dry run says how many planes, the port speed, and each tier's switches and links per plane."""
    from conftest import run_main

    code, out, err = run_main(["run", "--pattern", "permutation", "--hosts", "64", "--gpus-per-server", "8",
                               "--link-gbps", "800", "--topology", "rail-optimized", "--switch-radix", "16",
                               "--nic-planes", "2", "--dry-run"], capsys)
    assert code == 0, err
    assert "nic_planes: 2 (400 Gbps ports of 800 Gbps NICs" in out
    # a plane: 8 rails of 8 NICs, each one leaf of 8 NICs and 8 uplinks, 4 spines of 16 ports
    assert "tier 2: 16 switches, 128 links at 400 Gbps (8 switches, 64 links per plane)" in out, out
    assert "tier 3: 8 switches, 128 links at 400 Gbps (4 switches, 64 links per plane)" in out, out
