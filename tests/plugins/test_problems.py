"""Tests of the problem plugins (LB-Lin, LB-Quad, hinge SVM, logistic) and the certified solvers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from dpbench.core.errors import UserInputError
from dpbench.core.problem import Dataset, Optimum, Problem
from dpbench.core.registry import available, get_problem
from dpbench.numerics.solvers.ball import (
    SoftplusMargin,
    hinge_dual,
    hinge_primal,
    project_ball,
    solve_hinge_ball,
    solve_smooth_ball,
)
from dpbench.problems._hard_data import hard_data, signal_rows
from dpbench.problems._linear_law import draw_linear_law, population_optimum, population_sample
from dpbench.problems.hinge_svm import HingeSVM
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.problems.logistic import Logistic
from dpbench.testing import check_nonsmooth_active, kink_activity

GAP_TARGET = 1e-8

PROBLEMS: list[Problem] = [
    LBLin(),
    LBLin(radius=0.5, signal=0.3),
    LBQuad(),
    LBQuad(radius=2.0, data_norm=0.5, signal=0.5),
    HingeSVM(),
    HingeSVM(radius=3.0, ridge=0.1, x_norm=2.0),
    Logistic(),
    Logistic(radius=3.0, ridge=0.1, x_norm=2.0, label_noise=0.0),
]
IDS = [repr(p) for p in PROBLEMS]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def random_in_ball(p: int, radius: float, gen: np.random.Generator, m: int = 1) -> np.ndarray:
    """m points uniform in the ball of the given radius."""
    g = gen.standard_normal((m, p))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return g * (radius * gen.random((m, 1)) ** (1.0 / p))


def sphere_point(direction: np.ndarray, radius: float) -> np.ndarray:
    return direction * (radius / np.linalg.norm(direction))


# --------------------------------------------------------------------------------------------------
# (a) gradients and declared constants
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_grad_matches_finite_differences(problem: Problem) -> None:
    gen = rng(1)
    data = problem.generate(40, 6, gen)
    radius = problem.constraint.radius  # type: ignore[attr-defined]
    h = 1e-6
    for theta in random_in_ball(6, radius, gen, m=5):
        if data.y is not None:  # stay away from the hinge kink
            margins = data.y * (data.X @ theta)
            keep = np.abs(1.0 - margins) > 1e-3
        else:
            keep = np.ones(data.n, dtype=bool)
        G = problem.grad(theta, data)
        assert G.shape == (data.n, 6)
        fd = np.empty_like(G)
        for j in range(6):
            e = np.zeros(6)
            e[j] = h
            fd[:, j] = (problem.loss(theta + e, data) - problem.loss(theta - e, data)) / (2 * h)
        np.testing.assert_allclose(G[keep], fd[keep], atol=1e-6, rtol=1e-6)
        np.testing.assert_allclose(problem.full_grad(theta, data), G.mean(axis=0), atol=1e-15)


@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_grad_indexing_and_shapes(problem: Problem) -> None:
    data = problem.generate(30, 4, rng(2))
    theta = random_in_ball(4, 0.5, rng(3))[0]
    full = problem.grad(theta, data)
    idx = np.array([3, 0, 3, 29])
    np.testing.assert_array_equal(problem.grad(theta, data, idx), full[idx])
    np.testing.assert_array_equal(problem.grad(theta, data, np.array([7])), full[[7]])
    np.testing.assert_array_equal(problem.grad(theta, data, 7), full[[7]])
    assert problem.loss(theta, data).shape == (30,)
    assert math.isclose(problem.risk(theta, data), float(problem.loss(theta, data).mean()))


def _adversarial_thetas(problem: Problem, data: Dataset) -> np.ndarray:
    """For each row, the point of the sphere that maximises that row's gradient norm."""
    radius = problem.constraint.radius  # type: ignore[attr-defined]
    if data.y is None:  # LB-Lin / LB-Quad: θ = −R d/‖d‖ maximises ‖θ − d‖
        return np.array([sphere_point(-x, radius) for x in data.X])
    # margin losses: θ = −R y x/‖x‖ makes φ' = −1 and ridge·θ aligned with −y x
    return np.array([sphere_point(-y * x, radius) for x, y in zip(data.X, data.y)])


