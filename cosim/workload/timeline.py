"""Compute-only timeline of a trace: when each op would run if communication took no time.

This is the lower bound the network can only stretch: compute ops take their ``duration_ns``, a collective
completes as soon as all its members are ready, a RECV as soon as it and its SEND are ready. It gives the
iteration time with an infinitely fast network, the pipeline bubble, and — since it walks the global graph
of deps, send→recv matches and collective joins — a proof that the trace cannot deadlock.
"""

from __future__ import annotations

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.trace import OpKind, Trace


def compute_only_timeline(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time of every op with zero-time communication: (start_ns, end_ns), int64 arrays of
    length n_ops.

    ``trace`` is structurally valid (matching sends/recvs and complete collectives are assumed); ops that
    can never run (a dependency cycle or a deadlock) are a CosimInputError.
    """
    n = trace.n_ops
    kind = trace.kind.tolist()
    dur = trace.duration_ns.tolist()
    counts = np.diff(trace.dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    order = np.argsort(trace.dep_idx, kind="stable")
    children = owner[order].tolist()
    child_ptr = np.concatenate([[0], np.cumsum(np.bincount(trace.dep_idx, minlength=n))]).tolist()
    remaining = counts.tolist()

    recv_of_send: dict[int, int] = {}
    sends = np.flatnonzero(trace.kind == OpKind.SEND)
    recvs = np.flatnonzero(trace.kind == OpKind.RECV)
    send_by_id = dict(zip(trace.match_id[sends].tolist(), sends.tolist()))
    for r, mid in zip(recvs.tolist(), trace.match_id[recvs].tolist()):
        s = send_by_id.get(mid)
        if s is None:
            raise CosimInputError("trace.match_id", f"recv op {r} has no matching send (match_id {mid})")
        recv_of_send[s] = r
        remaining[r] += 1  # a recv also waits for its send

    colls = np.flatnonzero(trace.kind == OpKind.COLLECTIVE)
    members: dict[int, list[int]] = {}
    for i, cid in zip(colls.tolist(), trace.coll_id[colls].tolist()):
        members.setdefault(cid, []).append(i)
    coll_id = trace.coll_id.tolist()
    pending = {cid: len(ops) for cid, ops in members.items()}
    coll_ready: dict[int, int] = {}

    ready = [0] * n
    start = [0] * n
    end = [0] * n
    done = 0
    stack = [i for i in range(n) if remaining[i] == 0]
    stack.reverse()

    def finish(i: int, t: int) -> None:
        nonlocal done
        end[i] = t
        done += 1
        for c in children[child_ptr[i]:child_ptr[i + 1]]:
            if t > ready[c]:
                ready[c] = t
            remaining[c] -= 1
            if remaining[c] == 0:
                stack.append(c)

    compute, send, collective = int(OpKind.COMPUTE), int(OpKind.SEND), int(OpKind.COLLECTIVE)
    while stack:
        i = stack.pop()
        t = ready[i]
        k = kind[i]
        if k == compute:
            start[i] = t
            finish(i, t + dur[i])
        elif k == collective:
            cid = coll_id[i]
            coll_ready[cid] = max(coll_ready.get(cid, 0), t)
            pending[cid] -= 1
            if pending[cid] == 0:
                tc = coll_ready[cid]
                for j in members[cid]:
                    start[j] = tc
                    finish(j, tc)
        else:
            start[i] = t
            finish(i, t)
            if k == send and i in recv_of_send:
                r = recv_of_send[i]
                if t > ready[r]:
                    ready[r] = t
                remaining[r] -= 1
                if remaining[r] == 0:
                    stack.append(r)
    if done < n:
        stuck = [i for i in range(n) if remaining[i] > 0 or (kind[i] == collective and pending[coll_id[i]] > 0)]
        i = stuck[0]
        raise CosimInputError(
            "trace", f"dependency cycle or deadlock: {n - done} of {n} ops can never run, e.g. op {i} "
            f"(rank {int(trace.rank[i])}, {trace.label_of(i)})")
    return np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
