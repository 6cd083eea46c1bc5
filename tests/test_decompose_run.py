"""Decomposed runs (cosim.decompose.exact) give exactly the whole run's datasets.

Each scenario runs twice on the real ns-3, with ``limits.decompose = "off"`` (one simulation of the whole
run) and ``"auto"`` (independent groups, or one of identical parts folded), and every dataset and summary
value must be identical except the simulator's cost (events, wall time).
"""

import numpy as np
import pytest
from conftest import run_main

from cosim import batch, engine
from cosim.collectives import DagOpKind
from cosim.decompose import exact as decompose_run
from cosim.errors import CosimInputError
from cosim.plan import compile as compile_plan
from cosim.plan.describe import describe
from cosim.run import experiments_of, run

#: summary values that measure the simulator, not the network: they differ between the two ways
SIMULATOR_COST = {"events", "wall_time_s", "packet_hops_per_s"}
GROUPS = ("flows", "queues", "ports", "pauses", "latency", "stalls", "ops", "collectives", "iterations")

#: TP inside each server (NVLink), PP and DP along the rails of a rail-optimized fabric: the TP collectives
#: couple the rails, which are identical, so one rail is simulated
RAILS = {"workload.model": "llama2-7b", "workload.model_overrides.num_layers": 2, "workload.parallelism.tp": 4,
         "workload.parallelism.pp": 2, "workload.parallelism.dp": 2, "workload.parallelism.global_batch_size": 4,
         "network.gpus_per_server": 4, "workload.chunk_bytes": 1 << 20, "workload.iterations": 2}

_JOB = {"kind": "training", "placement": "packed", "model": "llama2-7b", "iterations": 2, "chunk_bytes": "1MiB",
        "model_overrides": {"num_layers": 2, "hidden_size": 1024, "num_heads": 8, "num_kv_heads": 8,
                            "ffn_hidden_size": 2816, "vocab_size": 8192, "seq_length": 1024},
        "parallelism": {"tp": 2, "dp": 2, "zero_stage": 1, "global_batch_size": 4}}
#: two identical jobs under a leaf each (run once) and an incast under the third leaf
MULTI_JOB = {"network": {"topology": "leaf-spine", "gpus_per_server": 2, "hosts_per_leaf": 4, "spines": 2,
                         "oversubscription": 2.0, "hosts": 12},
             "workloads": [{"name": "job0", **_JOB}, {"name": "job1", **_JOB},
                           {"name": "burst", "kind": "flows", "pattern": "incast", "flow_bytes": "256KiB",
                            "servers": 2, "start_ns": 20000.0}]}


def _both(doc, overrides):
    out = {}
    for mode in ("off", "auto"):
        exp = experiments_of(doc, {**overrides, "limits.decompose": mode})[0]
        out[mode] = (exp, run(exp))
    return out


def _assert_identical(whole, parts):
    for group in GROUPS:
        a, b = whole.table(group), parts.table(group)
        assert sorted(a) == sorted(b), group
        for col in a:
            x, y = np.asarray(a[col]), np.asarray(b[col])
            assert x.dtype == y.dtype and x.shape == y.shape, f"{group}/{col}"
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"{group}/{col} differs"
    sa = {k: v for k, v in whole.summary.items() if k not in SIMULATOR_COST}
    sb = {k: v for k, v in parts.summary.items() if k not in SIMULATOR_COST}
    assert sa == sb


@pytest.mark.parametrize("transport, flow_blocks", [("roce", "off"), ("ib", "off"), ("roce", "on")])
def test_training_on_rails_folds_to_one_rail_and_matches_the_whole_run(transport, flow_blocks, engine_ns,
                                                                       monkeypatch):
    """TP4 inside 4-GPU servers, PP2 x DP2 along the rails, two iterations: the four rails are identical up to
    relabeling hosts, one is simulated, and every dataset equals the whole run's (its queue samples merged a
    time slice at a time); also with the data-parallel calls as BLOCK ops of flows, each on its rail."""
    monkeypatch.setattr(decompose_run, "QUEUE_MERGE_SLICE_ROWS", 64)
    runs = _both({}, {**RAILS, "network.transport": transport, "workload.flow_blocks": flow_blocks})
    _, whole = runs["off"]
    _, parts = runs["auto"]
    assert whole.config["decomposition"]["decompose"] == "whole"
    d = parts.config["decomposition"]
    assert d["decompose"] == "symmetric" and d["decompose_parts"] == 4 and d["decompose_runs"] == 1
    assert whole.summary["flows"] > 0 and whole.summary["status"] == "complete"
    _assert_identical(whole, parts)


