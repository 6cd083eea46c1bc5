"""``link_flap``: a link goes down every period and up again a while later, until the fault's end."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.faults.registry import FaultKind, Param, register

#: most link-state changes the flapping faults of one run may schedule
MAX_TRANSITIONS = 1_000_000


@register
class LinkFlap(FaultKind):
    name = "link_flap"
    code = 2
    elements = ("link",)
    params = {"period_ns": Param(v.Real(positive=True, maximum=9.2e15), 1e6,
                                 "time from one failure of the link to the next, ns"),
              "down_ns": Param(v.Optional(v.Real(positive=True, maximum=9.2e15)), None,
                               "time the link stays down each period, ns [period_ns / 2]")}
    doc = "The link goes down every period_ns from at_ns, up down_ns later, until its end"

    def check(self, fault) -> None:
        down = fault.get("down_ns")
        if down is not None and down >= fault.get("period_ns"):
            raise CosimInputError("faults.down_ns", f"{down:g} ns is not shorter than period_ns", "shorten it")

    def apply(self, resolved: Sequence, ctx) -> None:
        """Down at at + k·period, up down_ns later (default period / 2), while at + k·period is before the end."""
        link, time_ps, up, fault = [], [], [], []
        for r in resolved:
            period_ps = int(round(r.fault.get("period_ns") * 1e3))
            down = r.fault.get("down_ns")
            down_ps = period_ps // 2 if down is None else int(round(down * 1e3))
            n_flaps = max(0, -(-(ctx.end_ps(r) - r.at_ps) // max(period_ps, 1)))  # counted before any array
            if 2 * n_flaps * r.links.size + len(link) > MAX_TRANSITIONS:
                raise CosimInputError(f"faults[{r.index}].period_ns", f"{n_flaps:,} flaps are too many",
                                      f"keep the flapping faults of a run under {MAX_TRANSITIONS // 2:,} periods")
            starts = np.arange(r.at_ps, ctx.end_ps(r), max(period_ps, 1), dtype=np.int64)
            for li in r.links.tolist():
                for t in starts.tolist():
                    link += [li, li]
                    time_ps += [t, t + down_ps]
                    up += [0, 1]
                    fault += [r.index, r.index]
        ctx.set_link_state(link, time_ps, up, fault)
