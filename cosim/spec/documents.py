"""Documents: TOML tables in, Experiments out (:func:`from_document`, ``[[variants]]``, ``transport =
"both"``), and back (:func:`to_document`, :func:`to_toml`), so that a stored run reproduces bit for bit."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path

from cosim import faults as cosim_faults
from cosim import values as v
from cosim.errors import CosimInputError
from cosim.network.link_layer import LINK_LAYER_FIELDS
from cosim.network.spec import UNUSED_CONGESTION_FIELDS, NetworkSpec
from cosim.network.transport import TRANSPORT_GROUPS
from cosim.spec.experiment import FAULTS_KEY, SECTIONS, TOP_KEYS, Experiment
from cosim.spec.overrides import resolve_path, with_overrides
from cosim.spec.workloads import (
    BACKGROUND,
    JOB_KINDS,
    TRANSPORT_CHOICES,
    WORKLOAD_KINDS,
    WORKLOAD_SPECS,
    Job,
)

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
        if key not in TOP_KEYS and key not in SECTIONS and key not in ("workload", "workloads", FAULTS_KEY):
            raise CosimInputError(key, "unknown key", f"valid keys: {', '.join(TOP_KEYS)}, sections workload "
                                  f"(or [[workloads]]), {', '.join(SECTIONS)}, [[{FAULTS_KEY}]] and [[{_VARIANTS}]]")
    if "workload" in doc and "workloads" in doc:
        raise CosimInputError("workloads", "give either one [workload] or a list of [[workloads]], not both",
                              "move the [workload] table into [[workloads]]")
    jobs = _jobs_from_list(doc["workloads"]) if "workloads" in doc else ()
    workload = _table(doc, "workload")
    kind = workload.get("kind", "flows")
    if not isinstance(kind, str) or kind not in WORKLOAD_SPECS:
        raise CosimInputError("workload.kind", f"unknown workload kind {kind!r}",
                              f"choose one of {', '.join(WORKLOAD_KINDS)}"
                              + (" (background kinds go in [[workloads]])" if kind in BACKGROUND else ""))
    work = _spec_from_table(WORKLOAD_SPECS[kind], workload, "workload", skip=("kind",))
    network = _table(doc, "network")
    transport = network.get("transport", "roce")
    if not isinstance(transport, str) or transport not in TRANSPORT_CHOICES:
        raise CosimInputError("network.transport", f"unknown value {transport!r}",
                              f"choose one of {', '.join(TRANSPORT_CHOICES)}")
    transports = TRANSPORT_GROUPS.get(transport, (transport,))
    sections = {s: _spec_from_table(cls, _table(doc, s), s) for s, cls in SECTIONS.items() if s != "network"}
    name = doc.get("name")
    top = {k: doc[k] for k in ("description", "seed", "baseline") if k in doc}
    if FAULTS_KEY in doc:
        top["faults"] = cosim_faults.faults_from_list(doc[FAULTS_KEY])
    out = []
    for t in transports:
        table = network | {"transport": t}
        if t == "ib" and len(transports) > 1:  # a group's InfiniBand run keeps its own link layer
            table = {k: x for k, x in table.items() if k not in LINK_LAYER_FIELDS}
        net = _spec_from_table(NetworkSpec, table, "network")
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
        cls = WORKLOAD_SPECS.get(kind) or BACKGROUND[kind]
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
    """The resolved document of ``exp`` (JSON- and TOML-able; attributes as a table), without the network
    fields of the other transport."""
    def table(spec) -> dict:
        d = {}
        for f in dataclasses.fields(spec):
            x = getattr(spec, f.name)
            if f.name in ("attributes", "model_overrides", "parallelism", "hardware_overrides"):
                x = dict(x)
            d[f.name] = x
        return d

    network = {k: x for k, x in table(exp.network).items() if k not in UNUSED_CONGESTION_FIELDS[exp.network.transport]}
    doc = {"name": exp.name, "description": exp.description, "seed": exp.seed, "network": network}
    if exp.workloads:
        doc["workloads"] = [_job_document(j, table) for j in exp.workloads]
    else:
        doc["workload"] = {"kind": exp.workload.kind, **table(exp.workload)}
    doc |= {"telemetry": table(exp.telemetry), "limits": table(exp.limits)}
    if exp.faults:
        doc["baseline"] = exp.baseline
        doc[FAULTS_KEY] = [cosim_faults.fault_to_table(f) for f in exp.faults]
    return doc


def _job_document(job: Job, table) -> dict:
    """One ``[[workloads]]`` table: the job's fields, its kind, then its workload's fields."""
    d = {k: getattr(job, k) for k in _JOB_FIELDS}
    d = {k: (list(x) if isinstance(x, tuple) else x) for k, x in d.items()}
    work = {k: (list(x) if isinstance(x, tuple) else x) for k, x in table(job.work).items()}
    return {"name": d.pop("name"), "kind": job.kind, **d, **work}


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


def make(kind: str = "flows", **fields) -> Experiment:
    """One Experiment of workload ``kind`` from shorthand or dotted fields, e.g.
    ``make("flows", hosts=4, flow_bytes=200_000, dcqcn=False, transport="ib")`` or
    ``make("training", trace="t.h5", iterations=2, **{"network.spines": 4})``."""
    exps = from_document(with_overrides({"workload": {"kind": kind}}, fields))
    if len(exps) != 1:
        raise CosimInputError("network.transport", f"{fields.get('transport')!r} makes {len(exps)} experiments",
                              "use from_document")
    return exps[0]
