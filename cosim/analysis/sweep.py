"""The figure a sweep is run for: a metric against a swept value, one line per transport (per value of the
other swept fields), from a :class:`cosim.results.pivot.PivotTable`.

A numeric swept field (link rate, buffer bytes; attribute values stored as text count when they read as
numbers) is drawn on a numeric axis, logarithmic when it spans more than a decade; any other on evenly
spaced category positions. The metric is shown in its display unit (the metric registry).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim.analysis.canvas import figure, log_axis
from cosim.errors import CosimInputError
from cosim.results.metrics import format_number
from cosim.results.pivot import LINE_FIELD, PivotTable, field_text, pivot_runs

MAX_TICKS = 12  # swept values that are labelled one by one on the x axis
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def as_number(value) -> float | None:
    """``value`` as a float if it is a number or a text that reads as one (attribute values), else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


#: unit of a swept field by how its name ends (fields carry their unit in their name)
FIELD_UNITS = (("_gbps", "Gbps"), ("_ns", "ns"), ("_ms", "ms"), ("bytes", "B"), ("_s", "s"))


def field_unit(field: str) -> str:
    """The unit a numeric swept field's name gives (``link_gbps`` → Gbps, ``BufferBytes`` → B), else
    ``number``."""
    name = field.lower()
    return next((unit for suffix, unit in FIELD_UNITS if name.endswith(suffix)), "number")


def x_field(table: PivotTable, want: str | None = None) -> str:
    """The field on the x axis: ``want`` (a field key or its short name), else the first numeric swept field
    that is not the transport, else the first other one, else the transport."""
    names = dict(zip(table.field_names(), table.fields)) | {f: f for f in table.fields}
    if want is not None:
        if want not in names:
            raise CosimInputError("--x", f"{want!r} is not a field that differs between the runs",
                                  "choose from " + (", ".join(table.field_names()) or "(none: the runs are alike)"))
        return names[want]
    if not table.fields:
        raise CosimInputError("--figure", "the runs' experiments do not differ in any field, so there is no "
                              "swept value to draw against", "compare the runs of a sweep (cosim merge)")
    others = [f for f in table.fields if f != LINE_FIELD]
    numeric = [f for f in others if all(as_number(v) is not None for v in table.column(f))]
    return (numeric or others or [LINE_FIELD])[0]


def line_groups(table: PivotTable, x: str) -> dict[str, list[int]]:
    """{line label: row indices}: the runs grouped by their values of every swept field but ``x``
    (``transport=roce``; one line "all runs" when ``x`` is the only field)."""
    rest = [(f, n) for f, n in zip(table.fields, table.field_names()) if f != x]
    groups: dict[str, list[int]] = {}
    for i, fv in enumerate(table.field_values):
        values = dict(zip(table.fields, fv))
        label = ", ".join(f"{n}={field_text(values[f])}" for f, n in rest) or "all runs"
        groups.setdefault(label, []).append(i)
    return groups


def sweep_figure(table: PivotTable, *, x: str | None = None, metric: str | None = None):
    """A Figure of ``metric`` (a summary key; default the table's first) against swept field ``x``, a line
    per value of the other swept fields."""
    key = metric or table.primary.key
    m = next((mm for mm in table.metrics if mm.key == key), None)
    if m is None:
        raise CosimInputError("--metric", f"{key!r} is not a column of the table",
                              "choose from " + ", ".join(mm.key for mm in table.metrics))
    field = x_field(table, x)
    xname = table.field_names()[table.fields.index(field)]
    raw_x = table.column(field)
    xs = [as_number(v) for v in raw_x]
    numeric = all(v is not None for v in xs)
    categories: Sequence = [] if numeric else list(dict.fromkeys(field_text(v) for v in raw_x))
    ys = np.array([np.nan if not isinstance(v, (int, float)) or isinstance(v, bool) else float(v) * m.scale
                   for v in table.column(key)])
    unit = f" ({m.unit})" if m.unit else ""
    fig, ax = figure(f"{m.label} against {xname}")
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415 - _figure has checked matplotlib is there
    for n, (label, rows) in enumerate(line_groups(table, field).items()):
        px = np.array([xs[i] if numeric else categories.index(field_text(raw_x[i])) for i in rows], np.float64)
        order = np.argsort(px, kind="stable")
        ax.plot(px[order], ys[rows][order], marker=MARKERS[n % len(MARKERS)], lw=1.5, label=label)
    if numeric:
        lo, hi = min(xs), max(xs)
        if lo > 0 and hi / lo > 10:
            log_axis(ax, lo, hi)
        else:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_number(v)))
        distinct = sorted(set(xs))
        if len(distinct) <= MAX_TICKS:  # the swept values themselves, not round numbers between them
            ax.set_xticks(distinct, [format_number(v) for v in distinct])
    else:
        ax.set_xticks(np.arange(len(categories)), categories)
    ax.set_xlabel(f"{xname} ({field_unit(field) if numeric else 'category'})")
    ax.set_ylabel(f"{m.label}{unit}")
    top = np.nanmax(ys) if np.isfinite(ys).any() else 1.0
    ax.set_ylim(0, (top or 1.0) * 1.08)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def sweep_of(runs) -> object | None:
    """The sweep figure of ``runs`` ({label: RunRecord}) with the run kind's key metric, or None for fewer
    than 3 runs or runs whose experiments differ in no field (nothing was swept)."""
    if len(runs) < 3:
        return None
    try:
        table = pivot_runs(runs)
    except CosimInputError:  # no numeric metric in any run
        return None
    return sweep_figure(table) if table.fields else None
