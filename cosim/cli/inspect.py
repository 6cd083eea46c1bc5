"""``cosim inspect``: the runs of a results file and their summaries."""

from __future__ import annotations

import click


@click.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the runs' config, provenance and summary as JSON.")
def inspect(path, as_json):
    """List the runs of results file PATH with their summaries, side by side."""
    import json  # noqa: PLC0415

    from cosim import results  # noqa: PLC0415
    from cosim.results.tables import summary_table  # noqa: PLC0415

    runs = results.read_results(path)
    if as_json:
        click.echo(json.dumps({n: {"config": r.config, "provenance": r.provenance, "summary": r.summary}
                               for n, r in runs.items()}, indent=2, sort_keys=True))
        return
    if not runs:
        click.echo(f"{path}: no runs")
        return
    click.echo(f"{path}: {len(runs)} run(s)")
    for n, r in runs.items():
        p = r.provenance
        click.echo(f"  {n}: cosim {p.get('cosim_version')}, ns-3 {p.get('ns3_version')}, seed {p.get('seed')}, "
                   f"{r.flows['src'].size} flows, {r.queues['time_ns'].size} queue samples")
    click.echo(summary_table({n: r.summary for n, r in runs.items()}))
