"""The perturbation family's vectorised audit paths (``run_batch``): objective perturbation
(closed form and the batched certified Newton solver of
:mod:`dpbench.numerics.solvers.perturbed_batch`), Huberised objective perturbation (exact,
vectorised bisection) and regularised output perturbation (the inner output perturbation's path).

The contract (``Algorithm.run_batch``): each row has the law of ``run``'s θ, the rows are
independent, the ledger is ``run``'s and the rows are a function of the one generator. The law is
checked by the harness (``check_release_batch``, fixed seeds, so deterministic) on the audit
suite's instances and on the defaults; where the path is exact the rows are compared with
``run`` on the same noise, and where the solve is iterative with ``run``'s solver on the same
linear terms, within the distance the approximate-minima analysis allows.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy.stats import ks_2samp

from dpbench.algorithms import objective_perturbation as objpert
from dpbench.algorithms.huber_objective_perturbation import (
    HuberObjectivePerturbation,
    minimise_huber_objective,
    minimise_huber_objective_batch,
)
from dpbench.algorithms.objective_perturbation import ObjectivePerturbation
from dpbench.algorithms.output_perturbation import SolverGapExceeded
from dpbench.algorithms.regularized_output_perturbation import RegularizedOutputPerturbation
from dpbench.audit.zoo import BrokenAddRemoveAccounting, BrokenNoiseHalved
from dpbench.core.algorithm import Algorithm, BatchRelease
from dpbench.core.neighbours import neighbouring_pair
from dpbench.core.registry import get_problem
from dpbench.numerics.solvers.ball import SoftplusMargin, frank_wolfe_gap, project_ball
from dpbench.numerics.solvers.perturbed import PerturbedObjective, solve_perturbed_ball
from dpbench.numerics.solvers.perturbed_batch import (
    BatchSoftplusMargin,
    frank_wolfe_gaps,
    project_ball_rows,
    solve_perturbed_ball_batch,
)
from dpbench.privacy.ledger import PrivacyLedger
from dpbench.privacy.noise import gaussian_noise
from dpbench.testing import check_case, check_release_batch
from dpbench.testing.algorithm_checks import check_dimension

DELTA = 1e-5

#: (mechanism, problem, p) as the audit suite runs them (suites/audit.yaml), plus the defaults.
AUDIT_CASES = [
    pytest.param(ObjectivePerturbation(), "lb_lin", 2, id="objpert-gamma-lb_lin"),
    pytest.param(ObjectivePerturbation(noise="gaussian"), "lb_lin", 2, id="objpert-gauss-lb_lin"),
    pytest.param(HuberObjectivePerturbation(), "hub_1d", 1, id="huber-hub_1d"),
    pytest.param(HuberObjectivePerturbation(regularizer="private", h_rule="sqrt_n"), "hub_1d", 1,
                 id="huber-private-sqrt_n-hub_1d"),
    pytest.param(RegularizedOutputPerturbation(), "logistic", 2, id="regoutpert-logistic"),
]


def _budget(alg: Algorithm) -> tuple[float, float]:
    return 1.0, (DELTA if alg.privacy == "approx" else 0.0)


@pytest.mark.parametrize("alg, problem, p", AUDIT_CASES)
def test_check_release_batch_on_the_audit_instance(alg: Algorithm, problem: str, p: int) -> None:
    assert type(alg)._has_batch_path()
    with check_dimension(p):
        check_release_batch(alg, get_problem(problem)())


@pytest.mark.parametrize("cls", [ObjectivePerturbation, HuberObjectivePerturbation,
                                 RegularizedOutputPerturbation])
def test_check_release_batch_on_the_defaults(cls: type[Algorithm]) -> None:
    check_case(cls).run(check_release_batch)


#: The audit suite's canaries per instance (suites/audit.yaml).
PAIR_CASES = [
    pytest.param(alg, problem, p, canary, id=f"{case.id}-{canary}")
    for case in AUDIT_CASES
    for alg, problem, p in [case.values]
    for canary in (("sphere", "label_flip", "lower_bound") if problem == "logistic"
                   else ("sphere", "lower_bound"))
]
#: Per comparison of :func:`test_law_on_the_audit_pairs_at_small_n`: 1e-3 over its cases × 2
#: sides × at most 2 coordinates.
_PAIR_LEVEL = 1e-3 / (len(PAIR_CASES) * 2 * 2)


@pytest.mark.parametrize("alg, problem, p, canary", PAIR_CASES)
def test_law_on_the_audit_pairs_at_small_n(alg: Algorithm, problem: str, p: int,
                                           canary: str) -> None:
    # The audit's own neighbouring data at n = 2: 2000 rows per side against 2000 releases,
    # two-sample KS per side and coordinate, at a family-wise level of 1e-3 over the whole
    # parametrisation (fixed seeds: deterministic).
    prob = get_problem(problem)()
    pair = neighbouring_pair(prob, 2, p, canary, np.random.default_rng(3))
    eps, delta = _budget(alg)
    for k, data in enumerate((pair.d0, pair.d1)):
        out = alg.release_batch(data, prob, epsilon=eps, delta=delta,
                                rng=np.random.default_rng(10 + k), size=2000)
        assert out is not None
        ref = np.stack([r.theta for r in alg.release_many(
            data, prob, epsilon=eps, delta=delta, rngs=np.random.default_rng(20 + k).spawn(2000))])
        for j in range(p):
            assert ks_2samp(out.thetas[:, j], ref[:, j]).pvalue >= _PAIR_LEVEL


@pytest.mark.parametrize("alg, problem, p", AUDIT_CASES)
def test_ledger_equals_runs(alg: Algorithm, problem: str, p: int) -> None:
    # The whole ledger (charges included), not only the (ε, δ, μ) the harness compares.
    prob = get_problem(problem)()
    data = prob.generate(5, p, np.random.default_rng(0))
    eps, delta = _budget(alg)
    one = alg.release(data, prob, epsilon=eps, delta=delta, rng=np.random.default_rng(0))
    out = alg.release_batch(data, prob, epsilon=eps, delta=delta, rng=np.random.default_rng(0),
                            size=3)
    assert out is not None and out.ledger == one.ledger


@pytest.mark.parametrize("alg, problem, p", AUDIT_CASES)
def test_release_batch_is_a_function_of_the_generator(alg: Algorithm, problem: str,
                                                      p: int) -> None:
    prob = get_problem(problem)()
    data = prob.generate(3, p, np.random.default_rng(0))
    eps, delta = _budget(alg)

    def batch(rng: np.random.Generator) -> np.ndarray:
        out = alg.release_batch(data, prob, epsilon=eps, delta=delta, rng=rng, size=300)
        assert out is not None and out.thetas.shape == (300, p)
        return out.thetas

    a = batch(np.random.default_rng(7))
    assert np.array_equal(a, batch(np.random.default_rng(7)))
    assert not np.array_equal(a, batch(np.random.default_rng(8)))
    rng = np.random.default_rng(7)
    first, second = batch(rng), batch(rng)  # the generator advances: fresh draws
    assert np.array_equal(first, a) and not np.array_equal(first, second)
    inside = a[np.linalg.norm(a, axis=1) < float(prob.constraint.radius)]  # off the atoms of ∂C
    assert len(inside) > 0 and len(np.unique(inside, axis=0)) == len(inside)


# --- exactness: the same noise gives run's θ ------------------------------------------------------

@pytest.mark.parametrize("params", [{}, {"regularizer": "private", "h_rule": "sqrt_n"}])
@pytest.mark.parametrize("dataset", ["D1", "D2"])
def test_huber_rows_are_runs_bit_for_bit(params: dict, dataset: str) -> None:
    # run draws b = σ·N(0, 1) one at a time and run_batch all at once from the same stream, and
    # the batched minimiser is bit for bit the one-row minimiser: the rows ARE run's releases.
    alg = HuberObjectivePerturbation(**params)
    prob = get_problem("hub_1d")(dataset=dataset)
    for n in (2, 3, 10):
        data = prob.generate(n, 1, np.random.default_rng(0))
        out = alg.release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                rng=np.random.default_rng(5), size=500)
        rng = np.random.default_rng(5)
        runs = np.stack([alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=rng).theta
                         for _ in range(500)])
        assert out is not None and np.array_equal(out.thetas, runs)


def test_huber_batch_minimiser_equals_the_one_row_minimiser() -> None:
    # Random data (x, y ∈ [−1, 1], a zero x), linear terms over six orders of magnitude, both
    # endpoints hit, ±0.
    rng = np.random.default_rng(1)
    for n in (1, 4, 25):
        x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
        x[0] = 0.0
        b = np.concatenate([rng.standard_normal(3000) * np.repeat([0.01, 1.0, 1e4], 1000),
                            [0.0, -0.0]])
        for h, lam in ((0.05, 0.3), (1.0, 20.0)):
            got = minimise_huber_objective_batch(x, y, h, lam, b)
            want = [minimise_huber_objective(x, y, h, lam, float(v))[0] for v in b]
            assert np.array_equal(got, want)
            assert np.any(got == -2.0) and np.any(got == 2.0)


def test_objpert_gaussian_closed_form_rows_are_runs() -> None:
    # Gaussian b comes from the same stream in run and run_batch; the closed form is the same
    # up to the rounding of a norm computed row-wise.
    alg = ObjectivePerturbation(noise="gaussian")
    prob = get_problem("lb_lin")()
    data = prob.generate(10, 2, np.random.default_rng(0))
    out = alg.release_batch(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(4),
                            size=1000)
    rng = np.random.default_rng(4)
    runs = np.stack([alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=rng).theta
                     for _ in range(1000)])
    assert out is not None and np.max(np.abs(out.thetas - runs)) <= 1e-15


@pytest.mark.parametrize("problem, params", [("lb_lin", {}), ("lb_quad", {}),
                                             ("linear_ridge", {})])
def test_closed_form_batch_solve_equals_run_solve(problem: str, params: dict) -> None:
    prob = get_problem(problem)(**params)
    data = prob.generate(7, 3, np.random.default_rng(0))
    lins = 3.0 * np.random.default_rng(1).standard_normal((500, 3))
    got = objpert._solve_batch(prob, data, 0.2, lins, 1e-12)
    want = np.stack([objpert._solve(prob, data, 0.2, lin, 1e-12).theta for lin in lins])
    assert np.max(np.abs(got - want)) <= 1e-15
    assert np.all(np.linalg.norm(got, axis=1) <= float(prob.constraint.radius))


# --- the iterative solve: the batched solver against run's, on the same linear terms --------------

def _logistic(n: int, p: int, ridge: float = 0.0):  # type: ignore[no-untyped-def]
    prob = get_problem("logistic")(ridge=ridge)
    return prob, prob.generate(n, p, np.random.default_rng(n))


@pytest.mark.parametrize("n, p, ridge, lam, scale", [
    (2, 2, 0.0, 0.5, 1.4), (10, 2, 0.0, 0.1, 0.3), (10, 2, 0.3, 0.0, 0.1), (50, 3, 0.0, 0.03, 0.05)])
def test_batched_solver_is_runs_solver_row_by_row(n: int, p: int, ridge: float, lam: float,
                                                  scale: float) -> None:
    # Every row certified to the target gap; every row within the approximate-minima radius of
    # run's solution for the same linear term: both are within √(2·gap/m) of the exact
    # minimiser (m = ridge + λ), which is all the privacy analysis uses. In fact they agree to
    # rounding (the same algorithm, vectorised).
    prob, data = _logistic(n, p, ridge)
    margin = SoftplusMargin(data.y[:, None] * data.X, ridge=ridge)
    lins = scale * np.random.default_rng(0).standard_normal((400, p))
    tol = 1e-12
    thetas, gaps = solve_perturbed_ball_batch(BatchSoftplusMargin(margin, lam, lins), 400, p, 1.0,
                                              tol=tol)
    assert np.all(gaps <= tol)
    assert np.all(np.linalg.norm(thetas, axis=1) <= 1.0)
    m = ridge + lam
    for s in range(400):
        obj = PerturbedObjective(margin.risk, margin.grad, margin.hess, lam, lins[s])
        ref = solve_perturbed_ball(obj, p, 1.0, smoothness=float(prob.smoothness), tol=tol)
        # the certificate is the one run computes, at the batch's point
        assert frank_wolfe_gap(obj.gradient(thetas[s]), thetas[s], 1.0) <= tol
        dist = float(np.linalg.norm(thetas[s] - ref.theta))
        assert dist <= math.sqrt(2 * gaps[s] / m) + math.sqrt(2 * ref.gap / m) + 1e-15
        assert dist <= 1e-9
    assert np.mean(np.linalg.norm(thetas, axis=1) >= 1.0 - 1e-9) > 0.2  # the sphere phase ran


@pytest.mark.parametrize("margins", [None, 37])
def test_objpert_logistic_batch_solve_equals_run_solve(margins: int | None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # objective_perturbation's own solve on run's linear terms: b/n from its calibration; with
    # margins = 37 the 300 rows are solved 3 at a time (n = 10), uneven last chunk included.
    if margins is not None:
        monkeypatch.setattr(objpert, "_BATCH_MARGINS", margins)
    alg = ObjectivePerturbation()
    prob, data = _logistic(10, 2)
    cal = alg.calibration(prob, 10, 2, 1.0, 0.0)
    lins = alg._draw(2, alg._linear_scale(prob, 2, cal)[0], np.random.default_rng(0), 300) / 10
    got = objpert._solve_batch(prob, data, cal.lam / 10, lins, alg.solver_gap)
    radius = 2.0 * math.sqrt(2.0 * alg.solver_gap / (cal.lam / 10))
    for s in range(300):
        want = objpert._solve(prob, data, cal.lam / 10, lins[s], alg.solver_gap).theta
        assert float(np.linalg.norm(got[s] - want)) <= radius


def test_uncertified_rows_fall_back_to_runs_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batched solver that certifies nothing: every row must come from run's solver, never be
    # released uncertified.
    prob, data = _logistic(5, 2)
    lins = np.random.default_rng(0).standard_normal((20, 2))

    def lazy(obj: Any, size: int, p: int, radius: float, *, tol: float):  # type: ignore[no-untyped-def]
        return np.zeros((size, p)), np.full(size, np.inf)

    monkeypatch.setattr(objpert, "solve_perturbed_ball_batch", lazy)
    got = objpert._solve_batch(prob, data, 0.2, lins, 1e-12)
    want = np.stack([objpert._solve(prob, data, 0.2, lin, 1e-12).theta for lin in lins])
    assert np.array_equal(got, want)


def test_batch_raises_like_run_when_the_gap_cannot_be_certified() -> None:
    alg = ObjectivePerturbation(solver_gap=1e-300)  # below the certificate's roundoff allowance
    prob, data = _logistic(5, 2)
    with pytest.raises(SolverGapExceeded):
        alg.release(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(0))
    with pytest.raises(SolverGapExceeded):
        alg.release_batch(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(0),
                          size=4)


def test_row_helpers_match_the_one_row_helpers() -> None:
    rng = np.random.default_rng(2)
    theta = rng.standard_normal((300, 3)) * np.repeat([0.1, 1.0, 10.0], 100)[:, None]
    rows = project_ball_rows(theta, 1.0)
    assert np.all(np.linalg.norm(rows, axis=1) <= 1.0)
    assert np.allclose(rows, [project_ball(t, 1.0) for t in theta], rtol=0, atol=1e-15)
    g = rng.standard_normal((300, 3))
    want = [frank_wolfe_gap(gk, tk, 1.0) for gk, tk in zip(g, rows)]
    assert np.allclose(frank_wolfe_gaps(g, rows, 1.0), want, rtol=1e-14, atol=0)


# --- what the batch path must not do ------------------------------------------------------------

def test_generic_problems_fall_back_to_the_loop() -> None:
    # FISTA over a one-point gradient oracle has no vectorised form: run_batch says so (None).
    class NoTagLogistic(get_problem("logistic")):  # type: ignore[misc]
        def loss(self, theta: np.ndarray, data: Any) -> np.ndarray:  # drops the softplus tag
            return super().loss(theta, data)

    prob = NoTagLogistic()
    data = prob.generate(4, 2, np.random.default_rng(0))
    assert ObjectivePerturbation().release_batch(data, prob, epsilon=1.0, delta=0.0,
                                                 rng=np.random.default_rng(0), size=3) is None


def test_zoo_members_lose_the_path() -> None:
    for cls in (BrokenNoiseHalved, BrokenAddRemoveAccounting):  # override run: looped
        assert not cls._has_batch_path()


class HalfScaleBatch(ObjectivePerturbation):
    """DELIBERATELY BROKEN: ``run`` is ObjectivePerturbation's, ``run_batch`` draws the linear
    term at half the calibrated scale (with the full scale's ledger)."""

    name: ClassVar[str] = "half_scale_batch"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        cal = self.calibration(problem, data.n, data.p, epsilon, delta)
        sigma, how = self._linear_scale(problem, data.p, cal)
        b = self._draw(data.p, sigma / 2, rng, size)
        thetas = objpert._solve_batch(problem, data, cal.lam / data.n, b / data.n,
                                      self.solver_gap)
        return BatchRelease(problem.constraint.project(thetas),
                            PrivacyLedger.from_charges(*self._charges(cal, how)))


class WrongSigmaHuberBatch(HuberObjectivePerturbation):
    """DELIBERATELY BROKEN: ``run_batch`` uses 0.8σ for the Huberised linear term."""

    name: ClassVar[str] = "wrong_sigma_huber_batch"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        cal = self.calibration(data.n, epsilon, delta)
        b = gaussian_noise(1, 0.8 * cal.sigma, rng, size)[:, 0]
        thetas = minimise_huber_objective_batch(data.X[:, 0], data.y, cal.h, cal.lam, b)
        return BatchRelease(problem.constraint.project(thetas[:, None]),
                            PrivacyLedger.from_charges(*self._charges(epsilon, delta, cal)))


@pytest.mark.parametrize("alg, problem, p", [
    (HalfScaleBatch(), "lb_lin", 2),
    (HalfScaleBatch(noise="gaussian"), "lb_lin", 2),
    (WrongSigmaHuberBatch(), "hub_1d", 1),
])
def test_broken_batch_paths_fail_the_check(alg: Algorithm, problem: str, p: int) -> None:
    assert type(alg)._has_batch_path()
    with check_dimension(p), pytest.raises(AssertionError, match="do not have run's law"):
        check_release_batch(alg, get_problem(problem)())


# --- the iterative solve through the harness (4000 runs of run's Newton solver: slow) -----------

@pytest.mark.slow
@pytest.mark.parametrize("params", [{}, {"noise": "gaussian"}])
def test_check_release_batch_on_logistic(params: dict) -> None:
    with check_dimension(2):
        check_release_batch(ObjectivePerturbation(**params), get_problem("logistic")())
