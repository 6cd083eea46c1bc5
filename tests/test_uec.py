"""Ultra Ethernet (``--transport uec``, docs/models/uec.md) on small fabrics, against closed forms.

NSCC's window reactions are checked alone (ModelProbes::NsccWindowAfter) against its quadrant rules.

Reliable unordered delivery delivers every byte of every flow exactly once, trimmed packets included;
trimming with NSCC keeps an incast's queue under the trim threshold (plus one packet) with no PFC; selective
retransmission resends only what a lossy link lost, where go-back-N resends a round trip's worth per loss;
per-packet spraying removes the ECMP collisions of a permutation. The htsim cross-check's configuration
(bench/crosscheck_htsim.py) keeps an idle flow at its closed form.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import run_main

from cosim import engine
from cosim import faults as fs
from cosim.cli import cli
from cosim.losses import LossCause
from cosim.network import topology
from cosim.network.transport import TRANSPORT_GROUPS, transport_attributes
from cosim.workload.flows import FlowSet

LINK_GBPS, DELAY_NS = 100.0, 1000.0
MTU, UEC_HEADER = 4096, 122
#: the uec transport's trim threshold at 100 Gbps (20 us of the link), bytes
TRIM_BYTES = int(transport_attributes("uec")["FabricSwitch::TrimThresholdBytes"])


def leaf_spine(hosts=16, spines=4):
    """Leaves of 4 NICs, ``spines`` spines, every link 100 Gbps and 1 us: no oversubscription."""
    return topology.leaf_spine(hosts=hosts, hosts_per_leaf=4, spines=spines, oversubscription=1.0,
                               host_link_gbps=LINK_GBPS, fabric_link_gbps=LINK_GBPS, host_link_delay_ns=DELAY_NS,
                               fabric_link_delay_ns=DELAY_NS)


def flow_set(src, dst, size_bytes: int) -> FlowSet:
    src, dst = np.asarray(src, np.int32), np.asarray(dst, np.int32)
    return FlowSet(src=src, dst=dst, size_bytes=np.full(src.size, size_bytes, np.int64), start_ns=np.zeros(src.size),
                   priority=np.zeros(src.size, np.uint8))


def simulate(fabric, flows, transport="uec", faults=(), **extra):
    stop_ns = 1e8
    plan = fs.FaultPlan(resolved=fs.resolve(list(faults), fabric, max_sim_time_ns=stop_ns), fabric=fabric, seed=1,
                        stop_ps=int(stop_ns * 1e3))
    out = engine.simulate(fabric, flows, seed=1, attributes=transport_attributes(transport) | extra,
                          max_sim_time_ns=stop_ns, setup=plan.setup)
    assert out.status == "complete"
    return out


def wire_ns(payload_bytes: int, header_bytes: int = UEC_HEADER) -> float:
    """Time to serialize ``payload_bytes`` cut into MTU packets at the link rate, ns."""
    packets = -(-payload_bytes // MTU)
    return (payload_bytes + packets * header_bytes) * 8 / LINK_GBPS


def permutation(hosts=16):
    """Every host sends to the host four further on: all traffic crosses the spines."""
    src = np.arange(hosts)
    return src, (src + 4) % hosts


@pytest.mark.parametrize("cc", ["nscc", "rccc", "both"])
@pytest.mark.parametrize("pattern", ["permutation", "incast", "all-to-all"])
def test_every_byte_arrives_once_and_every_trimmed_packet_is_recovered(engine_ns, pattern, cc):
    """Lossy Ethernet without PFC, under each congestion control: nothing is paused and nothing dropped
    (trimming forwards headers instead), every flow delivers exactly its bytes, and the senders resend
    exactly the packets switches trimmed (each NACK names one; no timeout fires)."""
    if pattern == "all-to-all":
        src, dst = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
        src, dst = src[src != dst], dst[src != dst]
    else:
        src, dst = permutation() if pattern == "permutation" else (np.arange(1, 16), np.zeros(15))
    flows = flow_set(src, dst, (32 << 10) if pattern == "all-to-all" else (512 << 10))
    out = simulate(leaf_spine(), flows, **{"HostNic::UecCongestionControl": cc})
    c = out.counters
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert (out.finish_ns > 0).all()
    assert c["pause_frames_sent"] == 0 and c["switch_drops"] == 0 and c["timeouts"] == 0
    assert c["retransmitted_packets"] == c["trimmed_packets"] == c["naks_sent"]
    assert c["retransmitted_bytes"] == c["trimmed_packets"] * MTU  # every flow is whole packets
    if pattern == "incast":
        # 15 senders start at line rate: the first round trip overflows, unless the receiver's credits pace them
        assert (c["trimmed_packets"] > 0) == (cc == "nscc")
    # the losses log: each trim at a switch, then its resend at the sender, which follows it
    log = out.logs["losses"]
    trimmed, resent = log["cause"] == LossCause.TRIMMED, log["cause"] == LossCause.RETRANSMITTED
    assert trimmed.sum() == resent.sum() == c["trimmed_packets"] and trimmed.sum() + resent.sum() == log["cause"].size
    kind = leaf_spine().node_kind[log["node"]]
    assert (kind[trimmed] == topology.SWITCH).all() and (kind[resent] == topology.HOST).all()
    assert (np.sort(log["time_ns"][trimmed]) < np.sort(log["time_ns"][resent])).all()


def test_incast_queue_stays_under_the_trim_threshold_and_finishes_at_the_bottleneck_bound(engine_ns):
    """15 senders to one receiver: its leaf port is the bottleneck. Trimming caps every switch queue at the
    trim threshold plus the packet that crossed it, no PFC pause is sent, and NSCC keeps the bottleneck busy:
    the incast ends within 2% (plus a base round trip) of the 15 flows' wire time at 100 Gbps; RoCE with
    PFC and DCQCN finishes at the same bound but queues megabytes."""
    size = 1 << 20
    flows = flow_set(np.arange(1, 16), np.zeros(15), size)
    out = simulate(leaf_spine(), flows)
    bound_ns = wire_ns(15 * size)
    assert out.finish_ns.max() >= bound_ns
    assert out.finish_ns.max() <= 1.02 * bound_ns + 12_000
    assert int(np.asarray(out.queues["bytes"]).max()) <= TRIM_BYTES + MTU + UEC_HEADER
    assert out.counters["pause_frames_sent"] == 0
    roce = simulate(leaf_spine(), flows, "roce")
    assert int(np.asarray(roce.queues["bytes"]).max()) > 10 * TRIM_BYTES


def test_selective_retransmission_resends_only_the_lost_packets(engine_ns):
    """A bit-error rate on the sender's link: UEC resends each lost data packet once (at most the packets the
    link lost; a lost SACK needs no resend, the next one's cumulative acknowledgement covers it), finding
    the loss when a packet sent HostNic::UecReorderWindow later is SACKed, while
    RoCE's go-back-N resends every packet sent between the loss and its NAK: several times the bytes."""
    size, ber = 8 << 20, 3e-7
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    flows = flow_set([0], [1], size)
    fault = fs.Fault(kind="link_degrade", element="host0-switch0", at_ns=0.0, params=(("bit_error_rate", ber),))
    uec = simulate(fabric, flows, "uec", [fault])
    roce = simulate(fabric, flows, "roce", [fault], **{"HostNic::RetransmitTimeout": "100us"})
    for out in (uec, roce):
        np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    u, r = uec.counters, roce.counters
    assert u["ber_drops"] > 0 and r["ber_drops"] > 0
    assert 0 < u["retransmitted_packets"] <= u["ber_drops"]
    assert u["uec_loss_detections"] > 0  # most losses are found by the SACKs of later packets, not a timeout
    assert u["retransmitted_bytes"] <= u["ber_drops"] * MTU
    assert r["retransmitted_bytes"] > 5 * u["retransmitted_bytes"]


