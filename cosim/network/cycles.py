"""Whether a fabric's routes can deadlock a lossless fabric: a cycle in the buffer (channel) dependencies of
the ECMP routes the simulator builds (shortest paths, or a fabric file's ``routes``), and whether routes
loop.

A channel is one direction of a switch-to-switch link. Channel ``u→v`` depends on ``v→w`` when some route
enters ``v`` on the first and leaves on the second: a packet held in ``v``'s buffer for ``u→v`` waits for
``v→w``. With PFC or credits, a cycle of such waits can lock every buffer on it (Dally and Seitz's
condition). The simulator routes every destination host along all shortest paths (a BFS per destination),
so the dependencies are those of the shortest-path DAG towards each host; hosts that share a switch share
it, so one BFS per switch that has hosts is enough. Tiered fabrics (leaves, spines, cores with links only
between tiers) route up then down and never have a cycle; rings, tori and links inside a tier can.
A fabric file's ``routes`` (``[switch, to, via]``: at ``switch``, packets for the hosts of ``to`` leave
towards the neighbours ``via``) replace those next hops, for the check as in the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim.network.topology import HOST, Fabric

#: destinations (switches with hosts) whose dependencies are gathered before deduplicating them
_BATCH = 64


def dependency_cycle(fabric: Fabric, routes=None) -> list[int] | None:
    """A cycle of switch node ids whose channels wait on each other under the fabric's routing (first node
    repeated at the end), or None when the channel dependencies are acyclic. ``routes`` (default: the
    fabric's ``params["routes"]``) are ``[switch, to, via]`` next hops that replace the shortest ones."""
    ch = _Channels(fabric)
    if ch.n_ch == 0:
        return None
    n_ch, by_src, ptr = ch.n_ch, ch.by_src, ch.ptr
    pairs, batch = np.empty(0, np.int64), []
    for i, (s, used) in enumerate(ch.next_hops(_routes_of(fabric, routes))):
        c = np.flatnonzero(used & (ch.dst != s))  # a route leaving these channels goes on inside the fabric
        counts = ptr[ch.dst[c] + 1] - ptr[ch.dst[c]]
        first = np.repeat(ptr[ch.dst[c]] - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        nxt = by_src[first]
        keep = used[nxt]
        batch.append(np.repeat(c, counts)[keep] * n_ch + nxt[keep])
        if len(batch) == _BATCH or i == ch.attach.size - 1:  # dedupe now and then: bounded memory, few sorts
            pairs = np.unique(np.concatenate([pairs, *batch]))
            batch = []
    return _cycle(pairs // n_ch, pairs % n_ch, n_ch, ch.src)


def forwarding_loop(fabric: Fabric, routes=None) -> tuple[int, list[int]] | None:
    """A destination switch and a loop of switches its packets go round (first node repeated at the end)
    under ``routes`` (default: the fabric's ``params["routes"]``), or None. Shortest paths never loop, so
    only destinations with routes are followed."""
    routes = _routes_of(fabric, routes)
    ch = _Channels(fabric)
    nodes = np.arange(fabric.n_nodes)
    for s, used in ch.next_hops(routes, only_routed=True):
        loop = _cycle(ch.src[used], ch.dst[used], fabric.n_nodes, nodes)
        if loop:
            return s, loop
    return None


def _routes_of(fabric: Fabric, routes) -> list:
    params = fabric.params if isinstance(fabric.params, Mapping) else {}
    return list(params.get("routes", ()) if routes is None else routes)


class _Channels:
    """The switch-to-switch channels of a fabric (one per link direction), grouped by the node they leave."""

    def __init__(self, fabric: Fabric):
        kind = np.asarray(fabric.node_kind)
        a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
        between = (kind[a] != HOST) & (kind[b] != HOST)
        self.src = np.concatenate([a[between], b[between]])
        self.dst = np.concatenate([b[between], a[between]])
        self.n, self.n_ch = fabric.n_nodes, self.src.size
        self.by_src = np.argsort(self.src, kind="stable")
        self.ptr = np.concatenate([[0], np.cumsum(np.bincount(self.src, minlength=self.n))])
        host = kind == HOST
        self.attach = np.unique(np.where(host[a], b, a)[host[a] | host[b]])  # switches with hosts

    def next_hops(self, routes, *, only_routed: bool = False):
        """Per destination switch with hosts: (its id, bool [n_ch]: the channels packets for its hosts take),
        the shortest-path ones except at the switches ``routes`` pins to their ``via`` neighbours."""
        pinned: dict[int, list] = {}
        for switch, to, via in routes:
            pinned.setdefault(int(to), []).append((int(switch), via))
        for s in self.attach.tolist():
            if only_routed and s not in pinned:
                continue
            dist = _switch_distances(s, self.src, self.dst, self.ptr, self.by_src, self.n)
            used = (dist[self.src] >= 0) & (dist[self.dst] == dist[self.src] - 1)
            for switch, via in pinned.get(s, ()):
                leaving = self.by_src[self.ptr[switch]:self.ptr[switch + 1]]
                used[leaving] = np.isin(self.dst[leaving], np.asarray(via, np.int64))
            yield s, used


def _switch_distances(start: int, src, dst, ptr, by_src, n: int) -> np.ndarray:
    """Hops from every node to ``start`` over switch-to-switch channels (-1: unreachable)."""
    dist = np.full(n, -1, np.int64)
    dist[start] = 0
    frontier, d = np.array([start]), 0
    while frontier.size:
        d += 1
        counts = ptr[frontier + 1] - ptr[frontier]
        first = np.repeat(ptr[frontier] - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        peers = dst[by_src[first]]
        peers = np.unique(peers[dist[peers] < 0])
        dist[peers] = d
        frontier = peers
    return dist


def _cycle(before: np.ndarray, after: np.ndarray, n_ch: int, src: np.ndarray) -> list[int] | None:
    """A cycle of the dependency graph (channel ``before[i]`` waits on ``after[i]``) as the switches its
    channels leave, or None: Kahn's algorithm peels channels nothing waits on; what remains holds a cycle."""
    indeg = np.bincount(after, minlength=n_ch)
    alive = np.ones(n_ch, bool)
    order = np.argsort(before, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(before, minlength=n_ch))])
    frontier = np.flatnonzero(indeg == 0)
    while frontier.size:
        alive[frontier] = False
        counts = ptr[frontier + 1] - ptr[frontier]
        first = np.repeat(ptr[frontier] - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        targets = after[order[first]]
        np.subtract.at(indeg, targets, 1)
        frontier = np.unique(targets[(indeg[targets] == 0) & alive[targets]])
    if not alive.any():
        return None
    # Kahn leaves a channel alive only while an alive channel waits on it: walk those back until one repeats
    rev = np.argsort(after, kind="stable")
    rptr = np.concatenate([[0], np.cumsum(np.bincount(after, minlength=n_ch))])
    seen: dict[int, int] = {}
    c, path = int(np.flatnonzero(alive)[0]), []
    while c not in seen:
        seen[c] = len(path)
        path.append(c)
        waiting = before[rev[rptr[c]:rptr[c + 1]]]
        c = int(waiting[alive[waiting]][0])
    loop = path[seen[c]:][::-1]  # in the order the channels wait on each other
    return [int(src[x]) for x in loop] + [int(src[loop[0]])]
