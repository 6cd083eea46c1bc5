"""The one registry of summary metrics: label, unit and display rule of every summary key.

Summary keys carry their unit in their suffix (``_ns``, ``_bytes``, ``_gbps``); :data:`METRICS` gives the
known ones a label, a display unit and an order, and :func:`metric_for` infers the rule of any other key
from its suffix. The terminal table of ``cosim run`` and ``cosim inspect``, ``cosim compare``, the report
and the notebook frames all read this registry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Metric:
    """How a summary key is shown: label, display unit and scale from the stored value, and its section.

    ``integer`` values (counts) are shown whole; every other number with :data:`SIGNIFICANT` significant
    digits in its one display unit, so a tiny queue reads 0.064 KB, never 0.0 KB. ``section`` is "result"
    or "simulator" (what the simulation cost: events, packet-hops, wall time), which tables keep apart."""

    key: str
    label: str
    unit: str = ""  # unit of the text table (after scale)
    scale: float = 1.0
    integer: bool = False
    section: str = "result"

    @property
    def raw_unit(self) -> str:
        """Unit of the stored value, from the key's suffix (JSON and CSV use it)."""
        return raw_unit(self.key)


#: significant digits of every non-integer value in a text table
SIGNIFICANT = 4

_US, _MS, _KB, _MB = ("us", 1e-3), ("ms", 1e-6), ("KB", 1e-3), ("MB", 1e-6)
_X = ("", 1.0)
_TFLOPS = ("TFLOP/s", 1e-12)
_COUNT = {"integer": True}

#: group kinds and collective kinds of the per-group collective metrics, in display order
_GROUP_LABELS = (("tp", "TP"), ("cp", "CP"), ("pp", "PP"), ("dp", "DP"), ("ep", "EP"), ("edp", "expert-DP"),
                 ("embd", "embedding"), ("world", "world"), ("other", "other"))
_COLL_LABELS = (("all_reduce", "all-reduce"), ("reduce_scatter", "reduce-scatter"), ("all_gather", "all-gather"),
                ("all_to_all", "all-to-all"), ("broadcast", "broadcast"))
#: per (group, kind): calls, time p50/p99 and busbw (nccl-tests' convention, cosim.results.collectives)
_COLL = tuple(entry for g, gl in _GROUP_LABELS for c, cl in _COLL_LABELS for entry in (
    (f"coll_{g}_{c}_count", f"{gl} {cl} calls", _X, _COUNT),
    (f"coll_{g}_{c}_p50_ns", f"{gl} {cl} time p50", _US, {}),
    (f"coll_{g}_{c}_p99_ns", f"{gl} {cl} time p99", _US, {}),
    (f"coll_{g}_{c}_busbw_gbyte_per_s", f"{gl} {cl} busbw p50", ("GB/s", 1.0), {})))
_SIM = {"section": "simulator"}
#: media of the exposed-communication split (cosim.results.exposure), in display order
_MEDIUM_LABELS = (("nvlink", "NVLink"), ("fabric", "fabric"), ("other_ranks", "waiting for other ranks"))
#: exposed communication per parallelism dimension, then per medium (cosim.results.exposure)
_EXPOSED = (*((f"exposed_comm_{g}_ns", f"exposed comm, {gl}", _MS, {}) for g, gl in _GROUP_LABELS),
            *((f"exposed_comm_{m}_ns", f"exposed comm, {ml}", _MS, {}) for m, ml in _MEDIUM_LABELS))
#: point-to-point sends per dimension (pipeline stages: PP)
_P2P = tuple(entry for g, gl in _GROUP_LABELS for entry in (
    (f"p2p_{g}_send_count", f"{gl} sends", _X, _COUNT),
    (f"p2p_{g}_send_bytes", f"{gl} sends, payload", _MB, {}),
    (f"p2p_{g}_send_p50_ns", f"{gl} send time p50", _US, {}),
    (f"p2p_{g}_send_p99_ns", f"{gl} send time p99", _US, {})))

