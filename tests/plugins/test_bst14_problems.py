"""Tests of the BST14 problem families KINK-SC, HUB-1D, 1-median (+ ridge), linear + ridge, the
certified median solver, the exact radial / piecewise-exponential samplers and the fingerprinting
hard data (docs/instances.md; oracle curves in docs/bst14.md).

Statistical tests use fixed seeds and Kolmogorov–Smirnov distances against exact or numerically
integrated CDFs, with a threshold of 1.63/√m (the 99% KS critical value) so a correct sampler fails
with probability 1% per seed; the seeds are fixed, so the outcome is deterministic, and a wrong law
(e.g. the wrong segment mass or a missing r^{p−1}) gives distances of 0.1 or more.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.optimize import minimize, minimize_scalar

from dpbench.core.errors import NotApplicable, UserInputError
from dpbench.core.exact_samplers import exact_sampler
from dpbench.core.problem import Dataset, Problem
from dpbench.core.registry import get_problem
from dpbench.core.sets import Ball, BallAt, Intersection
from dpbench.numerics.kernels import kernel_arrays
from dpbench.numerics.samplers.piecewise import (
    PiecewiseExponential,
    interval_of,
    piecewise_from_function,
)
from dpbench.numerics.samplers.radial import radius_cdf, sample_radial_in_region, sample_radius
from dpbench.numerics.solvers.median import median_objective, solve_median
from dpbench.problems._hard_data import hard_data, signal_rows
from dpbench.problems.hub_1d import Hub1D
from dpbench.problems.kink_sc import KinkSC
from dpbench.problems.linear_ridge import LinearRidge
from dpbench.problems.median import (
    EuclideanMedian,
    median_population_optimum,
    median_population_sample,
)

GAP = 1e-9

PROBLEMS: list[Problem] = [
    KinkSC(),
    KinkSC(radius=2.0, curvature=0.5, d0_norm=1.0, signal=0.6),
    Hub1D(),
    Hub1D(dataset="D2", h=0.05),
    EuclideanMedian(),
    EuclideanMedian(radius=2.0, ridge=0.5, duplicate=0.0, data_radius=1.5, noise=1.0),
    LinearRidge(),
    LinearRidge(radius=2.0, ridge=0.2, data_norm=2.0, mean_norm=0.05),
]
IDS = [repr(p) for p in PROBLEMS]


def dim(problem: Problem) -> int:
    return 1 if isinstance(problem, Hub1D) else 4


def in_ball(p: int, radius: float, gen: np.random.Generator, m: int) -> np.ndarray:
    """m points uniform in the ball, plus m points on its sphere."""
    g = gen.standard_normal((2 * m, p))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    r = np.concatenate([radius * gen.random(m) ** (1.0 / p), np.full(m, radius)])
    return g * r[:, None]


def universe(problem: Problem, p: int, gen: np.random.Generator, m: int) -> Dataset:
    """Random points of the problem's data universe (not only of its generator)."""
    if isinstance(problem, KinkSC):
        return Dataset(in_ball(p, problem.radius, gen, m // 2))
    if isinstance(problem, EuclideanMedian):
        return Dataset(in_ball(p, problem.data_radius, gen, m // 2))
    if isinstance(problem, LinearRidge):
        return Dataset(np.where(gen.random((m, p)) < 0.5, -1.0, 1.0) * problem.data_norm / math.sqrt(p))
    return Dataset(gen.uniform(-1, 1, (m, 1)), gen.uniform(-1, 1, m))


# --------------------------------------------------------------------------------------------------
# declared constants, gradients, kernels
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_declared_lipschitz_bounds_every_gradient(problem: Problem) -> None:
    """‖∇ℓ(θ; d)‖ ≤ L over random θ ∈ C (interior and sphere) and random universe points."""
    gen = np.random.default_rng(1)
    p = dim(problem)
    data = universe(problem, p, gen, 200)
    worst = 0.0
    for theta in in_ball(p, problem.constraint.diameter / 2, gen, 50):
        worst = max(worst, float(np.linalg.norm(problem.grad(theta, data), axis=1).max()))
    assert worst <= problem.lipschitz * (1 + 1e-12)


def test_declared_lipschitz_is_attained() -> None:
    """The declared L is tight: the extreme pairs of the universe reach it."""
    u = np.array([1.0, 0.0, 0.0])
    kink = KinkSC(radius=2.0, curvature=0.5, d0_norm=1.0)
    assert np.linalg.norm(kink.grad(2.0 * u, Dataset(-2.0 * u[None]))) == pytest.approx(kink.lipschitz)
    med = EuclideanMedian(radius=2.0, ridge=0.5)
    assert np.linalg.norm(med.grad(2.0 * u, Dataset(-u[None]))) == pytest.approx(med.lipschitz)
    lin = LinearRidge(radius=2.0, ridge=0.2, data_norm=2.0)
    d = np.full((1, 4), -1.0)
    assert np.linalg.norm(lin.grad(np.full(4, 1.0), Dataset(d))) == pytest.approx(lin.lipschitz)
    assert Hub1D().lipschitz == 1.0 and Hub1D().constraint.diameter == 4.0


@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_grad_is_a_subgradient_with_declared_strong_convexity(problem: Problem) -> None:
    """ℓ(θ′) ≥ ℓ(θ) + ⟨g, θ′ − θ⟩ + (Δ/2)‖θ′ − θ‖² (BST14 §1.3 definitions), and the β upper bound when finite."""
    gen = np.random.default_rng(2)
    p = dim(problem)
    data = problem.generate(40, p, gen)
    radius = problem.constraint.diameter / 2
    pts = in_ball(p, radius, gen, 20)
    pts = np.concatenate([pts, data.X[:3]])  # include kinks
    for a in pts:
        la, ga = problem.loss(a, data), problem.grad(a, data)
        for b in pts[::5]:
            lb = problem.loss(b, data)
            gap = lb - la - ga @ (b - a)
            sq = float((b - a) @ (b - a))
            assert np.all(gap >= 0.5 * problem.strong_convexity * sq - 1e-12)
            if math.isfinite(problem.smoothness):
                assert np.all(gap <= 0.5 * problem.smoothness * sq + 1e-12)


@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_kernel_agrees_with_loss_and_grad(problem: Problem) -> None:
    gen = np.random.default_rng(3)
    p = dim(problem)
    data = problem.generate(30, p, gen)
    kern = problem.kernel()
    assert kern is not None
    X, y = kernel_arrays(data)
    out = np.empty(p)
    thetas = np.concatenate([in_ball(p, problem.constraint.diameter / 2, gen, 3), data.X[:1]])
    for theta in thetas:
        loss, grad = problem.loss(theta, data), problem.grad(theta, data)
        for i in range(data.n):
            assert kern.loss(theta, X, y, kern.prm, i) == pytest.approx(loss[i], abs=1e-13)
            kern.grad(theta, X, y, kern.prm, i, out)
            np.testing.assert_allclose(out, grad[i], atol=1e-13)


def test_registry_and_param_validation() -> None:
    for name, cls in [("kink_sc", KinkSC), ("hub_1d", Hub1D), ("median", EuclideanMedian),
                      ("linear_ridge", LinearRidge)]:
        assert get_problem(name) is cls and cls.name == name
    with pytest.raises(UserInputError):
        KinkSC(d0_norm=2.0)
    with pytest.raises(UserInputError):
        EuclideanMedian(data_radius=2.0)
    with pytest.raises(UserInputError):
        LinearRidge(mean_norm=2.0)
    with pytest.raises(UserInputError):
        Hub1D(dataset="D3")
    assert KinkSC(curvature=2.0, radius=0.5).constants() == {"L": 3.0, "D": 1.0, "Delta": 2.0,
                                                             "beta": math.inf,
                                                             "data_norm": 0.3}


# --------------------------------------------------------------------------------------------------
# certified optima
# --------------------------------------------------------------------------------------------------
def brute_force(problem: Problem, data: Dataset, starts: int = 3) -> float:
    """min over C of the average loss by SLSQP from several starts (an upper bound on the min)."""
    p = data.p
    radius = problem.constraint.diameter / 2
    cons = [{"type": "ineq", "fun": lambda th: radius**2 - th @ th}]
    gen = np.random.default_rng(4)
    best = math.inf
    for x0 in np.concatenate([np.zeros((1, p)), in_ball(p, radius, gen, starts)[:starts]]):
        res = minimize(lambda th: problem.risk(th, data), x0, method="SLSQP", constraints=cons,
                       options={"ftol": 1e-14, "maxiter": 500})
        if radius**2 - res.x @ res.x >= -1e-12:
            best = min(best, float(res.fun))
    return best


@pytest.mark.parametrize("problem", [PROBLEMS[1], PROBLEMS[4], PROBLEMS[5], PROBLEMS[6], PROBLEMS[7]],
                         ids=[IDS[1], IDS[4], IDS[5], IDS[6], IDS[7]])
def test_solve_is_certified_and_beats_brute_force(problem: Problem) -> None:
    data = problem.generate(200, 3, np.random.default_rng(5))
    opt = problem.solve(data)
    assert opt.gap <= GAP
    assert problem.constraint.contains(opt.theta)
    assert opt.value == pytest.approx(problem.risk(opt.theta, data), abs=1e-15)
    assert opt.value <= brute_force(problem, data) + 1e-12


def test_kink_sc_single_point_closed_form() -> None:
    problem = KinkSC()
    data = problem.generate(50, 5, np.random.default_rng(6))
    d0 = data.meta["d0"]
    assert np.linalg.norm(d0) == pytest.approx(0.3)
    assert np.all(data.X == d0)
    opt = problem.solve(data)
    assert opt.gap == 0.0 and np.array_equal(opt.theta, d0)
    theta = np.array([0.1, -0.2, 0.0, 0.3, 0.0])
    r = np.linalg.norm(theta - d0)
    assert problem.excess_sum(theta, data) == pytest.approx(50 * (r + 0.5 * r * r))
    assert problem.excess_sum(theta, data) == pytest.approx(50 * (problem.risk(theta, data) - opt.value))


def test_kink_sc_padding_structure() -> None:
    problem = KinkSC(signal=0.5)
    data = problem.generate(21, 3, np.random.default_rng(7))
    k = signal_rows(21, 0.5)
    c = data.meta["padding"]
    assert data.meta["k"] == k == 11
    assert np.all(data.X[:k] == data.meta["d0"])
    assert np.all(data.X[k:k + 5] == c) and np.all(data.X[k + 5:] == -c)
    assert np.allclose(np.linalg.norm(data.X, axis=1), 0.3)
    # a majority at d0 makes the kink bind: θ* = d0 exactly, certified by the kink subgradient
    assert np.array_equal(problem.solve(data).theta, data.meta["d0"])


@pytest.mark.parametrize("quad", [0.0, 0.7])
def test_median_solver_large_instance(quad: float) -> None:
    """n = 2000, p = 20, a duplicated location that does not bind: gap ≤ 1e-9, better than SLSQP."""
    gen = np.random.default_rng(8)
    X = 0.6 * gen.standard_normal((2000, 20)) / math.sqrt(20)
    X[:100] = X[0]
    sol = solve_median(X, 1.0, quad=quad)
    assert sol.gap <= GAP
    w = np.full(2000, 1 / 2000)
    f = lambda th: median_objective(th, X, w, quad, np.zeros(20))  # noqa: E731
    ref = minimize(f, X.mean(axis=0), method="BFGS", options={"gtol": 1e-10})
    assert sol.value <= ref.fun + 1e-12
    assert sol.value == pytest.approx(f(sol.theta), abs=1e-14)


def test_median_solver_binding_ball_and_kinks() -> None:
    gen = np.random.default_rng(9)
    # the data lie outside the ball: the constraint binds, θ̂ on the sphere
    X = 0.3 * gen.standard_normal((400, 5)) + 2.0
    sol = solve_median(X, 1.0)
    assert sol.gap <= GAP and np.linalg.norm(sol.theta) == pytest.approx(1.0)
    cons = [{"type": "ineq", "fun": lambda th: 1.0 - th @ th}]
    w = np.full(400, 1 / 400)
    f = lambda th: median_objective(th, X, w, 0.0, np.zeros(5))  # noqa: E731
    ref = minimize(f, np.zeros(5), method="SLSQP", constraints=cons, options={"ftol": 1e-14})
    assert sol.value <= ref.fun + 1e-12
    # a heavy duplicated point is the exact optimum (gap 0 from the kink subgradient)
    Y = 0.5 * gen.standard_normal((300, 3))
    Y[:120] = [0.2, -0.1, 0.3]
    sol = solve_median(Y, 1.0, quad=0.3, center=np.array([0.1, 0.0, 0.0]))
    assert sol.method.startswith("kink") and np.array_equal(sol.theta, Y[0])
    assert sol.gap < 1e-14


def test_median_solver_dense_grid_2d() -> None:
    """In 2-D, a dense grid over the ball never beats the certified value by more than the gap."""
    gen = np.random.default_rng(10)
    X = np.clip(0.4 * gen.standard_normal((60, 2)), -0.9, 0.9)
    X[:8] = X[0]
    sol = solve_median(X, 1.0, quad=0.2)
    g = np.linspace(-1, 1, 301)
    pts = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    pts = pts[np.linalg.norm(pts, axis=1) <= 1.0]
    vals = np.linalg.norm(pts[:, None, :] - X[None], axis=2).mean(axis=1) + 0.1 * (pts**2).sum(1)
    assert sol.value <= vals.min() + 1e-12
    assert sol.gap <= GAP


def test_hub_1d_data_sets_and_huber_facts() -> None:
    """D1: θ* = −1 (erratum §7.3.4), slopes −2n/3 and +n/3, Huberized minimiser −1 + h/3 with
    excess n·h/9; D2: θ* = 1, slope −1/(16h) on (−1 + h, 1 − h) (docs/instances.md, HUB-1D)."""
    n, h = 300, 0.3
    d1 = Hub1D().generate(n, 1, np.random.default_rng(0))
    problem = Hub1D()
    opt = problem.solve(d1)
    assert opt.theta[0] == -1.0 and opt.gap == 0.0
    f = lambda t: problem.sum_loss(t, d1)  # noqa: E731
    assert (f(-1.5) - f(-1.0)) / -0.5 == pytest.approx(-2 * n / 3)
    assert (f(0.5) - f(-1.0)) / 1.5 == pytest.approx(n / 3)
    grid = np.linspace(-2, 2, 4001)
    assert opt.value * n <= min(f(t) for t in grid) + 1e-9

    def huber(z: np.ndarray) -> np.ndarray:  # BST14 Appendix D Huberisation: f̂ = z²/(4h) + z/2 + h/4 on [−h, h]
        return np.where(np.abs(z) > h, np.maximum(z, 0.0), z * z / (4 * h) + z / 2 + h / 4)

    smooth = lambda t: float(huber(d1.y - d1.X[:, 0] * t).sum())  # noqa: E731
    t_h = minimize_scalar(smooth, bounds=(-2, 2), method="bounded", options={"xatol": 1e-12}).x
    assert t_h == pytest.approx(-1 + h / 3, abs=1e-7)
    assert f(t_h) - f(-1.0) == pytest.approx(n * h / 9, rel=1e-6)

    h2 = 1 / 320  # 1/(32h) = 10 rows moved
    problem2 = Hub1D(dataset="D2", h=h2)
    d2 = problem2.generate(100, 1, np.random.default_rng(0))
    assert problem2.solve(d2).theta[0] == 1.0
    f2 = lambda t: problem2.sum_loss(t, d2)  # noqa: E731
    assert (f2(0.5) - f2(-0.5)) == pytest.approx(-1 / (16 * h2))
    with pytest.raises(NotApplicable):
        problem.generate(10, 2, np.random.default_rng(0))


# --------------------------------------------------------------------------------------------------
# exact samplers
# --------------------------------------------------------------------------------------------------
def ks_limit(m: int) -> float:
    return 1.63 / math.sqrt(m)


@pytest.mark.parametrize("p,a,b", [(5, 1000.0, 500.0), (5, 1.0, 10.0), (20, 5.0, 50.0),
                                   (1, 3.0, 0.0), (1, 0.0, 2.0), (1, 1e-3, 100.0),
                                   (10, 100.0, 0.0)])
def test_radius_sampler_ks(p: int, a: float, b: float) -> None:
    """Radius draws against the numerically integrated CDF (Gamma-dominated, Gaussian-dominated,
    mixed, p = 1 and b = 0 regimes)."""
    r = sample_radius(np.random.default_rng(11), p, a, b, 4000)
    assert stats.kstest(r, lambda x: radius_cdf(x, p, a, b)).statistic < ks_limit(4000)
    if b == 0:  # the Gamma law in closed form
        assert stats.kstest(r, stats.gamma(p, scale=1 / a).cdf).statistic < ks_limit(4000)
    # the wrong law is detected: drop the r^{p−1} factor
    if p > 1:
        assert stats.kstest(r, lambda x: radius_cdf(x, 1, a, b)).statistic > 0.1


def test_radial_in_region_rejects_outside() -> None:
    gen = np.random.default_rng(12)
    region = Intersection(Ball(1.0), BallAt(np.array([0.3, 0.0, 0.0]), 0.2))
    center = np.array([0.35, 0.05, 0.0])
    pts = np.array([sample_radial_in_region(gen, center, 10.0, 5.0, region) for _ in range(300)])
    assert np.all(region.contains(pts, tol=0.0))
    with pytest.raises(RuntimeError, match="no proposal"):
        sample_radial_in_region(gen, np.array([5.0, 0.0, 0.0]), 1e4, 0.0, Ball(1.0), max_tries=512)


def test_kink_sc_expmech_sampler_is_the_radial_law() -> None:
    problem = KinkSC()
    data = problem.generate(50, 3, np.random.default_rng(13))
    k = 1.0
    draw = exact_sampler("gibbs", problem, data, k, problem.constraint)
    assert draw is not None
    gen = np.random.default_rng(14)
    pts = np.array([draw(gen) for _ in range(3000)])
    r = np.linalg.norm(pts - data.meta["d0"], axis=1)
    # a = kn = 50: the mass beyond ‖θ‖ = 1 (r > 0.7) is < 1e-10, so C does not truncate
    assert stats.kstest(r, lambda x: radius_cdf(x, 3, 50.0, 25.0)).statistic < ks_limit(3000)
    assert np.all(problem.constraint.contains(pts))
    spread = KinkSC(signal=0.5).generate(50, 3, gen)
    assert exact_sampler("gibbs", problem, spread, k, Ball(1.0)) is None


def test_piecewise_sampler_against_exact_and_integrated_cdf() -> None:
    law = PiecewiseExponential([-2.0, -1.0, 0.5, 2.0], [5.0, 0.0, 3.0, -1.0], 4.0)
    x = law.sample(np.random.default_rng(15), 5000)
    assert stats.kstest(x, law.cdf).statistic < ks_limit(5000)
    for q in (-1.5, -0.3, 1.0, 1.9):
        ref = integrate.quad(lambda t: math.exp(float(law.logpdf(t))), -2, q, points=[-1, 0.5],
                             epsabs=0, epsrel=1e-12)[0]
        assert float(law.cdf(q)) == pytest.approx(ref, rel=1e-9)
    # extreme exponents (sum losses in the thousands) stay finite and exact
    steep = PiecewiseExponential([-2.0, -1.0, 2.0], [3000.0, 0.0, 1500.0], 1.0)
    y = steep.sample(np.random.default_rng(16), 5000)
    assert np.all(np.isfinite(y)) and np.all((y >= -2) & (y <= 2))
    assert stats.kstest(y, steep.cdf).statistic < ks_limit(5000)
    flat = PiecewiseExponential([0.0, 1.0], [2.0, 2.0], 3.0)
    assert stats.kstest(flat.sample(np.random.default_rng(17), 3000), "uniform").statistic < ks_limit(3000)


def test_hub_1d_expmech_sampler_on_a_localised_interval() -> None:
    problem = Hub1D()
    data = problem.generate(30, 1, np.random.default_rng(0))
    region = Intersection(Ball(2.0), BallAt(np.array([-0.5]), 1.0))
    assert interval_of(region) == (-1.5, 0.5)
    k = 0.2
    draw = exact_sampler("gibbs", problem, data, k, region)
    assert draw is not None
    law = piecewise_from_function(lambda t: problem.sum_loss(t, data), [-1.0, 7.0], -1.5, 0.5, k)
    assert law.t.tolist() == [-1.5, -1.0, 0.5]  # kinks outside the interval are dropped
    x = law.sample(np.random.default_rng(18), 4000)
    gen = np.random.default_rng(19)
    y = np.array([draw(gen)[0] for _ in range(2000)])
    assert np.all((y >= -1.5) & (y <= 0.5))
    grid = np.linspace(-1.5, 0.5, 20001)  # independent reference: trapezoid-integrated density
    dens = np.exp(-k * np.array([problem.sum_loss(t, data) for t in grid]))
    cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
    ref = lambda q: np.interp(q, grid, cdf / cdf[-1])  # noqa: E731
    assert stats.kstest(y, ref).statistic < ks_limit(2000)
    assert stats.kstest(x, ref).statistic < ks_limit(4000)


def test_linear_ridge_expmech_sampler_is_the_gaussian() -> None:
    """Σℓ = (nΔ/2)‖θ − q/Δ‖² + const: with kn large the draws are N(q/Δ, I/(knΔ)) inside C, so
    n·Δ·k·‖θ − q/Δ‖² is χ²_p (KS against the exact χ² CDF, 2000 draws)."""
    problem = LinearRidge(ridge=0.5)
    data = problem.generate(400, 4, np.random.default_rng(24))
    k = 2.0
    draw = exact_sampler("gibbs", problem, data, k, problem.constraint)
    assert draw is not None
    gen = np.random.default_rng(25)
    center = data.X.mean(axis=0) / 0.5
    pts = np.array([draw(gen) for _ in range(2000)])
    stat = k * 400 * 0.5 * np.sum((pts - center) ** 2, axis=1)
    assert stats.kstest(stat, stats.chi2(4).cdf).statistic < ks_limit(2000)


# --------------------------------------------------------------------------------------------------
# population excess
# --------------------------------------------------------------------------------------------------
def test_median_population_excess() -> None:
    problem = EuclideanMedian(population_sample=2000, ridge=0.2)
    p = 3
    opt = median_population_optimum(problem, p)
    assert opt.gap <= GAP
    assert median_population_sample(problem, p) is median_population_sample(
        EuclideanMedian(**problem.get_params()), p)
    assert problem.population_excess(opt.theta, p) == pytest.approx(0.0, abs=1e-15)
    gen = np.random.default_rng(20)
    for theta in in_ball(p, 1.0, gen, 20):
        assert problem.population_excess(theta, p) >= -GAP
    assert problem.population_excess(np.array([-0.5, 0.0, 0.0]), p) > 1e-2


def test_linear_ridge_population_excess_closed_form() -> None:
    problem = LinearRidge(ridge=0.5, mean_norm=0.2)
    p = 5
    mu = problem.mean(p)
    theta_pop = mu / 0.5
    assert problem.population_excess(theta_pop, p) == 0.0
    gen = np.random.default_rng(21)
    for theta in in_ball(p, 1.0, gen, 20):
        ex = problem.population_excess(theta, p)
        assert ex >= 0.0 and ex == pytest.approx(0.25 * float((theta - theta_pop) @ (theta - theta_pop)))
    # the generator's law has mean μ (5 standard errors per coordinate)
    big = problem.generate(200_000, p, gen)
    assert np.all(np.abs(big.X.mean(axis=0) - mu) < 5 / math.sqrt(p * 200_000))
    assert np.allclose(np.linalg.norm(big.X[:10], axis=1), 1.0)
    # the empirical optimum converges to the population one
    assert problem.population_excess(problem.solve(big).theta, p) < 1e-4


# --------------------------------------------------------------------------------------------------
# fingerprinting hard data (docs/instances.md, "Hard data")
# --------------------------------------------------------------------------------------------------
def test_packing_default_is_unchanged() -> None:
    """The packing kind draws exactly what it always drew: codeword signs, padding signs."""
    n, p, norm = 11, 6, 0.7
    data = hard_data(n, p, np.random.default_rng(22), norm=norm, signal=0.5)
    again = hard_data(n, p, np.random.default_rng(22), norm=norm, signal=0.5, data="packing")
    assert np.array_equal(data.X, again.X)
    gen = np.random.default_rng(22)
    codeword = (2.0 * gen.integers(0, 2, size=p) - 1.0) * (norm / math.sqrt(p))
    padding = (2.0 * gen.integers(0, 2, size=p) - 1.0) * (norm / math.sqrt(p))
    k = signal_rows(n, 0.5)
    expected = np.concatenate([np.tile(codeword, (k, 1)), np.tile(padding, (3, 1)),
                               np.tile(-padding, (2, 1))])
    assert data.X.tobytes() == expected.tobytes()
    assert data.meta()["M"] == pytest.approx(np.linalg.norm(k * codeword + padding))


def test_fingerprinting_data() -> None:
    n, p, norm = 400, 300, 1.0
    data = hard_data(n, p, np.random.default_rng(23), norm=norm, signal=0.5, data="fingerprinting")
    k = data.k
    assert k == 200
    assert np.allclose(np.abs(data.X), norm / math.sqrt(p))
    assert np.all(data.X[k:k + 100] == data.padding) and np.all(data.X[k + 100:] == -data.padding)
    assert data.meta()["M"] == pytest.approx(np.linalg.norm(data.X.sum(axis=0)), abs=1e-9)
    # the column means follow the biases: E row = codeword = (2b − 1)·norm/√p
    se = norm / math.sqrt(p) / math.sqrt(k)
    assert np.mean(np.abs(data.X[:k].mean(axis=0) - data.codeword) < 3.3 * se) > 0.99
    # the biases are arcsine-distributed on [t, 1 − t], t = 1/(10k)
    b = (data.codeword * math.sqrt(p) / norm + 1.0) / 2.0
    t = 1 / (10 * k)
    lo = math.asin(math.sqrt(t))
    assert np.all((b >= t - 1e-12) & (b <= 1 - t + 1e-12))
    arcsine = lambda x: (np.arcsin(np.sqrt(np.clip(x, t, 1 - t))) - lo) / (math.pi / 2 - 2 * lo)  # noqa: E731
    assert stats.kstest(b, arcsine).statistic < ks_limit(p)
    lb = get_problem("lb_lin")(data="fingerprinting", signal=0.5)
    gen_data = lb.generate(n, p, np.random.default_rng(23))
    assert np.array_equal(gen_data.X, data.X)
    assert lb.solve(gen_data).gap == 0.0