@pytest.mark.parametrize("ack_every", [1, 16384])
def test_heavy_bit_errors_are_found_by_sacks_not_the_timer(engine_ns, ack_every):
    """At BER 1e-5 on the sender's link (29% of 4 KiB frames corrupted) the window fills with lost packets
    within a few round trips. Each SACK acknowledges the packet that triggered it (ACK_PSN) even when its
    bitmap, starting at CACK_PSN after an AR packet, does not reach it, and loss detection by reordering
    passes over a recent retransmission to the older packets beyond it: so the SACKs of later packets find
    the losses, the timer fires for fewer than 5% of the resends, and the goodput stays above what LLR's
    closed form allows at this rate (each corrupted frame costs LLR a link round trip of frames; UEC resends
    the one packet), coalesced or not. Every byte arrives."""
    size, ber = 8 << 20, 1e-5
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    flows = flow_set([0], [1], size)
    fault = fs.Fault(kind="link_degrade", element="host0-switch0", at_ns=0.0, params=(("bit_error_rate", ber),))
    out = simulate(fabric, flows, "uec", [fault], **{"HostNic::UecAckEveryBytes": str(ack_every)})
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    c = out.counters
    assert c["uec_loss_detections"] > 0 and c["timeouts"] < 0.05 * c["retransmitted_packets"]
    frame_bits = (MTU + UEC_HEADER) * 8
    p = 1 - (1 - ber) ** frame_bits
    k = int(np.ceil(2 * DELAY_NS / (frame_bits / LINK_GBPS)))
    llr_gbps = LINK_GBPS * MTU / (MTU + UEC_HEADER) * (1 - p) / (1 + p * k)
    assert size * 8 / out.finish_ns.max() > llr_gbps


