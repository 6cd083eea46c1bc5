"""Export to and import from MLCommons Chakra execution traces (ET), protobuf schema ``et_def.proto``.

The message classes are built at runtime from a ``FileDescriptorProto`` written here from the public
schema (mlcommons/chakra ``schema/protobuf/et_def.proto``, package ``ChakraProtoMsg``: field numbers and enum
values as published), in a private descriptor pool, so only the ``protobuf`` wheel is needed (no protoc, no
``chakra`` package — the PyPI package of that name is unrelated).

Files written by :func:`write_chakra` into a directory:

- ``<prefix>.<rank>.et`` per rank (ASTRA-sim's naming): a stream of varint-length-delimited messages, one
  ``GlobalMetadata`` (version "0.0.4") then one ``Node`` per op in schedule order. Node ``id`` is the op's
  index within its rank, ``name`` its label, ``data_deps`` the ids of its deps.
- ``comm_group.json``: ``{pg_name: [ranks]}``; ``pg_name`` is the cosim group index as a string.

Mapping (attributes as ASTRA-sim's ETFeeder reads them):

=============== ================ ===========================================================================
cosim op        Node.type        attributes
=============== ================ ===========================================================================
COMPUTE         COMP_NODE        duration_micros = round(duration_ns/1000), at least 1 if duration_ns > 0;
                                 num_ops (int64) = flops
COLLECTIVE      COMM_COLL_NODE   comm_type (int64, CollectiveCommType), comm_size (int64) = bytes,
                                 pg_name (string)
SEND            COMM_SEND_NODE   comm_dst (int32), comm_size, comm_tag (int32) = match_id
RECV            COMM_RECV_NODE   comm_src (int32), comm_size, comm_tag
=============== ================ ===========================================================================

Every node also has ``is_cpu_op`` = false and, so that import reproduces the trace exactly, ``cosim_*``
attributes (duration_ns, phase, microbatch, layer, algo_hint, group for p2p); GlobalMetadata carries
``cosim_schema_version``, ``cosim_n_ranks``, ``cosim_group_kinds`` (JSON list) and ``cosim_specs`` (JSON).
Importing a foreign Chakra trace uses ``duration_micros``·1000 ns, matches collectives per process group in
issue order and sends to receives by (source, destination, tag) in order; METADATA_NODE and COMP_NODE
become compute ops; other node types and the REDUCE, GATHER, SCATTER and BARRIER collectives are rejected.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.trace import (
    SCHEMA_VERSION,
    AlgoHint,
    CollKind,
    GroupKind,
    OpKind,
    Phase,
    Trace,
    collective_call_ids,
)

CHAKRA_VERSION = "0.0.4"
COMM_GROUP_FILE = "comm_group.json"

# et_def.proto enums (values as published)
NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3, "COMP_NODE": 4,
              "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7, "STORAGE_NODE": 8, "BATCH_NODE": 9,
              "CHECKPOINT_NODE": 10}
COLL_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
              "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}
TO_CHAKRA_COLL = {CollKind.ALL_REDUCE: 0, CollKind.ALL_GATHER: 2, CollKind.BROADCAST: 5, CollKind.ALL_TO_ALL: 6,
                  CollKind.REDUCE_SCATTER: 7}
FROM_CHAKRA_COLL = {0: CollKind.ALL_REDUCE, 2: CollKind.ALL_GATHER, 5: CollKind.BROADCAST, 6: CollKind.ALL_TO_ALL,
                    7: CollKind.REDUCE_SCATTER, 8: CollKind.REDUCE_SCATTER}
_SCALARS = ["double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string", "bytes"]


@lru_cache(maxsize=1)
def messages() -> dict[str, type]:
    """Message classes of et_def.proto (AttributeProto, GlobalMetadata, Node, IOInfo, *List), built once."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    ptype = {"double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int32": F.TYPE_INT32, "int64": F.TYPE_INT64,
             "uint32": F.TYPE_UINT32, "uint64": F.TYPE_UINT64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
             "fixed32": F.TYPE_FIXED32, "fixed64": F.TYPE_FIXED64, "sfixed32": F.TYPE_SFIXED32,
             "sfixed64": F.TYPE_SFIXED64, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES}
    fd = descriptor_pb2.FileDescriptorProto(name="cosim_chakra_et_def.proto", package="ChakraProtoMsg",
                                            syntax="proto3")

    def field(msg: Any, name: str, number: int, ftype: int, label: int = F.LABEL_OPTIONAL,
              type_name: str | None = None, oneof: int | None = None, packed: bool | None = None) -> None:
        f = msg.field.add(name=name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof
        if packed is not None:
            f.options.packed = packed

    attr = fd.message_type.add(name="AttributeProto")
    field(attr, "name", 1, F.TYPE_STRING)
    field(attr, "doc_string", 2, F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for k, scalar in enumerate(_SCALARS):  # double_val = 3, double_list = 4, ..., bytes_list = 32
        list_name = scalar.capitalize() + "List"
        field(attr, f"{scalar}_val", 3 + 2 * k, ptype[scalar], oneof=0)
        field(attr, f"{scalar}_list", 4 + 2 * k, F.TYPE_MESSAGE, type_name=f".ChakraProtoMsg.{list_name}", oneof=0)
        lst = fd.message_type.add(name=list_name)
        field(lst, "values", 1, ptype[scalar], label=F.LABEL_REPEATED)
    meta = fd.message_type.add(name="GlobalMetadata")
    field(meta, "version", 1, F.TYPE_STRING)
    field(meta, "attr", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    nt = fd.enum_type.add(name="NodeType")
    for name, value in NODE_TYPES.items():
        nt.value.add(name=name, number=value)
    ct = fd.enum_type.add(name="CollectiveCommType")
    for name, value in COLL_TYPES.items():
        ct.value.add(name=name, number=value)
    io = fd.message_type.add(name="IOInfo")
    for k, name in enumerate(("values", "shapes", "types")):
        field(io, name, k + 1, F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    field(node, "id", 1, F.TYPE_UINT64)
    field(node, "name", 2, F.TYPE_STRING)
    field(node, "type", 3, F.TYPE_ENUM, type_name=".ChakraProtoMsg.NodeType")
    field(node, "ctrl_deps", 4, F.TYPE_UINT64, F.LABEL_REPEATED)
    field(node, "data_deps", 5, F.TYPE_UINT64, F.LABEL_REPEATED)
    field(node, "start_time_micros", 6, F.TYPE_UINT64)
    field(node, "duration_micros", 7, F.TYPE_UINT64)
    field(node, "inputs", 8, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    field(node, "outputs", 9, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    field(node, "attr", 10, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    # field 11 (storage, StorageInfo) is not needed here; protobuf keeps it as an unknown field on import.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    names = ["AttributeProto", "GlobalMetadata", "Node", "IOInfo"] + [s.capitalize() + "List" for s in _SCALARS]
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ChakraProtoMsg.{n}")) for n in names}


# --- varint-delimited stream ------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_stream(msgs: list[Any]) -> bytes:
    """Concatenate messages, each preceded by its length as a varint (Chakra's encode_message)."""
    parts = []
    for m in msgs:
        data = m.SerializeToString(deterministic=True)
        parts.append(_varint(len(data)))
        parts.append(data)
    return b"".join(parts)


def decode_stream(data: bytes, source: str) -> list[bytes]:
    """Split a varint-delimited stream into message payloads; CosimInputError if truncated."""
    out = []
    pos, n = 0, len(data)
    while pos < n:
        length, shift = 0, 0
        while True:
            if pos >= n or shift > 63:
                raise CosimInputError(source, f"truncated or corrupt length prefix at byte {pos}")
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if pos + length > n:
            raise CosimInputError(source, f"message at byte {pos} is truncated ({length} bytes announced)")
        out.append(data[pos:pos + length])
        pos += length
    return out


# --- export -----------------------------------------------------------------------------------------

def _attr(cls: Any, name: str, **value: Any) -> Any:
    return cls(name=name, **value)


def write_chakra(trace: Trace, directory: str | os.PathLike[str], prefix: str = "cosim") -> list[Path]:
    """Export ``trace`` as Chakra ET files (one per rank) plus ``comm_group.json`` in ``directory``; returns
    the paths written (rank files in rank order, then the group file)."""
    from cosim.h5io import atomic_output

    M = messages()
    A, Node = M["AttributeProto"], M["Node"]
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    ptr = trace.rank_ptr
    kinds = [GroupKind(k).name.lower() for k in trace.group_kind]
    meta = M["GlobalMetadata"](version=CHAKRA_VERSION, attr=[
        _attr(A, "cosim_schema_version", int64_val=SCHEMA_VERSION),
        _attr(A, "cosim_n_ranks", int64_val=trace.n_ranks),
        _attr(A, "cosim_group_kinds", string_val=json.dumps(kinds)),
        _attr(A, "cosim_specs", string_val=trace.specs)])
    written = []
    cols = {k: getattr(trace, k).tolist() for k in ("kind", "phase", "duration_ns", "flops", "bytes", "coll_kind",
                                                     "group", "peer", "match_id", "algo_hint", "label",
                                                     "microbatch", "layer")}
    dep_ptr, dep_idx = trace.dep_ptr.tolist(), trace.dep_idx.tolist()
    for r in range(trace.n_ranks):
        lo, hi = int(ptr[r]), int(ptr[r + 1])
        nodes = [meta]
        for i in range(lo, hi):
            k = cols["kind"][i]
            common = [_attr(A, "is_cpu_op", bool_val=False),
                      _attr(A, "cosim_phase", int32_val=cols["phase"][i]),
                      _attr(A, "cosim_microbatch", int32_val=cols["microbatch"][i]),
                      _attr(A, "cosim_layer", int32_val=cols["layer"][i])]
            node = Node(id=i - lo, name=trace.labels[cols["label"][i]],
                        data_deps=[d - lo for d in dep_idx[dep_ptr[i]:dep_ptr[i + 1]]])
            if k == OpKind.COMPUTE:
                node.type = NODE_TYPES["COMP_NODE"]
                # Chakra counts microseconds (ASTRA-sim multiplies by 1000); keep non-zero work non-zero
                ns = cols["duration_ns"][i]
                node.duration_micros = max(1, (ns + 500) // 1000) if ns > 0 else 0
                attrs = [_attr(A, "num_ops", int64_val=cols["flops"][i]),
                         _attr(A, "cosim_duration_ns", int64_val=cols["duration_ns"][i])]
            elif k == OpKind.COLLECTIVE:
                node.type = NODE_TYPES["COMM_COLL_NODE"]
                attrs = [_attr(A, "comm_type", int64_val=TO_CHAKRA_COLL[CollKind(cols["coll_kind"][i])]),
                         _attr(A, "comm_size", int64_val=cols["bytes"][i]),
                         _attr(A, "pg_name", string_val=str(cols["group"][i])),
                         _attr(A, "cosim_algo_hint", int32_val=cols["algo_hint"][i])]
            else:
                send = k == OpKind.SEND
                node.type = NODE_TYPES["COMM_SEND_NODE" if send else "COMM_RECV_NODE"]
                if cols["match_id"][i] > np.iinfo(np.int32).max:
                    raise CosimInputError("trace.match_id", "too many ops for Chakra's int32 comm_tag")
                attrs = [_attr(A, "comm_dst" if send else "comm_src", int32_val=cols["peer"][i]),
                         _attr(A, "comm_size", int64_val=cols["bytes"][i]),
                         _attr(A, "comm_tag", int32_val=cols["match_id"][i]),
                         _attr(A, "cosim_group", int32_val=cols["group"][i])]
            node.attr.extend(common + attrs)
            nodes.append(node)
        path = out_dir / f"{prefix}.{r}.et"
        with atomic_output(path) as tmp:
            tmp.write_bytes(encode_stream(nodes))
        written.append(path)
    groups = {str(g): trace.group_members(g).tolist() for g in range(trace.n_groups)}
    gpath = out_dir / COMM_GROUP_FILE
    with atomic_output(gpath) as tmp:
        tmp.write_text(json.dumps(groups, indent=1) + "\n")
    written.append(gpath)
    return written


# --- import -----------------------------------------------------------------------------------------

def _attr_value(a: Any) -> Any:
    which = a.WhichOneof("value")
    if which is None:
        return None
    v = getattr(a, which)
    return list(v.values) if which.endswith("_list") else v


def _rank_files(directory: Path, prefix: str) -> list[Path]:
    pat = re.compile(re.escape(prefix) + r"\.(\d+)\.et$")
    found = {}
    for p in directory.iterdir() if directory.is_dir() else []:
        m = pat.fullmatch(p.name)
        if m:
            found[int(m.group(1))] = p
    if not found:
        raise CosimInputError(str(directory), f"no Chakra files {prefix}.<rank>.et found",
                              "point at the directory written by `cosim trace --chakra DIR`")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise CosimInputError(str(directory), f"rank files are missing for ranks {missing[:5]}")
    return [found[r] for r in range(len(found))]


def read_chakra(directory: str | os.PathLike[str], prefix: str = "cosim") -> Trace:
    """Import Chakra ET files ``<prefix>.<rank>.et`` (and ``comm_group.json``) from ``directory`` as a
    Trace, identical to the exported one for files written by :func:`write_chakra`. Missing, truncated or
    malformed input is a CosimInputError naming the file."""
    from google.protobuf.message import DecodeError

    M = messages()
    d = Path(directory)
    files = _rank_files(d, prefix)
    n_ranks = len(files)
    meta_attrs: dict[str, Any] = {}
    per_rank: list[list[Any]] = []
    for r, path in enumerate(files):
        payloads = decode_stream(path.read_bytes(), str(path))
        if not payloads:
            raise CosimInputError(str(path), "is empty (expected GlobalMetadata then Node messages)")
        try:
            meta = M["GlobalMetadata"].FromString(payloads[0])
            nodes = [M["Node"].FromString(p) for p in payloads[1:]]
        except DecodeError as exc:
            raise CosimInputError(str(path), f"is not a Chakra ET protobuf stream ({exc})") from None
        if r == 0:
            meta_attrs = {a.name: _attr_value(a) for a in meta.attr}
        per_rank.append(nodes)

    # groups
    group_kinds = json.loads(meta_attrs.get("cosim_group_kinds") or "[]")
    gfile = d / COMM_GROUP_FILE
    groups: dict[str, list[int]] = {}
    if gfile.is_file():
        try:
            raw = json.loads(gfile.read_text())
            groups = {str(k): sorted(int(x) for x in v) for k, v in raw.items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise CosimInputError(str(gfile), f"is not a {{pg_name: [ranks]}} JSON object ({exc})") from None
    names = sorted(groups, key=lambda k: (0, int(k)) if k.isdigit() else (1, k))
    if any(not (0 <= x < n_ranks) for v in groups.values() for x in v):
        raise CosimInputError(str(gfile), f"names ranks outside 0..{n_ranks - 1}")
    index = {name: i for i, name in enumerate(names)}

    labels: dict[str, int] = {}
    cols: dict[str, list[int]] = {k: [] for k in ("rank", "kind", "phase", "duration_ns", "flops", "bytes",
                                                   "coll_kind", "group", "peer", "match_id", "algo_hint", "label",
                                                   "microbatch", "layer")}
    tags: list[int] = []
    deps_ptr = [0]
    deps_idx: list[int] = []
    offset = 0
    world_needed = False
    for r, nodes in enumerate(per_rank):
        path = str(files[r])
        pos = {}
        for j, node in enumerate(nodes):
            if node.id in pos:
                raise CosimInputError(path, f"node id {node.id} appears twice")
            pos[node.id] = j
        order = _topological(nodes, pos, path)
        new_index = {old: k for k, old in enumerate(order)}
        for j in order:
            node = nodes[j]
            a = {x.name: _attr_value(x) for x in node.attr}
            ntype = node.type
            kind = {4: OpKind.COMPUTE, 1: OpKind.COMPUTE, 7: OpKind.COLLECTIVE, 5: OpKind.SEND,
                    6: OpKind.RECV}.get(ntype)
            if kind is None:
                raise CosimInputError(path, f"node {node.id} has unsupported type {ntype} "
                                      "(cosim reads COMP, METADATA, COMM_COLL, COMM_SEND and COMM_RECV nodes)")
            coll, group, peer, nbytes, tag = CollKind.NONE, -1, -1, 0, -1
            dur = flops = 0
            if kind == OpKind.COMPUTE:
                dur = int(a["cosim_duration_ns"]) if "cosim_duration_ns" in a else int(node.duration_micros) * 1000
                flops = int(a.get("num_ops") or 0)
            else:
                nbytes = int(a.get("comm_size") or 0)
                if kind == OpKind.COLLECTIVE:
                    ct = int(a.get("comm_type") or 0)
                    if ct not in FROM_CHAKRA_COLL:
                        name = {v: k for k, v in COLL_TYPES.items()}.get(ct, str(ct))
                        raise CosimInputError(path, f"node {node.id} uses unsupported collective {name}")
                    coll = FROM_CHAKRA_COLL[ct]
                    pg = a.get("pg_name")
                    if pg:
                        if pg not in index:
                            raise CosimInputError(str(gfile), f"has no process group {pg!r} (used by {path})")
                        group = index[pg]
                    else:
                        world_needed = True
                        group = -2  # resolved to a WORLD group below
                else:
                    key = "comm_dst" if kind == OpKind.SEND else "comm_src"
                    if key not in a:
                        raise CosimInputError(path, f"node {node.id} has no {key} attribute")
                    peer = int(a[key])
                    tag = int(a.get("comm_tag") or 0)
                    group = int(a.get("cosim_group", -1))
            cols["rank"].append(r)
            cols["kind"].append(int(kind))
            cols["phase"].append(int(a.get("cosim_phase", Phase.OTHER)))
            cols["duration_ns"].append(dur)
            cols["flops"].append(flops)
            cols["bytes"].append(nbytes)
            cols["coll_kind"].append(int(coll))
            cols["group"].append(group)
            cols["peer"].append(peer)
            cols["match_id"].append(-1)
            cols["algo_hint"].append(int(a.get("cosim_algo_hint", AlgoHint.AUTO)))
            cols["label"].append(labels.setdefault(node.name, len(labels)))
            cols["microbatch"].append(int(a.get("cosim_microbatch", -1)))
            cols["layer"].append(int(a.get("cosim_layer", -1)))
            tags.append(tag)
            for dep in sorted({new_index[pos[x]] for x in list(node.data_deps) + list(node.ctrl_deps)}):
                deps_idx.append(offset + dep)
            deps_ptr.append(len(deps_idx))
        offset += len(nodes)

    group_ptr = [0]
    group_ranks: list[int] = []
    kinds: list[int] = []
    for i, name in enumerate(names):
        group_ranks.extend(groups[name])
        group_ptr.append(len(group_ranks))
        known = len(group_kinds) == len(names) and str(group_kinds[i]).upper() in GroupKind.__members__
        kinds.append(int(GroupKind[str(group_kinds[i]).upper()]) if known else int(GroupKind.OTHER))
    if world_needed:
        world = len(names)
        group_ranks.extend(range(n_ranks))
        group_ptr.append(len(group_ranks))
        kinds.append(int(GroupKind.WORLD))
        cols["group"] = [world if g == -2 else g for g in cols["group"]]

    arr = {k: np.asarray(v, dtype=np.int64) for k, v in cols.items()}
    arr["match_id"] = _match_p2p(arr["rank"], arr["kind"], arr["peer"], np.asarray(tags, dtype=np.int64), str(d))
    arr["coll_id"] = collective_call_ids(arr["rank"], arr["kind"], arr["group"], len(kinds))
    specs = meta_attrs.get("cosim_specs") or "{}"
    try:
        return Trace(n_ranks=n_ranks, **arr, dep_ptr=np.asarray(deps_ptr, dtype=np.int64),
                     dep_idx=np.asarray(deps_idx, dtype=np.int64), labels=tuple(labels),
                     group_ptr=np.asarray(group_ptr, dtype=np.int64), group_ranks=np.asarray(group_ranks),
                     group_kind=np.asarray(kinds, dtype=np.uint8), specs=specs)
    except CosimInputError as exc:
        raise CosimInputError(str(d), f"{exc.field}: {exc.problem}", exc.fix) from None


def _topological(nodes: list[Any], pos: dict[int, int], path: str) -> list[int]:
    """Node positions in an order where deps come first, keeping file order where possible."""
    import heapq

    n = len(nodes)
    indeg = [0] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for j, node in enumerate(nodes):
        for dep in set(node.data_deps) | set(node.ctrl_deps):
            if dep not in pos:
                raise CosimInputError(path, f"node {node.id} depends on unknown node {dep}")
            children[pos[dep]].append(j)
            indeg[j] += 1
    heap = [j for j in range(n) if indeg[j] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        j = heapq.heappop(heap)
        order.append(j)
        for c in children[j]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, c)
    if len(order) < n:
        raise CosimInputError(path, "node dependencies contain a cycle")
    return order


def _match_p2p(rank: np.ndarray, kind: np.ndarray, peer: np.ndarray, tag: np.ndarray, source: str) -> np.ndarray:
    """match_id for imported sends/recvs: the k-th send src→dst with tag t pairs with the k-th such recv;
    the id is the send's global op index."""
    out = np.full(rank.size, -1, dtype=np.int64)
    queues: dict[tuple[int, int, int], list[int]] = {}
    for i in np.flatnonzero(kind == OpKind.SEND).tolist():
        queues.setdefault((int(rank[i]), int(peer[i]), int(tag[i])), []).append(i)
    for q in queues.values():
        q.reverse()
    for i in np.flatnonzero(kind == OpKind.RECV).tolist():
        q = queues.get((int(peer[i]), int(rank[i]), int(tag[i])))
        if not q:
            raise CosimInputError(source, f"recv on rank {int(rank[i])} from {int(peer[i])} (tag {int(tag[i])}) "
                                  "has no matching send")
        s = q.pop()
        out[s] = s
        out[i] = s
    unmatched = [i for q in queues.values() for i in q]
    if unmatched:
        i = min(unmatched)
        raise CosimInputError(source, f"send on rank {int(rank[i])} to {int(peer[i])} (tag {int(tag[i])}) has no "
                              "matching recv")
    return out
