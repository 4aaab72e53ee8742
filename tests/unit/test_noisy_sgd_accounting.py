"""The dominating pair of batch-1 noisy SGD under replace-one, and its PLD accountant.

docs/bst14.md, "Which accountant is certified (replace-one, batch 1)": one step's laws are
P = qN(b) + (1 − q)N(a), Q = qN(b′) + (1 − q)N(a) (units of nL, noise s = 2z, q = 1/n), and the
pair P* with the profile of R = (qN(2) + (1 − q)N(0), N(0)) for γ ≥ 1 and of the swapped R′ for
γ < 1 dominates every configuration. Everything here is deterministic.
"""

from __future__ import annotations

import itertools
import math
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_pmf, privacy_loss_mechanism
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution
from scipy.stats import norm

from dpbench.privacy.accountant import (
    calibrate_noisy_sgd_pld,
    dominating_step_pmf,
    noisy_sgd_epsilon,
    noisy_sgd_epsilon_pld,
    noisy_sgd_pld,
)
from dpbench.privacy.hockey_stick import mixture_hockey_stick

EPS = np.array([-3, -1, -0.3, -0.05, 0, 0.01, 0.1, 0.3, 1, 2, 4], dtype=float)


def balle_wang(mu: float, eps: np.ndarray) -> np.ndarray:
    """Balle and Wang 2018, Thm 8: H_{e^ε}(N(μ, 1) ‖ N(0, 1))."""
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def h_star(q: float, s: float, eps: np.ndarray) -> np.ndarray:
    """H of the dominating pair: R for γ ≥ 1, R′ = (N(0), qN(2) + (1 − q)N(0)) for γ < 1."""
    remove = mixture_hockey_stick([0.0], [2.0], [0.0], q, s, np.exp(eps))
    add = mixture_hockey_stick([0.0], [0.0], [2.0], q, s, np.exp(eps))
    return np.where(eps >= 0, remove, add)


# --- (a) the exact-H integrator ------------------------------------------------------------------

@pytest.mark.parametrize("s", [0.5, 2.0, 20.0])
@pytest.mark.parametrize("gap", [0.1, 1.0, 2.0])
def test_integrator_matches_the_gaussian_closed_form(s: float, gap: float) -> None:
    expected = balle_wang(gap / s, EPS)
    line = mixture_hockey_stick([0.0], [gap], [0.0], 1.0, s, np.exp(EPS))
    assert np.max(np.abs(line - expected)) < 1e-6
    # The 2-D path: a off the line through b and b′ carries no weight when q = 1.
    plane = mixture_hockey_stick([0.3, 0.8], [gap / 2, 0.0], [-gap / 2, 0.0], 1.0, s,
                                 np.exp(EPS))
    assert np.max(np.abs(plane - expected)) < 1e-6


def test_integrator_matches_the_remove_pair_closed_form() -> None:
    # For γ ≥ 1, H_γ(R) = q·δ_Gauss(2/s, log(1 + (γ − 1)/q)) (advanced joint convexity is an
    # identity for R); checks the three-term mixture solver, not just two Gaussians.
    pos = EPS[EPS >= 0]
    for q in (0.1, 0.001):
        for s in (0.5, 2.0, 20.0):
            h = mixture_hockey_stick([0.0], [2.0], [0.0], q, s, np.exp(pos))
            closed = q * balle_wang(2.0 / s, np.log1p(np.expm1(pos) / q))
            assert h == pytest.approx(closed, rel=1e-9, abs=1e-300)


# --- (b) no configuration exceeds the dominating pair --------------------------------------------

def _unit(deg: float) -> list[float]:
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


# The attaining ones (a = b′, a = b) and the ones that came closest in
# scripts/noisy_sgd_dominating_pair.py (b′ almost antipodal, a on the circle, …).
CONFIGS = [
    ([-1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]),   # a = b′: attains P* for γ ≥ 1
    ([1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]),    # a = b: attains P* for γ < 1
    ([0.0, 0.0], [1.0, 0.0], [-1.0, 0.0]),    # the symmetric pair (iii)
    ([-1.0, 0.0], [1.0, 0.0], _unit(179)),    # ratio 1 − 4e-7 in the sweep
    ([-1.0, 0.0], [1.0, 0.0], _unit(150)),
    (_unit(30), [1.0, 0.0], [-1.0, 0.0]),     # 2-D
    (_unit(120), [1.0, 0.0], _unit(200)),     # 2-D, b and b′ not antipodal
]

