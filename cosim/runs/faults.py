"""Faults of a run: what fails, where, when; one registry of fault kinds; validation in one place.

A fault is a :class:`Fault`: a ``kind`` (a :data:`KINDS` entry), an ``element`` named the way
:mod:`cosim.analysis.ports` names nodes, a start time ``at_ns``, an optional end (``duration_ns`` or
``up_at_ns``; none: until the run ends) and the kind's parameters. Elements::

    leaf1-spine0     a link, by the names of its two ends (either order; leaf1-spine0#1: the second of
                     parallel links between them)
    spine0, leaf2    a switch (rail0, edge1, agg0, core0, switch0 by topology)
    host3            a NIC (its host link)
    rank5            training runs: the NIC of rank 5

A fault with ``rate_per_s`` is a random process instead: faults of its kind arrive as a Poisson process of
that rate from ``at_ns`` to ``until_ns`` (default: the run's time limit), each on one element drawn at
random from those the ``element`` pattern matches (shell-style: ``leaf*-spine*``, ``host*``; or ``links``,
``fabric-links``, ``host-links``, ``switches``, ``hosts``, ``ranks``), seeded by ``seed``; it is expanded to
concrete faults deterministically before the run (:func:`resolve`).

Every fault comes from one of three places and goes through :func:`fault_from_table`: a ``[[faults]]``
table of an Experiment's TOML, a ``--fault KIND:ELEMENT@TIME[,key=value...]`` option
(:func:`parse_fault_option`) or Python. What can be checked without the fabric (kind, parameters, times
against the run's limit) is checked when the Experiment is made; elements when the fabric exists
(:func:`resolve`, before anything simulates). Kinds, parameters and units: docs/models/faults.md.

A kind (:class:`FaultKind`) says which elements it takes, its parameters and how it is applied: ``apply``
is called once per run with every resolved fault of that kind and a :class:`FaultContext` (the C++ engine
after the fabric is built and before any flow or op is loaded, and the DAG arrays it may change) and
schedules what happens; the engine logs what it did (down, up, reroute, degrade ...) into the run's
``faults`` table.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cosim import values as v
from cosim.errors import CosimInputError

# ---------------------------------------------------------------- actions (codes shared with the engine)

#: what a row of the faults table records; the index is the code (engine: shared-codes.h FaultAction)
ACTIONS = ("down", "up", "reroute", "degrade", "restore",
           # fault mechanisms (cosim.runs.fault_mechanisms)
           "storm_start", "storm_end", "queue_disabled", "queue_restored", "slowed", "collective_timeout")
ACTION_CODES = {name: i for i, name in enumerate(ACTIONS)}

#: element kinds a fault kind may take
ELEMENT_KINDS = ("link", "switch", "host", "rank")
#: set names a random process's ``element`` may give, besides a shell pattern
ELEMENT_SETS = {"links": "link", "fabric-links": "link", "host-links": "link", "switches": "switch",
                "hosts": "host", "ranks": "rank"}
#: most concrete faults one run may hold after expanding its random processes
MAX_FAULTS = 100_000


# ---------------------------------------------------------------- the registry

@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a fault kind: its value kind (cosim.values), default (None: not set) and help
    with its unit."""

    kind: v.Kind
    default: object
    doc: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultKind:
    """A kind of fault: the elements it acts on, its parameters, whether it has an end, and how it is
    applied to a run.

    ``apply(faults, ctx)`` gets every :class:`ResolvedFault` of this kind of one run (in time order) and a
    :class:`FaultContext`; it is called after the fabric is built and before flows or DAG ops are loaded.
    ``check(fault)`` (optional) raises CosimInputError for a combination of parameters the kind refuses.
    ``code`` is the kind's value in the faults table's ``kind`` column (stable: never reuse one).
    """

    name: str
    code: int
    elements: tuple[str, ...]
    params: Mapping[str, Param]
    doc: str
    timed: bool = True  # duration_ns / up_at_ns apply
    apply: Callable[[Sequence["ResolvedFault"], "FaultContext"], None] | None = None
    check: Callable[["Fault"], None] | None = None


#: kind name -> FaultKind; :func:`register` adds one
KINDS: dict[str, FaultKind] = {}


