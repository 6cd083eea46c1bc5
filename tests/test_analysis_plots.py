"""cosim plot and cosim report: real runs → PNGs that decode, HTML that embeds them."""

from __future__ import annotations

import base64
import dataclasses
import io
import re
from pathlib import Path

import numpy as np
import pytest

from cosim import results
from cosim.analysis import plots
from conftest import run_main
from test_analysis_compare import incast_pair

TRACE = Path(__file__).resolve().parents[1] / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"


def ops_from_trace(path: Path) -> tuple[dict, dict]:
    """ops and iterations tables of one iteration of a real cosim trace, timed with zero-cost communication."""
    from cosim.workload.timeline import compute_only_timeline
    from cosim.workload.trace import read_trace

    trace = read_trace(path)
    start, end = compute_only_timeline(trace)
    n = trace.n_ops
    ops = {"iteration": np.zeros(n, np.int32), "trace_op": np.arange(n, dtype=np.int64), "rank": trace.rank,
           "kind": trace.kind, "phase": trace.phase, "coll_id": trace.coll_id,
           "start_ns": start.astype(np.float64), "finish_ns": end.astype(np.float64)}
    iterations = {"iteration": np.zeros(1, np.int32), "start_ns": np.array([0.0]),
                  "finish_ns": np.array([float(end.max())]), "time_ns": np.array([float(end.max())]),
                  "exposed_comm_ns": np.array([0.0])}
    return ops, iterations


@pytest.fixture(scope="module")
def results_file(engine_ns, tmp_path_factory):
    """dcqcn (no pauses) and pfc (PFC pauses) runs of one incast, plus an 'iter' run with only an ops timeline."""
    on, off = incast_pair()
    ops, iterations = ops_from_trace(TRACE)
    it = results.RunRecord(name="iter", config=on.config, provenance=on.provenance, summary=on.summary, ops=ops,
                           iterations=iterations)
    return results.write_results(tmp_path_factory.mktemp("plots") / "runs.h5", [on, off, it])