@pytest.mark.parametrize("slice_rows, flow_blocks", [(None, "off"), (7, "off"), (None, "on")])
def test_multi_job_run_splits_into_groups_and_runs_identical_jobs_once(engine_ns, monkeypatch, slice_rows,
                                                                       flow_blocks):
    """Two identical jobs packed under their own leaves and an incast under a third: three groups that share
    no link, the two jobs one class run once; the merged record equals the whole run's, also when the queue
    samples are merged a few rows at a time (as a large fold's are), and with the jobs' data-parallel calls
    as BLOCK ops of flows (the second job's flows its twin's, sub by sub)."""
    if slice_rows is not None:
        monkeypatch.setattr(decompose_run, "QUEUE_MERGE_SLICE_ROWS", slice_rows)
    jobs = [{**w, "flow_blocks": flow_blocks} if w["kind"] == "training" else w for w in MULTI_JOB["workloads"]]
    runs = _both({**MULTI_JOB, "workloads": jobs}, {})
    _, whole = runs["off"]
    _, parts = runs["auto"]
    d = parts.config["decomposition"]
    assert d["decompose"] == "independent" and d["decompose_parts"] == 3
    assert sorted(d["decompose_classes"]) == [1, 2] and d["decompose_runs"] == 2
    _assert_identical(whole, parts)


def test_traffic_that_can_share_a_switch_runs_whole(engine_ns):
    """On a leaf-spine with the ranks spread over leaves every flow can reach every spine: one part, the
    whole run (and --dry-run says why)."""
    exp = experiments_of({}, {**RAILS, "network.topology": "leaf-spine", "workload.iterations": 1})[0]
    plan = describe(compile_plan(exp))
    assert plan["independent_parts"] == 1
    assert plan["decompose"] == "whole" and "one part" in plan["decompose_reason"]


def test_dry_run_shows_the_fold(engine_ns):
    """--dry-run of the rail-optimized training shows the parts, the class of identical ones and the one run."""
    plan = describe(compile_plan(experiments_of({}, RAILS)[0]))
    assert plan["decompose"] == "symmetric" and plan["decompose_classes"] == [4] and plan["decompose_runs"] == 1
    assert plan["decompose_ops_per_run_max"] < plan["dag_ops"]


@pytest.mark.parametrize("value", ["on", "", 1])
def test_decompose_takes_auto_or_off(value):
    """limits.decompose is "auto" or "off"; anything else is one input error naming the field."""
    with pytest.raises(CosimInputError, match="limits.decompose"):
        experiments_of({}, {**RAILS, "limits.decompose": value})


#: two identical incasts under a leaf each: the leaves' egress queues build, and mark at random
TWO_INCASTS = {"network": {"topology": "leaf-spine", "gpus_per_server": 2, "hosts_per_leaf": 4, "spines": 2,
                           "hosts": 8},
               "workloads": [{"name": f"burst{i}", "kind": "flows", "pattern": "incast", "flow_bytes": "512KiB",
                              "servers": 2} for i in range(2)]}


def test_identical_parts_marking_at_random_run_once_exactly(engine_ns):
    """Two identical incasts under their own leaves queue far beyond Kmin, so ECN marks are drawn at random
    for most packets. Both leaves are of one tier and draw from one marking stream: they mark the same
    packets, one incast is simulated and copied, and every dataset (the marks included) equals the whole
    run's."""
    ecn = {"network.attributes": {"FabricSwitch::EcnKminBytes": "1", "FabricSwitch::EcnKmaxBytes": "10000000"}}
    runs = _both(TWO_INCASTS, ecn)
    whole, parts = runs["off"][1], runs["auto"][1]
    d = parts.config["decomposition"]
    assert d["decompose"] == "independent" and d["decompose_classes"] == [2] and d["decompose_runs"] == 1
    assert whole.summary["ecn_marks"] > 0 and whole.summary["max_queue_bytes"] > 100_000
    _assert_identical(whole, parts)


