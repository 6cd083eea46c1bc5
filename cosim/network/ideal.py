"""Ideal (unloaded) flow completion times, the yardstick of FCT slowdown.

A flow alone on an idle fabric of store-and-forward switches is a tandem of deterministic servers, one
per hop ``i`` of a shortest path (rate r_i, propagation delay d_i). Its P packets leave the source back to
back: P - 1 full ones of wire size w (MTU payload plus header) and a last one of w_l. With F(k, i) the time
packet k finishes serializing on hop i:

    F(1, i)   = sum_{j <= i} (w / r_j) + sum_{j < i} d_j
    F(k, i)   = F(1, i) + (k - 1) * max_{j <= i} w / r_j              for the full packets (k < P)
    F(P, i)   = max(F(P - 1, i), F(P, i - 1) + d_{i-1}) + w_l / r_i   (the last one may queue behind)
    T_ideal   = F(P, h) + d_h

(equal packets keep the spacing of the slowest hop so far; the last, smaller packet waits for its
predecessor wherever that one is still serializing). The engine reproduces this exactly for a lone flow.
FCT here ends when the last byte arrives (one way), so the "base RTT" of the slowdown definition is the
one-way base latency of the path: slowdown = FCT / T_ideal >= 1.

Paths come from a breadth-first search over the fabric from each distinct source (numpy frontier
expansion, one parent per node); equal-cost paths of our topologies have the same per-tier rates, so any
one of them serves.
"""

from __future__ import annotations

import numpy as np

from cosim.network.topology import HOST, Fabric


def _adjacency(fabric: Fabric):
    """Directed edges (both directions of every link) sorted by tail: CSR ptr, head, rate, delay."""
    tail = np.concatenate([fabric.link_a, fabric.link_b]).astype(np.int64)
    head = np.concatenate([fabric.link_b, fabric.link_a]).astype(np.int64)
    rate = np.concatenate([fabric.link_rate_bps, fabric.link_rate_bps]).astype(np.float64)
    delay = np.concatenate([fabric.link_delay_ns, fabric.link_delay_ns]).astype(np.float64)
    order = np.argsort(tail, kind="stable")
    ptr = np.zeros(fabric.n_nodes + 1, np.int64)
    np.add.at(ptr, tail + 1, 1)
    return np.cumsum(ptr), head[order], rate[order], delay[order]


