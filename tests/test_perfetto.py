"""``cosim export --perfetto``: the Chrome Trace Event JSON of real co-simulated and flow runs.

Every slice must be its stored op, collective, iteration or flow to the picosecond; tracks must nest (what
Perfetto accepts); counters must be the stored samples; bad input is one line and exit code 2.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from conftest import help_output_loading_nothing_heavy, run_main

from cosim.analysis.perfetto import assign_lanes, rank_list
from cosim.results import read_results
from cosim.workload.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"
OTHER_TRACE = ROOT / "traces" / "llama2-7b-2l_dp8-zero1.h5"
GPS = 4


@pytest.fixture(scope="module")
def training_file(tmp_path_factory, engine_ns):
    """TP2 x PP2 x DP2 on 2 servers of 4 GPUs, 2 iterations, on RoCE and InfiniBand."""
    path = tmp_path_factory.mktemp("perfetto") / "train.h5"
    here = os.getcwd()
    os.chdir(ROOT)  # the run stores the trace path as given: relative, as users type it
    try:
        code = _main(["run", "--trace", str(TRACE.relative_to(ROOT)), "--gpus-per-server", str(GPS),
                      "--transport", "both", "--iterations", "2", "-q", "-o", str(path)])
    finally:
        os.chdir(here)
    assert code == 0
    return path


@pytest.fixture(scope="module")
def flow_file(tmp_path_factory, engine_ns):
    """A 3-to-1 incast on a shallow-buffer switch without DCQCN: PFC pauses (roce), credit stalls (ib)."""
    path = tmp_path_factory.mktemp("perfetto") / "incast.h5"
    code = _main(["run", "--pattern", "incast", "--hosts", "4", "--flow-bytes", "1MB", "--no-dcqcn",
                  "--set", "SharedBufferMmu::BufferBytes=2000000", "--transport", "both", "-q", "-o", str(path)])
    assert code == 0
    return path


def _main(args) -> int:
    from cosim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def export(path, out, *args) -> dict:
    """Run ``cosim export --perfetto`` and load the JSON with exact decimals."""
    assert _main(["export", "--perfetto", str(path), "-o", str(out), "-q", *args]) == 0
    opener = gzip.open if str(out).endswith(".gz") else open
    with opener(out, "rt") as f:
        return json.load(f, parse_float=Decimal)


def ps(ns: float) -> int:
    return int(round(float(ns) * 1000))


def ends_ps(event) -> tuple[int, int]:
    """[ts, ts + dur] of an X event in integer picoseconds (exact: written with six decimals of µs)."""
    ts, dur = Decimal(event["ts"]), Decimal(event["dur"])
    start, finish = ts * 1_000_000, (ts + dur) * 1_000_000
    assert start == int(start) and finish == int(finish)
    return int(start), int(finish)


def by_run(doc) -> tuple[dict[str, int], dict[tuple[int, int], str], list[dict], list[dict]]:
    """(run name → pid, (pid, tid) → thread name, X events, C events)."""
    ev = doc["traceEvents"]
    pids = {e["args"]["name"]: e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    return pids, threads, [e for e in ev if e["ph"] == "X"], [e for e in ev if e["ph"] == "C"]


@pytest.fixture(scope="module")
def training_doc(training_file, tmp_path_factory):
    return export(training_file, tmp_path_factory.mktemp("out") / "train.json", "--ports", "all", "--all-samples")


def test_every_op_is_one_slice_with_its_stored_start_and_finish(training_file, training_doc):
    """Per run, each (iteration, trace op) is exactly one slice on a track of its rank, [ts, ts+dur] its
    stored [start, finish] to the picosecond; slice counts per rank equal op counts per rank."""
    pids, threads, xs, _ = by_run(training_doc)
    for name, rec in read_results(training_file).items():
        ops = rec.ops
        want = {(int(i), int(t)): (ps(s), ps(f), int(r)) for i, t, s, f, r in
                zip(ops["iteration"], ops["trace_op"], ops["start_ns"], ops["finish_ns"], ops["rank"])}
        got = {}
        per_rank = Counter()
        for e in xs:
            if e["pid"] != pids[name] or e["cat"] != "ops":
                continue
            key = (e["args"]["iteration"], e["args"]["trace_op"])
            assert key not in got
            got[key] = ends_ps(e)
            rank = int(threads[(e["pid"], e["tid"])].split()[1])
            assert rank == want[key][2]
            per_rank[rank] += 1
        assert got == {k: v[:2] for k, v in want.items()}
        assert per_rank == Counter(ops["rank"].tolist())


def test_collectives_and_iterations_are_their_table_rows(training_file, training_doc):
    """Collective calls sit on their group's track with kind, bytes and members; iterations on one track."""
    pids, threads, xs, _ = by_run(training_doc)
    trace = read_trace(TRACE)
    for name, rec in read_results(training_file).items():
        c = rec.collectives
        want = {(int(i), int(k)): (ps(s), ps(f), int(g), int(b)) for i, k, s, f, g, b in
                zip(c["iteration"], c["coll_id"], c["start_ns"], c["finish_ns"], c["group"], c["bytes"])}
        got = {}
        for e in xs:
            if e["pid"] == pids[name] and e["cat"] == "collectives":
                a = e["args"]
                got[(a["iteration"], a["coll_id"])] = (*ends_ps(e), a["group"], a["bytes"])
                g = a["group"]
                members = trace.group_ranks[trace.group_ptr[g]:trace.group_ptr[g + 1]]
                assert a["members"] == rank_list(members.tolist())
                assert f"group {g} (ranks {a['members']})" in threads[(e["pid"], e["tid"])]
        assert got == want
        its = [e for e in xs if e["pid"] == pids[name] and e["cat"] == "iterations"]
        assert sorted(ends_ps(e) for e in its) == sorted(
            (ps(s), ps(f)) for s, f in zip(rec.iterations["start_ns"], rec.iterations["finish_ns"]))
        assert {threads[(e["pid"], e["tid"])] for e in its} <= {"iterations", "iterations #2"}


