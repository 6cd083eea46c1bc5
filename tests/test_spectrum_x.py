"""Switch-telemetry congestion control and the Spectrum-X-like profile (docs/models/spectrum-x.md).

The switch's utilization estimate and the sender's rate reactions are checked alone (ModelProbes) against
their closed forms; on a leaf-spine, telemetry congestion control keeps an incast's bottleneck queue near
zero at about the target utilization, shares it fairly and delivers every byte; the profile (RoCE with
per-packet adaptive routing, reordering NICs and telemetry congestion control) finishes a permutation on a
2:1 leaf-spine near its uplink bound, where ECMP collides; runs repeat bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim import engine
from cosim.errors import CosimInputError
from cosim.network import topology
from cosim.network.spec import NetworkSpec
from cosim.network.transport import inert_attributes, run_attributes
from cosim.workload.flows import FlowSet

LINK_GBPS, DELAY_NS = 100.0, 1000.0
MTU, HEADER = 4096, 82
ETA = 0.95  # TelemetryRateControl::TargetUtilization
#: TelemetryRateControl::AdditiveIncrease when 0: line rate x (1 - eta) / 16, bit/s
AI_BPS = LINK_GBPS * 1e9 * (1 - ETA) / 16
SER_PS = (MTU + HEADER) * 8 * 1e12 / (LINK_GBPS * 1e9)  # a full packet's serialization, ps
BASE_RTT_PS = 8 * (DELAY_NS * 1e3 + SER_PS)  # LinkTelemetry::BaseRtt as the transport sets it
BDP_BYTES = LINK_GBPS * 1e9 / 8 * BASE_RTT_PS * 1e-12


def leaf_spine(hosts=16, spines=4, oversubscription=1.0):
    return topology.leaf_spine(hosts=hosts, hosts_per_leaf=4, spines=spines, oversubscription=oversubscription,
                               host_link_gbps=LINK_GBPS, host_link_delay_ns=DELAY_NS, fabric_link_delay_ns=DELAY_NS)


def flow_set(src, dst, size_bytes: int) -> FlowSet:
    src, dst = np.asarray(src, np.int32), np.asarray(dst, np.int32)
    return FlowSet(src=src, dst=dst, size_bytes=np.full(src.size, size_bytes, np.int64), start_ns=np.zeros(src.size),
                   priority=np.zeros(src.size, np.uint8))


def simulate(fabric, flows, snapshot_ns=(), **network):
    attrs = run_attributes(NetworkSpec(link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS, **network), seed=1)
    out = engine.simulate(fabric, flows, seed=1, attributes=attrs, max_sim_time_ns=1e8, snapshot_ns=snapshot_ns)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)  # every byte, exactly once
    return out


def port_queue(out, node: int, port: int):
    """(time ns, bytes) of the queue samples of ``node``'s egress ``port``."""
    m = (np.asarray(out.queues["node"]) == node) & (np.asarray(out.queues["port"]) == port)
    return np.asarray(out.queues["time_ns"])[m], np.asarray(out.queues["bytes"])[m]


def jain(x) -> float:
    x = np.asarray(x, float)
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


# ---------------------------------------------------------------- the models alone


def test_switch_utilization_is_the_rate_sent_plus_the_queue_in_base_rtts(model_probes):
    """Back-to-back full packets with no queue make a port's utilization 1; one packet every two packet
    times, 0.5; a queue of one bandwidth-delay product left behind every packet adds 1 (HPCC's
    qlen / (B T) + txRate / B), each once the average over T (LinkTelemetry::BaseRtt, 10 us by default)
    has forgotten its start: after 10 T, to e^-10."""
    base_rtt_ps = 10e6
    n = int(10 * base_rtt_ps / SER_PS)

    def after(gap_ps, queue_bytes):
        now = (np.arange(n) * gap_ps).astype(np.int64)
        u, code = np.empty(n), np.empty(n, np.uint8)
        model_probes.LinkUtilizationAfter(LINK_GBPS * 1e9, n, now, np.full(n, MTU + HEADER, np.int64),
                                          np.full(n, queue_bytes, np.int64), u, code)
        return u[-1], code[-1]

    assert after(SER_PS, 0)[0] == pytest.approx(1.0, rel=1e-3)
    assert after(2 * SER_PS, 0)[0] == pytest.approx(0.5, rel=1e-3)
    u, code = after(SER_PS, int(LINK_GBPS * 1e9 / 8 * base_rtt_ps * 1e-12))
    assert u == pytest.approx(2.0, rel=2e-3)
    assert model_probes.UtilizationCodeRoundTrip(u) == pytest.approx(u, rel=0.03)


