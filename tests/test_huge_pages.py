"""The command starts a simulating verb again with glibc's malloc on transparent huge pages; results do not move.

The decision is a pure function of the environment, the arguments, the kernel's mode and glibc's version; the
golden cases run through ``python -m cosim`` as a user starts it (executed again wherever the kernel's mode is
``madvise``) and with the tunable set outright, and must reproduce their golden files bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cosim.__main__ import HUGE_PAGE_TUNABLE, HUGE_PAGES_VARIABLE, huge_page_environment

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import CASES, assert_matches_golden  # noqa: E402

GLIBC = (2, 36)


def test_a_simulating_verb_starts_again_with_the_tunable():
    env = huge_page_environment({"PATH": "/bin"}, ["run", "incast"], "madvise", GLIBC)
    assert env == {"PATH": "/bin", "GLIBC_TUNABLES": f"{HUGE_PAGE_TUNABLE}=1", HUGE_PAGES_VARIABLE: "1"}
    for verb in ("sweep", "collective"):
        assert huge_page_environment({}, [verb], "madvise", GLIBC) is not None


def test_other_tunables_are_kept():
    env = huge_page_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, ["run"], "madvise", GLIBC)
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{HUGE_PAGE_TUNABLE}=1"


@pytest.mark.parametrize(("environ", "args", "mode", "glibc"), [
    ({}, ["inspect", "r.h5"], "madvise", GLIBC),                       # does not simulate
    ({}, [], "madvise", GLIBC),                                        # bare ``cosim``: help
    ({}, ["run"], "always", GLIBC),                                    # malloc's memory has huge pages already
    ({}, ["run"], "never", GLIBC),                                     # the kernel gives none
    ({}, ["run"], None, GLIBC),                                        # no transparent huge pages at all
    ({}, ["run"], "madvise", (2, 34)),                                 # glibc without the tunable
    ({}, ["run"], "madvise", None),                                    # not glibc
    ({"GLIBC_TUNABLES": f"{HUGE_PAGE_TUNABLE}=0"}, ["run"], "madvise", GLIBC),  # the user's own setting
    ({HUGE_PAGES_VARIABLE: "0"}, ["run"], "madvise", GLIBC),           # turned off
    ({HUGE_PAGES_VARIABLE: "1"}, ["run"], "madvise", GLIBC),           # the second start never starts a third
])
def test_no_second_start(environ, args, mode, glibc):
    assert huge_page_environment(environ, args, mode, glibc) is None


@pytest.mark.parametrize(("case", "tunable"), [("training-dp8-zero1", None),
                                               ("permutation-leaf-spine", f"{HUGE_PAGE_TUNABLE}=1")])
def test_golden_case_through_the_command(case, tunable, tmp_path, engine_ns):
    """The command as users start it, and with malloc on huge pages outright, reproduces the golden file."""
    out = tmp_path / f"{case}.h5"
    env = dict(os.environ)
    env.pop(HUGE_PAGES_VARIABLE, None)
    if tunable is not None:
        env["GLIBC_TUNABLES"] = tunable
    done = subprocess.run([sys.executable, "-m", "cosim", "run", *CASES[case], "--quiet", "-o", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert_matches_golden(case, out)