def register(kind: FaultKind) -> FaultKind:
    """Add ``kind`` to :data:`KINDS` (a name or code already taken is a programming error)."""
    if kind.name in KINDS or any(k.code == kind.code for k in KINDS.values()):
        raise ValueError(f"fault kind {kind.name!r} (code {kind.code}) is registered twice")
    bad = [e for e in kind.elements if e not in ELEMENT_KINDS]
    if bad:
        raise ValueError(f"fault kind {kind.name!r}: unknown element kind {bad[0]!r}")
    KINDS[kind.name] = kind
    return kind


def kind_names() -> tuple[str, ...]:
    """Registered kinds, in code order."""
    return tuple(k.name for k in sorted(KINDS.values(), key=lambda k: k.code))


def kind_of(name: str, where: str = "faults.kind") -> FaultKind:
    """The registered kind ``name``; CosimInputError naming the valid ones otherwise."""
    if not isinstance(name, str) or name not in KINDS:
        raise CosimInputError(where, f"unknown fault kind {name!r}", f"choose one of {', '.join(kind_names())}")
    return KINDS[name]


# ---------------------------------------------------------------- the spec

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
        if k.check is not None:
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
        """True for a random process (expanded to faults by :func:`resolve`)."""
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


# ---------------------------------------------------------------- resolution against a fabric

@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ResolvedFault:
    """A concrete fault on concrete ids: ``index`` in the run's fault list (the faults table's ``fault``
    column), the links and nodes it acts on, and its times in ps (``until_ps`` −1: until the end)."""

    index: int
    fault: Fault
    element_kind: str
    links: np.ndarray  # int64, fabric link ids (a switch: all its links; a NIC: its host link)
    nodes: np.ndarray  # int64, node ids (a link: its two ends; a rank: its NIC)
    at_ps: int
    until_ps: int

    @property
    def kind(self) -> FaultKind:
        return KINDS[self.fault.kind]


@dataclass(frozen=True, slots=True)
class Elements:
    """The names of a fabric's elements and what each one is (:func:`elements_of`)."""

    node_names: tuple[str, ...]
    node_of: Mapping[str, int]
    link_of: Mapping[str, int]  # "a-b" (both orders) and "a-b#k" -> link id
    link_names: tuple[str, ...]  # canonical name of every link id
    host_link: Mapping[int, int]  # host node id -> its link id
    node_links: Mapping[int, tuple[int, ...]]  # node id -> its link ids
    is_switch: np.ndarray  # bool per node
    host_links: frozenset  # link ids with a host end
    rank_host: tuple[int, ...]  # rank -> host node id (training runs; else empty)


def elements_of(fabric, rank_hosts: Sequence[int] | None = None) -> Elements:
    """Every element name of ``fabric`` (node names as cosim.analysis.ports gives them)."""
    from cosim.network.names import node_names  # noqa: PLC0415
    from cosim.network.topology import SWITCH  # noqa: PLC0415

    names = tuple(node_names(fabric))
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    is_switch = np.asarray(fabric.node_kind) == SWITCH
    link_of: dict[str, int] = {}
    link_names, seen = [], {}
    node_links: dict[int, list[int]] = {}
    host_link, host_links = {}, set()
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        key = (min(x, y), max(x, y))
        k = seen.get(key, 0)
        seen[key] = k + 1
        base = f"{names[x]}-{names[y]}"
        canonical = base if k == 0 else f"{base}#{k}"
        link_names.append(canonical)
        for n in (f"{names[x]}-{names[y]}", f"{names[y]}-{names[x]}"):
            link_of[f"{n}#{k}"] = i
            if k == 0:
                link_of[n] = i
        for n in (x, y):
            node_links.setdefault(n, []).append(i)
            if not is_switch[n]:
                host_link.setdefault(n, i)
                host_links.add(i)
    return Elements(node_names=names, node_of={n: i for i, n in enumerate(names)}, link_of=link_of,
                    link_names=tuple(link_names), host_link=host_link,
                    node_links={n: tuple(ls) for n, ls in node_links.items()}, is_switch=is_switch,
                    host_links=frozenset(host_links),
                    rank_host=tuple(int(h) for h in (rank_hosts if rank_hosts is not None else ())))