def test_spraying_removes_the_ecmp_collisions_of_a_permutation(engine_ns):
    """A permutation across 4 spines has a path for every flow, but ECMP hashes some flows onto one uplink
    (the slowest then takes about twice its wire time). UEC sprays every flow's packets over the spines and
    finishes every flow within 25% of its wire time; with one entropy value per flow it collides like ECMP."""
    size = 2 << 20
    flows = flow_set(*permutation(), size)
    ideal_ns = wire_ns(size) + 4 * DELAY_NS
    uec = simulate(leaf_spine(), flows)
    roce = simulate(leaf_spine(), flows, "roce")
    one_path = simulate(leaf_spine(), flows, **{"HostNic::UecEntropyCount": "1", "HostNic::UecEntropyRing": "0"})
    assert uec.finish_ns.max() <= 1.25 * ideal_ns
    assert roce.finish_ns.max() > 1.5 * uec.finish_ns.max()
    assert one_path.finish_ns.max() > 1.5 * uec.finish_ns.max()


def test_same_seed_same_results(engine_ns):
    """Spraying, trimming and NSCC draw nothing at random beyond the switches' seeded ECN draws: two runs
    of one incast agree bit for bit."""
    flows = flow_set(np.arange(1, 8), np.zeros(7), 256 << 10)
    a, b = (simulate(leaf_spine(hosts=8, spines=2), flows) for _ in range(2))
    np.testing.assert_array_equal(a.finish_ns, b.finish_ns)
    assert a.counters == b.counters


def test_transport_all_runs_the_three_side_by_side(engine_ns, tmp_path):
    """``--transport all`` makes one run per transport in one file; ``both`` stays RoCE and InfiniBand."""
    assert TRANSPORT_GROUPS["both"] == ("roce", "ib") and TRANSPORT_GROUPS["all"] == ("roce", "ib", "uec")
    path = tmp_path / "all.h5"
    r = CliRunner().invoke(cli, ["run", "--pattern", "incast", "--hosts", "4", "--flow-bytes", "64KiB",
                                 "--transport", "all", "--quiet", "-o", str(path)])
    assert r.exit_code == 0, r.output
    with h5py.File(path, "r") as h5:
        assert sorted(h5["runs"]) == ["ib", "roce", "uec"]


@pytest.mark.parametrize("args", [["--admission"], ["--set", "HostNic::QpWindowBytes=1000000"]])
def test_uec_refuses_roce_window_mechanisms(tmp_path, capsys, args):
    """Admission and QP windows are RoCE/IB mechanisms; with uec's NSCC they are refused in one line."""
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "4", "--transport", "uec", *args,
                             "-o", str(out)], capsys)
    assert code == 2, err
    assert "uec" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


#: NsccWindow defaults the probes run with (BaseRtt 10 us, TargetQdelay 5 us): Gamma, FairIncreaseMtus, Alpha
GAMMA, FI_MTUS, ALPHA = 0.8, 1.0, 4.0
MAX_WINDOW_BYTES = 1.5 * 100e9 * 10e-6 / 8  # MaxWindowBdps x line rate x BaseRtt


#: NsccWindow::DelayAverageWeight's default: each ACK's share of the smoothed delay (UEC NSCC avg_delay)
DELAY_AVERAGE_WEIGHT = 0.0125