#: per-workload rows of shared fabrics (cosim.record: ``<workload>_<key>`` in a run's summary)
_SHARED_FABRIC = (
    ("sharing_slowdown", "slowdown from sharing (shared / alone)", _X, {}),
    ("alone_iteration_time_ns", "iteration time alone", _MS, {}),
    ("fct_mean_ns", "FCT mean", _US, {}),
    ("alone_fct_mean_ns", "FCT mean alone", _US, {}),
    ("n_workloads", "workloads", _X, _COUNT),
)
#: the rows of the per-workload table of shared fabrics
WORKLOAD_KEYS = frozenset({"status", "iterations", "iteration_time_ns", "iteration_time_first_ns",
                           "compute_time_ns", "exposed_comm_ns", "mfu", "model_flop_per_s_per_gpu",
                           "megatron_flop_per_s_per_gpu", *(c[0] for c in _SHARED_FABRIC), "n_ranks",
                           "flows", "flows_completed", "fct_p50_ns", "fct_p99_ns", "fct_slowdown_p50",
                           "fct_slowdown_p99", "transfer_slowdown_p50", "transfer_slowdown_p99"})

# ---------------------------------------------------------------- faults (cosim.faults)
#: iterations whose delay against the fault-free baseline gets its own row (``iteration_<i>_delay_ns``)
FAULT_DELAY_ROWS = 64
_FAULTS = (
    ("faults", "faults injected", _X, _COUNT),
    ("fault_down_actions", "links taken down", _X, _COUNT),
    ("fault_up_actions", "links brought back up", _X, _COUNT),
    ("fault_reroute_actions", "route convergences (switches)", _X, _COUNT),
    ("fault_degrade_actions", "links degraded", _X, _COUNT),
    ("fault_drops", "packets lost on dead links", _X, _COUNT),
    ("ber_drops", "packets lost to bit errors", _X, _COUNT),
    ("link_retransmissions", "link-level retransmissions (IB)", _X, _COUNT),
    ("llr_retries", "corrupted frames replayed by LLR", _X, _COUNT),
    ("llr_replayed_frames", "frames LLR replays sent again", _X, _COUNT),
    ("reroutes", "switch route tables replaced", _X, _COUNT),
    # fault mechanisms (cosim.faults.mechanisms, docs/models/pfc-watchdog.md)
    ("fault_storm_start_actions", "PFC pause storms", _X, _COUNT),
    ("fault_slowed_actions", "straggler ranks", _X, _COUNT),
    ("pause_storm_frames_sent", "PAUSE frames of storming NICs", _X, _COUNT),
    ("pfc_watchdog_actions", "PFC watchdog actions (disable, restore)", _X, _COUNT),
    ("pfc_watchdog_dropped_packets", "packets the PFC watchdog dropped", _X, _COUNT),
    ("failed_collective", "collective timed out (row)", _X, _COUNT),
    ("failed_rank", "rank of the timed-out collective", _X, _COUNT),
    ("failed_at_ns", "job failed at", _MS, {}),
    ("baseline_iteration_time_ns", "iteration time without faults", _MS, {}),
    ("iteration_delay_max_ns", "iteration delay from faults, max", _MS, {}),
    ("completion_delay_ns", "completion delay from faults", _US, {}),
    ("slo_missed_by_faults", "requests within the SLOs without faults that miss them", _X, _COUNT),
    ("e2e_delay_max_ns", "largest rise of a request's end-to-end latency from faults", _MS, {}),
    *((f"iteration_{i}_delay_ns", f"iteration {i} delay from faults", _MS, {}) for i in range(FAULT_DELAY_ROWS)),
)
#: the fault rows among the training rows of the terminal table
_FAULT_TRAINING_KEYS = frozenset(k for k, *_ in _FAULTS)


