"""Audit results for people: the ``dpbench audit`` console table and the report's audit section.

The report section is computed from the store alone (the per-point variables written by
:func:`dpbench.audit.engine.compute_bounds`): the audit gap (claimed ε − empirical lower bound)
per mechanism and grid point — a negative gap is a proven violation of the claim at the stated
confidence —, the zoo detections (``expect: violation`` audits), runs completed vs planned, and
the level. Power-vs-runs tables (:mod:`dpbench.audit.power`) are shown when the store holds
them (root attribute ``audit_power``) or when ``reports/audit_power.md`` exists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.table import Table

from ..store.cube import Store
from .store import AUDIT_GROUP, audit_names, group_path
from .verdicts import UNINFORMATIVE_BELOW, point_verdict, tightness

if TYPE_CHECKING:
    from .engine import AuditSummary, PointResult

#: Where :mod:`dpbench.audit.power` writes its table (shown in the report when present).
POWER_TABLE = Path("reports") / "audit_power.md"


def _f(x: float, digits: int = 3) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def audit_table(results: Sequence[PointResult]) -> Table:
    """One row per audit point: the configuration searched to, claims, lower bounds, the exact ε
    where the mechanism computes it, confirmation runs, resolution and verdict."""
    t = Table(title="privacy audit (lower bounds at the per-point level; resolution: the "
                    "smallest true ε this budget detects)")
    for col in ("audit", "algorithm", "problem", "configuration", "ε claimed", "ε_lb", "true ε",
                "μ claimed", "μ_lb", "runs", "resolution", "tightness", "verdict"):
        t.add_column(col, justify="left" if col in ("audit", "algorithm", "problem",
                                                    "configuration", "verdict") else "right",
                     no_wrap=col in ("verdict", "runs"))
    for r in results:
        pt = r.point
        t.add_row(pt.audit, pt.algorithm_label, pt.problem_label,
                  r.config or (pt.canary if r.applicable else "n/a"),
                  _f(r.epsilon_claimed), _f(r.epsilon_lb), _f(r.true_epsilon),
                  _f(r.mu_claimed), _f(r.mu_lb), f"{r.runs_completed}/{r.runs_planned}",
                  _f(r.resolution), _f(r.tightness, 2), r.verdict)
    return t


def summary_lines(summary: AuditSummary) -> list[str]:
    """The closing lines of ``dpbench audit``: counts, level and the verdict."""
    applicable = [r for r in summary.results if r.applicable]
    lines = [f"store: {summary.store}",
             f"backend: {summary.backend}; {summary.computed} batches computed, {summary.failed} "
             f"failed in {summary.seconds:.1f} s",
             f"{len(applicable)} audit points (of {len(summary.results)}; the others not "
             f"applicable); alpha = {summary.alpha_total:g} over the run, "
             f"{summary.alpha_per_point:.3g} per point (Bonferroni)"]
    short = [r for r in applicable if r.runs_completed < r.runs_planned]
    if short:
        lines.append(f"{len(short)} point(s) with lost runs: bounds use the completed runs only; "
                     "run the same command again to complete them")
    for r in summary.violations:
        pt = r.point
        lines.append(f"PRIVACY VIOLATION: {pt.audit}/{pt.algorithm_label} on {pt.problem_label} "
                     f"({r.config}): ε_lb = {r.epsilon_lb:.4g} > claimed "
                     f"{r.epsilon_claimed:.4g} (μ_lb = {_f(r.mu_lb)}, claimed μ = "
                     f"{_f(r.mu_claimed)}); event {r.event}")
    private = [r for r in applicable if r.point.expect == "private" and r.runs_completed]
    if summary.uninformative:
        lines.append(f"{len(summary.uninformative)} of {len(private)} point(s) of private "
                     f"mechanisms uninformative: their lower bounds reach less than "
                     f"{UNINFORMATIVE_BELOW:.0%} of the claim (tightness = ε_lb/ε claimed, or "
                     "μ_lb/μ claimed), so their clean result says little about the claim")
    for audit, algo in summary.missed:
        lines.append(f"NOT DETECTED: {audit}/{algo} (expect: violation) was flagged at no point")
    lines.append("audit: OK — no violation of a private mechanism, every zoo member detected"
                 if summary.ok else "audit: FAILED")
    return lines


# --- report section (from the store) ---------------------------------------------------------

@dataclass
class AuditRow:
    algorithm: str
    problem: str
    grid: dict[str, Any]
    canary: str
    config: str
    event: str
    epsilon_claimed: float
    epsilon_lb: float
    epsilon_lb_gdp: float
    mu_claimed: float
    mu_lb: float
    gap: float
    true_epsilon: float
    resolution: float
    runs_completed: int
    runs_planned: int
    selection_runs: int
    configurations: int
    seconds: float
    violation: bool
    tightness: float
    verdict: str
    note: str

    @property
    def grid_text(self) -> str:
        return ", ".join(f"{k}={_f(v, 4) if isinstance(v, float) else v}"
                         for k, v in self.grid.items())

    @property
    def reach(self) -> float:
        """ε_lb / true ε: how much of the mechanism's real privacy loss the audit measured."""
        if not (math.isfinite(self.true_epsilon) and self.true_epsilon > 0):
            return math.nan
        return max(self.epsilon_lb, 0.0) / self.true_epsilon

    @property
    def slack(self) -> float:
        """true ε / claimed ε: how loose the claim is on this instance (< 1: the claim is
        conservative here; > 1: the claim is wrong)."""
        if not (math.isfinite(self.true_epsilon) and self.epsilon_claimed > 0):
            return math.nan
        return self.true_epsilon / self.epsilon_claimed


