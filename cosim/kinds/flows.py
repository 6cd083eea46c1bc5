"""Flow-level kinds: workloads that are sets of point-to-point flows (a pattern, background traffic).

Their ops are one FLOW op per flow; a flow that starts later than its job waits behind a COMPUTE op on no
GPU that lasts until its start time. :class:`FlowLevelKind` holds what they share; :class:`FlowsKind` is
the ``flows`` kind (incast or permutation over its hosts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.collectives import DagOpKind
from cosim.kinds import time_limit
from cosim.kinds.base import Piece, WorkloadKind, register
from cosim.workload import flows as patterns


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobFlows:
    """Flows of one flow-level job: host node ids, payload, start relative to the job's start."""

    src: np.ndarray  # int64 [n]
    dst: np.ndarray  # int64 [n]
    size_bytes: np.ndarray  # int64 [n]
    start_ns: np.ndarray  # float64 [n]

    @property
    def n_flows(self) -> int:
        """Number of flows."""
        return int(self.src.size)


def job_flows(src, dst, size, start) -> JobFlows:
    """JobFlows of the given columns, in start order (stable)."""
    order = np.argsort(np.asarray(start, np.float64), kind="stable")
    return JobFlows(src=np.asarray(src, np.int64)[order], dst=np.asarray(dst, np.int64)[order],
                           size_bytes=np.asarray(size, np.int64)[order],
                           start_ns=np.asarray(start, np.float64)[order])


class FlowLevelKind(WorkloadKind):
    """A kind whose state is a JobFlows (start relative to the job's start)."""

    def flows(self, job, hosts: np.ndarray, ctx) -> JobFlows:
        """The job's flows on ``hosts``."""
        raise NotImplementedError

    def lower(self, job, loaded, hosts, ctx):
        f = self.flows(job, hosts, ctx)
        return f, flow_piece(f, job.start_ns)

    def ideal_ns(self, jp, fabric, nic_bytes_per_s):
        f = jp.state
        return time_limit.flows_ideal_ns(fabric, f.src, f.dst, f.size_bytes, f.start_ns)

    def describe(self, jp):
        return {"flows": jp.state.n_flows, "payload_bytes": int(jp.state.size_bytes.sum())}


def flow_piece(f: JobFlows, job_start_ns: float) -> Piece:
    """One FLOW op per flow, behind a delay op when it starts after time 0."""
    start = f.start_ns + job_start_ns
    delayed = start > 0
    width = 1 + delayed.astype(np.int64)
    first = np.cumsum(width) - width
    flow_op = first + delayed
    n = int(width.sum())
    kind = np.full(n, DagOpKind.FLOW, np.uint8)
    kind[first[delayed]] = DagOpKind.COMPUTE
    src, dst, size, duration = (np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.zeros(n, np.int64),
                                np.zeros(n, np.float64))
    src[flow_op], dst[flow_op], size[flow_op] = f.src, f.dst, f.size_bytes
    duration[first[delayed]] = start[delayed]
    dep_ptr = np.zeros(n + 1, np.int64)
    dep_ptr[flow_op[delayed] + 1] = 1
    return Piece(kind=kind, gpu=np.full(n, -1, np.int32), src_node=src, dst_node=dst, bytes_=size,
                 duration_ns=duration, priority=np.zeros(n, np.uint8), dep_ptr=np.cumsum(dep_ptr), dep_idx=first[delayed].astype(np.int64))


@register
class FlowsKind(FlowLevelKind):
    """Every host of the job sends one flow of ``flow_bytes``: incast (to its first host) or permutation
    (host i to host i+1)."""

    name = "flows"

    def flows(self, job, hosts, ctx):
        work = job.work
        fs = (patterns.incast(hosts, size_bytes=work.flow_bytes) if work.pattern == "incast"
              else patterns.permutation(hosts, size_bytes=work.flow_bytes))
        return JobFlows(src=fs.src.astype(np.int64), dst=fs.dst.astype(np.int64), size_bytes=fs.size_bytes,
                               start_ns=fs.start_ns)
