"""What a fault kind schedules through: the faults table's action codes and :class:`FaultContext`.

Faults compose per link: a link is down while ANY of its faults (link_down, link_flap, switch_down,
nic_down) holds it down, runs at the LOWEST rate of its active link_degrade faults and at the HIGHEST bit
error rate among them. Kinds hand their changes to the context; :meth:`FaultContext.schedule` turns them
into the transitions of each link's composed state (:func:`composed`) and only those reach the engine, so
the first fault to end never brings back a link another fault still holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: what a row of the faults table records; the index is the code (engine: shared-codes.h FaultAction)
ACTIONS = ("down", "up", "reroute", "degrade", "restore",
           # fault mechanisms (cosim.faults.mechanisms and the pause_storm and straggler kinds)
           "storm_start", "storm_end", "queue_disabled", "queue_restored", "slowed", "collective_timeout")
ACTION_CODES = {name: i for i, name in enumerate(ACTIONS)}

#: a faults-table row before it becomes columns: (time_ps, fault, action code, link, node)
Row = tuple[int, int, int, int, int]

#: one fault's change of one link: (link, time_ps, value while the fault holds, or None at its end, fault)
Change = tuple[int, int, object, int]


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
    states: list[Change] = dataclasses.field(default_factory=list)  # value True: held down
    rates: list[Change] = dataclasses.field(default_factory=list)  # value: line rate, bit/s
    bers: list[Change] = dataclasses.field(default_factory=list)  # value: (bit error rate, loss-stream seed)

    def record(self, time_ps: int, fault, action: str, *, link: int = -1, node: int = -1) -> None:
        """Add a row (time, ResolvedFault ``fault``, action, link, node) to the faults table."""
        self.log.append((int(time_ps), fault.index, ACTION_CODES[action], int(link), int(node)))

    def end_ps(self, fault) -> int:
        """When ResolvedFault ``fault`` ends: its own end, else the run's stop time."""
        return fault.until_ps if fault.until_ps >= 0 else self.stop_ps

    def set_link_state(self, link: Sequence[int], time_ps: Sequence[int], up: Sequence[int],
                       fault: Sequence[int]) -> None:
        """Fault ``fault[i]`` takes link ``link[i]`` down (``up[i]`` 0) or lets it up again (1) at
        ``time_ps[i]``; scheduled by :meth:`schedule`, composed with the link's other faults."""
        self.states += [(int(li), int(t), None if u else True, int(f)) for li, t, u, f in zip(link, time_ps, up, fault)]

    def set_link_rate(self, link: int, time_ps: int, rate_bps: float | None, fault: int) -> None:
        """Fault ``fault`` runs ``link`` at ``rate_bps`` from ``time_ps`` (None: the fault ends there)."""
        self.rates.append((int(link), int(time_ps), rate_bps, int(fault)))

    def set_link_ber(self, link: int, time_ps: int, ber: tuple[float, int] | None, fault: int) -> None:
        """Fault ``fault`` gives ``link`` the bit error rate ``ber`` = (errors per bit, loss-stream seed) from
        ``time_ps`` (None: the fault ends there)."""
        self.bers.append((int(link), int(time_ps), ber, int(fault)))

    def schedule(self) -> None:
        """Hand the engine the transitions of every link's composed state, rate and bit error rate
        (Engine::ScheduleLinkState, ScheduleLinkRate, ScheduleLinkBitErrorRate)."""
        e = self.engine
        rows = composed(self.states, lambda held: True)
        if rows:
            li, t, down, f = zip(*rows)
            e.ScheduleLinkState(_i64(li), _i64(t), np.asarray([0 if x else 1 for x in down], np.uint8),
                                np.asarray(f, np.int32), len(li))
        rows = composed(self.rates, min)
        if rows:
            li, t, rate, f = zip(*rows)
            e.ScheduleLinkRate(_i64(li), _i64(t), np.asarray([0.0 if x is None else x for x in rate], np.float64),
                               np.asarray(f, np.int32), len(li))
        rows = composed(self.bers, max)
        if rows:
            li, t, ber, f = zip(*rows)
            e.ScheduleLinkBitErrorRate(_i64(li), _i64(t), np.asarray([0.0 if x is None else x[0] for x in ber]),
                                       np.asarray([0 if x is None else x[1] for x in ber], np.uint64),
                                       np.asarray(f, np.int32), len(li))


def composed(changes: Sequence[Change], combine: Callable) -> list[tuple[int, int, object, int]]:
    """The transitions of each link's composed value: (link, time_ps, value or None when no fault holds
    it, fault that made the change), in (link, time) order. ``combine`` gives the value of several faults
    held at once from their values. Changes at one instant apply together (a fault that ends where another
    starts leaves no gap); an instant that leaves the composed value as it was makes no transition."""
    out = []
    ordered = sorted(range(len(changes)), key=lambda i: (changes[i][0], changes[i][1], i))
    held: dict[int, object] = {}
    link = current = None
    k = 0
    while k < len(ordered):
        li, t = changes[ordered[k]][0], changes[ordered[k]][1]
        if li != link:
            link, held, current = li, {}, None
        cause = -1
        while k < len(ordered) and changes[ordered[k]][:2] == (li, t):
            _, _, value, fault = changes[ordered[k]]
            if value is None:
                held.pop(fault, None)
            else:
                held[fault] = value
            cause = fault
            k += 1
        value = combine(held.values()) if held else None
        if value != current:
            out.append((li, t, value, cause))
            current = value
    return out


def _i64(x) -> np.ndarray:
    return np.asarray(x, np.int64)
