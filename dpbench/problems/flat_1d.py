"""FLAT-1D: the hard (flat) 1-D DP-SCO instance whose population excess decays like 1/√n.

The instance F6 (docs/instances.md, 'F6 flat instance'; docs/sco.md, 'FLAT-1D, the hard
instance'): d ∈ {−1, +1} with P(d = 1) = (1 + τ)/2 and τ = min(1, c/√n), C = [−1, 1]. The
per-example loss is

    ℓ(θ; d) = −d·θ  (= |θ − d| − 1 on C, the 1-D ℓ2 median shifted by a constant),

(plus an optional data-independent ridge (r/2)θ², ``ridge``, the A8 regulariser of the Langevin
wrappers, GTU §4.1/§4.4), so the population loss is E ℓ(θ; d) = −τθ (1 − τθ for the median form):
linear, nearly flat, minimised at θ = 1, and its sign is barely identifiable from n samples (the
mean d̄ has signal τ = c/√n against noise ≈ 1/√n, a constant signal-to-noise ratio c). The
closed-form population excess is τ·(1 − θ) ∈ [0, 2τ]; it uses the **cell's** n (the law scales
with n; ``Problem.population_excess(theta, p, n)``). For a fixed c the sign is mistaken with a
probability bounded away from 0 (≈ Φ(−c) for ERM), so the excess is Θ(τ) = Θ(1/√n): the LD/√n
lower-bound behaviour of DP-SCO (Bassily–Feldman–Talwar–Thakurta 2019; −½ in n past the crossover
n*, docs/sco.md, 'Reading suites/sco.yaml'). For a large c only a private mechanism's noise keeps
E(1 − θ) away from 0, which makes the instance a test of how much signal a mechanism's privacy
noise leaves.

Constants: L = 1 + r (|∇ℓ| = |−d + rθ| ≤ 1 + r on C), diameter ‖C‖ = 2, Δ = β = r (merely
convex and linear when r = 0). ERM: L̄(θ) = −d̄θ + (r/2)θ² is minimised at clip(d̄/r, −1, 1), or
at sign(d̄) when r = 0 (any θ when d̄ = 0; θ = 0 is returned), exact (gap 0). Population excess
with a ridge: f(θ) − f(θ*) for f(θ) = −τθ + (r/2)θ², θ* = min(1, τ/r) (closed form).
The exponential-mechanism density ∝ exp(k(θΣdᵢ − n r θ²/2)) on [−1, 1] and the REM law (GLL'22,
with its regulariser (kμ/2)(θ − c)²) are sampled exactly: the tilted-ball sampler of
:mod:`dpbench.numerics.samplers.ball` (p = 1) when the quadratic term vanishes, a truncated normal on
[−1, 1] otherwise (:func:`interval_gaussian`; the registered ``"gibbs"`` and
``"regularized_gibbs"`` samplers of :mod:`dpbench.core.exact_samplers`). The compiled kernel is
:func:`dpbench.numerics.kernels.LINEAR` (ℓ = −⟨θ, x⟩ + (r/2)‖θ‖²). One-dimensional only: other p
raise :class:`~dpbench.core.errors.NotApplicable`.
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import numpy as np

from ..core.errors import NotApplicable
from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet

__all__ = ["Flat1D", "flat_tau", "interval_gaussian"]


def flat_tau(signal: float, n: int) -> float:
    """τ = min(1, c/√n): the population mean of d for a sample of size n."""
    if n < 1:
        raise ValueError(f"flat_1d: n must be >= 1, got {n}")
    return min(1.0, signal / math.sqrt(n))


class Flat1D(Problem):
    """−dθ on [−1, 1], d = ±1 with P(d = 1) = (1 + c/√n)/2: flat population (docs/instances.md)."""

    name: ClassVar[str] = "flat_1d"
    summary: ClassVar[str] = ("1-D flat DP-SCO instance -d*theta on [-1, 1], "
                              "P(d=1) = (1+c/sqrt(n))/2; population excess c*(1-theta)/sqrt(n)")
    citation: ClassVar[str] = ("DP-SCO lower bound (Bassily–Feldman–Talwar–Thakurta 2019) on the "
                               "1-D median; GTU §4.1/§4.4 SCO rates; docs/instances.md, "
                               "'F6 flat instance'")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "signal": Param(1.0, low=0.0, low_open=True,
                        doc="c: the population mean of d is tau = min(1, c/sqrt(n))"),
        "ridge": Param(0.0, low=0.0, doc="r: data-independent ridge (r/2)*theta^2 (A8 wrapper)"),
    }

    signal: float
    ridge: float

    # --- declared constants -------------------------------------------------------------------
    @property
    def constraint(self) -> ConstraintSet:
        return Ball(1.0)

    @property
    def lipschitz(self) -> float:
        """L = 1 + r: |∇ℓ| = |−d + rθ| ≤ 1 + r for d ∈ {±1}, |θ| ≤ 1."""
        return 1.0 + self.ridge

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    @property
    def smoothness(self) -> float:
        return self.ridge

    def kernel(self) -> LossKernel:
        """Compiled −⟨θ, x⟩ + (r/2)‖θ‖² (:func:`dpbench.numerics.kernels.LINEAR`)."""
        from ..numerics.kernels import LINEAR  # numba: only for the compiled paths

        return LINEAR(self.ridge)

    def data_bounds(self) -> dict[str, float]:
        """d ∈ {−1, +1}: |d| = 1."""
        return {"data_norm": 1.0}

    # --- data and losses ----------------------------------------------------------------------
    def tau(self, n: int) -> float:
        """τ(n) = min(1, c/√n), the population mean of d at sample size n."""
        return flat_tau(self.signal, n)

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        """n iid d = ±1 with P(d = 1) = (1 + τ(n))/2 (one uniform draw per row)."""
        if p != 1:
            raise NotApplicable(f"problem 'flat_1d' is one-dimensional (p = 1), got p = {p}")
        tau = self.tau(n)
        d = np.where(rng.random(n) < 0.5 * (1.0 + tau), 1.0, -1.0)
        return Dataset(d[:, None], None, {"tau": tau, "signal": self.signal})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return -(data.X @ theta) + 0.5 * self.ridge * float(theta @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        return -rows + self.ridge * np.asarray(theta, dtype=float)

    def _minimiser(self, mean: float) -> float:
        """argmin over [−1, 1] of −mean·θ + (r/2)θ²: clip(mean/r) or sign(mean) when r = 0."""
        if self.ridge > 0:
            return min(1.0, max(-1.0, mean / self.ridge))
        return float(np.sign(mean))

    def _objective(self, mean: float, theta: float) -> float:
        return -mean * theta + 0.5 * self.ridge * theta * theta

    def solve(self, data: Dataset) -> Optimum:
        """θ* = clip(d̄/r, −1, 1), or sign(d̄) when r = 0 (0 when d̄ = 0); exact, gap 0."""
        mean = float(data.X[:, 0].mean())
        t = self._minimiser(mean)
        return Optimum(theta=np.array([t]), value=self._objective(mean, t), gap=0.0,
                       method="closed form (1-D quadratic/linear on an interval)")

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """f(θ) − min f with f(θ) = −τ(n)θ + (r/2)θ²; τ(n)·(1 − θ) when r = 0."""
        if n is None:
            raise ValueError("flat_1d: the population law scales with n; pass the cell's n")
        tau = self.tau(n)
        t = float(np.asarray(theta, dtype=float).reshape(-1)[0])
        if self.ridge == 0:
            return tau * (1.0 - t)
        return self._objective(tau, t) - self._objective(tau, self._minimiser(tau))


@register_exact_sampler("gibbs", Flat1D)
def _flat_1d_gibbs(problem: Flat1D, data: Dataset, k: float, region: ConstraintSet
                   ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of ∝ exp(k(θΣdᵢ − n r θ²/2)) on C = [−1, 1] (:func:`interval_gaussian`);
    ``None`` for a localised region."""
    if region != problem.constraint:
        return None
    return interval_gaussian(k * float(data.X.sum()), k * data.n * problem.ridge)


