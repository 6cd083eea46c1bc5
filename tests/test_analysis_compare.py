"""cosim compare: metrics x runs with deltas and ratios, on real DCQCN-on vs PFC-only incasts."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import help_output_loading_nothing_heavy, run_main

from cosim import results
from cosim.results.compare import compare_runs, label_runs
from cosim.results.metrics import metric_for, ordered_keys
from cosim.run import run as run_experiment
from cosim.spec import make

# A 3-to-1 incast of 1 MB flows: with DCQCN on the default deep buffer (no pauses), and without DCQCN on a
# 2 MB shared buffer, where the switch must pause the senders (3 MB arrive at once).
SHALLOW = {"attributes.SharedBufferMmu::BufferBytes": "2000000"}


def incast_pair():
    """(DCQCN-on record, PFC-only record) of the same incast (shared with tests/test_analysis_plots.py)."""
    on = run_experiment(make("flows", name="dcqcn", hosts=4, flow_bytes=1_000_000))  # deep buffer
    off = run_experiment(make("flows", name="pfc", hosts=4, flow_bytes=1_000_000, dcqcn=False, **SHALLOW))
    return on, off


@pytest.fixture(scope="module")
def pair(engine_ns):
    """(DCQCN-on record, PFC-only record) of the same incast."""
    return incast_pair()


@pytest.fixture(scope="module")
def files(pair, tmp_path_factory):
    """both.h5 with runs dcqcn and pfc; a.h5 and b.h5 each with one run named 'incast'."""
    d = tmp_path_factory.mktemp("cmp")
    on, off = pair
    both = results.write_results(d / "both.h5", [on, off])
    rename = lambda r: results.RunRecord(name="incast", config=r.config, provenance=r.provenance,  # noqa: E731
                                         summary=r.summary, flows=r.flows)
    a = results.write_results(d / "a.h5", [rename(on)])
    b = results.write_results(d / "b.h5", [rename(off)])
    return both, a, b


def test_deltas_and_ratios_against_the_first_run(pair):
    on, off = pair
    table = compare_runs([on, off])
    assert table.runs == ("dcqcn", "pfc") and table.baseline == "dcqcn"
    # DCQCN sends CNPs and avoids PFC; without it, no CNPs and the switch pauses the senders.
    cnps = table.row("cnps_sent")
    assert cnps.values == (on.summary["cnps_sent"], 0) and on.summary["cnps_sent"] > 0
    assert cnps.deltas[1] == -on.summary["cnps_sent"] and cnps.ratios[1] == 0.0
    paused = table.row("pfc_paused_ns")
    assert paused.values[0] == 0.0 and paused.values[1] > 0
    assert paused.deltas[1] == paused.values[1] and paused.ratios[1] is None  # ratio to 0 is undefined
    fct = table.row("fct_p99_ns")
    assert fct.ratios[1] == pytest.approx(off.summary["fct_p99_ns"] / on.summary["fct_p99_ns"])
    assert fct.deltas[0] == 0 and fct.ratios[0] == 1.0
    status = table.row("status")
    assert status.values == ("complete", "complete") and status.deltas == (None, None)


def test_baseline_moves_first_and_flips_the_ratios(pair):
    on, off = pair
    table = compare_runs({"dcqcn": on, "pfc": off}, baseline="pfc")
    assert table.runs == ("pfc", "dcqcn")
    assert table.row("cnps_sent").ratios[1] is None  # baseline 0 CNPs


def test_known_metrics_first_in_catalogue_order_then_the_rest_sorted():
    """ordered_keys puts catalogued metrics in METRICS order, then unknown scalar keys sorted; units by
    suffix."""
    keys = ordered_keys([{"zeta_ns": 1.0, "fct_p99_ns": 2.0, "alpha": 3, "status": "complete", "blob": [1, 2]},
                         {"flows": 4, "coll_dp_all_reduce_p50_ns": 5.0}])
    assert keys == ["status", "coll_dp_all_reduce_p50_ns", "flows", "fct_p99_ns", "alpha", "zeta_ns"]
    m = metric_for("coll_dp_all_reduce_p50_ns")
    assert (m.label, m.unit, m.raw_unit, m.scale) == ("DP all-reduce time p50", "us", "ns", 1e-3)
    assert metric_for("coll_tp_all_gather_busbw_gbyte_per_s").raw_unit == "GB/s"
    table = compare_runs({"x": {"fct_p99_ns": 2000.0}, "y": {"flows": 3}})
    assert table.row("fct_p99_ns").values == (2000.0, None) and table.row("flows").values == (None, 3)
    header, body = table.cells()
    assert body[0][:3] == ["flows", "", ""] and body[1][2] == "2"  # missing -> blank, ns -> us


def test_text_table_is_aligned_with_units(files, capsys):
    code, out, err = run_main(["compare", str(files[0])], capsys)
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].split() == ["metric", "unit", "dcqcn", "pfc", "delta", "ratio"]
    row = next(line for line in lines if line.startswith("FCT p99 "))
    assert " us " in row
    assert len({len(line) for line in lines[:2]}) == 1  # header and rule line up


def test_json_and_csv_parse_back(files, pair, capsys, tmp_path):
    on, off = pair
    code, out, _ = run_main(["compare", str(files[0]), "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["baseline"] == "dcqcn" and data["runs"] == ["dcqcn", "pfc"]
    fct = next(m for m in data["metrics"] if m["key"] == "fct_p99_ns")
    assert fct["unit"] == "ns"
    assert fct["values"] == {"dcqcn": on.summary["fct_p99_ns"], "pfc": off.summary["fct_p99_ns"]}
    assert fct["delta"]["pfc"] == off.summary["fct_p99_ns"] - on.summary["fct_p99_ns"]
    assert data == compare_runs([on, off]).to_dict()

    target = tmp_path / "cmp.csv"
    code, out, _ = run_main(["compare", str(files[0]), "--csv", "-o", str(target)], capsys)
    assert code == 0 and out == "" and [p.name for p in tmp_path.iterdir()] == ["cmp.csv"]
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(target.read_text()))}
    assert float(rows["fct_p99_ns"]["pfc"]) == off.summary["fct_p99_ns"]
    assert float(rows["cnps_sent"]["ratio pfc"]) == 0.0 and rows["pfc_paused_ns"]["ratio pfc"] == ""
    assert rows["ecn_marks"]["unit"] == "" and rows["max_queue_bytes"]["unit"] == "B"


def test_same_run_name_in_two_files_is_labelled_file_colon_run(files, capsys):
    _, a, b = files
    assert list(label_runs({str(a): {"incast": 1}, str(b): {"incast": 2, "x": 3}})) == ["a:incast", "b:incast", "x"]
    code, out, _ = run_main(["compare", str(a), str(b), "--baseline", "b:incast", "--json"], capsys)
    assert code == 0 and json.loads(out)["runs"] == ["b:incast", "a:incast"]


@pytest.mark.parametrize("extra,needle", [
    (["--baseline", "nope"], "--baseline"),
    (["--run", "nope"], "--run"),
    (["--baseline", "incast"], "ambiguous"),
])
def test_bad_selection_exits_2_with_one_line_and_no_file(files, capsys, tmp_path, extra, needle):
    _, a, b = files
    code, out, err = run_main(["compare", str(a), str(b), *extra, "--csv", "-o", str(tmp_path / "x.csv")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_missing_or_corrupt_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"junk")
    for target in (bad, tmp_path / "none.h5"):
        code, _, err = run_main(["compare", str(target)], capsys)
        assert code == 2 and str(target) in err and len(err.strip().splitlines()) == 1


def test_compare_reads_summaries_and_checks_every_table_s_structure(files, capsys, tmp_path):
    """compare reads the runs' summaries only: a bad value in a flows column leaves its answer intact (plot,
    which draws the column, refuses it), while a column cut short is refused by both, naming it."""
    import shutil

    import h5py

    both = files[0]
    valued, cut = tmp_path / "valued.h5", tmp_path / "cut.h5"
    for path in (valued, cut):
        shutil.copy(both, path)
    with h5py.File(valued, "r+") as h5:
        h5["runs/pfc/flows/fct_ns"][0] = -1.0
    with h5py.File(cut, "r+") as h5:
        data = h5["runs/pfc/flows/fct_ns"][()]
        del h5["runs/pfc/flows/fct_ns"]
        h5["runs/pfc/flows/fct_ns"] = data[:-1]
    code, out, _ = run_main(["compare", str(both)], capsys)
    assert code == 0 and run_main(["compare", str(valued)], capsys)[:2] == (0, out)
    code, _, err = run_main(["plot", str(valued), "-o", str(tmp_path / "fig"), "--figure", "fct-cdf"], capsys)
    assert code == 2 and "runs/pfc/flows/fct_ns" in err and "negative" in err
    for verb in (["compare", str(cut)], ["plot", str(cut), "-o", str(tmp_path / "fig"), "--figure", "fct-cdf"]):
        code, _, err = run_main(verb, capsys)
        assert code == 2 and "runs/pfc/flows/fct_ns" in err and "length" in err and len(err.strip().splitlines()) == 1


def test_help_of_every_analysis_verb_stays_light():
    text = help_output_loading_nothing_heavy([["compare"], ["plot"], ["report"], ["sweep"], ["merge"], []],
                                             heavy=("numpy", "h5py", "matplotlib", "pandas", "cppyy"))
    assert "cosim compare a.h5 b.h5 --csv" in text and "--shard" in text
