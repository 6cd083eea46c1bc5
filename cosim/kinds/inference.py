"""The inference kind: a disaggregated serving schedule as one DAG, iterated to its batching fixed point.

Batching depends on completion times, which depend on the network (cosim.runs.inference, docs/models/
inference.md): the plan holds the analytic pass's schedule lowered; :meth:`InferenceKind.execute` runs it,
decides the batches again from what the run measured, and repeats until the decisions repeat (a fixed
point) or ``max_batching_iterations`` runs were made. It runs alone on its fabric: its fixed point moves
its own ops, and another job's ops would have to follow them through every pass.
"""

from __future__ import annotations

import dataclasses

from cosim.collectives.calibration import nvlink_model
from cosim.kinds.base import WorkloadKind, register
from cosim.kinds.training import _piece
from cosim.results import collectives
from cosim.runs import inference
from cosim.runs.training import training_tables


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Serving:
    """An inference job's state: its plan, the schedule simulated last, its trace and DAG, and after
    execution what the run measured and how the fixed point went."""

    plan: inference.InferencePlan
    schedule: object  # ServingSchedule
    steps: object  # StepTrace
    dag: object  # FlowDag
    measured: inference.Measured | None = None
    passes: int = 0
    converged: bool = False
    wall_time_s: float = 0.0


@register
class InferenceKind(WorkloadKind):
    """LLM serving: prefill and decode replicas, requests, KV-cache transfers; requests table."""

    name = "inference"
    ranked = True
    shares_fabric = False
    iterates = True

    def load(self, exp, job, gpus_per_server, trace=None):
        super().load(exp, job, gpus_per_server, trace)
        return inference.plan(exp, job.work, gpus_per_server)

    def gpus_per_server(self, loaded):
        return loaded.gpus_per_server

    def ranks(self, loaded):
        return loaded.n_ranks

    def lower(self, job, loaded, hosts, ctx):
        sched = inference.schedule_of(job.work, loaded)
        steps = inference.step_trace_of(job.work, loaded, sched)
        dag = inference.lower_step_trace(job.work, loaded, steps)
        return Serving(plan=loaded, schedule=sched, steps=steps, dag=dag), _piece(dag, hosts)

    def ideal_ns(self, jp, fabric, nic_bytes_per_s):
        return None  # a service spans what its arrivals give it, which no bound of one DAG captures

    def flow_dag(self, state):
        return state.dag

    def executor_attributes(self, jp):
        return nvlink_model(dataclasses.asdict(jp.state.plan.hardware)).executor_attributes()

    def execute(self, plan, jp, simulate):
        """Simulate the schedule, decide again from what it measured, until a fixed point (module docstring)."""
        w, p, s = jp.job.work, jp.state.plan, jp.state
        sched, steps, dag = s.schedule, s.steps, s.dag
        passes, wall, converged = 0, 0.0, False
        while True:
            out = simulate(_piece(dag, jp.hosts), dag)
            passes += 1
            wall += out.network.wall_time_s
            m = inference.measure(p, sched, steps, out.op_start_ns[dag.trace_start], out.op_finish_ns[dag.trace_done])
            if out.network.status != "complete" or passes >= w.max_batching_iterations:
                break
            delay, p_extra, d_extra = inference.corrections(p, sched, m)
            again = inference.schedule_of(w, p, kv_delay_ns=delay, prefill_extra_ns=p_extra, decode_extra_ns=d_extra)
            if again.decisions() == sched.decisions():
                converged = True
                break
            sched = again
            steps = inference.step_trace_of(w, p, sched)
            dag = inference.lower_step_trace(w, p, steps)
        return out, Serving(plan=p, schedule=sched, steps=steps, dag=dag, measured=m, passes=passes,
                            converged=converged, wall_time_s=wall), _piece(dag, jp.hosts)

    def results(self, jp, out, rows, flows, first_op, *, fabric, state, alone):
        w, s = jp.job.work, state
        lo, hi = first_op, first_op + s.dag.n_ops
        tables = {"collectives": training_tables(s.steps.trace, s.dag, out.op_start_ns[lo:hi],
                                                 out.op_finish_ns[lo:hi])["collectives"],
                  "requests": inference.requests_table(s.plan, s.schedule, s.steps, s.measured)}
        summary = collectives.summary_entries(collectives.collective_stats(tables["collectives"], first_iteration=0))
        summary |= inference.request_summary(tables["requests"], ttft_slo_ms=w.ttft_slo_ms, tpot_slo_ms=w.tpot_slo_ms)
        summary |= {"batching_iterations": s.passes, "batching_converged": int(s.converged),
                    "prefill_steps": s.schedule.prefill.n, "decode_steps": s.schedule.decode.n,
                    "n_ranks": s.plan.n_ranks, "n_ops": s.steps.trace.n_ops, "wall_time_s": s.wall_time_s}
        return summary, tables

    def config(self, jp, state, plan):
        return {"workload": {"n_ranks": state.plan.n_ranks, "gpus_per_server": plan.gpus_per_server,
                             "requests": state.plan.requests.n,
                             "kv_bytes_per_token": state.plan.model.kv_bytes_per_token},
                "dag": state.dag.summary()}

    def describe(self, jp):
        return {"ranks": jp.state.plan.n_ranks, "requests": jp.state.plan.requests.n, "dag_ops": jp.state.dag.n_ops}
