"""The deadlock watchdog: a ring of switches whose flows each cross two ring links deadlocks under PFC
(RoCE without DCQCN) and under credits (InfiniBand); the watchdog ends the run with status deadlock and
names the cycle of waiting switch queues. Congestion without a cyclic dependency never triggers it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosim import engine
from cosim.network import topology
from cosim.network.topology import HOST, SWITCH, Fabric
from cosim.network.transport import transport_attributes
from cosim.telemetry import network_summary, network_tables
from cosim.workload import flows as fl

RING = 4
TIME_LIMIT_NS = 50e6
#: per transport: what makes the ring fill up (PFC needs a buffer the four flows through a switch overrun)
RING_ATTRIBUTES = {"roce": {"SharedBufferMmu::BufferBytes": "2000000"}, "ib": {}}


def ring_fabric(n: int = RING) -> Fabric:
    """Hosts 0..n-1, switches n..2n-1 in a ring (switch n+i joined to n+(i+1) mod n), host i on switch n+i."""
    ring_a = [n + i for i in range(n)]
    ring_b = [n + (i + 1) % n for i in range(n)]
    return Fabric(name="ring", node_kind=np.array([HOST] * n + [SWITCH] * n, np.uint8),
                  link_a=np.array(ring_a + ring_a), link_b=np.array(ring_b + list(range(n))),
                  link_rate_bps=np.full(2 * n, 100e9), link_delay_ns=np.full(2 * n, 1000.0))


def ring_run(transport: str, **extra: str):
    """Two 16 MB flows from every host to the host two switches away: each crosses two ring links (long
    enough for the ring's lanes to fill with traffic that waits on the next ring link, even with the whole
    shared input buffer of a port behind each lane)."""
    fabric = ring_fabric()
    hosts = np.arange(RING)
    flows = fl.FlowSet.from_arrays(np.repeat(hosts, 2), np.repeat((hosts + 2) % RING, 2), 16_000_000)
    attributes = transport_attributes(transport, dcqcn=False) | RING_ATTRIBUTES[transport] | extra
    return fabric, flows, engine.simulate(fabric, flows, attributes=attributes, max_sim_time_ns=TIME_LIMIT_NS)


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_ring_deadlock_ends_the_run_with_its_cycle(engine_ns, transport):
    """Status deadlock within a few watchdog intervals (1 ms), long before the time limit, and the cycle
    runs around the whole ring: each element is a switch port whose link leads to the next element's
    switch, the last to the first's."""
    fabric, flows, out = ring_run(transport)
    assert out.status == "deadlock" and out.sim_time_ns < 5e6 < TIME_LIMIT_NS
    cycle = [tuple(int(x) for x in e.split(":")) for e in out.deadlock_cycle]
    assert len(cycle) == RING and len({node for node, _, _ in cycle}) == RING
    peer_of = {(int(n), int(p)): int(q) for n, p, q in zip(out.ports["node"], out.ports["port"], out.ports["peer"])}
    for (node, port, queue), (next_node, _, _) in zip(cycle, cycle[1:] + cycle[:1]):
        assert fabric.node_kind[node] == SWITCH and peer_of[(node, port)] == next_node and queue == 0
    assert (out.delivered_bytes < flows.size_bytes).all()


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_without_the_watchdog_the_deadlock_runs_to_the_time_limit(engine_ns, transport):
    """The cycle is a real deadlock: with the watchdog off nothing more is delivered until the time limit."""
    _, _, found = ring_run(transport)
    _, _, blind = ring_run(transport, **{"DeadlockWatchdog::Enabled": "false"})
    assert blind.status == "time-limit" and blind.sim_time_ns == TIME_LIMIT_NS and not blind.deadlock_cycle
    np.testing.assert_array_equal(blind.delivered_bytes, found.delivered_bytes)


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_congested_incast_without_a_cycle_never_triggers(engine_ns, transport):
    """A leaf-spine 7-to-1 incast without congestion control pauses (or credit-starves) switch ports for
    long stretches, and a short watchdog interval checks it often: no cycle, so it completes."""
    fabric = topology.leaf_spine(hosts=8, hosts_per_leaf=4, spines=2, host_link_gbps=100.0,
                                 host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=1_000_000)
    small_buffer = {"SharedBufferMmu::BufferBytes": "4000000"} if transport == "roce" else {}
    attributes = transport_attributes(transport, dcqcn=False) | small_buffer | {"DeadlockWatchdog::Interval": "2us"}
    out = engine.simulate(fabric, flows, attributes=attributes, max_sim_time_ns=TIME_LIMIT_NS)
    assert out.status == "complete" and not out.deadlock_cycle
    blocked = out.logs["pauses"]["paused"].sum() if transport == "roce" else out.logs["stalls"]["stalled"].sum()
    assert blocked > 0


