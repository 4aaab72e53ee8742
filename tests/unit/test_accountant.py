"""The RDP accountant of BST14's noisy SGD against the reference values in docs/bst14.md ("NoisySGD's noise, the accountant and NoisySGD-T").

Everything here is deterministic (no randomness at all): the tolerances only absorb the RDP order
grid (dp-accounting's defaults plus a few orders; the spec's table was computed with a possibly
different grid) and the calibration precision (~1e-5 relative in z).
"""

from __future__ import annotations

import math

import pytest

from dpbench.algorithms.noisy_sgd import paper_noise_multiplier
from dpbench.privacy.accountant import calibrate_noisy_sgd, noisy_sgd_epsilon

DELTA = 1e-6


def test_calibrated_z_matches_spec_and_reaccounts_to_target() -> None:
    # Issue acceptance point: NoisySGD's accountant mode spends exactly (never more than) the target.
    n = 1000
    steps = n * n - 1
    z = calibrate_noisy_sgd(1.0, DELTA, n, steps)
    assert z == pytest.approx(9.10, rel=0.01)  # docs/bst14.md, accountant table: z needed ≈ 9.10
    eps = noisy_sgd_epsilon(z, n, steps, DELTA)
    assert 0.99 <= eps <= 1.0
    # Minimality: 0.1 % less noise already overspends.
    assert noisy_sgd_epsilon(z * 0.999, n, steps, DELTA) > 1.0


def test_needed_z_does_not_depend_on_n() -> None:
    # Spec §2.1.4: z ≈ 9.1 for ε = 1, δ = 1e-6 at every n (n = 100 needs 9.15).
    z100 = calibrate_noisy_sgd(1.0, DELTA, 100, 100 * 100 - 1)
    assert z100 == pytest.approx(9.15, rel=0.01)
    assert noisy_sgd_epsilon(z100, 100, 100 * 100 - 1, DELTA) <= 1.0


def test_other_epsilons() -> None:
    # Spec §8.1 row n = 1000: ε = 2 needs z ≈ 4.82.
    z = calibrate_noisy_sgd(2.0, DELTA, 1000, 1000 * 1000 - 1)
    assert z == pytest.approx(4.82, rel=0.01)
    assert 0.99 * 2.0 <= noisy_sgd_epsilon(z, 1000, 1000 * 1000 - 1, DELTA) <= 2.0


@pytest.mark.parametrize("n, expected", [(100, 0.182), (1000, 0.170)])
def test_paper_sigma_accounts_to_about_0_17(n: int, expected: float) -> None:
    # Spec §2.1.4 / §8.1 (erratum §7.3 item 9): the paper's σ is ~5× more than needed.
    z = paper_noise_multiplier(n, 1.0, DELTA)
    assert z == pytest.approx(math.sqrt(8 * math.log(n / DELTA) * math.log(1 / DELTA)))
    eps = noisy_sgd_epsilon(z, n, n * n - 1, DELTA)
    assert eps == pytest.approx(expected, rel=0.03)


def test_epsilon_decreases_with_noise_and_zero_steps_is_free() -> None:
    n, steps = 50, 50 * 50 - 1
    eps = [noisy_sgd_epsilon(z, n, steps, DELTA) for z in (2.0, 4.0, 8.0, 16.0)]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert noisy_sgd_epsilon(3.0, n, 0, DELTA) == 0.0
    assert calibrate_noisy_sgd(1.0, DELTA, 1, 0) == 0.0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        calibrate_noisy_sgd(0.0, DELTA, 10, 99)
    with pytest.raises(ValueError):
        noisy_sgd_epsilon(1.0, 10, 99, 0.0)
