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
              help="A timeline for ui.perfetto.dev: Perfetto's protobuf trace, or Chrome Trace Event JSON "
              "(--format json, which chrome://tracing also opens).")
@click.option("--format", "encoding", type=click.Choice(["proto", "json"]), default=None,
              help="proto: Perfetto's native protobuf trace (compact; ui.perfetto.dev and trace_processor); "
              "json: Chrome Trace Event JSON, exact to the picosecond.  [default: json for an -o name "
              "ending in .json or .json.gz, else proto]")
@click.option("-o", "--output", callback=refuse_empty, type=click.Path(dir_okay=False), default=None,
              help="File to write; a JSON name ending in .gz is gzip-compressed.  [default: PATH with .pftrace, "
              "or .json with --format json]")
@click.option("--run", "runs", multiple=True, metavar="NAME", callback=refuse_empty, help="Export only this run (repeatable). "
              "Default: every run, one process each.")
@click.option("--ports", type=PortCount(), default="8", show_default=True, metavar="N|all",
              help="Fabric counters (queue depth, PFC pauses, credit stalls): the N busiest ports of each, or all.")
@click.option("--all-samples", is_flag=True,
              help="Keep every stored counter sample. By default each counter track keeps at most 3 samples "
              "(the peak, the trough and the last value) per 1/2000 of the run's time: the same picture, "
              "a fraction of the size.")
@click.option("--flows/--no-flows", default=None,
              help="Flows as slices per source host [default: only for runs without training ops].")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="The workload trace of the runs, if the path stored in the run no longer finds it "
                   "(it names the ops and tells NVLink from network sends).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (a one-line summary per run otherwise).")
def export(path, fmt, encoding, output, runs, ports, all_samples, flows, trace_path, quiet):
    """Export the runs of results file PATH as a timeline.

    \b
    --perfetto writes one process per run with tracks of:
      iterations                 one slice per training iteration
      rank R (hostH) compute     the rank's ops (NVLink, network: its communication;
                                 extra lanes #2... where ops overlap)
      TP/PP/DP/EP group G        the group's collective calls (kind, bytes, members)
      flows from hostH           flow runs: one slice per flow
      queue / PFC paused / credit stall <port>   counters of the busiest ports
    Open the file at https://ui.perfetto.dev (Open trace file); a JSON export
    also opens in chrome://tracing. Examples:
      cosim export --perfetto results.h5                    # -> results.pftrace
      cosim export --perfetto results.h5 -o results.json    # JSON (from the name)
      cosim export --perfetto sweep.h5 --run roce --ports all --all-samples -o roce.json.gz
    """
    from pathlib import Path  # noqa: PLC0415

    from cosim.analysis.perfetto import (  # noqa: PLC0415
        COUNTER_BINS,
        FORMATS,
        export_perfetto,
        format_of,
    )

    if fmt is None:
        raise click.UsageError("choose an export format: --perfetto")
    target = Path(output) if output is not None else Path(path).with_suffix(FORMATS[encoding or "proto"])
    stats = export_perfetto(path, target, runs=runs, ports=ports, flows=flows, trace_path=trace_path,
                            fmt=format_of(target, encoding), counter_bins=None if all_samples else COUNTER_BINS)
    if quiet:
        return
    for name, run in stats.runs.items():
        counters = ", ".join(f"{what}: {shown} of {total} ports" for what, (shown, total) in run["counter_tracks"].items())
        kept = run["counter_samples"]
        of = f" of {run['counter_samples_stored']}" if run["counter_samples_stored"] != kept else ""
        click.echo(f"{name}: {run['tracks']} tracks, {run['slices']} slices, {kept}{of} counter "
                   f"samples" + (f" ({counters})" if counters else ""))
        for note in run["notes"]:
            click.echo(f"  note: {note}")
    click.echo(f"wrote {target}")
