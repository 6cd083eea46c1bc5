"""``cosim plot``: figures of a results file (PNG by default), headless."""

from __future__ import annotations

import click

from cosim.analysis.figure_names import NAMES
from cosim.cli.options import refuse_empty


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "outdir", callback=refuse_empty, type=click.Path(file_okay=False), default="figures",
              show_default=True,
              help="Directory to write the figures into (created if needed).")
@click.option("--run", "runs", multiple=True, metavar="NAME", callback=refuse_empty,
              help="Plot only these runs (repeatable; NAME or FILE:NAME). Default: every run.")
@click.option("--format", "fmt", type=click.Choice(["png", "svg", "pdf"]), default="png", show_default=True,
              help="Image format.")
@click.option("--top", "top_n", type=click.IntRange(min=1), default=8, show_default=True,
              help="Queue-depth lines: this many hottest ports (highest peak).")
@click.option("--figure", "figures", multiple=True, type=click.Choice(NAMES), metavar="NAME",
              help="Draw only this figure (repeatable; the names below). Default: every figure.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (the list of written files is printed otherwise).")
def plot(files, outdir, runs, fmt, top_n, figures, quiet):
    """Draw the figures of results FILES into a directory.

    \b
    Shared axes, every run overlaid (how RoCE and InfiniBand runs are compared):
      fct-cdf, fct-slowdown-cdf, latency-cdf
      ttft-cdf, tpot-cdf (inference runs: time to first token, time per output token)
      sweep        3 or more runs: the key metric against the swept value, a line per
                   transport (cosim compare --figure draws any metric)
    Per run:
      queues-RUN         queue depth over time of the --top hottest egress ports
      queue-heatmap-RUN  port x time heatmap of queue depth, peak per bin
      pfc-pauses-RUN     PFC pause intervals per port and priority (when the run paused)
      credit-stalls-RUN  InfiniBand credit-stall intervals per port and VL (when present)
      iterations-RUN     per-rank compute / communication Gantt chart (co-simulation runs)
      requests-RUN       per-request queued / prefill / KV transfer / decode timeline (inference runs)
    Per run with faults (cosim run --fault; docs/models/faults.md):
      iteration-faults-RUN   iteration time around the faults, with the --baseline run's
      queues-faults-RUN      queue depth at the faulted element's switches, fault window
      neighbours-faults-RUN  throughput of the NICs on those switches (and without faults)
                             and flow slowdowns, fault window
      pfc-pauses-faults-RUN  PFC pause intervals, fault window
    The fault window runs from just before the first fault action to just after the
    last flow the fault hit has finished (cosim/analysis/fault_zoom.py).
    Ports are named by switch and the peer they face ("leaf1 -> spine0");
    each quantity is in the unit the 'cosim run' table shows it in.
    Figures whose data is absent are skipped and listed. Examples:
      cosim plot results.h5 -o figs
      cosim plot roce.h5 ib.h5 -o figs --format svg
      cosim plot sweep.h5 --run "dcqcn=false" --top 4
      cosim plot sweep.h5 --figure fct-cdf --figure queues   # only these
    """
    from cosim.analysis.figure_names import tables_for  # noqa: PLC0415
    from cosim.analysis.plots import write_figures  # noqa: PLC0415
    from cosim.results.compare import load_runs  # noqa: PLC0415

    records = load_runs(files, runs, tables=tables_for(figures))  # only what the chosen figures draw
    written, skipped = write_figures(records, outdir, fmt=fmt, top_n=top_n, names=figures)
    if quiet:
        return
    for path in written:
        click.echo(str(path))
    for stem, reason in skipped:
        click.echo(f"skipped {stem}: {reason}")
    click.echo(f"wrote {len(written)} figure(s) to {outdir}, skipped {len(skipped)}")
