"""Sets of point-to-point flows as arrays, and the built-in traffic patterns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FlowSet:
    """Flows ``i``: ``size_bytes[i]`` of payload from host ``src[i]`` to ``dst[i]``, starting at ``start_ns[i]``."""

    src: np.ndarray  # int32 node id
    dst: np.ndarray  # int32 node id
    size_bytes: np.ndarray  # int64 payload bytes
    start_ns: np.ndarray  # float64 start time, ns
    priority: np.ndarray  # uint8 priority class 0..7

    def __post_init__(self) -> None:
        n = self.src.size
        for name in ("dst", "size_bytes", "start_ns", "priority"):
            if getattr(self, name).size != n:
                raise CosimInputError(f"flows.{name}", f"has {getattr(self, name).size} entries, src has {n}")
        if n and (self.size_bytes < 0).any():
            raise CosimInputError("flows.size_bytes", "must be >= 0")
        if n and (self.start_ns < 0).any():
            raise CosimInputError("flows.start_ns", "must be >= 0")
        if n and (self.src == self.dst).any():
            raise CosimInputError("flows.dst", "a flow's destination must differ from its source")

    @property
    def n_flows(self) -> int:
        """Number of flows."""
        return int(self.src.size)

    @classmethod
    def from_arrays(cls, src, dst, size_bytes, start_ns=None, priority=None) -> "FlowSet":
        """Build from array-likes with the right dtypes (start 0 and priority 0 by default)."""
        src = np.asarray(src, dtype=np.int32)
        n = src.size
        return cls(
            src=src,
            dst=np.asarray(dst, dtype=np.int32),
            size_bytes=np.broadcast_to(np.asarray(size_bytes, dtype=np.int64), (n,)).copy(),
            start_ns=np.zeros(n) if start_ns is None else np.broadcast_to(np.asarray(start_ns, np.float64), (n,)).copy(),
            priority=np.zeros(n, np.uint8) if priority is None else np.broadcast_to(np.asarray(priority, np.uint8), (n,)).copy(),
        )


def incast(hosts: np.ndarray, *, receiver_index: int = 0, size_bytes: int) -> FlowSet:
    """Every host but ``hosts[receiver_index]`` sends ``size_bytes`` to it, all at time 0 (N-to-1 incast)."""
    hosts = np.asarray(hosts, dtype=np.int32)
    if hosts.size < 2:
        raise CosimInputError("hosts", f"an incast needs at least 2 hosts, got {hosts.size}")
    receiver = hosts[receiver_index]
    senders = np.delete(hosts, receiver_index)
    return FlowSet.from_arrays(senders, np.full(senders.size, receiver), size_bytes)


def permutation(hosts: np.ndarray, *, shift: int = 1, size_bytes: int) -> FlowSet:
    """Host ``hosts[i]`` sends ``size_bytes`` to ``hosts[(i + shift) % n]``, all at time 0."""
    hosts = np.asarray(hosts, dtype=np.int32)
    if shift % hosts.size == 0:
        raise CosimInputError("shift", f"shift {shift} maps every host to itself with {hosts.size} hosts")
    return FlowSet.from_arrays(hosts, np.roll(hosts, -shift), size_bytes)
