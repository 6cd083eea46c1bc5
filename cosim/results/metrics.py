"""The one registry of summary metrics: label, unit and display rule of every summary key.

Summary keys carry their unit in their suffix (``_ns``, ``_bytes``, ``_gbps``); :data:`METRICS` gives the
known ones a label, a display unit and an order, and :func:`metric_for` infers the rule of any other key
from its suffix. The terminal table of ``cosim run`` and ``cosim inspect``, ``cosim compare``, the report
and the notebook frames all read this registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Metric:
    """How a summary key is shown: label, display unit, scale from the stored value, decimals."""

    key: str
    label: str
    unit: str = ""  # unit of the text table (after scale)
    scale: float = 1.0
    decimals: int | None = None  # None: integers as is, other floats with 6 significant digits

    @property
    def raw_unit(self) -> str:
        """Unit of the stored value, from the key's suffix (JSON and CSV use it)."""
        return raw_unit(self.key)


_US, _MS, _KB, _MB = ("us", 1e-3, 3), ("ms", 1e-6, 3), ("KB", 1e-3, 1), ("MB", 1e-6, 3)
_N, _X = ("", 1.0, 0), ("", 1.0, 3)

#: collective time metrics per collective kind (summary keys coll_<kind>_p50_ns, ...)
_COLL = tuple((f"coll_{kind}_{q}_ns", f"{label} time {q}", ("us", 1e-3, 1))
              for kind, label in (("all_reduce", "all-reduce"), ("reduce_scatter", "reduce-scatter"),
                                  ("all_gather", "all-gather"), ("all_to_all", "all-to-all"),
                                  ("broadcast", "broadcast"))
              for q in ("p50", "p99"))

#: Known summary keys in display order (keys absent from every run are not shown).
METRICS: tuple[Metric, ...] = tuple(Metric(k, label, *u) for k, label, u in (
    ("status", "status", ("", 1.0, None)),
    ("iterations", "iterations", _N),
    ("iteration_time_ns", "iteration time", _MS),
    ("iteration_time_first_ns", "first iteration time", _MS),
    ("compute_time_ns", "compute, busiest rank", _MS),
    ("exposed_comm_ns", "exposed communication", _MS),
    *_COLL,
    ("n_ranks", "ranks", _N),
    ("flows", "flows", ("", 1.0, 0)),
    ("flows_completed", "flows completed", ("", 1.0, 0)),
    ("fct_p50_ns", "FCT p50", _US),
    ("fct_p99_ns", "FCT p99", _US),
    ("fct_p999_ns", "FCT p99.9", _US),
    ("fct_max_ns", "FCT max", _US),
    ("fct_slowdown_p50", "FCT slowdown p50", _X),
    ("fct_slowdown_p99", "FCT slowdown p99", _X),
    ("fct_slowdown_p999", "FCT slowdown p99.9", _X),
    ("goodput_gbps", "goodput", ("Gbps", 1.0, 2)),
    ("link_utilization_max", "busiest link utilization", ("", 1.0, 3)),
    ("link_utilization_mean", "mean utilization of used links", ("", 1.0, 3)),
    ("latency_p50_ns", "latency p50", _US),
    ("latency_p99_ns", "latency p99", _US),
    ("latency_p999_ns", "latency p99.9", _US),
    ("max_queue_bytes", "max queue", _KB),
    ("queue_p99_bytes", "p99 queue", _KB),
    ("pfc_paused_ns", "PFC paused time", ("us", 1e-3, 1)),
    ("pause_frames_sent", "PFC PAUSE frames", ("", 1.0, 0)),
    ("pause_events", "PFC pause events", ("", 1.0, 0)),
    ("credit_stall_ns", "credit-stall time", ("us", 1e-3, 1)),
    ("ecn_marks", "ECN marks", ("", 1.0, 0)),
    ("cnps_sent", "CNPs", ("", 1.0, 0)),
    ("cnps_received", "CNPs received", ("", 1.0, 0)),
    ("drops", "drops", ("", 1.0, 0)),
    ("switch_drops", "switch drops", ("", 1.0, 0)),
    ("payload_bytes", "payload", _MB),
    ("delivered_bytes", "delivered", _MB),
    ("sim_time_ns", "simulated time", _US),
    ("peak_headroom_used_bytes", "peak PFC headroom used", _KB),
    ("min_headroom_bytes", "min PFC headroom", _KB),
    ("acks", "ACKs", ("", 1.0, 0)),
    ("packet_hops", "packet-hops", ("", 1.0, 0)),
    ("events", "events", ("", 1.0, 0)),
    ("wall_time_s", "wall time", ("s", 1.0, 3)),
    ("packet_hops_per_s", "packet-hops/s", ("M/s", 1e-6, 2)),
))
_KNOWN = {m.key: m for m in METRICS}