def _element(el: Elements, name: str, kind: FaultKind, where: str) -> tuple[str, list[int], list[int]]:
    """(element kind, link ids, node ids) of element ``name`` for a fault of ``kind``."""
    accepts = kind.elements
    m = re.fullmatch(r"rank([0-9]+)", name)
    if m and ("rank" in accepts or "host" in accepts):
        r = int(m.group(1))
        if not el.rank_host:
            raise CosimInputError(where, f"{name!r}: ranks name elements of training runs only",
                                  "name the NIC as hostN")
        if r >= len(el.rank_host):
            raise CosimInputError(where, f"{name!r}: the run has ranks 0..{len(el.rank_host) - 1}",
                                  "give an existing rank")
        h = el.rank_host[r]
        return "rank", [el.host_link[h]] if h in el.host_link else [], [h]
    if name in el.link_of and "link" in accepts:
        i = el.link_of[name]
        return "link", [i], []
    if name in el.node_of:
        n = el.node_of[name]
        what = "switch" if el.is_switch[n] else "host"
        if what in accepts:
            return what, list(el.node_links.get(n, ())), [n]
        if what == "host" and "rank" in accepts and el.rank_host and n in el.rank_host:
            return "rank", list(el.node_links.get(n, ())), [n]
        raise CosimInputError(where, f"{name!r} is a {what}; a {kind.name} fault acts on a {_or(accepts)}",
                              f"e.g. {_example(el, accepts[0])}")
    if "-" in name and "link" not in accepts:
        raise CosimInputError(where, f"{name!r}: a {kind.name} fault acts on a {_or(accepts)}",
                              f"e.g. {_example(el, accepts[0])}")
    raise CosimInputError(where, f"no {_or(accepts)} named {name!r} in this fabric",
                          f"e.g. {_example(el, accepts[0])}; 'cosim run --dry-run' shows the fabric")


def _or(kinds: Sequence[str]) -> str:
    return " or ".join(kinds)


def _example(el: Elements, kind: str) -> str:
    if kind == "link":
        fabric_links = [n for i, n in enumerate(el.link_names) if i not in el.host_links]
        return (fabric_links or list(el.link_names) or ["leaf0-spine0"])[0]
    if kind == "switch":
        return next((n for i, n in enumerate(el.node_names) if el.is_switch[i]), "spine0")
    if kind == "rank":
        return "rank0" if el.rank_host else "host0"
    return next((n for i, n in enumerate(el.node_names) if not el.is_switch[i]), "host0")


def _members(el: Elements, pattern: str, kind: FaultKind, where: str) -> list[str]:
    """Element names a random process's ``element`` (a set name or a shell pattern) stands for."""
    if pattern in ELEMENT_SETS:
        what = ELEMENT_SETS[pattern]
        if what not in kind.elements:
            raise CosimInputError(where, f"{pattern!r}: a {kind.name} fault acts on a {_or(kind.elements)}",
                                  f"e.g. {_example(el, kind.elements[0])}")
        if what == "link":
            ids = range(len(el.link_names))
            keep = {"links": lambda i: True, "fabric-links": lambda i: i not in el.host_links,
                    "host-links": lambda i: i in el.host_links}[pattern]
            return [el.link_names[i] for i in ids if keep(i)]
        if what == "switch":
            return [n for i, n in enumerate(el.node_names) if el.is_switch[i]]
        if what == "rank":
            return [f"rank{r}" for r in range(len(el.rank_host))]
        return [n for i, n in enumerate(el.node_names) if not el.is_switch[i]]
    names = []
    if "link" in kind.elements:
        names += list(el.link_names)
    if "switch" in kind.elements:
        names += [n for i, n in enumerate(el.node_names) if el.is_switch[i]]
    if "host" in kind.elements or "rank" in kind.elements:
        names += [n for i, n in enumerate(el.node_names) if not el.is_switch[i]]
    if "rank" in kind.elements:
        names += [f"rank{r}" for r in range(len(el.rank_host))]
    out = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not out:
        raise CosimInputError(where, f"{pattern!r} matches no {_or(kind.elements)} of this fabric",
                              f"e.g. {_example(el, kind.elements[0])}, or a set: "
                              + ", ".join(s for s, w in ELEMENT_SETS.items() if w in kind.elements))
    return out


