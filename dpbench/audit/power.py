"""The auditor's power: detection rate of each broken-zoo member against the number of runs.

For each member of :data:`dpbench.audit.zoo.DESIGNATED` (and its correct shipped counterpart, for
the false-alarm rate), each budget R (confirmation runs per side, pinned; R/4 selection runs)
and each independent seed, the designated audit point is audited exactly as ``dpbench audit``
audits it (:func:`~dpbench.audit.engine.make_point` and
:func:`~dpbench.audit.engine.audit_in_process`: selection, fixed events, confirmation, the same
bounds), with the point's root seed varied by seed. Every (budget, seed) is an independent
simulation, so the detection fraction at each R is an unbiased estimate of the power at R. A
mechanism counts as detected when ``violation`` is True at the stated per-point level alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..core.registry import get_algorithm, get_problem
from .zoo import DESIGNATED

__all__ = ["BUDGETS", "PowerRow", "detected", "format_power_table", "power_table"]

BUDGETS: tuple[int, ...] = (500, 2000, 8000)
POWER_ROOT_SEED = 20261122


@dataclass(frozen=True)
class PowerRow:
    """Detections of one mechanism at its designated point: ``detected[i]`` of ``seeds`` seeds
    flagged at ``budgets[i]`` runs per side (``None`` = budget not simulated)."""

    member: str
    role: str                 # "broken" or "correct"
    algorithm: str
    params: dict[str, Any]
    point: str
    budgets: tuple[int, ...]
    detected: tuple[int | None, ...]
    seeds: int


def _job_spec(member: str, role: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    d = DESIGNATED[member]
    name, params = (member, d["params"]) if role == "broken" else d["correct"]
    return name, dict(params), d


def detected(member: str, role: str, seed: int, runs: int, alpha: float) -> bool:
    """Whether the audit of ``member`` (or its correct counterpart) at its designated point,
    with ``runs`` confirmation runs per side and root seed ``seed``, flags a violation."""
    from .engine import audit_in_process, make_point

    name, params, d = _job_spec(member, role)
    algorithm = get_algorithm(name)(**params)
    pname, pparams = d["problem"]
    problem = get_problem(pname)(**pparams)
    point = make_point(algorithm, problem, n=d["n"], p=d["p"], epsilon=d["epsilon"],
                       delta=d["delta"], canary=d["canary"], runs=int(runs),
                       selection_runs=max(200, int(runs) // 4),
                       root_seed=POWER_ROOT_SEED + int(seed), name=f"power.{member}.{role}")
    (result,) = audit_in_process([point], alpha)
    return bool(result.violation)


def _run(args: tuple[str, str, int, int, float]) -> bool:
    return detected(*args)


def power_table(members: Sequence[str], *, seeds: int = 10, budgets: Sequence[int] = BUDGETS,
                max_budget: dict[str, int] | None = None, alpha: float,
                processes: int = 1) -> list[PowerRow]:
    """Detection counts of each member and of its correct counterpart over ``seeds`` seeds per
    budget; ``max_budget`` caps the simulated budget per member (larger ones are not run)."""
    jobs: list[tuple[str, str, int, int, float]] = []
    for m in members:
        cap = (max_budget or {}).get(m, max(budgets))
        for role in ("broken", "correct"):
            jobs += [(m, role, s, R, alpha) for R in budgets if R <= cap for s in range(seeds)]
    if processes > 1:
        with ProcessPoolExecutor(max_workers=processes) as pool:
            results = list(pool.map(_run, jobs, chunksize=1))
    else:
        results = [_run(j) for j in jobs]
    rows = []
    for m in members:
        for role in ("broken", "correct"):
            counts: list[int | None] = []
            for R in budgets:
                mine = [r for j, r in zip(jobs, results) if j[:2] == (m, role) and j[3] == R]
                counts.append(int(sum(mine)) if mine else None)
            name, params, d = _job_spec(m, role)
            point = (f"{d['problem'][0]} n={d['n']} p={d['p']} ε={d['epsilon']:g} "
                     f"δ={d['delta']:g} canary={d['canary']}")
            rows.append(PowerRow(m, role, name, params, point, tuple(budgets), tuple(counts),
                                 seeds))
    return rows


def format_power_table(rows: Sequence[PowerRow], *, alpha: float, note: str = "") -> str:
    """A Markdown table: fraction detected per budget (runs per side)."""
    budgets = rows[0].budgets
    head = "| mechanism | role | audit point | " + " | ".join(f"R={R}" for R in budgets) + " |"
    sep = "|" + "---|" * (3 + len(budgets))
    lines = [head, sep]
    for r in rows:
        cells = ["—" if c is None else f"{c / r.seeds:.2f}" for c in r.detected]
        label = r.algorithm + (f" {r.params}" if r.params and r.role == "correct" else "")
        lines.append(f"| {label} | {'zoo: ' + r.member if r.role == 'broken' else 'correct'} | "
                     f"{r.point} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    return text + (f"\n\n{note}" if note else "") + (
        f"\n\nPer-point level alpha = {alpha:.3g}; {rows[0].seeds} independent seeds per cell; "
        "'—' = budget not simulated.")
