"""BST14 Algorithm 1 (𝒜_Noise-GD): noisy projected SGD, (ε, δ)-DP for Lipschitz convex losses.

Bassily, Smith and Thakurta, "Private Empirical Risk Minimization: Efficient Algorithms and Tight
Error Bounds" (FOCS 2014; arXiv:1405.7085), Algorithm 1, Thm 2.1 (privacy) and Thm 2.4 (utility).
The DP-SGD view of Algorithm 1, the accountant and NoisySGD-T, the cap thresholds, the oracles
O2/O3 and Errata 9 are written down in docs/bst14.md ("NoisySGD's noise, the accountant and
NoisySGD-T", "Where the cap binds", "Oracle curves and reference runs", "Errata").

The T-step loop is :func:`noisy_sgd_path`, shared with other mechanisms (Localize-δ runs it on
C ∩ B(θ₀, r₀)). It has two implementations: a numba-compiled loop, used when the problem has a
compiled kernel (:func:`dpbench.numerics.kernels.resolve_kernel`) and C is a ball or an intersection of
balls, and a numpy fallback for every other problem. Both are deterministic for a fixed seed and
consume the generator in the same order (blocks of ``BLOCK`` indices, then ``BLOCK × p`` normals),
so they follow the same trajectory; the released points agree up to floating-point rounding
(summation order in the kernel versus numpy), not bit for bit. ``Release.info["path"]`` records
which one ran. The privacy audit's vectorised path (:func:`noisy_sgd_chains`,
``NoisySGD.run_batch``) runs many independent chains in one compiled loop with the same steps
(:func:`_sgd_run_steps`); it exists on the compiled path only.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import Ball, BallAt, ConstraintSet, Intersection
from ..core.tags import get_tags
from ..core.time_limit import checkpoint
from ..numerics.jit import cached_njit, inlinable, specialise
from ..numerics.kernels import kernel_arrays, resolve_kernel
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
)
from ..privacy.accountant import (
    ACCOUNTING_PLD,
    calibrate_noisy_sgd_certified,
    noisy_sgd_epsilon_certified,
    noisy_sgd_profile,
)
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.noise import gaussian_noise

#: Steps whose randomness is drawn at once on the numpy path. A constant: the output depends only
#: on the rng.
BLOCK = 8192

#: Steps per call of the compiled loop, a multiple of ``BLOCK``; ``checkpoint()`` runs between
#: calls (~10 ms of work at p = 10).
COMPILED_BLOCK = 8 * BLOCK

VARIANTS = ("lipschitz", "strongly_convex")
OUTPUTS = ("last", "average", "suffix")

# Rate cards on the AVERAGE scale (BST14's sum-scale bounds divided by n once), keyed by
# (variant, sigma_mode, averaged output?). See NoisySGD.rate_card for the derivations.
_CARDS: dict[tuple[str, str, bool], tuple[str, str]] = {
    ("lipschitz", "paper", False): (
        "L*D*sqrt(p*log(1/delta))*log(n/delta)**1.5/(n*epsilon)", "BST14 Thm 2.4(1)"),
    ("lipschitz", "paper", True): (
        "L*D*sqrt(p*log(n/delta)*log(1/delta))/(n*epsilon)",
        "BST14 Thm 2.4(1) with the log T of the last iterate removed by averaging [derived]"),
    ("lipschitz", "accountant", False): (
        "L*D*sqrt(p*log(1/delta))*log(n)/(n*epsilon)",
        "BST14 Thm 2.4(1) with the accountant σ (PLD of the dominating pair) [derived, "
        "docs/bst14.md]"),
    ("lipschitz", "accountant", True): (
        "L*D*sqrt(p*log(1/delta))/(n*epsilon)",
        "BST14 Thm 2.4(1) with the accountant σ (PLD of the dominating pair) and averaging "
        "[derived]"),
    ("strongly_convex", "paper", False): (
        "L**2*p*log(n/delta)**2*log(1/delta)/(n**2*Delta*epsilon**2)", "BST14 Thm 2.4(2)"),
    ("strongly_convex", "paper", True): (
        "L**2*p*log(n/delta)*log(1/delta)/(n**2*Delta*epsilon**2)",
        "BST14 Thm 2.4(2) with the log T removed by suffix averaging [derived]"),
    ("strongly_convex", "accountant", False): (
        "L**2*p*log(1/delta)*log(n)/(n**2*Delta*epsilon**2)",
        "BST14 Thm 2.4(2) with the accountant σ (PLD of the dominating pair) [derived, "
        "docs/bst14.md]"),
    ("strongly_convex", "accountant", True): (
        "L**2*p*log(1/delta)/(n**2*Delta*epsilon**2)",
        "BST14 Thm 2.4(2) with the accountant σ (PLD of the dominating pair) and suffix "
        "averaging [derived]"),
}


def paper_noise_multiplier(n: int, epsilon: float, delta: float) -> float:
    """z = σ/(2nL) for the paper's σ² = 32 L² n² log(n/δ) log(1/δ)/ε² ([derived]: Algorithm 1 as
    DP-SGD, docs/bst14.md)."""
    return math.sqrt(8.0 * math.log(n / delta) * math.log(1.0 / delta)) / epsilon


# --- the shared T-step path ----------------------------------------------------------------------
@cached_njit
def _project_ball(theta, center, radius, out):  # type: ignore[no-untyped-def]
    """out = Π_{B(center, radius)}(theta), as ``Ball.project`` / ``BallAt.project`` compute it."""
    sq = 0.0
    for j in range(theta.shape[0]):
        d = theta[j] - center[j]
        out[j] = d
        sq += d * d
    norm = math.sqrt(sq)
    scale = 1.0 if norm <= radius else radius / norm
    for j in range(theta.shape[0]):
        out[j] = center[j] + out[j] * scale


@cached_njit
def _inside_all(theta, centers, radii):  # type: ignore[no-untyped-def]
    for b in range(radii.shape[0]):
        sq = 0.0
        for j in range(theta.shape[0]):
            d = theta[j] - centers[b, j]
            sq += d * d
        if math.sqrt(sq) > radii[b]:
            return False
    return True


@cached_njit
def project_balls(theta, centers, radii, tol, max_iter):  # type: ignore[no-untyped-def]
    """In place: θ ← Π_{∩ B(centers[b], radii[b])}(θ), compiled.

    One ball: the closed form. Several: Dykstra's alternating projections (Boyle–Dykstra) with the
    stopping rule and final feasibility pass of :meth:`dpbench.core.sets.Intersection.project`
    (``tol``, ``max_iter`` are the intersection's), so both agree up to rounding.
    """
    m, p = radii.shape[0], theta.shape[0]
    if m == 1:
        _project_ball(theta, centers[0], radii[0], theta)  # in place: aliasing is safe
        return
    if _inside_all(theta, centers, radii):
        return
    y = theta.copy()
    prev = np.empty(p)
    shifted = np.empty(p)
    corrections = np.zeros((m, p))
    for _ in range(max_iter):
        prev[:] = y
        for b in range(m):
            for j in range(p):
                shifted[j] = y[j] + corrections[b, j]
            _project_ball(shifted, centers[b], radii[b], y)
            for j in range(p):
                corrections[b, j] = shifted[j] - y[j]
        change = 0.0
        size = 0.0
        for j in range(p):
            change += (y[j] - prev[j]) ** 2
            size += y[j] * y[j]
        if math.sqrt(change) <= tol * (1.0 + math.sqrt(size)):
            break
    for b in range(m):
        shifted[:] = y
        _project_ball(shifted, centers[b], radii[b], y)
    theta[:] = y


# --- the compiled step loops, specialised per kernel ---------------------------------------------
# The loops below are templates: plain functions calling the global ``_kernel_grad``, compiled
# once per kernel by :func:`_compiled_loops` with ``_kernel_grad`` bound to that kernel's gradient
# (inlined: no call per step) and cached on disk (:func:`dpbench.numerics.jit.specialise`). The
# kernel is never a function argument: numba would call it through a call per step, and key the
# on-disk cache by the dispatcher object, so that no process would ever hit the cache.
_kernel_grad: Any = None  # bound per kernel by _compiled_loops


def _sgd_run_steps(X, y, prm, rng, theta, acc, g, idx, t_first, m, c,  # type: ignore[no-untyped-def]
                   sqrt_decay, clip, sigma, first_kept, centers, radii, tol, max_iter):
    """Steps t = t_first, …, t_first + m − 1 of :func:`noisy_sgd_path`, in place on θ and ``acc``,
    step t using the drawn row ``idx[k]``, k = t − t_first, and p fresh normals ξ of ``rng``.

    Per step: g = ∇ℓ(θ; dᵢ) by the kernel; θ ← Π(θ − η(t)·n·min(1, L/‖g‖)·g − η(t)·(σ·ξ)) with
    η(t) = c/√t or c/t, the normals drawn in coordinate order; and acc += θ when t ≥ first_kept.
    ``g`` is a length-p scratch vector. C of one ball is projected here, as
    :func:`_project_ball` computes it (the same operations in the same order); an intersection by
    :func:`project_balls`. The step logic of both compiled loops, :func:`_sgd_steps` (one run)
    and :func:`_sgd_chains` (many).
    """
    nf = float(X.shape[0])
    p = theta.shape[0]
    one_ball = radii.shape[0] == 1
    center = centers[0] if one_ball else theta
    radius = radii[0] if one_ball else 0.0
    for k in range(m):
        t = t_first + k
        eta = c / math.sqrt(t) if sqrt_decay else c / t
        _kernel_grad(theta, X, y, prm, idx[k], g)
        sq = 0.0
        for j in range(p):
            sq += g[j] * g[j]
        gn = math.sqrt(sq)
        a = eta * nf
        if gn > clip:  # clip to the declared L (docs/bst14.md: the paper does not clip)
            a *= clip / gn
        if one_ball:  # the step fused with the first pass of _project_ball
            sq = 0.0
            for j in range(p):
                d = (theta[j] - a * g[j] - eta * (sigma * rng.standard_normal())) - center[j]
                theta[j] = d
                sq += d * d
            norm = math.sqrt(sq)
            scale = 1.0 if norm <= radius else radius / norm
            for j in range(p):
                theta[j] = center[j] + theta[j] * scale
        else:
            for j in range(p):
                theta[j] = theta[j] - a * g[j] - eta * (sigma * rng.standard_normal())
            project_balls(theta, centers, radii, tol, max_iter)
        if t >= first_kept:
            for j in range(p):
                acc[j] += theta[j]


def _sgd_steps(X, y, prm, rng, theta, acc, t_first, m, block, c,  # type: ignore[no-untyped-def]
               sqrt_decay, clip, sigma, first_kept, centers, radii, tol, max_iter):
    """Steps t = t_first, …, t_first + m − 1 of :func:`noisy_sgd_path`, in place on θ and ``acc``.

    ``t_first − 1`` must be a multiple of ``block``. Randomness is drawn exactly as on the numpy
    path: per block of ``block`` steps (always a full block), ``block`` draws
    ``rng.integers(0, n)`` and then ``block·p`` draws ``rng.standard_normal()`` (row-major), which
    is the stream of ``rng.integers(0, n, size=block)`` followed by
    ``rng.standard_normal((block, p))``. The normals are drawn by the steps
    (:func:`_sgd_run_steps`) as they use them, row by row; those of a last, partial block's
    unused rows are drawn and discarded after it.
    """
    n = X.shape[0]
    p = theta.shape[0]
    g = np.empty(p)
    idx = np.empty(block, np.int64)
    t_end = t_first + m
    for t0 in range(t_first, t_end, block):
        for k in range(block):
            idx[k] = rng.integers(0, n)
        used = min(block, t_end - t0)
        _sgd_run_steps(X, y, prm, rng, theta, acc, g, idx, t0, used, c, sqrt_decay, clip, sigma,
                       first_kept, centers, radii, tol, max_iter)
        for _ in range((block - used) * p):
            rng.standard_normal()


def _sgd_chains(X, y, prm, rng, thetas, accs, t_first, m, c,  # type: ignore[no-untyped-def]
                sqrt_decay, clip, sigma, first_kept, centers, radii, tol, max_iter):
    """Steps t = t_first, …, t_first + m − 1 of every chain: row r of ``thetas`` (its θ) and of
    ``accs`` (its running sum), in place, chain after chain, chain r projecting onto the balls
    B(centers[r, b], radii[b]) (``centers`` is (rows, balls, p)).

    Per chain it draws exactly what the m steps use, ``m`` draws ``rng.integers(0, n)`` and then
    ``m·p`` draws ``rng.standard_normal()`` (the single-run loop draws full blocks and leaves the
    rest of its last one unused), then runs :func:`_sgd_run_steps` (which draws the normals as
    it uses them): each chain has the law of :func:`noisy_sgd_path` (i.i.d. uniform rows, i.i.d.
    N(0, σ²I) noises, the same steps).
    """
    n = X.shape[0]
    p = thetas.shape[1]
    g = np.empty(p)
    idx = np.empty(m, np.int64)
    for r in range(thetas.shape[0]):
        for k in range(m):
            idx[k] = rng.integers(0, n)
        _sgd_run_steps(X, y, prm, rng, thetas[r], accs[r], g, idx, t_first, m, c, sqrt_decay,
                       clip, sigma, first_kept, centers[r], radii, tol, max_iter)


_LOOPS: dict[Any, tuple[Any, Any]] = {}


def _compiled_loops(grad: Any, *, cache: bool = True) -> tuple[Any, Any]:
    """(:func:`_sgd_steps`, :func:`_sgd_chains`) compiled for the kernel gradient ``grad``, with
    ``grad`` inlined into :func:`_sgd_run_steps`: built once per process and gradient, and cached
    on disk when ``grad`` is a module-level function (:func:`dpbench.numerics.jit.specialise`).
    ``cache=False`` builds new, uncached loops (for measuring a compilation)."""
    loops = _LOOPS.get(grad) if cache else None
    if loops is None:
        inline = inlinable(grad)
        steps = specialise(_sgd_run_steps, {"_kernel_grad": inline}, cache=cache)
        bound = {"_kernel_grad": inline, "_sgd_run_steps": steps}
        loops = (specialise(_sgd_steps, bound, cache=cache),
                 specialise(_sgd_chains, bound, cache=cache))
        if cache:
            _LOOPS[grad] = loops
    return loops


@cached_njit
def _average_rows(thetas, accs, n_kept, centers, radii,  # type: ignore[no-untyped-def]
                  tol, max_iter):
    """Row r of ``thetas`` ← Π_{C_r}(accs[r]/n_kept) (the averaged outputs of
    :func:`noisy_sgd_path`), C_r the balls B(centers[r, b], radii[b]); :func:`project_balls`
    agrees with ``constraint.project`` up to rounding."""
    for r in range(thetas.shape[0]):
        for j in range(thetas.shape[1]):
            thetas[r, j] = accs[r, j] / n_kept
        project_balls(thetas[r], centers[r], radii, tol, max_iter)


@cached_njit
def _project_rows(thetas, centers, radii, tol, max_iter):  # type: ignore[no-untyped-def]
    """Row r of ``thetas`` ← Π_{C_r}(thetas[r]) in place, C_r the balls B(centers[r, b],
    radii[b])."""
    for r in range(thetas.shape[0]):
        project_balls(thetas[r], centers[r], radii, tol, max_iter)


def compiled_projection(
    constraint: ConstraintSet, p: int
) -> tuple[np.ndarray, np.ndarray, float, int] | None:
    """(centres (m, p), radii (m,), tol, max_iter) of a ball-type C for :func:`project_balls`.

    ``Ball`` and ``BallAt`` are one ball; an ``Intersection`` of balls is its ``.balls(p)`` with its
    Dykstra tolerance. Any other set returns ``None`` (no compiled projection).
    """
    if isinstance(constraint, Ball):
        return np.zeros((1, p)), np.array([float(constraint.radius)]), 0.0, 0
    if isinstance(constraint, BallAt):
        return (constraint.center_point.reshape(1, p).astype(float),
                np.array([constraint.radius]), 0.0, 0)
    if isinstance(constraint, Intersection):
        try:
            centers, radii = constraint.balls(p)
        except TypeError:
            return None
        return (np.ascontiguousarray(centers, dtype=float), np.ascontiguousarray(radii),
                float(constraint.tol), int(constraint.max_iter))
    return None


def uses_compiled_path(problem: Problem, constraint: ConstraintSet, p: int) -> bool:
    """Whether :func:`noisy_sgd_path` runs compiled for this problem and C (else numpy)."""
    return resolve_kernel(problem) is not None and compiled_projection(constraint, p) is not None


def step_constant(variant: str, *, n: int, p: int, diameter: float, lipschitz: float,
                  sigma: float, strong_convexity: float) -> float:
    """c of η(t) = c/√t (Lipschitz: ‖C‖/√(n²L² + pσ²)) or η(t) = c/t (strongly convex: 1/(Δn)).

    BST14 Thm 2.4. ‖C‖ is the diameter of the set the path runs in.
    """
    if variant == "lipschitz":
        return diameter / math.sqrt(n * n * lipschitz * lipschitz + p * sigma * sigma)
    if not strong_convexity > 0:
        raise ValueError(f"strongly convex steps need strong_convexity > 0, got {strong_convexity}")
    return 1.0 / (strong_convexity * n)


def _first_kept(output: str, steps: int) -> int:
    """The first step t whose iterate θ_{t+1} enters the running sum of averaged outputs."""
    return {"last": steps + 1, "average": 1, "suffix": steps - (steps + 1) // 2 + 1}[output]


def noisy_sgd_path(
    problem: Problem, data: Dataset, *, constraint: ConstraintSet, steps: int, sigma: float,
    lipschitz: float, variant: str, strong_convexity: float = 0.0, output: str = "last",
    rng: np.random.Generator,
) -> np.ndarray:
    """Run ``steps`` noisy projected SGD steps of BST14 Algorithm 1 in ``constraint``; return θ.

    From θ₁ = ``constraint.center(p)`` (data-independent), for t = 1, …, ``steps``: draw i uniform
    in [n] and b_t ~ N(0, σ²I_p), set g_t = n·clip_L(∇ℓ(θ_t; dᵢ)) + b_t with L = ``lipschitz``
    (clipping is ours, docs/bst14.md) and θ_{t+1} = Π_C(θ_t − η(t)·g_t), with η from
    :func:`step_constant` (``variant`` "lipschitz" uses ``constraint.diameter``;
    "strongly_convex" uses ``strong_convexity``).
    Returns the last iterate (``output="last"``), or Π_C of the mean of θ_2, …, θ_{T+1}
    (``"average"``) or of the last ⌈T/2⌉ iterates (``"suffix"``).

    Privacy is the caller's business (σ, L, steps determine it; BST14 Thm 2.1). Runs compiled when
    :func:`uses_compiled_path` (numba; ``rng`` itself is used inside the loop), else on numpy.
    Both draw, per block of ``BLOCK`` steps, ``BLOCK`` indices and then ``BLOCK × p`` normals
    (always full blocks), so for a fixed ``rng`` state they give the same point up to rounding.
    Calls :func:`~dpbench.core.time_limit.checkpoint` between blocks of steps.
    """
    c, theta, first_kept = _path_setup(data, constraint=constraint, steps=steps, sigma=sigma,
                                       lipschitz=lipschitz, variant=variant,
                                       strong_convexity=strong_convexity, output=output)
    kernel = resolve_kernel(problem)
    projection = compiled_projection(constraint, data.p)
    if kernel is not None and projection is not None:
        acc = _compiled_loop(kernel, data, projection, theta, steps, c, variant, float(lipschitz),
                             float(sigma), first_kept, rng)
    else:
        acc = _numpy_loop(problem, data, constraint, theta, steps, c, variant, float(lipschitz),
                          float(sigma), first_kept, rng)
    n_kept = steps - first_kept + 1
    if n_kept > 0:
        theta = constraint.project(acc / n_kept)
    return theta


def _path_setup(data: Dataset, *, constraint: ConstraintSet, steps: int, sigma: float,
                lipschitz: float, variant: str, strong_convexity: float,
                output: str) -> tuple[float, np.ndarray, int]:
    """(c, θ₁, first kept step) of :func:`noisy_sgd_path` / :func:`noisy_sgd_chains`, after
    validating ``variant`` and ``output``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    n, p = data.n, data.p
    c = step_constant(variant, n=n, p=p, diameter=float(constraint.diameter),
                      lipschitz=float(lipschitz), sigma=float(sigma),
                      strong_convexity=float(strong_convexity))
    theta = np.array(constraint.center(p), dtype=float)
    return c, theta, _first_kept(output, steps)


def noisy_sgd_chains(
    problem: Problem, data: Dataset, *, constraint: ConstraintSet, steps: int, sigma: float,
    lipschitz: float, variant: str, strong_convexity: float = 0.0, output: str = "last",
    rng: np.random.Generator, size: int, centers: np.ndarray | None = None,
) -> np.ndarray | None:
    """``size`` independent runs of :func:`noisy_sgd_path` (same arguments), as the rows of a
    (size, p) array, all drawn from ``rng``; ``None`` when the path is not compiled
    (:func:`uses_compiled_path` False: the numpy fallback calls ``problem.grad`` once per step at
    one θ, which cannot be batched across chains).

    ``centers`` (size, m, p), when given, moves the m balls of C (in the order of
    :func:`compiled_projection`) per row: row r runs in C_r = ∩_b B(centers[r, b], radius of
    ball b) (C's radii, diameter and Dykstra tolerance are kept) from θ₁ = Π_{C_r}(centers[r,
    m − 1]), the start :func:`noisy_sgd_path` takes on such a set (``BallAt.center``, and
    ``Intersection.center`` when its last member is the ball that moves). Localize-δ runs its
    NoisySGD on C ∩ B(θ₀, r₀) with a θ₀ of its own per row
    (:class:`dpbench.algorithms.localize.LocalizeGaussian`).

    One compiled call (:func:`_sgd_chains`) advances up to ``COMPILED_BLOCK // steps`` chains
    (at least one) by up to ``COMPILED_BLOCK`` steps; ``checkpoint()`` runs between calls. The
    steps are :func:`_sgd_run_steps`, those of the single-run loop, so each row has the law of
    :func:`noisy_sgd_path`'s output; the rows are not equal to any single run's (a chain draws
    only the indices and normals its steps use, not full blocks of ``BLOCK``). A deterministic
    function of ``rng``'s state.
    """
    kernel = resolve_kernel(problem)
    projection = compiled_projection(constraint, data.p)
    if kernel is None or projection is None:
        return None
    c, theta, first_kept = _path_setup(data, constraint=constraint, steps=steps, sigma=sigma,
                                       lipschitz=lipschitz, variant=variant,
                                       strong_convexity=strong_convexity, output=output)
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kernel.prm, dtype=np.float64)
    shared, radii, tol, max_iter = projection
    if centers is None:
        row_centers = np.repeat(shared[None], int(size), axis=0)
        thetas = np.tile(theta, (int(size), 1))
    else:
        row_centers = np.array(centers, dtype=float, order="C")
        if row_centers.shape != (int(size), *shared.shape):
            raise ValueError(f"centers must have shape {(int(size), *shared.shape)}, got "
                             f"{row_centers.shape}")
        thetas = row_centers[:, -1, :].copy()
        _project_rows(thetas, row_centers, radii, tol, max_iter)
    accs = np.zeros_like(thetas)
    per_call = max(1, COMPILED_BLOCK // max(steps, 1))
    chains = _compiled_loops(kernel.grad)[1]
    for lo in range(0, int(size), per_call):
        rows, sums = thetas[lo:lo + per_call], accs[lo:lo + per_call]
        for start in range(0, steps, COMPILED_BLOCK):
            checkpoint()
            chains(X, y, prm, rng, rows, sums, start + 1, min(COMPILED_BLOCK, steps - start), c,
                   variant == "lipschitz", float(lipschitz), float(sigma), first_kept,
                   row_centers[lo:lo + per_call], radii, tol, max_iter)
    n_kept = steps - first_kept + 1
    if n_kept > 0:
        _average_rows(thetas, accs, float(n_kept), row_centers, radii, tol, max_iter)
    return thetas


def _compiled_loop(kernel: LossKernel, data: Dataset,
                   projection: tuple[np.ndarray, np.ndarray, float, int], theta: np.ndarray,
                   steps: int, c: float, variant: str, clip: float, sigma: float, first_kept: int,
                   rng: np.random.Generator) -> np.ndarray:
    """The compiled path: :func:`_sgd_steps` over blocks of ``COMPILED_BLOCK`` steps (θ in place).

    Returns the running sum of the kept iterates.
    """
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kernel.prm, dtype=np.float64)
    centers, radii, tol, max_iter = projection
    acc = np.zeros(theta.shape[0])
    run_steps = _compiled_loops(kernel.grad)[0]
    for start in range(0, steps, COMPILED_BLOCK):
        checkpoint()
        m = min(COMPILED_BLOCK, steps - start)
        run_steps(X, y, prm, rng, theta, acc, start + 1, m, BLOCK, c, variant == "lipschitz", clip,
                  sigma, first_kept, centers, radii, tol, max_iter)
    return acc


