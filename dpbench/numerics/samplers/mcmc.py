"""Random-walk Metropolis and MALA for the exponential mechanism (BST14 Algorithm 2).

The rules below and the reference runs behind the constants are in docs/bst14.md, "Derived
constants" (MCMC for the exponential mechanism).

Target: π(θ) ∝ exp(−U(θ)) on a region (a ball or an intersection of balls), with the potential
U(θ) = k·Σᵢ ℓ(θ; dᵢ) on the **sum** scale (BST14 Algorithm 2). Both chains

* start at the data-independent ``region.center(p)`` (never at the non-private θ*; for a localised
  region C ∩ B(θ₀, r₀) the centre is the private θ₀, a post-processing);
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
with :meth:`~dpbench.core.problem.Problem.kernel`) runs blocks of steps in one ``numba.njit`` loop; the
numpy fallback runs the same algorithm with the same random stream (p standard normals, then one
uniform, per step), so both paths give the same chain up to floating-point rounding.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ...core.errors import NotApplicable
from ...core.problem import Dataset, Problem
from ...core.sets import Ball, BallAt, ConstraintSet, Intersection
from ...core.time_limit import checkpoint
from ..kernels import kernel_arrays, sum_grad, sum_loss

__all__ = ["KINDS", "BASE_STEP", "STEPS_PER_UNIT", "MIN_STEPS", "region_balls", "default_step",
           "default_steps", "run_chain"]

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


# Not cached: it takes the kernel's dispatchers as arguments, which numba cannot key
# stably on disk (one new index entry per process, and a racy index under concurrent workers:
# "ReferenceError: underlying object has vanished").
@njit(cache=False)
def _chain_block(loss, grad, X, y, prm, k, theta, u, g, centers, radii, h, steps, mala,  # type: ignore[no-untyped-def]
                 rng, prop, gprop, work):
    """``steps`` Metropolis steps from (θ, U(θ), ∇U(θ)) in place; returns (U(θ), accepted)."""
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
        u_new = k * sum_loss(loss, prop, X, y, prm)
        log_ratio = u - u_new
        if mala:
            sum_grad(grad, prop, X, y, prm, gprop, work)
            back = 0.0
            fwd = 0.0
            for j in range(p):
                gprop[j] *= k
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


def _inside_np(theta: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> bool:
    d = theta[None, :] - centers
    return bool(np.all(np.einsum("ij,ij->i", d, d) <= radii * radii))


def _chain_numpy(problem: Problem, data: Dataset, k: float, theta: np.ndarray, centers: np.ndarray,
                 radii: np.ndarray, h: float, steps: int, mala: bool,
                 rng: np.random.Generator) -> int:
    """The numpy fallback of :func:`_chain_block`: same algorithm, same random stream."""
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


def run_chain(problem: Problem, data: Dataset, k: float, region: ConstraintSet,
              rng: np.random.Generator, *, kind: str = "rwm", steps: int | None = None,
              step_scale: float | None = None, compiled: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """Run one RWM/MALA chain for π ∝ exp(−k·Σℓ) on ``region``; return (θ, info).

    ``steps`` defaults to :func:`default_steps` and ``step_scale`` (a multiplier of the public
    :func:`default_step`) to 1. ``compiled=False`` forces the numpy fallback (benchmarks).
    """
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
    theta = np.array(region.center(p), dtype=float)
    if not _inside_np(theta, centers, radii):
        raise ValueError("MCMC sampler: the region's centre is not inside the region")
    mala = kind == "mala"
    kern = problem.kernel() if compiled else None
    if kern is None:
        accepted = _chain_numpy(problem, data, k, theta, centers, radii, h, n_steps, mala, rng)
    else:
        X, y = kernel_arrays(data)
        prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
        u = k * sum_loss(kern.loss, theta, X, y, prm)
        g = np.zeros(p)
        prop, gprop, work = np.zeros(p), np.zeros(p), np.zeros(p)
        if mala:
            sum_grad(kern.grad, theta, X, y, prm, g, work)
            g *= k
        block = max(1, BLOCK_WORK // max(1, n * p))
        accepted = 0
        done = 0
        while done < n_steps:
            checkpoint()
            m = min(block, n_steps - done)
            u, acc = _chain_block(kern.loss, kern.grad, X, y, prm, float(k), theta, u, g,
                                  centers, radii, float(h), m, mala, rng, prop, gprop, work)
            accepted += acc
            done += m
    info = {"sampler": kind, "steps": n_steps, "step_size": h,
            "acceptance": accepted / n_steps if n_steps else math.nan,
            "compiled": kern is not None, "certified": False,
            "start": "region.center(p) (data-independent)"}
    return theta, info
