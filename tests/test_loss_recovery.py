"""RoCE go-back-N loss recovery: a lossy fabric (PFC off, small buffer, no DCQCN) still delivers every byte
of every flow in order, retransmitting what the switch dropped; lossless fabrics never retransmit."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import engine
from cosim.network import topology
from cosim.network.ideal import ideal_fct_ns
from cosim.network.transport import transport_attributes
from cosim.telemetry import network_summary, network_tables
from cosim.workload import flows as fl

FLOW_BYTES = 256 * 1024
#: PFC off and a buffer that leaves ~170 KB of shared pool after the reserved space: the 4-to-1 incast drops
LOSSY = {"SharedBufferMmu::PfcEnabled": "false", "SharedBufferMmu::BufferBytes": "500000",
         "HostNic::RetransmitTimeout": "100us"}


def incast(transport: str = "roce", *, seed: int = 1, **extra: str):
    """A 4-to-1 incast at 100 Gbps without congestion control; ``extra`` attributes on top."""
    fabric = topology.single_switch(hosts=5, link_gbps=100.0, link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=FLOW_BYTES)
    attributes = transport_attributes(transport, dcqcn=False) | extra
    return fabric, flows, engine.simulate(fabric, flows, seed=seed, attributes=attributes, max_sim_time_ns=1e8)


def test_lossy_incast_delivers_every_byte_after_retransmitting_the_drops(engine_ns):
    """Drops happen, yet the run completes with every flow's bytes delivered exactly once and in order
    (delivered never counts a retransmission twice); at least one packet is resent per drop, NAKs open
    the recovery, the tail is recovered by the timer, and no flow beats its lossless ideal."""
    fabric, flows, out = incast(**LOSSY)
    c = out.counters
    assert c["switch_drops"] > 0 and out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert c["retransmitted_packets"] >= c["switch_drops"]
    assert c["naks_sent"] > 0 and c["timeouts"] > 0
    ideal = ideal_fct_ns(fabric, flows.src, flows.dst, flows.size_bytes, mtu_bytes=out.mtu_bytes,
                         header_bytes=out.header_bytes)
    assert (out.finish_ns - flows.start_ns >= ideal).all()


def test_lossy_runs_are_deterministic(engine_ns):
    """The same seed gives the same drops, retransmissions and every dataset, twice."""
    runs = [incast(**LOSSY)[2] for _ in range(2)]
    a, b = runs
    assert a.counters == b.counters and a.events == b.events and a.sim_time_ns == b.sim_time_ns
    for name in ("finish_ns", "delivered_bytes", "latency_count"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("time_ns", "bytes"):
        np.testing.assert_array_equal(a.queues[name], b.queues[name])
    for name, column in a.ports.items():
        np.testing.assert_array_equal(column, b.ports[name])


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_lossless_runs_never_retransmit(engine_ns, transport):
    """PFC (RoCE) and credits (IB) lose nothing: no retransmission, NAK or timeout, and the summary does
    not carry the loss-recovery counters at all (they appear only when non-zero)."""
    fabric, flows, out = incast(transport)
    assert out.status == "complete" and out.counters["switch_drops"] == 0
    assert all(out.counters[name] == 0 for name in engine.LOSS_RECOVERY_COUNTERS)
    tables = network_tables(fabric, out, src=flows.src, dst=flows.dst, size_bytes=flows.size_bytes,
                            start_ns=flows.start_ns)
    summary = network_summary(fabric, out, tables, queue_sample_interval_ns=1000.0)
    assert not set(engine.LOSS_RECOVERY_COUNTERS) & summary.keys()


def test_lossy_summary_reports_the_recovery(engine_ns):
    """A lossy run's summary carries retransmitted_packets, naks_sent and timeouts."""
    fabric, flows, out = incast(**LOSSY)
    tables = network_tables(fabric, out, src=flows.src, dst=flows.dst, size_bytes=flows.size_bytes,
                            start_ns=flows.start_ns)
    summary = network_summary(fabric, out, tables, queue_sample_interval_ns=1000.0)
    assert all(summary[name] == out.counters[name] > 0 for name in engine.LOSS_RECOVERY_COUNTERS)
