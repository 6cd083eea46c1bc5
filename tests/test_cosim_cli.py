"""``cosim run`` for training workloads: --trace, the built-in scenario, flow scenarios kept, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import help_output_loading_nothing_heavy, run_main

from cosim import results
from cosim.cli import cli
from cosim.results.schema import SHARED_FABRIC_COLUMNS
from cosim.spec import catalog, read_toml
from cosim.workload.trace import write_trace

REPO = Path(__file__).resolve().parents[1]
DP8 = REPO / "traces" / "llama2-7b-2l_dp8-zero1.h5"


def test_trace_run_writes_ops_collectives_iterations(tmp_path, engine_ns):
    """--trace runs the trace on the default rail-optimized fabric and writes the ops, collectives and
    iterations tables with units, and the experiment document."""
    out = tmp_path / "t.h5"
    # 2 servers of 4 GPUs: the DP8 hierarchical rings cross the rail switches (~3 s)
    r = CliRunner().invoke(cli, ["run", "--trace", str(DP8), "--transport", "roce", "--gpus-per-server", "4",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    for label in ("iteration time (ms)", "exposed communication (ms)", "DP reduce-scatter time p99 (us)",
                  "DP all-gather time p50 (us)", "DP all-gather busbw p50 (GB/s)", "FCT slowdown p99, per flow",
                  "max queue, busiest port (KB)", "queue p99, over switch ports and time (KB)",
                  "PFC paused time, sum over ports (us)", "credit-stall time, most-stalled port (us)"):
        assert label in r.output
    run = results.read_results(out)["roce"]
    s = run.summary
    assert s["status"] == "complete" and s["n_ranks"] == 8 and s["n_flows"] > 0 and s["iterations"] == 1
    assert run.config["experiment"]["workload"]["trace"] == str(DP8)
    assert run.config["workload"]["gpus_per_server"] == 4
    assert run.config["fabric"]["name"] == "rail-optimized" and run.config["fabric"]["n_hosts"] == 8
    with h5py.File(out) as f:
        g = f["runs/roce"]
        for group in ("ops", "collectives", "iterations"):
            expected = [name for (grp, name) in results.DATASETS
                        if grp == group and (grp, name) not in SHARED_FABRIC_COLUMNS]
            columns = [name for name in g[group] if not g[group][name].is_scale]  # the dimension: no column
            assert sorted(columns) == sorted(expected)
            for name in expected:
                assert g[group][name].attrs["units"] == results.DATASETS[(group, name)][0]
    assert run.ops["start_ns"].size == s["n_ops"] and np.all(run.ops["finish_ns"] >= run.ops["start_ns"])
    assert set(np.unique(run.collectives["kind"]).tolist()) == {2, 3}  # ZeRO-1: reduce-scatter, all-gather
    assert run.iterations["time_ns"][0] == s["iteration_time_ns"] > s["compute_time_ns"]


def _ring_trace_file(tmp_path):
    from test_cosim_roce import ring_allreduce_trace

    path = tmp_path / "ring.h5"
    write_trace(path, ring_allreduce_trace(4, 4 << 20))
    return path


def test_iterations_are_all_recorded(tmp_path, engine_ns):
    """--iterations 3 records every iteration's ops and collectives; later iterations take the first's time."""
    out = tmp_path / "it.h5"
    r = CliRunner().invoke(cli, ["run", "--trace", str(_ring_trace_file(tmp_path)), "--gpus-per-server", "1",
                                 "--iterations", "3", "--name", "ring", "-o", str(out)])
    assert r.exit_code == 0, r.output
    run = results.read_results(out)["ring"]
    assert list(run.iterations["iteration"]) == [0, 1, 2] and np.all(run.iterations["time_ns"] > 0)
    assert run.ops["iteration"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert run.collectives["iteration"].tolist() == [0, 1, 2]
    assert len(run.summary["iteration_times_ns"]) == 3
    # the mean is over the iterations after the first; they take the same time as the first, except that a
    # later iteration's first packet may wait behind the previous one's last ACK (86 B at 100 Gbps: 6.88 ns)
    t = run.iterations["time_ns"]
    assert run.summary["iteration_time_ns"] == pytest.approx(np.mean(t[1:]))
    assert np.all(np.abs(t - t[0]) <= 86 * 8 / 100 + 1e-6)


@pytest.mark.parametrize("content,needle", [
    (None, "no such trace file"),
    (b"\x89HDF garbage", "not a readable HDF5 file"),
    ("results", "not a cosim trace"),
])
def test_bad_trace_file_exits_2_one_line_no_output(tmp_path, capsys, content, needle, engine_ns):
    bad = tmp_path / "bad.h5"
    if content == "results":
        results.write_results(bad, [results.RunRecord(name="x", config={}, provenance={}, summary={})])
    elif content is not None:
        bad.write_bytes(content)
    out = tmp_path / "out.h5"
    code, stdout, err = run_main(["run", "--trace", str(bad), "-o", str(out)], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and needle in err and str(bad) in err
    assert "Traceback" not in err and not out.exists()
    assert not list(tmp_path.glob(".out.h5*"))  # no temporary left behind either


@pytest.mark.parametrize("args,needle", [
    (["--trace", str(DP8), "--pattern", "incast"], "--pattern"),
    (["--trace", str(DP8), "--hosts", "4"], "--hosts"),
    (["--pattern", "incast", "--iterations", "2"], "--iterations"),
    (["--trace", str(DP8), "--transport", "infiniband"], "--transport"),
    (["--trace", str(DP8), "--iterations", "0"], "--iterations"),
    (["--trace", str(DP8), "--algorithm", "rings"], "--algorithm"),
    (["--trace", str(DP8), "--topology", "fat-tree", "--switch-radix", "2"], "edge switches of k/2=1"),
    (["--trace", str(DP8), "--set", "HostNic::NoSuchThing=1"], "HostNic::NoSuchThing"),
    (["--trace", str(DP8), "--gpus-per-server", "3", "--topology", "leaf-spine", "--hosts-per-leaf", "4"],
     "network.hosts_per_leaf"),
])
def test_bad_training_options_exit_2(tmp_path, capsys, args, needle, engine_ns):
    """Bad or conflicting training options exit 2 with one line naming the option or field, and write no file."""
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", *args, "-o", str(out)], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and needle in err
    assert not out.exists()


@pytest.mark.parametrize("args", [["--fabric", "roce"], ["--pattern", "incast", "--fabric"]])
def test_retired_fabric_option_names_its_replacement(tmp_path, capsys, args):
    """--fabric (the old name of --transport), with or without a value, is a one-line usage error, exit 2."""
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", *args, "-o", str(out)], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and "Traceback" not in err
    assert "--fabric was renamed --transport: use --transport roce|ib|uec|both|all" in err
    assert not out.exists()


def test_flow_scenarios_are_still_reachable(tmp_path, engine_ns):
    """--pattern makes a flow-level run: no training tables, the pattern in the stored experiment."""
    out = tmp_path / "f.h5"
    r = CliRunner().invoke(cli, ["run", "--pattern", "permutation", "--hosts", "4", "--flow-bytes", "64KiB",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    run = results.read_results(out)["permutation"]
    assert run.summary["flows_completed"] == 4 and not run.ops and not run.iterations
    assert run.config["experiment"]["workload"]["pattern"] == "permutation"


def test_no_arguments_runs_the_builtin_training_scenario(tmp_path, capsys, engine_ns):
    """The built-in scenario's options and naming, cut short by a 1 ms time limit (the whole run is a bench)."""
    out = tmp_path / "d.h5"
    code, stdout, err = run_main(["run", "--transport", "roce", "--max-sim-time-ms", "1", "-o", str(out)], capsys)
    assert code == 1  # not complete: the time limit
    assert stdout.startswith(read_toml(catalog.path_of("builtin"))["description"]) and "iteration time" in stdout
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error: run 'roce' ended time-limit:")
    run = results.read_results(out)["roce"]
    cfg = run.config
    exp = cfg["experiment"]
    assert exp["network"]["topology"] == "leaf-spine" and exp["workload"]["iterations"] == 2
    assert exp["limits"]["max_sim_time_ns"] == 1e6
    assert exp["workload"]["trace"] is None and exp["workload"]["model"] == "llama2-7b"  # generated, no file
    assert cfg["workload"]["n_ranks"] == 16 and cfg["workload"]["specs"]["parallelism"]["tp"] == 4
    assert cfg["fabric"]["n_hosts"] == 16 and cfg["fabric"]["n_switches"] == 4
    assert run.summary["iteration_time_ns"] is None and run.summary["iteration_times_ns"] == [None, None]
    assert run.summary["sim_time_ns"] == pytest.approx(1e6)


