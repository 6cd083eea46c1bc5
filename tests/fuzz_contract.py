"""The input contract, fuzzed: generated CLI options, damaged trace files and damaged results files.

Whatever the input, ``cosim`` exits 0 (or 1 for a simulation that did not complete), or 2 with one line
``Error: ...`` on stderr; never a traceback, a native abort, a hang or a half-written output file. Each case
runs ``cosim`` in a child process so that an abort is seen as an exit code, not as a dead test runner.

Used by ``tests/test_fuzz_contract.py`` (a few dozen examples in CI) and ``bench/fuzz_contract.py``
(thousands, for a soak).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "traces" / "llama2-7b-2l_dp8-zero1.h5"

#: hostile spellings of numbers, sizes and names
HOSTILE = ("0", "-1", "1", "2", "1e309", "-1e309", "nan", "inf", "-inf", "abc", "1e-9", "99999999999999999999",
           "4MiB", "1.5", "0x10", "1e12", " ", "none", "true")

#: (option, values it takes): valid values mixed with hostile ones
OPTIONS = {
    "--hosts": ("4", "16", "3"), "--link-gbps": ("100", "400", "0.001"), "--link-delay-ns": ("0", "1000"),
    "--flow-bytes": ("0", "64KiB", "1MB"), "--topology": ("single-switch", "leaf-spine", "fat-tree",
                                                          "rail-optimized", "torus"),
    "--transport": ("roce", "ib", "both", "tcp"), "--spines": ("1", "2"), "--oversubscription": ("1", "2", "0.5"),
    "--hosts-per-leaf": ("2", "4", "3"), "--gpus-per-server": ("1", "2", "8"), "--seed": ("0", "1", "18446744073709551616"),
    "--queue-interval-ns": ("1000", "1", "0"), "--max-sim-time-ms": ("0.01", "1", "0"),
    "--pattern": ("incast", "permutation", "ring"),
    "--set": ("HostNic::MtuBytes=1024", "SharedBufferMmu::BufferBytes=100000", "FabricSwitch::HeadroomBytes=1",
              "EgressPort::DataRate=0bps", "HostNic::Dcqcn=abc", "Foo=1", "X::Y", "HostNic::MtuBytes=-5",
              "FabricNode::VlReservedBytes=64", "SharedBufferMmu::DynamicThresholdAlpha=nan"),
}

#: trace datasets to damage, and what to write into them
TRACE_DATASETS = ("ops/kind", "ops/rank", "ops/bytes", "ops/group", "ops/peer", "ops/coll_id", "ops/duration_ns",
                  "deps/ptr", "deps/idx", "groups/ptr", "groups/ranks", "groups/kind", "ops/match_id")
DAMAGE = ("value", "truncate", "delete", "dtype", "attr")


def cli_args():
    """Strategy: ``cosim run`` options, some valid, some hostile, in any order."""
    value = lambda opt: st.one_of(st.sampled_from(OPTIONS[opt]), st.sampled_from(HOSTILE))  # noqa: E731
    pair = st.sampled_from(sorted(OPTIONS)).flatmap(lambda opt: st.tuples(st.just(opt), value(opt)))
    return st.lists(pair, min_size=1, max_size=5)


def trace_damage():
    """Strategy: (dataset, kind of damage, index, value) to apply to a copy of a valid trace."""
    return st.tuples(st.sampled_from(TRACE_DATASETS), st.sampled_from(DAMAGE), st.integers(0, 400),
                     st.sampled_from((-1, 0, 1, 7, 255, 2**31 - 1, 2**40, -(2**40))))


def run_cosim(args: list[str], cwd: Path, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """``python -m cosim ARGS`` in a child process (the repository's package, as the tests use it)."""
    return subprocess.run([sys.executable, "-m", "cosim", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def check_contract(proc: subprocess.CompletedProcess, output: Path | None = None) -> None:
    """Exit 0/1, or 2 with one ``Error:`` line; no traceback; no output file after a failure."""
    where = f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    assert proc.returncode in (0, 1, 2), where
    assert "Traceback" not in proc.stderr + proc.stdout, where
    if proc.returncode == 2:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error:"), where
        if output is not None:
            assert not output.exists(), f"half-written {output}\n{where}"
    if output is not None:
        assert not list(output.parent.glob(f".{output.name}*")) and not list(output.parent.glob("*.tmp")), \
            f"temporary file left\n{where}"


def damage_trace(src: Path, dst: Path, dataset: str, kind: str, index: int, value: int) -> None:
    """Copy trace ``src`` to ``dst`` with one dataset damaged."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as h5:
        data = h5[dataset][()]
        if kind == "value" and data.size:
            data = data.copy()
            data[index % data.size] = np.asarray(value).astype(data.dtype, casting="unsafe")
            h5[dataset][...] = data
        elif kind == "truncate":
            del h5[dataset]
            h5[dataset] = data[: max(0, data.size - 1 - index % max(1, data.size))]
        elif kind == "delete":
            del h5[dataset]
        elif kind == "dtype":
            del h5[dataset]
            h5[dataset] = data.astype(np.float64) + 0.5
        else:
            h5.attrs["n_ranks"] = value


def damage_results(src: Path, dst: Path, dataset: str, kind: str, index: int, value: int) -> None:
    """Copy results file ``src`` to ``dst`` with one run's dataset or attribute damaged."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as h5:
        run = next(iter(h5["runs"].values()))
        if kind == "attr":
            run.attrs[("summary", "config", "provenance")[index % 3]] = ("[1]", "{", "null", "3")[value % 4]
            return
        names = []
        run.visititems(lambda k, o: names.append(k) if isinstance(o, h5py.Dataset) else None)
        name = names[index % len(names)]
        data = run[name][()]
        if kind == "value" and data.size:
            data = data.copy()
            bad = (np.nan if data.dtype.kind == "f" else value)
            data[index % data.size] = np.asarray(bad).astype(data.dtype, casting="unsafe")
            run[name][...] = data
        elif kind == "truncate":
            del run[name]
            run[name] = data[: max(0, data.size - 1)]
        elif kind == "delete":
            del run[name]
        elif kind == "dtype":
            del run[name]
            run[name] = np.array([b"x"] * max(1, data.size))
        else:
            del run[name]
            run[name] = h5py.SoftLink(f"/runs/{run.name.rsplit('/', 1)[-1]}/{name}")
