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

Against a hand-written numba loop (issue 17: NoisySGD ≤ 1.2× the hand loop at p = 10):

(g) ns/step of the real compiled path (``noisy_sgd_path``, output "last", Lipschitz steps, the
    accountant σ above) and of a hand-written ``@njit`` loop of projected SGD on the same problem
    (the index and the p normals drawn per step with numpy's Generator inside the loop, the
    gradient written inline, clip, a closed-form ball projection), on LB-Lin (the BST14 hard
    instance) and on logistic regression, at p = 10 and p = 100, same n and T, both warmed up,
    interleaved, median of ``--repeats`` runs; wall-clock and process CPU time (the CPU figure is
    the robust one on a loaded machine); the ratio NoisySGD / hand loop;
(h) first call of the compiled path in a fresh process: with an empty ``NUMBA_CACHE_DIR`` (cold:
    compiles and writes the cache) and again with the cache that wrote (warm: loads it).

Run: ``python benchmarks/bench_noisy_sgd.py [--steps 2000000] [--numpy-steps 50000]
[--audit-runs 100000] [--cores 2] [--hand-steps 1000000] [--repeats 7]
[--only throughput,audit,hand,first-call]``. Each figure is printed on a line of its own, then
the speed-ups of (a) over (b) and over (c), then the audit section, then (g) and (h).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

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
    """Time to compile the step loop from scratch (new uncached loops specialised to the kernel,
    ``noisy_sgd._compiled_loops(grad, cache=False)``; one tiny call)."""
    kernel = problem.kernel()
    fresh = noisy_sgd._compiled_loops(kernel.grad, cache=False)[0]
    X, y = kernel_arrays(data)
    theta, acc = np.zeros(P), np.zeros(P)
    centers, radii = np.zeros((1, P)), np.ones(1)
    t0 = time.perf_counter()
    fresh(X, y, kernel.prm, np.random.default_rng(0), theta, acc, 1, 1, 4, 0.1, True, 1.0, sigma,
          2, centers, radii, 0.0, 0)
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


# --- (g) against a hand-written numba loop --------------------------------------------------------
HAND_N = 1000


@njit(cache=False)
def hand_loop_lblin(X, rng, theta, steps, c, clip, sigma, radius):  # type: ignore[no-untyped-def]
    """Projected SGD on LB-Lin, ℓ = −⟨θ, x⟩, as one would write it by hand: per step draw i and
    the p normals from the Generator, gradient −x_i inline, clip, step, project on B(0, radius)."""
    n, p = X.shape
    g = np.empty(p)
    nf = float(n)
    for t in range(1, steps + 1):
        i = rng.integers(0, n)
        sq = 0.0
        for j in range(p):
            g[j] = -X[i, j]
            sq += g[j] * g[j]
        gn = math.sqrt(sq)
        eta = c / math.sqrt(t)
        a = eta * nf
        if gn > clip:
            a *= clip / gn
        s2 = 0.0
        for j in range(p):
            v = theta[j] - a * g[j] - eta * sigma * rng.standard_normal()
            theta[j] = v
            s2 += v * v
        norm = math.sqrt(s2)
        if norm > radius:
            s = radius / norm
            for j in range(p):
                theta[j] *= s
    return theta


@njit(cache=False)
def hand_loop_logistic(X, y, rng, theta, steps, c, clip, sigma,  # type: ignore[no-untyped-def]
                       radius):
    """The same loop on logistic regression, ℓ = log(1 + exp(−y⟨θ, x⟩)): gradient
    −σ(−y⟨θ, x_i⟩)·y·x_i inline."""
    n, p = X.shape
    g = np.empty(p)
    nf = float(n)
    for t in range(1, steps + 1):
        i = rng.integers(0, n)
        dot = 0.0
        for j in range(p):
            dot += theta[j] * X[i, j]
        m = y[i] * dot
        if m >= 0.0:
            e = math.exp(-m)
            s = e / (1.0 + e)
        else:
            s = 1.0 / (1.0 + math.exp(m))
        coef = -s * y[i]
        sq = 0.0
        for j in range(p):
            g[j] = coef * X[i, j]
            sq += g[j] * g[j]
        gn = math.sqrt(sq)
        eta = c / math.sqrt(t)
        a = eta * nf
        if gn > clip:
            a *= clip / gn
        s2 = 0.0
        for j in range(p):
            v = theta[j] - a * g[j] - eta * sigma * rng.standard_normal()
            theta[j] = v
            s2 += v * v
        norm = math.sqrt(s2)
        if norm > radius:
            scale = radius / norm
            for j in range(p):
                theta[j] *= scale
    return theta


def _hand_problem(name: str):  # type: ignore[no-untyped-def]
    return LBLin() if name == "lb_lin" else Logistic()


