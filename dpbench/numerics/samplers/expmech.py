"""The single entry point of the exponential-mechanism samplers (BST14 Algorithm 2).

:func:`sample_expmech` draws θ ∝ exp(−k·Σᵢ ℓ(θ; dᵢ)) on a region ⊆ C: C itself (ExpMech) or a
localised C ∩ B(θ₀, r₀) (Localize, Algorithm 4). ``sampler="exact"`` uses the problem's
``"gibbs"`` sampler of :mod:`dpbench.core.exact_samplers` (certified); ``"rwm"`` / ``"mala"`` run
the MCMC chains of :mod:`dpbench.numerics.samplers.mcmc` (uncertified, nominal ε-DP).

:func:`sample_expmech_many` is its batched form for the mechanisms' vectorised audit paths
(``Algorithm.run_batch``): ``size`` independent draws, each with the law of one
:func:`sample_expmech` call, on one region or on a region per row (a localised region re-centred
at each row's earlier private release, ``row_centers``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import NotApplicable
from ...core.exact_samplers import Draw, draw_many, draw_many_at, exact_sampler
from ...core.problem import Dataset, Problem
from ...core.sets import ConstraintSet
from .mcmc import KINDS, relocated_region, run_chain, run_chains

__all__ = ["SAMPLERS", "sample_expmech", "sample_expmech_many"]

SAMPLERS = ("exact", *KINDS)


def _check(k: float, sampler: str) -> None:
    if not k > 0:
        raise ValueError(f"sample_expmech: k must be > 0, got {k!r}")
    if sampler not in SAMPLERS:
        raise ValueError(f"sample_expmech: unknown sampler {sampler!r}; expected one of {SAMPLERS}")


def _exact_draw(problem: Problem, data: Dataset, k: float, region: ConstraintSet) -> Draw:
    """The problem's exact ``"gibbs"`` sampler on ``region``; ``NotApplicable`` without one."""
    draw = exact_sampler("gibbs", problem, data, k, region)
    if draw is None:
        raise NotApplicable(
            f"problem {problem.name!r} has no exact exponential-mechanism sampler for region "
            f"{type(region).__name__}; use sampler='rwm' or 'mala' (nominal ε-DP)")
    return draw


def _exact_info(draw: Draw) -> dict[str, Any]:
    return {"sampler": "exact", "steps": 0, "acceptance": math.nan, "certified": True,
            "proposal": getattr(draw, "proposal", "exact")}


def sample_expmech(problem: Problem, data: Dataset, k: float, region: ConstraintSet,
                   rng: np.random.Generator, *, sampler: str = "exact", steps: int | None = None,
                   step_scale: float | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """One draw of θ ∝ exp(−k·Σᵢ ℓ(θ; dᵢ)) on ``region``; returns (θ, info).

    ``info`` holds ``sampler``, ``steps`` (0 for exact samplers), ``acceptance`` (NaN for exact
    samplers), ``certified`` (True only for exact samplers) and the MCMC step size. Raises
    :class:`NotApplicable` when ``sampler="exact"`` and the problem has no exact sampler for this
    data and region, or when MCMC gets a region that is not an intersection of balls.
    """
    _check(k, sampler)
    if sampler == "exact":
        draw = _exact_draw(problem, data, k, region)
        return np.asarray(draw(rng), dtype=float), _exact_info(draw)
    return run_chain(problem, data, k, region, rng, kind=sampler, steps=steps,
                     step_scale=step_scale)


def sample_expmech_many(problem: Problem, data: Dataset, k: float, region: ConstraintSet,
                        rng: np.random.Generator, size: int, *, sampler: str = "exact",
                        steps: int | None = None, step_scale: float | None = None,
                        row_centers: np.ndarray | None = None
                        ) -> tuple[np.ndarray, dict[str, Any]] | None:
    """``size`` independent draws of :func:`sample_expmech` as rows of a (size, p) array, and
    the info of one draw (for MCMC, ``acceptance`` is the mean over the chains).

    Without ``row_centers`` every row is drawn on ``region``. With ``row_centers`` (size, m, p),
    row i is drawn on ``region`` (an intersection of m balls, e.g. row 0's own region) with its
    balls re-centred at ``row_centers[i]``
    (:func:`~dpbench.numerics.samplers.mcmc.relocated_region`).

    ``"exact"``: the exact sampler's vectorised form (``draw.many`` or ``draw.many_at``,
    :mod:`dpbench.core.exact_samplers`); a sampler without ``many_at`` is built for each row's
    region and drawn once. ``"rwm"``/``"mala"``: the same chain per row
    (:func:`~dpbench.numerics.samplers.mcmc.run_chains`); ``None`` when the problem has no
    compiled kernel (the caller then loops :func:`sample_expmech`). Raises as
    :func:`sample_expmech`.
    """
    _check(k, sampler)
    if row_centers is not None and np.shape(row_centers)[0] != size:
        raise ValueError(f"sample_expmech_many: {np.shape(row_centers)[0]} rows of centres for "
                         f"size {size}")
    if sampler != "exact":
        return run_chains(problem, data, k, region, rng, size, kind=sampler, steps=steps,
                          step_scale=step_scale, row_centers=row_centers)
    draw = _exact_draw(problem, data, k, region)
    if row_centers is None:
        return draw_many(draw, rng, size), _exact_info(draw)
    thetas = draw_many_at(draw, rng, row_centers)
    if thetas is None:
        thetas = np.stack([
            np.asarray(_exact_draw(problem, data, k, relocated_region(region, c))(rng), dtype=float)
            for c in np.asarray(row_centers, dtype=float)])
    return thetas, _exact_info(draw)
