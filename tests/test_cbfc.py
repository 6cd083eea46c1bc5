"""Credit-based flow control for Ethernet (``network.link_flow_control = "cbfc"``; docs/models/uec.md): the
credit code of InfiniBand's links (CreditArbiter, SharedInputBuffer) under RoCE and Ultra Ethernet.

An incast of 15 x 4 MiB on a leaf-spine is lossless without a PAUSE frame: no drop, no lane over its
advertised buffer, and the last byte arrives within a hair of the wire time of the 15 flows at the receiver's
link. UEC on credit links runs no retransmission timer (nothing can be lost there; a packet held by a credit
stall is not lost), so not one packet is resent.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim import engine
from cosim.network import topology
from cosim.network.link_layer import CBFC_UPDATE_FRAME_BYTES, link_layer_attributes
from cosim.network.transport import inert_attributes, transport_attributes
from cosim.workload.flows import FlowSet

LINK_GBPS, DELAY_NS, MTU = 100.0, 1000.0, 4096
HEADER = {"roce": 82, "uec": 122}
SIZE, SENDERS = 4 << 20, 15


def incast(transport: str, link_flow_control: str, **extra):
    """15 senders (3 under the receiver's leaf, 12 across 4 spines) x 4 MiB to host 0, 100 Gbps, 1 us links."""
    fabric = topology.leaf_spine(hosts=16, hosts_per_leaf=4, spines=4, oversubscription=1.0,
                                 host_link_gbps=LINK_GBPS, fabric_link_gbps=LINK_GBPS, host_link_delay_ns=DELAY_NS,
                                 fabric_link_delay_ns=DELAY_NS)
    flows = FlowSet(src=np.arange(1, 16, dtype=np.int32), dst=np.zeros(SENDERS, np.int32),
                    size_bytes=np.full(SENDERS, SIZE, np.int64), start_ns=np.zeros(SENDERS),
                    priority=np.zeros(SENDERS, np.uint8))
    attrs = transport_attributes(transport) | link_layer_attributes(link_flow_control=link_flow_control) | extra
    out = engine.simulate(fabric, flows, seed=1, attributes=attrs, max_sim_time_ns=1e8)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    return out


def wire_bound_ns(transport: str) -> float:
    """Serialization of the 15 flows' packets, headers included, at the receiver's link."""
    packets = SENDERS * -(-SIZE // MTU)
    return (SENDERS * SIZE + packets * HEADER[transport]) * 8 / LINK_GBPS


def test_cbfc_sets_credit_links_with_ethernet_update_frames():
    """cbfc is EgressPort::LinkFlowControl=credit with a credit update frame of a minimum Ethernet frame."""
    assert link_layer_attributes(link_flow_control="cbfc") == {
        "EgressPort::LinkFlowControl": "credit", "FabricNode::CreditPacketBytes": str(CBFC_UPDATE_FRAME_BYTES)}
    assert link_layer_attributes() == {}


@pytest.mark.parametrize("transport, within", [("roce", 0.002), ("uec", 0.005)])
def test_cbfc_incast_is_lossless_without_pause_at_the_wire_bound(engine_ns, transport, within):
    """No PAUSE frame, no drop, no lane beyond its credits, every byte once; the last flow ends within
    ``within`` of the wire bound at the bottleneck (0.2% RoCE, 0.5% UEC, whose NSCC windows react to the
    queue the credits hold), credits flowing back as update frames; PFC reaches the same bound. RoCE runs
    without DCQCN here (Meta's PFC-only RoCE): the flow control alone is compared (with DCQCN, its rate cuts
    can drain the few MB that input buffers hold, where PFC's shared buffer keeps tens of MB queued)."""
    extra = {"HostNic::DcqcnEnabled": "false"} if transport == "roce" else {}
    cbfc, pfc = incast(transport, "cbfc", **extra), incast(transport, "pfc", **extra)
    c = cbfc.counters
    assert c["pause_frames_sent"] == c["switch_drops"] == c["credit_violations"] == 0
    assert c["credit_packets_sent"] > 0
    bound = wire_bound_ns(transport)
    for out in (cbfc, pfc):
        assert bound <= out.finish_ns.max() <= (1 + within) * bound
    assert pfc.counters["credit_packets_sent"] == 0


def test_uec_on_cbfc_resends_nothing_even_with_a_short_timer(engine_ns):
    """Credit stalls hold UEC packets for far longer than a short UecRetransmitTimeout (20 us) and reorder
    sprayed packets beyond UecReorderWindow, but a credit link loses nothing, so UEC declares no loss: no
    timeout, no resend, no trim; on PFC-less lossy Ethernet the same incast trims and resends."""
    out = incast("uec", "cbfc", **{"HostNic::UecRetransmitTimeout": "20us", "HostNic::UecReorderWindow": "5us"})
    c = out.counters
    assert c["timeouts"] == c["retransmitted_packets"] == c["trimmed_packets"] == c["uec_loss_detections"] == 0
    assert incast("uec", "pfc").counters["trimmed_packets"] > 0


@pytest.mark.parametrize("args, field", [
    (["--transport", "ib", "--link-flow-control", "cbfc"], "network.link_flow_control"),
    (["--link-flow-control", "cbfc", "--pfc-watchdog"], "network.pfc_watchdog"),
    (["--link-flow-control", "cbfc", "--fault", "pause_storm:host1@0"], "faults[0].kind"),
    (["--link-flow-control", "credit"], "--link-flow-control"),
    (["--set", "EgressPort::LinkFlowControl=credit"], "EgressPort::LinkFlowControl"),
])
def test_cbfc_refusals_name_the_field(tmp_path, capsys, args, field):
    """cbfc on InfiniBand (its links run credits already), with the PFC watchdog or a pause storm (no PAUSE
    frames on credit links), an unknown value and the attribute set by hand: one line naming the field,
    exit code 2, nothing written."""
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "2", *args, "-o", str(out)], capsys)
    assert code == 2, err
    assert field in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cbfc_buffers_are_the_input_buffers():
    """On cbfc links the credit settings act and the shared buffer's do not (the inert-settings warning)."""
    attrs = {"FabricNode::InputBufferBytes": "320000", "SharedBufferMmu::BufferBytes": "1000000"}
    assert [n for n, _ in inert_attributes("roce", attrs, link_flow_control="cbfc")] == ["SharedBufferMmu::BufferBytes"]
    assert [n for n, _ in inert_attributes("roce", attrs)] == ["FabricNode::InputBufferBytes"]
