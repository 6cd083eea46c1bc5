"""Trace files: HDF5 round trip and validation, Chakra export/import, shipped examples, schema docs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

import cosim.workload.trace as trace_mod
from cosim.errors import CosimInputError
from cosim.workload.builder import build_trace
from cosim.workload.chakra import (
    COLL_TYPES,
    NODE_TYPES,
    decode_stream,
    messages,
    read_chakra,
    write_chakra,
)
from cosim.workload.examples import EXAMPLES, regenerate
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import (
    OP_COLUMNS,
    CollKind,
    GroupKind,
    OpKind,
    Trace,
    read_trace,
    write_trace,
)
from cosim.workload.validate import check_trace

REPO = Path(__file__).resolve().parents[1]

CONFIGS = [
    ("llama2-7b", dict(num_layers=2), dict(tp=2, pp=2, dp=2, global_batch_size=8)),
    ("llama2-13b", dict(num_layers=4, seq_length=512), dict(tp=2, cp=2, pp=2, vpp=2, sequence_parallel=True,
                                                            global_batch_size=4, recompute=True)),
    ("mixtral-8x7b", dict(num_layers=2, seq_length=256), dict(tp=2, dp=4, ep=2, sequence_parallel=True,
                                                              zero_stage=1, global_batch_size=8)),
    ("gpt3-175b", dict(num_layers=2, seq_length=128), dict(pp=2, dp=2, zero_stage=3, global_batch_size=4)),
]


@pytest.fixture(scope="module", params=range(len(CONFIGS)), ids=[c[0] for c in CONFIGS])
def trace(request):
    name, mo, po = CONFIGS[request.param]
    return build_trace(get_model(name, **mo), ParallelismSpec(**po), get_hardware("h100"))


# --- HDF5 -------------------------------------------------------------------------------------------

def test_hdf5_round_trip(trace, tmp_path):
    path = tmp_path / "t.h5"
    write_trace(path, trace)
    back = read_trace(path)
    assert back.equals(trace)
    assert back.spec_dict()["parallelism"] == trace.spec_dict()["parallelism"]
    with h5py.File(path) as f:
        assert f.attrs["schema"] == "cosim.trace" and f.attrs["schema_version"] == 1
        assert json.loads(f.attrs["model"])["name"] == trace.spec_dict()["model"]["name"]
        for name, (dtype, units, _, enum) in OP_COLUMNS.items():
            ds = f["ops"][name]
            assert ds.dtype == np.dtype(dtype) and ds.attrs["units"] == units and ds.attrs["description"]
            if enum is not None:
                assert json.loads(ds.attrs["enum"]) == {e.name: int(e.value) for e in enum}
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temporary


def _corrupt(src: Path, dst: Path, edit) -> Path:
    dst.write_bytes(src.read_bytes())
    with h5py.File(dst, "r+") as f:
        edit(f)
    return dst


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("h5") / "small.h5"
    name, mo, po = CONFIGS[0]
    write_trace(path, build_trace(get_model(name, **mo), ParallelismSpec(**po), get_hardware("h100")))
    return path


def _replace(f, name, data):
    del f[name]
    f.create_dataset(name, data=data)


@pytest.mark.parametrize("edit, message", [
    (lambda f: f.attrs.__setitem__("schema", "cosim.results"), "is not a cosim trace"),
    (lambda f: f.attrs.__setitem__("schema_version", 99), "schema version 99"),
    (lambda f: f["ops"].__delitem__("bytes"), "missing dataset /ops/bytes"),
    (lambda f: _replace(f, "ops/duration_ns", f["ops/duration_ns"][()].astype(float)), "1-D integer array"),
    (lambda f: _replace(f, "deps/idx", f["deps/idx"][()] + 10**6), "trace.dep_idx"),
    (lambda f: _replace(f, "ops/kind", np.full(f["ops/kind"].shape, 9, dtype=np.uint8)), "trace.kind: value 9"),
    (lambda f: _replace(f, "ops/rank", f["ops/rank"][()][::-1]), "trace.rank"),
    (lambda f: _replace(f, "ops/label", f["ops/label"][()][:-1]), "trace.label: has"),
    (lambda f: f.attrs.__setitem__("model", "{not json"), "malformed spec attributes"),
    (lambda f: f.__delitem__("groups"), "missing group /groups"),
])
def test_malformed_files_raise_input_errors_naming_the_file(small_file, tmp_path, edit, message):
    bad = _corrupt(small_file, tmp_path / "bad.h5", edit)
    with pytest.raises(CosimInputError, match=re.escape(message)) as err:
        read_trace(bad)
    assert str(bad) in str(err.value)


def test_not_hdf5_and_missing_files(tmp_path):
    text = tmp_path / "x.h5"
    text.write_text("hello")
    with pytest.raises(CosimInputError, match="is not a readable HDF5 file"):
        read_trace(text)
    with pytest.raises(CosimInputError, match="no such trace file"):
        read_trace(tmp_path / "missing.h5")


def test_trace_construction_rejects_inconsistent_arrays(trace):
    fields = {f.name: getattr(trace, f.name) for f in dataclasses.fields(Trace)}
    # a dependency on a later op
    dep_idx = trace.dep_idx.copy()
    dep_idx[0] = trace.n_ops - 1
    with pytest.raises(CosimInputError, match="not an earlier op"):
        Trace(**{**fields, "dep_idx": dep_idx})
    # a compute op with bytes
    b = trace.bytes.copy()
    b[np.flatnonzero(trace.kind == OpKind.COMPUTE)[0]] = 5
    with pytest.raises(CosimInputError, match="compute ops must have bytes = 0"):
        Trace(**{**fields, "bytes": b})
    # a collective on a group that does not contain its rank
    g = trace.group.copy()
    i = np.flatnonzero(trace.kind == OpKind.COLLECTIVE)[0]
    g[i] = next(k for k in range(trace.n_groups) if trace.rank[i] not in trace.group_members(k))
    with pytest.raises(CosimInputError, match="does not contain that rank"):
        Trace(**{**fields, "group": g})
    assert not trace.bytes.flags.writeable


def test_check_trace_catches_broken_matching(trace):
    check_trace(trace)
    fields = {f.name: getattr(trace, f.name) for f in dataclasses.fields(Trace)}
    sends = np.flatnonzero(trace.kind == OpKind.SEND)
    if sends.size:
        nb = trace.bytes.copy()
        nb[sends[0]] += 1
        with pytest.raises(CosimInputError, match="disagree on bytes"):
            check_trace(Trace(**{**fields, "bytes": nb}))
    colls = np.flatnonzero(trace.kind == OpKind.COLLECTIVE)
    cid = trace.coll_id.copy()
    cid[colls[0]] = colls[-1] + 10**6  # one member split off into its own call
    with pytest.raises(CosimInputError, match="members"):
        check_trace(Trace(**{**fields, "coll_id": cid}))


def test_deadlock_is_detected():
    # two ranks that each wait for the other's send before sending: a cycle through send→recv edges
    tr = Trace(n_ranks=2, rank=[0, 0, 1, 1], kind=[OpKind.RECV, OpKind.SEND, OpKind.RECV, OpKind.SEND],
               phase=[0] * 4, duration_ns=[0] * 4, flops=[0] * 4, bytes=[8] * 4, coll_kind=[0] * 4, group=[-1] * 4,
               peer=[1, 1, 0, 0], match_id=[3, 1, 1, 3], coll_id=[-1] * 4, algo_hint=[0] * 4, label=[0, 1, 0, 1],
               microbatch=[0] * 4, layer=[-1] * 4, dep_ptr=[0, 0, 1, 1, 2], dep_idx=[0, 2], labels=("recv", "send"),
               group_ptr=[0], group_ranks=[], group_kind=[])
    with pytest.raises(CosimInputError, match="dependency cycle or deadlock"):
        check_trace(tr)


# --- Chakra -----------------------------------------------------------------------------------------

def test_chakra_round_trip_reproduces_every_op(trace, tmp_path):
    files = write_chakra(trace, tmp_path)
    assert len(files) == trace.n_ranks + 1 and files[-1].name == "comm_group.json"
    back = read_chakra(tmp_path)
    assert back.equals(trace)


def test_chakra_files_follow_et_def(tmp_path):
    name, mo, po = CONFIGS[0]
    tr = build_trace(get_model(name, **mo), ParallelismSpec(**po), get_hardware("h100"))
    write_chakra(tr, tmp_path)
    M = messages()
    payloads = decode_stream((tmp_path / "cosim.0.et").read_bytes(), "x")
    meta = M["GlobalMetadata"].FromString(payloads[0])
    assert meta.version == "0.0.4"
    nodes = [M["Node"].FromString(p) for p in payloads[1:]]
    assert len(nodes) == int(tr.rank_ptr[1])
    by_type = {}
    for n in nodes:
        by_type.setdefault(n.type, n)
    assert set(by_type) == {NODE_TYPES["COMP_NODE"], NODE_TYPES["COMM_COLL_NODE"], NODE_TYPES["COMM_SEND_NODE"],
                            NODE_TYPES["COMM_RECV_NODE"]}
    coll = by_type[NODE_TYPES["COMM_COLL_NODE"]]
    attrs = {a.name: a for a in coll.attr}
    assert attrs["comm_type"].int64_val == COLL_TYPES["ALL_REDUCE"] and attrs["comm_size"].int64_val > 0
    assert attrs["pg_name"].WhichOneof("value") == "string_val"
    send = {a.name: a for a in by_type[NODE_TYPES["COMM_SEND_NODE"]].attr}
    assert send["comm_dst"].int32_val == 2 and send["comm_tag"].WhichOneof("value") == "int32_val"
    comp = by_type[NODE_TYPES["COMP_NODE"]]
    first_compute = int(np.flatnonzero(tr.kind[:tr.rank_ptr[1]] == OpKind.COMPUTE)[0])
    assert comp.duration_micros == max(1, round(tr.duration_ns[first_compute] / 1000))
    groups = json.loads((tmp_path / "comm_group.json").read_text())
    assert groups["0"] == tr.group_members(0).tolist()
    # wire format: field numbers of et_def.proto (Node.type = 3, data_deps = 5, AttributeProto.int64_val = 9)
    raw = M["Node"](id=7, type=NODE_TYPES["COMM_COLL_NODE"], data_deps=[1]).SerializeToString()
    assert raw == bytes([0x08, 7, 0x18, 7, 0x2A, 1, 1])
    assert M["AttributeProto"](name="a", int64_val=5).SerializeToString() == b"\x0a\x01a\x48\x05"


def _foreign_node(M, nid, ntype, deps=(), **attrs):
    node = M["Node"](id=nid, name=f"n{nid}", type=ntype, data_deps=list(deps), duration_micros=attrs.pop("us", 0))
    for k, v in attrs.items():
        kind = {"pg_name": "string_val", "comm_src": "int32_val", "comm_dst": "int32_val",
                "comm_tag": "int32_val"}.get(k, "int64_val")
        node.attr.append(M["AttributeProto"](name=k, **{kind: v}))
    return node


def test_import_foreign_chakra_trace(tmp_path):
    from cosim.workload.chakra import encode_stream

    M = messages()
    meta = M["GlobalMetadata"](version="0.0.4")
    for r in range(2):
        nodes = [meta,
                 _foreign_node(M, 10, NODE_TYPES["COMP_NODE"], us=5),
                 _foreign_node(M, 11, NODE_TYPES["COMM_COLL_NODE"], [10], comm_type=COLL_TYPES["ALL_REDUCE"],
                               comm_size=1024),  # no pg_name: the world
                 _foreign_node(M, 12, NODE_TYPES["COMM_SEND_NODE"] if r == 0 else NODE_TYPES["COMM_RECV_NODE"],
                               [11], comm_size=64, **({"comm_dst": 1} if r == 0 else {"comm_src": 0}), comm_tag=3)]
        (tmp_path / f"w.{r}.et").write_bytes(encode_stream(nodes))
    tr = read_chakra(tmp_path, prefix="w")
    check_trace(tr)
    assert tr.n_ranks == 2 and tr.n_ops == 6
    assert tr.duration_ns[0] == 5000 and tr.coll_kind[1] == CollKind.ALL_REDUCE
    assert tr.group_kind[tr.group[1]] == GroupKind.WORLD and tr.group_members(tr.group[1]).tolist() == [0, 1]
    assert tr.match_id[2] == tr.match_id[5] == 2 and tr.peer[5] == 0


def test_malformed_chakra_inputs(tmp_path):
    name, mo, po = CONFIGS[0]
    tr = build_trace(get_model(name, **mo), ParallelismSpec(**po), get_hardware("h100"))
    write_chakra(tr, tmp_path)
    f = tmp_path / "cosim.3.et"
    f.write_bytes(f.read_bytes()[:-7])
    with pytest.raises(CosimInputError, match="cosim.3.et"):
        read_chakra(tmp_path)
    f.write_bytes(b"\x05garbage-bytes")
    with pytest.raises(CosimInputError, match="cosim.3.et"):
        read_chakra(tmp_path)
    f.unlink()
    with pytest.raises(CosimInputError, match=r"missing for ranks \[3\]"):
        read_chakra(tmp_path)
    with pytest.raises(CosimInputError, match="no Chakra files"):
        read_chakra(tmp_path / "nowhere")


# --- shipped examples and docs ----------------------------------------------------------------------

def test_shipped_examples_are_small_valid_and_regenerable(tmp_path):
    fresh = regenerate(tmp_path / "a")
    again = regenerate(tmp_path / "b")
    assert len(EXAMPLES) == len(fresh) == 4
    for ex, new, new2 in zip(EXAMPLES, fresh, again):
        assert new.read_bytes() == new2.read_bytes()  # bit-for-bit deterministic
        shipped = REPO / "traces" / ex.filename
        assert shipped.is_file(), f"{shipped} missing: run python -m cosim.workload.examples traces"
        assert shipped.stat().st_size < 200_000
        tr = read_trace(shipped)
        assert tr.equals(read_trace(new)), f"{shipped.name} is stale: run python -m cosim.workload.examples traces"
        check_trace(tr)
        assert tr.n_ranks == 8
        assert f"-o traces/{ex.filename}" in (REPO / "traces" / "README.md").read_text()


def test_schema_is_documented_in_module_and_readme():
    readme = (REPO / "traces" / "README.md").read_text()
    doc = trace_mod.__doc__
    for text in (doc, readme):
        for name, (dtype, _, _, enum) in OP_COLUMNS.items():
            assert re.search(rf"{name}\W+\s*\|?\s*{np.dtype(dtype).name}", text), (name, dtype)
            for e in enum or ():
                assert f"{int(e)} {e.name}" in text, (name, e)
        for e in GroupKind:
            assert f"{int(e)} {e.name}" in text
        for path in ("/deps/ptr", "/strings/labels", "schema_version"):
            assert path.strip("/").split("/")[-1] in text