def expand(faults: Sequence[Fault], el: Elements, max_sim_time_ns: float) -> list[tuple[int, Fault]]:
    """Concrete faults, each with the index of the entry it came from: a process's Poisson arrivals on
    elements drawn uniformly from its members (numpy Generator seeded by (seed, entry index)), in time
    order; a concrete fault as it is."""
    out: list[tuple[int, Fault]] = []
    for i, f in enumerate(faults):
        if not f.is_process:
            out.append((i, f))
            continue
        where = f"faults[{i}].element"
        members = _members(el, f.element, KINDS[f.kind], where)
        end = min(f.until_ns if f.until_ns is not None else max_sim_time_ns, max_sim_time_ns)
        expected = f.rate_per_s * (end - f.at_ns) * 1e-9
        if expected > MAX_FAULTS:
            raise CosimInputError(f"faults[{i}].rate_per_s", f"{expected:.3g} faults expected, more than "
                                  f"{MAX_FAULTS}", "lower rate_per_s or give until_ns")
        rng = np.random.default_rng([f.seed, i])
        n = int(rng.poisson(expected)) if expected > 0 else 0
        # given their number, Poisson arrivals are uniform on the interval
        times = np.sort(rng.uniform(f.at_ns, end, n))
        picks = rng.integers(0, len(members), n)
        for t, p in zip(times.tolist(), picks.tolist()):
            out.append((i, dataclasses.replace(f, element=members[p], at_ns=float(t), rate_per_s=None,
                                               until_ns=None, up_at_ns=None)))
    if len(out) > MAX_FAULTS:
        raise CosimInputError("faults", f"{len(out)} faults, more than {MAX_FAULTS}", "lower the rates")
    return out


def resolve(faults: Sequence[Fault], fabric, *, max_sim_time_ns: float,
            rank_hosts: Sequence[int] | None = None) -> list[ResolvedFault]:
    """The run's concrete faults on ``fabric`` (processes expanded), in time order; CosimInputError for
    an element the fabric lacks or the kind does not act on."""
    if not faults:
        return []
    el = elements_of(fabric, rank_hosts)
    out = []
    for n, (i, f) in enumerate(sorted(expand(faults, el, max_sim_time_ns), key=lambda x: x[1].at_ns)):
        kind = KINDS[f.kind]
        what, links, nodes = _element(el, f.element, kind, f"faults[{i}].element")
        end = f.end_ns
        out.append(ResolvedFault(index=n, fault=f, element_kind=what, links=np.asarray(links, np.int64),
                                 nodes=np.asarray(nodes, np.int64), at_ps=int(round(f.at_ns * 1e3)),
                                 until_ps=-1 if end is None or end >= max_sim_time_ns else int(round(end * 1e3))))
    return out


# ---------------------------------------------------------------- applying them

@dataclass(slots=True, kw_only=True, eq=False)
class FaultContext:
    """What a kind's ``apply`` works with: the C++ engine (fabric built, nothing loaded yet), the fabric,
    the seed, and the DAG arrays of a training run (``dag``: name -> array as Engine::LoadDag takes them,
    e.g. ``duration_ps``; may be changed in place; None for flow runs). ``log`` collects rows a kind
    records itself (Python side) for the faults table."""

    engine: object
    fabric: object
    seed: int
    stop_ps: int  # the run's time limit, in ps
    dag: dict[str, np.ndarray] | None = None
    log: list[tuple[int, int, int, int, int]] = dataclasses.field(default_factory=list)

    def record(self, time_ps: int, fault: ResolvedFault, action: str, *, link: int = -1, node: int = -1) -> None:
        """Add a row (time, fault, action, link, node) to the faults table."""
        self.log.append((int(time_ps), fault.index, ACTION_CODES[action], int(link), int(node)))


def apply_all(resolved: Sequence[ResolvedFault], ctx: FaultContext) -> None:
    """Call every kind's ``apply`` with its faults (kinds in code order)."""
    names = str(ctx.engine.FaultActionNames())
    if names != ",".join(ACTIONS[:len(names.split(","))]):
        raise RuntimeError(f"libcosim-ns3 names fault actions {names}, this cosim {ACTIONS}: rebuild it")
    for name in kind_names():
        mine = [r for r in resolved if r.fault.kind == name]
        if mine and KINDS[name].apply is not None:
            KINDS[name].apply(mine, ctx)


