"""The vectorised audit paths (``run_batch``) of the exponential-mechanism family: ``exp_mech``,
``gibbs``, ``rashomon``, ``iterated_exp_mech`` and ``localize``, and the vectorised exact samplers
(``draw.many``, ``draw.many_at``) and chains (``run_chains``) under them.

The contract (``Algorithm.run_batch``): each row has the law of ``run``'s θ, the rows are
independent, the ledger is ``run``'s and the rows are a function of the one generator. The law is
checked by the harness (``check_release_batch``: n = 50, p = 3, a two-sample KS test against
``release_many`` at a family-wise level of 1e-3, fixed seeds, so deterministic) for every
configuration the audit suite uses and the defaults, and at the audit instances themselves
(n ∈ {2, 10}, p = 2, the ``sphere`` canary's data) by the same test; deliberately broken batch
paths must fail it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from scipy.stats import ks_2samp

from dpbench.algorithms.exp_mech import ExpMech, expmech_temperature
from dpbench.algorithms.gibbs import Gibbs
from dpbench.algorithms.iterated_exp_mech import IteratedExpMech
from dpbench.algorithms.localize import Localize, localization_region
from dpbench.algorithms.rashomon import Rashomon, ThresholdedProblem
from dpbench.core import registry
from dpbench.core.algorithm import Algorithm, BatchRelease
from dpbench.core.exact_samplers import draw_many, draw_many_at, exact_sampler
from dpbench.core.neighbours import neighbouring_pair
from dpbench.core.sets import Ball, BallAt, Intersection
from dpbench.numerics.samplers.expmech import sample_expmech_many
from dpbench.numerics.samplers.mcmc import chain_starts, relocated_region, run_chain, run_chains
from dpbench.numerics.samplers.rejection import fill_accepted, first_accepted_rows
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.problems.mean_est import MeanEst
from dpbench.testing import check_release_batch

DELTA = 1e-5
#: Level of one two-sample KS comparison below (family-wise over its directions).
ALPHA = 1e-3


def _ks_rows(a: np.ndarray, b: np.ndarray, alpha: float = ALPHA) -> None:
    """Two-sample KS on every coordinate and one oblique direction (Bonferroni at ``alpha``)."""
    p = a.shape[1]
    oblique = np.arange(1.0, p + 1.0) / np.linalg.norm(np.arange(1.0, p + 1.0))
    directions = [*np.eye(p), oblique]
    for u in directions:
        pval = ks_2samp(a @ u, b @ u).pvalue
        assert pval >= alpha / len(directions), (pval, (a @ u).mean(), (b @ u).mean())


def _batch_vs_loop(alg: Algorithm, prob: Any, data: Any, delta: float, size: int = 4000) -> None:
    """release_batch's rows against ``size`` releases of release_many, and the ledgers."""
    out = alg.release_batch(data, prob, epsilon=1.0, delta=delta, rng=np.random.default_rng(11),
                            size=size)
    assert out is not None
    loop = alg.release_many(data, prob, epsilon=1.0, delta=delta,
                            rngs=np.random.default_rng(12).spawn(size))
    assert out.ledger == loop[0].ledger
    _ks_rows(out.thetas, np.stack([r.theta for r in loop]))


# --- the harness on every configuration the audit suite uses, and the defaults ---------------

CONFIGS = [
    pytest.param(ExpMech(), LBLin, id="exp_mech-lb_lin"),
    pytest.param(Gibbs(), LBQuad, id="gibbs-lb_quad"),
    pytest.param(Gibbs(calibration="literal"), MeanEst, id="gibbs-literal-mean_est"),
    pytest.param(Gibbs(regularize="erm"), "lin_cube", id="gibbs-erm-lin_cube"),
    pytest.param(Rashomon(), MeanEst, id="rashomon-mean_est"),
    pytest.param(Rashomon(regime="approx", samples=2), MeanEst, id="rashomon-approx-k2"),
    pytest.param(IteratedExpMech(), LBQuad, id="iterated-lb_quad"),  # 2 rounds at n = 50
    pytest.param(IteratedExpMech(target="sco"), "kink_sc", id="iterated-sco-kink_sc"),
    pytest.param(Localize(), LBQuad, id="localize-lb_quad"),
    pytest.param(Localize(radius_rule="paper"), "kink_sc", id="localize-paper-kink_sc"),
]


