"""Checking a suite's declared expected rates (``expect:`` entries) against the fitted slopes.

A suite states, per experiment, the exponents a paper predicts on designated instances (for BST14,
Table 1's rows R1–R12 on the average scale). :func:`check_expectations` matches each expectation
with the fitted curves of :func:`dpbench.analysis.fit_rates` (same algorithm label, problem label,
axis and variable; ``at`` fixes some of the other axes) and gives one :class:`ExpectationCheck` per
matching curve, by the equivalence rule of :func:`dpbench.analysis.verdict`
(docs/analysis.md, "Expected rates"):

* ``agrees`` only when the whole bootstrap CI of the slope lies inside expected ± tolerance;
* ``disagrees`` when it lies wholly outside, or the fit is invalid (a blow-up or collapse inside
  the informative range, or a non-positive mean excess), or the level against a closed-form
  oracle is off by more than the level tolerance while the slope agrees;
* ``inconclusive`` otherwise, with what would decide it (seeds or grid points);
* ``missing`` when no fitted curve matches (every cell not applicable, say).

An expectation with ``derived:`` (docs/analysis.md, "Derived exponents") centres its band on a
slope computed, not typed: the least-squares log-log slope, over the fit's kept points, of the
product of the mechanism's calibration quantities (recorded in the store when it was prepared,
:mod:`dpbench.config.theory`), grid axes and the closed-form oracle it names; the paper's
exponent stays in ``slope`` and both are shown.

Tolerances come from theory, not from the row: 0.1 by default; ``tolerance: card`` derives the
band from the algorithm's rate card (the spread of the full bound's local slope over the kept
points: log factors and two-term crossovers); a hand-set tolerance above 0.1 must carry a
``tolerance_reason`` that the report prints. Each check states its resolution: the smallest slope
error its CI width would have reported as a disagreement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.suite import CARD_TOLERANCE, DERIVED_ORACLE, Expectation
from .rates import RateFit, _ols_slopes, verdict
from .settings import DEFAULT

OUTCOMES = ("agrees", "disagrees", "inconclusive", "missing")
_OUTCOME_OF_VERDICT = {"consistent": "agrees", "faster": "disagrees", "slower": "disagrees",
                       "invalid": "disagrees", "inconclusive": "inconclusive"}


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
    centre: float = math.nan          # the centre of the band (expected slope, bent by the card)
    tolerance: float = math.nan       # the band's half-width actually used
    tolerance_source: str = ""        # where the tolerance came from (default, card, reason)
    resolution: float = math.nan      # tolerance + CI half-width
    level: float = math.nan           # empirical / oracle (geometric mean over kept points)
    level_low: float = math.nan
    level_high: float = math.nan
    level_outcome: str = ""           # "", "agrees", "disagrees", "inconclusive", "reported"
    level_tolerance: float = math.nan
    excluded: tuple[str, ...] = ()    # reasons of the excluded points, for the report
    derived: float = math.nan         # the derived exponent the band is centred on (derived:)

    @property
    def deviation(self) -> float:
        return self.slope - self.expectation.slope

    @property
    def ci_covers(self) -> bool:
        """Whether the bootstrap CI contains the expected exponent."""
        return self.slope_low <= self.expectation.slope <= self.slope_high

    @property
    def band(self) -> tuple[float, float]:
        return self.centre - self.tolerance, self.centre + self.tolerance


def _matches(fit: RateFit, exp: Expectation) -> bool:
    if (fit.algorithm, fit.problem, fit.axis, fit.variable) != (exp.algorithm, exp.problem,
                                                                  exp.axis, exp.variable):
        return False
    return all(k in fit.fixed and _same(fit.fixed[k], v) for k, v in exp.at.items())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def card_band(fit: RateFit, expected: float) -> tuple[float, float, str] | None:
    """The band a rate card derives for ``expected`` over the fit's kept points.

    The card's local slopes lᵢ = d log(bound)/d log(x) at the kept points bend away from its leading
    exponent e_c by bᵢ = lᵢ − e_c (log factors, a second term). The finite-range slope of any
    curve proportional to the bound lies within [min lᵢ, max lᵢ], so the band is
    [expected + min bᵢ − 0.1, expected + max bᵢ + 0.1]: centre expected + (min b + max b)/2,
    tolerance 0.1 + (max b − min b)/2. ``None`` when the fit has no card exponent on this axis.
    """
    used = fit.used
    local = np.asarray(fit.predicted_local, dtype=float)[used] if len(fit.predicted_local) else np.empty(0)
    if not (math.isfinite(fit.card_exponent) and local.size and np.all(np.isfinite(local))):
        return None
    bend = local - fit.card_exponent
    lo, hi = float(bend.min()), float(bend.max())
    xs = np.asarray(fit.x)[used]
    text = (f"card: {DEFAULT.tolerance:g} + ½·spread of the bound's local slope "
            f"({fit.card_exponent + lo:+.2f}…"
            f"{fit.card_exponent + hi:+.2f} over {fit.axis} ∈ [{xs.min():g}, {xs.max():g}], "
            f"{fit.rate_expression}); centre bent by {(lo + hi) / 2:+.2f}")
    return expected + (lo + hi) / 2, DEFAULT.tolerance + (hi - lo) / 2, text


def level_check(fit: RateFit, tolerance: float) -> tuple[str, str]:
    """The level against a closed-form oracle, by the equivalence rule on the CI of
    empirical/oracle (joint bootstrap over seeds): an ``exact`` oracle must have the CI inside
    [1/(1 + t), 1 + t]; an ``upper_bound`` only below 1 + t; a ``heuristic`` one (or one of
    unknown kind) is reported, never enforced. Returns (outcome, text); ("", "") without oracle."""
    if not math.isfinite(fit.oracle_ratio):
        return "", ""
    lo, hi = fit.oracle_ratio_low, fit.oracle_ratio_high
    kind = fit.oracle_kind or "unknown kind"
    ci = f"empirical/oracle ({kind}) {fit.oracle_ratio:.3g} [{lo:.3g}, {hi:.3g}]"
    if fit.oracle_kind not in ("exact", "upper_bound"):
        return "reported", f"{ci}: not enforced"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "inconclusive", f"{ci}: bootstrap failed"
    top, bottom = 1 + tolerance, (1 / (1 + tolerance) if fit.oracle_kind == "exact" else 0.0)
    band = f"[{bottom:.3g}, {top:.3g}]"
    if bottom <= lo and hi <= top:
        return "agrees", f"{ci} inside {band}"
    if hi < bottom or lo > top:
        return "disagrees", f"{ci} outside {band}: the level is off by ×{fit.oracle_ratio:.3g}"
    return "inconclusive", f"{ci} straddles {band}"


def _key(point: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((str(k), float(v) if isinstance(v, (int, float)) else str(v))
                        for k, v in point.items()))


def derived_slope(fit: RateFit, exp: Expectation, record: Mapping[str, Any] | None
                  ) -> tuple[float, str]:
    """The exponent ``exp.derived`` predicts along the fit: Σ a·(least-squares log-log slope of
    q over the kept points) over {q: a}, with q's values at those points from the ``record``
    (calibration quantities), the grid (an axis: slope 1 along itself, 0 along another) or the
    fit's closed-form oracle. Returns (slope, text); (NaN, why) when it cannot be computed."""
    used = fit.used
    xs = np.asarray(fit.x, dtype=float)[used]
    if xs.size < 2:
        return math.nan, "derived exponent: fewer than 2 kept points to derive it over"
    logx = np.log(xs)
    if record is not None and record.get("error"):
        return math.nan, f"derived exponent: {record['error']}"
    lookup = {_key(pt.get("at", {})): pt.get("values", {})
              for pt in (record or {}).get("points", []) if isinstance(pt, Mapping)}
    total, parts = 0.0, []
    for q, power in exp.derived.items():
        if q == fit.axis:
            slope = 1.0
        elif q in fit.fixed:
            slope = 0.0
        else:
            if q == DERIVED_ORACLE:
                vals = np.asarray(fit.oracle, dtype=float)[used] if fit.oracle else np.empty(0)
            elif record is None:
                return math.nan, ("derived exponent: the store holds no derivation record: run "
                                  "`dpbench run` on it again to record its theory (nothing is "
                                  "recomputed)")
            else:
                vals = np.asarray([lookup.get(_key({**fit.fixed, fit.axis: x}), {}).get(
                    q, math.nan) for x in xs], dtype=float)
            if vals.size != xs.size or not np.all(np.isfinite(vals) & (vals > 0)):
                return math.nan, f"derived exponent: no positive value of {q} at every kept point"
            slope = float(_ols_slopes(logx, np.log(vals)))
        total += power * slope
        parts.append(f"{power:g}×{slope:+.3f} ({q})")
    text = (f"derived: {' + '.join(parts)} = {total:+.3f} over {fit.axis} ∈ "
            f"[{xs.min():g}, {xs.max():g}] (paper {exp.slope:+g})")
    return total, text


