"""diffprivlib 0.6.6's objective-perturbation calibration, and what CMS11 requires, side by side.

Everything here is arithmetic on public quantities (ε, the data norm q, diffprivlib's
regularisation α = 1/C, n); nothing calls diffprivlib. The formulas restate, in diffprivlib's own
scaling, what ``diffprivlib.mechanisms.Vector.randomise`` computes (read from its public source;
no code is copied) and what Chaudhuri, Monteleoni, Sarwate (JMLR 2011, Algorithm 2 and the proof
of Theorem 9) require. docs/diffprivlib.md derives them.

diffprivlib's scaling. With ``fit_intercept=False`` and binary labels, ``LogisticRegression.fit``
minimises (scikit-learn's average loss, ``l2_reg_strength = 1/(C·n)``)

    (1/n)·Σᵢ log(1 + exp(−yᵢ⟨w, xᵢ⟩)) + (1/(2Cn))·‖w‖² + ⟨b, w⟩/n + (Δ/2)·‖w‖²,

i.e. on the SUM scale Σᵢℓᵢ(w) + (α/2)‖w‖² + ⟨b, w⟩ + (nΔ/2)‖w‖² with α = 1/C: CMS11's
objective with nΛ = α. The noise b has density ∝ exp(−ε′‖b‖/(2q)) (Gamma(p, 2q/ε′) norm,
uniform direction), with

    ε′ = ε − 2·log(1 + c·q/α),        c = 1/4 (the logistic loss's bound on φ''),

and, when that is ≤ 0, ε′ = ε/2 and the extra ridge nΔ = c·q/(e^{ε/4} − 1) − α.

What the proof needs. The Hessian of ℓ(y⟨w, x⟩) is φ''·xxᵀ, whose eigenvalue reaches c·‖x‖² =
c·q², not c·q. Rescaling x̃ = x/q, w̃ = q·w turns the problem into CMS11's normalised one
(‖x̃‖ ≤ 1) with nΛ̃ = α/q², so CMS11's correction in diffprivlib's scaling is
2·log(1 + c·q²/α) and its fallback ridge is nΔ = c·q²/(e^{ε/4} − 1) − α. (A single factor,
log(1 + c·q²/α), already suffices: the Hessian change is rank one, det(A + G′)/det(A + G) ≤
1 + c·q²/α for A ⪰ αI; KST12.) diffprivlib's term agrees with CMS11 at q = 1, is conservative for
q < 1 and too small for q > 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The logistic loss's bound on φ'' (CMS11's c).
C_LOGISTIC = 0.25


@dataclass(frozen=True)
class Calibration:
    """One objective-perturbation calibration on the SUM scale (diffprivlib's α = nΛ)."""

    epsilon: float
    data_norm: float
    alpha: float
    eps_noise: float      # ε′: what the noise density pays
    extra_ridge: float    # nΔ on the sum scale (0 unless the fallback branch applies)
    noise_scale: float    # Gamma-norm scale 2q/ε′
    jacobian_term: float  # what the calibration subtracts for the Jacobian (2·log(1 + ·))

    @property
    def total_ridge(self) -> float:
        """α + nΔ: the sum-scale ridge of the perturbed objective."""
        return self.alpha + self.extra_ridge


def shipped_calibration(epsilon: float, data_norm: float, alpha: float) -> Calibration:
    """What diffprivlib 0.6.6's ``Vector`` mechanism uses (Jacobian term in c·q/α)."""
    return _calibration(epsilon, data_norm, alpha, curvature=C_LOGISTIC * data_norm)


def cms11_calibration(epsilon: float, data_norm: float, alpha: float) -> Calibration:
    """CMS11 Algorithm 2 for rows of norm ≤ q (Jacobian term in c·q²/α)."""
    return _calibration(epsilon, data_norm, alpha, curvature=C_LOGISTIC * data_norm**2)


def _calibration(epsilon: float, q: float, alpha: float, curvature: float) -> Calibration:
    term = 2.0 * math.log1p(curvature / alpha)
    eps_noise = epsilon - term
    extra = 0.0
    if eps_noise <= 0:
        extra = curvature / math.expm1(epsilon / 4.0) - alpha
        eps_noise = epsilon / 2.0
        term = 2.0 * math.log1p(curvature / (alpha + extra))
    return Calibration(epsilon, q, alpha, eps_noise, extra, 2.0 * q / eps_noise, term)


def privacy_loss_bound(cal: Calibration, rank_one: bool = True) -> float:
    """Upper bound on the privacy loss of the EXACT argmin under ``cal`` for rows of norm ≤ q.

    ε′ (noise density, shift ‖∇ℓ(w; d) − ∇ℓ(w; d′)‖ ≤ 2q) plus the Jacobian ratio, at most
    log(1 + c·q²/(α + nΔ)) for a rank-one Hessian change (twice that with CMS11's looser
    two-factor bound). It is what the calibration actually guarantees; compare with ε.
    """
    jac = math.log1p(C_LOGISTIC * cal.data_norm**2 / cal.total_ridge)
    return cal.eps_noise + (jac if rank_one else 2.0 * jac)


def under_corrects(epsilon: float, data_norm: float, alpha: float) -> bool:
    """Whether diffprivlib's calibration guarantees less than ε even with the rank-one Jacobian
    bound: :func:`privacy_loss_bound` of :func:`shipped_calibration` exceeds ε. In the main
    branch this is (1 + c·q/α)² < 1 + c·q²/α, i.e. q·(1 − c/α) > 2."""
    return privacy_loss_bound(shipped_calibration(epsilon, data_norm, alpha)) > epsilon * (1 + 1e-12)
