"""Serving with expert parallelism across GPUs: two-batch overlap of the MoE layers, redundant experts as hot
copies, their periodic rebalancing under a drifting router and node-limited routing (``workload.moe_overlap``,
``expert_placement``, ``eplb_interval_steps``, ``routing_drift_steps``, ``node_limited_routing``;
cosim.workload.inference.dpep).

Two-batch overlap: the halves split the step's own routing, so every step moves exactly the unsplit step's
dispatch and combine bytes; co-simulated, the all-to-all time no compute hides falls, and every GPU still
runs one compute stream. Hot copies: with a skewed router the hottest GPU receives fewer token copies, by
the factor its copies imply (a closed form from the routed counts), and no copy is lost. Node-limited
routing keeps every token's experts on at most M servers of the unit.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_inference_ep import _steps, _tokens_of_step, experiment

from cosim.errors import CosimInputError
from cosim.plan import compile as compile_plan
from cosim.run import run
from cosim.workload.inference.dpep import Eplb, ExpertParallel
from cosim.workload.inference.model import get_inference_model
from cosim.workload.routing import (
    RoutingSpec,
    expert_popularity,
    hot_copy_placement,
    route_tokens,
    route_tokens_to_copies,
    routed_counts,
    to_slots,
)
from cosim.workload.trace import OpKind, Phase
from cosim.workload.validate import check_trace

#: EP8 prefill and decode on servers of 4; 24 requests of 8 output tokens at 20,000/s: 2-3 sequences per
#: decode GPU, so both halves of a decode step hold tokens
SHAPE = dict(prefill_ep=8, decode_ep=8, gpus_per_server=4, layers=3, requests=24, rate_per_s=20000.0,
             output_median_tokens=8.0, max_output_tokens=8)


def _ep_bytes_per_step(planned) -> dict[int, tuple[int, int]]:
    _, st, tr = _steps(planned)
    send = (tr.kind == OpKind.SEND) & (st.op_ep_phase >= 0)
    out = {}
    for step in np.unique(st.op_step[send]).tolist():
        sel = send & (st.op_step == step)
        out[step] = tuple(int(tr.bytes[sel & (st.op_ep_phase % 2 == k)].sum()) for k in (0, 1))
    return out


@pytest.mark.parametrize("placement", ["extra_slots", "hot_copies"])
def test_two_batch_overlap_moves_the_same_bytes_per_step(placement):
    """Same schedule, same routing: per prefill and decode step, the dispatch and combine bytes of the two
    halves add up exactly to the unsplit step's; the overlapped trace is valid and holds both halves'
    dispatches and combines."""
    kw = SHAPE | dict(redundant_experts=8, expert_placement=placement)
    plain = compile_plan(experiment(**kw))
    tbo = compile_plan(experiment(**kw, moe_overlap="two_microbatch"))
    assert plain.jobs[0].state.schedule.decisions() == tbo.jobs[0].state.schedule.decisions()
    check_trace(tbo.jobs[0].state.steps.trace)
    a, b = _ep_bytes_per_step(plain), _ep_bytes_per_step(tbo)
    assert a == b and len(a) >= 4 and all(d > 0 and c > 0 for d, c in a.values())
    phases = tbo.jobs[0].state.steps.op_ep_phase
    assert set(np.unique(phases[phases >= 0]).tolist()) == {0, 1, 2, 3}


def test_two_batch_overlap_hides_decode_all_to_all(engine_ns):
    """Co-simulated on RoCE: the exposed all-to-all share of the decode steps (the time the GPU with the most
    compute waits, over the step) falls by more than 30 % with the overlap (about 40 % here), the prefill's
    too (to nothing here); both runs deliver every byte."""
    plain = run(experiment(**SHAPE)).summary
    tbo = run(experiment(**SHAPE, moe_overlap="two_microbatch")).summary
    for s in (plain, tbo):
        assert s["status"] == "complete" and s["drops"] == 0 and s["delivered_bytes"] == s["payload_bytes"]
    for side in ("decode", "prefill"):
        key = f"{side}_all_to_all_exposed_share"
        assert tbo[key] < 0.7 * plain[key], (side, plain[key], tbo[key])


def test_two_batch_overlap_keeps_one_compute_stream():
    """Every GPU's compute ops (arrival timers aside) form one chain in program order, each depending on the
    one before it, so no two of them can run at once; half B's attention does not wait for half A's
    dispatch (the messages it overlaps)."""
    planned = compile_plan(experiment(**SHAPE, moe_overlap="two_microbatch"))
    _, st, tr = _steps(planned)
    deps = [set(tr.dep_idx[tr.dep_ptr[i]:tr.dep_ptr[i + 1]].tolist()) for i in range(tr.n_ops)]
    labels = np.asarray(tr.labels)[tr.label]
    compute = np.flatnonzero((tr.kind == OpKind.COMPUTE) & (tr.phase != Phase.OTHER))
    for r in range(16):
        mine = compute[tr.rank[compute] == r]
        assert mine.size > 0 and all(int(a) in deps[int(b)] for a, b in zip(mine[:-1], mine[1:])), r
        # in each two-batch layer B's attention depends on none of A's dispatch SENDs
        for step in np.unique(st.op_step[mine]).tolist():
            for layer in (1, 2):
                at = mine[(st.op_step[mine] == step) & (tr.layer[mine] == layer)]
                attn = at[np.char.endswith(labels[at], "/attn")]
                sends = np.flatnonzero((tr.rank == r) & (st.op_step == step) & (tr.layer == layer)
                                       & (st.op_ep_phase == 0) & (tr.kind == OpKind.SEND))
                assert attn.size == 2 and not deps[int(attn[1])] & set(sends.tolist())


def test_hot_copies_cut_the_hottest_gpus_copies_by_the_closed_form():
    """Expert 0 of 4 is 5 times as popular as each other (top-1, EP4): 4 redundant slots all copy it (5
    copies of load 1, like the 3 others), packed 2 slots per GPU. Expert e's n_e tokens split over its c_e
    copies, each copy getting n_e/c_e within one per source GPU; the hottest GPU, which held all of expert
    0's ~5/8 of the tokens, now holds about 2/8: a factor of 2.5. No copy is lost."""
    spec = RoutingSpec(distribution="vector", expert_load=(5.0, 1.0, 1.0, 1.0), seed=3)
    place = hot_copy_placement(expert_popularity(spec, 4), 4, 4)
    assert np.bincount(place).tolist() == [5, 1, 1, 1] and sorted(place.tolist()) == [0] * 5 + [1, 2, 3]
    experts = route_tokens(spec, tokens_per_rank=4000, ep=4, num_experts=4, top_k=1, gpus_per_node=2)
    before = routed_counts(experts, num_experts=4, gpus_per_node=2)
    after = routed_counts(to_slots(experts, place), num_experts=8, gpus_per_node=2)
    n = before.expert_tokens
    copies = np.bincount(place)
    per_gpu = (n[place] / copies[place]).reshape(4, 2).sum(axis=1)  # the closed form, per GPU
    received = after.expert_copies.sum(axis=0)
    assert np.all(np.abs(received - per_gpu) <= 4 * 2), (received, per_gpu)  # within one per source and slot
    assert np.all(np.abs(after.expert_tokens - n[place] / copies[place]) <= 4)
    assert int(received.sum()) == int(before.expert_copies.sum()) == 4 * 4000
    factor = before.expert_copies.sum(axis=0).max() / received.max()
    assert factor == pytest.approx(before.expert_copies.sum(axis=0).max() / per_gpu.max(), rel=0.01)
    assert factor == pytest.approx(2.5, rel=0.05)


