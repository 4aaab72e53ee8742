"""Exact sampler of exp(−k·F) on an interval for a convex piecewise-linear F (HUB-1D, BST14 App. A).

For a 1-D sum of piecewise-linear losses (HUB-1D's (y − xθ)₊, 1-D hinge or absolute losses) the
exponential-mechanism density exp(−k·F(θ)) on an interval is piecewise exponential: on a segment
[tᵢ, tᵢ₊₁] where F(θ) = Fᵢ + sᵢ(θ − tᵢ), its mass is

    exp(−k·Fᵢ)·wᵢ·φ(k·sᵢ·wᵢ),   wᵢ = tᵢ₊₁ − tᵢ,   φ(a) = (1 − e^{−a})/a   (φ(0) = 1).

:class:`PiecewiseExponential` computes every log-mass stably (no overflow for any sign or size of
k·sᵢ·wᵢ), picks a segment with those probabilities, and inverts that segment's truncated
exponential CDF in closed form (docs/bst14.md, "Exact samplers"). Nothing here needs F to
be convex; the breakpoints only have to contain every kink of F inside the interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from ...core.sets import Ball, BallAt, ConstraintSet, Intersection

__all__ = ["PiecewiseExponential", "interval_of", "piecewise_from_function"]


def _log_phi(a: np.ndarray) -> np.ndarray:
    """log φ(a), φ(a) = (1 − e^{−a})/a = ∫₀¹ e^{−a·u} du, stable for every real a."""
    a = np.asarray(a, dtype=float)
    out = np.zeros_like(a)
    pos = a > 0
    neg = a < 0
    out[pos] = np.log(-np.expm1(-a[pos])) - np.log(a[pos])
    # φ(a) = e^{−a}·(1 − e^{a})/(−a) for a < 0
    out[neg] = -a[neg] + np.log(-np.expm1(a[neg])) - np.log(-a[neg])
    return out


def _unit_truncated_exponential(u: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Inverse CDF on [0, 1] of the density ∝ e^{−c·x}, at uniform u (any real c)."""
    out = np.array(u, dtype=float, copy=True)
    pos = c > 0
    neg = c < 0
    # c > 0: x = −log(1 − u(1 − e^{−c}))/c; c < 0: mirror, x = 1 − (the c > 0 formula at −c).
    out[pos] = -np.log1p(u[pos] * np.expm1(-c[pos])) / c[pos]
    out[neg] = 1.0 - np.log1p(u[neg] * np.expm1(c[neg])) / c[neg]
    return np.clip(out, 0.0, 1.0)


class PiecewiseExponential:
    """The density ∝ exp(−k·F(θ)) on [t₀, t_m], F linear between consecutive breakpoints.

    Parameters
    ----------
    breakpoints:
        Strictly increasing t₀ < … < t_m (m ≥ 1), including both ends of the interval and every
        kink of F inside it.
    values:
        F(tᵢ) at every breakpoint.
    k:
        The temperature on F (BST14 Algorithm 2: k = ε/(2L‖C‖) on the sum loss), k ≥ 0.
    """

    def __init__(self, breakpoints: Iterable[float], values: Iterable[float], k: float) -> None:
        t = np.asarray(list(breakpoints), dtype=float)
        f = np.asarray(list(values), dtype=float)
        if t.ndim != 1 or t.size < 2 or t.shape != f.shape:
            raise ValueError("PiecewiseExponential: need >= 2 breakpoints, one value for each")
        if not np.all(np.diff(t) > 0):
            raise ValueError("PiecewiseExponential: breakpoints must be strictly increasing")
        if not (k >= 0 and math.isfinite(k)):
            raise ValueError(f"PiecewiseExponential: k must be finite and >= 0, got {k}")
        self.t, self.f, self.k = t, f, float(k)
        self.width = np.diff(t)
        self.slope = np.diff(f) / self.width
        self.rate = self.k * self.slope * self.width  # k·sᵢ·wᵢ: the exponent drop over segment i
        log_mass = -self.k * f[:-1] + np.log(self.width) + _log_phi(self.rate)
        self.log_norm = float(np.logaddexp.reduce(log_mass))
        self.log_mass = log_mass - self.log_norm
        cdf = np.cumsum(np.exp(self.log_mass))
        self._cum = np.concatenate([[0.0], cdf / cdf[-1]])

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Exact draws: a segment by its mass, then that segment's inverse CDF.

        Draws, in order: the segment uniforms, then the within-segment uniforms. Returns a float
        array of shape () when ``size`` is None, else (size,).
        """
        m = 1 if size is None else int(size)
        seg = np.searchsorted(self._cum, rng.random(m), side="right") - 1
        seg = np.clip(seg, 0, self.width.size - 1)
        x = _unit_truncated_exponential(rng.random(m), self.rate[seg])
        out = np.minimum(self.t[seg] + x * self.width[seg], self.t[-1])
        return out[0] if size is None else out

    def logpdf(self, theta: np.ndarray) -> np.ndarray:
        """log density at θ (−inf outside [t₀, t_m])."""
        theta = np.asarray(theta, dtype=float)
        inside = (theta >= self.t[0]) & (theta <= self.t[-1])
        seg = np.clip(np.searchsorted(self.t, theta, side="right") - 1, 0, self.width.size - 1)
        f = self.f[seg] + self.slope[seg] * (theta - self.t[seg])
        return np.where(inside, -self.k * f - self.log_norm, -np.inf)

    def cdf(self, theta: np.ndarray) -> np.ndarray:
        """The exact CDF at θ (closed form, segment by segment)."""
        theta = np.clip(np.asarray(theta, dtype=float), self.t[0], self.t[-1])
        seg = np.clip(np.searchsorted(self.t, theta, side="right") - 1, 0, self.width.size - 1)
        frac = (theta - self.t[seg]) / self.width[seg]
        # mass of [tᵢ, tᵢ + frac·wᵢ] relative to segment i's mass: frac·φ(frac·a)/φ(a)
        a = self.rate[seg]
        with np.errstate(divide="ignore"):
            log_part = np.log(frac) + _log_phi(frac * a) - _log_phi(a)
        return self._cum[seg] + np.exp(self.log_mass[seg] + log_part)


def interval_of(region: ConstraintSet) -> tuple[float, float]:
    """The interval [lo, hi] of a 1-D region: a ``Ball``, a ``BallAt`` or an ``Intersection``."""
    if isinstance(region, Intersection):
        centers, radii = region.balls(1)
        lo, hi = float(np.max(centers[:, 0] - radii)), float(np.min(centers[:, 0] + radii))
    elif isinstance(region, Ball):
        lo, hi = -region.radius, region.radius
    elif isinstance(region, BallAt):
        c = float(region.center_point[0])
        lo, hi = c - region.radius, c + region.radius
    else:
        raise TypeError(f"interval_of: {type(region).__name__} is not a 1-D ball or intersection")
    if not hi > lo:
        raise ValueError(f"interval_of: the region [{lo}, {hi}] is empty or a single point")
    return lo, hi


def piecewise_from_function(func: Callable[[float], float], kinks: Iterable[float], lo: float,
                            hi: float, k: float) -> PiecewiseExponential:
    """The sampler of exp(−k·func) on [lo, hi], func linear between the given kinks.

    Kinks outside (lo, hi) are dropped; ``func`` is evaluated once at every breakpoint.
    """
    inner = np.asarray(list(kinks), dtype=float)
    inner = inner[(inner > lo) & (inner < hi)]
    t = np.unique(np.concatenate([[lo, hi], inner]))
    return PiecewiseExponential(t, [func(float(x)) for x in t], k)
