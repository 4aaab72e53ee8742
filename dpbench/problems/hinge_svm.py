"""Hinge-loss SVM on a ball, optionally with a ridge (BST14 §1's SVM example).

ℓ(θ; x, y) = (1 − y⟨θ, x⟩)₊ + (ridge/2)‖θ‖² over the ball of radius R, with data from the linear
law of :mod:`dpbench.problems._linear_law`. It is the paper's running example of a Lipschitz,
non-smooth loss (β = ∞); the ridge makes it Δ = ridge strongly convex and adds ridge·R to L
(folding the regulariser raises the Lipschitz constant: docs/instances.md, 'Conventions'; the
instance: 'Hinge SVM and logistic').

Subgradient used: −y·x·1[y⟨θ, x⟩ < 1] + ridge·θ (0 is taken at the kink). The constrained optimum is
certified by :func:`dpbench.numerics.solvers.ball.solve_hinge_ball` (exact dual bound, stopping at gap ≤
:data:`SOLVE_TOL` = 1e-11).

**Default radius R = 3 (version 2).** The kink of example (x, y) is the hyperplane y⟨θ, x⟩ = 1, at
distance 1/‖x‖ = 1/x_norm from the origin, so it meets the interior of C only when R·x_norm > 1.
Version 1 had R = x_norm = 1: every margin was ≤ ‖θ‖‖x‖ ≤ 1 with equality only on the sphere, so
on the interior of C the hinge was exactly the linear loss 1 − y⟨θ, x⟩ and "non-smooth hinge"
results were linear-loss results. BST14 (§1, Appendix F) allow any ‖C‖ and ‖x‖ ≤ L; what makes
the SVM example non-smooth is the kink being reachable, which needs R > 1/x_norm. With x uniform
on the sphere a margin at ‖θ‖ = R is about R·x_norm/√p in size, so R = 3 (x_norm = 1) puts the
kinks of a large fraction of examples inside C for the dimensions the suites use, while keeping
the diameter moderate (D = 6). Measured on the law (label_noise 0.1, n = 10³–10⁴): the certified
θ* has 46%/28%/12% of its examples strictly beyond margin 1 (and the rest below, a few exactly
at it) for p = 5/10/20, with θ* on the sphere; for p ≤ 3 θ* is interior (‖θ*‖ ≈ 0.7–0.97 R; at
p = 1, θ* = 1 with ~90% of the examples exactly at the kink). Solving stays cheap: ≤ 0.7 s for
n ≤ 2·10⁴, p ≤ 20, with gap ≤ 1e-11 (single-threaded BLAS; an oversubscribed multi-threaded BLAS
can be 100× slower on the n×p Hessians). The check
:func:`dpbench.testing.check_nonsmooth_active` guards this; the logistic problem (smooth, no kink)
keeps R = 1.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..core.params import Param
from ..core.problem import Dataset, Optimum
from ..core.tags import ProblemTags
from ..numerics.solvers.ball import solve_hinge_ball
from ._linear_law import LAW_PARAMS, MarginLossProblem

__all__ = ["HingeSVM", "SOLVE_TOL"]

#: Stopping tolerance of the certified solver: 10× below the default public bound solver_gap =
#: 1e-10 of output perturbation / localisation / regularised output perturbation. With the kink
#: inside C (R = 3) the solver's default 1e-9 lets gaps of 1e-10–1e-9 through; at 1e-11 it still
#: stops after the smoothing rounds (measured: 288 cases, n ≤ 2·10⁴, p ≤ 20, ridge ∈ {0, 0.05,
#: Λ}: gap ≤ 1e-11, ≤ 0.7 s, no Kelley fallback).
SOLVE_TOL = 1e-11


class HingeSVM(MarginLossProblem):
    """Average hinge loss (+ ridge) over a ball; synthetic linear-classification data."""

    name: ClassVar[str] = "hinge_svm"
    summary: ClassVar[str] = "hinge loss (1 - y<theta, x>)_+ (+ ridge) on a ball; linear-law data"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM: "
                               "Efficient Algorithms and Tight Error Bounds, §1 and Appendix F "
                               "(SVM example)")
    version: ClassVar[str] = "2"
    #: The linear law's parameters with R = 3 instead of 1, so that the kink y⟨θ, x⟩ = 1 lies
    #: inside C (module docstring; version 1 had R = 1 and was linear on the interior of C).
    params: ClassVar[dict[str, Param]] = {
        **LAW_PARAMS,
        "radius": Param(3.0, low=0.0, low_open=True,
                        doc="radius R of the ball C (diameter 2R); the kink needs R*x_norm > 1"),
    }

    @staticmethod
    def _phi(margins: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - margins)

    @staticmethod
    def _dphi(margins: np.ndarray) -> np.ndarray:
        return -(margins < 1.0).astype(float)

    def __dpbench_tags__(self) -> ProblemTags:
        """The margin-loss claims (rank-1 Hessian part, 2-dim gradient shifts) for this φ."""
        return super().__dpbench_tags__()

    def solve(self, data: Dataset) -> Optimum:
        if data.y is None:
            raise ValueError("hinge_svm needs labels: Dataset.y is None")
        return solve_hinge_ball(data.X, data.y, self.radius, ridge=self.ridge, tol=SOLVE_TOL)
