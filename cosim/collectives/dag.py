"""FlowDag: the lowered workload as numpy arrays — flows, NVLink copies, compute delays and their deps.

One row per DAG op (length n):

- ``kind`` (:class:`DagOpKind`): FLOW (inter-server transfer through the NIC and the packet-level fabric),
  COMPUTE (busy time on a GPU), NVLINK (intra-server GPU-to-GPU copy; the executor models latency +
  bytes / bandwidth, serialized per sending GPU), NOP (zero-time join or barrier).
- ``rank``: sender (FLOW/NVLINK), executor (COMPUTE), owner or −1 for a collective-wide barrier (NOP, or
  COMPUTE for a start barrier that lasts the collective's latency).
- ``src``/``dst``: sending and receiving rank of FLOW/NVLINK (−1 otherwise). Rank r sits on server
  r // gpus_per_server; FLOW iff src and dst are on different servers, NVLINK iff on the same one, never
  src == dst, and ``bytes`` > 0.
- ``duration_ns`` (COMPUTE; NVLINK: extra copy-engine time on top of bytes / rate, what a protocol slower
  than the executor's NVLink rate adds), ``priority`` (0..7, network class), ``trace_op`` (trace op index;
  the coll_id for a collective's ops, the SEND's index for a send's flows), ``coll`` (row of the collective
  table or −1), ``iteration``.
- Derived, not stored (properties: a new array on every access, so take one once): ``src`` (a transfer's
  ``rank``), ``coll`` (a collective's ops are the contiguous range coll_start_op[c]..coll_end_op[c]: its
  barrier, its flows, its end NOP) and ``iteration`` (the ops of iteration k are the contiguous range
  iteration_ptr[k]:iteration_ptr[k+1]). An op stores what no other column says: 22 bytes (30 when bytes or
  duration_ns need int64).
- deps as CSR ``dep_ptr``/``dep_idx``: op i starts after every op in dep_idx[dep_ptr[i]:dep_ptr[i+1]]
  finished. Every dep index is < i, so the ops are in a topological order and the DAG is acyclic by
  construction (checked on construction).

Per trace op and iteration (length n_iterations · n_trace_ops, index it · n_trace_ops + op): ``trace_start``
and ``trace_done``, the DAG ops whose start / completion mark the trace op's start / completion.

Collective table (one row per call and iteration): ``coll_trace_id``, ``coll_kind`` (CollKind),
``coll_bytes`` (S), ``coll_group``, ``coll_algo`` (Algorithm actually used), ``coll_start_op`` and
``coll_end_op`` (its barrier NOPs), ``coll_iteration``, and the member ranks as CSR ``coll_ranks_ptr`` /
``coll_ranks``.

:func:`repeat` chains n copies of a one-iteration DAG: in copy k+1 every root of a rank (an op of the rank
with no dep on an op of the same rank) depends on every terminal of that rank (no dependent of the same rank)
in copy k, so a rank starts an iteration only when it finished the previous one. The ops of a collective
(barrier NOPs with rank −1 and its flows) count as ops of each of its member ranks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.trace import check_csr

#: priorities (traffic classes, virtual lanes) every port keeps queues for; a priority is 0..NUM_PRIORITIES-1
NUM_PRIORITIES = 8


class DagOpKind(IntEnum):
    """What a DAG op does."""
    FLOW = 0
    COMPUTE = 1
    NVLINK = 2
    NOP = 3
    BLOCK = 4  #: a collective's copies and flows as one instance of a template (FlowDag.block_*), run as they would be


class CommClass(IntEnum):
    """Which kernels move a FLOW or NVLINK op, so which SMs they take from the GPU's compute meanwhile."""
    NCCL = 0  #: DagExecutor::CommComputeSlowdown
    EXPERT = 1  #: DeepEP's high-throughput kernels: DagExecutor::ExpertCommComputeSlowdown
    SM_FREE = 2  #: DeepEP's low-latency kernels in hook mode: none


#: per-op columns: name → (dtype, default); the narrowest that hold any DAG a machine can simulate
OP_FIELDS: dict[str, tuple[type, int]] = {
    "kind": (np.uint8, int(DagOpKind.NOP)),
    "rank": (np.int32, -1),
    "dst": (np.int32, -1),
    "bytes": (np.int64, 0),
    "duration_ns": (np.int64, 0),
    "priority": (np.uint8, 0),
    "trace_op": (np.int32, -1),
}
#: columns stored as int32 when every value fits (half the memory of the usual DAG), int64 otherwise
NARROWABLE = ("bytes", "duration_ns")
#: the widest value a narrowed column holds
INT32_MAX = int(np.iinfo(np.int32).max)
#: most subs one BLOCK op's template holds (ns3::DagExecutor numbers a sub in 20 bits, 0 for the op itself)
MAX_BLOCK_SUBS = (1 << 20) - 2

#: ops checked at a time by FlowDag's validation (bounds its temporaries to a few MB)
_CHECK_BLOCK_OPS = 1 << 14
#: edges placed at a time by csr_from_edge_chunks (bounds its temporaries to about a MB)
_PLACE_BLOCK_EDGES = 1 << 13

COLL_FIELDS: dict[str, type] = {
    "coll_trace_id": np.int64,
    "coll_kind": np.uint8,
    "coll_bytes": np.int64,
    "coll_group": np.int32,
    "coll_algo": np.uint8,
    "coll_start_op": np.int64,
    "coll_end_op": np.int64,
    "coll_iteration": np.int32,
}


