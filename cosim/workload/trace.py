"""The workload trace: per-rank operations of one training iteration, and its HDF5 file format.

Schema ``cosim.trace`` version 1
================================

A trace is a table of *ops* (one row per operation of one rank) plus a table of communication *groups*.
Everything is columnar numpy; the same arrays are the fields of :class:`Trace` and the datasets of the file.

Ops (``/ops/<column>``, length ``n_ops``)
-----------------------------------------
Ops of a rank are contiguous and in that rank's schedule (issue) order; ``rank`` is non-decreasing.

============== ======= ===== ===========================================================================
column         dtype   unit  meaning
============== ======= ===== ===========================================================================
rank           int32         GPU rank that executes the op, 0 ≤ rank < n_ranks
kind           uint8         OpKind: 0 COMPUTE, 1 COLLECTIVE, 2 SEND, 3 RECV
phase          uint8         Phase: 0 FORWARD, 1 BACKWARD, 2 GRAD_SYNC, 3 OPTIMIZER, 4 OTHER
duration_ns    int64   ns    COMPUTE: time on the GPU; 0 for communication ops
flops          int64   FLOP  COMPUTE: floating-point operations (0 for memory-bound ops and for comm)
bytes          int64   B     communication size S (convention below); 0 for COMPUTE
coll_kind      uint8         CollKind: 0 NONE, 1 ALL_REDUCE, 2 REDUCE_SCATTER, 3 ALL_GATHER,
                             4 ALL_TO_ALL, 5 BROADCAST; NONE unless kind is COLLECTIVE
group          int32         COLLECTIVE: index into the groups table; SEND/RECV: the PP or CP group
                             holding both ranks (informative, may be -1); COMPUTE: -1
peer           int32         SEND: destination rank; RECV: source rank; -1 otherwise
match_id       int64         SEND and its RECV share it (the global op index of the SEND); -1 otherwise
coll_id        int64         all members' ops of one collective call share it (the lowest global op
                             index among them); -1 otherwise
algo_hint      uint8         AlgoHint: 0 AUTO, 1 RING, 2 TREE, 3 PAIRWISE (lowering may ignore it);
                             (collectives); SEND/RECV: 4 DEEPEP_HIGH_THROUGHPUT, 5 DEEPEP_LOW_LATENCY,
                             the kernels that move them (else 0)
label          int32         index into ``/strings/labels``, e.g. ``fwd/mb2/L3/attn_tp_allreduce``; under
                             two-micro-batch overlap an MoE layer's ops name their half after the
                             layer, ``fwd/mb2/L3/a/experts`` (MICROBATCH_HALVES)
microbatch     int32         micro-batch index, -1 for per-iteration ops (gradient sync, optimizer)
layer          int32         global transformer layer index, -1 for embedding/head/other ops
============== ======= ===== ===========================================================================

Byte convention (``bytes``, S): the per-rank buffer size as nccl-tests counts it.
ALL_REDUCE: the full buffer each rank holds (input = output size). REDUCE_SCATTER: the full, unsharded
input buffer (each rank keeps S/n). ALL_GATHER: the full, gathered output buffer (each rank contributes
S/n). ALL_TO_ALL: the total a rank sends (S/n to each member, itself included). BROADCAST: the buffer.
SEND/RECV: the message size. All members of one collective call carry the same S.

Dependencies (``/deps/ptr`` int64 length n_ops+1, ``/deps/idx`` int64): CSR lists; the deps of op i are
``idx[ptr[i]:ptr[i+1]]``, global op indices of *earlier ops of the same rank*. An op may start only when all
its deps have completed; there is no implicit dependency on the previous op. Cross-rank ordering is carried
by ``match_id`` and ``coll_id`` only. Semantics the network side implements:

- COMPUTE runs ``duration_ns`` on its rank's GPU. Compute ops of a rank form one chain through explicit deps
  (one compute stream), so they never overlap each other; communication overlaps compute freely.
- COLLECTIVE: a call starts when every member's op is ready, and completes for all members together.
- SEND starts when ready (eager: the receiver's buffer is assumed posted). RECV completes when it is ready
  *and* the matching SEND's data has arrived.
- Ops on one data-parallel communicator (gradient buckets, ZeRO gathers) are chained through deps in issue
  order, as NCCL runs one communicator's operations in order.

Groups (``/groups``)
--------------------
``ptr`` int64 (n_groups+1) and ``ranks`` int32: CSR member lists, ranks sorted increasingly; ``kind`` uint8
(n_groups) GroupKind: 0 TP, 1 CP, 2 PP, 3 DP (data-parallel incl. context-parallel ranks, the gradient
group), 4 EP, 5 EDP (expert data-parallel), 6 EMBD (first and last pipeline stage, tied embeddings),
7 WORLD, 8 OTHER.

Strings and specs
-----------------
``/strings/labels``: variable-length UTF-8 strings. Root attributes: ``schema`` = "cosim.trace",
``schema_version`` = 1, ``n_ranks``, ``n_ops``, ``n_groups``, ``generator`` (tool and version),
``spec_keys`` (JSON list) and one attribute per key (``model``, ``parallelism``, ``hardware``, ``derived``),
each a JSON object. Every dataset has ``units`` and ``description`` attributes; enum columns also carry
``enum`` (JSON name → value). Readers reject other schema names, newer versions, missing or mistyped
datasets and inconsistent contents with a CosimInputError naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from cosim.errors import CosimInputError

SCHEMA_NAME = "cosim.trace"
SCHEMA_VERSION = 1


class OpKind(IntEnum):
    """What an op does."""
    COMPUTE = 0
    COLLECTIVE = 1
    SEND = 2
    RECV = 3


class CollKind(IntEnum):
    """Collective operation of a COLLECTIVE op (NONE for other ops)."""
    NONE = 0
    ALL_REDUCE = 1
    REDUCE_SCATTER = 2
    ALL_GATHER = 3
    ALL_TO_ALL = 4
    BROADCAST = 5


class AlgoHint(IntEnum):
    """Suggested lowering of a collective; AUTO lets the collectives layer choose."""
    AUTO = 0
    RING = 1
    TREE = 2
    PAIRWISE = 3
    #: SEND/RECV ops of DeepEP's kernels (cosim.workload.moe_expand): they set which SMs the transfer holds
    DEEPEP_HIGH_THROUGHPUT = 4
    DEEPEP_LOW_LATENCY = 5


class Phase(IntEnum):
    """Part of the iteration an op belongs to."""
    FORWARD = 0
    BACKWARD = 1
    GRAD_SYNC = 2
    OPTIMIZER = 3
    OTHER = 4


class GroupKind(IntEnum):
    """Role of a communication group."""
    TP = 0
    CP = 1
    PP = 2
    DP = 3
    EP = 4
    EDP = 5
    EMBD = 6
    WORLD = 7
    OTHER = 8


#: :meth:`Trace.op_group_kind` of an op without a group: no GroupKind's value, and it fits uint8
NO_GROUP_KIND = 255
#: label parts naming the two halves of a micro-batch under two-micro-batch overlap (``fwd/mb0/L3/a/experts``)
MICROBATCH_HALVES = ("a", "b")


def microbatch_half(label: str) -> int:
    """0 or 1: the micro-batch half ``label`` (``<phase>/mb<i>/L<j>/<half>/<op>``) belongs to; -1 if none."""
    parts = label.split("/")
    if len(parts) > 4 and parts[3] in MICROBATCH_HALVES:
        return MICROBATCH_HALVES.index(parts[3])
    return -1


# column name → (dtype, units, description, enum or None); the order is the file's and Trace's order.
OP_COLUMNS: dict[str, tuple[type, str, str, type[IntEnum] | None]] = {
    "rank": (np.int32, "", "GPU rank executing the op", None),
    "kind": (np.uint8, "", "op kind", OpKind),
    "phase": (np.uint8, "", "iteration phase", Phase),
    "duration_ns": (np.int64, "ns", "compute time on the GPU (0 for communication)", None),
    "flops": (np.int64, "FLOP", "floating-point operations of a compute op", None),
    "bytes": (np.int64, "B", "communication size S, nccl-tests convention (full buffer)", None),
    "coll_kind": (np.uint8, "", "collective kind", CollKind),
    "group": (np.int32, "", "index into the groups table (collective; send/recv: their PP/CP group), -1 if none",
              None),
    "peer": (np.int32, "", "send: destination rank, recv: source rank, -1 if none", None),
    "match_id": (np.int64, "", "id shared by a send and its recv (global index of the send), -1 if none", None),
    "coll_id": (np.int64, "", "id shared by all members of one collective call, -1 if none", None),
    "algo_hint": (np.uint8, "", "collective algorithm hint", AlgoHint),
    "label": (np.int32, "", "index into /strings/labels", None),
    "microbatch": (np.int32, "", "micro-batch index, -1 if per-iteration", None),
    "layer": (np.int32, "", "global transformer layer, -1 if none", None),
}


def _int_array(field: str, value: Any, dtype: type) -> np.ndarray:
    """Convert ``value`` to a read-only 1-D array of ``dtype``; raise CosimInputError if it does not fit."""
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise CosimInputError(field, f"must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        arr = arr.astype(dtype)
    elif arr.dtype.kind not in "iub":
        raise CosimInputError(field, f"must hold integers, got dtype {arr.dtype}")
    elif arr.dtype != dtype:
        info = np.iinfo(dtype)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise CosimInputError(field, f"values {lo}..{hi} do not fit {np.dtype(dtype).name}")
        arr = arr.astype(dtype)
    arr.flags.writeable = False  # the Trace is immutable; the caller's array is frozen too (no copy)
    return arr


#: most ranks (GPUs) a trace may have
MAX_RANKS = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Trace:
    """Per-rank ops of one iteration (schema in the module docstring). Arrays are read-only.

    Construction validates the structure (lengths, dtypes, enum ranges, CSR pointers, deps pointing to
    earlier ops of the same rank, collective ranks inside their group); semantic checks across ranks
    (matching sends, complete collectives, no deadlock) are in :func:`cosim.workload.validate.check_trace`.
    """

    n_ranks: int
    rank: np.ndarray
    kind: np.ndarray
    phase: np.ndarray
    duration_ns: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    coll_kind: np.ndarray
    group: np.ndarray
    peer: np.ndarray
    match_id: np.ndarray
    coll_id: np.ndarray
    algo_hint: np.ndarray
    label: np.ndarray
    microbatch: np.ndarray
    layer: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    labels: tuple[str, ...]
    group_ptr: np.ndarray
    group_ranks: np.ndarray
    group_kind: np.ndarray
    specs: str = "{}"  #: JSON object: model, parallelism, hardware and derived numbers (may be empty)

    def __post_init__(self) -> None:
        set_ = lambda name, v: object.__setattr__(self, name, v)  # noqa: E731 (frozen dataclass)
        if isinstance(self.n_ranks, bool) or not isinstance(self.n_ranks, (int, np.integer)) or self.n_ranks < 1:
            raise CosimInputError("trace.n_ranks", f"must be a positive integer, got {self.n_ranks!r}")
        set_("n_ranks", int(self.n_ranks))
        for name, (dtype, _, _, _) in OP_COLUMNS.items():
            set_(name, _int_array(f"trace.{name}", getattr(self, name), dtype))
        n = self.rank.size
        for name in OP_COLUMNS:
            if getattr(self, name).size != n:
                raise CosimInputError(f"trace.{name}", f"has {getattr(self, name).size} entries, rank has {n}")
        for name in ("dep_ptr", "dep_idx", "group_ptr"):
            set_(name, _int_array(f"trace.{name}", getattr(self, name), np.int64))
        set_("group_ranks", _int_array("trace.group_ranks", self.group_ranks, np.int32))
        set_("group_kind", _int_array("trace.group_kind", self.group_kind, np.uint8))
        if not isinstance(self.labels, tuple) or not all(isinstance(s, str) for s in self.labels):
            set_("labels", tuple(str(s) for s in self.labels))
        try:
            specs = json.loads(self.specs)
        except (TypeError, ValueError) as exc:
            raise CosimInputError("trace.specs", f"is not valid JSON ({exc})") from None
        if not isinstance(specs, dict):
            raise CosimInputError("trace.specs", "must be a JSON object")
        self._check_structure()

    # --- validation ---------------------------------------------------------------------------------

    def _check_structure(self) -> None:
        n, nr = self.n_ops, self.n_ranks
        if nr > MAX_RANKS:
            # per-rank arrays (placement, schedules, the fabric) are sized by n_ranks: refuse before allocating
            raise CosimInputError("trace.n_ranks", f"{nr} ranks exceed the {MAX_RANKS} cosim supports",
                                  "the trace file is damaged, or split the job")
        check_csr("trace.dep_ptr", self.dep_ptr, n, self.dep_idx.size)
        check_csr("trace.group_ptr", self.group_ptr, self.group_kind.size, self.group_ranks.size)
        ng = self.group_kind.size
        if n == 0:
            raise CosimInputError("trace.rank", "the trace has no ops")
        _range("trace.rank", self.rank, 0, nr - 1)
        if np.any(np.diff(self.rank) < 0):
            raise CosimInputError("trace.rank", "ops are not grouped by rank in increasing order")
        for name, (_, _, _, enum) in OP_COLUMNS.items():
            if enum is not None:
                _range(f"trace.{name}", getattr(self, name), 0, max(enum))
        _range("trace.group_kind", self.group_kind, 0, max(GroupKind))
        _range("trace.label", self.label, 0, len(self.labels) - 1)
        _range("trace.group_ranks", self.group_ranks, 0, nr - 1)
        sizes = np.diff(self.group_ptr)
        if ng and np.any(sizes < 1):
            raise CosimInputError("trace.group_ptr", f"group {int(np.argmax(sizes < 1))} is empty")
        if self.group_ranks.size > 1:
            same_group = np.repeat(np.arange(ng), sizes)
            bad = (np.diff(self.group_ranks.astype(np.int64)) <= 0) & (same_group[1:] == same_group[:-1])
            if np.any(bad):
                g = int(same_group[1:][bad][0])
                raise CosimInputError("trace.group_ranks", f"members of group {g} are not strictly increasing")
        if np.any(self.duration_ns < 0) or np.any(self.bytes < 0) or np.any(self.flops < 0):
            raise CosimInputError("trace.duration_ns", "durations, flops and bytes must be non-negative")
        compute = self.kind == OpKind.COMPUTE
        coll = self.kind == OpKind.COLLECTIVE
        p2p = (self.kind == OpKind.SEND) | (self.kind == OpKind.RECV)
        _where_bad("trace.bytes", compute & (self.bytes != 0), "compute ops must have bytes = 0")
        _where_bad("trace.duration_ns", ~compute & (self.duration_ns != 0), "communication ops must have duration 0")
        _where_bad("trace.flops", ~compute & (self.flops != 0), "communication ops must have flops = 0")
        _where_bad("trace.coll_kind", coll == (self.coll_kind == CollKind.NONE),
                   "collectives need a coll_kind and other ops must have NONE")
        _where_bad("trace.group", coll & ((self.group < 0) | (self.group >= ng)), "collective without a valid group")
        _where_bad("trace.group", p2p & ((self.group < -1) | (self.group >= ng)), "send/recv with an invalid group")
        _where_bad("trace.group", compute & (self.group != -1), "compute op with a group")
        _where_bad("trace.coll_id", coll != (self.coll_id >= 0), "coll_id must be set exactly on collectives")
        _where_bad("trace.peer", p2p & ((self.peer < 0) | (self.peer >= nr) | (self.peer == self.rank)),
                   "send/recv needs a peer rank other than its own")
        _where_bad("trace.peer", ~p2p & (self.peer != -1), "only send/recv ops have a peer")
        _where_bad("trace.match_id", p2p != (self.match_id >= 0), "match_id must be set exactly on send/recv")
        if self.dep_idx.size:
            owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.dep_ptr))
            _range("trace.dep_idx", self.dep_idx, 0, n - 1)
            bad = (self.dep_idx >= owner) | (self.rank[np.clip(self.dep_idx, 0, n - 1)] != self.rank[owner])
            if np.any(bad):
                i = int(owner[bad][0])
                raise CosimInputError("trace.dep_idx", f"op {i} depends on an op that is not an earlier op of "
                                      f"rank {int(self.rank[i])}")
        if np.any(self.group >= 0):
            ops = np.flatnonzero(self.group >= 0)
            g = self.group[ops].astype(np.int64)
            member_keys = np.repeat(np.arange(ng, dtype=np.int64), sizes) * nr + self.group_ranks
            keys = g * nr + self.rank[ops]
            if not np.all(np.isin(keys, member_keys)):
                i = int(ops[~np.isin(keys, member_keys)][0])
                raise CosimInputError("trace.group", f"op {i} of rank {int(self.rank[i])} uses group "
                                      f"{int(self.group[i])}, which does not contain that rank")

    # --- accessors ----------------------------------------------------------------------------------

    @property
    def n_ops(self) -> int:
        """Number of ops (all ranks)."""
        return int(self.rank.size)

    @property
    def n_groups(self) -> int:
        """Number of communication groups."""
        return int(self.group_kind.size)

    @property
    def rank_ptr(self) -> np.ndarray:
        """int64 (n_ranks+1): ops of rank r are ``rank_ptr[r]:rank_ptr[r+1]``."""
        return np.searchsorted(self.rank, np.arange(self.n_ranks + 1), side="left").astype(np.int64)

    def deps(self, i: int) -> np.ndarray:
        """Global indices of the ops op ``i`` depends on."""
        return self.dep_idx[self.dep_ptr[i]:self.dep_ptr[i + 1]]

    def group_members(self, g: int) -> np.ndarray:
        """Ranks of group ``g``, increasing."""
        return self.group_ranks[self.group_ptr[g]:self.group_ptr[g + 1]]

    def op_group_kind(self) -> np.ndarray:
        """uint8 per op: GroupKind of the op's group, NO_GROUP_KIND where the op has no group."""
        if self.n_groups == 0:
            return np.full(self.n_ops, NO_GROUP_KIND, dtype=np.uint8)
        return np.where(self.group >= 0, self.group_kind[np.clip(self.group, 0, None)],
                        NO_GROUP_KIND).astype(np.uint8)

    def op_half(self) -> np.ndarray:
        """int64 per op: the micro-batch half (0, 1) of an MoE layer's op under two-micro-batch overlap, else
        -1 (from the label's part after the layer)."""
        half_of_label = np.array([microbatch_half(s) for s in self.labels], dtype=np.int64)
        return half_of_label[self.label] if self.labels else np.zeros(0, np.int64)

    def label_of(self, i: int) -> str:
        """Label string of op ``i``."""
        return self.labels[int(self.label[i])]

    def label_array(self) -> np.ndarray:
        """Labels of all ops as a numpy array of Python strings (object dtype)."""
        return np.asarray(self.labels, dtype=object)[self.label]

    def spec_dict(self) -> dict[str, Any]:
        """The specs JSON as a dict (keys model, parallelism, hardware, derived when built by cosim)."""
        return json.loads(self.specs)

    def equals(self, other: Trace) -> bool:
        """True if every array, label table, group table and the specs are identical."""
        if self.n_ranks != other.n_ranks or self.labels != other.labels:
            return False
        if json.loads(self.specs) != json.loads(other.specs):
            return False
        names = list(OP_COLUMNS) + ["dep_ptr", "dep_idx", "group_ptr", "group_ranks", "group_kind"]
        return all(np.array_equal(getattr(self, k), getattr(other, k)) for k in names)


