"""Audit throughput: mechanism runs per second through the audit path vs a plain loop.

For a cheap mechanism (output perturbation on ridge-logistic) and a costlier one (noisy SGD on
logistic), both at n = 10, p = 2, ε = 1 (δ = 1e-5 for noisy SGD), sphere canary:

* **loop**: ``algorithm.release`` called in a plain Python loop in this process on D and D′
  (the same work an audit does, without storage or statistics);
* **audit inline**: ``run_audits(..., workers=0)`` — planning, batches, zarr writes, bounds, in
  this process;
* **audit on N workers**: the same on a warm N-worker LocalCluster (start-up measured separately
  and excluded, as in ``bench_engine.py``).

Runs are counted on both sides (a point with R runs per side is 2R mechanism runs).

**Vectorised path** (``run_batch``, output perturbation only among the shipped mechanisms): a
plain numpy reference that produces the same outputs (one solve, the Gamma-norm noise drawn for
all runs at once, projected and scored) against ``run_audit_batch`` through ``release_batch``,
and one audit point at the default vectorised budget (10^6 runs per side, batches of 50 000) end
to end inline, reported as runs per audit point per minute (target ≥ 10^6, issue 15).

Run: ``python benchmarks/bench_audit.py [--runs 4000] [--batch 500] [--points 4] [--workers 2]``.
Each figure is printed on a line of its own.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dpbench.audit.engine import run_audits
from dpbench.config.suite import parse_suite
from dpbench.core import registry
from dpbench.core.neighbours import neighbouring_pair

MECHANISMS = {
    "output_perturbation": ("output_perturbation", {}, 0.0),
    "noisy_sgd": ("noisy_sgd", {}, 1e-5),
}
PROBLEM = ("logistic", {"ridge": 0.5})


def _suite(algorithm: str, delta: float, runs: int, batch: int, points: int) -> str:
    """``points`` audit points (ε values) of one mechanism at n = 10, p = 2."""
    eps = [round(1.0 + 0.25 * i, 2) for i in range(points)]
    return f"""
name: bench_audit
root_seed: 1
audit: {{alpha: 0.05, runs: {runs}, batch: {batch}}}
audits:
  - name: a
    algorithms: [{{label: m, algorithm: {algorithm}}}]
    problems: [{{problem: {PROBLEM[0]}, params: {{ridge: {PROBLEM[1]['ridge']}}}}}]
    canaries: [sphere]
    grid: {{n: [10], p: [2], epsilon: {eps}, delta: [{delta}]}}
"""


def loop_rate(name: str, delta: float, runs: int) -> float:
    """Runs per second of ``release`` in a plain loop on D and D′ (``runs`` each)."""
    algo = registry.get("algorithms", name)()
    prob = registry.get("problems", PROBLEM[0])(**PROBLEM[1])
    pair = neighbouring_pair(prob, 10, 2, "sphere", np.random.default_rng(0))
    rngs = np.random.default_rng(1).spawn(2 * runs)
    algo.release(pair.d0, prob, epsilon=1.0, delta=delta, rng=np.random.default_rng(2))  # warm
    t0 = time.perf_counter()
    for r in range(runs):
        algo.release(pair.d0, prob, epsilon=1.0, delta=delta, rng=rngs[2 * r])
        algo.release(pair.d1, prob, epsilon=1.0, delta=delta, rng=rngs[2 * r + 1])
    return 2 * runs / (time.perf_counter() - t0)


def audit_rate(text: str, scheduler: str | None, workers: int | None) -> tuple[float, int]:
    """(runs per second, runs) of ``run_audits`` end to end (store in a temporary directory)."""
    with tempfile.TemporaryDirectory() as tmp:
        suite = parse_suite(text)
        t0 = time.perf_counter()
        summary = run_audits(suite, Path(tmp) / "a.zarr", scheduler=scheduler, workers=workers,
                             progress=False)
        seconds = time.perf_counter() - t0
        runs = 2 * sum(r.runs_completed for r in summary.results)
        return runs / seconds, runs


def vectorised_rates(runs: int) -> None:
    """Print the vectorised-path figures (module docstring) for output perturbation."""
    from dpbench.audit.runs import run_audit_batch
    from dpbench.privacy.noise import gamma_norm_noise

    algo = registry.get("algorithms", "output_perturbation")()
    prob = registry.get("problems", PROBLEM[0])(**PROBLEM[1])
    pair = neighbouring_pair(prob, 10, 2, "sphere", np.random.default_rng(0))
    u = pair.direction

    def plain() -> None:
        for i, data in enumerate((pair.d0, pair.d1)):
            theta = prob.solve(data).theta
            scale = algo.sensitivity(data.n, float(prob.lipschitz),
                                     float(prob.strong_convexity)) / 1.0
            noise = gamma_norm_noise(data.p, scale, np.random.default_rng(i), size=runs)
            _ = prob.constraint.project(theta[None, :] + noise) @ u

    for label, fn in (
            ("plain numpy (same outputs)", plain),
            ("run_audit_batch via release_batch",
             lambda: run_audit_batch(algo, prob, pair, epsilon=1.0, delta=0.0, runs=runs,
                                     rng=np.random.default_rng(3)))):
        fn()  # warm
        t0 = time.perf_counter()
        fn()
        rate = 2 * runs / (time.perf_counter() - t0)
        print(f"output_perturbation vectorised, {label}: {rate:.3g} runs/s")
    text = _suite("output_perturbation", 0.0, 1_000_000, 50_000, 1)
    rate, done = audit_rate(text, None, 0)
    print(f"output_perturbation one audit point at 10^6 runs/side inline (store, bounds): "
          f"{rate:.3g} runs/s = {rate * 60 / 2:.3g} runs per side per point per minute "
          f"({done} runs)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4000, help="runs per side per audit point")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--points", type=int, default=4, help="audit points per mechanism")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--vectorised-runs", type=int, default=200_000,
                    help="runs per side for the vectorised-path comparison")
    args = ap.parse_args()
    vectorised_rates(args.vectorised_runs)
    from distributed import Client, LocalCluster

    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"setup: n=10, p=2, {args.points} audit points x {args.runs} runs per side, batch "
          f"{args.batch}")
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    print(f"LocalCluster start ({args.workers} workers): {time.perf_counter() - t0:.2f} s")
    try:
        for label, (name, _, delta) in MECHANISMS.items():
            text = _suite(name, delta, args.runs, args.batch, args.points)
            loop = loop_rate(name, delta, min(args.runs, 2000))
            print(f"{label} plain release loop (1 process): {loop:.0f} runs/s")
            inline, runs = audit_rate(text, None, 0)
            print(f"{label} audit path inline (1 process): {inline:.0f} runs/s "
                  f"({runs} runs; {inline / loop:.2f}x the loop)")
            audit_rate(text, cluster.scheduler_address, None)  # warm the workers (imports, JIT)
            dist, runs = audit_rate(text, cluster.scheduler_address, None)
            print(f"{label} audit path on {args.workers} workers: {dist:.0f} runs/s "
                  f"({runs} runs; {dist / loop:.2f}x the loop)")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
