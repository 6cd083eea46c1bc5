"""Sweep files: TOML → a validated list of points, each one Experiment with a deterministic file name.

    [sweep]
    name = "ecn"                       # optional; default: the TOML file's stem
    experiment = "builtin"             # optional base: a shipped experiment or a TOML file (relative to
                                       # this file); default: a flow experiment with cosim's defaults
    [base]                             # fields set on every point: shorthands (hosts, dcqcn, flow_bytes,
    hosts = 8                          # iterations, ... as `cosim run` options), dotted paths
    flow_bytes = "1MiB"                # ("network.link_gbps") or section tables ([base.network])
    [base.attributes]                  # ns-3 attributes shared by every point
    "SharedBufferMmu::BufferBytes" = 4000000
    [grid]                             # cartesian product, last key varies fastest
    dcqcn = [true, false]
    "workload.iterations" = [1, 2]
    attributes."FabricSwitch::EcnKminBytes" = [20000, 100000]
    [[points]]                         # optional explicit points, after the grid ones
    hosts = 16
    name = "big"                       # optional run name

Any Experiment field can be swept, training ones included (trace, iterations, chunk size, algorithm,
transport, topology, buffers, attributes). A point runs one transport. A point's file is
``<sweep>-<index:04d>-<hash8>.h5``; the hash covers its run name, its base experiment and its fields, so the
name is stable across machines.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cosim import engine, values
from cosim.errors import CosimInputError
from cosim.network.transport import inert_attributes
from cosim.plan import compile  # noqa: A004 - the plan's verb
from cosim.spec import catalog, from_document, resolve_path, to_document, with_overrides

MAX_POINTS = 100_000
SECTIONS = ("sweep", "base", "grid", "points")
SWEEP_KEYS = ("name", "description", "experiment")
MANIFEST_SCHEMA = "cosim.sweep"
MANIFEST_SUFFIX = ".sweep.json"


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One point of a sweep: its index, run name, varied parameters and the fields it sets on the base."""

    index: int
    run_name: str
    params: dict  # the varied parameters, e.g. {"dcqcn": False, "attributes.FabricSwitch::EcnKminBytes": "20000"}
    fields: dict  # every field the point sets on the base experiment (base merged with its parameters)
    base: dict  # the base experiment document
    digest: str  # 8 hex digits of the point's canonical JSON
    file_name: str  # <sweep>-<index:04d>-<digest>.h5

    def experiment(self):
        """The point's Experiment (validated on construction)."""
        exps = from_document(with_overrides(self.base, {**self.fields, "name": self.run_name}))
        if len(exps) != 1:
            raise CosimInputError("network.transport", 'a sweep point runs one transport, not "both" or "all"',
                                  'sweep it instead: transport = ["roce", "ib", "uec"] in [grid]')
        return exps[0]

    def to_json(self) -> dict:
        """The point as a JSON-able dict (as stored in the sweep manifest)."""
        return {"index": self.index, "file": self.file_name, "run": self.run_name, "params": self.params,
                "fields": self.fields}


@dataclass(frozen=True, slots=True)
class Sweep:
    """A named, expanded sweep."""

    name: str
    source: str
    points: tuple[SweepPoint, ...]
    #: one line per ns-3 attribute the sweep sets that has no effect on some of its points (their transport)
    warnings: tuple[str, ...] = ()

    def manifest(self) -> dict:
        """The sweep as JSON (deterministic: every shard writes the same bytes)."""
        return {"schema": MANIFEST_SCHEMA, "version": 1, "name": self.name,
                "points": [p.to_json() for p in self.points]}

    def manifest_name(self) -> str:
        """File name of the manifest inside the output directory."""
        return self.name + MANIFEST_SUFFIX


# ---------------------------------------------------------------- fields and values

_SECTIONS = ("network", "workload", "telemetry", "limits")


