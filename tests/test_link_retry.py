"""Link-level retry (``network.link_retry = "llr"``, EgressPort::LinkLevelRetry; docs/models/uec.md) on a link
with a bit-error rate, against the closed form of go-back-N on one hop.

A corrupted frame costs its hop the link time from the frame's start until the receiver's NACK is back at the
sender, T·(1 + ceil(2d/T)) for back-to-back frames of serialization time T over a link of delay d, and
nothing end to end: with p the probability that a frame is corrupted,

    goodput = C·(1 − p) / (1 + p·k),   k = ceil(2d/T) ≈ 2d/T,

C the payload rate of the link at its framing (docs/models/uec.md derives it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import run_main

from cosim import engine
from cosim import faults as fs
from cosim.losses import LossCause
from cosim.network import topology
from cosim.network.transport import transport_attributes
from cosim.workload.flows import FlowSet

LINK_GBPS, DELAY_NS, MTU = 100.0, 1000.0, 4096
HEADER = {"roce": 82, "uec": 122}
SIZE = 16 << 20


def one_flow(transport: str, ber: float | None, llr: bool, size: int = SIZE, **extra):
    """One flow host1 -> host0 through a switch; the sender's link (both directions) corrupts bits at ``ber``."""
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    flows = FlowSet.from_arrays([1], [0], size)
    stop_ns = 1e9
    faults = [] if ber is None else [fs.Fault(kind="link_degrade", element="host1-switch0", at_ns=0.0,
                                              params=(("bit_error_rate", ber),))]
    plan = fs.FaultPlan(resolved=fs.resolve(faults, fabric, max_sim_time_ns=stop_ns), fabric=fabric, seed=1,
                        stop_ps=int(stop_ns * 1e3))
    attrs = transport_attributes(transport) | {"HostNic::RetransmitTimeout": "100us"} | extra
    if llr:
        attrs["EgressPort::LinkLevelRetry"] = "true"
    out = engine.simulate(fabric, flows, seed=1, attributes=attrs, max_sim_time_ns=stop_ns, setup=plan.setup)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    return out


def frame_terms(transport: str, ber: float) -> tuple[float, float, int]:
    """(C in Gbit/s, p, k) of full data frames of ``transport`` on the 100 Gbps, 1 us link."""
    wire = MTU + HEADER[transport]
    frame_ns = wire * 8 / LINK_GBPS
    return LINK_GBPS * MTU / wire, 1 - (1 - ber) ** (wire * 8), math.ceil(2 * DELAY_NS / frame_ns)


def goodput_gbps(out, size: int = SIZE) -> float:
    return size * 8 / float(out.finish_ns.max())


