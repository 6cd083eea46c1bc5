"""Bounded nonlinear least squares (Levenberg–Marquardt) in numpy, for fitting the compute model.

The parameters are optimised in an unbounded space: each has a transform, ``"log"`` for a positive value
(θ = e^u) or ``"logit"`` for a fraction in (0, 1) (θ = 1/(1+e^-u)) or ``"log1p"`` for a value above 1
(θ = 1 + e^u), so no step can leave its domain. The Jacobian is taken by forward differences in that
space. Deterministic: the same data and start give the same answer bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

TRANSFORMS = ("log", "logit", "log1p")


def _to_free(theta: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    u = np.empty_like(theta)
    for i, (t, k) in enumerate(zip(theta, kinds)):
        if k == "log":
            u[i] = np.log(t)
        elif k == "logit":
            u[i] = np.log(t / (1.0 - t))
        else:
            u[i] = np.log(t - 1.0)
    return u


def _from_free(u: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    theta = np.empty_like(u)
    with np.errstate(over="ignore"):  # a trial step far out: exp overflows to inf, the logit to its limit 0
        for i, (x, k) in enumerate(zip(u, kinds)):
            if k == "log":
                theta[i] = np.exp(x)
            elif k == "logit":
                theta[i] = 1.0 / (1.0 + np.exp(-x))
            else:
                theta[i] = 1.0 + np.exp(x)
    return theta


def least_squares(residuals: Callable[[np.ndarray], np.ndarray], start: Sequence[float], kinds: Sequence[str],
                  *, max_iterations: int = 300, rel_tolerance: float = 1e-12) -> np.ndarray:
    """Parameters θ (float64) minimising ``Σ residuals(θ)²``, starting from ``start``.

    ``residuals`` maps θ to the residual vector (finite for every θ in the domain); ``start`` lies inside the
    domain of each transform; ``kinds`` names one transform per parameter, from ``TRANSFORMS``.
    """
    if len(start) != len(kinds) or any(k not in TRANSFORMS for k in kinds):
        raise ValueError(f"need one transform among {TRANSFORMS} per parameter")
    u = _to_free(np.asarray(start, dtype=np.float64), kinds)
    r = residuals(_from_free(u, kinds))
    cost = float(r @ r)
    damping = 1e-3
    step_u = 1e-6
    for _ in range(max_iterations):
        jac = np.empty((r.size, u.size))
        for j in range(u.size):
            du = np.zeros_like(u)
            du[j] = step_u
            jac[:, j] = (residuals(_from_free(u + du, kinds)) - r) / step_u
        normal = jac.T @ jac
        grad = jac.T @ r
        scale = np.diag(normal) + 1e-12
        while True:
            step = np.linalg.solve(normal + damping * np.diag(scale), -grad)
            r_new = residuals(_from_free(u + step, kinds))
            cost_new = float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                gain = cost - cost_new
                u, r, cost = u + step, r_new, cost_new
                damping = max(damping / 3.0, 1e-9)
                break
            damping *= 4.0
            if damping > 1e10:
                return _from_free(u, kinds)
        if gain <= rel_tolerance * cost:
            break
    return _from_free(u, kinds)
