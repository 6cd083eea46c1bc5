"""``cosim sweep``: run a TOML grid of experiments, one results file per point, shardable."""

from __future__ import annotations

import sys
import time

import click

from cosim.cli.options import SET_HELP, parse_settings, quiet_library_logs, refuse_empty


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _interrupted(outcome, out) -> None:
    """End a sweep stopped by SIGTERM: say which points were stopped and what is kept, exit 143 (128 +
    SIGTERM) as a terminated process does, so a batch system still sees the job as stopped."""
    stopped = [r for r in outcome.results if r.status == "interrupted"]
    kept = [r for r in outcome.results if r.status not in ("interrupted", "error")]
    parts = [f"{len(kept)} point(s) finished here and {len(outcome.skipped)} before are kept in {out}"]
    written = [str(r.index) for r in stopped if not r.error]
    lost = [str(r.index) for r in stopped if r.error]
    if written:
        parts.append(f"point(s) {', '.join(written)} written with status interrupted")
    if lost:
        parts.append(f"point(s) {', '.join(lost)} stopped before anything was written")
    not_run = len(outcome.selected) - len(outcome.skipped) - len(outcome.results)
    if not_run:
        parts.append(f"{not_run} point(s) not started")
    click.echo(f"Error: interrupted by SIGTERM: {'; '.join(parts)}; rerun the same command to run what is "
               "missing or interrupted", err=True)
    sys.exit(143)


@click.command()
@click.argument("spec_file", metavar="SWEEP.toml", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "outdir", type=click.Path(file_okay=False), default=None, callback=refuse_empty,
              help="Directory of the point files (default: the sweep's name).")
@click.option("--set", "assignments", multiple=True, metavar="FIELD=VALUE",
              help=SET_HELP.replace("(repeatable)", "on every point (repeatable; not a field the sweep varies)"))
@click.option("--shard", metavar="I/N", default=None, callback=refuse_empty,
              help="Run only points with index % N == I (0-based). "
              "Default: from SLURM_ARRAY_TASK_ID/COUNT in a Slurm job array, else 0/1 (every point).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Local worker processes (each runs one simulation at a time).")
@click.option("--dry-run", is_flag=True, help="Validate the sweep and list its points (file, state, run name); "
              "run nothing.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no final line (errors still go to stderr).")
@click.option("-v", "--verbose", is_flag=True, help="Progress even when stderr is not a terminal, plus the "
              "shard, skipped points and files written.")
