"""The results record of an executed plan: network tables over every flow, each job's own tables and
summary (one job: as they are; several: with a ``workload`` column and ``<name>_`` summary keys), faults,
the fabric and every job's hosts.

Several jobs (``[[workloads]]``): flows, ops, collectives and iterations carry a ``workload`` column (the
job's index in ``config["workloads"]``); the summary holds the shared fabric's telemetry and, per job,
``<name>_<key>``: its kind's summary and its flows' (flows, flows_completed, fct_p50_ns, fct_p99_ns,
fct_mean_ns, slowdowns); with ``alone = true`` also ``<name>_alone_iteration_time_ns`` (training) or
``<name>_alone_fct_mean_ns`` and ``<name>_sharing_slowdown`` (shared over alone), from the same job run on
the same hosts of the idle fabric.
"""

from __future__ import annotations

import numpy as np

from cosim import faults as cosim_faults
from cosim import telemetry
from cosim.network.names import node_names
from cosim.plan.describe import describe_job
from cosim.results import RunRecord
from cosim.results.codes import node_name_column
from cosim.spec import to_document
from cosim.workload.trace import OpKind


def record(plan, outcome) -> RunRecord:
    """The RunRecord of ``plan`` executed as ``outcome`` (cosim.run.Outcome)."""
    exp, fabric, dag, out = plan.experiment, plan.fabric, outcome.dag, outcome.out
    net, fop = out.network, out.flow_op
    interval = exp.telemetry.queue_sample_interval_ns
    tables = _network_tables(fabric, out, dag)
    flows = tables["flows"]
    shared = len(plan.jobs) > 1
    if shared:  # a job's kind may fill its rows of transfer; the others' flows are each their own transfer
        flows["transfer"] = np.arange(fop.size, dtype=np.int64)
        flows["workload"] = dag.job_of(fop)
    summary = telemetry.network_summary(fabric, net, tables, queue_sample_interval_ns=interval)
    parts: dict[str, list] = {}
    for p in plan.jobs:
        rows = np.flatnonzero(flows["workload"] == p.index) if shared else None
        own, mine = job_results(plan, p, out, rows, flows, int(dag.first_op[p.index]), outcome.states[p.index])
        if not shared:
            summary |= own
            tables |= mine
            continue
        for group, table in mine.items():
            table["workload"] = np.full(next(iter(table.values())).size, p.index, np.int32)
            parts.setdefault(group, []).append(table)
        own = _flow_summary({k: np.asarray(x)[rows] for k, x in flows.items()}, net.sim_time_ns) | own
        if p.index in outcome.alone:
            own |= _alone(plan, p, own, outcome.alone[p.index])
        summary |= {f"{p.job.name}_{k}": x for k, x in own.items()}
    if not shared and plan.jobs[0].kind.ranked and "transfer" not in flows:  # not filled by its kind
        flows["transfer"] = np.arange(fop.size, dtype=np.int64)
    for group, items in parts.items():
        tables[group] = {k: np.concatenate([t[k] for t in items]) for k in items[0]}
    done = np.isfinite(out.op_finish_ns)
    # counted as the DAG with every BLOCK op's subs materialized: a finished BLOCK op's subs all finished
    weight = np.maximum(dag.block_sizes(), 1)
    summary |= {"mtu_bytes": net.mtu_bytes, "header_bytes": net.header_bytes, "n_dag_ops": dag.n_expanded_ops(),
                "n_dag_ops_finished": int(weight[done].sum()), "n_flows": int(fop.size)}
    if shared:
        summary["n_workloads"] = len(plan.jobs)
    if exp.limits.fast_forward:
        summary["fast_forward_tolerance"] = exp.limits.fast_forward_tolerance
    if net.status == "complete" and not done.all():
        summary["status"] = "stalled"  # the network went idle with ops left: cannot happen with a valid DAG
    timeout_rows = _timeout(plan, outcome, summary)
    config = {"experiment": to_document(exp), "fabric": fabric.describe(), "attributes": plan.attributes,
              "decomposition": outcome.decomposition}
    if shared:
        config["workloads"] = [describe_job(plan, p) for p in plan.jobs]
    else:
        config |= plan.jobs[0].kind.config(plan.jobs[0], outcome.states[0], plan)
    if plan.faults is not None:
        tables["faults"], config["faults"], extra = plan.faults.results(net)
        summary |= extra
    tables |= cosim_faults.mechanism_tables(fabric, net, plan.faults, timeout_rows, table=tables.get("faults"))
    tables |= fabric_tables(fabric) | {"placement": placement_table(plan)}
    if "ops" in tables:
        tables["ops"] = kept_ops(tables["ops"], exp.telemetry.op_table)
    provenance = telemetry.provenance(seed=exp.seed, wall_time_s=summary.get("wall_time_s", net.wall_time_s))
    return RunRecord(name=exp.name, config=config, provenance=provenance, summary=summary, **tables)


def kept_ops(ops: dict[str, np.ndarray], op_table: str) -> dict[str, np.ndarray]:
    """The rows of the ops table the results file stores (telemetry.op_table): every row, the rows of ops
    that move bytes (not COMPUTE), or none (an empty table, which is not written). The summary does not
    depend on it: a kind computes it from every op, or (training) builds only the kept rows and reads the
    rows its summary needs apart."""
    if op_table == "all":
        return ops
    if op_table == "none":
        return {}
    keep = np.flatnonzero(np.asarray(ops["kind"]) != OpKind.COMPUTE)
    if keep.size == np.asarray(ops["kind"]).size:  # a kind that built the kept rows only
        return ops
    return {name: np.asarray(column)[keep] for name, column in ops.items()}


