"""InfiniBand fabric physics: credit-based link-level flow control per virtual lane (no PFC, no drops)."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import engine
from cosim.errors import CosimInputError
from cosim.network import topology
from cosim.network.ideal import ideal_fct_ns
from cosim.network.transport import transport_attributes
from cosim.plan import compile as compile_plan
from cosim.run import run as run_experiment
from cosim.spec import make
from cosim.workload import flows as fl


def preflight(exp):
    """What must hold before ``exp`` simulates: its plan compiles and its fabric takes its attributes."""
    plan = compile_plan(exp)
    engine.check_fabric(plan.fabric, plan.attributes)


IB_HEADER_BYTES = 26  # LRH 8 + BTH 12 + ICRC 4 + VCRC 2
CREDIT_PACKET_BYTES = 8  # FabricNode::CreditPacketBytes default


def ib(**extra: str) -> dict[str, str]:
    return transport_attributes("ib") | extra


def blocks_bytes(wire_bytes: int) -> int:
    """Credit a packet of wire_bytes consumes (64-byte blocks), in bytes."""
    return -(-wire_bytes // 64) * 64


def test_one_flow_with_credits_above_bdp_runs_at_line_rate(engine_ns):
    # Four hops at 100 Gbps and 1 us each: a lane's default reservation alone (128 kB of a 640 kB port
    # buffer) exceeds the credit loop's bandwidth-delay product (~2.3 us x 12.5 GB/s = 29 KB), so credits
    # never run out.
    fabric = topology.leaf_spine(hosts=8, hosts_per_leaf=4, spines=2, host_link_gbps=100.0,
                                 host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    flows = fl.FlowSet.from_arrays([0], [7], 8_000_000)
    out = engine.simulate(fabric, flows, attributes=ib())
    assert out.status == "complete" and out.header_bytes == IB_HEADER_BYTES
    ideal = ideal_fct_ns(fabric, flows.src, flows.dst, flows.size_bytes, mtu_bytes=out.mtu_bytes,
                         header_bytes=out.header_bytes)
    assert ideal[0] / out.finish_ns[0] >= 0.99
    assert out.ports["credit_stall_ps"].sum() == 0 and out.counters["credit_violations"] == 0
    assert out.counters["credit_packets_sent"] > 0 and out.counters["pause_frames_sent"] == 0


@pytest.mark.parametrize("packets_of_credit", [1, 2, 3])
def test_buffer_below_bdp_gives_credits_per_credit_round_trip(engine_ns, packets_of_credit):
    gbps, delay_ns, mtu = 100.0, 1000.0, 4096
    wire = mtu + IB_HEADER_BYTES
    # Each of the two lanes reserves one packet; the data lane borrows the rest of the port's buffer, so it
    # holds packets_of_credit packets once its first arrivals have lent it the pool.
    packet = blocks_bytes(wire)
    attrs = ib(**{"FabricNode::InputBufferBytes": str((packets_of_credit + 1) * packet),
                  "FabricNode::VlReservedBytes": str(packet)})
    fabric = topology.single_switch(hosts=2, link_gbps=gbps, link_delay_ns=delay_ns)
    flows = fl.FlowSet.from_arrays([0], [1], 4_000_000)
    out = engine.simulate(fabric, flows, attributes=attrs, snapshot_ns=(10_000.0, 40_000.0))
    assert out.status == "complete" and out.counters["credit_violations"] == 0
    # The credit loop of a link: a packet's serialization and flight, then its credit update's (the switch
    # forwards at once and frees the lane; the NIC frees on arrival). The sender holds a lane's worth of
    # packets per loop.
    loop_ns = wire * 8 / gbps + delay_ns + CREDIT_PACKET_BYTES * 8 / gbps + delay_ns
    expected_gbps = packets_of_credit * mtu * 8 / loop_ns
    measured_gbps = float(out.delivered_at_bytes[1, 0] - out.delivered_at_bytes[0, 0]) * 8 / 30_000.0
    assert measured_gbps == pytest.approx(expected_gbps, rel=0.05)
    assert out.ports["credit_stall_ps"].sum() > 0  # the sender waited for credits


@pytest.mark.parametrize("n_senders", [2, 4, 8])
def test_incast_is_lossless_and_stalls_upstream_of_the_bottleneck(engine_ns, n_senders):
    fabric = topology.single_switch(hosts=n_senders + 1, link_gbps=100.0, link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=2_000_000)
    port_bytes, reserved_bytes = 128 * 1024, 16 * 1024
    out = engine.simulate(fabric, flows, attributes=ib(**{"FabricNode::InputBufferBytes": str(port_bytes),
                                                          "FabricNode::VlReservedBytes": str(reserved_bytes)}))
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert out.counters["switch_drops"] == 0 and out.ports["drops"].sum() == 0
    # A congested lane borrows from the pool beyond its reservation, but never the other lane's reservation.
    assert out.counters["credit_violations"] == 0
    assert reserved_bytes < out.counters["peak_lane_bytes"] <= port_bytes - reserved_bytes
    # The bottleneck is the switch port to host 0; the senders' NIC ports (upstream) wait for credits.
    ports = out.ports
    sender_ports = np.isin(ports["node"], flows.src)
    assert (ports["credit_stall_ps"][sender_ports] > 0).all()
    stalled_nodes = set(out.logs["stalls"]["node"][out.logs["stalls"]["stalled"] == 1].tolist())
    assert set(flows.src.tolist()) <= stalled_nodes
    # The bottleneck link stays busy: payload rate within 3% of the receiver's line rate.
    payload_gbps = flows.size_bytes.sum() * 8 / np.nanmax(out.finish_ns)
    assert payload_gbps >= 0.97 * 100.0 * 4096 / (4096 + IB_HEADER_BYTES)


def test_a_starved_lane_takes_pool_blocks_back_from_a_busy_one(engine_ns):
    """Lanes reserve one packet each; host 0's hot flow (lane 0, into a 2-to-1 incast) takes the rest of the
    switch's input buffer of host 0's port. Its victim on lane 1 of that port (to an idle host) would get one
    packet per credit loop on its reservation alone; the departures of lane 0's borrowed blocks go to the
    starved lane 1 instead, so the victim runs at several times that, losslessly."""
    gbps, delay_ns, mtu = 100.0, 1000.0, 4096
    wire = mtu + IB_HEADER_BYTES
    packet = blocks_bytes(wire)
    attrs = ib(**{"FabricNode::InputBufferBytes": "262144", "FabricNode::VlReservedBytes": str(packet)})
    fabric = topology.single_switch(hosts=4, link_gbps=gbps, link_delay_ns=delay_ns)
    flows = fl.FlowSet.from_arrays([0, 1, 0], [3, 3, 2], [8_000_000, 8_000_000, 4_000_000], priority=[0, 0, 1])
    out = engine.simulate(fabric, flows, attributes=attrs)
    assert out.status == "complete" and out.counters["switch_drops"] == 0 and out.counters["credit_violations"] == 0
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    loop_ns = wire * 8 / gbps + delay_ns + CREDIT_PACKET_BYTES * 8 / gbps + delay_ns
    reservation_only_gbps = mtu * 8 / loop_ns  # one packet of credit per credit loop
    victim_gbps = flows.size_bytes[2] * 8 / out.finish_ns[2]
    assert victim_gbps > 3 * reservation_only_gbps  # measured 62.8 Gb/s against 14.1


def _victim_fct_ns(fabric_name: str, *, with_incast: bool) -> float:
    # Hosts 0-3 under leaf 1, 4-7 under leaf 2, one spine, 400G fabric links. The victim (3 -> 5) shares
    # the leaf-1 uplink and the spine-to-leaf-2 link with a 3-to-1 incast to host 4, but not its
    # bottleneck (the leaf-2 port to host 4).
    fabric = topology.leaf_spine(hosts=8, hosts_per_leaf=4, spines=1, host_link_gbps=100.0,
                                 fabric_link_gbps=400.0, host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    h = fabric.host_ids
    src = [h[3]] + ([h[0], h[1], h[2]] if with_incast else [])
    dst = [h[5]] + ([h[4]] * 3 if with_incast else [])
    flows = fl.FlowSet.from_arrays(src, dst, 4_000_000)
    attrs = ib() if fabric_name == "ib" else transport_attributes("roce", dcqcn=False) | {
        "SharedBufferMmu::BufferBytes": "2000000", "SharedBufferMmu::LosslessPriorityMask": str(0b1000_0001)}
    out = engine.simulate(fabric, flows, attributes=attrs)
    assert out.status == "complete" and out.counters["switch_drops"] == 0
    if with_incast:
        if fabric_name == "ib":
            assert out.ports["credit_stall_ps"].sum() > 0
        else:
            assert out.counters["pause_frames_sent"] > 0
    return float(out.finish_ns[0])


@pytest.mark.parametrize("fabric_name", ["ib", "roce"])
def test_head_of_line_blocking_slows_a_victim_flow(engine_ns, fabric_name):
    alone = _victim_fct_ns(fabric_name, with_incast=False)
    beside = _victim_fct_ns(fabric_name, with_incast=True)
    # Without head-of-line blocking the victim would keep most of its 100G: the links it shares have
    # 400G. Link-level back-pressure (credits or PFC on the shared lane/priority) stops it with the
    # incast instead, so it runs at about the incast's per-flow share.
    assert beside > 2.0 * alone


def _all_to_all(n_ranks: int, size_bytes: int, **attributes: str):
    """A direct all-to-all of ``size_bytes`` per rank on H100 servers of 8 GPUs, rail-optimized at 400 Gb/s
    with one spine: every rail's trunk to it carries all of the rail's cross-rail traffic."""
    import dataclasses

    from cosim.sweep.collective import OPS, CollectiveSweep, collective_trace, measure

    sweep = CollectiveSweep(op="all_to_all", sizes_bytes=(size_bytes,), n_ranks=n_ranks, algorithm="direct",
                            transports=("ib",))
    exp = sweep.experiment("ib", size_bytes)
    exp = dataclasses.replace(exp, network=dataclasses.replace(exp.network, spines=1, attributes=attributes))
    trace = collective_trace(OPS["all_to_all"], size_bytes, n_ranks)
    record = run_experiment(exp, trace=trace, plan=compile_plan(exp, trace))
    return record, measure(record, sweep, "ib", size_bytes).time_us * 1e3


def test_all_to_all_across_trunks_stays_near_the_nic_line_rate(engine_ns):
    """64 ranks (8 servers) all-to-all 8 MiB each: each rail's 3.2 Tb/s trunk to the spine stands for eight
    400G ports, each with its own input buffer, so credits cover the trunk's round trip and the collective
    runs within 30 % of its NIC-bound time, losslessly; one port's buffer on the whole trunk throttles it."""
    n, size = 64, 8 << 20
    record, time_ns = _all_to_all(n, size)
    flows = record.flows
    np.testing.assert_array_equal(flows["delivered_bytes"], flows["size_bytes"])  # every byte, once
    s = record.summary
    assert s["status"] == "complete" and s["drops"] == 0 and s["switch_drops"] == 0 and s["credit_violations"] == 0
    # The bound: what each NIC sends to the other servers (7 of 8 peers) at the NIC's payload rate.
    payload_rate = 400e9 / 8 * 4096 / (4096 + IB_HEADER_BYTES) / 1e9  # bytes per ns
    bound_ns = size * (n - 8) / n / payload_rate
    assert bound_ns < time_ns <= 1.3 * bound_ns
    # A spine-to-rail trunk lane held more than one physical port's whole buffer: it is eight ports' worth.
    assert s["peak_lane_bytes"] > 640_000
    # Sized as one port, the trunk's credits cover a fraction of its round trip: far slower.
    _, one_port_ns = _all_to_all(n, size, **{"FabricNode::InputBufferPortRate": "100000Gbps"})
    assert one_port_ns > 1.5 * time_ns


