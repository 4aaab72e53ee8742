"""HUB-1D: the Huberization counterexample of BST14 Appendix A (docs/instances.md, 'HUB-1D').

ℓ(θ; (x, y)) = (y − xθ)₊ on C = [−2, 2] (p = 1 only; L = 1 since |x| ≤ 1, ‖C‖ = 4), with the two
data sets of Appendix A (n₁ = round(n/3) and a₂ = max(round(n/2 − 1/(32h)), 0) rows below):

* **D1:** n₁ rows (x, y) = (−1, 1), i.e. (1 + θ)₊, and n − n₁ rows (1, −1), i.e. (−1 − θ)₊.
  Slopes −(n − n₁) left of −1 and +n₁ right of it, so θ* = −1. **Erratum** (docs/bst14.md, Errata
  item 4): the paper says θ* = 1; as printed the data put the kink and θ* at −1. The Huberized
  minimiser is −1 + h/3 and its excess ≈ n·h/9 [derived].
* **D2:** a₂ rows (−1, 1), i.e. (1 + θ)₊, and n − a₂ rows (1, 1), i.e. (1 − θ)₊. θ* = 1, and the
  slope on (−1, 1) is a₂ − (n − a₂) ≈ max(−1/(16h), −n).

The sum loss is convex piecewise linear with kinks at y/x, so θ* is exact: the best of the kinks
inside C and the two endpoints (gap 0 up to rounding), and the exponential-mechanism density is
piecewise exponential (:mod:`dpbench.numerics.samplers.piecewise`), sampled exactly on any interval
region (the registered ``"gibbs"`` sampler, :mod:`dpbench.core.exact_samplers`).
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import numpy as np
from numba import njit

from ..core.errors import NotApplicable
from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet

__all__ = ["Hub1D", "hinge_residual_loss", "hinge_residual_grad", "HINGE_RESIDUAL"]


@njit(cache=True)
def hinge_residual_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = (yᵢ − ⟨xᵢ, θ⟩)₊."""
    r = y[i]
    for j in range(theta.shape[0]):
        r -= X[i, j] * theta[j]
    return r if r > 0.0 else 0.0


@njit(cache=True)
def hinge_residual_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """−xᵢ where yᵢ − ⟨xᵢ, θ⟩ > 0, else 0 (the subgradient 0 at the kink)."""
    r = y[i]
    for j in range(theta.shape[0]):
        r -= X[i, j] * theta[j]
    for j in range(theta.shape[0]):
        out[j] = -X[i, j] if r > 0.0 else 0.0


def HINGE_RESIDUAL() -> LossKernel:
    """Kernel of (y − ⟨x, θ⟩)₊ (no public parameters)."""
    return LossKernel(hinge_residual_loss, hinge_residual_grad, np.zeros(1))


class Hub1D(Problem):
    """(y − xθ)₊ on [−2, 2] with the Appendix A data sets D1 / D2 (docs/instances.md)."""

    name: ClassVar[str] = "hub_1d"
    summary: ClassVar[str] = "1-D (y - x*theta)_+ on [-2, 2]; BST14 Appendix A Huber counterexample"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM, "
                               "Appendix A (Thm A.1, Lemmas A.2/A.3); docs/instances.md, 'HUB-1D'; "
                               "erratum: docs/bst14.md, Errata item 4")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "dataset": Param("D1", kind="str", choices=("D1", "D2"), doc="Appendix A data set"),
        "h": Param(0.1, low=0.0, low_open=True,
                   doc="Huber parameter h that D2's construction targets (1/(32h) extra rows)"),
    }

    dataset: str
    h: float

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(2.0)

    @property
    def lipschitz(self) -> float:
        """L = max|x| = 1 over the universe x, y ∈ [−1, 1]."""
        return 1.0

    def data_bounds(self) -> dict[str, float]:
        """The universe of BST14 Appendix A: x, y ∈ [−1, 1] (the data sets use x, y = ±1)."""
        return {"data_norm": 1.0, "label_bound": 1.0}

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        """The deterministic data set D1 or D2 (module docstring); draws nothing from ``rng``."""
        if p != 1:
            raise NotApplicable(f"problem 'hub_1d' is one-dimensional (p = 1), got p = {p}")
        if self.dataset == "D1":
            first = min(n, max(0, math.floor(n / 3 + 0.5)))
            X = np.concatenate([-np.ones(first), np.ones(n - first)])
            y = np.concatenate([np.ones(first), -np.ones(n - first)])
        else:
            first = min(n, max(0, math.floor(n / 2 - 1.0 / (32.0 * self.h) + 0.5)))
            X = np.concatenate([-np.ones(first), np.ones(n - first)])
            y = np.ones(n)
        return Dataset(X[:, None], y, {"dataset": self.dataset, "first_block": first})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        return np.maximum(self._residuals(theta, data), 0.0)

    @staticmethod
    def _residuals(theta: np.ndarray, data: Dataset) -> np.ndarray:
        if data.y is None:
            raise ValueError("hub_1d needs labels: Dataset.y is None")
        return data.y - data.X @ np.asarray(theta, dtype=float)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        """−x where y − xθ > 0, else 0 (as the kernel)."""
        active = self._residuals(theta, data) > 0
        out = np.where(active[:, None], -data.X, 0.0)
        return out if idx is None else out[np.atleast_1d(idx)]

    def _kinks(self, data: Dataset) -> np.ndarray:
        """The kinks y/x of the rows with x ≠ 0 (unique)."""
        x = data.X[:, 0]
        nz = x != 0
        return np.unique(data.y[nz] / x[nz]) if data.y is not None else np.empty(0)

    def sum_loss(self, theta: float, data: Dataset) -> float:
        """Σᵢ (yᵢ − xᵢθ)₊ at a scalar θ (BST14's sum scale)."""
        return float(np.sum(self.loss(np.array([theta]), data)))

    def solve(self, data: Dataset) -> Optimum:
        """Exact: the minimum of a convex piecewise-linear function over [−2, 2] is attained at a
        kink inside the interval or at an endpoint, so the best candidate is optimal (gap 0)."""
        lo, hi = -2.0, 2.0
        kinks = self._kinks(data)
        candidates = np.concatenate([[lo, hi], kinks[(kinks > lo) & (kinks < hi)]])
        values = [self.sum_loss(float(t), data) for t in candidates]
        best = int(np.argmin(values))
        theta = np.array([candidates[best]])
        return Optimum(theta=theta, value=values[best] / data.n, gap=0.0,
                       method="closed form (kinks and endpoints)")

    def kernel(self) -> LossKernel:
        return HINGE_RESIDUAL()


@register_exact_sampler("gibbs", Hub1D)
def _hub_1d_gibbs(problem: Hub1D, data: Dataset, k: float, region: ConstraintSet
                  ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of exp(−k·Σℓ) on the interval ``region`` (piecewise exponential), with its
    vectorised form ``draw.many`` (:meth:`PiecewiseExponential.sample` with a size)."""
    from ..numerics.samplers.piecewise import interval_of, piecewise_from_function

    lo, hi = interval_of(region)
    law = piecewise_from_function(lambda t: problem.sum_loss(t, data), problem._kinks(data), lo,
                                  hi, k)

    def draw(rng: np.random.Generator) -> np.ndarray:
        return np.array([float(law.sample(rng))])

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        return law.sample(rng, size)[:, None]

    draw.many = many  # type: ignore[attr-defined]
    return draw
