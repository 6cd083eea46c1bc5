"""Fault specs: what fails, where, when; parsed from ``[[faults]]`` tables and ``--fault`` options and
checked in one place.

A fault is a :class:`Fault`: a ``kind`` (a registered :class:`cosim.faults.registry.FaultKind`), an
``element`` named the way :mod:`cosim.network.names` names nodes, a start time ``at_ns``, an optional end
(``duration_ns`` or ``up_at_ns``; none: until the run ends) and the kind's parameters. Elements::

    leaf1-spine0     a link, by the names of its two ends (either order; leaf1-spine0#1: the second of
                     parallel links between them)
    spine0, leaf2    a switch (rail0, edge1, agg0, core0, switch0 by topology)
    host3            a NIC (its host link)
    rank5            runs with ranks: the NIC of rank 5

A fault with ``rate_per_s`` is a random process instead: faults of its kind arrive as a Poisson process of
that rate from ``at_ns`` to ``until_ns`` (default: the run's time limit), each on one element drawn at
random from those the ``element`` pattern matches (shell-style: ``leaf*-spine*``, ``host*``; or one of
:data:`ELEMENT_SETS`), seeded by ``seed``; :mod:`cosim.faults.elements` expands it to concrete faults
deterministically before the run.

Every fault comes from one of three places and goes through :func:`fault_from_table`: a ``[[faults]]``
table of an Experiment's TOML, a ``--fault KIND:ELEMENT@TIME[,key=value...]`` option
(:func:`parse_fault_option`) or Python. What can be checked without the fabric (kind, parameters, times
against the run's limit, transport) is checked when the Experiment is made; elements when the fabric
exists (cosim.faults.elements, before anything simulates). Kinds, parameters and units:
docs/models/faults.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.faults.registry import kind_of

#: set names a random process's ``element`` may give, besides a shell pattern -> the element kind
ELEMENT_SETS = {"links": "link", "fabric-links": "link", "host-links": "link", "switches": "switch",
                "hosts": "host", "ranks": "rank"}

#: fields every fault has (the rest of a table are the kind's parameters)
_COMMON = ("kind", "element", "at_ns", "duration_ns", "up_at_ns", "rate_per_s", "until_ns", "seed")
_TIME = v.Real(minimum=0.0, maximum=9.2e15)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One fault, or (with ``rate_per_s``) a seeded Poisson process of faults of one kind.

    ``params`` holds the kind's parameters as (name, value) pairs, every one the kind declares (defaults
    filled in); read them with :meth:`get`.
    """

    kind: str
    element: str
    at_ns: float = 0.0
    duration_ns: float | None = None
    up_at_ns: float | None = None
    rate_per_s: float | None = None
    until_ns: float | None = None
    seed: int = 0
    params: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        k = kind_of(self.kind)
        if not isinstance(self.element, str) or not self.element.strip():
            raise CosimInputError("faults.element", f"must name an element, got {self.element!r}",
                                  "e.g. leaf1-spine0 (a link), spine0 (a switch), host3 or rank5")
        object.__setattr__(self, "element", self.element.strip())
        object.__setattr__(self, "at_ns", _TIME.convert(self.at_ns, "faults.at_ns"))
        for name in ("duration_ns", "up_at_ns", "until_ns"):
            x = getattr(self, name)
            if x is not None:
                object.__setattr__(self, name, v.Real(positive=True, maximum=9.2e15).convert(x, f"faults.{name}"))
        if self.rate_per_s is not None:
            object.__setattr__(self, "rate_per_s",
                               v.Real(positive=True, maximum=1e9).convert(self.rate_per_s, "faults.rate_per_s"))
        elif self.until_ns is not None:
            raise CosimInputError("faults.until_ns", "ends a random process", "give rate_per_s too, or remove it")
        object.__setattr__(self, "seed", v.Int(minimum=0, maximum=2**63 - 1).convert(self.seed, "faults.seed"))
        if self.duration_ns is not None and self.up_at_ns is not None:
            raise CosimInputError("faults.up_at_ns", "give either duration_ns or up_at_ns", "remove one of them")
        if self.up_at_ns is not None and self.up_at_ns <= self.at_ns:
            raise CosimInputError("faults.up_at_ns", f"{self.up_at_ns:g} ns is not after at_ns = {self.at_ns:g} ns",
                                  "give a later time, or duration_ns")
        if not k.timed and (self.duration_ns is not None or self.up_at_ns is not None):
            raise CosimInputError("faults.duration_ns", f"a {self.kind} fault has no end", "remove it")
        given = dict(_pairs(self.params))
        for name in given:
            if name not in k.params:
                valid = ", ".join([*_COMMON[1:], *k.params]) or "none"
                raise CosimInputError(f"faults.{name}", f"not a parameter of {self.kind}", f"valid: {valid}")
        params = tuple((name, p.default if given.get(name) is None else p.kind.convert(given[name], f"faults.{name}"))
                       for name, p in k.params.items())
        object.__setattr__(self, "params", params)
        k.check(self)

    def get(self, name: str):
        """Parameter ``name`` of the kind (KeyError for one it does not declare)."""
        return dict(self.params)[name]

    @property
    def end_ns(self) -> float | None:
        """When the fault ends (None: it lasts until the run ends)."""
        if self.up_at_ns is not None:
            return self.up_at_ns
        return None if self.duration_ns is None else self.at_ns + self.duration_ns

    @property
    def is_process(self) -> bool:
        """True for a random process (expanded to faults by cosim.faults.elements.resolve)."""
        return self.rate_per_s is not None


