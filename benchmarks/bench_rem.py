"""REM sampler throughput: the alternating sampler's value queries per second, compiled vs numpy.

P1 (sep_abs) at p = 10, n ∈ {100, 1000}, REM-ERM calibration at ε = 0.5, δ = 1e-5 (G_s = k·L,
μ_s = kμ, η from Theorem 17's rule with c_η = 64). Both paths run S1 + Algorithm 2
(:mod:`dpbench.numerics.samplers.alternating`): ``compiled`` is the numba loop over the problem's kernel,
``numpy`` the plain python/numpy loop over ``problem.loss`` on one row (the fallback for
problems without a kernel). The figure is value queries f(x; s_i) per second (each query is an
O(p) loss evaluation); exact-sampler draws per second (P1 box factors, P2 ball) close the table.

Run: ``python benchmarks/bench_rem.py [--steps 20000] [--numpy-steps 300]``.
Each figure is printed on a line of its own; compilation is excluded (a warm-up call first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from dpbench.algorithms.rem import REM
from dpbench.core.exact_samplers import exact_sampler
from dpbench.core.problem import Dataset
from dpbench.numerics.samplers.alternating import alternating_sample, alternating_sample_numpy
from dpbench.problems.lin_ball import LinBall
from dpbench.problems.sep_abs import SepAbs

P = 10
EPS, DELTA = 0.5, 1e-5


def _setup(n: int) -> tuple[SepAbs, Dataset, float, float, float]:
    prob = SepAbs(offset=0.6)
    data = prob.generate(n, P, np.random.default_rng(0))
    alg = REM(sampler="alternating")
    cal = alg.calibrate(n, P, prob, EPS, DELTA)
    plan = alg.plan(cal, prob, P, EPS, DELTA)
    return prob, data, cal.k, cal.k * cal.mu, plan.eta


def queries_per_second(n: int, steps: int, compiled: bool) -> float:
    """Value queries per second of one chain of ``steps`` outer steps (best of 3)."""
    prob, data, k, lam, eta = _setup(n)
    c = prob.constraint.center(P)
    best_rate = 0.0
    for rep in range(3):
        rng = np.random.default_rng(rep)
        t0 = time.perf_counter()
        if compiled:
            _, st = alternating_sample(prob.kernel(), data, k=k, lam=lam, center=c,
                                       constraint=prob.constraint, eta=eta, steps=steps, x0=c,
                                       rng=rng)
        else:
            def loss_row(x: np.ndarray, i: int) -> float:
                return float(prob.loss(x, Dataset(data.X[i:i + 1]))[0])

            _, st = alternating_sample_numpy(loss_row, n, k=k, lam=lam, center=c,
                                             constraint=prob.constraint, eta=eta, steps=steps,
                                             x0=c, rng=rng)
        best_rate = max(best_rate, st.queries / (time.perf_counter() - t0))
    return best_rate


def exact_draws_per_second(problem: SepAbs | LinBall, n: int, draws: int = 2000) -> float:
    """Exact REM draws per second (sampler built once: the per-dataset preprocessing excluded)."""
    data = problem.generate(n, P, np.random.default_rng(0))
    cal = REM().calibrate(n, P, problem, EPS, DELTA)
    draw = exact_sampler("regularized_gibbs", problem, data, cal.k, cal.mu,
                         problem.constraint.center(P))
    assert draw is not None
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    for _ in range(draws):
        draw(rng)
    return draws / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000, help="outer steps per compiled chain")
    ap.add_argument("--numpy-steps", type=int, default=300, help="outer steps per numpy chain")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    queries_per_second(100, 10, True)  # warm-up: compile
    for n in (100, 1000):
        fast = queries_per_second(n, args.steps, True)
        slow = queries_per_second(n, args.numpy_steps, False)
        print(f"alternating n={n} p={P} compiled: {fast:.3g} queries/s")
        print(f"alternating n={n} p={P} numpy: {slow:.3g} queries/s")
        print(f"alternating n={n} p={P} speed-up: {fast / slow:.0f}x")
    for prob in (SepAbs(offset=0.6), LinBall()):
        for n in (100, 1000):
            print(f"exact {prob.name} n={n} p={P}: {exact_draws_per_second(prob, n):.3g} draws/s")


if __name__ == "__main__":
    main()
