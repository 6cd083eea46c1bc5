"""The two transports cosim compares, as the ns-3 attribute settings that select each one's mechanisms.

Both run the same switch, NIC, topology and telemetry code; only the link-level flow control and the
end-to-end congestion control differ:

- ``roce``: PFC (PAUSE frames from the shared-buffer MMU) + ECN marking at the switches + DCQCN at the
  NICs; RoCEv2 framing (82 B per packet on the wire, Ethernet preamble and gap included).
- ``ib``: credit-based link-level flow control per virtual lane (no PAUSE, no drops, no ECN/DCQCN unless
  IB congestion control is switched on); InfiniBand framing: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 B per
  data packet, 30 B for an ACK (AETH 4 more).

User ``--set`` values are applied after these, so they win.
"""

from __future__ import annotations

from cosim.errors import CosimInputError

TRANSPORTS = ("roce", "ib")

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
}


#: IB congestion control's marking threshold on an egress queue (FECN above it), in bytes
IB_CC_THRESHOLD_BYTES = 65536


def qualify_attribute(name: str) -> str:
    """``EgressPort::DataRate`` or ``ns3::EgressPort::DataRate`` → ``ns3::EgressPort::DataRate``."""
    return name if name.startswith("ns3::") else "ns3::" + name


def transport_attributes(transport: str, *, dcqcn: bool = True, ib_cc: bool = False) -> dict[str, str]:
    """ns-3 attribute defaults that make the engine model ``transport`` ("roce" or "ib").

    ``dcqcn`` (RoCE) switches DCQCN; ``ib_cc`` (InfiniBand) switches IB congestion control on: switches
    mark FECN on every packet joining an egress queue above IB_CC_THRESHOLD_BYTES, receivers return BECNs,
    senders step up their congestion-control table index (HostNic::IbCc* attributes).
    """
    if transport not in _ATTRIBUTES:
        raise CosimInputError("transport", f"unknown transport {transport!r}", f"choose one of {', '.join(TRANSPORTS)}")
    attrs = dict(_ATTRIBUTES[transport])
    if transport == "roce":
        attrs["HostNic::DcqcnEnabled"] = "true" if dcqcn else "false"
    elif ib_cc:
        threshold = str(IB_CC_THRESHOLD_BYTES)
        attrs |= {"HostNic::IbCcEnabled": "true", "FabricSwitch::EcnEnabled": "true",
                  "FabricSwitch::EcnKminBytes": threshold, "FabricSwitch::EcnKmaxBytes": threshold}
    return attrs


def run_attributes(network, seed: int) -> dict[str, str]:
    """All ns-3 attributes of one run on ``network`` (a NetworkSpec): the transport's settings, the ECMP
    seed, then the user's ``attributes`` (--set), which win."""
    attributes = transport_attributes(network.transport, dcqcn=network.dcqcn, ib_cc=network.ib_cc)
    attributes["FabricSwitch::EcmpSeed"] = str(seed)
    return attributes | dict(network.attributes)


#: attributes every run sets from its Experiment, with the field to use instead (a --set would be ignored)
RUN_SET_ATTRIBUTES = {
    "EgressQueueSampler::Interval": "telemetry.queue_sample_interval_ns (--queue-interval-ns)",
    "EgressPort::DataRate": "network.link_gbps (--link-gbps)",
    "EgressPort::PropagationDelay": "network.link_delay_ns (--link-delay-ns)",
    "FabricSwitch::EcmpSeed": "seed (--seed)",
    "EgressPort::LinkFlowControl": "network.transport (--transport)",
}


def check_attributes(transport: str, attributes) -> None:
    """Reject, before anything runs, the --set combinations that make no sense whatever the topology:
    ECN Kmin above Kmax, and PFC headroom below one maximum packet (MTU + header of ``transport``). Values
    that are not plain integers are left for the engine's own checks; 0 means "automatic"."""

    attrs = {qualify_attribute(k): v for k, v in attributes}
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
