"""Why a run that reached its time limit (or ran out of events) did not finish, in words for its one-line
error: the injected faults still holding an element out of service when it ended, and a port that stayed
paused or credit-starved through most of the run. Neither is a deadlock (the watchdog ends a cycle of waits
with status ``deadlock``): the traffic waits on a fault or a pause source that does not end, or moves too
slowly for the limit."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: faults-table actions that take an element out of service, and the ones that bring it back
_STARTS, _ENDS = {"down", "storm_start"}, {"up", "storm_end"}
#: a port blocked for at least this share of the simulated time is named
_BLOCKED_SHARE = 0.5


def active_faults(config: Mapping, faults: Mapping[str, np.ndarray]) -> list[str]:
    """``kind:element`` of every injected fault whose element was still down (or storming) at the end of the
    run, in fault order: the last down/up action of each element (the table logs when an element's state
    changes, attributed to the fault that changed it)."""
    if not faults or "fault" not in faults:
        return []
    spec = config.get("faults", {})
    names, resolved = spec.get("actions", []), spec.get("faults", [])
    last: dict[tuple[int, int], tuple[bool, int]] = {}
    order = np.argsort(np.asarray(faults["time_ns"]), kind="stable")
    for i in order.tolist():
        fault, code = int(faults["fault"][i]), int(faults["action"][i])
        action = names[code] if 0 <= code < len(names) else ""
        if fault >= 0 and (action in _STARTS or action in _ENDS):
            last[(int(faults["link"][i]), int(faults["node"][i]))] = (action in _STARTS, fault)
    active = sorted({fault for down, fault in last.values() if down})
    return [f"{resolved[f]['kind']}:{resolved[f]['element']}" if f < len(resolved) else f"fault {f}"
            for f in active]


def why_unfinished(summary: Mapping, config: Mapping, faults: Mapping[str, np.ndarray]) -> str:
    """What kept a time-limit or stalled run from finishing, as a clause for its error line ('' if nothing
    stands out)."""
    parts = []
    active = active_faults(config, faults)
    if active:
        shown = ", ".join(active[:3]) + (f" and {len(active) - 3} more" if len(active) > 3 else "")
        parts.append(f"faults still active at the end: {shown}")
    sim_ns = float(summary.get("sim_time_ns", 0.0))
    blocked = max((float(summary.get(k, 0.0)), what) for k, what in
                  (("pfc_paused_port_max_ns", "paused (PFC)"), ("credit_stall_port_max_ns", "credit-starved")))
    if sim_ns > 0 and blocked[0] >= _BLOCKED_SHARE * sim_ns:
        watched = str(config.get("attributes", {}).get("DeadlockWatchdog::Enabled", "true")).lower() != "false"
        why = ("with no cycle of waits (not a deadlock: the watchdog found none)" if watched
               else "(DeadlockWatchdog::Enabled is false: a deadlock would look like this)")
        parts.append(f"a port was {blocked[1]} for {blocked[0] / 1e6:.3f} of the {sim_ns / 1e6:.3f} ms simulated "
                     + why)
    return "; ".join(parts)
