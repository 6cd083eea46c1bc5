"""Packets lost, trimmed or sent again, by faults or by congestion: the ``losses`` table (one row per
packet, at the egress port that sent it; cosim::LossCause in ns3_scenarios/engine/shared-codes.h) and its
counts over time.

Lossless runs record no row, so their results hold no ``losses`` table. A NIC's rows (retransmissions,
timeouts) are at its port 0, at the time it sent the packet again or its timer expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

import numpy as np


class LossCause(IntEnum):
    """Why a port lost a packet or sent one again (the ``losses/cause`` codes)."""
    TAIL_DROP = 0  #: an egress queue past EgressPort::MaxQueueBytes dropped it at enqueue
    BUFFER_DROP = 1  #: a switch's shared buffer had no room for it
    WATCHDOG_DROP = 2  #: a queue the PFC watchdog disabled dropped it
    LINK_DOWN = 3  #: lost on a link that was, or went, down
    BIT_ERROR = 4  #: corrupted by bit errors on a lossy link and lost
    TRIMMED = 5  #: cut to its header by a switch (UEC packet trimming)
    LINK_RETRANSMITTED = 6  #: corrupted on a credit link or an LLR link, which sent it again
    RETRANSMITTED = 7  #: sent again by its NIC's transport
    TIMEOUT = 8  #: a QP's retransmission timer expired (an event, not a packet)


def counts_over_time(losses: Mapping[str, np.ndarray], edges_ns: np.ndarray) -> dict[LossCause, np.ndarray]:
    """{cause: int64 [bins]} rows per time bin [edges[j], edges[j+1]) for every cause with a row in the
    bins, in code order."""
    edges = np.asarray(edges_ns, np.float64)
    if not losses or not np.asarray(losses.get("time_ns", [])).size or edges.size < 2:
        return {}
    t = np.asarray(losses["time_ns"], np.float64)
    keep = (t >= edges[0]) & (t < edges[-1])
    bins = np.searchsorted(edges, t[keep], side="right") - 1
    counts = np.zeros((len(LossCause), edges.size - 1), np.int64)
    np.add.at(counts, (np.asarray(losses["cause"], np.int64)[keep], bins), 1)
    return {LossCause(c): counts[c] for c in range(len(LossCause)) if counts[c].any()}


#: the ``losses/cause`` codes as the results schema describes them ("0 tail_drop, 1 buffer_drop, ...")
CAUSE_TEXT = ", ".join(f"{c.value} {c.name.lower()}" for c in LossCause)