@register_exact_sampler("regularized_gibbs", Flat1D)
def _flat_1d_rem(problem: Flat1D, data: Dataset, k: float, mu: float, center: np.ndarray
                 ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact REM law ∝ exp(−k·L̄(θ) − (kμ/2)(θ − c)²) on [−1, 1] (GLL'22 Thm 25/28):
    exp(b θ − (a/2)θ²) with b = k(d̄ + μc), a = k(r + μ) (:func:`interval_gaussian`)."""
    c = float(np.asarray(center, dtype=float).reshape(-1)[0])
    mean = float(data.X[:, 0].mean())
    return interval_gaussian(k * (mean + mu * c), k * (problem.ridge + mu))


def interval_gaussian(linear: float, precision: float
                      ) -> Callable[[np.random.Generator], np.ndarray]:
    """Exact sampler of the density ∝ exp(bθ − (a/2)θ²) on [−1, 1] (b = ``linear``, a =
    ``precision`` ≥ 0): the tilted-ball sampler (p = 1) when a = 0, else the normal N(b/a, 1/a)
    truncated to [−1, 1] (scipy's ``truncnorm``, inverse CDF); both carry the vectorised form
    ``draw.many`` of :mod:`dpbench.core.exact_samplers`."""
    if precision <= 0:
        from ..numerics.samplers.ball import tilted_ball_sampler

        return tilted_ball_sampler(np.array([linear]), 1.0, 1.0)
    from scipy.stats import truncnorm

    loc, scale = linear / precision, 1.0 / math.sqrt(precision)
    law = truncnorm((-1.0 - loc) / scale, (1.0 - loc) / scale, loc=loc, scale=scale)

    def draw(rng: np.random.Generator) -> np.ndarray:
        return np.array([min(1.0, max(-1.0, float(law.rvs(random_state=rng))))])

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        return np.clip(np.asarray(law.rvs(size=size, random_state=rng), dtype=float),
                       -1.0, 1.0)[:, None]

    draw.many = many  # type: ignore[attr-defined]
    return draw