#: Slack: H is exact to ~1e-12 relative on a line; in the plane the trapezoid rule over x₂ adds
#: its halving estimate ``err`` (≤ 1e-4·H, asserted; 0 on a line) and ~1e-13 of rounding. The
#: theorem itself has no slack, so anything beyond these is a real violation.
REL, ABS = 1e-9, 1e-12


@pytest.mark.parametrize("a, b, b_prime", CONFIGS)
def test_no_configuration_exceeds_the_dominating_pair(a, b, b_prime) -> None:
    for q in (0.1, 0.001):
        for s in (0.5, 2.0, 20.0):
            h, err = mixture_hockey_stick(a, b, b_prime, q, s, np.exp(EPS), n_outer=401,
                                          error=True)
            assert np.all(err <= 1e-4 * np.maximum(h, 1e-3))  # the plane rule is converged
            assert np.all(h <= h_star(q, s, EPS) * (1 + REL) + ABS + err)


def test_the_dominating_pair_is_attained_on_both_sides() -> None:
    # Tightness: no smaller pair dominates (a = b′ gives R for γ ≥ 1, a = b gives R′ for γ < 1).
    for q, s in ((0.1, 0.5), (0.001, 2.0)):
        star = h_star(q, s, EPS)
        remove_like = mixture_hockey_stick([-1.0], [1.0], [-1.0], q, s, np.exp(EPS))
        add_like = mixture_hockey_stick([1.0], [1.0], [-1.0], q, s, np.exp(EPS))
        pos = EPS >= 0
        assert remove_like[pos] == pytest.approx(star[pos], rel=1e-9, abs=1e-300)
        assert add_like[~pos] == pytest.approx(star[~pos], rel=1e-9)


def test_smaller_candidates_do_not_dominate() -> None:
    # dp-accounting's REPLACE_ONE pair at noise multiplier 2z (the symmetric pair) is exceeded for
    # γ > 1 by the a = b′ configuration, and R alone is exceeded for γ < 1 by a = b.
    q, s = 0.01, 2.0
    symmetric = mixture_hockey_stick([0.0], [1.0], [-1.0], q, s, np.exp(EPS))
    remove = mixture_hockey_stick([0.0], [2.0], [0.0], q, s, np.exp(EPS))
    remove_like = mixture_hockey_stick([-1.0], [1.0], [-1.0], q, s, np.exp(EPS))
    add_like = mixture_hockey_stick([1.0], [1.0], [-1.0], q, s, np.exp(EPS))
    assert np.all(remove_like[EPS > 0] > 1.01 * symmetric[EPS > 0])
    near = (EPS < 0) & (EPS > -0.5)  # (far below 0 both sit at 1 − γ to within 1e-6)
    assert np.all(add_like[near] > remove[near] + 1e-6)


# --- (c) the PLD accountant ------------------------------------------------------------------

@pytest.mark.parametrize("z, n, interval", [(2.0, 10, 1e-3), (9.0, 100, 1e-4), (1.0, 1, 1e-3)])
def test_one_step_pld_is_the_dominating_pair(z: float, n: int, interval: float) -> None:
    # At grid points connect-the-dots reproduces the pair's δ exactly; between them it is above.
    # A PLD built from R alone (no mirror), from R′, or with the wrong scale fails this.
    pld = noisy_sgd_pld(z, n, 1, interval=interval)
    exact = h_star(1.0 / n, 2.0 * z, EPS)
    assert pld.get_delta_for_epsilon(EPS) == pytest.approx(exact, abs=1e-12)
    between = EPS + interval / 3
    assert np.all(pld.get_delta_for_epsilon(between) >= h_star(1.0 / n, 2.0 * z, between) - 1e-12)
    lower, probs, infinity = dominating_step_pmf(z, n, interval)
    losses = (lower + np.arange(probs.size)) * interval
    assert probs.min() >= 0 and probs.sum() + infinity == pytest.approx(1.0, abs=1e-12)
    assert probs @ np.exp(-losses) <= 1.0 + 1e-12  # a genuine pair of distributions


