"""The network section of an Experiment: the topology (graph), the transport on it, and model attributes.

*Topology* is the graph of hosts, switches and links (:mod:`cosim.network.topology`); *transport* is RoCE,
InfiniBand or Ultra Ethernet, the link-level flow control and congestion control on that graph
(:mod:`cosim.network.transport`). ``attributes`` are ns-3 model attributes (``Type::Attribute`` = value)
applied after the transport's own settings, so they win.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.network.dragonfly import DRAGONFLY_ROUTINGS
from cosim.network.fabrics import TOPOLOGIES
from cosim.network.link_layer import LINK_FLOW_CONTROLS, LINK_RETRIES, check_link_layer
from cosim.network.planes import MAX_NIC_PLANES
from cosim.network.transport import (
    ADAPTIVE_TIES,
    ECMP_HASH_FIELDS,
    ECN_MARKING_POINTS,
    PROFILES,
    ROUTINGS,
    TRANSPORTS,
    UEC_CONGESTION_CONTROLS,
    check_attributes,
    network_mechanisms,
)

#: fastest link rate accepted, Gbit/s (ns-3's DataRate holds bit/s in 64 bits; 10^5 Gbps leaves margin)
MAX_LINK_GBPS = 1e5


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkSpec:
    """Topology, transport, link rates and delays, and ns-3 attributes of one run (units in the names).

    ``topology`` None means the workload's default (flows: single-switch, training: rail-optimized);
    ``hosts`` is the number of NICs of a flow workload (training sizes the fabric to its ranks);
    ``gpus_per_server`` None means 1 for flows (8 on rail-optimized) and the trace's GPUs per host for
    training; ``hosts_per_leaf`` None means 4 for flows and two servers' NICs for training.
    """

    topology: str | None = v.spec_field(v.Optional(v.Choice(TOPOLOGIES)), None, "topology generator")
    transport: str = v.spec_field(v.Choice(TRANSPORTS), "roce",
                                  "roce: PFC + ECN + DCQCN; ib: credit flow control; uec: Ultra Ethernet (spraying, "
                                  "trimming, selective retransmission, NSCC)")
    hosts: int | None = v.spec_field(v.Optional(v.Int(minimum=2, maximum=2**31 - 1)), None,
                                     "flow workloads: number of hosts (NICs)")
    gpus_per_server: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=65535)), None,
                                               "NICs (GPUs) per server")
    hosts_per_leaf: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=65535)), None,
                                              "leaf-spine: hosts (NICs) under each leaf switch")
    spines: int = v.spec_field(v.Int(minimum=1, maximum=65535), 2, "leaf-spine, rail-optimized: spine switches "
                               "(without switch_radix; with it they follow from the radix)")
    oversubscription: float = v.spec_field(v.Real(minimum=1.0), 1.0,
                                           "leaf-spine, rail-optimized, three-tier: host capacity / uplink capacity "
                                           "per leaf")
    zone_oversubscription: float = v.spec_field(v.Real(minimum=1.0), 1.0,
                                                "three-tier topologies: leaf capacity / uplink capacity per "
                                                "aggregation switch of a zone (7 is 7:1 above the zones)")
    switch_radix: int | None = v.spec_field(v.Optional(v.Int(minimum=2, maximum=65535)), None,
                                            "ports per switch: every switch built from this many ports, every "
                                            "uplink its own link (None: one switch per rail or leaf; three-tier: "
                                            "the smallest of 64, 128, 256 that holds the hosts)")
    switch_port_gbps: float | None = v.spec_field(v.Optional(v.Real(positive=True, maximum=MAX_LINK_GBPS)), None,
                                                  "rate of a switch port, Gbit/s (None: link_gbps); a port faster "
                                                  "than the NIC serves several NICs (breakout)")
    hosts_per_router: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=65535)), None,
                                                "dragonfly: hosts per router, p (None: the balanced dragonfly, "
                                                "a = 2p = 2h, g = a·h + 1, that holds the hosts)")
    routers_per_group: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=65535)), None,
                                                 "dragonfly: routers per group, a (None: 2p)")
    global_links_per_router: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=65535)), None,
                                                       "dragonfly: global links per router, h (None: p)")
    dragonfly_groups: int | None = v.spec_field(v.Optional(v.Int(minimum=2, maximum=2**20)), None,
                                                "dragonfly: groups, g (None: a·h + 1, one global link between "
                                                "every pair of groups)")
    dragonfly_routing: str = v.spec_field(v.Choice(DRAGONFLY_ROUTINGS), "minimal",
                                          "dragonfly: minimal, valiant (via a random intermediate group) or ugal "
                                          "(UGAL-L); valiant and ugal need the lossy uec transport")
    nic_planes: int = v.spec_field(v.Int(minimum=1, maximum=MAX_NIC_PLANES), 1,
                                   "ports per NIC, each on its own copy (plane) of the fabric at link_gbps / "
                                   "nic_planes; a NIC stripes its packets over them (docs/fabrics.md)")
    topology_file: str | None = v.spec_field(v.Optional(v.Text(nonempty=True, path=True)), None,
                                             "topology 'file': path of the fabric file (JSON or TOML, "
                                             "docs/fabrics.md)")
    link_gbps: float = v.spec_field(v.Real(positive=True, maximum=MAX_LINK_GBPS), 100.0,
                                    "rate of every host link, Gbit/s")
    link_delay_ns: float = v.spec_field(v.Real(minimum=0.0, maximum=1e9), 1000.0,
                                        "one-way propagation delay of every link, ns")
    dcqcn: bool = v.spec_field(v.Bool(), True, "RoCE: DCQCN congestion control at the NICs")
    ib_cc: bool = v.spec_field(v.Bool(), False, "InfiniBand: congestion control (FECN, BECN, CCTI)")
    telemetry_cc: bool = v.spec_field(v.Bool(), False, "RoCE: switch-telemetry congestion control instead of "
                                      "DCQCN (switches stamp their utilization, senders pace to the most utilized "
                                      "hop, HPCC's algorithm; docs/models/spectrum-x.md)")
    profile: str | None = v.spec_field(v.Optional(v.Choice(tuple(PROFILES))), None,
                                       "named preset of transport options: spectrum-x (RoCE with per-packet "
                                       "adaptive routing, reordering NICs, telemetry congestion control, PFC; "
                                       "docs/models/spectrum-x.md)")
    qps_per_connection: int = v.spec_field(v.Int(minimum=1, maximum=65535), 1,
                                           "QP scaling: queue pairs per destination host, messages round robin")
    ecmp_hash: str = v.spec_field(v.Choice(ECMP_HASH_FIELDS), "flow",
                                  "ECMP hash fields: flow, five-tuple, five-tuple-qp (enhanced ECMP)")
    routing: str = v.spec_field(v.Choice(ROUTINGS), "ecmp",
                                "choice among equal-cost ports: ecmp, pinned, flowlet, adaptive, spray")
    adaptive_ties: str = v.spec_field(v.Choice(ADAPTIVE_TIES), "hash",
                                      "adaptive routing among equally loaded ports: hash (the flow's hashed port: "
                                      "on an idle fabric a flow keeps one path) or rotate (the ports in turn: "
                                      "per-packet spreading, as Spectrum-X)")
    admission: bool = v.spec_field(v.Bool(), False, "receiver-driven admission (clear-to-send per chunk)")
    qp_window_bytes: int = v.spec_field(v.Size(minimum=0), 0, "per-QP window of unacknowledged payload, bytes "
                                        "(0 = none)")
    ecn_marking: str = v.spec_field(v.Choice(ECN_MARKING_POINTS), "enqueue", "ECN marking point: enqueue, dequeue")
    uec_congestion_control: str = v.spec_field(v.Choice(UEC_CONGESTION_CONTROLS), "nscc",
                                               "Ultra Ethernet congestion control: nscc (sender window from ECN "
                                               "and delay), rccc (receiver-granted credits) or both")
    pfc_watchdog: bool = v.spec_field(v.Bool(), False, "RoCE: PFC watchdog on every switch egress queue (disable "
                                      "a queue paused past PfcWatchdog::DetectionTime, drop its traffic, restore "
                                      "after PfcWatchdog::RestorationTime); no effect on InfiniBand")
    link_retry: str = v.spec_field(v.Choice(LINK_RETRIES), "off",
                                   "Ethernet link layer: off, or llr (UEC link-level retry: a frame corrupted on a "
                                   "hop is replayed by that hop, go-back-N, instead of lost end to end)")
    link_flow_control: str = v.spec_field(v.Choice(LINK_FLOW_CONTROLS), "pfc",
                                          "Ethernet link layer: pfc (PAUSE frames) or cbfc (UEC credit-based flow "
                                          "control: per-lane credits from each link's receiver, as InfiniBand's)")
    attributes: tuple[tuple[str, str], ...] = v.spec_field(v.Attributes(), (),
                                                           "ns-3 attributes, Type::Attribute = value")

    def __post_init__(self) -> None:
        v.check_fields(self, "network")
        if self.profile is not None:
            _apply_profile(self)
        for name in UNUSED_CONGESTION_FIELDS[self.transport]:
            object.__setattr__(self, name, type(self).__dataclass_fields__[name].default)
        if self.telemetry_cc:
            object.__setattr__(self, "dcqcn", False)  # telemetry congestion control replaces DCQCN
        if self.topology_file is not None and self.topology not in ("file", None):
            raise CosimInputError("network.topology_file", f"is read only by topology 'file', not {self.topology!r}",
                                  "set network.topology = \"file\" or drop topology_file")
        if self.adaptive_ties != ADAPTIVE_TIES[0] and self.routing != "adaptive":
            raise CosimInputError("network.adaptive_ties", f"breaks ties of adaptive routing, not of {self.routing!r}",
                                  'set network.routing = "adaptive", or drop adaptive_ties')
        _check_switch_fields(self)
        _check_dragonfly_fields(self)
        _check_nic_planes(self)
        check_link_layer(self)
        if self.topology == "file" and self.topology_file is None:
            raise CosimInputError("network.topology_file", "topology 'file' needs the path of a fabric file",
                                  "set network.topology_file (or --topology-file); docs/fabrics.md")
        check_attributes(self.transport, self.attributes, network_mechanisms(self))


#: congestion-control switches a transport does not run (DCQCN and telemetry CC are RoCE's, IB CC InfiniBand's;
#: Ultra Ethernet runs NSCC, RCCC or both): held at their defaults so equal runs have equal specs, and left
#: out of a resolved document
UNUSED_CONGESTION_FIELDS = {"roce": ("ib_cc", "uec_congestion_control"),
                            "ib": ("dcqcn", "telemetry_cc", "uec_congestion_control"),
                            "uec": ("dcqcn", "ib_cc", "telemetry_cc")}


def _apply_profile(net: NetworkSpec) -> None:
    """Set the fields ``net.profile`` presets (PROFILES); a field set to another value than both its default
    and the profile's is refused, as it would silently undo part of the preset."""
    for name, value in PROFILES[net.profile].items():
        current = getattr(net, name)
        if current != value and current != type(net).__dataclass_fields__[name].default:
            raise CosimInputError(f"network.{name}", f"profile {net.profile!r} sets it to {value!r}, not {current!r}",
                                  f"drop network.{name} (or --{name.replace('_', '-')}), or drop the profile")
        object.__setattr__(net, name, value)


