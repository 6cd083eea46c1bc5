"""cosim plot and cosim report: real runs → PNGs that decode, HTML that embeds them."""

from __future__ import annotations

import base64
import dataclasses
import io
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main
from test_analysis_compare import incast_pair

from cosim import results
from cosim.analysis import plots
from cosim.analysis.ports import PortNames, port_names
from cosim.results.metrics import format_number, metric_for
from cosim.run import run as run_experiment
from cosim.spec import make

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
    assert fig.axes[0].get_xlabel() == f"simulated time ({metric_for('sim_time_ns').unit})"
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
    # 10 figures: the FCT, slowdown and latency CDFs, the sweep (dcqcn and buffer differ between the runs),
    # queues, heatmaps and pauses per run, the Gantt
    assert len(srcs) == 10 and all(s.startswith("data:image/png;base64,") for s in srcs)
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


# ---------------------------------------------------------------- real runs with a shape to show

def rail_training_run():
    """One iteration of the shipped llama2 trace (TP2 PP2 DP2) on a rail-optimized RoCE fabric: its egress
    queues only ever hold microsecond bursts of a few KB, over a run of ~100 ms."""
    return run_experiment(make("training", name="train", trace=str(TRACE), topology="rail-optimized",
                               gpus_per_server=2, iterations=1))


@pytest.fixture(scope="module")
def training_run(engine_ns):
    return rail_training_run()


@pytest.fixture(scope="module")
def leaf_spine_run(engine_ns):
    """A permutation of 8 hosts on 2 leaves and 2 spines (half the flows cross a spine)."""
    return run_experiment(make("flows", name="perm", pattern="permutation", topology="leaf-spine", hosts=8,
                               hosts_per_leaf=4, flow_bytes=200_000))


@pytest.fixture(scope="module")
def star_permutation(engine_ns):
    """A permutation of 4 hosts on one switch: every flow has the same two-hop path and no competitor."""
    return run_experiment(make("flows", name="star", pattern="permutation", topology="single-switch", hosts=4,
                               flow_bytes=100_000))


@pytest.fixture(scope="module")
def burst_run(engine_ns):
    """4 ranks on 4 servers: 20 ms of compute, a 64 KiB all-to-all (a few microseconds of queueing at the
    switch), 20 ms of compute: one short burst in a 40 ms run, far shorter than a heatmap bin (100 us)."""
    from test_cosim_roce import make_trace

    from cosim.workload.trace import CollKind, OpKind, Phase

    ops, deps = [], []
    for r in range(4):
        first = len(ops)
        ops += [dict(rank=r, kind=OpKind.COMPUTE, phase=Phase.FORWARD, duration_ns=20_000_000),
                dict(rank=r, kind=OpKind.COLLECTIVE, phase=Phase.FORWARD, bytes=64 * 1024,
                     coll_kind=CollKind.ALL_TO_ALL, group=0, coll_id=0),
                dict(rank=r, kind=OpKind.COMPUTE, phase=Phase.FORWARD, duration_ns=20_000_000)]
        deps += [[], [first], [first + 1]]
    trace = make_trace(4, ops, deps, groups=[[0, 1, 2, 3]])
    return run_experiment(make("training", name="burst", topology="single-switch", gpus_per_server=1,
                               link_gbps=100), trace=trace)


def test_heatmap_keeps_bursts_shorter_than_a_bin(burst_run):
    """Each heatmap cell is its port's peak in the bin, so the colour scale tops at the line plot's peak; a
    point sample per bin (forward fill) misses the burst of this run."""
    lines = plots.queue_lines(burst_run, top_n=1)
    line_peak = max(float(np.max(line.get_ydata())) for line in lines.axes[0].get_lines())
    heat = plots.queue_heatmap(burst_run)
    image = heat.axes[0].images[0]
    scale = metric_for("max_queue_bytes").scale
    assert float(image.get_array().max()) == pytest.approx(line_peak, rel=1e-12)
    assert image.norm.vmax == pytest.approx(line_peak, rel=1e-12)
    assert line_peak == pytest.approx(burst_run.queues["bytes"].max() * scale, rel=1e-12)
    assert "peak per bin" in heat.axes[1].get_ylabel()  # the colourbar
    q = burst_run.queues
    keys, kid = plots.key_ids(q["node"], q["port"])
    grid = np.linspace(0.0, plots._end_ns(burst_run), plots.GRID_POINTS)
    sampled = plots.forward_fill(q["time_ns"], kid, q["bytes"], len(keys), grid).max() * scale
    print(f"\nqueue peak {line_peak:.4g} KB; forward-filled grid shows {sampled:.4g} KB")
    assert sampled < 0.2 * line_peak  # the bursts are shorter than a bin: this run really tests it


