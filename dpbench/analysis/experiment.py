"""The analysis of one experiment's cube, computed once: what the report presents.

:func:`analyse` runs every analysis of :mod:`dpbench.analysis` on one cube and its fitted rates
(:func:`~dpbench.analysis.rates.fit_rates`): the paired comparisons of its mechanisms (with the
swept axes they are summarised over), the crossovers, the collapse and ε-convergence checks, and
the privacy each mechanism spent. The report (:mod:`dpbench.report.build`) renders the result;
it computes nothing of its own about the cube's values.
"""

from __future__ import annotations

from dataclasses import dataclass

import xarray as xr

from .compare import (
    CollapseCheck,
    Comparison,
    Crossover,
    EpsilonConvergence,
    collapse_check,
    crossovers,
    epsilon_convergence,
    paired_comparisons,
)
from .rates import RateFit, sweep_axes
from .settings import DEFAULT, AnalysisSettings
from .spent import PrivacySpent, privacy_spent

__all__ = ["ExperimentAnalysis", "analyse"]


@dataclass
class ExperimentAnalysis:
    """Everything :func:`analyse` finds in one experiment's cube."""

    fits: list[RateFit]
    axes: list[str]
    comparisons: list[Comparison]
    crossovers: list[Crossover]
    collapse: list[CollapseCheck]
    convergence: list[EpsilonConvergence]
    privacy: list[PrivacySpent]


def analyse(ds: xr.Dataset, fits: list[RateFit], *, n_resamples: int = DEFAULT.n_resamples,
            settings: AnalysisSettings = DEFAULT) -> ExperimentAnalysis:
    """The analysis of ``ds`` beside its fitted rates ``fits`` (module docstring), with the
    policy of ``settings`` (the collapse check resamples ``n_resamples`` times)."""
    return ExperimentAnalysis(
        fits=fits, axes=sweep_axes(ds),
        comparisons=paired_comparisons(ds, alpha=settings.alpha),
        crossovers=crossovers(ds),
        collapse=collapse_check(ds, tolerance=settings.collapse_tolerance,
                                n_resamples=n_resamples, seed=settings.seed),
        convergence=epsilon_convergence(ds), privacy=privacy_spent(ds))
