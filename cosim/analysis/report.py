"""One self-contained HTML page of a results file: comparison table, scenarios, figures (base64 PNG).

The page references nothing outside itself (no scripts, fonts or image files) and carries no timestamp,
so the same results give the same bytes.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from cosim import __version__
from cosim.results.compare import compare_runs
from cosim.analysis.plots import iter_figures, render
from cosim.h5io import atomic_output
from cosim.results.api import flat_fields

MAX_RUN_FIGURES = 12  # runs that get their per-run figures in a report (a 500-point sweep would be huge)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
tr.diff td { background: #fff7d6; } td.d { color: #666; }
figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; }
img { max-width: 100%; border: 1px solid #eee; }
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
    return "\n".join(out + ["</table>"])


def compare_html(runs: Mapping, *, baseline: str | None = None) -> str:
    """The comparison table of ``runs`` as an HTML table (display units, delta/ratio columns greyed)."""
    header, body = compare_runs(runs, baseline=baseline).cells()
    return _table(header, body, left=2, cell_class=lambda i: "d" if i > 2 and (i - 3) % 3 else "")


def experiment_html(runs: Mapping) -> str:
    """Experiment fields (config["experiment"]) per run; rows where runs differ are highlighted."""
    specs = {n: flat_fields(r.config.get("experiment", {})) for n, r in runs.items()}
    keys = list(dict.fromkeys(k for s in specs.values() for k in s))
    if not keys:
        return "<p>No experiment stored.</p>"
    cell = lambda v: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v  # noqa: E731
    rows = [[k] + [cell(specs[n].get(k)) for n in runs] for k in keys]
    diff = ["diff" if len({json.dumps(specs[n].get(k), sort_keys=True) for n in runs}) > 1 else "" for k in keys]
    return _table(["field", *runs], rows, row_class=diff)


def provenance_html(runs: Mapping) -> str:
    """Provenance (versions, seed, host, wall time) per run."""
    keys = list(dict.fromkeys(k for r in runs.values() for k in r.provenance))
    return _table(["", *runs], [[k] + [runs[n].provenance.get(k) for n in runs] for k in keys])


def figures_html(runs: Mapping, *, top_n: int = 8,
                 max_runs: int | None = MAX_RUN_FIGURES) -> tuple[str, list[tuple[str, str]]]:
    """Every figure of ``runs`` as embedded <img> tags, and the (stem, reason) list of skipped ones."""

    parts, skipped = [], []
    for res in iter_figures(runs, top_n=top_n, max_runs=max_runs):
        if res.figure is None:
            skipped.append((res.stem, res.reason))
            continue
        data = base64.b64encode(render(res.figure, "png")).decode("ascii")
        parts.append(f'<figure><img alt="{_e(res.title)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{_e(res.title)}</figcaption></figure>")
    return "\n".join(parts), skipped


def build_report(runs: Mapping, *, title: str, sources: Sequence[str] = (), baseline: str | None = None,
                 top_n: int = 8) -> str:
    """The HTML page of ``runs`` ({label: RunRecord}) as text."""
    figures, skipped = figures_html(runs, top_n=top_n)
    skipped_html = ("<p>Skipped (data absent): " + "; ".join(f"{_e(s)} ({_e(r)})" for s, r in skipped) + "</p>"
                    if skipped else "")
    src = ", ".join(_e(s) for s in sources)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p>{len(runs)} run(s){" from " + src if src else ""}; report by cosim {_e(__version__)}.
Deltas and ratios are against the first run.</p>
<h2>Summary</h2>
{compare_html(runs, baseline=baseline)}
<h2>Figures</h2>
{figures or "<p>No figure: the runs store no tables (a summary-only file?).</p>"}
{skipped_html}
<h2>Scenarios</h2>
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
