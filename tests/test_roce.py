"""RoCE fabric physics: ECN marking (congestion point), DCQCN reaction point, PFC losslessness."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import engine
from cosim.errors import CosimInputError
from cosim.network import topology
from cosim.network.ideal import ideal_fct_ns
from cosim.spec import make
from cosim.workload import flows as fl

KMIN_100G = 400e3  # 100 KB per 25 Gbps
KMAX_100G = 1600e3  # 400 KB per 25 Gbps
PMAX = 0.2


@pytest.mark.parametrize("queue_bytes", [0, 300e3, 500e3, 1000e3, 1500e3, 2000e3])
def test_ecn_mark_fraction_follows_red(model_probes, queue_bytes):
    frac = model_probes.EcnMarkFraction(100e9, int(queue_bytes), 20_000, 3)
    if queue_bytes <= KMIN_100G:
        expected = 0.0
    elif queue_bytes > KMAX_100G:
        expected = 1.0
    else:
        expected = PMAX * (queue_bytes - KMIN_100G) / (KMAX_100G - KMIN_100G)
    assert abs(frac - expected) <= 0.02


def test_dcqcn_rate_after_one_cnp_matches_closed_form(model_probes):
    line, r0, alpha0, steps = 100e9, 60e9, 0.5, 12
    g, F, r_ai = 1 / 256, 5, 2e9  # DcqcnRateControl defaults: G, FastRecoverySteps, RateAI
    rate, target, alpha = (np.empty(steps + 1) for _ in range(3))
    model_probes.DcqcnAfterCnp(line, r0, alpha0, steps, 0, rate, target, alpha)
    # The cut: Rt <- Rc, Rc <- Rc (1 - alpha/2), alpha <- (1 - g) alpha + g.
    rc0 = r0 * (1 - alpha0 / 2)
    alpha1 = (1 - g) * alpha0 + g
    assert rate[0] == pytest.approx(rc0) and target[0] == pytest.approx(r0) and alpha[0] == pytest.approx(alpha1)
    k = np.arange(1, steps + 1)
    # Fast recovery for timer stages 1..F-1: the gap to Rt halves each stage.
    fr = k < F
    np.testing.assert_allclose(rate[1:][fr], r0 - (r0 - rc0) / 2.0 ** k[fr], rtol=1e-12)
    np.testing.assert_allclose(target[1:][fr], r0)
    # Additive increase from stage F: Rt grows by R_AI a stage; the gap d obeys d_k = (d_{k-1} + R_AI)/2.
    ai = ~fr
    np.testing.assert_allclose(target[1:][ai], r0 + (k[ai] - F + 1) * r_ai, rtol=1e-12)
    d_start = r0 - rate[F - 1]
    d = r_ai + (d_start - r_ai) / 2.0 ** (k[ai] - F + 1)
    np.testing.assert_allclose(target[1:][ai] - rate[1:][ai], d, rtol=1e-9)
    # Alpha decays by (1 - g) per period without CNP; the period the CNP arrived in does not decay.
    np.testing.assert_allclose(alpha[1:], alpha1 * (1 - g) ** (k - 1), rtol=1e-12)


def incast(n_senders: int, *, dcqcn: bool, size_bytes: int, buffer_bytes: int = 32 << 20, snapshot_ns=()):
    fabric = topology.single_switch(hosts=n_senders + 1, link_gbps=100.0, link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=size_bytes)
    out = engine.simulate(fabric, flows, attributes={"HostNic::DcqcnEnabled": str(dcqcn).lower(),
                                                     "SharedBufferMmu::BufferBytes": str(buffer_bytes)},
                          snapshot_ns=snapshot_ns)
    return fabric, flows, out


@pytest.mark.parametrize("n_senders", [2, 4, 8])
def test_incast_without_dcqcn_is_lossless_through_pfc(engine_ns, n_senders):
    # A 4 MB shared-buffer switch (shallow, as at the edge): the incast must lean on PFC.
    _, flows, out = incast(n_senders, dcqcn=False, size_bytes=4_000_000, buffer_bytes=4_000_000)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert out.counters["switch_drops"] == 0 and out.ports["drops"].sum() == 0
    assert out.counters["peak_headroom_used_bytes"] <= out.counters["min_headroom_bytes"]
    # PFC did the work: pauses happened on the senders' links, and they resumed.
    assert out.counters["pause_frames_sent"] > 0
    assert (out.logs["pauses"]["paused"] == 1).sum() > 0 and (out.logs["pauses"]["paused"] == 0).sum() > 0
    assert out.ports["paused_ps"][out.ports["node"] < n_senders + 1].sum() > 0


@pytest.mark.parametrize("n_senders", [2, 4, 8])
def test_incast_with_dcqcn_converges_without_drops(engine_ns, n_senders):
    size = 6_000_000
    _, flows, out = incast(n_senders, dcqcn=True, size_bytes=size)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert out.counters["switch_drops"] == 0
    assert out.counters["ecn_marks"] > 0 and out.counters["cnps_received"] > 0
    # Bottleneck utilization: payload delivered over the time to deliver it, against the payload rate.
    payload_gbps = n_senders * size * 8 / np.nanmax(out.finish_ns)
    assert payload_gbps >= 0.9 * 100.0 * 4096 / (4096 + 82)
    # Fairness over the second half of the transfer: Jain's index of each flow's throughput between the
    # snapshots at 1/2 and 9/10 of the ideal (payload-rate) completion time.
    t_end = n_senders * size * 8 / (100.0 * 4096 / (4096 + 82))  # ns
    _, _, out = incast(n_senders, dcqcn=True, size_bytes=size, snapshot_ns=(0.5 * t_end, 0.9 * t_end))
    thr = out.delivered_at_bytes[1] - out.delivered_at_bytes[0]
    assert thr.sum() ** 2 / (len(thr) * (thr ** 2).sum()) >= 0.95


def test_latency_histogram_counts_every_data_packet(engine_ns):
    _, _, out = incast(2, dcqcn=True, size_bytes=400_000)
    assert out.latency_count.sum() == 2 * -(-400_000 // 4096)
    low = out.latency_low_ns[out.latency_count > 0]
    assert low.min() >= 0.9 * (2 * 1000.0)  # at least two propagation delays


def test_fat_tree_permutation_delivers_every_byte(engine_ns):
    fabric = topology.fat_tree(k=4, link_gbps=100.0, link_delay_ns=500.0)
    flows = fl.permutation(fabric.host_ids, shift=8, size_bytes=500_000)  # every flow crosses the core
    out = engine.simulate(fabric, flows)
    assert out.status == "complete" and out.counters["switch_drops"] == 0
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)


def test_fat_tree_flows_without_ecmp_collision_run_at_line_rate(engine_ns):
    k, gbps, delay_ns, size = 4, 100.0, 500.0, 2_000_000
    fabric = topology.fat_tree(k=k, link_gbps=gbps, link_delay_ns=delay_ns)
    # One sender per pod, each to the next pod: a permutation of pods across the core.
    flows = fl.FlowSet.from_arrays([0, 4, 8, 12], [5, 9, 13, 1], size)
    wire = np.array([4096 + 82] * (size // 4096) + ([size % 4096 + 82] if size % 4096 else []))
    for seed in range(1, 60):
        out = engine.simulate(fabric, flows, seed=seed, attributes={"FabricSwitch::EcmpSeed": str(seed)})
        assert out.status == "complete"
        np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
        if out.ports["tx_bytes"].max() < 1.5 * wire.sum():
            break  # no two flows shared a link
    else:
        pytest.fail("every one of 59 ECMP seeds made two flows collide")
    ser = np.ceil(wire * 8 * 1e3 / gbps) / 1e3
    hops = 6  # host-edge-agg-core-agg-edge-host
    ideal_ns = ser.sum() + (hops - 1) * ser[0] + hops * delay_ns
    np.testing.assert_allclose(out.finish_ns, ideal_ns, rtol=0.02)
    # cosim.network.ideal (the yardstick of FCT slowdown) agrees with the hand-derived formula.
    np.testing.assert_allclose(ideal_fct_ns(fabric, flows.src, flows.dst, flows.size_bytes, mtu_bytes=4096,
                                            header_bytes=82), ideal_ns, rtol=1e-6)


@pytest.mark.parametrize("size", [1, 4096, 4097, 262_145, 1_000_000])
@pytest.mark.parametrize("fabric_gbps,oversubscription", [(400.0, 1.0), (None, 2.0)])
def test_lone_flow_slowdown_is_one(engine_ns, size, fabric_gbps, oversubscription):
    # Mixed rates: 100G host links with 400G fabric links (bottleneck at the edges), or 2:1 oversubscribed
    # 50G uplinks (bottleneck mid-path, where a partial last packet overtakes nothing): a lone flow across
    # the spine takes exactly T_ideal either way.
    fabric = topology.leaf_spine(hosts=8, hosts_per_leaf=2, spines=2, host_link_gbps=100.0,
                                 fabric_link_gbps=fabric_gbps, oversubscription=oversubscription,
                                 host_link_delay_ns=700.0, fabric_link_delay_ns=300.0)
    flows = fl.FlowSet.from_arrays([0], [7], size)
    out = engine.simulate(fabric, flows)
    ideal = ideal_fct_ns(fabric, flows.src, flows.dst, flows.size_bytes, mtu_bytes=out.mtu_bytes,
                         header_bytes=out.header_bytes)
    np.testing.assert_allclose(out.finish_ns, ideal, rtol=1e-5)


def test_lossless_priority_mask_carves_headroom_only_where_needed(engine_ns):
    # Headroom for two lossless priorities instead of eight leaves room for the shared pool: a 1.5 MB
    # switch that cannot fit eight priorities' headroom runs the incast losslessly with two.
    fabric = topology.single_switch(hosts=5, link_gbps=100.0, link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=2_000_000)
    attrs = {"HostNic::DcqcnEnabled": "false", "SharedBufferMmu::BufferBytes": "1500000"}
    with pytest.raises(CosimInputError, match="LosslessPriorityMask"):
        engine.simulate(fabric, flows, attributes=attrs)
    out = engine.simulate(fabric, flows, attributes=attrs | {"SharedBufferMmu::LosslessPriorityMask": "129"})
    assert out.status == "complete" and out.counters["switch_drops"] == 0
    assert out.counters["pause_frames_sent"] > 0
    assert out.counters["peak_headroom_used_bytes"] <= out.counters["min_headroom_bytes"]


def test_headroom_below_one_packet_is_rejected_before_the_run(engine_ns):
    """PFC headroom below one packet is rejected when the Experiment is made, and by the engine before a run."""
    with pytest.raises(CosimInputError, match="HeadroomBytes"):
        make("flows", **{"attributes.FabricSwitch::HeadroomBytes": "2000"})
    # The engine refuses it too (e.g. with a bigger MTU set elsewhere), before anything is simulated.
    fabric = topology.single_switch(hosts=2, link_gbps=100.0, link_delay_ns=1000.0)
    with pytest.raises(CosimInputError, match="HeadroomBytes"):
        engine.simulate(fabric, fl.FlowSet.from_arrays([0], [1], 1000),
                        attributes={"FabricSwitch::HeadroomBytes": "8000", "HostNic::MtuBytes": "9000"})


def test_shallow_buffer_with_low_alpha_stays_lossless_and_never_sticks(engine_ns, tmp_path):
    # Regression: a 4 MiB shared buffer with alpha 1/8 under the built-in training traffic once dropped
    # a packet (headroom one packet short when the dynamic threshold fell under a port's use), and once
    # left a port paused for good (XON was only re-checked when that port's own packets left).
    from cosim import results
    from cosim.cli import main

    out = tmp_path / "r.h5"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--transport", "roce", "--iterations", "1", "--seed", "3", "-q", "-o", str(out),
              "--set", "SharedBufferMmu::BufferBytes=4194304", "--set", "SharedBufferMmu::DynamicThresholdAlpha=0.125"])
    assert exc.value.code == 0
    summary = results.read_results(out)["roce"].summary
    assert summary["status"] == "complete" and summary["switch_drops"] == 0
    assert summary["pause_frames_sent"] > 0
