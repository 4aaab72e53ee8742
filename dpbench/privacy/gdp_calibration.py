"""Calibration of the regularized exponential mechanism (REM) of Gopi, Lee and Liu (COLT 2022).

GLL'22 Lemma 26 (closed-form calibration), Theorems 25/27 (A1, ERM), 28/29 (A2, SCO) and the
"moreover" parts (A3, already strongly convex losses). The mode labels A1–A3, the errata and
pitfall numbers and the reference numbers the tests use are in docs/rem.md ("The mechanism",
"Errata", "Pitfalls", "Reference values").

REM samples π ∝ exp(−k·F(x; D) − (kμ/2)‖x − c‖²) on K (F the AVERAGE loss). By GLL'22 Thm 4/13
and Cor. 14 it is γ-GDP with γ = G_diff·√k/(n·√μ) (Thm 25/28), G_diff the Lipschitz constant of
f(·; s) − f(·; s'). A γ-GDP mechanism is (ε, δ(ε))-DP with the Gaussian curve
δ(ε) = Φ(−ε/γ + γ/2) − e^ε Φ(−ε/γ − γ/2) (:func:`dpbench.privacy.gaussian.gdp_delta`).

Two calibration modes (docs/rem.md pitfall P6; every cell records which):

* ``exact``: γ = s* = the largest s with δ_Gauss(ε, s) ≤ δ_mech, by root-finding
  (:func:`s_exact` = :func:`dpbench.privacy.gaussian.gdp_mu`);
* ``paper``: the paper's closed forms, i.e. Lemma 26 with the corrected parentheses (docs/rem.md
  Errata 2): s ≤ √(2 log(1/(2δ)) + 2ε) − √(2 log(1/(2δ))) (:func:`s_lemma26`); with δ_mech = 2δ/3
  this is √2·A, A = √(log(3/(4δ)) + ε) − √(log(3/(4δ))) of A1/A2.

Either way the release is *certified* with the exact Gaussian curve at the γ actually used.
The sampler's TV error τ costs (1 + e^ε)·τ in δ, not τ (docs/rem.md Errata 3, pitfall P1:
:func:`tv_to_dp`).

Lipschitz constants are carried separately (pitfall P5): ``g_diff`` (privacy and generalisation)
and ``g_f`` (the sampler's G_s = k·G_f). The problem contract declares one constant L (every
f(·; s) is L-Lipschitz), so callers use G_f = L and G_diff = 2L (f(·; s) − f(·; s′) is then
2L-Lipschitz, and |x − s| or ⟨x, s⟩ attain the 2).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

from .gaussian import gdp_delta, gdp_mu

MODES = ("erm", "sco", "strongly_convex")
CALIBRATIONS = ("exact", "paper")


@functools.lru_cache(maxsize=4096)
def s_exact(epsilon: float, delta: float) -> float:
    """The largest s with δ(N(0,1)‖N(s,1))(ε) ≤ δ (the Balle–Wang Gaussian curve), by root-finding
    (reuses :func:`dpbench.privacy.gaussian.gdp_mu`; cached: every cell of a sweep asks it)."""
    return gdp_mu(epsilon, delta)


def s_lemma26(epsilon: float, delta: float) -> float:
    """GLL'22 Lemma 26 with the parentheses of its proof (docs/rem.md Errata 2), δ < 1/2:
    s = √(2 log(1/(2δ)) + 2ε) − √(2 log(1/(2δ))), computed without cancellation."""
    if not 0 < delta < 0.5:
        raise ValueError(f"Lemma 26 needs 0 < delta < 1/2, got {delta!r}")
    t = 2.0 * math.log(1.0 / (2.0 * delta))
    return 2.0 * epsilon / (math.sqrt(t + 2.0 * epsilon) + math.sqrt(t))


def paper_a(epsilon: float, delta: float) -> float:
    """A = √(log(3/(4δ)) + ε) − √(log(3/(4δ))) (the calibration of Thms 27/29; natural logs,
    pitfall P12)."""
    lg = math.log(3.0 / (4.0 * delta))
    return epsilon / (math.sqrt(lg + epsilon) + math.sqrt(lg))


def tv_to_dp(epsilon: float, delta_mech: float, tau: float) -> float:
    """δ of a sampler within TV τ of an (ε, δ_mech)-DP target: δ_mech + (1 + e^ε)·τ
    (docs/rem.md Errata 3, pitfall P1; the paper's δ_mech + τ is wrong)."""
    return delta_mech + (1.0 + math.exp(epsilon)) * tau


def tv_budget(epsilon: float, delta: float) -> float:
    """The TV accuracy τ a sampler may have when δ/3 is reserved for it: δ/(3(1 + e^ε))."""
    return delta / (3.0 * (1.0 + math.exp(epsilon)))


@dataclass(frozen=True)
class RemCalibration:
    """REM's parameters and the privacy and utility figures they imply.

    ``k``: inverse temperature on the average loss; ``mu``: the regulariser's modulus (0 for the
    strongly convex EM, A3, whose modulus ``lam`` is the loss's own); ``gamma``: the GDP parameter
    G_diff·√k/(n·√(μ + λ)); ``delta_mech``: δ the exact mechanism spends at ε, δ_Gauss(ε, γ);
    ``bound``: the theorem's excess bound (empirical for erm / strongly_convex, population for
    sco), average scale; ``sampler_ratio``: G_s²/μ_s = k·G_f²/(μ + λ), the sampler's condition
    number (query complexity ∝ it, GLL'22 Thm 17).
    """

    mode: str
    calibration: str
    n: int
    d: int
    epsilon: float
    delta: float
    s: float
    k: float
    mu: float
    lam: float
    gamma: float
    delta_mech: float
    bound: float
    sampler_ratio: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _s_target(epsilon: float, delta_mech: float, calibration: str) -> float:
    if calibration == "exact":
        return s_exact(epsilon, delta_mech)
    if calibration == "paper":
        return s_lemma26(epsilon, delta_mech)
    raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")


def _erm(s: float, n: int, d: int, g: float, diam: float) -> tuple[float, float, float, float]:
    """A1 (Thm 25/27) written with s = γ: μ = √(2d)·G/(s n D), k = s n √(2d)/(G D), so
    k·μ = 2d/D² and d/k + μD²/2 = √2·G D √d/(s n). Paper mode (s = √2·A) gives the printed
    μ = G√d/(nDA), k = 2nA√d/(GD), bound GD√d/(nA)."""
    mu = math.sqrt(2.0 * d) * g / (s * n * diam)
    k = s * n * math.sqrt(2.0 * d) / (g * diam)
    return mu, k, 0.0, d / k + mu * diam ** 2 / 2.0


def _sco(s: float, n: int, d: int, g: float, diam: float, calibration: str,
         epsilon: float, delta: float) -> tuple[float, float, float, float]:
    """A2 (Thm 28/29). Paper: μ = (G/D)√(2(2Ld/(ε²n²) + 1/(2n))), k = (μ/G²)min{ε²n²/(2L), 2nd},
    L = log(3/(4δ)). Exact ([derived] equivalent form, docs/rem.md "Reference values"):
    B = max{d/(s²n²), 1/(2n)}, μ = (G/D)√(2(B + 1/n)), k = (μ/G²)min{s²n², 2nd}. Bound
    d/k + μD²/2 + G²/(μn) (Thm 28 with the G² of docs/rem.md Errata 1)."""
    if calibration == "paper":
        lg = math.log(3.0 / (4.0 * delta))
        mu = (g / diam) * math.sqrt(2.0 * (2.0 * lg * d / (epsilon * n) ** 2 + 1.0 / (2.0 * n)))
        k = (mu / g ** 2) * min((epsilon * n) ** 2 / (2.0 * lg), 2.0 * n * d)
    else:
        b = max(d / (s * n) ** 2, 1.0 / (2.0 * n))
        mu = (g / diam) * math.sqrt(2.0 * (b + 1.0 / n))
        k = (mu / g ** 2) * min((s * n) ** 2, 2.0 * n * d)
    return mu, k, 0.0, d / k + mu * diam ** 2 / 2.0 + g ** 2 / (mu * n)


def _strongly_convex(s: float, n: int, d: int, g: float, lam: float) -> tuple[float, float, float,
                                                                                float]:
    """A3 (Thm 25/28 "moreover"): no regulariser, k = s² n² λ/G², empirical excess ≤ d/k."""
    k = (s * n) ** 2 * lam / g ** 2
    return 0.0, k, lam, d / k


def rem_calibration(mode: str, calibration: str, *, n: int, d: int, epsilon: float,
                    delta_mech: float, g_diff: float, g_f: float, diameter: float,
                    lam: float = 0.0, delta_total: float | None = None) -> RemCalibration:
    """The (μ, k) of REM for ``mode`` ∈ {erm, sco, strongly_convex} under ``calibration``
    ∈ {exact, paper}, from public quantities only (pitfall P2).

    ``delta_mech`` is the δ the exact mechanism may spend (the caller reserves the sampler's TV
    share); paper mode's closed forms are stated for δ_mech = 2δ/3 (Thms 27/29), so pass
    ``delta_total`` = δ to evaluate them exactly as printed (log(3/(4δ))). ``lam``: the loss's
    own strong convexity (mode ``strongly_convex`` only; A3).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    delta = delta_total if delta_total is not None else 1.5 * delta_mech
    s = _s_target(epsilon, delta_mech, calibration)
    if mode == "erm":
        mu, k, lam_used, bound = _erm(s, n, d, g_diff, diameter)
    elif mode == "sco":
        mu, k, lam_used, bound = _sco(s, n, d, g_diff, diameter, calibration, epsilon, delta)
    else:
        if not lam > 0:
            raise ValueError("mode 'strongly_convex' needs the loss's strong convexity lam > 0")
        mu, k, lam_used, bound = _strongly_convex(s, n, d, g_diff, lam)
    gamma = g_diff * math.sqrt(k) / (n * math.sqrt(mu + lam_used))
    return RemCalibration(mode, calibration, n, d, float(epsilon), float(delta), s, k, mu,
                          lam_used, gamma, gdp_delta(gamma, epsilon), bound,
                          k * g_f ** 2 / (mu + lam_used))
