"""Linear loss plus ridge, for Δ sweeps at fixed L (docs/instances.md, 'Linear + ridge').

ℓ(θ; d) = −⟨θ, d⟩ + (Δ/2)‖θ‖² on the ball C of radius R, with every row of norm ``data_norm``:
‖∇ℓ‖ = ‖−d + Δθ‖ ≤ data_norm + ΔR = L, and Δ = β = ``ridge`` per example. The average loss is
(Δ/2)‖θ − q/Δ‖² + const with q the row mean, so θ* = Π_C(q/Δ) in closed form (gap 0).

Data law: a biased sign vector, every row in {±data_norm/√p}ᵖ (so ‖d‖ = data_norm exactly), with
the coordinates independent and P(dⱼ = +data_norm/√p) = (1 + mean_norm/data_norm)/2. The mean is
μ = mean_norm·u with u = (1, …, 1)/√p (one fixed direction is as hard as any: the mechanisms are
equivariant under coordinate sign flips, docs/instances.md, 'Hard data'). With mean_norm/Δ < R, θ*
is interior for large n. Population excess in closed form: TrueRisk(θ) = −⟨θ, μ⟩ + (Δ/2)‖θ‖²,
minimised over C at Π_C(μ/Δ).
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar

import numpy as np

from ..core.errors import UserInputError
from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet

__all__ = ["LinearRidge"]


class LinearRidge(Problem):
    """−⟨θ, d⟩ + (Δ/2)‖θ‖² on a ball, biased-sign data of small mean (docs/instances.md)."""

    name: ClassVar[str] = "linear_ridge"
    summary: ClassVar[str] = "linear -<theta, d> + (ridge/2)||theta||^2 on a ball (Delta sweeps)"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM; "
                               "linear + ridge family, docs/instances.md, 'Linear + ridge'")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "ridge": Param(1.0, low=0.0, low_open=True, doc="Delta = beta = ridge per example"),
        "data_norm": Param(1.0, low=0.0, low_open=True, doc="norm of every data row"),
        "mean_norm": Param(0.1, low=0.0, doc="norm of the law's mean mu (<= data_norm)"),
    }

    radius: float
    ridge: float
    data_norm: float
    mean_norm: float

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.mean_norm > self.data_norm:
            raise UserInputError(
                f"problem {self.name!r}: parameter 'mean_norm' ({self.mean_norm!r}) must not "
                f"exceed parameter 'data_norm' ({self.data_norm!r})")

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = data_norm + ΔR = sup ‖−d + Δθ‖ over ‖d‖ = data_norm and θ ∈ C."""
        return self.data_norm + self.ridge * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    @property
    def smoothness(self) -> float:
        return self.ridge

    def data_bounds(self) -> dict[str, float]:
        """Every row has norm ``data_norm`` (the universe {±data_norm/√p}ᵖ)."""
        return {"data_norm": float(self.data_norm)}

    def mean(self, p: int) -> np.ndarray:
        """The law's mean μ = mean_norm·(1, …, 1)/√p."""
        return np.full(p, self.mean_norm / math.sqrt(p))

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        """n i.i.d. rows: independent signs with P(+) = (1 + mean_norm/data_norm)/2, times
        data_norm/√p."""
        plus = rng.random((n, p)) < 0.5 * (1.0 + self.mean_norm / self.data_norm)
        X = np.where(plus, 1.0, -1.0) * (self.data_norm / math.sqrt(p))
        return Dataset(X, None, {"mu": self.mean(p)})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return -(data.X @ theta) + 0.5 * self.ridge * float(theta @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        return -rows + self.ridge * np.asarray(theta, dtype=float)

    def _minimiser(self, mean: np.ndarray) -> np.ndarray:
        """argmin over C of −⟨θ, m⟩ + (Δ/2)‖θ‖² = Π_C(m/Δ)."""
        return self.constraint.project(mean / self.ridge)

    def solve(self, data: Dataset) -> Optimum:
        """θ* = Π_C(q/Δ) with q the row mean (closed form, gap 0)."""
        theta = self._minimiser(data.X.mean(axis=0))
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")

    def kernel(self) -> LossKernel:
        from ..numerics.kernels import LINEAR  # numba: only for the compiled paths

        return LINEAR(self.ridge)

    def _true_risk(self, theta: np.ndarray, mu: np.ndarray) -> float:
        return -float(theta @ mu) + 0.5 * self.ridge * float(theta @ theta)

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """Closed form: TrueRisk(θ) − TrueRisk(Π_C(μ/Δ)) with TrueRisk(θ) = −⟨θ, μ⟩ + (Δ/2)‖θ‖²."""
        mu = self.mean(p)
        theta = np.asarray(theta, dtype=float)
        return self._true_risk(theta, mu) - self._true_risk(self._minimiser(mu), mu)


@register_exact_sampler("gibbs", LinearRidge)
def _linear_ridge_gibbs(problem: LinearRidge, data: Dataset, k: float, region: ConstraintSet
                        ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of exp(−k·Σℓ) ∝ exp(−(knΔ/2)‖θ − q/Δ‖²) on a ball or an intersection of
    balls: Σℓ = (nΔ/2)‖θ − q/Δ‖² + const, a truncated Gaussian (rejection; oracle O7 of
    docs/bst14.md)."""
    from ..numerics.samplers.ball import truncated_gaussian_sampler
    from ..numerics.samplers.mcmc import region_balls

    centers, radii = region_balls(region, data.p)
    q = data.X.mean(axis=0)
    return truncated_gaussian_sampler(q / problem.ridge, k * data.n * problem.ridge, centers,
                                      radii)
