"""Progress of a running simulation measured in the work that costs wall time: data packet-hops.

The share of flows or ops done says little about the time left: a training iteration's last ops may be
its largest collectives, and thousands of compute ops finish in an instant of wall time. Data packets
serialized on links are what the event loop spends its time on, and a run's total is known beforehand
(:func:`cosim.plan.describe.work_estimate`), so the fraction done is hops / estimate and the time left is the
hops left at the rate of the last :data:`WINDOW_S` seconds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

#: seconds of wall time over which the packet-hop rate is measured
WINDOW_S = 10.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """Fraction of the work done (0..1) and the seconds left (None while unknown)."""

    fraction: float
    eta_s: float | None


class WorkProgress:
    """Feed it (wall_s, data_packet_hops) between slices; it says how far the run is and how long is left."""

    def __init__(self, total_hops: int):
        self.total_hops = max(int(total_hops), 0)
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, wall_s: float, hops: int, *, finished: bool = False) -> Estimate:
        """The estimate after ``hops`` data packet-hops at ``wall_s`` (``finished``: every item is done)."""
        if finished:
            return Estimate(1.0, 0.0)
        self._samples.append((wall_s, hops))
        while len(self._samples) > 2 and wall_s - self._samples[1][0] >= WINDOW_S:
            self._samples.popleft()
        if self.total_hops == 0:
            return Estimate(0.0, None)
        left = self.total_hops - hops
        fraction = min(hops / self.total_hops, 0.999)
        t0, h0 = self._samples[0]
        if left <= 0 or wall_s <= t0 or hops <= h0:
            return Estimate(fraction, None)  # more work than estimated, or no packets moved lately
        return Estimate(fraction, left * (wall_s - t0) / (hops - h0))


class PartsProgress:
    """Runs made one after another (the parts of a decomposed run) reported as one run: the items done and
    the data packet-hops of the runs already finished are added to the current run's, so the share of work
    done grows across the parts instead of restarting with each, and is measured against the parts' work
    (:func:`cosim.plan.describe.work_estimate`), not the whole run's."""

    def __init__(self, progress, total_items: int):
        self.progress = progress
        self.total_items = int(total_items)
        self.items_done = 0
        self.hops_done = 0

    def part(self):
        """The progress callback (cosim.engine.ProgressFn) of the next run."""
        items, hops = self.items_done, self.hops_done

        def report(sim_ns: float, done: int, total: int, part_hops: int) -> None:
            self.progress(sim_ns, items + done, max(self.total_items, items + total), hops + part_hops)

        return report

    def finished(self, n_items: int, hops: int) -> None:
        """Count a run of ``n_items`` items that made ``hops`` data packet-hops as done."""
        self.items_done += int(n_items)
        self.hops_done += int(hops)
