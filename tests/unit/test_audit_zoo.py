"""Canaries, the batch runner and the broken zoo (dpbench.core.neighbours / runs / zoo).

Detection tests run each zoo member at its designated audit point (dpbench.audit.zoo.DESIGNATED)
with a fixed seed at a budget where the power table (reports/audit_power.md) shows detection
in 20/20 seeds, at the per-point level of a 100-point run (α = 0.05/100); the correct shipped
counterpart at the same point and budget must not be flagged (false alarm ≤ α per point).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench.audit.runs import run_audit_batch
from dpbench.audit.stats import audit_bound, per_audit_alpha
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
            assert (canary == "label_flip" and "labelled" in str(exc)) or (
                canary == "zero" and "data_norm" in str(exc)), (canary, str(exc))
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
    with pytest.raises(UserInputError, match="unknown canary 'sphear'.*did you mean 'sphere'"):
        neighbouring_pair(get_problem("lb_lin")(), 3, 2, "sphear", np.random.default_rng(0))
    with pytest.raises(UserInputError, match="n must be an integer >= 2"):
        neighbouring_pair(get_problem("lb_lin")(), 1, 2, "sphere", np.random.default_rng(0))
    outpert = get_algorithm("output_perturbation")()
    reason = canary_not_applicable_reason(outpert, "outlier")
    assert reason and "clips_gradients" in reason
    assert canary_not_applicable_reason(get_algorithm("noisy_sgd")(), "outlier") is None
    prob = get_problem("lb_quad")()
    pair = neighbouring_pair(prob, 3, 1, "outlier", np.random.default_rng(0))
    with pytest.raises(NotApplicable, match="clips_gradients"):
        run_audit_batch(outpert, prob, pair, epsilon=1.0, delta=0.0, runs=2,
                        rng=np.random.default_rng(0))


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
    undeclared = [name for name in ("sep_abs",)  # data_norm = inf: an unbounded universe
                  if not math.isfinite(get_problem(name)().data_bounds().get("data_norm", math.inf))]
    assert undeclared, "sep_abs declares a finite data_norm now: test the refusal another way"
    for name in undeclared:
        with pytest.raises(NotApplicable, match="data_norm"):
            neighbouring_pair(get_problem(name)(), 4, 1, "zero", np.random.default_rng(0))


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


def test_run_audit_batch_is_deterministic() -> None:
    prob = get_problem("lb_lin")()
    alg = get_algorithm("objective_perturbation")()
    pair = neighbouring_pair(prob, 3, 2, "sphere", np.random.default_rng(0))
    a = run_audit_batch(alg, prob, pair, epsilon=1.0, delta=0.0, runs=50,
                        rng=np.random.default_rng(9))
    b = run_audit_batch(alg, prob, pair, epsilon=1.0, delta=0.0, runs=50,
                        rng=np.random.default_rng(9))
    c = run_audit_batch(alg, prob, pair, epsilon=1.0, delta=0.0, runs=50,
                        rng=np.random.default_rng(10))
    assert np.array_equal(a.scores0, b.scores0) and np.array_equal(a.scores1, b.scores1)
    assert not np.array_equal(a.scores0, c.scores0)
    assert not np.array_equal(a.scores0, a.scores1)  # independent streams for D and D′
    assert len(set(a.scores0.tolist())) == 50           # no run shares a stream
    assert (a.epsilon_claimed, a.delta_claimed, a.certified) == (1.0, 0.0, True)
    assert math.isnan(a.mu_claimed)


def test_zoo_is_registered_and_declares_its_bug() -> None:
    algs = available("algorithms", include_broken=True)
    regular = available("algorithms")
    for name, cls in BROKEN.items():
        assert algs[name] is cls and name not in regular
        assert cls.summary.startswith("DELIBERATELY BROKEN")
        assert isinstance(cls.broken, str) and cls.broken
        assert name in DESIGNATED


# Budgets per side where the power table shows 20/20 detection.
BUDGET = {"broken_noise_halved": 2000, "broken_one_sided_sensitivity": 2000,
          "broken_add_remove_accounting": 5000, "broken_warm_start_sampler": 1000,
          "broken_no_clipping": 500, "broken_data_dependent_step": 500}


def _audit(name: str, params: dict, member: str, runs: int, seed: int = 0):  # type: ignore[no-untyped-def]
    d = DESIGNATED[member]
    prob = get_problem(d["problem"][0])(**d["problem"][1])
    alg = get_algorithm(name)(**params)
    pair = neighbouring_pair(prob, d["n"], d["p"], d["canary"], np.random.default_rng(seed))
    out = run_audit_batch(alg, prob, pair, epsilon=d["epsilon"], delta=d["delta"], runs=runs,
                          rng=np.random.default_rng(seed + 1))
    sel = (np.arange(runs) % 500) < 250
    return audit_bound(out.scores0, out.scores1, sel, epsilon_claimed=out.epsilon_claimed,
                       delta_claimed=out.delta_claimed, mu_claimed=out.mu_claimed, alpha=ALPHA)


@pytest.mark.parametrize("member", sorted(DESIGNATED))
def test_zoo_member_detected_and_correct_mechanism_not_flagged(member: str) -> None:
    runs = BUDGET[member]
    broken = _audit(member, DESIGNATED[member]["params"], member, runs)
    assert broken.violation, (member, broken)
    name, params = DESIGNATED[member]["correct"]
    correct = _audit(name, params, member, runs)
    assert not correct.violation, (member, name, correct)
