"""The compute-only timeline: the iteration with free communication."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.timeline import compute_only_timeline
from cosim.workload.trace import OpKind

SMALL = {"num_layers": 4, "hidden_size": 256, "num_heads": 4, "num_kv_heads": 4, "ffn_hidden_size": 512,
         "vocab_size": 1024, "seq_length": 128}


def _trace(**par):
    return build_trace(get_model("llama2-7b", **SMALL), ParallelismSpec(**par), get_hardware("h100"))


@pytest.mark.parametrize("par", [dict(), dict(dp=4, zero_stage=1), dict(tp=2, dp=2, sequence_parallel=True)])
def test_without_a_pipeline_an_iteration_is_its_compute(par):
    """No pipeline: every rank's ops form one chain through its compute, and identical ranks meet at each
    collective at once, so the iteration with free communication is the sum of one rank's compute."""
    tr = _trace(**par)
    start, end = compute_only_timeline(tr)
    mine = (tr.rank == 0) & (tr.kind == OpKind.COMPUTE)
    assert int(end.max()) == int(tr.duration_ns[mine].sum())
    assert np.all(end - start == np.where(tr.kind == OpKind.COMPUTE, tr.duration_ns, 0))


def test_pipeline_stages_wait_for_each_other():
    """PP2: a RECV ends no earlier than its SEND, and each collective's members all start together."""
    tr = _trace(pp=2, tp=2, dp=2)
    start, end = compute_only_timeline(tr)
    recv = np.flatnonzero(tr.kind == OpKind.RECV)
    assert np.all(end[recv] >= end[tr.match_id[recv]])
    coll = tr.kind == OpKind.COLLECTIVE
    first = np.full(int(tr.coll_id.max()) + 1, -1, np.int64)
    first[tr.coll_id[coll]] = start[coll]
    assert np.all(start[coll] == first[tr.coll_id[coll]])

