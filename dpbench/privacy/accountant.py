"""RDP accounting of BST14's noisy SGD (Algorithm 1), and calibration of its noise multiplier.

Algorithm 1 is DP-SGD with batch size 1, sampling probability 1/n (with and without replacement
coincide at size 1) and T = n² − 1 steps (docs/bst14.md, "NoisySGD's noise, the accountant and
NoisySGD-T"). Each step adds N(0, σ²I) to n·clip_L(∇ℓ), whose replace-one sensitivity is 2nL, so
the noise multiplier is z = σ/(2nL).

We account with dp-accounting's RDP accountant under the REPLACE_ONE relation (BST14 §1: neighbours
have the same size and differ in one entry), for the event
``SelfComposedDpEvent(SampledWithoutReplacementDpEvent(n, 1, GaussianDpEvent(z)), T)`` (Wang, Balle
and Kasiviswanathan 2019, Thm 27). The RDP orders are the library's defaults plus a few integer
orders filling its 64 → 128 → 256 gap, where the optimal order lies for small ε (without them
ε = 0.1 needs z ≈ 82.9 instead of ≈ 80.5). Reference values (docs/bst14.md, same section): z ≈ 9.1
is needed for ε = 1 at δ = 1e-6 (for any n), and the paper's z ≈ 47.9 (n = 1000) accounts to
ε ≈ 0.17.

One accountant evaluation costs about 0.2 s, so both functions are cached per process.
"""

from __future__ import annotations

import functools
import math

import dp_accounting
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS
from scipy.optimize import brentq

ACCOUNTING = "RDP (dp-accounting), sampled Gaussian, replace-one"

#: dp-accounting's default orders plus integer orders in its 64-256 gap (each costs ~15 ms).
RDP_ORDERS: tuple[float, ...] = tuple(
    sorted(set(DEFAULT_RDP_ORDERS) | {80, 96, 112, 160, 192, 224})
)

#: Relative precision of the calibrated noise multiplier.
Z_RTOL = 1e-5


def _check(n: int, steps: int, delta: float) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def noisy_sgd_epsilon(z: float, n: int, steps: int, delta: float) -> float:
    """The ε at which ``steps`` sampled-Gaussian steps (1 of n, noise multiplier z) are (ε, δ)-DP.

    Replace-one neighbours; ``z`` is σ divided by the replace-one sensitivity of one step.
    """
    return _epsilon(float(z), int(n), int(steps), float(delta))


@functools.lru_cache(maxsize=4096)
def _epsilon(z: float, n: int, steps: int, delta: float) -> float:
    _check(n, steps, delta)
    if steps == 0:
        return 0.0
    if not z > 0:
        return math.inf
    accountant = RdpAccountant(
        list(RDP_ORDERS), neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(n, 1, dp_accounting.GaussianDpEvent(z)),
        steps,
    )
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))


def calibrate_noisy_sgd(epsilon: float, delta: float, n: int, steps: int) -> float:
    """The smallest noise multiplier z (to relative precision ~1e-5) with accounted ε(z) ≤ ``epsilon``.

    The returned z always satisfies ``noisy_sgd_epsilon(z, n, steps, delta) <= epsilon``: the
    root of log ε(z) = log ε_target is found by Brent's method on log z inside a bracket found by
    doubling/halving from the Gaussian-mechanism guess √(2 ln(1.25/δ))/ε, and then the smallest
    evaluated z on the private side of the root is returned (stepping up if needed).
    Returns 0.0 when ``steps == 0`` (no noisy step, nothing to calibrate).
    """
    return _calibrate(float(epsilon), float(delta), int(n), int(steps))


@functools.lru_cache(maxsize=1024)
def _calibrate(epsilon: float, delta: float, n: int, steps: int) -> float:
    _check(n, steps, delta)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon}")
    if steps == 0:
        return 0.0
    seen: dict[float, float] = {}

    def eps_of(z: float) -> float:
        if z not in seen:
            seen[z] = noisy_sgd_epsilon(z, n, steps, delta)
        return seen[z]

    def f(u: float) -> float:
        e = eps_of(math.exp(u))
        # ε(z) is finite for every z > 0 here in practice; cap it so Brent's interpolation stays finite.
        return math.log(min(e, 1e300)) - math.log(epsilon)

    # Bracket [lo, hi] in z with ε(lo) > target ≥ ε(hi), by doubling or halving from a guess.
    z0 = math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    lo = hi = z0
    if eps_of(z0) > epsilon:
        while eps_of(hi) > epsilon:
            lo, hi = hi, hi * 2.0
            if hi > 1e12:
                raise ValueError(f"no noise multiplier reaches epsilon={epsilon} (delta={delta})")
    else:
        while eps_of(lo) <= epsilon:
            lo, hi = lo / 2.0, lo
            if lo < 1e-6:  # (essentially) any noise suffices
                return hi
    brentq(f, math.log(lo), math.log(hi), xtol=Z_RTOL / 4)
    # The smallest evaluated z on the private side; Brent's last iterates bracket the root.
    z = min(zz for zz, e in seen.items() if e <= epsilon)
    z_bad = max(zz for zz, e in seen.items() if e > epsilon)
    while z > z_bad * (1 + Z_RTOL):
        mid = math.sqrt(z * z_bad)
        if eps_of(mid) <= epsilon:
            z = mid
        else:
            z_bad = mid
    return z
