"""What a fault kind schedules through: the faults table's action codes and :class:`FaultContext`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

#: what a row of the faults table records; the index is the code (engine: shared-codes.h FaultAction)
ACTIONS = ("down", "up", "reroute", "degrade", "restore",
           # fault mechanisms (cosim.faults.mechanisms and the pause_storm and straggler kinds)
           "storm_start", "storm_end", "queue_disabled", "queue_restored", "slowed", "collective_timeout")
ACTION_CODES = {name: i for i, name in enumerate(ACTIONS)}

#: a faults-table row before it becomes columns: (time_ps, fault, action code, link, node)
Row = tuple[int, int, int, int, int]


@dataclass(slots=True, kw_only=True, eq=False)
class FaultContext:
    """What a kind's ``apply`` works with: the C++ engine (fabric built, nothing loaded yet), the fabric,
    the seed, and the DAG arrays of a training run (``dag``: name -> array as Engine::LoadDag takes them,
    e.g. ``duration_ps``; may be changed in place; None for flow runs). ``log`` collects rows a kind
    records itself (Python side) for the faults table."""

    engine: object
    fabric: object
    seed: int
    stop_ps: int  # the run's time limit, in ps
    dag: dict[str, np.ndarray] | None = None
    log: list[Row] = dataclasses.field(default_factory=list)

    def record(self, time_ps: int, fault, action: str, *, link: int = -1, node: int = -1) -> None:
        """Add a row (time, ResolvedFault ``fault``, action, link, node) to the faults table."""
        self.log.append((int(time_ps), fault.index, ACTION_CODES[action], int(link), int(node)))

    def end_ps(self, fault) -> int:
        """When ResolvedFault ``fault`` ends: its own end, else the run's stop time."""
        return fault.until_ps if fault.until_ps >= 0 else self.stop_ps

    def set_link_state(self, link: list[int], time_ps: list[int], up: list[int], fault: list[int]) -> None:
        """Schedule link ``link[i]`` down (``up[i]`` 0) or up (1) at ``time_ps[i]`` for fault ``fault[i]``
        (Engine::ScheduleLinkState; ns3_scenarios/model/link-fault-model.h does the rest)."""
        if link:
            self.engine.ScheduleLinkState(np.asarray(link, np.int64), np.asarray(time_ps, np.int64),
                                          np.asarray(up, np.uint8), np.asarray(fault, np.int32), len(link))
