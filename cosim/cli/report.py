"""``cosim report``: one self-contained HTML page of results files."""

from __future__ import annotations

import click

from cosim.analysis.figure_names import NAMES
from cosim.cli.options import refuse_empty


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", callback=refuse_empty, type=click.Path(dir_okay=False), default="report.html",
              show_default=True,
              help="HTML file to write (atomically).")
@click.option("--run", "runs", multiple=True, metavar="NAME", callback=refuse_empty,
              help="Report only these runs (repeatable; NAME or FILE:NAME). Default: every run.")
@click.option("--baseline", metavar="NAME", help="Run the deltas and ratios are taken against (default: the first).")
@click.option("--title", default=None, help="Page title (default: the file names).")
@click.option("--top", "top_n", type=click.IntRange(min=1), default=8, show_default=True,
              help="Queue-depth lines: this many hottest ports.")
@click.option("--figure", "figures", multiple=True, type=click.Choice(NAMES), metavar="NAME",
              help="Embed only this figure (repeatable; names as 'cosim plot --help' lists them). "
              "Default: every figure.")
@click.option("-q", "--quiet", is_flag=True, help="Do not print the path written.")
def report(files, output, runs, baseline, title, top_n, figures, quiet):
    """Write one self-contained HTML page for results FILES.

    \b
    The page holds what each run was (workload, fabric as built, transport),
    the comparison table (as 'cosim compare': for more than 2 runs a row
    per run with the swept fields and key metrics, every metric folded
    below), every figure of 'cosim plot' embedded as PNG (--figure: only
    those), every field of each run's experiment (differences highlighted)
    and their provenance. It needs no other file: mail it,
    attach it to a ticket, open it offline. Examples:
      cosim report results.h5                      # -> report.html
      cosim report roce.h5 ib.h5 -o roce-vs-ib.html --baseline roce:incast
      cosim report sweep.h5 --figure fct-cdf --figure pfc-pauses   # a lighter page
    """
    from cosim.analysis.figure_names import tables_for  # noqa: PLC0415
    from cosim.analysis.report import write_report  # noqa: PLC0415
    from cosim.results.compare import load_runs, resolve_run  # noqa: PLC0415

    records = load_runs(files, runs, tables=tables_for(figures))  # only what the chosen figures draw
    base = resolve_run(records, baseline, option="--baseline") if baseline else None
    path = write_report(records, output, title=title or "cosim report: " + ", ".join(files), sources=files,
                        baseline=base, top_n=top_n, figures=figures)
    if not quiet:
        click.echo(f"wrote {path} ({len(records)} run(s))")