#: topologies built from switches of a radix (cosim.network.clos), and those of three tiers in zones
RADIX_TOPOLOGIES = ("leaf-spine", "rail-optimized", "rail-optimized-three-tier", "three-tier")
ZONED_TOPOLOGIES = ("rail-optimized-three-tier", "three-tier")


def _check_switch_fields(net: NetworkSpec) -> None:
    """Switch fields the named topology would ignore are refused (an unset topology is the workload's)."""
    topo = net.topology
    if topo is None:
        return
    if net.switch_radix is not None and topo not in (*RADIX_TOPOLOGIES, "fat-tree"):
        raise CosimInputError("network.switch_radix", f"does not apply to topology {topo!r}",
                              f"use it with {', '.join(RADIX_TOPOLOGIES)} or fat-tree")
    if net.switch_port_gbps is not None and topo not in RADIX_TOPOLOGIES:
        raise CosimInputError("network.switch_port_gbps", f"does not apply to topology {topo!r}",
                              f"use it with {', '.join(RADIX_TOPOLOGIES)}")
    if net.switch_port_gbps is not None and net.switch_radix is None and topo not in ZONED_TOPOLOGIES:
        raise CosimInputError("network.switch_port_gbps", f"needs network.switch_radix on {topo!r}",
                              "set switch_radix too (e.g. 64)")
    built_from_radix = topo in ZONED_TOPOLOGIES or (net.switch_radix is not None and topo in RADIX_TOPOLOGIES)
    if built_from_radix and net.spines != 2:
        raise CosimInputError("network.spines", f"{topo!r} built from switches of a radix derives its spines",
                              "drop spines (the dry run shows how many the radix gives)")
    if built_from_radix and net.hosts_per_leaf is not None:
        raise CosimInputError("network.hosts_per_leaf", f"{topo!r} built from switches of a radix derives its "
                              "leaf size", "drop hosts_per_leaf, or drop switch_radix to set it")
    if net.zone_oversubscription != 1.0 and topo not in ZONED_TOPOLOGIES:
        raise CosimInputError("network.zone_oversubscription", f"applies to three-tier topologies, not {topo!r}",
                              f"use topology {' or '.join(ZONED_TOPOLOGIES)}")


