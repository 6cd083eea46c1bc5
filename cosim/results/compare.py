"""Runs side by side: one row per summary metric, one column per run, delta and ratio vs a baseline.

Values keep the units of their summary keys (``fct_p99_ns`` is in ns) in JSON and CSV; the text table
scales them to readable units (us, KB, MB) given in its unit column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cosim.errors import CosimInputError
from cosim.results.metrics import (
    Metric,
    format_cell,
    format_number,
    layout,
    metric_for,
    ordered_keys,
)
from cosim.results.store import read_results


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_scalar(v) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


@dataclass(frozen=True, slots=True)
class Row:
    """One metric across the runs: stored values, and delta / ratio vs the baseline (None if undefined)."""

    metric: Metric
    values: tuple
    deltas: tuple
    ratios: tuple


@dataclass(frozen=True, slots=True)
class CompareTable:
    """Metrics (rows) × runs (columns); the baseline is the first run."""

    runs: tuple[str, ...]
    rows: tuple[Row, ...]

    @property
    def baseline(self) -> str:
        """Name of the run every delta and ratio is taken against."""
        return self.runs[0]

    def row(self, key: str) -> Row:
        """The row of summary key ``key`` (KeyError if no run has it)."""
        for r in self.rows:
            if r.metric.key == key:
                return r
        raise KeyError(key)

    def to_dict(self) -> dict:
        """JSON-able form: baseline, runs, and per metric its values, deltas and ratios by run (raw units)."""
        clean = lambda v: None if isinstance(v, float) and not math.isfinite(v) else v  # noqa: E731
        return {
            "baseline": self.baseline,
            "runs": list(self.runs),
            "metrics": [{
                "key": r.metric.key, "label": r.metric.label, "unit": r.metric.raw_unit,
                "values": {n: clean(v) for n, v in zip(self.runs, r.values)},
                "delta": {n: clean(v) for n, v in zip(self.runs, r.deltas)},
                "ratio": {n: clean(v) for n, v in zip(self.runs, r.ratios)},
            } for r in self.rows],
        }

    def to_json(self) -> str:
        """``to_dict`` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_csv(self) -> str:
        """One line per metric: key, label, unit, a value per run, then delta and ratio per other run."""
        others = self.runs[1:]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["metric", "label", "unit", *self.runs, *(f"delta {n}" for n in others),
                    *(f"ratio {n}" for n in others)])
        blank = lambda v: "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v  # noqa: E731
        for r in self.rows:
            w.writerow([r.metric.key, r.metric.label, r.metric.raw_unit, *map(blank, r.values),
                        *map(blank, r.deltas[1:]), *map(blank, r.ratios[1:])])
        return buf.getvalue()

    def cells(self) -> tuple[list[str], list[list[str]]]:
        """Header and body of the text table as strings (display units; blank where missing)."""
        header = ["metric", "unit", self.baseline]
        for n in self.runs[1:]:
            header += [n, "delta", "ratio"]
        body = []
        simulator_rows = False
        for r in self.rows:
            m = r.metric
            if m.section == "simulator" and not simulator_rows:  # ordered_keys puts them last
                body.append(["simulator:"] + [""] * (len(header) - 1))
                simulator_rows = True
            line = [m.label, m.unit, format_value(m, r.values[0])]
            for v, d, q in zip(r.values[1:], r.deltas[1:], r.ratios[1:]):
                line += [format_value(m, v), format_value(m, d, signed=True), format_ratio(q)]
            body.append(line)
        return header, body

    def to_text(self, width: int | None = None) -> str:
        """Aligned plain-text table for the terminal; many runs are shown in blocks that fit ``width``
        (default: the terminal's), each repeating the metric and unit columns."""
        header, body = self.cells()
        return layout(header, body, fixed=3, group=3, left=2, width=width)


def format_value(m: Metric, v, *, signed: bool = False) -> str:
    """A stored value in the metric's display unit ("" if missing)."""
    return format_cell(m, v, signed=signed, missing="")


def format_ratio(q) -> str:
    """A ratio with 4 significant digits, ``1.234`` or ``30.82`` ("" if undefined)."""
    if q is None or not math.isfinite(q):
        return ""
    return format_number(q)