def nscc(model_probes, answers, delay_average_weight=1.0):
    """The window after each answer (now_us, acked_bytes, rtt_us, ecn, nack) of a flow at 100 Gbps. With
    ``delay_average_weight`` 1 the smoothed delay is the last ACK's own: each rule shows alone."""
    now, acked, rtt, ecn, nack = (np.array(col) for col in zip(*answers))
    cwnd = np.empty(len(answers))
    model_probes.NsccWindowAfter(100e9, MTU, delay_average_weight, len(answers), (now * 1e6).astype(np.int64),
                                 acked.astype(np.int64), (rtt * 1e6).astype(np.int64), ecn.astype(np.uint8),
                                 nack.astype(np.uint8), cwnd)
    return cwnd


def test_nscc_decreases_once_per_round_trip_and_quick_adapts_to_what_was_delivered(model_probes):
    """ECN with a queueing delay d above the target (DelayAverageWeight 1: the smoothed delay is d) cuts the
    window by Gamma (d - target) / d, at most once per base RTT; a delay above QuickAdaptThreshold at the end
    of a quick-adapt period (base RTT + target) sets the window to the bytes acknowledged in that period."""
    cwnd = nscc(model_probes, [(1.0, MTU, 10.0, 0, 0),    # no queue: stays at its largest window
                               (2.0, MTU, 20.0, 1, 0),    # d = 10 us, marked: x (1 - 0.8 x 5/10)
                               (5.0, MTU, 20.0, 1, 0),    # within a base RTT of the cut: unchanged
                               (12.5, MTU, 20.0, 1, 0),   # a base RTT later: cut again
                               (23.0, MTU, 110.0, 1, 0)])  # period over, d = 100 us: quick adapt to 5 MTUs
    factor = 1 - GAMMA * (10 - 5) / 10
    np.testing.assert_allclose(cwnd[:4], [MAX_WINDOW_BYTES, MAX_WINDOW_BYTES * factor, MAX_WINDOW_BYTES * factor,
                                          MAX_WINDOW_BYTES * factor**2])
    assert cwnd[4] == 5 * MTU


def test_nscc_decreases_only_while_the_smoothed_delay_is_above_the_target(model_probes):
    """With the default DelayAverageWeight w, a marked ACK cuts the window only once avg_delay (each ACK's
    delay weighted w, from 0) is above the target, and by Gamma (avg_delay - target) / avg_delay: one mark
    at d = 10 us after clean ACKs at no queue leaves the window alone; a standing 10 us queue, every ACK
    marked, cuts it at the first ACK that lifts the average over 5 us, ln 2 / -ln(1 - w) = 55.1 ACKs in."""
    clean = [(0.1 * k, MTU, 10.0, 0, 0) for k in range(40)]
    lone_mark = nscc(model_probes, clean + [(4.0, MTU, 20.0, 1, 0)], DELAY_AVERAGE_WEIGHT)
    assert lone_mark[-1] == pytest.approx(MAX_WINDOW_BYTES)
    standing = nscc(model_probes, [(0.1 * k, MTU, 20.0, 1, 0) for k in range(60)], DELAY_AVERAGE_WEIGHT)
    avg_us = 10.0 * (1 - (1 - DELAY_AVERAGE_WEIGHT) ** np.arange(1, 61))
    first = int(np.argmax(avg_us > 5.0))
    assert first == 55
    np.testing.assert_allclose(standing[:first], MAX_WINDOW_BYTES)
    cut = 1 - GAMMA * (avg_us[first] - 5) / avg_us[first]
    np.testing.assert_allclose(standing[first:], MAX_WINDOW_BYTES * cut)  # the next cut waits a base RTT


def test_nscc_increases_fairly_above_the_target_and_in_proportion_below_it(model_probes):
    """Without ECN, a delay at or above the target adds FairIncreaseMtus MTUs per window acknowledged; a delay
    below it adds Alpha MTUs x (target - delay) / target per window."""
    cwnd = nscc(model_probes, [(0.0, MTU, 20.0, 1, 0),    # a cut to make room: x 0.6
                               (1.0, MTU, 20.0, 0, 0),    # d = 10 us >= target: fair increase
                               (2.0, MTU, 12.0, 0, 0)])   # d = 2 us < target: proportional increase
    w0 = MAX_WINDOW_BYTES * (1 - GAMMA * 0.5)
    w1 = w0 + FI_MTUS * MTU * MTU / w0
    w2 = w1 + ALPHA * MTU * (MTU / w1) * (5 - 2) / 5
    np.testing.assert_allclose(cwnd, [w0, w1, w2])