@dataclass
class AuditSection:
    name: str
    description: str
    expect: str
    alpha_total: float
    alpha_per_point: float
    audit_points: int
    runs_completed: int
    runs_planned: int
    budget_s: float
    rows: list[AuditRow] = field(default_factory=list)
    detections: list[dict[str, Any]] = field(default_factory=list)

    @property
    def violations(self) -> list[AuditRow]:
        return [r for r in self.rows if r.violation and self.expect == "private"]

    @property
    def uninformative(self) -> list[AuditRow]:
        return [r for r in self.rows if r.verdict == "uninformative"]

    @property
    def judged(self) -> list[AuditRow]:
        """Rows of a private mechanism with completed runs (pass, uninformative or violation)."""
        return [r for r in self.rows if r.verdict in ("pass", "uninformative", "VIOLATION")]


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def audit_section(store: Store, name: str) -> AuditSection:
    """The report's view of one audit group."""
    g = store.root[group_path(name)]
    attrs = dict(g.attrs)
    dims = tuple(g["epsilon_claimed"].metadata.dimension_names or ())
    coords = {d: [_py(v) for v in np.asarray(g[d][...])] for d in dims}
    floats = ("epsilon_claimed", "epsilon_lower_bound", "epsilon_lower_bound_gdp", "mu_claimed",
              "mu_lower_bound", "audit_gap", "true_epsilon", "resolution_epsilon", "seconds")
    ints = ("runs_completed", "runs_planned", "selection_runs", "configurations")
    values = {v: np.asarray(g[v][...]) for v in (*floats, *ints, "violation", "note", "config",
                                                 "event")}
    expect = str(attrs.get("expect", "private"))
    sec = AuditSection(name, str(attrs.get("description", "")), expect,
                       float(attrs.get("alpha_total", math.nan)),
                       float(attrs.get("alpha_per_point", math.nan)),
                       int(attrs.get("audit_points", 0)),
                       int(values["runs_completed"].sum()), int(values["runs_planned"].sum()),
                       float(attrs.get("budget_s") or math.nan))
    axes = [d for d in dims if d not in ("algorithm", "problem", "canary")]
    for idx in np.ndindex(*values["runs_planned"].shape):
        c = {d: coords[d][i] for d, i in zip(dims, idx)}
        f = {v: float(values[v][idx]) for v in floats}
        k = {v: int(values[v][idx]) for v in ints}
        viol = bool(values["violation"][idx])
        tight = tightness(f["epsilon_lower_bound"], f["epsilon_claimed"], f["mu_lower_bound"],
                          f["mu_claimed"])
        sec.rows.append(AuditRow(
            str(c["algorithm"]), str(c["problem"]), {a: c[a] for a in axes}, str(c["canary"]),
            str(values["config"][idx]), str(values["event"][idx]), f["epsilon_claimed"],
            f["epsilon_lower_bound"], f["epsilon_lower_bound_gdp"], f["mu_claimed"],
            f["mu_lower_bound"], f["audit_gap"], f["true_epsilon"], f["resolution_epsilon"],
            k["runs_completed"], k["runs_planned"], k["selection_runs"], k["configurations"],
            f["seconds"], viol, tight,
            point_verdict(expect, k["configurations"] > 0, k["runs_completed"], viol, tight),
            str(values["note"][idx])))
    if expect == "violation":
        for algo in coords["algorithm"]:
            mine = [r for r in sec.rows if r.algorithm == algo and r.configurations > 0]
            hits = [r for r in mine if r.violation]
            sec.detections.append({"algorithm": str(algo), "points": len(mine),
                                   "detected": len(hits),
                                   "max_epsilon_lb": max((r.epsilon_lb for r in hits),
                                                         default=math.nan)})
    return sec


