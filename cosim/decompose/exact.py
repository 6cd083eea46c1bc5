"""Simulate a DAG run as independent or identical parts and merge them into exactly the whole run's output.

    d = decomposition(fabric, columns, gpu_node=..., attributes=...)   # what runs apart, or why not
    out = simulate(fabric, columns, d, ...)                             # == engine.simulate_dag(...) output

``columns`` are the DAG columns engine.simulate_dag takes (kind, gpu, src_node, dst_node, bytes_,
duration_ns, priority, dep_ptr, dep_idx). Two ways to split, both exact (docs/decomposition.md proves it):

- **independent groups**: the connected components of the graph joining ops by their dependencies and
  FLOW ops by the network part (cosim.decompose.parts) they use. No event of one group can change another,
  so each runs in its own ns-3 run on the whole fabric with only its ops; groups identical up to a
  relabeling of hosts run once.
- **symmetric fold**: the DAG couples the network parts (training on rail-optimized fabrics: the TP
  collectives inside a server join the rails), but every part is the same DAG and the same sub-fabric up
  to a relabeling of hosts. Identical parts finish the ops at the same position at the same times, so one
  part runs, each dependency on an op of another part pointing to the op at the same position of its own,
  and the results are copied to every part by relabeling.

The merged :class:`cosim.engine.DagOutput` has the whole run's op times, flows, ports, queues, pauses,
stalls, latency histogram and counters; ``events``, ``pool_packets``, ``wall_time_s`` and
``run_wall_time_s`` are the simulator's cost and differ (sums or maxima over the runs made).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cosim import engine, memory
from cosim.arrays import run_lengths, unique_inverse
from cosim.collectives import DagOpKind
from cosim.collectives.dag import BlockTemplates, csr_from_edges
from cosim.decompose.parts import (
    components,
    flow_parts,
    single_paths,
    too_large_to_search,
)
from cosim.network.dragonfly import router_groups
from cosim.network.topology import SWITCH
from cosim.progress import PartsProgress
from cosim.streamed import StreamedTable
from cosim.workers import worker_init, worker_initargs

#: routings whose path choice reads no flow id (pinned: destination; spray: a per-switch counter)
_ID_FREE_ROUTINGS = ("pinned", "spray")
#: dtype of the op-indexed arrays: op ids fit whenever the ops do (training.MAX_DAG_OPS is below 2^31), and
#: half the width of int64 is what lets a 16,384-GPU DAG be decomposed in the memory that holds it
OP = np.int32
#: dependencies handled per block where a pass over every edge would otherwise hold edge-sized temporaries
EDGE_BLOCK = 1 << 22
#: largest (ops of no part) x (parts) boolean table the grouping marks edges in, entries (256 MiB: a
#: 16,384-GPU fold's 1.3 x 10^7 barriers x 8 rails fit; beyond, each block's distinct pairs are sorted out,
#: many times slower)
TOUCH_TABLE_MAX = 1 << 28
#: queue samples of one piece per time slice of the merge: a slice holds about the parts times as many rows,
#: and its readers (the results writer, the queue percentile) a few times that in temporaries
QUEUE_MERGE_SLICE_ROWS = 1 << 17


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Piece:
    """One ns-3 run of a decomposition: some ops of the DAG, their dependencies remapped."""

    ops: np.ndarray  # OP, global indices of the ops it runs, increasing
    dep_ptr: np.ndarray  # int64 [ops.size + 1], CSR of dependencies in local indices
    dep_idx: np.ndarray  # int64
    copies: int  # how many parts of the whole run it stands for
    #: the templates its BLOCK ops run, if not the DAG's (a fold's: each one's copies on its part-0 GPU)
    block_templates: BlockTemplates | None = None

    @classmethod
    def of(cls, ops: np.ndarray, dep_ptr: np.ndarray, dep_idx: np.ndarray) -> "Piece":
        """The piece running ``ops`` (global indices, increasing, holding every dependency of theirs) once."""
        ops = np.asarray(ops, OP)
        ptr, idx = _local_deps(ops.astype(np.int64), dep_ptr, dep_idx)
        return cls(ops=ops, dep_ptr=ptr, dep_idx=idx, copies=1)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Decomposition:
    """How a DAG run is simulated: ``mode`` "whole" (one run, ``reason`` says why), "independent" or
    "symmetric" (``pieces``; every op's times come from the op ``op_image`` names in piece ``op_piece``)."""

    mode: str
    reason: str
    n_parts: int = 1  # network parts (independent: DAG groups) the run has
    classes: tuple[tuple[int, ...], ...] = ()  # parts that are identical, each class run once
    pieces: tuple[Piece, ...] = ()
    op_piece: np.ndarray | None = None  # OP [n_ops], piece each op's times come from
    op_image: np.ndarray | None = None  # OP [n_ops], the global op of that piece standing for it
    node_image: np.ndarray | None = None  # int64 [n_nodes], the node whose telemetry each node copies
    node_piece: np.ndarray | None = None  # int64 [n_nodes], the piece it copies it from

    def describe(self) -> dict:
        """What --dry-run shows: the mode and why, the parts, the classes of identical parts (their sizes),
        the ns-3 runs made and the most ops one of them runs."""
        out = {"decompose": self.mode, "decompose_reason": self.reason}
        if self.mode != "whole":
            out |= {"decompose_parts": self.n_parts, "decompose_classes": [len(c) for c in self.classes],
                    "decompose_runs": len(self.pieces),
                    "decompose_ops_per_run_max": max(int(p.ops.size) for p in self.pieces)}
        return out


def _whole(reason: str, n_parts: int = 1) -> Decomposition:
    return Decomposition(mode="whole", reason=reason, n_parts=n_parts)


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """int64: lo[0]..hi[0]-1, then lo[1]..hi[1]-1, ... (the rows lo..hi of a CSR array, concatenated)."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    counts = hi - lo
    return np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()), dtype=np.int64)


def _edge_ranges(dep_ptr: np.ndarray, n_edges: int):
    """(first, last, counts, lo, hi) per block of :data:`EDGE_BLOCK` dependency edges lo..hi-1: their owners
    are ops first..last-1, with ``counts`` of the block's edges each."""
    edge = np.asarray(dep_ptr).dtype.type  # a key of dep_ptr's own dtype: searchsorted converts no copy of it
    for lo in range(0, int(n_edges), EDGE_BLOCK):
        hi = min(lo + EDGE_BLOCK, int(n_edges))
        first = int(np.searchsorted(dep_ptr, edge(lo), "right")) - 1
        last = int(np.searchsorted(dep_ptr, edge(hi), "left"))
        yield first, last, np.diff(np.clip(dep_ptr[first:last + 1], lo, hi)), lo, hi


def _edge_blocks(dep_ptr: np.ndarray, dep_idx: np.ndarray):
    """(owner, dep) of every dependency edge, :data:`EDGE_BLOCK` edges at a time (OP arrays)."""
    for first, last, counts, lo, hi in _edge_ranges(dep_ptr, dep_idx.size):
        yield np.repeat(np.arange(first, last, dtype=OP), counts), np.asarray(dep_idx[lo:hi], OP)


def _op_nodes(columns: dict, gpu_node: np.ndarray) -> np.ndarray:
    """OP [n_ops]: the host each op runs on (a FLOW op's source, else its GPU's host; -1: none)."""
    kind = np.asarray(columns["kind"])
    gpu = np.asarray(columns["gpu"])
    node = np.asarray(gpu_node, OP)[np.maximum(gpu, 0)]
    node[gpu < 0] = -1
    flow = kind == DagOpKind.FLOW
    node[flow] = np.asarray(columns["src_node"])[flow]
    return node


def _canonical(columns: dict, ops: np.ndarray, gpu_node: np.ndarray, dep_code: np.ndarray,
               dep_val: np.ndarray, dep_ptr: np.ndarray):
    """(digest, nodes by label) of ``ops``: the SHA-256 of their columns with hosts labelled in order of
    first appearance and dependencies given as codes; equal digests mean equal parts up to relabeling
    hosts. The columns are hashed one at a time, so no key the size of the part is built."""
    def column(name: str, dtype) -> np.ndarray:  # the part's rows, then the dtype: no copy of the whole column
        return np.asarray(columns[name])[ops].astype(dtype)

    kind = np.asarray(columns["kind"])[ops]
    gpu = column("gpu", np.int64)
    gnode = np.where(gpu >= 0, gpu_node[np.maximum(gpu, 0)], -1)
    flow = kind == DagOpKind.FLOW
    src = np.where(flow, column("src_node", np.int64), -1)
    dst = np.where(flow, column("dst_node", np.int64), -1)
    seq = np.stack([gnode, src, dst], axis=1).reshape(-1)
    subs = _block_subs(columns, ops)
    if subs is not None:
        t, rows = subs
        sub_nodes = np.stack([gpu_node[t.gpu[rows]], gpu_node[t.dst[rows]]], axis=1).reshape(-1)
        seq = np.concatenate([seq, sub_nodes])
    seen = seq[seq >= 0]
    nodes, first = np.unique(seen, return_index=True)
    by_label = nodes[np.argsort(first, kind="stable")]
    label = np.full(int(max(seq.max(initial=-1), 0)) + 1, -1, np.int64)
    label[by_label] = np.arange(by_label.size)
    relabel = lambda x: np.where(x >= 0, label[np.maximum(x, 0)], -1)  # noqa: E731
    counts = np.diff(dep_ptr)[ops]
    parts = [kind.astype(np.int64), relabel(gnode), relabel(src), relabel(dst),
             column("bytes_", np.int64), column("duration_ns", np.float64).view(np.int64),
             column("priority", np.int64), counts, dep_code, dep_val]
    if "comm_class" in columns:
        parts.append(column("comm_class", np.int64))
    if subs is not None:  # every BLOCK op's copies, in op order: their hosts, bytes, extra time and deps
        t, rows = subs
        parts += [relabel(sub_nodes), t.kind[rows], t.bytes[rows], t.duration_ns[rows], np.diff(t.dep_ptr)[rows],
                  t.dep_idx[_ranges(t.dep_ptr[rows], t.dep_ptr[rows + 1])]]
    digest = hashlib.sha256()
    for p in parts:
        digest.update(np.ascontiguousarray(p, np.int64))
        digest.update(b"|")
    return digest.digest(), by_label


def _blocks_unfoldable(columns, gpu_node, op_part, host_part, blk, blk_node, k: int) -> str:
    """Why the BLOCK ops ``blk`` (each with the hosts ``blk_node`` of its GPUs, as pairs) keep a DAG from being
    folded onto part 0 ("" if they do not). The folded run holds every BLOCK op (with its part-0 GPU's copies,
    ``_part0_copies``), and a part's ops take part 0's times: exact when every GPU of every part sees the same
    copies on its copy engine as its image in part 0 does. So every BLOCK op must copy from one GPU of each part, the same copies at the same positions
    of every GPU's own (its template symmetric), and no GPU a BLOCK op uses may also run NVLINK ops of a part
    (those run in part 0 only)."""
    nvl = np.flatnonzero(np.asarray(columns["kind"]) == DagOpKind.NVLINK)
    nvl_node = np.asarray(gpu_node, np.int64)[np.asarray(columns["gpu"])[nvl]]
    if np.isin(blk_node, nvl_node[op_part[nvl] >= 0]).any():
        return "a collective held as one BLOCK op copies on a GPU that also runs NVLINK ops of a part"
    part = np.asarray(host_part)[blk_node]
    ops, gpus = run_lengths(blk)  # blk holds each (op, GPU) pair once, in op order
    if np.any(part < 0) or np.any(gpus != k):
        return "a collective held as one BLOCK op does not copy from one GPU of every part"
    key = np.sort(blk.astype(np.int64) * k + part, kind="stable")  # in op order already: a few values to move
    if np.any(key[1:] == key[:-1]):
        return "a collective held as one BLOCK op does not copy from one GPU of every part"
    del key
    t = columns["block_templates"]
    used = np.unique(np.asarray(columns["block"])[ops])
    if not all(_symmetric(t, int(i)) for i in used):
        return "a collective held as one BLOCK op is not the same on each of its GPUs"
    return ""


def _symmetric(t, template: int) -> bool:
    """True when every GPU of ``template`` makes the same copies: as many, and the j-th of each with the same
    bytes, extra time and dependencies, each on the copy at the same position of the same GPU or of another."""
    lo, hi = int(t.ptr[template]), int(t.ptr[template + 1])
    gpu = np.asarray(t.gpu[lo:hi], np.int64)
    gpus, slot, per_gpu = np.unique(gpu, return_inverse=True, return_counts=True)
    if np.any(per_gpu != per_gpu[0]):
        return False
    pos = np.zeros(gpu.size, np.int64)  # position of every copy among its GPU's copies
    order = np.argsort(slot, kind="stable")
    pos[order] = np.arange(gpu.size) % per_gpu[0]
    n_dep = np.diff(t.dep_ptr[lo:hi + 1])
    dep = np.asarray(t.dep_idx[t.dep_ptr[lo]:t.dep_ptr[hi]], np.int64)
    owner = np.repeat(np.arange(gpu.size), n_dep)
    rows = np.stack([pos[dep], slot[dep] == slot[owner]], axis=1)
    for column in (t.bytes[lo:hi], t.duration_ns[lo:hi], n_dep):
        grid = np.asarray(column)[order].reshape(gpus.size, -1)  # GPU x position
        if np.any(grid != grid[:1]):
            return False
    # each GPU's dependency rows, in its copies' order, must be GPU 0's
    by_gpu = [rows[np.isin(owner, np.flatnonzero(slot == g))] for g in range(gpus.size)]
    return all(np.array_equal(b, by_gpu[0]) for b in by_gpu[1:])


def _part0_copies(t: BlockTemplates, used: np.ndarray, host_part: np.ndarray) -> BlockTemplates:
    """The templates ``t`` reduced to the copies of their part-0 GPU (templates not in ``used`` to none).

    In a fold every used template is symmetric (``_symmetric``) and copies from one GPU of each part, so by
    induction over positions the j-th copies of all its GPUs become ready and finish at the same instants:
    each depends on the same positions and meets the same copies on its copy engine. A dependency on
    position p of another GPU is then one on position p of its own, and the part-0 GPU's copies alone give
    the BLOCK op's times and its GPU's copy-engine load and compute interference; the other parts' GPUs
    carry none of the folded run's compute. Such a dependency is always on an earlier position (a chain of
    them would otherwise descend forever through the GPUs), so the reduced template is a DAG. A template of
    flows alone (a BLOCK op of part 0's own) keeps its subs and dependencies as they are."""
    size = np.diff(t.ptr)
    keep_tmpl = np.zeros(size.size, bool)
    keep_tmpl[used] = True
    sub_tmpl = t.template_of_sub()
    keep = keep_tmpl[sub_tmpl] & (np.asarray(host_part)[t.gpu] == 0)
    # position of every copy among its GPU's copies in its template (copies listed in template order)
    key = sub_tmpl * (int(t.gpu.max(initial=0)) + 1) + t.gpu
    order = np.argsort(key, kind="stable")
    first = np.r_[True, key[order][1:] != key[order][:-1]]
    run_start = np.flatnonzero(first)
    pos = np.empty(key.size, np.int64)
    pos[order] = np.arange(key.size) - np.repeat(run_start, np.diff(np.r_[run_start, key.size]))
    whole = (t.flow_counts() == size)[sub_tmpl]  # templates of flows alone
    pos[whole] = (np.arange(key.size) - t.ptr[sub_tmpl])[whole]  # its local index: its deps stay as they are
    rows = np.flatnonzero(keep)
    counts = np.diff(t.dep_ptr)[rows]
    dep = pos[t.ptr[np.repeat(sub_tmpl[rows], counts)] + t.dep_idx[_ranges(t.dep_ptr[rows], t.dep_ptr[rows + 1])]]
    owner = np.repeat(np.arange(rows.size), counts)
    assert np.all(dep < pos[rows][owner]), "a symmetric template depends on a later position"
    pairs = np.unique(np.stack([owner, dep], axis=1), axis=0)  # a position reached from two GPUs once
    dep_ptr = np.zeros(rows.size + 1, np.int64)
    np.cumsum(np.bincount(pairs[:, 0], minlength=rows.size), out=dep_ptr[1:])
    ptr = np.zeros(size.size + 1, np.int64)
    np.cumsum(np.bincount(sub_tmpl[rows], minlength=size.size), out=ptr[1:])
    return dataclasses.replace(t, ptr=ptr, kind=t.kind[rows], gpu=t.gpu[rows], dst=t.dst[rows], bytes=t.bytes[rows],
                               duration_ns=t.duration_ns[rows], dep_ptr=dep_ptr,
                               dep_idx=pairs[:, 1].astype(t.dep_idx.dtype))


def _block_subs(columns: dict, ops: np.ndarray):
    """(templates, their copies' rows) of the BLOCK ops among ``ops``, in op order, or None if there are none."""
    if columns.get("block") is None:
        return None
    tmpl = np.asarray(columns["block"])[ops]
    tmpl = tmpl[tmpl >= 0].astype(np.int64)
    t = columns["block_templates"]
    return t, _ranges(t.ptr[tmpl], t.ptr[tmpl + 1])


def _id_dependent_routing(attributes: dict) -> bool:
    vals = engine.attribute_values(attributes, ("FabricSwitch::Routing", "FabricSwitch::EcmpHashFields"))
    return vals["FabricSwitch::Routing"] not in _ID_FREE_ROUTINGS and vals["FabricSwitch::EcmpHashFields"] == "flow"


def _part_switches(fabric, link_part: np.ndarray, n_parts: int) -> list[np.ndarray]:
    out = []
    for p in range(n_parts):
        ends = np.unique(np.concatenate([fabric.link_a[link_part == p], fabric.link_b[link_part == p]]))
        out.append(ends[fabric.node_kind[ends] == SWITCH])
    return out


def _node_links(fabric) -> dict:
    """(node, peer) -> link index, for every link in both directions."""
    out = {}
    for j, (a, b) in enumerate(zip(fabric.link_a.tolist(), fabric.link_b.tolist())):
        out[(a, b)] = j
        out[(b, a)] = j
    return out


def _images_match(fabric, node_map: dict, link_part: np.ndarray, part: int) -> bool:
    """True if mapping nodes by ``node_map`` carries every used link of ``part`` onto a link of the same
    rate and delay, and every switch onto one drawing from the same marking stream (the sub-fabrics are
    the same up to relabeling, and make the same random choices for the same packets)."""
    stream = fabric.marking_streams()
    if any(stream[a] != stream[b] for a, b in node_map.items()):
        return False
    links = _node_links(fabric)
    for j in np.flatnonzero(link_part == part):
        a, b = int(fabric.link_a[j]), int(fabric.link_b[j])
        ia, ib = node_map.get(a), node_map.get(b)
        k = links.get((ia, ib))
        if k is None or fabric.link_rate_bps[k] != fabric.link_rate_bps[j] \
                or fabric.link_delay_ns[k] != fabric.link_delay_ns[j]:
            return False
    return True


def decomposition(fabric, columns: dict, *, gpu_node: np.ndarray, attributes: dict,
                  snapshots: bool = False, parts=None) -> Decomposition:
    """Decide how ``columns`` (a DAG on ``fabric``; ``gpu_node``: host node of every GPU label) can be
    simulated exactly: in independent groups, as one folded part of identical ones, or whole (``parts``: the
    flow_parts of its FLOW ops, if already found)."""
    kind = np.asarray(columns["kind"])
    flow = np.flatnonzero(kind == DagOpKind.FLOW)
    if snapshots:
        return _whole("delivered-bytes snapshots are taken of the whole run")
    fb_ops, fb_tmpl, fb_subs = _flow_blocks(columns)
    if fb_ops is None:
        return _whole("a collective held as one BLOCK op both copies over NVLink and moves flows")
    if flow.size == 0 and fb_ops.size == 0:
        return _whole("no flow crosses the fabric")
    if router_groups(fabric) is not None:
        return _whole("dragonfly routes go by group (and via intermediate groups), not along the shortest paths "
                      "parts are found on")
    if isinstance(fabric.params, Mapping) and fabric.params.get("routes"):
        return _whole("the fabric file's routes replace some shortest paths, which parts are found on")
    # the fabric's flows: the FLOW ops', then each flow of a template of BLOCK ops once
    t = columns.get("block_templates")
    src = np.concatenate([np.asarray(columns["src_node"])[flow], t.gpu[fb_subs] if fb_subs.size else []])
    dst = np.concatenate([np.asarray(columns["dst_node"])[flow], t.dst[fb_subs] if fb_subs.size else []])
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    too_large = too_large_to_search(fabric, src)
    if too_large:
        return _whole(too_large)
    parts = flow_parts(fabric, src, dst) if parts is None else parts
    if parts.n_parts < 2:
        return _whole("the traffic is one part (its flows can share a switch)")
    one_switch = all(sw.size == 1 for sw in _part_switches(fabric, parts.link_part, parts.n_parts))
    if not one_switch and _id_dependent_routing(attributes) and not single_paths(fabric, src, dst):
        return _whole("ECMP hashes flow ids, which count flows over the whole run, and some flow has equal-cost "
                      "paths", parts.n_parts)
    dep_ptr, dep_idx = np.asarray(columns["dep_ptr"]), np.asarray(columns["dep_idx"])
    host_part = _host_parts(fabric, parts)
    node = _op_nodes(columns, gpu_node)
    none = node < 0
    op_part = host_part[np.maximum(node, 0, out=node)]
    del node
    op_part[none] = -1
    del none
    op_part[flow] = host_part[src[:flow.size]]
    if fb_ops.size:  # a BLOCK op moving flows belongs to their part: all of them in one
        sub_part = host_part[src[flow.size:]]
        lo = np.full(t.n_templates, np.iinfo(OP).max, OP)
        hi = np.full(t.n_templates, -1, OP)
        owner = t.template_of_sub()[fb_subs]
        np.minimum.at(lo, owner, sub_part)
        np.maximum.at(hi, owner, sub_part)
        if np.any(lo[fb_tmpl] != hi[fb_tmpl]):
            return _whole("a collective held as one BLOCK op moves flows in more than one part", parts.n_parts)
        op_part[fb_ops] = hi[fb_tmpl]
    del src, dst, flow
    group, n_groups = _groups(columns, op_part, parts.n_parts, dep_ptr, dep_idx, host_part, gpu_node)
    if n_groups > 1:
        return _independent(fabric, columns, gpu_node, group, n_groups, parts, dep_ptr, dep_idx)
    del group
    shared = (kind == DagOpKind.BLOCK) & (op_part < 0)  # a BLOCK op copying on GPUs of several parts
    op_part = _spread_parts(op_part, dep_ptr, dep_idx, shared=shared)
    return _fold(fabric, columns, gpu_node, op_part, parts, dep_ptr, dep_idx, host_part)


def _host_parts(fabric, parts) -> np.ndarray:
    """OP [n_nodes]: the part of every host some flow starts or ends at (the part of its link), -1 for the
    other nodes."""
    used = parts.link_part >= 0
    node_part = np.full(fabric.n_nodes, -1, OP)
    for end in (fabric.link_a, fabric.link_b):
        node_part[np.asarray(end, np.int64)[used]] = parts.link_part[used]
    node_part[np.asarray(fabric.node_kind) == SWITCH] = -1
    return node_part


def _flow_blocks(columns: dict):
    """(BLOCK ops whose template moves flows, their templates, every flow sub of those templates) of a DAG, or
    (None, None, None) if some template both copies and moves flows (such a call is coupled through its
    copies' GPUs and its flows' part at once, which no decomposition handles)."""
    t, block = columns.get("block_templates"), columns.get("block")
    empty = np.zeros(0, np.int64)
    if t is None or not t.has_flows():
        return empty, empty, empty
    owner = t.template_of_sub()
    flows = t.flow_counts()
    moving = flows > 0
    ops = np.flatnonzero(np.asarray(block) >= 0)
    tmpl = np.asarray(block)[ops].astype(np.int64)
    used = np.zeros(t.n_templates, bool)
    used[tmpl] = True
    if np.any(used & moving & (flows != t.sizes())):
        return None, None, None
    keep = moving[tmpl]
    return ops[keep], tmpl[keep], np.flatnonzero((used & moving)[owner])


def _block_gpus(columns: dict, gpu_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(BLOCK ops, the host of a GPU each copies from) as pairs, one per (op, GPU): the GPUs whose copy engines
    each BLOCK op takes (none for a BLOCK op of flows alone)."""
    block = columns.get("block")
    if block is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t = columns["block_templates"]
    ops = np.flatnonzero(np.asarray(block) >= 0)
    tmpl = np.asarray(block)[ops]
    owner = t.template_of_sub()
    width = int(t.gpu.max(initial=0)) + 1
    copy = t.kind == DagOpKind.NVLINK
    pairs = np.unique(owner[copy] * width + t.gpu[copy])  # (template, GPU), once each
    p_tmpl, p_gpu = pairs // width, pairs % width
    lo = np.searchsorted(p_tmpl, tmpl, "left")
    cnt = np.searchsorted(p_tmpl, tmpl, "right") - lo
    return np.repeat(ops, cnt), np.asarray(gpu_node, np.int64)[p_gpu[_ranges(lo, lo + cnt)]]


def _groups(columns: dict, op_part: np.ndarray, n_parts: int, dep_ptr: np.ndarray, dep_idx: np.ndarray,
            host_part: np.ndarray, gpu_node: np.ndarray):
    """(group of every op, number of groups): ops of one part belong together, and so do the NVLink copies
    of one GPU (serialized, a BLOCK op's included); the dependencies join the rest. Components are found on
    the graph with each part contracted to one vertex, which keeps only the edges between parts and ops of no
    part."""
    free = op_part < 0
    vertex = np.cumsum(free, dtype=OP)
    vertex += n_parts - 1
    np.copyto(vertex, op_part, where=~free)
    n_free = int(np.count_nonzero(free))
    # most edges repeat a pair of parts (the NVLink rings of a server cross every rail) or a (free op,
    # part) pair (a barrier and the ops of one part around it): both kinds are marked in boolean tables
    # (the second, when it would be large, replaced by each block's distinct pairs), only edges between
    # two free ops are kept as they are
    part_pairs = np.zeros((n_parts, n_parts), bool)
    table = n_free * n_parts <= TOUCH_TABLE_MAX
    touches = np.zeros((n_free if table else 0, n_parts), bool)
    a, b = [], []
    for owner, dep in _edge_blocks(dep_ptr, dep_idx):
        va, vb = vertex[owner], vertex[dep]
        in_a, in_b = va < n_parts, vb < n_parts
        both = in_a & in_b
        part_pairs[va[both], vb[both]] = True
        for x, y, m in ((va, vb, in_a & ~in_b), (vb, va, ~in_a & in_b)):
            if table:
                touches[y[m] - n_parts, x[m]] = True
            else:
                pairs = np.unique(y[m].astype(np.int64) * n_parts + x[m])
                a.append(pairs // n_parts)
                b.append(pairs % n_parts)
        m = ~in_a & ~in_b & (va != vb)
        a.append(va[m])
        b.append(vb[m])
    kind = np.asarray(columns["kind"])
    nvl = np.flatnonzero((kind == DagOpKind.NVLINK) & free)
    gpu = np.asarray(columns["gpu"])[nvl]
    # a GPU of a part is that part's vertex; a GPU of none, a vertex of its own after the ops'
    blk, blk_node = _block_gpus(columns, gpu_node)
    nodes = np.concatenate([np.asarray(gpu_node, np.int64)[gpu], blk_node])
    gpu_vertex = np.where(host_part[nodes] >= 0, host_part[nodes], n_parts + n_free + nodes)
    del nodes, blk_node
    pa, pb = np.nonzero(part_pairs)
    tf, tp = np.nonzero(touches)
    del touches
    n_vertices = n_parts + n_free + int(np.asarray(host_part).size)
    vid = np.int32 if n_vertices < np.iinfo(np.int32).max else np.int64  # as components takes them
    a = np.concatenate([pa.astype(vid), (tf + n_parts).astype(vid)] + [x.astype(vid) for x in a]
                       + [vertex[nvl].astype(vid), vertex[blk].astype(vid)])
    del blk
    b = np.concatenate([pb.astype(vid), tp.astype(vid)] + [x.astype(vid) for x in b] + [gpu_vertex.astype(vid)])
    root = components(n_vertices, a, b)
    roots, comp = unique_inverse(root[vertex], below=root.size)  # groups of ops (a GPU vertex alone is none)
    return comp.reshape(-1).astype(OP), int(roots.size)


def _spread_parts(op_part: np.ndarray, dep_ptr: np.ndarray, dep_idx: np.ndarray,
                  shared: np.ndarray | None = None) -> np.ndarray:
    """``op_part`` with every op of no host (a collective's barrier) given the part of its neighbours when
    they all lie in one part; ops between parts, and the ``shared`` ones, stay -1 (shared). ``op_part`` is
    updated in place."""
    part = op_part
    owners, deps = [], []
    for owner, dep in _edge_blocks(dep_ptr, dep_idx):
        touch = (part[owner] < 0) | (part[dep] < 0)  # only edges at an op of no part can spread anything
        owners.append(owner[touch])
        deps.append(dep[touch])
    # the ops those edges touch, renumbered 0..m-1: the spreading works on them alone
    ops, ends = unique_inverse(np.concatenate(owners + deps), below=part.size)
    owner, dep = ends[:ends.size // 2], ends[ends.size // 2:]
    del owners, deps, ends
    sub = part[ops]
    conflict = np.zeros(ops.size, bool) if shared is None else np.asarray(shared)[ops].copy()
    while True:
        lo = np.full(ops.size, np.iinfo(OP).max, OP)
        hi = np.full(ops.size, -1, OP)
        for x, y in ((owner, dep), (dep, owner)):
            known = sub[y] >= 0
            np.minimum.at(lo, x[known], sub[y[known]])
            np.maximum.at(hi, x[known], sub[y[known]])
        conflict |= (hi >= 0) & (lo != hi)
        take = (sub < 0) & ~conflict & (hi >= 0)
        if not take.any():
            part[ops] = sub
            return part
        sub[take] = hi[take]


def _independent(fabric, columns, gpu_node, group, n_groups, parts, dep_ptr, dep_idx) -> Decomposition:
    """Groups of ops no dependency and no shared link joins: each its own run, identical ones once."""
    n = group.size
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    members = [order[bounds[g]:bounds[g + 1]].astype(OP) for g in range(n_groups)]
    del order
    local = np.empty(n, OP)
    for ops in members:
        local[ops] = np.arange(ops.size, dtype=OP)
    keys: dict[bytes, list[int]] = {}
    labels = []
    for g, ops in enumerate(members):
        deps = dep_idx[_ranges(dep_ptr[ops], dep_ptr[ops + 1])]
        key, by_label = _canonical(columns, ops, gpu_node, np.zeros(deps.size, np.int64), local[deps], dep_ptr)
        keys.setdefault(key, []).append(g)
        labels.append(by_label)
    link_part = parts.link_part
    node_part = np.full(fabric.n_nodes, -1, np.int64)
    for j in np.flatnonzero(link_part >= 0):
        node_part[fabric.link_a[j]] = node_part[fabric.link_b[j]] = link_part[j]
    classes = []
    for gs in keys.values():
        # identical DAGs run once only if their sub-fabrics match by the same host labels: one switch each
        rep = gs[0]
        same = [rep]
        for g in gs[1:]:
            if _same_fabric_piece(fabric, labels[rep], labels[g], node_part, link_part):
                same.append(g)
            else:
                classes.append((g,))
        classes.append(tuple(same))
    classes.sort()
    op_piece = np.empty(n, OP)
    op_image = np.empty(n, OP)
    node_piece = np.zeros(fabric.n_nodes, np.int64)
    node_image = np.arange(fabric.n_nodes, dtype=np.int64)
    pieces = []
    for c, gs in enumerate(classes):
        rep_ops = members[gs[0]]
        ptr, idx = _local_deps(rep_ops, dep_ptr, dep_idx, local)
        pieces.append(Piece(ops=rep_ops, dep_ptr=ptr, dep_idx=idx, copies=len(gs)))
        for g in gs:
            op_piece[members[g]] = c
            op_image[members[g]] = rep_ops[local[members[g]]]
            for mine, theirs in zip(_piece_nodes(fabric, labels[g], node_part),
                                    _piece_nodes(fabric, labels[gs[0]], node_part)):
                node_piece[mine], node_image[mine] = c, theirs
    return Decomposition(mode="independent", reason=f"{n_groups} groups of ops share no dependency and no link",
                         n_parts=n_groups, classes=tuple(classes), pieces=tuple(pieces), op_piece=op_piece,
                         op_image=op_image, node_image=node_image, node_piece=node_piece)


def _piece_nodes(fabric, by_label: np.ndarray, node_part: np.ndarray) -> list[int]:
    """The nodes a group's telemetry covers: its labelled hosts, then the switch of its part (if any)."""
    hosts = [int(h) for h in by_label]
    parts = {int(node_part[h]) for h in hosts if node_part[h] >= 0}
    switches = sorted({int(x) for p in parts for x in _switches_of(fabric, node_part, p)})
    return hosts + switches


def _switches_of(fabric, node_part, p) -> np.ndarray:
    return np.flatnonzero((node_part == p) & (fabric.node_kind == SWITCH))


def _same_fabric_piece(fabric, rep_labels, labels, node_part, link_part) -> bool:
    """Two groups with the same canonical DAG also have the same sub-fabric: one switch per part each,
    and the host labels map the used links onto links of the same rate and delay."""
    mine, theirs = _piece_nodes(fabric, labels, node_part), _piece_nodes(fabric, rep_labels, node_part)
    if len(mine) != len(theirs):
        return False
    sw_mine = [x for x in mine if fabric.node_kind[x] == SWITCH]
    if len(sw_mine) > 1:
        return False
    parts = {int(node_part[h]) for h in labels if node_part[h] >= 0}
    node_map = dict(zip(mine, theirs))
    return all(_images_match(fabric, node_map, link_part, p) for p in parts)


def _local_deps(ops, dep_ptr, dep_idx, local=None, image=None):
    """CSR dependencies of ``ops`` in local indices: ``local[global op]``, or (``local`` None) the position
    in ``ops``, which is then sorted and holds every dependency (``image``: global op → the global op
    standing for it)."""
    counts = np.diff(dep_ptr)[ops]
    owners = np.repeat(np.arange(ops.size, dtype=np.int64), counts)
    deps = dep_idx[_ranges(dep_ptr[ops], dep_ptr[ops + 1])]
    if image is not None:
        deps = image[deps]
    ptr, out = csr_from_edges(owners, local[deps] if local is not None else np.searchsorted(ops, deps), ops.size)
    return np.asarray(ptr, np.int64), np.asarray(out, np.int64)


def _host_columns(columns: dict, gpu_node: np.ndarray, ops) -> tuple[np.ndarray, ...]:
    """(host of the op's GPU, FLOW source, FLOW destination) of ``ops`` (a slice or indices), -1 where there
    is none."""
    gpu = np.asarray(columns["gpu"])[ops]
    flow = np.asarray(columns["kind"])[ops] == DagOpKind.FLOW
    gnode = gpu_node[np.maximum(gpu, 0)]
    gnode[gpu < 0] = -1
    return (gnode, np.where(flow, np.asarray(columns["src_node"])[ops], OP(-1)).astype(OP, copy=False),
            np.where(flow, np.asarray(columns["dst_node"])[ops], OP(-1)).astype(OP, copy=False))


def _merge_map(forward: np.ndarray, keys: np.ndarray, values: np.ndarray) -> bool:
    """Record ``keys`` -> ``values`` in ``forward`` (-1: unmapped); False if a key maps already, or now, to
    another value."""
    before = forward.copy()  # the map is small (parts x nodes): compare it whole, not per key
    forward[keys] = values
    mapped = before >= 0
    return np.array_equal(forward[keys], values) and np.array_equal(forward[mapped], before[mapped])


def _same_up_to_hosts(columns: dict, k: int, gpu_node: np.ndarray, n_nodes: int, op_part: np.ndarray,
                      image: np.ndarray, dep_ptr: np.ndarray, dep_idx: np.ndarray):
    """[(hosts of part p, their images in part 0)] for the ``k`` parts when every part is part 0's DAG up to a
    relabeling of its hosts, else None. ``image``: the op of part 0 at the position of every op in its own part
    (a shared op: itself). Equal means, op by op: the same kind, duration (bit for bit), bytes, priority,
    comm class (if given) and number of dependencies as its image; hosts related by one bijection per part; and
    its i-th dependency on the op its image's i-th depends on, up to position (an op of a part stands for the op
    at its position in part 0, a shared op for itself), in its own part exactly when its image's is. Each op is
    compared with its image, :data:`EDGE_BLOCK` ops or dependencies at a time (no temporary the size of the DAG)."""
    n = int(op_part.size)
    duration = np.asarray(columns["duration_ns"])
    if duration.dtype.kind == "f":  # bit for bit
        duration = duration.view(f"i{duration.dtype.itemsize}")
    names = ("kind", "bytes_", "priority", "comm_class")
    cols = [np.asarray(columns[name]) for name in names if name in columns] + [duration, np.diff(dep_ptr)]
    gpu_node = np.asarray(gpu_node, OP)
    # one map per part, keyed by (part, host): a host maps onto one host of part 0, and no two onto one; ops
    # without a host (or of no part) all map the one key after them onto itself
    none = k * n_nodes
    forward, backward = np.full(none + 1, -1, OP), np.full(none + 1, -1, OP)
    for lo in range(0, n, EDGE_BLOCK):
        ops = slice(lo, min(lo + EDGE_BLOCK, n))
        img = image[ops]
        if any(not np.array_equal(c[ops], c[img]) for c in cols):
            return None
        part = op_part[ops] * OP(n_nodes)
        no_part = op_part[ops] < 0
        for mine, theirs in zip(_host_columns(columns, gpu_node, ops), _host_columns(columns, gpu_node, img)):
            absent = mine < 0
            if not np.array_equal(absent, theirs < 0):
                return None
            absent |= no_part
            key, value = part + mine, part + theirs
            key[absent] = value[absent] = none
            if not (_merge_map(forward, key, value) and _merge_map(backward, value, key)):
                return None
    del cols
    if not _same_flow_templates(columns, gpu_node, n_nodes, op_part, image, forward, backward):
        return None
    for first, last, counts, lo, hi in _edge_ranges(dep_ptr, dep_idx.size):
        # per op, then repeated over its edges: where its image's edges start, and its part and its image's (0
        # for an op of a part, -1 for a shared op, which is its own image)
        ops = slice(first, last)
        shift = dep_ptr[image[ops]].astype(np.int64) - dep_ptr[ops]
        theirs = dep_idx[np.arange(lo, hi, dtype=np.int64) + np.repeat(shift, counts)]
        dep = dep_idx[lo:hi]
        # equal images: the same position, and a shared op only where the other is the same shared op
        if not np.array_equal(image[dep], image[theirs]):
            return None
        own = np.repeat(op_part[ops], counts)
        if not np.array_equal(op_part[dep] == own, op_part[theirs] == np.minimum(own, 0)):
            return None
    out = []
    for p in range(k):
        hosts = np.flatnonzero(forward[p * n_nodes:(p + 1) * n_nodes] >= 0)
        out.append((hosts, forward[p * n_nodes + hosts].astype(np.int64) - p * n_nodes))
    return out


def _same_flow_templates(columns: dict, gpu_node: np.ndarray, n_nodes: int, op_part: np.ndarray,
                         image: np.ndarray, forward: np.ndarray, backward: np.ndarray) -> bool:
    """Whether every BLOCK op of a part (one moving flows) has its image's template up to the part's relabeling
    of hosts (recorded in ``forward`` / ``backward`` as :func:`_same_up_to_hosts` keeps them): the same subs in
    the same order, each of the same kind, bytes, extra time and dependencies, between hosts the maps relate."""
    block = columns.get("block")
    if block is None:
        return True
    block = np.asarray(block)
    owned = np.flatnonzero((block >= 0) & (op_part >= 0))
    if not owned.size:
        return True
    t = columns["block_templates"]
    node = np.asarray(gpu_node, np.int64)
    triples = np.unique(np.stack([op_part[owned], block[owned], block[image[owned]]], axis=1), axis=0)
    for p, mine, theirs in triples.tolist():
        a, b = slice(int(t.ptr[mine]), int(t.ptr[mine + 1])), slice(int(t.ptr[theirs]), int(t.ptr[theirs + 1]))
        da = slice(int(t.dep_ptr[a.start]), int(t.dep_ptr[a.stop]))
        db = slice(int(t.dep_ptr[b.start]), int(t.dep_ptr[b.stop]))
        if a.stop - a.start != b.stop - b.start or any(
                not np.array_equal(x[a], x[b]) for x in (t.kind, t.bytes, t.duration_ns, np.diff(t.dep_ptr))) \
                or not np.array_equal(t.dep_idx[da], t.dep_idx[db]):
            return False
        for end in (t.gpu, t.dst):
            key, value = p * n_nodes + node[end[a]], p * n_nodes + node[end[b]]
            if not (_merge_map(forward, key, value) and _merge_map(backward, value, key)):
                return False
    return True


def _fold(fabric, columns, gpu_node, op_part, parts, dep_ptr, dep_idx, host_part) -> Decomposition:
    """One connected DAG over several network parts: fold it onto part 0 if every part is the same. BLOCK ops
    are shared: the run holds each, its copies on its part-0 GPU standing for those on every GPU, so a copy on
    a GPU of another part must meet on its copy engine only what it meets in the whole run, other BLOCK ops'
    copies (a part's own NVLINK ops run only in part 0)."""
    k = parts.n_parts
    n = op_part.size
    blk, blk_node = _block_gpus(columns, gpu_node)
    if blk.size:
        why = _blocks_unfoldable(columns, gpu_node, op_part, host_part, blk, blk_node, k)
        if why:
            return _whole(f"the DAG couples its parts and {why}", k)
    members = [np.flatnonzero(op_part == p).astype(OP) for p in range(k)]
    sizes = {m.size for m in members}
    if len(sizes) != 1:
        return _whole("the DAG couples parts of different sizes", k)
    switches = _part_switches(fabric, parts.link_part, k)
    if any(s.size != 1 for s in switches):
        return _whole("the DAG couples its parts and some part has more than one switch (the fold is proved for "
                      "one switch per part)", k)
    # every op stands for the op at its position in part 0 (a shared op: for itself)
    image = np.arange(n, dtype=OP)
    for p in range(1, k):
        image[members[p]] = members[0]
    node_maps = _same_up_to_hosts(columns, k, gpu_node, fabric.n_nodes, op_part, image, dep_ptr, dep_idx)
    if node_maps is None:
        return _whole("the DAG couples its parts and they differ (not the same ops up to relabeling hosts)", k)
    node_image = np.arange(fabric.n_nodes, dtype=np.int64)
    rep_switch = int(switches[0][0])
    for p in range(k):
        mine, theirs = node_maps[p]
        node_map = dict(zip(mine.tolist() + [int(switches[p][0])], theirs.tolist() + [rep_switch]))
        if not _images_match(fabric, node_map, parts.link_part, p):
            return _whole("the DAG couples its parts and their sub-fabrics differ", k)
        node_image[list(node_map)] = list(node_map.values())
    shared = np.flatnonzero(op_part < 0).astype(OP)
    run_ops = np.sort(np.concatenate([members[0], shared]))
    del members, shared
    ptr, idx = _local_deps(run_ops, dep_ptr, dep_idx, image=image)
    if idx.size and np.any(idx >= np.repeat(np.arange(run_ops.size), np.diff(ptr))):
        return _whole("folding the parts would make an op depend on a later one", k)
    one_gpu = None
    if blk.size:  # the copy templates reduced to their part-0 GPU's copies, part 0's flow templates kept
        block = np.asarray(columns["block"])
        own = run_ops[(block[run_ops] >= 0) & (op_part[run_ops] == 0)]
        used = np.unique(np.concatenate([block[run_lengths(blk)[0]], block[own]]))
        one_gpu = _part0_copies(columns["block_templates"], used, host_part)
    piece = Piece(ops=run_ops, dep_ptr=ptr, dep_idx=idx, copies=k, block_templates=one_gpu)
    return Decomposition(mode="symmetric", reason=f"{k} identical parts coupled by the DAG: one simulated, "
                         "each dependency on another part mapped to its own", n_parts=k,
                         classes=(tuple(range(k)),), pieces=(piece,), op_piece=np.zeros(n, OP),
                         op_image=image, node_image=node_image, node_piece=np.zeros(fabric.n_nodes, np.int64))


# --- running and merging --------------------------------------------------------------------------------

def piece_columns(columns: dict, piece: Piece, until_ns: float | None = None) -> dict:
    """The DAG columns of one piece (``until_ns``: plus a last COMPUTE op on no GPU lasting until then, so
    the run ends when the whole run does)."""
    out = {k: np.asarray(columns[k])[piece.ops] for k in ("kind", "gpu", "src_node", "dst_node", "bytes_",
                                                         "duration_ns", "priority", "comm_class", "block")
           if k in columns}
    out["dep_ptr"], out["dep_idx"] = piece.dep_ptr, piece.dep_idx
    if "block_templates" in columns:
        out["block_templates"] = (columns["block_templates"] if piece.block_templates is None
                                  else piece.block_templates)
    if until_ns is not None:
        for key, value in (("kind", DagOpKind.COMPUTE), ("gpu", -1), ("src_node", -1), ("dst_node", -1),
                           ("bytes_", 0), ("duration_ns", until_ns), ("priority", 0), ("comm_class", 0),
                           ("block", -1)):
            if key in out:
                out[key] = np.concatenate([out[key], np.array([value], out[key].dtype)])
        out["dep_ptr"] = np.concatenate([piece.dep_ptr, piece.dep_ptr[-1:]])
    return out


def run_piece(fabric, columns: dict, settings: dict) -> engine.DagOutput:
    """One piece in ns-3 (a worker's entry point: arguments are arrays and plain values)."""
    return engine.simulate_dag(fabric, **columns, **settings)


def simulate(fabric, columns: dict, d: Decomposition, *, seed: int, attributes: dict,
             queue_sample_interval_ns: float, max_sim_time_ns: float, progress=None, jobs: int = 1):
    """Run the pieces of ``d`` and merge them: (the engine.DagOutput the whole run gives, "") or (None, why
    only the whole run is exact here: a piece did not complete); the caller then runs the whole run."""
    settings = {"seed": seed, "attributes": attributes, "queue_sample_interval_ns": queue_sample_interval_ns,
                "max_sim_time_ns": max_sim_time_ns}
    # the pieces run one after another report as one run: work done adds up over the pieces
    chain = None if progress is None else PartsProgress(progress, sum(int(p.ops.size) for p in d.pieces))
    outs = _run_all(fabric, [piece_columns(columns, p) for p in d.pieces], settings, chain, jobs)
    return finish(fabric, columns, d, outs, settings, progress=chain, jobs=jobs)


def finish(fabric, columns: dict, d: Decomposition, outs: list, settings: dict, *,
           progress: PartsProgress | None = None, jobs: int = 1):
    """Check and merge the outputs of the pieces of ``d`` (as :func:`simulate` returns them), rerunning until
    the end of the whole run the pieces that end first; ``settings``: run_piece's; ``progress``: the pieces'
    progress, which the reruns continue."""
    status = {o.network.status for o in outs} - {"complete"}
    if "interrupted" in status or engine.stop_requested():
        raise engine.Interrupted("the run's parts were stopped before they finished")
    if status:
        return None, f"a part ended {'/'.join(sorted(status))}, so the parts would not have run alike in the whole run"
    ends = [float(np.nanmax(o.op_finish_ns)) if o.op_finish_ns.size else 0.0 for o in outs]
    end = max(ends)
    # a piece that finishes first would keep delivering its last ACKs and credits in the whole run: rerun it
    # with an op that ends it when the whole run ends
    late = [i for i, e in enumerate(ends) if e < end]
    if late:
        again = _run_all(fabric, [piece_columns(columns, d.pieces[i], end) for i in late], settings, progress, jobs)
        if engine.stop_requested():
            raise engine.Interrupted("the run's parts were stopped before they finished")
        for i, o in zip(late, again):
            if o.network.status != "complete":
                return None, f"a part run until the end of the whole run ended {o.network.status}"
            outs[i] = _drop_last_op(o)
    merged = merge(fabric, columns, d, outs)
    # the merge's temporaries (arrays of a few MB, below glibc's mmap threshold) leave their heap pages
    # resident between the arrays kept: hundreds of MB for a large fold, given back before the record
    memory.release_freed_heap()
    return merged, ""


def _run_all(fabric, cols: list[dict], settings: dict, progress: PartsProgress | None, jobs: int) -> list:
    if jobs <= 1 or len(cols) == 1:
        outs = []
        for c in cols:
            outs.append(run_piece(fabric, c, dict(settings, progress=progress and progress.part())))
            if progress is not None:
                progress.finished(c["kind"].size, outs[-1].network.data_packet_hops)
        return outs
    workers = min(jobs, len(cols))
    sizes = [engine.simulation_size(c["kind"], c.get("block"), c.get("block_templates")) for c in cols]
    memory.check_simulation_fits(sum(sorted(sizes, reverse=True)[:workers]), processes=workers)
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import ProcessPoolExecutor, wait  # noqa: PLC0415

    ctx = multiprocessing.get_context("spawn")  # ns-3 is a process-wide singleton: one run per process
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init,
                               initargs=worker_initargs())
    try:
        futures = [pool.submit(run_piece, fabric, c, settings) for c in cols]
        while wait(futures, timeout=0.25).not_done:
            if engine.stop_requested():  # the workers cannot hear the request: end them, nothing to merge
                for proc in list(getattr(pool, "_processes", {}).values()):
                    proc.terminate()
                raise engine.Interrupted("the run's parts were stopped before they finished")
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _drop_last_op(o):
    return dataclasses.replace(o, op_start_ns=o.op_start_ns[:-1], op_finish_ns=o.op_finish_ns[:-1])


def merge(fabric, columns: dict, d: Decomposition, outs: list) -> engine.DagOutput:
    """The whole run's engine.DagOutput from the pieces' outputs (``outs[i]`` of ``d.pieces[i]``)."""
    n = int(np.asarray(columns["kind"]).size)
    src_local = _gather_local(d.pieces, d.op_piece, d.op_image)
    if len(outs) == 1:
        op_start, op_finish = outs[0].op_start_ns[src_local], outs[0].op_finish_ns[src_local]
    else:
        op_start, op_finish = np.empty(n), np.empty(n)
        for i, o in enumerate(outs):
            sel = d.op_piece == i
            op_start[sel] = o.op_start_ns[src_local[sel]]
            op_finish[sel] = o.op_finish_ns[src_local[sel]]
    # flows: every FLOW op takes the flow of the op standing for it, every BLOCK op its flows (sub by sub)
    kind = np.asarray(columns["kind"])
    flow_rows = []
    for i, o in enumerate(outs):
        plain = np.arange(o.flow_op.size) if o.flow_sub is None else np.flatnonzero(o.flow_sub < 0)
        row_of = np.full(d.pieces[i].ops.size, -1, np.int64)
        row_of[o.flow_op[plain]] = plain
        ops = np.flatnonzero((d.op_piece == i) & (kind == DagOpKind.FLOW))
        rows = row_of[src_local[ops]]
        ok = rows >= 0
        flow_rows.append((i, ops[ok], rows[ok]))
        if o.flow_sub is not None and plain.size < o.flow_op.size:
            flow_rows.append((i, *_block_flow_rows(o, np.flatnonzero((d.op_piece == i) & (kind == DagOpKind.BLOCK)),
                                                   src_local, d.pieces[i].ops.size)))
    del plain, row_of, ops, rows, ok
    flow_op = np.concatenate([ops for _, ops, _ in flow_rows])
    pick = lambda f: np.concatenate([f(outs[i])[rows] for i, _, rows in flow_rows])  # noqa: E731
    flow_sub = None if all(o.flow_sub is None for o in outs) else np.concatenate(
        [np.full(rows.size, -1, np.int32) if outs[i].flow_sub is None else outs[i].flow_sub[rows]
         for i, _, rows in flow_rows])
    flow_start = pick(lambda o: o.flow_start_ns)
    finish = pick(lambda o: o.network.finish_ns)
    delivered = pick(lambda o: o.network.delivered_bytes)
    del flow_rows
    # canonical order (engine.canonical_order) in place: the columns are this merge's own, and a fold's 10^8
    # flows would otherwise be held twice
    order = engine.flow_order(flow_op, flow_sub, flow_start)
    for column in (flow_op, flow_sub, flow_start, finish, delivered):
        if column is not None:
            column[:] = column[order]
    del order
    net = _merge_network(fabric, d, outs, finish, delivered)
    net = dataclasses.replace(net, logs=engine.logs_in_key_order(net.logs))
    # a folded run copies on its part-0 GPUs only; an independent piece's copies stand for each of its copies
    subs = sum(o.subs_finished * p.copies for o, p in zip(outs, d.pieces))
    return engine.DagOutput(op_start_ns=op_start, op_finish_ns=op_finish, flow_op=flow_op, flow_start_ns=flow_start,
                            network=net, subs_finished=subs, flow_sub=flow_sub)


def _block_flow_rows(o, ops: np.ndarray, src_local: np.ndarray, n_local: int) -> tuple[np.ndarray, np.ndarray]:
    """(global BLOCK op, row of piece output ``o``) of every flow the BLOCK ops ``ops`` take from the op
    standing for each (its flows, as many as the sub by sub identical template has; ``n_local``: the piece's
    ops)."""
    sub = np.flatnonzero(o.flow_sub >= 0)
    by_op = sub[np.argsort(o.flow_op[sub], kind="stable")]  # the piece's sub flows grouped by their BLOCK op
    count = np.bincount(o.flow_op[sub], minlength=n_local)
    start = np.cumsum(count) - count
    local = src_local[ops]
    return np.repeat(ops, count[local]), by_op[_ranges(start[local], start[local] + count[local])]


def _gather_local(pieces, op_piece, op_image):
    """OP [n_ops]: the position in its piece of the op standing for every op (pieces' ops are sorted)."""
    if len(pieces) == 1:
        return np.searchsorted(pieces[0].ops, op_image).astype(OP)
    out = np.empty(op_piece.size, OP)
    for i, p in enumerate(pieces):
        sel = op_piece == i
        out[sel] = np.searchsorted(p.ops, op_image[sel])
    return out


def _port_sources(fabric, d: Decomposition, ports: dict) -> tuple[np.ndarray, np.ndarray]:
    """For every port row of the whole run: the piece and the row of that piece whose port it copies."""
    node = np.asarray(ports["node"], np.int64)
    peer = np.asarray(ports["peer"], np.int64)
    row = {(a, b): r for r, (a, b) in enumerate(zip(node.tolist(), peer.tolist()))}
    src_piece = d.node_piece[node].copy()
    src_row = np.arange(node.size, dtype=np.int64)
    img = d.node_image
    for r in np.flatnonzero((img[node] != node) | (img[peer] != peer)):
        mirrored = row.get((int(img[node[r]]), int(img[peer[r]])))
        if mirrored is None:  # a link to a node outside the part (an idle spine uplink): its own row
            src_piece[r] = d.node_piece[node[r]]
            continue
        src_row[r] = mirrored
    return src_piece, src_row


def _merge_network(fabric, d: Decomposition, outs: list, finish, delivered) -> engine.SimulationOutput:
    base = outs[0].network
    ports0 = base.ports
    src_piece, src_row = _port_sources(fabric, d, ports0)
    ports = {k: np.array(v, copy=True) for k, v in ports0.items()}
    for key in ("tx_bytes", "tx_packets", "drops", "peak_queue_bytes", "paused_ps", "credit_stall_ps"):
        col = ports[key]
        for i, o in enumerate(outs):
            sel = src_piece == i
            col[sel] = np.asarray(o.network.ports[key])[src_row[sel]]
    port_key = lambda node, port: np.asarray(node, np.int64) * (1 << 20) + np.asarray(port, np.int64)  # noqa: E731
    all_keys = port_key(ports0["node"], ports0["port"])
    key_order = np.argsort(all_keys)

    def row_of(node, port):
        k = port_key(node, port)
        return key_order[np.searchsorted(all_keys[key_order], k)]

    def relabeled(i: int, node, port):
        """(target rows, source rows) of piece ``i``'s event logs: each source row copied to every target
        port that copies the source port."""
        rows = row_of(node, port) if np.asarray(node).size else np.zeros(0, np.int64)
        targets = np.flatnonzero(src_piece == i)
        by_source = src_row[targets]
        order = np.argsort(by_source, kind="stable")
        lo = np.searchsorted(by_source[order], rows, "left")
        hi = np.searchsorted(by_source[order], rows, "right")
        count = hi - lo
        ev = np.repeat(np.arange(rows.size), count)
        tgt = targets[order[_ranges(lo, hi)]]
        return ev, tgt

    def log(get) -> dict:
        """One event log (columns by name, with node and port) of every piece, copied to its target ports."""
        cols = {}
        for i, o in enumerate(outs):
            table = get(o.network)
            ev, tgt = relabeled(i, table["node"], table["port"])
            for k, x in table.items():
                x = np.asarray(x)
                moved = ports0[k][tgt] if k in ("node", "port") else x[ev]
                cols.setdefault(k, []).append(moved.astype(x.dtype))
        return {k: np.concatenate(v) for k, v in cols.items()}

    def queue_log() -> StreamedTable:
        """The queue samples of every piece copied to their target ports, ordered by (time, node, port) as the
        sampler records a tick's changes in port order. Each piece's samples are in time order, so the rows
        are built and sorted a time slice at a time, each slice produced when the reader asks for it: a fold
        multiplies the rows by its parts, and the whole log would take several times a part's memory."""
        logs = [tuple(np.asarray(n.queues[k]) for k in ("time_ns", "node", "port", "bytes"))
                for n in (o.network for o in outs)]
        fan = [np.bincount(src_row[src_piece == i], minlength=all_keys.size) for i in range(len(outs))]
        total = sum(int(f[row_of(n, p)].sum()) if t.size else 0 for f, (t, n, p, _) in zip(fan, logs))
        dtypes = {"time_ns": np.float64, **{k: np.asarray(base.queues[k]).dtype for k in ("node", "port", "bytes")}}
        cuts = np.unique(np.concatenate([t[QUEUE_MERGE_SLICE_ROWS::QUEUE_MERGE_SLICE_ROWS] for t, *_ in logs]
                                        + [np.array([np.inf])]))
        bounds = [np.searchsorted(t, cuts, "left") for t, *_ in logs]
        port_node, port_port = np.asarray(ports0["node"]), np.asarray(ports0["port"])
        # every port row's position in (node, port) order: a slice's rows sort by their time's position among
        # the slice's times, then by it, in one stable sort of one integer key (as a sort by time, node, port)
        port_rank = np.empty(all_keys.size, np.int64)
        port_rank[np.lexsort((port_port, port_node))] = np.arange(all_keys.size)

        def produce():
            for j in range(cuts.size):
                # the pieces' samples in this slice (time, bytes), and each copy's sample and target port row
                when, depth, ev, tgt, at = [], [], [], [], 0
                for i, ((t, n, p, b), cut) in enumerate(zip(logs, bounds)):
                    sl = slice(int(cut[j - 1]) if j else 0, int(cut[j]))
                    rows, ports = relabeled(i, n[sl], p[sl])
                    when.append(t[sl])
                    depth.append(b[sl])
                    ev.append(rows + at if at else rows)
                    tgt.append(ports)
                    at += when[-1].size
                when, depth, ev, tgt = (x[0] if len(x) == 1 else np.concatenate(x) for x in (when, depth, ev, tgt))
                # every sample's time's position among the slice's distinct times (one piece's are in order)
                if len(logs) == 1:
                    tick = np.cumsum(np.concatenate([[False], when[1:] != when[:-1]]))
                else:
                    tick = np.searchsorted(np.unique(when), when)
                key = tick[ev] * all_keys.size
                key += port_rank[tgt]
                q = np.argsort(key, kind="stable")
                del key, tick
                src, tgt = ev[q], tgt[q]
                yield {"time_ns": when[src], "node": port_node[tgt], "port": port_port[tgt], "bytes": depth[src]}

        # the percentile of the log reads the pieces' logs, each row counted once per port copying it
        copied_from = [({"time_ns": t, "node": n, "port": p, "bytes": b}, f[row_of(n, p)] if t.size else f[:0])
                       for f, (t, n, p, b) in zip(fan, logs)]
        return StreamedTable(total, dtypes, produce, copied_from=copied_from)

    # every engine log is of egress ports (node and port first): merge() puts the rows in canonical order
    logs = {name: log(lambda n, name=name: n.logs[name]) for name in base.logs}
    weights = [p.copies for p in d.pieces]
    combine = {"sum": lambda vals: sum(v * w for v, w in zip(vals, weights)), "max": max, "min": min}
    rules = engine.counter_rules()
    counters = {name: combine[rules[name]]([o.network.counters[name] for o in outs]) for name in base.counters}
    weighted = lambda f: int(sum(f(o.network) * w for o, w in zip(outs, weights)))  # noqa: E731
    return dataclasses.replace(
        base, finish_ns=finish, delivered_bytes=delivered, queues=queue_log(), ports=ports, logs=logs,
        latency_count=sum(o.network.latency_count * w for o, w in zip(outs, weights)), counters=counters,
        sim_time_ns=max(o.network.sim_time_ns for o in outs), events=weighted(lambda x: x.events),
        packet_hops=weighted(lambda x: x.packet_hops), data_packet_hops=weighted(lambda x: x.data_packet_hops),
        pool_packets=max(o.network.pool_packets for o in outs),
        wall_time_s=sum(o.network.wall_time_s for o in outs),
        run_wall_time_s=sum(o.network.run_wall_time_s for o in outs),
        delivered_at_bytes=np.zeros((0, finish.size), np.int64), snapshot_ns=np.empty(0))


def simulate_dag(exp, fabric, columns: dict, *, gpu_node: np.ndarray, attributes: dict, max_sim_time_ns: float,
                 progress=None, jobs: int = 1) -> tuple[engine.DagOutput, dict]:
    """engine.simulate_dag of ``columns`` for ``exp`` until ``max_sim_time_ns`` (the plan's limit), in parts
    when ``exp.limits.decompose`` is "auto" and that is exact; returns the output and what was done (stored
    as the run's config["decomposition"])."""
    settings = {"seed": exp.seed, "attributes": attributes,
                "queue_sample_interval_ns": exp.telemetry.queue_sample_interval_ns,
                "max_sim_time_ns": max_sim_time_ns}
    d = run_decomposition(exp, fabric, columns, gpu_node=gpu_node, attributes=attributes)
    info = d.describe()
    if d.mode != "whole":
        out, why = simulate(fabric, columns, d, progress=progress, jobs=jobs, **settings)
        if out is not None:
            return out, info
        info = {"decompose": "whole", "decompose_reason": f"{d.mode} parts were simulated, but {why}: ran the "
                "whole run"}
    return engine.simulate_dag(fabric, **columns, progress=progress, **settings), info


def run_decomposition(exp, fabric, columns: dict, *, gpu_node: np.ndarray, attributes: dict,
                      parts=None) -> Decomposition:
    """How ``exp``'s DAG will be simulated: whole when ``limits.decompose`` is off, else :func:`decomposition`
    (``parts``: the flow_parts of the DAG's FLOW ops, if already found)."""
    if exp.limits.decompose == "off":
        return _whole("limits.decompose is off")
    return decomposition(fabric, columns, gpu_node=gpu_node, attributes=attributes, parts=parts)


def describe(exp, fabric, columns: dict, *, gpu_node: np.ndarray, attributes: dict) -> dict:
    """What ``cosim run --dry-run`` shows of how ``exp``'s DAG will be simulated."""
    return run_decomposition(exp, fabric, columns, gpu_node=gpu_node, attributes=attributes).describe()


def simulated_ops(columns: dict, d: Decomposition) -> np.ndarray | None:
    """The ops the simulation of ``d`` runs: every one for a whole run (None), else those of its pieces (one
    part of each class of identical parts), an op once per piece that runs it."""
    return None if d.mode == "whole" else np.concatenate([p.ops for p in d.pieces])
