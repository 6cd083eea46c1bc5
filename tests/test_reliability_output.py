"""Output problems: existing run names, full and read-only devices, permissions, absurd DAG sizes.

Each is a one-line ``Error:`` with exit 2 and no file (nor temporary) left behind; the checks that can run
before simulating do (writable folder, free space for the estimate, run names, DAG size). Mount-based
cases need root's mount(8) and are skipped with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_main

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"
FLOWS = ["run", "--hosts", "4", "--flow-bytes", "16KiB", "-q"]


def _one_error_line(code, out, err, needle):
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], err
    assert "Traceback" not in out + err


def _no_leftovers(folder: Path, keep=()):
    left = sorted(p.name for p in folder.iterdir() if p.name not in keep)
    assert not left, f"left behind: {left}"


@contextlib.contextmanager
def _tmpfs(folder: Path, options: str):
    """Mount a tmpfs with ``options`` on ``folder`` for the block; skip the test if mounting is not permitted."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True,
                          text=True, timeout=10)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or 'not permitted'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=10)


# ---------------------------------------------------------------- run names in --append

@pytest.mark.parametrize("flags,name,code,needle,runs", [
    (["--append"], "roce", 2, "--name: run 'roce' already exists in", ["roce"]),
    (["--append", "--replace"], "roce", 0, "", ["roce"]),
    (["--append"], "other", 0, "", ["roce", "other"]),
    (["--replace"], "roce", 2, "--replace applies with --append", ["roce"]),
])
def test_append_refuses_an_existing_run_name_unless_replace(tmp_path, capsys, engine_ns, flags, name, code,
                                                            needle, runs):
    """--append adds runs; a name already in the file is refused before simulating (the file unchanged)
    unless --replace, which overwrites that run (its flows are the new run's: 8 hosts -> 7 flows)."""
    from cosim import results

    path = tmp_path / "r.h5"
    assert run_main([*FLOWS, "--transport", "roce", "--name", "roce", "-o", str(path)], capsys)[0] == 0
    before = path.read_bytes()
    got = run_main(["run", "--hosts", "8", "--flow-bytes", "16KiB", "-q", "--transport", "roce", "--name", name,
                    *flags, "-o", str(path)], capsys)
    if code:
        _one_error_line(*got, needle)
        assert path.read_bytes() == before
    else:
        assert got[0] == 0, got
    stored = results.read_results(path)
    assert list(stored) == runs
    assert stored[name if name in stored else "roce"].flows["src"].size == (7 if code == 0 else 3)
    _no_leftovers(tmp_path, keep=("r.h5",))


# ---------------------------------------------------------------- the size estimate

@pytest.mark.parametrize("argv", [
    [*FLOWS, "--transport", "both"],
    ["run", "--hosts", "16", "--flow-bytes", "64KiB", "--pattern", "permutation", "-q"],
    ["run", "--trace", str(TRACE), "--iterations", "2", "--transport", "ib", "-q"],
])
def test_output_estimate_bounds_the_written_file(tmp_path, capsys, engine_ns, argv):
    """The free-space check asks for the plan's estimate (flows, ops x iterations, collectives, ports and a
    margin): it is at least what the run then writes, so a run that passes the check fits."""
    from cosim.cli.run import _base, _overrides  # noqa: F401 - same resolution as the command line
    from cosim.plan import compile as compile_plan
    from cosim.plan.describe import output_bytes_estimate

    out = tmp_path / "r.h5"
    assert run_main([*argv, "-o", str(out)], capsys)[0] == 0
    from cosim import results

    stored = results.read_results(out)
    estimate = 0
    for rec in stored.values():
        from cosim.spec import from_document

        exp = from_document(rec.config["experiment"])[0]
        estimate += output_bytes_estimate(compile_plan(exp))
    assert out.stat().st_size <= estimate


# ---------------------------------------------------------------- full and read-only devices

