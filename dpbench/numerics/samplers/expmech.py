"""The single entry point of the exponential-mechanism samplers (BST14 Algorithm 2).

:func:`sample_expmech` draws θ ∝ exp(−k·Σᵢ ℓ(θ; dᵢ)) on a region ⊆ C: C itself (ExpMech) or a
localised C ∩ B(θ₀, r₀) (Localize, Algorithm 4). ``sampler="exact"`` uses the problem's
``"gibbs"`` sampler of :mod:`dpbench.core.exact_samplers` (certified); ``"rwm"`` / ``"mala"`` run
the MCMC chains of :mod:`dpbench.numerics.samplers.mcmc` (uncertified, nominal ε-DP).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import NotApplicable
from ...core.exact_samplers import exact_sampler
from ...core.problem import Dataset, Problem
from ...core.sets import ConstraintSet
from .mcmc import KINDS, run_chain

__all__ = ["SAMPLERS", "sample_expmech"]

SAMPLERS = ("exact", *KINDS)


def sample_expmech(problem: Problem, data: Dataset, k: float, region: ConstraintSet,
                   rng: np.random.Generator, *, sampler: str = "exact", steps: int | None = None,
                   step_scale: float | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """One draw of θ ∝ exp(−k·Σᵢ ℓ(θ; dᵢ)) on ``region``; returns (θ, info).

    ``info`` holds ``sampler``, ``steps`` (0 for exact samplers), ``acceptance`` (NaN for exact
    samplers), ``certified`` (True only for exact samplers) and the MCMC step size. Raises
    :class:`NotApplicable` when ``sampler="exact"`` and the problem has no exact sampler for this
    data and region, or when MCMC gets a region that is not an intersection of balls.
    """
    if not k > 0:
        raise ValueError(f"sample_expmech: k must be > 0, got {k!r}")
    if sampler == "exact":
        draw = exact_sampler("gibbs", problem, data, k, region)
        if draw is None:
            raise NotApplicable(
                f"problem {problem.name!r} has no exact exponential-mechanism sampler for region "
                f"{type(region).__name__}; use sampler='rwm' or 'mala' (nominal ε-DP)")
        theta = np.asarray(draw(rng), dtype=float)
        info: dict[str, Any] = {"sampler": "exact", "steps": 0, "acceptance": float("nan"),
                                "certified": True,
                                "proposal": getattr(draw, "proposal", "exact")}
        return theta, info
    if sampler in KINDS:
        return run_chain(problem, data, k, region, rng, kind=sampler, steps=steps,
                         step_scale=step_scale)
    raise ValueError(f"sample_expmech: unknown sampler {sampler!r}; expected one of {SAMPLERS}")
