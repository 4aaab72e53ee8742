"""Certified solver for the weighted Euclidean 1-median with a quadratic term, on a ball.

Minimises, over the ball ‖θ‖ ≤ R,

    f(θ) = Σⱼ wⱼ‖θ − dⱼ‖ + (μ/2)‖θ − c‖²

(weights summing to 1: the **average** of ℓ = ‖θ − d‖ over the rows, with the ridge of the 1-median
+ ridge family when c = 0, or KINK-SC's (Δ/2)Σ‖θ − dᵢ‖²/n = (Δ/2)‖θ − q‖² + const when c = q is the
row mean). The classical choice is Weiszfeld's iteration with a check of the kinks at the data
points; this solver is sharper and certified (docs/instances.md, 'Exact references'):

1. **Smoothing continuation + damped Newton.** ‖x‖ is replaced by √(‖x‖² + s²) (an over-estimate by
   at most s) and s is decreased from the data scale to 1e-14 of it; each stage runs damped Newton
   (p ≤ a few dozen, so the p×p Hessian is cheap) from the previous minimiser, via
   :func:`dpbench.numerics.solvers.ball.solve_smooth_ball`, which handles the ball by the secular equation of
   its multiplier when it binds (it never does when every dⱼ and c lie in the ball: the minimiser is
   then in their convex hull).
2. **Certificate.** For any subgradient g ∈ ∂f(θ̂) and feasible θ̂,
   f(θ̂) − f* ≤ max_{u∈C}⟨g, θ̂ − u⟩ = ⟨g, θ̂⟩ + R‖g‖ (convexity). At a data point dⱼ the
   subdifferential of ‖θ − dⱼ‖ is the unit ball, so g = g₋ⱼ + wⱼv with ‖v‖ ≤ 1; the solver takes
   v = Π_B(−g₋ⱼ/wⱼ), which gives g = 0 (gap 0: dⱼ is exactly optimal) whenever the kink binds. The
   Newton point and the data points closest to it are all certified and the best is returned.

Duplicate rows are merged (weights add up), which makes kinks carrying many rows exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.time_limit import checkpoint
from .ball import project_ball, solve_smooth_ball

__all__ = ["MedianSolution", "solve_median", "median_objective", "median_certificate"]

_EPS = float(np.finfo(float).eps)


@dataclass(frozen=True)
class MedianSolution:
    """θ̂, f(θ̂), the certified bound ``gap`` ≥ f(θ̂) − min f, iterations and the method."""

    theta: np.ndarray
    value: float
    gap: float
    iterations: int
    method: str


def _merge(points: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows and their total weights, normalised to sum 1."""
    points = np.asarray(points, dtype=float)
    w = np.ones(points.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    uniq, inverse = np.unique(points, axis=0, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=w, minlength=uniq.shape[0])
    return uniq, merged / merged.sum()


def median_objective(theta: np.ndarray, points: np.ndarray, weights: np.ndarray, quad: float,
                     center: np.ndarray) -> float:
    """f(θ) = Σ wⱼ‖θ − dⱼ‖ + (μ/2)‖θ − c‖²."""
    diff = theta - center
    return float(weights @ np.linalg.norm(theta - points, axis=1)) + 0.5 * quad * float(diff @ diff)


class _Smoothed:
    """f_s(θ) with ‖x‖ ≈ √(‖x‖² + s²): value, gradient and Hessian."""

    def __init__(self, points: np.ndarray, weights: np.ndarray, quad: float,
                 center: np.ndarray) -> None:
        self.points, self.weights, self.quad, self.center = points, weights, quad, center

    def value(self, theta: np.ndarray, s: float) -> float:
        x = theta - self.points
        rho = np.sqrt(np.einsum("ij,ij->i", x, x) + s * s)
        diff = theta - self.center
        return float(self.weights @ rho) + 0.5 * self.quad * float(diff @ diff)

    def derivatives(self, theta: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
        x = theta - self.points
        rho = np.sqrt(np.einsum("ij,ij->i", x, x) + s * s)
        coef = self.weights / rho
        g = coef @ x + self.quad * (theta - self.center)
        xs = x * np.sqrt(self.weights / rho**3)[:, None]
        h = (float(coef.sum()) + self.quad) * np.eye(theta.size) - xs.T @ xs
        return g, h


def _continuation(obj: _Smoothed, theta: np.ndarray, scale: float,
                  radius: float) -> tuple[np.ndarray, int]:
    """Minimise f_s over the ball along s = scale·10^{−1}, …, scale·10^{−14}, warm-started.

    Each stage is :func:`dpbench.numerics.solvers.ball.solve_smooth_ball` (damped Newton, and the secular
    equation for the multiplier of the ball when the constraint binds).
    """
    total = 0
    for e in range(1, 15):
        s = scale * 10.0**-e
        opt = solve_smooth_ball(lambda th: obj.value(th, s), lambda th: obj.derivatives(th, s)[0],
                                lambda th: obj.derivatives(th, s)[1], theta.size, radius,
                                tol=1e-3 * s, theta0=theta)
        theta = opt.theta
        total += opt.iterations
        checkpoint()
    return theta, total


def median_certificate(theta: np.ndarray, points: np.ndarray, weights: np.ndarray, quad: float,
                       center: np.ndarray, radius: float, kink: int | None = None) -> float:
    """A proven bound on f(θ) − min_{‖u‖≤R} f (module docstring, step 2), with roundoff allowance.

    ``kink`` is the index of a data point equal to θ (its term contributes wⱼv, ‖v‖ ≤ 1); any other
    point at distance 0 from θ is also treated as a kink.
    """
    x = theta - points
    dist = np.linalg.norm(x, axis=1)
    at = dist == 0.0
    if kink is not None:
        at[kink] = True
    safe = np.where(at, 1.0, dist)
    g = (weights * ~at / safe) @ x + quad * (theta - center)
    w_kink = float(weights[at].sum())
    gnorm = float(np.linalg.norm(g))
    if w_kink > 0 and gnorm > 0:
        g = g * max(0.0, 1.0 - w_kink / gnorm)
    elif w_kink > 0:
        g = np.zeros_like(g)
    bound = float(g @ theta) + radius * float(np.linalg.norm(g))
    value_scale = float(weights @ dist) + quad * float(np.linalg.norm(theta - center)) ** 2
    return max(bound, 0.0) + 16.0 * _EPS * (value_scale + radius * float(np.abs(g).sum()))


def solve_median(points: np.ndarray, radius: float, *, weights: np.ndarray | None = None,
                 quad: float = 0.0, center: np.ndarray | None = None,
                 candidates: int = 8) -> MedianSolution:
    """Minimise Σ wⱼ‖θ − dⱼ‖ + (quad/2)‖θ − center‖² over ‖θ‖ ≤ radius (module docstring).

    ``weights`` default to 1/n (the average scale); ``center`` defaults to 0. Returns the best of
    the Newton point and the ``candidates`` data points nearest to it, with a certified gap.
    """
    pts, w = _merge(points, weights)
    p = pts.shape[1]
    c = np.zeros(p) if center is None else np.asarray(center, dtype=float)
    if quad < 0:
        raise ValueError(f"solve_median: quad must be >= 0, got {quad}")
    spread = float(np.max(np.linalg.norm(pts - pts.mean(axis=0), axis=1)))
    scale = max(spread, 1e-3 * radius, 1e-300)
    start = project_ball(w @ pts, radius)
    theta, iters = _continuation(_Smoothed(pts, w, quad, c), start, scale, radius)
    theta = project_ball(theta, radius)
    return _best_certified(theta, pts, w, quad, c, radius, candidates, iters)


def _best_certified(theta: np.ndarray, pts: np.ndarray, w: np.ndarray, quad: float, c: np.ndarray,
                    radius: float, candidates: int, iters: int) -> MedianSolution:
    """Certify θ̂ and the nearest data points (as kinks) and return the best."""
    best = (median_certificate(theta, pts, w, quad, c, radius), theta, "smoothed Newton")
    dist = np.linalg.norm(pts - theta, axis=1)
    for j in np.argsort(dist)[:candidates]:
        if float(np.linalg.norm(pts[j])) > radius:
            continue
        gap = median_certificate(pts[j], pts, w, quad, c, radius, kink=int(j))
        if gap < best[0]:
            best = (gap, pts[j].copy(), "kink")
    gap, point, how = best
    value = median_objective(point, pts, w, quad, c)
    return MedianSolution(theta=point, value=value, gap=gap, iterations=iters,
                          method=f"{how} (smoothing continuation; certified subgradient bound)")
