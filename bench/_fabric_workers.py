"""One row per fabric, each measured in a fresh worker process: the driver of bench_iteration.py and
bench_gpt13b.py.

A fresh process per row keeps a row's peak RSS (ru_maxrss) that fabric's alone. The script calls
:func:`add_arguments` on its parser and hands its parsed arguments, its row function and its columns to
:func:`main`: as ``--worker`` it prints its row as JSON; otherwise it runs itself once per fabric with the
same options (``--transport`` set to that one) and prints the rows as a table or, with ``--json``, as JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence

FABRICS = ("roce", "ib")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every such script takes: the fabric(s), JSON output and the hidden worker switch."""
    parser.add_argument("--transport", choices=(*FABRICS, "both"), default="both")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def rows_in_workers(script: str, fabric: str, argv: Sequence[str]) -> list[dict]:
    """Run ``script`` as a worker per fabric of ``fabric`` (a fabric or "both") with the options ``argv``
    (its command line); each worker's last stdout line is its row."""
    options = [a for a in argv if a != "--json"]
    rows = []
    for one in FABRICS if fabric == "both" else (fabric,):
        cmd = [sys.executable, script, *options, "--worker", "--transport", one]  # the last --transport wins
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        took = f" in {rows[-1]['total_s']:.1f} s" if "total_s" in rows[-1] else ""
        print(f"{one}: done{took}", file=sys.stderr)
    return rows


def table(rows: list[dict], columns: Sequence[tuple[str, str]]) -> list[str]:
    """``rows`` as right-aligned text columns (name, format) under a header; columns some row lacks are left out."""
    cols = [(name, fmt) for name, fmt in columns if all(name in r for r in rows)]
    cells = [[name for name, _ in cols]] + [[fmt.format(r[name]) for name, fmt in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def main(script: str, args: argparse.Namespace, run_one: Callable[[argparse.Namespace], dict],
         columns: Sequence[tuple[str, str]]) -> None:
    """The script's main once its options are parsed (module docstring)."""
    if args.worker:
        print(json.dumps(run_one(args)))
        return
    rows = rows_in_workers(script, args.transport, sys.argv[1:])
    print(json.dumps(rows, indent=2) if args.json else "\n".join(table(rows, columns)))
