"""The ``cosim`` command line.

Only click and the standard library are imported here: subcommands live in their own modules and are
imported when they run (``LazyGroup``), so ``cosim --help`` never loads numpy, h5py, cppyy or ns-3.
"""

from __future__ import annotations

import importlib
import sys

import click

from cosim import __version__
from cosim.errors import CosimInputError

#: verb -> "module:attribute" of its click command
COMMANDS = {
    "run": ("cosim.cli.run:run", "Run an experiment (shipped name, TOML file or flags) in ns-3; write HDF5 results."),
    "inspect": ("cosim.cli.inspect:inspect", "List the runs of a results file with their summaries."),
    "trace": ("cosim.cli.trace:trace", "Generate the per-rank trace of one LLM training iteration."),
    "compare": ("cosim.cli.compare:compare", "Compare runs side by side: metrics x runs, delta and ratio."),
    "plot": ("cosim.cli.plot:plot", "Draw queue, CDF, pause/stall and iteration figures of results."),
    "report": ("cosim.cli.report:report", "Write a self-contained HTML report of results files."),
    "sweep": ("cosim.cli.sweep:sweep", "Run a TOML grid of experiments, one results file per point."),
    "merge": ("cosim.cli.merge:merge", "Merge the point files of a sweep into one results file."),
    "export": ("cosim.cli.export:export", "Export runs as a Perfetto / chrome://tracing timeline (JSON)."),
    "collective": ("cosim.cli.collective:collective",
                   "Sweep one collective over sizes like nccl-tests: time, algbw, busbw; HDF5 out."),
    "reliability": ("cosim.cli.reliability:reliability",
                    "Analytic MTTF, checkpoint interval and ETTR of a training job at 1k..100k GPUs."),
    "calibrate": ("cosim.cli.calibrate:calibrate", "Fit the compute model to measured kernel profiles (TOML out)."),
    "list": ("cosim.cli.listing:list_command", "List what experiments can name: experiments, models, GPUs, "
             "topologies, transports, algorithms, patterns."),
    "attributes": ("cosim.cli.attributes:attributes",
                   "List the ns-3 model attributes --set can change, with defaults, units and help."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when invoked; its help lists the stored summaries."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _print_version(ctx, _param, value):
    if not value or ctx.resilient_parsing:
        return
    from importlib import metadata  # noqa: PLC0415

    try:
        ns3 = metadata.version("ns3")
    except metadata.PackageNotFoundError:
        ns3 = "not installed"
    click.echo(f"cosim {__version__} (ns3 wheel {ns3})")
    ctx.exit(0)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the cosim and ns-3 versions and exit.")
def cli():
    """cosim: packet-level ns-3 co-simulation of GPU-cluster networks for LLM training.

    \b
    Typical session:
      cosim run                       # built-in experiment -> results.h5, summary table
      cosim run --list                # shipped experiments; cosim run NAME runs one
      cosim list                      # every name an experiment can use (models, topologies, ...)
      cosim attributes HostNic        # ns-3 attributes --set can change, defaults and units
      cosim run --hosts 16 -o a.h5    # a bigger incast
      cosim inspect a.h5              # runs and summaries of a results file
      cosim trace --list-models       # workload presets

    Every verb has its own --help. Exit codes: 0 success, 1 simulation failure, 2 bad input.
    """


def _report(message: str) -> None:
    """Print an error on stderr once per run: under an MPI launcher every rank finds the same bad input, and
    rank 0 alone says so."""
    from cosim.parallel.mpi import launched_rank  # noqa: PLC0415 - standard library only

    if launched_rank() == 0:
        click.echo(message, err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI with one-line errors (exit 2 for bad input) and no tracebacks for them."""
    try:
        rv = cli.main(args=argv, prog_name="cosim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _report("Aborted.")
        sys.exit(1)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        _report(f"Error: {exc.format_message()}{hint}")
        sys.exit(2)
    except click.ClickException as exc:
        _report(f"Error: {exc.format_message()}")
        sys.exit(exc.exit_code)
    except CosimInputError as exc:
        _report(f"Error: {exc}")
        sys.exit(2)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
