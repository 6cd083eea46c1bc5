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
