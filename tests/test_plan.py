"""The run plan: every Experiment compiled once into one plan, whatever its workload kinds; faults and
the record work the same for every kind (cosim.plan, cosim.run, cosim.record)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosim import run as runner
from cosim.cli import main
from cosim.collectives import DagOpKind
from cosim.plan import compile
from cosim.spec import catalog

TRACES = Path(__file__).resolve().parents[1] / "traces"
TRAINING = {"kind": "training", "trace": str(TRACES / "llama2-7b-2l_tp2-pp2-dp2.h5"), "chunk_bytes": "1MiB"}
NETWORK = {"transport": "roce", "topology": "leaf-spine", "gpus_per_server": 2}


def _datasets(rec) -> dict:
    from cosim.results.schema import GROUPS

    return {(g, k): np.asarray(x) for g in GROUPS for k, x in rec.table(g).items()}


def test_one_training_job_as_workload_or_only_workloads_entry_gives_identical_datasets(engine_ns):
    """A training job is one plan whether written as [workload] or as the only [[workloads]] entry: the
    same fabric, placement, DAG and attributes, so every dataset and the summary are identical."""
    one = runner.experiments_of({"name": "a", "network": NETWORK, "workload": TRAINING})[0]
    listed = runner.experiments_of({"name": "a", "network": NETWORK, "workloads": [{"name": "job0", **TRAINING}]})[0]
    a, b = runner.run(one), runner.run(listed)
    da, db = _datasets(a), _datasets(b)
    assert sorted(da) == sorted(db)
    for key in da:
        assert da[key].dtype == db[key].dtype and np.array_equal(da[key], db[key], equal_nan=da[key].dtype.kind == "f"), key
    volatile = {"wall_time_s", "packet_hops_per_s"}
    assert {k: x for k, x in a.summary.items() if k not in volatile} == \
        {k: x for k, x in b.summary.items() if k not in volatile}
    assert a.summary["status"] == "complete" and a.summary["n_flows"] > 0


def _inference(**extra) -> dict:
    work = {"kind": "inference", "model": "llama2-70b", "model_overrides": {"num_layers": 2}, "requests": 1,
            "rate_per_s": 100.0, "prompt_median_tokens": 400.0, "output_median_tokens": 3.0}
    return {"name": "serve", "seed": 3, "network": {"transport": "roce", "topology": "single-switch",
                                                     "gpus_per_server": 1}, "workload": work, **extra}


def test_straggler_on_an_inference_run_slows_its_prefill_by_its_factor(engine_ns):
    """A straggler on every rank of the lone prefill replica (factor 3) makes the one request's prefill at
    least 3x its compute: TTFT >= 3 x the calibrated prefill time of its prompt, and more than without it."""
    factor = 3.0
    faulted = runner.experiments_of(_inference(faults=[{"kind": "straggler", "element": "rank0", "at_ns": 0,
                                                         "factor": factor}], baseline=True))[0]
    plan = compile(faulted)
    serving = plan.jobs[0].state
    prompt = serving.plan.requests.prompt_tokens
    compute_ns = float(serving.plan.prefill_cost.prefill_ns(prompt[:1]))
    slow, base = runner.run_with_baseline(faulted, plan=plan)
    assert slow.summary["faults"] == 1 and slow.summary["status"] == "complete"
    assert slow.requests["ttft_ns"][0] >= factor * compute_ns * (1 - 1e-9)
    assert slow.requests["ttft_ns"][0] > base.requests["ttft_ns"][0] + (factor - 1) * compute_ns * 0.99
    assert slow.table("faults")["action"].size >= 1


def test_link_degrade_in_a_two_job_run_bounds_the_incast_by_the_degraded_rate(engine_ns):
    """Two jobs share a leaf-spine; the incast job's receiver link is degraded to 10 Gbit/s from the start,
    so its last flow cannot finish before all its bytes crossed that link at 10 Gbit/s."""
    flow_bytes = 256 * 1024
    doc = {"name": "two", "network": {"transport": "roce", "topology": "leaf-spine", "gpus_per_server": 2},
           "workloads": [{"name": "train", **TRAINING},
                         {"name": "burst", "kind": "flows", "pattern": "incast", "flow_bytes": flow_bytes,
                          "servers": 2}]}
    plan = compile(runner.experiments_of(doc)[0])
    burst = next(p for p in plan.jobs if p.job.name == "burst")
    receiver = int(burst.hosts[0])
    from cosim.analysis.ports import node_names

    names = node_names(plan.fabric)
    host_link = next(f"{names[a]}-{names[b]}" for a, b in zip(plan.fabric.link_a, plan.fabric.link_b)
                     if receiver in (a, b))
    doc["faults"] = [{"kind": "link_degrade", "element": host_link, "at_ns": 0, "rate_gbps": 10.0}]
    rec = runner.run(runner.experiments_of(doc)[0])
    assert rec.summary["status"] == "complete" and rec.summary["faults"] == 1
    flows = rec.flows
    mine = flows["workload"] == burst.index
    senders = int(np.count_nonzero(mine))
    bound_ns = senders * flow_bytes * 8 / 10.0  # payload alone at 10 Gbit/s (bit / (Gbit/s) = ns)
    assert np.nanmax(flows["finish_ns"][mine]) >= bound_ns
    assert "train_iteration_time_ns" in rec.summary


@pytest.mark.parametrize("name", catalog.names())
def test_every_shipped_experiment_compiles_once(name, monkeypatch, capsys, engine_ns):
    """A dry run of every shipped experiment lowers each job once, whatever it prints (fabric, buffers,
    parts, work, memory)."""
    _dry_run_lowers_once(name, monkeypatch, capsys)


def _dry_run_lowers_once(name, monkeypatch, capsys):
    import cosim.kinds.inference as ri
    import cosim.kinds.training as kt

    count = {"n": 0}

    def counted(real):
        def lower(*a, **k):
            count["n"] += 1
            return real(*a, **k)
        return lower

    monkeypatch.setattr(kt, "lower", counted(kt.lower))
    monkeypatch.setattr(ri, "lower", counted(ri.lower))
    exps = runner.experiments_of(name)
    with pytest.raises(SystemExit) as exc:
        main(["run", name, "--dry-run"])
    assert exc.value.code in (0, None)
    out = capsys.readouterr().out
    assert "peak_memory_bytes_estimate" in out and "data_packet_hops_estimate" in out
    ranked = sum(sum(j.kind in ("training", "inference") for j in e.workloads) if e.workloads
                 else int(e.workload.kind in ("training", "inference")) for e in exps)
    assert count["n"] == ranked, f"{name}: {count['n']} lowerings for {ranked} training/inference jobs"


@pytest.mark.parametrize("flow_bytes,refused", [("64KiB", False), (8 << 50, True)])
def test_a_late_job_gets_its_time_limit_after_its_start(flow_bytes, refused):
    """The derived time limit is a job's start plus the limit of its ideal time, so a job may start days into
    the run (1e15 ns); one whose limit would pass the simulator's clock is refused naming its start_ns."""
    from cosim.errors import CosimInputError

    doc = {"network": {"topology": "leaf-spine", "hosts": 8},
           "workloads": [{"name": "late", "kind": "flows", "pattern": "incast", "flow_bytes": flow_bytes, "servers": 2,
                          "start_ns": 1e15}]}
    (exp,) = runner.experiments_of(doc)
    if refused:
        with pytest.raises(CosimInputError, match="clock") as exc:
            compile(exp)
        assert exc.value.field == "workloads.late.start_ns"
    else:
        assert 1e15 + 1e9 <= compile(exp).max_sim_time_ns < 1e15 + 2e9


