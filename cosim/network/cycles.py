"""Whether a fabric's routes can deadlock a lossless fabric: a cycle in the buffer (channel) dependencies of
the shortest-path ECMP routes the simulator builds.

A channel is one direction of a switch-to-switch link. Channel ``u→v`` depends on ``v→w`` when some route
enters ``v`` on the first and leaves on the second: a packet held in ``v``'s buffer for ``u→v`` waits for
``v→w``. With PFC or credits, a cycle of such waits can lock every buffer on it (Dally and Seitz's
condition). The simulator routes every destination host along all shortest paths (a BFS per destination),
so the dependencies are those of the shortest-path DAG towards each host; hosts that share a switch share
it, so one BFS per switch that has hosts is enough. Tiered fabrics (leaves, spines, cores with links only
between tiers) route up then down and never have a cycle; rings, tori and links inside a tier can.
"""

from __future__ import annotations

import numpy as np

from cosim.network.topology import HOST, Fabric

#: destinations (switches with hosts) whose dependencies are gathered before deduplicating them
_BATCH = 64


def dependency_cycle(fabric: Fabric) -> list[int] | None:
    """A cycle of switch node ids whose channels wait on each other under shortest-path routing (first
    node repeated at the end), or None when the channel dependencies are acyclic."""
    kind = np.asarray(fabric.node_kind)
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    between = (kind[a] != HOST) & (kind[b] != HOST)
    src = np.concatenate([a[between], b[between]])
    dst = np.concatenate([b[between], a[between]])
    n, n_ch = fabric.n_nodes, src.size
    if n_ch == 0:
        return None
    by_src = np.argsort(src, kind="stable")  # channels grouped by the node they leave
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    host = kind == HOST
    attach = np.unique(np.where(host[a], b, a)[host[a] | host[b]])  # switches with hosts
    pairs, batch = np.empty(0, np.int64), []
    for i, s in enumerate(attach.tolist()):
        dist = _switch_distances(s, src, dst, ptr, by_src, n)
        used = (dist[src] >= 0) & (dist[dst] == dist[src] - 1)
        ch = np.flatnonzero(used & (dst != s))  # a route leaving these channels goes on inside the fabric
        counts = ptr[dst[ch] + 1] - ptr[dst[ch]]
        first = np.repeat(ptr[dst[ch]] - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        nxt = by_src[first]
        keep = used[nxt]
        batch.append(np.repeat(ch, counts)[keep] * n_ch + nxt[keep])
        if len(batch) == _BATCH or i == attach.size - 1:  # dedupe now and then: bounded memory, few sorts
            pairs = np.unique(np.concatenate([pairs, *batch]))
            batch = []
    return _cycle(pairs // n_ch, pairs % n_ch, n_ch, src)


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
