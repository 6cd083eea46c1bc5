"""The dry run of a training job too large to plan, or to plan in a dry run's time: estimated from its
per-stage templates, without building its trace or its DAG.

Every rank of a pipeline stage runs the same program (cosim.workload.builder.stage_templates), whose size
does not grow with the data-parallel degree. When the DAG of a generated training workload could not be
planned in the memory available (its lower bound on DAG ops times cosim.memory.PLAN_BYTES_PER_DAG_OP, the
rule cosim.plan.compile refuses a run by), or its trace has more ops than a dry run plans
(cosim.plan.sizes.DRY_RUN_TRACE_OPS; ``--full-plan`` plans it anyway), ``cosim run --dry-run`` prints this
estimate instead:

- exact: the fabric (built), the placement of every rank, the trace ops (templates × ranks of each stage);
- counted by the lowering's own rules (:func:`lowered_counts`): the DAG ops, the fabric flows and those of
  them BLOCK ops start — the plan's own counts wherever every rank of a stage sits alike in its servers;
- estimated: each rank's fabric bytes, collective by collective: a member of an n-rank group sends
  2(n−1)/n·S for an all-reduce and (n−1)/n·S otherwise to its successor in the group (a ring), a SEND its
  bytes to its pipeline peer; only ring edges and peers on other servers cross the fabric. Per rank and
  group kind these are one pseudo-flow, from which the data packet-hops (shortest paths, sampled sources:
  cosim.plan.describe.data_packet_hops_estimate) and the independent parts (cosim.decompose.parts) follow;
- the peak memory: as the plan's dry run counts it (cosim.memory.peak_bytes of the DAG ops and the flows
  BLOCK ops start);
- the run on MPI ranks: enough ranks that each holds its share of the engine's DAG and flows
  (cosim.memory.ENGINE_BYTES_PER_DAG_OP) in :data:`MPI_RANK_BYTES`, a whole number of ranks per zone of a
  three-tier fabric (a zone per rank cuts only the links above the zones), and the expected wall time:
  data packet-hops × :data:`SECONDS_PER_DATA_PACKET_HOP` (one process), divided by the ranks (perfect
  scaling: a lower bound, windows and cut links not counted);
- where the traffic splits into independent parts, the packet-hops and wall time of the largest part
  simulated alone: what a run simulates when the DAG proves its parts identical and folds them onto one.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cosim import engine, memory
from cosim.collectives.lower import algorithm_table, call_counts, call_schedule, send_costs_ns, send_op_counts
from cosim.decompose.parts import describe_parts, flow_parts, too_large_to_search
from cosim.network.transport import run_attributes
from cosim.kinds import training
from cosim.plan import _place, fabric_for, jobs_of, sizes
from cosim.plan.describe import data_packet_hops_estimate, fabric_summary
from cosim.plan.sizes import stage_traffic
from cosim.workload.trace import CollKind, OpKind

#: time of cosim's simulator per data packet-hop, s: the CPU time of a 256-GPU training iteration on a
#: rail-optimized three-tier fabric on this 2-core machine, per data packet-hop (bench/README.md, "Dry runs
#: at 1,000 to 100,000 GPUs")
SECONDS_PER_DATA_PACKET_HOP = 0.4e-6
#: memory one MPI rank of a partitioned run may hold, bytes (a node's share per core on common HPC nodes)
MPI_RANK_BYTES = 8 << 30


def _ring_successor(layout, kind: int) -> np.ndarray:
    """int64 [n_ranks]: every rank's successor in its group of ``kind`` (group order, wrapping; -1: none)."""
    succ = np.full(layout.n_ranks, -1, np.int64)
    groups = np.flatnonzero(layout.group_kind == kind)
    if not groups.size:
        return succ
    lo, hi = layout.group_ptr[groups].astype(np.int64), layout.group_ptr[groups + 1].astype(np.int64)
    counts = hi - lo
    pos = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    nxt = pos + 1
    last = np.cumsum(counts) - 1
    nxt[last] = lo  # the last member's successor is the first
    members = layout.group_ranks.astype(np.int64)
    succ[members[pos]] = members[nxt]
    return succ


