"""Sweep workers: a native crash fails only its point (with any --jobs), and workers die with the sweep.

The point functions below run in spawned worker processes, which import this module by name (pytest puts
tests/ on sys.path, and spawn children inherit it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cosim.sweep import runner
from cosim.sweep.spec import load_sweep

SPEC = """
[sweep]
name = "crash"
[base]
hosts = 4
flow_bytes = "16KB"
[grid]
seed = [1, 2, 3, 4]
"""
CRASH_AT = 1  # the point whose worker aborts


def aborting_point(point: dict, outdir: str, sweep_name: str) -> runner.PointResult:
    """A point function whose point CRASH_AT aborts the process natively (SIGABRT); the others succeed
    without simulating (the pool, not ns-3, is under test)."""
    if point["index"] == CRASH_AT:
        os.abort()
    time.sleep(0.2)  # keep neighbours in flight while the crash happens
    return runner.PointResult(point["index"], point["run_name"], "complete", 0.0)


def sleeping_point(point: dict, outdir: str, sweep_name: str) -> runner.PointResult:
    """A point function that outlives any test (a long simulation)."""
    time.sleep(120)
    return runner.PointResult(point["index"], point["run_name"], "complete", 0.0)


def _sweep(tmp_path: Path):
    spec = tmp_path / "crash.toml"
    spec.write_text(SPEC, encoding="utf-8")
    return load_sweep(spec)


@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_native_crash_fails_only_its_point(tmp_path, jobs):
    """A worker that aborts fails its own point, named with 'worker process died'; every other point of
    the sweep still completes, whatever the number of workers (also --jobs 1, which runs points in a child),
    and no temporary file is left."""
    sweep = _sweep(tmp_path)
    out = runner.run_sweep(sweep, tmp_path / "out", jobs=jobs, point_runner=aborting_point)
    by_index = {r.index: r for r in out.results}
    assert sorted(by_index) == [0, 1, 2, 3]
    assert by_index[CRASH_AT].status == "error" and "worker process died" in by_index[CRASH_AT].error
    assert "\n" not in by_index[CRASH_AT].error
    assert all(by_index[i].status == "complete" for i in by_index if i != CRASH_AT)
    assert not list((tmp_path / "out").glob(".*.tmp"))


def _children(pid: int) -> set[int]:
    """Live (non-zombie) processes whose parent is ``pid``."""
    kids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.add(int(d.name))
    return kids


def _is_worker(pid: int) -> bool:
    """True if process ``pid`` is a spawned worker (False once it has gone: a child can exit between the
    listing of /proc and this read)."""
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the workers")
@pytest.mark.parametrize("jobs", [1, 3])
def test_killing_the_sweep_takes_its_workers_down(tmp_path, jobs):
    """SIGKILL of the sweep process (no cleanup code runs) leaves no worker behind within a few seconds:
    each worker dies with its parent."""
    (tmp_path / "crash.toml").write_text(SPEC, encoding="utf-8")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from cosim.sweep import runner
        from cosim.sweep.spec import load_sweep
        import test_reliability_sweep as t
        runner.run_sweep(load_sweep({str(tmp_path / "crash.toml")!r}), {str(tmp_path / "out")!r}, jobs={jobs},
                         point_runner=t.sleeping_point)
    """)
    repo = Path(__file__).resolve().parents[1]
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    workers: set[int] = set()
    others: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(workers) < jobs:
            workers = {k for k in _children(parent.pid) if _is_worker(k)} if _alive(parent.pid) else set()
            time.sleep(0.1)
        assert len(workers) >= jobs, f"the sweep started {len(workers)} of {jobs} workers"
        time.sleep(1.0)  # the workers are past their initializer, running points
        others = _children(parent.pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(k) for k in others):
            time.sleep(0.1)
        left = sorted(k for k in others if _alive(k))
        assert not left, f"processes {left} outlived the killed sweep"
    finally:
        if parent.poll() is None:
            parent.kill()
        for k in others | workers:  # only processes this test started, should the assertion have failed
            if _alive(k):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(k, signal.SIGKILL)
