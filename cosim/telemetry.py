"""The network part of a run record: tables and summary of one simulation, shared by every kind of run.

Every run (cosim.record) turns an engine.SimulationOutput into the same ``flows``/``queues``/``ports``/
``pauses``/``latency``/``stalls`` tables and the same summary keys, so any two runs compare column for
column.
"""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Callable, Mapping

import numpy as np

from cosim import __version__, engine
from cosim.memory import RECORD_SLICE_FLOWS
from cosim.arrays import run_starts
from cosim.network.ideal import PathCache, ideal_fct_ns
from cosim.network.topology import SWITCH
from cosim.streamed import StreamedTable, table_rows, table_slices

#: rows of a queue change log handled at a time (queue_percentile_bytes' temporaries are a few times this)
QUEUE_LOG_SLICE_ROWS = 1 << 22


def queue_percentile_bytes(queues: Mapping[str, np.ndarray], n_ports: int, interval_ns: float,
                           sim_time_ns: float, q: float = 99.0) -> float:
    """Percentile ``q`` of the queue depth over every sample of every watched port.

    ``queues`` is the sampler's change log (a row when a port's depth changed since its last sample); each
    change holds until the port's next one, and samples before a port's first change (or of a port never
    recorded) are 0. Samples are taken every ``interval_ns`` from time 0 to ``sim_time_ns``.

    A change log can hold tens of millions of rows (a fold copies its part's to every part, as a
    cosim.streamed.StreamedTable), so it is read a slice at a time in time order, keeping per port its last
    change, whose samples are known at the port's next change (or the end); the samples are summed per depth,
    and the percentile is the smallest depth whose samples at or below it reach the target. A StreamedTable
    that names the logs it copies (``copied_from``) is read from those: every copy of a port holds the same
    samples, so a row's samples count once per copy (exact integer sums, the same percentile).
    """
    if table_rows(queues) == 0 or n_ports <= 0:
        return 0.0
    sources = queues.copied_from if isinstance(queues, StreamedTable) and queues.copied_from is not None \
        else ((queues, None),)
    depths, weights = np.zeros(0, np.int64), np.zeros(0, np.int64)  # samples per depth, depths sorted
    last, open_changes = -1, []
    for log, copies in sources:
        depths, weights, pending, log_last = _held_samples(log, copies, interval_ns, depths, weights)
        last = max(last, log_last)
        open_changes.append(pending)
    n_samples = max(int(sim_time_ns // interval_ns) + 1, last + 1)
    for _, p_k, p_depth, p_copies in open_changes:
        depths, weights = _add_weights(depths, weights, p_depth, np.maximum(n_samples - p_k, 0) * p_copies)
    total = int(weights.sum())
    zeros = max(n_ports * n_samples - total, 0)  # samples at depth 0 before any change
    target = q / 100.0 * (zeros + total)
    if zeros >= target:
        return 0.0
    reached = (zeros + np.cumsum(weights)).astype(np.float64) >= target
    return float(depths[int(np.argmax(reached))])


def _held_samples(queues: Mapping[str, np.ndarray], copies: np.ndarray | None, interval_ns: float,
                  depths: np.ndarray, weights: np.ndarray):
    """Samples per depth of ``queues``' changes that end within the log, added to (``depths``, ``weights``),
    each row counting ``copies[row]`` times (once without ``copies``); returns those and the changes still
    holding at the log's end (per port: key, sample, depth, copies) and the last sample a counted row is at
    (-1: none)."""
    if copies is not None:
        queues = {**queues, "copies": copies}
    if not isinstance(queues, StreamedTable):
        time = np.asarray(queues["time_ns"], np.float64)
        if np.any(time[1:] < time[:-1]):  # the sampler logs in time order; another log is put in it
            order = np.argsort(np.rint(time / interval_ns).astype(np.int64), kind="stable")
            queues = {k: np.asarray(x)[order] for k, x in queues.items()}
    pending = (np.zeros(0, np.int64),) * 4  # per port: key, sample, depth, copies
    last = -1
    for part in table_slices(queues, QUEUE_LOG_SLICE_ROWS):
        if not part["time_ns"].size:
            continue
        k = np.rint(np.asarray(part["time_ns"], np.float64) / interval_ns).astype(np.int64)
        c = np.asarray(part["copies"], np.int64) if copies is not None else np.ones(k.size, np.int64)
        counted = k[c > 0]
        if counted.size:
            last = max(last, int(counted.max()))
        key = (np.asarray(part["node"]).astype(np.int64) << 32) + np.asarray(part["port"])
        order = np.argsort(key, kind="stable")  # per port, its changes in time order
        key, k, depth, c = key[order], k[order], np.asarray(part["bytes"]).astype(np.int64)[order], c[order]
        same = key[1:] == key[:-1]
        first, final = np.ones(key.size, bool), np.ones(key.size, bool)
        first[1:], final[:-1] = ~same, ~same
        held = np.maximum(k[1:] - k[:-1], 0)[same] * c[:-1][same]  # a change holds until its port's next one
        # a port's pending change from an earlier slice holds until its first change in this one
        p_key, p_k, p_depth, p_c = pending
        at = np.minimum(np.searchsorted(p_key, key[first]), max(p_key.size - 1, 0))
        hit = p_key[at] == key[first] if p_key.size else np.zeros(at.size, bool)
        closed = np.maximum(k[first][hit] - p_k[at[hit]], 0) * p_c[at[hit]]
        depths, weights = _add_weights(depths, weights, np.concatenate([depth[:-1][same], p_depth[at[hit]]]),
                                       np.concatenate([held, closed]))
        keep = np.ones(p_key.size, bool)
        keep[at[hit]] = False
        p_key, p_k, p_depth, p_c = (np.concatenate([x[keep], y[final]])
                                    for x, y in ((p_key, key), (p_k, k), (p_depth, depth), (p_c, c)))
        o = np.argsort(p_key)
        pending = p_key[o], p_k[o], p_depth[o], p_c[o]
    return depths, weights, pending, last


def _add_weights(depths: np.ndarray, weights: np.ndarray, depth: np.ndarray, weight: np.ndarray):
    """(depths, samples per depth) with ``weight`` samples more at each ``depth``: depths sorted and unique,
    integer sums. A log holds few distinct depths (thousands in millions of rows): the running sums are
    sorted with the new rows and every depth's run summed."""
    if not depth.size:
        return depths, weights
    d = np.concatenate([depths, np.asarray(depth, np.int64)])
    w = np.concatenate([weights, np.asarray(weight, np.int64)])
    order = np.argsort(d, kind="stable")
    d = d[order]
    starts = run_starts(d)
    return d[starts], np.add.reduceat(w[order], starts)


#: flows a run's flows table holds whole; a run with more gets a :class:`FlowTable`
HELD_FLOW_ROWS = 1 << 22
#: rows of a :class:`FlowTable` computed at a time (what memory.record_bytes counts for them)
FLOW_SLICE_ROWS = RECORD_SLICE_FLOWS
#: the flows table's columns and dtypes, in the order a run stores them (the run's kinds add ``transfer``
#: and, with several jobs, ``workload``)
FLOW_DTYPES = {"src": np.dtype(np.int32), "dst": np.dtype(np.int32), "size_bytes": np.dtype(np.int64),
               "start_ns": np.dtype(np.float64), "finish_ns": np.dtype(np.float64),
               "delivered_bytes": np.dtype(np.int64), "fct_ns": np.dtype(np.float64),
               "ideal_ns": np.dtype(np.float64), "slowdown": np.dtype(np.float64)}

Endpoints = Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


class FlowTable(StreamedTable):
    """The flows table of a run with too many flows to hold each column (a 16,384-GPU iteration starts
    10^8 flows: nine columns of them are 8 GB).

    ``start_ns``, ``finish_ns`` and ``delivered_bytes`` are the engine output's own arrays; ``src``, ``dst``
    and ``size_bytes`` come from the DAG (``endpoints(lo, hi)``: those of rows lo:hi), ``fct_ns``,
    ``ideal_ns`` and ``slowdown`` from them, a slice of rows at a time, when a reader asks: the results
    writer streams every column, ``table[name]`` builds one whole, :meth:`column` gives rows lo:hi of one.
    The values are those :func:`network_tables` holds, bit for bit. A column set on the table
    (``transfer``, ``workload``) is held. It pickles as its columns whole.
    """

    def __init__(self, fabric, out, *, endpoints: Endpoints, start_ns: np.ndarray):
        self._fabric, self._mtu, self._header = fabric, out.mtu_bytes, out.header_bytes
        self._paths = PathCache(fabric)  # every slice's ideal FCTs walk only the pairs no slice walked
        self._endpoints = endpoints
        self._held = {"start_ns": np.asarray(start_ns, np.float64), "finish_ns": out.finish_ns,
                      "delivered_bytes": out.delivered_bytes}
        super().__init__(self._held["start_ns"].size, FLOW_DTYPES, self._produce)

    def _slice(self, lo: int, hi: int, names) -> dict[str, np.ndarray]:
        """Columns ``names`` of rows lo:hi, each computed once from what it needs."""
        cols: dict[str, np.ndarray] = {}
        return {name: self._value(name, lo, hi, cols) for name in names}

    def _value(self, name: str, lo: int, hi: int, cols: dict) -> np.ndarray:
        """Column ``name`` of rows lo:hi, kept in ``cols`` with the columns computed for it."""
        if name in cols:
            return cols[name]
        get = lambda other: self._value(other, lo, hi, cols)  # noqa: E731
        if name in self._held:
            value = self._held[name][lo:hi]
        elif name in ("src", "dst", "size_bytes"):
            cols["src"], cols["dst"], cols["size_bytes"] = self._endpoints(lo, hi)
            return cols[name]
        elif name == "fct_ns":
            value = get("finish_ns") - get("start_ns")
        elif name == "ideal_ns":
            value = ideal_fct_ns(self._fabric, get("src"), get("dst"), get("size_bytes"), mtu_bytes=self._mtu,
                                 header_bytes=self._header, paths=self._paths)
        else:  # slowdown
            value = _slowdown(get("fct_ns"), get("ideal_ns"))
        cols[name] = value
        return value

    def _produce(self):
        for lo in range(0, self.rows, FLOW_SLICE_ROWS):
            yield self._slice(lo, min(lo + FLOW_SLICE_ROWS, self.rows), tuple(self.dtypes))

    def column(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows lo:hi of column ``name``."""
        return self._slice(lo, min(hi, self.rows), (name,))[name]

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._held:
            return self._held[name]
        if name not in self.dtypes:
            raise KeyError(name)
        column = np.empty(self.rows, self.dtypes[name])
        for lo in range(0, self.rows, FLOW_SLICE_ROWS):
            hi = min(lo + FLOW_SLICE_ROWS, self.rows)
            column[lo:hi] = self._slice(lo, hi, (name,))[name]
        return column

    def whole(self) -> dict[str, np.ndarray]:
        """Every column computed once and held: the table of a run small enough to hold it."""
        return {name: np.asarray(column, self.dtypes[name])
                for name, column in self._slice(0, self.rows, tuple(self.dtypes)).items()}

    def __setitem__(self, name: str, values: np.ndarray) -> None:
        values = np.asarray(values)
        assert values.shape == (self.rows,), f"column {name!r} is not one value per flow"
        self._held[name] = values
        self.dtypes[name] = values.dtype

    def __reduce__(self):
        return dict, (self.materialize(),)


def _finite_values(flows: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """The finite values of column ``name`` of a flows table, in row order, read a slice at a time (a
    :class:`FlowTable` computes one slice of the column at a time)."""
    parts = []
    for lo in range(0, table_rows(flows), FLOW_SLICE_ROWS):
        x = np.asarray(flow_column(flows, name, lo, lo + FLOW_SLICE_ROWS), np.float64)
        parts.append(x[np.isfinite(x)])
    return np.concatenate(parts) if parts else np.zeros(0)


def flow_column(flows: Mapping[str, np.ndarray], name: str, lo: int, hi: int) -> np.ndarray:
    """Rows lo:hi of column ``name`` of a flows table (a :class:`FlowTable` computes only those)."""
    if isinstance(flows, FlowTable):
        return flows.column(name, lo, hi)
    return np.asarray(flows[name])[lo:hi]


def network_tables(fabric, out, *, src: np.ndarray | None = None, dst: np.ndarray | None = None,
                   size_bytes: np.ndarray | None = None, start_ns: np.ndarray,
                   endpoints: Endpoints | None = None) -> dict[str, dict[str, np.ndarray]]:
    """flows / queues / ports / pauses / latency (and stalls) tables of a SimulationOutput, as scenario.run
    stores them (flows: src, dst node ids, size, start, finish, delivered, fct, ideal, slowdown).

    The flows' ends and sizes are given as ``src``, ``dst``, ``size_bytes``, or as ``endpoints(lo, hi)``
    computing those of rows lo:hi. A run of more than :data:`HELD_FLOW_ROWS` flows gets a :class:`FlowTable`,
    computing its columns when they are read; a smaller one the same columns held."""
    if endpoints is None:
        src, dst, size_bytes = (np.asarray(x) for x in (src, dst, size_bytes))
        endpoints = lambda lo, hi: (src[lo:hi], dst[lo:hi], size_bytes[lo:hi])  # noqa: E731
    flows = FlowTable(fabric, out, endpoints=endpoints, start_ns=start_ns)
    if flows.rows <= HELD_FLOW_ROWS:
        flows = flows.whole()
    tables = {
        "flows": flows,
        "queues": out.queues if isinstance(out.queues, StreamedTable) else dict(out.queues),
        "ports": dict(out.ports),
        "pauses": dict(out.logs["pauses"]),  # stored by every run, with or without a pause
        "latency": {"low_ns": out.latency_low_ns, "count": out.latency_count},
    }
    # every other event log (credit stalls, PFC watchdog actions, ...) is a table of its name when it has rows
    tables |= {name: dict(log) for name, log in out.logs.items() if name not in tables and log["time_ns"].size}
    return tables


def _slowdown(fct_ns: np.ndarray, ideal_ns: np.ndarray) -> np.ndarray:
    """FCT over ideal FCT (nan where the ideal is 0: an empty flow)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ideal_ns > 0, fct_ns / ideal_ns, np.nan)


def network_summary(fabric, out, tables: Mapping[str, Mapping[str, np.ndarray]], *,
                    queue_sample_interval_ns: float) -> dict:
    """The network part of a run summary: summarize() plus counters, pauses, stalls, latency, cost."""

    ports = tables["ports"]
    summary = summarize(tables["flows"], tables["queues"], ports, sim_time_ns=out.sim_time_ns)
    summary |= {k: v for k, v in out.counters.items() if v or k not in (*engine.LOSS_RECOVERY_COUNTERS, *engine.TRANSPORT_COUNTERS,
                                                                  *engine.MECHANISM_COUNTERS)}
    # drops anywhere: egress tail drops (per port) and shared-buffer drops at switch ingress
    summary["drops"] += int(out.counters.get("switch_drops", 0))
    if out.deadlock_cycle:
        summary["deadlock_cycle"] = " ".join(out.deadlock_cycle)  # a scalar, like every summary value
    # totals over ports (each port's time already summed over its priorities / VLs) can exceed the run;
    # the most-affected port's time cannot exceed it per priority
    paused, stalled = np.asarray(ports["paused_ps"]), np.asarray(ports["credit_stall_ps"])
    summary["pfc_paused_ns"] = float(paused.sum() / 1e3)
    summary["pfc_paused_port_max_ns"] = float(paused.max() / 1e3) if paused.size else 0.0
    summary["pause_events"] = int(np.asarray(out.logs["pauses"]["paused"]).sum())
    summary["credit_stall_ns"] = float(stalled.sum() / 1e3)
    summary["credit_stall_port_max_ns"] = float(stalled.max() / 1e3) if stalled.size else 0.0
    summary["credit_stall_events"] = int(np.asarray(out.logs["stalls"]["stalled"]).sum())
    n_switch_ports = int(np.count_nonzero(fabric.node_kind[np.asarray(ports["node"], np.int64)] == SWITCH)) \
        if len(ports) and np.asarray(ports["node"]).size else 0
    summary["queue_p99_bytes"] = queue_percentile_bytes(tables["queues"], n_switch_ports, queue_sample_interval_ns,
                                                        out.sim_time_ns)
    summary |= latency_percentiles(out.latency_low_ns, out.latency_count)
    summary |= {
        "status": out.status, "events": out.events, "packet_hops": out.packet_hops, "wall_time_s": out.wall_time_s,
        "data_packet_hops": out.data_packet_hops,
        "packet_hops_per_s": out.packet_hops / out.wall_time_s if out.wall_time_s > 0 else 0.0,
    }
    return summary


def provenance(*, seed: int, wall_time_s: float) -> dict:
    """Where and with what a run was made: cosim and ns-3 versions, seed, wall time, Python, platform, host."""

    return {"cosim_version": __version__, "ns3_version": engine.ns3_version(), "seed": seed,
            "wall_time_s": wall_time_s, "python": sys.version.split()[0], "platform": platform.platform(),
            "host": socket.gethostname()}


def latency_percentiles(low_ns: np.ndarray, count: np.ndarray) -> dict:
    """p50/p99/p99.9 of a log-bucket latency histogram (lower bucket edge: within one bucket, ~9%)."""
    total = int(np.asarray(count).sum())
    if total == 0:
        return {}
    cum = np.cumsum(count)
    out = {}
    for name, q in (("latency_p50_ns", 0.5), ("latency_p99_ns", 0.99), ("latency_p999_ns", 0.999)):
        out[name] = float(low_ns[int(np.searchsorted(cum, q * total))])
    return out


def summarize(flows: Mapping[str, np.ndarray], queues: Mapping[str, np.ndarray],
              ports: Mapping[str, np.ndarray], *, sim_time_ns: float) -> dict:
    """Scalar summary of a run (units in the key names)."""
    fct = _finite_values(flows, "fct_ns")  # of the flows that finished
    delivered = int(np.asarray(flows["delivered_bytes"]).sum())
    summary = {
        "flows": table_rows(flows),
        "flows_completed": int(fct.size),
        "payload_bytes": int(np.asarray(flows["size_bytes"]).sum()),
        "delivered_bytes": delivered,
        "sim_time_ns": float(sim_time_ns),
        "drops": int(np.asarray(ports["drops"]).sum()) if len(ports) else 0,
        "max_queue_bytes": int(np.asarray(ports["peak_queue_bytes"]).max()) if len(ports) and ports["peak_queue_bytes"].size else 0,
    }
    if fct.size:
        summary |= {
            "fct_p50_ns": float(np.percentile(fct, 50)),
            "fct_p99_ns": float(np.percentile(fct, 99)),
            "fct_max_ns": float(fct.max()),
        }
        del fct
        last = float(np.nanmax(np.asarray(flows["finish_ns"], dtype=np.float64)))
        first = float(np.min(np.asarray(flows["start_ns"])))
        if last > first:
            summary["goodput_gbps"] = delivered * 8 / (last - first)
        if "slowdown" in flows:
            slow = _finite_values(flows, "slowdown")  # finite only where the flow finished
            if slow.size:
                summary |= {f"fct_slowdown_{name}": float(np.percentile(slow, q))
                            for name, q in (("p50", 50), ("p99", 99), ("p999", 99.9))}
    if "rate_bps" in ports and np.asarray(ports["rate_bps"]).size and sim_time_ns > 0:
        util = np.asarray(ports["tx_bytes"]) * 8.0 / (np.asarray(ports["rate_bps"]) * sim_time_ns * 1e-9)
        used = util[util > 0]
        summary["link_utilization_max"] = float(util.max())
        summary["link_utilization_mean"] = float(used.mean()) if used.size else 0.0
    return summary
