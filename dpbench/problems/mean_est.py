"""F1: private mean estimation, the quadratic workhorse of GTU's rates.

docs/instances.md, 'F1 mean estimation', and docs/langevin.md, 'F1: private mean estimation'.

ℓ(θ; d) = ½‖θ − d‖² on C = B(0, R), with data d_i = μ + r·u_i, u_i uniform on the unit sphere,
μ = ``mean_norm``·e₁ and r = ``spread``, ‖μ‖ + r ≤ R (so every row lies in C). Then E d = μ exactly
and tr Cov(d) = r².

Constants: L = 2R (‖θ − d‖ ≤ ‖θ‖ + ‖d‖ ≤ 2R on C × universe), m = M = 1 per example,
diameter 2R; the sensitivity of the mean is ‖d̄ − d̄′‖ ≤ 2R/n = L/n.

Minimisers: the ERM minimiser is d̄ (inside C since every row is), the population minimiser is μ;
excess ERM ½‖θ − d̄‖², excess population ½‖θ − μ‖² (closed form, :meth:`MeanEst.population_excess`).

The Gibbs law at inverse temperature β on the average loss (k = β/n on the sum) is N(d̄, I/β)
truncated to C: the registered ``"gibbs"`` sampler (:mod:`dpbench.core.exact_samplers`) samples
it exactly (rejection, via :func:`dpbench.numerics.samplers.ball.truncated_gaussian_sampler`).
Expected excess ERM p/(2β) when the truncation is negligible (√(p/β) ≪ R − ‖d̄‖); expected
excess population r²/(2n) + p/(2β).
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import numpy as np

from ..core.errors import UserInputError
from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet
from ..core.tags import ProblemTags

__all__ = ["MeanEst"]


class MeanEst(Problem):
    """Private mean estimation ½‖θ − d‖² on B(0, R), d = μ + r·u (F1, docs/instances.md)."""

    name: ClassVar[str] = "mean_est"
    summary: ClassVar[str] = ("private mean estimation 0.5*||theta - d||^2 on a ball, d = mu + r*u "
                              "with u uniform on the sphere (F1)")
    citation: ClassVar[str] = ("Ganesh–Thakurta–Upadhyay (Rashomon sets, Langevin diffusion) and "
                               "Ganesh–Talwar 2020; the quadratic of Bassily–Smith–Thakurta 2014 "
                               "§5.2; instance F1 of docs/instances.md")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "mean_norm": Param(0.25, low=0.0, doc="‖μ‖ (μ = mean_norm·e₁); mean_norm + spread ≤ R"),
        "spread": Param(0.5, low=0.0, doc="r: rows are μ + r·u with u uniform on the sphere"),
    }

    radius: float
    mean_norm: float
    spread: float

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.mean_norm + self.spread > self.radius * (1 + 1e-12):
            raise UserInputError(
                f"problem {self.name!r}: mean_norm + spread ({self.mean_norm!r} + {self.spread!r}) "
                f"must not exceed radius ({self.radius!r}), so that every row lies in C and the "
                "declared L = 2R holds")

    # --- declared constants -------------------------------------------------------------------
    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = 2R = sup ‖θ − d‖ over θ ∈ C and rows in C."""
        return 2.0 * self.radius

    @property
    def strong_convexity(self) -> float:
        return 1.0

    @property
    def smoothness(self) -> float:
        return 1.0

    def kernel(self) -> LossKernel:
        """Compiled ½‖θ − d‖² (:func:`dpbench.numerics.kernels.QUADRATIC`, curvature 1, no kink)."""
        from ..numerics.kernels import QUADRATIC  # numba: only for the compiled paths

        return QUADRATIC(1.0, 0.0)

    def __dpbench_tags__(self) -> ProblemTags:
        """½‖θ − d‖² on B(0, R) with rows of norm ≤ ‖μ‖ + r: the Gibbs law is N(d̄, I/β) truncated
        to C (``isotropic_quadratic`` = (‖μ‖ + r, R)); the F1 curves of docs/langevin.md."""
        return ProblemTags(isotropic_quadratic=(self.mean_norm + self.spread, self.radius),
                           closed_form="mean_est")

    # --- data and losses ----------------------------------------------------------------------
    def data_bounds(self) -> dict[str, float]:
        """Rows μ + r·u have norm ≤ ‖μ‖ + r = mean_norm + spread (the row-norm bound ρ of the
        ``isotropic_quadratic`` tag; ≤ R)."""
        return {"data_norm": float(self.mean_norm + self.spread)}

    def mean(self, p: int) -> np.ndarray:
        """The population mean μ = mean_norm·e₁ (data independent)."""
        mu = np.zeros(p)
        mu[0] = self.mean_norm
        return mu

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        u = rng.standard_normal((n, p))
        u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), np.finfo(float).tiny)
        X = self.mean(p) + self.spread * u
        return Dataset(X, None, {"mean_norm": self.mean_norm, "spread": self.spread})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        diff = np.asarray(theta, dtype=float) - data.X
        return 0.5 * np.einsum("ij,ij->i", diff, diff)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        return np.asarray(theta, dtype=float) - rows

    def solve(self, data: Dataset) -> Optimum:
        """θ* = d̄ (projected onto C, a no-op for valid parameters): L̄ = ½‖θ − d̄‖² + const."""
        theta = self.constraint.project(data.X.mean(axis=0))
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """½‖θ − μ‖²: E ½‖θ − d‖² = ½‖θ − μ‖² + r²/2 and μ ∈ C is the population minimiser."""
        diff = np.asarray(theta, dtype=float) - self.mean(p)
        return 0.5 * float(diff @ diff)


@register_exact_sampler("gibbs", MeanEst)
def _mean_est_gibbs(problem: MeanEst, data: Dataset, k: float, region: ConstraintSet
                    ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of ∝ exp(−k·Σᵢ ½‖θ − dᵢ‖²) = N(d̄, I/(kn)) truncated to ``region`` (a
    ball or an intersection of balls); rejection (Gibbs = N(d̄, I/β), β = kn; docs/instances.md,
    'F1 mean estimation')."""
    from ..core.errors import NotApplicable
    from ..numerics.samplers.ball import truncated_gaussian_sampler
    from ..numerics.samplers.mcmc import region_balls

    try:
        centers, radii = region_balls(region, data.p)
    except NotApplicable:  # not an intersection of balls: no exact sampler
        return None
    return truncated_gaussian_sampler(data.X.mean(axis=0), k * data.n, centers, radii)


@register_exact_sampler("rashomon", MeanEst)
def _mean_est_rashomon(problem: MeanEst, data: Dataset, beta: float, psi: float
                       ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of ∝ exp(−β·max{½‖θ − d̄‖², ψ}) on C = B(0, R) (𝓛 − 𝓛* = ½‖θ − d̄‖²
    since d̄ ∈ C): the radial mixture of docs/langevin.md, 'The Rashomon law on F1', with the
    ball truncation by rejection (:func:`dpbench.numerics.samplers.rashomon.rashomon_radial_sampler`,
    checked against that section's reference values)."""
    from ..numerics.samplers.rashomon import rashomon_radial_sampler

    return rashomon_radial_sampler(data.X.mean(axis=0), beta, psi, problem.constraint)
