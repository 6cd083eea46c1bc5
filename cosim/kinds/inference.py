"""The inference kind: a disaggregated inference service, its serving schedule as one DAG run in ns-3.

Pipeline::

    requests ─serve()─► steps ─build_step_trace()─► Trace ─lower()─► FlowDag ─simulate_dag─► times
       ▲                                                                                    │
       └───────── measured step communication and KV arrivals (until a fixed point) ────────┘

Batching depends on completion times, which depend on the network. The scheme (docs/models/inference.md):
the analytic pass decides the batches (cosim.workload.inference.serving) with compute times from the
calibrated model and a link-rate estimate of each KV transfer; the packet-level run of that schedule
measures, per step, what it took beyond its compute (collectives, PP sends, token returns), and per
request, when its KV cache and first token were on the decode replica; the pass decides again with those,
and so on until it decides what it decided before (the same steps with the same members on the same
replicas): that schedule's packet-level times are then the ones its batching assumed, a fixed point.
At most ``workload.max_batching_iterations`` packet-level runs; ``batching_converged`` says whether the
last one was a fixed point (if not, the last run's schedule was decided from the run before it).

Requests table (``requests``, one row per request; units and meaning in cosim.results.DATASETS):
arrival, prefill start (its step's start: replica free and the batch arrived) and end (the step's last
op), KV transfer start (first KV byte sent) and end (last KV byte received), first token (the KV cache
and the first token on the decode replica: the decode replica streams every token to the client),
last token (end of the decode step that made it), TTFT = first token − arrival, TPOT = (last − first) /
(output tokens − 1) (nan for one output token), end-to-end = last token − arrival, queueing = prefill
start − arrival, replicas, tokens and KV bytes.

The plan holds the analytic pass's schedule lowered; :meth:`InferenceKind.execute` runs it, decides the
batches again from what the run measured, and repeats until the decisions repeat (a fixed point) or
``max_batching_iterations`` runs were made. It runs alone on its fabric: its fixed point moves
its own ops, and another job's ops would have to follow them through every pass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim import memory
from cosim.collectives import lower
from cosim.collectives.calibration import executor_attributes, nvlink_model
from cosim.collectives.tuning import TuningModel
from cosim.errors import CosimInputError
from cosim.kinds.base import Piece, WorkloadKind, register
from cosim.kinds.training import flow_latency_ns, nic_payload_bytes_per_s, training_tables
from cosim.results import collectives
from cosim.results.metrics import requests_within_slo
from cosim.workload.deepep import KERNEL_OF_MOE_KERNEL
from cosim.workload.hardware import get_hardware
from cosim.workload.inference.dpep import ExpertParallel
from cosim.workload.inference.requests import (
    POISSON_REQUESTS,
    Requests,
    poisson_requests,
    read_request_csv,
)
from cosim.workload.inference.serving import ServingSchedule, serve
from cosim.workload.inference.stepcost import StepCompute
from cosim.workload.inference.steptrace import (
    ReplicaShape,
    StepTrace,
    build_step_trace,
    kv_pairs,
    replica_bases,
    step_trace_ops_lower_bound,
)
from cosim.workload.trace import OpKind, Phase

SAMPLE_TRACE = "sample"


def requests_of(seed: int, w) -> Requests:
    """The requests of inference workload ``w`` (``seed``: the run's), arrivals rounded to whole ns (the DAG's
    timers are whole ns)."""
    if w.request_trace is not None:
        path = Path(__file__).resolve().parent.parent / "workload" / "inference" / "data" / "sample_requests.csv" \
            if w.request_trace == SAMPLE_TRACE else Path(w.request_trace)
        req = read_request_csv(path, limit=w.requests)
        if req.n == 0:
            raise CosimInputError("workload.request_trace", f"{path} holds no requests")
    else:
        seed = seed if w.request_seed is None else w.request_seed
        req = poisson_requests(POISSON_REQUESTS if w.requests is None else w.requests, w.rate_per_s, seed=seed,
                               prompt_median_tokens=w.prompt_median_tokens,
                               output_median_tokens=w.output_median_tokens, max_prompt_tokens=w.max_prompt_tokens,
                               max_output_tokens=w.max_output_tokens)
    return Requests(np.rint(req.arrival_ns), req.prompt_tokens, req.output_tokens)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class InferencePlan:
    """What an inference workload resolves to before its first schedule: model, hardware, requests,
    replica shapes, compute costs and the KV estimates of the analytic pass."""

    model: object  # InferenceModel
    hardware: object  # HardwareSpec
    requests: Requests
    prefill: ReplicaShape
    decode: ReplicaShape
    gpus_per_server: int
    n_ranks: int
    tuning: TuningModel
    prefill_cost: StepCompute
    decode_cost: StepCompute
    kv_estimate_ns: np.ndarray  #: per request: link-rate estimate of its KV transfer after the prefill step
    kv_bytes: np.ndarray  #: per request: KV bytes its transfer moves
    ep: ExpertParallel | None = None  #: how replicas with ep > tp move their tokens (None: no such replica)


def plan(exp, work, gpus_per_server: int | None) -> InferencePlan:
    """Resolve inference workload ``work`` of ``exp``: model, hardware (``gpus_per_server`` GPUs per server,
    else its GPU's), requests, replica shapes, estimates."""
    w = work
    model = w.inference_model()
    gps = gpus_per_server or get_hardware(w.gpu).gpus_per_host
    hardware = get_hardware(w.gpu, gpus_per_host=gps)
    prefill = ReplicaShape(tp=w.prefill_tp, pp=w.prefill_pp, ep=w.prefill_ep)
    decode = ReplicaShape(tp=w.decode_tp, pp=w.decode_pp, ep=w.decode_ep)
    ep = None
    if prefill.data_parallel or decode.data_parallel:
        ep = ExpertParallel(model=model, prefill_kernel=KERNEL_OF_MOE_KERNEL[w.prefill_moe_kernel],
                            decode_kernel=KERNEL_OF_MOE_KERNEL[w.decode_moe_kernel],
                            dispatch_fp8=w.moe_dispatch_dtype == "fp8",
                            redundant_experts=w.redundant_experts, placement=w.expert_placement,
                            overlap=w.moe_overlap,
                            max_nodes=model.spec.max_routed_nodes if w.node_limited_routing else 0,
                            eplb_interval_steps=w.eplb_interval_steps, routing_drift_steps=w.routing_drift_steps)
        for side, shape, kernel in (("prefill", prefill, ep.prefill_kernel), ("decode", decode, ep.decode_kernel)):
            if shape.data_parallel and kernel == "high-throughput" and shape.ep > gps and shape.ep % gps:
                raise CosimInputError(f"workload.{side}_ep", f"{shape.ep} GPUs do not fill servers of {gps} (DeepEP's "
                                      "high-throughput kernels forward through the same local GPU of every server)",
                                      f"choose {side}_ep as a multiple of {gps}, or {side}_moe_kernel = "
                                      "\"deepep-low-latency\"")
    n_ranks = replica_bases(w.prefill_replicas, w.decode_replicas, prefill, decode, gps)[2]
    req = requests_of(exp.seed, w)
    nic = nic_payload_bytes_per_s(exp.network)
    pairs = kv_pairs(model, prefill, decode)
    per_token = np.zeros(prefill.gpus, np.int64)
    for src, _dst, lo, hi, per in pairs:
        per_token[src] += per * (hi - lo)
    layers = model.spec.num_layers
    busiest = float(per_token.max()) / (layers if w.kv_transfer == "layer" else 1)
    return InferencePlan(
        model=model, hardware=hardware, requests=req, prefill=prefill, decode=decode, gpus_per_server=gps,
        n_ranks=n_ranks, tuning=TuningModel(nvlink=nvlink_model(dataclasses.asdict(hardware)), nic_bytes_per_s=nic,
                                             flow_latency_ns=flow_latency_ns(exp.network)),
        prefill_cost=StepCompute(model=model, hardware=hardware, tp=prefill.tp, pp=prefill.pp, ep=prefill.ep,
                                 redundant_experts=w.redundant_experts),
        decode_cost=StepCompute(model=model, hardware=hardware, tp=decode.tp, pp=decode.pp, ep=decode.ep,
                                redundant_experts=w.redundant_experts),
        kv_estimate_ns=req.prompt_tokens * busiest / nic * 1e9,
        kv_bytes=req.prompt_tokens * int(sum(per * (hi - lo) for *_, lo, hi, per in pairs)), ep=ep)


def schedule_of(w, p: InferencePlan, *, kv_delay_ns=None, prefill_extra_ns=None,
                decode_extra_ns=None) -> ServingSchedule:
    """The analytic pass of workload ``w`` (estimates, or the corrections a packet-level run measured)."""
    return serve(p.requests, prefill_replicas=w.prefill_replicas, decode_replicas=w.decode_replicas,
                 prefill_token_budget=w.prefill_token_budget, max_decode_batch=w.max_decode_batch, policy=w.policy,
                 prefill_compute_ns=p.prefill_cost.prefill_ns, decode_compute_ns=p.decode_cost.decode_ns,
                 kv_delay_ns=p.kv_estimate_ns if kv_delay_ns is None else kv_delay_ns, kv_bytes=p.kv_bytes,
                 prefill_extra_ns=prefill_extra_ns, decode_extra_ns=decode_extra_ns)


def step_trace_of(w, p: InferencePlan, sched: ServingSchedule) -> StepTrace:
    """The Trace of a schedule of workload ``w``; a service whose trace this machine cannot plan is refused
    before it is built (an input error naming ``workload.requests``)."""
    n_ops = step_trace_ops_lower_bound(p.model, sched, prefill=p.prefill, decode=p.decode, kv_mode=w.kv_transfer)
    memory.check_plan_fits(n_ops, "workload.requests", "give fewer requests or fewer model layers",
                           what="step-trace ops", bytes_per_op=memory.STEP_TRACE_BYTES_PER_OP)
    return build_step_trace(p.model, p.hardware, p.requests, sched, prefill_replicas=w.prefill_replicas,
                            decode_replicas=w.decode_replicas, prefill=p.prefill, decode=p.decode,
                            kv_mode=w.kv_transfer, gpus_per_server=p.gpus_per_server, ep=p.ep)


def lower_step_trace(w, p: InferencePlan, st: StepTrace):
    """The FlowDag of a step trace of workload ``w`` (the same lowering as training: cosim.collectives.lower),
    its sends without NCCL's fixed cost: the KV transfers are timed by the plan's own analytic pass
    (``kv_estimate_ns``), which knows no such cost."""
    return lower(st.trace, gpus_per_server=p.gpus_per_server, chunk_bytes=w.chunk_bytes, algorithm=w.algorithm,
                 tuning=p.tuning, send_costs=False)


@dataclass(frozen=True, slots=True, eq=False)
class Measured:
    """Times a packet-level run gave a schedule (ns): per step its consistent start and end, per request
    prefill start/end, KV start/end, first and last token."""

    prefill_start_ns: np.ndarray
    prefill_end_ns: np.ndarray
    decode_start_ns: np.ndarray
    decode_end_ns: np.ndarray
    kv_start_ns: np.ndarray
    kv_end_ns: np.ndarray
    first_token_ns: np.ndarray
    last_token_ns: np.ndarray
    #: per EP dispatch or combine of a replica with ep > tp: (step as in StepTrace.op_step, layer,
    #: StepTrace.op_ep_phase, span from its first message's start to its last one's end in ns); None without
    #: them
    ep_spans: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    #: per step with EP messages (as StepTrace.op_step): the most compute any one GPU did in it, ns
    busiest_compute: tuple[np.ndarray, np.ndarray] | None = None


def ep_spans(st: StepTrace, start_ns: np.ndarray, finish_ns: np.ndarray):
    """The spans of every EP dispatch and combine of ``st`` (Measured.ep_spans) from per-op times: from the
    moment the last GPU started sending (the latest of the GPUs' first SEND starts) to the last message's
    end, the time the all-to-all itself adds once every GPU is in it."""
    if st.op_ep_phase is None:
        return None
    ops = np.flatnonzero(st.op_ep_phase >= 0)
    key = np.stack([st.op_step[ops], st.trace.layer[ops], st.op_ep_phase[ops]], axis=1)
    uniq, which = np.unique(key, axis=0, return_inverse=True)
    which = which.ravel()
    last = np.full(len(uniq), -np.inf)
    np.maximum.at(last, which, finish_ns[ops])
    sends = st.trace.kind[ops] == OpKind.SEND
    per_rank, at = np.unique(np.stack([which[sends], st.trace.rank[ops][sends]], axis=1), axis=0,
                             return_inverse=True)
    first_send = np.full(len(per_rank), np.inf)
    np.minimum.at(first_send, at.ravel(), start_ns[ops][sends])
    ready = np.full(len(uniq), -np.inf)
    np.maximum.at(ready, per_rank[:, 0], first_send)
    return uniq[:, 0], uniq[:, 1], uniq[:, 2], last - ready


def busiest_compute(st: StepTrace, start_ns: np.ndarray, finish_ns: np.ndarray):
    """(steps, ns): per step with EP messages, the largest sum of one GPU's compute op times in it (arrival
    timers left out); a GPU's compute runs on one stream, so the rest of the step is that GPU waiting."""
    if st.op_ep_phase is None:
        return None
    t = st.trace
    steps = np.unique(st.op_step[st.op_ep_phase >= 0])
    ops = np.flatnonzero((t.kind == OpKind.COMPUTE) & (t.phase != Phase.OTHER) & np.isin(st.op_step, steps))
    key, at = np.unique(np.stack([st.op_step[ops], t.rank[ops]], axis=1), axis=0, return_inverse=True)
    per_rank = np.zeros(len(key))
    np.add.at(per_rank, at.ravel(), finish_ns[ops] - start_ns[ops])
    most = np.full(steps.size, -np.inf)
    np.maximum.at(most, np.searchsorted(steps, key[:, 0]), per_rank)
    return steps, most


def _max(times: np.ndarray, ops: list[int]) -> float:
    return float(np.max(times[ops])) if ops else float("nan")


def measure(p: InferencePlan, sched: ServingSchedule, st: StepTrace, start_ns: np.ndarray,
            finish_ns: np.ndarray) -> Measured:
    """Read the schedule's times from per-trace-op start and finish times (nan: unfinished)."""
    req = p.requests
    P, D = sched.prefill, sched.decode
    p_end = np.array([_max(finish_ns, ops) for ops in st.prefill_end_ops])
    d_end = np.array([_max(finish_ns, ops) for ops in st.decode_end_ops])
    kv_start = np.array([float(np.min(start_ns[o])) if o else np.nan for o in st.kv_send_ops])
    kv_end = np.array([_max(finish_ns, o) for o in st.kv_recv_ops])
    first = np.array([_max(finish_ns, a + b) for a, b in zip(st.kv_recv_ops, st.token_recv_ops)])
    p_start = np.empty(P.n)
    prev: dict[int, float] = {}
    for s in range(P.n):
        r = int(P.replica[s])
        p_start[s] = max(prev.get(r, 0.0), float(req.arrival_ns[P.of(s)].max()))
        prev[r] = p_end[s]
    d_start = np.empty(D.n)
    prev = {}
    for s in range(D.n):
        d = int(D.replica[s])
        m = D.of(s)
        new = m[sched.first_decode_step[m] == s]
        d_start[s] = max([prev.get(d, 0.0), *first[new].tolist()])
        prev[d] = d_end[s]
    last = np.where(sched.last_decode_step >= 0, d_end[np.maximum(sched.last_decode_step, 0)] if D.n else np.nan,
                    first)
    return Measured(p_start, p_end, d_start, d_end, kv_start, kv_end, first, last, ep_spans(st, start_ns, finish_ns),
                    busiest_compute(st, start_ns, finish_ns))


class StepCorrection:
    """The communication time (ns) of a step beyond its compute: the measured one for a step the run had
    (same replica, same members, same contexts), else a least-squares line in the step's tokens over the
    run's steps (0 with none)."""

    def __init__(self, keys: list[tuple], tokens: np.ndarray, extra_ns: np.ndarray) -> None:
        self.known = dict(zip(keys, extra_ns.tolist()))
        ok = np.isfinite(extra_ns)
        x, y = np.asarray(tokens, np.float64)[ok], extra_ns[ok]
        if x.size >= 2 and np.ptp(x) > 0:
            self.slope, self.intercept = (float(c) for c in np.polyfit(x, y, 1))
        else:
            self.slope, self.intercept = 0.0, float(y.mean()) if y.size else 0.0

    def __call__(self, key: tuple, tokens: int) -> float:
        hit = self.known.get(key)
        if hit is not None and np.isfinite(hit):
            return hit
        return max(0.0, self.intercept + self.slope * tokens)


def corrections(p: InferencePlan, sched: ServingSchedule, m: Measured):
    """(KV delay per request, prefill and decode corrections as serve() takes them) of a measured run."""
    P, D = sched.prefill, sched.decode
    prompts = p.requests.prompt_tokens
    p_keys = [(int(P.replica[s]), tuple(P.of(s).tolist())) for s in range(P.n)]
    p_tokens = np.array([int(prompts[P.of(s)].sum()) for s in range(P.n)], np.float64)
    p_extra = m.prefill_end_ns - m.prefill_start_ns - np.array(
        [p.prefill_cost.prefill_ns(prompts[P.of(s)]) for s in range(P.n)], np.float64)
    ctx = [tuple(D.context[D.ptr[s]:D.ptr[s + 1]].tolist()) for s in range(D.n)]
    d_keys = [(int(D.replica[s]), tuple(D.of(s).tolist()), ctx[s]) for s in range(D.n)]
    d_extra = m.decode_end_ns - m.decode_start_ns - np.array(
        [p.decode_cost.decode_ns(np.array(c, np.int64)) for c in ctx], np.float64)
    p_corr = StepCorrection(p_keys, p_tokens, p_extra)
    d_corr = StepCorrection(d_keys, np.diff(D.ptr).astype(np.float64), d_extra)
    p_fn = lambda r, members: p_corr((r, members), int(prompts[list(members)].sum()))  # noqa: E731
    d_fn = lambda d, members, context: d_corr((d, members, context), len(members))  # noqa: E731
    delay = m.first_token_ns - m.prefill_end_ns[sched.prefill_step]
    return np.where(np.isfinite(delay), delay, p.kv_estimate_ns), p_fn, d_fn


def requests_table(p: InferencePlan, sched: ServingSchedule, st: StepTrace, m: Measured) -> dict[str, np.ndarray]:
    """The ``requests`` table (module docstring)."""
    req = p.requests
    out = req.output_tokens
    p_start = m.prefill_start_ns[sched.prefill_step]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (m.last_token_ns - m.first_token_ns) / np.maximum(out - 1, 1), np.nan)
    return {
        "request": np.arange(req.n, dtype=np.int64), "arrival_ns": req.arrival_ns.astype(np.float64),
        "prompt_tokens": req.prompt_tokens.copy(), "output_tokens": out.copy(),
        "prefill_replica": sched.prefill.replica[sched.prefill_step].astype(np.int32),
        "decode_replica": sched.decode_replica.astype(np.int32),
        "prefill_start_ns": p_start, "prefill_end_ns": m.prefill_end_ns[sched.prefill_step],
        "kv_start_ns": m.kv_start_ns, "kv_end_ns": m.kv_end_ns, "first_token_ns": m.first_token_ns,
        "last_token_ns": m.last_token_ns, "ttft_ns": m.first_token_ns - req.arrival_ns,
        "tpot_ns": tpot, "e2e_ns": m.last_token_ns - req.arrival_ns, "queueing_ns": p_start - req.arrival_ns,
        "kv_transfer_ns": m.kv_end_ns - m.kv_start_ns, "kv_bytes": st.kv_bytes.copy(),
    }


