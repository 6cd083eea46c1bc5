"""Exposed communication split per parallelism dimension and per medium, and the pipeline's sends in the
summary: the parts of a real run sum to the whole, NVLink is TP's where only TP stays in a server, and a
send takes at least its bytes at the NIC's rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosim.results import exposure
from cosim.run import run as run_experiment
from cosim.spec import make
from cosim.workload.trace import OpKind, read_trace

TRACE = Path(__file__).resolve().parents[1] / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"
LINK_GBPS = 400


@pytest.fixture(scope="module")
def tp2_pp2_dp2(engine_ns):
    """Two iterations of the shipped llama2 trace (TP2 PP2 DP2) on 4 servers of 2 GPUs, one switch: TP
    groups inside a server (NVLink), PP and DP groups across servers (the fabric)."""
    return run_experiment(make("training", name="t", trace=str(TRACE), topology="single-switch",
                               gpus_per_server=2, iterations=2, chunk_bytes="1MiB", link_gbps=LINK_GBPS))


def test_exposed_parts_sum_to_the_whole(tp2_pp2_dp2):
    """Per dimension (with other) and per medium (with other), the parts add up to exposed_comm_ns; each is
    ≥ 0; the placement puts only TP on NVLink, so the NVLink part is TP's."""
    s = tp2_pp2_dp2.summary
    assert s["status"] == "complete" and s["exposed_comm_ns"] > 0
    dims = {k: s[k] for k in ("exposed_comm_tp_ns", "exposed_comm_pp_ns", "exposed_comm_dp_ns")}
    assert "exposed_comm_ep_ns" not in s  # no EP group in this trace
    other = s["exposed_comm_other_ranks_ns"]
    assert min(dims.values()) >= 0 and other >= 0
    assert sum(dims.values()) + other == pytest.approx(s["exposed_comm_ns"], rel=1e-12)
    assert s["exposed_comm_nvlink_ns"] + s["exposed_comm_fabric_ns"] + other == pytest.approx(
        s["exposed_comm_ns"], rel=1e-12)
    assert s["exposed_comm_nvlink_ns"] == pytest.approx(s["exposed_comm_tp_ns"], rel=1e-12)
    assert s["exposed_comm_dp_ns"] > 0 and s["exposed_comm_pp_ns"] > 0  # the gradient sync and the bubble


def test_ops_carry_their_dimension_and_medium(tp2_pp2_dp2):
    """ops/group_kind is the trace's group kind (255 for compute), ops/medium nvlink for TP (inside a server)
    and fabric for PP sends and DP all-reduces (across servers)."""
    ops = tp2_pp2_dp2.ops
    gk, medium, kind = ops["group_kind"], ops["medium"], ops["kind"]
    assert np.all(gk[kind == OpKind.COMPUTE] == exposure.NO_GROUP)
    assert np.all(medium[kind == OpKind.COMPUTE] == exposure.MEDIUM_NONE)
    assert np.all(medium[gk == 0] == exposure.MEDIUM_NVLINK)  # TP
    assert np.all(medium[np.isin(gk, (2, 3))] == exposure.MEDIUM_FABRIC)  # PP, DP


def test_pipeline_sends_are_summarized(tp2_pp2_dp2):
    """p2p_pp_send_*: every SEND of the trace in the counted (second) iteration, their bytes, and times no
    shorter than the smallest send's bytes at the NIC's line rate."""
    trace = read_trace(TRACE)
    s = tp2_pp2_dp2.summary
    send = trace.kind == OpKind.SEND
    assert s["p2p_pp_send_count"] == int(send.sum())
    assert s["p2p_pp_send_bytes"] == int(trace.bytes[send].sum())
    floor_ns = float(trace.bytes[send].min()) * 8 / LINK_GBPS
    assert floor_ns <= s["p2p_pp_send_p50_ns"] <= s["p2p_pp_send_p99_ns"]


