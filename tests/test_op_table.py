"""telemetry.op_table: the rows of a training run's ops table its results file keeps ("all", "collectives": the
ops that move bytes, "none": no ops group), on real runs of the shipped TP2 PP2 DP2 trace written by
``cosim run``; the summary does not depend on it, and readers of a file without the table say why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import run_main

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import snapshot  # noqa: E402

from cosim import results  # noqa: E402
from cosim.analysis import perfetto, plots  # noqa: E402
from cosim.errors import CosimInputError  # noqa: E402
from cosim.workload.trace import OpKind  # noqa: E402

TRACE = Path(__file__).resolve().parents[1] / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"
RUN = ["run", "--trace", str(TRACE), "--gpus-per-server", "2", "--topology", "single-switch", "--iterations", "2",
       "--chunk-bytes", "1MiB", "--link-gbps", "400", "--transport", "roce", "--name", "t", "-q"]
CHOICES = ("default", "all", "collectives", "none")


@pytest.fixture(scope="module")
def files(tmp_path_factory, engine_ns) -> dict[str, Path]:
    """One results file per op_table choice ("default": the option not given)."""
    folder = tmp_path_factory.mktemp("op_table")
    out = {}
    for choice in CHOICES:
        path = folder / f"{choice}.h5"
        extra = [] if choice == "default" else ["--op-table", choice]
        with pytest.raises(SystemExit) as exc:
            from cosim.cli import main

            main([*RUN, *extra, "-o", str(path)])
        assert exc.value.code in (0, None)
        out[choice] = path
    return out


def _ops(snap: dict) -> dict[str, np.ndarray]:
    return {k.removeprefix("ops/"): v for k, v in snap["t"]["datasets"].items() if k.startswith("ops/")}


def test_all_is_the_default_table(files):
    """op_table = "all" stores exactly what a run without the option stores, every dataset bit for bit."""
    default, every = snapshot(files["default"]), snapshot(files["all"])
    assert sorted(every["t"]["datasets"]) == sorted(default["t"]["datasets"])
    for key, want in default["t"]["datasets"].items():
        got = every["t"]["datasets"][key]
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), key
    assert _ops(every) and OpKind.COMPUTE in _ops(every)["kind"]


def test_collectives_keeps_exactly_the_rows_that_move_bytes(files):
    """op_table = "collectives" stores the non-COMPUTE rows of "all", same columns, dtypes, values and order."""
    every, coll = _ops(snapshot(files["all"])), _ops(snapshot(files["collectives"]))
    keep = every["kind"] != OpKind.COMPUTE
    assert sorted(coll) == sorted(every)
    assert 0 < int(keep.sum()) < keep.size
    for name, column in every.items():
        assert coll[name].dtype == column.dtype, name
        assert np.array_equal(coll[name], column[keep], equal_nan=column.dtype.kind == "f"), name
    assert set(np.unique(coll["kind"]).tolist()) <= {OpKind.COLLECTIVE, OpKind.SEND, OpKind.RECV}


def test_none_writes_no_ops_group(files):
    """op_table = "none": the run has no ops group; its collectives and iterations are stored as with "all"."""
    every, none = snapshot(files["all"]), snapshot(files["none"])
    with h5py.File(files["none"], "r") as h5:
        assert "ops" not in h5["runs/t"] and {"collectives", "iterations", "flows"} <= set(h5["runs/t"])
    rest = [k for k in every["t"]["datasets"] if not k.startswith("ops/")]
    assert sorted(none["t"]["datasets"]) == sorted(rest)
    for key in rest:
        want = every["t"]["datasets"][key]
        assert np.array_equal(none["t"]["datasets"][key], want, equal_nan=want.dtype.kind == "f"), key


def test_summary_and_recorded_choice(files):
    """The summary (wall-clock keys aside) is the same for every choice; the run's config records the choice."""
    summaries = {c: snapshot(p)["t"]["summary"] for c, p in files.items()}
    assert summaries["all"]["status"] == "complete" and summaries["all"]["exposed_comm_ns"] > 0
    for choice in CHOICES:
        assert summaries[choice] == summaries["all"], choice
    for choice, path in files.items():
        with h5py.File(path, "r") as h5:
            config = json.loads(h5["runs/t"].attrs["config"])
        assert config["experiment"]["telemetry"]["op_table"] == ("all" if choice == "default" else choice)


