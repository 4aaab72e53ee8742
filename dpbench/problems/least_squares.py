"""The squared loss on a Euclidean ball, optionally with a ridge, whatever the data (the loss of
``real_least_squares``, docs/datasets.md).

ℓ(θ; x, y) = ½(⟨θ, x⟩ − y)² + (ridge/2)‖θ‖² over the ball of radius R, over the data universe
‖x‖ ≤ B (``feature_norm``) and |y| ≤ Y (``label_bound``). Constants:

* L = (R·B + Y)·B + ridge·R: ∇ℓ = (⟨θ, x⟩ − y)·x + ridge·θ and |⟨θ, x⟩ − y| ≤ R·B + Y on C;
* Δ = ridge (xxᵀ is singular, so the ridge is the only per-example strong convexity);
* β = B² + ridge (∇²ℓ = xxᵀ + ridge·I ≼ (B² + ridge)·I).

It is a generalised linear model: ∇²ℓ − ridge·I = xxᵀ has rank 1 and a replaced example moves
the gradient within span{x, x′} — the same KST12 rank claims as the margin losses.

The constrained optimum of the average loss is certified by
:func:`dpbench.numerics.solvers.ball.solve_smooth_ball` (Newton, then the secular equation when
θ* is on the sphere; the Frank–Wolfe gap is the certificate), on the quadratic
F(θ) = ½θᵀ(XᵀX/n + ridge·I)θ − ⟨Xᵀy/n, θ⟩ + ‖y‖²/(2n).
"""

from __future__ import annotations

import numpy as np

from ..core.kernel import LossKernel
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet
from ..core.tags import ProblemTags
from ..numerics.jit import cached_njit
from ..numerics.solvers.ball import solve_smooth_ball

__all__ = ["SQUARED", "SquaredLoss"]


@cached_njit
def squared_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = ½(⟨θ, x⟩ − y)² + (prm[0]/2)‖θ‖²."""
    r = -y[i]
    sq = 0.0
    for j in range(theta.shape[0]):
        r += theta[j] * X[i, j]
        sq += theta[j] * theta[j]
    return 0.5 * r * r + 0.5 * prm[0] * sq


@cached_njit
def squared_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """(⟨θ, x⟩ − y)·x + prm[0]·θ."""
    r = -y[i]
    for j in range(theta.shape[0]):
        r += theta[j] * X[i, j]
    for j in range(theta.shape[0]):
        out[j] = r * X[i, j] + prm[0] * theta[j]


def SQUARED(ridge: float = 0.0) -> LossKernel:
    """Kernel of ½(⟨θ, x⟩ − y)² + (ridge/2)‖θ‖²."""
    return LossKernel(squared_loss, squared_grad, np.array([float(ridge)]))


def _labelled(data: Dataset) -> np.ndarray:
    if data.y is None:
        raise ValueError("the squared loss needs labels: Dataset.y is None")
    return data.y


class SquaredLoss(Problem):
    """½(⟨θ, x⟩ − y)² + (ridge/2)‖θ‖² on a ball; subclasses give the data (``generate``,
    ``params``) and the universe's bounds ``feature_norm`` and ``label_bound``."""


    radius: float
    ridge: float

    @property
    def feature_norm(self) -> float:
        """B: a bound on ‖x‖ over the data universe (a public parameter)."""
        raise NotImplementedError

    @property
    def label_size(self) -> float:
        """Y: a bound on |y| over the data universe (a public parameter)."""
        raise NotImplementedError

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = (R·B + Y)·B + ridge·R (module docstring)."""
        B = self.feature_norm
        return (self.radius * B + self.label_size) * B + self.ridge * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    @property
    def smoothness(self) -> float:
        """β = B² + ridge."""
        return self.feature_norm**2 + self.ridge

    def data_bounds(self) -> dict[str, float]:
        """‖x‖ ≤ B and |y| ≤ Y: the universe L is proved over."""
        return {"data_norm": float(self.feature_norm), "label_bound": float(self.label_size)}

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        r = data.X @ theta - _labelled(data)
        return 0.5 * r * r + 0.5 * self.ridge * float(theta @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        y = _labelled(data)
        X, y = (data.X, y) if idx is None else (data.X[np.atleast_1d(idx)],
                                                 y[np.atleast_1d(idx)])
        out = (X @ theta - y)[:, None] * X
        if self.ridge:
            out += self.ridge * theta
        return out

    def kernel(self) -> LossKernel:
        return SQUARED(self.ridge)

    def __dpbench_tags__(self) -> ProblemTags:
        """∇²ℓ − ridge·I = xxᵀ has rank 1; a replaced example moves the gradient within
        span{x, x′} (KST12's rank condition, as for the margin losses)."""
        return ProblemTags(hessian_rank=1, gradient_shift_dim=2)

    def solve(self, data: Dataset) -> Optimum:
        X, y = data.X, _labelled(data)
        n = X.shape[0]
        A = X.T @ X / n
        A[np.diag_indices_from(A)] += self.ridge
        b = X.T @ y / n

        def risk(theta: np.ndarray) -> float:
            return float(np.mean(self.loss(theta, data)))

        return solve_smooth_ball(risk, lambda t: A @ t - b, lambda t: A, data.p, self.radius)
