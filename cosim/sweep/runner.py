"""Run the points of a sweep shard: one results file per point, finished points skipped, 1..N processes.

ns-3 is a process-wide singleton, so a process runs one point at a time: points run in ``jobs`` worker
processes (multiprocessing "spawn" context; one also for ``jobs=1``), each running its points one after the
other. A native crash in a worker fails only its point (the pool is recreated), and workers die with the
sweep process. Files are written atomically, so a killed sweep leaves only complete point files and a rerun
redoes only the rest. :func:`request_stop` (the CLI's SIGTERM handler) starts no new point and stops the
running ones at their next slice: each is written with status ``interrupted``, which a rerun redoes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import re
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import h5py

from cosim import engine, results, run
from cosim.errors import CosimInputError
from cosim.h5io import atomic_output
from cosim.results import SCHEMA, SCHEMA_VERSION
from cosim.results.store import check_writable
from cosim.sweep.spec import Sweep, SweepPoint
from cosim.workers import worker_init, worker_initargs

# ---------------------------------------------------------------- shards

def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (0-based I, 0 <= I < N) → (I, N); anything else is a CosimInputError."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m:
        raise CosimInputError("--shard", f"{text!r} is not I/N", "e.g. --shard 0/4 runs the first of 4 shards")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or i >= n:
        raise CosimInputError("--shard", f"{text!r}: need 0 <= I < N", "shards are numbered 0 .. N-1")
    return i, n


def shard_from_env(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(I, N) of a Slurm job-array task (SLURM_ARRAY_TASK_ID/COUNT, MIN and STEP honoured), else None."""
    if "SLURM_ARRAY_TASK_ID" not in env:
        return None
    names = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP")
    try:
        task = int(env[names[0]])
        count = int(env[names[1]])
        lo = int(env.get(names[2], "0"))
        step = int(env.get(names[3], "1")) or 1
    except KeyError as exc:
        raise CosimInputError(str(exc.args[0]), "not set although SLURM_ARRAY_TASK_ID is",
                              "submit with sbatch --array, or pass --shard I/N") from None
    except ValueError:
        raise CosimInputError("SLURM_ARRAY_TASK_*", "not integers", "pass --shard I/N instead") from None
    index, rem = divmod(task - lo, step)
    if rem or not 0 <= index < count:
        raise CosimInputError("SLURM_ARRAY_TASK_ID", f"task {task} is not in an array of {count} from {lo} step {step}",
                              "pass --shard I/N instead")
    return index, count


def shard_points(n_points: int, index: int, count: int) -> list[int]:
    """Indices of the points shard ``index`` of ``count`` runs: those with point % count == index."""
    if count < 1 or not 0 <= index < count:
        raise CosimInputError("--shard", f"{index}/{count}: need 0 <= I < N")
    return list(range(index, n_points, count))


# ---------------------------------------------------------------- points

def is_finished(path: Path, run_name: str) -> bool:
    """True if ``path`` is a readable cosim results file holding run ``run_name`` with a summary."""
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r") as h5:
            if h5.attrs.get("schema") != SCHEMA or int(h5.attrs.get("schema_version", -1)) != SCHEMA_VERSION:
                return False
            g = h5.get(f"runs/{run_name}")
            summary = None if g is None else json.loads(g.attrs["summary"])
            return isinstance(summary, dict) and summary.get("status") != "interrupted"
    except Exception:  # noqa: BLE001 - anything unreadable is simply not finished
        return False


@dataclass(frozen=True, slots=True)
class PointResult:
    """What running one point gave: its status ("complete", "time-limit", "stalled", ...; "interrupted" if a
    stop request ended it, with ``error`` saying why nothing was written if so; "error" if it raised)."""

    index: int
    run_name: str
    status: str
    wall_s: float
    error: str = ""