def test_deadlock_summary_lists_the_cycle(engine_ns):
    """The run summary carries the cycle as space-separated "node:port:queue" elements when there is one."""
    fabric, flows, out = ring_run("ib")
    tables = network_tables(fabric, out, src=flows.src, dst=flows.dst, size_bytes=flows.size_bytes,
                            start_ns=flows.start_ns)
    summary = network_summary(fabric, out, tables, queue_sample_interval_ns=1000.0)
    assert summary["status"] == "deadlock" and summary["deadlock_cycle"].split() == list(out.deadlock_cycle)


# ---------------------------------------------------------------- settings a user reaches from an experiment

#: RoCE needs PFC without DCQCN and a buffer the flows overrun to lock; InfiniBand's lanes fill by themselves
USER_ATTRIBUTES = {"roce": {"SharedBufferMmu::BufferBytes": 2000000}, "ib": {}}


def ring_file(path, n: int = 5, extra_host_per_switch: bool = False) -> str:
    """A fabric file of n switches in a ring (allow_cyclic_routes): host h<i> on switch s<2i mod n>, so that
    host i to host i+1 (a permutation) crosses two ring links, all clockwise; with ``extra_host_per_switch``
    also host g<j> on switch s<j> (ids n..2n-1: g<j> to g<j+1> is one clockwise ring link)."""
    nodes = [{"name": f"h{i}", "kind": "host"} for i in range(n)]
    links = [{"a": f"h{i}", "b": f"s{2 * i % n}", "rate_gbps": 100, "delay_ns": 1000} for i in range(n)]
    if extra_host_per_switch:
        nodes += [{"name": f"g{j}", "kind": "host"} for j in range(n)]
        links += [{"a": f"g{j}", "b": f"s{j}", "rate_gbps": 100, "delay_ns": 1000} for j in range(n)]
    nodes += [{"name": f"s{j}", "kind": "switch"} for j in range(n)]
    links += [{"a": f"s{j}", "b": f"s{(j + 1) % n}", "rate_gbps": 100, "delay_ns": 1000} for j in range(n)]
    path.write_text(json.dumps({"format": "cosim-fabric/1", "name": "ring", "allow_cyclic_routes": True,
                                "nodes": nodes, "links": links}))
    return str(path)


def user_run(doc: dict):
    """Compile and run an experiment document as `cosim run FILE.toml` does; the record."""
    from cosim import run
    from cosim.spec.documents import from_document

    (exp,) = from_document(doc)
    return run.run(exp)


def cycle_of(record) -> list[tuple[int, int, int]]:
    """The summary's deadlock cycle as (node, port, queue) tuples."""
    return [tuple(int(x) for x in e.split(":")) for e in record.summary["deadlock_cycle"].split()]


