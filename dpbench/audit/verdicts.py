"""The verdict of one audit point, in one place (the console table, the store and the report).

A *violation* (a lower bound above the claim) proves the claim wrong at the run's confidence. No
verdict proves a claim right; what a clean point can say is how close the audit came to the claim.
That is its **tightness**: the largest fraction of a stated claim that the assumption-free lower
bounds reach, ε_lb / ε_claimed and, when the ledger states a GDP μ, μ_lb / μ_claimed (both bounds
hold whatever the output law: :mod:`dpbench.audit.stats`). A point of an ``expect: private``
audit whose tightness is below :data:`UNINFORMATIVE_BELOW` is reported ``uninformative``, not
``pass``: the auditor would have missed a mechanism spending up to ten times less than what it
measured, so the clean result says almost nothing about the claim (docs/audit.md, 'Tightness').
The bound converted from μ_lb under a Gaussian assumption (``epsilon_lower_bound_gdp``) never
enters a verdict.
"""

from __future__ import annotations

import math

__all__ = ["UNINFORMATIVE_BELOW", "VERDICTS", "point_verdict", "tightness"]

#: Tightness below which a clean point of a private mechanism is ``uninformative``.
UNINFORMATIVE_BELOW = 0.1

#: Every verdict a point can get, and what it means (shown in docs/audit.md).
VERDICTS: dict[str, str] = {
    "VIOLATION": "a lower bound exceeds the claim: the claim is refuted at the run's confidence",
    "pass": "no violation, and the bounds reach at least 10 % of the claim",
    "uninformative": "no violation, but the bounds reach less than 10 % of the claim",
    "detected": "a zoo member (expect: violation) was flagged",
    "not detected": "a zoo member (expect: violation) was not flagged",
    "no runs": "no completed batch",
    "n/a": "the point is not applicable (reason in the note)",
}


def _fraction(lower: float, claimed: float) -> float:
    if not (math.isfinite(claimed) and claimed > 0) or math.isnan(lower):
        return math.nan
    return max(lower, 0.0) / claimed


def tightness(epsilon_lb: float, epsilon_claimed: float, mu_lb: float = math.nan,
              mu_claimed: float = math.nan) -> float:
    """max(ε_lb / ε_claimed, μ_lb / μ_claimed) over the finite positive claims (negative bounds
    count as 0); NaN when no claim is stated (e.g. a non-private mechanism)."""
    parts = [f for f in (_fraction(epsilon_lb, epsilon_claimed), _fraction(mu_lb, mu_claimed))
             if not math.isnan(f)]
    return max(parts) if parts else math.nan


def point_verdict(expect: str, applicable: bool, runs_completed: int, violation: bool,
                  tight: float) -> str:
    """The verdict of one point (see :data:`VERDICTS`); ``tight`` is its :func:`tightness`."""
    if not applicable:
        return "n/a"
    if runs_completed == 0:
        return "no runs"
    if expect == "violation":
        return "detected" if violation else "not detected"
    if violation:
        return "VIOLATION"
    return "pass" if tight >= UNINFORMATIVE_BELOW else "uninformative"
