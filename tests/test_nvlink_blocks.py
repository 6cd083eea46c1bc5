"""Collective calls held as BLOCK ops (issue 29's compact DAG) give exactly the results of their transfers
materialized: calls inside one server (their copies as NVLINK ops) and, with ``workload.flow_blocks``, calls
across servers (their flows as FLOW ops). The lowering (counts, bytes, dependencies as the summary states them)
and whole training runs of every parallelism on the real engine, every dataset and summary value compared."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main
from cosim.collectives import DagOpKind
from cosim.collectives.lower import lower
from cosim.workload.trace import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import assert_same_results, snapshot  # noqa: E402

TRACES = Path(__file__).resolve().parents[1] / "traces"

#: trace file -> GPUs per server (TP inside a server, so its calls become BLOCK ops)
TRACE_CASES = {"llama2-7b-2l_tp2-pp2-dp2.h5": 2, "llama2-13b-2l_tp4-sp-cp2.h5": 4,
               "mixtral-8x7b-2l_tp2-sp-dp4-ep4.h5": 4}

#: ``cosim run`` arguments of small training runs covering TP, SP, CP, PP (interleaved), DP, EP and ZeRO
RUN_CASES = {
    "tp2-pp2-dp2-leaf-spine": ["--trace", str(TRACES / "llama2-7b-2l_tp2-pp2-dp2.h5"), "--gpus-per-server", "2",
                               "--topology", "leaf-spine", "--oversubscription", "2", "--iterations", "2",
                               "--chunk-bytes", "1MiB", "--transport", "both"],
    "tp4-sp-cp2": ["--trace", str(TRACES / "llama2-13b-2l_tp4-sp-cp2.h5"), "--gpus-per-server", "4",
                   "--chunk-bytes", "1MiB", "--transport", "roce"],
    "tp2-sp-dp4-ep4": ["--trace", str(TRACES / "mixtral-8x7b-2l_tp2-sp-dp4-ep4.h5"), "--gpus-per-server", "4",
                       "--chunk-bytes", "1MiB", "--transport", "ib"],
    "tp4-pp2-vpp2-dp2-zero1": ["--set", "workload.model=llama2-7b", "--set", "workload.model_overrides.num_layers=4",
                               "--set", "workload.parallelism.tp=4", "--set", "workload.parallelism.pp=2",
                               "--set", "workload.parallelism.vpp=2", "--set", "workload.parallelism.dp=2",
                               "--set", "workload.parallelism.zero_stage=1",
                               "--set", "workload.parallelism.global_batch_size=8",
                               "--set", "workload.parallelism.sequence_parallel=true", "--gpus-per-server", "4",
                               "--chunk-bytes", "2MiB", "--transport", "roce"],
}


@pytest.mark.parametrize("name", sorted(TRACE_CASES))
@pytest.mark.parametrize("flows", [False, True])
def test_blocks_stand_for_exactly_the_transfers_they_replace(name, flows):
    """Every call inside one server (and with ``flows`` every other call) becomes barrier, one BLOCK op, end;
    the DAG's summary (ops, deps, FLOW and NVLink bytes, as materialized), the bytes every rank moves of
    each kind and every other op are those of the plain lowering."""
    trace = read_trace(TRACES / name)
    gps = TRACE_CASES[name]
    plain = lower(trace, gpus_per_server=gps, chunk_bytes=1 << 20)
    compact = lower(trace, gpus_per_server=gps, chunk_bytes=1 << 20, blocks=True, flow_blocks=flows)
    assert compact.block_op.size > 0 and compact.n_ops < plain.n_ops
    assert compact.blocks.has_flows() == flows
    summary = compact.summary()
    assert summary.pop("n_block_ops") == compact.block_op.size
    assert summary == plain.summary()
    for kind in (None, DagOpKind.FLOW, DagOpKind.NVLINK):
        assert np.array_equal(compact.bytes_sent_per_rank(kind), plain.bytes_sent_per_rank(kind))
        assert np.array_equal(compact.bytes_received_per_rank(kind), plain.bytes_received_per_rank(kind))
    assert np.array_equal(compact.nvlink_bytes_by_rank(), plain.nvlink_bytes_by_rank())
    if flows:  # every call is a BLOCK op: the only FLOW ops left are the sends' chunks
        assert np.all(compact.trace_op[compact.kind == DagOpKind.FLOW] >= 0)
        assert not np.isin(compact.coll_start_op + 1, np.flatnonzero(compact.kind == DagOpKind.FLOW)).any()
        return
    # the same calls, in the same order, each with its block standing for its schedule's copies
    assert np.array_equal(compact.coll_trace_id, plain.coll_trace_id)
    sizes = compact.blocks.sizes()[compact.block_tmpl]
    span = plain.coll_end_op - plain.coll_start_op - 1
    blocked = np.isin(compact.coll_start_op + 1, compact.block_op)
    assert np.array_equal(np.sort(span[blocked]), np.sort(sizes))
    assert np.all(plain.kind[np.concatenate([np.arange(s + 1, e) for s, e in
                                             zip(plain.coll_start_op[blocked], plain.coll_end_op[blocked])])]
                  == DagOpKind.NVLINK)


def _run(args: list[str], out: Path) -> dict:
    try:
        main(["run", *args, "--quiet", "-o", str(out)])
    except SystemExit as exc:
        assert exc.code in (0, None), f"cosim run exited {exc.code}"
    return snapshot(out)


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_run_with_blocks_matches_materialized_run(case, tmp_path, engine_ns):
    """The same run with ``workload.nvlink_blocks`` on (the default) and off: every dataset and every summary
    value but the simulator's own (wall clock, events) identical, on the real engine."""
    args = RUN_CASES[case]
    compact = _run(args, tmp_path / "compact.h5")
    plain = _run([*args, "--set", "workload.nvlink_blocks=false"], tmp_path / "plain.h5")
    # ``events`` counts the simulator's own work: a folded run holds a shared BLOCK op's copies on every GPU
    assert_same_results(plain, compact, ignore=("events",))


