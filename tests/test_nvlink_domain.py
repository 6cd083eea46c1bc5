"""NVL72-class scale-up domains: the gb200-nvl72 preset, NVLS all-reduce inside a domain, TP/EP placement, and
an all-to-all that crosses domains — co-simulated, checked against the domain's NVLink bandwidth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import run_main

from cosim.collectives.algorithms import Algorithm, schedule
from cosim.collectives.lower import resolve_algorithm
from cosim.collectives.tuning import Shape, TuningModel
from cosim.sweep.collective import CollectiveSweep, run_point
from cosim.workload.hardware import get_hardware
from cosim.workload.layout import domains_spanned, make_layout
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import CollKind, GroupKind

NVL72 = "gb200-nvl72"


def _tuning(gpu: str, **overrides) -> TuningModel:
    return TuningModel.for_hardware(dataclasses.asdict(get_hardware(gpu, **overrides)))


def test_gb200_nvl72_preset_is_one_72_gpu_domain_with_nvlink_sharp():
    """The preset's datasheet numbers, its aliases, and NVLS only where the hardware has it (off on the 8-GPU
    presets, so their tuner choices stay as they were)."""
    hw = get_hardware(NVL72)
    assert (hw.gpus_per_host, hw.nvlink_bytes_per_s, hw.nic_bytes_per_s, hw.sm_count) == (72, 900e9, 50e9, 148)
    assert hw.peak_flops_per_s == 2.5e15 and hw.nvls and hw.nvlink_latency_ns == 500.0
    assert get_hardware("gb200") == get_hardware("NVL72") == hw
    ultra = get_hardware("gb300")
    assert (ultra.gpus_per_host, ultra.nic_bytes_per_s, ultra.sm_count, ultra.nvls) == (72, 100e9, 160, True)
    assert not any(get_hardware(name).nvls for name in ("a100", "h100", "h200", "b200"))


@pytest.mark.parametrize("n", [2, 5, 72])
def test_nvls_schedule_sends_the_buffer_once_per_gpu(n):
    """NVLS: every GPU sends S bytes over NVLink (the ring sends 2(n−1)/n·S), every owner receives n−1
    copies of its segment before it multicasts it, and each segment is multicast once."""
    size = 10_000_019
    used, s = schedule(CollKind.ALL_REDUCE, Algorithm.NVLS, np.arange(n), size, 1 << 20, 72)
    assert used == Algorithm.NVLS
    sent = np.bincount(s.src, weights=s.bytes, minlength=n)
    assert np.all(sent == size)
    multicast = s.step == 1
    assert np.bincount(s.src[multicast], weights=s.bytes[multicast], minlength=n).sum() == size
    reduced_into = np.bincount(s.dst[~multicast], weights=s.bytes[~multicast], minlength=n)
    assert np.allclose(reduced_into, (n - 1) * np.bincount(s.src[multicast], weights=s.bytes[multicast],
                                                           minlength=n))


def test_nvls_is_chosen_only_inside_a_domain_with_nvlink_sharp():
    """auto picks NVLS for a TP all-reduce inside an NVL72 rack, never on an H100 server (NVLS off), never
    across domains; 'nvls' named where it cannot run is the ring."""
    size = 64 << 20
    ar = CollKind.ALL_REDUCE
    assert resolve_algorithm(ar, "auto", 0, np.arange(8), 72, _tuning(NVL72), size).algorithm == Algorithm.NVLS
    assert resolve_algorithm(ar, "auto", 0, np.arange(8), 8, _tuning("h100"), size).algorithm == Algorithm.RING
    assert resolve_algorithm(ar, "nvls", 0, np.arange(8), 8, _tuning("h100"), size).algorithm == Algorithm.RING
    assert resolve_algorithm(ar, "nvls", 0, np.arange(16), 8, _tuning(NVL72), size).algorithm == Algorithm.RING
    assert resolve_algorithm(ar, "nvls", 0, np.arange(8), 8, _tuning("h100", nvls=True),
                             size).algorithm == Algorithm.NVLS


@pytest.mark.parametrize("algorithm", ["nvls", "ring"])
def test_tp_all_reduce_in_an_nvl72_rack_against_the_nvlink_bound(algorithm):
    """A 256 MiB all-reduce over the 72 GPUs of one rack, co-simulated: never faster than the datasheet
    NVLink allows (S for NVLS, 2(n−1)/n·S for the ring, at 900 GB/s), and within 2 % of the analytic time
    (start latency + those bytes at the executor's NVLink copy rate or the ring's calibrated busbw, and
    the copy latencies on the path); NVLS is more than 1.8× the ring's algbw."""
    n, size = 72, 256 << 20
    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=n, gpu=NVL72, algorithm=algorithm)
    row, record = run_point(sweep, "roce", size)
    assert record.summary["status"] == "complete" and row.algorithm == algorithm
    assert record.summary["payload_bytes"] == 0  # nothing leaves the rack
    tuning = _tuning(NVL72)
    nvl = tuning.nvlink
    est = tuning.best_protocol(CollKind.ALL_REDUCE, Algorithm[algorithm.upper()], Shape(n, 1, n), size)
    per_gpu = size if algorithm == "nvls" else 2 * (n - 1) / n * size
    assert row.time_us * 1e3 > per_gpu / nvl.nvlink_bytes_per_s * 1e9
    if algorithm == "nvls":
        analytic = est.start_latency_ns + 2 * nvl.copy_latency_ns + size / nvl.copy_bytes_per_s * 1e9
    else:
        bus = tuning.bus_bytes_per_s(Algorithm.RING, est.protocol, Shape(n, 1, n), CollKind.ALL_REDUCE)
        analytic = est.start_latency_ns + 2 * (n - 1) * nvl.copy_latency_ns + per_gpu / bus * 1e9
    assert row.time_us * 1e3 == pytest.approx(analytic, rel=0.02)
    if algorithm == "nvls":
        ring = run_point(dataclasses.replace(sweep, algorithm="ring"), "roce", size)[0]
        assert row.algbw_gbps > 1.8 * ring.algbw_gbps