@pytest.mark.parametrize("transport, expected", [("uec", ["uec"]), ("both", ["roce", "ib"]),
                                                 ("all", ["roce", "ib", "uec"])])
def test_network_transport_in_a_document(transport, expected):
    """``[network] transport = "uec"`` is one experiment; "both" and "all" one per transport they name."""
    from cosim.spec import from_document

    exps = from_document({"workload": {"kind": "flows"}, "network": {"transport": transport}})
    assert [e.network.transport for e in exps] == expected


def _crosscheck_bench():
    """bench/crosscheck_htsim.py as a module (its cosim side needs no htsim)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "crosscheck_htsim.py"
    spec = importlib.util.spec_from_file_location("crosscheck_htsim", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_htsim_crosscheck_configuration_runs_to_closed_forms(engine_ns, tmp_path):
    """The htsim cross-check's cosim side (htsim's 64 B framing, thresholds and NSCC gains): one idle flow
    ends at its closed form, 256 packets on the wire plus 4 link delays and 3 store-and-forwards; the incast
    resends exactly the packets trimmed, with no timeout; the connection matrix htsim reads has a header
    and one ``src->dst id N start T size B`` line per flow."""
    xc = _crosscheck_bench()
    one = xc.run_cosim("one-flow", 1, {})
    packet_ns = (MTU + 64) * 8 / LINK_GBPS
    assert one.fct_ns[0] == pytest.approx(256 * packet_ns + 4 * DELAY_NS + 3 * packet_ns, abs=0.1)
    incast = xc.run_cosim("incast", 1, {})
    assert incast.counters["trimmed"] > 0
    assert incast.counters["retransmitted"] == incast.counters["trimmed"] and incast.counters["timeouts"] == 0
    assert incast.fct_ns.max() < 1.02 * 15 * 256 * packet_ns + xc.base_rtt_ns()
    xc.write_connection_matrix(tmp_path / "incast.cm", xc.flows("incast"))
    lines = (tmp_path / "incast.cm").read_text().splitlines()
    assert lines[:2] == ["Nodes 32", "Connections 15"] and lines[2] == "8->0 id 1 start 0 size 1048576"


# --- SACK coalescing (HostNic::UecAckEveryBytes) and RCCC (HostNic::UecCongestionControl) ---

#: a 100 Gbps host link's round trip through one switch and back (4 link delays, a packet each way), ns
ONE_SWITCH_RTT_NS = 4 * DELAY_NS + 2 * wire_ns(MTU)


#: NSCC's largest window at 100 Gbps with the uec transport's BaseRtt (MaxWindowBdps 1.5), bytes
WINDOW_BYTES = 1.5 * LINK_GBPS * 1e9 * float(transport_attributes("uec")["NsccWindow::BaseRtt"][:-2]) * 1e-9 / 8


def one_flow(size_bytes: int, **extra):
    """One flow between the two hosts of a single switch (no congestion)."""
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    return simulate(fabric, flow_set([0], [1], size_bytes), **extra)


@pytest.mark.parametrize("ack_every", [1, 4096, 16384, 100_000, 1 << 22])
@pytest.mark.parametrize("size", [1, 4095, 4096, 5000, 16384 + 1, 300_000])
def test_coalesced_sacks_never_stall_a_flow(engine_ns, ack_every, size):
    """Whatever the coalescing threshold, a flow's last bytes are SACKed at once (its last packet carries
    the AR flag), so every flow (one byte, one packet and a bit, not a multiple of the threshold, smaller
    than the threshold) delivers exactly its bytes within its wire time plus a round trip, long before the
    retransmission timeout could have rescued a stall, and with no timeout. A threshold above the NSCC window
    leaves the packet that fills the window (AR) as the only one answered: the sender then waits a round
    trip per window."""
    out = one_flow(size, **{"HostNic::UecAckEveryBytes": str(ack_every)})
    np.testing.assert_array_equal(out.delivered_bytes, [size])
    assert out.counters["timeouts"] == 0 and out.counters["retransmitted_packets"] == 0
    # the flow's time: its packets at line rate, then the last one's trip (2 links); its SACK is not waited for
    waits = size // WINDOW_BYTES if ack_every > WINDOW_BYTES else 0
    assert out.finish_ns[0] <= wire_ns(size) + (1 + waits) * ONE_SWITCH_RTT_NS


@pytest.mark.parametrize("ack_every", [4096, 8192, 16384, 65536])
def test_one_sack_per_threshold_of_bytes(engine_ns, ack_every):
    """An uncongested flow of S bytes (no mark, no reordering, a window that never fills) gets one SACK per
    UecAckEveryBytes received plus one for its last packet (AR): ceil(S / threshold) SACKs, where a SACK per
    packet would be S / MTU."""
    size = 4 << 20
    out = one_flow(size, **{"HostNic::UecAckEveryBytes": str(ack_every)})
    np.testing.assert_array_equal(out.delivered_bytes, [size])
    assert out.counters["uec_sacks_sent"] == -(-size // ack_every)


def test_sack_per_packet_threshold_matches_the_per_packet_answer(engine_ns):
    """UecAckEveryBytes=1 answers every data packet, as the model did before coalescing: one SACK per packet
    that arrives with its payload and one NACK per trimmed one (resent once each), the same finish as the coalesced default within a round
    trip, and the default sends fewer than 60% of the SACKs."""
    flows = flow_set(np.arange(1, 16), np.zeros(15), 1 << 20)
    per_packet = simulate(leaf_spine(), flows, **{"HostNic::UecAckEveryBytes": "1"})
    coalesced = simulate(leaf_spine(), flows)
    c = per_packet.counters
    assert c["uec_sacks_sent"] == 15 * (1 << 20) // MTU
    assert c["naks_sent"] == c["trimmed_packets"] == c["retransmitted_packets"] > 0
    assert c["acks"] <= c["uec_sacks_sent"] + c["naks_sent"]  # the run ends with the last byte: a few still travel
    assert coalesced.counters["uec_sacks_sent"] < 0.6 * c["uec_sacks_sent"]
    assert coalesced.counters["timeouts"] == 0
    assert abs(coalesced.finish_ns.max() - per_packet.finish_ns.max()) <= 12_000


def test_one_sack_still_feeds_back_every_packets_entropy(model_probes):
    """A coalesced SACK covers many packets, but the sender kept each packet's entropy in its scoreboard:
    every packet it newly acknowledges that came through clean returns its entropy to the REPS ring (in
    packet order), and the marked one (ACK_PSN: a receiver SACKs a marked packet on arrival, so only that
    one can be marked) is retired instead; packets the bitmap shows missing give no feedback. Its bytes are
    NSCC's marked bytes; the rest are acknowledged clean."""
    sent = 8
    entropies = np.array([40, 41, 42, 43, 44, 45, 46, 47], np.uint16)
    # CACK_PSN 2 (0 and 1 delivered), bitmap from PSN 2: 2, 3, 5 and 6 arrived, 4 missing; ACK_PSN 6 marked
    bitmap = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4)
    out = np.zeros(2 + 8, np.int64)
    model_probes.PdsSackFeedback(MTU, sent, entropies, 2, 2, bitmap, 6, True, 8, out)
    acked, marked, nxt = out[0], out[1], out[2:]
    assert acked == 6 * MTU and marked == MTU
    # the ring returns the clean packets' entropies 0, 1, 2, 3, 5 in order; then exploration from value 0,
    # where the retired entropy 46 (index 46) is skipped further on but 0..2 are not retired
    np.testing.assert_array_equal(nxt[:5], [40, 41, 42, 43, 45])
    assert 46 not in nxt and 44 not in nxt[:5]
    unmarked = np.zeros(2 + 6, np.int64)
    model_probes.PdsSackFeedback(MTU, sent, entropies, 2, 2, bitmap, 6, False, 6, unmarked)
    assert unmarked[0] == 6 * MTU and unmarked[1] == 0
    np.testing.assert_array_equal(unmarked[2:], [40, 41, 42, 43, 45, 46])


