"""Network faults in the co-simulation (cosim.faults, LinkFaultModel): a dead link's flows move to the
survivor at its capacity, a lossy link's goodput follows go-back-N, bytes are conserved, runs are
deterministic, and bad --fault inputs fail in one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim import engine
from cosim import faults as fs
from cosim.faults.context import composed
from cosim.losses import LossCause
from cosim.network import topology
from cosim.network.transport import transport_attributes
from cosim.workload.flows import FlowSet

LINK_GBPS = 100.0
DELAY_NS = 1000.0
MTU, HEADER = 4096, 82
CONVERGENCE_NS = 10_000.0


def two_spines():
    """Two leaves of 4 NICs at 100 Gbps, two spines, one 100 Gbps link per leaf-spine pair: a leaf's
    uplinks carry 200 Gbps, half its NICs' 400."""
    return topology.leaf_spine(hosts=8, hosts_per_leaf=4, spines=2, oversubscription=2.0,
                               host_link_gbps=LINK_GBPS, fabric_link_gbps=LINK_GBPS,
                               host_link_delay_ns=DELAY_NS, fabric_link_delay_ns=DELAY_NS)


def cross_flows(size_bytes: int) -> FlowSet:
    """host i -> host i + 4: all four NICs of leaf0 send to leaf1."""
    src = np.arange(4, dtype=np.int32)
    return FlowSet(src=src, dst=src + 4, size_bytes=np.full(4, size_bytes, np.int64),
                   start_ns=np.zeros(4), priority=np.zeros(4, np.uint8))


def simulate_with(fabric, flows, faults, transport="roce", *, seed=1, **attributes):
    """Simulate ``flows`` with ``faults`` (Fault specs) scheduled; return (output, FaultPlan)."""
    stop_ns = 1e8
    plan = fs.FaultPlan(resolved=fs.resolve(faults, fabric, max_sim_time_ns=stop_ns), fabric=fabric, seed=seed,
                        stop_ps=int(stop_ns * 1e3))
    attrs = transport_attributes(transport) | {"LinkFaultModel::RouteConvergenceDelay": f"{CONVERGENCE_NS:g}ns",
                                               "HostNic::RetransmitTimeout": "100us"} | attributes
    out = engine.simulate(fabric, flows, seed=seed, attributes=attrs, max_sim_time_ns=stop_ns, setup=plan.setup)
    return out, plan


def losses_by_cause(out, node=None) -> dict[str, int]:
    """Rows of the engine's losses log per cause name (LossCause), at ``node`` if given."""
    log = out.logs["losses"]
    keep = np.ones(log["cause"].size, bool) if node is None else np.isin(log["node"], node)
    codes, counts = np.unique(log["cause"][keep], return_counts=True)
    return {LossCause(c).name.lower(): int(n) for c, n in zip(codes, counts)}


