"""Results files: one HDF5 file per experiment, one group per named run.

Schema ``cosim.results`` version 1::

    /                      attrs: schema="cosim.results", schema_version=1, cosim_version, created_utc
    /runs/<name>/          attrs: config (JSON), provenance (JSON: cosim_version, ns3_version, seed,
                                  wall_time_s, python, host), summary (JSON: scalars, units in names)
    /runs/<name>/flows/    src, dst (node ids), size_bytes [B], start_ns, finish_ns [ns] (nan: unfinished),
                           delivered_bytes [B], fct_ns [ns]
    /runs/<name>/queues/   time_ns [ns], node, port, bytes [B]: egress-queue depth changes, sampled
    /runs/<name>/ports/    node, port, peer, tx_bytes [B], tx_packets, drops, peak_queue_bytes [B], paused_ps
    /runs/<name>/pauses/   time_ns, node, port, priority, paused: PFC pause (1) / resume (0) events
    /runs/<name>/latency/  low_ns, count: receive-latency histogram, 8 log buckets per octave (p99.9
                           recoverable within ~9% without storing every packet)
    /runs/<name>/stalls/   time_ns, node, port, vl, stalled: InfiniBand credit-stall start (1) / end (0)
                           events of an egress port and virtual lane (IB runs only)
    /runs/<name>/ops/      co-simulation runs only: one row per trace op per iteration: iteration, trace_op,
                           rank, kind, phase, coll_id, start_ns, finish_ns [ns]
    /runs/<name>/collectives/  co-simulation: one row per collective call per iteration: iteration, coll_id,
                           kind, group, bytes [B], algorithm, start_ns, finish_ns [ns]
    /runs/<name>/iterations/   co-simulation: iteration, start_ns, finish_ns, time_ns [ns],
                           exposed_comm_ns [ns]

Groups a run does not produce are absent from the file and read back as empty tables.

Every dataset has ``units`` and ``description`` attributes; bulk data is chunked and compressed.
Files are written under a temporary name and renamed when complete (cosim.h5io.atomic_output).
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cosim import __version__
from cosim.errors import CosimInputError
from cosim.h5io import atomic_output

SCHEMA = "cosim.results"
SCHEMA_VERSION = 1

#: (group, dataset) -> (units, description)
DATASETS: dict[tuple[str, str], tuple[str, str]] = {
    ("flows", "src"): ("", "source host node id"),
    ("flows", "dst"): ("", "destination host node id"),
    ("flows", "size_bytes"): ("B", "payload bytes of the flow"),
    ("flows", "start_ns"): ("ns", "time the sender may start"),
    ("flows", "finish_ns"): ("ns", "time the last payload byte arrived (nan: unfinished)"),
    ("flows", "delivered_bytes"): ("B", "payload bytes delivered to the receiver"),
    ("flows", "fct_ns"): ("ns", "flow completion time, finish_ns - start_ns"),
    ("queues", "time_ns"): ("ns", "sample time"),
    ("queues", "node"): ("", "switch node id"),
    ("queues", "port"): ("", "egress port number at the node"),
    ("queues", "bytes"): ("B", "queued wire bytes (recorded when it changed since the last sample)"),
    ("ports", "node"): ("", "node id owning the egress port"),
    ("ports", "port"): ("", "port number at the node"),
    ("ports", "peer"): ("", "node id at the far end of the link"),
    ("ports", "tx_bytes"): ("B", "wire bytes transmitted"),
    ("ports", "tx_packets"): ("", "packets transmitted"),
    ("ports", "drops"): ("", "packets dropped"),
    ("ports", "peak_queue_bytes"): ("B", "largest egress queue seen"),
    ("ports", "paused_ps"): ("ps", "time the port was paused by PFC, summed over priorities"),
    ("pauses", "time_ns"): ("ns", "time of a PFC pause-state change"),
    ("pauses", "node"): ("", "node whose egress port changed state"),
    ("pauses", "port"): ("", "port number at the node"),
    ("pauses", "priority"): ("", "priority class"),
    ("pauses", "paused"): ("", "1 paused, 0 resumed"),
    ("latency", "low_ns"): ("ns", "lower edge of a log-spaced receive-latency bucket (8 per octave)"),
    ("latency", "count"): ("", "data packets whose one-way latency fell in the bucket"),
    ("flows", "ideal_ns"): ("ns", "ideal FCT: payload with headers at the bottleneck line rate plus base RTT"),
    ("flows", "slowdown"): ("", "fct_ns / ideal_ns (>= 1; nan: unfinished)"),
    ("ports", "rate_bps"): ("bit/s", "line rate of the egress port"),
    ("ports", "credit_stall_ps"): ("ps", "time the port had data but no credits (InfiniBand), summed over VLs"),
    ("stalls", "time_ns"): ("ns", "time of a credit-stall state change"),
    ("stalls", "node"): ("", "node whose egress port changed state"),
    ("stalls", "port"): ("", "port number at the node"),
    ("stalls", "vl"): ("", "virtual lane"),
    ("stalls", "stalled"): ("", "1 stall began (data queued, no credits), 0 ended"),
    ("ops", "iteration"): ("", "iteration index"),
    ("ops", "trace_op"): ("", "op index in the workload trace"),
    ("ops", "rank"): ("", "GPU rank"),
    ("ops", "kind"): ("", "trace OpKind: 0 COMPUTE, 1 COLLECTIVE, 2 SEND, 3 RECV"),
    ("ops", "phase"): ("", "trace Phase: 0 FORWARD, 1 BACKWARD, 2 GRAD_SYNC, 3 OPTIMIZER, 4 OTHER"),
    ("ops", "coll_id"): ("", "collective call id (trace coll_id), -1 if none"),
    ("ops", "start_ns"): ("ns", "time the op started"),
    ("ops", "finish_ns"): ("ns", "time the op completed"),
    ("collectives", "iteration"): ("", "iteration index"),
    ("collectives", "coll_id"): ("", "collective call id (trace coll_id)"),
    ("collectives", "kind"): ("", "trace CollKind: 1 ALL_REDUCE, 2 REDUCE_SCATTER, 3 ALL_GATHER, 4 ALL_TO_ALL, 5 BROADCAST"),
    ("collectives", "group"): ("", "index into the trace's groups table"),
    ("collectives", "bytes"): ("B", "collective size S (nccl-tests convention)"),
    ("collectives", "algorithm"): ("", "lowering algorithm (cosim.collectives Algorithm)"),
    ("collectives", "start_ns"): ("ns", "time every member was ready"),
    ("collectives", "finish_ns"): ("ns", "time the last member completed"),
    ("iterations", "iteration"): ("", "iteration index"),
    ("iterations", "start_ns"): ("ns", "first op start"),
    ("iterations", "finish_ns"): ("ns", "last op finish"),
    ("iterations", "time_ns"): ("ns", "iteration time, finish_ns - start of the iteration"),
    ("iterations", "exposed_comm_ns"): ("ns", "iteration time not covered by compute on the busiest rank"),
}
GROUPS = ("flows", "queues", "ports", "pauses", "latency", "stalls", "ops", "collectives", "iterations")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunRecord:
    """One run as stored: config and provenance (JSON-able dicts), summary scalars, and array tables."""

    name: str
    config: dict
    provenance: dict
    summary: dict
    flows: dict[str, np.ndarray] = field(default_factory=dict)
    queues: dict[str, np.ndarray] = field(default_factory=dict)
    ports: dict[str, np.ndarray] = field(default_factory=dict)
    pauses: dict[str, np.ndarray] = field(default_factory=dict)
    latency: dict[str, np.ndarray] = field(default_factory=dict)
    stalls: dict[str, np.ndarray] = field(default_factory=dict)
    ops: dict[str, np.ndarray] = field(default_factory=dict)
    collectives: dict[str, np.ndarray] = field(default_factory=dict)
    iterations: dict[str, np.ndarray] = field(default_factory=dict)

    def table(self, group: str) -> dict[str, np.ndarray]:
        """The arrays of ``group`` (one of GROUPS; empty if the run has none)."""
        if group not in GROUPS:
            raise KeyError(group)
        return getattr(self, group)


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith("."):
        raise CosimInputError("run name", f"{name!r} is not a valid run name", "use letters, digits, - and _")


def _write_run(h5, run: RunRecord) -> None:
    _check_name(run.name)
    # Creation order is kept, so runs read back in the order they were written (roce before ib).
    runs = h5["runs"] if "runs" in h5 else h5.create_group("runs", track_order=True)
    if run.name in runs:
        del runs[run.name]
    g = runs.create_group(run.name)
    g.attrs["config"] = json.dumps(run.config, sort_keys=True)
    g.attrs["provenance"] = json.dumps(run.provenance, sort_keys=True)
    g.attrs["summary"] = json.dumps(run.summary, sort_keys=True)
    for group in GROUPS:
        if not run.table(group):
            continue
        sub = g.create_group(group)
        for name, values in run.table(group).items():
            values = np.asarray(values)
            big = values.size > 4096
            ds = sub.create_dataset(name, data=values, chunks=True if big else None,
                                    compression="gzip" if big else None, shuffle=big)
            units, description = DATASETS.get((group, name), ("", ""))
            ds.attrs["units"] = units
            ds.attrs["description"] = description


def _write_root(h5) -> None:
    h5.attrs["schema"] = SCHEMA
    h5.attrs["schema_version"] = SCHEMA_VERSION
    h5.attrs["cosim_version"] = __version__
    h5.attrs["created_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_results(path: str | Path, runs: list[RunRecord], *, append: bool = False) -> Path:
    """Write ``runs`` to ``path`` atomically; with ``append`` keep the runs already in an existing file."""
    import h5py  # noqa: PLC0415

    path = Path(path)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise CosimInputError("run name", f"duplicate run names in {names}")
    keep_existing = append and path.exists()
    if keep_existing:
        read_results(path)  # validates the existing file before we touch it
    with atomic_output(path) as tmp:
        if keep_existing:
            shutil.copyfile(path, tmp)
        with h5py.File(tmp, "a" if keep_existing else "w") as h5:
            if not keep_existing:
                _write_root(h5)
            for run in runs:
                _write_run(h5, run)
    return path


def _corrupt(path: Path, problem: str) -> CosimInputError:
    return CosimInputError(str(path), problem, "pass a results file written by 'cosim run'")


def read_results(path: str | Path) -> dict[str, RunRecord]:
    """Read every run of a results file, validating its schema; raise CosimInputError if it is not one."""
    import h5py  # noqa: PLC0415

    path = Path(path)
    if not path.is_file():
        raise CosimInputError(str(path), "no such file")
    try:
        h5 = h5py.File(path, "r")
    except OSError:
        raise _corrupt(path, "not a readable HDF5 file (corrupt or truncated?)") from None
    with h5:
        if h5.attrs.get("schema") != SCHEMA:
            raise _corrupt(path, f"not a cosim results file (schema attribute {h5.attrs.get('schema')!r})")
        version = int(h5.attrs.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            raise _corrupt(path, f"schema version {version}, this cosim reads version {SCHEMA_VERSION}")
        runs: dict[str, RunRecord] = {}
        try:
            for name, g in h5.get("runs", {}).items():
                tables = {grp: {k: v[()] for k, v in g[grp].items()} if grp in g else {} for grp in GROUPS}
                runs[name] = RunRecord(
                    name=name,
                    config=json.loads(g.attrs["config"]),
                    provenance=json.loads(g.attrs["provenance"]),
                    summary=json.loads(g.attrs["summary"]),
                    **tables,
                )
        except (KeyError, ValueError, OSError, TypeError) as exc:
            raise _corrupt(path, f"damaged run data ({type(exc).__name__}: {exc})") from None
    return runs


def latency_percentiles(low_ns: np.ndarray, count: np.ndarray) -> dict:
    """p50/p99/p99.9 of a log-bucket latency histogram (lower bucket edge: within one bucket, ~9%)."""
    total = int(np.asarray(count).sum())
    if total == 0:
        return {}
    cum = np.cumsum(count)
    out = {}
    for name, q in (("latency_p50_ns", 0.5), ("latency_p99_ns", 0.99), ("latency_p999_ns", 0.999)):
        out[name] = float(low_ns[int(np.searchsorted(cum, q * total))])
    return out


def summarize(flows: Mapping[str, np.ndarray], queues: Mapping[str, np.ndarray],
              ports: Mapping[str, np.ndarray], *, sim_time_ns: float) -> dict:
    """Scalar summary of a run (units in the key names)."""
    fct = np.asarray(flows["fct_ns"], dtype=np.float64)
    done = np.isfinite(fct)
    size = np.asarray(flows["size_bytes"])
    delivered = int(np.asarray(flows["delivered_bytes"]).sum())
    summary = {
        "flows": int(fct.size),
        "flows_completed": int(done.sum()),
        "payload_bytes": int(size.sum()),
        "delivered_bytes": delivered,
        "sim_time_ns": float(sim_time_ns),
        "drops": int(np.asarray(ports["drops"]).sum()) if len(ports) else 0,
        "max_queue_bytes": int(np.asarray(ports["peak_queue_bytes"]).max()) if len(ports) and ports["peak_queue_bytes"].size else 0,
    }
    if done.any():
        f = fct[done]
        summary |= {
            "fct_p50_ns": float(np.percentile(f, 50)),
            "fct_p99_ns": float(np.percentile(f, 99)),
            "fct_max_ns": float(f.max()),
        }
        last = float(np.nanmax(np.asarray(flows["finish_ns"], dtype=np.float64)))
        first = float(np.min(np.asarray(flows["start_ns"])))
        if last > first:
            summary["goodput_gbps"] = delivered * 8 / (last - first)
        if "slowdown" in flows:
            slow = np.asarray(flows["slowdown"], dtype=np.float64)[done]
            slow = slow[np.isfinite(slow)]
            if slow.size:
                summary |= {f"fct_slowdown_{name}": float(np.percentile(slow, q))
                            for name, q in (("p50", 50), ("p99", 99), ("p999", 99.9))}
    if "rate_bps" in ports and np.asarray(ports["rate_bps"]).size and sim_time_ns > 0:
        util = np.asarray(ports["tx_bytes"]) * 8.0 / (np.asarray(ports["rate_bps"]) * sim_time_ns * 1e-9)
        used = util[util > 0]
        summary["link_utilization_max"] = float(util.max())
        summary["link_utilization_mean"] = float(used.mean()) if used.size else 0.0
    return summary


def open(path: str | Path):  # noqa: A001 - the notebook entry point is meant to read as cosim.results.open
    """Open a results file for analysis: runs with tables as pandas DataFrames or numpy arrays.

    >>> runs = cosim.results.open("results.h5")
    >>> runs["roce"].flows            # a DataFrame (pandas from the 'analysis' extra)
    >>> runs.summary_frame()          # one row per run
    """
    from cosim.analysis.api import open_results  # noqa: PLC0415

    return open_results(path)