@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_gradient_norms_bounded_by_declared_lipschitz(problem: Problem) -> None:
    gen = rng(4)
    L = problem.lipschitz
    radius = problem.constraint.radius  # type: ignore[attr-defined]
    for p in (1, 3, 17):
        data = problem.generate(25, p, gen)
        thetas = np.vstack([random_in_ball(p, radius, gen, m=20), _adversarial_thetas(problem, data),
                            -_adversarial_thetas(problem, data)])
        worst = 0.0
        for theta in thetas:
            assert problem.constraint.contains(theta)
            worst = max(worst, float(np.linalg.norm(problem.grad(theta, data), axis=1).max()))
        assert worst <= L * (1 + 1e-12)
    # the adversarial points attain the bound for the non-logistic losses (it is tight)
    if not isinstance(problem, (Logistic, LBLin)):
        assert worst >= L * (1 - 1e-9)


def test_declared_constants() -> None:
    assert LBLin(radius=0.5).constants() == {"L": 1.0, "D": 1.0, "Delta": 0.0, "beta": 0.0,
                                             "data_norm": 1.0}
    assert LBQuad().constants() == {"L": 2.0, "D": 2.0, "Delta": 1.0, "beta": 1.0,
                                    "data_norm": 1.0}
    hinge = HingeSVM(radius=2.0, x_norm=3.0, ridge=0.5)
    assert hinge.constants() == {"L": 4.0, "D": 4.0, "Delta": 0.5, "beta": math.inf,
                                 "data_norm": 3.0, "label_bound": 1.0}
    # defaults (version 2): R = 3 so that the kink y<θ, x> = 1 lies inside C; L = x_norm, D = 2R
    assert HingeSVM().constants() == {"L": 1.0, "D": 6.0, "Delta": 0.0, "beta": math.inf,
                                      "data_norm": 1.0, "label_bound": 1.0}
    assert HingeSVM(ridge=0.1).lipschitz == pytest.approx(1.0 + 0.1 * 3.0)
    assert HingeSVM.version == "2" and Logistic().radius == 1.0
    logistic = Logistic(radius=2.0, x_norm=3.0, ridge=0.5)
    assert logistic.constants() == {"L": 4.0, "D": 4.0, "Delta": 0.5, "beta": 9 / 4 + 0.5,
                                    "data_norm": 3.0, "label_bound": 1.0}
    assert hinge.has_population and logistic.has_population
    assert not LBLin.has_population and math.isnan(LBLin().population_excess(np.zeros(3), 3))


def test_registry_maps_names() -> None:
    for name, cls in [("lb_lin", LBLin), ("lb_quad", LBQuad), ("hinge_svm", HingeSVM),
                      ("logistic", Logistic)]:
        assert get_problem(name) is cls and cls.name == name


# --------------------------------------------------------------------------------------------------
# (b) certified solvers
# --------------------------------------------------------------------------------------------------
def _check_certificate(fun, opt: Optimum, radius: float, gen: np.random.Generator) -> None:
    """θ feasible, gap small, and no random feasible point or local perturbation beats value − gap."""
    p = opt.theta.size
    assert np.linalg.norm(opt.theta) <= radius
    assert 0.0 <= opt.gap <= GAP_TARGET
    assert math.isclose(fun(opt.theta), opt.value, rel_tol=1e-12, abs_tol=1e-14)
    floor = opt.value - opt.gap - 1e-14
    for theta in random_in_ball(p, radius, gen, m=200):
        assert fun(theta) >= floor
    for scale in (1e-2, 1e-4, 1e-6):
        for direction in gen.standard_normal((20, p)):
            theta = project_ball(opt.theta + scale * direction, radius)
            assert fun(theta) >= floor


