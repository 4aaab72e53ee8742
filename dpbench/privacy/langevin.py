"""Privacy of the Langevin diffusion path and the β calibrations of Ganesh–Thakurta–Upadhyay.

Ganesh, Thakurta, Upadhyay, "Differentially Private Sampling from Rashomon Sets, and the
Universality of Langevin Diffusion for Convex Optimization" (GTU). The labels A0.5, A2, A5 and the
errata numbers below refer to docs/langevin.md ("Mechanism labels", "Errata"); the β calibrations
reproduce its "Worked calibration" table.

* Path accountant (GTU Lemma 2.2 / Lemma 3.1): the (projected) Langevin diffusion
  dθ = −β∇ℒ(θ; D)dt + √2 dW run for time t — and every discretisation of it with Tη = t (A2: each
  step is a Gaussian mechanism) — has Rényi divergence R_α ≤ α·ρ with ρ = β²Δ²t/4
  (:func:`ld_rdp_slope`), and is μ-GDP with μ = βΔ√(t/2) (:func:`ld_gdp_mu`). Δ is the gradient
  sensitivity sup_θ‖∇ℒ_D − ∇ℒ_D′‖ = 2L/n for replace-one neighbours (Errata 2; the T2.3 proof
  uses L/n). Privacy needs no convexity and covers the whole trajectory on [0, t].
* RDP → (ε, δ) (A0.5): ε = ρ + 2√(ρ log 1/δ) (:func:`rdp_epsilon`), inverted by
  ρ* = (√(log 1/δ + ε) − √(log 1/δ))² (:func:`rho_star`). Lemma 3.1 *as printed*
  (β ≤ 2ε/(Δ√(t log 1/δ))) is ≈ 2× optimistic (Errata 1): :func:`lemma31_epsilon` evaluates it
  only to record the paper-literal claim.
* Mixing (GTU Lemma B.5, Errata 8: the log term uses 4): t_mix = e/(2βm)·Λ with
  Λ = log(4βL‖C‖/δ²) (:func:`mixing_time`, ψ = 0).
* β calibrations (the worked-calibration table is p/β for each): :func:`beta_a5_literal`
  (T2.3's fixed point with the printed constants), :func:`beta_a5_tight` (T2.3 with Δ = 2L/n and
  the exact RDP conversion), :func:`beta_a4_literal` (T2.7's proof constants), :func:`beta_a4_tight`
  (Errata 12: ε = 4ρ′ + 2√(2ρ′ log 1/δ), ρ′ = βL²/(mn²)), and the exact-GDP path calibrations
  :func:`beta_max_gdp` (largest β for a fixed horizon t) and :func:`beta_path_gdp` (the fixed point
  of β with t = c·t_mix(β)), which reuse :func:`dpbench.privacy.gaussian.gdp_mu`.

All ‖C‖ are diameters; L is the Lipschitz constant used for calibration (public, declared).
"""

from __future__ import annotations

import math

from scipy.optimize import brentq

from .gaussian import gdp_epsilon, gdp_mu

__all__ = ["ld_rdp_slope", "ld_gdp_mu", "rdp_epsilon", "rho_star", "mixing_log", "mixing_time",
           "beta_a5_literal", "beta_a5_tight", "beta_a4_literal", "beta_a4_tight",
           "beta_max_gdp", "beta_path_gdp", "beta_path_lemma31", "lemma31_epsilon",
           "path_gdp_epsilon", "pure_gibbs_beta"]


# --- the path accountant ---------------------------------------------------------------------------
def ld_rdp_slope(beta: float, Delta: float, t: float) -> float:
    """ρ = β²Δ²t/4: the LD path on [0, t] is (α, αρ)-RDP for every α > 1 (GTU Lemma 2.2, A0.5)."""
    return beta * beta * Delta * Delta * t / 4.0