def _numpy_loop(problem: Problem, data: Dataset, constraint: ConstraintSet, theta: np.ndarray,
                steps: int, c: float, variant: str, clip: float, sigma: float, first_kept: int,
                rng: np.random.Generator) -> np.ndarray:
    """The numpy fallback (any problem, any C): randomness drawn ``BLOCK`` steps at a time.

    Updates θ in place and returns the running sum of the kept iterates.
    """
    n, p = data.n, data.p
    acc = np.zeros(p)
    project = constraint.project
    grad = problem.grad
    sqrt = math.sqrt
    nf = float(n)
    current = theta.copy()
    for start in range(0, steps, BLOCK):
        checkpoint()
        # Always draw a full block so the stream does not depend on T's remainder.
        idx = rng.integers(0, n, size=BLOCK)
        noise = gaussian_noise(p, sigma, rng, size=BLOCK)
        m = min(BLOCK, steps - start)
        t = np.arange(start + 1, start + m + 1, dtype=float)
        eta = c / (np.sqrt(t) if variant == "lipschitz" else t)
        # θ − η(t)·(n·clip(∇) + b_t) = θ − (η(t)·n·min(1, L/‖∇‖))·∇ − η(t)·b_t.
        step_noise = eta[:, None] * noise[:m]
        grad_coef = (eta * nf).tolist()
        for k in range(m):
            g = grad(current, data, idx[k:k + 1])[0]
            gn = sqrt(g.dot(g))
            a = grad_coef[k]
            if gn > clip:  # clip to the declared L (docs/bst14.md: the paper does not clip)
                a *= clip / gn
            current = project(current - a * g - step_noise[k])
            if start + k + 1 >= first_kept:
                acc += current
    theta[:] = current
    return acc


