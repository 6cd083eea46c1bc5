"""Golden regression: small flow and training runs on both transports, compared exactly with stored files.

Every dataset of every run must be identical (dtype, shape and values, nan included) and every summary
value equal but the wall-clock ones. A failure means behaviour moved: if on purpose, regenerate with
``python tests/golden/regenerate.py`` and say why in the commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import CASES, assert_matches_golden, run_case  # noqa: E402


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_matches_golden_file(case, tmp_path, engine_ns):
    """The rerun of ``case`` reproduces its golden results file bit for bit."""
    out = tmp_path / f"{case}.h5"
    run_case(case, out)
    assert_matches_golden(case, out)