def _timed(fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall seconds, process CPU seconds) of ``fn()``."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def hand_comparison(name: str, p: int, steps: int, repeats: int) -> dict[str, float]:
    """(g) for one problem and p: median ns/step (wall and CPU) of NoisySGD's compiled path and
    of the hand loop, runs interleaved after one warm-up call of each."""
    problem = _hand_problem(name)
    data = problem.generate(HAND_N, p, np.random.default_rng(0))
    L = float(problem.lipschitz)
    sigma = 2.0 * HAND_N * L * Z
    radius = float(problem.constraint.radius)  # type: ignore[attr-defined]
    c = problem.constraint.diameter / math.sqrt(HAND_N**2 * L**2 + p * sigma**2)
    X, y = kernel_arrays(data)

    def nsgd(seed: int, t: int) -> None:
        noisy_sgd_path(problem, data, constraint=problem.constraint, steps=t, sigma=sigma,
                       lipschitz=L, variant="lipschitz", rng=np.random.default_rng(seed))

    def hand(seed: int, t: int) -> None:
        rng, theta = np.random.default_rng(seed), np.zeros(p)
        if name == "lb_lin":
            hand_loop_lblin(X, rng, theta, t, c, L, sigma, radius)
        else:
            hand_loop_logistic(X, y, rng, theta, t, c, L, sigma, radius)

    nsgd(0, 10)
    hand(0, 10)
    times: dict[str, list[tuple[float, float]]] = {"nsgd": [], "hand": []}
    for r in range(repeats):
        times["hand"].append(_timed(lambda: hand(r + 1, steps)))
        times["nsgd"].append(_timed(lambda: nsgd(r + 1, steps)))
    out = {}
    for key, values in times.items():
        out[key + "_wall"] = float(np.median([w for w, _ in values])) / steps * 1e9
        out[key + "_cpu"] = float(np.median([cpu for _, cpu in values])) / steps * 1e9
    return out


_FIRST_CALL = """
import time, numpy as np
from dpbench.algorithms.noisy_sgd import noisy_sgd_path
from dpbench.problems.lb_lin import LBLin
problem = LBLin()
data = problem.generate(100, 10, np.random.default_rng(0))
w0, c0 = time.perf_counter(), time.process_time()
noisy_sgd_path(problem, data, constraint=problem.constraint, steps=10, sigma=1.0, lipschitz=1.0,
               variant="lipschitz", rng=np.random.default_rng(0))
print(time.perf_counter() - w0, time.process_time() - c0)
"""


def first_call_seconds() -> list[tuple[float, float]]:
    """(h): (wall, CPU) seconds of the first call of the compiled path in a fresh process with an
    empty numba cache directory, then in another fresh process with the cache the first wrote."""
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir, "OPENBLAS_NUM_THREADS": "1"}
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            runs.append((float(out[-2]), float(out[-1])))
    return runs


def _per_side_per_point_minute(rate: float) -> float:
    return rate * 60 / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000_000, help="compiled steps per seed")
    parser.add_argument("--seeds", type=int, default=4, help="compiled seeds")
    parser.add_argument("--numpy-steps", type=int, default=50_000, help="steps of (b), (c), (d)")
    parser.add_argument("--audit-runs", type=int, default=100_000, help="runs of (e) and (f)")
    parser.add_argument("--cores", type=int, default=2, help="processes of the parallel (f)")
    parser.add_argument("--hand-steps", type=int, default=1_000_000, help="steps T of (g)")
    parser.add_argument("--repeats", type=int, default=7, help="runs of each side of (g)")
    parser.add_argument("--hand-problems", default="lb_lin,logistic", help="problems of (g)")
    parser.add_argument("--only", default="throughput,audit,hand,first-call",
                        help="comma-separated sections to run")
    args = parser.parse_args()
    sections = set(args.only.split(","))
    if "throughput" in sections:
        throughput(args)
    if "audit" in sections:
        audit(args)
    if "hand" in sections:
        print(f"(g) NoisySGD's compiled path vs a hand-written numba loop: n={HAND_N}, "
              f"T={args.hand_steps}, Lipschitz steps, z={Z}, median of {args.repeats}")
        for name in args.hand_problems.split(","):
            for p in (10, 100):
                r = hand_comparison(name, p, args.hand_steps, args.repeats)
                print(f"(g) {name} p={p}: NoisySGD {r['nsgd_wall']:.1f} ns/step wall "
                      f"({r['nsgd_cpu']:.1f} cpu), hand loop {r['hand_wall']:.1f} wall "
                      f"({r['hand_cpu']:.1f} cpu); ratio {r['nsgd_wall'] / r['hand_wall']:.2f} "
                      f"wall, {r['nsgd_cpu'] / r['hand_cpu']:.2f} cpu (target <= 1.2 at p=10)")
    if "first-call" in sections:
        (cold, cold_cpu), (warm, warm_cpu) = first_call_seconds()
        print(f"(h) first call in a fresh process: {cold:.2f} s ({cold_cpu:.2f} s cpu) with an "
              f"empty NUMBA_CACHE_DIR, {warm:.2f} s ({warm_cpu:.2f} s cpu) with the cache it "
              "wrote")


def throughput(args: argparse.Namespace) -> None:
    """Sections (a)-(d)."""
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


def audit(args: argparse.Namespace) -> None:
    """Sections (e) and (f)."""
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