def _summaries(records) -> dict[str, Mapping]:
    if isinstance(records, Mapping):
        items = records.items()
    else:
        items = ((r.name, r) for r in records)
    out = {}
    for name, r in items:
        out[name] = r if isinstance(r, Mapping) else r.summary
    return out


def compare_runs(records, *, baseline: str | None = None) -> CompareTable:
    """Compare runs ({name: RunRecord or summary dict}, or RunRecords): rows of metrics, baseline first."""
    summaries = _summaries(records)
    if not summaries:
        raise CosimInputError("runs", "nothing to compare", "pass at least one results file with a run")
    names = list(summaries)
    if baseline is not None:
        if baseline not in summaries:
            raise CosimInputError("--baseline", f"no run named {baseline!r}", f"choose one of {', '.join(names)}")
        names.remove(baseline)
        names.insert(0, baseline)
    rows = []
    for key in ordered_keys([summaries[n] for n in names]):
        values = tuple(summaries[n].get(key) for n in names)
        b = values[0]
        deltas, ratios = [], []
        for v in values:
            ok = _is_number(v) and _is_number(b)
            d = v - b if ok else None
            # a difference below the last bits of the values is float noise (sums in another order), not a delta
            if d is not None and isinstance(d, float) and abs(d) <= 1e-9 * max(abs(v), abs(b)):
                d = 0.0
            deltas.append(d)
            ratios.append(v / b if ok and b != 0 else None)
        rows.append(Row(metric_for(key), values, tuple(deltas), tuple(ratios)))
    return CompareTable(runs=tuple(names), rows=tuple(rows))


def label_runs(files: Mapping[str, Mapping]) -> dict:
    """Name runs from several files uniquely: the run name if unambiguous, else ``file:run``."""
    stems = [Path(f).stem for f in files]
    file_label = {f: (Path(f).stem if stems.count(Path(f).stem) == 1 else str(f)) for f in files}
    counts: dict[str, int] = {}
    for runs in files.values():
        for n in runs:
            counts[n] = counts.get(n, 0) + 1
    out = {}
    for f, runs in files.items():
        for n, r in runs.items():
            out[n if counts[n] == 1 else f"{file_label[f]}:{n}"] = r
    return out


def resolve_run(runs: Mapping, want: str, *, option: str = "--run") -> str:
    """The label in ``runs`` that ``want`` names (a label, or a run name that only one file has)."""
    hits = [label for label in runs if label == want] or \
           [label for label, r in runs.items() if getattr(r, "name", None) == want]
    if len(hits) != 1:
        problem = f"no run named {want!r}" if not hits else f"{want!r} is ambiguous ({', '.join(hits)})"
        raise CosimInputError(option, problem, f"choose from {', '.join(runs)}")
    return hits[0]


def select_runs(runs: Mapping, names: Sequence[str]) -> dict:
    """Keep the runs named in ``names`` (labels or plain run names), in that order; all if empty."""
    if not names:
        return dict(runs)
    labels = [resolve_run(runs, want) for want in names]
    return {label: runs[label] for label in labels}


def sweep_order(runs: Mapping) -> dict:
    """``runs`` in sweep-point order when every run carries config["sweep"] (merged sweeps), else as given."""
    def key(item):
        """(sweep name, point index) of a run, or None."""
        sw = getattr(item[1], "config", {}).get("sweep")
        return (str(sw.get("name")), sw.get("index")) if isinstance(sw, dict) and isinstance(sw.get("index"), int) \
            else None

    keys = [key(item) for item in runs.items()]
    if not runs or any(k is None for k in keys):
        return dict(runs)
    return dict(item for _, item in sorted(zip(keys, runs.items()), key=lambda z: z[0]))


def load_runs(paths: Sequence[str | Path], names: Sequence[str] = (), tables: Collection[str] | None = None) -> dict:
    """Read results files and return {label: RunRecord} (see ``label_runs``), filtered by ``names``;
    ``tables``: read only these tables (default: all)."""

    files = {str(p): sweep_order(read_results(p, tables)) for p in paths}
    runs = label_runs(files)
    if not runs:
        raise CosimInputError(", ".join(map(str, paths)), "no runs in the file(s)", "write runs with 'cosim run'")
    return select_runs(runs, names)
