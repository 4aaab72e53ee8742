"""The red team: a correct clipped-mean mechanism, correct controls, and broken copies.

Every class releases a noisy clipped mean of the data rows on a problem whose loss is
ℓ(θ; d) = ½‖θ − d‖² on C = B(0, R) with a public row-norm bound ρ (the ``isotropic_quadratic``
tag, ``(ρ, R)``, of ``mean_est`` and ``lb_quad``):

    θ̂ = Π_C( (1/n)·Σᵢ clip(dᵢ, ρ) + noise ),   clip(d, ρ) = d·min(1, ρ/‖d‖).

Replacing one row moves the clipped mean by at most Δ = 2ρ/n in ℓ₂ (replace-one sensitivity) and
by at most Δ₁ = 2ρ√p/n in ℓ₁ (‖v‖₁ ≤ √p‖v‖₂; attained by d = ρ(1, …, 1)/√p, d′ = −d).

Each class knows its **true** privacy (``true_epsilon``, the supremum over all replace-one pairs,
records of any norm included) and the exact privacy of one given pair (``pair_epsilon``), so that
the auditor's lower bounds can be compared with known answers (README.md has the table).

* Gaussian family: before the projection the output is N(s(D), s_out² I) with a deterministic
  statistic s(D), so a pair (D, D′) is exactly a Gaussian pair with
  μ = ‖s(D) − s(D′)‖/s_out, and the mechanism is μ-GDP with μ = sup ‖s(D) − s(D′)‖/s_out (Dong,
  Roth, Su 2022). Its exact ε at δ is :func:`gdp_to_epsilon`, i.e.
  :func:`dpbench.gdp_epsilon`: the smallest ε with
  Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) ≤ δ, the hockey-stick divergence of N(0, 1) and N(μ, 1)
  (Balle and Wang 2018, Thm 8, an *iff*), hence exact for a Gaussian pair, not only an upper bound.
* Laplace family (pure): coordinate-wise Laplace noise of scale b; the privacy loss of a pair is
  ‖s(D) − s(D′)‖₁/b exactly (attained on an event of positive probability), so the true ε is
  Δ₁/b.

The projection Π_C is post-processing: it can only lower the true ε. On ``mean_est`` with a large
radius (the suite uses R = 50 with rows of norm ρ = 1) the noisy mean essentially never leaves C
(it would need noise of norm > 49 ≈ 65 σ), so the values above are the true ε up to a probability
of order e^{−2000}. The one exception is ``redteam_no_clipping`` on the ``outlier`` canary, whose
unclipped mean lies outside C: there ``pair_epsilon`` is an upper bound.

All randomness comes from the ``rng`` argument, except in ``redteam_constant_seed`` (the bug).
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import numpy as np

from dpbench import (Algorithm, BatchRelease, Charge, NotApplicable, Param, PrivacyLedger,
                     RateCard, Release, analytic_gaussian_sigma, gdp_delta, gdp_epsilon,
                     get_tags)

__all__ = [
    "LEAK_PROBABILITY", "RUN_ONLY", "RedTeamConstantSeed", "RedTeamDataStart", "RedTeamGaussian",
    "RedTeamLaplace", "RedTeamLaplaceHalf", "RedTeamNoClipping", "RedTeamRowLeak",
    "RedTeamSensitivityLOverN", "RedTeamSigma125", "RedTeamSigma15", "RedTeamSigma2",
    "RedTeamSigma4", "RedTeamUniformRowLeak", "VARIANTS", "clip_rows", "gaussian_sigma",
    "gdp_to_epsilon", "row_norm_bound",
]

#: Probability with which ``redteam_row_leak`` releases a data row instead of the noisy mean.
LEAK_PROBABILITY = 1e-3


@functools.lru_cache(maxsize=1024)
def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The analytic Gaussian σ (Balle and Wang 2018), cached: audits call it once per run."""
    return analytic_gaussian_sigma(sensitivity, epsilon, delta)


def gdp_to_epsilon(mu: float, delta: float) -> float:
    """The exact ε at δ of a Gaussian pair N(0, 1) vs N(μ, 1) (0 for μ = 0, ∞ for μ = ∞)."""
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    return gdp_epsilon(mu, delta)


def clip_rows(X: np.ndarray, rho: float) -> np.ndarray:
    """Every row d scaled to d·min(1, ρ/‖d‖)."""
    X = np.asarray(X, dtype=float)
    norms = np.linalg.norm(X, axis=-1, keepdims=True)
    return X * np.minimum(1.0, rho / np.maximum(norms, np.finfo(float).tiny))


