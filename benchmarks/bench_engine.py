"""Engine overhead benchmarks.

1. Throughput for trivial cells (a mechanism that returns the centre of C on a 1-D LB-Lin dataset):
   cells/s end to end (plan, dask, single-writer zarr), inline and on a 2-worker LocalCluster.
2. Parallel efficiency for 0.2 s CPU-bound cells on 2 workers against a plain
   ``concurrent.futures.ProcessPoolExecutor`` over the same cells, and against a serial loop.

The 10⁵-cell sweep (planning time, client memory, resume scan, store size) is in
``benchmarks/bench_sweep.py``.

Run: ``python benchmarks/bench_engine.py [--trivial-cells 20000] [--busy-cells 40]``.
Each figure is printed on a line of its own. Cluster start-up is measured separately and excluded
from the throughput figures (both sides get a warm pool).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpbench import Algorithm, Param, PrivacyLedger, Release
from dpbench.config.suite import parse_suite
from dpbench.core import registry
from dpbench.engine.runner import run_suite

BUSY_SECONDS = 0.2


def busy(seconds: float) -> float:
    """CPU-bound work for ``seconds`` (a Python loop: holds the GIL like a pure-Python mechanism)."""
    t_end = time.perf_counter() + seconds
    x = 0.0
    while time.perf_counter() < t_end:
        for i in range(200):
            x += i * 1e-9
    return x


class Trivial(Algorithm):
    name = "bench_trivial"
    privacy = "none"
    requires = ("convex",)

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        return Release(problem.constraint.center(data.p), PrivacyLedger.non_private())


class Busy(Algorithm):
    name = "bench_busy"
    privacy = "none"
    requires = ("convex",)
    params = {"seconds": Param(BUSY_SECONDS, low=0.0)}

    def cost(self, n: int, p: int) -> float:
        return 1e12  # one chunk per task

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        busy(self.seconds)
        return Release(problem.constraint.center(data.p), PrivacyLedger.non_private())


def _suite(algorithm: str, n_values: list[int], seeds: int,
           epsilons: list[float] | None = None) -> str:
    """One experiment of ``algorithm`` on LB-Lin (p = 1) over the given n and ε values."""
    return f"""
name: bench
seeds: {seeds}
experiments:
  - name: e
    problems: [{{problem: lb_lin}}]
    algorithms: [{{label: a, algorithm: {algorithm}}}]
    grid: {{n: {n_values}, p: [1], epsilon: {epsilons or [1.0]}}}
"""


def _timed_run(text: str, scheduler: str | None, workers: int | None) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        suite = parse_suite(text)
        t0 = time.perf_counter()
        summary = run_suite(suite, Path(tmp) / "s.zarr", scheduler=scheduler, workers=workers,
                            progress=False)
        return time.perf_counter() - t0, summary.computed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trivial-cells", type=int, default=20000)
    ap.add_argument("--busy-cells", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    registry.register("algorithms", Trivial)
    registry.register("algorithms", Busy)
    from distributed import Client, LocalCluster

    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    seeds = 100
    n_values = list(range(2, 2 + max(1, args.trivial_cells // seeds)))
    trivial = _suite("bench_trivial", n_values, seeds)
    t, cells = _timed_run(trivial, None, 0)
    print(f"trivial cells inline: {cells} cells in {t:.2f} s = {cells / t:.0f} cells/s "
          f"({1e3 * t / cells:.3f} ms/cell)")

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    print(f"LocalCluster start ({args.workers} workers): {time.perf_counter() - t0:.2f} s")
    try:
        t, cells = _timed_run(trivial, cluster.scheduler_address, None)
        print(f"trivial cells on {args.workers} workers: {cells} cells in {t:.2f} s = "
              f"{cells / t:.0f} cells/s ({1e3 * t / cells:.3f} ms/cell amortised)")

        busy_suite = _suite("bench_busy", list(range(2, 2 + args.busy_cells)), 1)
        t_dp, cells = _timed_run(busy_suite, cluster.scheduler_address, None)
    finally:
        client.close()
        cluster.close()

    with cf.ProcessPoolExecutor(args.workers) as pool:
        list(pool.map(busy, [0.0] * args.workers))  # warm the pool
        t0 = time.perf_counter()
        list(pool.map(busy, [BUSY_SECONDS] * args.busy_cells))
        t_pool = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(args.busy_cells):
        busy(BUSY_SECONDS)
    t_serial = time.perf_counter() - t0
    print(f"busy cells ({BUSY_SECONDS} s each, {args.busy_cells} cells): dpbench {t_dp:.2f} s, "
          f"ProcessPoolExecutor {t_pool:.2f} s, serial {t_serial:.2f} s")
    print(f"parallel efficiency vs ProcessPoolExecutor: {t_pool / t_dp:.3f}")
    print(f"speed-up vs serial loop: {t_serial / t_dp:.2f}x")


if __name__ == "__main__":
    main()
