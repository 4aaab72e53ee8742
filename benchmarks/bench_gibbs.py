"""Throughput of the GTU Gibbs / Rashomon samplers at p = 10, and the Rashomon hit-rate table.

GTU's instances F1/F2 and mechanism labels A3, A4, A6 (docs/langevin.md): gradient or function
queries per second for each sampler at p = 10 against a plain numpy loop.

* exact samplers (samples/s, one draw per call as the mechanisms use them): the truncated Gaussian
  Gibbs law of ``mean_est`` (A4), the radial Rashomon mixture (A6, F1), the factorised cube sampler
  of ``lin_cube`` (A3 and its A8 ridge variant, F2); the radial sampler against a plain numpy
  rejection sampler of the same law (uniform proposals on B(d̄, ρ) accepted with probability
  e^{−β(max{½‖θ−d̄‖², ψ} − ψ)}, batched) — both exact, so only speed differs;
* MALA on the Gibbs law (gibbs(sampler="mala")): gradient queries/s (per-example gradients) of the
  compiled chain against the numpy per-step loop (``run_chain(compiled=False)``);
* hit rate Pr[θ ∈ G] of the Rashomon mechanism on mean_est (β = 8000, p = 5) against the exact
  mixture weight and the Markov bound 1 − 2p/√(βψ) of Theorem B.6, with the KS p-value of
  (r/√(2ψ))^p ~ U[0, 1] inside G (uniformity).

Run: ``python benchmarks/bench_gibbs.py [--draws 2000]``. One figure per printed line; numba
compilation is excluded (warm-up calls first).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Callable

import numpy as np

from dpbench.algorithms.rashomon import Rashomon
from dpbench.core.exact_samplers import exact_sampler
from dpbench.numerics.samplers.mcmc import run_chain
from dpbench.numerics.samplers.rashomon import hit_rate_bound, inside_weight, rashomon_diagnostics
from dpbench.problems.lin_cube import LinCube
from dpbench.problems.mean_est import MeanEst

P = 10
N = 1000


def per_second(fn: Callable[[np.random.Generator], object], draws: int) -> float:
    """Calls of ``fn`` per second (best of 3 runs of ``draws`` calls)."""
    best = math.inf
    for rep in range(3):
        rng = np.random.default_rng(rep)
        t0 = time.perf_counter()
        for _ in range(draws):
            fn(rng)
        best = min(best, time.perf_counter() - t0)
    return draws / best


def numpy_rashomon_rejection(center: np.ndarray, beta: float, psi: float
                             ) -> Callable[[np.random.Generator], np.ndarray]:
    """Plain exact baseline: uniform proposals on B(c, ρ), ρ = √(2ψ + 2·40/β) (the mass beyond
    is < e^{−40}, ignored), accepted with probability exp(−β(max{½‖θ − c‖², ψ} − ψ))."""
    p = center.shape[0]
    rho = math.sqrt(2 * psi + 80.0 / beta)

    def draw(rng: np.random.Generator) -> np.ndarray:
        while True:
            g = rng.standard_normal((256, p))
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            pts = g * (rho * rng.random((256, 1)) ** (1.0 / p))
            val = np.maximum(0.5 * np.einsum("ij,ij->i", pts, pts), psi) - psi
            ok = np.flatnonzero(rng.random(256) < np.exp(-beta * val))
            if ok.size:
                return center + pts[ok[0]]

    return draw


def exact_samplers(draws: int) -> None:
    mean_est = MeanEst()
    data = mean_est.generate(N, P, np.random.default_rng(0))
    beta = 2500.0
    gibbs = exact_sampler("gibbs", mean_est, data, beta / N, mean_est.constraint)
    rash = exact_sampler("rashomon", mean_est, data, beta, 0.005)
    naive = numpy_rashomon_rejection(data.X.mean(axis=0), beta, 0.005)
    cube = LinCube()
    cdata = cube.generate(N, P, np.random.default_rng(1))
    cube_lin = exact_sampler("gibbs", cube, cdata, 250.0 / N, cube.constraint)
    ridged = cube.with_ridge(0.05)
    cube_ridge = exact_sampler("gibbs", ridged, cdata, 250.0 / N, ridged.constraint)
    print(f"gibbs truncated-Gaussian (mean_est) p={P}: {per_second(gibbs, draws):.0f} samples/s")
    print(f"rashomon radial mixture p={P}: {per_second(rash, draws):.0f} samples/s")
    print(f"rashomon plain numpy rejection p={P}: {per_second(naive, max(draws // 10, 20)):.0f} "
          "samples/s")
    print(f"cube factorised inverse-CDF (lin_cube) p={P}: {per_second(cube_lin, draws):.0f} "
          "samples/s")
    print(f"cube truncated-normal ridge (lin_cube A8) p={P}: {per_second(cube_ridge, draws):.0f} "
          "samples/s")


def mala_queries(steps: int) -> None:
    prob = MeanEst()
    data = prob.generate(N, P, np.random.default_rng(2))
    k = 2500.0 / N
    for compiled, count in ((True, steps), (False, max(steps // 10, 200))):
        run_chain(prob, data, k, prob.constraint, np.random.default_rng(9), kind="mala",
                  steps=10, compiled=compiled)  # warm-up
        best = math.inf
        for rep in range(3):
            t0 = time.perf_counter()
            run_chain(prob, data, k, prob.constraint, np.random.default_rng(rep), kind="mala",
                      steps=count, compiled=compiled)
            best = min(best, time.perf_counter() - t0)
        label = "compiled" if compiled else "numpy"
        print(f"mala gibbs (mean_est n={N}) p={P} {label}: {count * N / best:.3g} "
              "gradient queries/s")


def hit_rate_table(draws: int) -> None:
    prob = MeanEst(mean_norm=0.5, spread=0.25)
    n, p = 64000, 5
    data = prob.generate(n, p, np.random.default_rng(3))
    for psi in (0.0025, 0.01, 0.04, 0.1):
        alg = Rashomon(psi=psi)
        rels = [alg.release(data, prob, epsilon=1.0, delta=0.0,
                            rng=np.random.default_rng([s, 5])) for s in range(draws)]
        beta = rels[0].info["beta"]
        diag = rashomon_diagnostics(np.array([r.info["in_rashomon"] for r in rels]),
                                    np.array([r.info["rashomon_radius"] for r in rels]), p,
                                    beta, psi)
        print(f"hit rate psi={psi:g} beta={beta:g} p={p}: measured {diag.hit_rate:.3f} "
              f"± {diag.hit_rate_se:.3f}, exact {inside_weight(p, beta, psi):.3f}, "
              f"Markov bound {hit_rate_bound(p, beta, psi):.3f}")
        print(f"uniformity psi={psi:g} p={p}: KS p-value of (r/sqrt(2 psi))^p = "
              f"{diag.ks_pvalue:.3f} over {diag.inside_draws} draws in G")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=2000, help="draws per exact sampler / ψ value")
    ap.add_argument("--steps", type=int, default=20000, help="MALA steps (compiled chain)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    exact_samplers(args.draws)
    mala_queries(args.steps)
    hit_rate_table(args.draws)


if __name__ == "__main__":
    main()
