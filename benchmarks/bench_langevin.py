"""Langevin (GTU A2, projected noisy full-batch GD) throughput: per-example gradient queries/s.

F1 (``mean_est``) at p = 10, n ∈ {100, 1000}. Both paths are
:func:`dpbench.algorithms.langevin.langevin_path` with the same calibrated η, β: ``compiled=True``
runs blocks of steps in one ``numba.njit`` loop over the problem's kernel (clipped per-example
gradients, ball projection); ``compiled=False`` is the plain numpy per-step loop
(``problem.grad(theta, data)``, clip, mean, project). A step costs n per-example gradients. The
exact OU sampler (no gradients after the first full one) is timed in steps per second.

Run: ``python benchmarks/bench_langevin.py [--steps 4000] [--numpy-steps 1000]``.
Each figure is printed on a line of its own; compilation is excluded (a warm-up call first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from dpbench.algorithms.langevin import Langevin, langevin_path, ou_path
from dpbench.problems.mean_est import MeanEst

P = 10
EPS, DELTA = 1.0, 1e-5


def _best(func, reps: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for rep in range(reps):
        t0 = time.perf_counter()
        func(rep)
        best = min(best, time.perf_counter() - t0)
    return best


def gradients_per_second(n: int, steps: int, compiled: bool) -> float:
    """Per-example gradient queries per second of ``steps`` ULA steps (best of 3)."""
    prob = MeanEst()
    data = prob.generate(n, P, np.random.default_rng(0))
    plan = Langevin().plan(prob, n, P, EPS, DELTA)

    def run(rep: int) -> None:
        langevin_path(prob, data, constraint=prob.constraint, theta0=np.zeros(P), steps=steps,
                      eta=plan.eta, beta=plan.beta, clip=prob.lipschitz,
                      rng=np.random.default_rng(rep), compiled=compiled)

    return n * steps / _best(run)


def ou_steps_per_second(steps: int) -> float:
    """Exact OU transitions per second (p = 10)."""
    return steps / _best(lambda rep: ou_path(np.zeros(P), 1.0, theta0=np.ones(P) / 4, steps=steps,
                                             eta=1e-4, beta=500.0, rng=np.random.default_rng(rep)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4000, help="steps of the compiled chain")
    ap.add_argument("--numpy-steps", type=int, default=1000, help="steps of the numpy chain")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    gradients_per_second(100, 10, True)  # warm-up: compile
    for n in (100, 1000):
        fast = gradients_per_second(n, args.steps, True)
        slow = gradients_per_second(n, args.numpy_steps, False)
        print(f"ula n={n} p={P} compiled: {fast:.3g} gradient queries/s")
        print(f"ula n={n} p={P} numpy: {slow:.3g} gradient queries/s")
        print(f"ula n={n} p={P} speed-up: {fast / slow:.1f}x")
    print(f"ou_exact p={P}: {ou_steps_per_second(args.steps):.3g} steps/s")


if __name__ == "__main__":
    main()
