"""The README's examples show what a user should do: no command overwrites what an earlier one wrote, the
trace examples fit their GPUs' memory, and the Python block says the extra its DataFrames need as the error
without it does. (tests/test_docs.py runs every block as written.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import run_main

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


def _commands() -> list[list[str]]:
    """Every ``cosim`` command line of the README's bash blocks, split as the shell splits it (comments off)."""
    out = []
    for lang, text in FENCE.findall(README):
        if lang != "bash":
            continue
        for line in text.replace("\\\n", " ").splitlines():  # a continued line is one command
            words = shlex.split(line, comments=True)
            if words[:1] == ["cosim"]:
                out.append(words)
    return out


def test_no_readme_command_replaces_an_earlier_ones_output():
    """Each results or trace file named with -o is written by one command (--append adds to a file)."""
    written: dict[str, str] = {}
    for words in _commands():
        if "-o" in words and "--append" not in words:
            target = words[words.index("-o") + 1]
            assert target not in written, f"{target}: '{written[target]}' and '{' '.join(words)}'"
            written[target] = " ".join(words)
    assert len(written) > 10


@pytest.mark.parametrize("words", [w for w in _commands() if w[1] == "trace" and "--model" in w],
                         ids=lambda w: " ".join(w[2:]))
def test_readme_trace_examples_fit_in_hbm(words, capsys, tmp_path):
    """Every `cosim trace --model` example of the README builds a trace whose model state fits the GPU
    (the calibrated-GPU example with the preset it was calibrated from)."""
    args = [("h100" if w == "h100-mine.toml" else w) for w in words[1:]]
    if "-o" in args:
        args[args.index("-o") + 1] = str(tmp_path / "t.h5")
    code, out, err = run_main(args, capsys)
    assert code == 0, err
    assert "model state per GPU" in out and "exceeds HBM" not in out + err


def test_the_dataframe_block_names_the_extra_the_error_names():
    """The README block that makes DataFrames is introduced by the analysis extra, spelt as the error
    raised without pandas spells it."""
    from cosim.results.api import _PANDAS_HINT

    extra = re.search(r"pip install '([^']+)'", _PANDAS_HINT).group(1)
    before, _, _ = README.partition("res.summary_frame()")
    intro = before.rsplit("```", 2)[-2]
    assert f"'{extra}'" in intro and '".[analysis]"' in intro
