"""Rate analysis: empirical slopes against rate cards, comparisons, and consistency checks."""

from .compare import (
                      CollapseCheck,
                      Comparison,
                      Crossover,
                      EpsilonConvergence,
                      collapse_check,
                      crossovers,
                      epsilon_convergence,
                      holm,
                      paired_comparisons,
)
from .expectations import OUTCOMES, ExpectationCheck, check_expectations
from .rates import (
                      DEFAULT_TOLERANCE,
                      EXCLUSION_CODES,
                      VERDICT_TEXT,
                      VERDICTS,
                      RateFit,
                      fit_curve,
                      fit_rates,
                      fits_frame,
                      slope_ci,
                      sweep_axes,
                      verdict,
)

__all__ = [
    "DEFAULT_TOLERANCE", "EXCLUSION_CODES", "VERDICTS", "VERDICT_TEXT", "CollapseCheck", "Comparison", "Crossover",
    "EpsilonConvergence", "ExpectationCheck", "OUTCOMES", "RateFit", "check_expectations", "collapse_check", "crossovers", "epsilon_convergence",
    "fit_curve", "fit_rates", "fits_frame", "holm", "paired_comparisons", "slope_ci",
    "sweep_axes", "verdict",
]
from . import accessor as _accessor  # noqa: E402,F401  (registers ds.dpbench)
