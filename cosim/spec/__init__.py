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
    transport = "roce"              # roce | ib | uec | both | all (both: roce and ib; all: the three)
    hosts = 8
    [network.attributes]
    "SharedBufferMmu::BufferBytes" = 4000000
    [workload]
    kind = "flows"                  # flows | training | inference
    pattern = "incast"
    flow_bytes = "1MiB"
    [telemetry]
    queue_sample_interval_ns = 1000
    op_table = "all"                # all | collectives | none: rows of a training run's ops table kept
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
``ib`` without a name); ``transport = "all"`` into three, with ``<name>-uec``. A ``[[variants]]`` array of tables expands a document into one Experiment per
variant, named ``<name>-<variant name>``: each variant is a ``name`` and the fields it sets on the rest of
the document (shorthands or dotted paths, as ``cosim run`` options and sweep points take them)::

    [[variants]]
    name = "pfc-only"
    dcqcn = false
    admission = true

:func:`to_document` gives the resolved document of one Experiment (every default
filled in), which :func:`to_toml` writes so that running it reproduces the run bit for bit.
"""

from cosim.spec.documents import from_document, make, read_toml, to_document, to_toml
from cosim.spec.experiment import (
                                  FAULTS_KEY,
                                  SECTIONS,
                                  TOP_KEYS,
                                  Experiment,
                                  LimitsSpec,
                                  TelemetrySpec,
)
from cosim.spec.overrides import SHORTHANDS, field_kind, resolve_path, with_overrides
from cosim.spec.workloads import (
                                  BACKGROUND,
                                  DISTRIBUTION_NAMES,
                                  JOB_KINDS,
                                  PATTERNS,
                                  PLACEMENTS,
                                  TRANSPORT_CHOICES,
                                  WORKLOAD_KINDS,
                                  WORKLOAD_SPECS,
                                  CheckpointWorkload,
                                  FlowWorkload,
                                  InferenceWorkload,
                                  Job,
                                  StorageWorkload,
                                  SyntheticWorkload,
                                  TrainingWorkload,
)

__all__ = ["BACKGROUND", "DISTRIBUTION_NAMES", "FAULTS_KEY", "JOB_KINDS", "PATTERNS", "PLACEMENTS", "SECTIONS",
           "SHORTHANDS", "TOP_KEYS", "TRANSPORT_CHOICES", "WORKLOAD_KINDS", "WORKLOAD_SPECS", "CheckpointWorkload",
           "Experiment", "FlowWorkload", "InferenceWorkload", "Job", "LimitsSpec", "StorageWorkload",
           "SyntheticWorkload", "TelemetrySpec", "TrainingWorkload", "field_kind", "from_document", "make",
           "read_toml", "resolve_path", "to_document", "to_toml", "with_overrides"]
