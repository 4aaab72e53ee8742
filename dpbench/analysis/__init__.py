"""Rate analysis: empirical slopes against rate cards, comparisons, and consistency checks."""

#: The version of the rules that turn a cube into verdicts (exclusions, bands, derived exponents,
#: the equivalence rule). A report records it (``built_with``), and a committed report built
#: under another version is stale (tests/unit/test_committed_reports.py). 2: caps excluded only at
#: the end the rate card predicts and only where the curve's own law reaches them (jumps are
#: blow-ups); derived expected exponents.
ANALYSIS_VERSION = 2

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
    "ANALYSIS_VERSION", "DEFAULT_TOLERANCE", "EXCLUSION_CODES", "VERDICTS", "VERDICT_TEXT", "CollapseCheck", "Comparison", "Crossover",
    "EpsilonConvergence", "ExpectationCheck", "OUTCOMES", "RateFit", "check_expectations", "collapse_check", "crossovers", "epsilon_convergence",
    "fit_curve", "fit_rates", "fits_frame", "holm", "paired_comparisons", "slope_ci",
    "sweep_axes", "verdict",
]
from . import accessor as _accessor  # noqa: E402,F401  (registers ds.dpbench)
