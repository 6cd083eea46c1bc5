"""Flow-level runs: an Experiment with a flow workload → fabric + flows → ns-3 → a RunRecord."""

from __future__ import annotations

from cosim import engine
from cosim import faults as cosim_faults
from cosim.errors import CosimInputError
from cosim.network import telemetry, topology
from cosim.network.transport import run_attributes
from cosim.results import RunRecord
from cosim.runs import time_limit
from cosim.runs.experiment import Experiment, to_document
from cosim.workload import flows as patterns

#: leaf size of a flow workload's leaf-spine when network.hosts_per_leaf is not set, NICs
DEFAULT_HOSTS_PER_LEAF = 4


def build(exp: Experiment):
    """Return (fabric, flows) for ``exp``: ``network.hosts`` NICs, ``gpus_per_server`` per server (default
    8 on rail-optimized, else 1), one flow per host in the workload's pattern."""
    net = exp.network
    gps = net.gpus_per_server or (8 if net.topology == "rail-optimized" else 1)
    if net.hosts % gps:
        raise CosimInputError("network.hosts", f"{net.hosts} NICs do not fill servers of {gps} GPUs",
                              f"use a multiple of {gps} or set network.gpus_per_server")
    fabric = topology.for_network(net, servers=net.hosts // gps, gpus_per_server=gps,
                                  hosts_per_leaf=net.hosts_per_leaf or DEFAULT_HOSTS_PER_LEAF)
    hosts, size = fabric.host_ids, exp.workload.flow_bytes
    flows = (patterns.incast(hosts, size_bytes=size) if exp.workload.pattern == "incast"
             else patterns.permutation(hosts, size_bytes=size))
    return fabric, flows


def max_sim_time_ns(exp: Experiment, fabric, flows) -> float:
    """``limits.max_sim_time_ns``, else the limit derived from the flows (cosim.runs.time_limit)."""
    if exp.limits.max_sim_time_ns is not None:
        return exp.limits.max_sim_time_ns
    return time_limit.limit_ns(time_limit.flows_ideal_ns(fabric, flows.src, flows.dst, flows.size_bytes,
                                                         flows.start_ns))


def run_flows(exp: Experiment, *, progress=None) -> RunRecord:
    """Simulate ``exp``'s flows and return its RunRecord."""
    fabric, flows = build(exp)
    attributes = run_attributes(exp.network, exp.seed, lossless_mask=exp.lossless_priority_mask())
    interval = exp.telemetry.queue_sample_interval_ns
    limit = max_sim_time_ns(exp, fabric, flows)
    faults = cosim_faults.plan(exp.faults, fabric, seed=exp.seed, max_sim_time_ns=limit)
    out = engine.simulate(fabric, flows, seed=exp.seed, attributes=attributes, queue_sample_interval_ns=interval,
                          max_sim_time_ns=limit, progress=progress,
                          setup=None if faults is None else faults.setup)
    tables = telemetry.network_tables(fabric, out, src=flows.src, dst=flows.dst, size_bytes=flows.size_bytes,
                                      start_ns=flows.start_ns)
    summary = telemetry.network_summary(fabric, out, tables, queue_sample_interval_ns=interval)
    provenance = telemetry.provenance(seed=exp.seed, wall_time_s=out.wall_time_s)
    config = {"experiment": to_document(exp), "fabric": fabric.describe(), "attributes": attributes}
    if faults is not None:
        tables["faults"], config["faults"], extra = faults.results(out)
        summary |= extra
    tables |= cosim_faults.mechanism_tables(fabric, out, faults, table=tables.get("faults"))
    return RunRecord(name=exp.name, config=config, provenance=provenance, summary=summary, **tables)