def shortest_path_tree(fabric: Fabric, src: int):
    """BFS tree from host ``src``: per node its parent (-1 at src, -2 if unreached), and the rate (bit/s)
    and delay (ns) of the link from that parent. Transit never goes through a host."""
    ptr, head, rate, delay = _adjacency(fabric)
    n = fabric.n_nodes
    parent = np.full(n, -2, np.int64)
    in_rate = np.zeros(n)
    in_delay = np.zeros(n)
    parent[src] = -1
    frontier = np.array([src], np.int64)
    is_switch = fabric.node_kind != HOST
    while frontier.size:
        counts = ptr[frontier + 1] - ptr[frontier]
        edge = np.repeat(ptr[frontier] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        tail = np.repeat(frontier, counts)
        new = parent[head[edge]] == -2
        edge, tail = edge[new], tail[new]
        nodes, first = np.unique(head[edge], return_index=True)  # one parent per newly reached node
        edge, tail = edge[first], tail[first]
        parent[nodes], in_rate[nodes], in_delay[nodes] = tail, rate[edge], delay[edge]
        frontier = nodes[is_switch[nodes]]
    return parent, in_rate, in_delay


def hop_counts(fabric: Fabric, src: int) -> np.ndarray:
    """int64 [n_nodes]: links on a shortest path from host ``src`` to every node (-1 if unreached)."""
    parent = shortest_path_tree(fabric, src)[0]
    depth = np.where(parent == -1, 0, -1).astype(np.int64)
    while True:
        todo = (depth < 0) & (parent >= 0)
        ready = todo & (depth[np.maximum(parent, 0)] >= 0)
        if not ready.any():
            return depth
        depth[ready] = depth[parent[ready]] + 1


def _paths(fabric: Fabric, src: np.ndarray, dst: np.ndarray):
    """Per flow, the hops of a shortest path in order: rate (bit/s), delay (ns), [n, L] arrays padded
    with 0 beyond each flow's hop count, plus the hop count (0: unreachable)."""
    rev_rate, rev_delay, hops = [], [], np.zeros(src.size, np.int64)
    rows = []
    for s in np.unique(src):
        mine = np.flatnonzero(src == s)
        parent, in_rate, in_delay = shortest_path_tree(fabric, int(s))
        cur = dst[mine].copy()
        reached = parent[cur] != -2
        r_cols, d_cols = [], []
        while True:  # walk from the destinations up to the source, one hop per step
            live = reached & (cur != s)
            if not live.any():
                break
            r_cols.append(np.where(live, in_rate[cur], 0.0))
            d_cols.append(np.where(live, in_delay[cur], 0.0))
            hops[mine] += live
            cur = np.where(live, parent[cur], cur)
        hops[mine[~reached]] = 0
        rows.append(mine)
        rev_rate.append(np.stack(r_cols, 1) if r_cols else np.zeros((mine.size, 0)))
        rev_delay.append(np.stack(d_cols, 1) if d_cols else np.zeros((mine.size, 0)))
    width = max((r.shape[1] for r in rev_rate), default=0)
    rate, delay = np.zeros((src.size, width)), np.zeros((src.size, width))
    for mine, r, d in zip(rows, rev_rate, rev_delay):
        h = hops[mine][:, None]
        back = h - 1 - np.arange(width)[None, :]  # column of the reversed walk holding forward hop j
        ok = back >= 0
        take = np.clip(back, 0, max(r.shape[1] - 1, 0))
        if r.shape[1]:
            rate[mine] = np.where(ok, np.take_along_axis(r, take, 1), 0.0)
            delay[mine] = np.where(ok, np.take_along_axis(d, take, 1), 0.0)
    return rate, delay, hops


def ideal_fct_ns(fabric: Fabric, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray, *,
                 mtu_bytes: int, header_bytes: int) -> np.ndarray:
    """T_ideal of every flow, in ns (0 for empty flows; inf if dst is unreachable)."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    size = np.asarray(size_bytes, np.int64)
    rate, delay, hops = _paths(fabric, src, dst)
    packets = -(-size // mtu_bytes)
    full_bits = (np.minimum(size, mtu_bytes) + header_bytes) * 8.0
    last_bits = np.where(packets > 0, size - (packets - 1) * mtu_bytes + header_bytes, 0) * 8.0
    first = np.zeros(src.size)          # F(1, i), s
    slowest = np.zeros(src.size)        # max_{j <= i} w / r_j, s
    last = np.full(src.size, -np.inf)   # F(P, i), s
    prev_delay = np.zeros(src.size)     # d_{i-1}, s
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(rate.shape[1]):
            on = j < hops
            r = np.where(on, rate[:, j], 1.0)
            first_j = first + prev_delay + full_bits / r
            slowest_j = np.maximum(slowest, full_bits / r)
            before_last = np.where(packets >= 2, first_j + (packets - 2) * slowest_j, -np.inf)
            ahead = np.where(j == 0, 0.0, last + prev_delay)
            last_j = np.maximum(before_last, ahead) + last_bits / r
            first, slowest, last = (np.where(on, a, b) for a, b in ((first_j, first), (slowest_j, slowest),
                                                                    (last_j, last)))
            prev_delay = np.where(on, delay[:, j] * 1e-9, prev_delay)
    ideal_ns = (last + prev_delay) * 1e9
    ideal_ns[hops == 0] = np.inf
    ideal_ns[size == 0] = 0.0
    return ideal_ns


def path_properties(fabric: Fabric, src: int):
    """From host ``src`` to every node along the shortest-path tree: bottleneck rate (bit/s; 0 if
    unreached, inf at src), sum of delays (ns) and sum of 1/rate (s/bit)."""
    nodes = np.arange(fabric.n_nodes, dtype=np.int64)
    rate, delay, hops = _paths(fabric, np.full(nodes.size, src, np.int64), nodes)
    on = np.arange(rate.shape[1])[None, :] < hops[:, None]
    bottleneck = np.where(on, rate, np.inf).min(axis=1, initial=np.inf)
    bottleneck[(hops == 0) & (nodes != src)] = 0.0
    with np.errstate(divide="ignore"):
        inv_rate = np.where(on, 1.0 / np.where(on, rate, 1.0), 0.0).sum(axis=1)
    return bottleneck, delay.sum(axis=1), inv_rate
