"""REM's vectorised audit path ``run_batch`` and the vectorised exact samplers it draws from.

The contract (``Algorithm.run_batch``): each row has the law of ``run``'s θ, the rows are
independent, the ledger is ``run``'s and the rows are a function of the one generator. The law is
checked by the harness (``check_release_batch``: 4000 rows against 4000 looped runs, two-sample KS
at a family-wise level of 1e-3, fixed seeds, so deterministic) at n = 50, and below at the audit
instance itself (suites/audit.yaml ``approx_rem``: sep_abs, p = 2, ε = 1, δ = 1e-5, n = 2 and 10,
the sphere canary's D and D′). A batch path with a wrong temperature must fail the same check.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from scipy.stats import ks_2samp

from dpbench.algorithms.rem import REM
from dpbench.core import registry
from dpbench.core.algorithm import Algorithm, BatchRelease
from dpbench.core.exact_samplers import draw_many, exact_sampler
from dpbench.core.neighbours import neighbouring_pair
from dpbench.numerics.kernels import resolve_kernel
from dpbench.numerics.samplers.alternating import alternating_sample, ball_gaussian_sampler
from dpbench.problems.flat_1d import Flat1D
from dpbench.problems.lin_ball import LinBall
from dpbench.problems.sep_abs import SepAbs
from dpbench.testing import check_dimension, check_release_batch

EPS, DELTA = 1.0, 1e-5

#: Configurations whose run_batch the harness's ``check_release_batch`` checks here (n = 50,
#: p = 3; ~5 s each). The registered default (the audit's configuration) runs it in
#: tests/plugins/test_plugin_harness.py, and REM() on sep_abs and lin_ball, the strongly convex
#: mode and sco/paper on lin_ball in test_rem.py's harness tests. Here: sco/paper on the audit's
#: problem, the μ = 0 fallback to a problem's "gibbs" sampler (lb_quad, strongly convex mode) and
#: short alternating chains (uncertified at steps_scale < 1; the law of the chain, not of π, is
#: what run_batch must reproduce).
CONFIGS = [
    pytest.param({"mode": "sco", "calibration": "paper"}, ("sep_abs", {}), id="sco-paper"),
    pytest.param({"mode": "strongly_convex"}, ("lb_quad", {}), id="mu0-gibbs-fallback"),
    pytest.param({"sampler": "alternating", "steps_scale": 3e-5}, ("sep_abs", {}),
                 id="alternating-sep_abs"),
    pytest.param({"sampler": "alternating", "steps_scale": 1e-4, "mode": "sco"}, ("lin_ball", {}),
                 id="alternating-lin_ball"),
]


@pytest.mark.parametrize("params, problem", CONFIGS)
def test_check_release_batch_passes(params: dict, problem: tuple) -> None:
    name, kw = problem
    alg = REM(**params)
    assert type(alg)._has_batch_path()
    check_release_batch(alg, registry.get_problem(name)(**kw))


@pytest.mark.parametrize("problem", [Flat1D(), LinBall()], ids=["flat_1d", "lin_ball-1d"])
def test_check_release_batch_passes_in_one_dimension(problem: object) -> None:
    """flat_1d's truncated normal and lin_ball's 1-D branch (p = 1)."""
    with check_dimension(1):
        check_release_batch(REM(mode="sco"), problem)  # type: ignore[arg-type]


def _same_law(alg: Algorithm, problem: object, data: object, runs: int, seed: int) -> None:
    """release_batch rows vs looped releases on ``data``: KS per coordinate, p > 1e-3."""
    out = alg.release_batch(data, problem, epsilon=EPS, delta=DELTA,  # type: ignore[arg-type]
                            rng=np.random.default_rng(seed), size=runs)
    assert out is not None
    loop = alg.release_many(data, problem, epsilon=EPS, delta=DELTA,  # type: ignore[arg-type]
                            rngs=np.random.default_rng(seed + 1).spawn(runs))
    ref = np.stack([r.theta for r in loop])
    assert out.ledger == loop[0].ledger  # the whole ledger, charges included
    for j in range(ref.shape[1]):
        assert ks_2samp(out.thetas[:, j], ref[:, j]).pvalue > 1e-3


@pytest.mark.parametrize("n", [2, 10])
def test_audit_instance(n: int) -> None:
    """The audit's instance (sep_abs, p = 2, ε = 1, δ = 1e-5) on both datasets of the sphere
    canary's pair: 2000 batch rows vs 2000 runs."""
    prob = SepAbs()
    pair = neighbouring_pair(prob, n, 2, "sphere", np.random.default_rng(n))
    for k, data in enumerate((pair.d0, pair.d1)):
        _same_law(REM(), prob, data, 2000, 10 * n + k)


