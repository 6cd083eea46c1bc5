"""``cosim run``: simulate a training workload (or a flow scenario) in ns-3 and write its results.

Three kinds of run, chosen by the options given:

- ``--trace FILE.h5``: co-simulate that workload trace (:mod:`cosim.runs.training`);
- ``--pattern``, ``--hosts`` or ``--flow-bytes`` (without ``--trace``): a flow-level scenario
  (:mod:`cosim.runs.flows`), as before the co-simulation existed;
- none of those: the built-in training scenario (:mod:`cosim.runs.builtin`), on both fabrics.

Other options apply to whichever run is chosen; only the ones given on the command line override the built-in
scenario's settings.
"""

from __future__ import annotations

import sys
import time

import click
from click.core import ParameterSource

from cosim.cli.options import SIZE, parse_assignments

#: cosim.collectives.lower.ALGORITHM_NAMES (repeated here so that --help loads no numpy; a test checks both)
ALGORITHMS = ("auto", "ring", "tree", "halving_doubling", "direct", "hierarchical", "chain")
FABRIC_CHOICES = ("roce", "ib", "both")
FLOW_ONLY = ("pattern", "hosts", "flow_bytes")
TRACE_ONLY = ("iterations", "chunk_bytes", "algorithm")


@click.command()
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Co-simulate this cosim workload trace (HDF5 from `cosim trace`).")
@click.option("--iterations", type=click.IntRange(min=1), default=1, show_default=True,
              help="Training iterations to chain (the first warms the fabric up; built-in scenario: 2).")
@click.option("--chunk-bytes", type=SIZE, default="4MiB", show_default=True,
              help="Transfers of collectives and sends are split into flows of at most this size.")
@click.option("--algorithm", type=click.Choice(ALGORITHMS), default="auto", show_default=True,
              help="Collective algorithm (auto: ring, hierarchical ring across servers, direct all-to-all).")
@click.option("--fabric", type=click.Choice(FABRIC_CHOICES), default=None,
              help="roce: PFC + ECN + DCQCN; ib: credit-based flow control; both: the same run on each, side by "
                   "side.  [default: both for the built-in scenario, else roce]")
@click.option("--topology", type=click.Choice(["single-switch", "leaf-spine", "fat-tree", "rail-optimized"]),
              default=None, help="Fabric topology.  [default: single-switch for flow scenarios, rail-optimized "
                                 "for --trace; fat-tree is for flow scenarios only]")
@click.option("--hosts", type=click.IntRange(min=2), default=8, show_default=True,
              help="Flow scenarios: number of hosts (NICs).")
@click.option("--hosts-per-leaf", type=click.IntRange(min=1), default=4, show_default=True,
              help="leaf-spine: hosts (NICs) under each leaf switch (traces: default two servers).")
@click.option("--spines", type=click.IntRange(min=1), default=2, show_default=True,
              help="leaf-spine, rail-optimized: spine switches.")
@click.option("--oversubscription", type=float, default=1.0, show_default=True,
              help="leaf-spine, rail-optimized: host capacity / uplink capacity per leaf (>= 1).")
@click.option("--gpus-per-server", type=click.IntRange(min=1), default=8, show_default=True,
              help="NICs (GPUs) per server (traces: default the trace's hardware.gpus_per_host).")
@click.option("--dcqcn/--no-dcqcn", default=True, show_default=True,
              help="DCQCN congestion control on RoCE NICs; --no-dcqcn leaves PFC alone to keep it lossless.")
@click.option("--ib-cc/--no-ib-cc", default=False, show_default=True,
              help="InfiniBand congestion control (FECN marking, BECN, CCTI throttling) on IB runs.")
@click.option("--link-gbps", type=click.FloatRange(min=0, min_open=True), default=100.0, show_default=True,
              help="Rate of every link, Gbit/s.")
@click.option("--link-delay-ns", type=click.FloatRange(min=0), default=1000.0, show_default=True,
              help="One-way propagation delay of every link, ns.")
@click.option("--pattern", type=click.Choice(["incast", "permutation"]), default="incast", show_default=True,
              help="Flow scenario: incast (every host sends to host 0) or permutation (host i to host i+1).")
@click.option("--flow-bytes", type=SIZE, default="1MiB", show_default=True,
              help="Flow scenarios: payload of each flow (bytes; suffixes KB, MB, KiB, MiB, GiB accepted).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every random choice (ECMP, RNG).")
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="Set an ns-3 model attribute, e.g. --set HostNic::MtuBytes=1024 (repeatable).")
@click.option("--queue-interval-ns", type=click.FloatRange(min=0, min_open=True), default=1000.0,
              show_default=True, help="Egress queue sampling interval, ns.")
