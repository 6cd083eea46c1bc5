"""Counts of the parts of a cluster that can interrupt a job: GPUs, hosts (servers), NICs, links, switches.

Two sources: the Fabric of an Experiment (exactly what cosim simulates), and a folded-Clos sizing rule for
clusters far larger than one simulates packet by packet (1k to 100k GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cosim.errors import CosimInputError

KINDS = ("gpu", "host", "nic", "link", "switch")


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentCounts:
    """How many of each failing component a job spans (one NIC per GPU, full-duplex links counted once)."""

    gpus: int
    hosts: int
    nics: int
    links: int
    switches: int

    def of(self, kind: str) -> int:
        """Count of component ``kind`` (one of :data:`KINDS`)."""
        return {"gpu": self.gpus, "host": self.hosts, "nic": self.nics, "link": self.links,
                "switch": self.switches}[kind]


def fabric_counts(fabric) -> ComponentCounts:
    """Counts of a :class:`cosim.network.topology.Fabric`: its NICs are the GPUs (one NIC per GPU)."""
    return ComponentCounts(gpus=fabric.n_hosts, hosts=fabric.n_servers, nics=fabric.n_hosts,
                           links=fabric.n_links, switches=fabric.n_switches)


def clos_tiers(n_gpus: int, switch_radix: int) -> int:
    """Switch tiers of the smallest non-blocking folded Clos of ``switch_radix``-port switches for
    ``n_gpus`` NICs: one tier holds ``radix`` NICs, each extra tier multiplies the reach by ``radix / 2``."""
    tiers, reach = 1, switch_radix
    while reach < n_gpus:
        tiers += 1
        reach = switch_radix * (switch_radix // 2) ** (tiers - 1)
    return tiers


def clos_counts(n_gpus: int, *, gpus_per_server: int = 8, switch_radix: int = 64) -> ComponentCounts:
    """Counts of a non-blocking folded Clos (fat tree) for ``n_gpus`` GPUs with one NIC each.

    With t switch tiers, every tier below the top has ``ceil(n / (radix/2))`` switches (half their ports
    down), the top tier ``ceil(n / radix)`` (all ports down); every tier boundary carries ``n`` links, as
    does the host layer: ``t × n`` links. A single tier is one switch per ``radix`` NICs.
    """
    for name, value, low in (("n_gpus", n_gpus, 1), ("gpus_per_server", gpus_per_server, 1),
                             ("switch_radix", switch_radix, 4)):
        if int(value) != value or value < low:
            raise CosimInputError(name, f"must be a whole number >= {low}, got {value!r}")
    if switch_radix % 2:
        raise CosimInputError("switch_radix", f"must be even (half the ports face down), got {switch_radix}")
    tiers = clos_tiers(n_gpus, switch_radix)
    half = switch_radix // 2
    switches = math.ceil(n_gpus / switch_radix) + (tiers - 1) * math.ceil(n_gpus / half)
    return ComponentCounts(gpus=n_gpus, hosts=math.ceil(n_gpus / gpus_per_server), nics=n_gpus,
                           links=tiers * n_gpus, switches=switches)