def test_a_sack_acknowledges_its_ack_psn_beyond_a_bitmap_from_cack(model_probes):
    """After an AR packet the receiver's bitmap starts at CACK_PSN; with CACK_PSN far behind (losses still
    undetected) it may end below the packet that triggered the SACK. ACK_PSN itself is delivered all the
    same: its bytes leave the window (and its ECN mark counts), or it would wait for a timeout and be sent
    twice."""
    sent = 80
    entropies = np.arange(40, 40 + sent, dtype=np.uint16)
    out = np.zeros(2, np.int64)
    # CACK_PSN 2, bitmap from 2: packets 2 and 3 arrived; ACK_PSN 70, marked, beyond the bitmap's 64 packets
    model_probes.PdsSackFeedback(MTU, sent, entropies, 2, 2, 0b11, 70, True, 0, out)
    assert out[0] == (2 + 2 + 1) * MTU and out[1] == MTU


def test_rccc_incast_keeps_the_queue_near_empty_without_a_trim(engine_ns):
    """RCCC: the receiver grants UecRcccCreditBytes at a time, one grant per that payload's wire time at its
    line rate, round-robin over its 15 senders; each sends only UecRcccInitialCreditBytes unsolicited. The
    bottleneck queue then holds at most the unsolicited first packets (15 packets, 63 KB) where NSCC's
    reaches the trim threshold (250 KB): nothing is trimmed or resent, every byte arrives once, the grants
    number exactly what each flow was owed, and the incast ends within 1% (plus two round trips) of the
    bottleneck's wire time, no later than with NSCC."""
    size, senders = 1 << 20, 15
    flows = flow_set(np.arange(1, 1 + senders), np.zeros(senders), size)
    rccc = simulate(leaf_spine(), flows, **{"HostNic::UecCongestionControl": "rccc"})
    nscc = simulate(leaf_spine(), flows)
    c = rccc.counters
    np.testing.assert_array_equal(rccc.delivered_bytes, flows.size_bytes)
    assert c["trimmed_packets"] == c["retransmitted_packets"] == c["timeouts"] == c["switch_drops"] == 0
    initial, credit = 4096, 16384
    assert c["uec_credits_sent"] == senders * -(-(size - initial) // credit)
    max_queue = int(np.asarray(rccc.queues["bytes"]).max())
    assert max_queue <= senders * (MTU + UEC_HEADER)
    assert int(np.asarray(nscc.queues["bytes"]).max()) > 4 * max_queue
    bound_ns = wire_ns(senders * size)
    assert bound_ns <= rccc.finish_ns.max() <= 1.01 * bound_ns + 24_000
    assert rccc.finish_ns.max() <= nscc.finish_ns.max()


def test_nscc_and_rccc_combined_take_the_tighter_limit(engine_ns):
    """``both``: a packet needs room in the NSCC window and credit. With the default window the credit binds
    (the same run as rccc); with a window of one packet per round trip the window binds (as slow as nscc
    alone with that window, many times rccc's time). Every byte arrives in each case."""
    size = 1 << 20
    tiny = {"NsccWindow::MaxWindowBdps": "0.01"}  # clamped to MinWindowBytes: one packet in flight
    rccc = one_flow(size, **{"HostNic::UecCongestionControl": "rccc"})
    both = one_flow(size, **{"HostNic::UecCongestionControl": "both"})
    nscc_tiny = one_flow(size, **tiny)
    both_tiny = one_flow(size, **tiny, **{"HostNic::UecCongestionControl": "both"})
    for out in (rccc, both, nscc_tiny, both_tiny):
        np.testing.assert_array_equal(out.delivered_bytes, [size])
        assert out.counters["timeouts"] == 0
    assert both.finish_ns[0] == rccc.finish_ns[0]
    assert rccc.finish_ns[0] <= wire_ns(size) + 2 * ONE_SWITCH_RTT_NS
    assert both_tiny.finish_ns[0] >= nscc_tiny.finish_ns[0] > 3 * rccc.finish_ns[0]
    assert both_tiny.counters["uec_credits_sent"] > 0


@pytest.mark.parametrize("cc", ["rccc", "both"])
def test_rccc_runs_repeat_bit_for_bit(engine_ns, cc):
    """Credit pacing draws nothing at random: two runs of an incast agree bit for bit, counters included."""
    flows = flow_set(np.arange(1, 8), np.zeros(7), 256 << 10)
    a, b = (simulate(leaf_spine(hosts=8, spines=2), flows, **{"HostNic::UecCongestionControl": cc})
            for _ in range(2))
    np.testing.assert_array_equal(a.finish_ns, b.finish_ns)
    assert a.counters == b.counters and a.events == b.events


def test_uec_congestion_control_is_a_network_field(engine_ns, tmp_path, capsys):
    """``network.uec_congestion_control`` (``--uec-cc``) sets HostNic::UecCongestionControl for uec runs only
    (roce and ib ignore it, like dcqcn and ib_cc); a bad value is one line naming the field, exit code 2."""
    from cosim.network.transport import run_attributes
    from cosim.spec import from_document

    (exp,) = from_document({"workload": {"kind": "flows"}, "network": {"transport": "uec",
                                                                       "uec_congestion_control": "rccc"}})
    assert run_attributes(exp.network, 1)["HostNic::UecCongestionControl"] == "rccc"
    (roce,) = from_document({"workload": {"kind": "flows"}, "network": {"transport": "roce",
                                                                        "uec_congestion_control": "rccc"}})
    assert "HostNic::UecCongestionControl" not in run_attributes(roce.network, 1)
    path = tmp_path / "r.h5"
    r = CliRunner().invoke(cli, ["run", "--pattern", "incast", "--hosts", "4", "--flow-bytes", "256KiB",
                                 "--transport", "uec", "--uec-cc", "rccc", "--quiet", "-o", str(path)])
    assert r.exit_code == 0, r.output
    with h5py.File(path, "r") as h5:
        summary = json.loads(h5["runs"][next(iter(h5["runs"]))].attrs["summary"])
    # 3 senders of 256 KiB, 4 KiB unsolicited, the rest in grants of 16 KiB
    assert summary["uec_credits_sent"] == 3 * -(-((256 << 10) - 4096) // 16384)
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "4", "--transport", "uec", "--uec-cc", "fast",
                             "-o", str(tmp_path / "x.h5")], capsys)
    assert code == 2 and "uec-cc" in err and len(err.strip().splitlines()) == 1


