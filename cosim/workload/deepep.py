"""MoE dispatch and combine as DeepEP implements them, as point-to-point messages and as a runnable trace.

From a routing's token counts (:mod:`cosim.workload.routing`: ``node_tokens``, ``rank_tokens``,
``expert_copies`` of source EP rank s; node a = s // g, local index i = s mod g, g GPUs per node), for a
token of ``token_bytes``:

High-throughput kernels (``"high-throughput"``; DeepEP's normal kernels, for training and prefill):

- dispatch: s sends each remote node b ≠ a, over RDMA to the GPU with the same local index (b, i), the
  tokens with an expert on b, once per node (``node_tokens[s, b]``); (b, i) forwards over NVLink to each
  (b, j), j ≠ i, the tokens with an expert there (``rank_tokens[s, (b, j)]``), each forward waiting for the
  RDMA message it carries; s sends its own node's ranks their tokens directly over NVLink.
- combine: the reverse, in bf16: (b, j) sends (b, i) over NVLink its results for the tokens of s; (b, i),
  once all of them arrived, sends s one reduced message over RDMA (``node_tokens[s, b]`` tokens); same-node
  ranks send back directly.

Low-latency kernels (``"low-latency"``; for decoding): no deduplication and no NVLink hop: s sends every
(token, expert) copy straight to the expert's rank (``expert_copies[s, d]``), and the combine returns every
copy the same way. Copies to a rank of s's own node go over NVLink (DeepEP's low-latency kernels may use
NVLink for same-node peers); everything else crosses the fabric, so the fabric carries k copies of a
token where the high-throughput kernels carry one per node.

Payloads: the dispatch in FP8 when ``dispatch_fp8`` (1 B per element plus an fp32 scale per 128, as
:func:`cosim.workload.sizes.moe_token_bytes`), the combine in bf16. The store-and-forward of the NVLink hop
(a forward waits for its whole RDMA message) is coarser than DeepEP's chunked pipeline: the forward starts
later by one message's transfer time at most. The ops carry their kernel as algo_hint: the high-throughput
kernels hold HardwareSpec.deepep_sms SMs while they move data (DagExecutor::ExpertCommComputeSlowdown), the
low-latency ones none (DeepEP's hook mode receives without an SM).

:func:`dispatch_combine_trace` turns a dispatch, an expert compute of ``expert_compute_ns`` per rank, and
a combine into a trace of SEND/RECV ops that ``cosim.run`` co-simulates like any training trace.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.hardware import get_hardware
from cosim.workload.routing import RoutedCounts
from cosim.workload.trace import AlgoHint, OpKind, Phase, Trace

KERNELS = ("high-throughput", "low-latency")
#: the DeepEP kernel of each ``moe_kernel`` name a model or serving spec gives (cosim.workload.model)
KERNEL_OF_MOE_KERNEL = {f"deepep-{kernel}": kernel for kernel in KERNELS}
#: the algo_hint of each kernel's SEND and RECV ops (the SMs they hold: cosim.kinds.base.comm_classes)
HINTS = {"high-throughput": AlgoHint.DEEPEP_HIGH_THROUGHPUT, "low-latency": AlgoHint.DEEPEP_LOW_LATENCY}
_I64 = np.int64


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Messages:
    """Point-to-point messages of one dispatch or combine, ranks as EP ranks 0..ep−1.

    Message m goes from ``src[m]`` to ``dst[m]`` with ``bytes[m]`` (> 0); ``second_hop[m]`` marks NVLink
    forwards (dispatch) and the RDMA messages sent after a reduction (combine): it may start only after the
    messages ``dep_parent[q]`` for every q with ``dep_child[q] == m`` arrived at its sender.
    """

    src: np.ndarray  #: int64
    dst: np.ndarray  #: int64
    bytes: np.ndarray  #: int64 payload bytes
    second_hop: np.ndarray  #: bool
    dep_child: np.ndarray  #: int64 message index
    dep_parent: np.ndarray  #: int64 message index


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic:
    """Bytes of a set of messages by where they travel."""

    fabric_bytes: int  #: between nodes (RDMA over the scale-out fabric)
    nvlink_bytes: int  #: inside a node
    forwarded_bytes: int  #: second-hop bytes (NVLink forwards, reduced RDMA sends)
    max_rank_fabric_bytes: int  #: the most any one rank sends over the fabric
    max_rank_fabric_recv_bytes: int  #: the most any one rank receives over the fabric (the hot expert's rank)


def _check(kernel: str, counts: RoutedCounts, token_bytes: int) -> None:
    if kernel not in KERNELS:
        raise CosimInputError("moe.kernel", f"unknown DeepEP kernel {kernel!r}", f"choose among {', '.join(KERNELS)}")
    if isinstance(token_bytes, bool) or not isinstance(token_bytes, (int, np.integer)) or token_bytes < 1:
        raise CosimInputError("moe.token_bytes", f"must be an integer >= 1, got {token_bytes!r}")
    if kernel == "high-throughput" and counts.ep > counts.gpus_per_node and counts.ep % counts.gpus_per_node:
        raise CosimInputError("parallelism.ep", f"ep={counts.ep} does not fill nodes of {counts.gpus_per_node} GPUs "
                              "(the high-throughput kernels forward through the same local rank of every node)",
                              f"choose ep as a multiple of {counts.gpus_per_node}")


def _pairs(ep: int, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (s, d) with d ≠ s: source, destination, and whether they share a node."""
    s, d = np.meshgrid(np.arange(ep, dtype=_I64), np.arange(ep, dtype=_I64), indexing="ij")
    keep = s != d
    s, d = s[keep], d[keep]
    return s, d, (s // g) == (d // g)


def _drop_empty(src, dst, nbytes, second, child, parent) -> Messages:
    """The messages with bytes > 0 (a dropped parent only ever has empty children: fewer tokens per node
    than per rank is impossible) and their deps renumbered."""
    keep = nbytes > 0
    new = np.cumsum(keep) - 1
    ok = keep[child] & keep[parent]
    return Messages(src=src[keep], dst=dst[keep], bytes=nbytes[keep], second_hop=second[keep],
                    dep_child=new[child[ok]], dep_parent=new[parent[ok]])


def _relays(ep: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """(source, remote node) of every RDMA message of the high-throughput kernels, source-major, nodes
    increasing; the message goes between s and (b, s mod g)."""
    nodes = -(-ep // g)
    rs, rb = (x.ravel() for x in np.meshgrid(np.arange(ep, dtype=_I64), np.arange(nodes, dtype=_I64),
                                            indexing="ij"))
    remote = rb != rs // g
    return rs[remote], rb[remote]


def _relay_index(fs: np.ndarray, fb: np.ndarray, ep: int, g: int) -> np.ndarray:
    """Index in :func:`_relays` of the pair (fs, fb)."""
    nodes = -(-ep // g)
    return fs * (nodes - 1) + fb - (fb > fs // g)


def _forwards(rs: np.ndarray, rb: np.ndarray, g: int, ep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, node, final rank) of every NVLink hop through a relay: for each relayed (s, b), the ranks
    (b, j) of node b other than the relay (b, s mod g)."""
    fs, fb = np.repeat(rs, g), np.repeat(rb, g)
    fj = np.tile(np.arange(g, dtype=_I64), rs.size)
    keep = (fj != fs % g) & (fb * g + fj < ep)
    return fs[keep], fb[keep], fb[keep] * g + fj[keep]


def dispatch_messages(counts: RoutedCounts, kernel: str, token_bytes: int) -> Messages:
    """The messages of one dispatch (module docstring)."""
    _check(kernel, counts, token_bytes)
    ep, g = counts.ep, counts.gpus_per_node
    s, d, local = _pairs(ep, g)
    if kernel == "low-latency":
        empty = np.zeros(0, _I64)
        return _drop_empty(s, d, counts.expert_copies[s, d] * token_bytes, np.zeros(s.size, bool), empty, empty)
    ds, dd = s[local], d[local]  # same node: directly over NVLink
    rs, rb = _relays(ep, g)  # remote nodes: once each, to the same local rank
    fs, fb, fd = _forwards(rs, rb, g, ep)  # then forwarded inside the node
    n1 = ds.size + rs.size
    src = np.concatenate([ds, rs, fb * g + fs % g])
    dst = np.concatenate([dd, rb * g + rs % g, fd])
    nbytes = np.concatenate([counts.rank_tokens[ds, dd], counts.node_tokens[rs, rb],
                             counts.rank_tokens[fs, fd]]) * token_bytes
    second = np.arange(src.size) >= n1
    child = n1 + np.arange(fs.size, dtype=_I64)
    parent = ds.size + _relay_index(fs, fb, ep, g)
    return _drop_empty(src, dst, nbytes, second, child, parent)


def combine_messages(counts: RoutedCounts, kernel: str, token_bytes: int) -> Messages:
    """The messages of one combine: the dispatch reversed, the NVLink gathers into the relay before its one
    reduced RDMA message (module docstring)."""
    _check(kernel, counts, token_bytes)
    ep, g = counts.ep, counts.gpus_per_node
    s, d, local = _pairs(ep, g)
    if kernel == "low-latency":
        empty = np.zeros(0, _I64)
        return _drop_empty(d, s, counts.expert_copies[s, d] * token_bytes, np.zeros(s.size, bool), empty, empty)
    ds, dd = s[local], d[local]
    rs, rb = _relays(ep, g)
    fs, fb, fd = _forwards(rs, rb, g, ep)
    n1 = ds.size + fs.size
    src = np.concatenate([dd, fd, rb * g + rs % g])
    dst = np.concatenate([ds, fb * g + fs % g, rs])
    nbytes = np.concatenate([counts.rank_tokens[ds, dd], counts.rank_tokens[fs, fd],
                             counts.node_tokens[rs, rb]]) * token_bytes
    second = np.arange(src.size) >= n1
    child = n1 + _relay_index(fs, fb, ep, g)
    parent = ds.size + np.arange(fs.size, dtype=_I64)
    return _drop_empty(src, dst, nbytes, second, child, parent)


def traffic(messages: Messages, gpus_per_node: int) -> Traffic:
    """Bytes of ``messages`` over the fabric, over NVLink, on a second hop, and the busiest fabric sender
    and receiver."""
    remote = messages.src // gpus_per_node != messages.dst // gpus_per_node
    per_rank = np.bincount(messages.src[remote], weights=messages.bytes[remote]) if remote.any() else np.zeros(1)
    into = np.bincount(messages.dst[remote], weights=messages.bytes[remote]) if remote.any() else np.zeros(1)
    return Traffic(fabric_bytes=int(messages.bytes[remote].sum()), nvlink_bytes=int(messages.bytes[~remote].sum()),
                   forwarded_bytes=int(messages.bytes[messages.second_hop].sum()),
                   max_rank_fabric_bytes=int(per_rank.max()), max_rank_fabric_recv_bytes=int(into.max()))


def dispatch_combine_trace(counts: RoutedCounts, *, kernel: str, dispatch_token_bytes: int,
                           combine_token_bytes: int, expert_compute_ns: int = 0, gpu: str = "h100") -> Trace:
    """A trace of one dispatch, an expert compute of ``expert_compute_ns`` on every rank, and one combine,
    on ranks 0..ep−1 placed ``counts.gpus_per_node`` per server (module docstring)."""
    if isinstance(expert_compute_ns, bool) or not isinstance(expert_compute_ns, (int, np.integer)) \
            or expert_compute_ns < 0:
        raise CosimInputError("moe.expert_compute_ns", f"must be an integer >= 0, got {expert_compute_ns!r}")
    ep, g = counts.ep, counts.gpus_per_node
    phases = (dispatch_messages(counts, kernel, dispatch_token_bytes),
              combine_messages(counts, kernel, combine_token_bytes))
    # ops in creation order: per phase its sends and recvs; then one compute per rank
    rank, kind, nbytes, peer, order, label, sends_of, partner = [], [], [], [], [], [], [], []
    dep_op, dep_on = [], []
    base = 0
    for p, msg in enumerate(phases):
        n = msg.src.size
        send = base + np.arange(n, dtype=_I64)
        recv = base + n + np.arange(n, dtype=_I64)
        rank += [msg.src, msg.dst]
        kind += [np.full(n, OpKind.SEND, _I64), np.full(n, OpKind.RECV, _I64)]
        nbytes += [msg.bytes, msg.bytes]
        peer += [msg.dst, msg.src]
        # issue order on a rank: first-hop sends, receives, second-hop sends (phase p: 4p + 0, 1, 2)
        order += [4 * p + np.where(msg.second_hop, 2, 0), np.full(n, 4 * p + 1, _I64)]
        label += [2 * p + msg.second_hop.astype(_I64), 2 * p + msg.second_hop.astype(_I64)]
        sends_of.append((send, recv))
        partner += [np.full(n, -1, _I64), send]
        dep_op.append(send[msg.dep_child])
        dep_on.append(recv[msg.dep_parent])
        base += 2 * n
    compute = base + np.arange(ep, dtype=_I64)
    rank.append(np.arange(ep, dtype=_I64))
    kind.append(np.full(ep, OpKind.COMPUTE, _I64))
    nbytes.append(np.zeros(ep, _I64))
    peer.append(np.full(ep, -1, _I64))
    order.append(np.full(ep, 3, _I64))
    label.append(np.full(ep, 4, _I64))
    partner.append(np.full(ep, -1, _I64))
    rank_a, kind_a = np.concatenate(rank), np.concatenate(kind)
    # the experts wait for every dispatch op of their rank; the combine's first hop waits for the experts
    d_send, d_recv = sends_of[0]
    dispatch_ops = np.concatenate([d_send, d_recv])
    dep_op.append(compute[rank_a[dispatch_ops]])
    dep_on.append(dispatch_ops)
    c_send, _ = sends_of[1]  # every combine send waits for the experts (a relay may have nothing to gather)
    dep_op.append(c_send)
    dep_on.append(compute[rank_a[c_send]])
    return _assemble(ep, g, gpu, rank_a, kind_a, np.concatenate(nbytes), np.concatenate(peer),
                     np.concatenate(order), np.concatenate(label), np.concatenate(partner), np.concatenate(dep_op),
                     np.concatenate(dep_on),
                     int(expert_compute_ns), {"kernel": kernel, "ep": ep, "gpus_per_node": g,
                                              "dispatch": dataclasses.asdict(traffic(phases[0], g)),
                                              "combine": dataclasses.asdict(traffic(phases[1], g))})


LABELS = ("moe/dispatch", "moe/dispatch_forward", "moe/combine", "moe/combine_reduced", "moe/experts")


def _assemble(ep, g, gpu, rank, kind, nbytes, peer, order, label, partner, dep_op, dep_on, compute_ns,
              moe) -> Trace:
    """Sort the ops by rank then issue order and write the Trace columns."""
    perm = np.lexsort((np.arange(rank.size), order, rank))
    new = np.empty_like(perm)
    new[perm] = np.arange(perm.size)
    rank, kind, nbytes, peer, label = rank[perm], kind[perm], nbytes[perm], peer[perm], label[perm]
    n = rank.size
    # match_id: the sorted index of the SEND, on the SEND and on its RECV (``partner``: creation index of a
    # RECV's SEND)
    match = np.full(n, -1, _I64)
    is_send = kind == OpKind.SEND
    is_recv = kind == OpKind.RECV
    match[is_send] = np.flatnonzero(is_send)
    match[is_recv] = new[partner[perm[is_recv]]]
    a, b = new[dep_op], new[dep_on]
    order_d = np.lexsort((b, a))
    a, b = a[order_d], b[order_d]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(a, minlength=n))]).astype(_I64)
    duration = np.where(kind == OpKind.COMPUTE, compute_ns, 0).astype(_I64)
    hw = dataclasses.asdict(get_hardware(gpu, gpus_per_host=g))
    zeros = np.zeros(n, _I64)
    minus = np.full(n, -1, _I64)
    return Trace(n_ranks=ep, rank=rank, kind=kind, phase=np.full(n, Phase.FORWARD, _I64), duration_ns=duration,
                 flops=zeros, bytes=nbytes, coll_kind=zeros, group=minus, peer=peer, match_id=match, coll_id=minus,
                 algo_hint=np.where(kind == OpKind.COMPUTE, 0, HINTS[moe["kernel"]]), label=label, microbatch=zeros,
                 layer=zeros, dep_ptr=ptr, dep_idx=b, labels=LABELS,
                 group_ptr=np.zeros(1, _I64), group_ranks=np.zeros(0, np.int32), group_kind=np.zeros(0, np.uint8),
                 specs=json.dumps({"hardware": hw, "derived": {"moe": moe}}, sort_keys=True))