def lowered_counts(exp, size: dict, gps: int) -> dict:
    """What the lowering of ``exp``'s generated job (``size``: cosim.plan.sizes.plan_size) would make, counted
    from its stage templates without building either: {"dag_ops", "flows", "block_flows"} (fabric flows in
    all; of them, those BLOCK ops start). Each call is lowered once per distinct (kind, size, algorithm
    hint, members' place in their servers) by the lowering's own rules (cosim.collectives.lower.call_schedule
    and call_counts): a representative rank of each stage stands for the stage's groups and peers, so the
    counts are exact where every rank of a stage sits alike in its servers (any rail-aligned placement)."""
    layout, work = size["layout"], exp.workload
    tuning = training.tuning_for(exp.network, dataclasses.asdict(size["hardware"]))
    names = algorithm_table(work.algorithm)
    blocks = training.uses_blocks(exp, work)
    stage = np.asarray(layout.stage, np.int64)
    counts = {"dag_ops": 0.0, "flows": 0.0, "block_flows": 0.0}
    calls: dict[tuple, tuple[int, int, bool]] = {}
    for st, template in enumerate(size["templates"]):
        ranks = np.flatnonzero(stage == st)
        if not ranks.size:
            continue
        rep, cols = int(ranks[0]), template.cols
        kind = cols["kind"]
        counts["dag_ops"] += ranks.size * np.count_nonzero((kind == OpKind.COMPUTE) | (kind == OpKind.RECV))
        coll = np.flatnonzero(kind == OpKind.COLLECTIVE)
        keys = np.stack([cols[c][coll] for c in ("coll_kind", "gkind", "bytes", "algo_hint")], axis=1)
        uniq, per_rank = np.unique(keys, axis=0, return_counts=True) if coll.size else (keys, np.zeros(0))
        for (kk, g, b, h), c in zip(uniq.tolist(), per_rank.tolist()):
            gid = int(layout.group_of[rep, g])
            members = layout.group_ranks[layout.group_ptr[gid]:layout.group_ptr[gid + 1]].astype(np.int64)
            shape = (kk, b, h, tuple((members // gps - members[0] // gps).tolist()), tuple((members % gps).tolist()))
            if shape not in calls:
                _, (_, lowered) = call_schedule(CollKind(kk), names[CollKind(kk)], h, members, b, gps=gps,
                                                tuning=tuning, chunk_bytes=work.chunk_bytes, n_channels=None)
                calls[shape] = call_counts(lowered, gps, blocks=blocks, flow_blocks=size["flow_blocks"])
            ops, flows, blocked = calls[shape]
            n_calls = c * ranks.size / members.size  # each member's op stands for 1/n of the call
            counts["dag_ops"] += n_calls * ops
            counts["flows"] += n_calls * flows
            counts["block_flows"] += n_calls * flows * blocked
        send = np.flatnonzero(kind == OpKind.SEND)
        nbytes = cols["bytes"][send]
        peer = layout.peer_of[rep, cols["pkind"][send]].astype(np.int64)
        same = peer // gps == rep // gps
        delay = send_costs_ns(nbytes, same, tuning)
        counts["dag_ops"] += ranks.size * int(send_op_counts(nbytes, delay, work.chunk_bytes).sum())
        counts["flows"] += ranks.size * int(np.where(same, 0, -(-nbytes // work.chunk_bytes)).sum())
    return {k: int(round(v)) * work.iterations for k, v in counts.items()}


def mpi_ranks(engine_bytes: float, zones: int) -> int:
    """MPI ranks of a partitioned run: enough that each holds ``engine_bytes`` / ranks in
    :data:`MPI_RANK_BYTES`, and a whole number per zone (``zones`` > 1: at least one zone each)."""
    needed = max(1, int(np.ceil(engine_bytes / MPI_RANK_BYTES)))
    if zones <= 1:
        return needed
    return zones * -(-needed // zones)


def describe(exp, size: dict) -> dict:
    """What ``cosim run --dry-run`` prints for ``exp`` when cosim.plan.sizes.estimated_in_dry_run(``size``):
    the module docstring's figures."""
    layout, templates, work = size["layout"], size["templates"], exp.workload
    gps = exp.network.gpus_per_server or size["hardware"].gpus_per_host
    jobs = jobs_of(exp)
    fabric = fabric_for(exp, jobs, [layout.n_ranks], gps)
    hosts = np.asarray(_place(exp, fabric, jobs, [layout.n_ranks], gps)[jobs[0].name], np.int64)
    server = fabric.host_server[hosts]
    stage = np.asarray(layout.stage, np.int64)
    traffic = [stage_traffic(t, layout, work.chunk_bytes) for t in templates]
    src, dst, nbytes = [], [], []

    def add(peer: np.ndarray, per_stage_bytes: np.ndarray) -> None:
        ranks = np.flatnonzero((peer >= 0) & (per_stage_bytes[stage] > 0))
        ranks = ranks[server[ranks] != server[peer[ranks]]]  # the same server: NVLink, not the fabric
        src.append(hosts[ranks])
        dst.append(hosts[peer[ranks]])
        nbytes.append(per_stage_bytes[stage[ranks]] * work.iterations)

    for g in sorted({g for colls, _, _ in traffic for g in colls}):
        add(_ring_successor(layout, g), np.array([c.get(g, (0.0, 0.0))[0] for c, _, _ in traffic]))
    for pk in sorted({pk for _, sends, _ in traffic for pk in sends}):
        add(layout.peer_of[:, pk].astype(np.int64), np.array([s.get(pk, (0.0, 0.0))[0] for _, s, _ in traffic]))
    src, dst = np.concatenate(src), np.concatenate(dst)
    nbytes = np.round(np.concatenate(nbytes)).astype(np.int64)
    mtu = int(engine.attribute_values(run_attributes(exp.network, 0), ("HostNic::MtuBytes",))["HostNic::MtuBytes"])
    hops = data_packet_hops_estimate(fabric, src, dst, nbytes, mtu)
    counts = lowered_counts(exp, size, gps)
    dag_ops, block_flows = counts["dag_ops"], counts["block_flows"]
    zones = int(fabric.params.get("zones", 1))
    ranks = mpi_ranks((dag_ops + block_flows) * memory.ENGINE_BYTES_PER_DAG_OP, zones)
    one = hops * SECONDS_PER_DATA_PACKET_HOP
    if sizes.too_large(size):  # decided on the DAG-op bound (cosim.plan.sizes), which the count exceeds
        why = (f"the DAG has {dag_ops:.3g} ops, {dag_ops * memory.PLAN_BYTES_PER_DAG_OP / 1e9:.3g} GB to plan "
               f"at {memory.PLAN_BYTES_PER_DAG_OP} B per op, more than half of what this machine holds "
               "(cosim.kinds.training.PLAN_HEADROOM)")
    else:
        why = (f"{size['trace_ops']:.3g} trace ops, more than a dry run plans ({sizes.DRY_RUN_TRACE_OPS:.3g}: "
               "--full-plan plans it whole)")
    out = {"plan": f"estimated from {len(templates)} stage templates: {why}; no trace or DAG op was built"}
    out |= fabric_summary(exp, fabric)
    out |= {"ranks": layout.n_ranks, "parallelism": _parallelism_line(size["parallelism"]), "trace_ops": size["trace_ops"],
            "template_ops_per_stage": [int(t.n) for t in templates],
            "dag_ops": dag_ops, "flow_blocks": "on" if size["flow_blocks"] else "off", "gpus_per_server": gps,
            "flows": counts["flows"], "flows_of_block_ops": block_flows, "rank_pairs": int(src.size),
            "payload_bytes_estimate": int(nbytes.sum()), "data_packet_hops_estimate": hops}
    parts = None if too_large_to_search(fabric, src) else flow_parts(fabric, src, dst)
    out |= describe_parts(fabric, src, dst, parts)
    out |= {"decompose": "not decided (the fold is proved on the DAG's ops, which are not built: --full-plan "
                         "builds them where they fit)"}
    if parts is not None and parts.n_parts > 1:  # what a part simulated alone (a fold's one of them) moves
        part_hops = max(data_packet_hops_estimate(fabric, src[sel], dst[sel], nbytes[sel], mtu)
                        for sel in (parts.flow_part == k for k in range(parts.n_parts)))
        out |= {"data_packet_hops_largest_part_estimate": part_hops,
                "wall_time_largest_part_estimate_s": round(part_hops * SECONDS_PER_DATA_PACKET_HOP)}
    out |= {
            "peak_memory_bytes_estimate": memory.peak_bytes(dag_ops, block_flows),
            "mpi_ranks": ranks,
            "mpi_ranks_rule": f"{memory.ENGINE_BYTES_PER_DAG_OP} B per DAG op (and per flow of a BLOCK op) in "
                              f"{MPI_RANK_BYTES / 2**30:g} GiB "
                              f"per rank, whole ranks per zone ({zones} zone{'s' if zones != 1 else ''})",
            "seconds_per_data_packet_hop": SECONDS_PER_DATA_PACKET_HOP,
            "wall_time_one_process_estimate_s": round(one),
            "wall_time_estimate_s": round(one / ranks)}
    return out


def _parallelism_line(par) -> str:
    """A ParallelismSpec as one line: tp x pp x dp and what else is on."""
    extra = [f"vpp {par.vpp}"] * (par.vpp > 1) + ["sequence parallel"] * par.sequence_parallel \
        + [f"zero {par.zero_stage}"] * (par.zero_stage > 0)
    return f"tp {par.tp} x pp {par.pp} x dp {par.dp}" + (f" ({', '.join(extra)})" if extra else "")
