"""A coupled run on MPI ranks against one process (issue 30): `bench/two-jobs-1k.toml`, two TP8 x DP64 jobs on a
1,024-NIC leaf-spine whose rings meet on the spines, run

- undivided in one process (limits.partitions = 1): the reference a user would otherwise run;
- in two partitions in one process (the experiment's limits.partitions = 2);
- in the same two partitions on `--ranks` MPI ranks (mpiexec), which must write the datasets of the one-process
  partitioned run bit for bit.

Each run is a fresh `cosim run` process; wall times are medians over `--repeat` rounds (one of each variant
per round, in that order), with their range. Then a scaling estimate to 64 ranks from the measured windows,
cut-link packets and time between windows (bench/README.md says how it is made).

    python bench/bench_mpi.py                       # ~10 min on 2 cores
    python bench/bench_mpi.py --repeat 3
    python bench/bench_mpi.py --set "workloads.0.model_overrides.hidden_size=512" ...   # see --help
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        sys.exit("bench_mpi.py: no mpiexec (pip install '.[mpi]' installs MPICH beside mpi4py)")
    return found


def _run(cmd: list[str]) -> float:
    """Wall seconds of ``cmd`` (which must succeed)."""
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t


#: summary keys that are wall-clock measurements, not results
VOLATILE = ("wall_time_s", "packet_hops_per_s")


def _read(path: Path) -> tuple[dict, dict, dict]:
    """(datasets, summary, decomposition config) of the file's one run."""
    with h5py.File(path, "r") as h5:
        (run,) = h5["runs"].values()
        data = {}
        run.visititems(lambda k, o: data.__setitem__(k, o[()]) if isinstance(o, h5py.Dataset) else None)
        summary = json.loads(run.attrs["summary"])
        split = json.loads(run.attrs["config"]).get("decomposition", {})
    return data, summary, split


def _identical(a: Path, b: Path) -> bool:
    (da, sa, _), (db, sb, _) = _read(a), _read(b)
    same_summary = {k: v for k, v in sa.items() if k not in VOLATILE} == {k: v for k, v in sb.items()
                                                                        if k not in VOLATILE}
    return same_summary and sorted(da) == sorted(db) and all(
        da[k].dtype == db[k].dtype and da[k].shape == db[k].shape
        and np.array_equal(da[k], db[k], equal_nan=da[k].dtype.kind == "f") for k in da)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default=str(HERE / "two-jobs-1k.toml"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to cosim run")
    args = ap.parse_args()
    sets = [x for kv in args.set for x in ("--set", kv)]
    base = [sys.executable, "-m", "cosim", "run", args.experiment, "-q", *sets]
    walls = {"undivided": [], "partitioned, 1 process": [], f"partitioned, {args.ranks} MPI ranks": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = {name: Path(tmp) / f"{i}.h5" for i, name in enumerate(walls)}
        cmds = {
            "undivided": [*base, "--set", "limits.partitions=1"],
            "partitioned, 1 process": list(base),
            f"partitioned, {args.ranks} MPI ranks": [_mpiexec(), "-n", str(args.ranks), *base],
        }
        for _ in range(args.repeat):
            for name, cmd in cmds.items():
                walls[name].append(_run([*cmd, "-o", str(out[name])]))
        names = list(walls)
        same = _identical(out[names[1]], out[names[2]])
        _, plain, _ = _read(out[names[0]])
        _, parted, split = _read(out[names[2]])
    print(f"experiment: {args.experiment} {' '.join(args.set)}")
    print(f"partitions: {split.get('partitions')}, cut links {split.get('partition_cut_links')}, lookahead "
          f"{split.get('partition_lookahead_ns')} ns, nodes per partition {split.get('partition_nodes')}")
    print(f"datasets of the MPI run identical to the one-process partitioned run: {same}")
    print("\n| run | wall s, median (range) | events | iteration job0 / job1, ms |\n|---|---:|---:|---|")
    for name, w in walls.items():
        s = plain if name == names[0] else parted
        iters = " / ".join(f"{s[f'job{j}_iteration_time_ns'] / 1e6:.3f}" for j in (0, 1))
        print(f"| {name} | {statistics.median(w):.1f} ({min(w):.1f}-{max(w):.1f}) | {s['events']:,} | {iters} |")
    t1, t_part, t_mpi = (statistics.median(walls[n]) for n in names)
    print(f"\nspeedup of {args.ranks} ranks: {t1 / t_mpi:.2f}x over the undivided run, {t_part / t_mpi:.2f}x over "
          "the same partitions in one process")
    windows, crossed = parted.get("partition_windows", 0), parted.get("partition_exchanged_packets", 0)
    sync_s = split.get("partition_sync_s", float("nan"))
    sim_s = plain["wall_time_s"]  # the undivided run's simulation (cosim.record: the engine's wall time)
    print(f"windows {windows:,}, packets across cut links {crossed:,} "
          f"({crossed / max(parted['packet_hops'], 1):.1%} of packet-hops), rank 0 between windows {sync_s:.2f} s "
          f"({1e6 * sync_s / max(windows, 1):.1f} us per window)")
    _estimate(t1, sim_s, windows, sync_s)


def _estimate(t_one: float, sim_s: float, windows: int, sync_s: float) -> None:
    """T(N) = fixed + simulation / N + windows x per-window sync x (1 + log2(N / 2)): every rank plans and
    records the whole run (fixed), splits the event loop N ways (N independent jobs of the same total
    size), and a window's collectives cost log2 N steps."""
    fixed = t_one - sim_s
    per_window = sync_s / max(windows, 1)
    print("\n| ranks | estimated wall s | speedup |\n|---:|---:|---:|")
    for n in (1, 2, 4, 8, 16, 32, 64):
        t = t_one if n == 1 else fixed + sim_s / n + windows * per_window * (1 + math.log2(n / 2))
        print(f"| {n} | {t:.1f} | {t_one / t:.1f}x |")


if __name__ == "__main__":
    main()