def test_ep_all_to_all_across_two_domains_conserves_bytes_on_the_rails():
    """An all-to-all over two NVLink domains (the NVL72 preset with 8-GPU domains to stay small): PXN keeps
    every network flow on one rail between the domains, the fabric delivers exactly (k−1)/k·S per rank,
    losslessly, and the call is no faster than the NICs allow."""
    n, g, size = 16, 8, 4 << 20
    sweep = CollectiveSweep(op="all_to_all", sizes_bytes=(size,), n_ranks=n, gpu=NVL72, gpus_per_server=g)
    row, record = run_point(sweep, "roce", size)
    s = record.summary
    assert row.algorithm == "pxn" and s["status"] == "complete" and s["drops"] == 0
    assert s["payload_bytes"] == s["delivered_bytes"] == n * size // 2
    flows = record.flows
    assert np.all(np.asarray(flows["delivered_bytes"]) == np.asarray(flows["size_bytes"]))
    server, gpu = {}, {}
    for node, sv, gp in zip(*(np.asarray(record.hosts[k]).tolist() for k in ("node", "server", "gpu"))):
        server[node], gpu[node] = sv, gp
    pairs = list(zip(np.asarray(flows["src"]).tolist(), np.asarray(flows["dst"]).tolist()))
    assert all(server[a] != server[b] and gpu[a] == gpu[b] for a, b in pairs)
    nic = get_hardware(NVL72).nic_bytes_per_s
    assert row.time_us * 1e3 > size / 2 / nic * 1e9


@pytest.mark.parametrize("tp,ep,dp,domain,crossing", [
    (8, 9, 18, 72, 0),    # TP8 × EP9 = 72: every EP group is one rack
    (4, 18, 36, 72, 0),   # TP4 × EP18
    (8, 8, 16, 72, 8),    # TP8 × EP8 = 64 ranks: the second replica's EP groups straddle racks 0 and 1
    (8, 8, 16, 64, 0),    # ... unless 64 GPUs of each rack are used (hardware.gpus_per_host=64)
])
def test_tp_and_ep_groups_in_nvlink_domains(tp, ep, dp, domain, crossing):
    """TP groups always lie inside one domain; EP groups do when tp·ep divides the domain."""
    layout = make_layout(ParallelismSpec(tp=tp, dp=dp, ep=ep))
    spans = domains_spanned(layout.group_ptr, layout.group_ranks, domain)
    assert np.all(spans[layout.group_kind == GroupKind.TP] == 1)
    assert np.count_nonzero(spans[layout.group_kind == GroupKind.EP] > 1) == crossing


def test_collective_cli_takes_the_domain_size_from_the_preset(capsys):
    """`cosim collective --gpu gb200-nvl72` runs 72 ranks in one domain (NVLS, nothing on the fabric); the
    8-GPU presets keep 8 per server."""
    code, stdout, err = run_main(["collective", "--sizes", "1MiB", "--ranks", "72", "--gpu", NVL72], capsys)
    assert code == 0, err
    assert "72 per server" in stdout and " nvls " in stdout
    code, stdout, err = run_main(["collective", "--sizes", "1MiB", "--ranks", "8"], capsys)
    assert code == 0 and "8 per server" in stdout and " ring " in stdout


@pytest.mark.parametrize("setting,field", [("hardware.nvls=maybe", "hardware.nvls"),
                                           ("hardware.nvlink_latency_ns=-3", "hardware.nvlink_latency_ns")])
def test_bad_domain_settings_are_one_line_exit_2(setting, field, capsys):
    """A bad NVLS flag or copy latency: one 'Error:' line naming the field, exit 2."""
    code, _, err = run_main(["trace", "--model", "llama2-7b", "--tp", "8", "--set", "model.layers=1",
                             "--set", setting], capsys)
    assert code == 2 and err.startswith("Error:") and field in err and len(err.strip().splitlines()) == 1


def test_trace_notes_ep_groups_that_straddle_racks(capsys):
    """`cosim trace` says when EP groups span two NVL72 racks, and says nothing when they fit."""
    base = ["trace", "--model", "mixtral-8x7b", "--gpu", NVL72, "--tp", "8", "--sp", "--ep", "8", "--dp", "16",
            "--set", "model.layers=1"]
    code, stdout, err = run_main(base, capsys)
    assert code == 0, err
    assert "NOTE: 8 of 16 ep groups span several NVLink domains of 72 GPUs" in stdout
    code, stdout, err = run_main([*base, "--set", "hardware.gpus_per_host=64"], capsys)
    assert code == 0 and "NOTE" not in stdout


def test_ring_latency_over_more_gpus_than_measured_pays_every_step():
    """A ring inside one 72-GPU domain costs at least launch + 142 steps; on 8 GPUs (measured) it is the
    measured curve's latency."""
    tuning = _tuning(NVL72)
    nvl, size = tuning.nvlink, 1 << 20
    ar, ring = CollKind.ALL_REDUCE, Algorithm.RING
    latency = tuning.latency_ns(ar, ring, 2, Shape(72, 1, 72), size)
    assert latency >= nvl.launch_ns + 142 * nvl.step_ns
    curve = tuning.in_server_curve(ar, ring, Shape(8, 1, 8))
    assert tuning.latency_ns(ar, ring, 2, Shape(8, 1, 8), size) == float(curve.latency_ns(size))