def _problem(spec: Any) -> Any:
    return registry.get_problem(spec)() if isinstance(spec, str) else spec()


@pytest.mark.parametrize("alg, problem", CONFIGS)
def test_check_release_batch_passes(alg: Algorithm, problem: Any) -> None:
    assert type(alg)._has_batch_path()
    check_release_batch(alg, _problem(problem))


# --- the audit instances: n ∈ {2, 10}, p = 2, epsilon = 1 (suites/audit.yaml) ---------------

AUDIT = [
    pytest.param(ExpMech(), LBLin, 0.0, id="exp_mech-lb_lin"),
    pytest.param(Gibbs(), LBQuad, DELTA, id="gibbs-lb_quad"),
    pytest.param(Rashomon(), MeanEst, 0.0, id="rashomon-mean_est"),
    pytest.param(IteratedExpMech(), LBQuad, 0.0, id="iterated-lb_quad"),
    pytest.param(Localize(), LBQuad, 0.0, id="localize-lb_quad"),
]


@pytest.mark.parametrize("n", [2, 10])
@pytest.mark.parametrize("alg, problem, delta", AUDIT)
def test_audit_instance_law(alg: Algorithm, problem: Any, delta: float, n: int) -> None:
    prob = problem()
    pair = neighbouring_pair(prob, n, 2, "sphere", np.random.default_rng(0))
    _batch_vs_loop(alg, prob, pair.d1, delta)


def test_gaussian_calibration_law() -> None:
    # calibration='gaussian' applies only where the truncation is negligible (n = 400 here).
    prob = MeanEst()
    _batch_vs_loop(Gibbs(calibration="gaussian"), prob,
                   prob.generate(400, 2, np.random.default_rng(0)), DELTA, size=2000)


# --- MCMC: the same chain per row --------------------------------------------------------------

@pytest.mark.parametrize("alg, problem, delta", [
    pytest.param(ExpMech(sampler="rwm", steps=200), LBLin, 0.0, id="exp_mech-rwm"),
    pytest.param(Gibbs(sampler="mala", steps=200), LBQuad, DELTA, id="gibbs-mala"),
    pytest.param(IteratedExpMech(sampler="mala", steps=100), LBQuad, 0.0, id="iterated-mala"),
    # mean_est at n = 400: θ₀ = Π_C(θ̂ + b) stays off ∂C, where run's chain may refuse to start
    # (its start test is exact and a projected θ₀ can be outside C by rounding)
    pytest.param(Localize(sampler="rwm", steps=200), MeanEst, 0.0, id="localize-rwm"),
])
def test_mcmc_law(alg: Algorithm, problem: Any, delta: float) -> None:
    prob = problem()
    n = 400 if isinstance(alg, Localize) else 40
    _batch_vs_loop(alg, prob, prob.generate(n, 2, np.random.default_rng(0)), delta, size=2000)


@pytest.mark.slow  # run's numpy chain on ThresholdedProblem, 1500 times
@pytest.mark.parametrize("kind", ["rwm", "mala"])
def test_rashomon_mcmc_law(kind: str) -> None:
    # run's chain is the numpy one on ThresholdedProblem (no kernel); the batch runs the compiled
    # chain of the base kernel with the floor n(𝓛* + ψ): the same chain up to rounding.
    prob = MeanEst()
    _batch_vs_loop(Rashomon(sampler=kind, steps=60, samples=2), prob,
                   prob.generate(5, 2, np.random.default_rng(0)), 0.0, size=1500)


