"""REM (Gopi–Lee–Liu 2022): calibration tables, exact samplers, the alternating sampler, the GDP
bound checked on exact 1-D privacy curves, and the mechanism's releases and ledgers.

GLL'22 (REM); docs/rem.md. Every statistical test
uses fixed seeds (deterministic) and states its tolerance; the KS thresholds (p > 1e-3) are far
from the observed p-values, and a wrong law (e.g. a sampler with a flipped sign or without the
regulariser) gives p < 1e-10 at these sample sizes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpbench.algorithms.rem import REM
from dpbench.core.errors import NotApplicable
from dpbench.core.exact_samplers import exact_sampler
from dpbench.core.sets import Box
from dpbench.numerics.samplers.alternating import (
    alternating_sample,
    ball_gaussian_sampler,
    gaussian_oracle,
    theory_parameters,
)
from dpbench.numerics.samplers.ball import truncated_gaussian_sampler
from dpbench.privacy.gaussian import gdp_delta
from dpbench.privacy.gdp_calibration import (
    paper_a,
    rem_calibration,
    s_exact,
    s_lemma26,
    tv_budget,
    tv_to_dp,
)
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lin_ball import LinBall
from dpbench.problems.sep_abs import AbsGaussFactor, SepAbs
from dpbench.testing import check_algorithm, parametrize_with_checks

KS_P = 1e-3


# --- calibration (docs/rem.md, "Reference values") --------------------------------------------------------------------
@pytest.mark.parametrize("eps, delta, s_ex, s_l26", [
    (0.1, 1e-5, 0.0325, 0.0215), (1.0, 1e-5, 0.2681, 0.2102), (1.0, 1e-3, 0.3884, 0.2731),
    (5.0, 1e-5, 1.121, 0.973), (10.0, 1e-8, 1.624, 1.492)])
def test_calibration_table(eps: float, delta: float, s_ex: float, s_l26: float) -> None:
    assert s_exact(eps, delta) == pytest.approx(s_ex, rel=0.01)
    assert s_lemma26(eps, delta) == pytest.approx(s_l26, rel=0.01)
    # Lemma 26 (corrected parentheses) is sufficient; the exact s meets δ with equality.
    assert gdp_delta(s_lemma26(eps, delta), eps) <= delta
    assert gdp_delta(s_exact(eps, delta), eps) == pytest.approx(delta, rel=1e-6)


def test_rem_erm_reference_values() -> None:
    """§7.2 REM-ERM paper mode (G = D = 1, n = 1000, d = 10, ε = 1, δ = 1e-5) and exact mode."""
    n, d, eps, delta = 1000, 10, 1.0, 1e-5
    assert paper_a(eps, delta) == pytest.approx(0.14605, rel=0.01)
    c = rem_calibration("erm", "paper", n=n, d=d, epsilon=eps, delta_mech=2 * delta / 3,
                        g_diff=1.0, g_f=1.0, diameter=1.0, delta_total=delta)
    assert c.k == pytest.approx(923.71, rel=0.01)
    assert c.mu == pytest.approx(2.165e-2, rel=0.01)
    assert c.k * c.mu == pytest.approx(2 * d, rel=1e-12)               # kμ = 2d/D²
    assert c.bound == pytest.approx(2.165e-2, rel=0.01)                # GD√d/(nA)
    assert 2 * math.sqrt(d * math.log(1 / delta)) / (eps * n) == pytest.approx(2.146e-2, rel=0.01)
    assert c.sampler_ratio == pytest.approx(4.27e4, rel=0.01)          # 2n²A²
    assert c.gamma == pytest.approx(math.sqrt(2) * paper_a(eps, delta), rel=1e-9)
    e = rem_calibration("erm", "exact", n=n, d=d, epsilon=eps, delta_mech=delta / 2,
                        g_diff=1.0, g_f=1.0, diameter=1.0)
    assert (e.s, e.k, e.bound) == pytest.approx((0.2575, 1151, 1.737e-2), rel=0.01)
    assert e.delta_mech == pytest.approx(delta / 2, rel=1e-6)


def test_rem_sco_reference_values() -> None:
    """§7.2 REM-SCO paper mode: d = 10 (nd-branch) and d = 100 (privacy branch)."""
    kw = dict(n=1000, epsilon=1.0, delta_mech=2e-5 / 3, g_diff=1.0, g_f=1.0, diameter=1.0,
              delta_total=1e-5)
    c = rem_calibration("sco", "paper", d=10, **kw)
    assert (c.mu, c.k, c.sampler_ratio, c.bound) == pytest.approx((3.81e-2, 761, 2e4, 5.84e-2),
                                                                  rel=0.01)
    printed = 2 * math.sqrt(10 * math.log(1e5)) / 1000 + 2 / math.sqrt(1000)
    assert printed == pytest.approx(8.44e-2, rel=0.01) and c.bound < printed
    assert rem_calibration("sco", "paper", d=100, **kw).sampler_ratio == pytest.approx(4.45e4,
                                                                                     rel=0.01)
    # A2's caveat: s = ε/√(2L) is not Lemma-26-certified but exact certification holds easily.
    assert c.delta_mech < 1e-7


def test_tv_to_dp() -> None:
    assert tv_to_dp(1.0, 1e-6, 1e-7) == pytest.approx(1e-6 + (1 + math.e) * 1e-7)
    assert tv_to_dp(2.0, 2e-5 / 3, tv_budget(2.0, 1e-5)) == pytest.approx(1e-5)


# --- P1 exact sampler and optimum ---------------------------------------------------------------
def _quad_cdf(f: AbsGaussFactor) -> tuple[np.ndarray, np.ndarray]:
    """The factor's CDF at its breakpoints by adaptive quadrature of the closed-form density."""
    pieces = [integrate.quad(lambda t: math.exp(float(f.logpdf(np.array(t)))), lo, hi,
                             epsabs=1e-13, limit=200)[0]
              for lo, hi in zip(f.edges[:-1], f.edges[1:])]
    return f.edges, np.concatenate(([0.0], np.cumsum(pieces)))


