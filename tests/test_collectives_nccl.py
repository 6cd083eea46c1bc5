"""NCCL-faithful collectives: channel rings on every NIC, PXN, the tuner's choices, the calibrated NVLink
model against measured NCCL times, and busbw across servers under the NICs' limit (real ns-3 runs)."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.collectives import algorithms as A
from cosim.collectives.algorithms import Algorithm
from cosim.collectives.calibration import (
    ALL_REDUCE_CURVES,
    CALIBRATIONS,
    AllReduceCurve,
    all_reduce_curve_for,
    bus_bytes,
    calibration_for,
    fit_all_reduce,
    fit_all_reduce_curve,
    nvlink_model,
    robust_curve,
)
from cosim.collectives.tuning import Protocol, Shape, TuningModel
from cosim.kinds.training import nic_payload_bytes_per_s
from cosim.run import run
from cosim.sweep.collective import CollectiveSweep, collective_trace, run_point
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
    (2, 8, 8, Algorithm.TREE),            # small across servers: fewer network steps win
    (4, 8, 16 << 20, Algorithm.RING),     # large: the ring's bandwidth wins
    (8, 8, 256 << 10, Algorithm.TREE),
    (8, 8, 1 << 30, Algorithm.RING),
])
def test_tuner_picks_tree_for_small_and_ring_for_large(k, g, size, expected):
    """The documented choice (docs/models/collectives.md), far from the crossover: tree for small, ring for
    large across servers (tests/test_collectives_tree.py checks the choice against simulated times)."""
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


def test_curve_fit_keeps_the_knots_it_needs():
    """fit_all_reduce_curve: a curve that is piecewise a power law needs only its corners as knots and is
    reproduced everywhere; the robust curve is the measured one where nothing scatters, and drops a lone
    outlier; the Simple line's busbw is the large sizes' slope."""
    sizes = np.unique(np.geomspace(64 << 10, 64 * MIB, 400).astype(np.int64)).astype(np.float64)
    corner = 4 * MIB
    truth = np.where(sizes < corner, 30_000.0 * (sizes / sizes[0]) ** 0.2, 0.0)
    floor_at_corner = 30_000.0 * (corner / sizes[0]) ** 0.2
    truth = np.where(sizes < corner, truth, floor_at_corner + bus_bytes(sizes - corner, 8) / 300e9 * 1e9)
    curve = fit_all_reduce_curve(sizes, truth, 8, gpu="h100", datasheet_bytes_per_s=450e9,
                                 ll128_from_bytes=MIB, simple_from_bytes=8 * MIB, tolerance=0.01)
    # the robust curve of a monotonic one is itself, but at the two ends where its window is one-sided
    assert curve.time_ns(sizes) == pytest.approx(robust_curve(truth), rel=0.0101)
    assert curve.time_ns(sizes)[9:-9] == pytest.approx(truth[9:-9], rel=0.0101)
    assert len(curve.knot_bytes) < 40  # a few on the bend of the line, not one per size
    assert curve.simple_bus_bytes_per_s == pytest.approx(300e9, rel=0.03)  # the one-sided window bends the top
    # above the last knot: at the Simple line's busbw
    assert curve.time_ns(256 * MIB) == pytest.approx(
        curve.knot_ns[-1] + bus_bytes(192 * MIB, 8) / curve.simple_bus_bytes_per_s * 1e9, rel=1e-12)
    # below the first knot: its time, the launch floor
    assert curve.time_ns(1024) == pytest.approx(curve.knot_ns[0], rel=1e-12)
    t = np.linspace(10.0, 30.0, 41)
    assert np.array_equal(robust_curve(t)[9:-9], t[9:-9])
    t[20] *= 3
    assert t[19] <= robust_curve(t)[20] <= t[21]


def test_shipped_curves_are_physical():
    """The knots table: sizes increasing from 64 KiB to 64 MiB; no knot faster than its Simple line, and the
    Simple line at most the datasheet NVLink rate; once bandwidth-bound (≥ 4 MiB) a call of twice the bytes
    never takes less time. (Below that the measured curve is not monotonic: A100 × 4 falls from 62 to 23 µs
    at 200–330 KiB, H100 × 4 by 15 % where NCCL switches to Simple near 4.8 MiB; the curve follows it.)"""
    for gpu, table in ALL_REDUCE_CURVES.items():
        assert sorted(table) == [2, 4, 8]
        for n, c in table.items():
            s, t = np.array(c.knot_bytes, np.float64), np.array(c.knot_ns)
            assert np.all(np.diff(s) > 0) and s[0] >= 64 << 10 and s[-1] == 64 * MIB and np.all(t > 0)
            assert np.all(bus_bytes(s, n) / t * 1e9 <= c.simple_bus_bytes_per_s)
            assert 0.5 * c.datasheet_bytes_per_s < c.simple_bus_bytes_per_s <= c.datasheet_bytes_per_s
            grid = np.geomspace(4 * MIB, 256 * MIB, 500)
            assert np.all(c.time_ns(2 * grid) > c.time_ns(grid))
            assert np.all(c.latency_ns(np.geomspace(1024, 1 << 30, 500)) > 0)
            assert c.ll128_from_bytes <= c.simple_from_bytes
    with pytest.raises(Exception, match="faster than the Simple busbw"):
        AllReduceCurve(gpu="h100", n_ranks=8, knot_bytes=(65536, 64 * MIB), knot_ns=(30e3, 100e3),
                       simple_bus_bytes_per_s=400e9, ll128_from_bytes=0, simple_from_bytes=0,
                       datasheet_bytes_per_s=450e9)


def test_in_server_all_reduce_follows_the_curve_and_nccls_protocol_by_size():
    """Inside one server an all-reduce ring takes the measured curve's time and NCCL's protocol at that size
    (LL, LL128, Simple either side of the switch sizes); the start delay plus what the executor's copies
    take (with the Simple line's extra copy time) is the curve's time; another NVLink rate scales only the
    size-proportional part; GPU counts without a measurement use the nearest measured one."""
    for gpu, table in ALL_REDUCE_CURVES.items():
        for rate_factor in (1.0, 1.5):
            rate = table[8].datasheet_bytes_per_s * rate_factor
            tuner = TuningModel.for_hardware({"name": gpu, "nvlink_bytes_per_s": rate})
            for n, c in table.items():
                shape = Shape(n, 1, n)
                for size, protocol in ((c.ll128_from_bytes - 1, Protocol.LL), (c.simple_from_bytes - 1, Protocol.LL128),
                                       (c.simple_from_bytes, Protocol.SIMPLE), (100 << 10, None), (48 * MIB, None),
                                       (1 << 30, Protocol.SIMPLE)):
                    if protocol == Protocol.LL128 and c.ll128_from_bytes == c.simple_from_bytes:
                        continue
                    best = tuner.best_protocol(CollKind.ALL_REDUCE, Algorithm.RING, shape, size)
                    assert protocol is None or best.protocol == protocol
                    assert best.time_ns == pytest.approx(float(c.time_ns(size, rate)), rel=1e-9)
                    proportional = float(bus_bytes(size, n)) / c.simple_bus_bytes_per_s * 1e9
                    assert best.time_ns == pytest.approx(float(c.time_ns(size)) + proportional * (1 / rate_factor - 1),
                                                         rel=1e-9)
                    per_byte = 1e9 / tuner.nvlink.copy_bytes_per_s + best.nvlink_extra_ns_per_byte
                    copies = 2 * (n - 1) * min(tuner.nvlink.step_ns, tuner.nvlink.copy_latency_ns) \
                        + float(bus_bytes(size, n)) * per_byte
                    assert best.start_latency_ns + copies == pytest.approx(best.time_ns, rel=1e-9)
                    assert best.nvlink_extra_ns_per_byte >= 0
    assert [all_reduce_curve_for("a100", n).n_ranks for n in (2, 3, 5, 6, 7, 16)] == [2, 4, 4, 8, 8, 8]
    assert all_reduce_curve_for("h200", 8) is ALL_REDUCE_CURVES["h100"][8]
    assert all_reduce_curve_for("b200", 8) is ALL_REDUCE_CURVES["h100"][8]
    # the executor copies at the fastest Simple line: no copy ever needs a negative extra time
    for gpu, table in ALL_REDUCE_CURVES.items():
        model = nvlink_model({"name": gpu, "nvlink_bytes_per_s": table[8].datasheet_bytes_per_s})
        assert model.copy_bytes_per_s == pytest.approx(max(c.simple_bus_bytes_per_s for c in table.values()))


# NCCL all-reduce inside one DGX, the robust measured curve (median of the 19 neighbouring sizes' medians,
# as bench/fit_nvlink_all_reduce.py --report computes it): (gpu, GPUs, size bytes, µs), from
# data/profiling/network/{a100_dgx,h100_dgx}/all_reduce.csv of microsoft/vidur, commit 7d47513 (MIT):
# per GPU × GPU count the first sizes ≥ 64 KiB, 512 KiB, 4, 16 MiB and 64 MiB, and the hard spots
# (A100 × 4's 62-µs level at 258 KiB, A100 × 8's plateau at 1 MiB, H100 × 4's bump at 4.75 MiB, H100 × 8's
# staircase at 8.5 MiB).
ROBUST_MEASURED = [
    ("a100", 2, 67_584, 50.0), ("a100", 2, 526_336, 49.0), ("a100", 2, 4_194_304, 65.0),
    ("a100", 2, 16_777_216, 140.0), ("a100", 2, 67_108_864, 427.0),
    ("a100", 4, 67_584, 21.5), ("a100", 4, 526_336, 23.0), ("a100", 4, 4_194_304, 85.0),
    ("a100", 4, 16_777_216, 202.0), ("a100", 4, 67_108_864, 601.5), ("a100", 4, 264_192, 62.0),
    ("a100", 8, 67_584, 35.5), ("a100", 8, 526_336, 35.0), ("a100", 8, 4_194_304, 98.0),
    ("a100", 8, 16_777_216, 274.0), ("a100", 8, 67_108_864, 675.5), ("a100", 8, 1_048_576, 47.0),
    ("h100", 2, 67_584, 32.0), ("h100", 2, 526_336, 41.0), ("h100", 2, 4_194_304, 43.0),
    ("h100", 2, 16_777_216, 74.0), ("h100", 2, 67_108_864, 245.0),
    ("h100", 4, 67_584, 40.0), ("h100", 4, 526_336, 44.0), ("h100", 4, 4_194_304, 47.0),
    ("h100", 4, 16_777_216, 93.0), ("h100", 4, 67_108_864, 315.0), ("h100", 4, 4_980_736, 54.0),
    ("h100", 8, 67_584, 28.0), ("h100", 8, 526_336, 31.0), ("h100", 8, 4_194_304, 51.0),
    ("h100", 8, 16_777_216, 115.0), ("h100", 8, 67_108_864, 343.0), ("h100", 8, 8_912_896, 84.0),
]


@pytest.mark.parametrize("gpu,n,size,measured_us", ROBUST_MEASURED)
def test_in_server_all_reduce_matches_measured_nccl(gpu, n, size, measured_us):
    """Co-simulated in-server all-reduce (NVLink copies + start delay, through `cosim collective`'s path)
    within 10 % of NCCL's robust measured curve."""
    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=n, gpus_per_server=8, gpu=gpu)
    row, _ = run_point(sweep, "roce", size)
    assert row.algorithm == "ring"
    assert row.time_us == pytest.approx(measured_us, rel=0.10)


def test_trace_nvlink_rate_reaches_the_executor():
    """An A100 trace's TP all-reduce takes longer than an H100 one's by the ratio of their curves' Simple
    bus bandwidths; the executor copies at a rate that follows each trace's own NVLink rate."""
    size = 256 * MIB
    times, rates = {}, {}
    for gpu in ("a100", "h100"):
        sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=8, gpus_per_server=8, gpu=gpu)
        row, record = run_point(sweep, "roce", size)
        times[gpu] = row.time_us
        rates[gpu] = record.config["attributes"]["DagExecutor::NvlinkDataRate"]
        hw = collective_trace(CollKind.ALL_REDUCE, size, 8, gpu=gpu).spec_dict()["hardware"]
        assert rates[gpu] == nvlink_model(hw).executor_attributes()["DagExecutor::NvlinkDataRate"]
    bus = {g: ALL_REDUCE_CURVES[g][8].bus_bytes_per_s() for g in ("a100", "h100")}
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


