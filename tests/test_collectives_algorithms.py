"""Collective algorithms: bytes per rank follow each algorithm's formula, every byte flows, DAG structure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.collectives import algorithms as A
from cosim.collectives.algorithms import Algorithm, Schedule
from cosim.errors import CosimInputError
from cosim.workload.trace import CollKind

SETTINGS = settings(max_examples=40, deadline=None, database=None)  # no .hypothesis dir in the repo


def sent(s: Schedule, ranks: np.ndarray, mask=None) -> np.ndarray:
    """Bytes sent per member rank (optionally only flows in ``mask``)."""
    m = np.ones(s.n_ops, bool) if mask is None else mask
    out = np.zeros(int(ranks.max()) + 1, np.int64)
    np.add.at(out, s.src[m], s.bytes[m])
    return out[ranks]


def received(s: Schedule, ranks: np.ndarray) -> np.ndarray:
    out = np.zeros(int(ranks.max()) + 1, np.int64)
    np.add.at(out, s.dst, s.bytes)
    return out[ranks]


def check_structure(s: Schedule, members: np.ndarray, chunk_bytes: int) -> None:
    """Deps are earlier flows; no self-sends or empty flows; every flow reaches a terminal; chunks ≤ chunk."""
    n = s.n_ops
    owner = np.repeat(np.arange(n), np.diff(s.dep_ptr))
    assert np.all(s.dep_idx < owner) and np.all(s.dep_idx >= 0)
    assert np.all(s.src != s.dst) and np.all(s.bytes > 0) and np.all(s.bytes <= chunk_bytes)
    assert np.all(np.isin(s.src, members)) and np.all(np.isin(s.dst, members))
    if n == 0:
        return
    # a flow without deps must be an entry (otherwise it could start before the collective)
    assert np.all(s.entry[np.diff(s.dep_ptr) == 0])
    # reverse reachability from the terminals (the end barrier) covers every flow
    reach = s.terminal.copy()
    for i in range(n - 1, -1, -1):  # deps are < i, so one backward sweep propagates everything
        if reach[i]:
            reach[s.dep_idx[s.dep_ptr[i]:s.dep_ptr[i + 1]]] = True
    assert reach.all()
    # forward reachability from the entries (the start barrier) covers every flow
    fwd = s.entry.copy()
    for i in range(n):
        if not fwd[i]:
            fwd[i] = fwd[s.dep_idx[s.dep_ptr[i]:s.dep_ptr[i + 1]]].any()
    assert fwd.all()


sizes = st.integers(min_value=0, max_value=5_000_000)
ns = st.integers(min_value=1, max_value=12)
chunks = st.integers(min_value=1, max_value=40)  # chunk = ceil(S / k): at most ~k chunks per transfer


def chunk_of(size: int, k: int) -> int:
    return max(1, -(-size // k))


@SETTINGS
@given(n=ns, size=sizes, k=chunks, offset=st.integers(0, 5))
def test_ring_bytes_per_rank(n, size, k, offset):
    members = np.arange(n) * 3 + offset  # arbitrary, sorted ranks
    cb = chunk_of(size, k)
    seg = A.split_bytes(size, n)
    for fn, steps in ((A.ring_all_reduce, 2 * (n - 1)), (A.ring_reduce_scatter, n - 1), (A.ring_all_gather, n - 1)):
        s = fn(members, size, cb)
        check_structure(s, members, cb)
        per = sent(s, members)
        assert per.sum() == steps * size  # every segment crosses `steps` links
        # per step a rank sends one segment: within one byte per step of steps/n·S
        assert np.all(np.abs(per * n - steps * size) <= steps * n)
        if size % n == 0:
            assert np.all(per == steps * size // n)
        if n > 1:
            assert set(np.unique(s.step)) <= set(range(steps))
    # reduce-scatter: rank p sends every segment but the one it ends up owning ((p+1) mod n)
    s = A.ring_reduce_scatter(members, size, cb)
    owned = seg[(np.arange(n) + 1) % n]
    if n > 1:
        assert np.array_equal(sent(s, members), size - owned)
        assert np.array_equal(received(s, members), size - seg)


@SETTINGS
@given(n=st.integers(2, 10), size=sizes, k=chunks)
def test_reduce_scatter_chunks_sum_to_step_bytes(n, size, k):
    members = np.arange(n)
    cb = chunk_of(size, k)
    s = A.ring_reduce_scatter(members, size, cb)
    seg = A.split_bytes(size, n)
    # group chunks by (step, sender): their sum is the segment (p − k) mod n, split in ceil(b / chunk) chunks
    key = s.step.astype(np.int64) * n + s.src
    total = np.bincount(key, weights=s.bytes, minlength=(n - 1) * n).astype(np.int64)
    count = np.bincount(key, minlength=(n - 1) * n)
    kk, p = np.divmod(np.arange((n - 1) * n), n)
    expect = seg[(p - kk) % n]
    assert np.array_equal(total, expect)
    assert np.array_equal(count, -(-expect // cb))
    # ring: every flow goes to the successor
    assert np.all(s.dst == (s.src + 1) % n)


def test_ring_step_depends_on_transfer_into_sender():
    n, size, cb = 4, 4000, 1000  # one chunk per step
    s = A.ring_all_reduce(np.arange(n), size, cb)
    assert s.n_ops == 2 * (n - 1) * n
    for i in range(s.n_ops):
        deps = s.dep_idx[s.dep_ptr[i]:s.dep_ptr[i + 1]]
        if s.step[i] == 0:
            assert deps.size == 0 and s.entry[i]
        else:
            (d,) = deps
            assert s.step[d] == s.step[i] - 1 and s.dst[d] == s.src[i]


def test_pipelined_chunks_follow_previous_chunk_and_previous_step():
    s = A.ring_all_gather(np.arange(3), 3 * 2500, 1000)  # 3 chunks per step: 1000, 1000, 500
    assert list(s.bytes[:3]) == [1000, 1000, 500]
    for i in range(s.n_ops):
        deps = set(s.dep_idx[s.dep_ptr[i]:s.dep_ptr[i + 1]].tolist())
        c = i % 3
        exp = set()
        if c:
            exp.add(i - 1)
        if s.step[i]:
            exp |= {j for j in range(s.n_ops) if s.step[j] == s.step[i] - 1 and s.dst[j] == s.src[i] and j % 3 == c}
        assert deps == exp


@SETTINGS
@given(n=st.integers(1, 17), size=sizes, k=chunks)
def test_double_binary_tree_bytes(n, size, k):
    members = np.arange(n) + 2
    cb = chunk_of(size, k)
    s = A.tree_all_reduce(members, size, cb)
    check_structure(s, members, cb)
    p0, p1 = A.tree_parents(n)
    h = ((size + 1) // 2, size // 2)
    expect = np.zeros(n, np.int64)
    for par, hb in zip((p0, p1), h):
        assert (par < 0).sum() == 1  # one root
        assert np.all(np.bincount(par[par >= 0], minlength=n) <= 2)  # binary
        # every node reaches the root
        cur, steps = np.arange(n), 0
        while np.any(cur >= 0) and steps <= n:
            cur = np.where(cur >= 0, par[np.maximum(cur, 0)], -1)
            steps += 1
        assert np.all(cur < 0)
        # formula: a rank sends h up once (unless root) and h down to each child
        expect += hb * ((par >= 0).astype(np.int64) + np.bincount(par[par >= 0], minlength=n))
    assert np.array_equal(sent(s, members), expect)
    assert sent(s, members).sum() == 2 * (n - 1) * size
    if n % 2 == 0 and n > 1:  # complementary trees: no rank is interior in both
        inner0 = np.bincount(p0[p0 >= 0], minlength=n) > 0
        inner1 = np.bincount(p1[p1 >= 0], minlength=n) > 0
        assert not np.any(inner0 & inner1)


@SETTINGS
@given(log_n=st.integers(0, 4), q=st.integers(0, 20_000), k=chunks)
def test_halving_doubling_bytes_power_of_two(log_n, q, k):
    n = 1 << log_n
    size = q * n
    members = np.arange(n) * 2
    cb = chunk_of(size, k)
    used, s = A.schedule(CollKind.ALL_REDUCE, Algorithm.HALVING_DOUBLING, members, size, cb, 8)
    assert used == (Algorithm.HALVING_DOUBLING if n > 1 else Algorithm.NONE)
    check_structure(s, members, cb)
    assert np.all(sent(s, members) == 2 * (n - 1) * size // n)
    if n > 1 and size > 0:
        # partners differ in one bit; 2·log2(n) steps
        assert np.all(np.isin(np.bitwise_xor(s.src // 2, s.dst // 2), 1 << np.arange(log_n)))
        assert s.step.max() == 2 * log_n - 1


def test_halving_doubling_falls_back_to_ring():
    used, s = A.schedule(CollKind.ALL_REDUCE, Algorithm.HALVING_DOUBLING, np.arange(6), 6000, 1 << 20, 8)
    assert used == Algorithm.RING
    assert np.all(sent(s, np.arange(6)) == 2 * 5 * 1000)


@SETTINGS
@given(n=ns, size=sizes, k=chunks)
def test_direct_all_to_all_bytes(n, size, k):
    members = np.arange(n) * 5
    cb = chunk_of(size, k)
    s = A.direct_all_to_all(members, size, cb)
    check_structure(s, members, cb)
    blk = A.split_bytes(size, n)
    assert np.array_equal(sent(s, members), size - blk)  # S/n to each member but itself
    assert np.array_equal(received(s, members), (n - 1) * blk)
    if size % n == 0:
        assert np.all(sent(s, members) == (n - 1) * size // n)
    assert np.all(s.entry[np.diff(s.dep_ptr) == 0])
    # all pairs in parallel: only chunk-order deps, between flows of one pair
    owner = np.repeat(np.arange(s.n_ops), np.diff(s.dep_ptr))
    assert np.all((s.src[owner] == s.src[s.dep_idx]) & (s.dst[owner] == s.dst[s.dep_idx]))


@SETTINGS
@given(n=ns, size=sizes, k=chunks)
def test_chain_broadcast_bytes(n, size, k):
    members = np.arange(n) + 1
    cb = chunk_of(size, k)
    s = A.chain_broadcast(members, size, cb)
    check_structure(s, members, cb)
    exp_sent = np.full(n, size)
    exp_sent[-1] = 0
    exp_recv = np.full(n, size)
    exp_recv[0] = 0
    assert np.array_equal(sent(s, members), exp_sent) and np.array_equal(received(s, members), exp_recv)


@SETTINGS
@given(k_srv=st.integers(2, 4), g=st.integers(2, 4), gps_extra=st.integers(0, 2), q=st.integers(0, 3000),
       kc=chunks, kind=st.sampled_from([CollKind.ALL_REDUCE, CollKind.REDUCE_SCATTER, CollKind.ALL_GATHER]))
def test_hierarchical_nvlink_and_flow_bytes(k_srv, g, gps_extra, q, kc, kind):
    gps = g + gps_extra  # servers may hold GPUs outside the group
    members = (np.arange(k_srv)[:, None] * gps + np.arange(g)[None, :]).ravel()
    n = members.size
    size = q * n
    cb = chunk_of(size, kc)
    used, s = A.schedule(kind, Algorithm.HIERARCHICAL, members, size, cb, gps)
    assert used == Algorithm.HIERARCHICAL
    check_structure(s, members, cb)
    nvl = s.src // gps == s.dst // gps
    factor = 2 if kind == CollKind.ALL_REDUCE else 1
    assert np.all(sent(s, members, nvl) == factor * (g - 1) * size // g)
    assert np.all(sent(s, members, ~nvl) == factor * (k_srv - 1) * (size // g) // k_srv)
    # inter-server flows connect GPUs of the same local index
    assert np.all(s.src[~nvl] % gps == s.dst[~nvl] % gps)
    # same total traffic as the flat ring
    assert sent(s, members).sum() == factor * (n - 1) * size


def test_hierarchical_falls_back_to_ring_for_uneven_or_flat_groups():
    for members, gps in ((np.array([0, 1, 2, 8, 9]), 8), (np.arange(4), 8), (np.array([0, 8, 16]), 8)):
        used, s = A.schedule(CollKind.ALL_REDUCE, Algorithm.HIERARCHICAL, members, 1000, 1 << 20, gps)
        assert used == Algorithm.RING
        assert sent(s, members).sum() == 2 * (members.size - 1) * 1000


def test_tiny_sizes_drop_zero_byte_flows_and_keep_the_dag_connected():
    members = np.arange(8)
    for fn in (A.ring_all_reduce, A.ring_reduce_scatter, A.tree_all_reduce, A.direct_all_to_all,
               A.halving_doubling_all_reduce):
        for size in (0, 1, 3, 7):
            s = fn(members, size, 1)
            check_structure(s, members, 1)
            assert np.all(s.bytes == 1)
    assert A.ring_all_reduce(members, 0).n_ops == 0


def test_bad_inputs():
    with pytest.raises(CosimInputError, match="members"):
        A.ring_all_reduce(np.array([3, 1]), 10)
    with pytest.raises(CosimInputError, match="chunk_bytes"):
        A.ring_all_reduce(np.arange(2), 10, 0)
    with pytest.raises(CosimInputError, match="algorithm"):
        A.schedule(CollKind.ALL_TO_ALL, Algorithm.RING, np.arange(4), 10, 10, 8)


def test_large_collective_is_vectorized():
    import time
    t0 = time.perf_counter()
    s = A.ring_all_reduce(np.arange(64), 1 << 30, 4 << 20)  # 126 steps × 64 ranks × 4 chunks
    dt = time.perf_counter() - t0
    assert s.n_ops == 126 * 64 * 4
    print(f"ring all-reduce 64 ranks, 1 GiB: {s.n_ops} flows in {dt * 1e3:.1f} ms")
