"""The packet-level inference run (cosim.kinds.inference, cosim.kinds.inference): a disaggregated service's
schedule as one DAG in ns-3.

Small scenarios of a 2-layer LLaMA-2-70B shape (GQA) or Mixtral (MoE); the checks are closed forms: the
zero-load TTFT against the step cost and the ideal transfer time, Little's law, collective and KV bytes
against the traffic formulas, determinism, and one-line errors for bad configs.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim import memory, results
from cosim.collectives import DagOpKind
from cosim.kinds import inference
from cosim.kinds.base import Piece
from cosim.network.ideal import ideal_fct_ns
from cosim.plan import assemble
from cosim.plan import compile as compile_plan
from cosim.run import run, simulate
from cosim.spec import from_document
from cosim.workload.inference.batching import in_flight_time_integral_ns
from cosim.workload.inference.requests import Requests
from cosim.workload.inference.serving import serve
from cosim.workload.inference.steptrace import step_trace_ops_lower_bound
from cosim.workload.trace import CollKind, OpKind
from cosim.workload.validate import check_trace


def experiment(transport="roce", **workload):
    """A 2-layer LLaMA-2-70B service, one prefill and one decode replica of TP1, one GPU per server."""
    work = {"kind": "inference", "model": "llama2-70b", "model_overrides": {"num_layers": 2}, "requests": 1,
            "prompt_median_tokens": 1000.0, "output_median_tokens": 8.0, "chunk_bytes": 1 << 30} | workload
    doc = {"seed": 3, "network": {"transport": transport, "topology": "single-switch", "gpus_per_server": 1},
           "workload": work}
    return from_document(doc)[0]


def _one_packet_per_hop_ns(exp, summary, hops: int) -> float:
    return hops * (summary["mtu_bytes"] + summary["header_bytes"]) * 8 / exp.network.link_gbps


@pytest.mark.parametrize("transport", ["roce", "ib"])
@pytest.mark.parametrize("mode", ["whole", "layer"])
def test_zero_load_ttft_is_compute_plus_transfer(transport, mode, engine_ns):
    """One request on an idle fabric: TTFT = the prefill's compute (the step cost) + what comes after it on
    the critical path: the whole KV cache at the ideal transfer time ("whole"), or only the first token
    (4 B) when the layers went during the prefill ("layer"); within a packet time per hop."""
    exp = experiment(transport, kv_transfer=mode)
    planned = compile_plan(exp)
    rec = run(exp, plan=planned)
    p = planned.jobs[0].state.plan
    req = rec.requests
    prompt = int(req["prompt_tokens"][0])
    compute = p.prefill_cost.prefill_ns([prompt])
    prefill = req["prefill_end_ns"][0] - req["prefill_start_ns"][0]
    if mode == "whole":  # nothing in flight beside the prefill: exactly the step cost
        np.testing.assert_allclose(prefill, compute, atol=1.0)
    else:  # the layers' KV sends run beside it: compute at 1 - nccl_sms/sm_count while they are in flight
        slowdown = p.hardware.nccl_sms / p.hardware.sm_count
        assert compute - 1.0 <= prefill <= compute / (1 - slowdown) + 1.0
    compute = prefill
    src, dst = planned.host_of[0], planned.host_of[1]  # prefill rank 0, decode rank 1
    moved = prompt * p.model.kv_bytes_per_token
    after = moved if mode == "whole" else 4
    ideal = float(ideal_fct_ns(planned.fabric, np.array([src]), np.array([dst]), np.array([after]),
                               mtu_bytes=rec.summary["mtu_bytes"], header_bytes=rec.summary["header_bytes"])[0])
    tolerance = _one_packet_per_hop_ns(exp, rec.summary, hops=2) + 1.0
    assert abs(req["ttft_ns"][0] - (compute + ideal)) <= tolerance, (req["ttft_ns"][0], compute, ideal)
    assert req["kv_bytes"][0] == moved
    if mode == "layer":
        assert req["kv_end_ns"][0] < req["prefill_end_ns"][0]  # the last layer's KV left before the logits
    assert rec.summary["batching_converged"] == 1 and req["queueing_ns"][0] == 0.0


@pytest.fixture(scope="module")
def loaded(engine_ns):
    """Eight requests at 200/s on two prefill and two decode replicas of TP2 (NVLink), 2 GPUs per server."""
    exp = from_document({
        "seed": 5, "network": {"transport": "roce", "topology": "leaf-spine", "gpus_per_server": 2,
                               "hosts_per_leaf": 2, "spines": 1},
        "workload": {"kind": "inference", "model": "llama2-70b", "model_overrides": {"num_layers": 2},
                     "prefill_replicas": 2, "decode_replicas": 2, "prefill_tp": 2, "decode_tp": 2, "requests": 8,
                     "rate_per_s": 200.0, "prompt_median_tokens": 600.0, "output_median_tokens": 6.0,
                     "policy": "least_loaded"}})[0]
    return exp, run(exp)


def test_littles_law_and_request_order(loaded, tmp_path):
    """Time-average requests in flight = arrival rate × mean end-to-end latency (Little's law, over the run
    from the first arrival to the last token); every request's phases come in order; the table survives
    the results file."""
    exp, rec = loaded
    r = rec.requests
    arrival, last = r["arrival_ns"], r["last_token_ns"]
    span = last.max() - arrival.min()
    assert in_flight_time_integral_ns(arrival, last) / span == pytest.approx(r["e2e_ns"].mean() * arrival.size / span)
    assert rec.summary["mean_in_flight_requests"] == pytest.approx(in_flight_time_integral_ns(arrival, last) / span)
    assert np.all(arrival <= r["prefill_start_ns"]) and np.all(r["prefill_start_ns"] < r["prefill_end_ns"])
    assert np.all(r["kv_start_ns"] < r["kv_end_ns"]) and np.all(r["prefill_end_ns"] <= r["first_token_ns"])
    assert np.all(r["first_token_ns"] < r["last_token_ns"])
    np.testing.assert_allclose(r["tpot_ns"], (last - r["first_token_ns"]) / (r["output_tokens"] - 1))
    assert rec.summary["batching_converged"] == 1 and rec.summary["requests_completed"] == 8
    assert set(r["decode_replica"]) == {0, 1} and set(r["prefill_replica"]) == {0, 1}
    back = results.read_results(results.write_results(tmp_path / "r.h5", [rec]))[rec.name]
    for name, values in r.items():
        np.testing.assert_array_equal(back.requests[name], values)


def test_roce_headroom_only_for_the_priorities_the_service_uses(loaded):
    """As in a training run: PFC headroom for the data's priority 0 and the ACK/CNP priority 7 (0x81), not
    all 8 classes; the packet-level run uses the attributes the dry run checks the fabric with."""
    exp, rec = loaded
    attributes = rec.config["attributes"]
    assert attributes["SharedBufferMmu::LosslessPriorityMask"] == str(0x81)
    assert compile_plan(exp).attributes.items() <= attributes.items()


def test_fixed_point_schedule_matches_the_packet_level_times(loaded):
    """At the fixed point, the schedule the analytic pass decides from the measured corrections predicts
    the packet-level times of its own DAG (step ends and first tokens), to float rounding."""
    exp, _ = loaded
    planned = compile_plan(exp)
    jp = planned.jobs[0]
    w, p = exp.workload, jp.state.plan
    sched = inference.schedule_of(w, p)
    for _ in range(w.max_batching_iterations):
        st = inference.step_trace_of(w, p, sched)
        dag = inference.lower_step_trace(w, p, st)
        out, _ = simulate(planned, assemble(planned.jobs, {jp.index: Piece.of_flow_dag(dag, jp.hosts)}), whole=True)
        m = inference.measure(p, sched, st, out.op_start_ns[dag.trace_start], out.op_finish_ns[dag.trace_done])
        again = inference.schedule_of(w, p, **dict(zip(("kv_delay_ns", "prefill_extra_ns", "decode_extra_ns"),
                                                          inference.corrections(p, sched, m))))
        if again.decisions() == sched.decisions():
            break
        sched = again
    assert again.decisions() == sched.decisions()
    np.testing.assert_allclose(again.prefill.end_ns, m.prefill_end_ns, atol=1e-3)
    np.testing.assert_allclose(again.decode.end_ns, m.decode_end_ns, atol=1e-3)
    np.testing.assert_allclose(again.kv_ready_ns, m.first_token_ns, atol=1e-3)


def _lowered(exp):
    w = exp.workload
    p = inference.plan(exp, w, exp.network.gpus_per_server)
    sched = inference.schedule_of(w, p)
    st = inference.step_trace_of(w, p, sched)
    check_trace(st.trace)  # sends meet recvs, collectives have every member, no cycle
    return p, sched, st, inference.lower_step_trace(w, p, st)


def test_decode_all_reduce_sizes_in_the_lowered_dag():
    """Every decode step runs 2 TP all-reduces per layer of S = batch × h × 2 bytes; lowered as a ring, a
    call's copies move 2(n-1)/n × S per rank."""
    exp = from_document({
        "seed": 3, "network": {"transport": "roce", "topology": "single-switch", "gpus_per_server": 4},
        "workload": {"kind": "inference", "model": "llama2-70b", "model_overrides": {"num_layers": 2}, "decode_tp": 4,
                     "requests": 6, "rate_per_s": 500.0, "algorithm": "ring", "output_median_tokens": 6.0}})[0]
    p, sched, st, dag = _lowered(exp)
    t = st.trace
    h = p.model.spec.hidden_size
    labels = t.label_array()
    checked = 0
    for s in range(sched.decode.n):
        b = sched.decode.ptr[s + 1] - sched.decode.ptr[s]
        ops = np.flatnonzero((st.op_step == -1 - s) & (t.kind == OpKind.COLLECTIVE))
        assert np.all(labels[ops] == "decode/tp_allreduce") and np.all(t.coll_kind[ops] == CollKind.ALL_REDUCE)
        assert ops.size == 4 * 2 * p.model.spec.num_layers  # 4 ranks x 2 per layer
        assert np.all(t.bytes[ops] == b * h * 2)
        checked += 1
    assert checked == sched.decode.n > 0
    calls = np.flatnonzero(np.isin(dag.coll_trace_id, t.coll_id[labels == "decode/tp_allreduce"]))
    copies = (dag.kind == DagOpKind.NVLINK) & (dag.coll >= 0)
    moved = np.bincount(dag.coll[copies], weights=dag.bytes[copies], minlength=dag.coll_bytes.size)
    np.testing.assert_allclose(moved[calls], 2 * 3 / 4 * dag.coll_bytes[calls] * 4, rtol=1e-6, atol=64)


