"""Which algorithm and protocol a collective call uses: the protocol as NCCL's tuner picks it, the algorithm
by the time the simulation takes.

An all-reduce ring inside one server is the exception: its time is NCCL's measured curve of
:mod:`cosim.collectives.calibration` at that size and GPU count, and its protocol the one NCCL was measured
to switch to at that size; the estimates below time every other call.

For every candidate algorithm the protocol is NCCL's choice: NCCL's own cost ``time = latency + bytes /
bandwidth`` (:meth:`TuningModel.nccl_estimate_ns`, below) from the group's shape — n ranks on k servers, g
on each — and the call's size S, the fastest protocol taken. The algorithm is then the candidate whose
call the simulation runs fastest (:meth:`TuningModel.estimate_ns`, "What the schedule simulates"); ties
go to the earlier candidate in :data:`CANDIDATES`. The chosen latency also enters the simulation: a
collective's start barrier lasts :func:`TuningModel.start_latency_ns` (what neither the NVLink copies nor
the packet-level network model: kernel launch, per-step synchronisation, the network proxy; the NVLink
copies' own latency, one per NVLink step, is left out of it since the executor adds it). Inside one server
a ring's NVLink copies also take what the call's bus bandwidth loses against the executor's copy rate
(the fastest Simple line or one-line busbw of the GPU): :meth:`TuningModel.nvlink_extra_ns_per_byte` of
extra copy-engine time per byte, so the simulated call takes the estimated time and its bandwidth part
competes for the GPU's copy engine with whatever else it sends. For an in-server all-reduce the bandwidth
part is the bus bytes at the curve's Simple-line busbw and the latency is the rest of the curve's time
(:meth:`cosim.collectives.calibration.AllReduceCurve.latency_ns`), so latency + bandwidth part = the curve.

Latency (ns), with steps split into NVLink steps and network steps:

- ring all-reduce: 2(n−1) steps, 2(k−1) of them cross servers (inside one domain of more GPUs than the
  curves measured, at least the one-line fit's ``launch_ns + 2(n−1) · step_ns``); reduce-scatter /
  all-gather: n−1 and k−1; broadcast (chain): n−1 and k−1;
- tree all-reduce (k > 1 only): 2·((g−1) NVLink steps + ⌈log2 k⌉ network steps) — up and down the tree;
- hierarchical: 2(g−1) NVLink and 2(k−1) network steps (all-reduce; half of each for RS / AG);
- all-to-all: one network step (PXN adds one NVLink step), or one NVLink step inside a server;
- NVLS all-reduce (inside one NVLink domain): two NVLink steps, the reduction and the multicast.

``latency = launch_ns + nvlink_steps · step_ns + network_steps · net_step_ns[protocol]``; launch_ns and
step_ns are the calibrated NVLink coefficients of the GPU (:mod:`cosim.collectives.calibration`), the
per-protocol network step latencies are NCCL's ring / tree "NET" latencies (LL 2.7 / 5.0 µs, LL128 4.0 /
8.5 µs, Simple 9.6 / 50 µs; NCCL's src/graph/tuning.cc, 2.8 era).

Bandwidth (bus bandwidth B, the nccl-tests busbw the call reaches; time = factor · S / B):

- inside one server: the calibrated NVLink bus bandwidth, whatever the protocol (all-reduce ring: the
  curve's Simple line, above);
- across servers: ``min(NVLink bus bandwidth, e_p · g · nic_bytes_per_s)`` — a ring's channels spread over
  the group's g NICs per server, so g NICs carry every server's share; e_p is the protocol's efficiency
  (LL 1/4: half of every 16-byte line is flags and the rest is polled; LL128 0.92 = 120/128; Simple 1);
- tree: 0.9 × that (NCCL's tree derating), and the tree moves 2·S per byte of busbw (NCCL's ratio 1/2);
- NVLS: every GPU sends S once at the executor's NVLink copy rate (the switch reduces and multicasts), so
  time = latency + S / copy rate (its busbw in nccl-tests' convention is 2(n−1)/n of that rate); Simple only;
- factor: 2(n−1)/n all-reduce, (n−1)/n reduce-scatter, all-gather, all-to-all, 1 broadcast.

What the schedule simulates (rings and NCCL's channel trees across servers laid out alike; every other
call is timed by NCCL's cost above):

- ring: start latency + ``overlap_ns(path, bandwidth)``; path = NVLink steps × the executor's copy latency
  + network steps × :attr:`TuningModel.flow_latency_ns`; bandwidth = the bus bytes at the slower of the
  NICs the channels use and a GPU's NVLink copies; the smooth maximum because one channel's latency is
  spent while another channel's bytes use the link;
- tree: start latency + the pipeline's fill (one chunk up and down the deepest path, a latency plus the
  chunk at its link's rate per hop) + (m − 1) stages for m chunks a transfer, a stage being the 4-norm of
  one hop's time and the chunks the busiest NIC and copy engine send per stage (counted on the channel
  trees of :func:`cosim.collectives.algorithms.channel_tree_parents`).

The two exponents (:data:`OVERLAP_EXPONENT`, :data:`TREE_STAGE_EXPONENT`) are fitted to the simulated sweep
of ``bench/bench_tuner.py`` (figures in bench/README.md).

Point-to-point sends pay NCCL's fixed cost of a one-step kernel (:meth:`TuningModel.send_latency_ns`).

Candidates per kind (the others are available by name only): all-reduce → ring, or tree when the group
spans several servers, or NVLS when it lies inside one NVLink domain whose hardware has NVLink SHARP
(``hardware.nvls``: on for the NVL72 presets, off by default for the 8-GPU ones); reduce-scatter /
all-gather → ring; all-to-all → PXN (NCCL's default, not tuned) when it applies (several servers, the same
rail-aligned members on each), else direct; broadcast → chain. The idealized
hierarchical scheme and halving-doubling are never picked by "auto".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim.collectives.algorithms import (
    Algorithm,
    channel_tree_parents,
    channels_used,
    tree_depth,
    tree_parents,
    tree_pipeline_chunk_bytes,
)
from cosim.collectives.calibration import (
    AllReduceCurve,
    NvlinkModel,
    all_reduce_curve_for,
    nvlink_model,
)
from cosim.collectives.protocol import Protocol
from cosim.errors import CosimInputError
from cosim.workload.trace import CollKind

#: bandwidth efficiency of each protocol over the network (module docstring)
PROTOCOL_EFFICIENCY = {Protocol.LL: 0.25, Protocol.LL128: 0.92, Protocol.SIMPLE: 1.0}
#: NCCL's per-step network latency of a ring / a tree, by protocol, ns
NET_STEP_NS = {
    Algorithm.RING: {Protocol.LL: 2_700.0, Protocol.LL128: 4_000.0, Protocol.SIMPLE: 9_600.0},
    Algorithm.TREE: {Protocol.LL: 5_000.0, Protocol.LL128: 8_500.0, Protocol.SIMPLE: 50_000.0},
}
#: NCCL's base latency of a one-step ring kernel (the launch and protocol setup of a send), by protocol, ns
#: (NCCL's src/graph/tuning.cc baseLat, Ring row; LL128 is not used by point-to-point)
P2P_BASE_NS = {Protocol.LL: 6_600.0, Protocol.SIMPLE: 8_400.0}
#: NCCL's latency of one ring step over NVLink, by protocol, ns (tuning.cc hwLat, NVLINK, Ring row)
NVLINK_STEP_NS = {Protocol.LL: 600.0, Protocol.SIMPLE: 3_400.0}
#: sends of at most this many bytes use LL, larger ones Simple (NCCL's NCCL_P2P_LL_THRESHOLD default)
P2P_LL_THRESHOLD_BYTES = 16_384
#: NCCL's derating of the tree's bus bandwidth
TREE_BANDWIDTH_FACTOR = 0.9
#: per-NIC payload rate a tuning model assumes when none is given (400 Gb/s), bytes/s
DEFAULT_NIC_BYTES_PER_S = 50e9
#: fixed time of one flow between rail peers when none is given: two 1 µs links, ns
DEFAULT_FLOW_LATENCY_NS = 2_000.0

#: algorithms "auto" weighs, per collective kind, in tie-break order
CANDIDATES: dict[CollKind, tuple[Algorithm, ...]] = {
    CollKind.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE),
    CollKind.REDUCE_SCATTER: (Algorithm.RING,),
    CollKind.ALL_GATHER: (Algorithm.RING,),
    CollKind.ALL_TO_ALL: (Algorithm.PXN,),  # NCCL's default (NCCL_PXN_DISABLE=0); direct where PXN does not apply
    CollKind.BROADCAST: (Algorithm.CHAIN,),
}


@dataclass(frozen=True, slots=True)
class Shape:
    """A group as the tuner sees it: n ranks on k servers, g per server (g = 0 if servers differ)."""
    n: int
    k: int
    g: int


@dataclass(frozen=True, slots=True)
class Estimate:
    """One tuner decision: algorithm, protocol, estimated time, its latency part and the start delay the
    simulation adds (:meth:`TuningModel.start_latency_ns`), ns, and the extra NVLink copy time per byte
    (:meth:`TuningModel.nvlink_extra_ns_per_byte`)."""
    algorithm: Algorithm
    protocol: Protocol
    time_ns: float
    latency_ns: float
    start_latency_ns: float
    nvlink_extra_ns_per_byte: float = 0.0


def bus_factor(kind: CollKind, n: int) -> float:
    """nccl-tests' busbw / algbw correction of ``kind`` on n ranks."""
    kind = CollKind(kind)
    if n < 2:
        return 1.0
    if kind == CollKind.ALL_REDUCE:
        return 2 * (n - 1) / n
    if kind == CollKind.BROADCAST:
        return 1.0
    return (n - 1) / n


