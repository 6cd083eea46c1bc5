"""The bridge to ns-3: runs a fabric and its flows in libcosim-ns3 through cppyy (cosim.plugin loads it).

Neither module imports the ns-3 umbrella bindings module (which loads every ns-3 module: 20-25 s and 650 MB):
the plugin's two ns-3 libraries (core, network) are loaded, and only its engine header is parsed, which
includes no ns-3 header.

Data crosses as numpy arrays (pointers and lengths), once before the run and once after; nothing crosses
per packet or per event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cosim import memory, plugin
from cosim.collectives.dag import NUM_PRIORITIES, BlockTemplates, CommClass, DagOpKind, flow_keys
from cosim.errors import CosimInputError
from cosim.losses import LossCause
from cosim.network import buffers, planes
from cosim.network.dragonfly import router_groups
from cosim.network.probe import PROBE_MIN_NODES, probe_fabric
from cosim.network.topology import HOST, SWITCH, Fabric
from cosim.network.transport import (
    DEFAULT_HEADER_BYTES,
    DEFAULT_MTU_BYTES,
    qualify_attribute,
)
from cosim.plugin import PluginNotFoundError
from cosim.workload.flows import FlowSet

#: the ns-3 event scheduler every run uses (ns-3's SchedulerType). All ns-3 schedulers give the same event
#: order (time, then insertion), so the choice changes speed only: the timing wheel takes about half of
#: PriorityQueueScheduler's instructions per event on cosim's mix (bench/README.md, the packet path).
SCHEDULER_TYPE = "ns3::TimingWheelScheduler"

#: Ports of a switch from which the timing wheel narrows its buckets (wheel_attributes).
WIDE_SWITCH_PORTS = 512
#: Links of a fabric from which the timing wheel narrows its buckets (wheel_attributes).
WIDE_FABRIC_LINKS = 1024
#: The narrow buckets: 256 ps x 131,072, the default 4,096 ps x 8,192's horizon (33.5 us).
WIDE_SWITCH_WHEEL = {"ns3::TimingWheelScheduler::BucketWidth": "256ps", "ns3::TimingWheelScheduler::Buckets": "131072"}


def wheel_attributes(fabric: Fabric, attributes: Mapping[str, str] | None) -> dict[str, str]:
    """The TimingWheelScheduler buckets for ``fabric`` that ``attributes`` leave unset: the narrow ones
    when a switch has WIDE_SWITCH_PORTS ports or more, or the fabric WIDE_FABRIC_LINKS links, else none (the
    defaults).

    Ports that send at once put their events at nearly the same times; at thousands of ports (on one switch
    or over the fabric: the wheel is the whole run's) a 4,096 ps bucket holds many timestamp groups and
    inserting walks them. Narrow buckets save 7 % of CPU time at 512 ports per switch, about a quarter on a
    1,024-NIC leaf-spine (1,536 links), and cost 5.6 % more instructions on 16 hosts (bench/README.md).
    Buckets change speed only, never the results.
    """
    ports = fabric.degree()[np.asarray(fabric.node_kind) == SWITCH]
    wide = (ports.size and ports.max() >= WIDE_SWITCH_PORTS) or fabric.n_links >= WIDE_FABRIC_LINKS
    if not wide:
        return {}
    return {k: v for k, v in WIDE_SWITCH_WHEEL.items() if buffers.explicit_attribute(attributes, k) is None}

_loaded = None  # the cppyy namespace ``cosim`` once loaded and checked


def load():
    """Load ns-3 core and network, the plugin and its header once (cosim.plugin), check that its shared codes
    are this package's; return cppyy's ``cosim`` namespace."""
    global _loaded
    if _loaded is None:
        ns = plugin.namespace()
        check_shared_codes(str(ns.Engine.SharedCodes()))
        _loaded = ns
    return _loaded


def python_codes() -> dict[str, int]:
    """The codes and defaults this package assumes the C++ models use, as Engine::SharedCodes() names them."""
    codes = {f"op_kind.{k.name}": int(k) for k in DagOpKind}
    codes |= {f"comm_class.{k.name}": int(k) for k in CommClass}
    codes |= {f"loss_cause.{c.name}": int(c) for c in LossCause}
    codes |= {"node_kind.HOST": HOST, "node_kind.SWITCH": SWITCH}
    codes |= {f"run_status.{name}": code for code, name in _RUN_STATUS_NAMES.items()}
    codes |= {"priorities": NUM_PRIORITIES, "default.mtu_bytes": DEFAULT_MTU_BYTES,
              "default.header_bytes": DEFAULT_HEADER_BYTES}
    return codes


def check_shared_codes(text: str) -> None:
    """Compare the plugin's shared codes (``key=value`` lines) with :func:`python_codes`; a plugin built
    from other sources fails here, at load, instead of mislabelling results."""
    cpp = {k: int(v) for k, _, v in (line.partition("=") for line in text.splitlines() if line)}
    mine = python_codes()
    if cpp != mine:
        diff = sorted(k for k in cpp.keys() | mine.keys() if cpp.get(k) != mine.get(k))
        raise PluginNotFoundError(f"libcosim-ns3 does not match this cosim: codes differ for {', '.join(diff)} "
                                  "(rebuild with 'pip install .')")


def ns3_version() -> str:
    """The ns-3 version the plugin was built against (loads the plugin)."""
    return str(load().Engine.Ns3Version())


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SimulationOutput:
    """What one simulation produced, as arrays (times in ns, sizes in bytes)."""

    finish_ns: np.ndarray  # float64 [n_flows], time the last byte arrived; nan if unfinished
    delivered_bytes: np.ndarray  # int64 [n_flows], payload delivered
    #: the queue sampler's change log: time_ns (float64), node, port (int32), bytes (int64, queued wire bytes)
    #: [n_samples]; a cosim.streamed.StreamedTable when a decomposed run copies a part's log to every part
    queues: Mapping[str, np.ndarray]
    ports: dict[str, np.ndarray]  # per egress port: node, port, peer, tx_bytes, tx_packets, drops,
    #                               peak_queue_bytes, paused_ps (time paused by PFC, all priorities), rate_bps,
    #                               credit_stall_ps (time with data but no credits, all lanes)
    #: every engine event log (event_logs(): "pauses", "stalls", "pfc_watchdog", ...) by name, each its columns
    #: by name in declaration order, rows in time order; times in ns as float64 (``time_ns``), other columns
    #: in their declared integer type
    logs: dict[str, dict[str, np.ndarray]]
    latency_low_ns: np.ndarray  # float64 [n_buckets], lower edge of each receive-latency bucket
    latency_count: np.ndarray  # int64 [n_buckets], data packets per bucket
    #: the counters the run reports (Engine::ReportedCounters: ecn_marks, switch_drops, ...; those of the fault
    #: model only when it acted), in declaration order; counter_infos() gives each one's unit and combine rule
    counters: dict[str, int]
    sim_time_ns: float  # simulated clock at the end
    status: str  # "complete", "time-limit", "stalled", "deadlock", "failed" (a collective timed out) or
    #              "flow-control-error" (credit overrun: a bug)
    events: int  # simulator events executed
    packet_hops: int  # packets serialized on any link (ACKs, CNPs, PFC and credit packets included)
    data_packet_hops: int  # data packets serialized on any link
    pool_packets: int  # packets the pool created (peak packets alive)
    wall_time_s: float  # wall-clock time of the whole simulation, building included
    run_wall_time_s: float  # wall-clock time of the event loop alone (the packet path)
    mtu_bytes: int  # data payload per full packet in effect (HostNic::MtuBytes)
    header_bytes: int  # wire overhead per data packet in effect (HostNic::HeaderBytes)
    snapshot_ns: np.ndarray  # float64 [n_snapshots], times at which delivered bytes were recorded
    delivered_at_bytes: np.ndarray  # int64 [n_snapshots, n_flows], payload delivered by each snapshot
    #: network faults (Engine::GetFaultActions): time_ps, fault, action, link, node per logged action; empty
    #: without faults
    fault_actions: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: status "deadlock": the wait-for cycle the watchdog found, as "node:port:queue" (queue: PFC priority or
    #: IB virtual lane), each switch egress queue waiting for the next and the last for the first
    deadlock_cycle: tuple[str, ...] = ()


SetupFn = Callable[[object, "dict[str, np.ndarray] | None"], None]
"""Called as setup(engine, dag) once the fabric is built and before flows or DAG ops are loaded: ``engine``
is the C++ Engine (Schedule* fault calls), ``dag`` the arrays Engine::LoadDag will take (kind, gpu,
src_node, dst_node, bytes, duration_ps, priority, dep_ptr, dep_idx; changeable in place), None for flows."""

ProgressFn = Callable[[float, int, int, int], None]
"""Called as progress(sim_time_ns, done, total, data_packet_hops) between simulation slices: flows (or DAG
ops) done of total, and the data packets serialized on links so far (the work that costs wall time)."""

#: the run status code of a simulation stopped by :func:`request_stop` (no engine code: Python stops it)
INTERRUPTED = -1
_STATUS = {0: "time-limit", 1: "complete", 2: "stalled", 3: "deadlock", 4: "failed", INTERRUPTED: "interrupted"}
#: set by :func:`request_stop`: the running simulation ends after its current slice (~0.25 s of wall time)
_STOP = threading.Event()


class Interrupted(Exception):
    """A stop was requested (:func:`request_stop`) while the parts of a decomposed run were simulated: there
    is no whole-run output to record."""


def request_stop() -> None:
    """Stop the simulation running in this process at the end of its current slice, with status
    ``interrupted`` (the tables hold what happened until then); called from a SIGTERM handler."""
    _STOP.set()


def stop_requested() -> bool:
    """True once :func:`request_stop` was called."""
    return _STOP.is_set()

#: Engine RunStatus codes by their C++ names
_RUN_STATUS_NAMES = {0: "TIME_REACHED", 1: "ALL_FLOWS_DONE", 2: "NO_EVENTS", 3: "DEADLOCK", 4: "COLLECTIVE_TIMEOUT"}
#: go-back-N loss-recovery counters: zero on a lossless fabric, so summaries carry them only when non-zero
LOSS_RECOVERY_COUNTERS = ("retransmitted_packets", "retransmitted_bytes", "naks_sent", "timeouts")
#: counters of transport mechanisms that are off by default (reorder-tolerant receivers, admission, QP
#: window, UEC trimming): zero unless one is on, so summaries carry them only when non-zero
TRANSPORT_COUNTERS = ("reordered_packets", "admission_grants", "peak_qp_inflight_bytes", "trimmed_packets",
                      "uec_loss_detections", "uec_sacks_sent", "uec_credits_sent")
#: counters of fault mechanisms (PFC watchdog, pause storms, link-level retry): zero without them, so summaries
#: carry them only when non-zero
MECHANISM_COUNTERS = ("pfc_watchdog_actions", "pfc_watchdog_dropped_packets", "pause_storm_frames_sent",
                      "llr_retries", "llr_replayed_frames")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Partitions:
    """What one process simulates of a partitioned run (cosim.parallel, docs/parallel.md)."""

    node_partition: np.ndarray  # int32 [n_nodes], partition of every node
    local: np.ndarray  # bool [n_partitions], simulated by this process
    op_partition: np.ndarray  # int32 [n_ops loaded], partition of every op of the DAG this process loads
    op_flow: np.ndarray  # int64 [n_ops loaded], a FLOW op's flow id in the whole run (-1: other ops)
    n_flows: int  # flows of the whole run
    #: runs the windows: run(engine, stop_ps, n_ops, count_done, progress) -> RunStatus code
    run: Callable[..., int]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PauseStorms:
    """PFC pause storms (a fault, RoCE only): each host NIC ``host`` (node id) sends PAUSE frames for
    ``priority`` from ``start_ns`` for ``duration_ns`` (C++ PauseStormSource)."""

    host: np.ndarray  # int32 [n], node id of the storming NIC
    priority: np.ndarray  # uint8 [n], priority class paused
    start_ns: np.ndarray  # float64 [n], first frame
    duration_ns: np.ndarray  # float64 [n], length of the storm (> 0)

    @property
    def n(self) -> int:
        """Number of storms."""
        return int(np.asarray(self.host).size)


def add_pause_storms(engine, storms: PauseStorms | None) -> None:
    """Hand ``storms`` to the engine (after BuildFabric); the C++ checks become CosimInputError."""
    if storms is None or storms.n == 0:
        return
    arrays = [np.ascontiguousarray(storms.host, np.int32), np.ascontiguousarray(storms.priority, np.uint8),
              np.rint(np.asarray(storms.start_ns, np.float64) * 1e3).astype(np.int64),
              np.rint(np.asarray(storms.duration_ns, np.float64) * 1e3).astype(np.int64)]
    try:
        engine.AddPauseStorms(*arrays, storms.n)
    except Exception as exc:  # std::invalid_argument from the C++ checks
        raise CosimInputError("faults.pause_storm", _cpp_reason(exc)) from None


def simulate(
    fabric: Fabric,
    flows: FlowSet,
    *,
    seed: int = 1,
    attributes: Mapping[str, str] | None = None,
    queue_sample_interval_ns: float = 1000.0,
    max_sim_time_ns: float = 1e9,
    progress: ProgressFn | None = None,
    snapshot_ns: Sequence[float] = (),
    setup: SetupFn | None = None,
    scheduler: str = SCHEDULER_TYPE,
) -> SimulationOutput:
    """Run ``flows`` on ``fabric`` in ns-3 until every flow is delivered (or the time limit).

    ``attributes`` maps ns-3 attribute paths (``EgressPort::DataRate`` …) to values; they are applied as
    defaults before anything is built, and an unknown name or invalid value raises CosimInputError.
    Unless they set SharedBufferMmu::BufferBytes, every switch gets the buffer of its class (capacity,
    cosim.network.buffers). ``snapshot_ns``: simulated times at which every flow's delivered bytes are recorded
    (``delivered_at_bytes``), e.g. to measure throughput over part of a run. ``setup`` (SetupFn) schedules
    faults once the fabric is built.
    ``scheduler``: the ns-3 event scheduler type (same results whichever; benchmarks compare them).
    """
    _check_times(queue_sample_interval_ns, max_sim_time_ns)
    n_nodes = fabric.n_nodes
    kinds = fabric.node_kind
    for field, ids in (("flows.src", flows.src), ("flows.dst", flows.dst)):
        if ids.size and ((ids < 0).any() or (ids >= n_nodes).any() or (kinds[ids] != 0).any()):
            raise CosimInputError(field, "every flow endpoint must be a host node id of the fabric")
    if (flows.priority >= NUM_PRIORITIES).any():
        raise CosimInputError("flows.priority", f"priorities are 0..{NUM_PRIORITIES - 1}")

    snaps = np.sort(np.asarray(snapshot_ns, dtype=np.float64))
    with _session(fabric, seed, attributes, queue_sample_interval_ns, scheduler) as (engine, t0):
        if setup is not None:
            setup(engine, None)
        n = flows.n_flows
        if n:
            engine.AddFlows(np.ascontiguousarray(flows.src, np.int32), np.ascontiguousarray(flows.dst, np.int32),
                            np.ascontiguousarray(flows.size_bytes, np.int64),
                            np.rint(flows.start_ns * 1e3).astype(np.int64),
                            np.ascontiguousarray(flows.priority, np.uint8), n)
        delivered_at = np.zeros((snaps.size, n), np.int64)
        t_run = time.perf_counter()
        status = 0
        stop_ps = int(max_sim_time_ns * 1e3)
        count_done = engine.FlowsCompleted
        for i, snap in enumerate(snaps):
            if status == 0 and snap * 1e3 < stop_ps:
                status = _run_sliced(engine, int(snap * 1e3), n, count_done, progress)
            if n:
                engine.GetFlowDeliveredBytes(delivered_at[i])
        if status == 0:
            status = _run_sliced(engine, stop_ps, n, count_done, progress)
        run_s = time.perf_counter() - t_run
        out = _collect(engine, status, time.perf_counter() - t0, run_s)
        return dataclasses.replace(out, snapshot_ns=snaps, delivered_at_bytes=delivered_at)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DagOutput:
    """What a co-simulation produced: op times, the flows the DAG created, and the fabric telemetry."""

    op_start_ns: np.ndarray  # float64 [n_ops], nan if the op never started
    op_finish_ns: np.ndarray  # float64 [n_ops], nan if it never finished
    flow_op: np.ndarray  # int64 [n_flows], the FLOW op (or BLOCK op) each flow carried (flows in start order)
    flow_start_ns: np.ndarray  # float64 [n_flows]
    network: SimulationOutput  # per-flow finish/delivered, queues, ports, pauses, latency, counters
    #: status "failed": the collective (index into coll_start_op) that ran past DagExecutor::CollectiveTimeout, and when
    failed_collective: int = -1
    failed_at_ns: float = float("nan")
    #: subs of BLOCK ops finished (each a materialized NVLINK or FLOW op; 0 without BLOCK ops)
    subs_finished: int = 0
    #: int32 [n_flows]: the sub of its BLOCK op each flow carried, -1 for a FLOW op's (None: no BLOCK op has
    #: FLOW subs, every flow is a FLOW op's)
    flow_sub: np.ndarray | None = None


def simulation_size(kind: np.ndarray, block: np.ndarray | None = None,
                    block_templates: BlockTemplates | None = None) -> int:
    """What a simulation of DAG ``kind`` holds at once for cosim.memory.check_simulation_fits: its ops, and a
    flow for each FLOW sub its BLOCK ops start (``block``, ``block_templates``: simulate_dag's)."""
    return int(np.asarray(kind).size) + (0 if block is None else block_templates.n_flows(block))


def simulate_dag(
    fabric: Fabric,
    *,
    kind: np.ndarray,
    gpu: np.ndarray,
    src_node: np.ndarray,
    dst_node: np.ndarray,
    bytes_: np.ndarray,
    duration_ns: np.ndarray,
    priority: np.ndarray,
    dep_ptr: np.ndarray,
    dep_idx: np.ndarray,
    seed: int = 1,
    attributes: Mapping[str, str] | None = None,
    queue_sample_interval_ns: float = 1000.0,
    max_sim_time_ns: float = 1e10,
    progress: ProgressFn | None = None,
    snapshot_ns: Sequence[float] = (),
    setup: SetupFn | None = None,
    coll_start_op: np.ndarray | None = None,
    coll_end_op: np.ndarray | None = None,
    comm_class: np.ndarray | None = None,
    scheduler: str = SCHEDULER_TYPE,
    partitions: Partitions | None = None,
    block: np.ndarray | None = None,
    block_templates: BlockTemplates | None = None,
) -> DagOutput:
    """Run a dependency graph of ops (cosim.collectives.FlowDag columns, ranks mapped to host nodes) in ns-3.

    The C++ DagExecutor starts every op when its dependencies finish: COMPUTE for its duration, NVLINK
    copies at the NVLink rate, FLOW ops as packet-level flows between ``src_node`` and ``dst_node``.
    ``progress`` is called as progress(sim_ns, ops_done, ops_total, data_packet_hops). ``snapshot_ns``:
    simulated times at which every flow's delivered bytes are recorded (``network.delivered_at_bytes``;
    a flow that had not started yet has delivered 0). ``setup`` (SetupFn) schedules faults and may change
    the DAG arrays before they are loaded. ``coll_start_op``/``coll_end_op``: the start and end barrier op of
    every collective, watched with the attribute ``DagExecutor::CollectiveTimeout`` (0, the default, watches
    nothing): a collective not complete that long after it started ends the run with status ``failed``
    (``failed_collective``). ``comm_class``: the CommClass of every op (None: every transfer is NCCL's).
    ``scheduler``: the ns-3 event scheduler type (same results whichever; benchmarks compare them).
    ``partitions``: this process's share of a partitioned run (cosim.parallel; no snapshots).
    ``block``/``block_templates``: the template of every BLOCK op (int32 per op, -1 for the others) and the
    templates (their GPUs in host node ids); a BLOCK op runs its template's NVLink copies and flows exactly as
    NVLINK and FLOW ops in its place would run (``subs_finished`` counts them; ``flow_sub`` names the sub of
    each flow a BLOCK op started). Needed iff ``kind`` has BLOCK ops.
    """
    _check_times(queue_sample_interval_ns, max_sim_time_ns)
    n = int(np.asarray(kind).size)
    memory.check_simulation_fits(simulation_size(kind, block, block_templates))
    with _session(fabric, seed, attributes, queue_sample_interval_ns, scheduler,
                  partitions=partitions) as (engine, t0):
        arrays = [np.ascontiguousarray(a, dt) for a, dt in (
            (kind, np.uint8), (gpu, np.int32), (src_node, np.int32), (dst_node, np.int32), (bytes_, np.int64),
            (np.rint(np.asarray(duration_ns, np.float64) * 1e3), np.int64), (priority, np.uint8),
            (dep_ptr, np.int64), (dep_idx, np.int64))]
        # cppyy passes no pointer for an empty array: a DAG without dependencies still needs one
        arrays = _nonempty(*arrays)
        if arrays[7].size != n + 1:
            raise CosimInputError("dep_ptr", f"must have n_ops + 1 = {n + 1} entries, got {arrays[7].size}")
        if setup is not None:
            setup(engine, dict(zip(_DAG_ARRAYS, arrays)))
        if (block is None) != (block_templates is None):
            raise CosimInputError("dag", "block and block_templates come together")
        if block is None and (arrays[0] == DagOpKind.BLOCK).any():
            raise CosimInputError("dag", f"has {int((arrays[0] == DagOpKind.BLOCK).sum())} BLOCK ops and no "
                                  "block templates", "pass block= and block_templates=")
        try:
            engine.LoadDag(*arrays, n)
            if block is not None:
                _set_blocks(engine, block, block_templates, n)
            if coll_start_op is not None and np.asarray(coll_start_op).size:
                starts = np.ascontiguousarray(coll_start_op, np.int64)
                engine.SetCollectives(starts, np.ascontiguousarray(coll_end_op, np.int64), starts.size)
            if comm_class is not None and n:
                engine.SetCommClasses(np.ascontiguousarray(comm_class, np.uint8), n)
            if partitions is not None:
                engine.SetOpPartitions(*_nonempty(np.ascontiguousarray(partitions.op_partition, np.int32),
                                                  np.ascontiguousarray(partitions.op_flow, np.int64)), n,
                                       partitions.n_flows)
        except Exception as exc:  # std::invalid_argument from the C++ checks
            raise CosimInputError("dag", _cpp_reason(exc)) from None
        t_run = time.perf_counter()
        snaps = np.sort(np.asarray(snapshot_ns, dtype=np.float64))
        stop_ps = int(max_sim_time_ns * 1e3)
        seen: list[np.ndarray] = []
        status = 0
        for snap in snaps:
            if status == 0 and snap * 1e3 < stop_ps:
                status = _run_sliced(engine, int(snap * 1e3), n, engine.DagOpsFinished, progress)
            now = np.empty(int(engine.NumFlows()), np.int64)
            if now.size:
                engine.GetFlowDeliveredBytes(now)
            seen.append(now)
        if partitions is not None:
            status = partitions.run(engine, stop_ps, n, engine.DagOpsFinished, progress)
        elif status == 0:
            status = _run_sliced(engine, stop_ps, n, engine.DagOpsFinished, progress)
        run_s = time.perf_counter() - t_run
        start_ps, finish_ps = np.empty(n, np.int64), np.empty(n, np.int64)
        if n:
            engine.GetDagOpTimes(start_ps, finish_ps)
        m = int(engine.NumFlows())
        flow_op, flow_start = np.empty(m, np.int64), np.empty(m, np.int64)
        flow_sub = np.empty(m, np.int32) if block_templates is not None and block_templates.has_flows() else None
        if m:
            engine.GetFlowOps(flow_op)
            engine.GetFlowStartPs(flow_start)
            if flow_sub is not None:
                engine.GetFlowSubs(flow_sub)
        network = _collect(engine, status, time.perf_counter() - t0, run_s)
        if partitions is not None:  # every process holds every flow of the run: keep those it started
            started = flow_op >= 0
            flow_op, flow_start = flow_op[started], flow_start[started]
            network = dataclasses.replace(network, finish_ns=network.finish_ns[started],
                                          delivered_bytes=network.delivered_bytes[started])
        failed = int(engine.FailedCollective())
        failed_at_ns = engine.FailedCollectiveAtPs() / 1e3 if failed >= 0 else float("nan")
        subs_finished = int(engine.DagSubsFinished())
    if snaps.size:
        delivered_at = np.zeros((snaps.size, m), np.int64)
        for i, now in enumerate(seen):
            delivered_at[i, :now.size] = now
        network = dataclasses.replace(network, snapshot_ns=snaps, delivered_at_bytes=delivered_at)
    return canonical_order(DagOutput(op_start_ns=np.where(start_ps >= 0, start_ps / 1e3, np.nan),
                                     op_finish_ns=np.where(finish_ps >= 0, finish_ps / 1e3, np.nan),
                                     flow_op=flow_op, flow_start_ns=flow_start / 1e3, network=network,
                                     failed_collective=failed, failed_at_ns=failed_at_ns,
                                     subs_finished=subs_finished, flow_sub=flow_sub))


def _set_blocks(engine, block: np.ndarray, t: BlockTemplates, n: int) -> None:
    """Engine::SetBlocks with ``block`` (template per op) and the templates ``t``; durations in ps."""
    block = np.ascontiguousarray(block, np.int32)
    tmpl_ptr = np.ascontiguousarray(t.ptr, np.int64)
    sub_dep_ptr = np.ascontiguousarray(t.dep_ptr, np.int64)
    per_sub = [np.ascontiguousarray(t.kind, np.uint8), np.ascontiguousarray(t.gpu, np.int32),
               np.ascontiguousarray(t.dst, np.int32), np.ascontiguousarray(t.bytes, np.int64),
               np.ascontiguousarray(np.rint(np.asarray(t.duration_ns, np.float64) * 1e3), np.int64)]
    dep_idx = np.ascontiguousarray(t.dep_idx, np.int64)
    n_subs = per_sub[0].size
    if block.shape != (n,):
        raise CosimInputError("dag", f"block must have one entry per op ({n}), got shape {block.shape}")
    if tmpl_ptr.size < 1 or sub_dep_ptr.size != n_subs + 1 or any(c.size != n_subs for c in per_sub):
        raise CosimInputError("dag", f"block templates need a ptr of n_templates + 1 entries, a dep_ptr of n_subs + 1 "
                              f"= {n_subs + 1} and one kind, gpu, dst, bytes and duration_ns per sub")
    if (sub_dep_ptr < 0).any() or int(sub_dep_ptr[-1]) > dep_idx.size:
        raise CosimInputError("dag", "block templates' dep_ptr points outside dep_idx")
    engine.SetBlocks(*_nonempty(block), n, tmpl_ptr, tmpl_ptr.size - 1,
                     *_nonempty(*per_sub, sub_dep_ptr, dep_idx), n_subs)


def canonical_order(out: DagOutput) -> DagOutput:
    """``out`` with its event logs in an order that no interleaving of independent events can change.

    ns-3 runs events of equal time in the order they were scheduled, so two flows that start at the same
    picosecond in unrelated parts of a run get their ids (start order) in an order that depends on what
    else the run holds. Flows are put in (start time, DAG op, sub) order (the order of the ops a BLOCK op's
    subs stand for), and every event log's rows in (time,
    key columns) order (for PFC pauses: time, node, port, priority), changes of one queue at one time keeping
    their order: a run simulated in independent parts (cosim.decompose.exact) merges into exactly these
    tables.
    """
    order = flow_order(out.flow_op, out.flow_sub, out.flow_start_ns)
    net = out.network
    net = dataclasses.replace(net, finish_ns=net.finish_ns[order], delivered_bytes=net.delivered_bytes[order],
                              delivered_at_bytes=net.delivered_at_bytes[:, order], logs=logs_in_key_order(net.logs))
    return dataclasses.replace(out, flow_op=out.flow_op[order], flow_start_ns=out.flow_start_ns[order],
                               network=net, flow_sub=None if out.flow_sub is None else out.flow_sub[order])


def flow_order(flow_op: np.ndarray, flow_sub: np.ndarray | None, flow_start_ns: np.ndarray) -> np.ndarray:
    """The permutation putting flows in canonical order (:func:`canonical_order`): start time (ps), op, sub."""
    start_ps = np.rint(flow_start_ns * 1e3).astype(np.int64)
    return np.lexsort((flow_keys(flow_op, flow_sub), start_ps))


def logs_in_key_order(logs: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """Every event log of a run with its rows in canonical order (:func:`canonical_order`)."""
    return {name: _in_key_order(log, info) for (name, log), info in zip(logs.items(), _infos_of(logs))}


def _infos_of(logs: Mapping[str, object]) -> list[EventLogInfo]:
    """The declarations of ``logs``, in their order."""
    declared = {info.name: info for info in event_logs()}
    return [declared[name] for name in logs]


def _in_key_order(log: Mapping[str, np.ndarray], info: EventLogInfo) -> dict[str, np.ndarray]:
    """``log`` sorted by time, then by its key columns in declaration order; a stable sort, so rows of equal
    time and keys keep their order."""
    keys = [np.asarray(log[c.python_name]) for c in info.columns if c.role in ("time", "key")]
    order = np.lexsort(keys[::-1])
    return {k: np.asarray(x)[order] for k, x in log.items()}


#: names of the DAG arrays a SetupFn sees, in Engine::LoadDag order
_DAG_ARRAYS = ("kind", "gpu", "src_node", "dst_node", "bytes", "duration_ps", "priority", "dep_ptr", "dep_idx")

#: slowest and fastest link, bit/s, and longest link delay, ns, the engine takes (Engine::BuildFabric)
MIN_LINK_RATE_BPS, MAX_LINK_RATE_BPS, MAX_LINK_DELAY_NS = 1e6, 1e15, 1e9
#: shortest and longest queue sampling interval, ns (Engine::SampleSwitchQueues: 1 ps to 1e5 s)
MIN_SAMPLE_INTERVAL_NS, MAX_SAMPLE_INTERVAL_NS = 1e-3, 1e14
#: latest simulated time a run may stop at, ns (ns-3's picosecond clock ends at 2^63 ps, about 9.22e18 ps)
MAX_SIM_TIME_NS = 9.2e15


def _check_times(queue_sample_interval_ns: float, max_sim_time_ns: float) -> None:
    """Both times must become whole picoseconds the engine can hold (nan fails every comparison)."""
    if not MIN_SAMPLE_INTERVAL_NS <= queue_sample_interval_ns <= MAX_SAMPLE_INTERVAL_NS:
        raise CosimInputError("queue_sample_interval_ns", f"must be {MIN_SAMPLE_INTERVAL_NS:g} ns (1 ps) to "
                              f"{MAX_SAMPLE_INTERVAL_NS:g} ns, got {queue_sample_interval_ns}")
    if not 0 < max_sim_time_ns <= MAX_SIM_TIME_NS:
        raise CosimInputError("max_sim_time_ns", f"must be positive and at most {MAX_SIM_TIME_NS:g} ns, got "
                              f"{max_sim_time_ns}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributeInfo:
    """One attribute of a cosim model, as its ns-3 TypeId declares it."""

    name: str  # "Type::Attribute", as --set takes it
    value_type: str  # ns-3 value type, e.g. "ns3::TimeValue", "ns3::UintegerValue"
    default: str  # the default as ns-3 writes it ("+1000ns", "100000000000bps"); --set takes it back
    accepted: str  # what the checker accepts, e.g. "uint32_t 1:8" or "pfc|credit" ("" if it does not say)
    help: str  # the model's description, with the unit where the value has one

    @property
    def type_name(self) -> str:
        """The model (TypeId) the attribute belongs to, e.g. "HostNic"."""
        return self.name.partition("::")[0]


def list_attributes() -> list[AttributeInfo]:
    """Every attribute of every cosim model (TypeIds of group Cosim), sorted by name; read from the models'
    TypeIds through Engine::ListAttributes (loads the plugin)."""
    text = str(load().Engine.ListAttributes())
    rows = (line.split("\t", 4) for line in text.splitlines() if line)
    return [AttributeInfo(name=n, value_type=t, default=d, accepted=a, help=h) for n, t, d, a, h in rows]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogColumnInfo:
    """One column of an engine event log, as Engine::ListEventLogs declares it."""

    name: str  # as the engine names it; a time in ps ends in "_ps"
    dtype: str  # numpy dtype the engine keeps it in: "int8", "int32", "int64"
    role: str  # "time" (first column), "key" (what the event happened to: rows sort by it), "value"
    unit: str  # "ps" for times, "" for ids, codes and states
    description: str

    @property
    def python_name(self) -> str:
        """Its name in SimulationOutput.logs: a time in ps becomes one in ns ("time_ps" -> "time_ns")."""
        return self.name[:-3] + "_ns" if self.unit == "ps" else self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class EventLogInfo:
    """One engine event log: its name (the table it is stored as) and its columns in order."""

    name: str
    columns: tuple[LogColumnInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CounterInfo:
    """One fabric-wide counter, as Engine::ListCounters declares it."""

    name: str
    combine: str  # "sum", "max" or "min": how values of several sources (and of a decomposed run's parts) combine
    unit: str  # "packets", "frames", "events" or "B"
    description: str


@functools.cache
def event_logs() -> tuple[EventLogInfo, ...]:
    """Every event log the engine records, in declaration order (Engine::ListEventLogs; loads the plugin)."""
    rows = [line.split("\t", 5) for line in str(load().Engine.ListEventLogs()).splitlines() if line]
    names = list(dict.fromkeys(r[0] for r in rows))
    return tuple(EventLogInfo(name=n, columns=tuple(
        LogColumnInfo(name=c, dtype=t, role=role, unit=u, description=d) for log, c, t, role, u, d in rows if log == n))
        for n in names)


@functools.cache
def counter_infos() -> tuple[CounterInfo, ...]:
    """Every fabric-wide counter, in declaration order (Engine::ListCounters; loads the plugin)."""
    rows = (line.split("\t", 3) for line in str(load().Engine.ListCounters()).splitlines() if line)
    return tuple(CounterInfo(name=n, combine=c, unit=u, description=d) for n, c, u, d in rows)


def counter_rules() -> dict[str, str]:
    """How each counter combines over the parts of a run: {name: "sum" | "max" | "min"}."""
    return {c.name: c.combine for c in counter_infos()}


def _cpp_reason(exc: Exception) -> str:
    """The message of a C++ std::invalid_argument as cppyy re-raised it, without cppyy's prefix."""
    return str(exc).rsplit("invalid_argument:", 1)[-1].strip()


def attribute_values(attributes: Mapping[str, str] | None, names: Sequence[str]) -> dict[str, str]:
    """The values ns-3 attributes ``names`` take once ``attributes`` are applied (as the engine reads them)."""
    engine = load().Engine(1)
    try:
        _apply_attributes(engine, attributes)
        return {name: str(engine.GetDefault(qualify_attribute(name))) for name in names}
    finally:
        engine.__destruct__()


def check_fabric(fabric: Fabric, attributes: Mapping[str, str] | None = None, *,
                 probe_min_nodes: int = PROBE_MIN_NODES) -> None:
    """Apply ``attributes`` and build ``fabric`` without simulating: raise CosimInputError for what would
    fail at the start of a run (unknown attribute, bad value, a buffer too small for its headroom or a
    credit lane for one packet). Milliseconds for small fabrics; lets a multi-run command fail early. A
    fabric of more than ``probe_min_nodes`` nodes is checked through its probe (one switch of each kind,
    cosim.network.probe): the same answers without building every node and route."""
    if fabric.n_nodes <= probe_min_nodes or not (np.asarray(fabric.node_kind) == SWITCH).any():
        with _session(fabric, 1, attributes, 1000.0):
            pass
        return
    probe = probe_fabric(fabric, buffers.switch_buffer_bytes(fabric, attributes))
    merged = {**wheel_attributes(fabric, attributes), **(attributes or {})}
    try:
        with _session(probe.fabric, 1, merged, 1000.0, switch_buffers=probe.buffer_bytes):
            pass
    except CosimInputError as exc:  # name the real switch the probe's stands for
        problem = re.sub(r"\bswitch (\d+)", lambda m: f"switch {probe.real_switch[int(m.group(1))]}", exc.problem)
        raise CosimInputError(exc.field, problem, exc.fix) from None


@contextlib.contextmanager
def _session(fabric: Fabric, seed: int, attributes: Mapping[str, str] | None, queue_sample_interval_ns: float,
             scheduler: str = SCHEDULER_TYPE, switch_buffers: np.ndarray | None = None,
             partitions: Partitions | None = None):
    """An Engine with ``attributes`` applied, each switch's class buffer set (unless ``attributes`` set
    SharedBufferMmu::BufferBytes; ``switch_buffers``: given per node instead) and its marking stream
    (Fabric.marking_streams), ``fabric`` built (cut into ``partitions``, if given) and sampled; destroyed on
    exit."""
    cosim_ns = load()
    t0 = time.perf_counter()
    engine = cosim_ns.Engine(int(seed))
    try:
        _apply_attributes(engine, {**wheel_attributes(fabric, attributes), **planes.nic_attributes(fabric),
                                   **(attributes or {})})
        try:
            engine.SetScheduler(scheduler)
        except Exception as exc:
            raise CosimInputError("scheduler", _cpp_reason(exc), "use an ns3::Scheduler subclass such as "
                                  f"{SCHEDULER_TYPE}") from None
        if switch_buffers is None:
            switch_buffers = buffers.switch_buffer_bytes(fabric, attributes)
        if switch_buffers is not None:
            engine.SetSwitchBufferBytes(np.ascontiguousarray(switch_buffers, dtype=np.uint64), fabric.n_nodes)
        engine.SetSwitchStreams(np.ascontiguousarray(fabric.marking_streams(), dtype=np.int64), fabric.n_nodes)
        groups = router_groups(fabric)
        if groups is not None:
            engine.SetSwitchGroups(np.ascontiguousarray(groups, dtype=np.int32), fabric.n_nodes)
        routing = planes.selector_routing(fabric)
        if routing is not None:
            engine.SetSwitchRouting(np.ascontiguousarray(routing, dtype=np.uint8), fabric.n_nodes)
        pinned = _pinned_routes(fabric)
        if pinned is not None:
            engine.SetRouteOverrides(*pinned, pinned[0].size)
        link_a = np.ascontiguousarray(fabric.link_a, dtype=np.int32)
        link_b = np.ascontiguousarray(fabric.link_b, dtype=np.int32)
        rate = np.ascontiguousarray(fabric.link_rate_bps, dtype=np.float64)
        delay_ns = np.asarray(fabric.link_delay_ns, dtype=np.float64)
        # checked here, before the int64 cast would wrap a huge delay around to a negative one
        if rate.size and not (rate.min() >= MIN_LINK_RATE_BPS and rate.max() <= MAX_LINK_RATE_BPS):
            raise CosimInputError("fabric.link_rate_bps", f"link rates {rate.min():g}..{rate.max():g} bit/s leave "
                                  "the engine's range", f"keep every link at {MIN_LINK_RATE_BPS:g} to "
                                  f"{MAX_LINK_RATE_BPS:g} bit/s (1 Mbit/s to 1 Pbit/s)")
        if delay_ns.size and not delay_ns.max() <= MAX_LINK_DELAY_NS:
            raise CosimInputError("fabric.link_delay_ns", f"{delay_ns.max():g} ns is too long",
                                  f"keep link delays at most {MAX_LINK_DELAY_NS:g} ns (1 s)")
        delay_ps = np.rint(delay_ns * 1e3).astype(np.int64)
        if partitions is not None:
            engine.SetPartitions(np.ascontiguousarray(partitions.node_partition, np.int32), fabric.n_nodes,
                                 np.ascontiguousarray(partitions.local, np.uint8), int(partitions.local.size))
        try:
            engine.BuildFabric(np.ascontiguousarray(fabric.node_kind, dtype=np.uint8), fabric.n_nodes, link_a,
                               link_b, rate, delay_ps, link_a.size)
        except Exception as exc:
            raise CosimInputError("fabric", _cpp_reason(exc)) from None
        try:
            engine.SampleSwitchQueues(int(round(queue_sample_interval_ns * 1e3)))
        except Exception as exc:
            raise CosimInputError("queue_sample_interval_ns", _cpp_reason(exc)) from None
        yield engine, t0
    finally:
        engine.__destruct__()
        memory.release_freed_heap()


def _pinned_routes(fabric: Fabric) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A fabric file's routes (``params["routes"]``: [switch, to, [via, ...]]) as the engine's rows (switch,
    leaf, one via each), or None."""
    routes = fabric.params.get("routes") if isinstance(fabric.params, Mapping) else None
    if not routes:
        return None
    counts = [len(via) for _, _, via in routes]
    rows = [np.repeat(np.array([r[k] for r in routes], np.int32), counts) for k in (0, 1)]
    return rows[0], rows[1], np.ascontiguousarray(np.concatenate([r[2] for r in routes]), dtype=np.int32)


def _apply_attributes(engine, attributes: Mapping[str, str] | None) -> None:
    """Set every attribute's default on ``engine``; an unknown name or a bad value is a CosimInputError."""
    for name, value in (attributes or {}).items():
        path = qualify_attribute(name)
        try:
            engine.GetDefault(path)
        except Exception:  # cppyy maps std::invalid_argument to a Python exception
            raise CosimInputError(f"--set {name}", "no such ns-3 attribute",
                                  "names look like EgressPort::DataRate or HostNic::MtuBytes") from None
        try:
            engine.SetDefault(path, str(value))
        except Exception as exc:  # the C++ message says which value type was expected
            raise CosimInputError(f"--set {name}", _cpp_reason(exc)) from None


def _nonempty(*arrays: np.ndarray) -> list[np.ndarray]:
    """``arrays``, each empty one replaced by one zero of its dtype (cppyy passes no pointer for an empty
    array)."""
    return [a if a.size else np.zeros(1, a.dtype) for a in arrays]


def _run_sliced(engine, stop_ps: int, n_items: int, count_done: Callable[[], int],
                progress: ProgressFn | None, run_to: Callable[[int], int] | None = None) -> int:
    """Run in slices of simulated time sized to ~0.25 s of wall time each, reporting progress between.

    ``n_items`` is the number of flows (or DAG ops) and ``count_done`` tells how many are done; ``run_to``
    runs one slice to the given time, in ps (default Engine::RunUntil).
    """
    if n_items == 0:
        return 1
    run_to = engine.RunUntil if run_to is None else run_to
    slice_ps = 10_000_000  # 10 us to start; adapted below
    while True:
        t = time.perf_counter()
        target = min(stop_ps, engine.NowPs() + slice_ps)
        status = int(run_to(target))
        if progress is not None:
            progress(engine.NowPs() / 1e3, int(count_done()), n_items, int(engine.DataPacketHops()))
        if status != 0 or target >= stop_ps:
            return status
        if _STOP.is_set():
            return INTERRUPTED
        elapsed = max(time.perf_counter() - t, 1e-6)
        slice_ps = int(slice_ps * min(4.0, max(0.5, 0.25 / elapsed)))


def run_partitions_here(engine, stop_ps: int, n_items: int, count_done: Callable[[], int],
                        progress: ProgressFn | None) -> int:
    """Partitions.run when every partition is simulated in this process: Engine::RunPartitions in progress
    slices (slices never change the windows)."""
    return _run_sliced(engine, stop_ps, n_items, count_done, progress,
                       run_to=lambda target: engine.RunPartitions(target, stop_ps))


def _read_log(engine, info: EventLogInfo) -> dict[str, np.ndarray]:
    """Every column of event log ``info`` (Engine::GetLogColumn), times in ns as float64."""
    n = int(engine.NumLogRows(info.name))
    log = {}
    for c in info.columns:
        col = np.empty(n, c.dtype)
        if n:  # cppyy passes no pointer for an empty array
            engine.GetLogColumn(info.name, c.name, col)
        log[c.python_name] = col / 1e3 if c.unit == "ps" else col
    return log


def _collect(engine, status: int, wall_s: float, run_s: float) -> SimulationOutput:
    n_flows = int(engine.NumFlows())
    finish_ps = np.empty(n_flows, np.int64)
    delivered = np.empty(n_flows, np.int64)
    if n_flows:
        engine.GetFlowFinishPs(finish_ps)
        engine.GetFlowDeliveredBytes(delivered)
    finish_ns = np.where(finish_ps >= 0, finish_ps / 1e3, np.nan)
    m = int(engine.NumQueueSamples())
    qt, qn, qp, qb = np.empty(m, np.int64), np.empty(m, np.int32), np.empty(m, np.int32), np.empty(m, np.int64)
    if m:
        engine.GetQueueSamples(qt, qn, qp, qb)
    k = int(engine.NumPorts())
    cols = {"node": np.int32, "port": np.int32, "peer": np.int32, "tx_bytes": np.int64,
            "tx_packets": np.int64, "drops": np.int64, "peak_queue_bytes": np.int64}
    ports = {name: np.empty(k, dtype) for name, dtype in cols.items()}
    ports["paused_ps"] = np.empty(k, np.int64)
    ports["rate_bps"] = np.empty(k, np.float64)
    ports["credit_stall_ps"] = np.empty(k, np.int64)
    if k:
        engine.GetPortStats(*[ports[c] for c in cols])
        engine.GetPortPausedPs(ports["paused_ps"])
        engine.GetPortRateBps(ports["rate_bps"])
        engine.GetPortCreditStallPs(ports["credit_stall_ps"])
    nb = int(engine.LatencyBuckets())
    hist = np.empty(nb, np.int64)
    engine.GetLatencyHistogram(hist)
    low_ns = np.array([engine.LatencyBucketLowPs(b) for b in range(nb)]) / 1e3
    counters = {name: int(value) for name, _, value in
                (line.partition("\t") for line in str(engine.ReportedCounters()).splitlines() if line)}
    f = int(engine.NumFaultActions())
    fault_actions = {}
    if f:
        fault_actions = {"time_ps": np.empty(f, np.int64), "fault": np.empty(f, np.int32),
                         "action": np.empty(f, np.int8), "link": np.empty(f, np.int32), "node": np.empty(f, np.int32)}
        engine.GetFaultActions(*fault_actions.values())
    c = int(engine.DeadlockCycleLength())
    cycle = [np.empty(c, np.int32) for _ in range(3)]
    if c:
        engine.GetDeadlockCycle(*cycle)
    return SimulationOutput(
        finish_ns=finish_ns,
        delivered_bytes=delivered,
        queues={"time_ns": qt / 1e3, "node": qn, "port": qp, "bytes": qb},
        ports=ports,
        logs={info.name: _read_log(engine, info) for info in event_logs()},
        latency_low_ns=low_ns,
        latency_count=hist,
        counters=counters,
        sim_time_ns=engine.NowPs() / 1e3,
        # A packet beyond its lane's advertised credits can only be a flow-control bug: never report it
        # as a normal run.
        status="flow-control-error" if counters["credit_violations"] else _STATUS[status],
        events=int(engine.EventsExecuted()),
        packet_hops=int(engine.PacketHops()),
        data_packet_hops=int(engine.DataPacketHops()),
        pool_packets=int(engine.PacketPoolCapacity()),
        wall_time_s=wall_s,
        run_wall_time_s=run_s,
        mtu_bytes=int(str(engine.GetDefault("ns3::HostNic::MtuBytes"))),
        header_bytes=int(str(engine.GetDefault("ns3::HostNic::HeaderBytes"))),
        snapshot_ns=np.empty(0),
        delivered_at_bytes=np.empty((0, n_flows), np.int64),
        fault_actions=fault_actions,
        deadlock_cycle=tuple(f"{n}:{p}:{q}" for n, p, q in zip(*(a.tolist() for a in cycle))),
    )
