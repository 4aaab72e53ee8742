"""Euclidean 1-median, optionally with a ridge: BST14's running example (§1).

ℓ(θ; d) = ‖θ − d‖ + (ridge/2)‖θ‖² on the ball C of radius R. Over the whole universe,
‖∇ℓ‖ ≤ 1 + ridge·R = L (a unit vector plus ridge·θ), Δ = ridge per example, and ℓ is non-smooth
(a kink at every data point; β = ∞).

Data law (docs/instances.md, '1-median': a noisy cloud projected to a radius, with a fraction of
the points duplicated on one location so that the kink binds): μ = ``center_norm``·e₁;
k = round(duplicate·n) rows sit exactly at μ; the other rows are μ + ξ with
ξ ~ N(0, (noise²/p)·I) (so E‖ξ‖² = noise²), projected onto the ball of radius ``data_radius`` ≤ R.
The law is fixed (no random codeword), so it is also the population law. The cloud is symmetric
around μ (up to the projection), so the duplicated rows put θ* exactly on the kink at μ whenever
their weight beats the residual pull of the cloud and of the ridge (with the defaults, for ridge
below about 1); ``duplicate = 0`` gives a generic, smooth-at-θ* median.

θ* comes from the certified solver :mod:`dpbench.numerics.solvers.median` (gap ≤ 1e-9 on the average scale).
Population excess (Appendix F, per-example scale) is measured on a fixed independent sample of
N = ``population_sample`` rows drawn by the same generator from a data-independent stream (as in
:mod:`dpbench.problems._linear_law`), minus the certified minimum on that sample.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import numpy as np
from numba import njit

from ..core.errors import UserInputError
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.seeding import make_rng
from ..core.sets import Ball, ConstraintSet
from ..numerics.solvers.ball import project_ball
from ..numerics.solvers.median import solve_median
from ._hard_data import signal_rows

__all__ = ["EuclideanMedian", "MEDIAN", "median_loss", "median_grad", "draw_median_law",
           "median_population_sample", "median_population_optimum"]


@njit(cache=True)
def median_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = ‖θ − xᵢ‖ + (prm[0]/2)‖θ‖²."""
    sq = 0.0
    tt = 0.0
    for j in range(theta.shape[0]):
        d = theta[j] - X[i, j]
        sq += d * d
        tt += theta[j] * theta[j]
    return math.sqrt(sq) + 0.5 * prm[0] * tt


@njit(cache=True)
def median_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """(θ − xᵢ)/‖θ − xᵢ‖ + prm[0]·θ; the subgradient prm[0]·θ at the kink θ = xᵢ."""
    sq = 0.0
    for j in range(theta.shape[0]):
        d = theta[j] - X[i, j]
        sq += d * d
    norm = math.sqrt(sq)
    inv = 1.0 / norm if norm > 0.0 else 0.0
    for j in range(theta.shape[0]):
        out[j] = (theta[j] - X[i, j]) * inv + prm[0] * theta[j]


def MEDIAN(ridge: float = 0.0) -> LossKernel:
    """Kernel of ‖θ − x‖ + (ridge/2)‖θ‖²."""
    return LossKernel(median_loss, median_grad, np.array([float(ridge)]))


def draw_median_law(n: int, p: int, rng: np.random.Generator, center_norm: float, noise: float,
                    data_radius: float, duplicate: float) -> Dataset:
    """n rows of the law (module docstring): k = round(duplicate·n) rows at μ, then the cloud."""
    mu = np.zeros(p)
    mu[0] = center_norm
    k = signal_rows(n, duplicate)
    cloud = mu + rng.standard_normal((n - k, p)) * (noise / math.sqrt(p))
    norms = np.linalg.norm(cloud, axis=1, keepdims=True)
    cloud = cloud * np.minimum(1.0, data_radius / np.maximum(norms, np.finfo(float).tiny))
    X = np.concatenate([np.tile(mu, (k, 1)), cloud])
    return Dataset(X, None, {"k": k, "mu": mu})


