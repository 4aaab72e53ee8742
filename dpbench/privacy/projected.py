"""Exact privacy loss of a noisy point projected onto a centred ball: Π_{B(0,R)}(a + Z).

Output perturbation (BST14 Algorithm 3) releases Π_C(θ* + b), and objective perturbation on a
loss with the constant Hessian κI (LB-Quad, LB-Lin) releases Π_C(u) with u = −(g₀ + b/n)/(κ + λ),
again a centre plus symmetric noise, projected (:mod:`dpbench.numerics.solvers.perturbed`). This
module gives the exact privacy curve of two such laws with the same noise and different centres a
(on D) and c (on D′) — the ε(δ) of the RELEASED output on one neighbouring pair — and their
log-density ratio, used by the privacy audit (:meth:`dpbench.core.algorithm.Algorithm.exact_epsilon`,
:meth:`~dpbench.core.algorithm.Algorithm.log_density_ratio`). Noise Z is

* ``"gamma_norm"``: density ∝ exp(−‖z‖/s) on R^p (:func:`dpbench.privacy.noise.gamma_norm_noise`;
  for p = 1 the Laplace law with scale s), or
* ``"gaussian"``: N(0, s²I).

The law of Π(a + Z) has a density on the open ball (the noise density at θ − a) and, on the
sphere ‖θ‖ = R, the image of the outside: at Rω (ω a unit vector) the surface density
∫_R^∞ f(rω − a) r^{p−1} dr (the preimage of Rω is the ray {rω : r ≥ R}); for p = 1 these are the
two atoms P(a + Z ≥ R) at R and P(a + Z ≤ −R) at −R. **Derivations** (derived here):

* **p = 1, any δ ≥ 0 (closed form).** Both noises are symmetric and log-concave, so for a > c the
  likelihood ratio r(θ) = f(θ − a)/f(θ − c) is nondecreasing (monotone likelihood ratio), and it
  stays so with the atoms: the atom at R has ratio S(R − a)/S(R − c) (S the noise survival
  function), an average of r over [R, ∞), hence ≥ r on (−R, R); symmetrically at −R. So for
  every γ = e^ε the most powerful events of H_γ(P_a‖P_c) = sup_E P_a(E) − γP_c(E) are upper
  sets {θ ≥ t} (Neyman–Pearson), and
  H_γ(P_a‖P_c) = max(0, 1 − γ, sup_{t ∈ (−R, R]} S(t − a) − γS(t − c)); the function of t
  increases while r(t) < γ and decreases after, so the sup is at the clipped solution t* of
  r(t) = γ: t* = (a + c + s·log γ)/2 (Laplace, when |log γ| < (a − c)/s; else an end) and
  t* = (a + c)/2 + s²·log γ/(a − c) (Gaussian). H_γ(P_c‖P_a) is the same by the reflection
  θ → −θ. ε(δ) is the root of max(H_γ(P_a‖P_c), H_γ(P_c‖P_a)) = δ in ε (Brent, then moved up
  until the inequality holds, so it never errs downward). For δ = 0 the sup of |log ratio| is
  reached at the atoms: ε(0) = max(log S(R − a)/S(R − c), log S(R + c)/S(R + a)), finite even
  for the Gaussian (the projection bounds the loss).
* **p ≥ 2, Gamma-norm noise, δ = 0, both centres in the ball (closed form).** Inside the ball the
  log ratio is (‖θ − c‖ − ‖θ − a‖)/s ≤ ‖a − c‖/s (triangle inequality), with values arbitrarily
  close to the bound at θ → a (a ∈ C: every neighbourhood of a meets the open ball), and on the
  sphere the surface densities are integrals of integrands whose ratio is ≤ e^{‖a − c‖/s}
  pointwise. So ε(0) = ‖a − c‖/s exactly, the pre-projection value: the projection does not
  lower the pure ε when the centres lie in C (post-processing cannot raise it).
* **p = 2, Gamma-norm noise, δ = 0, a centre outside the ball (numerical).** The supremum over
  the disc and the circle of the log ratio, by a search over the angle (:func:`_pure_plane`).

Other p ≥ 2 cases (δ > 0, Gaussian noise, p ≥ 3 with a centre outside) are returned as ``None``
(not computed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr


__all__ = ["NOISES", "ProjectedNoise", "centred_ball_radius", "epsilon_for_delta",
           "hockey_stick_1d", "projected_epsilon"]

NOISES: tuple[str, ...] = ("gamma_norm", "gaussian")

#: Rows with ‖θ‖ ≥ R·(1 − BOUNDARY_RTOL) are on the sphere (the projection leaves them within a
#: few ulps of R; an interior point that close to it has probability ≈ 1e-9 or less).
BOUNDARY_RTOL = 1e-9
#: Nodes of the double-exponential rules of :meth:`ProjectedNoise.log_ray_mass` (τ-grid).
_DE_STEP = 0.0625
_DE_TAU = np.arange(-3.5, 3.5 + _DE_STEP / 2, _DE_STEP)
#: Angles of the grid of :func:`_pure_plane`.
_ANGLES = 4096
#: Relative tolerance of the root in ε (then moved up until H_γ ≤ δ holds).
_EPS_RTOL = 1e-12


def _log_sf(noise: str, x: np.ndarray | float, scale: float) -> np.ndarray:
    """log P(Z ≥ x) of the 1-D noise (Laplace with scale s, or N(0, s²))."""
    x = np.asarray(x, dtype=float)
    if noise == "gaussian":
        return log_ndtr(-x / scale)
    z = x / scale
    with np.errstate(over="ignore"):
        return np.where(z >= 0, math.log(0.5) - z, np.log1p(-0.5 * np.exp(np.minimum(z, 0.0))))


def _log_pdf(noise: str, x: np.ndarray | float, scale: float) -> np.ndarray:
    """log f(x) of the 1-D noise."""
    x = np.asarray(x, dtype=float)
    if noise == "gaussian":
        return -0.5 * (x / scale) ** 2 - math.log(scale * math.sqrt(2.0 * math.pi))
    return -np.abs(x) / scale - math.log(2.0 * scale)


def _diff_exp(log_x: float, log_y: float) -> float:
    """e^{log_x} − e^{log_y}, accurate when both are tiny (−inf when it would overflow)."""
    if log_x == -math.inf:
        return -math.exp(min(log_y, 700.0)) if log_y > -math.inf else 0.0
    gap = log_y - log_x
    return -math.inf if gap > 700.0 else math.exp(log_x) * -math.expm1(gap)


def _upper_hockey(a: float, c: float, radius: float, noise: str, scale: float,
                  log_gamma: float) -> float:
    """H_γ(P_a‖P_c) for a ≥ c on [−R, R] (module docstring: the best event is an upper set)."""
    best = 0.0 if log_gamma >= 0 else -math.expm1(log_gamma)  # the whole line: 1 − γ
    if a == c:
        return best
    if noise == "gaussian":
        t_star = 0.5 * (a + c) + scale * scale * log_gamma / (a - c)
    else:
        span = (a - c) / scale
        if log_gamma >= span:
            t_star = radius
        elif log_gamma <= -span:
            t_star = -radius
        else:
            t_star = 0.5 * (a + c + scale * log_gamma)
    for t in {-radius, radius, min(max(t_star, -radius), radius)}:
        value = _diff_exp(float(_log_sf(noise, t - a, scale)),
                          log_gamma + float(_log_sf(noise, t - c, scale)))
        best = max(best, value)
    return best


def hockey_stick_1d(a: float, c: float, radius: float, noise: str, scale: float,
                    epsilon: float) -> float:
    """max(H_{e^ε}(P_a‖P_c), H_{e^ε}(P_c‖P_a)) for the laws of clip(a + Z, −R, R) and
    clip(c + Z, −R, R) (exact; module docstring)."""
    hi, lo = max(a, c), min(a, c)
    return max(_upper_hockey(hi, lo, radius, noise, scale, epsilon),
               _upper_hockey(-lo, -hi, radius, noise, scale, epsilon))


def _pure_1d(a: float, c: float, radius: float, noise: str, scale: float) -> float:
    """sup |log ratio| of the two projected 1-D laws: at the atoms (module docstring)."""
    hi, lo = max(a, c), min(a, c)
    top = float(_log_sf(noise, radius - hi, scale) - _log_sf(noise, radius - lo, scale))
    bottom = float(_log_sf(noise, radius + lo, scale) - _log_sf(noise, radius + hi, scale))
    return max(top, bottom, 0.0)


def epsilon_for_delta(curve: Callable[[float], float], delta: float, eps_max: float) -> float:
    """The smallest ε ≥ 0 with ``curve(ε)`` ≤ δ for a nonincreasing ``curve`` (a hockey-stick
    divergence in ε) with ``curve(eps_max)`` ≤ δ: Brent's root, then moved up by small steps
    until the inequality holds in floating point (the answer never errs downward)."""
    if curve(0.0) <= delta:
        return 0.0
    if not curve(eps_max) <= delta:
        raise ArithmeticError(f"epsilon_for_delta: curve({eps_max:g}) = {curve(eps_max):g} "
                              f"exceeds delta = {delta:g}")
    root = float(brentq(lambda e: curve(e) - delta, 0.0, eps_max,
                        xtol=1e-14, rtol=_EPS_RTOL, maxiter=500))
    step = max(abs(root) * _EPS_RTOL, 1e-14)
    while curve(root) > delta and root < eps_max:
        root = min(root + step, eps_max)
        step *= 2.0
    return root


@dataclass(frozen=True)
class ProjectedNoise:
    """The law of Π_{B(0,R)}(center + Z), Z of kind ``noise`` (:data:`NOISES`) and scale ``scale``
    (s of exp(−‖z‖/s), or the Gaussian's standard deviation)."""

    center: np.ndarray
    scale: float
    noise: str
    radius: float

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")
        if not (self.scale > 0 and math.isfinite(self.scale)):
            raise ValueError(f"scale must be finite and > 0, got {self.scale!r}")
        if not (self.radius > 0 and math.isfinite(self.radius)):
            raise ValueError(f"radius must be finite and > 0, got {self.radius!r}")
        object.__setattr__(self, "center", np.asarray(self.center, dtype=float).reshape(-1))

    @property
    def p(self) -> int:
        return int(self.center.size)

    def _check_pair(self, other: ProjectedNoise) -> None:
        if (other.p != self.p or other.noise != self.noise or other.scale != self.scale
                or other.radius != self.radius):
            raise ValueError("the two laws must share p, noise, scale and radius")

    def log_ray_mass(self, omega: np.ndarray) -> np.ndarray:
        """log ∫_R^∞ f(rω − a) r^{p−1} dr for unit rows ω, up to the additive constant
        −log Z of f (the same for every centre): the surface density at Rω (p ≥ 2).

        Double-exponential quadrature in log space, split at r = max(R, ⟨ω, a⟩) (the point of
        the ray closest to a, where the Gamma-norm integrand has its only kink as the ray nears
        a): tanh–sinh on [R, ⟨ω, a⟩] when the centre projects beyond R, exp–sinh with the noise
        scale on the rest. Both converge exponentially for integrands analytic inside their
        interval whatever the endpoint behaviour; the tests check ≲ 1e-9 relative error against
        adaptive quadrature.
        """
        omega = np.asarray(omega, dtype=float)
        a = self.center
        u = omega @ a                           # ⟨ω, a⟩
        v2 = np.maximum(float(a @ a) - u * u, 0.0)
        R = self.radius
        knee = np.maximum(u, R)
        tau, h = _DE_TAU, _DE_STEP
        # exp-sinh on [knee, ∞): r = knee + s·exp(π/2·sinh τ)
        e = np.exp(0.5 * math.pi * np.sinh(tau))
        right_r = knee[:, None] + self.scale * e[None, :]
        right_logw = np.log(h * self.scale * 0.5 * math.pi * np.cosh(tau) * e)[None, :]
        # tanh-sinh on [R, knee] (empty when ⟨ω, a⟩ ≤ R): r = R + (knee − R)·(1 + tanh(·))/2
        g = np.tanh(0.5 * math.pi * np.sinh(tau))
        width = (knee - R)[:, None]
        left_r = R + width * 0.5 * (1.0 + g)[None, :]
        dg = 0.5 * math.pi * np.cosh(tau) / np.cosh(0.5 * math.pi * np.sinh(tau)) ** 2
        with np.errstate(divide="ignore"):
            left_logw = np.log(h * 0.5 * width * dg[None, :])
        r = np.concatenate([left_r, right_r], axis=1)
        logw = np.concatenate([np.broadcast_to(left_logw, left_r.shape),
                               np.broadcast_to(right_logw, right_r.shape)], axis=1)
        dist2 = (r - u[:, None]) ** 2 + v2[:, None]
        if self.noise == "gamma_norm":
            log_f = -np.sqrt(dist2) / self.scale
        else:
            log_f = -0.5 * dist2 / self.scale ** 2
        terms = log_f + (self.p - 1) * np.log(r) + logw
        top = terms.max(axis=1, keepdims=True)
        return top[:, 0] + np.log(np.exp(terms - top).sum(axis=1))

    def log_density_ratio(self, other: ProjectedNoise, thetas: np.ndarray) -> np.ndarray:
        """log dP_self/dP_other at each row of ``thetas`` (module docstring): the noise densities'
        log ratio inside the ball, the atoms' (p = 1) or the surface densities' (p ≥ 2) on
        the sphere.

        Inside, the Gamma-norm ratio (‖θ − c‖ − ‖θ − a‖)/s is snapped to its exact extremes
        ±‖a − c‖/s when within rounding of them (:func:`_snap`) and the Gaussian one is
        computed in its linear form ⟨θ − (a + c)/2, a − c⟩/s². On the Laplace plateaus (p = 1:
        θ beyond both centres) the real ratio is constant, and rounding would split a plateau by
        the low-order bits of θ, which differ between the two sides (fl(a + b) lies on a
        coarser grid than b when |a| > |b|: Mironov 2012), handing a likelihood-ratio threshold
        an event about the floating-point representation rather than the law."""
        self._check_pair(other)
        thetas = np.asarray(thetas, dtype=float).reshape(-1, self.p)
        norms = np.linalg.norm(thetas, axis=1)
        edge = norms >= self.radius * (1.0 - BOUNDARY_RTOL)
        out = np.empty(thetas.shape[0])
        inside = ~edge
        a_c = self.center - other.center
        bound = float(np.linalg.norm(a_c)) / self.scale
        if self.p == 1:
            x = thetas[:, 0]
            a, c = float(self.center[0]), float(other.center[0])
            if self.noise == "gamma_norm":
                da, dc = np.abs(x[inside] - a), np.abs(x[inside] - c)
                out[inside] = _snap((dc - da) / self.scale, bound, (da + dc) / self.scale)
            else:
                out[inside] = (a - c) * (2.0 * x[inside] - a - c) / (2.0 * self.scale ** 2)
            R = self.radius
            up = _log_sf(self.noise, R - a, self.scale) - _log_sf(self.noise, R - c, self.scale)
            down = _log_sf(self.noise, R + a, self.scale) - _log_sf(self.noise, R + c, self.scale)
            out[edge] = np.where(x[edge] > 0, up, down)
            return out
        t = thetas[inside]
        if self.noise == "gamma_norm":
            da = np.linalg.norm(t - self.center, axis=1)
            dc = np.linalg.norm(t - other.center, axis=1)
            out[inside] = _snap((dc - da) / self.scale, bound, (da + dc) / self.scale)
        else:
            out[inside] = (t - 0.5 * (self.center + other.center)) @ a_c / self.scale ** 2
        if np.any(edge):
            omega = thetas[edge] / norms[edge, None]
            out[edge] = self.log_ray_mass(omega) - other.log_ray_mass(omega)
        return out


def _snap(values: np.ndarray, bound: float, magnitude: np.ndarray) -> np.ndarray:
    """``values`` clipped to ±``bound``, and set to exactly ±``bound`` within rounding of it
    (64 ulps of the terms' ``magnitude`` plus of the bound): the real ratio is constant there."""
    tol = 64.0 * np.finfo(float).eps * (magnitude + bound)
    out = np.clip(values, -bound, bound)
    out[out >= bound - tol] = bound
    out[out <= -bound + tol] = -bound
    return out


def projected_epsilon(law0: ProjectedNoise, law1: ProjectedNoise, delta: float) -> float | None:
    """The exact ε(δ) of the pair of laws (both orders), or ``None`` where it is not computed
    (module docstring: any δ for p = 1; δ = 0 with Gamma-norm noise and both centres in the
    ball for p ≥ 2)."""
    law0._check_pair(law1)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    R, s, noise = law0.radius, law0.scale, law0.noise
    if law0.p == 1:
        a, c = float(law0.center[0]), float(law1.center[0])
        eps0 = _pure_1d(a, c, R, noise, s)
        if delta == 0.0 or eps0 == 0.0:
            return eps0
        return epsilon_for_delta(lambda e: hockey_stick_1d(a, c, R, noise, s, e), delta, eps0)
    inside = all(float(np.linalg.norm(law.center)) <= R * (1.0 + 1e-12) for law in (law0, law1))
    if noise == "gamma_norm" and delta == 0.0 and inside:
        return float(np.linalg.norm(law0.center - law1.center)) / s
    if noise == "gamma_norm" and delta == 0.0 and law0.p == 2:
        return max(_pure_plane(law0, law1), _pure_plane(law1, law0))
    return None


def _reaches_ball(a: np.ndarray, u: np.ndarray, radius: float) -> bool:
    """Whether the ray {a + t·u : t ≥ 0} (u a unit vector) meets the closed ball B(0, R)."""
    t = max(-float(a @ u), 0.0)  # the ray's point nearest the origin
    return float(np.linalg.norm(a + t * u)) <= radius


def _pure_plane(law0: ProjectedNoise, law1: ProjectedNoise) -> float:
    """sup log dP₀/dP₁ for p = 2 and Gamma-norm noise (centres anywhere).

    [derived] Inside the disc the log ratio is f(θ) = (‖θ − c‖ − ‖θ − a‖)/s ≤ ‖a − c‖/s, with
    equality exactly on the ray from a directed away from c; its gradient
    ((θ − c)/‖θ − c‖ − (θ − a)/‖θ − a‖)/s vanishes nowhere else, so when that ray misses the disc
    the supremum over the disc is on the circle. On the circle the surface densities' log ratio
    is :meth:`ProjectedNoise.log_ray_mass`'s difference. Both are maximised over the angle on a
    grid of :data:`_ANGLES` points refined by a bounded scalar search around the best ones; the
    log ray masses are accurate to ≈ 1e-9 (their docstring), which bounds the error.
    """
    a, c, s, R = law0.center, law1.center, law0.scale, law0.radius
    gap = float(np.linalg.norm(a - c))
    if gap == 0.0:
        return 0.0
    if _reaches_ball(a, (a - c) / gap, R):
        return gap / s

    def ratio(phi: np.ndarray) -> np.ndarray:
        omega = np.stack([np.cos(phi), np.sin(phi)], axis=-1).reshape(-1, 2)
        theta = R * omega
        inner = (np.linalg.norm(theta - c, axis=1) - np.linalg.norm(theta - a, axis=1)) / s
        surface = law0.log_ray_mass(omega) - law1.log_ray_mass(omega)
        return np.maximum(inner, surface)

    phis = np.linspace(0.0, 2.0 * math.pi, _ANGLES, endpoint=False)
    values = ratio(phis)
    best = float(values.max())
    step = phis[1] - phis[0]
    for i in np.argsort(values)[-3:]:
        res = minimize_scalar(lambda x: -float(ratio(np.array([x]))[0]),
                              bounds=(phis[i] - step, phis[i] + step), method="bounded",
                              options={"xatol": 1e-12})
        best = max(best, -float(res.fun))
    return best
