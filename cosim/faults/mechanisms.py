"""Rows of the ``faults`` table that no injected fault caused (fault and kind −1), for every run kind:

- the PFC watchdog (network setting ``network.pfc_watchdog``, attributes ``PfcWatchdog::*``): its
  actions come back from the engine (``SimulationOutput.logs["pfc_watchdog"]``); :func:`watchdog_rows` turns them
  into rows ``queue_disabled`` / ``queue_restored``;
- the collective timeout (``limits.collective_timeout_ns``, C++ ``DagExecutor::CollectiveTimeout``): a
  collective still running that long after it started fails the job (status ``failed``);
  :func:`timeout_row` records which collective and rank (:func:`failed_rank`).

:func:`mechanism_tables` merges them with a FaultPlan's table. Model page: docs/models/pfc-watchdog.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cosim.faults.context import ACTION_CODES, Row
from cosim.faults.fault_plan import FaultPlan


def mechanism_tables(fabric, net, fault_plan: FaultPlan | None = None, rows: Sequence[Row] = (),
                     table: Mapping[str, np.ndarray] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """``{"faults": table}`` of a finished run (``net``: its engine.SimulationOutput), {} without a row:
    ``fault_plan``'s faults table ``table`` (``FaultPlan.results``), if any, plus the PFC watchdog's actions and
    ``rows`` (:func:`timeout_row`). What the plan scheduled after the run stopped (a storm's end) never
    happened and is left out. (The watchdog's actions with their priority are the ``pfc_watchdog`` table,
    cosim.telemetry.)"""
    out = {}
    resolved = [] if fault_plan is None else fault_plan.resolved
    merged = with_mechanism_rows(table or {}, [*watchdog_rows(fabric, net.logs["pfc_watchdog"]), *rows], resolved)
    if merged and np.asarray(merged["time_ns"]).size:
        happened = np.asarray(merged["time_ns"]) <= net.sim_time_ns
        if happened.any():
            out["faults"] = {c: np.asarray(x)[happened] for c, x in merged.items()}
    return out


def port_links(fabric) -> dict[tuple[int, int], int]:
    """(node, port) → link id: a node's ports are numbered in the order of the links it is an end of."""
    out: dict[tuple[int, int], int] = {}
    count: dict[int, int] = {}
    for link, (a, b) in enumerate(zip(np.asarray(fabric.link_a).tolist(), np.asarray(fabric.link_b).tolist())):
        for n in (a, b):
            out[(n, count.get(n, 0))] = link
            count[n] = count.get(n, 0) + 1
    return out


def watchdog_rows(fabric, actions: Mapping[str, np.ndarray]) -> list[Row]:
    """faults-table rows of the PFC watchdog's actions (engine.SimulationOutput.logs["pfc_watchdog"]): action
    queue_disabled / queue_restored, the switch as node and the link of its port."""
    links = port_links(fabric)
    codes = ACTION_CODES
    return [(int(round(t * 1e3)), -1, codes["queue_disabled" if d else "queue_restored"], links.get((n, p), -1), n)
            for t, n, p, d in zip(np.asarray(actions.get("time_ns", ())).tolist(),
                                  np.asarray(actions.get("node", ())).tolist(),
                                  np.asarray(actions.get("port", ())).tolist(),
                                  np.asarray(actions.get("disabled", ())).tolist())]


def failed_rank(dag, collective: int, op_finish_ns: np.ndarray) -> int:
    """The lowest member rank of collective row ``collective`` with an op of it unfinished (what NCCL's
    watchdog on that rank reports), or its first member."""
    ops = np.flatnonzero((np.asarray(dag.coll) == collective) & ~np.isfinite(op_finish_ns))
    ranks = np.asarray(dag.rank)[ops]
    ranks = ranks[ranks >= 0]
    return int(ranks.min()) if ranks.size else int(dag.coll_members(collective)[0])


def timeout_row(time_ns: float, rank_host: int) -> Row:
    """faults-table row of a collective timeout: action ``collective_timeout`` on the failed rank's NIC."""
    return (int(round(time_ns * 1e3)), -1, ACTION_CODES["collective_timeout"], -1, int(rank_host))


def with_mechanism_rows(table: Mapping[str, np.ndarray], rows: Sequence[Row],
                        resolved: Sequence = ()) -> dict[str, np.ndarray]:
    """``table`` (a faults table, possibly empty) with ``rows`` added, all in time order: a row's kind is
    its fault's (``resolved[fault]``), −1 for the rows of mechanisms no injected fault caused (fault −1)."""
    rows = list(rows)
    if not rows:
        return dict(table)
    extra = np.asarray(rows, np.int64).T
    codes = np.asarray([r.kind.code for r in resolved] + [-1], np.int64)  # index -1: no fault
    cols = {"time_ns": np.float64, "fault": np.int32, "kind": np.int32, "action": np.int8, "link": np.int32,
            "node": np.int32}
    added = {"time_ns": extra[0] / 1e3, "fault": extra[1], "kind": codes[extra[1]], "action": extra[2],
             "link": extra[3], "node": extra[4]}
    merged = {c: np.concatenate([np.asarray(table.get(c, ()), np.float64 if c == "time_ns" else np.int64), added[c]])
              for c in cols}
    order = np.lexsort((merged["fault"], merged["time_ns"]))
    return {c: merged[c][order].astype(dt) for c, dt in cols.items()}
