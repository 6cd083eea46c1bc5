"""The network section of an Experiment: the topology (graph), the transport on it, and model attributes.

*Topology* is the graph of hosts, switches and links (:mod:`cosim.network.topology`); *transport* is RoCE,
InfiniBand or Ultra Ethernet, the link-level flow control and congestion control on that graph
(:mod:`cosim.network.transport`). ``attributes`` are ns-3 model attributes (``Type::Attribute`` = value)
applied after the transport's own settings, so they win.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim import values as v
from cosim.network.topology import TOPOLOGIES
from cosim.network.transport import (
    ECMP_HASH_FIELDS,
    ECN_MARKING_POINTS,
    ROUTINGS,
    TRANSPORTS,
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
    spines: int = v.spec_field(v.Int(minimum=1, maximum=65535), 2, "leaf-spine, rail-optimized: spine switches")
    oversubscription: float = v.spec_field(v.Real(minimum=1.0), 1.0,
                                           "leaf-spine, rail-optimized: host capacity / uplink capacity per leaf")
    link_gbps: float = v.spec_field(v.Real(positive=True, maximum=MAX_LINK_GBPS), 100.0,
                                    "rate of every host link, Gbit/s")
    link_delay_ns: float = v.spec_field(v.Real(minimum=0.0, maximum=1e9), 1000.0,
                                        "one-way propagation delay of every link, ns")
    dcqcn: bool = v.spec_field(v.Bool(), True, "RoCE: DCQCN congestion control at the NICs")
    ib_cc: bool = v.spec_field(v.Bool(), False, "InfiniBand: congestion control (FECN, BECN, CCTI)")
    qps_per_connection: int = v.spec_field(v.Int(minimum=1, maximum=65535), 1,
                                           "QP scaling: queue pairs per destination host, messages round robin")
    ecmp_hash: str = v.spec_field(v.Choice(ECMP_HASH_FIELDS), "flow",
                                  "ECMP hash fields: flow, five-tuple, five-tuple-qp (enhanced ECMP)")
    routing: str = v.spec_field(v.Choice(ROUTINGS), "ecmp",
                                "choice among equal-cost ports: ecmp, pinned, flowlet, adaptive, spray")
    admission: bool = v.spec_field(v.Bool(), False, "receiver-driven admission (clear-to-send per chunk)")
    qp_window_bytes: int = v.spec_field(v.Size(minimum=0), 0, "per-QP window of unacknowledged payload, bytes "
                                        "(0 = none)")
    ecn_marking: str = v.spec_field(v.Choice(ECN_MARKING_POINTS), "enqueue", "ECN marking point: enqueue, dequeue")
    pfc_watchdog: bool = v.spec_field(v.Bool(), False, "RoCE: PFC watchdog on every switch egress queue (disable "
                                      "a queue paused past PfcWatchdog::DetectionTime, drop its traffic, restore "
                                      "after PfcWatchdog::RestorationTime); no effect on InfiniBand")
    attributes: tuple[tuple[str, str], ...] = v.spec_field(v.Attributes(), (),
                                                           "ns-3 attributes, Type::Attribute = value")

    def __post_init__(self) -> None:
        v.check_fields(self, "network")
        check_attributes(self.transport, self.attributes, network_mechanisms(self))
