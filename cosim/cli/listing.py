"""``cosim list``: what a user can choose, read from the registries in code (nothing listed twice).

Sections and where each comes from:

- experiments: the shipped TOML files (``cosim.spec.catalog``), with their descriptions;
- models, gpus: the workload presets (``cosim.workload.model.PRESETS``, ``cosim.workload.hardware``), the
  tables ``cosim trace --list-models`` and ``--list-gpus`` print;
- topologies: ``cosim.network.topology.GENERATORS``, described by their generators' docstrings;
- transports: ``cosim.network.transport.TRANSPORTS``, described by that module's docstring, with the ns-3
  attributes each one sets;
- algorithms: ``cosim.collectives.lower.ALGORITHM_NAMES`` and the collective kinds that take each;
- patterns: the flow patterns of ``cosim.spec.PATTERNS``, described by FlowWorkload's docstring;
- faults: the fault kinds of ``cosim.faults.KINDS``, with the elements they take and their parameters.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import click

#: section name -> what it lists (the order ``cosim list`` prints them in)
SECTIONS = {
    "experiments": "shipped experiments: cosim run NAME",
    "models": "model presets: cosim trace --model NAME, workload.model",
    "gpus": "GPU presets: cosim trace --gpu NAME, workload.gpu",
    "topologies": "topologies: --topology NAME, network.topology",
    "transports": "transports: --transport NAME (or both), network.transport",
    "algorithms": "collective algorithms: --algorithm NAME, workload.algorithm",
    "patterns": "flow traffic patterns: --pattern NAME, workload.pattern",
    "faults": "fault kinds: --fault KIND:ELEMENT@TIME[,key=value...], [[faults]] kind",
}


def _one_line(text: str | None) -> str:
    """The first sentence of a docstring, on one line, without reST literals."""
    flat = " ".join((text or "").split()).replace("``", "")
    return re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]


def experiments() -> list[tuple[str, str]]:
    """(name, description) of every shipped experiment."""
    from cosim.spec import (
        catalog,  # noqa: PLC0415
        read_toml,  # noqa: PLC0415
    )

    return [(n, str(read_toml(catalog.path_of(n)).get("description", ""))) for n in catalog.names()]


def models() -> list[tuple[str, str]]:
    """(name, layers, hidden size and parameters) of every model preset."""
    from cosim.workload.model import PRESETS, total_params  # noqa: PLC0415

    return [(n, f"{m.num_layers} layers, hidden {m.hidden_size}, {total_params(m) / 1e9:.2f}B parameters"
             + (f", {m.num_experts} experts (top-{m.top_k})" if m.num_experts > 1 else ""))
            for n, m in PRESETS.items()]


def gpus() -> list[tuple[str, str]]:
    """(name, peak bf16 FLOP/s, HBM, NVLink and aliases) of every GPU preset."""
    from cosim.workload.hardware import ALIASES, get_hardware, preset_names  # noqa: PLC0415

    rows = []
    for n, h in ((name, get_hardware(name)) for name in preset_names()):
        aliases = sorted(a for a, target in ALIASES.items() if target == n)
        rows.append((n, f"{h.peak_flops_per_s / 1e12:.0f} TFLOP/s bf16, {h.hbm_bytes / 2**30:.0f} GiB HBM, "
                        f"NVLink {h.nvlink_bytes_per_s / 1e9:.0f} GB/s per direction"
                        + (f" (also {', '.join(aliases)})" if aliases else "")))
    return rows


def topologies() -> list[tuple[str, str]]:
    """(name, first sentence of its generator's docstring) of every topology."""
    from cosim.network.fabrics import DESCRIPTIONS, GENERATORS, TOPOLOGIES  # noqa: PLC0415

    return [(n, DESCRIPTIONS.get(n) or _one_line(GENERATORS[n].__doc__)) for n in TOPOLOGIES]


def transports() -> list[tuple[str, str]]:
    """(name, its bullet in cosim.network.transport's docstring and the attributes it sets) per transport."""
    from cosim.network import transport  # noqa: PLC0415

    bullets = dict(re.findall(r"^- ``(\w+)``: (.*?)(?=^- |\n\n|\Z)", transport.__doc__ or "", re.M | re.S))
    rows = []
    for n in transport.TRANSPORTS:
        sets = ", ".join(f"{k}={v}" for k, v in transport.transport_attributes(n).items())
        rows.append((n, f"{' '.join(bullets.get(n, '').split()).replace('``', '')} Sets {sets}."))
    return rows


def algorithms() -> list[tuple[str, str]]:
    """(name, the collective kinds that take it) of every collective algorithm."""
    from cosim.collectives.lower import ALGORITHM_NAMES, algorithm_table  # noqa: PLC0415

    rows = []
    for n in ALGORITHM_NAMES:
        kinds = [k.name.lower().replace("_", "-") for k, chosen in algorithm_table(n).items() if chosen == n]
        what = "each collective's default" if n == "auto" else "lowers " + ", ".join(kinds)
        rows.append((n, what + (" (auto elsewhere)" if n != "auto" else "")))
    return rows


def patterns() -> list[tuple[str, str]]:
    """(name, its description in FlowWorkload's docstring) of every flow pattern."""
    from cosim.spec import PATTERNS, FlowWorkload  # noqa: PLC0415

    doc = " ".join((FlowWorkload.__doc__ or "").split())
    found = dict(re.findall(r"(\w+): ([^;]+?)(?:;|\.(?:\s|$))", doc))
    return [(n, found.get(n, "")) for n in PATTERNS]


def faults() -> list[tuple[str, str]]:
    """(name, what it does, the elements it takes and its parameters) of every registered fault kind."""
    from cosim.faults import KINDS, kind_names  # noqa: PLC0415

    rows = []
    for n in kind_names():
        k = KINDS[n]
        params = "; ".join(f"{p} ({spec.doc})" for p, spec in k.params.items())
        rows.append((n, f"{k.doc}. Elements: {', '.join(k.elements)}." + (f" Parameters: {params}." if params else "")))
    return rows


#: section -> its rows
LISTERS = {"experiments": experiments, "models": models, "gpus": gpus, "topologies": topologies,
           "transports": transports, "algorithms": algorithms, "patterns": patterns, "faults": faults}


def render(rows: list[tuple[str, str]], width: int = 100) -> str:
    """Names in a column, descriptions beside them, wrapped to ``width`` characters."""
    column = max((len(n) for n, _ in rows), default=0) + 4
    wrap = textwrap.TextWrapper(width=max(column + 30, width), subsequent_indent=" " * column)
    return "\n".join(wrap.fill(f"  {n:<{column - 2}}{d}").rstrip() for n, d in rows)


EPILOG = """\b
Examples:
  cosim list                 # every section
  cosim list topologies      # one section
  cosim list models gpus     # several
  cosim list --json          # {section: [{"name": ..., "description": ...}]}
"""


@click.command("list", epilog=EPILOG)
@click.argument("what", nargs=-1, type=click.Choice(list(SECTIONS)))
@click.option("--json", "as_json", is_flag=True, help="Print JSON: each section a list of {name, description}.")
def list_command(what: tuple[str, ...], as_json: bool) -> None:
    """List what an experiment can name: shipped experiments, model and GPU presets, topologies,
    transports, collective algorithms, flow patterns and fault kinds.

    WHAT is one or more of experiments, models, gpus, topologies, transports, algorithms, patterns, faults
    (default: all). The names come from the registries in code, so what is listed is what is accepted.
    """
    chosen = list(dict.fromkeys(what)) or list(SECTIONS)
    tables = {s: LISTERS[s]() for s in chosen}
    if as_json:
        click.echo(json.dumps({s: [{"name": n, "description": d} for n, d in rows] for s, rows in tables.items()},
                              indent=1))
        return
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    click.echo("\n\n".join(f"{SECTIONS[s]}\n{render(rows, width)}" for s, rows in tables.items()))
