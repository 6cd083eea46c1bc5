"""Results: the schema, the store, the metric registry and the notebook API (``cosim.results.open``).

Results files: one HDF5 file per experiment, one group per named run.

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
                           rank, kind, phase, coll_id, start_ns, finish_ns [ns]; telemetry.op_table keeps
                           every row (all), those of collectives, sends and receives (collectives) or none
    /runs/<name>/collectives/  co-simulation: one row per collective call per iteration: iteration, coll_id,
                           kind, group, bytes [B], algorithm, start_ns, finish_ns [ns]
    /runs/<name>/iterations/   co-simulation: iteration, start_ns, finish_ns, time_ns [ns],
                           exposed_comm_ns [ns]

Groups a run does not produce are absent from the file and read back as empty tables.

Every dataset has ``units`` and ``description`` attributes; bulk data is chunked and compressed.
Files are written under a temporary name and renamed when complete (cosim.h5io.atomic_output).
"""


from cosim.results.schema import DATASETS, GROUPS, SCHEMA, SCHEMA_VERSION, RunRecord
from cosim.results.store import read_results, write_results

__all__ = ["DATASETS", "GROUPS", "SCHEMA", "SCHEMA_VERSION", "RunRecord", "open", "read_results", "write_results"]


def open(path):  # noqa: A001 - notebooks read it as cosim.results.open(path)
    """A results file as a mapping run name → Run, tables as pandas DataFrames (see cosim.results.api)."""
    from cosim.results.api import open_results  # noqa: PLC0415 - pandas-free, h5py-free import of the package

    return open_results(path)