# --- the exact law of the released point at p = 1 (the audit's true ε) ---------------------------
def line_interval(constraint: ConstraintSet, p: int) -> tuple[float, float] | None:
    """C as an interval [lo, hi] when p = 1 and C is a ball or an intersection of balls (the
    sets the compiled projection handles); ``None`` otherwise."""
    if p != 1:
        return None
    projection = compiled_projection(constraint, 1)
    if projection is None:
        return None
    centers, radii = projection[0][:, 0], projection[1]
    return float(np.max(centers - radii)), float(np.min(centers + radii))


class RowGradients:
    """The clipped per-example derivatives clip_L(ℓ′(θ; dᵢ)) at points θ of the line, one row per
    distinct record (``probs``: its share of the n rows, the probability that a uniformly
    sampled index picks it), memoised per point set (a propagation asks for the same nodes at
    every step). Clipping as the steps clip: g·min(1, L/|g|)."""

    def __init__(self, problem: Problem, data: Dataset, clip: float) -> None:
        keys = np.concatenate([data.X, np.zeros((data.n, 1)) if data.y is None
                               else data.y[:, None]], axis=1)
        _, rows, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
        self.probs = counts / float(data.n)
        self.data = Dataset(data.X[rows], None if data.y is None else data.y[rows],
                            dict(data.meta))
        self.problem = problem
        self.clip = float(clip)
        self._memo: dict[bytes, np.ndarray] = {}

    def __call__(self, points: np.ndarray) -> np.ndarray:
        key = np.ascontiguousarray(points, dtype=float).tobytes()
        hit = self._memo.get(key)
        if hit is None:
            grads = np.stack([self.problem.grad(np.array([x]), self.data)[:, 0]
                              for x in np.asarray(points, dtype=float)], axis=1)
            norm = np.abs(grads)
            hit = np.where(norm > self.clip, grads * (self.clip / np.maximum(norm, 1e-300)),
                           grads)
            self._memo[key] = hit
        return hit


