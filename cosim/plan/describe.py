"""What a compiled plan will do, without simulating it: what ``cosim run --dry-run`` prints, the work the
progress line's ETA counts down, and the output size and memory a run needs (to size a batch job)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim import engine, memory
from cosim.collectives.dag import NUM_PRIORITIES
from cosim.decompose import exact as decompose_run
from cosim.decompose.parts import describe_parts, flow_parts, too_large_to_search
from cosim.network import buffers, ideal, planes
from cosim.network.topology import SWITCH
from cosim.plan import RunPlan, flow_classes, placement

#: attributes the dry run shows the resolved value of
SHOWN_ATTRIBUTES = ("HostNic::MtuBytes", "HostNic::HeaderBytes", "SharedBufferMmu::BufferBytes",
                    "FabricSwitch::HeadroomBytes", "SharedBufferMmu::LosslessPriorityMask", "EgressPort::LinkFlowControl",
                    "FabricNode::InputBufferBytes", "FabricNode::InputBufferPortRate", "FabricNode::VlReservedBytes",
                    "FabricSwitch::PauseFrameBytes", "SharedBufferMmu::PfcEnabled",
                    "SharedBufferMmu::ReservedBytes")

#: what a fabric built from switches of a radix (cosim.network.clos) or read from a file adds to the plan
FABRIC_SHOWN = ("switch_radix", "switch_port_gbps", "breakout", "leaves_per_rail", "leaves_per_rail_per_zone",
                "zones", "leaves_per_zone", "aggs_per_zone", "cores_per_plane", "uplinks_per_leaf", "file")


def describe(plan: RunPlan) -> dict:
    """The plan as the dry run prints it: servers, leaves, spines (or aggregation switches) and cores, the
    realized leaf oversubscription (every tier's in ``tiers``), buffer (per switch class) and PFC headroom
    per switch, lossless priorities, each job's placement and size, the time limit (explicit or derived: cosim.kinds.time_limit), flows and data packet-hops (payload packets times
    each flow's shortest-path hops; ACKs and control packets not counted), the independent parts the traffic
    splits into (cosim.decompose.parts), and the peak memory the run needs."""
    exp, fabric = plan.experiment, plan.fabric
    engine.check_fabric(fabric, plan.attributes)
    resolved = engine.attribute_values(plan.attributes, SHOWN_ATTRIBUTES)
    out = fabric_summary(exp, fabric)
    if len(plan.jobs) == 1:
        out |= plan.jobs[0].kind.describe(plan.jobs[0])
    else:
        out |= {f"workload {p.job.name}": placement_line(describe_job(plan, p)) for p in plan.jobs}
    out |= {"dag_ops": plan.dag.n_ops, "gpus_per_server": plan.gpus_per_server}
    if plan.dag.block is not None:  # calls inside one server held as BLOCK ops: the ops they stand for
        out |= {"dag_block_ops": int(np.count_nonzero(plan.dag.block >= 0)),
                "dag_ops_expanded": plan.dag.n_expanded_ops()}
    if plan.faults is not None:
        out["faults"] = len(plan.faults.resolved)
    explicit = exp.limits.max_sim_time_ns is not None
    out["max_sim_time_ns"] = f"{plan.max_sim_time_ns:.6g} ({'explicit' if explicit else 'derived'})"
    out |= _buffers(fabric, resolved, buffers.switch_buffer_bytes(fabric, plan.attributes))
    src, dst, size, count = plan.dag.flows()
    # the parts of the traffic, found once for the decomposition and the lines that show them
    parts = None if too_large_to_search(fabric, src) else flow_parts(fabric, src, dst)
    d = _decomposition(plan, parts)
    out |= {"flows": int(count.sum()), "payload_bytes": int((size * count).sum()),
            "data_packet_hops_estimate": data_packet_hops_estimate(fabric, src, dst, size, _mtu_bytes(plan),
                                                                   count=count)}
    out |= describe_parts(fabric, src, dst, parts, count=count)
    out |= d.describe()
    if plan.partitioning is not None:
        out |= plan.partitioning.describe()
    if d.mode != "whole":
        out["data_packet_hops_simulated_estimate"] = work_estimate(plan, d)
    out |= {"peak_memory_bytes_estimate": peak_memory_bytes(plan)}
    return out


def fabric_summary(exp, fabric) -> dict:
    """The run's name, transport and fabric as the dry run prints them: hosts, servers, switches per tier,
    the leaves' oversubscription, links, every tier (``tiers``; a multi-plane fabric's also per plane) and
    the shape of a fabric built from switches of a radix or in planes."""
    n_planes = planes.nic_planes(fabric)
    leaf = 1 if n_planes == 1 else 2  # a multi-plane fabric's tier 1 is the NICs' port selectors
    leaf_ratio = fabric.oversubscription(leaf)
    leaf_ratio = leaf_ratio[np.isfinite(leaf_ratio)]
    cores = {"cores": int(fabric.tier_ids(leaf + 2).size)} if fabric.tier_ids(leaf + 2).size else {}
    profile = {"profile": exp.network.profile} if exp.network.profile else {}
    shape = ({} if n_planes == 1 else
             {"nic_planes": f"{n_planes} ({fabric.params['nic_port_gbps']:g} Gbps ports of "
                            f"{fabric.params['nic_link_gbps']:g} Gbps NICs; tier 1: the NICs' port selectors)"})
    tiers = fabric.describe().get("tiers", [])
    for t in tiers:
        if n_planes > 1 and t["tier"] >= leaf:  # the planes are copies: each holds its share of a tier
            t["per_plane"] = {"n_switches": t["n_switches"] // n_planes, "n_links": t["n_links"] // n_planes}
    out = {"name": exp.name, "transport": exp.network.transport, **profile, "topology": fabric.name, **shape,
           "hosts": fabric.n_hosts, "servers": fabric.n_servers, "switches": fabric.n_switches,
           "leaves": int(fabric.tier_ids(leaf).size), "spines": int(fabric.tier_ids(leaf + 1).size), **cores,
           "oversubscription": float(leaf_ratio.max()) if leaf_ratio.size else 1.0,
           "links": fabric.n_links, "tiers": tiers}
    return out | {k: fabric.params[k] for k in FABRIC_SHOWN if k in fabric.params}


def _decomposition(plan: RunPlan, parts=None) -> decompose_run.Decomposition:
    """How the run will be simulated: whole, or in parts (and why), as cosim.run.simulate decides (``parts``:
    the flow_parts of its flows, if already found)."""
    reason = plan.whole_only or ("a kind that iterates runs whole" if any(p.kind.iterates for p in plan.jobs)
                                 else None)
    if reason is not None:
        return decompose_run.Decomposition(mode="whole", reason=reason)
    return decompose_run.run_decomposition(plan.experiment, plan.fabric, plan.dag.columns(),
                                           gpu_node=np.arange(plan.fabric.n_nodes), attributes=plan.attributes,
                                           parts=parts)


def peak_memory_bytes(plan: RunPlan) -> int:
    """The memory the run needs at its peak, bytes (memory.peak_bytes of its DAG ops and the flows its BLOCK
    ops start); a decomposed run simulates fewer at once, so this is an upper bound there."""
    return memory.peak_bytes(plan.dag.n_ops, plan.dag.n_block_flows())


def placement_line(d: Mapping) -> str:
    """One job's placement as the dry run shows it."""
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


