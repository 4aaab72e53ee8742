"""Certified solver for perturbed objectives F(θ) = F₀(θ) + (λ/2)‖θ‖² + ⟨c, θ⟩ on a centred ball.

Objective perturbation (BST14 Appendix E; CMS11; KST12; docs/bst14.md) releases the minimiser of the
average loss F₀ plus a ridge λ and a random linear term c = b/n. Privacy is proved for the
**exact** minimiser, so the solver must return a certified gap: every path below returns an
:class:`~dpbench.core.problem.Optimum` whose ``gap`` is a proven bound on F(θ) − min_C F.

* :func:`solve_isotropic_quadratic` — F₀(θ) = (κ/2)‖θ − q‖² + const (e.g. LB-Quad, κ = 1): the
  minimiser is the projection of (κq − c)/(κ + λ) onto the ball (F is isotropic), gap 0.
* :func:`solve_perturbed_ball` — generic smooth F₀: with a Hessian, the Newton/secular solver
  :func:`dpbench.numerics.solvers.ball.solve_smooth_ball`; without one, accelerated projected gradient with
  gradient restarts (FISTA, Beck & Teboulle 2009; O'Donoghue & Candès 2015). Both certify with the
  Frank–Wolfe gap :func:`dpbench.numerics.solvers.ball.frank_wolfe_gap`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...core.problem import Optimum
from ...core.time_limit import checkpoint
from .ball import frank_wolfe_gap, project_ball, solve_smooth_ball

__all__ = ["PerturbedObjective", "solve_isotropic_quadratic", "solve_perturbed_ball"]

Risk = Callable[[np.ndarray], float]
Grad = Callable[[np.ndarray], np.ndarray]
Hess = Callable[[np.ndarray], np.ndarray]


@dataclass
class PerturbedObjective:
    """F(θ) = risk(θ) + (lam/2)‖θ‖² + ⟨lin, θ⟩ on the average scale, with derivatives."""

    risk: Risk
    grad: Grad
    hess: Hess | None
    lam: float
    lin: np.ndarray

    def value(self, theta: np.ndarray) -> float:
        return float(self.risk(theta) + 0.5 * self.lam * float(theta @ theta)
                     + float(self.lin @ theta))

    def gradient(self, theta: np.ndarray) -> np.ndarray:
        return self.grad(theta) + self.lam * theta + self.lin

    def hessian(self, theta: np.ndarray) -> np.ndarray:
        if self.hess is None:
            raise ValueError("this objective has no Hessian oracle")
        h = np.array(self.hess(theta), dtype=float)
        h[np.diag_indices_from(h)] += self.lam
        return h


def solve_isotropic_quadratic(curvature: float, grad_at_zero: np.ndarray, lam: float,
                              lin: np.ndarray, radius: float) -> Optimum:
    """argmin_{‖θ‖≤R} (κ/2)‖θ‖² + ⟨g₀, θ⟩ + (λ/2)‖θ‖² + ⟨c, θ⟩, in closed form (gap 0).

    This is every perturbed objective whose risk has the constant Hessian κI (per-example
    Δ = β = κ: LB-Quad with κ = 1, LB-Lin with κ = 0); g₀ = ∇risk(0). The objective equals
    ((κ + λ)/2)‖θ − u‖² + const with u = −(g₀ + c)/(κ + λ), whose minimiser over a ball centred at
    0 is Π(u). Needs κ + λ > 0. ``value`` omits the additive constant.
    """
    total = curvature + lam
    if not total > 0:
        raise ValueError(f"curvature + lam must be > 0, got {total!r}")
    u = -(np.asarray(grad_at_zero, dtype=float) + lin) / total
    theta = project_ball(u, radius)
    value = 0.5 * total * float((theta - u) @ (theta - u))
    return Optimum(theta=theta, value=value, gap=0.0, method="closed form (isotropic quadratic)")


def solve_perturbed_ball(obj: PerturbedObjective, p: int, radius: float, *, smoothness: float,
                         tol: float = 1e-14, max_iter: int = 200_000) -> Optimum:
    """Minimise ``obj`` over {‖θ‖ ≤ R} from the data-independent start 0, with a certified gap.

    ``smoothness`` bounds the Lipschitz constant of ∇risk (the average-scale β); it sets the
    first-order step 1/(β + λ). The returned gap is the Frank–Wolfe gap at the returned point.
    """
    if obj.hess is not None:
        return solve_smooth_ball(obj.value, obj.gradient, obj.hessian, p, radius, tol=tol)
    return _fista_ball(obj, p, radius, smoothness + obj.lam, tol, max_iter)


def _fista_ball(obj: PerturbedObjective, p: int, radius: float, lipschitz_grad: float,
                tol: float, max_iter: int) -> Optimum:
    """FISTA with gradient-based adaptive restart on the ball; Frank–Wolfe gap certificate."""
    if not (math.isfinite(lipschitz_grad) and lipschitz_grad > 0):
        raise ValueError(f"first-order solver needs a finite smoothness, got {lipschitz_grad!r}")
    step = 1.0 / lipschitz_grad
    theta = np.zeros(p)
    y, t = theta.copy(), 1.0
    best_theta, best_gap = theta, frank_wolfe_gap(obj.gradient(theta), theta, radius)
    it = 0
    for it in range(1, max_iter + 1):
        g_y = obj.gradient(y)
        new = project_ball(y - step * g_y, radius)
        if float(g_y @ (new - theta)) > 0:  # restart: momentum points uphill
            t = 1.0
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        y = new + ((t - 1.0) / t_next) * (new - theta)
        theta, t = new, t_next
        if it % 10 == 0:
            gap = frank_wolfe_gap(obj.gradient(theta), theta, radius)
            if gap < best_gap:
                best_theta, best_gap = theta, gap
            if best_gap <= tol:
                break
            checkpoint()
    return Optimum(theta=best_theta, value=obj.value(best_theta), gap=max(best_gap, 0.0),
                   method="FISTA + Frank-Wolfe gap", iterations=it)
