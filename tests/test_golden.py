"""Golden regression: small flow and training runs on both transports, compared exactly with stored files.

Every dataset of every run must be identical (dtype, shape and values, nan included) and every summary
value equal but the wall-clock ones. A failure means behaviour moved: if on purpose, regenerate with
``python tests/golden/regenerate.py`` and say why in the commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import CASES, golden_path, run_case, snapshot  # noqa: E402


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_matches_golden_file(case, tmp_path, engine_ns):
    """The rerun of ``case`` reproduces its golden results file bit for bit."""
    out = tmp_path / f"{case}.h5"
    run_case(case, out)
    want, got = snapshot(golden_path(case)), snapshot(out)
    assert list(got) == list(want), "runs differ"
    for run in want:
        w, g = want[run], got[run]
        assert sorted(g["datasets"]) == sorted(w["datasets"]), f"{run}: datasets differ"
        for key, expected in w["datasets"].items():
            actual = g["datasets"][key]
            assert actual.dtype == expected.dtype and actual.shape == expected.shape, f"{run}/{key}"
            assert np.array_equal(actual, expected, equal_nan=expected.dtype.kind == "f"), f"{run}/{key} differs"
        assert g["summary"] == w["summary"], f"{run}: summary differs"
