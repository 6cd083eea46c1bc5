"""The transports cosim compares, as the ns-3 attribute settings that select each one's mechanisms.

All run the same switch, NIC, topology and telemetry code; only the link-level flow control, the loss
recovery and the end-to-end congestion control differ:

- ``roce``: PFC (PAUSE frames from the shared-buffer MMU) + ECN marking at the switches + DCQCN at the
  NICs; RoCEv2 framing (82 B per packet on the wire, Ethernet preamble and gap included).
- ``ib``: credit-based link-level flow control per virtual lane (no PAUSE, no drops, no ECN/DCQCN unless
  IB congestion control is switched on); InfiniBand framing: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 B per
  data packet, 30 B for an ACK (AETH 4 more).
- ``uec``: Ultra Ethernet (UEC 1.0, docs/models/uec.md): Ethernet without PFC (every priority lossy, best
  effort), switches that trim a packet to its header over TrimThresholdBytes, ECN marking; NICs with
  reliable unordered delivery (per-packet entropy spraying, coalesced SACKs with a bitmap, a NACK per
  trimmed packet, selective retransmission) and NSCC windows, or RCCC receiver credits, or both
  (``uec_congestion_control``: nscc, rccc, both). UEC framing: Ethernet 14 + IPv4 20 + UDP 8 + PDS 12 + SES 44 + FCS 4 +
  preamble/gap 20 = 122 B per data packet; a SACK is 98 B (PDS ACK with its congestion fields 32 B).
  The thresholds follow the host link rate: ECN from 5 us of queue (NsccWindow::TargetQdelay) to 20 us,
  trimming at 20 us; NsccWindow::BaseRtt is a two-tier round trip (8 link delays and 8 MTU
  serializations).

``both`` runs roce and ib side by side (as it always did); ``all`` runs roce, ib and uec.

On either transport, the mechanisms that decide RoCE against InfiniBand at scale are options of the
transport (NetworkSpec fields; each off by default, so a run without them is the plain transport):

- ``qps_per_connection`` (QP scaling, 1): a NIC spreads the flows (messages) to one destination over k
  queue pairs, round robin, as collective libraries do; ``ecmp_hash`` says whether switches see them:
  ``flow`` (default: every flow hashes alone, more entropy than real NICs give), ``five-tuple`` (one
  path per host pair) or ``five-tuple-qp`` (plus the destination QP: enhanced ECMP, k paths).
- ``routing`` (``ecmp``): ``pinned`` (destination mod k, a static flow-to-uplink map), ``flowlet``,
  ``adaptive`` (per packet, least-loaded port) and ``spray`` (per packet, round robin); the last two
  make receivers reordering-tolerant (they place packets beyond a gap instead of NAKing it).
- ``admission`` (off): receiver-driven admission, a flow sends only what its receiver granted, the bytes
  granted and not arrived bounded by ``HostNic::AdmissionChannels`` x ``HostNic::AdmissionBufferBytes``
  per receiver; with ``dcqcn = false`` this is Meta's "PFC only" RoCE.
- ``qp_window_bytes`` (0 = none): payload a QP may have unacknowledged (e.g. one bandwidth-delay product).
- ``ecn_marking`` (``enqueue``): where switches read the queue that decides an ECN mark (``dequeue`` as
  the HPCC-derived ns-3 models do).
- ``dragonfly_routing`` (``minimal``): ``valiant`` or ``ugal`` on a dragonfly (docs/models/dragonfly.md).
- ``telemetry_cc`` (off; RoCE): switch-telemetry congestion control instead of DCQCN: switches stamp their
  egress utilization on data packets (LinkTelemetry), receivers echo it in an ACK per packet, senders set
  each QP's rate and window from the most utilized hop (TelemetryRateControl, HPCC's algorithm). Its
  base RTT follows the link, as NSCC's does (:func:`telemetry_link_attributes`).

``profile`` names a preset of these options (:data:`PROFILES`): ``spectrum-x`` is RoCE with per-packet
adaptive routing, reordering-tolerant NICs and telemetry congestion control, PFC kept
(docs/models/spectrum-x.md lists each assumption and its source).

On roce and uec, the link layer options ``link_retry`` (LLR) and ``link_flow_control`` (CBFC) are those of
:mod:`cosim.network.link_layer`.

User ``--set`` values are applied after these, so they win.
"""

