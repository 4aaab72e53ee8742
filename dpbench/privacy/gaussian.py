"""Gaussian-mechanism calibrations: the classical σ and the analytic Gaussian mechanism.

For a query with ℓ₂-sensitivity Δ₂ released as q(D) + N(0, σ²I):

* **Classical** (Dwork & Roth 2014, Thm A.1): σ = Δ₂·√(2 ln(1.25/δ))/ε gives (ε, δ)-DP for
  ε < 1 (the theorem is stated for ε ∈ (0, 1) only; larger ε raises ``ValueError``).
* **Analytic** (Balle & Wang, ICML 2018, Thm 8): the mechanism is (ε, δ)-DP **iff**
  δ ≥ Φ(Δ₂/(2σ) − εσ/Δ₂) − e^ε·Φ(−Δ₂/(2σ) − εσ/Δ₂), with Φ the standard normal CDF. The right
  side decreases strictly in σ, so the smallest σ is found by root-finding; it is valid for every
  ε > 0 and is never larger than the classical σ.

* **Pointwise privacy loss, data-dependent shift** (:func:`pointwise_gaussian_sigma`): objective
  perturbation's output density is the noise density at b(θ) against b(θ) + v(θ), where the shift
  v(θ) moves with the output (CMS11 Thm 9, KST12), so the fixed-shift calibrations above do not
  apply verbatim. If v(θ) always lies in a fixed subspace S of dimension d with ‖v‖ ≤ Δ₂, the
  log density ratio is (2⟨b, v⟩ + ‖v‖²)/(2σ²) ≤ Δ₂‖P_S b‖/σ + Δ₂²/(2σ²), and ‖P_S b‖/σ ≤ t except
  with probability δ for t = √(2 ln(1/δ)) when d ≤ 2 (χ₂ tail e^{−t²/2}, χ₁'s is smaller) and
  t = √d + √(2 ln(1/δ)) otherwise (Gaussian concentration of the 1-Lipschitz norm). Solving
  Δ₂t/σ + Δ₂²/(2σ²) = ε gives σ; "loss ≤ ε except with probability δ" implies (ε, δ)-DP.

BST14's Gaussian shorthands (Appendix B's σ₀ and Appendix E's variance) omit the 2·ln(1.25/δ)
factor (docs/bst14.md Errata 5 and 6), so mechanisms here calibrate with these functions instead.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr

__all__ = ["analytic_gaussian_delta", "analytic_gaussian_sigma", "classical_gaussian_sigma",
           "gdp_delta", "gdp_epsilon", "gdp_mu", "pointwise_gaussian_sigma"]


def _check(sensitivity: float, epsilon: float, delta: float) -> None:
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def classical_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ₂·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1; valid for 0 < ε < 1 only)."""
    _check(sensitivity, epsilon, delta)
    if epsilon >= 1:
        raise ValueError(f"the classical Gaussian calibration needs epsilon < 1, got {epsilon!r}; "
                         "use analytic_gaussian_sigma")
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact δ(ε) of N(0, σ²I) noise at ℓ₂-sensitivity Δ₂ (Balle & Wang 2018, Thm 8).

    δ = Φ(a − b) − e^ε Φ(−a − b) with a = Δ₂/(2σ), b = εσ/Δ₂, evaluated in log space as
    Φ(a − b)·(−expm1(ε + log Φ(−a − b) − log Φ(a − b))) so tiny δ keep full relative precision.
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    log_first = float(log_ndtr(a - b))
    log_second = epsilon + float(log_ndtr(-a - b))
    return float(math.exp(log_first) * -math.expm1(log_second - log_first))


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest σ with analytic δ(ε) ≤ δ (Balle & Wang 2018, Thm 8 and their Algorithm 1).

    Brent's method on log δ(σ) − log δ over a bracket found by doubling from the classical
    scale Δ₂/ε; the root is then nudged up by ulps until δ(σ) ≤ δ holds in floating point, so the
    returned σ is never below the exact calibration (relative error ≈ 1e-15).
    """
    _check(sensitivity, epsilon, delta)
    target = math.log(delta)

    def excess(log_sigma: float) -> float:
        d = analytic_gaussian_delta(math.exp(log_sigma), sensitivity, epsilon)
        return (math.log(d) if d > 0 else -math.inf) - target

    lo = hi = math.log(sensitivity / epsilon)
    while excess(lo) <= 0:
        lo -= 1.0
    while excess(hi) > 0:
        hi += 1.0
    root = brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
    sigma = math.exp(root)
    while analytic_gaussian_delta(sigma, sensitivity, epsilon) > delta:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of a μ-GDP mechanism (Dong–Roth–Su 2022, Cor. 2.13):
    Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), i.e. the Gaussian mechanism with Δ₂/σ = μ."""
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be finite and > 0, got {mu!r}")
    return analytic_gaussian_delta(1.0 / mu, 1.0, epsilon)


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest μ such that μ-GDP implies (ε, δ)-DP (exact root-finding, not Lemma-26-style
    closed forms): μ = 1/σ of the analytic Gaussian mechanism at unit sensitivity."""
    mu = 1.0 / analytic_gaussian_sigma(1.0, epsilon, delta)
    while gdp_delta(mu, epsilon) > delta:
        mu = math.nextafter(mu, 0.0)
    return mu


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε with μ-GDP ⇒ (ε, δ)-DP (inverse of :func:`gdp_delta` in ε)."""
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    eps = brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    while gdp_delta(mu, eps) > delta:
        eps = math.nextafter(eps, math.inf)
    return float(eps)


def pointwise_gaussian_sigma(sensitivity: float, epsilon: float, delta: float, dim: int) -> float:
    """σ bounding the pointwise privacy loss of a shift v ∈ S (dim S = d, ‖v‖ ≤ Δ₂) by ε except
    with probability δ (module docstring): σ = Δ₂/u with u = −t + √(t² + 2ε), computed as
    2ε/(t + √(t² + 2ε)) to avoid cancellation."""
    _check(sensitivity, epsilon, delta)
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim!r}")
    tail = math.sqrt(2.0 * math.log(1.0 / delta))
    t = tail if dim <= 2 else math.sqrt(dim) + tail
    u = 2.0 * epsilon / (t + math.sqrt(t * t + 2.0 * epsilon))
    return sensitivity / u
