"""The exact output law of objective perturbation in one dimension (p = 1), for a given calibration.

For p = 1 the perturbed sum-scale objective Σᵢ φ(yᵢxᵢw) + (Λ/2)w² + b·w (Λ = α + nΔ, φ the
logistic loss) has a unique minimiser w for every b, and w ↦ b(w) = −(Σᵢ φ'(yᵢxᵢw)yᵢxᵢ + Λw) is a
strictly decreasing bijection. With Laplace b of scale s (a Gamma(1, s) norm with a random sign:
diffprivlib's noise for p = 1) the release has the density

    dens(w) = exp(−|b(w)|/s)/(2s) · |b′(w)|,    |b′(w)| = Σᵢ φ''(yᵢxᵢw)xᵢ² + Λ,

and P(w ≤ t) = P(b ≥ b(t)). So the privacy loss log dens_D(w)/dens_D′(w) and the probability of
every interval are available in closed form: the true ε of the exact-argmin mechanism on a pair
(the supremum of the loss) and the best ratio an interval event can show, with no sampling.
Used by docs/diffprivlib.md and scripts/jacobian_audit.py; it models diffprivlib's mechanism with
an exact solver (diffprivlib's L-BFGS stops at a gradient tolerance).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .calibration import Calibration


def _b_and_slope(w: np.ndarray, x: np.ndarray, y: np.ndarray, ridge: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    m = np.outer(w, y * x)                       # margins, shape (len(w), n)
    dphi = -expit(-m)                            # φ'(m)
    ddphi = expit(m) * expit(-m)                 # φ''(m)
    b = -(dphi @ (y * x) + ridge * w)
    slope = ddphi @ (x * x) + ridge              # −b′(w) > 0
    return b, slope


def log_density(w: np.ndarray, x: np.ndarray, y: np.ndarray, cal: Calibration) -> np.ndarray:
    """log dens(w) of the exact-argmin release on rows (x, y) under ``cal`` (p = 1)."""
    b, slope = _b_and_slope(np.asarray(w, float), np.asarray(x, float), np.asarray(y, float),
                            cal.total_ridge)
    s = cal.noise_scale
    return -np.abs(b) / s - np.log(2 * s) + np.log(slope)


def cdf(t: np.ndarray, x: np.ndarray, y: np.ndarray, cal: Calibration) -> np.ndarray:
    """P(w ≤ t) = P(b ≥ b(t)) for Laplace b of scale s."""
    b, _ = _b_and_slope(np.asarray(t, float), np.asarray(x, float), np.asarray(y, float),
                        cal.total_ridge)
    s = cal.noise_scale
    return np.where(b >= 0, 0.5 * np.exp(-np.abs(b) / s), 1.0 - 0.5 * np.exp(-np.abs(b) / s))


def privacy_loss(w: np.ndarray, d0: tuple, d1: tuple, cal: Calibration) -> np.ndarray:
    """log dens_D(w) − log dens_D′(w); ``d0``/``d1`` are (x, y) arrays of the two datasets."""
    return log_density(w, *d0, cal) - log_density(w, *d1, cal)


def true_epsilon(d0: tuple, d1: tuple, cal: Calibration, grid: np.ndarray | None = None
                 ) -> tuple[float, float]:
    """(sup over w of |privacy loss|, the w where it is attained), on a fine grid."""
    w = np.linspace(-60, 60, 240001) if grid is None else grid
    loss = privacy_loss(w, d0, d1, cal)
    both = np.maximum(loss, -loss)
    k = int(np.argmax(both))
    return float(both[k]), float(w[k])


def best_interval(d0: tuple, d1: tuple, cal: Calibration, lo: float = -2.0, hi: float = 2.0,
                  points: int = 801, min_prob: float = 1e-3) -> dict:
    """The interval (t1, t2] maximising log P_D/P_D′ (either direction) among intervals with
    probability ≥ ``min_prob`` under the denominator: what an interval event can show."""
    t = np.linspace(lo, hi, points)
    c0, c1 = cdf(t, *d0, cal), cdf(t, *d1, cal)
    p0 = c0[None, :] - c0[:, None]
    p1 = c1[None, :] - c1[:, None]
    best = {"log_ratio": -np.inf}
    for num, den, which in ((p0, p1, "D"), (p1, p0, "D'")):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where((den >= min_prob) & (num > 0), np.log(num / den), -np.inf)
        i, j = np.unravel_index(int(np.argmax(r)), r.shape)
        if r[i, j] > best["log_ratio"]:
            best = {"log_ratio": float(r[i, j]), "interval": (float(t[i]), float(t[j])),
                    "numerator": which, "p_num": float(num[i, j]), "p_den": float(den[i, j])}
    return best
