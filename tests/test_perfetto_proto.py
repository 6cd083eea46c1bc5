"""``cosim export --perfetto`` as Perfetto's protobuf trace, decoded here by a small decoder written from the
public protos (field numbers below), against the JSON export of the same runs; and counter decimation."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from decimal import Decimal

import numpy as np
import pytest
from conftest import run_main
from test_perfetto import (  # noqa: F401
    _main,
    _trace_processor_shell,
    by_run,
    export,
    flow_file,
    training_file,
)

from cosim.analysis.perfetto import decimation_keep
from cosim.analysis.perfetto_proto import varint
from cosim.results import read_results

# TracePacket: timestamp 8, trusted_packet_sequence_id 10, track_event 11, sequence_flags 13,
# track_descriptor 60. TrackDescriptor: uuid 1, name 2, process 3, thread 4, parent_uuid 5, counter 8.
# ProcessDescriptor: pid 1, process_name 6. ThreadDescriptor: pid 1, tid 2, thread_name 5.
# TrackEvent: debug_annotations 4, type 9 (1 begin, 2 end, 4 counter), track_uuid 11, categories 22, name 23,
# counter_value 30. DebugAnnotation: bool 2, int 4, double 5, string 6, legacy_json 9, name 10.


def fields(buf: bytes) -> list[tuple[int, object]]:
    """(field number, value) of a protobuf message: varints as int, fixed64 as bytes, length-delimited as bytes."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wire}")
        out.append((field, value))
    return out


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def one(msg, field, default=None):
    vals = [v for f, v in msg if f == field]
    assert len(vals) <= 1
    return vals[0] if vals else default


def decode_trace(data: bytes) -> dict:
    """Tracks (uuid -> (kind, pid, name)), slices per (pid, track name) [(name, category, begin_ns, end_ns,
    args)], counters per (pid, track name) [(ts_ns, value)], and checks on the way: one sequence, the first
    packet clears its state, a run's timestamps never decrease, each track alternates begin and end."""
    packets = [fields(v) for f, v in fields(data) if f == 1]
    tracks, processes = {}, {}
    open_slice = {}
    slices, counters = defaultdict(list), defaultdict(list)
    assert one(packets[0], 13) == 1
    last_ts = defaultdict(int)  # per process: a run's events are in time order
    for p in packets:
        assert one(p, 10) == 1  # every packet on the one sequence
        td, te = one(p, 60), one(p, 11)
        if td is None and te is None:
            continue
        if td is not None:
            td = fields(td)
            uuid, name = one(td, 1), one(td, 2, b"").decode()
            if one(td, 3) is not None:
                proc = fields(one(td, 3))
                processes[uuid] = one(proc, 1)
                tracks[uuid] = ("process", one(proc, 1), one(proc, 6).decode())
            elif one(td, 4) is not None:
                th = fields(one(td, 4))
                assert one(td, 5) in processes and one(th, 1) == processes[one(td, 5)]
                tracks[uuid] = ("thread", one(th, 1), one(th, 5).decode())
            else:
                assert one(td, 8) == b"" and one(td, 5) in processes
                tracks[uuid] = ("counter", processes[one(td, 5)], name)
            continue
        ts = one(p, 8)
        te = fields(te)
        kind, track = one(te, 9), one(te, 11)
        label = tracks[track]
        assert ts >= last_ts[label[1]]
        last_ts[label[1]] = ts
        if kind == 4:
            assert label[0] == "counter"
            counters[label[1:]].append((ts, one(te, 30)))
        elif kind == 1:
            assert label[0] == "thread" and track not in open_slice
            args = {}
            for f, a in te:
                if f == 4:
                    a = fields(a)
                    key = one(a, 10).decode()
                    for vf, conv in ((2, bool), (4, lambda x: x - (1 << 64) if x >> 63 else x),
                                     (5, lambda b: struct.unpack("<d", b)[0]), (6, bytes.decode),
                                     (9, lambda b: json.loads(b))):
                        if one(a, vf) is not None:
                            args[key] = conv(one(a, vf))
            open_slice[track] = (one(te, 23).decode(), one(te, 22).decode(), ts, args)
        else:
            assert kind == 2 and track in open_slice
            name, cat, begin, args = open_slice.pop(track)
            slices[label[1:]].append((name, cat, begin, ts, args))
    assert not open_slice
    return {"tracks": tracks, "slices": slices, "counters": counters}