def fabric_tables(fabric) -> dict[str, dict[str, np.ndarray]]:
    """The fabric as the record stores it (``nodes``, ``links``, ``hosts``; cosim.results.schema)."""
    return {"nodes": {"kind": np.asarray(fabric.node_kind, np.uint8), "tier": np.asarray(fabric.node_tier, np.uint8),
                      "name": node_name_column(node_names(fabric))},
            "links": {"a": np.asarray(fabric.link_a, np.int32), "b": np.asarray(fabric.link_b, np.int32),
                      "rate_bps": np.asarray(fabric.link_rate_bps, np.float64),
                      "delay_ns": np.asarray(fabric.link_delay_ns, np.float64),
                      "tier": np.asarray(fabric.link_tier, np.uint8)},
            "hosts": {"node": np.asarray(fabric.host_ids, np.int32), "server": np.asarray(fabric.host_server, np.int32),
                      "gpu": np.asarray(fabric.host_gpu, np.int32)}}


def placement_table(plan) -> dict[str, np.ndarray]:
    """Every job's slots and the hosts they run on (``placement``; cosim.results.schema)."""
    hosts = [np.asarray(p.hosts, np.int64) for p in plan.jobs]
    return {"workload": np.concatenate([np.full(h.size, p.index, np.int32) for p, h in zip(plan.jobs, hosts)]),
            "slot": np.concatenate([np.arange(h.size, dtype=np.int32) for h in hosts]),
            "host": np.concatenate(hosts).astype(np.int32)}


def _network_tables(fabric, out, dag) -> dict[str, dict[str, np.ndarray]]:
    """The network tables (cosim.telemetry) of engine output ``out`` of ``dag``: its flows are the DAG's FLOW
    ops (and BLOCK ops' FLOW subs) the engine started, in the order it reports them."""
    fop, fsub = out.flow_op, out.flow_sub
    endpoints = lambda lo, hi: dag.flow_endpoints(fop[lo:hi], None if fsub is None else fsub[lo:hi])  # noqa: E731
    return telemetry.network_tables(fabric, out.network, start_ns=out.flow_start_ns, endpoints=endpoints)


def job_results(plan, p, out, rows, flows, first_op, state) -> tuple[dict, dict]:
    """(summary, tables) of job ``p``: its kind's, from its rows of the outcome."""
    return p.kind.results(p, out, rows, flows, first_op, fabric=plan.fabric, state=state, alone=len(plan.jobs) == 1,
                          op_table=plan.experiment.telemetry.op_table)


def _flow_summary(flows: dict, sim_time_ns: float) -> dict:
    """A job's flows summarized: counts, FCT percentiles and mean, slowdowns."""
    out = telemetry.summarize(flows, {}, {}, sim_time_ns=sim_time_ns)
    for key in ("sim_time_ns", "drops", "max_queue_bytes"):
        out.pop(key, None)
    fct = np.asarray(flows["fct_ns"], np.float64)
    fct = fct[np.isfinite(fct)]
    if fct.size:
        out["fct_mean_ns"] = float(fct.mean())
    return out


def _alone(plan, p, own: dict, alone) -> dict:
    """Job ``p``'s headline run alone on the same hosts of the idle fabric (``alone``: that run's engine
    output and DAG) — the mean iteration time of a ranked job, the mean FCT of any other — and the slowdown
    sharing caused."""
    out, dag = alone
    flows = _network_tables(plan.fabric, out, dag)["flows"]
    summary = job_results(plan, p, out, None, flows, int(dag.first_op[0]), p.state)[0]
    summary = _flow_summary(flows, out.network.sim_time_ns) | summary
    key = "iteration_time_ns" if p.kind.ranked else "fct_mean_ns"
    value = summary.get(key)
    result = {f"alone_{key}": value}
    if isinstance(own.get(key), float) and isinstance(value, float) and value > 0:
        result["sharing_slowdown"] = own[key] / value
    return result


def _timeout(plan, outcome, summary: dict) -> list:
    """faults-table rows and summary keys of a collective that timed out (none when none did)."""
    out, dag = outcome.out, outcome.dag
    if out.failed_collective < 0:
        return []
    start_op = int(dag.coll_start_op[out.failed_collective])
    p = plan.jobs[int(dag.job_of(start_op))]
    flow_dag = p.kind.flow_dag(outcome.states[p.index])
    lo = int(dag.first_op[p.index])
    local = out.failed_collective - int(np.count_nonzero(dag.job_of(dag.coll_start_op) < p.index))
    rank = cosim_faults.failed_rank(flow_dag, local, out.op_finish_ns[lo:lo + flow_dag.n_ops])
    summary |= {"failed_collective": local, "failed_rank": rank, "failed_at_ns": out.failed_at_ns}
    if len(plan.jobs) > 1:
        summary["failed_workload"] = p.job.name
    return [cosim_faults.timeout_row(out.failed_at_ns, int(p.hosts[rank]))]
