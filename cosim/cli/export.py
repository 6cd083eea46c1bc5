"""``cosim export``: a results file as a timeline other tools open (Perfetto / chrome://tracing JSON)."""

from __future__ import annotations

import click

from cosim.cli.options import refuse_empty


class PortCount(click.ParamType):
    """``--ports``: a whole number of ports (>= 0) or ``all``."""

    name = "N|all"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "all":
            return None
        try:
            n = int(text)
        except ValueError:
            self.fail(f"{value!r} is neither a whole number nor 'all'", param, ctx)
        if n < 0:
            self.fail(f"{n} is negative (give a count >= 0 or 'all')", param, ctx)
        return n


@click.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--perfetto", "fmt", flag_value="perfetto",
              help="Chrome Trace Event JSON for ui.perfetto.dev and chrome://tracing (the only format so far).")
@click.option("-o", "--output", callback=refuse_empty, type=click.Path(dir_okay=False), default=None,
              help="File to write; a name ending in .gz is gzip-compressed.  [default: PATH with .json]")
@click.option("--run", "runs", multiple=True, metavar="NAME", callback=refuse_empty,
              help="Export only this run (repeatable). Default: every run, one process each.")
@click.option("--ports", type=PortCount(), default="8", show_default=True, metavar="N|all",
              help="Fabric counters (queue depth, PFC pauses, credit stalls): the N busiest ports of each, or all.")
@click.option("--flows/--no-flows", default=None,
              help="Flows as slices per source host [default: only for runs without training ops].")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="The workload trace of the runs, if the path stored in the run no longer finds it "
                   "(it names the ops and tells NVLink from network sends).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (a one-line summary per run otherwise).")
def export(path, fmt, output, runs, ports, flows, trace_path, quiet):
    """Export the runs of results file PATH as a timeline.

    \b
    --perfetto writes one process per run with tracks of:
      iterations                 one slice per training iteration
      rank R (hostH) compute     the rank's ops (NVLink, network: its communication;
                                 extra lanes #2... where ops overlap)
      TP/PP/DP/EP group G        the group's collective calls (kind, bytes, members)
      flows from hostH           flow runs: one slice per flow
      queue / PFC paused / credit stall <port>   counters of the busiest ports
    Open the file at https://ui.perfetto.dev (Open trace file) or chrome://tracing. Examples:
      cosim export --perfetto results.h5 -o results.json
      cosim export --perfetto sweep.h5 --run roce --ports all -o roce.json.gz
    """
    from pathlib import Path  # noqa: PLC0415

    from cosim.analysis.perfetto import export_perfetto  # noqa: PLC0415

    if fmt is None:
        raise click.UsageError("choose an export format: --perfetto")
    target = Path(output) if output is not None else Path(path).with_suffix(".json")
    stats = export_perfetto(path, target, runs=runs, ports=ports, flows=flows, trace_path=trace_path)
    if quiet:
        return
    for name, run in stats.runs.items():
        counters = ", ".join(f"{what}: {shown} of {total} ports" for what, (shown, total) in run["counter_tracks"].items())
        click.echo(f"{name}: {run['tracks']} tracks, {run['slices']} slices, {run['counter_samples']} counter "
                   f"samples" + (f" ({counters})" if counters else ""))
        for note in run["notes"]:
            click.echo(f"  note: {note}")
    click.echo(f"wrote {target}")