def _slsqp_reference(fun, p: int, radius: float, x0: np.ndarray) -> float:
    res = minimize(fun, x0, method="SLSQP", options={"ftol": 1e-12, "maxiter": 500},
                   constraints=[{"type": "ineq", "fun": lambda t: radius**2 - t @ t,
                                 "jac": lambda t: -2 * t}])
    return float(fun(project_ball(res.x, radius)))


@pytest.mark.parametrize("radius,noise,ridge,where", [
    (0.5, 0.1, 0.0, "boundary"),
    (20.0, 0.3, 0.0, "interior"),
    (4.0, 0.0, 0.0, "separable"),
    (4.0, 0.1, 0.05, "ridge"),
])
def test_solve_smooth_ball_logistic(radius: float, noise: float, ridge: float, where: str) -> None:
    gen = rng(5)
    data = draw_linear_law(60, 4, gen, 1.0, noise)
    obj = SoftplusMargin(data.y[:, None] * data.X, ridge=ridge)
    opt = solve_smooth_ball(obj.risk, obj.grad, obj.hess, 4, radius)
    _check_certificate(obj.risk, opt, radius, gen)
    norm = np.linalg.norm(opt.theta)
    if where in ("boundary", "separable"):
        assert norm == pytest.approx(radius, rel=1e-9)
    if where == "interior":
        assert norm < radius * 0.9
    reference = _slsqp_reference(obj.risk, 4, radius, np.zeros(4))
    assert opt.value <= reference + 1e-9  # never worse than a generic solver
    assert opt.value >= reference - 1e-5  # and they agree (SLSQP is loose)


def test_solve_smooth_ball_separable_large_n() -> None:
    """Separable data: no unconstrained minimiser; the solver must still certify on the sphere."""
    problem = Logistic(radius=10.0, label_noise=0.0)
    data = problem.generate(500, 8, rng(6))
    opt = problem.solve(data)
    assert opt.gap <= GAP_TARGET
    assert np.linalg.norm(opt.theta) == pytest.approx(10.0, rel=1e-9)
    # the optimum points roughly along w* = e1
    assert opt.theta[0] / np.linalg.norm(opt.theta) > 0.8


def test_solve_smooth_ball_quadratic_matches_closed_form() -> None:
    """F(θ) = ½‖θ − c‖²: the minimiser over the ball is Π(c), interior or not."""
    for c in (np.array([0.3, -0.2, 0.1]), np.array([3.0, 4.0, 0.0])):
        opt = solve_smooth_ball(lambda t: 0.5 * float((t - c) @ (t - c)), lambda t: t - c,
                                lambda t: np.eye(3), 3, 1.0)
        np.testing.assert_allclose(opt.theta, project_ball(c, 1.0), atol=1e-10)
        assert opt.gap <= 1e-12


HINGE_CASES = [
    (1.0, 0.0, "linear"),        # R·‖x‖ ≤ 1: every margin < 1, the objective is linear on C
    (4.0, 0.0, "boundary"),
    (60.0, 0.0, "interior"),
    (4.0, 0.05, "ridge"),
    (60.0, 0.01, "ridge-interior"),
]