def _pairs(value) -> tuple[tuple[str, object], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    try:
        return tuple((str(k), x) for k, x in items)
    except (TypeError, ValueError):
        raise CosimInputError("faults", "parameters must be a table of name = value") from None


def fault_from_table(table: Mapping, where: str = "faults") -> Fault:
    """A Fault from a ``[[faults]]`` table (the common fields and the kind's parameters in one table);
    errors name ``where.field``."""
    if not isinstance(table, Mapping):
        raise CosimInputError(where, "must be a table", "write each fault as [[faults]]")
    for key in ("kind", "element"):
        if key not in table:
            raise CosimInputError(f"{where}.{key}", "is missing", "a fault needs kind, element and at_ns")
    common = {k: table[k] for k in _COMMON if k in table}
    params = tuple((k, x) for k, x in table.items() if k not in _COMMON)
    try:
        return Fault(**common, params=params)
    except CosimInputError as exc:
        raise CosimInputError(exc.field.replace("faults", where, 1), exc.problem, exc.fix) from None


def fault_to_table(fault: Fault) -> dict:
    """The ``[[faults]]`` table of ``fault`` (None fields left out; parameters at None left out)."""
    d = {"kind": fault.kind, "element": fault.element, "at_ns": fault.at_ns}
    for name in _COMMON[3:]:
        x = getattr(fault, name)
        if x is not None and not (name == "seed" and not fault.is_process):
            d[name] = x
    d |= {k: x for k, x in fault.params if x is not None}
    return d


_OPTION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([^@,]+?)\s*@\s*([^,]+?)\s*(?:,(.*))?")
OPTION_SYNTAX = "KIND:ELEMENT@TIME[,key=value...]"


def parse_fault_option(text: str) -> dict:
    """A ``--fault`` option as a ``[[faults]]`` table: ``KIND:ELEMENT@TIME[,key=value...]``; TIME in ns
    (``2e6``) or with a unit (``2ms``, ``150us``, ``1s``), as are ``*_ns`` values. Checked by
    :func:`fault_from_table` when the Experiment is made."""
    m = _OPTION.fullmatch(str(text))
    if not m:
        raise CosimInputError("--fault", f"{text!r} is not {OPTION_SYNTAX}",
                              "e.g. --fault link_down:leaf0-spine1@2ms,duration_ns=500us")
    kind, element, at, rest = m.groups()
    table: dict[str, object] = {"kind": kind, "element": element, "at_ns": _time_ns(at, "--fault time")}
    for item in filter(None, (s.strip() for s in (rest or "").split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise CosimInputError("--fault", f"{item!r} is not key=value", f"syntax: {OPTION_SYNTAX}")
        table[key] = _time_ns(value, f"--fault {key}") if key.endswith("_ns") else _scalar(value.strip())
    return table


_TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def _time_ns(text: str, where: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ns|us|ms|s)?\s*", text)
    if not m:
        raise CosimInputError(where, f"{text.strip()!r} is not a time", "write ns (2e6) or 2ms, 150us, 1s")
    return float(m.group(1)) * _TIME_UNITS[m.group(2) or "ns"]


def _scalar(text: str):
    """A command-line value: an int, a float, true/false, or the text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def faults_from_list(items, where: str = "faults") -> tuple[Fault, ...]:
    """The Faults of a ``[[faults]]`` list (each a table or a Fault)."""
    if isinstance(items, Mapping) or not isinstance(items, (list, tuple)):
        raise CosimInputError(where, "must be a list of tables", "write each fault as [[faults]]")
    return tuple(x if isinstance(x, Fault) else fault_from_table(x, f"{where}[{i}]") for i, x in enumerate(items))


def check_times(faults: Sequence[Fault], max_sim_time_ns: float) -> None:
    """Every fault must start (and a process end) before the run's time limit."""
    for i, f in enumerate(faults):
        for name in ("at_ns", "until_ns"):
            x = getattr(f, name)
            if x is not None and x >= max_sim_time_ns:
                raise CosimInputError(f"faults[{i}].{name}", f"{x:g} ns is not before the run ends "
                                      f"(limits.max_sim_time_ns = {max_sim_time_ns:g})",
                                      "give an earlier time or raise limits.max_sim_time_ns")


def check_transport(faults: Sequence[Fault], transport: str) -> None:
    """Refuse, when the Experiment is made, a fault its transport cannot have (a pause storm on InfiniBand)."""
    for i, f in enumerate(faults):
        kind_of(f.kind).check_transport(transport, f"faults[{i}].kind")
