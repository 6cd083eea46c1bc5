"""Fault mechanisms against their physics: a PFC pause storm stalls the traffic behind the storming NIC
for the storm's length, the PFC watchdog bounds that stall by its detection time and go-back-N recovers
what it dropped; a straggler of factor f stretches a synchronous data-parallel step by (f − 1) × its
compute; the collective timeout fails the job exactly its timeout after the collective started. Same
inputs, same results."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main
from test_cosim_roce import make_trace

from cosim import engine
from cosim import faults as fault_specs
from cosim.collectives.dag import DagOpKind
from cosim.errors import CosimInputError
from cosim.faults.kinds.straggler import Straggler, draw_factors, slowed_durations
from cosim.network import topology
from cosim.network.transport import transport_attributes
from cosim.run import run as run_experiment
from cosim.spec import make
from cosim.workload import flows as fl
from cosim.workload.trace import CollKind, OpKind, Phase

MIB = 1 << 20
LINK_DELAY_NS = 1000.0
STORM_START_NS, STORM_NS = 100e3, 1e6
DETECTION_NS, RESTORATION_NS = 100e3, 200e3
GRID_NS = 5e3  # delivered bytes are sampled this often to find a flow's longest stall
PAUSE_FRAME_NS = 84 * 8 / 100.0  # one PAUSE frame at 100 Gbit/s


def storm_run(watchdog: bool, seed: int = 1):
    """Four hosts on one switch, no DCQCN, a 2 MB buffer: host 0 sends 4 MB to host 3 (into the storm) and
    10 MB to host 1 (the victim); host 3 pauses priority 0 from 100 us for 1 ms."""
    fabric = topology.single_switch(hosts=4, link_gbps=100.0, link_delay_ns=LINK_DELAY_NS)
    h = fabric.host_ids
    flows = fl.FlowSet.from_arrays([h[0], h[0]], [h[3], h[1]], [4_000_000, 10_000_000])
    storms = engine.PauseStorms(host=np.array([h[3]]), priority=np.array([0]), start_ns=np.array([STORM_START_NS]),
                                duration_ns=np.array([STORM_NS]))
    attributes = transport_attributes("roce", dcqcn=False) | {"SharedBufferMmu::BufferBytes": "2000000",
                                                              "HostNic::RetransmitTimeout": "100us"}
    if watchdog:
        attributes |= {"PfcWatchdog::Enabled": "true", "PfcWatchdog::DetectionTime": f"{DETECTION_NS:g}ns",
                       "PfcWatchdog::RestorationTime": f"{RESTORATION_NS:g}ns"}
    grid = np.arange(0.0, 4e6, GRID_NS)
    out = engine.simulate(fabric, flows, seed=seed, attributes=attributes, snapshot_ns=grid, max_sim_time_ns=20e6,
                          setup=lambda eng, _: engine.add_pause_storms(eng, storms))
    return fabric, flows, out


def longest_stall_ns(out, flow: int) -> float:
    """Longest stretch of the snapshot grid in which ``flow`` delivered nothing before it finished."""
    moved = np.diff(out.delivered_at_bytes[:, flow]) > 0
    before_finish = out.snapshot_ns[1:] <= out.finish_ns[flow]
    longest = run = 0
    for m in moved[before_finish]:
        run = 0 if m else run + 1
        longest = max(longest, run)
    return longest * GRID_NS


def test_pause_storm_stalls_the_victim_for_the_storm(engine_ns):
    """Without the watchdog the storming NIC's switch port stays paused, its queue fills the buffer, the
    switch pauses host 0, and host 0's flow to host 1, which never crosses the storm, stalls for nearly
    the whole storm (less the time the buffer took to fill). Nothing is lost: the fabric stays lossless."""
    _, flows, out = storm_run(watchdog=False)
    assert out.status == "complete"
    assert 0.9 * STORM_NS <= longest_stall_ns(out, 1) <= STORM_NS
    assert out.counters["pause_storm_frames_sent"] > 0 and out.counters["pfc_watchdog_actions"] == 0
    assert out.counters["retransmitted_packets"] == 0 and out.logs["pfc_watchdog"]["time_ns"].size == 0
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)


def test_pfc_watchdog_bounds_the_stall_by_its_detection_time(engine_ns):
    """With the watchdog the queue towards the storming NIC is disabled DetectionTime after the pause
    reached the switch (first frame's serialization + propagation), its packets dropped, its buffer freed:
    the victim stalls no longer than DetectionTime (plus a sampling step). The queue is restored
    RestorationTime after the last ignored PAUSE frame, after the storm ended; go-back-N resends what was
    dropped and every byte arrives."""
    fabric, flows, out = storm_run(watchdog=True)
    assert out.status == "complete"
    assert longest_stall_ns(out, 1) <= DETECTION_NS + GRID_NS
    wd = out.logs["pfc_watchdog"]
    switch = int(np.flatnonzero(fabric.node_kind == topology.SWITCH)[0])
    assert wd["disabled"].tolist() == [1, 0] and set(wd["node"].tolist()) == {switch}
    assert wd["priority"].tolist() == [0, 0]
    assert wd["time_ns"][0] == pytest.approx(STORM_START_NS + PAUSE_FRAME_NS + LINK_DELAY_NS + DETECTION_NS, abs=1e-3)
    storm_end_ns = STORM_START_NS + STORM_NS
    assert storm_end_ns <= wd["time_ns"][1] <= storm_end_ns + RESTORATION_NS + LINK_DELAY_NS
    c = out.counters
    assert c["pfc_watchdog_actions"] == 2 and c["pfc_watchdog_dropped_packets"] > 0
    assert c["retransmitted_packets"] >= c["pfc_watchdog_dropped_packets"]
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    rows = fault_specs.watchdog_rows(fabric, wd)
    links = {link for _, _, _, link, _ in rows}
    host3_link = int(np.flatnonzero((fabric.link_a == fabric.host_ids[3]) | (fabric.link_b == fabric.host_ids[3]))[0])
    assert links == {host3_link}


def test_fault_runs_are_deterministic(engine_ns):
    """The same storm with the watchdog twice: every flow, counter and watchdog action identical."""
    _, _, a = storm_run(watchdog=True)
    _, _, b = storm_run(watchdog=True)
    np.testing.assert_array_equal(a.finish_ns, b.finish_ns)
    assert a.counters == b.counters and a.events == b.events
    for k in a.logs["pfc_watchdog"]:
        np.testing.assert_array_equal(a.logs["pfc_watchdog"][k], b.logs["pfc_watchdog"][k])


def test_watchdog_leaves_ordinary_congestion_alone(engine_ns):
    """A 3-to-1 incast pauses switch ports again and again; with the watchdog on at its default detection
    time (200 ms) nothing is disabled and every flow finishes exactly as without it."""
    fabric = topology.single_switch(hosts=4, link_gbps=100.0, link_delay_ns=LINK_DELAY_NS)
    flows = fl.incast(fabric.host_ids, size_bytes=2_000_000)
    attributes = transport_attributes("roce", dcqcn=False) | {"SharedBufferMmu::BufferBytes": "2000000"}
    off = engine.simulate(fabric, flows, attributes=attributes)
    on = engine.simulate(fabric, flows, attributes=attributes | {"PfcWatchdog::Enabled": "true"})
    assert off.logs["pauses"]["paused"].sum() > 0 and on.status == off.status == "complete"
    assert on.counters["pfc_watchdog_actions"] == 0
    np.testing.assert_array_equal(on.finish_ns, off.finish_ns)


def test_pause_storm_is_refused_on_infiniband(engine_ns, capsys, tmp_path):
    """Credit links have no PAUSE frames: the engine, the Experiment and the CLI refuse a storm on IB in
    one line."""
    fabric = topology.single_switch(hosts=2, link_gbps=100.0, link_delay_ns=LINK_DELAY_NS)
    flows = fl.FlowSet.from_arrays([fabric.host_ids[0]], [fabric.host_ids[1]], [1000])
    storms = engine.PauseStorms(host=fabric.host_ids[:1], priority=np.zeros(1), start_ns=np.zeros(1),
                                duration_ns=np.full(1, 1e3))
    with pytest.raises(CosimInputError, match="PFC"):
        engine.simulate(fabric, flows, attributes=transport_attributes("ib"),
                        setup=lambda eng, _: engine.add_pause_storms(eng, storms))
    with pytest.raises(CosimInputError, match="needs PFC"):
        make("flows", transport="ib", faults=[{"kind": "pause_storm", "element": "host1", "at_ns": 0}])
    code, out, err = run_main(["run", "--transport", "ib", "--fault", "pause_storm:host1@0", "-o",
                               str(tmp_path / "never.h5")], capsys)
    assert code == 2 and err.startswith("Error: ") and len(err.splitlines()) == 1 and "needs PFC" in err
    assert not (tmp_path / "never.h5").exists()


def test_pause_storm_fault_runs_from_an_experiment(engine_ns, tmp_path, capsys):
    """``--fault pause_storm:host0@...`` on an incast to host 0 with ``--pfc-watchdog``: the faults table
    has the storm's start and end and the watchdog's disable and restore (fault −1, on the switch), the
    pfc_watchdog table its priority, and every flow completes."""
    out = tmp_path / "storm.h5"
    args = ["run", "--pattern", "incast", "--hosts", "4", "--flow-bytes", "4MB", "--no-dcqcn", "--pfc-watchdog",
            "--set", "PfcWatchdog::DetectionTime=50us", "--set", "PfcWatchdog::RestorationTime=200us",
            "--set", "HostNic::RetransmitTimeout=100us", "--set", "SharedBufferMmu::BufferBytes=2000000",
            "--fault", "pause_storm:host0@20us,duration_ns=500us", "-q", "-o", str(out)]
    code, _, err = run_main(args, capsys)
    assert code in (0, None), err
    from cosim.results import read_results  # noqa: PLC0415

    (rec,) = read_results(out).values()
    actions = [fault_specs.ACTIONS[a] for a in rec.faults["action"]]
    assert actions == ["storm_start", "queue_disabled", "storm_end", "queue_restored"]
    assert rec.faults["fault"].tolist() == [0, -1, 0, -1] and rec.faults["kind"].tolist() == [6, -1, 6, -1]
    assert rec.faults["time_ns"][0] == 20e3 and rec.faults["time_ns"][2] == 520e3
    assert rec.pfc_watchdog["disabled"].tolist() == [1, 0]
    assert rec.summary["status"] == "complete" and rec.summary["pfc_watchdog_dropped_packets"] > 0


# ---------------------------------------------------------------- stragglers and the collective timeout

COMPUTE_NS = 200_000


def dp_step_trace(n: int = 4, compute_ns: int = COMPUTE_NS, grad_bytes: int = 4 * MIB):
    """A synchronous data-parallel step: every rank computes, then all-reduces its gradients with all."""
    ops, deps = [], []
    for r in range(n):
        ops.append(dict(rank=r, kind=OpKind.COMPUTE, phase=Phase.BACKWARD, duration_ns=compute_ns))
        deps.append([])
        ops.append(dict(rank=r, kind=OpKind.COLLECTIVE, phase=Phase.GRAD_SYNC, bytes=grad_bytes,
                        coll_kind=CollKind.ALL_REDUCE, group=0, coll_id=0))
        deps.append([len(ops) - 2])
    return make_trace(n, ops, deps, groups=[list(range(n))])


def dp_run(faults=(), **fields):
    """The DP step twice on four servers of one GPU behind one switch, RoCE without DCQCN (the all-reduce
    then takes the same time whenever it starts)."""
    exp = make("training", transport="roce", topology="single-switch", gpus_per_server=1, dcqcn=False,
               iterations=2, algorithm="ring", faults=list(faults), **fields)
    return run_experiment(exp, trace=dp_step_trace())


@pytest.mark.parametrize("factor", [1.5, 3.0])
def test_fixed_straggler_stretches_the_step_by_its_extra_compute(engine_ns, factor):
    """The all-reduce starts when its last member is ready: every iteration takes (f − 1) × compute longer,
    to the picosecond, and the faults table records the slowed rank's NIC."""
    base = dp_run()
    slow = dp_run([{"kind": "straggler", "element": "rank1", "factor": factor}])
    np.testing.assert_allclose(slow.iterations["time_ns"] - base.iterations["time_ns"], (factor - 1) * COMPUTE_NS,
                               atol=1e-3)
    coll_ns = lambda r: r.collectives["finish_ns"] - r.collectives["start_ns"]  # noqa: E731
    np.testing.assert_allclose(coll_ns(slow), coll_ns(base), atol=1e-3)
    assert [fault_specs.ACTIONS[a] for a in slow.faults["action"]] == ["slowed"]
    assert slow.faults["kind"].tolist() == [7] and slow.faults["time_ns"].tolist() == [0.0]


def test_lognormal_straggler_draws_per_iteration(engine_ns):
    """Lognormal factors, one per iteration, seeded by the run: the step of iteration i is
    (F_i − 1) × compute longer, with F_i the draws of cosim.faults.kinds.straggler; the same seed draws the same."""
    fault = {"kind": "straggler", "element": "rank2", "factor": 2.0, "distribution": "lognormal", "sigma": 0.5}
    base = dp_run(seed=7)
    slow = dp_run([fault], seed=7)
    draws = draw_factors(Straggler(rank=2, factor=2.0, distribution="lognormal", sigma=0.5, index=0), 2, seed=7)
    np.testing.assert_allclose(slow.iterations["time_ns"] - base.iterations["time_ns"],
                               (draws - 1) * COMPUTE_NS, atol=1e-3)
    again = dp_run([fault], seed=7)
    np.testing.assert_array_equal(again.iterations["time_ns"], slow.iterations["time_ns"])


def test_straggler_draws_have_their_mean_and_touch_only_their_rank():
    """The lognormal draws average to the factor; only the rank's COMPUTE ops change, per op or per
    iteration; fixed factors multiply."""
    s = Straggler(rank=0, factor=1.8, distribution="lognormal", sigma=0.3, per="op", index=3)
    assert draw_factors(s, 200_000, seed=1).mean() == pytest.approx(1.8, rel=0.01)
    kind = np.array([DagOpKind.COMPUTE, DagOpKind.COMPUTE, DagOpKind.FLOW, DagOpKind.COMPUTE, DagOpKind.COMPUTE])
    rank = np.array([0, 1, 0, 0, 0])
    iteration = np.array([0, 0, 0, 1, 1])
    d = np.full(5, 100.0)
    per_it = slowed_durations(d, kind, rank, iteration, [Straggler(rank=0, factor=2.0, distribution="lognormal",
                                                                   per="iteration")], seed=1)
    assert per_it[1] == per_it[2] == 100.0 and per_it[3] == per_it[4] and per_it[0] != per_it[3]
    both = slowed_durations(d, kind, rank, iteration, [Straggler(rank=0, factor=2.0), Straggler(rank=0, factor=1.5)],
                            seed=1)
    np.testing.assert_array_equal(both, [300.0, 100.0, 100.0, 300.0, 300.0])


def test_collective_timeout_fails_the_job_at_start_plus_timeout(engine_ns):
    """A timeout shorter than the all-reduce ends the run with status failed exactly the timeout after the
    collective started; the summary and the faults table name the collective and the rank. A longer one
    changes nothing."""
    base = dp_run()
    coll_ns = float(base.collectives["finish_ns"][0] - base.collectives["start_ns"][0])
    failed = dp_run(collective_timeout_ns=coll_ns / 2)
    s = failed.summary
    assert s["status"] == "failed" and s["failed_collective"] == 0
    assert s["failed_at_ns"] == pytest.approx(base.collectives["start_ns"][0] + coll_ns / 2, abs=1e-3)
    assert s["sim_time_ns"] == pytest.approx(s["failed_at_ns"], abs=1e-3)
    assert 0 <= s["failed_rank"] < 4
    assert [fault_specs.ACTIONS[a] for a in failed.faults["action"]] == ["collective_timeout"]
    assert failed.faults["fault"].tolist() == [-1] and failed.faults["time_ns"][0] == s["failed_at_ns"]
    relaxed = dp_run(collective_timeout_ns=coll_ns * 2)
    assert relaxed.summary["status"] == "complete"
    np.testing.assert_array_equal(relaxed.iterations["time_ns"], base.iterations["time_ns"])


def test_pause_storm_times_the_collective_out(engine_ns):
    """A pause storm on rank 1's NIC through the all-reduce stops the ring at rank 1: with a 1 ms collective
    timeout the job fails 1 ms after the collective started (after the compute), on a member rank. (The
    PFC watchdog would not save it: what it drops is the traffic to the storming NIC.)"""
    storm = {"kind": "pause_storm", "element": "rank1", "at_ns": 0, "duration_ns": 5e6}
    failed = dp_run([storm], collective_timeout_ns=1e6)
    s = failed.summary
    assert s["status"] == "failed" and s["failed_collective"] == 0
    assert s["failed_at_ns"] == pytest.approx(COMPUTE_NS + 1e6, abs=1e-3)
    assert [fault_specs.ACTIONS[a] for a in failed.faults["action"]] == ["storm_start", "collective_timeout"]


def test_failed_run_exits_1_and_names_the_collective(engine_ns, tmp_path, capsys):
    """``cosim run`` of a job that times out writes its results and exits 1 with one Error line naming the
    collective, its rank and the time."""
    from cosim.workload.trace import write_trace  # noqa: PLC0415

    trace = tmp_path / "dp.h5"
    write_trace(trace, dp_step_trace())
    code, _, err = run_main(["run", "--trace", str(trace), "--topology", "single-switch", "--gpus-per-server", "1",
                             "--no-dcqcn", "--collective-timeout-ms", "0.1", "-q", "-o", str(tmp_path / "t.h5")],
                            capsys)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "ended failed: collective 0 (rank" in errors[0] and "0.300 ms" in errors[0]
    assert (tmp_path / "t.h5").is_file()