def fault_delay_entries(faulted, baseline) -> dict:
    """Summary keys of a run with faults against its fault-free ``baseline`` (both RunRecords):
    ``completion_delay_ns`` (last finish − the baseline's: flows' last byte, or the last iteration's end);
    for training runs also ``iteration_delay_ns`` (per iteration, faulted − baseline iteration time; None
    where either did not finish), ``iteration_<i>_delay_ns``, ``iteration_delay_max_ns`` and
    ``baseline_iteration_time_ns``; ``baseline_run`` names the baseline."""
    import numpy as np  # noqa: PLC0415

    def last_finish(run) -> float | None:
        if run.iterations:
            f = np.asarray(run.iterations["finish_ns"], np.float64)
        else:
            f = np.asarray(run.flows.get("finish_ns", []), np.float64)
        return float(f.max()) if f.size and np.all(np.isfinite(f)) else None

    out: dict = {"baseline_run": baseline.name}
    a, b = last_finish(faulted), last_finish(baseline)
    out["completion_delay_ns"] = None if a is None or b is None else round(a - b, 3)
    if faulted.iterations and baseline.iterations:
        t = np.asarray(faulted.iterations["time_ns"], np.float64)
        tb = np.asarray(baseline.iterations["time_ns"], np.float64)
        n = min(t.size, tb.size)
        # to the picosecond, the simulator's resolution (iteration times are differences of finish times)
        delay = [round(float(x), 3) + 0.0 if np.isfinite(x) else None for x in (t[:n] - tb[:n])]
        out["iteration_delay_ns"] = delay
        out |= {f"iteration_{i}_delay_ns": d for i, d in enumerate(delay[:FAULT_DELAY_ROWS])}
        finite = [d for d in delay if d is not None]
        out["iteration_delay_max_ns"] = max(finite) if finite else None
        out["baseline_iteration_time_ns"] = baseline.summary.get("iteration_time_ns")
    out |= _serving_fault_entries(faulted, baseline)
    return out


def requests_within_slo(requests: dict, *, ttft_slo_ms: float, tpot_slo_ms: float):
    """bool per request of a ``requests`` table: finished, TTFT within its SLO and TPOT not above its SLO
    (nan TPOT, one output token, counts as within)."""
    import numpy as np  # noqa: PLC0415

    done = np.isfinite(np.asarray(requests["last_token_ns"]))
    tpot = np.asarray(requests["tpot_ns"])
    return done & (np.asarray(requests["ttft_ns"]) <= ttft_slo_ms * 1e6) & ~(tpot > tpot_slo_ms * 1e6)


def _serving_fault_entries(faulted, baseline) -> dict:
    """Inference runs: the requests within both SLOs in the baseline that miss one under the faults
    (``slo_missed_by_faults``, their ids in ``slo_missed_by_faults_requests``) and the largest rise of a
    request's end-to-end latency (``e2e_delay_max_ns``)."""
    import numpy as np  # noqa: PLC0415

    work = faulted.config.get("experiment", {}).get("workload", {})
    if not (faulted.requests and baseline.requests) or work.get("kind") != "inference":
        return {}
    slo = {"ttft_slo_ms": float(work["ttft_slo_ms"]), "tpot_slo_ms": float(work["tpot_slo_ms"])}
    missed = np.flatnonzero(requests_within_slo(baseline.requests, **slo)
                            & ~requests_within_slo(faulted.requests, **slo))
    delay = np.asarray(faulted.requests["e2e_ns"], np.float64) - np.asarray(baseline.requests["e2e_ns"], np.float64)
    return {"slo_missed_by_faults": int(missed.size), "slo_missed_by_faults_requests": missed.tolist(),
            "e2e_delay_max_ns": round(float(np.nanmax(delay)), 3) if np.isfinite(delay).any() else None}
