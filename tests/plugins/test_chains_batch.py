"""The vectorised audit paths ``run_batch`` of the chain mechanisms: Langevin (ULA chains and the OU
recursion), noisy mirror descent (gated chains), Gaussian localisation (NoisySGD on per-row
C ∩ B(θ₀, r₀)) and the high-probability wrappers (k base runs per row, then a selection).

The contract (``Algorithm.run_batch``): each row has the law of ``run``'s θ, the rows are
independent, the ledger is ``run``'s and the rows are a function of the one generator. The harness
checks it at n = 50 (``check_release_batch``: a two-sample KS test against ``release_many`` at a
family-wise level of 1e-3); :func:`_law_pvalue` runs the same test at the audit's sizes
(suites/audit.yaml: n ∈ {2, 3, 5, 10}, p = 2). Seeds are fixed, so every outcome is deterministic;
a deliberately broken batch path must fail the same test.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy.stats import ks_2samp

from dpbench.algorithms.high_prob import (
    HighProb,
    HighProbApprox,
    select_candidate,
    select_candidates,
    sum_losses,
)
from dpbench.algorithms.langevin import Langevin, langevin_chains
from dpbench.algorithms.localize import LocalizeGaussian
from dpbench.algorithms.noisy_mirror_descent import NoisyMirrorDescent, osmd_chains
from dpbench.algorithms.noisy_sgd import compiled_projection, noisy_sgd_chains
from dpbench.core.algorithm import Algorithm, BatchRelease
from dpbench.core.problem import Dataset, Problem
from dpbench.core.sets import BallAt, Intersection
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.problems.logistic import Logistic
from dpbench.problems.mean_est import MeanEst
from dpbench.testing import check_dimension, check_release_batch

DELTA = 1e-5
ROWS = 4000
LEVEL = 1e-3


def _budget(alg: Algorithm) -> tuple[float, float]:
    return 1.0, (0.0 if alg.privacy == "pure" else DELTA)


def _samples(alg: Algorithm, problem: Problem, data: Dataset, rows: int, seed: int,
             epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(``rows`` rows of ``release_batch``, ``rows`` releases of ``release_many``)."""
    _, delta = _budget(alg)
    out = alg.release_batch(data, problem, epsilon=epsilon, delta=delta,
                            rng=np.random.default_rng(seed), size=rows)
    assert out is not None and out.thetas.shape == (rows, data.p)
    ref = alg.release_many(data, problem, epsilon=epsilon, delta=delta,
                           rngs=np.random.default_rng(seed + 1).spawn(rows))
    return out.thetas, np.stack([r.theta for r in ref])


def _law_pvalue(alg: Algorithm, problem: Problem, n: int, p: int = 2, *, rows: int = ROWS,
                seed: int = 0, epsilon: float = 1.0) -> float:
    """Bonferroni-adjusted p-value of the two-sample KS tests (every coordinate and one oblique
    direction, as ``check_release_batch``) of ``release_batch`` against ``release_many`` on
    data of size n; a correct batch path gives a value below ``LEVEL`` with probability ≤ 1e-3."""
    data = problem.generate(n, p, np.random.default_rng(100 + n))
    a, b = _samples(alg, problem, data, rows, seed, epsilon)
    oblique = np.arange(1.0, p + 1.0) / np.linalg.norm(np.arange(1.0, p + 1.0))
    directions = [*np.eye(p), oblique]
    pvals = []
    for u in directions:
        x, y = a @ u, b @ u
        if np.ptp(x) == 0 and np.ptp(y) == 0:
            assert x[0] == y[0]
            continue
        pvals.append(float(ks_2samp(x, y).pvalue))
    return min(pvals) * len(directions) if pvals else 1.0


def _harness(alg: Algorithm, problem: Problem) -> None:
    """``check_release_batch`` (n = 50) in the audit's dimension p = 2."""
    with check_dimension(2):
        check_release_batch(alg, problem)


def _ledger_equals_runs(alg: Algorithm, problem: Problem, n: int) -> None:
    """The whole ledger (charges included), not only the (ε, δ, μ) the harness compares."""
    data = problem.generate(n, 2, np.random.default_rng(0))
    eps, delta = _budget(alg)
    one = alg.release(data, problem, epsilon=eps, delta=delta, rng=np.random.default_rng(0))
    out = alg.release_batch(data, problem, epsilon=eps, delta=delta,
                            rng=np.random.default_rng(0), size=3)
    assert out is not None and out.ledger == one.ledger


class _NoKernel:
    """Mixin: the problem without its compiled kernel (mechanisms run their numpy paths)."""

    def kernel(self) -> None:
        return None