def noisy_sgd_line_law(problem: Problem, data: Dataset, *, constraint: ConstraintSet, steps: int,
                       sigma: float, lipschitz: float, variant: str,
                       strong_convexity: float = 0.0, start: LineLaw | None = None
                       ) -> LineLaw | None:
    """The exact law of :func:`noisy_sgd_path`'s last iterate at p = 1 ([derived]; ``None``
    when p > 1 or C is not an interval of balls).

    From θ₁ (the point mass at ``constraint.center(1)``, or the law ``start``), step t draws the
    row i with probability 1/n and b_t ~ N(0, σ²), so given θ_t the unprojected iterate is
    N(θ_t − η(t)·n·clip_L(ℓ′(θ_t; dᵢ)), (η(t)σ)²) on branch i, and θ_{t+1} is its projection
    onto C = [lo, hi]: one :class:`~dpbench.numerics.line_law.GaussianStep` per t, propagated
    by :func:`~dpbench.numerics.line_law.propagate` (atoms at the ends of C, a density
    between). Identical rows are one branch. The Chebyshev points resolve the narrowest
    kernel, η(T)σ divided by the largest slope |1 − η(t)·n·β| of the noise-free map.
    """
    interval = line_interval(constraint, data.p)
    if interval is None:
        return None
    lo, hi = interval
    c, theta1, _ = _path_setup(data, constraint=constraint, steps=steps, sigma=sigma,
                               lipschitz=lipschitz, variant=variant,
                               strong_convexity=strong_convexity, output="last")
    grads = RowGradients(problem, data, lipschitz)
    n = float(data.n)
    beta = float(problem.smoothness) if math.isfinite(problem.smoothness) else 0.0
    plan: list[GaussianStep] = []
    width = math.inf
    for t in range(1, steps + 1):
        eta = c / math.sqrt(t) if variant == "lipschitz" else c / t
        plan.append(GaussianStep(lambda x, a=eta * n: x[None, :] - a * grads(x), grads.probs,
                                 eta * sigma))
        width = min(width, eta * sigma / max(1.0, abs(1.0 - eta * n * beta)))
    law = point_mass(float(theta1[0])) if start is None else start
    return propagate(law, plan, lo, hi, nodes_for(width, lo, hi))


