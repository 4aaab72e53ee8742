"""P1 sep-abs: the separable ℓ₁ loss (G/√p)·‖θ − s‖₁ on a box (P1; P6 with a ridge).

ℓ(θ; s) = (G/√p)·Σⱼ |θⱼ − sⱼ| + (λ/2)‖θ‖² on the cube C = [−a, a]^p, a = r/√p
(:class:`dpbench.core.sets.Box`, diameter 2r). The instance, its closed forms and why it is used
for REM's ERM rates (experiments E1–E3, E6 of suites/rem.yaml): docs/instances.md, 'P1 and P6
separable l1'; docs/rem.md, pitfalls P8–P9.

Constants over the whole data universe (s ∈ R^p): the ℓ₁ part is G-Lipschitz in ℓ₂
(‖(G/√p)·sign‖ = G) and the ridge adds λ‖θ‖ ≤ λr, so L = G + λr; Δ = λ; β = ∞ (kinks).
REM's privacy uses G_diff = 2L (|θ − s| − |θ − s'| is 2-Lipschitz in 1-D; docs/rem.md, pitfall P5).

Data law: s = m + σ·ξ with ξ ~ N(0, I), σ = ``sigma``·a and m = ``offset``·a·(+1, −1, +1, …)
(scaled with the box so p-sweeps keep the geometry). Everything is exact:

* the ERM optimum: per coordinate, a convex piecewise-quadratic 1-D minimisation whose minimiser is
  a data point, a box end or a segment's stationary point; all candidates are evaluated with prefix
  sums (the coordinate-wise median when λ = 0) — gap 0;
* the population risk: E|x − s| = σ[2φ(u) + u(2Φ(u) − 1)], u = (x − m)/σ, so the population
  excess is closed form (minimiser m when λ = 0, a 1-D root otherwise);
* REM's target factorises over coordinates and each 1-D factor ∝ exp(−w Σᵢ|x − sᵢ| − (A/2)x² + Bx)
  is, between consecutive sorted data points, a Gaussian: an exact mixture of ≤ n + 1 truncated
  normals (:class:`AbsGaussFactor`).
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import numpy as np
from numba import njit
from scipy import optimize, special, stats

from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Box, ConstraintSet
from ..numerics.samplers.alternating import truncnorm_std_many

__all__ = ["SepAbs", "AbsGaussFactor", "sep_abs_loss", "sep_abs_grad", "log_gauss_interval"]


@njit(cache=True)
def sep_abs_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = (prm[0]/√p)·Σⱼ|θⱼ − xᵢⱼ| + (prm[1]/2)‖θ‖², prm = (G, λ)."""
    s = 0.0
    sq = 0.0
    for j in range(theta.shape[0]):
        s += abs(theta[j] - X[i, j])
        sq += theta[j] * theta[j]
    return prm[0] / math.sqrt(theta.shape[0]) * s + 0.5 * prm[1] * sq


@njit(cache=True)
def sep_abs_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """(prm[0]/√p)·sign(θ − xᵢ) + prm[1]·θ (subgradient 0 of |·| at a kink)."""
    w = prm[0] / math.sqrt(theta.shape[0])
    for j in range(theta.shape[0]):
        d = theta[j] - X[i, j]
        sgn = 1.0 if d > 0.0 else (-1.0 if d < 0.0 else 0.0)
        out[j] = w * sgn + prm[1] * theta[j]


def log_gauss_interval(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Φ(b) − Φ(a)) for a ≤ b, elementwise, accurate in both tails."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    flip = a > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    lhi = special.log_ndtr(hi)
    llo = special.log_ndtr(lo)
    with np.errstate(divide="ignore"):
        return lhi + np.log1p(-np.exp(np.minimum(llo - lhi, 0.0)))


