"""Rate analysis: empirical slopes against rate cards, comparisons of mechanisms within a cube,
consistency checks, and the diff of two stores (:mod:`dpbench.analysis.diff`). Their settings,
and the version of the rules (``ANALYSIS_VERSION``), are :mod:`dpbench.analysis.settings`."""

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
from .settings import ANALYSIS_VERSION, DEFAULT, AnalysisSettings
from .spent import PrivacySpent, privacy_spent

__all__ = [
    "ANALYSIS_VERSION", "DEFAULT", "EXCLUSION_CODES", "VERDICTS", "VERDICT_TEXT",
    "AnalysisSettings", "CollapseCheck", "Comparison", "Crossover", "EpsilonConvergence",
    "ExpectationCheck", "OUTCOMES", "PrivacySpent", "RateFit", "check_expectations",
    "collapse_check", "crossovers", "epsilon_convergence", "fit_curve", "fit_rates",
    "fits_frame", "holm", "paired_comparisons", "privacy_spent", "slope_ci", "sweep_axes",
    "verdict",
]
from . import accessor as _accessor  # noqa: E402,F401  (registers ds.dpbench)
