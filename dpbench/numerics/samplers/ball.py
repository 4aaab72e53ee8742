"""Exact exponential-mechanism samplers on balls (oracles O1 and O7 of docs/bst14.md).

* :func:`tilted_ball_sampler`: density ∝ exp(k⟨θ, s⟩) on the ball of radius R (LB-Lin, O1). The
  uniform law on the p-ball is the projection onto the first p coordinates of the uniform law on
  the sphere S^{p+1} ⊂ R^{p+2} (Archimedes' theorem in higher dimension), and the tilt only reads
  those coordinates; so θ/R is the first p coordinates of a von Mises–Fisher draw on S^{p+1}
  with mean direction (s/‖s‖, 0, 0) and concentration κ = k·R·‖s‖. The vMF draw uses Wood's
  (1994) rejection algorithm for the cosine W = ⟨x, μ⟩. Then R·M·(1 − W) is the sum-scale
  excess on LB-Lin and E[W] = I_{p/2+1}(κ)/I_{p/2}(κ) (the O1 Bessel formula).
* :func:`truncated_gaussian_sampler`: density ∝ exp(−(a/2)‖θ − q‖²) on an intersection of balls
  (LB-Quad with a = k·n, q the mean of the rows, O7 and localisation). Exact rejection sampling.

Both draw functions carry the vectorised forms of :mod:`dpbench.core.exact_samplers`:
``draw.many(rng, size)`` (the same rejection algorithms, many draws at once through
:mod:`dpbench.numerics.samplers.rejection`) and, for the truncated Gaussian,
``draw.many_at(rng, centers)`` (row i on the region with its balls centred at ``centers[i]``).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.special import gammaln

from .rejection import fill_accepted, first_accepted_rows

__all__ = ["wood_vmf_cosine", "wood_vmf_cosines", "sample_vmf", "sample_vmf_many",
           "tilted_ball_sampler", "truncated_gaussian_sampler", "MAX_PROPOSALS"]

#: Proposals a rejection sampler may draw for one sample before it gives up.
MAX_PROPOSALS = 10_000_000
_BATCH = 1024


def wood_vmf_cosine(m: int, kappa: float, rng: np.random.Generator) -> float:
    """W = ⟨x, μ⟩ for x ~ vMF(μ, κ) on S^{m−1} ⊂ R^m (Wood 1994, Simulation of the von
    Mises–Fisher distribution, Algorithm VM*), m ≥ 2, κ ≥ 0.

    W has density ∝ e^{κw}(1 − w²)^{(m−3)/2} on [−1, 1]; b is written in the cancellation-free
    form (m−1)/(2κ + √(4κ² + (m−1)²)).
    """
    d1, b, x0, c = _wood_constants(m, kappa)
    for _ in range(MAX_PROPOSALS):
        z = rng.beta(d1 / 2.0, d1 / 2.0)
        w = (1.0 - (1.0 + b) * z) / (1.0 - (1.0 - b) * z)
        u = rng.random()
        if u == 0.0 or kappa * w + d1 * math.log(1.0 - x0 * w) - c >= math.log(u):
            return w
    raise RuntimeError(f"wood_vmf_cosine: no acceptance in {MAX_PROPOSALS} proposals")


def _wood_constants(m: int, kappa: float) -> tuple[float, float, float, float]:
    """(m − 1, b, x₀, c) of Wood's algorithm VM* (:func:`wood_vmf_cosine`)."""
    if m < 2 or kappa < 0 or not math.isfinite(kappa):
        raise ValueError(f"wood_vmf_cosine: need m >= 2 and finite kappa >= 0, got {m}, {kappa}")
    d1 = m - 1.0
    b = d1 / (2.0 * kappa + math.sqrt(4.0 * kappa * kappa + d1 * d1))
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + d1 * math.log(1.0 - x0 * x0)
    return d1, b, x0, c


