"""Training metrics that mean what they say: collective statistics per group and kind in nccl-tests' terms,
and slowdown per whole transfer beside slowdown per chunk (flow)."""

from __future__ import annotations

import numpy as np
import pytest
from test_cosim_roce import make_trace, ring_allreduce_trace

from cosim.results.collectives import bus_factor, collective_stats
from cosim.run import run as run_experiment
from cosim.spec import make
from cosim.workload.trace import CollKind, GroupKind, OpKind, Phase

MIB = 1 << 20


def _two_group_trace(n: int, tp_bytes: int, dp_bytes: int):
    """Ranks 0..3 on two servers of two GPUs: TP groups {0,1} and {2,3} (inside a server), DP groups {0,2}
    and {1,3} (across); each rank runs its TP all-reduce, then its DP all-reduce."""
    groups = [[0, 1], [2, 3], [0, 2], [1, 3]]
    kinds = [GroupKind.TP, GroupKind.TP, GroupKind.DP, GroupKind.DP]
    ops, deps = [], []
    for r in range(n):
        tp, dp = r // 2, 2 + r % 2
        ops.append(dict(rank=r, kind=OpKind.COLLECTIVE, phase=Phase.FORWARD, bytes=tp_bytes,
                        coll_kind=CollKind.ALL_REDUCE, group=tp, coll_id=tp))
        deps.append([])
        ops.append(dict(rank=r, kind=OpKind.COLLECTIVE, phase=Phase.GRAD_SYNC, bytes=dp_bytes,
                        coll_kind=CollKind.ALL_REDUCE, group=dp, coll_id=dp))
        deps.append([len(ops) - 2])
    return make_trace(n, ops, deps, groups=groups, group_kind=kinds)


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_collectives_are_summarized_per_group_kind_with_nccl_tests_busbw(transport, engine_ns):
    """TP (inside a server, NVLink) and DP (across servers, NICs) all-reduces are kept apart; busbw is
    algbw × 2(n−1)/n of each call, and the DP one stays below the NIC's rate."""
    tr = _two_group_trace(4, tp_bytes=1 * MIB, dp_bytes=8 * MIB)
    exp = make("training", transport=transport, topology="single-switch", gpus_per_server=2, link_gbps=100,
               chunk_bytes=MIB, algorithm="ring")
    rec = run_experiment(exp, trace=tr)
    s = rec.summary
    assert s["status"] == "complete"
    assert s["coll_tp_all_reduce_count"] == 2 and s["coll_dp_all_reduce_count"] == 2
    assert "coll_all_reduce_p50_ns" not in s  # no percentile mixing the two groups
    c = rec.collectives
    assert sorted(c["group_kind"]) == [GroupKind.TP, GroupKind.TP, GroupKind.DP, GroupKind.DP]
    assert np.all(c["ranks"] == 2)
    dp = c["group_kind"] == GroupKind.DP
    t = c["finish_ns"][dp] - c["start_ns"][dp]
    busbw = 8 * MIB / t * 2 * (2 - 1) / 2  # GB/s = B/ns
    assert s["coll_dp_all_reduce_busbw_gbyte_per_s"] == pytest.approx(np.median(busbw), rel=1e-12)
    assert s["coll_dp_all_reduce_busbw_gbyte_per_s"] < 100 / 8  # one 100 Gbit/s NIC per rank
    assert s["coll_tp_all_reduce_p50_ns"] < s["coll_dp_all_reduce_p50_ns"]  # NVLink beats the NIC
    rows = {(r["group"], r["kind"]): r for r in collective_stats(c)}
    assert rows[("dp", "all_reduce")]["calls"] == 2 and rows[("tp", "all_reduce")]["ranks"] == 2


