"""The workload specs of an Experiment: flow patterns, training, inference, background traffic, and the
``[[workloads]]`` job that places any of them on a shared fabric."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from cosim import values as v
from cosim.collectives.lower import ALGORITHM_NAMES
from cosim.errors import CosimInputError
from cosim.network.transport import TRANSPORT_GROUPS, TRANSPORTS
from cosim.workload.builder import build_trace
from cosim.workload.deepep import KERNEL_OF_MOE_KERNEL
from cosim.workload.hardware import get_hardware
from cosim.workload.inference.dpep import OVERLAPS as EP_OVERLAPS
from cosim.workload.inference.dpep import PLACEMENTS as EP_PLACEMENTS
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec

#: a document's transport may also be "both" (roce and ib) or "all": one Experiment per transport
TRANSPORT_CHOICES = (*TRANSPORTS, *TRANSPORT_GROUPS)
#: GPU preset of a generated training trace when the workload names none
DEFAULT_GPU = "h100"
PATTERNS = ("incast", "permutation")
WORKLOAD_KINDS = ("flows", "training", "inference")
#: kinds a workload of ``[[workloads]]`` may have: flows, training and background traffic
JOB_KINDS = ("flows", "training", "inference", "storage", "checkpoint", "synthetic")
#: placement policies of a [[workloads]] job without hosts (cosim.runs.placement implements them)
PLACEMENTS = ("packed", "spread", "random", "fragmented")
#: built-in flow-size distributions of synthetic traffic (cosim.runs.background.DISTRIBUTIONS)
DISTRIBUTION_NAMES = ("web-search", "data-mining")
#: workload.flow_blocks: calls across servers as BLOCK ops always, never, or where the DAG needs it
FLOW_BLOCKS = ("auto", "on", "off")


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
    --list-models``) with ``model_overrides`` (ModelSpec fields), ``parallelism`` (ParallelismSpec fields),
    ``gpu`` (a hardware preset, h100 when not given) and ``hardware_overrides`` (HardwareSpec fields)
    generate it, deterministically; a trace file carries the GPU it was generated for, so ``gpu`` is left
    unset with it. ``iterations`` are chained; the first warms the fabric up.
    """

    kind = "training"
    trace: str | None = v.spec_field(v.Optional(v.Text(nonempty=True, path=True)), None, "cosim trace file")
    model: str | None = v.spec_field(v.Optional(v.Text(nonempty=True)), None, "model preset to generate from")
    model_overrides: tuple[tuple[str, object], ...] = v.spec_field(v.Kind(), (), "ModelSpec fields")
    parallelism: tuple[tuple[str, object], ...] = v.spec_field(v.Kind(), (), "ParallelismSpec fields")
    gpu: str | None = v.spec_field(v.Optional(v.Text(nonempty=True)), None,
                                   "GPU preset of a generated trace [h100]; a trace file carries its own")
    hardware_overrides: tuple[tuple[str, object], ...] = v.spec_field(v.Kind(), (), "HardwareSpec fields")
    iterations: int = v.spec_field(v.Int(minimum=1, maximum=10_000), 1, "training iterations to chain")
    chunk_bytes: int = v.spec_field(v.Size(minimum=1), 4 << 20, "largest flow a transfer is split into, bytes")
    algorithm: str = v.spec_field(v.Choice(ALGORITHM_NAMES), "auto", "collective algorithm")
    nvlink_blocks: bool = v.spec_field(v.Bool(), True,
                                       "hold every collective call inside one server as one BLOCK op the executor "
                                       "expands as it runs (the same results, a DAG many times smaller); off: "
                                       "one NVLINK op per copy")
    flow_blocks: str = v.spec_field(v.Choice(FLOW_BLOCKS), "auto",
                                     "with nvlink_blocks, hold every collective call across servers as one BLOCK "
                                     "op too, its flows started by the executor as it runs (the same results, a "
                                     "DAG that no longer grows with the chunks of data-parallel calls): on, off, "
                                     "or auto (on only for a job whose DAG could not be planned otherwise)")

    def __post_init__(self) -> None:
        v.check_fields(self, "workload")
        for name in ("model_overrides", "parallelism", "hardware_overrides"):
            object.__setattr__(self, name, _pairs(f"workload.{name}", getattr(self, name)))
        if self.trace is not None and self.model is not None:
            raise CosimInputError("workload.trace", "give either a trace file or a model to generate one from",
                                  "remove workload.model or workload.trace")
        given = [n for n in ("model_overrides", "parallelism", "hardware_overrides") if getattr(self, n)]
        if self.trace is not None and given:
            raise CosimInputError(f"workload.{given[0]}", "applies to a generated trace, not to a trace file",
                                  "remove it, or give workload.model instead of workload.trace")
        if self.trace is not None and self.gpu is not None:
            raise CosimInputError("workload.gpu", "applies to a generated trace; a trace file carries the GPU it "
                                  "was generated for", "remove workload.gpu, or regenerate the trace with cosim "
                                  "trace --gpu")

    def generation_specs(self, gpus_per_server: int | None):
        """(ModelSpec, ParallelismSpec, HardwareSpec) this workload generates its trace from (None for a trace
        file or an in-memory trace)."""
        if self.model is None:
            return None
        hardware = {} if gpus_per_server is None else {"gpus_per_host": gpus_per_server}
        try:
            parallelism = ParallelismSpec(**dict(self.parallelism))
        except TypeError as exc:
            raise CosimInputError("workload.parallelism", str(exc).split(")")[-1].strip() or str(exc),
                                  "see ParallelismSpec for the fields") from None
        try:
            hw = get_hardware(self.gpu or DEFAULT_GPU, **(hardware | dict(self.hardware_overrides)))
        except CosimInputError as exc:
            field = "workload.gpu" if exc.field == "hardware" else exc.field.replace(
                "hardware.", "workload.hardware_overrides.", 1)
            raise CosimInputError(field, exc.problem, exc.fix) from None
        return get_model(self.model, **dict(self.model_overrides)), parallelism, hw

    def generate_trace(self, gpus_per_server: int | None):
        """The Trace this workload generates from its model (None for a trace file or an in-memory trace)."""
        specs = self.generation_specs(gpus_per_server)
        return None if specs is None else build_trace(*specs)