def _flatten(where: str, table) -> dict:
    """A [base] or [[points]] table → {field key: value}, keys as with_overrides reads them."""
    if not isinstance(table, dict):
        raise CosimInputError(where, "must be a table of experiment fields")
    out = _flat_keys(where, table)
    for key, value in out.items():
        _check_key(f"{where}.{key}", key)
        if key.startswith("attributes."):
            values.attribute_name(f"{where}.{key}", key.removeprefix("attributes."))
            out[key] = values.attribute_value(f"{where}.{key}", value)
        elif isinstance(value, (dict, list)):
            raise CosimInputError(f"{where}.{key}", f"expected a single value, got {value!r}")
    return out


def _check_key(where: str, key: str) -> None:
    try:
        resolve_path(key)
    except CosimInputError as exc:
        raise CosimInputError(where, "unknown experiment field", exc.fix) from None


def _grid_axes(where: str, table) -> list[tuple[str, list]]:
    """The [grid] table → [(key, values)] in file order; attribute axes as ``attributes.Name``."""
    if not isinstance(table, dict):
        raise CosimInputError(where, "must be a table of lists, e.g. hosts = [4, 8]")
    axes = []
    for key, vals in _flat_keys(where, table).items():
        if not isinstance(vals, list) or not vals:
            raise CosimInputError(f"{where}.{key}", f"must be a non-empty list of values, got {vals!r}",
                                  f"e.g. {key.split('.')[-1]} = [a, b]")
        _check_key(f"{where}.{key}", key)
        if key.startswith("attributes."):
            values.attribute_name(f"{where}.{key}", key.removeprefix("attributes."))
            vals = [values.attribute_value(f"{where}.{key}[{i}]", x) for i, x in enumerate(vals)]
        axes.append((key, vals))
    return axes


def _flat_keys(where: str, table: dict) -> dict:
    """Nested tables ([x.attributes], [x.network], [x.workload.parallelism]) → dotted keys, values as given."""
    out = {}
    for key, value in table.items():
        if key == "attributes" or (key in _SECTIONS and isinstance(value, dict)):
            if not isinstance(value, dict):
                raise CosimInputError(f"{where}.{key}", 'must be a table: "Type::Attribute" = value')
            prefix = "attributes." if key == "attributes" else f"{key}."
            for k, x in value.items():
                if prefix == "network." and k == "attributes" and isinstance(x, dict):
                    out |= {f"attributes.{a}": y for a, y in x.items()}
                elif prefix == "workload." and k in ("model_overrides", "parallelism", "hardware_overrides") \
                        and isinstance(x, dict):
                    out |= {f"workload.{k}.{a}": y for a, y in x.items()}
                else:
                    out[prefix + k] = x
        else:
            out[key] = value
    return out


# ---------------------------------------------------------------- naming

def _value_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    return str(v)


def run_name_of(params: dict, fallback: str) -> str:
    """``k=v,k=v`` of a point's parameters (attribute keys shortened to the attribute), or ``fallback``."""
    if not params:
        return fallback
    short = {k: k.rsplit("::", 1)[-1] if k.startswith("attributes.") else k for k in params}
    counts = {s: list(short.values()).count(s) for s in short.values()}
    parts = [f"{short[k] if counts[short[k]] == 1 else k.removeprefix('attributes.')}={_value_text(v)}"
             for k, v in params.items()]
    return re.sub(r"[/\s]+", "-", ",".join(parts)).lstrip(".")


