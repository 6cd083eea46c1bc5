"""The Experiment: one spec for every run (a network, a workload, telemetry, limits and a seed).

An Experiment comes from a TOML document (a file, a named experiment shipped with cosim, or the one stored in
a results file), from CLI flags, from a sweep point or from Python; all go through :func:`from_document`
and the field kinds of :mod:`cosim.values`, so a value is checked the same way wherever it came from.
A document looks like::

    name = "incast"                 # optional: the run name (default: the pattern, or the transport)
    description = "..."
    seed = 1
    baseline = true                 # optional: also run it without its faults (docs/models/faults.md)
    [network]                       # cosim.network.spec.NetworkSpec
    topology = "single-switch"
    transport = "roce"              # roce | ib | both (both: one Experiment per transport)
    hosts = 8
    [network.attributes]
    "SharedBufferMmu::BufferBytes" = 4000000
    [workload]
    kind = "flows"                  # flows | training | inference
    pattern = "incast"
    flow_bytes = "1MiB"
    [telemetry]
    queue_sample_interval_ns = 1000
    [limits]
    max_sim_time_ns = 1e9
    [[faults]]                      # optional, repeated: cosim.faults.Fault
    kind = "link_down"
    element = "leaf0-spine1"
    at_ns = 2e5

Several workloads share one fabric with ``[[workloads]]`` tables instead of ``[workload]`` (a training
job, a flow pattern, or background traffic: ``storage``, ``checkpoint``, ``synthetic``), each with its own
hosts (``placement`` or ``hosts``), start offset, priority and loss class (:class:`Job`; docs/multi-job.md)::

    [[workloads]]
    name = "job0"
    kind = "training"
    model = "llama2-7b"
    placement = "spread"            # packed | spread | random | fragmented (cosim.runs.placement)
    [workloads.parallelism]
    dp = 4

``transport = "both"`` expands into two Experiments named ``<name>-roce`` and ``<name>-ib`` (``roce`` and
``ib`` without a name). A ``[[variants]]`` array of tables expands a document into one Experiment per
variant, named ``<name>-<variant name>``: each variant is a ``name`` and the fields it sets on the rest of
the document (shorthands or dotted paths, as ``cosim run`` options and sweep points take them)::

    [[variants]]
    name = "pfc-only"
    dcqcn = false
    admission = true

:func:`to_document` gives the resolved document of one Experiment (every default
filled in), which :func:`to_toml` writes so that running it reproduces the run bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cosim import faults as cosim_faults
from cosim import values as v
from cosim.collectives.lower import ALGORITHM_NAMES
from cosim.errors import CosimInputError
from cosim.network import buffers
from cosim.network.spec import NetworkSpec
from cosim.network.transport import TRANSPORTS, qualify_attribute
from cosim.runs.placement import PLACEMENTS
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec

#: a document's transport may also be "both": one Experiment per transport
TRANSPORT_CHOICES = (*TRANSPORTS, "both")
PATTERNS = ("incast", "permutation")
WORKLOAD_KINDS = ("flows", "training", "inference")
#: kinds a workload of ``[[workloads]]`` may have: flows, training and background traffic
JOB_KINDS = ("flows", "training", "inference", "storage", "checkpoint", "synthetic")
#: built-in flow-size distributions of synthetic traffic (cosim.runs.background.DISTRIBUTIONS)
DISTRIBUTION_NAMES = ("web-search", "data-mining")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowWorkload:
    """Flow-level traffic: every host sends one flow of ``flow_bytes`` in a fixed pattern.

    incast: every host to host 0; permutation: host i to host i+1 (mod hosts).
    """

    kind = "flows"
    pattern: str = v.spec_field(v.Choice(PATTERNS), "incast", "traffic pattern")
    flow_bytes: int = v.spec_field(v.Size(minimum=0), 1 << 20, "payload of each flow, bytes")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingWorkload:
    """A training job: a trace file, or a trace generated from a model preset, a parallelism and a GPU.

    ``trace`` names a cosim trace file (``cosim trace``); otherwise ``model`` (a preset of ``cosim trace
    --list-models``) with ``model_overrides`` (ModelSpec fields), ``parallelism`` (ParallelismSpec fields)
    and ``gpu`` (a hardware preset) generate it, deterministically. ``iterations`` are chained; the first
    warms the fabric up.
    """

    kind = "training"
    trace: str | None = v.spec_field(v.Optional(v.Text(nonempty=True, path=True)), None, "cosim trace file")
    model: str | None = v.spec_field(v.Optional(v.Text(nonempty=True)), None, "model preset to generate from")
    model_overrides: tuple[tuple[str, object], ...] = v.spec_field(v.Kind(), (), "ModelSpec fields")
    parallelism: tuple[tuple[str, object], ...] = v.spec_field(v.Kind(), (), "ParallelismSpec fields")
    gpu: str = v.spec_field(v.Text(nonempty=True), "h100", "GPU preset of a generated trace")
    iterations: int = v.spec_field(v.Int(minimum=1, maximum=10_000), 1, "training iterations to chain")
    chunk_bytes: int = v.spec_field(v.Size(minimum=1), 4 << 20, "largest flow a transfer is split into, bytes")
    algorithm: str = v.spec_field(v.Choice(ALGORITHM_NAMES), "auto", "collective algorithm")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")
        for name in ("model_overrides", "parallelism"):
            object.__setattr__(self, name, _pairs(f"workload.{name}", getattr(self, name)))
        if self.trace is not None and self.model is not None:
            raise CosimInputError("workload.trace", "give either a trace file or a model to generate one from",
                                  "remove workload.model or workload.trace")
        if self.trace is not None and (self.model_overrides or self.parallelism):
            raise CosimInputError("workload.parallelism", "applies to a generated trace, not to a trace file",
                                  "remove it, or give workload.model instead of workload.trace")

    def generate_trace(self, gpus_per_server: int | None):
        """The Trace this workload generates from its model (None for a trace file or an in-memory trace)."""
        if self.model is None:
            return None

        hardware = {} if gpus_per_server is None else {"gpus_per_host": gpus_per_server}
        try:
            parallelism = ParallelismSpec(**dict(self.parallelism))
        except TypeError as exc:
            raise CosimInputError("workload.parallelism", str(exc).split(")")[-1].strip() or str(exc),
                                  "see ParallelismSpec for the fields") from None
        return build_trace(get_model(self.model, **dict(self.model_overrides)), parallelism,
                           get_hardware(self.gpu, **hardware))


KV_TRANSFER_MODES = ("layer", "whole")
DECODE_POLICIES = ("round_robin", "least_loaded", "network_aware")


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceWorkload:
    """A disaggregated LLM service (cosim.runs.inference; docs/models/inference.md): prefill replicas and
    decode replicas of a model preset (``cosim.workload.inference.model.PRESETS``, ``model_overrides``:
    ModelSpec fields), each with its own TP/PP/EP, continuous batching under a token budget, KV caches moved
    prefill → decode over the fabric (``layer`` by layer or ``whole``), requests from a seeded Poisson process
    (``requests``, ``rate_per_s``, log-normal lengths of the given medians) or a CSV trace
    (``request_trace``: a path, or ``"sample"`` for the 64-request sample shipped with cosim; ``requests``
    then takes its first rows, all of them by default). SLOs decide the goodput.
    """

    kind = "inference"
    model: str = v.spec_field(v.Text(nonempty=True), "llama2-70b", "inference model preset")
    model_overrides: tuple[tuple[str, object], ...] = v.spec_field(v.Kind(), (), "ModelSpec fields")
    gpu: str = v.spec_field(v.Text(nonempty=True), "h100", "GPU preset (compute model)")
    prefill_replicas: int = v.spec_field(v.Int(minimum=1, maximum=4096), 1, "prefill replicas")
    decode_replicas: int = v.spec_field(v.Int(minimum=1, maximum=4096), 1, "decode replicas")
    prefill_tp: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "tensor parallelism of a prefill replica")
    prefill_pp: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "pipeline stages of a prefill replica")
    prefill_ep: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "expert parallelism of a prefill replica "
                                   "(1 or prefill_tp)")
    decode_tp: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "tensor parallelism of a decode replica")
    decode_pp: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "pipeline stages of a decode replica")
    decode_ep: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "expert parallelism of a decode replica "
                                  "(1 or decode_tp)")
    prefill_token_budget: int = v.spec_field(v.Int(minimum=1, maximum=1 << 24), 8192,
                                             "prompt tokens a prefill step may batch")
    max_decode_batch: int = v.spec_field(v.Int(minimum=1, maximum=1 << 16), 64, "sequences a decode step may hold")
    requests: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=1 << 20)), None,
                                        "requests: Poisson [16]; of a trace, its first rows [all]")
    rate_per_s: float = v.spec_field(v.Real(positive=True, maximum=1e9), 10.0, "Poisson arrival rate, requests/s")
    prompt_median_tokens: float = v.spec_field(v.Real(minimum=1.0, maximum=1e6), 1000.0, "median prompt, tokens")
    output_median_tokens: float = v.spec_field(v.Real(minimum=1.0, maximum=1e6), 50.0, "median output, tokens")
    max_prompt_tokens: int = v.spec_field(v.Int(minimum=1, maximum=1 << 20), 8192, "longest prompt, tokens")
    max_output_tokens: int = v.spec_field(v.Int(minimum=1, maximum=1 << 20), 1024, "longest output, tokens")
    request_seed: int | None = v.spec_field(v.Optional(v.Int(minimum=0, maximum=2**63 - 1)), None,
                                            "seed of the Poisson requests [the experiment's seed]")
    request_trace: str | None = v.spec_field(v.Optional(v.Text(nonempty=True, path=True)), None,
                                             "request CSV (arrived_at,num_prefill_tokens,num_decode_tokens) or "
                                             "\"sample\"")
    kv_transfer: str = v.spec_field(v.Choice(KV_TRANSFER_MODES), "layer", "KV cache moved per layer or whole")
    policy: str = v.spec_field(v.Choice(DECODE_POLICIES), "round_robin", "decode replica choice")
    ttft_slo_ms: float = v.spec_field(v.Real(positive=True, maximum=1e9), 1000.0, "time-to-first-token SLO, ms")
    tpot_slo_ms: float = v.spec_field(v.Real(positive=True, maximum=1e9), 100.0, "time-per-output-token SLO, ms")
    chunk_bytes: int = v.spec_field(v.Size(minimum=1), 4 << 20, "largest flow a transfer is split into, bytes")
    algorithm: str = v.spec_field(v.Choice(ALGORITHM_NAMES), "auto", "collective algorithm")
    max_batching_iterations: int = v.spec_field(v.Int(minimum=1, maximum=100), 8,
                                                "packet-level runs to reach the batching fixed point")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")
        object.__setattr__(self, "model_overrides", _pairs("workload.model_overrides", self.model_overrides))
        from cosim.workload.inference.stepcost import check_parallelism  # noqa: PLC0415

        model = self.inference_model()
        for side in ("prefill", "decode"):
            check_parallelism(model, getattr(self, f"{side}_tp"), getattr(self, f"{side}_pp"),
                              getattr(self, f"{side}_ep"), f"workload.{side}")
        try:
            get_hardware(self.gpu)
        except CosimInputError as exc:
            raise CosimInputError("workload.gpu", exc.problem, exc.fix) from None

    def inference_model(self):
        """The InferenceModel of ``model`` with ``model_overrides``."""
        from cosim.workload.inference.model import get_inference_model  # noqa: PLC0415

        try:
            return get_inference_model(self.model, **dict(self.model_overrides))
        except CosimInputError as exc:
            field = exc.field if exc.field.startswith("workload") else f"workload.model_overrides.{exc.field}"
            raise CosimInputError(field, exc.problem, exc.fix) from None
        except TypeError as exc:
            raise CosimInputError("workload.model_overrides", str(exc), "see ModelSpec for the fields") from None


def _pairs(where: str, value) -> tuple[tuple[str, object], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = tuple((str(k), x) for k, x in items)
    except (TypeError, ValueError):
        raise CosimInputError(where, "must be a table of field = value") from None
    for k, x in pairs:
        if isinstance(x, (dict, list, tuple)) or (isinstance(x, float) and not math.isfinite(x)):
            raise CosimInputError(f"{where}.{k}", f"must be a single finite value, got {x!r}")
    return pairs


# ---------------------------------------------------------------- background traffic and shared fabrics

def _names(where: str, value) -> tuple[str, ...]:
    """A list of workload names (a single name accepted)."""
    items = (value,) if isinstance(value, str) else value
    try:
        names = tuple(items)
    except TypeError:
        raise CosimInputError(where, "must be a list of workload names") from None
    for n in names:
        if not isinstance(n, str) or not n:
            raise CosimInputError(where, f"must be a list of workload names, got {n!r}")
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageWorkload:
    """Storage traffic: the workload's own hosts are storage targets; the hosts of ``clients`` read
    (target → client) and write (client → target) requests of ``request_bytes``, Poisson arrivals for
    ``duration_ns`` at ``load`` × the targets' summed link rate (payload), each request to a random target.
    """

    kind = "storage"
    clients: tuple[str, ...] = v.spec_field(v.Kind(), (), "workloads whose hosts are the clients (default: every "
                                            "training and flow workload)")
    request_bytes: int = v.spec_field(v.Size(minimum=1), 1 << 20, "size of each read or write, bytes")
    read_fraction: float = v.spec_field(v.Real(minimum=0.0, maximum=1.0), 0.5, "share of requests that are reads")
    load: float = v.spec_field(v.Real(positive=True, maximum=1.0), 0.3,
                               "offered payload rate / summed link rate of the storage targets")
    duration_ns: float = v.spec_field(v.Real(positive=True, maximum=1e12), 1e6, "arrivals during this long, ns")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")
        object.__setattr__(self, "clients", _names("workload.clients", self.clients))


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointWorkload:
    """Periodic checkpoint bursts: every ``period_ns`` (``bursts`` times), every host of ``writers`` writes
    ``bytes_per_host`` to one of this workload's hosts (the storage targets, in turn)."""

    kind = "checkpoint"
    writers: tuple[str, ...] = v.spec_field(v.Kind(), (), "workloads whose hosts write (default: every training "
                                            "workload)")
    bytes_per_host: int = v.spec_field(v.Size(minimum=1), 16 << 20, "bytes each writer NIC writes per burst")
    period_ns: float = v.spec_field(v.Real(positive=True, maximum=1e12), 1e6, "time between bursts, ns")
    bursts: int = v.spec_field(v.Int(minimum=1, maximum=100_000), 1, "number of bursts")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")
        object.__setattr__(self, "writers", _names("workload.writers", self.writers))


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticWorkload:
    """Datacenter background traffic among the workload's own hosts: every host starts flows to a random
    other host as a Poisson process of rate ``load`` × its link rate / the mean flow size, for
    ``duration_ns``; sizes from a built-in ``distribution`` or a ``cdf_file`` (lines ``size_bytes cdf``,
    the cdf in 0..1 or in percent)."""

    kind = "synthetic"
    distribution: str | None = v.spec_field(v.Optional(v.Choice(DISTRIBUTION_NAMES)), None,
                                            "web-search or data-mining (default web-search unless cdf_file)")
    cdf_file: str | None = v.spec_field(v.Optional(v.Text(nonempty=True, path=True)), None,
                                        "flow-size CDF file: lines of size_bytes and cumulative probability")
    load: float = v.spec_field(v.Real(positive=True, maximum=1.0), 0.3, "offered payload rate / link rate per host")
    duration_ns: float = v.spec_field(v.Real(positive=True, maximum=1e12), 1e6, "arrivals during this long, ns")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")
        if self.distribution is not None and self.cdf_file is not None:
            raise CosimInputError("workload.cdf_file", "give either a distribution or a cdf_file",
                                  "remove one of them")
        if self.distribution is None and self.cdf_file is None:
            object.__setattr__(self, "distribution", "web-search")