def test_alternating_at_the_audit_instance() -> None:
    """The alternating sampler at the audit instance (n = 2: theory T = 2652 steps, certified):
    800 compiled chains through run_batch vs 800 runs, and a chain of a batch equals a lone
    chain from the same generator state (the block of chains draws chain after chain)."""
    prob = SepAbs()
    pair = neighbouring_pair(prob, 2, 2, "sphere", np.random.default_rng(2))
    alg = REM(sampler="alternating")
    _same_law(alg, prob, pair.d0, 800, 3)
    cal = alg.calibrate(2, 2, prob, EPS, DELTA)
    plan = alg.plan(cal, prob, 2, EPS, DELTA)
    kw = {"k": cal.k, "lam": cal.k * cal.mu, "center": np.zeros(2),
          "constraint": prob.constraint, "eta": plan.eta, "steps": 300, "x0": np.zeros(2)}
    one, _ = alternating_sample(prob.kernel(), pair.d0, rng=np.random.default_rng(5), **kw)
    many, _ = alternating_sample(prob.kernel(), pair.d0, rng=np.random.default_rng(5), chains=7,
                                 **kw)
    assert np.array_equal(one[0], many[0]) and len(np.unique(many, axis=0)) == 7


def test_alternating_without_kernel_is_looped() -> None:
    """lin_cube has no compiled kernel: run uses the numpy chain, run_batch returns None."""
    prob = registry.get_problem("lin_cube")()
    assert resolve_kernel(prob) is None
    data = prob.generate(3, 2, np.random.default_rng(0))
    alg = REM(sampler="alternating", steps_scale=1e-5)
    assert alg.release_batch(data, prob, epsilon=EPS, delta=DELTA, rng=np.random.default_rng(0),
                             size=5) is None


def test_release_batch_is_a_function_of_the_generator() -> None:
    prob = SepAbs()
    data = prob.generate(5, 2, np.random.default_rng(0))

    def batch(rng: np.random.Generator) -> np.ndarray:
        out = REM().release_batch(data, prob, epsilon=EPS, delta=DELTA, rng=rng, size=1000)
        assert out is not None and out.thetas.shape == (1000, 2)
        return out.thetas

    a = batch(np.random.default_rng(7))
    assert np.array_equal(a, batch(np.random.default_rng(7)))
    assert not np.array_equal(a, batch(np.random.default_rng(8)))
    assert len(np.unique(a, axis=0)) == len(a)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: (SepAbs(), 2, (4.0, 0.3)), id="sep_abs"),
    pytest.param(lambda: (LinBall(), 3, (4.0, 0.3)), id="lin_ball-3d"),
    pytest.param(lambda: (LinBall(), 1, (4.0, 0.3)), id="lin_ball-1d"),
    pytest.param(lambda: (Flat1D(), 1, (4.0, 0.3)), id="flat_1d"),
])
def test_exact_samplers_many(make) -> None:  # type: ignore[no-untyped-def]
    """The vectorised ``draw.many`` of each regularized_gibbs factory: shape (size, p), and the
    law of the one-draw function (4000 vs 4000, KS per coordinate p > 1e-3). Where the single
    draw is ``many(rng, 1)[0]`` (sep_abs, flat_1d, the 1-D ball) it also equals it bit for bit."""
    prob, p, (k, mu) = make()
    data = prob.generate(6, p, np.random.default_rng(1))
    draw = exact_sampler("regularized_gibbs", prob, data, k, mu, np.zeros(p))
    assert draw is not None and hasattr(draw, "many")
    rows = draw_many(draw, np.random.default_rng(2), 4000)
    assert rows.shape == (4000, p)
    loop = np.stack([draw(g) for g in np.random.default_rng(3).spawn(4000)])
    for j in range(p):
        assert ks_2samp(rows[:, j], loop[:, j]).pvalue > 1e-3
    if p == 1 or isinstance(prob, SepAbs):
        assert np.array_equal(draw(np.random.default_rng(4)), draw.many(np.random.default_rng(4),
                                                                        1)[0])


def test_ball_sampler_many_far_from_the_ball() -> None:
    """‖q‖ ≫ R (the REM-ERM regime on a ball): the vectorised draws stay in the ball and keep
    the law of the one-draw function."""
    draw = ball_gaussian_sampler(np.array([30.0, -5.0, 2.0]), 50.0, 1.0)
    rows = draw.many(np.random.default_rng(0), 3000)  # type: ignore[attr-defined]
    assert np.all(np.linalg.norm(rows, axis=1) <= 1.0 + 1e-12)
    loop = np.stack([draw(g) for g in np.random.default_rng(1).spawn(3000)])
    for j in range(3):
        assert ks_2samp(rows[:, j], loop[:, j]).pvalue > 1e-3


class HotBatch(REM):
    """DELIBERATELY BROKEN: ``run`` is REM's, but ``run_batch`` samples at twice the temperature
    k (with the ledger of the right k): rows more concentrated than run's."""

    name: ClassVar[str] = "hot_batch"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        cal = self.calibrate(data.n, data.p, problem, epsilon, delta)
        center = problem.constraint.center(data.p)
        draw = exact_sampler("regularized_gibbs", problem, data, 2 * cal.k, cal.mu, center)
        return BatchRelease(problem.constraint.project(draw_many(draw, rng, size)),
                            self._exact_ledger(epsilon, cal))


def test_broken_batch_path_fails_the_check() -> None:
    assert HotBatch._has_batch_path()
    with pytest.raises(AssertionError, match="do not have run's law"):
        check_release_batch(HotBatch(), SepAbs())