def test_hot_copies_lower_the_hottest_gpus_dispatch_bytes_under_zipf():
    """DeepSeek-V3's 256 experts under a Zipf router (a = 1), decode at EP32 with 32 redundant experts: the
    copies go to the hottest experts (the hottest gets the most), every GPU holds 9 slots and no two copies
    of one expert; the hottest GPU's received dispatch copies fall, the total stays; an EP size need only
    divide the slots."""
    model = get_inference_model("deepseek-v3", routing_distribution="zipf", routing_zipf_exponent=1.0)
    tokens = tuple([64] * 32)
    got = {}
    for placement, redundant in (("extra_slots", 0), ("hot_copies", 32)):
        ep = ExpertParallel(model=model, redundant_experts=redundant, placement=placement)
        got[placement] = ep.counts("decode", -1, 3, tokens, 32, 8).expert_copies.sum(axis=0)
    assert got["extra_slots"].sum() == got["hot_copies"].sum() == 32 * 64 * 8
    assert got["hot_copies"].max() < 0.6 * got["extra_slots"].max()
    p = expert_popularity(RoutingSpec(distribution="zipf", zipf_exponent=1.0, seed=1), 256)
    place = hot_copy_placement(p, 32, 32)
    copies = np.bincount(place, minlength=256)
    assert copies[np.argmax(p)] == copies.max() > 1 and copies.sum() == 288
    assert all(np.unique(place[g * 9:(g + 1) * 9]).size == 9 for g in range(32))
    # an EP size dividing the slots but not the experts (EP144's 288 = 256 + 32 slots, here 264 over 12)
    twelve = ExpertParallel(model=model, redundant_experts=8, placement="hot_copies").counts(
        "decode", -1, 3, tuple([16] * 12), 12, 4)
    assert twelve.expert_copies.shape == (12, 12) and twelve.expert_copies.sum() == 12 * 16 * 8