@pytest.mark.parametrize("size,precheck,needle", [
    ("64k", True, "has 65536 B free, the results need about"),  # refused before simulating
    ("32k", False, "no space left on the device of"),  # the write itself fails: a full device
])
def test_full_device_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch, engine_ns, size, precheck,
                                                     needle):
    """On a small tmpfs the free-space check refuses the run before it simulates; and if the device
    fills anyway (check bypassed, as when another process takes the space), the write of the first run
    (each is written when it finishes) fails with one line naming the bytes needed and free, that run is
    rescued, the second is not started, and no half-written file or temporary is left."""
    import cosim.results.store as store
    import cosim.run as run_module

    with _tmpfs(tmp_path / "small", f"size={size}") as folder:
        rescue = tmp_path / "rescue"
        rescue.mkdir()
        monkeypatch.setenv(store.RESCUE_DIR_ENV, str(rescue))
        if not precheck:
            monkeypatch.setattr(store, "check_space", lambda path, need: None)
        out = folder / "r.h5"
        simulated = []
        real_simulate = run_module.simulate
        monkeypatch.setattr(run_module, "simulate", lambda *a, **k: simulated.append(1) or real_simulate(*a, **k))
        code, stdout, err = run_main([*FLOWS, "--transport", "both", "-o", str(out)], capsys)
        _one_error_line(code, stdout, err, needle)
        assert str(out) in err if not precheck else "--output" in err
        assert " B " in err or err.rstrip().endswith(")")
        if not precheck:
            assert "B needed" in err and "B free" in err
            _assert_rescued(rescue, err, n_runs=1)
        _no_leftovers(folder)
        assert len(simulated) == (0 if precheck else 1)  # the free-space check refuses before simulating


def _assert_rescued(rescue: Path, err: str, *, n_runs: int) -> None:
    """The finished simulation was not lost: the one error line names a complete results file elsewhere."""
    from cosim import results

    (saved,) = rescue.iterdir()
    assert f"saved to {saved} instead" in err and f"mv {saved}" in err
    assert len(results.read_results(saved)) == n_runs


@pytest.mark.parametrize("precheck,needle", [
    (True, "read-only file system"),  # found by the probe before simulating
    (False, "read-only file system; the finished results were saved to"),  # found when the write starts
])
def test_read_only_device_is_one_line(tmp_path, capsys, monkeypatch, engine_ns, precheck, needle):
    """A read-only mount is found also for root (os.access does not see it for root on every system; a
    probe file does): one line, exit 2; with the check bypassed the write's EROFS is the same one line."""
    import cosim.results.store as store

    with _tmpfs(tmp_path / "ro", "ro,size=1m") as folder:
        rescue = tmp_path / "rescue"
        rescue.mkdir()
        monkeypatch.setenv(store.RESCUE_DIR_ENV, str(rescue))
        if not precheck:
            monkeypatch.setattr(store, "check_writable", lambda *a, **k: None)
            monkeypatch.setattr(store, "check_space", lambda path, need: None)
        code, stdout, err = run_main([*FLOWS, "-o", str(folder / "r.h5")], capsys)
        _one_error_line(code, stdout, err, needle)
        if not precheck:
            _assert_rescued(rescue, err, n_runs=1)
        _no_leftovers(folder)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv(1) to drop the capability that lets root write anywhere")