def check_csr(field: str, ptr: np.ndarray, n_rows: int, n_values: int) -> None:
    """Raise CosimInputError on ``field`` unless ``ptr`` is the CSR pointer array of ``n_rows`` rows over
    ``n_values`` values (starts at 0, never decreases, ends at ``n_values``)."""
    if ptr.size != n_rows + 1:
        raise CosimInputError(field, f"has {ptr.size} entries, expected {n_rows + 1}")
    # neighbours compared, not np.diff: a diff copies the pointers (8 B a row) at a FlowDag's memory peak
    if ptr[0] != 0 or ptr[-1] != n_values or not np.all(ptr[1:] >= ptr[:-1]):
        raise CosimInputError(field, f"is not a valid CSR pointer array over {n_rows} rows and {n_values} values")


def _range(field: str, arr: np.ndarray, lo: int, hi: int) -> None:
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        bad = int(arr[(arr < lo) | (arr > hi)][0])
        raise CosimInputError(field, f"value {bad} is outside {lo}..{hi}")


def _where_bad(field: str, mask: np.ndarray, problem: str) -> None:
    if np.any(mask):
        raise CosimInputError(field, f"{problem} (op {int(np.argmax(mask))})")


# --- HDF5 -------------------------------------------------------------------------------------------

def _generator() -> str:
    try:
        from importlib.metadata import version
        return f"cosim {version('cosim')}"
    except Exception:  # noqa: BLE001 — running from a source tree without an installed distribution
        return "cosim (source tree)"


