"""The auditor's power: detection rate of each broken-zoo member against the number of runs.

For each member of :data:`dpbench.audit.zoo.DESIGNATED` (and its correct shipped counterpart, for
the false-alarm rate) and each independent seed, the designated audit point is run in batches
exactly as the audit engine runs it (:func:`~dpbench.audit.runs.run_audit_batch`; within each
batch the first half selects and the second half confirms), and the bound
(:func:`~dpbench.audit.stats.audit_bound`) is computed on the first R runs per side for every
budget R. Budgets are prefixes of ONE simulation per seed: the detection fraction at each R is an
unbiased estimate of the power at R (seeds are independent), while the rates at different R of
the same table are correlated. A mechanism counts as detected when ``violation`` is True at the
stated per-point level alpha.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.neighbours import neighbouring_pair
from ..core.registry import get_algorithm, get_problem
from ..core.seeding import make_rng
from .runs import run_audit_batch
from .stats import audit_bound
from .zoo import DESIGNATED

__all__ = ["BUDGETS", "PowerRow", "detections", "format_power_table", "power_table",
           "simulate_seed"]

BUDGETS: tuple[int, ...] = (250, 500, 1000, 2000, 5000, 10000, 20000)
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


def detections(scores0: np.ndarray, scores1: np.ndarray, budgets: Sequence[int], batch: int, *,
               epsilon_claimed: float, delta_claimed: float, mu_claimed: float,
               alpha: float) -> list[bool]:
    """``violation`` of the audit on the first R runs per side, for each budget R (a multiple of
    ``batch``; the first half of every batch selects)."""
    out = []
    for R in budgets:
        sel = (np.arange(R) % batch) < batch // 2
        b = audit_bound(scores0[:R], scores1[:R], sel, epsilon_claimed=epsilon_claimed,
                        delta_claimed=delta_claimed, mu_claimed=mu_claimed, alpha=alpha)
        out.append(b.violation)
    return out


def simulate_seed(member: str, role: str, seed: int, budgets: Sequence[int], batch: int,
                  alpha: float) -> list[bool]:
    """Detections at every budget for one seed (one simulation of max(budgets) runs per side)."""
    name, params, d = _job_spec(member, role)
    algorithm = get_algorithm(name)(**params)
    pname, pparams = d["problem"]
    problem = get_problem(pname)(**pparams)
    ident = {"power": member, "role": role, "seed": int(seed)}
    pair = neighbouring_pair(problem, d["n"], d["p"], d["canary"],
                             make_rng(ident, POWER_ROOT_SEED))
    s0, s1, claims = [], [], []
    for b in range(max(budgets) // batch):
        out = run_audit_batch(algorithm, problem, pair, epsilon=d["epsilon"], delta=d["delta"],
                              runs=batch, rng=make_rng({**ident, "batch": b}, POWER_ROOT_SEED))
        s0.append(out.scores0)
        s1.append(out.scores1)
        claims.append((out.epsilon_claimed, out.delta_claimed, out.mu_claimed))
    eps = max(c[0] for c in claims)
    dlt = max(c[1] for c in claims)
    mus = [c[2] for c in claims]
    mu = math.nan if any(math.isnan(m) for m in mus) else max(mus)
    return detections(np.concatenate(s0), np.concatenate(s1), budgets, batch,
                      epsilon_claimed=eps, delta_claimed=dlt, mu_claimed=mu, alpha=alpha)


def _run(args: tuple[str, str, int, tuple[int, ...], int, float]) -> list[bool]:
    return simulate_seed(*args)


def power_table(members: Sequence[str], *, seeds: int = 20, budgets: Sequence[int] = BUDGETS,
                max_budget: dict[str, int] | None = None, batch: int = 250, alpha: float,
                processes: int = 1) -> list[PowerRow]:
    """Detection counts of each member and of its correct counterpart over ``seeds`` seeds.

    ``max_budget`` caps the simulated budget per member (larger budgets are reported as not
    run); every budget must be a multiple of ``batch``.
    """
    if any(R % batch for R in budgets):
        raise ValueError(f"every budget must be a multiple of batch={batch}, got {list(budgets)}")
    jobs: list[tuple[str, str, int, tuple[int, ...], int, float]] = []
    keys: list[tuple[str, str]] = []
    for m in members:
        cap = (max_budget or {}).get(m, max(budgets))
        run_b = tuple(R for R in budgets if R <= cap)
        for role in ("broken", "correct"):
            keys.append((m, role))
            jobs += [(m, role, s, run_b, batch, alpha) for s in range(seeds)]
    if processes > 1:
        with ProcessPoolExecutor(max_workers=processes) as pool:
            results = list(pool.map(_run, jobs, chunksize=1))
    else:
        results = [_run(j) for j in jobs]
    rows = []
    for m, role in keys:
        mine = [r for j, r in zip(jobs, results) if j[0] == m and j[1] == role]
        run_b = next(j[3] for j in jobs if j[0] == m and j[1] == role)
        counts: list[int | None] = [
            int(sum(r[run_b.index(R)] for r in mine)) if R in run_b else None for R in budgets]
        name, params, d = _job_spec(m, role)
        point = (f"{d['problem'][0]} n={d['n']} p={d['p']} ε={d['epsilon']:g} δ={d['delta']:g} "
                 f"canary={d['canary']}")
        rows.append(PowerRow(m, role, name, params, point, tuple(budgets), tuple(counts), seeds))
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