def wood_vmf_cosines(m: int, kappa: float, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` independent draws of :func:`wood_vmf_cosine`: the same rejection algorithm on
    batches of proposals (a Beta draw, then a uniform, per proposal;
    :func:`~dpbench.numerics.samplers.rejection.fill_accepted`)."""
    d1, b, x0, c = _wood_constants(m, kappa)

    def propose(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        z = rng.beta(d1 / 2.0, d1 / 2.0, size=count)
        w = (1.0 - (1.0 + b) * z) / (1.0 - (1.0 - b) * z)
        u = rng.random(count)
        with np.errstate(divide="ignore"):
            keep = (u == 0.0) | (kappa * w + d1 * np.log(1.0 - x0 * w) - c >= np.log(u))
        return w, keep

    return fill_accepted(propose, rng, size, max_proposals=MAX_PROPOSALS,
                         what="wood_vmf_cosines")


def sample_vmf(mu: np.ndarray, kappa: float, rng: np.random.Generator) -> np.ndarray:
    """x ~ vMF(μ, κ) on the unit sphere of R^m (μ a unit vector): W·μ + √(1 − W²)·v with v
    uniform on the unit sphere of μ's orthogonal complement."""
    mu = np.asarray(mu, dtype=float)
    w = wood_vmf_cosine(mu.shape[0], kappa, rng)
    v = rng.standard_normal(mu.shape[0])
    v -= v.dot(mu) * mu
    v /= np.linalg.norm(v)
    return w * mu + math.sqrt(max(0.0, 1.0 - w * w)) * v


def sample_vmf_many(mu: np.ndarray, kappa: float, rng: np.random.Generator,
                    size: int) -> np.ndarray:
    """``size`` independent draws of :func:`sample_vmf` (rows of a (size, m) array): all the
    cosines (:func:`wood_vmf_cosines`), then one normal vector per row for the direction."""
    mu = np.asarray(mu, dtype=float)
    w = wood_vmf_cosines(mu.shape[0], kappa, rng, size)
    v = rng.standard_normal((size, mu.shape[0]))
    v -= (v @ mu)[:, None] * mu
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return w[:, None] * mu + np.sqrt(np.maximum(0.0, 1.0 - w * w))[:, None] * v


def tilted_ball_sampler(s: np.ndarray, k: float, radius: float
                        ) -> Callable[[np.random.Generator], np.ndarray]:
    """Exact sampler of the density ∝ exp(k⟨θ, s⟩) on the ball of ``radius`` at 0 (O1).

    s = 0 gives the uniform law on the ball (κ = 0, any mean direction).
    """
    s = np.asarray(s, dtype=float)
    p = s.shape[0]
    norm = float(np.linalg.norm(s))
    mu = np.zeros(p + 2)
    if norm > 0:
        mu[:p] = s / norm
    else:
        mu[0] = 1.0
    kappa = k * radius * norm

    def draw(rng: np.random.Generator) -> np.ndarray:
        return radius * sample_vmf(mu, kappa, rng)[:p]

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        return radius * sample_vmf_many(mu, kappa, rng, size)[:, :p]

    draw.many = many  # type: ignore[attr-defined]
    return draw


def _log_ball_volume(p: int, r: float) -> float:
    return 0.5 * p * math.log(math.pi) + p * math.log(r) - float(gammaln(0.5 * p + 1.0))


def _inside(points: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    ok = np.ones(points.shape[0], dtype=bool)
    for c, r in zip(centers, radii):
        d = points - c
        ok &= np.einsum("ij,ij->i", d, d) <= r * r
    return ok


def inside_rows(points: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Membership of ``points`` (R, t, p) in the per-row regions ∩ⱼ B(centers[i, j], radiiⱼ)
    (``centers`` (R, m, p)): the (R, t) flags, by :func:`_inside`'s rule (‖θ − c‖² ≤ r²)."""
    ok = np.ones(points.shape[:2], dtype=bool)
    for j, r in enumerate(radii):
        d = points - centers[:, j, None, :]
        ok &= np.einsum("itk,itk->it", d, d) <= r * r
    return ok


def truncated_gaussian_sampler(q: np.ndarray, a: float, centers: np.ndarray, radii: np.ndarray
                               ) -> Callable[[np.random.Generator], np.ndarray]:
    """Exact sampler of the density ∝ exp(−(a/2)‖θ − q‖²) on ∩ⱼ B(centersⱼ, radiiⱼ) (a > 0).

    Two exact rejection schemes; both output the target law, so choosing between them does not
    change the output law (only the running time):

    * Gaussian: propose N(q, I/a), accept when inside the region. Acceptance Z/(2π/a)^{p/2},
      with Z = ∫_region exp(−(a/2)‖θ − q‖²) dθ.
    * Uniform: propose uniformly on the smallest member ball B(c, r), accept when inside the
      region with probability exp(−(a/2)‖θ − q‖²) ≤ 1. Acceptance Z/vol(B(c, r)).

    The ratio of the two acceptances, vol(B(c, r))^{-1}·(2π/a)^{p/2}, does not depend on Z: the
    larger one is picked exactly. At most :data:`MAX_PROPOSALS` proposals are drawn per sample;
    beyond that a ``RuntimeError`` is raised (a region of negligible mass under the Gaussian and
    much smaller than the smallest ball, which cannot happen for C itself).

    ``draw.many(rng, size)`` draws ``size`` samples by the same scheme; ``draw.many_at(rng,
    row_centers)`` one per row of ``row_centers`` (R, m, p), row i on ∩ⱼ B(row_centers[i, j],
    radiiⱼ) (the same radii, so the same scheme: a localised region per row).
    """
    q = np.asarray(q, dtype=float)
    p = q.shape[0]
    centers = np.asarray(centers, dtype=float).reshape(-1, p)
    radii = np.asarray(radii, dtype=float).reshape(-1)
    j = int(np.argmin(radii))
    c_small, r_small = centers[j], float(radii[j])
    log_gauss_mass = 0.5 * p * math.log(2.0 * math.pi / a)
    use_uniform = _log_ball_volume(p, r_small) < log_gauss_mass
    sd = 1.0 / math.sqrt(a)

    def proposals(rng: np.random.Generator, shape: tuple[int, ...],
                  c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Proposals of the chosen scheme, of shape (*shape, p), uniform ones on B(c, r_small)
        (``c`` broadcast against them), and the flags of the density test (not the region's)."""
        if use_uniform:
            g = rng.standard_normal((*shape, p))
            g /= np.linalg.norm(g, axis=-1, keepdims=True)
            pts = c + r_small * g * rng.random((*shape, 1)) ** (1.0 / p)
            d = pts - q
            keep = rng.random(shape) < np.exp(-0.5 * a * np.einsum("...k,...k->...", d, d))
            return pts, keep
        return q + sd * rng.standard_normal((*shape, p)), np.ones(shape, dtype=bool)

    def propose(rng: np.random.Generator) -> np.ndarray | None:
        if use_uniform:
            g = rng.standard_normal((_BATCH, p))
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            pts = c_small + r_small * g * rng.random((_BATCH, 1)) ** (1.0 / p)
            d = pts - q
            keep = rng.random(_BATCH) < np.exp(-0.5 * a * np.einsum("ij,ij->i", d, d))
        else:
            pts = q + sd * rng.standard_normal((_BATCH, p))
            keep = np.ones(_BATCH, dtype=bool)
        keep &= _inside(pts, centers, radii)
        hits = np.flatnonzero(keep)
        return pts[hits[0]].copy() if hits.size else None

    def draw(rng: np.random.Generator) -> np.ndarray:
        for _ in range(MAX_PROPOSALS // _BATCH):
            out = propose(rng)
            if out is not None:
                return out
        raise RuntimeError(
            f"truncated_gaussian_sampler: no acceptance in {MAX_PROPOSALS} proposals "
            f"(a={a:g}, p={p}, smallest radius {r_small:g}); the region has negligible mass")

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        def propose(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
            pts, keep = proposals(rng, (count,), c_small)
            return pts, keep & _inside(pts, centers, radii)

        return fill_accepted(propose, rng, size, max_proposals=MAX_PROPOSALS,
                             what="truncated_gaussian_sampler")

    def many_at(rng: np.random.Generator, row_centers: np.ndarray) -> np.ndarray:
        row_centers = np.asarray(row_centers, dtype=float)
        if row_centers.ndim != 3 or row_centers.shape[1:] != centers.shape:
            raise ValueError(f"truncated_gaussian_sampler.many_at: centres of shape "
                             f"{row_centers.shape}, expected (rows, {centers.shape[0]}, {p})")

        def propose(rng: np.random.Generator, rows: np.ndarray,
                    t: int) -> tuple[np.ndarray, np.ndarray]:
            cs = row_centers[rows]
            pts, keep = proposals(rng, (rows.size, t), cs[:, j, None, :])
            return pts, keep & inside_rows(pts, cs, radii)

        return first_accepted_rows(propose, rng, row_centers.shape[0], p,
                                   max_proposals=MAX_PROPOSALS,
                                   what="truncated_gaussian_sampler")

    draw.proposal = "uniform" if use_uniform else "gaussian"  # type: ignore[attr-defined]
    draw.many = many  # type: ignore[attr-defined]
    draw.many_at = many_at  # type: ignore[attr-defined]
    return draw