def test_sep_abs_factor_matches_quadrature() -> None:
    rng = np.random.default_rng(3)
    s = rng.normal(0.1, 0.3, 30)
    f = AbsGaussFactor(s, w=6.0, A=40.0, B=3.0, lo=-0.5, hi=0.5)
    edges, cdf = _quad_cdf(f)
    assert cdf[-1] == pytest.approx(1.0, abs=1e-9)                  # log_norm is exact

    def cdf_at(x: np.ndarray) -> np.ndarray:
        j = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.size - 2)
        part = np.array([integrate.quad(lambda t: math.exp(float(f.logpdf(np.array(t)))),
                                        edges[i], xi, epsabs=1e-13)[0] for i, xi in zip(j, x)])
        return cdf[j] + part

    xs = f.sample(rng, 3000)
    grid = np.linspace(-0.5, 0.5, 801)
    ref = cdf_at(grid)
    assert stats.kstest(xs, lambda x: np.interp(x, grid, ref)).pvalue > KS_P


@pytest.mark.parametrize("ridge", [0.0, 0.7])
def test_sep_abs_solve_is_exact(ridge: float) -> None:
    prob = SepAbs(ridge=ridge)
    data = prob.generate(41, 3, np.random.default_rng(5))
    opt = prob.solve(data)
    a = Box(1.0).half_width(3)
    grid = np.linspace(-a, a, 20001)
    for j in range(3):
        obj = (prob.scale / math.sqrt(3)) * np.abs(grid[:, None] - data.X[:, j]).mean(axis=1) \
            + 0.5 * ridge * grid ** 2
        best = obj.min()
        mine = (prob.scale / math.sqrt(3)) * np.abs(opt.theta[j] - data.X[:, j]).mean() \
            + 0.5 * ridge * opt.theta[j] ** 2
        assert mine <= best + 1e-12
    assert prob.population_excess(prob.mean(3), 3) == pytest.approx(0.0, abs=1e-15) or ridge > 0
    assert prob.population_excess(np.zeros(3), 3) > 0


