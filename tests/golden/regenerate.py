"""Rewrite the golden results files: ``python tests/golden/regenerate.py [CASE ...]``.

Only for a change of physics or of the schema made on purpose; the commit that moves a golden file says why.
For every case it prints what moved against the file it replaces (datasets and summary values changed,
added or removed), so the commit message can say exactly that.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cases import CASES, golden_path, run_case  # noqa: E402

from cosim.results import read_results  # noqa: E402

#: summary values that differ between identical runs (wall clock), never compared
_UNSTABLE = {"wall_time_s", "packet_hops_per_s"}


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def moved(old: Path, new: Path) -> list[str]:
    """What differs from ``old`` to ``new``: one line per changed, added or removed dataset or summary key."""
    if not old.exists():
        return ["new golden file"]
    before, after = read_results(old), read_results(new)
    lines = [f"run {n}: removed" for n in before.keys() - after.keys()]
    lines += [f"run {n}: added" for n in after.keys() - before.keys()]
    for name in before.keys() & after.keys():
        a, b = before[name], after[name]
        for group in ("flows", "queues", "ports", "pauses", "latency", "stalls", "ops", "collectives", "iterations"):
            ta, tb = a.table(group), b.table(group)
            for col in sorted(ta.keys() | tb.keys()):
                where = f"{name}/{group}/{col}"
                if col not in tb:
                    lines.append(f"{where}: removed")
                elif col not in ta:
                    lines.append(f"{where}: added")
                elif not _same(ta[col], tb[col]):
                    lines.append(f"{where}: changed")
        sa, sb = a.summary, b.summary
        for key in sorted((sa.keys() | sb.keys()) - _UNSTABLE):
            if key not in sb:
                lines.append(f"{name} summary {key}: removed")
            elif key not in sa:
                lines.append(f"{name} summary {key}: added")
            elif sa[key] != sb[key]:
                lines.append(f"{name} summary {key}: {sa[key]!r} -> {sb[key]!r}")
    return lines


def main(names: list[str]) -> None:
    for case in names or sorted(CASES):
        if case not in CASES:
            sys.exit(f"Error: unknown golden case {case!r} (known: {', '.join(sorted(CASES))})")
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "fresh.h5"
            run_case(case, fresh)
            changes = moved(golden_path(case), fresh)
            shutil.move(fresh, golden_path(case))
        print(f"wrote {golden_path(case)}: " + ("unchanged" if not changes else f"{len(changes)} change(s)"))
        for line in changes:
            print(f"  {line}")


if __name__ == "__main__":
    main(sys.argv[1:])