def ld_gdp_mu(beta: float, Delta: float, t: float) -> float:
    """μ = βΔ√(t/2): the LD path (or its discretisation with Tη = t) is μ-GDP (A0.5 in
    docs/langevin.md, [derived]: T Gaussian steps of sensitivity ηβΔ and noise √(2η) compose to
    √T·βΔ√(η/2))."""
    return beta * Delta * math.sqrt(t / 2.0)


def rdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) = min_α [αρ + log(1/δ)/(α−1)] = ρ + 2√(ρ log 1/δ) (GTU Fact A.4; [derived], A0.5)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def rho_star(epsilon: float, delta: float) -> float:
    """The largest ρ with :func:`rdp_epsilon` (ρ, δ) ≤ ε: (√(log 1/δ + ε) − √(log 1/δ))² (A0.5)."""
    lg = math.log(1.0 / delta)
    # cancellation-free form of (√(lg + ε) − √lg)²
    return (epsilon / (math.sqrt(lg + epsilon) + math.sqrt(lg))) ** 2


def path_gdp_epsilon(beta: float, Delta: float, t: float, delta: float) -> float:
    """The exact ε at δ of the μ-GDP path, μ = :func:`ld_gdp_mu` (Dong–Roth–Su via
    :func:`dpbench.privacy.gaussian.gdp_epsilon`)."""
    return gdp_epsilon(ld_gdp_mu(beta, Delta, t), delta)


def lemma31_epsilon(beta: float, Delta_paper: float, t: float, delta: float) -> float:
    """The ε GTU Lemma 3.1 *as printed* claims for β, t: β = 2ε/(Δ′√(t log 1/δ)) solved for ε.

    Errata 1 (≈ 2× optimistic) and, with Δ′ = L/n, Errata 2 (another 2×): recorded only as the
    paper-literal claim, never certified."""
    return beta * Delta_paper * math.sqrt(t * math.log(1.0 / delta)) / 2.0


# --- mixing ----------------------------------------------------------------------------------------
def mixing_log(beta: float, L: float, C: float, delta: float) -> float:
    """Λ = log(4βL‖C‖/δ²) (GTU Lemma B.5 proof; Errata 8: the statement prints 2)."""
    return math.log(4.0 * beta * L * C / (delta * delta))


def mixing_time(beta: float, m: float, L: float, C: float, delta: float) -> float:
    """t_mix = e/(2βm)·Λ: TV(θ_t, Gibbs) ≤ δ/2 from θ₀ ~ Unif(C), ψ = 0 (GTU Lemma B.5; A1.7)."""
    return math.e / (2.0 * beta * m) * mixing_log(beta, L, C, delta)


def _fixed_point(K: float, L: float, C: float, delta: float) -> float:
    """The root of β = K/Λ(β) with Λ = :func:`mixing_log` (unique: the right side decreases)."""
    lo = math.e ** 2 * delta * delta / (4.0 * L * C)  # Λ(lo) = 2
    if K / mixing_log(lo, L, C, delta) <= lo:
        return lo
    hi = max(2.0 * lo, K)
    while hi - K / mixing_log(hi, L, C, delta) <= 0:
        hi *= 2.0
    return float(brentq(lambda b: b - K / mixing_log(b, L, C, delta), lo, hi,
                        xtol=1e-300, rtol=1e-15, maxiter=500))


# --- β calibrations (docs/langevin.md, "Worked calibration") --------------------------------------
def beta_a5_literal(epsilon: float, delta: float, n: int, L: float, C: float, m: float,
                    M: float = 1.0, psi: float = 0.0) -> float:
    """T2.3 as printed (A5; GTU eqs. 16–17): β = ε²m/(36e·Δ′²·Λ(β)·log 1/δ) with
    Δ′² = max(L²/n², Mψ/2) — the paper's constants, fixed point in β."""
    D2 = max(L * L / (n * n), M * psi / 2.0)
    K = epsilon ** 2 * m / (36.0 * math.e * D2 * math.log(1.0 / delta))
    return _fixed_point(K, L, C, delta)


