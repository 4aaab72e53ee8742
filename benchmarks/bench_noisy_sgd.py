"""NoisySGD (BST14 Algorithm 1) throughput: compiled path against numpy loops.

Sample-steps per second (steps × seeds) of noisy projected SGD on LB-Lin (n = 1000, p = 10,
accountant σ at ε = 1, δ = 1e-6, Lipschitz step sizes, projection onto the unit ball every step):

(a) the compiled path of :func:`dpbench.algorithms.noisy_sgd.noisy_sgd_path` after warm-up (the
    compile / cache-load time is printed separately);
(b) a plain numpy loop, one seed: per step draw i and the noise, gradient, clip, project;
(c) a numpy loop vectorised across 16 seeds: a (16, p) iterate array per step;
(d) for reference, the numpy fallback of ``noisy_sgd_path`` (randomness drawn in blocks).

Then the privacy audit's configuration (``NoisySGD()``, T = n² − 1 = 99 steps, n = 10, p = 2,
logistic with ridge 0.5, ε = 1, δ = 1e-5; ``--audit-runs`` runs, default 100 000), in runs/s:

(e) ``release_many``, the looped path (one ``run`` per generator);
(f) ``release_batch``, the vectorised path (``NoisySGD.run_batch``: all chains in one compiled
    loop), in one process and in ``--cores`` processes at once (each warmed up, started together);

each also as runs per side per audit point per minute (an audit point runs both sides, so that is
runs/s × 60 / 2; target ≥ 10⁶ on 2 cores).

Run: ``python benchmarks/bench_noisy_sgd.py [--steps 2000000] [--numpy-steps 50000]
[--audit-runs 100000] [--cores 2]``. Each figure is printed on a line of its own, then the
speed-ups of (a) over (b) and over (c), then the audit section.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import time
import types

import numpy as np
from numba import njit

from dpbench.algorithms import noisy_sgd
from dpbench.algorithms.noisy_sgd import NoisySGD, noisy_sgd_path
from dpbench.core.problem import Dataset
from dpbench.core.sets import Ball
from dpbench.numerics.kernels import kernel_arrays
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.logistic import Logistic

N, P, SEEDS_VECTORISED = 1000, 10, 16
Z = 9.1  # accountant noise multiplier at ε = 1, δ = 1e-6 (docs/bst14.md, the z table)


class NumpyLBLin(LBLin):
    """LB-Lin without its kernel: runs the numpy fallback of ``noisy_sgd_path``."""

    def kernel(self) -> None:
        return None


def _setup() -> tuple[LBLin, Dataset, float, float]:
    problem = LBLin()
    data = problem.generate(N, P, np.random.default_rng(0))
    sigma = 2.0 * N * problem.lipschitz * Z
    c = problem.constraint.diameter / math.sqrt(N * N * problem.lipschitz**2 + P * sigma**2)
    return problem, data, sigma, c


def _path(problem: LBLin, data: Dataset, sigma: float, steps: int, seed: int) -> np.ndarray:
    return noisy_sgd_path(problem, data, constraint=problem.constraint, steps=steps, sigma=sigma,
                          lipschitz=problem.lipschitz, variant="lipschitz",
                          rng=np.random.default_rng(seed))


def compiled_rate(steps: int, seeds: int) -> tuple[float, float, float]:
    """(a): (sample-steps/s after warm-up, first-call seconds, fresh compile seconds)."""
    problem, data, sigma, _ = _setup()
    t0 = time.perf_counter()
    _path(problem, data, sigma, 10, seed=0)  # compile, or load numba's on-disk cache
    first_call = time.perf_counter() - t0
    t0 = time.perf_counter()
    for seed in range(seeds):
        _path(problem, data, sigma, steps, seed)
    rate = steps * seeds / (time.perf_counter() - t0)
    return rate, first_call, _fresh_compile_seconds(problem, data, sigma)


def _fresh_compile_seconds(problem: LBLin, data: Dataset, sigma: float) -> float:
    """Time to compile the step loop from scratch (new uncached dispatchers of ``_sgd_steps`` and
    of the steps it calls, ``_sgd_run_steps``; one tiny call)."""
    steps = noisy_sgd._sgd_steps.py_func
    scope = {**steps.__globals__,
             "_sgd_run_steps": njit(cache=False)(noisy_sgd._sgd_run_steps.py_func)}
    fresh = njit(cache=False)(types.FunctionType(steps.__code__, scope, steps.__name__))
    kernel = problem.kernel()
    X, y = kernel_arrays(data)
    theta, acc = np.zeros(P), np.zeros(P)
    centers, radii = np.zeros((1, P)), np.ones(1)
    t0 = time.perf_counter()
    fresh(kernel.grad, X, y, kernel.prm, np.random.default_rng(0), theta, acc, 1, 1, 4, 0.1,
          True, 1.0, sigma, 2, centers, radii, 0.0, 0)
    return time.perf_counter() - t0


def numpy_per_step_rate(steps: int) -> float:
    """(b): one seed, everything per step (draw i and noise, gradient, clip, project)."""
    problem, data, sigma, c = _setup()
    rng = np.random.default_rng(1)
    L, project, grad = problem.lipschitz, problem.constraint.project, problem.grad
    theta = problem.constraint.center(P)
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        i = rng.integers(0, N)
        b = sigma * rng.standard_normal(P)
        g = grad(theta, data, np.array([i]))[0]
        norm = math.sqrt(g.dot(g))
        if norm > L:
            g = g * (L / norm)
        eta = c / math.sqrt(t)
        theta = project(theta - eta * (N * g + b))
    return steps / (time.perf_counter() - t0)


def numpy_vectorised_rate(steps: int, seeds: int = SEEDS_VECTORISED) -> float:
    """(c): ``seeds`` replicates advanced together, a (seeds, p) iterate array per step."""
    problem, data, sigma, c = _setup()
    rng = np.random.default_rng(2)
    L, X = problem.lipschitz, data.X
    ball = Ball(problem.constraint.radius)  # type: ignore[attr-defined]
    theta = np.zeros((seeds, P))
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        idx = rng.integers(0, N, size=seeds)
        G = -X[idx]  # LB-Lin per-example gradients, one row per replicate
        norms = np.linalg.norm(G, axis=1, keepdims=True)
        G = G * np.minimum(1.0, L / np.maximum(norms, np.finfo(float).tiny))
        B = sigma * rng.standard_normal((seeds, P))
        theta = ball.project(theta - (c / math.sqrt(t)) * (N * G + B))
    return steps * seeds / (time.perf_counter() - t0)


def fallback_rate(steps: int) -> float:
    """(d): the numpy fallback of ``noisy_sgd_path`` (one seed, block-drawn randomness)."""
    _, data, sigma, _ = _setup()
    problem = NumpyLBLin()
    t0 = time.perf_counter()
    _path(problem, data, sigma, steps, seed=3)
    return steps / (time.perf_counter() - t0)


# --- the audit's configuration: looped vs vectorised -------------------------------------------
AUDIT_N, AUDIT_P, AUDIT_EPS, AUDIT_DELTA, AUDIT_RIDGE = 10, 2, 1.0, 1e-5, 0.5


def _audit_setup() -> tuple[NoisySGD, Logistic, Dataset]:
    problem = Logistic(ridge=AUDIT_RIDGE)
    return NoisySGD(), problem, problem.generate(AUDIT_N, AUDIT_P, np.random.default_rng(0))


def audit_many_rate(runs: int) -> float:
    """(e): runs/s of ``release_many`` (after a warm-up that compiles the step loop)."""
    alg, problem, data = _audit_setup()
    kw = dict(epsilon=AUDIT_EPS, delta=AUDIT_DELTA)
    alg.release_many(data, problem, rngs=np.random.default_rng(1).spawn(10), **kw)
    rngs = np.random.default_rng(2).spawn(runs)
    t0 = time.perf_counter()
    alg.release_many(data, problem, rngs=rngs, **kw)
    return runs / (time.perf_counter() - t0)


def _batch_seconds(runs: int, seed: int) -> float:
    alg, problem, data = _audit_setup()
    t0 = time.perf_counter()
    out = alg.release_batch(data, problem, epsilon=AUDIT_EPS, delta=AUDIT_DELTA,
                            rng=np.random.default_rng(seed), size=runs)
    assert out is not None, "release_batch fell back: no compiled path for this configuration"
    return time.perf_counter() - t0


def audit_batch_rate(runs: int) -> tuple[float, float]:
    """(f), one process: (runs/s of ``release_batch`` after warm-up, first-call seconds)."""
    first_call = _batch_seconds(10, seed=3)  # compiles the chain loop
    return runs / _batch_seconds(runs, seed=4), first_call


def _batch_worker(runs: int, seed: int, barrier: object, results: object) -> None:
    _batch_seconds(10, seed)  # compile in this process before the common start
    barrier.wait()  # type: ignore[attr-defined]
    results.put(_batch_seconds(runs, seed + 1))  # type: ignore[attr-defined]


def audit_batch_rate_parallel(runs: int, cores: int) -> float:
    """(f), ``cores`` processes started together, ``runs // cores`` runs each: total runs/s."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(cores), ctx.Queue()
    share = runs // cores
    procs = [ctx.Process(target=_batch_worker, args=(share, 10 + 2 * k, barrier, results))
             for k in range(cores)]
    for proc in procs:
        proc.start()
    seconds = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    return share * cores / max(seconds)