@pytest.mark.parametrize("t,k,v,edges,expected", [
    # key 0: 3 at 5 ns, 9 at 12, 1 at 13; key 1: 4 at 30 and 6 exactly at the last edge (counts in the last bin)
    ([5, 12, 13, 30, 40], [0, 0, 0, 1, 1], [3, 9, 1, 4, 6], [0, 10, 20, 40], [[3, 9, 1], [0, 0, 6]]),
    # a value set before the grid starts carries into every bin until it changes
    ([0, 25], [0, 0], [7, 2], [0, 10, 20, 30], [[7, 7, 7]]),
    # no samples at all: zeros
    ([], [], [], [0, 10, 20], [[0, 0]]),
])
def test_peak_per_bin_is_exact(t, k, v, edges, expected):
    """A bin's value is the larger of the depth carried in at its start and every sample inside it."""
    got = plots.peak_per_bin(np.array(t, np.float64), np.array(k, np.int64), np.array(v, np.int64),
                             len(expected), np.array(edges, np.float64))
    np.testing.assert_array_equal(got, expected)


def test_ports_are_named_by_switch_and_the_peer_they_face(leaf_spine_run):
    """Leaf-spine ports read "leaf1 → spine0", "spine0 → leaf1", "leaf0 → host3", consistent with the wiring."""
    names = port_names(leaf_spine_run)
    p = leaf_spine_run.ports
    labels = [names.port(n, q) for n, q in zip(p["node"], p["port"])]
    hosts = [f"host{i} → leaf{i // 4}" for i in range(8)]
    down = [f"leaf{i // 4} → host{i}" for i in range(8)]
    fabric = [f"{a} → {b}" for leaf in ("leaf0", "leaf1") for spine in ("spine0", "spine1")
              for a, b in ((leaf, spine), (spine, leaf))]
    assert sorted(labels) == sorted(hosts + down + fabric)
    heat = plots.queue_heatmap(leaf_spine_run)
    ticks = [t.get_text() for t in heat.axes[0].get_yticklabels()]
    assert ticks and all(re.fullmatch(r"(leaf|spine)\d → (host|leaf|spine)\d", t) for t in ticks), ticks


def test_port_labels_fall_back_to_ids_and_mark_parallel_links(leaf_spine_run):
    """Without a rebuildable fabric a port is "node N port P"; parallel links to one peer add the port."""
    bare = dataclasses.replace(leaf_spine_run, config={})
    assert port_names(bare).port(8, 0) == "node 8 port 0"
    broken = dataclasses.replace(leaf_spine_run, config={**leaf_spine_run.config,
                                                         "fabric": {**leaf_spine_run.config["fabric"], "n_nodes": 3}})
    assert port_names(broken).port(8, 0) == "node 8 port 0"  # a rebuilt fabric that differs is not trusted
    no_ports = dataclasses.replace(leaf_spine_run, ports={})
    assert port_names(no_ports).port(8, 4) == "leaf0 port 4"
    twin = PortNames(names=("host0", "leaf0", "spine0"), peer={(1, 1): 2, (1, 2): 2}, parallel=frozenset({(1, 2)}))
    assert twin.port(1, 2) == "leaf0 → spine0 (port 2)" and twin.port(0, 0) == "host0 port 0"


def test_degenerate_cdfs_draw_a_step_at_the_value_with_a_note(star_permutation, training_run):
    """All flows of the uncontended star finish at one FCT, and every packet of the quiet training run lands
    in one latency bucket: each CDF is a visible step there, with a note, on axes of non-zero width."""
    fct_ns = star_permutation.flows["fct_ns"]
    assert np.unique(fct_ns).size == 1
    fct = metric_for("fct_p50_ns")
    fig = plots.fct_cdf({"star": star_permutation})
    ax = fig.axes[0]
    value = float(fct_ns[0]) * fct.scale
    left, right = ax.get_xlim()
    assert left < value < right and right - left >= 0.1 * value
    x, y = ax.get_lines()[0].get_data()
    assert y[0] == 0 and y[-1] == 1 and set(x[(y > 0) & (y < 1)]) == {value}  # the rise is all at the value
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"star: all 4 flows at {format_number(value)} {fct.unit}"]
    lat = plots.latency_cdf({"train": training_run}).axes[0]
    assert "every packet in one bucket" in lat.get_legend().get_texts()[0].get_text()
    lo, hi = lat.get_xlim()
    bucket = lat.get_lines()[0].get_xdata()[1:-1]
    assert lo < bucket.min() < bucket.max() < hi


def test_plots_use_the_units_of_the_tables(results_file, training_run):
    """Time, queue depth, FCT and latency axes carry the display unit the metric registry gives the
    summary tables, so a number reads the same on a plot as in 'cosim run'."""
    unit = lambda key: metric_for(key).unit  # noqa: E731
    runs = dict(results.read_results(results_file)) | {"train": training_run}
    figures = {r.stem.split("-")[0] if r.stem.startswith(("queues", "iterations")) else r.stem: r.figure
               for r in plots.iter_figures(runs) if r.figure is not None}
    assert figures["fct-cdf"].axes[0].get_xlabel().endswith(f"({unit('fct_p50_ns')})")
    assert figures["latency-cdf"].axes[0].get_xlabel().endswith(f"({unit('latency_p50_ns')})")
    for fig in plots.iter_figures(runs):
        if fig.figure is not None and not fig.stem.endswith("cdf") and fig.stem != "sweep":
            assert fig.figure.axes[0].get_xlabel() == f"simulated time ({unit('sim_time_ns')})", fig.stem
    assert figures["queues"].axes[0].get_ylabel() == f"queue depth ({unit('max_queue_bytes')})"


