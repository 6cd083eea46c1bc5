"""Start-up costs a user pays before any simulation: loading the plugin, ``cosim --help``, and the time from
process start to the first simulated event of a small run.

Each figure is the median of several fresh processes, taken in one run beside a bare ``python -c pass``
so the ratio to the interpreter's own start is comparable across noisy machines.
Targets (issue 2, this 2-core machine): import + load < 4 s, ``cosim --help`` < 0.5 s; (issue 29, a quiet
machine) the first event of a 17-host incast <= 0.3 s after the process starts.

Time to the first event: the run (``--run``, a ``cosim run`` command line, default a 17-host incast) starts
in a fresh ``python`` process as ``python -m cosim`` does (the command, which may start itself again on huge
pages: cosim/__main__.py), whose only addition is an import hook: when ``cosim.engine`` is imported it
wraps ``engine._run_sliced`` (entered once the fabric and flows are built, just before the first
``RunUntil``) to write the wall clock to stderr. The figure is that clock less the one the parent read just
before starting the process, so it includes the interpreter's start. With ``--reference DIR`` every repeat
runs that checkout and then this one, alternating, so both see the same machine load. Beside them, stamped
the same way in fresh processes of this checkout, the floors of any run: the interpreter's start, numpy and
cppyy imported, and the plugin loaded (the differences are the breakdown of a run's first event).

Every child runs with its bytecode cached in a directory of its own (``-X pycache_prefix``), as an installed
package has it; the first run of each side fills the cache and is not counted.

    python bench/bench_startup.py [--repeat 5]
    python bench/bench_startup.py --first-event-only --repeat 15 --reference /work/main
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
LOAD = "import cosim.engine as e; e.load()"
HELP = "from cosim.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
RUN = "run --pattern incast --hosts 17 -q"

#: the child of a first-event measurement: the cosim command line, with the wall clock and the process's CPU time
#: written to stderr when the engine enters its event loop (works on any checkout that has engine._run_sliced)
FIRST_EVENT_PROBE = """
import sys, time
from importlib.machinery import PathFinder

class FirstEvent:
    def find_spec(self, name, path, target=None):
        if name != "cosim.engine":
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name, path)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            sliced = module._run_sliced

            def first(*args, **kwargs):
                sys.stderr.write(f"first-event-unix-s {time.time()!r} {time.process_time()!r}\\n")
                module._run_sliced = sliced
                return sliced(*args, **kwargs)

            module._run_sliced = first

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, FirstEvent())
import runpy
runpy.run_module("cosim", run_name="__main__")  # as `python -m cosim ARGV` (which may start itself again)
"""

_STAMP = "import sys, time; sys.stderr.write(f'first-event-unix-s {time.time()!r} {time.process_time()!r}\\n')"
#: children of this checkout stamped as a run's first event is: the floors (what every cosim process that simulates
#: loads), then cosim's modules imported before and beside the plugin's load
FLOORS = {
    "floor: python starts": _STAMP,
    "floor: import numpy, cppyy": f"import numpy, cppyy; {_STAMP}",
    "floor: + load the plugin": f"import numpy; from cosim import plugin; plugin.namespace(); {_STAMP}",
    # what a run imports, then the plugin; and the plugin loaded by a thread while the main thread imports
    "cosim's modules, then the plugin": "from cosim import plugin; import cosim.run, cosim.cli.run; "
                                        f"plugin.namespace(); {_STAMP}",
    "the same, the plugin in a thread": "import threading; from cosim import plugin; "
                                        "t = threading.Thread(target=plugin.namespace); t.start(); "
                                        f"import cosim.run, cosim.cli.run; t.join(); {_STAMP}",
}


#: the first simulation of a process (a 17-host incast through cosim.engine.simulate), once the plugin is loaded:
#: mostly cling compiling a call wrapper for each Engine method the run calls first. Argument: the wrappers'
#: optimization level (the plugin sets 0; 2 is cling's default)
FIRST_SIMULATION = """
import sys, time
from cosim import engine
from cosim.network import topology
from cosim.workload import flows
engine.load()
import cppyy
cppyy.gbl.gInterpreter.ProcessLine(".O " + sys.argv[1])
fabric = topology.single_switch(hosts=17, link_gbps=100.0, link_delay_ns=1000.0)
incast = flows.FlowSet.from_arrays(list(range(1, 17)), [0] * 16, 1 << 20)
t = time.perf_counter()
engine.simulate(fabric, incast)
print(time.perf_counter() - t)
"""


def wrapper_table(repeat: int) -> None:
    """The first simulation of fresh processes with the call wrappers at -O2 and at -O0, alternating."""
    times = {"2": [], "0": []}
    with tempfile.TemporaryDirectory(prefix="cosim-startup-") as tmp:
        for i in range(repeat + 1):  # the first pair fills the bytecode cache
            for level in times:
                out = subprocess.run([sys.executable, "-X", f"pycache_prefix={tmp}", "-c", FIRST_SIMULATION, level],
                                     env=child_env(HERE), check=True, capture_output=True, text=True).stdout
                if i:
                    times[level].append(float(out.split()[-1]))
    print(f"first engine.simulate() of a process (17-host incast), {repeat} fresh processes each")
    for level, t in times.items():
        print(f"  call wrappers at -O{level}: {statistics.median(t):.3f} s ({min(t):.3f}-{max(t):.3f})")


def timed(cmd: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def child_env(checkout: Path) -> dict[str, str]:
    """The environment of a child running ``checkout``: it first on the path, bytecode written."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    return env


