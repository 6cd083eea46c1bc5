"""Fabric topologies as arrays: nodes (hosts and switches) and full-duplex links with rate and delay.

Pure functions from a few numbers to a :class:`Fabric`; the C++ FabricBuilder instantiates it and computes
ECMP routes. Node ids are array indices; hosts come first (ids ``0..n_hosts-1``), then switches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError

#: node kind codes shared with the C++ side (ns3::NodeKind)
HOST, SWITCH = 0, 1


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Fabric:
    """A fabric: ``node_kind[i]`` is HOST or SWITCH; link ``j`` joins ``link_a[j]`` and ``link_b[j]``."""

    name: str
    node_kind: np.ndarray  # uint8 [n_nodes]
    link_a: np.ndarray  # int32 [n_links], node id
    link_b: np.ndarray  # int32 [n_links], node id
    link_rate_bps: np.ndarray  # float64 [n_links], bit/s, each direction
    link_delay_ns: np.ndarray  # float64 [n_links], one-way propagation delay, ns

    @property
    def n_nodes(self) -> int:
        """Number of nodes (hosts and switches)."""
        return int(self.node_kind.size)

    @property
    def host_ids(self) -> np.ndarray:
        """Node ids of the hosts, ascending."""
        return np.flatnonzero(self.node_kind == HOST).astype(np.int32)

    @property
    def n_hosts(self) -> int:
        """Number of hosts."""
        return int(np.count_nonzero(self.node_kind == HOST))

    def describe(self) -> dict:
        """A JSON-able description (kept with results)."""
        return {
            "name": self.name,
            "n_nodes": self.n_nodes,
            "n_hosts": self.n_hosts,
            "n_links": int(self.link_a.size),
            "link_rates_gbps": sorted({float(r) / 1e9 for r in self.link_rate_bps}),
            "link_delays_ns": sorted({float(d) for d in self.link_delay_ns}),
        }


def _check_positive(field: str, value: float) -> None:
    if not value > 0:
        raise CosimInputError(field, f"must be positive, got {value}")


def single_switch(*, hosts: int, link_gbps: float, link_delay_ns: float) -> Fabric:
    """``hosts`` hosts on one switch (a star), every link at ``link_gbps`` with ``link_delay_ns``."""
    if hosts < 2:
        raise CosimInputError("hosts", f"a fabric needs at least 2 hosts, got {hosts}")
    _check_positive("link_gbps", link_gbps)
    if link_delay_ns < 0:
        raise CosimInputError("link_delay_ns", f"must be >= 0, got {link_delay_ns}")
    switch = hosts
    return Fabric(
        name="single-switch",
        node_kind=np.array([HOST] * hosts + [SWITCH], dtype=np.uint8),
        link_a=np.arange(hosts, dtype=np.int32),
        link_b=np.full(hosts, switch, dtype=np.int32),
        link_rate_bps=np.full(hosts, link_gbps * 1e9, dtype=np.float64),
        link_delay_ns=np.full(hosts, float(link_delay_ns), dtype=np.float64),
    )


def point_to_point(*, link_gbps: float, link_delay_ns: float) -> Fabric:
    """Two hosts joined by one link (no switch): the simplest fabric, for validation."""
    _check_positive("link_gbps", link_gbps)
    return Fabric(
        name="point-to-point",
        node_kind=np.array([HOST, HOST], dtype=np.uint8),
        link_a=np.array([0], dtype=np.int32),
        link_b=np.array([1], dtype=np.int32),
        link_rate_bps=np.array([link_gbps * 1e9]),
        link_delay_ns=np.array([float(link_delay_ns)]),
    )