@pytest.mark.parametrize("transport", ["roce", "uec"])
def test_llr_replays_every_corrupted_frame_on_its_hop_and_loses_nothing(engine_ns, transport):
    """With LLR, a bit-error rate costs the transport nothing: no packet is lost end to end, none resent by
    the NIC and no timer fires; each corrupted frame is one ``link_retransmitted`` row of the losses table at
    the port that sent it, and its replay sends it and the frames behind it again (at most 1 + k frames, k =
    ceil(2d/T) the full frames that fit in the NACK's round trip)."""
    _, p, k = frame_terms(transport, 1e-6)
    out = one_flow(transport, 1e-6, llr=True)
    c = out.counters
    assert c["ber_drops"] == c["retransmitted_packets"] == c["timeouts"] == 0
    assert c["llr_retries"] > 0
    log = out.logs["losses"]
    assert set(log["cause"].tolist()) == {LossCause.LINK_RETRANSMITTED}
    assert log["cause"].size == c["llr_retries"]
    assert c["llr_retries"] < c["llr_replayed_frames"] <= (1 + k) * c["llr_retries"]
    packets = -(-SIZE // MTU)
    assert abs(c["llr_retries"] - p * packets) <= 5 * math.sqrt(p * packets) + 1


@pytest.mark.parametrize("transport", ["roce", "uec"])
@pytest.mark.parametrize("ber, rel", [(1e-6, 0.05), (1e-5, 0.02)])
def test_llr_goodput_follows_the_go_back_n_closed_form(engine_ns, transport, ber, rel):
    """Goodput = C(1 − p)/(1 + p·k): within ``rel`` of the closed form at the bit-error rate's p (the
    tolerance covers the sampling spread of the corrupted frames: about 130 at 1e-6, 1,600 at 1e-5), and
    within 1% of it at the fraction of frames that were corrupted in the run, r/(N + r) for N frames
    delivered and r replays (the finish time then is the link's (N + r(1 + k))·T plus one path latency)."""
    c_gbps, p, k = frame_terms(transport, ber)
    out = one_flow(transport, ber, llr=True)
    got = goodput_gbps(out)
    assert got == pytest.approx(c_gbps * (1 - p) / (1 + p * k), rel=rel)
    n, r = -(-SIZE // MTU), out.counters["llr_retries"]
    assert got == pytest.approx(c_gbps * n / (n + r * (1 + k)), rel=0.01)


def test_llr_beats_end_to_end_recovery_under_bit_errors(engine_ns):
    """At BER 1e-6 go-back-N (RoCE) resends a round trip's worth per loss and selective retransmission (UEC)
    waits on reordering or its timer; with LLR both keep most of the link (above 95% of the closed form)."""
    for transport in ("roce", "uec"):
        c_gbps, p, k = frame_terms(transport, 1e-6)
        closed = c_gbps * (1 - p) / (1 + p * k)
        plain, llr = (goodput_gbps(one_flow(transport, 1e-6, llr=x)) for x in (False, True))
        assert plain < llr and llr > 0.95 * closed


def test_llr_without_bit_errors_changes_nothing(engine_ns):
    """A link that corrupts nothing never replays: the run is the run without LLR, bit for bit."""
    a, b = (one_flow("roce", None, llr=x, size=1 << 20) for x in (False, True))
    np.testing.assert_array_equal(a.finish_ns, b.finish_ns)
    assert a.counters == b.counters


def test_llr_on_cbfc_links_loses_nothing(engine_ns):
    """LLR on credit links (cbfc): replays need no new credits (they were charged when the frames were first
    sent), so no lane overflows, nothing is paused or dropped, every byte arrives."""
    out = one_flow("uec", 1e-6, llr=True, **{"EgressPort::LinkFlowControl": "credit"})
    c = out.counters
    assert c["llr_retries"] > 0 and c["credit_violations"] == c["switch_drops"] == c["pause_frames_sent"] == 0
    assert c["retransmitted_packets"] == c["timeouts"] == 0


def test_llr_runs_bit_for_bit_again(engine_ns):
    """The bit-error stream is seeded from the run: two runs with LLR agree in every counter and finish time."""
    a, b = (one_flow("roce", 1e-6, llr=True, size=4 << 20) for _ in range(2))
    np.testing.assert_array_equal(a.finish_ns, b.finish_ns)
    assert a.counters == b.counters


@pytest.mark.parametrize("args, field", [
    (["--transport", "ib", "--link-retry", "llr"], "network.link_retry"),
    (["--link-retry", "yes"], "--link-retry"),
    (["--link-flow-control", "cbfc", "--fault", "link_degrade:host1-switch0@0,bit_error_rate=1e-6"],
     "network.link_retry"),
    (["--set", "EgressPort::LinkLevelRetry=true"], "EgressPort::LinkLevelRetry"),
])
def test_link_retry_refusals_name_the_field(tmp_path, capsys, args, field):
    """LLR on InfiniBand (its links resend already), an unknown value, bit errors on cbfc links without LLR
    and the attribute set by hand are refused in one line naming the field, exit code 2, nothing written."""
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "2", *args, "-o", str(out)], capsys)
    assert code == 2, err
    assert field in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_link_retry_in_a_document_and_a_transport_group():
    """``[network] link_retry = "llr"`` sets EgressPort::LinkLevelRetry; in ``transport = "all"`` it applies to
    roce and uec, and the InfiniBand run keeps its own link layer."""
    from cosim.network.transport import run_attributes
    from cosim.spec import from_document

    exps = from_document({"workload": {"kind": "flows"}, "network": {"transport": "all", "link_retry": "llr"}})
    assert {e.network.transport: e.network.link_retry for e in exps} == {"roce": "llr", "ib": "off", "uec": "llr"}
    attrs = {e.network.transport: run_attributes(e.network, 1) for e in exps}
    assert attrs["roce"]["EgressPort::LinkLevelRetry"] == attrs["uec"]["EgressPort::LinkLevelRetry"] == "true"
    assert "EgressPort::LinkLevelRetry" not in attrs["ib"]