def test_ops_are_named_by_kind_group_and_placed_by_path(training_doc):
    """Compute slices carry the trace label; collectives are 'KIND GROUP'; a collective within one server
    or a send/recv to a GPU of the same server is on the NVLink track, every other one on network."""
    trace = read_trace(TRACE)
    _, threads, xs, _ = by_run(training_doc)
    server = lambda r: r // GPS  # noqa: E731
    seen = Counter()
    for e in (x for x in xs if x["cat"] == "ops"):
        op = e["args"]["trace_op"]
        track = threads[(e["pid"], e["tid"])]
        rank = int(track.split()[1])
        kind = int(trace.kind[op])
        if kind == 0:
            parts = trace.label_of(op).split("/")
            assert " compute" in track and e["name"] == f"{parts[0]}/{parts[-1]}"
            assert e["args"]["label"] == trace.label_of(op)
            continue
        g = int(trace.group[op])
        group = trace.group_ranks[trace.group_ptr[g]:trace.group_ptr[g + 1]]
        word = ["TP", "CP", "PP", "DP", "EP", "EDP", "EMBD", "WORLD", "OTHER"][int(trace.group_kind[g])]
        if kind == 1:
            local = len({server(int(r)) for r in group}) == 1
            kind_word = {1: "all_reduce", 2: "reduce_scatter", 3: "all_gather", 4: "all_to_all",
                         5: "broadcast"}[int(trace.coll_kind[op])]
            assert e["name"] == f"{kind_word} {word}"
        else:
            local = server(int(trace.peer[op])) == server(rank)
            assert e["name"] == f"{'send' if kind == 2 else 'recv'} {word}"
            assert e["args"]["peer"] == int(trace.peer[op])
        assert e["args"]["bytes"] == int(trace.bytes[op])
        assert (" NVLink" in track) == local and (" network" in track) == (not local)
        seen[(kind, local)] += 1
    # the scenario has both kinds of path
    assert seen[(1, True)] and seen[(1, False)] and (seen[(2, True)] + seen[(2, False)])