def test_background_traffic_that_would_not_fit_is_refused_before_it_is_drawn():
    """A storage workload of 1-byte requests at full load for 1000 s: every field in range, 2.5e13 flows
    together; compile refuses it naming duration_ns with the memory it would need, before drawing."""
    from cosim.errors import CosimInputError

    doc = {"network": {"topology": "leaf-spine", "hosts": 8},
           "workloads": [{"name": "a", "kind": "flows", "pattern": "incast", "flow_bytes": "64KiB", "servers": 2},
                         {"name": "st", "kind": "storage", "request_bytes": 1, "load": 1.0, "duration_ns": 1e12,
                          "servers": 2}]}
    (exp,) = runner.experiments_of(doc)
    with pytest.raises(CosimInputError, match="GB is available") as exc:
        compile(exp)
    assert exc.value.field == "workloads.st.duration_ns"


@pytest.mark.parametrize("flow_blocks", ["off", "on"])
def test_a_plan_counts_every_flow_its_run_starts(flow_blocks, engine_ns):
    """EngineDag.n_flows (what the memory checks count) is the number of flows the run records, with calls
    across servers as FLOW ops or held as BLOCK ops; the peak memory estimate counts those a BLOCK op starts."""
    from cosim import memory
    from cosim.plan.describe import peak_memory_bytes

    exp = runner.experiments_of({"name": "a", "network": NETWORK,
                                 "workload": {**TRAINING, "flow_blocks": flow_blocks}})[0]
    plan = compile(exp)
    rec = runner.run(exp, plan=plan)
    assert rec.summary["status"] == "complete"
    assert plan.dag.n_flows() == rec.summary["n_flows"] == rec.flows["src"].size > 0
    by_op = plan.dag.n_ops * max(memory.PLAN_BYTES_PER_DAG_OP, memory.ENGINE_BYTES_PER_DAG_OP)
    sub_flows = plan.dag.n_block_flows()
    assert sub_flows == plan.dag.n_flows() - int(np.count_nonzero(plan.dag.kind == DagOpKind.FLOW))
    assert (sub_flows > 0) == (flow_blocks == "on")
    assert peak_memory_bytes(plan) == by_op + memory.record_bytes(sub_flows)


def test_auto_flow_blocks_take_over_when_the_bound_misses_the_dag(monkeypatch):
    """``flow_blocks = "auto"`` decides by a lower bound on the DAG; with chunks larger than a channel's share
    the materialized DAG can be past the machine's limit although the bound was not past half of it: the job
    is then lowered with its calls across servers as BLOCK ops (the DAG "on" gives), not refused."""
    from cosim.kinds import training as kt

    work = {"kind": "training", "trace": str(TRACES / "mixtral-8x7b-2l_tp2-sp-dp4-ep4.h5"), "chunk_bytes": "64MiB"}
    exp = lambda mode: runner.experiments_of({"name": "a", "network": NETWORK,  # noqa: E731
                                              "workload": {**work, "flow_blocks": mode}})[0]
    off, on = compile(exp("off")).dag, compile(exp("on")).dag
    bound = kt.dag_ops_lower_bound(kt.read_trace(work["trace"]), 64 << 20, NETWORK["gpus_per_server"])
    limit = off.n_ops - 1
    assert bound * kt.PLAN_HEADROOM <= limit and on.n_ops <= limit  # auto says off, and off is past the limit
    monkeypatch.setattr(kt, "dag_op_limit", lambda: limit)
    auto = compile(exp("auto")).dag
    assert auto.n_ops == on.n_ops and auto.n_flows() == off.n_flows()
