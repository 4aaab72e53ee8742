"""Measure dpbench's privacy auditor against the red team (known true ε); print a Markdown table.

Assumes the package is installed (``pip install -e examples/dpbench-redteam``); installs nothing.
Runs ``suites/redteam.yaml`` through :func:`dpbench.audit.run_audits` into a temporary store
(or ``--store PATH``, kept), reads the per-point results back from the store
(:func:`dpbench.audit.open_audit`) and prints, per audit point: the variant, whether its ledger
states μ, the canary, the claimed ε, the true ε (worst case over all neighbouring pairs) and the
true ε of the pair the auditor actually used, the lower bounds ε_lb and μ_lb, the ε a μ_lb-GDP
(Gaussian) output would have at the claimed δ (an assumption, never a verdict), dpbench's tightness
(max(ε_lb/ε, μ_lb/μ) over the stated claims), ε_lb as a fraction of the true ε, whether the point
was flagged, the runs per side and each point's summed batch time (``seconds``); the wall time of
the whole run is printed once.

    python examples/dpbench-redteam/measure.py                    # default budget, 10^6 runs/side
    python examples/dpbench-redteam/measure.py --runs 4000 --workers 0
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
import time
from pathlib import Path

import yaml

from dpbench.audit import open_audit, plan_audits, run_audits
from dpbench.audit.verdicts import tightness
from dpbench.config.suite import parse_suite
from dpbench.core.neighbours import neighbouring_pair
from dpbench.core.registry import get_algorithm, get_problem
from dpbench.core.tags import get_tags

HERE = Path(__file__).resolve().parent
SUITE = HERE / "suites" / "redteam.yaml"
COLUMNS = ("variant", "ledger", "canary", "claimed ε", "true ε", "true ε (pair)", "ε_lb", "μ_lb",
           "ε_lb if Gaussian", "tightness", "ε_lb/true ε", "flagged", "runs/side", "seconds")


def load_suite(path: Path = SUITE, runs: int | None = None, batch: int | None = None):
    """The red-team suite, optionally at another budget (``runs`` per side for every audit)."""
    raw = yaml.safe_load(path.read_text())
    settings = raw.setdefault("audit", {})
    if batch is not None:
        settings["batch"] = batch
    if runs is not None:
        settings["runs"] = runs
        for audit in raw["audits"]:
            audit.pop("runs", None)
    return parse_suite(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), str(path))


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}g}"


def rows(suite, store: str | Path) -> list[dict]:
    """One row per audit point, from the store, with the analytic true ε of each variant."""
    pairs = {}
    for pt in plan_audits(suite).points:  # rebuild the pair the engine audits (same generator)
        problem = pt.problem_cls(**pt.problem_params)
        pairs[(pt.audit, pt.algorithm_label, pt.problem_label, pt.canary)] = neighbouring_pair(
            problem, int(pt.point["n"]), int(pt.point["p"]), pt.canary, pt.pair_rng())
    out = []
    for audit in suite.audits:
        ds = open_audit(store, audit.name)
        for label, pl, n, p, eps, delta, canary in itertools.product(
                *(ds[d].values for d in ("algorithm", "problem", "n", "p", "epsilon", "delta",
                                         "canary"))):
            spec = ds.attrs["algorithms"][str(label)]
            algorithm = get_algorithm(spec["algorithm"])(**spec["params"])
            pspec = ds.attrs["problems"][str(pl)]
            rho = float(get_tags(get_problem(pspec["problem"])(**pspec["params"]))
                        .isotropic_quadratic[0])
            sel = dict(algorithm=label, problem=pl, n=n, p=p, epsilon=eps, delta=delta,
                       canary=canary)
            point = {v: ds[v].sel(sel).values.item() for v in (
                "epsilon_lower_bound", "mu_lower_bound", "epsilon_lower_bound_gdp",
                "epsilon_claimed", "mu_claimed",
                "violation", "runs_completed", "note", "seconds")}
            pair = pairs.get((audit.name, str(label), str(pl), str(canary)))
            pair_eps = (math.nan if pair is None else
                        algorithm.pair_epsilon(pair.d0.X, pair.d1.X, float(eps), float(delta), rho))
            true = algorithm.true_epsilon(int(n), int(p), float(eps), float(delta), rho)
            out.append({"audit": audit.name, "expect": audit.expect, "label": str(label),
                        "variant": spec["algorithm"], "canary": str(canary), "true": true,
                        "pair": pair_eps, **point})
    return out


def table(points: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in points:
        states_mu = math.isfinite(r["mu_claimed"])
        tight = tightness(r["epsilon_lower_bound"], r["epsilon_claimed"], r["mu_lower_bound"],
                          r["mu_claimed"])
        frac = (max(r["epsilon_lower_bound"], 0.0) / r["true"]
                if math.isfinite(r["true"]) and r["true"] > 0 else math.nan)
        if r["runs_completed"] == 0:
            flagged = f"n/a ({r['note']})" if r["note"] else "no runs"
        else:
            flagged = "yes" if r["violation"] else "no"
        cells = [f"`{r['variant']}`", "μ stated" if states_mu else "ε only", r["canary"],
                 _fmt(r["epsilon_claimed"]), _fmt(r["true"]), _fmt(r["pair"]),
                 _fmt(r["epsilon_lower_bound"]), _fmt(r["mu_lower_bound"]),
                 _fmt(r["epsilon_lower_bound_gdp"]), _fmt(tight, 2),
                 _fmt(frac, 2), flagged, str(r["runs_completed"]), _fmt(r["seconds"], 2)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", type=Path, default=SUITE)
    ap.add_argument("--runs", type=int, default=None,
                    help="runs per side for every audit (default: dpbench's default budget)")
    ap.add_argument("--batch", type=int, default=None, help="runs per batch (cell)")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: one per core; 0 = inline, no dask)")
    ap.add_argument("--backend", default="dask", choices=("dask", "processes", "inline"))
    ap.add_argument("--store", type=Path, default=None,
                    help="keep the store here (default: a temporary directory, deleted)")
    args = ap.parse_args(argv)

    suite = load_suite(args.suite, args.runs, args.batch)
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
    controls = [r for r in points if r["expect"] == "private" and r["violation"]]
    print(f"controls flagged: {len(controls)}; broken entries never flagged: "
          f"{', '.join(f'{a}/{label}' for a, label in summary.missed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