def test_default_fabric_of_the_builtin_scenario_is_both():
    """--transport defaults to the experiment's, and the built-in scenario's is both: runs 'roce' and 'ib'."""
    from cosim.cli import run as run_cmd
    from cosim.run import experiments_of
    from cosim.spec import TRANSPORT_CHOICES

    assert run_cmd.TRANSPORT_CHOICES == TRANSPORT_CHOICES  # kept apart so that --help loads no numpy
    ctx = run_cmd.run.make_context("run", [])
    assert ctx.params["transport"] is None  # the experiment's transport: "both" for the built-in scenario
    assert "[default: the experiment's" in " ".join(run_cmd.run.get_help(ctx).split())
    assert [(e.name, e.network.transport) for e in experiments_of(catalog.DEFAULT)] == [("roce", "roce"),
                                                                                         ("ib", "ib")]


def test_algorithm_choices_match_the_lowering():
    """--algorithm accepts exactly the lowering's algorithms, and its help lists every one of them in order."""
    from cosim.cli.run import run as run_cmd
    from cosim.collectives.lower import ALGORITHM_NAMES
    from cosim.spec import field_kind

    option = next(p for p in run_cmd.params if p.name == "algorithm")
    assert field_kind(option.type.path).choices == ALGORITHM_NAMES
    assert tuple(option.help.split(": ", 1)[1].rstrip(".").split(", ")) == ALGORITHM_NAMES