def switch_names(record) -> dict[int, str]:
    """Node id -> name (the names faults and fabric files use)."""
    return dict(enumerate(str(n) for n in record.nodes["name"]))


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_fabric_file_ring_permutation_ends_deadlock(engine_ns, tmp_path, transport):
    """A ring fabric file (allow_cyclic_routes = true) under a permutation whose flows each cross two ring
    links clockwise: status deadlock within a few watchdog intervals, the cycle being the five clockwise
    ring ports, each leading to the next element's switch."""
    rec = user_run({"name": "ring", "network": {"topology": "file", "topology_file": ring_file(tmp_path / "r.json"),
                                                "hosts": 5, "transport": transport, "dcqcn": False,
                                                "attributes": USER_ATTRIBUTES[transport]},
                    "workload": {"kind": "flows", "pattern": "permutation", "flow_bytes": "16MiB"},
                    "limits": {"max_sim_time_ns": 50e6}})
    assert rec.summary["status"] == "deadlock" and rec.summary["sim_time_ns"] < 5e6
    names = switch_names(rec)
    cycle = cycle_of(rec)
    peer_of = {(int(n), int(p)): int(q) for n, p, q in zip(rec.ports["node"], rec.ports["port"], rec.ports["peer"])}
    assert sorted(names[n] for n, _, _ in cycle) == [f"s{j}" for j in range(5)]
    for (node, port, _), (next_node, _, _) in zip(cycle, cycle[1:] + cycle[:1]):
        assert peer_of[(node, port)] == next_node
    assert rec.summary["delivered_bytes"] < rec.summary["payload_bytes"]


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_deadlock_of_one_priority_beside_a_moving_one(engine_ns, tmp_path, transport):
    """Two jobs on the ring: job a (priority 1) locks the ring; job b (priority 0) keeps sending one-hop
    flows over the same ring ports, longer than the time limit. The ports keep moving, but a's queues do
    not: status deadlock within a few intervals (not the time limit), the cycle in a's queue, while b was
    still sending."""
    queue = 1  # RoCE: the priority; InfiniBand: the lane, priority mod EgressPort::DataVls (default 2)
    rec = user_run({"name": "prio", "network": {"topology": "file",
                                                "topology_file": ring_file(tmp_path / "r.json", extra_host_per_switch=True),
                                                "transport": transport, "dcqcn": False,
                                                "attributes": USER_ATTRIBUTES[transport]},
                    "workloads": [{"name": "a", "kind": "flows", "pattern": "permutation", "flow_bytes": "16MiB",
                                   "hosts": [0, 1, 2, 3, 4], "priority": 1},
                                  {"name": "b", "kind": "flows", "pattern": "permutation", "flow_bytes": "1GiB",
                                   "hosts": [5, 6, 7, 8, 9]}],
                    "limits": {"max_sim_time_ns": 20e6}})
    assert rec.summary["status"] == "deadlock" and rec.summary["sim_time_ns"] < 5e6
    cycle = cycle_of(rec)
    assert len(cycle) == 5 and {q for _, _, q in cycle} == {queue}
    assert rec.summary["flows_completed"] == 0  # b's 1 GiB flows were still sending


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_links_down_in_a_leaf_spine_reroute_into_a_deadlock(engine_ns, transport):
    """Two link_down faults in a four-leaf, two-spine fabric (leaf0 keeps only spine1, leaf1 only spine0)
    reroute leaf0 <-> leaf1 traffic down and up again through leaf2 and leaf3: with traffic both ways and
    leaf2 <-> leaf3 traffic, the channels spine0 -> leaf3 -> spine1 -> leaf2 -> spine0 wait on each other.
    The run ends deadlock, the cycle through both spines and leaf2, leaf3, with the faults in place."""
    rec = user_run({"name": "updown", "network": {"topology": "leaf-spine", "hosts": 16, "hosts_per_leaf": 4,
                                                  "spines": 2, "transport": transport, "dcqcn": False,
                                                  "attributes": USER_ATTRIBUTES[transport]},
                    "workloads": [{"name": "x", "kind": "flows", "pattern": "permutation", "flow_bytes": "16MiB",
                                   "hosts": [0, 4, 1, 5, 2, 6, 3, 7]},
                                  {"name": "y", "kind": "flows", "pattern": "permutation", "flow_bytes": "16MiB",
                                   "hosts": [8, 12, 9, 13, 10, 14, 11, 15]}],
                    "faults": [{"kind": "link_down", "element": "leaf0-spine0", "at_ns": 0},
                               {"kind": "link_down", "element": "leaf1-spine1", "at_ns": 0}],
                    "limits": {"max_sim_time_ns": 50e6}})
    assert rec.summary["status"] == "deadlock" and rec.summary["sim_time_ns"] < 5e6
    names = switch_names(rec)
    assert {names[n] for n, _, _ in cycle_of(rec)} == {"spine0", "spine1", "leaf2", "leaf3"}


@pytest.mark.parametrize("transport, fault, blocked", [("ib", "switch_down:leaf0", "credit-starved"),
                                                       ("roce", "pause_storm:host0", "paused (PFC)")])
def test_a_run_held_by_a_fault_that_never_ends_says_so(engine_ns, transport, fault, blocked):
    """No cycle, but the run cannot finish: a switch down for good (credits hold its traffic) or a pause
    storm without an end. It reaches the time limit, and its error names the fault still active and a port
    blocked through most of the run, not a deadlock."""
    from cosim.results.unfinished import why_unfinished

    kind, element = fault.split(":")
    rec = user_run({"name": "held", "network": {"topology": "leaf-spine", "hosts": 8, "transport": transport},
                    "workload": {"kind": "flows", "pattern": "permutation", "flow_bytes": "1MiB"},
                    "faults": [{"kind": kind, "element": element, "at_ns": 10_000}],
                    "limits": {"max_sim_time_ns": 2e6}})
    assert rec.summary["status"] == "time-limit" and rec.summary["flows_completed"] < rec.summary["flows"]
    why = why_unfinished(rec.summary, rec.config, rec.faults)
    assert f"faults still active at the end: {fault}" in why and f"a port was {blocked}" in why
    assert "not a deadlock" in why
