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