#: background kinds: their own hosts are storage targets (storage, checkpoint) or the traffic's hosts
BACKGROUND = {"storage": StorageWorkload, "checkpoint": CheckpointWorkload, "synthetic": SyntheticWorkload}

_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One workload of a shared fabric (a ``[[workloads]]`` table): what it runs, on which hosts, when,
    and in which traffic class.

    ``hosts`` lists fabric host ids (rank r of a training job on hosts[r]); otherwise ``placement`` gives
    the job whole servers (cosim.runs.placement): a training job the ones its ranks need, any other the
    ``servers`` it names (default 1). ``start_ns`` delays every op of the job. ``priority`` is its traffic
    class (0..7; RoCE serves higher ones first, InfiniBand maps it to lane priority mod
    EgressPort::DataVls); ``lossless = false`` makes the class lossy on RoCE (SharedBufferMmu::
    LosslessPriorityMask; InfiniBand lanes are lossless by construction). ``alone`` also simulates the job
    alone on the idle fabric, on the same hosts, for its slowdown from sharing.
    """

    name: str = v.spec_field(v.Text(nonempty=True), "job", "workload name: results keys are <name>_...")
    work: object = dataclasses.field(default=None)
    placement: str = v.spec_field(v.Choice(PLACEMENTS), "packed", "placement policy when hosts are not listed")
    hosts: tuple[int, ...] | None = v.spec_field(v.Kind(), None, "fabric host ids of the job, in rank order")
    servers: int | None = v.spec_field(v.Optional(v.Int(minimum=1, maximum=1 << 17)), None,
                                       "servers a non-training workload takes [1]")
    placement_seed: int | None = v.spec_field(v.Optional(v.Int(minimum=0, maximum=2**63 - 1)), None,
                                              "seed of the random placement [the experiment's seed]")
    start_ns: float = v.spec_field(v.Real(minimum=0.0, maximum=1e15), 0.0, "start offset of the workload, ns")
    priority: int = v.spec_field(v.Int(minimum=0, maximum=7), 0, "traffic class (priority) of its flows, 0..7")
    lossless: bool = v.spec_field(v.Bool(), True, "RoCE: PFC protects its class (false: lossy, drops recovered)")
    alone: bool = v.spec_field(v.Bool(), False, "also run it alone for the slowdown caused by sharing")

    def __post_init__(self) -> None:
        where = f"workloads.{self.name}" if isinstance(self.name, str) else "workloads"
        v.check_fields(self, where)
        if not _JOB_NAME.fullmatch(self.name):
            raise CosimInputError(f"{where}.name", f"{self.name!r} is not a workload name",
                                  "use a letter, then letters, digits or _ (e.g. job0)")
        if not isinstance(self.work, (FlowWorkload, TrainingWorkload, InferenceWorkload, *BACKGROUND.values())):
            raise CosimInputError(f"{where}.kind", "must be a workload spec", f"kinds: {', '.join(JOB_KINDS)}")
        if self.hosts is not None:
            object.__setattr__(self, "hosts", _host_list(f"{where}.hosts", self.hosts))
            if self.servers is not None:
                raise CosimInputError(f"{where}.servers", "hosts already say where the workload runs",
                                      "remove servers or hosts")
        if self.work.kind == "training" and self.servers is not None:
            raise CosimInputError(f"{where}.servers", "a training job takes the servers its ranks need",
                                  "remove it")

    @property
    def kind(self) -> str:
        """The workload kind (training, flows, storage, checkpoint, synthetic)."""
        return self.work.kind

    @property
    def server_count(self) -> int:
        """Servers a non-training job without hosts asks for."""
        return 1 if self.servers is None else self.servers


def _reserved_prefixes() -> frozenset[str]:
    """First words of the run summary's own keys: a workload named so would read as one of them."""
    from cosim.results.metrics import METRICS  # noqa: PLC0415

    return frozenset(m.key.split("_")[0] for m in METRICS) | {"deadlock", "n", "alone"}


