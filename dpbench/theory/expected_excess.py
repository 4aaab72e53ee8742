"""Closed-form "oracle curves" O1–O7 for BST14's mechanisms, the HUB-1D predictions and r₀.

Every curve is on BST14's **sum** scale (the excess of Σᵢ ℓ(θ; dᵢ)); pass ``average=True`` to get
the per-example scale (divided by n, which those functions then take as an argument). Each
docstring says whether the value is **exact** (a theorem about the stated instance) or a
**heuristic** (an approximation confirmed by our reference runs); the table of all curves and the
reference values is docs/bst14.md, "Oracle curves and reference runs". Notation: k = ε/(2L‖C‖) is
the ExpMech temperature, z = σ/(2nL) the NoisySGD noise multiplier, ‖C‖ the diameter.
"""

from __future__ import annotations

import math
from typing import Literal

from scipy import special, stats

__all__ = [
    "expmech_lblin", "noisy_sgd_lblin", "noisy_sgd_quadratic", "outpert_smooth_quadratic",
    "outpert_kink", "localize_kink", "expmech_quadratic", "localize_radius",
    "huber_objpert_fixed_h", "huber_objpert_d2", "huber_objpert_best_h",
]


def _scale(value: float, n: float | None, average: bool) -> float:
    """The sum-scale ``value``, or value/n on the average scale."""
    if not average:
        return float(value)
    if n is None:
        raise ValueError("average=True needs n")
    return float(value) / float(n)


def expmech_lblin(M: float, p: int, epsilon: float, R: float = 1.0, L: float = 1.0, *,
                  n: float | None = None, average: bool = False) -> float:
    """O1 (exact): E[excess] of ExpMech on LB-Lin, R·M·[1 − I_{p/2+1}(kRM)/I_{p/2}(kRM)].

    Ball of radius R (‖C‖ = 2R), M = ‖Σdᵢ‖, k = ε/(2L·2R) (validated against exact draws, O1 in
    docs/bst14.md). The θ₁ marginal of the density ∝ e^{kM⟨θ, s/M⟩} on the ball is
    ∝ e^{κx}(1 − x²)^{(p−1)/2}, whose mean is the Bessel ratio. Limits: → R·M when kRM ≪ p;
    → (p + 1)L‖C‖/ε when kRM ≫ p. Monotone in M. Uses exponentially scaled Bessel functions
    (``scipy.special.ive``), stable for large kRM.
    """
    k = epsilon / (2.0 * L * 2.0 * R)
    x = k * R * float(M)
    if x <= 0.0:
        return _scale(0.0, n, average)
    ratio = special.ive(p / 2.0 + 1.0, x) / special.ive(p / 2.0, x)
    return _scale(R * M * (1.0 - ratio), n, average)


def noisy_sgd_lblin(M: float, p: int, z: float, R: float = 1.0, L: float = 1.0, *,
                    n: float | None = None, average: bool = False) -> float:
    """O2 (heuristic, OU-process argument): NoisySGD-Lip on LB-Lin, min(R·M, R·L·z·√p).

    Reference run (O2 in docs/bst14.md): 28.8 predicted at p = 10, z = 9.1, R = L = 1; flat in n
    once M ≫ the noise; R·M is the cap.
    """
    return _scale(min(R * M, R * L * z * math.sqrt(p)), n, average)


def noisy_sgd_quadratic(n: float, p: int, z: float, L: float, Delta: float, v: float, *,
                        average: bool = False) -> float:
    """O3 (heuristic, late-phase projection inactive): NoisySGD-SC on (Δ/2)‖θ − d‖²,
    Δv/(2n) + 2pL²z²/(nΔ), with v = (1/n)Σ‖dᵢ − q‖².

    Reference run (O3 in docs/bst14.md): 16.6 at n = 400, p = 10, L = 2, z = 9.1. The iterate
    after T = n² steps is the running mean of the sampled rows minus Σb/(nΔT), whose sum-scale
    excess is (nΔ/2)·E‖θ_T − q‖².
    """
    return _scale(Delta * v / (2.0 * n) + 2.0 * p * L**2 * z**2 / (n * Delta), n, average)


def outpert_smooth_quadratic(n: float, p: int, L: float, Delta: float, epsilon: float,
                             beta: float | None = None, *, average: bool = False) -> float:
    """O4 (exact upper bound when the projection is inactive): OutPert (ε, 0) on a β-smooth,
    Δ-strongly convex loss, (nβ/2)·E‖b‖² = 2βL²p(p + 1)/(nΔ²ε²); β = Δ (default) gives the
    quadratic's 2p(p + 1)L²/(nΔε²).

    O4 and R9s (docs/bst14.md, "Derived constants"): b is Gamma-norm noise of scale 2L/(nΔε),
    E‖b‖² = p(p + 1)s².
    """
    beta = Delta if beta is None else beta
    return _scale(2.0 * beta * L**2 * p * (p + 1) / (n * Delta**2 * epsilon**2), n, average)