def test_ib_runs_are_deterministic(engine_ns):
    """Two IB leaf-spine incasts of one Experiment give identical flows and credit stalls, without PFC or
    drops."""
    exp = make("flows", transport="ib", topology="leaf-spine", hosts=8, hosts_per_leaf=4, spines=2,
               flow_bytes=300_000, pattern="incast")
    a, b = run_experiment(exp), run_experiment(exp)
    np.testing.assert_array_equal(a.flows["finish_ns"], b.flows["finish_ns"])
    np.testing.assert_array_equal(a.stalls["time_ns"], b.stalls["time_ns"])
    assert a.summary["credit_stall_ns"] > 0 and a.summary["pfc_paused_ns"] == 0
    assert a.summary["drops"] == 0 and a.summary["status"] == "complete"


def test_lane_reservation_smaller_than_a_packet_is_rejected_before_running(engine_ns):
    fabric = topology.single_switch(hosts=2, link_gbps=100.0, link_delay_ns=1000.0)
    with pytest.raises(CosimInputError, match="VlReservedBytes"):
        engine.simulate(fabric, fl.FlowSet.from_arrays([0], [1], 1000),
                        attributes=ib(**{"FabricNode::VlReservedBytes": "1024"}))


def test_ib_congestion_control_throttles_an_incast_through_becns(engine_ns):
    fabric = topology.single_switch(hosts=5, link_gbps=100.0, link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=4_000_000)
    plain = engine.simulate(fabric, flows, attributes=transport_attributes("ib"))
    cc = engine.simulate(fabric, flows, attributes=transport_attributes("ib", ib_cc=True))
    for out in (plain, cc):
        assert out.status == "complete" and out.counters["switch_drops"] == 0
        np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    assert plain.counters["ecn_marks"] == 0 and plain.counters["cnps_received"] == 0
    assert cc.counters["ecn_marks"] > 0 and cc.counters["cnps_received"] > 0  # FECN marked, BECN returned
    # Senders that back off leave the credit loops alone: far less time waiting for credits ...
    assert cc.ports["credit_stall_ps"].sum() < 0.1 * plain.ports["credit_stall_ps"].sum()
    # ... while the bottleneck stays well used (CC trades a little throughput for it).
    assert flows.size_bytes.sum() * 8 / np.nanmax(cc.finish_ns) >= 0.85 * 100.0 * 4096 / (4096 + IB_HEADER_BYTES)


