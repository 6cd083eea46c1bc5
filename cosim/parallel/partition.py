"""Which partition of a partitioned run simulates every host, switch and DAG op, and the links cut between them.

    p = partition(fabric, columns, gpu_node=gpu_node, n_partitions=2)   # or CosimInputError
    p.node_partition, p.op_partition, p.cut_links, p.lookahead_ns, p.describe()

A dependency between two ops crosses no link, so it leaves no time to look ahead: ops joined by dependencies,
and the hosts they run on or send to, stay in one partition (a DAG group: a job, a background workload).
Groups go to partitions heaviest first (payload bytes, then ops), each to the lightest partition so far.
Switches follow their neighbours: round by round, each switch next to placed nodes joins the partition that
most of its links lead to (ties: the partition with the fewest switches so far, then the lowest index), so a
leaf stays with its hosts and the cut falls on the links towards shared switches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.collectives import DagOpKind
from cosim.decompose.parts import components
from cosim.errors import CosimInputError
from cosim.network.topology import HOST


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Partitioning:
    """A run split into partitions (module docstring)."""

    n_partitions: int
    node_partition: np.ndarray  # int32 [n_nodes]
    op_partition: np.ndarray  # int32 [n_ops]
    cut_links: np.ndarray  # int64, ids of the links between two partitions
    lookahead_ns: float  # shortest delay of a cut link (inf: none is cut)
    groups: int  # DAG groups the partitions were made of

    def describe(self) -> dict:
        """What ``cosim run --dry-run`` shows of the partitions."""
        hosts = np.bincount(self.node_partition, minlength=self.n_partitions)
        ops = np.bincount(self.op_partition, minlength=self.n_partitions)
        return {"partitions": self.n_partitions, "partition_groups": self.groups,
                "partition_nodes": [int(h) for h in hosts], "partition_ops": [int(o) for o in ops],
                "partition_cut_links": int(self.cut_links.size),
                "partition_lookahead_ns": float(self.lookahead_ns)}


def partition(fabric, columns: dict, *, gpu_node: np.ndarray, n_partitions: int) -> Partitioning:
    """Split the run of DAG ``columns`` (engine.simulate_dag's) on ``fabric`` into ``n_partitions``
    (``gpu_node``: the host node of every GPU). Raises CosimInputError (field limits.partitions) when the DAG
    has fewer independent groups than partitions, or a cut link has no delay."""
    kind = np.asarray(columns["kind"])
    n_nodes = fabric.n_nodes
    group_of_op, group_of_node, n_groups = _groups(columns, gpu_node, n_nodes)
    if n_groups < n_partitions:
        raise CosimInputError("limits.partitions", f"is {n_partitions}, but the run's ops form {n_groups} "
                              "group(s) that do not depend on each other (a job's ranks wait on one another, so "
                              "a job is never split)", f"set limits.partitions to at most {n_groups}, or run "
                              "more workloads")
    weight = np.bincount(group_of_op, weights=np.where(kind == DagOpKind.FLOW, np.asarray(columns["bytes_"],
                                                                                             np.float64), 0.0),
                         minlength=n_groups)
    ops = np.bincount(group_of_op, minlength=n_groups)
    part_of_group = _spread(weight, ops, n_partitions)
    node_partition = np.full(n_nodes, -1, np.int32)
    placed = group_of_node >= 0
    node_partition[placed] = part_of_group[group_of_node[placed]]
    node_partition[(node_partition < 0) & (np.asarray(fabric.node_kind) == HOST)] = 0  # hosts without ops
    _place_switches(fabric, node_partition, n_partitions)
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    cut = np.flatnonzero(node_partition[a] != node_partition[b])
    delay = np.asarray(fabric.link_delay_ns, np.float64)[cut]
    if cut.size and delay.min() <= 0:
        raise CosimInputError("limits.partitions", f"cuts link {int(cut[np.argmin(delay)])}, which has no "
                              "propagation delay, so no partition could run ahead of the other",
                              "give the fabric's links a delay (network.link_delay_ns > 0) or set "
                              "limits.partitions = 1")
    return Partitioning(n_partitions=n_partitions, node_partition=node_partition,
                        op_partition=part_of_group[group_of_op].astype(np.int32), cut_links=cut,
                        lookahead_ns=float(delay.min()) if cut.size else float("inf"), groups=n_groups)


def _groups(columns: dict, gpu_node: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(group of every op, group of every node or -1, number of groups): the connected components of the
    graph joining each op to its dependencies and to the hosts it runs on or sends to."""
    kind = np.asarray(columns["kind"])
    n_ops = int(kind.size)
    dep_ptr = np.asarray(columns["dep_ptr"], np.int64)
    owner = np.repeat(np.arange(n_ops, dtype=np.int64), np.diff(dep_ptr))
    dep = np.asarray(columns["dep_idx"], np.int64)[:owner.size]
    gpu = np.asarray(columns["gpu"], np.int64)
    on_gpu = np.flatnonzero(gpu >= 0)
    flow = np.flatnonzero(kind == DagOpKind.FLOW)
    # vertices: ops 0..n_ops-1, then nodes n_ops..n_ops+n_nodes-1
    a = np.concatenate([owner, on_gpu, flow, flow])
    b = np.concatenate([dep, n_ops + np.asarray(gpu_node, np.int64)[gpu[on_gpu]],
                        n_ops + np.asarray(columns["src_node"], np.int64)[flow],
                        n_ops + np.asarray(columns["dst_node"], np.int64)[flow]])
    root = components(n_ops + n_nodes, a, b)
    roots, group = np.unique(root[:n_ops], return_inverse=True)
    node_root = root[n_ops:]
    at = np.searchsorted(roots, node_root)
    hit = (at < roots.size) & (roots[np.minimum(at, roots.size - 1)] == node_root)
    return group.astype(np.int64), np.where(hit, at, -1), int(roots.size)


def _spread(weight: np.ndarray, ops: np.ndarray, n_partitions: int) -> np.ndarray:
    """Partition of every group: heaviest first (bytes, then ops, then index) onto the lightest partition."""
    load = np.zeros(n_partitions)
    count = np.zeros(n_partitions, np.int64)
    out = np.empty(weight.size, np.int32)
    for g in np.lexsort((np.arange(weight.size), -ops, -weight)):
        p = int(np.lexsort((np.arange(n_partitions), count, load))[0])
        out[g] = p
        load[p] += weight[g]
        count[p] += 1
    return out


def _place_switches(fabric, node_partition: np.ndarray, n_partitions: int) -> None:
    """Give every unplaced node (switches) the partition most of its links lead to, tier by tier outwards
    from the hosts (module docstring); nodes no placed node reaches go to partition 0."""
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    ends = np.concatenate([a, b])
    others = np.concatenate([b, a])
    switches = np.zeros(n_partitions, np.int64)
    while True:
        open_ = (node_partition[ends] < 0) & (node_partition[others] >= 0)
        if not open_.any():
            break
        nodes, slot = np.unique(ends[open_], return_inverse=True)
        votes = np.zeros((nodes.size, n_partitions), np.int64)
        np.add.at(votes, (slot, node_partition[others[open_]]), 1)
        for i, node in enumerate(nodes.tolist()):
            best = np.flatnonzero(votes[i] == votes[i].max())
            p = int(best[np.argmin(switches[best])])
            node_partition[node] = p
            switches[p] += 1
    node_partition[node_partition < 0] = 0
