"""One self-contained HTML page of a results file: what ran, comparison table, figures (base64 PNG),
every experiment field and the provenance of each run.

The page references nothing outside itself (no scripts, fonts or image files) and carries no timestamp,
so the same results give the same bytes. It uses the window's full width: figures flow into as many
columns as fit, wide tables scroll sideways inside their box. Numbers are rounded as in the terminal
tables (the metric registry; 4 significant digits for experiment fields).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from cosim import __version__
from cosim.analysis.describe import FACT_ORDER, run_facts
from cosim.analysis.plots import iter_figures, render
from cosim.h5io import atomic_output
from cosim.results.api import flat_fields
from cosim.results.compare import compare_runs
from cosim.results.metrics import format_number, metric_for
from cosim.results.pivot import pivot_runs

MAX_RUN_FIGURES = 12  # runs that get their per-run figures in a report (a 500-point sweep would be huge)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1em 2vw; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; position: sticky; top: 0; } td.l, th.l { text-align: left; }
tr.diff td { background: #fff7d6; } td.d { color: #666; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 560px), 1fr)); gap: 1em; }
figure { margin: 0; } figcaption { font-size: 0.85em; color: #555; }
img { width: 100%; height: auto; border: 1px solid #eee; }
"""


def _e(v) -> str:
    return html.escape("" if v is None else str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1,
           row_class: Sequence[str] | None = None, cell_class=None) -> str:
    out = ["<table><tr>" + "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>'
                                   for i, h in enumerate(header)) + "</tr>"]
    for j, row in enumerate(rows):
        cls = f' class="{row_class[j]}"' if row_class and row_class[j] else ""
        cells = []
        for i, c in enumerate(row):
            klass = "l" if i < left else (cell_class(i) if cell_class else "")
            cells.append(f'<td class="{klass}">{_e(c)}</td>')
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    return '<div class="scroll">' + "\n".join(out + ["</table>"]) + "</div>"


def compare_html(runs: Mapping, *, baseline: str | None = None) -> str:
    """The comparison table of ``runs`` as an HTML table (display units, delta/ratio columns greyed)."""
    header, body = compare_runs(runs, baseline=baseline).cells()
    return _table(header, body, left=2, cell_class=lambda i: "d" if i > 2 and (i - 3) % 3 else "")


def pivot_html(runs: Mapping, *, baseline: str | None = None) -> str:
    """The pivot table of ``runs`` (as ``cosim compare --pivot``): a row per run, the swept fields and key
    metrics as columns (label and unit), the ratio column greyed."""
    table = pivot_runs(runs, baseline=baseline)
    labels, units, body = table.cells()
    header = [f"{label} ({unit})" if unit else label for label, unit in zip(labels, units)]
    left = max(1, len(table.fields))
    return _table(header, body, left=left, cell_class=lambda i: "d" if i == left + 1 else "") + \
        f"<p>ratio: {_e(table.primary.label)} / the baseline's ({_e(table.baseline)}).</p>"


def summary_html(runs: Mapping, *, baseline: str | None = None) -> str:
    """The summary section: for more than two runs the pivot table, with every metric folded below it;
    else the comparison table."""
    if len(runs) <= 2:
        return compare_html(runs, baseline=baseline)
    return (pivot_html(runs, baseline=baseline) + "<details><summary>every metric, a column per run</summary>"
            + compare_html(runs, baseline=baseline) + "</details>")


