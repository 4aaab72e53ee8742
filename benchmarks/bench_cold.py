"""Cold start and whole-command throughput against ``ProcessPoolExecutor(2)`` (issue 17).

What a user waits for: the same CPU-bound cells (``bench_spin`` of ``benchmarks/_sleep_plugin.py``:
each cell keeps a core busy a fixed time) computed by

* **dpbench, cold**: the whole ``dpbench run`` command in a fresh process (interpreter start,
  imports, validation, store creation, cluster start, cells, shutdown), on the embedded default
  (``--backend dask`` with no scheduler: forked workers, and a LocalCluster only once the work
  left is worth its start, which these sweeps never reach) and on ``--backend processes``;
* **the pool, cold**: a fresh process that starts ``ProcessPoolExecutor(2)`` and maps the same
  function over the cells;
* **warm**: ``run_suite`` on a LocalCluster that is already up (workers warmed), against
  ``map`` on a pool that is already up.

Each figure is the median of ``--rounds`` interleaved rounds, and the ratio is pool time / dpbench
time (1.0: as fast as the pool). Also measured, as whole commands: ``import dpbench``, the time
from the command's start to its first computed cell, ``dpbench status`` and the resume of a
finished store. Targets (issue 17): cold ≥ 0.8× the pool on 200 × 10 ms cells and ≥ 0.9× on
40 × 200 ms; warm ≥ 0.95×; ``import dpbench`` ≤ 0.3 s; first cell ≤ 1 s.

The dpbench command is started through a small bootstrap that registers the benchmark plugin
(as an installed plugin's entry point would) and reports when the first computed cell reaches the
client (it is written at most ``runner.LINGER_S`` = 0.25 s later); workers
import the plugin from ``benchmarks/`` on ``PYTHONPATH``.

Run: ``python benchmarks/bench_cold.py`` (about two minutes with the default 5 rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join([str(HERE), *filter(None, os.environ.get(
           "PYTHONPATH", "").split(os.pathsep))])}
sys.path.insert(0, str(HERE))

import _sleep_plugin  # noqa: E402

#: (cells, seconds per cell): the issue's two workloads.
WORKLOADS = ((200, 0.01), (40, 0.2))

#: How the two dpbench commands are named in the output (the JSON keeps the backend names).
_LABEL = {"dask": "default", "processes": "--backend processes"}

#: The dpbench command: registers the benchmark plugin, prints when the client receives its
#: first computed task (seconds since the epoch) on stderr, runs ``dpbench`` with the given
#: arguments.
_BOOTSTRAP = """
import sys, time
import _sleep_plugin
_sleep_plugin.register()
if __name__ == "__main__":
    from dpbench.engine import plan
    observe = plan.Packer.observe
    def first(self, *a, **k):
        if not getattr(plan, "_first_seen", False):
            plan._first_seen = True
            print(f"FIRST_CELL {time.time()!r}", file=sys.stderr, flush=True)
        return observe(self, *a, **k)
    plan.Packer.observe = first
    from dpbench.cli import main as cli
    if hasattr(cli, "console_main"):  # the installed command's entry point (engines since #17)
        cli.console_main()
    sys.exit(cli.main(sys.argv[1:]))
"""

#: The pool command: ``ProcessPoolExecutor(2)`` over the same cells.
_POOL = """
import sys
from concurrent.futures import ProcessPoolExecutor
import _sleep_plugin
if __name__ == "__main__":
    n, s = int(sys.argv[1]), float(sys.argv[2])
    with ProcessPoolExecutor(2) as ex:
        list(ex.map(_sleep_plugin.spin, [s] * n))