def row_norm_bound(problem: Any) -> float:
    """ρ, the problem's public row-norm bound (``isotropic_quadratic`` tag); NotApplicable if none."""
    tag = get_tags(problem).isotropic_quadratic
    if tag is None or not tag[0] > 0:
        raise NotApplicable(
            f"problem {getattr(problem, 'name', problem)!r} declares no public row-norm bound "
            "ρ > 0 (ProblemTags.isotropic_quadratic); the red-team mechanisms clip to it")
    return float(tag[0])


class _ClippedMean(Algorithm):
    """Shared machinery: θ̂ = Π_C(s(D) + noise) with the clipped mean as the statistic s."""

    requires: ClassVar[tuple[str, ...]] = ("convex",)
    clips_gradients: ClassVar[bool] = True  # every row is clipped to ρ (the `outlier` canary applies)
    version: ClassVar[str] = "1"
    citation: ClassVar[str] = "dpbench red team (examples/dpbench-redteam)"
    check_settings: ClassVar[dict[str, Any]] = {
        "problem": {"problem": "mean_est", "params": {"radius": 50.0}}}
    #: What the class gets wrong ("" for the correct controls).
    broken: ClassVar[str] = ""

    def not_applicable_reason(self, problem: Any) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason is None:
            try:
                row_norm_bound(problem)
            except NotApplicable as exc:
                reason = str(exc)
        return reason

    def cost(self, n: int, p: int) -> float:
        return float(n * p)

    # --- the mechanism ------------------------------------------------------------------------
    def statistic(self, X: np.ndarray, rho: float) -> np.ndarray:
        """s(D), the deterministic part of the output: the clipped mean."""
        return clip_rows(X, rho).mean(axis=0)

    def noisy_statistic(self, X: np.ndarray, rho: float, epsilon: float, delta: float,
                        rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def noisy_statistics(self, X: np.ndarray, rho: float, epsilon: float, delta: float,
                         rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent draws of :meth:`noisy_statistic` (rows), from one generator."""
        raise NotImplementedError

    def ledger(self, n: int, p: int, epsilon: float, delta: float, rho: float) -> PrivacyLedger:
        raise NotImplementedError

    def run(self, data, problem, *, epsilon, delta, rng) -> Release:
        return self.run_many(data, problem, epsilon=epsilon, delta=delta, rngs=[rng])[0]

    def run_many(self, data, problem, *, epsilon, delta, rngs) -> list[Release]:
        """The audit's fast path: ρ and the ledger (public, data independent) once, then each
        release exactly as :meth:`run` computes it with its generator."""
        rho = row_norm_bound(problem)
        X = np.asarray(data.X, dtype=float)
        ledger = self.ledger(data.n, data.p, epsilon, delta, rho)
        info = {"rho": rho, **({"broken": self.broken} if self.broken else {})}
        return [Release(theta=problem.constraint.project(
                            self.noisy_statistic(X, rho, epsilon, delta, rng)),
                        ledger=ledger, grad_queries=1, iterations=1, info=dict(info))
                for rng in rngs]

    def run_batch(self, data, problem, *, epsilon, delta, rng, size) -> BatchRelease:
        """The audit's vectorised path: ``size`` releases with the law of :meth:`run`, all noise
        drawn from ``rng`` at once (checked by ``dpbench.testing.check_release_batch``)."""
        rho = row_norm_bound(problem)
        X = np.asarray(data.X, dtype=float)
        thetas = problem.constraint.project(
            self.noisy_statistics(X, rho, epsilon, delta, rng, int(size)))
        return BatchRelease(thetas, self.ledger(data.n, data.p, epsilon, delta, rho))

    # --- the analysis -------------------------------------------------------------------------
    def true_epsilon(self, n: int, p: int, epsilon: float, delta: float, rho: float) -> float:
        """The true ε at δ: the supremum over all replace-one pairs (records of any norm)."""
        raise NotImplementedError

    def pair_epsilon(self, X0: np.ndarray, X1: np.ndarray, epsilon: float, delta: float,
                     rho: float) -> float:
        """The exact ε at δ of the pair (D, D′) = (X0, X1) before the projection (an upper bound
        after it)."""
        raise NotImplementedError

    def exact_epsilon(self, d0: Any, d1: Any, problem: Any, *, epsilon: float,
                      delta: float) -> float | None:
        """The audit's hook: :meth:`pair_epsilon` of the audited pair. Exact for the released
        law up to the projection onto C, which can only lower it and, on the suites' ball of
        radius 50 around outputs of norm ≤ ρ = 1, binds with probability below 10⁻¹⁰⁰."""
        return float(self.pair_epsilon(np.asarray(d0.X, dtype=float),
                                       np.asarray(d1.X, dtype=float), epsilon, delta,
                                       row_norm_bound(problem)))


# === the Gaussian family =========================================================================

class RedTeamGaussian(_ClippedMean):
    """The Gaussian mechanism on the clipped mean (the correct mechanism; a control).

    θ̂ = Π_C(s(D) + N(0, σ² I_p)), s(D) = (1/n)·Σᵢ clip(dᵢ, ρ), Δ = 2ρ/n (replace-one),
    σ = analytic_gaussian_sigma(Δ, ε, δ). Before the projection the output is exactly a Gaussian
    shift of s(D), so the release is μ-GDP with μ = Δ/σ, and its true ε at δ is
    ``gdp_epsilon(μ, δ)`` = ε (the analytic σ is the smallest with δ(ε) ≤ δ; the true ε is ε up to
    the ulp nudge of the root-finder). The projection is post-processing (it can only lower the
    true ε); with R ≫ ρ + σ it essentially never binds.

    ``state_mu`` decides whether the ledger states μ (``Charge.gdp_mu``): the auditor tests the
    μ claim, with its GDP bound, only when every charge states one.
    """

    name: ClassVar[str] = "redteam_gaussian"
    summary: ClassVar[str] = ("Gaussian mechanism on the clipped mean, analytic σ, (ε, δ)-DP and "
                              "μ-GDP (red-team control)")
    citation: ClassVar[str] = ("Balle and Wang (ICML 2018), Thm 8; Dong, Roth, Su (JRSS-B 2022); "
                               "dpbench red team")
    privacy: ClassVar[str] = "approx"
    params: ClassVar[dict[str, Param]] = {
        "state_mu": Param(True, kind="bool",
                          doc="state μ = Δ/σ in the ledger (Charge.gdp_mu), so that the auditor "
                              "also tests the GDP claim"),
    }
    state_mu: bool
    #: The σ bug: the noise actually added is σ/sigma_divisor.
    sigma_divisor: ClassVar[float] = 1.0
    #: The sensitivity bug: σ is calibrated for sensitivity_in_rho·ρ/n (2 is replace-one).
    sensitivity_in_rho: ClassVar[float] = 2.0

    def rate_card(self) -> RateCard:
        """E ½‖θ̂ − d̄‖² ≤ pσ²/2 with σ ≤ (2ρ/n)·√(2 ln(1.25/δ))/ε and ρ ≤ R = L/2 on mean_est."""
        return RateCard(
            expression="p*L**2*log(1.25/delta)/(n**2*epsilon**2)",
            exponents={"n": -2, "p": 1, "epsilon": -2},
            citation="Gaussian mechanism, classical σ (Dwork and Roth 2014, Thm A.1) [derived]",
            regime="epsilon <= 1; the clipped mean equals the mean (rows of norm <= rho)")

    # --- calibration (public quantities only) ---------------------------------------------------
    def sensitivity(self, n: int, rho: float) -> float:
        """The replace-one ℓ₂ sensitivity Δ = 2ρ/n of the clipped mean (what the ledger claims)."""
        return 2.0 * rho / n

    def claimed_sigma(self, n: int, epsilon: float, delta: float, rho: float) -> float:
        """The correct σ: analytic_gaussian_sigma(2ρ/n, ε, δ)."""
        return gaussian_sigma(self.sensitivity(n, rho), float(epsilon), float(delta))

    def claimed_mu(self, n: int, epsilon: float, delta: float, rho: float) -> float:
        """μ = Δ/σ of the correct mechanism (what the ledger states with ``state_mu``)."""
        return self.sensitivity(n, rho) / self.claimed_sigma(n, epsilon, delta, rho)

    def sigma(self, n: int, epsilon: float, delta: float, rho: float) -> float:
        """The σ actually added (with the class's bugs)."""
        return gaussian_sigma(self.sensitivity_in_rho * rho / n, float(epsilon),
                              float(delta)) / self.sigma_divisor

    def output_sd(self, n: int, epsilon: float, delta: float, rho: float) -> float:
        """The per-coordinate standard deviation of the released noise (before Π_C)."""
        return self.sigma(n, epsilon, delta, rho)

    def worst_shift(self, n: int, rho: float) -> float:
        """sup over replace-one pairs of ‖s(D) − s(D′)‖ (the clipped mean: 2ρ/n)."""
        return 2.0 * rho / n

    # --- the mechanism --------------------------------------------------------------------------
    def noise_generator(self, rng: np.random.Generator) -> np.random.Generator:
        return rng

    def noisy_statistic(self, X, rho, epsilon, delta, rng):
        n, p = X.shape
        sigma = self.sigma(n, epsilon, delta, rho)
        return self.statistic(X, rho) + sigma * self.noise_generator(rng).standard_normal(p)

    def noisy_statistics(self, X, rho, epsilon, delta, rng, size):
        n, p = X.shape
        sigma = self.sigma(n, epsilon, delta, rho)
        return self.statistic(X, rho) + sigma * rng.standard_normal((size, p))

    def ledger(self, n, p, epsilon, delta, rho):
        mu = self.claimed_mu(n, epsilon, delta, rho)
        return PrivacyLedger.from_charges(Charge(
            "Gaussian mechanism on the clipped mean", float(epsilon), float(delta),
            "replace-one sensitivity 2ρ/n; analytic Gaussian (Balle-Wang 2018, Thm 8); "
            f"μ-GDP with μ = Δ/σ = {mu:.6g}",
            gdp_mu=mu if self.state_mu else None))

    # --- the analysis ---------------------------------------------------------------------------
    def true_mu(self, n: int, p: int, epsilon: float, delta: float, rho: float) -> float:
        """The true μ: sup ‖s(D) − s(D′)‖ over the output's noise standard deviation."""
        return self.worst_shift(n, rho) / self.output_sd(n, epsilon, delta, rho)

    def true_epsilon(self, n, p, epsilon, delta, rho):
        """ε(true μ, δ), exact for a Gaussian pair (module docstring)."""
        return gdp_to_epsilon(self.true_mu(n, p, epsilon, delta, rho), delta)

    def pair_mu(self, X0: np.ndarray, X1: np.ndarray, epsilon: float, delta: float,
                rho: float) -> float:
        """μ of the pair: ‖s(D) − s(D′)‖ / noise standard deviation."""
        X0, X1 = np.asarray(X0, dtype=float), np.asarray(X1, dtype=float)
        shift = float(np.linalg.norm(self.statistic(X0, rho) - self.statistic(X1, rho)))
        return shift / self.output_sd(X0.shape[0], epsilon, delta, rho)

    def pair_epsilon(self, X0, X1, epsilon, delta, rho):
        return gdp_to_epsilon(self.pair_mu(X0, X1, epsilon, delta, rho), delta)


class RedTeamSigma125(RedTeamGaussian):
    """DELIBERATELY BROKEN: σ/1.25 (true μ = 1.25μ)."""

    name: ClassVar[str] = "redteam_sigma_1_25"
    summary: ClassVar[str] = "DELIBERATELY BROKEN: the red-team Gaussian with σ/1.25"
    broken: ClassVar[str] = "noise σ divided by 1.25 (true μ = 1.25·μ)"
    sigma_divisor: ClassVar[float] = 1.25


class RedTeamSigma15(RedTeamGaussian):
    """DELIBERATELY BROKEN: σ/1.5 (true μ = 1.5μ)."""

    name: ClassVar[str] = "redteam_sigma_1_5"
    summary: ClassVar[str] = "DELIBERATELY BROKEN: the red-team Gaussian with σ/1.5"
    broken: ClassVar[str] = "noise σ divided by 1.5 (true μ = 1.5·μ)"
    sigma_divisor: ClassVar[float] = 1.5


class RedTeamSigma2(RedTeamGaussian):
    """DELIBERATELY BROKEN: σ/2 (true μ = 2μ)."""

    name: ClassVar[str] = "redteam_sigma_2"
    summary: ClassVar[str] = "DELIBERATELY BROKEN: the red-team Gaussian with σ/2"
    broken: ClassVar[str] = "noise σ divided by 2 (true μ = 2·μ)"
    sigma_divisor: ClassVar[float] = 2.0


class RedTeamSigma4(RedTeamGaussian):
    """DELIBERATELY BROKEN: σ/4 (true μ = 4μ)."""

    name: ClassVar[str] = "redteam_sigma_4"
    summary: ClassVar[str] = "DELIBERATELY BROKEN: the red-team Gaussian with σ/4"
    broken: ClassVar[str] = "noise σ divided by 4 (true μ = 4·μ)"
    sigma_divisor: ClassVar[float] = 4.0


class RedTeamSensitivityLOverN(RedTeamGaussian):
    """DELIBERATELY BROKEN: σ calibrated for Δ = ρ/n, forgetting replace-one's factor 2.

    The analytic σ is linear in the sensitivity, so the noise is σ/2: true μ = 2μ.
    """

    name: ClassVar[str] = "redteam_sensitivity_l_over_n"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: the red-team Gaussian calibrated for "
                              "sensitivity ρ/n instead of 2ρ/n")
    broken: ClassVar[str] = ("sensitivity ρ/n (add/remove-style) instead of the replace-one 2ρ/n "
                             "(true μ = 2·μ)")
    sensitivity_in_rho: ClassVar[float] = 1.0


class RedTeamConstantSeed(RedTeamGaussian):
    """DELIBERATELY BROKEN: the noise comes from ``np.random.default_rng(0)``, not from ``rng``.

    Every run adds the same noise vector, so the output is a deterministic function of the data:
    two neighbours with different clipped means give two different point masses, true ε = ∞.
    """

    name: ClassVar[str] = "redteam_constant_seed"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: the red-team Gaussian drawing its noise from a "
                              "constant seed")
    broken: ClassVar[str] = "noise from np.random.default_rng(0) (output deterministic: true ε = ∞)"

    def noise_generator(self, rng: np.random.Generator) -> np.random.Generator:
        return np.random.default_rng(0)  # the bug

    def noisy_statistics(self, X, rho, epsilon, delta, rng, size):
        return np.tile(self.noisy_statistic(X, rho, epsilon, delta, rng), (size, 1))  # the bug

    def true_mu(self, n, p, epsilon, delta, rho):
        return math.inf

    def pair_mu(self, X0, X1, epsilon, delta, rho):
        shift = np.linalg.norm(self.statistic(np.asarray(X0, dtype=float), rho)
                               - self.statistic(np.asarray(X1, dtype=float), rho))
        return math.inf if shift > 0 else 0.0


class RedTeamDataStart(RedTeamGaussian):
    """DELIBERATELY BROKEN: one noisy gradient step started at a data row.

    The loss is ½‖θ − d‖², so the noisy gradient of the average loss at θ₀ is θ₀ − (s(D) + b),
    b ~ N(0, σ² I) with σ calibrated for the mean's sensitivity 2ρ/n. A step of ½ from a public
    θ₀ would be private; this one starts at θ₀ = clip(d₀, ρ), the first row:

        θ₁ = θ₀ − ½(θ₀ − (s(D) + b)) = clip(d₀)/2 + s(D)/2 + b/2.

    Replacing row 0 moves both terms: the shift is (clip(d₀) − clip(d₀′))·(1/2 + 1/(2n)), of norm
    ≤ ρ(n + 1)/n, against noise of standard deviation σ/2; replacing another row moves θ₁ by
    ≤ ρ/n only (μ). True μ = 2ρ(n + 1)/(nσ) = (n + 1)·μ (11μ at n = 10), true ε = ε((n + 1)μ, δ).
    """

    name: ClassVar[str] = "redteam_data_start"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: one noisy gradient step on the mean, started "
                              "at a data row")
    broken: ClassVar[str] = ("iterate started at the (clipped) first data row, not a public point "
                             "(true μ = (n + 1)·μ)")

    def statistic(self, X, rho):
        return 0.5 * clip_rows(X[0], rho) + 0.5 * super().statistic(X, rho)

    def noisy_statistic(self, X, rho, epsilon, delta, rng):
        theta0 = clip_rows(X[0], rho)  # the bug: a data-dependent start
        noisy_mean = super().statistic(X, rho) + self.sigma(X.shape[0], epsilon, delta, rho) \
            * rng.standard_normal(X.shape[1])
        return theta0 - 0.5 * (theta0 - noisy_mean)

    def noisy_statistics(self, X, rho, epsilon, delta, rng, size):
        theta0 = clip_rows(X[0], rho)  # the bug: a data-dependent start
        noisy_means = super().statistic(X, rho) + self.sigma(X.shape[0], epsilon, delta, rho) \
            * rng.standard_normal((size, X.shape[1]))
        return theta0 - 0.5 * (theta0 - noisy_means)

    def output_sd(self, n, epsilon, delta, rho):
        return 0.5 * self.sigma(n, epsilon, delta, rho)

    def worst_shift(self, n, rho):
        return rho * (n + 1) / n


