"""NCCL-faithful collectives: channel rings on every NIC, PXN, the tuner's choices, the calibrated NVLink
model against measured NCCL times, and busbw across servers under the NICs' limit (real ns-3 runs)."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.collectives import algorithms as A
from cosim.collectives.algorithms import Algorithm
from cosim.collectives.calibration import (CALIBRATIONS, PROTOCOL_LINES, ProtocolLines, calibration_for,
                                           fit_all_reduce, fit_protocol_lines, nvlink_model, protocol_lines_for,
                                           robust_curve)
from cosim.collectives.tuning import Protocol, Shape, TuningModel
from cosim.runs.collective import CollectiveSweep, collective_trace, run_point
from cosim.runs.training import nic_payload_bytes_per_s, run_training
from cosim.workload.trace import CollKind, Trace

MIB = 1 << 20


def flow_mask(s, gps):
    return (s.src // gps) != (s.dst // gps)


@pytest.mark.parametrize("k,g", [(2, 8), (4, 4), (3, 2), (2, 1)])
@pytest.mark.parametrize("kind", [CollKind.ALL_REDUCE, CollKind.REDUCE_SCATTER, CollKind.ALL_GATHER])
def test_channel_rings_use_every_nic_evenly_and_stay_on_rails(k, g, kind):
    """Default 2 channels per NIC: every member sends the same network bytes; hops join one rail (k even)."""
    gps = 8
    members = (np.arange(k)[:, None] * gps + np.arange(g)[None, :]).ravel()
    size = 64 * MIB
    used, s = A.schedule(kind, Algorithm.RING, members, size, 4 * MIB, gps)
    assert used == Algorithm.RING
    net = flow_mask(s, gps)
    per_rank = np.bincount(s.src[net], weights=s.bytes[net], minlength=members.max() + 1)[members]
    n = members.size
    steps = 2 * (n - 1) if kind == CollKind.ALL_REDUCE else n - 1
    # each channel crosses every server boundary once per step: per server steps/n·S leave over g NICs
    assert per_rank.max() - per_rank.min() <= 2 * steps * 2 * g  # rounding of the channel/segment split
    assert per_rank.sum() == pytest.approx(k * steps / n * size, rel=1e-6)
    rails_match = (s.src[net] % gps) == (s.dst[net] % gps)
    if k % 2 == 0:
        assert rails_match.all()
    else:  # only the hop closing the ring changes rail
        assert rails_match.mean() == pytest.approx(1 - 1 / k)
    sent = np.bincount(s.src, weights=s.bytes, minlength=members.max() + 1)[members]
    assert sent.sum() == steps * size


def test_channel_count_follows_nics_and_size():
    """Two rings per NIC by default, fewer for small calls, the given number on request."""
    grid = A.server_grid(np.arange(16), 8)
    assert A.default_channels(grid) == 16
    assert A.channels_used(16, 1 << 30) == 16 and A.channels_used(16, A.CHANNEL_MIN_BYTES * 3) == 3
    assert A.channels_used(16, 10) == 1
    rings = A.channel_rings(grid, 4)
    assert np.array_equal(np.sort(rings, axis=1), np.tile(np.arange(16), (4, 1)))  # each a ring over all


def test_pxn_all_to_all_sends_only_on_the_destinations_rail():
    """PXN: network bytes = direct's, every flow rail-aligned and aggregated (g blocks per flow)."""
    gps, members, size = 8, np.arange(16), 16 * MIB
    used, s = A.schedule(CollKind.ALL_TO_ALL, Algorithm.PXN, members, size, 64 * MIB, gps)
    assert used == Algorithm.PXN
    net = flow_mask(s, gps)
    assert np.all(s.src[net] % gps == s.dst[net] % gps)
    assert np.count_nonzero(net) == 16  # one flow per (source server, destination): 2 servers × 8 each
    per_rank = np.bincount(s.src[net], weights=s.bytes[net], minlength=16)
    assert np.all(per_rank == size // 2)  # (k−1)/k·S each, as direct
    direct = A.schedule(CollKind.ALL_TO_ALL, Algorithm.DIRECT, members, size, 64 * MIB, gps)[1]
    assert s.bytes[net].sum() == direct.bytes[flow_mask(direct, gps)].sum()
    # falls back to direct inside one server
    assert A.schedule(CollKind.ALL_TO_ALL, Algorithm.PXN, np.arange(8), size, MIB, gps)[0] == Algorithm.DIRECT


TUNER = TuningModel.for_hardware({"name": "h100", "nvlink_bytes_per_s": 450e9}, nic_bytes_per_s=50e9)


@pytest.mark.parametrize("k,g,size,expected", [
    (2, 8, 64 << 10, Algorithm.TREE),     # small across servers: fewer network steps win
    (2, 8, 1 << 30, Algorithm.RING),      # large: the ring's bandwidth wins
    (8, 8, 256 << 10, Algorithm.TREE),
    (8, 8, 1 << 30, Algorithm.RING),
])
def test_tuner_picks_tree_for_small_and_ring_for_large(k, g, size, expected):
    """The documented choice (docs/models/collectives.md): tree for small, ring for large across servers."""
    best = TUNER.choose(CollKind.ALL_REDUCE, Shape(k * g, k, g), size, (Algorithm.RING, Algorithm.TREE))
    assert best.algorithm == expected
    assert best.start_latency_ns <= best.latency_ns <= best.time_ns


def test_tuner_protocols_and_bandwidth_limits():
    """LL for tiny calls; Simple for large NIC-bound ones, LL128 when NVLink bounds the bandwidth anyway;
    across servers the busbw is capped by g NICs."""
    shape = Shape(16, 2, 8)
    assert TUNER.best_protocol(CollKind.ALL_REDUCE, Algorithm.RING, shape, 4096).protocol == Protocol.LL
    assert TUNER.best_protocol(CollKind.ALL_REDUCE, Algorithm.RING, shape, 1 << 30).protocol == Protocol.LL128
    assert TUNER.best_protocol(CollKind.ALL_REDUCE, Algorithm.RING, Shape(2, 2, 1), 1 << 30).protocol \
        == Protocol.SIMPLE
    assert TUNER.bus_bytes_per_s(Algorithm.RING, Protocol.SIMPLE, Shape(16, 2, 1)) == 50e9
    assert TUNER.bus_bytes_per_s(Algorithm.RING, Protocol.SIMPLE, Shape(8, 1, 8)) == TUNER.nvlink.bus_bytes_per_s


def test_calibration_refits_its_own_model():
    """fit_all_reduce recovers the coefficients from points of its own closed form."""
    cal = CALIBRATIONS["a100"]
    s = np.repeat([2, 8, 32, 64], 3) * MIB
    n = np.tile([2, 4, 8], 4)
    t = cal.launch_ns + 2 * (n - 1) * cal.step_ns + 2 * (n - 1) / n * s / (cal.efficiency * 300e9) * 1e9
    launch, step, bw = fit_all_reduce(s, n, t)
    assert launch == pytest.approx(cal.launch_ns, rel=1e-6) and step == pytest.approx(cal.step_ns, rel=1e-6)
    assert bw == pytest.approx(cal.efficiency * 300e9, rel=1e-6)
    assert calibration_for("H200") is CALIBRATIONS["h100"] and calibration_for("tpu") is CALIBRATIONS["h100"]


def test_protocol_lines_refit_their_own_model():
    """fit_protocol_lines recovers the switch sizes and the three lines from points of its own model (one
    that steps up at each switch, so the robust curve is the curve itself)."""
    sizes = np.unique(np.geomspace(64 << 10, 64 * MIB, 385).astype(np.int64))
    on_grid = sizes[np.searchsorted(sizes, np.geomspace(sizes[0], sizes[-1], 97))]  # the sizes the fit tries
    truth = ProtocolLines(gpu="h100", n_ranks=8, ll128_from_bytes=int(on_grid[30]), simple_from_bytes=int(on_grid[70]),
                          latency_ns=(9_000.0, 21_000.0, 60_000.0), efficiency=(0.2, 0.6, 0.9),
                          datasheet_bytes_per_s=450e9)
    fitted = fit_protocol_lines(sizes, truth.time_ns(sizes), 8, gpu="h100", datasheet_bytes_per_s=450e9)
    assert (fitted.ll128_from_bytes, fitted.simple_from_bytes) == (truth.ll128_from_bytes, truth.simple_from_bytes)
    assert fitted.efficiency == pytest.approx(truth.efficiency, rel=0.02)
    # within what the robust curve's one-sided windows at the two ends bend
    assert fitted.latency_ns == pytest.approx(truth.latency_ns, rel=0.1)
    assert fitted.time_ns(sizes) == pytest.approx(truth.time_ns(sizes), rel=0.02)
    # the robust curve is the measured one where nothing scatters, and drops a lone outlier
    t = np.linspace(10.0, 30.0, 41)
    assert np.array_equal(robust_curve(t)[9:-9], t[9:-9])
    t[20] *= 3
    assert t[19] <= robust_curve(t)[20] <= t[21]


def test_in_server_all_reduce_follows_nccls_protocol_by_size():
    """Inside one server an all-reduce ring takes the fitted protocol's line: LL, LL128, Simple as the size
    grows; GPU counts without a measurement use the nearest measured one; the start delay plus what the
    executor's copies take (with the protocol's extra copy time) is the line's time."""
    for gpu, table in PROTOCOL_LINES.items():
        tuner = TuningModel.for_hardware({"name": gpu, "nvlink_bytes_per_s": table[8].datasheet_bytes_per_s})
        for n, lines in table.items():
            shape = Shape(n, 1, n)
            for size, protocol in ((lines.ll128_from_bytes - 1, Protocol.LL),
                                   (lines.simple_from_bytes - 1, Protocol.LL128),
                                   (lines.simple_from_bytes, Protocol.SIMPLE)):
                if protocol == Protocol.LL128 and lines.ll128_from_bytes == lines.simple_from_bytes:
                    continue
                best = tuner.best_protocol(CollKind.ALL_REDUCE, Algorithm.RING, shape, size)
                assert best.protocol == protocol
                assert best.time_ns == pytest.approx(float(lines.time_ns(size)), rel=1e-9)
                copies = 2 * (n - 1) * min(tuner.nvlink.step_ns, tuner.nvlink.copy_latency_ns) \
                    + 2 * (n - 1) / n * size * (1e9 / tuner.nvlink.copy_bytes_per_s + best.nvlink_extra_ns_per_byte)
                assert best.start_latency_ns + copies == pytest.approx(best.time_ns, rel=1e-9)
    assert [protocol_lines_for("a100", n).n_ranks for n in (2, 3, 5, 6, 7, 16)] == [2, 4, 4, 8, 8, 8]
    assert protocol_lines_for("h200", 8) is PROTOCOL_LINES["h100"][8]
    # no line copies faster than the executor: no copy ever needs a negative extra time
    for gpu in PROTOCOL_LINES:
        model = nvlink_model({"name": gpu})
        assert all(e * model.nvlink_bytes_per_s <= model.copy_bytes_per_s
                   for lines in PROTOCOL_LINES[gpu].values() for e in lines.efficiency)


# NCCL all-reduce inside one DGX, the robust measured curve (median of the 19 neighbouring sizes' medians,
# as bench/fit_nvlink_all_reduce.py --report computes it): (gpu, GPUs, size bytes, µs), from
# data/profiling/network/{a100_dgx,h100_dgx}/all_reduce.csv of microsoft/vidur, commit 7d47513 (MIT).
ROBUST_MEASURED = [
    ("a100", 2, 67_584, 50.0), ("a100", 2, 1 * MIB, 53.0), ("a100", 2, 4 * MIB, 65.0), ("a100", 2, 64 * MIB, 427.0),
    ("a100", 4, 264_192, 62.0), ("a100", 4, 4 * MIB, 85.0), ("a100", 4, 16 * MIB, 202.0),
    ("a100", 4, 64 * MIB, 601.5),
    ("a100", 8, 67_584, 35.5), ("a100", 8, 1 * MIB, 47.0), ("a100", 8, 16 * MIB, 274.0), ("a100", 8, 64 * MIB, 675.5),
    ("h100", 2, 67_584, 32.0), ("h100", 2, 4 * MIB, 43.0), ("h100", 2, 16 * MIB, 74.0), ("h100", 2, 64 * MIB, 245.0),
    ("h100", 4, 264_192, 41.0), ("h100", 4, 1 * MIB, 32.0), ("h100", 4, 16 * MIB, 93.0), ("h100", 4, 64 * MIB, 315.0),
    ("h100", 8, 67_584, 28.0), ("h100", 8, 1 * MIB, 33.0), ("h100", 8, 4 * MIB, 51.0), ("h100", 8, 16 * MIB, 115.0),
]


@pytest.mark.parametrize("gpu,n,size,measured_us", ROBUST_MEASURED)
def test_in_server_all_reduce_matches_measured_nccl(gpu, n, size, measured_us):
    """Co-simulated in-server all-reduce (NVLink copies + start delay) within 10 % of NCCL's measured curve."""
    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=n, gpus_per_server=8, gpu=gpu)
    row, _ = run_point(sweep, "roce", size)
    assert row.algorithm == "ring"
    assert row.time_us == pytest.approx(measured_us, rel=0.10)


