"""The per-mechanism audit summary (``dpbench.audit.report.mechanism_tightness``): the designated
instance is the one of the ``designated_…`` audit whatever other points reach, and a pass far
below a loose claim informs only when the audit reached the instance's exact true ε."""

from __future__ import annotations

import math

from dpbench.audit.report import AuditRow, AuditSection, mechanism_tightness


def _row(eps_lb: float, true_eps: float, claimed: float = 1.0) -> AuditRow:
    return AuditRow(
        algorithm="m", problem="lb_lin", grid={"n": 2}, canary="sphere", config="sphere, n=2",
        event="", epsilon_claimed=claimed, epsilon_lb=eps_lb, epsilon_lb_gdp=0.0,
        mu_claimed=math.nan, mu_lb=0.0, gap=claimed - eps_lb, true_epsilon=true_eps,
        resolution=1.0, runs_completed=1000, runs_planned=1000, selection_runs=100,
        configurations=1, seconds=1.0, violation=False, tightness=eps_lb / claimed,
        verdict="pass" if eps_lb / claimed >= 0.1 else "uninformative", note="")


def _section(name: str, *rows: AuditRow) -> AuditSection:
    return AuditSection(name, "", "private", 0.05, 0.01, len(rows), 1000, 1000, 60.0,
                        rows=list(rows))


def test_the_designated_audit_gives_the_instance() -> None:
    other = _section("coverage", _row(0.5, 0.5))                  # reach 1.0, not designated
    designated = _section("designated_m", _row(0.3, 0.6))         # reach 0.5
    [t] = mechanism_tightness([other, designated])
    assert t["instance"].startswith("designated_m") and t["reach"] == 0.5
    [t] = mechanism_tightness([designated, other])                # order does not matter
    assert t["instance"].startswith("designated_m")
    assert t["tightness"] == 0.5 and t["verdict"] == "informative"


def test_a_loose_claim_informs_only_through_the_true_epsilon() -> None:
    reached = _section("designated_m", _row(0.04, 0.05, claimed=8.0))   # 0.5 % of the claim
    [t] = mechanism_tightness([reached])
    assert t["verdict"].startswith("informative (the claim is loose")
    missed = _section("designated_m", _row(0.01, 0.05, claimed=8.0))    # reach 0.2
    assert mechanism_tightness([missed])[0]["verdict"] == "uninformative everywhere"
    unknown = _section("designated_m", _row(0.04, math.nan, claimed=8.0))  # no exact ε
    assert mechanism_tightness([unknown])[0]["verdict"] == "uninformative everywhere"