def _host_list(where: str, value) -> tuple[int, ...]:
    try:
        hosts = tuple(value)
    except TypeError:
        raise CosimInputError(where, "must be a list of host ids") from None
    out = tuple(v.Int(minimum=0, maximum=2**31 - 1).convert(h, where) for h in hosts)
    if not out:
        raise CosimInputError(where, "must list at least one host")
    if len(set(out)) != len(out):
        dup = next(h for h in out if out.count(h) > 1)
        raise CosimInputError(where, f"host {dup} is listed twice", "give every GPU (NIC) one rank")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySpec:
    """What the run records besides its tables."""

    queue_sample_interval_ns: float = v.spec_field(v.Real(minimum=1.0, maximum=1e12), 1000.0,
                                                   "egress queue sampling interval, ns")

    def __post_init__(self) -> None:
        v.check_fields(self, "telemetry")


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsSpec:
    """When a run stops although work remains (None: derived from the workload, cosim.runs.time_limit)."""

    max_sim_time_ns: float | None = v.spec_field(v.Optional(v.Real(positive=True, maximum=9.2e18 / 1e3)), None,
                                                 "stop at this simulated time, ns [20 x the workload's ideal "
                                                 "time, at least 1e9]")
    collective_timeout_ns: float = v.spec_field(v.Real(minimum=0.0, maximum=1e14), 0.0,
                                                "training: a collective not complete this long after it started "
                                                "fails the job (status failed), like NCCL's watchdog, ns (0: off)")
    decompose: str = v.spec_field(v.Choice(("auto", "off")), "auto",
                                  "auto: simulate independent or identical parts of the run apart and merge them "
                                  "when that is exact (cosim.runs.decompose_run), else the whole run; off: always "
                                  "the whole run")

    def __post_init__(self) -> None:
        v.check_fields(self, "limits")