@pytest.mark.parametrize("mode", [0o555, 0o500])
def test_folder_without_permission_is_one_line(tmp_path, mode):
    """A folder the user may not write (root ignores modes, so the run drops CAP_DAC_OVERRIDE): one
    line, exit 2, before simulating, nothing written."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(mode)
    try:
        proc = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--",
                               sys.executable, "-m", "cosim", *FLOWS, "-o", str(folder / "r.h5")], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 2 and "Error:" not in proc.stderr:
            pytest.skip(f"cannot drop capabilities here ({proc.stderr.strip()[-200:]})")
        _one_error_line(proc.returncode, proc.stdout, proc.stderr, f"--output: folder {folder} is not writable")
        _no_leftovers(folder)
    finally:
        folder.chmod(0o755)


# ---------------------------------------------------------------- absurd DAG sizes

@pytest.mark.parametrize("chunk,iterations", [("1", "10000"), ("1", "1"), ("64", "10000")])
def test_absurd_dag_is_refused_before_lowering(tmp_path, capsys, monkeypatch, engine_ns, chunk, iterations):
    """A training run whose DAG would exceed the op limit (5e7, or what memory holds at 260 B per op)
    is refused before lowering (the real lowering is never entered), with the numbers and the fix."""
    import cosim.kinds.training as training  # the training kind lowers the trace (cosim.collectives.lower)

    lowered = []
    real_lower = training.lower
    monkeypatch.setattr(training, "lower", lambda *a, **k: lowered.append(1) or real_lower(*a, **k))
    out = tmp_path / "r.h5"
    got = run_main(["run", "--trace", str(TRACE), "--chunk-bytes", chunk, "--iterations", iterations, "-q",
                    "-o", str(out)], capsys)
    _one_error_line(*got, "workload.chunk_bytes: the run would lower to at least")
    assert "DAG ops" in got[2] and "raise workload.chunk_bytes to" in got[2]
    assert not lowered
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("trace", sorted(p.name for p in (REPO / "traces").glob("*.h5")))
@pytest.mark.parametrize("chunk", [1 << 12, 1 << 16, 4 << 20, 1 << 30])
def test_dag_size_estimate_is_a_lower_bound(trace, chunk, engine_ns):
    """The pre-lowering estimate never exceeds the DAG lowering makes, for every shipped trace and chunk
    size (so the guard refuses no run that would fit), and is within a factor 3 of it while chunks are
    below a channel's share (with larger chunks NCCL's channel rings, 2 per NIC, make more transfers than
    bytes / chunk)."""
    from cosim.collectives import lower
    from cosim.kinds import training
    from cosim.workload.trace import read_trace

    t = read_trace(REPO / "traces" / trace)
    bound = training.dag_ops_lower_bound(t, chunk)
    actual = lower(t, gpus_per_server=4, chunk_bytes=chunk).n_ops
    assert bound <= actual
    if chunk <= 4 << 20:
        assert actual < 3 * bound


@pytest.mark.parametrize("chunk,iterations,refused", [(1, 10000, True), (1, 1, True), (4 << 20, 10000, False),
                                                      (1 << 16, 1, False)])
def test_dag_guard_refuses_only_what_does_not_fit(chunk, iterations, refused, engine_ns):
    """The plan's guard (cosim.kinds.training, before lowering) raises exactly when the lower bound times
    the iterations exceeds the op limit; otherwise the plan goes on to lower the trace."""
    import cosim.kinds.training as training_kind
    from cosim.errors import CosimInputError
    from cosim.kinds import training
    from cosim.plan import compile as compile_plan
    from cosim.spec import make
    from cosim.workload.trace import read_trace

    class Lowering(Exception):
        """The guard let the plan through to the lowering (which is not run here)."""

    def lower(*args, **kwargs):
        raise Lowering

    exp = make("training", trace=str(TRACE), chunk_bytes=chunk, iterations=iterations)
    trace = read_trace(TRACE)
    assert (training.dag_ops_lower_bound(trace, chunk) * iterations > training.dag_op_limit()) == refused
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training_kind, "lower", lower)
        if refused:
            with pytest.raises(CosimInputError, match="workload.chunk_bytes: the run would lower to at least"):
                compile_plan(exp)
        else:
            with pytest.raises(Lowering):
                compile_plan(exp)


def test_a_simulation_that_would_not_fit_in_memory_is_refused_before_it_starts(tmp_path, monkeypatch, capsys,
                                                                                engine_ns):
    """When the engine's bytes per DAG op times the ops to simulate exceed the memory available, cosim run
    stops with one input error naming limits (exit 2, no traceback, no output file) before ns-3 starts."""
    from cosim import memory

    monkeypatch.setattr(memory, "ENGINE_BYTES_PER_DAG_OP", 1 << 40)
    out = tmp_path / "r.h5"
    code, _, err = run_main(["run", "builtin", "-o", str(out), "-q"], capsys)
    assert code == 2
    assert err.startswith("Error: limits: simulating") and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_run_whose_results_would_not_fit_in_memory_is_refused_before_it_simulates(tmp_path, monkeypatch, capsys,
                                                                                  engine_ns):
    """When the merge and record's bytes per flow times the run's flows exceed the memory available, cosim
    run stops with one input error naming limits and the fix (exit 2, no traceback, no output file) before
    the simulation, which would otherwise run to its end and then fail to write."""
    from cosim import engine, memory

    started = []
    monkeypatch.setattr(engine, "simulate_dag", lambda *a, **k: started.append(1))
    monkeypatch.setattr(memory, "RECORD_BYTES_PER_FLOW", 1 << 40)
    out = tmp_path / "r.h5"
    code, _, err = run_main(["run", "builtin", "-o", str(out), "-q"], capsys)
    assert code == 2 and not started
    assert err.startswith("Error: limits: the run's") and len(err.strip().splitlines()) == 1
    assert "workload.chunk_bytes" in err
    assert not out.exists()


# ---------------------------------------------------------------- concurrent writers

def test_concurrent_appends_keep_every_run(tmp_path):
    """Two `cosim run --append -o same.h5` at once, three times over: the folder lock serializes their
    read-modify-write, so the file ends with every run of both and neither fails."""
    out = tmp_path / "same.h5"
    cmd = [sys.executable, "-m", "cosim", *FLOWS, "--append", "-o", str(out)]
    names = []
    for trial in range(3):
        procs = [subprocess.Popen([*cmd, "--name", f"t{trial}{w}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=tmp_path) for w in "ab"]
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        names += [f"t{trial}a", f"t{trial}b"]
    from cosim.results import read_results

    assert sorted(read_results(out)) == sorted(names)


def test_a_writer_kept_waiting_saves_its_runs_to_a_rescue_file(tmp_path, capsys, monkeypatch, engine_ns):
    """While another process holds the results folder past the wait, the finished run goes to a rescue file
    and the one-line error says where; the busy folder gets nothing."""
    import fcntl

    from cosim.results import store

    code, _, err = run_main([*FLOWS, "-o", str(tmp_path / "first.h5")], capsys)
    assert code == 0, err
    busy = tmp_path / "busy"
    busy.mkdir()
    monkeypatch.setattr(store, "WRITERS_WAIT_S", 0.2)
    monkeypatch.setenv(store.RESCUE_DIR_ENV, str(tmp_path))
    fd = os.open(busy, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        code, out, err = run_main([*FLOWS, "--append", "-o", str(busy / "r.h5")], capsys)
    finally:
        os.close(fd)
    _one_error_line(code, out, err, "the finished results were saved to")
    assert not any(busy.iterdir())
    rescued = [p for p in tmp_path.iterdir() if p.name.startswith("cosim-rescued-")]
    assert len(rescued) == 1


# ---------------------------------------------------------------- SIGTERM (a batch system's time limit)

def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _terminate_mid_run(argv: list[str], tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """Start ``cosim ARGV``, send SIGTERM once it has simulated a while, return (process, stderr)."""
    import signal
    import time

    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc to tell when the simulation runs")
    proc = subprocess.Popen([sys.executable, "-m", "cosim", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    while proc.poll() is None and _cpu_s(proc.pid) < 4.0:  # imports, plan and fabric take ~2 s of CPU
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    return proc, err


# a 448 GiB incast: minutes of simulation (~4 M packet-hops per CPU second), far longer than the test lets it run
LONG = ["run", "--pattern", "incast", "--hosts", "8", "--flow-bytes", "64GiB", "-q"]


def test_sigterm_writes_what_was_simulated_as_interrupted(tmp_path):
    """SIGTERM mid-run (Slurm's time limit): the simulation stops at its next slice, the run is written with
    status interrupted and the flows delivered so far, no temporary file is left, and the exit code is 143."""
    from cosim.results import read_results

    out = tmp_path / "r.h5"
    proc, err = _terminate_mid_run([*LONG, "-o", str(out)], tmp_path)
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    run = read_results(out)["incast"]
    assert run.summary["status"] == "interrupted"
    assert 0 < run.summary["sim_time_ns"] < 30e9 and run.summary["flows_completed"] == 0  # all 7 end at ~38 s
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.h5"]


def test_sigterm_stops_every_worker_of_a_parallel_run(tmp_path):
    """`cosim run --jobs 2` on two independent incasts (two parts in two worker processes): SIGTERM ends the
    workers with the parent; nothing of the run is written, the message says so, exit 143."""
    import time

    doc = tmp_path / "two.toml"
    doc.write_text('name = "two"\n[network]\ntopology = "leaf-spine"\nhosts = 8\nhosts_per_leaf = 4\n'
                   '[[workloads]]\nname = "a"\nkind = "flows"\npattern = "incast"\nflow_bytes = "64GiB"\n'
                   'hosts = [0, 1, 2, 3]\n[[workloads]]\nname = "b"\nkind = "flows"\npattern = "incast"\n'
                   'flow_bytes = "64GiB"\nhosts = [4, 5, 6, 7]\n')
    proc, err = _terminate_mid_run(["run", str(doc), "--jobs", "2", "-q", "-o", str(tmp_path / "r.h5")], tmp_path)
    assert proc.returncode == 143, err
    assert "simulated in parts and none is written" in err, err
    time.sleep(1.0)
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert not children and not (tmp_path / "r.h5").exists()


def test_append_refuses_a_file_whose_stored_experiment_is_damaged_in_value(tmp_path, capsys, engine_ns):
    """A results file intact in structure whose stored experiment holds an impossible value (a collective
    timeout of -1 ns): --append refuses to copy it on, in one line naming the file, run and field."""
    import json

    import h5py

    out = tmp_path / "r.h5"
    code, _, err = run_main([*FLOWS, "-o", str(out)], capsys)
    assert code == 0, err
    with h5py.File(out, "r+") as h5:
        run = h5["runs"][next(iter(h5["runs"]))]
        config = json.loads(run.attrs["config"])
        config["experiment"]["limits"]["collective_timeout_ns"] = -1
        run.attrs["config"] = json.dumps(config)
    code, stdout, err = run_main([*FLOWS, "--append", "--name", "more", "-o", str(out)], capsys)
    _one_error_line(code, stdout, err, "stored experiment: limits.collective_timeout_ns")


def test_trace_sweep_and_parts_onto_full_or_read_only_devices_are_one_line(tmp_path, capsys, monkeypatch, engine_ns):
    """`cosim trace -o` onto a full device (HDF5 writing there crashed the process), `cosim sweep -o` onto a
    read-only one, and `cosim run --parts-dir` onto a full one: one error line each, nothing half-written;
    the simulated part is rescued and no manifest promises it."""
    import cosim.results.store as store

    rescue = tmp_path / "rescue"
    rescue.mkdir()
    monkeypatch.setenv(store.RESCUE_DIR_ENV, str(rescue))
    with _tmpfs(tmp_path / "full", "size=16k") as full:
        code, out, err = run_main(["trace", "-o", str(full / "t.h5")], capsys)
        _one_error_line(code, out, err, "no space left on the device of")
        _no_leftovers(full)
        monkeypatch.setattr(store, "check_space", lambda path, need: None)
        code, out, err = run_main(["run", "--hosts", "4", "--flow-bytes", "4MiB", "--parts-dir", str(full / "p"),
                                   "-q"], capsys)
        _one_error_line(code, out, err, "saved to")
        assert not list((full / "p").glob("*.json"))
        assert len(list(rescue.iterdir())) == 1
    with _tmpfs(tmp_path / "ro", "ro") as ro:
        code, out, err = run_main(["sweep", str(REPO / "docs" / "examples" / "sweep.toml"), "-o", str(ro / "s")],
                                  capsys)
        _one_error_line(code, out, err, "Read-only file system")