def test_figure_option_draws_only_the_named_figures(results_file, tmp_path, capsys):
    """--figure picks figures by name (shared and per run); the others are neither drawn nor listed."""
    out = tmp_path / "picked"
    code, stdout, err = run_main(["plot", str(results_file), "-o", str(out), "--figure", "fct-cdf",
                                  "--figure", "pfc-pauses"], capsys)
    assert code == 0 and not err
    assert sorted(p.name for p in out.iterdir()) == ["fct-cdf.png", "pfc-pauses-pfc.png"]
    assert_real_image(out / "pfc-pauses-pfc.png")
    assert "queues" not in stdout and "skipped pfc-pauses-dcqcn: no PFC pause events" in stdout
    code, _, err = run_main(["plot", str(results_file), "-o", str(out), "--figure", "nope"], capsys)
    assert code == 2 and "'nope' is not one of" in err


@pytest.mark.parametrize("row, start, stop, gap, expected", [
    # overlapping and touching intervals of one row join; a gap wider than `gap` keeps them apart
    ([0, 0, 0], [0.0, 5.0, 20.0], [10.0, 12.0, 30.0], 1.0, ([0, 0], [0.0, 20.0], [12.0, 30.0])),
    # a gap below `gap` joins; the other row is merged on its own, whatever the order given
    ([1, 0, 0, 1], [3.0, 0.0, 10.5, 0.0], [4.0, 10.0, 11.0, 1.0], 1.0, ([0, 1, 1], [0.0, 0.0, 3.0], [11.0, 1.0, 4.0])),
    # an interval inside a longer earlier one adds nothing; the next starts after the longer one ends
    ([0, 0, 0], [0.0, 1.0, 50.0], [40.0, 2.0, 60.0], 5.0, ([0, 0], [0.0, 50.0], [40.0, 60.0])),
])
def test_merge_intervals_joins_what_a_pixel_cannot_separate(row, start, stop, gap, expected):
    r, a, b = plots.merge_intervals(np.array(row), np.array(start), np.array(stop), gap)
    assert (r.tolist(), a.tolist(), b.tolist()) == tuple(list(x) for x in expected)


def test_key_ids_match_a_row_wise_unique():
    """The packed one-column unique gives the rows and indices np.unique(axis=0) gives."""
    rng = np.random.default_rng(3)
    cols = [rng.integers(0, n, 5000) for n in (40, 9, 8)]
    keys, kid = plots.key_ids(*cols)
    want_keys, want_kid = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    np.testing.assert_array_equal(keys, want_keys)
    np.testing.assert_array_equal(kid, want_kid.reshape(-1))


def test_report_of_more_than_two_runs_has_one_compact_summary(results_file, tmp_path, capsys):
    """Three runs: the summary is a row per run (the pivot), the full table folded below; --figure keeps
    only the named figures in the page."""
    target = tmp_path / "r.html"
    code, _, _ = run_main(["report", str(results_file), "-o", str(target), "--figure", "fct-cdf"], capsys)
    page = target.read_text()
    summary = page[page.index("<h2>Summary</h2>"):page.index("<h2>Figures</h2>")]
    pivot = summary[:summary.index("<details>")]
    assert code == 0 and pivot.count("<tr>") == 1 + 3 and "FCT p50 (us)" in pivot and "ratio" in pivot
    assert "every metric, a column per run" in summary
    assert re.findall(r'<img alt="([^"]+)"', page) == ["FCT CDF"]


def test_picked_figures_read_only_their_tables_and_draw_the_same_bytes(results_file, tmp_path, capsys):
    """read_results(tables=...) leaves the other tables unread (empty); cosim plot --figure reads only what
    the figures draw (figure_names.tables_for) and writes the same bytes as a plot of everything."""
    only = results.read_results(results_file, tables={"flows"})["pfc"]
    full = results.read_results(results_file)["pfc"]
    assert only.flows.keys() == full.flows.keys() and not only.queues and not only.ports and full.queues
    assert only.summary == full.summary and only.config == full.config
    from cosim.analysis.figure_names import CONTEXT, tables_for

    assert tables_for(["fct-cdf", "pfc-pauses"]) == {"flows", "pauses", *CONTEXT} and tables_for([]) is None
    every, picked = tmp_path / "every", tmp_path / "picked"
    for out, extra in ((every, []), (picked, ["--figure", "fct-cdf", "--figure", "pfc-pauses"])):
        assert run_main(["plot", str(results_file), "-o", str(out), *extra], capsys)[0] == 0
    names = sorted(p.name for p in picked.iterdir())
    assert names == ["fct-cdf.png", "pfc-pauses-pfc.png"]
    assert all((picked / n).read_bytes() == (every / n).read_bytes() for n in names)