def test_trace_nvlink_rate_reaches_the_executor():
    """An A100 trace's TP all-reduce takes longer than an H100 one's by the ratio of their fitted Simple
    bus bandwidths; the executor copies at each trace's own NVLink rate."""
    size = 256 * MIB
    times, rates = {}, {}
    for gpu in ("a100", "h100"):
        sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=8, gpus_per_server=8, gpu=gpu)
        row, record = run_point(sweep, "roce", size)
        times[gpu] = row.time_us
        rates[gpu] = record.config["attributes"]["DagExecutor::NvlinkDataRate"]
        hw = collective_trace(CollKind.ALL_REDUCE, size, 8, gpu=gpu).spec_dict()["hardware"]
        assert rates[gpu] == nvlink_model(hw).executor_attributes()["DagExecutor::NvlinkDataRate"]
    bus = {g: float(PROTOCOL_LINES[g][8].bus_bytes_per_s(size)) for g in ("a100", "h100")}
    # the bandwidth term dominates at 256 MiB: the time ratio is the bus-bandwidth ratio within the latency
    assert times["a100"] / times["h100"] == pytest.approx(bus["h100"] / bus["a100"], rel=0.05)
    assert rates["a100"] != rates["h100"]


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_busbw_across_two_servers_stays_under_the_nic_limit(transport):
    """auto across 2 × 8 GPUs: busbw ≤ 8 NICs × the NIC payload rate (rings have no in-network reduction)."""
    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(64 << 10, 16 * MIB, 256 * MIB), n_ranks=16,
                            gpus_per_server=8, transports=(transport,))
    limit_gbps = 8 * nic_payload_bytes_per_s(sweep.experiment(transport, 1).network) / 1e9
    rows = [run_point(sweep, transport, s)[0] for s in sweep.sizes_bytes]
    for row in rows:
        assert 0 < row.busbw_gbps <= limit_gbps
    assert rows[-1].algorithm == "ring" and rows[-1].busbw_gbps > 0.8 * limit_gbps  # and it gets close
    assert rows[0].algorithm == "tree"