@pytest.mark.parametrize("u", [0.0, 0.01, 0.5, 0.95, 1.0, 1.2, 1.5, 2.0, 7.0, 40.0])
def test_one_byte_carries_the_utilization_finely_near_the_target(model_probes, u):
    """Up to 1.5 the code is exact to 1/256 (half a step of 1/128), above it to 3% (half a geometric step of
    6%): the target utilization and a queue of many base RTTs both fit in one byte."""
    back = model_probes.UtilizationCodeRoundTrip(u)
    assert back == pytest.approx(u, abs=1 / 256) if u <= 1.5 else back == pytest.approx(u, rel=0.03)


def rates_after(model_probes, acks):
    """The QP's rate after each ACK (code, acked_bytes, sent_bytes) at 100 Gbps."""
    code, acked, sent = (np.array(col) for col in zip(*acks))
    rate = np.empty(len(acks))
    model_probes.TelemetryRateAfter(LINK_GBPS * 1e9, len(acks), code.astype(np.uint8), acked.astype(np.int64),
                                    sent.astype(np.int64), rate)
    return rate


def test_the_rate_follows_the_most_utilized_hop_once_per_round_trip(model_probes):
    """HPCC's reactions: the first ACK only opens the first round; every ACK sets R = Rc / k + R_AI with
    k = U / eta above the target (Rc the rate at the last round's end), and only the first ACK beyond the
    bytes sent at that end moves Rc, so a round's ACKs do not compound; below the target the rate grows
    by R_AI per round."""
    line = LINK_GBPS * 1e9
    rate = rates_after(model_probes, [(128, MTU, 10 * MTU),      # first ACK: round 1 ends at 10 packets sent
                                      (255, 2 * MTU, 11 * MTU),  # same round: fast reaction from Rc = line
                                      (192, 3 * MTU, 12 * MTU),  # same round again: from line, not compounded
                                      (192, 11 * MTU, 20 * MTU),  # round ends: Rc = line / k
                                      (64, 12 * MTU, 21 * MTU),   # below target: Rc + R_AI, Rc unchanged
                                      (64, 21 * MTU, 30 * MTU)])  # round ends: Rc + R_AI
    k_full = 1.5 / ETA
    assert rate[0] == line
    assert rate[1] == pytest.approx(line / (rate_code(255) / ETA) + AI_BPS)
    assert rate[2] == pytest.approx(line / k_full + AI_BPS)
    assert rate[3] == pytest.approx(line / k_full + AI_BPS)
    assert rate[4] == pytest.approx(rate[3] + AI_BPS)
    assert rate[5] == pytest.approx(rate[3] + AI_BPS)


def rate_code(code: int) -> float:
    """UtilizationCode.Decode above the linear range (1.5 x 1.06 per code above 192)."""
    return code / 128 if code <= 192 else 1.5 * 1.06 ** (code - 192)


def test_after_max_stage_rounds_below_the_target_the_rate_jumps_to_it(model_probes):
    """Five rounds (MaxStage) of additive increase below the target, then a multiplicative one: R = Rc / k +
    R_AI, which would bring the hop to the target utilization in one round."""
    acks = [(128, MTU, MTU)] + [(64, (r + 1) * MTU + 1, (r + 2) * MTU) for r in range(7)]
    rate = rates_after(model_probes, acks)
    line = LINK_GBPS * 1e9
    assert (rate[1:6] == line).all()  # additive steps above line rate are capped
    assert rate[6] == line  # the multiplicative step, capped at line rate too
    slow = rates_after(model_probes, [(128, MTU, MTU), (255, 2 * MTU, 2 * MTU)]
                       + [(64, (r + 3) * MTU, (r + 3) * MTU) for r in range(7)])
    rc = slow[1]
    np.testing.assert_allclose(slow[2:7], rc + AI_BPS * np.arange(1, 6))
    assert slow[7] == pytest.approx((rc + 5 * AI_BPS) / (0.5 / ETA) + AI_BPS)


# ---------------------------------------------------------------- on a fabric


