"""A sweep as one table: a row per run, the swept fields and the key metrics as columns, a ratio column.

The swept fields are found from the runs themselves: the fields of their stored experiments
(``config["experiment"]``, flattened as :func:`cosim.results.api.flat_fields` does) whose values differ
between runs. The metrics are the run kind's key results (iteration time for training, TTFT/TPOT for
serving, FCT for flows, then queues and lossless back-pressure) unless chosen; columns all zero or absent
in every run are left out. Values keep the units of their summary keys in JSON and CSV; the text table
shows them in the display units of the metric registry (:mod:`cosim.results.metrics`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cosim.errors import CosimInputError
from cosim.results.api import flat_fields
from cosim.results.metrics import Metric, format_cell, format_number, layout, metric_for

#: key metrics by run kind, in column order; the first present in the runs is the one the ratio divides
TRAINING_METRICS = ("iteration_time_ns", "exposed_comm_ns", "exposed_comm_tp_ns", "exposed_comm_cp_ns",
                    "exposed_comm_pp_ns", "exposed_comm_dp_ns", "exposed_comm_ep_ns", "exposed_comm_fabric_ns",
                    "max_queue_bytes", "pfc_paused_ns", "credit_stall_ns", "drops")
INFERENCE_METRICS = ("ttft_p50_ns", "ttft_p99_ns", "tpot_p50_ns", "tpot_p99_ns", "max_queue_bytes",
                     "pfc_paused_ns", "credit_stall_ns", "drops")
FLOW_METRICS = ("fct_p50_ns", "fct_p99_ns", "fct_slowdown_p99", "max_queue_bytes", "pfc_paused_ns",
                "credit_stall_ns", "drops")
#: short column labels of the pivot's text table (the unit goes on a second header line)
SHORT_LABELS = {"iteration_time_ns": "iteration", "exposed_comm_ns": "exposed comm",
                **{f"exposed_comm_{d}_ns": f"exp. {d.upper()}" for d in ("tp", "cp", "pp", "dp", "ep")},
                "exposed_comm_fabric_ns": "exp. fabric",
                "transfer_slowdown_p99": "transfer slowdown p99", "fct_p50_ns": "FCT p50", "fct_p99_ns": "FCT p99",
                "fct_slowdown_p99": "slowdown p99", "max_queue_bytes": "max queue", "pfc_paused_ns": "PFC paused",
                "credit_stall_ns": "credit stall", "ttft_p50_ns": "TTFT p50", "ttft_p99_ns": "TTFT p99",
                "tpot_p50_ns": "TPOT p50", "tpot_p99_ns": "TPOT p99"}
#: fields that differ between runs without being what was varied
_NOT_SWEPT = frozenset({"description"})
#: the field lines of a sweep figure are told apart by first
LINE_FIELD = "network.transport"


@dataclass(frozen=True, slots=True)
class PivotTable:
    """Runs (rows) × swept fields and metrics (columns); ``baseline`` is the run the ratios divide by."""

    runs: tuple[str, ...]
    baseline: str
    fields: tuple[str, ...]  # flat experiment keys whose values differ between the runs
    field_values: tuple[tuple, ...]  # per run, its value of each field
    metrics: tuple[Metric, ...]
    values: tuple[tuple, ...]  # per run, its value of each metric (summary units)
    ratios: tuple  # per run, its first metric / the baseline's (None where undefined)

    @property
    def primary(self) -> Metric:
        """The metric the ratio column divides."""
        return self.metrics[0]

    def field_names(self) -> list[str]:
        """Short column names of the fields: the last part of each key (``BufferBytes``, ``link_gbps``),
        the whole key where two would read alike."""
        short = [short_name(f) for f in self.fields]
        return [s if short.count(s) == 1 else f for s, f in zip(short, self.fields)]

    def column(self, key: str) -> list:
        """The values of metric or field ``key`` (a summary key, a flat field key or its short name), by run."""
        for j, m in enumerate(self.metrics):
            if m.key == key:
                return [row[j] for row in self.values]
        names = self.field_names()
        for j, f in enumerate(self.fields):
            if key in (f, names[j]):
                return [row[j] for row in self.field_values]
        raise KeyError(key)

    def to_dict(self) -> dict:
        """JSON-able: baseline, fields, metrics (key, label, unit) and per run its fields, metrics and ratio."""
        clean = lambda v: None if isinstance(v, float) and not math.isfinite(v) else v  # noqa: E731
        return {
            "baseline": self.baseline, "fields": list(self.fields),
            "metrics": [{"key": m.key, "label": m.label, "unit": m.raw_unit} for m in self.metrics],
            "ratio_of": self.primary.key,
            "runs": [{"run": n, "fields": dict(zip(self.fields, fv)),
                      "values": {m.key: clean(v) for m, v in zip(self.metrics, vals)}, "ratio": clean(q)}
                     for n, fv, vals, q in zip(self.runs, self.field_values, self.values, self.ratios)],
        }

    def to_json(self) -> str:
        """``to_dict`` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_csv(self) -> str:
        """A line per run: run, the swept fields, the metrics (summary units), the ratio."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["run", *self.fields, *(m.key for m in self.metrics), f"ratio {self.primary.key}"])
        blank = lambda v: "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v  # noqa: E731
        for n, fv, vals, q in zip(self.runs, self.field_values, self.values, self.ratios):
            w.writerow([n, *map(blank, fv), *map(blank, vals), blank(q)])
        return buf.getvalue()

    def cells(self) -> tuple[list[str], list[str], list[list[str]]]:
        """Labels, units and body of the text table (display units; the ratio column right after the metric it
        divides; the run column only when no field differs)."""
        by_run = not self.fields
        keys = [""] if by_run else ["" for _ in self.fields]
        labels = (["run"] if by_run else self.field_names()) + [SHORT_LABELS.get(m.key, m.label) for m in self.metrics]
        units = keys + [m.unit for m in self.metrics]
        at = len(keys) + 1
        labels.insert(at, "ratio")
        units.insert(at, "vs base")
        body = []
        for n, fv, vals, q in zip(self.runs, self.field_values, self.values, self.ratios):
            line = [n] if by_run else [field_text(v) for v in fv]
            line += [format_cell(m, v, missing="") for m, v in zip(self.metrics, vals)]
            line.insert(at, "" if q is None or not math.isfinite(q) else format_number(q))
            body.append(line)
        return labels, units, body

    def to_text(self, width: int | None = None) -> str:
        """The aligned table (units on a second header line), then a line naming the metrics and the baseline."""
        labels, units, body = self.cells()
        left = 1 if not self.fields else len(self.fields)
        blocks = layout(labels, [units, *body], fixed=left, left=left, width=width).split("\n\n")
        out = []
        for block in blocks:  # the units line belongs above the rule
            lines = block.split("\n")
            out.append("\n".join([lines[0], lines[2], lines[1], *lines[3:]]))
        named = [f"  {SHORT_LABELS[m.key]}: {m.label}" for m in self.metrics
                 if SHORT_LABELS.get(m.key, m.label) != m.label]
        return "\n".join(["\n\n".join(out), f"ratio: {self.primary.label} / the baseline's ({self.baseline})",
                          *named])


def short_name(field: str) -> str:
    """``attr:SharedBufferMmu::BufferBytes`` → ``BufferBytes``, ``network.link_gbps`` → ``link_gbps``."""
    return field.rsplit("::", 1)[-1].rsplit(".", 1)[-1]


def field_text(value) -> str:
    """A swept field's value for the text table: numbers to 4 significant digits, integers whole."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return "-" if value is None else str(value)
    if isinstance(value, (int, float)):
        return format_number(value, integer=isinstance(value, int) or float(value).is_integer())
    return json.dumps(value, sort_keys=True)


