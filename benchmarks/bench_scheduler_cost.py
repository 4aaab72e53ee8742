"""The dask scheduler's cost per chunk, and the client's, through dpbench's own task path.

What it measures
----------------
A suite of N one-seed grid points (``bench_sleep`` on LB-Quad, ``benchmarks/_sleep_plugin.py``)
is planned (``plan_suite``) and packed one chunk per task (``Plan.tasks`` with a target below
one chunk's cost), and every task goes through ``DaskBackend.results`` — the submission window,
priorities, ``as_completed`` batches and worker watch of a real run — to a ``dask scheduler``
in a process of its own, and from it to ``--workers`` single-threaded ``dask worker`` processes
(all on 127.0.0.1). The task function is :func:`_sleep_plugin.noop_task`: the worker unpickles
the task (its chunks, as in a run) and returns at once, so what is left is the cost of a task
to the scheduler, the client and dask's worker machinery, not a cell's.

For each N (``--chunks``, default 10⁴ and 10⁵; 10⁶ with ``--chunks 10000 100000 1000000``,
which takes about ten minutes more on 2 cores): the wall time from the first submission to the
last result, the scheduler process's CPU seconds (``psutil``: user + system), this process's
(the client: packing, submitting, receiving) and the workers'. Per chunk: each divided by N;
the slope between successive N (the marginal cost, free of the fixed start) is printed too.
``--write`` also measures the client's store write per chunk: ``Store.write_many`` of one-chunk
results in batches of ``--write-batch`` (the runner writes whatever completed together).

Everything runs on one 2-core machine: the scheduler's CPU per chunk is its own cost wherever it
runs; the wall time per chunk is what 2 cores shared by scheduler, client and workers give, an
upper bound of the scheduler's throughput. docs/clusters.md, 'A 1000-node run', uses these
constants.

Run: ``.venv/bin/python benchmarks/bench_scheduler_cost.py [--chunks 10000 100000] [--write]``.
No extra tools: distributed's ``dask`` command and psutil (a dependency of distributed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(HERE))

import _sleep_plugin  # noqa: E402
import psutil  # noqa: E402

from bench_scaleout import LEAN_DASK, lean_env  # noqa: E402
from dpbench.config.suite import parse_suite  # noqa: E402
from dpbench.engine.backends.base import IDLE  # noqa: E402
from dpbench.engine.plan import plan_suite  # noqa: E402


def suite_text(chunks: int) -> str:
    """``chunks`` one-seed grid points: n values × ε values (suite files allow at most 10⁵
    values, so 10⁶ points are a 1000 × 1000 grid)."""
    n_vals = max(1, chunks // 1000) if chunks >= 1000 else 1
    eps = chunks // n_vals
    assert n_vals * eps == chunks, "chunks must be a multiple of 1000 (or below 1000)"
    ns = ", ".join(str(10 + i) for i in range(n_vals))
    es = ", ".join(str(round(1.0 + 0.0001 * i, 4)) for i in range(eps))
    return f"""
name: schedcost
seeds: 1
max_cells: {max(chunks, 1000)}
experiments:
  - name: e
    problems: [{{problem: lb_quad}}]
    algorithms: [{{algorithm: bench_sleep, params: {{seconds: 0.0}}}}]
    grid: {{n: [{ns}], p: [2], epsilon: [{es}]}}
