"""BLOCK ops (issue 29's compact DAG): a BLOCK op runs its template's NVLink copies and flows ("subs") exactly
as NVLINK and FLOW ops in its place would run. Every test runs a compact DAG and its materialized twin (each
block's subs as NVLINK or FLOW ops at the block's index, the ops after it shifted) in the real engine and asserts
the same simulation: every other op's start and finish to the picosecond, the block spanning its subs, the same
flows (a sub's flow naming its block and sub), port statistics, counters and number of events."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cosim import engine
from cosim.collectives.dag import BlockTemplates, DagOpKind
from cosim.errors import CosimInputError
from cosim.network import topology

FLOW, COMPUTE, NVLINK, NOP, BLOCK = (int(k) for k in (DagOpKind.FLOW, DagOpKind.COMPUTE, DagOpKind.NVLINK,
                                                      DagOpKind.NOP, DagOpKind.BLOCK))
SERVER_A, SERVER_B = (0, 1, 2, 3), (4, 5, 6, 7)  # host node ids of a single-switch fabric, 4 GPUs a server


@dataclasses.dataclass
class Template:
    """One template: per sub (local order) its GPU, bytes, extra ns and local deps, and its receiving GPU (None:
    every sub is a copy on its GPU's server; a receiver on another server makes the sub a FLOW)."""

    gpu: list[int]
    bytes: list[int]
    duration_ns: list[int]
    deps: list[list[int]]
    dst: list[int] | None = None

    def receiver(self, s: int) -> int:
        return self.gpu[s] if self.dst is None else self.dst[s]

    def is_flow(self, s: int) -> bool:
        return self.receiver(s) // 4 != self.gpu[s] // 4  # 4 GPUs a server (SERVER_A, SERVER_B)


@dataclasses.dataclass
class Op:
    kind: int
    deps: list[int]
    gpu: int = -1
    src: int = -1
    dst: int = -1
    bytes: int = 0
    duration_ns: float = 0.0
    template: int = -1


def ring(gpus, steps: int, chunks: int, chunk_bytes: int, extra_ns: int = 0) -> Template:
    """A ring on ``gpus``: at each step every GPU sends each chunk to the next, after it received that chunk
    from the previous GPU at the step before and sent its own previous chunk of this step."""
    g = len(gpus)
    idx = lambda step, r, c: (step * g + r) * chunks + c  # noqa: E731
    t = Template([], [], [], [])
    for step in range(steps):
        for r in range(g):
            for c in range(chunks):
                deps = ([idx(step - 1, (r - 1) % g, c)] if step else []) + ([idx(step, r, c - 1)] if c else [])
                t.gpu.append(gpus[r])
                t.bytes.append(chunk_bytes * (1 + (r + c) % 3))
                t.duration_ns.append(extra_ns * (c % 2))
                t.deps.append(sorted(deps))
    return t


def cross_ring(steps: int, chunks: int, chunk_bytes: int) -> Template:
    """A ring over both servers (0 → 1 → 4 → 5 → 0): every other hop a flow, the rest NVLink copies."""
    order = (0, 1, 4, 5)
    t = ring(order, steps, chunks, chunk_bytes, extra_ns=400)
    t.dst = [order[(order.index(g) + 1) % len(order)] for g in t.gpu]
    t.duration_ns = [0 if t.is_flow(s) else x for s, x in enumerate(t.duration_ns)]  # a flow has no copy time
    return t


def templates_of(ts: list[Template]) -> BlockTemplates:
    sizes = [len(t.gpu) for t in ts]
    deps = [d for t in ts for d in t.deps]
    return BlockTemplates(
        ptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        kind=np.array([FLOW if t.is_flow(s) else NVLINK for t in ts for s in range(len(t.gpu))], np.uint8),
        gpu=np.array([x for t in ts for x in t.gpu], np.int32),
        dst=np.array([t.receiver(s) for t in ts for s in range(len(t.gpu))], np.int32),
        bytes=np.array([x for t in ts for x in t.bytes], np.int64),
        duration_ns=np.array([x for t in ts for x in t.duration_ns], np.int64),
        dep_ptr=np.concatenate([[0], np.cumsum([len(d) for d in deps])]).astype(np.int64),
        dep_idx=np.array([x for d in deps for x in d], np.int32))


def materialize(ops: list[Op], ts: list[Template]) -> tuple[list[Op], list[range]]:
    """The DAG with every BLOCK op replaced by its subs as NVLINK and FLOW ops (the subs without an internal dep
    take the block's deps; the block's dependents depend on its terminal subs), and where each op went."""
    where: list[range] = []
    out: list[Op] = []
    terminal: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        deps = sorted({m for d in op.deps for m in terminal.get(d, [where[d].start])})
        if op.kind != BLOCK:
            where.append(range(len(out), len(out) + 1))
            out.append(dataclasses.replace(op, deps=deps))
            continue
        t, base = ts[op.template], len(out)
        where.append(range(base, base + len(t.gpu)))
        has_dependent = set()
        for s in range(len(t.gpu)):
            own = [base + d for d in t.deps[s]] or deps
            if t.is_flow(s):
                out.append(Op(FLOW, own, gpu=t.gpu[s], src=t.gpu[s], dst=t.receiver(s), bytes=t.bytes[s]))
            else:
                out.append(Op(NVLINK, own, gpu=t.gpu[s], bytes=t.bytes[s], duration_ns=t.duration_ns[s]))
            has_dependent.update(t.deps[s])
        terminal[i] = [base + s for s in range(len(t.gpu)) if s not in has_dependent]
    return out, where


def run(fab, ops: list[Op], ts: list[Template] | None, attributes=None, **kw) -> engine.DagOutput:
    n = len(ops)
    deps = [sorted(op.deps) for op in ops]
    col = lambda name, dt: np.array([getattr(op, name) for op in ops], dt)  # noqa: E731
    blocks = {}
    if ts is not None:
        blocks = {"block": col("template", np.int32), "block_templates": templates_of(ts)}
    return engine.simulate_dag(
        fab, kind=col("kind", np.uint8), gpu=col("gpu", np.int32), src_node=col("src", np.int32),
        dst_node=col("dst", np.int32), bytes_=col("bytes", np.int64), duration_ns=col("duration_ns", np.float64),
        priority=np.zeros(n, np.uint8), dep_ptr=np.concatenate([[0], np.cumsum([len(d) for d in deps])]),
        dep_idx=np.array([x for d in deps for x in d], np.int64), attributes=attributes, **blocks, **kw)


def assert_same_simulation(fab, ops: list[Op], ts: list[Template], attributes=None) -> engine.DagOutput:
    """Run ``ops`` (with BLOCK ops) and their materialized twin; assert they are one simulation."""
    flat, where = materialize(ops, ts)
    compact, full = run(fab, ops, ts, attributes), run(fab, flat, None, attributes)
    assert full.network.status == compact.network.status == "complete"
    for i, op in enumerate(ops):
        start, finish = full.op_start_ns[where[i]], full.op_finish_ns[where[i]]
        if op.kind != BLOCK:
            assert (compact.op_start_ns[i], compact.op_finish_ns[i]) == (start[0], finish[0]), f"op {i}"
        elif len(where[i]):
            assert (compact.op_start_ns[i], compact.op_finish_ns[i]) == (start.min(), finish.max()), f"block {i}"
    old_of = np.concatenate([[i] * len(r) for i, r in enumerate(where)]).astype(np.int64)
    np.testing.assert_array_equal(old_of[full.flow_op], compact.flow_op)
    sub_of = np.concatenate([np.arange(len(r)) if ops[i].kind == BLOCK else [-1] for i, r in enumerate(where)])
    flow_subs = any(t.is_flow(s) for t in ts for s in range(len(t.gpu)))
    assert (compact.flow_sub is None) != flow_subs
    if flow_subs:
        np.testing.assert_array_equal(sub_of[full.flow_op], compact.flow_sub)
    np.testing.assert_array_equal(full.flow_start_ns, compact.flow_start_ns)
    np.testing.assert_array_equal(full.network.finish_ns, compact.network.finish_ns)
    np.testing.assert_array_equal(full.network.delivered_bytes, compact.network.delivered_bytes)
    for name in full.network.ports:
        np.testing.assert_array_equal(full.network.ports[name], compact.network.ports[name])
    np.testing.assert_array_equal(full.network.queues["bytes"], compact.network.queues["bytes"])
    assert full.network.counters == compact.network.counters
    assert full.network.events == compact.network.events
    assert full.network.sim_time_ns == compact.network.sim_time_ns
    assert compact.subs_finished == sum(len(where[i]) for i, op in enumerate(ops) if op.kind == BLOCK)
    assert full.subs_finished == 0
    return compact


def call(ops: list[Op], template: int, deps: list[int]) -> int:
    """Append a collective call (barrier, BLOCK op, end NOP) after ``deps``; return its end NOP's index."""
    ops.append(Op(NOP, deps))
    ops.append(Op(BLOCK, [len(ops) - 1], template=template))
    ops.append(Op(NOP, [len(ops) - 1]))
    return len(ops) - 1


@pytest.fixture(scope="module")
def fab():
    return topology.single_switch(hosts=8, link_gbps=100, link_delay_ns=500)


def mixed_dag() -> tuple[list[Op], list[Template]]:
    """Two concurrent blocks on server A's GPUs, plain NVLINK copies on the same GPUs, compute on them,
    flows between the servers meanwhile, a block on server B after a flow, and a call after a call."""
    ts = [ring(SERVER_A, steps=3, chunks=2, chunk_bytes=1 << 18), ring(SERVER_A, 3, 3, 1 << 17, extra_ns=700),
          ring(SERVER_B, 3, 2, 1 << 18)]
    ops = [Op(NOP, [])]
    end_a = call(ops, 0, [0])
    end_b = call(ops, 1, [0])
    for g in (0, 1):
        ops.append(Op(NVLINK, [0], gpu=g, bytes=3 << 18))
    for a, b in zip(SERVER_A[:3], SERVER_B[:3]):
        ops.append(Op(FLOW, [0], src=a, dst=b, bytes=1 << 20))
    for g in SERVER_A:
        ops.append(Op(COMPUTE, [0], gpu=g, duration_ns=20_000.0 + 1000 * g))
    flow = len(ops)
    ops.append(Op(FLOW, [end_a], src=0, dst=5, bytes=1 << 19))
    end_c = call(ops, 2, [flow])
    call(ops, 0, [end_a, end_b])
    ops.append(Op(COMPUTE, [end_c], gpu=4, duration_ns=5000.0))
    return ops, ts


@pytest.mark.parametrize("attributes", [
    None,
    {"DagExecutor::CommComputeSlowdown": "0.3"},
    {"DagExecutor::CommComputeSlowdown": "0.2", "DagExecutor::NvlinkLatency": "0ns"},
])
def test_a_block_runs_as_its_materialized_copies(engine_ns, fab, attributes):
    compact = assert_same_simulation(fab, *mixed_dag(), attributes)
    assert compact.flow_op.size == 4


def test_concurrent_blocks_share_the_copy_engines(engine_ns, fab):
    """Two calls on the same GPUs at once take longer than one alone: their copies queue per GPU."""
    ops, ts = mixed_dag()
    alone = [Op(NOP, [])]
    call(alone, 0, [0])
    one = assert_same_simulation(fab, alone, ts)
    both = assert_same_simulation(fab, ops, ts)
    assert both.op_finish_ns[2] > one.op_finish_ns[2]


def random_template(rng, flows: bool) -> Template:
    """Up to 11 subs with random bytes, extra time and earlier local deps: copies on one server's GPUs, or
    (``flows``) each from a random GPU to a random other one, a flow when that one is on the other server."""
    m = int(rng.integers(1, 12))
    deps = [sorted(set(rng.integers(0, s, size=int(rng.integers(0, 3))).tolist())) if s else [] for s in range(m)]
    if not flows:
        gpus = list(SERVER_A if rng.random() < 0.5 else SERVER_B)
        return Template([int(rng.choice(gpus)) for _ in range(m)], [int(rng.integers(0, 1 << 18)) for _ in range(m)],
                        [int(rng.integers(0, 3)) * 300 for _ in range(m)], deps)
    gpu = [int(rng.integers(0, 8)) for _ in range(m)]
    dst = [int(rng.choice([h for h in range(8) if h != g])) for g in gpu]
    dst = [d if d // 4 != g // 4 else g for g, d in zip(gpu, dst)]  # a copy names its own GPU
    return Template(gpu, [int(rng.integers(1, 1 << 18)) for _ in range(m)],
                    [0 if d // 4 != g // 4 else int(rng.integers(0, 3)) * 300 for g, d in zip(gpu, dst)], deps, dst)


def random_dag(rng, ts: list[Template]) -> list[Op]:
    """25 random steps after a root NOP: calls of ``ts``, NVLINK copies, flows, compute and bare BLOCK ops."""
    ops = [Op(NOP, [])]
    for _ in range(25):
        deps = sorted(set(rng.integers(0, len(ops), size=int(rng.integers(1, 3))).tolist()))
        r = rng.random()
        if r < 0.3:
            call(ops, int(rng.integers(0, len(ts))), deps)
        elif r < 0.5:
            ops.append(Op(NVLINK, deps, gpu=int(rng.integers(0, 8)), bytes=int(rng.integers(0, 1 << 18))))
        elif r < 0.7:
            a, b = rng.choice(8, size=2, replace=False)
            ops.append(Op(FLOW, deps, src=int(a), dst=int(b), bytes=int(rng.integers(1, 1 << 19))))
        elif r < 0.9:
            ops.append(Op(COMPUTE, deps, gpu=int(rng.integers(0, 8)), duration_ns=float(rng.integers(0, 9000))))
        else:
            ops.append(Op(BLOCK, deps, template=int(rng.integers(0, len(ts)))))  # a block with many deps
    return ops


@pytest.mark.parametrize("flows", [False, True])
def test_random_dags_run_as_their_materialized_twins(engine_ns, fab, flows):
    rng = np.random.default_rng(11 if flows else 7)
    for _ in range(4):
        ts = [random_template(rng, flows) for _ in range(3)]
        assert_same_simulation(fab, random_dag(rng, ts), ts, {"DagExecutor::CommComputeSlowdown": "0.25"})


@pytest.mark.parametrize("attributes", [None, {"DagExecutor::CommComputeSlowdown": "0.3"}])
def test_a_block_with_flows_runs_as_its_materialized_ops(engine_ns, fab, attributes):
    """Calls across both servers (flows and copies in one ring), two at once with a call inside a server, plain
    flows meanwhile: the same flows in the same order, each sub's flow its materialized FLOW op's."""
    ops, ts = mixed_dag()
    ts += [cross_ring(steps=3, chunks=2, chunk_bytes=1 << 18), cross_ring(2, 3, 1 << 17)]
    end = call(ops, 3, [0])
    call(ops, 4, [end, 1])
    call(ops, 3, [0])
    compact = assert_same_simulation(fab, ops, ts, attributes)
    assert (compact.flow_sub >= 0).sum() == 2 * 12 + 12  # half of each call's 24 subs


def test_a_flow_sub_between_non_hosts_is_refused(engine_ns, fab):
    ops = [Op(NOP, [])]
    call(ops, 0, [0])
    t = cross_ring(1, 1, 1024)
    t.dst[0] = 8  # the switch
    with pytest.raises(CosimInputError, match="FLOW with invalid host endpoints") as info:
        run(fab, ops, [t])
    assert info.value.field == "dag"


def test_a_block_of_no_copies_finishes_at_once(engine_ns, fab):
    ops = [Op(COMPUTE, [], gpu=0, duration_ns=1000.0)]
    call(ops, 0, [0])
    out = run(fab, ops, [Template([], [], [], [])])
    assert out.op_start_ns[2] == out.op_finish_ns[2] == out.op_finish_ns[3] == 1000.0
    assert out.subs_finished == 0


def test_a_dag_with_block_ops_needs_templates(engine_ns, fab):
    ops = [Op(NOP, [])]
    call(ops, 0, [0])
    with pytest.raises(CosimInputError, match="dag.*BLOCK ops and no block templates"):
        run(fab, ops, None)


def test_the_engine_refuses_to_run_block_ops_without_templates(engine_ns, fab):
    """The C++ check behind Python's: RunUntil of a DAG with BLOCK ops and no SetBlocks is an error, not a
    run (nor an abort)."""
    kind = np.array([NOP, BLOCK], np.uint8)
    z32, z64 = np.zeros(2, np.int32), np.zeros(2, np.int64)
    with engine._session(fab, 1, None, 1000.0) as (eng, _):
        eng.LoadDag(kind, z32, z32, z32, z64, z64, np.zeros(2, np.uint8), np.zeros(3, np.int64), z64, 2)
        with pytest.raises(Exception, match="1 BLOCK ops and no block templates"):
            eng.RunUntil(10**9)
        assert eng.DagOpsFinished() == 0


@pytest.mark.parametrize("case, message", [
    ("template out of range", "op 2 has block template 5"),
    ("non-block with a template", "op 0 has block template 0"),
    ("dep not below its sub", "depends on sub 1"),
    ("negative bytes", "negative size"),
])
def test_bad_blocks_are_refused_naming_dag(engine_ns, fab, case, message):
    ops = [Op(NOP, [])]
    call(ops, 0, [0])
    ts = [ring(SERVER_A, 2, 1, 1024)]
    if case == "template out of range":
        ops[2].template = 5
    elif case == "non-block with a template":
        ops[0].template = 0
    elif case == "dep not below its sub":
        ts[0].deps[1] = [1]
    else:
        ts[0].bytes[0] = -1
    with pytest.raises(CosimInputError, match=message) as info:
        run(fab, ops, ts)
    assert info.value.field == "dag"


@pytest.mark.parametrize("watched", ["barrier", "block"])
def test_a_collective_watchdog_times_a_block_as_its_copies(engine_ns, fab, watched):
    """A collective that starts at its barrier (or at the BLOCK op itself, as the materialized run's first
    copy) and ends at its end NOP fails at the same time in both forms when it outlasts the timeout."""
    ops, ts = mixed_dag()
    flat, where = materialize(ops, ts)
    start = 1 if watched == "barrier" else 2
    attributes = {"DagExecutor::CollectiveTimeout": "3us"}
    coll = lambda w: {"coll_start_op": np.array([w(start)]), "coll_end_op": np.array([w(3)])}  # noqa: E731
    compact = run(fab, ops, ts, attributes, **coll(lambda i: i))
    full = run(fab, flat, None, attributes, **coll(lambda i: where[i].start))
    assert compact.network.status == full.network.status == "failed"
    assert compact.failed_collective == full.failed_collective == 0
    assert compact.failed_at_ns == full.failed_at_ns
    assert compact.network.events == full.network.events