def field_text(value) -> str:
    """An experiment or provenance value as table text: numbers to 4 significant digits, integers whole,
    lists and tables inline with their numbers rounded alike, an unset (automatic) value as "-"."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return "-" if value is None else str(value)
    if isinstance(value, (int, float)):
        return format_number(value, integer=isinstance(value, int))
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {field_text(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(field_text(v) for v in value) + "]"
    return str(value)


def _side_by_side(specs: Mapping[str, Mapping], names: Sequence[str], *, first: str, left: int = 1,
                  order: Sequence[str] = ()) -> str:
    """Rows of ``specs`` ({run: {field: value}}) as a table, rows where runs differ highlighted; rows named
    in ``order`` come first, in that order."""
    keys = list(dict.fromkeys(k for s in specs.values() for k in s))
    rank = {k: i for i, k in enumerate(order)}
    keys.sort(key=lambda k: rank.get(k, len(rank)))
    rows = [[k] + [field_text(specs[n].get(k)) for n in names] for k in keys]
    diff = ["diff" if len({json.dumps(specs[n].get(k), sort_keys=True, default=str) for n in names}) > 1 else ""
            for k in keys]
    return _table([first, *names], rows, row_class=diff, left=left)


def facts_html(runs: Mapping) -> str:
    """What each run was (workload, fabric as built, transport, rates), from cosim.analysis.describe."""
    return _side_by_side({n: run_facts(r.config) for n, r in runs.items()}, list(runs), first="",
                         left=len(runs) + 1, order=FACT_ORDER)


def experiment_html(runs: Mapping) -> str:
    """Every field of the resolved experiment (config["experiment"]) per run, training and flow runs alike;
    rows where runs differ are highlighted."""
    specs = {n: flat_fields(r.config.get("experiment") or {}) for n, r in runs.items()}
    if not any(specs.values()):
        return "<p>No experiment stored (files written by an older cosim).</p>"
    return _side_by_side(specs, list(runs), first="field", left=len(runs) + 1)


def provenance_html(runs: Mapping) -> str:
    """Provenance (versions, seed, host, wall time) per run, numbers rounded as in the tables."""
    keys = list(dict.fromkeys(k for r in runs.values() for k in r.provenance))
    label = lambda k: f"{k} ({metric_for(k).unit})" if metric_for(k).unit else k  # noqa: E731
    return _table(["", *runs], [[label(k)] + [field_text(runs[n].provenance.get(k)) for n in runs] for k in keys])


def figures_html(runs: Mapping, *, top_n: int = 8, max_runs: int | None = MAX_RUN_FIGURES,
                 names: Collection[str] = ()) -> tuple[str, list[tuple[str, str]]]:
    """Every figure of ``runs`` (``names``: only those) as embedded <img> tags, and the (stem, reason) list of
    skipped ones."""

    parts, skipped = [], []
    for res in iter_figures(runs, top_n=top_n, max_runs=max_runs, names=names):
        if res.figure is None:
            skipped.append((res.stem, res.reason))
            continue
        data = base64.b64encode(render(res.figure, "png")).decode("ascii")
        w, h = (round(x * res.figure.dpi) for x in res.figure.get_size_inches())
        parts.append(f'<figure><img alt="{_e(res.title)}" width="{w}" height="{h}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{_e(res.title)}</figcaption></figure>')
    return ('<div class="figures">\n' + "\n".join(parts) + "\n</div>" if parts else ""), skipped


def build_report(runs: Mapping, *, title: str, sources: Sequence[str] = (), baseline: str | None = None,
                 top_n: int = 8, figures: Collection[str] = ()) -> str:
    """The HTML page of ``runs`` ({label: RunRecord}) as text; every table has the baseline's column first;
    ``figures``: only these figures (names of cosim.analysis.figure_names; default all)."""
    if baseline in runs:
        runs = {baseline: runs[baseline]} | {n: r for n, r in runs.items() if n != baseline}
    figure_tags, skipped = figures_html(runs, top_n=top_n, names=figures)
    skipped_html = ("<p>Skipped (data absent): " + "; ".join(f"{_e(s)} ({_e(r)})" for s, r in skipped) + "</p>"
                    if skipped else "")
    src = ", ".join(_e(s) for s in sources)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p>{len(runs)} run(s){" from " + src if src else ""}; report by cosim {_e(__version__)}.
Deltas and ratios are against the first run{" (" + _e(baseline) + ")" if baseline else ""}.</p>
<h2>What ran</h2>
{facts_html(runs)}
<h2>Summary</h2>
{summary_html(runs, baseline=baseline)}
<h2>Figures</h2>
{figure_tags or "<p>No figure: the runs store no tables (a summary-only file?).</p>"}
{skipped_html}
<h2>Experiments</h2>
{experiment_html(runs)}
<h2>Provenance</h2>
{provenance_html(runs)}
</body></html>
"""


def write_report(runs: Mapping, path: str | Path, **kwargs) -> Path:
    """Write the HTML page of ``runs`` to ``path`` atomically (kwargs as for build_report)."""

    page = build_report(runs, **kwargs)
    path = Path(path)
    with atomic_output(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path
