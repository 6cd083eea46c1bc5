"""The dry run of a training job too large to plan: estimated from its per-stage templates, without building
its trace or its DAG.

Every rank of a pipeline stage runs the same program (cosim.workload.builder.stage_templates), whose size
does not grow with the data-parallel degree. When the DAG of a generated training workload could not be
planned in the memory available (its lower bound on DAG ops times cosim.memory.PLAN_BYTES_PER_DAG_OP, the
rule cosim.plan.compile refuses a run by: cosim.plan.sizes), ``cosim run --dry-run`` prints this estimate
instead:

- exact: the fabric (built), the placement of every rank, the trace ops (templates × ranks of each stage);
- lower bounds: DAG ops and fabric flows (the bound of cosim.kinds.training.dag_ops_lower_bound, summed
  over the templates: a chunk per ``chunk_bytes`` of what each member must send);
- estimated: each rank's fabric bytes, collective by collective: a member of an n-rank group sends
  2(n−1)/n·S for an all-reduce and (n−1)/n·S otherwise to its successor in the group (a ring), a SEND its
  bytes to its pipeline peer; only ring edges and peers on other servers cross the fabric. Per rank and
  group kind these are one pseudo-flow, from which the data packet-hops (shortest paths, sampled sources:
  cosim.plan.describe.data_packet_hops_estimate) and the independent parts (cosim.decompose.parts) follow;
- the peak memory: the DAG's ops as cosim.plan.describe counts them, and with calls across servers held as
  BLOCK ops (``flow_blocks``) every flow they start (cosim.memory.record_bytes);
- the run on MPI ranks: enough ranks that each holds its share of the engine's DAG and flows
  (cosim.memory.ENGINE_BYTES_PER_DAG_OP) in :data:`MPI_RANK_BYTES`, a whole number of ranks per zone of a
  three-tier fabric (a zone per rank cuts only the links above the zones), and the expected wall time:
  data packet-hops × :data:`SECONDS_PER_DATA_PACKET_HOP` (one process), divided by the ranks (perfect
  scaling: a lower bound, windows and cut links not counted).
"""

from __future__ import annotations

import numpy as np

from cosim import engine, memory
from cosim.decompose.parts import describe_parts
from cosim.network.transport import run_attributes
from cosim.plan import _place, fabric_for, jobs_of
from cosim.plan.describe import data_packet_hops_estimate, fabric_summary
from cosim.plan.sizes import stage_traffic

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


def mpi_ranks(engine_bytes: float, zones: int) -> int:
    """MPI ranks of a partitioned run: enough that each holds ``engine_bytes`` / ranks in
    :data:`MPI_RANK_BYTES`, and a whole number per zone (``zones`` > 1: at least one zone each)."""
    needed = max(1, int(np.ceil(engine_bytes / MPI_RANK_BYTES)))
    if zones <= 1:
        return needed
    return zones * -(-needed // zones)


def describe(exp, size: dict) -> dict:
    """What ``cosim run --dry-run`` prints for ``exp`` when cosim.plan.sizes.too_large(``size``): the module
    docstring's figures."""
    layout, templates, work = size["layout"], size["templates"], exp.workload
    gps = exp.network.gpus_per_server or size["hardware"].gpus_per_host
    jobs = jobs_of(exp)
    fabric = fabric_for(exp, jobs, [layout.n_ranks], gps)
    hosts = np.asarray(_place(exp, fabric, jobs, [layout.n_ranks], gps)[jobs[0].name], np.int64)
    server = fabric.host_server[hosts]
    stage = np.asarray(layout.stage, np.int64)
    traffic = [stage_traffic(t, layout, work.chunk_bytes) for t in templates]
    src, dst, nbytes, chunks = [], [], [], []

    def add(peer: np.ndarray, per_stage_bytes: np.ndarray, per_stage_chunks: np.ndarray) -> None:
        ranks = np.flatnonzero((peer >= 0) & (per_stage_bytes[stage] > 0))
        ranks = ranks[server[ranks] != server[peer[ranks]]]  # the same server: NVLink, not the fabric
        src.append(hosts[ranks])
        dst.append(hosts[peer[ranks]])
        nbytes.append(per_stage_bytes[stage[ranks]] * work.iterations)
        chunks.append(per_stage_chunks[stage[ranks]] * work.iterations)

    for g in sorted({g for colls, _, _ in traffic for g in colls}):
        add(_ring_successor(layout, g), *(np.array([c.get(g, (0.0, 0.0))[i] for c, _, _ in traffic])
                                          for i in (0, 1)))
    call_chunks = int(np.concatenate([np.zeros(0), *chunks]).sum())  # a call's flows; a send's are FLOW ops
    for pk in sorted({pk for _, sends, _ in traffic for pk in sends}):
        add(layout.peer_of[:, pk].astype(np.int64),
            *(np.array([s.get(pk, (0.0, 0.0))[i] for _, s, _ in traffic]) for i in (0, 1)))
    src, dst = np.concatenate(src), np.concatenate(dst)
    nbytes = np.round(np.concatenate(nbytes)).astype(np.int64)
    mtu = int(engine.attribute_values(run_attributes(exp.network, 0), ("HostNic::MtuBytes",))["HostNic::MtuBytes"])
    hops = data_packet_hops_estimate(fabric, src, dst, nbytes, mtu)
    dag_ops = size["dag_ops_lower_bound"]
    flows = int(np.concatenate(chunks).sum())
    sub_flows = call_chunks if size["flow_blocks"] else 0  # BLOCK ops' flows: not DAG ops, the engine holds each
    zones = int(fabric.params.get("zones", 1))
    ranks = mpi_ranks((dag_ops + sub_flows) * memory.ENGINE_BYTES_PER_DAG_OP, zones)
    one = hops * SECONDS_PER_DATA_PACKET_HOP
    out = {"plan": f"estimated from {len(templates)} stage templates: the DAG has at least {dag_ops:.3g} ops, "
                   f"{dag_ops * memory.PLAN_BYTES_PER_DAG_OP / 1e9:.3g} GB to plan at "
                   f"{memory.PLAN_BYTES_PER_DAG_OP} B per op, more than half of what this machine holds "
                   "(cosim.kinds.training.PLAN_HEADROOM); no trace or DAG op was built"}
    out |= fabric_summary(exp, fabric)
    out |= {"ranks": layout.n_ranks, "parallelism": _parallelism_line(size["parallelism"]), "trace_ops": size["trace_ops"],
            "template_ops_per_stage": [int(t.n) for t in templates],
            "dag_ops_lower_bound": int(dag_ops), "flow_blocks": "on" if size["flow_blocks"] else "off",
            "gpus_per_server": gps,
            "rank_pairs": int(src.size), "flows_lower_bound": flows,
            "payload_bytes_estimate": int(nbytes.sum()), "data_packet_hops_estimate": hops}
    out |= describe_parts(fabric, src, dst)
    out |= {"decompose": "not decided (the DAG is not built; cosim.decompose needs its ops)",
            "peak_memory_bytes_estimate": memory.peak_bytes(dag_ops, sub_flows),
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
