"""DagBuilder writes op columns in place (later writes win) and FlowDag adopts its read-only arrays without
a copy, yet a FlowDag never aliases an array its caller can still write."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.arrays import unique_inverse
from cosim.collectives.dag import DagBuilder, DagOpKind, FlowDag


def _dag(cols, ptr, idx) -> FlowDag:
    z = np.zeros(0, np.int64)
    return FlowDag(n_ranks=2, gpus_per_server=1, n_iterations=1, n_trace_ops=0, **cols, dep_ptr=ptr, dep_idx=idx,
                   trace_start=z, trace_done=z, coll_trace_id=z, coll_kind=z, coll_bytes=z, coll_group=z,
                   coll_algo=z, coll_start_op=z, coll_end_op=z, coll_iteration=z, coll_ranks_ptr=[0], coll_ranks=z)


def test_builder_later_writes_win_and_deps_keep_order_per_op():
    b = DagBuilder(3)
    b.ops([0, 1, 2], kind=DagOpKind.NOP)
    b.ops([1], kind=DagOpKind.COMPUTE, rank=[0], duration_ns=[5])
    b.deps(2, [1])
    b.deps(2, [0])
    b.deps(1, [0])
    cols, ptr, idx = b.build()
    assert cols["kind"].tolist() == [DagOpKind.NOP, DagOpKind.COMPUTE, DagOpKind.NOP]
    assert ptr.tolist() == [0, 0, 1, 3] and idx.tolist() == [0, 1, 0]
    dag = _dag(cols, ptr, idx)
    assert dag.kind is cols["kind"]  # adopted: read-only and owned, so no copy
    assert not dag.kind.flags.writeable


def test_flowdag_copies_arrays_the_caller_can_still_write():
    cols, ptr, idx = DagBuilder(2).build()
    mine = np.array([DagOpKind.NOP, DagOpKind.NOP], np.uint8)
    dag = _dag({**cols, "kind": mine}, ptr, idx)
    mine[0] = DagOpKind.COMPUTE
    assert dag.kind[0] == DagOpKind.NOP


@pytest.mark.parametrize("seed", range(4))
def test_unique_inverse_is_numpys(seed):
    """unique_inverse: np.unique(return_inverse=True)'s values (and dtype) and flat inverse, for empty, one,
    repeated, negative and 2-D integer keys."""
    rng = np.random.default_rng(seed)
    cases = [np.zeros(0, np.int64), np.array([5], np.int32), rng.integers(0, 10, 1000),
             rng.integers(-5, 5, (30, 4)), np.repeat(rng.permutation(100), 3).astype(np.int32)]
    for x in cases:
        values, inverse = np.unique(x, return_inverse=True)
        mine, mine_inverse = unique_inverse(x)
        assert mine.dtype == values.dtype and np.array_equal(mine, values)
        assert np.array_equal(mine_inverse, inverse.reshape(-1))


def test_unique_inverse_below_marks_or_sorts():
    """With ``below``: values inside 0..below-1 are marked in a table, others (negative, too large) sorted;
    the result is np.unique's either way."""
    rng = np.random.default_rng(7)
    for x, below in ((rng.integers(0, 50, 400), 50), (rng.integers(-1, 50, 400), 50), (rng.integers(0, 60, 400), 50),
                     (np.zeros(0, np.int64), 10), (rng.integers(0, 5, (6, 7)).astype(np.int32), 5)):
        values, inverse = np.unique(x, return_inverse=True)
        mine, mine_inverse = unique_inverse(x, below=below)
        assert mine.dtype == values.dtype and np.array_equal(mine, values)
        assert np.array_equal(mine_inverse, inverse.reshape(-1))
