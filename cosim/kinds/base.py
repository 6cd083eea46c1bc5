"""What every workload kind provides to a run plan, and the registry that maps a kind's name to it.

A kind (flows, training, inference, storage, checkpoint, synthetic) is one class in one module of
:mod:`cosim.kinds`, registered with :func:`register`. The plan (cosim.plan) asks each job's kind, in this
order, for what it needs before the fabric exists (:meth:`WorkloadKind.load`: a trace, requests), how many
servers it takes (:meth:`WorkloadKind.servers`), its ops on the hosts placement gave it
(:meth:`WorkloadKind.lower`: a :class:`Piece` of the run's one DAG, in host node ids), its ideal time (for
the derived time limit) and the NVLink executor settings of its GPUs. After the run it turns its rows of
the outcome into its tables and summary (:meth:`WorkloadKind.results`). A kind whose execution is more
than one simulation of its ops (inference: the batching fixed point) overrides :meth:`WorkloadKind.execute`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cosim.collectives import DagOpKind
from cosim.collectives.dag import BlockTemplates, CommClass
from cosim.errors import CosimInputError
from cosim.workload.trace import AlgoHint, OpKind


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Piece:
    """One job's ops as the engine runs them: DAG columns in host node ids, dependencies local to the piece.

    ``gpu`` is the host node id of the GPU that runs an op (-1: none), ``src_node``/``dst_node`` the hosts of
    a FLOW op (-1 otherwise). ``coll_start_op``/``coll_end_op`` are the local start and end barrier op of
    each collective call (empty for kinds without collectives)."""

    kind: np.ndarray  # uint8 [n], DagOpKind
    gpu: np.ndarray  # int32 [n], host node id (-1: no GPU)
    src_node: np.ndarray  # int32 [n]
    dst_node: np.ndarray  # int32 [n]
    bytes_: np.ndarray  # int64 [n], bytes of a FLOW or NVLINK op
    duration_ns: np.ndarray  # float64 [n], duration of a COMPUTE op, ns
    priority: np.ndarray  # uint8 [n], traffic class the lowering chose (0: the job's priority)
    dep_ptr: np.ndarray  # int32 or int64 [n + 1]
    dep_idx: np.ndarray  # int32 or int64, local op ids
    coll_start_op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    coll_end_op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    comm_class: np.ndarray | None = None  # uint8 [n], CommClass of each op (None: every transfer is NCCL's)
    block: np.ndarray | None = None  # int32 [n], template of every BLOCK op, -1 for the others (None: no BLOCK op)
    block_templates: BlockTemplates | None = None  # their copies, GPUs as host node ids

    @property
    def n_ops(self) -> int:
        """Number of ops."""
        return int(np.asarray(self.kind).size)

    @classmethod
    def of_flow_dag(cls, dag, hosts: np.ndarray, trace=None) -> Piece:
        """The ops of ``dag`` (a cosim.collectives.FlowDag) with every rank replaced by its host
        ``hosts[rank]``; the DAG's own columns are shared, not copied. ``trace`` (the one ``dag`` was lowered
        from): its DeepEP sends set the comm class of the transfers they became."""
        # rank -1 (no GPU) reads the -1 appended after the hosts: one gather, no masked copies
        hosts = np.append(np.asarray(hosts, np.int32), np.int32(-1))
        flow = dag.kind == DagOpKind.FLOW
        on_flow = lambda rank: np.where(flow, hosts[rank], np.int32(-1))  # noqa: E731
        block = None
        if dag.block_op.size:
            block = np.full(dag.n_ops, -1, np.int32)
            block[dag.block_op] = dag.block_tmpl
        return cls(kind=dag.kind, gpu=hosts[dag.rank], src_node=on_flow(dag.rank),  # a transfer's source: its rank
                   dst_node=on_flow(dag.dst), bytes_=dag.bytes, duration_ns=dag.duration_ns,
                   priority=dag.priority, dep_ptr=dag.dep_ptr, dep_idx=dag.dep_idx,
                   coll_start_op=dag.coll_start_op, coll_end_op=dag.coll_end_op,
                   comm_class=None if trace is None else comm_classes(dag, trace), block=block,
                   block_templates=None if block is None else dag.blocks.relabeled(hosts))


def comm_classes(dag, trace) -> np.ndarray | None:
    """uint8 CommClass of every op of ``dag`` lowered from ``trace``: a transfer of a DeepEP SEND or RECV
    is EXPERT (high-throughput kernels) or SM_FREE (low-latency), any other NCCL; None if all are NCCL's."""
    of_hint = np.zeros(len(AlgoHint), np.uint8)  # the trace's hints are AlgoHint values (checked when read)
    of_hint[AlgoHint.DEEPEP_HIGH_THROUGHPUT] = CommClass.EXPERT
    of_hint[AlgoHint.DEEPEP_LOW_LATENCY] = CommClass.SM_FREE
    p2p = (trace.kind == OpKind.SEND) | (trace.kind == OpKind.RECV)
    per_trace_op = np.where(p2p, of_hint[np.asarray(trace.algo_hint, np.int64)], CommClass.NCCL).astype(np.uint8)
    if not per_trace_op.any():
        return None
    transfer = ((dag.kind == DagOpKind.FLOW) | (dag.kind == DagOpKind.NVLINK)) & (dag.trace_op >= 0)
    out = np.zeros(dag.kind.size, np.uint8)
    out[transfer] = per_trace_op[dag.trace_op[transfer]]
    return out


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobPlan:
    """One job of a plan: its spec, its kind, the hosts placement gave it (rank r on hosts[r] for a kind
    with ranks), what its kind loaded and lowered (``state``) and its ops."""

    job: object  # cosim.spec.Job
    index: int
    kind: "WorkloadKind"
    hosts: np.ndarray  # int64, host node ids of its slots
    state: object  # the kind's own: a trace and its FlowDag, flow arrays, a serving plan ...
    piece: Piece


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LowerContext:
    """What a kind may use to lower its job: the plan's fabric, GPUs per server, the run's network spec and
    seed, the hosts of every job by name, and every host's link rate."""

    experiment: object
    fabric: object
    gpus_per_server: int
    slots: dict  # job name -> int64 host ids
    index_of: dict  # job name -> its index in the plan
    link_gbps: np.ndarray  # float64 [n_nodes], each node's fastest link, Gbit/s (a host's: its one link)
    others: tuple  # the other jobs (cosim.spec.Job), for kinds that refer to them
    n_channels: int | None = None  # rings of a ring collective across servers (None: two per NIC of a server)