class EuclideanMedian(Problem):
    """‖θ − d‖ + (ridge/2)‖θ‖² on a ball, clustered data with a duplicated location."""

    name: ClassVar[str] = "median"
    summary: ClassVar[str] = "Euclidean 1-median ||theta - d|| (+ ridge) on a ball; BST14's example"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (2014), Differentially Private ERM "
                               "(1-median example, §1); docs/instances.md, '1-median'")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "ridge": Param(0.0, low=0.0, doc="ridge of every example: Delta = ridge, L = 1 + ridge*R"),
        "data_radius": Param(1.0, low=0.0, low_open=True,
                             doc="rows are projected to this radius (<= R)"),
        "center_norm": Param(0.25, low=0.0, doc="norm of the cloud centre mu = center_norm*e1"),
        "noise": Param(0.5, low=0.0, doc="root mean square norm of the Gaussian noise around mu"),
        "duplicate": Param(0.3, low=0.0, high=1.0, doc="fraction of rows exactly at mu"),
        "population_sample": Param(20000, kind="int", low=1000,
                                   doc="size N of the fixed sample for population excess"),
    }

    radius: float
    ridge: float
    data_radius: float
    center_norm: float
    noise: float
    duplicate: float
    population_sample: int

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.data_radius > self.radius or self.center_norm > self.data_radius:
            raise UserInputError(
                f"problem {self.name!r}: need center_norm ({self.center_norm!r}) <= data_radius "
                f"({self.data_radius!r}) <= radius ({self.radius!r}) so that the data lie in C")

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = 1 + ridge·R: a unit vector plus ridge·θ with ‖θ‖ ≤ R, for any d."""
        return 1.0 + self.ridge * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    def data_bounds(self) -> dict[str, float]:
        """Rows are projected onto the ball of radius ``data_radius`` (the duplicated rows sit at
        μ, ‖μ‖ = center_norm ≤ data_radius)."""
        return {"data_norm": float(self.data_radius)}

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        return draw_median_law(n, p, rng, self.center_norm, self.noise, self.data_radius,
                               self.duplicate)

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return np.linalg.norm(theta - data.X, axis=1) + 0.5 * self.ridge * float(theta @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        """(θ − d)/‖θ − d‖ + ridge·θ, with 0 for the unit part at the kink (as the kernel)."""
        theta = np.asarray(theta, dtype=float)
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        diff = theta - rows
        r = np.linalg.norm(diff, axis=1)
        inv = np.divide(1.0, r, out=np.zeros_like(r), where=r > 0)
        return diff * inv[:, None] + self.ridge * theta

    def solve(self, data: Dataset) -> Optimum:
        """Certified minimiser of the average loss (:func:`dpbench.numerics.solvers.median.solve_median`)."""
        sol = solve_median(data.X, self.radius, quad=self.ridge)
        theta = project_ball(sol.theta, self.radius)
        return Optimum(theta=theta, value=self.risk(theta, data), gap=sol.gap, method=sol.method,
                       iterations=sol.iterations)

    def kernel(self) -> LossKernel:
        return MEDIAN(self.ridge)

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """Mean loss at θ on the fixed population sample minus its certified minimum (raw: it can
        be negative only by the certified gap plus rounding)."""
        sample = median_population_sample(self, p)
        optimum = median_population_optimum(self, p)
        return self.risk(np.asarray(theta, dtype=float), sample) - optimum.value


@functools.lru_cache(maxsize=16)
def median_population_sample(problem: EuclideanMedian, p: int) -> Dataset:
    """The fixed population sample of ``problem`` in dimension p (read-only, cached)."""
    identity = {"stream": "population", "problem": problem.name,
                "params": problem.get_params(), "p": p}
    data = problem.generate(problem.population_sample, p, make_rng(identity, root_seed=0))
    data.X.flags.writeable = False
    return data


@functools.lru_cache(maxsize=16)
def median_population_optimum(problem: EuclideanMedian, p: int) -> Optimum:
    """The certified minimiser over C of the mean loss on the population sample (cached)."""
    return problem.solve(median_population_sample(problem, p))
