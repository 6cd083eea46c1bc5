"""Sweep files: TOML → a validated list of points, each one ScenarioSpec with a deterministic file name.

    [sweep]
    name = "ecn"                       # optional; default: the TOML file's stem
    [base]                             # ScenarioSpec fields shared by every point
    hosts = 8
    flow_bytes = "1MiB"
    [base.attributes]                  # ns-3 attributes shared by every point
    "SharedBufferMmu::BufferBytes" = 4000000
    [grid]                             # cartesian product, last key varies fastest
    dcqcn = [true, false]
    attributes."FabricSwitch::EcnKminBytes" = [20000, 100000]
    [[points]]                         # optional explicit points, after the grid ones
    hosts = 16
    name = "big"                       # optional run name

A point's file is ``<sweep>-<index:04d>-<hash8>.h5``; the hash covers its run name and its explicit
fields (base merged with its parameters), so the name is stable across machines and cosim versions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from cosim.errors import CosimInputError

MAX_POINTS = 100_000
SECTIONS = ("sweep", "base", "grid", "points")
SWEEP_KEYS = ("name", "description")
MANIFEST_SCHEMA = "cosim.sweep"
MANIFEST_SUFFIX = ".sweep.json"


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One point of a sweep: its index, run name, varied parameters and full explicit scenario fields."""

    index: int
    run_name: str
    params: dict  # the varied parameters, e.g. {"dcqcn": False, "attributes.FabricSwitch::EcnKminBytes": "20000"}
    fields: dict  # ScenarioSpec keyword arguments except name; attributes as a sorted {name: value} dict
    digest: str  # 8 hex digits of the point's canonical JSON
    file_name: str  # <sweep>-<index:04d>-<digest>.h5

    def spec(self):
        """The point's ScenarioSpec (validated on construction)."""
        from cosim.runs.flows import ScenarioSpec  # noqa: PLC0415

        kwargs = dict(self.fields)
        kwargs["attributes"] = tuple(kwargs.get("attributes", {}).items())
        return ScenarioSpec(name=self.run_name, **kwargs)

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

    def manifest(self) -> dict:
        """The sweep as JSON (deterministic: every shard writes the same bytes)."""
        return {"schema": MANIFEST_SCHEMA, "version": 1, "name": self.name,
                "points": [p.to_json() for p in self.points]}

    def manifest_name(self) -> str:
        """File name of the manifest inside the output directory."""
        return self.name + MANIFEST_SUFFIX


# ---------------------------------------------------------------- fields and values

def scenario_fields() -> dict[str, str]:
    """ScenarioSpec field name -> its annotation (as text), the ones a sweep may set."""
    from cosim.runs.flows import ScenarioSpec  # noqa: PLC0415

    return {f.name: str(f.type) for f in dataclasses.fields(ScenarioSpec) if f.name != "name"}


