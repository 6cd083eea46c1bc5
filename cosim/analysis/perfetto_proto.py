"""Perfetto's native protobuf trace format, encoded by hand (a small varint writer, no dependency): the
packets :func:`cosim.analysis.perfetto.write_proto` writes a run timeline with, for ui.perfetto.dev and
trace_processor. A ``Trace`` is a sequence of ``TracePacket`` (field 1), each a track descriptor or a
track event:

- a run is a process track: ``TrackDescriptor{uuid, process{pid, process_name}}``;
- a slice track (one per lane) is a thread of it: ``TrackDescriptor{uuid, parent_uuid, thread{pid, tid,
  thread_name}}``; a slice is a ``TYPE_SLICE_BEGIN`` event (name, category, the args as debug annotations)
  and a ``TYPE_SLICE_END`` event on that track;
- a counter track is ``TrackDescriptor{uuid, parent_uuid, name, counter{}}`` with ``TYPE_COUNTER`` events
  (``counter_value``).

Field numbers are those of Perfetto's public protos (protos/perfetto/trace/trace_packet.proto,
track_event/track_event.proto, track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto,
debug_annotation.proto). Timestamps are integer ns on the default trace clock (Perfetto has no finer unit):
a stored time in ps is rounded to the nearest ns, which keeps the slices of a track in order and apart
(rounding is monotone). Every packet is on one packet sequence; the first clears its incremental state.
Events are written in time order, a track's ends before its next begins at equal times.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

PS_PER_NS = 1000
#: TracePacket fields
PACKET, TIMESTAMP, SEQUENCE_ID, TRACK_EVENT, SEQUENCE_FLAGS, TRACK_DESCRIPTOR = 1, 8, 10, 11, 13, 60
SEQ_INCREMENTAL_STATE_CLEARED = 1
#: TrackDescriptor fields
TD_UUID, TD_NAME, TD_PROCESS, TD_THREAD, TD_PARENT, TD_COUNTER = 1, 2, 3, 4, 5, 8
#: ProcessDescriptor / ThreadDescriptor fields
PD_PID, PD_NAME = 1, 6
THD_PID, THD_TID, THD_NAME = 1, 2, 5
#: TrackEvent fields and types
TE_ANNOTATIONS, TE_TYPE, TE_TRACK, TE_CATEGORIES, TE_NAME, TE_COUNTER_VALUE = 4, 9, 11, 22, 23, 30
SLICE_BEGIN, SLICE_END, COUNTER = 1, 2, 4
#: DebugAnnotation fields
DA_BOOL, DA_INT, DA_DOUBLE, DA_STRING, DA_JSON, DA_NAME = 2, 4, 5, 6, 9, 10
#: the packet sequence every packet is on
SEQUENCE = 1
_VARINT, _FIXED64, _BYTES = 0, 1, 2


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of ``n`` (a negative int64 as its 64-bit two's complement, 10 bytes)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def uint_field(field: int, n: int) -> bytes:
    """A varint field (uint64, int64, int32, enum, bool)."""
    return _key(field, _VARINT) + varint(int(n))


def bytes_field(field: int, data: bytes) -> bytes:
    """A length-delimited field: bytes, a string's UTF-8 or an embedded message."""
    return _key(field, _BYTES) + varint(len(data)) + data


def str_field(field: int, text: str) -> bytes:
    return bytes_field(field, text.encode("utf-8"))


def double_field(field: int, x: float) -> bytes:
    return _key(field, _FIXED64) + struct.pack("<d", x)


def annotation(name: str, value) -> bytes:
    """A DebugAnnotation of one args entry (None: nothing; lists and objects as JSON text)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return b""
    head = str_field(DA_NAME, name)
    if isinstance(value, bool):
        return head + uint_field(DA_BOOL, value)
    if isinstance(value, int):
        return head + uint_field(DA_INT, value)
    if isinstance(value, float):
        return head + double_field(DA_DOUBLE, value)
    if isinstance(value, str):
        return head + str_field(DA_STRING, value)
    return head + str_field(DA_JSON, json.dumps(value, sort_keys=True))


def annotations(args_json: str) -> bytes:
    """The debug annotations (TrackEvent field 4) of a slice's JSON args text."""
    return b"".join(bytes_field(TE_ANNOTATIONS, a) for k, v in json.loads(args_json).items()
                    if (a := annotation(k, v)))


def packet(body: bytes, timestamp_ns: int | None = None) -> bytes:
    """One TracePacket on the trace's sequence, framed as a Trace's ``packet`` field."""
    head = uint_field(TIMESTAMP, timestamp_ns) if timestamp_ns is not None else b""
    return bytes_field(PACKET, head + body + uint_field(SEQUENCE_ID, SEQUENCE))


def track_descriptor(uuid: int, *, parent: int | None = None, name: str | None = None, process=None,
                     thread=None, counter: bool = False) -> bytes:
    """A TrackDescriptor packet: ``process`` (pid, name), ``thread`` (pid, tid, name) or a counter track."""
    body = uint_field(TD_UUID, uuid)
    if parent is not None:
        body += uint_field(TD_PARENT, parent)
    if name is not None:
        body += str_field(TD_NAME, name)
    if process is not None:
        body += bytes_field(TD_PROCESS, uint_field(PD_PID, process[0]) + str_field(PD_NAME, process[1]))
    if thread is not None:
        body += bytes_field(TD_THREAD, uint_field(THD_PID, thread[0]) + uint_field(THD_TID, thread[1])
                            + str_field(THD_NAME, thread[2]))
    if counter:
        body += bytes_field(TD_COUNTER, b"")
    return packet(bytes_field(TRACK_DESCRIPTOR, body))


def ps_to_ns(ps: np.ndarray) -> np.ndarray:
    """int64 ns nearest to int64 ps (halves up): monotone, so ordered times stay ordered."""
    return (np.asarray(ps, np.int64) + PS_PER_NS // 2) // PS_PER_NS


def _event(kind: int, track_uuid: int, rest: bytes = b"") -> bytes:
    return bytes_field(TRACK_EVENT, uint_field(TE_TYPE, kind) + uint_field(TE_TRACK, track_uuid) + rest)


def slice_begin(track_uuid: int, body: bytes) -> bytes:
    """A TYPE_SLICE_BEGIN TrackEvent (a packet body) on a track; ``body``: its name, category and annotations
    as encoded fields."""
    return _event(SLICE_BEGIN, track_uuid, body)


def slice_end(track_uuid: int) -> bytes:
    """A TYPE_SLICE_END TrackEvent (a packet body): the open slice of the track ends."""
    return _event(SLICE_END, track_uuid)


def counter_event(track_uuid: int, value: int) -> bytes:
    """A TYPE_COUNTER TrackEvent (a packet body): the counter track's new value."""
    return _event(COUNTER, track_uuid, uint_field(TE_COUNTER_VALUE, value))
