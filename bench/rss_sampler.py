"""Run a ``cosim`` command in this process with a thread that writes, about once a second, the process's RSS
and the main thread's innermost frames to a log: where a long run spends its time and its memory.

    python bench/rss_sampler.py LOG run bench/llama3-405b-16k.toml -o ff.h5 --set limits.fast_forward=true

Each line is ``unix_time_s rss_gb frame > frame > ...`` (outermost first, the last six). The main thread
holds the interpreter while the simulator runs a slice, so inside the event loop a line comes per slice.
The command runs without the huge-page restart (``COSIM_HUGE_PAGES=1`` is set, so ``cosim`` does not start
again); set ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` to keep huge pages.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
import traceback

#: seconds between samples
PERIOD_S = 1.0


def _sample(log, main: int) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        time.sleep(PERIOD_S)
        with open("/proc/self/statm") as statm:
            rss = int(statm.read().split()[1]) * page
        frame = sys._current_frames().get(main)
        stack = [f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
                 for f in traceback.extract_stack(frame)][-6:] if frame else []
        log.write(f"{time.time():.0f} {rss / 1e9:.2f} {' > '.join(stack)}\n")
        log.flush()


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: python bench/rss_sampler.py LOG COSIM_ARGS...")
    log = open(sys.argv[1], "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    os.environ["COSIM_HUGE_PAGES"] = "1"  # no restart: the sampler would not follow it
    threading.Thread(target=_sample, args=(log, threading.get_ident()), daemon=True).start()
    sys.argv = ["cosim", *sys.argv[2:]]
    runpy.run_module("cosim", run_name="__main__")


if __name__ == "__main__":
    main()