#: key suffix -> (raw unit, display unit, scale, decimals) for keys not in METRICS
_SUFFIXES = (
    ("_per_s", "1/s", "1/s", 1.0, None),
    ("_ns", "ns", "us", 1e-3, 3),
    ("_ps", "ps", "us", 1e-6, 3),
    ("_s", "s", "s", 1.0, 3),
    ("_bytes", "B", "KB", 1e-3, 1),
    ("_gbps", "Gbit/s", "Gbps", 1.0, 2),
    ("_bps", "bit/s", "Gbps", 1e-9, 2),
)


def raw_unit(key: str) -> str:
    """Unit of a summary value from its key's suffix (``_ns`` → ns, ``_bytes`` → B; none → "")."""
    return next((raw for suffix, raw, *_ in _SUFFIXES if key.endswith(suffix)), "")


def metric_for(key: str) -> Metric:
    """The display rule of a summary key: the catalogued one, or one inferred from the key's suffix."""
    if key in _KNOWN:
        return _KNOWN[key]
    for suffix, _raw, unit, scale, decimals in _SUFFIXES:
        if key.endswith(suffix):
            return Metric(key, key[: -len(suffix)].replace("_", " "), unit, scale, decimals)
    return Metric(key, key.replace("_", " "))


def ordered_keys(summaries: Sequence[Mapping]) -> list[str]:
    """Scalar summary keys present in any summary: catalogued ones in METRICS order, then the rest sorted."""
    present = {k for s in summaries for k, v in s.items() if v is None or isinstance(v, (bool, int, float, str))}
    return [m.key for m in METRICS if m.key in present] + sorted(present - _KNOWN.keys())


#: the rows of the side-by-side table of co-simulated training runs
TRAINING_KEYS = frozenset({
    "status", "iterations", "iteration_time_ns", "iteration_time_first_ns", "compute_time_ns", "exposed_comm_ns",
    *(c[0] for c in _COLL), "n_ranks", "flows", "flows_completed", "fct_slowdown_p50", "fct_slowdown_p99",
    "fct_slowdown_p999", "link_utilization_max", "max_queue_bytes", "queue_p99_bytes", "drops", "switch_drops",
    "ecn_marks", "cnps_sent", "pause_frames_sent", "pfc_paused_ns", "credit_stall_ns", "packet_hops", "events",
    "wall_time_s", "packet_hops_per_s"})
#: summary keys not shown in the terminal table (simulator internals; they stay in the file and in compare)
_DETAIL_KEYS = frozenset({"link_utilization_mean", "pause_events", "cnps_received", "peak_headroom_used_bytes",
                          "min_headroom_bytes", "acks"})


def row_label(m: Metric) -> str:
    """``label (unit)`` as the terminal table shows a metric."""
    return f"{m.label} ({m.unit})" if m.unit else m.label


def format_cell(m: Metric, value) -> str:
    """One value of metric ``m`` scaled to its display unit ("-" if absent)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    scaled = value * m.scale
    if m.decimals is None:
        return str(value) if isinstance(value, int) else f"{scaled:.6g}"
    return f"{scaled:.{m.decimals}f}" if m.decimals else f"{scaled:.0f}"


def summary_table(summaries: Mapping[str, Mapping], *, training: bool = False) -> str:
    """Run summaries side by side for the terminal: a column per run, a row per catalogued metric present
    in any run (for training runs, the training rows)."""
    names = list(summaries)
    keys = [m.key for m in METRICS if (m.key in TRAINING_KEYS if training else m.key not in _DETAIL_KEYS)]
    body = [[row_label(_KNOWN[k])] + [format_cell(_KNOWN[k], summaries[n].get(k)) for n in names]
            for k in keys if any(k in s for s in summaries.values())]
    header = ["metric"] + names
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in body])
