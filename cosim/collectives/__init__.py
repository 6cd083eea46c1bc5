"""Lowering of workload traces into DAGs of point-to-point flows (see :mod:`cosim.collectives.lower`).

- :mod:`cosim.collectives.dag` — the :class:`FlowDag` arrays, their builder and :func:`repeat`;
- :mod:`cosim.collectives.algorithms` — one vectorized function per collective algorithm;
- :mod:`cosim.collectives.lower` — trace → FlowDag.
"""

from cosim.collectives.algorithms import Algorithm, Schedule, schedule
from cosim.collectives.dag import DagOpKind, FlowDag, repeat
from cosim.collectives.lower import ALGORITHM_NAMES, lower

__all__ = ["ALGORITHM_NAMES", "Algorithm", "DagOpKind", "FlowDag", "Schedule", "lower", "repeat", "schedule"]