def test_cli_ib_cc_switches_congestion_control_on(engine_ns, tmp_path):
    """--ib-cc is stored in the experiment and makes switches mark FECN and receivers return BECNs."""
    from cosim import results
    from cosim.cli import main

    out = tmp_path / "cc.h5"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--pattern", "incast", "--hosts", "5", "--flow-bytes", "2MB", "--transport", "ib", "--ib-cc",
              "-q", "-o", str(out)])
    assert exc.value.code == 0
    run = results.read_results(out)["incast"]
    assert run.config["experiment"]["network"]["ib_cc"] is True
    assert run.summary["ecn_marks"] > 0 and run.summary["cnps_received"] > 0 and run.summary["drops"] == 0


def test_both_fabrics_are_checked_before_either_runs(engine_ns, tmp_path, capsys):
    """preflight rejects an IB lane smaller than a packet (not RoCE), so --transport both stops before any run."""
    from conftest import run_main

    # An IB lane smaller than a packet: the check fails for the ib run without simulating anything ...
    lane = {"attributes.FabricNode::VlReservedBytes": "1024"}
    with pytest.raises(CosimInputError, match="VlReservedBytes"):
        preflight(make("flows", transport="ib", **lane))
    preflight(make("flows", transport="roce", **lane))  # RoCE ignores the lanes
    # ... so `--transport both` stops before its RoCE run, with one line, exit 2 and no file.
    out = tmp_path / "both.h5"
    code, _, err = run_main(["run", "--pattern", "incast", "--transport", "both", "-o", str(out),
                             "--set", "FabricNode::VlReservedBytes=1024"], capsys)
    assert code == 2 and err.count("\n") == 1 and "VlReservedBytes" in err and not out.exists()
