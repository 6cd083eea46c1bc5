"""The table ``cosim run`` prints: its runs side by side, and for two runs (``--transport both``, a fault
and its baseline) their delta and ratio.

Rows and labels come from the metrics registry (cosim.results.metrics), as in ``cosim inspect``; what this
module adds is how a row reads at a glance: every value of a row (and its delta) with the same decimals
(``137.2`` beside ``138.0``, never ``138``), thousands separators (``14,641,620``), a signed delta and a
ratio with three decimals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from cosim.results import metrics
from cosim.results.metrics import METRICS, Metric

#: decimals of the ratio column
RATIO_DECIMALS = 3
#: longest "b - a" header of the delta column; longer run names get "delta" and "ratio" and a legend
LONG_HEADER = 16


def _number(value) -> float | None:
    """``value`` as a finite float, None for text, booleans, missing and non-finite values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def row_decimals(m: Metric, values: Sequence) -> int:
    """Decimals that give the row's largest value :data:`metrics.SIGNIFICANT` significant digits (0 for
    counts and for values of 1000 and more), shared by every value of the row."""
    scaled = [abs(x * m.scale) for x in map(_number, values) if x is not None and x != 0]
    if not scaled or (m.integer and all(float(x).is_integer() for x in map(_number, values) if x is not None)):
        return 0
    return max(0, metrics.SIGNIFICANT - 1 - math.floor(math.log10(max(scaled))))


def format_value(m: Metric, value, decimals: int, *, signed: bool = False) -> str:
    """One value in its display unit with ``decimals`` decimals and thousands separators; exactly 0 reads
    ``0`` (a nonzero value that rounds to 0 reads ``0.000``, unsigned); values beyond what fixed decimals show (below 1e-3 or from 1e15) keep the registry's exponent
    form; text as it is; missing ``-``."""
    if value is None:
        return "-"
    x = _number(value)
    if x is None:
        return str(value)
    x *= m.scale
    if x == 0:
        return "0"
    if abs(x) >= 1e15 or (decimals > 3 + metrics.SIGNIFICANT and abs(x) < 1e-3):
        return metrics.format_number(x, signed=signed)
    if round(x, decimals) == 0:  # nonzero, below the row's last decimal: no sign on a zero
        return f"{0:.{decimals}f}"
    return f"{x:{'+' if signed else ''},.{decimals}f}"


def ratio_text(first, second) -> str:
    """``second / first`` with RATIO_DECIMALS decimals; ``-`` when either is not a number or first is 0."""
    a, b = _number(first), _number(second)
    if a is None or b is None or a == 0:
        return "-"
    return f"{b / a:,.{RATIO_DECIMALS}f}"


def _rows(summaries: Mapping[str, Mapping], training: bool, inference: bool) -> tuple[list[Metric], list[Metric]]:
    """(result rows, simulator rows) of the table: the metrics :func:`metrics.summary_table` shows."""
    present = {k for s in summaries.values() for k in s}
    wanted = [m for m in METRICS if m.key in present]
    if inference:
        keep = metrics.INFERENCE_KEYS.__contains__
    elif training:
        keep = metrics.TRAINING_KEYS.__contains__
    else:
        keep = lambda k: k not in metrics._DETAIL_KEYS  # noqa: E731, SLF001 - the registry's own rule
    sim_rows = metrics._SIMULATOR_ROWS | (metrics._INFERENCE_SIMULATOR_ROWS if inference else frozenset())  # noqa: SLF001
    return ([m for m in wanted if m.section == "result" and keep(m.key)],
            [m for m in wanted if m.section == "simulator" and m.key in sim_rows])


def run_table(summaries: Mapping[str, Mapping], *, training: bool = False, inference: bool = False,
              reference: str | None = None, width: int | None = None) -> str:
    """Run summaries side by side: a column per run, a row per metric, what the simulation cost below; with
    exactly two runs a delta column (``ib - roce``: the other run - ``reference``, by default the first)
    and a ratio column (``ib / roce``); below, a line per training run saying where its exposed
    communication goes (:func:`metrics.exposure_line`)."""
    names = list(summaries)
    pair = len(names) == 2
    if pair and reference == names[1]:
        names.reverse()
    results, simulator = _rows(summaries, training, inference)

    def row(m: Metric) -> list[str]:
        values = [summaries[n].get(m.key) for n in names]
        decimals = row_decimals(m, values)
        cells = [metrics.row_label(m)] + [format_value(m, x, decimals) for x in values]
        if pair:
            a, b = map(_number, values)
            delta = None if a is None or b is None else b - a
            cells += [format_value(m, delta, decimals, signed=True) if delta is not None else "",
                      ratio_text(*values) if delta is not None else ""]
        return cells

    extra = [f"{names[1]} - {names[0]}", f"{names[1]} / {names[0]}"] if pair else []
    legend = ""
    if pair and len(extra[0]) > LONG_HEADER:  # long run names: short headers, said below the table
        legend = f"\ndelta = {extra[0]}, ratio = {extra[1]}"
        extra = ["delta", "ratio"]
    body = [row(m) for m in results]
    if simulator:
        body += [["simulator:"] + [""] * (len(names) + len(extra))] + [row(m) for m in simulator]
    lines = [f"{n}: {line}" for n in names if (line := metrics.exposure_line(summaries[n]))]
    exposure = "\n" + "\n".join(lines) if lines else ""
    return metrics.layout(["metric", *names, *extra], body, width=width) + legend + exposure