class NoKernelMeanEst(_NoKernel, MeanEst):
    pass


class NoKernelLBLin(_NoKernel, LBLin):
    pass


class NoKernelLBQuad(_NoKernel, LBQuad):
    pass


# --- Langevin ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [5, 10])
def test_langevin_law_at_the_audit_instance(n: int) -> None:
    # suites/audit.yaml, approx_langevin: h = 0.2 on mean_est, p = 2, n ∈ {5, 10}.
    assert _law_pvalue(Langevin(h=0.2), MeanEst(), n) >= LEVEL


@pytest.mark.parametrize("params, problem, n", [
    pytest.param({}, MeanEst(), 4, id="default"),
    pytest.param({"h": 0.2, "output": "average"}, MeanEst(), 5, id="average"),
    pytest.param({"h": 0.2, "calibration": "literal"}, LBQuad(), 5, id="literal"),
    pytest.param({"h": 0.2, "regularize": "erm"}, LBLin(), 5, id="erm"),
    pytest.param({"h": 0.2, "regularize": "sco", "output": "average"}, Logistic(), 6, id="sco"),
])
def test_langevin_law_other_configurations(params: dict, problem: Problem, n: int) -> None:
    assert _law_pvalue(Langevin(**params), problem, n) >= LEVEL


#: Where the Langevin law is concentrated inside C (β ≈ 7 at n = 50, ε = 4: spread
#: √(1/β) ≈ 0.4 per coordinate), not spread over C and its boundary as at the audit's n ≤ 10
#: (β ≤ 0.03).
CONCENTRATED = dict(n=50, rows=1000, epsilon=4.0)


def test_langevin_law_where_it_concentrates() -> None:
    assert _law_pvalue(Langevin(h=0.2), MeanEst(), **CONCENTRATED) >= LEVEL


@pytest.mark.parametrize("output", ["last", "average"])
def test_langevin_ou_law(output: str) -> None:
    # ou_exact needs the stationary spread inside C: n = 100 at ε = 4 (3√(p/β) ≈ 0.82 < 1).
    alg = Langevin(h=0.2, sampler="ou_exact", output=output)
    assert _law_pvalue(alg, MeanEst(), 100, rows=2000, epsilon=4.0) >= LEVEL


def test_langevin_harness_check() -> None:
    _harness(Langevin(h=0.2), MeanEst())


@pytest.mark.slow
def test_langevin_harness_check_default() -> None:
    # The default h = 0.02 runs ≈ 1500 steps of n = 50 gradients per chain (≈ 30 s).
    _harness(Langevin(), MeanEst())


def test_langevin_ledger_and_determinism() -> None:
    _ledger_equals_runs(Langevin(h=0.2), MeanEst(), 5)
    prob = MeanEst()
    data = prob.generate(5, 2, np.random.default_rng(0))
    alg = Langevin(h=0.2)

    def batch(rng: np.random.Generator) -> np.ndarray:
        out = alg.release_batch(data, prob, epsilon=1.0, delta=DELTA, rng=rng, size=300)
        assert out is not None
        return out.thetas

    a, b = batch(np.random.default_rng(7)), batch(np.random.default_rng(7))
    assert np.array_equal(a, b) and len(np.unique(a, axis=0)) == len(a)
    rng = np.random.default_rng(7)
    assert np.array_equal(batch(rng), a) and not np.array_equal(batch(rng), a)


def test_langevin_steps_and_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's chain at h = 0.2 has the T of the calibration; splitting the rows over several
    compiled calls, or one chain's steps over several blocks, keeps every draw in its place."""
    from dpbench.algorithms import langevin

    prob = MeanEst()
    assert [Langevin(h=0.2).plan(prob, n, 2, 1.0, DELTA).steps for n in (5, 10)] == [143, 152]
    data = prob.generate(5, 2, np.random.default_rng(0))
    starts = np.tile([0.3, -0.2], (7, 1))
    kw: dict[str, Any] = dict(constraint=prob.constraint, steps=45, eta=0.05, beta=3.0,
                              clip=float(prob.lipschitz))
    whole = langevin_chains(prob, data, theta0=starts, rng=np.random.default_rng(1), **kw)
    for batch_block, block in [(90, langevin.BLOCK), (45, 20)]:  # 2 chains per call; 1 in 3 blocks
        monkeypatch.setattr(langevin, "BATCH_BLOCK", batch_block)
        monkeypatch.setattr(langevin, "BLOCK", block)
        split = langevin_chains(prob, data, theta0=starts, rng=np.random.default_rng(1), **kw)
        assert np.array_equal(whole, split)