def outpert_kink(p: int, L: float, Delta: float, epsilon: float, *, n: float | None = None,
                 average: bool = False) -> float:
    """O5 (first-order term; heuristic): OutPert on KINK-SC, n·E‖b‖ = 2pL/(Δε), flat in n.

    Reference run (O5 in docs/bst14.md): 30 at p = 5, L = 3, Δ = 1, ε = 1; measured 30.2 at
    n = 10⁴. The exact excess of d₀ + b is n(‖b‖ + Δ‖b‖²/2) before projection; the quadratic part
    adds 2p(p + 1)L²/(nΔε²), which vanishes as n grows.
    """
    return _scale(2.0 * p * L / (Delta * epsilon), n, average)


def localize_radius(n: int, p: int, L: float, Delta: float, epsilon: float,
                    rule: Literal["quantile", "paper"] = "quantile") -> float:
    """r₀ of Localize (BST14 Algorithm 4): data-independent radius of C₀ = C ∩ B(θ₀, r₀).

    OutPert at ε/2 draws ‖b‖ ~ Gamma(p, scale 4L/(Δεn)).

    * ``"quantile"`` [derived, docs/bst14.md "Derived constants"]: r₀ = Gamma.ppf(1 − n⁻³; p,
      4L/(Δεn)), so P(‖b‖ > r₀) = n⁻³ exactly (computed with the survival function, accurate for
      tiny n⁻³);
    * ``"paper"``: r₀ = 3·log n·4Lp/(Δεn) = 12·L·p·log n/(Δεn) (Lemma 4.2 with ζ = 3 log n).
    """
    scale = 4.0 * L / (Delta * epsilon * n)
    if rule == "quantile":
        return float(stats.gamma.isf(float(n) ** -3.0, p, scale=scale))
    if rule == "paper":
        return 12.0 * L * p * math.log(n) / (Delta * epsilon * n)
    raise ValueError(f"localize_radius: rule must be 'quantile' or 'paper', got {rule!r}")


def localize_kink(n: int, p: int, L: float, Delta: float, epsilon: float,
                  r0: float | None = None, *, average: bool = False) -> float:
    """O6 (heuristic): Localize (OutPert + ExpMech on C₀) on KINK-SC, p/k′ = 8·p·L·r₀/ε.

    Reference run (O6 in docs/bst14.md): 5.65 at n = 10⁴, p = 5, L = 3, Δ = ε = 1 with the
    quantile r₀. The inner ExpMech runs at ε/2 with diameter 2r₀, so k′ = ε/(8Lr₀); with all rows
    at d₀ the radius law is ∝ r^{p−1}e^{−k′n(r + Δr²/2)}, whose sum-scale excess E[n·r] ≈ p/k′
    when the quadratic term and the truncation to C₀ are negligible. ``r0`` defaults to
    :func:`localize_radius` (quantile rule). ∝ p²·log n/(nΔε²).
    """
    r0 = localize_radius(n, p, L, Delta, epsilon) if r0 is None else r0
    return _scale(8.0 * p * L * r0 / epsilon, n, average)


def expmech_quadratic(p: int, L: float, D: float, epsilon: float, *, n: float | None = None,
                      average: bool = False) -> float:
    """O7 (heuristic): plain ExpMech on a strongly convex quadratic, p/(2k) = p·L·‖C‖/ε, flat in n.

    O7 in docs/bst14.md: the density is a Gaussian of sum-scale curvature kΔn; its excess
    (nΔ/2)‖θ − θ*‖² has mean p/(2k) while the Gaussian fits inside C. ``D`` is the diameter ‖C‖.
    """
    return _scale(p * L * D / epsilon, n, average)


def huber_objpert_fixed_h(n: float, h: float, *, average: bool = False) -> float:
    """R11 (heuristic; docs/bst14.md, R11): Huberized ObjPert on HUB-1D D1, ≈ n·min(1, h)/9.

    The Huberized minimiser is −1 + h/3 on D1 (docs/bst14.md Errata 4: θ* = −1), whose sum-scale
    excess is (n/3)·(h/3) = n·h/9 (reference run: 159.6 at n = 14400, h = 0.1).
    Lemma A.2: Ω(n·min{1, h}).
    """
    return _scale(n * min(1.0, h) / 9.0, n, average)


def huber_objpert_d2(n: float, h: float, *, average: bool = False) -> float:
    """Heuristic (docs/bst14.md, oracle table): Huberized ObjPert on HUB-1D D2, ≈ min(1/(16h), n).

    The slope on [−1 + h, 1 − h] is max{−1/(16h), −n} and the regulariser holds θ_priv below ε < 1,
    so the excess is about that slope times a distance of order 1
    (Lemma A.3: Ω((1 − ε)min{1/h, n})).
    """
    return _scale(min(1.0 / (16.0 * h), float(n)), n, average)


def huber_objpert_best_h(n: float, *, average: bool = False) -> float:
    """R11′ (heuristic; docs/bst14.md, R11′): the best h ≈ 1/√n of max(D1, D2) gives ≈ √n/9.

    Thm A.1: Ω(√n); reference run 3.5, 7.0, 13.6 at n = 900, 3600, 14400.
    """
    return _scale(math.sqrt(n) / 9.0, n, average)
