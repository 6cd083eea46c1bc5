"""Semantic checks of a trace across ranks (structure is checked when a Trace is constructed).

- every SEND has exactly one RECV with its match_id, on its peer, from its rank, of the same size;
- every collective call (coll_id) has one op on each member of its group and nowhere else, all with the
  same kind, group, size and label;
- the global graph (deps, send→recv, collective joins) has no cycle, so the iteration cannot deadlock.
"""

from __future__ import annotations

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.timeline import compute_only_timeline
from cosim.workload.trace import OpKind, Trace


def check_p2p(trace: Trace) -> None:
    """Raise CosimInputError unless sends and recvs pair up one to one (peers, sizes agree)."""
    sends = np.flatnonzero(trace.kind == OpKind.SEND)
    recvs = np.flatnonzero(trace.kind == OpKind.RECV)
    if sends.size != recvs.size:
        raise CosimInputError("trace.match_id", f"{sends.size} sends but {recvs.size} recvs")
    if sends.size == 0:
        return
    s = sends[np.argsort(trace.match_id[sends], kind="stable")]
    r = recvs[np.argsort(trace.match_id[recvs], kind="stable")]
    ms, mr = trace.match_id[s], trace.match_id[r]
    if np.any(ms[1:] == ms[:-1]):
        raise CosimInputError("trace.match_id", f"match_id {int(ms[1:][ms[1:] == ms[:-1]][0])} is used by two sends")
    bad = ms != mr
    if np.any(bad):
        raise CosimInputError("trace.match_id", f"send op {int(s[bad][0])} (match_id {int(ms[bad][0])}) has no recv")
    for name, ok in (("peer", trace.peer[s] == trace.rank[r]), ("peer", trace.peer[r] == trace.rank[s]),
                     ("bytes", trace.bytes[s] == trace.bytes[r])):
        if not np.all(ok):
            i = int(s[~ok][0])
            raise CosimInputError(f"trace.{name}", f"send op {i} ({trace.label_of(i)}) and its recv disagree on {name}")


def check_collectives(trace: Trace) -> None:
    """Raise CosimInputError unless each collective call has exactly its group's members, consistently."""
    ops = np.flatnonzero(trace.kind == OpKind.COLLECTIVE)
    if ops.size == 0:
        return
    ops = ops[np.lexsort((trace.rank[ops], trace.coll_id[ops]))]
    cid = trace.coll_id[ops]
    starts = np.flatnonzero(np.concatenate([[True], cid[1:] != cid[:-1]]))
    bounds = np.append(starts, ops.size)
    first = ops[starts]
    run = np.repeat(np.arange(starts.size), np.diff(bounds))
    for name in ("group", "coll_kind", "bytes", "label"):
        col = getattr(trace, name)
        bad = col[ops] != col[first][run]
        if np.any(bad):
            i = int(ops[bad][0])
            raise CosimInputError(f"trace.{name}", f"members of collective {int(trace.coll_id[i])} "
                                  f"({trace.label_of(i)}) disagree on {name}")
    sizes = np.diff(trace.group_ptr)
    g = trace.group[first].astype(np.int64)
    wrong = np.diff(bounds) != sizes[g]
    if np.any(wrong):
        k = int(np.argmax(wrong))
        raise CosimInputError("trace.coll_id", f"collective {int(cid[starts[k]])} ({trace.label_of(int(first[k]))}) "
                              f"has {int(np.diff(bounds)[k])} members, its group {int(g[k])} has {int(sizes[g[k]])}")
    # ranks inside each call are sorted; equal count + membership (checked at construction) + no repeat = exact
    dup = (trace.rank[ops][1:] == trace.rank[ops][:-1]) & (run[1:] == run[:-1])
    if np.any(dup):
        i = int(ops[1:][dup][0])
        raise CosimInputError("trace.coll_id", f"rank {int(trace.rank[i])} appears twice in collective "
                              f"{int(trace.coll_id[i])} ({trace.label_of(i)})")


def check_trace(trace: Trace) -> None:
    """All semantic checks (module docstring); raise CosimInputError at the first violation."""
    check_p2p(trace)
    check_collectives(trace)
    compute_only_timeline(trace)
