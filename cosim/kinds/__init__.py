"""Workload kinds, one module each, registered by name (cosim.kinds.base: what a kind provides).

    kind_of("training").ranks(trace)
"""

from cosim.kinds import background, flows, inference, training  # noqa: F401 - each registers its kinds
from cosim.kinds.base import KINDS, JobPlan, Piece, WorkloadKind, kind_of, register

__all__ = ["KINDS", "JobPlan", "Piece", "WorkloadKind", "kind_of", "register"]