def test_floor_is_the_thresholded_chain() -> None:
    # One chain of run_chains with the floor against run_chain on the thresholded view (numpy
    # path): the same proposals from the same generator state, so the same path up to rounding.
    prob = MeanEst()
    data = prob.generate(6, 2, np.random.default_rng(0))
    opt = prob.solve(data)
    threshold = opt.value + 0.05
    for kind in ("rwm", "mala"):
        view = ThresholdedProblem(prob, threshold)
        one, _ = run_chain(view, data, 3.0, prob.constraint, np.random.default_rng(5), kind=kind,
                           steps=300)
        out = run_chains(prob, data, 3.0, prob.constraint, np.random.default_rng(5), 1,
                         kind=kind, steps=300, floor=data.n * threshold)
        assert out is not None
        np.testing.assert_allclose(out[0][0], one, rtol=0, atol=1e-9)


def test_chains_match_run_chain_path_by_path() -> None:
    # Chains run one after the other from one generator: chain r of run_chains is run_chain
    # continued on the same generator (compiled both), on C and on a region per row.
    prob = LBQuad()
    data = prob.generate(5, 2, np.random.default_rng(0))
    region = Intersection(prob.constraint, BallAt(np.array([0.1, -0.2]), 0.5))
    centers = np.stack([np.zeros((3, 2)), np.array([[0.1, -0.2], [0.3, 0.3], [-0.4, 0.0]])], 1)
    for kind in ("rwm", "mala"):
        out = run_chains(prob, data, 0.7, region, np.random.default_rng(3), 3, kind=kind,
                         steps=150, row_centers=centers)
        assert out is not None
        rng = np.random.default_rng(3)
        for r in range(3):
            one, _ = run_chain(prob, data, 0.7, relocated_region(region, centers[r]), rng,
                               kind=kind, steps=150)
            assert np.array_equal(out[0][r], one)


def test_chain_starts_are_the_regions_centres() -> None:
    region = Intersection(Ball(1.0), BallAt(np.array([0.0, 0.0]), 0.3))
    centers = np.stack([np.zeros((3, 2)), np.array([[0.2, 0.1], [1.2, 0.0], [0.6, 0.8]])], 1)
    starts = chain_starts(region, centers)
    for r in range(3):
        assert np.array_equal(starts[r], relocated_region(region, centers[r]).center(2))
    assert np.array_equal(starts[0], centers[0, 1])  # inside: the last ball's centre itself


def test_no_kernel_returns_none() -> None:
    class NoKernelLBLin(LBLin):
        def kernel(self) -> None:
            return None

    prob = NoKernelLBLin()
    data = prob.generate(5, 2, np.random.default_rng(0))
    assert ExpMech(sampler="rwm", steps=10).release_batch(
        data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(0), size=4) is None


# --- the exact samplers' vectorised forms -----------------------------------------------------

SAMPLER_CASES = [
    ("lb_lin", 2, {}), ("lb_lin", 3, {}), ("lb_quad", 2, {}), ("mean_est", 3, {}),
    ("kink_sc", 2, {}), ("linear_ridge", 2, {}), ("lin_cube", 3, {}),
    ("lin_cube", 2, {"ridge": 0.5}), ("hub_1d", 1, {}), ("hub_1d", 1, {"dataset": "D2"}),
    ("flat_1d", 1, {}), ("flat_1d", 1, {"ridge": 0.3}),
]