def ep_summary(sched: ServingSchedule, m: Measured) -> dict:
    """Per side with ep > tp: p50 of one MoE layer's dispatch and combine spans (of each half with two-batch
    overlap), the all-to-all share of a step (the summed dispatch and combine spans of its layers over the
    step's time, summed over the steps) and its exposed share (the step's time the GPU with the most compute
    does not compute, over the step's time, summed over the steps: the all-to-all time no compute hides)
    (cosim.results.metrics)."""
    if m.ep_spans is None:
        return {}
    step, _layer, phase, span = m.ep_spans
    phase = phase % 2  # a half B's dispatch or combine as any other
    busy = dict(zip(*(x.tolist() for x in m.busiest_compute)))
    out = {}
    for side, steps, start, end in (("prefill", sched.prefill, m.prefill_start_ns, m.prefill_end_ns),
                                    ("decode", sched.decode, m.decode_start_ns, m.decode_end_ns)):
        mine = step >= 0 if side == "prefill" else step < 0
        if not mine.any():
            continue
        index = step[mine] if side == "prefill" else -1 - step[mine]
        for k, name in ((0, "dispatch"), (1, "combine")):
            out[f"{side}_{name}_p50_ns"] = _pct(span[mine][phase[mine] == k], 50)
        used = np.unique(index)
        duration = float(np.sum(end[used] - start[used]))
        out[f"{side}_all_to_all_share"] = float(np.sum(span[mine])) / duration if duration > 0 else None
        ids = used if side == "prefill" else -1 - used
        waiting = float(np.sum(end[used] - start[used] - np.array([busy[int(i)] for i in ids])))
        out[f"{side}_all_to_all_exposed_share"] = max(0.0, waiting) / duration if duration > 0 else None
    return out