# --- P2 exact sampler -----------------------------------------------------------------------------
def test_ball_sampler_matches_rejection_and_marginal() -> None:
    """The (t, r) sampler agrees with exact Gaussian rejection (ball.py) where rejection works,
    and its t-marginal matches the closed form by quadrature where ‖q‖ ≫ R (rejection fails)."""
    rng = np.random.default_rng(7)
    q, a = np.array([0.5, -0.3, 0.2]), 6.0
    mine = ball_gaussian_sampler(q, a, 1.0)
    ref = truncated_gaussian_sampler(q, a, np.zeros((1, 3)), np.array([1.0]))
    x = np.array([mine(rng) for _ in range(3000)])
    y = np.array([ref(rng) for _ in range(3000)])
    u = q / np.linalg.norm(q)
    assert stats.ks_2samp(x @ u, y @ u).pvalue > KS_P
    assert stats.ks_2samp(np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)).pvalue > KS_P
    # far case: mean at distance 40 R, d = 8
    d, m, a = 8, 40.0, 16.0
    far = ball_gaussian_sampler(np.r_[m, np.zeros(d - 1)], a, 1.0)
    t = np.array([far(rng)[0] for _ in range(3000)])
    dens = lambda s: math.exp(-0.5 * a * (s - m) ** 2 + 0.5 * a * (1 - m) ** 2) \
        * stats.chi2.cdf(a * (1 - s * s), d - 1)
    grid = np.linspace(0.5, 1.0, 401)
    cdf = np.concatenate(([0.0], np.cumsum([integrate.quad(dens, lo, hi)[0]
                                            for lo, hi in zip(grid[:-1], grid[1:])])))
    assert t.min() > 0.5
    assert stats.kstest(t, lambda s: np.interp(s, grid, cdf / cdf[-1])).pvalue > KS_P


def test_gaussian_oracle_box_is_truncated_normal() -> None:
    """S2 on a box: compiled Robert rejection vs scipy's truncnorm (tails and straddling)."""
    rng = np.random.default_rng(11)
    m, s = np.array([0.0, 1.3, -2.0]), 0.25
    box = Box(1.0 * math.sqrt(3))                                  # half-width 1
    draws = np.array([gaussian_oracle(m, s, box, rng) for _ in range(4000)])
    for j in range(3):
        law = stats.truncnorm((-1 - m[j]) / s, (1 - m[j]) / s, loc=m[j], scale=s)
        assert stats.kstest(draws[:, j], law.cdf).pvalue > KS_P


# --- the alternating sampler --------------------------------------------------------------------
def _one_d_instance() -> tuple[SepAbs, object, float, float]:
    """1-D f_i = G|x − s_i| (n = 50) with g_i = k f_i, G_s = 4, ψ = x²/2 on [−2, 2] (docs/rem.md's
    prototype at a smaller G_s to keep the test short)."""
    prob = SepAbs(radius=2.0)
    data = prob.generate(50, 1, np.random.default_rng(2))
    k = 4.0
    return prob, data, k, 1.0 / k                                # kμ = 1


def test_alternating_agrees_with_exact_sampler() -> None:
    """1500 chains of T = 3·ln(10)/(η μ_s) steps (η G_s² = 1/16: bias gone, docs/rem.md) vs 1500
    exact draws: two-sample KS p > 1e-3. Queries/step ≈ 4e ≈ 10.9 (§7.2 measured 10.4–10.9;
    tolerance [10.2, 11.3]) and proposals/step ≈ 2 ([1.85, 2.1])."""
    prob, data, k, mu = _one_d_instance()
    eta = 1.0 / (16 * k ** 2)
    steps = math.ceil(3 * math.log(10) / (eta * k * mu))
    rng = np.random.default_rng(4)
    xs, st = alternating_sample(prob.kernel(), data, k=k, lam=k * mu, center=np.zeros(1),
                                constraint=prob.constraint, eta=eta, steps=steps,
                                x0=np.zeros(1), rng=rng, chains=1500)
    exact = exact_sampler("regularized_gibbs", prob, data, k, mu, np.zeros(1))
    ys = np.array([exact(rng)[0] for _ in range(1500)])
    assert stats.ks_2samp(xs[:, 0], ys).pvalue > KS_P
    assert 10.2 <= st.queries_per_step <= 11.3
    assert 1.85 <= st.proposals_per_step <= 2.1


def test_rho_truncation_falls_with_c_eta() -> None:
    """ρ-truncation frequency at η G_s² = 1, 1/4, 1/16: §7.2 measured 0.46, 0.17, 0.021;
    tolerance ±35 % relative (≥ 15 000 proposals each: binomial s.e. < 1 % relative)."""
    prob, data, k, mu = _one_d_instance()
    rates = []
    for c_eta in (1, 4, 16):
        eta = 1.0 / (c_eta * k ** 2)
        _, st = alternating_sample(prob.kernel(), data, k=k, lam=k * mu, center=np.zeros(1),
                                   constraint=prob.constraint, eta=eta, steps=400, x0=np.zeros(1),
                                   rng=np.random.default_rng(c_eta), chains=20)
        rates.append(st.truncation_rate)
    assert rates[0] > rates[1] > rates[2]
    assert rates == pytest.approx([0.46, 0.17, 0.021], rel=0.35)