def wire_bytes(payload: int) -> int:
    packets = -(-payload // MTU)
    return payload + packets * HEADER


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_a_dead_uplink_halves_the_leaf_capacity_and_the_flows_finish_on_the_survivor(engine_ns, transport):
    """leaf0-spine1 dies at t = 0: after RouteConvergenceDelay every flow crosses spine0, so the 4 x 1 MiB
    leave leaf0 at 100 Gbps instead of 200. Every byte is delivered exactly once, and the last one arrives
    no earlier than the survivor's analytic time, T = (bytes on the wire + go-back-N's recovery) / 100 Gbps,
    and no later than T plus the convergence delay plus 3% (path latency). The recovery is what RoCE resent
    over the survivor beyond the packets lost on the dead link: packets sent after a loss before its NAK
    came back, discarded by the receiver (IB loses nothing: none)."""
    fabric = two_spines()
    flows = cross_flows(1 << 20)
    fault = fs.Fault(kind="link_down", element="leaf0-spine1", at_ns=0.0)
    out, plan = simulate_with(fabric, flows, [fault], transport)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    c = out.counters
    discarded = c["retransmitted_packets"] - c["fault_drops"]
    assert discarded >= 0
    analytic_ns = (4 * wire_bytes(1 << 20) + discarded * (MTU + HEADER)) * 8 / LINK_GBPS
    finish = float(np.max(out.finish_ns))
    assert analytic_ns * (1 - 1e-9) <= finish <= (analytic_ns + CONVERGENCE_NS) * 1.03, (finish, analytic_ns)
    assert discarded * (MTU + HEADER) < 0.15 * 4 * wire_bytes(1 << 20)  # recovery stays a small part
    # the dead uplink carried at most what leaf0 routed to it before the routes converged: its queue then
    # and what it sent meanwhile
    leaf0, spine1 = 8, 11
    dead = (out.ports["node"] == leaf0) & (out.ports["peer"] == spine1)
    bound = CONVERGENCE_NS * LINK_GBPS / 8 + int(out.ports["peak_queue_bytes"][dead].sum()) + MTU + HEADER
    assert int(out.ports["tx_bytes"][dead].sum()) <= bound
    clean = engine.simulate(fabric, flows, attributes=transport_attributes(transport), max_sim_time_ns=1e8)
    assert float(np.max(clean.finish_ns)) < finish
    table = fs.faults_table(plan.resolved, out.fault_actions, plan.log)
    actions = [fs.ACTIONS[a] for a in table["action"]]
    assert actions[0] == "down" and "reroute" in actions
    assert out.counters["reroutes"] >= 1
    if transport == "roce":
        assert out.counters["retransmitted_packets"] > 0 or out.counters["fault_drops"] == 0
    else:
        assert out.counters["fault_drops"] == 0 and out.counters["retransmitted_packets"] == 0
    # the losses log holds each counted packet once, where and when it happened: lost at leaf0's port to
    # the dead spine until the queue it had before the routes converged is gone, resent and timed out at
    # the senders' NICs
    log = out.logs["losses"]
    expected = {"link_down": c["fault_drops"], "retransmitted": c["retransmitted_packets"], "timeout": c["timeouts"]}
    assert losses_by_cause(out) == {k: v for k, v in expected.items() if v}
    down = log["cause"] == LossCause.LINK_DOWN
    dead_port = out.ports["port"][dead]
    assert np.all(log["node"][down] == leaf0) and np.all(np.isin(log["port"][down], dead_port))
    drain_ns = (int(out.ports["peak_queue_bytes"][dead].sum()) + MTU + HEADER) * 8 / LINK_GBPS
    assert np.all(log["time_ns"][down] <= CONVERGENCE_NS + drain_ns + DELAY_NS)  # what it queued went on dying
    assert np.all(log["node"][~down] < 4) and np.all(log["port"][~down] == 0)


def _one_flow_over_a_lossy_link(size_bytes: int, bit_error_rate: float):
    """(fabric, one flow host 0 → host 1 of ``size_bytes``, the fault giving the sender's link that BER)."""
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    flows = FlowSet(src=np.array([0], np.int32), dst=np.array([1], np.int32),
                    size_bytes=np.array([size_bytes], np.int64), start_ns=np.zeros(1), priority=np.zeros(1, np.uint8))
    fault = fs.Fault(kind="link_degrade", element="host0-switch0", at_ns=0.0,
                     params=(("bit_error_rate", bit_error_rate),))
    return fabric, flows, fault


def test_a_lossy_link_delivers_the_go_back_n_goodput(engine_ns):
    """A bit-error rate on the sender's link loses a packet of b wire bits with p = 1 − (1 − BER)^b; each
    loss makes go-back-N resend the lost packet and the N packets sent before its NAK came back, so the
    goodput is C · (1 − p) / (1 + p·N) (docs/models/faults.md), N = round-trip / packet time. The realized
    loss rate is within 5 sigma of p, and the goodput within 5% of the formula at the realized rate."""
    size, ber = 16 << 20, 3e-7
    fabric, flows, fault = _one_flow_over_a_lossy_link(size, ber)
    out, _ = simulate_with(fabric, flows, [fault])
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    packet_bits = (MTU + HEADER) * 8
    p = 1 - (1 - ber) ** packet_bits
    host_port = (out.ports["node"] == 0)
    sent = int(out.ports["tx_packets"][host_port].sum()) - 0  # data packets dominate (ACKs go the other way)
    drops = out.counters["ber_drops"]
    assert abs(drops - p * sent) <= 5 * math.sqrt(p * (1 - p) * sent) + 1
    assert losses_by_cause(out, node=0) == {"bit_error": drops, "retransmitted": out.counters["retransmitted_packets"]}
    p_hat = drops / sent
    packet_ns = packet_bits / LINK_GBPS
    # a lost packet is noticed when the next one arrives (one packet later, two store-and-forward hops and
    # two propagation delays), and the NAK needs two more propagation delays back
    rtt_ns = packet_ns + 2 * packet_ns + 2 * DELAY_NS + 2 * DELAY_NS
    n = rtt_ns / packet_ns
    payload_rate = LINK_GBPS * MTU / (MTU + HEADER)
    expected = payload_rate * (1 - p_hat) / (1 + p_hat * n)
    goodput = size * 8 / float(out.finish_ns[0])
    assert goodput == pytest.approx(expected, rel=0.05), (goodput, expected, p_hat, n)


def test_a_lossy_credit_link_resends_and_loses_nothing(engine_ns):
    """InfiniBand: a bit-error rate on the sender's link makes the link resend each corrupted packet (as
    many as go-back-N would lose: within 5 sigma of p · packets) and loses nothing; each resend takes the
    link for the packet's serialization (the sender's link is the flow's bottleneck, so the finish moves by
    at least that) and holds the wire for at most a NAK round trip and that serialization."""
    size, ber = 8 << 20, 3e-7
    fabric, flows, fault = _one_flow_over_a_lossy_link(size, ber)
    out, _ = simulate_with(fabric, flows, [fault], "ib")
    clean = engine.simulate(fabric, flows, attributes=transport_attributes("ib"), max_sim_time_ns=1e8)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    c = out.counters
    assert c["ber_drops"] == c["fault_drops"] == c["retransmitted_packets"] == 0
    packets = -(-size // MTU)
    p = 1 - (1 - ber) ** ((MTU + HEADER) * 8)
    resent = c["link_retransmissions"]
    assert losses_by_cause(out) == {"link_retransmitted": resent}
    assert abs(resent - p * packets) <= 5 * math.sqrt(p * (1 - p) * packets) + 1
    serialization_ns = (MTU + HEADER) * 8 / LINK_GBPS
    per_resend_ns = 2 * DELAY_NS + serialization_ns
    assert clean.finish_ns[0] + resent * serialization_ns <= out.finish_ns[0]
    assert out.finish_ns[0] <= clean.finish_ns[0] + resent * per_resend_ns


def test_bytes_are_conserved_through_flaps_and_a_switch_outage(engine_ns):
    """A flapping uplink and a spine that dies and comes back: every byte of every flow arrives exactly
    once on both transports; the faults table logs each down with its up."""
    fabric = two_spines()
    flows = cross_flows(512 << 10)
    faults = [fs.Fault(kind="link_flap", element="leaf1-spine0", at_ns=5_000.0, duration_ns=100_000.0,
                       params=(("period_ns", 20_000.0),)),
              fs.Fault(kind="switch_down", element="spine1", at_ns=30_000.0, duration_ns=40_000.0)]
    for transport in ("roce", "ib"):
        out, plan = simulate_with(fabric, flows, faults, transport)
        assert out.status == "complete", transport
        np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
        table = fs.faults_table(plan.resolved, out.fault_actions, plan.log)
        downs = np.count_nonzero(table["action"] == fs.ACTION_CODES["down"])
        ups = np.count_nonzero(table["action"] == fs.ACTION_CODES["up"])
        assert downs == ups == 5 + 2  # 5 flaps, and spine1's two links


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_a_link_is_down_while_any_of_its_faults_holds_it(engine_ns, transport):
    """A 1 us link_down nested in a 300 us one, and a link_down of one of spine0's links nested in spine0's
    outage, change nothing: the link comes back when the LAST fault holding it ends, so every flow finishes
    exactly as under the outer outages alone (the nested faults add no transition)."""
    fabric = two_spines()
    flows = cross_flows(256 << 10)
    outer = [fs.Fault(kind="link_down", element="leaf0-spine1", at_ns=10_000.0, duration_ns=300_000.0),
             fs.Fault(kind="switch_down", element="spine0", at_ns=15_000.0, duration_ns=200_000.0)]
    nested = [fs.Fault(kind="link_down", element="leaf0-spine1", at_ns=20_000.0, duration_ns=1_000.0),
              fs.Fault(kind="link_down", element="leaf1-spine0", at_ns=15_000.0, duration_ns=50_000.0)]
    alone, _ = simulate_with(fabric, flows, outer, transport)
    both, plan = simulate_with(fabric, flows, outer + nested, transport)
    assert alone.status == both.status == "complete"
    np.testing.assert_array_equal(both.finish_ns, alone.finish_ns)
    np.testing.assert_array_equal(both.delivered_bytes, flows.size_bytes)
    assert both.finish_ns.min() > 215_000.0  # leaf0 had no uplink until spine0 came back


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(1, 30)), min_size=1, max_size=12))
def test_composed_link_state_is_the_union_of_its_faults(intervals):
    """Whatever the overlaps, a link's composed transitions make it down exactly on the union of its faults'
    [start, end) intervals, with strictly alternating down and up transitions."""
    changes = []
    for fault, (link, start, length) in enumerate(intervals):
        changes += [(link, start, True, fault), (link, start + length, None, fault)]
    rows = composed(changes, lambda held: True)
    for link in {li for li, *_ in intervals}:
        mine = [(t, value) for li, t, value, _ in rows if li == link]
        assert [v is None for _, v in mine] == [i % 2 == 1 for i in range(len(mine))]
        down = np.zeros(100, bool)
        for (t0, _), (t1, _) in zip(mine[::2], mine[1::2]):
            down[t0:t1] = True
        union = np.zeros(100, bool)
        for li, start, length in intervals:
            if li == link:
                union[start:start + length] = True
        np.testing.assert_array_equal(down, union)


