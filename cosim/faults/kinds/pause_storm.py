"""``pause_storm``: a NIC keeps sending PFC PAUSE frames for a priority (C++ PauseStormSource), RoCE only;
the PFC watchdog (cosim.faults.mechanisms, docs/models/pfc-watchdog.md) bounds the harm."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim import engine
from cosim import values as v
from cosim.errors import CosimInputError
from cosim.faults.registry import FaultKind, Param, register


@register
class PauseStorm(FaultKind):
    name = "pause_storm"
    code = 6
    elements = ("host", "rank")
    params = {"priority": Param(v.Int(minimum=0, maximum=7), 0, "priority class the NIC keeps pausing, 0..7")}
    doc = ("The NIC keeps sending PFC PAUSE frames for priority from at_ns until its end (RoCE "
           "only); network.pfc_watchdog bounds the harm")

    def check_transport(self, transport: str, where: str) -> None:
        if transport != "roce":
            raise CosimInputError(where, f"a {self.name} needs PFC (transport roce); {transport} "
                                  "links have no PAUSE frames", "run it with --transport roce")

    def apply(self, resolved: Sequence, ctx) -> None:
        """Schedule the storms in the engine; log storm_start and storm_end."""
        engine.add_pause_storms(ctx.engine, pause_storms_of(resolved, ctx.stop_ps))
        for r in resolved:
            ctx.record(r.at_ps, r, "storm_start", node=int(r.nodes[0]))
            if r.until_ps >= 0:
                ctx.record(r.until_ps, r, "storm_end", node=int(r.nodes[0]))


def pause_storms_of(resolved: Sequence, stop_ps: int) -> engine.PauseStorms:
    """engine.PauseStorms of the ``pause_storm`` faults (a storm without an end lasts to the time limit)."""
    start_ps = np.array([r.at_ps for r in resolved], np.int64)
    end_ps = np.array([r.until_ps if r.until_ps >= 0 else stop_ps for r in resolved], np.int64)
    return engine.PauseStorms(host=np.array([int(r.nodes[0]) for r in resolved], np.int32),
                              priority=np.array([int(r.fault.get("priority")) for r in resolved], np.uint8),
                              start_ns=start_ps / 1e3, duration_ns=np.maximum(end_ps - start_ps, 1) / 1e3)
