"""Defaults that scale: PFC headroom only for the priorities in use, buffers per switch class, a time limit
derived from the workload, and the memory lowering takes per DAG op.

The real ns-3 runs a 256-GPU rail-optimized fabric at 400 Gbit/s (TP8 x DP32 of a 1-layer model) that the
old defaults (32 MiB everywhere, headroom for all 8 priorities) refused.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import run_main

from cosim import engine
from cosim.collectives.lower import lower
from cosim.errors import CosimInputError
from cosim.kinds import time_limit, training
from cosim.network import buffers
from cosim.plan import compile as compile_plan
from cosim.plan.describe import describe
from cosim.run import run
from cosim.spec import from_document
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec

MIB = 1 << 20
#: a 1-layer model: a TP8 x DP32 iteration is about a millisecond of simulated time
TINY = {"num_layers": 1, "hidden_size": 512, "num_heads": 8, "num_kv_heads": 8, "ffn_hidden_size": 1024,
        "vocab_size": 4096, "seq_length": 512}


def rail_dp32(attributes: dict | None = None):
    """TP8 x DP32 on a rail-optimized 400 Gbit/s fabric: 32 servers, 8 rail leaves of 32 hosts and 2 spines."""
    doc = {"network": {"transport": "roce", "link_gbps": 400.0, "attributes": attributes or {}},
           "workload": {"kind": "training", "model": "llama2-7b", "model_overrides": TINY,
                        "parallelism": {"tp": 8, "dp": 32, "micro_batch_size": 1, "global_batch_size": 32}}}
    return from_document(doc)[0]


def preflight(exp) -> None:
    """What must hold before ``exp`` simulates: its plan compiles and its fabric takes its attributes."""
    plan = compile_plan(exp)
    engine.check_fabric(plan.fabric, plan.attributes)


def shared(workloads: list[dict], transport: str = "roce", attributes: dict | None = None):
    doc = {"network": {"transport": transport, "hosts": 4, "gpus_per_server": 1, "attributes": attributes or {}},
           "workloads": workloads}
    return from_document(doc)[0]


FLOWS = {"kind": "flows", "pattern": "permutation", "flow_bytes": "64KiB", "servers": 2}


@pytest.mark.parametrize("exp, mask", [
    (from_document({"network": {"transport": "roce"}})[0], 0x81),  # one workload: priority 0 and ACKs at 7
    (shared([FLOWS | {"name": "a", "priority": 2}, FLOWS | {"name": "b", "priority": 3, "lossless": False}]),
     0x84),  # b's class is lossy: no headroom for it
    (shared([FLOWS | {"name": "a", "priority": 1}, FLOWS | {"name": "b", "priority": 7, "lossless": False}]),
     0x02),  # ACKs share the lossy class 7
    (shared([FLOWS | {"name": "a", "priority": 1}], attributes={"HostNic::ControlPriority": 5}), 0x22),
    (from_document({"network": {"transport": "roce", "attributes": {
        "SharedBufferMmu::LosslessPriorityMask": 255}}})[0], None),  # explicit: the user's value stands
    (from_document({"network": {"transport": "ib"}})[0], None),  # credit lanes carve no headroom
])
def test_lossless_mask_follows_the_workloads_priorities(exp, mask):
    """Headroom is carved for the priorities the run's lossless traffic and its ACKs/CNPs use, not all 8;
    a lossy class and InfiniBand get none, and an explicit mask is left as set."""
    assert exp.lossless_priority_mask() == mask
    attrs = compile_plan(exp).attributes  # a shared fabric's too, now that every run compiles one plan
    if mask is not None:
        assert attrs["SharedBufferMmu::LosslessPriorityMask"] == str(mask)


@pytest.mark.parametrize("capacity_tbps, buffer_bytes", [
    (0.8, 32 * MIB), (12.8, 32 * MIB), (12.81, 64 * MIB), (25.6, 64 * MIB), (51.2, 160 * MIB),
    (102.4, 320 * MIB),  # beyond the largest chip: its bytes per Tbit/s
])
def test_switch_buffer_follows_its_class(capacity_tbps, buffer_bytes):
    """A switch gets the buffer of the smallest class covering its capacity (sum of port rates); up to
    12.8 Tbit/s that is the 32 MiB attribute default, so small fabrics run as before."""
    assert buffers.class_buffer_bytes(np.array([capacity_tbps * 1e12]))[0] == buffer_bytes


def test_rail_dp32_at_400g_runs_lossless_with_default_buffers(engine_ns):
    """TP8 x DP32 at 400 Gbit/s: the defaults (64 MiB rail leaves, 160 MiB spines, headroom for 2
    priorities) start and run without a drop; the old settings, given explicitly, are still refused."""
    exp = rail_dp32()
    plan = describe(compile_plan(exp))
    assert plan["buffer_per_switch_class"] == "25.6 Tbps: 64 MiB x 8; 51.2 Tbps: 160 MiB x 2"
    assert plan["lossless_priorities"] == 2 and plan["shared_pool_bytes_per_switch_min"] > 0
    rec = run(exp)
    assert rec.summary["status"] == "complete"
    assert rec.summary["drops"] == 0 and rec.summary["switch_drops"] == 0
    old = {"SharedBufferMmu::BufferBytes": 32 * MIB, "SharedBufferMmu::LosslessPriorityMask": 255}
    with pytest.raises(CosimInputError, match="BufferBytes is too small"):
        preflight(rail_dp32(old))
    preflight(rail_dp32({"SharedBufferMmu::BufferBytes": 32 * MIB}))  # two priorities fit in 32 MiB


def test_explicit_buffer_applies_to_every_switch(engine_ns):
    """--set SharedBufferMmu::BufferBytes replaces the class table on every switch."""
    exp = rail_dp32({"SharedBufferMmu::BufferBytes": 48 * MIB})
    planned = compile_plan(exp)
    plan = describe(planned)
    assert plan["buffer_per_switch_class"] == "25.6 Tbps: 48 MiB x 8; 51.2 Tbps: 48 MiB x 2"
    assert buffers.switch_buffer_bytes(planned.fabric, planned.attributes) is None


def test_time_limit_is_derived_from_flows_and_an_explicit_one_wins():
    """Incast of 7 x 1 GiB into one 100 Gbit/s host: ideal 7 GiB / 12.5 GB/s; limit 20 x that (above the
    1 s floor); small runs get the floor; --max-sim-time-ms wins."""
    doc = {"network": {"transport": "roce", "hosts": 8}, "workload": {"pattern": "incast", "flow_bytes": "1GiB"}}
    exp = from_document(doc)[0]
    p = compile_plan(exp)
    fabric, fs = p.fabric, p.jobs[0].state
    ideal = 7 * (1 << 30) / 12.5e9 * 1e9
    assert time_limit.flows_ideal_ns(fabric, fs.src, fs.dst, fs.size_bytes, fs.start_ns) == pytest.approx(ideal)
    assert p.max_sim_time_ns == pytest.approx(20 * ideal)
    small = from_document(doc | {"workload": {"pattern": "incast", "flow_bytes": "64KiB"}})[0]
    assert compile_plan(small).max_sim_time_ns == time_limit.FLOOR_NS
    fixed = from_document(doc | {"limits": {"max_sim_time_ns": 5e6}})[0]
    assert compile_plan(fixed).max_sim_time_ns == 5e6


def test_training_time_limit_covers_the_iteration(engine_ns, capsys):
    """A training run's limit is 20 x its busiest rank's serial work (compute, latencies, NIC bytes),
    which is at least its compute; the run completes well inside it; --dry-run shows it."""
    exp = rail_dp32()
    p = compile_plan(exp)
    _, dag = p.jobs[0].state  # the training job's trace and FlowDag (ranks, not hosts)
    ideal = time_limit.dag_ideal_ns(dag, training.nic_payload_bytes_per_s(exp.network))
    assert p.max_sim_time_ns == max(time_limit.FLOOR_NS, 20 * ideal)
    busiest = int(np.max(np.bincount(dag.rank[(dag.kind == 1) & (dag.rank >= 0)],
                                     weights=dag.duration_ns[(dag.kind == 1) & (dag.rank >= 0)])))
    assert ideal >= busiest
    code, out, _ = run_main(["run", "incast", "--dry-run"], capsys)
    assert code == 0 and "max_sim_time_ns: 1e+09 (derived)" in out and "buffer_per_switch_class: " in out
    code, out, _ = run_main(["run", "incast", "--dry-run", "--max-sim-time-ms", "3"], capsys)
    assert code == 0 and "max_sim_time_ns: 3e+06 (explicit)" in out


def test_engine_sizes_every_switch_by_its_class(engine_ns):
    """The engine applies the class table itself: headroom for all 8 priorities (explicit) fits a 64 MiB
    rail leaf and a 160 MiB spine, which it would not at 32 MiB."""
    exp = rail_dp32({"SharedBufferMmu::LosslessPriorityMask": 255})
    p = compile_plan(exp)
    sizes = buffers.switch_buffer_bytes(p.fabric, p.attributes)
    assert sorted(set(sizes[sizes > 0].tolist())) == [64 * MIB, 160 * MIB]
    engine.check_fabric(p.fabric, p.attributes)


def test_lowering_memory_per_dag_op_is_bounded():
    """Lowering LLaMA-2 7B (16 layers, TP8 x PP4 x DP4, 4 micro-batches: 164k DAG ops) peaks under 80 B
    per DAG op above the trace (tracemalloc, numpy included), and the FlowDag holds under 50: narrow
    columns, a CSR placed block by block, no whole-DAG temporaries (bench/bench_memory.py at scale)."""
    trace = build_trace(get_model("llama2-7b", num_layers=16),
                        ParallelismSpec(tp=8, pp=4, dp=4, micro_batch_size=1, global_batch_size=16),
                        get_hardware("h100", gpus_per_host=8))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        dag = lower(trace)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dag.n_ops > 150_000
    assert (peak - before) / dag.n_ops < 80
    assert (held - before) / dag.n_ops < 50
