"""``cosim compare``: runs side by side with deltas and ratios against a baseline."""

from __future__ import annotations

import click


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--baseline", metavar="NAME", help="Run the deltas and ratios are taken against (default: the first).")
@click.option("--run", "runs", multiple=True, metavar="NAME",
              help="Compare only these runs, in this order (repeatable; NAME or FILE:NAME).")
@click.option("--json", "fmt", flag_value="json", help="Print JSON: baseline, runs, and per metric the values, "
              "deltas and ratios by run, in the units of the summary keys (ns, B, ...).")
@click.option("--csv", "fmt", flag_value="csv", help="Print CSV: a line per metric, a column per run, then "
              "'delta RUN' and 'ratio RUN' columns (units of the summary keys).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file (atomically) "
              "instead of standard output.")
@click.option("--pivot/--full", default=None,
              help="--pivot: one table, a row per run, columns = the fields that differ between the runs' "
              "experiments (what a sweep varied), the key metrics and the ratio of the first against the "
              "baseline. --full: every metric, a column per run. [default: --pivot for more than 2 runs]")
@click.option("--metric", "metrics", multiple=True, metavar="KEY",
              help="Pivot and figure: these summary keys as columns, the first one divided in the ratio and "
              "drawn (repeatable; e.g. iteration_time_ns, fct_p99_ns, max_queue_bytes). Default: the run "
              "kind's key metrics.")
@click.option("--figure", "figure_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also draw the sweep figure into FILE (.png, .svg or .pdf): the first --metric against "
              "the swept value, a line per transport (per value of the other swept fields).")
@click.option("--x", "x_field", metavar="FIELD",
              help="The figure's x axis: a field that differs between the runs (link_gbps, BufferBytes, or the "
              "full key network.link_gbps). Default: the first numeric one that is not the transport.")
def compare(files, baseline, runs, fmt, output, pivot, metrics, figure_path, x_field):
    """Compare the runs of one or more results FILES: a row per metric, a column per run; or, for a sweep,
    a row per run (--pivot).

    \b
    Each run after the baseline gets its value, its delta (run - baseline) and its ratio (run / baseline).
    Runs are named by their run name, or FILE:RUN when several files hold the same name.
    With more than 2 runs the table is pivoted: a row per run, the swept fields and
    the key metrics as columns, one ratio column (--full for every metric). Examples:
      cosim compare results.h5                         # every run of one file
      cosim compare roce.h5 ib.h5                      # roce:incast vs ib:incast
      cosim compare sweep.h5 --baseline "dcqcn=true"   # a merged sweep: the pivot table
      cosim compare sweep.h5 --metric fct_p99_ns --figure fct.png   # FCT p99 against the swept value
      cosim compare a.h5 b.h5 --csv -o cmp.csv         # for a spreadsheet or pandas
      cosim compare a.h5 --json | jq '.metrics[] | select(.key=="fct_p99_ns")'
    """
    from cosim.results.compare import compare_runs, load_runs, resolve_run  # noqa: PLC0415

    # the comparison reads the summaries; every table's structure is checked, so a damaged file is refused
    records = load_runs(files, runs, tables=())
    base = resolve_run(records, baseline, option="--baseline") if baseline else None
    if pivot is None:
        pivot = len(records) > 2 and fmt is None
    if pivot or figure_path is not None or metrics:
        from cosim.results.pivot import pivot_runs  # noqa: PLC0415

        pivoted = pivot_runs(records, baseline=base, metrics=metrics)
    if figure_path is not None:
        _write_figure(pivoted, figure_path, x_field)
    table = pivoted if pivot else compare_runs(records, baseline=base)
    text = {"json": table.to_json, "csv": table.to_csv}.get(fmt, lambda: table.to_text() + "\n")()
    if output is None:
        click.echo(text, nl=False)
        return
    from cosim.h5io import atomic_output  # noqa: PLC0415

    with atomic_output(output) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _write_figure(table, path: str, x_field: str | None) -> None:
    """The sweep figure of ``table`` into ``path``, its format from the suffix."""
    from pathlib import Path  # noqa: PLC0415

    from cosim.analysis.plots import FORMATS, render  # noqa: PLC0415
    from cosim.analysis.sweep import sweep_figure  # noqa: PLC0415
    from cosim.errors import CosimInputError  # noqa: PLC0415
    from cosim.h5io import atomic_output  # noqa: PLC0415

    fmt = Path(path).suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise CosimInputError("--figure", f"{path!r} does not end in {', '.join('.' + f for f in FORMATS)}",
                              "name the file figure.png (or .svg, .pdf)")
    data = render(sweep_figure(table, x=x_field), fmt)
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
