"""One run function from an Experiment to a results record, whatever the workload; checks and dry runs.

    exps = experiments_of("builtin")                  # a shipped name, a TOML path, or a document
    record = run(exps[0])                              # cosim.results.RunRecord
    describe(exps[0])                                  # the resolved plan, as --dry-run prints it
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from cosim import engine, faults
from cosim.collectives import DagOpKind
from cosim.collectives.dag import NUM_PRIORITIES
from cosim.network import buffers, ideal
from cosim.network.transport import run_attributes
from cosim.network.topology import SWITCH
from cosim.results import RunRecord
from cosim.runs import catalog, decompose_run, flows, inference, multi, training
from cosim.runs.decompose import describe_parts
from cosim.runs.experiment import Experiment, from_document, with_overrides


def experiments_of(source: str | Mapping, overrides: Mapping[str, object] | None = None) -> list[Experiment]:
    """The Experiments of ``source`` (shipped name, TOML path or document) with ``overrides`` applied."""
    if isinstance(source, Mapping):
        doc, where = dict(source), "experiment"
    else:
        doc, where = catalog.load_document(source)
    return from_document(with_overrides(doc, overrides or {}), where=where)


def run(exp: Experiment, *, trace=None, progress=None, planned=None, jobs: int = 1) -> RunRecord:
    """Simulate ``exp`` and return its RunRecord (``trace``: an in-memory Trace for a training workload).

    @param jobs  local processes for the independent parts of a decomposed run (limits.decompose)

    @param progress  optional progress(sim_time_ns, done, total, data_packet_hops) between simulation slices
                     (done/total: flows or DAG ops; see cosim.engine.ProgressFn)
    @param planned  a training run's ``prepare(exp, trace)`` if already made (not made again)
    """
    if exp.is_training:
        return training.run_training(exp, trace=trace, progress=progress, planned=planned, jobs=jobs)
    if exp.is_inference:
        if trace is not None:
            raise ValueError("a trace applies to a training workload")
        return inference.run_inference(exp, progress=progress, planned=planned)
    if trace is not None:
        raise ValueError("a trace applies to a training workload")
    if exp.is_shared:
        return multi.run_shared(exp, progress=progress, planned=planned, jobs=jobs)
    return flows.run_flows(exp, progress=progress)


def run_with_baseline(exp: Experiment, *, trace=None, progress=None, planned=None, jobs: int = 1) -> list[RunRecord]:
    """[run(exp)], and with ``exp.baseline`` also the same experiment without its faults (named
    ``<name>-baseline``), after it: the faulted run's summary then holds its delay against the baseline
    (cosim.results.metrics.fault_delay_entries)."""
    from cosim.results.metrics import fault_delay_entries  # noqa: PLC0415

    record = run(exp, trace=trace, progress=progress, planned=planned, jobs=jobs)
    if not (exp.faults and exp.baseline):
        return [record]
    clean = dataclasses.replace(exp, faults=(), baseline=False, name=baseline_name(exp))
    base = run(clean, trace=trace, progress=progress, planned=planned, jobs=jobs)
    record.summary.update(fault_delay_entries(record, base))
    return [record, base]


def baseline_name(exp: Experiment) -> str:
    """The run name of ``exp``'s fault-free baseline."""
    return f"{exp.name}-baseline"


def check_faults(exp: Experiment, planned=None, *, trace=None) -> int:
    """Resolve ``exp``'s faults on its fabric (every element must exist and fit its kind); @return how
    many concrete faults the run holds."""
    if not exp.faults:
        return 0
    if exp.is_training:
        p = planned if planned is not None else training.plan(exp, trace)
        fabric, ranks, limit = p.fabric, p.host_of, p.max_sim_time_ns
    else:
        fabric, fs = flows.build(exp)
        ranks, limit = None, flows.max_sim_time_ns(exp, fabric, fs)
    return len(faults.plan(exp.faults, fabric, ranks, seed=exp.seed, max_sim_time_ns=limit).resolved)


def prepare(exp: Experiment, *, trace=None):
    """What must hold before ``exp`` simulates, checked: a training run's trace (every semantic check),
    DAG size and fabric (its training.TrainingPlan, or a shared fabric's multi.SharedPlan, is returned, to
    pass to :func:`run`), and its faults' elements; None for flows."""
    if exp.is_shared:
        return multi.plan(exp)
    if exp.is_inference:
        return inference.plan(exp)
    planned = training.plan(exp, trace) if exp.is_training else None
    check_faults(exp, planned)
    return planned


