"""The golden regression cases: small flow and training runs on both transports, as ``cosim run`` arguments.

Each case writes one results file; ``tests/test_golden.py`` reruns it and compares every dataset of every
run exactly, and every summary value except the wall-clock ones, with ``tests/golden/<case>.h5``. The
files change only through ``python tests/golden/regenerate.py`` (physics changed on purpose: say why in
the commit).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "traces"

#: case name -> ``cosim run`` arguments (the output file is appended)
CASES: dict[str, list[str]] = {
    "incast-single-switch": ["--pattern", "incast", "--hosts", "5", "--flow-bytes", "256KiB", "--transport", "both",
                             "--set", "SharedBufferMmu::BufferBytes=2000000"],
    "permutation-leaf-spine": ["--pattern", "permutation", "--topology", "leaf-spine", "--hosts", "8",
                               "--hosts-per-leaf", "4", "--oversubscription", "2", "--flow-bytes", "512KiB",
                               "--transport", "both", "--ib-cc"],
    "incast-no-dcqcn": ["--pattern", "incast", "--hosts", "4", "--flow-bytes", "128KiB", "--no-dcqcn",
                        "--link-gbps", "400", "--transport", "roce"],
    "training-dp8-zero1": ["--trace", str(TRACES / "llama2-7b-2l_dp8-zero1.h5"), "--gpus-per-server", "4",
                           "--queue-interval-ns", "20000", "--transport", "both"],
    "training-tp2-pp2-dp2": ["--trace", str(TRACES / "llama2-7b-2l_tp2-pp2-dp2.h5"), "--gpus-per-server", "2",
                             "--topology", "leaf-spine", "--oversubscription", "2", "--iterations", "2",
                             "--chunk-bytes", "1MiB", "--queue-interval-ns", "20000", "--transport", "both"],
}

#: summary values that depend on the machine, not on the simulation
VOLATILE_SUMMARY = frozenset({"wall_time_s", "packet_hops_per_s"})


def golden_path(case: str) -> Path:
    """The stored results file of ``case``."""
    return Path(__file__).resolve().parent / f"{case}.h5"


def run_case(case: str, output: Path) -> None:
    """Run ``case`` in-process with the real CLI into ``output``; raise if it does not exit 0."""
    from cosim.cli import main

    try:
        main(["run", *CASES[case], "--quiet", "-o", str(output)])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise RuntimeError(f"golden case {case} exited {exc.code}") from None


def snapshot(path: Path) -> dict:
    """Everything the golden comparison covers: per run, its datasets (as arrays) and its summary."""
    import json

    import h5py

    out = {}
    with h5py.File(path, "r") as h5:
        for name, run in h5["runs"].items():
            data = {}
            run.visititems(lambda key, obj: data.__setitem__(key, obj[()]) if isinstance(obj, h5py.Dataset) else None)
            summary = {k: v for k, v in json.loads(run.attrs["summary"]).items() if k not in VOLATILE_SUMMARY}
            out[name] = {"datasets": data, "summary": summary}
    return out


def assert_same_results(want: dict, got: dict, *, ignore: tuple[str, ...] = ()) -> None:
    """Assert that two snapshots (:func:`snapshot`) hold the same runs, every dataset equal (dtype, shape and
    values, nan included) and every summary value equal but those named in ``ignore``."""
    import numpy as np

    assert list(got) == list(want), "runs differ"
    for run in want:
        w, g = want[run], got[run]
        assert sorted(g["datasets"]) == sorted(w["datasets"]), f"{run}: datasets differ"
        for key, expected in w["datasets"].items():
            actual = g["datasets"][key]
            assert actual.dtype == expected.dtype and actual.shape == expected.shape, f"{run}/{key}"
            assert np.array_equal(actual, expected, equal_nan=expected.dtype.kind == "f"), f"{run}/{key} differs"
        kept = lambda summary: {k: v for k, v in summary.items() if k not in ignore}  # noqa: E731
        assert kept(g["summary"]) == kept(w["summary"]), f"{run}: summary differs"


def assert_matches_golden(case: str, path: Path) -> None:
    """Assert that the results file ``path`` of ``case`` equals its golden file: every dataset and every summary
    value but the wall-clock ones (:func:`assert_same_results`)."""
    assert_same_results(snapshot(golden_path(case)), snapshot(path))
