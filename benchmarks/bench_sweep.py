"""A large sweep of trivial cells (default 10⁵ = 100 seeds × 1000 grid points): planning time,
run time, client memory, resume scan time and store size.

Run: ``python benchmarks/bench_sweep.py [--seeds 100] [--points 1000] [--workers 2]``.
Each figure is printed on a line of its own. ``--workers 0`` runs inline (no dask).

Figures:

* ``plan``: plan the suite and build every task (what ``dpbench run`` does as it submits);
* ``first result``: from the start of ``run_suite`` to the first completed task written (includes
  LocalCluster start-up when ``--workers`` > 0);
* ``run``: total ``run_suite`` time;
* ``client peak RSS``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of this process, which
  holds the client (and, with a LocalCluster, the scheduler; workers are separate processes),
  measured in a fresh process, and its growth over the baseline after imports;
* ``plan tracemalloc peak``: Python allocations while planning (tracemalloc, planning only);
* ``resume scan``: ``run_suite`` on the finished store, i.e. the time ``dpbench run`` spends
  deciding that nothing is pending;
* store size on disk and number of files.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import Trivial, _suite  # noqa: E402

from dpbench.config.suite import parse_suite  # noqa: E402
from dpbench.core import registry  # noqa: E402
from dpbench.engine.plan import plan_suite  # noqa: E402
from dpbench.engine.runner import run_suite  # noqa: E402


def sweep_suite(seeds: int, points: int) -> str:
    """``points`` grid points (10 sample sizes × points/10 epsilons) of the trivial mechanism."""
    n_values = list(range(2, 12))
    n_eps = max(1, points // len(n_values))
    return _suite("bench_trivial", n_values, seeds, [round(0.01 * (i + 1), 4) for i in range(n_eps)])


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _store_size(path: Path) -> tuple[int, int]:
    size = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            size += os.path.getsize(os.path.join(root, name))
            files += 1
    return size, files


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--resume-repeats", type=int, default=3)
    args = ap.parse_args()
    registry.register("algorithms", Trivial)
    base_rss = _maxrss_mb()
    text = sweep_suite(args.seeds, args.points)
    suite = parse_suite(text)
    n_cells = suite.experiments[0].seeds * len(list(suite.experiments[0].grid["epsilon"])) * 10
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print(f"sweep: {n_cells} cells ({args.seeds} seeds x {n_cells // args.seeds} grid points), "
          f"workers={args.workers}")

    tracemalloc.start()
    t0 = time.perf_counter()
    plan = plan_suite(suite)
    n_tasks = sum(1 for _ in plan.tasks())
    t_plan = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"plan (validate+plan+build tasks): {t_plan:.3f} s for {plan.n_chunks} chunks -> "
          f"{n_tasks} tasks")
    print(f"plan tracemalloc peak: {peak / 2**20:.1f} MiB")
    del plan

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.zarr"
        first: list[float] = []
        t0 = time.perf_counter()

        def on_result(_: object) -> None:
            if not first:
                first.append(time.perf_counter() - t0)

        workers = args.workers if args.workers > 0 else 0
        summary = run_suite(suite, store, workers=workers, progress=False, on_result=on_result)
        t_run = time.perf_counter() - t0
        assert summary.complete and summary.computed == n_cells, summary
        print(f"first result written after: {first[0]:.3f} s")
        print(f"run: {n_cells} cells in {t_run:.2f} s = {n_cells / t_run:.0f} cells/s "
              f"({1e3 * t_run / n_cells:.3f} ms/cell amortised)")
        rss = _maxrss_mb()
        print(f"client peak RSS (getrusage maxrss, client+scheduler process): {rss:.0f} MiB "
              f"(+{rss - base_rss:.0f} MiB over the {base_rss:.0f} MiB after imports)")
        scans = []
        for _ in range(args.resume_repeats):
            t0 = time.perf_counter()
            again = run_suite(suite, store, workers=workers, progress=False)
            scans.append(time.perf_counter() - t0)
            assert again.computed == 0 and again.complete
        print(f"resume scan (finished store, nothing pending): {min(scans):.3f} s "
              f"(min of {len(scans)}; first {scans[0]:.3f} s)")
        size, files = _store_size(store)
        print(f"store size: {size / 2**20:.1f} MiB in {files} files")


if __name__ == "__main__":
    main()