def _per_side_per_point_minute(rate: float) -> float:
    return rate * 60 / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000_000, help="compiled steps per seed")
    parser.add_argument("--seeds", type=int, default=4, help="compiled seeds")
    parser.add_argument("--numpy-steps", type=int, default=50_000, help="steps of (b), (c), (d)")
    parser.add_argument("--audit-runs", type=int, default=100_000, help="runs of (e) and (f)")
    parser.add_argument("--cores", type=int, default=2, help="processes of the parallel (f)")
    args = parser.parse_args()

    rate_a, first_call, compile_s = compiled_rate(args.steps, args.seeds)
    rate_b = numpy_per_step_rate(args.numpy_steps)
    rate_c = numpy_vectorised_rate(args.numpy_steps)
    rate_d = fallback_rate(args.numpy_steps)
    print(f"setup: LB-Lin n={N} p={P} z={Z} (sigma={2 * N * Z:g}), Lipschitz steps, unit ball")
    print(f"(a) compiled path: {rate_a:,.0f} sample-steps/s "
          f"({1e9 / rate_a:.0f} ns/step; {args.steps} steps x {args.seeds} seeds)")
    print(f"(a) first call in this process (compile or numba cache load): {first_call:.2f} s")
    print(f"(a) fresh compile of the step loop (no cache): {compile_s:.2f} s")
    print(f"(b) numpy per-step loop, 1 seed: {rate_b:,.0f} sample-steps/s "
          f"({1e6 / rate_b:.1f} us/step)")
    print(f"(c) numpy loop vectorised over {SEEDS_VECTORISED} seeds: {rate_c:,.0f} sample-steps/s "
          f"({1e6 * SEEDS_VECTORISED / rate_c:.1f} us/step)")
    print(f"(d) numpy fallback of noisy_sgd_path, 1 seed: {rate_d:,.0f} sample-steps/s")
    print(f"speed-up (a)/(b): {rate_a / rate_b:.0f}x (target >= 50x)")
    print(f"speed-up (a)/(c): {rate_a / rate_c:.1f}x")

    rate_e = audit_many_rate(args.audit_runs)
    rate_f, first_f = audit_batch_rate(args.audit_runs)
    rate_f2 = audit_batch_rate_parallel(args.audit_runs, args.cores)
    print(f"audit setup: NoisySGD() on logistic ridge={AUDIT_RIDGE}, n={AUDIT_N} p={AUDIT_P} "
          f"(T={AUDIT_N ** 2 - 1}), eps={AUDIT_EPS:g} delta={AUDIT_DELTA:g}, "
          f"{args.audit_runs} runs")
    print(f"(e) release_many (looped run): {rate_e:,.0f} runs/s = "
          f"{_per_side_per_point_minute(rate_e):,.0f} runs per side per audit point per minute "
          "(1 process)")
    print(f"(f) release_batch (run_batch), 1 process: {rate_f:,.0f} runs/s = "
          f"{_per_side_per_point_minute(rate_f):,.0f} runs per side per audit point per minute; "
          f"first call {first_f:.2f} s (compiles the chain loop; its steps compiled in (e))")
    print(f"(f) release_batch, {args.cores} processes: {rate_f2:,.0f} runs/s = "
          f"{_per_side_per_point_minute(rate_f2):,.0f} runs per side per audit point per minute "
          f"(target >= 1,000,000 on 2 cores)")
    print(f"speed-up (f)/(e), 1 process: {rate_f / rate_e:.0f}x")


if __name__ == "__main__":
    main()
