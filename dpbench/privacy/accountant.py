"""RDP and PLD accounting of BST14's noisy SGD (Algorithm 1); calibration of its noise multiplier.

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

**PLD accountant of a dominating pair** (:func:`noisy_sgd_epsilon_pld`,
:func:`calibrate_noisy_sgd_pld`; docs/bst14.md, "Which accountant is certified (replace-one,
batch 1)"). In units of the ball nL that holds every n·clip_L(∇ℓ), one step's laws on replace-one
neighbours are mixtures qN(b) + (1 − q)N(a) against qN(b′) + (1 − q)N(a) with noise s = 2z and
q = 1/n (worst case by joint convexity of the hockey-stick divergence). For γ ≥ 1 their
hockey-stick divergence H_γ is at most that of the pair R = (qN(2) + (1 − q)N(0), N(0)): write
H_γ(P‖Q) = q·H_γ′(N(b) ‖ βN(b′) + (1 − β)N(a)) with γ′ = 1 + (γ − 1)/q, β = γ/γ′ (Balle, Barthe
and Gaboardi 2018, "advanced joint convexity"), then use convexity in the second argument and
‖b − b′‖, ‖b − a‖ ≤ 2. For γ < 1, H_γ(P‖Q) = 1 − γ + γ·H_{1/γ}(Q‖P) and the configurations are
closed under swapping b and b′, so the bound is the swapped pair R′ = (N(0), qN(2) + (1 − q)N(0)).
Both bounds are attained (common rows at b′, resp. at b), so the tight dominating pair (P*, Q*)
has privacy profile δ_R(ε) for ε ≥ 0 and δ_R′(ε) for ε < 0. Dominating pairs compose (Zhu, Dong
and Wang 2022), so the T-fold product of (P*, Q*) certifies the adaptive T-step mechanism.

Its privacy-loss distribution (PLD) is ω_R on losses > 0, the mirror image e^{−l}·ω_R(l) at −l,
and the remaining mass at 0. We discretise ω_R on a grid of spacing ``interval`` pessimistically
(the mass of each grid cell is split between its two ends so that both the P- and the Q-mass are
kept, which can only raise every δ(ε): Doroshenko, Ghazi, Kamath, Kumar and Manurangsi 2022,
"connect the dots"), integrate each cell with Gauss–Legendre (no cancellation, so the grid can be
fine), send the loss tail beyond P-mass 1e-20 to +∞, compose T times by FFT inside Chernoff
bounds whose neglected mass (1e-15) also goes to +∞, and read ε(δ) off the result. Every step of
this is an upper bound except the floating-point rounding of the FFT, whose error grows like T:
an allowance (0.1·T·unit roundoff, from measurements) is charged to +∞, and the FFT switches to
long double when that allowance would exceed 1e-3·δ (e.g. T = 10⁸). dp-accounting has no event for
this pair: its ADD_OR_REMOVE_ONE Poisson PLD composes R and R′ separately and takes the larger δ,
justified when one neighbouring pair is "remove" at every step, whereas replace-one steps can
switch between the two adaptively (that figure is attained, so it is a lower bound); its
REPLACE_ONE pair at 2z is smaller still and falls below that lower bound (docs/bst14.md).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr, ndtri

from .profile import PROFILE_EPSILONS, PrivacyProfile

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

# dp-accounting, scipy.optimize and scipy.fft are imported where they are used: dp-accounting
# alone takes ~0.8 s (scipy.signal), which a command that computes no account (status, a resume
# with nothing left, a run whose cells all go to workers) should not pay (issue 17).

ACCOUNTING = "RDP (dp-accounting), sampled Gaussian, replace-one"
ACCOUNTING_PLD = "PLD of the dominating pair of batch-1 sampling, replace-one (pessimistic)"


@functools.cache
def rdp_orders() -> tuple[float, ...]:
    """dp-accounting's default orders plus integer orders in its 64-256 gap (each costs
    ~15 ms)."""
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    return tuple(sorted(set(DEFAULT_RDP_ORDERS) | {80, 96, 112, 160, 192, 224}))


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
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    accountant = RdpAccountant(
        list(rdp_orders()), neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
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
    return _smallest_z(lambda z: noisy_sgd_epsilon(z, n, steps, delta), epsilon, delta, n, steps)


def _smallest_z(eps_fn, epsilon: float, delta: float, n: int, steps: int,
                start: float | None = None, factor: float = 2.0) -> float:
    """Smallest evaluated z with eps_fn(z) ≤ epsilon, to relative precision ``Z_RTOL``, for an
    ε(z) that decreases with z: a bracket is found from ``start`` (default the Gaussian
    mechanism's √(2 ln(1.25/δ))/ε) by multiplying or dividing by ``factor``, then Brent's method
    on log z, then bisection down to the precision."""
    _check(n, steps, delta)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon}")
    if steps == 0:
        return 0.0
    seen: dict[float, float] = {}

    def eps_of(z: float) -> float:
        if z not in seen:
            seen[z] = eps_fn(z)
        return seen[z]

    def f(u: float) -> float:
        e = eps_of(math.exp(u))
        # ε(z) is finite for every z > 0 here in practice; cap it so Brent's interpolation stays finite.
        return math.log(min(max(e, 1e-300), 1e300)) - math.log(epsilon)

    # Bracket [lo, hi] in z with ε(lo) > target ≥ ε(hi), by growing or shrinking from a guess.
    z0 = math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon if start is None else start
    lo = hi = z0
    if eps_of(z0) > epsilon:
        while eps_of(hi) > epsilon:
            lo, hi = hi, hi * factor
            if hi > 1e12:
                raise ValueError(f"no noise multiplier reaches epsilon={epsilon} (delta={delta})")
    else:
        while eps_of(lo) <= epsilon:
            lo, hi = lo / factor, lo
            if lo < 1e-6:  # (essentially) any noise suffices
                return hi
    from scipy.optimize import brentq

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


# --- PLD accountant of the dominating pair (docs/bst14.md, "Which accountant is certified") -------

#: P-mass of one step's privacy-loss tail sent to +∞ (pessimistic; T·1e-20 ≪ any δ used here).
PLD_STEP_TAIL = 1e-20
#: Mass the T-fold composition may drop outside its Chernoff bounds, added to +∞ (pessimistic).
PLD_COMPOSE_TAIL = 1e-15
#: Allowance for the FFT rounding of the T-fold composition: its error in δ was at most
#: 0.015·T·u (u the unit roundoff) at T = 10⁶ and 10⁸ (double against long double); we charge
#: this factor times T·u to +∞, and use a long-double FFT when that would exceed 1e-3·δ.
PLD_ROUNDING_FACTOR = 0.1
PLD_ROUNDING_SHARE = 1e-3
#: The loss grid resolves one step's largest finite loss into at least this many cells …
PLD_CELLS_PER_STEP = 1000
#: … unless the composed PLD would then need more than this many cells (see pld_interval).
PLD_MAX_CELLS = 4_000_000
#: Coarsest grid spacing.
PLD_INTERVAL_MAX = 2e-5

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(10)


def _step_loss(x: np.ndarray | float, mu: float, q: float) -> np.ndarray | float:
    """Privacy loss of R = (qN(μ, 1) + (1 − q)N(0, 1), N(0, 1)) at x (increasing in x)."""
    t = mu * np.asarray(x, dtype=float) - 0.5 * mu * mu
    with np.errstate(divide="ignore"):  # q = 1: log(1 − q) = −∞, the loss is t
        return np.logaddexp(np.log1p(-q), math.log(q) + t)  # log(1 − q + q·e^t), no overflow


#: Largest argument of a double's exponential (e^709.78… is the largest double). Grids whose
#: losses reach beyond it (a noise multiplier z below about 0.03, met only while calibrating ε
#: in the hundreds or more) take rescaled formulas that never overflow; within it the original
#: formulas are kept, so that every account computed before is unchanged to the last bit.
_EXP_MAX = math.log(np.finfo(np.float64).max)


def _inverse_loss(losses: np.ndarray, mu: float, q: float) -> np.ndarray:
    """x(l), the inverse of :func:`_step_loss` on losses ≥ 0 (x(0) = μ/2):
    μx − μ²/2 = log(1 + (e^l − 1)/q) = l − log q + log(1 − (1 − q)e^{−l}), the second form
    where e^l/q overflows."""
    with np.errstate(over="ignore"):
        x = np.log1p(np.expm1(losses) / q)
    big = ~np.isfinite(x)
    if big.any():
        far = losses[big]
        x[big] = far - math.log(q) + np.log1p(-(1.0 - q) * np.exp(-far))
    return (x + 0.5 * mu * mu) / mu


def _exp_safe(losses: np.ndarray) -> bool:
    """Whether every loss of a grid is within ±:data:`_EXP_MAX` (the original formulas hold)."""
    return losses.size == 0 or (losses[0] >= -_EXP_MAX and losses[-1] <= _EXP_MAX)


def _scaled_q_tails(probs: np.ndarray, interval: float) -> np.ndarray:
    """S_j = Σ_{i ≥ j} probs_i·e^{−(l_i − l_j)} on a grid of spacing ``interval``: the Q-mass of
    the losses ≥ l_j is e^{−l_j}·S_j.

    For grids beyond ±:data:`_EXP_MAX`, where the direct suffix sum of probs·e^{−l} over- or
    underflows (0·∞ = NaN, or a spurious δ ≤ 0, i.e. an ε far too small). The recurrence
    S_j = probs_j + e^{−Δ}·S_{j+1} only ever multiplies by e^{−Δ} ≤ 1.
    """
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -math.exp(-interval)], probs[::-1])[::-1]


def _largest_step_loss(z: float, n: int) -> float:
    mu, q = 1.0 / z, 1.0 / n
    return float(_step_loss(mu - ndtri(PLD_STEP_TAIL), mu, q))


def pld_interval(z: float, n: int, steps: int) -> float:
    """The starting spacing of the privacy-loss grid (:func:`converged_interval` refines it).

    One step's largest finite loss over ``PLD_CELLS_PER_STEP``, but no finer than the composed
    loss spread over ``PLD_MAX_CELLS`` (spread ≈ T·v/2 + 16·√(T·v), v = q²·(e^{μ²} − 1) the
    variance of one step's loss, μ = 1/z, q = 1/n) and no coarser than ``PLD_INTERVAL_MAX``.
    Any spacing gives an upper bound, but this one alone can be far from converged: 15 % too
    large at n = 1000, z = 1, and 1 % at n = 1000, z = 1.61 (docs/bst14.md, "Grid precision").
    """
    mu, q = 1.0 / z, 1.0 / n
    v = q * q * math.expm1(min(mu * mu, 700.0))
    spread = steps * v / 2 + 16.0 * math.sqrt(steps * v)
    per_step = _largest_step_loss(z, n) / PLD_CELLS_PER_STEP
    # Tiny z (huge losses, e.g. while calibrating a very large ε): one step alone needs the
    # coarser per-step spacing, or its grid would not fit in memory (any spacing is valid).
    return float(max(per_step, min(PLD_INTERVAL_MAX, spread / PLD_MAX_CELLS)))


def dominating_step_pmf(z: float, n: int, interval: float) -> tuple[int, np.ndarray, float]:
    """One step's pessimistic PLD of the dominating pair (P*, Q*), on the grid ``interval``·ℤ.

    Returns ``(lower, probs, infinity_mass)``: ``probs[i]`` is the P*-mass at loss
    (lower + i)·interval. Losses > 0 are those of R = (qN(μ) + (1 − q)N(0), N(0)), μ = 1/z,
    q = 1/n, with each grid cell's mass split between its ends keeping its P- and Q-mass; losses
    < 0 mirror them (mass e^{−l}·ω(l) at −l); the rest sits at 0 (module docstring).
    """
    if not (z > 0 and math.isfinite(z)):
        raise ValueError(f"z must be finite and > 0, got {z}")
    mu, q = 1.0 / z, 1.0 / n
    k = max(1, math.ceil(_largest_step_loss(z, n) / interval))
    losses = np.arange(k + 1) * interval
    x = _inverse_loss(losses, mu, q)
    lo, hi = x[:-1], x[1:]
    half = 0.5 * (hi - lo)
    nodes = 0.5 * (hi + lo)[:, None] + half[:, None] * _GL_NODES
    density = ((1.0 - q) * np.exp(-0.5 * nodes**2)
               + q * np.exp(-0.5 * (nodes - mu) ** 2)) / math.sqrt(2.0 * math.pi)
    # Position t ∈ [0, interval] of the loss inside its cell; the split weights keep the cell's
    # P-mass and its Q-mass E_P[e^{−L}] (written with expm1 to stay exact for tiny cells).
    t = np.clip(_step_loss(nodes, mu, q) - losses[:-1, None], 0.0, interval)
    if interval <= _EXP_MAX:
        em = math.expm1(interval)
        to_low = ((density * np.expm1(interval - t) / em) @ _GL_WEIGHTS) * half
        to_high = ((density * np.exp(interval - t) * np.expm1(t) / em) @ _GL_WEIGHTS) * half
    else:  # the same shares with e^interval (which overflows) divided out, for tiny z
        em = math.expm1(-interval)
        to_low = ((density * np.exp(-t) * np.expm1(t - interval) / em) @ _GL_WEIGHTS) * half
        to_high = ((density * np.expm1(-t) / em) @ _GL_WEIGHTS) * half
    positive = to_high.copy()  # masses at losses interval·1 … interval·k
    positive[:-1] += to_low[1:]
    infinity = float((1.0 - q) * ndtr(-x[-1]) + q * ndtr(mu - x[-1]))
    negative = positive * np.exp(-losses[1:])
    atom = 1.0 - positive.sum() - negative.sum() - infinity
    if atom < -1e-12:
        raise ArithmeticError(f"mirrored PLD has negative mass at 0 ({atom})")
    probs = np.concatenate([negative[::-1], [max(atom, 0.0)], positive])
    return -k, probs, infinity


def _self_compose(lower: int, probs: np.ndarray, infinity: float, steps: int,
                  dtype: type = np.float64) -> tuple[int, np.ndarray, float]:
    """T-fold composition of a grid PLD: one FFT raised to the T-th power, inside Chernoff bounds.

    As dp-accounting's ``self_compose``, but the Chernoff orders sit around the optimum of a
    Gaussian approximation (its default orders suit a few compositions, not 10⁶, and give a
    window up to 20 times too wide), and the FFT can run in long double. The mass outside the
    window (≤ ``PLD_COMPOSE_TAIL``) is added to +∞. Raising the transform to the T-th power
    multiplies its rounding error by T; :func:`_composed` charges an allowance for it.
    """
    idx = np.arange(probs.size, dtype=float)
    p = probs / probs.sum()
    mean = float(p @ idx)
    var = max(float(p @ (idx - mean) ** 2), 1e-12)
    best = math.sqrt(2.0 * math.log(2.0 / PLD_COMPOSE_TAIL) / (steps * var))
    orders = best * np.geomspace(1 / 30, 30, 31)
    from dp_accounting.pld import common as pld_common
    from scipy import fft

    # At very small z an order's log-MGF can overflow inside scipy's logsumexp: that order's
    # bound is then infinite, and the library skips non-finite bounds (the window stays valid).
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        lo, hi = pld_common.compute_self_convolve_bounds(
            probs, steps, PLD_COMPOSE_TAIL, orders=np.concatenate([-orders, orders]))
    size = hi - lo + 1
    length = fft.next_fast_len(max(size, probs.size), real=True)
    out = fft.irfft(fft.rfft(probs.astype(dtype), length) ** steps, length)
    out = np.roll(out, -lo)[:size].astype(np.float64)
    infinity = PLD_COMPOSE_TAIL - math.expm1(steps * math.log1p(-infinity))
    return lower * steps + lo, out, infinity


def _epsilon_of(lower: int, probs: np.ndarray, infinity: float, interval: float,
                delta: float) -> float:
    """Smallest ε ≥ 0 with δ(ε) ≤ delta for a grid PLD (vectorised; same value as
    dp-accounting's ``get_epsilon_for_delta``)."""
    if infinity > delta:
        return math.inf
    losses = (lower + np.arange(probs.size)) * interval
    # Suffix sums: P-mass and Q-mass of the losses ≥ losses[j] (plus the +∞ mass for P).
    upper = infinity + np.cumsum(probs[::-1])[::-1]
    safe = _exp_safe(losses)
    if safe:
        lower_q = np.cumsum((probs * np.exp(-losses))[::-1])[::-1]
        # δ at ε = losses[j − 1] counts the losses ≥ losses[j]: upper[j] − e^{ε}·lower_q[j].
        at_grid = upper[1:] - np.exp(losses[:-1]) * lower_q[1:]
    else:  # e^{losses[j − 1]}·lower_q[j] = e^{−Δ}·S_j
        tails = _scaled_q_tails(probs, interval)
        at_grid = upper[1:] - math.exp(-interval) * tails[1:]
    j = int(np.argmax(at_grid <= delta)) if np.any(at_grid <= delta) else probs.size - 1
    # The crossing lies in (losses[j − 1], losses[j]], where δ(ε) = upper[j] − e^ε·lower_q[j].
    if upper[j] <= delta:
        eps = losses[j - 1] if j > 0 else 0.0
    elif safe:
        eps = math.log((upper[j] - delta) / lower_q[j])
    else:
        eps = math.log(upper[j] - delta) + losses[j] - math.log(tails[j])
    return max(0.0, float(eps))


def _rounding(steps: int, long_double: bool) -> float:
    u = float(np.finfo(np.longdouble if long_double else np.float64).eps)
    return PLD_ROUNDING_FACTOR * steps * u if steps > 1 else 0.0


@functools.lru_cache(maxsize=2)  # (up to PLD_MAX_COMPOSED_CELLS cells each; the last two grids
# of a refinement, so that the profile reuses the final one)
def _composed(z: float, n: int, steps: int, interval: float,
              long_double: bool = False) -> tuple[int, np.ndarray, float]:
    """The composed grid PLD (lower, probs, infinity), the rounding allowance included in +∞."""
    lower, probs, infinity = dominating_step_pmf(z, n, interval)
    if steps > 1:
        dtype = np.longdouble if long_double else np.float64
        lower, probs, infinity = _self_compose(lower, probs, infinity, steps, dtype)
    return lower, probs, infinity + _rounding(steps, long_double)


def _use_long_double(steps: int, delta: float) -> bool:
    """Long double (80-bit on x86; elsewhere it may equal double) when double's rounding
    allowance would exceed ``PLD_ROUNDING_SHARE``·δ."""
    return _rounding(steps, False) > PLD_ROUNDING_SHARE * delta


def noisy_sgd_pld(z: float, n: int, steps: int, interval: float | None = None,
                  long_double: bool = False) -> PrivacyLossDistribution:
    """The pessimistic PLD of ``steps`` compositions of the dominating pair, as a dp-accounting
    ``PrivacyLossDistribution`` (so ``get_delta_for_epsilon`` gives the whole profile δ(ε)).

    ``interval`` defaults to :func:`pld_interval`; ``long_double`` runs the FFT in long double,
    which :func:`noisy_sgd_epsilon_pld` does for δ < 2.2e-14·T (the +∞ mass includes the
    rounding allowance, 2.2e-17·T in double). Requires steps ≥ 1 and z > 0.
    """
    z, n, steps = float(z), int(n), int(steps)
    _check(n, steps, 0.5)
    if steps < 1:
        raise ValueError("steps must be >= 1 for a PLD")
    interval = pld_interval(z, n, steps) if interval is None else float(interval)
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    lower, probs, infinity = _composed(z, n, steps, interval, long_double)
    return PrivacyLossDistribution(
        pld_pmf.DensePLDPmf(interval, lower, probs, infinity, pessimistic_estimate=True))


def noisy_sgd_epsilon_pld(z: float, n: int, steps: int, delta: float,
                          interval: float | None = None) -> float:
    """ε(δ) of ``steps`` noisy-SGD steps (1 of n, noise multiplier z = σ/(2nL)), replace-one,
    from the PLD of the dominating pair (an upper bound: pessimistic discretisation).

    ``interval`` is the spacing of the privacy-loss grid; by default the grid is refined until it
    has converged (:func:`converged_interval`: two successive grids agree within
    :data:`PLD_EPSILON_RTOL`), a given spacing is used as is (a coarser grid gives a larger,
    still valid, ε). The FFT runs in long double when double's rounding allowance would exceed
    1e-3·δ (e.g. T = 10⁸ at δ = 1e-6).
    """
    z, n, steps, delta = float(z), int(n), int(steps), float(delta)
    if interval is None and z > 0 and steps > 0:
        _check(n, steps, delta)
        interval = converged_interval(z, n, steps, delta)
    return _epsilon_pld(z, n, steps, delta, None if interval is None else float(interval))


#: Two successive grids (spacing h and h/2) whose ε agree within this relative tolerance end the
#: refinement, and the finer one's ε is used. The discretisation error shrinks about fourfold
#: per halving (measured over T ∈ [1, 10⁶], z ∈ [0.25, 20], n ∈ [10, 10⁴]; docs/bst14.md, "Grid
#: precision"), so the ε used is within about a third of this of the converged value; it would
#: still be within this tolerance if the error shrank only linearly.
PLD_EPSILON_RTOL = 2.5e-4
#: The refinement stops (keeping the finest grid, still an upper bound) before a composed grid
#: would exceed this many cells (~260 MB of float64 for the FFT's input and output).
PLD_MAX_COMPOSED_CELLS = 1 << 24


@functools.lru_cache(maxsize=4096)
def converged_interval(z: float, n: int, steps: int, delta: float) -> float:
    """The grid spacing the accountant uses for (z, n, T, δ): :func:`pld_interval` halved until
    the ε of two successive grids agree within :data:`PLD_EPSILON_RTOL` (the finer one is
    returned), or until a finer grid would exceed :data:`PLD_MAX_COMPOSED_CELLS` cells."""
    z, n, steps, delta = float(z), int(n), int(steps), float(delta)
    _check(n, steps, delta)
    h = pld_interval(z, n, steps)
    if steps == 0 or not z > 0:
        return h
    eps = _epsilon_pld(z, n, steps, delta, h)
    while True:
        cells = _composed(z, n, steps, h, _use_long_double(steps, delta))[1].size
        if 2 * cells > PLD_MAX_COMPOSED_CELLS:
            return h
        finer = _epsilon_pld(z, n, steps, delta, h / 2)
        h /= 2
        if eps == finer or (math.isfinite(eps) and abs(eps - finer) <= PLD_EPSILON_RTOL * finer):
            return h
        eps = finer


@functools.lru_cache(maxsize=4096)
def _epsilon_pld(z: float, n: int, steps: int, delta: float, interval: float | None) -> float:
    _check(n, steps, delta)
    if steps == 0:
        return 0.0
    if not z > 0:
        return math.inf
    lower, probs, infinity = _composed(z, n, steps, interval, _use_long_double(steps, delta))
    return _epsilon_of(lower, probs, infinity, interval, delta)


#: Below this noise multiplier (μ = 1/z > 4: per-step losses of hundreds of nats, met only when
#: calibrating ε in the hundreds or more, e.g. the ε → ∞ check) the PLD grid is not built; the
#: RDP accountant, certified as well, is used instead.
PLD_MIN_Z = 0.25
_PLD_FAILURES = (OverflowError, ValueError, FloatingPointError, MemoryError)


def noisy_sgd_epsilon_certified(z: float, n: int, steps: int, delta: float) -> tuple[float, str]:
    """(ε, accounting) of ``steps`` noisy-SGD steps: the PLD of the dominating pair when
    z ≥ :data:`PLD_MIN_Z` (the tighter certified bound), else the RDP accountant."""
    if z >= PLD_MIN_Z:
        try:
            return noisy_sgd_epsilon_pld(z, n, steps, delta), ACCOUNTING_PLD
        except _PLD_FAILURES:
            pass
    return noisy_sgd_epsilon(z, n, steps, delta), ACCOUNTING


def calibrate_noisy_sgd_certified(epsilon: float, delta: float, n: int, steps: int) -> float:
    """The smallest z whose :func:`noisy_sgd_epsilon_certified` ε is ≤ ``epsilon``, across the
    switch from the RDP accountant (z < :data:`PLD_MIN_Z`) to the PLD (z ≥ :data:`PLD_MIN_Z`).

    The certified ε(z) decreases with z on each side of the switch and jumps down at it (the
    PLD is the tighter bound), so the smallest certified z is the smaller of two candidates:
    the smallest z ≥ :data:`PLD_MIN_Z` the PLD certifies (:data:`PLD_MIN_Z` itself when the PLD
    certifies it), and the RDP calibration when that lands below :data:`PLD_MIN_Z`. The RDP side
    is looked at only when the RDP accountant certifies ε just below the switch (one
    evaluation); otherwise no z below it can be certified.
    """
    return _calibrate_certified(float(epsilon), float(delta), int(n), int(steps))


@functools.lru_cache(maxsize=1024)
def _calibrate_certified(epsilon: float, delta: float, n: int, steps: int) -> float:
    if steps == 0:
        return calibrate_noisy_sgd_pld(epsilon, delta, n, steps)
    try:
        if noisy_sgd_epsilon_pld(PLD_MIN_Z, n, steps, delta) <= epsilon:
            z_pld = PLD_MIN_Z
        else:
            z_pld = max(calibrate_noisy_sgd_pld(epsilon, delta, n, steps), PLD_MIN_Z)
            while noisy_sgd_epsilon_pld(z_pld, n, steps, delta) > epsilon:  # (the max moved it)
                z_pld *= 1 + Z_RTOL
    except _PLD_FAILURES:
        return calibrate_noisy_sgd(epsilon, delta, n, steps)
    below = math.nextafter(PLD_MIN_Z, 0.0)
    if noisy_sgd_epsilon(below, n, steps, delta) <= epsilon:
        return min(z_pld, calibrate_noisy_sgd(epsilon, delta, n, steps))
    return z_pld


@functools.lru_cache(maxsize=256)
def noisy_sgd_profile(z: float, n: int, steps: int, delta: float) -> PrivacyProfile:
    """The whole privacy profile δ(ε) of ``steps`` noisy-SGD steps from the PLD of the
    dominating pair, on :data:`~dpbench.privacy.profile.PROFILE_EPSILONS` (upper bounds: the
    pessimistic grid and the rounding allowance), with the RDP accountant's ε at ``delta`` kept
    beside it (``epsilon_rdp``). What :class:`~dpbench.algorithms.noisy_sgd.NoisySGD` states in
    its ledger, and what the privacy audit tests (docs/bst14.md, 'Which accountant is
    certified')."""
    z, n, steps = float(z), int(n), int(steps)
    rdp = noisy_sgd_epsilon(z, n, steps, delta)
    if steps == 0:
        return PrivacyProfile("pld", (0.0,), (0.0,), ACCOUNTING_PLD, epsilon_rdp=rdp)
    interval = converged_interval(z, n, steps, delta)
    lower, probs, infinity = _composed(z, n, steps, interval, _use_long_double(steps, delta))
    losses = (lower + np.arange(probs.size)) * interval
    upper = np.append(infinity + np.cumsum(probs[::-1])[::-1], infinity)
    j = np.searchsorted(losses, PROFILE_EPSILONS, side="right")  # first loss > ε
    if _exp_safe(losses):
        lower_q = np.append(np.cumsum((probs * np.exp(-losses))[::-1])[::-1], 0.0)
        deltas = np.clip(upper[j] - np.exp(PROFILE_EPSILONS) * lower_q[j], 0.0, 1.0)
    else:  # e^ε·lower_q[j] = e^{ε − losses[j]}·S_j, with ε < losses[j]
        tails = np.append(_scaled_q_tails(probs, interval), 0.0)
        gap = PROFILE_EPSILONS - np.append(losses, math.inf)[j]
        deltas = np.clip(upper[j] - np.exp(gap) * tails[j], 0.0, 1.0)
    return PrivacyProfile("pld", tuple(PROFILE_EPSILONS.tolist()),
                          tuple(np.minimum.accumulate(deltas).tolist()), ACCOUNTING_PLD,
                          epsilon_rdp=rdp)


def calibrate_noisy_sgd_pld(epsilon: float, delta: float, n: int, steps: int) -> float:
    """The smallest z (to relative precision ~1e-5) with ``noisy_sgd_epsilon_pld(z, …) ≤ epsilon``.

    Same contract and root-finding as :func:`calibrate_noisy_sgd`: the returned z was evaluated
    and satisfies ``noisy_sgd_epsilon_pld(z, n, steps, delta) <= epsilon``. Returns 0.0 when
    ``steps == 0``.
    """
    return _calibrate_pld(float(epsilon), float(delta), int(n), int(steps))


#: The second search of :func:`calibrate_noisy_sgd_pld` brackets the converged root from the
#: first one's by steps of this factor (the refinement moves it by a few per cent at most).
_REFINED_BRACKET = 1.02


@functools.lru_cache(maxsize=1024)
def _calibrate_pld(epsilon: float, delta: float, n: int, steps: int) -> float:
    # Two searches: on the starting grid (one cheap grid per evaluation), then on the converged
    # ε — the ledger's — from there (the refinement only lowers ε, so the root moves down a
    # little). The result is minimal for the converged ε, which is what the ledger states.
    coarse = _smallest_z(lambda z: _epsilon_pld(z, n, steps, delta, pld_interval(z, n, steps)),
                         epsilon, delta, n, steps)
    if steps == 0:
        return coarse
    return _smallest_z(lambda z: noisy_sgd_epsilon_pld(z, n, steps, delta), epsilon, delta, n,
                       steps, start=coarse, factor=_REFINED_BRACKET)