def swept_fields(configs: Sequence[Mapping]) -> dict[str, list]:
    """{flat field key: its value in each run} for the experiment fields whose values differ between the
    runs' configs, the transport first, the rest in document order."""
    flats = [flat_fields(c.get("experiment") or {}) for c in configs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    keys.sort(key=lambda k: k != LINE_FIELD)
    out = {}
    for k in keys:
        if k in _NOT_SWEPT:
            continue
        vals = [f.get(k) for f in flats]
        present = [v for f, v in zip(flats, vals) if k in f]  # a resolved document leaves out what its
        # transport does not use (dcqcn on ib): absent is "does not apply", not a swept value
        if len({json.dumps(v, sort_keys=True, default=str) for v in present}) > 1:
            out[k] = vals
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def default_metrics(summaries: Sequence[Mapping]) -> list[str]:
    """The run kind's key metrics present (nonzero) in some run; kinds by what the summaries hold."""
    has = lambda k: any(k in s for s in summaries)  # noqa: E731
    wanted = TRAINING_METRICS if has("iteration_time_ns") else INFERENCE_METRICS if has("ttft_p50_ns") \
        else FLOW_METRICS
    first = next((k for k in wanted if has(k)), None)
    return [k for k in wanted if k == first or any(_is_number(s.get(k)) and s.get(k) != 0 for s in summaries)]


def pivot_runs(records: Mapping, *, baseline: str | None = None, metrics: Sequence[str] = ()) -> PivotTable:
    """The pivot table of ``records`` ({label: RunRecord}, in row order): ``metrics`` (summary keys; default
    :func:`default_metrics`), the ratio of the first against ``baseline`` (default: the first run)."""
    if not records:
        raise CosimInputError("runs", "nothing to compare", "pass at least one results file with a run")
    names = list(records)
    base = names[0] if baseline is None else baseline
    if base not in records:
        raise CosimInputError("--baseline", f"no run named {base!r}", f"choose one of {', '.join(names)}")
    summaries = [records[n].summary for n in names]
    keys = list(metrics) or default_metrics(summaries)
    present = sorted({k for s in summaries for k, v in s.items() if _is_number(v)})
    for k in keys:
        if k not in present:
            raise CosimInputError("--metric", f"no run has a numeric summary value {k!r}",
                                  f"choose from {', '.join(present)}")
    if not keys:
        raise CosimInputError("--metric", "the runs have no numeric summary value", "compare runs that finished")
    fields = swept_fields([records[n].config for n in names])
    values = tuple(tuple(s.get(k) for k in keys) for s in summaries)
    b = records[base].summary.get(keys[0])
    ratios = tuple(v[0] / b if _is_number(v[0]) and _is_number(b) and b != 0 else None for v in values)
    return PivotTable(runs=tuple(names), baseline=base, fields=tuple(fields),
                      field_values=tuple(zip(*fields.values())) if fields else tuple(() for _ in names),
                      metrics=tuple(metric_for(k) for k in keys), values=values, ratios=ratios)
