"""cosim compare --pivot and --figure: a sweep as one table and one figure, on real incasts over transport
and link rate."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import run_main
from test_analysis_plots import assert_real_image

from cosim import results
from cosim.analysis.sweep import sweep_figure
from cosim.results.pivot import pivot_runs, swept_fields
from cosim.run import run as run_experiment
from cosim.spec import make

TRANSPORTS, RATES_GBPS = ("roce", "ib"), (100.0, 200.0)


@pytest.fixture(scope="module")
def sweep(engine_ns):
    """{name: RunRecord} of a 4-to-1 incast of 256 KiB flows for each transport × link rate."""
    return {f"{t}-{int(g)}": run_experiment(make("flows", name=f"{t}-{int(g)}", hosts=4, flow_bytes=256 * 1024,
                                                 transport=t, link_gbps=g))
            for t in TRANSPORTS for g in RATES_GBPS}


@pytest.fixture(scope="module")
def sweep_file(sweep, tmp_path_factory):
    return results.write_results(tmp_path_factory.mktemp("pivot") / "sweep.h5", list(sweep.values()))


def test_swept_fields_are_what_differs_between_the_experiments(sweep):
    """Only the transport and the link rate differ: the transport first, every run's own values."""
    fields = swept_fields([r.config for r in sweep.values()])
    assert list(fields) == ["network.transport", "network.link_gbps"]
    assert fields["network.transport"] == ["roce", "roce", "ib", "ib"]
    assert fields["network.link_gbps"] == [100.0, 200.0, 100.0, 200.0]


def test_pivot_rows_and_ratio_follow_the_link_rate(sweep):
    """A row per run with the flow metrics; an incast's FCT is its serialization at the receiver's link, so
    doubling the rate about halves FCT p50, and the ratio column says so against the baseline."""
    table = pivot_runs(sweep)
    assert table.runs == tuple(sweep) and table.baseline == "roce-100"
    assert table.primary.key == "fct_p50_ns" and [m.key for m in table.metrics][:2] == ["fct_p50_ns", "fct_p99_ns"]
    fct = table.column("fct_p50_ns")
    assert fct == [r.summary["fct_p50_ns"] for r in sweep.values()]
    assert table.ratios[0] == 1.0 and table.ratios[1] == pytest.approx(fct[1] / fct[0])
    for slow, fast in ((0, 1), (2, 3)):
        assert 0.45 < fct[fast] / fct[slow] < 0.6
    # RoCE pauses, InfiniBand stalls on credits: columns that are zero in every run are left out
    keys = {m.key for m in table.metrics}
    assert "drops" not in keys
    moved = pivot_runs(sweep, baseline="ib-200", metrics=["fct_p99_ns", "max_queue_bytes"])
    assert [m.key for m in moved.metrics] == ["fct_p99_ns", "max_queue_bytes"]
    assert moved.ratios[3] == 1.0 and moved.ratios[0] > 1.6


def test_compare_pivots_more_than_two_runs_in_one_block(sweep_file, capsys):
    """Four runs give one table of a row per run (not three pairwise blocks); --full keeps the long form."""
    code, out, err = run_main(["compare", str(sweep_file)], capsys)
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["transport", "link_gbps", "FCT", "p50"]
    assert lines[1].split()[:2] == ["us", "vs"] and set(lines[2]) <= {"-", " "}
    assert [ln.split()[:2] for ln in lines[3:7]] == [["roce", "100"], ["roce", "200"], ["ib", "100"], ["ib", "200"]]
    assert lines[7].startswith("ratio: FCT p50 / the baseline's (roce-100)")
    assert max(map(len, lines)) <= 100
    code, full, _ = run_main(["compare", str(sweep_file), "--full"], capsys)
    assert code == 0 and full.splitlines()[0].split()[:2] == ["metric", "unit"]


def test_pivot_csv_and_json_keep_summary_units(sweep, sweep_file, capsys):
    code, out, _ = run_main(["compare", str(sweep_file), "--pivot", "--csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["run"] for r in rows] == list(sweep)
    assert float(rows[1]["fct_p50_ns"]) == sweep["roce-200"].summary["fct_p50_ns"]
    assert rows[2]["network.transport"] == "ib" and float(rows[2]["network.link_gbps"]) == 100.0
    code, out, _ = run_main(["compare", str(sweep_file), "--pivot", "--json", "--baseline", "ib-100"], capsys)
    doc = json.loads(out)
    assert doc["baseline"] == "ib-100" and doc["ratio_of"] == "fct_p50_ns"
    assert doc["runs"][2]["ratio"] == 1.0 and doc["runs"][0]["fields"]["network.transport"] == "roce"


def test_sweep_figure_draws_a_line_per_transport_against_the_rate(sweep, sweep_file, tmp_path, capsys):
    """The figure's lines are the table's values in display units (us), one per transport, x the link rate."""
    table = pivot_runs(sweep)
    fig = sweep_figure(table)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "link_gbps (Gbps)" and ax.get_ylabel() == "FCT p50 (us)"
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"transport=roce", "transport=ib"}
    for t, start in (("roce", 0), ("ib", 2)):
        np.testing.assert_array_equal(lines[f"transport={t}"].get_xdata(), RATES_GBPS)
        np.testing.assert_allclose(lines[f"transport={t}"].get_ydata(),
                                   np.array(table.column("fct_p50_ns")[start:start + 2]) / 1e3)
    target = tmp_path / "fct.png"
    code, _, err = run_main(["compare", str(sweep_file), "--metric", "fct_p99_ns", "--figure", str(target)], capsys)
    assert code == 0 and not err
    assert_real_image(target)
    from matplotlib import image

    pixels = (image.imread(target, format="png")[..., :3] * 255).round().astype(int).reshape(-1, 3)
    for rgb in ((31, 119, 180), (255, 127, 14)):  # tab:blue and tab:orange: both lines are drawn
        assert (np.abs(pixels - rgb).sum(axis=1) < 6).sum() > 100


@pytest.mark.parametrize("args, field", [
    (["--figure", "x.gif"], "--figure"),
    (["--metric", "no_such_key"], "--metric"),
    (["--figure", "x.png", "--x", "hosts"], "--x"),
])
def test_bad_pivot_options_exit_2_naming_the_option(sweep_file, tmp_path, monkeypatch, capsys, args, field):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["compare", str(sweep_file), *args], capsys)
    assert code == 2 and err.startswith(f"Error: {field}:") and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_cosim_plot_of_a_sweep_draws_the_sweep_figure(sweep_file, tmp_path, capsys):
    """cosim plot of 3 or more runs that differ in a field writes sweep.png (FCT p50 against the link rate,
    a line per transport); of 2 runs it is skipped and says why."""
    code, out, _ = run_main(["plot", str(sweep_file), "-o", str(tmp_path / "all"), "--figure", "sweep"], capsys)
    assert code == 0 and (tmp_path / "all" / "sweep.png").exists()
    assert_real_image(tmp_path / "all" / "sweep.png")
    code, out, _ = run_main(["plot", str(sweep_file), "-o", str(tmp_path / "two"), "--figure", "sweep",
                             "--run", "roce-100", "--run", "ib-100"], capsys)
    assert code == 0 and "skipped sweep: fewer than 3 runs" in out and not (tmp_path / "two").exists()