@click.option("--max-sim-time-ms", type=click.FloatRange(min=0, min_open=True), default=1000.0,
              show_default=True, help="Stop the simulation at this simulated time, ms (traces: default 100000).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="results.h5", show_default=True,
              help="HDF5 results file to write.")
@click.option("--name", default=None, help="Run name inside the file (default: the fabric; flow scenarios on one "
                                           "fabric: the pattern). With --fabric both: NAME-roce and NAME-ib.")
@click.option("--append", is_flag=True, help="Add the runs to an existing results file instead of replacing it.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no table (progress is off anyway when "
              "stderr is not a terminal, e.g. in batch jobs).")
@click.option("-v", "--verbose", is_flag=True, help="Also log each run's status, wall time and simulator cost.")
@click.pass_context
def run(ctx, trace_path, iterations, chunk_bytes, algorithm, fabric, topology, hosts, hosts_per_leaf, spines,
        oversubscription, gpus_per_server, dcqcn, ib_cc, link_gbps, link_delay_ns, pattern, flow_bytes, seed, assignments,
        queue_interval_ns, max_sim_time_ms, output, name, append, quiet, verbose):
    """Simulate a training workload (or a flow scenario) packet by packet in ns-3; write an HDF5 results file.

    \b
    With no options: the built-in training scenario (a 4-layer LLaMA-2-7B-shaped model, TP4 x PP2 x DP2 on
    4 servers x 4 GPUs, leaf-spine with 2 spines oversubscribed 2:1 at 100 Gbps, 2 iterations), run on RoCE
    and on InfiniBand and printed side by side. Examples:
      cosim run
      cosim run --trace traces/llama2-7b-2l_tp2-pp2-dp2.h5 --fabric both --iterations 2 -o t.h5
      cosim run --pattern incast --hosts 32 --flow-bytes 4MiB --link-gbps 400 -o incast32.h5
      cosim run --pattern permutation --fabric both --set HostNic::MtuBytes=1024
    """
    from cosim import results  # noqa: PLC0415

    given = {p.name for p in ctx.command.params
             if ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)}
    flow_opts = sorted(o for o in FLOW_ONLY if o in given)
    if trace_path is not None and flow_opts:
        raise click.UsageError(f"--{flow_opts[0].replace('_', '-')} describes a flow scenario; it cannot be "
                               "combined with --trace")
    mode = "trace" if trace_path is not None else ("flows" if flow_opts else "builtin")
    if mode == "flows":
        misplaced = sorted(o for o in TRACE_ONLY if o in given)
        if misplaced:
            raise click.UsageError(f"--{misplaced[0].replace('_', '-')} applies to training runs (--trace or the "
                                   "built-in scenario), not to flow scenarios")
    if fabric is None:
        fabric = "both" if mode == "builtin" else "roce"
    fabrics = ("roce", "ib") if fabric == "both" else (fabric,)
    attributes = parse_assignments(assignments)

    def run_name(fab: str) -> str:
        if len(fabrics) > 1:
            return f"{name}-{fab}" if name else fab
        return name or (pattern if mode == "flows" else fab)

    if mode == "flows":
        from cosim.runs import flows as scenario  # noqa: PLC0415

        specs = [scenario.ScenarioSpec(
            name=run_name(fab), fabric=fab, topology=topology or "single-switch", hosts=hosts,
            hosts_per_leaf=hosts_per_leaf, spines=spines, oversubscription=oversubscription,
            gpus_per_server=gpus_per_server, dcqcn=dcqcn, ib_cc=ib_cc, link_gbps=link_gbps, link_delay_ns=link_delay_ns,
            pattern=pattern, flow_bytes=flow_bytes, seed=seed, queue_sample_interval_ns=queue_interval_ns,
            max_sim_time_ns=max_sim_time_ms * 1e6, attributes=attributes) for fab in fabrics]
        runner, trace = (lambda spec, progress: scenario.run(spec, progress=progress)), None
        preflight = scenario.preflight
        items = "flows"
    else:
        from cosim.runs import training as cosimulation  # noqa: PLC0415
        from cosim.runs import builtin as default_training  # noqa: PLC0415

        overrides = {}
        for opt, field, value in (
                ("topology", "topology", topology), ("gpus_per_server", "gpus_per_server", gpus_per_server),
                ("hosts_per_leaf", "hosts_per_leaf", hosts_per_leaf), ("spines", "spines", spines),
                ("oversubscription", "oversubscription", oversubscription), ("dcqcn", "dcqcn", dcqcn), ("ib_cc", "ib_cc", ib_cc),
                ("link_gbps", "link_gbps", link_gbps), ("link_delay_ns", "link_delay_ns", link_delay_ns),
                ("iterations", "iterations", iterations), ("chunk_bytes", "chunk_bytes", chunk_bytes),
                ("algorithm", "algorithm", algorithm), ("seed", "seed", seed),
                ("queue_interval_ns", "queue_sample_interval_ns", queue_interval_ns),
                ("max_sim_time_ms", "max_sim_time_ns", max_sim_time_ms * 1e6)):
            if opt in given:
                overrides[field] = value
        if mode == "trace":
            from cosim.workload.trace import read_trace  # noqa: PLC0415

            trace = read_trace(trace_path)  # bad file: one-line error, exit 2, before anything runs
            specs = [cosimulation.TrainingSpec(name=run_name(fab), fabric=fab, trace_path=trace_path,
                                               attributes=attributes, **overrides) for fab in fabrics]
        else:
            trace = default_training.default_trace()
            specs = [default_training.default_spec(name=run_name(fab), fabric=fab, trace=trace,
                                                   attributes=attributes, **overrides) for fab in fabrics]
            if not quiet:
                click.echo(default_training.DESCRIPTION)
        runner = lambda spec, progress: cosimulation.run_training(spec, trace=trace, progress=progress)  # noqa: E731
        preflight = lambda spec: cosimulation.preflight(spec, trace=trace)  # noqa: E731
        items = "ops"

    if len(specs) > 1:
        for spec in specs:  # every run's settings are checked before the first one starts
            preflight(spec)
    show_progress = not quiet and sys.stderr.isatty()
    records = []
    for spec in specs:
        progress = _progress_printer(spec.name if len(specs) > 1 else "", items) if show_progress else None
        records.append(runner(spec, progress))
        if progress is not None:
            click.echo("", err=True)
        if verbose:
            s = records[-1].summary
            click.echo(f"  {spec.name}: {s['status']}, simulated {s['sim_time_ns'] / 1e6:.3f} ms in "
                       f"{s['wall_time_s']:.2f} s wall, {s['events']} events, {s['packet_hops']} packet-hops "
                       f"({s['packet_hops_per_s'] / 1e6:.2f} M/s)", err=True)
    results.write_results(output, records, append=append)
    if not quiet:
        from cosim.results.tables import SUMMARY_ROWS, TRAINING_ROWS, summary_table  # noqa: PLC0415

        rows = SUMMARY_ROWS if mode == "flows" else TRAINING_ROWS
        click.echo(summary_table({r.name: r.summary for r in records}, rows))
        names = ", ".join(f"'{r.name}'" for r in records)
        click.echo(f"wrote {output} (run{'s' if len(records) > 1 else ''} {names})")
    failed = [r for r in records if r.summary["status"] != "complete"]
    for r in failed:
        s = r.summary
        done = (f"{s['flows_completed']}/{s['flows']} flows completed" if mode == "flows"
                else f"{s.get('n_dag_ops_finished', 0)}/{s.get('n_dag_ops', 0)} ops and "
                     f"{s['flows_completed']}/{s['flows']} flows completed")
        click.echo(f"Error: run '{r.name}' ended {s['status']}: {done}", err=True)
    if failed:
        sys.exit(1)


def _progress_printer(label: str, items: str):
    """Progress line on stderr: simulated time (us for flow scenarios, ms for training) and items done."""
    prefix = f"[{label}] " if label else ""
    scale, unit = (1e-3, "us") if items == "flows" else (1e-6, "ms")

    t0 = time.perf_counter()

    def show(sim_ns: float, done: int, total: int) -> None:
        frac = done / total if total else 1.0
        wall = time.perf_counter() - t0
        eta = f"ETA {wall * (1 - frac) / frac:6.0f} s" if 0 < frac < 1 else " " * 10
        click.echo(f"\r  {prefix}simulated {sim_ns * scale:12.3f} {unit}   {items} {done}/{total} "
                   f"({100 * frac:5.1f}%)   wall {wall:6.0f} s {eta}", err=True, nl=False)

    return show