def _arr(field: str, value, dtype, narrow: type | None = None) -> np.ndarray:
    """``value`` as an immutable 1-D array of ``dtype`` (or of ``narrow`` if it already is that dtype)."""
    a = np.asarray(value)
    if narrow is not None and a.dtype == narrow:
        dtype = narrow
    if a.ndim != 1:
        raise CosimInputError(f"dag.{field}", f"must be one-dimensional, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iub":
        raise CosimInputError(f"dag.{field}", f"must hold integers, got dtype {a.dtype}")
    if a.dtype == dtype and a.flags.owndata and not a.flags.writeable:
        return a  # already immutable and nobody's view: adopt it (a copy would double the peak of a large DAG)
    if a.dtype != dtype:
        if a.size:
            info = np.iinfo(dtype)
            if int(a.min()) < info.min or int(a.max()) > info.max:
                raise CosimInputError(f"dag.{field}", f"values do not fit {np.dtype(dtype).name}")
    a = np.array(a, dtype=dtype)  # own copy: the DAG is immutable even if the caller keeps its arrays
    a.flags.writeable = False
    return a


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class BlockTemplates:
    """The transfers a BLOCK op stands for, one template per distinct collective call: template t's transfers
    ("subs") are ``ptr[t]..ptr[t + 1]``, in the order and with the dependencies the materialized ops would
    have, each an NVLink copy inside a server (NVLINK) or a flow between servers (FLOW). A BLOCK op runs them
    as the executor would run those NVLINK and FLOW ops in its place (same times, same event order, its flows
    started in the same order) and finishes when the last one does."""

    ptr: np.ndarray  # int64 [n_templates + 1]
    kind: np.ndarray  # uint8 [n_subs], DagOpKind.NVLINK or DagOpKind.FLOW
    gpu: np.ndarray  # int32 [n_subs], sending GPU: a rank in a FlowDag, a host node id in an EngineDag
    dst: np.ndarray  # int32 [n_subs], receiving GPU, in the same labels
    bytes: np.ndarray  # int64 [n_subs], bytes moved
    duration_ns: np.ndarray  # int64 [n_subs], extra copy-engine time (an NVLINK op's duration_ns; 0 for a FLOW), ns
    dep_ptr: np.ndarray  # int64 [n_subs + 1], CSR of every sub's dependencies
    dep_idx: np.ndarray  # int32, local to the template: each below its sub's own local index

    @property
    def n_templates(self) -> int:
        """Number of templates."""
        return int(self.ptr.size - 1)

    def sizes(self) -> np.ndarray:
        """int64 [n_templates]: subs per template."""
        return np.diff(self.ptr)

    def has_flows(self) -> bool:
        """True when some sub is a FLOW (a template of a call across servers)."""
        return bool(np.any(self.kind == DagOpKind.FLOW))

    def flow_subs(self) -> np.ndarray:
        """int64: the FLOW subs (global sub indices, increasing)."""
        return np.flatnonzero(self.kind == DagOpKind.FLOW)

    def flow_counts(self) -> np.ndarray:
        """int64 [n_templates]: the FLOW subs of every template."""
        return np.bincount(self.template_of_sub()[self.flow_subs()], minlength=self.n_templates).astype(np.int64)

    def n_flows(self, block: np.ndarray) -> int:
        """The flows the BLOCK ops of ``block`` (the template of every op, -1 for the others) start."""
        block = np.asarray(block)
        if not self.has_flows():
            return 0
        return int(self.flow_counts()[block[block >= 0]].sum())

    def n_deps(self) -> np.ndarray:
        """int64 [n_templates]: the dependency edges its materialized ops would have: the subs' own, every entry
        sub's on the start barrier and the end barrier's on every terminal sub."""
        own = self.dep_ptr[self.ptr[1:]] - self.dep_ptr[self.ptr[:-1]]
        return own + self.entries() + self.terminals()

    def template_of_sub(self) -> np.ndarray:
        """int64 [n_subs]: the template of every sub."""
        return np.repeat(np.arange(self.n_templates, dtype=np.int64), self.sizes())

    def entries(self) -> np.ndarray:
        """int64 [n_templates]: subs with no dependency (they wait for the start barrier)."""
        entry = np.diff(self.dep_ptr) == 0
        return np.bincount(self.template_of_sub()[entry], minlength=self.n_templates).astype(np.int64)

    def terminals(self) -> np.ndarray:
        """int64 [n_templates]: subs nothing in their template depends on (the end barrier waits for them)."""
        owner = self.template_of_sub()
        has_dependent = np.zeros(self.gpu.size, bool)
        has_dependent[self.ptr[np.repeat(owner, np.diff(self.dep_ptr))] + self.dep_idx] = True
        return np.bincount(owner[~has_dependent], minlength=self.n_templates).astype(np.int64)

    def relabeled(self, labels: np.ndarray) -> "BlockTemplates":
        """The same templates with every GPU ``g`` renamed ``labels[g]`` (ranks to host node ids)."""
        labels = np.asarray(labels, np.int32)
        return dataclasses.replace(self, gpu=labels[self.gpu], dst=labels[self.dst])

    @staticmethod
    def concatenate(parts: "list[BlockTemplates]") -> "BlockTemplates":
        """The templates of ``parts`` one after the other (template t of part k is the sum of the earlier
        parts' counts plus t)."""
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        ptr = [np.zeros(1, np.int64)] + [p.ptr[1:] + off for p, off in zip(parts, np.cumsum(
            [0] + [p.gpu.size for p in parts[:-1]]))]
        dep_ptr = [np.zeros(1, np.int64)] + [p.dep_ptr[1:] + off for p, off in zip(parts, np.cumsum(
            [0] + [p.dep_idx.size for p in parts[:-1]]))]
        return BlockTemplates(ptr=np.concatenate(ptr), kind=cat("kind"), gpu=cat("gpu"), dst=cat("dst"),
                              bytes=cat("bytes"),
                              duration_ns=cat("duration_ns"), dep_ptr=np.concatenate(dep_ptr), dep_idx=cat("dep_idx"))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FlowDag:
    """Ops, deps, per-trace-op markers and the collective table of a lowered trace (module docstring)."""

    n_ranks: int
    gpus_per_server: int
    n_iterations: int
    n_trace_ops: int
    kind: np.ndarray
    rank: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    duration_ns: np.ndarray
    priority: np.ndarray
    trace_op: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    trace_start: np.ndarray
    trace_done: np.ndarray
    coll_trace_id: np.ndarray
    coll_kind: np.ndarray
    coll_bytes: np.ndarray
    coll_group: np.ndarray
    coll_algo: np.ndarray
    coll_start_op: np.ndarray
    coll_end_op: np.ndarray
    coll_iteration: np.ndarray
    coll_ranks_ptr: np.ndarray
    coll_ranks: np.ndarray
    #: ops of iteration k: iteration_ptr[k]:iteration_ptr[k+1] (n_iterations + 1 entries); None: every op is
    #: of iteration 0 (a one-iteration DAG)
    iteration_ptr: np.ndarray | None = None
    #: the BLOCK ops (increasing op ids), the template of each, and the templates (GPUs as ranks); None: none
    block_op: np.ndarray | None = None
    block_tmpl: np.ndarray | None = None
    blocks: BlockTemplates | None = None

    def __post_init__(self) -> None:
        set_ = lambda name, v: object.__setattr__(self, name, v)  # noqa: E731 (frozen dataclass)
        for name in ("n_ranks", "gpus_per_server", "n_iterations"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise CosimInputError(f"dag.{name}", f"must be a positive integer, got {v!r}")
            set_(name, int(v))
        if self.n_trace_ops < 0:
            raise CosimInputError("dag.n_trace_ops", "must be >= 0")
        set_("n_trace_ops", int(self.n_trace_ops))
        for name, (dtype, _) in OP_FIELDS.items():
            set_(name, _arr(name, getattr(self, name), dtype, np.int32 if name in NARROWABLE else None))
        for name, dtype in COLL_FIELDS.items():
            set_(name, _arr(name, getattr(self, name), dtype))
        for name in ("trace_start", "trace_done"):  # op ids: int32 whenever they fit (a caller's int32 adopted)
            set_(name, _arr(name, getattr(self, name), np.int64, np.int32))
        set_("coll_ranks_ptr", _arr("coll_ranks_ptr", self.coll_ranks_ptr, np.int64))
        if self.iteration_ptr is None:
            if self.n_iterations != 1:
                raise CosimInputError("dag.iteration_ptr", f"is needed for {self.n_iterations} iterations")
            set_("iteration_ptr", np.array([0, self.kind.size], np.int64))
        set_("iteration_ptr", _arr("iteration_ptr", self.iteration_ptr, np.int64))
        set_("dep_ptr", _arr("dep_ptr", self.dep_ptr, np.int64, np.int32))
        # op ids fit int32 whenever the ops do (MAX_DAG_OPS is far below 2^31): half the memory of a dep
        set_("dep_idx", _arr("dep_idx", self.dep_idx, index_dtype(self.kind.size)))
        set_("coll_ranks", _arr("coll_ranks", self.coll_ranks, np.int32))
        set_("block_op", _arr("block_op", np.zeros(0, np.int64) if self.block_op is None else self.block_op,
                              np.int64))
        set_("block_tmpl", _arr("block_tmpl", np.zeros(0, np.int32) if self.block_tmpl is None else self.block_tmpl,
                                np.int32))
        self._validate()
        self._validate_blocks()

    def _validate_blocks(self) -> None:
        """BLOCK ops are exactly ``block_op``, each naming a template of ``blocks`` whose NVLINK subs stay
        inside one server, whose FLOW subs cross servers, and whose subs depend only on earlier subs of their
        own template."""
        listed = np.zeros(self.n_ops, bool)
        listed[self.block_op] = True
        if self.block_op.size != self.block_tmpl.size or np.any(np.diff(self.block_op) <= 0):
            raise CosimInputError("dag.block_op", "must be increasing op ids, one per block_tmpl entry")
        if not np.array_equal(listed, self.kind == DagOpKind.BLOCK):
            raise CosimInputError("dag.block_op", "must list exactly the BLOCK ops")
        if not self.block_op.size:
            return
        t = self.blocks
        if t is None or np.any((self.block_tmpl < 0) | (self.block_tmpl >= t.n_templates)):
            raise CosimInputError("dag.block_tmpl", "names a template dag.blocks does not have")
        g = self.gpus_per_server
        flow = t.kind == DagOpKind.FLOW
        if np.any((t.gpu < 0) | (t.gpu >= self.n_ranks) | (t.dst < 0) | (t.dst >= self.n_ranks) | (t.gpu == t.dst)
                  | ((t.gpu // g != t.dst // g) != flow) | (t.bytes <= 0) | (t.duration_ns < 0)
                  | (flow & (t.duration_ns != 0)) | (~flow & (t.kind != DagOpKind.NVLINK))):
            raise CosimInputError("dag.blocks", "a sub must move bytes > 0 between two GPUs: an NVLINK copy inside "
                                  "one server, a FLOW (without copy time) between servers")
        local = np.repeat(np.arange(t.gpu.size) - np.repeat(t.ptr[:-1], t.sizes()), np.diff(t.dep_ptr))
        if np.any((t.dep_idx < 0) | (t.dep_idx >= local)):
            raise CosimInputError("dag.blocks", "a copy may depend only on earlier copies of its template")

    def _validate(self) -> None:
        n, m = self.n_ops, self.n_collectives
        for name in OP_FIELDS:
            if getattr(self, name).size != n:
                raise CosimInputError(f"dag.{name}", f"has {getattr(self, name).size} entries, kind has {n}")
        for name in COLL_FIELDS:
            if getattr(self, name).size != m:
                raise CosimInputError(f"dag.{name}", f"has {getattr(self, name).size} entries, expected {m}")
        check_csr("dag.dep_ptr", self.dep_ptr, n, self.dep_idx.size)
        check_csr("dag.iteration_ptr", self.iteration_ptr, self.n_iterations, n)
        check_csr("dag.coll_ranks_ptr", self.coll_ranks_ptr, m, self.coll_ranks.size)
        for lo in range(0, n if self.dep_idx.size else 0, _CHECK_BLOCK_OPS):  # blocks bound the temporaries
            hi = min(n, lo + _CHECK_BLOCK_OPS)
            a, b = int(self.dep_ptr[lo]), int(self.dep_ptr[hi])
            owner = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(self.dep_ptr[lo:hi + 1]))
            dep = self.dep_idx[a:b]
            bad = (dep < 0) | (dep >= owner)
            if np.any(bad):
                i = int(owner[bad][0])
                raise CosimInputError("dag.dep_idx", f"op {i} depends on op {int(dep[bad][0])}, which is "
                                      "not an earlier op (ops must be in topological order)")
        nt = self.n_iterations * self.n_trace_ops
        for name in ("trace_start", "trace_done"):
            a = getattr(self, name)
            if a.size != nt:
                raise CosimInputError(f"dag.{name}", f"has {a.size} entries, expected n_iterations·n_trace_ops = {nt}")
            _where(f"dag.{name}", (a < 0) | (a >= n), "points outside the ops")
        for name in ("coll_start_op", "coll_end_op"):
            _where(f"dag.{name}", (getattr(self, name) < 0) | (getattr(self, name) >= n), "points outside the ops")
        # a collective's ops are the range from its start to its end op; ranges of two rows never overlap
        _where("dag.coll_end_op", self.coll_end_op < self.coll_start_op, "ends before the collective's start op")
        order = np.argsort(self.coll_start_op, kind="stable")
        starts, ends = self.coll_start_op[order], self.coll_end_op[order]
        _where("dag.coll_start_op", starts[1:] <= ends[:-1],
               "the op ranges of two collectives overlap (a collective's ops are contiguous)")
        for lo in range(0, n, _CHECK_BLOCK_OPS):
            self._validate_ops(slice(lo, min(n, lo + _CHECK_BLOCK_OPS)), starts, ends)

    def _validate_ops(self, sel: slice, starts: np.ndarray, ends: np.ndarray) -> None:
        """The per-op rules on ops ``sel`` (a block: the masks stay small for a DAG of any size); ``starts`` /
        ``ends``: the collectives' op ranges in the order of their starts."""
        kind, rank, dst = self.kind[sel], self.rank[sel], self.dst[sel]
        nbytes, duration = self.bytes[sel], self.duration_ns[sel]
        at = lambda mask: np.flatnonzero(mask)[:1] + sel.start  # noqa: E731 (first offending op)
        where = lambda field, mask, problem: _where(field, mask, problem, at)  # noqa: E731
        where("dag.kind", kind > max(DagOpKind), "unknown op kind")
        where("dag.priority", self.priority[sel] >= NUM_PRIORITIES, f"priority must be 0..{NUM_PRIORITIES - 1}")
        where("dag.rank", (rank < -1) | (rank >= self.n_ranks), "rank out of range")
        xfer = (kind == DagOpKind.FLOW) | (kind == DagOpKind.NVLINK)
        # a transfer's source is its rank (src is derived from rank, never stored)
        where("dag.rank", xfer & (rank < 0), "a transfer needs its sending rank")
        where("dag.dst", xfer & ((dst < 0) | (dst >= self.n_ranks)), "transfer endpoints out of range")
        where("dag.dst", xfer & (rank == dst), "a transfer's destination must differ from its source")
        where("dag.dst", ~xfer & (dst != -1), "only transfers have src and dst")
        where("dag.bytes", xfer != (nbytes > 0), "transfers need bytes > 0, other ops bytes = 0")
        where("dag.bytes", nbytes < 0, "bytes must be >= 0")
        g = self.gpus_per_server
        same = (rank // g) == (dst // g)
        where("dag.kind", (kind == DagOpKind.FLOW) & same, "a FLOW between GPUs of one server (use NVLINK)")
        where("dag.kind", (kind == DagOpKind.NVLINK) & ~same, "an NVLINK copy between servers (use FLOW)")
        timed = (kind == DagOpKind.COMPUTE) | (kind == DagOpKind.NVLINK)
        where("dag.duration_ns", (duration < 0) | (~timed & (duration != 0)),
              "only COMPUTE and NVLINK ops have a duration, and it is >= 0")
        # in a collective: inside the op range of the last collective starting at or before the op (a binary
        # search, so no block derives the whole coll column)
        ops = np.arange(sel.start, sel.stop, dtype=np.int64)
        pos = np.searchsorted(starts, ops, side="right") - 1
        in_coll = (pos >= 0) & (ops <= ends[np.maximum(pos, 0)]) if starts.size else np.zeros(ops.size, bool)
        where("dag.rank", (kind == DagOpKind.COMPUTE) & (rank < 0) & ~in_coll,
              "a COMPUTE op needs a rank (or a collective, whose start latency it is)")

    # --- accessors ----------------------------------------------------------------------------------

    @property
    def n_ops(self) -> int:
        """Number of DAG ops."""
        return int(self.kind.size)

    @property
    def n_collectives(self) -> int:
        """Number of rows of the collective table (calls × iterations)."""
        return int(self.coll_trace_id.size)

    def is_transfer(self) -> np.ndarray:
        """bool per op: FLOW or NVLINK."""
        return (self.kind == DagOpKind.FLOW) | (self.kind == DagOpKind.NVLINK)

    @property
    def src(self) -> np.ndarray:
        """int32 per op: the sending rank of a FLOW/NVLINK op (its ``rank``), −1 for other ops. Derived on
        every access (a new array): a DAG does not store what ``rank`` and ``kind`` already say."""
        return np.where(self.is_transfer(), self.rank, np.int32(-1))

    @property
    def coll(self) -> np.ndarray:
        """int32 per op: the row of the collective table among whose ops (the contiguous range
        coll_start_op[c]..coll_end_op[c]: barrier, flows, end NOP) it is, −1 outside collectives. Derived on
        every access (a new array) from the ranges: take it once, not per op."""
        mark = np.zeros(self.n_ops + 1, np.int32)  # +c where the range of row c − 1 starts, −c after its end
        rows = np.arange(1, self.n_collectives + 1, dtype=np.int32)
        mark[0] = -1
        mark[self.coll_start_op] += rows  # starts are distinct, and so are the ends (ranges never overlap)
        mark[self.coll_end_op + 1] -= rows
        return np.cumsum(mark, out=mark)[:-1]

    @property
    def iteration(self) -> np.ndarray:
        """int16 per op: its iteration, derived on every access (a new array) from ``iteration_ptr``."""
        return np.repeat(np.arange(self.n_iterations, dtype=np.int16), np.diff(self.iteration_ptr))

    def deps(self, i: int) -> np.ndarray:
        """Ops that op ``i`` waits for."""
        return self.dep_idx[self.dep_ptr[i]:self.dep_ptr[i + 1]]

    def dep_owner(self) -> np.ndarray:
        """int64 per dep entry: the op that owns it (so edges are ``dep_idx[j] → dep_owner()[j]``)."""
        return np.repeat(np.arange(self.n_ops, dtype=np.int64), np.diff(self.dep_ptr))

    def coll_members(self, c: int) -> np.ndarray:
        """Member ranks of collective row ``c``."""
        return self.coll_ranks[self.coll_ranks_ptr[c]:self.coll_ranks_ptr[c + 1]]

    def bytes_sent_per_rank(self, kind: DagOpKind | None = None) -> np.ndarray:
        """int64 [n_ranks]: bytes each rank sends in FLOW (or NVLINK) ops, BLOCK ops' subs of that kind
        included; both kinds if ``kind`` is None."""
        return self._per_rank(self.rank, "gpu", kind)  # a transfer's rank is its source

    def bytes_received_per_rank(self, kind: DagOpKind | None = None) -> np.ndarray:
        """int64 [n_ranks]: bytes each rank receives in FLOW (or NVLINK) ops, BLOCK ops' subs of that kind
        included; both kinds if ``kind`` is None."""
        return self._per_rank(self.dst, "dst", kind)

    def _per_rank(self, who: np.ndarray, sub_who: str, kind: DagOpKind | None) -> np.ndarray:
        sel = (self.kind == DagOpKind.FLOW) | (self.kind == DagOpKind.NVLINK) if kind is None else self.kind == kind
        # float sums of whole bytes are exact below 2^53 (a rank moving 9 PB): bincount, not np.add.at
        out = np.zeros(self.n_ranks, np.float64)
        out += np.bincount(who[sel], weights=self.bytes[sel], minlength=self.n_ranks)
        if self.block_op.size:
            t = self.blocks
            subs = np.ones(t.kind.size, bool) if kind is None else t.kind == kind
            out += np.bincount(getattr(t, sub_who)[subs], weights=self._block_copy_bytes()[subs],
                               minlength=self.n_ranks)
        return out.astype(np.int64)

    def n_expanded_ops(self) -> int:
        """The ops this DAG stands for with every BLOCK op's subs materialized as NVLINK and FLOW ops."""
        if not self.block_op.size:
            return self.n_ops
        return self.n_ops + int(self._per_block(self.blocks.sizes()).sum()) - self.block_op.size

    def _per_block(self, per_template: np.ndarray) -> np.ndarray:
        """``per_template`` values (one per template) for every BLOCK op."""
        return np.asarray(per_template)[self.block_tmpl]

    def _block_copy_bytes(self) -> np.ndarray:
        """int64 [n_subs]: the bytes every template sub moves over the whole DAG (its bytes times the BLOCK ops
        of its template)."""
        t = self.blocks
        return t.bytes * np.repeat(np.bincount(self.block_tmpl, minlength=t.n_templates), t.sizes())

    def nvlink_bytes_by_rank(self) -> np.ndarray:
        """float64 [n_ranks]: bytes every rank copies over NVLink, its NVLINK ops' and its BLOCK ops' copies."""
        nvlink = self.kind == DagOpKind.NVLINK
        out = np.bincount(self.rank[nvlink], weights=self.bytes[nvlink], minlength=self.n_ranks).astype(np.float64)
        if self.block_op.size:
            copy = self.blocks.kind == DagOpKind.NVLINK
            out += np.bincount(self.blocks.gpu[copy], weights=self._block_copy_bytes()[copy], minlength=self.n_ranks)
        return out

    def summary(self) -> dict[str, int]:
        """Counts of ops by kind, deps, collectives, and FLOW / NVLINK bytes, as the DAG with every BLOCK op's
        subs materialized has them (plus ``n_block_ops`` when there are BLOCK ops)."""
        counts = np.bincount(self.kind, minlength=len(DagOpKind))
        out = {f"n_{k.name.lower()}": int(counts[k]) for k in DagOpKind if k != DagOpKind.BLOCK}
        moved = {k: int(self.bytes[self.kind == k].sum()) for k in (DagOpKind.FLOW, DagOpKind.NVLINK)}
        n_deps = int(self.dep_idx.size)
        if self.block_op.size:
            t = self.blocks
            per_sub = np.repeat(np.bincount(self.block_tmpl, minlength=t.n_templates), t.sizes())
            sub_bytes = self._block_copy_bytes()
            for k in moved:
                out[f"n_{k.name.lower()}"] += int(per_sub[t.kind == k].sum())
                moved[k] += int(sub_bytes[t.kind == k].sum())
            n_deps += int(self._per_block(t.n_deps()).sum()) - 2 * self.block_op.size
            out["n_block_ops"] = int(self.block_op.size)
        out.update(n_ops=self.n_expanded_ops(), n_deps=n_deps, n_collectives=self.n_collectives,
                   n_iterations=self.n_iterations,
                   flow_bytes=moved[DagOpKind.FLOW],
                   nvlink_bytes=moved[DagOpKind.NVLINK],
                   compute_ns=int(self.duration_ns[(self.kind == DagOpKind.COMPUTE) & (self.rank >= 0)].sum()),
                   collective_latency_ns=int(self.duration_ns[self.rank < 0].sum()))
        return out


def _where(field: str, mask: np.ndarray, problem: str, at=None) -> None:
    """Raise if ``mask`` holds a True: ``problem`` at its first row (``at(mask)``: that row, offset)."""
    if np.any(mask):
        row = int(at(mask)[0]) if at is not None else int(np.argmax(mask))
        raise CosimInputError(field, f"{problem} (op/row {row})")


def flow_keys(flow_op: np.ndarray, flow_sub: np.ndarray | None) -> np.ndarray:
    """int64 per flow: a key in the order of the materialized DAG's FLOW ops, from the op (a FLOW op, or the
    BLOCK op of sub ``flow_sub``; None or -1: a FLOW op's own flow) and the sub: an op's flow before its
    subs', a BLOCK op's subs in order, all before the next op's."""
    key = np.array(flow_op, np.int64)  # a copy, computed in place: one flow-sized array for 10^8 flows
    key *= MAX_BLOCK_SUBS + 1
    if flow_sub is not None:
        key += flow_sub
        key += 1
    return key


def index_dtype(n: int) -> type:
    """The dtype of op ids below ``n``: int32 when they fit, else int64."""
    return np.int32 if n < INT32_MAX else np.int64


def csr_from_edges(owner: np.ndarray, dep: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, idx) of the deps of n ops from edge arrays; deps of one op keep their given order."""
    return csr_from_edge_chunks([(np.asarray(owner), np.asarray(dep))], n)


def csr_from_edge_chunks(chunks: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, idx; int32 when they fit, else int64) of the deps of n ops from (owner, dep) edge chunks, consumed
    (the list is emptied, each chunk dropped once placed). Deps of one op keep their order (chunk order, then
    order within a chunk)."""
    counts = _count_edges([owner for owner, _ in chunks], n)
    chunks.reverse()

    def consumed():
        while chunks:
            yield chunks.pop()
    return _place_edges(counts, consumed(), n)


def csr_from_dep_sources(sources: list, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, idx; int32 when they fit, else int64) of the deps of n ops from dep sources: callables, each
    returning an iterable of (owner, dep) blocks, the same blocks in the same order every call. Each source
    is run twice, once to count every op's deps and once to write them at the op's offset, so the edges are
    never held at once: a lowering's peak is its result plus one block. Deps of one op keep their order
    (source order, then block order, then order within a block)."""
    counts = _count_edges((owner for source in sources for owner, _ in source()), n)
    return _place_edges(counts, (block for source in sources for block in source()), n)


def _count_edges(owners, n: int) -> np.ndarray:
    """int32 [n + 1]: 0, then the number of edges of each op among the ``owners`` blocks."""
    counts = np.zeros(n + 1, np.int32)  # an op's count fits int32 whenever the DAG fits this machine
    for owner in owners:
        for lo in range(0, owner.size, _PLACE_BLOCK_EDGES):
            block = owner[lo:lo + _PLACE_BLOCK_EDGES]
            if not block.size:
                continue
            first, last = int(block.min()), int(block.max())
            if last - first < 4 * block.size:  # owners close together (most blocks): count by bins
                c = np.bincount(block - block.dtype.type(first), minlength=last - first + 1)
                counts[first + 1:last + 2] += c.astype(np.int32)
            else:
                ops, c = np.unique(block, return_counts=True)
                counts[ops + 1] += c.astype(np.int32)
    return counts


def _place_edges(counts: np.ndarray, blocks, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, idx) from per-op edge counts (``_count_edges``, taken over) and the same edges as (owner, dep)
    blocks: the pointers double as the cursors, so nothing but the result and one block's temporaries is
    allocated."""
    n_edges = int(counts.sum(dtype=np.int64))
    ptr = counts if index_dtype(n_edges + 1) is np.int32 else counts.astype(np.int64)
    del counts
    np.cumsum(ptr, out=ptr)  # ptr[i]: op i's first slot
    idx = np.empty(n_edges, index_dtype(n))
    cursor = ptr[:-1]  # ptr[i] is op i's next free slot while filling; op i ends at the old ptr[i + 1]
    placed = 0
    for owner, dep in blocks:
        for lo in range(0, owner.size, _PLACE_BLOCK_EDGES):
            _place(idx, cursor, owner[lo:lo + _PLACE_BLOCK_EDGES], dep[lo:lo + _PLACE_BLOCK_EDGES])
        placed += owner.size
        del owner, dep
    if placed != n_edges or (n and int(ptr[n - 1]) != n_edges):
        raise RuntimeError("a dep source yielded other edges when run again")  # a bug, not bad input
    # every cursor now sits at its op's end, which is the next op's start: shift by one, a block at a time
    # from the end (no copy of the whole array)
    for hi in range(n, 0, -_CHECK_BLOCK_OPS):
        lo = max(0, hi - _CHECK_BLOCK_OPS)
        ptr[lo + 1:hi + 1] = ptr[lo:hi].copy()
    ptr[0] = 0
    return ptr, idx


def _place(idx: np.ndarray, cursor: np.ndarray, owner: np.ndarray, dep: np.ndarray) -> None:
    """Write edges (owner, dep) at their owners' cursors, in order, and advance the cursors."""
    if not owner.size:
        return
    if np.all(owner[1:] >= owner[:-1]):  # already in owner order (many blocks are): the stable sort is a no-op
        o, d = owner, dep
    else:
        order = np.argsort(owner, kind="stable")
        o, d = owner[order], dep[order]
    first = np.flatnonzero(np.concatenate([[True], o[1:] != o[:-1]]))
    length = np.diff(np.append(first, o.size))
    # an edge's slot: its owner's cursor plus its rank among this block's edges of the same owner
    idx[cursor[o] + (np.arange(o.size) - np.repeat(first, length))] = d
    cursor[o[first]] += length  # o[first] are distinct


class DagBuilder:
    """Fills the op columns of ``n_ops`` ops in place (later writes win) and collects dep sources: edges given
    at once (:meth:`deps`, kept as compact arrays) or a generator of edge blocks run when needed
    (:meth:`dep_blocks`). :meth:`build` counts every op's deps, then writes them into the CSR at their
    offsets: the edges of a generator are never held at once, so the peak is the columns, the CSR and one
    block of edges."""

    def __init__(self, n_ops: int, *, narrow: bool = False) -> None:
        """With ``narrow``, bytes and duration_ns are stored as int32 (the caller knows every value fits)."""
        self._n = int(n_ops)
        dtypes = {name: (np.int32 if narrow and name in NARROWABLE else dtype, default)
                  for name, (dtype, default) in OP_FIELDS.items()}
        self._cols = {name: np.full(self._n, default, dtype=dtype) for name, (dtype, default) in dtypes.items()}
        # edges fit int32 whenever the op ids do: half the memory of a stored edge
        self._edge_dtype = index_dtype(self._n)
        self._sources: list = []

    def ops(self, idx: np.ndarray, **columns) -> None:
        """Set the columns (arrays aligned with ``idx``, or scalars) of ops ``idx``; unset columns keep defaults."""
        unknown = set(columns) - set(OP_FIELDS)
        if unknown:
            raise TypeError(f"unknown op columns {sorted(unknown)}")
        idx = np.asarray(idx, dtype=np.int64)
        for name, value in columns.items():
            self._cols[name][idx] = value

    def deps(self, owner: np.ndarray | int, dep: np.ndarray) -> None:
        """Op(s) ``owner`` wait for ``dep`` (owner broadcast against dep); the edges are stored until build."""
        dep = np.asarray(dep)
        edges = ((np.broadcast_to(np.asarray(owner), dep.shape).astype(self._edge_dtype).ravel(),
                  dep.astype(self._edge_dtype).ravel()),)
        self._sources.append(lambda: edges)

    def dep_blocks(self, blocks, *args) -> None:
        """``blocks(*args)`` yields (owner, dep) edge blocks; build runs it twice (count, then place), so it must
        yield the same blocks both times. Deps of one op keep the order of the calls to deps/dep_blocks."""
        self._sources.append(lambda: blocks(*args))

    def build(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """Return (columns, dep_ptr, dep_idx), every array read-only (FlowDag adopts them without a copy);
        the builder is empty afterwards."""
        sources, self._sources = self._sources, []
        ptr, idx = csr_from_dep_sources(sources, self._n)
        del sources
        cols, self._cols = self._cols, {}
        for a in (*cols.values(), ptr, idx):
            a.flags.writeable = False
        return cols, ptr, idx


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array (sort based: faster than hashing for large arrays)."""
    a = np.sort(np.asarray(a), kind="stable")
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if a.size else a


def is_in(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.isin(a, b) for integer arrays via a binary search in sorted b."""
    sb = np.sort(b)
    if sb.size == 0:
        return np.zeros(np.shape(a), bool)
    pos = np.minimum(np.searchsorted(sb, a), sb.size - 1)
    return sb[pos] == a


def ragged_take(lo: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenation of the ranges lo[i] : lo[i]+count[i], vectorized."""
    lo = np.asarray(lo, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    total = int(count.sum())
    return np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(total, dtype=np.int64)


def _op_ranks(dag: FlowDag, coll: np.ndarray, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(op, rank) pairs: the op's own rank, or every member rank for an op of a collective (its barriers
    and flows), or every rank for a rank −1 NOP outside collectives (``coll``: dag.coll)."""
    r = np.where(coll[ops] >= 0, -1, dag.rank[ops]).astype(np.int64)
    own = r >= 0
    wide = ops[~own]
    c = coll[wide].astype(np.int64)
    in_coll, loose = wide[c >= 0], wide[c < 0]
    lo = dag.coll_ranks_ptr[c[c >= 0]]
    cnt = dag.coll_ranks_ptr[c[c >= 0] + 1] - lo
    op_parts = [ops[own], np.repeat(in_coll, cnt), np.repeat(loose, dag.n_ranks)]
    rank_parts = [r[own], dag.coll_ranks[ragged_take(lo, cnt)].astype(np.int64),
                  np.tile(np.arange(dag.n_ranks, dtype=np.int64), loose.size)]
    return np.concatenate(op_parts), np.concatenate(rank_parts)


def rank_roots_and_terminals(dag: FlowDag) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-rank roots and terminals as (op, rank) pairs: (root_op, root_rank, term_op, term_rank).

    An op of rank r is a root (terminal) of r if no op of r is among its deps (dependents). The ops of a
    collective — its barrier NOPs and its flows — count as ops of every member rank, so only a barrier can
    be a root and only an end NOP a terminal of a collective; a rank −1 NOP outside collectives counts for
    every rank. A RECV's NOP is thus a root of its rank when its only dep is the sender's flow, and a send's
    last chunk a terminal of the sender when only the receiver waits for it.
    """
    n = dag.n_ops
    # per-dep arrays in the DAG's op id dtype (int32): the edges between two ops of one collective are most
    # of the deps and need no more than a mask
    owner = np.repeat(np.arange(n, dtype=index_dtype(n)), np.diff(dag.dep_ptr))
    dep = dag.dep_idx
    R = dag.n_ranks + 1
    coll = dag.coll
    of_owner = coll[owner]
    intra = of_owner >= 0
    intra &= of_owner == coll[dep]  # same member set on both sides
    del of_owner
    has_dep_all = np.zeros(n, bool)
    has_dep_all[owner[intra]] = True
    has_child_all = np.zeros(n, bool)
    has_child_all[dep[intra]] = True
    # cross-unit edges: same-rank for rank r iff r belongs to both ends
    e = np.flatnonzero(~intra)
    del intra
    owner_e = owner[e].astype(np.int64)  # keys below multiply op ids by the rank count
    dep_e = dep[e].astype(np.int64)
    del owner, e
    eo, ro = _op_ranks(dag, coll, owner_e)
    ed, rd = _op_ranks(dag, coll, dep_e)
    # _op_ranks keeps ops in their input order per group; recover the edge of each pair by position
    eid_o = _pair_edge(dag, coll, owner_e)
    eid_d = _pair_edge(dag, coll, dep_e)
    key_o = eid_o * R + ro
    key_d = eid_d * R + rd
    both = is_in(key_o, key_d)
    has_dep_key = sorted_unique(owner_e[eid_o[both]] * R + ro[both])
    both_d = is_in(key_d, key_o)
    has_child_key = sorted_unique(dep_e[eid_d[both_d]] * R + rd[both_d])
    cand_r = np.flatnonzero(~has_dep_all)
    rop, rrk = _op_ranks(dag, coll, cand_r)
    keep = ~is_in(rop * R + rrk, has_dep_key)
    cand_t = np.flatnonzero(~has_child_all)
    top, trk = _op_ranks(dag, coll, cand_t)
    keep_t = ~is_in(top * R + trk, has_child_key)
    return rop[keep], rrk[keep], top[keep_t], trk[keep_t]


def _pair_edge(dag: FlowDag, coll: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """For the pairs _op_ranks(dag, coll, ops) returns, the position in ``ops`` each pair came from."""
    pos = np.arange(ops.size, dtype=np.int64)
    r = np.where(coll[ops] >= 0, -1, dag.rank[ops])
    own = r >= 0
    wide = ~own
    c = coll[ops[wide]].astype(np.int64)
    cnt = np.where(c >= 0, dag.coll_ranks_ptr[np.maximum(c, 0) + 1] - dag.coll_ranks_ptr[np.maximum(c, 0)], 0)
    pw = pos[wide]
    return np.concatenate([pos[own], np.repeat(pw[c >= 0], cnt[c >= 0]), np.repeat(pw[c < 0], dag.n_ranks)])


def _copied_dep_blocks(dag: FlowDag, k: int):
    """The deps of ``k`` copies of ``dag`` (copy j's ops shifted by j·n_ops), a block of ops at a time."""
    n = dag.n_ops
    for j in range(k):
        for lo in range(0, n, _CHECK_BLOCK_OPS):
            hi = min(n, lo + _CHECK_BLOCK_OPS)
            owner = np.repeat(np.arange(lo + j * n, hi + j * n, dtype=np.int64), np.diff(dag.dep_ptr[lo:hi + 1]))
            yield owner, dag.dep_idx[dag.dep_ptr[lo]:dag.dep_ptr[hi]].astype(np.int64) + j * n


def repeat(dag: FlowDag, n_iterations: int) -> FlowDag:
    """Chain ``n_iterations`` copies of ``dag``: each rank's roots in copy k+1 wait for its terminals in copy k
    (per-rank roots and terminals: :func:`rank_roots_and_terminals`)."""
    if isinstance(n_iterations, bool) or not isinstance(n_iterations, (int, np.integer)) or n_iterations < 1:
        raise CosimInputError("n_iterations", f"must be a positive integer, got {n_iterations!r}")
    if dag.n_iterations != 1:
        raise CosimInputError("dag.n_iterations", f"repeat() takes a one-iteration DAG, got {dag.n_iterations}")
    k = int(n_iterations)
    n = dag.n_ops
    if n == 0:
        raise CosimInputError("dag", "cannot repeat an empty DAG")
    root_op, root_rank, term_op, term_rank = rank_roots_and_terminals(dag)
    # join on rank: every (root, terminal) pair of one rank is a cross-iteration edge
    order = np.argsort(term_rank, kind="stable")
    term_op, term_rank = term_op[order], term_rank[order]
    lo = np.searchsorted(term_rank, root_rank, side="left")
    hi = np.searchsorted(term_rank, root_rank, side="right")
    cnt = hi - lo
    x_owner = np.repeat(root_op, cnt)
    x_dep = term_op[ragged_take(lo, cnt)]
    key = sorted_unique(x_owner * n + x_dep)  # a collective-wide root may meet a terminal through several ranks
    x_owner, x_dep = key // n, key % n
    # every copy's own deps, then the cross-iteration ones, written straight into the CSR of the k copies
    ptr, idx = csr_from_dep_sources([lambda: _copied_dep_blocks(dag, k),
                                     lambda: ((x_owner + j * n, x_dep + (j - 1) * n) for j in range(1, k))], k * n)
    ptr.flags.writeable = idx.flags.writeable = False  # FlowDag adopts them

    def tile(a: np.ndarray) -> np.ndarray:
        """k copies of ``a`` in an array of its own, read-only: FlowDag adopts it instead of copying again."""
        out = np.empty(k * a.size, a.dtype)
        out.reshape(k, a.size)[:] = a
        out.flags.writeable = False
        return out

    it_coll = np.repeat(np.arange(k, dtype=np.int32), dag.n_collectives)
    m = dag.n_collectives
    op_shift = np.repeat(np.arange(k, dtype=np.int64) * n, dag.trace_done.size)
    op_id = index_dtype(k * n)
    cshift = np.repeat(np.arange(k, dtype=np.int64) * n, m)
    return FlowDag(
        n_ranks=dag.n_ranks, gpus_per_server=dag.gpus_per_server, n_iterations=k, n_trace_ops=dag.n_trace_ops,
        kind=tile(dag.kind), rank=tile(dag.rank), dst=tile(dag.dst), bytes=tile(dag.bytes),
        duration_ns=tile(dag.duration_ns), priority=tile(dag.priority), trace_op=tile(dag.trace_op),
        iteration_ptr=np.arange(k + 1, dtype=np.int64) * n,
        dep_ptr=ptr, dep_idx=idx, trace_start=(tile(dag.trace_start) + op_shift).astype(op_id),
        trace_done=(tile(dag.trace_done) + op_shift).astype(op_id), coll_trace_id=tile(dag.coll_trace_id),
        coll_kind=tile(dag.coll_kind), coll_bytes=tile(dag.coll_bytes), coll_group=tile(dag.coll_group),
        coll_algo=tile(dag.coll_algo), coll_start_op=tile(dag.coll_start_op) + cshift,
        coll_end_op=tile(dag.coll_end_op) + cshift, coll_iteration=it_coll,
        coll_ranks_ptr=np.concatenate([[0], np.cumsum(np.tile(np.diff(dag.coll_ranks_ptr), k))]),
        coll_ranks=tile(dag.coll_ranks), blocks=dag.blocks, block_tmpl=np.tile(dag.block_tmpl, k),
        block_op=(tile(dag.block_op) + np.repeat(np.arange(k, dtype=np.int64) * n, dag.block_op.size)))
