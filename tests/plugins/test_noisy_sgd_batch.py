"""NoisySGD's vectorised audit path ``run_batch`` (:func:`dpbench.algorithms.noisy_sgd.noisy_sgd_chains`).

The contract (``Algorithm.run_batch``): each row has the law of ``run``'s θ, the rows are
independent, the ledger is ``run``'s and the rows are a function of the one generator. The law is
checked by the harness (``check_release_batch``: a two-sample KS test against ``release_many`` at
a family-wise level of 1e-3, fixed seeds, so deterministic), and a deliberately broken batch path
must fail that same check.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from scipy.stats import ks_2samp

from dpbench.algorithms import noisy_sgd
from dpbench.algorithms.noisy_sgd import NoisySGD, noisy_sgd_chains
from dpbench.audit.zoo import BrokenDataDependentStep, BrokenNoClipping
from dpbench.core import registry
from dpbench.core.algorithm import BatchRelease
from dpbench.core.errors import CellTimeout
from dpbench.core.time_limit import time_limit
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.testing import check_case, check_release_batch, default_problem

DELTA = 1e-5

#: The configurations whose law the harness checks (n = 50, p = 3): the registered default
#: (through ``check_case``: Lipschitz steps, last iterate, LB-Lin) and the strongly convex variant
#: with the suffix average (LB-Quad). The other averaged outputs are checked more cheaply below
#: (``test_law_on_logistic``: logistic, n = 10).
CONFIGS = [
    pytest.param(None, id="default"),
    pytest.param({"variant": "strongly_convex", "output": "suffix"}, id="sc-suffix"),
]


@pytest.mark.parametrize("params", CONFIGS)
def test_check_release_batch_passes(params: dict | None) -> None:
    if params is None:
        case = check_case(NoisySGD)
        assert type(case.algorithm)._has_batch_path()
        case.run(check_release_batch)
    else:
        alg = NoisySGD(**params)
        check_release_batch(alg, default_problem(alg))


class HalfSigmaBatch(NoisySGD):
    """DELIBERATELY BROKEN: ``run`` is NoisySGD's, but ``run_batch`` adds half the noise (with
    the ledger of the full σ)."""

    name: ClassVar[str] = "half_sigma_batch"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        L = float(problem.lipschitz)
        T, z, sigma, eps_spent, accounting = self._noise(data.n, L, epsilon, delta)
        thetas = noisy_sgd_chains(
            problem, data, constraint=problem.constraint, steps=T, sigma=sigma / 2, lipschitz=L,
            variant=self.variant, strong_convexity=float(problem.strong_convexity),
            output=self.output, rng=rng, size=size)
        return BatchRelease(thetas, self._ledger(T, z, eps_spent, delta, data.n, accounting))


def test_broken_batch_path_fails_the_check() -> None:
    alg = HalfSigmaBatch(variant="strongly_convex", output="suffix")
    assert type(alg)._has_batch_path()
    with pytest.raises(AssertionError, match="do not have run's law"):
        check_release_batch(alg, LBQuad())


def _setup(n: int = 10, p: int = 2):  # type: ignore[no-untyped-def]
    prob = registry.get_problem("logistic")(ridge=0.5)
    return prob, prob.generate(n, p, np.random.default_rng(0))


def test_release_batch_is_a_function_of_the_generator() -> None:
    prob, data = _setup()
    alg = NoisySGD(variant="strongly_convex", output="suffix")

    def batch(rng: np.random.Generator) -> np.ndarray:
        out = alg.release_batch(data, prob, epsilon=1.0, delta=DELTA, rng=rng, size=500)
        assert out is not None and out.thetas.shape == (500, 2)
        return out.thetas

    a, b = batch(np.random.default_rng(7)), batch(np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, batch(np.random.default_rng(8)))
    rng = np.random.default_rng(7)
    first, second = batch(rng), batch(rng)  # the generator advances: fresh draws
    assert np.array_equal(first, a) and not np.array_equal(first, second)
    assert len(np.unique(a, axis=0)) == len(a)  # no repeated rows


def test_ledger_equals_runs() -> None:
    # The whole ledger (charges included), not only the (ε, δ, μ) the harness compares.
    prob, data = _setup()
    alg = NoisySGD(output="average")
    one = alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0))
    out = alg.release_batch(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0),
                            size=3)
    assert out is not None
    assert out.ledger == one.ledger


def test_subclasses_overriding_run_lose_the_path() -> None:
    assert NoisySGD._has_batch_path() and HalfSigmaBatch._has_batch_path()
    for cls in (BrokenNoClipping, BrokenDataDependentStep):  # override run: looped, not batched
        assert not cls._has_batch_path()
        prob = LBQuad()
        data = prob.generate(4, 2, np.random.default_rng(0))
        assert cls().release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                   rng=np.random.default_rng(0), size=4) is None


class NoKernelLBLin(LBLin):
    """LB-Lin without its kernel: NoisySGD runs its numpy fallback."""

    def kernel(self) -> None:
        return None


def test_numpy_path_falls_back_to_release_many() -> None:
    prob = NoKernelLBLin()
    data = prob.generate(5, 2, np.random.default_rng(0))
    assert NoisySGD().release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                    rng=np.random.default_rng(0), size=4) is None


def test_no_steps_releases_the_start() -> None:
    prob, data = _setup(n=1)  # T = n² − 1 = 0
    for output in ("last", "average", "suffix"):
        out = NoisySGD(output=output).release_batch(
            data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0), size=3)
        assert out is not None and np.array_equal(out.thetas, np.zeros((3, 2)))


@pytest.mark.parametrize("params, block", [
    ({"output": "average"}, None),
    ({"variant": "strongly_convex", "output": "average"}, None),
    ({"variant": "strongly_convex", "output": "suffix"}, 40),
])
def test_law_on_logistic(params: dict, block: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    # The audit's configuration (logistic, ridge 0.5, n = 10, p = 2): 4000 rows against 4000
    # releases of release_many, two-sample KS per coordinate at a family-wise level of 1e-3
    # (fixed seeds: deterministic). With block = 40 every chain runs over 3 compiled calls (one
    # chain per call, T = 99 steps in blocks of 40): splitting must not change the law.
    prob, data = _setup()
    alg = NoisySGD(**params)
    ref = np.stack([r.theta for r in alg.release_many(
        data, prob, epsilon=1.0, delta=DELTA, rngs=np.random.default_rng(1).spawn(4000))])
    if block is not None:
        monkeypatch.setattr(noisy_sgd, "COMPILED_BLOCK", block)
    out = alg.release_batch(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(2),
                            size=4000)
    assert out is not None
    for k in range(data.p):
        assert ks_2samp(out.thetas[:, k], ref[:, k]).pvalue >= 1e-3 / data.p


def test_checkpoint_runs_between_calls() -> None:
    prob, data = _setup()
    with time_limit(0.0), pytest.raises(CellTimeout):
        NoisySGD().release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                 rng=np.random.default_rng(0), size=10)
