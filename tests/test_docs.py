"""Every command and snippet of the README and docs/ runs as written.

Each Markdown file's fenced blocks run in order in one fresh folder (so a block may use what an earlier
one wrote), with ``traces/``, ``docs/`` and ``tests/`` of the repository linked in and ``cosim`` on PATH running this
checkout: ``bash`` blocks as ``bash -e`` scripts, ``python`` blocks with this interpreter in one namespace
per page (like notebook cells), and a ``toml``
block whose first line is ``# NAME.toml`` written to NAME.toml. Blocks that install (``pip install``) are the
Quick start's, which CI runs itself (``.ci/run``); ``text`` and unlabelled blocks are output, not commands.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
RUNNABLE = {"bash", "python", "toml"}


def blocks(path: Path) -> list[tuple[str, str]]:
    """(language, text) of every runnable fenced block of ``path``, in order."""
    return [(lang, text) for lang, text in FENCE.findall(path.read_text()) if lang in RUNNABLE]


def _installs(text: str) -> bool:
    return "pip install" in text or "python3 -m venv" in text


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    """A folder with a ``cosim`` executable that runs this checkout with the test's interpreter."""
    folder = tmp_path_factory.mktemp("bin")
    script = folder / "cosim"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m cosim "$@"\n')
    script.chmod(0o755)
    return folder


def _env(shim: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)  # COLUMNS is gone already (conftest.py): output as no terminal shapes it
    return env


#: runs a page's blocks in order in one process, so Python blocks share their names as notebook cells do
_DRIVER = """
import json, subprocess, sys, traceback
namespace = {"__name__": "__main__"}
for i, (lang, text) in enumerate(json.load(open(sys.argv[1]))):
    print(f"=== block {i + 1} ({lang})", file=sys.stderr, flush=True)
    if lang == "bash":
        if subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text]).returncode:
            sys.exit(f"block {i + 1} (bash) failed")
    else:
        exec(compile(text, f"<block {i + 1}>", "exec"), namespace)
"""


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_block_runs(doc, shim, tmp_path, engine_ns):
    runnable = []
    for lang, text in blocks(doc):
        if _installs(text):
            continue
        if lang == "toml":
            target = re.fullmatch(r"#\s*(\S+\.toml)\s*", text.splitlines()[0])
            if target:
                (tmp_path / target.group(1)).write_text(text)
            continue
        runnable.append((lang, text))
    if not runnable:
        pytest.skip("no runnable block")
    for name in ("traces", "docs", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / ".blocks.json").write_text(json.dumps(runnable))
    proc = subprocess.run([sys.executable, "-c", _DRIVER, ".blocks.json"], cwd=tmp_path, env=_env(shim),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{doc.name} failed:\n{proc.stderr[-4000:]}"
    assert "Traceback" not in proc.stderr, f"{doc.name}:\n{proc.stderr[-4000:]}"


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    """The README's Quick start has exactly two commands: install + run, install test extras + pytest;
    .ci/run runs the second one verbatim (apart from the venv it makes itself)."""
    readme = (REPO / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [text.strip() for lang, text in FENCE.findall(quick) if lang == "bash"]
    assert len(commands) == 2 and all(len(c.splitlines()) == 1 for c in commands), commands
    assert commands[0].endswith("cosim run") and "pytest" in commands[1]
    ci = (REPO / ".ci" / "run").read_text()
    assert '.venv/bin/pip install ".[test]"' in ci and ".venv/bin/python -m pytest -q" in ci