@pytest.mark.parametrize("placement", ["extra_slots", "hot_copies"])
def test_node_limited_routing_keeps_each_token_on_its_servers(placement):
    """With node_limited_routing and max_routed_nodes = 2, EP16 over 4 servers: every token's experts (with
    hot copies, the copies it is sent to) lie on at most 2 servers in every MoE layer of every step, so the
    high-throughput kernels' RDMA copies per token are at most 2; the prefill's fabric bytes fall below the
    unlimited routing's."""
    kw = dict(prefill_ep=16, decode_ep=16, gpus_per_server=4, layers=3, requests=8, redundant_experts=16,
              expert_placement=placement,
              model_overrides={"num_layers": 3, "first_dense_layers": 1, "max_routed_nodes": 2})
    fabric = {}
    for limited in (False, True):
        planned = compile_plan(experiment(**kw, node_limited_routing=limited))
        state, st, tr = _steps(planned)
        send = (tr.kind == OpKind.SEND) & (st.op_ep_phase == 0) & (st.op_step >= 0)
        fabric[limited] = int(tr.bytes[send & (tr.rank // 4 != tr.peer // 4)].sum())
        if not limited:
            continue
        ep, sched = state.plan.ep, state.schedule
        slots_per_server = ep.expert_slots // 16 * 4
        for s in range(sched.prefill.n):
            tokens = _tokens_of_step(state, "prefill", s, 16)
            for layer in (1, 2):
                servers = ep.routing("prefill", s, layer, tokens, 16, 4) // slots_per_server
                for g in range(16):
                    for row in servers[g, :tokens[g]]:
                        assert np.unique(row).size <= 2
    assert fabric[True] < 0.8 * fabric[False]


@pytest.mark.parametrize("limit, bound", [(1, 1.8), (2, 1.35), (3, 1.35)])
def test_node_limited_hot_copies_conserve_tokens(limit, bound):
    """Node-limited routing over hot copies, DeepSeek-V3's 256 experts + 32 copies at EP32 on 4 servers of 8,
    a Zipf router: every token sends its top-8 to 8 distinct experts, each to a slot holding a copy of that
    expert, all on at most ``limit`` servers (so every copy is conserved: 8 per token); the copies spread
    over the servers keep the hottest GPU within ``bound`` × the mean (routing to extra slots under the same
    limit: over 3 ×). With one server per token a server's copies of an expert serve all its tokens that pick
    it, and the second hottest expert's 7 copies lie 2, 2, 2 and 1 on the servers: hence the looser bound."""
    p = expert_popularity(RoutingSpec(distribution="zipf", zipf_exponent=1.0, seed=1), 256)
    place = hot_copy_placement(p, 32, 32, gpus_per_node=8)
    spec = RoutingSpec(distribution="zipf", zipf_exponent=1.0, max_nodes=limit, seed=3, popularity_seed=1)
    slots = route_tokens_to_copies(spec, tokens_per_rank=256, ep=32, slot_expert=place, top_k=8, gpus_per_node=8)
    assert slots.shape == (32, 256, 8)
    servers = slots // 9 // 8
    assert max(np.unique(row).size for row in servers.reshape(-1, 8)) <= limit
    experts = place[slots].reshape(-1, 8)
    assert all(np.unique(row).size == 8 for row in experts)
    received = np.bincount(slots.ravel() // 9, minlength=32)
    assert received.sum() == 32 * 256 * 8 and received.max() < bound * received.mean()
    extra = routed_counts(route_tokens(RoutingSpec(distribution="zipf", zipf_exponent=1.0, max_nodes=limit, seed=3),
                                       tokens_per_rank=256, ep=32, num_experts=288, top_k=8, gpus_per_node=8),
                          num_experts=288, gpus_per_node=8).expert_copies.sum(axis=0)
    assert extra.max() > 3 * extra.mean()


def _eplb_run(interval: int, steps: int, drift: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One decode MoE layer at EP32, 128 tokens per GPU, Zipf router (a = 1) whose popularity drifts every
    ``drift`` steps, 32 hot copies placed every ``interval`` steps (0: once): per step the copies each expert
    receives, the most copies a GPU receives, and the mean over GPUs."""
    model = get_inference_model("deepseek-v3", routing_distribution="zipf", routing_zipf_exponent=1.0)
    ep = ExpertParallel(model=model, redundant_experts=32, placement="hot_copies", routing_drift_steps=drift,
                        eplb_interval_steps=interval)
    eplb, tokens = Eplb(ep), (128,) * 32
    load, hottest, mean = [], [], []
    for step in range(steps):
        received = ep.counts("decode", step, 3, tokens, 32, 8,
                             placement=eplb.placement("decode", step, 3, 32)).expert_copies.sum(axis=0)
        eplb.observe("decode", step, 3, tokens, 32, 8)
        load.append(ep.expert_load("decode", step, 3, tokens, 32, 8))
        hottest.append(received.max())
        mean.append(received.mean())
    return np.array(load), np.array(hottest), np.array(mean)


def test_eplb_rebalancing_follows_a_drifting_router():
    """The Zipf order re-drawn every 30 steps, EP32 with 32 hot copies: placed once, the hottest GPU receives
    over twice the mean copies once the order has drifted; re-placed every 10 steps from the last 10 steps'
    load, it stays within 15 % of the mean in every period but the one right after a drift (placed from
    the load before it). The experts tokens pick are the same either way (every copy conserved: 128 × 8
    per GPU); only which GPU serves them changes."""
    load_once, hottest_once, mean = _eplb_run(0, 60)
    load_eplb, hottest_eplb, mean_eplb = _eplb_run(10, 60)
    assert np.array_equal(load_once, load_eplb) and np.all(load_once.sum(axis=1) == 32 * 128 * 8)
    assert np.array_equal(mean, mean_eplb)
    drifted = np.arange(60) >= 30
    assert np.all(hottest_once[drifted] > 2 * mean[drifted])
    settled = (np.arange(60) % 30) >= 10  # not in the first period after a drift
    assert np.all(hottest_eplb[settled] < 1.15 * mean[settled])
    assert hottest_eplb[settled].mean() < hottest_once[settled].mean()


def test_eplb_places_from_the_last_windows_load():
    """Period p's placement is routing.hot_copy_placement of the copies each expert received over period
    p - 1's steps; period 0 keeps the placement from the declared popularity; a side's placement is its own."""
    model = get_inference_model("deepseek-v3", routing_distribution="zipf", routing_zipf_exponent=1.0)
    ep = ExpertParallel(model=model, redundant_experts=32, placement="hot_copies", eplb_interval_steps=3)
    eplb, tokens = Eplb(ep), (16,) * 32
    for step in range(6):
        assert eplb.placement("decode", step, 3, 32) is None or step >= 3
        eplb.observe("decode", step, 3, tokens, 32, 8)
    window = sum(ep.expert_load("decode", s, 3, tokens, 32, 8) for s in range(3, 6))
    assert eplb.placement("decode", 6, 3, 32) == tuple(hot_copy_placement(window, 32, 32).tolist())
    assert eplb.placement("prefill", 6, 3, 32) is None  # no prefill step observed


def test_eplb_in_a_serving_run_delivers_every_byte(engine_ns):
    """A serving run whose router drifts every 2 steps and whose hot copies are placed again every 2: the
    trace is valid and the steps of the first period route exactly as with copies placed once; a later
    step routes differently; co-simulated, every byte arrives."""
    kw = SHAPE | dict(redundant_experts=8, expert_placement="hot_copies", routing_drift_steps=2,
                      model_overrides={"num_layers": 3, "first_dense_layers": 1, "routing_distribution": "zipf"})
    once = compile_plan(experiment(**kw))
    eplb = compile_plan(experiment(**kw, eplb_interval_steps=2))
    check_trace(eplb.jobs[0].state.steps.trace)
    a, b = _ep_bytes_per_rank_and_step(once), _ep_bytes_per_rank_and_step(eplb)
    assert a.keys() == b.keys()
    first = [k for k in a if k in (0, 1, -1, -2)]
    assert first and all(np.array_equal(a[k], b[k]) for k in first)
    assert any(not np.array_equal(a[k], b[k]) for k in a if k not in first)
    s = run(experiment(**kw, eplb_interval_steps=2)).summary
    assert s["status"] == "complete" and s["drops"] == 0 and s["delivered_bytes"] == s["payload_bytes"]


def _ep_bytes_per_rank_and_step(planned) -> dict[int, np.ndarray]:
    """Per step, the dispatch bytes every rank receives."""
    _, st, tr = _steps(planned)
    send = (tr.kind == OpKind.SEND) & (st.op_ep_phase == 0)
    return {step: np.bincount(tr.peer[send & (st.op_step == step)], weights=tr.bytes[send & (st.op_step == step)],
                              minlength=tr.n_ranks) for step in np.unique(st.op_step[send]).tolist()}


@pytest.mark.parametrize(("workload", "field"), [
    (dict(prefill_ep=1, decode_ep=1, moe_overlap="two_microbatch"), "workload.moe_overlap"),
    (dict(prefill_ep=1, decode_ep=1, expert_placement="hot_copies"), "workload.expert_placement"),
    (dict(decode_ep=8, max_decode_batch=8, moe_overlap="two_microbatch"), "workload.moe_overlap"),
    (dict(moe_overlap="three_microbatch"), "workload.moe_overlap"),
    (dict(prefill_ep=1, decode_ep=1, node_limited_routing=True), "workload.node_limited_routing"),
    (dict(node_limited_routing=True, model_overrides={"num_layers": 2, "first_dense_layers": 1,
                                                      "max_routed_nodes": 0}),
     "workload.node_limited_routing"),
    (dict(eplb_interval_steps=10), "workload.eplb_interval_steps"),
    (dict(prefill_ep=1, decode_ep=1, eplb_interval_steps=10), "workload.eplb_interval_steps"),
    (dict(eplb_interval_steps=-1, expert_placement="hot_copies"), "workload.eplb_interval_steps"),
    (dict(routing_drift_steps=10, expert_placement="hot_copies"), "workload.routing_drift_steps"),
    (dict(routing_drift_steps=10), "workload.routing_drift_steps"),
])
def test_overlap_and_placement_errors_name_their_field(workload, field):
    """Overlap, hot copies or a node limit without a replica whose experts spread over its GPUs, a decode
    batch too small to give every GPU two micro-batches, an unknown value, a node limit the model does not
    have, rebalancing or drift without hot copies or with a negative count, drift of a uniform router: one
    error naming the field."""
    with pytest.raises(CosimInputError) as err:
        experiment(**workload)
    assert err.value.field == field
