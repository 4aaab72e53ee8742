"""GTU Gibbs samplers (A4), the Rashomon sampler (A6), the iterated exponential mechanism (A9) and
the F2 cube problem (docs/langevin.md; docs/instances.md).

Every statistical test uses fixed seeds (deterministic) and a tolerance of ≥ 4 standard errors or a
KS p-value floor of 1e-3, so a correct implementation fails with probability < 1e-3 per seed choice
and, the seeds being fixed, never flakes.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

from dpbench.algorithms.exp_mech import ExpMech
from dpbench.algorithms.gibbs import Gibbs, a8_lambda
from dpbench.algorithms.iterated_exp_mech import IteratedExpMech, iteration_count, round_epsilons
from dpbench.algorithms.rashomon import Rashomon
from dpbench.core.errors import NotApplicable
from dpbench.core.exact_samplers import exact_sampler
from dpbench.core.registry import get_algorithm, get_problem
from dpbench.numerics.samplers.rashomon import (
    expected_excess,
    inside_weight,
    radial_excess_cdf,
    rashomon_beta_star_1d,
    rashomon_diagnostics,
    rashomon_radial_sampler,
    sample_rashomon_radius,
)
from dpbench.privacy.gaussian import gdp_mu
from dpbench.privacy.langevin import beta_a4_literal, beta_a4_tight
from dpbench.problems.lb_quad import LBQuad
from dpbench.problems.lin_cube import LinCube, cube_coordinate_cdf
from dpbench.problems.mean_est import MeanEst
from dpbench.testing import ALGORITHM_CHECKS, check_rate_smoke


# --- exact radial Rashomon sampler (§5 F1, §9.2) -------------------------------------------------
def test_radial_mixture_reproduces_spec_9_2() -> None:
    # Spec §9.2 at p=5, β=200, ψ=0.02: weight 0.530251, E[𝓛 − 𝓛*] = 0.02008 (quadrature).
    assert inside_weight(5, 200.0, 0.02) == pytest.approx(0.530251, abs=5e-7)
    assert expected_excess(5, 200.0, 0.02) == pytest.approx(0.02008, abs=1e-5)
    # ψ = 0 is the plain Gibbs law N(c, I/β): E = p/(2β).
    assert expected_excess(5, 200.0, 0.0) == pytest.approx(5 / 400, rel=1e-12)
    r = sample_rashomon_radius(np.random.default_rng(92), 5, 200.0, 0.02, 40_000)
    excess = 0.5 * r * r
    inside = r <= math.sqrt(0.04)
    se_hit = math.sqrt(0.53 * 0.47 / r.size)                       # 0.0025
    assert abs(inside.mean() - 0.530251) < 4 * se_hit
    assert abs(excess.mean() - 0.020075) < 4 * excess.std() / math.sqrt(r.size)
    assert stats.kstest(excess, lambda s: radial_excess_cdf(s, 5, 200.0, 0.02)).pvalue > 1e-3
    diag = rashomon_diagnostics(inside, r / math.sqrt(0.04), 5, 200.0, 0.02)
    assert diag.ks_pvalue > 1e-3 and diag.inside_draws == int(inside.sum())
    assert diag.hit_bound < 0 < diag.hit_rate  # the Markov bound is vacuous here (docs/langevin.md, "Pitfalls")


def test_mean_est_rashomon_sampler_truncates_to_the_ball() -> None:
    # A small ball R = 0.3 around d̄ ≈ 0.25 e₁ cuts the law: every draw lies in C, and inside G
    # (well inside C) the draws stay uniform.
    prob = MeanEst(radius=0.3, mean_norm=0.1, spread=0.2)
    data = prob.generate(200, 3, np.random.default_rng(1))
    draw = exact_sampler("rashomon", prob, data, 60.0, 0.005)
    assert draw is not None
    gen = np.random.default_rng(2)
    xs = np.array([draw(gen) for _ in range(3000)])
    assert np.all(prob.constraint.contains(xs))
    dbar = data.X.mean(axis=0)
    rad = np.linalg.norm(xs - dbar, axis=1) / math.sqrt(0.01)
    assert stats.kstest(rad[rad <= 1] ** 3, "uniform").pvalue > 1e-3
    # the unconstrained sampler puts mass outside C; the constrained one renormalises
    free = rashomon_radial_sampler(dbar, 60.0, 0.005)
    ys = np.array([free(gen) for _ in range(3000)])
    assert not np.all(prob.constraint.contains(ys))


@pytest.mark.parametrize("psi,beta_star", [(0.0, 7.19e4), (1e-4, 4.86e4), (1e-3, 2.07e4),
                                           (1e-2, 7.00e3)])
def test_rashomon_exact_privacy_curve_reproduces_spec_9_3(psi: float, beta_star: float) -> None:
    # E12, docs/langevin.md "The Rashomon law on F1" (p = 1, n = 1000, shift 1/n, ε = 1, δ = 1e-5): quadrature within 2 %; ψ = 0
    # is the Gaussian mechanism β* = μ(1, 1e-5)²n², and for ψ ≫ 1/n², β* ≈ εn/√(2ψ) (docs/langevin.md, Errata 19).
    got = rashomon_beta_star_1d(psi, 1e-3, 1.0, 1e-5)
    assert got == pytest.approx(beta_star, rel=0.02)
    if psi == 0.0:
        assert got == pytest.approx(gdp_mu(1.0, 1e-5) ** 2 * 1e6, rel=1e-4)


# --- F2: the cube problem ----------------------------------------------------------------------
def test_lin_cube_factorised_sampler_matches_closed_forms() -> None:
    prob = LinCube()
    data = prob.generate(400, 4, np.random.default_rng(3))
    v = data.X.mean(axis=0)
    a = 0.5
    beta = 40.0
    draw = exact_sampler("gibbs", prob, data, beta / data.n, prob.constraint)
    gen = np.random.default_rng(4)
    xs = np.array([draw(gen) for _ in range(4000)])
    for j in range(4):
        assert stats.kstest(xs[:, j], lambda t: cube_coordinate_cdf(t, beta * v[j], a)).pvalue > 1e-3
    opt = prob.solve(data)
    excess = np.array([prob.risk(x, data) for x in xs]) - opt.value
    assert abs(excess.mean() - prob.gibbs_excess(data, beta)) < 4 * excess.std() / math.sqrt(4000)
    # ridge (the A8 wrapper): per-coordinate truncated normals N(v/λ, 1/(βλ)) on [−a, a]
    ridged = prob.with_ridge(0.7)
    draw = exact_sampler("gibbs", ridged, data, beta / data.n, ridged.constraint)
    xs = np.array([draw(gen) for _ in range(3000)])
    for j in range(4):
        cdf = lambda t, j=j: cube_coordinate_cdf(t, 0.0, a, beta * 0.7, v[j] / 0.7)  # noqa: E731
        assert stats.kstest(xs[:, j], cdf).pvalue > 1e-3
    assert exact_sampler("gibbs", prob, data, 1.0, MeanEst().constraint) is None


def test_lin_cube_constants_and_optimum() -> None:
    prob = LinCube(ridge=0.5)
    assert prob.constants() == {"L": 1.5, "D": 2.0, "Delta": 0.5, "beta": 0.5, "data_norm": 1.0}
    data = prob.generate(50, 9, np.random.default_rng(5))
    opt = prob.solve(data)
    gen = np.random.default_rng(6)
    for _ in range(200):  # no feasible point beats the closed-form optimum
        assert prob.risk(prob.constraint.sample_uniform(9, gen), data) >= opt.value - 1e-14
    assert LinCube().population_excess(LinCube().mean(9) * 0, 9) > 0
    assert get_problem("lin_cube") is LinCube


# --- gibbs (A4) --------------------------------------------------------------------------------
def test_gibbs_calibrations_reproduce_spec_3_4() -> None:
    # §3.4 (p=10, ε=1, δ=1e-5, L=1, m=1): p/β = 0.0083 (T2.7 literal), 0.0010 (tight) at n=1e3.
    assert 10 / beta_a4_literal(1.0, 1e-5, 1000, 1.0, 1.0) == pytest.approx(0.0083, rel=0.01)
    assert 10 / beta_a4_tight(1.0, 1e-5, 1000, 1.0, 1.0) == pytest.approx(0.0010, rel=0.01)
    # the gaussian calibration is the exact Gaussian mechanism on mean_est: μ = Δ√β, Δ = 2ρ/n
    prob = MeanEst()
    cal = Gibbs(calibration="gaussian").calibrate(prob, 1000, 5, 1.0, 1e-5)
    assert cal["gdp_mu"] == pytest.approx(2 * 0.75 / 1000 * math.sqrt(cal["beta"]), rel=1e-12)
    assert cal["gdp_mu"] == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-4)
    assert cal["epsilon"] <= 1.0 and cal["delta"] <= 1e-5 and cal["truncation_mass"] < 1e-6
    # not applicable where the truncation is not negligible or the law is not Gaussian
    with pytest.raises(NotApplicable, match="truncation"):
        Gibbs(calibration="gaussian").calibrate(prob, 30, 5, 1.0, 1e-5)
    assert Gibbs(calibration="gaussian").not_applicable_reason(LinCube(ridge=1.0)) is not None
    # A8 λ_r (docs/langevin.md, "Mechanism labels", A8 table)
    assert a8_lambda("erm", 1.0, 2.0, 100, 4, 1.0, math.exp(-4)) == pytest.approx(4 / 200)
    assert a8_lambda("sco", 1.0, 2.0, 100, 4, 1.0, math.exp(-4)) == pytest.approx(0.05)


def test_gibbs_exact_and_mala_agree_on_mean_est() -> None:
    # Two-sample KS per coordinate, 300 exact vs 300 MALA draws (n=100, p=2, β ≈ 25): the MALA
    # chain (public step 0.5 p^{-1/6}/√(βM), 2400 steps from the centre) targets the same law.
    prob = MeanEst()
    data = prob.generate(100, 2, np.random.default_rng(7))
    exact, mala = Gibbs(), Gibbs(sampler="mala")
    xs = np.array([exact.release(data, prob, epsilon=1.0, delta=1e-5,
                                 rng=np.random.default_rng([s, 0])).theta for s in range(300)])
    out = [mala.release(data, prob, epsilon=1.0, delta=1e-5, rng=np.random.default_rng([s, 1]))
           for s in range(300)]
    ys = np.array([o.theta for o in out])
    for j in range(2):
        assert stats.ks_2samp(xs[:, j], ys[:, j]).pvalue > 1e-3
    assert not out[0].ledger.certified and "nominal" in out[0].ledger.charges[0].theorem
    assert 0.3 < np.mean([o.info["acceptance"] for o in out]) <= 1.0


def test_gibbs_regularized_on_lin_cube_and_ledger() -> None:
    prob = LinCube()
    data = prob.generate(500, 4, np.random.default_rng(8))
    assert Gibbs().not_applicable_reason(prob) is not None        # not strongly convex
    alg = Gibbs(regularize="erm")
    rel = alg.release(data, prob, epsilon=1.0, delta=1e-6, rng=np.random.default_rng(9))
    lam = a8_lambda("erm", 1.0, 2.0, 500, 4, 1.0, 1e-6)
    assert rel.info["lambda_r"] == pytest.approx(lam)
    assert rel.info["beta"] == pytest.approx(beta_a4_tight(1.0, 1e-6, 500, 1.0 + 2 * lam, lam))
    assert rel.ledger.epsilon == 1.0 and rel.ledger.delta == 1e-6 and rel.ledger.certified
    assert alg.rate_card().exponents["p"] == 0.5


# --- rashomon (A6) -----------------------------------------------------------------------------
def test_rashomon_samples_compose_and_expose_diagnostics() -> None:
    prob = MeanEst()
    data = prob.generate(400, 3, np.random.default_rng(10))
    rel = Rashomon(psi=0.05, samples=4).release(data, prob, epsilon=2.0, delta=0.0,
                                                rng=np.random.default_rng(11))
    assert len(rel.ledger.charges) == 4 and rel.ledger.epsilon == pytest.approx(2.0)
    assert all(c.epsilon == pytest.approx(0.5) for c in rel.ledger.charges)
    assert rel.info["beta"] == pytest.approx(0.5 * 400 / (2 * 2.0 * 2.0))
    assert rel.info["samples"].shape == (4, 3) and rel.info["in_rashomon"] in (0.0, 1.0)
    approx = Rashomon(psi=1e-4, regime="approx", samples=2)
    assert approx.privacy == "approx"
    rel = approx.release(data, prob, epsilon=1.0, delta=1e-6, rng=np.random.default_rng(12))
    assert [c.delta for c in rel.ledger.charges] == [5e-7, 5e-7]


def test_rashomon_hit_rate_and_uniformity() -> None:
    # Pure regime on mean_est, n=2000, p=3, ε=1: β = εn/(2L‖C‖) = 250; ψ = 0.1 gives βψ = 25 and
    # the exact unconstrained hit rate inside_weight(3, 250, 0.1) = 0.93 (truncation to C is
    # negligible: the shell has width ≈ √(p/β) = 0.11 around d̄, ‖d̄‖ ≈ 0.25, R = 1).
    prob = MeanEst()
    data = prob.generate(2000, 3, np.random.default_rng(13))
    alg = Rashomon(psi=0.1)
    rels = [alg.release(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng([s, 2]))
            for s in range(1500)]
    flags = np.array([r.info["in_rashomon"] for r in rels])
    rad = np.array([r.info["rashomon_radius"] for r in rels])
    assert rels[0].info["beta"] == pytest.approx(250.0)
    diag = rashomon_diagnostics(flags, rad, 3, 250.0, 0.1)
    w = inside_weight(3, 250.0, 0.1)
    assert abs(diag.hit_rate - w) < 4 * math.sqrt(w * (1 - w) / 1500)
    assert diag.ks_pvalue > 1e-3
    # E[𝓛 − 𝓛*] against the closed-form oracle (docs/instances.md, F2 cube) within 4 standard errors
    excess = np.array([prob.risk(r.theta, data) for r in rels]) - prob.solve(data).value
    oracle = alg.oracle_excess(data, prob, epsilon=1.0, delta=0.0)
    assert abs(excess.mean() - oracle) < 4 * excess.std() / math.sqrt(excess.size)


def test_rashomon_approx_needs_an_interior_minimiser() -> None:
    # LinCube with a small ridge: θ* = clip(v/λ, ±a) sits on ∂C, so ∇𝓛(θ*) ≠ 0 (errata 2, 3).
    prob = LinCube(ridge=0.05)
    data = prob.generate(100, 3, np.random.default_rng(14))
    alg = Rashomon(psi=0.01, regime="approx", sampler="rwm")
    with pytest.raises(NotApplicable, match="stationary"):
        alg.release(data, prob, epsilon=1.0, delta=1e-6, rng=np.random.default_rng(15))
    assert Rashomon().not_applicable_reason(prob) is not None  # no exact sampler on the cube


# --- iterated exponential mechanism (A9) -------------------------------------------------------
def _slope(alg: object, prob: MeanEst, ns: tuple[int, ...], eps: float, seeds: int) -> tuple[float, list[float]]:
    means = []
    for n in ns:
        vals = []
        for s in range(seeds):
            data = prob.generate(n, 2, np.random.default_rng([n, s]))
            rel = alg.release(data, prob, epsilon=eps, delta=0.0,  # type: ignore[attr-defined]
                              rng=np.random.default_rng([n, s, 1]))
            vals.append(prob.risk(rel.theta, data) - prob.solve(data).value)
        means.append(float(np.mean(vals)))
    return float(np.polyfit(np.log(ns), np.log(means), 1)[0]), means


def test_iterated_exp_mech_is_steeper_than_one_shot() -> None:
    # mean_est, p=2, ε=4, n ∈ {1000, 3000, 10000, 30000}, 150 seeds: Thm 4.2 predicts n^−2 (up to
    # the log n factors and the integer k), one-shot A3 n^−1 (p/(2β) with β = εn/8).
    prob = MeanEst()
    ns = (1000, 3000, 10000, 30000)
    it, it_means = _slope(IteratedExpMech(), prob, ns, 4.0, 150)
    one, one_means = _slope(ExpMech(), prob, ns, 4.0, 150)
    assert -2.3 < it < -1.7, (it, it_means)
    assert -1.2 < one < -0.8, (one, one_means)
    assert it_means[-1] < one_means[-1] / 5  # measured 7.6× at n = 30000


def test_iterated_exp_mech_schedule_and_ledger() -> None:
    assert iteration_count(1.0, 10, 5) == 1
    assert iteration_count(1.0, 10_000, 2) == 1 + math.ceil(math.log2(math.log(10_000 / (2 + math.log(10_000)))))
    eps = round_epsilons(1.0, 4)
    assert eps == [1 / 16, 1 / 8, 1 / 4, 1 / 2]
    prob = MeanEst()
    data = prob.generate(3000, 2, np.random.default_rng(16))
    rel = IteratedExpMech().release(data, prob, epsilon=4.0, delta=0.0, rng=np.random.default_rng(17))
    k = rel.info["rounds"]
    assert len(rel.ledger.charges) == k and rel.ledger.epsilon == pytest.approx(4.0 * (1 - 2.0 ** -k))
    diam = [r["diameter"] for r in rel.info["schedule"]]
    assert diam == sorted(diam, reverse=True) and rel.info["final_diameter"] < 2.0
    assert get_algorithm("iterated_exp_mech") is IteratedExpMech


# --- the public check harness ------------------------------------------------------------------
# check_rate_smoke's default grid n ∈ {50..400} (p=3, ε=1) lies in the capped regime of the
# mechanisms with large constants (T2.7-literal β, A8, A9's radii), so they get an in-regime grid.
_CASES = [
    (Gibbs(), MeanEst(), None),
    (Gibbs(calibration="literal"), MeanEst(), (400, 800, 1600, 3200)),
    (Rashomon(psi=0.001), MeanEst(), None),
    (Rashomon(psi=0.001, regime="approx"), MeanEst(), None),
    (IteratedExpMech(), MeanEst(), (3000, 10_000, 30_000, 100_000)),
    (Gibbs(regularize="erm"), LinCube(), (400, 800, 1600, 3200)),
]


def _harness_params() -> list[object]:
    out = []
    for alg, prob, grid in _CASES:
        for check in ALGORITHM_CHECKS:
            run = check
            if check is check_rate_smoke and grid is not None:
                run = functools.partial(check_rate_smoke, n_grid=grid)
            out.append(pytest.param(alg, prob, run, id=f"{alg!r}-{prob.name}-{check.__name__}"))
    return out


@pytest.mark.parametrize("algorithm,problem,check", _harness_params())
def test_harness(algorithm, problem, check):  # type: ignore[no-untyped-def]
    check(algorithm, problem)


def test_gibbs_on_default_harness_problem() -> None:
    # lb_quad (the harness default for strongly convex mechanisms) has rows on the sphere of C:
    # the gaussian calibration's truncation margin is 0, so it is not applicable there.
    assert Gibbs(calibration="gaussian").not_applicable_reason(LBQuad()) is None
    with pytest.raises(NotApplicable):
        Gibbs(calibration="gaussian").calibrate(LBQuad(), 1000, 3, 1.0, 1e-6)
