"""The faults of one run, resolved on its fabric and host map: :class:`FaultPlan` schedules them on the
engine (``setup``, the engine's SetupFn), changes a training DAG's durations where a kind asks to
(``durations_ns``), and turns what happened into the run's record (``results``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cosim.faults.context import ACTION_CODES, ACTIONS, FaultContext, Row
from cosim.faults.elements import ResolvedFault, resolve
from cosim.faults.registry import KINDS, kind_names
from cosim.faults.spec import Fault, check_times, fault_to_table


@dataclass(slots=True, kw_only=True, eq=False)
class FaultPlan:
    """The faults of one run, resolved on its fabric: ``setup`` is the engine's SetupFn, ``results`` what
    the run's record keeps (faults table, config entry, summary keys). ``host_of``: rank -> host node id
    of a run with ranks (empty otherwise)."""

    resolved: list[ResolvedFault]
    fabric: object
    seed: int
    stop_ps: int
    host_of: Sequence[int] = ()
    log: list[Row] = dataclasses.field(default_factory=list)

    def _by_kind(self):
        """(kind, its resolved faults) of every kind with faults in this run, in code order."""
        for name in kind_names():
            mine = [r for r in self.resolved if r.fault.kind == name]
            if mine:
                yield KINDS[name], mine

    def setup(self, engine, dag) -> None:
        """Call every kind's ``apply`` with its faults (kinds in code order)."""
        names = str(engine.FaultActionNames())
        if names != ",".join(ACTIONS[:len(names.split(","))]):
            raise RuntimeError(f"libcosim-ns3 names fault actions {names}, this cosim {ACTIONS}: rebuild it")
        ctx = FaultContext(engine=engine, fabric=self.fabric, seed=self.seed, stop_ps=self.stop_ps, dag=dag)
        for kind, mine in self._by_kind():
            kind.apply(mine, ctx)
        ctx.schedule()
        self.log = ctx.log

    def durations_ns(self, duration_ns: np.ndarray, op_kind: np.ndarray, rank: np.ndarray,
                     iteration: np.ndarray) -> np.ndarray:
        """A training DAG's op durations (ns) as the run's faults leave them, to load instead of
        ``duration_ns`` (``duration_ns`` itself when no fault changes compute)."""
        out = duration_ns
        for kind, mine in self._by_kind():
            out = kind.durations_ns(mine, out, op_kind, rank, iteration, host_of=self.host_of, seed=self.seed)
        return out

    def results(self, out) -> tuple[dict[str, np.ndarray], dict, dict]:
        """(faults table, config["faults"], summary keys) from the engine's SimulationOutput ``out``."""
        table = faults_table(self.resolved, out.fault_actions, self.log)
        action = table["action"]
        summary = {"faults": len(self.resolved)}
        summary |= {f"fault_{name}_actions": int(np.count_nonzero(action == code))
                    for name, code in ACTION_CODES.items() if np.any(action == code)}
        return table, faults_config(self.resolved), summary


def plan(faults: Sequence[Fault], fabric, host_of: Sequence[int] | None = None, *, seed: int,
         max_sim_time_ns: float) -> FaultPlan | None:
    """The FaultPlan of ``faults`` on ``fabric`` for a run seeded by ``seed`` stopping at
    ``max_sim_time_ns`` (explicit or derived from the workload); ``host_of``: rank -> host node id (None:
    ``rankN`` elements are refused). None without faults: the run is untouched."""
    if not faults:
        return None
    check_times(faults, max_sim_time_ns)
    return FaultPlan(resolved=resolve(faults, fabric, max_sim_time_ns=max_sim_time_ns, host_of=host_of),
                     fabric=fabric, seed=seed, stop_ps=int(round(max_sim_time_ns * 1e3)),
                     host_of=() if host_of is None else host_of)


def faults_table(resolved: Sequence[ResolvedFault], engine_log: Mapping[str, np.ndarray],
                 python_log: Sequence[Row]) -> dict[str, np.ndarray]:
    """The run's ``faults`` table (cosim.results.schema): the engine's and the kinds' rows in time order,
    with each row's kind code from its fault."""
    rows = [np.asarray(engine_log.get(c, ()), np.int64) for c in ("time_ps", "fault", "action", "link", "node")]
    if python_log:
        extra = np.asarray(python_log, np.int64).T
        rows = [np.concatenate([r, e]) for r, e in zip(rows, extra)]
    time_ps, fault, action, link, node = rows
    order = np.lexsort((fault, time_ps))
    codes = np.asarray([r.kind.code for r in resolved], np.int64)
    kind = codes[fault[order]] if fault.size else np.zeros(0, np.int64)
    return {"time_ns": time_ps[order] / 1e3, "fault": fault[order].astype(np.int32), "kind": kind.astype(np.int32),
            "action": action[order].astype(np.int8), "link": link[order].astype(np.int32),
            "node": node[order].astype(np.int32)}


def faults_config(resolved: Sequence[ResolvedFault]) -> dict:
    """What a results file keeps of the run's faults: every concrete fault (row ``fault`` of the faults
    table indexes it) and the names of the kind and action codes."""
    return {"faults": [fault_to_table(r.fault) for r in resolved],
            "kind_codes": {n: KINDS[n].code for n in kind_names()}, "actions": list(ACTIONS)}