def _coerce(where: str, field: str, annotation: str, value):
    """A TOML value checked against a field's annotation (int, float, bool, str); others pass through."""
    kind = annotation.strip()
    if kind == "bool":
        if not isinstance(value, bool):
            raise CosimInputError(where, f"expected true or false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and field.endswith("_bytes"):
            return _size(where, value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CosimInputError(where, f"expected an integer, got {value!r}")
        return value
    if kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise CosimInputError(where, f"expected a number, got {value!r}")
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise CosimInputError(where, f"expected a string, got {value!r}")
        return value
    if isinstance(value, (dict, list)):
        raise CosimInputError(where, f"expected a single value, got {value!r}")
    return value


def _size(where: str, text: str) -> int:
    import click  # noqa: PLC0415

    from cosim.cli.options import SIZE  # noqa: PLC0415

    try:
        return SIZE.convert(text, None, None)
    except click.BadParameter:
        raise CosimInputError(where, f"{text!r} is not a size", "examples: 4096, 64KiB, 1MB, 2GiB") from None


def _attribute_value(where: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise CosimInputError(where, f"an ns-3 attribute value must be a string or number, got {value!r}")


def _attribute_name(where: str, name: str) -> str:
    if "::" not in name or not all(name.split("::")):
        raise CosimInputError(where, f"{name!r} is not an ns-3 attribute name",
                              'quote it as attributes."Type::Attribute", e.g. "HostNic::MtuBytes"')
    return name


def _fields_table(where: str, table, known: dict[str, str], *, allow_name: bool) -> tuple[dict, dict]:
    """A [base] or [[points]] table → (scenario fields, attributes); unknown keys are errors."""
    if not isinstance(table, dict):
        raise CosimInputError(where, "must be a table of scenario fields")
    fields, attrs = {}, {}
    for key, value in table.items():
        if key == "attributes":
            if not isinstance(value, dict):
                raise CosimInputError(f"{where}.attributes", 'must be a table: "Type::Attribute" = value')
            for name, v in value.items():
                attrs[_attribute_name(f"{where}.attributes", name)] = _attribute_value(f"{where}.attributes.{name}", v)
        elif key == "name" and allow_name:
            if not isinstance(value, str) or not value:
                raise CosimInputError(f"{where}.name", "must be a non-empty string")
            fields["name"] = value
        elif key in known:
            fields[key] = _coerce(f"{where}.{key}", key, known[key], value)
        else:
            _unknown(where, key, known)
    return fields, attrs


def _unknown(where: str, key: str, known: dict[str, str]):
    hint = "run names come from the point's parameters; set the sweep's name in [sweep] name" if key == "name" \
        else f"valid keys: {', '.join(known)}, attributes"
    raise CosimInputError(f"{where}.{key}", "unknown scenario field", hint)


def _grid_axes(where: str, table, known: dict[str, str]) -> list[tuple[str, list]]:
    """The [grid] table → [(parameter, values)] in file order; attribute axes as ``attributes.Name``."""
    if not isinstance(table, dict):
        raise CosimInputError(where, "must be a table of lists, e.g. hosts = [4, 8]")
    axes = []

    def values_of(key: str, value) -> list:
        """The axis values, which must be a non-empty list."""
        if not isinstance(value, list) or not value:
            raise CosimInputError(f"{where}.{key}", f"must be a non-empty list of values, got {value!r}",
                                  f"e.g. {key.split('.')[-1]} = [a, b]")
        return value

    for key, value in table.items():
        if key == "attributes":
            if not isinstance(value, dict):
                raise CosimInputError(f"{where}.attributes", 'must be a table: "Type::Attribute" = [values]')
            for name, vs in value.items():
                _attribute_name(f"{where}.attributes", name)
                axis = f"attributes.{name}"
                axes.append((axis, [_attribute_value(f"{where}.{axis}[{i}]", v)
                                    for i, v in enumerate(values_of(axis, vs))]))
        elif key in known:
            axes.append((key, [_coerce(f"{where}.{key}[{i}]", key, known[key], v)
                               for i, v in enumerate(values_of(key, value))]))
        else:
            _unknown(where, key, known)
    return axes


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

def parse_sweep(data: dict, *, source: str, default_name: str) -> Sweep:
    """A parsed TOML document → an expanded Sweep whose every point constructs a ScenarioSpec."""
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
    known = scenario_fields()
    base, base_attrs = _fields_table(f"{source}: base", data.get("base", {}), known, allow_name=False)
    axes = _grid_axes(f"{source}: grid", data.get("grid", {}), known)
    explicit = data.get("points", [])
    if not isinstance(explicit, list):
        raise CosimInputError(f"{source}: points", "must be an array of tables ([[points]])")
    n_grid = math.prod(len(v) for _, v in axes) if axes else 0
    if n_grid + len(explicit) > MAX_POINTS:
        raise CosimInputError(f"{source}: grid", f"{n_grid + len(explicit)} points exceed {MAX_POINTS}",
                              "split the sweep into several files")

    raw: list[tuple[dict, dict, dict, str | None]] = []  # (params, fields, attrs, explicit run name)
    if axes:
        keys = [k for k, _ in axes]
        for combo in itertools.product(*(v for _, v in axes)):
            params = dict(zip(keys, combo))
            fields, attrs = dict(base), dict(base_attrs)
            for k, v in params.items():
                if k.startswith("attributes."):
                    attrs[k.removeprefix("attributes.")] = v
                else:
                    fields[k] = v
            raw.append((params, fields, attrs, None))
    for i, table in enumerate(explicit):
        where = f"{source}: points[{i}]"
        f, a = _fields_table(where, table, known, allow_name=True)
        run = f.pop("name", None)
        params = {**f, **{f"attributes.{k}": v for k, v in a.items()}}
        raw.append((params, {**base, **f}, {**base_attrs, **a}, run))
    if not raw:
        raw.append(({}, dict(base), dict(base_attrs), None))

    points = []
    for index, (params, fields, attrs, run) in enumerate(raw):
        run = run or run_name_of(params, name)
        fields = {**fields, "attributes": dict(sorted(attrs.items()))}
        digest = digest_of(run, fields)
        point = SweepPoint(index, run, params, fields, digest, f"{name}-{index:04d}-{digest}.h5")
        try:
            point.spec()
        except CosimInputError as exc:
            raise CosimInputError(f"{source}: point {index} ({run}) {exc.field}", exc.problem, exc.fix) from None
        except (TypeError, ValueError) as exc:
            raise CosimInputError(f"{source}: point {index} ({run})", str(exc).splitlines()[0]) from None
        points.append(point)
    _check_unique(source, points)
    return Sweep(name=name, source=source, points=tuple(points))


def _check_unique(source: str, points: list[SweepPoint]) -> None:
    seen: dict[str, int] = {}
    for p in points:
        if p.run_name in seen:
            raise CosimInputError(f"{source}: point {p.index}",
                                  f"same run name {p.run_name!r} as point {seen[p.run_name]}",
                                  "give [[points]] distinct values or a distinct name")
        seen[p.run_name] = p.index


def load_sweep(path: str | Path) -> Sweep:
    """Read and expand a sweep TOML file (CosimInputError naming the key for any mistake)."""
    import tomllib  # noqa: PLC0415

    path = Path(path)
    if not path.is_file():
        raise CosimInputError(str(path), "no such file", "pass a sweep TOML file (see docs/sweeps.md)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CosimInputError(str(path), f"malformed TOML: {exc}") from None
    except UnicodeDecodeError:
        raise CosimInputError(str(path), "not a UTF-8 text file") from None
    return parse_sweep(data, source=str(path), default_name=path.stem)


def preflight(sweep: Sweep) -> None:
    """Deeper checks before anything runs: every point's fabric builds and its ns-3 attributes exist and parse."""
    from cosim import engine  # noqa: PLC0415
    from cosim.runs import flows as scenario  # noqa: PLC0415
    from cosim.network import topology  # noqa: PLC0415
    from cosim.workload.flows import FlowSet  # noqa: PLC0415

    built: set[str] = set()
    for p in sweep.points:
        key = json.dumps({k: v for k, v in p.fields.items() if k != "attributes"}, sort_keys=True)
        if key in built:  # attributes do not change the fabric or the flows
            continue
        built.add(key)
        try:
            scenario.build(p.spec())
        except CosimInputError as exc:
            raise CosimInputError(f"{sweep.source}: point {p.index} ({p.run_name}) {exc.field}", exc.problem,
                                  exc.fix) from None
    tiny = topology.single_switch(hosts=2, link_gbps=100.0, link_delay_ns=1000.0)
    empty = FlowSet.from_arrays([], [], 0)
    checked: set[tuple] = set()
    for p in sweep.points:
        attrs = tuple(p.fields.get("attributes", {}).items())
        if not attrs or attrs in checked:
            continue
        checked.add(attrs)
        try:
            engine.simulate(tiny, empty, attributes=dict(attrs))
        except CosimInputError as exc:
            name = exc.field.removeprefix("--set ")
            raise CosimInputError(f"{sweep.source}: point {p.index} ({p.run_name}) attributes.{name}", exc.problem,
                                  exc.fix) from None
        except Exception:  # noqa: BLE001 - fabric-dependent limits are checked again when the point runs
            pass