def output_bytes_estimate(exp: Experiment, planned=None) -> int:
    """An upper estimate of the bytes ``exp``'s results take on disk, from its plan (flows, trace ops x
    iterations, collective calls, ports; a margin for queue samples): what ``cosim run`` checks is free."""
    from cosim.results.store import estimate_bytes  # noqa: PLC0415

    if exp.is_training:
        p = planned if planned is not None else training.plan(exp)
        return estimate_bytes(flows=int(np.count_nonzero(p.dag.kind == DagOpKind.FLOW)),
                              ops=p.trace.n_ops * exp.workload.iterations,
                              collectives=int(np.asarray(p.dag.coll_iteration).size), ports=2 * p.fabric.n_links)
    if exp.is_inference:
        p = planned if planned is not None else inference.plan(exp)
        return inference.output_bytes_estimate(exp, p)
    if exp.is_shared:
        p = planned if planned is not None else multi.plan(exp)
        return estimate_bytes(flows=int(np.count_nonzero(p.dag.columns["kind"] == DagOpKind.FLOW)),
                              ops=sum(j.trace.n_ops * j.job.work.iterations for j in p.jobs if j.is_training),
                              collectives=sum(int(np.asarray(j.dag.coll_iteration).size) for j in p.jobs
                                              if j.is_training), ports=2 * p.fabric.n_links)
    fabric, fs = flows.build(exp)
    return estimate_bytes(flows=int(fs.src.size), ports=2 * fabric.n_links)


def preflight(exp: Experiment, *, trace=None, planned=None) -> None:
    """Check that ``exp``'s fabric, rank placement and attributes can start, without simulating."""
    if exp.is_shared:
        p = planned if planned is not None else multi.plan(exp)
        engine.check_fabric(p.fabric, p.attributes)
        return
    if exp.is_training:
        fabric = (planned if planned is not None else training.plan(exp, trace)).fabric
    elif exp.is_inference:
        fabric = (planned if planned is not None else inference.plan(exp)).fabric
    else:
        fabric = flows.build(exp)[0]
    engine.check_fabric(fabric, attributes_of(exp))


def attributes_of(exp: Experiment) -> dict[str, str]:
    """The ns-3 attributes of a flow, training or inference run of ``exp`` without the NVLink model's
    (a shared fabric's are in its plan)."""
    return run_attributes(exp.network, exp.seed, lossless_mask=exp.lossless_priority_mask())


def describe(exp: Experiment, *, trace=None) -> dict:
    """The resolved plan of ``exp`` without simulating (what ``cosim run --dry-run`` prints).

    Servers, leaves and spines, the realized oversubscription, buffer (per switch class) and PFC headroom
    per switch, the lossless priorities, ranks and ops of a training workload, the simulated-time limit
    (explicit, or derived from the workload: cosim.runs.time_limit), an estimate of its flows and data
    packet-hops (payload packets times the hops of each flow's shortest path; ACKs and control packets not counted), and the
    independent parts its traffic splits into (cosim.runs.decompose).
    """
    if exp.is_training:
        p = training.plan(exp, trace)
        fabric = p.fabric
        flow = p.dag.kind == DagOpKind.FLOW
        src, dst, size = p.src_node[flow], p.dst_node[flow], p.dag.bytes[flow]
        workload = {"ranks": p.trace.n_ranks, "trace_ops": p.trace.n_ops, "dag_ops": p.dag.n_ops,
                    "gpus_per_server": p.gpus_per_server}
        limit = p.max_sim_time_ns
    elif exp.is_inference:
        p = inference.plan(exp)
        fabric = p.fabric
        src, dst, size, dag_ops = inference.first_pass_flows(exp, p)
        workload = {"ranks": p.n_ranks, "requests": p.requests.n, "dag_ops": dag_ops,
                    "gpus_per_server": p.gpus_per_server}
        limit = inference.max_sim_time_ns(exp)
    elif exp.is_shared:
        p = multi.plan(exp)
        fabric = p.fabric
        src, dst, size = p.flows_of()
        workload = {"dag_ops": p.dag.n_ops, "gpus_per_server": p.gpus_per_server}
        workload |= {f"workload {j.job.name}": _placement_line(multi.describe_job(p, j)) for j in p.jobs}
        limit = p.max_sim_time_ns
    else:
        fabric, fs = flows.build(exp)
        src, dst, size = fs.src, fs.dst, fs.size_bytes
        workload = {}
        limit = flows.max_sim_time_ns(exp, fabric, fs)
    attributes = p.attributes if exp.is_shared else attributes_of(exp)
    engine.check_fabric(fabric, attributes)
    resolved = engine.attribute_values(attributes, (
        "HostNic::MtuBytes", "HostNic::HeaderBytes", "SharedBufferMmu::BufferBytes", "FabricSwitch::HeadroomBytes",
        "SharedBufferMmu::LosslessPriorityMask", "EgressPort::LinkFlowControl", "FabricNode::VlBufferBytes",
        "FabricSwitch::PauseFrameBytes", "SharedBufferMmu::PfcEnabled",
        "SharedBufferMmu::ReservedBytes"))
    desc = fabric.describe()
    leaf_ratio = fabric.oversubscription(1)
    leaf_ratio = leaf_ratio[np.isfinite(leaf_ratio)]
    out = {"name": exp.name, "transport": exp.network.transport, "topology": fabric.name,
           "hosts": fabric.n_hosts, "servers": fabric.n_servers, "switches": fabric.n_switches,
           "leaves": int(fabric.tier_ids(1).size), "spines": int(fabric.n_switches - fabric.tier_ids(1).size),
           "oversubscription": float(leaf_ratio.max()) if leaf_ratio.size else 1.0,
           "links": fabric.n_links, "tiers": desc.get("tiers", [])}
    out |= workload
    if exp.faults:
        out["faults"] = check_faults(exp, p if exp.is_training else None)
    out["max_sim_time_ns"] = f"{limit:.6g} ({'explicit' if exp.limits.max_sim_time_ns is not None else 'derived'})"
    out |= _buffers(fabric, resolved, buffers.switch_buffer_bytes(fabric, attributes))
    out |= _estimate(fabric, src, dst, size, int(resolved["HostNic::MtuBytes"]))
    out |= describe_parts(fabric, src, dst)
    if exp.is_training:
        out |= decompose_run.describe(exp, fabric, training.dag_columns(p), gpu_node=p.host_of,
                                      attributes=training.engine_attributes(exp, p))
    elif exp.is_shared:
        out |= decompose_run.describe(exp, fabric, p.dag.columns, gpu_node=np.arange(fabric.n_nodes),
                                      attributes=p.attributes)
    else:
        out |= {"decompose": "whole", "decompose_reason": "flow workloads run whole (a multi-workload run "
                "decomposes its flow workloads)"}
    return out


