"""The step schedule of a disaggregated service: which requests run in which prefill and decode step, when.

Rules (:mod:`.batching` runs them with a linear step cost and no measured corrections):

- Prefill: a replica free at time f takes the first waiting request at t = max(f, its arrival) and every
  further one arrived by t while the batch stays within ``prefill_token_budget`` prompt tokens (a longer
  prompt runs alone); the replica free first goes first (ties: lower index). The step lasts its compute
  (``prefill_compute_ns(prompts)``) plus ``prefill_extra_ns(replica, members)``: the communication a
  packet-level run measured for that batch (an estimate for a batch it did not run; 0 at first).
- Decode replica: chosen for each request when its prefill step starts (a layer-by-layer transfer streams
  there from the first layer on): ``round_robin``; ``least_loaded`` (fewest sequences running, waiting or
  on their way); ``network_aware`` (fewest KV-cache bytes in flight towards the replica: requests assigned
  to it whose prefill started and whose cache has not arrived, by the current estimates; ties go to the
  least loaded). Ties go to the lower replica.
- The cache arrives ``kv_delay_ns[q]`` after the prefill step ends (an estimate from the link rate at
  first, then what the packet-level run measured). Decode replicas run steps back to back while they hold
  sequences; a step admits waiting sequences at its start up to ``max_decode_batch``, makes one token of
  each running one and lasts ``decode_compute_ns(contexts)`` + ``decode_extra_ns(replica, members,
  contexts)``.

Everything is deterministic; :meth:`ServingSchedule.decisions` is what the packet-level run depends on (who
runs in which step), the fixed point the iteration of :mod:`cosim.kinds.inference` looks for.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.inference.requests import Requests

POLICIES = ("round_robin", "least_loaded", "network_aware")


@dataclass(frozen=True, slots=True, eq=False)
class Steps:
    """Steps of one kind in start order: replica, start/end (ns), index on its replica, members (CSR of
    request ids; decode: every sequence of the step, newly admitted ones first) and their context tokens."""

    replica: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    index: np.ndarray
    ptr: np.ndarray
    members: np.ndarray
    context: np.ndarray

    @property
    def n(self) -> int:
        """Number of steps."""
        return int(self.replica.size)

    def of(self, s: int) -> np.ndarray:
        """Request ids of step ``s``."""
        return self.members[self.ptr[s]:self.ptr[s + 1]]


@dataclass(frozen=True, slots=True, eq=False)
class ServingSchedule:
    """The prefill and decode steps and, per request: its prefill step, decode replica, the estimated time
    its KV cache is on the decode replica, and its first and last decode step (-1: none, one output token)."""

    prefill: Steps
    decode: Steps
    prefill_step: np.ndarray
    decode_replica: np.ndarray
    kv_ready_ns: np.ndarray
    first_decode_step: np.ndarray
    last_decode_step: np.ndarray

    def decisions(self) -> tuple[bytes, ...]:
        """What the step DAG is built from: step replicas and members, decode replicas (as bytes)."""
        return tuple(np.ascontiguousarray(a).tobytes() for a in (
            self.prefill.replica, self.prefill.ptr, self.prefill.members, self.decode_replica,
            self.decode.replica, self.decode.ptr, self.decode.members))


def _steps(rows: list[tuple[int, float, float, int, list[int], list[int]]]) -> Steps:
    rows.sort(key=lambda r: (r[1], r[0]))
    counts = np.array([len(r[4]) for r in rows], np.int64)
    return Steps(replica=np.array([r[0] for r in rows], np.int64),
                 start_ns=np.array([r[1] for r in rows], np.float64),
                 end_ns=np.array([r[2] for r in rows], np.float64), index=np.array([r[3] for r in rows], np.int64),
                 ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                 members=np.array([q for r in rows for q in r[4]], np.int64),
                 context=np.array([c for r in rows for c in r[5]], np.int64))


def serve(req: Requests, *, prefill_replicas: int, decode_replicas: int, prefill_token_budget: int,
          max_decode_batch: int, policy: str, prefill_compute_ns: Callable[[np.ndarray], float],
          decode_compute_ns: Callable[[np.ndarray], float], kv_delay_ns: np.ndarray, kv_bytes: np.ndarray,
          prefill_extra_ns: Callable[[int, tuple[int, ...]], float] | None = None,
          decode_extra_ns: Callable[[int, tuple[int, ...], tuple[int, ...]], float] | None = None) -> ServingSchedule:
    """The step schedule of ``req`` (rules in the module docstring)."""
    if policy not in POLICIES:
        raise CosimInputError("workload.policy", f"unknown decode policy {policy!r}",
                              f"choose among {', '.join(POLICIES)}")
    p_extra = prefill_extra_ns or (lambda replica, members: 0.0)
    d_extra = decode_extra_ns or (lambda replica, members, context: 0.0)
    n = req.n
    arr, prompt, out = req.arrival_ns, req.prompt_tokens, req.output_tokens

    # --- prefill, first come first served over the replicas ---
    free = [0.0] * prefill_replicas
    count = [0] * prefill_replicas
    p_rows = []
    nxt = 0
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
        end = t + float(prefill_compute_ns(prompt[batch])) + float(p_extra(r, tuple(batch)))
        p_rows.append((r, t, end, count[r], batch, [int(prompt[q]) for q in batch]))
        free[r], count[r] = end, count[r] + 1
    prefill = _steps(p_rows)
    p_step = np.empty(n, np.int64)
    for s in range(prefill.n):
        p_step[prefill.of(s)] = s
    p_start, p_end = prefill.start_ns[p_step], prefill.end_ns[p_step]
    ready = p_end + np.asarray(kv_delay_ns, np.float64)

    # --- decode: events in time order (assign at prefill start, cache ready, step start) ---
    ASSIGN, READY, STEP = 0, 1, 2
    events: list[tuple[float, int, int, int]] = [(float(p_start[q]), ASSIGN, q, q) for q in range(n)]
    events += [(float(ready[q]), READY, q, q) for q in range(n)]
    heapq.heapify(events)
    d_rep = np.full(n, -1, np.int64)
    waiting: list[list[int]] = [[] for _ in range(decode_replicas)]
    running: list[dict[int, int]] = [{} for _ in range(decode_replicas)]
    coming = [0] * decode_replicas  # assigned, cache not arrived
    inflight: list[set[int]] = [set() for _ in range(decode_replicas)]
    busy = [False] * decode_replicas
    free_at = [0.0] * decode_replicas  # end of the replica's last step
    steps_done = [0] * decode_replicas
    first = np.full(n, -1, np.int64)
    last = np.full(n, -1, np.int64)
    d_rows = []
    rr = 0
    kv_bytes = np.asarray(kv_bytes, np.int64)
    load = lambda k: len(running[k]) + len(waiting[k]) + coming[k]  # noqa: E731
    while events:
        t, what, a, _ = heapq.heappop(events)
        if what == ASSIGN:
            if policy == "round_robin":
                d, rr = rr, (rr + 1) % decode_replicas
            elif policy == "least_loaded":
                d = min(range(decode_replicas), key=lambda k: (load(k), k))
            else:
                d = min(range(decode_replicas),
                        key=lambda k: (sum(int(kv_bytes[q]) for q in inflight[k]), load(k), k))
            d_rep[a] = d
            coming[d] += 1
            inflight[d].add(a)
        elif what == READY:
            d = int(d_rep[a])
            coming[d] -= 1
            inflight[d].discard(a)
            if out[a] <= 1:
                continue  # the first token was the last: nothing to decode
            waiting[d].append(a)
            if not busy[d]:
                busy[d] = True
                heapq.heappush(events, (max(t, free_at[d]), STEP, d, -1))
        else:
            d = a
            run = running[d]
            new = []
            while waiting[d] and len(run) < max_decode_batch:
                q = waiting[d].pop(0)
                run[q] = int(out[q]) - 1
                new.append(q)
            members = new + [q for q in run if q not in new]
            context = [int(prompt[q] + out[q] - run[q]) for q in members]
            k = steps_done[d]
            end = t + float(decode_compute_ns(np.array(context, np.int64))) \
                + float(d_extra(d, tuple(members), tuple(context)))
            d_rows.append((d, t, end, k, members, context))
            steps_done[d] += 1
            free_at[d] = end
            for q in members:
                run[q] -= 1
                if run[q] == 0:
                    del run[q]
            if run or waiting[d]:
                heapq.heappush(events, (end, STEP, d, -1))
            else:
                busy[d] = False
    decode = _steps(d_rows)
    for s in range(decode.n):
        m = decode.of(s)
        first[m[first[m] < 0]] = s
        last[m] = s
    return ServingSchedule(prefill=prefill, decode=decode, prefill_step=p_step, decode_replica=d_rep,
                           kv_ready_ns=ready, first_decode_step=first, last_decode_step=last)
