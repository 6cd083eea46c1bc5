"""A partitioned run simulated: every partition in this process, or the partitions spread over MPI ranks.

    out, info = simulate(exp, fabric, columns, partitioning, attributes=..., max_sim_time_ns=...)

Rank r of N simulates the partitions p with p mod N = r: the whole fabric is built on every rank, but only
the ops of its partitions are loaded, so nodes of other partitions stay idle. Between windows (no longer
than the shortest cut link's delay) the packets that left on cut links go to the rank of their receiving
node (MPI Alltoallv) and are injected there in (arrival time, node, port) order, the order one process uses
too. Rank 0 gathers every rank's output and merges it as the independent parts of a decomposed run are
merged (cosim.decompose.exact.merge: op times from the op's partition, port telemetry from the port's node's
partition), and sends the merged output back to every rank, so each records the run alike (and only rank 0
writes it: cosim.parallel.mpi.is_root).

A rank that fails (before, during or after the windows, or while merging on rank 0) makes every rank fail
with its error (cosim.parallel.mpi.RankFailed) at the next collective instead of leaving them waiting in it.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from cosim import engine
from cosim.collectives import DagOpKind
from cosim.decompose import exact
from cosim.errors import CosimInputError
from cosim.parallel.mpi import MpiWorld, fail_together, gather, mpi_world, share
from cosim.parallel.partition import Partitioning

#: a packet crossing a cut link (C++ ExchangeRecord, Engine::kExchangeRecordBytes)
RECORD_DTYPE = np.dtype([("due_ps", "<i8"), ("node", "<i4"), ("port", "<i4"), ("packet", "V64")])
#: Engine::NextEventPs when nothing is pending
NO_EVENT_PS = np.iinfo(np.int64).max
#: wall time between two progress reports of an MPI run, s
PROGRESS_EVERY_S = 0.25


def simulate(exp, fabric, columns: dict, p: Partitioning, *, attributes: dict, max_sim_time_ns: float,
             progress=None) -> tuple[engine.DagOutput, dict]:
    """(the merged engine.DagOutput, how the run was split), on every rank."""
    world = mpi_world()
    size, rank = (1, 0) if world is None else (world.size, world.rank)
    if size > p.n_partitions:
        raise CosimInputError("mpiexec", f"started {size} ranks for {p.n_partitions} partition(s): a rank would "
                              "have nothing to simulate", f"start at most {p.n_partitions} ranks, or raise "
                              "limits.partitions")
    rank_of_partition = np.arange(p.n_partitions) % size
    op_rank = rank_of_partition[p.op_partition]
    dep_ptr, dep_idx = np.asarray(columns["dep_ptr"], np.int64), np.asarray(columns["dep_idx"], np.int64)
    mine = exact.Piece.of(np.flatnonzero(op_rank == rank), dep_ptr, dep_idx)
    sync = {"partition_window_s": 0.0, "partition_wait_s": 0.0, "partition_exchange_s": 0.0,
            "partition_allgather_min_s": float("inf")}
    kind = np.asarray(columns["kind"])
    windows = _Windows()
    if world is None:
        run = engine.run_partitions_here
    else:
        run = functools.partial(_over_mpi, world, rank_of_partition[p.node_partition], int(kind.size), sync,
                                windows)
    is_flow = kind == DagOpKind.FLOW
    flow_id = np.where(is_flow, np.cumsum(is_flow) - 1, -1)  # FLOW ops numbered in op order, alike on every rank
    parts = engine.Partitions(node_partition=p.node_partition, local=rank_of_partition == rank,
                              op_partition=p.op_partition[mine.ops], op_flow=flow_id[mine.ops],
                              n_flows=int(is_flow.sum()), run=run)
    failure = None
    try:
        out = engine.simulate_dag(fabric, **exact.piece_columns(columns, mine), seed=exp.seed,
                                  attributes=attributes,
                                  queue_sample_interval_ns=exp.telemetry.queue_sample_interval_ns,
                                  max_sim_time_ns=max_sim_time_ns, progress=progress if rank == 0 else None,
                                  partitions=parts)
    except Exception as exc:
        if world is None or windows.state == "in":  # alone, or told the other ranks already
            raise
        if windows.state == "before":  # the other ranks wait in the windows' first exchange
            _fail_windows(world, exc)
        failure = exc  # after the windows: the other ranks wait in the gather
    info = {"decompose": "whole", "decompose_reason": f"partitioned into {p.n_partitions} (limits.partitions)",
            **p.describe(), "mpi_ranks": size, **({} if world is None else sync)}
    if world is None:
        return _merge(fabric, columns, p, rank_of_partition, (mine,), [out]), info

    def mine_out():
        if failure is not None:
            raise failure
        return out

    outs = gather(world, mine_out)

    def merged():
        pieces = tuple(mine if r == rank else exact.Piece.of(np.flatnonzero(op_rank == r), dep_ptr, dep_idx)
                       for r in range(size))
        whole = _merge(fabric, columns, p, rank_of_partition, pieces, outs)
        # sent to every rank by pickle: the queue log whole, as arrays (a partitioned run's is the whole
        # run's, not a fold's copies)
        net = whole.network
        return dataclasses.replace(whole, network=dataclasses.replace(net, queues=net.queues.materialize()))

    return share(world, merged), info


@dataclasses.dataclass(slots=True)
class _Windows:
    """Where this rank is in the windows of an MPI run: "before" them, "in" them (a failure there is told to
    the other ranks in the windows' own exchange) or "after" them."""

    state: str = "before"


def _merge(fabric, columns: dict, p: Partitioning, rank_of_partition: np.ndarray, pieces: tuple, outs: list):
    """The whole run's output from the ranks' (``outs[r]``, of ``pieces[r]``): every op's times from its
    rank, every port's telemetry from the rank of its node."""
    d = exact.Decomposition(mode="partitioned", reason="", n_parts=len(pieces), pieces=pieces,
                            op_piece=rank_of_partition[p.op_partition].astype(exact.OP),
                            op_image=np.arange(p.op_partition.size, dtype=exact.OP),
                            node_image=np.arange(fabric.n_nodes, dtype=np.int64),
                            node_piece=rank_of_partition[p.node_partition].astype(np.int64))
    return exact.merge(fabric, columns, d, outs)


#: the fields of a rank's state in the windows' Allgather: next event, earliest arrival sent, done, ops done,
#: data packet-hops, stop requested, failed (then one count of packets sent per rank)
STATE_FIELDS = 7
FAILED = 6


def _fail_windows(world: MpiWorld, failure: BaseException) -> None:
    """Fail in the windows' exchange: a rank that failed before its first window joins the others' Allgather
    with only its failed flag set, then every rank raises (fail_together)."""
    state = np.zeros(STATE_FIELDS + world.size, np.int64)
    state[FAILED] = 1
    world.comm.Allgather(state, np.zeros((world.size, state.size), np.int64))
    fail_together(world, failure)


def _over_mpi(world: MpiWorld, rank_of_node: np.ndarray, n_total: int, sync: dict, windows: _Windows, engine_,
              stop_ps: int, n_items: int, count_done, progress) -> int:
    """:func:`_windows` with ``windows.state`` kept: "in" while they run and after a failure in them (told
    to every rank already), "after" once they are done."""
    windows.state = "in"
    status = _windows(world, rank_of_node, n_total, sync, engine_, stop_ps, n_items, count_done, progress)
    windows.state = "after"
    return status


def _windows(world: MpiWorld, rank_of_node: np.ndarray, n_total: int, sync: dict, engine_, stop_ps: int,
             n_items: int, count_done, progress) -> int:
    """This rank's partitions, window by window in step with the other ranks (module docstring). Adds to
    ``sync`` (wall seconds): ``partition_window_s`` simulating, ``partition_wait_s`` in the Allgather
    (waiting for the slowest rank), ``partition_exchange_s`` taking, sending and injecting packets, and keeps
    ``partition_allgather_min_s``, the shortest Allgather (the collective's own latency).

    Two collectives per window: an Allgather of every rank's state (its next event and the earliest arrival
    it sends, whether its ops are done, progress, a stop request, a failure) and of how many packets it sends
    each rank, then the Alltoallv of the packets themselves. A rank whose own work raises (taking, injecting
    or simulating, or rank 0's ``progress``) says so in the next Allgather instead of leaving the others
    waiting in it, and every rank raises (fail_together)."""
    comm, size = world.comm, world.size
    state = np.zeros(STATE_FIELDS + size, np.int64)
    every = np.zeros((size, STATE_FIELDS + size), np.int64)
    send = np.zeros(0, RECORD_DTYPE)
    received = np.zeros(0, RECORD_DTYPE)
    reported = time.perf_counter()
    failure = None
    n_out = lookahead = 0
    try:
        lookahead = int(engine_.LookaheadPs())
    except Exception as exc:  # noqa: BLE001 - told to every rank in the first Allgather
        failure = exc
    while True:
        t0 = time.perf_counter()
        if failure is None:
            try:
                out = _take_outgoing(engine_)
                n_out = out.size
                dest = rank_of_node[out["node"]]
                order = np.argsort(dest, kind="stable")
                send = _fill(send, out, order)
                state[:STATE_FIELDS] = (engine_.NextEventPs(), out["due_ps"].min() if out.size else NO_EVENT_PS,
                                        engine_.LocalDone(), count_done(), engine_.DataPacketHops(),
                                        engine.stop_requested(), 0)
                state[STATE_FIELDS:] = np.bincount(dest, minlength=size)
            except Exception as exc:  # noqa: BLE001 - told to every rank below
                failure = exc
        if failure is not None:
            state[:] = 0
            state[FAILED] = 1
        t1 = time.perf_counter()
        comm.Allgather(state, every)
        t2 = time.perf_counter()
        if every[:, FAILED].any():
            fail_together(world, failure)
        counts_in = every[:, STATE_FIELDS + world.rank]
        received = _grown(received, int(counts_in.sum()))
        comm.Alltoallv([_bytes(send, n_out), state[STATE_FIELDS:] * RECORD_DTYPE.itemsize],
                       [_bytes(received, int(counts_in.sum())), counts_in * RECORD_DTYPE.itemsize])
        try:
            if counts_in.sum():
                engine_.InjectIncoming(received.view(np.uint8), int(counts_in.sum()))  # sorts them first
            sync["partition_wait_s"] += t2 - t1
            sync["partition_allgather_min_s"] = min(sync["partition_allgather_min_s"], t2 - t1)
            sync["partition_exchange_s"] += time.perf_counter() - t0 - (t2 - t1)
            if progress is not None and time.perf_counter() - reported >= PROGRESS_EVERY_S:
                progress(engine_.NowPs() / 1e3, int(every[:, 3].sum()), n_total, int(every[:, 4].sum()))
                reported = time.perf_counter()
            if every[:, 2].all():
                return 1
            if every[:, 5].any():
                return engine.INTERRUPTED
            next_ps = int(every[:, :2].min())
            if next_ps == NO_EVENT_PS:
                return 2
            if next_ps >= stop_ps or engine_.NowPs() >= stop_ps:
                return 0
            t = time.perf_counter()
            status = int(engine_.RunWindow(engine_.WindowEndPs(next_ps, lookahead, stop_ps)))
            sync["partition_window_s"] += time.perf_counter() - t
            if status != 0:
                return status
        except Exception as exc:  # noqa: BLE001 - told to every rank in the next Allgather
            failure = exc


def _take_outgoing(engine_) -> np.ndarray:
    """The packets this rank's partitions posted on cut links since the last call."""
    out = np.empty(int(engine_.NumOutgoing()), RECORD_DTYPE)
    if out.size:
        engine_.TakeOutgoing(out.view(np.uint8))
    return out


def _grown(buffer: np.ndarray, n: int) -> np.ndarray:
    """``buffer``, or a larger one when it holds fewer than ``n`` records (kept from window to window, so
    the pages of a window's packets are touched once, not mapped anew every window)."""
    return buffer if buffer.size >= n else np.empty(max(n, 2 * buffer.size), buffer.dtype)


def _fill(buffer: np.ndarray, records: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``records[order]`` at the start of ``buffer`` (grown if needed)."""
    buffer = _grown(buffer, records.size)
    np.take(records, order, out=buffer[:records.size])
    return buffer


def _bytes(records: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` of ``records`` as bytes (one byte when empty: MPI wants a buffer)."""
    return records[:n].view(np.uint8) if n else np.zeros(1, np.uint8)
