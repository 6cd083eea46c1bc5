"""Expert parallelism across the GPUs of a serving replica, attention data-parallel over them.

DeepSeek's production deployment of V3/R1 ("Day 6: One More Thing, DeepSeek-V3/R1 Inference System
Overview", github.com/deepseek-ai/open-infra-index, 202502OpenSourceWeek): prefill units of 4 nodes with
routed experts EP32 and MLA/shared expert DP32 (9 routed + 1 shared expert per GPU), decode units of 18
nodes with routed experts EP144 and MLA/shared expert DP144 (2 routed + 1 shared per GPU), 32 redundant
routed experts in both; dispatch in FP8, combine in bf16. A replica with ``ep > tp`` (tp = pp = 1) is such
a unit: its ``ep`` GPUs each serve their own share of a step's batch, and every MoE layer moves tokens
between all of them.

Per step and replica:

- the batch splits over the GPUs: a prefill step's prompts each to the GPU with the fewest prompt tokens
  so far (cosim.workload.inference.stepcost.split_prompts); a request decodes on one GPU for its whole
  life, the k-th request assigned to the decode replica (in request order) on GPU k mod ep
  (:func:`decode_gpus`), and its KV cache goes there, from the GPU that prefilled it;
- per MoE layer, every GPU routes its own tokens (cosim.workload.routing over the ``experts + redundant``
  expert slots, E'/ep per GPU, with the model's routing distribution and seed; by default no node
  limit, the deployment's GPU count not following the model's expert groups; with ``max_nodes`` = M > 0
  each token's slots lie on at most M servers of the unit, DeepSeek-V3's node-limited routing applied to
  the unit's servers; with hot copies, the servers of the copies a token is really sent to,
  cosim.workload.routing.route_tokens_to_copies), then DeepEP moves them
  (cosim.workload.deepep): the high-throughput kernels for prefill (one RDMA copy per destination node,
  forwarded over NVLink inside it), the low-latency kernels for decode (one copy per (token, expert) pair,
  straight to the expert's GPU), the dispatch in FP8 (h bytes + an fp32 scale per 128) or bf16, the
  combine in bf16; the SENDs carry their kernel as algo_hint (the SMs they take from compute);
- compute per GPU: attention, router and shared experts for its own tokens, the routed experts for the
  copies its routing really sent it (cosim.workload.inference.stepcost.StepCompute.routed_experts_ns). The
  shared experts run beside the dispatch; every GPU waits for its own messages of a dispatch or combine
  (its sends done and its receives arrived) before its next compute.

Routing of step s, layer l of a side is drawn from ``SeedSequence([routing_seed, side, s, l])``: the same
step (members and tokens) routes the same way in every packet-level pass of the batching fixed point.

Redundant experts (``redundant_experts`` = R) are placed one of two ways (``placement``):

- ``"extra_slots"``: the routing draws over E + R slots as if they were E + R experts (the model's
  popularity over E + R);
- ``"hot_copies"``: DeepSeek's EPLB. Tokens pick among the model's E experts; per layer the R copies go to
  the experts hottest by the routing's popularity (a Zipf order drawn from ``[routing_seed, layer]``, the
  same in every step: an expert's popularity belongs to the expert, not the step; or the declared
  ``routing_expert_load``), the slots are packed onto the GPUs by load, and an expert's tokens split evenly
  over its copies (cosim.workload.routing.hot_copy_placement, to_slots). Total copies are unchanged; the
  hottest GPU receives fewer. With ``eplb_interval_steps`` = N > 0 the copies are placed again every N
  steps of a side from the copies each expert received over the last N (:class:`Eplb`, DeepSeek's EPLB
  rebalancing from measured load); with ``routing_drift_steps`` = K > 0 the popularity itself drifts, the
  experts' popularities dealt out again every K steps of a side (a fresh Zipf order, or the load vector
  permuted), so a placement made once goes stale.

Two-batch overlap (``overlap = "two_microbatch"``, as SGLang's TBO and DeepSeek's inference system run
it): every MoE layer of a step runs as two halves per GPU, A with the first ⌈s/2⌉ of its decode
sequences (prefill: the first ⌈n/2⌉ of its n prompt tokens, a prompt across the cut split in two, its
second part attending to its first) and B with the rest. One compute stream per GPU, in program order
attn A, router A, shared A, attn B, router B, shared B, experts A, experts B, (next layer) attn A, ...;
A's dispatch flies during B's attention, B's during A's experts, A's combine during B's experts, B's
combine during the next layer's attention of A. The halves split the step's own routing (A the first
rows of each GPU's tokens, B the rest), so their dispatch and combine bytes add up exactly to the
unsplit step's. A GPU with one sequence has an empty half B (it still computes B's experts for the
copies others send it). Dense layers are not split.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.deepep import KERNEL_OF_MOE_KERNEL, KERNELS, Messages
from cosim.workload.inference.model import InferenceModel
from cosim.workload.routing import (
    RoutedCounts,
    RoutingSpec,
    expert_popularity,
    hot_copy_placement,
    route_tokens,
    route_tokens_to_copies,
    routed_counts,
    to_slots,
)
from cosim.workload.sizes import moe_token_bytes
from cosim.workload.trace import OpKind

DISPATCH_DTYPES = ("fp8", "bf16")
OVERLAPS = ("none", "two_microbatch")  #: how a step's MoE layers overlap their all-to-alls (module docstring)
PLACEMENTS = ("extra_slots", "hot_copies")  #: what redundant expert slots hold (module docstring)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpertParallel:
    """How attention data-parallel replicas move their tokens (module docstring)."""

    model: InferenceModel
    prefill_kernel: str = "high-throughput"  #: DeepEP kernel of prefill steps (deepep.KERNELS)
    decode_kernel: str = "low-latency"  #: DeepEP kernel of decode steps
    dispatch_fp8: bool = True  #: dispatch payload in FP8 (else bf16); the combine is bf16
    redundant_experts: int = 0  #: routed-expert copies beside the model's experts (EPLB's replicas)
    placement: str = "extra_slots"  #: what the redundant slots hold (PLACEMENTS)
    overlap: str = "none"  #: two-batch overlap of the MoE layers (OVERLAPS)
    #: node-limited routing over the unit's servers; 0: none (with hot copies, over the servers of the copies
    #: a token is sent to: routing.route_tokens_to_copies)
    max_nodes: int = 0
    #: hot copies re-placed every this many steps of a side from the copies each expert received in the last
    #: that many (EPLB's periodic rebalancing, :class:`Eplb`); 0: placed once from the declared popularity
    eplb_interval_steps: int = 0
    #: the router's popularity drifts: every this many steps of a side the experts' popularities are dealt out
    #: again (the Zipf order re-drawn, a load vector permuted); 0: fixed (placement "hot_copies" only)
    routing_drift_steps: int = 0

    def __post_init__(self) -> None:
        for field in ("prefill_kernel", "decode_kernel"):
            if getattr(self, field) not in KERNELS:
                raise CosimInputError(f"workload.{field.replace('kernel', 'moe_kernel')}",
                                      f"unknown DeepEP kernel {getattr(self, field)!r}",
                                      f"choose among {', '.join(KERNEL_OF_MOE_KERNEL)}")
        r = self.redundant_experts
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise CosimInputError("workload.redundant_experts", f"must be an integer >= 0, got {r!r}")
        for field, choices in (("placement", PLACEMENTS), ("overlap", OVERLAPS)):
            if getattr(self, field) not in choices:
                name = "expert_placement" if field == "placement" else "moe_overlap"
                raise CosimInputError(f"workload.{name}", f"unknown value {getattr(self, field)!r}",
                                      f"choose among {', '.join(choices)}")
        n = self.max_nodes
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise CosimInputError("workload.node_limited_routing", f"node limit must be an integer >= 0, got {n!r}")
        for field in ("eplb_interval_steps", "routing_drift_steps"):
            n = getattr(self, field)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise CosimInputError(f"workload.{field}", f"must be an integer >= 0, got {n!r}")
            if n and self.placement != "hot_copies":
                raise CosimInputError(f"workload.{field}", "needs expert_placement = \"hot_copies\" (extra slots "
                                      "draw their popularity afresh every step)",
                                      f"set expert_placement = \"hot_copies\", or {field} = 0")

    @property
    def expert_slots(self) -> int:
        """Routed-expert slots over the EP group: experts + redundant copies."""
        return self.model.spec.num_experts + self.redundant_experts

    def kernel(self, phase: str) -> str:
        """The DeepEP kernel of ``phase`` ("prefill" or "decode")."""
        return self.prefill_kernel if phase == "prefill" else self.decode_kernel

    def dispatch_token_bytes(self, model: InferenceModel) -> int:
        """Bytes of one dispatched token copy."""
        return moe_token_bytes(model.spec, fp8=self.dispatch_fp8)

    def combine_token_bytes(self, model: InferenceModel) -> int:
        """Bytes of one combined token copy (bf16)."""
        return moe_token_bytes(model.spec)

    def routing(self, phase: str, step: int, layer: int, tokens: tuple[int, ...], ep: int,
                gpus_per_node: int, placement: tuple[int, ...] | None = None) -> np.ndarray:
        """The expert slots every token of one MoE layer of one step picks: int32 (ep, max(tokens), top_k),
        of which GPU g's first ``tokens[g]`` rows are its tokens; ``placement``: the expert of each slot
        (hot copies, :class:`Eplb`), None for the one placed from the declared popularity."""
        return _routing(self, phase, step, layer, max(1, max(tokens)), ep, min(gpus_per_node, ep), placement)

    def counts(self, phase: str, step: int, layer: int, tokens: tuple[int, ...], ep: int,
               gpus_per_node: int, rows: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
               placement: tuple[int, ...] | None = None) -> RoutedCounts:
        """What each GPU sends in one MoE layer of one step, ``tokens[g]`` tokens on GPU g of ``ep``; with
        ``rows = (first, count)`` only GPU g's tokens ``first[g]`` to ``first[g] + count[g] - 1`` of that
        routing (one half of a two-batch overlap); ``placement`` as :meth:`routing`'s."""
        return _counts(self, phase, step, layer, tuple(tokens), ep, min(gpus_per_node, ep), rows, placement)

    def expert_load(self, phase: str, step: int, layer: int, tokens: tuple[int, ...], ep: int,
                    gpus_per_node: int, placement: tuple[int, ...] | None = None) -> np.ndarray:
        """int64 (E,): token copies each of the model's experts receives in one MoE layer of one step (placement
        "hot_copies": what EPLB observes, whatever copy serves them; ``placement`` as :meth:`routing`'s, which
        a node limit makes matter)."""
        slots = self.routing(phase, step, layer, tokens, ep, gpus_per_node, placement)
        slot_expert = _placement(self, layer, ep, min(gpus_per_node, ep)) if placement is None \
            else np.asarray(placement, np.int64)
        experts = slot_expert[slots]
        valid = np.arange(experts.shape[1])[None, :] < np.asarray(tokens, np.int64)[:, None]
        return np.bincount(experts[valid].ravel(), minlength=self.model.spec.num_experts).astype(np.int64)