def assert_real_image(data_or_path):
    from matplotlib import image

    img = image.imread(data_or_path if not isinstance(data_or_path, bytes) else io.BytesIO(data_or_path),
                       format="png")
    assert img.shape[:2] == (round(plots.FIGSIZE_IN[1] * plots.DPI), round(plots.FIGSIZE_IN[0] * plots.DPI))
    flat = img.reshape(-1, img.shape[-1])
    assert len(np.unique(flat[:: max(1, flat.shape[0] // 20000)], axis=0)) > 10  # not one colour


def test_plot_writes_every_figure_with_data_and_skips_the_rest(results_file, tmp_path, capsys):
    out = tmp_path / "figs"
    code, stdout, err = run_main(["plot", str(results_file), "-o", str(out)], capsys)
    assert code == 0 and not err
    names = sorted(p.name for p in out.iterdir())
    expected = {"fct-cdf.png", "fct-slowdown-cdf.png", "latency-cdf.png", "queues-dcqcn.png", "queue-heatmap-dcqcn.png", "queues-pfc.png",
                "queue-heatmap-pfc.png", "pfc-pauses-pfc.png", "iterations-iter.png"}
    assert expected <= set(names)
    assert "pfc-pauses-dcqcn.png" not in names and not any(n.startswith("credit-stalls") for n in names)
    assert not any(n.startswith(".") for n in names)  # no temporaries left
    for name in expected:
        assert_real_image(out / name)
    assert "skipped pfc-pauses-dcqcn: no PFC pause events" in stdout
    assert "skipped iterations-dcqcn: no ops table" in stdout


def test_run_selection_format_and_stall_timeline(results_file, tmp_path, capsys):
    code, _, _ = run_main(["plot", str(results_file), "--run", "pfc", "--format", "svg", "-o", str(tmp_path)], capsys)
    assert code == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "pfc-pauses-pfc.svg" in names and not any("dcqcn" in n for n in names)
    assert (tmp_path / "fct-cdf.svg").read_text().lstrip().startswith("<?xml")
    # The credit-stall figure reads the same event shape (time, node, port, lane, on/off): drive it with the
    # real PFC events of the pfc run relabelled as stalls.
    rec = results.read_results(results_file)["pfc"]
    p = rec.pauses
    stalled = dataclasses.replace(rec, stalls={"time_ns": p["time_ns"], "node": p["node"], "port": p["port"],
                                               "vl": p["priority"], "stalled": p["paused"]})
    fig = plots.stall_timeline(stalled)
    assert fig is not None and "credit-stall" in fig.axes[0].get_title()
    assert fig.axes[0].get_xlabel() == "simulated time (us)"
    png = plots.render(fig)
    assert_real_image(png)
    assert plots.render(fig) == png and plots.render(fig, "svg") == plots.render(fig, "svg")  # bit for bit


def test_every_axis_is_labelled_with_a_unit(results_file):
    runs = results.read_results(results_file)
    for res in plots.iter_figures(runs):
        if res.figure is None:
            continue
        ax = res.figure.axes[0]
        assert re.search(r"\(.+\)", ax.get_xlabel()), (res.stem, ax.get_xlabel())
        assert ax.get_ylabel(), res.stem


def test_forward_fill_and_state_intervals_are_exact():
    # port 0 changes at 10 ns (5 B) and 30 ns (0 B); port 1 only at 20 ns (7 B); nothing before.
    t = np.array([30.0, 10.0, 20.0])
    k = np.array([0, 0, 1])
    v = np.array([0, 5, 7])
    grid = np.array([0.0, 10.0, 15.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(plots.forward_fill(t, k, v, 3, grid),
                                  [[0, 5, 5, 5, 0, 0], [0, 0, 0, 7, 7, 7], [0, 0, 0, 0, 0, 0]])
    key, start, end = plots.state_intervals(np.array([5.0, 1.0, 2.0, 9.0]), np.array([0, 0, 1, 0]),
                                            np.array([0, 1, 1, 1]), 12.0)
    order = np.argsort(start)
    np.testing.assert_array_equal(key[order], [0, 1, 0])
    np.testing.assert_array_equal(start[order], [1.0, 2.0, 9.0])
    np.testing.assert_array_equal(end[order], [5.0, 12.0, 12.0])


def test_latency_cdf_from_the_histogram_is_monotone_to_one(results_file):
    lat = results.read_results(results_file)["dcqcn"].latency
    x, y = plots.latency_cdf_points(lat["low_ns"], lat["count"])
    assert y[0] == 0 and y[-1] == pytest.approx(1.0)
    assert np.all(np.diff(x) > 0) and np.all(np.diff(y) >= 0)


def test_report_is_one_self_contained_page(results_file, tmp_path, capsys):
    target = tmp_path / "report.html"
    code, out, _ = run_main(["report", str(results_file), "-o", str(target), "--baseline", "pfc"], capsys)
    assert code == 0 and "wrote" in out and [p.name for p in tmp_path.iterdir()] == ["report.html"]
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    srcs = re.findall(r'src="([^"]*)"', page)
    # 9 figures: the FCT, slowdown and latency CDFs, queues, heatmaps and pauses per run, the Gantt
    assert len(srcs) == 9 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert_real_image(base64.b64decode(srcs[0].split(",", 1)[1]))
    assert "FCT p99" in page and "<th" in page and 'class="diff"' in page  # dcqcn differs between runs
    assert page.index(">pfc</th>") < page.index(">dcqcn</th>")  # baseline column first


def test_summary_only_file_plots_nothing_and_says_why(results_file, tmp_path, capsys):
    rec = results.read_results(results_file)["dcqcn"]
    small = results.write_results(tmp_path / "s.h5", [results.RunRecord(name="s", config=rec.config,
                                                                      provenance=rec.provenance, summary=rec.summary)])
    code, out, _ = run_main(["plot", str(small), "-o", str(tmp_path / "figs")], capsys)
    assert code == 0 and "wrote 0 figure(s)" in out and "skipped queues-s: no queue samples" in out
    capped = [r for r in plots.iter_figures({"a": rec, "b": rec}, max_runs=1) if "first 1 runs" in r.reason]
    assert [r.stem for r in capped] == ["*-b"]  # reports cap the per-run figures of big sweeps


def test_unknown_run_exits_2_before_writing(results_file, tmp_path, capsys):
    for verb, target in (("plot", tmp_path / "figs"), ("report", tmp_path / "r.html")):
        code, _, err = run_main([verb, str(results_file), "--run", "nope", "-o", str(target)], capsys)
        assert code == 2 and "--run" in err and len(err.strip().splitlines()) == 1
        assert not target.exists()