#: the two incasts without DCQCN on a shallower buffer: PFC pauses the senders, so the pauses log has rows and
#: the headroom peak (a max counter) is above 0
PAUSING = {"network.dcqcn": False, "network.attributes": {"SharedBufferMmu::BufferBytes": "1500000"}}


def test_every_log_and_counter_merges_by_its_declared_rule(engine_ns):
    """The two identical incasts run once and are copied: every event log the engine declares merges row for
    row into the whole run's, and every counter by its combine rule (a sum counts both copies, a max or min
    does not), with a non-zero counter of each rule to tell a wrong rule apart."""
    exp = experiments_of(TWO_INCASTS, PAUSING)[0]
    planned = compile_plan(exp)
    fabric, columns, gpu_node, attributes = batch.dag_inputs(planned)
    settings = batch._settings(planned)
    whole = engine.simulate_dag(fabric, **columns, **settings).network
    d = decompose_run.decomposition(fabric, columns, gpu_node=gpu_node, attributes=attributes)
    assert [p.copies for p in d.pieces] == [2]
    merged, why = decompose_run.simulate(fabric, columns, d, **settings)
    assert why == "" and whole.logs["pauses"]["time_ns"].size > 0
    for info in engine.event_logs():
        a, b = whole.logs[info.name], merged.network.logs[info.name]
        assert list(a) == list(b) == [c.python_name for c in info.columns]
        for col in a:
            assert a[col].dtype == b[col].dtype and np.array_equal(a[col], b[col]), f"{info.name}/{col}"
    rules = engine.counter_rules()
    assert merged.network.counters == whole.counters and set(whole.counters) <= set(rules)
    assert {rules[name] for name, value in whole.counters.items() if value} == {"sum", "max", "min"}


