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
    python bench/bench_mpi.py --hidden 512          # the same jobs with hidden size 512: ~1 min
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
import tomllib
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
    ap.add_argument("--hidden", type=int, help="every job's hidden size (FFN 2.75x, 64-wide heads) [the file's]")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to cosim run")
    args = ap.parse_args()
    sets = [x for kv in args.set for x in ("--set", kv)]
    walls = {"undivided": [], "partitioned, 1 process": [], f"partitioned, {args.ranks} MPI ranks": []}
    with tempfile.TemporaryDirectory() as tmp:
        experiment = args.experiment if args.hidden is None else _resized(args.experiment, args.hidden, tmp)
        base = [sys.executable, "-m", "cosim", "run", experiment, "-q", *sets]
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
    print(f"experiment: {args.experiment} {'' if args.hidden is None else f'--hidden {args.hidden} '}"
          f"{' '.join(args.set)}")
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
    print(f"windows {windows:,}, packets across cut links {crossed:,} "
          f"({crossed / max(parted['packet_hops'], 1):.1%} of packet-hops); rank 0: simulating "
          f"{split['partition_window_s']:.1f} s, waiting in the Allgather {split['partition_wait_s']:.1f} s "
          f"(shortest {1e6 * split['partition_allgather_min_s']:.0f} us), exchanging packets "
          f"{split['partition_exchange_s']:.1f} s")
    _estimate(t1, plain["wall_time_s"], windows, crossed, args.ranks, split)


def _resized(path: str, hidden: int, folder: str) -> str:
    """A copy of experiment ``path`` whose jobs have hidden size ``hidden``; returns its path."""
    import tomli_w  # noqa: PLC0415 - cosim's own dependency

    doc = tomllib.loads(Path(path).read_text())
    for job in doc["workloads"]:
        job.setdefault("model_overrides", {}).update(hidden_size=hidden, num_heads=hidden // 64,
                                                     num_kv_heads=hidden // 64, ffn_hidden_size=hidden * 11 // 4)
    out = Path(folder) / Path(path).name
    out.write_text(tomli_w.dumps(doc))
    return str(out)


def _estimate(t_one: float, sim_s: float, windows: int, crossed: int, ranks: int, split: dict) -> None:
    """Wall time on N ranks of N independent jobs of the same total size (docs in bench/README.md):

    T(N) = fixed + r S / N + wait (ranks / N) + c X(N) / N + windows x l x log2 N

    fixed: what the undivided run spends outside its simulation (every rank plans and records the whole run);
    S: the undivided simulation; r: a partitioned rank's simulating time over its share of S (the copies of
    cut-link packets); wait: the Allgather's waiting for the slowest rank, shrinking with the work per rank;
    c: exchange seconds per packet a rank handles, X(N): packets across cut links, X(ranks) (N - 1) / N
    over (ranks - 1) / ranks (jobs spread over shared switches: a packet leaves its partition with
    probability (N - 1) / N); l: the shortest Allgather measured, log2 N steps of it per window."""
    fixed = t_one - sim_s
    r = ranks * split["partition_window_s"] / sim_s
    c = split["partition_exchange_s"] / (crossed / ranks)
    latency = split["partition_allgather_min_s"]
    print(f"\nfixed {fixed:.1f} s, simulation {sim_s:.1f} s, r {r:.2f}, wait {split['partition_wait_s']:.1f} s, "
          f"c {1e9 * c:.0f} ns per packet, l {1e6 * latency:.0f} us")
    print("\n| ranks | estimated wall s | speedup |\n|---:|---:|---:|")
    for n in (1, 2, 4, 8, 16, 32, 64):
        crossed_n = crossed * ((n - 1) / n) / ((ranks - 1) / ranks)
        t = t_one if n == 1 else (fixed + r * sim_s / n + split["partition_wait_s"] * ranks / n
                                  + c * crossed_n / n + windows * latency * math.log2(n))
        print(f"| {n} | {t:.1f} | {t_one / t:.1f}x |")


if __name__ == "__main__":
    main()
