"""Fault mechanisms beyond the network's links: PFC pause storms, the PFC watchdog, stragglers, and the
collective timeout, as the fault framework (cosim.runs.faults) uses them.

- ``pause_storm`` (a fault kind): a NIC keeps sending PAUSE frames for a priority (C++ PauseStormSource);
  RoCE only. The run hands :func:`engine_pause_storms` to the engine; :func:`storm_rows` records their
  start and end.
- the PFC watchdog (network setting ``network.pfc_watchdog``, attributes ``PfcWatchdog::*``): its
  actions come back from the engine (``SimulationOutput.pfc_watchdog``); :func:`watchdog_rows` turns them
  into rows of the run's ``faults`` table (fault −1: no injected fault did it).
- ``straggler`` (a fault kind): a rank's compute slowed (cosim.runs.stragglers); applied to the DAG before
  it is loaded, recorded by :func:`straggler_rows`.
- the collective timeout (``limits.collective_timeout_ns``, C++ ``DagExecutor::CollectiveTimeout``): a
  collective still running that long after it started fails the job (status ``failed``);
  :func:`timeout_row` records which collective and rank.

Rows are (time_ps, fault, action code, link, node), as :class:`cosim.runs.faults.FaultContext` logs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cosim.errors import CosimInputError
from cosim.runs import faults as fault_specs
from cosim.runs.stragglers import Straggler

#: kinds (cosim.runs.faults) that need PFC links
PFC_ONLY_KINDS = ("pause_storm",)

Row = tuple[int, int, int, int, int]


def check_network(faults: Sequence[fault_specs.Fault], transport: str) -> None:
    """Refuse, when the Experiment is made, a fault its transport cannot have (a pause storm on InfiniBand)."""
    for i, f in enumerate(faults):
        if f.kind in PFC_ONLY_KINDS and transport != "roce":
            raise CosimInputError(f"faults[{i}].kind", f"a {f.kind} needs PFC (transport roce); {transport} "
                                  "links have no PAUSE frames", "run it with --transport roce")


def pause_storms_of(resolved: Sequence[fault_specs.ResolvedFault], max_sim_time_ns: float):
    """engine.PauseStorms of the ``pause_storm`` faults (a storm without an end lasts to the time limit)."""
    from cosim import engine  # noqa: PLC0415 (the engine loads cppyy only when it simulates)

    start_ps = np.array([r.at_ps for r in resolved], np.int64)
    end_ps = np.array([r.until_ps if r.until_ps >= 0 else int(max_sim_time_ns * 1e3) for r in resolved], np.int64)
    return engine.PauseStorms(host=np.array([int(r.nodes[0]) for r in resolved], np.int32),
                              priority=np.array([int(r.fault.get("priority")) for r in resolved], np.uint8),
                              start_ns=start_ps / 1e3, duration_ns=np.maximum(end_ps - start_ps, 1) / 1e3)


def storm_rows(resolved: Sequence[fault_specs.ResolvedFault]) -> list[Row]:
    """faults-table rows of the pause storms: storm_start, and storm_end if the storm ends within the run."""
    rows = []
    for r in resolved:
        rows.append((r.at_ps, r.index, fault_specs.ACTION_CODES["storm_start"], -1, int(r.nodes[0])))
        if r.until_ps >= 0:
            rows.append((r.until_ps, r.index, fault_specs.ACTION_CODES["storm_end"], -1, int(r.nodes[0])))
    return rows


def of_kind(resolved: Sequence[fault_specs.ResolvedFault], kind: str) -> list[fault_specs.ResolvedFault]:
    """The faults of ``kind`` among ``resolved``."""
    return [r for r in resolved if r.fault.kind == kind]


def engine_pause_storms(resolved: Sequence[fault_specs.ResolvedFault], max_sim_time_ns: float):
    """The engine.PauseStorms of the run's ``pause_storm`` faults, None without any."""
    storms = of_kind(resolved, "pause_storm")
    return pause_storms_of(storms, max_sim_time_ns) if storms else None