def _write_dataset(group: Any, name: str, data: np.ndarray, units: str, description: str,
                   enum: type[IntEnum] | None = None) -> None:
    kwargs: dict[str, Any] = {"track_times": False}
    if data.size:
        kwargs.update(chunks=(min(data.size, 1 << 16),), compression="gzip", compression_opts=4, shuffle=True)
    ds = group.create_dataset(name, data=data, **kwargs)
    ds.attrs["units"] = units
    ds.attrs["description"] = description
    if enum is not None:
        ds.attrs["enum"] = json.dumps({e.name: int(e.value) for e in enum})


def write_trace_group(h5group: Any, trace: Trace) -> None:
    """Write ``trace`` into an open h5py group (root of a trace file, or a group of a bigger file)."""
    import h5py

    h5group.attrs["schema"] = SCHEMA_NAME
    h5group.attrs["schema_version"] = SCHEMA_VERSION
    h5group.attrs["n_ranks"] = trace.n_ranks
    h5group.attrs["n_ops"] = trace.n_ops
    h5group.attrs["n_groups"] = trace.n_groups
    h5group.attrs["generator"] = _generator()
    h5group.attrs["description"] = "per-rank ops of one training iteration (schema: cosim.workload.trace)"
    specs = trace.spec_dict()
    keys = sorted(specs)
    h5group.attrs["spec_keys"] = json.dumps(keys)
    for key in keys:
        h5group.attrs[key] = json.dumps(specs[key], sort_keys=True)
    ops = h5group.create_group("ops", track_order=True)
    for name, (_, units, desc, enum) in OP_COLUMNS.items():
        _write_dataset(ops, name, getattr(trace, name), units, desc, enum)
    deps = h5group.create_group("deps")
    _write_dataset(deps, "ptr", trace.dep_ptr, "", "CSR pointers: deps of op i are idx[ptr[i]:ptr[i+1]]")
    _write_dataset(deps, "idx", trace.dep_idx, "", "global op indices of earlier ops of the same rank")
    groups = h5group.create_group("groups")
    _write_dataset(groups, "ptr", trace.group_ptr, "", "CSR pointers: ranks of group g are ranks[ptr[g]:ptr[g+1]]")
    _write_dataset(groups, "ranks", trace.group_ranks, "", "member ranks, increasing within a group")
    _write_dataset(groups, "kind", trace.group_kind, "", "group kind", GroupKind)
    strings = h5group.create_group("strings")
    ds = strings.create_dataset("labels", data=np.array(trace.labels, dtype=object),
                                dtype=h5py.string_dtype("utf-8"), track_times=False)
    ds.attrs["units"] = ""
    ds.attrs["description"] = "op labels, indexed by /ops/label"