def test_langevin_without_compiled_path_returns_none() -> None:
    prob = NoKernelMeanEst()
    data = prob.generate(5, 2, np.random.default_rng(0))
    assert Langevin(h=0.2).release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                         rng=np.random.default_rng(0), size=4) is None


class DoubleBetaLangevin(Langevin):
    """DELIBERATELY BROKEN: ``run`` is Langevin's, but ``run_batch``'s chains run at 2β (half
    the stationary variance) under the ledger of β."""

    name: ClassVar[str] = "double_beta_langevin"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        plan = self.plan(problem, data.n, data.p, epsilon, delta)
        starts = np.stack([self._start(problem.constraint, data.p, rng) for _ in range(size)])
        thetas = langevin_chains(
            problem, data, constraint=problem.constraint, theta0=starts, steps=plan.steps,
            eta=plan.eta, beta=2.0 * plan.beta, clip=float(problem.lipschitz), rng=rng)
        return BatchRelease(thetas, self._ledger(plan, data.n, float(problem.lipschitz), epsilon,
                                                 delta)[0])


def test_langevin_broken_batch_path_fails() -> None:
    assert _law_pvalue(DoubleBetaLangevin(h=0.2), MeanEst(), **CONCENTRATED) < LEVEL


# --- noisy mirror descent ---------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_mirror_descent_law_at_the_audit_instance(n: int) -> None:
    # suites/audit.yaml, approx_lipschitz: lb_lin, p = 2, δ = 1e-5.
    assert _law_pvalue(NoisyMirrorDescent(), LBLin(), n) >= LEVEL


@pytest.mark.parametrize("params, n", [
    pytest.param({"calibration": "tight"}, 10, id="tight"),
    pytest.param({"stop_fraction": 1.0}, 6, id="capped"),  # the 2n cap binds often
    pytest.param({"epsilon_path": "theorem", "path_c": 0.5}, 8, id="theorem"),
])
def test_mirror_descent_law_other_configurations(params: dict, n: int) -> None:
    assert _law_pvalue(NoisyMirrorDescent(**params), LBLin(), n) >= LEVEL


@pytest.mark.parametrize("params", [{}, {"calibration": "tight"}], ids=["paper", "tight"])
def test_mirror_descent_harness_check(params: dict) -> None:
    _harness(NoisyMirrorDescent(**params), LBLin())


def test_mirror_descent_ledger_and_fallback() -> None:
    _ledger_equals_runs(NoisyMirrorDescent(), LBLin(), 5)
    prob = NoKernelLBLin()
    data = prob.generate(5, 2, np.random.default_rng(0))
    assert NoisyMirrorDescent().release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                              rng=np.random.default_rng(0), size=4) is None


class HalfSigmaMirrorDescent(NoisyMirrorDescent):
    """DELIBERATELY BROKEN: ``run_batch`` adds half the noise, under the ledger of the full σ."""

    name: ClassVar[str] = "half_sigma_mirror_descent"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        L = float(problem.lipschitz)
        cal, eta, target = self._setup(data.n, data.p, problem, epsilon, delta)
        thetas = osmd_chains(problem, data, sigma=cal.sigma / 2, eta=eta, lipschitz=L,
                             target=target, steps_cap=cal.steps_cap, rng=rng, size=size)
        return BatchRelease(thetas, self._ledger(cal, L))


def test_mirror_descent_broken_batch_path_fails() -> None:
    assert _law_pvalue(HalfSigmaMirrorDescent(), LBLin(), 10) < LEVEL


# --- Gaussian localisation --------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_localize_gaussian_law_at_the_audit_instance(n: int) -> None:
    # suites/audit.yaml, approx_strongly_convex: lb_quad, p = 2, δ = 1e-5 (the loop solves and
    # calibrates in every run: 2000 rows).
    assert _law_pvalue(LocalizeGaussian(), LBQuad(), n, rows=2000) >= LEVEL


def test_localize_gaussian_law_other_configuration() -> None:
    alg = LocalizeGaussian(output="suffix", radius_rule="paper", calibration="classical")
    assert _law_pvalue(alg, LBQuad(), 8, rows=2000) >= LEVEL


#: Where B(θ₀, r₀) binds (σ₀ ≈ 0.2, r₀ ≈ 0.9 < the radius 1 of C at n = 20, ε = 8), unlike the
#: audit's n ≤ 10 at ε = 1 (r₀ ≥ 11: C₀ = C), so each row's own θ₀ shows in its law.
LOCALIZED = dict(n=20, rows=2000, epsilon=8.0)


