"""B1 (noisy stochastic mirror descent, arXiv 2002.09609) throughput: compiled path against a
plain numpy loop.

Gradient queries per second of one B1 run (⌈n/2⌉ fresh gradients, ≈ 0.69n iterations, the noise-only
steps included in the time) on LB-Lin at p = 10 for n = 1000 and n = 10⁴, paper calibration at
ε̄ = 0.1, δ̄ = 1e-5 (inside B1's regime for both n), projection onto the unit ball every step:

(a) the compiled path of :func:`dpbench.algorithms.noisy_mirror_descent.osmd_path` (numba over the
    problem kernel and ``noisy_sgd.project_balls``), after warm-up;
(b) the numpy path of the same function (``compiled=False``; randomness drawn in blocks);
(c) a plain numpy loop, docs/sco.md's B1 transcribed (per step: draw the index and noise,
    gate on freshness, gradient, clip, project, Python ``set`` of seen indices).

Run: ``python benchmarks/bench_mirror_descent.py [--runs 20]``. One figure per line, then the
speed-ups of (a) over (b) and (c).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpbench.algorithms.noisy_mirror_descent import calibrate, osmd_path
from dpbench.core.problem import Dataset
from dpbench.problems.lb_lin import LBLin

P = 10
EPSILON, DELTA = 0.1, 1e-5


def _setup(n: int) -> tuple[LBLin, Dataset, float, float]:
    problem = LBLin()
    data = problem.generate(n, P, np.random.default_rng(0))
    sigma = calibrate("paper", n, problem.lipschitz, EPSILON, DELTA).sigma
    eta = problem.constraint.diameter / (math.sqrt(n) * (problem.lipschitz + sigma * math.sqrt(P)))
    return problem, data, sigma, eta


def library_rate(n: int, runs: int, compiled: bool) -> float:
    """(a)/(b): gradient queries per second of ``osmd_path``."""
    problem, data, sigma, eta = _setup(n)
    target = math.ceil(n / 2)
    osmd_path(problem, data, sigma=sigma, eta=eta, lipschitz=1.0, target=target,
              steps_cap=2 * n, rng=np.random.default_rng(0), compiled=compiled)  # warm-up
    queries = 0
    t0 = time.perf_counter()
    for seed in range(runs):
        _, _, fresh = osmd_path(problem, data, sigma=sigma, eta=eta, lipschitz=1.0,
                                target=target, steps_cap=2 * n,
                                rng=np.random.default_rng(seed + 1), compiled=compiled)
        queries += fresh
    return queries / (time.perf_counter() - t0)


def plain_numpy_rate(n: int, runs: int) -> float:
    """(c): gradient queries per second of the pseudo-code transcribed in numpy."""
    problem, data, sigma, eta = _setup(n)
    X = data.X
    queries = 0
    t0 = time.perf_counter()
    for seed in range(runs):
        rng = np.random.default_rng(seed + 1)
        w = np.zeros(P)
        acc = np.zeros(P)
        seen: set[int] = set()
        t = 0
        while len(seen) < math.ceil(n / 2) and t < 2 * n:
            i = int(rng.integers(0, n))
            g = sigma * rng.standard_normal(P)
            if i not in seen:
                seen.add(i)
                acc += w
                grad = -X[i]
                norm = float(np.linalg.norm(grad))
                g += grad * min(1.0, 1.0 / norm)
            w = w - eta * g
            norm = float(np.linalg.norm(w))
            if norm > 1.0:
                w = w / norm
            t += 1
        queries += len(seen)
    return queries / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="B1 runs per figure (default 20)")
    args = parser.parse_args()
    for n in (1000, 10_000):
        a = library_rate(n, args.runs, compiled=True)
        b = library_rate(n, max(2, args.runs // 4), compiled=False)
        c = plain_numpy_rate(n, max(2, args.runs // 4))
        print(f"n={n} p={P} (a) compiled osmd_path: {a:,.0f} gradient queries/s")
        print(f"n={n} p={P} (b) numpy osmd_path: {b:,.0f} gradient queries/s")
        print(f"n={n} p={P} (c) plain numpy loop: {c:,.0f} gradient queries/s")
        print(f"n={n} p={P} speed-up (a)/(b): {a / b:.1f}x")
        print(f"n={n} p={P} speed-up (a)/(c): {a / c:.1f}x")


if __name__ == "__main__":
    main()
