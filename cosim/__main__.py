"""``python -m cosim`` and the ``cosim`` command: a command that simulates starts with glibc's malloc on
transparent huge pages, then the command line runs.

A packet-level run reads ports, packets, queue pairs and events scattered over gigabytes of heap, and on 4 KiB
pages each cold read can miss the TLB too: on huge pages a rail of 2,048 NICs simulated a third faster, one of
128 NICs as fast (bench/README.md, "The event loop"). Where the kernel gives huge pages only to memory that
asks for them (``transparent_hugepage/enabled`` is ``madvise``), glibc's malloc asks when the
``glibc.malloc.hugetlb=1`` tunable is set, and glibc reads tunables only when a process starts: so the command
executes itself once more with it set. Results do not change (memory layout is not an input to the
simulation; two golden tests run through this path). ``GLIBC_TUNABLES`` naming
``glibc.malloc.hugetlb`` already, with any value, is left as it is; ``COSIM_HUGE_PAGES=0`` keeps the first
start (the second start has it set to 1, so a C library that drops the tunable cannot make it loop).

Only the standard library is imported here, so the second start costs the interpreter's start alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

#: the glibc tunable that makes malloc advise huge pages for the memory it maps
HUGE_PAGE_TUNABLE = "glibc.malloc.hugetlb"
#: verbs that run simulations (their workers inherit the environment)
SIMULATING_VERBS = frozenset({"run", "sweep", "collective"})
#: the first glibc with HUGE_PAGE_TUNABLE
MIN_GLIBC = (2, 35)
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
#: set (to 1) in the second start; 0 set by the user keeps the first
HUGE_PAGES_VARIABLE = "COSIM_HUGE_PAGES"


def huge_page_environment(environ: Mapping[str, str], args: Sequence[str], thp_mode: str | None,
                          glibc: tuple[int, int] | None) -> dict[str, str] | None:
    """The environment to execute the command again with, or None to run it as it is.

    ``args`` are the command's arguments (without the program), ``thp_mode`` the kernel's selected
    transparent-huge-page mode (``always``, ``madvise``, ``never``; None if unknown), ``glibc`` its version
    (None when the C library is not glibc).
    """
    if not args or args[0] not in SIMULATING_VERBS:
        return None
    if thp_mode != "madvise" or glibc is None or glibc < MIN_GLIBC:
        return None  # "always" gives malloc's memory huge pages already; "never" gives none
    tunables = environ.get("GLIBC_TUNABLES", "")
    if HUGE_PAGE_TUNABLE in tunables or HUGE_PAGES_VARIABLE in environ:
        return None  # the user's setting, or this process is the second start
    env = dict(environ)
    env[HUGE_PAGES_VARIABLE] = "1"
    env["GLIBC_TUNABLES"] = f"{tunables}:{HUGE_PAGE_TUNABLE}=1" if tunables else f"{HUGE_PAGE_TUNABLE}=1"
    return env


def _thp_mode() -> str | None:
    try:
        with open(THP_ENABLED, encoding="ascii") as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def _glibc() -> tuple[int, int] | None:
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
        major, minor = version.split(".")[:2]
        return (int(major), int(minor)) if name == "glibc" else None
    except (AttributeError, OSError, ValueError):
        return None


def main() -> None:
    """Run the ``cosim`` command line, first executing it again on huge pages if it simulates."""
    env = huge_page_environment(os.environ, sys.argv[1:], _thp_mode(), _glibc())
    if env is not None:
        os.execve(sys.executable, sys.orig_argv, env)
    from cosim.cli import main as cli_main  # noqa: PLC0415 - after the decision, so a second start loads it once

    cli_main()


if __name__ == "__main__":
    main()