class NoisySGD(Algorithm):
    """Noisy projected SGD with one uniformly sampled example per step (BST14 Algorithm 1).

    For t = 1, …, T = n² − 1: draw i uniformly from [n] (with replacement), b_t ~ N(0, σ² I_p), and
    set g_t = n·clip_L(∇ℓ(θ_t; d_i)) + b_t and θ_{t+1} = Π_C(θ_t − η(t)·g_t), from the
    data-independent start θ_1 = ``constraint.center(p)``. Every per-example (sub)gradient is clipped
    to the problem's declared L (not in the paper: it enforces the 2nL sensitivity even if L is
    wrong; docs/bst14.md).

    Step sizes (Thm 2.4): ``variant="lipschitz"``: η(t) = ‖C‖/√(t(n²L² + pσ²)) with ‖C‖ the diameter;
    ``variant="strongly_convex"``: η(t) = 1/(Δnt), which needs a Δ-strongly convex problem.

    Noise (``sigma_mode``): ``"paper"`` uses Algorithm 1's σ² = 32 L² n² log(n/δ) log(1/δ)/ε²;
    ``"accountant"`` uses σ = 2nL·z with z the smallest noise multiplier whose accounted ε
    (T steps, replace-one) is at most the target.

    Privacy (Thm 2.1). The ledger reports the ε of the σ actually used, with δ = the target δ,
    from the PLD of the dominating pair of one batch-1 replace-one step composed T times — a
    certified bound, about 0.46 × the generic RDP accountant's (docs/bst14.md, 'Which
    accountant is certified': z ≈ 4.6 instead of 9.1 at ε = 1, δ = 1e-6) — and states the whole
    profile δ(ε) (``ledger.profile``, with the RDP ε beside it as ``profile.epsilon_rdp``), which
    the privacy audit tests. The paper's own proof constants do not close exactly (docs/bst14.md
    Errata 9: the stated lemmas give ≈ √2·ε), while the accountant shows the paper's σ is far
    larger than needed: at nominal ε = 1, δ = 1e-6, n = 1000 it accounts to ε ≈ 0.075 (0.17
    under RDP). The paper's nominal ε is kept in ``Release.info["paper_epsilon"]``. In the (rare)
    regime where the paper's σ does not account to within the target (large ε, large δ), the run
    raises ``NotApplicable``.

    Steps (``steps``): 0 (default) runs the paper's T = n² − 1. T ≥ 1 runs "NoisySGD-T" (a derived
    heuristic, not from the paper, docs/bst14.md; ``Release.info["label"]``): T steps with σ
    accounted, and in ``"accountant"`` mode calibrated, for T steps; the Lipschitz step size uses
    that σ.

    Output (``output``; all are post-processing of the private trajectory, so privacy is the
    same): ``"last"`` (the paper's θ_{n²}), ``"average"`` (mean of θ_2, …, θ_{T+1}) or
    ``"suffix"`` (mean of the last ⌈T/2⌉ iterates).

    Implementation: the loop is :func:`noisy_sgd_path`. It is numba-compiled when the problem has
    a kernel and C is a ball or an intersection of balls, and numpy otherwise. Both are
    deterministic for a fixed seed and draw the randomness in the same order, so the output depends
    on whether the problem has a kernel only through floating-point rounding (the kernel and numpy
    sum in different orders; the difference is ~1e-15 per step, not bit-identical).
    ``Release.info["path"]`` says which ran; version 2 introduced the compiled path.

    Audit path (``run_batch``, on the compiled path only): σ, the step constant and the ledger
    are computed once (:meth:`_noise`, :meth:`_ledger`, shared with ``run``), then
    :func:`noisy_sgd_chains` runs ``size`` chains in one compiled loop, each from the same
    θ₁ = ``constraint.center(p)`` with the same steps :func:`_sgd_run_steps` as ``run`` (index
    sampling, noise, clipping, projection) and the same averaging of the output; every draw comes
    from the one generator, so each row has the law of ``run``'s θ, not any particular run's
    value. Without a kernel or a ball-type C it returns ``None`` and the audit loops ``run``.
    Subclasses overriding ``run`` (the broken zoo in :mod:`dpbench.audit.zoo`) lose the path.

    Utility (Thm 2.4), sum scale: (1) L‖C‖ log^{3/2}(n/δ) √(p log(1/δ))/ε; (2) L² log²(n/δ) p
    log(1/δ)/(nΔε²). ``rate_card`` states them on the average scale.
    """

    name: ClassVar[str] = "noisy_sgd"
    summary: ClassVar[str] = "Noisy projected SGD, one sample per step, n² steps (BST14 Alg. 1)"
    citation: ClassVar[str] = "Bassily, Smith, Thakurta (FOCS 2014), Algorithm 1, Thm 2.1 and 2.4"
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    # 3: PLD accounting of the dominating pair; 4: its grid refined until converged and the
    # calibration minimal across the switch to RDP (docs/bst14.md, "Grid precision").
    version: ClassVar[str] = "4"
    #: Both paths clip every per-example gradient to the declared L (``_sgd_steps``,
    #: ``_numpy_loop``), so records outside the data norm keep the 2nL sensitivity.
    clips_gradients: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "variant": Param(
            "lipschitz", kind="str", choices=("lipschitz", "strongly_convex"),
            doc="step sizes of Thm 2.4: ‖C‖/√(t(n²L²+pσ²)) (lipschitz) or 1/(Δnt) (strongly_convex)"),
        "sigma_mode": Param(
            "paper", kind="str", choices=("paper", "accountant"),
            doc="noise: Algorithm 1's σ (paper) or the smallest σ the PLD accountant certifies "
                "(accountant)"),
        "output": Param(
            "last", kind="str", choices=("last", "average", "suffix"),
            doc="released point: last iterate (paper), average of all iterates, or of the last half"),
        "steps": Param(
            None, kind="int", low=1, none="n²−1, the paper's T", identity_of_none=0,
            doc="number of steps T; T given = 'NoisySGD-T', σ accounted for T steps (derived "
                "heuristic, not from the paper; docs/bst14.md)"),
    }

    # --- declarations -------------------------------------------------------------------------
    def requirements(self) -> tuple[str, ...]:
        if self.variant == "strongly_convex":
            return ("convex", "lipschitz", "strongly_convex")
        return self.requires

    def n_steps(self, n: int) -> int:
        """T: the paper's n² − 1, or the ``steps`` parameter when it is set (NoisySGD-T)."""
        return n * n - 1 if self.steps is None else self.steps

    def cost(self, n: int, p: int) -> float:
        return float(self.n_steps(n)) * p

    def rate_card(self) -> RateCard:
        """Thm 2.4 on the average scale, adapted to the σ mode and output mode.

        Sum → average divides once by n: Thm 2.4(1) L‖C‖ log^{3/2}(n/δ) √(p log(1/δ))/ε becomes
        ``L*D*sqrt(p*log(1/delta))*log(n/delta)**1.5/(n*epsilon)`` (R2), and Thm 2.4(2)
        L² log²(n/δ) p log(1/δ)/(nΔε²) becomes ``.../(n**2*Delta*epsilon**2)`` (R4).
        The logs have two sources (docs/bst14.md): √(log(n/δ) log(1/δ)) from σ (squared for (2)),
        and one log(n/δ) bounding the log T of last-iterate SGD (Shamir–Zhang 2013, Lemmas
        2.5/2.6). With the accountant σ the noise multiplier is n-free, z ≈ √log(1/δ)/ε up to
        constants (docs/bst14.md, accountant table), so the σ-part becomes √log(1/δ) and the log T
        part stays as log(n).
        Averaging removes the log T factor [derived]: a uniform average with η ∝ 1/√t
        gives O(‖C‖G/√T) on Lipschitz losses; on strongly convex losses only the suffix average
        does (Rakhlin–Shamir–Sridharan 2012), so ``average`` keeps the last-iterate card there.
        """
        averaged = self.output == "suffix" or (
            self.output == "average" and self.variant == "lipschitz")
        expression, citation = _CARDS[(self.variant, self.sigma_mode, averaged)]
        if self.steps is not None:
            citation += (f"; NoisySGD-T (T = {self.steps} steps, [derived heuristic], "
                         "docs/bst14.md): the card assumes T ≳ n²ε²/log(1/δ), where the noise "
                         "term is unchanged")
        z_part = ("paper σ: z = √(8 log(n/δ) log(1/δ))/ε ≈ 48 at p=10, ε=1, δ=1e-6"
                  if self.sigma_mode == "paper" else
                  "accountant σ: z ≈ 4.6 at ε=1, δ=1e-6, for any n (PLD; 9.1 under RDP)")
        if self.variant == "lipschitz":
            return RateCard(
                expression=expression,
                exponents={"n": -1, "p": 0.5, "epsilon": -1},
                citation=citation,
                regime=("cap L*D binds for n ≲ z·√p (LB-Lin: ≈ 150 paper σ, ≈ 29 accountant σ, "
                        "at p=10, ε=1; fully flat only at ≈ 3× that); docs/bst14.md"),
                notes=(f"{z_part}. Omits the non-private SGD floor L*D*log(n)/n (visible at "
                       "ε ≳ 10). Oracle O2 on LB-Lin: average excess ≈ R·L·z·√p/n "
                       "(docs/bst14.md)."),
            )
        return RateCard(
            expression=expression,
            exponents={"n": -2, "p": 1, "epsilon": -2},
            citation=citation,
            regime=("cap L*D binds for n ≲ L·z·√(c·p/(Δ·L·D)), c ≈ 2–6 (LB-Quad, p=10, L=2: "
                    "≈ 100–200 accountant σ, ≈ 400–1000 paper σ); docs/bst14.md"),
            notes=(f"{z_part}. Omits the non-private SGD floor L**2*log(n)/(n**2*Delta). Oracle O3 "
                   "on a quadratic: average excess ≈ Δv/(2n²) + 2pL²z²/(n²Δ) (docs/bst14.md)."),
        )

    # --- running ------------------------------------------------------------------------------
    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """Oracles of docs/bst14.md for the last iterate with T = n² − 1 (heuristics, checked by
        our reference runs): O2 min(R·M, R·L·z·√p)/n on LB-Lin (Lipschitz steps),
        O3 Δv/(2n²) + 2pL²z²/(n²Δ) on LB-Quad (strongly convex steps), v = (1/n)Σ‖dᵢ − q‖². NaN
        for other configurations."""
        from ..theory.expected_excess import noisy_sgd_lblin, noisy_sgd_quadratic

        if self.output != "last" or self.steps is not None:
            return math.nan
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        closed_form = get_tags(problem).closed_form
        if self.variant == "lipschitz" and closed_form == "lb_lin":
            M = float(np.linalg.norm(data.X.sum(axis=0)))
            z = self.noise_multiplier(n, epsilon, delta)
            R = float(problem.constraint.radius)  # type: ignore[attr-defined]
            return noisy_sgd_lblin(M, p, z, R, L, n=n, average=True)
        if self.variant == "strongly_convex" and closed_form == "lb_quad":
            q = data.X.mean(axis=0)
            v = float(np.mean(np.sum((data.X - q) ** 2, axis=1)))
            z = self.noise_multiplier(n, epsilon, delta)
            return noisy_sgd_quadratic(n, p, z, L, float(problem.strong_convexity), v,
                                       average=True)
        return math.nan

    def oracle_kind(self, problem: Problem) -> str:
        if self.output != "last" or self.steps is not None:
            return ""
        closed_form = get_tags(problem).closed_form
        if (self.variant == "lipschitz" and closed_form == "lb_lin") or (
                self.variant == "strongly_convex" and closed_form == "lb_quad"):
            return "heuristic"
        return ""

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """``noise_multiplier`` z (σ/(2nL), :meth:`noise_multiplier`), ``sigma`` = 2nL·z and
        ``steps`` T, as :meth:`run` calibrates them."""
        z = self.noise_multiplier(n, epsilon, delta)
        return {"noise_multiplier": z, "sigma": 2.0 * n * float(problem.lipschitz) * z,
                "steps": float(self.n_steps(n))}

    def noise_multiplier(self, n: int, epsilon: float, delta: float) -> float:
        """z = σ/(2nL) for this configuration (relative to the replace-one sensitivity 2nL).

        ``"paper"``: Algorithm 1's z whatever T is; ``"accountant"``: calibrated for T steps.
        """
        if self.sigma_mode == "paper":
            return paper_noise_multiplier(n, epsilon, delta)
        return calibrate_noisy_sgd_certified(epsilon, delta, n, self.n_steps(n))

    def _noise(self, n: int, L: float, epsilon: float, delta: float) -> tuple[int, float, float,
                                                                              float, str]:
        """(T, z, σ = 2nL·z, accounted ε, accounting) of a run at size n; raises ``NotApplicable`` when σ
        accounts to more than the target ε (public quantities only: shared by :meth:`run` and
        :meth:`run_batch`)."""
        T = self.n_steps(n)
        z = self.noise_multiplier(n, epsilon, delta)
        sigma = 2.0 * n * L * z
        eps_spent, accounting = (noisy_sgd_epsilon_certified(z, n, T, delta) if T > 0
                                 else (0.0, ACCOUNTING_PLD))
        if eps_spent > epsilon * (1 + 1e-9):
            raise NotApplicable(
                f"{self.name}: the paper's σ (z={z:.4g}) accounts to ε={eps_spent:.4g} > target "
                f"ε={epsilon:g} at n={n}, T={T}, δ={delta:g}; outside Thm 2.1's regime "
                "(needs ε ≤ 2√log(1/δ)); use sigma_mode='accountant'")
        return T, z, sigma, eps_spent, accounting

    @staticmethod
    def _ledger(T: int, z: float, eps_spent: float, delta: float, n: int,
                accounting: str = ACCOUNTING_PLD) -> PrivacyLedger:
        """ε from the PLD of the dominating pair of one batch-1, replace-one step composed T
        times (certified: docs/bst14.md, 'Which accountant is certified'); the ledger states the
        whole δ(ε) curve, with the RDP accountant's ε kept beside it (``profile.epsilon_rdp``).
        For z below the PLD's range (ε in the hundreds) the RDP accountant's ε, and no curve."""
        pld = accounting == ACCOUNTING_PLD and T > 0
        return PrivacyLedger(
            charges=(Charge(
                f"noisy_sgd: {T} sampled Gaussian steps (z={z:.6g})", eps_spent, delta,
                "BST14 Thm 2.1; " + ("PLD of the dominating pair of a batch-1 replace-one step "
                                     "(docs/bst14.md)" if pld else
                                     "RDP of the sampled Gaussian (Wang–Balle–Kasiviswanathan "
                                     "2019)")),),
            epsilon=eps_spent, delta=delta, accounting=accounting,
            profile=noisy_sgd_profile(z, n, T, delta) if pld else None,
        )

    # --- the output law (the audit's true ε) --------------------------------------------------
    def _line_laws(self, d0: Dataset, d1: Dataset, problem: Problem, epsilon: float,
                   delta: float) -> tuple[LineLaw, LineLaw] | None:
        """The exact laws of the last iterate on D and D′ at p = 1 (:func:`noisy_sgd_line_law`,
        with :meth:`run`'s σ, T and steps), cached per pair; ``None`` for an averaged output, for
        p > 1 or a C that is not an interval, and for a subclass that replaced :meth:`run` (the
        broken zoo: these laws describe this class's ``run``)."""
        if (self.output != "last" or d0.p != 1 or line_interval(problem.constraint, 1) is None
                or not type(self)._defined_at_or_below_run("_line_laws")):
            return None

        def build() -> tuple[LineLaw, LineLaw]:
            L = float(problem.lipschitz)
            T, _, sigma, _, _ = self._noise(d0.n, L, epsilon, delta)
            return tuple(noisy_sgd_line_law(  # type: ignore[return-value]
                problem, d, constraint=problem.constraint, steps=T, sigma=sigma, lipschitz=L,
                variant=self.variant, strong_convexity=float(problem.strong_convexity))
                for d in (d0, d1))

        return cached(release_key(self, problem, d0, d1, epsilon, delta), build)  # type: ignore[return-value]

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the released last iterate at p = 1 ([derived]): both output laws
        propagated exactly (:func:`noisy_sgd_line_law`: atoms at the ends of C plus a Chebyshev
        density, every step's Gaussian integrated by Clenshaw–Curtis) and their hockey-stick
        divergence solved for ε in both orders (:func:`~dpbench.numerics.line_law.line_epsilon`).
        Numerical error: the interpolants converge geometrically (a Gaussian kernel is
        resolved by ≥ 12 Chebyshev points per standard deviation); doubling the points changes
        ε by < 1e-8 on the audit instances (tests/plugins/test_exact_sgd.py). The last iterate is
        a post-processing of the transcript the ledger accounts, so this is at most the claim;
        the projection onto C folds the tails into atoms, which is where most of the gap comes
        from. ``None`` when p > 1 (the projection onto a ball then couples the coordinates), C
        is not an interval, or the output is an average (not a Markov chain's last state)."""
        laws = self._line_laws(d0, d1, problem, epsilon, delta)
        return None if laws is None else line_epsilon(laws[0], laws[1], delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the last iterate at p = 1 (:meth:`exact_epsilon`'s laws;
        at the ends of C the atoms' mass ratio); ``None`` where those laws are not computed."""
        laws = self._line_laws(d0, d1, problem, epsilon, delta)
        if laws is None:
            return None
        return line_log_ratio(laws[0], laws[1], np.asarray(thetas, dtype=float)[:, 0])

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        constraint = problem.constraint
        T, z, sigma, eps_spent, accounting = self._noise(n, L, epsilon, delta)

        theta = noisy_sgd_path(
            problem, data, constraint=constraint, steps=T, sigma=sigma, lipschitz=L,
            variant=self.variant, strong_convexity=float(problem.strong_convexity),
            output=self.output, rng=rng)

        # The ε for which the paper's formula would give this z (z_paper ∝ 1/ε).
        paper_eps = paper_noise_multiplier(n, 1.0, delta) / z if z > 0 else math.inf
        info = {
            "variant": self.variant, "sigma_mode": self.sigma_mode, "output": self.output,
            "z": z, "sigma": sigma, "steps": T, "accounted_epsilon": eps_spent,
            "paper_epsilon": paper_eps, "clip_norm": L,
            "path": "compiled" if uses_compiled_path(problem, constraint, p) else "numpy",
            "label": "NoisySGD-T" if self.steps is not None else "NoisySGD",
        }
        return Release(theta=theta, ledger=self._ledger(T, z, eps_spent, delta, n, accounting), grad_queries=T,
                       iterations=T, info=info)

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """``size`` independent runs of :meth:`run` from one calibration of σ and one compiled
        call per ~``COMPILED_BLOCK`` steps (:func:`noisy_sgd_chains`); ``None`` (the audit then
        loops :meth:`run` through ``release_many``) when the problem has no usable kernel or C
        is not a ball or an intersection of balls (the numpy path: ``problem.grad`` takes one θ,
        so it cannot be batched across chains)."""
        if not uses_compiled_path(problem, problem.constraint, data.p):
            return None
        L = float(problem.lipschitz)
        T, z, sigma, eps_spent, accounting = self._noise(data.n, L, epsilon, delta)
        thetas = noisy_sgd_chains(
            problem, data, constraint=problem.constraint, steps=T, sigma=sigma, lipschitz=L,
            variant=self.variant, strong_convexity=float(problem.strong_convexity),
            output=self.output, rng=rng, size=size)
        if thetas is None:
            return None
        return BatchRelease(thetas, self._ledger(T, z, eps_spent, delta, data.n, accounting))
