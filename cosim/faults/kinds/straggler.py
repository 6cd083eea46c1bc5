"""``straggler``: the compute of one rank slowed by a factor, fixed or drawn per iteration or per op.

A ``straggler`` fault names a rank and a mean slowdown ``factor``. With ``distribution = "fixed"`` every
COMPUTE op of the rank takes ``factor`` times its time; with ``"lognormal"`` the factor is drawn from a
lognormal distribution of mean ``factor`` and shape ``sigma`` (the standard deviation of its logarithm),
once per iteration (``per = "iteration"``: a GPU throttled for a whole step) or once per op
(``per = "op"``: jitter). Draws come from a numpy Generator seeded by the run's seed, the kind's code and
the fault's index, so the same Experiment slows the same ops by the same factors. Several stragglers on
one rank multiply.

The scaling is done on the lowered DAG before it is loaded (:meth:`StragglerFault.durations_ns`, through
FaultPlan.durations_ns): the ops' iterations, which the engine's DAG arrays do not carry, pick the draws.
Only COMPUTE ops owned by the rank change (a collective's start latency, owned by no rank, does not), so
everything the network does follows from the later compute, nothing is patched afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cosim import values as v
from cosim.collectives.dag import DagOpKind
from cosim.errors import CosimInputError
from cosim.faults.registry import FaultKind, Param, register

#: how a straggler's factor is drawn
DISTRIBUTIONS = ("fixed", "lognormal")
#: what one draw covers
DRAW_SCOPES = ("iteration", "op")


@register
class StragglerFault(FaultKind):
    name = "straggler"
    code = 7
    elements = ("rank",)
    timed = False
    params = {"factor": Param(v.Real(minimum=1.0, maximum=1e6), 2.0,
                              "mean slowdown of the rank's compute, 2 = twice as long"),
              "distribution": Param(v.Choice(DISTRIBUTIONS), "fixed",
                                    "fixed: every op by factor; lognormal: drawn, mean factor"),
              "sigma": Param(v.Real(minimum=0.0, maximum=10.0), 0.25,
                             "lognormal: standard deviation of the log of a draw"),
              "per": Param(v.Choice(DRAW_SCOPES), "iteration", "lognormal: one draw per iteration or per compute op")}
    doc = ("The rank's COMPUTE ops take factor times as long, or a lognormal draw of mean factor "
           "(training runs; the whole run)")

    def check(self, fault) -> None:
        """A straggler slows its rank from the start of the run: it has no start time of its own."""
        if fault.at_ns != 0:
            raise CosimInputError("faults.at_ns", "a straggler slows its rank for the whole run",
                                  "give at_ns = 0, or leave it out")

    def apply(self, resolved: Sequence, ctx) -> None:
        """Log ``slowed`` at time 0 on the rank's NIC (:meth:`durations_ns` scaled the DAG's compute)."""
        for r in resolved:
            ctx.record(0, r, "slowed", node=int(r.nodes[0]))

    def durations_ns(self, resolved: Sequence, duration_ns: np.ndarray, op_kind: np.ndarray, rank: np.ndarray,
                     iteration: np.ndarray, *, host_of: Sequence[int], seed: int) -> np.ndarray:
        return slowed_durations(duration_ns, op_kind, rank, iteration, stragglers_of(resolved, host_of), seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class Straggler:
    """One slowed rank (the resolved parameters of a ``straggler`` fault)."""

    rank: int
    factor: float  # mean slowdown of the rank's COMPUTE ops (1 = nominal)
    distribution: str = "fixed"  # DISTRIBUTIONS
    sigma: float = 0.25  # lognormal: standard deviation of ln(factor draw)
    per: str = "iteration"  # DRAW_SCOPES
    index: int = 0  # the fault's index in the run (seeds its draws)


def stragglers_of(resolved: Sequence, host_of: Sequence[int]) -> list[Straggler]:
    """The Straggler of every resolved ``straggler`` fault (its rank from its NIC)."""
    rank_of = {int(h): r for r, h in enumerate(np.asarray(host_of).tolist())}
    return [Straggler(rank=rank_of[int(r.nodes[0])], factor=r.fault.get("factor"),
                      distribution=r.fault.get("distribution"), sigma=r.fault.get("sigma"), per=r.fault.get("per"),
                      index=r.index) for r in resolved]


def draw_factors(s: Straggler, n_draws: int, seed: int) -> np.ndarray:
    """float64 [n_draws]: the factors of straggler ``s`` (all ``factor`` when fixed; lognormal of mean
    ``factor``: ln F ~ N(ln factor − sigma²/2, sigma²)), from a Generator seeded by (seed, code, index)."""
    if s.distribution == "fixed" or n_draws == 0:
        return np.full(n_draws, s.factor, np.float64)
    rng = np.random.default_rng([int(seed), StragglerFault.code, int(s.index)])
    return rng.lognormal(np.log(s.factor) - s.sigma**2 / 2, s.sigma, n_draws)


def slowed_durations(duration_ns: np.ndarray, kind: np.ndarray, rank: np.ndarray, iteration: np.ndarray,
                     stragglers: Sequence[Straggler], seed: int) -> np.ndarray:
    """float64 [n_ops]: ``duration_ns`` with the COMPUTE ops of every straggler's rank scaled by its
    factors (per iteration: one factor for all the rank's ops of an iteration; per op: one each)."""
    out = np.asarray(duration_ns, np.float64).copy()
    iteration = np.asarray(iteration, np.int64)
    for s in stragglers:
        ops = np.flatnonzero((np.asarray(kind) == DagOpKind.COMPUTE) & (np.asarray(rank) == s.rank))
        if s.per == "op":
            out[ops] *= draw_factors(s, ops.size, seed)
        else:
            n_iterations = int(iteration.max()) + 1 if iteration.size else 0
            out[ops] *= draw_factors(s, n_iterations, seed)[iteration[ops]]
    return out
