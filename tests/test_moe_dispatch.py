"""Token routing and DeepEP dispatch/combine: counts against a hand count, skew and node limits, and the two
kernels co-simulated in ns-3 (bytes conserved, the high-throughput kernels' per-node deduplication against
the low-latency kernels' copy per expert)."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.collectives.dag import DagOpKind
from cosim.errors import CosimInputError
from cosim.plan import compile as compile_plan
from cosim.run import execute, record
from cosim.spec import make
from cosim.workload.deepep import (
    KERNELS,
    combine_messages,
    dispatch_combine_trace,
    dispatch_messages,
    traffic,
)
from cosim.workload.model import get_model
from cosim.workload.routing import RoutingSpec, route_tokens, routed_counts
from cosim.workload.validate import check_trace

#: 4 EP ranks on 2 nodes of 2 GPUs, 8 experts (2 per rank), top-3; rank 0's three tokens by hand
HAND = np.array([[[0, 2, 4], [4, 5, 6], [1, 3, 7]],  # ranks 0,1,2 / 2,2,3 / 0,1,3
                 [[0, 1, 2], [0, 1, 3], [2, 3, 4]],
                 [[4, 5, 6], [4, 6, 7], [5, 6, 7]],
                 [[0, 6, 7], [1, 6, 7], [2, 6, 7]]])


def test_dedup_counts_of_a_hand_routing():
    """Rank 0: tokens t0 → ranks {0,1,2} (nodes {0,1}), t1 → {2,3} ({1}), t2 → {0,1,3} ({0,1})."""
    c = routed_counts(HAND, num_experts=8, gpus_per_node=2)
    assert c.expert_copies[0].tolist() == [2, 2, 3, 2]  # 9 = 3 tokens × top-3, no dedup
    assert c.rank_tokens[0].tolist() == [2, 2, 2, 2]
    assert c.node_tokens[0].tolist() == [2, 3]
    assert c.expert_tokens.sum() == 4 * 3 * 3


def test_dispatch_bytes_of_a_hand_routing_for_both_kernels():
    """Rank 0 with 10-byte tokens. High-throughput: 3 tokens once over RDMA to rank 2 (node 1's GPU with
    rank 0's local index), which forwards rank 3's 2 over NVLink; rank 1's 2 go directly over NVLink.
    Low-latency: every copy straight to its expert's rank, 3 + 2 over the fabric, no forward."""
    c = routed_counts(HAND, num_experts=8, gpus_per_node=2)
    ht = dispatch_messages(c, "high-throughput", 10)
    sent = {(int(s), int(d)): int(b) for s, d, b in zip(ht.src, ht.dst, ht.bytes) if s == 0}
    assert sent == {(0, 1): 20, (0, 2): 30}
    parent = np.full(ht.src.size, -1)
    parent[ht.dep_child] = ht.dep_parent  # a forward carries exactly one RDMA message
    fwd = np.flatnonzero(ht.second_hop & (ht.src == 2) & (ht.dst == 3) & (ht.src[parent] == 0))
    assert ht.bytes[fwd].tolist() == [20]
    ll = dispatch_messages(c, "low-latency", 10)
    assert {(int(s), int(d)): int(b) for s, d, b in zip(ll.src, ll.dst, ll.bytes) if s == 0} == \
        {(0, 1): 20, (0, 2): 30, (0, 3): 20}
    assert not ll.second_hop.any() and ll.dep_child.size == 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_combine_mirrors_dispatch(kernel):
    """The combine moves the dispatch's token counts back: same fabric tokens, same NVLink tokens."""
    spec = RoutingSpec(distribution="zipf", zipf_exponent=1.0, max_nodes=2, seed=3)
    c = routed_counts(route_tokens(spec, tokens_per_rank=50, ep=12, num_experts=48, top_k=6, gpus_per_node=4),
                      num_experts=48, gpus_per_node=4)
    d, m = traffic(dispatch_messages(c, kernel, 7), 4), traffic(combine_messages(c, kernel, 7), 4)
    assert (d.fabric_bytes, d.nvlink_bytes) == (m.fabric_bytes, m.nvlink_bytes)


@pytest.mark.parametrize("spec", [
    RoutingSpec(seed=5),
    RoutingSpec(distribution="zipf", zipf_exponent=1.5, seed=5),
    RoutingSpec(distribution="vector", expert_load=tuple(range(1, 33)), max_nodes=2, seed=5),
])
def test_routing_conserves_tokens_and_picks_distinct_experts(spec):
    """Every token picks top_k distinct experts: the experts receive ep·T·k copies in all, whatever the skew;
    with a node limit every token's experts lie on at most max_nodes nodes."""
    ex = route_tokens(spec, tokens_per_rank=200, ep=8, num_experts=32, top_k=4, gpus_per_node=2)
    assert ex.shape == (8, 200, 4)
    assert np.all(np.diff(ex, axis=2) > 0)  # sorted and distinct
    c = routed_counts(ex, num_experts=32, gpus_per_node=2)
    assert c.expert_tokens.sum() == c.expert_copies.sum() == 8 * 200 * 4
    nodes_used = c.node_tokens.sum() / (8 * 200)
    if spec.max_nodes:
        per_token = np.array([[np.unique(t // 4 // 2).size for t in rank] for rank in ex])
        assert per_token.max() <= spec.max_nodes and nodes_used <= spec.max_nodes
    again = route_tokens(spec, tokens_per_rank=200, ep=8, num_experts=32, top_k=4, gpus_per_node=2)
    assert np.array_equal(ex, again)  # same seed, same routing bit for bit


def test_skew_raises_the_hottest_expert_by_its_load_factor():
    """Top-1 routing with one expert at 3× the load of the 15 others: it receives 3/18 of the tokens, 3×
    the mean (within 5 binomial standard deviations), and its rank's inbound bytes rise accordingly."""
    load = (3.0,) + (1.0,) * 15
    tokens, ep = 4000, 8
    ex = route_tokens(RoutingSpec(distribution="vector", expert_load=load, seed=1), tokens_per_rank=tokens, ep=ep,
                      num_experts=16, top_k=1, gpus_per_node=4)
    c = routed_counts(ex, num_experts=16, gpus_per_node=4)
    n, p = ep * tokens, 3 / 18
    assert abs(c.expert_tokens[0] - n * p) < 5 * np.sqrt(n * p * (1 - p))
    inbound = c.expert_copies.sum(axis=0)
    assert inbound[0] / inbound[1:].mean() == pytest.approx((3 + 1) / 2, rel=0.05)  # rank 0 holds experts 0, 1


def test_node_limit_cuts_fabric_bytes_of_the_high_throughput_dispatch():
    """DeepSeek-shaped 256 experts top-8 on 8 nodes: without a limit a token reaches about 5.2 nodes
    (8·(1 − (7/8)^8) by hand for independent picks), with max_nodes=4 at most 4."""
    kw = dict(tokens_per_rank=64, ep=64, num_experts=256, top_k=8, gpus_per_node=8)
    free = routed_counts(route_tokens(RoutingSpec(seed=2), **kw), num_experts=256, gpus_per_node=8)
    limited = routed_counts(route_tokens(RoutingSpec(max_nodes=4, seed=2), **kw), num_experts=256, gpus_per_node=8)
    per_token = free.node_tokens.sum() / (64 * 64)
    assert per_token == pytest.approx(8 * (1 - (7 / 8) ** 8), rel=0.05)
    assert limited.node_tokens.sum() / (64 * 64) <= 4
    assert traffic(dispatch_messages(limited, "high-throughput", 1), 8).fabric_bytes < \
        traffic(dispatch_messages(free, "high-throughput", 1), 8).fabric_bytes


@pytest.mark.parametrize("fields, field", [
    (dict(distribution="pareto"), "routing.distribution"),
    (dict(zipf_exponent=-1.0), "routing.zipf_exponent"),
    (dict(distribution="vector"), "routing.expert_load"),
    (dict(expert_load=(1.0, float("nan"))), "routing.expert_load"),
    (dict(max_nodes=-1), "routing.max_nodes"),
])
def test_bad_routing_names_its_field(fields, field):
    with pytest.raises(CosimInputError) as err:
        RoutingSpec(**fields)
    assert err.value.field == field


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_both_kernels_in_ns3_conserve_bytes_and_differ_as_physics_says(transport, engine_ns):
    """EP8 over 2 servers of 4 GPUs, FP8 dispatch and bf16 combine of a DeepSeek-sized token: every byte
    of every flow arrives; the fabric carries exactly the planned RDMA bytes and NVLink the planned
    intra-node bytes. The low-latency kernels send a copy per expert (more fabric bytes) and forward nothing;
    the high-throughput kernels send a token once per node and forward it over NVLink."""
    spec = RoutingSpec(seed=4)
    c = routed_counts(route_tokens(spec, tokens_per_rank=16, ep=8, num_experts=32, top_k=4, gpus_per_node=4),
                      num_experts=32, gpus_per_node=4)
    moved = {}
    for kernel in KERNELS:
        trace = dispatch_combine_trace(c, kernel=kernel, dispatch_token_bytes=7168 + 224,
                                       combine_token_bytes=2 * 7168, expert_compute_ns=20_000)
        check_trace(trace)
        plan = compile_plan(make("training", transport=transport, topology="single-switch", gpus_per_server=4),
                            trace)
        rec = record(plan, execute(plan))
        assert rec.summary["status"] == "complete"
        f = rec.flows
        assert np.array_equal(f["delivered_bytes"], f["size_bytes"])
        planned = [traffic(m(c, kernel, b), 4) for m, b in ((dispatch_messages, 7392), (combine_messages, 14336))]
        assert int(f["size_bytes"].sum()) == sum(t.fabric_bytes for t in planned)
        nvlink = int(plan.dag.bytes_[plan.dag.kind == DagOpKind.NVLINK].sum())
        assert nvlink == sum(t.nvlink_bytes for t in planned)
        moved[kernel] = planned
    ht, ll = moved["high-throughput"], moved["low-latency"]
    assert ll[0].fabric_bytes > ht[0].fabric_bytes and ll[1].fabric_bytes > ht[1].fabric_bytes
    assert ll[0].forwarded_bytes == 0 and ht[0].forwarded_bytes > 0
    assert ll[0].nvlink_bytes < ht[0].nvlink_bytes


def _deepep_training_trace(kernel: str, **overrides):
    from cosim.workload.builder import build_trace
    from cosim.workload.hardware import get_hardware
    from cosim.workload.parallelism import ParallelismSpec

    fields = dict(num_layers=2, first_dense_layers=1, seq_length=256, hidden_size=1024, moe_dispatch_dtype="fp8",
                  moe_kernel=kernel, max_routed_nodes=2) | overrides
    return build_trace(get_model("deepseek-v3", **fields), ParallelismSpec(dp=8, ep=8, global_batch_size=8),
                       get_hardware("h100", gpus_per_host=2))


def test_training_trace_with_deepep_kernels_routes_every_call():
    """EP8 over 4 servers of 2: with a DeepEP kernel the EP all-to-alls become routed SEND/RECV messages
    (a valid trace: sends meet recvs); forward dispatch (FP8) and combine (bf16) of one layer and micro-batch
    share a routing, so the low-latency kernels move the same token copies both ways; the high-throughput
    kernels put fewer bytes on the fabric; the routing is the same for the same seed and moves with it."""
    from cosim.workload.sizes import moe_token_bytes
    from cosim.workload.trace import CollKind

    fp8, bf16 = moe_token_bytes(get_model("deepseek-v3", hidden_size=1024), fp8=True), 2 * 1024
    fabric = {}
    for kernel in ("deepep-high-throughput", "deepep-low-latency"):
        t = _deepep_training_trace(kernel)
        check_trace(t)
        assert not np.any(t.coll_kind == CollKind.ALL_TO_ALL)
        labels = t.label_array().astype(str)
        sends = t.kind == 2
        remote = t.rank // 2 != t.peer // 2

        def sent(name, where):
            return int(t.bytes[sends & where & (labels == f"fwd/mb0/L1/{name}")].sum())

        every = np.ones(t.n_ops, bool)
        if kernel == "deepep-low-latency":
            assert sent("moe_dispatch_alltoall", every) * bf16 == sent("moe_combine_alltoall", every) * fp8
        fabric[kernel] = sent("moe_dispatch_alltoall", remote)
    assert 0 < fabric["deepep-high-throughput"] < fabric["deepep-low-latency"]
    again = _deepep_training_trace("deepep-high-throughput")
    assert again.equals(_deepep_training_trace("deepep-high-throughput"))
    assert not again.equals(_deepep_training_trace("deepep-high-throughput", routing_seed=1))


def test_training_iteration_with_deepep_kernels_runs_lossless_in_ns3(engine_ns):
    """The same iteration with the high-throughput kernels and a Zipf-skewed routing co-simulated on RoCE:
    complete, every flow delivers all its bytes."""
    from cosim.run import run

    overrides = dict(num_layers=2, first_dense_layers=1, seq_length=256, hidden_size=1024, moe_dispatch_dtype="fp8",
                     moe_kernel="deepep-high-throughput", max_routed_nodes=2, routing_distribution="zipf",
                     routing_zipf_exponent=1.2)
    exp = make("training", transport="roce", topology="single-switch", gpus_per_server=2,
               **{"workload.model": "deepseek-v3", "workload.model_overrides": overrides,
                  "workload.parallelism": dict(dp=8, ep=8, global_batch_size=8)})
    rec = run(exp)
    f = rec.flows
    assert rec.summary["status"] == "complete" and rec.summary["drops"] == 0
    assert np.array_equal(f["delivered_bytes"], f["size_bytes"])
    from cosim.collectives.dag import CommClass
    from cosim.plan import compile as compile_plan

    plan = compile_plan(exp)  # the DeepEP transfers hold DeepEP's SMs, the DP all-reduce NCCL's
    assert set(np.unique(plan.dag.comm_class).tolist()) == {CommClass.NCCL, CommClass.EXPERT}
    assert float(plan.attributes["DagExecutor::ExpertCommComputeSlowdown"]) == pytest.approx(20 / 132)


@pytest.mark.parametrize("fields, field", [
    (dict(moe_kernel="deepep"), "model.moe_kernel"),
    (dict(routing_distribution="pareto"), "model.routing_distribution"),
    (dict(routing_expert_load=(1.0, 2.0)), "model.routing_expert_load"),
])
def test_bad_deepep_model_fields_name_their_field(fields, field):
    with pytest.raises(CosimInputError) as err:
        get_model("deepseek-v3", **fields)
    assert err.value.field == field


def test_skewed_routing_makes_the_hot_ranks_experts_compute_longer():
    """With a DeepEP kernel the routed experts' compute of each rank is timed for the tokens it received: under
    a Zipf skew (a = 1.2) the hottest rank's forward experts op outlasts the balanced one by more than 20 % and
    some rank's is shorter; the balanced trace ("nccl") keeps one duration for all."""
    def experts_ns(trace):
        return trace.duration_ns[trace.label_array() == "fwd/mb0/L1/experts"]

    balanced = experts_ns(_deepep_training_trace("nccl", seq_length=512))
    skewed = experts_ns(_deepep_training_trace("deepep-high-throughput", seq_length=512,
                                               routing_distribution="zipf", routing_zipf_exponent=1.2))
    assert np.unique(balanced).size == 1 and skewed.size == balanced.size == 8
    assert skewed.max() > 1.2 * balanced[0] and skewed.min() < balanced[0]


def test_combine_waits_for_the_experts_even_where_a_relay_gathers_nothing():
    """One token whose experts all sit on the relay itself: the reduced RDMA message of the combine has no
    NVLink gather before it, and still waits for the experts' compute."""
    experts = np.array([[[4]], [[0]], [[0]], [[0]]])  # rank 0's token on rank 2 (node 1, local 0: its relay)
    c = routed_counts(experts, num_experts=8, gpus_per_node=2)
    t = dispatch_combine_trace(c, kernel="high-throughput", dispatch_token_bytes=10, combine_token_bytes=20,
                               expert_compute_ns=1000)
    labels = t.label_array()
    reduced = np.flatnonzero((labels == "moe/combine_reduced") & (t.kind == 2) & (t.rank == 2) & (t.peer == 0))
    assert reduced.size == 1
    deps = t.dep_idx[t.dep_ptr[reduced[0]]:t.dep_ptr[reduced[0] + 1]]
    assert any(labels[d] == "moe/experts" for d in deps)
