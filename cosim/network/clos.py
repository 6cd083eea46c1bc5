"""Fabrics built from switches of a given radix: every switch has ``switch_radix`` ports of
``switch_port_gbps``, every uplink is its own link (and so its own ECMP member), and a rail or a zone with
more NICs than its switches have ports becomes several switches.

Pure functions from a few numbers to a :class:`cosim.network.topology.Fabric`. Host ids are server-major
(``server × gpus_per_server + gpu``), as in every generator, so placement does not depend on the build.

Switch ports (public switch classes: 64 × 800G, 128 × 400G, 256 × 400G):

- **Breakout**: a port faster than the NIC serves ``b = floor(switch_port_gbps / link_gbps)`` NICs (an
  800G port split into two 400G NICs); each NIC keeps its own link at ``link_gbps``.
- **Leaf** (tier 1): ``d`` host-facing ports and ``u = ceil(d × b × link_gbps / (o1 × switch_port_gbps))``
  uplinks, the most host ports with ``d + u <= switch_radix``. A leaf holds ``d × b`` NICs; a rail (or the
  servers) needing more becomes several leaves, filled evenly. Uplinks are sized to the NICs a leaf
  actually holds, so a small fabric is not given uplinks for ports it leaves empty.
- **Two tiers**: every leaf joins every spine; the spines are the fewest that divide the leaf's uplinks
  evenly and fit their radix (``leaves × uplinks / spines <= switch_radix``), parallel links between a leaf
  and a spine each their own link.
- **Three tiers** (zones, also called pods): each leaf joins every aggregation switch of its zone by one
  link (a zone has as many aggregation switches as a leaf has uplinks); an aggregation switch has ``Lz``
  leaf ports and ``ceil(Lz / o2)`` uplinks, the most leaves with ``Lz + ceil(Lz / o2) <= switch_radix``.
  Aggregation switch ``a`` of every zone joins the cores of plane ``a`` (the fewest that fit their radix);
  zones are filled in order (the last may be partial; its aggregation switches keep their uplinks).

Realized oversubscription per tier is what :meth:`Fabric.oversubscription` measures from the arrays; it
equals the requested ``o1`` (leaves) and ``o2`` (aggregation) whenever the port counts divide exactly
(e.g. radix 64: 1:1 is 32 + 32 ports, 7:1 is 56 + 8), and is below it otherwise.

Node names (:mod:`cosim.network.names`) say where a switch is: ``rail3-leaf1`` (leaf 1 of rail 3),
``leaf12``, ``spine5``, ``zone2-agg7``, ``plane7-core1``.
"""

from __future__ import annotations

import math

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
    _check_oversubscription,
    _check_size,
    _real,
    _whole,
)

#: public switch classes (ports, Gbit/s per port), smallest first: the default radix of a three-tier fabric
#: is the smallest class whose non-blocking three tiers hold the hosts
SWITCH_CLASSES = ((64, 800.0), (128, 400.0), (256, 400.0))
#: a switch needs at least this many ports to have both host ports and uplinks
MIN_RADIX = 2
#: slack on ceil() so 64/8 = 8.000000000001 stays 8
_EPS = 1e-12


def breakout(*, switch_port_gbps: float, link_gbps: float) -> int:
    """NICs one switch port serves: ``floor(port / NIC)`` (an 800G port: two 400G NICs)."""
    if switch_port_gbps < link_gbps * (1 - _EPS):
        raise CosimInputError("switch_port_gbps", f"{switch_port_gbps:g} Gbps ports are slower than the "
                              f"{link_gbps:g} Gbps NICs", f"use switch_port_gbps >= {link_gbps:g}")
    return max(1, int(math.floor(switch_port_gbps / link_gbps * (1 + _EPS))))


