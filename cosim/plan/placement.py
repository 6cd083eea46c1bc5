"""Where the workloads of a shared fabric run: servers (and their NICs) given to each job by a policy.

A job asks for whole servers (a training job for ``ceil(n_ranks / gpus_per_server)``, a background workload
for the servers it names) or names its NICs itself (``hosts``: fabric host ids, rank ``r`` on
``hosts[r]``). Explicit hosts are reserved first, in workload order; then every policy job takes whole
servers among those with no NIC taken yet, in workload order:

- ``packed``: as few leaves as possible. The leaf with the fewest free servers that still holds the whole
  job (best fit), else whole leaves with the most free servers first; the job's servers in ascending order.
- ``spread``: across leaves, round robin: the job's server k sits under the k-th leaf (mod the leaves with
  free servers), so neighbouring ranks' servers sit under different leaves.
- ``random``: servers drawn uniformly without replacement with the job's seed (numpy's default generator).
- ``fragmented``: evenly spaced over the free servers (every F/S-th of the F free ones for S servers), as
  a busy scheduler leaves a job: a few servers under each leaf, with other tenants' holes between them.

A job's server k gets its ranks ``k·gps .. k·gps + gps − 1`` on its NICs in GPU order, so ranks that the
lowering put on one server (NVLink between them) share a physical server, and no NIC is given twice
(:func:`check_disjoint`). Leaves are the switch each server's first NIC is wired to (rail-optimized and
single-switch fabrics: one switch for every server's first NIC, so ``spread`` is server order there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError


@dataclass(frozen=True, slots=True, kw_only=True)
class Demand:
    """What one job asks for: ``servers`` whole servers by ``policy``, or exactly the NICs ``hosts``.

    ``where`` names the Experiment field errors point at (``workloads[1].hosts``); ``seed`` drives
    ``random``; ``rank_servers`` (explicit hosts of a training job) is the number of GPUs per server of
    its lowering, whose server groups must map onto physical servers (0: no such constraint)."""

    name: str
    where: str
    servers: int = 0
    policy: str = "packed"
    hosts: tuple[int, ...] | None = None
    seed: int = 0
    rank_servers: int = 0


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ServerMap:
    """The servers of a fabric: their NICs (host ids in GPU order) and the leaf each hangs from."""

    nics: np.ndarray  # int64 [n_servers, gpus_per_server], host node id of each server's NIC g (-1: none)
    leaf: np.ndarray  # int64 [n_servers], switch of the server's first NIC

    @property
    def n_servers(self) -> int:
        """Number of servers."""
        return int(self.leaf.size)


def server_map(fabric, gpus_per_server: int) -> ServerMap:
    """The ServerMap of ``fabric`` (servers by ``host_server``, NIC g by ``host_gpu``)."""
    hosts = fabric.host_ids.astype(np.int64)
    server = fabric.host_server.astype(np.int64)
    gpu = fabric.host_gpu.astype(np.int64)
    n = int(server.max()) + 1 if server.size else 0
    nics = np.full((n, gpus_per_server), -1, np.int64)
    ok = gpu < gpus_per_server
    nics[server[ok], gpu[ok]] = hosts[ok]
    # the switch of each host: the far end of its only link
    peer = np.full(fabric.n_nodes, -1, np.int64)
    a, b = fabric.link_a.astype(np.int64), fabric.link_b.astype(np.int64)
    peer[a] = np.where(peer[a] < 0, b, peer[a])
    peer[b] = np.where(peer[b] < 0, a, peer[b])
    first = nics[:, 0] if n else np.zeros(0, np.int64)
    return ServerMap(nics=nics, leaf=np.where(first >= 0, peer[np.maximum(first, 0)], -1))


def place(servers: ServerMap, demands: Sequence[Demand]) -> list[np.ndarray]:
    """The host node ids of every demand (int64, a job's NIC for each of its slots: rank r on [r]).

    A policy demand gets all NICs of its servers, server by server (``servers × gps`` ids); an explicit
    one its ``hosts``. Raises CosimInputError for a NIC given twice, an unknown host, or too few free
    servers."""
    n_hosts_known = set(int(x) for x in servers.nics[servers.nics >= 0].ravel())
    taken = np.zeros(servers.n_servers, bool)
    out: list[np.ndarray | None] = [None] * len(demands)
    owner: dict[int, str] = {}
    server_of = {int(h): s for s, row in enumerate(servers.nics) for h in row if h >= 0}
    for i, d in enumerate(demands):
        if d.hosts is None:
            continue
        hosts = np.asarray(d.hosts, np.int64)
        for h in hosts.tolist():
            if h not in n_hosts_known:
                raise CosimInputError(d.where, f"host {h} is not a NIC of the fabric (hosts are 0.."
                                      f"{max(n_hosts_known)})", "raise network.hosts or pick other hosts")
            if h in owner:
                raise CosimInputError(d.where, f"host {h} is already used by workload {owner[h]!r}",
                                      "give every GPU (NIC) to one workload only")
            owner[h] = d.name
            taken[server_of[h]] = True
        if d.rank_servers:
            _check_server_groups(d, hosts, server_of)
        out[i] = hosts
    for i, d in enumerate(demands):
        if d.hosts is not None:
            continue
        free = np.flatnonzero(~taken)
        if d.servers > free.size:
            raise CosimInputError(d.where, f"workload {d.name!r} needs {d.servers} servers, {free.size} of the "
                                  f"fabric's {servers.n_servers} are free", "raise network.hosts, or give "
                                  "the workloads fewer ranks or servers")
        chosen = _POLICIES[d.policy](free, servers.leaf[free], d)
        taken[chosen] = True
        out[i] = servers.nics[chosen].ravel()
    return [np.asarray(x, np.int64) for x in out]


def _check_server_groups(d: Demand, hosts: np.ndarray, server_of: dict[int, int]) -> None:
    """Ranks the lowering put on one server (r // gps equal) must share a physical server, and ranks of
    different ones must not (their transfers are NVLink copies or fabric flows accordingly)."""
    phys = np.array([server_of[int(h)] for h in hosts], np.int64)
    group = np.arange(hosts.size) // d.rank_servers
    for g in np.unique(group):
        members = np.unique(phys[group == g])
        if members.size > 1:
            r = int(np.flatnonzero(group == g)[0])
            raise CosimInputError(d.where, f"ranks {r}..{r + d.rank_servers - 1} of workload {d.name!r} share "
                                  f"a server in its trace ({d.rank_servers} GPUs per server) but hosts put them "
                                  f"on servers {', '.join(map(str, members.tolist()))}",
                                  "list the NICs of one server together for every group of ranks")
    first = {}
    for g, s in zip(group.tolist(), phys.tolist()):
        if first.setdefault(s, g) != g:
            raise CosimInputError(d.where, f"hosts put ranks of two servers of workload {d.name!r} on "
                                  f"server {s}", "give each group of ranks its own server")


def _packed(free: np.ndarray, leaf: np.ndarray, d: Demand) -> np.ndarray:
    leaves, counts = np.unique(leaf, return_counts=True)
    fits = counts >= d.servers
    if fits.any():
        best = leaves[fits][np.argmin(counts[fits])]  # best fit; np.argmin takes the lowest leaf on ties
        return free[leaf == best][: d.servers]
    order = np.lexsort((leaves, -counts))
    chosen = np.concatenate([free[leaf == leaves[k]] for k in order])[: d.servers]
    return np.sort(chosen)


def _spread(free: np.ndarray, leaf: np.ndarray, d: Demand) -> np.ndarray:
    # position of each free server within its leaf; round robin = by position, then by leaf
    order = np.lexsort((free, leaf))
    f, lf = free[order], leaf[order]
    start = np.concatenate([[0], np.flatnonzero(lf[1:] != lf[:-1]) + 1]) if lf.size else np.zeros(0, np.int64)
    pos = np.arange(lf.size) - np.repeat(start, np.diff(np.concatenate([start, [lf.size]])))
    return f[np.lexsort((lf, pos))][: d.servers]


def _random(free: np.ndarray, leaf: np.ndarray, d: Demand) -> np.ndarray:
    return np.random.default_rng(d.seed).choice(free, size=d.servers, replace=False)


def _fragmented(free: np.ndarray, leaf: np.ndarray, d: Demand) -> np.ndarray:
    return free[(np.arange(d.servers, dtype=np.int64) * free.size) // max(d.servers, 1)]


_POLICIES = {"packed": _packed, "spread": _spread, "random": _random, "fragmented": _fragmented}


def check_disjoint(placed: Sequence[np.ndarray], names: Sequence[str]) -> None:
    """Raise CosimInputError if any NIC appears twice among ``placed`` (the invariant :func:`place` keeps)."""
    owner: dict[int, str] = {}
    for hosts, name in zip(placed, names):
        for h in np.asarray(hosts).tolist():
            if h in owner:
                raise CosimInputError("workloads", f"host {h} is given to {owner[h]!r} and {name!r}")
            owner[h] = name