#: the NetworkSpec fields that size a dragonfly
DRAGONFLY_SIZE_FIELDS = ("hosts_per_router", "routers_per_group", "global_links_per_router", "dragonfly_groups")


def _check_dragonfly_fields(net: NetworkSpec) -> None:
    """Dragonfly fields on another topology are refused, and so are non-minimal routes on a lossless fabric:
    Valiant and UGAL routes take two global hops, whose buffer dependencies can close a cycle under PFC or
    credits unless each phase moves to its own virtual channel, which cosim does not model."""
    if net.topology != "dragonfly":
        for name in (*DRAGONFLY_SIZE_FIELDS, "dragonfly_routing"):
            if getattr(net, name) != type(net).__dataclass_fields__[name].default:
                raise CosimInputError(f"network.{name}", f"applies to topology 'dragonfly', not {net.topology!r}",
                                      'set network.topology = "dragonfly" or drop it')
    if net.dragonfly_routing != DRAGONFLY_ROUTINGS[0] and net.transport != "uec":
        raise CosimInputError("network.dragonfly_routing", f"{net.dragonfly_routing} routes can deadlock the "
                              f"lossless {net.transport} fabric (no virtual channel per phase is modelled)",
                              'use transport "uec" (lossy), or dragonfly_routing = "minimal"')


