"""The Experiment: one spec for every run (a network, a workload, telemetry, limits and a seed).

An Experiment comes from a TOML document (a file, a named experiment shipped with cosim, or the one stored in
a results file), from CLI flags, from a sweep point or from Python; all go through :func:`from_document`
and the field kinds of :mod:`cosim.values`, so a value is checked the same way wherever it came from.
A document looks like::

    name = "incast"                 # optional: the run name (default: the pattern, or the transport)
    description = "..."
    seed = 1
    [network]                       # cosim.network.spec.NetworkSpec
    topology = "single-switch"
    transport = "roce"              # roce | ib | both (both: one Experiment per transport)
    hosts = 8
    [network.attributes]
    "SharedBufferMmu::BufferBytes" = 4000000
    [workload]
    kind = "flows"                  # flows | training
    pattern = "incast"
    flow_bytes = "1MiB"
    [telemetry]
    queue_sample_interval_ns = 1000
    [limits]
    max_sim_time_ns = 1e9

``transport = "both"`` expands into two Experiments named ``<name>-roce`` and ``<name>-ib`` (``roce`` and
``ib`` without a name). A ``[[variants]]`` array of tables expands a document into one Experiment per
variant, named ``<name>-<variant name>``: each variant is a ``name`` and the fields it sets on the rest of
the document (shorthands or dotted paths, as ``cosim run`` options and sweep points take them)::

    [[variants]]
    name = "pfc-only"
    dcqcn = false
    admission = true :func:`to_document` gives the resolved document of one Experiment (every default
filled in), which :func:`to_toml` writes so that running it reproduces the run bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cosim import values as v
from cosim.collectives.lower import ALGORITHM_NAMES
from cosim.errors import CosimInputError
from cosim.network.spec import NetworkSpec
from cosim.network.transport import TRANSPORTS
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec

#: a document's transport may also be "both": one Experiment per transport
TRANSPORT_CHOICES = (*TRANSPORTS, "both")
PATTERNS = ("incast", "permutation")
WORKLOAD_KINDS = ("flows", "training")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySpec:
    """What the run records besides its tables."""

    queue_sample_interval_ns: float = v.spec_field(v.Real(minimum=1.0, maximum=1e12), 1000.0,
                                                   "egress queue sampling interval, ns")

    def __post_init__(self) -> None:
        v.check_fields(self, "telemetry")


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsSpec:
    """When a run stops although work remains (None: the workload's default)."""

    max_sim_time_ns: float | None = v.spec_field(v.Optional(v.Real(positive=True, maximum=9.2e18 / 1e3)), None,
                                                 "stop at this simulated time, ns (flows: 1e9, training: 1e11)")

    def __post_init__(self) -> None:
        v.check_fields(self, "limits")


#: a workload's defaults for the fields it leaves open
_WORKLOAD_DEFAULTS = {
    "flows": {"topology": "single-switch", "max_sim_time_ns": 1e9},
    "training": {"topology": "rail-optimized", "max_sim_time_ns": 1e11},
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """One run: a network, a workload on it, what to record, when to stop, and the seed of every random
    choice. Construction resolves the workload's defaults (topology, time limit, run name)."""

    name: str | None = v.spec_field(v.Optional(v.RunName()), None, "run name inside the results file")
    description: str = v.spec_field(v.Text(), "", "what the experiment shows")
    network: NetworkSpec = dataclasses.field(default_factory=NetworkSpec)
    workload: FlowWorkload | TrainingWorkload = dataclasses.field(default_factory=FlowWorkload)
    telemetry: TelemetrySpec = dataclasses.field(default_factory=TelemetrySpec)
    limits: LimitsSpec = dataclasses.field(default_factory=LimitsSpec)
    seed: int = v.spec_field(v.Int(minimum=0, maximum=2**63 - 1), 1, "seed of every random choice (ECMP, RNG)")

    def __post_init__(self) -> None:
        v.check_fields(self, "")
        for name, cls in (("network", NetworkSpec), ("workload", (FlowWorkload, TrainingWorkload)),
                          ("telemetry", TelemetrySpec), ("limits", LimitsSpec)):
            if not isinstance(getattr(self, name), cls):
                raise CosimInputError(name, f"must be a {getattr(cls, '__name__', 'workload spec')}")
        defaults = _WORKLOAD_DEFAULTS[self.workload.kind]
        if self.network.topology is None:
            object.__setattr__(self, "network", dataclasses.replace(self.network, topology=defaults["topology"]))
        if self.limits.max_sim_time_ns is None:
            object.__setattr__(self, "limits", LimitsSpec(max_sim_time_ns=defaults["max_sim_time_ns"]))
        if self.is_training:
            if self.network.hosts is not None:
                raise CosimInputError("network.hosts", "a training run sizes its fabric to the trace's ranks",
                                      "remove it (or set network.gpus_per_server)")
        else:
            if self.network.hosts is None:
                object.__setattr__(self, "network", dataclasses.replace(self.network, hosts=8))
        if self.name is None:
            object.__setattr__(self, "name", self.workload.pattern if not self.is_training
                               else self.network.transport)

    @property
    def is_training(self) -> bool:
        """True for a co-simulated training workload, False for flow-level traffic."""
        return self.workload.kind == "training"


# ---------------------------------------------------------------- documents

_SECTIONS = {"network": NetworkSpec, "telemetry": TelemetrySpec, "limits": LimitsSpec}
_WORKLOADS = {"flows": FlowWorkload, "training": TrainingWorkload}
_TOP = ("name", "description", "seed")
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
        if key not in _TOP and key not in _SECTIONS and key != "workload":
            raise CosimInputError(key, "unknown key",
                                  f"valid keys: {', '.join(_TOP)}, sections workload, {', '.join(_SECTIONS)} "
                                  f"and [[{_VARIANTS}]]")
    workload = _table(doc, "workload")
    kind = workload.get("kind", "flows")
    if not isinstance(kind, str) or kind not in _WORKLOADS:
        raise CosimInputError("workload.kind", f"unknown workload kind {kind!r}",
                              f"choose one of {', '.join(WORKLOAD_KINDS)}")
    work = _spec_from_table(_WORKLOADS[kind], workload, "workload", skip=("kind",))
    network = _table(doc, "network")
    transport = network.get("transport", "roce")
    if not isinstance(transport, str) or transport not in TRANSPORT_CHOICES:
        raise CosimInputError("network.transport", f"unknown value {transport!r}",
                              f"choose one of {', '.join(TRANSPORT_CHOICES)}")
    transports = TRANSPORTS if transport == "both" else (transport,)
    sections = {s: _spec_from_table(cls, _table(doc, s), s) for s, cls in _SECTIONS.items() if s != "network"}
    name = doc.get("name")
    top = {k: doc[k] for k in ("description", "seed") if k in doc}
    out = []
    for t in transports:
        net = _spec_from_table(NetworkSpec, network | {"transport": t}, "network")
        run_name = (f"{name}-{t}" if name else t) if len(transports) > 1 else name
        out.append(Experiment(name=run_name, network=net, workload=work, **sections, **top))
    return out


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

    doc = {"name": exp.name, "description": exp.description, "seed": exp.seed,
           "network": table(exp.network), "workload": {"kind": exp.workload.kind, **table(exp.workload)},
           "telemetry": table(exp.telemetry), "limits": table(exp.limits)}
    return doc


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
    "ecn_marking": "network.ecn_marking",
    "pattern": "workload.pattern", "flow_bytes": "workload.flow_bytes", "trace": "workload.trace",
    "iterations": "workload.iterations", "chunk_bytes": "workload.chunk_bytes",
    "algorithm": "workload.algorithm", "queue_sample_interval_ns": "telemetry.queue_sample_interval_ns",
    "max_sim_time_ns": "limits.max_sim_time_ns", "seed": "seed", "name": "name", "description": "description",
}


def resolve_path(key: str) -> list[str]:
    """A shorthand (``hosts``), a dotted path (``network.link_gbps``) or an attribute key
    (``attributes.Type::Attribute``) → the path of document keys it sets."""
    if key.startswith("attributes."):
        return ["network", "attributes", key.removeprefix("attributes.")]
    if key.startswith("network.attributes."):
        return ["network", "attributes", key.removeprefix("network.attributes.")]
    path = SHORTHANDS.get(key, key).split(".")
    ok = (len(path) == 1 and path[0] in _TOP) or (len(path) == 2 and path[0] in (*_SECTIONS, "workload")) or (
        len(path) == 3 and path[0] == "workload" and path[1] in ("model_overrides", "parallelism"))
    if not ok:
        raise CosimInputError(key, "not an experiment field",
                              "use a section path like network.link_gbps or workload.iterations, "
                              f"or one of {', '.join(SHORTHANDS)}")
    return path


def with_overrides(doc: Mapping, overrides: Mapping[str, object]) -> dict:
    """A copy of ``doc`` with ``overrides`` (key → value, keys as :func:`resolve_path` reads them) set.

    Giving a trace file replaces a generated trace's model fields; a workload with a trace or a model and
    no kind is a training workload. A field the workload's kind does not have is an error when the
    document is read, never dropped.
    """
    out = {k: (dict(x) if isinstance(x, Mapping) else x) for k, x in doc.items()}
    for key, value in overrides.items():
        path = resolve_path(key)
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
    """A document as TOML text (scalars at the top, then one table per section; None values left out)."""
    lines = [f"{k} = {_toml_value(x)}" for k, x in doc.items() if not isinstance(x, Mapping) and x is not None]
    for section, table in doc.items():
        if isinstance(table, Mapping):
            _toml_table(lines, section, table)
    return "\n".join(lines) + "\n"


def _toml_table(lines: list[str], name: str, table: Mapping) -> None:
    lines += ["", f"[{name}]"]
    lines += [f"{_toml_key(k)} = {_toml_value(x)}" for k, x in table.items()
              if not isinstance(x, Mapping) and x is not None]
    for k, x in table.items():
        if isinstance(x, Mapping) and x:
            _toml_table(lines, f"{name}.{k}", x)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _toml_value(key)


def _toml_value(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))
    if isinstance(x, str):
        return '"' + x.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    raise CosimInputError("experiment", f"cannot write {x!r} to TOML")


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