def _check_nesting(xs) -> int:
    """Slices of one (pid, tid) never partially overlap (Perfetto's rule); return the number of tracks."""
    tracks = defaultdict(list)
    for e in xs:
        tracks[(e["pid"], e["tid"])].append(ends_ps(e))
    for key, spans in tracks.items():
        stack: list[int] = []
        for start, finish in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or finish <= stack[-1], f"track {key}: slice [{start}, {finish}] crosses its parent"
            stack.append(finish)
    return len(tracks)


def test_tracks_nest_and_every_track_is_named(training_doc, flow_file, tmp_path):
    """No partial overlap on any track, and every process and thread used by an event has a name."""
    flow_doc = export(flow_file, tmp_path / "f.json")
    for doc in (training_doc, flow_doc):
        pids, threads, xs, cs = by_run(doc)
        assert _check_nesting(xs) == len({(e["pid"], e["tid"]) for e in xs})
        assert {(e["pid"], e["tid"]) for e in xs} <= set(threads)
        assert {e["pid"] for e in xs + cs} <= set(pids.values())
        for pid in pids.values():  # names tell the tracks of a run apart
            names = [n for (p, _), n in threads.items() if p == pid]
            assert len(set(names)) == len(names)
    _, threads, _, _ = by_run(training_doc)
    assert any("#2" in t for t in threads.values())  # overlapping communication got a second lane


@pytest.mark.parametrize("intervals,lanes", [
    ([(0, 0, 5), (0, 5, 9), (0, 9, 9)], [0, 0, 0]),            # touching ends share a lane
    ([(0, 0, 10), (0, 2, 4), (0, 3, 12)], [0, 1, 2]),          # three at once: three lanes
    ([(0, 0, 10), (0, 2, 4), (0, 5, 6)], [0, 1, 1]),           # the freed lane is reused
    ([(1, 0, 10), (2, 2, 4), (1, 10, 11)], [0, 0, 0]),         # tracks are independent
])
def test_assign_lanes_table(intervals, lanes):
    """Greedy interval partitioning: lowest free lane, no overlap on one (track, lane)."""
    t, s, f = (np.array(c, np.int64) for c in zip(*intervals))
    assert assign_lanes(t, s, f).tolist() == lanes


def test_assign_lanes_is_a_partition_with_the_fewest_lanes():
    """Random intervals: lanes never overlap and their number is the peak concurrency."""
    rng = np.random.default_rng(1)
    start = rng.integers(0, 1000, 2000)
    finish = start + rng.integers(0, 60, 2000)
    track = rng.integers(0, 5, 2000)
    lane = assign_lanes(track, start, finish)
    for k in range(5):
        m = track == k
        for ln in np.unique(lane[m]):
            sel = m & (lane == ln)
            o = np.lexsort((finish[sel], start[sel]))
            assert np.all(start[sel][o][1:] >= finish[sel][o][:-1])
        grid = np.arange(1000)
        busy = ((start[m][:, None] <= grid) & (grid < finish[m][:, None])).sum(axis=0)
        assert lane[m].max() + 1 == max(busy.max(), 1)


