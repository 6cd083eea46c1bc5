"""Fabric topologies as arrays: nodes (hosts and switches) and full-duplex links with rate and delay.

Pure functions from a few numbers to a :class:`Fabric`; the C++ FabricBuilder instantiates it and computes
shortest-path ECMP routes itself (BFS per destination), so a topology is only nodes and links. Node ids are
array indices; hosts come first (ids ``0..n_hosts-1``), then switches, lower tiers first.

Hosts are NICs, not servers: a server with 8 GPUs has 8 NICs and contributes 8 hosts. ``host_server`` and
``host_gpu`` say which chassis each NIC sits in and which local GPU it serves, so the workload side can place
ranks (tensor parallelism inside a server, data parallelism across) without guessing from ids.

Tiers: 0 host, 1 leaf / ToR / edge / rail switch, 2 spine / aggregation, 3 core. A link's tier is the tier of
its upper endpoint (1 for host links, 2 for leaf–spine, 3 for aggregation–core).

Oversubscription rule (:func:`leaf_spine`, :func:`rail_optimized`): a tier-1 switch with ``d`` host ports
at ``host_link_gbps`` gets uplink capacity ``U = d × host_link_gbps / oversubscription``, spread evenly over
every spine:

- ``fabric_link_gbps=None``: exactly one link per (tier-1 switch, spine), each at ``U / spines`` (rounded to
  whole bit/s, which is what ns-3's DataRate holds). The realized ratio equals the requested one.
- ``fabric_link_gbps=F``: ``m = ceil(U / (spines × F))`` parallel links per (tier-1 switch, spine), each at
  ``F``. The realized ratio ``d × host_link_gbps / (spines × m × F)`` is never above the requested one, and
  equals it whenever ``U`` is a multiple of ``spines × F``. :meth:`Fabric.oversubscription` and
  :meth:`Fabric.describe` report the realized value; ``Fabric.params`` keeps the requested one.

Parallel links between the same two switches become separate equal-cost next hops in the C++ routing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cosim.errors import CosimInputError

#: node kind codes shared with the C++ side (ns3::NodeKind)
HOST, SWITCH = 0, 1

#: tier codes (node_tier, link_tier)
TIER_HOST, TIER_LEAF, TIER_SPINE, TIER_CORE = 0, 1, 2, 3


#: the C++ routing tables store port indices as uint16
_MAX_PORTS_PER_NODE = 65535
#: node and link ids are int32 on both sides
_MAX_IDS = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Fabric:
    """A fabric: ``node_kind[i]`` is HOST or SWITCH; link ``j`` joins ``link_a[j]`` and ``link_b[j]``.

    The four placement/tier arrays are optional so that hand-built fabrics stay short; when omitted,
    ``__post_init__`` fills them (hosts tier 0, switches tier 1, links at the tier of their upper endpoint,
    every NIC its own one-GPU server). Arrays are coerced to their documented dtypes and checked for what
    the C++ builder would otherwise abort the whole process on (a host with two links, ids out of range).
    """

    name: str
    node_kind: np.ndarray  # uint8 [n_nodes], HOST or SWITCH
    link_a: np.ndarray  # int32 [n_links], node id
    link_b: np.ndarray  # int32 [n_links], node id
    link_rate_bps: np.ndarray  # float64 [n_links], bit/s, each direction
    link_delay_ns: np.ndarray  # float64 [n_links], one-way propagation delay, ns
    node_tier: np.ndarray | None = None  # uint8 [n_nodes], 0 host, 1 leaf/ToR/rail, 2 spine/agg, 3 core
    link_tier: np.ndarray | None = None  # uint8 [n_links], tier of the link's upper endpoint
    host_server: np.ndarray | None = None  # int32 [n_hosts], server (chassis) of each NIC
    host_gpu: np.ndarray | None = None  # int32 [n_hosts], local GPU/NIC index inside its server
    node_names: tuple[str, ...] | None = None  # name of every node (None: cosim.network.names derives them)
    params: Mapping[str, object] = field(default_factory=dict)  # generator inputs (JSON-able), as requested

    def __post_init__(self) -> None:
        _fill_and_check(self)

    @property
    def n_nodes(self) -> int:
        """Number of nodes (hosts and switches)."""
        return int(self.node_kind.size)

    @property
    def n_links(self) -> int:
        """Number of full-duplex links."""
        return int(self.link_a.size)

    @property
    def host_ids(self) -> np.ndarray:
        """Node ids of the hosts, ascending."""
        return np.flatnonzero(self.node_kind == HOST).astype(np.int32)

    @property
    def switch_ids(self) -> np.ndarray:
        """Node ids of the switches, ascending."""
        return np.flatnonzero(self.node_kind == SWITCH).astype(np.int32)

    @property
    def n_hosts(self) -> int:
        """Number of hosts (NICs)."""
        return int(np.count_nonzero(self.node_kind == HOST))

    @property
    def n_switches(self) -> int:
        """Number of switches."""
        return self.n_nodes - self.n_hosts

    @property
    def n_servers(self) -> int:
        """Number of distinct servers the NICs belong to."""
        return int(np.unique(self.host_server).size)

    def degree(self) -> np.ndarray:
        """Ports per node (parallel links count separately), int64 [n_nodes]."""
        return (np.bincount(self.link_a, minlength=self.n_nodes)
                + np.bincount(self.link_b, minlength=self.n_nodes))

    def marking_streams(self) -> np.ndarray:
        """int64 [n_nodes]: the random stream each switch draws its ECN marking decisions from, the
        smallest node id of its tier (-1 for hosts). Switches of one tier draw the same numbers, so two
        that see the same packets mark them alike: identical parts of a run stay identical (what
        cosim.decompose.exact folds on), and a lone switch keeps the stream of its node id."""
        tier = self.node_tier.astype(np.int64)
        switch = self.node_kind == SWITCH
        first = np.full(int(tier.max(initial=0)) + 1, self.n_nodes, np.int64)
        np.minimum.at(first, tier[switch], np.flatnonzero(switch))
        return np.where(switch, first[tier], -1)

    def tier_ids(self, tier: int) -> np.ndarray:
        """Node ids at ``tier`` (0 hosts, 1 leaves, ...), ascending."""
        return np.flatnonzero(self.node_tier == tier).astype(np.int32)

    def oversubscription(self, tier: int = TIER_LEAF) -> np.ndarray:
        """Realized oversubscription of every node at ``tier``, float64, in :meth:`tier_ids` order.

        Down capacity (links to lower tiers) over up capacity (links to higher tiers), one direction;
        nan for a node without uplinks (the top tier, or a single switch).
        """
        ids = self.tier_ids(tier)
        ta, tb = self.node_tier[self.link_a], self.node_tier[self.link_b]
        rate = self.link_rate_bps
        n = self.n_nodes
        # link seen from a: b below means down capacity for a; b above means up capacity for a
        down = (np.bincount(self.link_a, weights=np.where(tb < ta, rate, 0.0), minlength=n)
                + np.bincount(self.link_b, weights=np.where(ta < tb, rate, 0.0), minlength=n))
        up = (np.bincount(self.link_a, weights=np.where(tb > ta, rate, 0.0), minlength=n)
              + np.bincount(self.link_b, weights=np.where(ta > tb, rate, 0.0), minlength=n))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(up[ids] > 0, down[ids] / up[ids], np.nan)
        return ratio.astype(np.float64)

    def describe(self) -> dict:
        """A JSON-able description (kept with results): sizes, per-tier links and rates, oversubscription."""
        switch_tiers = np.unique(self.node_tier[self.node_kind == SWITCH])
        tiers = []
        for t in sorted({int(x) for x in switch_tiers} | {int(x) for x in np.unique(self.link_tier)}):
            links = self.link_tier == t
            ratio = self.oversubscription(t) if t > 0 else np.empty(0)
            ratio = ratio[np.isfinite(ratio)]
            tiers.append({
                "tier": t,
                "n_switches": int(np.count_nonzero((self.node_tier == t) & (self.node_kind == SWITCH))),
                "n_links": int(np.count_nonzero(links)),
                "link_rates_gbps": _unique_floats(self.link_rate_bps[links] / 1e9),
                "link_delays_ns": _unique_floats(self.link_delay_ns[links]),
                "capacity_gbps": float(self.link_rate_bps[links].sum() / 1e9),
                "oversubscription": ({"min": float(ratio.min()), "max": float(ratio.max())}
                                     if ratio.size else None),
            })
        nics_per_server = np.bincount(self.host_server) if self.host_server.size else np.empty(0, np.int64)
        return {
            "name": self.name,
            "n_nodes": self.n_nodes,
            "n_hosts": self.n_hosts,
            "n_switches": self.n_switches,
            "n_links": self.n_links,
            "n_servers": self.n_servers,
            "nics_per_server": sorted({int(x) for x in nics_per_server if x > 0}),
            "link_rates_gbps": _unique_floats(self.link_rate_bps / 1e9),
            "link_delays_ns": _unique_floats(self.link_delay_ns),
            "tiers": tiers,
            "params": dict(self.params),
        }


def _unique_floats(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.unique(values)]


def _fill_and_check(fab: Fabric) -> None:
    """Coerce dtypes, fill the optional arrays, and reject what the C++ builder cannot build."""
    put = object.__setattr__  # the dataclass is frozen; this runs once, during construction
    for name, dtype in (("node_kind", np.uint8), ("link_a", np.int32), ("link_b", np.int32),
                        ("link_rate_bps", np.float64), ("link_delay_ns", np.float64)):
        put(fab, name, np.asarray(getattr(fab, name), dtype=dtype).reshape(-1))
    kind, a, b = fab.node_kind, fab.link_a, fab.link_b
    n_nodes, n_links = kind.size, a.size
    if not np.isin(kind, (HOST, SWITCH)).all():
        raise CosimInputError("fabric.node_kind", f"codes must be {HOST} (host) or {SWITCH} (switch)")
    n_hosts = int(np.count_nonzero(kind == HOST))
    if (kind[:n_hosts] != HOST).any():
        raise CosimInputError("fabric.node_kind", "hosts must come first (ids 0..n_hosts-1), then switches")
    for name in ("link_b", "link_rate_bps", "link_delay_ns"):
        if getattr(fab, name).size != n_links:
            raise CosimInputError(f"fabric.{name}", f"has {getattr(fab, name).size} entries, link_a has {n_links}")
    if n_links and ((a < 0).any() or (b < 0).any() or (a >= n_nodes).any() or (b >= n_nodes).any()):
        raise CosimInputError("fabric.link_a", f"link endpoints must be node ids 0..{n_nodes - 1}")
    if (a == b).any():
        raise CosimInputError("fabric.link_b", f"link {int(np.flatnonzero(a == b)[0])} joins a node to itself")
    if not (np.isfinite(fab.link_rate_bps) & (fab.link_rate_bps >= 1.0)).all():
        raise CosimInputError("fabric.link_rate_bps", "every link rate must be finite and at least 1 bit/s")
    if not (np.isfinite(fab.link_delay_ns) & (fab.link_delay_ns >= 0)).all():
        raise CosimInputError("fabric.link_delay_ns", "every link delay must be finite and >= 0")
    deg = np.bincount(a, minlength=n_nodes) + np.bincount(b, minlength=n_nodes)
    bad = np.flatnonzero(deg[:n_hosts] != 1)
    if bad.size:
        raise CosimInputError("fabric.link_a", f"host {int(bad[0])} has {int(deg[bad[0]])} links, a NIC has exactly 1")
    if n_nodes and deg.max() > _MAX_PORTS_PER_NODE:
        raise CosimInputError("fabric.link_a", f"node {int(deg.argmax())} has {int(deg.max())} ports, "
                              f"the simulator supports at most {_MAX_PORTS_PER_NODE}")

    tier = fab.node_tier
    tier = np.where(kind == HOST, TIER_HOST, TIER_LEAF) if tier is None else tier
    put(fab, "node_tier", np.asarray(tier, dtype=np.uint8).reshape(-1))
    if fab.node_tier.size != n_nodes:
        raise CosimInputError("fabric.node_tier", f"has {fab.node_tier.size} entries for {n_nodes} nodes")
    if (fab.node_tier[:n_hosts] != TIER_HOST).any() or (fab.node_tier[n_hosts:] == TIER_HOST).any():
        raise CosimInputError("fabric.node_tier", "hosts are tier 0 and switches tier 1 or above")
    ltier = fab.link_tier
    ltier = np.maximum(fab.node_tier[a], fab.node_tier[b]) if ltier is None else ltier
    put(fab, "link_tier", np.asarray(ltier, dtype=np.uint8).reshape(-1))
    if fab.link_tier.size != n_links:
        raise CosimInputError("fabric.link_tier", f"has {fab.link_tier.size} entries for {n_links} links")

    server = np.arange(n_hosts) if fab.host_server is None else fab.host_server
    gpu = np.zeros(n_hosts) if fab.host_gpu is None else fab.host_gpu
    put(fab, "host_server", np.asarray(server, dtype=np.int32).reshape(-1))
    put(fab, "host_gpu", np.asarray(gpu, dtype=np.int32).reshape(-1))
    for name in ("host_server", "host_gpu"):
        arr = getattr(fab, name)
        if arr.size != n_hosts:
            raise CosimInputError(f"fabric.{name}", f"has {arr.size} entries for {n_hosts} hosts")
        if (arr < 0).any():
            raise CosimInputError(f"fabric.{name}", "must be >= 0")
    if fab.params is None:
        put(fab, "params", {})
    if fab.node_names is not None:
        names = tuple(str(x) for x in fab.node_names)
        if len(names) != n_nodes:
            raise CosimInputError("fabric.node_names", f"has {len(names)} entries for {n_nodes} nodes")
        if len(set(names)) != n_nodes:
            raise CosimInputError("fabric.node_names", "node names must be unique")
        put(fab, "node_names", names)


# --- input checks ---------------------------------------------------------------------------------------

def _whole(field: str, value, *, minimum: int) -> int:
    """``value`` as an int (integral floats like 4.0 from config files accepted), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CosimInputError(field, f"must be a whole number, got {value!r}")
    if not isinstance(value, numbers.Integral):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise CosimInputError(field, f"must be a whole number, got {value!r}", f"use {math.floor(value)} or "
                                  f"{math.ceil(value)}" if math.isfinite(value) else None)
    v = int(value)
    if v < minimum:
        raise CosimInputError(field, f"must be at least {minimum}, got {v}")
    return v