def test_theory_parameters_are_public_and_conservative() -> None:
    """Theorem 17's rule at the §6.3 P10 example (n = 1000, d = 10, ε = 1, δ = 1e-5): T ≈ 1e8–1e9."""
    g_s2_over_mu = 2 * 1000 ** 2 * paper_a(1.0, 1e-5) ** 2
    plan = theory_parameters(math.sqrt(g_s2_over_mu), 1.0, 10, 1.0, tv_budget(1.0, 1e-5))
    assert 1e8 <= plan.steps_theory <= 1e10
    assert plan.eta_g2 <= 1 / (64 * math.log(400))


# --- the GDP bound on exact 1-D privacy curves (§1.2, §7.2 "GDP check", E8) ----------------------
def _privacy_curve(logp: np.ndarray, logq: np.ndarray, x: np.ndarray,
                   eps: np.ndarray) -> np.ndarray:
    """δ(P‖Q)(ε) = ∫ max(0, P − e^ε Q) (both directions' maximum), by the trapezoid rule."""
    p, q = np.exp(logp), np.exp(logq)
    out = [max(np.trapezoid(np.maximum(p - math.exp(e) * q, 0), x),
               np.trapezoid(np.maximum(q - math.exp(e) * p, 0), x)) for e in eps]
    return np.array(out)


def test_gdp_bound_holds_on_1d_abs_rem() -> None:
    """n = 20 abs-loss REM on [−1, 1] (ERM calibration at ε = 1, δ = 1e-5, G_diff = 2G): the
    exact curve of neighbours (s₁ = −1 vs +1, the worst pair) lies below the Gaussian curve
    δ_Gauss(γ, ·) on ε ∈ [0, 3] and KL ≤ γ²/2 (quadrature on 400 001 points, error < 1e-8)."""
    prob = SepAbs(radius=1.0, sigma=0.5, offset=0.0)
    data = prob.generate(20, 1, np.random.default_rng(9))
    rem = REM()
    cal = rem.calibrate(20, 1, prob, 1.0, 1e-5)
    other = data.replace_row(0, np.array([1.0]))
    data = data.replace_row(0, np.array([-1.0]))
    f0 = prob.rem_factors(data, cal.k, cal.mu, np.zeros(1))[0]
    f1 = prob.rem_factors(other, cal.k, cal.mu, np.zeros(1))[0]
    x = np.linspace(-1, 1, 400_001)
    lp, lq = f0.logpdf(x), f1.logpdf(x)
    eps = np.linspace(0.0, 3.0, 31)
    curve = _privacy_curve(lp, lq, x, eps)
    bound = np.array([gdp_delta(cal.gamma, e) for e in eps])
    assert np.all(curve <= bound + 1e-8)
    kl = np.trapezoid(np.exp(lp) * (lp - lq), x)
    assert 0 < kl <= cal.gamma ** 2 / 2


def test_gdp_bound_is_tight_on_the_quadratic_instance() -> None:
    """F = ½x² vs ½(x − a)² on R: P = N(0, 1), Q = N(a, 1), the curve equals δ_Gauss(a, ·)
    (GLL'22 Thm 4 tightness) to 1e-6."""
    a = 0.8
    x = np.linspace(-12, 12, 600_001)
    lp = stats.norm.logpdf(x)
    lq = stats.norm.logpdf(x, loc=a)
    eps = np.linspace(0.0, 2.0, 11)
    curve = _privacy_curve(lp, lq, x, eps)
    assert curve == pytest.approx([gdp_delta(a, e) for e in eps], abs=1e-6)