def test_telemetry_cc_keeps_an_incast_queue_near_zero_at_the_target_utilization(engine_ns):
    """15 senders to one receiver (one bottleneck, the last hop). After the first round trips (every sender
    starts at line rate with a bandwidth-delay product of window) the bottleneck queue stays under 12
    packets while DCQCN's grows to megabytes; the bottleneck carries eta of its capacity (HPCC's target: 5%
    left to drain queues) within 4%; the senders share it fairly (Jain's index of their throughput 0.95 or
    more); every byte arrives and no PAUSE frame is sent."""
    size = 1 << 20
    flows = flow_set(np.arange(1, 16), np.zeros(15), size)
    fab = leaf_spine()
    payload_gbps = LINK_GBPS * MTU / (MTU + HEADER)
    bound_ns = 15 * size * 8 / payload_gbps
    a, b = 0.3 * bound_ns, 0.7 * bound_ns
    out = simulate(fab, flows, snapshot_ns=(a, b), telemetry_cc=True)
    dcqcn = simulate(fab, flows, snapshot_ns=(a, b))
    worst = int(np.argmax(np.asarray(dcqcn.queues["bytes"])))  # the bottleneck: the leaf's port to host 0
    leaf, port = int(np.asarray(dcqcn.queues["node"])[worst]), int(np.asarray(dcqcn.queues["port"])[worst])
    t, q = port_queue(out, leaf, port)
    _, q_dcqcn = port_queue(dcqcn, leaf, port)
    steady = (t >= a) & (t <= b)
    assert q[steady].max() <= 12 * (MTU + HEADER)
    assert q_dcqcn.max() > 5e6
    moved = np.diff(np.asarray(out.delivered_at_bytes), axis=0)[0]
    utilization = moved.sum() * 8 / (b - a) / payload_gbps
    assert abs(utilization - ETA) <= 0.04
    assert jain(moved) >= 0.95
    assert out.counters["pause_frames_sent"] == 0 and out.counters["switch_drops"] == 0


def test_spectrum_x_finishes_a_permutation_near_the_uplink_bound_where_ecmp_collides(engine_ns):
    """Host i sends to host i + 4 on a 2:1 leaf-spine (4 hosts per leaf, 2 spines): every flow crosses the
    spines, whose links carry half of what the hosts send, so the last flow cannot finish before twice its
    wire time. ECMP hashes some flows onto one uplink (the last finishes 1.5x the bound or later); per-packet
    adaptive routing with reordering NICs spreads every flow evenly over both, and telemetry congestion control,
    aiming at 95% of the uplinks (less the ACKs of the reverse flows), finishes within 25% of the bound
    with queues a tenth of DCQCN's."""
    size = 2 << 20
    hosts = np.arange(16)
    flows = flow_set(hosts, (hosts + 4) % 16, size)
    fab = leaf_spine(spines=2, oversubscription=2.0)
    bound_ns = 2 * size * (1 + HEADER / MTU) * 8 / LINK_GBPS
    spx = simulate(fab, flows, profile="spectrum-x")
    ecmp = simulate(fab, flows)
    assert spx.finish_ns.max() <= 1.25 * bound_ns
    assert ecmp.finish_ns.max() >= 1.5 * bound_ns
    assert np.asarray(spx.queues["bytes"]).max() * 10 < np.asarray(ecmp.queues["bytes"]).max()
    ports = spx.ports
    up = np.isin(ports["node"], fab.tier_ids(1)) & np.isin(ports["peer"], fab.tier_ids(2))
    tx = np.asarray(ports["tx_bytes"])[up]
    assert tx.max() <= 1.15 * tx.min()  # every uplink carries its share, within 15%


def test_rotated_ties_spread_a_lone_flow_over_every_uplink_where_the_hash_keeps_one(engine_ns):
    """One 1 MiB flow across an idle leaf-spine of 4 spines, with telemetry CC keeping the queues empty: with
    the hash winning ties (IB's adaptive routing here) every packet takes the flow's hashed uplink; with ties
    rotated (the profile's) the packets take the 4 uplinks in turn, a quarter of the bytes each (within a
    packet); the flow still arrives whole."""
    fab = leaf_spine(hosts=8, spines=4)
    flows = flow_set([0], [4], 1 << 20)
    carried = {}
    for ties in ("hash", "rotate"):
        ports = simulate(fab, flows, routing="adaptive", telemetry_cc=True, adaptive_ties=ties).ports
        up = (np.asarray(ports["node"]) == fab.tier_ids(1)[0]) & np.isin(ports["peer"], fab.tier_ids(2))
        carried[ties] = np.asarray(ports["tx_bytes"])[up]
    assert np.count_nonzero(carried["hash"]) == 1
    quarter = carried["rotate"].sum() / 4
    assert np.all(np.abs(carried["rotate"] - quarter) <= MTU + HEADER), carried["rotate"]