def _placement_line(d: Mapping) -> str:
    """One workload's placement as --dry-run shows it."""
    what = f"{d['ranks']} ranks" if "ranks" in d else f"{d['flows']} flows, {d['payload_bytes']} B"
    return (f"{d['kind']}, {what}; hosts {_ranges(d['hosts'])} on servers {_ranges(d['servers'])} under "
            f"leaf switch{'es' if len(d['leaves']) > 1 else ''} {_ranges(d['leaves'])}; priority {d['priority']}"
            f" ({'lossless' if d['lossless'] else 'lossy'}), start {d['start_ns']:g} ns")


def _ranges(ids) -> str:
    """[0, 1, 2, 5] → "0-2,5" (in the order given)."""
    out, ids = [], list(ids)
    i = 0
    while i < len(ids):
        k = i
        while k + 1 < len(ids) and ids[k + 1] == ids[k] + 1:
            k += 1
        out.append(str(ids[i]) if k == i else f"{ids[i]}-{ids[k]}")
        i = k + 1
    return ",".join(out)


def _buffers(fabric, attrs: Mapping[str, str], class_buffers: np.ndarray | None) -> dict:
    """Buffer, PFC headroom and shared pool per switch as the switch model sizes them
    (FabricSwitch::SetupBuffers, SharedBufferMmu::Setup) with the buffer of each switch's class
    (``class_buffers``, cosim.network.buffers; None: SharedBufferMmu::BufferBytes everywhere); IB: the input
    buffer of every lane."""
    if attrs["EgressPort::LinkFlowControl"] == "credit":
        return {"flow_control": "credit", "vl_buffer_bytes_per_port_lane": int(attrs["FabricNode::VlBufferBytes"])}
    max_packet = int(attrs["HostNic::MtuBytes"]) + int(attrs["HostNic::HeaderBytes"])
    pfc = attrs["SharedBufferMmu::PfcEnabled"] == "true"
    lossless = bin(int(attrs["SharedBufferMmu::LosslessPriorityMask"])).count("1") if pfc else 0
    fixed = int(attrs["FabricSwitch::HeadroomBytes"])
    # headroom of a port: 2 x its link's BDP + 3 maximum packets + 2 PAUSE frames, unless set
    bdp = fabric.link_rate_bps * fabric.link_delay_ns * 1e-9 / 8
    per_port = np.full(bdp.shape, fixed, np.int64) if fixed else (
        np.ceil(2 * bdp).astype(np.int64) + 3 * max_packet + 2 * int(attrs["FabricSwitch::PauseFrameBytes"]))
    ends = np.concatenate([fabric.link_a, fabric.link_b]).astype(np.int64)
    both = np.concatenate([per_port, per_port])
    switch_port = fabric.node_kind[ends] == SWITCH
    carved = np.bincount(ends, weights=both * lossless, minlength=fabric.n_nodes).astype(np.int64)
    ports = np.bincount(ends, minlength=fabric.n_nodes)
    switches = fabric.node_kind == SWITCH
    buffer = (np.full(fabric.n_nodes, int(attrs["SharedBufferMmu::BufferBytes"]), np.int64) if class_buffers is None
              else np.asarray(class_buffers, np.int64))
    shared = (buffer[switches] - carved[switches]
              - int(attrs["SharedBufferMmu::ReservedBytes"]) * ports[switches] * NUM_PRIORITIES)
    pick = lambda x, f: int(f(x)) if x.size else 0  # noqa: E731
    return {"flow_control": "pfc", "buffer_bytes_per_switch": pick(buffer[switches], np.max),
            "buffer_per_switch_class": "; ".join(buffers.class_table(fabric, buffer)),
            "lossless_priorities": lossless,
            "lossless_priority_mask": f"{int(attrs['SharedBufferMmu::LosslessPriorityMask']):#04x}" if pfc else "-",
            "max_packet_bytes": max_packet,
            "headroom_bytes_per_port_min": pick(both[switch_port], np.min) if lossless else 0,
            "headroom_bytes_per_port_max": pick(both[switch_port], np.max) if lossless else 0,
            "headroom_bytes_per_switch_max": pick(carved[switches], np.max),
            "shared_pool_bytes_per_switch_min": pick(shared, np.min)}