def from_json(doc) -> dict:
    """The JSON export in the same shape, its times (exact ps) rounded to the nearest ns."""
    pids, threads, xs, cs = by_run(doc)
    ns = lambda us: int((Decimal(us) * 1_000_000 + 500) // 1000)  # noqa: E731  (ps, half up, to ns)
    slices, counters = defaultdict(list), defaultdict(list)
    for e in xs:
        slices[(e["pid"], threads[(e["pid"], e["tid"])])].append(
            (e["name"], e["cat"], ns(e["ts"]), ns(Decimal(e["ts"]) + Decimal(e["dur"])),
             json.loads(json.dumps(e["args"], default=float))))
    for e in cs:
        (arg, value), = e["args"].items()
        counters[(e["pid"], f"{e['name']} {arg}")].append((ns(e["ts"]), value))
    return {"pids": pids, "slices": slices, "counters": counters}


@pytest.mark.parametrize("which, extra", [("training", ()), ("training", ("--all-samples",)), ("flows", ())])
def test_protobuf_holds_the_json_exports_events(training_file, flow_file, tmp_path, which, extra):  # noqa: F811
    """Every slice (track, name, category, begin and end in ns, args) and every counter sample of the JSON
    export is in the protobuf trace, and nothing else; runs are processes named by the run."""
    path = training_file if which == "training" else flow_file
    want = from_json(export(path, tmp_path / "t.json", *extra))
    assert _main(["export", "--perfetto", str(path), "-o", str(tmp_path / "t.pftrace"), "-q", *extra]) == 0
    got = decode_trace((tmp_path / "t.pftrace").read_bytes())
    assert {t[2]: t[1] for t in got["tracks"].values() if t[0] == "process"} == want["pids"]
    assert set(got["slices"]) == set(want["slices"]) and set(got["counters"]) == set(want["counters"])
    for track, rows in want["slices"].items():
        assert sorted(got["slices"][track], key=repr) == sorted(rows, key=repr), track
    for track, rows in want["counters"].items():
        assert got["counters"][track] == sorted(rows, key=lambda r: r[0]), track
    n_slices = sum(map(len, got["slices"].values()))
    n_samples = sum(map(len, got["counters"].values()))
    assert n_slices >= (100 if which == "training" else 6) and n_samples > 0


def test_decimation_keeps_peaks_and_ends_of_every_bin(training_file, tmp_path):  # noqa: F811
    """By default a counter track keeps at most 3 samples per 1/2000 of the run (the builtin-like training
    run stores far more); each track keeps its peak and its last value; --all-samples keeps every stored one."""
    rec = read_results(training_file)["ib"]
    full = from_json(export(training_file, tmp_path / "a.json", "--run", "ib", "--all-samples"))["counters"]
    thin = from_json(export(training_file, tmp_path / "d.json", "--run", "ib"))["counters"]
    assert set(full) == set(thin)
    stored = sum(map(len, full.values()))
    assert sum(map(len, thin.values())) < stored
    queue_samples = sum(len(v) for k, v in full.items() if k[1].startswith("queue "))
    assert queue_samples == min(queue_samples, rec.queues["time_ns"].size)
    for track, rows in full.items():
        kept = thin[track]
        assert len(kept) <= 3 * 2000 and set(kept) <= set(rows)
        assert max(v for _, v in kept) == max(v for _, v in rows) and kept[-1] == rows[-1]


@pytest.mark.parametrize("series, time, value, bins, keep", [
    # one bin: the first peak, the first trough and the last sample
    ([0] * 5, [0, 1, 2, 3, 4], [1, 5, 0, 5, 2], 1, [False, True, True, False, True]),
    # two bins over [0, 10]: each bin keeps its own extremes and last sample
    ([0] * 6, [0, 1, 2, 6, 7, 8], [3, 9, 3, 1, 4, 2], 2, [True, True, True, True, True, True]),
    ([0] * 6, [0, 1, 2, 3, 4, 6], [3, 9, 3, 3, 3, 1], 2, [True, True, False, False, True, True]),
    # series are binned apart
    ([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [1, 2, 1, 7, 7, 7], 1, [True, True, True, True, False, True]),
])
def test_decimation_table(series, time, value, bins, keep):
    got = decimation_keep(np.array(series), np.array(time, np.int64), np.array(value, np.int64), 10, bins)
    assert got.tolist() == keep


@pytest.mark.parametrize("n, encoded", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
                                        (1 << 32, "8080808010"), (-1, "ffffffffffffffffff01")])
def test_varint_is_protobufs(n, encoded):
    assert varint(n).hex() == encoded


def test_default_output_is_protobuf_and_format_overrides_the_name(flow_file, tmp_path, capsys):  # noqa: F811
    """Without -o the export writes PATH.pftrace; --format json writes JSON whatever the name; a .json name
    alone chooses JSON."""
    copy = tmp_path / "incast.h5"
    copy.write_bytes(flow_file.read_bytes())
    code, out, _ = run_main(["export", "--perfetto", str(copy)], capsys)
    assert code == 0 and (tmp_path / "incast.pftrace").read_bytes()[:1] == b"\x0a"  # field 1, length-delimited
    code, _, _ = run_main(["export", "--perfetto", str(copy), "--format", "json", "-o", str(tmp_path / "x.trace")],
                          capsys)
    assert code == 0 and json.loads((tmp_path / "x.trace").read_text())["traceEvents"]


@pytest.mark.skipif(_trace_processor_shell() is None, reason="no trace_processor binary (set COSIM_TRACE_PROCESSOR)")
def test_perfettos_trace_processor_imports_the_protobuf(training_file, tmp_path):  # noqa: F811
    """Optional: Perfetto's own importer reads every slice and counter sample of the protobuf without error."""
    tp_api = pytest.importorskip("perfetto.trace_processor")
    assert _main(["export", "--perfetto", str(training_file), "-o", str(tmp_path / "t.pftrace"), "-q"]) == 0
    got = decode_trace((tmp_path / "t.pftrace").read_bytes())
    tp = tp_api.TraceProcessor(trace=str(tmp_path / "t.pftrace"),
                               config=tp_api.TraceProcessorConfig(bin_path=_trace_processor_shell()))
    try:
        assert next(iter(tp.query("select count(*) as n from slice"))).n == sum(map(len, got["slices"].values()))
        assert next(iter(tp.query("select count(*) as n from counter"))).n == sum(map(len, got["counters"].values()))
        assert not list(tp.query("select name from stats where severity in ('error', 'data_loss') and value > 0"))
    finally:
        tp.close()
