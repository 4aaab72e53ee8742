"""Checking a suite's declared expected rates (``expect:`` entries) against the fitted slopes.

A suite states, per experiment, the exponents a paper predicts on designated instances (for BST14,
the R1–R12 rows of spec §6.1, converted to the average scale). :func:`check_expectations` matches
each expectation with the fitted curves of :func:`dpbench.analysis.fit_rates` (same algorithm
label, problem label and axis; the ``at`` values fix some of the other axes) and gives one
:class:`ExpectationCheck` per matching curve:

* ``agrees`` when the bootstrap CI of the slope, widened by the stated tolerance, contains the
  expected exponent (the rule of :func:`dpbench.analysis.verdict`, applied to the declared
  exponent instead of the rate card's local slope);
* ``disagrees`` when the whole CI lies more than the tolerance away from it;
* ``inconclusive`` when fewer than ``MIN_POINTS`` grid points survive the exclusions (capped
  regime, optimisation floor) or the CI is wider than ``MAX_CI_WIDTH``: the data cannot tell,
  and the fix is more seeds or a longer grid, never a looser tolerance.

The tolerance is the suite author's statement of how far constants and log factors may bend a
finite-range slope (spec §6.5: ±0.1 clean, ±0.2 with logs). Using the CI (not the point estimate
alone) keeps the check honest both ways: a noisy fit cannot "agree" by luck of its point estimate
(its CI is too wide to conclude), and a tight fit cannot "disagree" by Monte Carlo noise alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..suite import Expectation
from .rates import RateFit, verdict

OUTCOMES = ("agrees", "disagrees", "inconclusive", "missing")
_OUTCOME_OF_VERDICT = {"consistent": "agrees", "faster": "disagrees", "slower": "disagrees",
                       "inconclusive": "inconclusive"}


@dataclass
class ExpectationCheck:
    """One expectation checked against one fitted curve."""

    expectation: Expectation
    experiment: str
    fixed: dict[str, Any]
    slope: float
    slope_low: float
    slope_high: float
    points_used: int
    points: int
    outcome: str
    reason: str = ""

    @property
    def deviation(self) -> float:
        return self.slope - self.expectation.slope

    @property
    def ci_covers(self) -> bool:
        """Whether the bootstrap CI contains the expected exponent."""
        return self.slope_low <= self.expectation.slope <= self.slope_high


def _matches(fit: RateFit, exp: Expectation) -> bool:
    if (fit.algorithm, fit.problem, fit.axis, fit.variable) != (exp.algorithm, exp.problem,
                                                                  exp.axis, exp.variable):
        return False
    return all(k in fit.fixed and _same(fit.fixed[k], v) for k, v in exp.at.items())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def check_expectations(fits: Sequence[RateFit], expectations: Iterable[Expectation | Mapping[str, Any]],
                       experiment: str = "") -> list[ExpectationCheck]:
    """Check each expectation against every fitted curve it designates (see module docstring).

    An expectation that matches no curve (for instance every cell was not applicable) yields one
    ``missing`` entry, so nothing declared disappears silently. A curve matches only if it fitted
    the expectation's ``variable`` (``RateFit.variable``): pass fits of every variable the
    expectations name (:func:`dpbench.report.build.store_expectations` does).
    """
    out: list[ExpectationCheck] = []
    for raw in expectations:
        exp = raw if isinstance(raw, Expectation) else Expectation.from_dict(raw)
        matched = [f for f in fits if _matches(f, exp)]
        if not matched:
            out.append(ExpectationCheck(exp, experiment, dict(exp.at), math.nan, math.nan,
                                        math.nan, 0, 0, "missing",
                                        f"no fitted curve of {exp.variable}: every cell not "
                                        "applicable?"))
            continue
        for f in matched:
            used = int(f.used.sum())
            v, reason = verdict(f.slope_low, f.slope_high, exp.slope, used, exp.tolerance)
            out.append(ExpectationCheck(exp, f.experiment or experiment, dict(f.fixed), f.slope,
                                        f.slope_low, f.slope_high, used, len(f.x),
                                        _OUTCOME_OF_VERDICT[v], reason))
    return out