# ---------------------------------------------------------------- end of faults
# ---- inference runs (cosim.kinds.inference): request latencies, throughput, goodput, batching
_INFERENCE = (
    ("requests", "requests", _X, _COUNT),
    ("requests_completed", "requests completed", _X, _COUNT),
    *((f"{k}_p{q}_ns", f"{label} p{q}", _MS, {}) for k, label in (
        ("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end-to-end latency")) for q in (50, 90, 99)),
    ("queueing_p50_ns", "queueing delay p50", _MS, {}),
    ("queueing_p99_ns", "queueing delay p99", _MS, {}),
    ("kv_transfer_p50_ns", "KV transfer time p50", _MS, {}),
    ("kv_transfer_p99_ns", "KV transfer time p99", _MS, {}),
    ("throughput_tokens_per_s", "throughput, output tokens/s", ("tokens/s", 1.0), {}),
    ("throughput_requests_per_s", "throughput, requests/s", ("req/s", 1.0), {}),
    ("goodput_requests_per_s", "goodput under the SLOs, requests/s", ("req/s", 1.0), {}),
    ("slo_attainment", "share of requests within both SLOs", _X, {}),
    ("mean_in_flight_requests", "mean requests in flight", _X, {}),
    *((f"{side}_{what}_p50_ns", f"{side} EP {what} of one layer, p50", _US, {})
      for side in ("prefill", "decode") for what in ("dispatch", "combine")),
    ("prefill_all_to_all_share", "EP dispatch + combine share of a prefill step", _X, {}),
    ("decode_all_to_all_share", "EP dispatch + combine share of a decode step", _X, {}),
    ("prefill_all_to_all_exposed_share", "EP all-to-all exposed share of a prefill step", _X, {}),
    ("decode_all_to_all_exposed_share", "EP all-to-all exposed share of a decode step", _X, {}),
    ("prefill_steps", "prefill steps", _X, _COUNT),
    ("decode_steps", "decode steps", _X, _COUNT),
    ("batching_iterations", "packet-level runs to the batching fixed point", _X, _COUNT | {"section": "simulator"}),
    ("batching_converged", "batching reached its fixed point (1 yes)", _X, _COUNT | {"section": "simulator"}),
)
#: the result rows of the side-by-side table of inference runs (simulator rows follow them)
INFERENCE_KEYS = frozenset({
    "status", *(c[0] for c in _INFERENCE), "coll_tp_all_reduce_p50_ns", "coll_tp_all_reduce_p99_ns",
    "coll_ep_all_to_all_p50_ns", "coll_ep_all_to_all_p99_ns", "n_ranks", "flows", "flows_completed",
    "fct_slowdown_p99", "link_utilization_max", "max_queue_bytes", "queue_p99_bytes", "drops", "ecn_marks",
    "cnps_sent", "pause_frames_sent", "pfc_paused_ns", "credit_stall_ns", "slo_missed_by_faults",
    "e2e_delay_max_ns", "completion_delay_ns"})
_INFERENCE_SIMULATOR_ROWS = frozenset({"batching_iterations", "batching_converged"})

