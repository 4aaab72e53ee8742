"""KINK-SC: a kinked strongly convex instance for BST14's localisation (§4) [derived].

ℓ(θ; d) = ‖θ − d‖ + (Δ/2)‖θ − d‖² on the ball C of radius R, with data in C. Per example it is
Δ-strongly convex and non-smooth (a kink at d); ‖∇ℓ‖ = 1 + Δ‖θ − d‖ ≤ 1 + 2ΔR = L over θ, d ∈ C.

Data (parameter ``signal``): d₀ is a uniformly random direction times ``d0_norm`` (drawn from the
generator); k = round(signal·n) rows equal d₀ (at least one), and the other n − k rows are ±c pairs
with c another uniformly random direction times ``d0_norm`` (the padding of docs/instances.md,
'Hard data': ⌈(n − k)/2⌉ copies of c, ⌊(n − k)/2⌋ of −c). Every row has norm d0_norm ≤ R.

* signal = 1 (default): θ* = d₀ exactly, the excess of θ is n(r + Δr²/2) with r = ‖θ − d₀‖, and
  the exponential-mechanism density is radial around d₀ (oracle O6), sampled exactly by
  :mod:`dpbench.numerics.samplers.radial` (the registered ``"gibbs"`` sampler,
  :mod:`dpbench.core.exact_samplers`).
* signal < 1: θ* by the certified 1-median solver :mod:`dpbench.numerics.solvers.median`, since
  (1/n)Σℓ = (1/n)Σ‖θ − dᵢ‖ + (Δ/2)‖θ − q‖² + const with q the row mean.

It separates OutPert (flat in n, O5 = 2pL/(Δε)) from Localize (∝ log n/n, O6) and NoisySGD-SC
(docs/instances.md, 'KINK-SC'; oracles and the reference run in docs/bst14.md, 'Oracle curves and
reference runs'). The strong-convexity parameter is called ``curvature`` to keep it apart from the
privacy δ.
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
from ..core.tags import ProblemTags
from ..numerics.solvers.median import solve_median
from ._hard_data import signal_rows

__all__ = ["KinkSC", "random_direction"]


def random_direction(p: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random unit vector of Rᵖ (a normalised Gaussian)."""
    g = rng.standard_normal(p)
    return g / max(float(np.linalg.norm(g)), np.finfo(float).tiny)