def test_run_help_loads_no_simulator():
    """cosim run --help lists the training options without importing the simulator."""
    text = help_output_loading_nothing_heavy([["run"]])
    assert "--trace" in text and "--iterations" in text and "both" in text


def test_summary_is_json_clean(tmp_path, engine_ns):
    """No NaN in summaries (JSON readers other than Python's reject it): unfinished values are null."""
    out = tmp_path / "n.h5"
    r = CliRunner().invoke(cli, ["run", "--trace", str(_ring_trace_file(tmp_path)), "--gpus-per-server", "1",
                                 "--max-sim-time-ms", "0.01", "-o", str(out)])
    assert r.exit_code == 1
    with h5py.File(out) as f:
        text = f["runs/roce"].attrs["summary"]
    json.loads(text, parse_constant=lambda c: pytest.fail(f"summary holds {c}"))


def test_a_run_that_crosses_no_fabric_says_why(tmp_path, capsys, engine_ns):
    """The 8 ranks of the DP8 trace on its 8-GPU servers share one server: the run completes with 0 flows
    and one warning naming the cause and a --gpus-per-server that spreads them; --dry-run says it first."""
    code, stdout, err = run_main(["run", "--trace", str(DP8), "--transport", "roce", "-q", "-o",
                                  str(tmp_path / "one.h5")], capsys)
    assert code == 0
    assert err.strip() == ("Warning: run 'roce': nothing crossed the fabric: all 8 ranks sit on one server (8 GPUs "
                           "per server), so every transfer went over NVLink; use --gpus-per-server 4 or fewer to "
                           "spread them over servers")
    assert results.read_results(tmp_path / "one.h5")["roce"].summary["flows"] == 0
    code, _, err = run_main(["run", "--trace", str(DP8), "--transport", "roce", "--dry-run"], capsys)
    assert code == 0 and "nothing crossed the fabric" in err
    code, _, err = run_main(["run", "--trace", str(DP8), "--transport", "roce", "--gpus-per-server", "4", "-q",
                             "-o", str(tmp_path / "two.h5")], capsys)
    assert code == 0 and "Warning" not in err
