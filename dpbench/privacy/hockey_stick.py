"""Exact hockey-stick divergences of one step of batch-1 DP-SGD, for checking dominating pairs.

One step of BST14's Algorithm 1 releases n·clip_L(∇ℓ(θ; d_I)) + N(0, σ²I) for one index I drawn
uniformly from [n]. Divided by nL, every clipped gradient lies in the unit ball and the noise has
standard deviation s = σ/(nL) = 2z (z = σ/(2nL) is the noise multiplier of
:mod:`dpbench.privacy.accountant`). For replace-one neighbours whose common rows all sit at one
point a (the worst case, by joint convexity; docs/bst14.md, "Which accountant is certified
(replace-one, batch 1)") the two output laws are

    P = q·N(b, s²I) + (1 − q)·N(a, s²I),   Q = q·N(b′, s²I) + (1 − q)·N(a, s²I),   q = 1/n,

and this module computes H_γ(P‖Q) = ∫ (p − γ·q)₊ for given a, b, b′ (any dimension):

* Isotropic noise makes every direction orthogonal to the affine span of {a, b, b′} irrelevant,
  so the integral is two-dimensional: x₁ along b − b′, x₂ along the part of a − b′ orthogonal to
  it (one-dimensional when the three points are collinear).
* For fixed x₂ the integrand along x₁ is Σₖ wₖ·φ_s(x₁ − mₖ) with at most three centres mₖ.
  Divided by φ_s(x₁) it is an exponential sum Σₖ cₖ·exp(mₖx₁/s²), which has at most two real
  roots (Descartes' rule of signs for exponential sums); we locate them with the stationary
  point of g(x) = e^{−λ₂x}·Σₖ cₖe^{λₖx} (g is monotone on each side of it) and bisection, then
  integrate each term exactly with Gaussian CDFs. The inner integral is exact to rounding.
* The outer integral over x₂ uses the trapezoid rule on a uniform grid (``n_outer`` points over
  ±14 s around the centres), which converges fast where H is not tiny; ``error=True`` also
  returns the change from halving the grid, the error estimate that
  ``scripts/noisy_sgd_dominating_pair.py`` reports.

The closed form for two Gaussians (Balle and Wang 2018, Thm 8) is
δ = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2), μ = ‖b − b′‖/s; it checks the one-dimensional path.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

__all__ = ["line_hockey_stick", "mixture_hockey_stick"]

#: Bracket half-width (in units of s) beyond the outermost centre: Φ(−40) underflows to 0.
_BRACKET = 40.0
#: Bisection steps: the bracket (≤ 80s + 2) shrinks to ≲ 1e-16·s.
_BISECT = 60


def _mass(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Φ(v) − Φ(u) for u ≤ v (standardised), computed in the tail that keeps its precision."""
    upper = ndtr(-u) - ndtr(-v)
    lower = ndtr(v) - ndtr(u)
    return np.where(u >= 0, upper, lower)


def _sign(logw: np.ndarray, sgn: np.ndarray, m: np.ndarray, s: float, x: np.ndarray) -> np.ndarray:
    """Sign of Σₖ wₖ·φ_s(x − mₖ) (log|wₖ| and sign(wₖ) given), scaled by its largest term."""
    t = logw - 0.5 * ((x[..., None] - m) / s) ** 2
    top = t.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.sign(np.sum(sgn * np.exp(t - top), axis=-1))


def _bisect(logw, sgn, m, s, lo, hi, s_lo):
    """The sign change between lo and hi (s_lo: the sign at lo), elementwise."""
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        same = _sign(logw, sgn, m, s, mid) == s_lo
        lo = np.where(same, mid, lo)
        hi = np.where(same, hi, mid)
    return 0.5 * (lo + hi)


