"""A joint test of one event's (ε, δ) inequality: both sides' counts in one statistic.

For an event E the claim says p₁ ≤ e^ε·p₀ + δ, with p₁ = P[E | numerator set] and
p₀ = P[E | denominator set]. The Clopper–Pearson rectangle (:mod:`dpbench.audit.stats`) bounds
p₁ from below and p₀ from above separately, each at its own level, and combines the worst
corners: its margin grows like z·(σ₁ + e^ε·σ₀). Testing the difference directly needs only
z·√(σ₁² + e^{2ε}·σ₀²), about half the runs for a Gaussian pair's tail events
(docs/audit.md, 'The joint test').

**The test.** K₁ ~ Bin(N, p₁) and K₀ ~ Bin(N, p₀) are independent (fresh runs on each side).
H₀(ε): p₁ ≤ c·p₀ + δ with c = e^ε; statistic T = K₁ − c·K₀, large values refute H₀. Its
p-value under a parameter (p₀, p₁) is P[T ≥ t_obs]; the composite null is handled with
Berger and Boos (JASA 1994): with C_γ a (1 − γ) Clopper–Pearson interval for p₀,

    p(ε) = γ + sup_{p₀ ∈ C_γ} P_{p₀, min(1, c·p₀ + δ)}[T ≥ t_obs],

a valid p-value (P[p(ε) ≤ a] ≤ a under H₀(ε)) because P[T ≥ t] only grows with p₁, so the
supremum over H₀ is on its boundary p₁ = c·p₀ + δ. P[T ≥ t] is the sum over K₀ = j of
P[K₀ = j]·P[K₁ ≥ t_obs + c·j], over j within :data:`SPREAD` standard deviations of its mean (the mass
left out is added back, so the p-value only errs upward); the supremum over p₀ is taken on a grid of
:data:`GRID` points of C_γ refined around its best point (a smooth unimodal function in
practice; the tests check the level by simulation).

**The bound.** ε_lb is the inversion of the test: the largest ε below which every H₀ is rejected
at level a, found by bisection (p(ε) grows with ε). With probability ≥ 1 − a the event's true
ε (the smallest ε that satisfies its inequality) is ≥ ε_lb.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln, ndtri, xlog1py, xlogy
from scipy.stats import beta as _beta

__all__ = ["GAMMA_SHARE", "joint_epsilon_lb", "joint_p_value", "predicted_joint_epsilon"]

#: Share γ/a of the level spent on the interval of p₀ (Berger–Boos).
GAMMA_SHARE = 0.1
#: Grid points over the interval of p₀ before the local refinement.
GRID = 17
#: Half-width of the summed range of K₀, in standard deviations (plus SPREAD² counts; the mass
#: left out, 1 − the mass summed, is added to the p-value).
SPREAD = 9.0
#: Largest ε the bisection considers.
EPSILON_MAX = 50.0
_BISECTIONS = 30


def _cp_interval(k: int, n: int, gamma: float) -> tuple[float, float]:
    lo = 0.0 if k <= 0 else float(_beta.ppf(gamma / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(_beta.ppf(1 - gamma / 2, k + 1, n - k))
    return lo, hi


def _log_pmf(j: np.ndarray, n: int, p: float) -> np.ndarray:
    return (gammaln(n + 1.0) - gammaln(j + 1.0) - gammaln(n - j + 1.0)
            + xlogy(j, p) + xlog1py(n - j, -p))


def _window(n: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """The counts within :data:`SPREAD` standard deviations (plus SPREAD² counts) of the mean of
    Bin(n, p), and their probabilities."""
    if p <= 0.0 or p >= 1.0:
        k = float(n) if p >= 1.0 else 0.0
        return np.array([k]), np.ones(1)
    m, sd = n * p, math.sqrt(n * p * (1.0 - p))
    half = SPREAD * sd + SPREAD ** 2
    j = np.arange(max(math.floor(m - half), 0), min(math.ceil(m + half), n) + 1, dtype=float)
    return j, np.exp(_log_pmf(j, n, p))


def _tail_prob(k1: int, k0: int, n: int, c: float, p0: float, p1: float) -> float:
    """An upper bound, tight to ~1e-15, on P[K₁ − c·K₀ ≥ k1 − c·k0] for K₁ ~ Bin(n, p1) and
    K₀ ~ Bin(n, p0) independent: the sum runs over the windows of K₀ and K₁ (:func:`_window`);
    the mass outside them is counted as if it were in the event."""
    p1 = min(max(p1, 0.0), 1.0)
    j, mass = _window(n, p0)
    k, pk = _window(n, p1)
    out0 = max(0.0, 1.0 - float(np.sum(mass)))
    out1 = max(0.0, 1.0 - float(np.sum(pk)))
    # at_least[i] = P[K₁ ≥ k[i]] within the window, plus the mass above it (bounded by out1)
    at_least = np.cumsum(pk[::-1])[::-1] + out1
    exact = k1 + c * (j - k0)
    need = np.ceil(exact - 1e-12 * np.maximum(1.0, abs(k1) + c * np.abs(j - k0)))  # K₁ ≥ need
    idx = np.clip(need - k[0], -1, k.size).astype(np.int64)
    sf = np.where(idx <= 0, 1.0, at_least[np.clip(idx, 0, k.size - 1)])
    sf = np.where(idx >= k.size, out1, sf)
    return float(min(1.0, float(np.dot(mass, sf)) + out0 + 1e-12))


def joint_p_value(k1: int, k0: int, n: int, epsilon: float, delta: float, *,
                  gamma: float) -> float:
    """The Berger–Boos p-value of H₀(ε): p₁ ≤ e^ε·p₀ + δ from K₁ = ``k1``, K₀ = ``k0`` out of
    ``n`` runs per side (module docstring); ``gamma`` is the level of the interval of p₀."""
    k1, k0, n = int(k1), int(k0), int(n)
    if n <= 0:
        return 1.0
    c = math.exp(epsilon)
    lo, hi = _cp_interval(k0, n, gamma)
    hi = min(hi, max((1.0 - delta) / c, 0.0))  # p₁ = c·p₀ + δ ≤ 1 on the boundary
    lo = min(lo, hi)

    def f(p0: float) -> float:
        return _tail_prob(k1, k0, n, c, p0, c * p0 + delta)

    grid = np.linspace(lo, hi, GRID) if hi > lo else np.array([lo])
    vals = [f(float(x)) for x in grid]
    i = int(np.argmax(vals))
    best = vals[i]
    if grid.size > 1:
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        if b > a:
            r = minimize_scalar(lambda x: -f(x), bounds=(a, b), method="bounded",
                                options={"xatol": (b - a) * 1e-3})
            best = max(best, -float(r.fun))
    return min(1.0, best + gamma)


def joint_epsilon_lb(k1: int, k0: int, n: int, delta: float, alpha: float,
                     *, gamma_share: float = GAMMA_SHARE) -> float:
    """The joint lower bound on the event's ε at level ``alpha`` (module docstring); −inf when
    even ε = 0 is not refuted."""
    k1, k0, n = int(k1), int(k0), int(n)
    if n <= 0 or k1 <= 0:
        return -math.inf
    gamma = alpha * gamma_share
    if joint_p_value(k1, k0, n, 0.0, delta, gamma=gamma) > alpha:
        return -math.inf
    p1, p0 = k1 / n, k0 / n
    hi = EPSILON_MAX if (k0 == 0 or p1 <= delta) else min(EPSILON_MAX,
                                                          math.log(max(p1 - delta, 1e-300) / p0))
    if joint_p_value(k1, k0, n, hi, delta, gamma=gamma) <= alpha:
        return hi
    lo = 0.0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if joint_p_value(k1, k0, n, mid, delta, gamma=gamma) <= alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-4 * max(1.0, lo):
            break
    return lo


def predicted_joint_epsilon(p1: np.ndarray, p0: np.ndarray, n: int, delta: float,
                            alpha: float) -> np.ndarray:
    """The joint bound the normal approximation predicts for rates ``p1``/``p0`` at ``n`` runs
    per side (vectorised; for choosing events and for the resolution, never for a verdict): the
    ε where p₁ − e^ε·p₀ − δ = z_a·√((p₁(1 − p₁) + e^{2ε}·p₀(1 − p₀))/n); −inf when none ≥ 0."""
    p1 = np.clip(np.asarray(p1, dtype=float), 0.0, 1.0)
    p0 = np.clip(np.asarray(p0, dtype=float), 0.0, 1.0)
    z = float(ndtri(1.0 - alpha * (1 - GAMMA_SHARE)))
    v1 = p1 * (1 - p1) / n
    v0 = p0 * (1 - p0) / n

    def g(eps: np.ndarray) -> np.ndarray:
        c = np.exp(eps)
        return p1 - c * p0 - delta - z * np.sqrt(v1 + c * c * v0 + 1.0 / (n * n))

    lo = np.zeros_like(p1 + p0)
    ok = g(lo) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        top = np.where(p0 > 0, np.log(np.maximum(p1 - delta, 1e-300) / np.maximum(p0, 1e-300)),
                       EPSILON_MAX)
    hi = np.clip(top, 0.0, EPSILON_MAX)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        up = g(mid) > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return np.where(ok, lo, -np.inf)
