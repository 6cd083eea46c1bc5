"""Plain-text tables for the terminal: runs side by side, one metric per row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: collective time rows of co-simulation runs, per collective kind (summary keys coll_<kind>_p50_ns, ...)
COLL_ROWS: tuple[tuple[str, str, float, str], ...] = tuple(
    (f"coll_{kind}_{q}_ns", f"{label} time {q} (us)", 1e-3, "{:.1f}")
    for kind, label in (("all_reduce", "all-reduce"), ("reduce_scatter", "reduce-scatter"),
                        ("all_gather", "all-gather"), ("all_to_all", "all-to-all"), ("broadcast", "broadcast"))
    for q in ("p50", "p99"))

#: summary key -> (row label, scale, format); keys absent from every run are skipped
SUMMARY_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("status", "status", 1, "{}"),
    ("iterations", "iterations", 1, "{:d}"),
    ("iteration_time_ns", "iteration time (ms)", 1e-6, "{:.3f}"),
    ("iteration_time_first_ns", "first iteration time (ms)", 1e-6, "{:.3f}"),
    ("compute_time_ns", "compute, busiest rank (ms)", 1e-6, "{:.3f}"),
    ("exposed_comm_ns", "exposed communication (ms)", 1e-6, "{:.3f}"),
    *COLL_ROWS,
    ("n_ranks", "ranks", 1, "{:d}"),
    ("flows", "flows", 1, "{:d}"),
    ("flows_completed", "flows completed", 1, "{:d}"),
    ("payload_bytes", "payload (MB)", 1e-6, "{:.3f}"),
    ("delivered_bytes", "delivered (MB)", 1e-6, "{:.3f}"),
    ("sim_time_ns", "simulated time (us)", 1e-3, "{:.3f}"),
    ("fct_p50_ns", "FCT p50 (us)", 1e-3, "{:.3f}"),
    ("fct_p99_ns", "FCT p99 (us)", 1e-3, "{:.3f}"),
    ("fct_max_ns", "FCT max (us)", 1e-3, "{:.3f}"),
    ("fct_slowdown_p50", "FCT slowdown p50", 1, "{:.3f}"),
    ("fct_slowdown_p99", "FCT slowdown p99", 1, "{:.3f}"),
    ("fct_slowdown_p999", "FCT slowdown p99.9", 1, "{:.3f}"),
    ("goodput_gbps", "goodput (Gbps)", 1, "{:.2f}"),
    ("link_utilization_max", "busiest link utilization", 1, "{:.3f}"),
    ("max_queue_bytes", "max queue (KB)", 1e-3, "{:.1f}"),
    ("queue_p99_bytes", "p99 queue (KB)", 1e-3, "{:.1f}"),
    ("latency_p50_ns", "latency p50 (us)", 1e-3, "{:.3f}"),
    ("latency_p99_ns", "latency p99 (us)", 1e-3, "{:.3f}"),
    ("latency_p999_ns", "latency p99.9 (us)", 1e-3, "{:.3f}"),
    ("drops", "drops", 1, "{:d}"),
    ("switch_drops", "switch drops", 1, "{:d}"),
    ("ecn_marks", "ECN marks", 1, "{:d}"),
    ("cnps_sent", "CNPs", 1, "{:d}"),
    ("pause_frames_sent", "PFC PAUSE frames", 1, "{:d}"),
    ("pfc_paused_ns", "PFC paused time (us)", 1e-3, "{:.1f}"),
    ("credit_stall_ns", "credit-stall time (us)", 1e-3, "{:.1f}"),
    ("packet_hops", "packet-hops", 1, "{:d}"),
    ("events", "events", 1, "{:d}"),
    ("wall_time_s", "wall time (s)", 1, "{:.3f}"),
    ("packet_hops_per_s", "packet-hops/s (M)", 1e-6, "{:.2f}"),
)


#: the rows of the side-by-side table of co-simulated training runs (a subset of SUMMARY_ROWS)
TRAINING_ROWS = tuple(r for r in SUMMARY_ROWS if r[0] in {
    "status", "iterations", "iteration_time_ns", "iteration_time_first_ns", "compute_time_ns", "exposed_comm_ns",
    *(c[0] for c in COLL_ROWS), "n_ranks", "flows", "flows_completed", "fct_slowdown_p50", "fct_slowdown_p99",
    "fct_slowdown_p999", "link_utilization_max", "max_queue_bytes", "queue_p99_bytes", "drops", "switch_drops",
    "ecn_marks", "cnps_sent", "pause_frames_sent", "pfc_paused_ns", "credit_stall_ns", "packet_hops", "events",
    "wall_time_s", "packet_hops_per_s"})


def _cell(value, scale: float, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and scale != 1:
        value = value * scale
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def summary_table(summaries: Mapping[str, Mapping], rows: Sequence = SUMMARY_ROWS) -> str:
    """Render run summaries side by side: a column per run, a row per metric present in any run."""
    names = list(summaries)
    body = []
    for key, label, scale, fmt in rows:
        if not any(key in s for s in summaries.values()):
            continue
        body.append([label] + [_cell(summaries[n].get(key), scale, fmt) for n in names])
    header = ["metric"] + names
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    out = [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in body]
    return "\n".join(out)