def run_point(point: dict, outdir: str, sweep_name: str) -> PointResult:
    """Simulate one point (a SweepPoint as dict) and write its results file atomically (worker entry).

    The run's config gains config["sweep"] = {name, index, params, digest}.
    """
    p = SweepPoint(**point)
    t0 = time.perf_counter()
    try:
        record = run.run(p.experiment())
        sweep_info = {"name": sweep_name, "index": p.index, "params": p.params, "digest": p.digest}
        record = dataclasses.replace(record, config={**record.config, "sweep": sweep_info})
        results.write_results(Path(outdir) / p.file_name, [record])
        status = str(record.summary.get("status", "complete"))
        return PointResult(p.index, p.run_name, status, time.perf_counter() - t0)
    except engine.Interrupted as exc:  # a decomposed run stopped before its parts were joined
        return PointResult(p.index, p.run_name, "interrupted", time.perf_counter() - t0, f"not written: {exc}")
    except Exception as exc:  # noqa: BLE001 - one failing point must not stop the sweep
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [""]
        kind = type(exc).__name__
        msg = lines[-1] if lines[-1].startswith(kind) else f"{kind}: {lines[-1]}"
        if os.environ.get("COSIM_DEBUG"):
            msg += "\n" + traceback.format_exc()
        return PointResult(p.index, p.run_name, "error", time.perf_counter() - t0, msg)


def _point_dict(p: SweepPoint) -> dict:
    return dataclasses.asdict(p)


@dataclass(slots=True)
class SweepOutcome:
    """Points of the shard that ran, were already finished, or failed."""

    selected: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    results: list[PointResult] = field(default_factory=list)

    @property
    def failed(self) -> list[PointResult]:
        """Points that raised or did not complete."""
        return [r for r in self.results if r.status != "complete"]


def write_manifest(sweep: Sweep, outdir: Path) -> Path:
    """Write the sweep's manifest (its points and file names) into ``outdir``, atomically."""
    path = Path(outdir) / sweep.manifest_name()
    text = json.dumps(sweep.manifest(), indent=1, sort_keys=True) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return path
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def plan(sweep: Sweep, outdir: Path, shard: tuple[int, int] = (0, 1)) -> tuple[list[SweepPoint], list[SweepPoint]]:
    """(points of the shard still to run, points of the shard already finished)."""
    todo, done = [], []
    for i in shard_points(len(sweep.points), *shard):
        p = sweep.points[i]
        (done if is_finished(Path(outdir) / p.file_name, p.run_name) else todo).append(p)
    return todo, done


def run_sweep(sweep: Sweep, outdir: str | Path, *, shard: tuple[int, int] = (0, 1), jobs: int = 1,
              on_done: Callable[[PointResult, int, int], None] | None = None,
              point_runner: Callable[[dict, str, str], PointResult] | None = None) -> SweepOutcome:
    """Run the unfinished points of ``shard`` into ``outdir``; ``on_done(result, done, total)`` after each.

    Points run in ``jobs`` child processes (also for ``jobs=1``), so a native crash (abort, segfault, out of
    memory) fails only its point: the pool is recreated and the other points run. Workers die with the
    sweep process (PR_SET_PDEATHSIG on Linux, and a check of their parent pid).

    ``point_runner`` is the picklable, module-level function a worker runs per point (default run_point).
    """
    outdir = Path(outdir)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CosimInputError(str(outdir), f"cannot create the sweep folder ({exc.strerror or exc})",
                              "choose another -o folder") from None
    check_writable(outdir / ".probe.h5")  # a read-only or full folder: one line before any point runs
    write_manifest(sweep, outdir)
    todo, done = plan(sweep, outdir, shard)
    outcome = SweepOutcome(selected=shard_points(len(sweep.points), *shard), skipped=[p.index for p in done])
    total = len(todo)

    def record(res: PointResult) -> None:
        """Keep a point's result and report it."""
        outcome.results.append(res)
        if on_done is not None:
            on_done(res, len(outcome.results), total)

    if todo:
        _run_pooled(todo, outdir, sweep.name, max(1, min(jobs, total)), record, point_runner or run_point)
    outcome.results.sort(key=lambda r: r.index)
    return outcome


# ---------------------------------------------------------------- worker processes

def request_stop() -> None:
    """Stop the sweep running in this process (call from a SIGTERM handler): no new point starts, and every
    worker is sent SIGTERM, which stops its simulation at the next slice; the point is written with status
    ``interrupted`` and the worker goes on waiting for work until the pool shuts down."""
    engine.request_stop()
    _signal_workers()


def _signal_workers() -> None:
    """Send SIGTERM to every worker this process has started so far."""
    for child in multiprocessing.active_children():
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)


def _reach_started_workers() -> None:
    """Forward a stop to workers just started (call after every start of a worker).

    A worker counts among this process's children only once ``Process.start`` returns, but it is already
    running (and may have reached its point) before that: a stop requested in between would not reach it and
    its point would run to its end. Signalling again once the start returned closes that window."""
    if engine.stop_requested():
        _signal_workers()


