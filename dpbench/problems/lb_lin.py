"""LB-Lin: the linear lower-bound instance of BST14 §5.1 (eqs. 3–4, Theorems 5.2 and 5.3).

ℓ(θ; d) = −⟨θ, d⟩ on the ball of radius R (diameter ‖C‖ = 2R), with d drawn from the hard data
(docs/instances.md, 'Hard data'; rows of norm 1). The sum loss is −⟨θ, s⟩ with s = Σdᵢ, so
θ* = R·s/‖s‖ in closed form and the sum-scale excess of θ is R·M − ⟨θ, s⟩ with M = ‖s‖. Every
(ε, 0)-DP algorithm has excess Ω(min(n, p/ε)) (Thm 5.2) and every (ε, δ)-DP algorithm
Ω(min(n, √p/ε)) (Thm 5.3), on the sum scale.

Constants over the universe {±1/√p}ᵖ: L = max‖d‖ = 1, Δ = 0, and β = 0 (a linear loss is smooth
with a zero smoothness constant). The instance and its closed forms: docs/instances.md, 'LB-Lin'.
"""

from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np

from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet
from ..core.tags import ProblemTags
from ._hard_data import HARD_DATA_PARAMS, hard_data

__all__ = ["LBLin"]


class LBLin(Problem):
    """Linear loss −⟨θ, d⟩ on a ball, hard data with ‖d‖ = 1 (BST14 §5.1, Thm 5.2/5.3)."""

    name: ClassVar[str] = "lb_lin"
    summary: ClassVar[str] = "linear loss -<theta, d> on a ball; BST14 lower-bound instance"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM: "
                               "Efficient Algorithms and Tight Error Bounds, §5.1, Thm 5.2/5.3")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        **HARD_DATA_PARAMS,
    }

    radius: float
    signal: float
    signal_count: int | None
    data: str

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = max‖d‖ = 1 over the universe {±1/√p}ᵖ."""
        return 1.0

    @property
    def smoothness(self) -> float:
        """β = 0: the gradient −d does not depend on θ."""
        return 0.0

    def kernel(self) -> LossKernel:
        """Compiled −⟨θ, d⟩ (:func:`dpbench.numerics.kernels.LINEAR` without ridge)."""
        from ..numerics.kernels import LINEAR  # numba: only for the compiled paths

        return LINEAR(0.0)

    def __dpbench_tags__(self) -> ProblemTags:
        """Oracles O1/O2 of docs/bst14.md (ExpMech, NoisySGD) describe this loss and data law."""
        return ProblemTags(closed_form="lb_lin")

    def data_bounds(self) -> dict[str, float]:
        """Every row of the hard data has norm 1 (the universe {±1/√p}ᵖ, BST14 §5.1)."""
        return {"data_norm": 1.0}

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        data = hard_data(n, p, rng, norm=1.0, signal=self.signal, data=self.data,
                         count=self.signal_count)
        return Dataset(data.X, None, data.meta())

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        return -(data.X @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        return -rows

    def solve(self, data: Dataset) -> Optimum:
        """θ* = R·s/‖s‖ with s = Σdᵢ (any point is optimal when s = 0; 0 is returned).

        A sum below the rounding level of the row sum (8·eps·Σ‖dᵢ‖, e.g. the exactly cancelling
        ±c padding summed in floating point) counts as zero: it changes the average loss of any
        point of C by at most R·8·eps·max‖dᵢ‖, far below anything measured.
        """
        s = data.X.sum(axis=0)
        norm = float(np.linalg.norm(s))
        noise = 8.0 * np.finfo(float).eps * float(np.linalg.norm(data.X, axis=1).sum())
        theta = s * (self.radius / norm) if norm > noise else np.zeros(data.p)
        theta = self.constraint.project(theta)
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")


@register_exact_sampler("gibbs", LBLin)
def _lb_lin_gibbs(problem: LBLin, data: Dataset, k: float, region: ConstraintSet
                  ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of ∝ exp(k⟨θ, s⟩) on C, s = Σdᵢ (von Mises–Fisher lift; docs/bst14.md,
    'Exact samplers', and oracle O1).

    Only for the region C itself (``None`` for a localised region).
    """
    if region != problem.constraint:
        return None
    from ..numerics.samplers.ball import tilted_ball_sampler

    return tilted_ball_sampler(data.X.sum(axis=0), k, problem.radius)