from __future__ import annotations

from cosim.errors import CosimInputError
from cosim.network.dragonfly import DRAGONFLY_ROUTINGS
from cosim.network.link_layer import LINK_FLOW_CONTROLS, LINK_RETRIES, link_layer_attributes

TRANSPORTS = ("roce", "ib", "uec")
#: names that stand for several transports, one Experiment (run) each
TRANSPORT_GROUPS: dict[str, tuple[str, ...]] = {"both": ("roce", "ib"), "all": TRANSPORTS}

#: MTU and per-packet header defaults of the NIC model (HostNic::MtuBytes, HostNic::HeaderBytes), bytes
DEFAULT_MTU_BYTES, DEFAULT_HEADER_BYTES = 4096, 82

_ATTRIBUTES: dict[str, dict[str, str]] = {
    "roce": {"EgressPort::LinkFlowControl": "pfc"},
    "ib": {
        "EgressPort::LinkFlowControl": "credit",
        "HostNic::DcqcnEnabled": "false",
        "FabricSwitch::EcnEnabled": "false",
        "HostNic::HeaderBytes": "26",
        "HostNic::ControlPacketBytes": "30",
    },
    "uec": {
        "EgressPort::LinkFlowControl": "pfc",
        "SharedBufferMmu::LosslessPriorityMask": "0",
        "HostNic::UecEnabled": "true",
        "HostNic::DcqcnEnabled": "false",
        "HostNic::ReorderTolerant": "true",
        "HostNic::HeaderBytes": "122",
        "HostNic::ControlPacketBytes": "98",
        "FabricSwitch::EcmpHashFields": "five-tuple-qp",
        "FabricSwitch::TrimmedPacketBytes": "84",
    },
}

#: Ultra Ethernet congestion control (HostNic::UecCongestionControl), the first the default
UEC_CONGESTION_CONTROLS = ("nscc", "rccc", "both")

#: UEC queue thresholds, in microseconds of the host link: ECN starts (NsccWindow::TargetQdelay), ECN
#: marks every packet, trimming starts
UEC_ECN_KMIN_US, UEC_ECN_KMAX_US, UEC_TRIM_US = 5.0, 20.0, 20.0


def uec_link_attributes(link_gbps: float, link_delay_ns: float, mtu_bytes: int = DEFAULT_MTU_BYTES) -> dict[str, str]:
    """The uec transport's settings that follow the host link: ECN and trimming thresholds in bytes of
    queue at ``link_gbps``, and NSCC's base RTT, a two-tier round trip of ``link_delay_ns`` links (a flow
    takes the smaller of it and the least round trip it measures)."""
    bytes_per_us = link_gbps * 1e3 / 8
    serialization_ns = (mtu_bytes + 122) * 8 / link_gbps
    return {"FabricSwitch::EcnKminBytes": str(round(UEC_ECN_KMIN_US * bytes_per_us)),
            "FabricSwitch::EcnKmaxBytes": str(round(UEC_ECN_KMAX_US * bytes_per_us)),
            "FabricSwitch::TrimThresholdBytes": str(round(UEC_TRIM_US * bytes_per_us)),
            "NsccWindow::BaseRtt": f"{round(8 * (link_delay_ns + serialization_ns))}ns"}


#: IB congestion control's marking threshold on an egress queue (FECN above it), in bytes
IB_CC_THRESHOLD_BYTES = 65536