def _input_buffers(fabric, attrs: Mapping[str, str]) -> dict:
    """InfiniBand: the shared input buffer and per-lane reservation of one physical port, and the largest
    buffer of a link (a link k times the physical port's rate is a trunk of ceil(k) ports, each its own)."""
    port_bytes, reserved = int(attrs["FabricNode::InputBufferBytes"]), int(attrs["FabricNode::VlReservedBytes"])
    port_bps = float(attrs["FabricNode::InputBufferPortRate"].removesuffix("bps"))
    trunk = np.maximum(1, np.ceil(fabric.link_rate_bps * (1 - 1e-6) / port_bps)).astype(np.int64)
    return {"flow_control": "credit", "input_buffer_bytes_per_port": port_bytes,
            "vl_reserved_bytes_per_port": reserved, "input_buffer_port_gbps": port_bps / 1e9,
            "input_buffer_bytes_per_link_max": int(trunk.max(initial=1)) * port_bytes}


def _buffers(fabric, attrs: Mapping[str, str], class_buffers: np.ndarray | None) -> dict:
    """Buffer, PFC headroom and shared pool per switch as the switch model sizes them
    (FabricSwitch::SetupBuffers, SharedBufferMmu::Setup) with the buffer of each switch's class
    (``class_buffers``, cosim.network.buffers; None: SharedBufferMmu::BufferBytes everywhere); IB: the input
    buffers of the links (FabricNode::SetupInputBuffers)."""
    if attrs["EgressPort::LinkFlowControl"] == "credit":
        return _input_buffers(fabric, attrs)
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


