"""B1: noisy stochastic mirror descent with fresh-sample gating (arXiv 2002.09609), for DP-SCO.

*Private Stochastic Convex Optimization: Efficient Algorithms for Non-smooth Objectives*
(arXiv 2002.09609, 2020; authors believed to be Arora, Marinov and Ullah), Algorithm 1 and
Theorems 2, 5, 6 and Remark 1. The paper's formulas were lost in the text we have: this module
follows our reconstruction (marked [RECON]) and the errata written down in docs/sco.md, "What is
reconstructed, and B1's errata" (cited below as B1 errata N). Only the Euclidean potential
Φ = ½‖·‖² is implemented (the one B analyses), so the mirror step is projected SGD; a p-norm
potential is not offered because B establishes no privacy/utility guarantee for it (B1 errata 5).

Algorithm ([RECON] from the prose):

1. w₁ = centre of C (data independent; = Π_C(0) = argmin_C Φ for the sets centred at 0), F = ∅.
2. While |F| < m = ⌈n/2⌉ and t ≤ T_max = 2n: draw yₜ uniform in [n] **with replacement from all
   n indices** and ξₜ ~ N(0, σ²I). If yₜ ∉ F (fresh): gₜ = clip_L(∇f(wₜ; z_{yₜ})) + ξₜ, record wₜ,
   F ← F ∪ {yₜ}. Else (seen): gₜ = ξₜ, a noise-only step (the amplification argument needs it).
   wₜ₊₁ = Π_C(wₜ − η gₜ).
3. Output the average of the recorded fresh-step iterates wₜ (Lemma 1; B1 errata 2 on the n vs
   n/2 inconsistency: the n/2 rule is implemented, ``stop_fraction`` is the knob).

Gradient queries are exactly ⌈n/2⌉ unless the safety cap binds; the number of iterations τ is a
coupon-collector time, E τ = n(H_n − H_{n−m}) ≈ n ln 2 ([derived], docs/sco.md). The cap T_max = 2n
makes the privacy proof deterministic (no 2e^{−n/16} failure event, Theorem 2). τ depends only on
the index sequence, never on the data. η = ‖C‖/(√n (L + σ√p)) (Corollary 1 [RECON]; ‖C‖ is the
diameter, as B's D). Every per-example gradient is clipped to the declared L (house rule; it
enforces the 2L sensitivity even if L is wrong).

Privacy (Theorems 5 and 6, as reconstructed in docs/sco.md), replace-one neighbours, for the total
(ε̄, δ̄) the user asks for:

* one step with ρ fresh is a Gaussian mechanism of ℓ2-sensitivity 2L, (ε̃, δ)-DP; with the index
  uniform over n it is amplified to (ε₀, δ/n), ε₀ = log(1 + (e^ε̃ − 1)/n); steps after ρ was used
  never touch z_ρ (0-DP);
* advanced composition (Dwork–Rothblum–Vadhan 2010, Thm 3.3) over at most T = 2n steps:
  ε′ = ε₀√(2T log(1/δ′)) + Tε₀(e^{ε₀} − 1), δ_total = Tδ/n + δ′ = 2δ + δ′ (B1 errata 2:
  Theorem 6's δ should be 2δ; we take δ = δ′ = δ̄/3 so that 2δ + δ′ = δ̄ exactly).

Two calibrations (``calibration``), both recorded in ``Release.info``:

* ``"paper"``: Remark 1 and Theorem 6 literally: ε = ε̄/(4(√log(1/δ′) + 2)), ε̃ = √n·ε,
  σ = 8L√log(1/δ)/ε̃ = 8L√log(1/δ)/(√n ε) (σ is a standard deviation, B1 errata 3).
  Theorem 6's hypothesis ε ≤ 1/(2√n) [RECON of the garbled "12√n"] is the privacy regime; outside
  it the run raises :class:`~dpbench.core.errors.NotApplicable`. Inside it the corrected composition
  constant (8, not 4: B1 errata 2) still gives ε′ ≤ 4ε√log(1/δ′) + 16ε² ≤ ε̄, and the
  exact ε′ is reported as ``info["composed_epsilon"]``.
* ``"tight"``: ε̃ is found by root-finding so that the exact ε′ above equals ε̄ (inverting the
  composition), with the classical Gaussian calibration σ = 2L√(2 log(1.25/δ))/ε̃ (Dwork–Roth
  Thm A.1), valid for ε̃ ≤ 1: that is this mode's regime (NotApplicable outside).

In both modes the ledger records (ε̄, δ̄), certified (the run refuses outside the regime). The
charge also carries ``gdp_mu = 2L/σ``: given the (data-independent) index sequence z_ρ enters at
most one step, a Gaussian mechanism of sensitivity 2L ([derived], docs/sco.md), and a mixture over
index sequences of μ-GDP pairs is μ-GDP (joint convexity of the hockey-stick divergence).

ε-path (``epsilon_path``): B's regime is ε̄ ≲ √log(1/δ̄)/√n, so a fixed ε̄ leaves it as n grows
(docs/sco.md, "Privacy and its regime"). ``"theorem"`` runs the theorem's own path
ε̄ₙ = c·√log(3/δ̄)/√n with c = ``path_c`` (experiment E9-B1), spending ε̄ₙ, which must not exceed
the grid's ε (then a budget cap); ``"budget"`` (default) spends the grid's ε.

Utility (Theorem 6 [RECON], Remark 1): E F(w̄) − min F = O(LD(1/√n + √p·log(3/δ̄)/(ε̄ n))); in the
regime the privacy term dominates, so at fixed ε̄ the population excess falls like n^−1, and like
n^−½ along the theorem path.

Audit path (``NoisyMirrorDescent.run_batch``): the calibration once, then :func:`osmd_chains` runs
the gated loop of :func:`osmd_path` for every row in one compiled loop, each row drawing its own
index and noise blocks from the one generator, so each row has the law of ``run``'s θ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import brentq

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import ConstraintSet
from ..core.time_limit import checkpoint
from ..numerics.jit import specialise
from ..numerics.kernels import kernel_arrays, resolve_kernel
from ..privacy.ledger import Charge, PrivacyLedger
from .noisy_sgd import BLOCK, compiled_projection, inlinable, project_balls

__all__ = ["NoisyMirrorDescent", "Calibration", "calibrate", "composed_epsilon",
           "osmd_path", "osmd_chains", "expected_iterations"]

CALIBRATIONS = ("paper", "tight")

#: The safety cap on iterations, as a multiple of n (ours, docs/sco.md; Theorem 2's 2n).
CAP_FACTOR = 2

#: Steps (rows × the cap 2n) per compiled call of :func:`osmd_chains`; ``checkpoint()`` runs
#: between calls.
CHAIN_BLOCK = 8 * BLOCK


@dataclass(frozen=True)
class Calibration:
    """The privacy calibration of one B1 run (module docstring; docs/sco.md)."""

    mode: str
    n: int
    epsilon: float            # ε̄, the total the ledger records
    delta: float              # δ̄ = 2δ + δ′
    delta_step: float         # δ of the per-step Gaussian mechanism
    delta_prime: float        # δ′ of advanced composition
    eps_step: float           # ε̃: per-step ε for a fixed subsample
    eps_internal: float       # the paper's ε = ε̃/√n
    sigma: float              # noise standard deviation per coordinate
    steps_cap: int            # T_max = 2n
    composed_epsilon: float   # exact DRV10 ε′ of the amplified steps over T_max (≤ ε̄)


def composed_epsilon(eps_step: float, n: int, steps: int, delta_prime: float) -> float:
    """ε′ of ``steps`` (ε₀, ·)-DP steps by advanced composition (DRV10 Thm 3.3), where
    ε₀ = log(1 + (e^ε̃ − 1)/n) is the per-step ε̃ amplified by sampling one index of n
    (Theorem 5, docs/sco.md): ε′ = ε₀√(2T log(1/δ′)) + Tε₀(e^{ε₀} − 1)."""
    eps0 = math.log1p(math.expm1(eps_step) / n)
    first = eps0 * math.sqrt(2.0 * steps * math.log(1.0 / delta_prime))
    return first + steps * eps0 * math.expm1(eps0)


def _regime_error(mode: str, epsilon: float, n: int, delta: float, detail: str,
                  eps_max: float) -> NotApplicable:
    return NotApplicable(
        f"noisy_mirror_descent ({mode} calibration): ε̄={epsilon:g} at n={n}, δ̄={delta:g} is "
        f"outside B's privacy regime: {detail}; B1 is private here only for ε̄ ≤ {eps_max:.4g} "
        "(arXiv 2002.09609 Thm 6 / Remark 1: ε̄ must shrink like 1/√n; docs/sco.md)")


def calibrate(mode: str, n: int, lipschitz: float, epsilon: float, delta: float) -> Calibration:
    """σ and the split of (ε̄, δ̄) for a B1 run (module docstring); NotApplicable outside regime.

    ``"paper"``: Remark 1 (ε = ε̄/(4(√log(1/δ′)+2)), σ = 8L√log(1/δ)/(√n ε)), regime ε ≤ 1/(2√n).
    ``"tight"``: ε̃ solves ``composed_epsilon(ε̃, n, 2n, δ′) = ε̄``, σ = 2L√(2 log(1.25/δ))/ε̃,
    regime ε̃ ≤ 1. Both use δ = δ′ = δ̄/3 (2δ + δ′ = δ̄, B1 errata 2 in docs/sco.md).
    """
    if mode not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {mode!r}")
    if not (0 < delta < 1 and epsilon > 0 and n >= 1):
        raise ValueError(f"need ε > 0, 0 < δ < 1, n ≥ 1; got ε={epsilon!r}, δ={delta!r}, n={n!r}")
    d_step = d_prime = delta / 3.0
    cap = CAP_FACTOR * n
    root_n = math.sqrt(n)
    if mode == "paper":
        factor = 4.0 * (math.sqrt(math.log(1.0 / d_prime)) + 2.0)
        eps = epsilon / factor
        if eps > 1.0 / (2.0 * root_n):
            raise _regime_error(mode, epsilon, n, delta,
                                f"the internal ε = ε̄/(4(√log(3/δ̄)+2)) = {eps:.4g} exceeds "
                                f"1/(2√n) = {1.0 / (2.0 * root_n):.4g}", factor / (2.0 * root_n))
        eps_step = root_n * eps
        sigma = 8.0 * lipschitz * math.sqrt(math.log(1.0 / d_step)) / eps_step
    else:
        eps_max = composed_epsilon(1.0, n, cap, d_prime)
        if epsilon > eps_max:
            raise _regime_error(mode, epsilon, n, delta,
                                "the per-step ε̃ solving the composition exceeds 1 (the classical "
                                "Gaussian mechanism's range)", eps_max)
        eps_step = brentq(lambda e: composed_epsilon(e, n, cap, d_prime) - epsilon, 0.0, 1.0,
                          xtol=1e-15, rtol=1e-13, maxiter=500)
        while composed_epsilon(eps_step, n, cap, d_prime) > epsilon:
            eps_step = math.nextafter(eps_step, 0.0)
        eps = eps_step / root_n
        sigma = 2.0 * lipschitz * math.sqrt(2.0 * math.log(1.25 / d_step)) / eps_step
    return Calibration(mode=mode, n=n, epsilon=float(epsilon), delta=float(delta),
                       delta_step=d_step, delta_prime=d_prime, eps_step=float(eps_step),
                       eps_internal=float(eps), sigma=float(sigma), steps_cap=cap,
                       composed_epsilon=composed_epsilon(eps_step, n, cap, d_prime))


def expected_iterations(n: int, fresh: int) -> float:
    """E τ for ``fresh`` distinct indices drawn with replacement from n: n(H_n − H_{n−fresh})
    (coupon collector, docs/sco.md; ≈ n ln 2 for fresh = n/2), ignoring the cap."""
    return float(n * sum(1.0 / (n - j) for j in range(fresh)))


# --- the path ------------------------------------------------------------------------------------
# The compiled loops are templates calling the global ``_kernel_grad``, compiled once per kernel
# by :func:`_osmd_loops` with the kernel's gradient bound (and inlined) and cached on disk, as the
# loops of :mod:`dpbench.algorithms.noisy_sgd` are (see its ``_compiled_loops``).
_kernel_grad: Any = None  # bound per kernel by _osmd_loops


def _osmd_block(X, y, prm, idx, noise, seen, theta, acc, g, fresh, target, steps_left, eta,
                sigma, clip, centers, radii, tol, max_iter):  # type: ignore[no-untyped-def]
    """Up to len(idx) steps of B1 in place (θ, ``acc``, ``seen``); stops when ``fresh`` reaches
    ``target`` or after ``steps_left`` steps. Returns (steps done, fresh count).

    Per step k: if idx[k] is unseen, g = clip_L(∇ℓ(θ; d_idx[k])), acc += θ (the fresh iterate,
    before the update) and mark it seen, else g = 0; θ ← Π(θ − η(g + σ·noise[k])).
    """
    p = theta.shape[0]
    done = 0
    for k in range(idx.shape[0]):
        if fresh >= target or done >= steps_left:
            break
        i = idx[k]
        a = 0.0
        if not seen[i]:
            seen[i] = True
            fresh += 1
            for j in range(p):
                acc[j] += theta[j]
            _kernel_grad(theta, X, y, prm, i, g)
            sq = 0.0
            for j in range(p):
                sq += g[j] * g[j]
            gn = math.sqrt(sq)
            a = eta
            if gn > clip:
                a *= clip / gn
        for j in range(p):
            theta[j] = theta[j] - a * g[j] - eta * sigma * noise[k, j]
        project_balls(theta, centers, radii, tol, max_iter)
        done += 1
    return done, fresh


def _osmd_chains(X, y, prm, rng, thetas, target, steps_cap, eta, sigma, clip, centers,
                 radii, tol, max_iter):  # type: ignore[no-untyped-def]
    """B1's gated loop for every row of ``thetas`` (each row's start on entry), chain after
    chain; row r ← the average of its fresh-step iterates (unprojected).

    The loop of :func:`osmd_path`, compiled over rows: per block of b = min(``BLOCK``, n) steps,
    b draws ``rng.integers(0, n)`` then b·p draws ``rng.standard_normal()`` (the values of
    ``rng.integers(0, n, b)`` and ``rng.standard_normal((b, p))`` in law), then
    :func:`_osmd_block`, until ``target`` fresh steps or ``steps_cap`` steps.
    """
    n = X.shape[0]
    p = thetas.shape[1]
    block = min(BLOCK, n)
    seen = np.empty(n, np.bool_)
    acc = np.empty(p)
    g = np.empty(p)
    idx = np.empty(block, np.int64)
    noise = np.empty((block, p))
    for r in range(thetas.shape[0]):
        theta = thetas[r]
        seen[:] = False
        acc[:] = 0.0
        g[:] = 0.0
        tau = fresh = 0
        while fresh < target and tau < steps_cap:
            for k in range(block):
                idx[k] = rng.integers(0, n)
            for k in range(block):
                for j in range(p):
                    noise[k, j] = rng.standard_normal()
            done, fresh = _osmd_block(X, y, prm, idx, noise, seen, theta, acc, g, fresh, target,
                                      steps_cap - tau, eta, sigma, clip, centers, radii, tol,
                                      max_iter)
            tau += done
        for j in range(p):
            theta[j] = acc[j] / fresh


_OSMD_LOOPS: dict[Any, tuple[Any, Any]] = {}


def _osmd_loops(grad: Any) -> tuple[Any, Any]:
    """(:func:`_osmd_block`, :func:`_osmd_chains`) compiled for the kernel gradient ``grad``
    (inlined when :func:`dpbench.numerics.jit.inlinable`), once per process and
    gradient, cached on disk (:func:`dpbench.numerics.jit.specialise`)."""
    loops = _OSMD_LOOPS.get(grad)
    if loops is None:
        inline = inlinable(grad)
        block = specialise(_osmd_block, {"_kernel_grad": inline})
        loops = (block, specialise(_osmd_chains, {"_kernel_grad": inline, "_osmd_block": block}))
        _OSMD_LOOPS[grad] = loops
    return loops


def _numpy_block(problem: Problem, data: Dataset, constraint: ConstraintSet, idx: np.ndarray,
                 noise: np.ndarray, seen: np.ndarray, theta: np.ndarray, acc: np.ndarray,
                 fresh: int, target: int, steps_left: int, eta: float, sigma: float,
                 clip: float) -> tuple[int, int]:
    """The numpy twin of :func:`_osmd_block` (any problem, any C); same semantics and stream."""
    done = 0
    current = theta.copy()
    for k in range(idx.shape[0]):
        if fresh >= target or done >= steps_left:
            break
        i = int(idx[k])
        step = eta * sigma * noise[k]
        if not seen[i]:
            seen[i] = True
            fresh += 1
            acc += current
            g = problem.grad(current, data, idx[k:k + 1])[0]
            gn = math.sqrt(float(g.dot(g)))
            a = eta * (clip / gn if gn > clip else 1.0)
            step = step + a * g
        current = constraint.project(current - step)
        done += 1
    theta[:] = current
    return done, fresh


def osmd_path(problem: Problem, data: Dataset, *, sigma: float, eta: float, lipschitz: float,
              target: int, steps_cap: int, rng: np.random.Generator,
              compiled: bool | None = None) -> tuple[np.ndarray, int, int]:
    """Run B1's gated loop (module docstring) on ``problem.constraint``; return
    (average of the fresh-step iterates, τ, number of fresh steps).

    Randomness per block of b = min(``BLOCK``, n) steps (one block covers τ ≈ 0.69n for small n):
    ``rng.integers(0, n, b)`` then ``rng.standard_normal((b, p))`` (full blocks always, so the
    stream depends only on n, p).
    Compiled (numba, the problem's kernel and :func:`dpbench.algorithms.noisy_sgd.project_balls`)
    when the problem has a kernel and C is a ball or an intersection of balls (``compiled=None``),
    numpy otherwise; both follow the same trajectory up to rounding (``compiled=False``: numpy).
    """
    n, p = data.n, data.p
    constraint = problem.constraint
    kernel = resolve_kernel(problem)
    projection = compiled_projection(constraint, p)
    use_compiled = kernel is not None and projection is not None
    if compiled is not None:
        use_compiled = use_compiled and compiled
    theta = np.array(constraint.center(p), dtype=float)
    acc = np.zeros(p)
    seen = np.zeros(n, dtype=np.bool_)
    block = min(BLOCK, n)
    tau = fresh = 0
    if use_compiled:
        assert kernel is not None and projection is not None
        X, y = kernel_arrays(data)
        prm = np.ascontiguousarray(kernel.prm, dtype=np.float64)
        centers, radii, tol, max_iter = projection
        g = np.zeros(p)
        run_block = _osmd_loops(kernel.grad)[0]
    while fresh < target and tau < steps_cap:
        checkpoint()
        idx = rng.integers(0, n, size=block)
        noise = rng.standard_normal((block, p))
        if use_compiled:
            done, fresh = run_block(X, y, prm, idx, noise, seen, theta, acc, g, fresh, target,
                                    steps_cap - tau, eta, sigma, float(lipschitz), centers, radii,
                                    tol, max_iter)
        else:
            done, fresh = _numpy_block(problem, data, constraint, idx, noise, seen, theta, acc,
                                       fresh, target, steps_cap - tau, eta, sigma,
                                       float(lipschitz))
        tau += int(done)
    return constraint.project(acc / fresh), tau, int(fresh)


def osmd_chains(problem: Problem, data: Dataset, *, sigma: float, eta: float, lipschitz: float,
                target: int, steps_cap: int, rng: np.random.Generator,
                size: int) -> np.ndarray | None:
    """``size`` independent runs of :func:`osmd_path` (same arguments; its released point only),
    as the rows of a (size, p) array, all drawn from ``rng``; ``None`` when the path is not
    compiled (no kernel, or C not a ball or an intersection of balls: the numpy fallback calls
    ``problem.grad`` at one θ, which cannot be batched across chains).

    One compiled call (:func:`_osmd_chains`) runs up to ``CHAIN_BLOCK // steps_cap`` chains (at
    least one) to their end; ``checkpoint()`` runs between calls. Each row has the law of
    :func:`osmd_path`'s output, not any single run's value (the chains share the generator).
    """
    p = data.p
    constraint = problem.constraint
    kernel = resolve_kernel(problem)
    projection = compiled_projection(constraint, p)
    if kernel is None or projection is None:
        return None
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kernel.prm, dtype=np.float64)
    centers, radii, tol, max_iter = projection
    thetas = np.tile(np.asarray(constraint.center(p), dtype=float), (int(size), 1))
    per_call = max(1, CHAIN_BLOCK // max(steps_cap, 1))
    chains = _osmd_loops(kernel.grad)[1]
    for lo in range(0, int(size), per_call):
        checkpoint()
        chains(X, y, prm, rng, thetas[lo:lo + per_call], target, steps_cap, eta, sigma,
               float(lipschitz), centers, radii, tol, max_iter)
    return constraint.project(thetas)


# --- the plugin ----------------------------------------------------------------------------------
class NoisyMirrorDescent(Algorithm):
    """Noisy OSMD (Φ = ½‖·‖²) with fresh-sample gating, batch 1, one pass over ⌈n/2⌉ fresh points
    (arXiv 2002.09609 Algorithm 1 [RECON]; docs/sco.md, "What is reconstructed, and B1's errata").

    See the module docstring for the algorithm, both calibrations, the privacy regime (refused with
    :class:`~dpbench.core.errors.NotApplicable` outside it), the ledger and the ε-path option.
    """

    name: ClassVar[str] = "noisy_mirror_descent"
    summary: ClassVar[str] = ("Noisy stochastic mirror descent (Euclidean) with fresh-sample "
                              "gating, ceil(n/2) gradients, for DP-SCO (arXiv 2002.09609 Alg. 1)")
    citation: ClassVar[str] = ("Private Stochastic Convex Optimization: Efficient Algorithms for "
                               "Non-smooth Objectives, arXiv 2002.09609 (2020), Alg. 1, Thm 5, 6, "
                               "Remark 1 [RECON: docs/sco.md]")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness (the paper calibration is private only while the internal ε ≤ 1/(2√n), i.e. n ≤ 137 at ε = 1).
    check_settings: ClassVar[dict[str, Any]] = {"rate_smoke_n": (25, 50, 100)}
    params: ClassVar[dict[str, Param]] = {
        "calibration": Param(
            "paper", kind="str", choices=CALIBRATIONS,
            doc="paper: Remark 1 / Thm 6 (regime eps <= 1/(2 sqrt n)); tight: per-step eps solved "
                "from the exact amplified advanced composition (regime eps_step <= 1)"),
        "stop_fraction": Param(
            0.5, low=0.0, high=1.0, low_open=True,
            doc="stop after ceil(stop_fraction*n) distinct (fresh) points; 1/2 in the paper"),
        "epsilon_path": Param(
            "budget", kind="str", choices=("budget", "theorem"),
            doc="budget: spend the grid's epsilon; theorem: spend path_c*sqrt(log(3/delta)/n) "
                "(the theorem's path, experiment E9-B1), which must not exceed the grid's "
                "epsilon"),
        "path_c": Param(1.0, low=0.0, low_open=True,
                        doc="c of the theorem path eps_n = c*sqrt(log(3/delta))/sqrt(n)"),
    }

    calibration: str
    stop_fraction: float
    epsilon_path: str
    path_c: float

    # --- declarations -------------------------------------------------------------------------
    def target(self, n: int) -> int:
        """m = ⌈stop_fraction·n⌉ fresh points (⌈n/2⌉ by default)."""
        return max(1, min(n, math.ceil(self.stop_fraction * n - 1e-9)))

    def cost(self, n: int, p: int) -> float:
        """≈ E τ·p with E τ ≈ −n·log(1 − stop_fraction) (= n ln 2 by default; coupon collector)."""
        frac = min(self.stop_fraction, 1.0 - 1.0 / max(n, 2))
        return float(-n * math.log1p(-frac) * p + n)

    def rate_card(self) -> RateCard:
        """Theorem 6 via Remark 1 [RECON], population excess on the average scale (docs/sco.md)."""
        path = self.epsilon_path == "theorem"
        # On the theorem path ε̄ₙ = c·√log(3/δ̄)/√n replaces ε (the grid's ε is only a cap).
        c = repr(float(self.path_c))
        expression = (f"L*D*(1/sqrt(n) + sqrt(p)*sqrt(log(3/delta))/({c}*sqrt(n)))" if path
                      else "L*D*(1/sqrt(n) + sqrt(p)*log(3/delta)/(epsilon*n))")
        return RateCard(
            expression=expression,
            exponents={"n": -0.5, "p": 0.5, "epsilon": 0} if path else
            {"n": -1, "p": 0.5, "epsilon": -1},
            citation=("arXiv 2002.09609 Thm 6 + Remark 1 [RECON, docs/sco.md] (a √log(1/δ) "
                      "factor above the optimal DP-SCO rate)"),
            regime=("private only for ε̄ ≲ 2(√log(3/δ̄)+2)/√n (paper calibration), so the privacy "
                    "term dominates: n-slope −1 at fixed ε̄ while inside the regime, −½ along "
                    "ε̄ ∝ n^−½ (epsilon_path='theorem', experiment E9-B1); docs/sco.md"),
            notes=("POPULATION excess (DP-SCO); on the theorem path the card substitutes the "
                   "spent ε̄ₙ = path_c·√log(3/δ̄)/√n for ε (the grid's ε is only a budget cap)"),
        )

    # --- running ------------------------------------------------------------------------------
    def spent_epsilon(self, n: int, epsilon: float, delta: float) -> float:
        """ε̄ this run spends: the grid's ε, or the theorem path's c·√log(3/δ̄)/√n (≤ ε)."""
        if self.epsilon_path == "budget":
            return float(epsilon)
        eps_n = self.path_c * math.sqrt(math.log(3.0 / delta) / n)
        if eps_n > epsilon * (1 + 1e-12):
            raise NotApplicable(
                f"noisy_mirror_descent: the theorem path spends ε̄ₙ = {eps_n:.4g} at n={n} "
                f"(c={self.path_c:g}, δ̄={delta:g}), above the budget ε={epsilon:g}")
        return min(eps_n, float(epsilon))

    def _setup(self, n: int, p: int, problem: Problem, epsilon: float,
               delta: float) -> tuple[Calibration, float, int]:
        """(calibration, step size η, fresh-point target m) of a run at size n, from public
        quantities only (shared by :meth:`run` and :meth:`run_batch`); ``NotApplicable`` outside
        the privacy regime."""
        L = float(problem.lipschitz)
        eps_bar = self.spent_epsilon(n, epsilon, delta)
        cal = calibrate(self.calibration, n, L, eps_bar, delta)
        diameter = float(problem.constraint.diameter)
        eta = diameter / (math.sqrt(n) * (L + cal.sigma * math.sqrt(p)))
        return cal, eta, self.target(n)

    @staticmethod
    def _ledger(cal: Calibration, L: float) -> PrivacyLedger:
        """The total (ε̄, δ̄) of the calibration, certified, with μ = 2L/σ (module docstring)."""
        theorem = ("arXiv 2002.09609 Thm 5/6, Remark 1 (paper constants)"
                   if cal.mode == "paper" else
                   "arXiv 2002.09609 Thm 5 with exact amplified DRV10 advanced composition")
        charge = Charge(
            f"noisy_mirror_descent: ≤ {cal.steps_cap} sampled Gaussian steps (σ={cal.sigma:.6g}, "
            f"ε̃={cal.eps_step:.4g}, δ=δ′={cal.delta_step:.3g}; {cal.mode} calibration)",
            cal.epsilon, cal.delta, theorem, certified=True, gdp_mu=2.0 * L / cal.sigma)
        return PrivacyLedger(
            charges=(charge,), epsilon=cal.epsilon, delta=cal.delta,
            accounting=("per-step Gaussian, sampling amplification (q = 1/n), advanced "
                        f"composition over T_max = 2n steps ({cal.mode} calibration)"))

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        cal, eta, target = self._setup(n, p, problem, epsilon, delta)
        theta, tau, fresh = osmd_path(problem, data, sigma=cal.sigma, eta=eta, lipschitz=L,
                                      target=target, steps_cap=cal.steps_cap, rng=rng)
        ledger = self._ledger(cal, L)
        info = {
            "calibration": cal.mode, "sigma": cal.sigma, "eta": eta, "eps_step": cal.eps_step,
            "eps_internal": cal.eps_internal, "composed_epsilon": cal.composed_epsilon,
            "spent_epsilon": cal.epsilon, "delta_step": cal.delta_step,
            "delta_prime": cal.delta_prime, "steps_cap": cal.steps_cap, "target_fresh": target,
            "fresh": fresh, "capped": bool(fresh < target), "epsilon_path": self.epsilon_path,
            "path": ("compiled" if resolve_kernel(problem) is not None and
                     compiled_projection(problem.constraint, p) is not None else "numpy"),
        }
        return Release(theta=theta, ledger=ledger, grad_queries=fresh, iterations=tau, info=info)

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """``size`` independent runs of :meth:`run` from one calibration (:meth:`_setup`): the
        gated loop of every row in one compiled loop (:func:`osmd_chains`); ``None`` (the audit
        then loops :meth:`run`) without a problem kernel or on a C that is not ball-type."""
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        cal, eta, target = self._setup(n, p, problem, epsilon, delta)
        thetas = osmd_chains(problem, data, sigma=cal.sigma, eta=eta, lipschitz=L, target=target,
                             steps_cap=cal.steps_cap, rng=rng, size=size)
        if thetas is None:
            return None
        return BatchRelease(thetas, self._ledger(cal, L))
