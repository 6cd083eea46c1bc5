"""Steady-state fast-forward (limits.fast_forward, docs/models/fast-forward.md) against the exact run, in real
ns-3 on both transports: bytes conserved, nothing dropped, far fewer events, and flow, collective and iteration
times within the stated tolerance of the exact ones. Off, the run is exact (the goldens guard that bit for bit).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim.run import experiments_of, run

TOLERANCE = 0.01
TRACE = "traces/llama2-7b-2l_tp2-pp2-dp2.h5"
#: summary keys that depend on the machine
VOLATILE = ("wall_time_s", "packet_hops_per_s")


def _record(doc: dict, **limits):
    return run(experiments_of({**doc, "limits": limits})[0])


def _checked(doc: dict):
    """The fast-forwarded record of ``doc`` with the error monitor's figures (it reruns exactly)."""
    return _record(doc, fast_forward=True, fast_forward_tolerance=TOLERANCE, fast_forward_check=True)


def _flows_doc(transport: str, pattern: str, **network) -> dict:
    return {"network": {"transport": transport, "topology": "leaf-spine", "hosts": 8, "link_gbps": 100.0, **network},
            "workload": {"kind": "flows", "pattern": pattern,
                         "flow_bytes": "8MiB" if pattern == "permutation" else "1MiB"}}


def _conserved(s: dict) -> None:
    assert s["status"] == "complete"
    assert s["delivered_bytes"] == s["payload_bytes"]
    assert s["flows_completed"] == s["flows"]
    assert s["drops"] == 0


