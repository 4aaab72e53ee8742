"""Precision and cost of NoisySGD's PLD accountant (docs/bst14.md, "Grid precision").

(a) Precision sweep: for T ∈ {1, 10, …, 10⁶}, z ∈ {0.25, 0.5, 1, 2, 4, 8, 20}, n ∈ {10, 1000} at
    δ = 1e-5 (98 cells), the ε the ledger states (``noisy_sgd_epsilon_certified``: the PLD on the
    converged grid) against a reference on a grid eight times finer than the converged one (the
    discretisation error shrinks about fourfold per halving, so the reference is ~64× closer to
    the limit). Prints the largest relative difference (acceptance: ≤ 1e-3), the cells, and the
    seconds the ledger's ε took per cell (cold caches).
(b) Calibration cost: ``calibrate_noisy_sgd_certified`` for the suites' typical targets, each in
    a fresh cache (the per-process caches cleared), with the evaluations it made.

Run: ``python benchmarks/bench_accountant.py [--only sweep,calibration]`` (about 3 minutes on
one core).
"""

from __future__ import annotations

import argparse
import math
import time

DELTA = 1e-5
STEPS = (1, 10, 100, 1000, 10**4, 10**5, 10**6)
ZS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 20.0)
NS = (10, 1000)
CALIBRATIONS = ((1.0, 1e-6, 100), (1.0, 1e-6, 1000), (4.0, 1e-6, 1000), (0.25, 1e-6, 800),
                (1.0, 1e-5, 10), (128.0, 1e-5, 4))


def _clear() -> None:
    from dpbench.privacy import accountant as acc

    for fn in (acc._epsilon_pld, acc._composed, acc.converged_interval, acc._calibrate_pld,
               acc._calibrate_certified, acc._calibrate, acc._epsilon):
        fn.cache_clear()


def sweep() -> None:
    from dpbench.privacy.accountant import (
        converged_interval,
        noisy_sgd_epsilon_certified,
        noisy_sgd_epsilon_pld,
    )

    worst, where, rows = 0.0, None, []
    for n in NS:
        for steps in STEPS:
            for z in ZS:
                _clear()
                t0 = time.perf_counter()
                eps, _ = noisy_sgd_epsilon_certified(z, n, steps, DELTA)
                took = time.perf_counter() - t0
                h = converged_interval(z, n, steps, DELTA)
                ref = noisy_sgd_epsilon_pld(z, n, steps, DELTA, interval=h / 8)
                rel = (eps - ref) / ref if ref > 0 else 0.0
                rows.append((n, steps, z, eps, rel, took))
                if abs(rel) > abs(worst):
                    worst, where = rel, (n, steps, z)
    print("n | T | z | ε (ledger) | (ε − ε_ref)/ε_ref | seconds")
    for n, steps, z, eps, rel, took in rows:
        print(f"{n} | {steps} | {z:g} | {eps:.6g} | {rel:+.2e} | {took:.2f}")
    times = sorted(r[5] for r in rows)
    print(f"(a) {len(rows)} cells: largest relative difference to the 8× finer grid "
          f"{worst:+.2e} at (n, T, z) = {where} (acceptance 1e-3); seconds per ε: median "
          f"{times[len(times) // 2]:.2f}, max {times[-1]:.2f}")


def calibration() -> None:
    from dpbench.privacy.accountant import calibrate_noisy_sgd_certified, noisy_sgd_epsilon_certified

    print("target ε | δ | n | T | z | ε spent | accounting | seconds")
    for eps, delta, n in CALIBRATIONS:
        steps = n * n - 1 if n > 4 else 15
        _clear()
        t0 = time.perf_counter()
        z = calibrate_noisy_sgd_certified(eps, delta, n, steps)
        took = time.perf_counter() - t0
        spent, how = noisy_sgd_epsilon_certified(z, n, steps, delta)
        print(f"{eps:g} | {delta:g} | {n} | {steps} | {z:.5f} | {spent:.6g} | "
              f"{'PLD' if how.startswith('PLD') else 'RDP'} | {took:.2f}")
        assert spent <= eps and math.isfinite(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="sweep,calibration")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if "sweep" in parts:
        sweep()
    if "calibration" in parts:
        calibration()


if __name__ == "__main__":
    main()