def _estimate(fabric, src: np.ndarray, dst: np.ndarray, size: np.ndarray, mtu: int) -> dict:
    """Flows, payload and data packet-hops (packets × shortest-path hops) of the traffic."""
    return {"flows": int(src.size), "payload_bytes": int(np.asarray(size, np.int64).sum()),
            "data_packet_hops_estimate": data_packet_hops_estimate(fabric, src, dst, size, mtu)}


def data_packet_hops_estimate(fabric, src: np.ndarray, dst: np.ndarray, size: np.ndarray, mtu: int, *,
                              max_sources: int = 64) -> int:
    """Payload packets × shortest-path hops, summed over the flows: the work a simulation does.

    Exact when the flows have at most ``max_sources`` distinct sources; beyond, the hops per packet are
    measured on the flows of ``max_sources`` sources drawn with a fixed seed (one breadth-first search each,
    so a 16k-host fabric costs what a 64-host one does) and scaled to every packet."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    packets = -(-np.asarray(size, np.int64) // max(mtu, 1))
    sources = np.unique(src)
    if sources.size > max_sources:
        sources = np.sort(np.random.default_rng(0).choice(sources, max_sources, replace=False))
    hops = np.zeros(src.size, np.int64)
    measured = np.zeros(src.size, bool)
    for s in sources:
        sel = src == s
        hops[sel] = ideal.hop_counts(fabric, int(s))[dst[sel]]
        measured |= sel
    if measured.all():
        return int((packets * hops).sum())
    sampled = int(packets[measured].sum())
    per_packet = (packets[measured] * hops[measured]).sum() / sampled if sampled else 0.0
    return int(round(per_packet * int(packets.sum())))


def work_estimate(exp: Experiment, planned=None) -> int:
    """The data packet-hops ``exp`` will simulate (its plan's flows on shortest paths; retransmissions and
    control packets not counted): the denominator of the progress line's ETA."""
    attributes = attributes_of(exp)
    mtu = int(engine.attribute_values(attributes, ("HostNic::MtuBytes",))["HostNic::MtuBytes"])
    if exp.is_training:
        p = planned if planned is not None else training.plan(exp)
        flow = p.dag.kind == DagOpKind.FLOW
        return data_packet_hops_estimate(p.fabric, p.src_node[flow], p.dst_node[flow], p.dag.bytes[flow], mtu)
    if exp.is_inference:
        p = planned if planned is not None else inference.plan(exp)
        return data_packet_hops_estimate(p.fabric, *inference.first_pass_flows(exp, p)[:3], mtu)
    if exp.is_shared:
        p = planned if planned is not None else multi.plan(exp)
        return data_packet_hops_estimate(p.fabric, *p.flows_of(), mtu)
    fabric, fs = flows.build(exp)
    return data_packet_hops_estimate(fabric, fs.src, fs.dst, fs.size_bytes, mtu)


def fabric_warning(n_flows: int, n_ranks: int, gpus_per_server: int) -> str | None:
    """Why a training run with ``n_flows`` fabric flows moves nothing over the fabric (so its network
    figures are empty), or None when it does move something."""
    if n_flows:
        return None
    if n_ranks <= gpus_per_server:
        fix = f"--gpus-per-server {max(1, n_ranks // 2)} or fewer" if n_ranks > 1 else "a trace with more ranks"
        return (f"nothing crossed the fabric: all {n_ranks} ranks sit on one server ({gpus_per_server} GPUs per "
                f"server), so every transfer went over NVLink; use {fix} to spread them over servers")
    return ("nothing crossed the fabric: every transfer of the trace stays inside a server (NVLink); "
            "use a smaller --gpus-per-server to spread the groups over servers")