def digest_of(run_name: str, fields: dict) -> str:
    """8 hex digits of sha256 over the canonical JSON of a point's run name and fields."""
    text = json.dumps({"run": run_name, "fields": fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def safe_name(name: str) -> str:
    """A sweep name usable in file names (letters, digits, ., _ and -)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "sweep"


# ---------------------------------------------------------------- parse and expand

def parse_sweep(data: dict, *, source: str, default_name: str, folder: Path | None = None,
                overrides: dict | None = None) -> Sweep:
    """A parsed TOML document → an expanded Sweep whose every point constructs an Experiment.

    ``overrides`` (field key → value, as ``cosim sweep --set`` gives them) are set on every point after
    [base]; one that sets a swept field is an error (the grid decides it)."""
    for key in data:
        if key not in SECTIONS:
            raise CosimInputError(f"{source}: {key}", "unknown section", f"sections are {', '.join(SECTIONS)}")
    head = data.get("sweep", {})
    if not isinstance(head, dict):
        raise CosimInputError(f"{source}: sweep", "must be a table ([sweep])")
    for key in head:
        if key not in SWEEP_KEYS:
            raise CosimInputError(f"{source}: sweep.{key}", "unknown key", f"valid keys: {', '.join(SWEEP_KEYS)}")
    name = safe_name(str(head.get("name", default_name)))
    base_doc = _base_document(source, head.get("experiment"), folder)
    base = _flatten(f"{source}: base", data.get("base", {}))
    if "name" in base:
        raise CosimInputError(f"{source}: base.name", "unknown field",
                              "run names come from the point's parameters; set the sweep's name in [sweep] name")
    axes = _grid_axes(f"{source}: grid", data.get("grid", {}))
    base |= _command_overrides(overrides or {}, axes, data.get("points", []))
    explicit = data.get("points", [])
    if not isinstance(explicit, list):
        raise CosimInputError(f"{source}: points", "must be an array of tables ([[points]])")
    n_grid = math.prod(len(x) for _, x in axes) if axes else 0
    if n_grid + len(explicit) > MAX_POINTS:
        raise CosimInputError(f"{source}: grid", f"{n_grid + len(explicit)} points exceed {MAX_POINTS}",
                              "split the sweep into several files")

    raw: list[tuple[dict, dict, str | None]] = []  # (params, fields, explicit run name)
    if axes:
        keys = [k for k, _ in axes]
        for combo in itertools.product(*(x for _, x in axes)):
            params = dict(zip(keys, combo))
            raw.append((params, {**base, **params}, None))
    for i, table in enumerate(explicit):
        f = _flatten(f"{source}: points[{i}]", table)
        run = f.pop("name", None)
        if run is not None and (not isinstance(run, str) or not run):
            raise CosimInputError(f"{source}: points[{i}].name", "must be a non-empty string")
        raw.append((f, {**base, **f}, run))
    if not raw:
        raw.append(({}, dict(base), None))

    points, exps = [], []
    for index, (params, fields, run) in enumerate(raw):
        run = run or run_name_of(params, name)
        fields = dict(sorted(fields.items()))
        digest = digest_of(run, {"base": base_doc, "fields": fields})
        point = SweepPoint(index, run, params, fields, base_doc, digest, f"{name}-{index:04d}-{digest}.h5")
        try:
            exps.append(point.experiment())
        except CosimInputError as exc:
            raise CosimInputError(f"{source}: point {index} ({run}) {exc.field}", exc.problem, exc.fix) from None
        points.append(point)
    _check_unique(source, points)
    warnings = _inert_settings(source, [k for k, x in axes if len(x) > 1], exps)
    return Sweep(name=name, source=source, points=tuple(points), warnings=tuple(warnings))


def _inert_settings(source: str, swept: list[str], exps) -> list[str]:
    """Warnings for the ns-3 attributes that have no effect on some points' transport; CosimInputError for an
    attribute swept over values that act on none of its points (the points would be identical runs)."""
    inert: dict[str, list[int]] = {}
    why: dict[str, str] = {}
    for i, exp in enumerate(exps):
        net = exp.network
        for name, reason in inert_attributes(net.transport, net.attributes, dcqcn=net.dcqcn, ib_cc=net.ib_cc,
                                             link_flow_control=net.link_flow_control,
                                             telemetry_cc=net.telemetry_cc):
            inert.setdefault(name, []).append(i)
            why.setdefault(name, reason)
    out = []
    for name, idle in inert.items():
        key = f"attributes.{name}"
        if key in swept and len(idle) == len(exps):
            raise CosimInputError(f"{source}: grid.{key}", f"{why[name]}; its values would give identical runs",
                                  "sweep the attribute that acts, or remove this one")
        where = "any point" if len(idle) == len(exps) else f"{len(idle)} of {len(exps)} points"
        note = " (they repeat one run per value)" if key in swept else ""
        out.append(f"{name} {why[name]}; on {where}{note}")
    return out


def _command_overrides(overrides: dict, axes: list[tuple[str, list]], explicit) -> dict:
    """``--set`` fields of every point, refused where the sweep itself varies them."""
    if not overrides:
        return {}
    varied = {tuple(resolve_path(k)): f"[grid] {k}" for k, _ in axes}
    for i, table in enumerate(explicit if isinstance(explicit, list) else []):
        if isinstance(table, dict):
            for k in _flat_keys(f"points[{i}]", table):
                if k != "name":
                    varied[tuple(resolve_path(k))] = f"[[points]] {i}"
    for key in overrides:
        path = tuple(resolve_path(key))
        if path == ("name",):
            raise CosimInputError(f"--set {key}", "run names come from the point's parameters",
                                  "set the sweep's name in [sweep] name")
        if path in varied:
            raise CosimInputError(f"--set {key}", f"is varied by the sweep ({varied[path]})",
                                  "remove the --set, or the field from the sweep file")
    return dict(overrides)


def _base_document(source: str, experiment, folder: Path | None) -> dict:
    """The base experiment's document: [sweep] experiment (shipped name or TOML path), else {}."""
    if experiment is None:
        return {}
    if not isinstance(experiment, str) or not experiment:
        raise CosimInputError(f"{source}: sweep.experiment", "must be a shipped experiment's name or a TOML path")
    path = Path(experiment)
    if folder is not None and path.suffix == ".toml" and not path.is_absolute():
        experiment = str(folder / path)
    doc, _ = catalog.load_document(experiment)
    return doc


def _check_unique(source: str, points: list[SweepPoint]) -> None:
    seen: dict[str, int] = {}
    for p in points:
        if p.run_name in seen:
            raise CosimInputError(f"{source}: point {p.index}",
                                  f"same run name {p.run_name!r} as point {seen[p.run_name]}",
                                  "give [[points]] distinct values or a distinct name")
        seen[p.run_name] = p.index


def load_sweep(path: str | Path, overrides: dict | None = None) -> Sweep:
    """Read and expand a sweep TOML file, with ``overrides`` (``--set``) on every point (CosimInputError
    naming the key for any mistake)."""
    path = Path(path)
    if not path.is_file():
        raise CosimInputError(str(path), "no such file", "pass a sweep TOML file (see docs/sweeps.md)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CosimInputError(str(path), f"malformed TOML: {exc}") from None
    except UnicodeDecodeError:
        raise CosimInputError(str(path), "not a UTF-8 text file") from None
    return parse_sweep(data, source=str(path), default_name=path.stem, folder=path.parent, overrides=overrides)


def preflight(sweep: Sweep) -> None:
    """Deeper checks before anything runs: every point's fabric builds and its ns-3 attributes exist, parse
    and fit (buffers, headroom, lanes). Points that differ only in fields that change neither the fabric
    nor the attributes are checked once."""
    checked: set[str] = set()
    for p in sweep.points:
        exp = p.experiment()
        key = json.dumps({"network": to_document(exp)["network"], "seed": exp.seed,
                          "workload": to_document(exp).get("workload", to_document(exp).get("workloads"))},
                         sort_keys=True, default=str)
        if key in checked:
            continue
        checked.add(key)
        try:
            plan = compile(exp)
            engine.check_fabric(plan.fabric, plan.attributes)
        except CosimInputError as exc:
            field = exc.field.removeprefix("--set ")
            raise CosimInputError(f"{sweep.source}: point {p.index} ({p.run_name}) {field}", exc.problem,
                                  exc.fix) from None
