"""Exact privacy loss of 1-D objective perturbation: θ solving G(θ) + b = 0 on an interval.

One-dimensional objective perturbation with a Gaussian linear term releases the minimiser over
[t₀, t_m] of J(θ) + bθ, b ~ N(0, σ²), where J′ = G is continuous and strictly increasing
(BST14 Appendix A's Huberised objective, :mod:`dpbench.algorithms.huber_objective_perturbation`).
The minimiser is t₀ when G(t₀) + b ≥ 0, t_m when G(t_m) + b ≤ 0, and G⁻¹(−b) otherwise, so
(change of variables, CMS11 Thm 9 in one dimension, [derived] here) its law has

* the atom Φ(G(t₀)/σ) at t₀ and the atom Φ(−G(t_m)/σ) at t_m, and
* the density G′(θ)·φ(G(θ)/σ)/σ on (t₀, t_m).

When G is piecewise linear (the Huberised hinge: f̂′ is piecewise linear) with knots
t₀ < t₁ < … < t_m, on each piece G(θ) = gᵢ + βᵢ(θ − tᵢ), βᵢ > 0, so the density is a Gaussian
density in θ and the log ratio of two such laws (D and D′, on a common refinement of their
knots) is a quadratic in θ on each piece. The hockey-stick divergence
H_γ(P‖Q) = ∫(p − γq)₊ + Σ_atoms (P(atom) − γQ(atom))₊ is then exact: on each piece the set where
p > γq is cut out by the (at most two) roots of that quadratic and each part's masses are
differences of Φ (evaluated in the tail that keeps their precision). ε(δ) is its root in ε
(:func:`dpbench.privacy.projected.epsilon_for_delta`, never erring downward), bracketed by the
pure ε: the largest |log ratio| over the pieces (a quadratic's extremes on an interval) and the
atoms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from scipy.special import log_ndtr, ndtr

from .projected import epsilon_for_delta

__all__ = ["PiecewiseLinearRoot", "root_law_epsilon"]

#: Rows within this distance (relative to the interval's length) of an end are at its atom.
ATOM_RTOL = 1e-12


def _mass(u: np.ndarray | float, v: np.ndarray | float) -> np.ndarray:
    """Φ(v) − Φ(u) for u ≤ v, computed in the tail that keeps its precision."""
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    return np.where(u >= 0, ndtr(-u) - ndtr(-v), ndtr(v) - ndtr(u))


@dataclass(frozen=True)
class PiecewiseLinearRoot:
    """The law of the clamped root of G(θ) + b = 0, b ~ N(0, σ²), G piecewise linear with
    values ``values`` at the increasing ``knots`` (the first and last are the interval's ends)."""

    knots: np.ndarray
    values: np.ndarray
    sigma: float

    def __post_init__(self) -> None:
        t = np.asarray(self.knots, dtype=float)
        g = np.asarray(self.values, dtype=float)
        if t.ndim != 1 or t.size < 2 or g.shape != t.shape:
            raise ValueError("knots and values must be 1-D arrays of the same length >= 2")
        if not (np.all(np.diff(t) > 0) and np.all(np.diff(g) > 0)):
            raise ValueError("knots and G's values must be strictly increasing")
        if not (self.sigma > 0 and math.isfinite(self.sigma)):
            raise ValueError(f"sigma must be finite and > 0, got {self.sigma!r}")
        object.__setattr__(self, "knots", t)
        object.__setattr__(self, "values", g)

    # --- pieces (standardised: z(θ) = (gᵢ + βᵢ(θ − tᵢ))/σ = Aᵢ + Bᵢ·(θ − tᵢ)) ------------------
    @property
    def widths(self) -> np.ndarray:
        return np.diff(self.knots)

    @property
    def intercepts(self) -> np.ndarray:
        return self.values[:-1] / self.sigma

    @property
    def slopes(self) -> np.ndarray:
        return np.diff(self.values) / np.diff(self.knots) / self.sigma

    def log_atoms(self) -> tuple[float, float]:
        """log P(θ = t₀), log P(θ = t_m)."""
        return (float(log_ndtr(self.values[0] / self.sigma)),
                float(log_ndtr(-self.values[-1] / self.sigma)))

    def log_density(self, theta: np.ndarray) -> np.ndarray:
        """log of the density on the open interval at ``theta`` (inside it)."""
        theta = np.asarray(theta, dtype=float)
        i = np.clip(np.searchsorted(self.knots, theta, side="right") - 1, 0, self.widths.size - 1)
        B = self.slopes[i]
        z = self.intercepts[i] + B * (theta - self.knots[i])
        return np.log(B) - 0.5 * z * z - 0.5 * math.log(2.0 * math.pi)

    def _check_pair(self, other: PiecewiseLinearRoot) -> None:
        if other.knots.shape != self.knots.shape or not np.array_equal(other.knots, self.knots):
            raise ValueError("the two laws must be given on the same knots (refine both first)")

    def log_density_ratio(self, other: PiecewiseLinearRoot, theta: np.ndarray) -> np.ndarray:
        """log dP_self/dP_other at ``theta``: the atoms' log ratio at the ends, the densities'
        inside."""
        self._check_pair(other)
        theta = np.asarray(theta, dtype=float).reshape(-1)
        lo, hi = float(self.knots[0]), float(self.knots[-1])
        tol = ATOM_RTOL * (hi - lo)
        at_lo, at_hi = theta <= lo + tol, theta >= hi - tol
        inside = ~(at_lo | at_hi)
        out = np.empty(theta.shape)
        out[inside] = self.log_density(theta[inside]) - other.log_density(theta[inside])
        (s_lo, s_hi), (o_lo, o_hi) = self.log_atoms(), other.log_atoms()
        out[at_lo] = s_lo - o_lo
        out[at_hi] = s_hi - o_hi
        return out

    def _quadratics(self, other: PiecewiseLinearRoot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per piece, the coefficients (a, b, c) of log p − log q = a x² + b x + c in
        x = θ − tᵢ ∈ [0, wᵢ]."""
        A0, B0, A1, B1 = self.intercepts, self.slopes, other.intercepts, other.slopes
        return (-0.5 * (B0 * B0 - B1 * B1), -(A0 * B0 - A1 * B1),
                np.log(B0 / B1) - 0.5 * (A0 * A0 - A1 * A1))

    def pure_epsilon(self, other: PiecewiseLinearRoot) -> float:
        """sup |log p − log q| over the pieces (ends and vertex of each quadratic) and atoms."""
        self._check_pair(other)
        a, b, c = self._quadratics(other)
        w = self.widths
        values = [c, a * w * w + b * w + c]
        with np.errstate(divide="ignore", invalid="ignore"):
            vertex = np.where(a != 0, -b / (2.0 * a), -1.0)
        inner = (vertex > 0) & (vertex < w)
        values.append(np.where(inner, a * vertex * vertex + b * vertex + c, 0.0))
        (s_lo, s_hi), (o_lo, o_hi) = self.log_atoms(), other.log_atoms()
        return float(max(np.max(np.abs(np.concatenate(values))), abs(s_lo - o_lo),
                         abs(s_hi - o_hi)))

    def hockey_stick(self, other: PiecewiseLinearRoot, epsilon: float) -> float:
        """H_{e^ε}(P_self‖P_other), exact (module docstring)."""
        self._check_pair(other)
        gamma = math.exp(epsilon)
        a, b, c = self._quadratics(other)
        c = c - epsilon
        total = 0.0
        A0, B0, A1, B1 = self.intercepts, self.slopes, other.intercepts, other.slopes
        for i, w in enumerate(self.widths):
            cuts = [0.0, float(w)]
            for r in _roots(float(a[i]), float(b[i]), float(c[i])):
                if 0.0 < r < w:
                    cuts.append(r)
            cuts.sort()
            for x1, x2 in pairwise(cuts):
                if x2 <= x1:
                    continue
                xm = 0.5 * (x1 + x2)
                if a[i] * xm * xm + b[i] * xm + c[i] <= 0:
                    continue
                p = float(_mass(A0[i] + B0[i] * x1, A0[i] + B0[i] * x2))
                q = float(_mass(A1[i] + B1[i] * x1, A1[i] + B1[i] * x2))
                total += max(p - gamma * q, 0.0)
        for lp, lq in zip(self.log_atoms(), other.log_atoms()):
            total += max(math.exp(lp) - gamma * math.exp(lq), 0.0)
        return total


def _roots(a: float, b: float, c: float) -> list[float]:
    """Real roots of a x² + b x + c (numerically stable; linear when a = 0)."""
    if a == 0.0:
        return [] if b == 0.0 else [-c / b]
    disc = b * b - 4.0 * a * c
    if disc < 0:
        return []
    q = -0.5 * (b + math.copysign(math.sqrt(disc), b))
    roots = [q / a]
    if q != 0.0:
        roots.append(c / q)
    return roots


def root_law_epsilon(law0: PiecewiseLinearRoot, law1: PiecewiseLinearRoot,
                     delta: float) -> float:
    """The exact ε(δ) of the pair (both orders; module docstring)."""
    eps0 = max(law0.pure_epsilon(law1), 0.0)
    if delta == 0.0 or eps0 == 0.0:
        return eps0
    return epsilon_for_delta(lambda e: max(law0.hockey_stick(law1, e),
                                           law1.hockey_stick(law0, e)), delta, eps0)