def _pct(x: np.ndarray, q: float) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else None


def request_summary(t, *, ttft_slo_ms: float, tpot_slo_ms: float) -> dict:
    """Latency percentiles, throughput, goodput under the SLOs, KV transfer time (cosim.results.metrics)."""
    out = {"requests": int(t["request"].size), "requests_completed": int(np.isfinite(t["last_token_ns"]).sum())}
    for key in ("ttft", "tpot", "e2e"):
        for q in (50, 90, 99):
            out[f"{key}_p{q}_ns"] = _pct(np.asarray(t[f"{key}_ns"]), q)
    for key in ("queueing", "kv_transfer"):
        for q in (50, 99):
            out[f"{key}_p{q}_ns"] = _pct(np.asarray(t[f"{key}_ns"]), q)
    arrival, last = np.asarray(t["arrival_ns"]), np.asarray(t["last_token_ns"])
    done = np.isfinite(last)
    span_s = (float(last[done].max()) - float(arrival.min())) / 1e9 if done.any() else 0.0
    ok = requests_within_slo(t, ttft_slo_ms=ttft_slo_ms, tpot_slo_ms=tpot_slo_ms)
    if span_s > 0:
        out["throughput_tokens_per_s"] = float(np.asarray(t["output_tokens"])[done].sum()) / span_s
        out["throughput_requests_per_s"] = float(done.sum()) / span_s
        out["goodput_requests_per_s"] = float(ok.sum()) / span_s
        out["mean_in_flight_requests"] = float(np.sum(last[done] - arrival[done])) / (span_s * 1e9)
    out["slo_attainment"] = float(ok.sum()) / max(1, ok.size)
    return out