def write_trace(path: str | os.PathLike[str], trace: Trace) -> None:
    """Write ``trace`` to the HDF5 file ``path`` atomically (built in memory, then a temporary file renamed)."""
    from cosim.h5io import in_memory_h5, write_image

    with in_memory_h5(str(path), track_order=True) as f:  # built in memory: a full disk fails in one line
        write_trace_group(f, trace)
        f.flush()
        image = f.id.get_file_image()
    write_image(path, image)


def _read_int(group: Any, name: str, where: str) -> np.ndarray:
    import h5py

    if name not in group or not isinstance(group[name], h5py.Dataset):
        raise CosimInputError(where, f"missing dataset {group.name.rstrip('/')}/{name}")
    ds = group[name]
    if ds.ndim != 1 or ds.dtype.kind not in "iu":
        raise CosimInputError(where, f"dataset {ds.name} must be a 1-D integer array, got {ds.dtype} {ds.shape}")
    return ds[()]


def read_trace_group(h5group: Any, source: str) -> Trace:
    """Read and validate a trace from an open h5py group; errors name ``source`` (e.g. the file path)."""
    import h5py

    attrs = h5group.attrs
    schema = attrs.get("schema")
    if isinstance(schema, bytes):
        schema = schema.decode()
    if schema != SCHEMA_NAME:
        raise CosimInputError(source, f"is not a cosim trace (schema attribute {schema!r}, expected {SCHEMA_NAME!r})",
                              "write traces with `cosim trace -o FILE`")
    version = attrs.get("schema_version")
    try:
        version = int(version)
    except (TypeError, ValueError):
        raise CosimInputError(source, f"has no integer schema_version attribute (got {version!r})") from None
    if not 1 <= version <= SCHEMA_VERSION:
        raise CosimInputError(source, f"has trace schema version {version}; this cosim reads 1..{SCHEMA_VERSION}",
                              "regenerate the trace with this version of cosim")
    for grp in ("ops", "deps", "groups", "strings"):
        if grp not in h5group or not isinstance(h5group[grp], h5py.Group):
            raise CosimInputError(source, f"missing group /{grp}")
    columns = {name: _read_int(h5group["ops"], name, source) for name in OP_COLUMNS}
    labels_ds = h5group["strings"].get("labels")
    if not isinstance(labels_ds, h5py.Dataset) or labels_ds.ndim != 1 or labels_ds.dtype.kind not in "OSU":
        raise CosimInputError(source, "missing or malformed dataset /strings/labels")
    labels = tuple(s.decode() if isinstance(s, bytes) else str(s) for s in labels_ds[()])
    specs: dict[str, Any] = {}
    try:
        for key in json.loads(attrs.get("spec_keys", "[]")):
            specs[key] = json.loads(attrs[key])
    except (KeyError, TypeError, ValueError) as exc:
        raise CosimInputError(source, f"malformed spec attributes ({exc})") from None
    try:
        return Trace(
            n_ranks=int(attrs.get("n_ranks", 0)), **columns,
            dep_ptr=_read_int(h5group["deps"], "ptr", source), dep_idx=_read_int(h5group["deps"], "idx", source),
            labels=labels, group_ptr=_read_int(h5group["groups"], "ptr", source),
            group_ranks=_read_int(h5group["groups"], "ranks", source),
            group_kind=_read_int(h5group["groups"], "kind", source), specs=json.dumps(specs, sort_keys=True))
    except CosimInputError as exc:
        raise CosimInputError(source, f"{exc.field}: {exc.problem}", exc.fix) from None


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """The Trace in file ``path``, validated; a file that is missing, not HDF5, of another schema or
    malformed is a CosimInputError naming it."""
    import h5py

    source = os.fspath(path)
    if not os.path.isfile(source):
        raise CosimInputError(source, "no such trace file")
    try:
        f = h5py.File(source, "r")
    except OSError as exc:
        raise CosimInputError(source, f"is not a readable HDF5 file ({exc})") from None
    with f:
        try:
            return read_trace_group(f, source)
        except CosimInputError:
            raise
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise CosimInputError(source, f"malformed trace file ({type(exc).__name__}: {exc})") from None