@pytest.mark.parametrize("name, p, params", SAMPLER_CASES)
@pytest.mark.parametrize("k", [0.05, 1.0])
def test_gibbs_many_has_the_draws_law(name: str, p: int, params: dict, k: float) -> None:
    prob = registry.get_problem(name)(**params)
    data = prob.generate(20, p, np.random.default_rng(0))
    draw = exact_sampler("gibbs", prob, data, k, prob.constraint)
    assert draw is not None and hasattr(draw, "many")
    a = draw_many(draw, np.random.default_rng(1), 3000)
    assert a.shape == (3000, p) and np.all(prob.constraint.contains(a, tol=1e-9))
    assert np.array_equal(a, draw_many(draw, np.random.default_rng(1), 3000))
    b = np.stack([draw(g) for g in np.random.default_rng(2).spawn(3000)])
    _ks_rows(a, b)


@pytest.mark.parametrize("name", ["lb_quad", "mean_est", "linear_ridge", "kink_sc"])
@pytest.mark.parametrize("k", [0.2, 20.0])
def test_gibbs_many_at_has_each_rows_law(name: str, k: float) -> None:
    # Row r on C ∩ B(c_r, 0.4) with c_r one of 4 centres around the mode θ* (so that every
    # region holds mass): the rows of each centre against the single draws of that centre's own
    # sampler.
    prob = registry.get_problem(name)()
    data = prob.generate(10, 2, np.random.default_rng(0))
    mode = prob.solve(data).theta
    grid = mode + np.array([[0.0, 0.0], [0.3, 0.1], [-0.2, 0.25], [0.1, -0.35]])
    centres = np.repeat(grid, 1500, axis=0)
    template = Intersection(prob.constraint, BallAt(grid[0], 0.4))
    row_centers = np.stack([np.zeros_like(centres), centres], axis=1)
    draw = exact_sampler("gibbs", prob, data, k, template)
    out = draw_many_at(draw, np.random.default_rng(1), row_centers)
    assert out is not None and out.shape == (centres.shape[0], 2)
    for j, c in enumerate(grid):
        rows = out[j * 1500:(j + 1) * 1500]
        region = Intersection(prob.constraint, BallAt(c, 0.4))
        assert np.all(region.contains(rows, tol=1e-9))
        one = exact_sampler("gibbs", prob, data, k, region)
        ref = np.stack([one(g) for g in np.random.default_rng([2, j]).spawn(1500)])
        _ks_rows(rows, ref, ALPHA / len(grid))


def test_per_row_fallback_without_many_at() -> None:
    # hub_1d's piecewise law depends on the interval: no many_at, one sampler per row's region.
    prob = registry.get_problem("hub_1d")()
    data = prob.generate(12, 1, np.random.default_rng(0))
    region = Intersection(prob.constraint, BallAt(np.array([0.5]), 0.7))
    assert not hasattr(exact_sampler("gibbs", prob, data, 0.5, region), "many_at")
    centers = np.stack([np.zeros((4, 1)), np.array([[0.5], [-1.0], [1.5], [0.0]])], 1)
    out = sample_expmech_many(prob, data, 0.5, region, np.random.default_rng(0), 4,
                              row_centers=centers)
    assert out is not None
    for r in range(4):
        assert relocated_region(region, centers[r]).contains(out[0][r], tol=1e-12)


@pytest.mark.parametrize("beta, psi", [(2.0, 0.05), (400.0, 0.02), (5000.0, 0.5)])
def test_rashomon_many_has_the_draws_law(beta: float, psi: float) -> None:
    prob = MeanEst()
    data = prob.generate(10, 2, np.random.default_rng(0))
    draw = exact_sampler("rashomon", prob, data, beta, psi)
    a = draw_many(draw, np.random.default_rng(1), 3000)
    b = np.stack([draw(g) for g in np.random.default_rng(2).spawn(3000)])
    _ks_rows(a, b)