#: topologies that can be built in several planes (None: the workload's default, single-switch or rail-optimized)
PLANE_TOPOLOGIES = ("single-switch", "leaf-spine", "fat-tree", "rail-optimized", "rail-optimized-three-tier",
                    "three-tier")


def _check_nic_planes(net: NetworkSpec) -> None:
    """Planes need a generated fabric to copy (a dragonfly's groups are one fabric; a file describes its own
    planes) and NIC ports of a whole number of bit/s (what ns-3's DataRate holds)."""
    planes = net.nic_planes
    if planes == 1:
        return
    if net.topology is not None and net.topology not in PLANE_TOPOLOGIES:
        fix = ("describe each plane's switches in the file (a host has one link: one NIC port)"
               if net.topology == "file" else f"use one of {', '.join(PLANE_TOPOLOGIES)}")
        raise CosimInputError("network.nic_planes", f"topology {net.topology!r} cannot be copied into planes", fix)
    port_bps = net.link_gbps * 1e9 / planes
    if abs(port_bps - round(port_bps)) > 1e-3 or round(port_bps) < 1e6:
        raise CosimInputError("network.nic_planes", f"{planes} planes split a {net.link_gbps:g} Gbps NIC into "
                              f"{port_bps / 1e9:.6g} Gbps ports, not a whole number of bit/s (at least 1 Mbit/s)",
                              f"use a network.link_gbps that {planes} divides, or 2 or 4 planes")