"""


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def tree_cpu(p: psutil.Process) -> float:
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            total += cpu(q)
        except psutil.Error:
            pass
    return total


class Cluster:
    def __init__(self, workdir: Path, workers: int) -> None:
        env = {**os.environ, **lean_env()}
        dask = shutil.which("dask", path=str(Path(sys.executable).parent)) or "dask"
        sched_file = workdir / "scheduler.json"
        self.sched = subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sched_file)], env=env, stdout=subprocess.DEVNULL,
            stderr=(workdir / "scheduler.log").open("wb"))
        deadline = time.monotonic() + 60
        while not sched_file.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the scheduler did not start")
            time.sleep(0.1)
        time.sleep(0.2)
        self.address = json.loads(sched_file.read_text())["address"]
        self.workers = subprocess.Popen(
            [dask, "worker", self.address, "--nworkers", str(workers), "--nthreads", "1",
             "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
            stderr=(workdir / "workers.log").open("wb"))
        self.n_workers = workers

    def close(self) -> None:
        for p in (self.workers, self.sched):
            p.terminate()
        for p in (self.workers, self.sched):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def measure(n: int, cluster: Cluster) -> dict[str, Any]:
    import dask
    from distributed import Client

    from dpbench.engine.backends.dask import DaskBackend

    _sleep_plugin.register()
    t = time.perf_counter()
    plan = plan_suite(parse_suite(suite_text(n)))
    plan_s = time.perf_counter() - t
    sched, me = psutil.Process(cluster.sched.pid), psutil.Process()
    workers = psutil.Process(cluster.workers.pid)
    with dask.config.set(LEAN_DASK), Client(cluster.address, timeout="30s") as client:
        client.wait_for_workers(cluster.n_workers, timeout=120)
        client.run(_sleep_plugin.warm)
        backend = DaskBackend(client, "bench")
        s0, c0, w0 = cpu(sched), cpu(me), tree_cpu(workers)
        t0 = time.perf_counter()
        done = chunks = 0
        for item in backend.results(_sleep_plugin.noop_task, plan.tasks(target=1e-9)):
            if item is IDLE:
                continue
            done += 1
            chunks += int(item[1])
        wall = time.perf_counter() - t0
        s1, c1, w1 = cpu(sched), cpu(me), tree_cpu(workers)
    assert done == n and chunks == n, (done, chunks, n)
    return {"chunks": n, "tasks": done, "plan_s": plan_s, "wall_s": wall,
            "scheduler_cpu_s": s1 - s0, "client_cpu_s": c1 - c0, "workers_cpu_s": w1 - w0}


def write_cost(n: int, batch: int, workdir: Path) -> dict[str, Any]:
    """The client's ``Store.write_many`` per chunk: one-chunk results of ``n`` grid points,
    written ``batch`` results at a time."""
    import numpy as np

    from dpbench.config.records import suite_record
    from dpbench.core.schema import DONE, FLOAT_VARS, ChunkResult
    from dpbench.store.cube import Store

    _sleep_plugin.register()
    suite = parse_suite(suite_text(n))
    plan = plan_suite(suite)
    store = Store.prepare(workdir / f"w{n}.zarr", suite_record(suite, {}), restart=False)
    results = [ChunkResult(c.experiment, c.index, c.seeds, c.fresh,
                           {v: np.full(len(c.seeds), 0.5) for v in FLOAT_VARS},
                           np.full(len(c.seeds), DONE, dtype=np.uint8), [""] * len(c.seeds))
               for c in plan.chunks()]
    t0 = time.perf_counter()
    for i in range(0, len(results), batch):
        store.write_many(results[i:i + batch])
    seconds = time.perf_counter() - t0
    return {"chunks": n, "batch": batch, "seconds": seconds, "ms_per_write":
            1e3 * seconds / -(-n // batch), "us_per_chunk": 1e6 * seconds / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true", help="also the client's store write cost")
    ap.add_argument("--write-chunks", type=int, default=20_000)
    ap.add_argument("--write-batch", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    writes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dpb-schedcost-") as tmp:
        cluster = Cluster(Path(tmp), args.workers)
        try:
            for n in args.chunks:
                r = measure(n, cluster)
                rows.append(r)
                print(f"N={n:>8d}: wall {r['wall_s']:7.1f} s ({1e6 * r['wall_s'] / n:6.0f} µs/chunk)"
                      f"  scheduler CPU {1e6 * r['scheduler_cpu_s'] / n:5.0f} µs/chunk"
                      f"  client CPU {1e6 * r['client_cpu_s'] / n:5.0f} µs/chunk"
                      f"  workers CPU {1e6 * r['workers_cpu_s'] / n:5.0f} µs/chunk"
                      f"  (planning {r['plan_s']:.1f} s)", flush=True)
        finally:
            cluster.close()
        for a, b in zip(rows, rows[1:]):
            dn = b["chunks"] - a["chunks"]
            print(f"slope {a['chunks']}→{b['chunks']}: wall "
                  f"{1e6 * (b['wall_s'] - a['wall_s']) / dn:.0f} µs/chunk, scheduler CPU "
                  f"{1e6 * (b['scheduler_cpu_s'] - a['scheduler_cpu_s']) / dn:.0f} µs/chunk, "
                  f"client CPU {1e6 * (b['client_cpu_s'] - a['client_cpu_s']) / dn:.0f} µs/chunk")
        if args.write:
            for batch in args.write_batch:
                w = write_cost(args.write_chunks, batch, Path(tmp))
                writes.append(w)
                print(f"store write: {w['chunks']} one-chunk results in batches of {batch}: "
                      f"{w['ms_per_write']:.1f} ms per write_many, "
                      f"{w['us_per_chunk']:.0f} µs per chunk", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "writes": writes}, indent=1))


if __name__ == "__main__":
    main()
