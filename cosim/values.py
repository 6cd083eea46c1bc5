"""One conversion point per kind of value, shared by specs, TOML files, sweeps, the CLI and the Python API.

Each kind's :meth:`Kind.convert` takes what a user wrote (a Python value, a TOML value or a command-line
string) and returns the canonical value or raises :class:`cosim.errors.CosimInputError` naming the field
(``where``) and the fix; :meth:`Kind.from_text` first reads a command-line string. Spec dataclasses declare
a kind per field with :func:`spec_field` and call :func:`check_fields` in ``__post_init__``, so a value is
checked the same way wherever it came from (the pattern of click's ``ParamType.convert``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import re
from collections.abc import Mapping

from cosim.errors import CosimInputError

_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Kind:
    """A kind of value: ``convert`` checks and normalizes, ``from_text`` reads a command-line string."""

    name = "value"

    def convert(self, value, where: str):
        return value

    def from_text(self, text: str, where: str):
        return self.convert(text, where)

    def fail(self, where: str, problem: str, fix: str | None = None):
        raise CosimInputError(where, problem, fix)


@dataclasses.dataclass(frozen=True)
class Int(Kind):
    """A whole number in [minimum, maximum]; a float with an integral value is accepted."""

    minimum: int | None = None
    maximum: int | None = None
    name = "integer"

    def convert(self, value, where):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            self.fail(where, f"must be an integer, got {value!r}")
        value = int(value)
        if self.minimum is not None and value < self.minimum:
            self.fail(where, f"must be an integer >= {self.minimum}, got {_short(value)}")
        if self.maximum is not None and value > self.maximum:
            self.fail(where, f"must be an integer <= {self.maximum}, got {_short(value)}")
        return value

    def from_text(self, text, where):
        try:
            value = float(text) if re.fullmatch(r"\s*[0-9.]+[eE][0-9]+\s*", str(text)) else int(str(text))
        except ValueError:
            self.fail(where, f"{text!r} is not an integer")
        return self.convert(value, where)


@dataclasses.dataclass(frozen=True)
class Real(Kind):
    """A finite number; ``positive`` excludes 0, ``minimum``/``maximum`` bound it (inclusive)."""

    positive: bool = False
    minimum: float | None = None
    maximum: float | None = None
    name = "number"

    def convert(self, value, where):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not _finite(value):
            self.fail(where, f"must be a finite number, got {_short(value)}")
        value = float(value)
        if self.positive and not value > 0:
            self.fail(where, f"must be positive, got {value:g}")
        if self.minimum is not None and value < self.minimum:
            self.fail(where, f"must be >= {self.minimum:g}, got {value:g}")
        if self.maximum is not None and value > self.maximum:
            self.fail(where, f"must be <= {self.maximum:g}, got {value:g}")
        return value

    def from_text(self, text, where):
        try:
            value = float(text)
        except ValueError:
            self.fail(where, f"{text!r} is not a number")
        return self.convert(value, where)


def _finite(value: numbers.Real) -> bool:
    """True for a number a float holds finitely (an integer beyond 1.8e308 is not one)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _short(value) -> str:
    """``value`` for an error line: a huge integer by its size, not its 300 digits."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)


@dataclasses.dataclass(frozen=True)
class Bool(Kind):
    """true or false (on the command line also yes/no, on/off, 1/0)."""

    name = "boolean"

    def convert(self, value, where):
        if not isinstance(value, bool):
            self.fail(where, f"must be true or false, got {value!r}")
        return value

    def from_text(self, text, where):
        low = str(text).strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        self.fail(where, f"{text!r} is not true or false")


@dataclasses.dataclass(frozen=True)
class Choice(Kind):
    """One of a fixed set of names."""

    choices: tuple[str, ...]
    name = "choice"

    def convert(self, value, where):
        if value not in self.choices:
            self.fail(where, f"unknown value {value!r}", f"choose one of {', '.join(self.choices)}")
        return value


@dataclasses.dataclass(frozen=True)
class Text(Kind):
    """A string (``nonempty`` rejects ''), or a file path when ``path`` (os.PathLike accepted)."""

    nonempty: bool = False
    path: bool = False
    name = "text"

    def convert(self, value, where):
        if self.path and isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str):
            self.fail(where, f"must be a {'file path' if self.path else 'string'}, got {value!r}")
        if self.nonempty and not value:
            self.fail(where, "must not be empty")
        return value


@dataclasses.dataclass(frozen=True)
class RunName(Kind):
    """A run name: the group name of the run inside a results file."""

    name = "name"

    def convert(self, value, where):
        if not isinstance(value, str) or not value or "/" in value or value.startswith(".") or value != value.strip():
            self.fail(where, f"{value!r} is not a valid run name", "use letters, digits, - and _")
        return value


@dataclasses.dataclass(frozen=True)
class Size(Kind):
    """A byte count: an integer, or text with a unit (``4096``, ``64KiB``, ``1.5MB``); >= ``minimum``."""

    minimum: int = 0
    name = "size"

    def convert(self, value, where):
        if isinstance(value, str):
            m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", value)
            unit = m.group(2).lower() if m else None
            if not m or unit not in _SIZE_UNITS:
                self.fail(where, f"{value!r} is not a size", "examples: 4096, 64KiB, 1MB, 2GiB")
            number = float(m.group(1)) * _SIZE_UNITS[unit]
            if not math.isfinite(number) or number >= 2**63:
                self.fail(where, f"{value!r} is too large")
            value = int(round(number))
        return Int(minimum=self.minimum, maximum=2**63 - 1).convert(value, where)


@dataclasses.dataclass(frozen=True)
class Optional(Kind):
    """``None`` or a value of ``kind`` (on the command line: ``none`` or empty)."""

    kind: Kind
    name = "optional"

    def convert(self, value, where):
        return None if value is None else self.kind.convert(value, where)

    def from_text(self, text, where):
        return None if str(text).strip().lower() in ("", "none", "null") else self.kind.from_text(text, where)


@dataclasses.dataclass(frozen=True)
class Attributes(Kind):
    """ns-3 attribute settings: pairs or a mapping ``"Type::Attribute" -> value``; values become text.

    Stored as a tuple of (name, value) pairs in the order given, so later settings of one name win.
    """

    name = "attributes"

    def convert(self, value, where):
        items = value.items() if isinstance(value, Mapping) else value
        try:
            pairs = [(k, v) for k, v in items]
        except (TypeError, ValueError):
            self.fail(where, "must be a table of \"Type::Attribute\" = value (or name, value pairs)")
        return tuple((attribute_name(f"{where}", k), attribute_value(f"{where}.{k}", v)) for k, v in pairs)


def attribute_name(where: str, name) -> str:
    """An ns-3 attribute name ``Type::Attribute`` (``ns3::`` prefix allowed)."""
    if not isinstance(name, str) or "::" not in name or not all(p.strip() for p in name.split("::")):
        raise CosimInputError(where, f"{name!r} is not an ns-3 attribute name",
                              'write "Type::Attribute", e.g. "HostNic::MtuBytes"')
    return name.strip()


def attribute_value(where: str, value) -> str:
    """An attribute value as ns-3 reads it: text (true/false for booleans, numbers as written)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CosimInputError(where, f"must be a finite number, got {value!r}")
        return repr(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise CosimInputError(where, f"an ns-3 attribute value must be a non-empty string or a number, got {value!r}")


# ---------------------------------------------------------------- spec dataclasses

def spec_field(kind: Kind, default, doc: str):
    """A dataclass field checked by ``kind``; ``doc`` (with its unit) is the field's help text."""
    if isinstance(default, (dict, list)):
        raise TypeError("mutable default")
    return dataclasses.field(default=default, metadata={"kind": kind, "doc": doc})


def check_fields(spec, section: str) -> None:
    """Convert every field of the frozen dataclass ``spec`` through its kind (errors name ``section.field``)."""
    for f in dataclasses.fields(spec):
        kind = f.metadata.get("kind")
        if kind is not None:
            where = f"{section}.{f.name}" if section else f.name
            object.__setattr__(spec, f.name, kind.convert(getattr(spec, f.name), where))


def field_kind(cls, name: str) -> Kind:
    """The Kind of field ``name`` of spec class ``cls``."""
    return {f.name: f.metadata.get("kind", Kind()) for f in dataclasses.fields(cls)}[name]


def field_docs(cls) -> dict[str, str]:
    """Field name -> its help text, for spec class ``cls``."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}
