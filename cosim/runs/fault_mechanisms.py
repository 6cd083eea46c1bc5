"""Fault mechanisms beyond the network's links: PFC pause storms, the PFC watchdog, stragglers, and the
collective timeout, as the fault framework (cosim.runs.faults) uses them.

- ``pause_storm`` (a fault kind): a NIC keeps sending PAUSE frames for a priority (C++ PauseStormSource);
  RoCE only. :func:`apply_pause_storms` (the kind's apply) hands the storms to the engine and records
  their start and end.
- the PFC watchdog (network setting ``network.pfc_watchdog``, attributes ``PfcWatchdog::*``): its
  actions come back from the engine (``SimulationOutput.logs["pfc_watchdog"]``); :func:`watchdog_rows` turns them
  into rows of the run's ``faults`` table (fault −1: no injected fault did it).
- ``straggler`` (a fault kind): a rank's compute slowed (cosim.runs.stragglers); the training run scales
  the DAG before it is loaded (:func:`stragglers_of`), :func:`record_stragglers` records it.
- the collective timeout (``limits.collective_timeout_ns``, C++ ``DagExecutor::CollectiveTimeout``): a
  collective still running that long after it started fails the job (status ``failed``);
  :func:`timeout_row` records which collective and rank.

Rows are (time_ps, fault, action code, link, node), as :class:`cosim.runs.faults.FaultContext` logs them,
with the codes of ``cosim.runs.faults.ACTION_CODES`` (passed in: the registry imports this module's kinds'
functions, so this module does not import it back). ``Fault``, ``ResolvedFault`` and ``FaultContext`` are
the classes of cosim.runs.faults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cosim.errors import CosimInputError
from cosim.runs.stragglers import Straggler

#: kinds (cosim.runs.faults) that need PFC links
PFC_ONLY_KINDS = ("pause_storm",)

Row = tuple[int, int, int, int, int]


def check_network(faults: Sequence["Fault"], transport: str) -> None:
    """Refuse, when the Experiment is made, a fault its transport cannot have (a pause storm on InfiniBand)."""
    for i, f in enumerate(faults):
        if f.kind in PFC_ONLY_KINDS and transport != "roce":
            raise CosimInputError(f"faults[{i}].kind", f"a {f.kind} needs PFC (transport roce); {transport} "
                                  "links have no PAUSE frames", "run it with --transport roce")


def pause_storms_of(resolved: Sequence["ResolvedFault"], stop_ps: int):
    """engine.PauseStorms of the ``pause_storm`` faults (a storm without an end lasts to the time limit)."""
    from cosim import engine  # noqa: PLC0415 (the engine loads cppyy only when it simulates)

    start_ps = np.array([r.at_ps for r in resolved], np.int64)
    end_ps = np.array([r.until_ps if r.until_ps >= 0 else stop_ps for r in resolved], np.int64)
    return engine.PauseStorms(host=np.array([int(r.nodes[0]) for r in resolved], np.int32),
                              priority=np.array([int(r.fault.get("priority")) for r in resolved], np.uint8),
                              start_ns=start_ps / 1e3, duration_ns=np.maximum(end_ps - start_ps, 1) / 1e3)


def apply_pause_storms(resolved: Sequence["ResolvedFault"], ctx: "FaultContext") -> None:
    """FaultKind.apply of ``pause_storm``: schedule the storms in the engine; log storm_start and storm_end."""
    from cosim import engine  # noqa: PLC0415

    engine.add_pause_storms(ctx.engine, pause_storms_of(resolved, ctx.stop_ps))
    for r in resolved:
        ctx.record(r.at_ps, r, "storm_start", node=int(r.nodes[0]))
        if r.until_ps >= 0:
            ctx.record(r.until_ps, r, "storm_end", node=int(r.nodes[0]))


def record_stragglers(resolved: Sequence["ResolvedFault"], ctx: "FaultContext") -> None:
    """FaultKind.apply of ``straggler``: log ``slowed`` at time 0 on the rank's NIC (the run scaled the DAG's
    compute before, with :func:`stragglers_of` and cosim.runs.stragglers)."""
    for r in resolved:
        ctx.record(0, r, "slowed", node=int(r.nodes[0]))


def of_kind(resolved: Sequence["ResolvedFault"], kind: str) -> list["ResolvedFault"]:
    """The faults of ``kind`` among ``resolved``."""
    return [r for r in resolved if r.fault.kind == kind]


def fault_tables(fabric, net, resolved: Sequence["ResolvedFault"], action_codes: Mapping[str, int],
                 rows: Sequence[Row] = (), faults: Mapping[str, np.ndarray] | None = None
                 ) -> dict[str, dict[str, np.ndarray]]:
    """``{"faults": table}`` of a finished run (``net``: its engine.SimulationOutput), {} without a row: the
    fault plan's table ``faults``, if any, plus the PFC watchdog's actions and ``rows``. What the plan
    scheduled after the run stopped (a storm's end) never happened and is left out. (The watchdog's actions
    with their priority are the ``pfc_watchdog`` table, cosim.network.telemetry.)"""
    out = {}
    table = with_mechanism_rows(faults or {}, [*watchdog_rows(fabric, net.logs["pfc_watchdog"], action_codes), *rows],
                                resolved)
    if table and np.asarray(table["time_ns"]).size:
        happened = np.asarray(table["time_ns"]) <= net.sim_time_ns
        if happened.any():
            out["faults"] = {c: np.asarray(x)[happened] for c, x in table.items()}
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


def watchdog_rows(fabric, actions: Mapping[str, np.ndarray], action_codes: Mapping[str, int]) -> list[Row]:
    """faults-table rows of the PFC watchdog's actions (engine.SimulationOutput.logs["pfc_watchdog"]): action
    queue_disabled / queue_restored, the switch as node and the link of its port."""
    links = port_links(fabric)
    codes = action_codes
    return [(int(round(t * 1e3)), -1, codes["queue_disabled" if d else "queue_restored"], links.get((n, p), -1), n)
            for t, n, p, d in zip(np.asarray(actions.get("time_ns", ())).tolist(),
                                  np.asarray(actions.get("node", ())).tolist(),
                                  np.asarray(actions.get("port", ())).tolist(),
                                  np.asarray(actions.get("disabled", ())).tolist())]


def stragglers_of(resolved: Sequence["ResolvedFault"], rank_hosts: np.ndarray) -> list[Straggler]:
    """The Straggler of every resolved ``straggler`` fault (its rank from its NIC)."""
    rank_of = {int(h): r for r, h in enumerate(np.asarray(rank_hosts).tolist())}
    return [Straggler(rank=rank_of[int(r.nodes[0])], factor=r.fault.get("factor"),
                      distribution=r.fault.get("distribution"), sigma=r.fault.get("sigma"), per=r.fault.get("per"),
                      index=r.index) for r in resolved]



def failed_rank(dag, collective: int, op_finish_ns: np.ndarray) -> int:
    """The lowest member rank of collective row ``collective`` with an op of it unfinished (what NCCL's
    watchdog on that rank reports), or its first member."""
    ops = np.flatnonzero((np.asarray(dag.coll) == collective) & ~np.isfinite(op_finish_ns))
    ranks = np.asarray(dag.rank)[ops]
    ranks = ranks[ranks >= 0]
    return int(ranks.min()) if ranks.size else int(dag.coll_members(collective)[0])


def timeout_row(time_ns: float, rank_host: int, action_codes: Mapping[str, int]) -> Row:
    """faults-table row of a collective timeout: action ``collective_timeout`` on the failed rank's NIC."""
    return (int(round(time_ns * 1e3)), -1, action_codes["collective_timeout"], -1, int(rank_host))


def with_mechanism_rows(table: Mapping[str, np.ndarray], rows: Sequence[Row],
                        resolved: Sequence["ResolvedFault"] = ()) -> dict[str, np.ndarray]:
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
