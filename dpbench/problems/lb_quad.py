"""LB-Quad: the quadratic lower-bound instance of BST14 §5.2 (eqs. 5–7, Theorems 5.4 and 5.5).

ℓ(θ; d) = ½‖θ − d‖² on the ball of radius R, with d drawn from the hard data (docs/instances.md,
'Hard data') with rows of norm ``data_norm`` ≤ R. The average loss is ½‖θ − q‖² + const with q the
mean of the rows, so θ* = Π_C(q) in closed form (q ∈ C already, since ‖q‖ ≤ data_norm ≤ R; it is
projected anyway), and the sum-scale excess is (n/2)‖θ − q‖² (BST14 eq. 7). Lower bounds:
Ω(min(n, p²/(ε²n))) for (ε, 0)-DP (Thm 5.4), Ω(min(n, p/(ε²n))) for (ε, δ)-DP (Thm 5.5).

Constants: Δ = β = 1 per example, and L = R + data_norm, since ∇ℓ = θ − d has norm up to
‖θ‖ + ‖d‖. **Erratum** (docs/bst14.md, Errata item 3): the paper calls this loss 1-Lipschitz, but
on the unit ball with ‖d‖ = 1 it is 2-Lipschitz; privacy must be calibrated with L = 2 there.
The instance and its closed forms: docs/instances.md, 'LB-Quad'.
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
from ._hard_data import HARD_DATA_PARAMS, hard_data

__all__ = ["LBQuad"]


class LBQuad(Problem):
    """Quadratic loss ½‖θ − d‖² on a ball, hard data (BST14 §5.2, Thm 5.4/5.5)."""

    name: ClassVar[str] = "lb_quad"
    summary: ClassVar[str] = "quadratic loss 0.5*||theta - d||^2 on a ball; BST14 lower-bound instance"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM: "
                               "Efficient Algorithms and Tight Error Bounds, §5.2, Thm 5.4/5.5")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "data_norm": Param(1.0, low=0.0, low_open=True,
                           doc="norm of every data row; must not exceed radius"),
        **HARD_DATA_PARAMS,
    }

    radius: float
    data_norm: float
    signal: float
    signal_count: int | None
    data: str

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.data_norm > self.radius:
            raise UserInputError(
                f"problem {self.name!r}: parameter 'data_norm' ({self.data_norm!r}) must not "
                f"exceed parameter 'radius' ({self.radius!r}), so that the mean of the data lies "
                "in C and θ* is the mean (BST14 §5.2)")

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = R + data_norm = sup ‖θ − d‖ over θ ∈ C and the universe (docs/bst14.md, Errata 3)."""
        return self.radius + self.data_norm

    @property
    def strong_convexity(self) -> float:
        return 1.0

    @property
    def smoothness(self) -> float:
        return 1.0

    def kernel(self) -> LossKernel:
        """Compiled ½‖θ − d‖² (:func:`dpbench.numerics.kernels.QUADRATIC` with curvature 1, no kink)."""
        from ..numerics.kernels import QUADRATIC  # numba: only for the compiled paths

        return QUADRATIC(1.0, 0.0)

    def __dpbench_tags__(self) -> ProblemTags:
        """½‖θ − d‖² on B(0, R) with rows of norm data_norm: the Gibbs law is a truncated Gaussian
        (``isotropic_quadratic`` = (data_norm, R)); oracles O3/O4/O7 of docs/bst14.md."""
        return ProblemTags(isotropic_quadratic=(self.data_norm, self.radius),
                           closed_form="lb_quad")

    def data_bounds(self) -> dict[str, float]:
        """Every row has norm ``data_norm`` (the universe {±data_norm/√p}ᵖ, BST14 §5.2)."""
        return {"data_norm": float(self.data_norm)}

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        data = hard_data(n, p, rng, norm=self.data_norm, signal=self.signal, data=self.data,
                         count=self.signal_count)
        return Dataset(data.X, None, data.meta())

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        diff = theta - data.X
        return 0.5 * np.einsum("ij,ij->i", diff, diff)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        return theta - rows

    def solve(self, data: Dataset) -> Optimum:
        """θ* = Π_C(mean of the rows): the average loss is ½‖θ − q‖² + const."""
        theta = self.constraint.project(data.X.mean(axis=0))
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")


@register_exact_sampler("gibbs", LBQuad)
def _lb_quad_gibbs(problem: LBQuad, data: Dataset, k: float, region: ConstraintSet
                   ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of ∝ exp(−(kn/2)‖θ − q‖²), q the mean row, on a ball or an
    intersection of balls (C or C ∩ B(θ₀, r₀)); rejection (oracle O7 of docs/bst14.md)."""
    from ..core.errors import NotApplicable
    from ..numerics.samplers.ball import truncated_gaussian_sampler
    from ..numerics.samplers.mcmc import region_balls

    try:
        centers, radii = region_balls(region, data.p)
    except NotApplicable:  # not an intersection of balls: no exact sampler
        return None
    return truncated_gaussian_sampler(data.X.mean(axis=0), k * data.n, centers, radii)