KV_TRANSFER_MODES = ("layer", "whole")
#: DeepEP kernels of a serving replica whose experts spread over its GPUs (cosim.workload.inference.dpep)
EP_MOE_KERNELS = tuple(KERNEL_OF_MOE_KERNEL)
EP_DISPATCH_DTYPES = ("fp8", "bf16")
#: longest mean arrival span of Poisson requests, s: a tenth of the simulator's clock (9.2e15 ns), so that
#: the last arrival and the service after it fit whatever the draw
MAX_ARRIVAL_SPAN_S = 9.2e5
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
                                   "(1, prefill_tp, or with tp = pp = 1 the replica's GPUs, attention data-parallel)")
    decode_tp: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "tensor parallelism of a decode replica")
    decode_pp: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "pipeline stages of a decode replica")
    decode_ep: int = v.spec_field(v.Int(minimum=1, maximum=1024), 1, "expert parallelism of a decode replica "
                                  "(1, decode_tp, or with tp = pp = 1 the replica's GPUs, attention data-parallel)")
    prefill_moe_kernel: str = v.spec_field(v.Choice(EP_MOE_KERNELS), "deepep-high-throughput",
                                           "DeepEP kernel of a prefill replica's EP dispatch and combine (ep > tp)")
    decode_moe_kernel: str = v.spec_field(v.Choice(EP_MOE_KERNELS), "deepep-low-latency",
                                          "DeepEP kernel of a decode replica's EP dispatch and combine (ep > tp)")
    moe_dispatch_dtype: str = v.spec_field(v.Choice(EP_DISPATCH_DTYPES), "fp8",
                                           "EP dispatch payload (ep > tp; the combine is bf16)")
    redundant_experts: int = v.spec_field(v.Int(minimum=0, maximum=1 << 16), 0,
                                          "routed-expert copies beside the model's experts (ep > tp)")
    expert_placement: str = v.spec_field(v.Choice(EP_PLACEMENTS), "extra_slots",
                                         "what redundant slots hold: extra_slots (routed to as more experts) or "
                                         "hot_copies (EPLB: copies of the hottest experts, tokens split over them)")
    node_limited_routing: bool = v.spec_field(v.Bool(), False,
                                              "route each token to experts on at most the model's "
                                              "max_routed_nodes servers of its unit (ep > tp)")
    eplb_interval_steps: int = v.spec_field(v.Int(minimum=0, maximum=1 << 20), 0,
                                            "hot copies placed again every this many steps of a side from the "
                                            "load of the last that many (EPLB); 0: placed once")
    routing_drift_steps: int = v.spec_field(v.Int(minimum=0, maximum=1 << 20), 0,
                                            "every this many steps of a side the router's expert popularities "
                                            "are dealt out again (Zipf order re-drawn, load vector permuted); 0: fixed")
    moe_overlap: str = v.spec_field(v.Choice(EP_OVERLAPS), "none",
                                    "two_microbatch: MoE layers as two halves overlapping their dispatch and "
                                    "combine with the other half's compute (ep > tp)")
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
                              getattr(self, f"{side}_ep"), f"workload.{side}",
                              redundant_experts=self.redundant_experts)
        spread = self.prefill_ep > self.prefill_tp or self.decode_ep > self.decode_tp
        if self.redundant_experts and not spread:
            raise CosimInputError("workload.redundant_experts", "redundant experts need a replica whose experts "
                                  "spread over its GPUs (ep > tp)", "set redundant_experts = 0, or raise an ep")
        for field, default, shown in (("expert_placement", "extra_slots", '"extra_slots"'),
                                      ("moe_overlap", "none", '"none"'), ("node_limited_routing", False, "false"),
                                      ("eplb_interval_steps", 0, "0"), ("routing_drift_steps", 0, "0")):
            if getattr(self, field) != default and not spread:
                raise CosimInputError(f"workload.{field}", "needs a replica whose experts spread over its GPUs "
                                      "(ep > tp)", f"set {field} = {shown}, or raise an ep")
        if self.node_limited_routing:
            if not model.spec.max_routed_nodes:
                raise CosimInputError("workload.node_limited_routing", f"{model.spec.name} has no node limit",
                                      "set model_overrides.max_routed_nodes, or node_limited_routing = false")
        for field in ("eplb_interval_steps", "routing_drift_steps"):
            if getattr(self, field) and self.expert_placement != "hot_copies":
                raise CosimInputError(f"workload.{field}", "moves hot copies; expert_placement = "
                                      f"\"{self.expert_placement}\" routes to extra slots, a new popularity every step",
                                      f"set expert_placement = \"hot_copies\", or {field} = 0")
        if self.routing_drift_steps and model.spec.routing_distribution == "uniform":
            raise CosimInputError("workload.routing_drift_steps", "a uniform router has no popularity to drift",
                                  "set model_overrides.routing_distribution = \"zipf\" or \"vector\", or "
                                  "routing_drift_steps = 0")
        if self.moe_overlap != "none" and self.decode_ep > self.decode_tp \
                and self.max_decode_batch < 2 * self.decode_ep:
            raise CosimInputError("workload.moe_overlap", f"a decode step of at most {self.max_decode_batch} "
                                  f"sequences over {self.decode_ep} GPUs cannot give every GPU two micro-batches",
                                  f"raise max_decode_batch to at least {2 * self.decode_ep}, or set moe_overlap "
                                  "= \"none\"")
        try:
            get_hardware(self.gpu)
        except CosimInputError as exc:
            raise CosimInputError("workload.gpu", exc.problem, exc.fix) from None
        if self.request_trace is None:
            from cosim.workload.inference.requests import POISSON_REQUESTS  # noqa: PLC0415

            span_s = (self.requests or POISSON_REQUESTS) / self.rate_per_s
            if span_s > MAX_ARRIVAL_SPAN_S:
                raise CosimInputError("workload.rate_per_s", f"{self.requests or POISSON_REQUESTS} requests at "
                                      f"{self.rate_per_s:g}/s arrive over about {span_s:.3g} s, more than the "
                                      f"{MAX_ARRIVAL_SPAN_S:g} s a run can simulate",
                                      "raise rate_per_s, or give fewer requests")

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
    out = []
    for k, x in pairs:
        if isinstance(x, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in x):
            x = tuple(x)  # a list of counts, e.g. parallelism.pipeline_layers
        elif isinstance(x, (dict, list, tuple)) or (isinstance(x, float) and not math.isfinite(x)):
            raise CosimInputError(f"{where}.{k}", f"must be a single finite value or a list of integers, got {x!r}")
        out.append((k, x))
    return tuple(out)


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
    LosslessPriorityMask; InfiniBand lanes and cbfc links are lossless by construction). ``alone`` also
    simulates the job alone on the idle fabric, on the same hosts, for its slowdown from sharing.
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


#: the workload kinds of one ``[workload]`` table -> their spec classes
WORKLOAD_SPECS = {"flows": FlowWorkload, "training": TrainingWorkload, "inference": InferenceWorkload}
