"""The step schedule of :func:`serving.serve` with a linear step cost and no measured corrections: quick
what-ifs of a disaggregated service without the compute model or the network.

The batching rules are those of :mod:`.serving` (first come first served prefill under a token budget,
continuous decode batching, the decode placement policies); only the step durations differ: a
:class:`StepCost` linear in the tokens and the cached context (ns), and a KV hand-off of
``kv_transfer_per_token_ns`` per prompt token. :func:`schedule` returns the times per request
(:class:`Schedule`). ``network_aware`` counts the prompt tokens in flight towards a replica (KV bytes are
proportional to them for one model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.inference.requests import Requests
from cosim.workload.inference.serving import POLICIES, serve


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
    start (its first decode step; NaN for one output token), finish (its last token; the prefill's finish
    for one output token)."""

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
    """The serving schedule of ``req`` under ``cost`` (module docstring), as times per request."""
    if policy not in POLICIES:
        raise CosimInputError("workload.policy", f"unknown decode policy {policy!r}",
                              f"choose among {', '.join(POLICIES)}")
    for name, value in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas),
                        ("prefill_token_budget", prefill_token_budget), ("max_decode_batch", max_decode_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CosimInputError(f"workload.{name}", f"must be an integer >= 1, got {value!r}")
    s = serve(req, prefill_replicas=prefill_replicas, decode_replicas=decode_replicas,
              prefill_token_budget=prefill_token_budget, max_decode_batch=max_decode_batch, policy=policy,
              prefill_compute_ns=lambda prompts: cost.prefill_ns(int(prompts.sum())),
              decode_compute_ns=lambda contexts: cost.decode_ns(contexts.size, int(contexts.sum())),
              kv_delay_ns=cost.kv_transfer_per_token_ns * req.prompt_tokens, kv_bytes=req.prompt_tokens)
    step = s.prefill_step
    prefill_finish = s.prefill.end_ns[step]
    decodes = s.first_decode_step >= 0
    decode_start = np.full(req.n, np.nan)
    decode_start[decodes] = s.decode.start_ns[s.first_decode_step[decodes]]
    finish = prefill_finish.copy()
    finish[decodes] = s.decode.end_ns[s.last_decode_step[decodes]]
    return Schedule(prefill_replica=s.prefill.replica[step], prefill_start_ns=s.prefill.start_ns[step],
                    prefill_finish_ns=prefill_finish, decode_replica=s.decode_replica, decode_start_ns=decode_start,
                    finish_ns=finish, n_prefill_steps=s.prefill.n, n_decode_steps=s.decode.n)


def in_flight_time_integral_ns(arrival_ns: np.ndarray, finish_ns: np.ndarray) -> float:
    """∫ N(t) dt of the number of requests in the system (arrived, not finished), by an event sweep."""
    t = np.concatenate([arrival_ns, finish_ns])
    step = np.concatenate([np.ones(arrival_ns.size), -np.ones(finish_ns.size)])
    o = np.lexsort((-step, t))
    t, level = t[o], np.cumsum(step[o])
    return float(np.sum(level[:-1] * np.diff(t)))