def faults_table(resolved: Sequence[ResolvedFault], engine_log: Mapping[str, np.ndarray],
                 python_log: Sequence[tuple[int, int, int, int, int]]) -> dict[str, np.ndarray]:
    """The run's ``faults`` table (cosim.results.schema): the engine's and the kinds' rows in time order,
    with each row's kind code from its fault."""
    rows = [np.asarray(engine_log.get(c, ()), np.int64) for c in ("time_ps", "fault", "action", "link", "node")]
    if python_log:
        extra = np.asarray(python_log, np.int64).T
        rows = [np.concatenate([r, e]) for r, e in zip(rows, extra)]
    time_ps, fault, action, link, node = rows
    order = np.lexsort((fault, time_ps))
    codes = np.asarray([r.kind.code for r in resolved], np.int64)
    kind = codes[fault[order]] if fault.size else np.zeros(0, np.int64)
    return {"time_ns": time_ps[order] / 1e3, "fault": fault[order].astype(np.int32), "kind": kind.astype(np.int32),
            "action": action[order].astype(np.int8), "link": link[order].astype(np.int32),
            "node": node[order].astype(np.int32)}


@dataclass(slots=True, kw_only=True, eq=False)
class FaultPlan:
    """The faults of one run, resolved on its fabric: ``setup`` is the engine's SetupFn, ``results`` what
    the run's record keeps (faults table, config entry, summary keys)."""

    resolved: list[ResolvedFault]
    fabric: object
    seed: int
    stop_ps: int
    log: list = dataclasses.field(default_factory=list)

    def setup(self, engine, dag) -> None:
        ctx = FaultContext(engine=engine, fabric=self.fabric, seed=self.seed, stop_ps=self.stop_ps, dag=dag)
        apply_all(self.resolved, ctx)
        self.log = ctx.log

    def results(self, out) -> tuple[dict[str, np.ndarray], dict, dict]:
        """(faults table, config["faults"], summary keys) from the engine's SimulationOutput ``out``."""
        table = faults_table(self.resolved, out.fault_actions, self.log)
        action = table["action"]
        summary = {"faults": len(self.resolved)}
        summary |= {f"fault_{name}_actions": int(np.count_nonzero(action == code))
                    for name, code in ACTION_CODES.items() if np.any(action == code)}
        return table, faults_config(self.resolved), summary


def plan(exp, fabric, rank_hosts: Sequence[int] | None = None, *, max_sim_time_ns: float) -> FaultPlan | None:
    """The FaultPlan of Experiment ``exp`` on ``fabric`` for a run stopping at ``max_sim_time_ns`` (explicit
    or derived from the workload; None without faults: the run is untouched)."""
    if not exp.faults:
        return None
    stop_ns = max_sim_time_ns
    check_times(exp.faults, stop_ns)
    return FaultPlan(resolved=resolve(exp.faults, fabric, max_sim_time_ns=stop_ns, rank_hosts=rank_hosts),
                     fabric=fabric, seed=exp.seed, stop_ps=int(round(stop_ns * 1e3)))


def faults_config(resolved: Sequence[ResolvedFault]) -> dict:
    """What a results file keeps of the run's faults: every concrete fault (row ``fault`` of the faults
    table indexes it) and the names of the kind and action codes."""
    return {"faults": [fault_to_table(r.fault) for r in resolved],
            "kind_codes": {k.name: k.code for k in KINDS.values()}, "actions": list(ACTIONS)}


# ---------------------------------------------------------------- network kinds

_GBPS = v.Optional(v.Real(positive=True, maximum=1e6))


def _check_degrade(fault: Fault) -> None:
    if fault.get("rate_gbps") is None and fault.get("bit_error_rate") is None:
        raise CosimInputError("faults.rate_gbps", "a link_degrade fault needs rate_gbps or bit_error_rate",
                              "e.g. rate_gbps=25 or bit_error_rate=1e-7")


def _check_flap(fault: Fault) -> None:
    down = fault.get("down_ns")
    if down is not None and down >= fault.get("period_ns"):
        raise CosimInputError("faults.down_ns", f"{down:g} ns is not shorter than period_ns", "shorten it")


def _apply_link_state(resolved: Sequence[ResolvedFault], ctx: FaultContext) -> None:
    """Down at at_ps, up at until_ps (if any), for every link of every fault (a switch: all its links)."""
    from cosim.runs.fault_network import schedule_down_up  # noqa: PLC0415

    schedule_down_up(resolved, ctx)


def _apply_flap(resolved: Sequence[ResolvedFault], ctx: FaultContext) -> None:
    from cosim.runs.fault_network import schedule_flaps  # noqa: PLC0415

    schedule_flaps(resolved, ctx)


def _apply_degrade(resolved: Sequence[ResolvedFault], ctx: FaultContext) -> None:
    from cosim.runs.fault_network import schedule_degrade  # noqa: PLC0415

    schedule_degrade(resolved, ctx)


