"""telemetry.queue_percentile_bytes, read in slices and bisected, against a plain sort of the whole log."""

import numpy as np
import pytest

from cosim import telemetry
from cosim.streamed import StreamedTable


def _reference(queues, n_ports, interval_ns, sim_time_ns, q=99.0):
    """Every change weighted by the samples it holds (sorted by port and time), zeros for the rest, the
    percentile read off the cumulative weight in depth order."""
    if queues["time_ns"].size == 0 or n_ports <= 0:
        return 0.0
    k = np.rint(queues["time_ns"] / interval_ns).astype(np.int64)
    n_samples = max(int(sim_time_ns // interval_ns) + 1, int(k.max()) + 1)
    key = queues["node"].astype(np.int64) * (int(queues["port"].max()) + 1) + queues["port"]
    order = np.lexsort((k, key))
    key, k, depth = key[order], k[order], queues["bytes"][order]
    nxt = np.full(k.size, n_samples)
    same = key[1:] == key[:-1]
    nxt[:-1][same] = k[1:][same]
    weight = np.maximum(nxt - k, 0)
    zeros = max(n_ports * n_samples - int(weight.sum()), 0)
    srt = np.argsort(depth, kind="stable")
    cum = np.cumsum(weight[srt])
    target = q / 100.0 * (zeros + int(cum[-1]))
    if zeros >= target:
        return 0.0
    return float(depth[srt[min(int(np.searchsorted(cum + zeros, target, side="left")), srt.size - 1)]])


def _log(rng, rows, nodes, ports, sorted_in_time):
    t = rng.integers(0, 5000, rows).astype(np.float64) * rng.choice([1.0, 0.37])
    if sorted_in_time:
        t.sort()
    return {"time_ns": t, "node": rng.integers(0, nodes, rows).astype(np.int32),
            "port": rng.integers(0, ports, rows).astype(np.int32),
            "bytes": rng.integers(0, 3, rows) * rng.integers(1, 1 << 20, rows)}


@pytest.mark.parametrize("seed", range(12))
def test_sliced_bisection_equals_a_sort_of_the_whole_log(seed, monkeypatch):
    """Random change logs, in time order (as the sampler and the merge write them) and not, read in slices
    smaller than the log: the same percentile as sorting everything, at several percentiles and port counts
    (many ports never changing puts the percentile at 0)."""
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(telemetry, "QUEUE_LOG_SLICE_ROWS", int(rng.integers(1, 50)))
    queues = _log(rng, int(rng.integers(1, 400)), int(rng.integers(1, 6)), int(rng.integers(1, 9)), seed % 3 != 0)
    for n_ports in (4, 40, 4000):
        for q in (50.0, 90.0, 99.0, 100.0):
            args = (queues, n_ports, 10.0, float(rng.integers(1, 60000)))
            assert telemetry.queue_percentile_bytes(*args, q=q) == _reference(*args, q=q)


def test_an_empty_log_is_zero():
    empty = {k: np.zeros(0) for k in ("time_ns", "node", "port", "bytes")}
    assert telemetry.queue_percentile_bytes(empty, 8, 1000.0, 1e6) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_a_streamed_log_gives_the_same_percentile(seed):
    """A log in time order given as a StreamedTable of uneven slices: the percentile of the arrays."""
    rng = np.random.default_rng(100 + seed)
    queues = _log(rng, int(rng.integers(1, 400)), int(rng.integers(1, 6)), int(rng.integers(1, 9)), True)
    n = queues["time_ns"].size
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 8))))
    bounds = [0, *cuts.tolist(), n]
    streamed = StreamedTable(n, {k: x.dtype for k, x in queues.items()},
                             lambda: ({k: x[lo:hi] for k, x in queues.items()} for lo, hi in zip(bounds, bounds[1:])))
    for q in (50.0, 99.0, 100.0):
        args = (40, 10.0, float(rng.integers(1, 60000)))
        assert telemetry.queue_percentile_bytes(streamed, *args, q=q) == _reference(queues, *args, q=q)


@pytest.mark.parametrize("seed", range(6))
def test_a_log_read_from_the_logs_it_copies_gives_the_same_percentile(seed, monkeypatch):
    """A log whose ports copy the ports of two smaller logs (each source port copied to 0 to 3 ports, as a
    fold's merge copies a part's log to every part) read through ``copied_from``: the percentile of the whole
    copied log, built row by row in time order."""
    rng = np.random.default_rng(200 + seed)
    monkeypatch.setattr(telemetry, "QUEUE_LOG_SLICE_ROWS", int(rng.integers(1, 50)))
    sources, rows = [], []
    for _ in range(2):
        log = _log(rng, int(rng.integers(1, 300)), int(rng.integers(1, 5)), int(rng.integers(1, 6)), True)
        fan = {port: int(rng.integers(0, 4)) for port in set(zip(log["node"].tolist(), log["port"].tolist()))}
        copies = np.array([fan[port] for port in zip(log["node"].tolist(), log["port"].tolist())], np.int64)
        sources.append((log, copies))
        # every copy of a source port is a port of its own: node 100 + (source, port, copy)
        copy_node = {port: 100 + 1000 * len(sources) + 10 * i for i, port in enumerate(fan)}
        for r in range(log["time_ns"].size):
            port = (int(log["node"][r]), int(log["port"][r]))
            rows += [(log["time_ns"][r], copy_node[port] + j, port[1], log["bytes"][r]) for j in range(fan[port])]
    rows.sort(key=lambda row: row[0])  # stable: a port's rows keep their order
    whole = {name: np.array([row[i] for row in rows], dtype)
             for i, (name, dtype) in enumerate((("time_ns", np.float64), ("node", np.int32), ("port", np.int32),
                                                ("bytes", np.int64)))}
    streamed = StreamedTable(len(rows), {k: x.dtype for k, x in whole.items()}, lambda: iter([whole]),
                             copied_from=sources)
    for n_ports in (4, 40, 4000):
        for q in (50.0, 90.0, 99.0, 100.0):
            args = (n_ports, 10.0, float(rng.integers(1, 60000)))
            expected = _reference(whole, *args, q=q) if rows else 0.0
            assert telemetry.queue_percentile_bytes(streamed, *args, q=q) == expected
