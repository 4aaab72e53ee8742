"""Random-walk Metropolis and MALA for the exponential mechanism (BST14 Algorithm 2).

The rules below and the reference runs behind the constants are in docs/bst14.md, "Derived
constants" (MCMC for the exponential mechanism).

Target: π(θ) ∝ exp(−U(θ)) on a region (a ball or an intersection of balls), with the potential
U(θ) = k·Σᵢ ℓ(θ; dᵢ) on the **sum** scale (BST14 Algorithm 2). Both chains

* start at the data-independent ``region.center(p)`` (never at the non-private θ*; for a localised
  region C ∩ B(θ₀, r₀) the centre is the private θ₀, a post-processing), pulled inside by a few
  ulps where rounding left it just outside the region (:func:`inward_start`);
* reject a proposal outside the region (the chain stays), so no projection, gauge or extension is
  needed and π is the exact stationary law;
* use public step sizes ∝ 1/(k·n·L), the inverse gradient scale of U (RWM h ≈ 0.5/(kM), MALA
  h ≈ 0.3/(kM) with M ≤ nL), capped at D/p (D the region's diameter) so that the nearly uniform,
  capped regime k·n·L·D ≲ p still accepts proposals;
* RWM proposes θ + h·ξ; MALA proposes θ − (h²/2)∇U(θ) + h·ξ with (sub)gradients of U and the
  Metropolis–Hastings correction for its asymmetric proposal (Roberts–Tweedie 1996).

A finite chain is only approximately distributed as π: ExpMech run with it is *nominal* ε-DP (at
best (ε, (1 + e^ε)·TV)-DP), and callers must mark the ledger uncertified.

The default step count is the public formula :func:`default_steps`. The compiled path (a problem
with :meth:`~dpbench.core.problem.Problem.kernel`) runs blocks of steps in one ``numba.njit`` loop,
compiled once per kernel with its loss and gradient inlined; the numpy fallback runs the same
algorithm with the same random stream (p standard normals, then one uniform, per step), so both
paths give the same chain up to floating-point rounding.

Many chains at once (:func:`run_chains`, the mechanisms' vectorised audit paths): the same chain
for every row, run one after the other in the compiled loop from one generator, on one region or
on a region per row (the same balls re-centred at each row's earlier private release,
:func:`relocated_region`); on the compiled path only. The potential may carry a floor,
U = k·max{Σᵢ ℓ, floor}, the thresholded loss of the Rashomon law (GTU A0.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ...core.errors import NotApplicable
from ...core.kernel import LossKernel
from ...core.problem import Dataset, Problem
from ...core.sets import Ball, BallAt, ConstraintSet, Intersection
from ...core.time_limit import checkpoint
from ..jit import inlinable, specialise
from ..kernels import kernel_arrays

__all__ = ["KINDS", "BASE_STEP", "STEPS_PER_UNIT", "MIN_STEPS", "START_RTOL", "region_balls",
           "default_step", "default_steps", "inward_start", "run_chain", "run_chains",
           "relocated_region", "chain_starts"]

KINDS = ("rwm", "mala")
#: h·k·n·L at step_scale = 1 (docs/bst14.md, "Derived constants": 0.5 for RWM, 0.3 for MALA).
BASE_STEP = {"rwm": 0.5, "mala": 0.3}
#: Default steps = STEPS_PER_UNIT · p · max(k·n·L·D, p), at least MIN_STEPS (see default_steps).
STEPS_PER_UNIT = 8.0
MIN_STEPS = 2000
#: Per-example loss evaluations per block between two ``checkpoint()`` calls (~0.01–0.1 s).
BLOCK_WORK = 4_000_000


def region_balls(region: ConstraintSet, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Centres (m, p) and radii (m,) of the balls whose intersection is ``region``.

    Raises :class:`NotApplicable` for other sets (the samplers need a ball membership test).
    """
    if isinstance(region, Ball):
        return np.zeros((1, p)), np.array([float(region.radius)])
    if isinstance(region, BallAt):
        return region.center_point.reshape(1, p).astype(float), np.array([region.radius])
    if isinstance(region, Intersection):
        try:
            return region.balls(p)
        except TypeError as exc:
            raise NotApplicable(f"MCMC sampler: {exc}") from exc
    raise NotApplicable(f"MCMC sampler: region {type(region).__name__} is not a ball or an "
                        "intersection of balls")