def test_localize_gaussian_law_where_the_ball_binds() -> None:
    assert _law_pvalue(LocalizeGaussian(), LBQuad(), **LOCALIZED) >= LEVEL


@pytest.mark.slow
@pytest.mark.parametrize("params", [{}, {"output": "suffix"}], ids=["default", "suffix"])
def test_localize_gaussian_harness_check(params: dict) -> None:
    # n = 50: T = 2499 steps per run, 4000 looped runs (≈ 15 s).
    _harness(LocalizeGaussian(**params), LBQuad())


def test_localize_gaussian_ledger_and_fallback() -> None:
    _ledger_equals_runs(LocalizeGaussian(), LBQuad(), 5)
    prob = NoKernelLBQuad()
    data = prob.generate(5, 2, np.random.default_rng(0))
    assert LocalizeGaussian().release_batch(data, prob, epsilon=1.0, delta=DELTA,
                                            rng=np.random.default_rng(0), size=4) is None


class HalfSigmaLocalizeGaussian(LocalizeGaussian):
    """DELIBERATELY BROKEN: ``run_batch``'s NoisySGD adds half the noise, under the ledger of
    the full σ."""

    name: ClassVar[str] = "half_sigma_localize_gaussian"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        plan = self._plan(data, problem, epsilon, delta)
        self._plan = lambda *args: dataclasses.replace(plan, sigma=plan.sigma / 2)
        try:
            return super().run_batch(data, problem, epsilon=epsilon, delta=delta, rng=rng,
                                     size=size)
        finally:
            del self._plan


def test_localize_gaussian_broken_batch_path_fails() -> None:
    # A θ₀ shared by all rows would not show: θ* ∈ B(θ₀, r₀) with probability 1 − n⁻³, so the
    # output hardly depends on θ₀ (the point of the localisation).
    alg = HalfSigmaLocalizeGaussian()
    assert type(alg)._has_batch_path()
    assert _law_pvalue(alg, LBQuad(), **LOCALIZED) < LEVEL


def test_chains_with_per_row_centres() -> None:
    """``noisy_sgd_chains(centers=...)``: rows given C's own centres are C's chains bit for bit;
    each row starts at the projection of its last centre and stays in its own C_r."""
    prob = LBLin()
    data = prob.generate(6, 2, np.random.default_rng(0))
    region = Intersection(prob.constraint, BallAt(np.array([0.5, 0.0]), 0.4))
    kw: dict[str, Any] = dict(constraint=region, steps=35, sigma=3.0, lipschitz=1.0,
                              variant="strongly_convex", strong_convexity=1.0, output="suffix",
                              size=5)
    own = np.repeat(compiled_projection(region, 2)[0][None], 5, axis=0)  # type: ignore[index]
    plain = noisy_sgd_chains(prob, data, rng=np.random.default_rng(3), **kw)
    moved = noisy_sgd_chains(prob, data, rng=np.random.default_rng(3), centers=own, **kw)
    assert np.array_equal(plain, moved)
    shifted = own.copy()
    shifted[:, -1, :] = np.array([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.5], [0.0, -0.5], [0.9, 0.9]])
    rows = noisy_sgd_chains(prob, data, rng=np.random.default_rng(3), centers=shifted, **kw)
    for r in range(5):
        assert Intersection(prob.constraint, BallAt(shifted[r, -1], 0.4)).contains(rows[r],
                                                                                   tol=1e-9)
    with pytest.raises(ValueError, match="centers must have shape"):
        noisy_sgd_chains(prob, data, rng=np.random.default_rng(3), centers=own[:4], **kw)


# --- the high-probability wrappers ------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_high_prob_law_at_the_audit_instance(n: int) -> None:
    # suites/audit.yaml, pure_strongly_convex: output perturbation base on lb_quad, p = 2, pure.
    assert _law_pvalue(HighProb(), LBQuad(), n) >= LEVEL


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_high_prob_approx_law_at_the_audit_instance(n: int) -> None:
    # suites/audit.yaml, approx_high_prob: noisy SGD base on lb_lin, p = 2, δ = 1e-5 (the loop
    # calibrates three NoisySGD runs per release: 1500 rows).
    assert _law_pvalue(HighProbApprox(), LBLin(), n, rows=1500) >= LEVEL


