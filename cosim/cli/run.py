"""``cosim run``: run an Experiment (a shipped name, a TOML file, or flags) in ns-3 and write its results.

What runs:

- ``cosim run NAME`` or ``cosim run FILE.toml``: that experiment (``--list`` shows the shipped ones);
- ``--trace FILE.h5`` alone: a co-simulation of that workload trace on the default network;
- ``--pattern``, ``--hosts`` or ``--flow-bytes`` alone: a flow-level experiment;
- nothing: the built-in training scenario, on both transports.

Options override the experiment's fields; only the ones given on the command line do. Every value is
checked by the same field kinds as TOML files and sweeps (cosim.values), before anything runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import click

from cosim.cli.options import SET_HELP, FieldType, parse_settings, quiet_library_logs, refuse_empty

#: cosim.spec.TRANSPORT_CHOICES, repeated so that --help loads no numpy (a test checks both)
TRANSPORT_CHOICES = ("roce", "ib", "uec", "both", "all")
#: options that make a bare ``cosim run`` a flow-level experiment
FLOW_ONLY = ("pattern", "hosts", "flow_bytes")
TRAINING_ONLY = ("iterations", "chunk_bytes", "algorithm")


def _field(path: str, name: str, help_: str, flag: str | None = None, **kw):
    decls = [flag] if flag else [f"--{path.split('.')[-1].replace('_', '-')}"]
    return click.option(*decls, name, type=FieldType(path, kw.pop("metavar", "value")), default=None,
                        help=help_, **kw)


def _refuse_fabric(ctx, param, value: str | None) -> None:
    """Stop at the retired ``--fabric`` (with or without a value) with the option that replaced it."""
    if value is not None:
        raise click.UsageError(f"--fabric was renamed --transport: use --transport {'|'.join(TRANSPORT_CHOICES)}")


@click.command()
@click.argument("experiment", required=False)
@click.option("--list", "list_", is_flag=True, help="List the shipped experiments and exit.")
@click.option("--dry-run", is_flag=True, help="Validate, print the resolved experiment and its plan "
              "(servers, leaves, spines, oversubscription, buffers, ranks, flows, packet-hops); run nothing. "
              "A generated training job of more than 8 M trace ops is estimated from its stage templates in "
              "seconds (docs/decomposition.md).")
@click.option("--full-plan", is_flag=True, help="With --dry-run: plan every job whole, however large (minutes "
              "and GBs at 10^4 GPUs), where the dry run would estimate it.")
@click.option("--export-fabric", "export_fabric", type=click.Path(dir_okay=False), default=None,
              callback=refuse_empty,
              help="Write the fabric the experiment is built on to this JSON file (the format --topology-file "
                   "reads: docs/fabrics.md), then go on (with --dry-run: run nothing).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None, callback=refuse_empty,
              help="Co-simulate this cosim workload trace (HDF5 from `cosim trace`).")
@_field("workload.iterations", "iterations", "Training iterations to chain (the first warms the fabric up).")
@_field("workload.chunk_bytes", "chunk_bytes", "Transfers are split into flows of at most this size (4MiB).",
        metavar="size")
@_field("workload.algorithm", "algorithm", "Collective algorithm: auto, ring, tree, halving_doubling, direct, pxn, "
        "hierarchical, chain, nvls.")
@click.option("--transport", "transport", type=click.Choice(TRANSPORT_CHOICES), default=None,
              help="roce: PFC + ECN + DCQCN; ib: credit-based flow control; uec: Ultra Ethernet (spraying, "
                   "trimming, selective retransmission, NSCC; no PFC); both: one run on roce and one on ib, "
                   "side by side; all: one on each of the three. "
                   "[default: the experiment's; flags alone: roce]")
@click.option("--fabric", hidden=True, is_flag=False, flag_value="", default=None, expose_value=False,
              callback=_refuse_fabric)
@_field("network.topology", "topology", "single-switch, leaf-spine, fat-tree, rail-optimized, "
        "rail-optimized-three-tier, three-tier, dragonfly or file [default: single-switch for flows, rail-optimized for "
        "training]. docs/fabrics.md.")
@_field("network.topology_file", "topology_file", "With --topology file: your fabric, a JSON or TOML file of named "
        "nodes and links (docs/fabrics.md; --export-fabric writes one).", metavar="path")
@_field("network.switch_radix", "switch_radix", "Ports per switch: build every switch from this many ports (a rail "
        "or zone too big for one switch becomes several; every uplink its own link and ECMP member) [none: one "
        "switch per rail or leaf; three-tier: 64, 128 or 256 by host count].")
@_field("network.switch_port_gbps", "switch_port_gbps", "Rate of a switch port, Gbit/s; faster than --link-gbps: "
        "one port serves several NICs (breakout, e.g. 800 for two 400G NICs) [--link-gbps].")
@_field("network.zone_oversubscription", "zone_oversubscription", "Three-tier: leaf capacity / uplink capacity of "
        "each aggregation switch of a zone, e.g. 7 for 7:1 above the zones (>= 1) [1].")
@_field("network.nic_planes", "nic_planes", "Ports per NIC, each on its own copy (plane) of the fabric at "
        "--link-gbps / planes; the NIC stripes its packets over them (docs/fabrics.md) [1].")
@_field("network.hosts", "hosts", "Flow experiments: number of hosts (NICs) [8].")
@_field("network.hosts_per_leaf", "hosts_per_leaf", "leaf-spine: NICs under each leaf [flows 4, training two "
        "servers].")
@_field("network.spines", "spines", "leaf-spine, rail-optimized: spine switches [2].")
@_field("network.oversubscription", "oversubscription", "Host capacity / uplink capacity per leaf (>= 1) [1].")
@_field("network.gpus_per_server", "gpus_per_server", "NICs (GPUs) per server [traces: the trace's].")
@click.option("--dcqcn/--no-dcqcn", default=None, help="DCQCN on RoCE NICs (--no-dcqcn leaves PFC alone).")
@click.option("--ib-cc/--no-ib-cc", default=None, help="InfiniBand congestion control (FECN, BECN, CCTI).")
@click.option("--telemetry-cc/--no-telemetry-cc", default=None, help="RoCE: switch-telemetry congestion control "
              "instead of DCQCN (HPCC's algorithm on the most utilized hop; docs/models/spectrum-x.md).")
@_field("network.profile", "profile", "A named preset of transport options: spectrum-x (RoCE, per-packet "
        "adaptive routing, reordering NICs, telemetry congestion control, PFC; docs/models/spectrum-x.md).")
@_field("network.routing", "routing", "Switch path choice: ecmp, pinned, flowlet, adaptive (least-queued port) or "
        "spray (per packet) [ecmp].")
@_field("network.dragonfly_routing", "dragonfly_routing", "Dragonfly: minimal, valiant (via a random intermediate "
        "group) or ugal (UGAL-L); valiant and ugal need --transport uec [minimal].")
@_field("network.ecmp_hash", "ecmp_hash", "ECMP hash fields: flow, five-tuple or five-tuple-qp [flow].")
@_field("network.qps_per_connection", "qps_per_connection", "Queue pairs a NIC spreads the flows to one "
        "destination over (round robin) [1].")
@click.option("--admission/--no-admission", default=None, help="Receiver-driven admission: a sender waits for "
              "the receiver's grant before each chunk (docs/models/transport-mechanisms.md).")
@_field("network.qp_window_bytes", "qp_window_bytes", "RoCE: bytes a queue pair may have unacknowledged, 0 = no "
        "window [0].", metavar="size")
@_field("network.ecn_marking", "ecn_marking", "Where switches mark ECN: enqueue or dequeue [enqueue].")
@_field("network.uec_congestion_control", "uec_congestion_control", "Ultra Ethernet: nscc (sender window), rccc "
        "(receiver credits) or both [nscc].", flag="--uec-cc")
@_field("network.link_retry", "link_retry", "Ethernet (roce, uec): off, or llr, UEC link-level retry: a frame "
        "corrupted on a link is replayed by that link's sender, go-back-N, not lost end to end [off].")
@_field("network.link_flow_control", "link_flow_control", "Ethernet (roce, uec): pfc, or cbfc, UEC credit-based "
        "flow control (per-lane credits from each link's receiver, no PAUSE, no drop) [pfc].")
@_field("network.link_gbps", "link_gbps", "Rate of every host link, Gbit/s [100].")
@_field("network.link_delay_ns", "link_delay_ns", "One-way propagation delay of every link, ns [1000].")
@_field("workload.pattern", "pattern", "Flow experiments: incast (every host to host 0) or permutation "
        "(host i to i+1).")
@_field("workload.flow_bytes", "flow_bytes", "Flow experiments: payload per flow (4096, 64KiB, 1MB...) [1MiB].",
        metavar="size")
@_field("seed", "seed", "Seed of every random choice (ECMP, RNG) [1].")
@click.option("--set", "assignments", multiple=True, metavar="FIELD=VALUE", help=SET_HELP)
@_field("telemetry.queue_sample_interval_ns", "queue_interval_ns", "Egress queue sampling interval, ns [1000].",
        flag="--queue-interval-ns")
@_field("telemetry.op_table", "op_table", "Training: rows of the ops table the file stores: all, collectives (the "
        "ops that move bytes, no compute) or none (no ops table; the summary is the same) [all].")
@_field("limits.max_sim_time_ns", "max_sim_time_ms", "Stop at this simulated time, ms [20 x the workload's "
        "ideal time, at least 1000; --dry-run shows it].", flag="--max-sim-time-ms")
@click.option("--pfc-watchdog/--no-pfc-watchdog", default=None, help="RoCE: PFC watchdog on every switch egress "
              "queue: one paused past PfcWatchdog::DetectionTime (--set, default 200ms) is disabled, its traffic "
              "dropped, until PfcWatchdog::RestorationTime without PAUSE (docs/models/pfc-watchdog.md).")
@_field("limits.collective_timeout_ns", "collective_timeout_ms", "Training: a collective not complete this long "
        "after it started fails the job, as NCCL's watchdog does: status failed, exit code 1 [0: off].",
        flag="--collective-timeout-ms")
@click.option("--fault", "fault_options", multiple=True, metavar="KIND:ELEMENT@TIME[,key=value...]",
              help="Inject a fault (repeatable; added to the experiment's [[faults]]). KIND: link_down, "
                   "link_flap, link_degrade, switch_down, nic_down, pause_storm, straggler (`cosim list faults` "
                   "and docs/models/faults.md describe them). "
                   "ELEMENT: a link leaf1-spine0, a switch spine0, a NIC host3, a rank rank5 (training), or "
                   "with rate_per_s a set or pattern (fabric-links, leaf*-spine*). TIME and *_ns values in ns "
                   "or with a unit (2ms, 150us). Keys: duration_ns or up_at_ns (end), the kind's parameters "
                   "(rate_gbps, bit_error_rate, period_ns, ...), rate_per_s, until_ns and seed (a Poisson "
                   "process). E.g. --fault link_down:leaf0-spine1@200us,duration_ns=1ms "
                   "--fault link_degrade:leaf1-spine0@0,bit_error_rate=1e-6 --fault straggler:rank3@0,factor=1.5")
@click.option("--baseline", is_flag=True, default=None, help="Also run the experiment without its faults and "
              "store both runs (NAME and NAME-baseline); the table shows the delay per iteration.")
@_field("limits.decompose", "decompose", "auto: simulate the independent parts of the run (or one of identical "
        "parts) apart and merge them, when that gives the whole run's results exactly (--dry-run says what runs); "
        "off: always the whole run [auto].")
@click.option("--fast-forward/--no-fast-forward", default=None, help="Approximate: fast-forward flows whose rates, "
              "queues and flow control are steady, crediting them their rate times the span instead of simulating "
              "their packets (limits.fast_forward; not on uec, not with faults; docs/models/fast-forward.md).")
@_field("limits.fast_forward_tolerance", "fast_forward_tolerance", "With --fast-forward: largest relative change of "
        "a flow's rate over the stability window for it to count as steady [0.01].")
@click.option("--fast-forward-check", is_flag=True, default=None, help="With --fast-forward: also run the "
              "experiment exactly and store how far flow, collective and iteration times moved "
              "(fast_forward_check_* in the summary; twice the run time).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Local processes for the parts of a decomposed run (one ns-3 run each; identical parts run once).")
@click.option("--parts-dir", type=click.Path(file_okay=False), default=None, callback=refuse_empty,
              help="Batch: simulate this task's parts of each run into DIR (one file per part and a manifest) "
                   "instead of writing results; 'cosim merge DIR' joins them into the results file.")
@click.option("--shard", metavar="I/N", default=None, callback=refuse_empty,
              help="With --parts-dir: run the parts k with k % N == I (default: from SLURM_ARRAY_TASK_ID/COUNT "
                   "in a job array, else 0/1, every part).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, callback=refuse_empty,
              help="HDF5 results file to write (replaced if it exists). [default: results.h5, or the first free "
                   "results-N.h5 if it exists: a default never replaces an earlier run]")
@click.option("--name", default=None, callback=refuse_empty,
              help="Run name inside the file (with both transports: NAME-roce and NAME-ib). [default: the "
                   "experiment's, else the pattern or transport]")
@click.option("--append", is_flag=True, help="Add the runs to an existing results file instead of replacing it "
              "(a run name already in the file is an error, unless --replace).")
@click.option("--replace", is_flag=True, help="With --append: overwrite runs of the same name in the file.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no table (progress is off anyway when "
              "stderr is not a terminal, e.g. in batch jobs).")
@click.option("-v", "--verbose", is_flag=True, help="Also log each run's status, wall time and simulator cost.")
@click.pass_context
def run(ctx, experiment, list_, dry_run, full_plan, export_fabric, trace_path, transport, assignments, fault_options, baseline, jobs, parts_dir,
        shard, output, name,
        append, replace, quiet, verbose, **fields):
    """Run EXPERIMENT (a shipped name or a TOML file) packet by packet in ns-3; write an HDF5 results file.

    \b
    With no EXPERIMENT and no options: the built-in training scenario (a 4-layer LLaMA-2-7B-shaped model,
    TP4 x PP2 x DP2 on 4 servers x 4 GPUs, leaf-spine with 2 spines oversubscribed 2:1 at 100 Gbps,
    2 iterations), run on RoCE and on InfiniBand and printed side by side. Examples:
      cosim run --list
      cosim run incast --dry-run
      cosim run congested-training --transport ib -o c.h5
      cosim run disaggregated-serving -o serving.h5   # LLM serving: TTFT, TPOT per request
      cosim run --trace traces/llama2-7b-2l_tp2-pp2-dp2.h5 --transport both --iterations 2 -o t.h5
      cosim run --pattern incast --hosts 32 --flow-bytes 4MiB --link-gbps 400 -o incast32.h5
      cosim run --set workload.parallelism.tp=2 --set workload.parallelism.dp=4 --set workload.iterations=3
      cosim run disaggregated-serving --set workload.rate_per_s=400 --set network.transport=ib
      cosim run --fault link_down:leaf0-spine1@1ms --baseline -o down.h5
      cosim inspect --config t.h5 --run roce > t.toml && cosim run t.toml
      cosim run big.toml --parts-dir parts --shard 3/16   # or in an sbatch --array job; then: cosim merge parts
    """
    from cosim.parallel.mpi import is_root  # noqa: PLC0415

    if not is_root():  # an MPI rank other than 0 simulates its partitions and says nothing
        quiet, verbose = True, False
    quiet_library_logs(quiet)
    from cosim.spec import catalog  # noqa: PLC0415

    if list_:
        _list_experiments(catalog)
        return
    given = {k for k, x in fields.items() if x is not None}
    settings = parse_settings(assignments)
    source, base = _base(experiment, trace_path, given | _shorthands_of(settings, FLOW_ONLY + TRAINING_ONLY))
    overrides = _overrides(ctx, fields, given, transport, trace_path, name, settings)
    if fault_options:
        from cosim.faults import parse_fault_option  # noqa: PLC0415

        overrides["faults"] = [parse_fault_option(text) for text in fault_options]
    if baseline:
        overrides["baseline"] = True
    from cosim import run as runner  # noqa: PLC0415

    exps = runner.experiments_of(base if source is None else source, overrides)
    warnings = inert_warnings(exps)  # said once everything is checked: bad input stays one line
    if export_fabric is not None:
        _export_fabric(exps, export_fabric)
    if full_plan and not dry_run:
        raise click.UsageError("--full-plan applies to --dry-run only (a run always plans its jobs whole)")
    if dry_run:
        _dry_run(exps, warnings, full_plan=full_plan)
        return
    if parts_dir is not None:
        misplaced = [flag for flag, given in (("-o", output), ("--append", append), ("--replace", replace)) if given]
        if misplaced:
            raise click.UsageError(f"{misplaced[0]} does not apply with --parts-dir (part files, no results file): "
                                   "give it to 'cosim merge DIR -o FILE'")
        _warn(warnings)
        _write_parts(exps, parts_dir, shard, quiet)
        return
    if shard is not None:
        raise click.UsageError("--shard applies with --parts-dir")
    if replace and not append:
        raise click.UsageError("--replace applies with --append (without it the file is replaced anyway)")
    if output is None:
        output = DEFAULT_OUTPUT if append else _free_default_output()
        if output != DEFAULT_OUTPUT and not quiet:
            click.echo(f"{DEFAULT_OUTPUT} exists: writing {output} (-o chooses the file)", err=True)
    _run_all(exps, runner, output=output, append=append, replace=replace, quiet=quiet, verbose=verbose, jobs=jobs,
             warnings=warnings)


def _warn(lines) -> None:
    for line in lines:
        click.echo(f"Warning: {line}", err=True)


@contextlib.contextmanager
def _stop_on_sigterm():
    """While the block runs, SIGTERM (a batch system's time limit, ``timeout``) stops the simulation at its next
    slice instead of killing the process, so what it simulated is written (status ``interrupted``)."""
    import signal  # noqa: PLC0415

    from cosim import engine  # noqa: PLC0415

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: engine.request_stop())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(output, records, what: str) -> None:
    """End ``cosim run`` after a SIGTERM: say what is in ``output``, exit 143 (128 + SIGTERM) as a terminated
    process does, so a batch system still sees the job as stopped."""
    names = ", ".join(f"'{r.name}'" for r in records) or "none"
    click.echo(f"Error: interrupted by SIGTERM: {what}; runs in {output}: {names}", err=True)
    sys.exit(143)


def _write_parts(exps, parts_dir, shard, quiet) -> None:
    """Simulate this shard's parts of every run into ``parts_dir`` (cosim.batch)."""
    from cosim.batch import write_shard  # noqa: PLC0415
    from cosim.sweep.runner import parse_shard, shard_from_env  # noqa: PLC0415

    part = parse_shard(shard) if shard is not None else (shard_from_env(os.environ) or (0, 1))
    for exp in exps:
        files = write_shard(exp, parts_dir, shard=part)
        if not quiet:
            click.echo(f"run '{exp.name}': shard {part[0]}/{part[1]} wrote {len(files)} part file(s) to {parts_dir}")


def _list_experiments(catalog) -> None:
    from cosim.cli.listing import experiments  # noqa: PLC0415

    for n, description in experiments():
        click.echo(f"{n:22s} {description}")


def _base(experiment, trace_path, given) -> tuple[str | None, dict]:
    """(shipped name or path, or None with a base document) for the options given."""
    flow_opts = sorted(o for o in FLOW_ONLY if o in given)
    if trace_path is not None and flow_opts:
        raise click.UsageError(f"--{flow_opts[0].replace('_', '-')} describes a flow experiment; it cannot be "
                               "combined with --trace")
    if experiment is not None:
        return experiment, {}
    if trace_path is not None:
        return None, {"workload": {"kind": "training"}}
    if flow_opts:
        misplaced = sorted(o for o in TRAINING_ONLY if o in given)
        if misplaced:
            raise click.UsageError(f"--{misplaced[0].replace('_', '-')} applies to training runs (--trace or the "
                                   "built-in scenario), not to flow experiments")
        return None, {"workload": {"kind": "flows"}}
    from cosim.spec.catalog import DEFAULT  # noqa: PLC0415

    return DEFAULT, {}


def inert_warnings(exps) -> list[str]:
    """One line per set ns-3 attribute that acts on none of ``exps`` (e.g. the shared-buffer size of an
    InfiniBand run), naming the transport and what acts instead; an attribute that acts on one of the runs
    (a RoCE knob with --transport both) is not one."""
    from cosim.network.transport import inert_attributes  # noqa: PLC0415

    acts, inert = set(), {}
    for exp in exps:
        net = exp.network
        found = dict(inert_attributes(net.transport, net.attributes, dcqcn=net.dcqcn, ib_cc=net.ib_cc,
                                      link_flow_control=net.link_flow_control,
                                      telemetry_cc=net.telemetry_cc))
        for name, _ in net.attributes:
            if name in found:
                inert.setdefault(name, found[name])
            else:
                acts.add(name)
    return [f"{name} {why}" for name, why in inert.items() if name not in acts]


def _shorthands_of(settings: dict, names) -> set[str]:
    """The shorthands among ``names`` whose field ``--set`` settings set (``workload.flow_bytes`` → flow_bytes)."""
    from cosim.spec import SHORTHANDS, resolve_path  # noqa: PLC0415

    paths = {".".join(resolve_path(k)) for k in settings}
    return {n for n in names if SHORTHANDS[n] in paths}


def _overrides(ctx, fields, given, transport, trace_path, name, settings) -> dict:
    """Experiment fields set by the options given on the command line."""
    from cosim.spec import SHORTHANDS  # noqa: PLC0415

    out = {}
    for opt in given:
        value = fields[opt]
        if opt == "max_sim_time_ms":
            out["limits.max_sim_time_ns"] = value * 1e6
        elif opt == "collective_timeout_ms":
            out["limits.collective_timeout_ns"] = value * 1e6
        elif opt == "queue_interval_ns":
            out["telemetry.queue_sample_interval_ns"] = value
        else:
            out[SHORTHANDS[opt]] = value
    for flag in ("dcqcn", "ib_cc", "telemetry_cc", "admission", "pfc_watchdog", "fast_forward", "fast_forward_check"):
        if ctx.params[flag] is not None:
            out[SHORTHANDS[flag]] = ctx.params[flag]
    if transport is not None:
        out["network.transport"] = transport
    if trace_path is not None:
        out["workload.trace"] = trace_path
    if name is not None:
        out["name"] = name
    from cosim.spec import resolve_path  # noqa: PLC0415

    by_option = {tuple(resolve_path(k)): k for k in out}
    for key, value in settings.items():
        twice = by_option.get(tuple(resolve_path(key)))
        if twice is not None:
            raise click.UsageError(f"--set {key}: {'.'.join(resolve_path(key))} is also given by its own option: "
                                   "give it once")
        out[key] = value
    return out


DEFAULT_OUTPUT = "results.h5"


def _free_default_output() -> str:
    """results.h5, or the first results-N.h5 (N = 2, 3, ...) that does not exist yet."""
    if not os.path.exists(DEFAULT_OUTPUT):
        return DEFAULT_OUTPUT
    stem, suffix = os.path.splitext(DEFAULT_OUTPUT)
    n = 2
    while os.path.exists(f"{stem}-{n}{suffix}"):
        n += 1
    return f"{stem}-{n}{suffix}"


def _export_fabric(exps, path: str) -> None:
    from cosim.errors import CosimInputError  # noqa: PLC0415
    from cosim.network import fabric_file  # noqa: PLC0415
    from cosim.plan import compile  # noqa: PLC0415, A004

    fabric = compile(exps[0]).fabric  # the runs of one command share their network's topology
    try:
        fabric_file.write(fabric, path)
    except CosimInputError as exc:
        raise CosimInputError("--export-fabric", f"{exc.field}: {exc.problem}", "give a path that can be written") \
            from None
    click.echo(f"fabric written to {path}: {fabric.n_hosts} hosts, {fabric.n_switches} switches, "
               f"{fabric.n_links} links", err=True)


def _dry_run(exps, warnings=(), *, full_plan: bool = False) -> None:
    from cosim.plan import compile, estimate, sizes  # noqa: PLC0415, A004
    from cosim.plan.describe import describe, fabric_warning  # noqa: PLC0415
    from cosim.spec import to_document, to_toml  # noqa: PLC0415

    def plan_of(exp):
        size = None if full_plan else sizes.plan_size(exp)
        if sizes.estimated_in_dry_run(size):  # too large to plan, or to plan in a dry run's time
            return estimate.describe(exp, size)
        try:
            return describe(compile(exp))
        except sizes.TooLargeToPlan as exc:  # a job this machine cannot plan: estimated from its templates
            return estimate.describe(exp, exc.size)

    plans = [plan_of(exp) for exp in exps]
    _warn(warnings)
    for exp, plan in zip(exps, plans):
        click.echo(f"# run '{exp.name}'")
        click.echo(to_toml(to_document(exp)).rstrip())
        click.echo("\n# plan (" + ("estimated, " if "mpi_ranks" in plan else "") + "not simulated)")
        for k, x in plan.items():
            if k != "tiers":
                click.echo(f"#   {k}: {x}")
        for t in plan.get("tiers", []):
            ratio = t.get("oversubscription") or {}
            spread = ("" if not ratio else f"{ratio['max']:g}" if ratio["min"] == ratio["max"]
                      else f"{ratio['max']:g} (partly filled: {ratio['min']:g})")
            plane = t.get("per_plane")
            click.echo(f"#   tier {t['tier']}: {t.get('n_switches', 0)} switches, {t['n_links']} links at "
                       f"{'/'.join(f'{r:g}' for r in t['link_rates_gbps'])} Gbps"
                       + (f" ({plane['n_switches']} switches, {plane['n_links']} links per plane)" if plane else "")
                       + (f", oversubscription {spread}" if ratio else ""))
        if exp.is_training and "flows" in plan:
            warning = fabric_warning(plan["flows"], plan["ranks"], plan["gpus_per_server"])
            if warning:
                click.echo(f"Warning: run '{exp.name}': {warning}", err=True)
        click.echo("")


def _run_all(exps, runner, *, output, append, replace, quiet, verbose, jobs=1, warnings=()) -> None:
    from cosim import (
        engine,  # noqa: PLC0415
        results,  # noqa: PLC0415
    )
    from cosim.parallel.mpi import is_root  # noqa: PLC0415
    from cosim.plan import compile  # noqa: PLC0415, A004
    from cosim.plan.describe import fabric_warning, output_bytes_estimate, work_estimate  # noqa: PLC0415
    from cosim.results.store import check_space, check_writable  # noqa: PLC0415
    from cosim.spec.stored import check_stored  # noqa: PLC0415

    names = [n for e in exps for n in ([e.name, runner.baseline_name(e)] if e.faults and e.baseline else [e.name])]
    check_writable(output, append=append, run_names=names, replace=replace, check_runs=check_stored)
    training = exps[0].is_training or exps[0].is_shared or exps[0].is_inference
    # every run is compiled (traces, DAG size, faults, attributes checked) and its output's size estimated
    # before the first one starts: a finished simulation is not lost to a bad trace of the next or a full disk
    plans = [compile(exp) for exp in exps]
    if len(exps) > 1:
        for plan in plans:
            engine.check_fabric(plan.fabric, plan.attributes)
    need = sum(output_bytes_estimate(plan) * (2 if plan.experiment.faults and plan.experiment.baseline else 1)
               for plan in plans)
    if append and os.path.isfile(output):
        need += os.path.getsize(output)
    check_space(output, need)
    _warn(warnings)
    if not quiet and exps[0].description:
        click.echo(exps[0].description)
    show_progress = not quiet and sys.stderr.isatty()
    items = "ops" if training else "flows"
    records, written = [], 0
    with _stop_on_sigterm():
        for i, exp in enumerate(exps):
            progress = _progress_printer(exp.name if len(exps) > 1 else "", items,
                                         work_estimate(plans[i])) if show_progress else None
            plan, plans[i] = plans[i], None  # the plan's memory goes with its run
            try:
                records += runner.run_with_baseline(exp, progress=progress, plan=plan, jobs=jobs)
            except engine.Interrupted:
                _interrupted(output, records, f"run '{exp.name}' was simulated in parts and none is written")
            del plan
            if progress is not None:
                click.echo("", err=True)
            if verbose:
                s = records[-1].summary
                click.echo(f"  {exp.name}: {s['status']}, simulated {s['sim_time_ns'] / 1e6:.3f} ms in "
                           f"{s['wall_time_s']:.2f} s wall, {s['events']} events, {s['packet_hops']} packet-hops "
                           f"({s['packet_hops_per_s'] / 1e6:.2f} M/s)", err=True)
            # each run is written as soon as it is done: a later one cannot take it down with it
            if is_root():  # every MPI rank holds the records; one writes them
                results.write_results(output, records[written:], append=append or written > 0, replace=replace)
            written = len(records)
            if engine.stop_requested():
                _interrupted(output, records, f"run '{records[-1].name}' stopped at "
                             f"{records[-1].summary['sim_time_ns'] / 1e6:.3f} ms simulated (status interrupted)")
    if not quiet:
        from cosim.cli.run_table import run_table  # noqa: PLC0415

        if exps[0].is_shared:
            from cosim.results.metrics import workload_table  # noqa: PLC0415

            click.echo(workload_table(records))
            click.echo("")
        baselines = {runner.baseline_name(e) for e in exps if e.faults and e.baseline}
        click.echo(run_table({r.name: r.summary for r in records}, training=training, inference=exps[0].is_inference,
                             reference=next((r.name for r in records if r.name in baselines), None)))
        names = ", ".join(f"'{r.name}'" for r in records)
        click.echo(f"wrote {output} (run{'s' if len(records) > 1 else ''} {names})")
    for r in records:
        work = r.config.get("workload", {})
        if r.summary["status"] != "complete" or "n_ranks" not in work:  # flows, multi-job, unfinished runs
            continue
        warning = fabric_warning(r.summary["flows"], work["n_ranks"], work["gpus_per_server"])
        if warning:
            click.echo(f"Warning: run '{r.name}': {warning}", err=True)
    from cosim.results.unfinished import why_unfinished  # noqa: PLC0415

    failed = [r for r in records if r.summary["status"] != "complete"]
    for r in failed:
        s = r.summary
        done = (f"{s.get('n_dag_ops_finished', 0)}/{s.get('n_dag_ops', 0)} ops and " if training else "") + \
            f"{s['flows_completed']}/{s['flows']} flows completed"
        if "failed_collective" in s:
            done = (f"collective {s['failed_collective']} (rank {s['failed_rank']}) timed out at "
                    f"{s['failed_at_ns'] / 1e6:.3f} ms (limits.collective_timeout_ns); " + done)
        if s["status"] in ("time-limit", "stalled"):
            why = why_unfinished(s, r.config, r.faults)
            done += f"; {why}" if why else ""
        click.echo(f"Error: run '{r.name}' ended {s['status']}: {done}", err=True)
    if failed:
        sys.exit(1)


def _progress_printer(label: str, items: str, total_hops: int):
    """Progress line on stderr: simulated time (us for flow experiments, ms for training), items done, the
    share of the data packet-hops done and the time left at the recent rate (cosim.progress)."""
    from cosim.progress import WorkProgress  # noqa: PLC0415

    prefix = f"[{label}] " if label else ""
    scale, unit = (1e-3, "us") if items == "flows" else (1e-6, "ms")
    work = WorkProgress(total_hops)
    t0 = time.perf_counter()

    def show(sim_ns: float, done: int, total: int, hops: int) -> None:
        wall = time.perf_counter() - t0
        est = work.update(wall, hops, finished=done == total)
        eta = "ETA      ?" if est.eta_s is None else f"ETA {est.eta_s:6.0f} s"
        click.echo(f"\r  {prefix}simulated {sim_ns * scale:12.3f} {unit}   {items} {done}/{total}   "
                   f"work {100 * est.fraction:5.1f}%   wall {wall:6.0f} s {eta}", err=True, nl=False)

    return show