register(FaultKind(name="link_down", code=1, elements=("link",), params={}, apply=_apply_link_state,
                   doc="The link fails in both directions (RoCE: what it carries is lost; IB: held), routes converge "
                       "around it after LinkFaultModel::RouteConvergenceDelay; up again at its end"))
register(FaultKind(name="link_flap", code=2, elements=("link",), apply=_apply_flap, check=_check_flap,
                   params={"period_ns": Param(v.Real(positive=True, maximum=9.2e15), 1e6,
                                              "time from one failure of the link to the next, ns"),
                           "down_ns": Param(v.Optional(v.Real(positive=True, maximum=9.2e15)), None,
                                            "time the link stays down each period, ns [period_ns / 2]")},
                   doc="The link goes down every period_ns from at_ns, up down_ns later, until its end"))
register(FaultKind(name="link_degrade", code=3, elements=("link",), apply=_apply_degrade, check=_check_degrade,
                   params={"rate_gbps": Param(_GBPS, None, "line rate of the degraded link, Gbit/s"),
                           "bit_error_rate": Param(v.Optional(v.Real(minimum=0.0, maximum=1e-2)), None,
                                                   "bit errors per bit: a packet of b bits is lost with "
                                                   "probability 1 - (1 - BER)^b"),
                           "ber_seed": Param(v.Optional(v.Int(minimum=0, maximum=2**31 - 1)), None,
                                             "seed of the link's loss stream [derived from the run's seed]")},
                   doc="The link runs slower (rate_gbps) and/or corrupts packets (bit_error_rate; RoCE drops them, "
                       "IB resends them on the link); the original again at its end"))
register(FaultKind(name="switch_down", code=4, elements=("switch",), params={}, apply=_apply_link_state,
                   doc="Every link of the switch goes down (and up again at its end)"))
register(FaultKind(name="nic_down", code=5, elements=("host", "rank"), params={}, apply=_apply_link_state,
                   doc="The NIC's host link goes down (and up again at its end)"))


# ---------------------------------------------------------------- mechanism kinds (cosim.runs.fault_mechanisms)

def _check_straggler(fault: Fault) -> None:
    """A straggler slows its rank from the start of the run: it has no start time of its own."""
    if fault.at_ns != 0:
        raise CosimInputError("faults.at_ns", "a straggler slows its rank for the whole run",
                              "give at_ns = 0, or leave it out")


def _apply_pause_storm(resolved: Sequence[ResolvedFault], ctx: FaultContext) -> None:
    from cosim.runs.fault_mechanisms import apply_pause_storms  # noqa: PLC0415

    apply_pause_storms(resolved, ctx)


def _apply_straggler(resolved: Sequence[ResolvedFault], ctx: FaultContext) -> None:
    # the training run scaled the rank's compute in the DAG already (cosim.runs.stragglers): it needs the
    # ops' iterations, which the engine's DAG arrays do not carry; this records it
    from cosim.runs.fault_mechanisms import record_stragglers  # noqa: PLC0415

    record_stragglers(resolved, ctx)


register(FaultKind(name="pause_storm", code=6, elements=("host", "rank"), apply=_apply_pause_storm,
                   params={"priority": Param(v.Int(minimum=0, maximum=7), 0, "priority class the NIC keeps "
                                                                           "pausing, 0..7")},
                   doc="The NIC keeps sending PFC PAUSE frames for priority from at_ns until its end (RoCE "
                       "only); network.pfc_watchdog bounds the harm"))
register(FaultKind(name="straggler", code=7, elements=("rank",), timed=False, check=_check_straggler,
                   apply=_apply_straggler,
                   params={"factor": Param(v.Real(minimum=1.0, maximum=1e6), 2.0,
                                           "mean slowdown of the rank's compute, 2 = twice as long"),
                           "distribution": Param(v.Choice(("fixed", "lognormal")), "fixed",
                                                 "fixed: every op by factor; lognormal: drawn, mean factor"),
                           "sigma": Param(v.Real(minimum=0.0, maximum=10.0), 0.25,
                                          "lognormal: standard deviation of the log of a draw"),
                           "per": Param(v.Choice(("iteration", "op")), "iteration",
                                        "lognormal: one draw per iteration or per compute op")},
                   doc="The rank's COMPUTE ops take factor times as long, or a lognormal draw of mean factor "
                       "(training runs; the whole run)"))
