"""Rewrite the golden results files: ``python tests/golden/regenerate.py [CASE ...]``.

Only for a change of physics made on purpose; the commit that moves a golden file says why.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, golden_path, run_case  # noqa: E402


def main(names: list[str]) -> None:
    for case in names or sorted(CASES):
        if case not in CASES:
            sys.exit(f"Error: unknown golden case {case!r} (known: {', '.join(sorted(CASES))})")
        run_case(case, golden_path(case))
        print(f"wrote {golden_path(case)}")


if __name__ == "__main__":
    main(sys.argv[1:])