def test_bus_factors_are_nccl_tests():
    n = np.array([2, 4, 8, 8, 8, 8])
    kind = np.array([1, 1, 2, 3, 4, 5])
    assert np.allclose(bus_factor(kind, n), [1.0, 1.5, 7 / 8, 7 / 8, 7 / 8, 1.0])


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_transfer_slowdown_takes_the_chunks_of_a_message_together(transport, engine_ns):
    """A ring all-reduce of 16 MiB over n servers in 1 MiB chunks on an idle fabric: each rank's transfer to
    its successor is 2(n−1) pipelined steps of S/n in chunks; every chunk's bytes are counted once, and a
    whole transfer takes within a few percent of its ideal time, where chunks whose steps overlap on one
    link look up to 2× slower one by one."""
    n, size = 4, 16 * MIB
    exp = make("training", transport=transport, topology="single-switch", gpus_per_server=1, link_gbps=100,
               chunk_bytes=MIB, algorithm="ring")
    rec = run_experiment(exp, trace=ring_allreduce_trace(n, size))
    f = rec.flows
    roots, counts = np.unique(f["transfer"], return_counts=True)
    assert roots.size == n  # one transfer per rank: to its ring successor
    assert np.all(counts == 2 * (n - 1) * size // n // MIB)  # 2(n−1) steps of S/n bytes in 1 MiB chunks
    per_transfer = np.bincount(np.searchsorted(roots, f["transfer"]), weights=f["size_bytes"])
    assert np.all(per_transfer == 2 * (n - 1) * size // n) and f["size_bytes"].sum() == 2 * (n - 1) * size
    assert rec.summary["fct_slowdown_p99"] > 1.5  # chunk by chunk, overlapping steps share the link
    assert np.all(f["transfer"][roots] == roots)  # a root is its own first chunk
    s = rec.summary
    assert 1.0 <= s["transfer_slowdown_p50"] <= s["transfer_slowdown_p99"] < 1.05


#: a 2-layer GPT on Megatron's 2021 stack, small enough for a sub-second iteration
TINY_GPT = {"num_layers": 2, "hidden_size": 256, "num_heads": 4, "num_kv_heads": 4, "ffn_hidden_size": 1024,
            "vocab_size": 1024, "seq_length": 256}


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_flop_rates_divide_the_iteration_flops_by_the_simulated_time(transport, engine_ns):
    """MFU and TFLOP/s per GPU of a co-simulated run are the iteration's FLOPs over the simulated iteration
    time and GPUs: model FLOPs 3·B·F_seq; Megatron's count adds the recomputed layer forward, which for a
    GPT is the paper's closed form 96·B·s·l·h²·(1 + s/6h + V/16lh); and the rate is below the GPU's peak."""
    from cosim.spec import from_document
    from cosim.workload.flops import megatron_gpt_formula, model_flops_per_iteration
    from cosim.workload.hardware import get_hardware
    from cosim.workload.model import get_model

    doc = {"network": {"transport": transport, "gpus_per_server": 1, "link_gbps": 100.0},
           "workload": {"kind": "training", "model": "megatron-gpt-1.7b", "model_overrides": TINY_GPT,
                        "gpu": "a100", "iterations": 2,
                        "parallelism": {"dp": 2, "micro_batch_size": 2, "global_batch_size": 8, "recompute": True}}}
    s = run_experiment(from_document(doc)[0]).summary
    assert s["status"] == "complete"
    model = get_model("megatron-gpt-1.7b", **TINY_GPT)
    seconds = s["iteration_time_ns"] * 1e-9
    assert s["model_flop_per_s_per_gpu"] == pytest.approx(model_flops_per_iteration(model, 8) / seconds / 2,
                                                          rel=1e-12)
    assert s["megatron_flop_per_s_per_gpu"] == pytest.approx(megatron_gpt_formula(model, 8) / seconds / 2, rel=1e-9)
    peak = get_hardware("a100").peak_flops_per_s
    assert s["mfu"] == pytest.approx(s["model_flop_per_s_per_gpu"] / peak, rel=1e-12)
    assert 0 < s["mfu"] < s["megatron_flop_per_s_per_gpu"] / peak < 1


def test_flop_rates_are_left_out_for_a_trace_without_a_model(engine_ns):
    """A hand-made trace has no model FLOPs: no MFU is made up for it."""
    tr = _two_group_trace(4, tp_bytes=1 * MIB, dp_bytes=1 * MIB)
    exp = make("training", transport="roce", topology="single-switch", gpus_per_server=2, chunk_bytes=MIB)
    s = run_experiment(exp, trace=tr).summary
    assert s["status"] == "complete"
    assert not {"mfu", "model_flop_per_s_per_gpu", "megatron_flop_per_s_per_gpu"} & set(s)


def test_a_block_ops_flows_share_a_transfer_per_gpu_pair(engine_ns):
    """With the data-parallel calls as BLOCK ops of flows, every flow of a BLOCK op between two GPUs belongs
    to the transfer of the first such flow (the lowest sub of that op between them), in a real run of the
    four-rail training: the record's transfer column against that rule spelt out flow by flow."""
    from test_decompose_run import RAILS  # noqa: PLC0415

    from cosim.plan import compile as compile_plan  # noqa: PLC0415
    from cosim.record import record  # noqa: PLC0415
    from cosim.run import execute, experiments_of  # noqa: PLC0415

    plan = compile_plan(experiments_of({}, {**RAILS, "workload.flow_blocks": "on"})[0])
    outcome = execute(plan)
    transfer = record(plan, outcome).flows["transfer"]
    fop, fsub = outcome.out.flow_op, outcome.out.flow_sub
    src, dst, _ = plan.dag.flow_endpoints(fop, fsub)
    first: dict = {}
    for row in np.flatnonzero(fsub >= 0)[np.argsort(fsub[fsub >= 0], kind="stable")]:
        first.setdefault((int(fop[row]), int(src[row]), int(dst[row])), int(row))
    sub = np.flatnonzero(fsub >= 0)
    assert sub.size > 1000 and len(first) < sub.size
    expected = [first[int(fop[r]), int(src[r]), int(dst[r])] for r in sub]
    assert np.array_equal(transfer[sub], expected)
