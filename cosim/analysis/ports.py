"""Names of a run's nodes and egress ports ("leaf1 → spine0"), from the fabric rebuilt from its results.

A results file stores the fabric's description (``config["fabric"]``: topology name and the generator
inputs in ``params``), not its arrays. The topology generators are pure and deterministic, so calling the
named one with those inputs gives back the same nodes in the same order; a rebuilt fabric whose node count
differs from the stored one is not trusted. Which peer a port faces comes from the run's ``ports`` table.
Without either, labels fall back to node and port ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cosim.network import fabrics, topology
from cosim.network.names import TIER_NAMES, node_names  # noqa: F401 (named here too: the port labels' source)


def rebuild_fabric(config: Mapping) -> topology.Fabric | None:
    """The fabric of a run from its stored description, or None when it cannot be rebuilt faithfully."""
    desc = config.get("fabric") if isinstance(config, Mapping) else None
    if not isinstance(desc, Mapping) or not isinstance(desc.get("params"), Mapping):
        return None
    return fabrics.rebuild(desc)


@dataclass(frozen=True, slots=True)
class PortNames:
    """Labels of the egress ports of one run: by node name and the peer faced, or by ids as a fallback."""

    names: tuple[str, ...] = ()  # node id -> name (empty: fabric not rebuilt)
    peer: Mapping[tuple[int, int], int] | None = None  # (node, port) -> node id at the other end
    parallel: frozenset = frozenset()  # (node, peer) pairs joined by more than one link

    def node(self, node: int) -> str:
        """A node's name, or ``node <id>``."""
        return self.names[node] if 0 <= node < len(self.names) else f"node {node}"

    def port(self, node: int, port: int) -> str:
        """``leaf1 → spine0`` (with the port id when parallel links join the same two nodes), else
        ``leaf1 port 4``, else ``node 8 port 4``."""
        node, port = int(node), int(port)
        if not self.names or node >= len(self.names):
            return f"node {node} port {port}"
        peer = (self.peer or {}).get((node, port))
        if peer is None or peer >= len(self.names):
            return f"{self.names[node]} port {port}"
        label = f"{self.names[node]} → {self.names[peer]}"
        return f"{label} (port {port})" if (node, peer) in self.parallel else label


def port_names(run) -> PortNames:
    """The port labels of ``run`` (a RunRecord): node names if its fabric can be rebuilt, peers from its
    ports table."""
    fabric = rebuild_fabric(getattr(run, "config", {}) or {})
    if fabric is None:
        return PortNames()
    ports = getattr(run, "ports", None) or {}
    if not all(c in ports for c in ("node", "port", "peer")):
        return PortNames(names=tuple(node_names(fabric)))
    node, port, peer = (np.asarray(ports[c], np.int64) for c in ("node", "port", "peer"))
    pairs, count = np.unique(np.stack([node, peer], axis=1), axis=0, return_counts=True)
    return PortNames(names=tuple(node_names(fabric)),
                     peer={(int(n), int(p)): int(q) for n, p, q in zip(node, port, peer)},
                     parallel=frozenset((int(a), int(b)) for a, b in pairs[count > 1]))