def _tolerance(fit: RateFit, exp: Expectation, record: Mapping[str, Any] | None = None,
               ) -> tuple[float, float, str] | None:
    if exp.derived:
        centre, text = derived_slope(fit, exp, record)
        return centre, float(exp.tolerance), text
    if exp.tolerance == CARD_TOLERANCE:
        return card_band(fit, exp.slope)
    if exp.tolerance <= DEFAULT.tolerance:
        src = "default" if exp.tolerance == DEFAULT.tolerance else "declared (tighter than default)"
        return exp.slope, float(exp.tolerance), src
    return exp.slope, float(exp.tolerance), f"declared: {exp.tolerance_reason}"


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
        record = raw.get("derivation") if isinstance(raw, Mapping) else None
        matched = [f for f in fits if _matches(f, exp)]
        if not matched:
            out.append(ExpectationCheck(exp, experiment, dict(exp.at), math.nan, math.nan,
                                        math.nan, 0, 0, "missing",
                                        f"no fitted curve of {exp.variable}: every cell not "
                                        "applicable?"))
            continue
        for f in matched:
            used = int(f.used.sum())
            excluded = tuple(f"{f.axis}={x:g}: {r}" for x, r in zip(f.x, f.excluded) if r)
            band = _tolerance(f, exp, record)
            # A declared rate is a positive power law: a non-positive mean is a failure here even
            # where the fit had no card to predict it.
            failures = list(f.failures) + [r for c, r in zip(f.exclusion, f.excluded)
                                           if c == "nonpositive" and r not in f.failures]
            if band is None:
                # No card band: there is no card exponent along the axis, or no kept point to
                # bend it over. A failure still decides the row (excluded points must not hide
                # one), and with no kept point the fit's own reason says what would decide it.
                need = max(DEFAULT.min_points, math.ceil(len(f.x) / 2))
                if failures or (math.isfinite(f.card_exponent) and used < need):
                    v, reason, _ = verdict(f.slope, f.slope_low, f.slope_high, exp.slope,
                                           n_used=used, n_points=len(f.x), failures=failures,
                                           blockers=f.blockers)
                    outcome = _OUTCOME_OF_VERDICT[v]
                else:
                    outcome = "inconclusive"
                    reason = f"tolerance: card needs a rate card with an exponent along {f.axis}"
                out.append(ExpectationCheck(
                    exp, f.experiment or experiment, dict(f.fixed), f.slope, f.slope_low,
                    f.slope_high, used, len(f.x), outcome, reason, excluded=excluded))
                continue
            centre, tol, source = band
            if exp.derived and not math.isfinite(centre) and not failures:
                out.append(ExpectationCheck(
                    exp, f.experiment or experiment, dict(f.fixed), f.slope, f.slope_low,
                    f.slope_high, used, len(f.x), "inconclusive", source, tolerance=tol,
                    tolerance_source=source, excluded=excluded))
                continue
            done = [s for s in f.n_seeds if s]
            v, reason, resolution = verdict(f.slope, f.slope_low, f.slope_high, centre,
                                            n_used=used, n_points=len(f.x), tolerance=tol,
                                            failures=failures, seeds=min(done) if done else None,
                                            blockers=f.blockers)
            outcome = _OUTCOME_OF_VERDICT[v]
            lv, lreason = level_check(f, exp.level_tolerance)
            if lv:
                reason += f"; level: {lreason}"
                if outcome == "agrees" and lv == "disagrees":
                    outcome = "disagrees"
                    reason = "slope agrees but the level is off by a constant factor; " + reason
            out.append(ExpectationCheck(
                exp, f.experiment or experiment, dict(f.fixed), f.slope, f.slope_low, f.slope_high,
                used, len(f.x), outcome, reason, centre=centre, tolerance=tol,
                tolerance_source=source, resolution=resolution, level=f.oracle_ratio,
                level_low=f.oracle_ratio_low, level_high=f.oracle_ratio_high, level_outcome=lv,
                level_tolerance=exp.level_tolerance, excluded=excluded,
                derived=centre if exp.derived else math.nan))
    return out


def summary_line(checks: Sequence[ExpectationCheck]) -> str:
    """'9 expected rates: 9 agree, 0 disagree, 0 inconclusive' (missing counted when present)."""
    n = {o: sum(c.outcome == o for c in checks) for o in OUTCOMES}
    text = (f"{len(checks)} expected rate{'s' if len(checks) != 1 else ''}: {n['agrees']} agree, "
            f"{n['disagrees']} disagree, {n['inconclusive']} inconclusive")
    return text + (f", {n['missing']} missing" if n["missing"] else "")