#: a run with the fast-forward error monitor, which compares flows of an exact and a fast-forwarded run
FAST_FORWARD_CASE = ["--trace", str(TRACES / "llama2-7b-2l_tp2-pp2-dp2.h5"), "--gpus-per-server", "2",
                     "--chunk-bytes", "1MiB", "--transport", "roce", "--set", "limits.fast_forward=true",
                     "--set", "limits.fast_forward_check=true"]


@pytest.mark.parametrize("case", [*sorted(RUN_CASES), "fast-forward-checked"])
def test_run_with_flow_blocks_matches_materialized_run(case, tmp_path, engine_ns):
    """The same run with ``workload.flow_blocks`` on and off, both whole (on, a run is never folded onto one
    part of identical ones): every dataset (the flows table, their order included) and every summary value
    but the wall clock identical, the simulator's events too."""
    args = [*RUN_CASES.get(case, FAST_FORWARD_CASE), "--set", "limits.decompose=off"]
    compact = _run([*args, "--set", "workload.flow_blocks=on"], tmp_path / "compact.h5")
    plain = _run([*args, "--set", "workload.flow_blocks=off"], tmp_path / "plain.h5")
    assert all(run["summary"]["n_flows"] > 0 for run in compact.values())
    assert_same_results(plain, compact)


def test_a_fold_runs_flow_blocks_of_its_first_part(tmp_path, engine_ns):
    """TP4 × CP2 on servers of 4 GPUs: the context-parallel calls cross servers on one rail each, so the run
    folds onto one rail with its calls as BLOCK ops as it does with their flows materialized; the same results,
    the simulator's events included (the same part simulated)."""
    args = RUN_CASES["tp4-sp-cp2"]
    compact = _run([*args, "--set", "workload.flow_blocks=on"], tmp_path / "compact.h5")
    plain = _run([*args, "--set", "workload.flow_blocks=off"], tmp_path / "plain.h5")
    assert_same_results(plain, compact)
