"""Option types shared by the CLI verbs (click and the standard library only)."""

from __future__ import annotations

import re

import click

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


class SizeType(click.ParamType):
    """A byte count: an integer with an optional unit (``4096``, ``64KiB``, ``1.5MB``)."""

    name = "size"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        unit = m.group(2).lower() if m else None
        if not m or unit not in _UNITS:
            self.fail(f"{value!r} is not a size (examples: 4096, 64KiB, 1MB, 2GiB)", param, ctx)
        return int(round(float(m.group(1)) * _UNITS[unit]))


SIZE = SizeType()


def parse_assignments(assignments: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``("A::B=1", ...)`` → ``(("A::B", "1"), ...)``; a malformed item is a usage error naming it."""
    out = []
    for item in assignments:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE (e.g. HostNic::MtuBytes=1024)",
                                     param_hint="'--set'")
        out.append((name.strip(), value.strip()))
    return tuple(out)