def test_cli_jobs_runs_the_groups_in_processes_and_dry_run_shows_them(tmp_path, engine_ns):
    """cosim run --jobs 2 on the multi-job experiment gives the same datasets as --decompose off; --dry-run
    prints the groups and the runs it will make."""

    from click.testing import CliRunner

    from cosim.cli import cli as main
    from cosim.results import read_results
    from cosim.spec import to_toml

    spec = tmp_path / "two-jobs.toml"
    spec.write_text(to_toml({"name": "jobs", **MULTI_JOB}))
    cli = CliRunner()
    dry = cli.invoke(main, ["run", str(spec), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "decompose: independent" in dry.output and "decompose_classes: [2, 1]" in dry.output
    for flags, out in ((["--jobs", "2"], "parts.h5"), (["--decompose", "off"], "whole.h5")):
        res = cli.invoke(main, ["run", str(spec), "-q", "-o", str(tmp_path / out), *flags])
        assert res.exit_code == 0, res.output
    whole, parts = read_results(tmp_path / "whole.h5")["jobs"], read_results(tmp_path / "parts.h5")["jobs"]
    _assert_identical(whole, parts)


def test_parts_from_shards_merge_into_the_whole_run(tmp_path, engine_ns):
    """The batch path: two shards (as two job-array tasks) each simulate their parts of the multi-job run into
    a folder, cosim merge joins them, and the results equal the whole run's."""
    from click.testing import CliRunner

    from cosim.cli import cli as main
    from cosim.results import read_results
    from cosim.spec import to_toml

    spec = tmp_path / "two-jobs.toml"
    spec.write_text(to_toml({"name": "jobs", **MULTI_JOB}))
    cli = CliRunner()
    for shard in ("0/2", "1/2"):
        res = cli.invoke(main, ["run", str(spec), "--parts-dir", str(tmp_path / "parts"), "--shard", shard])
        assert res.exit_code == 0, res.output
        assert "wrote 1 part file(s)" in res.output
    early = cli.invoke(main, ["merge", str(tmp_path / "missing")])
    assert early.exit_code != 0
    res = cli.invoke(main, ["merge", str(tmp_path / "parts"), "-o", str(tmp_path / "merged.h5")])
    assert res.exit_code == 0, res.output
    whole = run(experiments_of(MULTI_JOB, {"limits.decompose": "off", "name": "jobs"})[0])
    _assert_identical(whole, read_results(tmp_path / "merged.h5")["jobs"])


def _cosim(args: list[str], capsys) -> tuple[int, str]:
    """(exit code, stdout + stderr) of ``cosim ARGS`` as a shell runs it."""
    code, out, err = run_main(args, capsys)
    return code, out + err


def test_a_merge_refuses_parts_of_another_experiment_and_damaged_parts(tmp_path, engine_ns, capsys):
    """A job array resubmitted after an edit (the burst's bytes and the seed) under the same run name: the
    merge names the stale part instead of mixing it in; a truncated part file and a damaged manifest are
    one-line errors naming the file, not tracebacks; -o does not apply with --parts-dir."""
    from cosim.spec import to_toml

    edited = {**MULTI_JOB, "seed": 7, "workloads": [*MULTI_JOB["workloads"][:2],
                                                    {**MULTI_JOB["workloads"][2], "flow_bytes": "1MiB"}]}
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(to_toml({"name": "jobs", **MULTI_JOB}))
    b.write_text(to_toml({"name": "jobs", **edited}))
    parts, out = tmp_path / "parts", str(tmp_path / "m.h5")
    assert _cosim(["run", str(a), "--parts-dir", str(parts), "-q"], capsys)[0] == 0
    assert _cosim(["run", str(b), "--parts-dir", str(parts), "--shard", "0/2", "-q"], capsys)[0] == 0
    code, text = _cosim(["merge", str(parts), "-o", out], capsys)
    assert code == 2 and "jobs.part00001.npz" in text and "another experiment" in text, text
    assert len(text.strip().splitlines()) == 1 and not (tmp_path / "m.h5").exists()
    assert _cosim(["run", str(b), "--parts-dir", str(parts), "--shard", "1/2", "-q"], capsys)[0] == 0
    part = parts / "jobs.part00000.npz"
    part.write_bytes(part.read_bytes()[:100])
    code, text = _cosim(["merge", str(parts), "-o", out], capsys)
    assert code == 2 and "jobs.part00000.npz" in text and "damaged" in text, text
    (parts / "jobs.parts.json").write_text("{not json")
    code, text = _cosim(["merge", str(parts), "-o", out], capsys)
    assert code == 2 and "jobs.parts.json" in text and "damaged" in text, text
    code, text = _cosim(["run", str(b), "--parts-dir", str(parts), "-o", out], capsys)
    assert code == 2 and "-o does not apply with --parts-dir" in text, text


def test_a_merge_whose_results_would_not_fit_keeps_the_parts(tmp_path, engine_ns, capsys, monkeypatch):
    """cosim merge on a machine without the memory to merge and record the run's flows: one line naming
    limits, exit 2, no output, and every simulated part file left for a larger machine."""
    from cosim import memory
    from cosim.spec import to_toml

    spec, parts, out = tmp_path / "a.toml", tmp_path / "parts", tmp_path / "m.h5"
    spec.write_text(to_toml({"name": "jobs", **MULTI_JOB}))
    assert _cosim(["run", str(spec), "--parts-dir", str(parts), "-q"], capsys)[0] == 0
    files = sorted(parts.iterdir())
    monkeypatch.setattr(memory, "RECORD_BYTES_PER_FLOW", 1 << 40)
    code, text = _cosim(["merge", str(parts), "-o", str(out)], capsys)
    assert code == 2 and text.startswith("Error: limits: the run's") and len(text.strip().splitlines()) == 1, text
    assert not out.exists() and sorted(parts.iterdir()) == files


def test_progress_counts_the_work_of_the_parts_simulated(engine_ns):
    """A decomposed run's progress is measured in the parts it simulates: the work estimate the progress line
    divides by is the pieces' flows (one rail of four: a quarter of the whole run's packet-hops), and the
    packet-hops the progress callback is given grow across the pieces to that estimate instead of restarting
    at each piece."""
    from cosim.plan.describe import (
        data_packet_hops_estimate,
        whole_work_estimate,
        work_estimate,
    )

    for doc, overrides, parts in (({}, {**RAILS, "workload.iterations": 1}, 4), (MULTI_JOB, {}, None)):
        exp = experiments_of(doc, overrides)[0]
        plan = compile_plan(exp)
        d = decompose_run.run_decomposition(exp, plan.fabric, plan.dag.columns(),
                                            gpu_node=np.arange(plan.fabric.n_nodes), attributes=plan.attributes)
        assert d.mode != "whole" and len(d.pieces) < d.n_parts
        mtu = engine.attribute_values(plan.attributes, ("HostNic::MtuBytes",))["HostNic::MtuBytes"]
        cols = plan.dag.columns()
        per_piece = []
        for p in d.pieces:
            flow = p.ops[cols["kind"][p.ops] == DagOpKind.FLOW]
            per_piece.append(data_packet_hops_estimate(plan.fabric, cols["src_node"][flow], cols["dst_node"][flow],
                                                       cols["bytes_"][flow], int(mtu)))
        work = work_estimate(plan)
        assert work == sum(per_piece) > 0 and work < whole_work_estimate(plan)
        if parts:
            assert work * parts == whole_work_estimate(plan)
        assert describe(plan)["data_packet_hops_simulated_estimate"] == work

        calls = []
        record = run(exp, plan=plan, progress=lambda *a: calls.append(a))
        hops = [c[3] for c in calls]
        assert all(b >= a for a, b in zip(hops, hops[1:]))  # never back to 0 when the next piece starts
        done, total = calls[-1][1], calls[-1][2]
        assert done == total >= sum(int(p.ops.size) for p in d.pieces)
        assert record.summary["data_packet_hops"] == whole_work_estimate(plan)  # lossless, shortest paths
        if parts:
            assert hops[-1] == work  # one rail simulated: exactly its estimate
        else:
            assert hops[-1] >= work  # a piece that ended first is rerun to the end of the whole run


def _fold_reason(exp, plan, columns):
    return decompose_run.decomposition(plan.fabric, columns, gpu_node=np.arange(plan.fabric.n_nodes),
                                       attributes=plan.attributes).reason


@pytest.mark.parametrize("change", ["duration", "bytes", "host", "dependency"])
def test_the_fold_refuses_parts_that_differ_in_one_op(change, engine_ns):
    """The rails fold only when every rail is rail 0 op by op up to relabeling hosts: changing one op of the
    last rail (its duration, its bytes, a flow's destination to another host of that rail, one dependency to
    the op before it) makes the run whole, and says why."""
    exp = experiments_of({}, {**RAILS, "workload.iterations": 1})[0]
    plan = compile_plan(exp)
    columns = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in plan.dag.columns().items()}
    assert "identical parts" in _fold_reason(exp, plan, columns)
    kind, src, dst = columns["kind"], columns["src_node"], columns["dst_node"]
    flows = np.flatnonzero(kind == DagOpKind.FLOW)
    rail = plan.fabric.host_gpu[src[flows]]
    last = flows[rail == rail.max()]
    op = int(last[len(last) // 2])
    if change == "duration":
        compute = np.flatnonzero((kind == DagOpKind.COMPUTE) & (columns["gpu"] >= 0))
        op = int(compute[plan.fabric.host_gpu[columns["gpu"][compute]] == rail.max()][-1])
        columns["duration_ns"][op] += 1
    elif change == "bytes":
        columns["bytes_"][op] -= 1
    elif change == "host":  # another host of the same rail, unused by this flow: no bijection maps both
        others = np.setdiff1d(np.unique(np.concatenate([src[last], dst[last]])), [src[op], dst[op]])
        dst[op] = others[0]
    else:
        ptr, idx = columns["dep_ptr"], columns["dep_idx"]
        edge = int(ptr[op])
        assert ptr[op + 1] > edge and idx[edge] > 0
        idx[edge] -= 1
    assert "they differ" in _fold_reason(exp, plan, columns)
