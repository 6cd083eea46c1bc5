"""``cosim collective``: an nccl-tests-style sweep of one collective, co-simulated; prints its table, writes HDF5.

Only click and the standard library are imported at module level (fast ``--help``).
"""

from __future__ import annotations

import click

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")
TRANSPORTS = ("roce", "ib", "uec", "both", "all")
EPILOG = """\b
Columns (as nccl-tests prints them):
  size       bytes S of the op (nccl-tests' size: the all-reduce buffer, the gathered all-gather buffer,
             the unscattered reduce-scatter input, what a rank sends in an all-to-all)
  count      float32 elements of S;  type, redop: float, sum (none for data movement)
  time       us from the last member ready to the last transfer done (mean after the first iteration)
  algbw      S / time, GB/s;  busbw = algbw x 2(n-1)/n all-reduce, (n-1)/n RS/AG/all-to-all, 1 broadcast
  algo       algorithm the lowering used (auto: the tuning model's pick; docs/models/collectives.md)
\b
Examples:
  cosim collective --op all_reduce --sizes 1MiB..64MiB --ranks 8 --gpu a100
  cosim collective --sizes 1MiB..1GiB:8 --ranks 16 --transport both -o ar16.h5
  cosim collective --op all_to_all --sizes 4MiB --ranks 16 --algorithm direct
"""


@click.command(epilog=EPILOG)
@click.option("--op", type=click.Choice(OPS), default="all_reduce", show_default=True, help="Collective to sweep.")
@click.option("--sizes", default="1MiB..64MiB", show_default=True,
              help="LOW..HIGH doubling (LOW..HIGH:F for a factor F), or a list 1MiB,8MiB.")
@click.option("--ranks", type=int, default=16, show_default=True, help="GPUs taking part (ranks 0..n-1).")
@click.option("--gpus-per-server", type=int, default=8, show_default=True, help="GPUs (and NICs) per server.")
@click.option("--gpu", default="h100", show_default=True, help="GPU preset: its NVLink rate and calibration.")
@click.option("--algorithm", default="auto", show_default=True,
              help="auto (NCCL-style tuner), ring, tree, halving_doubling, direct, pxn, hierarchical, chain.")
@click.option("--channels", type=int, default=None, help="Rings across servers [default: 2 per NIC].")
@click.option("--transport", type=click.Choice(TRANSPORTS), default="roce", show_default=True,
              help="Fabric transport; both runs every size on roce and on ib, all on the three.")
@click.option("--topology", default="rail-optimized", show_default=True, help="Fabric topology generator.")
@click.option("--link-gbps", type=float, default=400.0, show_default=True, help="Rate of every link, Gb/s.")
@click.option("--iterations", type=int, default=1, show_default=True,
              help="Calls per size, chained; time is the mean after the first.")
@click.option("--chunk-bytes", default="4MiB", show_default=True, help="Largest flow a transfer is split into.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every random choice (ECMP).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write every point's run to this HDF5 results file.")
def collective(op, sizes, ranks, gpus_per_server, gpu, algorithm, channels, transport, topology, link_gbps,
               iterations, chunk_bytes, seed, output):
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
                            iterations=iterations, seed=seed)
    reduces = op in ("all_reduce", "reduce_scatter")
    click.echo(f"# cosim collective: {op}, {ranks} ranks, {gpus_per_server} per server, {gpu}, "
               f"{link_gbps:g} Gb/s {topology}, algorithm {algorithm}")
    header = (f"{'transport':>9} {'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'algo':>14} "
              f"{'time':>10} {'algbw':>8} {'busbw':>8}")
    click.echo(header)
    click.echo(f"{'':>9} {'(B)':>12} {'(elements)':>12} {'':>6} {'':>6} {'':>14} {'(us)':>10} "
               f"{'(GB/s)':>8} {'(GB/s)':>8}")
    records = []
    for row, record in run_sweep(sweep):
        records.append(record)
        click.echo(f"{row.transport:>9} {row.size_bytes:>12} {row.count:>12} {'float':>6} "
                   f"{'sum' if reduces else 'none':>6} {row.algorithm:>14} {row.time_us:>10.2f} "
                   f"{row.algbw_gbps:>8.2f} {row.busbw_gbps:>8.2f}")
    if output:
        path = results.write_results(output, records)
        click.echo(f"wrote {len(records)} runs to {path}")