def test_queue_counters_are_the_stored_samples_with_port_names(flow_file, tmp_path):
    """--ports all: one counter track per sampled port, named switch/peer, holding exactly its samples."""
    doc = export(flow_file, tmp_path / "q.json", "--ports", "all")
    pids, _, _, cs = by_run(doc)
    for name, rec in read_results(flow_file).items():
        q, ports = rec.queues, rec.ports
        peer = {(int(n), int(p)): int(r) for n, p, r in zip(ports["node"], ports["port"], ports["peer"])}
        hosts = rec.config["fabric"]["n_hosts"]
        label = lambda n: f"host{n}" if n < hosts else f"switch{n - hosts}"  # noqa: E731
        want = defaultdict(list)
        for t, n, p, b in zip(q["time_ns"], q["node"], q["port"], q["bytes"]):
            want[f"queue {label(int(n))} p{int(p)}→{label(peer[(int(n), int(p))])}"].append((ps(t), int(b)))
        got = defaultdict(list)
        for e in cs:
            if e["pid"] == pids[name] and e["name"].startswith("queue "):
                got[e["name"]].append((int(Decimal(e["ts"]) * 1_000_000), e["args"]["bytes"]))
        assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}


def _state_count_series(table, sub: str, flag: str) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Reference: after each event of (node, port), how many of its ``sub`` are in state 1 (last per time)."""
    state: dict[tuple[int, int, int], int] = {}
    out: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    rows = sorted(zip(table["time_ns"], table["node"], table["port"], table[sub], table[flag]),
                  key=lambda r: r[0])
    for t, n, p, s, v in rows:
        state[(int(n), int(p), int(s))] = int(v != 0)
        out[(int(n), int(p))][ps(t)] = sum(x for (a, b, _), x in state.items() if (a, b) == (int(n), int(p)))
    return {k: sorted(v.items()) for k, v in out.items()}


@pytest.mark.parametrize("run,table,sub,flag,prefix,arg", [
    ("roce", "pauses", "priority", "paused", "PFC paused", "priorities"),
    ("ib", "stalls", "vl", "stalled", "credit stall", "vls"),
])
def test_pause_and_stall_counters_count_paused_priorities_and_stalled_lanes(flow_file, tmp_path, run, table, sub,
                                                                           flag, prefix, arg):
    """The PFC (RoCE) and credit-stall (InfiniBand) counters are the number of paused priorities / stalled
    virtual lanes of each port after each stored event."""
    doc = export(flow_file, tmp_path / "p.json", "--ports", "all", "--run", run)
    pids, _, _, cs = by_run(doc)
    rec = read_results(flow_file)[run]
    want = _state_count_series(rec.table(table), sub, flag)
    assert want, f"the {run} incast must have {table}"
    got = defaultdict(list)
    for e in cs:
        if e["name"].startswith(prefix + " "):
            got[e["name"]].append((int(Decimal(e["ts"]) * 1_000_000), e["args"][arg]))
    assert sorted(sorted(v) for v in got.values()) == sorted(want.values())
    assert list(pids) == [run]


def test_ports_limit_keeps_the_busiest_queues(training_file, training_doc, tmp_path):
    """--ports 3: the 3 queues with the largest bytes x time held; the default keeps at most 8; --ports 0
    exports no counter at all."""
    rec = read_results(training_file)["roce"]
    sampled = len({(int(n), int(p)) for n, p in zip(rec.queues["node"], rec.queues["port"])})
    every_samples = [e for e in by_run(training_doc)[3] if e["name"].startswith("queue ") and e["pid"] == 1]
    every = {e["name"] for e in every_samples}
    assert len(every) == sampled > 3
    few = {e["name"] for e in by_run(export(training_file, tmp_path / "d.json", "--run", "roce", "--ports", "3"))[3]
           if e["name"].startswith("queue ")}
    assert len(few) == 3 and few < every
    default = {e["name"] for e in by_run(export(training_file, tmp_path / "e.json", "--run", "roce"))[3]}
    assert len(default) == min(8, sampled)
    end = ps(rec.summary["sim_time_ns"])
    series = defaultdict(list)
    for e in every_samples:
        series[e["name"]].append((int(Decimal(e["ts"]) * 1_000_000), e["args"]["bytes"]))

    def area(name):
        pts = sorted(series[name])
        return sum(b * ((pts[i + 1][0] if i + 1 < len(pts) else end) - t) for i, (t, b) in enumerate(pts))

    assert min(area(n) for n in few) >= max(area(n) for n in every - few)
    assert not by_run(export(training_file, tmp_path / "n.json", "--ports", "0"))[3]


def test_flow_run_exports_flows_per_source_host(flow_file, tmp_path):
    """A flow run: one slice per flow on its source host's track, [start, finish] exact, size in args."""
    doc = export(flow_file, tmp_path / "f.json")
    pids, threads, xs, _ = by_run(doc)
    for name, rec in read_results(flow_file).items():
        f = rec.flows
        mine = [e for e in xs if e["pid"] == pids[name]]
        assert len(mine) == f["src"].size and all(e["cat"] == "flows" for e in mine)
        got = sorted((e["args"]["src"], *ends_ps(e), e["args"]["size_bytes"]) for e in mine)
        assert got == sorted((int(s), ps(a), ps(b), int(z)) for s, a, b, z in
                             zip(f["src"], f["start_ns"], f["finish_ns"], f["size_bytes"]))
        assert all(threads[(e["pid"], e["tid"])].startswith(f"flows from host{e['args']['src']}") for e in mine)
        assert {e["name"] for e in mine} == {"flow → host0"}