def test_pld_matches_an_independent_construction_with_dp_accounting() -> None:
    # dp-accounting's own connect-the-dots from the profile (REMOVE's δ for ε ≥ 0, ADD's for
    # ε < 0, its closed forms) and its own FFT self-composition.
    z, n, steps, interval = 9.15, 100, 9999, 1e-4
    kwargs = {"sensitivity": 1.0, "sampling_prob": 1.0 / n}
    remove = privacy_loss_mechanism.GaussianPrivacyLoss(
        z, adjacency_type=privacy_loss_mechanism.AdjacencyType.REMOVE, **kwargs)
    add = privacy_loss_mechanism.GaussianPrivacyLoss(
        z, adjacency_type=privacy_loss_mechanism.AdjacencyType.ADD, **kwargs)
    top = math.ceil(remove.connect_dots_bounds().epsilon_upper / interval)
    grid = np.arange(-top, top + 1) * interval
    deltas = np.where(grid >= 0, remove.get_delta_for_epsilon(grid),
                      add.get_delta_for_epsilon(grid))
    reference = PrivacyLossDistribution(pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(
        interval, -top, top, deltas)).self_compose(steps)
    ours = noisy_sgd_epsilon_pld(z, n, steps, 1e-6, interval=interval)
    assert ours == pytest.approx(reference.get_epsilon_for_delta(1e-6), rel=1e-4)
    # Our composition and ε search against dp-accounting's on the same one-step PLD.
    lower, probs, infinity = dominating_step_pmf(z, n, interval)
    theirs = PrivacyLossDistribution(
        pld_pmf.DensePLDPmf(interval, lower, probs, infinity, True)).self_compose(steps)
    ours_pld = noisy_sgd_pld(z, n, steps, interval=interval)
    for eps in (0.2, 0.45, 0.8):
        assert ours_pld.get_delta_for_epsilon(eps) == pytest.approx(
            theirs.get_delta_for_epsilon(eps), rel=1e-6, abs=1e-12)
    assert ours_pld.get_epsilon_for_delta(1e-6) == pytest.approx(
        theirs.get_epsilon_for_delta(1e-6), rel=1e-6)


def test_pld_epsilon_lies_between_the_per_direction_pairs_and_rdp() -> None:
    n, steps, delta, z = 100, 9999, 1e-6, 9.15
    eps_pld = noisy_sgd_epsilon_pld(z, n, steps, delta)
    assert eps_pld < 0.5 * noisy_sgd_epsilon(z, n, steps, delta)  # RDP: ≈ 1.0
    # dp-accounting's ADD_OR_REMOVE Poisson PLD composes R and R′ separately (max of R^T, R′^T):
    # P* dominates both, and mixing directions across steps costs visibly more (≈ 4 %).
    acc = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                          value_discretization_interval=1e-5)
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(1.0 / n, dp_accounting.GaussianDpEvent(z)), steps))
    eps_per_direction = acc.get_epsilon(delta)
    assert 1.01 * eps_per_direction < eps_pld < 1.1 * eps_per_direction


def test_coarser_grid_gives_a_larger_epsilon() -> None:
    n, steps, delta, z = 100, 9999, 1e-6, 9.15
    fine = noisy_sgd_epsilon_pld(z, n, steps, delta)
    # (pessimistic rounding: a 57× coarser grid overstates ε by ≈ 6 %)
    assert noisy_sgd_epsilon_pld(z, n, steps, delta, interval=1e-3) > 1.03 * fine
    assert fine == pytest.approx(noisy_sgd_epsilon_pld(z, n, steps, delta, interval=5e-6),
                                 rel=1e-3)


# --- (d) calibration --------------------------------------------------------------------------

def test_calibration_contract() -> None:
    n, steps, delta = 100, 9999, 1e-6
    z = calibrate_noisy_sgd_pld(1.0, delta, n, steps)
    assert noisy_sgd_epsilon_pld(z, n, steps, delta) <= 1.0
    assert noisy_sgd_epsilon_pld(z / (1 + 1e-4), n, steps, delta) > 1.0  # minimal to ~1e-5
    assert 3.0 < z < 6.0  # RDP needs z ≈ 9.15 (docs/bst14.md) and overspends at this z:
    assert noisy_sgd_epsilon(z, n, steps, delta) > 1.5
    eps = [noisy_sgd_epsilon_pld(zz, n, steps, delta) for zz in (2.0, 4.0, 8.0, 16.0)]
    assert all(x > y for x, y in itertools.pairwise(eps))


