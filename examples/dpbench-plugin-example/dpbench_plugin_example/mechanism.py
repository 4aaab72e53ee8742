"""(ε, δ)-DP Gaussian output perturbation for strongly convex Lipschitz losses."""

from __future__ import annotations

import math

import numpy as np

from dpbench import Algorithm, Charge, Param, PrivacyLedger, RateCard, Release
from scipy.special import log_ndtr, ndtr


def analytic_gaussian_sigma(epsilon: float, delta: float) -> float:
    """Smallest σ (per unit ℓ₂ sensitivity) for which N(0, σ²) noise is (ε, δ)-DP.

    Balle and Wang (ICML 2018), Theorem 8: the Gaussian mechanism with sensitivity 1 and standard
    deviation s is (ε, δ)-DP iff Φ(1/(2s) − εs) − e^ε·Φ(−1/(2s) − εs) ≤ δ. The left side decreases
    in s; a bisection on log s returns the upper end of the final bracket, so the returned s
    always satisfies the condition (up to floating-point error in Φ, ~1e-16). Valid for every
    ε > 0 (unlike the classic σ = √(2 ln(1.25/δ))/ε, proved for ε ≤ 1) and never larger than the
    classic σ where that one holds.
    """

    def excess_delta(s: float) -> float:
        a, b = 1.0 / (2.0 * s) - epsilon * s, -1.0 / (2.0 * s) - epsilon * s
        return float(ndtr(a) - np.exp(epsilon + log_ndtr(b))) - delta

    lo, hi = 1e-12, 1.0
    while excess_delta(hi) > 0:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if excess_delta(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-12:
            break
    return hi


class SolverGapExceeded(RuntimeError):
    """The solver's certified gap is above the public bound the noise was calibrated for."""


class GaussianOutputPerturbation(Algorithm):
    """Output perturbation with Gaussian noise: θ̂ = Π_C(θ* + N(0, σ² I_p)).

    θ* is the constrained minimiser of the average loss, from ``problem.solve(data)``. The average
    objective is Δ-strongly convex and replacing one example moves its gradient by at most 2L/n, so
    the minimiser moves by at most Δ₂ = 2L/(nΔ) in ℓ₂ (Chaudhuri, Monteleoni, Sarwate 2011).

    Inexact solver: a certified gap g gives ‖θ̂ − θ*‖ ≤ √(2g/Δ), so the sensitivity is inflated by
    2·√(2·solver_gap/Δ), computed from the *public* bound ``solver_gap`` (never from the gap the
    solver actually reached, which depends on the data). A run whose certified gap exceeds
    ``solver_gap`` raises :class:`SolverGapExceeded` instead of releasing an under-noised estimate.

    Calibration: the analytic Gaussian mechanism (Balle and Wang 2018, Theorem 8; see
    :func:`analytic_gaussian_sigma`), exact for every ε > 0. For ε ≤ 1 its σ is at most the classic
    σ_classic = Δ₂·√(2 ln(1.25/δ))/ε (Dwork and Roth 2014, Theorem A.1), so bounds stated with
    σ_classic hold. Projection onto C is post-processing and costs no privacy.

    Utility (average scale, ε ≤ 1 so that σ ≤ σ_classic): with b ~ N(0, σ² I_p), E‖b‖ ≤ √p·σ, so
    on non-smooth losses E[excess] ≤ L·√p·σ ≤ 2L²√(2p ln(1.25/δ))/(nΔε); on β-smooth losses
    E[excess] ≤ (β/2)·E‖b‖² = (β/2)·p·σ² ≤ 4βL²p ln(1.25/δ)/(n²Δ²ε²).
    """

    name = "gaussian_output_perturbation"
    summary = "Exact ERM plus Gaussian noise, (ε, δ)-DP, strongly convex losses"
    citation = ("Chaudhuri, Monteleoni, Sarwate (JMLR 2011); "
                "Balle and Wang (ICML 2018), Theorem 8")
    privacy = "approx"
    requires = ("convex", "lipschitz", "strongly_convex")
    version = "1"
    params = {
        "solver_gap": Param(
            1e-10, kind="float", low=0.0, high=math.inf, high_open=True,
            doc="public bound on the solver's certified gap (average scale); inflates the "
                "sensitivity by 2·√(2·solver_gap/Δ)"),
    }

    def rate_card(self) -> RateCard:
        """Non-smooth worst case on the average scale: L·E‖b‖ ≤ L·√p·σ."""
        return RateCard(
            expression="2*L**2*sqrt(2*p*log(1.25/delta))/(n*Delta*epsilon)",
            exponents={"n": -1, "p": 0.5, "epsilon": -1},
            citation="CMS11 sensitivity 2L/(nΔ) with the Gaussian mechanism (analytic σ ≤ "
                     "Dwork-Roth Thm A.1 σ for ε ≤ 1) [derived]: E ≤ L·√p·σ",
            regime=("non-smooth strongly convex losses (worst case), epsilon <= 1 (for larger "
                    "epsilon the analytic sigma decays like 1/sqrt(epsilon), not 1/epsilon)"),
            notes=("On beta-smooth losses the tighter bound (beta/2)*p*sigma**2 = "
                   "4*beta*L**2*p*log(1.25/delta)/(n**2*Delta**2*epsilon**2) applies. Ignores the "
                   "solver-gap inflation 2·√(2·solver_gap/Δ) of the sensitivity."),
        )

    def cost(self, n: int, p: int) -> float:
        return float(n * p)

    def sensitivity(self, n: int, L: float, Delta: float) -> float:
        """ℓ₂ replace-one sensitivity of the released minimiser, inexact solver included."""
        return 2.0 * L / (n * Delta) + 2.0 * math.sqrt(2.0 * self.solver_gap / Delta)

    def sigma(self, n: int, L: float, Delta: float, epsilon: float, delta: float) -> float:
        """Noise standard deviation: the analytic Gaussian mechanism at sensitivity Δ₂."""
        return self.sensitivity(n, L, Delta) * analytic_gaussian_sigma(epsilon, delta)

    def run(self, data, problem, *, epsilon, delta, rng) -> Release:
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        Delta = float(problem.strong_convexity)
        sigma = self.sigma(n, L, Delta, epsilon, delta)   # public quantities only
        opt = problem.solve(data)
        if not opt.gap <= self.solver_gap:
            raise SolverGapExceeded(
                f"{self.name}: the solver certified a gap of {opt.gap:.3g}, above the public "
                f"bound solver_gap={self.solver_gap:.3g} the noise is calibrated for")
        b = sigma * rng.standard_normal(p)                 # all randomness from rng
        theta = problem.constraint.project(np.asarray(opt.theta, dtype=float) + b)
        ledger = PrivacyLedger.from_charges(Charge(
            "Gaussian output perturbation", float(epsilon), float(delta),
            "CMS11 argmin sensitivity 2L/(nΔ); analytic Gaussian, Balle-Wang 2018 Thm 8"))
        return Release(theta=theta, ledger=ledger, iterations=int(opt.iterations),
                       info={"sigma": sigma, "solver_gap": float(opt.gap)})