class KinkSC(Problem):
    """‖θ − d‖ + (Δ/2)‖θ − d‖² on a ball, most rows at d₀ (docs/instances.md, 'KINK-SC')."""

    name: ClassVar[str] = "kink_sc"
    summary: ClassVar[str] = "kinked strongly convex ||theta-d|| + (Delta/2)||theta-d||^2"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM; "
                               "derived instance KINK-SC (docs/instances.md)")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "curvature": Param(1.0, low=0.0, low_open=True,
                           doc="per-example strong convexity Δ of (Δ/2)||theta - d||^2"),
        "d0_norm": Param(0.3, low=0.0, doc="norm of d0 (and of the padding rows); <= radius"),
        "signal": Param(1.0, low=0.0, high=1.0, low_open=True,
                        doc="fraction of rows equal to d0; the rest are +-c pairs"),
    }

    radius: float
    curvature: float
    d0_norm: float
    signal: float

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.d0_norm > self.radius:
            raise UserInputError(
                f"problem {self.name!r}: parameter 'd0_norm' ({self.d0_norm!r}) must not exceed "
                f"parameter 'radius' ({self.radius!r}): the data must lie in C (docs/instances.md, "
                "'KINK-SC')")

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = 1 + 2ΔR: ‖∇ℓ‖ = 1 + Δ‖θ − d‖ and ‖θ − d‖ ≤ 2R for θ, d ∈ C."""
        return 1.0 + 2.0 * self.curvature * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.curvature

    def data_bounds(self) -> dict[str, float]:
        """Every row (d₀ and the ±c padding) has norm ``d0_norm`` (≤ R)."""
        return {"data_norm": float(self.d0_norm)}

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        """Draws, in order: d₀'s direction, then c's direction (module docstring)."""
        d0 = self.d0_norm * random_direction(p, rng)
        c = self.d0_norm * random_direction(p, rng)
        k = signal_rows(n, self.signal)
        plus = (n - k + 1) // 2
        X = np.empty((n, p))
        X[:k] = d0
        X[k:k + plus] = c
        X[k + plus:] = -c
        return Dataset(X, None, {"k": k, "d0": d0, "padding": c})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        r = np.linalg.norm(theta - data.X, axis=1)
        return r + 0.5 * self.curvature * r * r

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        """(Δ + 1/r)(θ − d); the subgradient 0 at the kink θ = d (as the QUADRATIC kernel)."""
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        diff = theta - rows
        r = np.linalg.norm(diff, axis=1)
        inv = np.divide(1.0, r, out=np.zeros_like(r), where=r > 0)
        return diff * (self.curvature + inv)[:, None]

    def _single_point(self, data: Dataset) -> np.ndarray | None:
        """d₀ when every row equals the first row, else None."""
        d0 = data.X[0]
        return d0 if bool(np.all(data.X == d0)) else None

    def solve(self, data: Dataset) -> Optimum:
        """θ* = d₀ when all rows are d₀ (closed form); otherwise the certified median solver."""
        d0 = self._single_point(data)
        if d0 is not None and float(np.linalg.norm(d0)) <= self.radius:
            theta = d0.copy()
            return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")
        q = data.X.mean(axis=0)
        sol = solve_median(data.X, self.radius, quad=self.curvature, center=q)
        return Optimum(theta=sol.theta, value=self.risk(sol.theta, data), gap=sol.gap,
                       method=sol.method, iterations=sol.iterations)

    def kernel(self) -> LossKernel:
        """QUADRATIC(Δ, 1): (Δ/2)‖θ − d‖² + 1·‖θ − d‖."""
        from ..numerics.kernels import QUADRATIC  # numba: only for the compiled paths

        return QUADRATIC(self.curvature, 1.0)

    def __dpbench_tags__(self) -> ProblemTags:
        """Oracles O5/O6 of docs/bst14.md (OutPert, Localize) describe this loss and data law."""
        return ProblemTags(closed_form="kink_sc")

    def excess_sum(self, theta: np.ndarray, data: Dataset) -> float:
        """Sum-scale excess n(r + Δr²/2) of θ when every row is d₀ (docs/instances.md, 'KINK-SC');
        NaN otherwise."""
        d0 = self._single_point(data)
        if d0 is None:
            return math.nan
        r = float(np.linalg.norm(np.asarray(theta, dtype=float) - d0))
        return data.n * (r + 0.5 * self.curvature * r * r)


@register_exact_sampler("gibbs", KinkSC)
def _kink_sc_gibbs(problem: KinkSC, data: Dataset, k: float, region: ConstraintSet
                   ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler when every row equals d₀: θ ∝ exp(−kn(r + Δr²/2)), r = ‖θ − d₀‖ (O6).

    The radius law r^{p−1}exp(−a·r − b·r²) with a = kn, b = knΔ/2 is drawn exactly, the
    direction uniformly, and points outside ``region`` are rejected. ``None`` for other data.
    The vectorised forms (:mod:`dpbench.core.exact_samplers`): ``draw.many`` and, on an
    intersection of balls, ``draw.many_at`` (the same rejection per row).
    """
    # imported here: the samplers package imports the ExpMech machinery, which problems need
    # only when a sampler is requested
    from ..core.errors import NotApplicable
    from ..numerics.samplers.mcmc import region_balls
    from ..numerics.samplers.radial import (
        sample_radial_in_balls_rows,
        sample_radial_in_region,
        sample_radial_in_region_many,
    )

    d0 = problem._single_point(data)
    if d0 is None:
        return None
    a = float(k) * data.n
    b = 0.5 * a * problem.curvature
    center = d0.copy()

    def draw(rng: np.random.Generator) -> np.ndarray:
        return sample_radial_in_region(rng, center, a, b, region)

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        return sample_radial_in_region_many(rng, center, a, b, region, size)

    draw.many = many  # type: ignore[attr-defined]
    try:
        _, radii = region_balls(region, data.p)
    except NotApplicable:  # not an intersection of balls: no per-row form
        return draw

    def many_at(rng: np.random.Generator, row_centers: np.ndarray) -> np.ndarray:
        return sample_radial_in_balls_rows(rng, center, a, b, row_centers, radii)

    draw.many_at = many_at  # type: ignore[attr-defined]
    return draw
