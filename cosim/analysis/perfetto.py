"""Run timelines for Perfetto (ui.perfetto.dev) and chrome://tracing: results → Perfetto's protobuf trace
(:func:`write_proto`, encoded by :mod:`cosim.analysis.perfetto_proto`) or Chrome Trace Event JSON
(:func:`write_timelines`), the same tracks in both.

One process per run. Its threads are tracks of slices (``ph: "X"`` complete events):

- ``iterations``: one slice per training iteration (args: time_ns, exposed_comm_ns).
- ``rank R (hostH) compute`` / ``NVLink`` / ``network`` / ``comm``: the rank's ops. Compute ops are named
  by their trace label (``fwd/attn``), collectives by kind and group (``all_reduce TP``), sends and receives
  by direction and group (``send PP``); bytes, peer, phase, micro-batch, layer and label are in the args. A
  collective whose members share one server, or a send/recv between GPUs of one server, is NVLink;
  otherwise network; ``comm`` holds sends/receives whose peer is unknown (no trace to read it from).
- ``TP group G (ranks ...)``: the group's collective calls (kind, bytes, algorithm, members).
- ``flows from hostH``: flow runs (and training runs with ``flows=True``): one slice per flow.

Ops of one rank overlap (communication runs beside compute, collectives of several groups at once), and
Perfetto accepts on one track only slices that nest. Every family of tracks is therefore split into
*lanes*: greedy interval partitioning in start order puts each slice on the first lane free at its start,
so slices on one track never overlap (touching ends are allowed); lanes after the first get ``#2``,
``#3``... in their track name.

The fabric is drawn as process counter tracks (``ph: "C"``): ``queue <port>`` (queued bytes, each
change-only sample of the run), ``PFC paused <port>`` (number of paused priorities) and ``credit stall
<port>`` (number of stalled virtual lanes). By default only the ``DEFAULT_PORTS`` busiest ports of each kind
are exported (largest time integral of the value); ``ports=None`` exports all. A port is named
``<node> p<port>→<peer>`` with leaf/spine/host names when the topology is rebuilt from the stored
experiment (:func:`cosim.network.fabrics.for_network`), else from ``config["fabric"]``'s tier sizes, else
``node N``. Counter tracks are decimated by default (:func:`decimate`: at most the peak, the trough and the
last sample per 1/``COUNTER_BINS`` of the run's time).

Times are integer picoseconds inside (the simulator's clock; stored ns are exact multiples of 0.001) and
written in JSON as µs with six decimals, so ``ts`` and ``ts + dur`` are the stored start and finish
exactly (the protobuf trace has whole ns: the nearest).
Output is streamed (events are formatted in batches, never held as one document), identical for identical
inputs, gzip-compressed for a ``.gz`` path, and written with :func:`cosim.h5io.atomic_output`.
"""

from __future__ import annotations

import dataclasses
import gzip
import heapq
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cosim import __version__
from cosim.analysis import perfetto_proto as pb
from cosim.errors import CosimInputError
from cosim.h5io import atomic_output
from cosim.results import RunRecord, read_results

#: busiest ports exported per fabric counter kind by default
DEFAULT_PORTS = 8
PS_PER_NS = 1000
PS_PER_US = 1_000_000
#: events formatted per write
BATCH_EVENTS = 50_000
#: protobuf packets written per batch
BATCH_PACKETS = 50_000
#: time bins per counter track when decimating (at most 3 samples each: the bin's peak, trough and last)
COUNTER_BINS = 2000

OP_COMPUTE, OP_COLLECTIVE, OP_SEND, OP_RECV = 0, 1, 2, 3
PHASE_NAMES = ("forward", "backward", "grad_sync", "optimizer", "other")
COLL_KIND_NAMES = {0: "collective", 1: "all_reduce", 2: "reduce_scatter", 3: "all_gather", 4: "all_to_all",
                   5: "broadcast"}
GROUP_KIND_NAMES = ("TP", "CP", "PP", "DP", "EP", "EDP", "EMBD", "WORLD", "OTHER")
ALGORITHM_NAMES = ("none", "ring", "tree", "halving_doubling", "direct", "hierarchical", "chain", "pxn", "nvls")
#: rank track categories, in display order
RANK_CATEGORIES = ("compute", "NVLink", "network", "comm")
CAT_COMPUTE, CAT_NVLINK, CAT_NETWORK, CAT_COMM = range(4)
#: switch names per tier (1, 2, 3) of each topology
TIER_WORDS = {"leaf-spine": ("leaf", "spine", "core"), "rail-optimized": ("rail", "spine", "core"),
              "fat-tree": ("edge", "agg", "core"), "single-switch": ("switch", "spine", "core")}


# --- times and lanes (pure functions on arrays) -----------------------------------------------------------

def ns_to_ps(ns: np.ndarray) -> np.ndarray:
    """int64 picoseconds of float ns times (exact: stored times are whole picoseconds); nan → -1."""
    ns = np.asarray(ns, np.float64)
    out = np.full(ns.shape, -1, np.int64)
    ok = np.isfinite(ns)
    out[ok] = np.rint(ns[ok] * PS_PER_NS).astype(np.int64)
    return out


def assign_lanes(track: np.ndarray, start_ps: np.ndarray, finish_ps: np.ndarray) -> np.ndarray:
    """int32 lane of every interval within its track such that intervals on one (track, lane) never
    overlap (one may start where the previous ends); the fewest lanes, the lowest free lane first.

    Tracks whose intervals are already disjoint (the common case: compute, one communicator) are found with
    numpy and all get lane 0; only tracks with overlaps run the greedy partition, in start order."""
    track = np.asarray(track, np.int64)
    n = track.size
    lane = np.zeros(n, np.int32)
    if n < 2:
        return lane
    order = np.lexsort((np.arange(n), finish_ps, start_ps, track))
    t, s, f = track[order], np.asarray(start_ps)[order], np.asarray(finish_ps)[order]
    # sorted by start, a track is disjoint iff each interval starts after its predecessor ends
    clash = (t[1:] == t[:-1]) & (s[1:] < f[:-1])
    if not clash.any():
        return lane
    busy_rows = np.flatnonzero(np.isin(t, np.unique(t[1:][clash])))
    out = np.zeros(busy_rows.size, np.int32)
    rows_t, rows_s, rows_f = t[busy_rows].tolist(), s[busy_rows].tolist(), f[busy_rows].tolist()
    current = None
    for i, (ti, si, fi) in enumerate(zip(rows_t, rows_s, rows_f)):
        if ti != current:
            current, busy, free, n_lanes = ti, [], [], 0
        while busy and busy[0][0] <= si:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, n_lanes = n_lanes, n_lanes + 1
        heapq.heappush(busy, (fi, k))
        out[i] = k
    lane[order[busy_rows]] = out
    return lane


def rank_list(ranks: Sequence[int]) -> str:
    """Sorted ranks as text with runs collapsed: ``0-3,8-11`` (``0,4`` for a stride)."""
    r = sorted({int(x) for x in ranks})
    parts, i = [], 0
    while i < len(r):
        j = i
        while j + 1 < len(r) and r[j + 1] == r[j] + 1:
            j += 1
        parts.append(f"{r[i]}-{r[j]}" if j > i else str(r[i]))
        i = j + 1
    return ",".join(parts)