#: ECMP hash fields (FabricSwitch::EcmpHashFields), the first the default
ECMP_HASH_FIELDS = ("flow", "five-tuple", "five-tuple-qp")
#: routing among equal-cost ports (FabricSwitch::Routing), the first the default
ROUTINGS = ("ecmp", "pinned", "flowlet", "adaptive", "spray")
#: routings that reorder a flow's packets, so receivers must place them out of order
REORDERING_ROUTINGS = ("adaptive", "spray")
#: adaptive routing's choice among equally loaded ports (FabricSwitch::AdaptiveTies), the first the default
ADAPTIVE_TIES = ("hash", "rotate")
#: where ECN marking reads the egress queue (FabricSwitch::EcnMarkingPoint), the first the default
ECN_MARKING_POINTS = ("enqueue", "dequeue")
#: receiver-driven admission defaults (HostNic::AdmissionChannels, AdmissionBufferBytes, AdmissionChunkBytes)
DEFAULT_ADMISSION_CHANNELS, DEFAULT_ADMISSION_BUFFER_BYTES, DEFAULT_ADMISSION_CHUNK_BYTES = 2, 512 * 1024, 64 * 1024
#: HostNic::AckIntervalBytes default: a QP window below it would never be opened by an ACK, in bytes
DEFAULT_ACK_INTERVAL_BYTES = 64 * 1024


#: named presets of transport options: NetworkSpec field → value (docs/models/spectrum-x.md)
PROFILES: dict[str, dict[str, object]] = {
    "spectrum-x": {"transport": "roce", "routing": "adaptive", "adaptive_ties": "rotate", "telemetry_cc": True,
                   "dcqcn": False},
}


def telemetry_link_attributes(link_gbps: float, link_delay_ns: float,
                              mtu_bytes: int = DEFAULT_MTU_BYTES) -> dict[str, str]:
    """Telemetry congestion control's base RTT T at ``link_gbps`` and ``link_delay_ns``: a two-tier round trip
    (8 link delays and 8 MTU serializations, as NSCC's), for both the switches' averaging window and the
    senders' window (HPCC's T)."""
    serialization_ns = (mtu_bytes + DEFAULT_HEADER_BYTES) * 8 / link_gbps
    base_rtt = f"{round(8 * (link_delay_ns + serialization_ns))}ns"
    return {"LinkTelemetry::BaseRtt": base_rtt, "TelemetryRateControl::BaseRtt": base_rtt}


def qualify_attribute(name: str) -> str:
    """``EgressPort::DataRate`` or ``ns3::EgressPort::DataRate`` → ``ns3::EgressPort::DataRate``."""
    return name if name.startswith("ns3::") else "ns3::" + name


def transport_attributes(transport: str, *, dcqcn: bool = True, ib_cc: bool = False, link_gbps: float = 100.0,
                         link_delay_ns: float = 1000.0, uec_congestion_control: str = "nscc") -> dict[str, str]:
    """ns-3 attribute defaults that make the engine model ``transport`` ("roce", "ib" or "uec").

    ``dcqcn`` (RoCE) switches DCQCN; ``ib_cc`` (InfiniBand) switches IB congestion control on: switches
    mark FECN on every packet joining an egress queue above IB_CC_THRESHOLD_BYTES, receivers return BECNs,
    senders step up their congestion-control table index (HostNic::IbCc* attributes). Ultra Ethernet's
    thresholds follow ``link_gbps`` and ``link_delay_ns`` (:func:`uec_link_attributes`);
    ``uec_congestion_control`` chooses its senders' limit: nscc (window), rccc (receiver credits) or both.
    """
    if transport not in _ATTRIBUTES:
        raise CosimInputError("transport", f"unknown transport {transport!r}", f"choose one of {', '.join(TRANSPORTS)}")
    if uec_congestion_control not in UEC_CONGESTION_CONTROLS:
        raise CosimInputError("network.uec_congestion_control", f"unknown value {uec_congestion_control!r}",
                              f"choose one of {', '.join(UEC_CONGESTION_CONTROLS)}")
    attrs = dict(_ATTRIBUTES[transport])
    if transport == "roce":
        attrs["HostNic::DcqcnEnabled"] = "true" if dcqcn else "false"
    elif transport == "uec":
        attrs |= uec_link_attributes(link_gbps, link_delay_ns)
        if uec_congestion_control != UEC_CONGESTION_CONTROLS[0]:
            attrs["HostNic::UecCongestionControl"] = uec_congestion_control
    elif ib_cc:
        threshold = str(IB_CC_THRESHOLD_BYTES)
        attrs |= {"HostNic::IbCcEnabled": "true", "FabricSwitch::EcnEnabled": "true",
                  "FabricSwitch::EcnKminBytes": threshold, "FabricSwitch::EcnKmaxBytes": threshold}
    return attrs


