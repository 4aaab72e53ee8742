"""Canaries, the batch runner and the broken zoo (dpbench.core.neighbours / audit.runs / zoo).

Detection tests run each zoo member at its designated audit point (dpbench.audit.zoo.DESIGNATED)
through the audit's own procedure, in process (:func:`dpbench.audit.engine.audit_in_process`:
pilot runs choose the events, confirmation runs count them), with pinned run counts and a fixed
root seed, at the per-point level of a 100-point run (α = 0.05/100); the correct shipped
counterpart at the same point and budget must not be flagged (false alarm ≤ α per point). The
budgets are those at which reports/audit_power.md shows detection in every seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench.audit.engine import audit_in_process, make_point
from dpbench.audit.procedure import Work
from dpbench.audit.runs import run_pilot
from dpbench.audit.stats import per_audit_alpha
from dpbench.audit.zoo import BROKEN, DESIGNATED
from dpbench.core.errors import NotApplicable, UserInputError
from dpbench.core.neighbours import (
    CANARIES,
    NeighbourPair,
    canary_not_applicable_reason,
    extreme_record,
    neighbouring_pair,
)
from dpbench.core.registry import available, get_algorithm, get_problem

ALPHA = per_audit_alpha(0.05, 100)


@pytest.mark.parametrize("problem", ["lb_lin", "lb_quad", "logistic", "mean_est"])
@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_pairs_differ_in_exactly_one_row(problem: str, n: int) -> None:
    prob = get_problem(problem)()
    for canary in CANARIES:
        try:
            pair = neighbouring_pair(prob, n, 2, canary, np.random.default_rng(n))
        except NotApplicable as exc:
            assert canary == "label_flip" and "labelled" in str(exc), (canary, str(exc))
            continue
        assert isinstance(pair, NeighbourPair) and pair.canary == canary
        assert pair.d0.X.shape == pair.d1.X.shape == (n, 2)
        diff_x = np.any(pair.d0.X != pair.d1.X, axis=1)
        diff_y = (np.zeros(n, bool) if pair.d0.y is None else pair.d0.y != pair.d1.y)
        assert int(np.sum(diff_x | diff_y)) == 1, canary
        assert np.linalg.norm(pair.direction) == pytest.approx(1.0)
        norms = np.linalg.norm(pair.d0.X, axis=1)
        if canary == "sphere":
            assert norms[0] == pytest.approx(norms.max())
        if canary == "outlier":
            assert norms[0] >= 100 * np.max(norms[1:])


def test_canary_errors_and_applicability() -> None:
    with pytest.raises(NotApplicable, match="label_flip.*labelled.*lb_lin"):
        neighbouring_pair(get_problem("lb_lin")(), 3, 2, "label_flip", np.random.default_rng(0))
    with pytest.raises(UserInputError, match="unknown kind 'sphear'.*did you mean 'sphere'"):
        neighbouring_pair(get_problem("lb_lin")(), 3, 2, "sphear", np.random.default_rng(0))
    with pytest.raises(UserInputError, match="unknown background 'void'.*empty"):
        neighbouring_pair(get_problem("lb_lin")(), 3, 2, "sphere+void", np.random.default_rng(0))
    with pytest.raises(UserInputError, match="n must be an integer >= 2"):
        neighbouring_pair(get_problem("lb_lin")(), 1, 2, "sphere", np.random.default_rng(0))
    outpert = get_algorithm("output_perturbation")()
    reason = canary_not_applicable_reason(outpert, "outlier")
    assert reason and "clips_gradients" in reason and "clips_records" in reason
    assert canary_not_applicable_reason(get_algorithm("noisy_sgd")(), "outlier") is None
    # a point keeps only the canaries that apply (outlier is left out for output perturbation)
    pt = make_point(outpert, get_problem("lb_quad")(), n=3, p=1, epsilon=1.0, delta=0.0, runs=10)
    assert "outlier" not in {c.canary for c in pt.configs} and len(pt.configs) >= 3
    with pytest.raises(UserInputError, match="no canary applies"):
        make_point(outpert, get_problem("lb_quad")(), n=3, p=1, epsilon=1.0, delta=0.0,
                   canary="outlier", runs=10)


def test_backgrounds_and_directions() -> None:
    prob = get_problem("lb_quad")()
    empty = neighbouring_pair(prob, 4, 2, "sphere+empty", np.random.default_rng(1))
    assert np.array_equal(empty.d0.X[1:], np.zeros((3, 2)))
    assert np.array_equal(empty.d0.X[0], -empty.d1.X[0])
    twin = neighbouring_pair(prob, 4, 2, "sphere+twin", np.random.default_rng(1))
    assert np.array_equal(twin.d0.X[1:], np.repeat(twin.d1.X[:1], 3, axis=0))
    axis = neighbouring_pair(prob, 4, 2, "zero+empty@axis", np.random.default_rng(1))
    assert np.allclose(axis.d0.X[0], [1.0, 0.0]) and np.array_equal(axis.d1.X, np.zeros((4, 2)))


def test_box_universes_keep_both_canaries_inside() -> None:
    """A box that is not centred (features in [0, 1]^p, radius √p): D′'s canary is the opposite
    vertex, never a negation outside the universe; the zero canary is the origin (inside)."""
    from dpbench.core.universe import Universe

    class UnitBox(type(get_problem("lb_quad")())):  # type: ignore[misc]
        name = "unit_box_quad"

        def universe(self, p: int) -> Universe:
            return Universe(p, radius=math.sqrt(p), low=0.0, high=1.0)

    prob = UnitBox()
    for p in (1, 2, 3):
        uni = prob.universe(p)
        for canary in ("sphere", "sphere+empty@diagonal", "zero@diagonal", "sphere@axis"):
            pair = neighbouring_pair(prob, 4, p, canary, np.random.default_rng(p))
            assert uni.contains(pair.d0.X[0]) and uni.contains(pair.d1.X[0]), (canary, p)
        with pytest.raises(NotApplicable, match="symmetric"):
            neighbouring_pair(prob, 4, p, "lower_bound", np.random.default_rng(p))


def test_label_flip_flips_only_the_label() -> None:
    pair = neighbouring_pair(get_problem("logistic")(), 5, 3, "label_flip",
                             np.random.default_rng(2))
    assert np.array_equal(pair.d0.X, pair.d1.X)
    assert pair.d0.y[0] == 1.0 and pair.d1.y[0] == -1.0
    assert np.array_equal(pair.d0.y[1:], pair.d1.y[1:])


def test_zero_canary_replaces_the_canary_by_the_zero_record() -> None:
    """The ``zero`` pair changes the canary's Hessian φ''·xxᵀ, which negation and label flips
    leave unchanged for a margin loss (docs/audit.md): same label, row 0 zero in D′."""
    prob = get_problem("logistic")(x_norm=4.0)
    pair = neighbouring_pair(prob, 5, 3, "zero", np.random.default_rng(4))
    assert np.linalg.norm(pair.d0.X[0]) == pytest.approx(4.0)
    assert np.array_equal(pair.d1.X[0], np.zeros(3)) and pair.d1.y[0] == pair.d0.y[0] == 1.0
    assert np.array_equal(pair.d0.X[1:], pair.d1.X[1:])
    hessian = [np.outer(d.X[0], d.X[0]) for d in (pair.d0, pair.d1)]
    negated = neighbouring_pair(prob, 5, 3, "sphere", np.random.default_rng(4))
    assert np.allclose(np.outer(negated.d1.X[0], negated.d1.X[0]), hessian[0])
    assert not np.allclose(hessian[1], hessian[0])
    # an unbounded universe (sep_abs declares no data_norm) holds the zero record too
    free = neighbouring_pair(get_problem("sep_abs")(), 4, 1, "zero", np.random.default_rng(0))
    assert np.array_equal(free.d1.X[0], np.zeros(1)) and free.d0.X[0, 0] != 0


def test_extreme_record_maximises_over_the_ball_cut_by_the_cube() -> None:
    """Against an independent construction (bisection on the scale t of sign(u)·min(c, t|u|))
    and against random feasible points, which must never score higher."""
    rng = np.random.default_rng(0)

    def by_bisection(u: np.ndarray, radius: float, cube: float) -> np.ndarray:
        signs, mags = np.where(u < 0, -1.0, 1.0), np.abs(u)
        if cube * math.sqrt(u.size) <= radius:
            return cube * signs
        lo, hi = 0.0, 1e9
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.linalg.norm(np.minimum(cube, mid * mags)) <= radius \
                else (lo, mid)
        return signs * np.minimum(cube, lo * mags)

    for _ in range(500):
        p = int(rng.integers(1, 12))
        u = rng.normal(size=p)
        if p > 1 and rng.random() < 0.3:
            u[rng.integers(p)] = 0.0
        u /= np.linalg.norm(u)
        radius, cube = rng.uniform(0.1, 3.0), rng.uniform(0.05, 2.0)
        x = extreme_record(u, radius, cube)
        assert np.linalg.norm(x) <= radius * (1 + 1e-12) and np.abs(x).max() <= cube * (1 + 1e-12)
        assert x @ u == pytest.approx(by_bisection(u, radius, cube) @ u, abs=1e-12)
        z = rng.normal(size=(50, p))
        z = np.clip(z / np.linalg.norm(z, axis=1, keepdims=True) * radius, -cube, cube)
        assert np.all(z @ u <= x @ u + 1e-12)
    u = np.array([0.6, 0.8])
    assert np.array_equal(extreme_record(u, 1.0), u)  # no cube: the sphere, as before
    assert np.allclose(extreme_record(np.array([0.6, -0.8]), math.sqrt(2), 1.0), [1.0, -1.0])


def test_canary_sits_at_the_declared_data_norm() -> None:
    """mean_est's two generated rows at n = 2 have norm ≈ 0.63 < data_norm = 0.75; a canary at
    0.63 could not reveal a sensitivity computed for a norm up to 1.19× too small. The canary
    is at the declared radius; without a finite declaration, at the largest generated norm."""
    prob = get_problem("mean_est")()
    bound = prob.data_bounds()["data_norm"]
    for canary in ("sphere", "zero", "label_flip"):
        try:
            pair = neighbouring_pair(prob, 2, 2, canary, np.random.default_rng(2))
        except NotApplicable:
            continue
        assert np.linalg.norm(pair.d0.X[0]) == pytest.approx(bound)
        assert np.linalg.norm(pair.d0.X[1]) < 0.9 * bound  # the sample falls short of it
    gaussian = get_problem("sep_abs")()  # data_norm = inf: the generated rows set the norm
    pair = neighbouring_pair(gaussian, 5, 2, "sphere", np.random.default_rng(0))
    assert np.linalg.norm(pair.d0.X[0]) == pytest.approx(np.linalg.norm(pair.d0.X, axis=1).max())


def test_canaries_stay_in_a_cube_universe() -> None:
    """lasso_linf's universe is the cube ‖x‖∞ ≤ 1 (its L∞ = 1 + r, which private Frank–Wolfe
    calibrates with, is proved over it). A sphere canary √p·u left it unless u was a sign
    vector, so the audit could flag a correct mechanism; every in-universe canary is now a cube
    vertex, and the replace-one pair moves one gradient by at most 2·L∞ in ℓ∞."""
    prob = get_problem("lasso_linf")()
    linf = prob.norm_constants()["L_inf"]
    rng = np.random.default_rng(5)
    for p in (2, 5, 16):
        for canary in ("sphere", "label_flip", "lower_bound", "zero"):
            pair = neighbouring_pair(prob, 6, p, canary, np.random.default_rng(p))
            for d in (pair.d0, pair.d1):
                assert np.abs(d.X).max() <= 1.0 + 1e-12, (canary, p)
            if canary == "sphere":
                assert np.array_equal(np.abs(pair.d0.X[0]), np.ones(p))
            for _ in range(20):  # θ in C (the ℓ1 ball of radius r)
                theta = rng.laplace(size=p)
                theta *= prob.radius * rng.random() / np.abs(theta).sum()
                gaps = np.atleast_2d(prob.grad(theta, pair.d0)) - np.atleast_2d(
                    prob.grad(theta, pair.d1))
                assert np.abs(gaps).max() <= 2 * linf * (1 + 1e-12), (canary, p)
        outlier = neighbouring_pair(prob, 6, p, "outlier", np.random.default_rng(p))
        assert np.abs(outlier.d0.X[0]).min() == pytest.approx(1000.0)  # far outside, by design


def test_batches_are_deterministic_and_sides_independent() -> None:
    prob = get_problem("lb_lin")()
    alg = get_algorithm("objective_perturbation")()
    pt = make_point(alg, prob, n=3, p=2, epsilon=1.0, delta=0.0, canary="sphere", runs=50)
    w = Work("pilot", 0, 0, 0, 50)
    a, b = run_pilot(pt, w), run_pilot(pt, w)
    c = run_pilot(pt, Work("pilot", 0, 1, 0, 50))
    assert np.array_equal(a.theta0, b.theta0) and np.array_equal(a.theta1, b.theta1)
    assert not np.array_equal(a.theta0, c.theta0)
    assert not np.array_equal(a.theta0, a.theta1)  # independent streams for D and D′
    assert len({tuple(t) for t in a.theta0}) == 50
    assert (a.claims.epsilon, a.claims.delta, a.claims.certified) == (1.0, 0.0, True)
    assert math.isnan(a.claims.mu)


def test_zoo_is_registered_and_declares_its_bug() -> None:
    algs = available("algorithms", include_broken=True)
    regular = available("algorithms")
    for name, cls in BROKEN.items():
        assert algs[name] is cls and name not in regular
        assert cls.summary.startswith("DELIBERATELY BROKEN")
        assert isinstance(cls.broken, str) and cls.broken
        assert name in DESIGNATED


# Confirmation runs per side at which the power table shows detection in every seed.
BUDGET = {"broken_noise_halved": 4000, "broken_one_sided_sensitivity": 4000,
          "broken_add_remove_accounting": 10000, "broken_warm_start_sampler": 2000,
          "broken_no_clipping": 1000, "broken_data_dependent_step": 1000}


def _audit(name: str, params: dict, member: str, runs: int, seed: int = 0):  # type: ignore[no-untyped-def]
    d = DESIGNATED[member]
    prob = get_problem(d["problem"][0])(**d["problem"][1])
    alg = get_algorithm(name)(**params)
    pt = make_point(alg, prob, n=d["n"], p=d["p"], epsilon=d["epsilon"], delta=d["delta"],
                    canary=d["canary"], runs=runs, selection_runs=runs, root_seed=seed)
    [result] = audit_in_process([pt], ALPHA)
    return result


@pytest.mark.parametrize("member", sorted(DESIGNATED))
def test_zoo_member_detected_and_correct_mechanism_not_flagged(member: str) -> None:
    runs = BUDGET[member]
    broken = _audit(member, DESIGNATED[member]["params"], member, runs)
    assert broken.violation, (member, broken)
    name, params = DESIGNATED[member]["correct"]
    correct = _audit(name, params, member, runs)
    assert not correct.violation, (member, name, correct)