def fault_tables(fabric, net, resolved: Sequence[fault_specs.ResolvedFault], rows: Sequence[Row] = (),
                 faults: Mapping[str, np.ndarray] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The ``faults`` table (``faults``, the framework's rows, if given, plus the rows of this module's
    mechanisms: storms, stragglers, the PFC watchdog, and ``rows``) and the ``pfc_watchdog`` table of a
    finished run (``net``: its engine.SimulationOutput); tables without rows are left out."""
    end_ps = int(round(net.sim_time_ns * 1e3))  # a storm's end after the run stopped never happened
    storms = [r for r in storm_rows(of_kind(resolved, "pause_storm")) if r[0] <= end_ps]
    mine = [*storms, *straggler_rows(of_kind(resolved, "straggler")), *watchdog_rows(fabric, net.pfc_watchdog),
            *rows]
    out = {}
    table = with_mechanism_rows(faults or {}, mine, resolved)
    if table and np.asarray(table["time_ns"]).size:
        out["faults"] = table
    if np.asarray(net.pfc_watchdog.get("time_ns", ())).size:
        out["pfc_watchdog"] = dict(net.pfc_watchdog)
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
    """faults-table rows of the PFC watchdog's actions (engine.SimulationOutput.pfc_watchdog): action
    queue_disabled / queue_restored, the switch as node and the link of its port."""
    links = port_links(fabric)
    codes = fault_specs.ACTION_CODES
    return [(int(round(t * 1e3)), -1, codes["queue_disabled" if d else "queue_restored"], links.get((n, p), -1), n)
            for t, n, p, d in zip(np.asarray(actions.get("time_ns", ())).tolist(),
                                  np.asarray(actions.get("node", ())).tolist(),
                                  np.asarray(actions.get("port", ())).tolist(),
                                  np.asarray(actions.get("disabled", ())).tolist())]


def stragglers_of(resolved: Sequence[fault_specs.ResolvedFault], rank_hosts: np.ndarray) -> list[Straggler]:
    """The Straggler of every resolved ``straggler`` fault (its rank from its NIC)."""
    rank_of = {int(h): r for r, h in enumerate(np.asarray(rank_hosts).tolist())}
    return [Straggler(rank=rank_of[int(r.nodes[0])], factor=r.fault.get("factor"),
                      distribution=r.fault.get("distribution"), sigma=r.fault.get("sigma"), per=r.fault.get("per"),
                      index=r.index) for r in resolved]


def straggler_rows(resolved: Sequence[fault_specs.ResolvedFault]) -> list[Row]:
    """faults-table rows of the stragglers: action ``slowed`` at time 0 on the rank's NIC."""
    return [(0, r.index, fault_specs.ACTION_CODES["slowed"], -1, int(r.nodes[0])) for r in resolved]


def failed_rank(dag, collective: int, op_finish_ns: np.ndarray) -> int:
    """The lowest member rank of collective row ``collective`` with an op of it unfinished (what NCCL's
    watchdog on that rank reports), or its first member."""
    ops = np.flatnonzero((np.asarray(dag.coll) == collective) & ~np.isfinite(op_finish_ns))
    ranks = np.asarray(dag.rank)[ops]
    ranks = ranks[ranks >= 0]
    return int(ranks.min()) if ranks.size else int(dag.coll_members(collective)[0])


def timeout_row(time_ns: float, rank_host: int) -> Row:
    """faults-table row of a collective timeout: action ``collective_timeout`` on the failed rank's NIC."""
    return (int(round(time_ns * 1e3)), -1, fault_specs.ACTION_CODES["collective_timeout"], -1, int(rank_host))


def with_mechanism_rows(table: Mapping[str, np.ndarray], rows: Sequence[Row],
                        resolved: Sequence[fault_specs.ResolvedFault] = ()) -> dict[str, np.ndarray]:
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
