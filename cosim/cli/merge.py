"""``cosim merge``: gather the point files of a sweep into one results file."""

from __future__ import annotations

import click

from cosim.cli.options import quiet_library_logs, refuse_empty


@click.command()
@click.argument("outdir", type=click.Path(file_okay=False))
@click.option("-o", "--output", callback=refuse_empty, type=click.Path(dir_okay=False), default=None,
              help="Results file to write (atomically). Default: OUTDIR.h5 beside the directory.")
@click.option("--summary-only", is_flag=True, help="Keep only each run's config, provenance and summary "
              "(a small file for 'cosim compare'); default: every table of every run.")
@click.option("--partial", is_flag=True, help="Merge the points that have results and list the missing ones "
              "(default: missing points are an error).")
@click.option("--sweep", "sweep_name", metavar="NAME", help="Merge only sweep NAME when OUTDIR holds several.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def merge(outdir, output, summary_only, partial, sweep_name, quiet):
    """Merge the results files of a sweep directory OUTDIR (or the parts of decomposed runs written by
    'cosim run --parts-dir OUTDIR') into one results file.

    \b
    Points come from the sweep's manifest (OUTDIR/<sweep>.sweep.json), in point order, each run under its
    point's run name, so the merge of N shards equals a single-process sweep. The result reads like any
    results file ('cosim compare', 'cosim report', cosim.results.open). Examples:
      cosim merge ecn-sweep -o ecn.h5
      cosim merge ecn-sweep -o ecn-summary.h5 --summary-only
      cosim merge ecn-sweep --partial          # while shards are still running
      cosim merge parts -o big.h5              # after 'cosim run big.toml --parts-dir parts --shard I/N'
    """
    quiet_library_logs(quiet)
    from pathlib import Path  # noqa: PLC0415

    from cosim.batch import manifests, merge_parts  # noqa: PLC0415
    from cosim.sweep.merge import merge as do_merge  # noqa: PLC0415

    out = Path(output) if output else Path(str(Path(outdir)).rstrip("/") + ".h5")
    if Path(outdir).is_dir() and manifests(outdir):  # the parts of decomposed runs (cosim run --parts-dir)
        runs = merge_parts(outdir, out)
        if not quiet:
            click.echo(f"wrote {out}: {len(runs)} run(s) from their parts")
        return
    result = do_merge(outdir, out, summary_only=summary_only, partial=partial, sweep=sweep_name)
    if quiet:
        return
    for path in result.missing:
        click.echo(f"missing {path}", err=True)
    click.echo(f"wrote {result.path}: {len(result.runs)} run(s)"
               + (f", {len(result.missing)} point(s) missing" if result.missing else ""))
