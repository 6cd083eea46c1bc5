"""The deadlock watchdog: a ring of switches whose flows each cross two ring links deadlocks under PFC
(RoCE without DCQCN) and under credits (InfiniBand); the watchdog ends the run with status deadlock and
names the cycle of waiting switch queues. Congestion without a cyclic dependency never triggers it."""

from __future__ import annotations

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