def sweep(spec_file, outdir, assignments, shard, jobs, dry_run, quiet, verbose):
    """Run every point of the sweep in SWEEP.toml, one results file per point.

    \b
    A sweep starts from an experiment ([sweep] experiment = NAME or FILE.toml; default a flow experiment),
    sets [base] fields on every point (the shorthands of 'cosim run' such as hosts, dcqcn, iterations,
    or dotted paths such as "network.link_gbps"), [base.attributes] ns-3 attributes, and a [grid] of
    lists whose cartesian product gives the points:
      [sweep]
      experiment = "builtin"
      [grid]
      transport = ["roce", "ib"]
      "workload.iterations" = [1, 2]
      attributes."SharedBufferMmu::BufferBytes" = [16000000, 32000000]
    (optional [[points]] tables add explicit points). The whole sweep is validated before anything runs.
    Point i is written to OUTDIR/<sweep>-<i:04d>-<hash>.h5 atomically; points whose file exists and
    reads back are skipped, so rerunning a killed or failed sweep redoes only what is missing.
    Examples:
      cosim sweep docs/examples/sweep.toml -o ecn --dry-run
      cosim sweep docs/examples/sweep.toml -o ecn -j 4
      cosim sweep docs/examples/sweep.toml -o ecn --shard 2/8   # or in an sbatch --array job
      cosim sweep docs/examples/sweep.toml -o ecn-400 --set link_gbps=400 --dry-run
      cosim merge ecn -o ecn.h5 && cosim compare ecn.h5
    SIGTERM (a batch system's time limit) stops the running points where they are and writes them with
    status interrupted (a rerun redoes them); no new point starts.
    Exit codes: 0 every point done, 1 some point failed or did not complete, 2 bad input, 143 SIGTERM.
    """
    quiet_library_logs(quiet)
    import os  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from cosim.sweep import runner  # noqa: PLC0415
    from cosim.sweep.spec import load_sweep, preflight  # noqa: PLC0415

    spec = load_sweep(spec_file, parse_settings(assignments))
    where = "--shard"
    if shard is not None:
        part = runner.parse_shard(shard)
    else:
        part = runner.shard_from_env(os.environ)
        where = "Slurm array" if part else "default"
        part = part or (0, 1)
    preflight(spec)
    for line in spec.warnings:  # said once the whole sweep is checked: bad input stays one line
        click.echo(f"Warning: {line}", err=True)
    out = Path(outdir) if outdir else Path(spec.name)
    show = not quiet and (verbose or sys.stderr.isatty())
    log = (lambda msg: click.echo(msg, err=True)) if show and verbose else (lambda msg: None)  # noqa: E731
    log(f"sweep {spec.name}: {len(spec.points)} point(s) from {spec_file}; shard {part[0]}/{part[1]} ({where})")

    if dry_run:
        todo, done = runner.plan(spec, out, part)
        finished = {p.index for p in done}
        for p in sorted(todo + done, key=lambda p: p.index):
            state = "done" if p.index in finished else "todo"
            click.echo(f"{p.index:4d}  {p.file_name}  {state}  {p.run_name}")
        if not quiet:
            click.echo(f"sweep {spec.name}: shard {part[0]}/{part[1]}: {len(todo) + len(done)} of "
                       f"{len(spec.points)} point(s), {len(done)} done, {len(todo)} to run -> {out}")
        return

    t0 = time.monotonic()

    def progress(res, n_done, total):
        """One line per finished point: done/total, its wall time, elapsed and ETA."""
        if not show:
            return
        elapsed = time.monotonic() - t0
        eta = "" if res.status == "interrupted" else f", ETA {_seconds(elapsed / n_done * (total - n_done))}"
        click.echo(f"[{n_done:{len(str(total))}d}/{total}] point {res.index:04d} {res.run_name}: {res.status} "
                   f"in {_seconds(res.wall_s)}; elapsed {_seconds(elapsed)}{eta}", err=True)
        log(f"  wrote {out / spec.points[res.index].file_name}" if res.status != "error" else f"  {res.error}")

    todo, done = runner.plan(spec, out, part)
    if done:
        log(f"skipping {len(done)} finished point(s): {', '.join(str(p.index) for p in done)}")
    import signal  # noqa: PLC0415

    from cosim import engine  # noqa: PLC0415

    # SIGTERM (a batch system's time limit, timeout) stops the running points at their next slice and
    # writes them with status interrupted, instead of killing the workers with what they simulated
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: runner.request_stop())
    try:
        outcome = runner.run_sweep(spec, out, shard=part, jobs=jobs, on_done=progress)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if engine.stop_requested():
        _interrupted(outcome, out)
    errors = [r for r in outcome.results if r.status == "error"]
    incomplete = [r for r in outcome.results if r.status not in ("error", "complete")]
    for r in errors:
        click.echo(f"Error: point {r.index} ({r.run_name}) failed: {r.error}", err=True)
    for r in incomplete:
        click.echo(f"Error: point {r.index} ({r.run_name}) ended {r.status} (results written)", err=True)
    if not quiet:
        click.echo(f"sweep {spec.name}: shard {part[0]}/{part[1]}: {len(outcome.selected)} point(s), "
                   f"{len(outcome.results)} ran, {len(outcome.skipped)} already done, {len(errors)} failed, "
                   f"{len(incomplete)} incomplete in {_seconds(time.monotonic() - t0)} -> {out}")
    if errors or incomplete:
        sys.exit(1)
