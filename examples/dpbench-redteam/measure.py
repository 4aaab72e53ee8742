"""Measure dpbench's privacy auditor against the red team (known true ε); print a Markdown table.

Assumes the package is installed (``pip install -e examples/dpbench-redteam``); installs nothing.
Runs a red-team suite (default ``suites/redteam.yaml``; ``--suite suites/redteam_run.yaml`` for
the run-only copies) through :func:`dpbench.audit.run_audits` into a temporary store (or
``--store PATH``, kept), reads the per-point results back from the store
(:func:`dpbench.audit.open_audit`) and prints, per audit point: the variant, whether its
ledger states μ, the configuration the search chose, the claimed ε, the true ε (worst case over
all neighbouring pairs, at the chosen n, ε, δ) and the true ε of the pair the auditor actually
used (the variant's ``exact_epsilon``), the lower bounds ε_lb and μ_lb, the ε a μ_lb-GDP output
would have at the claimed δ (an assumption, never a verdict), ε_lb as a fraction of the true ε,
whether the point was flagged, the confirmation runs per side and each point's summed worker
seconds; the wall time of the whole run is printed once.

    python examples/dpbench-redteam/measure.py                       # default budget
    python examples/dpbench-redteam/measure.py --suite examples/dpbench-redteam/suites/redteam_run.yaml
    python examples/dpbench-redteam/measure.py --runs 20000 --workers 0   # pinned runs, inline
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import yaml

from dpbench import get_algorithm, get_problem, get_tags, parse_suite
from dpbench.audit import open_audit, run_audits

HERE = Path(__file__).resolve().parent
SUITE = HERE / "suites" / "redteam.yaml"
COLUMNS = ("variant", "ledger", "configuration", "claimed ε", "true ε", "true ε (pair)", "ε_lb",
           "μ_lb", "ε_lb if Gaussian", "ε_lb/true ε", "flagged", "runs/side", "seconds")


def load_suite(path: Path = SUITE, runs: int | None = None):
    """A red-team suite, optionally with pinned ``runs`` (confirmation runs per side) for every
    audit (selection runs: a quarter of them)."""
    raw = yaml.safe_load(path.read_text())
    settings = raw.setdefault("audit", {})
    if runs is not None:
        settings.update(runs=int(runs), selection_runs=max(200, int(runs) // 4))
        for audit in raw["audits"]:
            for key in ("runs", "selection_runs", "budget_s"):
                audit.pop(key, None)
    return parse_suite(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), str(path))


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}g}"


def _config_value(config: str, key: str, default: float) -> float:
    """``key``'s value in a configuration text such as 'sphere, n=10, p=2, ε=1, δ=1e-05'."""
    m = re.search(rf"(?:^|, ){re.escape(key)}=([^,]+)", config)
    return float(m.group(1)) if m else default


#: Point variables of an audit group (docs/audit.md, "Store layout") -> the row's attribute.
VARIABLES: dict[str, type] = {
    "epsilon_claimed": float, "epsilon_lower_bound": float, "epsilon_lower_bound_gdp": float,
    "mu_claimed": float, "mu_lower_bound": float, "true_epsilon": float, "seconds": float,
    "runs_completed": int, "violation": bool, "config": str, "note": str,
}
RENAMED: dict[str, str] = {"epsilon_lower_bound": "epsilon_lb",
                           "epsilon_lower_bound_gdp": "epsilon_lb_gdp", "mu_lower_bound": "mu_lb"}


def _item(v: Any) -> Any:
    """A numpy scalar as the Python value (strings and Python values as they are)."""
    return v.item() if hasattr(v, "item") else v


def audit_points(store: str | Path, name: str) -> list[SimpleNamespace]:
    """The points of the audit group ``name``, in the store's order: ``algorithm``, ``problem``,
    ``canary``, ``grid`` (the other point coordinates) and the variables of :data:`VARIABLES`."""
    ds = open_audit(store, name)
    dims = ds["epsilon_claimed"].dims
    coords = {d: ds[d].values for d in dims}
    values = {v: ds[v].values for v in VARIABLES}
    points = []
    for idx in np.ndindex(*ds["epsilon_claimed"].shape):
        c = {d: _item(coords[d][i]) for d, i in zip(dims, idx)}
        fields = {RENAMED.get(v, v): kind(values[v][idx]) for v, kind in VARIABLES.items()}
        points.append(SimpleNamespace(
            algorithm=str(c["algorithm"]), problem=str(c["problem"]), canary=str(c["canary"]),
            grid={d: c[d] for d in dims if d not in ("algorithm", "problem", "canary")},
            **fields))
    return points


