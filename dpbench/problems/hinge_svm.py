"""Hinge-loss SVM on a ball, optionally with a ridge (BST14 §1, §5 "SVM hinge" and "Hinge + ridge").

ℓ(θ; x, y) = (1 − y⟨θ, x⟩)₊ + (ridge/2)‖θ‖² over the ball of radius R, with data from the linear
law of :mod:`dpbench.problems._linear_law`. It is the paper's running example of a Lipschitz,
non-smooth loss (β = ∞); the ridge makes it Δ = ridge strongly convex and adds ridge·R to L
(spec §1.1, "folding the regulariser raises the Lipschitz constant").

Subgradient used: −y·x·1[y⟨θ, x⟩ < 1] + ridge·θ (0 is taken at the kink). The constrained optimum is
certified by :func:`dpbench.optimize.solve_hinge_ball` (exact dual bound, gap ≤ 1e-9).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..optimize import solve_hinge_ball
from ..problem import Dataset, Optimum
from ._linear_law import MarginLossProblem

__all__ = ["HingeSVM"]


class HingeSVM(MarginLossProblem):
    """Average hinge loss (+ ridge) over a ball; synthetic linear-classification data."""

    name: ClassVar[str] = "hinge_svm"
    summary: ClassVar[str] = "hinge loss (1 - y<theta, x>)_+ (+ ridge) on a ball; linear-law data"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM: "
                               "Efficient Algorithms and Tight Error Bounds, §1 and Appendix F "
                               "(SVM example)")
    version: ClassVar[str] = "1"

    @staticmethod
    def _phi(margins: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - margins)

    @staticmethod
    def _dphi(margins: np.ndarray) -> np.ndarray:
        return -(margins < 1.0).astype(float)

    def solve(self, data: Dataset) -> Optimum:
        if data.y is None:
            raise ValueError("hinge_svm needs labels: Dataset.y is None")
        return solve_hinge_ball(data.X, data.y, self.radius, ridge=self.ridge)