class RedTeamNoClipping(RedTeamGaussian):
    """DELIBERATELY BROKEN: the rows are not clipped (it still declares ``clips_gradients``).

    Inside the declared data norm nothing changes (clip is the identity there), so only a record
    outside it shows the bug (the ``outlier`` canary, 1000× the data norm). The sensitivity is
    unbounded: true ε = ∞. For one pair, μ = ‖d₀ − d₀′‖/(nσ) (before the projection, which binds
    on the outlier pair: ``pair_epsilon`` is then an upper bound).
    """

    name: ClassVar[str] = "redteam_no_clipping"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: the red-team Gaussian without clipping "
                              "(detectable with the outlier canary)")
    broken: ClassVar[str] = "clipping removed (unbounded sensitivity: true ε = ∞)"

    def statistic(self, X, rho):
        return np.asarray(X, dtype=float).mean(axis=0)  # the bug: no clip

    def worst_shift(self, n, rho):
        return math.inf


class RedTeamRowLeak(RedTeamGaussian):
    """DELIBERATELY BROKEN: with probability q = 1e-3, releases the first data row (a debugging
    branch that returns ``X[0]``).

    The leaked row (projected onto C) is an atom of mass q that D′ (whose first row differs) does
    not have, so for the pair δ(ε) = q + (1 − q)·δ_μ(ε) (δ_μ the Gaussian part's): the true ε at
    δ is ∞ for δ ≤ q, and ε(μ, (δ − q)/(1 − q)) above. The auditor's canary is row 0, so this is
    the leak an audit can see at a modest budget; a leak of a uniformly chosen row puts mass q/n
    on the canary and needs about n times more runs (docs/audit.md, 'Rare leaks').
    """

    name: ClassVar[str] = "redteam_row_leak"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: the red-team Gaussian releasing its first data "
                              "row with probability 1e-3")
    broken: ClassVar[str] = ("releases the raw first data row with probability 1e-3 "
                             "(true ε = ∞ at δ ≤ 1e-3)")
    leak_probability: ClassVar[float] = LEAK_PROBABILITY

    def noisy_statistic(self, X, rho, epsilon, delta, rng):
        if rng.random() < self.leak_probability:  # the bug
            return np.array(X[0], dtype=float)
        return super().noisy_statistic(X, rho, epsilon, delta, rng)

    def noisy_statistics(self, X, rho, epsilon, delta, rng, size):
        leak = rng.random(size) < self.leak_probability  # the bug
        out = super().noisy_statistics(X, rho, epsilon, delta, rng, size)
        out[leak] = np.asarray(X[0], dtype=float)
        return out

    def _epsilon(self, mu: float, n: int, delta: float) -> float:
        q = self.leak_probability
        if delta <= q:
            return math.inf
        return gdp_to_epsilon(mu, (delta - q) / (1.0 - q))

    def true_epsilon(self, n, p, epsilon, delta, rho):
        return self._epsilon(self.true_mu(n, p, epsilon, delta, rho), n, delta)

    def pair_epsilon(self, X0, X1, epsilon, delta, rho):
        X0 = np.asarray(X0, dtype=float)
        return self._epsilon(self.pair_mu(X0, X1, epsilon, delta, rho), X0.shape[0], delta)


