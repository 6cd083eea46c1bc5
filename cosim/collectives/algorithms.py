"""Collective algorithms as point-to-point schedules: one pure, vectorized function per algorithm.

Every function takes the sorted member ranks of a group, the trace's size S (nccl-tests convention, see
:mod:`cosim.workload.trace`) and a chunk size, and returns a :class:`Schedule`: flow arrays (src, dst,
bytes, step) plus the dependencies among those flows as *local* indices (CSR, every dep < its op), the
*entry* flows (they wait for the collective's start barrier) and the *terminal* flows (nothing inside the
collective waits for them; the collective's end waits for them). No Python loop runs per flow: all steps ×
ranks × chunks of one call are generated as arrays at once.

Model
-----
Each algorithm is first written as *transfers* (one message of a step from one rank to another) with
*data dependencies* on earlier transfers (the transfer whose arrival makes the data available at the
sender), or on the start barrier. :func:`_expand` then

1. drops zero-byte transfers (tiny S split n ways) and wires their dependencies through to their dependents,
2. splits a transfer of b bytes into ceil(b / chunk_bytes) chunks (all chunk_bytes, the last smaller),
3. pipelines: chunk c of a transfer depends on chunk c−1 of the same transfer (one sender, one link, chunks
   in order) and, for each data dependency u of the transfer, on the chunk of u by whose arrival the same
   fraction of u's data is in: chunk ceil((c+1)·C_u / C_t) − 1 (that is chunk c when both have C chunks);
   chunk 0 of an entry transfer waits for the start barrier.

Segments: when S is split into n parts, part j holds S//n + (1 if j < S mod n else 0) bytes, so byte totals
are exact; per-rank totals then match the n-divisible formulas below to within one byte per step.

Algorithms and bytes sent per rank (S divisible by n):

- ring reduce-scatter / all-gather: n−1 steps; at step k position p sends segment (p−k) mod n to p+1.
  (n−1)/n·S per rank.
- ring all-reduce = ring reduce-scatter then ring all-gather continuing the same ring (2(n−1) steps; step k
  sends segment (p−k) mod n).
- channel rings (NCCL's rings, for a group on k > 1 servers with the same number g of members on each):
  C channels, each a ring over all n = k·g members carrying its share S/C of the buffer (parts as for
  segments). Channel c is on rail r = c mod g (the g-th lowest member of a server is on rail g): on even
  servers it enters at the member on rail r and walks the rails upwards r, r+1, … r−1 (mod g) over NVLink,
  on odd servers it enters at rail r−1 and walks downwards r−1, r−2, … r, so every server-to-server hop
  joins two members of one rail (GPU i of a server to GPU i of the next); with k odd the hop closing the
  ring joins rail r−1 to rail r. Over C = 2g channels (the default) every member sends on the network
  twice, so the bytes are balanced over the NICs. Per rank 2(n−1)/n·S (all-reduce), (n−1)/n·S (RS, AG). 2(n−1)/n·S per rank. The step-k send of p depends on the step-(k−1) transfer
  into p from its predecessor; step 0 depends only on the barrier.
- double binary tree all-reduce (NCCL): tree 0 is NCCL's btree over positions (parent from the lowest set
  bit), tree 1 is its mirror (n even) or its shift by one (n odd), so a rank that is a leaf of one tree is
  interior in the other. A tree reduces up (a node sends to its parent after its children's data arrived),
  then broadcasts down from the root; every transfer is pipelined in NCCL's chunk of the call's protocol
  (:func:`tree_pipeline_chunk_bytes`), not the transfer chunk. For a group on k > 1 servers with the same
  g members on each (rail-aligned), NCCL's channel trees (:func:`channel_tree_parents`): C channels (as
  many as the rings), channel c on tree c mod 2 across servers, entering every server on rail ⌊c/2⌋ mod g
  and chaining through its members; each carries S/C, so 2(n−1)·S bytes in all. Otherwise the two trees
  over the members, h_0 = ceil(S/2) and h_1 = floor(S/2): a rank sends Σ_t h_t · ([not root of t] +
  children_t(rank)).
- recursive halving-doubling all-reduce (Rabenseifner), n a power of two: log2 n reduce-scatter steps with
  partner p XOR n/2^(k+1), each sending the half of its current range it does not keep (S/2, S/4, … S/n),
  then log2 n all-gather steps with partners p XOR 1, 2, 4, … sending S/n, 2S/n, … S/2.
  2(n−1)/n·S per rank. For n not a power of two it falls back to the ring (the returned algorithm says so).
- direct all-to-all: every rank sends block q (S/n) to every other member q at once. (n−1)/n·S per rank.
- PXN all-to-all (NCCL's PXN, a group on k > 1 servers with the same g > 1 rail-aligned members on each):
  member (s, i) copies over NVLink to each local member (s, j), j ≠ i, the blocks of every destination on
  rail j (its own-server one included); then (s, j) sends to each (t, j), t ≠ s, one flow aggregating the
  blocks of all g local members for it, after the g − 1 copies into (s, j) arrived. Network bytes per rank
  are direct's, (k−1)/k·S, all on the member's own rail; NVLink bytes (g−1)/g·S.
- NVLS all-reduce (NCCL's NVLS: NVLink SHARP, the NVLink switches reduce and multicast), a group inside one
  NVLink domain: member i owns segment i (S/n). Each member j copies segment i of its buffer to the switch
  for every owner i ≠ j — the switch's reduction of segment i, written as j → i transfers of S/n, starting
  at j+1 so that no owner is every sender's first —, then each owner copies its reduced segment once to the
  switch, which multicasts it to every member (one transfer of S/n to the next member, after every
  transfer into the owner). Per member (n−1)/n·S + S/n = S bytes sent over its NVLink, half the ring's
  2(n−1)/n·S: the call takes ≈ S / NVLink rate. Groups on several domains fall back to the ring.
- chain broadcast from the group's first rank: m0 → m1 → … → m(n−1), S per link, pipelined by chunks.
  S per rank except the last member (0).
- hierarchical two-level (NCCL on multi-GPU hosts) for a group spanning k > 1 servers with the same number
  g > 1 of members on each (member j of a server = its j-th lowest member rank):
  all-reduce = intra-server ring reduce-scatter on S (NVLink), inter-server ring all-reduce among the j-th
  members of every server on their shard S/g (FLOW), intra-server ring all-gather on S (NVLink).
  Per rank: NVLink 2(g−1)/g·S, FLOW 2(k−1)/k·S/g.
  reduce-scatter = intra RS on S, then inter ring RS on S/g: NVLink (g−1)/g·S, FLOW (k−1)/k·S/g.
  all-gather = inter ring AG on S/g, then intra AG on S: FLOW (k−1)/k·S/g, NVLink (g−1)/g·S.
  Each phase's first send of a rank depends on the previous phase's last transfer into that rank.
  Groups whose servers hold different member counts, single-server groups and one-GPU-per-server groups
  fall back to the flat ring (the flows are NVLink or FLOW by their endpoints' servers).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from cosim.collectives.protocol import Protocol, tree_chunk_bytes
from cosim.errors import CosimInputError
from cosim.workload.trace import CollKind

_I64 = np.int64


class Algorithm(IntEnum):
    """Lowering algorithm of a collective call (the ``coll_algo`` column of a FlowDag)."""
    NONE = 0              #: single-member group, nothing to send
    RING = 1
    TREE = 2              #: double binary tree (all-reduce)
    HALVING_DOUBLING = 3  #: Rabenseifner (all-reduce, power-of-two groups)
    DIRECT = 4            #: all-to-all, every pair at once
    HIERARCHICAL = 5      #: idealized two-level scheme: intra-server NVLink rings + inter-server ring
    CHAIN = 6             #: pipelined chain broadcast
    PXN = 7               #: all-to-all across rails through the NVLink peer on the destination's rail
    NVLS = 8              #: all-reduce inside one NVLink domain with NVLink SHARP (the switch reduces)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Schedule:
    """Point-to-point flows of one collective call with their local dependencies.

    Flow i sends ``bytes[i]`` (> 0) from rank ``src[i]`` to ``dst[i]`` (≠ src) at algorithm step ``step[i]``;
    it may start once flows ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` (all < i) finished and, if ``entry[i]``,
    once the collective started. The collective is done when every flow with ``terminal[i]`` finished.
    """

    src: np.ndarray       # int32 rank
    dst: np.ndarray       # int32 rank
    bytes: np.ndarray     # int64 payload bytes of the chunk
    step: np.ndarray      # int32 algorithm step of the chunk's transfer
    dep_ptr: np.ndarray   # int64 [n+1]
    dep_idx: np.ndarray   # int64 local flow indices
    entry: np.ndarray     # bool: waits for the start barrier
    terminal: np.ndarray  # bool: the end barrier waits for it (no dependent inside the schedule)

    @property
    def n_ops(self) -> int:
        """Number of flows (chunks)."""
        return int(self.src.size)


@dataclass(frozen=True, slots=True)
class _Transfers:
    """Transfer-level algorithm: edges (owner, dep) with dep = −1 for the start barrier; deps < owners."""
    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    step: np.ndarray
    e_owner: np.ndarray
    e_dep: np.ndarray


def _empty_transfers() -> _Transfers:
    z = np.zeros(0, _I64)
    return _Transfers(z, z, z, z, z, z)


def _concat(parts: list[_Transfers]) -> _Transfers:
    """Concatenate transfer sets; each part's edges are already in global numbering."""
    return _Transfers(*(np.concatenate([getattr(p, f) for p in parts]).astype(_I64)
                        for f in ("src", "dst", "bytes", "step", "e_owner", "e_dep")))


def split_bytes(total_bytes: np.ndarray | int, n: int) -> np.ndarray:
    """Split totals into n parts: part j = total//n + (j < total mod n); shape (..., n), exact sums."""
    total = np.asarray(total_bytes, dtype=_I64)[..., None]
    j = np.arange(n, dtype=_I64)
    return total // n + (j < total % n)


# --- transfer generators ----------------------------------------------------------------------------

def _ring_transfers(rings: np.ndarray, totals: np.ndarray, n_steps: int, shift: int, base: int,
                    prev_into: np.ndarray | None = None) -> tuple[_Transfers, np.ndarray]:
    """R independent rings (rings[R, n] of ranks) on totals[R] bytes, n_steps steps, segment (p+shift−k) mod n.

    ``base`` is the global index of the first transfer (for composing phases); ``prev_into`` [R, n] holds the
    transfer that must arrive at each position before its first send (−1: barrier). Returns (transfers,
    last_into[R, n]: the global index of the last transfer into each position, −1 if none).
    """
    R, n = rings.shape
    if n < 2 or n_steps == 0:
        return _empty_transfers(), np.full((R, n), -1, _I64)
    seg = split_bytes(totals, n)                                            # [R, n]
    k = np.arange(n_steps, dtype=_I64)[:, None, None]
    r = np.arange(R, dtype=_I64)[None, :, None]
    p = np.arange(n, dtype=_I64)[None, None, :]
    shape = (n_steps, R, n)
    idx = base + (k * R + r) * n + p

    def at(kk, pp):
        return base + (kk * R + r) * n + pp

    src = np.broadcast_to(rings[None, :, :], shape)
    dst = np.broadcast_to(np.roll(rings, -1, axis=1)[None, :, :], shape)
    nbytes = seg[r, (p + shift - k) % n]
    # the step-k send of p needs the step-(k−1) transfer into p (from its predecessor p−1)
    dep = np.where(k > 0, at(k - 1, (p - 1) % n), -1)
    dep = np.broadcast_to(dep, shape).copy()
    if prev_into is not None:
        dep[0] = prev_into
    last_into = np.broadcast_to(at(n_steps - 1, (p - 1) % n)[0], (R, n)).astype(_I64)
    t = _Transfers(src.ravel().astype(_I64), dst.ravel().astype(_I64), np.broadcast_to(nbytes, shape).ravel(),
                   np.broadcast_to(k, shape).ravel(), idx.ravel(), dep.ravel())
    return t, last_into


def _ring(members: np.ndarray, size_bytes: int, kind: CollKind) -> _Transfers:
    n = members.size
    steps = {CollKind.ALL_REDUCE: 2 * (n - 1), CollKind.REDUCE_SCATTER: n - 1, CollKind.ALL_GATHER: n - 1}[kind]
    return _ring_transfers(members[None, :].astype(_I64), np.array([size_bytes]), steps, 0, 0)[0]


def tree_parents(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parent position of every position in NCCL's two complementary binary trees (−1 at the roots)."""
    r = np.arange(n, dtype=_I64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= n, r ^ bit, up)
    p0 = up.copy()
    if n:
        p0[0] = -1
    if n % 2:  # odd: shift by one
        role = (r - 1) % n
        p1 = np.where(p0[role] < 0, -1, (p0[role] + 1) % n)
    else:      # even: mirror
        role = n - 1 - r
        p1 = np.where(p0[role] < 0, -1, n - 1 - p0[role])
    return p0, p1


def _depth(parent: np.ndarray) -> np.ndarray:
    d = np.zeros(parent.size, _I64)
    cur = parent.copy()
    while np.any(cur >= 0):
        d += cur >= 0
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
    return d


def _tree_transfers(members: np.ndarray, parent: np.ndarray, h_bytes: int, base: int) -> _Transfers:
    """Reduce up then broadcast down one tree; transfers ordered leaves-up, then root-down."""
    n = members.size
    nonroot = np.flatnonzero(parent >= 0)
    if nonroot.size == 0:
        return _empty_transfers()
    depth = _depth(parent)
    root = int(np.flatnonzero(parent < 0)[0])
    up_nodes = nonroot[np.argsort(-depth[nonroot], kind="stable")]
    down_nodes = nonroot[np.argsort(depth[nonroot], kind="stable")]
    m = nonroot.size
    up_idx = np.full(n, -1, _I64)
    up_idx[up_nodes] = base + np.arange(m)
    down_idx = np.full(n, -1, _I64)
    down_idx[down_nodes] = base + m + np.arange(m)
    n_children = np.bincount(parent[nonroot], minlength=n)
    max_d = int(depth.max())
    # up: a node's send to its parent waits for its children's sends; a leaf's waits for the barrier
    c = nonroot[parent[nonroot] != root]  # children whose parent also sends up
    leaves = up_nodes[n_children[up_nodes] == 0]
    e_o = [up_idx[parent[c]], up_idx[leaves]]
    e_d = [up_idx[c], np.full(leaves.size, -1, _I64)]
    # down: children of the root wait for every up transfer into the root; others for the send into their parent
    rc = nonroot[parent[nonroot] == root]
    e_o += [np.repeat(down_idx[rc], rc.size), down_idx[c]]
    e_d += [np.tile(up_idx[rc], rc.size), down_idx[parent[c]]]
    src = np.concatenate([members[up_nodes], members[parent[down_nodes]]])
    dst = np.concatenate([members[parent[up_nodes]], members[down_nodes]])
    step = np.concatenate([max_d - depth[up_nodes], max_d + depth[down_nodes] - 1])
    return _Transfers(src.astype(_I64), dst.astype(_I64), np.full(2 * m, h_bytes, _I64), step.astype(_I64),
                      np.concatenate(e_o), np.concatenate(e_d))


def _halving_doubling(members: np.ndarray, size_bytes: int) -> _Transfers:
    n = members.size
    L = n.bit_length() - 1
    cum = np.concatenate([[0], np.cumsum(split_bytes(size_bytes, n))])
    p = np.arange(n, dtype=_I64)
    d = np.concatenate([n >> np.arange(1, L + 1), 1 << np.arange(L)]).astype(_I64)  # partner distance per step
    k = np.arange(2 * L, dtype=_I64)[:, None]
    dk = d[:, None]
    partner = p[None, :] ^ dk
    rs = k < L
    # RS: send the half of the current 2d-block range that the partner keeps; AG: send own d-block range
    lo = np.where(rs, (p & ~(2 * dk - 1)) | (partner & dk), p & ~(dk - 1))
    nbytes = cum[lo + dk] - cum[lo]
    idx = k * n + p
    prev_partner = p[None, :] ^ np.concatenate([[0], d[:-1]])[:, None]
    dep = np.where(k > 0, (k - 1) * n + prev_partner, -1)  # the transfer into p at the previous step
    shape = (2 * L, n)
    return _Transfers(np.broadcast_to(members[None, :], shape).ravel().astype(_I64),
                      members[partner].ravel().astype(_I64), nbytes.ravel(), np.broadcast_to(k, shape).ravel(),
                      idx.ravel(), dep.ravel())


def _direct(members: np.ndarray, size_bytes: int) -> _Transfers:
    n = members.size
    blk = split_bytes(size_bytes, n)
    p, q = np.nonzero(~np.eye(n, dtype=bool))
    m = p.size
    return _Transfers(members[p].astype(_I64), members[q].astype(_I64), blk[q], np.zeros(m, _I64),
                      np.arange(m, dtype=_I64), np.full(m, -1, _I64))


def _nvls(members: np.ndarray, size_bytes: int) -> _Transfers:
    """NVLS all-reduce as transfers (module docstring): n(n−1) reduce copies, then n multicast copies."""
    n = members.size
    seg = split_bytes(size_bytes, n)
    d = np.arange(1, n, dtype=_I64)[:, None]           # offset of the owner from the sender, offset-major
    j = np.arange(n, dtype=_I64)[None, :]
    owner = ((j + d) % n).ravel()
    sender = np.broadcast_to(j, (n - 1, n)).ravel()
    m = owner.size
    into = np.argsort(owner, kind="stable").reshape(n, n - 1)  # the reduce copies into each owner
    multicast = m + np.arange(n, dtype=_I64)
    return _Transfers(np.concatenate([members[sender], members]).astype(_I64),
                      np.concatenate([members[owner], np.roll(members, -1)]).astype(_I64),
                      np.concatenate([seg[owner], seg]).astype(_I64),
                      np.concatenate([np.zeros(m, _I64), np.ones(n, _I64)]),
                      np.concatenate([np.arange(m, dtype=_I64), np.repeat(multicast, n - 1)]),
                      np.concatenate([np.full(m, -1, _I64), into.ravel()]))


def _chain(members: np.ndarray, size_bytes: int) -> _Transfers:
    m = members.size - 1
    t = np.arange(m, dtype=_I64)
    return _Transfers(members[:-1].astype(_I64), members[1:].astype(_I64), np.full(m, size_bytes, _I64), t, t,
                      t - 1)


def server_grid(members: np.ndarray, gpus_per_server: int) -> np.ndarray | None:
    """Members as [k servers, g per server] (k > 1, any g ≥ 1, the same g on each server, every column on
    one rail: the same local GPU index on every server), else None."""
    server = members // gpus_per_server
    _, counts = np.unique(server, return_counts=True)
    if counts.size < 2 or np.any(counts != counts[0]):
        return None
    grid = members.reshape(counts.size, int(counts[0])).astype(_I64)
    local = grid % gpus_per_server
    return grid if np.all(local == local[0]) else None


#: fewest bytes of the buffer a channel carries: smaller calls use fewer channels (NCCL lowers its channel
#: count for small messages the same way)
CHANNEL_MIN_BYTES = 64 << 10


def default_channels(grid: np.ndarray | None) -> int:
    """Channels NCCL would open for a group laid out as ``grid``: two per NIC of a server (one if None)."""
    return 1 if grid is None else 2 * int(grid.shape[1])


def channels_used(n_channels: int, size_bytes: int) -> int:
    """Channels a call of ``size_bytes`` uses out of ``n_channels``: each carries ≥ CHANNEL_MIN_BYTES."""
    return int(max(1, min(n_channels, size_bytes // CHANNEL_MIN_BYTES)))


def channel_rings(grid: np.ndarray, n_channels: int) -> np.ndarray:
    """[C, n] rank order of each channel's ring (rail-aligned, alternating direction; module docstring)."""
    k, g = grid.shape
    r = (np.arange(n_channels, dtype=_I64) % g)[:, None]
    j = np.arange(g, dtype=_I64)[None, :]
    up, down = (r + j) % g, (r - 1 - j) % g                       # [C, g] local order on even / odd servers
    s = np.arange(k, dtype=_I64)
    local = np.where((s % 2 == 0)[None, :, None], up[:, None, :], down[:, None, :])  # [C, k, g]
    return grid[s[None, :, None], local].reshape(n_channels, k * g)


def server_layout(members: np.ndarray, gpus_per_server: int) -> np.ndarray | None:
    """Members as a [k servers, g per server] array if hierarchical applies (k > 1, g > 1, equal g), else None."""
    server = members // gpus_per_server
    _, counts = np.unique(server, return_counts=True)
    if counts.size < 2 or counts[0] < 2 or np.any(counts != counts[0]):
        return None
    return members.reshape(counts.size, int(counts[0])).astype(_I64)  # members are sorted: servers contiguous


def _hierarchical(grid: np.ndarray, size_bytes: int, kind: CollKind) -> _Transfers:
    k, g = grid.shape
    seg = split_bytes(size_bytes, g)
    totals = np.full(k, size_bytes, _I64)
    pos = np.arange(k * g).reshape(k, g)  # member positions laid out like grid
    into = np.full(k * g, -1, _I64)       # last transfer into each member so far (−1: only the barrier)
    parts: list[_Transfers] = []
    base = 0

    def phase(intra: bool, tot, steps, shift):
        nonlocal base
        where = pos if intra else pos.T
        t, last = _ring_transfers(grid[where // g, where % g], tot, steps, shift, base, into[where])
        parts.append(t)
        base += t.src.size
        into[where[last >= 0]] = last[last >= 0]

    if kind == CollKind.ALL_REDUCE:
        phase(True, totals, g - 1, 0)                  # intra RS: position j keeps segment (j+1) mod g
        phase(False, np.roll(seg, -1), 2 * (k - 1), 0)  # inter AR among the j-th members on that shard
        phase(True, totals, g - 1, 1)                  # intra AG starting from segment (j+1) mod g
    elif kind == CollKind.REDUCE_SCATTER:
        phase(True, totals, g - 1, 0)
        phase(False, np.roll(seg, -1), k - 1, 0)
    else:  # ALL_GATHER
        phase(False, seg, k - 1, 0)                    # inter AG gathers segment j on the j-th members
        phase(True, totals, g - 1, 0)
    return _concat(parts)


def _channel_ring(grid: np.ndarray, size_bytes: int, kind: CollKind, n_channels: int) -> _Transfers:
    rings = channel_rings(grid, n_channels)
    n = rings.shape[1]
    steps = 2 * (n - 1) if kind == CollKind.ALL_REDUCE else n - 1
    return _ring_transfers(rings, split_bytes(size_bytes, n_channels).ravel(), steps, 0, 0)[0]


def _pxn(grid: np.ndarray, size_bytes: int) -> _Transfers:
    k, g = grid.shape
    blk = split_bytes(size_bytes, k * g).reshape(k, g)  # block of the destination at grid position (t, j)
    # NVLink copies (s, i) → (s, j), i ≠ j: the blocks of every destination on rail j
    s, i, j = np.nonzero(np.broadcast_to(~np.eye(g, dtype=bool), (k, g, g)))
    n_copy = s.size
    copy_idx = np.full((k, g, g), -1, _I64)
    copy_idx[s, i, j] = np.arange(n_copy)
    # network flows (s, j) → (t, j), t ≠ s: the blocks of all g members of s for (t, j)
    fs, ft, fj = np.nonzero(np.broadcast_to(~np.eye(k, dtype=bool)[:, :, None], (k, k, g)))
    n_flow = fs.size
    flow_idx = n_copy + np.arange(n_flow, dtype=_I64)
    into = copy_idx[fs, :, fj]                                # [n_flow, g]: copies into the relay (s, j)
    have = into >= 0
    e_owner = np.repeat(flow_idx, have.sum(axis=1))
    e_dep = into[have]
    return _Transfers(
        np.concatenate([grid[s, i], grid[fs, fj]]), np.concatenate([grid[s, j], grid[ft, fj]]),
        np.concatenate([blk[:, j].sum(axis=0), g * blk[ft, fj]]),
        np.concatenate([np.zeros(n_copy, _I64), np.ones(n_flow, _I64)]),
        np.concatenate([np.arange(n_copy, dtype=_I64), e_owner]),
        np.concatenate([np.full(n_copy, -1, _I64), e_dep]))


# --- chunk expansion --------------------------------------------------------------------------------

def _wire_through_zero(t: _Transfers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop zero-byte transfers: an edge to one is replaced by that transfer's own edges, repeatedly.

    Returns (kept transfer indices, edge owners, edge deps), renumbered to the kept transfers (−1 = barrier).
    """
    n = t.src.size
    zero = t.bytes == 0
    o, d = t.e_owner, t.e_dep
    if not np.any(zero):
        return np.arange(n, dtype=_I64), o, d
    while True:
        bad = (d >= 0) & zero[np.maximum(d, 0)]
        if not np.any(bad):
            break
        order = np.argsort(o, kind="stable")
        os_, ds_ = o[order], d[order]
        ptr = np.searchsorted(os_, np.arange(n + 1))
        cnt = ptr[d[bad] + 1] - ptr[d[bad]]
        new_o = np.repeat(o[bad], cnt)
        start = np.repeat(ptr[d[bad]], cnt)
        within = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        new_d = ds_[start + within]
        o = np.concatenate([o[~bad], new_o])
        d = np.concatenate([d[~bad], new_d])
        key = np.unique(o * (n + 1) + (d + 1))
        o, d = key // (n + 1), key % (n + 1) - 1
    kept = np.flatnonzero(~zero)
    new = np.full(n, -1, _I64)
    new[kept] = np.arange(kept.size)
    keep_edge = ~zero[o]
    o, d = o[keep_edge], d[keep_edge]
    return kept, new[o], np.where(d >= 0, new[np.maximum(d, 0)], -1)


def _expand(t: _Transfers, chunk_bytes: int) -> Schedule:
    """Drop zero-byte transfers, split the rest into chunks and pipeline them (module docstring)."""
    kept, o, d = _wire_through_zero(t)
    b = t.bytes[kept]
    C = -(-b // chunk_bytes)
    first = np.concatenate([[0], np.cumsum(C)]).astype(_I64)
    n = int(first[-1])
    tr = np.repeat(np.arange(kept.size, dtype=_I64), C)
    c = np.arange(n, dtype=_I64) - first[tr]
    nbytes = np.minimum(chunk_bytes, b[tr] - c * chunk_bytes)
    ops = np.arange(n, dtype=_I64)
    # pipeline: chunk c after chunk c−1 of the same transfer
    e_o = [ops[c > 0]]
    e_d = [ops[c > 0] - 1]
    entry = np.zeros(n, bool)
    entry[first[o[d < 0]]] = True
    # data: chunk c of t after chunk ceil((c+1)·C_u/C_t)−1 of u
    data = d >= 0
    do, du = o[data], d[data]
    reps = C[do]
    own = np.repeat(do, reps)
    dep = np.repeat(du, reps)
    cc = np.arange(reps.sum(), dtype=_I64) - np.repeat(np.cumsum(reps) - reps, reps)
    uc = -(-((cc + 1) * C[dep]) // C[own]) - 1
    e_o.append(first[own] + cc)
    e_d.append(first[dep] + uc)
    eo, ed = np.concatenate(e_o), np.concatenate(e_d)
    order = np.argsort(eo, kind="stable")
    dep_ptr = np.concatenate([[0], np.cumsum(np.bincount(eo, minlength=n))]).astype(_I64)
    terminal = np.bincount(ed, minlength=n) == 0
    sched = Schedule(src=t.src[kept][tr].astype(np.int32), dst=t.dst[kept][tr].astype(np.int32),
                     bytes=nbytes.astype(_I64), step=t.step[kept][tr].astype(np.int32), dep_ptr=dep_ptr,
                     dep_idx=ed[order].astype(_I64), entry=entry, terminal=terminal)
    for name in Schedule.__slots__:
        getattr(sched, name).flags.writeable = False
    return sched


# --- public algorithms ------------------------------------------------------------------------------

def _members(members) -> np.ndarray:
    m = np.asarray(members, dtype=_I64)
    if m.ndim != 1 or m.size == 0 or np.any(np.diff(m) <= 0):
        raise CosimInputError("members", "must be a non-empty, strictly increasing array of ranks")
    return m


def _check(size_bytes: int, chunk_bytes: int) -> None:
    if size_bytes < 0:
        raise CosimInputError("size_bytes", f"must be >= 0, got {size_bytes}")
    if chunk_bytes < 1:
        raise CosimInputError("chunk_bytes", f"must be >= 1, got {chunk_bytes}")


def ring_reduce_scatter(members, size_bytes: int, chunk_bytes: int = 4 << 20) -> Schedule:
    """Ring reduce-scatter of an S-byte input: n−1 steps of S/n to the ring successor."""
    _check(size_bytes, chunk_bytes)
    return _expand(_ring(_members(members), size_bytes, CollKind.REDUCE_SCATTER), chunk_bytes)


def ring_all_gather(members, size_bytes: int, chunk_bytes: int = 4 << 20) -> Schedule:
    """Ring all-gather of an S-byte output: n−1 steps of S/n to the ring successor."""
    _check(size_bytes, chunk_bytes)
    return _expand(_ring(_members(members), size_bytes, CollKind.ALL_GATHER), chunk_bytes)


def ring_all_reduce(members, size_bytes: int, chunk_bytes: int = 4 << 20) -> Schedule:
    """Ring all-reduce: reduce-scatter then all-gather, 2(n−1) steps of S/n."""
    _check(size_bytes, chunk_bytes)
    return _expand(_ring(_members(members), size_bytes, CollKind.ALL_REDUCE), chunk_bytes)


def channel_tree_parents(k: int, g: int, n_channels: int) -> np.ndarray:
    """[C, k·g] parent position of every position (s·g + j of a [k, g] grid) in each channel's tree; −1 at
    the root. NCCL's trees: channel c follows tree c mod 2 of the double binary tree across servers
    (:func:`tree_parents` of k) and enters every server at the member on rail r = ⌊c/2⌋ mod g, the parent
    of the server's head being the parent server's head (one rail: a NIC to the same NIC). Inside a server
    a chain runs from the head through the rails r+1, r+2, … (tree 0) or r−1, r−2, … (tree 1) mod g, so
    the two trees of a rail use different NVLink neighbours and 2g channels put two on every NIC."""
    node_parent = np.stack(tree_parents(k))                      # [2, k]
    c = np.arange(n_channels, dtype=_I64)[:, None, None]
    s = np.arange(k, dtype=_I64)[None, :, None]
    i = np.arange(g, dtype=_I64)[None, None, :]                  # chain position: 0 is the head
    r = (c // 2) % g
    direction = np.where(c % 2 == 0, 1, -1)
    local = (r + direction * i) % g                              # rail of chain position i
    up = node_parent[c % 2, s]
    head_parent = np.where(up >= 0, up * g + r, -1)
    chain_parent = s * g + (r + direction * (i - 1)) % g
    parent_of_pos = np.where(i == 0, head_parent, chain_parent)  # [C, k, g] by chain position
    shape = (n_channels, k, g)
    out = np.empty((n_channels, k * g), _I64)
    out[np.broadcast_to(c, shape), np.broadcast_to(s * g + local, shape)] = np.broadcast_to(parent_of_pos, shape)
    return out


def node_tree_parents(k: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """The trees of the first two channels of :func:`channel_tree_parents` (both enter servers on rail 0)."""
    p = channel_tree_parents(k, g, 2)
    return p[0], p[1]


def tree_depth(parent: np.ndarray) -> int:
    """Hops from the deepest position to the root of a tree given by its parents."""
    return int(_depth(np.asarray(parent, _I64)).max(initial=0))


#: most pipeline chunks a tree transfer is cut into: beyond it a call's chunks grow with its size (the
#: pipeline's fill then costs at most depth/64 of the call, and the DAG stays linear in the tree's edges)
TREE_MAX_CHUNKS = 64


def tree_pipeline_bytes(step_bytes: int, channel_bytes: int) -> int:
    """Chunk of a tree channel's transfers: NCCL's protocol step, or larger so that a transfer of
    ``channel_bytes`` is cut into at most :data:`TREE_MAX_CHUNKS` chunks."""
    return max(1, int(step_bytes), -(-int(channel_bytes) // TREE_MAX_CHUNKS))


def tree_all_reduce(members, size_bytes: int, chunk_bytes: int = 4 << 20, *,
                    gpus_per_server: int | None = None, n_channels: int | None = None) -> Schedule:
    """NCCL double binary tree all-reduce: each tree reduces up and broadcasts down its share of S, its
    transfers pipelined in chunks of ``chunk_bytes`` (NCCL's protocol step: :func:`cosim.collectives.protocol.
    tree_chunk_bytes`). With ``gpus_per_server`` and a group on several servers with the same g members on
    each (rail-aligned), NCCL's channel trees (:func:`channel_tree_parents`): ``n_channels`` of them
    (default two per NIC, fewer for small calls: :func:`channels_used`), each on its share of S. Otherwise
    the two trees of :func:`tree_parents` over the members, each on half of S."""
    _check(size_bytes, chunk_bytes)
    m = _members(members)
    grid = server_grid(m, gpus_per_server) if gpus_per_server else None
    if grid is None:
        p0, p1 = tree_parents(m.size)
        t0 = _tree_transfers(m, p0, (size_bytes + 1) // 2, 0)
        t1 = _tree_transfers(m, p1, size_bytes // 2, t0.src.size)
        return _expand(_concat([t0, t1]), chunk_bytes)
    nch = tree_channels(grid, size_bytes, n_channels)
    parents = channel_tree_parents(*grid.shape, nch)
    shares = split_bytes(size_bytes, nch).ravel()
    flat = grid.ravel()
    parts, base = [], 0
    for c in range(nch):
        t = _tree_transfers(flat, parents[c], int(shares[c]), base)
        parts.append(t)
        base += t.src.size
    return _expand(_concat(parts), chunk_bytes)


def tree_pipeline_chunk_bytes(members, size_bytes: int, gpus_per_server: int | None, protocol: Protocol,
                              n_channels: int | None = None) -> int:
    """The chunk a tree all-reduce of ``size_bytes`` on ``members`` is pipelined in under ``protocol``:
    NCCL's tree chunk for the channels and depth of the trees :func:`tree_all_reduce` builds, at most
    :data:`TREE_MAX_CHUNKS` per transfer (:func:`tree_pipeline_bytes`)."""
    m = _members(members)
    grid = server_grid(m, gpus_per_server) if gpus_per_server else None
    nch = tree_channels(grid, size_bytes, n_channels)
    if grid is None:
        k, g, depth = m.size, 1, tree_depth(tree_parents(m.size)[0])
    else:
        (k, g), depth = grid.shape, tree_depth(channel_tree_parents(*grid.shape, 1)[0])
    step = tree_chunk_bytes(protocol, size_bytes, nch, depth, k, g)
    return tree_pipeline_bytes(step, -(-int(size_bytes) // nch))


def tree_channels(grid: np.ndarray | None, size_bytes: int, n_channels: int | None = None) -> int:
    """Channels a tree all-reduce of ``size_bytes`` uses on a group laid out as ``grid`` (None: the two
    trees over the members)."""
    if grid is None:
        return 2
    return channels_used(default_channels(grid) if n_channels is None else _positive(n_channels), size_bytes)


def halving_doubling_all_reduce(members, size_bytes: int, chunk_bytes: int = 4 << 20) -> Schedule:
    """Rabenseifner all-reduce (recursive halving RS + recursive doubling AG); ring if n is not a power of 2."""
    _check(size_bytes, chunk_bytes)
    m = _members(members)
    if m.size & (m.size - 1):
        return _expand(_ring(m, size_bytes, CollKind.ALL_REDUCE), chunk_bytes)
    return _expand(_halving_doubling(m, size_bytes) if m.size > 1 else _empty_transfers(), chunk_bytes)


def direct_all_to_all(members, size_bytes: int, chunk_bytes: int = 4 << 20) -> Schedule:
    """Direct all-to-all: every member sends S/n to every other member, all at once."""
    _check(size_bytes, chunk_bytes)
    return _expand(_direct(_members(members), size_bytes), chunk_bytes)


def nvls_all_reduce(members, size_bytes: int, chunk_bytes: int = 4 << 20, *, gpus_per_server: int) -> Schedule:
    """NVLS all-reduce inside one NVLink domain (module docstring); the flat ring when the group spans
    several domains (``gpus_per_server`` GPUs each)."""
    _check(size_bytes, chunk_bytes)
    m = _members(members)
    if not nvls_applies(m, gpus_per_server):
        return _expand(_ring(m, size_bytes, CollKind.ALL_REDUCE), chunk_bytes)
    return _expand(_nvls(m, size_bytes), chunk_bytes)


def nvls_applies(members, gpus_per_server: int) -> bool:
    """True if NVLS can run this group: two or more members, all in one NVLink domain."""
    m = _members(members)
    return m.size > 1 and int(m[0]) // gpus_per_server == int(m[-1]) // gpus_per_server


def chain_broadcast(members, size_bytes: int, chunk_bytes: int = 4 << 20) -> Schedule:
    """Pipelined chain broadcast of S bytes from the first member along the sorted members."""
    _check(size_bytes, chunk_bytes)
    return _expand(_chain(_members(members), size_bytes), chunk_bytes)


def hierarchical(kind: CollKind, members, size_bytes: int, chunk_bytes: int = 4 << 20, *,
                 gpus_per_server: int) -> Schedule:
    """Two-level all-reduce / reduce-scatter / all-gather (NVLink rings inside servers, FLOW rings across);
    the flat ring when the group's server layout does not qualify (module docstring)."""
    _check(size_bytes, chunk_bytes)
    kind = CollKind(kind)
    if kind not in (CollKind.ALL_REDUCE, CollKind.REDUCE_SCATTER, CollKind.ALL_GATHER):
        raise CosimInputError("kind", f"hierarchical lowers all-reduce, reduce-scatter and all-gather, not {kind.name}")
    m = _members(members)
    grid = server_layout(m, gpus_per_server)
    if grid is None:
        return _expand(_ring(m, size_bytes, kind), chunk_bytes)
    return _expand(_hierarchical(grid, size_bytes, kind), chunk_bytes)


def channel_ring(kind: CollKind, members, size_bytes: int, chunk_bytes: int = 4 << 20, *, gpus_per_server: int,
                 n_channels: int | None = None) -> Schedule:
    """NCCL's rings: ``n_channels`` rail-aligned rings (default two per NIC of a server), each on its share
    of S; the flat ring when the group is on one server or its servers are not laid out alike."""
    _check(size_bytes, chunk_bytes)
    kind = CollKind(kind)
    m = _members(members)
    grid = server_grid(m, gpus_per_server)
    if grid is None:
        return _expand(_ring(m, size_bytes, kind), chunk_bytes)
    nch = channels_used(default_channels(grid) if n_channels is None else _positive(n_channels), size_bytes)
    return _expand(_channel_ring(grid, size_bytes, kind, nch), chunk_bytes)


def pxn_all_to_all(members, size_bytes: int, chunk_bytes: int = 4 << 20, *, gpus_per_server: int) -> Schedule:
    """PXN all-to-all (module docstring); direct when the group's layout does not qualify."""
    _check(size_bytes, chunk_bytes)
    m = _members(members)
    grid = server_grid(m, gpus_per_server)
    if grid is None or grid.shape[1] < 2:
        return _expand(_direct(m, size_bytes), chunk_bytes)
    return _expand(_pxn(grid, size_bytes), chunk_bytes)


def pxn_applies(members, gpus_per_server: int) -> bool:
    """True if PXN changes anything for this group: several servers, the same g > 1 rail-aligned members."""
    grid = server_grid(_members(members), gpus_per_server)
    return grid is not None and grid.shape[1] > 1


def _positive(n_channels) -> int:
    if isinstance(n_channels, bool) or not isinstance(n_channels, (int, np.integer)) or n_channels < 1:
        raise CosimInputError("n_channels", f"must be an integer >= 1, got {n_channels!r}")
    return int(n_channels)


#: algorithms each collective kind accepts (besides "auto")
SUPPORTED: dict[CollKind, tuple[Algorithm, ...]] = {
    CollKind.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.HALVING_DOUBLING, Algorithm.HIERARCHICAL,
                          Algorithm.NVLS),
    CollKind.REDUCE_SCATTER: (Algorithm.RING, Algorithm.HIERARCHICAL),
    CollKind.ALL_GATHER: (Algorithm.RING, Algorithm.HIERARCHICAL),
    CollKind.ALL_TO_ALL: (Algorithm.DIRECT, Algorithm.PXN),
    CollKind.BROADCAST: (Algorithm.CHAIN,),
}


def schedule(kind: CollKind, algorithm: Algorithm, members, size_bytes: int, chunk_bytes: int,
             gpus_per_server: int, n_channels: int | None = None,
             protocol: Protocol = Protocol.SIMPLE) -> tuple[Algorithm, Schedule]:
    """Lower one collective call with ``algorithm``; returns the algorithm actually used (after fallbacks).

    ``n_channels`` is the number of rings (or trees) of a RING (TREE) call across servers (default: two per
    NIC of a server); a TREE call is pipelined in NCCL's chunk of ``protocol`` (at most ``chunk_bytes``).
    """
    kind, algorithm = CollKind(kind), Algorithm(algorithm)
    m = _members(members)
    if m.size == 1:
        return Algorithm.NONE, _expand(_empty_transfers(), max(chunk_bytes, 1))
    if algorithm not in SUPPORTED.get(kind, ()):
        raise CosimInputError("algorithm", f"{algorithm.name.lower()} cannot lower {kind.name}")
    if algorithm == Algorithm.HIERARCHICAL:
        if server_layout(m, gpus_per_server) is None:
            algorithm = Algorithm.RING
        return algorithm, hierarchical(kind, m, size_bytes, chunk_bytes, gpus_per_server=gpus_per_server)
    if algorithm == Algorithm.HALVING_DOUBLING:
        used = Algorithm.RING if m.size & (m.size - 1) else algorithm
        return used, halving_doubling_all_reduce(m, size_bytes, chunk_bytes)
    if algorithm == Algorithm.NVLS:
        used = algorithm if nvls_applies(m, gpus_per_server) else Algorithm.RING
        return used, nvls_all_reduce(m, size_bytes, chunk_bytes, gpus_per_server=gpus_per_server)
    if algorithm == Algorithm.PXN:
        used = algorithm if pxn_applies(m, gpus_per_server) else Algorithm.DIRECT
        return used, pxn_all_to_all(m, size_bytes, chunk_bytes, gpus_per_server=gpus_per_server)
    if algorithm == Algorithm.TREE:
        chunk = min(chunk_bytes, tree_pipeline_chunk_bytes(m, size_bytes, gpus_per_server, protocol, n_channels))
        return algorithm, tree_all_reduce(m, size_bytes, chunk, gpus_per_server=gpus_per_server,
                                          n_channels=n_channels)
    fn = {Algorithm.DIRECT: direct_all_to_all, Algorithm.CHAIN: chain_broadcast}
    if algorithm in fn:
        return algorithm, fn[algorithm](m, size_bytes, chunk_bytes)
    return algorithm, channel_ring(kind, m, size_bytes, chunk_bytes, gpus_per_server=gpus_per_server,
                                   n_channels=n_channels)