def mechanism_attributes(*, qps_per_connection: int = 1, ecmp_hash: str = "flow", routing: str = "ecmp",
                         admission: bool = False, qp_window_bytes: int = 0,
                         ecn_marking: str = "enqueue", dragonfly_routing: str = "minimal",
                         telemetry_cc: bool = False, adaptive_ties: str = "hash") -> dict[str, str]:
    """ns-3 attributes of the transport options (module docstring) that differ from their defaults: none for
    a plain run, so its attributes, and results, stay what they were before the options existed."""
    for field, value, choices in (("network.ecmp_hash", ecmp_hash, ECMP_HASH_FIELDS),
                                  ("network.routing", routing, ROUTINGS),
                                  ("network.ecn_marking", ecn_marking, ECN_MARKING_POINTS),
                                  ("network.dragonfly_routing", dragonfly_routing, DRAGONFLY_ROUTINGS),
                                  ("network.adaptive_ties", adaptive_ties, ADAPTIVE_TIES)):
        if value not in choices:
            raise CosimInputError(field, f"unknown value {value!r}", f"choose one of {', '.join(choices)}")
    attrs = {}
    if qps_per_connection != 1:
        attrs["HostNic::QueuePairsPerConnection"] = str(qps_per_connection)
    if ecmp_hash != ECMP_HASH_FIELDS[0]:
        attrs["FabricSwitch::EcmpHashFields"] = ecmp_hash
    if routing != ROUTINGS[0]:
        attrs["FabricSwitch::Routing"] = routing
    if routing in REORDERING_ROUTINGS:
        attrs["HostNic::ReorderTolerant"] = "true"
    if adaptive_ties != ADAPTIVE_TIES[0]:
        attrs["FabricSwitch::AdaptiveTies"] = adaptive_ties
    if admission:
        attrs["HostNic::AdmissionEnabled"] = "true"
    if qp_window_bytes:
        attrs["HostNic::QpWindowBytes"] = str(qp_window_bytes)
    if ecn_marking != ECN_MARKING_POINTS[0]:
        attrs["FabricSwitch::EcnMarkingPoint"] = ecn_marking
    if dragonfly_routing != DRAGONFLY_ROUTINGS[0]:
        attrs["FabricSwitch::DragonflyRouting"] = dragonfly_routing
    if telemetry_cc:
        # an ACK per packet, as HPCC's receivers send: each carries the path's telemetry back
        attrs |= {"HostNic::TelemetryCcEnabled": "true", "HostNic::DcqcnEnabled": "false",
                  "LinkTelemetry::Enabled": "true", "HostNic::AckIntervalBytes": str(DEFAULT_MTU_BYTES)}
    return attrs