class RedTeamUniformRowLeak(RedTeamRowLeak):
    """DELIBERATELY BROKEN: with probability q = 1e-3, releases a data row chosen uniformly at
    random (a sampling routine that returns a raw record now and then).

    On a pair the output law is a mixture: with probability 1 − q the Gaussian N(s(D), σ²I),
    with probability q·m(x)/n the atom x for each distinct row x of multiplicity m(x). Atoms and
    the Gaussian part are mutually singular, so the hockey stick adds up:
    δ(ε) = (q/n)·Σₓ max(0, m₀(x) − e^ε·m₁(x)) + (1 − q)·δ_μ(ε), both orders, δ_μ the Gaussian
    pair's (:func:`dpbench.gdp_delta`). When the canary differs and nothing
    else does, the first term is q/n: the true ε is ∞ for δ ≤ q/n (10⁻⁴ at n = 10, 5·10⁻⁴ at
    n = 2) and ε(μ, (δ − q/n)/(1 − q)) above it.
    """

    name: ClassVar[str] = "redteam_uniform_row_leak"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: the red-team Gaussian releasing a uniformly "
                              "chosen data row with probability 1e-3")
    broken: ClassVar[str] = ("releases a uniformly chosen raw data row with probability 1e-3 "
                             "(true ε = ∞ at δ ≤ 1e-3/n)")

    def noisy_statistic(self, X, rho, epsilon, delta, rng):
        if rng.random() < self.leak_probability:  # the bug
            return np.array(X[rng.integers(X.shape[0])], dtype=float)
        return RedTeamGaussian.noisy_statistic(self, X, rho, epsilon, delta, rng)

    def noisy_statistics(self, X, rho, epsilon, delta, rng, size):
        leak = rng.random(size) < self.leak_probability  # the bug
        rows = rng.integers(X.shape[0], size=size)
        out = RedTeamGaussian.noisy_statistics(self, X, rho, epsilon, delta, rng, size)
        out[leak] = np.asarray(X, dtype=float)[rows[leak]]
        return out

    def _epsilon(self, mu: float, n: int, delta: float) -> float:
        """The worst case over pairs: the canary's atom on one side only."""
        q = self.leak_probability / n
        if delta <= q:
            return math.inf
        return gdp_to_epsilon(mu, (delta - q) / (1.0 - self.leak_probability))

    def pair_epsilon(self, X0, X1, epsilon, delta, rho):
        """The pair's ε from its hockey stick (class docstring), by bisection on ε."""
        X0, X1 = np.asarray(X0, dtype=float), np.asarray(X1, dtype=float)
        q, n = self.leak_probability, X0.shape[0]
        mu = self.pair_mu(X0, X1, epsilon, delta, rho)
        rows0 = [tuple(r) for r in X0]
        rows1 = [tuple(r) for r in X1]
        atoms = set(rows0) | set(rows1)
        m0 = np.array([rows0.count(x) for x in atoms], dtype=float)
        m1 = np.array([rows1.count(x) for x in atoms], dtype=float)

        def excess(eps: float) -> float:
            gauss = (1.0 - q) * (gdp_delta(mu, eps) if mu > 0 else 0.0)
            a = max(np.maximum(m0 - math.exp(eps) * m1, 0).sum(),
                    np.maximum(m1 - math.exp(eps) * m0, 0).sum())
            return q / n * a + gauss - delta

        if excess(0.0) <= 0:
            return 0.0
        if excess(60.0) > 0:
            return math.inf
        lo, hi = 0.0, 60.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
        return hi