def default_step(kind: str, k: float, n: int, L: float, diameter: float, p: int,
                 step_scale: float = 1.0) -> float:
    """Public proposal scale h = step_scale · min(BASE_STEP[kind]/(k·n·L), D/p)."""
    if kind not in BASE_STEP:
        raise ValueError(f"unknown MCMC kind {kind!r}; expected one of {KINDS}")
    h = BASE_STEP[kind] / (k * n * L) if k * n * L > 0 else math.inf
    return step_scale * min(h, diameter / p)


def default_steps(n: int, p: int, k: float, L: float, diameter: float) -> int:
    """Public default chain length: ⌈8·p·max(k·n·L·D, p)⌉, at least 2000.

    k·n·L·D is the range of the potential U over the region (its gradient scale k·n·L times the
    distance D): with steps ∝ 1/(knL) the chain needs ∝ knL·D steps to drift across the region
    and ∝ p more to spread over the p − 1 tangential directions; in the capped regime (knLD ≲ p) the
    target is nearly uniform and ~p² steps of size D/p mix it. At ExpMech's k = ε/(2LD) this is
    4·p·n·ε (4·10⁴ at p = 10, n = 1000, ε = 1: twice the ≈ 2·10⁴ steps our reference runs needed at
    M = 1000, docs/bst14.md); the KS tests in ``tests/plugins/test_exp_mech.py`` check it at n ≈ 150.
    """
    units = max(k * n * L * diameter, float(p))
    return max(MIN_STEPS, int(math.ceil(STEPS_PER_UNIT * p * units)))


@njit(cache=True)
def _inside(theta, centers, radii):  # type: ignore[no-untyped-def]
    for j in range(radii.shape[0]):
        s = 0.0
        for i in range(theta.shape[0]):
            d = theta[i] - centers[j, i]
            s += d * d
        if s > radii[j] * radii[j]:
            return False
    return True


# The loops below are templates: plain functions calling the globals ``_kernel_loss`` and
# ``_kernel_grad``, compiled once per kernel by :func:`_compiled_chain` with those names bound
# to the kernel's functions (inlined: no call per row and step) and cached on disk
# (:func:`dpbench.numerics.jit.specialise`, as NoisySGD's loops). A kernel passed as an argument
# would cost a call per use and defeat the on-disk cache (numba keys it by the dispatcher).
_kernel_loss: Any = None  # bound per kernel by _compiled_chain
_kernel_grad: Any = None
_potential: Any = None  # bound to the specialised _potential_template
_chain_block: Any = None  # bound to the specialised _chain_block_template


def _potential_template(X, y, prm, k, theta, g, work, mala, floor):  # type: ignore[no-untyped-def]
    """U(θ) = k·max{Σᵢ ℓ(θ; dᵢ), floor}; with ``mala``, ∇U(θ) written into ``g`` (0 where the
    floor binds). ``floor`` = −∞ is the plain potential; a finite one is the thresholded loss
    max{𝓛, 𝓛* + ψ} of the Rashomon law on the sum scale (GTU A0.2). The sums run over the rows
    in order, as :func:`dpbench.numerics.kernels.sum_loss` and ``sum_grad`` do."""
    p = theta.shape[0]
    s = 0.0
    for i in range(X.shape[0]):
        s += _kernel_loss(theta, X, y, prm, i)
    if mala:
        for j in range(p):
            g[j] = 0.0
        if s > floor:
            for i in range(X.shape[0]):
                _kernel_grad(theta, X, y, prm, i, work)
                for j in range(p):
                    g[j] += work[j]
            for j in range(p):
                g[j] *= k
    return k * max(s, floor)


def _chain_block_template(X, y, prm, k, theta, u, g, centers, radii, h, steps, mala,  # type: ignore[no-untyped-def]
                          rng, prop, gprop, work, floor):
    """``steps`` Metropolis steps from (θ, U(θ), ∇U(θ)) in place; returns (U(θ), accepted).
    U is :func:`_potential_template`'s."""
    p = theta.shape[0]
    half = 0.5 * h * h
    accepted = 0
    for _ in range(steps):
        for j in range(p):
            prop[j] = theta[j] + h * rng.standard_normal()
            if mala:
                prop[j] -= half * g[j]
        v = rng.random()
        if not _inside(prop, centers, radii):
            continue
        u_new = _potential(X, y, prm, k, prop, gprop, work, mala, floor)
        log_ratio = u - u_new
        if mala:
            back = 0.0
            fwd = 0.0
            for j in range(p):
                d1 = theta[j] - prop[j] + half * gprop[j]
                d2 = prop[j] - theta[j] + half * g[j]
                back += d1 * d1
                fwd += d2 * d2
            log_ratio -= (back - fwd) / (2.0 * h * h)
        if v == 0.0 or math.log(v) < log_ratio:
            accepted += 1
            u = u_new
            for j in range(p):
                theta[j] = prop[j]
                if mala:
                    g[j] = gprop[j]
    return u, accepted


