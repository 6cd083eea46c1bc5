"""Collective statistics in nccl-tests' terms, per communication group kind and collective kind.

A training run's ``collectives`` table holds one row per call and iteration: its kind, group kind (TP, DP,
...), member count n, size S (nccl-tests' convention: the buffer of an all-reduce, the whole gathered or
scattered buffer of an all-gather / reduce-scatter, the per-rank buffer of an all-to-all) and its start
(every member ready) and finish (last member done). From them, as nccl-tests prints them:

    time   = finish_ns − start_ns
    algbw  = S / time                                   (GB/s, 1 GB = 1e9 bytes)
    busbw  = algbw × factor(kind, n)                    all-reduce 2(n−1)/n; reduce-scatter, all-gather and
                                                        all-to-all (n−1)/n; broadcast 1

busbw is the rate the busiest link would need for the call's time; comparing it across group sizes and with
the NIC or NVLink rate is what makes it useful. Statistics are taken per (group kind, collective kind),
because a TP all-reduce (~100 µs) and a DP all-reduce (tens of ms) mixed into one percentile describe neither.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: trace GroupKind value → the lower-case name used in summary keys and tables
GROUP_KIND_NAMES = {0: "tp", 1: "cp", 2: "pp", 3: "dp", 4: "ep", 5: "edp", 6: "embd", 7: "world", 8: "other"}
#: trace CollKind value → the lower-case name used in summary keys and tables
COLL_KIND_NAMES = {1: "all_reduce", 2: "reduce_scatter", 3: "all_gather", 4: "all_to_all", 5: "broadcast"}
#: summary statistics of one (group kind, collective kind), in summary-key order
STATS = ("count", "p50_ns", "p99_ns", "busbw_gbyte_per_s")


def bus_factor(kind: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """nccl-tests' busbw / algbw factor of each call from its CollKind and member count n."""
    kind = np.asarray(kind)
    n = np.maximum(np.asarray(ranks, np.float64), 1.0)
    return np.select([kind == 1, np.isin(kind, (2, 3, 4))], [2.0 * (n - 1) / n, (n - 1) / n], default=1.0)


def call_rates(colls: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time_ns, algbw_gbyte_per_s, busbw_gbyte_per_s) of every call; nan where unfinished or untimed."""
    time_ns = np.asarray(colls["finish_ns"], np.float64) - np.asarray(colls["start_ns"], np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(time_ns > 0, np.asarray(colls["bytes"], np.float64) / time_ns, np.nan)  # B/ns = GB/s
    return time_ns, algbw, algbw * bus_factor(colls["kind"], colls["ranks"])


def collective_stats(colls: Mapping[str, np.ndarray], *, first_iteration: int = 0) -> list[dict]:
    """One dict per (group kind, collective kind) present in iterations ≥ ``first_iteration``: group, kind,
    calls, ranks (largest group), bytes_p50, time_p50_ns, time_p99_ns, time_max_ns, algbw_p50_gbyte_per_s,
    busbw_p50_gbyte_per_s (percentiles over the finished calls; counts over all calls)."""
    if not len(colls) or "group_kind" not in colls or np.asarray(colls["kind"]).size == 0:
        return []
    time_ns, algbw, busbw = call_rates(colls)
    keep = np.asarray(colls["iteration"]) >= first_iteration
    gk, ck = np.asarray(colls["group_kind"]), np.asarray(colls["kind"])
    out = []
    for g, gname in GROUP_KIND_NAMES.items():
        for c, cname in COLL_KIND_NAMES.items():
            sel = keep & (gk == g) & (ck == c)
            if not sel.any():
                continue
            done = sel & np.isfinite(time_ns)
            row = {"group": gname, "kind": cname, "calls": int(sel.sum()),
                   "ranks": int(np.asarray(colls["ranks"])[sel].max()),
                   "bytes_p50": float(np.percentile(np.asarray(colls["bytes"])[sel], 50))}
            t = time_ns[done]
            pct = lambda a, q: float(np.percentile(a, q)) if a.size else float("nan")  # noqa: E731
            row |= {"time_p50_ns": pct(t, 50), "time_p99_ns": pct(t, 99),
                    "time_max_ns": float(t.max()) if t.size else float("nan"),
                    "algbw_p50_gbyte_per_s": pct(algbw[done & np.isfinite(algbw)], 50),
                    "busbw_p50_gbyte_per_s": pct(busbw[done & np.isfinite(busbw)], 50)}
            out.append(row)
    return out


def summary_entries(stats: list[dict]) -> dict:
    """Summary keys ``coll_<group>_<kind>_{count,p50_ns,p99_ns,busbw_gbyte_per_s}`` of ``collective_stats``
    (times and busbw only where some call finished)."""
    out: dict = {}
    for row in stats:
        key = f"coll_{row['group']}_{row['kind']}"
        out[f"{key}_count"] = row["calls"]
        for name, value in (("p50_ns", row["time_p50_ns"]), ("p99_ns", row["time_p99_ns"]),
                            ("busbw_gbyte_per_s", row["busbw_p50_gbyte_per_s"])):
            if np.isfinite(value):
                out[f"{key}_{name}"] = value
    return out
