"""``dpl_least_squares``: ½(⟨θ, x⟩ − y)² (+ ridge) on a ball, the problem ``diffprivlib_linear``
runs on (dpbench ships no least-squares problem; a dataset-backed one can declare
``least_squares = True`` to be accepted too).

Data law: x uniform on the sphere of radius ``data_norm``, y = clip(⟨θ₀, x⟩ + noise·N(0, 1), ±B)
with θ₀ = (R/2)·e₁ (the law is rotation invariant, so one direction is as hard as any), B =
``label_bound``. Constants over the universe ‖x‖ ≤ q, |y| ≤ B, θ ∈ C: L = (R·q + B)·q + ridge·R,
Δ = ridge, β = q² + ridge (the per-example Hessian xxᵀ + ridge·I). The optimum over C is certified
by dpbench's smooth-ball solver (Newton, then the secular equation on the sphere; duality gap).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from dpbench import Ball, Dataset, Optimum, Param, Problem
from dpbench.numerics.solvers.ball import solve_smooth_ball


class LeastSquares(Problem):
    """Average ½(⟨θ, x⟩ − y)² + (ridge/2)‖θ‖² over a ball; synthetic linear-regression data."""

    name: ClassVar[str] = "dpl_least_squares"
    summary: ClassVar[str] = "least squares 0.5*(<theta, x> - y)^2 (+ ridge) on a ball"
    citation: ClassVar[str] = "examples/dpbench-diffprivlib (least-squares baseline)"
    version: ClassVar[str] = "1"
    least_squares: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C"),
        "data_norm": Param(1.0, low=0.0, low_open=True, doc="norm of every feature vector"),
        "label_bound": Param(1.0, low=0.0, low_open=True, doc="labels are clipped to [-B, B]"),
        "noise": Param(0.1, low=0.0, doc="standard deviation of the label noise"),
        "ridge": Param(0.0, low=0.0, doc="ridge λ: Δ = λ"),
    }

    radius: float
    data_norm: float
    label_bound: float
    noise: float
    ridge: float

    @property
    def constraint(self) -> Ball:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        q = self.data_norm
        return (self.radius * q + self.label_bound) * q + self.ridge * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    @property
    def smoothness(self) -> float:
        return self.data_norm**2 + self.ridge

    def data_bounds(self) -> dict[str, float]:
        return {"data_norm": float(self.data_norm), "label_bound": float(self.label_bound)}

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        g = rng.standard_normal((n, p))
        X = g * (self.data_norm / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300))
        y = 0.5 * self.radius * X[:, 0] + self.noise * rng.standard_normal(n)
        return Dataset(X, np.clip(y, -self.label_bound, self.label_bound), {})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        r = data.X @ theta - data.y
        return 0.5 * r * r + 0.5 * self.ridge * float(theta @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        X = data.X if idx is None else data.X[np.atleast_1d(idx)]
        y = data.y if idx is None else data.y[np.atleast_1d(idx)]
        return (X @ theta - y)[:, None] * X + self.ridge * np.asarray(theta, dtype=float)

    def solve(self, data: Dataset) -> Optimum:
        X, y, n, lam = data.X, data.y, data.n, self.ridge
        gram = X.T @ X / n + lam * np.eye(data.p)
        xty = X.T @ y / n

        def risk(theta: np.ndarray) -> float:
            return float(np.mean(self.loss(theta, data)))

        def grad(theta: np.ndarray) -> np.ndarray:
            return gram @ theta - xty

        def hess(theta: np.ndarray) -> np.ndarray:
            return gram

        return solve_smooth_ball(risk, grad, hess, data.p, self.radius)