@pytest.mark.parametrize("radius,ridge,where", HINGE_CASES)
def test_solve_hinge_ball(radius: float, ridge: float, where: str) -> None:
    gen = rng(7)
    data = draw_linear_law(40, 3, gen, 1.0, 0.2)
    Z = data.y[:, None] * data.X

    def fun(t: np.ndarray) -> float:
        return hinge_primal(Z, t, ridge)

    opt = solve_hinge_ball(data.X, data.y, radius, ridge=ridge)
    _check_certificate(fun, opt, radius, gen)
    if where == "interior":
        assert np.linalg.norm(opt.theta) < radius
    # brute-force reference: the epigraph form (θ, ξ) is smooth, so SLSQP applies
    n = Z.shape[0]
    x0 = np.concatenate([np.zeros(3), np.ones(n)])
    res = minimize(lambda v: v[3:].mean() + 0.5 * ridge * v[:3] @ v[:3], x0, method="SLSQP",
                   options={"ftol": 1e-12, "maxiter": 1000},
                   constraints=[{"type": "ineq", "fun": lambda v: v[3:] - 1 + Z @ v[:3]},
                                {"type": "ineq", "fun": lambda v: v[3:]},
                                {"type": "ineq", "fun": lambda v: radius**2 - v[:3] @ v[:3]}])
    reference = fun(project_ball(res.x[:3], radius))
    assert opt.value <= reference + 1e-9
    assert opt.value >= reference - 1e-5


@pytest.mark.parametrize("radius", [1.0, 3.0, 60.0])
def test_hinge_kelley_and_smoothing_agree(radius: float) -> None:
    data = draw_linear_law(80, 4, rng(8), 1.0, 0.1)
    a = solve_hinge_ball(data.X, data.y, radius, method="kelley")
    b = solve_hinge_ball(data.X, data.y, radius, method="smoothing")
    assert a.gap <= GAP_TARGET and b.gap <= GAP_TARGET
    assert abs(a.value - b.value) <= a.gap + b.gap


def test_hinge_method_validation() -> None:
    data = draw_linear_law(10, 2, rng(9), 1.0, 0.1)
    with pytest.raises(ValueError, match="ridge"):
        solve_hinge_ball(data.X, data.y, 1.0, ridge=0.1, method="kelley")
    with pytest.raises(ValueError, match="method"):
        solve_hinge_ball(data.X, data.y, 1.0, method="simplex")


def test_hinge_dual_is_a_lower_bound_for_any_alpha() -> None:
    gen = rng(10)
    data = draw_linear_law(30, 3, gen, 1.0, 0.2)
    Z = data.y[:, None] * data.X
    for ridge in (0.0, 0.3):
        opt = solve_hinge_ball(data.X, data.y, 2.0, ridge=ridge)
        for alpha in gen.random((50, 30)):
            assert hinge_dual(Z, alpha, 2.0, ridge) <= opt.value + 1e-12


def test_hinge_problem_solve_moderate_size() -> None:
    problem = HingeSVM(radius=5.0)
    data = problem.generate(1000, 10, rng(11))
    opt = problem.solve(data)
    assert opt.gap <= GAP_TARGET
    assert opt.value == pytest.approx(problem.risk(opt.theta, data), abs=1e-12)


# --------------------------------------------------------------------------------------------------
# (c) LB-Lin closed form and the hard data
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,signal", [(10, 1.0), (11, 0.3), (12, 0.5), (50, 0.0), (50, 0.001)])
def test_hard_data_structure(n: int, signal: float) -> None:
    p = 8
    data = hard_data(n, p, rng(12), norm=0.7, signal=signal)
    k = signal_rows(n, signal)
    assert data.k == k
    if signal > 0:
        assert k >= 1
    assert k == (0 if signal == 0 else max(1, math.floor(signal * n + 0.5)))
    np.testing.assert_allclose(np.abs(data.X), 0.7 / math.sqrt(p))
    np.testing.assert_array_equal(data.X[:k], np.broadcast_to(data.codeword, (k, p)))
    pad = data.X[k:]
    plus = np.all(pad == data.padding, axis=1).sum()
    minus = np.all(pad == -data.padding, axis=1).sum()
    assert plus == math.ceil((n - k) / 2) and minus == (n - k) // 2
    leftover = data.padding if (n - k) % 2 else np.zeros(p)
    np.testing.assert_allclose(pad.sum(axis=0), leftover, atol=1e-12)
    np.testing.assert_allclose(data.meta()["M"], np.linalg.norm(k * data.codeword + leftover))