@dataclass(frozen=True, slots=True, kw_only=True)
class TuningModel:
    """Latency and bandwidth of the candidates of every call (module docstring)."""

    nvlink: NvlinkModel
    nic_bytes_per_s: float = DEFAULT_NIC_BYTES_PER_S  #: payload rate of one NIC, bytes/s
    #: fixed time of one flow between two GPUs on one rail in the simulated fabric (links' delay and one
    #: packet's serialization per link), ns
    flow_latency_ns: float = DEFAULT_FLOW_LATENCY_NS

    def __post_init__(self) -> None:
        v = self.nic_bytes_per_s
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not math.isfinite(v):
            raise CosimInputError("nic_bytes_per_s", f"must be a positive number, got {v!r}")
        v = self.flow_latency_ns
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or not math.isfinite(v):
            raise CosimInputError("flow_latency_ns", f"must be a number >= 0, got {v!r}")

    @classmethod
    def for_hardware(cls, hardware: dict | None, nic_bytes_per_s: float = DEFAULT_NIC_BYTES_PER_S,
                     flow_latency_ns: float = DEFAULT_FLOW_LATENCY_NS) -> TuningModel:
        """The model of a trace's hardware spec (its GPU name and NVLink rate), a NIC rate and flow latency."""
        return cls(nvlink=nvlink_model(hardware), nic_bytes_per_s=float(nic_bytes_per_s),
                   flow_latency_ns=float(flow_latency_ns))

    # --- the two terms ---------------------------------------------------------------------------------

    def steps(self, kind: CollKind, algorithm: Algorithm, shape: Shape) -> tuple[int, int]:
        """(NVLink steps, network steps) on the latency path of one call."""
        n, k, g = shape.n, shape.k, shape.g
        kind, algorithm = CollKind(kind), Algorithm(algorithm)
        if n < 2 or algorithm == Algorithm.NONE:
            return 0, 0
        twice = 2 if kind == CollKind.ALL_REDUCE else 1
        if algorithm == Algorithm.TREE:
            if k > 1:
                return 2 * max(g - 1, 0), 2 * math.ceil(math.log2(k))
            return 2 * math.ceil(math.log2(n)), 0
        if algorithm == Algorithm.HIERARCHICAL and k > 1 and g > 1:
            return twice * (g - 1), twice * (k - 1)
        if algorithm == Algorithm.NVLS and k == 1:
            return 2, 0
        if algorithm in (Algorithm.DIRECT, Algorithm.PXN):
            if k == 1:
                return 1, 0
            return (1 if algorithm == Algorithm.PXN else 0), 1
        if algorithm == Algorithm.HALVING_DOUBLING:
            rounds = 2 * math.ceil(math.log2(n))
            return (rounds, 0) if k == 1 else (0, rounds)
        total, inter = twice * (n - 1), twice * (k - 1)
        return total - inter, inter

    def in_server_curve(self, kind: CollKind, algorithm: Algorithm, shape: Shape) -> AllReduceCurve | None:
        """The measured curve that times this call: an all-reduce ring inside one server."""
        if CollKind(kind) != CollKind.ALL_REDUCE or Algorithm(algorithm) != Algorithm.RING or shape.k > 1 \
                or shape.n < 2:
            return None
        return all_reduce_curve_for(self.nvlink.gpu, shape.n)

    def latency_ns(self, kind: CollKind, algorithm: Algorithm, protocol: Protocol, shape: Shape,
                   size_bytes: int) -> float:
        """Launch + NVLink steps × step_ns + network steps × NCCL's per-step network latency, ns (an
        all-reduce ring inside one server: its curve's time less the bandwidth part at ``size_bytes``)."""
        if shape.n < 2:
            return 0.0
        curve = self.in_server_curve(kind, algorithm, shape)
        intra, inter = self.steps(kind, algorithm, shape)
        if curve is not None:
            measured = float(curve.latency_ns(size_bytes))
            if shape.n <= curve.n_ranks:
                return measured
            # a ring over more GPUs than any measured (an NVL72 domain) pays at least the one-line fit's
            # launch and a step per hop: the curve of 8 GPUs holds 14 steps, the ring of 72 has 142
            return max(measured, self.nvlink.launch_ns + intra * self.nvlink.step_ns)
        table = NET_STEP_NS[Algorithm.TREE if algorithm == Algorithm.TREE else Algorithm.RING]
        return self.nvlink.launch_ns + intra * self.nvlink.step_ns + inter * table[Protocol(protocol)]

    def start_latency_ns(self, kind: CollKind, algorithm: Algorithm, protocol: Protocol, shape: Shape,
                         size_bytes: int) -> float:
        """The part of :meth:`latency_ns` the simulation adds as the call's start delay: all of it except
        what the DAG executor's NVLink copies already take, one copy latency per NVLink step."""
        intra, _ = self.steps(kind, algorithm, shape)
        modelled = intra * min(self.nvlink.step_ns, self.nvlink.copy_latency_ns)
        return max(0.0, self.latency_ns(kind, algorithm, protocol, shape, size_bytes) - modelled)

    def nvlink_extra_ns_per_byte(self, kind: CollKind, algorithm: Algorithm, protocol: Protocol,
                                 shape: Shape) -> float:
        """Extra copy-engine time per byte of every NVLink copy of a ring inside one server: what the call's
        bus bandwidth (an all-reduce's curve's Simple line, else the calibrated NVLink busbw) loses against
        the executor's copy rate, ns per byte; 0 for every other call."""
        if shape.k > 1 or shape.n < 2 or Algorithm(algorithm) != Algorithm.RING:
            return 0.0
        return max(0.0, 1e9 / self.bus_bytes_per_s(algorithm, protocol, shape, kind)
                   - 1e9 / self.nvlink.copy_bytes_per_s)

    def bus_bytes_per_s(self, algorithm: Algorithm, protocol: Protocol, shape: Shape,
                        kind: CollKind = CollKind.NONE) -> float:
        """Bus bandwidth the call reaches (module docstring), bytes/s."""
        curve = self.in_server_curve(kind, algorithm, shape)
        if curve is not None:
            return curve.bus_bytes_per_s(self.nvlink.nvlink_bytes_per_s)
        if Algorithm(algorithm) == Algorithm.NVLS and shape.k <= 1:
            return self.nvlink.copy_bytes_per_s
        nvl = self.nvlink.bus_bytes_per_s
        if shape.k <= 1:
            return nvl
        nics = max(shape.g, 1)
        bw = min(nvl, PROTOCOL_EFFICIENCY[Protocol(protocol)] * nics * self.nic_bytes_per_s)
        return TREE_BANDWIDTH_FACTOR * bw if algorithm == Algorithm.TREE else bw

    def nccl_estimate_ns(self, kind: CollKind, algorithm: Algorithm, protocol: Protocol, shape: Shape,
                         size_bytes: int) -> float:
        """NCCL's own cost of one call (latency + bytes at the protocol's bus bandwidth), ns: what picks the
        protocol of an algorithm."""
        if shape.n < 2:
            return 0.0
        factor = {Algorithm.TREE: 2.0, Algorithm.NVLS: 1.0}.get(Algorithm(algorithm), bus_factor(kind, shape.n))
        bw = self.bus_bytes_per_s(algorithm, protocol, shape, kind)
        return self.latency_ns(kind, algorithm, protocol, shape, size_bytes) + factor * size_bytes / bw * 1e9

    def estimate_ns(self, kind: CollKind, algorithm: Algorithm, protocol: Protocol, shape: Shape,
                    size_bytes: int) -> float:
        """The time the simulation takes for one call (module docstring, "What the schedule simulates"), ns;
        NCCL's own cost where the schedule is not modelled here."""
        kind, algorithm = CollKind(kind), Algorithm(algorithm)
        if shape.n < 2:
            return 0.0
        if shape.k > 1 and shape.g > 0:
            if algorithm == Algorithm.RING and kind in (CollKind.ALL_REDUCE, CollKind.REDUCE_SCATTER,
                                                        CollKind.ALL_GATHER):
                return self._simulated_ring_ns(kind, protocol, shape, size_bytes)
            if algorithm == Algorithm.TREE:
                return self._simulated_tree_ns(protocol, shape, size_bytes)
        return self.nccl_estimate_ns(kind, algorithm, protocol, shape, size_bytes)

    def _simulated_ring_ns(self, kind: CollKind, protocol: Protocol, shape: Shape, size_bytes: int) -> float:
        start, path, bw = self._simulated_ring_parts(kind, protocol, shape, size_bytes)
        return start + overlap_ns(path, bw)

    def _simulated_tree_ns(self, protocol: Protocol, shape: Shape, size_bytes: int) -> float:
        """NCCL's channel trees across servers as simulated: the start delay, then a pipeline of m chunks
        per transfer (:func:`cosim.collectives.algorithms.tree_pipeline_chunk_bytes`). A chunk leaves once
        the previous chunk of its transfer landed and its children's chunk arrived, so the pipeline fills in
        one chunk's trip up and down the deepest path (a latency plus the chunk at the link's rate per hop)
        and then moves a chunk per stage: the slower of one hop's latency plus a chunk and the chunks the
        busiest NIC or GPU sends per stage (counted on the trees themselves)."""
        k, g = shape.k, shape.g
        nch = channels_used(2 * g, size_bytes)
        parents = channel_tree_parents(k, g, nch)                  # [C, k·g]
        pos = np.arange(k * g)
        has_parent = parents >= 0
        par = np.where(has_parent, parents, pos)
        cross = has_parent & (par // g != pos // g)                 # edges between servers
        inside = has_parent & ~cross

        def busiest(edges: np.ndarray) -> int:
            """Most transfers one GPU sends on these edges (the child up, the parent down)."""
            senders = np.concatenate([np.broadcast_to(pos, edges.shape)[edges], par[edges]])
            return int(np.bincount(senders, minlength=k * g).max(initial=0))

        share = size_bytes / nch
        chunk = min(tree_pipeline_chunk_bytes(pos, size_bytes, g, protocol), share)
        m = math.ceil(share / chunk) if chunk > 0 else 0
        nic_s, nvl_s = chunk / self.nic_bytes_per_s, chunk / self.nvlink.copy_bytes_per_s
        hop_net = self.flow_latency_ns + nic_s * 1e9
        hop_nvl = self.nvlink.copy_latency_ns + nvl_s * 1e9
        stage = float(np.linalg.norm([hop_net, busiest(cross) * nic_s * 1e9, hop_nvl if g > 1 else 0.0,
                                      busiest(inside) * nvl_s * 1e9], ord=TREE_STAGE_EXPONENT))
        height = tree_depth(tree_parents(k)[0])
        fill = 2 * height * hop_net + 2 * (g - 1) * hop_nvl
        return (self.start_latency_ns(CollKind.ALL_REDUCE, Algorithm.TREE, protocol, shape, size_bytes)
                + fill + max(m - 1, 0) * stage)

    def _simulated_ring_parts(self, kind: CollKind, protocol: Protocol, shape: Shape,
                             size_bytes: int) -> tuple[float, float, float]:
        """Channel rings across servers as simulated: (start delay, fixed latencies of the critical path —
        a copy latency per NVLink step, a flow latency per network step —, the bus bytes at the busier of
        the NICs the channels use and a GPU's NVLink copies), ns."""
        g = shape.g
        intra, inter = self.steps(kind, Algorithm.RING, shape)
        nics = min(g, channels_used(2 * g, size_bytes))
        bus = bus_factor(kind, shape.n) * size_bytes
        bw_s = bus * max(1.0 / (nics * self.nic_bytes_per_s), (g - 1) / g / self.nvlink.copy_bytes_per_s)
        return (self.start_latency_ns(kind, Algorithm.RING, protocol, shape, size_bytes),
                intra * self.nvlink.copy_latency_ns + inter * self.flow_latency_ns, bw_s * 1e9)

    def send_latency_ns(self, size_bytes: int, same_server: bool) -> float:
        """Fixed cost of one point-to-point send of ``size_bytes`` (a pipeline-parallel send/recv), ns, added
        before its first byte moves: NCCL's base latency of a one-step kernel plus one step's latency over
        NVLink (``same_server``) or the network, for the protocol NCCL's send uses at that size (LL up to
        :data:`P2P_LL_THRESHOLD_BYTES`, Simple above), less what the simulation models itself (the NVLink
        copy's own latency; a flow's wire and switch time are not in NCCL's network step)."""
        protocol = Protocol.LL if size_bytes <= P2P_LL_THRESHOLD_BYTES else Protocol.SIMPLE
        if same_server:
            hop = NVLINK_STEP_NS[protocol] - min(NVLINK_STEP_NS[protocol], self.nvlink.copy_latency_ns)
        else:
            hop = NET_STEP_NS[Algorithm.RING][protocol]
        return P2P_BASE_NS[protocol] + hop

    # --- decisions ---------------------------------------------------------------------------------------

    def best_protocol(self, kind: CollKind, algorithm: Algorithm, shape: Shape, size_bytes: int) -> Estimate:
        """``algorithm`` with the protocol NCCL's own cost picks (:meth:`nccl_estimate_ns`; ties: the later,
        bandwidth-oriented protocol; an all-reduce ring inside one server: the protocol NCCL was measured to
        use at that size), timed as the simulation runs it (:meth:`estimate_ns`)."""
        curve = self.in_server_curve(kind, algorithm, shape)
        protocols = reversed(Protocol) if curve is None else (Protocol(int(curve.protocol(size_bytes))),)
        if Algorithm(algorithm) == Algorithm.NVLS:
            protocols = (Protocol.SIMPLE,)  # NCCL runs NVLS with Simple only
        best, best_nccl = None, None
        for p in protocols:
            t = self.nccl_estimate_ns(kind, algorithm, p, shape, size_bytes)
            if best_nccl is None or t < best_nccl:
                best_nccl, best = t, p
        return Estimate(Algorithm(algorithm), best, self.estimate_ns(kind, algorithm, best, shape, size_bytes),
                        self.latency_ns(kind, algorithm, best, shape, size_bytes),
                        self.start_latency_ns(kind, algorithm, best, shape, size_bytes),
                        self.nvlink_extra_ns_per_byte(kind, algorithm, best, shape))

    def choose(self, kind: CollKind, shape: Shape, size_bytes: int, candidates: tuple[Algorithm, ...]) -> Estimate:
        """The candidate the simulation runs fastest, each with its NCCL protocol (:meth:`best_protocol`;
        ties: the earlier candidate)."""
        best = None
        for a in candidates:
            e = self.best_protocol(kind, a, shape, size_bytes)
            if best is None or e.time_ns < best.time_ns:
                best = e
        if best is None:
            raise CosimInputError("algorithm", f"no candidate algorithm for {CollKind(kind).name}")
        return best


#: exponent of the smooth maximum of a tree stage's hop times and busiest NIC's and GPU's chunk times: the
#: NVLink copies of a GPU run one after another while its NIC sends, so a stage takes a little more than the
#: slowest of them (fitted to the simulated sweep of bench/bench_tuner.py)
TREE_STAGE_EXPONENT = 4.0
#: exponent of the smooth maximum of a schedule's path latency and bandwidth time (:func:`overlap_ns`)
OVERLAP_EXPONENT = 3.0


def overlap_ns(path_ns: float, bandwidth_ns: float) -> float:
    """Time of a schedule whose fixed latencies (``path_ns``) partly hide behind its transfers
    (``bandwidth_ns``): the smooth maximum (path^p + bandwidth^p)^(1/p), p = :data:`OVERLAP_EXPONENT` —
    one channel's latency is spent while another channel's bytes use the link, so the two add up only
    when they are of a size."""
    p = OVERLAP_EXPONENT
    return float((max(path_ns, 0.0) ** p + max(bandwidth_ns, 0.0) ** p) ** (1.0 / p))
