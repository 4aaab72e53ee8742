"""F2: linear loss on the scaled cube, the instance that makes the Gibbs bound p/β tight.

The instance F2 of docs/instances.md ('F2 cube'), used for Ganesh–Thakurta–Upadhyay's (GTU)
Thm 2.4 (experiment E1 of suites/langevin.yaml) and §4.4 (E7):

    ℓ(θ; d) = 1 − ⟨θ, d⟩ + (ridge/2)‖θ‖²,   ‖d‖₂ ≤ 1,   C = [−a, a]^p,  a = 1/√p,

(:class:`dpbench.core.sets.Box` of radius 1: diameter 2 in every dimension, so p-sweeps keep L
and ‖C‖ fixed). Since ‖θ‖ ≤ 1 on C, ℓ ≥ 0 when ridge = 0 (GTU assume non-negative losses).
Constants: L = 1 + ridge (‖∇ℓ‖ = ‖−d + ridge·θ‖ ≤ 1 + ridge on C), m = M = ridge, diameter 2. The
``ridge`` parameter is the data-independent regulariser of the A8 wrapper (centre 0 = the centre
of C), so ``LinCube(ridge=λ)`` is the regularised instance the ``gibbs`` mechanism samples with
``regularize="erm"``.

Data [derived]: biased-sign codewords in the spirit of BST14's fingerprinting instance:
d_ij = s_ij/√p with s_ij = +1 with probability P_j, and P_j ~ Beta(b, b) (``sign_shape`` b) drawn
once from a fixed public seed (``law_seed``), so the law — hence the population minimiser — does not
change along n. Population: 𝓛_𝒟(θ) = 1 − ⟨θ, μ⟩ with μ_j = (2P_j − 1)/√p.

The Gibbs law factorises: θ_j has density ∝ exp(β(v_jθ_j − (ridge/2)θ_j²)) on
[−a, a] with v = d̄ — a truncated exponential (inverse CDF) for ridge = 0 and a truncated normal
N(v_j/ridge, 1/(β·ridge)) otherwise (:func:`cube_gibbs_sampler`, exact; the registered ``"gibbs"``
sampler, :mod:`dpbench.core.exact_samplers`). The exact expected
excess for ridge = 0 is Σ_j [1/β − 2a|v_j|/(e^{2aβ|v_j|} − 1)] (:func:`cube_gibbs_excess`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar

import numpy as np
from scipy import stats

from ..core.exact_samplers import register_exact_sampler
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Box, ConstraintSet

__all__ = ["LinCube", "cube_gibbs_sampler", "cube_gibbs_excess", "cube_coordinate_cdf"]


def _truncated_exponential(c: np.ndarray, a: float, u: np.ndarray) -> np.ndarray:
    """Inverse CDF of the density ∝ e^{c t} on [−a, a], per coordinate (c may be 0 or negative).

    For c > 0: t = a + log(u + (1 − u)e^{−2ac})/c (no overflow); c < 0 by symmetry; c = 0 uniform.
    """
    out = np.empty_like(c)
    small = np.abs(c) * a < 1e-12
    out[small] = -a + 2.0 * a * u[small]
    big = ~small
    cb, ub = np.abs(c[big]), u[big]
    t = a + np.log(ub + (1.0 - ub) * np.exp(-2.0 * a * cb)) / cb
    out[big] = np.sign(c[big]) * t
    return np.clip(out, -a, a)


def cube_coordinate_cdf(t: np.ndarray, c: float, a: float, ridge_prec: float = 0.0,
                        mean: float = 0.0) -> np.ndarray:
    """CDF of one Gibbs coordinate on [−a, a]: ∝ e^{ct} (``ridge_prec`` = 0) or the normal
    N(``mean``, 1/``ridge_prec``) truncated to [−a, a] (for the KS tests)."""
    t = np.clip(np.asarray(t, dtype=float), -a, a)
    if ridge_prec > 0:
        sd = 1.0 / math.sqrt(ridge_prec)
        return stats.truncnorm.cdf(t, (-a - mean) / sd, (a - mean) / sd, loc=mean, scale=sd)
    if abs(c) * a < 1e-12:
        return (t + a) / (2.0 * a)
    # (e^{c(t+a)} − 1)/(e^{2ac} − 1), in overflow-free forms for each sign of c
    if c < 0:
        return np.expm1(c * (t + a)) / np.expm1(2.0 * a * c)
    return np.exp(c * (t - a)) * np.expm1(-c * (t + a)) / np.expm1(-2.0 * a * c)


def cube_gibbs_sampler(v: np.ndarray, beta: float, a: float, ridge: float = 0.0
                       ) -> Callable[[np.random.Generator], np.ndarray]:
    """Exact sampler of ∝ exp(β(⟨θ, v⟩ − (ridge/2)‖θ‖²)) on [−a, a]^p (factorised; A8 ridge),
    with its vectorised form ``draw.many(rng, size)`` (the same inverse CDFs on (size, p))."""
    v = np.asarray(v, dtype=float)
    if ridge > 0:
        prec = beta * ridge
        mean = v / ridge
        sd = 1.0 / math.sqrt(prec)
        lo, hi = (-a - mean) / sd, (a - mean) / sd

        def draw(rng: np.random.Generator) -> np.ndarray:
            z = stats.truncnorm.rvs(lo, hi, loc=mean, scale=sd, random_state=rng)
            return np.clip(np.asarray(z, dtype=float).reshape(v.shape), -a, a)

        def many(rng: np.random.Generator, size: int) -> np.ndarray:
            z = stats.truncnorm.rvs(lo, hi, loc=mean, scale=sd, size=(size, v.shape[0]),
                                    random_state=rng)
            return np.clip(np.asarray(z, dtype=float), -a, a)
    else:
        c = beta * v

        def draw(rng: np.random.Generator) -> np.ndarray:
            return _truncated_exponential(c, a, rng.random(v.shape[0]))

        def many(rng: np.random.Generator, size: int) -> np.ndarray:
            return _truncated_exponential(np.tile(c, (size, 1)), a, rng.random((size, v.shape[0])))

    draw.proposal = "factorised inverse CDF"  # type: ignore[attr-defined]
    draw.many = many  # type: ignore[attr-defined]
    return draw


def cube_gibbs_excess(v: np.ndarray, beta: float, a: float) -> float:
    """Exact E[excess ERM] of the ridge-free Gibbs law on the cube (docs/instances.md, 'F2 cube'):
    Σ_j [1/β − 2a|v_j|/(e^{2aβ|v_j|} − 1)] (→ p/β once β|v_j|a ≫ 1; the term is p/β·… ≥ 0)."""
    x = 2.0 * a * beta * np.abs(np.asarray(v, dtype=float))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        term = np.where(x > 1e-8, x / np.expm1(x), 1.0 - 0.5 * x)
    return float(np.sum(1.0 / beta - term / beta))


class LinCube(Problem):
    """Linear loss 1 − ⟨θ, d⟩ (+ ridge) on the cube [−1/√p, 1/√p]^p, biased-sign data (F2)."""

    name: ClassVar[str] = "lin_cube"
    summary: ClassVar[str] = ("linear loss 1 - <theta, d> on the cube [-1/sqrt(p), 1/sqrt(p)]^p, "
                              "biased-sign codewords; exact factorised Gibbs sampler (F2)")
    citation: ClassVar[str] = ("Ganesh, Thakurta, Upadhyay (2023), Rashomon sets and Langevin "
                               "diffusion, Thm 2.4 and §4.4; instance F2 of docs/instances.md; "
                               "BST14 fingerprinting instance")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "ridge": Param(0.0, low=0.0, doc="A8 regulariser (ridge/2)‖θ‖² (0 = the plain linear loss)"),
        "sign_shape": Param(1.0, low=0.0, low_open=True,
                            doc="b of P_j ~ Beta(b, b), the per-coordinate sign bias"),
        "law_seed": Param(2023, kind="int", low=0, doc="public seed of the P_j (fixed law)"),
    }

    ridge: float
    sign_shape: float
    law_seed: int

    @property
    def constraint(self) -> ConstraintSet:
        return Box(1.0)

    @property
    def lipschitz(self) -> float:
        """L = 1 + ridge: ‖−d + ridge·θ‖ ≤ ‖d‖ + ridge‖θ‖ ≤ 1 + ridge on C (‖θ‖ ≤ 1)."""
        return 1.0 + self.ridge

    @property
    def strong_convexity(self) -> float:
        return float(self.ridge)

    @property
    def smoothness(self) -> float:
        return float(self.ridge)

    def data_bounds(self) -> dict[str, float]:
        """‖d‖₂ ≤ 1 over the universe (GTU's F2 instance; the sign rows have norm exactly 1)."""
        return {"data_norm": 1.0}

    # --- data law -----------------------------------------------------------------------------
    def sign_probabilities(self, p: int) -> np.ndarray:
        """P_j ~ Beta(b, b) from the public ``law_seed`` (data independent, fixed along n)."""
        return np.random.default_rng([self.law_seed, p]).beta(self.sign_shape, self.sign_shape, p)

    def mean(self, p: int) -> np.ndarray:
        """μ = E d: μ_j = (2P_j − 1)/√p."""
        return (2.0 * self.sign_probabilities(p) - 1.0) / math.sqrt(p)

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        probs = self.sign_probabilities(p)
        signs = np.where(rng.random((n, p)) < probs, 1.0, -1.0)
        return Dataset(signs / math.sqrt(p), None, {"sign_shape": self.sign_shape})

    # --- losses -------------------------------------------------------------------------------
    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return 1.0 - data.X @ theta + 0.5 * self.ridge * float(theta @ theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        return -rows + self.ridge * np.asarray(theta, dtype=float)

    def _argmin(self, v: np.ndarray) -> np.ndarray:
        a = self.constraint.half_width(v.shape[0])  # type: ignore[attr-defined]
        if self.ridge > 0:
            return np.clip(v / self.ridge, -a, a)
        return a * np.sign(v)

    def solve(self, data: Dataset) -> Optimum:
        """Closed form, coordinate-wise: θ_j = a·sign(v_j) (ridge 0) or clip(v_j/ridge, ±a)."""
        theta = self._argmin(data.X.mean(axis=0))
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """𝓛_𝒟(θ) − min_C 𝓛_𝒟 with 𝓛_𝒟(θ) = 1 − ⟨θ, μ⟩ + (ridge/2)‖θ‖² (closed form)."""
        mu = self.mean(p)
        theta = np.asarray(theta, dtype=float)

        def pop(t: np.ndarray) -> float:
            return 1.0 - float(t @ mu) + 0.5 * self.ridge * float(t @ t)

        return pop(theta) - pop(self._argmin(mu))

    def gibbs_excess(self, data: Dataset, beta: float) -> float:
        """Exact expected excess ERM of the Gibbs law at β (ridge 0 only; NaN otherwise)."""
        if self.ridge > 0:
            return math.nan
        return cube_gibbs_excess(data.X.mean(axis=0), beta, self.constraint.half_width(data.p))  # type: ignore[attr-defined]

    def with_ridge(self, ridge: float) -> "LinCube":
        """The same instance with the A8 regulariser (ridge/2)‖θ‖² added."""
        params: dict[str, Any] = dict(self.get_params(), ridge=self.ridge + ridge)
        return LinCube(**params)


@register_exact_sampler("gibbs", LinCube)
def _lin_cube_gibbs(problem: LinCube, data: Dataset, k: float, region: ConstraintSet
                    ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact sampler of ∝ exp(−k·Σᵢℓ(θ; dᵢ)) on C (β = kn on the average): factorised
    inverse CDF / truncated normal (docs/instances.md, 'F2 cube'). ``None`` for any region
    other than C."""
    if not (isinstance(region, Box) and region == problem.constraint):
        return None
    a = problem.constraint.half_width(data.p)  # type: ignore[attr-defined]
    return cube_gibbs_sampler(data.X.mean(axis=0), k * data.n, a, problem.ridge)
