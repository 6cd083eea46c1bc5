"""Option types shared by the CLI verbs: thin click wrappers around the kinds of cosim.values.

Only click, the standard library and cosim.values are imported here, so ``--help`` stays instant; a
field's kind is looked up in the Experiment specs only when a value is converted.
"""

from __future__ import annotations

import logging

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
        if not value.strip():
            self.fail("must not be empty (leave the option out for the default)", param, ctx)
        from cosim.spec import field_kind  # noqa: PLC0415 - loads the specs (numpy) only to convert

        try:
            return field_kind(self.path).from_text(value, self.path)
        except CosimInputError as exc:
            self.fail(f"{exc.problem}" + (f" ({exc.fix})" if exc.fix else ""), param, ctx)


SIZE = FieldType("workload.flow_bytes", "size")


SET_HELP = ("Set any experiment field or ns-3 attribute (repeatable): a dotted path or a 'cosim run' "
            "shorthand (workload.iterations=3, workload.parallelism.tp=4, network.transport=ib, hosts=16; "
            "'cosim run NAME --dry-run' prints every field) or Type::Attribute (HostNic::MtuBytes=1024; "
            "'cosim attributes' lists them).")


def refuse_empty(ctx, param, value):
    """Click callback: an option given as '' (or blanks) is an error, never "the default"."""
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, str) and not item.strip():
            fix = "" if param is not None and param.required else " (leave the option out for the default)"
            raise click.BadParameter(f"must not be empty{fix}", ctx, param)
    return value


def _once(seen: dict, path: tuple[str, ...], name: str) -> None:
    """Refuse a field set twice (by two spellings, or twice the same): which one wins would be their order."""
    if path in seen:
        raise CosimInputError(name, f"is set twice (also as {seen[path]})", "give it once")
    seen[path] = name


def parse_settings(assignments: tuple[str, ...]) -> dict[str, object]:
    """``--set`` items → with_overrides keys and values: ``Type::Attribute=value`` → ``attributes.Type::Attribute``
    (text, checked when the run is compiled), ``path=value`` (a dotted Experiment path or a shorthand) → that
    path with the value read by the field's kind. A malformed item or an unknown field is a usage error naming
    it and the valid fields."""
    from cosim.spec import field_kind, resolve_path  # noqa: PLC0415 - loads the specs (numpy) only to convert

    out: dict[str, object] = {}
    seen: dict[tuple[str, ...], str] = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            if not sep or not name:
                raise CosimInputError(repr(item), "is not NAME=VALUE", "e.g. --set workload.iterations=3 or "
                                      "--set HostNic::MtuBytes=1024")
            if "::" in name.removeprefix("attributes.").removeprefix("network.attributes."):
                attribute = name.removeprefix("network.").removeprefix("attributes.")
                key = f"attributes.{values.attribute_name(name, attribute)}"
                _once(seen, ("attributes", attribute.removeprefix("ns3::")), name)
                out[key] = values.attribute_value(name, value)
                continue
            if not value.strip():
                raise CosimInputError(name, "must not be empty", "give a value, or leave the field out")
            if resolve_path(name) == ["faults"]:
                raise CosimInputError(name, "is a list of fault tables", "use --fault KIND:ELEMENT@TIME")
            _once(seen, tuple(resolve_path(name)), name)
            path = ".".join(resolve_path(name))
            out[name] = field_kind(path).from_text(value.strip(), path)
        except CosimInputError as exc:
            raise click.BadParameter(str(exc), param_hint="'--set'") from None
    return out


def quiet_library_logs(quiet: bool) -> None:
    """Under ``-q`` the library's notices (``waiting: another cosim is writing...``) are not printed; its
    errors still are. Worker processes take the level over (cosim.workers.worker_init); the level is put back
    when the command ends, for callers that run several commands in one process."""
    if quiet:
        logger = logging.getLogger("cosim")
        click.get_current_context().call_on_close(lambda level=logger.level: logger.setLevel(level))
        logger.setLevel(logging.ERROR)