#: Known summary keys in display order (keys absent from every run are not shown).
METRICS: tuple[Metric, ...] = tuple(Metric(k, label, *u, **kw) for k, label, u, kw in (
    ("status", "status", _X, {}),
    ("iterations", "iterations", _X, _COUNT),
    ("iteration_time_ns", "iteration time", _MS, {}),
    ("iteration_time_first_ns", "first iteration time", _MS, {}),
    ("compute_time_ns", "compute, busiest rank", _MS, {}),
    ("exposed_comm_ns", "exposed communication", _MS, {}),
    *_EXPOSED,
    ("mfu", "MFU (model FLOPs / peak)", _X, {}),
    ("model_flop_per_s_per_gpu", "model FLOP/s per GPU", _TFLOPS, {}),
    ("megatron_flop_per_s_per_gpu", "FLOP/s per GPU, Megatron's count", _TFLOPS, {}),
    *_SHARED_FABRIC,
    *_INFERENCE,
    *_COLL,
    *_P2P,
    ("n_ranks", "ranks", _X, _COUNT),
    ("flows", "flows", _X, _COUNT),
    ("flows_completed", "flows completed", _X, _COUNT),
    ("fct_p50_ns", "FCT p50", _US, {}),
    ("fct_p99_ns", "FCT p99", _US, {}),
    ("fct_p999_ns", "FCT p99.9", _US, {}),
    ("fct_max_ns", "FCT max", _US, {}),
    ("fct_slowdown_p50", "FCT slowdown p50, per flow", _X, {}),
    ("fct_slowdown_p99", "FCT slowdown p99, per flow", _X, {}),
    ("fct_slowdown_p999", "FCT slowdown p99.9, per flow", _X, {}),
    ("transfer_slowdown_p50", "slowdown p50, per whole transfer", _X, {}),
    ("transfer_slowdown_p99", "slowdown p99, per whole transfer", _X, {}),
    ("goodput_gbps", "goodput", ("Gbps", 1.0), {}),
    ("link_utilization_max", "busiest link utilization", _X, {}),
    ("link_utilization_mean", "mean utilization of used links", _X, {}),
    ("latency_p50_ns", "packet latency p50", _US, {}),
    ("latency_p99_ns", "packet latency p99", _US, {}),
    ("latency_p999_ns", "packet latency p99.9", _US, {}),
    ("max_queue_bytes", "max queue, busiest port", _KB, {}),
    ("queue_p99_bytes", "queue p99, over switch ports and time", _KB, {}),
    ("pfc_paused_ns", "PFC paused time, sum over ports", _US, {}),
    ("pfc_paused_port_max_ns", "PFC paused time, most-paused port", _US, {}),
    ("pause_frames_sent", "PFC PAUSE frames", _X, _COUNT),
    ("pause_events", "PFC pause events", _X, _COUNT),
    ("credit_stall_ns", "credit-stall time, sum over ports", _US, {}),
    ("credit_stall_port_max_ns", "credit-stall time, most-stalled port", _US, {}),
    ("ecn_marks", "ECN marks", _X, _COUNT),
    ("cnps_sent", "CNPs", _X, _COUNT),
    ("cnps_received", "CNPs received", _X, _COUNT),
    ("drops", "drops", _X, _COUNT),
    ("switch_drops", "switch drops", _X, _COUNT),
    ("retransmitted_packets", "retransmitted packets", _X, _COUNT),
    ("retransmitted_bytes", "retransmitted payload", _KB, {}),
    ("trimmed_packets", "packets trimmed to their header (UEC)", _X, _COUNT),
    ("uec_loss_detections", "losses found by reordering (UEC)", _X, _COUNT),
    ("uec_sacks_sent", "SACKs sent (UEC)", _X, _COUNT),
    ("uec_credits_sent", "RCCC credits sent (UEC)", _X, _COUNT),
    ("naks_sent", "NAKs", _X, _COUNT),
    ("timeouts", "retransmission timeouts", _X, _COUNT),
    ("reordered_packets", "packets placed out of order", _X, _COUNT),
    ("admission_grants", "admission grants (clear-to-send)", _X, _COUNT),
    ("peak_qp_inflight_bytes", "peak unacknowledged payload of a QP", _KB, {}),
    *_FAULTS,
    ("payload_bytes", "payload", _MB, {}),
    ("delivered_bytes", "delivered", _MB, {}),
    ("peak_headroom_used_bytes", "peak PFC headroom used", _KB, {}),
    ("min_headroom_bytes", "min PFC headroom", _KB, {}),
    ("acks", "ACKs", _X, _COUNT),
    ("credit_stall_events", "credit-stall events", _X, _COUNT),
    ("credit_packets_sent", "credit packets", _X, _COUNT),
    ("credit_violations", "credit violations", _X, _COUNT),
    ("peak_lane_bytes", "peak VL input buffer used", _KB, {}),
    ("mtu_bytes", "MTU", ("B", 1.0), _COUNT | _SIM),
    ("header_bytes", "header per packet", ("B", 1.0), _COUNT | _SIM),
    ("n_ops", "trace ops per iteration", _X, _COUNT | _SIM),
    ("n_dag_ops", "DAG ops", _X, _COUNT | _SIM),
    ("n_dag_ops_finished", "DAG ops finished", _X, _COUNT | _SIM),
    ("n_flows", "flows created", _X, _COUNT | _SIM),
    ("sim_time_ns", "simulated time", _MS, _SIM),
    ("packet_hops", "packet-hops", _X, _COUNT | _SIM),
    ("data_packet_hops", "data packet-hops", _X, _COUNT | _SIM),
    ("events", "events", _X, _COUNT | _SIM),
    ("fast_forward_tolerance", "fast-forward tolerance (relative)", _X, _SIM),
    ("fast_forward_spans", "fast-forwarded spans", _X, _COUNT | _SIM),
    ("fast_forward_credited_bytes", "payload fast-forwarded", _MB, _SIM),
    ("fast_forward_check_exact_events", "events of the exact run", _X, _COUNT | _SIM),
    ("fast_forward_check_iteration_rel", "fast-forward error: iteration time (relative)", _X, _SIM),
    ("fast_forward_check_collective_max_rel", "fast-forward error: worst collective (relative)", _X, _SIM),
    ("fast_forward_check_fct_p99_rel", "fast-forward error: FCT p99 (relative)", _X, _SIM),
    ("fast_forward_check_flow_fct_p99_rel", "fast-forward error: p99 over flows (relative)", _X, _SIM),
    ("wall_time_s", "wall time", ("s", 1.0), _SIM),
    ("packet_hops_per_s", "packet-hops/s", ("M/s", 1e-6), _SIM),
))
_KNOWN = {m.key: m for m in METRICS}

