"""How large a generated training job's plan would be, from its per-stage templates (cosim.workload.builder.
stage_templates), before its trace is built: :func:`cosim.plan.compile` refuses a job this machine cannot
plan (:class:`TooLargeToPlan`), and the dry run estimates it instead (cosim.plan.estimate), as it does a job
too large to plan in a dry run's time (:func:`estimated_in_dry_run`)."""

from __future__ import annotations

import numpy as np

from cosim import memory
from cosim.errors import CosimInputError
from cosim.kinds import training
from cosim.results import exposure
from cosim.workload.trace import CollKind, GroupKind, OpKind


def generated(exp):
    """(model, parallelism, hardware) of ``exp``'s one generated training workload, else None."""
    if not exp.is_training or exp.workloads or exp.workload.model is None:
        return None
    return exp.workload.generation_specs(exp.network.gpus_per_server)


def member_bytes_factor(coll_kind: np.ndarray, n: int) -> np.ndarray:
    """float64: bytes one member of an ``n``-rank group sends per byte of the collective (ring algorithms)."""
    if n <= 1:
        return np.zeros(coll_kind.size)
    return np.where(coll_kind == CollKind.ALL_REDUCE, 2.0 * (n - 1) / n, (n - 1) / n)


def kinds_in_one_server(layout, gpus_per_server: int | None) -> set[int]:
    """The group kinds whose every group lies inside one server of ``gpus_per_server`` GPUs (their calls lower
    to one BLOCK op each; None: none are lowered so)."""
    if gpus_per_server is None:
        return set()
    inside = exposure.groups_inside_servers(layout.group_ptr, layout.group_ranks, gpus_per_server)
    kinds = np.asarray(layout.group_kind)
    return {int(k) for k in np.unique(kinds) if inside[kinds == k].all()}


def stage_traffic(template, layout, chunk_bytes: int, blocked: set[int] = frozenset()):
    """Per pipeline stage template: {group kind: (bytes a member sends, DAG ops)} of its collectives and
    {peer kind: (bytes, chunks)} of its SENDs, and its counts of compute and other ops. A member's DAG ops of a
    call are its chunks, or 1/n of the call's one BLOCK op for a group kind in ``blocked``
    (:func:`kinds_in_one_server`)."""
    kind, size = template.cols["kind"], template.cols["bytes"].astype(np.float64)
    colls = {}
    for g in np.unique(template.cols["gkind"][kind == OpKind.COLLECTIVE]):
        sel = (kind == OpKind.COLLECTIVE) & (template.cols["gkind"] == g)
        n = layout.group_size(GroupKind(g))
        sent = size[sel] * member_bytes_factor(template.cols["coll_kind"][sel], n)
        ops = np.count_nonzero(sel) / n if int(g) in blocked else np.ceil(sent / chunk_bytes).sum()
        colls[int(g)] = (float(sent.sum()), float(ops))
    sends = {}
    for pk in np.unique(template.cols["pkind"][kind == OpKind.SEND]):
        sel = (kind == OpKind.SEND) & (template.cols["pkind"] == pk)
        sends[int(pk)] = (float(size[sel].sum()), float(np.ceil(size[sel] / chunk_bytes).sum()))
    return colls, sends, int(np.count_nonzero(kind == OpKind.COMPUTE))


def plan_size(exp) -> dict | None:
    """Sizes of ``exp``'s one generated training workload from its stage templates ({"layout",
    "templates", "trace_ops", "dag_ops_lower_bound", "parallelism", "hardware"}), or None for any other
    run."""
    specs = generated(exp)
    if specs is None:
        return None
    from cosim.workload.builder import stage_templates  # noqa: PLC0415 - the builder only when generating

    layout, templates = stage_templates(*specs)
    work = exp.workload
    ranks_of_stage = np.bincount(layout.stage, minlength=len(templates))
    trace_ops = sum(int(t.n) * int(r) for t, r in zip(templates, ranks_of_stage))

    def bound(blocked: set[int]) -> float:
        ops = 0.0
        for t, r in zip(templates, ranks_of_stage):
            colls, sends, computes = stage_traffic(t, layout, work.chunk_bytes, blocked)
            ops += r * (computes + sum(c for _, c in colls.values()) + sum(c for _, c in sends.values()))
        return ops * work.iterations

    ops = bound(kinds_in_one_server(layout, specs[2].gpus_per_host if training.uses_blocks(exp) else None))
    flow_blocks = training.uses_flow_blocks(exp, work, ops)
    if flow_blocks:  # every call one BLOCK op
        ops = bound({int(k) for k in np.unique(np.asarray(layout.group_kind))})
    return {"layout": layout, "templates": templates, "trace_ops": trace_ops, "dag_ops_lower_bound": ops,
            "flow_blocks": flow_blocks, "parallelism": specs[1], "hardware": specs[2]}


class TooLargeToPlan(CosimInputError):
    """A generated training job whose DAG this machine cannot plan (:func:`too_large`); ``size`` is its
    :func:`plan_size`, from which the dry run estimates it instead."""

    def __init__(self, size: dict):
        self.size = size
        bound = size["dag_ops_lower_bound"]
        super().__init__("workload.chunk_bytes", f"the run would lower to at least {bound:.3g} DAG ops "
                         f"({bound * memory.PLAN_BYTES_PER_DAG_OP / 1e9:.3g} GB to plan at "
                         f"{memory.PLAN_BYTES_PER_DAG_OP} B per op), more than half the "
                         f"{training.dag_op_limit():.3g} this machine can plan", "cosim run --dry-run estimates it "
                         "from its stage templates; "
                         "raise chunk_bytes, or use fewer GPUs")


def check_plannable(exp) -> None:
    """Raise :class:`TooLargeToPlan` when ``exp``'s generated training job cannot be planned here, before its
    trace is built (a 100,000-GPU trace alone would not fit)."""
    size = plan_size(exp)
    if too_large(size):
        raise TooLargeToPlan(size)


#: trace ops past which ``cosim run --dry-run`` estimates a generated training job from its stage templates
#: instead of planning it (``--full-plan`` plans it anyway): planning takes about 4 µs per trace op on a
#: 2-core machine (the 2,048-GPU Llama-3-405B job, 7.8 M trace ops: 21 s of trace and lowering, 9 s of
#: decomposition), so a larger job's plan would not be the half-minute look a dry run is for
DRY_RUN_TRACE_OPS = 8_000_000


def estimated_in_dry_run(size: dict | None) -> bool:
    """True when the dry run of the job of ``size`` (:func:`plan_size`) is estimated: the job cannot be
    planned here (:func:`too_large`), or its trace has more than :data:`DRY_RUN_TRACE_OPS` ops."""
    return size is not None and (too_large(size) or size["trace_ops"] > DRY_RUN_TRACE_OPS)


def too_large(size: dict | None) -> bool:
    """True when the run of ``size`` (:func:`plan_size`) would be refused for its DAG: its op bound past
    the planning headroom (cosim.kinds.training.beyond_headroom)."""
    return size is not None and training.beyond_headroom(size["dag_ops_lower_bound"])
