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

    A longest-path sweep in topological levels, all ops of a level at once: each collective call is one
    extra node that waits for the dependencies of all its members, and its members wait for it alone; a
    RECV also waits for its SEND. Only compute ops take time.
    """
    n = trace.n_ops
    kind = trace.kind
    counts = np.diff(trace.dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    parent = np.asarray(trace.dep_idx, np.int64)

    sends = np.flatnonzero(kind == OpKind.SEND)
    recvs = np.flatnonzero(kind == OpKind.RECV)
    send_ids = trace.match_id[sends].astype(np.int64)
    order = np.argsort(send_ids, kind="stable")
    recv_ids = trace.match_id[recvs].astype(np.int64)
    at = np.minimum(np.searchsorted(send_ids[order], recv_ids), max(sends.size - 1, 0))
    matched = (send_ids[order][at] == recv_ids) if sends.size else np.zeros(recvs.size, bool)
    if not matched.all():
        r = int(recvs[np.flatnonzero(~matched)[0]])
        raise CosimInputError("trace.match_id", f"recv op {r} has no matching send (match_id {int(trace.match_id[r])})")
    send_of_recv = sends[order][at]

    colls = np.flatnonzero(kind == OpKind.COLLECTIVE)
    calls, call_of = np.unique(trace.coll_id[colls], return_inverse=True)
    node_of_op = np.arange(n, dtype=np.int64)  # where an op's dependencies point: a member's call node
    node_of_op[colls] = n + call_of.ravel()
    n_nodes = n + calls.size
    src = np.concatenate([parent, send_of_recv, n + call_of.ravel()])
    dst = np.concatenate([node_of_op[owner], recvs, colls])
    dur = np.zeros(n_nodes, np.int64)
    compute = kind == OpKind.COMPUTE
    dur[:n][compute] = trace.duration_ns[compute]

    edge_order = np.argsort(src, kind="stable")
    child = dst[edge_order]
    child_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n_nodes))])
    remaining = np.bincount(dst, minlength=n_nodes)
    ready = np.zeros(n_nodes, np.int64)
    end = np.full(n_nodes, -1, np.int64)
    frontier = np.flatnonzero(remaining == 0)
    while frontier.size:
        end[frontier] = ready[frontier] + dur[frontier]
        c = child_ptr[frontier + 1] - child_ptr[frontier]
        pos = np.repeat(child_ptr[frontier] - np.cumsum(c) + c, c) + np.arange(int(c.sum()))
        kids = child[pos]
        np.maximum.at(ready, kids, np.repeat(end[frontier], c))
        np.subtract.at(remaining, kids, 1)
        kids = np.unique(kids)
        frontier = kids[remaining[kids] == 0]
    stuck = np.flatnonzero(end[:n] < 0)
    if stuck.size:
        i = int(stuck[0])
        raise CosimInputError(
            "trace", f"dependency cycle or deadlock: {stuck.size} of {n} ops can never run, e.g. op {i} "
            f"(rank {int(trace.rank[i])}, {trace.label_of(i)})")
    return ready[:n].copy(), end[:n].copy()
