"""``dpl_least_squares``: ½(⟨θ, x⟩ − y)² (+ ridge) on a ball with synthetic linear-regression
data, a problem ``diffprivlib_linear`` runs on next to dpbench's dataset-backed
``real_least_squares``.

The loss, its constants and the certified optimum are dpbench's
(:class:`dpbench.SquaredLoss`: L = (R·q + B)·q + ridge·R, Δ = ridge,
β = q² + ridge over the universe ‖x‖ ≤ q, |y| ≤ B; Newton then the secular equation on the
sphere, duality gap); this module adds the data law only.

Data law: x uniform on the sphere of radius ``data_norm``, y = clip(⟨θ₀, x⟩ + noise·N(0, 1), ±B)
with θ₀ = (R/2)·e₁ (the law is rotation invariant, so one direction is as hard as any), B =
``label_bound``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from dpbench import Dataset, Param, SquaredLoss


class LeastSquares(SquaredLoss):
    """Average ½(⟨θ, x⟩ − y)² + (ridge/2)‖θ‖² over a ball; synthetic linear-regression data."""

    name: ClassVar[str] = "dpl_least_squares"
    summary: ClassVar[str] = "least squares 0.5*(<theta, x> - y)^2 (+ ridge) on a ball"
    citation: ClassVar[str] = "examples/dpbench-diffprivlib (least-squares baseline)"
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C"),
        "data_norm": Param(1.0, low=0.0, low_open=True, doc="norm of every feature vector"),
        "label_bound": Param(1.0, low=0.0, low_open=True, doc="labels are clipped to [-B, B]"),
        "noise": Param(0.1, low=0.0, doc="standard deviation of the label noise"),
        "ridge": Param(0.0, low=0.0, doc="ridge λ: Δ = λ"),
    }

    data_norm: float
    label_bound: float
    noise: float

    @property
    def feature_norm(self) -> float:
        return self.data_norm

    @property
    def label_size(self) -> float:
        return self.label_bound

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        g = rng.standard_normal((n, p))
        X = g * (self.data_norm / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300))
        y = 0.5 * self.radius * X[:, 0] + self.noise * rng.standard_normal(n)
        return Dataset(X, np.clip(y, -self.label_bound, self.label_bound), {})