#: key suffix -> (raw unit, display unit, scale) for keys not in METRICS
_SUFFIXES = (
    ("_flop_per_s_per_gpu", "FLOP/s", "TFLOP/s", 1e-12),
    ("_per_s", "1/s", "1/s", 1.0),
    ("_gbyte_per_s", "GB/s", "GB/s", 1.0),
    ("_ns", "ns", "us", 1e-3),
    ("_ps", "ps", "us", 1e-6),
    ("_s", "s", "s", 1.0),
    ("_bytes", "B", "KB", 1e-3),
    ("_gbps", "Gbit/s", "Gbps", 1.0),
    ("_bps", "bit/s", "Gbps", 1e-9),
)


def raw_unit(key: str) -> str:
    """Unit of a summary value from its key's suffix (``_ns`` → ns, ``_bytes`` → B; none → "")."""
    return next((raw for suffix, raw, *_ in sorted(_SUFFIXES, key=lambda x: -len(x[0])) if key.endswith(suffix)),
                "")


def metric_for(key: str) -> Metric:
    """The display rule of a summary key: the catalogued one, or one inferred from the key's suffix."""
    if key in _KNOWN:
        return _KNOWN[key]
    for suffix, _raw, unit, scale in _SUFFIXES:
        if key.endswith(suffix):
            return Metric(key, key[: -len(suffix)].replace("_", " "), unit, scale)
    return Metric(key, key.replace("_", " "))


def ordered_keys(summaries: Sequence[Mapping]) -> list[str]:
    """Scalar summary keys present in any summary: catalogued results in METRICS order, then other keys
    sorted, then what the simulation cost (the "simulator" section)."""
    present = {k for s in summaries for k, v in s.items() if v is None or isinstance(v, (bool, int, float, str))}
    known = [m for m in METRICS if m.key in present]
    return ([m.key for m in known if m.section == "result"] + sorted(present - _KNOWN.keys())
            + [m.key for m in known if m.section == "simulator"])


#: the result rows of the side-by-side table of co-simulated training runs (simulator rows follow them)
TRAINING_KEYS = frozenset({
    "status", "iterations", "iteration_time_ns", "iteration_time_first_ns", "compute_time_ns", "exposed_comm_ns",
    "mfu", "model_flop_per_s_per_gpu", "megatron_flop_per_s_per_gpu", *(c[0] for c in _COLL),
    *(c[0] for c in _P2P if not c[0].endswith("_bytes")), "n_ranks", "flows",
    "flows_completed", "transfer_slowdown_p50",
    "transfer_slowdown_p99", "fct_slowdown_p50", "fct_slowdown_p99", "link_utilization_max", "max_queue_bytes",
    "queue_p99_bytes", "drops", "switch_drops", "retransmitted_packets", "retransmitted_bytes", "trimmed_packets",
    "naks_sent", "timeouts", "ecn_marks",
    "cnps_sent", "pause_frames_sent", "pfc_paused_ns", "pfc_paused_port_max_ns", "credit_stall_ns",
    "credit_stall_port_max_ns"}) | _FAULT_TRAINING_KEYS
