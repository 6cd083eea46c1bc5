"""Fault elements resolved on a fabric: element names, set names and shell patterns (the grammar of
cosim.faults.spec) become link and node ids, random processes become concrete faults, and ``rankN``
becomes the NIC of rank N through the run's host map (rank -> host node id)."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.faults.registry import KINDS, FaultKind
from cosim.faults.spec import ELEMENT_SETS, Fault
from cosim.network.names import node_names
from cosim.network.topology import SWITCH

#: most concrete faults one run may hold after expanding its random processes
MAX_FAULTS = 100_000


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
    rank_host: tuple[int, ...]  # rank -> host node id (runs with ranks; else empty)


def elements_of(fabric, host_of: Sequence[int] | None = None) -> Elements:
    """Every element name of ``fabric`` (node names as cosim.network.names gives them); ``host_of``: rank
    -> host node id (None: the run has no ranks)."""
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
                    rank_host=tuple(int(h) for h in (host_of if host_of is not None else ())))


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
            host_of: Sequence[int] | None = None) -> list[ResolvedFault]:
    """The run's concrete faults on ``fabric`` (processes expanded), in time order; CosimInputError for
    an element the fabric lacks or the kind does not act on (``host_of``: rank -> host node id; None
    refuses ``rankN`` elements)."""
    if not faults:
        return []
    el = elements_of(fabric, host_of)
    out = []
    for n, (i, f) in enumerate(sorted(expand(faults, el, max_sim_time_ns), key=lambda x: x[1].at_ns)):
        kind = KINDS[f.kind]
        what, links, nodes = _element(el, f.element, kind, f"faults[{i}].element")
        end = f.end_ns
        out.append(ResolvedFault(index=n, fault=f, element_kind=what, links=np.asarray(links, np.int64),
                                 nodes=np.asarray(nodes, np.int64), at_ps=int(round(f.at_ns * 1e3)),
                                 until_ps=-1 if end is None or end >= max_sim_time_ns else int(round(end * 1e3))))
    return out
