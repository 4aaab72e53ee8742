"""Audit diffprivlib's Jacobian correction on the worst pair: the canary on a zero background.

dpbench's negation canaries leave a margin loss's Hessian φ''·xxᵀ unchanged, so the Jacobian term
of objective perturbation's privacy loss is 0 on them; the ``zero`` canary exercises it but on
generated background rows (which dilute it). This script audits the pair that attains the
violation, in p = 1 (docs/diffprivlib.md):

    D  = {(q, +1), (0, +1)},    D′ = {(0, +1), (0, +1)}    (replace-one; ‖x‖ ≤ q on both)

through the adapter (``diffprivlib_logistic``, which calls diffprivlib 0.6.6 with data_norm = q
and C = 1, the default for a ridge-0 problem). The score is −|w − w₀|, with w₀ the point where the
exact-argmin privacy loss peaks (:mod:`dpbench_diffprivlib.exact`, computed from the public
calibration before any run), so the threshold events of dpbench's statistics are intervals
around w₀. The bound is dpbench's own (:func:`dpbench.testing.audit_bound`: event chosen on
the first half of the runs, Clopper–Pearson on the second half), at level ``--alpha`` over all
configurations audited in one call (Bonferroni).

    python scripts/jacobian_audit.py --runs 100000 --norms 1 12 --scalings shipped unit_norm
    python scripts/jacobian_audit.py --runs 100000 --norms 12 --fixed-event

Prints one row per (data norm, scaling): the exact-argmin true ε on this pair, the empirical
lower bound and the verdict. Runs in ``--procs`` processes (one fit ≈ 1 ms).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpbench_diffprivlib.calibration import cms11_calibration, shipped_calibration  # noqa: E402
from dpbench_diffprivlib.exact import cdf, true_epsilon  # noqa: E402
from dpbench_diffprivlib.logistic import DiffprivlibLogistic  # noqa: E402

from dpbench import Dataset, get_problem  # noqa: E402
from dpbench.testing import audit_bound, epsilon_lower_bounds  # noqa: E402

#: dpbench's built-in logistic loss (``logistic``), by its registered name.
Logistic = get_problem("logistic")


def pair(q: float) -> tuple[Dataset, Dataset]:
    y = np.array([1.0, 1.0])
    return (Dataset(np.array([[q], [0.0]]), y, {}), Dataset(np.array([[0.0], [0.0]]), y, {}))


def _chunk(args: tuple) -> tuple[np.ndarray, np.ndarray]:
    q, scaling, epsilon, side, start, count, seed = args
    problem = Logistic(x_norm=q)
    algorithm = DiffprivlibLogistic(scaling=scaling)
    data = pair(q)[side]
    root = np.random.SeedSequence([seed, side])
    rngs = [np.random.default_rng(s) for s in root.spawn(start + count)[start:]]
    thetas = np.array([algorithm.release(data, problem, epsilon=epsilon, delta=0.0, rng=g).theta[0]
                       for g in rngs])
    return thetas, np.arange(start, start + count)


def planned_interval(d0: Dataset, d1: Dataset, cal, runs: int, alpha: float
                     ) -> tuple[float, float, float]:
    """The interval (t1, t2] whose *expected* Clopper–Pearson lower bound at ``runs`` runs per
    side is largest, from the exact law of the public calibration alone (no run is looked at):
    an event fixed in advance, so every run confirms. Returns (t1, t2, expected ε_lb)."""
    t = np.linspace(-0.3, 0.3, 601)
    c0 = cdf(t, d0.X[:, 0], d0.y, cal)
    c1 = cdf(t, d1.X[:, 0], d1.y, cal)
    p0 = np.clip(c0[None, :] - c0[:, None], 0.0, 1.0)
    p1 = np.clip(c1[None, :] - c1[:, None], 0.0, 1.0)
    expected = epsilon_lower_bounds(np.floor(runs * p0), np.ceil(runs * p1), runs, 0.0,
                                    alpha / 2.0)
    i, j = np.unravel_index(int(np.nanargmax(expected)), expected.shape)
    return float(t[i]), float(t[j]), float(expected[i, j])


def audit(q: float, scaling: str, epsilon: float, runs: int, procs: int, alpha: float,
          seed: int, fixed_event: bool = False) -> dict:
    cal = (shipped_calibration if scaling == "shipped" else cms11_calibration)(epsilon, q, 1.0)
    d0, d1 = pair(q)
    exact, w0 = true_epsilon((d0.X[:, 0], d0.y), (d1.X[:, 0], d1.y), cal,
                             grid=np.linspace(-1, 1, 20001))
    chunks = max(1, procs * 4)
    size = math.ceil(runs / chunks)
    jobs = [(q, scaling, epsilon, side, k * size, min(size, runs - k * size), seed)
            for side in (0, 1) for k in range(chunks) if k * size < runs]
    out = {0: np.empty(runs), 1: np.empty(runs)}
    t0 = time.time()
    with ProcessPoolExecutor(procs) as pool:
        for job, (thetas, idx) in zip(jobs, pool.map(_chunk, jobs)):
            out[job[3]][idx] = thetas
    if fixed_event:
        t1, t2, planned = planned_interval(d0, d1, cal, runs, alpha)
        k0 = int(np.sum((out[0] > t1) & (out[0] <= t2)))
        k1 = int(np.sum((out[1] > t1) & (out[1] <= t2)))
        eps_lb = max(0.0, float(epsilon_lower_bounds(np.array([k0]), np.array([k1]), runs, 0.0,
                                                     alpha / 2.0)[0]))
        return {"q": q, "scaling": scaling, "epsilon": epsilon, "runs": runs, "w0": w0,
                "exact_true_eps": exact, "eps_lb": eps_lb, "violation": eps_lb > epsilon,
                "event": f"w in ({t1:.3f}, {t2:.3f}] fixed from the exact law (expected eps_lb "
                         f"{planned:.2f}): {k0} of {runs} releases on D, {k1} on D'",
                "seconds": time.time() - t0}
    s0, s1 = -np.abs(out[0] - w0), -np.abs(out[1] - w0)
    select = np.arange(runs) < runs // 2
    bound = audit_bound(s0, s1, select, epsilon_claimed=epsilon, delta_claimed=0.0,
                        mu_claimed=math.nan, alpha=alpha)
    return {"q": q, "scaling": scaling, "epsilon": epsilon, "runs": runs, "w0": w0,
            "exact_true_eps": exact, "eps_lb": bound.epsilon_lb, "violation": bound.violation,
            "event": bound.event, "seconds": time.time() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000, help="runs per side per configuration")
    ap.add_argument("--norms", type=float, nargs="+", default=[1.0, 12.0])
    ap.add_argument("--scalings", nargs="+", default=["shipped"],
                    choices=["shipped", "unit_norm"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--alpha", type=float, default=0.05, help="family-wise level of the call")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--fixed-event", action="store_true",
                    help="use the interval chosen from the exact law before any run (every run "
                         "confirms) instead of selecting it on half of the runs")
    args = ap.parse_args()
    configs = [(q, s) for q in args.norms for s in args.scalings]
    level = args.alpha / len(configs)
    print(f"{'q':>5} {'scaling':>9} {'eps':>4} {'runs':>7} {'w0':>7} {'exact eps':>9} "
          f"{'eps_lb':>7} {'verdict':>9} {'s':>6}  event")
    for q, scaling in configs:
        r = audit(q, scaling, args.epsilon, args.runs, args.procs, level, args.seed,
                  args.fixed_event)
        verdict = "VIOLATION" if r["violation"] else "pass"
        print(f"{q:5g} {scaling:>9} {r['epsilon']:4g} {r['runs']:7d} {r['w0']:7.4f} "
              f"{r['exact_true_eps']:9.3f} {r['eps_lb']:7.3f} {verdict:>9} {r['seconds']:6.0f}  "
              f"{r['event']}", flush=True)


if __name__ == "__main__":
    main()