#: summary keys not shown in the terminal table (details of the models; they stay in the file and in compare)
_DETAIL_KEYS = frozenset({"link_utilization_mean", "pause_events", "cnps_received", "peak_headroom_used_bytes",
                          "min_headroom_bytes", "acks", "credit_stall_events", "credit_packets_sent",
                          "credit_violations", "peak_lane_bytes"})


#: the simulator rows of the terminal table (the others stay in the file and in compare)
_SIMULATOR_ROWS = frozenset({"sim_time_ns", "packet_hops", "events", "wall_time_s", "packet_hops_per_s",
                             "fast_forward_tolerance", "fast_forward_spans", "fast_forward_credited_bytes",
                             "fast_forward_check_exact_events", "fast_forward_check_iteration_rel",
                             "fast_forward_check_collective_max_rel", "fast_forward_check_fct_p99_rel",
                             "fast_forward_check_flow_fct_p99_rel"})


def row_label(m: Metric) -> str:
    """``label (unit)`` as the terminal table shows a metric."""
    return f"{m.label} ({m.unit})" if m.unit else m.label


def format_number(x: float, *, integer: bool = False, signed: bool = False) -> str:
    """``x`` for a text table: whole if ``integer``, else SIGNIFICANT significant digits without an exponent
    between 1e-3 and 1e15, trailing zeros dropped (12345.6 → 12346, 1.23456 → 1.235, 1.5 → 1.5, 0.0000642 →
    6.420e-05)."""
    sign = "+" if signed else ""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if integer and float(x).is_integer():
        return f"{int(x):{sign}d}"
    a = abs(x)
    if a == 0:
        return f"{0:{sign}d}"
    if a < 1e-3 or a >= 1e15:
        return f"{x:{sign}.{SIGNIFICANT - 1}e}"
    digits = max(0, SIGNIFICANT - 1 - math.floor(math.log10(a)))
    text = f"{x:{sign}.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_cell(m: Metric, value, *, signed: bool = False, missing: str = "-") -> str:
    """One value of metric ``m`` in its display unit (``missing`` if absent)."""
    if value is None:
        return missing
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format_number(value * m.scale, integer=m.integer, signed=signed)


def table_width() -> int:
    """Columns a text table may use: the terminal's, or $COLUMNS, else 100."""
    import shutil  # noqa: PLC0415

    return max(40, shutil.get_terminal_size((100, 24)).columns)


