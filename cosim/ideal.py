"""Ideal (unloaded) flow completion times, the yardstick of FCT slowdown.

A flow alone on an idle fabric, with store-and-forward switches, delivers its last byte after

    T_ideal = (W - w_max) * 8 / R_b  +  sum_i w_max * 8 / r_i  +  sum_i d_i

where W is its wire bytes (payload plus one header per packet), w_max the wire size of its largest
(first) packet, which paces the store-and-forward pipeline (a smaller last packet queues behind it),
r_i and d_i the rate and propagation delay of hop i of a shortest path, and R_b the smallest r_i (the
bottleneck). With equal rates this is W/r + (h - 1) w_max/r + sum d, which the fabric reproduces exactly
for a lone flow. FCT here ends when the last byte arrives (one way), so the "base RTT" of the slowdown
definition is the one-way base latency of the path: slowdown = FCT / T_ideal >= 1.

Paths come from a breadth-first search over the fabric from each distinct source (numpy frontier
expansion); equal-cost paths of our topologies have the same per-tier rates, so any one of them serves.
"""

from __future__ import annotations

import numpy as np

from cosim.topology import HOST, Fabric


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


def path_properties(fabric: Fabric, src: int):
    """From host ``src`` to every node: bottleneck rate (bit/s), sum of delays (ns), sum of 1/rate (s/bit).

    Unreached nodes get bottleneck 0. Transit never goes through a host (hosts have one link anyway).
    """
    ptr, head, rate, delay = _adjacency(fabric)
    n = fabric.n_nodes
    bottleneck = np.zeros(n)
    delay_sum = np.zeros(n)
    inv_rate_sum = np.zeros(n)
    seen = np.zeros(n, bool)
    seen[src] = True
    bottleneck[src] = np.inf
    frontier = np.array([src], np.int64)
    is_switch = fabric.node_kind != HOST
    while frontier.size:
        counts = ptr[frontier + 1] - ptr[frontier]
        edge = np.repeat(ptr[frontier] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        tail = np.repeat(frontier, counts)
        new = ~seen[head[edge]]
        edge, tail = edge[new], tail[new]
        nodes, first = np.unique(head[edge], return_index=True)  # one parent per newly reached node
        edge, tail = edge[first], tail[first]
        bottleneck[nodes] = np.minimum(bottleneck[tail], rate[edge])
        delay_sum[nodes] = delay_sum[tail] + delay[edge]
        inv_rate_sum[nodes] = inv_rate_sum[tail] + 1.0 / rate[edge]
        seen[nodes] = True
        frontier = nodes[is_switch[nodes]]
    return bottleneck, delay_sum, inv_rate_sum


def ideal_fct_ns(fabric: Fabric, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray, *,
                 mtu_bytes: int, header_bytes: int) -> np.ndarray:
    """T_ideal of every flow, in ns (0 for empty flows; inf if dst is unreachable)."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    size = np.asarray(size_bytes, np.int64)
    bott = np.zeros(src.size)
    dsum = np.zeros(src.size)
    isum = np.zeros(src.size)
    for s in np.unique(src):
        mine = src == s
        b, d, i = path_properties(fabric, int(s))
        bott[mine], dsum[mine], isum[mine] = b[dst[mine]], d[dst[mine]], i[dst[mine]]
    packets = -(-size // mtu_bytes)
    wire = size + packets * header_bytes
    first = np.where(packets > 0, np.minimum(size, mtu_bytes) + header_bytes, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal_s = (wire - first) * 8.0 / bott + first * 8.0 * isum
    ideal_ns = ideal_s * 1e9 + dsum
    ideal_ns[bott == 0] = np.inf
    ideal_ns[size == 0] = 0.0
    return ideal_ns