def beta_a5_tight(epsilon: float, delta: float, n: int, L: float, C: float, m: float) -> float:
    """A5 with tight RDP accounting (ψ = 0, Δ = 2L/n): β = 8mρ*/(eΔ²Λ(β)), i.e. ρ(β, Δ, t_mix(β))
    = ρ*(ε, δ) (A5, [derived])."""
    Delta = 2.0 * L / n
    K = 8.0 * m * rho_star(epsilon, delta) / (math.e * Delta * Delta)
    return _fixed_point(K, L, C, delta)


def beta_a4_literal(epsilon: float, delta: float, n: int, L: float, m: float) -> float:
    """T2.7 with its proof constants (ψ = 0, A4; Errata 12):
    min(ε²mn²/(72L² log 1/δ), εmn²/(72√2 L²))."""
    return min(epsilon ** 2 * m * n * n / (72.0 * L * L * math.log(1.0 / delta)),
               epsilon * m * n * n / (72.0 * math.sqrt(2.0) * L * L))


def beta_a4_tight(epsilon: float, delta: float, n: int, L: float, m: float) -> float:
    """T2.7 tightened (Errata 12, ψ = 0): the β with ε = 4ρ′ + 2√(2ρ′ log 1/δ), ρ′ = βL²/(mn²)
    (the positive root in x = √ρ′ of 4x² + 2√(2 lg)·x − ε = 0)."""
    lg = math.log(1.0 / delta)
    x = 2.0 * epsilon / (2.0 * math.sqrt(2.0 * lg) + math.sqrt(8.0 * lg + 16.0 * epsilon))
    return x * x * m * n * n / (L * L)


def pure_gibbs_beta(epsilon: float, n: int, L: float, C: float) -> float:
    """The ε-DP Gibbs β = εn/(2L‖C‖) (GTU Algorithm 2 / T2.1; first column of the worked
    calibration)."""
    return epsilon * n / (2.0 * L * C)


def beta_max_gdp(epsilon: float, delta: float, Delta: float, t: float) -> float:
    """The largest β whose path on [0, t] is (ε, δ)-DP by the exact GDP curve:
    μ(ε, δ)/(Δ√(t/2)) with μ = :func:`dpbench.privacy.gaussian.gdp_mu` (A0.5, tight)."""
    return gdp_mu(epsilon, delta) / (Delta * math.sqrt(t / 2.0))


def beta_path_gdp(epsilon: float, delta: float, Delta: float, m: float, L: float, C: float,
                  horizon: float = 1.0) -> float:
    """The β whose path up to t = horizon·t_mix(β) is exactly μ-GDP with μ = gdp_mu(ε, δ).

    μ² = β²Δ²t/2 = βΔ²·horizon·eΛ(β)/(4m), so β = 4mμ²/(Δ²·horizon·e·Λ(β)) (fixed point). The
    result is nudged down until ld_gdp_mu(β, Δ, t) ≤ μ holds in floating point, so the ledger's ε
    never exceeds the target."""
    mu = gdp_mu(epsilon, delta)
    K = 4.0 * m * mu * mu / (Delta * Delta * horizon * math.e)
    beta = _fixed_point(K, L, C, delta)
    while ld_gdp_mu(beta, Delta, horizon * mixing_time(beta, m, L, C, delta)) > mu:
        beta = math.nextafter(beta, 0.0)
    return beta


def beta_path_lemma31(epsilon: float, delta: float, Delta_paper: float, m: float, L: float,
                      C: float, horizon: float = 1.0) -> float:
    """GTU Lemma 3.1 as printed with t = horizon·t_mix(β): β = 2ε/(Δ′√(t log 1/δ)), i.e.
    β = 8mε²/(Δ′²·horizon·e·Λ(β)·log 1/δ). Paper-literal (Errata 1, 2): not a certified bound."""
    K = 8.0 * m * epsilon ** 2 / (Delta_paper ** 2 * horizon * math.e * math.log(1.0 / delta))
    return _fixed_point(K, L, C, delta)