def data_packet_hops_estimate(fabric, src: np.ndarray, dst: np.ndarray, size: np.ndarray, mtu: int, *,
                              max_sources: int = 64, count: np.ndarray | None = None) -> int:
    """Payload packets × shortest-path hops, summed over the flows (each ``count`` times, default once): the
    work a simulation does.

    Exact when the flows have at most ``max_sources`` distinct sources; beyond, the hops per packet are
    measured on the flows of ``max_sources`` sources drawn with a fixed seed (one breadth-first search each,
    so a 16k-host fabric costs what a 64-host one does) and scaled to every packet."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    packets = -(-np.asarray(size, np.int64) // max(mtu, 1))
    if count is not None:
        packets = packets * np.asarray(count, np.int64)
    sources = np.unique(src)
    if sources.size > max_sources:
        sources = np.sort(np.random.default_rng(0).choice(sources, max_sources, replace=False))
    # one row of hop counts per measured source, and every flow's row (-1: its source is not measured)
    table = np.stack([ideal.hop_counts(fabric, int(s)) for s in sources]) if sources.size else np.zeros((0, 0))
    row = np.full(fabric.n_nodes, -1, np.int64)
    row[sources] = np.arange(sources.size)
    flow_row = row[src]
    measured = flow_row >= 0
    hops = np.zeros(src.size, np.int64)
    hops[measured] = table[flow_row[measured], dst[measured]]
    if measured.all():
        return int((packets * hops).sum())
    sampled = int(packets[measured].sum())
    per_packet = (packets[measured] * hops[measured]).sum() / sampled if sampled else 0.0
    return int(round(per_packet * int(packets.sum())))


def _mtu_bytes(plan: RunPlan) -> int:
    return int(engine.attribute_values(plan.attributes, ("HostNic::MtuBytes",))["HostNic::MtuBytes"])


def whole_work_estimate(plan: RunPlan) -> int:
    """The data packet-hops of the whole run (its flows on shortest paths; retransmissions and control packets
    not counted; a kind that iterates: its first pass): the run's ``data_packet_hops`` however it is simulated."""
    src, dst, size, count = plan.dag.flows()
    return data_packet_hops_estimate(plan.fabric, src, dst, size, _mtu_bytes(plan), count=count)


def work_estimate(plan: RunPlan, decomposition: decompose_run.Decomposition | None = None) -> int:
    """The data packet-hops the simulation of the plan makes: the whole run's, or when it runs in parts
    (cosim.decompose.exact) the flows of the parts it simulates, one of each class of identical parts (parts
    rerun to the end of the whole run, or a fallback to the whole run, add work beyond it). The denominator of
    the progress line's ETA; ``decomposition``: the plan's if already made."""
    d = _decomposition(plan) if decomposition is None else decomposition
    if d.mode == "whole":
        return whole_work_estimate(plan)
    columns = plan.dag.columns()
    src, dst, size, count = flow_classes(columns, decompose_run.simulated_ops(columns, d))
    return data_packet_hops_estimate(plan.fabric, src, dst, size, _mtu_bytes(plan), count=count)


def output_bytes_estimate(plan: RunPlan) -> int:
    """An upper estimate of the bytes the run's results take on disk, from its plan (flows, ops, collective
    calls, ports; a margin for queue samples): what ``cosim run`` checks is free."""
    from cosim.results.store import estimate_bytes  # noqa: PLC0415 - h5py only when writing

    ranked = [p for p in plan.jobs if p.kind.ranked]
    ops = 0 if plan.experiment.telemetry.op_table == "none" else sum(p.piece.n_ops for p in ranked)
    return estimate_bytes(flows=2 * int(plan.dag.flows()[3].sum()), ops=ops,
                          collectives=int(plan.dag.coll_start_op.size), ports=2 * plan.fabric.n_links)


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


def describe_job(plan, p) -> dict:
    """Where job ``p`` runs and what it sends (JSON-able; stored as config["workloads"])."""
    hosts = np.asarray(p.hosts, np.int64)
    server = plan.fabric.host_server[hosts]
    leaves = placement.server_map(plan.fabric, plan.gpus_per_server).leaf[np.unique(server)]
    j = p.job
    return {"name": j.name, "kind": j.kind, "hosts": hosts.tolist(), "servers": sorted(set(server.tolist())),
            "leaves": sorted(set(leaves.tolist())), "priority": j.priority, "lossless": j.lossless,
            "start_ns": j.start_ns} | p.kind.describe(p)