#: A mechanism whose bounds stay below 10 % of its claim still informs when its designated
#: instance's ε_lb reaches this share of the instance's exact true ε (docs/audit.md).
REACH_INFORMATIVE = 0.5

#: Audits whose name starts so hold the mechanisms' designated instances (docs/audit.md).
DESIGNATED_PREFIX = "designated_"


def mechanism_tightness(sections: Sequence[AuditSection]) -> list[dict[str, Any]]:
    """Per private mechanism (algorithm label) over every ``expect: private`` audit of the run:
    the points judged, the violations, the best tightness and where it was reached, and — at
    its designated instance (the point of an audit named ``designated_…``; without one, the point
    with an exact ε where the audit reached the largest share of it) — the true ε, the share
    ε_lb / true ε and the claim's slack true ε / claimed ε.
    Summary: ``VIOLATION``, ``informative`` (some point reaches 10 % of the claim), informative
    because the claim is loose (below 10 % of the claim, but the designated instance's ε_lb
    reaches :data:`REACH_INFORMATIVE` of its exact true ε: the pass measured the real loss, the
    slack shows how far the claim is above it) or ``uninformative everywhere``."""
    best: dict[str, dict[str, Any]] = {}
    for sec in sections:
        if sec.expect != "private":
            continue
        for r in sec.judged:
            row = best.setdefault(r.algorithm, {
                "algorithm": r.algorithm, "points": 0, "violations": 0, "tightness": -math.inf,
                "where": "", "true_epsilon": math.nan, "epsilon_lb": math.nan,
                "epsilon_claimed": math.nan, "reach": math.nan, "slack": math.nan,
                "instance": "", "designated": False})
            row["points"] += 1
            row["violations"] += int(r.violation)
            t = r.tightness if math.isfinite(r.tightness) else -math.inf
            where = f"{sec.name}: {r.problem}, {r.config or r.canary}, {r.runs_completed} runs"
            if t > row["tightness"]:
                row["tightness"], row["where"] = t, where
            designated = sec.name.startswith(DESIGNATED_PREFIX)
            if designated and not row["designated"] or (
                    designated == row["designated"] and math.isfinite(r.reach)
                    and not (row["reach"] >= r.reach)):
                row["designated"] = designated
                row.update(true_epsilon=r.true_epsilon, epsilon_lb=r.epsilon_lb,
                           epsilon_claimed=r.epsilon_claimed, reach=r.reach, slack=r.slack,
                           instance=where)
    for row in best.values():
        row["verdict"] = ("VIOLATION" if row["violations"] else
                          "informative" if row["tightness"] >= UNINFORMATIVE_BELOW else
                          "informative (the claim is loose: the audit reached "
                          f"{row['reach']:.2f} of the true ε)"
                          if row["reach"] >= REACH_INFORMATIVE else
                          "uninformative everywhere")
        if not math.isfinite(row["tightness"]):
            row["tightness"] = math.nan
    return sorted(best.values(), key=lambda r: r["algorithm"])


def power_markdown(store: Store) -> str:
    """The power-vs-runs table: stored in the store (``audit_power``) or ``reports/audit_power.md``."""
    stored = store.root.attrs.get("audit_power")
    if isinstance(stored, str) and stored.strip():
        return stored
    if POWER_TABLE.is_file():
        return POWER_TABLE.read_text(encoding="utf-8")
    return ""


def audit_context(store: Store) -> dict[str, Any]:
    """The report context entries of the audits (empty lists when the store has none)."""
    names = audit_names(store) if AUDIT_GROUP in store.root else []
    sections = [audit_section(store, n) for n in names]
    return {"audits": sections, "audit_tightness": mechanism_tightness(sections),
            "audit_power": power_markdown(store) if names else ""}
