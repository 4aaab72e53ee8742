"""Many perturbed objectives on one ball at once: objective perturbation's vectorised audit path.

Objective perturbation (BST14 Appendix E; CMS11; KST12) releases, per run, the minimiser of
F_s(θ) = F₀(θ) + (λ/2)‖θ‖² + ⟨c_s, θ⟩ over {‖θ‖ ≤ R}, with a fresh random linear term c_s. The
privacy audit needs hundreds of thousands of runs on the same data, so the rows s = 1, …, S share
F₀, λ and R and differ only in c_s; everything here works on all rows at once.

* :func:`isotropic_quadratic_minimisers` — F₀ with the constant Hessian κI: row-wise the closed
  form of :func:`dpbench.numerics.solvers.perturbed.solve_isotropic_quadratic` (gap 0).
* :func:`solve_perturbed_ball_batch` — F₀ with a Hessian oracle (:class:`BatchSoftplusMargin`,
  the logistic risk): the algorithm of :func:`dpbench.numerics.solvers.ball.solve_smooth_ball`
  (damped Newton from 0, then the Tikhonov path with a safeguarded Newton iteration on the
  secular equation, Moré & Sorensen 1983), each row running its own iteration, vectorised across
  the rows still running. Every row ends with the certificate ``solve_smooth_ball`` gives: the
  Frank–Wolfe gap at a feasible point (:func:`frank_wolfe_gaps`), a proven bound on
  F_s(θ) − min_C F_s. Rows whose certificate misses the target are reported, never hidden: the
  caller re-solves them with the one-row solver (objective perturbation's approximate-minima
  analysis, Iyengar et al. 2019, holds for any point whose gap is certified ≤ the public bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.special import expit

from ...core.time_limit import checkpoint
from .ball import SoftplusMargin, _newton_direction

__all__ = ["BatchObjective", "BatchSoftplusMargin", "frank_wolfe_gaps",
           "isotropic_quadratic_minimisers", "project_ball_rows", "solve_perturbed_ball_batch"]

_EPS = float(np.finfo(float).eps)


class BatchObjective(Protocol):
    """Row-wise F_s(θ_k) for the rows ``rows`` (shape (k,)) at the points ``theta`` (k, p)."""

    def value(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray: ...

    def gradient(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray: ...

    def hessian(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray: ...


@dataclass
class BatchSoftplusMargin:
    """F_s(θ) = f(θ) + (lam/2)‖θ‖² + ⟨lin[s], θ⟩ with f a :class:`SoftplusMargin` (average scale).

    The batched form of :class:`~dpbench.numerics.solvers.perturbed.PerturbedObjective` over the
    margin oracles that objective perturbation's one-row solver uses; ``lin`` has one row per
    perturbed problem.
    """

    margin: SoftplusMargin
    lam: float
    lin: np.ndarray

    def _scaled(self, theta: np.ndarray) -> np.ndarray:
        m = self.margin
        return (m.offset - theta @ m.Z.T) / m.tau

    def value(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray:
        m = self.margin
        sq = np.einsum("kp,kp->k", theta, theta)
        return (m.tau * np.mean(np.logaddexp(0.0, self._scaled(theta)), axis=1)
                + 0.5 * (m.ridge + self.lam) * sq + np.einsum("kp,kp->k", self.lin[rows], theta))

    def gradient(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray:
        m = self.margin
        return (-(expit(self._scaled(theta)) @ m.Z) / m.Z.shape[0]
                + (m.ridge + self.lam) * theta + self.lin[rows])

    def hessian(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray:
        m = self.margin
        s = expit(self._scaled(theta))
        weight = s * (1.0 - s) / (m.tau * m.Z.shape[0])
        h = (m.Z.T[None, :, :] * weight[:, None, :]) @ m.Z
        diag = np.arange(theta.shape[1])
        h[:, diag, diag] += m.ridge + self.lam
        return h


def project_ball_rows(theta: np.ndarray, radius: float) -> np.ndarray:
    """Row-wise :func:`~dpbench.numerics.solvers.ball.project_ball`: every row of the result has
    ‖θ‖ ≤ R in floating point."""
    theta = np.asarray(theta, dtype=float)
    norm = np.linalg.norm(theta, axis=1)
    out = theta.copy()
    outside = norm > radius
    out[outside] *= (radius / norm[outside])[:, None]
    over = np.flatnonzero(np.linalg.norm(out, axis=1) > radius)
    while over.size:  # at most a couple of ulps to shave off
        out[over] *= 1.0 - 2.0 * _EPS
        over = over[np.linalg.norm(out[over], axis=1) > radius]
    return out


def frank_wolfe_gaps(g: np.ndarray, theta: np.ndarray, radius: float) -> np.ndarray:
    """Row-wise :func:`~dpbench.numerics.solvers.ball.frank_wolfe_gap`: ⟨g, θ⟩ + R‖g‖ plus the same
    roundoff allowance, a proven bound on F(θ) − min_C F for convex F, g = ∇F(θ), θ ∈ C."""
    inner = np.einsum("kp,kp->k", g, theta)
    gnorm = np.linalg.norm(g, axis=1)
    return inner + radius * gnorm + 8.0 * _EPS * (np.abs(inner) + radius * gnorm)


def isotropic_quadratic_minimisers(curvature: float, grad_at_zero: np.ndarray, lam: float,
                                   lin: np.ndarray, radius: float) -> np.ndarray:
    """Row s: argmin_{‖θ‖≤R} ((κ + λ)/2)‖θ‖² + ⟨g₀ + lin[s], θ⟩ = Π(−(g₀ + lin[s])/(κ + λ)),
    the closed form of :func:`~dpbench.numerics.solvers.perturbed.solve_isotropic_quadratic`."""
    total = curvature + lam
    if not total > 0:
        raise ValueError(f"curvature + lam must be > 0, got {total!r}")
    return project_ball_rows(-(np.asarray(grad_at_zero, dtype=float)[None, :] + lin) / total,
                             radius)


def _newton_directions(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Solve h_k d_k = −g_k for every row; rows the batched solve cannot do (a singular or
    non-finite system) get the shifted solve of :func:`~dpbench.numerics.solvers.ball._newton_direction`."""
    try:
        d = -np.linalg.solve(h, g[:, :, None])[:, :, 0]
        bad = np.flatnonzero(~np.all(np.isfinite(d), axis=1))
    except np.linalg.LinAlgError:
        d, bad = np.empty_like(g), np.arange(g.shape[0])
    for k in bad:
        d[k] = _newton_direction(h[k], g[k])
    return d