def side_step(step: int) -> int:
    """The index among its side's steps of ``step`` (prefill s as s, decode s as -1 - s)."""
    return step if step >= 0 else -1 - step


class Eplb:
    """EPLB's periodic rebalancing over one build of a serving trace (``eplb_interval_steps`` = N > 0): the
    steps of a side fall in periods of N (by their index among the side's steps); per (side, MoE layer) the
    hot copies of period p > 0 are placed (routing.hot_copy_placement) from the token copies each expert
    received in period p - 1, as DeepSeek's EPLB re-places its redundant experts from the load it measured
    over the last window; period 0 keeps the placement from the declared popularity. A period whose window
    saw no step keeps the placement before it. Steps must be handed in with :meth:`observe` in the order the
    trace is built (start order)."""

    def __init__(self, ep_spec: ExpertParallel):
        self.spec = ep_spec
        self._observed: dict[tuple[str, int, int], np.ndarray] = {}  # (side, layer, period) -> copies per expert
        self._placed: dict[tuple[str, int, int], tuple[int, ...] | None] = {}

    def placement(self, phase: str, step: int, layer: int, ep: int,
                  gpus_per_node: int = 0) -> tuple[int, ...] | None:
        """The expert of each slot in ``layer`` at ``step`` of side ``phase`` (None: the first placement);
        ``gpus_per_node``: EP ranks per server, which a node limit spreads each expert's copies over."""
        n = self.spec.eplb_interval_steps
        if not n:
            return None
        period = side_step(step) // n
        for p in range(period + 1):  # the periods before, in order: each may lean on the one before it
            key = (phase, layer, p)
            if key in self._placed:
                continue
            load = self._observed.get((phase, layer, p - 1))
            if p == 0 or load is None or not load.any():
                self._placed[key] = self._placed.get((phase, layer, p - 1))
            else:
                spread = min(gpus_per_node, ep) if self.spec.max_nodes else 0
                self._placed[key] = tuple(hot_copy_placement(load, self.spec.redundant_experts, ep, spread).tolist())
        return self._placed[(phase, layer, period)]

    def observe(self, phase: str, step: int, layer: int, tokens: tuple[int, ...], ep: int,
                gpus_per_node: int) -> None:
        """Add one MoE layer of one step's routed copies per expert to its period's window."""
        if not self.spec.eplb_interval_steps:
            return
        key = (phase, layer, side_step(step) // self.spec.eplb_interval_steps)
        load = self.spec.expert_load(phase, step, layer, tokens, ep, gpus_per_node,
                                     self.placement(phase, step, layer, ep, gpus_per_node))
        self._observed[key] = self._observed.get(key, 0) + load


def _step_seed(ep_spec: ExpertParallel, phase: str, step: int, layer: int) -> int:
    m = ep_spec.model.spec
    return int(np.random.SeedSequence([m.routing_seed, 0 if phase == "prefill" else 1, step + (1 << 20),
                                       layer]).generate_state(1)[0])


@functools.lru_cache(maxsize=1 << 10)
def _routing(ep_spec: ExpertParallel, phase: str, step: int, layer: int, tokens_per_rank: int, ep: int,
             gpus_per_node: int, placement: tuple[int, ...] | None = None) -> np.ndarray:
    m = ep_spec.model.spec
    if ep_spec.placement == "extra_slots":
        spec = RoutingSpec(distribution=m.routing_distribution, zipf_exponent=m.routing_zipf_exponent,
                           expert_load=m.routing_expert_load, max_nodes=ep_spec.max_nodes,
                           seed=_step_seed(ep_spec, phase, step, layer))
        return route_tokens(spec, tokens_per_rank=tokens_per_rank, ep=ep, num_experts=ep_spec.expert_slots,
                            top_k=m.top_k, gpus_per_node=gpus_per_node)
    slots = _placement(ep_spec, layer, ep, gpus_per_node) if placement is None else np.asarray(placement, np.int64)
    if ep_spec.max_nodes:  # the node limit counts the servers of the copies a token is sent to
        epoch = side_step(step) // ep_spec.routing_drift_steps if ep_spec.routing_drift_steps else 0
        spec = dataclasses.replace(_hot_copy_routing(ep_spec, layer, _step_seed(ep_spec, phase, step, layer), epoch),
                                   max_nodes=ep_spec.max_nodes)
        return route_tokens_to_copies(spec, tokens_per_rank=tokens_per_rank, ep=ep, slot_expert=slots,
                                      top_k=m.top_k, gpus_per_node=gpus_per_node)
    experts = _expert_routing(ep_spec, phase, step, layer, tokens_per_rank, ep, gpus_per_node)
    return to_slots(experts, slots)


@functools.lru_cache(maxsize=1 << 10)
def _expert_routing(ep_spec: ExpertParallel, phase: str, step: int, layer: int, tokens_per_rank: int, ep: int,
                    gpus_per_node: int) -> np.ndarray:
    """Placement "hot_copies": the model's experts every token picks (before they map to copies)."""
    m = ep_spec.model.spec
    epoch = side_step(step) // ep_spec.routing_drift_steps if ep_spec.routing_drift_steps else 0
    spec = _hot_copy_routing(ep_spec, layer, _step_seed(ep_spec, phase, step, layer), epoch)
    return route_tokens(spec, tokens_per_rank=tokens_per_rank, ep=ep, num_experts=m.num_experts,
                        top_k=m.top_k, gpus_per_node=gpus_per_node)


def _hot_copy_routing(ep_spec: ExpertParallel, layer: int, seed: int, epoch: int = 0) -> RoutingSpec:
    """The routing of placement "hot_copies": the step's draws, the layer's popularity (module docstring) in
    drift epoch ``epoch`` (``routing_drift_steps``): epoch 0 the layer's own; a later one the Zipf order
    drawn again, or the load vector permuted, from ``[routing_seed, 2 or 3, layer, epoch]``."""
    m = ep_spec.model.spec
    popularity = int(np.random.SeedSequence([m.routing_seed, 2, layer] + ([epoch] if epoch else []))
                     .generate_state(1)[0])
    load = m.routing_expert_load
    if epoch and m.routing_distribution == "vector":
        order = np.random.default_rng([m.routing_seed, 3, layer, epoch]).permutation(len(load))
        load = tuple(np.asarray(load, np.float64)[order].tolist())
    return RoutingSpec(distribution=m.routing_distribution, zipf_exponent=m.routing_zipf_exponent,
                       expert_load=load, max_nodes=0, seed=seed, popularity_seed=popularity)


@functools.lru_cache(maxsize=1 << 8)
def _placement(ep_spec: ExpertParallel, layer: int, ep: int, gpus_per_node: int) -> np.ndarray:
    """The expert each slot of ``layer`` holds under placement "hot_copies" (spread over the nodes under a
    node limit)."""
    m = ep_spec.model.spec
    p = expert_popularity(_hot_copy_routing(ep_spec, layer, 0), m.num_experts)
    return hot_copy_placement(p, ep_spec.redundant_experts, ep, gpus_per_node if ep_spec.max_nodes else 0)


@functools.lru_cache(maxsize=1 << 12)
def _counts(ep_spec: ExpertParallel, phase: str, step: int, layer: int, tokens: tuple[int, ...], ep: int,
            gpus_per_node: int, rows: tuple[tuple[int, ...], tuple[int, ...]] | None,
            placement: tuple[int, ...] | None) -> RoutedCounts:
    experts = ep_spec.routing(phase, step, layer, tokens, ep, gpus_per_node, placement)
    if rows is None:
        return routed_counts(experts, num_experts=ep_spec.expert_slots, gpus_per_node=gpus_per_node,
                             tokens_of_rank=np.asarray(tokens, np.int64))
    first, count = (np.asarray(x, np.int64) for x in rows)
    take = np.minimum(first[:, None] + np.arange(max(1, int(count.max())))[None, :], experts.shape[1] - 1)
    return routed_counts(np.take_along_axis(experts, take[:, :, None], axis=1), num_experts=ep_spec.expert_slots,
                         gpus_per_node=gpus_per_node, tokens_of_rank=count)


def decode_gpus(decode_replica: np.ndarray, gpus: int) -> np.ndarray:
    """int64 per request: the GPU of its decode replica that decodes it (module docstring)."""
    replica = np.asarray(decode_replica, np.int64)
    out = np.zeros(replica.size, np.int64)
    for d in np.unique(replica):
        mine = np.flatnonzero(replica == d)
        out[mine] = np.arange(mine.size) % gpus
    return out


def emit_messages(ops, ranks: list[int], msg: Messages, after: list[int], label: str, *, hint: int, layer: int,
                  step: int, ep_phase: int) -> list[list[int]]:
    """Add the SEND/RECV pairs of ``msg`` (EP ranks as indices into ``ranks``) to the step trace being built:
    a first-hop SEND after its sender's op ``after[src]``, a second-hop SEND (an NVLink forward, or the
    reduced RDMA message of a combine) also after the RECVs of the messages it carries. Returns per EP rank
    the ops of its own it must see done (its SENDs and RECVs)."""
    n = msg.src.size
    recv_of = np.full(n, -1, np.int64)
    parents: dict[int, list[int]] = {}
    for child, parent in zip(msg.dep_child.tolist(), msg.dep_parent.tolist()):
        parents.setdefault(child, []).append(parent)
    mine: list[list[int]] = [[] for _ in ranks]
    order = np.concatenate([np.flatnonzero(~msg.second_hop), np.flatnonzero(msg.second_hop)])
    for i in order.tolist():
        src, dst = int(msg.src[i]), int(msg.dst[i])
        deps = [after[src], *(int(recv_of[p]) for p in parents.get(i, ()))]
        name = f"{label}_forward" if msg.second_hop[i] else label
        s = ops.add(ranks[src], OpKind.SEND, deps, name, nbytes=int(msg.bytes[i]), peer=ranks[dst], layer=layer,
                    step=step, algo_hint=hint, ep_phase=ep_phase)
        ops.cols["match"][s] = s
        r = ops.add(ranks[dst], OpKind.RECV, [], name, nbytes=int(msg.bytes[i]), peer=ranks[src], match=s,
                    layer=layer, step=step, algo_hint=hint, ep_phase=ep_phase)
        recv_of[i] = r
        mine[src].append(s)
        mine[dst].append(r)
    return mine
