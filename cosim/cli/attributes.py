"""``cosim attributes``: every ns-3 attribute of the cosim models, read from their TypeIds.

What ``--set Type::Attribute=value`` can change, with its default (written as --set takes it), its unit,
what values it accepts and the model's help text. The list comes from the loaded plugin
(``cosim.engine.list_attributes``, i.e. Engine::ListAttributes), so it is never out of date with the C++.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import click

from cosim.errors import CosimInputError

#: largest value of each C integer type a checker names: a range up to it has no upper bound in practice
_TYPE_MAX = {"uint8_t": 2**8 - 1, "uint16_t": 2**16 - 1, "uint32_t": 2**32 - 1, "uint64_t": 2**64 - 1,
             "int8_t": 2**7 - 1, "int16_t": 2**15 - 1, "int32_t": 2**31 - 1, "int64_t": 2**63 - 1}
#: ns-3 Time units by size, in ps, largest first
_TIME_UNITS = (("s", 10**12), ("ms", 10**9), ("us", 10**6), ("ns", 10**3), ("ps", 1))
_TIME_SCALE_PS = {"y": 365 * 86400 * 10**12, "d": 86400 * 10**12, "h": 3600 * 10**12, "min": 60 * 10**12,
                  "s": 10**12, "ms": 10**9, "us": 10**6, "ns": 10**3, "ps": 1, "fs": 1e-3, "": 10**12}
#: data-rate units by size, in bit/s, largest first: the ones ns-3's DataRate reads (it has no Tbps)
_RATE_UNITS = (("Gbps", 10**9), ("Mbps", 10**6), ("kbps", 10**3), ("bps", 1))


def unit_of(info) -> str:
    """The unit of an attribute's values: from its value type (Time, DataRate), its name (``...Bytes``) or
    what its help says (dimensionless, a count, quanta or units of something); "" if it has none."""
    if info.value_type == "ns3::TimeValue":
        return "time"
    if info.value_type == "ns3::DataRateValue":
        return "bit/s"
    if info.value_type not in ("ns3::UintegerValue", "ns3::IntegerValue", "ns3::DoubleValue", "ns3::StringValue"):
        return ""
    if info.name.endswith("Bytes"):
        return "bytes"
    if "dimensionless" in info.help:
        return "dimensionless"
    if "(a count" in info.help:
        return "count"
    if found := re.search(r"\bin ((?:quanta|units) of [^;,.()]+)", info.help):
        return found.group(1).strip()
    return ""


def _time_ps(text: str) -> float:
    """Picoseconds of an ns-3 Time string ("+1000ns", "+1e+06ns", "2us")."""
    found = re.fullmatch(r"([+-]?[0-9.eE+-]+?)(y|d|h|min|s|ms|us|ns|ps|fs)?", text.strip())
    if not found:
        return float("nan")
    return float(found.group(1)) * _TIME_SCALE_PS[found.group(2) or ""]


def _in_units(value: float, units) -> str:
    """``value`` (in the smallest of ``units``) written in the largest unit that keeps it a whole number."""
    if not abs(value) < float("inf"):  # nan, inf
        return f"{value:g}{units[-1][0]}"
    whole = round(value)
    if whole == 0:
        return f"0{units[0][0]}"
    for unit, scale in units:
        if whole % scale == 0:
            return f"{whole // scale}{unit}"
    return f"{value:g}{units[-1][0]}"


def shown_value(info, value: str) -> str:
    """An attribute value as --set takes it and people read it: "+1000ns" → "1us", "100000000000bps" →
    "100Gbps"; other types unchanged."""
    if info.value_type == "ns3::TimeValue":
        return _in_units(_time_ps(value), _TIME_UNITS)
    if info.value_type == "ns3::DataRateValue" and value.endswith("bps") and value[:-3].isdigit():
        return _in_units(float(value[:-3]), _RATE_UNITS)
    return value


def accepted_text(info) -> str:
    """What --set takes for the attribute, in words: "1..8", ">= 64", "pfc|credit", "0s..100000s",
    "1Mbps..1000000Gbps": every bound written as --set accepts it (the engine refuses negative times, so a
    time checker's negative minimum reads 0s)."""
    accepted = info.accepted
    if info.value_type == "ns3::PointerValue":
        pointee = re.sub(r"^ns3::Ptr<\s*(ns3::)?|\s*>$", "", accepted)
        return f"a model object: set {pointee}::* attributes instead"
    if info.value_type == "ns3::BooleanValue":
        return "true|false"
    if info.value_type == "ns3::StringValue":
        return "text"
    kind, _, bounds = accepted.partition(" ")
    lo, sep, hi = bounds.partition(":")
    if not sep:
        return accepted
    if info.value_type == "ns3::TimeValue":
        return f"{shown_value(info, lo) if _time_ps(lo) > 0 else '0s'}..{shown_value(info, hi)}"
    if info.value_type == "ns3::DataRateValue":
        return f"{shown_value(info, lo)}..{shown_value(info, hi)}"
    if kind == "double":
        lo, hi = _inside(lo, +1), _inside(hi, -1)
    if kind in _TYPE_MAX and hi.isdigit() and int(hi) == _TYPE_MAX[kind]:
        return f">= {lo}"
    return f"{lo}..{hi}"


def _inside(bound: str, direction: int) -> str:
    """A double checker's bound as the checker wrote it with 6 significant digits (1/1024 → "0.000976562"),
    moved by one unit of its last digit towards the inside of the range when it may have been rounded, so
    that --set accepts it ("0.000976563")."""
    from decimal import Decimal, InvalidOperation  # noqa: PLC0415

    try:
        d = Decimal(bound)
    except InvalidOperation:
        return bound
    sign, digits, exponent = d.normalize().as_tuple()
    if len(digits) < 6 or not isinstance(exponent, int):
        return bound
    return str(d.normalize() + direction * Decimal((0, (1,), exponent)))


def describe(info, run_set: dict[str, str], run_defaults: dict[str, str] | None = None) -> dict:
    """One attribute as the verb shows it (and as --json writes it); ``run_default`` says what a run uses
    instead of the static default, when that follows the fabric, the transport or the workload."""
    type_name, _, attribute = info.name.partition("::")
    return {"name": info.name, "type": type_name, "attribute": attribute, "value_type": info.value_type,
            "default": shown_value(info, info.default), "ns3_default": info.default, "unit": unit_of(info),
            "accepted": accepted_text(info), "help": info.help, "set_by_run": run_set.get(info.name),
            "run_default": (run_defaults or {}).get(info.name)}


def select(rows: list[dict], which: str | None) -> list[dict]:
    """The rows ``which`` names: a model (``HostNic``), one attribute (``HostNic::MtuBytes``) or an attribute
    name in any model (``MtuBytes``), case-insensitive; all rows for None. Nothing matched: CosimInputError
    listing close matches."""
    if which is None:
        return rows
    key = which.removeprefix("ns3::").lower()
    for field in ("type", "name", "attribute"):
        chosen = [r for r in rows if r[field].lower() == key]
        if chosen:
            return chosen
    import difflib  # noqa: PLC0415

    types = sorted({r["type"] for r in rows})
    # what each spelling (model, Model::Attribute, bare attribute) would have meant, lower-cased
    meaning = {r["attribute"].lower(): r["name"] for r in rows}
    meaning |= {r["name"].lower(): r["name"] for r in rows} | {t.lower(): t for t in types}
    close = [meaning[n] for n in difflib.get_close_matches(key, meaning, n=4, cutoff=0.6)]
    close += [m for n, m in meaning.items() if key in n]
    close = list(dict.fromkeys(close))[:4]
    hint = f"close matches: {', '.join(close)}" if close else f"models: {', '.join(types)}"
    raise CosimInputError("TYPE", f"no cosim model or attribute named {which!r}", hint)


def render(rows: list[dict], width: int) -> str:
    """The text listing: one block per model (TypeId), each attribute with default, unit, range and help."""
    lines: list[str] = []
    wrap = textwrap.TextWrapper(width=max(40, width), initial_indent=" " * 6, subsequent_indent=" " * 6)
    for type_name in sorted({r["type"] for r in rows}):
        mine = [r for r in rows if r["type"] == type_name]
        lines.append(f"{type_name} ({len(mine)} attribute{'s' if len(mine) != 1 else ''})")
        for r in mine:
            facts = ", ".join(x for x in (r["unit"], r["accepted"]) if x)
            value = "" if r["value_type"] == "ns3::PointerValue" else f" = {r['default']}"
            lines.append(f"  {r['attribute']}{value}" + (f"  [{facts}]" if facts else ""))
            if r.get("run_default"):
                lines.extend(wrap.wrap(f"In a run: {r['run_default']}."))
            lines.extend(wrap.wrap(r["help"]))
            if r["set_by_run"]:
                lines.extend(wrap.wrap(f"Set by every run from {r['set_by_run']}: use that, not --set."))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


EPILOG = """\b
Examples:
  cosim attributes                      # every model, grouped by TypeId
  cosim attributes HostNic              # one model
  cosim attributes HostNic::MtuBytes    # one attribute (MtuBytes alone finds it too)
  cosim attributes --json > attrs.json  # for scripts: one object per attribute
  cosim run --set HostNic::MtuBytes=1024 --set SharedBufferMmu::BufferBytes=16000000 -o r.h5

Defaults and ranges are written as --set takes them (1us, 100Gbps, 4096). Times take ns-3 units (ps, ns,
us, ms, s), rates bps, kbps, Mbps, Gbps (or B/s for bytes per second). "In a run" gives the default a run
uses where it follows the fabric or the transport (a switch's buffer by its class, RoCE or InfiniBand
framing); cosim run --dry-run shows the values of one run. Attributes marked "set by every run" come
from an experiment field; use its option instead.
"""


@click.command("attributes", epilog=EPILOG, context_settings={"max_content_width": 100})
@click.argument("which", metavar="[TYPE]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of attributes (name, type, attribute, "
              "value_type, default, ns3_default, unit, accepted, help, set_by_run, run_default) instead of text.")
def attributes(which: str | None, as_json: bool) -> None:
    """List the ns-3 attributes of cosim's models: what --set can change, with defaults, units and help.

    TYPE is a model (HostNic, FabricSwitch, SharedBufferMmu, ...), one attribute (HostNic::MtuBytes) or an
    attribute name (MtuBytes); without it every model is listed. Loads the simulator library (~3 s).
    """
    from cosim import engine  # noqa: PLC0415
    from cosim.network.attribute_defaults import run_defaults  # noqa: PLC0415
    from cosim.network.transport import RUN_SET_ATTRIBUTES  # noqa: PLC0415

    infos = engine.list_attributes()
    defaults = run_defaults({i.name: i.default for i in infos})
    rows = [describe(info, RUN_SET_ATTRIBUTES, defaults) for info in infos]
    rows = select(rows, which)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    click.echo(render(rows, min(shutil.get_terminal_size((100, 24)).columns, 110)), nl=False)