def network_mechanisms(network) -> dict[str, str]:
    """:func:`mechanism_attributes` of a NetworkSpec's transport options."""
    return mechanism_attributes(qps_per_connection=network.qps_per_connection, ecmp_hash=network.ecmp_hash,
                                routing=network.routing, admission=network.admission,
                                qp_window_bytes=network.qp_window_bytes, ecn_marking=network.ecn_marking,
                                dragonfly_routing=getattr(network, "dragonfly_routing", DRAGONFLY_ROUTINGS[0]),
                                telemetry_cc=getattr(network, "telemetry_cc", False),
                                adaptive_ties=getattr(network, "adaptive_ties", ADAPTIVE_TIES[0]))


def run_attributes(network, seed: int, *, lossless_mask: int | None = None) -> dict[str, str]:
    """All ns-3 attributes of one run on ``network`` (a NetworkSpec): the transport's settings and options,
    the ECMP seed, the run's SharedBufferMmu::LosslessPriorityMask if given (``Experiment.
    lossless_priority_mask``: headroom only for the priorities its lossless traffic uses), then the user's
    ``attributes`` (--set), which win."""
    port_gbps = network.link_gbps / getattr(network, "nic_planes", 1)  # switch queues drain at the port speed
    attributes = transport_attributes(network.transport, dcqcn=network.dcqcn, ib_cc=network.ib_cc,
                                      link_gbps=port_gbps, link_delay_ns=network.link_delay_ns,
                                      uec_congestion_control=getattr(network, "uec_congestion_control", "nscc"))
    attributes |= network_mechanisms(network)
    attributes |= link_layer_attributes(getattr(network, "link_retry", LINK_RETRIES[0]),
                                        getattr(network, "link_flow_control", LINK_FLOW_CONTROLS[0]))
    if getattr(network, "telemetry_cc", False):
        attributes |= telemetry_link_attributes(port_gbps, network.link_delay_ns)
    if getattr(network, "pfc_watchdog", False):
        attributes["PfcWatchdog::Enabled"] = "true"
    attributes["FabricSwitch::EcmpSeed"] = str(seed)
    if lossless_mask is not None:
        attributes["SharedBufferMmu::LosslessPriorityMask"] = str(lossless_mask)
    return attributes | dict(network.attributes)


#: fast-forward's sampling by transport, where it differs from FastForwardController's own defaults (a check
#: every 1 us, a 4 us stability window; a --set wins): on RoCE a check every 500 ns and a 3 us window find steady
#: flows sooner, within the error monitor's 1 %; InfiniBand keeps the defaults, as its ring channels drift out of
#: step with shorter windows (p99 FCT 10 % off on GPT-13B; bench/README.md, "bench_fast_forward.py")
FAST_FORWARD_SAMPLING = {"roce": {"FastForwardController::CheckInterval": "500ns",
                                  "FastForwardController::StabilityWindow": "3us"}}


#: attributes every run sets from its Experiment, with the field to use instead (a --set would be ignored)
RUN_SET_ATTRIBUTES = {
    "EgressQueueSampler::Interval": "telemetry.queue_sample_interval_ns (--queue-interval-ns)",
    "EgressPort::DataRate": "network.link_gbps (--link-gbps)",
    "EgressPort::PropagationDelay": "network.link_delay_ns (--link-delay-ns)",
    "FabricSwitch::EcmpSeed": "seed (--seed)",
    "EgressPort::LinkFlowControl": "network.transport (--transport) or network.link_flow_control "
                                   "(--link-flow-control)",
    "EgressPort::LinkLevelRetry": "network.link_retry (--link-retry)",
}


def _integer(attrs: dict[str, str], name: str, default: int) -> int | None:
    """Attribute ``name`` (qualified) as an int: its value in ``attrs``, else ``default``; None if not an integer."""
    value = attrs.get(name, str(default))
    return int(value) if value.isdigit() else None