# === the Laplace family ==========================================================================

class RedTeamLaplace(_ClippedMean):
    """The Laplace mechanism on the clipped mean, pure ε-DP (a control).

    θ̂ = Π_C(s(D) + (L₁, …, L_p)), Lⱼ i.i.d. Laplace(b), b = Δ₁/ε with Δ₁ = 2ρ√p/n the ℓ₁
    sensitivity bound of the clipped mean. A pair's privacy loss is ‖s(D) − s(D′)‖₁/b exactly, so
    the true ε is Δ₁/b = ε (attained by d₀ = ρ(1, …, 1)/√p against −d₀); for the audited pair, a
    replacement of row 0 by c′ = −c, it is 2‖clip(c)‖₁/(nb) = ε·(‖c‖₁/‖c‖₂)·(‖clip c‖₂/ρ)/√p,
    between ε/√p and ε when ‖clip c‖₂ = ρ (:meth:`pair_epsilon`).
    """

    name: ClassVar[str] = "redteam_laplace"
    summary: ClassVar[str] = "Laplace mechanism on the clipped mean, pure ε-DP (red-team control)"
    citation: ClassVar[str] = "Dwork, McSherry, Nissim, Smith (TCC 2006); dpbench red team"
    privacy: ClassVar[str] = "pure"
    #: The scale bug: the noise actually added has scale b/scale_divisor.
    scale_divisor: ClassVar[float] = 1.0

    def rate_card(self) -> RateCard:
        """E ½‖θ̂ − d̄‖² ≤ p·b² with b = 2ρ√p/(nε) and ρ ≤ R = L/2 on mean_est."""
        return RateCard(
            expression="p**2*L**2/(n**2*epsilon**2)",
            exponents={"n": -2, "p": 2, "epsilon": -2},
            citation="Laplace mechanism, ℓ₁ sensitivity 2ρ√p/n [derived]",
            regime="the clipped mean equals the mean (rows of norm <= rho)")

    def l1_sensitivity(self, n: int, p: int, rho: float) -> float:
        """Δ₁ = 2ρ√p/n, the ℓ₁ sensitivity bound of the clipped mean."""
        return 2.0 * rho * math.sqrt(p) / n

    def scale(self, n: int, p: int, epsilon: float, rho: float) -> float:
        """The Laplace scale actually used (with the class's bug)."""
        return self.l1_sensitivity(n, p, rho) / float(epsilon) / self.scale_divisor

    def noisy_statistic(self, X, rho, epsilon, delta, rng):
        n, p = X.shape
        return self.statistic(X, rho) + rng.laplace(0.0, self.scale(n, p, epsilon, rho), p)

    def noisy_statistics(self, X, rho, epsilon, delta, rng, size):
        n, p = X.shape
        return self.statistic(X, rho) + rng.laplace(0.0, self.scale(n, p, epsilon, rho),
                                                    (size, p))

    def ledger(self, n, p, epsilon, delta, rho):
        return PrivacyLedger.from_charges(Charge(
            "Laplace mechanism on the clipped mean", float(epsilon), 0.0,
            "ℓ₁ sensitivity 2ρ√p/n; Laplace mechanism (Dwork et al. 2006)"))

    def true_epsilon(self, n, p, epsilon, delta, rho):
        """Δ₁/b (pure ε; for δ > 0 the exact ε(δ) is smaller, this is then an upper bound)."""
        return self.l1_sensitivity(n, p, rho) / self.scale(n, p, epsilon, rho)

    def pair_epsilon(self, X0, X1, epsilon, delta, rho):
        X0, X1 = np.asarray(X0, dtype=float), np.asarray(X1, dtype=float)
        n, p = X0.shape
        shift = float(np.abs(self.statistic(X0, rho) - self.statistic(X1, rho)).sum())
        return shift / self.scale(n, p, epsilon, rho)


