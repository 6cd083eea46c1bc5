"""Option types shared by the CLI verbs: thin click wrappers around the kinds of cosim.values.

Only click, the standard library and cosim.values are imported here, so ``--help`` stays instant; a
field's kind is looked up in the Experiment specs only when a value is converted.
"""

from __future__ import annotations

import click

from cosim import values
from cosim.errors import CosimInputError


class FieldType(click.ParamType):
    """A command-line value of an Experiment field (``network.link_gbps``), read and checked by the
    field's own kind, the one TOML files, sweeps and the Python API use."""

    def __init__(self, path: str, name: str = "value"):
        self.path = path
        self.name = name

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        from cosim.spec import field_kind  # noqa: PLC0415 - loads the specs (numpy) only to convert

        try:
            return field_kind(self.path).from_text(value, self.path)
        except CosimInputError as exc:
            self.fail(f"{exc.problem}" + (f" ({exc.fix})" if exc.fix else ""), param, ctx)


SIZE = FieldType("workload.flow_bytes", "size")


def parse_assignments(assignments: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``("A::B=1", ...)`` → ``(("A::B", "1"), ...)``; a malformed item is a usage error naming it."""
    out = []
    for item in assignments:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise CosimInputError("--set", f"{item!r} is not NAME=VALUE")
            out.append((values.attribute_name("--set", name), values.attribute_value("--set", value)))
        except CosimInputError as exc:
            raise click.BadParameter(f"{item!r}: {exc.problem} (write Type::Attribute=value, e.g. "
                                     "HostNic::MtuBytes=1024)", param_hint="'--set'") from None
    return tuple(out)
