"""The compact FlowDag: ``src``, ``coll`` and ``iteration`` are derived (not stored) and mean what they meant
when stored, the CSR of the deps is written from per-op counts of dep sources, and a lowering stays within
its memory budget per DAG op (issue 15: at most 40 B at the peak)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from cosim.collectives.dag import (
    DagBuilder,
    DagOpKind,
    FlowDag,
    csr_from_dep_sources,
    csr_from_edges,
    repeat,
)
from cosim.collectives.lower import lower
from cosim.errors import CosimInputError
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec


def _trace(dp: int, tp: int = 8, pp: int = 4, microbatches: int = 4):
    return build_trace(get_model("llama2-7b"),
                       ParallelismSpec(tp=tp, pp=pp, dp=dp, micro_batch_size=1, global_batch_size=microbatches * dp),
                       get_hardware("h100", gpus_per_host=8))


@pytest.fixture(scope="module")
def small_dag() -> FlowDag:
    return lower(_trace(dp=2, tp=4, pp=2, microbatches=2), gpus_per_server=4)


def test_derived_columns_mean_what_they_did(small_dag):
    dag = small_dag
    xfer = dag.is_transfer()
    src = dag.src
    assert src.dtype == np.int32 and np.array_equal(src[xfer], dag.rank[xfer]) and np.all(src[~xfer] == -1)
    # a collective's ops are its barrier, its flows and its end NOP, contiguous; no other op is of a collective
    coll = dag.coll
    expect = np.full(dag.n_ops, -1)
    for c in range(dag.n_collectives):
        expect[dag.coll_start_op[c]:dag.coll_end_op[c] + 1] = c
        members = set(dag.coll_members(c).tolist())
        mine = xfer & (coll == c)
        assert set(dag.rank[mine].tolist()) <= members and set(dag.dst[mine].tolist()) <= members
        assert np.all(dag.trace_op[coll == c] == dag.coll_trace_id[c])
    assert coll.dtype == np.int32 and np.array_equal(coll, expect)
    assert np.all(dag.iteration == 0) and dag.iteration.size == dag.n_ops


def test_repeat_iterations_and_collectives_per_copy(small_dag):
    k, n = 3, small_dag.n_ops
    rep = repeat(small_dag, k)
    assert np.array_equal(rep.iteration, np.repeat(np.arange(k), n))
    assert np.array_equal(rep.iteration[rep.coll_start_op], rep.coll_iteration)
    m = small_dag.n_collectives
    one = small_dag.coll
    assert np.array_equal(rep.coll, np.concatenate([np.where(one >= 0, one + j * m, -1) for j in range(k)]))
    assert np.array_equal(rep.src, np.tile(small_dag.src, k))


def test_csr_from_dep_sources_keeps_the_order_of_edges_per_op():
    rng = np.random.default_rng(7)
    n = 500
    blocks = []
    for _ in range(6):
        owner = rng.integers(1, n, 300)
        blocks.append((owner, rng.integers(0, owner)))
    ptr, idx = csr_from_dep_sources([lambda: blocks[:3], lambda: iter(blocks[3:])], n)
    want_ptr, want_idx = csr_from_edges(np.concatenate([o for o, _ in blocks]),
                                        np.concatenate([d for _, d in blocks]), n)
    assert np.array_equal(ptr, want_ptr) and np.array_equal(idx, want_idx)
    assert ptr.dtype == np.int32 and idx.dtype == np.int32


def test_builder_dep_blocks_run_when_built_in_call_order():
    b = DagBuilder(4)
    b.ops([0, 1, 2, 3], kind=DagOpKind.NOP)
    b.deps(3, [2])
    b.dep_blocks(lambda lo: iter([(np.array([3, 2]), np.array([lo, 1]))]), 0)
    b.deps(3, [1])
    _, ptr, idx = b.build()
    assert ptr.tolist() == [0, 0, 0, 1, 4] and idx.tolist() == [1, 2, 0, 1]


def test_flowdag_rejects_overlapping_collectives(small_dag):
    fields = {name: getattr(small_dag, name) for name in FlowDag.__slots__}
    end = small_dag.coll_end_op.copy()
    nxt = np.argsort(small_dag.coll_start_op)[:2]
    end[nxt[0]] = small_dag.coll_start_op[nxt[1]]
    with pytest.raises(CosimInputError, match="overlap"):
        FlowDag(**{**fields, "coll_end_op": end})
    with pytest.raises(CosimInputError, match="iteration_ptr"):
        FlowDag(**{**fields, "n_iterations": 2, "iteration_ptr": None})


def test_lowering_and_repeat_peak_and_held_bytes_per_op():
    trace = _trace(dp=4)  # 128 GPUs, 314k DAG ops
    tracemalloc.start()
    try:
        dag = lower(trace)
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        two = repeat(dag, 2)
        two_held, two_peak = (m - held for m in tracemalloc.get_traced_memory())
    finally:
        tracemalloc.stop()
    columns = sum(getattr(dag, name).nbytes for name in ("kind", "rank", "dst", "bytes", "duration_ns",
                                                         "priority", "trace_op"))
    assert columns / dag.n_ops == 22  # 1 + 4 + 4 + 4 + 4 + 1 + 4: src, coll and iteration are not stored
    assert held / dag.n_ops < 35
    assert peak / dag.n_ops < 40  # issue 15's budget; bench/bench_memory.py measures 1,024 GPUs
    # chaining iterations: the copies written once, adopted by the FlowDag, the CSR straight from the copy's
    assert two_held / two.n_ops < 35 and two_peak / two.n_ops < 40


def test_a_dep_source_that_changes_between_passes_is_caught():
    runs = iter([[(np.array([1, 2]), np.array([0, 0]))], [(np.array([1]), np.array([0]))]])
    with pytest.raises(RuntimeError, match="other edges"):
        csr_from_dep_sources([lambda: next(runs)], 3)
