"""Where a training iteration's exposed communication goes: per parallelism dimension (TP, PP, DP, EP, ...)
and per medium (NVLink inside a server, the fabric between servers), and the point-to-point sends.

Definition (summary keys ``exposed_comm_<dim>_ns``, ``exposed_comm_nvlink_ns``, ``exposed_comm_fabric_ns``,
``exposed_comm_other_ranks_ns``)
--------------------------------------------------------------------------------------------------------
The exposed communication of iteration i, ``exposed_comm_ns = max(0, time_ns − C)`` (cosim.kinds.training),
is time the busiest rank b (largest compute C) does not compute. It is split by what b waits for in its
iteration window W_i = [end of iteration i−1 (the job's start for i = 0), end of iteration i]:

1. b's ops (every iteration's: the next one may start inside W_i) cut W_i into elementary segments; the
   segments in which b computes count for nothing.
2. A segment in which ops of b's communication are in flight (an op from its ``start_ns`` to its
   ``finish_ns``) is shared equally among the distinct dimensions in flight (a TP all-reduce beside a DP
   reduce-scatter: half each), and likewise among the distinct media.
3. A segment with nothing in flight is waiting for the op b starts next (ties: communication first): a
   collective's barrier (the other members are not ready yet) or a receive's data (the pipeline bubble
   is PP's). It goes to that op's dimension and medium; to ``other_ranks`` when b starts no communication after
   it (b is done and waits for other ranks to end the iteration).
4. The segments' shares in W_i add up to b's non-computing time in W_i, I_i. They are scaled by
   exposed_i / I_i, so the dimensions (with ``other_ranks``) sum to ``exposed_comm_ns`` exactly, and so do the
   media (with ``other_ranks``). The scale is 1 when b computes exactly C inside W_i (one iteration, or
   iterations that do not overlap on b); it differs when b's compute is stretched by interference or
   spills into a neighbouring window.

Like ``exposed_comm_ns``, the summary keys are means over the iterations after the first (all of them for a
one-iteration run).

An op's medium (ops/medium) is ``fabric`` when its transfers can cross the NICs: a collective whose group
spans servers (its NVLink steps inside a server included), a send or receive between servers; ``nvlink``
when every member sits in one server; ``none`` for compute.

Point-to-point sends (``p2p_<dim>_send_{count,bytes,p50_ns,p99_ns}``): the trace's SEND ops (pipeline
stages' activations and gradients: dimension pp; context parallelism's: cp) over the same iterations; time
from the send's start (NCCL's fixed cost included) to its last byte delivered; bytes summed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim.results.collectives import GROUP_KIND_NAMES

#: ops/medium codes
MEDIUM_NONE, MEDIUM_NVLINK, MEDIUM_FABRIC = 0, 1, 2
MEDIUM_NAMES = {MEDIUM_NONE: "none", MEDIUM_NVLINK: "nvlink", MEDIUM_FABRIC: "fabric"}
#: ops/group_kind of an op without a group (compute): the trace's NO_GROUP_KIND
NO_GROUP = 255
#: trace OpKind codes this module reads (cosim.workload.trace; results stay below the workload layer)
_COMPUTE, _COLLECTIVE, _SEND, _RECV = 0, 1, 2, 3


def groups_inside_servers(group_ptr: np.ndarray, group_ranks: np.ndarray, gpus_per_server: int) -> np.ndarray:
    """bool per group (CSR ``group_ptr``/``group_ranks``): it has members, all on one server (rank r sits on
    server r // gpus_per_server)."""
    ptr = np.asarray(group_ptr, np.int64)
    server = np.asarray(group_ranks, np.int64) // gpus_per_server
    sized = np.diff(ptr) > 0
    inside = np.zeros(max(ptr.size - 1, 0), bool)
    lo = ptr[:-1][sized]  # each up to the next sized group's start: empty groups hold no member
    if lo.size:
        inside[sized] = np.maximum.reduceat(server, lo) == np.minimum.reduceat(server, lo)
    return inside


def op_media(kind: np.ndarray, rank: np.ndarray, group: np.ndarray, peer: np.ndarray, group_ptr: np.ndarray,
             group_ranks: np.ndarray, gpus_per_server: int) -> np.ndarray:
    """uint8 per trace op: MEDIUM_FABRIC if its transfers may cross servers, MEDIUM_NVLINK if they stay in
    one, MEDIUM_NONE for compute (rank r sits on server r // gpus_per_server)."""
    kind, group = np.asarray(kind), np.asarray(group, np.int64)
    out = np.zeros(kind.size, np.uint8)
    gps = max(int(gpus_per_server), 1)
    spans = ~groups_inside_servers(group_ptr, group_ranks, gps) & (np.diff(np.asarray(group_ptr, np.int64)) > 0)
    coll = (kind == _COLLECTIVE) & (group >= 0)
    out[coll] = np.where(spans[group[coll]], MEDIUM_FABRIC, MEDIUM_NVLINK)
    p2p = ((kind == _SEND) | (kind == _RECV)) & (np.asarray(peer) >= 0)
    across = np.asarray(rank, np.int64)[p2p] // gps != np.asarray(peer, np.int64)[p2p] // gps
    out[p2p] = np.where(across, MEDIUM_FABRIC, MEDIUM_NVLINK)
    return out


def idle_shares(start_ns: np.ndarray, finish_ns: np.ndarray, label: np.ndarray, n_labels: int,
                edges_ns: np.ndarray) -> np.ndarray:
    """float64 [windows, n_labels + 1]: one rank's non-computing time in each window [edges[i], edges[i+1])
    attributed to its communication labels by rules 1–3 of the module docstring, the last column
    ``other_ranks``; ``label`` is −1 for a compute op, 0..n_labels−1 for communication. Ops with a nan time are
    left out."""
    edges = np.asarray(edges_ns, np.float64)
    k = max(edges.size - 1, 0)
    out = np.zeros((k, n_labels + 1))
    s, f = np.asarray(start_ns, np.float64), np.asarray(finish_ns, np.float64)
    ok = np.isfinite(s) & np.isfinite(f)
    s, f, lab = s[ok], f[ok], np.asarray(label, np.int64)[ok]
    pts = np.unique(np.concatenate([s, f, edges]))
    if k == 0 or pts.size < 2:
        return out
    col = lab + 1  # column 0: compute
    cover = np.zeros((pts.size, n_labels + 1), np.int64)
    np.add.at(cover, (np.searchsorted(pts, s), col), 1)
    np.add.at(cover, (np.searchsorted(pts, f), col), -1)
    cover = np.cumsum(cover, axis=0)[:-1] > 0  # per segment [pts[j], pts[j+1])
    in_flight = cover[:, 1:]
    n_in = in_flight.sum(axis=1)
    share = np.zeros((pts.size - 1, n_labels + 1))
    busy = n_in > 0
    share[busy, :n_labels] = in_flight[busy] / n_in[busy, None]
    order = np.lexsort((lab < 0, s))  # by start; at one instant communication before compute
    nxt = np.searchsorted(s[order], pts[1:], side="left")
    nxt_label = np.where(nxt < s.size, lab[order][np.minimum(nxt, max(s.size - 1, 0))] if s.size else -1, -1)
    waiting = ~busy
    share[waiting & (nxt_label >= 0), nxt_label[waiting & (nxt_label >= 0)]] = 1.0
    share[waiting & (nxt_label < 0), n_labels] = 1.0
    share[cover[:, 0]] = 0.0
    window = np.searchsorted(edges, pts[:-1], side="right") - 1
    inside = (window >= 0) & (window < k)
    np.add.at(out, window[inside], share[inside] * np.diff(pts)[inside, None])
    return out


def scaled_to(raw: np.ndarray, exposed_ns: np.ndarray) -> np.ndarray:
    """``raw`` [windows, parts] scaled row by row to sum to ``exposed_ns`` (rule 4); a row without idle
    time gives its exposed time to the last part (other_ranks); nan where exposed_ns is nan."""
    exposed = np.asarray(exposed_ns, np.float64)
    idle = raw.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(idle[:, None] > 0, raw * (exposed / idle)[:, None], 0.0)
    out[idle <= 0, -1] = exposed[idle <= 0]
    out[~np.isfinite(exposed)] = np.nan
    return out


def exposure_entries(ops: Mapping[str, np.ndarray], iterations: Mapping[str, np.ndarray], busiest_rank: int,
                     job_start_ns: float = 0.0, group_kinds: np.ndarray | None = None) -> dict:
    """Summary keys ``exposed_comm_<dim>_ns`` (every dimension the run's ops have), ``exposed_comm_nvlink_ns``,
    ``exposed_comm_fabric_ns`` and ``exposed_comm_other_ranks_ns`` (module docstring); empty without the ops
    columns group_kind and medium. ``ops`` holds at least the busiest rank's rows; ``group_kinds``: those of
    every op of the run, when ``ops`` holds fewer."""
    if "group_kind" not in ops or "medium" not in ops:
        return {}
    finish = np.asarray(iterations["finish_ns"], np.float64)
    exposed = np.asarray(iterations["exposed_comm_ns"], np.float64)
    if not finish.size:
        return {}
    gk = np.asarray(ops["group_kind"], np.int64)
    every = gk if group_kinds is None else np.asarray(group_kinds)
    dims = [int(g) for g in np.unique(every) if int(g) in GROUP_KIND_NAMES]
    mine = np.asarray(ops["rank"]) == busiest_rank
    kind = np.asarray(ops["kind"])[mine]
    comm = kind != _COMPUTE
    start, stop = np.asarray(ops["start_ns"], np.float64)[mine], np.asarray(ops["finish_ns"], np.float64)[mine]
    dim_index = np.full(NO_GROUP + 1, -1, np.int64)
    dim_index[dims] = np.arange(len(dims))
    dim_label = np.where(comm, dim_index[np.clip(gk[mine], 0, NO_GROUP)], -1)
    medium_label = np.where(comm, np.asarray(ops["medium"], np.int64)[mine] - 1, -1)  # 0 nvlink, 1 fabric
    edges = np.concatenate([[float(job_start_ns)], finish])
    n_ok = int(np.argmin(np.isfinite(edges))) if not np.isfinite(edges).all() else edges.size
    by_dim = np.full((finish.size, len(dims) + 1), np.nan)
    by_medium = np.full((finish.size, 3), np.nan)
    if n_ok > 1:
        by_dim[:n_ok - 1] = scaled_to(idle_shares(start, stop, dim_label, len(dims), edges[:n_ok]),
                                      exposed[:n_ok - 1])
        by_medium[:n_ok - 1] = scaled_to(idle_shares(start, stop, medium_label, 2, edges[:n_ok]),
                                         exposed[:n_ok - 1])
    steady = slice(1, None) if finish.size > 1 else slice(None)
    mean = lambda a: float(np.mean(a[steady])) if np.isfinite(a[steady]).all() else None  # noqa: E731
    out = {f"exposed_comm_{GROUP_KIND_NAMES[g]}_ns": mean(by_dim[:, i]) for i, g in enumerate(dims)}
    out["exposed_comm_nvlink_ns"] = mean(by_medium[:, 0])
    out["exposed_comm_fabric_ns"] = mean(by_medium[:, 1])
    # the waiting with no communication of the busiest rank after it is the same in both partitions
    out["exposed_comm_other_ranks_ns"] = mean(by_dim[:, -1])
    return out


def p2p_entries(ops: Mapping[str, np.ndarray], op_bytes: np.ndarray, first_iteration: int) -> dict:
    """Summary keys ``p2p_<dim>_send_{count,bytes,p50_ns,p99_ns}`` of the SEND ops in iterations ≥
    ``first_iteration`` per dimension (``op_bytes``: each ops row's bytes); times only where some finished."""
    if "group_kind" not in ops:
        return {}
    send = (np.asarray(ops["kind"]) == _SEND) & (np.asarray(ops["iteration"]) >= first_iteration)
    gk = np.asarray(ops["group_kind"], np.int64)
    time_ns = np.asarray(ops["finish_ns"], np.float64) - np.asarray(ops["start_ns"], np.float64)
    out: dict = {}
    for g in np.unique(gk[send]):
        name = GROUP_KIND_NAMES.get(int(g))
        if name is None:
            continue
        sel = send & (gk == g)
        key = f"p2p_{name}_send"
        out[f"{key}_count"] = int(sel.sum())
        out[f"{key}_bytes"] = int(np.asarray(op_bytes, np.int64)[sel].sum())
        t = time_ns[sel]
        t = t[np.isfinite(t)]
        if t.size:
            out[f"{key}_p50_ns"] = float(np.percentile(t, 50))
            out[f"{key}_p99_ns"] = float(np.percentile(t, 99))
    return out
