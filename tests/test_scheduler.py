"""The timing-wheel event scheduler (ns3_scenarios/model/timing-wheel-scheduler.*): the same event order as
every ns-3 scheduler (timestamp, then insertion uid), on random event mixes played through the real
scheduler, and the same simulation results as ns-3's PriorityQueueScheduler through the engine."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

INSERT, REMOVE_NEXT, PEEK_NEXT, REMOVE = 0, 1, 2, 3

#: (name, ObjectFactory text): the default wheel; one so small that most events wait in the far heap and
#: the ring wraps all the time; one whose buckets are so wide that every event shares a few sorted lists
SCHEDULERS = [
    ("wheel", "ns3::TimingWheelScheduler"),
    ("tiny-wheel", "ns3::TimingWheelScheduler[Buckets=64|BucketWidth=1ps]"),
    ("wide-buckets", "ns3::TimingWheelScheduler[Buckets=64|BucketWidth=1us]"),
    ("ns-3 priority queue", "ns3::PriorityQueueScheduler"),
    ("ns-3 map", "ns3::MapScheduler"),
]


def event_script(rng: np.random.Generator, n_steps: int):
    """A random script of scheduler steps as ns-3's simulator issues them, with the expected answers.

    New events are never earlier than the last one removed (ns-3 cannot schedule in the past) and get
    increasing uids. Delays mix: zero (equal timestamps, the uid decides), a few ns, about a link's
    1 µs, a timestamp equal to a pending event's, and far timers (50 µs to 10 ms).
    @return (step, ts, uid, expected uid per step: -1 for inserts and removes, -2 if empty)
    """
    step = np.empty(n_steps, np.uint8)
    ts = np.zeros(n_steps, np.uint64)
    uid = np.zeros(n_steps, np.uint32)
    expected = np.full(n_steps, -1, np.int64)
    heap: list[tuple[int, int]] = []  # (ts, uid), with lazily deleted entries
    pending: dict[int, int] = {}  # uid -> ts
    now = next_uid = 0

    def top():
        while heap and heap[0][1] not in pending:
            heapq.heappop(heap)
        return heap[0] if heap else None

    for i in range(n_steps):
        kind = rng.choice(4, p=[0.5, 0.35, 0.08, 0.07])
        if kind == INSERT or not pending:
            mix = rng.integers(6)
            if mix == 0:
                t = now
            elif mix == 1:
                t = now + int(rng.integers(0, 5_000))
            elif mix == 2:
                t = now + int(rng.integers(900_000, 1_100_000))
            elif mix == 3 and pending:
                t = int(rng.choice(list(pending.values())))
            elif mix == 4:
                t = now + int(rng.integers(50_000_000, 10_000_000_000))
            else:
                t = now + int(rng.integers(0, 200_000))
            step[i], ts[i], uid[i] = INSERT, t, next_uid
            pending[next_uid] = t
            heapq.heappush(heap, (t, next_uid))
            next_uid += 1
        elif kind == REMOVE:
            victim = int(rng.choice(list(pending)))
            step[i], ts[i], uid[i] = REMOVE, pending.pop(victim), victim
        else:
            t, u = top()
            step[i], expected[i] = kind, u
            if kind == REMOVE_NEXT:
                del pending[u]
                now = t
    return step, ts, uid, expected


def play(model_probes, scheduler: str, step, ts, uid) -> tuple[np.ndarray, int]:
    out = np.empty(step.size, np.int64)
    left = model_probes.SchedulerScript(scheduler, step, ts, uid, step.size, out)
    return out, int(left)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name, scheduler", SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_scheduler_gives_time_then_insertion_order(model_probes, name, scheduler, seed):
    """Every RemoveNext and PeekNext answers the earliest pending event by (timestamp, uid), through
    inserts of equal timestamps, far events, wrap-arounds of the ring and removals of pending events."""
    step, ts, uid, expected = event_script(np.random.default_rng(seed), 6_000)
    out, left = play(model_probes, scheduler, step, ts, uid)
    inserted = int((step == INSERT).sum())
    removed = int((step == REMOVE).sum() + (step == REMOVE_NEXT).sum())
    assert left == inserted - removed
    np.testing.assert_array_equal(out, expected)


def test_scheduler_drains_a_burst_of_equal_timestamps_in_insertion_order(model_probes):
    """A thousand events at one timestamp (plus one earlier and one far later) come out by uid."""
    n = 1_000
    step = np.r_[np.full(n + 2, INSERT), np.full(n + 2, REMOVE_NEXT)].astype(np.uint8)
    ts = np.r_[np.full(n, 7_000), [6_999, 10**12], np.zeros(n + 2)].astype(np.uint64)
    uid = np.r_[np.arange(n + 2), np.zeros(n + 2)].astype(np.uint32)
    out, left = play(model_probes, "ns3::TimingWheelScheduler", step, ts, uid)
    assert left == 0
    np.testing.assert_array_equal(out[n + 2:], np.r_[[n], np.arange(n), [n + 1]])


def test_engine_refuses_a_type_that_is_not_a_scheduler(engine_ns):
    """The engine's scheduler choice is checked: an unknown type or a non-scheduler is one input error."""
    from cosim import engine
    from cosim.errors import CosimInputError
    from cosim.network import topology
    from cosim.workload import flows as fl

    fabric = topology.point_to_point(link_gbps=100, link_delay_ns=1000)
    flows = fl.FlowSet.from_arrays(src=[0], dst=[1], size_bytes=[1000])
    for bad in ("ns3::NoSuchScheduler", "ns3::Object"):
        with pytest.raises(CosimInputError, match="scheduler"):
            engine.simulate(fabric, flows, scheduler=bad)


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_simulation_is_identical_with_either_scheduler(engine_ns, transport):
    """An incast with ECN, PFC or credits, and DCQCN timers gives bit-identical results with the timing
    wheel (default and a tiny wheel set through its attributes) and with ns-3's PriorityQueueScheduler."""
    from cosim import engine
    from cosim.network import topology
    from cosim.network.transport import transport_attributes
    from cosim.workload import flows as fl

    fabric = topology.leaf_spine(hosts=8, hosts_per_leaf=4, spines=2, host_link_gbps=100, host_link_delay_ns=1000,
                                 fabric_link_delay_ns=1000)
    n = 8
    flows = fl.FlowSet.from_arrays(src=np.r_[np.arange(1, n), 0], dst=np.r_[np.zeros(n - 1, int), 5],
                                   size_bytes=np.full(n, 300_000), start_ns=np.arange(n) * 700.0)
    attrs = transport_attributes(transport)
    tiny = attrs | {"TimingWheelScheduler::Buckets": "64", "TimingWheelScheduler::BucketWidth": "1ps"}
    runs = [engine.simulate(fabric, flows, attributes=attrs, scheduler="ns3::PriorityQueueScheduler"),
            engine.simulate(fabric, flows, attributes=attrs),
            engine.simulate(fabric, flows, attributes=tiny)]
    ref = runs[0]
    assert ref.status == "complete"
    for out in runs[1:]:
        assert out.events == ref.events and out.sim_time_ns == ref.sim_time_ns
        np.testing.assert_array_equal(out.finish_ns, ref.finish_ns)
        np.testing.assert_array_equal(out.queues["bytes"], ref.queues["bytes"])
        np.testing.assert_array_equal(out.logs["pauses"]["time_ns"], ref.logs["pauses"]["time_ns"])
        assert out.counters == ref.counters


