"""Names of a fabric's nodes (``host3``, ``leaf1``, ``spine0``): what port labels (cosim.analysis.ports) and
fault elements (cosim.faults) call them."""

from __future__ import annotations

import numpy as np

from cosim.network import topology

#: topology -> name of the switches of each tier (1, 2, 3); hosts are always "host"
TIER_NAMES: dict[str, dict[int, str]] = {
    "single-switch": {1: "switch"},
    "leaf-spine": {1: "leaf", 2: "spine"},
    "rail-optimized": {1: "rail", 2: "spine"},
    "fat-tree": {1: "edge", 2: "agg", 3: "core"},
    "three-tier": {1: "leaf", 2: "agg", 3: "core"},
    "rail-optimized-three-tier": {1: "rail", 2: "agg", 3: "core"},
}
DEFAULT_TIER_NAMES = {1: "leaf", 2: "spine", 3: "core"}


def node_names(fabric: topology.Fabric) -> list[str]:
    """Name of every node id: the fabric's own (built from switches of a radix, or read from a file), else
    ``host<i>`` for NICs and ``<tier name><index within tier>`` for switches."""
    if fabric.node_names is not None:
        return list(fabric.node_names)
    tiers = TIER_NAMES.get(fabric.name, DEFAULT_TIER_NAMES)
    kind = np.where(fabric.node_kind == topology.HOST, 0, fabric.node_tier.astype(np.int64))
    # index of each node among the nodes of its own tier (node ids are tier-major within switches)
    order = np.argsort(kind, kind="stable")
    first = np.searchsorted(kind[order], kind[order])
    index = np.empty_like(kind)
    index[order] = np.arange(kind.size) - first
    return [("host" if k == 0 else tiers.get(int(k), f"tier{k}-")) + str(i) for k, i in zip(kind, index)]