@pytest.mark.parametrize("alg, problem, n, rows", [
    pytest.param(HighProb(runs=5, selection_fraction=0.9), LBQuad(), 10, ROWS,
                 id="strong-selection"),
    pytest.param(HighProb(base="exp_mech"), LBQuad(), 5, 1500, id="exp_mech"),
    pytest.param(HighProbApprox(base="localize_gaussian", runs=2), LBQuad(), 5, 1000,
                 id="localize_gaussian"),
])
def test_high_prob_law_other_configurations(alg: HighProb, problem: Problem, n: int,
                                            rows: int) -> None:
    assert _law_pvalue(alg, problem, n, rows=rows) >= LEVEL


def test_high_prob_harness_check() -> None:
    _harness(HighProb(), LBQuad())


@pytest.mark.slow
def test_high_prob_approx_harness_check() -> None:
    # n = 50: three NoisySGD runs of T = 2499 steps per release, 4000 looped releases (≈ 20 s).
    _harness(HighProbApprox(), LBLin())


def test_high_prob_ledger() -> None:
    _ledger_equals_runs(HighProb(), LBQuad(), 5)
    _ledger_equals_runs(HighProbApprox(), LBLin(), 5)
    _ledger_equals_runs(HighProb(base="exp_mech"), LBQuad(), 5)


def test_high_prob_loops_a_base_without_batch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the base's ``release_batch`` the k·size base runs come from ``release_many`` on the
    one generator: rows a function of its state, law unchanged."""
    from dpbench.algorithms.output_perturbation import OutputPerturbation

    monkeypatch.delattr(OutputPerturbation, "run_batch")
    assert not OutputPerturbation._has_batch_path()
    prob = LBQuad()
    data = prob.generate(5, 2, np.random.default_rng(0))
    alg = HighProb()
    a, b = (alg.release_batch(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(4),
                              size=200) for _ in range(2))
    assert a is not None and b is not None and np.array_equal(a.thetas, b.thetas)
    assert _law_pvalue(alg, prob, 5, rows=2000) >= LEVEL


def test_selection_rows_are_select_candidate() -> None:
    """One row of :func:`select_candidates` is :func:`select_candidate` on the same generator
    state (same probabilities bit for bit, same index), and the indices follow the weights."""
    rng = np.random.default_rng(0)
    losses = rng.exponential(3.0, size=(500, 4))
    idx, probs = select_candidates(losses, 1.0, 2.0, 2.0, np.random.default_rng(1))
    one = np.random.default_rng(1)
    u = np.random.default_rng(1).random(500)
    for r in range(500):
        i, pr = select_candidate(losses[r], 1.0, 2.0, 2.0, one)
        assert i == idx[r] and np.array_equal(pr, probs[r])
        assert np.cumsum(pr)[i] >= u[r] * pr.sum() and (i == 0 or np.cumsum(pr)[i - 1] <= u[r])
    counts = np.bincount(select_candidates(np.tile([0.0, 1.0, 3.0], (20000, 1)), 2.0, 1.0, 1.0,
                                           np.random.default_rng(2))[0], minlength=3)
    expected = 20000 * np.exp(-np.array([0.0, 1.0, 3.0])) / np.exp(-np.array([0.0, 1.0, 3.0])).sum()
    assert np.all(np.abs(counts - expected) <= 5 * np.sqrt(expected))


@pytest.mark.parametrize("problem", [LBQuad(), LBLin(), Logistic(ridge=0.5)],
                         ids=["lb_quad", "lb_lin", "logistic"])
def test_sum_losses_is_n_times_the_risk(problem: Problem) -> None:
    data = problem.generate(7, 3, np.random.default_rng(0))
    thetas = problem.constraint.project(np.random.default_rng(1).normal(size=(20, 3)))
    want = np.array([data.n * problem.risk(t, data) for t in thetas])
    assert np.allclose(sum_losses(thetas, data, problem), want, rtol=1e-13, atol=1e-13)


class FirstCandidateHighProb(HighProb):
    """DELIBERATELY BROKEN: ``run_batch`` releases the first candidate of every row (no
    selection), under the ledger of the selection."""

    name: ClassVar[str] = "first_candidate_high_prob"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        out = super().run_batch(data, problem, epsilon=epsilon, delta=delta, rng=rng, size=size)
        eps_run = self.run_budget(epsilon, delta)[0]
        base = self.base_algorithm().release_batch(data, problem, epsilon=eps_run, delta=0.0,
                                                   rng=rng, size=size)
        return BatchRelease(base.thetas, out.ledger)


def test_high_prob_broken_batch_path_fails() -> None:
    alg = FirstCandidateHighProb(runs=5, selection_fraction=0.9)
    assert _law_pvalue(alg, LBQuad(), 10) < LEVEL