def collective_call_ids(rank: np.ndarray, kind: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """coll_id (int64) of every op: the n-th collective a rank issues on group g belongs to call (g, n), as
    NCCL matches calls on a communicator in issue order; the id of a call is the lowest global op index
    among its members. Non-collective ops get -1.

    ``rank``, ``kind`` and ``group`` are op columns (ops grouped by rank, in issue order); ``n_groups`` is
    the size of the groups table.
    """
    out = np.full(rank.size, -1, dtype=np.int64)
    ops = np.flatnonzero(kind == OpKind.COLLECTIVE)
    if ops.size == 0:
        return out
    g = group[ops].astype(np.int64)
    rg = rank[ops].astype(np.int64) * max(n_groups, 1) + g
    order = np.argsort(rg, kind="stable")  # stable: keeps issue order inside one (rank, group)
    srt = rg[order]
    start = np.concatenate([[True], srt[1:] != srt[:-1]])
    run_start = np.maximum.accumulate(np.where(start, np.arange(srt.size), 0))
    seq = np.empty(ops.size, dtype=np.int64)
    seq[order] = np.arange(srt.size) - run_start
    call = g * (int(seq.max()) + 1) + seq
    uniq, inverse = np.unique(call, return_inverse=True)
    first = np.full(uniq.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, ops)
    out[ops] = first[inverse]
    return out