class WorkloadKind:
    """The interface of a workload kind (module docstring). Subclasses set ``name`` and ``spec`` and
    override what they do differently from these defaults."""

    #: the ``kind`` a TOML table gives
    name: ClassVar[str] = ""
    #: its spec dataclass (cosim.spec)
    spec: ClassVar[type] = object
    #: its slots are ranks (``rankN`` fault elements, collectives, a collective timeout apply)
    ranked: ClassVar[bool] = False
    #: a job of this kind may share the fabric with others (False: it runs alone, the error says why)
    shares_fabric: ClassVar[bool] = True
    #: its execution is several simulations (:meth:`execute`), each of the whole run
    iterates: ClassVar[bool] = False

    def load(self, exp, job, gpus_per_server: int | None, trace=None) -> object:
        """What the job needs before the fabric exists (a trace, requests); None by default. ``trace``: an
        in-memory Trace the caller gave the run (only a training job takes one)."""
        if trace is not None:
            raise CosimInputError("trace", f"a trace applies to a training workload, not to {self.name}")
        return None

    def gpus_per_server(self, loaded) -> int | None:
        """The GPUs per server this job assumes when network.gpus_per_server is unset (None: no opinion)."""
        return None

    def ranks(self, loaded) -> int | None:
        """Ranks the job places (each server takes gpus_per_server of them), None if it takes whole servers."""
        return None

    def lower(self, job, loaded, hosts: np.ndarray, ctx: LowerContext) -> tuple[object, Piece]:
        """(state kept for its results, its ops) on ``hosts``."""
        raise NotImplementedError

    def ideal_ns(self, jp: JobPlan, fabric, nic_bytes_per_s: float) -> float | None:
        """The job's ideal duration from its start, ns (None: no bound; its time limit then runs
        cosim.kinds.time_limit.UNBOUNDED_NS past :meth:`last_arrival_ns`)."""
        raise NotImplementedError

    def last_arrival_ns(self, jp: JobPlan) -> float:
        """When the last work of a job without an ideal bound arrives, from its start, ns (0: all at once)."""
        return 0.0

    def flow_dag(self, state):
        """The FlowDag a ranked kind lowered (its ops' ranks and iterations), None for other kinds."""
        return None

    def executor_attributes(self, jp: JobPlan) -> dict[str, str]:
        """DagExecutor attributes its GPUs need (the NVLink copy model); empty by default."""
        return {}

    def execute(self, plan, jp: JobPlan, simulate) -> tuple[object, object, Piece]:
        """A kind that ``iterates``: (engine output, its state, its ops) of its last simulation, after its
        own simulations, ``simulate(piece, flow_dag)`` running the plan with this job's ops replaced by ``piece``
        (lowered from ``flow_dag``)."""
        raise NotImplementedError

    def results(self, jp: JobPlan, out, rows: np.ndarray | None, flows: dict, first_op: int, *, fabric, state,
                alone: bool, op_table: str = "all") -> tuple[dict, dict]:
        """(summary, tables) of the job from the run's outcome ``out``: ``rows`` are its rows of the ``flows``
        table (None: every row, in order), whose ``transfer`` column it may fill for them; ``first_op`` its
        first op in the DAG, ``state`` what lowering (or its execution) left; ``alone``: the job is the run's
        only one; ``op_table``: the rows of an ops table the run stores (telemetry.op_table; the record drops
        the others, so a kind may leave them out)."""
        return {}, {}

    def config(self, jp: JobPlan, state, plan) -> dict:
        """What the record's config keeps of a run's only job besides the experiment (JSON-able)."""
        return {}

    def describe(self, jp: JobPlan) -> dict:
        """What the dry run says of the job besides its hosts."""
        return {}

    def check(self, exp, job) -> None:
        """Refuse what this kind cannot do in ``exp`` (one-line CosimInputError)."""
        if not self.shares_fabric and len(exp.workloads) > 1:
            raise CosimInputError(f"workloads.{job.name}.kind", f"a {self.name} workload runs alone on its fabric",
                                  "run it as the experiment's only workload")


#: kind name -> its WorkloadKind
KINDS: dict[str, WorkloadKind] = {}


def register(cls: type[WorkloadKind]) -> type[WorkloadKind]:
    """Class decorator: make ``cls`` the kind of its ``name``."""
    if not cls.name or cls.name in KINDS:
        raise ValueError(f"workload kind {cls.name!r} is unnamed or registered twice")
    KINDS[cls.name] = cls()
    return cls


def kind_of(name: str) -> WorkloadKind:
    """The registered kind ``name``."""
    return KINDS[name]