def test_a_run_cut_by_its_time_limit_ends_unfinished_work_at_the_end(tmp_path, capsys):
    """Ops and iterations that started but did not finish last to the end of the simulation, named
    '(unfinished)' with "unfinished": true; ops that never started are left out."""
    cut = tmp_path / "cut.h5"
    code, _, err = run_main(["run", "--trace", str(OTHER_TRACE), "--gpus-per-server", str(GPS),
                             "--max-sim-time-ms", "30", "-q", "-o", str(cut)], capsys)
    assert code == 1 and "time-limit" in err
    rec = read_results(cut)["roce"]
    end = ps(rec.summary["sim_time_ns"])
    _, _, xs, _ = by_run(export(cut, tmp_path / "cut.json"))
    started = np.isfinite(rec.ops["start_ns"])
    running = started & ~np.isfinite(rec.ops["finish_ns"])
    ops = [e for e in xs if e["cat"] == "ops"]
    assert len(ops) == started.sum() < rec.ops["start_ns"].size
    late = [e for e in xs if e["args"].get("unfinished")]
    assert len([e for e in late if e["cat"] == "ops"]) == running.sum() > 0
    assert all(e["name"].endswith(" (unfinished)") and ends_ps(e)[1] == end for e in late)
    assert [e["cat"] for e in late if e["cat"] != "ops"] == ["iterations"]
    _check_nesting(xs)


def test_output_is_deterministic_and_gzip_holds_the_same_json(flow_file, tmp_path):
    """Two exports are byte-identical; a .gz output decompresses to the plain output."""
    a, b, z = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json.gz"
    for out in (a, b, z):
        export(flow_file, out)
    assert a.read_bytes() == b.read_bytes()
    assert gzip.decompress(z.read_bytes()) == a.read_bytes()
    export(flow_file, tmp_path / "d.json.gz")
    assert (tmp_path / "d.json.gz").read_bytes() == z.read_bytes()
    doc = json.loads(a.read_text())
    assert doc["displayTimeUnit"] == "ns" and doc["otherData"]["runs"] == ["roce", "ib"]


def test_without_the_runs_trace_ops_are_named_by_kind(training_file, tmp_path, capsys):
    """A trace that is not the run's (here: another model's) is refused with a note; every op is still a
    slice, named by kind, and sends/receives go to the 'comm' track."""
    code, out, _ = run_main(["export", "--perfetto", str(training_file), "-o", str(tmp_path / "t.json"),
                             "--run", "roce", "--trace", str(OTHER_TRACE)], capsys)
    assert code == 0 and "does not match" in out
    _, threads, xs, _ = by_run(json.loads((tmp_path / "t.json").read_text()))
    ops = [e for e in xs if e["cat"] == "ops"]
    assert len(ops) == read_results(training_file)["roce"].ops["rank"].size
    assert {e["name"] for e in ops} >= {"compute forward", "compute backward", "all_reduce", "send", "recv"}
    assert any(t.endswith(" comm") for t in threads.values())


