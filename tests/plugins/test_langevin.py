"""Langevin diffusion (GTU A2/A5): path accountant, β calibrations, OU/ULA laws, the F1 problem.

Statistical tests use fixed seeds (deterministic outcomes) and enough replicates that the stated
tolerances are ≥ 4 standard errors away from the predicted value, so they are not flaky; each states
its tolerance and why.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbench.algorithms.langevin import Langevin, langevin_path, ou_path, regularizer_strength
from dpbench.core.errors import NotApplicable, UserInputError
from dpbench.core.exact_samplers import exact_sampler
from dpbench.privacy.gaussian import gdp_mu
from dpbench.privacy.langevin import (
    beta_a4_literal,
    beta_a4_tight,
    beta_a5_literal,
    beta_a5_tight,
    beta_max_gdp,
    beta_path_gdp,
    ld_gdp_mu,
    ld_rdp_slope,
    mixing_time,
    path_gdp_epsilon,
    pure_gibbs_beta,
    rdp_epsilon,
    rho_star,
)
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.logistic import Logistic
from dpbench.problems.mean_est import MeanEst
from dpbench.testing import parametrize_with_checks

EPS, DELTA = 1.0, 1e-5


# --- §3.4 worked calibration table ----------------------------------------------------------------
# n: (pure A3, T2.3 literal, A5 tight RDP, T2.7 literal, A4 tightened), values p/β as printed.
TABLE_34 = {
    1e2: (0.4, 27, 1.75, 0.83, 0.10),
    1e3: (0.04, 0.32, 0.020, 0.0083, 0.0010),
    1e4: (0.004, 0.0037, 2.3e-4, 8.3e-5, 1.0e-5),
    1e5: (4e-4, 4.2e-5, 2.6e-6, 8.3e-7, 1.0e-7),
}


def _printed_tolerance(printed: float) -> float:
    """1 %, or half a unit in the last printed digit when the table rounds more coarsely (2
    significant digits, e.g. 0.020 stands for [0.0195, 0.0205))."""
    text = f"{printed:.10g}"
    mantissa = text.split("e")[0].lstrip("0.").replace(".", "")
    digits = max(len(mantissa.rstrip("0")), 2 if printed < 1 else len(mantissa))
    half_unit = 0.5 * 10 ** (math.floor(math.log10(abs(printed))) - digits + 1)
    return max(0.01, half_unit / printed)


@pytest.mark.parametrize("n", sorted(TABLE_34))
def test_section_34_table(n: float) -> None:
    p, L, C, m = 10, 1.0, 2.0, 1.0
    got = (p / pure_gibbs_beta(EPS, n, L, C), p / beta_a5_literal(EPS, DELTA, n, L, C, m),
           p / beta_a5_tight(EPS, DELTA, n, L, C, m), p / beta_a4_literal(EPS, DELTA, n, L, m),
           p / beta_a4_tight(EPS, DELTA, n, L, m))
    for value, printed in zip(got, TABLE_34[n]):
        assert abs(value / printed - 1) <= _printed_tolerance(printed), (n, value, printed)


def test_spot_values() -> None:
    assert gdp_mu(1.0, 1e-5) == pytest.approx(0.268, abs=5e-4)
    # §3.4 reference: the exact Gaussian mechanism, Δ = 2L/n, gives β = μ²/Δ² ≈ 1.8e4 at n = 1e3
    assert (gdp_mu(1.0, 1e-5) / 2e-3) ** 2 == pytest.approx(1.8e4, rel=0.01)
    # A0.5 inversions are exact
    for eps, delta in [(0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-3)]:
        assert rdp_epsilon(rho_star(eps, delta), delta) == pytest.approx(eps, rel=1e-12)
    beta, Delta, t = 300.0, 0.01, 0.7
    assert ld_rdp_slope(beta, Delta, t) == pytest.approx(beta ** 2 * Delta ** 2 * t / 4)
    assert ld_gdp_mu(beta_max_gdp(EPS, DELTA, Delta, t), Delta, t) == pytest.approx(
        gdp_mu(EPS, DELTA), rel=1e-12)
    # docs/langevin.md, Errata 8: the log term uses 4
    assert mixing_time(100.0, 1.0, 1.0, 2.0, 1e-5) == pytest.approx(
        math.e / 200.0 * math.log(800.0 / 1e-10))


def test_path_gdp_fixed_point() -> None:
    for n, horizon in [(100, 1.0), (1000, 1.0), (1000, 4.0), (10 ** 5, 0.5)]:
        Delta = 2.0 / n
        beta = beta_path_gdp(EPS, DELTA, Delta, 1.0, 1.0, 2.0, horizon)
        t = horizon * mixing_time(beta, 1.0, 1.0, 2.0, DELTA)
        mu = ld_gdp_mu(beta, Delta, t)
        assert mu <= gdp_mu(EPS, DELTA) and mu == pytest.approx(gdp_mu(EPS, DELTA), rel=1e-12)


# --- OU exact transitions (A1.8) ------------------------------------------------------------------
def test_ou_transition_matches_closed_form() -> None:
    """One exact transition of length η from θ₀ is N(c + e^{−βaη}(θ₀ − c), (1 − e^{−2βaη})/(βa));
    8 transitions of η/8 have the same law (Markov property). KS p-values > 0.01 at fixed seeds
    (deterministic; 3000 draws)."""
    c, theta0, beta, a, eta = np.array([0.3]), np.array([-0.9]), 50.0, 1.0, 0.01
    mean = c + math.exp(-beta * a * eta) * (theta0 - c)
    sd = math.sqrt((1 - math.exp(-2 * beta * a * eta)) / (beta * a))
    for steps in (1, 8):
        rng = np.random.default_rng(7 + steps)
        draws = np.array([ou_path(c, a, theta0=theta0, steps=steps, eta=eta / steps, beta=beta,
                                  rng=rng)[0] for _ in range(3000)])
        assert stats.kstest((draws - mean[0]) / sd, "norm").pvalue > 0.01


def test_ou_stationary_law_is_gibbs() -> None:
    """Long-horizon OU draws are N(c, I/(βm)) coordinatewise (KS p > 0.01, 3000·2 draws, seed 3)."""
    c, beta = np.array([0.1, -0.2]), 400.0
    rng = np.random.default_rng(3)
    draws = np.array([ou_path(c, 1.0, theta0=np.array([0.9, 0.0]), steps=1, eta=0.1, beta=beta,
                              rng=rng) for _ in range(3000)])
    z = ((draws - c) * math.sqrt(beta)).ravel()
    assert stats.kstest(z, "norm").pvalue > 0.01


# --- the mechanism on F1 ---------------------------------------------------------------------------
#: F1 with the mean at the centre and ε = 4, so that at n = 300, p = 5 the Gibbs law (spread
#: √(p/β) ≈ 0.1) is far from the boundary of the unit ball and the untruncated laws apply.
F1 = MeanEst(mean_norm=0.0, spread=0.5)
EPS_F1 = 4.0


def _normalised_excess(alg: Langevin, n: int, p: int, runs: int, seed: int) -> np.ndarray:
    """2β·(excess ERM)/p over ``runs`` independent runs on one F1 dataset."""
    prob = F1
    data = prob.generate(n, p, np.random.default_rng(seed))
    best = prob.solve(data).value
    out = []
    for r in range(runs):
        rel = alg.release(data, prob, epsilon=EPS_F1, delta=DELTA,
                          rng=np.random.default_rng([seed, r]))
        out.append(2 * rel.info["beta"] * (prob.risk(rel.theta, data) - best) / p)
    return np.asarray(out)


@pytest.mark.parametrize("h", [0.05, 0.5])
def test_ula_bias_factor(h: float) -> None:
    """E15: the ULA stationary excess is p/(2β)·1/(1 − ηβm/2) on F1 (A2). 2β·excess/p is a
    χ²_p/p average (p = 5, 400 runs: relative s.e. 3.2 %); tolerance 10 % (≥ 3 s.e.), which still
    separates h = 0.5 (factor 1.333) from the Gibbs value 1."""
    alg = Langevin(h=h)
    plan = alg.plan(F1, 300, 5, EPS_F1, DELTA)
    factor = 1.0 / (1.0 - plan.eta * plan.beta * plan.m / 2.0)
    ratio = _normalised_excess(alg, 300, 5, 400, seed=11)
    assert np.mean(ratio) == pytest.approx(factor, rel=0.10)


@pytest.mark.slow
def test_excess_matches_exact_gibbs() -> None:
    """E6: at t = t_mix the OU-exact mechanism's excess is distributed as the exact Gibbs law's,
    χ²_p/(2β) (KS p > 0.01, 300 runs, seed 5), and the ULA (h = 0.02) mean is within 10 % of
    p/(2β) (1 % bias; s.e. 3.6 % at p = 5, 300 runs)."""
    ou = _normalised_excess(Langevin(sampler="ou_exact"), 300, 5, 300, seed=5)
    assert stats.kstest(ou * 5, stats.chi2(5).cdf).pvalue > 0.01
    ula = _normalised_excess(Langevin(), 300, 5, 300, seed=5)
    assert np.mean(ula) == pytest.approx(1.0, rel=0.10)
    # and the exact Gibbs sampler of the problem (β = kn) agrees with the same law
    prob = F1
    data = prob.generate(300, 5, np.random.default_rng(5))
    beta = Langevin().plan(prob, 300, 5, EPS_F1, DELTA).beta
    draw = exact_sampler("gibbs", prob, data, beta / 300, prob.constraint)
    rng = np.random.default_rng(6)
    best = prob.solve(data).value
    gibbs = np.array([2 * beta * (prob.risk(draw(rng), data) - best) for _ in range(300)])
    assert stats.ks_2samp(gibbs, ou * 5).pvalue > 0.01


def test_ledger_matches_accountant() -> None:
    prob = MeanEst()
    data = prob.generate(200, 4, np.random.default_rng(0))
    for horizon in (0.5, 1.0, 3.0):
        rel = Langevin(horizon=horizon).release(data, prob, epsilon=EPS, delta=DELTA,
                                                rng=np.random.default_rng(1))
        info, led = rel.info, rel.ledger
        assert info["Delta"] == pytest.approx(2 * prob.lipschitz / 200)
        assert info["t"] == pytest.approx(horizon * mixing_time(info["beta"], 1.0, 2.0, 2.0, DELTA))
        assert info["steps"] * info["eta"] == pytest.approx(info["t"], rel=1e-12)
        acc = path_gdp_epsilon(info["beta"], info["Delta"], info["t"], DELTA)
        assert led.epsilon == pytest.approx(acc, rel=1e-9) and led.epsilon <= EPS
        assert led.certified and led.delta == DELTA
        assert led.gdp_mu == pytest.approx(ld_gdp_mu(info["beta"], info["Delta"], info["t"]))
        assert rel.grad_queries == 200 * info["steps"]
    lit = Langevin(calibration="literal").release(data, prob, epsilon=EPS, delta=DELTA,
                                                  rng=np.random.default_rng(1))
    assert not lit.ledger.certified and lit.ledger.epsilon == pytest.approx(EPS)
    # errata 1, 2: the paper-literal β spends ≈ 3.5× the nominal ε
    assert 3.0 < lit.info["true_epsilon"] < 4.0


def test_determinism_and_compiled_equals_numpy() -> None:
    prob = MeanEst()
    data = prob.generate(60, 3, np.random.default_rng(2))
    alg = Langevin(output="average")
    a = alg.release(data, prob, epsilon=EPS, delta=DELTA, rng=np.random.default_rng(9))
    b = alg.release(data, prob, epsilon=EPS, delta=DELTA, rng=np.random.default_rng(9))
    assert np.array_equal(a.theta, b.theta) and a.info["path"] == "compiled"
    plan = alg.plan(prob, 60, 3, EPS, DELTA)
    kw = dict(constraint=prob.constraint, theta0=np.array([0.5, -0.5, 0.1]), steps=plan.steps,
              eta=plan.eta, beta=plan.beta, clip=prob.lipschitz)
    for output in ("last", "average"):
        fast, p1 = langevin_path(prob, data, output=output, rng=np.random.default_rng(4),
                                 compiled=True, **kw)
        slow, p2 = langevin_path(prob, data, output=output, rng=np.random.default_rng(4),
                                 compiled=False, **kw)
        assert (p1, p2) == ("compiled", "numpy")
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)


def test_start_is_data_independent_uniform() -> None:
    """With a vanishing horizon the release is θ₀ ~ Unif(C): identical for two datasets under the
    same rng (data independent), and on average as far from θ* as a uniform point (never θ*)."""
    prob = MeanEst()
    d1 = prob.generate(100, 3, np.random.default_rng(0))
    d2 = prob.generate(100, 3, np.random.default_rng(1))
    alg = Langevin(horizon=1e-9)
    dist = []
    for r in range(200):
        a = alg.release(d1, prob, epsilon=EPS, delta=DELTA, rng=np.random.default_rng(r))
        b = alg.release(d2, prob, epsilon=EPS, delta=DELTA, rng=np.random.default_rng(r))
        np.testing.assert_allclose(a.theta, b.theta, atol=1e-3)
        dist.append(np.linalg.norm(a.theta - prob.solve(d1).theta))
    # E‖U − θ*‖ for U uniform in the unit 3-ball and ‖θ*‖ ≈ 0.25 is ≈ 0.77; θ* itself would give 0
    assert np.mean(dist) > 0.6


def test_synchronous_coupling_stability() -> None:
    """E13 / GTU Thm 2.5 proof: under a synchronous coupling (same θ₀ and noise — the same rng) on
    replace-one neighbours, ‖θ_T − θ′_T‖ ≤ 2L/(mn) deterministically (ηβM ≤ 1; projection is
    non-expansive)."""
    prob = MeanEst()
    for n in (50, 400):
        data = prob.generate(n, 4, np.random.default_rng(n))
        other = data.replace_row(0, -data.X[0])
        for r in range(5):
            a = Langevin().release(data, prob, epsilon=EPS, delta=DELTA, rng=np.random.default_rng(r))
            b = Langevin().release(other, prob, epsilon=EPS, delta=DELTA,
                                   rng=np.random.default_rng(r))
            assert np.linalg.norm(a.theta - b.theta) <= 2 * prob.lipschitz / n + 1e-12


def test_not_applicable_messages() -> None:
    assert "regularize" in Langevin().not_applicable_reason(LBLin())
    assert Langevin(regularize="erm").not_applicable_reason(LBLin()) is None
    assert "isotropic quadratic" in Langevin(sampler="ou_exact").not_applicable_reason(
        Logistic(ridge=0.1))
    prob = MeanEst()
    data = prob.generate(20, 10, np.random.default_rng(0))
    with pytest.raises(NotApplicable, match="stationary spread"):
        Langevin(sampler="ou_exact").release(data, prob, epsilon=EPS, delta=DELTA,
                                             rng=np.random.default_rng(0))
    with pytest.raises(UserInputError):
        Langevin(calibration="paper")


def test_regularized_wrapper() -> None:
    prob = LBLin()
    data = prob.generate(400, 4, np.random.default_rng(0))
    # horizon 1e-3 keeps the run short (m = λ_r ≈ 0.008: t_mix is long); the calibration is checked
    rel = Langevin(regularize="erm", horizon=1e-3).release(data, prob, epsilon=EPS, delta=DELTA,
                                                           rng=np.random.default_rng(0))
    lam = regularizer_strength("erm", L=1.0, C=2.0, p=4, n=400, epsilon=EPS, delta=DELTA)
    assert rel.info["lambda_r"] == pytest.approx(lam)
    assert rel.info["m"] == pytest.approx(lam) and rel.info["L_cal"] == pytest.approx(1 + 2 * lam)
    assert rel.info["Delta"] == pytest.approx(2 / 400)  # the regulariser cancels in Δ
    assert rel.ledger.epsilon <= EPS
    sco = regularizer_strength("sco", L=1.0, C=2.0, p=4, n=400, epsilon=EPS, delta=DELTA)
    assert sco == pytest.approx(max(lam, 0.5 / math.sqrt(400)))


# --- F1 problem ------------------------------------------------------------------------------------
def test_mean_est_problem() -> None:
    prob = MeanEst(radius=2.0, mean_norm=0.5, spread=1.0)
    assert prob.constants() == {"L": 4.0, "D": 4.0, "Delta": 1.0, "beta": 1.0,
                                "data_norm": 1.5}
    data = prob.generate(4000, 6, np.random.default_rng(0))
    assert np.all(np.linalg.norm(data.X, axis=1) <= 2.0 + 1e-12)
    np.testing.assert_allclose(np.linalg.norm(data.X - prob.mean(6), axis=1), 1.0)
    opt = prob.solve(data)
    np.testing.assert_allclose(opt.theta, data.X.mean(axis=0))
    # E ½‖θ − d‖² − min = ½‖θ − μ‖² (closed form) vs the sample (error ~ 1/√4000)
    theta = np.full(6, 0.2)
    sample = prob.risk(theta, data) - prob.risk(prob.mean(6), data)
    assert prob.population_excess(theta, 6) == pytest.approx(sample, abs=0.03)
    with pytest.raises(UserInputError, match="must not exceed radius"):
        MeanEst(mean_norm=0.8, spread=0.5)


def test_mean_est_gibbs_sampler() -> None:
    """expmech_sampler = N(d̄, I/(kn)) (truncation negligible here): KS p > 0.01, 2000 draws."""
    prob = MeanEst()
    data = prob.generate(500, 3, np.random.default_rng(1))
    k = 2.0
    draw = exact_sampler("gibbs", prob, data, k, prob.constraint)
    rng = np.random.default_rng(2)
    z = (np.array([draw(rng) for _ in range(2000)]) - data.X.mean(axis=0)) * math.sqrt(k * 500)
    assert stats.kstest(z.ravel(), "norm").pvalue > 0.01


# --- the public check harness ------------------------------------------------------------------------
@parametrize_with_checks([Langevin()], problems=[MeanEst()])
def test_langevin_passes_harness(algorithm, problem, check):  # type: ignore[no-untyped-def]
    name = getattr(check, "__name__", "")
    if name == "check_rate_smoke":
        # the default n ∈ {25, …, 200} is capped on F1 (β ≈ 0.5 at n = 50: p/(2β) ≫ ½‖C‖²/4);
        # n ≥ 400 is inside the regime of the card (p/(2β) ≤ 0.05)
        check(algorithm, problem, n_grid=(400, 800, 1600, 3200))
    elif name == "check_empirical_privacy":
        # The harness's 10⁶ runs per side for a mechanism with run_batch are 10⁶ chains of
        # ≈ 1700 steps at h = 0.02 (≈ 5 min per side): 10⁴ per side through run_batch, 5× the
        # 2000 runs of the loop. The audit suite runs h = 0.2 (tests/plugins/test_chains_batch.py).
        check(algorithm, problem, runs=10_000)
    elif name == "check_release_batch":
        pytest.skip("≈ 30 s at h = 0.02 (n = 50, T ≈ 1500): run by the slow "
                    "test_chains_batch.py::test_langevin_harness_check_default")
    else:
        check(algorithm, problem)