def test_lb_lin_signal_one_has_M_equal_n_and_closed_form() -> None:
    problem = LBLin(radius=0.5)
    data = problem.generate(64, 9, rng(13))
    s = data.X.sum(axis=0)
    assert data.meta["M"] == pytest.approx(64.0) == pytest.approx(np.linalg.norm(s))
    opt = problem.solve(data)
    np.testing.assert_allclose(opt.theta, 0.5 * s / np.linalg.norm(s))
    assert opt.gap == 0.0 and opt.method == "closed form"
    assert opt.value == pytest.approx(-0.5 * 64 / 64)
    _check_certificate(lambda t: problem.risk(t, data), opt, 0.5, rng(14))


def test_lb_lin_zero_sum_returns_origin() -> None:
    problem = LBLin(signal=0.0)
    data = problem.generate(10, 4, rng(15))
    np.testing.assert_allclose(data.X.sum(axis=0), 0.0)
    opt = problem.solve(data)
    np.testing.assert_array_equal(opt.theta, np.zeros(4))
    assert opt.value == 0.0


def test_lb_quad_closed_form() -> None:
    problem = LBQuad(radius=1.0, data_norm=1.0, signal=0.4)
    data = problem.generate(33, 5, rng(16))
    opt = problem.solve(data)
    np.testing.assert_allclose(opt.theta, data.X.mean(axis=0))
    _check_certificate(lambda t: problem.risk(t, data), opt, 1.0, rng(17))
    # excess = ½‖θ − q‖² on the average scale (BST14 eq. 7 divided by n)
    theta = random_in_ball(5, 1.0, rng(18))[0]
    excess = problem.risk(theta, data) - opt.value
    assert excess == pytest.approx(0.5 * np.sum((theta - opt.theta) ** 2), abs=1e-12)


# --------------------------------------------------------------------------------------------------
# (d) determinism, (e) parameter validation
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_same_seed_same_data(problem: Problem) -> None:
    a = problem.generate(20, 5, np.random.default_rng(123))
    b = problem.generate(20, 5, np.random.default_rng(123))
    c = problem.generate(20, 5, np.random.default_rng(124))
    np.testing.assert_array_equal(a.X, b.X)
    if a.y is not None:
        np.testing.assert_array_equal(a.y, b.y)
    assert not (np.array_equal(a.X, c.X) and (a.y is None or np.array_equal(a.y, c.y)))


def test_lb_quad_rejects_data_norm_above_radius() -> None:
    with pytest.raises(UserInputError) as info:
        LBQuad(radius=0.5, data_norm=1.0)
    assert "data_norm" in str(info.value) and "radius" in str(info.value)
    LBQuad(radius=0.5, data_norm=0.5)  # equality is allowed


@pytest.mark.parametrize("cls,kwargs", [
    (LBLin, {"signal": 1.5}), (LBLin, {"radius": 0.0}), (HingeSVM, {"label_noise": 0.5}),
    (Logistic, {"ridge": -1.0}), (HingeSVM, {"population_sample": 999}),
])
def test_param_validation(cls: type[Problem], kwargs: dict) -> None:
    with pytest.raises(UserInputError):
        cls(**kwargs)


def test_label_noise_flips_labels() -> None:
    clean = draw_linear_law(4000, 3, rng(19), 2.0, 0.0)
    np.testing.assert_array_equal(clean.y, np.where(clean.X[:, 0] >= 0, 1.0, -1.0))
    np.testing.assert_allclose(np.linalg.norm(clean.X, axis=1), 2.0)
    noisy = draw_linear_law(4000, 3, rng(19), 2.0, 0.2)
    flipped = np.mean(noisy.y != np.where(noisy.X[:, 0] >= 0, 1.0, -1.0))
    assert 0.17 < flipped < 0.23


