"""The Experiment: a network, its workload(s), telemetry, limits, faults and a seed, checked on construction
(cosim.spec's docstring shows the document it is read from)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cosim import faults as cosim_faults
from cosim import values as v
from cosim.errors import CosimInputError
from cosim.network import buffers
from cosim.network.link_layer import check_link_layer_faults
from cosim.network.spec import NetworkSpec
from cosim.network.transport import qualify_attribute
from cosim.spec.workloads import FlowWorkload, InferenceWorkload, Job, TrainingWorkload

#: telemetry.op_table: which rows of a training run's ops table its results file stores
OP_TABLE_CHOICES = ("all", "collectives", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySpec:
    """What the run records: how often queues are sampled, which rows of the per-op table are kept."""

    queue_sample_interval_ns: float = v.spec_field(v.Real(minimum=1.0, maximum=1e12), 1000.0,
                                                   "egress queue sampling interval, ns")
    op_table: str = v.spec_field(v.Choice(OP_TABLE_CHOICES), "all",
                                 "training: rows of the ops table (one per trace op per iteration) the results "
                                 "file stores: all; collectives, only the ops that move bytes (collective, send, "
                                 "recv), not compute; none, no ops table. The summary is computed from every op "
                                 "either way")

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
    fast_forward: bool = v.spec_field(v.Bool(), False,
                                      "approximate: fast-forward flows whose rates, queues and flow control are "
                                      "steady, crediting them their rate times the span "
                                      "(docs/models/fast-forward.md); off: every packet is simulated")
    fast_forward_tolerance: float = v.spec_field(v.Real(minimum=1e-4, maximum=0.2), 0.01,
                                                 "fast-forward: largest relative change of a flow's rate (and of "
                                                 "its congestion-control rate) over the stability window for it to "
                                                 "count as steady, dimensionless (0.01 = 1 %)")
    fast_forward_check: bool = v.spec_field(v.Bool(), False,
                                            "fast-forward: also run the experiment exactly and store the "
                                            "relative differences of flow, collective and iteration times in "
                                            "the summary (twice the run time)")
    partitions: int = v.spec_field(v.Int(minimum=1, maximum=4096), 1,
                                   "conservative parallel simulation: the fabric and the workloads that do not "
                                   "depend on each other split into this many partitions, simulated in windows "
                                   "of the shortest cut link's delay, on as many MPI ranks as `mpiexec -n` starts "
                                   "(at most this many; the results depend on this number, never on the ranks; "
                                   "docs/parallel.md); 1: one undivided run")

    def __post_init__(self) -> None:
        v.check_fields(self, "limits")
        if self.fast_forward_check and not self.fast_forward:
            raise CosimInputError("limits.fast_forward_check", "compares a fast-forwarded run with the exact one, "
                                  "and fast-forward is off", "set limits.fast_forward = true too")


def _check_fast_forward(exp: "Experiment") -> None:
    """Refuse what fast-forward does not model: Ultra Ethernet's transport, faults, receiver-driven admission,
    telemetry congestion control."""
    if exp.network.transport == "uec":
        raise CosimInputError("limits.fast_forward", "is not supported on the uec transport (NSCC windows and "
                              "selective retransmission are not frozen)", "use roce or ib, or switch it off")
    if exp.faults:
        raise CosimInputError("limits.fast_forward", "is not supported with faults (a fault would have to end "
                              "every span it touches)", "drop the faults or switch fast-forward off")
    if exp.network.admission:
        raise CosimInputError("limits.fast_forward", "is not supported with network.admission (grants are not "
                              "credited)", "switch one of them off")
    if exp.network.telemetry_cc:
        raise CosimInputError("limits.fast_forward", "is not supported with network.telemetry_cc (its windows "
                              "follow every ACK's telemetry, which a frozen span does not carry)",
                              "switch one of them off")


def _check_partitions(exp: "Experiment") -> None:
    """Refuse what a partitioned run does not model: faults (a link's state changes on both sides at once),
    fast-forward (its controller sees every flow), a collective watchdog (it stops every partition at once)."""
    if exp.faults:
        raise CosimInputError("limits.partitions", "is not supported with faults (a fault changes both ends of a "
                              "link at one instant)", "drop the faults or set limits.partitions = 1")
    if exp.limits.fast_forward:
        raise CosimInputError("limits.partitions", "is not supported with limits.fast_forward (its controller "
                              "watches every flow of the fabric)", "switch one of them off")
    if exp.limits.collective_timeout_ns > 0:
        raise CosimInputError("limits.partitions", "is not supported with limits.collective_timeout_ns (a failed "
                              "job stops every partition at once)", "set one of them to its default")


def _reserved_prefixes() -> frozenset[str]:
    """First words of the run summary's own keys: a workload named so would read as one of them."""
    from cosim.results.metrics import METRICS  # noqa: PLC0415

    return frozenset(m.key.split("_")[0] for m in METRICS) | {"deadlock", "n", "alone"}



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
        check_link_layer_faults(self.network, self.faults)
        if self.limits.fast_forward:
            _check_fast_forward(self)
        if self.limits.partitions > 1:
            _check_partitions(self)
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
                raise CosimInputError(f"workloads[{i}]", "must be a cosim.spec.Job")
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


#: the sections of a document, each a spec of its own
SECTIONS = {"network": NetworkSpec, "telemetry": TelemetrySpec, "limits": LimitsSpec}
#: the top-level scalar keys of a document
TOP_KEYS = ("name", "description", "seed", "baseline")
#: the key of a document's faults (a list of tables; cosim.faults)
FAULTS_KEY = "faults"
