"""The Ethernet link layer options of a run: link-level retry (LLR) and credit-based flow control (CBFC), the
UEC 1.0 link layer (docs/models/uec.md), on the Ethernet transports roce and uec.

- ``network.link_retry`` (``off``): ``llr`` makes every egress port replay a frame corrupted on its hop,
  go-back-N from the hop's sender (``EgressPort::LinkLevelRetry``): a bit error costs the hop about a frame
  time plus a link round trip instead of an end-to-end loss.
- ``network.link_flow_control`` (``pfc``): ``cbfc`` replaces PFC by per-lane credits that the receiver of
  each link advertises (``EgressPort::LinkFlowControl=credit``), the same credit code InfiniBand runs, with
  an Ethernet credit update frame (``FabricNode::CreditPacketBytes`` = 84: a minimum frame of 64 B with
  preamble and gap). No PAUSE frame, no drop; switches buffer per input port (``FabricNode::InputBuffer*``)
  and do not trim.

Both are checked here, the network's fields alone by :func:`check_link_layer` (NetworkSpec) and against the
run's faults by :func:`check_link_layer_faults` (Experiment); the attributes come from
:func:`link_layer_attributes`.
"""

from __future__ import annotations

from collections.abc import Sequence

from cosim.errors import CosimInputError

#: network.link_retry values, the first the default
LINK_RETRIES = ("off", "llr")
#: network.link_flow_control values, the first the default
LINK_FLOW_CONTROLS = ("pfc", "cbfc")
#: wire size of a CBFC credit update: a minimum Ethernet frame (64 B) with preamble and inter-frame gap (20 B)
CBFC_UPDATE_FRAME_BYTES = 84
#: the NetworkSpec fields of the link layer
LINK_LAYER_FIELDS = ("link_retry", "link_flow_control")


def link_layer_attributes(link_retry: str = "off", link_flow_control: str = "pfc") -> dict[str, str]:
    """ns-3 attributes of the link layer options that differ from their defaults (none for a plain run)."""
    attrs = {}
    if link_retry == "llr":
        attrs["EgressPort::LinkLevelRetry"] = "true"
    if link_flow_control == "cbfc":
        attrs |= {"EgressPort::LinkFlowControl": "credit",
                  "FabricNode::CreditPacketBytes": str(CBFC_UPDATE_FRAME_BYTES)}
    return attrs


def check_link_layer(net) -> None:
    """Refuse link layer options the rest of the network spec (``net``, a NetworkSpec) cannot run."""
    if net.transport == "ib":
        for name, default in zip(LINK_LAYER_FIELDS, (LINK_RETRIES[0], LINK_FLOW_CONTROLS[0]), strict=True):
            if getattr(net, name) != default:
                raise CosimInputError(f"network.{name}", "is an Ethernet link layer option; InfiniBand links already "
                                      "run credits and resend corrupted packets on the link",
                                      'drop it, or choose transport "roce" or "uec"')
    if net.link_flow_control == "cbfc" and net.pfc_watchdog:
        raise CosimInputError("network.pfc_watchdog", "cbfc links send no PAUSE frame, so there is no pause to "
                              "watch", 'drop pfc_watchdog, or set network.link_flow_control = "pfc"')


def check_link_layer_faults(net, faults: Sequence) -> None:
    """Refuse faults the link layer of ``net`` cannot carry: a pause storm on cbfc links (they have no PAUSE
    frames), and bit errors on cbfc links without LLR (a corrupted frame would be dropped with the credits it
    holds; the periodic absolute credit resynchronisation that recovers them is not modelled)."""
    if net.link_flow_control != "cbfc":
        return
    for i, f in enumerate(faults):
        if f.kind == "pause_storm":
            raise CosimInputError(f"faults[{i}].kind", "a pause_storm needs PFC; cbfc links have no PAUSE frames",
                                  'set network.link_flow_control = "pfc"')
        if f.kind == "link_degrade" and f.get("bit_error_rate") and net.link_retry != "llr":
            raise CosimInputError("network.link_retry", "bit errors on cbfc links need link-level retry (a "
                                  "dropped frame would take its credits with it)", 'set network.link_retry = "llr"')
