"""The dry run of a training job too large to plan, or to plan in a dry run's time (cosim.plan.estimate):
sizes from the per-stage templates.

Its exact figures (trace ops, the DAG-op lower bound) equal those of the built trace, and its counts (DAG ops,
flows, the flows BLOCK ops start) those of the lowered plan, on jobs of every parallelism; its estimated ones
(fabric bytes, data packet-hops) come close to the materialized plan's on a small job; and ``--dry-run`` on a
machine that cannot hold the DAG, or of a job past the dry run's size, prints the estimate.
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
    assert (est["dag_ops"], est["flows"]) == (plan["dag_ops"], plan["flows"])
    assert est["peak_memory_bytes_estimate"] == plan["peak_memory_bytes_estimate"]
    assert est["wall_time_one_process_estimate_s"] == round(est["data_packet_hops_estimate"]
                                                            * estimate.SECONDS_PER_DATA_PACKET_HOP)


def test_estimate_gives_the_part_a_fold_simulates():
    """On rails that fold (one rail-optimized switch per rail, every group along a rail), the estimate's
    largest part comes within 1 % of the packet-hops the plan's fold simulates, its wall time at the
    estimate's rate per hop."""
    job = {k: v for k, v in JOB.items() if k != "network.switch_radix"} | {"network.topology": "rail-optimized"}
    exp = experiments_of({}, job)[0]
    plan = describe(compile_plan(exp))
    est = estimate.describe(exp, sizes.plan_size(exp))
    assert plan["decompose"] == "symmetric" and est["independent_parts"] == plan["independent_parts"] == 4
    part = est["data_packet_hops_largest_part_estimate"]
    assert part == pytest.approx(plan["data_packet_hops_simulated_estimate"], rel=0.01)
    assert est["wall_time_largest_part_estimate_s"] == round(part * estimate.SECONDS_PER_DATA_PACKET_HOP)


#: variants of JOB, each lowered differently: calls across servers as BLOCK ops, two chained iterations,
#: tree all-reduces, no BLOCK ops, TP2 with data-parallel groups inside and across servers, ZeRO-3, context
#: parallelism with pipeline peers in one server, chunks smaller than a channel's share, experts on two ranks
VARIANTS = {
    "flow-blocks": {"workload.flow_blocks": "on"},
    "two-iterations": {"workload.iterations": 2},
    "tree": {"workload.algorithm": "tree", "workload.parallelism.sequence_parallel": False},
    "no-blocks": {"workload.nvlink_blocks": False},
    "tp2-dp8": {"workload.parallelism.tp": 2, "workload.parallelism.dp": 8, "workload.parallelism.vpp": 1,
                "workload.parallelism.sequence_parallel": False},
    "zero3-cp2": {"workload.parallelism.tp": 2, "workload.parallelism.cp": 2, "workload.parallelism.vpp": 1,
                  "workload.parallelism.zero_stage": 3, "workload.parallelism.sequence_parallel": False},
    "small-chunks": {"workload.chunk_bytes": 256 << 10},
    "moe-ep2": {"workload.model": "mixtral-8x7b", "workload.model_overrides.num_layers": 2,
                "workload.parallelism.ep": 2, "workload.parallelism.vpp": 1},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_counts_from_templates_are_the_lowered_plans(variant):
    """The DAG ops, fabric flows and flows of BLOCK ops counted from the stage templates by the lowering's
    rules equal those of the plan the job lowers to."""
    exp = experiments_of({}, JOB | VARIANTS[variant])[0]
    dag = compile_plan(exp).dag
    counts = estimate.lowered_counts(exp, sizes.plan_size(exp), 4)
    assert counts == {"dag_ops": dag.n_ops, "flows": int(dag.flows()[3].sum()), "block_flows": dag.n_block_flows()}


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


def test_dry_run_estimates_a_job_past_its_size_unless_asked_to_plan_it(tmp_path, monkeypatch, capsys):
    """A job of more trace ops than a dry run plans is estimated (and says how to plan it); --full-plan plans
    it whole, with the same DAG ops and flows; --full-plan without --dry-run is a usage error, exit 2."""
    monkeypatch.setattr(sizes, "DRY_RUN_TRACE_OPS", 100)
    (tmp_path / "small.toml").write_text(TOML)
    code, out, err = run_main(["run", str(tmp_path / "small.toml"), "--dry-run"], capsys)
    assert code == 0, err
    assert "# plan (estimated, not simulated)" in out and "--full-plan plans it whole" in out
    code, full, err = run_main(["run", str(tmp_path / "small.toml"), "--dry-run", "--full-plan"], capsys)
    assert code == 0, err
    assert "# plan (not simulated)" in full and "#   decompose: " in full

    def line(text, key):
        return next(x for x in text.splitlines() if x.startswith(f"#   {key}: "))

    assert [line(out, k) for k in ("dag_ops", "flows")] == [line(full, k) for k in ("dag_ops", "flows")]
    code, _, err = run_main(["run", str(tmp_path / "small.toml"), "--full-plan"], capsys)
    assert code == 2 and "--full-plan applies to --dry-run only" in err


def test_a_run_this_machine_cannot_plan_is_refused_before_its_trace(tmp_path, monkeypatch, capsys):
    """Without --dry-run the same job is one input error naming chunk_bytes and pointing to --dry-run,
    exit 2, before any trace is built; nothing is written."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000 * memory.PLAN_BYTES_PER_DAG_OP)
    (tmp_path / "small.toml").write_text(TOML)
    out = tmp_path / "out.h5"
    code, _, err = run_main(["run", str(tmp_path / "small.toml"), "-o", str(out)], capsys)
    assert code == 2 and "workload.chunk_bytes" in err and "--dry-run estimates it" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
