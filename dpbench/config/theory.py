"""The data a suite's derived expected exponents need, computed from its plugins at plan time.

An expectation with ``derived: {q: a, …}`` (docs/analysis.md, "Derived exponents") expects the
fitted curve to follow ∏ q^a along its axis, q a public quantity of the mechanism's calibration
(:meth:`dpbench.core.algorithm.Algorithm.calibrated`), a grid axis, or the closed-form oracle.
:func:`derivation` evaluates the calibration quantities at every grid point the expectation
covers (its ``at`` applied), once, when a store is prepared; the analysis then takes the
least-squares log-log slope of the product over the kept points of each fit, so the store and
the analysis never run plugin code for it. The record carries a key (the expectation's
derivation, the algorithm's and problem's identity and versions, the grid) so that an unchanged
record is reused instead of recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..core.errors import NotApplicable, SuiteError
from ..core.grid import GridPoint
from ..core.params import identity_params
from ..core.seeding import stable_hash
from .suite import DERIVED_ORACLE, Expectation, Experiment, Suite

#: Bumped when the record's layout or meaning changes (an old record is then recomputed).
DERIVATION_VERSION = 1


def calibration_names(exp: Experiment, expectation: Expectation) -> list[str]:
    """The names of ``expectation.derived`` that the mechanism's calibration must provide (the
    others are grid axes or the oracle)."""
    return [q for q in expectation.derived if q not in exp.grid and q != DERIVED_ORACLE]


def derivation_key(exp: Experiment, expectation: Expectation) -> str:
    """What a derivation record depends on: if this is unchanged, so is the record."""
    algo = next(a for a in exp.algorithms if a.label == expectation.algorithm)
    prob = next(p for p in exp.problems if p.label == expectation.problem)
    return stable_hash({
        "version": DERIVATION_VERSION, "derived": dict(expectation.derived),
        "axis": expectation.axis, "at": dict(expectation.at), "grid": exp.grid,
        "routing": dict(exp.extra_routing),
        "algorithm": [algo.name, algo.cls.version, identity_params(algo.cls.params, algo.params)],
        "problem": [prob.name, prob.cls.version, identity_params(prob.cls.params, prob.params)]})


def _points(exp: Experiment, expectation: Expectation
            ) -> list[tuple[dict[str, Any], GridPoint]]:
    """The grid points ``expectation`` covers: each as the suite spells it (what its record
    stores) and typed."""
    out = []
    for gidx, point in exp.points():
        if all(point.value(k) == v for k, v in expectation.at.items()):
            out.append(({a: exp.grid[a][i] for a, i in zip(exp.axes, gidx)}, point))
    return out


def derivation(exp: Experiment, expectation: Expectation, *,
               first_only: bool = False) -> dict[str, Any]:
    """The record of ``expectation``'s derived exponent: ``{"key", "points": [{"at": point,
    "values": {q: value}}], "error": ""}`` with the calibration quantities at every grid point
    it covers (points where the mechanism is not applicable are left out). ``error`` says what
    went wrong instead (a name the calibration does not provide, a calibration that failed); the
    check then reports the row inconclusive with it. ``first_only``: the first point alone
    (validation)."""
    record: dict[str, Any] = {"key": derivation_key(exp, expectation), "points": [], "error": ""}
    names = calibration_names(exp, expectation)
    if not names:
        return record
    algo_spec = next(a for a in exp.algorithms if a.label == expectation.algorithm)
    prob_spec = next(p for p in exp.problems if p.label == expectation.problem)
    points = _points(exp, expectation)
    for at, point in points[:1] if first_only else points:
        algo = algo_spec.build(dict(point.algorithm_axes))
        prob = prob_spec.build(dict(point.problem_axes))
        if algo.not_applicable_reason(prob):
            continue
        budget = point.for_privacy(algo.privacy)
        try:
            values = algo.calibrated(prob, n=budget.n, p=budget.p, epsilon=budget.epsilon,
                                      delta=budget.delta)
        except NotApplicable:
            continue
        except (ValueError, ArithmeticError) as exc:
            record["error"] = (f"the calibration of {expectation.algorithm!r} failed at "
                               f"{_point_text(at)}: {str(exc)[:300]}")
            return record
        unknown = [q for q in names if q not in values]
        if unknown:
            allowed = sorted(values) + [a for a in exp.grid] + [DERIVED_ORACLE]
            record["error"] = (f"{', '.join(map(repr, unknown))} is not a quantity of "
                               f"{algo_spec.name}'s calibration; allowed: {', '.join(allowed)}")
            return record
        bad = [q for q in names if not (math.isfinite(values[q]) and values[q] > 0)]
        if bad:
            record["error"] = (f"the calibration gives {', '.join(f'{q}={values[q]!r}' for q in bad)}"
                               f" at {_point_text(at)}: a derived exponent needs positive "
                               "finite values")
            return record
        record["points"].append({"at": at,
                                 "values": {q: float(values[q]) for q in names}})
    return record


def _point_text(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())


def derivations(exp: Experiment, previous: list[Mapping[str, Any]] | None = None
                ) -> dict[str, dict[str, Any]]:
    """Per expectation id with ``derived:``, its derivation record; records in ``previous`` (the
    expectations a store holds) whose key is unchanged are reused."""
    old = {str(e.get("id")): e.get("derivation") for e in previous or []
           if isinstance(e, Mapping)}
    out = {}
    for e in exp.expectations:
        if not e.derived:
            continue
        kept = old.get(e.id)
        if isinstance(kept, Mapping) and kept.get("key") == derivation_key(exp, e):
            out[e.id] = dict(kept)
        else:
            out[e.id] = derivation(exp, e)
    return out


def check_derived(suite: Suite) -> None:
    """Every ``derived:`` name of the suite's expectations is a quantity its mechanism's
    calibration provides, checked at the first grid point each covers (one calibration each);
    :class:`SuiteError` naming every field that is not, before anything is written."""
    problems = []
    for i, exp in enumerate(suite.experiments):
        for j, e in enumerate(exp.expectations):
            if not calibration_names(exp, e):
                continue
            record = derivation(exp, e, first_only=True)
            if record["error"]:
                problems.append(f"experiments[{i}].expect[{j}].derived: {record['error']}")
    if problems:
        raise SuiteError(suite.source, problems)