def test_same_seed_same_results(engine_ns):
    """Telemetry and the rate reactions draw nothing at random: two runs of the profile agree bit for bit."""
    flows = flow_set(np.arange(1, 8), np.zeros(7), 256 << 10)
    a, b = (simulate(leaf_spine(hosts=8, spines=2), flows, profile="spectrum-x") for _ in range(2))
    np.testing.assert_array_equal(a.finish_ns, b.finish_ns)
    np.testing.assert_array_equal(np.asarray(a.queues["bytes"]), np.asarray(b.queues["bytes"]))
    assert a.counters == b.counters


# ---------------------------------------------------------------- the spec layer


def test_the_profile_sets_its_fields_and_refuses_one_that_contradicts_it():
    """``profile = "spectrum-x"`` is RoCE with adaptive routing (ties rotated) and telemetry CC, DCQCN off; a field set to a
    value of its own (not the default) is refused naming it; so is another transport."""
    net = NetworkSpec(profile="spectrum-x")
    assert (net.transport, net.routing, net.telemetry_cc, net.dcqcn) == ("roce", "adaptive", True, False)
    attrs = run_attributes(net, seed=1)
    assert attrs["HostNic::TelemetryCcEnabled"] == "true" and attrs["LinkTelemetry::Enabled"] == "true"
    assert attrs["HostNic::ReorderTolerant"] == "true" and attrs["HostNic::DcqcnEnabled"] == "false"
    assert "SharedBufferMmu::LosslessPriorityMask" not in attrs  # PFC kept
    assert net.adaptive_ties == "rotate" and attrs["FabricSwitch::AdaptiveTies"] == "rotate"
    for field, value in (("routing", "spray"), ("transport", "uec")):
        with pytest.raises(CosimInputError) as err:
            NetworkSpec(profile="spectrum-x", **{field: value})
        assert err.value.field == f"network.{field}"
    with pytest.raises(CosimInputError) as err:  # ties of a routing that has none
        NetworkSpec(adaptive_ties="rotate")
    assert err.value.field == "network.adaptive_ties" and "adaptive" in str(err.value)


def test_telemetry_cc_is_roce_only_and_replaces_dcqcn():
    """telemetry_cc holds DCQCN off, is held off on ib and uec (as DCQCN is), and refuses a second congestion
    control switched on with --set; its attributes are inert without it."""
    assert NetworkSpec(telemetry_cc=True).dcqcn is False
    assert NetworkSpec(telemetry_cc=True, transport="ib").telemetry_cc is False
    with pytest.raises(CosimInputError) as err:
        NetworkSpec(telemetry_cc=True, attributes=(("HostNic::DcqcnEnabled", "true"),))
    assert err.value.field == "HostNic::DcqcnEnabled"
    inert = dict(inert_attributes("roce", {"TelemetryRateControl::MaxStage": "3"}))
    assert "telemetry_cc" in inert["TelemetryRateControl::MaxStage"]
    assert not inert_attributes("roce", {"TelemetryRateControl::MaxStage": "3"}, telemetry_cc=True)


def test_cli_profile_shows_in_the_dry_run(capsys):
    """``--profile spectrum-x`` resolves in the dry run's document and plan; --routing spray beside it exits 2
    naming the field."""
    code, out, _ = run_main(["run", "--pattern", "incast", "--hosts", "4", "--profile", "spectrum-x", "--dry-run"],
                            capsys)
    assert code == 0
    for line in ('profile = "spectrum-x"', "telemetry_cc = true", 'routing = "adaptive"', "dcqcn = false",
                 "#   profile: spectrum-x"):
        assert line in out
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "4", "--profile", "spectrum-x", "--routing",
                             "spray", "--dry-run"], capsys)
    assert code == 2 and "network.routing" in err