def test_composed_rate_is_the_lowest_of_the_active_degrades():
    """Two overlapping link_degrade rates: the lower holds while both are active, the other before and after
    it, the original (None) when neither is."""
    changes = [(0, 0, 50e9, 0), (0, 100, None, 0), (0, 20, 10e9, 1), (0, 60, None, 1)]
    assert composed(changes, min) == [(0, 0, 50e9, 0), (0, 20, 10e9, 1), (0, 60, 50e9, 1), (0, 100, None, 0)]


def test_a_random_fault_process_is_deterministic_end_to_end(engine_ns):
    """A seeded Poisson process of link failures through the Experiment: the same seed gives the same
    faults table and results bit for bit; another process seed other faults."""
    from cosim import run
    from cosim import spec as experiment

    def make(seed):
        process = {"kind": "link_down", "element": "fabric-links", "at_ns": 0.0, "rate_per_s": 4e4,
                   "until_ns": 2e5, "duration_ns": 2e4, "seed": seed}
        return experiment.make("flows", topology="leaf-spine", hosts=8, pattern="permutation",
                               flow_bytes=1 << 20, faults=[process], max_sim_time_ns=1e8)

    a, b = run.run(make(3)), run.run(make(3))
    assert a.faults["time_ns"].size > 0
    for name in a.faults:
        np.testing.assert_array_equal(a.faults[name], b.faults[name])
    for name in ("finish_ns", "delivered_bytes"):
        np.testing.assert_array_equal(a.flows[name], b.flows[name])
    assert a.config["faults"] == b.config["faults"]
    assert a.config["faults"] != run.run(make(4)).config["faults"]


