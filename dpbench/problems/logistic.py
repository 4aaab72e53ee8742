"""Logistic regression on a ball, optionally with a ridge: a smooth GLM baseline, not in BST14
(docs/instances.md, 'Hinge SVM and logistic').

ℓ(θ; x, y) = log(1 + exp(−y⟨θ, x⟩)) + (ridge/2)‖θ‖² over the ball of radius R, with data from the
linear law of :mod:`dpbench.problems._linear_law`. Constants: L = x_norm + ridge·R (|φ'| ≤ 1),
Δ = ridge, β = x_norm²/4 + ridge (φ'' ≤ 1/4). Losses are evaluated stably with ``np.logaddexp``
and derivatives with ``scipy.special.expit``.

The constrained optimum is certified by :func:`dpbench.numerics.solvers.ball.solve_smooth_ball` (Newton plus
Frank–Wolfe gap); on separable data the unconstrained minimiser is at infinity and θ* lies on
the sphere.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np
from scipy.special import expit

from ..core.problem import Dataset, Optimum
from ..core.tags import ProblemTags
from ..numerics.solvers.ball import SoftplusMargin, solve_smooth_ball
from ._linear_law import MarginLossProblem

__all__ = ["Logistic"]


class Logistic(MarginLossProblem):
    """Average logistic loss (+ ridge) over a ball; synthetic linear-classification data."""

    name: ClassVar[str] = "logistic"
    summary: ClassVar[str] = "logistic loss log(1 + exp(-y<theta, x>)) (+ ridge) on a ball"
    citation: ClassVar[str] = ("Smooth GLM baseline (not in BST14); docs/instances.md, "
                               "'Hinge SVM and logistic'")
    version: ClassVar[str] = "1"

    @property
    def smoothness(self) -> float:
        """β = feature_norm²/4 + ridge: the logistic φ'' ≤ 1/4 and ‖x‖ ≤ feature_norm (x_norm
        for the linear law)."""
        return self.feature_norm**2 / 4.0 + self.ridge

    @staticmethod
    def _phi(margins: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, -margins)

    @staticmethod
    def _dphi(margins: np.ndarray) -> np.ndarray:
        return -expit(-margins)

    def __dpbench_tags__(self) -> ProblemTags:
        """The margin-loss claims for φ(m) = log(1 + e^{−m}), and the softplus form with this
        ridge (objective perturbation's Newton solver
        :class:`~dpbench.numerics.solvers.ball.SoftplusMargin`)."""
        return replace(super().__dpbench_tags__(), softplus_margin=self.ridge)

    def solve(self, data: Dataset) -> Optimum:
        if data.y is None:
            raise ValueError("logistic needs labels: Dataset.y is None")
        objective = SoftplusMargin(data.y[:, None] * data.X, ridge=self.ridge)
        return solve_smooth_ball(objective.risk, objective.grad, objective.hess, data.p,
                                 self.radius)