# --------------------------------------------------------------------------------------------------
# (f) population excess
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("problem", [
    HingeSVM(radius=3.0, population_sample=3000),
    HingeSVM(radius=3.0, ridge=0.05, population_sample=3000),
    Logistic(radius=3.0, population_sample=3000),
], ids=lambda p: repr(p))
def test_population_excess(problem: Problem) -> None:
    p = 4
    optimum = population_optimum(problem, p)  # type: ignore[arg-type]
    assert optimum.gap <= GAP_TARGET
    assert population_sample(problem, p) is population_sample(type(problem)(**problem.get_params()), p)  # type: ignore[arg-type]
    assert problem.population_excess(optimum.theta, p) >= -GAP_TARGET
    gen = rng(20)
    for direction in gen.standard_normal((10, p)):
        near = project_ball(optimum.theta + 1e-6 * direction, 3.0)
        assert problem.population_excess(near, p) >= -GAP_TARGET
    assert problem.population_excess(np.zeros(p), p) > 1e-3
    assert problem.population_excess(-optimum.theta, p) > 1e-3
    # a fresh sample from the law agrees with the population estimate up to Monte Carlo error
    fresh = problem.generate(3000, p, rng(21))
    assert abs(problem.risk(optimum.theta, fresh) - optimum.value) < 0.1


# --------------------------------------------------------------------------------------------------
# (g) declared non-smoothness is active inside C (issue point 7)
# --------------------------------------------------------------------------------------------------
def _registered(smooth: bool) -> list[str]:
    return sorted(name for name, cls in available("problems").items()
                  if math.isfinite(cls().smoothness) == smooth)


NON_SMOOTH = _registered(smooth=False)


def test_non_smooth_registry_is_the_expected_set() -> None:
    """A new β = ∞ problem is picked up by the parametrised check below automatically."""
    assert {"hinge_svm", "hub_1d", "kink_sc", "median", "sep_abs"} <= set(NON_SMOOTH)


@pytest.mark.parametrize("name", NON_SMOOTH)
def test_non_smooth_problems_have_kinks_inside_C(name: str) -> None:
    """Every registered problem declaring β = ∞ has, at its defaults and for its own data law,
    kinks of ≥ 5% of the examples inside C (:func:`dpbench.testing.check_nonsmooth_active`).

    Not flaky: the data come from the engine's seeded stream (seed 0) and the chords from a
    generator seeded by (problem, params, n, p, seed), so the outcome is fixed. Measured
    fractions (n = 100, p = 3; hub_1d p = 1): hinge_svm 0.96, hub_1d 1, kink_sc 1, median 0.30
    (the duplicated rows at θ*), sep_abs 1 — and stable over seeds 0–4 and p ∈ {1, 2, 3, 10, 20}
    (hinge_svm ≥ 0.28 at p = 20), far above the 0.05 threshold."""
    check_nonsmooth_active(get_problem(name)())


def test_non_smooth_check_fails_on_the_old_hinge_defaults() -> None:
    """hinge_svm version 1 (R = x_norm = 1) is linear on the interior of C: every margin
    y<θ, x> ≤ ‖θ‖ < 1 there, so no kink is met and the check must fail (it is not vacuous).

    Deterministic (fixed seeds, as above), and not borderline: the count is exactly 0 for every
    seed and dimension, since the chords stay in the ball of radius 0.975."""
    old = HingeSVM(radius=1.0, x_norm=1.0)
    for p in (1, 3, 10):
        assert kink_activity(old, p=p).kinked == 0
    with pytest.raises(AssertionError, match="declares beta=inf"):
        check_nonsmooth_active(old)
    with pytest.raises(AssertionError, match="declares beta=inf"):
        check_nonsmooth_active(HingeSVM(radius=0.5, x_norm=2.0))  # R·‖x‖ = 1 again
    # a 1-median whose θ* sits between the data points (no duplicated rows) is smooth near θ*,
    # and its point kinks are never met by generic chords: it fails too
    with pytest.raises(AssertionError, match="declares beta=inf"):
        check_nonsmooth_active(get_problem("median")(duplicate=0.0))


