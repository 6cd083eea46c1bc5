"""The cosim command line, run as users run it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import help_output_loading_nothing_heavy, run_main

from cosim import results
from cosim.cli import cli


def test_help_does_not_load_the_simulator():
    text = help_output_loading_nothing_heavy([[]], heavy=("cppyy", "numpy", "h5py", "ns"))
    assert "run" in text and "inspect" in text


def test_version(capsys):
    code, out, _ = run_main(["--version"], capsys)
    assert code == 0 and out.startswith("cosim 0.1.0") and "3.44" in out


def test_run_then_inspect(tmp_path, engine_ns):
    out_file = tmp_path / "res.h5"
    runner = CliRunner()
    r = runner.invoke(cli, ["run", "--hosts", "4", "--flow-bytes", "64KiB", "-o", str(out_file)])
    assert r.exit_code == 0, r.output
    assert "flows completed" in r.output and "complete" in r.output
    assert results.read_results(out_file)["incast"].summary["flows_completed"] == 3
    r = runner.invoke(cli, ["inspect", str(out_file)])
    assert r.exit_code == 0 and "incast" in r.output and "FCT p99" in r.output


@pytest.mark.parametrize("args,needle", [
    (["run", "--hosts", "abc"], "--hosts"),
    (["run", "--hosts", "1"], "--hosts"),
    (["run", "--flow-bytes", "3XB"], "--flow-bytes"),
    (["run", "--topology", "torus"], "--topology"),
    (["run", "--set", "nonsense"], "--set"),
    (["run", "--set", "HostNic::MtuBytes=abc"], "HostNic::MtuBytes"),
    (["run", "--topology", "leaf-spine", "--oversubscription", "0.5"], "oversubscription"),
    (["run", "--topology", "fat-tree", "--hosts", "20", "--switch-radix", "4"], "hosts"),
    (["run", "--set", "FabricSwitch::EcnKminBytes=500000", "--set", "FabricSwitch::EcnKmaxBytes=1000"], "Kmin"),
    (["frobnicate"], "frobnicate"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, needle, engine_ns):
    code, out, err = run_main(args + (["-o", str(tmp_path / "x.h5")] if args[0] == "run" else []), capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error:") and needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "x.h5").exists()


def test_corrupt_results_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF garbage")
    code, _, err = run_main(["inspect", str(bad)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(bad) in err
