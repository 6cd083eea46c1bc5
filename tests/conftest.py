"""Shared fixtures: tests run the real ns-3 through the built plugin (no mocks)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch):
    """Text tables fit the terminal's width ($COLUMNS first); a test prints to none, whatever the runner
    says (pytest-xdist's workers inherit COLUMNS=80), so its tables get cosim's own default width."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="session")
def engine_ns():
    """The loaded plugin namespace (fails loudly if cosim was not built)."""
    from cosim import engine

    return engine.load()


@pytest.fixture(scope="session")
def model_probes(engine_ns):
    """``cosim::ModelProbes``: unit probes of single models, compiled into the plugin but declared in their
    own header (ns3_scenarios/test/model-probes.h, installed beside the engine header's directory)."""
    import cppyy

    from cosim import plugin

    _, engine_include = plugin.find_plugin()
    cppyy.include(str(engine_include.parent / "test" / "model-probes.h"))
    return cppyy.gbl.cosim.ModelProbes


def run_main(args, capsys):
    """Run ``cosim ARGS`` in-process as users do; returns (exit code, stdout, stderr)."""
    from cosim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def help_output_loading_nothing_heavy(argvs, heavy=("cppyy", "numpy", "h5py")) -> str:
    """Run ``cosim <argv> --help`` for each argv in a fresh interpreter; assert none of ``heavy`` got
    imported (help must stay instant); returns the combined help text."""
    code = ("import sys; from cosim.cli import main\n"
            f"for argv in {list(map(list, argvs))!r}:\n"
            "    try:\n        main(argv + ['--help'])\n"
            "    except SystemExit as e:\n        assert e.code == 0, (argv, e.code)\n"
            f"heavy = [m for m in {tuple(heavy)!r} if m in sys.modules]\n"
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def valid_results(tmp_path_factory, engine_ns):
    """A real two-run (roce, ib) flow results file, for tests that damage or read one."""
    from cosim.cli import main

    path = tmp_path_factory.mktemp("valid") / "valid.h5"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--hosts", "4", "--flow-bytes", "16KiB", "--transport", "both", "-q", "-o", str(path)])
    assert exc.value.code == 0
    return path