def test_ep_dispatch_bytes_for_top_k():
    """Mixtral (8 experts, top-2) with EP over the 2 TP ranks: per MoE layer a dispatch and a combine
    all-to-all of ceil(n/ep)·k·h·2 bytes per rank, and no MLP all-reduce; prefill n = prompt tokens."""
    exp = from_document({
        "seed": 3, "network": {"transport": "ib", "topology": "single-switch", "gpus_per_server": 1},
        "workload": {"kind": "inference", "model": "mixtral-8x7b", "model_overrides": {"num_layers": 2},
                     "prefill_tp": 2, "prefill_ep": 2, "decode_tp": 2, "decode_ep": 2, "requests": 2,
                     "rate_per_s": 100.0, "output_median_tokens": 4.0}})[0]
    p, sched, st, dag = _lowered(exp)
    t = st.trace
    m = p.model.spec
    labels = t.label_array()
    for s in range(sched.prefill.n):
        n = int(p.requests.prompt_tokens[sched.prefill.of(s)].sum())
        for what in ("prefill/ep_dispatch", "prefill/ep_combine"):
            ops = np.flatnonzero((st.op_step == s) & (labels == what))
            assert ops.size == 2 * m.num_layers and np.all(t.coll_kind[ops] == CollKind.ALL_TO_ALL)
            assert np.all(t.bytes[ops] == -(-n // 2) * m.top_k * m.hidden_size * 2)
        assert np.count_nonzero((st.op_step == s) & (labels == "prefill/tp_allreduce")) == 2 * m.num_layers
    # lowered across the two servers: each member sends S/n to the other one
    calls = np.flatnonzero(dag.coll_kind == CollKind.ALL_TO_ALL)
    flows = dag.kind == DagOpKind.FLOW
    sent = np.bincount(dag.coll[flows & (dag.coll >= 0)], weights=dag.bytes[flows & (dag.coll >= 0)],
                       minlength=dag.coll_bytes.size)
    np.testing.assert_allclose(sent[calls], dag.coll_bytes[calls], atol=2)  # 2 ranks x S/2


@pytest.mark.parametrize("model,prefill,decode,factor", [
    ("llama2-70b", (2, 2), (4, 1), 1),   # GQA 8 KV heads, shapes differ: every head once
    ("llama2-70b", (1, 1), (2, 2), 1),
    ("llama2-13b", (4, 1), (2, 1), 1),   # MHA
    ("deepseek-v3-like", (2, 1), (4, 1), 4),  # MLA latent replicated on every decode TP rank
])
@pytest.mark.parametrize("mode", ["layer", "whole"])
def test_kv_bytes_conserved(model, prefill, decode, factor, mode):
    """KV bytes a request moves = prompt tokens × layers × KV bytes per token per layer (once per decode TP
    rank for a replicated MLA latent), whatever the TP/PP of each side, in the trace and in the flows."""
    work = {"kind": "inference", "model": model, "model_overrides": {"num_layers": 4}, "requests": 3,
            "rate_per_s": 50.0, "output_median_tokens": 3.0, "prompt_median_tokens": 300.0, "kv_transfer": mode,
            "prefill_tp": prefill[0], "prefill_pp": prefill[1], "decode_tp": decode[0], "decode_pp": decode[1]}
    exp = from_document({"seed": 2, "network": {"topology": "single-switch", "gpus_per_server": 2},
                         "workload": work})[0]
    p, _, st, dag = _lowered(exp)
    per_token = p.model.spec.num_layers * p.model.kv_bytes_per_token_per_layer * factor
    np.testing.assert_array_equal(st.kv_bytes, p.requests.prompt_tokens * per_token)
    for q in range(p.requests.n):
        assert int(st.trace.bytes[st.kv_send_ops[q]].sum()) == p.requests.prompt_tokens[q] * per_token
    kv_ops = np.flatnonzero(st.trace.label_array() == "kv_cache")
    moved = np.isin(dag.trace_op, kv_ops[st.trace.kind[kv_ops] == OpKind.SEND]) & (dag.kind != DagOpKind.NOP)
    assert int(dag.bytes[moved].sum()) == int(st.kv_bytes.sum())


def test_same_seed_same_latencies_bit_for_bit(engine_ns):
    """Two runs of one experiment give identical request tables; another request seed other arrivals."""
    a = run(experiment(requests=3, rate_per_s=300.0)).requests
    b = run(experiment(requests=3, rate_per_s=300.0)).requests
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name
    other = experiment(requests=3, rate_per_s=300.0, request_seed=99)
    c = inference.requests_of(other.seed, other.workload)
    assert not np.array_equal(c.arrival_ns, a["arrival_ns"])


def test_network_aware_policy_avoids_the_replica_receiving_a_big_cache():
    """network_aware sends a request to the decode replica with the fewest KV bytes in flight towards it;
    round robin does not look."""
    req = Requests(np.array([0.0, 0.0, 10.0]), np.array([4000, 10, 10]), np.array([5, 5, 5]))
    common = dict(prefill_replicas=3, decode_replicas=2, prefill_token_budget=1, max_decode_batch=8,
                  prefill_compute_ns=lambda prompts: 100.0, decode_compute_ns=lambda ctx: 50.0,
                  kv_delay_ns=np.array([1e6, 5.0, 5.0]), kv_bytes=np.array([4000, 10, 10]))
    rr = serve(req, policy="round_robin", **common)
    aware = serve(req, policy="network_aware", **common)
    assert rr.decode_replica.tolist() == [0, 1, 0]
    assert aware.decode_replica.tolist() == [0, 1, 1]


def test_shipped_experiment_is_listed_and_valid():
    """disaggregated-serving is shipped: two variants (KV layer by layer, whole) on both transports."""
    from cosim.run import experiments_of  # noqa: PLC0415

    exps = experiments_of("disaggregated-serving")
    assert [e.name for e in exps] == ["serving-layer-roce", "serving-layer-ib", "serving-whole-roce",
                                      "serving-whole-ib"]
    assert all(e.is_inference for e in exps)


@pytest.mark.parametrize("sets,needle", [
    (["workload.kv_transfer=bulk"], "workload.kv_transfer"),
    (["workload.policy=fastest"], "workload.policy"),
    (["workload.decode_ep=2"], "workload.decode_ep"),
    (["workload.prefill_tp=3"], "workload.prefill_tp"),
    (["workload.model=gpt-5"], "workload.model"),
    (["workload.request_trace=/no/such.csv"], "/no/such.csv"),
    (["workload.model_overrides.num_layers=0"], "num_layers"),
    (["network.hosts=8"], "network.hosts"),
    (["workload.gpu=z100"], "workload.gpu"),
    (["workload.max_decode_batch=0"], "workload.max_decode_batch"),
])
def test_bad_inference_config_exits_2_one_line(tmp_path, capsys, sets, needle, engine_ns):
    """Bad inference fields exit 2 with one line naming the field, before anything runs, and write no file."""
    doc = tmp_path / "e.toml"
    doc.write_text('[network]\ntopology = "single-switch"\ngpus_per_server = 1\n[workload]\nkind = "inference"\n'
                   'requests = 1\n[workload.model_overrides]\nnum_layers = 2\n')
    key, value = sets[0].split("=")
    section, *rest = key.split(".")
    text = doc.read_text()
    if key.startswith("workload.model_overrides."):
        text = text.replace("num_layers = 2", f"num_layers = {value}")
    else:
        v = value if value.lstrip("-").isdigit() else f'"{value}"'
        text = text.replace(f"[{section}]\n", f"[{section}]\n{rest[0]} = {v}\n", 1)
    doc.write_text(text)
    out = tmp_path / "x.h5"
    code, _, err = run_main(["run", str(doc), "-o", str(out)], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and needle in err, err
    assert "Traceback" not in err and not out.exists()


def test_latency_cdfs_and_request_timeline_are_drawn(loaded):
    """cosim plot of an inference run: TTFT and TPOT CDFs on shared axes and a request timeline; a run
    without requests gets none of them (and no skip line about them)."""
    from cosim.analysis import plots  # noqa: PLC0415

    _, rec = loaded
    figures = {r.stem: r.figure for r in plots.iter_figures({"a": rec, "b": rec})}
    assert figures["ttft-cdf"] is not None and figures["tpot-cdf"] is not None
    assert figures["requests-a"] is not None and figures["requests-b"] is not None
    other = results.RunRecord(name="f", config={}, provenance={}, summary={})
    assert not any("ttft" in r.stem or r.stem.startswith("requests") for r in plots.iter_figures({"f": other}))


def test_a_replica_runs_one_step_at_a_time():
    """Steps of one replica never overlap, and a decode step admits only requests whose cache is there:
    a cache that arrives while the replica is busy waits for the running step to end."""
    from cosim.workload.inference.requests import poisson_requests  # noqa: PLC0415

    req = poisson_requests(40, 400.0, seed=4, prompt_median_tokens=300, output_median_tokens=6)
    s = serve(req, prefill_replicas=2, decode_replicas=2, prefill_token_budget=2048, max_decode_batch=4,
              policy="least_loaded", prefill_compute_ns=lambda prompts: 1e5 + 10.0 * prompts.sum(),
              decode_compute_ns=lambda ctx: 2e5 + 1.0 * ctx.sum(), kv_delay_ns=np.full(40, 3e4),
              kv_bytes=req.prompt_tokens * 100)
    for steps in (s.prefill, s.decode):
        for r in np.unique(steps.replica):
            mine = np.flatnonzero(steps.replica == r)
            assert np.all(steps.start_ns[mine][1:] >= steps.end_ns[mine][:-1])
    for k in range(s.decode.n):
        new = s.decode.of(k)[s.first_decode_step[s.decode.of(k)] == k]
        assert np.all(s.kv_ready_ns[new] <= s.decode.start_ns[k])
        assert s.decode.ptr[k + 1] - s.decode.ptr[k] <= 4


def test_sparse_arrivals_get_a_time_limit_past_the_last_one(engine_ns):
    """Requests arriving far apart (0.001/s: the second about 20 minutes after the first, past the 100 s a
    service is given beyond its last arrival) complete: the derived time limit runs from the last arrival,
    not from time 0."""
    exp = experiment(requests=2, rate_per_s=1e-3)
    plan = compile_plan(exp)
    last = float(inference.requests_of(exp.seed, exp.workload).arrival_ns.max())
    assert last > 1e11 and plan.max_sim_time_ns > last
    rec = run(exp, plan=plan)
    assert rec.summary["status"] == "complete" and np.isfinite(rec.requests["last_token_ns"]).all()


@pytest.mark.parametrize("work,gps", [
    ({"model": "llama2-70b", "requests": 20, "rate_per_s": 200.0, "prefill_tp": 2, "decode_tp": 2}, 2),
    ({"model": "llama2-70b", "requests": 20, "rate_per_s": 200.0, "prefill_tp": 2, "prefill_pp": 2, "decode_tp": 4,
      "kv_transfer": "whole"}, 4),
    ({"model": "mixtral-8x7b", "requests": 6, "rate_per_s": 100.0, "prefill_tp": 2, "prefill_ep": 2, "decode_tp": 2,
      "decode_ep": 2}, 1),
])
def test_step_trace_ops_counted_before_the_trace_is_built(work, gps):
    """The op count a service is refused by (steptrace.step_trace_ops_lower_bound, from the schedule alone) is
    at most the built trace's ops, and within 10 % of them (it leaves out timers, logits and pipeline sends)."""
    doc = {"seed": 2, "network": {"topology": "single-switch", "gpus_per_server": gps},
           "workload": {"kind": "inference", "model_overrides": {"num_layers": 4}, "output_median_tokens": 4.0} | work}
    exp = from_document(doc)[0]
    w = exp.workload
    p = inference.plan(exp, w, gps)
    sched = inference.schedule_of(w, p)
    bound = step_trace_ops_lower_bound(p.model, sched, prefill=p.prefill, decode=p.decode, kv_mode=w.kv_transfer)
    n_ops = inference.step_trace_of(w, p, sched).trace.n_ops
    assert 0.9 * n_ops <= bound <= n_ops


def test_a_service_this_machine_cannot_plan_is_refused_before_its_trace(tmp_path, monkeypatch, capsys):
    """On a machine with room for 1,000 step-trace ops, a service of more is one input error naming
    workload.requests, exit 2, in a dry run too (the trace would not fit while being built)."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000 * memory.STEP_TRACE_BYTES_PER_OP)
    (tmp_path / "serve.toml").write_text(
        '[network]\ntopology = "single-switch"\ngpus_per_server = 1\n'
        '[workload]\nkind = "inference"\nmodel = "llama2-70b"\nrequests = 40\n')
    code, _, err = run_main(["run", str(tmp_path / "serve.toml"), "--dry-run"], capsys)
    assert code == 2 and "workload.requests" in err and "step-trace ops" in err
    assert len(err.strip().splitlines()) == 1