def test_concurrent_in_server_all_reduces_share_nvlink_at_ncclss_rate():
    """Two all-reduces on the same 8 H100s at once: the protocol's bandwidth loss is copy-engine time, so
    together they take about twice one call's bandwidth term (they share NVLink at NCCL's fitted rate), not
    one latency plus twice the datasheet wire time."""
    size, n = 64 * MIB, 8
    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=n, gpus_per_server=8, gpu="h100")
    one = collective_trace(CollKind.ALL_REDUCE, size, n)
    cols = {f: np.repeat(getattr(one, f), 2) for f in ("rank", "kind", "phase", "duration_ns", "flops", "bytes",
                                                     "coll_kind", "group", "peer", "match_id", "algo_hint",
                                                     "label", "microbatch", "layer")}
    two = Trace(n_ranks=n, **cols, coll_id=np.tile(np.arange(2, dtype=np.int64), n),
                dep_ptr=np.zeros(2 * n + 1, np.int64), dep_idx=np.zeros(0, np.int64), labels=one.labels,
                group_ptr=one.group_ptr, group_ranks=one.group_ranks, group_kind=one.group_kind, specs=one.specs)
    record = run_training(sweep.experiment("roce", size), two)
    finish = float(np.max(record.collectives["finish_ns"]))
    lines = PROTOCOL_LINES["h100"][n]
    bandwidth_ns = 2 * (n - 1) / n * size / float(lines.bus_bytes_per_s(size)) * 1e9
    assert finish == pytest.approx(lines.latency_ns[2] + 2 * bandwidth_ns, rel=0.03)
