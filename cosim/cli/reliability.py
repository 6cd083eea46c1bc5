"""``cosim reliability``: what failures cost a training job of 1k…100k GPUs (analytic, no simulation).

Only click and the standard library are imported at module level (fast ``--help``).
"""

from __future__ import annotations

import click

DEFAULT_GPUS = "1024,2048,4096,8192,16384,32768,65536,100000"
EPILOG = """\b
Model (cosim/reliability/model.py):
  counts     GPUs, servers, NICs, links, switches of a non-blocking folded Clos of --switch-radix ports
             (one NIC per GPU)
  rates      FIT (failures per 10^9 device-hours) per component: --preset, then --set NAME=FIT
  MTTF       1 / sum(count x rate); interval: Daly's optimum for --checkpoint-write-s (or --interval-s)
  ETTR       useful / wall-clock time, Daly's complete model with --restart-s after each interruption
  tokens/day ETTR x 86400 / iteration time x tokens per GPU per iteration x GPUs (weak scaling)
\b
Examples:
  cosim reliability
  cosim reliability --set gpu_fit=20000 --checkpoint-write-s 30 --restart-s 300
  cosim reliability --gpus 1024,16384 --iteration-ms 850 --tokens-per-gpu-iteration 8192 --plot ettr.png
  cosim reliability --results results.h5 --tokens-per-gpu-iteration 4096
"""


#: largest job --gpus takes: beyond any cluster, small enough for the failure model's exponentials
MAX_GPUS = 100_000_000


def _gpu_counts(text: str) -> list[int]:
    out = []
    for item in text.split(","):
        item = item.strip().lower()
        scale = 1000 if item.endswith("k") else 1
        try:
            n = int(float(item.rstrip("k")) * scale)
        except ValueError:
            raise click.BadParameter(f"{item!r} is not a GPU count (write 1024,16k,100k)", param_hint="'--gpus'") \
                from None
        if not 1 <= n <= MAX_GPUS:
            raise click.BadParameter(f"{item!r} must be 1 to {MAX_GPUS:,}", param_hint="'--gpus'")
        out.append(n)
    return out


def _rate_overrides(assignments) -> dict[str, float]:
    out = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(f"{item!r} is not NAME=FIT (e.g. gpu_fit=20000)", param_hint="'--set'") \
                from None
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=FIT", param_hint="'--set'")
    return out


def _simulated_iteration_s(path: str) -> float:
    """The mean iteration time of the first training run of results file ``path``, seconds."""
    from cosim.errors import CosimInputError  # noqa: PLC0415
    from cosim.results.compare import load_runs  # noqa: PLC0415

    for record in load_runs([path]).values():
        t_ns = record.summary.get("iteration_time_ns")
        if t_ns:
            return float(t_ns) * 1e-9
    raise CosimInputError(path, "has no training run with an iteration time", "run a training Experiment")


@click.command(epilog=EPILOG)
@click.option("--gpus", default=DEFAULT_GPUS, show_default=True, help="Job sizes, comma-separated (16k = 16000).")
@click.option("--preset", default="llama3-h100", show_default=True,
              help="Failure-rate preset: llama3-h100 (Llama 3 405B pre-training, Meta 2024) or none.")
@click.option("--set", "assignments", multiple=True, metavar="NAME=FIT",
              help="Override one rate: gpu_fit, host_fit, nic_fit, link_fit, switch_fit, software_fit (repeatable).")
@click.option("--gpus-per-server", type=click.IntRange(min=1), default=8, show_default=True, help="GPUs per server.")
@click.option("--switch-radix", type=click.IntRange(min=4), default=64, show_default=True,
              help="Ports per switch of the folded Clos that sizes the network.")
@click.option("--checkpoint-write-s", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="Time the job stalls to write one checkpoint, s.")
@click.option("--restart-s", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="Time from an interruption to training again (reschedule, restart, restore), s.")
@click.option("--interval-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Checkpoint interval, s of work [default: Daly's optimum per job size].")
@click.option("--iteration-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Iteration time, ms (a simulated one: see --results).")
@click.option("--results", "results_path", type=click.Path(dir_okay=False), default=None,
              help="Take the iteration time from this results file's first training run.")
@click.option("--tokens-per-gpu-iteration", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Tokens each GPU processes per iteration (global batch x sequence / GPUs).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also draw ETTR and MTTF against GPU count to this .png/.svg/.pdf.")
def reliability(gpus, preset, assignments, gpus_per_server, switch_radix, checkpoint_write_s,
                restart_s, interval_s, iteration_ms, results_path, tokens_per_gpu_iteration, plot_path):
    """Interruptions, MTTF, checkpoint interval, ETTR and tokens per day of a training job by GPU count.

    Failures of GPUs, servers, NICs, links and switches are independent; the job restarts from its last
    checkpoint after each. The iteration time (--iteration-ms or --results) turns ETTR into tokens per day.
    """
    from cosim import reliability as rel  # noqa: PLC0415

    rates = rel.failure_rates(preset, _rate_overrides(assignments))
    if results_path is not None:
        iteration_s = _simulated_iteration_s(results_path)
    else:
        iteration_s = iteration_ms * 1e-3 if iteration_ms else None
    counts = [rel.clos_counts(n, gpus_per_server=gpus_per_server, switch_radix=switch_radix)
              for n in _gpu_counts(gpus)]
    points = [rel.evaluate(c, rates, checkpoint_write_s=checkpoint_write_s, restart_s=restart_s,
                           interval_s=interval_s, iteration_s=iteration_s,
                           tokens_per_gpu_iteration=tokens_per_gpu_iteration) for c in counts]
    click.echo(f"# cosim reliability: preset {preset}, checkpoint write {checkpoint_write_s:g} s, restart "
               f"{restart_s:g} s" + (f", iteration {iteration_s * 1e3:.3f} ms" if iteration_s else ""))
    click.echo(f"{'gpus':>8} {'servers':>8} {'links':>8} {'switches':>8} {'failures':>9} {'MTTF':>8} "
               f"{'interval':>9} {'ETTR':>6} {'tokens':>10}")
    click.echo(f"{'':>8} {'':>8} {'':>8} {'':>8} {'(/day)':>9} {'(h)':>8} {'(min)':>9} {'':>6} {'(B/day)':>10}")
    for p in points:
        c = p.counts
        click.echo(f"{c.gpus:>8} {c.hosts:>8} {c.links:>8} {c.switches:>8} {p.interruptions_per_day:>9.2f} "
                   f"{p.mttf_h:>8.2f} {p.checkpoint_interval_s / 60:>9.1f} {p.ettr:>6.3f} "
                   f"{p.tokens_per_day * 1e-9:>10.2f}")
    if plot_path:
        from cosim.reliability.figure import ettr_figure, write_figure  # noqa: PLC0415

        write_figure(ettr_figure(points, title=f"ETTR vs job size ({preset}, checkpoint {checkpoint_write_s:g} s, "
                                 f"restart {restart_s:g} s)"), plot_path)
        click.echo(f"wrote {plot_path}")
