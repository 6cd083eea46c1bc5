"""nccl-tests in the simulator: one collective per message size, co-simulated, reported in nccl-tests' columns.

    sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(1 << 20, 1 << 30), n_ranks=16)
    for row, record in run_sweep(sweep):   # one RunRecord per (size, transport), rows: CollectiveRow
        ...

Each point is a synthetic trace of one call of ``op`` on all ``n_ranks`` ranks (one group, one call per
iteration, the iterations chained) run through the training path (:func:`cosim.run.run`):
the same lowering, tuner, NVLink model and packet-level fabric a training run uses.

Columns, as nccl-tests prints them (``size`` is nccl-tests' S: the per-rank buffer of an all-reduce, the
gathered buffer of an all-gather, the unscattered input of a reduce-scatter, the total a rank sends in an
all-to-all):

- ``time_us``: the call's time, first member ready to last transfer done (the mean over iterations after
  the first, which warms the fabric up, when there are several);
- ``algbw_gbps`` = size / time, in GB/s (10^9 B/s);
- ``busbw_gbps`` = algbw × nccl-tests' correction: 2(n−1)/n all-reduce, (n−1)/n reduce-scatter, all-gather
  and all-to-all, 1 broadcast — the rate each rank's busiest link would need, comparable across n.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from cosim.collectives.algorithms import Algorithm
from cosim.collectives.tuning import bus_factor
from cosim.errors import CosimInputError
from cosim.network.spec import NetworkSpec
from cosim.plan import compile  # noqa: A004 - the plan's verb
from cosim.results import RunRecord
from cosim.run import run
from cosim.spec import (
    Experiment,
    LimitsSpec,
    TrainingWorkload,
    from_document,
    resolve_path,
    to_document,
    with_overrides,
)
from cosim.values import Size
from cosim.workload.hardware import get_hardware
from cosim.workload.trace import CollKind, GroupKind, OpKind, Trace

#: nccl-tests' op names → collective kind
OPS = {"all_reduce": CollKind.ALL_REDUCE, "reduce_scatter": CollKind.REDUCE_SCATTER,
       "all_gather": CollKind.ALL_GATHER, "all_to_all": CollKind.ALL_TO_ALL, "broadcast": CollKind.BROADCAST}
#: element type nccl-tests' counts are given in (float32)
ELEMENT_BYTES = 4
#: largest point a sweep may hold
MAX_SIZES = 64


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"1KiB..1GiB"`` (doubling, as nccl-tests -f 2), ``"1MiB..1GiB:4"`` (factor 4) or a list ``"1MiB,8MiB"``."""
    kind = Size(minimum=1)
    text = str(text).strip()
    m = re.fullmatch(r"([^.,:]+)\.\.([^.,:]+)(?::([0-9]+))?", text)
    if m:
        lo, hi = kind.convert(m.group(1), "--sizes"), kind.convert(m.group(2), "--sizes")
        factor = int(m.group(3) or 2)
        if hi < lo:
            raise CosimInputError("--sizes", f"the range {text!r} ends below its start", "write LOW..HIGH")
        if factor < 2:
            raise CosimInputError("--sizes", f"step factor {factor} must be 2 or more", "e.g. 1KiB..1GiB:2")
        sizes, s = [], lo
        while s <= hi and len(sizes) <= MAX_SIZES:
            sizes.append(s)
            s *= factor
    else:
        sizes = [kind.convert(part, "--sizes") for part in text.split(",") if part.strip()]
    if not sizes:
        raise CosimInputError("--sizes", "names no size", "e.g. 1KiB..1GiB or 1MiB,64MiB")
    if len(sizes) > MAX_SIZES:
        raise CosimInputError("--sizes", f"{text!r} has more than {MAX_SIZES} sizes", "use a larger step factor")
    return tuple(sizes)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveSweep:
    """An nccl-tests-style sweep: one op on ``n_ranks`` ranks at each size, on each transport."""

    op: str = "all_reduce"
    sizes_bytes: tuple[int, ...] = (1 << 20,)
    n_ranks: int = 8
    gpus_per_server: int | None = None  #: GPUs of one NVLink domain; None: the GPU preset's gpus_per_host
    gpu: str = "h100"
    algorithm: str = "auto"
    transports: tuple[str, ...] = ("roce",)
    topology: str = "rail-optimized"
    link_gbps: float = 400.0
    n_channels: int | None = None
    chunk_bytes: int = 4 << 20
    iterations: int = 1
    seed: int = 1
    #: further Experiment fields and ns-3 attributes (with_overrides keys → values), ``cosim collective --set``
    settings: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise CosimInputError("--op", f"unknown op {self.op!r}", f"choose one of {', '.join(OPS)}")
        if self.gpus_per_server is None:  # an unknown GPU is an input error here, not at the first point
            object.__setattr__(self, "gpus_per_server", get_hardware(self.gpu).gpus_per_host)
        for name in ("n_ranks", "gpus_per_server", "iterations", "chunk_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CosimInputError(f"--{name.replace('_', '-')}", f"must be an integer >= 1, got {value!r}")
        if self.n_ranks < 2:
            raise CosimInputError("--ranks", "a collective needs at least 2 ranks")
        if self.n_channels is not None and (isinstance(self.n_channels, bool) or self.n_channels < 1):
            raise CosimInputError("--channels", f"must be an integer >= 1, got {self.n_channels!r}")
        if not self.sizes_bytes or any(s < 1 for s in self.sizes_bytes):
            raise CosimInputError("--sizes", "every size must be at least 1 byte")
        get_hardware(self.gpu)  # an unknown GPU is an input error now, not at the first point
        for key, _ in self.settings:
            _check_setting(key)
        if self.settings:  # a bad value is an input error now, not at the first point
            self.experiment(self.transports[0], self.sizes_bytes[0])

    def experiment(self, transport: str, size_bytes: int) -> Experiment:
        """The Experiment of one point (its trace comes from :func:`collective_trace`)."""
        network = NetworkSpec(transport=transport, topology=self.topology, link_gbps=self.link_gbps,
                              gpus_per_server=self.gpus_per_server)
        work = TrainingWorkload(algorithm=self.algorithm, chunk_bytes=self.chunk_bytes, iterations=self.iterations,
                                gpu=self.gpu)
        exp = Experiment(name=f"{self.op}-{size_bytes}B-{transport}", network=network, workload=work,
                         limits=LimitsSpec(max_sim_time_ns=1e11), seed=self.seed,
                         description=f"cosim collective: {self.op} of {size_bytes} B on {self.n_ranks} ranks")
        if not self.settings:
            return exp
        return from_document(with_overrides(to_document(exp), dict(self.settings)), where="--set")[0]


#: the fields a collective sweep sets from its own options (--set must not set them a second way)
_OWN_OPTIONS = {"network.transport": "--transport", "network.topology": "--topology",
                "network.link_gbps": "--link-gbps", "network.gpus_per_server": "--gpus-per-server",
                "seed": "--seed", "workload.gpu": "--gpu", "workload.algorithm": "--algorithm",
                "workload.chunk_bytes": "--chunk-bytes", "workload.iterations": "--iterations"}
#: the tables a collective sweep's --set may reach (its workload is the collective itself)
_SETTABLE = ("network", "attributes", "limits", "telemetry")


def _check_setting(key: str) -> None:
    """Refuse a ``--set`` key the sweep sets itself or that has no meaning for one collective call."""
    path = ".".join(resolve_path(key))
    if path in _OWN_OPTIONS:
        raise CosimInputError(f"--set {key}", "is set by its own option", f"use {_OWN_OPTIONS[path]}")
    if path.split(".")[0] not in _SETTABLE:
        raise CosimInputError(f"--set {key}", "is not a field of a collective sweep",
                              "set network.*, limits.*, telemetry.* fields or Type::Attribute")


def collective_trace(kind: CollKind, size_bytes: int, n_ranks: int, *, gpus_per_server: int = 8,
                     gpu: str = "h100") -> Trace:
    """A trace of one collective call of ``kind`` and size S = ``size_bytes`` on ranks 0..n_ranks−1."""
    kind = CollKind(kind)
    hw = dataclasses.asdict(get_hardware(gpu, gpus_per_host=gpus_per_server))
    n = int(n_ranks)
    zeros = np.zeros(n, np.int64)
    col = lambda value: np.full(n, value, np.int64)  # noqa: E731
    return Trace(
        n_ranks=n, rank=np.arange(n), kind=col(OpKind.COLLECTIVE), phase=col(4), duration_ns=zeros, flops=zeros,
        bytes=col(size_bytes), coll_kind=col(kind), group=zeros, peer=col(-1), match_id=col(-1), coll_id=zeros,
        algo_hint=zeros, label=zeros, microbatch=col(-1), layer=col(-1), dep_ptr=np.zeros(n + 1, np.int64),
        dep_idx=np.zeros(0, np.int64), labels=(f"nccl-tests/{kind.name.lower()}",),
        group_ptr=np.array([0, n], np.int64), group_ranks=np.arange(n), group_kind=[GroupKind.WORLD],
        specs=json.dumps({"hardware": hw}))


@dataclass(frozen=True, slots=True)
class CollectiveRow:
    """One printed line: a point of the sweep and what it measured."""

    transport: str
    op: str
    size_bytes: int
    count: int  #: float32 elements of the buffer
    n_ranks: int
    algorithm: str  #: algorithm the lowering used
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


def measure(record: RunRecord, sweep: CollectiveSweep, transport: str, size_bytes: int) -> CollectiveRow:
    """The nccl-tests columns of one point's run (module docstring)."""
    colls = record.collectives
    dur = np.asarray(colls["finish_ns"], np.float64) - np.asarray(colls["start_ns"], np.float64)
    it = np.asarray(colls["iteration"])
    steady = dur[it >= 1] if sweep.iterations > 1 else dur
    time_ns = float(np.mean(steady)) if steady.size and np.all(np.isfinite(steady)) else float("nan")
    algbw = size_bytes / time_ns if time_ns > 0 else float("nan")  # B/ns = GB/s
    used = Algorithm(int(colls["algorithm"][0])).name.lower() if len(colls["algorithm"]) else "none"
    return CollectiveRow(transport=transport, op=sweep.op, size_bytes=size_bytes,
                         count=size_bytes // ELEMENT_BYTES, n_ranks=sweep.n_ranks, algorithm=used,
                         time_us=time_ns / 1e3, algbw_gbps=algbw,
                         busbw_gbps=algbw * bus_factor(OPS[sweep.op], sweep.n_ranks))


def run_point(sweep: CollectiveSweep, transport: str, size_bytes: int, progress=None) -> tuple[CollectiveRow, RunRecord]:
    """Co-simulate one point; the record's summary carries its row (size_bytes, time_us, algbw_gbps, ...)."""
    exp = sweep.experiment(transport, size_bytes)
    trace = collective_trace(OPS[sweep.op], size_bytes, sweep.n_ranks, gpus_per_server=sweep.gpus_per_server,
                             gpu=sweep.gpu)
    record = run(exp, trace=trace, progress=progress, plan=compile(exp, trace, n_channels=sweep.n_channels))
    row = measure(record, sweep, transport, size_bytes)
    summary = record.summary | {f"collective_{k}": v for k, v in dataclasses.asdict(row).items()}
    return row, dataclasses.replace(record, summary=summary)


def run_sweep(sweep: CollectiveSweep, progress=None) -> Iterator[tuple[CollectiveRow, RunRecord]]:
    """Every point of ``sweep``, transport by transport, size by size (a generator: print as they come)."""
    for transport in sweep.transports:
        for size in sweep.sizes_bytes:
            yield run_point(sweep, transport, size, progress)
