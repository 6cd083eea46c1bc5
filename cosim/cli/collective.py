"""``cosim collective``: an nccl-tests-style sweep of one collective, co-simulated; prints its table, writes HDF5.

Only click and the standard library are imported at module level (fast ``--help``).
"""

from __future__ import annotations

import click

from cosim.cli.options import parse_settings, refuse_empty

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")
TRANSPORTS = ("roce", "ib", "uec", "both", "all")
EPILOG = """\b
Output: nccl-tests' format, so scripts written for it read it: '#' header lines, one table per transport
with nccl-tests' 13 columns (out-of-place and in-place timings, which the simulation does not tell apart;
#wrong N/A as with nccl-tests -c 0) and two more after them (algo, transport), and a closing
'# Avg bus bandwidth    : X' line per table.
\b
Columns (as nccl-tests prints them):
  size       bytes S of the op (nccl-tests' size: the all-reduce buffer, the gathered all-gather buffer,
             the unscattered reduce-scatter input, what a rank sends in an all-to-all)
  count      float32 elements of S;  type, redop: float, sum (none for data movement); root -1 (0: broadcast)
  time       us from the last member ready to the last transfer done (mean after the first iteration)
  algbw      S / time, GB/s;  busbw = algbw x 2(n-1)/n all-reduce, (n-1)/n RS/AG/all-to-all, 1 broadcast
  algo       algorithm the lowering used (auto: the tuning model's pick; docs/models/collectives.md)
\b
Examples:
  cosim collective --op all_reduce --sizes 1MiB..64MiB --ranks 8 --gpu a100
  cosim collective --sizes 1MiB..1GiB:8 --ranks 16 --transport both -o ar16.h5
  cosim collective --op all_to_all --sizes 4MiB --ranks 16 --algorithm direct
  cosim collective --sizes 64MiB --ranks 72 --gpu gb200-nvl72      # NVLS inside one NVL72 rack
"""


@click.command(epilog=EPILOG)
@click.option("--op", type=click.Choice(OPS), default="all_reduce", show_default=True, help="Collective to sweep.")
@click.option("--sizes", default="1MiB..64MiB", show_default=True, callback=refuse_empty,
              help="LOW..HIGH doubling (LOW..HIGH:F for a factor F), or a list 1MiB,8MiB.")
@click.option("--ranks", type=int, default=16, show_default=True, help="GPUs taking part (ranks 0..n-1).")
@click.option("--gpus-per-server", type=int, default=None,
              help="GPUs (and NICs) per server: one NVLink domain [default: the GPU preset's, 8; gb200-nvl72 72].")
@click.option("--gpu", default="h100", show_default=True, callback=refuse_empty,
              help="GPU preset (cosim trace --list-gpus): its NVLink rate, domain size, NVLS and calibration.")
@click.option("--algorithm", default="auto", show_default=True, callback=refuse_empty,
              help="auto (NCCL-style tuner), ring, tree, halving_doubling, direct, pxn, hierarchical, chain, "
                   "nvls.")
@click.option("--channels", type=int, default=None, help="Rings across servers [default: 2 per NIC].")
@click.option("--transport", type=click.Choice(TRANSPORTS), default="roce", show_default=True,
              help="Fabric transport; both runs every size on roce and on ib, all on the three.")
@click.option("--topology", default="rail-optimized", show_default=True, callback=refuse_empty,
              help="Fabric topology generator.")
@click.option("--link-gbps", type=float, default=400.0, show_default=True, help="Rate of every link, Gb/s.")
@click.option("--iterations", type=int, default=1, show_default=True,
              help="Calls per size, chained; time is the mean after the first.")
@click.option("--chunk-bytes", default="4MiB", show_default=True, callback=refuse_empty,
              help="Largest flow a transfer is split into.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every random choice (ECMP).")
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="Set a network, limits or telemetry field or an ns-3 attribute (repeatable): "
                   "network.routing=adaptive, network.dcqcn=false, HostNic::MtuBytes=1024 "
                   "('cosim attributes' lists the attributes).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, callback=refuse_empty,
              help="Write every point's run to this HDF5 results file.")
