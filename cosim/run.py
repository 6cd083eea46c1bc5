"""One way to run an Experiment: compile it once, execute the plan, record the outcome.

    exps = experiments_of("builtin")          # a shipped name, a TOML path, or a document
    record = run(exps[0])                     # compile -> execute -> record: a cosim.results.RunRecord
    plan = compile(exps[0]); describe(plan)   # what --dry-run prints (cosim.plan.describe)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cosim import engine, memory
from cosim import fast_forward as ff_check
from cosim.decompose import exact as decompose_run
from cosim.parallel import simulate as parallel
from cosim.plan import EngineDag, RunPlan, assemble, compile, with_stragglers  # noqa: A004 - the plan's verb
from cosim.record import record
from cosim.results import RunRecord
from cosim.spec import Experiment, catalog, from_document, with_overrides


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Outcome:
    """What executing a plan gave: the engine's output, the DAG it ran (a kind's execution may have replaced
    its ops), every job's state after execution, how the run was split (decompose_run.describe), and for
    every job with ``alone = true`` (index -> (engine output, DAG)) its run alone on the idle fabric."""

    out: engine.DagOutput
    dag: EngineDag
    states: tuple
    decomposition: dict
    alone: dict = dataclasses.field(default_factory=dict)


def experiments_of(source: str | Mapping, overrides: Mapping[str, object] | None = None) -> list[Experiment]:
    """The Experiments of ``source`` (shipped name, TOML path or document) with ``overrides`` applied."""
    if isinstance(source, Mapping):
        doc, where = dict(source), "experiment"
    else:
        doc, where = catalog.load_document(source)
    return from_document(with_overrides(doc, overrides or {}), where=where)


def simulate(plan: RunPlan, dag: EngineDag | None = None, *, progress=None, jobs: int = 1,
             whole: bool = False, faults: bool = True) -> tuple[engine.DagOutput, dict]:
    """(engine output, decomposition) of ``dag`` (default: the plan's) on the plan's fabric: whole when
    faults or a collective timeout apply (or ``whole``), else in independent parts where that is exact.
    ``faults``: inject the plan's faults (False: the idle fabric of an ``alone`` run)."""
    exp = plan.experiment
    dag = plan.dag if dag is None else dag
    # the merge and the record come after the simulation: refuse now what could not be written then
    memory.check_record_fits(dag.n_flows())
    if plan.partitioning is not None and dag is plan.dag:  # alone runs pass their own DAG
        return parallel.simulate(exp, plan.fabric, plan.dag.columns(), plan.partitioning,
                                 attributes=plan.attributes, max_sim_time_ns=plan.max_sim_time_ns, progress=progress)
    reason = plan.whole_only or ("a kind that iterates runs whole" if whole else None)
    if reason is None:
        return decompose_run.simulate_dag(exp, plan.fabric, dag.columns(), gpu_node=np.arange(plan.fabric.n_nodes),
                                          attributes=plan.attributes, max_sim_time_ns=plan.max_sim_time_ns,
                                          progress=progress, jobs=jobs)
    out = engine.simulate_dag(plan.fabric, **dag.columns(), seed=exp.seed, attributes=plan.attributes,
                              queue_sample_interval_ns=exp.telemetry.queue_sample_interval_ns,
                              max_sim_time_ns=plan.max_sim_time_ns, progress=progress,
                              coll_start_op=dag.coll_start_op, coll_end_op=dag.coll_end_op,
                              setup=plan.faults.setup if faults and plan.faults is not None else None)
    return out, {"decompose": "whole", "decompose_reason": reason}


def execute(plan: RunPlan, *, progress=None, jobs: int = 1) -> Outcome:
    """Simulate the plan: its DAG once, or as the kind of a job that iterates (inference) drives it; then
    every ``alone`` job by itself."""
    states = [p.state for p in plan.jobs]
    iterating = next((p for p in plan.jobs if p.kind.iterates), None)
    if iterating is None:
        out, how = simulate(plan, progress=progress, jobs=jobs)
        return Outcome(out=out, dag=plan.dag, states=tuple(states), decomposition=how, alone=alone_runs(plan))
    def dag_of(piece, flow_dag) -> EngineDag:
        dag = assemble(plan.jobs, {iterating.index: piece})
        return with_stragglers(dag, plan.jobs, plan.faults, {iterating.index: flow_dag})

    simulate_piece = lambda piece, flow_dag: simulate(plan, dag_of(piece, flow_dag),  # noqa: E731
                                                      progress=progress, whole=True)[0]
    out, states[iterating.index], piece = iterating.kind.execute(plan, iterating, simulate_piece)
    return Outcome(out=out, dag=dag_of(piece, iterating.kind.flow_dag(states[iterating.index])), states=tuple(states),
                   decomposition={"decompose": "whole", "decompose_reason": "a kind that iterates runs whole"})


def alone_runs(plan: RunPlan) -> dict:
    """Every job with ``alone = true``, simulated by itself on the same hosts of the idle fabric: index ->
    (engine output, DAG)."""
    out = {}
    for p in plan.jobs:
        if p.job.alone:
            dag = assemble([p])
            out[p.index] = (simulate(plan, dag, whole=True, faults=False)[0], dag)
    return out


def run(exp: Experiment, *, trace=None, progress=None, plan: RunPlan | None = None, jobs: int = 1) -> RunRecord:
    """Simulate ``exp`` and return its RunRecord: ``record(plan, execute(plan))``.

    ``trace``: an in-memory Trace for its training workload; ``progress(sim_time_ns, done, total,
    data_packet_hops)`` is called between simulation slices (cosim.engine.ProgressFn); ``plan``: the
    experiment's compiled plan if already made; ``jobs``: local processes for the independent parts of a
    decomposed run (limits.decompose)."""
    plan = compile(exp, trace) if plan is None else plan
    outcome = execute(plan, progress=progress, jobs=jobs)
    result = record(plan, outcome)
    if exp.limits.fast_forward_check and not engine.stop_requested():
        exact_plan = exact_plan_of(plan)
        exact = execute(exact_plan, progress=progress, jobs=jobs)
        result.summary.update(ff_check.time_errors(exact.out, outcome.out, outcome.dag))
        result.summary.update(ff_check.summary_errors(record(exact_plan, exact).summary, result.summary))
    return result


def exact_plan_of(plan: RunPlan) -> RunPlan:
    """``plan`` without fast-forward: the exact run the error monitor (limits.fast_forward_check) compares with."""
    limits = dataclasses.replace(plan.experiment.limits, fast_forward=False, fast_forward_check=False)
    return dataclasses.replace(plan, experiment=dataclasses.replace(plan.experiment, limits=limits),
                               attributes={k: v for k, v in plan.attributes.items()
                                           if not k.startswith("FastForwardController::")})


def run_with_baseline(exp: Experiment, *, trace=None, progress=None, plan: RunPlan | None = None,
                      jobs: int = 1) -> list[RunRecord]:
    """[run(exp)], and with ``exp.baseline`` also the same experiment without its faults (named
    ``<name>-baseline``), after it: the faulted run's summary then holds its delay against the baseline
    (cosim.results.metrics.fault_delay_entries)."""
    from cosim.results.metrics import fault_delay_entries  # noqa: PLC0415

    result = run(exp, trace=trace, progress=progress, plan=plan, jobs=jobs)
    if not (exp.faults and exp.baseline) or engine.stop_requested():
        return [result]
    clean = dataclasses.replace(exp, faults=(), baseline=False, name=baseline_name(exp))
    base = run(clean, trace=trace, progress=progress, jobs=jobs)
    result.summary.update(fault_delay_entries(result, base))
    return [result, base]


def baseline_name(exp: Experiment) -> str:
    """The run name of ``exp``'s fault-free baseline."""
    return f"{exp.name}-baseline"
