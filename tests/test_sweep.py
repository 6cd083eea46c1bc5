"""cosim sweep / merge: expansion, validation, sharding, resume after a kill, merge = single-process sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main

import cosim
from cosim import results
from cosim.cli import main
from cosim.errors import CosimInputError
from cosim.sweep import runner
from cosim.sweep.spec import load_sweep, parse_sweep

SMALL = """
[sweep]
name = "t"
[base]
hosts = 4
flow_bytes = "50KB"
[base.attributes]
"SharedBufferMmu::BufferBytes" = 4000000
[grid]
dcqcn = [true, false]
attributes."FabricSwitch::EcnKminBytes" = [20000, 100000]
[[points]]
name = "perm"
pattern = "permutation"
"""
WALL = ("wall_time_s", "packet_hops_per_s")  # the only summary keys allowed to differ between processes


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def mtimes(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in d.glob("*.h5")}


# ---------------------------------------------------------------- pure functions

@pytest.mark.parametrize("n_shards", [1, 2, 3, 4, 5])
def test_shards_cover_every_point_exactly_once(n_shards):
    for n_points in range(0, 14):
        picked = [i for s in range(n_shards) for i in runner.shard_points(n_points, s, n_shards)]
        assert sorted(picked) == list(range(n_points))
        for s in range(n_shards):
            assert all(i % n_shards == s for i in runner.shard_points(n_points, s, n_shards))


def test_shard_spec_from_option_and_from_slurm():
    assert runner.parse_shard("2/5") == (2, 5) and runner.parse_shard(" 0 / 1 ") == (0, 1)
    for bad in ("5/5", "1", "a/b", "-1/3", "1/0", ""):
        with pytest.raises(CosimInputError, match="--shard"):
            runner.parse_shard(bad)
    assert runner.shard_from_env({}) is None
    env = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "5"}
    assert runner.shard_from_env(env) == (2, 4)  # --array=5-8: tasks 5..8 are shards 0..3
    assert runner.shard_from_env({**env, "SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "3",
                                  "SLURM_ARRAY_TASK_STEP": "2"}) == (3, 4)  # --array=3-9:2
    with pytest.raises(CosimInputError, match="SLURM_ARRAY_TASK_ID"):
        runner.shard_from_env({**env, "SLURM_ARRAY_TASK_ID": "9"})
    with pytest.raises(CosimInputError, match="SLURM_ARRAY_TASK_COUNT"):
        runner.shard_from_env({"SLURM_ARRAY_TASK_ID": "1"})


def test_grid_expands_in_order_with_stable_names(tmp_path):
    sweep = load_sweep(write(tmp_path, SMALL))
    assert sweep.name == "t" and len(sweep.points) == 5
    assert [p.run_name for p in sweep.points] == [
        "dcqcn=true,EcnKminBytes=20000", "dcqcn=true,EcnKminBytes=100000",
        "dcqcn=false,EcnKminBytes=20000", "dcqcn=false,EcnKminBytes=100000", "perm"]
    p = sweep.points[2]
    exp = p.experiment()
    assert exp.workload.flow_bytes == 50_000 and exp.network.dcqcn is False
    assert dict(exp.network.attributes) == {"FabricSwitch::EcnKminBytes": "20000",
                                            "SharedBufferMmu::BufferBytes": "4000000"}
    assert p.file_name == f"t-0002-{p.digest}.h5" and len(p.digest) == 8
    assert exp.name == p.run_name
    assert sweep.points[4].experiment().workload.pattern == "permutation"
    assert sweep.points[4].params == {"pattern": "permutation"}
    again = load_sweep(write(tmp_path, SMALL, "copy.toml"))
    assert [q.file_name for q in again.points] == [q.file_name for q in sweep.points]  # deterministic
    changed = load_sweep(write(tmp_path, SMALL.replace('"50KB"', "60000"), "changed.toml"))
    assert not {q.digest for q in changed.points} & {q.digest for q in sweep.points}
    assert len(parse_sweep({}, source="x", default_name="only").points) == 1  # no grid: the base point


BAD = [
    ("[base\nhosts = 4", "malformed TOML"),
    ("[base]\nhostz = 4", "base.hostz: unknown experiment field (use a section path like network.link_gbps"),
    ("[grid]\nhosts = 4", "grid.hosts: must be a non-empty list"),
    ("[grid]\nhosts = []", "grid.hosts: must be a non-empty list"),
    ('[grid]\nhosts = [4, "8"]', "point 1 (hosts=8) network.hosts: must be an integer, got '8'"),
    ("[grid]\nhosts = [4, 1]", "point 1 (hosts=1) network.hosts: must be an integer >= 2"),
    ('[grid]\ntopology = ["torus"]', "network.topology: unknown value 'torus'"),
    ('[base]\ntopology = "fat-tree"\nhosts = 20\nswitch_radix = 4', "point 0 (s) network.hosts: 20 hosts do not fit a k=4"),
    ('[base]\nname = "x"', "run names come from the point's parameters"),
    ("[sweeps]\nname = 1", "sweeps: unknown section"),
    ('[base.attributes]\n"HostNic::Nope" = 1', "HostNic::Nope: no such ns-3 attribute"),
    ('[grid]\nattributes."HostNic::MtuBytes" = ["abc"]', "(MtuBytes=abc) HostNic::MtuBytes: 'abc' is not a valid"),
    ('[base.attributes]\nMtu = 1', "not an ns-3 attribute name"),
    ("[[points]]\nhosts = 4\n[[points]]\nhosts = 4", "same run name"),
]


@pytest.mark.parametrize("text,needle", BAD)
def test_bad_sweep_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, engine_ns, text, needle):
    spec = write(tmp_path, text)
    out = tmp_path / "out"
    code, stdout, err = run_main(["sweep", str(spec), "-o", str(out)], capsys)
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("shard", ["2/2", "x", "1/0"])
def test_bad_shard_exits_2(tmp_path, capsys, shard):
    out = tmp_path / "out"
    code, _, err = run_main(["sweep", str(write(tmp_path, SMALL)), "-o", str(out), "--shard", shard], capsys)
    assert code == 2 and "--shard" in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_dry_run_lists_the_shard_from_slurm_and_writes_nothing(tmp_path, capsys, monkeypatch, engine_ns):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "2")
    out = tmp_path / "out"
    code, stdout, _ = run_main(["sweep", str(write(tmp_path, SMALL)), "-o", str(out), "--dry-run"], capsys)
    assert code == 0 and not out.exists()
    lines = stdout.splitlines()
    assert [int(line.split()[0]) for line in lines[:-1]] == [1, 3]  # task 3 of --array=2-3 is shard 1/2
    assert "todo" in lines[0] and "shard 1/2: 2 of 5 point(s)" in lines[-1]


# ---------------------------------------------------------------- real sweeps

@pytest.fixture(scope="module")
def single(tmp_path_factory, engine_ns):
    """The SMALL sweep run in one process, and its merge."""
    d = tmp_path_factory.mktemp("single")
    spec = write(d, SMALL)
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(spec), "-o", str(d / "out"), "-q"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        main(["merge", str(d / "out"), "-o", str(d / "merged.h5"), "-q"])
    assert exc.value.code == 0
    return spec, d / "out", d / "merged.h5"


def test_sharded_sweep_resumes_and_merges_to_the_single_process_result(single, tmp_path, capsys):
    spec, single_dir, single_merged = single
    out = tmp_path / "out"
    code, stdout, _ = run_main(["sweep", str(spec), "-o", str(out), "--shard", "0/2"], capsys)
    assert code == 0 and "3 ran, 0 already done" in stdout
    first = mtimes(out)
    assert sorted(first) == sorted(n for n in mtimes(single_dir) if int(n.split("-")[1]) % 2 == 0)

    code, _, err = run_main(["merge", str(out), "-o", str(tmp_path / "m.h5")], capsys)
    assert code == 2 and "2 of 5 points have no results yet" in err and not (tmp_path / "m.h5").exists()

    code, stdout, _ = run_main(["sweep", str(spec), "-o", str(out), "--shard", "1/2", "--jobs", "2"], capsys)
    assert code == 0 and "2 ran, 0 already done" in stdout  # two spawned worker processes
    code, stdout, _ = run_main(["sweep", str(spec), "-o", str(out)], capsys)
    assert code == 0 and "0 ran, 5 already done" in stdout
    assert mtimes(out) == {**first, **{n: t for n, t in mtimes(out).items() if n not in first}}
    assert sorted(mtimes(out)) == sorted(mtimes(single_dir))  # same deterministic file names

    victim = sorted(out.glob("t-0003-*.h5"))[0]
    victim.unlink()
    before = mtimes(out)
    code, stdout, _ = run_main(["sweep", str(spec), "-o", str(out)], capsys)
    assert code == 0 and "1 ran, 4 already done" in stdout
    after = mtimes(out)
    assert victim.name in after and {n: after[n] for n in before} == before

    code, stdout, _ = run_main(["merge", str(out), "-o", str(tmp_path / "m.h5")], capsys)
    assert code == 0 and "5 run(s)" in stdout
    a, b = results.read_results(single_merged), results.read_results(tmp_path / "m.h5")
    assert list(a) == list(b)
    for name in a:
        strip = lambda s: {k: v for k, v in s.items() if k not in WALL}  # noqa: E731
        assert strip(a[name].summary) == strip(b[name].summary)
        assert a[name].config == b[name].config and a[name].config["sweep"]["name"] == "t"
        for group in results.GROUPS:
            for col, values in a[name].table(group).items():
                np.testing.assert_array_equal(values, b[name].table(group)[col])


def test_merge_summary_only_and_partial(single, tmp_path, capsys):
    _, single_dir, _ = single
    code, _, _ = run_main(["merge", str(single_dir), "-o", str(tmp_path / "s.h5"), "--summary-only"], capsys)
    runs = results.read_results(tmp_path / "s.h5")
    assert code == 0 and len(runs) == 5 and all(not r.flows and r.summary["flows"] for r in runs.values())
    code, out, _ = run_main(["compare", str(tmp_path / "s.h5"), "--json"], capsys)
    assert code == 0 and '"perm"' in out
    partial = tmp_path / "partial"
    partial.mkdir()
    for p in [single_dir / "t.sweep.json", *single_dir.glob("t-0000-*.h5")]:  # the manifest and point 0
        (partial / p.name).write_bytes(p.read_bytes())
    code, out, err = run_main(["merge", str(partial), "-o", str(tmp_path / "p.h5"), "--partial"], capsys)
    assert code == 0 and "1 run(s), 4 point(s) missing" in out and err.count("missing") == 4


def test_killed_sweep_leaves_only_complete_files_and_resumes(tmp_path, capsys, engine_ns):
    # Point 0 is tiny; points 1 and 2 take about a second each: kill the sweep as soon as point 0 is written.
    spec = write(tmp_path, '[sweep]\nname = "k"\n[base]\nflow_bytes = "24MB"\n'
                           "[[points]]\nhosts = 4\nflow_bytes = 1000\n[[points]]\nhosts = 32\n[[points]]\nhosts = 31\n")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(cosim.__file__).parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "sweep", str(spec), "-o", str(out), "-q"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(out.glob("k-0000-*.h5")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    done = mtimes(out)
    assert any(n.startswith("k-0000-") for n in done)
    for name in done:  # whatever is under a final name is complete
        assert len(results.read_results(out / name)) == 1
    code, stdout, _ = run_main(["sweep", str(spec), "-o", str(out)], capsys)
    assert code == 0 and f"{3 - len(done)} ran, {len(done)} already done" in stdout
    assert {n: mtimes(out)[n] for n in done} == done and len(mtimes(out)) == 3


def _ready_worker(pid: int) -> bool:
    """True once process ``pid`` is a spawned sweep worker with its handler for SIGTERM (Linux /proc: the
    SigCgt mask). A child between fork and exec (the worker being spawned, multiprocessing's resource tracker,
    a shell the engine's loader runs) still has the sweep's own SIGTERM handler in its mask, so only an
    exec'ed multiprocessing child counts (its command line read first: once it shows the exec, the mask read
    after it is the worker's own)."""
    try:
        if b"spawn_main" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (Linux /proc)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _running(pid: int) -> bool:
    try:
        state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                     if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z" not in state.split()[1]


def _start_long_sweep(tmp_path):
    """`cosim sweep` of an 8 GiB point, then a tiny one, started in its own process; returns the process,
    the sweep file and the output directory."""
    spec = write(tmp_path, '[sweep]\nname = "k"\n[base]\ntopology = "leaf-spine"\npattern = "permutation"\n'
                           '[[points]]\nhosts = 32\nflow_bytes = "8GiB"\n[[points]]\nhosts = 4\nflow_bytes = 1000\n')
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(cosim.__file__).parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "sweep", str(spec), "-o", str(out), "-q"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, spec, out


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads worker signal masks from /proc")
def test_sigterm_stops_the_sweep_writes_the_running_point_interrupted_and_no_worker_survives(tmp_path, capsys,
                                                                                          engine_ns):
    """SIGTERM to `cosim sweep` (a batch system's time limit) once its worker is ready: the running point
    (8 GiB flows, far from done) stops at its next slice and is written with status interrupted, the next
    point never starts, the sweep exits 143 with one Error line, no worker is left running and no
    temporary file is left behind; a rerun takes the interrupted point as still to run."""
    proc, spec, out = _start_long_sweep(tmp_path)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
    workers: list[int] = []
    while proc.poll() is None and time.monotonic() < deadline:
        workers = [c for c in _children(proc.pid) if _ready_worker(c)]
        if workers:
            break
        time.sleep(0.05)
    assert workers, "no sweep worker got ready"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "interrupted by SIGTERM" in errors[0] and "point(s) 0 written" in errors[0]
    (stopped,) = out.glob("k-0000-*.h5")
    (run,) = results.read_results(stopped).values()
    assert run.summary["status"] == "interrupted"
    assert run.summary["delivered_bytes"] < run.summary["payload_bytes"]
    assert not list(out.glob("k-0001-*.h5")) and not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(w) for w in workers)
    code, stdout, _ = run_main(["sweep", str(spec), "-o", str(out), "--dry-run"], capsys)
    assert code == 0 and "0 done, 2 to run" in stdout
    manifest = json.loads((out / "k.sweep.json").read_text())  # the sweep as if point 0 were its only one
    manifest["points"] = manifest["points"][:1]
    (out / "k.sweep.json").write_text(json.dumps(manifest))
    code, _, err = run_main(["merge", str(out), "-o", str(tmp_path / "m.h5")], capsys)
    assert code == 2 and "was interrupted" in err and not (tmp_path / "m.h5").exists()
    code, _, _ = run_main(["merge", str(out), "-o", str(tmp_path / "m.h5"), "--partial"], capsys)
    assert code == 0 and len(results.read_results(tmp_path / "m.h5")) == 1