def check_mechanisms(attrs: dict[str, str]) -> None:
    """Reject transport-option settings (qualified attribute names → values, options and --set merged) that
    cannot run: a QP window below one packet or below the ACK interval (no ACK would open it), admission
    grants that are not whole packets, and per-packet routing without a receiver that tolerates reordering
    (go-back-N would NAK nearly every packet; set HostNic::ReorderTolerant=false to study exactly that)."""
    mtu = _integer(attrs, "ns3::HostNic::MtuBytes", DEFAULT_MTU_BYTES)
    window = _integer(attrs, "ns3::HostNic::QpWindowBytes", 0)
    ack = _integer(attrs, "ns3::HostNic::AckIntervalBytes", DEFAULT_ACK_INTERVAL_BYTES)
    if window and mtu is not None and ack is not None and window < max(mtu, ack):
        raise CosimInputError("HostNic::QpWindowBytes", f"a window of {window} B is below one packet ({mtu} B) or "
                              f"the ACK interval ({ack} B): no ACK would ever open it",
                              f"raise it to {max(mtu, ack)} B or more, or lower HostNic::AckIntervalBytes")
    chunk = _integer(attrs, "ns3::HostNic::AdmissionChunkBytes", DEFAULT_ADMISSION_CHUNK_BYTES)
    if attrs.get("ns3::HostNic::AdmissionEnabled") in ("true", "1") and chunk and mtu and chunk % mtu:
        raise CosimInputError("HostNic::AdmissionChunkBytes", f"{chunk} B is not a whole number of packets "
                              f"(MTU {mtu} B)", f"use a multiple of {mtu}, e.g. {max(1, chunk // mtu) * mtu}")
    if attrs.get("ns3::HostNic::UecEnabled") in ("true", "1") and (
            attrs.get("ns3::HostNic::AdmissionEnabled") in ("true", "1") or (window or 0) > 0):
        raise CosimInputError("network.transport", "uec runs NSCC windows at its senders; receiver-driven "
                              "admission and a QP window are RoCE/IB mechanisms",
                              "drop network.admission and network.qp_window_bytes, or choose roce or ib")
    if attrs.get("ns3::HostNic::TelemetryCcEnabled") in ("true", "1"):
        for other in ("DcqcnEnabled", "IbCcEnabled", "UecEnabled"):
            if attrs.get(f"ns3::HostNic::{other}") in ("true", "1"):
                raise CosimInputError(f"HostNic::{other}", "telemetry congestion control sets every RoCE queue "
                                      "pair's rate itself; a second congestion control cannot run beside it",
                                      f"drop HostNic::{other}, or network.telemetry_cc")
    routing = attrs.get("ns3::FabricSwitch::Routing", ROUTINGS[0])
    if routing in REORDERING_ROUTINGS and "ns3::HostNic::ReorderTolerant" not in attrs:
        raise CosimInputError("FabricSwitch::Routing", f"{routing} routing reorders packets, and go-back-N "
                              "receivers drop what arrives out of order",
                              f'set network.routing = "{routing}" (it makes receivers tolerate reordering), or '
                              "HostNic::ReorderTolerant explicitly")