def test_readers_name_the_setting_when_the_table_is_absent(files):
    """Without an ops table, the notebook API's ops is a one-line error naming telemetry.op_table, the
    iterations figure is skipped for that reason and the Perfetto export notes it; with the collective rows
    only, the API returns them and the export still recognises the run's trace."""
    none = results.open(files["none"])["t"]
    with pytest.raises(CosimInputError) as err:
        none.ops  # noqa: B018
    assert err.value.field == "telemetry.op_table" and "\n" not in str(err.value)
    assert none.collectives.shape[0] > 0 and "ops" not in none.groups()

    record = results.read_results(files["none"])["t"]
    skipped = {f.stem: f.reason for f in plots.iter_figures({"t": record}, names=["iterations"])}
    assert skipped["iterations-t"].startswith("telemetry.op_table")
    assert any("telemetry.op_table" in note for note in perfetto.context(record).notes)

    coll = results.open(files["collectives"])["t"]
    assert len(coll.ops) == int((results.open(files["all"])["t"].ops.kind != OpKind.COMPUTE).sum())
    ctx = perfetto.context(results.read_results(files["collectives"])["t"])
    assert ctx.trace is not None and not any("does not match" in note for note in ctx.notes)


@pytest.mark.parametrize("args,needle", [
    (["--op-table", "compute"], "--op-table"),  # an option's error names the option, as every other does
    (["--set", "telemetry.op_table=some"], "telemetry.op_table"),
    (["--set", "op_table=1"], "telemetry.op_table"),
])
def test_bad_op_table_exits_2_naming_the_field(tmp_path, capsys, args, needle, engine_ns):
    """An unknown op_table is one line naming the option or field, exit code 2, and no file."""
    out = tmp_path / "x.h5"
    code, _, err = run_main([*RUN, *args, "-o", str(out)], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and needle in err, err
    assert "choose one of all, collectives, none" in err
    assert not out.exists()


def test_bad_op_table_in_a_toml_file_exits_2(tmp_path, capsys, engine_ns):
    """The same check holds for an experiment file."""
    exp = tmp_path / "e.toml"
    exp.write_text(f'[workload]\nkind = "training"\ntrace = "{TRACE}"\n[telemetry]\nop_table = "rows"\n')
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", str(exp), "-q", "-o", str(out)], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "telemetry.op_table" in err, err
    assert not out.exists()


def test_shared_fabric_keeps_the_workload_column(engine_ns):
    """Two training jobs on one fabric: "collectives" keeps the non-COMPUTE rows of both jobs' table, their
    workload column included, and the shared summary (per-job keys too) is that of "all"."""
    from cosim.run import run
    from cosim.spec import from_document

    tiny = {"num_layers": 1, "hidden_size": 512, "num_heads": 8, "num_kv_heads": 8, "ffn_hidden_size": 1024,
            "vocab_size": 4096, "seq_length": 512}
    jobs = [{"name": n, "kind": "training", "model": "llama2-7b", "model_overrides": tiny, "iterations": 1,
             "parallelism": {"dp": 2, "micro_batch_size": 1, "global_batch_size": 2}} for n in ("a", "b")]
    net = {"topology": "leaf-spine", "gpus_per_server": 1, "hosts_per_leaf": 2, "spines": 1, "hosts": 4}
    every, coll = (run(from_document({"network": net, "workloads": jobs, "telemetry": {"op_table": choice}})[0])
                   for choice in ("all", "collectives"))
    keep = every.ops["kind"] != OpKind.COMPUTE
    assert set(np.unique(every.ops["workload"][keep]).tolist()) == {0, 1}
    assert sorted(coll.ops) == sorted(every.ops)
    for name, column in every.ops.items():
        assert np.array_equal(coll.ops[name], column[keep], equal_nan=column.dtype.kind == "f"), name
    volatile = {"wall_time_s", "packet_hops_per_s"}
    assert ({k: x for k, x in coll.summary.items() if k not in volatile}
            == {k: x for k, x in every.summary.items() if k not in volatile})
