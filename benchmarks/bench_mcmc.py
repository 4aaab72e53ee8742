"""ExpMech MCMC throughput: compiled (numba) chain against the plain numpy per-step loop.

LB-Lin at p = 10, n ∈ {100, 1000}, ε = 1 (k = ε/(2L‖C‖) = 1/4), RWM and MALA. Both paths are
:func:`dpbench.numerics.samplers.mcmc.run_chain`: ``compiled=True`` runs blocks of steps in one
``numba.njit`` loop over the problem's kernel; ``compiled=False`` is the same algorithm with
``problem.loss(theta, data).sum()`` (and ``problem.grad(...).sum(0)`` for MALA) per step.

Run: ``python benchmarks/bench_mcmc.py [--steps 20000] [--numpy-steps 4000]``.
Each figure is printed on a line of its own; compilation is excluded (a warm-up call first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from dpbench.numerics.samplers.mcmc import run_chain
from dpbench.problems.lb_lin import LBLin

P = 10
K = 0.25


def steps_per_second(n: int, kind: str, steps: int, compiled: bool) -> float:
    """Steps per second of one chain of ``steps`` steps (best of 3)."""
    prob = LBLin()
    data = prob.generate(n, P, np.random.default_rng(0))
    best = float("inf")
    for rep in range(3):
        t0 = time.perf_counter()
        run_chain(prob, data, K, prob.constraint, np.random.default_rng(rep), kind=kind,
                  steps=steps, compiled=compiled)
        best = min(best, time.perf_counter() - t0)
    return steps / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000, help="steps per compiled chain")
    ap.add_argument("--numpy-steps", type=int, default=4000, help="steps per numpy chain")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    for kind in ("rwm", "mala"):
        steps_per_second(100, kind, 10, True)  # warm-up: compile
    for n in (100, 1000):
        for kind in ("rwm", "mala"):
            fast = steps_per_second(n, kind, args.steps, True)
            slow = steps_per_second(n, kind, args.numpy_steps, False)
            print(f"{kind} n={n} p={P} compiled: {fast:.0f} steps/s")
            print(f"{kind} n={n} p={P} numpy: {slow:.0f} steps/s")
            print(f"{kind} n={n} p={P} speed-up: {fast / slow:.1f}x")


if __name__ == "__main__":
    main()
