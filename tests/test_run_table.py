"""The table ``cosim run`` prints: one decimal count per row, thousands separators, and for two runs a delta
and a ratio column that agree with the values beside them."""

from __future__ import annotations

import re

import pytest
from conftest import run_main

from cosim import results
from cosim.cli.run_table import format_value, ratio_text, row_decimals, run_table
from cosim.results.metrics import metric_for


@pytest.mark.parametrize("key,values,cells", [
    ("iteration_time_ns", [137.2e6, 138.0e6], ["137.2", "138.0"]),
    ("wall_time_s", [2.73, 3.292], ["2.730", "3.292"]),
    ("packet_hops", [14641620, 16532813], ["14,641,620", "16,532,813"]),
    ("pfc_paused_ns", [449942e3, 0.0], ["449,942", "0"]),
    ("mfu", [0.1915, 0.19344], ["0.1915", "0.1934"]),
    ("fct_slowdown_p99", [10.38, 7.9421], ["10.38", "7.94"]),
])
def test_a_row_shares_its_decimals_and_separates_thousands(key, values, cells):
    """Every value of a row has the decimals its largest value needs for 4 significant digits; counts and
    values from 1000 up carry thousands separators; an exact 0 reads 0."""
    m = metric_for(key)
    decimals = row_decimals(m, values)
    assert [format_value(m, x, decimals) for x in values] == cells


def test_delta_and_ratio_of_two_runs():
    """Two runs get delta = second - first (signed, the row's decimals) and ratio = second / first (3
    decimals, '-' when first is 0); one run gets neither column."""
    table = run_table({"roce": {"iteration_time_ns": 139.4e6, "credit_stall_ns": 0.0, "status": "complete"},
                       "ib": {"iteration_time_ns": 138.1e6, "credit_stall_ns": 1016693e3, "status": "complete"}},
                      width=200)
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "roce", "ib", "ib", "-", "roce", "ib", "/", "roce"]
    row = next(line for line in lines if line.startswith("iteration time"))
    assert row.split()[-4:] == ["139.4", "138.1", "-1.3", "0.991"]
    row = next(line for line in lines if line.startswith("credit-stall time"))
    assert row.split()[-4:] == ["0", "1,016,693", "+1,016,693", "-"]
    assert run_table({"roce": {"iteration_time_ns": 1e6}}, width=200).splitlines()[0].split() == ["metric", "roce"]
    assert ratio_text(2, 3) == "1.500" and ratio_text("complete", 1) == "-"
    faulted = run_table({"down": {"iteration_time_ns": 150e6}, "down-baseline": {"iteration_time_ns": 120e6}},
                        reference="down-baseline", width=200).splitlines()
    assert faulted[0].split() == ["metric", "down-baseline", "down", "delta", "ratio"]
    assert faulted[2].split()[-4:] == ["120.0", "150.0", "+30.0", "1.250"]
    assert faulted[-1] == "delta = down - down-baseline, ratio = down / down-baseline"


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_run_both_transports_prints_consistent_delta_and_ratio(tmp_path, capsys, engine_ns):
    """cosim run --transport both on a small incast: every numeric row has delta = ib - roce and ratio =
    ib / roce up to the printed digits, all three numbers with the same decimals."""
    out = tmp_path / "both.h5"
    code, stdout, err = run_main(["run", "--pattern", "incast", "--hosts", "5", "--flow-bytes", "256KiB",
                                  "--transport", "both", "--set", "SharedBufferMmu::BufferBytes=1000000",
                                  "-o", str(out)], capsys)
    assert code == 0, err
    assert stdout.splitlines()[0].split() == ["metric", "roce", "ib", "ib", "-", "roce", "ib", "/", "roce"]
    runs = results.read_results(out)
    assert runs["roce"].summary["pause_frames_sent"] > 0  # the RoCE run paused: rows differ
    number = r"[+-]?[0-9][0-9,]*(?:\.[0-9]+)?"
    checked = 0
    for line in stdout.splitlines():
        found = re.fullmatch(rf"(.+?)\s+({number})\s+({number})\s+({number})\s+({number}|-)", line.strip())
        if not found:
            continue
        roce, ib, delta, ratio = found.group(2, 3, 4, 5)
        decimals = {len(c.partition(".")[2]) for c in (roce, ib, delta) if _number(c) != 0 or "." in c}
        assert len(decimals) <= 1, line
        step = 10.0 ** -max(decimals | {0})
        assert _number(delta) == pytest.approx(_number(ib) - _number(roce), abs=1.01 * step), line
        if ratio != "-":
            assert _number(ratio) == pytest.approx(_number(ib) / _number(roce), rel=0.01, abs=2e-3), line
        checked += 1
    assert checked >= 10
