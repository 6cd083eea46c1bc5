"""``cosim inspect``: the runs of a results file, their summaries, and the Experiment that made each."""

from __future__ import annotations

import click

from cosim.cli.options import refuse_empty


@click.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the runs' config, provenance and summary as JSON.")
@click.option("--config", "as_config", is_flag=True,
              help="Print the Experiment of a run as TOML: 'cosim run' of that file reproduces the run.")
@click.option("--run", "run_name", default=None, callback=refuse_empty,
              help="The run to show with --config (needed when the file holds several).")
def inspect(path, as_json, as_config, run_name):
    """List the runs of results file PATH with their experiments and summaries, side by side.

    \b
    First what ran (workload, topology, transport, hosts, link rate, and the
    trace, parallelism and iterations of a training run, or the flow
    pattern), then the summary table as 'cosim run' prints it.
    --config prints the whole experiment of one run; --json everything.
    Examples:
      cosim inspect results.h5
      cosim inspect results.h5 --config --run roce > roce.toml && cosim run roce.toml -o again.h5
    """
    import json  # noqa: PLC0415

    from cosim import results  # noqa: PLC0415
    from cosim.errors import CosimInputError  # noqa: PLC0415
    from cosim.results.metrics import summary_table  # noqa: PLC0415
    from cosim.spec import to_toml  # noqa: PLC0415

    runs = results.read_results(path)
    if as_config:
        if run_name is None and len(runs) != 1:
            raise CosimInputError("--run", f"{path} holds {len(runs)} runs", f"name one of {', '.join(runs)}")
        name = run_name if run_name is not None else next(iter(runs))
        if name not in runs:
            raise CosimInputError("--run", f"no run {name!r} in {path}", f"choose one of {', '.join(runs)}")
        doc = runs[name].config.get("experiment")
        if not isinstance(doc, dict):
            raise CosimInputError(path, f"run {name!r} stores no experiment (written by an older cosim)")
        if runs[name].config.get("workload", {}).get("trace_in_memory"):
            raise CosimInputError("--config", f"run {name!r} ran an in-memory trace, which the file does not hold",
                                  "write the trace with cosim trace and set workload.trace")
        click.echo(f"# experiment of run '{name}' in {path}\n" + to_toml(doc), nl=False)
        return
    if as_json:
        click.echo(json.dumps({n: {"config": r.config, "provenance": r.provenance, "summary": r.summary}
                               for n, r in runs.items()}, indent=2, sort_keys=True))
        return
    if not runs:
        click.echo(f"{path}: no runs")
        return
    from cosim.analysis.describe import FACT_ORDER, run_facts  # noqa: PLC0415
    from cosim.results.metrics import layout  # noqa: PLC0415

    click.echo(f"{path}: {len(runs)} run(s)\n")
    facts = {n: run_facts(r.config) for n, r in runs.items()}
    for n, r in runs.items():
        p = r.provenance
        facts[n]["written by"] = f"cosim {p.get('cosim_version')}, ns-3 {p.get('ns3_version')}"
    present = {k for f in facts.values() for k in f}
    labels = [k for k in (*FACT_ORDER, "written by") if k in present]
    click.echo(layout(["experiment", *runs], [[k] + [facts[n].get(k, "-") for n in runs] for k in labels],
                      left=len(runs) + 1))
    click.echo("")
    training = all(r.config.get("experiment", {}).get("workload", {}).get("kind") == "training"
                   for r in runs.values())
    click.echo(summary_table({n: r.summary for n, r in runs.items()}, training=training))