@pytest.mark.parametrize("ops,edges,expected", [
    # compute 0-10; TP in flight 10-30, DP 20-30 (shared half and half); nothing 30-40 then a PP receive at 40
    # (the wait is PP's); nothing left to start after 40: other until the window ends at 50
    ([(0, 10, -1), (10, 30, 0), (20, 30, 1), (40, 40, 2)], [0, 50], [[15, 5, 10, 10]]),
    # two windows: the op in flight across their edge counts in each for its part there; the gap 12-14
    # waits for nothing but compute, so other
    ([(0, 4, 0), (4, 6, -1), (6, 12, 1), (14, 16, -1)], [0, 8, 16], [[4, 2, 0, 0], [0, 4, 0, 2]]),
])
def test_idle_shares_follow_the_stated_rules(ops, edges, expected):
    """Rules 1–3 of cosim.results.exposure on hand-made timelines (labels 0..2 communication, −1 compute)."""
    s, f, lab = (np.array(c, np.float64 if i < 2 else np.int64) for i, c in enumerate(zip(*ops)))
    got = exposure.idle_shares(s, f, lab, 3, np.array(edges, np.float64))
    np.testing.assert_allclose(got, expected)


def test_scaling_keeps_the_shares_and_sums_to_exposed():
    raw = np.array([[3.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    got = exposure.scaled_to(raw, np.array([2.0, 5.0]))
    np.testing.assert_allclose(got, [[1.5, 0.5, 0.0], [0.0, 0.0, 5.0]])


def test_run_table_and_pivot_show_the_split(tp2_pp2_dp2):
    """cosim run's table ends with one line per run naming each dimension's and medium's exposed time (its
    dimensions add up to the total within the printed digits); the sweep pivot has a column per dimension."""
    from cosim.cli.run_table import run_table
    from cosim.results.pivot import pivot_runs

    s = tp2_pp2_dp2.summary
    line = run_table({"t": s}, training=True).splitlines()[-1]
    assert line.startswith("t: exposed comm ") and "(NVLink " in line and "fabric " in line
    head, dims = line.split(": ", 2)[1:]
    total = float(head.split()[2])
    parts = [float(p.split()[-1]) for p in dims.split(" (")[0].split(", ")]
    assert [p.split()[0] for p in dims.split(" (")[0].split(", ")][:3] == ["TP", "PP", "DP"]
    assert sum(parts) == pytest.approx(total, rel=2e-3)
    table = pivot_runs({"t": tp2_pp2_dp2})
    keys = [m.key for m in table.metrics]
    assert {"exposed_comm_tp_ns", "exposed_comm_pp_ns", "exposed_comm_dp_ns", "exposed_comm_fabric_ns"} <= set(keys)
    assert "exposed_comm_ep_ns" not in keys  # absent from the run


# ---------------------------------------------------------------- figures: decoded PNGs

def _axes_pixels(fig, ax) -> np.ndarray:
    """The RGB pixels inside ``ax`` of the rendered PNG of ``fig`` (legends outside the axes left out)."""
    import io

    from matplotlib import image

    from cosim.analysis import plots

    img = image.imread(io.BytesIO(plots.render(fig)), format="png")[..., :3]
    box = ax.get_window_extent()
    h = img.shape[0]
    return img[int(h - box.y1) + 2:int(h - box.y0) - 2, int(box.x0) + 2:int(box.x1) - 2].reshape(-1, 3)


def _count(pixels: np.ndarray, color) -> int:
    """Pixels within 0.02 of ``color`` in every channel."""
    from matplotlib.colors import to_rgb

    return int(np.all(np.abs(pixels - np.asarray(to_rgb(color))) < 0.02, axis=1).sum())


def test_gantt_colours_communication_by_dimension_and_medium(tp2_pp2_dp2):
    """Compute in one colour; TP over NVLink (light orange), PP and DP over the fabric (green, red), each
    drawn inside the axes and named in the legend; no other dimension appears."""
    from cosim.analysis import plots

    fig = plots.iteration_gantt(tp2_pp2_dp2)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["compute", "TP, NVLink", "PP, fabric", "DP, fabric"]
    pixels = _axes_pixels(fig, fig.axes[0])
    colors = {"compute": plots.COMPUTE_COLOR, "TP, NVLink": plots.shade("tab:orange", plots.MEDIUM_SHADES[1][1]),
              "PP, fabric": "tab:green", "DP, fabric": "tab:red"}
    counts = {name: _count(pixels, c) for name, c in colors.items()}
    assert all(n > 50 for n in counts.values()), counts
    assert _count(pixels, "tab:purple") == 0  # no EP in this trace


@pytest.fixture(scope="module")
def link_down(engine_ns):
    """A 4 MiB ring all-reduce on 4 servers, two per leaf, two spines, twice (about 0.6 ms each); leaf0-spine0
    down from 200 us for 100 us, amid the first iteration's transfers; and the same run without the fault."""
    from test_cosim_roce import ring_allreduce_trace

    from cosim import run

    exp = make("training", name="down", topology="leaf-spine", gpus_per_server=1, hosts_per_leaf=2,
               iterations=2, chunk_bytes=1 << 20, baseline=True,
               faults=[{"kind": "link_down", "element": "leaf0-spine0", "at_ns": 200_000.0,
                       "duration_ns": 100_000.0}])
    return run.run_with_baseline(exp, trace=ring_allreduce_trace(4, 4 << 20))


def test_fault_window_spans_the_fault_and_the_recovery(link_down):
    """The window opens 10 % of the fault's span before its first action and closes after the last flow in
    flight during the fault finished; it is a fraction of the run."""
    from cosim.analysis import fault_zoom, plots

    faulted, _ = link_down
    t = faulted.faults["time_ns"]
    first, last = float(t.min()), float(t.max())
    end = plots._end_ns(faulted)
    lo, hi = fault_zoom.fault_window(faulted.faults, faulted.flows, end)
    assert lo == pytest.approx(first - 0.1 * (last - first))
    f = faulted.flows
    hit = (f["start_ns"] <= last) & (f["finish_ns"] >= first)
    assert hi == pytest.approx(max(last, float(f["finish_ns"][hit].max())) + 0.1 * (last - first))
    assert hi - lo < 0.8 * end


def test_neighbour_throughput_conserves_bytes(link_down):
    """The NICs of leaf0 (host0, host1) are the neighbours of leaf0-spine0; their throughput integrated over
    the run is every byte their flows delivered."""
    from cosim.analysis import fault_zoom, plots

    faulted, _ = link_down
    near = fault_zoom.neighbour_hosts(faulted.nodes, faulted.links,
                                      fault_zoom.faulted_nodes(faulted.faults, faulted.links))
    assert [faulted.nodes["name"][h] for h in near] == ["host0", "host1"]
    end = plots._end_ns(faulted)
    edges = np.linspace(0.0, end, 301)
    rate = fault_zoom.host_throughput_gbps(faulted.flows, near, edges, end)
    sent = rate * np.diff(edges) / 8  # Gbit/s × ns / 8 = bytes
    f = faulted.flows
    for r, h in enumerate(near):
        assert sent[r].sum() == pytest.approx(float(f["delivered_bytes"][f["src"] == h].sum()), rel=1e-9)


def test_fault_figures_zoom_on_the_window(link_down):
    """queues-faults and neighbours-faults span the fault window, not the run; the neighbours figure draws
    the NICs' total (black) above and the flows' slowdowns (red) below; iteration-faults zooms its y axis
    onto the iteration times (the fault's timeout makes the first iteration ~8x slower here)."""
    from cosim.analysis import fault_zoom, plots

    faulted, base = link_down
    scale = plots.display_unit(plots.TIME_KEY)[0]
    lo, hi = fault_zoom.fault_window(faulted.faults, faulted.flows, plots._end_ns(faulted))
    figures = {f.stem: f.figure for f in plots.iter_figures({faulted.name: faulted, base.name: base})}
    queues = figures[f"queues-faults-{faulted.name}"]
    neighbours = figures[f"neighbours-faults-{faulted.name}"]
    for fig in (queues, neighbours):
        assert fig.axes[0].get_xlim() == pytest.approx((lo * scale, hi * scale))
    top, bottom = neighbours.axes[:2]
    assert _count(_axes_pixels(neighbours, top), "black") > 100
    assert _count(_axes_pixels(neighbours, bottom), "tab:red") > 10
    its = figures[f"iteration-faults-{faulted.name}"]
    y0, y1 = its.axes[0].get_ylim()
    times = np.r_[faulted.iterations["time_ns"], base.iterations["time_ns"]] * plots.display_unit(
        "iteration_time_ns")[0]
    assert y0 <= times.min() and y1 >= times.max()
    assert y1 - y0 <= 1.5 * (times.max() - times.min())  # the values' range, not 0 to the top


@pytest.mark.parametrize("times,faults,flows,expected", [
    # down at 100, up at 200: 10 % of 100 before; the flow in flight finishes at 500: +10 after it
    ([100.0, 200.0], [0, 0], ([50.0], [500.0]), (90.0, 510.0)),
    # a flow that finished before the fault and one that started after it do not extend the window
    ([100.0, 200.0], [0, 0], ([0.0, 300.0], [50.0, 900.0]), (90.0, 210.0)),
    # one instant (a permanent link down) lasts 1 % of the run (100 ns); mechanism rows (-1) are ignored
    ([100.0, 9000.0], [0, -1], ([], []), (90.0, 110.0)),
])
def test_fault_window_rules(times, faults, flows, expected):
    from cosim.analysis import fault_zoom

    f = {"time_ns": np.array(times), "fault": np.array(faults)}
    fl = {"start_ns": np.array(flows[0]), "finish_ns": np.array(flows[1])}
    assert fault_zoom.fault_window(f, fl, 10_000.0) == pytest.approx(expected)


def test_serial_calls_are_exposed_for_their_own_durations(engine_ns):
    """4 identical ranks on 2 servers of 2 GPUs run compute, a TP all-reduce (inside a server), an EP
    all-to-all (across servers), compute, one after the other: nothing overlaps and no rank waits, so each
    dimension's exposed time is its call's duration and NVLink's is TP's, fabric's EP's."""
    from test_cosim_roce import make_trace

    from cosim.workload.trace import CollKind, GroupKind, Phase

    groups, kinds = [[0, 1], [2, 3], [0, 2], [1, 3]], [GroupKind.TP, GroupKind.TP, GroupKind.EP, GroupKind.EP]
    ops, deps = [], []
    for r in range(4):
        first = len(ops)
        ops += [dict(rank=r, kind=OpKind.COMPUTE, phase=Phase.FORWARD, duration_ns=50_000),
                dict(rank=r, kind=OpKind.COLLECTIVE, phase=Phase.FORWARD, bytes=1 << 20,
                     coll_kind=CollKind.ALL_REDUCE, group=r // 2, coll_id=r // 2),
                dict(rank=r, kind=OpKind.COLLECTIVE, phase=Phase.FORWARD, bytes=1 << 20,
                     coll_kind=CollKind.ALL_TO_ALL, group=2 + r % 2, coll_id=2 + r % 2),
                dict(rank=r, kind=OpKind.COMPUTE, phase=Phase.FORWARD, duration_ns=50_000)]
        deps += [[], [first], [first + 1], [first + 2]]
    rec = run_experiment(make("training", topology="single-switch", gpus_per_server=2, link_gbps=LINK_GBPS),
                         trace=make_trace(4, ops, deps, groups=groups, group_kind=kinds))
    s, c = rec.summary, rec.collectives
    duration = {int(g): float(np.max(c["finish_ns"][c["group_kind"] == g] - c["start_ns"][c["group_kind"] == g]))
                for g in (GroupKind.TP, GroupKind.EP)}
    busiest = rec.ops["rank"] == 0  # every rank computes the same: the first is the busiest
    tp = rec.ops["group_kind"][busiest] == GroupKind.TP
    ep = rec.ops["group_kind"][busiest] == GroupKind.EP
    own = lambda m: float((rec.ops["finish_ns"][busiest][m] - rec.ops["start_ns"][busiest][m]).sum())  # noqa: E731
    assert s["exposed_comm_tp_ns"] == pytest.approx(own(tp), rel=1e-9)
    assert s["exposed_comm_ep_ns"] == pytest.approx(own(ep), rel=1e-9)
    assert own(tp) <= duration[GroupKind.TP] and own(ep) <= duration[GroupKind.EP]
    assert s["exposed_comm_nvlink_ns"] == pytest.approx(s["exposed_comm_tp_ns"], rel=1e-9)
    assert s["exposed_comm_fabric_ns"] == pytest.approx(s["exposed_comm_ep_ns"], rel=1e-9)
    assert s["exposed_comm_tp_ns"] + s["exposed_comm_ep_ns"] + s["exposed_comm_other_ranks_ns"] == pytest.approx(
        s["exposed_comm_ns"], rel=1e-12)