def rows(suite, store: str | Path) -> list[dict]:
    """One row per audit point, from the store, with the analytic worst-case true ε."""
    out = []
    for audit in suite.audits:
        for r in audit_points(store, audit.name):
            spec = next(a for a in audit.algorithms if a.label == r.algorithm)
            algorithm = get_algorithm(spec.name)(**spec.params)
            pspec = next(p for p in audit.problems if p.label == r.problem)
            problem = get_problem(pspec.name)(**pspec.params)
            rho = float(get_tags(problem).isotropic_quadratic[0])
            grid = {**{k: float(v) for k, v in r.grid.items()}}
            n = int(_config_value(r.config, "n", grid.get("n", math.nan)))
            p = int(_config_value(r.config, "p", grid.get("p", math.nan)))
            eps = _config_value(r.config, "ε", grid.get("epsilon", math.nan))
            delta = _config_value(r.config, "δ", grid.get("delta", math.nan))
            worst = algorithm.true_epsilon(n, p, eps, delta, rho) if r.runs_completed else \
                math.nan
            out.append({"audit": audit.name, "expect": audit.expect, "row": r,
                        "variant": spec.name, "true": worst})
    return out


def table(points: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for x in points:
        r = x["row"]
        states_mu = math.isfinite(r.mu_claimed)
        frac = (max(r.epsilon_lb, 0.0) / x["true"]
                if math.isfinite(x["true"]) and x["true"] > 0 else math.nan)
        if r.runs_completed == 0:
            flagged = f"n/a ({r.note})" if r.note else "no runs"
        else:
            flagged = "**yes**" if r.violation else "no"
        cells = [f"`{x['variant']}`", "μ stated" if states_mu else "ε only",
                 r.config or r.canary, _fmt(r.epsilon_claimed), _fmt(x["true"]),
                 _fmt(r.true_epsilon), _fmt(r.epsilon_lb), _fmt(r.mu_lb),
                 _fmt(r.epsilon_lb_gdp), _fmt(frac, 2), flagged, str(r.runs_completed),
                 _fmt(r.seconds, 3)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: Run-only copies checked by ``--harness``: true ε ≥ 2 × claimed at the harness's point.
HARNESS_VARIANTS = ("redteam_gaussian_run", "redteam_laplace_run", "redteam_sigma_2_run",
                    "redteam_sigma_4_run", "redteam_sensitivity_l_over_n_run",
                    "redteam_laplace_half_run", "redteam_constant_seed_run",
                    "redteam_data_start_run", "redteam_no_clipping_run", "redteam_row_leak_run",
                    "redteam_uniform_row_leak_run")


def harness_table() -> str:
    """``dpbench.testing.privacy_audit`` (what ``check_empirical_privacy`` asserts on) on each
    run-only copy, μ not stated: one row per variant, in this process."""
    from dpbench.testing import privacy_audit

    cols = ("variant", "true ε", "true ε (pair)", "ε_lb", "flagged", "configuration",
            "runs/side", "seconds")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name in HARNESS_VARIANTS:
        cls = get_algorithm(name)
        algorithm = cls() if "laplace" in name else cls(state_mu=False)
        t0 = time.perf_counter()
        r = privacy_audit(algorithm)
        wall = time.perf_counter() - t0
        problem = r.point.problem()
        rho = float(get_tags(problem).isotropic_quadratic[0])
        delta = 0.0 if algorithm.privacy == "pure" else r.delta_claimed  # the searched δ chosen
        point = r.point.point                                     # the harness's n, p and ε
        true = algorithm.true_epsilon(int(point["n"]), int(point["p"]), float(point["epsilon"]),
                                      delta, rho)
        lines.append("| " + " | ".join([
            f"`{name}`", _fmt(true), _fmt(r.true_epsilon), _fmt(r.epsilon_lb),
            "**yes**" if r.violation else "no",
            r.config, str(r.runs_completed), f"{wall:.0f}"]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", type=Path, default=SUITE)
    ap.add_argument("--runs", type=int, default=None,
                    help="pinned confirmation runs per side for every audit (default: "
                         "dpbench's time budget)")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: one per core; 0 = inline, no dask)")
    ap.add_argument("--backend", default="dask", choices=("dask", "processes", "inline"))
    ap.add_argument("--store", type=Path, default=None,
                    help="keep the store here (default: a temporary directory, deleted)")
    ap.add_argument("--harness", action="store_true",
                    help="instead: the check harness's privacy audit on the run-only copies")
    args = ap.parse_args(argv)
    if args.harness:
        print(harness_table())
        return 0

    suite = load_suite(args.suite, args.runs)
    with tempfile.TemporaryDirectory(prefix="redteam-") as tmp:
        store = args.store if args.store is not None else Path(tmp) / "redteam.zarr"
        t0 = time.perf_counter()
        summary = run_audits(suite, store, workers=args.workers, backend=args.backend,
                             progress=False)
        seconds = time.perf_counter() - t0
        points = rows(suite, store)
    print(table(points))
    print()
    print(f"{summary.n_points} audit points, α = {summary.alpha_total:g} family-wise "
          f"({summary.alpha_per_point:.3g} per point); {summary.computed} batches computed, "
          f"{summary.failed} failed; wall time of the whole run {seconds:.1f} s "
          f"(backend {summary.backend}; 'seconds' is each point's summed batch time on its "
          "worker).")
    controls = [x for x in points if x["expect"] == "private" and x["row"].violation]
    print(f"controls flagged: {len(controls)}; broken entries never flagged: "
          f"{', '.join(f'{a}/{label}' for a, label in summary.missed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
