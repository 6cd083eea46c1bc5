"""Headless figures of results files (matplotlib's object API with the Agg canvas; no pyplot, no display).

matplotlib is imported inside the functions that draw, never at module import (``cosim --help`` stays
fast). Each builder returns a Figure, or None when its data is absent (a RoCE run has no credit stalls, a
flow-level run no ops). Every axis label carries its unit, and each quantity is shown in the unit of the
terminal tables: the metric registry (:func:`cosim.results.metrics.metric_for`) says which.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.analysis import fault_zoom
from cosim.analysis.canvas import DPI, FIGSIZE_IN
from cosim.analysis.canvas import figure as _figure
from cosim.analysis.canvas import log_axis as _log_axis
from cosim.analysis.canvas import matplotlib_module as _matplotlib
from cosim.analysis.figure_names import NAMES
from cosim.analysis.ports import PortNames, port_names
from cosim.analysis.sweep import sweep_of
from cosim.errors import CosimInputError
from cosim.faults import ACTION_CODES
from cosim.h5io import atomic_output
from cosim.losses import counts_over_time as loss_counts
from cosim.results.metrics import format_number, metric_for

FORMATS = ("png", "svg", "pdf")
GRID_POINTS = 400  # time bins of the heatmap
MAX_ROWS = 32  # ports / ranks shown in timelines and heatmaps (the busiest ones)
MAX_LEGEND = 12  # CDF curves that still get a legend
#: intervals of a timeline closer than this fraction of its time axis are drawn as one (under half a pixel)
PIXEL_FRACTION = 1 / (4 * FIGSIZE_IN[0] * DPI)

#: summary key whose display unit each plotted quantity takes (one unit per quantity, tables and plots alike)
TIME_KEY, QUEUE_KEY, FCT_KEY, LATENCY_KEY = "sim_time_ns", "max_queue_bytes", "fct_p50_ns", "latency_p50_ns"


def display_unit(key: str) -> tuple[float, str]:
    """(scale from the stored unit, display unit) of the quantity of summary key ``key``."""
    m = metric_for(key)
    return m.scale, m.unit


@dataclass(frozen=True, slots=True)
class FigureResult:
    """One figure the plotter tried: its file stem, title, and the Figure or why it was skipped."""

    stem: str
    title: str
    figure: object | None
    reason: str = ""


# ---------------------------------------------------------------- data shaping (pure numpy)

def key_ids(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of distinct key tuples (k, n_columns) and each sample's row index into them.

    The columns (non-negative ids) are packed into one int64 code per sample so one 1-D unique sorts them:
    a row-wise unique (``axis=0``) over millions of samples was the slowest step of the figures."""
    if not columns[0].size:
        return np.empty((0, len(columns)), np.int64), np.empty(0, np.int64)
    cols = [np.asarray(c, np.int64) for c in columns]
    spans = [int(c.max()) + 1 for c in cols]
    if min(int(c.min()) for c in cols) < 0 or float(np.prod([float(x) for x in spans])) >= 2.0 ** 62:
        stacked = np.stack(cols, axis=1)
        keys, inverse = np.unique(stacked, axis=0, return_inverse=True)
        return keys, inverse.reshape(-1)
    code = np.zeros(cols[0].size, np.int64)
    for c, span in zip(cols, spans):
        code = code * span + c
    codes, inverse = np.unique(code, return_inverse=True)
    keys = np.empty((codes.size, len(cols)), np.int64)
    for j in range(len(cols) - 1, -1, -1):
        keys[:, j] = codes % spans[j]
        codes = codes // spans[j]
    return keys, inverse.reshape(-1)


def merge_intervals(row: np.ndarray, start: np.ndarray, stop: np.ndarray,
                    gap: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, start, stop) of intervals with those of one row that overlap or lie less than ``gap`` apart
    joined: what a timeline draws at its resolution (a gap under a pixel cannot show), so a port paused a
    hundred thousand times is a few hundred rectangles instead of one each."""
    row, start, stop = np.asarray(row, np.int64), np.asarray(start, np.float64), np.asarray(stop, np.float64)
    if not row.size:
        return row, start, stop
    order = np.lexsort((start, row))
    row, start, stop = row[order], start[order], stop[order]
    span = float(np.nanmax(stop) - min(float(np.nanmin(start)), 0.0)) + 2 * gap + 1.0
    shifted = row * span  # running maximum of the ends restarts at each row
    reach = np.maximum.accumulate(stop + shifted) - shifted
    first = np.r_[True, (row[1:] != row[:-1]) | (start[1:] > reach[:-1] + gap)]
    idx = np.flatnonzero(first)
    return row[idx], start[idx], np.maximum.reduceat(stop, idx)


def peak_per_key(key: np.ndarray, values: np.ndarray, n_keys: int) -> np.ndarray:
    """Largest value of each key (0 for keys without samples)."""
    peak = np.zeros(n_keys, dtype=np.float64)
    if key.size:
        np.maximum.at(peak, key, np.asarray(values, np.float64))
    return peak


def forward_fill(time_ns: np.ndarray, key: np.ndarray, values: np.ndarray, n_keys: int,
                 grid_ns: np.ndarray) -> np.ndarray:
    """Change-only samples → (n_keys, len(grid)): each key's last value at or before each grid time (0 before)."""
    time_ns = np.asarray(time_ns, np.float64)
    order = np.lexsort((time_ns, key))
    t, k, v = time_ns[order], key[order], np.asarray(values)[order]
    times = np.unique(np.concatenate([t, grid_ns]))  # exact integer ranks instead of float time keys
    span = np.int64(times.size + 1)
    sample_code = k.astype(np.int64) * span + np.searchsorted(times, t)
    query = (np.arange(n_keys, dtype=np.int64)[:, None] * span + np.searchsorted(times, grid_ns)[None, :])
    pos = np.searchsorted(sample_code, query, side="right") - 1
    if not t.size:
        return np.zeros(query.shape, dtype=v.dtype)
    safe = np.clip(pos, 0, None)
    valid = (pos >= 0) & (k[safe] == np.arange(n_keys)[:, None])
    return np.where(valid, v[safe], 0)


