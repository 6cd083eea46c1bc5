"""Co-simulation on the InfiniBand fabric (credit-based flow control): the RoCE file's checks, and
``--transport both``.

These tests need the engine's ``ib`` fabric (cosim.network.transport); they are plain tests, not skipped, so they fail
loudly until it works. The checks themselves live in tests/test_cosim_roce.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from test_cosim_roce import (
    MIB,
    check_compute_only,
    check_deterministic,
    check_lossless_training,
    check_overlap_beats_serialized,
    check_ring_allreduce,
    ring_allreduce_trace,
    tiny_llama_trace,
)

from cosim import results
from cosim.cli import cli
from cosim.workload.trace import write_trace


@pytest.mark.parametrize("topology,n,size_bytes", [
    ("rail-optimized", 4, 32 * MIB),
    ("single-switch", 4, 8 * MIB),
    ("leaf-spine", 4, 64 * MIB),
])
def test_ring_allreduce_matches_alpha_beta(topology, n, size_bytes):
    check_ring_allreduce("ib", topology, n, size_bytes)


def test_compute_only_trace_takes_its_compute_exactly():
    check_compute_only("ib")


def test_overlapping_gradient_buckets_shortens_the_iteration():
    check_overlap_beats_serialized("ib")


def test_congested_training_is_lossless_with_credit_stalls():
    check_lossless_training("ib")


def test_same_seed_same_results_bit_for_bit():
    check_deterministic("ib")


def test_fabric_both_on_a_trace_writes_roce_and_ib_side_by_side(tmp_path, engine_ns):
    """--transport both on a trace writes runs roce and ib, printed side by side, each with its own back-
    pressure."""
    trace = tmp_path / "tiny.h5"
    write_trace(trace, tiny_llama_trace())
    out = tmp_path / "both.h5"
    r = CliRunner().invoke(cli, ["run", "--trace", str(trace), "--transport", "both", "--topology", "leaf-spine",
                                 "--gpus-per-server", "2", "--hosts-per-leaf", "2", "--oversubscription", "2",
                                 "--set", "SharedBufferMmu::DynamicThresholdAlpha=0.0625", "-o", str(out)])
    assert r.exit_code == 0, r.output
    header = r.output.splitlines()[0].split()
    assert header == ["metric", "roce", "ib", "ib", "-", "roce", "ib", "/", "roce"]  # then delta and ratio
    for label in ("iteration time", "PFC paused time", "credit-stall time", "queue p99"):
        assert label in r.output
    runs = results.read_results(out)
    assert sorted(runs) == ["ib", "roce"]
    assert [runs[n].config["experiment"]["network"]["transport"] for n in ("roce", "ib")] == ["roce", "ib"]
    roce, ib = runs["roce"].summary, runs["ib"].summary
    assert roce["status"] == ib["status"] == "complete"
    assert roce["n_flows"] == ib["n_flows"] and roce["payload_bytes"] == ib["payload_bytes"]
    assert roce["pfc_paused_ns"] > 0 and ib["pfc_paused_ns"] == 0
    assert ib["credit_stall_ns"] > 0 and roce["credit_stall_ns"] == 0
    assert ib["header_bytes"] == 26 and roce["header_bytes"] == 82
    assert len(runs["ib"].stalls["time_ns"]) > 0


def test_fabric_both_on_a_flow_scenario(tmp_path, engine_ns):
    out = tmp_path / "f.h5"
    r = CliRunner().invoke(cli, ["run", "--pattern", "incast", "--hosts", "4", "--flow-bytes", "256KiB",
                                 "--transport", "both", "--name", "inc", "-o", str(out)])
    assert r.exit_code == 0, r.output
    runs = results.read_results(out)
    assert sorted(runs) == ["inc-ib", "inc-roce"]
    for run in runs.values():
        assert run.summary["flows_completed"] == 3
        assert np.array_equal(run.flows["delivered_bytes"], run.flows["size_bytes"])


def test_ring_trace_file_on_both_fabrics_names_runs_after_them(tmp_path, engine_ns):
    trace = tmp_path / "ring.h5"
    write_trace(trace, ring_allreduce_trace(4, 4 * MIB))
    out = tmp_path / "r.h5"
    r = CliRunner().invoke(cli, ["run", "--trace", str(trace), "--gpus-per-server", "1", "--transport", "both",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    runs = results.read_results(out)
    assert sorted(runs) == ["ib", "roce"]
    # less framing per packet on InfiniBand (26 B vs 82 B): the same all-reduce is faster
    assert runs["ib"].summary["iteration_time_ns"] < runs["roce"].summary["iteration_time_ns"]