class RedTeamLaplaceHalf(RedTeamLaplace):
    """DELIBERATELY BROKEN: Laplace scale b/2, true ε = 2ε (pure)."""

    name: ClassVar[str] = "redteam_laplace_half"
    summary: ClassVar[str] = "DELIBERATELY BROKEN: the red-team Laplace mechanism with scale b/2"
    broken: ClassVar[str] = "Laplace scale halved (true ε = 2ε)"
    scale_divisor: ClassVar[float] = 2.0


class _RunOnly:
    """A copy with ``run`` alone — no ``run_batch``, no ``run_many`` — as an outside author
    would first write it: the auditor must loop it (``run`` is defined here, above the fast
    paths, so the copies do not inherit them; ``Algorithm._has_fast_path``)."""

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        rho = row_norm_bound(problem)
        X = np.asarray(data.X, dtype=float)
        theta = problem.constraint.project(
            self.noisy_statistic(X, rho, epsilon, delta, rng))  # type: ignore[attr-defined]
        broken = getattr(self, "broken", "")
        return Release(theta=theta,
                       ledger=self.ledger(data.n, data.p, epsilon, delta, rho),  # type: ignore[attr-defined]
                       grad_queries=1, iterations=1,
                       info={"rho": rho, **({"broken": broken} if broken else {})})