def peak_per_bin(time_ns: np.ndarray, key: np.ndarray, values: np.ndarray, n_keys: int,
                 edges_ns: np.ndarray) -> np.ndarray:
    """Change-only samples → (n_keys, len(edges) - 1): each key's largest value in each time bin.

    A bin's peak is the larger of the value in effect when the bin opens and every sample inside it, so a
    burst shorter than a bin still shows at its full height (a point sample per bin would miss it). Samples
    at or after the last edge count in the last bin.
    """
    edges_ns = np.asarray(edges_ns, np.float64)
    n_bins = edges_ns.size - 1
    values = np.asarray(values)
    peak = forward_fill(time_ns, key, values, n_keys, edges_ns[:-1]).astype(np.float64)
    if np.size(time_ns):
        bins = np.clip(np.searchsorted(edges_ns, np.asarray(time_ns, np.float64), side="right") - 1, 0, n_bins - 1)
        np.maximum.at(peak, (np.asarray(key, np.int64), bins), values.astype(np.float64))
    return peak


def state_intervals(time_ns: np.ndarray, key: np.ndarray, state: np.ndarray,
                    end_ns: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """On/off events → (key, start_ns, end_ns) of every 'on' interval; one still on lasts until ``end_ns``."""
    time_ns = np.asarray(time_ns, np.float64)
    order = np.lexsort((time_ns, key))
    t, k, s = time_ns[order], key[order], np.asarray(state)[order]
    same_next = np.r_[k[1:] == k[:-1], False]
    nxt = np.where(same_next, np.r_[t[1:], end_ns], max(end_ns, t.max() if t.size else end_ns))
    on = s != 0
    return k[on], t[on], nxt[on]


def latency_cdf_points(low_ns: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latency_ns, cumulative fraction) at bucket upper edges of a log-bucket histogram."""
    low_ns, count = np.asarray(low_ns, np.float64), np.asarray(count, np.int64)
    edges, inverse = np.unique(low_ns, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=count, minlength=edges.size)
    total = counts.sum()
    if total <= 0:
        return np.empty(0), np.empty(0)
    upper = np.r_[edges[1:], edges[-1] * 1.125]
    nz = np.flatnonzero(counts)
    cum = np.cumsum(counts) / total
    return np.r_[edges[nz[0]], upper[nz]], np.r_[0.0, cum[nz]]


def _end_ns(run) -> float:
    """End of the run's time axis: the simulated time, or the last event if later (1 ns if nothing)."""
    ends = [0.0]
    s = run.summary.get("sim_time_ns")
    if isinstance(s, (int, float)) and not isinstance(s, bool) and np.isfinite(s):
        ends.append(float(s))
    for table in (run.queues, run.pauses, run.stalls):
        t = table.get("time_ns") if table else None
        if t is not None and t.size:
            ends.append(float(np.nanmax(t)))
    return max(ends) or 1.0


# ---------------------------------------------------------------- figure builders

def _time_axis(ax, end_ns: float) -> float:
    """Label the x axis as simulated time in the tables' unit, spanning the run; return the ns → unit scale."""
    scale, unit = display_unit(TIME_KEY)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_xlim(0, end_ns * scale)
    return scale


def _port_labels(names: PortNames, keys: np.ndarray, rows: np.ndarray, extra: str = "") -> list[str]:
    """Labels of the key rows ``rows`` (node, port[, lane]): ``leaf1 → spine0`` plus ``extra`` and the lane."""
    out = []
    for r in rows:
        k = keys[r]
        label = names.port(k[0], k[1])
        if extra and len(k) > 2:
            label += f" {extra} {k[2]}"
        out.append(label)
    return out


def _tick_size(n_rows: int) -> int:
    return max(4, 9 - n_rows // 8)


def _hottest_ports(q, n: int):
    """(port keys, key index per sample, peak depth per key, the ``n`` keys with the highest peak)."""
    keys, kid = key_ids(q["node"], q["port"])
    peak = peak_per_key(kid, q["bytes"], len(keys))
    return keys, kid, peak, np.argsort(-peak, kind="stable")[:n]


def queue_lines(run, *, top_n: int = 8, label: str | None = None):
    """Egress-queue depth over time of the ``top_n`` ports with the highest peak, one step line each."""
    q = run.queues
    if not q or not q["time_ns"].size:
        return None
    keys, kid, peak, top = _hottest_ports(q, top_n)
    end = _end_ns(run)
    qscale, qunit = display_unit(QUEUE_KEY)
    fig, ax = _figure(f"{label or run.name}: queue depth, {len(top)} hottest of {len(keys)} egress ports")
    scale = _time_axis(ax, end)
    t, b = np.asarray(q["time_ns"], np.float64), np.asarray(q["bytes"], np.float64)
    for row, port in zip(top, _port_labels(port_names(run), keys, top)):
        m = kid == row
        order = np.argsort(t[m], kind="stable")
        tx = np.r_[0.0, t[m][order], end] * scale
        by = np.r_[0.0, b[m][order], b[m][order][-1]] * qscale
        ax.plot(tx, by, drawstyle="steps-post", lw=1.2,
                label=f"{port} (peak {format_number(peak[row] * qscale)} {qunit})")
    ax.set_ylabel(f"queue depth ({qunit})")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    return fig


def queue_heatmap(run, *, max_rows: int = MAX_ROWS, grid_points: int = GRID_POINTS, label: str | None = None):
    """Port × time heatmap of egress-queue depth, each cell the peak depth of its port in its time bin (so
    the colour scale tops at the same peak as the line plot, however short the burst)."""
    q = run.queues
    if not q or not q["time_ns"].size:
        return None
    keys, kid, _peak, top = _hottest_ports(q, max_rows)
    remap = np.full(len(keys), -1, np.int64)
    remap[top] = np.arange(top.size)
    keep = remap[kid] >= 0
    end = _end_ns(run)
    edges = np.linspace(0.0, end, grid_points + 1)
    qscale, qunit = display_unit(QUEUE_KEY)
    depth = peak_per_bin(q["time_ns"][keep], remap[kid[keep]], q["bytes"][keep], top.size, edges) * qscale
    tscale, tunit = display_unit(TIME_KEY)
    fig, ax = _figure(f"{label or run.name}: egress-queue depth, {top.size} busiest of {len(keys)} ports, "
                      f"bins of {format_number(end / grid_points * tscale)} {tunit}")
    scale = _time_axis(ax, end)
    im = ax.imshow(depth, aspect="auto", interpolation="nearest", cmap="viridis",
                   extent=(0, end * scale, top.size - 0.5, -0.5))
    ax.set_yticks(np.arange(top.size), _port_labels(port_names(run), keys, top), fontsize=_tick_size(top.size))
    ax.set_ylabel("egress port (hottest first)")
    fig.colorbar(im, ax=ax, label=f"queue depth, peak per bin ({qunit})")
    return fig


@dataclass(frozen=True, slots=True)
class Curve:
    """One CDF curve: x in display units, cumulative fraction y; ``note`` says why it is a single step."""

    name: str
    x: np.ndarray
    y: np.ndarray
    note: str = ""


def _padded_range(lo: float, hi: float, *, log_x: bool) -> tuple[float, float]:
    """x limits around [lo, hi] with room on both sides, never zero-width (one value gets ±10 %)."""
    if log_x:
        factor = max((hi / lo) ** 0.05, 1.1) if lo > 0 else 1.1
        return lo / factor, hi * factor
    pad = 0.05 * (hi - lo) if hi > lo else (0.1 * abs(lo) or 1.0)
    return lo - pad, hi + pad


def _cdf_axes(title: str, xlabel: str, curves: list[Curve], *, log_x: bool, steps: bool):
    """Curves on shared axes, each drawn from fraction 0 at the left edge to 1 at the right edge, so a curve
    of one value (or one histogram bucket) is a visible step with its note in the legend."""
    fig, ax = _figure(title)
    left, right = _padded_range(min(float(c.x[0]) for c in curves), max(float(c.x[-1]) for c in curves),
                                log_x=log_x)
    for c in curves:
        name = f"{c.name}: {c.note}" if c.note else c.name
        ax.plot(np.r_[left, c.x, right], np.r_[0.0, c.y, 1.0], drawstyle="steps-post" if steps else "default",
                lw=1.5, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction (CDF)")
    ax.set_ylim(0, 1.02)
    if log_x:
        _log_axis(ax, left, right)
    ax.set_xlim(left, right)
    ax.grid(alpha=0.3, which="both")
    if len(curves) <= MAX_LEGEND:
        ax.legend(fontsize=8, loc="lower right")
    else:
        single = sum(bool(c.note) for c in curves)
        ax.set_title(f"{title} ({len(curves)} runs; legend omitted"
                     + (f"; {single} of one value" if single else "") + ")", fontsize=11)
    return fig


def _sample_curve(name: str, values: np.ndarray, scale: float, unit: str, what: str) -> Curve | None:
    """The empirical CDF of finite ``values`` (stored units) in display units, or None if there are none."""
    v = np.asarray(values, np.float64)
    v = np.sort(v[np.isfinite(v)]) * scale
    if not v.size:
        return None
    note = f"all {v.size} {what} at {format_number(v[0])}{' ' + unit if unit else ''}" if v[0] == v[-1] else ""
    return Curve(name, np.r_[v[0], v], np.r_[0.0, np.arange(1, v.size + 1) / v.size], note)


def fct_cdf(runs: Mapping):
    """Flow-completion-time CDF of every run on shared axes (unfinished flows left out)."""
    scale, unit = display_unit(FCT_KEY)
    curves = [c for name, run in runs.items()
              if (c := _sample_curve(name, run.flows.get("fct_ns", np.empty(0)), scale, unit, "flows"))]
    if not curves:
        return None
    spread = max(c.x[-1] for c in curves) / max(min(c.x[0] for c in curves), 1e-9)
    return _cdf_axes("Flow completion time", f"flow completion time ({unit})", curves, log_x=spread > 30,
                     steps=True)


def slowdown_cdf(runs: Mapping):
    """FCT-slowdown CDF (fct / ideal) of every run that stores flows/slowdown, on shared axes."""
    curves = [c for name, run in runs.items()
              if (c := _sample_curve(name, run.flows.get("slowdown", np.empty(0)), 1.0, "", "flows"))]
    if not curves:
        return None
    return _cdf_axes("FCT slowdown", "slowdown (FCT / ideal FCT, ratio)", curves, log_x=False, steps=True)


def latency_cdf(runs: Mapping):
    """One-way packet-latency CDF of every run (from the log-bucket histogram), on shared log axes."""
    scale, unit = display_unit(LATENCY_KEY)
    curves = []
    for name, run in runs.items():
        lat = run.latency
        if lat and lat.get("count", np.empty(0)).size:
            x, y = latency_cdf_points(lat["low_ns"], lat["count"])
            if x.size:
                x = x * scale
                note = (f"every packet in one bucket, {format_number(x[0])}–{format_number(x[-1])} {unit}"
                        if x.size == 2 else "")
                curves.append(Curve(name, x, y, note))
    if not curves:
        return None
    return _cdf_axes("Packet latency (histogram, 8 buckets per octave)", f"one-way packet latency ({unit})",
                     curves, log_x=True, steps=False)


def _timeline(run, table: Mapping, state_col: str, third: str, lane: str, what: str, color: str,
              label: str | None):
    if not table or not table.get("time_ns", np.empty(0)).size or not np.any(table[state_col]):
        return None
    keys, kid = key_ids(table["node"], table["port"], table[third])
    end = _end_ns(run)
    k, start, stop = state_intervals(table["time_ns"], kid, table[state_col], end)
    total = np.bincount(k, weights=stop - start, minlength=len(keys))
    rows = np.argsort(-total, kind="stable")[:MAX_ROWS]
    rows = rows[total[rows] > 0]
    fig, ax = _figure(f"{label or run.name}: {what} ({rows.size} of {len(keys)} port/{lane} pairs)")
    scale = _time_axis(ax, end)
    y_of = np.full(len(keys), -1, np.int64)
    y_of[rows] = np.arange(rows.size)
    shown = y_of[k] >= 0
    y, start, stop = merge_intervals(y_of[k[shown]], start[shown], stop[shown], end * PIXEL_FRACTION)
    for r in range(rows.size):
        m = y == r
        ax.broken_barh(list(zip(start[m] * scale, (stop[m] - start[m]) * scale)), (r - 0.4, 0.8), color=color)
    ax.set_yticks(np.arange(rows.size), _port_labels(port_names(run), keys, rows, lane),
                  fontsize=_tick_size(rows.size))
    ax.set_ylim(rows.size - 0.5, -0.5)
    ax.set_ylabel("egress port")
    ax.grid(alpha=0.3, axis="x")
    return fig


def pause_timeline(run, *, label: str | None = None):
    """PFC pause intervals per (port, priority) row, from the pauses events."""
    return _timeline(run, run.pauses, "paused", "priority", "prio", "PFC paused intervals", "tab:red", label)


def stall_timeline(run, *, label: str | None = None):
    """InfiniBand credit-stall intervals per (port, VL) row, from the stalls events."""
    return _timeline(run, run.stalls, "stalled", "vl", "VL", "credit-stall intervals", "tab:purple", label)


#: ops kind -> (legend label, colour); kind codes as in the trace's OpKind (files without ops/group_kind)
OP_KINDS = ((0, "compute", "tab:blue"), (1, "collective", "tab:orange"), (2, "send", "tab:green"),
            (3, "recv", "tab:olive"))
#: colour of compute in the Gantt chart
COMPUTE_COLOR = "tab:blue"
#: trace GroupKind code -> (legend label, colour) of its communication in the Gantt chart
DIMENSION_COLORS = {0: ("TP", "tab:orange"), 1: ("CP", "tab:brown"), 2: ("PP", "tab:green"), 3: ("DP", "tab:red"),
                    4: ("EP", "tab:purple"), 5: ("expert-DP", "tab:pink"), 6: ("embedding", "tab:olive"),
                    7: ("world", "tab:cyan"), 8: ("other", "tab:gray")}
#: ops/medium code -> (legend words, how much of the dimension's colour is kept: NVLink a light shade)
MEDIUM_SHADES = {1: ("NVLink", 0.45), 2: ("fabric", 1.0)}


def shade(color: str, keep: float) -> tuple[float, float, float]:
    """``color`` mixed with white, ``keep`` of the colour (1: the colour itself)."""
    rgb = np.asarray(_matplotlib().colors.to_rgb(color))
    return tuple(float(x) for x in 1.0 - keep * (1.0 - rgb))


def gantt_classes(ops: Mapping[str, np.ndarray]) -> tuple[np.ndarray, list[tuple[str, object]]]:
    """(class per op, [(legend label, colour)] per class) of the Gantt chart: compute in one colour,
    communication by dimension (TP, PP, DP, EP, ...) in the dimension's colour, light over NVLink and full
    over the fabric; by op kind for files without ops/group_kind and ops/medium."""
    kind = np.asarray(ops["kind"], np.int64)
    if "group_kind" not in ops or "medium" not in ops:
        return kind, [(name, color) for _, name, color in OP_KINDS]
    gk, medium = np.asarray(ops["group_kind"], np.int64), np.asarray(ops["medium"], np.int64)
    dims = list(DIMENSION_COLORS)
    dim_index = np.full(256, len(dims) - 1, np.int64)  # an unknown kind draws as other
    dim_index[dims] = np.arange(len(dims))
    media = list(MEDIUM_SHADES)
    m_index = np.where(medium == media[0], 0, 1)
    cls = np.where(kind == 0, 0, 1 + dim_index[np.clip(gk, 0, 255)] * len(media) + m_index)
    legend = [("compute", COMPUTE_COLOR)] + [
        (f"{DIMENSION_COLORS[d][0]}, {MEDIUM_SHADES[m][0]}", shade(DIMENSION_COLORS[d][1], MEDIUM_SHADES[m][1]))
        for d in dims for m in media]
    return cls, legend


def iteration_gantt(run, *, label: str | None = None):
    """Per-rank Gantt chart of the ops group: compute in one colour (upper half of a rank's row),
    communication (lower half) coloured by parallelism dimension (TP, PP, DP, EP, ...), light where it
    moves over NVLink and full over the fabric; communication under a gap in compute is exposed. Iteration
    starts dashed."""
    ops = run.ops
    if not ops or not ops.get("start_ns", np.empty(0)).size:
        return None
    rank = np.asarray(ops["rank"], np.int64)
    ranks = np.unique(rank)[:MAX_ROWS]
    start, finish = np.asarray(ops["start_ns"], np.float64), np.asarray(ops["finish_ns"], np.float64)
    if not np.isfinite(finish).any():
        return None
    end = float(np.nanmax(finish))
    fig, ax = _figure(f"{label or run.name}: per-rank timeline ({ranks.size} of {np.unique(rank).size} ranks)")
    scale = _time_axis(ax, end)
    row_of = np.full(int(rank.max()) + 1, -1, np.int64)
    row_of[ranks] = np.arange(ranks.size)
    row = row_of[rank]
    cls, legend = gantt_classes(ops)
    drawn = 0
    for c, (name, color) in enumerate(legend):
        m = (cls == c) & (row >= 0) & np.isfinite(finish) & (finish > start)
        if not m.any():
            continue
        rr, a, b = merge_intervals(row[m], start[m], finish[m], end * PIXEL_FRACTION)
        # two lanes per rank, compute above and communication below, so overlap shows and neither hides
        lane = (-0.42, 0.42) if name == "compute" else (0.0, 0.42)
        for i, r in enumerate(np.unique(rr)):
            mm = rr == r
            ax.broken_barh(list(zip(a[mm] * scale, (b[mm] - a[mm]) * scale)), (r + lane[0], lane[1]),
                           color=color, label=name if i == 0 else None)
        drawn += 1
    it = run.iterations
    if it and it.get("start_ns", np.empty(0)).size:
        for t in np.asarray(it["start_ns"], np.float64)[1:]:
            ax.axvline(t * scale, color="k", ls="--", lw=0.8)
    ax.set_yticks(np.arange(ranks.size), [f"rank {r}" for r in ranks], fontsize=_tick_size(ranks.size))
    ax.set_ylim(ranks.size - 0.5, -0.5)
    ax.set_ylabel("GPU rank")
    fig.legend(fontsize=8, loc="outside lower center", ncol=min(max(drawn, 1), 5), frameon=False)
    return fig


# ---------------------------------------------------------------- faults (cosim.faults)

#: faults-table action (cosim.faults.ACTIONS) -> (legend label, colour, line style) of its marker
FAULT_MARKERS = {"down": ("link down", "tab:red", "--"), "up": ("link up", "tab:green", ":"),
                 "reroute": ("routes converged", "0.4", "-."), "degrade": ("degraded", "tab:orange", "--"),
                 "restore": ("restored", "tab:olive", ":"),
                 # fault mechanisms (pause_storm, straggler, cosim.faults.mechanisms)
                 "storm_start": ("pause storm began", "tab:purple", "--"),
                 "storm_end": ("pause storm ended", "tab:purple", ":"),
                 "queue_disabled": ("PFC watchdog disabled a queue", "tab:brown", "--"),
                 "queue_restored": ("PFC watchdog restored a queue", "tab:brown", ":"),
                 "slowed": ("straggler", "tab:pink", "-."), "collective_timeout": ("collective timed out", "black", "-")}


def _mark_faults(ax, run, scale: float) -> None:
    """Vertical markers at the run's fault actions (one legend entry per action kind)."""
    f = run.faults
    if not f or not f.get("time_ns", np.empty(0)).size:
        return
    t, action = np.asarray(f["time_ns"], np.float64), np.asarray(f["action"], np.int64)
    for what, (name, color, style) in FAULT_MARKERS.items():
        times = np.unique(t[action == ACTION_CODES[what]])
        for i, x in enumerate(times):
            ax.axvline(x * scale, color=color, ls=style, lw=1.0, label=f"{name} ({times.size})" if i == 0 else None)


def _fault_zoom(ax, run, scale: float) -> tuple[float, float] | None:
    """Zoom the time axis on the run's fault window (cosim.analysis.fault_zoom) and shade the faults' span."""
    window = fault_zoom.fault_window(run.faults, run.flows, _end_ns(run))
    if window is None:
        return None
    lo, hi = window
    ax.set_xlim(lo * scale, hi * scale)
    f = run.faults
    own = np.asarray(f["fault"]) >= 0
    t = np.asarray(f["time_ns"], np.float64)[own if own.any() else slice(None)]
    ax.axvspan(t.min() * scale, t.max() * scale, color="0.85", alpha=0.5, lw=0, zorder=0)
    return window


def _window_text(window: tuple[float, float]) -> str:
    scale, unit = display_unit(TIME_KEY)
    return f"{format_number(window[0] * scale)}–{format_number(window[1] * scale)} {unit}"


def fault_queue_lines(run, *, top_n: int = 8, label: str | None = None):
    """Queue depth of the ``top_n`` ports with the highest peak inside the fault window, among the egress
    ports of the faulted element's switches (all switches' if it has none), zoomed on the window with the
    fault actions marked (None without faults or queue samples)."""
    q = run.queues
    if not run.faults or not q or not q["time_ns"].size:
        return None
    end = _end_ns(run)
    window = fault_zoom.fault_window(run.faults, run.flows, end)
    near = np.isin(q["node"], fault_zoom.faulted_nodes(run.faults, run.links))
    if not near.any():
        near = np.ones(q["node"].size, bool)
    t = np.asarray(q["time_ns"], np.float64)
    _, kid = key_ids(q["node"], q["port"])
    order = np.lexsort((t, kid))
    # the samples inside the window, and each port's last before it (its depth when the window opens)
    ts, ks = t[order], kid[order]
    before = ts < window[0]
    last_before = before & ~(np.r_[ks[1:] == ks[:-1], False] & np.r_[before[1:], False])
    keep = np.zeros(t.size, bool)
    keep[order] = (~before & (ts <= window[1])) | last_before
    keep &= near
    if not keep.any():  # nothing queued there in the window: the ports' lines read 0 across it
        keep = near
    zoomed = dataclasses.replace(run, queues={k: np.asarray(v)[keep] for k, v in q.items()})
    fig = queue_lines(zoomed, top_n=top_n, label=label)
    if fig is None:
        return None
    ax = fig.axes[0]
    where = "the faulted element's switches" if near.size and not near.all() else "every switch"
    ax.set_title(f"{label or run.name}: queue depth at {where}, {_window_text(window)}", fontsize=11)
    _mark_faults(ax, run, display_unit(TIME_KEY)[0])
    _fault_zoom(ax, run, display_unit(TIME_KEY)[0])
    ax.legend(fontsize=7, loc="upper right")
    return fig


def fault_pause_timeline(run, *, label: str | None = None):
    """pause_timeline zoomed on the fault window with the fault actions marked (None without faults or
    pauses)."""
    fig = pause_timeline(run, label=label) if run.faults else None
    if fig is None:
        return None
    ax = fig.axes[0]
    _mark_faults(ax, run, display_unit(TIME_KEY)[0])
    _fault_zoom(ax, run, display_unit(TIME_KEY)[0])
    ax.legend(fontsize=7, loc="upper right")
    return fig


def fault_neighbours(run, baseline=None, *, label: str | None = None, bins: int = GRID_POINTS // 2):
    """Around the fault window: on top, the throughput each NIC on the faulted element's switches sent
    (and their total, with the baseline's total when it is stored); in the middle, the FCT slowdown of every
    flow finished in the window against its finish time; below, when the run lost packets, the packets
    lost, trimmed or sent again per time bin by cause (the ``losses`` table, whole fabric). None without
    faults or flows."""
    if not run.faults or not run.flows or not np.asarray(run.flows.get("start_ns", [])).size:
        return None
    end = _end_ns(run)
    lo, hi = fault_zoom.fault_window(run.faults, run.flows, end)
    hosts = fault_zoom.neighbour_hosts(run.nodes, run.links, fault_zoom.faulted_nodes(run.faults, run.links))
    if not hosts.size:
        hosts = np.unique(np.asarray(run.flows["src"], np.int64))
    hosts = hosts[:MAX_ROWS]
    edges = np.linspace(lo, hi, bins + 1)
    rate = fault_zoom.host_throughput_gbps(run.flows, hosts, edges, end)
    from matplotlib.figure import Figure  # noqa: PLC0415 (matplotlib is loaded by _figure's module)

    _matplotlib()
    lost = loss_counts(run.losses, edges)
    fig = Figure(figsize=(FIGSIZE_IN[0], FIGSIZE_IN[1] * (1.4 if lost else 1.0)), dpi=DPI, layout="constrained")
    axes = fig.subplots(3 if lost else 2, 1, sharex=True)
    top, bottom = axes[0], axes[1]
    scale, unit = display_unit(TIME_KEY)
    fig.suptitle(f"{label or run.name}: neighbours of the fault, {_window_text((lo, hi))}", fontsize=11)
    mid = (edges[:-1] + edges[1:]) / 2 * scale
    names = run.nodes.get("name") if run.nodes else None
    for r, h in enumerate(hosts[:8]):
        top.plot(mid, rate[r], lw=0.8, alpha=0.7, label=str(names[h]) if names is not None else f"node {h}")
    top.plot(mid, rate.sum(axis=0), color="k", lw=1.6, label=f"total of {hosts.size} NICs")
    if baseline is not None and baseline.flows and np.asarray(baseline.flows.get("start_ns", [])).size:
        base = fault_zoom.host_throughput_gbps(baseline.flows, hosts, edges, _end_ns(baseline))
        top.plot(mid, base.sum(axis=0), color="k", ls="--", lw=1.2, label="total without faults")
    top.set_ylabel("sent (Gbit/s)")
    top.set_ylim(bottom=0)
    top.grid(alpha=0.3)
    f = run.flows
    finish = np.asarray(f["finish_ns"], np.float64)
    slow = np.asarray(f.get("slowdown", np.asarray(f["fct_ns"], np.float64) / np.maximum(
        np.asarray(f.get("ideal_ns", f["fct_ns"]), np.float64), 1e-9)), np.float64)
    shown = np.isfinite(finish) & (finish >= lo) & (finish <= hi) & np.isfinite(slow)
    bottom.scatter(finish[shown] * scale, slow[shown], s=4, color="tab:red", alpha=0.6,
                   label=f"flows finished ({int(shown.sum())})")
    s = run.summary
    losses = ", ".join(f"{name} {s[key]:,}" for key, name in (
        ("fault_drops", "lost on dead links"), ("drops", "switch drops"), ("retransmitted_packets", "retransmitted"),
        ("timeouts", "timeouts"), ("link_retransmissions", "link-level retransmissions"))
        if isinstance(s.get(key), int) and s[key] > 0)
    if losses:
        bottom.plot([], [], " ", label=f"run totals: {losses}")
    bottom.set_yscale("log")
    bottom.set_ylabel("FCT slowdown")
    bottom.set_xlabel("" if lost else f"simulated time ({unit}), flows at their finish")
    bottom.grid(alpha=0.3, which="both")
    if lost:
        width = (edges[1] - edges[0]) * scale
        for cause, count in lost.items():
            axes[2].step(mid, count, where="mid", lw=1.0,
                         label=f"{cause.name.lower().replace('_', ' ')} ({int(count.sum()):,})")
        axes[2].set_ylabel(f"packets per {format_number(width)} {unit}")
        axes[2].set_xlabel(f"simulated time ({unit})")
        axes[2].set_ylim(bottom=0)
        axes[2].grid(alpha=0.3)
        axes[2].legend(fontsize=6, loc="upper right")
    for ax in axes:
        _mark_faults(ax, run, scale)
        _fault_zoom(ax, run, scale)
    top.legend(fontsize=6, loc="lower left", ncol=3)
    bottom.legend(fontsize=6, loc="upper right")
    return fig


def fault_iterations(run, baseline=None, *, label: str | None = None):
    """Iteration time against simulated time (each point at its iteration's end), with the fault-free
    baseline's when it is stored and the fault actions marked and their span shaded; the time axis zooms
    to the iterations around the faults and the y axis to the values, so a delay of a few percent shows;
    the legend gives the largest delay against the baseline."""
    it = run.iterations
    if not run.faults or not it or not np.asarray(it.get("time_ns", [])).size:
        return None
    fig, ax = _figure(f"{label or run.name}: iteration time around faults")
    finish = np.asarray(it["finish_ns"], np.float64)
    end = float(np.nanmax(finish)) if np.isfinite(finish).any() else _end_ns(run)
    scale = _time_axis(ax, end * 1.02)
    yscale, yunit = display_unit("iteration_time_ns")
    times = np.asarray(it["time_ns"], np.float64)
    ax.plot(finish * scale, times * yscale, "o-", color="tab:red", lw=1.2, label="with faults")
    values = [times[np.isfinite(times)]]
    if baseline is not None and baseline.iterations:
        b = baseline.iterations
        base_times = np.asarray(b["time_ns"], np.float64)
        delay = run.summary.get("iteration_delay_max_ns")
        extra = f", largest delay {format_number(delay * yscale)} {yunit}" if isinstance(delay, (int, float)) else ""
        ax.plot(np.asarray(b["finish_ns"], np.float64) * scale, base_times * yscale, "s--", color="tab:blue",
                lw=1.0, label=f"without faults (baseline){extra}")
        values.append(base_times[np.isfinite(base_times)])
    _mark_faults(ax, run, scale)
    window = fault_zoom.fault_window(run.faults, {}, end)
    if window is not None:  # the iterations ending around the faults: one before the first, one after
        lo_i = max(int(np.searchsorted(finish, window[0])) - 1, 0)
        hi_i = min(int(np.searchsorted(finish, window[1])) + 1, finish.size - 1)
        left = finish[lo_i - 1] if lo_i > 0 else 0.0
        span = max(finish[hi_i] - left, 1.0)
        ax.set_xlim((left - 0.05 * span) * scale, (finish[hi_i] + 0.05 * span) * scale)
        own = np.asarray(run.faults["fault"]) >= 0
        t = np.asarray(run.faults["time_ns"], np.float64)[own if own.any() else slice(None)]
        ax.axvspan(t.min() * scale, max(t.max(), t.min() + 0.002 * span) * scale, color="0.85", alpha=0.5, lw=0,
                   zorder=0)
    v = np.concatenate(values) * yscale
    if v.size:
        lo, hi = float(v.min()), float(v.max())
        pad = max(0.15 * (hi - lo), 0.01 * hi, 1e-9)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_ylabel(f"iteration time ({yunit})")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    return fig


def _fault_figures(runs: Mapping, top_n: int, wanted) -> Iterator[FigureResult]:
    """The fault figures of every run with a faults table (runs without one get none, and no skip line)."""
    by_name = {r.name: r for r in runs.values()}
    for label, run in runs.items():
        if not run.faults:
            continue
        base = safe_stem(label)
        baseline = by_name.get(run.summary.get("baseline_run"))
        if wanted("iteration-faults"):
            yield FigureResult(f"iteration-faults-{base}", f"iteration time around faults: {label}",
                               fault_iterations(run, baseline, label=label), "no iterations (not a co-simulation run)")
        if wanted("queues-faults"):
            yield FigureResult(f"queues-faults-{base}", f"queue depth with faults: {label}",
                               fault_queue_lines(run, top_n=top_n, label=label), "no queue samples")
        if wanted("neighbours-faults"):
            yield FigureResult(f"neighbours-faults-{base}", f"neighbours of the fault: {label}",
                               fault_neighbours(run, baseline, label=label), "no flows table")
        if wanted("pfc-pauses-faults"):
            yield FigureResult(f"pfc-pauses-faults-{base}", f"PFC pauses with faults: {label}",
                               fault_pause_timeline(run, label=label), "no PFC pause events")
# ---------------------------------------------------------------- end of faults


# ---------------------------------------------------------------- inference runs (requests table)

#: summary keys whose display unit the request latencies take
TTFT_KEY, TPOT_KEY = "ttft_p50_ns", "tpot_p50_ns"


def _request_cdf(runs: Mapping, column: str, key: str, title: str, what: str):
    scale, unit = display_unit(key)
    curves = [c for name, run in runs.items()
              if (c := _sample_curve(name, run.requests.get(column, np.empty(0)), scale, unit, "requests"))]
    if not curves:
        return None
    spread = max(c.x[-1] for c in curves) / max(min(c.x[0] for c in curves), 1e-9)
    return _cdf_axes(title, f"{what} ({unit})", curves, log_x=spread > 30, steps=True)


def ttft_cdf(runs: Mapping):
    """Time-to-first-token CDF of every inference run on shared axes (one curve per run: RoCE and IB)."""
    return _request_cdf(runs, "ttft_ns", TTFT_KEY, "Time to first token", "TTFT")


def tpot_cdf(runs: Mapping):
    """Time-per-output-token CDF of every inference run on shared axes (requests of one token left out)."""
    return _request_cdf(runs, "tpot_ns", TPOT_KEY, "Time per output token", "TPOT")


#: phases of a request's life in the timeline: (start column, end column, legend label, colour)
REQUEST_PHASES = (("arrival_ns", "prefill_start_ns", "queued", "tab:gray"),
                  ("prefill_start_ns", "prefill_end_ns", "prefill", "tab:blue"),
                  ("kv_start_ns", "kv_end_ns", "KV transfer", "tab:green"),
                  ("first_token_ns", "last_token_ns", "decode", "tab:orange"))


def request_timeline(run, *, label: str | None = None):
    """One row per request (the first MAX_ROWS·4 in arrival order): queued, prefill, KV transfer, decode."""
    req = run.requests
    if not req or not req.get("arrival_ns", np.empty(0)).size:
        return None
    n = min(req["arrival_ns"].size, 4 * MAX_ROWS)
    end = float(np.nanmax(np.asarray(req["last_token_ns"], np.float64)[:n]))
    fig, ax = _figure(f"{label or run.name}: request timeline ({n} of {req['arrival_ns'].size} requests)")
    scale = _time_axis(ax, end)
    for lo, hi, name, color in REQUEST_PHASES:
        a, b = np.asarray(req[lo], np.float64)[:n], np.asarray(req[hi], np.float64)[:n]
        ok = np.isfinite(a) & np.isfinite(b)
        rows = np.flatnonzero(ok)
        height = 0.4 if name == "KV transfer" else 0.8  # the transfer overlaps the prefill layer by layer
        for i, r in enumerate(rows):
            ax.broken_barh([(a[r] * scale, (b[r] - a[r]) * scale)], (r - height / 2, height), color=color,
                           label=name if i == 0 else None)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_ylabel("request (arrival order)")
    ax.grid(alpha=0.3, axis="x")
    fig.legend(fontsize=8, loc="outside lower center", ncol=len(REQUEST_PHASES), frameon=False)
    return fig


# ---------------------------------------------------------------- drivers

def safe_stem(name: str) -> str:
    """A file-name-safe form of a run name."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("._") or "run"


def iter_figures(runs: Mapping, *, top_n: int = 8, max_runs: int | None = None,
                 names: Collection[str] = ()) -> Iterator[FigureResult]:
    """Every figure for ``runs`` ({label: RunRecord}), built lazily, with skip reasons for absent data.

    ``max_runs`` limits the per-run figures to the first runs (the shared CDFs always overlay all);
    ``names`` (of :data:`cosim.analysis.figure_names.NAMES`) keeps only those figures (default: all).
    """
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise CosimInputError("--figure", f"no figure named {unknown[0]!r}", f"choose from {', '.join(NAMES)}")
    wanted = (lambda name: name in names) if names else (lambda name: True)  # noqa: E731
    shared = (("fct-cdf", "FCT CDF", fct_cdf, "no finished flows in any run"),
              ("fct-slowdown-cdf", "FCT slowdown CDF", slowdown_cdf, "no flows/slowdown dataset in any run"),
              ("latency-cdf", "latency CDF", latency_cdf, "no latency histogram in any run"),
              ("sweep", "key metric against the swept value", sweep_of,
               "fewer than 3 runs, or their experiments differ in no field"))
    serving = any(run.requests for run in runs.values())  # inference figures only where there are requests
    if serving:
        shared += (("ttft-cdf", "TTFT CDF", ttft_cdf, "no requests table in any run"),
                   ("tpot-cdf", "TPOT CDF", tpot_cdf, "no request with more than one output token"))
    for stem, title, build, reason in shared:
        if wanted(stem):
            yield FigureResult(stem, title, build(runs), reason)
    lines = lambda r, label: queue_lines(r, top_n=top_n, label=label)  # noqa: E731
    per_run = (("queues", "queue depth", lines, "no queue samples"),
               ("queue-heatmap", "queue heatmap", queue_heatmap, "no queue samples"),
               ("pfc-pauses", "PFC pause timeline", pause_timeline, "no PFC pause events"),
               ("credit-stalls", "credit-stall timeline", stall_timeline, "no credit-stall events"),
               ("iterations", "iteration timeline", iteration_gantt, "no ops table (not a co-simulation run)"))
    if serving:
        per_run += (("requests", "request timeline", request_timeline, "no requests table (not an inference run)"),)
    per_run = tuple(p for p in per_run if wanted(p[0]))
    used: set[str] = set()
    for i, (label, run) in enumerate(runs.items()):
        if not per_run:
            break
        if max_runs is not None and i >= max_runs:
            yield FigureResult(f"*-{safe_stem(label)}", f"figures of {label}", None,
                               f"per-run figures only for the first {max_runs} runs (choose with --run)")
            continue
        base = safe_stem(label)
        while base in used:
            base += "_"
        used.add(base)
        for stem, title, build, reason in per_run:
            if stem == "iterations" and (why := run.missing_ops()) is not None:
                reason = str(why)
            yield FigureResult(f"{stem}-{base}", f"{title}: {label}", build(run, label=label), reason)
    yield from _fault_figures(runs if max_runs is None else dict(list(runs.items())[:max_runs]), top_n, wanted)


#: metadata that would make the bytes differ from run to run (dates, versions), dropped per format
_NO_STAMP = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None, "Producer": None}}


def render(fig, fmt: str = "png") -> bytes:
    """The figure encoded as ``fmt`` bytes (png, svg or pdf); the same figure gives the same bytes."""
    matplotlib = _matplotlib()
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "cosim", "pdf.compression": 6}):
        fig.savefig(buf, format=fmt, metadata=_NO_STAMP.get(fmt))
    return buf.getvalue()


def write_figures(runs: Mapping, outdir: str | Path, *, fmt: str = "png", top_n: int = 8,
                  names: Collection[str] = ()) -> tuple[list[Path], list[tuple[str, str]]]:
    """Write every figure of ``runs`` (``names``: only those) into ``outdir`` atomically; return (paths
    written, [(stem, reason)] skipped)."""

    outdir = Path(outdir)
    written, skipped = [], []
    for res in iter_figures(runs, top_n=top_n, names=names):
        if res.figure is None:
            skipped.append((res.stem, res.reason))
            continue
        data = render(res.figure, fmt)
        path = outdir / f"{res.stem}.{fmt}"
        with atomic_output(path) as tmp:
            tmp.write_bytes(data)
        written.append(path)
    return written, skipped
