"""The dry run of a training job too large to plan (cosim.plan.estimate): sizes from the per-stage templates.

Its exact figures (trace ops, the DAG-op lower bound) equal those of the built trace; its estimated ones
(fabric bytes, data packet-hops) come close to the materialized plan's on a small job; and ``--dry-run`` on a
machine that cannot hold the DAG prints the estimate instead of refusing the run.
"""

import pytest
from conftest import run_main

from cosim import memory
from cosim.kinds import training
from cosim.plan import compile as compile_plan
from cosim.plan import estimate, sizes
from cosim.plan.describe import describe
from cosim.run import experiments_of

#: TP4 inside 4-GPU servers, PP2 (interleaved) and DP4 along the rails of a rail-optimized three-tier fabric
JOB = {"workload.model": "llama2-7b", "workload.model_overrides.num_layers": 4, "workload.parallelism.tp": 4,
       "workload.parallelism.pp": 2, "workload.parallelism.vpp": 2, "workload.parallelism.dp": 4,
       "workload.parallelism.sequence_parallel": True, "workload.parallelism.zero_stage": 1,
       "workload.parallelism.global_batch_size": 16, "network.gpus_per_server": 4,
       "network.topology": "rail-optimized-three-tier", "network.switch_radix": 8}


def test_templates_give_the_trace_ops_and_dag_bound_of_the_built_trace():
    """Trace ops (templates × ranks of each stage) and the DAG-op lower bound are those of the trace itself."""
    exp = experiments_of({}, JOB)[0]
    size = sizes.plan_size(exp)
    trace = exp.workload.generate_trace(4)
    assert size["trace_ops"] == trace.n_ops
    assert size["dag_ops_lower_bound"] == pytest.approx(training.dag_ops_lower_bound(trace, exp.workload.chunk_bytes, 4))
    assert size["dag_ops_lower_bound"] <= compile_plan(exp).dag.n_ops


def test_estimate_comes_close_to_the_materialized_plan():
    """On a job small enough to plan, the estimate's fabric bytes and data packet-hops are within 10 % of the
    plan's (its rings follow the groups' order, as the lowering's do), and its DAG bound is a lower bound."""
    exp = experiments_of({}, JOB)[0]
    plan = describe(compile_plan(exp))
    est = estimate.describe(exp, sizes.plan_size(exp))
    assert est["hosts"] == plan["hosts"] and est["switches"] == plan["switches"] and est["ranks"] == plan["ranks"]
    assert est["payload_bytes_estimate"] == pytest.approx(plan["payload_bytes"], rel=0.1)
    assert est["data_packet_hops_estimate"] == pytest.approx(plan["data_packet_hops_estimate"], rel=0.1)
    assert est["independent_parts"] == plan["independent_parts"]
    assert est["dag_ops_lower_bound"] <= plan["dag_ops"]
    assert est["wall_time_one_process_estimate_s"] == round(est["data_packet_hops_estimate"]
                                                            * estimate.SECONDS_PER_DATA_PACKET_HOP)


def test_mpi_ranks_hold_their_share_and_whole_zones():
    """Ranks: each holds its share of the engine's DAG in MPI_RANK_BYTES, a whole number per zone."""
    per_rank = estimate.MPI_RANK_BYTES
    assert estimate.mpi_ranks(0.5 * per_rank, 1) == 1
    assert estimate.mpi_ranks(3.5 * per_rank, 1) == 4
    assert estimate.mpi_ranks(3.5 * per_rank, 28) == 28
    assert estimate.mpi_ranks(30 * per_rank, 28) == 56


TOML = """name = "small"
[network]
topology = "rail-optimized-three-tier"
gpus_per_server = 4
switch_radix = 8
[workload]
kind = "training"
model = "llama2-7b"
model_overrides = {num_layers = 4}
[workload.parallelism]
tp = 4
pp = 2
dp = 4
global_batch_size = 16
"""


def test_dry_run_estimates_a_job_this_machine_cannot_plan(tmp_path, monkeypatch, capsys):
    """On a machine with room for 1,000 DAG ops, --dry-run prints the estimate (MPI ranks, expected time) and
    says why it is one, exit 0."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000 * memory.PLAN_BYTES_PER_DAG_OP)
    (tmp_path / "small.toml").write_text(TOML)
    code, out, err = run_main(["run", str(tmp_path / "small.toml"), "--dry-run"], capsys)
    assert code == 0, err
    assert "# plan (estimated, not simulated)" in out and "no trace or DAG op was built" in out
    for key in ("mpi_ranks", "wall_time_estimate_s", "data_packet_hops_estimate", "independent_parts", "rank_pairs"):
        assert f"#   {key}: " in out


def test_a_run_this_machine_cannot_plan_is_refused_before_its_trace(tmp_path, monkeypatch, capsys):
    """Without --dry-run the same job is one input error naming chunk_bytes and pointing to --dry-run,
    exit 2, before any trace is built; nothing is written."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000 * memory.PLAN_BYTES_PER_DAG_OP)
    (tmp_path / "small.toml").write_text(TOML)
    out = tmp_path / "out.h5"
    code, _, err = run_main(["run", str(tmp_path / "small.toml"), "-o", str(out)], capsys)
    assert code == 2 and "workload.chunk_bytes" in err and "--dry-run estimates it" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
