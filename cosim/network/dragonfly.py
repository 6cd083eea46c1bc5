"""Dragonfly (Kim, Dally, Scott and Abts, ISCA 2008): groups of routers joined all-to-all inside a group by
local links, and groups joined to each other by global links.

Parameters, as in the paper: ``p`` hosts per router, ``a`` routers per group, ``h`` global links per router,
``g`` groups. Every router has ``p + (a - 1) + h`` ports; a group has ``a·h`` global ports, so at most
``a·h + 1`` groups can be joined with one global link between every pair of groups, the default. The
balanced dragonfly (``a = 2p = 2h``: global and local links each carry what the hosts inject) is what
:func:`balanced` sizes from a host count. With fewer groups some global ports stay empty.

Ids: hosts first (host ``i`` on router ``i // p``, routers filled in order), then the routers group-major
(router ``r`` of group ``G`` is node ``n_hosts + G·a + r``). Global links are wired "consecutively": group
``i``'s global port ``k`` (router ``k // h``) leads to group ``(i + k + 1) mod g``, so the link between groups
``i < j`` leaves ``i`` on port ``(j - i - 1) mod g`` and ``j`` on port ``(i - j - 1) mod g``.

Tiers: routers are tier 1 (every router has hosts); host links are tier 1, local links tier 2 and global
links tier 3, so the dry run's per-tier summary shows the local and the global links apart.

Routing (``network.dragonfly_routing``, FabricSwitch::DragonflyRouting; docs/models/dragonfly.md): minimal
(shortest paths: local, global, local), Valiant (via an intermediate group) or UGAL-L. The switches learn
each router's group from :func:`router_groups`.
"""

from __future__ import annotations

import numpy as np

from cosim.errors import CosimInputError
from cosim.network.topology import (
    HOST,
    SWITCH,
    TIER_CORE,
    TIER_HOST,
    TIER_LEAF,
    TIER_SPINE,
    Fabric,
    _check_size,
    _real,
    _whole,
)

#: routing on a dragonfly (FabricSwitch::DragonflyRouting), the first the default
DRAGONFLY_ROUTINGS = ("minimal", "valiant", "ugal")


def balanced(hosts: int, gpus_per_server: int = 1) -> dict[str, int]:
    """The smallest balanced dragonfly (``a = 2p = 2h``, ``g = a·h + 1``) with room for ``hosts`` hosts, ``p``
    a multiple of ``gpus_per_server`` (a server's NICs on one router):
    ``{"hosts_per_router": p, "routers_per_group": a, "global_links_per_router": h, "groups": g}``."""
    hosts = _whole("hosts", hosts, minimum=2)
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    p = gps
    while p * 2 * p * (2 * p * p + 1) < hosts:
        p += gps
    return {"hosts_per_router": p, "routers_per_group": 2 * p, "global_links_per_router": p,
            "groups": 2 * p * p + 1}


