"""Multi-plane fabrics: each NIC's ports on independent copies (planes) of the scale-out fabric, as
dual-plane and multi-plane AI clusters are built.

A NIC of ``nic_link_gbps`` with ``P`` planes has ``P`` ports of ``nic_link_gbps / P``; port ``p`` of every
NIC is cabled to plane ``p``, a full fabric of its own (leaves, spines, cores) built from switches whose
ports run at the NIC port speed. No link joins two planes: a packet stays in the plane its NIC put it on.

The NIC's choice of port is a port selector (a switch node ``nic<h>``, tier 1) between the NIC and its
ports: the NIC's one link to it runs at the whole NIC rate with no delay, and its ``P`` links to the
planes' leaves are the NIC's ports, with the cables' delay. The selector stripes the NIC's data packets
over the ports in turn (FabricSwitch::Routing stripe, set for these nodes alone by :func:`selector_routing`;
ACKs and other control packets follow the ECMP hash), whatever the fabric's own switches do: the NIC's
bytes split evenly over the planes, to one packet, on every transport, each message's packets alternate
between planes, and the receivers place packets in any order (HostNic::ReorderTolerant, as multi-plane
NICs do). The model's costs against a NIC with P real ports: one store-and-forward of each packet at the
NIC rate (a 4 KiB packet: 41 ns at 800 Gbit/s), and one input buffer for the NIC's ports, so a plane that
pauses its port holds the NIC's next packets for the others too.

Node ids: hosts (``host<h>``), then the selectors (``nic<h>``, in host order), then plane 0's switches,
plane 1's, ... each plane in the order of the single-plane fabric; tiers are the single-plane fabric's
plus one. A plane's switches are named ``nicplane<p>-`` and their single-plane name (``nicplane1-rail3-
leaf0``, ``nicplane0-spine5``; three-tier fabrics already call their core groups planes:
``nicplane1-plane7-core1`` is core 1 of core group 7 in NIC plane 1).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cosim.errors import CosimInputError
from cosim.network import names
from cosim.network.topology import HOST, SWITCH, TIER_LEAF, Fabric, _check_size, _real, _whole

#: prefix of the switch names of NIC plane p (``nicplane1-rail3-leaf0``)
PLANE_PREFIX = "nicplane"
#: most planes a NIC may have (public designs: 2 to 8)
MAX_NIC_PLANES = 16
#: FabricSwitch::Routing code of the port selectors: stripe (data packets take the ports in turn)
STRIPE_ROUTING = 5
#: SetSwitchRouting's "keep the default" code
DEFAULT_ROUTING = 255


def nic_planes(fabric: Fabric) -> int:
    """Planes of ``fabric`` (1: a single-plane fabric)."""
    return int(fabric.params.get("nic_planes", 1)) if fabric.params else 1


def multi_plane(base: Fabric, planes: int, *, nic_link_gbps: float) -> Fabric:
    """``planes`` copies of ``base`` (a single-plane fabric built with its host links at the NIC port speed,
    ``nic_link_gbps / planes``), each NIC joined to its own port selector and the selector to host ``h``'s
    leaf in every copy (module docstring). ``planes = 1`` returns ``base`` itself."""
    planes = _whole("nic_planes", planes, minimum=1)
    if planes == 1:
        return base
    if planes > MAX_NIC_PLANES:
        raise CosimInputError("nic_planes", f"must be at most {MAX_NIC_PLANES}, got {planes}")
    nic = _real("nic_link_gbps", nic_link_gbps, positive=True)
    n, s = base.n_hosts, base.n_switches
    if s == 0:
        raise CosimInputError("nic_planes", f"{base.name!r} has no switches to copy into planes")
    _check_size(n * 2 + s * planes, n + base.n_links * planes)
    sel0 = n
    # node id in plane p of every node of base: hosts -> their selector, switches -> plane p's copy
    mapped = np.empty((planes, base.n_nodes), np.int64)
    mapped[:, :n] = sel0 + np.arange(n)
    mapped[:, n:] = 2 * n + np.arange(planes)[:, None] * s + np.arange(s)[None, :]
    host_link = (base.node_kind[base.link_a] == HOST) | (base.node_kind[base.link_b] == HOST)
    delay = base.link_delay_ns
    base_names = names.node_names(base)
    node_names = ([f"host{h}" for h in range(n)] + [f"nic{h}" for h in range(n)]
                  + [f"{PLANE_PREFIX}{p}-{x}" for p in range(planes) for x in base_names[n:]])
    h = np.arange(n)
    return Fabric(
        name=base.name,
        node_kind=np.concatenate([np.full(n, HOST, np.uint8), np.full(n + s * planes, SWITCH, np.uint8)]),
        node_tier=np.concatenate([base.node_tier[:n], np.full(n, TIER_LEAF, np.uint8),
                                  np.tile(base.node_tier[n:] + 1, planes)]),
        link_a=np.concatenate([h, mapped[:, base.link_a].ravel()]),
        link_b=np.concatenate([sel0 + h, mapped[:, base.link_b].ravel()]),
        link_rate_bps=np.concatenate([np.full(n, nic * 1e9), np.tile(base.link_rate_bps, planes)]),
        # the selector is inside the NIC: its link has no cable; the cable's delay is on the ports
        link_delay_ns=np.concatenate([np.zeros(n), np.tile(delay, planes)]),
        link_tier=np.concatenate([np.full(n, TIER_LEAF, np.uint8), np.tile(base.link_tier + 1, planes)]),
        host_server=base.host_server,
        host_gpu=base.host_gpu,
        node_names=tuple(node_names),
        params=dict(base.params) | {"nic_planes": planes, "nic_link_gbps": nic,
                                    "nic_port_gbps": float(base.link_rate_bps[host_link][0] / 1e9)},
    )


def nic_attributes(fabric: Fabric) -> dict[str, str]:
    """ns-3 attributes a multi-plane fabric needs (an explicit setting wins): receivers that place packets
    in any order, since a message's packets cross different planes."""
    return {} if nic_planes(fabric) == 1 else {"HostNic::ReorderTolerant": "true"}


