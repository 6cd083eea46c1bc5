"""Switch buffer defaults that scale with the fabric: a buffer per switch class, headroom only where needed.

Buffer per switch class
-----------------------
A switch's class is its capacity, the sum of its ports' rates (one direction): a leaf of 32 hosts and 32
uplinks at 400 Gbit/s is a 25.6 Tbit/s switch. Each class gets the shared packet buffer of the datacenter
switch chips of that capacity (:data:`SWITCH_CLASSES`; public figures and their sources in
docs/models/switch-buffers.md), the smallest class whose capacity covers the switch's; a switch beyond the
largest class (one simulated switch standing for several chips) gets that class's bytes per Tbit/s.
Switches of up to 12.8 Tbit/s keep the SharedBufferMmu::BufferBytes default of 32 MiB, so small fabrics
run exactly as with the single default. An explicit SharedBufferMmu::BufferBytes (``--set``) applies to
every switch instead, and credit-based (InfiniBand) fabrics have no shared buffer to size.

Headroom only for lossless priorities
-------------------------------------
PFC headroom is carved per (ingress port, lossless priority). A run's lossless priorities are the ones
its traffic uses, :func:`lossless_priority_mask`: the workloads' lossless data priorities and the
priority of ACKs and CNPs (HostNic::ControlPriority), not all eight; an explicit
SharedBufferMmu::LosslessPriorityMask still wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cosim.network.topology import SWITCH
from cosim.network.transport import qualify_attribute

MIB = 1 << 20

#: HostNic::ControlPriority default: the priority class of ACKs and CNPs
DEFAULT_CONTROL_PRIORITY = 7


@dataclass(frozen=True, slots=True)
class SwitchClass:
    """Datacenter switches of up to ``capacity_tbps`` (sum of port rates) and the buffer they carry."""

    capacity_tbps: float
    buffer_bytes: int
    examples: str


#: switch classes by capacity, smallest first (figures and sources: docs/models/switch-buffers.md)
SWITCH_CLASSES: tuple[SwitchClass, ...] = (
    SwitchClass(12.8, 32 * MIB, "Tomahawk 3 (32 x 400G); Tomahawk 2, Spectrum-2 (6.4T) carry 42 MB"),
    SwitchClass(25.6, 64 * MIB, "Tomahawk 4 (64 x 400G); Spectrum-3 (12.8T) carries 64 MB"),
    SwitchClass(51.2, 160 * MIB, "Tomahawk 5, Spectrum-4 (64 x 800G, 128 x 400G)"),
)


def switch_capacity_bps(fabric) -> np.ndarray:
    """float64 [n_nodes]: the sum of every node's port rates, bit/s (one direction); a fabric built from
    switches of a radix (cosim.network.clos) gives each switch at least its chip's ``radix × port rate``,
    cabled or not."""
    rate = np.asarray(fabric.link_rate_bps, np.float64)
    ends = np.concatenate([np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)])
    used = np.bincount(ends, weights=np.concatenate([rate, rate]), minlength=fabric.n_nodes)
    params = fabric.params if isinstance(fabric.params, Mapping) else {}
    if params.get("switch_radix") is None or params.get("switch_port_gbps") is None:
        return used
    chip = float(params["switch_radix"]) * float(params["switch_port_gbps"]) * 1e9
    return np.where(np.asarray(fabric.node_kind) == SWITCH, np.maximum(used, chip), used)


def class_buffer_bytes(capacity_bps: np.ndarray) -> np.ndarray:
    """int64: the buffer of a switch of each capacity (module docstring), bytes."""
    cap_tbps = np.asarray(capacity_bps, np.float64) / 1e12
    limits = np.array([c.capacity_tbps for c in SWITCH_CLASSES])
    sizes = np.array([c.buffer_bytes for c in SWITCH_CLASSES], np.int64)
    # a small tolerance: 64 x 400e9 is 25.6e12 up to rounding
    pick = np.minimum(np.searchsorted(limits, cap_tbps * (1 - 1e-9)), limits.size - 1)
    beyond = cap_tbps > limits[-1] * (1 + 1e-9)
    per_tbps = sizes[-1] / limits[-1]
    scaled = (np.ceil(cap_tbps * per_tbps / MIB) * MIB).astype(np.int64)
    return np.where(beyond, scaled, sizes[pick])


def explicit_attribute(attributes: Mapping[str, str] | None, name: str) -> str | None:
    """The value ``attributes`` give ns-3 attribute ``name`` (qualified or not), None if unset."""
    for key, value in (attributes or {}).items():
        if qualify_attribute(key) == qualify_attribute(name):
            return str(value)
    return None


def switch_buffer_bytes(fabric, attributes: Mapping[str, str] | None) -> np.ndarray | None:
    """uint64 [n_nodes]: the SharedBufferMmu::BufferBytes of every switch by its class (0 for hosts), or
    None when ``attributes`` set BufferBytes explicitly or the links run credit flow control."""
    if explicit_attribute(attributes, "SharedBufferMmu::BufferBytes") is not None:
        return None
    if explicit_attribute(attributes, "EgressPort::LinkFlowControl") == "credit":
        return None
    out = class_buffer_bytes(switch_capacity_bps(fabric))
    out[np.asarray(fabric.node_kind) != SWITCH] = 0
    return out.astype(np.uint64)


def lossless_priority_mask(lossless_priorities, lossy_priorities=(), *,
                           attributes: Mapping[str, str] | None = None) -> int | None:
    """SharedBufferMmu::LosslessPriorityMask of a run whose data travels on ``lossless_priorities`` and
    ``lossy_priorities`` (0..7): the lossless ones plus the control priority (HostNic::ControlPriority in
    ``attributes``, else 7) unless that one is lossy; None when ``attributes`` set the mask explicitly."""
    if explicit_attribute(attributes, "SharedBufferMmu::LosslessPriorityMask") is not None:
        return None
    control = explicit_attribute(attributes, "HostNic::ControlPriority")
    control = int(control) if control is not None and control.isdigit() else DEFAULT_CONTROL_PRIORITY
    lossy = {int(p) for p in lossy_priorities}
    mask = 0
    for p in {int(p) for p in lossless_priorities} | ({control} - lossy):
        mask |= 1 << p
    return mask


def class_table(fabric, buffer_bytes: np.ndarray) -> list[str]:
    """One line per switch class present: capacity, buffer and how many switches, as --dry-run shows it."""
    switches = np.asarray(fabric.node_kind) == SWITCH
    cap = np.round(switch_capacity_bps(fabric)[switches] / 1e9).astype(np.int64)
    buf = np.asarray(buffer_bytes, np.int64)[switches]
    pairs, counts = np.unique(np.stack([cap, buf]), axis=1, return_counts=True)
    return [f"{c / 1e3:g} Tbps: {b / MIB:g} MiB x {n}" for (c, b), n in zip(pairs.T.tolist(), counts.tolist())]
