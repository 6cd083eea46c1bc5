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
def compare(files, baseline, runs, fmt, output):
    """Compare the runs of one or more results FILES: a row per metric, a column per run.

    \b
    Each run after the baseline gets its value, its delta (run - baseline) and its ratio (run / baseline).
    Runs are named by their run name, or FILE:RUN when several files hold the same name. Examples:
      cosim compare results.h5                         # every run of one file
      cosim compare roce.h5 ib.h5                      # roce:incast vs ib:incast
      cosim compare sweep.h5 --baseline "dcqcn=true"   # a merged sweep
      cosim compare a.h5 b.h5 --csv -o cmp.csv         # for a spreadsheet or pandas
      cosim compare a.h5 --json | jq '.metrics[] | select(.key=="fct_p99_ns")'
    """
    from cosim.results.compare import compare_runs, load_runs, resolve_run  # noqa: PLC0415

    records = load_runs(files, runs)
    base = resolve_run(records, baseline, option="--baseline") if baseline else None
    table = compare_runs(records, baseline=base)
    text = {"json": table.to_json, "csv": table.to_csv}.get(fmt, lambda: table.to_text() + "\n")()
    if output is None:
        click.echo(text, nl=False)
        return
    from cosim.h5io import atomic_output  # noqa: PLC0415

    with atomic_output(output) as tmp:
        tmp.write_text(text, encoding="utf-8")