def selector_ids(fabric: Fabric) -> np.ndarray:
    """Node ids of the port selectors of a multi-plane fabric (empty for a single plane)."""
    if nic_planes(fabric) == 1:
        return np.empty(0, np.int64)
    return np.arange(fabric.n_hosts, 2 * fabric.n_hosts, dtype=np.int64)


def selector_routing(fabric: Fabric) -> np.ndarray | None:
    """uint8 [n_nodes]: the FabricSwitch::Routing of every node (DEFAULT_ROUTING: the attribute's), stripe
    at the port selectors; None for a single-plane fabric."""
    ids = selector_ids(fabric)
    if ids.size == 0:
        return None
    out = np.full(fabric.n_nodes, DEFAULT_ROUTING, np.uint8)
    out[ids] = STRIPE_ROUTING
    return out


def striped(fabric: Fabric) -> Fabric:
    """``fabric`` with every plane link at ``nic_planes`` times its rate: what a NIC striping its packets
    over its planes sees of one plane (the ideal FCT's yardstick); a single-plane fabric as it is."""
    n_planes = nic_planes(fabric)
    if n_planes == 1:
        return fabric
    rate = np.where(plane_of_link(fabric) >= 0, fabric.link_rate_bps * n_planes, fabric.link_rate_bps)
    return dataclasses.replace(fabric, link_rate_bps=rate)


def plane_of_node(fabric: Fabric) -> np.ndarray:
    """int64 [n_nodes]: the plane of every switch of a plane (-1 for hosts and port selectors)."""
    planes, n = nic_planes(fabric), fabric.n_hosts
    out = np.full(fabric.n_nodes, -1, np.int64)
    if planes > 1:
        per_plane = (fabric.n_nodes - 2 * n) // planes
        out[2 * n:] = np.arange(fabric.n_nodes - 2 * n) // per_plane
    return out


def plane_of_link(fabric: Fabric) -> np.ndarray:
    """int64 [n_links]: the plane of every link (-1 for the NIC-to-selector links)."""
    node_plane = plane_of_node(fabric)
    return np.maximum(node_plane[fabric.link_a], node_plane[fabric.link_b])