class AbsGaussFactor:
    """The 1-D density ∝ exp(−w·Σᵢ|x − sᵢ| − (A/2)x² + B·x) on [lo, hi] (A > 0, w ≥ 0).

    On each segment between consecutive breakpoints (the sorted sᵢ inside (lo, hi) and the ends)
    Σᵢ|x − sᵢ| = (2j − n)x + (S_> − S_≤) with j the points left of the segment, so the factor is
    a Gaussian N(mₗ, 1/A) restricted to the segment with log-weight Cₗ + log(Φ(bₗ') − Φ(aₗ')):
    an exact mixture of truncated normals (docs/instances.md, 'P1 and P6 separable l1').
    """

    def __init__(self, s: np.ndarray, w: float, A: float, B: float, lo: float, hi: float) -> None:
        if not A > 0:
            raise ValueError(f"AbsGaussFactor needs A > 0, got {A!r}")
        s = np.sort(np.asarray(s, dtype=float))
        n = s.size
        inner = s[(s > lo) & (s < hi)]
        self.edges = np.concatenate(([lo], inner, [hi]))
        left = np.searchsorted(s, self.edges[:-1], side="right")      # points ≤ segment start
        csum = np.concatenate(([0.0], np.cumsum(s)))
        slope = 2.0 * left - n                                        # d/dx Σ|x − sᵢ|
        const = (csum[-1] - csum[left]) - csum[left]                  # S_> − S_≤
        self.sd = 1.0 / math.sqrt(A)
        self.means = (B - w * slope) / A
        c = 0.5 * A * self.means ** 2 - w * const
        self.za = (self.edges[:-1] - self.means) / self.sd
        self.zb = (self.edges[1:] - self.means) / self.sd
        logw = c + log_gauss_interval(self.za, self.zb)
        self.log_norm = float(special.logsumexp(logw)) + math.log(self.sd * math.sqrt(2 * math.pi))
        probs = np.exp(logw - logw.max())
        self.cum = np.cumsum(probs / probs.sum())
        self.w, self.A, self.B, self.s = w, A, B, s

    def segments(self, u: np.ndarray) -> np.ndarray:
        """Segment indices for uniforms ``u`` (inverse CDF of the mixture weights)."""
        return np.minimum(np.searchsorted(self.cum, u, side="right"), self.cum.size - 1)

    def draw(self, rng: np.random.Generator) -> float:
        """One exact draw (:meth:`sample` of size 1)."""
        return float(self.sample(rng, 1)[0])

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent exact draws: segments by their weights (``size`` uniforms), then
        the truncated normal on each one's segment (compiled exact rejection,
        :func:`dpbench.numerics.samplers.alternating.truncnorm_std_many`)."""
        j = self.segments(rng.random(size))
        z = truncnorm_std_many(self.za[j], self.zb[j], rng)
        return np.minimum(np.maximum(self.means[j] + self.sd * z, self.edges[j]),
                          self.edges[j + 1])

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """The normalised log-density (for quadrature checks)."""
        x = np.asarray(x, dtype=float)
        tot = np.abs(x[..., None] - self.s).sum(axis=-1)
        return -self.w * tot - 0.5 * self.A * x ** 2 + self.B * x - self.log_norm


class SepAbs(Problem):
    """(G/√p)‖θ − s‖₁ + (λ/2)‖θ‖² on a box, Gaussian data (P1 / P6, docs/instances.md)."""

    name: ClassVar[str] = "sep_abs"
    summary: ClassVar[str] = "separable l1 loss (G/sqrt p)|theta - s|_1 on a box; exact REM sampler"
    citation: ClassVar[str] = ("Gopi, Lee, Liu (COLT 2022), Private Convex Optimization via "
                               "Exponential Mechanism; instance P1/P6 of docs/instances.md")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="r: box half-width r/sqrt(p), diameter 2r"),
        "scale": Param(1.0, low=0.0, low_open=True, doc="G: the l1 part is G-Lipschitz"),
        "ridge": Param(0.0, low=0.0, doc="lambda: per-example ridge (P6 when > 0)"),
        "sigma": Param(0.5, low=0.0, low_open=True, doc="data s.d. as a fraction of the half-width"),
        "offset": Param(0.25, low=0.0, high=1.0, doc="|mean| per coordinate, fraction of half-width"),
    }

    radius: float
    scale: float
    ridge: float
    sigma: float
    offset: float

    @property
    def constraint(self) -> ConstraintSet:
        return Box(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = G + λr (ℓ₁ part G, ridge λ‖θ‖ ≤ λr on the box)."""
        return self.scale + self.ridge * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    def data_bounds(self) -> dict[str, float]:
        """No bound: the data are Gaussian and L holds over the whole universe s ∈ Rᵖ (the ℓ₁
        loss is G-Lipschitz in θ whatever s is), so ``data_norm`` is declared infinite."""
        return {"data_norm": math.inf}

    def kernel(self) -> LossKernel:
        """Compiled loss and subgradient (:func:`sep_abs_loss`, prm = (G, λ))."""
        return LossKernel(sep_abs_loss, sep_abs_grad,
                          np.array([float(self.scale), float(self.ridge)]))

    def _w(self, p: int) -> float:
        return self.scale / math.sqrt(p)

    def mean(self, p: int) -> np.ndarray:
        a = self.constraint.half_width(p)  # type: ignore[attr-defined]
        return self.offset * a * np.where(np.arange(p) % 2 == 0, 1.0, -1.0)

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        a = self.constraint.half_width(p)  # type: ignore[attr-defined]
        X = self.mean(p) + self.sigma * a * rng.standard_normal((n, p))
        return Dataset(X, None, {"law": "N(m, sigma^2 I)"})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return (self._w(data.p) * np.abs(theta - data.X).sum(axis=1)
                + 0.5 * self.ridge * float(theta @ theta))

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        rows = data.X if idx is None else data.X[np.atleast_1d(idx)]
        theta = np.asarray(theta, dtype=float)
        return self._w(data.p) * np.sign(theta - rows) + self.ridge * theta

    def _coordinate_min(self, s: np.ndarray, w: float, a: float) -> float:
        """argmin over [−a, a] of w·mean|x − sᵢ| + (λ/2)x², exactly (candidates + prefix sums)."""
        s = np.sort(s)
        n = s.size
        cands = [s, np.array([-a, a])]
        if self.ridge > 0:
            slope = w * (2.0 * np.arange(n + 1) - n) / n
            cands.append(-slope / self.ridge)
        x = np.clip(np.concatenate(cands), -a, a)
        csum = np.concatenate(([0.0], np.cumsum(s)))
        j = np.searchsorted(s, x, side="right")
        tot = (j * x - csum[j]) + (csum[-1] - csum[j] - (n - j) * x)
        obj = w * tot / n + 0.5 * self.ridge * x * x
        return float(x[int(np.argmin(obj))])

    def solve(self, data: Dataset) -> Optimum:
        """Exact: the objective is separable and each coordinate is solved exactly (gap 0)."""
        a = self.constraint.half_width(data.p)  # type: ignore[attr-defined]
        w = self._w(data.p)
        theta = np.array([self._coordinate_min(data.X[:, j], w, a) for j in range(data.p)])
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0,
                       method="closed form (coordinate-wise median / 1-D piecewise quadratic)")

    # --- population ---------------------------------------------------------------------------
    def _pop_coord(self, x: np.ndarray, m: np.ndarray, sd: float, w: float) -> np.ndarray:
        u = (x - m) / sd
        return w * sd * (2.0 * stats.norm.pdf(u) + u * (2.0 * stats.norm.cdf(u) - 1.0)) \
            + 0.5 * self.ridge * x * x

    def _pop_minimiser(self, m: float, sd: float, w: float, a: float) -> float:
        if self.ridge == 0:
            return float(np.clip(m, -a, a))

        def deriv(x: float) -> float:
            return w * (2.0 * stats.norm.cdf((x - m) / sd) - 1.0) + self.ridge * x

        if deriv(-a) >= 0:
            return -a
        if deriv(a) <= 0:
            return a
        return float(optimize.brentq(deriv, -a, a, xtol=1e-15, rtol=1e-15))

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """Closed form E_s ℓ(θ; s) − min_C E_s ℓ, with E|x − s| = σ[2φ(u) + u(2Φ(u) − 1)] and
        u = (x − m)/σ (docs/instances.md, 'P1 and P6 separable l1')."""
        a = self.constraint.half_width(p)  # type: ignore[attr-defined]
        sd, w, m = self.sigma * a, self._w(p), self.mean(p)
        star = np.array([self._pop_minimiser(float(mj), sd, w, a) for mj in m])
        theta = np.asarray(theta, dtype=float)
        return float(np.sum(self._pop_coord(theta, m, sd, w) - self._pop_coord(star, m, sd, w)))

    # --- exact REM sampler --------------------------------------------------------------------
    def rem_factors(self, data: Dataset, k: float, mu: float,
                    center: np.ndarray) -> list[AbsGaussFactor]:
        """The p independent 1-D factors of ∝ exp(−k·F − (kμ/2)‖θ − c‖²) on the box: w = kG/(√p n),
        A = k(λ + μ), B = kμcⱼ."""
        a = self.constraint.half_width(data.p)  # type: ignore[attr-defined]
        w = k * self._w(data.p) / data.n
        A = k * (self.ridge + mu)
        return [AbsGaussFactor(data.X[:, j], w, A, k * mu * float(center[j]), -a, a)
                for j in range(data.p)]


@register_exact_sampler("regularized_gibbs", SepAbs)
def _sep_abs_rem(problem: SepAbs, data: Dataset, k: float, mu: float, center: np.ndarray
                 ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """Exact REM draws: each coordinate from its truncated-normal mixture (needs k(λ + μ) > 0;
    ``None`` otherwise, with no μ = 0 fallback). ``draw.many(rng, size)``: ``size`` draws, one
    vectorised :meth:`AbsGaussFactor.sample` per coordinate (a lone draw is ``many(rng, 1)[0]``)."""
    if not k * (problem.ridge + mu) > 0:
        return None
    factors = problem.rem_factors(data, k, mu, np.asarray(center, dtype=float))

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        return np.stack([f.sample(rng, size) for f in factors], axis=1)

    def draw(rng: np.random.Generator) -> np.ndarray:
        return many(rng, 1)[0]

    draw.many = many  # type: ignore[attr-defined]
    return draw
