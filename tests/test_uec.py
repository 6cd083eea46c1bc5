"""Ultra Ethernet (``--transport uec``, docs/models/uec.md) on small fabrics, against closed forms.

NSCC's window reactions are checked alone (ModelProbes::NsccWindowAfter) against its quadrant rules.

Reliable unordered delivery delivers every byte of every flow exactly once, trimmed packets included;
trimming with NSCC keeps an incast's queue under the trim threshold (plus one packet) with no PFC; selective
retransmission resends only what a lossy link lost, where go-back-N resends a round trip's worth per loss;
per-packet spraying removes the ECMP collisions of a permutation. The htsim cross-check's configuration
(bench/crosscheck_htsim.py) keeps an idle flow at its closed form.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("pattern", ["permutation", "incast"])
def test_every_byte_arrives_once_and_every_trimmed_packet_is_recovered(engine_ns, pattern):
    """Lossy Ethernet without PFC: nothing is paused and nothing dropped (trimming forwards headers instead),
    every flow delivers exactly its bytes, and the senders resend exactly the packets switches trimmed
    (each NACK names one; no timeout fires)."""
    src, dst = permutation() if pattern == "permutation" else (np.arange(1, 16), np.zeros(15))
    flows = flow_set(src, dst, 512 << 10)
    out = simulate(leaf_spine(), flows)
    c = out.counters
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert (out.finish_ns > 0).all()
    assert c["pause_frames_sent"] == 0 and c["switch_drops"] == 0 and c["timeouts"] == 0
    assert c["retransmitted_packets"] == c["trimmed_packets"] == c["naks_sent"]
    assert c["retransmitted_bytes"] == c["trimmed_packets"] * MTU  # every flow is whole packets
    if pattern == "incast":
        assert c["trimmed_packets"] > 0  # 15 senders start at line rate: the first round trip overflows
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
    assert int(np.asarray(out.queue_bytes).max()) <= TRIM_BYTES + MTU + UEC_HEADER
    assert out.counters["pause_frames_sent"] == 0
    roce = simulate(leaf_spine(), flows, "roce")
    assert int(np.asarray(roce.queue_bytes).max()) > 10 * TRIM_BYTES


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


def nscc(model_probes, answers):
    """The window after each answer (now_us, acked_bytes, rtt_us, ecn, nack) of a flow at 100 Gbps."""
    now, acked, rtt, ecn, nack = (np.array(col) for col in zip(*answers))
    cwnd = np.empty(len(answers))
    model_probes.NsccWindowAfter(100e9, MTU, len(answers), (now * 1e6).astype(np.int64), acked.astype(np.int64),
                                 (rtt * 1e6).astype(np.int64), ecn.astype(np.uint8), nack.astype(np.uint8), cwnd)
    return cwnd


def test_nscc_decreases_once_per_round_trip_and_quick_adapts_to_what_was_delivered(model_probes):
    """ECN with a queueing delay d above the target cuts the window by Gamma (d - target) / d, at most once per
    base RTT; a delay above QuickAdaptThreshold at the end of a quick-adapt period (base RTT + target) sets
    the window to the bytes acknowledged in that period."""
    cwnd = nscc(model_probes, [(1.0, MTU, 10.0, 0, 0),    # no queue: stays at its largest window
                               (2.0, MTU, 20.0, 1, 0),    # d = 10 us, marked: x (1 - 0.8 x 5/10)
                               (5.0, MTU, 20.0, 1, 0),    # within a base RTT of the cut: unchanged
                               (12.5, MTU, 20.0, 1, 0),   # a base RTT later: cut again
                               (23.0, MTU, 110.0, 1, 0)])  # period over, d = 100 us: quick adapt to 5 MTUs
    factor = 1 - GAMMA * (10 - 5) / 10
    np.testing.assert_allclose(cwnd[:4], [MAX_WINDOW_BYTES, MAX_WINDOW_BYTES * factor, MAX_WINDOW_BYTES * factor,
                                          MAX_WINDOW_BYTES * factor**2])
    assert cwnd[4] == 5 * MTU


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
