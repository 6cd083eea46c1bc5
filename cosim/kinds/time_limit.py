"""The simulated-time limit of a run, derived from its workload when ``limits.max_sim_time_ns`` is not set.

A run stops at its limit although work remains (status "time-limit"), so the limit must be far above
what the workload needs and still end a run that stalls. It is :data:`SLACK` times the workload's ideal
time, never below :data:`FLOOR_NS`:

- ideal time of a training DAG: the busiest rank's serial work, every resource one after the other (its
  compute, the start latencies of the collectives it is a member of, and its NIC bytes, the larger of
  sent and received plus its NVLink bytes, at the NIC's payload rate). The critical path is at most
  about twice that (a pipeline's bubble adds (p-1)/m), overlap only shortens it.
- ideal time of flows: the latest start plus the most bytes any host sends or receives at its link rate.
- a service (inference) has no ideal bound: its limit is its last request's arrival plus :data:`UNBOUNDED_NS`.

An explicit ``limits.max_sim_time_ns`` (``--max-sim-time-ms``) always wins. ``cosim run --dry-run`` shows
the limit a run will use.
"""

from __future__ import annotations

import numpy as np

from cosim.collectives import DagOpKind

#: the limit is this many times the workload's ideal time
SLACK = 20.0
#: and never below this, ns (1 s of simulated time)
FLOOR_NS = 1e9
#: how far past its last arrival the limit of a workload whose time no ideal bound captures runs (a serving
#: run spans what its requests' arrivals give it), ns (100 s of simulated time)
UNBOUNDED_NS = 1e11


def limit_ns(ideal_ns: float) -> float:
    """The time limit of a workload whose ideal time is ``ideal_ns``: SLACK x ideal, at least FLOOR_NS."""
    return float(max(FLOOR_NS, SLACK * float(ideal_ns)))


def dag_ideal_ns(dag, nic_bytes_per_s: float) -> float:
    """Ideal time of a FlowDag (module docstring): the busiest rank's compute, collective latencies and
    NIC bytes at ``nic_bytes_per_s``, one after the other, ns."""
    n = dag.n_ranks
    rank = np.asarray(dag.rank)
    kind = np.asarray(dag.kind)
    busy = np.zeros(n)
    compute = (kind == DagOpKind.COMPUTE) & (rank >= 0)
    busy += np.bincount(rank[compute], weights=dag.duration_ns[compute], minlength=n)
    sizes = np.diff(dag.coll_ranks_ptr)
    latency = np.asarray(dag.duration_ns)[dag.coll_start_op]
    busy += np.bincount(dag.coll_ranks, weights=np.repeat(latency, sizes), minlength=n)
    sent = dag.bytes_sent_per_rank(DagOpKind.FLOW)  # BLOCK ops' flows included
    received = dag.bytes_received_per_rank(DagOpKind.FLOW)
    copied = dag.nvlink_bytes_by_rank()
    busy += (np.maximum(sent, received) + copied) / nic_bytes_per_s * 1e9
    return float(busy.max()) if n else 0.0


def host_rate_bytes_per_s(fabric) -> np.ndarray:
    """float64 [n_nodes]: every node's fastest link, bytes/s (a host has one)."""
    rate = np.zeros(fabric.n_nodes)
    for end in (fabric.link_a, fabric.link_b):
        np.maximum.at(rate, np.asarray(end, np.int64), np.asarray(fabric.link_rate_bps, np.float64) / 8)
    return rate


def flows_ideal_ns(fabric, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray,
                   start_ns: np.ndarray | None = None) -> float:
    """Ideal time of flows between hosts of ``fabric`` (node ids): latest start plus the most bytes a host
    sends or receives at its link rate, ns."""
    size = np.asarray(size_bytes, np.float64)
    if not size.size:
        return 0.0
    rate = np.maximum(host_rate_bytes_per_s(fabric), 1.0)
    sent = np.bincount(np.asarray(src, np.int64), weights=size, minlength=fabric.n_nodes)
    received = np.bincount(np.asarray(dst, np.int64), weights=size, minlength=fabric.n_nodes)
    start = float(np.max(start_ns)) if start_ns is not None and np.size(start_ns) else 0.0
    return start + float((np.maximum(sent, received) / rate).max()) * 1e9