def test_baseline_runs_store_both_and_the_delay(engine_ns, tmp_path):
    """--baseline: the faulted run and NAME-baseline are both written; the faulted one holds its delay
    against the baseline, and a results file without faults reads back without a faults table."""
    from cosim import results, run
    from cosim import spec as experiment

    exp = experiment.make("flows", topology="leaf-spine", hosts=8, flow_bytes=1 << 20, pattern="permutation",
                          faults=[fs.parse_fault_option("link_down:leaf0-spine1@10us")], baseline=True)
    records = run.run_with_baseline(exp)
    assert [r.name for r in records] == ["permutation", "permutation-baseline"]
    assert not records[1].faults and records[0].faults
    assert records[0].summary["completion_delay_ns"] >= 0
    path = tmp_path / "r.h5"
    results.write_results(path, records)
    back = results.read_results(path)
    np.testing.assert_array_equal(back["permutation"].faults["action"], records[0].faults["action"])
    assert back["permutation-baseline"].faults == {}


@pytest.mark.parametrize("fault, message", [
    ("link_dwn:leaf0-spine1@1us", "unknown fault kind 'link_dwn'"),
    ("link_down:leaf0-spine9@1us", "no link named 'leaf0-spine9'"),
    ("nic_down:spine0@1us", "'spine0' is a switch"),
    ("link_down:leaf0-spine1@5s", "is not before the run ends"),
    ("link_down:leaf0-spine1", "is not KIND:ELEMENT@TIME"),
    ("link_degrade:leaf0-spine1@0", "needs rate_gbps or bit_error_rate"),
    ("link_down:leaf0-spine1@0,colour=red", "not a parameter of link_down"),
    ("straggler_typo:rank1@0", "unknown fault kind"),
])
def test_bad_fault_options_exit_2_with_one_line(fault, message):
    """A bad --fault names the field and the fix, on one line, exit code 2, no traceback."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "cosim", "run", "--pattern", "permutation", "--topology",
                          "leaf-spine", "--fault", fault, "--dry-run"], capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], res.stderr


def test_a_slow_nic_link_delays_every_ring_iteration_against_the_baseline(engine_ns):
    """A training run (a 4-rank ring all-reduce of 8 MiB, 3 iterations) whose rank-1 NIC link runs at half
    rate from the start: every iteration takes longer than the fault-free baseline's, by at most the
    doubled transfer time (the ring moves at the pace of its slowest link); the delay per iteration, its
    max and the baseline's iteration time are in the summary, and the faults table logs the degradation."""
    from test_cosim_roce import ring_allreduce_trace

    from cosim import run
    from cosim import spec as experiment

    exp = experiment.make("training", topology="leaf-spine", gpus_per_server=1, hosts_per_leaf=2,
                          link_gbps=LINK_GBPS, iterations=3, chunk_bytes=1 << 20, algorithm="ring",
                          faults=[{"kind": "link_degrade", "element": "host1-leaf0", "at_ns": 0.0,
                                   "rate_gbps": LINK_GBPS / 2}], baseline=True)
    faulted, base = run.run_with_baseline(exp, trace=ring_allreduce_trace(4, 8 << 20))
    s = faulted.summary
    assert s["status"] == base.summary["status"] == "complete"
    delay = s["iteration_delay_ns"]
    assert len(delay) == 3 and s["iteration_delay_max_ns"] == max(delay)
    base_times = base.iterations["time_ns"]
    for d, t in zip(delay, base_times):
        assert 0.3 * t < d <= 1.05 * t, (d, t)
    assert s["baseline_iteration_time_ns"] == base.summary["iteration_time_ns"]
    assert fs.ACTIONS[int(faulted.faults["action"][0])] == "degrade"


