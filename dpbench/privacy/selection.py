"""Accounting for T adaptive private selections (private Frank–Wolfe, docs/frank-wolfe.md).

Each step of :mod:`dpbench.algorithms.private_frank_wolfe` is one ε₀-DP selection. For a target
(ε, δ) after T adaptive steps, three certified composition theorems give an ε; all are valid, so
the smallest is (:func:`composed_epsilon`):

(a) **zCDP.** The exponential mechanism with utility sensitivity Δ sampled ∝ exp(ε₀u/(2Δ)) is
    ε₀-bounded-range (Durfee and Rogers, NeurIPS 2019, the definition of bounded range and its
    exponential-mechanism example), and an ε₀-BR mechanism is ε₀²/8-zCDP (Cesar and Rogers, ALT
    2021, "Bounding, concentrating, and truncating", the BR-to-zCDP bound). A
    pure ε₀-DP mechanism that is not known to be BR (Laplace report-noisy-min) is ε₀²/2-zCDP
    (Bun and Steinke 2016, Prop. 1.4). zCDP composes additively (BS16, composition lemma): ρ_T = Σρₜ, i.e.
    the Rényi curve ε_α = α·ρ_T for every α > 1, converted to (ε, δ) by Canonne, Kamath and
    Steinke (2020, Prop. 12): ε = αρ_T + (log(1/δ) − log α)/(α − 1) + log(1 − 1/α), valid for
    every α > 1; :func:`zcdp_epsilon` minimises it over α (whatever α is returned, the bound
    holds: the optimisation only tightens it).
(b) **Advanced composition** (Dwork, Rothblum and Vadhan 2010, Thm III.3; Dwork–Roth Thm 3.20):
    T ε₀-DP steps are (ε₀√(2T log(1/δ)) + Tε₀(e^{ε₀} − 1), δ)-DP.
(c) **Basic composition**: (Tε₀, 0)-DP.

:func:`calibrate_step_epsilon` finds, by bisection, the largest ε₀ whose composed ε (the minimum of
(a)–(c), increasing in ε₀) is ≤ the target, returning the lower end of the final bracket, so the
stated ε never exceeds the target.
"""

from __future__ import annotations

import math

__all__ = ["ACCOUNTINGS", "PROFILE_ORDERS", "advanced_composition_epsilon",
           "calibrate_step_epsilon", "composed_epsilon", "step_rho", "zcdp_epsilon"]

#: Rényi orders at which the claimed zCDP curve ε_α = α·ρ is tabulated (a dense geometric grid:
#: the CKS20 conversion at each profile ε takes the best of them).
PROFILE_ORDERS: tuple[float, ...] = tuple(
    1.0 + 10.0 ** (-3.0 + 7.0 * i / 399.0) for i in range(400))

#: The names recorded in the ledger's ``accounting`` field.
ACCOUNTINGS = {
    "zcdp": "zCDP of bounded-range selections (Cesar–Rogers 2021), CKS20 conversion",
    "zcdp_pure": "zCDP of pure-DP selections (Bun–Steinke 2016), CKS20 conversion",
    "advanced": "advanced composition (Dwork–Rothblum–Vadhan 2010)",
    "basic": "basic composition",
}


def step_rho(eps0: float, bounded_range: bool) -> float:
    """ρ of one ε₀-DP step: ε₀²/8 when ε₀-BR (CR21), else ε₀²/2 (BS16)."""
    return eps0 * eps0 / (8.0 if bounded_range else 2.0)


def _cks(alpha: float, rho: float, log_inv_delta: float) -> float:
    return (alpha * rho + (log_inv_delta - math.log(alpha)) / (alpha - 1.0)
            + math.log1p(-1.0 / alpha))


def zcdp_epsilon(rho: float, delta: float) -> tuple[float, float]:
    """(ε, α): the CKS20 Prop. 12 conversion of ρ-zCDP at δ, minimised over α > 1.

    The objective is convex in α on the relevant range; a golden-section search on log(α − 1)
    from a bracket around the classical optimum α ≈ 1 + √(log(1/δ)/ρ) finds the minimum, and the
    returned ε is the objective at the returned α (a valid bound for any α).
    """
    if rho <= 0:
        return 0.0, math.inf
    if not 0 < delta < 1:
        return math.inf, math.nan
    lid = math.log(1.0 / delta)
    lo, hi = math.log(1e-6), math.log(1e8)
    f = lambda u: _cks(1.0 + math.exp(u), rho, lid)  # noqa: E731
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(200):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
        if b - a < 1e-12:
            break
    u = c if fc < fd else d
    alpha = 1.0 + math.exp(u)
    return max(0.0, _cks(alpha, rho, lid)), alpha


def advanced_composition_epsilon(eps0: float, steps: int, delta: float) -> float:
    """DRV10 Thm III.3: T-fold ε₀-DP is (ε₀√(2T log(1/δ)) + Tε₀(e^{ε₀} − 1), δ)-DP."""
    if not 0 < delta < 1:
        return math.inf
    if eps0 > 700.0:  # e^{ε₀} overflows; the bound is vacuous anyway
        return math.inf
    return eps0 * math.sqrt(2.0 * steps * math.log(1.0 / delta)) + steps * eps0 * math.expm1(eps0)


def composed_epsilon(eps0: float, steps: int, delta: float, bounded_range: bool = True
                     ) -> tuple[float, str]:
    """The smallest certified ε of T adaptive ε₀-DP steps at δ, and the accounting that gave it
    (a key of :data:`ACCOUNTINGS`)."""
    if steps <= 0 or eps0 <= 0:
        return 0.0, "basic"
    cands = [(steps * eps0, "basic"),
             (advanced_composition_epsilon(eps0, steps, delta), "advanced"),
             (zcdp_epsilon(steps * step_rho(eps0, bounded_range), delta)[0],
              "zcdp" if bounded_range else "zcdp_pure")]
    return min(cands, key=lambda c: c[0])


def calibrate_step_epsilon(epsilon: float, delta: float, steps: int,
                           bounded_range: bool = True) -> float:
    """The largest per-step ε₀ (to relative 1e-12) with :func:`composed_epsilon` ≤ ``epsilon``.

    ε₀ = ε/T (basic composition) is always feasible and ε₀ = ε never is for T > 1 unless basic
    composition gives it; bisection keeps the feasible lower end.
    """
    if steps <= 1:
        return float(epsilon)
    lo, hi = epsilon / steps, float(epsilon)
    if composed_epsilon(hi, steps, delta, bounded_range)[0] <= epsilon:
        return hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if composed_epsilon(mid, steps, delta, bounded_range)[0] <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * lo:
            break
    return lo