def _run_only(cls: type[_ClippedMean]) -> type[_ClippedMean]:
    """The ``run``-only copy of a red-team class, registered as ``<name>_run``."""
    return type(f"{cls.__name__}RunOnly", (_RunOnly, cls), {  # type: ignore[return-value]
        "name": f"{cls.name}_run", "__module__": __name__,
        # the copy releases the original's law, so the original's exact ε describes it
        "exact_epsilon": cls.exact_epsilon,
        "summary": f"{cls.summary} (run only: no vectorised or many-run path)",
        "__doc__": f"{cls.__name__} with ``run`` alone (no ``run_batch``, no ``run_many``)."})


_CLASSES: tuple[type[_ClippedMean], ...] = (
    RedTeamGaussian, RedTeamLaplace, RedTeamSigma125, RedTeamSigma15, RedTeamSigma2,
    RedTeamSigma4, RedTeamSensitivityLOverN, RedTeamLaplaceHalf, RedTeamConstantSeed,
    RedTeamDataStart, RedTeamNoClipping, RedTeamRowLeak, RedTeamUniformRowLeak)
#: The run-only copies, by the registered name of the class they copy.
RUN_ONLY: dict[str, type[_ClippedMean]] = {cls.name: _run_only(cls) for cls in _CLASSES}
globals().update({c.__name__: c for c in RUN_ONLY.values()})

#: Every red-team class by registered name, controls first, then the run-only copies.
VARIANTS: dict[str, type[_ClippedMean]] = {
    **{cls.name: cls for cls in _CLASSES}, **{c.name: c for c in RUN_ONLY.values()}}
