"""``link_down``: a link fails in both directions and comes back at the fault's end."""

from __future__ import annotations

from collections.abc import Sequence

from cosim.faults.registry import FaultKind, register


@register
class LinkDown(FaultKind):
    name = "link_down"
    code = 1
    elements = ("link",)
    doc = ("The link fails in both directions (RoCE: what it carries is lost; IB: held), routes converge "
           "around it after LinkFaultModel::RouteConvergenceDelay; up again at its end")

    def apply(self, resolved: Sequence, ctx) -> None:
        """Every link of every fault (a switch: all its links; a NIC: its host link) down at its start, up
        at its end (if it ends before the run does)."""
        link, time_ps, up, fault = [], [], [], []
        for r in resolved:
            for li in r.links.tolist():
                link.append(li), time_ps.append(r.at_ps), up.append(0), fault.append(r.index)
                if r.until_ps >= 0:
                    link.append(li), time_ps.append(r.until_ps), up.append(1), fault.append(r.index)
        ctx.set_link_state(link, time_ps, up, fault)