def _real(field: str, value, *, positive: bool = False, minimum: float | None = None) -> float:
    """``value`` as a finite float; positive, or at least ``minimum``, when asked."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise CosimInputError(field, f"must be a finite number, got {value!r}")
    v = float(value)
    if positive and not v > 0:
        raise CosimInputError(field, f"must be positive, got {v:g}")
    if minimum is not None and v < minimum:
        raise CosimInputError(field, f"must be >= {minimum:g}, got {v:g}")
    return v


def _check_positive(field: str, value: float) -> None:
    _real(field, value, positive=True)


def _check_size(n_nodes: int, n_links: int) -> None:
    if n_nodes > _MAX_IDS or n_links > _MAX_IDS:
        raise CosimInputError("topology", f"{n_nodes} nodes and {n_links} links do not fit int32 ids")


def _check_oversubscription(value) -> float:
    o = _real("oversubscription", value)
    if o < 1.0:
        raise CosimInputError("oversubscription", f"must be >= 1 (down:up capacity), got {o:g}",
                              "1 is non-blocking; 2 means leaf uplinks carry half the host capacity")
    return o


# --- generators -----------------------------------------------------------------------------------------

def single_switch(*, hosts: int, link_gbps: float, link_delay_ns: float) -> Fabric:
    """A star: the hosts around one switch, every link at ``link_gbps`` with ``link_delay_ns``."""
    hosts = _whole("hosts", hosts, minimum=0)
    if hosts < 2:
        raise CosimInputError("hosts", f"a fabric needs at least 2 hosts, got {hosts}")
    _check_positive("link_gbps", link_gbps)
    _real("link_delay_ns", link_delay_ns, minimum=0.0)
    switch = hosts
    return Fabric(
        name="single-switch",
        node_kind=np.array([HOST] * hosts + [SWITCH], dtype=np.uint8),
        link_a=np.arange(hosts, dtype=np.int32),
        link_b=np.full(hosts, switch, dtype=np.int32),
        link_rate_bps=np.full(hosts, link_gbps * 1e9, dtype=np.float64),
        link_delay_ns=np.full(hosts, float(link_delay_ns), dtype=np.float64),
        params={"hosts": hosts, "link_gbps": float(link_gbps), "link_delay_ns": float(link_delay_ns)},
    )


def point_to_point(*, link_gbps: float, link_delay_ns: float) -> Fabric:
    """Two hosts joined by one link (no switch): the simplest fabric, for validation."""
    _check_positive("link_gbps", link_gbps)
    _real("link_delay_ns", link_delay_ns, minimum=0.0)
    return Fabric(
        name="point-to-point",
        node_kind=np.array([HOST, HOST], dtype=np.uint8),
        link_a=np.array([0], dtype=np.int32),
        link_b=np.array([1], dtype=np.int32),
        link_rate_bps=np.array([link_gbps * 1e9], dtype=np.float64),
        link_delay_ns=np.array([float(link_delay_ns)], dtype=np.float64),
        params={"link_gbps": float(link_gbps), "link_delay_ns": float(link_delay_ns)},
    )


def _uplinks(*, down_gbps: float, spines: int, oversubscription: float,
             fabric_link_gbps: float | None) -> tuple[int, float]:
    """(parallel links per tier-1 switch and spine, rate of each in bit/s) under the module's rule."""
    up_gbps = down_gbps / oversubscription
    if fabric_link_gbps is None:
        return 1, float(np.rint(up_gbps * 1e9 / spines))
    # the small slack keeps 1600/400 = 4.000000000001 from becoming 5 links
    per_pair = max(1, math.ceil(up_gbps / (spines * fabric_link_gbps) * (1 - 1e-12)))
    return per_pair, fabric_link_gbps * 1e9


