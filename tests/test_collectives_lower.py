"""Lowering traces into FlowDags: example traces, hand-built traces, algorithm choice, repeat()."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from cosim.collectives import Algorithm, DagOpKind, FlowDag, lower, repeat
from cosim.collectives.algorithms import split_bytes
from cosim.collectives.dag import rank_roots_and_terminals
from cosim.errors import CosimInputError
from cosim.workload.trace import CollKind, GroupKind, OpKind, Trace, read_trace

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "traces").glob("*.h5"))


def check_dag(dag: FlowDag) -> None:
    """Topological order, transfer classification by server, no self-sends, collectives join their flows."""
    owner = dag.dep_owner()
    assert np.all(dag.dep_idx < owner)
    xfer = (dag.kind == DagOpKind.FLOW) | (dag.kind == DagOpKind.NVLINK)
    assert np.all(dag.src[xfer] != dag.dst[xfer]) and np.all(dag.bytes[xfer] > 0)
    same = dag.src // dag.gpus_per_server == dag.dst // dag.gpus_per_server
    assert np.all(same[dag.kind == DagOpKind.NVLINK]) and not np.any(same[dag.kind == DagOpKind.FLOW])
    # each collective's end NOP transitively depends on all of its flows (walk back, stop at its barrier)
    for c in range(dag.n_collectives):
        seen = {int(dag.coll_end_op[c])}
        stack = [int(dag.coll_end_op[c])]
        while stack:
            i = stack.pop()
            for d in dag.deps(i).tolist():
                if d not in seen and dag.coll[d] == c:
                    seen.add(d)
                    stack.append(d)
        mine = np.flatnonzero((dag.coll == c) & xfer)
        assert set(mine.tolist()) <= seen
        assert int(dag.coll_start_op[c]) in seen
        # total bytes of a call: every algorithm moves 2(n−1)·S for all-reduce, (n−1)·S for the others;
        # PXN relays over NVLink on top, its network bytes are direct's
        n = dag.coll_members(c).size
        total = int(dag.bytes[mine].sum())
        factor = 2 if dag.coll_kind[c] == CollKind.ALL_REDUCE else 1
        if dag.coll_algo[c] == Algorithm.PXN:
            k = np.unique(dag.coll_members(c) // dag.gpus_per_server).size
            flow = mine[dag.kind[mine] == DagOpKind.FLOW]
            assert int(dag.bytes[flow].sum()) * k == (k - 1) * n * int(dag.coll_bytes[c])
        else:
            assert total == factor * (n - 1) * int(dag.coll_bytes[c])


@pytest.fixture(scope="module", params=EXAMPLES, ids=[p.stem for p in EXAMPLES])
def example(request):
    return read_trace(request.param)


@pytest.mark.parametrize("gps", [None, 2, 1])
def test_lower_example_traces(example, gps):
    t0 = time.perf_counter()
    dag = lower(example, gpus_per_server=gps)
    dt = time.perf_counter() - t0
    print(f"\nlower gps={gps}: {dag.summary()} in {dt * 1e3:.1f} ms")
    check_dag(dag)
    assert dag.trace_done.size == example.n_ops and np.all(dag.trace_done >= 0)
    assert np.all(dag.trace_start <= dag.trace_done)
    assert dag.n_collectives == np.unique(example.coll_id[example.coll_id >= 0]).size
    # compute ops carry the trace's durations exactly once; the others are collectives' start latencies and
    # the fixed cost of every send (one op of the sending rank before its first chunk)
    ranked = (dag.kind == DagOpKind.COMPUTE) & (dag.rank >= 0)
    send_delay = ranked & (example.kind[np.maximum(dag.trace_op, 0)] == OpKind.SEND)
    comp = ranked & ~send_delay
    assert dag.duration_ns[comp].sum() == example.duration_ns.sum()
    sends = np.flatnonzero((example.kind == OpKind.SEND) & (example.bytes > 0))
    assert np.array_equal(np.sort(dag.trace_op[send_delay]), sends)
    assert np.all(dag.duration_ns[send_delay] >= 6_000)  # NCCL's send never costs less than several µs
    assert np.array_equal(dag.trace_start[sends], np.flatnonzero(send_delay)[np.argsort(dag.trace_op[send_delay])])
    latency = (dag.kind == DagOpKind.COMPUTE) & (dag.rank < 0)
    assert np.all(np.isin(np.flatnonzero(latency), dag.coll_start_op)) and np.all(dag.duration_ns[latency] > 0)
    assert np.array_equal(np.sort(dag.trace_op[comp]), np.flatnonzero(example.kind == OpKind.COMPUTE))
    # every trace dependency is honoured: an op's start waits (directly) for its deps' completion
    owner = np.repeat(np.arange(example.n_ops), np.diff(example.dep_ptr))
    starts = dag.trace_start[owner]
    dones = dag.trace_done[example.dep_idx]
    have = set(zip(dag.dep_owner().tolist(), dag.dep_idx.tolist()))
    assert all((int(s), int(d)) in have for s, d in zip(starts, dones))
    # sends: the flow bytes of a send equal the message size; recvs wait for the send's last chunk
    sends = np.flatnonzero(example.kind == OpKind.SEND)
    sb = np.zeros(example.n_ops, np.int64)
    p2p = xfer_mask(dag) & (dag.coll < 0)
    np.add.at(sb, dag.trace_op[p2p], dag.bytes[p2p])
    assert np.array_equal(sb[sends], example.bytes[sends])
    recvs = np.flatnonzero(example.kind == OpKind.RECV)
    for r in recvs[:20]:
        s = sends[example.match_id[sends] == example.match_id[r]][0]
        assert dag.trace_done[s] in dag.deps(dag.trace_done[r])


def xfer_mask(dag: FlowDag) -> np.ndarray:
    return (dag.kind == DagOpKind.FLOW) | (dag.kind == DagOpKind.NVLINK)


def test_default_choice_is_the_tuners_never_hierarchical(example):
    """auto: NCCL's candidates only (ring/tree, ring, PXN/direct, chain); hierarchical only by name."""
    dag8 = lower(example)  # the example traces are 8 GPUs on one 8-GPU server: everything is NVLink
    assert dag8.summary()["n_flow"] == 0 and dag8.summary()["n_nvlink"] > 0
    dag2 = lower(example, gpus_per_server=2)
    check_dag(dag2)
    allowed = {CollKind.ALL_REDUCE: {Algorithm.RING, Algorithm.TREE}, CollKind.REDUCE_SCATTER: {Algorithm.RING},
               CollKind.ALL_GATHER: {Algorithm.RING}, CollKind.ALL_TO_ALL: {Algorithm.PXN, Algorithm.DIRECT},
               CollKind.BROADCAST: {Algorithm.CHAIN}}
    multi = np.diff(dag2.coll_ranks_ptr) > 1
    for c in np.flatnonzero(multi):
        assert dag2.coll_algo[c] in allowed[CollKind(dag2.coll_kind[c])]
    hier = lower(example, gpus_per_server=2, algorithm="hierarchical")
    def two_level(m):  # several servers, the same number (> 1) of members on each
        _, counts = np.unique(m // 2, return_counts=True)
        return counts.size > 1 and counts.min() == counts.max() > 1
    spans = np.array([two_level(hier.coll_members(c)) for c in range(hier.n_collectives)])
    ar = np.isin(hier.coll_kind, [CollKind.ALL_REDUCE, CollKind.REDUCE_SCATTER, CollKind.ALL_GATHER])
    assert np.array_equal(hier.coll_algo == Algorithm.HIERARCHICAL, spans & ar)


def test_algorithm_override_and_priorities(example):
    dag = lower(example, algorithm={CollKind.ALL_REDUCE: "tree"}, priorities={GroupKind.TP: 3, "dp": 1})
    check_dag(dag)
    multi = np.diff(dag.coll_ranks_ptr) > 1
    ar = dag.coll_kind == CollKind.ALL_REDUCE
    assert np.all(dag.coll_algo[ar & multi] == Algorithm.TREE)
    gk = np.array([example.group_kind[g] for g in dag.coll_group])
    for c in np.flatnonzero(multi)[:30]:
        pr = dag.priority[(dag.coll == c) & xfer_mask(dag)]
        assert np.all(pr == {GroupKind.TP: 3, GroupKind.DP: 1}.get(GroupKind(gk[c]), 0))
    assert np.all(dag.priority[~xfer_mask(dag)] == 0)
    hd = lower(example, algorithm="halving_doubling", gpus_per_server=1)
    check_dag(hd)
    pow2 = (np.diff(hd.coll_ranks_ptr) & (np.diff(hd.coll_ranks_ptr) - 1)) == 0
    assert np.all(hd.coll_algo[ar & multi & pow2] == Algorithm.HALVING_DOUBLING)


def test_bad_algorithm_and_arguments(example):
    for bad in ("rings", {CollKind.ALL_TO_ALL: "ring"}, {"ALL_WRONG": "ring"}, 5):
        with pytest.raises(CosimInputError) as err:
            lower(example, algorithm=bad)
        assert err.value.field == "algorithm"
    with pytest.raises(CosimInputError, match="choose one of auto, ring, tree"):
        lower(example, algorithm="rings")
    with pytest.raises(CosimInputError) as err:
        lower(example, gpus_per_server=0)
    assert err.value.field == "gpus_per_server"
    with pytest.raises(CosimInputError) as err:
        lower(example, priorities={GroupKind.TP: 9})
    assert err.value.field == "priorities"


# --- hand-built traces ----------------------------------------------------------------------------

def make_trace(n_ranks, ops, deps, groups=((),), group_kind=None):
    """ops: list of dicts (rank, kind, ...); deps: list of lists of global op indices."""
    cols = {k: [] for k in ("rank", "kind", "phase", "duration_ns", "flops", "bytes", "coll_kind", "group", "peer",
                            "match_id", "coll_id", "algo_hint", "label", "microbatch", "layer")}
    defaults = dict(phase=0, duration_ns=0, flops=0, bytes=0, coll_kind=0, group=-1, peer=-1, match_id=-1,
                    coll_id=-1, algo_hint=0, label=0, microbatch=0, layer=-1)
    for op in ops:
        for k in cols:
            cols[k].append(op.get(k, defaults.get(k)))
    ptr = np.concatenate([[0], np.cumsum([len(d) for d in deps])])
    idx = [i for d in deps for i in d]
    groups = [list(g) for g in groups if len(g)]
    gptr = np.concatenate([[0], np.cumsum([len(g) for g in groups])]).astype(np.int64)
    return Trace(n_ranks=n_ranks, **cols, dep_ptr=ptr, dep_idx=np.asarray(idx, np.int64), labels=("op",),
                 group_ptr=gptr, group_ranks=np.asarray([r for g in groups for r in g], np.int32),
                 group_kind=group_kind if group_kind is not None else [GroupKind.OTHER] * len(groups))


def test_compute_only_trace_is_a_compute_chain():
    durations = [[100, 250, 50], [10, 20, 30, 40]]
    ops, deps = [], []
    for r, ds in enumerate(durations):
        for j, d in enumerate(ds):
            deps.append([len(ops) - 1] if j else [])
            ops.append(dict(rank=r, kind=OpKind.COMPUTE, duration_ns=d))
    dag = lower(make_trace(2, ops, deps))
    assert dag.n_ops == 7 and np.all(dag.kind == DagOpKind.COMPUTE) and dag.n_collectives == 0
    for r, ds in enumerate(durations):
        mine = np.flatnonzero(dag.rank == r)
        assert dag.duration_ns[mine].sum() == sum(ds)
        # a chain: each op of the rank (in trace order) waits for exactly the previous one
        chain = dag.trace_done[dag.trace_op[mine]]
        order = chain[np.argsort(dag.trace_op[mine])]
        assert dag.deps(order[0]).size == 0
        for a, b in zip(order[:-1], order[1:]):
            assert list(dag.deps(b)) == [a]


def test_send_recv_chunks_and_classification():
    mib = 1 << 20
    ops = [dict(rank=0, kind=OpKind.COMPUTE, duration_ns=5),
           dict(rank=0, kind=OpKind.SEND, bytes=10 * mib, peer=9, match_id=1),
           dict(rank=0, kind=OpKind.SEND, bytes=mib, peer=3, match_id=2),
           dict(rank=3, kind=OpKind.RECV, bytes=mib, peer=0, match_id=2),
           dict(rank=9, kind=OpKind.RECV, bytes=10 * mib, peer=0, match_id=1),
           dict(rank=9, kind=OpKind.COMPUTE, duration_ns=7)]
    deps = [[], [0], [0], [], [], [4]]
    dag = lower(make_trace(10, ops, deps), gpus_per_server=8)
    check_dag(dag)
    flows = np.flatnonzero(dag.kind == DagOpKind.FLOW)
    assert list(dag.bytes[flows]) == [4 * mib, 4 * mib, 2 * mib] and np.all(dag.dst[flows] == 9)
    assert list(dag.deps(flows[1])) == [flows[0]] and list(dag.deps(flows[2])) == [flows[1]]
    # NCCL's fixed cost first: one delay of the sender before the first chunk, longer across servers
    (delay,) = dag.deps(flows[0])
    assert dag.kind[delay] == DagOpKind.COMPUTE and dag.rank[delay] == 0 and dag.trace_start[1] == delay
    assert list(dag.deps(delay)) == [dag.trace_done[0]]
    (nv,) = np.flatnonzero(dag.kind == DagOpKind.NVLINK)
    assert dag.bytes[nv] == mib and dag.dst[nv] == 3
    (nv_delay,) = dag.deps(nv)
    assert 6_000 <= dag.duration_ns[nv_delay] < dag.duration_ns[delay]
    assert dag.trace_done[1] == flows[2] and list(dag.deps(dag.trace_done[4])) == [flows[2]]
    assert list(dag.deps(dag.trace_done[5])) == [dag.trace_done[4]]
    assert list(dag.bytes_sent_per_rank(DagOpKind.FLOW)) == [10 * mib] + [0] * 9
    assert dag.bytes_received_per_rank(DagOpKind.NVLINK)[3] == mib


def all_reduce_trace(n_ranks, size, members=None):
    """Each rank: compute → all-reduce → compute."""
    members = list(range(n_ranks)) if members is None else members
    ops, deps = [], []
    first_coll = None
    for r in range(n_ranks):
        base = len(ops)
        ops.append(dict(rank=r, kind=OpKind.COMPUTE, duration_ns=100 + r))
        deps.append([])
        if r in members:
            first_coll = base + 1 if first_coll is None else first_coll
            ops.append(dict(rank=r, kind=OpKind.COLLECTIVE, bytes=size, coll_kind=CollKind.ALL_REDUCE, group=0,
                            coll_id=first_coll))
            deps.append([base])
            ops.append(dict(rank=r, kind=OpKind.COMPUTE, duration_ns=50))
            deps.append([base + 1])
    return make_trace(n_ranks, ops, deps, groups=(members,), group_kind=[GroupKind.DP])


def test_collective_barrier_and_end():
    tr = all_reduce_trace(4, 4000)
    dag = lower(tr, gpus_per_server=1, chunk_bytes=1000)
    check_dag(dag)
    assert dag.n_collectives == 1 and dag.coll_algo[0] == Algorithm.RING
    start, end = int(dag.coll_start_op[0]), int(dag.coll_end_op[0])
    first_compute = dag.trace_done[np.flatnonzero((tr.kind == OpKind.COMPUTE) & (tr.duration_ns >= 100))]
    assert set(dag.deps(start).tolist()) == set(first_compute.tolist())
    colls = np.flatnonzero(tr.kind == OpKind.COLLECTIVE)
    assert np.all(dag.trace_start[colls] == start) and np.all(dag.trace_done[colls] == end)
    assert np.all(dag.bytes_sent_per_rank(DagOpKind.FLOW) == 2 * 3 * 1000)


def test_single_member_collective_is_barrier_plus_end():
    dag = lower(all_reduce_trace(2, 4000, members=[1]))
    assert dag.n_collectives == 1 and dag.coll_algo[0] == Algorithm.NONE
    assert list(dag.deps(dag.coll_end_op[0])) == [dag.coll_start_op[0]]
    assert not np.any(xfer_mask(dag))


def test_deadlock_is_an_input_error():
    ops = [dict(rank=0, kind=OpKind.RECV, bytes=8, peer=1, match_id=3),
           dict(rank=0, kind=OpKind.SEND, bytes=8, peer=1, match_id=1),
           dict(rank=1, kind=OpKind.RECV, bytes=8, peer=0, match_id=1),
           dict(rank=1, kind=OpKind.SEND, bytes=8, peer=0, match_id=3)]
    with pytest.raises(CosimInputError, match="deadlock"):
        lower(make_trace(2, ops, [[], [0], [], [2]]))


def test_out_of_issue_order_sends_do_not_deadlock():
    # both ranks issue their recv first, but the sends do not depend on the recvs: no deadlock
    ops = [dict(rank=0, kind=OpKind.RECV, bytes=8, peer=1, match_id=3),
           dict(rank=0, kind=OpKind.SEND, bytes=8, peer=1, match_id=1),
           dict(rank=1, kind=OpKind.RECV, bytes=8, peer=0, match_id=1),
           dict(rank=1, kind=OpKind.SEND, bytes=8, peer=0, match_id=3)]
    dag = lower(make_trace(2, ops, [[], [], [], []]), gpus_per_server=1)
    check_dag(dag)
    assert dag.summary()["n_flow"] == 2


# --- repeat ---------------------------------------------------------------------------------------

def test_repeat_chains_iterations(example):
    dag = lower(example, gpus_per_server=2)
    k = 3
    rep = repeat(dag, k)
    n = dag.n_ops
    assert rep.n_iterations == k and rep.n_ops == k * n and rep.n_collectives == k * dag.n_collectives
    assert np.all(rep.dep_idx < rep.dep_owner())  # invariant (also checked on construction)
    assert np.array_equal(rep.iteration, np.repeat(np.arange(k), n))
    assert np.array_equal(rep.trace_done[example.n_ops:2 * example.n_ops], dag.trace_done + n)
    assert np.array_equal(rep.coll_end_op[dag.n_collectives:2 * dag.n_collectives], dag.coll_end_op + n)
    roots = np.flatnonzero(np.diff(dag.dep_ptr) == 0)
    assert np.all(np.diff(rep.dep_ptr)[roots] == 0)  # copy 0 is unchanged at its roots
    root_op, root_rank, term_op, term_rank = rank_roots_and_terminals(dag)
    assert set(roots.tolist()) <= set(root_op.tolist())  # an op without deps is a root of its rank(s)
    for o in np.unique(root_op)[:200]:
        x = rep.deps(n + o)
        x = x[x < n]  # the cross-iteration deps of copy 1
        expect = set(term_op[np.isin(term_rank, root_rank[root_op == o])].tolist())
        assert set(x.tolist()) == expect and expect
        assert np.array_equal(np.sort(rep.deps(2 * n + o)), np.sort(rep.deps(n + o)) + n)
    # physics: each rank begins iteration 1 only after all of its iteration-0 ops finished
    for r in range(dag.n_ranks):
        mine0 = np.flatnonzero((dag.rank == r) & (dag.coll < 0))
        first1 = n + int(mine0.min())
        reach = np.zeros(rep.n_ops, bool)
        reach[first1] = True
        for i in range(first1, -1, -1):
            if reach[i]:
                reach[rep.deps(i)] = True
        assert reach[mine0].all()
    # the iteration as a whole keeps its per-iteration bytes
    assert rep.summary()["flow_bytes"] == k * dag.summary()["flow_bytes"]
    with pytest.raises(CosimInputError):
        repeat(dag, 0)


def test_flowdag_rejects_forward_deps(example):
    dag = lower(example)
    fields = {name: getattr(dag, name) for name in FlowDag.__slots__}
    bad = dag.dep_idx.copy()
    bad[-1] = dag.n_ops - 1
    with pytest.raises(CosimInputError, match="topological"):
        FlowDag(**{**fields, "dep_idx": bad})
    kind = dag.kind.copy()
    kind[np.argmax(kind == DagOpKind.NVLINK)] = DagOpKind.FLOW
    with pytest.raises(CosimInputError, match="FLOW between GPUs of one server"):
        FlowDag(**{**fields, "kind": kind})
    assert not dag.bytes.flags.writeable


def test_split_bytes_exact():
    parts = split_bytes(np.array([10, 7, 0]), 4)
    assert parts.tolist() == [[3, 3, 2, 2], [2, 2, 2, 1], [0, 0, 0, 0]]