def stamped(checkout: Path, code: str, argv: list[str], cache: Path,
            cwd: Path) -> tuple[float, float, float, float, float]:
    """(seconds from process start to the child's ``first-event-unix-s`` stamp, the child's CPU seconds by then,
    seconds of the whole process, its CPU seconds (user + system), peak RSS MB) of one fresh
    ``python -c code argv`` with ``checkout`` first on the path."""
    cmd = [sys.executable, "-X", f"pycache_prefix={cache}", "-c", code, *argv]
    t_unix = time.time()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=child_env(checkout), cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{checkout}: {' '.join(argv) or code} failed:\n{err}")
    stamps = [line.split()[1:] for line in err.splitlines() if line.startswith("first-event-unix-s ")]
    if not stamps:
        raise SystemExit(f"{checkout}: no event loop was entered (no engine._run_sliced call)")
    return (float(stamps[0][0]) - t_unix, float(stamps[0][1]), wall, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1e3)


def first_event_table(sides: list[tuple[str, Path]], argv: list[str], repeat: int) -> None:
    """The first event of ``cosim ARGV`` on each side, and beside it the floor of any process that uses the
    plugin (this checkout): python, numpy and cppyy imported, the plugin loaded."""
    rows = {name: [] for name, _ in sides}
    floors = {name: [] for name in FLOORS}
    with tempfile.TemporaryDirectory(prefix="cosim-startup-") as tmp:
        tmp = Path(tmp)
        caches = {name: tmp / f"pycache-{name}" for name, _ in sides}
        run_argv = [*argv, "-o", str(tmp / "first-event.h5")]
        for name, checkout in sides:  # fills the bytecode cache
            stamped(checkout, FIRST_EVENT_PROBE, run_argv, caches[name], tmp)
        for i in range(repeat):
            for name, checkout in sides:
                rows[name].append(stamped(checkout, FIRST_EVENT_PROBE, run_argv, caches[name], tmp))
                first, first_cpu, wall, cpu, peak = rows[name][-1]
                print(f"  run {i + 1} {name:9s} first event {first:6.3f} s ({first_cpu:6.3f} CPU s), process "
                      f"{wall:6.3f} s ({cpu:6.3f} CPU s), {peak:5.0f} MB", flush=True)
            for name, code in FLOORS.items():
                floors[name].append(stamped(HERE, code, [], caches["this"], tmp))
    print(f"time to the first event of 'cosim {' '.join(argv)}', {repeat} fresh processes each")
    print(f"{'what':34s} {'first event s':>13s} {'min-max s':>13s} {'its CPU s':>10s} {'min-max':>13s} "
          f"{'process s':>10s} {'CPU s':>6s} {'peak MB':>8s}")
    for name, samples in [*rows.items(), *floors.items()]:
        fe, fc = [r[0] for r in samples], [r[1] for r in samples]
        wall, cpu, peak = (statistics.median(r[k] for r in samples) for k in (2, 3, 4))
        print(f"{name:34s} {statistics.median(fe):13.3f} {min(fe):6.3f}-{max(fe):6.3f} {statistics.median(fc):10.3f} "
              f"{min(fc):6.3f}-{max(fc):6.3f} {wall:10.3f} {cpu:6.3f} {peak:8.0f}")
    if len(sides) == 2:
        for k, what in ((0, "first event"), (1, "its CPU time")):
            ratios = [b[k] / a[k] for a, b in zip(*rows.values())]
            print(f"{sides[1][0]} / {sides[0][0]}, {what} per pair: median {statistics.median(ratios):.2f} "
                  f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--run", default=RUN, help=f"the cosim command line of the first-event figure [{RUN}]")
    ap.add_argument("--reference", type=lambda p: Path(p).resolve(),
                    help="another cosim checkout whose first event is measured alternately with this one's")
    ap.add_argument("--first-event-only", action="store_true", help="measure only the time to the first event")
    ap.add_argument("--wrappers", action="store_true",
                    help="measure only the first simulation of a process at both wrapper optimization levels")
    args = ap.parse_args()
    if args.wrappers:
        wrapper_table(args.repeat)
        return
    sides = ([("reference", args.reference)] if args.reference else []) + [("this", HERE)]
    if not args.first_event_only:
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
    first_event_table(sides, shlex.split(args.run), args.repeat)


if __name__ == "__main__":
    main()