def _two_tier(*, name: str, host_lower: np.ndarray, n_lower: int, spines: int, per_pair: int,
              host_rate_bps: float, fabric_rate_bps: float, host_delay_ns: float, fabric_delay_ns: float,
              host_server: np.ndarray, host_gpu: np.ndarray, params: dict) -> Fabric:
    """Hosts on tier-1 switches (``host_lower[h]`` = index of host h's switch), each tier-1 switch joined
    to every spine by ``per_pair`` parallel links."""
    n_hosts = host_lower.size
    n_fabric = n_lower * spines * per_pair
    _check_size(n_hosts + n_lower + spines, n_hosts + n_fabric)
    lower0, spine0 = n_hosts, n_hosts + n_lower
    lower = lower0 + np.arange(n_lower, dtype=np.int32)
    spine = spine0 + np.arange(spines, dtype=np.int32)
    return Fabric(
        name=name,
        node_kind=np.concatenate([np.full(n_hosts, HOST, np.uint8), np.full(n_lower + spines, SWITCH, np.uint8)]),
        node_tier=np.concatenate([np.full(n_hosts, TIER_HOST, np.uint8), np.full(n_lower, TIER_LEAF, np.uint8),
                                  np.full(spines, TIER_SPINE, np.uint8)]),
        # host links first (host-major), then tier-1-switch-major, spine, parallel copy
        link_a=np.concatenate([np.arange(n_hosts, dtype=np.int32), np.repeat(lower, spines * per_pair)]),
        link_b=np.concatenate([(lower0 + host_lower).astype(np.int32),
                               np.tile(np.repeat(spine, per_pair), n_lower)]),
        link_rate_bps=np.concatenate([np.full(n_hosts, host_rate_bps), np.full(n_fabric, fabric_rate_bps)]),
        link_delay_ns=np.concatenate([np.full(n_hosts, host_delay_ns), np.full(n_fabric, fabric_delay_ns)]),
        link_tier=np.concatenate([np.full(n_hosts, TIER_LEAF, np.uint8), np.full(n_fabric, TIER_SPINE, np.uint8)]),
        host_server=host_server,
        host_gpu=host_gpu,
        params=params,
    )


