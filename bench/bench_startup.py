"""Start-up costs a user pays before any simulation: loading the plugin, and ``cosim --help``.

Each figure is the median of several fresh processes, taken in one run beside a bare ``python -c pass``
so the ratio to the interpreter's own start is comparable across noisy machines.
Targets (issue 2, this 2-core machine): import + load < 4 s, ``cosim --help`` < 0.5 s.

    python bench/bench_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

LOAD = "import cosim.engine as e; e.load()"
HELP = "from cosim.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"


def timed(cmd: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    py = sys.executable
    rows = [("python -c pass", timed([py, "-c", "pass"], args.repeat), None),
            ("import cosim.engine + load plugin", timed([py, "-c", LOAD], args.repeat), 4.0),
            ("cosim --help (in-process main)", timed([py, "-c", HELP], args.repeat), 0.5)]
    exe = shutil.which("cosim")
    if exe:
        rows.append(("cosim --help (console script)", timed([exe, "--help"], args.repeat), 0.5))
    base = rows[0][1]
    print(f"{'what':38s} {'median s':>9s} {'x python':>9s} {'target s':>9s}")
    for name, sec, target in rows:
        print(f"{name:38s} {sec:9.3f} {sec / base:9.1f} {'' if target is None else f'{target:9.1f}'}")


if __name__ == "__main__":
    main()