def _stop_on_sigterm() -> None:
    """SIGTERM stops this worker's simulation at its next slice (status interrupted) instead of killing it."""
    signal.signal(signal.SIGTERM, lambda signum, frame: engine.request_stop())


def _worker_init(parent_pid: int, log_level: int) -> None:
    """Worker initializer: die with the sweep process, log at its level; SIGTERM interrupts the running point."""
    worker_init(parent_pid, log_level)
    _stop_on_sigterm()


def _new_pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=worker_initargs())


def _died(p: SweepPoint, how: str = "") -> PointResult:
    return PointResult(p.index, p.run_name, "error", 0.0,
                       f"worker process died{how} (a native crash, an abort or out of memory); "
                       "rerun the point alone to see its output")


def _stopped_before_start(p: SweepPoint) -> PointResult:
    return PointResult(p.index, p.run_name, "interrupted", 0.0,
                       "not written: its worker was stopped before the point began")


def _isolated_child(runner, point: dict, outdir: str, sweep_name: str, log_level: int, conn) -> None:
    """Entry of a one-point child process: run the point, send its result."""
    _worker_init(os.getppid(), log_level)
    conn.send(runner(point, outdir, sweep_name))
    conn.close()


def _run_isolated(runner, p: SweepPoint, outdir: Path, sweep_name: str) -> PointResult:
    """Run one point alone in a child process; a crash is that point's error, with the signal that ended it."""
    import signal  # noqa: PLC0415

    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_isolated_child,
                        args=(runner, _point_dict(p), str(outdir), sweep_name, worker_initargs()[1], send),
                        daemon=True)
    child.start()
    _reach_started_workers()
    send.close()
    result = None
    try:
        result = recv.recv()
    except (EOFError, OSError):
        pass
    child.join()
    recv.close()
    if isinstance(result, PointResult):
        return result
    code = child.exitcode
    if code == -signal.SIGTERM and engine.stop_requested():  # the stop came before its handler was set
        return _stopped_before_start(p)
    how = ""
    if code is not None and code < 0:
        try:
            how = f" with {signal.Signals(-code).name}"
        except ValueError:
            how = f" with signal {-code}"
    elif code:
        how = f" with exit code {code}"
    return _died(p, how)


def _run_pooled(todo: list[SweepPoint], outdir: Path, sweep_name: str, jobs: int, record, runner) -> None:
    """Run ``todo`` on ``jobs`` workers, at most one point in flight per worker.

    A native crash breaks the pool and fails every point in flight: with one in flight it was the crash;
    with several, each is rerun alone, so only the one that crashes again fails. The pool is recreated and
    the remaining points run. Once a stop is requested (:func:`request_stop`) no point starts: the ones in
    flight end interrupted, and a worker that died of the stop is not rerun."""
    pending = list(reversed(todo))
    pool = _new_pool(jobs)
    inflight: dict = {}
    try:
        while (pending and not engine.stop_requested()) or inflight:
            while pending and len(inflight) < jobs and not engine.stop_requested():
                p = pending.pop()
                inflight[pool.submit(runner, _point_dict(p), str(outdir), sweep_name)] = p  # may start a worker
                _reach_started_workers()
            finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
            broken = []
            if any(isinstance(f.exception(), BrokenProcessPool) for f in finished):
                finished = set(wait(inflight)[0])  # a broken pool fails every future at once
            for fut in finished:
                p = inflight.pop(fut)
                exc = fut.exception()
                if exc is None:
                    record(fut.result())
                elif isinstance(exc, BrokenProcessPool):
                    broken.append(p)
                else:
                    record(PointResult(p.index, p.run_name, "error", 0.0, f"{type(exc).__name__}: {exc}"))
            if broken:
                pool.shutdown(wait=True)
                for p in broken:  # a crashed worker could not remove its temporary file
                    for tmp in outdir.glob(f".{p.file_name}.*.tmp"):
                        tmp.unlink(missing_ok=True)
                if engine.stop_requested():  # a worker still starting when SIGTERM came: nothing to rerun
                    for p in sorted(broken, key=lambda p: p.index):
                        record(_stopped_before_start(p))
                elif len(broken) == 1:
                    record(_died(broken[0]))
                else:
                    for p in sorted(broken, key=lambda p: p.index):
                        stopped = engine.stop_requested()
                        record(_stopped_before_start(p) if stopped else _run_isolated(runner, p, outdir, sweep_name))
                if pending and not engine.stop_requested():
                    pool = _new_pool(jobs)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