@pytest.mark.parametrize("name", _registered(smooth=True))
def test_kink_detector_has_no_false_positives_on_smooth_problems(name: str) -> None:
    """On the registered problems with finite β the detector certifies no kink (and the check
    itself is a no-op for them): a smooth gradient's jump shrinks under bisection."""
    problem = get_problem(name)()
    assert kink_activity(problem).kinked == 0
    check_nonsmooth_active(problem)


@pytest.mark.parametrize("p", [5, 10, 20])
def test_hinge_default_optimum_straddles_the_kink(p: int) -> None:
    """At the default R = 3 the certified θ* has examples strictly on both sides of margin 1
    (measured: ≈ 46% / 28% / 12% beyond it for p = 5 / 10 / 20), so the hinge's kink binds at the
    optimum, not only somewhere in C; the certificate still holds (gap ≤ 1e-8)."""
    problem = HingeSVM()
    data = problem.generate(1000, p, rng(30 + p))
    opt = problem.solve(data)
    assert opt.gap <= GAP_TARGET
    margins = data.y * (data.X @ opt.theta)
    assert np.mean(margins > 1 + 1e-9) >= 0.05
    assert np.mean(margins < 1 - 1e-9) >= 0.05


# --------------------------------------------------------------------------------------------------
# (h) public constants: the data bounds an outside mechanism calibrates with (issue 18)
# --------------------------------------------------------------------------------------------------
def _shipped() -> list[str]:
    """The problems dpbench ships (registered third-party plugins are checked by the harness)."""
    return sorted(name for name, cls in available("problems").items()
                  if cls.__module__.startswith("dpbench.problems."))


#: The data bounds of every shipped problem at its defaults (docs/plugins.md, 'Public constants').
DEFAULT_BOUNDS: dict[str, dict[str, float]] = {
    "flat_1d": {"data_norm": 1.0},
    "hinge_svm": {"data_norm": 1.0, "label_bound": 1.0},
    "hub_1d": {"data_norm": 1.0, "label_bound": 1.0},
    "kink_sc": {"data_norm": 0.3},
    "lasso": {"data_norm": 1.0, "label_bound": 1.0},
    "lasso_linf": {"data_norm": 32.0, "label_bound": 1.0, "data_norm_inf": 1.0},
    "lb_lin": {"data_norm": 1.0},
    "lb_quad": {"data_norm": 1.0},
    "lin_ball": {"data_norm": 1.0},
    "lin_cube": {"data_norm": 1.0},
    "linear_ridge": {"data_norm": 1.0},
    "logistic": {"data_norm": 1.0, "label_bound": 1.0},
    "mean_est": {"data_norm": 0.75},
    "median": {"data_norm": 1.0},
    "real_hinge": {"data_norm": 1.0, "label_bound": 1.0},
    "real_least_squares": {"data_norm": 1.0, "label_bound": 1.0},
    "real_logistic": {"data_norm": 1.0, "label_bound": 1.0},
    "sep_abs": {"data_norm": math.inf},         # Gaussian data: documented as unbounded
}


def test_every_shipped_problem_declares_its_bounds() -> None:
    assert sorted(DEFAULT_BOUNDS) == _shipped(), "a new shipped problem needs its data bounds"


