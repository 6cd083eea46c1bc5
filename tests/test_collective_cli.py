"""``cosim collective``: nccl-tests' columns on a tiny sweep, a readable results file, one-line errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import help_output_loading_nothing_heavy, run_main

from cosim import results
from cosim.sweep.collective import parse_sizes


def _nccl_tests_parse(stdout: str) -> tuple[list[list[str]], list[float]]:
    """What scripts written for nccl-tests do: skip '#' lines, split the others on blanks (13 columns: size,
    count, type, redop, root, then time, algbw, busbw, #wrong out of place and in place), and read each
    '# Avg bus bandwidth    : X' line."""
    rows = [line.split() for line in stdout.splitlines() if line.strip() and not line.startswith("#")]
    avg = [float(m.group(1)) for m in re.finditer(r"^# Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", stdout, re.M)]
    return rows, avg


def test_tiny_sweep_prints_nccl_tests_format_and_writes_hdf5(tmp_path, capsys):
    """Two sizes on 16 ranks (2 servers), both transports, read as nccl-tests output: every non-data line is
    '#'-prefixed, each row has nccl-tests' 13 columns with busbw = algbw x 2(n-1)/n, the algorithm and the
    transport come after them, and each table closes with its mean busbw."""
    out = tmp_path / "ar.h5"
    code, stdout, err = run_main(["collective", "--sizes", "64KiB..256KiB:4", "--ranks", "16", "--transport", "both",
                                  "-o", str(out)], capsys)
    assert code == 0, err
    for column in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "(us)", "(GB/s)"):
        assert column in stdout
    rows, avg = _nccl_tests_parse(stdout)
    assert [(r[14], int(r[0])) for r in rows] == [("roce", 65536), ("roce", 262144), ("ib", 65536), ("ib", 262144)]
    for r in rows:
        assert len(r) == 15 and int(r[1]) == int(r[0]) // 4 and r[2:5] == ["float", "sum", "-1"]
        time_us, algbw, busbw = map(float, r[5:8])
        assert r[8] == r[12] == "N/A" and r[9:12] == r[5:8]
        assert algbw == pytest.approx(int(r[0]) / (time_us * 1e3), rel=1e-2)
        assert busbw == pytest.approx(algbw * 2 * 15 / 16, rel=1e-2)
    assert len(avg) == 2
    for mean, transport in zip(avg, ("roce", "ib")):
        assert mean == pytest.approx(np.mean([float(r[7]) for r in rows if r[14] == transport]), abs=0.01)
    runs = results.read_results(out)
    assert sorted(runs) == sorted(f"all_reduce-{s}B-{t}" for s in (65536, 262144) for t in ("roce", "ib"))
    run = runs["all_reduce-65536B-roce"]
    assert run.summary["status"] == "complete" and run.summary["collective_size_bytes"] == 65536
    assert np.all(np.asarray(run.collectives["bytes"]) == 65536) and len(run.flows["src"]) > 0


def test_all_to_all_across_servers_uses_pxn(capsys):
    """auto all-to-all on 2 servers is PXN; in-server it is direct (nothing to relay)."""
    code, stdout, err = run_main(["collective", "--op", "all_to_all", "--sizes", "1MiB", "--ranks", "16"], capsys)
    assert code == 0, err
    rows, _ = _nccl_tests_parse(stdout)
    assert [r[13] for r in rows] == ["pxn"] and rows[0][3:5] == ["none", "-1"]
    code, stdout, _ = run_main(["collective", "--op", "all_to_all", "--sizes", "1MiB", "--ranks", "8"], capsys)
    rows, _ = _nccl_tests_parse(stdout)
    assert code == 0 and [r[13] for r in rows] == ["direct"]


@pytest.mark.parametrize("args,field", [
    (["--sizes", "1MiB..1KiB"], "--sizes"),
    (["--sizes", "lots"], "--sizes"),
    (["--gpu", "tpu9"], "hardware"),
    (["--algorithm", "rings"], "algorithm"),
    (["--ranks", "1"], "--ranks"),
    (["--channels", "0"], "--channels"),
    (["--set", "seed=3"], "--seed"),
    (["--set", "network.link_gbps=100"], "--link-gbps"),
    (["--set", "workload.model=llama2-7b"], "workload.model"),
    (["--set", "network.routing=bogus"], "network.routing"),
])
def test_bad_input_is_one_line_exit_2(args, field, capsys, tmp_path):
    """Bad input: one 'Error:' line naming the field, exit 2, no file."""
    out = tmp_path / "x.h5"
    code, _, err = run_main(["collective", *args, "-o", str(out)], capsys)
    assert code == 2 and err.startswith("Error:") and field in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_set_reaches_the_fabric(tmp_path, capsys):
    """``--set network.link_delay_ns`` slows the call by at least the added delay on the two links
    (NIC-switch, switch-NIC) every cross-server transfer crosses; the stored run records the value."""
    times = {}
    for delay_ns in (1000, 5000):
        out = tmp_path / f"d{delay_ns}.h5"
        code, stdout, err = run_main(["collective", "--sizes", "64KiB", "--ranks", "16", "-o", str(out),
                                      "--set", f"network.link_delay_ns={delay_ns}"], capsys)
        assert code == 0, err
        times[delay_ns] = float(_nccl_tests_parse(stdout)[0][0][5])
        run = results.read_results(out)["all_reduce-65536B-roce"]
        assert run.config["experiment"]["network"]["link_delay_ns"] == delay_ns
    assert times[5000] - times[1000] >= 2 * 4.0


def test_sizes_grammar():
    """LOW..HIGH doubles, :F sets the factor, commas list sizes."""
    assert parse_sizes("1KiB..8KiB") == (1024, 2048, 4096, 8192)
    assert parse_sizes("1MiB..1GiB:32") == (1 << 20, 32 << 20, 1 << 30)
    assert parse_sizes("4096, 1MiB") == (4096, 1 << 20)


def test_help_teaches_and_loads_nothing_heavy():
    text = help_output_loading_nothing_heavy([["collective"]])
    assert "busbw" in text and "cosim collective --op all_reduce" in text
