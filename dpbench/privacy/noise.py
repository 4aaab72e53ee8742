"""Noise distributions used by the mechanisms (BST14 Algorithms 1 and 3).

All randomness comes from the injected ``numpy.random.Generator``; the order of draws is part of
each function's contract, so a fixed seed always gives the same noise.
"""

from __future__ import annotations

import numpy as np


def gamma_norm_noise(
    p: int, scale: float, rng: np.random.Generator, size: int | None = None
) -> np.ndarray:
    """"High-dimensional Laplace" noise with density ∝ exp(−‖b‖/scale) on R^p.

    BST14 Algorithm 3 (docs/bst14.md, "Derived constants"): the radius ‖b‖ ~ Gamma(shape=p, scale)
    and the direction is uniform on the unit sphere, independent of the radius. Then
    E‖b‖ = p·scale and E‖b‖² = p(p+1)·scale². Since p(b)/p(b+v) ≤ exp(‖v‖/scale),
    scale = sensitivity/ε gives ε-DP.

    Parameters
    ----------
    p:
        Dimension.
    scale:
        The scale s > 0 of the density (sensitivity / ε).
    rng:
        The generator. Draws, in order: the radii, then the Gaussian directions.
    size:
        ``None`` for one vector of shape (p,); otherwise ``size`` independent rows, shape (size, p).
    """
    if p < 1:
        raise ValueError(f"gamma_norm_noise: p must be >= 1, got {p}")
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError(f"gamma_norm_noise: scale must be finite and > 0, got {scale}")
    m = 1 if size is None else int(size)
    radius = rng.gamma(shape=p, scale=scale, size=m)
    g = rng.standard_normal((m, p))
    # ‖g‖ = 0 has probability zero; guard anyway so a degenerate draw cannot produce NaN.
    norms = np.maximum(np.linalg.norm(g, axis=1), np.finfo(float).tiny)
    out = g * (radius / norms)[:, None]
    return out[0] if size is None else out


def gaussian_noise(
    p: int, sigma: float, rng: np.random.Generator, size: int | None = None
) -> np.ndarray:
    """Spherical Gaussian noise N(0, σ² I_p) (BST14 Algorithm 1, step b_t).

    Returns shape (p,) when ``size`` is ``None``, else (size, p).
    """
    if p < 1:
        raise ValueError(f"gaussian_noise: p must be >= 1, got {p}")
    if not (sigma >= 0 and np.isfinite(sigma)):
        raise ValueError(f"gaussian_noise: sigma must be finite and >= 0, got {sigma}")
    shape = (p,) if size is None else (int(size), p)
    return sigma * rng.standard_normal(shape)