def _training_tracks_exact(s: dict, fewer_events: int) -> None:
    """A fast-forwarded training run: bytes conserved, ``fewer_events`` times fewer events than exact, and the
    iteration, every collective and the p99 FCT within TOLERANCE of exact."""
    _conserved(s)
    assert s["events"] * fewer_events < s["fast_forward_check_exact_events"]
    assert s["fast_forward_check_iteration_rel"] <= TOLERANCE
    assert s["fast_forward_check_collective_max_rel"] <= TOLERANCE
    assert s["fast_forward_check_fct_p99_rel"] <= TOLERANCE


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_long_flows_are_fast_forwarded_within_tolerance(transport, engine_ns):
    """A permutation of long flows on a leaf-spine settles within a few round trips: fast-forward credits most
    of their payload, every byte still arrives once, nothing drops, the events fall at least fivefold and every
    flow's completion time stays within the tolerance of the exact run's."""
    rec = _checked(_flows_doc(transport, "permutation"))
    s = rec.summary
    _conserved(s)
    # Port counters add up: each sender's port counts at least its flow's data on the wire, credited packets
    # included (its ACKs for the flow it receives come on top).
    mtu, header = s["mtu_bytes"], s["header_bytes"]
    for src, size in zip(rec.flows["src"], rec.flows["size_bytes"]):
        row = np.flatnonzero(rec.ports["node"] == src)
        assert row.size == 1
        assert rec.ports["tx_bytes"][row[0]] >= size + -(-size // mtu) * header
    assert s["fast_forward_tolerance"] == TOLERANCE
    assert s["fast_forward_spans"] >= 8  # every flow fast-forwarded at least once
    assert s["fast_forward_credited_bytes"] > 0.5 * s["payload_bytes"]
    assert s["events"] * 5 < s["fast_forward_check_exact_events"]
    assert s["fast_forward_check_flow_fct_max_rel"] <= TOLERANCE
    assert s["fast_forward_check_makespan_rel"] <= TOLERANCE


@pytest.mark.parametrize("transport,network,blocked", [
    ("roce", {"dcqcn": False, "topology": "single-switch", "attributes": {"SharedBufferMmu::BufferBytes": "2000000"}},
     "pfc_paused_ns"),
    ("ib", {"topology": "single-switch"}, "credit_stall_ns"),
])
def test_incast_with_pauses_or_stalls_stays_within_tolerance(transport, network, blocked, engine_ns):
    """An incast that pauses (RoCE without DCQCN: PFC) or stalls for credits (InfiniBand) is lossless with
    fast-forward too, and its flows finish within the tolerance of the exact run: paths that were paused or
    stalled in the window are not taken for steady."""
    doc = _flows_doc(transport, "incast", **network)
    s = _checked(doc).summary
    _conserved(s)
    assert s[blocked] > 0
    assert s["fast_forward_check_flow_fct_max_rel"] <= TOLERANCE
    assert s["fast_forward_check_fct_p99_rel"] <= TOLERANCE


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_training_iteration_within_tolerance(transport, engine_ns):
    """A small training run (TP2 x PP2 x DP2 on 4 servers of 2 GPUs, rail-optimized): fast-forward keeps the
    iteration time, every collective's time and the p99 FCT within the tolerance of the exact run, delivers
    every byte without a drop, and executes at least five times fewer events."""
    doc = {"network": {"transport": transport, "gpus_per_server": 2, "link_gbps": 100.0},
           "workload": {"kind": "training", "trace": TRACE, "iterations": 1}}
    _training_tracks_exact(_checked(doc).summary, fewer_events=5)


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_ring_channels_sharing_nics_stay_in_step(transport, engine_ns):
    """GPT-13B's shape for one layer (TP8 x DP16 on 128 GPUs, rail-optimized 400 Gbit/s; the rails fold into
    one): each NIC sends several ring channels at once, sharing its link equally, and each ring step starts
    when the last one ends. A packet of difference between such flows at a span's end moves one channel ahead
    of the others, and the ring amplifies that step after step (a p99 FCT 19 % off on InfiniBand before spans
    kept the round robin's order and shared the standing queue out by rate). The p99 FCT, every collective
    and the iteration stay within the tolerance, with at least ten times fewer events, and every span is
    credited (160 of them were not on InfiniBand before a span's end waited for its packets in flight)."""
    doc = {"network": {"transport": transport, "topology": "rail-optimized", "link_gbps": 400.0,
                       "link_delay_ns": 1000.0},
           "workload": {"kind": "training", "model": "gpt3-175b",
                        "model_overrides": {"num_layers": 1, "hidden_size": 5120, "num_heads": 40,
                                            "num_kv_heads": 40, "ffn_hidden_size": 20480},
                        "parallelism": {"tp": 8, "dp": 16, "micro_batch_size": 1, "global_batch_size": 16}}}
    s = _checked(doc).summary
    _training_tracks_exact(s, fewer_events=10)
    # every span is credited: one cut by a new flow, or ending on a standing queue, waits for its packets
    assert s["fast_forward_flows_uncredited"] == 0


def test_fast_forward_is_deterministic(engine_ns):
    """Same inputs and seed, same fast-forwarded results, bit for bit."""
    doc = _flows_doc("roce", "permutation")
    a, b = (_record(doc, fast_forward=True) for _ in range(2))
    assert {k: v for k, v in a.summary.items() if k not in VOLATILE} == \
           {k: v for k, v in b.summary.items() if k not in VOLATILE}
    assert np.array_equal(a.flows["finish_ns"], b.flows["finish_ns"])


def test_off_runs_without_a_controller(engine_ns):
    """Off (the default), no controller runs: the summary has no fast_forward keys and the run sets no
    FastForwardController attribute."""
    rec = _record(_flows_doc("roce", "permutation"))
    assert not [k for k in rec.summary if k.startswith("fast_forward")]
    assert not [k for k in rec.config["attributes"] if k.startswith("FastForwardController")]


def test_sampling_follows_the_transport_unless_set(engine_ns):
    """RoCE runs sample every 500 ns over a 3 us window, InfiniBand keeps the controller's defaults (1 us,
    4 us), and a --set of either attribute wins."""
    def attributes(transport: str, **network) -> dict:
        doc = {**_flows_doc(transport, "permutation"), "limits": {"fast_forward": True}}
        doc["network"] |= network
        rec = run(experiments_of(doc)[0])
        return {k.split("::")[1]: v for k, v in rec.config["attributes"].items()
                if k in ("FastForwardController::CheckInterval", "FastForwardController::StabilityWindow")}

    assert attributes("roce") == {"CheckInterval": "500ns", "StabilityWindow": "3us"}
    assert attributes("ib") == {}
    assert attributes("roce", attributes={"FastForwardController::StabilityWindow": "8us"}) == \
        {"CheckInterval": "500ns", "StabilityWindow": "8us"}


@pytest.mark.parametrize("args,field", [
    (["--transport", "uec", "--fast-forward"], "limits.fast_forward"),
    (["--fast-forward", "--fault", "link_down:host0@1us"], "limits.fast_forward"),
    (["--fast-forward-check"], "limits.fast_forward_check"),
    (["--fast-forward", "--fast-forward-tolerance", "0.5"], "fast-forward-tolerance"),
])
def test_unsupported_or_bad_settings_are_refused(args, field, tmp_path, capsys):
    """What fast-forward does not model (Ultra Ethernet, faults) and bad settings are one-line errors naming the
    field, exit code 2, no file written."""
    out = tmp_path / "r.h5"
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "4", *args, "-o", str(out)], capsys)
    assert code == 2
    assert field in err and "Traceback" not in err
    assert not out.exists()