def test_scheduler_orders_by_uid_whatever_the_insertion_order(model_probes):
    """Two timestamps of one bucket inserted interleaved, uids given in a shuffled order: still
    (timestamp, uid) order, for the wheel's fast paths (append to a timestamp's group) and its walks."""
    rng = np.random.default_rng(5)
    n = 400
    uid = rng.permutation(n).astype(np.uint32)
    ts = np.where(np.arange(n) % 2 == 0, 1_000, 1_001).astype(np.uint64)
    step = np.r_[np.full(n, INSERT), np.full(n, REMOVE_NEXT)].astype(np.uint8)
    order = np.lexsort((uid, ts))
    for scheduler in ("ns3::TimingWheelScheduler", "ns3::TimingWheelScheduler[Buckets=64|BucketWidth=1ps]"):
        out, left = play(model_probes, scheduler, step, np.r_[ts, np.zeros(n, np.uint64)],
                         np.r_[uid, np.zeros(n, np.uint32)])
        assert left == 0
        np.testing.assert_array_equal(out[n:], uid[order])


def test_wide_switches_get_narrow_wheel_buckets_unless_set():
    """engine.wheel_attributes: 256 ps buckets from 512 ports on one switch, none below; an explicit
    bucket width or count is kept as given."""
    from cosim import engine
    from cosim.network import topology

    small = topology.single_switch(hosts=511, link_gbps=400, link_delay_ns=1000)
    wide = topology.single_switch(hosts=512, link_gbps=400, link_delay_ns=1000)
    assert engine.wheel_attributes(small, None) == {}
    assert engine.wheel_attributes(wide, None) == engine.WIDE_SWITCH_WHEEL
    assert engine.wheel_attributes(wide, {"TimingWheelScheduler::BucketWidth": "1ns"}) == {
        "ns3::TimingWheelScheduler::Buckets": "131072"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lean_simulator_core_runs_as_ns3_default(model_probes, seed):
    """LeanSimulatorImpl (the engine's simulator core) runs a random cascade of events exactly as ns-3's
    DefaultSimulatorImpl: events that schedule more (Schedule, ScheduleNow, ScheduleWithContext, with ties),
    cancel or remove earlier ones, and read Now, GetContext, GetEventCount, IsExpired and GetDelayLeft give
    the same record, event by event."""
    runs = {}
    for impl in ("ns3::DefaultSimulatorImpl", "ns3::LeanSimulatorImpl"):
        out = np.zeros(6 * 20_000, np.int64)
        n = int(model_probes.SimulatorCascade(impl, seed, 20_000, out))
        runs[impl] = out[:6 * n].reshape(n, 6)
    default, lean = runs.values()
    assert default.shape[0] > 10_000  # most of the budget ran
    assert default[:, 4].any() and not default[:, 4].all()  # expired and pending events were both seen
    assert np.unique(default[:, 2]).size > 2  # several contexts
    np.testing.assert_array_equal(lean, default)
