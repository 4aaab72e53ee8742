"""Noise samplers, NoisySGD (BST14 Alg. 1), OutputPerturbation (Alg. 3) and the non-private reference.

Statistical tests use fixed seeds, so each is deterministic: it can only change when the code (or
numpy's PCG64 stream) changes, never flake between runs. The tolerances are nevertheless set at
≥ 4 standard errors (or a factor 1.5 for the heuristic oracles of docs/bst14.md, whose own accuracy is
~10–20 %, docs/bst14.md), so a correct implementation passes for essentially any seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbench.algorithms.noisy_sgd import BLOCK, NoisySGD
from dpbench.algorithms.nonprivate import NonPrivateERM
from dpbench.algorithms.output_perturbation import OutputPerturbation, SolverGapExceeded
from dpbench.core.errors import NotApplicable, UserInputError
from dpbench.core.problem import Dataset, Optimum
from dpbench.core.ratecard import RateCard
from dpbench.privacy.accountant import noisy_sgd_epsilon, noisy_sgd_epsilon_pld
from dpbench.privacy.noise import gamma_norm_noise, gaussian_noise
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad

DELTA = 1e-6


def _data(problem, n: int, p: int, seed: int = 123) -> Dataset:
    return problem.generate(n, p, np.random.default_rng(seed))


# --- noise ------------------------------------------------------------------------------------
def test_gamma_norm_noise_law() -> None:
    p, s, N = 5, 0.7, 20_000
    b = gamma_norm_noise(p, s, np.random.default_rng(0), size=N)
    assert b.shape == (N, p)
    r = np.linalg.norm(b, axis=1)
    # Radius ~ Gamma(shape=p, scale=s): KS p-value far from the rejection region.
    assert stats.kstest(r, stats.gamma(a=p, scale=s).cdf).pvalue > 0.01
    # E‖b‖ = p·s (sd of ‖b‖ is s√p, so 4 SE = 4·s·√p/√N ≈ 0.6 % of the mean).
    assert abs(r.mean() - p * s) < 4 * s * math.sqrt(p / N)
    # E‖b‖² = p(p+1)s²; loose 3 % (≈ 5 SE).
    assert np.mean(r**2) == pytest.approx(p * (p + 1) * s**2, rel=0.03)
    # Uniform direction: each coordinate of u has mean 0 and variance 1/p.
    u = b / r[:, None]
    assert np.all(np.abs(u.mean(axis=0)) < 4 / math.sqrt(p * N))
    assert np.allclose((u**2).mean(axis=0), 1 / p, atol=4 * math.sqrt(2 / N) / p)


def test_noise_is_reproducible_and_shaped() -> None:
    a = gamma_norm_noise(3, 1.0, np.random.default_rng(5))
    b = gamma_norm_noise(3, 1.0, np.random.default_rng(5))
    assert a.shape == (3,) and np.array_equal(a, b)
    g = gaussian_noise(4, 2.5, np.random.default_rng(1), size=50_000)
    assert g.shape == (50_000, 4)
    assert g.std() == pytest.approx(2.5, rel=0.01)  # SE of the sd ≈ 0.18 %
    with pytest.raises(ValueError):
        gamma_norm_noise(3, 0.0, np.random.default_rng(0))


# --- NoisySGD: mechanics -----------------------------------------------------------------------
class LyingLBLin(LBLin):
    """LB-Lin whose gradient is 1000× too long: it lies about L = 1."""

    def grad(self, theta, data, idx=None):  # type: ignore[no-untyped-def]
        return 1000.0 * super().grad(theta, data, idx)


class CountingLBLin(LBLin):
    calls = 0

    def grad(self, theta, data, idx=None):  # type: ignore[no-untyped-def]
        CountingLBLin.calls += 1
        return super().grad(theta, data, idx)


def test_noisy_sgd_same_seed_same_output_and_different_seed_differs() -> None:
    prob, alg = LBLin(), NoisySGD()  # paper σ: one accountant call, no calibration
    data = _data(prob, 100, 4)  # T = 9999 > BLOCK: crosses a block boundary
    assert 100 * 100 - 1 > BLOCK
    r1 = alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(7))
    r2 = alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(7))
    r3 = alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(8))
    assert np.array_equal(r1.theta, r2.theta)
    assert not np.allclose(r1.theta, r3.theta)


def test_noisy_sgd_clips_to_declared_lipschitz() -> None:
    # A gradient 1000× longer than the declared L is clipped back to norm L, so the run is the same
    # as with the honest gradient: the sensitivity 2nL cannot be broken by a wrong declaration.
    honest, liar = LBLin(), LyingLBLin()
    data = _data(honest, 40, 5)
    alg = NoisySGD()
    a = alg.release(data, honest, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(3))
    b = alg.release(data, liar, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(3))
    assert np.allclose(a.theta, b.theta, rtol=0, atol=1e-12)


def test_noisy_sgd_counters_ledger_and_info() -> None:
    prob = CountingLBLin()
    data = _data(prob, 30, 3)
    CountingLBLin.calls = 0
    alg = NoisySGD(sigma_mode="accountant", output="suffix")
    r = alg.release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0))
    T = 30 * 30 - 1
    assert r.grad_queries == r.iterations == CountingLBLin.calls == T
    assert 0.99 <= r.ledger.epsilon <= 1.0 and r.ledger.delta == DELTA
    assert r.ledger.epsilon == noisy_sgd_epsilon_pld(r.info["z"], 30, T, DELTA)
    assert r.ledger.profile.epsilon_rdp == noisy_sgd_epsilon(r.info["z"], 30, T, DELTA)
    assert r.info["sigma"] == pytest.approx(2 * 30 * prob.lipschitz * r.info["z"])
    assert "PLD" in r.ledger.accounting
    # Paper mode: same δ, accounted ε well below the nominal one (docs/bst14.md, accountant table).
    paper = NoisySGD().release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0))
    assert paper.info["paper_epsilon"] == pytest.approx(1.0)
    assert 0.05 < paper.ledger.epsilon < 0.12 and 0.1 < paper.ledger.profile.epsilon_rdp < 0.3


@pytest.mark.parametrize("output", ["average", "suffix"])
def test_noisy_sgd_averaged_outputs_lie_in_c(output: str) -> None:
    prob = LBLin()
    data = _data(prob, 40, 4)
    last = NoisySGD().release(data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(1))
    avg = NoisySGD(output=output).release(
        data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(1))
    assert prob.constraint.contains(avg.theta)
    assert not np.allclose(avg.theta, last.theta)


def test_noisy_sgd_single_record_runs_no_steps() -> None:
    prob = LBLin()
    data = _data(prob, 1, 3)
    r = NoisySGD(output="average").release(
        data, prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0))
    assert r.iterations == 0 and r.ledger.epsilon == 0.0
    assert np.array_equal(r.theta, prob.constraint.center(3))


def test_strongly_convex_variant_requires_strong_convexity() -> None:
    prob = LBLin()
    alg = NoisySGD(variant="strongly_convex")
    assert "strongly_convex" in alg.requirements()
    assert alg.not_applicable_reason(prob) is not None
    with pytest.raises(NotApplicable):
        alg.release(_data(prob, 5, 2), prob, epsilon=1.0, delta=DELTA, rng=np.random.default_rng(0))
    assert alg.not_applicable_reason(LBQuad()) is None


def test_privacy_argument_validation() -> None:
    lin, quad = LBLin(), LBQuad()
    rng = np.random.default_rng(0)
    dl, dq = _data(lin, 5, 2), _data(quad, 5, 2)
    with pytest.raises(UserInputError):  # approx-DP mechanism with δ = 0
        NoisySGD().release(dl, lin, epsilon=1.0, delta=0.0, rng=rng)
    with pytest.raises(UserInputError):  # pure mechanism with δ > 0
        OutputPerturbation().release(dq, quad, epsilon=1.0, delta=1e-6, rng=rng)
    for eps in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(UserInputError):
            NoisySGD().release(dl, lin, epsilon=eps, delta=DELTA, rng=rng)
        with pytest.raises(UserInputError):
            OutputPerturbation().release(dq, quad, epsilon=eps, delta=0.0, rng=rng)
    with pytest.raises(UserInputError):
        NoisySGD(variant="lip")
    with pytest.raises(UserInputError):
        OutputPerturbation(solver_gap=-1.0)


def test_rate_cards_are_valid_and_scaled_to_the_average() -> None:
    vals = dict(n=1000.0, p=10.0, epsilon=1.0, delta=DELTA, L=2.0, D=2.0, Delta=1.0, beta=1.0)
    for variant in ("lipschitz", "strongly_convex"):
        for mode in ("paper", "accountant"):
            for output in ("last", "average", "suffix"):
                card = NoisySGD(variant=variant, sigma_mode=mode, output=output).rate_card()
                assert isinstance(card, RateCard) and card.scale == "average"
                assert float(card.bound(**vals)) > 0
                slope = float(card.local_slope("n", **vals))
                expected = card.exponents["n"]
                assert expected - 0.01 < slope < expected + 0.35  # logs add a small positive slope
    lip = NoisySGD().rate_card()
    assert lip.expression == "L*D*sqrt(p*log(1/delta))*log(n/delta)**1.5/(n*epsilon)"
    assert dict(lip.exponents) == {"n": -1, "p": 0.5, "epsilon": -1}
    out = OutputPerturbation().rate_card()
    assert float(out.local_slope("p", **vals)) == pytest.approx(1.0)
    assert float(out.bound(**vals)) == pytest.approx(2 * 4 * 10 / 1000)


# --- OutputPerturbation ------------------------------------------------------------------------
def test_output_perturbation_noise_level() -> None:
    # signal = 0.5 puts θ* = mean ≈ μ/2 well inside the unit ball; ‖b‖ ≈ p·s = 0.02 ≪ 0.5, so the
    # projection never binds and θ − θ* = b exactly. 400 draws: the SE of the mean ‖b‖ is
    # s√p/20 ≈ 2.2 % of p·s, and the tolerance is 10 % (≈ 4.5 SE).
    prob, n, p, eps = LBQuad(signal=0.5), 1000, 5, 1.0
    data = _data(prob, n, p)
    theta_star = prob.solve(data).theta
    alg = OutputPerturbation()
    s = alg.sensitivity(n, prob.lipschitz, prob.strong_convexity) / eps
    assert s == pytest.approx(2 * prob.lipschitz / (n * prob.strong_convexity * eps), rel=0.02)
    dists = []
    for seed in range(400):
        r = alg.release(data, prob, epsilon=eps, delta=0.0, rng=np.random.default_rng(seed))
        dists.append(float(np.linalg.norm(r.theta - theta_star)))
        assert dists[-1] == pytest.approx(r.info["noise_norm"], rel=1e-9)
    assert r.ledger.epsilon == eps and r.ledger.delta == 0.0
    assert np.mean(dists) == pytest.approx(p * s, rel=0.10)


class InexactLBQuad(LBQuad):
    """LB-Quad whose solver only certifies a gap of 1e-6."""

    def solve(self, data: Dataset) -> Optimum:
        opt = super().solve(data)
        return Optimum(opt.theta, opt.value, 1e-6, "pretend inexact")


def test_output_perturbation_refuses_gap_above_public_bound() -> None:
    prob = InexactLBQuad()
    data = _data(prob, 20, 3)
    with pytest.raises(SolverGapExceeded):
        OutputPerturbation().release(data, prob, epsilon=1.0, delta=0.0,
                                     rng=np.random.default_rng(0))
    alg = OutputPerturbation(solver_gap=1e-6)
    r = alg.release(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(0))
    # The public bound inflates the sensitivity by 2·√(2·gap/Δ).
    expected = 2 * prob.lipschitz / 20 + 2 * math.sqrt(2e-6)
    assert r.info["noise_scale"] == pytest.approx(expected)


# --- the non-private reference -----------------------------------------------------------------
@pytest.mark.parametrize("prob", [LBLin(), LBQuad(signal=0.5)], ids=["lb_lin", "lb_quad"])
def test_nonprivate_excess_within_certified_gap(prob) -> None:  # type: ignore[no-untyped-def]
    data = _data(prob, 50, 4)
    r = NonPrivateERM().release(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(0))
    opt = prob.solve(data)
    assert math.isinf(r.ledger.epsilon)
    assert prob.risk(r.theta, data) - opt.value <= r.info["gap"] + 1e-12
    assert NonPrivateERM().rate_card() is None
