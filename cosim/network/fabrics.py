"""The fabric a network spec names: one dispatch from ``network.topology`` (and the switch radix, when
given) to the generator that builds it (:mod:`cosim.network.topology`, :mod:`cosim.network.clos`) or the
file that describes it (:mod:`cosim.network.fabric_file`), and back from a stored description.

Without ``network.switch_radix`` the two-tier topologies are built as before (one switch per rail or
leaf, one link per leaf and spine carrying the leaf's share of the uplink capacity); with it, from
switches of that many ports (every uplink its own link and ECMP member). Three-tier topologies always
use a radix: the given one, or the smallest switch class that holds the hosts (:func:`clos.default_radix`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping

import numpy as np

from cosim.errors import CosimInputError
from cosim.network import clos, dragonfly, fabric_file, planes
from cosim.network.topology import (
    Fabric,
    _fat_tree_k,
    _whole,
    fat_tree,
    leaf_spine,
    rail_optimized,
    single_switch,
)

#: topology name -> its generator (the one a stored description without a radix is rebuilt with)
GENERATORS: dict[str, Callable[..., Fabric]] = {
    "single-switch": single_switch,
    "leaf-spine": leaf_spine,
    "fat-tree": fat_tree,
    "rail-optimized": rail_optimized,
    "rail-optimized-three-tier": clos.rail_clos,
    "three-tier": clos.zoned_clos,
    "dragonfly": dragonfly.dragonfly,
}
#: the generators of fabrics built from switches of a radix
RADIX_GENERATORS: dict[str, Callable[..., Fabric]] = {
    "leaf-spine": clos.zoned_clos,
    "rail-optimized": clos.rail_clos,
    "rail-optimized-three-tier": clos.rail_clos,
    "three-tier": clos.zoned_clos,
}
#: the topologies of three tiers of switches of a radix
THREE_TIER = ("rail-optimized-three-tier", "three-tier")
#: the topologies a network can name ("file": network.topology_file)
TOPOLOGIES = (*GENERATORS, "file")
#: what ``cosim list topologies`` says of the topologies whose generator builds several
DESCRIPTIONS = {
    "rail-optimized-three-tier": "Rail-optimized leaves of switch_radix ports in zones: every leaf to the "
                                 "aggregation switches of its zone, zone_oversubscription above them, cores above "
                                 "the zones.",
    "three-tier": "Three-tier Clos of switch_radix-port switches: leaves in zones, every leaf to the aggregation "
                  "switches of its zone, zone_oversubscription above them, cores above the zones.",
    "dragonfly": "Dragonfly (Kim et al. 2008): groups of hosts_per_router x routers_per_group, all-to-all inside "
                 "a group, global_links_per_router per router between groups; minimal, valiant or ugal routing.",
    "file": "Your own fabric from network.topology_file: named nodes and links (docs/fabrics.md).",
}

#: generator argument -> the Experiment field that sets it
_FIELDS = {"host_link_gbps": "network.link_gbps", "link_gbps": "network.link_gbps",
           "host_link_delay_ns": "network.link_delay_ns", "fabric_link_delay_ns": "network.link_delay_ns",
           "link_delay_ns": "network.link_delay_ns", "tiers": "network.topology",
           "groups": "network.dragonfly_groups"}
_NETWORK_FIELDS = ("hosts_per_leaf", "spines", "oversubscription", "gpus_per_server", "switch_radix",
                   "switch_port_gbps", "zone_oversubscription", "hosts_per_router", "routers_per_group",
                   "global_links_per_router")


def for_network(network, *, servers: int, gpus_per_server: int, hosts_per_leaf: int,
                fill_leaves: bool = False, hosts_field: str = "network.hosts") -> Fabric:
    """The fabric of ``network`` (a :class:`cosim.network.spec.NetworkSpec`) for ``servers`` servers of
    ``gpus_per_server`` NICs: every topology named by one dispatch.

    ``hosts_per_leaf`` is the leaf-spine leaf size in NICs (without a radix); with ``fill_leaves`` idle
    servers are added to fill the last leaf (a training run sized to its ranks), otherwise the hosts must
    fill whole leaves. A fat tree of k³/4 hosts is the full one; other counts fill pods in order. A file
    fabric must hold at least the hosts asked for. Errors name the Experiment field to change;
    ``hosts_field`` is the one that sets the number of hosts (a training run's is its trace).
    """
    try:
        return _for_network(network, servers, gpus_per_server, hosts_per_leaf, fill_leaves)
    except CosimInputError as exc:
        field = {"hosts": hosts_field, "servers": hosts_field, "k": hosts_field}.get(exc.field, exc.field)
        field = _FIELDS.get(field, field)
        if "." not in field and field in _NETWORK_FIELDS:
            field = f"network.{field}"
        if field == exc.field:
            raise
        raise CosimInputError(field, exc.problem, exc.fix) from None


def _for_network(network, servers: int, gps: int, hosts_per_leaf: int, fill_leaves: bool) -> Fabric:
    n_planes = getattr(network, "nic_planes", 1)
    if n_planes > 1:  # one plane built at the NIC port speed, then copied
        plane = dataclasses.replace(network, link_gbps=network.link_gbps / n_planes, nic_planes=1)
        base = _for_network(plane, servers, gps, hosts_per_leaf, fill_leaves)
        return planes.multi_plane(base, n_planes, nic_link_gbps=network.link_gbps)
    gps = _whole("gpus_per_server", gps, minimum=1)
    servers = _whole("servers", servers, minimum=1)
    rate, delay = network.link_gbps, network.link_delay_ns
    topology, radix = network.topology, network.switch_radix
    hosts = servers * gps
    if topology == "file":
        return _from_file(network, hosts, gps)
    if topology in THREE_TIER or (radix is not None and topology in RADIX_GENERATORS):
        radix = clos.default_radix(hosts) if radix is None else radix
        common = {"switch_radix": radix, "switch_port_gbps": network.switch_port_gbps, "host_link_gbps": rate,
                  "host_link_delay_ns": delay, "fabric_link_delay_ns": delay,
                  "oversubscription": network.oversubscription,
                  "zone_oversubscription": network.zone_oversubscription,
                  "tiers": 3 if topology in THREE_TIER else 2}
        if topology.startswith("rail-optimized"):
            return clos.rail_clos(servers=servers, gpus_per_server=gps, **common)
        return clos.zoned_clos(hosts=hosts, gpus_per_server=gps, **common)
    if topology == "dragonfly":
        return _dragonfly(network, hosts, gps)
    two_tier = {"spines": network.spines, "oversubscription": network.oversubscription, "host_link_gbps": rate,
                "host_link_delay_ns": delay, "fabric_link_delay_ns": delay}
    if topology == "rail-optimized":
        return rail_optimized(servers=servers, gpus_per_server=gps, **two_tier)
    if topology == "leaf-spine":
        if hosts_per_leaf % gps:
            raise CosimInputError("network.hosts_per_leaf", f"{hosts_per_leaf} NICs per leaf do not hold whole "
                                  f"servers of {gps} GPUs", f"use a multiple of {gps}")
        if fill_leaves:
            servers_per_leaf = hosts_per_leaf // gps
            servers = -(-servers // servers_per_leaf) * servers_per_leaf
        return leaf_spine(hosts=servers * gps, hosts_per_leaf=hosts_per_leaf, gpus_per_server=gps, **two_tier)
    if topology == "fat-tree":
        k = round((4 * hosts) ** (1 / 3))
        if radix is None and k ** 3 // 4 == hosts:
            return fat_tree(k=k, link_gbps=rate, link_delay_ns=delay, gpus_per_server=gps)
        k = _fat_tree_k(hosts, gps) if radix is None else radix
        if k % 2:
            raise CosimInputError("switch_radix", f"a fat tree needs an even radix, got {k}", f"use {k + 1}")
        return fat_tree(k=k, link_gbps=rate, link_delay_ns=delay, gpus_per_server=gps, hosts=hosts)
    fabric = single_switch(hosts=hosts, link_gbps=rate, link_delay_ns=delay)
    h = np.arange(hosts, dtype=np.int32)
    return dataclasses.replace(fabric, host_server=h // gps, host_gpu=h % gps,
                               params=dict(fabric.params) | {"gpus_per_server": gps})


def _dragonfly(network, hosts: int, gps: int) -> Fabric:
    """The dragonfly of ``network``'s sizes; each size not given is the balanced dragonfly's that holds
    ``hosts`` in servers of ``gps`` NICs (:func:`dragonfly.balanced`)."""
    sizes = dragonfly.balanced(hosts, gps)
    given = {"hosts_per_router": network.hosts_per_router, "routers_per_group": network.routers_per_group,
             "global_links_per_router": network.global_links_per_router, "groups": network.dragonfly_groups}
    sizes |= {name: value for name, value in given.items() if value is not None}
    if network.dragonfly_groups is None:
        del sizes["groups"]  # the generator's a·h + 1 of the sizes in effect
    return dragonfly.dragonfly(**sizes, hosts=hosts, host_link_gbps=network.link_gbps,
                               host_link_delay_ns=network.link_delay_ns, gpus_per_server=gps)


def _from_file(network, hosts: int, gps: int) -> Fabric:
    """The file's fabric, when it holds the hosts the workload asks for in servers of ``gps`` NICs (host
    ``s × gps + g`` is GPU ``g`` of server ``s``, as placement reads every fabric)."""
    if network.topology_file is None:
        raise CosimInputError("network.topology_file", "topology 'file' needs a fabric file",
                              "set network.topology_file (or --topology-file) to a fabric JSON (docs/fabrics.md)")
    fabric = fabric_file.read(network.topology_file)
    if fabric.n_hosts < hosts:
        raise CosimInputError("hosts", f"the workload needs {hosts} hosts, {network.topology_file} has "
                              f"{fabric.n_hosts}", f"use at most {fabric.n_hosts} hosts or a larger fabric file")
    if gps > 1:
        h = np.arange(hosts)
        server, gpu = fabric.host_server[:hosts].astype(np.int64), fabric.host_gpu[:hosts].astype(np.int64)
        first = server[h - h % gps]
        grouped = (gpu == h % gps) & (server == first)
        distinct = np.unique(first[::gps]).size == -(-hosts // gps)
        if not (grouped.all() and distinct):
            bad = int(np.flatnonzero(~grouped)[0]) if not grouped.all() else 0
            raise CosimInputError("gpus_per_server", f"the hosts of {network.topology_file} are not servers of {gps} "
                                  f"NICs (host {bad} is server {int(server[bad])} gpu {int(gpu[bad])})",
                                  f"list hosts server by server, gpu 0..{gps - 1} each")
    return fabric


def rebuild(description: Mapping) -> Fabric | None:
    """The fabric of a stored description (``Fabric.describe()``: its name and the generator's inputs in
    ``params``), or None when it cannot be rebuilt faithfully (same node count)."""
    params, name = description.get("params"), description.get("name")
    if not isinstance(params, Mapping):
        return None
    try:
        if "file" in params and isinstance(params["file"], str):
            fabric = fabric_file.read(params["file"])
        else:
            build = (RADIX_GENERATORS if "switch_radix" in params else GENERATORS).get(name)
            if build is None:
                return None
            accepted = inspect.signature(build).parameters
            fabric = build(**{k: v for k, v in params.items() if k in accepted})  # params also hold derived counts
            if "nic_planes" in params:
                fabric = planes.multi_plane(fabric, params["nic_planes"], nic_link_gbps=params["nic_link_gbps"])
    except (CosimInputError, TypeError, ValueError):
        return None
    return fabric if fabric.n_nodes == description.get("n_nodes") else None
