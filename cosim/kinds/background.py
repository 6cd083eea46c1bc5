"""Background kinds of a shared fabric: storage requests, checkpoint bursts, synthetic datacenter traffic
(generators in cosim.runs.background)."""

from __future__ import annotations

import numpy as np

from cosim.errors import CosimInputError
from cosim.kinds.flows import FlowLevelKind
from cosim.kinds.base import register
from cosim.runs import background


class BackgroundKind(FlowLevelKind):
    """Background traffic: its errors name the job's fields, its draws a stream of (seed, job index)."""

    def flows(self, job, hosts, ctx):
        rng = np.random.default_rng([ctx.experiment.seed, ctx.index_of[job.name]])
        try:
            return self.draw(job.work, hosts, ctx, rng)
        except CosimInputError as exc:
            where = f"workloads.{job.name}"
            field = exc.field.replace("workload", where, 1) if exc.field.startswith("workload") else exc.field
            raise CosimInputError(field, exc.problem, exc.fix) from None

    def draw(self, work, hosts, ctx, rng):
        """The flows of ``work`` on ``hosts``."""
        raise NotImplementedError


def _peers(ctx, refs, kinds) -> np.ndarray:
    """The hosts of the jobs ``refs`` (default: every job of ``kinds``)."""
    refs = refs or tuple(j.name for j in ctx.others if j.kind in kinds)
    return np.concatenate([ctx.slots[r] for r in refs]) if refs else np.zeros(0, np.int64)


@register
class SyntheticKind(BackgroundKind):
    """Poisson flows among the job's own hosts, sizes from a distribution."""

    name = "synthetic"

    def draw(self, work, hosts, ctx, rng):
        return background.synthetic(work, hosts, ctx.link_gbps[hosts], rng)


@register
class StorageKind(BackgroundKind):
    """The job's hosts are storage targets; its clients' hosts read and write."""

    name = "storage"

    def draw(self, work, hosts, ctx, rng):
        return background.storage(work, hosts, _peers(ctx, work.clients, ("training", "flows")),
                                  ctx.link_gbps[hosts], rng)


@register
class CheckpointKind(BackgroundKind):
    """Bursts from the writers' hosts to the job's hosts."""

    name = "checkpoint"

    def draw(self, work, hosts, ctx, rng):
        return background.checkpoint(work, hosts, _peers(ctx, work.writers, ("training",)))