def _catches_sigterm(pid: int) -> bool:
    """True if process ``pid`` has a handler for SIGTERM in its SigCgt mask (a child between fork and exec
    shows its parent's)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads process signal masks from /proc")
def test_sigterm_as_the_sweep_starts_its_processes_never_lets_a_point_run_on(tmp_path):
    """SIGTERM the moment `cosim sweep` starts its worker (once multiprocessing's resource tracker runs, the
    first other child whose mask shows a SIGTERM handler: the worker between fork and exec, which still has
    the sweep's own, or the worker with its handler set): whether the worker was yet among the sweep's
    children, could hear the signal, or had begun its point, the 8 GiB point is not run to its end. It is
    written interrupted or stopped before anything was written, the other point never starts, the sweep
    exits 143 and no process it started is left running."""
    proc, _, out = _start_long_sweep(tmp_path)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
    seen: set[int] = set()
    signalled = False
    while proc.poll() is None and time.monotonic() < deadline:
        children = _children(proc.pid)
        seen.update(children)
        commands = {c: _command(c) for c in children}
        tracker = any(b"resource_tracker" in command for command in commands.values())
        if not signalled and tracker and any(_catches_sigterm(c) and b"resource_tracker" not in command
                                             for c, command in commands.items()):
            proc.send_signal(signal.SIGTERM)
            signalled = True
        time.sleep(0.001)
    assert signalled, "no worker was seen starting after multiprocessing's resource tracker"
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "interrupted by SIGTERM: 0 point(s) finished here" in errors[0], errors
    assert not list(out.glob("k-0001-*.h5")) and not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))
    for stopped in out.glob("k-0000-*.h5"):
        (run,) = results.read_results(stopped).values()
        assert run.summary["status"] == "interrupted" and "point(s) 0 written" in errors[0]
    while any(_running(c) for c in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(c) for c in seen)


@pytest.mark.parametrize("quiet", [True, False])
def test_a_worker_kept_waiting_for_the_folder_says_so_only_without_quiet(tmp_path, engine_ns, quiet):
    """A sweep's worker that finds its results folder held by another writer logs that it waits; under -q the
    worker process (spawned, so it starts with logging unconfigured) says nothing, and the point still lands."""
    import fcntl

    spec = write(tmp_path, '[sweep]\nname = "w"\n[base]\nhosts = 4\nflow_bytes = 1000\n[[points]]\n')
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(cosim.__file__).parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "sweep", str(spec), "-o", str(out),
                             *(["-q"] if quiet else [])], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        if quiet:  # nothing to wait for on stderr: hold the folder long enough for the worker to reach its write
            time.sleep(8.0)
            told = ""
        else:
            told = proc.stderr.readline()
    finally:
        os.close(fd)  # drops the lock
    rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0, told + rest
    assert len(list(out.glob("w-0000-*.h5"))) == 1
    if quiet:
        assert rest == ""
    else:
        assert "waiting: another cosim is writing results in" in told