"""


def timed(argv: list[str]) -> tuple[float, float | None]:
    """Wall time of a whole command, and the delay to its first cell (if it reports one)."""
    t_launch = time.time()
    t0 = time.perf_counter()
    out = subprocess.run(argv, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stderr}")
    first = None
    for line in out.stderr.splitlines():
        if line.startswith("FIRST_CELL "):
            first = float(line.split()[1]) - t_launch
    return wall, first


def cold(rounds: int, tmp: Path) -> dict[str, dict[str, float]]:
    py = sys.executable
    bootstrap, pool = tmp / "bootstrap.py", tmp / "pool.py"
    bootstrap.write_text(_BOOTSTRAP)
    pool.write_text(_POOL)
    results: dict[str, dict[str, float]] = {}
    for cells, seconds in WORKLOADS:
        suite = tmp / f"suite-{cells}.yaml"
        suite.write_text(_sleep_plugin.suite_text("bench_spin", cells, seconds, "cold"))
        walls: dict[str, list[float]] = {"pool": [], "dask": [], "processes": []}
        firsts: dict[str, list[float]] = {"dask": [], "processes": []}
        for r in range(rounds):
            walls["pool"].append(timed([py, str(pool), str(cells), str(seconds)])[0])
            for backend in ("dask", "processes"):
                store = tmp / f"s-{cells}-{backend}-{r}.zarr"
                wall, first = timed([py, str(bootstrap), "run", str(suite), "--store", str(store),
                                     "--quiet", "--backend", backend])
                walls[backend].append(wall)
                if first is not None:
                    firsts[backend].append(first)
        med = {k: statistics.median(v) for k, v in walls.items()}
        key = f"{cells}x{seconds * 1e3:.0f}ms"
        results[key] = {"pool_s": med["pool"], **{f"{b}_s": med[b] for b in firsts},
                        **{f"{b}_ratio": med["pool"] / med[b] for b in firsts},
                        **{f"{b}_first_cell_s": statistics.median(v) for b, v in firsts.items()}}
        print(f"cold {cells:>4} x {seconds * 1e3:>3.0f} ms: pool {med['pool']:.2f} s; "
              + "; ".join(f"dpbench {_LABEL[b]} {med[b]:.2f} s ({med['pool'] / med[b]:.2f}x the pool, "
                          f"first cell after {statistics.median(firsts[b]):.2f} s)"
                          for b in firsts), flush=True)
    return results


def commands(rounds: int, tmp: Path) -> dict[str, float]:
    """``import dpbench``, ``dpbench status`` and the resume of a finished store."""
    py = sys.executable
    store = tmp / "s-200-dask-0.zarr"  # finished by the cold runs
    suite = tmp / "suite-200.yaml"
    argv = {
        "python -c pass": [py, "-c", "pass"],
        "import dpbench": [py, "-c", "import dpbench"],
        "dpbench status": [py, "-m", "dpbench", "status", str(store)],
        "resume (finished store)": [py, str(tmp / "bootstrap.py"), "run", str(suite),
                                    "--store", str(store), "--quiet"],
    }
    times = {k: statistics.median(timed(a)[0] for _ in range(rounds)) for k, a in argv.items()}
    for k, v in times.items():
        print(f"{k:<24} {v:.2f} s", flush=True)
    return times


def warm(rounds: int, tmp: Path) -> dict[str, dict[str, float]]:
    from concurrent.futures import ProcessPoolExecutor

    from distributed import Client, LocalCluster

    os.environ.update({k: ENV[k] for k in ("PYTHONPATH", "OPENBLAS_NUM_THREADS")})
    from dpbench.config.suite import parse_suite
    from dpbench.engine.runner import run_suite

    _sleep_plugin.register()
    results: dict[str, dict[str, float]] = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client, \
            ProcessPoolExecutor(2) as pool:
        client.run(_sleep_plugin.warm)
        list(pool.map(_sleep_plugin.spin, [0.01] * 4))
        for cells, seconds in WORKLOADS:
            suite = parse_suite(_sleep_plugin.suite_text("bench_spin", cells, seconds, "cold"))
            run_suite(suite, tmp / f"w-{cells}-warmup.zarr", scheduler=cluster.scheduler_address,
                      progress=False)
            t_pool, t_dask = [], []
            for r in range(rounds):
                t0 = time.perf_counter()
                list(pool.map(_sleep_plugin.spin, [seconds] * cells))
                t_pool.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                s = run_suite(suite, tmp / f"w-{cells}-{r}.zarr",
                              scheduler=cluster.scheduler_address, progress=False)
                t_dask.append(time.perf_counter() - t0)
                assert s.computed == cells and s.failed == 0
            p, d = statistics.median(t_pool), statistics.median(t_dask)
            results[f"{cells}x{seconds * 1e3:.0f}ms"] = {"pool_s": p, "dask_s": d,
                                                         "ratio": p / d}
            print(f"warm {cells:>4} x {seconds * 1e3:>3.0f} ms: pool {p:.2f} s, dpbench on the "
                  f"running LocalCluster {d:.2f} s ({p / d:.2f}x the pool)", flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores; medians of {args.rounds} interleaved rounds", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = {"cold": cold(args.rounds, Path(tmp)),
               "commands": commands(args.rounds, Path(tmp)),
               "warm": warm(args.rounds, Path(tmp))}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
