"""The registry of fault kinds: a kind is a :class:`FaultKind` subclass in its own module of
:mod:`cosim.faults.kinds`, registered with :func:`register`; nothing else dispatches on kind names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cosim import values as v
from cosim.errors import CosimInputError

#: element kinds a fault kind may take
ELEMENT_KINDS = ("link", "switch", "host", "rank")


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a fault kind: its value kind (cosim.values), default (None: not set) and help
    with its unit."""

    kind: v.Kind
    default: object
    doc: str


class FaultKind:
    """A kind of fault: the elements it acts on, its parameters, whether it has an end, its checks, and
    how it is applied to a run.

    ``code`` is the kind's value in the faults table's ``kind`` column (stable: never reuse one). A
    subclass overrides the hooks it needs; the defaults accept everything and change nothing.
    """

    name: ClassVar[str]
    code: ClassVar[int]
    elements: ClassVar[tuple[str, ...]]
    params: ClassVar[Mapping[str, Param]] = {}
    doc: ClassVar[str]
    #: duration_ns / up_at_ns apply
    timed: ClassVar[bool] = True

    def check(self, fault) -> None:
        """Raise CosimInputError for a combination of ``fault``'s parameters this kind refuses."""

    def check_transport(self, transport: str, where: str) -> None:
        """Raise CosimInputError (field ``where``) if a run on ``transport`` cannot have this kind."""

    def apply(self, resolved: Sequence, ctx) -> None:
        """Schedule every ResolvedFault of this kind of one run (in time order) through the FaultContext
        ``ctx``: called after the fabric is built and before flows or DAG ops are loaded."""

    def durations_ns(self, resolved: Sequence, duration_ns: np.ndarray, op_kind: np.ndarray, rank: np.ndarray,
                     iteration: np.ndarray, *, host_of: Sequence[int], seed: int) -> np.ndarray:
        """A training DAG's op durations with this kind's faults ``resolved`` applied, before the DAG is
        loaded (``host_of``: rank -> host node id); ``duration_ns`` itself when the kind leaves them."""
        return duration_ns


#: kind name -> its FaultKind; :func:`register` adds one
KINDS: dict[str, FaultKind] = {}


def register(cls: type[FaultKind]) -> type[FaultKind]:
    """Class decorator: add a FaultKind subclass to :data:`KINDS` (a name or code already taken, or an
    unknown element kind, is a programming error)."""
    kind = cls()
    if kind.name in KINDS or any(k.code == kind.code for k in KINDS.values()):
        raise ValueError(f"fault kind {kind.name!r} (code {kind.code}) is registered twice")
    bad = [e for e in kind.elements if e not in ELEMENT_KINDS]
    if bad:
        raise ValueError(f"fault kind {kind.name!r}: unknown element kind {bad[0]!r}")
    KINDS[kind.name] = kind
    return cls


def kind_names() -> tuple[str, ...]:
    """Registered kinds, in code order."""
    return tuple(k.name for k in sorted(KINDS.values(), key=lambda k: k.code))


def kind_of(name: str, where: str = "faults.kind") -> FaultKind:
    """The registered kind ``name``; CosimInputError naming the valid ones otherwise."""
    if not isinstance(name, str) or name not in KINDS:
        raise CosimInputError(where, f"unknown fault kind {name!r}", f"choose one of {', '.join(kind_names())}")
    return KINDS[name]
