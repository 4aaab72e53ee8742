"""Exact sampler of a radial density exp(−a·r − b·r²) around a centre (oracle O6, docs/bst14.md).

On KINK-SC with every row equal to d₀ (docs/bst14.md, "Oracle curves and reference runs"),
ℓ(θ; d₀) = r + (Δ/2)r² with r = ‖θ − d₀‖, so the exponential-mechanism density exp(−k·Σℓ) is radial
around d₀: the radius has density

    ∝ r^{p−1}·exp(−a·r − b·r²),   a = k·n,   b = k·n·Δ/2,

and the direction is uniform. :func:`sample_radius` draws r exactly by rejection from the Gamma
proposal r^{p−1}e^{−λr} with λ = a + 2b·r*, r* the mode of the target: then
target/proposal ∝ exp((λ − a)r − br²) ≤ exp(b·r*²), and the acceptance probability is
exp(−b(r − r*)²). For p ≥ 2 the mean acceptance stays above 0.3 over a, b ∈ [10⁻³, 10⁴] (measured);
a fixed Gamma proposal (acceptance e^{−br²}) or chi proposal (acceptance e^{−ar}), the two obvious
alternatives, each collapse where the other term dominates. For p = 1 the mode is 0 and the Gamma
proposal degenerates when b ≫ a², so there the half-normal |N(0, 1/(2b))| with acceptance e^{−ar}
is used instead (mean acceptance above 0.4 when a² < 2b; the Gamma branch's is above e^{−1}
otherwise).

:func:`sample_radial_in_region` adds a uniform direction and rejects points outside a region (C, or
a localised C ∩ B(θ₀, r₀) of BST14 Algorithm 4), with a bounded number of tries;
:func:`sample_radial_in_region_many` and :func:`sample_radial_in_balls_rows` draw many samples at
once by the same rejection (one region for all rows, or a region per row:
:mod:`dpbench.numerics.samplers.rejection`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate

from ...core.sets import ConstraintSet
from .ball import inside_rows
from .rejection import fill_accepted, first_accepted_rows

__all__ = ["radius_mode", "sample_radius", "radius_cdf", "sample_radial_in_region",
           "sample_radial_in_region_many", "sample_radial_in_balls_rows"]

_BATCH = 256


def radius_mode(p: int, a: float, b: float) -> float:
    """The mode r* of r^{p−1}e^{−ar−br²}: the root of 2b·r² + a·r − (p − 1) = 0 (0 when p = 1)."""
    if p <= 1:
        return 0.0
    return 2.0 * (p - 1) / (a + math.sqrt(a * a + 8.0 * b * (p - 1)))


def _check(p: int, a: float, b: float) -> None:
    if p < 1:
        raise ValueError(f"radial sampler: p must be >= 1, got {p}")
    if not (a >= 0 and b >= 0 and a + b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"radial sampler: need a, b >= 0 finite and a + b > 0, got a={a}, b={b}")


def sample_radius(rng: np.random.Generator, p: int, a: float, b: float, size: int,
                  max_rounds: int = 1000) -> np.ndarray:
    """``size`` exact draws of r ∝ r^{p−1}exp(−a·r − b·r²) on r ≥ 0 (module docstring).

    Draws, per round: ``max(size, 256)`` proposals, then as many uniforms. Raises
    ``RuntimeError`` if ``max_rounds`` rounds do not yield ``size`` acceptances (impossible in
    practice: the acceptance rate is bounded below).
    """
    _check(p, a, b)
    half_normal = p == 1 and a * a < 2.0 * b
    mode = radius_mode(p, a, b)
    lam = a + 2.0 * b * mode
    out = np.empty(0)
    for _ in range(max_rounds):
        m = max(size, _BATCH)
        if half_normal:  # p = 1, Gaussian part dominant: propose |N(0, 1/(2b))|, accept e^{−ar}
            r = np.abs(rng.standard_normal(m)) / math.sqrt(2.0 * b)
            accept = np.exp(-a * r)
        else:  # Gamma(p, 1/λ) proposal, accept e^{−b(r − r*)²}
            r = rng.gamma(shape=p, scale=1.0 / lam, size=m)
            accept = np.exp(-b * (r - mode) ** 2)
        keep = rng.random(m) < accept
        out = np.concatenate([out, r[keep]])
        if out.size >= size:
            return out[:size]
    raise RuntimeError(f"sample_radius: fewer than {size} acceptances in {max_rounds} rounds "
                       f"(p={p}, a={a}, b={b})")


def radius_cdf(r: np.ndarray, p: int, a: float, b: float, grid: int = 40_001) -> np.ndarray:
    """CDF of the radius law at r by numerical integration (a reference for tests).

    Composite Simpson on a uniform grid of [0, r_max]: the target is dominated by a multiple of
    the Gamma(p, 1/λ) proposal (module docstring) and by a chi law of scale 1/√(2b), so its mass
    beyond r_max = p + 40(√p + 1) of the smaller scale is negligible; the grid resolves the bulk
    with hundreds of points per standard deviation.
    """
    _check(p, a, b)
    mode = radius_mode(p, a, b)
    # the e^{−br²} factor alone also confines the mass to r ≲ (p + 40(√p + 1))/√(2b)
    lam = max(a + 2.0 * b * mode, math.sqrt(2.0 * b))
    x = np.linspace(0.0, (p + 40.0 * (math.sqrt(p) + 1.0)) / lam, grid)
    log_peak = (p - 1) * math.log(mode) - a * mode - b * mode * mode if mode > 0 else 0.0
    with np.errstate(divide="ignore"):
        logd = (p - 1) * np.log(x) if p > 1 else np.zeros_like(x)
    dens = np.exp(logd - a * x - b * x * x - log_peak)
    cum = integrate.cumulative_simpson(dens, x=x, initial=0.0)
    return np.interp(np.asarray(r, dtype=float), x, cum / cum[-1], left=0.0, right=1.0)


def sample_radial_in_region(rng: np.random.Generator, center: np.ndarray, a: float, b: float,
                            region: ConstraintSet, max_tries: int = 100_000) -> np.ndarray:
    """One exact draw of θ ∝ exp(−a‖θ − c‖ − b‖θ − c‖²) restricted to ``region``.

    Radius by :func:`sample_radius`, direction uniform (a normalised Gaussian), then rejection of
    points outside ``region`` (which may be C or an ``Intersection`` of balls). Raises
    ``RuntimeError`` after ``max_tries`` proposals without an accepted point, which happens only
    when the region carries a negligible share of the mass (e.g. it lies far from the centre).
    """
    center = np.asarray(center, dtype=float)
    tried = 0
    while tried < max_tries:
        m = min(_BATCH, max_tries - tried)
        points = _radial_points(rng, center, a, b, (m,))
        inside = np.atleast_1d(region.contains(points, tol=0.0))
        if inside.any():
            return points[int(np.argmax(inside))].copy()
        tried += m
    raise RuntimeError(
        f"sample_radial_in_region: no proposal fell in the region in {max_tries} tries (radial "
        f"law a={a}, b={b} around a centre at distance {np.linalg.norm(center):.3g} from 0); the "
        "region carries too little of the mass for rejection sampling")


def _radial_points(rng: np.random.Generator, center: np.ndarray, a: float, b: float,
                   shape: tuple[int, ...]) -> np.ndarray:
    """Points c + r·u of shape (*shape, p): all the radii (:func:`sample_radius`), then the
    normals of the uniform directions u."""
    p = center.size
    count = int(np.prod(shape))
    r = sample_radius(rng, p, a, b, count).reshape(shape)
    g = rng.standard_normal((*shape, p))
    g /= np.maximum(np.linalg.norm(g, axis=-1, keepdims=True), np.finfo(float).tiny)
    return center + r[..., None] * g


def sample_radial_in_region_many(rng: np.random.Generator, center: np.ndarray, a: float,
                                 b: float, region: ConstraintSet, size: int,
                                 max_tries: int = 100_000) -> np.ndarray:
    """``size`` independent draws of :func:`sample_radial_in_region` (rows of a (size, p)
    array): the accepted proposals in order
    (:func:`~dpbench.numerics.samplers.rejection.fill_accepted`; ``RuntimeError`` after
    ``max_tries`` proposals in a row outside the region)."""
    center = np.asarray(center, dtype=float)

    def propose(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        points = _radial_points(rng, center, a, b, (count,))
        return points, np.atleast_1d(region.contains(points, tol=0.0))

    return fill_accepted(propose, rng, size, max_proposals=max_tries,
                         what="sample_radial_in_region_many")


def sample_radial_in_balls_rows(rng: np.random.Generator, center: np.ndarray, a: float, b: float,
                                row_centers: np.ndarray, radii: np.ndarray,
                                max_tries: int = 100_000) -> np.ndarray:
    """One draw of :func:`sample_radial_in_region` per row of ``row_centers`` (R, m, p), row i
    restricted to ∩ⱼ B(row_centers[i, j], radiiⱼ) (a localised region per row;
    :func:`~dpbench.numerics.samplers.rejection.first_accepted_rows`)."""
    center = np.asarray(center, dtype=float)
    row_centers = np.asarray(row_centers, dtype=float)
    radii = np.asarray(radii, dtype=float)

    def propose(rng: np.random.Generator, rows: np.ndarray,
                t: int) -> tuple[np.ndarray, np.ndarray]:
        points = _radial_points(rng, center, a, b, (rows.size, t))
        return points, inside_rows(points, row_centers[rows], radii)

    return first_accepted_rows(propose, rng, row_centers.shape[0], center.size,
                               max_proposals=max_tries, what="sample_radial_in_balls_rows")
