"""Worker processes that never outlive the cosim that started them: a batch system's time limit, ``timeout``
or a kill of ``cosim run --jobs N`` / ``cosim sweep --jobs N`` stops every simulation it started."""

from __future__ import annotations

import logging
import os
import time

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: die with the parent (SIGKILL on its death via prctl on Linux; if the parent is
    already gone, exit), and watch the parent pid from a thread where prctl is not available."""
    import signal  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415

    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes  # noqa: PLC0415

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    if not armed:
        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, name="cosim-parent-watch", daemon=True).start()


def worker_init(parent_pid: int, log_level: int) -> None:
    """Initializer of a spawned worker: die with the parent, and log at the parent's level of the ``cosim``
    logger (a spawned process starts with logging unconfigured, so ``-q`` would not reach it)."""
    die_with_parent(parent_pid)
    logging.getLogger("cosim").setLevel(log_level)


def worker_initargs() -> tuple[int, int]:
    """The arguments of :func:`worker_init` for workers started by this process."""
    return os.getpid(), logging.getLogger("cosim").level
