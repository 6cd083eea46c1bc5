"""Serving with expert parallelism across a replica's GPUs (cosim.workload.inference.dpep): attention
data-parallel replicas whose MoE layers move tokens with DeepEP's kernels.

Small variants of DeepSeek-V3 (2-4 layers: the first dense, the rest MoE) on servers of 4 or 8 GPUs. The
checks are closed forms: the dispatch bytes of every layer against the routed tokens × token bytes after
deduplication, counted independently from the routing; experts per GPU against DeepSeek's published
deployment; bytes conserved through ns-3; the all-to-all share of a decode step rising with the EP size;
and one-line errors (exit 2) for shapes that cannot run.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim.plan import compile as compile_plan
from cosim.run import run, run_with_baseline
from cosim.spec import from_document
from cosim.workload.hardware import get_hardware
from cosim.workload.inference.model import get_inference_model
from cosim.workload.inference.stepcost import StepCompute
from cosim.workload.sizes import moe_token_bytes
from cosim.workload.trace import AlgoHint, OpKind
from cosim.workload.validate import check_trace


def experiment(*, prefill_ep=8, decode_ep=8, gpus_per_server=4, layers=2, requests=4, transport="roce", top=None,
               **workload):
    """DeepSeek-V3 cut to ``layers`` layers (the first dense), one prefill and one decode replica of
    ``prefill_ep`` / ``decode_ep`` GPUs, attention data-parallel, on a rail-optimized fabric."""
    work = {"kind": "inference", "model": "deepseek-v3",
            "model_overrides": {"num_layers": layers, "first_dense_layers": 1}, "prefill_tp": 1,
            "prefill_ep": prefill_ep, "decode_tp": 1, "decode_ep": decode_ep, "requests": requests,
            "rate_per_s": 5000.0, "prompt_median_tokens": 128.0, "output_median_tokens": 4.0,
            "max_output_tokens": 8, "max_batching_iterations": 1} | workload
    doc = {"seed": 5, "network": {"transport": transport, "topology": "rail-optimized",
                                  "gpus_per_server": gpus_per_server, "link_gbps": 400.0}, "workload": work}
    return from_document(doc | (top or {}))[0]


def _steps(planned):
    state = planned.jobs[0].state
    return state, state.steps, state.steps.trace


def _layer_messages(st, trace, step, layer, phase):
    sel = (st.op_step == step) & (trace.layer == layer) & (st.op_ep_phase == phase) & (trace.kind == OpKind.SEND)
    return np.flatnonzero(sel)


def test_experts_per_gpu_match_deepseeks_deployment():
    """256 routed experts + 32 redundant copies: 9 per GPU at EP32 (prefill) and 2 at EP144 (decode), as
    DeepSeek's inference-system overview states; the step cost's expert GEMMs grow with the copies a GPU
    receives and with the experts it holds."""
    model, hw = get_inference_model("deepseek-v3"), get_hardware("h100")
    prefill = StepCompute(model=model, hardware=hw, tp=1, ep=32, redundant_experts=32)
    decode = StepCompute(model=model, hardware=hw, tp=1, ep=144, redundant_experts=32)
    assert (prefill.local_experts, decode.local_experts) == (9, 2)
    assert decode.routed_experts_ns(64, 8) < decode.routed_experts_ns(512, 8)
    assert decode.routed_experts_ns(64, 8) < prefill.routed_experts_ns(64, 8)  # 2 experts' weights read, not 9
    assert prefill.shared_experts_ns(8) > 0 and prefill.local_experts * 32 == 288


@pytest.mark.parametrize("kernel_side", ["prefill", "decode"])
def test_dispatch_bytes_are_routed_tokens_after_dedup(kernel_side):
    """Per MoE layer of every step, the dispatch's bytes equal the routed tokens × FP8 token bytes
    (h + 4·ceil(h/128)) counted from the routing itself: high-throughput (prefill) sends each token once per
    remote server over RDMA, then forwards it over NVLink to every other GPU there holding one of its
    experts, and sends same-server GPUs their tokens directly; low-latency (decode) sends every (token,
    expert) copy to the expert's GPU. The combine carries the same token counts in bf16 (2·h)."""
    exp = experiment(prefill_ep=8, decode_ep=8, gpus_per_server=4, layers=3)
    planned = compile_plan(exp)
    state, st, trace = _steps(planned)
    ep, model = state.plan.ep, state.plan.model
    fp8, bf16 = moe_token_bytes(model.spec, fp8=True), moe_token_bytes(model.spec)
    assert fp8 == 7168 + 4 * 56 and bf16 == 2 * 7168
    g, slots_per_gpu = 4, ep.expert_slots // 8
    sched = state.schedule
    steps = range(sched.prefill.n) if kernel_side == "prefill" else range(sched.decode.n)
    checked = 0
    for s in steps:
        step_id = s if kernel_side == "prefill" else -1 - s
        for layer in (1, 2):
            sends = _layer_messages(st, trace, step_id, layer, 0)
            # tokens per GPU: the attention ops' owners, recovered from the routing call the trace made
            tokens = _tokens_of_step(state, kernel_side, s)
            experts = ep.routing(kernel_side, step_id, layer, tokens, 8, g)
            rdma = nvlink = copies = 0
            for src in range(8):
                for t in range(tokens[src]):
                    gpus = {int(e) // slots_per_gpu for e in experts[src, t]}
                    copies += sum(int(e) // slots_per_gpu != src for e in experts[src, t])
                    nodes = {x // g for x in gpus} - {src // g}
                    rdma += len(nodes)
                    nvlink += len({x for x in gpus if x != src and x // g == src // g})  # direct, same server
                    nvlink += sum(len({x for x in gpus if x // g == b and x != b * g + src % g}) for b in nodes)
            src_host, dst_host = trace.rank[sends] // g, trace.peer[sends] // g
            remote = src_host != dst_host
            assert np.all(trace.algo_hint[sends] == (AlgoHint.DEEPEP_HIGH_THROUGHPUT if kernel_side == "prefill"
                                                     else AlgoHint.DEEPEP_LOW_LATENCY))
            if kernel_side == "prefill":
                assert int(trace.bytes[sends][remote].sum()) == rdma * fp8
                assert int(trace.bytes[sends][~remote].sum()) == nvlink * fp8
            else:
                assert int(trace.bytes[sends].sum()) == copies * fp8
            combine = _layer_messages(st, trace, step_id, layer, 1)
            assert int(trace.bytes[combine].sum()) * fp8 == int(trace.bytes[sends].sum()) * bf16
            checked += 1
    assert checked >= 2


def _tokens_of_step(state, side, s, gpus=8):
    """Tokens each GPU of the replica (``gpus`` GPUs) holds in step ``s`` (the batch split the step trace
    uses)."""
    from cosim.workload.inference.dpep import decode_gpus
    from cosim.workload.inference.stepcost import split_prompts

    sched, req = state.schedule, state.plan.requests
    if side == "prefill":
        members = sched.prefill.of(s)
        gpu = split_prompts(req.prompt_tokens[members], gpus)
        return tuple(int(req.prompt_tokens[members][gpu == k].sum()) for k in range(gpus))
    gpu = decode_gpus(sched.decode_replica, gpus)[sched.decode.of(s)]
    return tuple(int(np.count_nonzero(gpu == k)) for k in range(gpus))


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_bytes_conserved_and_kv_to_the_decoding_gpu(transport, engine_ns):
    """The step trace is valid; every byte sent arrives (SEND and RECV bytes equal, the fabric delivers its
    payload, no drops); each
    request's KV cache (prompt × 1152 B × layers: MLA's latent 512 + rotary key 64 in bf16) goes from the
    GPU that prefilled it to the one decode GPU that decodes it; the EP summary is there."""
    exp = experiment(prefill_ep=8, decode_ep=16, gpus_per_server=4, requests=6, transport=transport)
    planned = compile_plan(exp)
    rec = run(exp, plan=planned)
    state, st, trace = _steps(planned)
    check_trace(trace)
    send, recv = trace.kind == OpKind.SEND, trace.kind == OpKind.RECV
    assert int(trace.bytes[send].sum()) == int(trace.bytes[recv].sum())
    assert rec.summary["status"] == "complete" and rec.summary["drops"] == 0
    assert rec.summary["delivered_bytes"] == rec.summary["payload_bytes"]
    req = rec.requests
    np.testing.assert_array_equal(req["kv_bytes"], req["prompt_tokens"] * 1152 * 2)
    for q in range(req["request"].size):
        dst = set(trace.rank[st.kv_recv_ops[q]].tolist())
        assert len(dst) == 1 and 8 <= dst.pop() < 24  # one GPU of the decode replica
    assert np.all(np.isfinite(req["ttft_ns"])) and np.all(req["ttft_ns"] > 0)
    for key in ("prefill_dispatch_p50_ns", "decode_combine_p50_ns", "decode_all_to_all_share"):
        assert rec.summary[key] > 0
    assert 0 < rec.summary["decode_all_to_all_share"] < 1


def test_decode_all_to_all_share_rises_with_ep_size(engine_ns):
    """Decode with about one sequence per GPU: at EP4 the group is one server (NVLink only) and every GPU
    reads 64 experts' weights; at EP16 the tokens cross the fabric and a GPU holds 16 experts: a larger
    share of the step is all-to-all, and larger again at EP32 (8 experts per GPU, more remote peers)."""
    share = {}
    for ep in (4, 16, 32):
        exp = experiment(prefill_ep=4, decode_ep=ep, gpus_per_server=4, requests=ep)
        share[ep] = run(exp).summary["decode_all_to_all_share"]
    assert share[4] < share[16] < share[32], share


def test_a_decode_gpu_link_down_stalls_the_unit_and_names_the_slo_misses(engine_ns):
    """One decode GPU's NIC down for 10 ms while 8 requests decode on EP8: every GPU of the unit waits for its
    messages in every layer, so every request decoding across the outage finishes later by at least 0.9 of
    it, and none by more than 1.5 times it (the packets lost at the failure come back by retransmission
    timeouts, backed off while the link was down); the faulted run names exactly the requests within both
    SLOs in the baseline and not with the fault, by the SLO test applied to the two requests tables."""
    outage_ns = 10e6
    exp = experiment(prefill_ep=4, decode_ep=8, requests=8, output_median_tokens=16.0, max_output_tokens=32,
                     tpot_slo_ms=2.9, top={"baseline": True, "faults": [
                         {"kind": "nic_down", "element": "rank6", "at_ns": 20e6, "duration_ns": outage_ns}]})
    faulted, base = run_with_baseline(exp)
    f, b = faulted.requests, base.requests

    def within(t):
        return (t["ttft_ns"] <= 1000.0 * 1e6) & ~(t["tpot_ns"] > 2.9e6)

    missed = np.flatnonzero(within(b) & ~within(f)).tolist()
    assert faulted.summary["slo_missed_by_faults_requests"] == missed and len(missed) >= 1
    assert faulted.summary["slo_missed_by_faults"] == len(missed)
    delay = f["e2e_ns"] - b["e2e_ns"]
    decoding = (b["first_token_ns"] < 20e6) & (b["last_token_ns"] > 30e6)
    assert decoding.sum() >= 2 and np.all(delay[decoding] >= 0.9 * outage_ns)
    assert 0.9 * outage_ns <= faulted.summary["e2e_delay_max_ns"] <= 1.5 * outage_ns
    assert faulted.summary["fault_drops"] > 0 and faulted.summary["timeouts"] > 0
    assert faulted.summary["decode_all_to_all_share"] > 3 * base.summary["decode_all_to_all_share"]


@pytest.mark.parametrize(("workload", "field"), [
    ({"prefill_tp": 2, "prefill_ep": 8}, "workload.prefill_ep"),
    ({"decode_ep": 48}, "workload.decode_ep"),
    ({"decode_ep": 12, "decode_moe_kernel": "deepep-high-throughput", "redundant_experts": 8},
     "workload.decode_ep"),
    ({"prefill_ep": 1, "decode_ep": 1, "redundant_experts": 32}, "workload.redundant_experts"),
    ({"decode_moe_kernel": "nccl"}, "workload.decode_moe_kernel"),
])
def test_shapes_that_cannot_run_are_one_line_errors(tmp_path, capsys, workload, field):
    """ep > tp with tp > 1, an EP size not dividing the expert slots, high-throughput kernels over a group
    not filling whole servers, redundant experts without expert parallelism across GPUs, an unknown kernel:
    exit code 2 and one line naming the field."""
    toml = tmp_path / "bad.toml"
    lines = ['[network]', 'topology = "rail-optimized"', 'gpus_per_server = 8', '[workload]', 'kind = "inference"',
             'model = "deepseek-v3"', 'prefill_ep = 8', 'decode_ep = 8', 'requests = 2']
    fields = {k: v for k, v in workload.items()}
    lines = [x for x in lines if x.split(" = ")[0] not in fields]
    lines += [f'{k} = {v!r}'.replace("'", '"') for k, v in fields.items()]
    toml.write_text("\n".join(lines) + "\n")
    code, _out, err = run_main(["run", str(toml), "--dry-run"], capsys)
    assert code == 2, err
    assert field in err and len(err.strip().splitlines()) == 1, err