def _two_tier_links(host_link_gbps, fabric_link_gbps, host_link_delay_ns, fabric_link_delay_ns):
    """Checked (host Gbit/s, fabric Gbit/s or None, host delay ns, fabric delay ns) of a two-tier fabric."""
    return (_real("host_link_gbps", host_link_gbps, positive=True),
            None if fabric_link_gbps is None else _real("fabric_link_gbps", fabric_link_gbps, positive=True),
            _real("host_link_delay_ns", host_link_delay_ns, minimum=0.0),
            _real("fabric_link_delay_ns", fabric_link_delay_ns, minimum=0.0))


def leaf_spine(*, hosts: int, hosts_per_leaf: int, spines: int, oversubscription: float = 1.0,
               host_link_gbps: float, fabric_link_gbps: float | None = None,
               host_link_delay_ns: float, fabric_link_delay_ns: float, gpus_per_server: int = 1) -> Fabric:
    """Two-tier Clos: ``hosts / hosts_per_leaf`` leaves, each joined to every one of ``spines`` spines.

    Leaf uplinks follow the module's oversubscription rule. ``hosts`` must fill whole leaves so every leaf
    has the same ratio. NICs ``gpus_per_server`` at a time (consecutive ids, same leaf) form one server.
    """
    hosts = _whole("hosts", hosts, minimum=2)
    per_leaf = _whole("hosts_per_leaf", hosts_per_leaf, minimum=1)
    spines = _whole("spines", spines, minimum=1)
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    o = _check_oversubscription(oversubscription)
    host_gbps, fab_gbps, host_delay, fab_delay = _two_tier_links(host_link_gbps, fabric_link_gbps,
                                                                 host_link_delay_ns, fabric_link_delay_ns)
    if hosts % per_leaf:
        lo, hi = hosts // per_leaf * per_leaf, -(-hosts // per_leaf) * per_leaf
        raise CosimInputError("hosts", f"{hosts} hosts do not fill leaves of hosts_per_leaf={per_leaf}",
                              f"use a multiple of {per_leaf}, e.g. {hi}" + (f" or {lo}" if lo >= 2 else ""))
    if per_leaf % gps:
        raise CosimInputError("gpus_per_server", f"servers of {gps} NICs do not fill leaves of "
                              f"hosts_per_leaf={per_leaf}", "a server's NICs must all sit on one leaf")
    leaves = hosts // per_leaf
    per_pair, fab_rate = _uplinks(down_gbps=per_leaf * host_gbps, spines=spines, oversubscription=o,
                                  fabric_link_gbps=fab_gbps)
    h = np.arange(hosts, dtype=np.int32)
    return _two_tier(
        name="leaf-spine", host_lower=h // per_leaf, n_lower=leaves, spines=spines, per_pair=per_pair,
        host_rate_bps=host_gbps * 1e9, fabric_rate_bps=fab_rate, host_delay_ns=host_delay,
        fabric_delay_ns=fab_delay, host_server=h // gps, host_gpu=h % gps,
        params={"hosts": hosts, "hosts_per_leaf": per_leaf, "spines": spines, "oversubscription": o,
                "host_link_gbps": host_gbps, "fabric_link_gbps": fab_gbps, "host_link_delay_ns": host_delay,
                "fabric_link_delay_ns": fab_delay, "gpus_per_server": gps, "leaves": leaves,
                "uplinks_per_spine": per_pair},
    )