def line_hockey_stick(w: np.ndarray, m: np.ndarray, s: float) -> np.ndarray:
    """∫ (Σₖ wₖ·φ_s(x − mₖ))₊ dx over the real line, for at most three distinct centres.

    ``w`` has shape (..., K) (signed weights), ``m`` shape (K,) (distinct centres), K ≤ 3.
    φ_s is the N(0, s²) density. Exact up to rounding (and the Φ(−40) bracket).
    """
    w = np.asarray(w, dtype=float)
    m = np.asarray(m, dtype=float)
    order = np.argsort(m)
    m, w = m[order], w[..., order]
    k = m.size
    if k > 3:
        raise ValueError("at most three distinct centres")
    shape = w.shape[:-1]
    lo = np.full(shape, m[0] - _BRACKET * s)
    hi = np.full(shape, m[-1] + _BRACKET * s)
    # The stationary point x* of g = e^{-λ₂x}·f (λ = m/s²): f has one sign change on each side.
    if k == 3:
        d1, d3 = (m[0] - m[1]) / s**2, (m[2] - m[1]) / s**2
        # g is convex or concave (one stationary point) iff the outer coefficients share a sign.
        convex = (w[..., 0] * w[..., 2]) > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = (np.log(np.abs(w[..., 0])) - 0.5 * (m[0] / s) ** 2 + np.log(-d1)
                         - np.log(np.abs(w[..., 2])) + 0.5 * (m[2] / s) ** 2 - np.log(d3))
            xstar = log_ratio / (d3 - d1)
        xstar = np.where(convex & np.isfinite(xstar), np.clip(xstar, lo, hi), lo)
    else:
        xstar = lo.copy()
    with np.errstate(divide="ignore"):
        logw = np.log(np.abs(w))
    sgn = np.sign(w)
    s_lo = _sign(logw, sgn, m, s, lo)
    s_mid = _sign(logw, sgn, m, s, xstar)
    s_hi = _sign(logw, sgn, m, s, hi)
    r_left = np.where(s_lo != s_mid, _bisect(logw, sgn, m, s, lo, xstar, s_lo), xstar)
    r_right = np.where(s_mid != s_hi, _bisect(logw, sgn, m, s, xstar, hi, s_mid), xstar)
    points = np.stack([lo, r_left, xstar, r_right, hi], axis=-1)
    total = np.zeros(shape)
    for j in range(4):
        u, v = points[..., j], points[..., j + 1]
        sign = _sign(logw, sgn, m, s, 0.5 * (u + v))
        part = np.zeros(shape)
        for i in range(k):
            part = part + w[..., i] * _mass((u - m[i]) / s, (v - m[i]) / s)
        total = total + np.where((sign > 0) & (v > u), np.maximum(part, 0.0), 0.0)
    return total


def mixture_hockey_stick(a, b, b_prime, q: float, s: float, gammas, n_outer: int = 801,
                         error: bool = False):
    """H_γ(P‖Q) for P = qN(b, s²I) + (1−q)N(a, s²I), Q = qN(b′, s²I) + (1−q)N(a, s²I).

    ``a``, ``b``, ``b_prime``: points of the same dimension; ``gammas``: array of γ ≥ 0.
    Returns an array shaped like ``gammas``. One-dimensional (exact to rounding) when the three
    points are collinear, otherwise a trapezoid rule with ``n_outer`` (odd) points over x₂.
    With ``error=True`` returns ``(H, err)``, err = |H − the same rule on every other point|
    (an estimate of the outer rule's error; 0 in the collinear case).
    """
    a, b, bp = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (a, b, b_prime))
    gammas = np.asarray(gammas, dtype=float)
    if not (0 < q <= 1 and s > 0):
        raise ValueError("need 0 < q <= 1 and s > 0")
    gap = np.linalg.norm(b - bp)
    if gap == 0:
        return np.maximum(1.0 - gammas, 0.0)
    e = (b - bp) / gap
    rel = a - bp
    a1 = float(rel @ e)
    a2 = float(np.linalg.norm(rel - a1 * e))
    centres = [gap, 0.0, a1]  # x₁ coordinates of b, b′, a (b′ at the origin)
    g = gammas[..., None]

    def weights(phi_b: np.ndarray, phi_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Signed weights of p − γq on the line, terms b, b′, a; equal centres are merged.
        raw = [q * phi_b, -g * q * phi_b, (1.0 - g) * (1.0 - q) * phi_a]
        merged: dict[float, np.ndarray] = {}
        for c, wk in zip(centres, raw):
            key = next((k for k in merged if abs(k - c) <= 1e-12 * max(1.0, s)), c)
            merged[key] = merged.get(key, 0.0) + wk
        keys = list(merged)
        return np.stack(np.broadcast_arrays(*[merged[k] for k in keys]), axis=-1), np.array(keys)

    if a2 <= 1e-12 * max(1.0, s):
        w, m = weights(np.ones(1), np.ones(1))  # shape (..., 1, K): one "x₂ point" of weight 1
        h = line_hockey_stick(w, m, s)[..., 0]
        return (h, np.zeros_like(h)) if error else h
    if n_outer % 2 == 0:
        raise ValueError("n_outer must be odd (the error estimate uses every other point)")
    x2 = np.linspace(-14.0 * s, a2 + 14.0 * s, n_outer)
    h = x2[1] - x2[0]
    def phi(t: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * (t / s) ** 2) / (s * np.sqrt(2 * np.pi))

    w, m = weights(phi(x2), phi(x2 - a2))  # shape (..., n_outer, K)
    inner = line_hockey_stick(w, m, s)
    trap = np.full(n_outer, h)
    trap[[0, -1]] = h / 2
    coarse = np.zeros(n_outer)
    coarse[::2] = 2 * h
    coarse[[0, -1]] = h
    value = inner @ trap
    return (value, np.abs(value - inner @ coarse)) if error else value