def dragonfly(*, hosts_per_router: int, routers_per_group: int, global_links_per_router: int,
              groups: int | None = None, hosts: int | None = None, host_link_gbps: float,
              host_link_delay_ns: float, local_link_gbps: float | None = None, global_link_gbps: float | None = None,
              local_link_delay_ns: float | None = None, global_link_delay_ns: float | None = None,
              gpus_per_server: int = 1) -> Fabric:
    """A dragonfly of ``groups`` groups (default ``a·h + 1``) of ``routers_per_group`` routers, each with
    ``hosts_per_router`` hosts and ``global_links_per_router`` global ports (the module's wiring).

    ``hosts`` (default: every router full, ``p·a·g``) fill routers in order; every router of every group is
    built. Local and global links default to the host link's rate and delay. NICs ``gpus_per_server`` at a
    time (consecutive ids, one router) form one server.
    """
    p = _whole("hosts_per_router", hosts_per_router, minimum=1)
    a = _whole("routers_per_group", routers_per_group, minimum=1)
    h = _whole("global_links_per_router", global_links_per_router, minimum=1)
    most = a * h + 1
    g = most if groups is None else _whole("groups", groups, minimum=2)
    if g > most:
        raise CosimInputError("groups", f"{g} groups need {g - 1} global ports per group, a group of {a} routers "
                              f"with {h} each has {a * h}",
                              f"use at most {most} groups or more global_links_per_router")
    full = p * a * g
    n_hosts = full if hosts is None else _whole("hosts", hosts, minimum=2)
    if n_hosts > full:
        raise CosimInputError("hosts", f"{n_hosts} hosts do not fit a dragonfly of {g} groups x {a} routers x {p} "
                              f"hosts = {full}", "raise hosts_per_router, routers_per_group or groups")
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    if p % gps:
        raise CosimInputError("gpus_per_server", f"servers of {gps} NICs do not fill routers of {p} hosts",
                              "a server's NICs must all sit on one router: make hosts_per_router a multiple")
    host_gbps = _real("host_link_gbps", host_link_gbps, positive=True)
    host_delay = _real("host_link_delay_ns", host_link_delay_ns, minimum=0.0)
    rates, delays = {}, {}
    for tier, gbps, delay in (("local", local_link_gbps, local_link_delay_ns),
                              ("global", global_link_gbps, global_link_delay_ns)):
        rates[tier] = host_gbps if gbps is None else _real(f"{tier}_link_gbps", gbps, positive=True)
        delays[tier] = host_delay if delay is None else _real(f"{tier}_link_delay_ns", delay, minimum=0.0)
    n_routers = a * g
    router0 = n_hosts
    # local links: every pair of routers of a group
    ra, rb = np.triu_indices(a, 1)
    group_base = router0 + a * np.arange(g, dtype=np.int64)[:, None]
    local_a, local_b = (group_base + ra).reshape(-1), (group_base + rb).reshape(-1)
    # global links: one per pair of groups, on the ports the module's wiring gives
    gi, gj = np.triu_indices(g, 1)
    global_a = router0 + gi * a + ((gj - gi - 1) % g) // h
    global_b = router0 + gj * a + ((gi - gj - 1) % g) // h
    n_local, n_global = local_a.size, global_a.size
    _check_size(n_hosts + n_routers, n_hosts + n_local + n_global)
    host = np.arange(n_hosts, dtype=np.int64)
    group_of, router_of = np.divmod(np.arange(n_routers), a)
    return Fabric(
        name="dragonfly",
        node_kind=np.concatenate([np.full(n_hosts, HOST, np.uint8), np.full(n_routers, SWITCH, np.uint8)]),
        node_tier=np.concatenate([np.full(n_hosts, TIER_HOST, np.uint8), np.full(n_routers, TIER_LEAF, np.uint8)]),
        link_a=np.concatenate([host, local_a, global_a]),
        link_b=np.concatenate([router0 + host // p, local_b, global_b]),
        link_rate_bps=np.concatenate([np.full(n_hosts, host_gbps * 1e9), np.full(n_local, rates["local"] * 1e9),
                                      np.full(n_global, rates["global"] * 1e9)]),
        link_delay_ns=np.concatenate([np.full(n_hosts, host_delay), np.full(n_local, delays["local"]),
                                      np.full(n_global, delays["global"])]),
        link_tier=np.concatenate([np.full(n_hosts, TIER_LEAF, np.uint8), np.full(n_local, TIER_SPINE, np.uint8),
                                  np.full(n_global, TIER_CORE, np.uint8)]),
        host_server=host // gps,
        host_gpu=host % gps,
        node_names=tuple([f"host{i}" for i in range(n_hosts)]
                         + [f"group{G}-router{r}" for G, r in zip(group_of.tolist(), router_of.tolist())]),
        params={"hosts_per_router": p, "routers_per_group": a, "global_links_per_router": h, "groups": g,
                "hosts": n_hosts, "host_link_gbps": host_gbps, "host_link_delay_ns": host_delay,
                "local_link_gbps": rates["local"], "global_link_gbps": rates["global"],
                "local_link_delay_ns": delays["local"], "global_link_delay_ns": delays["global"],
                "gpus_per_server": gps},
    )


def router_groups(fabric: Fabric) -> np.ndarray | None:
    """int32 [n_nodes]: the group of every router of a dragonfly built by :func:`dragonfly` (-1 for hosts),
    or None for any other fabric (no groups: its switches route minimally)."""
    if fabric.name != "dragonfly" or "routers_per_group" not in fabric.params:
        return None
    a, n_hosts = int(fabric.params["routers_per_group"]), fabric.n_hosts
    groups = np.full(fabric.n_nodes, -1, np.int32)
    groups[n_hosts:] = np.arange(fabric.n_nodes - n_hosts, dtype=np.int32) // a
    return groups