def rail_optimized(*, servers: int, gpus_per_server: int = 8, spines: int, host_link_gbps: float,
                   fabric_link_gbps: float | None = None, host_link_delay_ns: float,
                   fabric_link_delay_ns: float, oversubscription: float = 1.0) -> Fabric:
    """Rail-optimized two tiers: NIC ``g`` of every server on rail switch ``g``; rails joined by spines.

    Same-index GPUs of different servers (the peers of data-parallel and pipeline traffic) are one hop
    apart through their rail switch; other pairs cross a spine. Host id ``s × gpus_per_server + g`` is
    NIC ``g`` of server ``s``. Rail uplinks follow the module's oversubscription rule with
    ``servers`` host ports per rail switch.
    """
    servers = _whole("servers", servers, minimum=1)
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    spines = _whole("spines", spines, minimum=1)
    o = _check_oversubscription(oversubscription)
    host_gbps, fab_gbps, host_delay, fab_delay = _two_tier_links(host_link_gbps, fabric_link_gbps,
                                                                 host_link_delay_ns, fabric_link_delay_ns)
    if servers * gps < 2:
        raise CosimInputError("servers", f"{servers} server of {gps} GPU is 1 host, a fabric needs at least 2")
    per_pair, fab_rate = _uplinks(down_gbps=servers * host_gbps, spines=spines, oversubscription=o,
                                  fabric_link_gbps=fab_gbps)
    h = np.arange(servers * gps, dtype=np.int32)
    return _two_tier(
        name="rail-optimized", host_lower=h % gps, n_lower=gps, spines=spines, per_pair=per_pair,
        host_rate_bps=host_gbps * 1e9, fabric_rate_bps=fab_rate, host_delay_ns=host_delay,
        fabric_delay_ns=fab_delay, host_server=h // gps, host_gpu=h % gps,
        params={"servers": servers, "gpus_per_server": gps, "spines": spines, "oversubscription": o,
                "host_link_gbps": host_gbps, "fabric_link_gbps": fab_gbps, "host_link_delay_ns": host_delay,
                "fabric_link_delay_ns": fab_delay, "rails": gps, "uplinks_per_spine": per_pair},
    )