def check_attributes(transport: str, attributes, mechanisms: dict[str, str] | None = None) -> None:
    """Reject, before anything runs, the --set combinations that make no sense whatever the topology:
    ECN Kmin above Kmax, PFC headroom below one maximum packet (MTU + header of ``transport``), and the
    transport options :func:`check_mechanisms` refuses (``mechanisms``: their attributes). Values that are
    not plain integers are left for the engine's own checks; 0 means "automatic"."""

    attrs = {qualify_attribute(k): v for k, v in attributes}
    defaults = {qualify_attribute(k): v for k, v in _ATTRIBUTES.get(transport, {}).items()}
    check_mechanisms(defaults | {qualify_attribute(k): v for k, v in (mechanisms or {}).items()} | attrs)
    for name, instead in RUN_SET_ATTRIBUTES.items():
        if qualify_attribute(name) in attrs:
            raise CosimInputError(name, "is set by the run itself, so this setting would be ignored",
                                  f"use {instead}")
    kmin, kmax = (attrs.get(f"ns3::FabricSwitch::Ecn{k}Bytes", "0") for k in ("Kmin", "Kmax"))
    if kmin.isdigit() and kmax.isdigit() and int(kmin) and int(kmax) and int(kmin) > int(kmax):
        raise CosimInputError("FabricSwitch::EcnKminBytes", f"Kmin {kmin} B exceeds Kmax {kmax} B", "set Kmin <= Kmax")
    headroom = attrs.get("ns3::FabricSwitch::HeadroomBytes", "0")
    if headroom.isdigit() and int(headroom):
        defaults = {"ns3::" + k: v for k, v in transport_attributes(transport).items()}
        mtu, header = (attrs.get(k, defaults.get(k, str(d))) for k, d in (
            ("ns3::HostNic::MtuBytes", DEFAULT_MTU_BYTES), ("ns3::HostNic::HeaderBytes", DEFAULT_HEADER_BYTES)))
        if mtu.isdigit() and header.isdigit() and int(headroom) < int(mtu) + int(header):
            raise CosimInputError("FabricSwitch::HeadroomBytes",
                                  f"{headroom} B of PFC headroom is below one maximum packet "
                                  f"({int(mtu) + int(header)} B)", "set it to 0 (automatic) or larger")


# ---------------------------------------------------------------- attributes that act on one transport only

#: PFC and the shared-buffer MMU (RoCE): attribute name prefix → what acts instead on InfiniBand
_PFC_ONLY = {
    "SharedBufferMmu::BufferBytes": "FabricNode::InputBufferBytes (switches buffer per input port)",
    "SharedBufferMmu::ReservedBytes": "FabricNode::VlReservedBytes (the reservation per virtual lane)",
    "SharedBufferMmu::": "FabricNode::InputBufferBytes and FabricNode::VlReservedBytes (input buffers per port)",
    "FabricSwitch::HeadroomBytes": "FabricNode::CreditUpdateBytes and CreditUpdateInterval (credit flow control)",
    "FabricSwitch::AllowLossyHeadroom": "nothing: credit flow control is lossless by construction",
    "FabricSwitch::Pause": "FabricNode::CreditUpdateBytes and CreditUpdateInterval (credit flow control)",
    "PfcWatchdog::": "nothing: InfiniBand links have no PFC to watch",
}
#: credit flow control (InfiniBand): attribute name prefix → what acts instead on RoCE
_CREDIT_ONLY = {
    "FabricNode::InputBufferBytes": "SharedBufferMmu::BufferBytes (the switch's shared buffer)",
    "FabricNode::VlReservedBytes": "SharedBufferMmu::ReservedBytes (the reservation per port and priority)",
    "FabricNode::": "SharedBufferMmu::* and FabricSwitch::HeadroomBytes (PFC)",
    "EgressPort::DataVls": "the priorities of the workloads (PFC pauses each priority apart)",
    "EgressPort::VlArbitrationWeights": "the priorities of the workloads (strict priority)",
}
#: DCQCN (RoCE with network.dcqcn) and IB congestion control (InfiniBand with network.ib_cc)
_DCQCN_ONLY = ("DcqcnRateControl::", "HostNic::CnpInterval")
_IB_CC_ONLY = ("IbCcControl::", "HostNic::Cct")
#: switch-telemetry congestion control (RoCE with network.telemetry_cc)
_TELEMETRY_ONLY = ("TelemetryRateControl::", "LinkTelemetry::")
#: switch ECN marking: DCQCN's congestion point on RoCE, FECN marking on InfiniBand with IB congestion control
_MARKING = ("FabricSwitch::EcnKminBytes", "FabricSwitch::EcnKmaxBytes", "FabricSwitch::EcnPmax",
            "FabricSwitch::EcnMarkingPoint")


def _rule(name: str, rules: dict[str, str]) -> str | None:
    """What ``rules`` give the longest prefix of ``name`` that they hold, None if none."""
    match = max((p for p in rules if name.startswith(p)), key=len, default=None)
    return None if match is None else rules[match]