# --- reliable ordered delivery (HostNic::UecDeliveryMode rod) ---

ROD = {"HostNic::UecDeliveryMode": "rod"}


@pytest.mark.parametrize("pattern", ["permutation", "incast"])
def test_rod_delivers_every_byte_in_order_on_one_path(engine_ns, pattern):
    """ROD keeps each delivery context on one entropy, so one path whose order the receiver keeps: no
    packet is ever placed beyond a gap; what follows a trimmed packet is dropped and resent after one NACK
    per gap (go-back-N), every byte arrives, and no timeout fires."""
    src, dst = permutation() if pattern == "permutation" else (np.arange(1, 16), np.zeros(15))
    flows = flow_set(src, dst, 512 << 10)
    out = simulate(leaf_spine(), flows, **ROD)
    c = out.counters
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert c["reordered_packets"] == 0 and c["timeouts"] == 0 and c["switch_drops"] == 0
    assert c["retransmitted_packets"] >= c["trimmed_packets"]
    if pattern == "incast":
        assert 0 < c["naks_sent"] <= c["trimmed_packets"]  # one NACK per gap, not per dropped packet


def test_rod_collides_like_ecmp_where_rud_sprays(engine_ns):
    """One path per delivery context: on the permutation where spraying finishes every flow near its wire
    time, ROD's flows collide on the uplinks as ECMP's do (the slowest takes more than 1.5 times as long)."""
    flows = flow_set(*permutation(), 2 << 20)
    rud = simulate(leaf_spine(), flows)
    rod = simulate(leaf_spine(), flows, **ROD)
    np.testing.assert_array_equal(rod.delivered_bytes, flows.size_bytes)
    assert rod.finish_ns.max() > 1.5 * rud.finish_ns.max()


def test_rod_goes_back_where_rud_resends_only_the_lost(engine_ns):
    """On a link with bit errors, RUD resends each lost packet once; ROD's receiver drops what follows a
    loss, so its sender goes back and resends from the gap: several times the bytes, every byte delivered."""
    size, ber = 8 << 20, 3e-7
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    flows = flow_set([0], [1], size)
    fault = fs.Fault(kind="link_degrade", element="host0-switch0", at_ns=0.0, params=(("bit_error_rate", ber),))
    rud = simulate(fabric, flows, "uec", [fault])
    rod = simulate(fabric, flows, "uec", [fault], **ROD)
    for out in (rud, rod):
        np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert rod.counters["ber_drops"] > 0 and rod.counters["reordered_packets"] == 0
    assert rod.counters["retransmitted_bytes"] > 3 * rud.counters["retransmitted_bytes"]