# --- the kind -----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Serving:
    """An inference job's state: its plan, the schedule simulated last, its trace and DAG, and after
    execution what the run measured and how the fixed point went."""

    plan: InferencePlan
    schedule: object  # ServingSchedule
    steps: object  # StepTrace
    dag: object  # FlowDag
    measured: Measured | None = None
    passes: int = 0
    converged: bool = False
    wall_time_s: float = 0.0


@register
class InferenceKind(WorkloadKind):
    """LLM serving: prefill and decode replicas, requests, KV-cache transfers; requests table."""

    name = "inference"
    ranked = True
    shares_fabric = False
    iterates = True

    def load(self, exp, job, gpus_per_server, trace=None):
        super().load(exp, job, gpus_per_server, trace)
        return plan(exp, job.work, gpus_per_server)

    def gpus_per_server(self, loaded):
        return loaded.gpus_per_server

    def ranks(self, loaded):
        return loaded.n_ranks

    def lower(self, job, loaded, hosts, ctx):
        sched = schedule_of(job.work, loaded)
        steps = step_trace_of(job.work, loaded, sched)
        dag = lower_step_trace(job.work, loaded, steps)
        return Serving(plan=loaded, schedule=sched, steps=steps, dag=dag), Piece.of_flow_dag(dag, hosts)

    def ideal_ns(self, jp, fabric, nic_bytes_per_s):
        return None  # a service spans what its arrivals give it, which no bound of one DAG captures

    def last_arrival_ns(self, jp):
        arrival = jp.state.plan.requests.arrival_ns
        return float(np.max(arrival)) if np.size(arrival) else 0.0

    def flow_dag(self, state):
        return state.dag

    def executor_attributes(self, jp):
        return executor_attributes(dataclasses.asdict(jp.state.plan.hardware))

    def execute(self, plan, jp, simulate):
        """Simulate the schedule, decide again from what it measured, until a fixed point (module docstring)."""
        w, p, s = jp.job.work, jp.state.plan, jp.state
        sched, steps, dag = s.schedule, s.steps, s.dag
        passes, wall, converged = 0, 0.0, False
        while True:
            out = simulate(Piece.of_flow_dag(dag, jp.hosts), dag)
            passes += 1
            wall += out.network.wall_time_s
            m = measure(p, sched, steps, out.op_start_ns[dag.trace_start], out.op_finish_ns[dag.trace_done])
            if out.network.status != "complete" or passes >= w.max_batching_iterations:
                break
            delay, p_extra, d_extra = corrections(p, sched, m)
            again = schedule_of(w, p, kv_delay_ns=delay, prefill_extra_ns=p_extra, decode_extra_ns=d_extra)
            if again.decisions() == sched.decisions():
                converged = True
                break
            sched = again
            steps = step_trace_of(w, p, sched)
            dag = lower_step_trace(w, p, steps)
        return out, Serving(plan=p, schedule=sched, steps=steps, dag=dag, measured=m, passes=passes,
                            converged=converged, wall_time_s=wall), Piece.of_flow_dag(dag, jp.hosts)

    def results(self, jp, out, rows, flows, first_op, *, fabric, state, alone, op_table="all"):
        w, s = jp.job.work, state
        lo, hi = first_op, first_op + s.dag.n_ops
        tables = {"collectives": training_tables(s.steps.trace, s.dag, out.op_start_ns[lo:hi],
                                                 out.op_finish_ns[lo:hi], np.zeros(0, np.int64))["collectives"],
                  "requests": requests_table(s.plan, s.schedule, s.steps, s.measured)}
        summary = collectives.summary_entries(collectives.collective_stats(tables["collectives"], first_iteration=0))
        summary |= request_summary(tables["requests"], ttft_slo_ms=w.ttft_slo_ms, tpot_slo_ms=w.tpot_slo_ms)
        summary |= ep_summary(s.schedule, s.measured)
        summary |= {"batching_iterations": s.passes, "batching_converged": int(s.converged),
                    "prefill_steps": s.schedule.prefill.n, "decode_steps": s.schedule.decode.n,
                    "n_ranks": s.plan.n_ranks, "n_ops": s.steps.trace.n_ops, "wall_time_s": s.wall_time_s}
        return summary, tables

    def config(self, jp, state, plan):
        return {"workload": {"n_ranks": state.plan.n_ranks, "gpus_per_server": plan.gpus_per_server,
                             "requests": state.plan.requests.n,
                             "kv_bytes_per_token": state.plan.model.kv_bytes_per_token},
                "dag": state.dag.summary()}

    def describe(self, jp):
        return {"ranks": jp.state.plan.n_ranks, "requests": jp.state.plan.requests.n, "dag_ops": jp.state.dag.n_ops}