def layout(header: Sequence[str], body: Sequence[Sequence[str]], *, fixed: int = 1, group: int = 1,
           left: int = 1, width: int | None = None) -> str:
    """An aligned text table; when it is wider than ``width``, the columns after the first ``fixed`` are
    split into blocks (of ``group`` columns that belong together) shown one below the other, each with the
    ``fixed`` columns repeated, so many runs never make a line wider than the terminal. The first ``left``
    columns are left-aligned (labels), the rest right-aligned (numbers)."""
    width = table_width() if width is None else width
    rows = [list(header), *map(list, body)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    head, tail = list(range(fixed)), list(range(fixed, len(header)))
    groups = [tail[i:i + group] for i in range(0, len(tail), group)]
    blocks: list[list[int]] = []
    used = sum(widths[i] + 2 for i in head)
    for g in groups:
        need = sum(widths[i] + 2 for i in g)
        if blocks and used + need > width:
            blocks.append([])
            used = sum(widths[i] + 2 for i in head)
        if not blocks:
            blocks.append([])
        blocks[-1] += g
        used += need
    blocks = blocks or [[]]

    def line(r, cols):
        return "  ".join(r[i].ljust(widths[i]) if i < left else r[i].rjust(widths[i]) for i in cols).rstrip()

    out = []
    for cols in blocks:
        cols = head + cols
        out += [line(rows[0], cols), "  ".join("-" * widths[i] for i in cols)] + [line(r, cols) for r in rows[1:]]
        out.append("")
    return "\n".join(out[:-1])


def summary_table(summaries: Mapping[str, Mapping], *, training: bool = False, inference: bool = False,
                  width: int | None = None) -> str:
    """Run summaries side by side for the terminal: a column per run, a row per catalogued metric present
    in any run (for training or inference runs, their rows), then what the simulation cost, below a rule."""
    names = list(summaries)
    present = lambda k: any(k in s for s in summaries.values())  # noqa: E731
    wanted = [m for m in METRICS if present(m.key)]
    keep = (lambda k: k in INFERENCE_KEYS) if inference else (lambda k: k in TRAINING_KEYS) if training else (
        lambda k: k not in _DETAIL_KEYS)
    results = [m for m in wanted if m.section == "result" and keep(m.key)]
    sim_rows = _SIMULATOR_ROWS | (_INFERENCE_SIMULATOR_ROWS if inference else frozenset())
    simulator = [m for m in wanted if m.section == "simulator" and m.key in sim_rows]
    row = lambda m: [row_label(m)] + [format_cell(m, summaries[n].get(m.key)) for n in names]  # noqa: E731
    body = [row(m) for m in results]
    if simulator:
        body += [["simulator:"] + [""] * len(names)] + [row(m) for m in simulator]
    return layout(["metric", *names], body, width=width)


def exposure_line(summary: Mapping) -> str | None:
    """One line of where a training run's exposed communication goes, in the terminal's unit: ``exposed
    comm 119.4 ms: TP 1.081, PP 7.534, DP 98.34, waiting for other ranks 12.49 (NVLink 1.081, fabric
    105.9)``; None without the split (cosim.results.exposure)."""
    total = summary.get("exposed_comm_ns")
    parts = [(label, summary.get(f"exposed_comm_{g}_ns")) for g, label in _GROUP_LABELS]
    parts = [(label, x) for label, x in parts if isinstance(x, (int, float))]
    if not isinstance(total, (int, float)) or not parts:
        return None
    m = _KNOWN["exposed_comm_ns"]
    cell = lambda x: format_cell(m, x)  # noqa: E731
    other = summary.get("exposed_comm_other_ranks_ns")
    dims = ", ".join(f"{label} {cell(x)}" for label, x in parts)
    if isinstance(other, (int, float)) and other > 0:
        dims += f", waiting for other ranks {cell(other)}"
    media = ", ".join(f"{label} {cell(summary[f'exposed_comm_{k}_ns'])}" for k, label in _MEDIUM_LABELS[:2]
                      if isinstance(summary.get(f"exposed_comm_{k}_ns"), (int, float)))
    return f"exposed comm {cell(total)} {m.unit}: {dims}" + (f" ({media})" if media else "")


def workload_summaries(summary: dict, names) -> dict[str, dict]:
    """Per workload name, its summary keys without the ``<name>_`` prefix (for per-workload tables)."""
    return {n: {k[len(n) + 1:]: x for k, x in summary.items() if k.startswith(f"{n}_")} for n in names}


def workload_table(records) -> str:
    """The terminal table of shared-fabric runs: a column per run and workload (``roce job0``), a row per
    per-workload metric (iteration time, collectives, FCTs, slowdown from sharing)."""
    columns = {}
    for r in records:
        names = [w["name"] for w in r.config.get("workloads", [])]
        for name, own in workload_summaries(r.summary, names).items():
            columns[f"{r.name} {name}"] = {k: x for k, x in own.items()
                                           if k in WORKLOAD_KEYS or k.startswith("coll_")}
    return summary_table(columns)