def test_degenerate_and_bad_arguments() -> None:
    assert calibrate_noisy_sgd_pld(1.0, 1e-6, 10, 0) == 0.0
    assert noisy_sgd_epsilon_pld(3.0, 10, 0, 1e-6) == 0.0
    assert noisy_sgd_epsilon_pld(0.0, 10, 5, 1e-6) == math.inf
    with pytest.raises(ValueError):
        calibrate_noisy_sgd_pld(0.0, 1e-6, 10, 99)
    with pytest.raises(ValueError):
        noisy_sgd_epsilon_pld(1.0, 10, 99, 0.0)


# --- (e) tiny noise: losses beyond a double's exponential -------------------------------------

def _exact_one_step_epsilon(z: float, n: int, delta: float) -> float:
    """ε(δ) of one step of the dominating pair, from its closed form in log space (for ε ≥ 0:
    H_γ(R) = q·δ_Gauss(μ, a), a = log(1 + (γ − 1)/q), μ = 1/z; Balle and Wang 2018, Thm 8),
    valid however large μ is."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    mu, q = 1.0 / z, 1.0 / n

    def h(eps: float) -> float:
        a = eps - math.log(q) + math.log1p(-(1.0 - q) * math.exp(-eps)) if eps > 0 else 0.0
        return q * (math.exp(log_ndtr(-a / mu + mu / 2))
                    - math.exp(a + log_ndtr(-a / mu - mu / 2)))

    top = 1.0
    while h(top) > delta:
        top *= 2.0
    return brentq(lambda e: h(e) - delta, 0.0, top, xtol=1e-12 * top, rtol=1e-14)


TINY_Z = [0.25, 0.05, 0.03, 0.02, 0.01, 1e-3, 1e-4]


@pytest.mark.parametrize("n", [10, 50])
@pytest.mark.parametrize("z", TINY_Z)
def test_one_step_epsilon_is_exact_to_a_grid_cell_for_tiny_noise(z: float, n: int) -> None:
    # Per-step losses of hundreds to 10⁸ nats (z ≤ 0.03) once overflowed e^l: the grid came out
    # as NaN, and ε came out as 0 (a claim of perfect privacy for no noise) or raised. The PLD
    # must stay above the exact ε and within one grid cell of it (connect-the-dots is exact at
    # grid points), with no floating-point warning.
    delta = 1e-5
    exact = _exact_one_step_epsilon(z, n, delta)
    interval = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        from dpbench.privacy.accountant import pld_interval

        interval = pld_interval(z, n, 1)
        eps = noisy_sgd_epsilon_pld(z, n, 1, delta)
    assert exact * (1 - 1e-9) <= eps <= exact + interval * (1 + 1e-6) + 1e-9 * exact


def test_composed_epsilon_is_sane_across_regimes() -> None:
    # Decreasing in z from z = 1e-4 (losses ~10⁸) to z = 2, and between one step and basic
    # composition: ε_1(δ) ≤ ε_T(δ) ≤ T·ε_1(δ/T).
    n, steps, delta = 50, 100, 1e-5
    zs = np.geomspace(1e-4, 2.0, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        eps = [noisy_sgd_epsilon_pld(z, n, steps, delta) for z in zs]
        for z, e in zip(zs, eps):
            assert math.isfinite(e) and e > 0
            one = noisy_sgd_epsilon_pld(z, n, 1, delta)
            assert one <= e * (1 + 1e-9)
            assert e <= steps * noisy_sgd_epsilon_pld(z, n, 1, delta / steps) * (1 + 1e-9)
    assert all(x > y for x, y in itertools.pairwise(eps))


def test_profile_and_calibration_for_tiny_noise() -> None:
    from dpbench.privacy.accountant import noisy_sgd_profile

    n, delta = 50, 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        profile = noisy_sgd_profile(0.01, n, 1, delta)
        # A huge target ε: the calibration once ran into z where ε read 0, then overflowed.
        z = calibrate_noisy_sgd_pld(1e4, delta, n, 1)
        assert noisy_sgd_epsilon_pld(z, n, 1, delta) <= 1e4
        assert noisy_sgd_epsilon_pld(z / (1 + 1e-4), n, 1, delta) > 1e4
    deltas = np.asarray(profile.deltas)
    assert np.all(np.diff(deltas) <= 0) and deltas.min() >= 0 and deltas.max() <= 1
    # The sampled row is all but revealed at z = 0.01: δ(ε) ≈ q for every tabulated ε ≤ 10.
    exact = h_star(1.0 / n, 0.02, np.asarray(profile.epsilons))
    assert np.all(deltas >= exact - 1e-12)
    assert deltas[-1] == pytest.approx(1.0 / n, rel=1e-3)


# --- (e) grid precision and the switch to RDP (docs/bst14.md, "Grid precision") --------------

# Cells where the starting grid alone was 1–15 % too pessimistic (the ledger then overstated ε,
# and the calibration overstated z), and ordinary ones: (n, T, z).
PRECISION_CELLS = [(1000, 999_999, 1.6126), (1000, 1000, 1.0), (1000, 10, 1.0), (1000, 1, 0.5),
                   (1000, 100_000, 0.5), (10, 1000, 0.25), (10, 100, 4.0), (1000, 10_000, 20.0)]


@pytest.mark.parametrize(("n", "steps", "z"), PRECISION_CELLS)
def test_ledger_epsilon_is_within_1e_3_of_the_converged_pld(n: int, steps: int, z: float) -> None:
    # The reference is a grid eight times finer than the one the ledger uses; the error shrinks
    # about fourfold per halving, so the reference is ~64× closer to the limit. Acceptance 1e-3;
    # the refinement's own tolerance is 2.5e-4 (measured ≤ 1.2e-4 over benchmarks/
    # bench_accountant.py's 98 cells), so this cannot fail by chance: it fails when the grid is
    # not refined (the starting grid is 1.5e-2 off at (1000, 1000, 1.0)).
    from dpbench.privacy.accountant import converged_interval, noisy_sgd_epsilon_certified

    delta = 1e-6 if steps == 999_999 else 1e-5
    eps, how = noisy_sgd_epsilon_certified(z, n, steps, delta)
    reference = noisy_sgd_epsilon_pld(z, n, steps, delta,
                                      interval=converged_interval(z, n, steps, delta) / 8)
    assert how.startswith("PLD")
    assert reference <= eps <= reference * (1 + 1e-3)


def test_calibration_at_epsilon_4_is_the_converged_one() -> None:
    # The row: the coarse grid calibrated z = 1.6126 (its ledger said 4.0424 where the
    # converged PLD gives 4.0012); the converged calibration is z ≈ 1.6016.
    from dpbench.privacy.accountant import calibrate_noisy_sgd_certified

    n, steps, delta = 1000, 999_999, 1e-6
    z = calibrate_noisy_sgd_certified(4.0, delta, n, steps)
    assert z == pytest.approx(1.6016, abs=2e-4)
    assert noisy_sgd_epsilon_pld(z, n, steps, delta) <= 4.0
    assert noisy_sgd_epsilon_pld(z / (1 + 1e-4), n, steps, delta) > 4.0


def test_calibration_is_minimal_across_the_switch_to_rdp() -> None:
    # ε = 128, n = 4, T = 15: the PLD certifies z = 0.25 (ε ≈ 97.7); below 0.25 only RDP
    # certifies, and it needs z ≈ 0.32. The old rule took RDP's 0.3197 (ε spent 67.25).
    from dpbench.privacy.accountant import (
        PLD_MIN_Z,
        calibrate_noisy_sgd_certified,
        noisy_sgd_epsilon_certified,
    )

    n, steps, delta = 4, 15, 1e-5
    z = calibrate_noisy_sgd_certified(128.0, delta, n, steps)
    assert z == PLD_MIN_Z
    eps, how = noisy_sgd_epsilon_certified(z, n, steps, delta)
    assert how.startswith("PLD") and 90 < eps <= 128
    below = math.nextafter(PLD_MIN_Z, 0.0)
    assert noisy_sgd_epsilon_certified(below, n, steps, delta)[0] > 128
    # Where RDP certifies below the switch, its calibration is the answer.
    z_big = calibrate_noisy_sgd_certified(5000.0, delta, n, steps)
    assert z_big < PLD_MIN_Z
    eps_big, how_big = noisy_sgd_epsilon_certified(z_big, n, steps, delta)
    assert how_big.startswith("RDP") and eps_big <= 5000.0
    assert noisy_sgd_epsilon_certified(z_big / (1 + 1e-4), n, steps, delta)[0] > 5000.0
