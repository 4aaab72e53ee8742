"""Langevin diffusion as a DP-ERM mechanism: projected noisy gradient descent (GTU A2/A5).

Ganesh, Thakurta, Upadhyay, "Differentially Private Sampling from Rashomon Sets, and the
Universality of Langevin Diffusion for Convex Optimization" (GTU): Lemma 2.2 / Lemma 3.1 (path
privacy), Theorem 2.3 (finite-time LD sampler, (ε, δ)-DP for the whole trajectory), Lemma B.5
(mixing), §4.1/§4.4 (regularised wrappers). The labels A0–A8, the errata numbers and the pitfall
numbers below refer to docs/langevin.md ("Mechanism labels", "Errata", "Pitfalls"), which also
holds the worked calibration and the experiments E6, E14–E16.

The discretised diffusion (A2; the paper's full-batch "SGLD") is, from θ₀ ~ Unif(C),

    θ_{k+1} = Π_C(θ_k − ηβ·g(θ_k) + √(2η)·ξ_k),   ξ_k ~ N(0, I_p),   k = 0, …, T − 1,

with g(θ) = (1/n)Σᵢ clip_L(∇ℓ(θ; dᵢ)) (+ λ_r(θ − c) under the A8 wrapper). The calibration is
public: β from the privacy budget at the horizon t = horizon·t_mix(β) (:mod:`dpbench.privacy.langevin`),
η = h/(βM) rounded down so that Tη = t exactly. The trajectory is μ-GDP with μ = βΔ√(t/2) and
Δ = 2L/n (replace-one, Errata 2); clipping to the declared L makes that sensitivity hold whatever
the data.

Samplers: ``ula`` (the projected chain above; numba inner loop over the problem kernel, reusing
:func:`dpbench.algorithms.noisy_sgd.project_balls`, with a numpy fallback that consumes the rng in
the same order) and ``ou_exact`` (A1.8: for an isotropic quadratic ℒ = (a/2)‖θ − c‖² + const the
unconstrained diffusion is an Ornstein–Uhlenbeck process, simulated exactly on the same time grid;
its gradient difference between neighbours is θ-independent and ≤ 2L/n, so Lemma 2.2 covers the
unconstrained path; the released point is projected onto C, which is post-processing).

Audit path (``Langevin.run_batch``): many independent runs from one calibration, each row with the
law of ``run``'s θ: the ULA chains in one compiled loop over rows (:func:`langevin_chains`, the
steps of :func:`_ula_block`), the OU recursion on all rows at once (:func:`ou_path` on a (rows, p)
array).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import Ball, BallAt, ConstraintSet
from ..core.time_limit import checkpoint
from ..numerics.jit import inlinable, specialise
from ..numerics.kernels import kernel_arrays, quadratic_loss, resolve_kernel
from ..numerics.line_law import (
    GaussianStep,
    LineLaw,
    cached,
    line_epsilon,
    line_log_ratio,
    nodes_for,
    point_mass,
    propagate,
    release_key,
    uniform,
)
from ..privacy.langevin import (
    beta_path_gdp,
    beta_path_lemma31,
    ld_gdp_mu,
    ld_rdp_slope,
    lemma31_epsilon,
    mixing_log,
    mixing_time,
    path_gdp_epsilon,
    rdp_epsilon,
)
from ..privacy.ledger import Charge, PrivacyLedger
from .gibbs import a8_lambda
from .noisy_sgd import (
    RowGradients,
    compiled_projection,
    line_interval,
    project_balls,
    uses_compiled_path,
)

__all__ = ["Langevin", "LangevinPlan", "regularizer_strength", "langevin_path", "langevin_chains",
           "ou_path"]

CALIBRATIONS = ("tight", "literal")
SAMPLERS = ("ula", "ou_exact")
OUTPUTS = ("last", "average")
REGULARIZE = ("none", "erm", "sco")

#: Steps whose Gaussian noise is drawn at once (both paths draw ``rng.standard_normal((b, p))``
#: for consecutive blocks of b ≤ BLOCK steps); ``checkpoint()`` runs between blocks.
BLOCK = 2048

#: Chain steps (rows × steps) per compiled call of :func:`langevin_chains`, and normals per block
#: of the batched OU recursion; ``checkpoint()`` runs between them.
BATCH_BLOCK = 32 * BLOCK

# Λ with β's leading order inserted (β ≈ m ε² n²/(L² log 1/δ), the inner Λ dropped: log log).
_LAMBDA_SC = "log(4*L*D*Delta*epsilon**2*n**2/(L**2*log(1/delta)*delta**2))"
# Under the A8 (ε, δ)-ERM wrapper βλ_r = Θ(p/‖C‖²) with λ_r ∝ √p/(εn): β ≈ √p·εn/(L‖C‖).
_LAMBDA_REG = "log(4*sqrt(p)*epsilon*n/delta**2)"


def regularizer_strength(mode: str, *, L: float, C: float, p: int, n: int, epsilon: float,
                         delta: float) -> float:
    """λ_r of GTU's regularised wrappers (the A8 table of docs/langevin.md; C the diameter):
    ``erm`` (§4.4) L√(p log 1/δ)/(‖C‖εn); ``sco`` (§4.4) (L/‖C‖)·max(√(p log 1/δ)/(εn), 1/√n);
    ``none`` 0.
    Delegates to :func:`dpbench.algorithms.gibbs.a8_lambda` (shared with the Gibbs samplers)."""
    if mode == "none":
        return 0.0
    if mode not in REGULARIZE:
        raise ValueError(f"regularize must be one of {REGULARIZE}, got {mode!r}")
    return a8_lambda(mode, L, C, n, p, epsilon, delta)


@dataclass(frozen=True)
class LangevinPlan:
    """The public calibration of one run (a function of declared constants, n, p, ε, δ only).

    ``m``, ``M`` and ``L_cal`` include the A8 regulariser (m + λ_r, M + λ_r, L + λ_r‖C‖);
    ``Delta`` = 2L/n does not (the regulariser cancels between neighbours)."""

    beta: float
    t: float
    eta: float
    steps: int
    Delta: float
    m: float
    M: float
    L_cal: float
    lam: float
    log_term: float


@functools.lru_cache(maxsize=256)
def _plan(calibration: str, h: float, horizon: float, regularize: str, L: float, C: float,
          m0: float, M0: float, n: int, p: int, epsilon: float, delta: float) -> LangevinPlan:
    """:meth:`Langevin.plan` (cached: the calibration is a pure function of public values)."""
    lam = regularizer_strength(regularize, L=L, C=C, p=p, n=n, epsilon=epsilon, delta=delta)
    m = m0 + lam
    M = max(M0 + lam, m)
    L_cal = L + lam * C
    Delta = 2.0 * L / n
    if calibration == "tight":
        beta = beta_path_gdp(epsilon, delta, Delta, m, L_cal, C, horizon)
    else:
        beta = beta_path_lemma31(epsilon, delta, L / n, m, L_cal, C, horizon)
    t = horizon * mixing_time(beta, m, L_cal, C, delta)
    steps = max(1, math.ceil(t / (h / (beta * M))))
    return LangevinPlan(beta=beta, t=t, eta=t / steps, steps=steps, Delta=Delta, m=m, M=M,
                        L_cal=L_cal, lam=lam, log_term=mixing_log(beta, L_cal, C, delta))


@functools.lru_cache(maxsize=256)
def _exact_epsilon(beta: float, Delta: float, t: float, delta: float) -> float:
    """Cached :func:`dpbench.privacy.langevin.path_gdp_epsilon`."""
    return path_gdp_epsilon(beta, Delta, t, delta)


# --- the ULA path ----------------------------------------------------------------------------------
# The compiled loops are templates calling the global ``_kernel_grad``, compiled once per kernel by
# :func:`_ula_loops` with the kernel's gradient bound (and inlined) and cached on disk, as the
# loops of :mod:`dpbench.algorithms.noisy_sgd` are (see its ``_compiled_loops``).
_kernel_grad: Any = None  # bound per kernel by _ula_loops


def _ula_block(X, y, prm, theta, acc, noise, step, sd, clip, lam, center, centers, radii,
               tol, max_iter, keep):  # type: ignore[no-untyped-def]
    """``noise.shape[0]`` steps of θ ← Π(θ − step·(ḡ(θ) + λ(θ − c)) + sd·ξ_k) in place, with
    ḡ = (1/n)Σᵢ clip(∇ℓ(θ; dᵢ)); acc += θ after each step when ``keep``."""
    n = X.shape[0]
    p = theta.shape[0]
    g = np.empty(p)
    work = np.empty(p)
    for k in range(noise.shape[0]):
        for j in range(p):
            g[j] = 0.0
        for i in range(n):
            _kernel_grad(theta, X, y, prm, i, work)
            sq = 0.0
            for j in range(p):
                sq += work[j] * work[j]
            norm = math.sqrt(sq)
            s = clip / norm if norm > clip else 1.0  # clip to the declared L
            for j in range(p):
                g[j] += s * work[j]
        for j in range(p):
            theta[j] = (theta[j] - step * (g[j] / n + lam * (theta[j] - center[j]))
                        + sd * noise[k, j])
        project_balls(theta, centers, radii, tol, max_iter)
        if keep:
            for j in range(p):
                acc[j] += theta[j]


def _numpy_step(problem: Problem, data: Dataset, constraint: ConstraintSet, theta: np.ndarray,
                noise: np.ndarray, step: float, sd: float, clip: float, lam: float,
                center: np.ndarray) -> np.ndarray:
    """One step of the numpy fallback (same update as :func:`_ula_block`)."""
    G = problem.grad(theta, data)
    norms = np.sqrt(np.einsum("ij,ij->i", G, G))
    scale = np.where(norms > clip, clip / np.maximum(norms, np.finfo(float).tiny), 1.0)
    g = (G * scale[:, None]).sum(axis=0) / data.n
    return constraint.project(theta - step * (g + lam * (theta - center)) + sd * noise)


def _ula_chains(X, y, prm, rng, thetas, accs, noise, step, sd, clip, lam, center, centers,
                radii, tol, max_iter, keep):  # type: ignore[no-untyped-def]
    """``noise.shape[0]`` steps of every chain (row r of ``thetas`` and of ``accs``), chain after
    chain: the chain's normals drawn from ``rng`` into the scratch block ``noise`` in the order
    ``rng.standard_normal(noise.shape)`` fills it, then the steps of :func:`_ula_block`."""
    for r in range(thetas.shape[0]):
        for k in range(noise.shape[0]):
            for j in range(noise.shape[1]):
                noise[k, j] = rng.standard_normal()
        _ula_block(X, y, prm, thetas[r], accs[r], noise, step, sd, clip, lam, center,
                   centers, radii, tol, max_iter, keep)


_ULA_LOOPS: dict[Any, tuple[Any, Any]] = {}


def _ula_loops(grad: Any) -> tuple[Any, Any]:
    """(:func:`_ula_block`, :func:`_ula_chains`) compiled for the kernel gradient ``grad``
    (inlined when :func:`dpbench.numerics.jit.inlinable`), once per process and
    gradient, cached on disk (:func:`dpbench.numerics.jit.specialise`)."""
    loops = _ULA_LOOPS.get(grad)
    if loops is None:
        inline = inlinable(grad)
        block = specialise(_ula_block, {"_kernel_grad": inline})
        loops = (block, specialise(_ula_chains, {"_kernel_grad": inline, "_ula_block": block}))
        _ULA_LOOPS[grad] = loops
    return loops


def _noise_blocks(steps: int, shape: tuple[int, ...], rng: np.random.Generator,
                  block: int = BLOCK):  # type: ignore[no-untyped-def]
    """Consecutive (b, *shape) standard-normal blocks, b ≤ ``block``, covering ``steps`` steps."""
    for start in range(0, steps, block):
        checkpoint()
        yield rng.standard_normal((min(block, steps - start), *shape))


def langevin_path(problem: Problem, data: Dataset, *, constraint: ConstraintSet, theta0: np.ndarray,
                  steps: int, eta: float, beta: float, clip: float, lam: float = 0.0,
                  center: np.ndarray | None = None, output: str = "last",
                  rng: np.random.Generator, compiled: bool | None = None) -> tuple[np.ndarray, str]:
    """Run ``steps`` projected ULA steps (GTU A2) from θ₀; return (released θ, path name).

    Released: the last iterate, or Π_C of the mean of θ_1, …, θ_T (``output="average"``; both are
    post-processing of the private trajectory). ``compiled=None`` picks numba when the problem has a
    kernel and C is a ball-type set; the numpy fallback draws the same noise blocks, so both follow
    the same trajectory up to floating-point rounding.
    """
    p = data.p
    center = np.zeros(p) if center is None else np.asarray(center, dtype=float)
    theta = np.array(theta0, dtype=float)
    acc = np.zeros(p)
    step, sd = eta * beta, math.sqrt(2.0 * eta)
    kernel = resolve_kernel(problem)
    projection = compiled_projection(constraint, p)
    use_compiled = kernel is not None and projection is not None if compiled is None else compiled
    keep = output == "average"
    if use_compiled:
        if kernel is None or projection is None:
            raise ValueError("compiled path needs a problem kernel and a ball-type constraint")
        X, y = kernel_arrays(data)
        prm = np.ascontiguousarray(kernel.prm, dtype=np.float64)
        centers, radii, tol, max_iter = projection
        block = _ula_loops(kernel.grad)[0]
        for noise in _noise_blocks(steps, (p,), rng):
            block(X, y, prm, theta, acc, noise, step, sd, clip, lam, center, centers, radii, tol,
                  max_iter, keep)
    else:
        for noise in _noise_blocks(steps, (p,), rng):
            for k in range(noise.shape[0]):
                theta = _numpy_step(problem, data, constraint, theta, noise[k], step, sd, clip,
                                    lam, center)
                if keep:
                    acc += theta
    out = constraint.project(acc / steps) if keep else theta
    return out, "compiled" if use_compiled else "numpy"


def langevin_chains(problem: Problem, data: Dataset, *, constraint: ConstraintSet,
                    theta0: np.ndarray, steps: int, eta: float, beta: float, clip: float,
                    lam: float = 0.0, center: np.ndarray | None = None, output: str = "last",
                    rng: np.random.Generator) -> np.ndarray | None:
    """Independent runs of :func:`langevin_path` (same arguments) from the starts ``theta0``
    (rows, p), as the rows of a (rows, p) array, all drawn from ``rng``; ``None`` when the path
    is not compiled (no kernel or C not ball-type: the numpy fallback calls ``problem.grad`` at
    one θ, which cannot be batched across chains).

    One compiled call (:func:`_ula_chains`) advances up to ``BATCH_BLOCK // steps`` chains (at
    least one) by up to ``BLOCK`` steps, with the steps of :func:`_ula_block` and fresh N(0, I_p)
    normals per step and chain, so each row has the law of :func:`langevin_path`'s output (not
    the value of any single run: the chains interleave their draws). ``checkpoint()`` runs
    between calls.
    """
    kernel = resolve_kernel(problem)
    projection = compiled_projection(constraint, data.p)
    if kernel is None or projection is None:
        return None
    p = data.p
    center = np.zeros(p) if center is None else np.asarray(center, dtype=float)
    thetas = np.array(theta0, dtype=float, order="C")
    accs = np.zeros_like(thetas)
    step, sd = eta * beta, math.sqrt(2.0 * eta)
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kernel.prm, dtype=np.float64)
    centers, radii, tol, max_iter = projection
    keep = output == "average"
    per_call = max(1, BATCH_BLOCK // max(steps, 1))
    noise = np.empty((min(BLOCK, steps), p))
    chains = _ula_loops(kernel.grad)[1]
    for lo in range(0, thetas.shape[0], per_call):
        rows, sums = thetas[lo:lo + per_call], accs[lo:lo + per_call]
        for start in range(0, steps, BLOCK):
            checkpoint()
            chains(X, y, prm, rng, rows, sums, noise[:min(BLOCK, steps - start)], step, sd, clip,
                   lam, center, centers, radii, tol, max_iter, keep)
    return constraint.project(accs / steps) if keep else thetas


def ou_path(center: np.ndarray, curvature: float, *, theta0: np.ndarray, steps: int, eta: float,
            beta: float, output: str = "last", rng: np.random.Generator) -> np.ndarray:
    """Exact Ornstein–Uhlenbeck transitions on the grid kη (A1.8, [derived]): for ℒ = (a/2)‖θ − c‖²,
    θ ← c + e^{−βaη}(θ − c) + √((1 − e^{−2βaη})/(βa))·ξ. Unconstrained; returns the last point
    or the mean of θ_1, …, θ_T (the caller projects). Draws the same noise blocks as ULA.

    ``theta0`` and ``center`` may also be (rows, p): independent runs, one per row (the audit
    path), the normals then drawn in (b, rows, p) blocks of at most ``BATCH_BLOCK`` values."""
    rate = beta * curvature
    decay = math.exp(-rate * eta)
    sd = math.sqrt(-math.expm1(-2.0 * rate * eta) / rate)
    theta = np.array(theta0, dtype=float) - center
    acc = np.zeros_like(theta)
    block = BLOCK if theta.ndim == 1 else max(1, BATCH_BLOCK // theta.size)
    for noise in _noise_blocks(steps, theta.shape, rng, block):
        for k in range(noise.shape[0]):
            theta = decay * theta + sd * noise[k]
            acc += theta
    return center + (acc / steps if output == "average" else theta)


def _isotropic_quadratic(problem: Problem) -> LossKernel | None:
    """The problem's kernel when ℓ = (a/2)‖θ − x‖² exactly (QUADRATIC, no kink, m = M = a)."""
    kernel = resolve_kernel(problem)
    if kernel is None or kernel.loss is not quadratic_loss or float(kernel.prm[1]) != 0.0:
        return None
    a = float(kernel.prm[0])
    if not (a > 0 and problem.strong_convexity == a and problem.smoothness == a):
        return None
    return kernel


