"""The error monitor of steady-state fast-forward: how far a fast-forwarded run's times are from the exact run's.

    entries = time_errors(exact_out, approx_out, dag)   # summary keys fast_forward_check_*

Both outputs come from the same plan's DAG (only limits.fast_forward differs), so ops match by index: flow
completion times are those of the FLOW ops, collective times those of the collectives' barrier ops, and the
makespan spans every op. docs/models/fast-forward.md describes the model and its error bound.
"""

from __future__ import annotations

import numpy as np

from cosim.collectives.dag import DagOpKind, flow_keys


def relative_differences(exact: np.ndarray, approx: np.ndarray) -> np.ndarray:
    """|approx - exact| / exact wherever both are finite and exact is positive (float64)."""
    exact, approx = np.asarray(exact, np.float64), np.asarray(approx, np.float64)
    ok = np.isfinite(exact) & np.isfinite(approx) & (exact > 0)
    return np.abs(approx[ok] - exact[ok]) / exact[ok]


def _max_p99(prefix: str, rel: np.ndarray) -> dict:
    """``<prefix>_max_rel`` and ``<prefix>_p99_rel`` of relative differences ``rel`` (empty: none)."""
    if not rel.size:
        return {}
    return {f"{prefix}_max_rel": float(rel.max()), f"{prefix}_p99_rel": float(np.percentile(rel, 99))}


def summary_errors(exact_summary: dict, approx_summary: dict) -> dict:
    """Relative differences of the runs' summary statistics: ``fast_forward_check_fct_p99_rel`` (the p99 flow
    completion time, ``fct_p99_ns``) and, for training runs, ``fast_forward_check_iteration_rel``
    (``iteration_time_ns``)."""
    out = {}
    for key, name in (("fct_p99_ns", "fast_forward_check_fct_p99_rel"),
                      ("iteration_time_ns", "fast_forward_check_iteration_rel")):
        rel = relative_differences(np.array([exact_summary.get(key, np.nan)], np.float64),
                                   np.array([approx_summary.get(key, np.nan)], np.float64))
        if rel.size:
            out[name] = float(rel[0])
    return out


def _flow_fcts(out, dag) -> tuple[np.ndarray, np.ndarray]:
    """(key, FCT ns) of every flow of engine.DagOutput ``out``, keyed by the FLOW op or (BLOCK op, sub) it
    carried and sorted by key: the FLOW ops' from their op times, BLOCK ops' flows from the network's."""
    if out.flow_sub is None:
        flow = np.flatnonzero(np.asarray(dag.kind) == DagOpKind.FLOW)
        return flow, out.op_finish_ns[flow] - out.op_start_ns[flow]
    key = flow_keys(out.flow_op, out.flow_sub)
    order = np.argsort(key)
    return key[order], (out.network.finish_ns - out.flow_start_ns)[order]


def time_errors(exact, approx, dag) -> dict:
    """Summary entries comparing ``approx`` (a fast-forwarded engine.DagOutput) with ``exact`` (the same
    ``dag`` simulated exactly): max and p99 relative difference of flow completion times and of collective
    times (each flow and collective against itself), the relative difference of the makespan, and the exact
    run's events."""
    kind = np.asarray(dag.kind)
    key_exact, fct_exact = _flow_fcts(exact, dag)
    key_approx, fct_approx = _flow_fcts(approx, dag)
    if not np.array_equal(key_exact, key_approx):  # a run stopped early: the flows both started
        common = np.intersect1d(key_exact, key_approx)
        fct_exact = fct_exact[np.searchsorted(key_exact, common)]
        fct_approx = fct_approx[np.searchsorted(key_approx, common)]
    out = {"fast_forward_check_exact_events": int(exact.network.events)}
    out |= _max_p99("fast_forward_check_flow_fct", relative_differences(fct_exact, fct_approx))
    start, end = np.asarray(dag.coll_start_op, np.int64), np.asarray(dag.coll_end_op, np.int64)
    if start.size:
        coll_exact = exact.op_finish_ns[end] - exact.op_start_ns[start]
        coll_approx = approx.op_finish_ns[end] - approx.op_start_ns[start]
        out |= _max_p99("fast_forward_check_collective", relative_differences(coll_exact, coll_approx))
    span_exact = np.nanmax(exact.op_finish_ns) - np.nanmin(exact.op_start_ns) if kind.size else np.nan
    span_approx = np.nanmax(approx.op_finish_ns) - np.nanmin(approx.op_start_ns) if kind.size else np.nan
    rel = relative_differences(np.array([span_exact]), np.array([span_approx]))
    if rel.size:
        out["fast_forward_check_makespan_rel"] = float(rel[0])
    return out