#: a workload's defaults for the fields it leaves open
_WORKLOAD_DEFAULTS = {
    "flows": {"topology": "single-switch"},
    "training": {"topology": "rail-optimized"},
    "inference": {"topology": "leaf-spine"},
    "shared": {"topology": "leaf-spine"},
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """One run: a network, a workload on it, what to record, when to stop, and the seed of every random
    choice. Construction resolves the workload's defaults (topology, run name); an unset time limit is
    derived from the workload when the run is planned (cosim.runs.time_limit)."""

    name: str | None = v.spec_field(v.Optional(v.RunName()), None, "run name inside the results file")
    description: str = v.spec_field(v.Text(), "", "what the experiment shows")
    network: NetworkSpec = dataclasses.field(default_factory=NetworkSpec)
    workload: FlowWorkload | TrainingWorkload | InferenceWorkload = dataclasses.field(default_factory=FlowWorkload)
    telemetry: TelemetrySpec = dataclasses.field(default_factory=TelemetrySpec)
    limits: LimitsSpec = dataclasses.field(default_factory=LimitsSpec)
    seed: int = v.spec_field(v.Int(minimum=0, maximum=2**63 - 1), 1, "seed of every random choice (ECMP, RNG)")
    #: several workloads on one fabric (``[[workloads]]``); empty: the one ``workload``
    workloads: tuple[Job, ...] = ()
    #: faults injected into the run (``[[faults]]``, ``--fault``; cosim.faults)
    faults: tuple[cosim_faults.Fault, ...] = ()
    baseline: bool = v.spec_field(v.Bool(), False, "also run the experiment without its faults and store both")

    def __post_init__(self) -> None:
        v.check_fields(self, "")
        for name, cls in (("network", NetworkSpec), ("workload", (FlowWorkload, TrainingWorkload, InferenceWorkload)),
                          ("telemetry", TelemetrySpec), ("limits", LimitsSpec)):
            if not isinstance(getattr(self, name), cls):
                raise CosimInputError(name, f"must be a {getattr(cls, '__name__', 'workload spec')}")
        object.__setattr__(self, "workloads", tuple(self.workloads))
        object.__setattr__(self, "faults", cosim_faults.faults_from_list(list(self.faults)))
        if self.baseline and not self.faults:
            raise CosimInputError("baseline", "there are no faults to run without", "add [[faults]] or --fault")
        if self.limits.max_sim_time_ns is not None:  # a derived limit is checked when the run is planned
            cosim_faults.check_times(self.faults, self.limits.max_sim_time_ns)
        cosim_faults.check_transport(self.faults, self.network.transport)
        if self.workloads:
            self._resolve_shared()
            return
        defaults = _WORKLOAD_DEFAULTS[self.workload.kind]
        if self.network.topology is None:
            object.__setattr__(self, "network", dataclasses.replace(self.network, topology=defaults["topology"]))
        if self.is_training or self.is_inference:
            if self.network.hosts is not None:
                raise CosimInputError("network.hosts", f"a {self.workload.kind} run sizes its fabric to its ranks",
                                      "remove it (or set network.gpus_per_server)")
        else:
            if self.network.hosts is None:
                object.__setattr__(self, "network", dataclasses.replace(self.network, hosts=8))
        if self.name is None:
            object.__setattr__(self, "name", self.workload.pattern if self.workload.kind == "flows"
                               else self.network.transport)

    @property
    def is_training(self) -> bool:
        """True for one co-simulated training workload, False for flow-level traffic or shared fabrics."""
        return not self.workloads and self.workload.kind == "training"

    @property
    def is_inference(self) -> bool:
        """True for one co-simulated inference service (cosim.runs.inference)."""
        return not self.workloads and self.workload.kind == "inference"

    @property
    def is_shared(self) -> bool:
        """True when several workloads (``[[workloads]]``) share the fabric."""
        return bool(self.workloads)

    def _resolve_shared(self) -> None:
        """Defaults and cross-workload checks of a shared fabric: unique names, references to workloads
        that have hosts, one loss class per priority."""
        jobs = self.workloads
        for i, j in enumerate(jobs):
            if not isinstance(j, Job):
                raise CosimInputError(f"workloads[{i}]", "must be a cosim.runs.experiment.Job")
        names = [j.name for j in jobs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise CosimInputError(f"workloads.{dup}.name", f"two workloads are named {dup!r}",
                                  "give every workload its own name")
        for n in names:
            clash = next((m for m in names if m != n and m.startswith(f"{n}_")), None)
            if clash is not None or n.split("_")[0] in _reserved_prefixes():
                raise CosimInputError(f"workloads.{n}.name", f"{n!r} would make results keys "
                                      + (f"that {clash!r}'s keys also start with" if clash else
                                         "that read as the shared fabric's (fct_..., link_...)"),
                                      "rename the workload, e.g. job0, storage, ckpt")
        hosted = {j.name for j in jobs if j.kind in ("training", "flows")}
        for j in jobs:
            refs = {"storage": "clients", "checkpoint": "writers"}.get(j.kind)
            for ref in getattr(j.work, refs, ()) if refs else ():
                if ref not in hosted:
                    raise CosimInputError(f"workloads.{j.name}.{refs}", f"{ref!r} is not a training or flow "
                                          "workload of this experiment", f"choose from {', '.join(sorted(hosted))}"
                                          if hosted else "add the workload it refers to")
            if refs and not getattr(j.work, refs) and not hosted:
                raise CosimInputError(f"workloads.{j.name}.{refs}", "there is no training or flow workload "
                                      f"to take the {refs} from", "add one, or list the workloads")
        lossy: dict[int, bool] = {}
        for j in jobs:
            if lossy.setdefault(j.priority, not j.lossless) != (not j.lossless):
                raise CosimInputError(f"workloads.{j.name}.lossless", f"priority {j.priority} is lossless for one "
                                      "workload and lossy for another", "give the lossy workloads their own priority")
        if any(lossy.values()) and any(qualify_attribute(k) == "ns3::SharedBufferMmu::LosslessPriorityMask"
                                       for k, _ in self.network.attributes):
            raise CosimInputError("SharedBufferMmu::LosslessPriorityMask", "is set by the workloads' lossless "
                                  "fields here", "remove the attribute, or set lossless on the workloads")
        if self.workload != FlowWorkload():
            raise CosimInputError("workload", "give either [workload] or [[workloads]]", "move it into [[workloads]]")
        defaults = _WORKLOAD_DEFAULTS["shared"]
        if self.network.topology is None:
            object.__setattr__(self, "network", dataclasses.replace(self.network, topology=defaults["topology"]))
        if self.name is None:
            object.__setattr__(self, "name", self.network.transport)

    def lossless_priority_mask(self) -> int | None:
        """SharedBufferMmu::LosslessPriorityMask of a RoCE run: PFC headroom only for the priorities its
        lossless traffic uses (the lossless workloads' priorities, 0 for a single workload, and the ACK/CNP
        priority; cosim.network.buffers.lossless_priority_mask); None on InfiniBand or when
        network.attributes set the mask (an explicit setting wins)."""
        if self.network.transport != "roce":
            return None
        jobs = self.workloads
        lossless = {j.priority for j in jobs if j.lossless} if jobs else {0}
        lossy = {j.priority for j in jobs if not j.lossless}
        return buffers.lossless_priority_mask(lossless, lossy, attributes=dict(self.network.attributes))


# ---------------------------------------------------------------- documents

_SECTIONS = {"network": NetworkSpec, "telemetry": TelemetrySpec, "limits": LimitsSpec}
_WORKLOADS = {"flows": FlowWorkload, "training": TrainingWorkload, "inference": InferenceWorkload}
_TOP = ("name", "description", "seed", "baseline")
#: the key of a document's faults (a list of tables; cosim.faults)
_FAULTS = "faults"
#: the key of a document's variants (one Experiment each)
_VARIANTS = "variants"


def _spec_from_table(cls, table, where: str, *, skip=()):
    """Construct spec ``cls`` from a document table; unknown keys name the valid ones."""
    if not isinstance(table, Mapping):
        raise CosimInputError(where, "must be a table")
    known = [f.name for f in dataclasses.fields(cls)]
    for key in table:
        if key not in known and key not in skip:
            raise CosimInputError(f"{where}.{key}", "unknown field", f"valid fields: {', '.join(known)}")
    return cls(**{k: x for k, x in table.items() if k not in skip})


def from_document(doc: Mapping, *, where: str = "experiment") -> list[Experiment]:
    """The Experiments of a document (one, or one per transport with ``transport = "both"``).

    Errors are CosimInputError naming the field as ``section.field`` (prefixed by ``where`` when it is a
    file), so a typo in any source reads the same.
    """
    prefix = f"{where}: " if where != "experiment" else ""
    try:
        return _from_document(doc)
    except CosimInputError as exc:
        if not prefix:
            raise
        raise CosimInputError(prefix + exc.field, exc.problem, exc.fix) from None


def _table(doc: Mapping, key: str) -> dict:
    """Section ``key`` of a document as a dict ({} if absent)."""
    value = doc.get(key, {})
    if not isinstance(value, Mapping):
        raise CosimInputError(key, f"must be a table, got {value!r}", f"write it as [{key}]")
    return dict(value)


def _variant_fields(table: Mapping, prefix: str = "") -> dict:
    """A variant's fields as with_overrides keys (tables such as ``attributes`` flattened to dotted keys)."""
    out = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if full == "name":
            continue
        if isinstance(value, Mapping):
            out |= _variant_fields(value, full + ".")
        else:
            resolve_path(full)  # a misspelt field fails here, where the error can name its variant
            out[full] = value
    return out


def _expand_variants(doc: Mapping) -> list[Experiment]:
    """The Experiments of a document with ``[[variants]]``: the rest of the document with each one's fields."""
    variants = doc[_VARIANTS]
    if not isinstance(variants, list) or not variants or not all(isinstance(x, Mapping) for x in variants):
        raise CosimInputError(_VARIANTS, "must be a non-empty array of tables", "write each as [[variants]]")
    base = {k: x for k, x in doc.items() if k != _VARIANTS}
    out, seen = [], set()
    for i, variant in enumerate(variants):
        where = f"{_VARIANTS}[{i}]"
        vname = v.RunName().convert(variant.get("name"), f"{where}.name")
        if vname in seen:
            raise CosimInputError(f"{where}.name", f"variant {vname!r} appears twice", "give each a distinct name")
        seen.add(vname)
        try:
            fields = _variant_fields(variant)
        except CosimInputError as exc:
            raise CosimInputError(f"{where}.{exc.field}", exc.problem, exc.fix) from None
        sub = with_overrides(base, fields)
        sub["name"] = f"{base['name']}-{vname}" if base.get("name") else vname
        out += _from_document(sub)
    return out


def _from_document(doc: Mapping) -> list[Experiment]:
    if not isinstance(doc, Mapping):
        raise CosimInputError("experiment", "must be a table of sections")
    if _VARIANTS in doc:
        return _expand_variants(doc)
    for key in doc:
        if key not in _TOP and key not in _SECTIONS and key not in ("workload", "workloads", _FAULTS):
            raise CosimInputError(key, "unknown key", f"valid keys: {', '.join(_TOP)}, sections workload "
                                  f"(or [[workloads]]), {', '.join(_SECTIONS)}, [[{_FAULTS}]] and [[{_VARIANTS}]]")
    if "workload" in doc and "workloads" in doc:
        raise CosimInputError("workloads", "give either one [workload] or a list of [[workloads]], not both",
                              "move the [workload] table into [[workloads]]")
    jobs = _jobs_from_list(doc["workloads"]) if "workloads" in doc else ()
    workload = _table(doc, "workload")
    kind = workload.get("kind", "flows")
    if not isinstance(kind, str) or kind not in _WORKLOADS:
        raise CosimInputError("workload.kind", f"unknown workload kind {kind!r}",
                              f"choose one of {', '.join(WORKLOAD_KINDS)}"
                              + (" (background kinds go in [[workloads]])" if kind in BACKGROUND else ""))
    work = _spec_from_table(_WORKLOADS[kind], workload, "workload", skip=("kind",))
    network = _table(doc, "network")
    transport = network.get("transport", "roce")
    if not isinstance(transport, str) or transport not in TRANSPORT_CHOICES:
        raise CosimInputError("network.transport", f"unknown value {transport!r}",
                              f"choose one of {', '.join(TRANSPORT_CHOICES)}")
    transports = TRANSPORTS if transport == "both" else (transport,)
    sections = {s: _spec_from_table(cls, _table(doc, s), s) for s, cls in _SECTIONS.items() if s != "network"}
    name = doc.get("name")
    top = {k: doc[k] for k in ("description", "seed", "baseline") if k in doc}
    if _FAULTS in doc:
        top["faults"] = cosim_faults.faults_from_list(doc[_FAULTS])
    out = []
    for t in transports:
        net = _spec_from_table(NetworkSpec, network | {"transport": t}, "network")
        run_name = (f"{name}-{t}" if name else t) if len(transports) > 1 else name
        out.append(Experiment(name=run_name, network=net, workload=work, workloads=jobs, **sections, **top))
    return out


_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(Job) if f.name != "work")


def _jobs_from_list(items) -> tuple[Job, ...]:
    """The Jobs of a ``[[workloads]]`` list: job fields (name, placement, hosts, ...) and the fields of
    the workload kind in one table; errors name ``workloads.<name>.<field>``."""
    if isinstance(items, Mapping) or not isinstance(items, (list, tuple)) or not items:
        raise CosimInputError("workloads", "must be a non-empty list of tables", "write each as [[workloads]]")
    jobs = []
    for i, table in enumerate(items):
        if not isinstance(table, Mapping):
            raise CosimInputError(f"workloads[{i}]", "must be a table", "write it as [[workloads]]")
        name = table.get("name", f"job{i}")
        where = f"workloads.{name}" if isinstance(name, str) and name else f"workloads[{i}]"
        kind = table.get("kind", "training")
        if not isinstance(kind, str) or kind not in JOB_KINDS:
            raise CosimInputError(f"{where}.kind", f"unknown workload kind {kind!r}",
                                  f"choose one of {', '.join(JOB_KINDS)}")
        cls = _WORKLOADS.get(kind) or BACKGROUND[kind]
        work_keys = {k: x for k, x in table.items() if k not in _JOB_FIELDS and k != "kind"}
        job_keys = {k: x for k, x in table.items() if k in _JOB_FIELDS}
        try:
            work = _spec_from_table(cls, work_keys, "workload")
        except CosimInputError as exc:
            field = exc.field.replace("workload", where, 1) if exc.field.startswith("workload") else exc.field
            fix = exc.fix if "unknown field" not in exc.problem else (
                f"{exc.fix}; and for every workload: {', '.join(_JOB_FIELDS)}")
            raise CosimInputError(field, exc.problem, fix) from None
        jobs.append(Job(**({"name": name} | job_keys), work=work))
    return tuple(jobs)


def to_document(exp: Experiment) -> dict:
    """The resolved document of ``exp`` (JSON- and TOML-able; attributes as a table)."""
    def table(spec) -> dict:
        d = {}
        for f in dataclasses.fields(spec):
            x = getattr(spec, f.name)
            if f.name in ("attributes", "model_overrides", "parallelism"):
                x = dict(x)
            d[f.name] = x
        return d

    doc = {"name": exp.name, "description": exp.description, "seed": exp.seed, "network": table(exp.network)}
    if exp.workloads:
        doc["workloads"] = [_job_document(j, table) for j in exp.workloads]
    else:
        doc["workload"] = {"kind": exp.workload.kind, **table(exp.workload)}
    doc |= {"telemetry": table(exp.telemetry), "limits": table(exp.limits)}
    if exp.faults:
        doc["baseline"] = exp.baseline
        doc[_FAULTS] = [cosim_faults.fault_to_table(f) for f in exp.faults]
    return doc


def _job_document(job: Job, table) -> dict:
    """One ``[[workloads]]`` table: the job's fields, its kind, then its workload's fields."""
    d = {k: getattr(job, k) for k in _JOB_FIELDS}
    d = {k: (list(x) if isinstance(x, tuple) else x) for k, x in d.items()}
    work = {k: (list(x) if isinstance(x, tuple) else x) for k, x in table(job.work).items()}
    return {"name": d.pop("name"), "kind": job.kind, **d, **work}


# ---------------------------------------------------------------- overrides

#: CLI option / sweep shorthand -> the document path it sets
SHORTHANDS = {
    "transport": "network.transport", "fabric": "network.transport", "topology": "network.topology",
    "hosts": "network.hosts", "gpus_per_server": "network.gpus_per_server",
    "hosts_per_leaf": "network.hosts_per_leaf", "spines": "network.spines",
    "oversubscription": "network.oversubscription", "link_gbps": "network.link_gbps",
    "link_delay_ns": "network.link_delay_ns", "dcqcn": "network.dcqcn", "ib_cc": "network.ib_cc",
    "qps_per_connection": "network.qps_per_connection", "ecmp_hash": "network.ecmp_hash",
    "routing": "network.routing", "admission": "network.admission", "qp_window_bytes": "network.qp_window_bytes",
    "ecn_marking": "network.ecn_marking", "pfc_watchdog": "network.pfc_watchdog",
    "collective_timeout_ns": "limits.collective_timeout_ns",
    "pattern": "workload.pattern", "flow_bytes": "workload.flow_bytes", "trace": "workload.trace",
    "iterations": "workload.iterations", "chunk_bytes": "workload.chunk_bytes",
    "algorithm": "workload.algorithm", "queue_sample_interval_ns": "telemetry.queue_sample_interval_ns",
    "max_sim_time_ns": "limits.max_sim_time_ns", "decompose": "limits.decompose", "seed": "seed", "name": "name",
    "description": "description", "baseline": "baseline", "faults": "faults",
}


def resolve_path(key: str) -> list[str]:
    """A shorthand (``hosts``), a dotted path (``network.link_gbps``) or an attribute key
    (``attributes.Type::Attribute``) → the path of document keys it sets."""
    if key.startswith("attributes."):
        return ["network", "attributes", key.removeprefix("attributes.")]
    if key.startswith("network.attributes."):
        return ["network", "attributes", key.removeprefix("network.attributes.")]
    path = SHORTHANDS.get(key, key).split(".")
    ok = (len(path) == 1 and path[0] in (*_TOP, _FAULTS)) or (len(path) == 2 and path[0] in (*_SECTIONS, "workload")) or (
        len(path) == 3 and path[0] == "workload" and path[1] in ("model_overrides", "parallelism"))
    if not ok:
        raise CosimInputError(key, "not an experiment field",
                              "use a section path like network.link_gbps or workload.iterations, "
                              f"or one of {', '.join(SHORTHANDS)}")
    return path


def with_overrides(doc: Mapping, overrides: Mapping[str, object]) -> dict:
    """A copy of ``doc`` with ``overrides`` (key → value, keys as :func:`resolve_path` reads them) set.

    Giving a trace file replaces a generated trace's model fields; a workload with a trace or a model and
    no kind is a training workload. ``faults`` (a list of fault tables) adds to the document's faults. A field the workload's kind does not have is an error when the
    document is read, never dropped.
    """
    out = {k: (dict(x) if isinstance(x, Mapping) else x) for k, x in doc.items()}
    for key, value in overrides.items():
        path = resolve_path(key)
        if path == [_FAULTS]:
            value = [*(out.get(_FAULTS) or []), *(value if isinstance(value, (list, tuple)) else [value])]
        node = out
        for part in path[:-1]:
            child = node.get(part)
            node[part] = dict(child) if isinstance(child, Mapping) else {}
            node = node[part]
        node[path[-1]] = value
        if path == ["workload", "trace"]:
            for k in ("model", "model_overrides", "parallelism", "gpu"):
                node.pop(k, None)
    work = out.get("workload")
    if isinstance(work, Mapping) and "kind" not in work and ("trace" in work or "model" in work):
        work["kind"] = "training"  # a trace or a model is a training workload; anything else defaults to flows
    return out


# ---------------------------------------------------------------- TOML

def to_toml(doc: Mapping) -> str:
    """A document as TOML text (scalars at the top, then one table per section), written by tomli-w.

    TOML has no null, so keys whose value is None are left out (reading the text back gives each its
    default), as are empty sub-tables such as ``attributes = {}``. A value TOML cannot hold (a numpy
    integer, None inside an array) is a CosimInputError.
    """
    import tomli_w  # noqa: PLC0415

    try:
        return tomli_w.dumps(_toml_ready(doc, top=True))
    except (TypeError, ValueError) as exc:
        raise CosimInputError("experiment", f"cannot write it to TOML: {exc}") from None


def _toml_ready(table: Mapping, *, top: bool = False) -> dict:
    """``table`` without None values and, below the top level, without empty sub-tables."""
    out = {}
    for key, x in table.items():
        if isinstance(x, Mapping):
            x = _toml_ready(x)
            if not x and not top:
                continue
        elif isinstance(x, (list, tuple)) and x and all(isinstance(i, Mapping) for i in x):
            x = [_toml_ready(i) for i in x]
        elif x is None:
            continue
        out[key] = x
    return out


def read_toml(path) -> dict:
    """A TOML file as a document (CosimInputError for a missing, unreadable or malformed file)."""

    path = Path(path)
    if not path.is_file():
        raise CosimInputError(str(path), "no such experiment file", "pass a TOML file or a name from 'cosim run --list'")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CosimInputError(str(path), f"malformed TOML: {exc}") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise CosimInputError(str(path), f"cannot read it ({type(exc).__name__})") from None


def field_kind(path: str) -> v.Kind:
    """The value kind of document field ``path`` (``network.link_gbps``, ``workload.iterations``, ``seed``)."""
    parts = resolve_path(path)
    if parts[:2] == ["network", "attributes"] or parts[1:2] in (["model_overrides"], ["parallelism"]):
        return v.Kind()
    if len(parts) == 1:
        return v.field_kind(Experiment, parts[0])
    if parts[0] == "workload":
        for cls in _WORKLOADS.values():
            if parts[1] in {f.name for f in dataclasses.fields(cls)}:
                return v.field_kind(cls, parts[1])
        if parts[1] == "kind":
            return v.Choice(WORKLOAD_KINDS)
        raise CosimInputError(path, "not a workload field")
    cls = _SECTIONS[parts[0]]
    if parts[1] not in {f.name for f in dataclasses.fields(cls)}:
        raise CosimInputError(path, f"not a {parts[0]} field")
    return v.field_kind(cls, parts[1])


def make(kind: str = "flows", **fields) -> Experiment:
    """One Experiment of workload ``kind`` from shorthand or dotted fields, e.g.
    ``make("flows", hosts=4, flow_bytes=200_000, dcqcn=False, transport="ib")`` or
    ``make("training", trace="t.h5", iterations=2, **{"network.spines": 4})``."""
    exps = from_document(with_overrides({"workload": {"kind": kind}}, fields))
    if len(exps) != 1:
        raise CosimInputError("network.transport", "\"both\" makes two experiments", "use from_document")
    return exps[0]