def _chains_start_template(X, y, prm, k, thetas, us, gs, work, mala, floor):  # type: ignore[no-untyped-def]
    """U and (with ``mala``) ∇U at every chain's start (rows of ``thetas``), into ``us``, ``gs``."""
    for r in range(thetas.shape[0]):
        us[r] = _potential(X, y, prm, k, thetas[r], gs[r], work, mala, floor)


def _chains_block_template(X, y, prm, k, thetas, us, gs, centers, radii, h, steps,  # type: ignore[no-untyped-def]
                           mala, rng, prop, gprop, work, floor, accepted):
    """:func:`_chain_block_template` for every chain in turn: row r of ``thetas``, ``us``,
    ``gs`` its state, ``centers[r]`` its region's ball centres (radii shared), ``accepted[r]``
    its count of accepted proposals."""
    for r in range(thetas.shape[0]):
        u, acc = _chain_block(X, y, prm, k, thetas[r], us[r], gs[r], centers[r], radii, h,
                              steps, mala, rng, prop, gprop, work, floor)
        us[r] = u
        accepted[r] += acc


@dataclass(frozen=True)
class _Chain:
    """The compiled chain functions of one kernel (:func:`_compiled_chain`)."""

    potential: Any
    block: Any
    chains_start: Any
    chains_block: Any


_CHAINS: dict[tuple[Any, Any], _Chain] = {}


def _compiled_chain(kern: LossKernel) -> _Chain:
    """The templates above compiled for ``kern`` (once per process and kernel; cached on disk
    when the kernel's functions are module-level, :func:`dpbench.numerics.jit.specialise`)."""
    key = (kern.loss, kern.grad)
    chain = _CHAINS.get(key)
    if chain is None:
        potential = specialise(_potential_template, {"_kernel_loss": inlinable(kern.loss),
                                                     "_kernel_grad": inlinable(kern.grad)})
        block = specialise(_chain_block_template, {"_potential": potential})
        chain = _Chain(potential, block,
                       specialise(_chains_start_template, {"_potential": potential}),
                       specialise(_chains_block_template, {"_chain_block": block}))
        _CHAINS[key] = chain
    return chain