def collective(op, sizes, ranks, gpus_per_server, gpu, algorithm, channels, transport, topology, link_gbps,
               iterations, chunk_bytes, seed, assignments, output):
    """Sweep one collective over message sizes like nccl-tests, co-simulated on the packet-level fabric.

    Every size is a one-collective trace on --ranks GPUs, lowered (algorithm, channels, NVLink from the
    GPU preset) and run in ns-3 exactly as a training run's collectives are.
    """
    from cosim import results  # noqa: PLC0415
    from cosim.collectives.lower import algorithm_table  # noqa: PLC0415
    from cosim.sweep.collective import CollectiveSweep, parse_sizes, run_sweep  # noqa: PLC0415
    from cosim.values import Size  # noqa: PLC0415

    algorithm_table(algorithm)  # an unknown name fails before anything runs
    sweep = CollectiveSweep(op=op, sizes_bytes=parse_sizes(sizes), n_ranks=ranks, gpus_per_server=gpus_per_server,
                            gpu=gpu, algorithm=algorithm, transports={"both": ("roce", "ib"),
                                                                          "all": ("roce", "ib", "uec")}.get(
                                transport, (transport,)), topology=topology, link_gbps=link_gbps, n_channels=channels,
                            chunk_bytes=Size(minimum=1).convert(chunk_bytes, "--chunk-bytes"),
                            iterations=iterations, seed=seed, settings=tuple(parse_settings(assignments).items()))
    click.echo(f"# cosim collective: {op}, {ranks} ranks, {sweep.gpus_per_server} per server, {gpu}, "
               f"{link_gbps:g} Gb/s {topology}, algorithm {algorithm}, iterations: {iterations}, seed {seed}")
    records = []
    rows = run_sweep(sweep)
    for t in sweep.transports:
        click.echo("\n".join(nccl_header(t, sweep.sizes_bytes)))
        bus = []
        for _ in sweep.sizes_bytes:
            row, record = next(rows)
            records.append(record)
            bus.append(row.busbw_gbps)
            click.echo(nccl_row(row, op))
        click.echo("\n".join(nccl_footer(bus)))
    if output:
        path = results.write_results(output, records)
        click.echo(f"# wrote {len(records)} runs to {path}")


#: the root column nccl-tests prints: -1 for collectives without a root
_ROOT = {"broadcast": 0}


def nccl_header(transport: str, sizes_bytes) -> list[str]:
    """nccl-tests' comment header of one transport's table (its column names, units and the two extra
    columns after its 13), every line '#'-prefixed as its parsers skip them."""
    return [f"# transport: {transport}   minBytes {min(sizes_bytes)} maxBytes {max(sizes_bytes)}   validation: 0 "
            "(no data is moved: #wrong is N/A; in-place equals out-of-place in the simulation)",
            "#",
            f"#{'':>62}out-of-place{'':>23}in-place{'':>10}",
            f"#{'size':>11}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
            f"{'busbw':>6}  {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}  "
            f"{'algo':>14}  {'transport':>9}",
            f"#{'(B)':>11}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
            f"{'(GB/s)':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}"]


def nccl_row(row, op: str) -> str:
    """One data line as nccl-tests prints it (size, count, type, redop, root, then time, algbw, busbw and
    #wrong out of place and in place), then the algorithm and the transport."""
    redop = "sum" if op in ("all_reduce", "reduce_scatter") else "none"
    timing = f"{row.time_us:7.2f}  {row.algbw_gbps:6.2f}  {row.busbw_gbps:6.2f}  {'N/A':>6}"
    return (f"{row.size_bytes:12d}  {row.count:12d}  {'float':>8}  {redop:>6}  {_ROOT.get(op, -1):6d}  "
            f"{timing}  {timing}  {row.algorithm:>14}  {row.transport:>9}")


def nccl_footer(busbw_gbps) -> list[str]:
    """nccl-tests' closing lines: the mean bus bandwidth over the table's sizes (GB/s)."""
    mean = sum(busbw_gbps) / len(busbw_gbps) if busbw_gbps else 0.0
    return ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {mean:g} ", "#"]

