"""End-to-end limits on bytes in flight: receiver-driven admission (clear-to-send), the per-QP window, and
where switches mark ECN; closed forms and bounds checked on small single-switch runs."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import engine
from cosim.network import topology
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload import flows as fl

MTU, HEADER, ACK = 4096, 82, 86
LINK_GBPS, DELAY_NS = 100.0, 1000.0


def incast(senders: int, size_bytes: int, transport: str = "roce", *, dcqcn: bool = False, extra=None, **options):
    fabric = topology.single_switch(hosts=senders + 1, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    flows = fl.incast(fabric.host_ids, size_bytes=size_bytes)
    attrs = transport_attributes(transport, dcqcn=dcqcn) | mechanism_attributes(**options) | (extra or {})
    out = engine.simulate(fabric, flows, attributes=attrs)
    assert out.status == "complete"
    return fabric, out


def receiver_port_peak_bytes(fabric, out) -> int:
    """Peak queue of the switch port facing the incast receiver (host 0), in wire bytes."""
    ports = out.ports
    to_receiver = (ports["peer"] == fabric.host_ids[0]) & np.isin(ports["node"], fabric.switch_ids)
    return int(ports["peak_queue_bytes"][to_receiver].max())


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_admission_bounds_the_incast_queue_by_its_budget_without_pause(transport):
    """Eight senders into one receiver, DCQCN off ("PFC only"): without admission the switch queue grows
    to about all senders' windows and PFC pauses (or credits stall) the senders; with a budget of
    2 channels x 64 KiB the queue facing the receiver never exceeds the budget in wire bytes plus a few
    control packets, no PAUSE is sent, and every byte arrives."""
    buffer = {"SharedBufferMmu::BufferBytes": "4000000"} if transport == "roce" else {}
    budget = 2 * 64 * 1024
    admission = buffer | {"HostNic::AdmissionChannels": "2", "HostNic::AdmissionBufferBytes": str(budget // 2),
                          "HostNic::AdmissionChunkBytes": str(16 * MTU)}
    fab, free = incast(8, 1 << 20, transport, extra=buffer)
    fab, admitted = incast(8, 1 << 20, transport, admission=True, extra=admission)
    bound = budget * (MTU + HEADER) / MTU + 16 * ACK
    assert receiver_port_peak_bytes(fab, admitted) <= bound
    assert receiver_port_peak_bytes(fab, free) > 3 * bound
    assert admitted.counters["pause_frames_sent"] == 0
    if transport == "roce":
        assert free.counters["pause_frames_sent"] > 0
    assert admitted.counters["admission_grants"] == 8 * (1 << 20) // (16 * MTU)
    assert (admitted.delivered_bytes == 1 << 20).all()
    # The receiver's link stays busy: the budget is several bandwidth-delay products.
    assert np.nanmax(admitted.finish_ns) < 1.1 * np.nanmax(free.finish_ns)


def test_admission_grant_costs_one_round_trip_at_start():
    """A lone flow under admission waits one REQUEST/GRANT round trip before its first byte: its FCT is the
    free FCT plus the control round trip (2 hops each way of an ACK-sized packet)."""
    _, free = incast(1, 256 * 1024)
    _, admitted = incast(1, 256 * 1024, admission=True)
    control_ns = 2 * (2 * DELAY_NS + 2 * ACK * 8 / LINK_GBPS)
    assert admitted.finish_ns[0] - free.finish_ns[0] == pytest.approx(control_ns, abs=1.0)


def window_rtt_ns() -> float:
    """From the first bit of a data packet sent to the last bit of its ACK back, over one switch."""
    data_ns, ack_ns = (MTU + HEADER) * 8 / LINK_GBPS, ACK * 8 / LINK_GBPS
    return 2 * data_ns + 2 * DELAY_NS + 2 * ack_ns + 2 * DELAY_NS


@pytest.mark.parametrize("packets", [2, 4, 8])
def test_window_bounds_in_flight_bytes_exactly_and_sets_throughput(packets):
    """A QP window of W below the bandwidth-delay product: unacknowledged payload reaches W and never
    exceeds it, and a lone flow moves W per round trip (ACK per packet), FCT = size / W x RTT."""
    window = packets * MTU
    size = 64 * MTU
    _, out = incast(1, size, qp_window_bytes=window, extra={"HostNic::AckIntervalBytes": str(MTU)})
    assert out.counters["peak_qp_inflight_bytes"] == window
    rounds = size // window
    expected = (rounds - 1) * window_rtt_ns() + packets * (MTU + HEADER) * 8 / LINK_GBPS + 2 * DELAY_NS \
        + (MTU + HEADER) * 8 / LINK_GBPS
    assert out.finish_ns[0] == pytest.approx(expected, rel=0.02)


def test_window_of_a_bdp_keeps_line_rate_and_bounds_the_incast_queue():
    """A window of one bandwidth-delay product leaves a lone flow at (almost) line rate, while an 8-to-1
    incast queues no more than the 8 windows at the receiver's port (PFC never needed)."""
    bdp = int(np.ceil(LINK_GBPS * window_rtt_ns() / 8 / MTU)) * MTU
    ack = {"HostNic::AckIntervalBytes": str(MTU)}
    _, free = incast(1, 1 << 20, extra=ack)
    _, windowed = incast(1, 1 << 20, qp_window_bytes=bdp, extra=ack)
    assert windowed.finish_ns[0] < 1.03 * free.finish_ns[0]
    fab, many = incast(8, 1 << 20, qp_window_bytes=bdp, extra=ack)
    assert receiver_port_peak_bytes(fab, many) <= 8 * bdp * (MTU + HEADER) / MTU
    assert many.counters["pause_frames_sent"] == 0
    assert many.counters["peak_qp_inflight_bytes"] <= bdp


def test_window_below_the_ack_interval_is_refused():
    """A window no ACK could ever open is an input error before anything runs."""
    from cosim.errors import CosimInputError
    from cosim.spec import make

    with pytest.raises(CosimInputError, match="QpWindowBytes"):
        make("flows", qp_window_bytes=16 * 1024)
    assert make("flows", qp_window_bytes=64 * 1024).network.qp_window_bytes == 64 * 1024


def test_dequeue_marking_reacts_sooner_and_keeps_the_incast_queue_lower():
    """DCQCN on a 4-to-1 incast of 8 MiB each: marking as packets leave the queue (the queue behind them)
    signals congestion a queue-drain time sooner than marking as they join it, so senders cut earlier and
    the receiver's queue peaks lower (measured 5.4 MB against 7.6 MB)."""
    fab, at_enqueue = incast(4, 8 << 20, dcqcn=True)
    _, at_dequeue = incast(4, 8 << 20, dcqcn=True, ecn_marking="dequeue")
    assert at_enqueue.counters["ecn_marks"] > 0 and at_dequeue.counters["ecn_marks"] > 0
    assert receiver_port_peak_bytes(fab, at_dequeue) < 0.85 * receiver_port_peak_bytes(fab, at_enqueue)