def _inside_np(theta: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> bool:
    d = theta[None, :] - centers
    return bool(np.all(np.einsum("ij,ij->i", d, d) <= radii * radii))


def _chain_numpy(problem: Problem, data: Dataset, k: float, theta: np.ndarray, centers: np.ndarray,
                 radii: np.ndarray, h: float, steps: int, mala: bool,
                 rng: np.random.Generator) -> int:
    """The numpy fallback of :func:`_chain_block_template`: same algorithm, same random
    stream."""
    p = theta.shape[0]
    half = 0.5 * h * h
    u = k * float(problem.loss(theta, data).sum())
    g = k * problem.grad(theta, data).sum(axis=0) if mala else np.zeros(p)
    accepted = 0
    for t in range(steps):
        if t % 256 == 0:
            checkpoint()
        prop = theta + h * rng.standard_normal(p)
        if mala:
            prop -= half * g
        v = rng.random()
        if not _inside_np(prop, centers, radii):
            continue
        u_new = k * float(problem.loss(prop, data).sum())
        log_ratio = u - u_new
        if mala:
            g_new = k * problem.grad(prop, data).sum(axis=0)
            back = theta - prop + half * g_new
            fwd = prop - theta + half * g
            log_ratio -= (back.dot(back) - fwd.dot(fwd)) / (2.0 * h * h)
        if v == 0.0 or math.log(v) < log_ratio:
            accepted += 1
            theta[:] = prop
            u = u_new
            if mala:
                g = g_new
    return accepted


def _chain_setup(problem: Problem, data: Dataset, k: float, region: ConstraintSet, kind: str,
                 steps: int | None, step_scale: float | None
                 ) -> tuple[int, float, np.ndarray, np.ndarray]:
    """(steps, h, centres, radii) of a chain on ``region``: the public defaults
    :func:`default_steps` and :func:`default_step` (``step_scale`` None = 1), and the region's
    balls (:func:`region_balls`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown MCMC kind {kind!r}; expected one of {KINDS}")
    n, p = data.n, data.p
    L = float(problem.lipschitz)
    diameter = float(region.diameter)
    centers, radii = region_balls(region, p)
    n_steps = default_steps(n, p, k, L, diameter) if steps is None else int(steps)
    if n_steps < 0:
        raise ValueError(f"steps must be >= 0, got {n_steps}")
    h = default_step(kind, k, n, L, diameter, p, 1.0 if step_scale is None else float(step_scale))
    return n_steps, h, centers, radii


def _chain_info(kind: str, n_steps: int, h: float, accepted: float,
                compiled: bool) -> dict[str, Any]:
    return {"sampler": kind, "steps": n_steps, "step_size": h,
            "acceptance": accepted / n_steps if n_steps else math.nan,
            "compiled": compiled, "certified": False,
            "start": "region.center(p) (data-independent)"}


_CENTRE_OUTSIDE = "MCMC sampler: the region's centre is not inside the region"
#: Largest relative distance outside a ball (‖θ − c‖/r − 1) that a chain's start may have and be
#: pulled inside (:func:`inward_start`): rounding of a projection onto the boundary, never more.
START_RTOL = 1e-9


def inward_start(theta: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """The chain's start θ, pulled inside every ball where rounding left it just outside.

    A localised region's centre is the projection of the private θ₀ = Π_C(θ̂ + b), which lies
    on ∂C whenever the projection is active; rounding can leave it an ulp outside C by the
    chains' membership test ‖θ − c‖² ≤ r² (:func:`_inside`), about 20 % of the runs at tiny n
    with p = 2. Each ball B(c, r) with r < ‖θ − c‖ ≤ r(1 + :data:`START_RTOL`) moves θ to
    c + (θ − c)·(r/‖θ − c‖)·(1 − 4·eps), a move of a few ulps toward c (a ball that this move
    leaves by rounding is treated the same way, for at most four rounds). The start is a
    post-processing of the private θ₀ either way, and it moves by ≤ 1e-9·r. A start already
    inside is returned unchanged (the same chain as before, bit for bit); one farther out raises
    ``ValueError``: it is not a rounding error.
    """
    theta = np.array(theta, dtype=float)
    for _ in range(4):
        d = theta[None, :] - centers
        sq = np.einsum("ij,ij->i", d, d)  # _inside_np's test, to the bit
        out = np.flatnonzero(sq > radii * radii)
        if out.size == 0:
            return theta
        for j in out:
            dist = math.sqrt(float(sq[j]))
            if dist > radii[j] * (1.0 + START_RTOL):
                raise ValueError(_CENTRE_OUTSIDE)
            theta = centers[j] + (theta - centers[j]) * (
                radii[j] / dist * (1.0 - 4.0 * np.finfo(float).eps))
    if not _inside_np(theta, centers, radii):
        raise ValueError(_CENTRE_OUTSIDE)
    return theta


def run_chain(problem: Problem, data: Dataset, k: float, region: ConstraintSet,
              rng: np.random.Generator, *, kind: str = "rwm", steps: int | None = None,
              step_scale: float | None = None, compiled: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """Run one RWM/MALA chain for π ∝ exp(−k·Σℓ) on ``region``; return (θ, info).

    ``steps`` defaults to :func:`default_steps` and ``step_scale`` (a multiplier of the public
    :func:`default_step`) to 1. ``compiled=False`` forces the numpy fallback (benchmarks).
    """
    n_steps, h, centers, radii = _chain_setup(problem, data, k, region, kind, steps, step_scale)
    n, p = data.n, data.p
    theta = inward_start(region.center(p), centers, radii)
    mala = kind == "mala"
    kern = problem.kernel() if compiled else None
    if kern is None:
        accepted = _chain_numpy(problem, data, k, theta, centers, radii, h, n_steps, mala, rng)
    else:
        chain = _compiled_chain(kern)
        X, y = kernel_arrays(data)
        prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
        g = np.zeros(p)
        prop, gprop, work = np.zeros(p), np.zeros(p), np.zeros(p)
        u = chain.potential(X, y, prm, float(k), theta, g, work, mala, -math.inf)
        block = max(1, BLOCK_WORK // max(1, n * p))
        accepted = 0
        done = 0
        while done < n_steps:
            checkpoint()
            m = min(block, n_steps - done)
            u, acc = chain.block(X, y, prm, float(k), theta, u, g, centers, radii, float(h), m,
                                 mala, rng, prop, gprop, work, -math.inf)
            accepted += acc
            done += m
    return theta, _chain_info(kind, n_steps, h, accepted, kern is not None)


def relocated_region(region: ConstraintSet, centers: np.ndarray) -> ConstraintSet:
    """``region`` (a ball or an intersection of balls) with its j-th ball centred at
    ``centers[j]`` (order of :func:`region_balls`), radii unchanged; a ``Ball`` that stays at
    the origin is kept as it is (so that ``region == problem.constraint`` tests still hold)."""
    centers = np.asarray(centers, dtype=float)
    if isinstance(region, Intersection):
        return Intersection(*(relocated_region(s, c[None, :])
                              for s, c in zip(region.sets, centers, strict=True)),
                            tol=region.tol, max_iter=region.max_iter)
    if isinstance(region, Ball):
        return region if not np.any(centers[0]) else BallAt(centers[0], region.radius)
    if isinstance(region, BallAt):
        return BallAt(centers[0], region.radius)
    raise NotApplicable(f"region {type(region).__name__} is not a ball or an intersection of "
                        "balls")


def chain_starts(region: ConstraintSet, row_centers: np.ndarray) -> np.ndarray:
    """Each row's ``region.center(p)`` when row i's region is ``region`` re-centred at
    ``row_centers[i]`` (size, m, p) (:func:`relocated_region`): the last ball's centre where it
    lies in every ball (``Intersection.center``'s own test, vectorised), else the row's
    ``Intersection.center`` itself (the projection of that centre)."""
    row_centers = np.asarray(row_centers, dtype=float)
    starts = row_centers[:, -1, :].copy()
    if not isinstance(region, Intersection):
        return starts
    inside = np.ones(starts.shape[0], dtype=bool)
    for j, s in enumerate(region.sets):
        inside &= Ball(float(s.radius)).contains(starts - row_centers[:, j, :], 0.0)  # type: ignore[attr-defined]
    for i in np.flatnonzero(~inside):
        starts[i] = relocated_region(region, row_centers[i]).center(starts.shape[1])
    return starts


def run_chains(problem: Problem, data: Dataset, k: float, region: ConstraintSet,
               rng: np.random.Generator, size: int, *, kind: str = "rwm",
               steps: int | None = None, step_scale: float | None = None,
               row_centers: np.ndarray | None = None, floor: float = -math.inf
               ) -> tuple[np.ndarray, dict[str, Any]] | None:
    """``size`` independent chains of :func:`run_chain` (rows of a (size, p) array) in a
    compiled loop (:func:`_chains_block_template`: chain after chain, ``checkpoint()`` between
    calls).

    Every chain is :func:`run_chain`'s on its region: the same public steps and step size (from
    ``region``, whose diameter bounds every row's), the same start ``region.center(p)``, the
    same proposals and accept rule. With ``row_centers`` (size, m, p), chain i runs on
    ``region`` re-centred at ``row_centers[i]`` (:func:`relocated_region`; its start from
    :func:`chain_starts`). ``floor`` is the sum-scale floor of :func:`_potential` (−∞: the
    exponential-mechanism potential). Returns ``None`` when the problem has no compiled kernel
    (the numpy chain cannot run rows together). ``info["acceptance"]`` is the mean over chains.
    """
    n_steps, h, centers, radii = _chain_setup(problem, data, k, region, kind, steps, step_scale)
    kern = problem.kernel()
    if kern is None:
        return None
    n, p = data.n, data.p
    size = int(size)
    if row_centers is None:
        thetas = np.tile(np.asarray(region.center(p), dtype=float), (size, 1))
        row_centers = np.tile(centers, (size, 1, 1))
    else:
        row_centers = np.ascontiguousarray(row_centers, dtype=float)
        if row_centers.shape != (size, *centers.shape):
            raise ValueError(f"run_chains: row centres of shape {row_centers.shape}, expected "
                             f"({size}, {centers.shape[0]}, {p})")
        thetas = np.ascontiguousarray(chain_starts(region, row_centers))
    for i in range(size):
        thetas[i] = inward_start(thetas[i], row_centers[i], radii)
    mala = kind == "mala"
    chain = _compiled_chain(kern)
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
    us, gs = np.zeros(size), np.zeros((size, p))
    prop, gprop, work = np.zeros(p), np.zeros(p), np.zeros(p)
    accepted = np.zeros(size, dtype=np.int64)
    chain.chains_start(X, y, prm, float(k), thetas, us, gs, work, mala, float(floor))
    block = max(1, BLOCK_WORK // max(1, n * p))
    per_call = max(1, block // max(1, n_steps))  # whole chains per call, or one chain in pieces
    for r0 in range(0, size, per_call):
        rows = slice(r0, min(size, r0 + per_call))
        for done in range(0, n_steps, block):
            checkpoint()
            chain.chains_block(X, y, prm, float(k), thetas[rows], us[rows], gs[rows],
                               row_centers[rows], radii, float(h), min(block, n_steps - done),
                               mala, rng, prop, gprop, work, float(floor), accepted[rows])
    return thetas, _chain_info(kind, n_steps, h, float(accepted.mean()), True)
