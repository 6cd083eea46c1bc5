"""Independent parts of a run: the connected components of the links its flows can use.

    parts = flow_parts(fabric, src, dst)      # Parts: part id per flow, per link (-1: no flow can use it)

ECMP routes every flow over the shortest paths between its endpoints, so a flow can only ever occupy
the links that lie on one of them. Two flows interact (share a queue, a buffer, a PAUSE) only through a
switch both can reach, so the components of the graph of usable links are parts that could be simulated
apart. This module finds them (what ``cosim run --dry-run`` shows); cosim.decompose.exact simulates
them apart and merges the results.

Every host has one link (a NIC), so a flow's shortest paths are its two host links around the shortest
paths between the switches its hosts hang on: the paths are found once per distinct source switch (one
breadth-first search, then one sweep back from its destination switches), whatever the number of flows
or hosts — a 16,384-host fabric costs what its few hundred switches do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.arrays import unique_inverse
from cosim.network.topology import SWITCH


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Parts:
    """The parts of one run's traffic on its fabric."""

    flow_part: np.ndarray  # int64 [n_flows], part of each flow (-1: both ends on one host, no link used)
    link_part: np.ndarray  # int64 [n_links], part of each link, -1 for a link no flow can use
    n_parts: int

    def switches_per_part(self, fabric) -> np.ndarray:
        """int64 [n_parts]: switches touched by the usable links of each part."""
        used = self.link_part >= 0
        ends = np.concatenate([fabric.link_a[used], fabric.link_b[used]]).astype(np.int64)
        part = np.concatenate([self.link_part[used], self.link_part[used]])
        sw = fabric.node_kind[ends] == SWITCH
        pairs = np.unique(part[sw] * fabric.n_nodes + ends[sw])
        return np.bincount(pairs // fabric.n_nodes, minlength=self.n_parts).astype(np.int64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Routes:
    """The shortest paths of a set of flows: which flows have one, the links on any of them, and whether
    some flow has more than one (equal-cost paths, where ECMP chooses)."""

    routed: np.ndarray  # bool [n_flows]: the endpoints differ and are connected
    used_link: np.ndarray  # bool [n_links]: on a shortest path of some routed flow
    multipath: np.ndarray  # bool [n_flows]: a routed flow with two or more shortest paths


def components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int64 [n]: the smallest member of the connected component of every vertex (edges a[i]–b[i])."""
    # vertex ids in 32 bits whenever they fit: half the memory of every edge-sized temporary (a DAG's
    # components run over tens of millions of edges)
    vid = np.int32 if n < np.iinfo(np.int32).max else np.int64
    a, b = np.asarray(a, vid), np.asarray(b, vid)
    root = np.arange(n, dtype=vid)
    while True:
        ra, rb = root[a], root[b]
        lo = np.minimum(ra, rb)
        new = root.copy()
        np.minimum.at(new, ra, lo)
        np.minimum.at(new, rb, lo)
        while True:
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, root):
            return root.astype(np.int64)
        root = new


def host_links(fabric) -> tuple[np.ndarray, np.ndarray]:
    """(link, node at its other end) of every host's one link, int64 [n_hosts] each (hosts are ids 0..)."""
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    n_hosts = fabric.n_hosts
    link = np.full(n_hosts, -1, np.int64)
    peer = np.full(n_hosts, -1, np.int64)
    ids = np.arange(a.size, dtype=np.int64)
    for x, y in ((a, b), (b, a)):
        host = x < n_hosts
        link[x[host]], peer[x[host]] = ids[host], y[host]
    return link, peer


def _sweep(fabric, tail, head, edge_link, is_switch, source: int, targets: np.ndarray):
    """From ``source``: the links on a shortest path to some of ``targets``, and the shortest-path count
    (capped at 2) and depth of every node. Transit goes through switches only."""
    n = fabric.n_nodes
    depth = np.full(n, -1, np.int64)
    depth[source] = 0
    frontier = np.zeros(n, bool)
    frontier[source] = True
    level = 0
    while frontier.any():
        step = frontier[tail] & (depth[head] < 0)
        level += 1
        depth[head[step]] = level
        frontier[:] = False
        frontier[head[step]] = True
        frontier &= is_switch
    fwd = np.flatnonzero((depth[tail] >= 0) & (depth[head] == depth[tail] + 1)
                         & (is_switch[tail] | (tail == source)))
    fwd = fwd[np.argsort(depth[head[fwd]], kind="stable")]
    bounds = np.searchsorted(depth[head[fwd]], np.arange(1, level + 2))
    layers = [fwd[bounds[i]:bounds[i + 1]] for i in range(level)]
    paths = np.zeros(n, np.float64)
    paths[source] = 1.0
    for e in layers:
        paths += np.bincount(head[e], weights=paths[tail[e]], minlength=n)
        np.minimum(paths, 2.0, out=paths)
    on = np.zeros(n, bool)
    on[targets] = True
    used = np.zeros(fabric.n_links, bool)
    for e in reversed(layers):
        e = e[on[head[e]]]
        used[edge_link[e]] = True
        on[tail[e]] = True
    return used, paths, depth


def shortest_routes(fabric, src: np.ndarray, dst: np.ndarray) -> Routes:
    """The :class:`Routes` of the flows ``src`` → ``dst`` (host node ids): each host stands on the switch
    its link reaches (module docstring), so the searches run per distinct source switch."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    link, peer = host_links(fabric)
    is_switch = np.asarray(fabric.node_kind) == SWITCH
    on_switch = is_switch[peer]
    anchor = np.where(on_switch, peer, np.arange(peer.size))
    a_src, a_dst = anchor[src], anchor[dst]
    routed = src != dst
    multipath = np.zeros(src.size, bool)
    used = np.zeros(fabric.n_links, bool)
    apart = routed & (a_src != a_dst)
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    tail, head = np.concatenate([a, b]), np.concatenate([b, a])
    edge_link = np.concatenate([np.arange(a.size), np.arange(a.size)])
    n = fabric.n_nodes
    pairs, pair_of = unique_inverse(a_src[apart] * n + a_dst[apart])
    pair_src, pair_dst = pairs // n, pairs % n
    pair_ok = np.zeros(pairs.size, bool)
    pair_multi = np.zeros(pairs.size, bool)
    starts = np.searchsorted(pair_src, np.unique(pair_src))
    for lo, hi in zip(starts, np.append(starts[1:], pairs.size)):
        targets = pair_dst[lo:hi]
        reach, paths, depth = _sweep(fabric, tail, head, edge_link, is_switch, int(pair_src[lo]), targets)
        used |= reach
        pair_ok[lo:hi] = depth[targets] >= 0
        pair_multi[lo:hi] = paths[targets] > 1
    idx = np.flatnonzero(apart)
    routed[idx] = pair_ok[pair_of]
    multipath[idx] = pair_multi[pair_of]
    for ends in (src, dst):
        mine = routed & on_switch[ends]
        used[link[ends[mine]]] = True
    return Routes(routed=routed, used_link=used, multipath=multipath & routed)


#: most work the search for parts may take: (distinct source switches) x (directed links), the elements its
#: breadth-first searches touch (5e8 is about ten seconds); beyond it a run is simulated whole unanalysed
MAX_SEARCH_WORK = 5e8


def search_work(fabric, src: np.ndarray) -> float:
    """What :func:`shortest_routes` would cost for flows from ``src``: distinct source switches x links x 2."""
    _, peer = host_links(fabric)
    return float(np.unique(peer[np.asarray(src, np.int64)]).size) * 2 * fabric.n_links


def too_large_to_search(fabric, src: np.ndarray) -> str:
    """Why the parts of flows from ``src`` are not searched for (the search would take too long), or ""."""
    work = search_work(fabric, src)
    if work <= MAX_SEARCH_WORK:
        return ""
    return (f"the search for independent parts would touch {work:.3g} links ({MAX_SEARCH_WORK:.3g} at most): "
            "the run is simulated whole")


def single_paths(fabric, src: np.ndarray, dst: np.ndarray) -> bool:
    """True if every flow ``src`` → ``dst`` has exactly one shortest path (so no switch ever chooses among
    equal-cost ports for it, and ECMP hashing cannot matter)."""
    return not shortest_routes(fabric, src, dst).multipath.any()


def flow_parts(fabric, src: np.ndarray, dst: np.ndarray) -> Parts:
    """The connected components of the links the flows ``src`` → ``dst`` (host node ids) can use."""
    src = np.asarray(src, np.int64)
    routes = shortest_routes(fabric, src, dst)
    used = routes.used_link
    a, b = np.asarray(fabric.link_a, np.int64)[used], np.asarray(fabric.link_b, np.int64)[used]
    root = components(fabric.n_nodes, a, b)
    roots = np.unique(root[a])
    link_part = np.full(fabric.n_links, -1, np.int64)
    link_part[used] = np.searchsorted(roots, root[a])
    flow_part = np.full(src.size, -1, np.int64)
    flow_part[routes.routed] = np.searchsorted(roots, root[src[routes.routed]])
    return Parts(flow_part=flow_part, link_part=link_part, n_parts=int(roots.size))


def describe_parts(fabric, src: np.ndarray, dst: np.ndarray, parts: Parts | None = None, *,
                   count: np.ndarray | None = None) -> dict:
    """What --dry-run shows: how many independent parts the traffic splits into, and their sizes (``parts``:
    flow_parts of these flows, if already found; ``count``: how many flows each row stands for, default one)."""
    why = too_large_to_search(fabric, src)
    if why:
        return {"independent_parts": f"not searched ({why})"}
    parts = flow_parts(fabric, src, dst) if parts is None else parts
    routed = parts.flow_part >= 0
    weights = None if count is None else np.asarray(count, np.int64)[routed]
    flows = np.bincount(parts.flow_part[routed], weights=weights, minlength=parts.n_parts).astype(np.int64)
    return {"independent_parts": parts.n_parts,
            "flows_per_part": sorted({int(f) for f in flows}) if parts.n_parts else [],
            "switches_per_part_max": int(parts.switches_per_part(fabric).max()) if parts.n_parts else 0,
            "unused_links": int(np.count_nonzero(parts.link_part < 0))}