def test_rejection_drivers() -> None:
    def propose(rng: np.random.Generator, m: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.random((m, 1))
        return x, x[:, 0] < 0.01

    out = fill_accepted(propose, np.random.default_rng(0), 500, max_proposals=10**6, what="t")
    assert out.shape == (500, 1) and np.all(out < 0.01)

    def never(rng: np.random.Generator, m: int) -> tuple[np.ndarray, np.ndarray]:
        return rng.random((m, 1)), np.zeros(m, dtype=bool)

    with pytest.raises(RuntimeError, match="no acceptance"):
        fill_accepted(never, np.random.default_rng(0), 3, max_proposals=10_000, what="t")

    def rows(rng: np.random.Generator, idx: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.random((idx.size, t, 1))
        return x, x[..., 0] < (idx[:, None] + 1) / 200.0  # row i accepts below (i + 1)/200

    out = first_accepted_rows(rows, np.random.default_rng(0), 100, 1, max_proposals=10**6,
                              what="t")
    assert np.all(out[:, 0] < (np.arange(100) + 1) / 200.0)
    with pytest.raises(RuntimeError, match="without an acceptance"):
        first_accepted_rows(lambda rng, idx, t: (rng.random((idx.size, t, 1)),
                                                 np.zeros((idx.size, t), dtype=bool)),
                            np.random.default_rng(0), 3, 1, max_proposals=1000, what="t")


# --- deliberately broken batch paths must fail the harness ------------------------------------

class HotExpMech(ExpMech):
    """DELIBERATELY BROKEN: ``run_batch`` samples at 1.5× the temperature of ``run`` (with the
    ledger of ε)."""

    name: ClassVar[str] = "hot_exp_mech"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        k = expmech_temperature(1.5 * epsilon, float(problem.lipschitz),
                                float(problem.constraint.diameter))
        thetas, _ = sample_expmech_many(problem, data, k, problem.constraint, rng, size)
        return BatchRelease(thetas, self._ledger(epsilon, True))


class FullBudgetLocalize(Localize):
    """DELIBERATELY BROKEN: ``run_batch`` runs step 2 at ε instead of ε/2 (k′ doubled; the
    ledger still says ε/2 + ε/2)."""

    name: ClassVar[str] = "full_budget_localize"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        half = epsilon / 2.0
        first = self.outpert().run_batch(data, problem, epsilon=half, delta=0.0, rng=rng,
                                         size=size)
        r0 = self.radius(data.n, data.p, float(problem.lipschitz),
                         float(problem.strong_convexity), epsilon)
        region = localization_region(problem, first.thetas[0], r0)
        k = epsilon / (2.0 * float(problem.lipschitz) * region.diameter)
        centers = np.stack([np.zeros_like(first.thetas), first.thetas], axis=1)
        thetas, _ = sample_expmech_many(problem, data, k, region, rng, size, row_centers=centers)
        return BatchRelease(thetas, self._ledger(first.ledger.epsilon, half, True))


@pytest.mark.parametrize("alg, problem", [
    pytest.param(HotExpMech(), LBLin, id="temperature"),
    pytest.param(FullBudgetLocalize(), LBQuad, id="localize-budget-split"),
])
def test_broken_batch_path_fails_the_check(alg: Algorithm, problem: Any) -> None:
    assert type(alg)._has_batch_path()
    with pytest.raises(AssertionError, match="do not have run's law"):
        check_release_batch(alg, problem())


def test_release_batch_is_a_function_of_the_generator() -> None:
    prob = LBQuad()
    data = prob.generate(5, 2, np.random.default_rng(0))

    def batch(alg: Algorithm, rng: np.random.Generator) -> np.ndarray:
        delta = DELTA if alg.privacy == "approx" else 0.0
        out = alg.release_batch(data, prob, epsilon=1.0, delta=delta, rng=rng, size=300)
        assert out is not None
        return out.thetas

    for alg in (Localize(), IteratedExpMech(), Gibbs()):
        a = batch(alg, np.random.default_rng(7))
        assert np.array_equal(a, batch(alg, np.random.default_rng(7)))
        assert len(np.unique(a, axis=0)) == len(a)
        assert not np.array_equal(a, batch(alg, np.random.default_rng(8)))