def test_concurrent_in_server_all_reduces_share_nvlink_at_ncclss_rate():
    """Two all-reduces on the same 8 H100s at once: the curve's bandwidth part is copy-engine time at the
    Simple line's busbw, so together they take one latency plus about twice one call's bandwidth part (they
    share NVLink at NCCL's measured rate), not one latency plus twice the datasheet wire time."""
    size, n = 64 * MIB, 8
    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=n, gpus_per_server=8, gpu="h100")
    one = collective_trace(CollKind.ALL_REDUCE, size, n)
    cols = {f: np.repeat(getattr(one, f), 2) for f in ("rank", "kind", "phase", "duration_ns", "flops", "bytes",
                                                     "coll_kind", "group", "peer", "match_id", "algo_hint",
                                                     "label", "microbatch", "layer")}
    two = Trace(n_ranks=n, **cols, coll_id=np.tile(np.arange(2, dtype=np.int64), n),
                dep_ptr=np.zeros(2 * n + 1, np.int64), dep_idx=np.zeros(0, np.int64), labels=one.labels,
                group_ptr=one.group_ptr, group_ranks=one.group_ranks, group_kind=one.group_kind, specs=one.specs)
    record = run(sweep.experiment("roce", size), trace=two)
    finish = float(np.max(record.collectives["finish_ns"]))
    curve = ALL_REDUCE_CURVES["h100"][n]
    bandwidth_ns = float(bus_bytes(size, n)) / curve.bus_bytes_per_s() * 1e9
    assert finish == pytest.approx(float(curve.latency_ns(size)) + 2 * bandwidth_ns, rel=0.03)