# --- the mechanism ------------------------------------------------------------------------------
def test_exact_release_ledger_is_gdp_certified() -> None:
    prob = SepAbs()
    data = prob.generate(200, 4, np.random.default_rng(0))
    rel = REM().release(data, prob, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(1))
    charge = rel.ledger.charges[0]
    assert rel.ledger.certified and charge.gdp_mu == pytest.approx(rel.info["gamma"])
    assert rel.ledger.gdp_mu == pytest.approx(s_exact(1.0, 1e-5), rel=1e-9)
    assert rel.ledger.delta <= 1e-5 * (1 + 1e-9) and rel.func_queries == 0
    paper = REM(calibration="paper").release(data, prob, epsilon=1.0, delta=1e-5,
                                             rng=np.random.default_rng(1))
    assert paper.ledger.delta < 1e-6        # Lemma 26 is conservative (realised δ ≪ target)


def test_alternating_release_is_flagged_when_scaled_down() -> None:
    prob = SepAbs()
    data = prob.generate(30, 3, np.random.default_rng(0))
    alg = REM(sampler="alternating", steps_scale=1e-3, c_eta=16.0)
    rel = alg.release(data, prob, epsilon=0.5, delta=1e-5, rng=np.random.default_rng(1))
    charge = rel.ledger.charges[0]
    assert not rel.ledger.certified and "NOT certified" in charge.mechanism
    assert charge.gdp_mu is None                          # TV gives no GDP (pitfall P1)
    assert rel.ledger.delta == pytest.approx(1e-5, rel=1e-6)   # 2δ/3·(realised) + (1+e^ε)τ ≤ δ
    assert rel.iterations == math.ceil(1e-3 * rel.info["steps_theory"])
    assert rel.func_queries == rel.info["queries"] > 0
    assert 9.5 <= rel.func_queries / rel.iterations <= 12.5


def test_refusals() -> None:
    with pytest.raises(NotApplicable, match="no exact REM sampler"):
        data = LBLin().generate(10, 2, np.random.default_rng(0))
        REM().release(data, LBLin(), epsilon=1.0, delta=1e-5, rng=np.random.default_rng(0))
    assert "strongly_convex" in (REM(mode="strongly_convex").not_applicable_reason(SepAbs()) or "")
    assert REM(mode="strongly_convex").not_applicable_reason(SepAbs(ridge=1.0)) is None


def test_hard_sco_population_scales_with_n() -> None:
    prob = LinBall(hard_sco=True)
    m100, m400 = np.linalg.norm(prob.mean(8, 100)), np.linalg.norm(prob.mean(8, 400))
    assert (m100, m400) == pytest.approx((0.05, 0.025))
    theta = -prob.mean(8, 100) / m100                      # the population minimiser
    assert prob.population_excess(theta, 8, 100) == pytest.approx(0.0, abs=1e-15)
    assert prob.population_excess(np.zeros(8), 8, 100) == pytest.approx(0.05)


@pytest.mark.parametrize(
    "algorithm,problem,check",
    parametrize_with_checks([REM()], problems=[SepAbs(), LinBall()]).args[1]
    + parametrize_with_checks([REM(mode="strongly_convex")], problems=[SepAbs(ridge=1.0)]).args[1])
def test_rem_passes_the_harness(algorithm, problem, check):  # type: ignore[no-untyped-def]
    check(algorithm, problem)


def test_rem_sco_passes_the_harness_except_the_erm_limit() -> None:
    """SCO mode targets the population risk: its regulariser keeps an O(GD/√n) empirical bias as
    ε → ∞ (A2: μ ≥ (G/D)√(3/n)), so the ε → ∞ ERM check does not apply; the others do."""
    check_algorithm(REM(mode="sco", calibration="paper"), LinBall(),
                    skip=("check_epsilon_limit",))


@pytest.mark.parametrize("problem", [SepAbs(), SepAbs(ridge=0.7), LinBall(),
                                     LinBall(hard_sco=True)])
def test_problem_kernels_and_constants(problem) -> None:  # type: ignore[no-untyped-def]
    """Kernels reproduce loss/grad (dpbench.numerics.kernels.check_kernel) and every per-example
    (sub)gradient respects the declared L at random points of C."""
    from dpbench.numerics.kernels import check_kernel

    rng = np.random.default_rng(0)
    data = problem.generate(40, 5, rng)
    pts = np.array([problem.constraint.sample_uniform(5, rng) for _ in range(6)])
    check_kernel(problem, data, pts)
    for th in pts:
        assert np.linalg.norm(problem.grad(th, data), axis=1).max() <= problem.lipschitz + 1e-12
