"""Continuous batching of a disaggregated service, analytic pass: which requests run in which step.

Prefill replicas take waiting requests first come first served, as many as fit a token budget of
``prefill_token_budget`` prompt tokens per step (a longer prompt runs alone); requests go to the prefill
replica free first. A finished prefill hands its request (its KV cache) to a decode replica chosen by
``policy`` (``round_robin``, or ``least_loaded``: fewest sequences running or waiting). Decode replicas run
steps back to back while they hold sequences; every step makes one token of each running sequence and
admits waiting ones up to ``max_decode_batch`` sequences at its start (continuous batching: a sequence
leaves the step that made its last token, a new one joins the next step).

Step durations come from a :class:`StepCost` (linear in the tokens and the cached context, in ns); the
packet-level run is meant to replace them by measured ones with the batch composition decided here
(the design note of docs/models/inference.md). Everything is deterministic: ties go to the lower replica.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.inference.requests import Requests

POLICIES = ("round_robin", "least_loaded")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """Duration of one step in ns: ``fixed_ns`` + per prompt token (prefill) or per sequence and per
    cached context token (decode)."""

    prefill_fixed_ns: float = 2e6
    prefill_per_token_ns: float = 20e3
    decode_fixed_ns: float = 10e6
    decode_per_seq_ns: float = 50e3
    decode_per_context_token_ns: float = 5.0
    kv_transfer_per_token_ns: float = 0.0  #: hand-off time per prompt token from prefill to decode

    def prefill_ns(self, tokens: int) -> float:
        return self.prefill_fixed_ns + self.prefill_per_token_ns * tokens

    def decode_ns(self, seqs: int, context_tokens: int) -> float:
        return self.decode_fixed_ns + self.decode_per_seq_ns * seqs + self.decode_per_context_token_ns * context_tokens


@dataclass(frozen=True, slots=True, eq=False)
class Schedule:
    """Per request (arrays in request order, ns): prefill start/finish and replica, decode replica, decode
    start (its first decode step), finish (its last token; the prefill's finish for one output token)."""

    prefill_replica: np.ndarray
    prefill_start_ns: np.ndarray
    prefill_finish_ns: np.ndarray
    decode_replica: np.ndarray
    decode_start_ns: np.ndarray
    finish_ns: np.ndarray
    n_prefill_steps: int
    n_decode_steps: int


def schedule(req: Requests, *, prefill_replicas: int, decode_replicas: int, prefill_token_budget: int = 8192,
             max_decode_batch: int = 64, policy: str = "round_robin", cost: StepCost = StepCost()) -> Schedule:
    """Run the batching of ``req`` (module docstring) and return every request's times."""
    if policy not in POLICIES:
        raise CosimInputError("workload.policy", f"unknown decode policy {policy!r}", f"choose among {', '.join(POLICIES)}")
    for name, value in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas),
                        ("prefill_token_budget", prefill_token_budget), ("max_decode_batch", max_decode_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CosimInputError(f"workload.{name}", f"must be an integer >= 1, got {value!r}")
    n = req.n
    arr, prompt, out = req.arrival_ns, req.prompt_tokens, req.output_tokens
    p_rep = np.full(n, -1, np.int64)
    p_start = np.full(n, np.nan)
    p_finish = np.full(n, np.nan)
    d_rep = np.full(n, -1, np.int64)
    d_start = np.full(n, np.nan)
    finish = np.full(n, np.nan)

    # --- prefill: replicas free at free[r]; FCFS over the arrival queue ---
    free = [0.0] * prefill_replicas
    nxt = 0
    n_prefill = 0
    while nxt < n:
        r = min(range(prefill_replicas), key=lambda k: (free[k], k))
        t = max(free[r], float(arr[nxt]))
        batch = [nxt]
        tokens = int(prompt[nxt])
        nxt += 1
        while nxt < n and arr[nxt] <= t and tokens + prompt[nxt] <= prefill_token_budget:
            tokens += int(prompt[nxt])
            batch.append(nxt)
            nxt += 1
        end = t + cost.prefill_ns(tokens)
        p_rep[batch], p_start[batch], p_finish[batch] = r, t, end
        free[r] = end
        n_prefill += 1

    # --- decode: hand-offs in prefill-finish order, steps per replica, replicas advanced in time order ---
    ready = p_finish + cost.kv_transfer_per_token_ns * prompt
    decoding = np.flatnonzero(out > 1)
    finish[out <= 1] = p_finish[out <= 1]
    order = decoding[np.lexsort((decoding, ready[decoding]))]
    waiting: list[list[int]] = [[] for _ in range(decode_replicas)]
    running: list[dict[int, int]] = [{} for _ in range(decode_replicas)]  # request -> tokens left
    clock = [0.0] * decode_replicas
    rr = 0
    n_decode = 0
    heap: list[tuple[float, int]] = []  # (next step start, replica) of busy replicas
    i = 0
    while i < order.size or heap:
        t_next = heap[0][0] if heap else np.inf
        if i < order.size and ready[order[i]] <= t_next:  # a hand-off comes first
            q = int(order[i])
            i += 1
            if policy == "round_robin":
                d, rr = rr, (rr + 1) % decode_replicas
            else:
                d = min(range(decode_replicas), key=lambda k: (len(running[k]) + len(waiting[k]), k))
            d_rep[q] = d
            waiting[d].append(q)
            if not running[d] and all(rep != d for _, rep in heap):
                heapq.heappush(heap, (max(clock[d], float(ready[q])), d))
            continue
        t, d = heapq.heappop(heap)
        run = running[d]
        while waiting[d] and len(run) < max_decode_batch:
            q = waiting[d].pop(0)
            run[q] = int(out[q]) - 1
            d_start[q] = t
        context = sum(int(prompt[q] + out[q] - left) for q, left in run.items())
        end = t + cost.decode_ns(len(run), context)
        n_decode += 1
        for q in list(run):
            run[q] -= 1
            if run[q] == 0:
                finish[q] = end
                del run[q]
        clock[d] = end
        if run or waiting[d]:
            heapq.heappush(heap, (end, d))
    return Schedule(p_rep, p_start, p_finish, d_rep, d_start, finish, n_prefill, n_decode)


def in_flight_time_integral_ns(arrival_ns: np.ndarray, finish_ns: np.ndarray) -> float:
    """∫ N(t) dt of the number of requests in the system (arrived, not finished), by an event sweep."""
    t = np.concatenate([arrival_ns, finish_ns])
    step = np.concatenate([np.ones(arrival_ns.size), -np.ones(finish_ns.size)])
    o = np.lexsort((-step, t))
    t, level = t[o], np.cumsum(step[o])
    return float(np.sum(level[:-1] * np.diff(t)))