def split_ports(radix: int, down_port_gbps: float, up_port_gbps: float, oversubscription: float) -> tuple[int, int]:
    """(down ports, up ports) of a switch of ``radix`` ports: the most down ports whose uplinks
    (``ceil(down × down_port_gbps / (o × up_port_gbps))``) still fit."""
    down = 0
    for d in range(radix - 1, 0, -1):
        if d + uplinks_for(d, down_port_gbps, up_port_gbps, oversubscription) <= radix:
            down = d
            break
    if down == 0:
        raise CosimInputError("switch_radix", f"a {radix}-port switch cannot have both host ports and uplinks",
                              f"use switch_radix >= {MIN_RADIX}")
    return down, uplinks_for(down, down_port_gbps, up_port_gbps, oversubscription)


def uplinks_for(down_ports: int, down_port_gbps: float, up_port_gbps: float, oversubscription: float) -> int:
    """Uplinks that carry ``down_ports × down_port_gbps / oversubscription``, at least one."""
    return max(1, math.ceil(down_ports * down_port_gbps / (oversubscription * up_port_gbps) * (1 - _EPS)))


def _fewest_dividing(total: int, per_node_links: int, radix: int) -> int:
    """The fewest upper switches ``c`` dividing ``per_node_links`` with ``total × per_node_links / c <= radix``
    (``total`` lower switches each with ``per_node_links`` uplinks spread evenly over them); 0 if none."""
    for c in range(1, per_node_links + 1):
        if per_node_links % c == 0 and total * (per_node_links // c) <= radix:
            return c
    return 0


def _checked(switch_radix, switch_port_gbps, host_link_gbps, host_link_delay_ns, fabric_link_delay_ns,
             oversubscription):
    radix = _whole("switch_radix", switch_radix, minimum=MIN_RADIX)
    nic = _real("host_link_gbps", host_link_gbps, positive=True)
    port = nic if switch_port_gbps is None else _real("switch_port_gbps", switch_port_gbps, positive=True)
    return (radix, port, nic, _real("host_link_delay_ns", host_link_delay_ns, minimum=0.0),
            _real("fabric_link_delay_ns", fabric_link_delay_ns, minimum=0.0), _check_oversubscription(oversubscription))


def _leaf_size(radix: int, port: float, nic: float, o1: float) -> tuple[int, int]:
    """(NICs a leaf can hold, NICs per host port)."""
    b = breakout(switch_port_gbps=port, link_gbps=nic)
    d, _ = split_ports(radix, b * nic, port, o1)
    return d * b, b


def _leaf_uplinks(nics: int, b: int, nic: float, port: float, o1: float) -> int:
    """Uplinks of a leaf holding ``nics`` NICs (``b`` per host port)."""
    return uplinks_for(-(-nics // b), b * nic, port, o1)


def _tiers(tiers) -> int:
    """Tiers of switches above the hosts, checked: 2 or 3."""
    tiers = _whole("tiers", tiers, minimum=2)
    if tiers > 3:
        raise CosimInputError("tiers", f"must be 2 or 3, got {tiers}")
    return tiers


def rail_clos(*, servers: int, gpus_per_server: int = 8, switch_radix: int, switch_port_gbps: float | None = None,
              host_link_gbps: float, host_link_delay_ns: float, fabric_link_delay_ns: float,
              oversubscription: float = 1.0, zone_oversubscription: float = 1.0, tiers: int = 2) -> Fabric:
    """Rail-optimized fabric of ``switch_radix``-port switches: NIC ``g`` of every server on a leaf of rail
    ``g``; a rail with more NICs than a leaf holds is several leaves. ``tiers=2``: every rail leaf joins every
    spine. ``tiers=3``: zones of whole rail groups (``k`` leaves per rail each), aggregation switches per
    zone, cores above (the module's rules).
    """
    radix, port, nic, host_delay, fab_delay, o1 = _checked(switch_radix, switch_port_gbps, host_link_gbps,
                                                          host_link_delay_ns, fabric_link_delay_ns, oversubscription)
    servers = _whole("servers", servers, minimum=1)
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    tiers = _tiers(tiers)
    if servers * gps < 2:
        raise CosimInputError("servers", f"{servers} server of {gps} GPU is 1 host, a fabric needs at least 2")
    per_leaf_max, b = _leaf_size(radix, port, nic, o1)
    s = np.arange(servers, dtype=np.int64)
    params = {"servers": servers, "gpus_per_server": gps, "switch_radix": radix, "switch_port_gbps": port,
              "host_link_gbps": nic, "host_link_delay_ns": host_delay, "fabric_link_delay_ns": fab_delay,
              "oversubscription": o1, "zone_oversubscription": float(zone_oversubscription), "tiers": tiers,
              "rails": gps, "breakout": b}
    if tiers == 2:
        per_rail = -(-servers // per_leaf_max)
        per_leaf = -(-servers // per_rail)  # leaves of a rail filled evenly
        leaf_of_server_in_rail = s // per_leaf
        host_leaf = (np.arange(gps)[None, :] * per_rail + leaf_of_server_in_rail[:, None]).reshape(-1)
        rail, within = np.divmod(np.arange(gps * per_rail), per_rail)
        names = [f"rail{r}-leaf{i}" for r, i in zip(rail.tolist(), within.tolist())]
        return _build(name="rail-optimized", host_leaf=host_leaf, leaf_zone=np.zeros(gps * per_rail, np.int64),
                      leaf_names=names, per_leaf=per_leaf, b=b, radix=radix, port=port, nic=nic, o1=o1, o2=None,
                      host_delay=host_delay, fab_delay=fab_delay, gps=gps,
                      params=params | {"leaves_per_rail": per_rail})
    o2 = _check_oversubscription(zone_oversubscription)
    per_leaf = min(per_leaf_max, servers)
    leaves_max, _ = split_ports(radix, port, port, o2)
    k = min(leaves_max // gps, -(-servers // per_leaf))  # leaves per rail in one zone
    if k == 0:
        raise CosimInputError("switch_radix", f"an aggregation switch of {radix} ports holds {leaves_max} leaves, "
                              f"fewer than the {gps} rails of a zone", "use a larger switch_radix")
    per_zone = k * per_leaf  # servers per zone
    zone, in_zone = np.divmod(s, per_zone)
    n_zones = int(zone[-1]) + 1
    k_zone = np.full(n_zones, k)  # leaves per rail in each zone; the last zone only those its servers need
    k_zone[-1] = -(-(servers - (n_zones - 1) * per_zone) // per_leaf)
    zone_first = np.concatenate([[0], np.cumsum(gps * k_zone)])  # first leaf of each zone
    host_leaf = (zone_first[zone][:, None] + np.arange(gps)[None, :] * k_zone[zone][:, None]
                 + (in_zone // per_leaf)[:, None]).reshape(-1)  # rail-major inside a zone
    lz = np.repeat(np.arange(n_zones), gps * k_zone)
    rail = (np.arange(lz.size) - zone_first[lz]) // k_zone[lz]
    within = (np.arange(lz.size) - zone_first[lz]) % k_zone[lz]
    names = [f"zone{z}-rail{r}-leaf{i}" for z, r, i in zip(lz.tolist(), rail.tolist(), within.tolist())]
    return _build(name="rail-optimized-three-tier", host_leaf=host_leaf, leaf_zone=lz, leaf_names=names,
                  per_leaf=per_leaf, b=b, radix=radix, port=port, nic=nic, o1=o1, o2=o2, host_delay=host_delay,
                  fab_delay=fab_delay, gps=gps, zone_leaves=gps * k,
                  params=params | {"leaves_per_rail_per_zone": k, "zones": n_zones})


def zoned_clos(*, hosts: int, gpus_per_server: int = 1, switch_radix: int, switch_port_gbps: float | None = None,
               host_link_gbps: float, host_link_delay_ns: float, fabric_link_delay_ns: float,
               oversubscription: float = 1.0, zone_oversubscription: float = 1.0, tiers: int = 3) -> Fabric:
    """Clos of ``switch_radix``-port switches: servers fill leaves in order (a server's NICs on one leaf);
    ``tiers=2`` is leaf-spine, ``tiers=3`` groups leaves into zones with aggregation switches and cores above
    (the module's rules), ``oversubscription`` at the leaves and ``zone_oversubscription`` above the zones.
    """
    radix, port, nic, host_delay, fab_delay, o1 = _checked(switch_radix, switch_port_gbps, host_link_gbps,
                                                          host_link_delay_ns, fabric_link_delay_ns, oversubscription)
    hosts = _whole("hosts", hosts, minimum=2)
    gps = _whole("gpus_per_server", gpus_per_server, minimum=1)
    tiers = _tiers(tiers)
    if hosts % gps:
        raise CosimInputError("hosts", f"{hosts} NICs do not fill servers of {gps}", f"use a multiple of {gps}")
    per_leaf_max, b = _leaf_size(radix, port, nic, o1)
    if per_leaf_max < gps:
        raise CosimInputError("switch_radix", f"a leaf of {radix} ports holds {per_leaf_max} NICs, fewer than a "
                              f"server's {gps}", "use a larger switch_radix or switch_port_gbps")
    servers_per_leaf = per_leaf_max // gps
    servers = hosts // gps
    n_leaves = -(-servers // servers_per_leaf)
    servers_per_leaf = -(-servers // n_leaves) if tiers == 2 else servers_per_leaf  # two tiers: filled evenly
    host_leaf = np.arange(hosts, dtype=np.int64) // gps // servers_per_leaf
    params = {"hosts": hosts, "gpus_per_server": gps, "switch_radix": radix, "switch_port_gbps": port,
              "host_link_gbps": nic, "host_link_delay_ns": host_delay, "fabric_link_delay_ns": fab_delay,
              "oversubscription": o1, "zone_oversubscription": float(zone_oversubscription), "tiers": tiers,
              "breakout": b}
    per_leaf = servers_per_leaf * gps
    if tiers == 2:
        return _build(name="leaf-spine", host_leaf=host_leaf, leaf_zone=np.zeros(n_leaves, np.int64),
                      leaf_names=[f"leaf{i}" for i in range(n_leaves)], per_leaf=per_leaf, b=b, radix=radix,
                      port=port, nic=nic, o1=o1, o2=None, host_delay=host_delay, fab_delay=fab_delay, gps=gps,
                      params=params | {"leaves": n_leaves})
    o2 = _check_oversubscription(zone_oversubscription)
    leaves_max, _ = split_ports(radix, port, port, o2)
    zone_leaves = min(leaves_max, n_leaves)
    leaf_zone = np.arange(n_leaves) // zone_leaves
    return _build(name="three-tier", host_leaf=host_leaf, leaf_zone=leaf_zone,
                  leaf_names=[f"zone{z}-leaf{i}" for z, i in zip(leaf_zone.tolist(), (np.arange(n_leaves) % zone_leaves).tolist())],
                  per_leaf=per_leaf, b=b, radix=radix, port=port, nic=nic, o1=o1, o2=o2, host_delay=host_delay,
                  fab_delay=fab_delay, gps=gps, zone_leaves=zone_leaves,
                  params=params | {"leaves": n_leaves, "zones": int(leaf_zone[-1]) + 1})


def _build(*, name: str, host_leaf: np.ndarray, leaf_zone: np.ndarray, leaf_names: list[str], per_leaf: int,
           b: int, radix: int, port: float, nic: float, o1: float, o2: float | None, host_delay: float,
           fab_delay: float, gps: int, params: dict, zone_leaves: int = 0) -> Fabric:
    """The arrays: hosts on their leaves; two tiers (``o2`` None: every leaf to every spine) or three
    (leaves to the aggregation switches of their zone, aggregation switch ``a`` of every zone to plane ``a``'s
    cores). Links are ordered host links, leaf uplinks (leaf-major), aggregation uplinks (agg-major)."""
    n_hosts, n_leaves = host_leaf.size, len(leaf_names)
    up = _leaf_uplinks(per_leaf, b, nic, port, o1)
    leaf0 = n_hosts
    leaf = leaf0 + np.arange(n_leaves, dtype=np.int64)
    if o2 is None:
        spines = _fewest_dividing(n_leaves, up, radix)
        if spines == 0:
            raise CosimInputError("switch_radix", f"{n_leaves} leaves of {up} uplinks do not fit two tiers of "
                                  f"{radix}-port spines", "use a three-tier topology or a larger switch_radix")
        per_pair = up // spines
        top0 = leaf0 + n_leaves
        a2 = np.repeat(leaf, spines * per_pair)
        b2 = top0 + np.tile(np.repeat(np.arange(spines), per_pair), n_leaves)
        tiers_of = [(spines, TIER_SPINE, [f"spine{i}" for i in range(spines)])]
        a3 = b3 = np.empty(0, np.int64)
        params = params | {"uplinks_per_leaf": up, "spines": spines, "uplinks_per_spine": per_pair}
    else:
        n_zones = int(leaf_zone.max()) + 1
        aggs = up  # one link from every leaf to every aggregation switch of its zone
        agg_up = uplinks_for(zone_leaves, port, port, o2)
        cores = _fewest_dividing(n_zones, agg_up, radix)
        if cores == 0:
            raise CosimInputError("switch_radix", f"{n_zones} zones exceed what {radix}-port cores join",
                                  "use a larger switch_radix or more zone_oversubscription")
        per_core = agg_up // cores
        agg0 = leaf0 + n_leaves
        core0 = agg0 + n_zones * aggs
        a2 = np.repeat(leaf, aggs)
        b2 = agg0 + np.repeat(leaf_zone * aggs, aggs) + np.tile(np.arange(aggs), n_leaves)
        agg = np.arange(n_zones * aggs)
        a3 = agg0 + np.repeat(agg, cores * per_core)
        b3 = core0 + np.repeat((agg % aggs) * cores, cores * per_core) + np.tile(np.repeat(np.arange(cores), per_core),
                                                                                  agg.size)
        tiers_of = [(n_zones * aggs, TIER_SPINE, [f"zone{z}-agg{i}" for z in range(n_zones) for i in range(aggs)]),
                    (aggs * cores, TIER_CORE, [f"plane{p}-core{c}" for p in range(aggs) for c in range(cores)])]
        params = params | {"uplinks_per_leaf": up, "leaves_per_zone": zone_leaves, "aggs_per_zone": aggs,
                           "agg_uplinks": agg_up, "cores_per_plane": cores, "uplinks_per_core": per_core}
    n_switch = n_leaves + sum(n for n, _, _ in tiers_of)
    n_fab2, n_fab3 = a2.size, a3.size
    _check_size(n_hosts + n_switch, n_hosts + n_fab2 + n_fab3)
    names = [f"host{i}" for i in range(n_hosts)] + leaf_names + [x for _, _, ns in tiers_of for x in ns]
    h = np.arange(n_hosts, dtype=np.int64)
    return Fabric(
        name=name,
        node_kind=np.concatenate([np.full(n_hosts, HOST, np.uint8), np.full(n_switch, SWITCH, np.uint8)]),
        node_tier=np.concatenate([np.full(n_hosts, TIER_HOST, np.uint8), np.full(n_leaves, TIER_LEAF, np.uint8),
                                  *[np.full(n, t, np.uint8) for n, t, _ in tiers_of]]),
        link_a=np.concatenate([h, a2, a3]),
        link_b=np.concatenate([leaf0 + host_leaf, b2, b3]),
        link_rate_bps=np.concatenate([np.full(n_hosts, nic * 1e9), np.full(n_fab2 + n_fab3, port * 1e9)]),
        link_delay_ns=np.concatenate([np.full(n_hosts, host_delay), np.full(n_fab2 + n_fab3, fab_delay)]),
        link_tier=np.concatenate([np.full(n_hosts, TIER_LEAF, np.uint8), np.full(n_fab2, TIER_SPINE, np.uint8),
                                  np.full(n_fab3, TIER_CORE, np.uint8)]),
        host_server=h // gps,
        host_gpu=h % gps,
        node_names=tuple(names),
        params=params,
    )


def default_radix(hosts: int) -> int:
    """Ports of the smallest switch class whose non-blocking three tiers (``radix³ / 4`` NICs, one NIC per
    port) hold ``hosts``; the largest class beyond that."""
    for radix, _ in SWITCH_CLASSES:
        if radix ** 3 // 4 >= hosts:
            return radix
    return SWITCH_CLASSES[-1][0]
