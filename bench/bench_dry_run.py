"""Wall time and peak memory of ``cosim run EXPERIMENT --dry-run``, each run a fresh process.

With ``--reference DIR`` (a checkout of another cosim, e.g. main's), every repeat runs the reference and then
this checkout, one after the other, so both see the same machine load; the medians and the per-pair ratio are
printed, of wall time and of CPU time (user + system: steadier than wall time on a shared machine). Without
it, only this checkout runs. Peak RSS is the process's own (``wait4``), as ``/usr/bin/time -v`` reports it.
The plans printed by both must be identical (checked unless ``--no-compare``): a faster dry run must not print
another plan.

    python bench/bench_dry_run.py bench/llama2-70b-1k.toml --repeat 3 --reference /work/main
    python bench/bench_dry_run.py bench/llama3-405b-100k.toml --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def dry_run(checkout: Path, experiment: str) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS GB, stdout) of one ``cosim run EXPERIMENT --dry-run`` with ``checkout`` first on the
    path."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    t = time.perf_counter()
    # run in the checkout: ``python -m`` puts the working directory first on the path
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "run", experiment, "--dry-run"], env=env, cwd=checkout,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{checkout}: cosim run {experiment} --dry-run exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1e6, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="a TOML file or shipped experiment name")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each checkout [3]")
    ap.add_argument("--reference", type=lambda p: Path(p).resolve(),
                    help="another cosim checkout, run before this one in every pair")
    ap.add_argument("--no-compare", action="store_true", help="do not require identical plans")
    args = ap.parse_args()
    if Path(args.experiment).is_file():
        args.experiment = str(Path(args.experiment).resolve())
    sides = ([("reference", args.reference)] if args.reference else []) + [("this", HERE)]
    walls = {name: [] for name, _ in sides}
    cpus = {name: [] for name, _ in sides}
    rss = {name: 0.0 for name, _ in sides}
    for i in range(args.repeat):
        outs = {}
        for name, checkout in sides:
            wall, cpu, peak, outs[name] = dry_run(checkout, args.experiment)
            walls[name].append(wall)
            cpus[name].append(cpu)
            rss[name] = max(rss[name], peak)
            print(f"  run {i + 1} {name:9s} {wall:7.1f} s {cpu:7.1f} CPU s {peak:6.2f} GB", flush=True)
        if args.reference and not args.no_compare and outs["reference"] != outs["this"]:
            raise SystemExit("the two checkouts print different plans")
    print(f"{'checkout':10s} {'median s':>9s} {'min s':>7s} {'max s':>7s} {'CPU s':>7s} {'min':>7s} {'max':>7s} "
          f"{'peak GB':>8s}")
    for name, _ in sides:
        w, c = walls[name], cpus[name]
        print(f"{name:10s} {statistics.median(w):9.1f} {min(w):7.1f} {max(w):7.1f} {statistics.median(c):7.1f} "
              f"{min(c):7.1f} {max(c):7.1f} {rss[name]:8.2f}")
    if args.reference:
        for what, times in (("wall", walls), ("CPU", cpus)):
            ratios = [b / a for a, b in zip(times["reference"], times["this"])]
            print(f"this / reference, {what} time per pair: {', '.join(f'{r:.2f}' for r in ratios)} "
                  f"(median {statistics.median(ratios):.2f})")


if __name__ == "__main__":
    main()
