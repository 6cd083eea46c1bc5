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

A multi-plane NIC's packets take its P planes in turn (cosim.network.planes): the path is taken as one
plane whose hops run at P times their rate, the NIC's rate. That keeps T_ideal a lower bound: the
packets' spacing is the NIC's, as on the real planes, and only the first packet's store-and-forward on each
plane hop (w / r, not w / (P r)) is left out.

Paths are those of a breadth-first search from each source whose transit never goes through a host, each
node taking as its parent the tail of its lowest-numbered edge from the previous level (equal-cost paths of
our topologies have the same per-tier rates, so any one of them serves). They are found without a tree per
source: sources with the same set of neighbouring switches share their switches' BFS levels, found for
all such groups at once as bit sets (one bit per group, level by level over the switch-to-switch edges);
each flow then walks from its destination up to its source, taking at every step the lowest-numbered edge
from a node one level closer. Work grows with links × groups / 64 plus flows × hops × in-degree.
"""

from __future__ import annotations

import numpy as np

from cosim.arrays import unique_inverse
from cosim.network import planes
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


#: BFS level of a switch a group of sources does not reach
_UNREACHED = np.iinfo(np.int16).max
#: source groups whose switch levels are held at once (bounds the levels' memory to switches × this × 2 B)
_GROUPS_PER_BATCH = 1024
#: flow x in-edge pairs one walk step may expand at once (about 50 bytes each)
_WALK_PAIRS = 1 << 22


def _in_edges(ptr: np.ndarray, head: np.ndarray):
    """CSR of the directed edges by head: ptr, and the edge ids of each head in increasing order."""
    order = np.argsort(head, kind="stable")
    in_ptr = np.zeros(ptr.size, np.int64)
    np.add.at(in_ptr, head + 1, 1)
    return np.cumsum(in_ptr), order


def _ragged(ptr: np.ndarray, nodes: np.ndarray):
    """For each of ``nodes``, the positions ptr[n]..ptr[n+1]-1: (owner index, position), owner-major."""
    counts = ptr[nodes + 1] - ptr[nodes]
    owner = np.repeat(np.arange(nodes.size), counts)
    pos = np.repeat(ptr[nodes] - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
    return owner, pos


def _source_groups(fabric: Fabric, ptr: np.ndarray, head: np.ndarray, sources: np.ndarray):
    """Group id of each source (sources with the same set of neighbouring switches share one) and, per
    group, its switches: (group of each source, CSR ptr and members of the groups' start switches)."""
    is_switch = fabric.node_kind != HOST
    owner, pos = _ragged(ptr, sources)
    keep = is_switch[head[pos]]
    pairs = np.unique(np.stack([owner[keep], head[pos][keep]], 1), axis=0)  # (source, switch), sorted
    width = int(np.bincount(pairs[:, 0], minlength=sources.size).max(initial=0))
    table = np.full((sources.size, max(width, 1)), -1, np.int64)
    if pairs.size:
        first = np.searchsorted(pairs[:, 0], pairs[:, 0])
        table[pairs[:, 0], np.arange(pairs.shape[0]) - first] = pairs[:, 1]
    rows, group = np.unique(table, axis=0, return_inverse=True)
    members = rows[rows >= 0]
    gptr = np.concatenate([[0], np.cumsum((rows >= 0).sum(1))]).astype(np.int64)
    return group.ravel(), gptr, members


def _switch_levels(fabric: Fabric, ss_tail: np.ndarray, ss_head: np.ndarray, gptr: np.ndarray,
                   members: np.ndarray) -> np.ndarray:
    """int16 [n_nodes, groups]: BFS level of every switch from each group's sources (its start switches
    at level 1; transit through switches only), _UNREACHED where none."""
    n_groups = gptr.size - 1
    words = -(-n_groups // 64)
    level = np.full((fabric.n_nodes, n_groups), _UNREACHED, np.int16)
    frontier = np.zeros((fabric.n_nodes, words), np.uint64)
    group_of_member = np.repeat(np.arange(n_groups), np.diff(gptr))
    np.bitwise_or.at(frontier, (members, group_of_member // 64),
                     np.left_shift(np.uint64(1), (group_of_member % 64).astype(np.uint64)))
    level[members, group_of_member] = 1
    seen = frontier.copy()
    heads, starts = np.unique(ss_head, return_index=True)  # ss edges are sorted by head
    depth = 1
    while True:
        depth += 1
        reach = np.bitwise_or.reduceat(frontier[ss_tail], starts, axis=0) if ss_tail.size else frontier[:0]
        new = reach & ~seen[heads]
        live = new.any(axis=1)
        if not live.any():
            return level
        nodes, new = heads[live], new[live]
        seen[nodes] |= new
        frontier[:] = 0
        frontier[nodes] = new
        bits = np.unpackbits(new.view(np.uint8), axis=1, bitorder="little")[:, :n_groups].astype(bool)
        rows, cols = np.nonzero(bits)
        level[nodes[rows], cols] = depth


def _paths(fabric: Fabric, src: np.ndarray, dst: np.ndarray):
    """Per flow, the hops of a shortest path in order: rate (bit/s), delay (ns), [n, L] arrays padded
    with 0 beyond each flow's hop count, plus the hop count (0: unreachable or dst == src)."""
    n = src.size
    ptr, head, rate, delay = _adjacency(fabric)
    tail = np.repeat(np.arange(fabric.n_nodes, dtype=np.int64), np.diff(ptr))
    in_ptr, in_edge = _in_edges(ptr, head)
    is_switch = fabric.node_kind != HOST
    ss = np.flatnonzero(is_switch[tail] & is_switch[head])
    ss = ss[np.argsort(head[ss], kind="stable")]
    sources, src_index = unique_inverse(src)
    group_of_source, gptr, members = _source_groups(fabric, ptr, head, sources)
    group = group_of_source[src_index]
    hops = np.zeros(n, np.int64)
    walked_rate: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (flows, step, edge) per step
    # a walk step expands every live flow to the in-edges of its node: flows go in chunks whose expansion
    # stays under _WALK_PAIRS pairs, so a rail switch of thousands of ports costs time, not memory
    chunk = max(1, _WALK_PAIRS // max(int(np.diff(in_ptr).max(initial=1)), 1))
    for lo in range(0, gptr.size - 1, _GROUPS_PER_BATCH):
        hi = min(lo + _GROUPS_PER_BATCH, gptr.size - 1)
        batch = np.flatnonzero((group >= lo) & (group < hi))
        if batch.size == 0:
            continue
        level = _switch_levels(fabric, tail[ss], head[ss], gptr[lo:hi + 1] - gptr[lo], members[gptr[lo]:gptr[hi]])
        for c0 in range(0, batch.size, chunk):
            flows = batch[c0:c0 + chunk]
            g = group[flows] - lo
            s, cur = src[flows], dst[flows].copy()

            def candidates(owner_nodes, owners):
                """(owner, in-edge) pairs of each owner's node, and each pair's tail level from its source."""
                o, pos = _ragged(in_ptr, owner_nodes)
                e = in_edge[pos]
                t = tail[e]
                lv = np.where(is_switch[t], level[t, g[owners[o]]], _UNREACHED).astype(np.int64)
                lv[t == s[owners[o]]] = 0
                return o, e, lv

            # the level of each destination: its own if a switch, else one more than its closest in-neighbour
            d = np.full(flows.size, _UNREACHED, np.int64)
            sw = is_switch[cur]
            d[sw] = level[cur[sw], g[sw]]
            hosts = np.flatnonzero(~sw)
            o, _, lv = candidates(cur[hosts], hosts)
            best = np.full(hosts.size, _UNREACHED, np.int64)
            np.minimum.at(best, o, lv)
            d[hosts] = np.minimum(best + 1, _UNREACHED)
            d[cur == s] = 0
            reached = d < _UNREACHED
            step = 0
            while True:
                live = np.flatnonzero(reached & (cur != s))
                if live.size == 0:
                    break
                o, e, lv = candidates(cur[live], live)
                ok = lv == d[live[o]] - 1
                o, e = o[ok], e[ok]
                owner, first = np.unique(o, return_index=True)  # the lowest-numbered edge of each (pairs are sorted)
                assert owner.size == live.size, "a node one level closer to the source is always adjacent"
                e = e[first]
                walked_rate.append((flows[live[owner]], np.full(owner.size, step), e))
                hops[flows[live[owner]]] += 1
                cur[live[owner]] = tail[e]
                d[live[owner]] -= 1
                step += 1
    width = int(hops.max(initial=0))
    out_rate, out_delay = np.zeros((n, width)), np.zeros((n, width))
    for f, k, e in walked_rate:  # step k of the walk up from the destination is forward hop hops - 1 - k
        col = hops[f] - 1 - k
        out_rate[f, col] = rate[e]
        out_delay[f, col] = delay[e]
    return out_rate, out_delay, hops


#: flows whose ideal FCT is found at a time: the hop-by-hop walk holds a few dozen float64 per flow
IDEAL_SLICE_FLOWS = 1 << 20
#: (src, dst) pairs a PathCache keeps at most (about 70 B each); later pairs are walked and not kept
PATH_CACHE_PAIRS = 1 << 22


class PathCache:
    """The paths :func:`ideal_fct_ns` walked on one fabric, by (src, dst) pair: a caller that asks for the ideal
    FCTs of many flows a slice at a time (cosim.telemetry.FlowTable, whose slices repeat a training run's
    pairs) walks each pair once. A pair's path does not depend on the pairs walked with it, so the values
    are those of a walk without the cache."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self._striped = planes.striped(fabric)
        self._keys = np.zeros(0, np.int64)  # sorted pair keys, src * n_nodes + dst
        self._rate, self._delay = np.zeros((0, 0)), np.zeros((0, 0))
        self._hops = np.zeros(0, np.int64)

    def paths(self, pairs: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rate [pair, hop], delay [pair, hop], hops [pair]) of the sorted, distinct pair keys ``pairs``."""
        at = np.searchsorted(self._keys, pairs)
        known = at < self._keys.size
        known[known] = self._keys[at[known]] == pairs[known]
        new = pairs[~known]
        if not new.size:
            return self._rate[at], self._delay[at], self._hops[at]
        if self._keys.size + new.size > PATH_CACHE_PAIRS:  # full: walk what is not kept, every time
            return _paths(self._striped, pairs // n_nodes, pairs % n_nodes)
        walked = _paths(self._striped, new // n_nodes, new % n_nodes)
        width = max(self._rate.shape[1], walked[0].shape[1])
        keys = np.concatenate([self._keys, new])
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._rate, self._delay = (np.concatenate([_widened(old, width), _widened(x, width)])[order]
                                   for old, x in ((self._rate, walked[0]), (self._delay, walked[1])))
        self._hops = np.concatenate([self._hops, walked[2]])[order]
        at = np.searchsorted(self._keys, pairs)
        return self._rate[at], self._delay[at], self._hops[at]


def _widened(a: np.ndarray, width: int) -> np.ndarray:
    """``a`` [rows, hops] with zero columns up to ``width`` (a hop past a path's end: rate and delay 0)."""
    return np.pad(a, ((0, 0), (0, width - a.shape[1])))


def ideal_fct_ns(fabric: Fabric, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray, *,
                 mtu_bytes: int, header_bytes: int, paths: PathCache | None = None) -> np.ndarray:
    """T_ideal of every flow, in ns (0 for empty flows; inf if dst is unreachable); ``paths``: the pairs
    walked by earlier calls on ``fabric``, kept and added to."""
    src = np.asarray(src)
    dst = np.asarray(dst)
    size = np.asarray(size_bytes, np.int64)
    # A path depends on its (src, dst) pair only, and T_ideal on the pair and the size: a training run
    # repeats few pairs and few sizes (its chunks) in many flows, so each pair is walked once and each
    # (pair, size) computed once, when one int64 key holds both.
    n_nodes = max(int(fabric.n_nodes), 1)
    pair_key = src.astype(np.int64) * n_nodes + dst
    size_span = int(size.max(initial=0)) + 1
    if size.size and int(size.min()) >= 0 and n_nodes * n_nodes * size_span < 1 << 62:
        keys, key_of = unique_inverse(pair_key * size_span + size)
        pair_key, size = keys // size_span, keys % size_span
    else:
        key_of = None
    pairs, pair_of = unique_inverse(pair_key)
    paths = PathCache(fabric) if paths is None else paths
    assert paths.fabric is fabric, "a PathCache holds the paths of one fabric"
    rate, delay, hops = paths.paths(pairs, n_nodes)
    out = np.empty(size.size)
    for lo in range(0, size.size, IDEAL_SLICE_FLOWS):
        sl = slice(lo, lo + IDEAL_SLICE_FLOWS)
        p = pair_of[sl]
        out[sl] = _ideal_ns(rate[p], delay[p], hops[p], size[sl], mtu_bytes, header_bytes)
    return out if key_of is None else out[key_of]


def _ideal_ns(rate: np.ndarray, delay: np.ndarray, hops: np.ndarray, size: np.ndarray, mtu_bytes: int,
              header_bytes: int) -> np.ndarray:
    """T_ideal, ns, of flows of ``size`` bytes along paths of ``hops`` links of ``rate`` (bit/s) and
    ``delay`` (ns) [flow, hop]."""
    packets = -(-size // mtu_bytes)
    full_bits = (np.minimum(size, mtu_bytes) + header_bytes) * 8.0
    last_bits = np.where(packets > 0, size - (packets - 1) * mtu_bytes + header_bytes, 0) * 8.0
    first = np.zeros(size.size)          # F(1, i), s
    slowest = np.zeros(size.size)        # max_{j <= i} w / r_j, s
    last = np.full(size.size, -np.inf)   # F(P, i), s
    prev_delay = np.zeros(size.size)     # d_{i-1}, s
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