# --- the mechanism ---------------------------------------------------------------------------------
class Langevin(Algorithm):
    """Finite-time Langevin diffusion (GTU Theorem 2.3 / A5), discretised as projected noisy GD (A2).

    Calibration (``calibration``; a literal and a tight mode, docs/langevin.md Pitfalls 10):

    * ``tight`` (default, certified): Δ = 2L/n (Errata 2) and the exact GDP curve of the path,
      μ = βΔ√(t/2) = gdp_mu(ε, δ) at t = horizon·t_mix(β) (fixed point in β; A0.5 [derived]).
      The ledger's ε is the exact GDP ε at the β, Δ, t used (≤ the target); ``gdp_mu`` is set.
    * ``literal``: GTU Lemma 3.1 as printed, β = 2ε/(Δ′√(t log 1/δ)) with Δ′ = L/n. Errata 1 and 2
      (docs/langevin.md) make it ≈ 3.5× optimistic (the true path ε at nominal ε = 1, δ = 1e-5 is
      ≈ 3.55): the ledger records the paper's nominal ε with ``certified=False``;
      ``info["true_epsilon"]`` is the exact one.

    Horizon (``horizon`` = c): t = c·t_mix(β), t_mix = e/(2βm)·log(4βL‖C‖/δ²) (Lemma B.5, Errata 8;
    Errata 9 for the running time). The privacy covers the whole path on [0, t] (anytime release);
    a longer horizon costs privacy, so β shrinks roughly like 1/c (E14).

    Discretisation (``h``): η = h/(βM), T = ⌈t/η⌉, then η = t/T (A2), so T ≈ horizon·eMΛ/(2mh)
    does not depend on n, ε or p. The ULA stationary law is biased by 1/(1 − ηβm/2) on quadratics
    (A2, E15); privacy depends only on t (Lemma 3.1). Caveat: when βM is small against the size of C
    (A8 on a linear loss, M = λ_r) the per-step noise √(2ηp) exceeds C and projected ULA is a poor
    approximation of the reflected diffusion; a geometric cap on η would fix it at the price of
    10⁵–10⁶ steps (docs/langevin.md), so it is not applied.

    Regularised wrapper (``regularize``, A8): ``erm`` / ``sco`` add (λ_r/2)‖θ − c‖² (c the centre of
    C, data independent) with λ_r from :func:`regularizer_strength`; then m ← m + λ_r,
    M ← M + λ_r and the Lipschitz constant in Λ becomes L + λ_r‖C‖, while Δ = 2L/n is unchanged
    (the regulariser cancels). The engine measures the excess on the original problem.

    Utility (GTU Thm 2.3 via A5): ERM Õ(L²p·log(1/δ)·Λ/(mε²n²)); see :meth:`rate_card`.

    Audit path (``run_batch``): the plan and the ledger once (:meth:`plan`, shared with ``run``),
    the starts θ₀ ~ Unif(C) drawn row by row (:meth:`_start`), then the same chain per row: ULA by
    :func:`langevin_chains` (one compiled loop over rows, the steps of ``run``), OU by
    :func:`ou_path` on all rows at once, each row with its own c = θ₀ − ∇ℒ(θ₀)/a as in ``run``.
    Every draw comes from the one generator, so each row has the law of ``run``'s θ. ULA without
    a problem kernel or on a C that is not ball-type returns ``None`` (``run``'s numpy fallback
    evaluates ``problem.grad`` at one θ at a time, which does not batch across chains).
    """

    name: ClassVar[str] = "langevin"
    summary: ClassVar[str] = ("Finite-time Langevin diffusion / projected noisy full-batch GD with "
                              "path privacy (GTU Thm 2.3, Lemma 2.2)")
    citation: ClassVar[str] = ("Ganesh, Thakurta, Upadhyay, Differentially Private Sampling from "
                               "Rashomon Sets, and the Universality of Langevin Diffusion for "
                               "Convex Optimization: Thm 2.3, Lemma 2.2, Lemma 3.1, Lemma B.5, §4.4")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "smooth", "strongly_convex")
    version: ClassVar[str] = "1"
    #: Generic harness at the audit suite's h = 0.2 (T ≈ 170 steps instead of ≈ 1700): its privacy
    #: audit runs 10⁶ chains per side through ``run_batch`` (≈ 25 s per side at n = 4, p = 3).
    #: The default h is checked by tests/plugins/test_langevin.py.
    check_settings: ClassVar[dict[str, Any]] = {"params": {"h": 0.2}}
    params: ClassVar[dict[str, Param]] = {
        "calibration": Param("tight", kind="str", choices=CALIBRATIONS,
                             doc="tight: exact GDP path accountant, Δ = 2L/n (certified); "
                                 "literal: Lemma 3.1 as printed with Δ' = L/n (uncertified)"),
        "h": Param(0.02, low=0.0, low_open=True, high=1.0,
                   doc="step η = h/(βM) (A2 in docs/langevin.md: h in [0.005, 0.05])"),
        "horizon": Param(1.0, low=0.0, low_open=True,
                         doc="time horizon t as a multiple of t_mix(β) (1 = mixing, Lemma B.5)"),
        "sampler": Param("ula", kind="str", choices=SAMPLERS,
                         doc="ula: projected noisy GD; ou_exact: exact OU transitions "
                             "(isotropic quadratics on a ball only)"),
        "output": Param("last", kind="str", choices=OUTPUTS,
                        doc="released point: last iterate or the path average (post-processing)"),
        "regularize": Param("none", kind="str", choices=REGULARIZE,
                            doc="A8 wrapper for merely convex losses: none, erm or sco λ_r"),
    }

    calibration: str
    h: float
    horizon: float
    sampler: str
    output: str
    regularize: str

    # --- declarations -------------------------------------------------------------------------
    def requirements(self) -> tuple[str, ...]:
        if self.regularize != "none":
            return ("convex", "lipschitz", "smooth")
        return self.requires

    def not_applicable_reason(self, problem: Problem) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason:
            if self.regularize == "none" and not problem.strong_convexity > 0:
                reason += ("; the Langevin sampler needs m > 0 (GTU Thm 2.3): set "
                           "regularize='erm' or 'sco' for merely convex losses (A8)")
            return reason
        if self.sampler == "ou_exact":
            if self.regularize != "none" or _isotropic_quadratic(problem) is None:
                return (f"{self.name}: sampler='ou_exact' needs an isotropic quadratic loss "
                        f"(a/2)‖θ − d‖² without regularisation (A1.8 in docs/langevin.md); problem "
                        f"{problem.name!r} is not one — use sampler='ula'")
            if not isinstance(problem.constraint, (Ball, BallAt)):
                return f"{self.name}: sampler='ou_exact' needs a ball constraint (A1.8)"
        return None

    def plan(self, problem: Problem, n: int, p: int, epsilon: float, delta: float) -> LangevinPlan:
        """β, t, η, T from public quantities only (declared L, m, M, diameter, n, p, ε, δ)."""
        return _plan(self.calibration, self.h, self.horizon, self.regularize,
                     float(problem.lipschitz), float(problem.constraint.diameter),
                     float(problem.strong_convexity), float(problem.smoothness), n, p,
                     float(epsilon), float(delta))

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """The plan's ``beta`` (inverse temperature), ``t`` (diffusion time), ``eta`` (step)
        and ``steps`` T (:meth:`plan`, as :meth:`run` uses it)."""
        plan = self.plan(problem, n, p, epsilon, delta)
        return {"beta": plan.beta, "t": plan.t, "eta": plan.eta, "steps": float(plan.steps)}

    def cost(self, n: int, p: int) -> float:
        """≈ n·p·T with T ≈ horizon·eM/(2mh)·Λ (Λ ≈ 35 at the usual grid points)."""
        steps = self.horizon * math.e / (2.0 * self.h) * 35.0
        return float(n * p * steps) if self.sampler == "ula" else float(p * steps)

    def rate_card(self) -> RateCard:
        """GTU Thm 2.3 on the average scale; Λ = log(4βL‖C‖/δ²) is kept in the expression (not
        divided out) with β's leading order inserted, so the card's local n-slope is
        −2 + 2/Λ ≈ −1.94 at n = 1e3 (E6: "n ≈ −2 minus about 0.05 from Λ")."""
        cal = ("exact GDP path accountant, Δ = 2L/n" if self.calibration == "tight" else
               "Lemma 3.1 as printed with Δ' = L/n (uncertified, docs/langevin.md Errata 1, 2)")
        if self.regularize == "none":
            return RateCard(
                expression=f"L**2*p*log(1/delta)*{_LAMBDA_SC}/(Delta*epsilon**2*n**2)",
                exponents={"n": -2, "p": 1, "epsilon": -2},
                citation="GTU Thm 2.3 / §4.3 via A5 (docs/langevin.md): Õ(L²p log(1/δ)Λ/(mε²n²))",
                regime="ε ≤ 1 for the ε² law; cap L*D binds while p/β ≳ L*D/10 (n ≲ 200 at p=10)",
                notes=(f"Calibration: {cal}. Exact on F1 (mean_est): E excess = p/(2β)·"
                       "1/(1 − ηβm/2) at t ≥ t_mix (ULA bias, A2)."))
        card = "L*D*sqrt(p*log(1/delta))*" + _LAMBDA_REG + "/(epsilon*n)"
        if self.regularize == "erm":
            return RateCard(
                expression=card, exponents={"n": -1, "p": 0.5, "epsilon": -1},
                citation="GTU §4.4 (A8 + A5): Õ(L‖C‖√(p log 1/δ)/(εn)) convex ERM",
                regime="εn ≫ √(p log 1/δ)", notes=f"Calibration: {cal}.")
        return RateCard(
            expression=card + "+L*D/sqrt(n)", exponents={"n": -1, "p": 0.5, "epsilon": -1},
            citation="GTU §4.4 (A8 + A5): Õ(L‖C‖√(p log 1/δ)/(εn) + L‖C‖/√n) convex SCO",
            regime="n ≲ p log(1/δ)/ε² (privacy term) then −½", quantity="excess_population_risk",
            notes=f"Calibration: {cal}.")

    # --- running ------------------------------------------------------------------------------
    def _start(self, constraint: ConstraintSet, p: int, rng: np.random.Generator) -> np.ndarray:
        """θ₀ ~ Unif(C) (A0.4, data independent); the centre of C when C cannot be sampled."""
        sample = getattr(constraint, "sample_uniform", None)
        return np.asarray(sample(p, rng), dtype=float) if sample else constraint.center(p)

    def _ou_curvature(self, problem: Problem, plan: LangevinPlan, p: int) -> float:
        """a of the isotropic quadratic (a/2)‖θ − d‖² that ``ou_exact`` simulates; raises
        ``NotApplicable`` when the stationary spread 3√(p/(βa)) exceeds the radius of C (A1.8)."""
        a = float(_isotropic_quadratic(problem).prm[0])  # type: ignore[union-attr]
        radius = float(problem.constraint.diameter) / 2.0
        if 3.0 * math.sqrt(p / (plan.beta * a)) > radius:
            raise NotApplicable(
                f"{self.name}: sampler='ou_exact' simulates the unconstrained diffusion; its "
                f"stationary spread 3√(p/(βa)) = {3 * math.sqrt(p / (plan.beta * a)):.3g} "
                f"exceeds the radius {radius:g} of C, where reflection matters (A1.8)")
        return a

    @staticmethod
    def _ou_center(problem: Problem, data: Dataset, theta0: np.ndarray, a: float) -> np.ndarray:
        """c = θ₀ − ∇ℒ(θ₀)/a (= d̄): one full gradient."""
        return theta0 - problem.full_grad(theta0, data) / a

    def _ledger(self, plan: LangevinPlan, n: int, L: float, epsilon: float,
                delta: float) -> tuple[PrivacyLedger, dict[str, Any]]:
        mu = ld_gdp_mu(plan.beta, plan.Delta, plan.t)
        true_eps = _exact_epsilon(plan.beta, plan.Delta, plan.t, delta)
        info = {"gdp_mu": mu, "true_epsilon": true_eps,
                "rdp_epsilon": rdp_epsilon(ld_rdp_slope(plan.beta, plan.Delta, plan.t), delta)}
        if self.calibration == "tight":
            charge = Charge(
                f"langevin path on [0, t={plan.t:.6g}] (β={plan.beta:.6g}, Δ=2L/n), exact GDP",
                true_eps, delta, "GTU Lemma 2.2 / Lemma 3.1 path bound as GDP (A0.5; "
                "docs/langevin.md Errata 1, 2); Dong–Roth–Su GDP → (ε, δ)", certified=True,
                gdp_mu=mu)
            return PrivacyLedger((charge,), true_eps, delta, accounting="GDP (exact)"), info
        claimed = lemma31_epsilon(plan.beta, L / n, plan.t, delta)
        info["paper_epsilon"] = claimed
        charge = Charge(
            f"langevin path on [0, t={plan.t:.6g}] (β={plan.beta:.6g}), Lemma 3.1 as printed",
            claimed, delta, "GTU Lemma 3.1 as printed with Δ' = L/n: ≈ 3.5× optimistic "
            "(docs/langevin.md Errata 1: constant, 2: sensitivity 2L/n); true ε in "
            "info['true_epsilon']", certified=False)
        return PrivacyLedger((charge,), claimed, delta, accounting="GTU Lemma 3.1 (paper-literal)",
                             certified=False), info

    # --- the output law (the audit's true ε) --------------------------------------------------
    def _line_law(self, data: Dataset, problem: Problem, epsilon: float,
                  delta: float) -> LineLaw | None:
        """The exact law of the released last point at p = 1 ([derived]); ``None`` for p > 1, a
        C that is not an interval, or the path average.

        The start θ₀ ~ Unif(C) is the uniform law on [lo, hi] (the centre's point mass when C
        has no uniform sampler). ULA: T identical steps from θ of
        N(θ − ηβ·(ḡ(θ) + λ_r(θ − c)), 2η), ḡ the mean clipped gradient, each projected onto C
        (:func:`~dpbench.numerics.line_law.propagate`, one transition matrix for all T).
        ``ou_exact``: the T exact OU transitions of :func:`ou_path` compose to one Gaussian,
        θ_T = d̄ + e^{−βaTη}(θ₀ − d̄) + N(0, v), v = s²(1 − e^{−2βaTη})/(1 − e^{−2βaη}) with s
        the per-step standard deviation, then the release projects it onto C: one step from
        the uniform law (c = θ₀ − ∇ℒ(θ₀)/a = d̄ whatever θ₀, the loss being an isotropic
        quadratic).
        """
        interval = line_interval(problem.constraint, data.p)
        if self.output != "last" or interval is None:
            return None
        lo, hi = interval
        plan = self.plan(problem, data.n, data.p, epsilon, delta)
        start = (uniform(lo, hi) if hasattr(problem.constraint, "sample_uniform")
                 else point_mass(float(problem.constraint.center(1)[0])))
        if self.sampler == "ou_exact":
            a = self._ou_curvature(problem, plan, data.p)
            centre = float(self._ou_center(problem, data, problem.constraint.center(1), a)[0])
            rate = plan.beta * a
            decay = math.exp(-rate * plan.eta)
            step_var = -math.expm1(-2.0 * rate * plan.eta) / rate
            keep = decay ** plan.steps
            sd = math.sqrt(step_var * -math.expm1(-2.0 * rate * plan.eta * plan.steps)
                           / -math.expm1(-2.0 * rate * plan.eta))
            step = GaussianStep(lambda x: (centre + keep * (x - centre))[None, :], np.ones(1),
                                sd)
            return propagate(start, [step], lo, hi, nodes_for(sd / max(1.0, keep), lo, hi))
        grads = RowGradients(problem, data, float(problem.lipschitz))
        centre = float(problem.constraint.center(1)[0])
        move = plan.eta * plan.beta
        sd = math.sqrt(2.0 * plan.eta)
        step = GaussianStep(
            lambda x: (x - move * (grads.probs @ grads(x) + plan.lam * (x - centre)))[None, :],
            np.ones(1), sd)
        slope = max(1.0, abs(1.0 - move * (float(problem.smoothness) + plan.lam)))
        return propagate(start, [step] * plan.steps, lo, hi, nodes_for(sd / slope, lo, hi))

    def _line_laws(self, d0: Dataset, d1: Dataset, problem: Problem, epsilon: float,
                   delta: float) -> tuple[LineLaw, LineLaw] | None:
        """(:meth:`_line_law` on D, on D′), cached per pair; ``None`` when either is, or when a
        subclass replaced :meth:`run` (these laws describe this class's ``run``)."""
        if not type(self)._defined_at_or_below_run("_line_laws"):
            return None

        def build() -> tuple[LineLaw, LineLaw] | None:
            laws = (self._line_law(d0, problem, epsilon, delta),
                    self._line_law(d1, problem, epsilon, delta))
            return None if laws[0] is None or laws[1] is None else laws  # type: ignore[return-value]

        return cached(release_key(self, problem, d0, d1, epsilon, delta), build)  # type: ignore[return-value]

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the released point at p = 1 (:meth:`_line_law`, both orders of the
        hockey stick). The ledger's GDP μ = βΔ√(t/2) covers the whole path on [0, t] with
        Δ = 2L/n; the last point alone is far more private (near stationarity it is about
        N(d̄, 1/β), a Gaussian mechanism of μ ≈ √β·|d̄ − d̄′|), so the true ε is well below the
        claim."""
        laws = self._line_laws(d0, d1, problem, epsilon, delta)
        return None if laws is None else line_epsilon(laws[0], laws[1], delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) from :meth:`exact_epsilon`'s laws (``None`` without them)."""
        laws = self._line_laws(d0, d1, problem, epsilon, delta)
        if laws is None:
            return None
        return line_log_ratio(laws[0], laws[1], np.asarray(thetas, dtype=float)[:, 0])

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        constraint = problem.constraint
        plan = self.plan(problem, n, p, epsilon, delta)
        L = float(problem.lipschitz)
        theta0 = self._start(constraint, p, rng)
        if self.sampler == "ou_exact":
            a = self._ou_curvature(problem, plan, p)
            center = self._ou_center(problem, data, theta0, a)
            raw = ou_path(center, a, theta0=theta0, steps=plan.steps, eta=plan.eta,
                          beta=plan.beta, output=self.output, rng=rng)
            theta, path, queries = constraint.project(raw), "ou_exact", n
        else:
            theta, path = langevin_path(
                problem, data, constraint=constraint, theta0=theta0, steps=plan.steps,
                eta=plan.eta, beta=plan.beta, clip=L, lam=plan.lam,
                center=constraint.center(p), output=self.output, rng=rng)
            queries = n * plan.steps
        ledger, pinfo = self._ledger(plan, n, L, epsilon, delta)
        info = {"calibration": self.calibration, "sampler": self.sampler, "path": path,
                "output": self.output, "beta": plan.beta, "t": plan.t, "eta": plan.eta,
                "steps": plan.steps, "Delta": plan.Delta, "m": plan.m, "M": plan.M,
                "L_cal": plan.L_cal, "lambda_r": plan.lam, "log_term": plan.log_term,
                "horizon": self.horizon, "h_effective": plan.eta * plan.beta * plan.M,
                "start": "uniform" if hasattr(constraint, "sample_uniform") else "center",
                "clip_norm": L, **pinfo}
        return Release(theta=np.asarray(theta, dtype=float), ledger=ledger, grad_queries=queries,
                       iterations=plan.steps, info=info)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """``size`` independent runs of :meth:`run` (see the class docstring, 'Audit path');
        ``None`` for ULA without a compiled path (no kernel, or C not ball-type)."""
        n, p = data.n, data.p
        constraint = problem.constraint
        if self.sampler == "ula" and not uses_compiled_path(problem, constraint, p):
            return None
        plan = self.plan(problem, n, p, epsilon, delta)
        L = float(problem.lipschitz)
        a = self._ou_curvature(problem, plan, p) if self.sampler == "ou_exact" else 0.0
        theta0 = np.stack([self._start(constraint, p, rng) for _ in range(int(size))])
        if self.sampler == "ou_exact":
            center = np.stack([self._ou_center(problem, data, row, a) for row in theta0])
            thetas = constraint.project(ou_path(center, a, theta0=theta0, steps=plan.steps,
                                                eta=plan.eta, beta=plan.beta, output=self.output,
                                                rng=rng))
        else:
            thetas = langevin_chains(
                problem, data, constraint=constraint, theta0=theta0, steps=plan.steps,
                eta=plan.eta, beta=plan.beta, clip=L, lam=plan.lam, center=constraint.center(p),
                output=self.output, rng=rng)
        ledger, _ = self._ledger(plan, n, L, epsilon, delta)
        return BatchRelease(np.asarray(thetas, dtype=float), ledger)