@pytest.mark.parametrize("kind, element, links, nodes", [
    ("link_down", "leaf0-spine1", "leaf0-spine1", []),
    ("link_down", "spine1-leaf0", "leaf0-spine1", []),
    ("switch_down", "spine0", "leaf0-spine0 leaf1-spine0", ["spine0"]),
    ("nic_down", "host5", "host5-leaf1", ["host5"]),
    ("nic_down", "rank2", "host5-leaf1", ["host5"]),  # ranks placed in reverse: rank r on host 7 - r
    ("link_down", "host2-leaf0", "host2-leaf0", []),
])
def test_elements_resolve_to_the_links_and_nodes_named(kind, element, links, nodes):
    """Element names (cosim.network.names) resolve to the fabric's link and node ids, either end first."""
    fabric = two_spines()
    el = fs.elements_of(fabric, host_of=[7, 6, 5, 4, 3, 2, 1, 0])
    (r,) = fs.resolve([fs.Fault(kind=kind, element=element)], fabric, max_sim_time_ns=1e6,
                      host_of=[7, 6, 5, 4, 3, 2, 1, 0])
    assert sorted(el.link_names[i] for i in r.links) == sorted(links.split())
    assert [el.node_names[i] for i in r.nodes] == nodes


def test_a_process_draws_its_elements_from_its_set_or_pattern():
    """A Poisson process over ``fabric-links`` or ``leaf1-*`` only picks matching elements, expected count
    rate x window, and the same seed gives the same draws."""
    fabric = two_spines()
    fault = fs.Fault(kind="link_down", element="fabric-links", rate_per_s=1e6, until_ns=1e5, seed=5)
    drawn = fs.resolve([fault], fabric, max_sim_time_ns=1e6)
    names = fs.elements_of(fabric).link_names
    assert 50 <= len(drawn) <= 150 and all(names[r.links[0]].startswith("leaf") for r in drawn)
    assert [r.at_ps for r in drawn] == [r.at_ps for r in fs.resolve([fault], fabric, max_sim_time_ns=1e6)]
    host_side = fs.Fault(kind="link_down", element="host*-leaf1", rate_per_s=1e6, until_ns=1e5, seed=5)
    assert all(names[r.links[0]].endswith("leaf1") for r in fs.resolve([host_side], fabric, max_sim_time_ns=1e6))


