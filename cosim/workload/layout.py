"""Rank placement and communication groups.

Each rank has coordinates (tp, cp, pp, dp). ``ParallelismSpec.order`` lists the axes fastest-varying first:
with the default ``tp-cp-pp-dp``, rank = tp + t·(cp + c·(pp + p·dp)), so a TP group is t consecutive ranks
(inside one host when t ≤ GPUs per host), then CP, then pipeline stages, then data-parallel replicas.

A host is one NVLink domain (``hardware.gpus_per_host``: an 8-GPU server, or a 72-GPU NVL72 rack); rank r
sits in domain r // gpus_per_host. An EP group (ep data-parallel neighbours, t·c·p ranks apart) therefore
spans t·c·p·ep consecutive ranks, and lies inside one domain whenever that span divides the domain: with 72
GPUs, TP8×EP9, TP4×EP18 or TP1×EP72, but not TP8×EP8 (64 ranks: every ninth EP group straddles two racks).
:func:`domains_spanned` counts, per group, the domains it touches.

Groups (only those with more than one member are created), ordered by kind then by lowest member:

- TP: ranks differing only in tp.      - CP: only in cp.      - PP: only in pp.
- DP: ranks differing in cp and dp (Megatron's data-parallel group *with* context parallelism: they hold
  the same parameters, so gradients are reduced over all of them).
- EP: the ``ep`` ranks with the same tp, cp, pp and the same ``dp // ep``.
- EDP: expert data parallel, the ranks with the same tp, pp and ``dp % ep`` (any cp, any ``dp // ep``).
- EP and EDP when EP is folded over TP and CP (``expert_tp = 1``, cosim.workload.parallelism): with the stage-local
  index q = tp + t·(cp + c·dp), EP = same pp and ``q // ep``, EDP = same pp and ``q % ep``.
- EMBD: first and last pipeline stage with the same tp, cp, dp (tied embeddings with pp > 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from cosim.workload.parallelism import AXES, ParallelismSpec
from cosim.workload.trace import GroupKind


class PeerKind(IntEnum):
    """Point-to-point neighbour of a rank."""
    PP_NEXT = 0  #: next pipeline stage (wraps around: interleaved schedules send from the last to the first)
    PP_PREV = 1
    CP_NEXT = 2  #: next rank of the context-parallel ring
    CP_PREV = 3


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Layout:
    """Rank coordinates, groups (CSR) and per-rank lookup tables for one ParallelismSpec."""

    n_ranks: int
    coords: np.ndarray  #: int64 (n_ranks, 4): tp, cp, pp, dp coordinate of each rank
    group_ptr: np.ndarray  #: int64 (n_groups+1)
    group_ranks: np.ndarray  #: int32, members of each group, increasing
    group_kind: np.ndarray  #: uint8 (n_groups) GroupKind
    group_of: np.ndarray  #: int32 (n_ranks, len(GroupKind)): the rank's group of each kind, -1 if none
    peer_of: np.ndarray  #: int32 (n_ranks, len(PeerKind)): neighbour rank, -1 if none

    @property
    def stage(self) -> np.ndarray:
        """Pipeline stage (pp coordinate) of each rank."""
        return self.coords[:, AXES.index("pp")]

    def group_size(self, kind: GroupKind) -> int:
        """Members per group of ``kind`` (1 if the kind has no groups)."""
        sel = np.flatnonzero(self.group_kind == kind)
        return int(self.group_ptr[sel[0] + 1] - self.group_ptr[sel[0]]) if sel.size else 1


def make_layout(par: ParallelismSpec, tied_embeddings: bool = False) -> Layout:
    """The Layout of ``par``: ranks placed in its ``order`` and their groups, with EMBD groups (first and
    last stage) when ``tied_embeddings`` and pp > 1."""
    degree = {"tp": par.tp, "cp": par.cp, "pp": par.pp, "dp": par.dp}
    order = par.order.split("-")
    n = par.world_size
    ranks = np.arange(n, dtype=np.int64)
    coords = np.zeros((n, 4), dtype=np.int64)
    stride = 1
    strides = {}
    for axis in order:  # fastest-varying first
        strides[axis] = stride
        coords[:, AXES.index(axis)] = (ranks // stride) % degree[axis]
        stride *= degree[axis]
    tp, cp, pp, dp = (coords[:, i] for i in range(4))

    def rank_of(c: np.ndarray) -> np.ndarray:
        return sum(c[:, AXES.index(a)] * strides[a] for a in AXES)

    keys: list[tuple[GroupKind, np.ndarray, np.ndarray]] = []  # (kind, member mask, key per rank)
    every = np.ones(n, dtype=bool)
    big = n + 1  # mixing radix for composite keys
    keys.append((GroupKind.TP, every, (cp * big + pp) * big + dp))
    keys.append((GroupKind.CP, every, (tp * big + pp) * big + dp))
    keys.append((GroupKind.PP, every, (tp * big + cp) * big + dp))
    keys.append((GroupKind.DP, every, tp * big + pp))
    if par.folded:
        q = tp + par.tp * (cp + par.cp * dp)  # stage-local index, tp fastest
        keys.append((GroupKind.EP, every, pp * big + q // par.ep))
        keys.append((GroupKind.EDP, every, pp * big + q % par.ep))
    else:
        keys.append((GroupKind.EP, every, ((tp * big + cp) * big + pp) * big + dp // par.ep))
        keys.append((GroupKind.EDP, every, (tp * big + pp) * big + dp % par.ep))
    if tied_embeddings and par.pp > 1:
        keys.append((GroupKind.EMBD, (pp == 0) | (pp == par.pp - 1), (tp * big + cp) * big + dp))

    ptr = [0]
    members: list[np.ndarray] = []
    kinds: list[int] = []
    group_of = np.full((n, len(GroupKind)), -1, dtype=np.int32)
    for kind, mask, key in keys:
        sel = ranks[mask]
        uniq, inverse = np.unique(key[mask], return_inverse=True)
        groups = [sel[inverse == u] for u in range(uniq.size)]
        groups.sort(key=lambda g: int(g[0]))
        for g in groups:
            if g.size < 2:
                continue
            group_of[g, kind] = len(kinds)
            kinds.append(int(kind))
            members.append(g)
            ptr.append(ptr[-1] + g.size)

    peer_of = np.full((n, len(PeerKind)), -1, dtype=np.int32)
    for kind, axis, step in ((PeerKind.PP_NEXT, "pp", 1), (PeerKind.PP_PREV, "pp", -1),
                             (PeerKind.CP_NEXT, "cp", 1), (PeerKind.CP_PREV, "cp", -1)):
        if degree[axis] < 2:
            continue
        c = coords.copy()
        c[:, AXES.index(axis)] = (c[:, AXES.index(axis)] + step) % degree[axis]
        peer_of[:, kind] = rank_of(c)

    return Layout(n_ranks=n, coords=coords, group_ptr=np.asarray(ptr, dtype=np.int64),
                  group_ranks=(np.concatenate(members) if members else np.zeros(0)).astype(np.int32),
                  group_kind=np.asarray(kinds, dtype=np.uint8), group_of=group_of, peer_of=peer_of)


def domains_spanned(group_ptr: np.ndarray, group_ranks: np.ndarray, gpus_per_domain: int) -> np.ndarray:
    """int64 [n_groups]: the NVLink domains (``gpus_per_domain`` consecutive ranks each) every group of the
    CSR ``group_ptr`` / ``group_ranks`` touches; 1 when its collectives never leave NVLink."""
    ptr = np.asarray(group_ptr, np.int64)
    domain = np.asarray(group_ranks, np.int64) // int(gpus_per_domain)
    owner = np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr))
    # members are increasing, so a group's domains are too: count where the domain changes
    new = np.ones(domain.size, bool)
    new[1:] = (domain[1:] != domain[:-1]) | (owner[1:] != owner[:-1])
    return np.bincount(owner[new], minlength=ptr.size - 1).astype(np.int64)
