"""What a run gives the ns-3 attributes whose default follows the fabric, the transport or the workload,
in words, for ``cosim attributes`` (the static TypeId default alone would mislead: a 25.6 Tbit/s leaf
gets 64 MiB of buffer, an InfiniBand NIC 26 B of headers)."""

from __future__ import annotations

from collections.abc import Mapping

from cosim.network.buffers import DEFAULT_CONTROL_PRIORITY, MIB, SWITCH_CLASSES
from cosim.network.transport import TRANSPORTS, qualify_attribute, transport_attributes


def _switch_buffer_text() -> str:
    """The buffer of each switch class, as a run picks it (cosim.network.buffers)."""
    classes = ", ".join(f"{c.buffer_bytes // MIB} MiB ({c.buffer_bytes}) up to {c.capacity_tbps:g} Tbit/s"
                        for c in SWITCH_CLASSES)
    last = SWITCH_CLASSES[-1]
    return (f"each switch by its class (the sum of its port rates): {classes}, beyond that "
            f"{last.buffer_bytes // MIB} MiB per {last.capacity_tbps:g} Tbit/s; an explicit --set applies to every "
            "switch; unused on ib (its switches buffer per input port: FabricNode::InputBufferBytes)")


#: attributes whose run default follows the fabric or the workload, in words
_DERIVED = {
    "SharedBufferMmu::BufferBytes": _switch_buffer_text(),
    "SharedBufferMmu::LosslessPriorityMask": "roce: the priorities the run's lossless traffic and its ACKs and CNPs "
    f"use (a single workload: priorities 0 and {DEFAULT_CONTROL_PRIORITY}, mask {1 | 1 << DEFAULT_CONTROL_PRIORITY}), "
    "so PFC headroom is carved only for them",
}


def run_defaults(static: Mapping[str, str]) -> dict[str, str]:
    """Attribute name (``Type::Attribute``) → what a run uses instead of its ``static`` default (name → ns-3
    text), for the attributes where that differs: per switch class, per transport (``ib: 26``), with IB
    congestion control (``ib with --ib-cc: 65536``)."""
    out = dict(_DERIVED)
    plain = {t: transport_attributes(t) for t in TRANSPORTS}
    ib_cc = transport_attributes("ib", ib_cc=True)
    for name in sorted({*plain["roce"], *plain["ib"], *ib_cc}):
        default = static.get(name, static.get(qualify_attribute(name)))
        values = {t: attrs.get(name, default) for t, attrs in plain.items()}
        differs = [f"{t}: {x}" for t, x in values.items() if x != default]
        if ib_cc.get(name, values["ib"]) != values["ib"]:
            differs.append(f"ib with --ib-cc: {ib_cc[name]}")
        if differs:
            out[name] = "; ".join(filter(None, (out.get(name), ", ".join(differs))))
    return out