def _tokens(column) -> list[str]:
    """JSON texts of one args column: ints, floats (nan → null) or already-escaped JSON strings."""
    if isinstance(column, list):
        return column
    a = np.asarray(column)
    if a.dtype.kind == "f":
        return [repr(x) if math.isfinite(x) else "null" for x in a.tolist()]
    if a.dtype.kind == "b":
        return ["true" if x else "false" for x in a.tolist()]
    return [str(x) for x in a.tolist()]


def json_rows(fields: Sequence[tuple[str, object]]) -> list[str]:
    """One JSON object text per row from ``(key, column)`` pairs (columns as for :func:`_tokens`)."""
    if not fields:
        return []
    template = "{" + ",".join(f"{json.dumps(k)}:%s" for k, _ in fields) + "}"
    return [template % row for row in zip(*(_tokens(c) for _, c in fields))]


def _escaped(strings: Sequence[str]) -> list[str]:
    return [json.dumps(s) for s in strings]


# --- what a timeline is made of ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SliceSet:
    """Slices of one family of tracks: track key, [start, finish] in ps, name (index into ``names``) and the
    JSON args text of every slice; ``tracks`` names each key (lanes add ``#2``...)."""

    category: str
    key: np.ndarray  # int64 [n], track key
    start_ps: np.ndarray  # int64 [n]
    finish_ps: np.ndarray  # int64 [n], >= start_ps
    name: np.ndarray  # int64 [n], index into names
    names: tuple[str, ...]
    args: list[str]  # [n] JSON object texts
    tracks: Mapping[int, str]

    @property
    def n(self) -> int:
        return int(self.key.size)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CounterSet:
    """Samples of counter tracks: series (index into ``series_names``), time in ps and value."""

    what: str  # the series name prefix: "queue", "PFC paused", "credit stall"
    arg: str  # the args key, e.g. "bytes" (Perfetto names the track "<series name> <arg>")
    series: np.ndarray  # int64 [n]
    time_ps: np.ndarray  # int64 [n]
    value: np.ndarray  # int64 [n]
    series_names: tuple[str, ...]
    selected_of: int  # series the run had before the busiest were picked
    stored: int = -1  # samples of the chosen series before decimation (-1: not decimated, all of them)

    @property
    def n(self) -> int:
        return int(self.series.size)

    def __post_init__(self):
        if self.stored < 0:
            object.__setattr__(self, "stored", int(self.series.size))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunTimeline:
    """Everything exported of one run, and notes on what could not be resolved."""

    name: str
    slices: tuple[SliceSet, ...]
    counters: tuple[CounterSet, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Context:
    """What a run's tables do not hold but its stored experiment rebuilds: the workload trace (None if it
    cannot be found or does not match the ops table), GPUs per server, node names, each rank's host."""

    trace: object | None
    gpus_per_server: int
    node_names: tuple[str, ...] | None
    rank_host: np.ndarray | None  # int64 [n_ranks], host node id
    notes: tuple[str, ...] = ()

    def node(self, i: int) -> str:
        if self.node_names is not None and 0 <= i < len(self.node_names):
            return self.node_names[i]
        return f"node {i}"


# --- rebuilding names from the stored experiment ----------------------------------------------------------

def _tier_word(topology: str, tier: int) -> str:
    words = TIER_WORDS.get(topology, ("switch", "spine", "core"))
    return words[min(max(tier, 1), 3) - 1]


def names_from_tiers(topology: str, node_tier: np.ndarray) -> tuple[str, ...]:
    """``hostN`` for tier 0, else the tier's switch word and the index within the tier (``leaf0``)."""
    node_tier = np.asarray(node_tier, np.int64)
    out = []
    seen: dict[int, int] = {}
    for t in node_tier.tolist():
        k = seen.get(t, 0)
        seen[t] = k + 1
        out.append(f"host{k}" if t == 0 else f"{_tier_word(topology, t)}{k}")
    return tuple(out)


def _names_from_description(fabric: Mapping) -> tuple[str, ...] | None:
    """Node names from ``config["fabric"]`` (hosts first, then switches, lower tiers first)."""
    try:
        n_hosts = int(fabric["n_hosts"])
        tiers = [(int(t["tier"]), int(t["n_switches"])) for t in fabric["tiers"] if int(t["tier"]) > 0]
        n_nodes = int(fabric["n_nodes"])
    except (KeyError, TypeError, ValueError):
        return None
    node_tier = [0] * n_hosts + [t for t, count in sorted(tiers) for _ in range(count)]
    if len(node_tier) != n_nodes:
        return None
    return names_from_tiers(str(fabric.get("name", "")), np.asarray(node_tier))


def stored_fabric(record: RunRecord):
    """The Fabric the run ran on, from its ``nodes``, ``links`` and ``hosts`` tables (None for a file
    written before runs stored them)."""
    from cosim.network.topology import Fabric  # noqa: PLC0415 - numpy-heavy, only when exporting

    nodes, links, hosts = record.nodes, record.links, record.hosts
    if not (nodes and links and hosts):
        return None
    try:
        return Fabric(name=str(record.config.get("fabric", {}).get("name", "")), node_kind=nodes["kind"],
                      node_tier=nodes["tier"], link_a=links["a"], link_b=links["b"], link_rate_bps=links["rate_bps"],
                      link_delay_ns=links["delay_ns"], link_tier=links["tier"], host_server=hosts["server"],
                      host_gpu=hosts["gpu"])
    except (CosimInputError, KeyError, ValueError):
        return None


def _rank_hosts(record: RunRecord) -> np.ndarray | None:
    """Host node id of every rank of a one-job run (its ``placement`` table), None without one."""
    place = record.placement
    if not place or np.any(np.asarray(place["workload"]) != 0):
        return None
    return np.asarray(place["host"], np.int64)[np.argsort(np.asarray(place["slot"]), kind="stable")]


def _find_trace(record: RunRecord, search_dirs: Sequence[Path]):
    """The run's trace: its stored trace file (as written, or found in ``search_dirs``), or the trace its
    stored model generates; None with a note when neither is available."""
    from cosim.spec import from_document  # noqa: PLC0415
    from cosim.workload.trace import read_trace  # noqa: PLC0415

    work = record.config.get("experiment", {}).get("workload", {})
    gps = record.config.get("workload", {}).get("gpus_per_server")
    if record.config.get("workload", {}).get("trace_in_memory"):
        return None, "the run's trace was built in memory"
    if work.get("trace"):
        stored = Path(str(work["trace"]))
        for candidate in [stored, *(d / stored for d in search_dirs), *(d / stored.name for d in search_dirs)]:
            if candidate.is_file():
                try:
                    return read_trace(candidate), None
                except CosimInputError:
                    continue
        return None, f"trace file {stored} not found (pass --trace)"
    if work.get("model"):
        try:
            return from_document(record.config["experiment"])[0].workload.generate_trace(gps), None
        except (CosimInputError, KeyError, TypeError, ValueError) as exc:
            return None, f"cannot regenerate the trace ({exc})"
    return None, "the run names no trace"


def _own_names(record: RunRecord, fabric) -> tuple[str, ...] | None:
    """The names a fabric built from switches of a radix, in planes or read from a file gives its nodes
    (``rail3-leaf1``, ``zone2-agg7``, ``nicplane1-spine0``, the file's), when its stored description rebuilds
    the stored arrays; else None."""
    from cosim.network.fabrics import rebuild  # noqa: PLC0415 - numpy-heavy, only when exporting

    desc = record.config.get("fabric")
    if not isinstance(desc, Mapping) or not isinstance(desc.get("params"), Mapping):
        return None
    if not {"switch_radix", "file", "nic_planes"} & set(desc["params"]):
        return None
    again = rebuild(desc)
    if again is None or again.node_names is None or not np.array_equal(again.node_tier, fabric.node_tier):
        return None
    return again.node_names


def _trace_matches(trace, ops: Mapping[str, np.ndarray], op_table: str = "all") -> bool:
    """The trace is the one that ran: its rank and kind columns repeat in the ops table per iteration (only
    its ops that move bytes for a table of ``op_table = "collectives"``)."""
    t_rank, t_kind = np.asarray(trace.rank, np.int64), np.asarray(trace.kind, np.int64)
    if op_table == "collectives":
        moves = t_kind != OP_COMPUTE
        t_rank, t_kind = t_rank[moves], t_kind[moves]
    n = t_rank.size
    rank, kind = np.asarray(ops["rank"]), np.asarray(ops["kind"])
    if n == 0 or rank.size % n:
        return False
    reps = rank.size // n
    return bool(np.array_equal(np.tile(t_rank, reps), rank.astype(np.int64))
                and np.array_equal(np.tile(t_kind, reps), kind.astype(np.int64)))


def context(record: RunRecord, *, trace=None, search_dirs: Sequence[str | Path] = ()) -> Context:
    """The Context of ``record``: ``trace`` if given (checked against the ops table), else the stored one."""
    notes = []
    work = record.config.get("workload", {})
    gps = int(work.get("gpus_per_server") or 1)
    ops = record.ops
    if ops and len(ops.get("rank", ())):
        if trace is None:
            trace, why = _find_trace(record, [Path(d) for d in search_dirs])
            if why:
                notes.append(f"{why}: ops named by kind, send/recv path unknown")
        if trace is not None and not _trace_matches(trace, ops, record.op_table):
            notes.append("the trace does not match the run's ops table: ops named by kind")
            trace = None
        if record.op_table == "collectives":
            notes.append('telemetry.op_table = "collectives": the run stores no compute ops, so rank tracks '
                         "show only communication")
    else:
        trace = None
        if (why := record.missing_ops()) is not None:
            notes.append(str(why))
    fabric = stored_fabric(record)
    rank_host = None
    if fabric is not None:
        names = _own_names(record, fabric) or names_from_tiers(fabric.name, fabric.node_tier)
        if ops and "n_ranks" in work:
            rank_host = _rank_hosts(record)
    else:
        names = _names_from_description(record.config.get("fabric", {}))
        notes.append("the file stores no fabric (written before runs did): " +
                     ("names from config['fabric']" if names else "nodes named by id"))
    return Context(trace=trace, gpus_per_server=gps, node_names=names, rank_host=rank_host, notes=tuple(notes))


# --- slices -----------------------------------------------------------------------------------------------

def _ends(record: RunRecord, start_ns, finish_ns) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(kept rows, start_ps, finish_ps, unfinished): rows that started; an unfinished one lasts to the end."""
    start, finish = ns_to_ps(start_ns), ns_to_ps(finish_ns)
    end = ns_to_ps(np.asarray([record.summary.get("sim_time_ns") or 0.0], np.float64))[0]
    end = max(int(end), int(start.max(initial=0)), int(finish.max(initial=0)))
    keep = np.flatnonzero(start >= 0)
    unfinished = finish[keep] < 0
    finish = np.where(unfinished, end, finish[keep])
    return keep, start[keep], np.maximum(finish, start[keep]), unfinished


def _unfinished_names(name: np.ndarray, names: list[str], unfinished: np.ndarray) -> np.ndarray:
    """Rename unfinished slices ``<name> (unfinished)`` (names grows)."""
    if not unfinished.any():
        return name
    name = name.copy()
    for code in np.unique(name[unfinished]).tolist():
        names.append(f"{names[code]} (unfinished)")
        name[unfinished & (name == code)] = len(names) - 1
    return name


def _coded(labels: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Codes and the sorted distinct names of ``labels`` (an array of str)."""
    names, code = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    return code.astype(np.int64), [str(x) for x in names]


def _coll_lookup(record: RunRecord, iteration: np.ndarray, coll_id: np.ndarray) -> np.ndarray:
    """Row of the collectives table of each (iteration, coll_id), -1 when absent."""
    colls = record.collectives
    if not colls or not len(colls.get("coll_id", ())):
        return np.full(iteration.size, -1, np.int64)
    c_it, c_id = np.asarray(colls["iteration"], np.int64), np.asarray(colls["coll_id"], np.int64)
    width = int(max(c_id.max(), coll_id.max(initial=0))) + 2
    key = c_it * width + c_id
    order = np.argsort(key, kind="stable")
    want = iteration.astype(np.int64) * width + coll_id.astype(np.int64)
    pos = np.minimum(np.searchsorted(key[order], want), key.size - 1)
    return np.where(key[order][pos] == want, order[pos], -1)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Ops:
    """The ops table rows that started, as int64 columns, with their [start, finish] in ps."""

    rank: np.ndarray
    kind: np.ndarray
    phase: np.ndarray
    iteration: np.ndarray
    coll_id: np.ndarray
    trace_op: np.ndarray
    start_ps: np.ndarray
    finish_ps: np.ndarray
    unfinished: np.ndarray  # bool

    @staticmethod
    def of(record: RunRecord) -> _Ops:
        ops = record.ops
        keep, start, finish, unfinished = _ends(record, ops["start_ns"], ops["finish_ns"])
        col = lambda c: np.asarray(ops[c], np.int64)[keep]  # noqa: E731
        return _Ops(rank=col("rank"), kind=col("kind"), phase=np.clip(col("phase"), 0, len(PHASE_NAMES) - 1),
                    iteration=col("iteration"), coll_id=col("coll_id"), trace_op=col("trace_op"), start_ps=start,
                    finish_ps=finish, unfinished=unfinished)


def _calls_span_servers(record: RunRecord, gps: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted collective call ids, whether the call's members sit on more than one server), from the
    ranks of the ops that ran each call."""
    ops = record.ops
    kind, coll = np.asarray(ops["kind"], np.int64), np.asarray(ops["coll_id"], np.int64)
    rows = np.flatnonzero((kind == OP_COLLECTIVE) & (coll >= 0))
    ids, inverse = np.unique(coll[rows], return_inverse=True)
    server = np.asarray(ops["rank"], np.int64)[rows] // gps
    lo = np.full(ids.size, np.iinfo(np.int64).max)
    hi = np.full(ids.size, -1)
    np.minimum.at(lo, inverse, server)
    np.maximum.at(hi, inverse, server)
    return ids, hi > lo


def _op_categories(record: RunRecord, ops: _Ops, ctx: Context) -> np.ndarray:
    """RANK_CATEGORIES index of every op: compute; NVLink or network by whether the collective's members
    (or the send/recv peer, from the trace) share the op's server; comm for a send/recv without trace."""
    gps = max(ctx.gpus_per_server, 1)
    category = np.full(ops.rank.size, CAT_COMM, np.int64)
    category[ops.kind == OP_COMPUTE] = CAT_COMPUTE
    coll = ops.kind == OP_COLLECTIVE
    ids, spans = _calls_span_servers(record, gps)
    if ids.size and coll.any():
        pos = np.clip(np.searchsorted(ids, ops.coll_id[coll]), 0, ids.size - 1)
        category[coll] = np.where(spans[pos], CAT_NETWORK, CAT_NVLINK)
    if ctx.trace is not None:
        p2p = (ops.kind == OP_SEND) | (ops.kind == OP_RECV)
        peer = np.asarray(ctx.trace.peer, np.int64)[ops.trace_op[p2p]]
        category[p2p] = np.where(peer // gps == ops.rank[p2p] // gps, CAT_NVLINK, CAT_NETWORK)
    return category


def _op_group_kinds(ops: _Ops, trace) -> np.ndarray:
    """GROUP_KIND_NAMES index of every op's group (trace), -1 where unknown."""
    if trace is None or trace.n_groups == 0:
        return np.full(ops.rank.size, -1, np.int64)
    group = np.asarray(trace.group, np.int64)[ops.trace_op]
    kind = np.asarray(trace.group_kind, np.int64)[np.maximum(group, 0)]
    return np.where((group >= 0) & (kind < len(GROUP_KIND_NAMES)), kind, -1)


def _op_names(ops: _Ops, coll_kind: np.ndarray, group_kind: np.ndarray, trace) -> tuple[np.ndarray, list[str]]:
    """Slice names: ``fwd/attn`` (trace label: phase and op) or ``compute forward``; ``all_reduce TP``;
    ``send PP`` / ``recv PP`` (no group word when the trace is unknown)."""
    word = np.array([""] + [f" {g}" for g in GROUP_KIND_NAMES], dtype=object)[group_kind + 1]
    text = np.empty(ops.rank.size, dtype=object)
    comp = ops.kind == OP_COMPUTE
    if trace is not None:
        short = np.array([f"{s.split('/')[0]}/{s.split('/')[-1]}" for s in map(str, trace.labels)], dtype=object)
        text[comp] = short[np.asarray(trace.label, np.int64)[ops.trace_op[comp]]]
    else:
        text[comp] = np.array([f"compute {p}" for p in PHASE_NAMES], dtype=object)[ops.phase[comp]]
    coll = ops.kind == OP_COLLECTIVE
    kinds = np.array([COLL_KIND_NAMES.get(k, "collective") for k in range(6)], dtype=object)
    text[coll] = kinds[np.clip(coll_kind[coll], 0, 5)] + word[coll]
    for kind, verb in ((OP_SEND, "send"), (OP_RECV, "recv")):
        m = ops.kind == kind
        text[m] = verb + word[m]
    other = ~(comp | coll | (ops.kind == OP_SEND) | (ops.kind == OP_RECV))
    text[other] = "op"
    name, names = _coded(text)
    return _unfinished_names(name, names, ops.unfinished), names


def _op_args(ops: _Ops, trace, coll_bytes: np.ndarray) -> list[str]:
    """JSON args of every op: iteration, trace_op, phase; with the trace its label, micro-batch, layer and
    compute time and FLOPs (compute) or bytes (communication) and peer (send/recv); coll_id of collectives
    (bytes from the collectives table when there is no trace); ``unfinished``."""
    phase = np.array(_escaped(PHASE_NAMES), dtype=object)[ops.phase]
    labels = np.array(_escaped([str(x) for x in trace.labels]), dtype=object) if trace is not None else None
    args: list[str] = [""] * ops.rank.size
    groups = {"compute": ops.kind == OP_COMPUTE, "collective": ops.kind == OP_COLLECTIVE,
              "p2p": (ops.kind == OP_SEND) | (ops.kind == OP_RECV)}
    groups["other"] = ~(groups["compute"] | groups["collective"] | groups["p2p"])
    for what, mask in groups.items():
        idx = np.flatnonzero(mask)
        if not idx.size:
            continue
        fields = [("iteration", ops.iteration[idx]), ("trace_op", ops.trace_op[idx]), ("phase", list(phase[idx]))]
        if trace is not None and what != "other":
            t_op = ops.trace_op[idx]
            column = lambda c: np.asarray(getattr(trace, c), np.int64)[t_op]  # noqa: E731
            fields.append(("label", list(labels[column("label")])))
            fields += ([("duration_ns", column("duration_ns")), ("flops", column("flops"))] if what == "compute"
                       else [("bytes", column("bytes"))])
            if what == "p2p":
                fields.append(("peer", column("peer")))
            fields += [("microbatch", column("microbatch")), ("layer", column("layer"))]
        if what == "collective":
            fields.append(("coll_id", ops.coll_id[idx]))
            if trace is None:
                fields.append(("bytes", coll_bytes[idx]))
        if ops.unfinished[idx].any():
            fields.append(("unfinished", ops.unfinished[idx]))
        for i, text in zip(idx.tolist(), json_rows(fields)):
            args[i] = text
    return args


def rank_slices(record: RunRecord, ctx: Context) -> SliceSet | None:
    """The ops of every rank on its compute / NVLink / network / comm tracks; None for a run without ops."""
    if not record.ops or not len(record.ops.get("rank", ())):
        return None
    ops = _Ops.of(record)
    colls = record.collectives
    row = _coll_lookup(record, ops.iteration, ops.coll_id)
    from_table = lambda c: np.where(row >= 0, np.asarray(colls[c], np.int64)[np.maximum(row, 0)], -1)  # noqa: E731
    have_table = bool(colls) and len(colls.get("coll_id", ())) > 0
    coll_kind = from_table("kind") if have_table else (
        np.asarray(ctx.trace.coll_kind, np.int64)[ops.trace_op] if ctx.trace is not None
        else np.zeros(ops.rank.size, np.int64))
    coll_bytes = from_table("bytes") if have_table else np.full(ops.rank.size, -1, np.int64)
    category = _op_categories(record, ops, ctx)
    name, names = _op_names(ops, coll_kind, _op_group_kinds(ops, ctx.trace), ctx.trace)
    key = ops.rank * len(RANK_CATEGORIES) + category
    tracks = {}
    for k in np.unique(key).tolist():
        r, c = divmod(k, len(RANK_CATEGORIES))
        known = ctx.rank_host is not None and r < ctx.rank_host.size
        host = f" ({ctx.node(int(ctx.rank_host[r]))})" if known else ""
        tracks[k] = f"rank {r}{host} {RANK_CATEGORIES[c]}"
    return SliceSet(category="ops", key=key, start_ps=ops.start_ps, finish_ps=ops.finish_ps, name=name,
                    names=tuple(names), args=_op_args(ops, ctx.trace, coll_bytes), tracks=tracks)


def _members_from_ops(record: RunRecord) -> dict[int, str]:
    """Group index → its member ranks as text, from the ranks of the collective ops of its calls."""
    ops, colls = record.ops, record.collectives
    if not ops or not len(ops.get("rank", ())):
        return {}
    call, group = np.asarray(colls["coll_id"], np.int64), np.asarray(colls["group"], np.int64)
    ids, first = np.unique(call, return_index=True)
    rows = np.flatnonzero(np.asarray(ops["kind"], np.int64) == OP_COLLECTIVE)
    o_call = np.asarray(ops["coll_id"], np.int64)[rows]
    pos = np.clip(np.searchsorted(ids, o_call), 0, ids.size - 1)
    found = ids[pos] == o_call
    pairs = np.unique(np.stack([group[first][pos[found]], np.asarray(ops["rank"], np.int64)[rows][found]], 1), axis=0)
    split = np.flatnonzero(np.diff(pairs[:, 0])) + 1
    return {int(chunk[0, 0]): rank_list(chunk[:, 1].tolist()) for chunk in np.split(pairs, split) if chunk.size}


def collective_slices(record: RunRecord, ctx: Context) -> SliceSet | None:
    """One track per collective group with its calls (kind, bytes, algorithm, members in args)."""
    colls = record.collectives
    if not colls or not len(colls.get("coll_id", ())):
        return None
    keep, start, finish, unfinished = _ends(record, colls["start_ns"], colls["finish_ns"])
    group = np.asarray(colls["group"], np.int64)[keep]
    kind = np.asarray(colls["kind"], np.int64)[keep]
    coll_id = np.asarray(colls["coll_id"], np.int64)[keep]
    # members of each group: from the trace's groups table, else from the ops that ran its calls
    members: dict[int, str] = {}
    group_kind: dict[int, int] = {}
    trace = ctx.trace
    for g in np.unique(group).tolist():
        if trace is not None and 0 <= g < trace.n_groups:
            ptr = np.asarray(trace.group_ptr, np.int64)
            members[g] = rank_list(np.asarray(trace.group_ranks)[ptr[g]:ptr[g + 1]].tolist())
            group_kind[g] = int(np.asarray(trace.group_kind)[g])
    if len(members) < np.unique(group).size:
        members = _members_from_ops(record) | members
    word = {g: GROUP_KIND_NAMES[k] for g, k in group_kind.items() if 0 <= k < len(GROUP_KIND_NAMES)}
    coll_names = [COLL_KIND_NAMES.get(k, "collective") for k in range(6)]
    text = [coll_names[k] + (f" {word[g]}" if g in word else "")
            for k, g in zip(np.clip(kind, 0, 5).tolist(), group.tolist())]
    name, names = _coded(text)
    name = _unfinished_names(name, names, unfinished)
    algo = np.asarray(colls["algorithm"], np.int64)[keep]
    members_json = {g: json.dumps(members.get(g, "")) for g in np.unique(group).tolist()}
    algo_json = np.array(_escaped(ALGORITHM_NAMES + ("unknown",)), dtype=object)[
        np.where((algo >= 0) & (algo < len(ALGORITHM_NAMES)), algo, len(ALGORITHM_NAMES))]
    fields = [("iteration", np.asarray(colls["iteration"], np.int64)[keep]), ("coll_id", coll_id),
              ("group", group), ("bytes", np.asarray(colls["bytes"], np.int64)[keep]),
              ("algorithm", list(algo_json)), ("members", [members_json[g] for g in group.tolist()])]
    if unfinished.any():
        fields.append(("unfinished", unfinished))
    tracks = {g: (f"{word[g]} " if g in word else "") + f"group {g} (ranks {members.get(g, '?')})"
              for g in np.unique(group).tolist()}
    return SliceSet(category="collectives", key=group, start_ps=start, finish_ps=finish, name=name,
                    names=tuple(names), args=json_rows(fields), tracks=tracks)


def iteration_slices(record: RunRecord) -> SliceSet | None:
    """One slice per training iteration, [start, finish] of the iterations table."""
    its = record.iterations
    if not its or not len(its.get("iteration", ())):
        return None
    keep, start, finish, unfinished = _ends(record, its["start_ns"], its["finish_ns"])
    it = np.asarray(its["iteration"], np.int64)[keep]
    name, names = _coded([f"iteration {i}" for i in it.tolist()])
    name = _unfinished_names(name, names, unfinished)
    fields = [("iteration", it), ("time_ns", np.asarray(its["time_ns"], np.float64)[keep]),
              ("exposed_comm_ns", np.asarray(its["exposed_comm_ns"], np.float64)[keep])]
    if unfinished.any():
        fields.append(("unfinished", unfinished))
    return SliceSet(category="iterations", key=np.zeros(it.size, np.int64), start_ps=start, finish_ps=finish,
                    name=name, names=tuple(names), args=json_rows(fields), tracks={0: "iterations"})


def flow_slices(record: RunRecord, ctx: Context) -> SliceSet | None:
    """One slice per flow on a track per source host, named by its destination."""
    flows = record.flows
    if not flows or not len(flows.get("src", ())):
        return None
    keep, start, finish, unfinished = _ends(record, flows["start_ns"], flows["finish_ns"])
    src = np.asarray(flows["src"], np.int64)[keep]
    dst = np.asarray(flows["dst"], np.int64)[keep]
    node_text = {d: ctx.node(d) for d in np.unique(np.concatenate([src, dst])).tolist()}
    name, names = _coded([f"flow → {node_text[d]}" for d in dst.tolist()])
    name = _unfinished_names(name, names, unfinished)
    fields = [("flow", keep), ("src", src), ("dst", dst),
              ("size_bytes", np.asarray(flows["size_bytes"], np.int64)[keep])]
    for col, dtype in (("delivered_bytes", np.int64), ("fct_ns", np.float64), ("slowdown", np.float64)):
        if col in flows:
            fields.append((col, np.asarray(flows[col], dtype)[keep]))
    if unfinished.any():
        fields.append(("unfinished", unfinished))
    tracks = {s: f"flows from {node_text[s]}" for s in np.unique(src).tolist()}
    return SliceSet(category="flows", key=src, start_ps=start, finish_ps=finish, name=name, names=tuple(names),
                    args=json_rows(fields), tracks=tracks)


# --- fabric counters --------------------------------------------------------------------------------------

def port_names(record: RunRecord, ctx: Context, node: np.ndarray, port: np.ndarray) -> list[str]:
    """``<node> p<port>→<peer>`` of each (node, port) (the peer from the ports table when it has one)."""
    ports = record.ports
    peer_of: dict[tuple[int, int], int] = {}
    if ports and "peer" in ports:
        peer_of = {(int(n), int(p)): int(q) for n, p, q in zip(np.asarray(ports["node"]).tolist(),
                                                               np.asarray(ports["port"]).tolist(),
                                                               np.asarray(ports["peer"]).tolist())}
    out = []
    for n, p in zip(np.asarray(node).tolist(), np.asarray(port).tolist()):
        peer = peer_of.get((n, p))
        out.append(f"{ctx.node(n)} p{p}" + (f"→{ctx.node(peer)}" if peer is not None else ""))
    return out


def _held_integral(key: np.ndarray, time_ps: np.ndarray, value: np.ndarray, end_ps: int, n_keys: int) -> np.ndarray:
    """Per key, the sum of value × time held (each sample holds until the key's next one, the last until
    ``end_ps``); rows sorted by (key, time)."""
    nxt = np.empty_like(time_ps)
    if time_ps.size:
        nxt[:-1] = time_ps[1:]
        nxt[-1] = end_ps
        last = np.append(key[1:] != key[:-1], True)
        nxt[last] = np.maximum(end_ps, time_ps[last])
    area = np.zeros(n_keys, np.float64)
    np.add.at(area, key, value.astype(np.float64) * (nxt - time_ps).astype(np.float64))
    return area


def _counter_set(record: RunRecord, ctx: Context, node, port, time_ps, value, *, arg: str, prefix: str,
                 ports: int | None) -> CounterSet | None:
    """Counter samples per (node, port), keeping the ``ports`` busiest series (largest held integral) and,
    per series and time, the last sample."""
    if not np.asarray(node).size or ports == 0:
        return None
    node, port = np.asarray(node, np.int64), np.asarray(port, np.int64)
    width = int(port.max(initial=0)) + 1
    codes, key = np.unique(node * width + port, return_inverse=True)
    pairs = np.stack(np.divmod(codes, width), axis=1)
    key = key.reshape(-1).astype(np.int64)
    # samples are recorded in time order: a stable sort by key then keeps each port's samples in time order
    in_time_order = time_ps.size < 2 or bool(np.all(time_ps[1:] >= time_ps[:-1]))
    order = np.argsort(key, kind="stable") if in_time_order else np.lexsort((np.arange(key.size), time_ps, key))
    key, time_ps, value = key[order], time_ps[order], value[order]
    last = np.append((key[1:] != key[:-1]) | (time_ps[1:] != time_ps[:-1]), True)
    key, time_ps, value = key[last], time_ps[last], value[last]
    end = int(ns_to_ps(np.asarray([record.summary.get("sim_time_ns") or 0.0]))[0])
    end = max(end, int(time_ps.max(initial=0)))
    area = _held_integral(key, time_ps, value, end, len(pairs))
    chosen = np.lexsort((np.arange(len(pairs)), -area))
    if ports is not None:
        chosen = chosen[:ports]
    chosen = np.sort(chosen)
    if not chosen.size:
        return None
    remap = np.full(len(pairs), -1, np.int64)
    remap[chosen] = np.arange(chosen.size)
    rows = remap[key] >= 0
    labels = port_names(record, ctx, pairs[chosen, 0], pairs[chosen, 1])
    return CounterSet(what=prefix, arg=arg, series=remap[key][rows], time_ps=time_ps[rows], value=value[rows].astype(np.int64),
                      series_names=tuple(f"{prefix} {s}" for s in labels), selected_of=len(pairs))


def queue_counters(record: RunRecord, ctx: Context, *, ports: int | None = DEFAULT_PORTS) -> CounterSet | None:
    """Queued bytes of the ``ports`` busiest egress queues, every stored (change-only) sample."""
    q = record.queues
    if not q or not len(q.get("node", ())):
        return None
    return _counter_set(record, ctx, q["node"], q["port"], ns_to_ps(q["time_ns"]), np.asarray(q["bytes"], np.int64),
                        arg="bytes", prefix="queue", ports=ports)


def _state_counts(record: RunRecord, ctx: Context, table: Mapping, sub: str, flag: str, *, arg: str, prefix: str,
                  ports: int | None) -> CounterSet | None:
    """From state-change events of (node, port, ``sub``), the number of ``sub`` in state 1 per (node, port)
    after each event (repeated events of one state change nothing)."""
    if not table or not len(table.get("node", ())) or ports == 0:
        return None
    node, port = np.asarray(table["node"], np.int64), np.asarray(table["port"], np.int64)
    subkey, state = np.asarray(table[sub], np.int64), (np.asarray(table[flag]) != 0).astype(np.int64)
    time_ps = ns_to_ps(table["time_ns"])
    # per (node, port, sub) in time order: delta = state - previous state (0 before the first event)
    order = np.lexsort((np.arange(node.size), time_ps, subkey, port, node))
    node, port, subkey, state, time_ps = node[order], port[order], subkey[order], state[order], time_ps[order]
    first = np.append(True, (node[1:] != node[:-1]) | (port[1:] != port[:-1]) | (subkey[1:] != subkey[:-1]))
    prev = np.where(first, 0, np.append(0, state[:-1]))
    delta = state - prev
    # per (node, port) in time order: running sum of deltas
    order = np.lexsort((np.arange(node.size), time_ps, port, node))
    node, port, delta, time_ps = node[order], port[order], delta[order], time_ps[order]
    starts = np.append(True, (node[1:] != node[:-1]) | (port[1:] != port[:-1]))
    total = np.cumsum(delta)
    base = np.maximum.accumulate(np.where(starts, np.arange(node.size), 0))
    count = total - np.append(0, total)[base]
    return _counter_set(record, ctx, node, port, time_ps, count, arg=arg, prefix=prefix, ports=ports)


def pause_counters(record: RunRecord, ctx: Context, *, ports: int | None = DEFAULT_PORTS) -> CounterSet | None:
    """Paused PFC priorities per egress port over time (RoCE runs)."""
    return _state_counts(record, ctx, record.pauses, "priority", "paused", arg="priorities", prefix="PFC paused",
                         ports=ports)


def stall_counters(record: RunRecord, ctx: Context, *, ports: int | None = DEFAULT_PORTS) -> CounterSet | None:
    """Credit-stalled virtual lanes per egress port over time (InfiniBand runs)."""
    return _state_counts(record, ctx, record.stalls, "vl", "stalled", arg="vls", prefix="credit stall", ports=ports)


def decimation_keep(series: np.ndarray, time_ps: np.ndarray, value: np.ndarray, end_ps: int,
                    bins: int) -> np.ndarray:
    """Rows to keep of counter samples sorted by (series, time) so each series has at most three per time
    bin (``bins`` bins over [0, ``end_ps``]): the bin's first largest and first smallest value and its last
    sample. Peaks and troughs keep their height and every bin ends at the value then in effect, so a step
    line through the kept samples differs from the full one only inside bins."""
    n = series.size
    if n == 0:
        return np.zeros(0, bool)
    width = max(int(end_ps), int(time_ps.max())) + 1
    b = np.minimum(time_ps.astype(np.float64) * bins // width, bins - 1).astype(np.int64)
    group = np.append(True, (series[1:] != series[:-1]) | (b[1:] != b[:-1]))
    starts = np.flatnonzero(group)
    gid = np.cumsum(group) - 1
    keep = np.zeros(n, bool)
    keep[np.append(starts[1:] - 1, n - 1)] = True  # last sample of each bin
    for extreme in (np.maximum, np.minimum):
        hit = value == extreme.reduceat(value, starts)[gid]
        first = np.flatnonzero(hit)
        keep[first[np.append(True, gid[first][1:] != gid[first][:-1])]] = True
    return keep


def decimate(c: CounterSet, end_ps: int, bins: int | None) -> CounterSet:
    """``c`` with at most three samples per series and time bin (:func:`decimation_keep`); all if ``bins`` is
    None or the series have no more than that anyway."""
    if bins is None or c.n <= 3 * bins:
        return c
    order = np.lexsort((np.arange(c.n), c.time_ps, c.series))
    series, time_ps, value = c.series[order], c.time_ps[order], c.value[order]
    keep = decimation_keep(series, time_ps, value, end_ps, bins)
    return dataclasses.replace(c, series=series[keep], time_ps=time_ps[keep], value=value[keep], stored=c.n)


def run_timeline(record: RunRecord, ctx: Context, *, ports: int | None = DEFAULT_PORTS,
                 flows: bool | None = None, counter_bins: int | None = COUNTER_BINS) -> RunTimeline:
    """Every slice and counter set of ``record``; ``flows`` None exports flows only for runs without ops;
    ``counter_bins``: decimate each counter track to at most 3 samples per bin (None: every sample)."""
    has_ops = bool(record.ops) and len(record.ops.get("rank", ())) > 0
    with_flows = (not has_ops) if flows is None else flows
    slices = [iteration_slices(record), rank_slices(record, ctx), collective_slices(record, ctx),
              flow_slices(record, ctx) if with_flows else None]
    counters = [queue_counters(record, ctx, ports=ports), pause_counters(record, ctx, ports=ports),
                stall_counters(record, ctx, ports=ports)]
    end_ps = int(ns_to_ps(np.asarray([record.summary.get("sim_time_ns") or 0.0]))[0])
    counters = [decimate(c, end_ps, counter_bins) if c is not None else None for c in counters]
    return RunTimeline(name=record.name, slices=tuple(s for s in slices if s is not None and s.n),
                       counters=tuple(c for c in counters if c is not None and c.n), notes=ctx.notes)


# --- writing ----------------------------------------------------------------------------------------------

def _us(ps: np.ndarray) -> list[str]:
    """µs text with six decimals (exact picoseconds) of non-negative int64 ps."""
    q, r = np.divmod(np.asarray(ps, np.int64), PS_PER_US)
    return [f"{a}.{b:06d}" for a, b in zip(q.tolist(), r.tolist())]


def _meta(pid: int, tid: int | None, what: str, args: str) -> str:
    where = f'"pid":{pid}' + (f',"tid":{tid}' if tid is not None else "")
    return f'{{"ph":"M",{where},"name":"{what}","args":{args}}}'


@dataclass(slots=True)
class ExportStats:
    """What an export wrote. ``runs[name]``: ``tracks`` (slice tracks), ``slices``, ``counter_samples`` (of
    ``counter_samples_stored`` before decimation), ``counter_tracks`` (counter kind → (ports exported, ports with data)) and ``notes`` (what could not be
    resolved, e.g. a trace file not found)."""

    path: Path
    runs: dict[str, dict] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return sum(r["slices"] + r["counter_samples"] for r in self.runs.values())


def place_tracks(s: SliceSet, first_tid: int) -> tuple[dict[int, str], np.ndarray]:
    """Threads of one slice family: {tid: track name} from ``first_tid`` on, one per (key, lane) in sorted
    order (lanes after the first named ``#2``...), and every slice's tid."""
    lane = assign_lanes(s.key, s.start_ps, s.finish_ps)
    width = int(lane.max(initial=0)) + 1
    pair_key, slice_pair = np.unique(s.key * width + lane, return_inverse=True)
    tids = np.arange(first_tid, first_tid + pair_key.size, dtype=np.int64)
    labels = {}
    for (k, ln), t in zip(zip(*(x.tolist() for x in np.divmod(pair_key, width))), tids.tolist()):
        labels[t] = s.tracks[k] + (f" #{ln + 1}" if ln else "")
    return labels, tids[slice_pair.reshape(-1)]


def _run_events(pid: int, tl: RunTimeline, stats: dict) -> Iterator[list[str]]:
    """Batches of event texts of one run: names first (process, threads), then slices, then counters."""
    meta = [_meta(pid, None, "process_name", json.dumps({"name": tl.name})),
            _meta(pid, None, "process_sort_index", json.dumps({"sort_index": pid}))]
    tid = 0
    placed = []
    for s in tl.slices:
        labels, slice_tid = place_tracks(s, tid + 1)
        for t, label in labels.items():
            meta.append(_meta(pid, t, "thread_name", json.dumps({"name": label})))
            meta.append(_meta(pid, t, "thread_sort_index", json.dumps({"sort_index": t})))
        tid += len(labels)
        placed.append((s, slice_tid))
        stats["tracks"] += len(labels)
    yield meta
    for s, slice_tid in placed:
        order = np.lexsort((np.arange(s.n), s.start_ps, slice_tid))
        cat = json.dumps(s.category)
        names = _escaped(s.names)
        for lo in range(0, s.n, BATCH_EVENTS):
            rows = order[lo:lo + BATCH_EVENTS]
            ts, dur = _us(s.start_ps[rows]), _us(s.finish_ps[rows] - s.start_ps[rows])
            yield [f'{{"ph":"X","pid":{pid},"tid":{t},"ts":{a},"dur":{d},"cat":{cat},"name":{names[n]},'
                   f'"args":{s.args[i]}}}'
                   for t, a, d, n, i in zip(slice_tid[rows].tolist(), ts, dur, s.name[rows].tolist(), rows.tolist())]
        stats["slices"] += s.n
    for c in tl.counters:
        order = np.lexsort((np.arange(c.n), c.time_ps, c.series))
        names = _escaped(c.series_names)
        arg = json.dumps(c.arg)
        for lo in range(0, c.n, BATCH_EVENTS):
            rows = order[lo:lo + BATCH_EVENTS]
            yield [f'{{"ph":"C","pid":{pid},"ts":{a},"name":{names[k]},"args":{{{arg}:{v}}}}}'
                   for a, k, v in zip(_us(c.time_ps[rows]), c.series[rows].tolist(), c.value[rows].tolist())]
        count_counters(stats, c)


def count_counters(stats: dict, c: CounterSet) -> None:
    """Add counter set ``c`` to a run's export statistics."""
    stats["counter_samples"] += c.n
    stats["counter_samples_stored"] += c.stored
    stats["counter_tracks"][c.what] = (len(c.series_names), c.selected_of)


def new_run_stats(tl: RunTimeline) -> dict:
    """The empty statistics of one run's export (see ExportStats)."""
    return {"slices": 0, "counter_samples": 0, "counter_samples_stored": 0, "tracks": 0, "counter_tracks": {},
            "notes": list(tl.notes)}


def write_timelines(path: str | Path, timelines: Sequence[RunTimeline], *, source: str = "") -> ExportStats:
    """Write ``timelines`` (one process each, pid 1, 2, ... in order) as Chrome Trace Event JSON to ``path``
    (gzip-compressed if it ends in ``.gz``), atomically; events are streamed in batches."""
    path = Path(path)
    stats = ExportStats(path=path)
    header = {"displayTimeUnit": "ns",
              "otherData": {"generator": f"cosim {__version__}", "source": source,
                            "runs": [t.name for t in timelines]}}
    with atomic_output(path) as tmp, open(tmp, "wb") as raw:
        # mtime 0 and no file name in the gzip header: the same inputs give the same bytes
        out = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") if path.suffix == ".gz" else raw
        try:
            head = json.dumps(header, sort_keys=True)
            out.write((head[:-1] + ',"traceEvents":[\n').encode())
            first = True
            for pid, tl in enumerate(timelines, start=1):
                run = new_run_stats(tl)
                stats.runs[tl.name] = run
                for batch in _run_events(pid, tl, run):
                    if not batch:
                        continue
                    out.write((("" if first else ",\n") + ",\n".join(batch)).encode())
                    first = False
            out.write(b"\n]}\n")
        finally:
            if out is not raw:
                out.close()
    return stats


def _proto_uuid(pid: int, k: int) -> int:
    """Track uuid: the process in the high bits, its k-th track (0: the process) in the low ones."""
    return pid << 32 | k


def _run_packets(pid: int, tl: RunTimeline, stats: dict) -> Iterator[list[bytes]]:
    """Batches of protobuf packets of one run: its tracks, then every event in time order (at one time, a
    track's events in their order on it: a slice's end before the next one's begin)."""
    proc = _proto_uuid(pid, 0)
    head = [pb.track_descriptor(proc, process=(pid, tl.name))]
    tid = 0
    # the events as columns: time (ns), track uuid, rank on the track, kind, and the row of its payload
    # (a slice's body for a begin, a counter value)
    cols: dict[str, list[np.ndarray]] = {"time": [], "track": [], "rank": [], "kind": [], "row": []}
    bodies: list[bytes] = []
    values: list[np.ndarray] = []

    def add(time, track, rank, kind, row):
        for name, col in zip(cols, (time, track, rank, np.full(np.size(time), kind, np.int8), row)):
            cols[name].append(np.asarray(col, np.int64))

    for s in tl.slices:
        labels, slice_tid = place_tracks(s, tid + 1)
        head += [pb.track_descriptor(_proto_uuid(pid, t), parent=proc, thread=(pid, t, label))
                 for t, label in labels.items()]
        tid += len(labels)
        stats["tracks"] += len(labels)
        cat = pb.str_field(pb.TE_CATEGORIES, s.category)
        names = [pb.str_field(pb.TE_NAME, n) for n in s.names]
        rows = len(bodies) + np.arange(s.n)
        bodies += [cat + names[n] + pb.annotations(a) for n, a in zip(s.name.tolist(), s.args)]
        # a track's slices follow one another in (start, finish) order, as its lanes were assigned (a slice
        # of no duration before a longer one that starts with it): the k-th begins at rank 2k, ends at 2k + 1
        k = np.empty(s.n, np.int64)
        k[np.lexsort((np.arange(s.n), s.finish_ps, s.start_ps, slice_tid))] = np.arange(s.n)
        track = _proto_uuid(pid, 0) + slice_tid
        add(pb.ps_to_ns(s.start_ps), track, 2 * k, pb.SLICE_BEGIN, rows)
        add(pb.ps_to_ns(s.finish_ps), track, 2 * k + 1, pb.SLICE_END, rows)
        stats["slices"] += s.n
    n_values = 0
    for c in tl.counters:
        uuids = np.array([_proto_uuid(pid, tid + 1 + j) for j in range(len(c.series_names))], np.int64)
        head += [pb.track_descriptor(int(u), parent=proc, name=f"{name} {c.arg}", counter=True)
                 for u, name in zip(uuids, c.series_names)]
        tid += uuids.size
        order = np.lexsort((np.arange(c.n), c.time_ps, c.series))
        add(pb.ps_to_ns(c.time_ps[order]), uuids[c.series[order]], np.arange(c.n), pb.COUNTER,
            n_values + np.arange(c.n))
        values.append(c.value[order])
        n_values += c.n
        count_counters(stats, c)
    yield head
    if not cols["time"]:
        return
    time, track, rank, kind, row = (np.concatenate(cols[name]) for name in cols)
    value = np.concatenate(values) if values else np.empty(0, np.int64)
    order = np.lexsort((rank, track, time))
    for lo in range(0, order.size, BATCH_PACKETS):
        batch = []
        for i in order[lo:lo + BATCH_PACKETS].tolist():
            what, on = int(kind[i]), int(track[i])
            if what == pb.COUNTER:
                event = pb.counter_event(on, int(value[row[i]]))
            elif what == pb.SLICE_BEGIN:
                event = pb.slice_begin(on, bodies[row[i]])
            else:
                event = pb.slice_end(on)
            batch.append(pb.packet(event, int(time[i])))
        yield batch


def write_proto(path: str | Path, timelines: Sequence[RunTimeline], *, source: str = "") -> ExportStats:
    """Write ``timelines`` (one process each, pid 1, 2, ... in order) as a Perfetto protobuf trace to ``path``
    atomically; the same inputs give the same bytes. ``source`` is not stored (the trace has no place for it
    that the UI shows); it is accepted for symmetry with the JSON writer."""
    path = Path(path)
    stats = ExportStats(path=path)
    with atomic_output(path) as tmp, open(tmp, "wb") as out:
        out.write(pb.packet(pb.uint_field(pb.SEQUENCE_FLAGS, pb.SEQ_INCREMENTAL_STATE_CLEARED)))
        for pid, tl in enumerate(timelines, start=1):
            run = new_run_stats(tl)
            stats.runs[tl.name] = run
            for batch in _run_packets(pid, tl, run):
                out.write(b"".join(batch))
    return stats


#: export formats: name -> default file suffix
FORMATS = {"proto": ".pftrace", "json": ".json"}


def format_of(output: str | Path, fmt: str | None) -> str:
    """The export format: ``fmt``, else JSON for a ``.json`` or ``.json.gz`` name, else Perfetto protobuf."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise CosimInputError("--format", f"{fmt!r} is not a format", f"choose {' or '.join(FORMATS)}")
        return fmt
    name = Path(output).name.lower()
    return "json" if name.endswith((".json", ".json.gz")) else "proto"


def export_perfetto(results_path: str | Path, output: str | Path, *, runs: Sequence[str] = (),
                    ports: int | None = DEFAULT_PORTS, flows: bool | None = None, trace_path: str | Path | None = None,
                    fmt: str | None = None, counter_bins: int | None = COUNTER_BINS) -> ExportStats:
    """Export the runs of a results file (all, or ``runs`` by name) as a Perfetto timeline (module docstring);
    bad input is a one-line CosimInputError and writes nothing.

    ``ports`` is how many of the busiest ports get counters per fabric counter kind (None: all); ``flows``
    exports flows as slices (None: only for runs without ops); ``trace_path`` is the workload trace of the
    runs, for when the stored path no longer finds it; ``fmt`` "proto" (Perfetto's protobuf trace,
    cosim.analysis.perfetto_proto) or "json" (Chrome Trace Event JSON), by default from the output name
    (:func:`format_of`); ``counter_bins`` decimates each counter track to at most 3 samples per bin of the
    run's time (None: every stored sample).
    """
    results_path, output = Path(results_path), Path(output)
    fmt = format_of(output, fmt)
    if output.exists() and results_path.exists() and output.resolve() == results_path.resolve():
        raise CosimInputError("--output", f"{output} is the results file itself",
                              "name a .pftrace, .json or .json.gz file")
    if ports is not None and ports < 0:
        raise CosimInputError("--ports", f"{ports} is negative", "give a count >= 0 or 'all'")
    if counter_bins is not None and counter_bins < 1:
        raise CosimInputError("counter_bins", f"{counter_bins} is below 1", "give a count >= 1 or None for all")
    records = read_results(results_path)
    if not records:
        raise CosimInputError(str(results_path), "holds no run", "write one with 'cosim run'")
    for name in runs:
        if name not in records:
            raise CosimInputError("--run", f"no run {name!r} in {results_path}",
                                  f"runs: {', '.join(sorted(records))}")
    chosen = [records[n] for n in dict.fromkeys(runs)] if runs else list(records.values())
    trace = None
    if trace_path is not None:
        from cosim.workload.trace import read_trace  # noqa: PLC0415

        trace = read_trace(trace_path)
    search = [results_path.parent] if str(results_path.parent) else []
    timelines = []
    for record in chosen:
        ctx = context(record, trace=trace, search_dirs=search)
        timelines.append(run_timeline(record, ctx, ports=ports, flows=flows, counter_bins=counter_bins))
    if fmt == "proto":
        return write_proto(output, timelines, source=results_path.name)
    return write_timelines(output, timelines, source=results_path.name)
