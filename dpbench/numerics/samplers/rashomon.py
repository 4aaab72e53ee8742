"""Exact Rashomon-set sampler for isotropic quadratics, and the hit-rate / uniformity diagnostics.

Ganesh, Thakurta, Upadhyay, "Differentially Private Sampling from Rashomon Sets, and the
Universality of Langevin Diffusion for Convex Optimization": the thresholded Gibbs law
π_{β,ψ} ∝ exp(−β·max{𝓛(θ; D), 𝓛* + ψ})·1_C (Definition 1.4; A0.2 and A6 in docs/langevin.md,
"Mechanism labels"). For 𝓛(θ) − 𝓛* = (m/2)‖θ − c‖² (F1, m = 1) the law is radial around c:
θ = c + r·u, u uniform on the sphere, and the radius has density ∝ r^{p−1}e^{−β·max{m r²/2, ψ}}.
With s = √m·r this is the m = 1 law, so everything below is written for m = 1 and rescaled.

Mixture representation ([derived]; docs/langevin.md, "The Rashomon law on F1", with the reference
values it was validated against):

* mass inside G = B(c, √(2ψ)): w_in = e^{−βψ}(2ψ)^{p/2}/p;
* mass outside: w_out = ½(2/β)^{p/2}Γ(p/2)Q(p/2, βψ), Q the regularised upper incomplete gamma;
* inside, r = √(2ψ)·U^{1/p} (uniform in the ball: the density is constant on G);
* outside, r = √(2G/β) with G ~ Gamma(p/2) truncated to [βψ, ∞) (inverse CDF, ``gammainccinv``).

A constraint C is handled by rejection (exact: the target is the restriction to C); the sampler's
``draw.many(rng, size)`` draws many samples at once by the same rejection
(:mod:`dpbench.numerics.samplers.rejection`). The hit rate
Pr[θ ∈ G] and the uniformity inside G ((r/√(2ψ))^p ~ U[0, 1] given θ ∈ G) are measured by
:func:`rashomon_diagnostics` (A6; experiment E10), against the [derived] Markov bound 1 − 2p/√(βψ)
of Theorem B.6.

:func:`rashomon_beta_star_1d` computes the exact privacy curve of the 1-D Rashomon Gibbs law by
quadrature (the β* table of the same docs section): β*(ψ) ≈ εn/√(2ψ) for ψ ≫ 1/n², not the paper's
β ∝ 1/ψ (docs/langevin.md Errata 19).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats
from scipy.special import gammainc, gammaincc, gammainccinv, gammaln

from ...core.sets import Ball, BallAt, ConstraintSet
from .rejection import fill_accepted

__all__ = ["rashomon_log_weights", "inside_weight", "expected_excess", "sample_rashomon_radius",
           "rashomon_radial_sampler", "RashomonDiagnostics", "rashomon_diagnostics",
           "hit_rate_bound", "radial_excess_cdf",
           "rashomon_hockey_stick_1d", "rashomon_beta_star_1d"]

#: Proposals a rejection sampler may draw for one sample before it gives up.
MAX_PROPOSALS = 10_000_000
_BATCH = 256


def _check(p: int, beta: float, psi: float) -> None:
    if p < 1 or not (beta > 0 and math.isfinite(beta)) or not (psi >= 0 and math.isfinite(psi)):
        raise ValueError(f"Rashomon sampler: need p >= 1, beta > 0, psi >= 0; got {p}, {beta}, {psi}")


def rashomon_log_weights(p: int, beta: float, psi: float) -> tuple[float, float]:
    """(log w_in, log w_out) of the radial mixture (docs/langevin.md), up to a common constant."""
    _check(p, beta, psi)
    log_in = (-beta * psi + 0.5 * p * math.log(2.0 * psi) - math.log(p)) if psi > 0 else -math.inf
    q = float(gammaincc(0.5 * p, beta * psi))
    log_out = (math.log(0.5) + 0.5 * p * math.log(2.0 / beta) + float(gammaln(0.5 * p))
               + (math.log(q) if q > 0 else -math.inf))
    return log_in, log_out


def inside_weight(p: int, beta: float, psi: float) -> float:
    """Pr[θ ∈ G] for the unconstrained law: w_in/(w_in + w_out) (0.530251 at p=5, β=200, ψ=0.02)."""
    log_in, log_out = rashomon_log_weights(p, beta, psi)
    if log_in == -math.inf:
        return 0.0
    if log_out == -math.inf:
        return 1.0
    return 1.0 / (1.0 + math.exp(log_out - log_in))


def expected_excess(p: int, beta: float, psi: float, m: float = 1.0) -> float:
    """E[𝓛(θ) − 𝓛*] under the unconstrained law (reference value 0.02008 at p=5, β=200, ψ=0.02).

    Inside G, 𝓛 − 𝓛* = ψ·U^{2/p} has mean ψp/(p+2); outside it is G/β with G ~ Gamma(p/2) given
    G ≥ βψ, of mean (p/2)·Q(p/2 + 1, βψ)/Q(p/2, βψ). (m does not enter: 𝓛 − 𝓛* = s²/2 with s = √m·r.)
    """
    w = inside_weight(p, beta, psi)
    x = beta * psi
    q = float(gammaincc(0.5 * p, x))
    out_mean = (0.5 * p * float(gammaincc(0.5 * p + 1.0, x)) / q / beta) if q > 0 else psi
    return w * psi * p / (p + 2.0) + (1.0 - w) * out_mean


def sample_rashomon_radius(rng: np.random.Generator, p: int, beta: float, psi: float,
                           size: int, m: float = 1.0) -> np.ndarray:
    """``size`` exact draws of r with density ∝ r^{p−1}exp(−β·max{m r²/2, ψ}) on r ≥ 0."""
    _check(p, beta, psi)
    w = inside_weight(p, beta, psi)
    inside = rng.random(size) < w
    u = rng.random(size)
    out = np.empty(size)
    out[inside] = math.sqrt(2.0 * psi) * u[inside] ** (1.0 / p)
    x = beta * psi
    # G ~ Gamma(p/2) on [x, ∞): Q(p/2, G) = V·Q(p/2, x) with V ~ U(0, 1]; for small x the lower
    # tail form P(p/2, G) = P(x) + V·(1 − P(x)) is the better-conditioned inverse.
    v = 1.0 - u[~inside]
    q = float(gammaincc(0.5 * p, x))
    g = gammainccinv(0.5 * p, v * q)
    g = np.maximum(g, x)
    out[~inside] = np.sqrt(2.0 * g / beta)
    return out / math.sqrt(m)


def rashomon_radial_sampler(center: np.ndarray, beta: float, psi: float,
                            region: ConstraintSet | None = None, m: float = 1.0
                            ) -> Callable[[np.random.Generator], np.ndarray]:
    """Exact sampler of ∝ exp(−β·max{(m/2)‖θ − c‖², ψ}) on ``region`` (rejection; None = R^p).

    Valid as the Rashomon Gibbs law π_{β,ψ} when 𝓛 − 𝓛* = (m/2)‖θ − c‖² on C, i.e. the
    unconstrained minimiser c lies in C (F1 in docs/langevin.md). Raises ``RuntimeError`` after
    :data:`MAX_PROPOSALS` rejected proposals (a region of negligible mass).

    ``draw.many(rng, size)`` returns ``size`` independent draws by the better of two exact
    rejection schemes (only the running time differs): the single draw's (propose the
    unconstrained law, accept inside ``region``; acceptance Z_region/Z) or, when ``region`` is a
    ball B, uniform proposals on B accepted with probability exp(−β(max{(m/2)‖θ − c‖², ψ} − ψ))
    ≤ 1 (acceptance Z_region/(vol(B)·e^{−βψ})). The ratio of the two does not depend on
    Z_region, so the larger one is picked exactly: the uniform scheme wins when the law is much
    wider than B (small β: with radial proposals almost every one would fall outside C).
    """
    center = np.asarray(center, dtype=float)
    p = center.shape[0]
    _check(p, beta, psi)
    use_uniform = False
    if isinstance(region, (Ball, BallAt)):
        log_in, log_out = rashomon_log_weights(p, beta, psi)
        # Z = |S^{p−1}|·(w_in + w_out)·m^{−p/2}, |S^{p−1}| = 2π^{p/2}/Γ(p/2)
        log_z = (math.log(2.0) + 0.5 * p * math.log(math.pi) - float(gammaln(0.5 * p))
                 + float(np.logaddexp(log_in, log_out)) - 0.5 * p * math.log(m))
        log_ball = (0.5 * p * math.log(math.pi) + p * math.log(region.radius)
                    - float(gammaln(0.5 * p + 1.0)))
        use_uniform = log_ball - beta * psi < log_z

    def proposals(rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` draws of the unconstrained law: the radii, then the directions' normals."""
        r = sample_rashomon_radius(rng, p, beta, psi, count, m)
        g = rng.standard_normal((count, p))
        g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), np.finfo(float).tiny)
        return center + r[:, None] * g

    def draw(rng: np.random.Generator) -> np.ndarray:
        batch, proposed = 1, 0
        while proposed < MAX_PROPOSALS:  # batches 1, 4, 16, ..., 256: cheap when C barely cuts
            pts = proposals(rng, batch)
            if region is None:
                return pts[0].copy()
            ok = np.flatnonzero(np.asarray(region.contains(pts), dtype=bool))
            if ok.size:
                return pts[ok[0]].copy()
            proposed += batch
            batch = min(4 * batch, _BATCH)
        raise RuntimeError(f"rashomon_radial_sampler: no acceptance in {MAX_PROPOSALS} proposals")

    def uniform_proposals(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Uniform points of the ball ``region`` and their density test."""
        g = rng.standard_normal((count, p))
        g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), np.finfo(float).tiny)
        pts = region.center(p) + region.radius * g * rng.random((count, 1)) ** (1.0 / p)  # type: ignore[union-attr]
        d = pts - center
        excess = np.maximum(0.5 * m * np.einsum("ij,ij->i", d, d) - psi, 0.0)
        return pts, rng.random(count) < np.exp(-beta * excess)

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        def propose(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
            if use_uniform:
                pts, keep = uniform_proposals(rng, count)
            else:
                pts, keep = proposals(rng, count), np.ones(count, dtype=bool)
            if region is None:
                return pts, keep
            return pts, keep & np.asarray(region.contains(pts), dtype=bool)

        return fill_accepted(propose, rng, size, max_proposals=MAX_PROPOSALS,
                             what="rashomon_radial_sampler")

    draw.proposal = "radial mixture + rejection"  # type: ignore[attr-defined]
    draw.many = many  # type: ignore[attr-defined]
    return draw


def hit_rate_bound(p: int, beta: float, psi: float) -> float:
    """The [derived] Markov form of Theorem B.6: Pr[θ ∈ G] ≥ 1 − 2p/√(βψ) (A6, docs/langevin.md)."""
    return 1.0 - 2.0 * p / math.sqrt(beta * psi)


@dataclass(frozen=True)
class RashomonDiagnostics:
    """Hit rate of G and uniformity inside it, over a batch of draws."""

    draws: int
    hit_rate: float
    hit_rate_se: float
    hit_bound: float
    ks_pvalue: float
    inside_draws: int


def rashomon_diagnostics(in_rashomon: np.ndarray, radius: np.ndarray, p: int,
                         beta: float = math.nan, psi: float = math.nan) -> RashomonDiagnostics:
    """Hit rate Pr[θ ∈ G] (with its binomial standard error) and the KS p-value of
    ``radius**p`` ~ U[0, 1] over the draws inside G (docs/langevin.md; experiment E10).

    ``radius`` is the normalised radius ‖θ − θ*‖/√(2ψ/m) (``Release.info["rashomon_radius"]``):
    uniform on the ball G ⇔ radius^p uniform on [0, 1]. The exact sampler makes the KS p-value
    U[0, 1]; MCMC samplers may not. ``hit_bound`` is 1 − 2p/√(βψ) (NaN without β, ψ).
    """
    flags = np.asarray(in_rashomon, dtype=bool)
    rad = np.asarray(radius, dtype=float)
    k = flags.size
    hit = float(flags.mean()) if k else math.nan
    se = math.sqrt(hit * (1 - hit) / k) if k else math.nan
    inner = rad[flags] ** p
    ks = float(stats.kstest(inner, "uniform").pvalue) if inner.size >= 2 else math.nan
    bound = hit_rate_bound(p, beta, psi) if beta > 0 and psi > 0 else math.nan
    return RashomonDiagnostics(k, hit, se, bound, ks, int(inner.size))


def radial_excess_cdf(s: np.ndarray | float, p: int, beta: float, psi: float) -> np.ndarray:
    """Pr[𝓛 − 𝓛* ≤ s] under the unconstrained law (vectorised; used by distribution tests)."""
    s = np.asarray(s, dtype=float)
    w = inside_weight(p, beta, psi)
    x = beta * psi
    q = float(gammaincc(0.5 * p, x))
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = w * np.clip(s / psi, 0.0, 1.0) ** (0.5 * p) if psi > 0 else np.zeros_like(s)
        tail = (gammainc(0.5 * p, beta * np.maximum(s, psi)) - gammainc(0.5 * p, x)) / q
    return np.where(s < psi, inner, w + (1.0 - w) * tail)


def rashomon_hockey_stick_1d(beta: float, psi: float, shift: float, epsilon: float) -> float:
    """δ(ε) between the 1-D Rashomon Gibbs laws of neighbours whose means differ by ``shift``
    (unconstrained, m = 1; docs/langevin.md, "The Rashomon law on F1"), by quadrature:

    δ(ε) = E_{θ∼π_D}[(1 − e^{ε − Λ(θ)})₊],  Λ(θ) = β[max{½(θ − s)², ψ} − max{½θ², ψ}]

    (the normalisers are equal by translation invariance; the pair is symmetric under θ ↦ s − θ,
    so one direction suffices)."""
    from scipy import integrate

    a = math.sqrt(2.0 * psi)

    def f(t: float) -> float:
        return max(0.5 * t * t, psi)

    def weight(t: float) -> float:
        return math.exp(-beta * (f(t) - psi))

    def loss_part(t: float) -> float:
        lam = beta * (f(t - shift) - f(t))
        return weight(t) * max(0.0, -math.expm1(epsilon - lam)) if lam > epsilon else 0.0

    span = a + abs(shift) + 40.0 / math.sqrt(beta)
    pts = sorted({-a, a, shift - a, shift + a, 0.0, shift})
    opts = {"points": pts, "limit": 400, "epsabs": 0.0, "epsrel": 1e-10}
    z = integrate.quad(weight, -span, span, **opts)[0]
    num = integrate.quad(loss_part, -span, span, **opts)[0]
    return num / z


def rashomon_beta_star_1d(psi: float, shift: float, epsilon: float, delta: float) -> float:
    """The largest β with :func:`rashomon_hockey_stick_1d` ≤ δ (the β* table of docs/langevin.md):
    root of the increasing map β ↦ δ(ε) by Brent's method on log β."""
    from scipy.optimize import brentq

    def gap(log_beta: float) -> float:
        return math.log(rashomon_hockey_stick_1d(math.exp(log_beta), psi, shift, epsilon)
                        + 1e-300) - math.log(delta)

    lo, hi = math.log(1e-2 / shift), math.log(1e3 / shift ** 2)
    return math.exp(brentq(gap, lo, hi, xtol=1e-10))
