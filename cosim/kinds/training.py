"""The training kind: a workload trace (a file, or generated from a model spec) lowered to one FlowDag,
its iterations chained, its ranks on the hosts placement gave it (cosim.runs.training holds the pure
functions: checks, lowering limits, tables, summaries)."""

from __future__ import annotations

import numpy as np

from cosim.collectives import DagOpKind, lower, repeat
from cosim.collectives.calibration import nvlink_model
from cosim.kinds.base import LowerContext, Piece, WorkloadKind, register
from cosim.runs import time_limit, training
from cosim.values import Int


@register
class TrainingKind(WorkloadKind):
    """One training job: its trace's ranks, one per GPU; ops table, collectives and iterations."""

    name = "training"
    ranked = True

    def load(self, exp, job, gpus_per_server, trace=None):
        """The job's checked trace: ``trace`` (in memory), its file, or generated from its model."""
        return training.resolve_trace(job.work, trace, gpus_per_server,
                                      where="workload" if not exp.workloads else f"workloads.{job.name}.trace")

    def gpus_per_server(self, loaded):
        gps = loaded.spec_dict().get("hardware", {}).get("gpus_per_host", 8)
        return Int(minimum=1).convert(gps, "trace hardware.gpus_per_host")

    def ranks(self, loaded):
        return int(loaded.n_ranks)

    def lower(self, job, trace, hosts, ctx: LowerContext):
        work, exp = job.work, ctx.experiment
        where = _field(exp, job, "chunk_bytes")
        limit = training.dag_op_limit()
        bound = training.dag_ops_lower_bound(trace, work.chunk_bytes) * work.iterations
        if bound > limit:
            raise training.too_many_ops(bound, "at least ", work, trace, limit, where)
        dag = lower(trace, gpus_per_server=ctx.gpus_per_server, chunk_bytes=work.chunk_bytes,
                    algorithm=work.algorithm, tuning=training.tuning_model(exp.network, trace),
                    n_channels=ctx.n_channels)
        if dag.n_ops * work.iterations > limit:
            raise training.too_many_ops(dag.n_ops * work.iterations, "", work, trace, limit, where)
        if work.iterations > 1:
            dag = repeat(dag, work.iterations)
        return (trace, dag), _piece(dag, hosts)

    def ideal_ns(self, jp, fabric, nic_bytes_per_s):
        return time_limit.dag_ideal_ns(jp.state[1], nic_bytes_per_s)

    def flow_dag(self, state):
        return state[1]

    def executor_attributes(self, jp):
        return nvlink_model(jp.state[0].spec_dict().get("hardware")).executor_attributes()

    def results(self, jp, out, rows, flows, first_op, *, fabric, state, alone):
        trace, dag = state
        lo, hi = first_op, first_op + dag.n_ops
        tables = training.training_tables(trace, dag, out.op_start_ns[lo:hi], out.op_finish_ns[lo:hi])
        compute = tables.pop("_compute_time_ns")
        its = tables["iterations"]
        start = jp.job.start_ns
        if start > 0 and its["time_ns"].size:  # the first iteration starts at the job's start
            its["time_ns"][0] -= start
            its["exposed_comm_ns"][0] = max(its["time_ns"][0] - compute, 0.0)
        summary = training.training_summary(tables, compute)
        mine = {k: np.asarray(x)[rows] for k, x in flows.items() if k != "transfer"}
        summary |= training.transfer_summary(fabric, out.network, dag, out.flow_op[rows] - lo, mine)
        if "transfer" in mine:
            flows["transfer"][rows] = rows[mine["transfer"]]
        summary |= {"n_ranks": trace.n_ranks, "n_ops": trace.n_ops}
        return summary, tables

    def config(self, jp, state, plan):
        trace, dag = state
        work = jp.job.work
        return {"workload": {"n_ranks": trace.n_ranks, "n_ops": trace.n_ops, "gpus_per_server": plan.gpus_per_server,
                             "trace_in_memory": work.trace is None and work.model is None,
                             "specs": trace.spec_dict()},
                "dag": dag.summary()}

    def describe(self, jp):
        trace, dag = jp.state
        return {"ranks": trace.n_ranks, "trace_ops": trace.n_ops, "dag_ops": dag.n_ops}


def _field(exp, job, name: str) -> str:
    """The Experiment field ``name`` of ``job`` as errors name it."""
    return f"workload.{name}" if not exp.workloads else f"workloads.{job.name}.{name}"


def _piece(dag, hosts: np.ndarray) -> Piece:
    """The FlowDag's ops with ranks replaced by their hosts."""
    flow = dag.kind == DagOpKind.FLOW
    rank = np.asarray(dag.rank, np.int64)
    return Piece(kind=np.asarray(dag.kind, np.uint8), gpu=np.where(rank >= 0, hosts[np.maximum(rank, 0)], -1),
                 src_node=np.where(flow, hosts[np.maximum(dag.src, 0)], -1),
                 dst_node=np.where(flow, hosts[np.maximum(dag.dst, 0)], -1), bytes_=np.asarray(dag.bytes, np.int64),
                 duration_ns=np.asarray(dag.duration_ns, np.float64),
                 priority=np.asarray(dag.priority, np.uint8), dep_ptr=np.asarray(dag.dep_ptr, np.int64),
                 dep_idx=np.asarray(dag.dep_idx, np.int64), coll_start_op=np.asarray(dag.coll_start_op, np.int64),
                 coll_end_op=np.asarray(dag.coll_end_op, np.int64))
