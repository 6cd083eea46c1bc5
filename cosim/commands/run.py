"""``cosim run``: simulate a scenario in ns-3 and write its results."""

from __future__ import annotations

import sys

import click

from cosim.commands.options import SIZE, parse_assignments


@click.command()
@click.option("--fabric", type=click.Choice(["roce"]), default="roce", show_default=True,
              help="roce: PFC + ECN + DCQCN over shared-buffer switches.")
@click.option("--topology", type=click.Choice(["single-switch", "leaf-spine", "fat-tree", "rail-optimized"]),
              default="single-switch", show_default=True, help="Fabric topology.")
@click.option("--hosts", type=click.IntRange(min=2), default=8, show_default=True, help="Number of hosts (NICs).")
@click.option("--hosts-per-leaf", type=click.IntRange(min=1), default=4, show_default=True,
              help="leaf-spine: hosts under each leaf switch.")
@click.option("--spines", type=click.IntRange(min=1), default=2, show_default=True,
              help="leaf-spine, rail-optimized: spine switches.")
@click.option("--oversubscription", type=float, default=1.0, show_default=True,
              help="leaf-spine, rail-optimized: host capacity / uplink capacity per leaf (>= 1).")
@click.option("--gpus-per-server", type=click.IntRange(min=1), default=8, show_default=True,
              help="rail-optimized: NICs (GPUs) per server, one rail switch each.")
@click.option("--dcqcn/--no-dcqcn", default=True, show_default=True,
              help="DCQCN congestion control on the NICs; --no-dcqcn leaves PFC alone to keep it lossless.")
@click.option("--link-gbps", type=click.FloatRange(min=0, min_open=True), default=100.0, show_default=True,
              help="Rate of every link, Gbit/s.")
@click.option("--link-delay-ns", type=click.FloatRange(min=0), default=1000.0, show_default=True,
              help="One-way propagation delay of every link, ns.")
@click.option("--pattern", type=click.Choice(["incast", "permutation"]), default="incast", show_default=True,
              help="incast: every host sends to host 0; permutation: host i sends to host i+1.")
@click.option("--flow-bytes", type=SIZE, default="1MiB", show_default=True,
              help="Payload of each flow (bytes; suffixes KB, MB, KiB, MiB, GiB accepted).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every random choice (ECMP, RNG).")
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="Set an ns-3 model attribute, e.g. --set HostNic::MtuBytes=1024 (repeatable).")
@click.option("--queue-interval-ns", type=click.FloatRange(min=0, min_open=True), default=1000.0,
              show_default=True, help="Egress queue sampling interval, ns.")
@click.option("--max-sim-time-ms", type=click.FloatRange(min=0, min_open=True), default=1000.0,
              show_default=True, help="Stop the simulation at this simulated time, ms.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="results.h5", show_default=True,
              help="HDF5 results file to write.")
@click.option("--name", default=None, help="Run name inside the file (default: the pattern).")
@click.option("--append", is_flag=True, help="Add the run to an existing results file instead of replacing it.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no table (progress is off anyway when "
              "stderr is not a terminal, e.g. in batch jobs).")
def run(fabric, topology, hosts, hosts_per_leaf, spines, oversubscription, gpus_per_server, dcqcn, link_gbps, link_delay_ns, pattern, flow_bytes, seed, assignments, queue_interval_ns,
        max_sim_time_ms, output, name, append, quiet):
    """Simulate a scenario packet by packet in ns-3 and write an HDF5 results file.

    \b
    With no options: the built-in scenario, an 8-host incast (7 senders of 1 MiB each to host 0) through
    one switch at 100 Gbps. Examples:
      cosim run
      cosim run --hosts 32 --flow-bytes 4MiB --link-gbps 400 -o incast32.h5
      cosim run --pattern permutation --set HostNic::MtuBytes=1024
    """
    from cosim import results, scenario  # noqa: PLC0415
    from cosim.tables import summary_table  # noqa: PLC0415

    spec = scenario.ScenarioSpec(
        name=name or pattern, fabric=fabric, topology=topology, hosts=hosts, hosts_per_leaf=hosts_per_leaf,
        spines=spines, oversubscription=oversubscription, gpus_per_server=gpus_per_server, dcqcn=dcqcn, link_gbps=link_gbps, link_delay_ns=link_delay_ns,
        pattern=pattern, flow_bytes=flow_bytes, seed=seed, queue_sample_interval_ns=queue_interval_ns,
        max_sim_time_ns=max_sim_time_ms * 1e6, attributes=parse_assignments(assignments),
    )
    progress = None if quiet or not sys.stderr.isatty() else _progress_printer()
    record = scenario.run(spec, progress=progress)
    if progress is not None:
        click.echo("", err=True)
    results.write_results(output, [record], append=append)
    if not quiet:
        click.echo(summary_table({record.name: record.summary}))
        click.echo(f"wrote {output} (run '{record.name}')")
    if record.summary["status"] != "complete":
        click.echo(f"Error: run '{record.name}' ended {record.summary['status']}: "
                   f"{record.summary['flows_completed']}/{record.summary['flows']} flows completed", err=True)
        sys.exit(1)


def _progress_printer():
    def show(sim_ns: float, done: int, total: int) -> None:
        pct = 100.0 * done / total if total else 100.0
        click.echo(f"\r  simulated {sim_ns / 1e3:12.3f} us   flows {done}/{total} ({pct:5.1f}%)", err=True, nl=False)

    return show
