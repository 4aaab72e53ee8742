"""Packing from measured cost: a plugin without ``cost()`` against the same plugin with one.

The engine packs cheap chunks together into tasks (:class:`dpbench.engine.plan.Packer`). It used
to size tasks from ``Algorithm.cost`` alone, so a plugin that declares no ``cost()`` (the
fallback ``n·p`` says its cells are trivial) was packed into one task and ran serially: 8.26 s
against 4.30 s for the same 200 ms cells on 2 workers. The packer now times each mechanism ×
problem class on its first results and packs from that. This benchmark runs the same cells
(``benchmarks/_sleep_plugin.py``: each cell sleeps a fixed time) through ``run_suite`` on one
warm LocalCluster of 2 single-threaded workers, with the honest ``cost()`` and without any,
interleaved over ``--rounds`` rounds, and prints the median wall time of each and their ratio.
Target (issue 17): without ``cost()`` within 10 % of with it.

Run: ``python benchmarks/bench_packing.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
sys.path.insert(0, str(HERE))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _sleep_plugin  # noqa: E402

from dpbench.config.suite import parse_suite  # noqa: E402
from dpbench.engine.runner import run_suite  # noqa: E402

#: (cells, seconds per cell): the issue's two workloads.
WORKLOADS = ((40, 0.2), (200, 0.01))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    _sleep_plugin.register()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client, \
            tempfile.TemporaryDirectory() as tmp:
        client.run(_sleep_plugin.warm)
        print(f"LocalCluster: {args.workers} workers x 1 thread; median of {args.rounds} rounds")
        for cells, seconds in WORKLOADS:
            times: dict[str, list[float]] = {"cost": [], "nocost": []}
            for r in range(args.rounds):
                for variant, name in (("cost", _sleep_plugin.SleepCell.name),
                                      ("nocost", _sleep_plugin.SleepCellNoCost.name)):
                    suite = parse_suite(_sleep_plugin.suite_text(name, cells, seconds, "packing"))
                    t0 = time.perf_counter()
                    s = run_suite(suite, Path(tmp) / f"{variant}-{cells}-{r}.zarr",
                                  scheduler=cluster.scheduler_address, progress=False)
                    times[variant].append(time.perf_counter() - t0)
                    assert s.computed == cells and s.failed == 0
            ideal = cells * seconds / args.workers
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{cells:>4} cells x {seconds * 1e3:>4.0f} ms (ideal {ideal:.2f} s): "
                  f"with cost() {med['cost']:.2f} s, without {med['nocost']:.2f} s, "
                  f"ratio {med['nocost'] / med['cost']:.3f}")


if __name__ == "__main__":
    main()
