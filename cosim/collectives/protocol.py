"""NCCL's wire protocols and the pipeline step each one moves data in.

NCCL gives every connection a buffer of NCCL_STEPS = 8 slots; a kernel moves data one slot (a *step*) at a
time, so a collective is pipelined in steps of ``buffer / 8`` bytes whatever the caller's message size.
Buffer sizes (NCCL ``src/init.cc``, ``src/include/device.h``, 2.8–2.19):

- Simple: ``DEFAULT_BUFFSIZE`` = 4 MiB → 512 KiB steps, all payload;
- LL: ``NCCL_LL_LINES_PER_THREAD (8) · NCCL_LL_MAX_NTHREADS (512) · NCCL_STEPS · 16 B`` = 512 KiB → 64 KiB
  steps of 16-byte lines that carry 8 bytes of data and 8 of flags: 32 KiB of payload a step;
- LL128: ``NCCL_LL128_ELEMS_PER_THREAD (120) · NCCL_LL128_MAX_NTHREADS (640) · NCCL_STEPS · 8 B`` =
  4,915,200 B → 614,400-byte steps of 128-byte lines with 120 bytes of data: 576,000 B of payload a step.

The tree all-reduce (``computeColl`` in NCCL ``src/enqueue.cc``) moves one step per chunk and, for Simple,
halves the chunk while the call is short against the tree's depth d: while S / (C · chunk) < 8d and
chunk > 128 KiB, then < 4d and > 64 KiB, then < d and > 32 KiB (C channels). LL128 halves it while
S / (C · chunk) < 64·m/ppn and chunk > 128 KiB, then < 16·m/ppn and > 32 KiB, with m = 1 + ⌊log2 k⌋ +
0.1·ppn (k servers, ppn ranks per server); the payload is then 120/128 of the chunk. LL keeps its step.
"""

from __future__ import annotations

import math
from enum import IntEnum


class Protocol(IntEnum):
    """NCCL's wire protocols: low latency, low latency with 128-byte lines, and the bandwidth one."""
    LL = 0
    LL128 = 1
    SIMPLE = 2


#: NCCL_STEPS: buffer slots per connection
NCCL_STEPS = 8
#: bytes of one step of each protocol's buffer (wire bytes, flags included)
STEP_BYTES = {Protocol.LL: (8 * 512 * NCCL_STEPS * 16) // NCCL_STEPS,
              Protocol.LL128: (120 * 640 * NCCL_STEPS * 8) // NCCL_STEPS,
              Protocol.SIMPLE: (4 << 20) // NCCL_STEPS}


def payload_bytes(protocol: Protocol, wire_bytes: int) -> int:
    """The data a step (or chunk) of ``wire_bytes`` carries under ``protocol``."""
    protocol = Protocol(protocol)
    if protocol == Protocol.LL:
        return wire_bytes // 2
    if protocol == Protocol.LL128:
        return wire_bytes * 120 // 128
    return wire_bytes


def tree_chunk_bytes(protocol: Protocol, size_bytes: int, n_channels: int, depth: int, n_servers: int,
                     ranks_per_server: float) -> int:
    """Payload bytes of one pipeline chunk of NCCL's tree all-reduce (module docstring)."""
    protocol = Protocol(protocol)
    chunk = STEP_BYTES[protocol]
    per = max(int(size_bytes), 0) // max(int(n_channels), 1)
    if protocol == Protocol.SIMPLE:
        for factor, floor in ((8, 128 << 10), (4, 64 << 10), (1, 32 << 10)):
            while per // chunk < depth * factor and chunk > floor:
                chunk //= 2
    elif protocol == Protocol.LL128:
        ppn = max(float(ranks_per_server), 1.0)
        m = 1 + int(math.floor(math.log2(max(n_servers, 1)))) + 0.1 * ppn
        for factor, floor in ((64, 128 << 10), (16, 32 << 10)):
            while per // chunk < m * factor / ppn and chunk > floor:
                chunk //= 2
    return payload_bytes(protocol, chunk)
