"""The audit statistics (dpbench.audit.stats): Clopper–Pearson bounds, coverage, the GDP bound.

Statistical tests use fixed seeds; each states its tolerance. Coverage checks allow the nominal
level plus 3 binomial standard errors, so with the fixed seeds they are deterministic, and a
correct implementation would fail them only with probability ≈ 0.1% for a fresh seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

from dpbench.audit.stats import (
    AuditBound,
    audit_bound,
    cp_lower,
    cp_upper,
    epsilon_lower_bounds,
    gdp_mu_lower_bounds,
    per_audit_alpha,
)


def _halves(runs: int, batch: int = 500) -> np.ndarray:
    return (np.arange(runs) % batch) < batch // 2


def test_cp_bounds_match_beta_quantiles() -> None:
    k = np.array([0, 1, 7, 50, 99, 100])
    n = 100
    for alpha in (0.05, 1e-4):
        lo, hi = cp_lower(k, n, alpha), cp_upper(k, n, alpha)
        for i, ki in enumerate(k):
            exp_lo = 0.0 if ki == 0 else beta.ppf(alpha, ki, n - ki + 1)
            exp_hi = 1.0 if ki == n else beta.ppf(1 - alpha, ki + 1, n - ki)
            assert lo[i] == pytest.approx(exp_lo, rel=1e-12, abs=1e-15)
            assert hi[i] == pytest.approx(exp_hi, rel=1e-12, abs=1e-15)
    assert np.all(cp_lower(k, n, 0.05) <= k / n) and np.all(cp_upper(k, n, 0.05) >= k / n)
    assert cp_lower(0, 0, 0.05) == 0.0 and cp_upper(0, 0, 0.05) == 1.0
    with pytest.raises(ValueError, match="alpha"):
        cp_lower(1, 10, 0.0)


def test_cp_coverage_simulation() -> None:
    """2000 binomial replicates per (p, n): P[lower > p] and P[upper < p] ≤ α + 3 s.e."""
    rng = np.random.default_rng(11)
    alpha, reps = 0.05, 2000
    tol = alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    for p, n in ((0.3, 50), (0.02, 400), (0.9, 30)):
        k = rng.binomial(n, p, size=reps)
        assert np.mean(cp_lower(k, n, alpha) > p) <= tol
        assert np.mean(cp_upper(k, n, alpha) < p) <= tol
        # not trivially conservative: the lower bound is informative on average
        assert np.mean(cp_lower(k, n, alpha)) > 0.5 * p


def test_epsilon_bound_on_laplace_scores_is_valid_and_tight() -> None:
    """Scores Lap(0,1) on D vs Lap(1,1) on D′: the true ε is exactly 1 (every tail event).

    60 replicates at R = 4000 per side, α = 0.2: a claimed ε = 1 is flagged in ≤ α + 3 s.e.
    (it never is: the bound is conservative); a claimed ε = 0.5 is flagged in ≥ 90%."""
    rng = np.random.default_rng(5)
    R, reps, alpha = 4000, 60, 0.2
    sel = _halves(R)
    flagged_true = flagged_low = 0
    lbs = []
    for _ in range(reps):
        s0, s1 = rng.laplace(0, 1, R), rng.laplace(1, 1, R)
        b = audit_bound(s0, s1, sel, epsilon_claimed=1.0, delta_claimed=0.0, mu_claimed=math.nan,
                        alpha=alpha)
        flagged_true += b.violation
        lbs.append(b.epsilon_lb)
        flagged_low += audit_bound(s0, s1, sel, epsilon_claimed=0.5, delta_claimed=0.0,
                                   mu_claimed=math.nan, alpha=alpha).violation
    assert flagged_true / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    assert flagged_low / reps >= 0.9
    assert 0.6 < float(np.mean(lbs)) < 1.0


def test_gdp_bound_below_mu_and_converges() -> None:
    """Exact Gaussian scores N(0,1) vs N(μ,1), μ = 1 (a μ-GDP pair, tight).

    100 replicates at R = 2000: μ_lb > μ in ≤ α + 3 s.e. (α = 0.2); the mean μ_lb grows with R and
    reaches ≥ 0.85 μ at R = 200000 (one replicate; s.e. of μ_lb there ≈ 0.02)."""
    rng = np.random.default_rng(7)
    mu, alpha, reps = 1.0, 0.2, 100
    R = 2000
    sel = _halves(R)
    over, small = 0, []
    for _ in range(reps):
        b = audit_bound(rng.normal(0, 1, R), rng.normal(mu, 1, R), sel, epsilon_claimed=10.0,
                        delta_claimed=1e-5, mu_claimed=mu, alpha=alpha)
        over += b.mu_lb > mu
        small.append(b.mu_lb)
        assert not math.isnan(b.epsilon_lb_gdp)
    assert over / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    R = 200_000
    big = audit_bound(rng.normal(0, 1, R), rng.normal(mu, 1, R), _halves(R, 2000),
                      epsilon_claimed=10.0, delta_claimed=1e-5, mu_claimed=mu, alpha=alpha)
    assert float(np.mean(small)) < big.mu_lb <= mu
    assert big.mu_lb >= 0.85 * mu
    # flagged against a claim of half the true μ
    assert audit_bound(rng.normal(0, 1, R), rng.normal(mu, 1, R), _halves(R, 2000),
                       epsilon_claimed=10.0, delta_claimed=1e-5, mu_claimed=0.5,
                       alpha=alpha).violation


def test_mu_bound_reported_not_a_violation_without_gdp_claim() -> None:
    rng = np.random.default_rng(3)
    R = 20000
    b = audit_bound(rng.normal(0, 1, R), rng.normal(2, 1, R), _halves(R), epsilon_claimed=100.0,
                    delta_claimed=1e-5, mu_claimed=math.nan, alpha=0.05)
    assert b.mu_lb > 1.5 and not b.violation


def test_edge_cases() -> None:
    z = np.zeros(10)
    empty = audit_bound(z, z, np.zeros(10, bool), epsilon_claimed=1, delta_claimed=0,
                        mu_claimed=math.nan, alpha=0.05)
    assert (empty.epsilon_lb, empty.violation, empty.n_select, empty.n_confirm) == (0.0, False, 0, 10)
    assert math.isnan(empty.mu_lb)
    none_conf = audit_bound(z, z, np.ones(10, bool), epsilon_claimed=1, delta_claimed=0,
                            mu_claimed=1.0, alpha=0.05)
    assert none_conf.epsilon_lb == 0.0 and not none_conf.violation
    same = audit_bound(np.ones(1000), np.ones(1000), _halves(1000), epsilon_claimed=1e-3,
                       delta_claimed=0, mu_claimed=1e-3, alpha=0.05)
    assert same.epsilon_lb == 0.0 and same.mu_lb == 0.0 and not same.violation
    # δ ≥ TPR_lo: the ε bound is uninformative (0), never negative or NaN
    rng = np.random.default_rng(0)
    big_delta = audit_bound(rng.normal(0, 1, 2000), rng.normal(3, 1, 2000), _halves(2000),
                            epsilon_claimed=0.1, delta_claimed=0.999, mu_claimed=math.nan,
                            alpha=0.05)
    assert big_delta.epsilon_lb == 0.0 and not big_delta.violation
    assert np.all(epsilon_lower_bounds(np.array([1]), np.array([0]), 1000, 0.5, 0.01) == -np.inf)
    assert np.all(gdp_mu_lower_bounds(np.array([0]), np.array([1000]), 1000, 0.01) == -np.inf)
    with pytest.raises(ValueError, match="same length"):
        audit_bound(np.zeros(3), np.zeros(4), np.ones(3, bool), epsilon_claimed=1,
                    delta_claimed=0, mu_claimed=math.nan, alpha=0.05)
    with pytest.raises(ValueError, match="finite"):
        audit_bound(np.array([np.nan, 0]), np.zeros(2), np.array([True, False]),
                    epsilon_claimed=1, delta_claimed=0, mu_claimed=math.nan, alpha=0.05)
    assert isinstance(empty, AuditBound)


def test_selection_is_not_tested_on_its_own_samples() -> None:
    """Identical laws on D and D′ (true ε = 0) with a tiny claim: the split protocol must not
    flag them, whereas max over thresholds on the confirmation half would (with 200 tries)."""
    rng = np.random.default_rng(1)
    flagged = 0
    for _ in range(40):
        s0, s1 = rng.normal(size=400), rng.normal(size=400)
        flagged += audit_bound(s0, s1, _halves(400, 400), epsilon_claimed=1e-6, delta_claimed=0.0,
                               mu_claimed=1e-6, alpha=0.1).violation
    assert flagged / 40 <= 0.1 + 3 * math.sqrt(0.09 / 40)


def test_per_audit_alpha() -> None:
    assert per_audit_alpha(0.05, 10) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="n_audits"):
        per_audit_alpha(0.05, 0)
    with pytest.raises(ValueError, match="alpha_total"):
        per_audit_alpha(1.5, 3)