@pytest.mark.parametrize("name", sorted(DEFAULT_BOUNDS))
def test_public_constants_of_shipped_problems(name: str) -> None:
    from dpbench.core.problem import CORE_CONSTANTS, DATA_BOUNDS, NORM_CONSTANTS
    from dpbench.testing import check_problem_bounds

    problem = get_problem(name)()
    consts = problem.constants()
    props = problem.properties()
    # the core keys first and unchanged, then exactly the documented bounds, then the declared
    # ℓ1/ℓ∞ constants
    assert list(consts)[:4] == list(CORE_CONSTANTS)
    assert {k: consts[k] for k in CORE_CONSTANTS} == {k: props[k] for k in CORE_CONSTANTS}
    assert {k: v for k, v in consts.items() if k in NORM_CONSTANTS} == problem.norm_constants()
    bounds = {k: v for k, v in consts.items()
              if k not in CORE_CONSTANTS and k not in NORM_CONSTANTS}
    assert bounds == DEFAULT_BOUNDS[name] and set(bounds) <= set(DATA_BOUNDS)
    for key, value in bounds.items():
        assert value > 0 and (math.isfinite(value) or (name, key) == ("sep_abs", "data_norm"))
    # a bound on labels is declared exactly by the problems that generate labels
    dim = problem.dimension or (1 if name in ("flat_1d", "hub_1d") else 3)  # a data set's own p
    labelled = problem.generate(4, dim, np.random.default_rng(0)).y is not None
    assert ("label_bound" in bounds) == labelled
    check_problem_bounds(problem)


@pytest.mark.parametrize("problem, expected", [
    (LBQuad(radius=2.0, data_norm=0.5), {"data_norm": 0.5}),
    (Logistic(radius=3.0, x_norm=2.5, ridge=0.1), {"data_norm": 2.5, "label_bound": 1.0}),
    (HingeSVM(x_norm=0.4), {"data_norm": 0.4, "label_bound": 1.0}),
    (get_problem("mean_est")(radius=2.0, mean_norm=0.5, spread=1.0), {"data_norm": 1.5}),
    (get_problem("lin_ball")(scale=3.0, hard_sco=True), {"data_norm": 3.0}),
    (get_problem("linear_ridge")(data_norm=2.0, mean_norm=0.5), {"data_norm": 2.0}),
    (get_problem("kink_sc")(radius=1.0, d0_norm=0.8, signal=0.5), {"data_norm": 0.8}),
    (get_problem("median")(radius=2.0, data_radius=0.5, center_norm=0.25, noise=2.0),
     {"data_norm": 0.5}),
], ids=lambda v: getattr(v, "name", ""))
def test_bounds_follow_the_parameters_and_hold_on_generated_data(
        problem: Problem, expected: dict[str, float]) -> None:
    """Non-default parameters (the median's noise pushes most rows onto its projection radius):
    the bound moves with them and every generated row (several n, p, seeds) respects it."""
    from dpbench.testing import check_problem_bounds

    assert {k: v for k, v in problem.constants().items() if k in expected} == expected
    check_problem_bounds(problem)
    for n, p, seed in ((3, 1, 0), (500, 7, 1), (64, 40, 2)):
        data = problem.generate(n, p, np.random.default_rng(seed))
        assert np.linalg.norm(data.X, axis=1).max() <= expected["data_norm"] * (1 + 1e-12)


def test_the_constants_table_of_the_docs_lists_every_bound() -> None:
    """docs/plugins.md's table names, for each data bound, exactly the shipped problems that
    declare it."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text(encoding="utf-8")
    shipped = set(_shipped())
    for key in ("data_norm", "label_bound"):
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{key}` |"))
        named = set(row.split("`")[1::2]) & shipped
        assert named == {n for n, b in DEFAULT_BOUNDS.items() if key in b}, key


def test_a_rate_card_may_refer_to_the_data_bounds() -> None:
    """Rate cards read names from ``constants()``: the data bounds are usable there too; a
    problem that does not declare a bound the card names gets no curve (KeyError, which the
    analysis turns into a missing prediction)."""
    from dpbench.core.ratecard import RateCard

    card = RateCard(expression="data_norm*L/(n*epsilon)", exponents={"n": -1, "epsilon": -1},
                    citation="test")
    quad = LBQuad(radius=1.0, data_norm=0.5)
    assert card.bound(**quad.constants(), n=10, epsilon=2.0) == pytest.approx(0.5 * 1.5 / 20)
    bare = {k: v for k, v in quad.constants().items() if k != "data_norm"}
    with pytest.raises(KeyError, match="data_norm"):
        card.bound(**bare, n=10, epsilon=2.0)