@dataclass
class _Tikhonov:
    """Row-wise F_s(θ) + (λ_k/2)‖θ‖² for the rows ``rows`` (λ_k per row)."""

    obj: BatchObjective
    rows: np.ndarray
    lam: np.ndarray

    def value(self, theta: np.ndarray, sel: np.ndarray) -> np.ndarray:
        return (self.obj.value(theta, self.rows[sel])
                + 0.5 * self.lam[sel] * np.einsum("kp,kp->k", theta, theta))

    def gradient(self, theta: np.ndarray, sel: np.ndarray) -> np.ndarray:
        return self.obj.gradient(theta, self.rows[sel]) + self.lam[sel, None] * theta

    def hessian(self, theta: np.ndarray, sel: np.ndarray) -> np.ndarray:
        h = self.obj.hessian(theta, self.rows[sel])
        diag = np.arange(theta.shape[1])
        h[:, diag, diag] += self.lam[sel, None]
        return h


def _damped_newton_rows(obj: _Tikhonov, theta: np.ndarray, max_iter: int,
                        max_norm: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~dpbench.numerics.solvers.ball._damped_newton` on every row of ``theta`` (the rows
    of ``obj``), each with its own Armijo backtracking and stopping rules; returns (θ, converged)."""
    theta = np.array(theta, dtype=float)
    k = theta.shape[0]
    f = obj.value(theta, np.arange(k))
    running = np.ones(k, dtype=bool)
    converged = np.zeros(k, dtype=bool)
    for _ in range(max_iter):
        a = np.flatnonzero(running)
        if a.size == 0:
            break
        th = theta[a]
        g = obj.gradient(th, a)
        d = _newton_directions(obj.hessian(th, a), g)
        decrement = -np.einsum("kp,kp->k", g, d)
        fa = f[a]
        done = ~np.isfinite(decrement) | (decrement <= 1e-30 * (1.0 + np.abs(fa)))
        converged[a[done]] = True
        running[a[done]] = False
        keep = ~done
        a, th, d, decrement, fa = a[keep], th[keep], d[keep], decrement[keep], fa[keep]
        slack = 16.0 * _EPS * (1.0 + np.abs(fa))
        t = np.ones(a.size)
        accepted = np.zeros(a.size, dtype=bool)
        trial, f_trial = th.copy(), fa.copy()
        pending = np.arange(a.size)
        while pending.size:
            tr = th[pending] + t[pending, None] * d[pending]
            ft = obj.value(tr, a[pending])
            ok = ft <= fa[pending] - 1e-4 * t[pending] * decrement[pending] + slack[pending]
            hit = pending[ok]
            trial[hit], f_trial[hit], accepted[hit] = tr[ok], ft[ok], True
            miss = pending[~ok]
            t[miss] *= 0.5
            give_up = miss[t[miss] < 1e-12]
            stuck = a[give_up]
            converged[stuck] = decrement[give_up] <= 1e-20 * (1.0 + np.abs(fa[give_up]))
            running[stuck] = False
            pending = miss[t[miss] >= 1e-12]
        a, trial, f_trial = a[accepted], trial[accepted], f_trial[accepted]
        step = t[accepted] * np.linalg.norm(d[accepted], axis=1)
        theta[a], f[a] = trial, f_trial
        norm = np.linalg.norm(trial, axis=1)
        escaped = norm > max_norm
        running[a[escaped]] = False
        small = ~escaped & (step <= 4.0 * _EPS * (1.0 + norm))
        converged[a[small]] = True
        running[a[small]] = False
    return theta, converged


@dataclass
class _Best:
    """Per row: the feasible point with the smallest certified gap seen so far."""

    obj: BatchObjective
    radius: float
    theta: np.ndarray
    gap: np.ndarray

    def certify(self, rows: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """The Frank–Wolfe gaps at the projections of ``theta`` (rows ``rows``); keeps the best."""
        feasible = project_ball_rows(theta, self.radius)
        gap = frank_wolfe_gaps(self.obj.gradient(feasible, rows), feasible, self.radius)
        better = gap < self.gap[rows]
        self.theta[rows[better]] = feasible[better]
        self.gap[rows[better]] = gap[better]
        return gap


def solve_perturbed_ball_batch(obj: BatchObjective, size: int, p: int, radius: float, *,
                               tol: float, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Minimise every row's F_s over {‖θ‖ ≤ R} from the shared data-independent start 0.

    Row by row this is :func:`~dpbench.numerics.solvers.ball.solve_smooth_ball` with ``tol`` and
    ``max_iter`` (the same phases, stopping rules and certificate), run on all rows at once.
    Returns (θ, gap): θ (size, p) feasible, gap (size,) the Frank–Wolfe gap certified at each row
    (a proven bound on F_s(θ_s) − min_C F_s); rows with gap > ``tol`` did not reach the target and
    must be re-solved or refused by the caller.
    """
    rows = np.arange(size)
    theta = np.zeros((size, p))
    best = _Best(obj, float(radius), theta.copy(), np.full(size, np.inf))
    best.certify(rows, theta)
    todo = rows[best.gap > tol]
    if todo.size:
        theta[todo], converged = _damped_newton_rows(
            _Tikhonov(obj, todo, np.zeros(todo.size)), theta[todo], 50, max_norm=10.0 * radius)
        best.certify(todo, theta[todo])
        inside = converged & (np.linalg.norm(theta[todo], axis=1) <= radius)
        todo = todo[(best.gap[todo] > tol) & ~inside]
    if todo.size:
        _tikhonov_path_rows(obj, todo, theta[todo], float(radius), tol, max_iter, best)
    return best.theta, np.maximum(best.gap, 0.0)


def _tikhonov_path_rows(obj: BatchObjective, rows: np.ndarray, theta: np.ndarray, radius: float,
                        tol: float, max_iter: int, best: _Best) -> None:
    """Phase 2 (:func:`~dpbench.numerics.solvers.ball._tikhonov_path`) on the rows ``rows``: per
    row, the multiplier λ with ‖θ_λ‖ = R by safeguarded Newton steps on 1/‖θ_λ‖ − 1/R inside
    its bracket, each θ_λ by warm-started damped Newton; rows leave once certified."""
    p = theta.shape[1]
    g0 = np.linalg.norm(obj.gradient(np.zeros((rows.size, p)), rows), axis=1)
    lo = np.zeros(rows.size)
    hi = np.maximum(g0 / radius, 1e-300) * (1.0 + 1e-9)
    start = project_ball_rows(theta, radius)
    g = obj.gradient(start, rows)
    guess = -np.einsum("kp,kp->k", g, start) / np.maximum(np.einsum("kp,kp->k", start, start),
                                                          1e-300)
    guess = np.where(guess > 0, guess, np.linalg.norm(g, axis=1) / radius)
    lam = np.minimum(np.maximum(guess, hi * 1e-12), hi)
    theta = start
    live = np.arange(rows.size)  # positions (into rows, lam, lo, hi) still being solved
    for _ in range(max_iter):
        tik = _Tikhonov(obj, rows[live], lam[live])
        th, _ = _damped_newton_rows(tik, theta[live], 50)
        theta[live] = th
        gap = best.certify(rows[live], th)
        norm = np.linalg.norm(th, axis=1)
        above = norm > radius
        lo[live] = np.where(above, lam[live], lo[live])
        hi[live] = np.where(above, hi[live], lam[live])
        stop = (gap <= tol) | (hi[live] - lo[live] <= 1e-15 * hi[live])
        keep = ~stop
        live, th, norm = live[keep], th[keep], norm[keep]
        if live.size == 0:
            break
        lam[live] = _secular_steps(lam[live], lo[live], hi[live], th,
                                   tik.hessian(th, np.flatnonzero(keep)), radius, norm)
        checkpoint()


def _secular_steps(lam: np.ndarray, lo: np.ndarray, hi: np.ndarray, theta: np.ndarray,
                   h: np.ndarray, radius: float, norm: np.ndarray) -> np.ndarray:
    """Row-wise :func:`~dpbench.numerics.solvers.ball._secular_lambdas`: a Newton step on
    φ(λ) = 1/‖θ_λ‖ − 1/R, replaced by a geometric (or tenfold) bisection outside (lo, hi)."""
    w = -_newton_directions(h, theta)
    curvature = np.einsum("kp,kp->k", theta, w)
    ok = (curvature > 0) & (norm > 0)
    new = np.full(lam.shape, np.nan)
    new[ok] = lam[ok] + (norm[ok] - radius) * norm[ok] ** 2 / (radius * curvature[ok])
    inside = (lo < new) & (new < hi)
    fallback = np.where(lo > 0, np.sqrt(lo * hi), hi / 10.0)
    return np.where(inside, new, fallback)
