"""Damaged input files: every reader of results files, and `run --trace`, refuse them with one line.

Results files are damaged with h5py (dtypes, missing and extra members, links, lengths, attributes, values);
each verb that reads them (inspect, compare, plot, report, merge, run --append) exits 2 with one
``Error: FILE: runs/RUN/...: problem (fix)`` line naming the bad field, no traceback, and writes nothing.
Traces are damaged semantically (collective members, send/recv pairs), which only the full check sees.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import run_main

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"
FIX = "(the file is damaged; rerun or restore it)"


def _replace(h5, name, data):
    del h5[name]
    h5[name] = data


def _set_value(name, index, value, dtype=None):
    def damage(h5):
        data = h5[name][()].astype(dtype or h5[name].dtype)
        data[index] = value
        _replace(h5, name, data)
    return damage


def _attr(name, key, text):
    def damage(h5):
        h5[name].attrs[key] = text
    return damage


R = "runs/roce"
#: (case, damage(h5), what the one error line says after "FILE: ")
DAMAGE = [
    ("float ids", lambda h5: _replace(h5, f"{R}/flows/src", h5[f"{R}/flows/src"][()] + 0.5),
     "runs/roce/flows/src: has dtype float64, expected integers"),
    ("text times", lambda h5: _replace(h5, f"{R}/flows/fct_ns", np.array([b"x"] * 3)),
     "runs/roce/flows/fct_ns: has dtype |S1, expected floats"),
    ("missing dataset", lambda h5: h5.__delitem__(f"{R}/flows/fct_ns"), "runs/roce/flows/fct_ns: is missing"),
    ("2-D column", lambda h5: _replace(h5, f"{R}/ports/tx_bytes", h5[f"{R}/ports/tx_bytes"][()].reshape(-1, 1)),
     "runs/roce/ports/tx_bytes: has shape"),
    ("table is a dataset", lambda h5: _replace(h5, f"{R}/queues", np.arange(3)),
     "runs/roce/queues: is a dataset, expected a group"),
    ("unknown table", lambda h5: h5.create_group(f"{R}/extras"), "runs/roce/extras: is not a table of the results"),
    ("named datatype", lambda h5: h5.__setitem__(f"{R}/ports/kind", np.dtype("f8")),
     "runs/roce/ports/kind: is a named datatype, expected a dataset"),
    ("run is a dataset", lambda h5: h5.__setitem__("runs/extra", np.arange(2)),
     "runs/extra: is a dataset, expected a group"),
    ("soft-link loop column", lambda h5: _replace(h5, f"{R}/flows/src", h5py.SoftLink(f"/{R}/flows/src")),
     "runs/roce/flows/src: is a soft link to /runs/roce/flows/src, not a dataset"),
    ("soft-link loop run", lambda h5: _replace(h5, "runs/ib", h5py.SoftLink("/runs/ib")),
     "runs/ib: is a soft link to /runs/ib, not a group"),
    ("external link", lambda h5: _replace(h5, f"{R}/latency", h5py.ExternalLink("elsewhere.h5", "/latency")),
     "runs/roce/latency: is an external link to elsewhere.h5:/latency, not a group"),
    ("lengths disagree", lambda h5: _replace(h5, f"{R}/flows/fct_ns", h5[f"{R}/flows/fct_ns"][:2]),
     "runs/roce/flows/fct_ns: length 2, other columns of flows have 3"),
    ("non-JSON summary", _attr(R, "summary", "{"), "runs/roce.summary: is not valid JSON"),
    ("summary is a list", _attr(R, "summary", "[1]"), "runs/roce.summary: is a JSON list, expected an object"),
    ("config is null", _attr("runs/ib", "config", "null"), "runs/ib.config: is a JSON NoneType, expected an object"),
    ("status is a number", _attr(R, "summary", '{"status": 3}'), "runs/roce.summary['status']: is 3, expected text"),
    ("metric is text", _attr(R, "summary", '{"fct_p99_ns": "fast"}'),
     "runs/roce.summary['fct_p99_ns']: is str 'fast', expected a number"),
    ("no provenance", lambda h5: h5[R].attrs.__delitem__("provenance"), "runs/roce: has no provenance attribute"),
    ("nan in a count", _set_value(f"{R}/ports/tx_packets", 0, np.nan, np.float64),
     "runs/roce/ports/tx_packets: has dtype float64, expected integers"),
    ("nan start time", _set_value(f"{R}/flows/start_ns", 1, np.nan),
     "runs/roce/flows/start_ns: value nan at row 1, expected finite numbers"),
    ("infinite fct", _set_value(f"{R}/flows/fct_ns", 0, np.inf),
     "runs/roce/flows/fct_ns: value inf at row 0, expected finite numbers or nan (unfinished)"),
    ("negative size", _set_value(f"{R}/flows/size_bytes", 2, -1),
     "runs/roce/flows/size_bytes: value -1 at row 2 is negative, expected >= 0"),
    ("negative queue depth", _set_value(f"{R}/queues/bytes", 0, -5),
     "runs/roce/queues/bytes: value -5 at row 0 is negative"),
    ("no runs group", lambda h5: h5.__delitem__("runs"), "runs: the file has no /runs group"),
    ("runs is a dataset", lambda h5: _replace(h5, "runs", np.arange(2)), "runs: is a dataset, expected a group"),
    ("text schema version", lambda h5: h5.attrs.__setitem__("schema_version", "one"),
     "schema_version: is 'one', expected an integer"),
]

#: verb -> (argv for bad file B in folder D, the output that must not appear)
VERBS = {
    "inspect": (lambda b, d: ["inspect", str(b)], None),
    "compare": (lambda b, d: ["compare", str(b), "-o", str(d / "cmp.txt")], "cmp.txt"),
    "plot": (lambda b, d: ["plot", str(b), "-o", str(d / "figs")], "figs"),
    "report": (lambda b, d: ["report", str(b), "-o", str(d / "r.html")], "r.html"),
    "merge": (lambda b, d: ["merge", str(d), "-o", str(d / "merged.h5")], "merged.h5"),
    "run --append": (lambda b, d: ["run", "--hosts", "4", "--flow-bytes", "16KiB", "--append", "--name", "new",
                                   "-q", "-o", str(b)], None),
}


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize("case,damage,needle", DAMAGE, ids=[c for c, _, _ in DAMAGE])
def test_damaged_results_file_is_one_line_exit_2(valid_results, tmp_path, capsys, case, damage, needle, verb):
    """Each reader of results files refuses a damaged one before doing anything (compare: one whose
    structure or summaries are damaged; it reads no table's values): exit 2, one
    ``Error: FILE: FIELD: problem (fix)`` line naming the damaged field, no traceback, nothing written
    (run --append leaves the file byte for byte as it was, merge writes no merged file)."""
    bad = tmp_path / "bad.h5"
    shutil.copy(valid_results, bad)
    with h5py.File(bad, "r+") as h5:
        damage(h5)
    before = bad.read_bytes()
    argv, product = VERBS[verb]
    code, out, err = run_main(argv(bad, tmp_path), capsys)
    lines = err.strip().splitlines()
    if verb == "compare" and " value " in needle:
        # compare answers from the summaries and reads no table value (only every table's structure), as
        # plot reads only the tables its figures draw: a bad value it never reads leaves its answer intact
        assert code == 0 and (tmp_path / product).exists(), err
        return
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bad}: {needle}"), err
    assert "Traceback" not in out + err
    if "schema_version" not in needle and "not a cosim" not in needle:
        assert lines[0].endswith(FIX), err
    assert bad.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.h5"], "something was written"
    if product:
        assert not (tmp_path / product).exists()


@pytest.mark.parametrize("column,row", [("finish_ns", 0), ("fct_ns", 1), ("slowdown", 2)])
def test_nan_where_documented_is_read(valid_results, tmp_path, column, row, capsys):
    """nan is allowed where the schema documents it (a flow that did not finish) and reads back as nan."""
    from cosim import results

    f = tmp_path / "unfinished.h5"
    shutil.copy(valid_results, f)
    with h5py.File(f, "r+") as h5:
        _set_value(f"{R}/flows/{column}", row, np.nan)(h5)
    assert np.isnan(results.read_results(f)["roce"].flows[column][row])
    code, _, err = run_main(["inspect", str(f)], capsys)
    assert code == 0, err


# ---------------------------------------------------------------- traces


def _collective_members(trace):
    ops = np.flatnonzero(trace.kind == 1)  # OpKind.COLLECTIVE
    first = ops[0]
    return first, ops[trace.coll_id[ops] == trace.coll_id[first]]


def _bump_bytes(h5, trace):
    """One member of a collective gets a different size from the others."""
    first, members = _collective_members(trace)
    data = h5["ops/bytes"][()]
    data[members[-1]] += 1024
    h5["ops/bytes"][...] = data


def _drop_member(h5, trace):
    """One member of a collective is turned into a compute op: the call misses a rank."""
    first, members = _collective_members(trace)
    for col, value in (("kind", 0), ("group", -1), ("coll_kind", 0), ("coll_id", -1), ("bytes", 0)):
        data = h5[f"ops/{col}"][()]
        data[members[-1]] = value
        h5[f"ops/{col}"][...] = data


def _send_size(h5, trace):
    """A send and its recv disagree on the size."""
    send = int(np.flatnonzero(trace.kind == 2)[0])  # OpKind.SEND
    data = h5["ops/bytes"][()]
    data[send] += 1
    h5["ops/bytes"][...] = data


TRACE_DAMAGE = [
    ("collective sizes differ", _bump_bytes, "trace.bytes: members of collective"),
    ("collective misses a member", _drop_member, "trace.coll_id: collective"),
    ("send and recv sizes differ", _send_size, "trace.bytes: send op"),
]


@pytest.mark.parametrize("case,damage,needle", TRACE_DAMAGE, ids=[c for c, _, _ in TRACE_DAMAGE])
def test_semantically_damaged_trace_is_refused_before_simulating(tmp_path, capsys, case, damage, needle, engine_ns):
    """`cosim run --trace` runs the full trace check (sends match recvs in size; every collective has
    each member of its group, all of one size) before simulating: a trace that reads but does not
    hold together is one line naming the file and the field, exit 2, no results file."""
    from cosim.workload.trace import read_trace

    trace = read_trace(TRACE)
    bad = tmp_path / "bad-trace.h5"
    shutil.copy(TRACE, bad)
    with h5py.File(bad, "r+") as h5:
        damage(h5, trace)
    read_trace(bad)  # the structure still reads: only the semantic check can see the damage
    out = tmp_path / "r.h5"
    code, stdout, err = run_main(["run", "--trace", str(bad), "--transport", "both", "-q", "-o", str(out)], capsys)
    lines = err.strip().splitlines()
    assert code == 2, (stdout, err)
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bad}: {needle}"), err
    assert "Traceback" not in err and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad-trace.h5"]