def fat_tree(*, k: int, link_gbps: float, link_delay_ns: float, fabric_link_gbps: float | None = None,
             fabric_link_delay_ns: float | None = None, gpus_per_server: int = 1, hosts: int | None = None) -> Fabric:
    """Three-tier k-ary fat tree (Al-Fares et al., SIGCOMM 2008), full bisection with equal link rates.

    k pods of k/2 edge and k/2 aggregation switches, (k/2)² core switches, k³/4 hosts; every switch has
    k ports. Host ``h`` sits on edge ``h // (k/2)``; edge and aggregation switches are numbered pod-major;
    aggregation switch ``a`` of each pod connects to cores ``a·k/2 .. a·k/2 + k/2 - 1``. The fabric tiers
    default to the host link's rate and delay (``fabric_link_*`` set them apart, e.g. longer core cables).
    NICs ``gpus_per_server`` at a time (consecutive ids, same edge switch) form one server.

    ``hosts`` below k³/4 builds a partial fat tree: hosts fill edge switches and pods in order, and only
    the edge switches with hosts and the pods they are in are built (every core when there are two pods or
    more, none for one pod). Each edge switch keeps its k/2 uplinks, so no edge is oversubscribed.
    """
    k = _whole("k", k, minimum=2)
    if k % 2:
        raise CosimInputError("k", f"a k-ary fat tree needs an even k, got {k}",
                              f"use {k - 1} ({(k - 1) ** 3 // 4} hosts) or {k + 1} ({(k + 1) ** 3 // 4} hosts)"
                              if k > 3 else f"use {k + 1} ({(k + 1) ** 3 // 4} hosts)")
    host_gbps = _real("link_gbps", link_gbps, positive=True)
    host_delay = _real("link_delay_ns", link_delay_ns, minimum=0.0)
    fab_gbps = host_gbps if fabric_link_gbps is None else _real("fabric_link_gbps", fabric_link_gbps, positive=True)
    fab_delay = host_delay if fabric_link_delay_ns is None else _real("fabric_link_delay_ns", fabric_link_delay_ns,
                                                                      minimum=0.0)
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    half = k // 2
    if half % gps:
        raise CosimInputError("gpus_per_server", f"servers of {gps} NICs do not fill edge switches of "
                              f"k/2={half} hosts", "a server's NICs must all sit on one edge switch")
    full = k * half * half
    n_hosts = full if hosts is None else _whole("hosts", hosts, minimum=2)
    if n_hosts > full:
        raise CosimInputError("hosts", f"{n_hosts} hosts do not fit a k={k} fat tree of {full}",
                              f"use k >= {_fat_tree_k(n_hosts, gps)}")
    n_edge = -(-n_hosts // half)
    pods = -(-n_edge // half)
    n_agg, n_core = pods * half, (half * half if pods > 1 else 0)
    _check_size(n_hosts + n_edge + n_agg + n_core, 3 * full)
    edge0, agg0, core0 = n_hosts, n_hosts + n_edge, n_hosts + n_edge + n_agg
    h = np.arange(n_hosts, dtype=np.int32)
    lower = np.repeat(np.arange(n_edge, dtype=np.int32), half)  # edge index, one row per uplink
    port = np.tile(np.arange(half, dtype=np.int32), n_edge)  # uplink number 0..k/2-1
    agg = np.repeat(np.arange(n_agg if n_core else 0, dtype=np.int32), half)  # agg index, one row per uplink
    agg_port = np.tile(np.arange(half, dtype=np.int32), agg.size // half)
    link_a = np.concatenate([h, edge0 + lower, agg0 + agg])
    link_b = np.concatenate([edge0 + h // half,
                             agg0 + (lower // half) * half + port,  # edge e of pod p -> every agg of pod p
                             core0 + (agg % half) * half + agg_port])  # agg a of any pod -> cores of group a
    n_up, n_top = n_edge * half, agg.size
    return Fabric(
        name="fat-tree",
        node_kind=np.concatenate([np.full(n_hosts, HOST, np.uint8),
                                  np.full(n_edge + n_agg + n_core, SWITCH, np.uint8)]),
        node_tier=np.concatenate([np.full(n_hosts, TIER_HOST, np.uint8), np.full(n_edge, TIER_LEAF, np.uint8),
                                  np.full(n_agg, TIER_SPINE, np.uint8), np.full(n_core, TIER_CORE, np.uint8)]),
        link_a=link_a.astype(np.int32),
        link_b=link_b.astype(np.int32),
        link_rate_bps=np.concatenate([np.full(n_hosts, host_gbps * 1e9), np.full(n_up + n_top, fab_gbps * 1e9)]),
        link_delay_ns=np.concatenate([np.full(n_hosts, host_delay), np.full(n_up + n_top, fab_delay)]),
        link_tier=np.concatenate([np.full(n_hosts, TIER_LEAF, np.uint8), np.full(n_up, TIER_SPINE, np.uint8),
                                  np.full(n_top, TIER_CORE, np.uint8)]),
        host_server=h // gps,
        host_gpu=h % gps,
        params={"k": k, "link_gbps": host_gbps, "link_delay_ns": host_delay, "fabric_link_gbps": fab_gbps,
                "fabric_link_delay_ns": fab_delay, "gpus_per_server": gps, "pods": pods}
        | ({} if hosts is None else {"hosts": n_hosts}),
    )


def _fat_tree_k(hosts: int, gpus_per_server: int) -> int:
    """The smallest even k whose fat tree holds ``hosts`` with whole servers on each edge switch."""
    k = 2
    while k ** 3 // 4 < hosts or (k // 2) % gpus_per_server:
        k += 2
    return k
