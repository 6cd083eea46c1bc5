"""Independent parts of a run: the connected components of the links its flows can use.

    parts = flow_parts(fabric, src, dst)      # Parts: part id per flow, per link (-1: no flow can use it)

ECMP routes every flow over the shortest paths between its endpoints, so a flow can only ever occupy
the links that lie on one of them. Two flows interact (share a queue, a buffer, a PAUSE) only through a
switch both can reach, so the components of the graph of usable links are parts that could be simulated
apart. This module finds them (what ``cosim run --dry-run`` shows); cosim.runs.decompose_run simulates
them apart and merges the results.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.network import ideal
from cosim.network.topology import SWITCH


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Parts:
    """The parts of one run's traffic on its fabric."""

    flow_part: np.ndarray  # int64 [n_flows], part of each flow (-1: both ends on one host, no link used)
    link_part: np.ndarray  # int64 [n_links], part of each link, -1 for a link no flow can use
    n_parts: int

    def switches_per_part(self, fabric) -> np.ndarray:
        """int64 [n_parts]: switches touched by the usable links of each part."""
        out = np.zeros(self.n_parts, np.int64)
        for p in range(self.n_parts):
            ends = np.concatenate([fabric.link_a[self.link_part == p], fabric.link_b[self.link_part == p]])
            ends = np.unique(ends)
            out[p] = int(np.count_nonzero(fabric.node_kind[ends] == SWITCH))
        return out


def usable_links(fabric, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per flow, the links on some shortest path between its endpoints: (flow index, link id) pairs."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    dist = {int(h): ideal.hop_counts(fabric, int(h)) for h in np.unique(np.concatenate([src, dst]))}
    flows, links = [], []
    for pair in np.unique(np.stack([src, dst], axis=1), axis=0) if src.size else ():
        s, t = int(pair[0]), int(pair[1])
        ds, dt = dist[s], dist[t]
        total = ds[t]
        if s == t or total < 0:
            continue
        on = (((ds[a] >= 0) & (dt[b] >= 0) & (ds[a] + 1 + dt[b] == total))
              | ((ds[b] >= 0) & (dt[a] >= 0) & (ds[b] + 1 + dt[a] == total)))
        which = np.flatnonzero((src == s) & (dst == t))
        on_links = np.flatnonzero(on)
        flows.append(np.repeat(which, on_links.size))
        links.append(np.tile(on_links, which.size))
    if not flows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(flows), np.concatenate(links)


def single_paths(fabric, src: np.ndarray, dst: np.ndarray) -> bool:
    """True if every flow ``src`` → ``dst`` has exactly one shortest path (so no switch ever chooses among
    equal-cost ports for it, and ECMP hashing cannot matter)."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    flow_of, _ = usable_links(fabric, src, dst)
    on = np.bincount(flow_of, minlength=src.size)
    for s in np.unique(src):
        mine = np.flatnonzero(src == s)
        hops = ideal.hop_counts(fabric, int(s))[dst[mine]]
        if np.any(on[mine] != np.maximum(hops, 0)):
            return False
    return True


def flow_parts(fabric, src: np.ndarray, dst: np.ndarray) -> Parts:
    """The connected components of the links the flows ``src`` → ``dst`` (host node ids) can use."""
    n_flows = int(np.asarray(src).size)
    flow_of, link_of = usable_links(fabric, src, dst)
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    used = np.zeros(fabric.n_links, bool)
    used[link_of] = True
    # union-find over nodes joined by usable links, with path halving
    root = np.arange(fabric.n_nodes, dtype=np.int64)

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = int(root[x])
        return x

    for j in np.flatnonzero(used):
        ra, rb = find(int(a[j])), find(int(b[j]))
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    node_root = np.array([find(i) for i in range(fabric.n_nodes)], np.int64)
    link_root = np.where(used, node_root[a], -1)
    roots = np.unique(link_root[used])
    link_part = np.where(used, np.searchsorted(roots, link_root), -1).astype(np.int64)
    flow_part = np.full(n_flows, -1, np.int64)
    flow_part[flow_of] = link_part[link_of]
    return Parts(flow_part=flow_part, link_part=link_part, n_parts=int(roots.size))


def describe_parts(fabric, src: np.ndarray, dst: np.ndarray) -> dict:
    """What --dry-run shows: how many independent parts the traffic splits into, and their sizes."""
    parts = flow_parts(fabric, src, dst)
    flows = np.bincount(parts.flow_part[parts.flow_part >= 0], minlength=parts.n_parts)
    return {"independent_parts": parts.n_parts,
            "flows_per_part": sorted({int(f) for f in flows}) if parts.n_parts else [],
            "switches_per_part_max": int(parts.switches_per_part(fabric).max()) if parts.n_parts else 0,
            "unused_links": int(np.count_nonzero(parts.link_part < 0))}