def test_fault_figures_render_with_and_without_a_baseline(engine_ns):
    """The fault plots of a training run with a baseline: iteration time around the fault (both runs) and
    queues with fault markers render; runs without faults get no fault figures."""
    from test_cosim_roce import ring_allreduce_trace

    from cosim import run
    from cosim import spec as experiment
    from cosim.analysis import plots

    exp = experiment.make("training", topology="leaf-spine", gpus_per_server=1, hosts_per_leaf=2, iterations=2,
                          chunk_bytes=1 << 20, faults=[{"kind": "link_down", "element": "leaf0-spine0",
                                                        "at_ns": 5000.0, "duration_ns": 50000.0}], baseline=True)
    faulted, base = run.run_with_baseline(exp, trace=ring_allreduce_trace(4, 4 << 20))
    figures = {f.stem: f for f in plots.iter_figures({faulted.name: faulted, base.name: base})}
    assert plots.render(figures[f"iteration-faults-{faulted.name}"].figure)[:4] == b"\x89PNG"
    assert figures[f"queues-faults-{faulted.name}"].figure is not None
    assert not faulted.losses and len(figures[f"neighbours-faults-{faulted.name}"].figure.axes) == 2  # lost none
    assert not any(s.startswith("iteration-faults") and s.endswith("baseline") for s in figures)


def test_the_neighbours_figure_draws_the_packets_lost_and_resent_over_time(engine_ns, tmp_path, capsys):
    """A link dies under a permutation: the results hold every lost and resent packet with its time (the
    losses table, one row each, as many as the run's counters), and the neighbours figure draws them per
    time bin below the flows, one line per cause with its total."""
    from conftest import run_main

    from cosim.analysis import plots
    from cosim.results.store import read_results

    out = tmp_path / "lossy.h5"
    code, _, err = run_main(["run", "--pattern", "permutation", "--topology", "leaf-spine", "--hosts", "8",
                             "--flow-bytes", "256KiB", "--fault", "link_down:leaf0-spine0@10us,duration_ns=1ms",
                             "-o", str(out), "-q"], capsys)
    assert code == 0, err
    (rec,) = read_results(out).values()
    s, losses = rec.summary, rec.losses
    codes, counts = np.unique(losses["cause"], return_counts=True)
    assert dict(zip(codes.tolist(), counts.tolist())) == {
        LossCause.LINK_DOWN: s["fault_drops"], LossCause.RETRANSMITTED: s["retransmitted_packets"],
        LossCause.TIMEOUT: s["timeouts"]}
    figure = {f.stem: f for f in plots.iter_figures({rec.name: rec})}[f"neighbours-faults-{rec.name}"].figure
    labels = [t.get_text() for t in figure.axes[2].get_legend().get_texts()]
    assert labels == [f"link down ({s['fault_drops']:,})", f"retransmitted ({s['retransmitted_packets']:,})",
                      f"timeout ({s['timeouts']:,})"]
