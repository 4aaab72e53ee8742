"""The analysis settings: the one place that owns the numbers turning a cube into verdicts.

Every statistic of :mod:`dpbench.analysis` (rate fits, expected rates, comparisons of mechanisms
within a cube, the diff of two stores), the report built from them and the ``dpbench diff``
options take their defaults from :data:`DEFAULT`; none repeats a number. The report states the
values it ran with in its Methods section. Explained in docs/analysis.md.

:data:`ANALYSIS_VERSION` is the version of the rules: a report records it (``built_with``) and a
committed report built under another version is stale (tests/unit/test_committed_reports.py).
Changing a value of :data:`DEFAULT` that can change a verdict (an exclusion threshold, the
tolerance, the level) is a change of the rules: bump it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.suite import DEFAULT_EXPECT_TOLERANCE

#: The version of the rules that turn a cube into verdicts (exclusions, bands, derived exponents,
#: the equivalence rule). 2: caps excluded only at the end the rate card predicts and only where
#: the curve's own law reaches them (jumps are blow-ups); derived expected exponents.
ANALYSIS_VERSION = 2


@dataclass(frozen=True)
class AnalysisSettings:
    """The analysis policy: levels, resamples, seeds, exclusion thresholds and test sizes."""

    # --- rate fits (dpbench.analysis.rates) and expected rates (dpbench.analysis.expectations)
    level: float = 0.95
    """Confidence level of every interval: the bootstrap CIs of a fit's slope, means and ratios,
    and the t intervals of a diff. A verdict's error rate is at most (1 − level)/2 each way."""
    n_resamples: int = 2000
    """Bootstrap resamples of a rate fit (the report, ``dpbench check``, a diff's slopes)."""
    seed: int = 0
    """Seed of the bootstraps (with each curve's position): the same cube gives the same bytes."""
    tolerance: float = DEFAULT_EXPECT_TOLERANCE
    """The band ± tolerance (exponent units) within which constants may bend a clean power law's
    finite-range slope: the rate-card verdicts' band. The number is the default band of a
    suite's ``expect:`` entry, which the suite validator (:mod:`dpbench.config.suite`, below the
    analysis) owns; an expectation at this tolerance is reported as using the default."""
    min_points: int = 3
    """A fit needs at least this many kept points, and at least half of its points."""
    cap_fraction: float = 0.25
    """A mean excess at or above this fraction of the trivial maximum L·D is capped."""
    trivial_fraction: float = 0.5
    """A mean excess at or above this fraction of the data-independent output's excess (the
    cube's ``trivial_excess_risk``) is capped."""
    floor_factor: float = 10.0
    """A mean excess below this many certified optimum gaps is at the optimisation floor (in rate
    fits and in a diff, where such points are shown but not tested)."""
    jump_factor: float = 2.0
    """A capped point is a *jump* (a blow-up, not the capped regime) when its mean exceeds this
    factor times the upper end of the bootstrap interval of the other points' power law extended
    to it. The capped regime bends the curve *below* that law (the excess saturates at the
    trivial level), so a genuine cap is called a jump only when the interval misses the law on
    the low side by more than this factor (probability < 2.5 % at the 95 % level)."""

    # --- comparisons of mechanisms within one cube (dpbench.analysis.compare)
    alpha: float = 0.05
    """Significance of the paired Wilcoxon comparisons, after Holm's correction."""
    collapse_tolerance: float = 0.15
    """The collapse check's CI of b − c, widened by ± this, must contain 0."""
    collapse_resamples: int = 1000
    """Bootstrap resamples of the collapse check when called on its own (the report passes
    :attr:`n_resamples`)."""

    # --- the report's figures (dpbench.report)
    max_combos: int = 4
    """At most this many combinations of the other axes get a rate figure each; beyond, only the
    first."""

    # --- the diff of two stores (dpbench.analysis.diff, ``dpbench diff``)
    diff_alpha: float = 0.05
    """Family-wise error rate of a diff's flags, Holm-corrected over its families."""
    diff_min_change: float = 0.05
    """A Holm-significant family is flagged only if its pooled relative change exceeds this: a
    change of round-off size is detectable with paired cells but not worth a failing CI job."""
    exact_max_cells: int = 30
    """Families with at most this many non-zero paired differences are tested by enumerating
    every sign flip; larger ones by :attr:`n_flips` random flips."""
    n_flips: int = 2 ** 16
    """Random sign flips of a family too large to enumerate."""


#: The settings every default of the analysis, the report and ``dpbench diff`` is taken from.
DEFAULT = AnalysisSettings()
