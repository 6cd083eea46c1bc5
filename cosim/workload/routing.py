"""Token routing of a mixture-of-experts layer over an expert-parallel group, and what it makes each rank send.

The EP group has ``ep`` ranks on consecutive GPUs, ``gpus_per_node`` of them per node (the last node may
hold fewer); the E experts are split contiguously, E/ep per rank, so expert e lives on EP rank
``e // (E/ep)`` and on node ``rank // gpus_per_node``.

Routing (:func:`route_tokens`): every token of every rank picks ``top_k`` distinct experts. Expert e is
drawn with popularity p_e (:func:`expert_popularity`):

- ``uniform``: p_e = 1/E (a perfectly balanced router, as the auxiliary-loss-free balancing aims for);
- ``zipf``: p_e ∝ 1/rank_e^a with exponent a = ``zipf_exponent`` and the ranks 1..E given to the experts in
  an order drawn from the seed (so the hot experts are not all on rank 0);
- ``vector``: p_e ∝ ``expert_load[e]``, a measured per-expert load.

A token's top-k is a sample without replacement proportional to p (Gumbel top-k: the k largest of
log p_e + Gumbel noise; the noisy scores play the router's affinities). Node-limited routing
(``max_nodes`` = M > 0, DeepSeek-V3 §2.1.2): each token first keeps the M nodes with the highest sum of
their best ⌊k/M⌋ (at least 1) scores, then takes its top-k among the experts of those nodes. Everything is
drawn from ``np.random.default_rng(seed)``, rank by rank: same spec and seed, same routing, bit for bit.

What a rank sends (:func:`routed_counts`), for source rank s and destination rank d / node b:

- ``expert_copies[s, d]``: (token, expert) pairs with the expert on d, k per token in all (no dedup);
- ``rank_tokens[s, d]``: tokens with at least one expert on d (a token goes to a rank once);
- ``node_tokens[s, b]``: tokens with at least one expert on node b (a token goes to a node once: DeepEP's
  high-throughput kernels send it over RDMA once per node and forward it inside the node over NVLink).

Redundant experts as hot copies (:func:`hot_copy_placement`, :func:`to_slots`; DeepSeek's EPLB, "Expert
Parallelism Load Balancer", github.com/deepseek-ai/EPLB): R extra slots each hold a copy of an expert,
given one at a time to the expert with the highest load per copy (p_e / c_e); the E + R slots are then
packed onto the ep ranks, (E + R)/ep each, heaviest copy first onto the least-loaded rank with room that
holds no copy of that expert yet. A token's copy for expert e goes to one of e's c_e copies: the i-th
(token, e) pair a source rank sends (token order) to copy (i + s) mod c_e, so every copy gets
n_{s,e}/c_e of each source's tokens, within one. Node-limited routing over hot copies
(:func:`route_tokens_to_copies`) counts an expert as on every node holding one of its copies, and sends
each pair to a copy on the token's chosen nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError

DISTRIBUTIONS = ("uniform", "zipf", "vector")


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingSpec:
    """How tokens are routed to experts (module docstring). Counts are dimensionless."""

    distribution: str = "uniform"  #: "uniform", "zipf" or "vector"
    zipf_exponent: float = 1.0  #: a of p ∝ 1/rank^a (distribution "zipf"), ≥ 0; 0 is uniform
    expert_load: tuple[float, ...] = ()  #: relative load of each expert (distribution "vector"), ≥ 0
    max_nodes: int = 0  #: node-limited routing: a token's experts on at most this many nodes; 0 = any
    seed: int = 0  #: seed of the routing draws
    #: seed of the Zipf ranks' order (which experts are hot); None: ``seed``
    popularity_seed: int | None = None

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise CosimInputError("routing.distribution", f"unknown distribution {self.distribution!r}",
                                  f"choose among {', '.join(DISTRIBUTIONS)}")
        a = self.zipf_exponent
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a <= 10:
            raise CosimInputError("routing.zipf_exponent", f"must be a number in [0, 10], got {a!r}",
                                  "use 0 for uniform, about 1 for a strong skew")
        load = tuple(self.expert_load)
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x < float("inf") for x in load):
            raise CosimInputError("routing.expert_load", "every load must be a finite number >= 0")
        object.__setattr__(self, "expert_load", tuple(float(x) for x in load))
        if self.distribution == "vector" and not load:
            raise CosimInputError("routing.expert_load", "distribution \"vector\" needs one load per expert",
                                  "give expert_load = [l_0, l_1, ...]")
        for field in ("max_nodes", "seed", "popularity_seed"):
            value = getattr(self, field)
            if field == "popularity_seed" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise CosimInputError(f"routing.{field}", f"must be an integer >= 0, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RoutedCounts:
    """Tokens each EP rank sends, from one routing (module docstring). Arrays are int64."""

    expert_copies: np.ndarray  #: (ep, ep) token copies from rank s to the experts of rank d
    rank_tokens: np.ndarray  #: (ep, ep) tokens from s with at least one expert on rank d
    node_tokens: np.ndarray  #: (ep, nodes) tokens from s with at least one expert on node b
    expert_tokens: np.ndarray  #: (E,) token copies each expert receives
    gpus_per_node: int  #: EP ranks per node

    @property
    def ep(self) -> int:
        """EP ranks."""
        return self.rank_tokens.shape[0]

    @property
    def node_of_rank(self) -> np.ndarray:
        """Node of each EP rank."""
        return np.arange(self.ep) // self.gpus_per_node


def _popularity(spec, num_experts: int, top_k: int) -> np.ndarray:
    """expert_popularity, refused in one line when fewer than ``top_k`` experts have a load."""
    p = expert_popularity(spec, num_experts)
    if np.count_nonzero(p) < top_k:
        raise CosimInputError("routing.expert_load", f"fewer than top_k={top_k} experts have a load",
                              "give at least top_k experts a positive load")
    return p


def expert_popularity(spec: RoutingSpec, num_experts: int) -> np.ndarray:
    """p_e of every expert (float64, sums to 1), module docstring."""
    if spec.distribution == "uniform":
        return np.full(num_experts, 1.0 / num_experts)
    if spec.distribution == "vector":
        load = np.asarray(spec.expert_load, np.float64)
        if load.size != num_experts:
            raise CosimInputError("routing.expert_load", f"has {load.size} loads for {num_experts} experts",
                                  f"give exactly {num_experts} values")
        if load.sum() <= 0:
            raise CosimInputError("routing.expert_load", "all loads are 0", "give some expert a positive load")
        return load / load.sum()
    seed = spec.seed if spec.popularity_seed is None else spec.popularity_seed
    rank = np.random.default_rng([seed, 1]).permutation(num_experts) + 1.0
    p = rank ** -float(spec.zipf_exponent)
    return p / p.sum()


def route_tokens(spec: RoutingSpec, *, tokens_per_rank: int, ep: int, num_experts: int, top_k: int,
                 gpus_per_node: int) -> np.ndarray:
    """The experts each token picks: int32 (ep, tokens_per_rank, top_k), distinct per token."""
    for field, value in (("tokens_per_rank", tokens_per_rank), ("ep", ep), ("num_experts", num_experts),
                         ("top_k", top_k), ("gpus_per_node", gpus_per_node)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise CosimInputError(f"routing.{field}", f"must be an integer >= 1, got {value!r}")
    if spec.max_nodes and num_experts % ep:  # only a node limit needs the experts' ranks
        raise CosimInputError("routing.ep", f"{num_experts} experts are not divisible by ep={ep}",
                              "choose ep dividing the number of experts")
    p = _popularity(spec, num_experts, top_k)
    per_rank = num_experts // ep
    node_of_expert = np.arange(num_experts) // per_rank // gpus_per_node
    n_nodes = int(node_of_expert[-1]) + 1
    limit = spec.max_nodes if 0 < spec.max_nodes < n_nodes else 0
    if limit and limit * per_rank * gpus_per_node < top_k:
        raise CosimInputError("routing.max_nodes", f"{limit} nodes hold fewer than top_k={top_k} experts",
                              "raise max_nodes")
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    rng = np.random.default_rng(spec.seed)
    out = np.empty((ep, tokens_per_rank, top_k), np.int32)
    best_per_node = max(1, top_k // limit) if limit else 1
    # one rank at a time: (tokens × E) scores stay a few MB even for 256 experts
    for r in range(ep):
        scores = log_p[None, :] + rng.gumbel(size=(tokens_per_rank, num_experts))
        if limit:
            scores = _limit_nodes(scores, node_of_expert, n_nodes, limit, best_per_node)
        top = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
        out[r] = np.sort(top, axis=1)
    return out


def _limit_nodes(scores: np.ndarray, node_of_expert: np.ndarray, n_nodes: int, limit: int,
                 best_per_node: int) -> np.ndarray:
    """``scores`` with the experts outside each token's ``limit`` best nodes set to -inf; a node's score is
    the sum of its ``best_per_node`` highest expert scores (DeepSeek-V3 node-limited routing)."""
    tokens = scores.shape[0]
    sizes = np.bincount(node_of_expert)
    if np.all(sizes == sizes[0]):
        per_node = scores.reshape(tokens, n_nodes, -1)
    else:  # a last node with fewer experts: pad it with -inf
        width = sizes.max()
        per_node = np.full((tokens, n_nodes, width), -np.inf)
        slot = np.arange(node_of_expert.size) - np.searchsorted(node_of_expert, node_of_expert)
        per_node[:, node_of_expert, slot] = scores
    k = min(best_per_node, per_node.shape[2])
    best = np.partition(per_node, per_node.shape[2] - k, axis=2)[:, :, -k:]
    with np.errstate(invalid="ignore"):
        node_score = np.nan_to_num(best.sum(axis=2), nan=-np.inf)
    keep = np.argpartition(-node_score, limit - 1, axis=1)[:, :limit]
    allowed = np.zeros((tokens, n_nodes), bool)
    np.put_along_axis(allowed, keep, True, axis=1)
    return np.where(allowed[:, node_of_expert], scores, -np.inf)


def _distinct(keys: np.ndarray) -> np.ndarray:
    """Mask of the first occurrence of each value along the last axis of sorted ``keys``."""
    first = np.ones(keys.shape, bool)
    first[..., 1:] = keys[..., 1:] != keys[..., :-1]
    return first


def routed_counts(experts: np.ndarray, *, num_experts: int, gpus_per_node: int,
                  tokens_of_rank: np.ndarray | None = None) -> RoutedCounts:
    """Token counts per source and destination of one routing (``route_tokens``'s output); with
    ``tokens_of_rank`` only the first ``tokens_of_rank[s]`` tokens of source rank s count (ranks holding
    different numbers of tokens, routed as many as the most any holds)."""
    experts = np.asarray(experts)
    ep, tokens, _ = experts.shape
    per_rank = num_experts // ep
    n_nodes = -(-ep // gpus_per_node)
    src = np.broadcast_to(np.arange(ep)[:, None, None], experts.shape)
    dst_rank = np.sort(experts // per_rank, axis=2)
    dst_node = dst_rank // gpus_per_node
    if tokens_of_rank is None:
        valid = np.ones(experts.shape, bool)
    else:
        valid = np.broadcast_to((np.arange(tokens)[None, :] < np.asarray(tokens_of_rank)[:, None])[:, :, None],
                                experts.shape)
    copies = np.bincount((src * ep + dst_rank)[valid], minlength=ep * ep).reshape(ep, ep)
    once = _distinct(dst_rank) & valid
    rank_tokens = np.bincount((src * ep + dst_rank)[once], minlength=ep * ep).reshape(ep, ep)
    once = _distinct(dst_node) & valid
    node_tokens = np.bincount((src * n_nodes + dst_node)[once], minlength=ep * n_nodes).reshape(ep, n_nodes)
    return RoutedCounts(expert_copies=copies.astype(np.int64), rank_tokens=rank_tokens.astype(np.int64),
                        node_tokens=node_tokens.astype(np.int64),
                        expert_tokens=np.bincount(experts[valid], minlength=num_experts).astype(np.int64),
                        gpus_per_node=gpus_per_node)


def hot_copy_placement(popularity: np.ndarray, redundant: int, ranks: int, gpus_per_node: int = 0) -> np.ndarray:
    """int64 (E + R,): the expert each slot holds, slots of rank g at ``g·(E+R)/ep`` onwards: R copies of the
    hottest experts by ``popularity`` (expected load per expert), packed by load (module docstring). With
    ``gpus_per_node`` > 0 (node-limited routing) a copy goes first to the nodes holding the fewest copies of
    its expert, so an expert's copies spread over the nodes: a token limited to some nodes then finds as
    many of them there as it can (EPLB's hierarchical packing does the same per node group)."""
    load = np.asarray(popularity, np.float64)
    n = load.size
    copies = np.ones(n, np.int64)
    for _ in range(int(redundant)):
        copies[int(np.argmax(load / copies))] += 1  # ties: the lower expert
    slots = n + int(redundant)
    if slots % ranks:
        raise CosimInputError("routing.ep", f"{slots} expert slots are not divisible by ep={ranks}",
                              "choose ep dividing the experts + redundant copies")
    room = slots // ranks
    expert = np.repeat(np.arange(n, dtype=np.int64), copies)
    per_copy = (load / copies)[expert]
    rank_load, filled = np.zeros(ranks), np.zeros(ranks, np.int64)
    holds = np.zeros((ranks, n), bool)
    node = np.arange(ranks) // gpus_per_node if gpus_per_node else None
    out = np.empty(slots, np.int64)
    for e in expert[np.argsort(-per_copy, kind="stable")].tolist():
        open_ = filled < room
        fresh = open_ & ~holds[:, e]
        pool = fresh if fresh.any() else open_
        if node is not None:  # the copies of e already on each rank's node: the fewest first
            on_node = np.bincount(node[holds[:, e]], minlength=int(node[-1]) + 1)[node]
            pool = pool & (on_node == on_node[pool].min())
        g = int(np.argmin(np.where(pool, rank_load, np.inf)))
        out[g * room + filled[g]] = e
        filled[g] += 1
        rank_load[g] += load[e] / copies[e]
        holds[g, e] = True
    return out


def route_tokens_to_copies(spec: RoutingSpec, *, tokens_per_rank: int, ep: int, slot_expert: np.ndarray,
                           top_k: int, gpus_per_node: int) -> np.ndarray:
    """Node-limited routing over hot copies (``spec.max_nodes`` = M > 0): the slot of the copy each token's
    top-k experts are sent to, int32 (ep, tokens_per_rank, top_k), all on at most M nodes. An expert counts
    as on a node when one of its copies (``slot_expert``, :func:`hot_copy_placement`) is there: each token
    keeps the M nodes with the highest sum of their best ⌊k/M⌋ (at least 1) scores among the experts on them
    (DeepSeek-V3's rule), takes its top-k among the experts on those nodes, and sends each to one of that
    expert's copies on them: source rank s's i-th pair for expert e (token order) to the ((i + s) mod
    c)-th of the c copies on the token's nodes, so a token's node count is that of the copies it is really
    sent to. M at or above the nodes: :func:`to_slots` of the unlimited routing."""
    slot_expert = np.asarray(slot_expert, np.int64)
    n_slots = slot_expert.size
    num_experts = int(slot_expert.max()) + 1
    if n_slots % ep:
        raise CosimInputError("routing.ep", f"{n_slots} expert slots are not divisible by ep={ep}",
                              "choose ep dividing the experts + redundant copies")
    node_of_slot = np.arange(n_slots) // (n_slots // ep) // gpus_per_node
    n_nodes = int(node_of_slot[-1]) + 1
    limit = spec.max_nodes
    unlimited = RoutingSpec(distribution=spec.distribution, zipf_exponent=spec.zipf_exponent,
                            expert_load=spec.expert_load, max_nodes=0, seed=spec.seed,
                            popularity_seed=spec.popularity_seed)
    if not 0 < limit < n_nodes:
        experts = route_tokens(unlimited, tokens_per_rank=tokens_per_rank, ep=ep, num_experts=num_experts,
                               top_k=top_k, gpus_per_node=gpus_per_node)
        return to_slots(experts, slot_expert)
    on_node = np.zeros((num_experts, n_nodes), bool)
    on_node[slot_expert, node_of_slot] = True
    if np.any(on_node.sum(axis=0) < 1) or np.sort(on_node.sum(axis=0))[::-1][:limit].sum() < top_k:
        raise CosimInputError("routing.max_nodes", f"{limit} nodes hold fewer than top_k={top_k} experts",
                              "raise max_nodes")
    p = _popularity(unlimited, num_experts, top_k)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    # copies of each expert by slot, padded with -1: (E, most copies)
    order = np.argsort(slot_expert, kind="stable")
    copies = np.bincount(slot_expert, minlength=num_experts)
    rank_in_expert = np.arange(n_slots) - np.repeat(np.cumsum(copies) - copies, copies)
    copy_slots = np.full((num_experts, int(copies.max())), -1, np.int64)
    copy_slots[slot_expert[order], rank_in_expert] = order
    best_per_node = max(1, top_k // limit)
    rng = np.random.default_rng(spec.seed)
    out = np.empty((ep, tokens_per_rank, top_k), np.int32)
    for r in range(ep):
        scores = log_p[None, :] + rng.gumbel(size=(tokens_per_rank, num_experts))
        node_score = np.empty((tokens_per_rank, n_nodes))
        for b in range(n_nodes):  # one node at a time: (tokens × experts on it) stays small
            mine = scores[:, on_node[:, b]]
            k = min(best_per_node, mine.shape[1])
            node_score[:, b] = np.partition(mine, mine.shape[1] - k, axis=1)[:, -k:].sum(axis=1)
        node_score = np.nan_to_num(node_score, nan=-np.inf)
        kept = np.zeros((tokens_per_rank, n_nodes), bool)
        np.put_along_axis(kept, np.argpartition(-node_score, limit - 1, axis=1)[:, :limit], True, axis=1)
        allowed = (kept.astype(np.int64) @ on_node.T.astype(np.int64)) > 0
        top = np.sort(np.argpartition(-np.where(allowed, scores, -np.inf), top_k - 1, axis=1)[:, :top_k], axis=1)
        # each pair to one of its expert's copies on the token's kept nodes, round robin per expert
        cand = copy_slots[top]  # (tokens, k, most copies)
        ok = (cand >= 0) & np.take_along_axis(kept[:, None, :], node_of_slot[np.maximum(cand, 0)], axis=2)
        n_ok = ok.sum(axis=2)
        flat = top.ravel()
        pos = np.argsort(flat, kind="stable")
        start = np.searchsorted(flat[pos], flat[pos], side="left")
        occurrence = np.empty(flat.size, np.int64)
        occurrence[pos] = np.arange(flat.size) - start
        pick = (occurrence.reshape(top.shape) + r) % n_ok
        nth = (np.cumsum(ok, axis=2) == (pick + 1)[:, :, None]) & ok
        out[r] = np.take_along_axis(cand, np.argmax(nth, axis=2)[:, :, None], axis=2)[:, :, 0]
    return out


def to_slots(experts: np.ndarray, slot_expert: np.ndarray) -> np.ndarray:
    """``experts`` (ep, tokens, k) of :func:`route_tokens` over E experts mapped to the slots of
    ``slot_expert`` (:func:`hot_copy_placement`): each (token, expert) pair to one of the expert's copies,
    source rank s's i-th pair for expert e (token order) to copy (i + s) mod c_e."""
    experts = np.asarray(experts, np.int64)
    ep = experts.shape[0]
    n = int(slot_expert.max()) + 1
    copies = np.bincount(slot_expert, minlength=n)
    order = np.argsort(slot_expert, kind="stable")
    first = np.concatenate([[0], np.cumsum(copies)[:-1]])
    flat = experts.reshape(ep, -1)
    key = (np.arange(ep)[:, None] * n + flat).ravel()
    pos = np.argsort(key, kind="stable")
    sorted_key = key[pos]
    start = np.searchsorted(sorted_key, sorted_key, side="left")
    occurrence = np.empty(key.size, np.int64)
    occurrence[pos] = np.arange(key.size) - start
    e = flat.ravel()
    src = np.repeat(np.arange(ep), flat.shape[1])
    copy = (occurrence + src) % copies[e]
    return order[first[e] + copy].reshape(experts.shape).astype(np.int32)