def test_stored_trace_path_is_found_beside_the_results_file(training_file, tmp_path, monkeypatch, capsys):
    """The stored trace path is relative to where 'cosim run' ran; run elsewhere, the export also looks beside
    the results file."""
    shutil.copy(training_file, tmp_path / "train.h5")
    (tmp_path / "traces").mkdir()
    shutil.copy(TRACE, tmp_path / "traces" / TRACE.name)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, _ = run_main(["export", "--perfetto", str(tmp_path / "train.h5"), "--run", "ib"], capsys)
    assert code == 0 and "note" not in out
    assert b"all_reduce TP" in (tmp_path / "train.pftrace").read_bytes()  # the default: Perfetto's protobuf


@pytest.mark.parametrize("args,message", [
    (["--perfetto", "{trace}"], "not a cosim results file"),
    (["--perfetto", "{missing}"], "no such file"),
    (["--perfetto", "{flows}", "--run", "nope"], "no run 'nope'"),
    (["{flows}"], "choose an export format: --perfetto"),
    (["--perfetto", "{flows}", "--ports", "-1"], "negative"),
    (["--perfetto", "{flows}", "--ports", "some"], "neither a whole number nor 'all'"),
    (["--perfetto", "{flows}", "-o", "{flows}"], "is the results file itself"),
])
def test_bad_input_is_one_line_and_exit_2(flow_file, tmp_path, capsys, args, message):
    """Not a results file, a missing one, an unknown run, no format, a bad --ports: 'Error: ...', exit 2, and
    no output file."""
    out = tmp_path / "x.json"
    fill = {"trace": str(TRACE), "missing": str(tmp_path / "none.h5"), "flows": str(flow_file)}
    argv = ["export", *(a.format(**fill) for a in args)]
    if "-o" not in argv:
        argv += ["-o", str(out)]
    code, stdout, err = run_main(argv, capsys)
    assert code == 2 and message in err
    assert err.startswith("Error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".x.json*"))


def test_help_teaches_and_loads_nothing_heavy():
    """'cosim export --help' names the format and the tracks without importing numpy, h5py or cppyy."""
    text = help_output_loading_nothing_heavy([["export"]])
    assert "--perfetto" in text and "ui.perfetto.dev" in text and "--ports" in text


def _trace_processor_shell() -> str | None:
    path = os.environ.get("COSIM_TRACE_PROCESSOR") or shutil.which("trace_processor_shell") \
        or shutil.which("trace_processor")
    return path if path and os.access(path, os.X_OK) else None


@pytest.mark.skipif(_trace_processor_shell() is None, reason="no trace_processor binary (set COSIM_TRACE_PROCESSOR)")
def test_perfettos_trace_processor_imports_every_slice_and_counter(training_file, tmp_path):
    """Optional: Perfetto's own importer (the perfetto package with a local trace_processor binary, never
    downloaded) reads every slice and counter sample without an import error."""
    tp_api = pytest.importorskip("perfetto.trace_processor")
    doc = export(training_file, tmp_path / "tp.json")
    _, _, xs, cs = by_run(doc)
    config = tp_api.TraceProcessorConfig(bin_path=_trace_processor_shell())
    tp = tp_api.TraceProcessor(trace=str(tmp_path / "tp.json"), config=config)
    try:
        assert next(iter(tp.query("select count(*) as n from slice"))).n == len(xs)
        assert next(iter(tp.query("select count(*) as n from counter"))).n == len(cs)
        errors = [(r.name, r.value) for r in tp.query(
            "select name, value from stats where severity in ('error', 'data_loss') and value > 0")]
        assert not errors
    finally:
        tp.close()