def inert_attributes(transport: str, attributes, *, dcqcn: bool = True, ib_cc: bool = False,
                     link_flow_control: str = "pfc", telemetry_cc: bool = False) -> list[tuple[str, str]]:
    """The set ns-3 ``attributes`` (names → values, or pairs) that have no effect on a run of ``transport``
    with these congestion-control switches, each with why and what acts instead, in one phrase: e.g.
    ``("SharedBufferMmu::BufferBytes", "has no effect on transport ib: set FabricNode::InputBufferBytes
    (switches buffer per input port)")``. An explicit HostNic::DcqcnEnabled, HostNic::IbCcEnabled or
    FabricSwitch::EcnEnabled = true counts as switching that mechanism on. ``link_flow_control`` "cbfc" puts
    an Ethernet transport on credit links (network.link_flow_control)."""
    credit = transport == "ib" or link_flow_control == "cbfc"
    links = f"transport {transport}" if transport == "ib" or not credit else f"cbfc links ({transport})"
    pairs = list(attributes.items() if hasattr(attributes, "items") else attributes)
    on = {qualify_attribute(k).removeprefix("ns3::"): str(x).lower() in ("true", "1") for k, x in pairs}
    marking_on = transport in ("roce", "uec") or on.get("FabricSwitch::EcnEnabled", transport == "ib" and ib_cc)
    dcqcn_on = on.get("HostNic::DcqcnEnabled", transport == "roce" and dcqcn) and marking_on
    ib_cc_on = on.get("HostNic::IbCcEnabled", transport == "ib" and ib_cc)
    telemetry_on = on.get("HostNic::TelemetryCcEnabled", transport == "roce" and telemetry_cc)
    out = []
    for key, _ in pairs:
        name = qualify_attribute(key).removeprefix("ns3::")
        why = None
        if credit and (instead := _rule(name, _PFC_ONLY)):
            why = f"has no effect on {links} (it is RoCE's PFC and shared buffer): set {instead}"
        elif not credit and (instead := _rule(name, _CREDIT_ONLY)):
            why = f"has no effect on {links} (it is credit flow control, InfiniBand's or cbfc): set {instead}"
        elif name.startswith(_DCQCN_ONLY) and transport == "uec":
            why = "has no effect on transport uec (DCQCN is RoCE's): NSCC acts, NsccWindow::*"
        elif name.startswith(_DCQCN_ONLY) and not dcqcn_on and telemetry_on:
            why = "has no effect with telemetry congestion control, which replaces DCQCN: TelemetryRateControl::* acts"
        elif name.startswith(_DCQCN_ONLY) and not dcqcn_on:
            why = ("has no effect on transport ib (DCQCN is RoCE's): IB congestion control is network.ib_cc "
                   "(--ib-cc) with HostNic::Ccti* and HostNic::CctGapStep" if transport == "ib" else
                   "has no effect with DCQCN off: set network.dcqcn = true (--dcqcn)")
        elif name.startswith(_IB_CC_ONLY) and not ib_cc_on:
            why = ("has no effect without IB congestion control: set network.ib_cc = true (--ib-cc)"
                   if transport == "ib" else f"has no effect on transport {transport} (it is InfiniBand congestion "
                   "control)")
        elif name.startswith(_TELEMETRY_ONLY) and not telemetry_on:
            why = ("has no effect without telemetry congestion control: set network.telemetry_cc = true "
                   "(--telemetry-cc)" if transport == "roce" else
                   f"has no effect on transport {transport} (telemetry congestion control is RoCE's)")
        elif name.startswith(_MARKING) and not marking_on:
            why = "has no effect on transport ib without IB congestion control (FECN marking): set network.ib_cc = " \
                  "true (--ib-cc)"
        if why:
            out.append((key, why))
    return out
