"""Scale-out on 2 cores: sleep-bound cells on 16–32 single-thread workers (issue 17).

What it measures
----------------
A suite of sleep cells (``benchmarks/_sleep_plugin.py``: each cell sleeps ``--sleep`` seconds,
100 ms by default, and releases the centre of C) on LB-Quad (n = 10, p = 2; ``--seeds`` seeds ×
ε values) runs through ``dpbench.engine.runner.run_suite(suite, store, scheduler=...)`` on a
LocalCluster of W single-threaded worker processes (``--workers 16 32``), or through a SLURM
profile (``--slurm``). Sleeping cells leave the two cores to the client and the scheduler, so a
2-core machine shows what 16–32 workers of a real cluster would see from the engine: packing,
submission window, dispatch and the single writer.

* ``util = Σ cell time / (W × wall)``: Σ cell time is the cube's ``wall_time_s`` summed over the
  computed cells (the mechanism's own run time, read back from the store with xarray); ``wall``
  runs from the first submission to the last result written by the client. Cluster start-up
  (the LocalCluster, or the SLURM jobs starting and every worker connecting, plus the workers
  importing dpbench) is excluded and reported separately (``start s``), as is the whole
  ``run_suite`` time (planning, store creation, connecting: ``run s``).
* Where the rest goes, from dask's task stream (each worker's task start/stop times), as fractions
  of ``W × wall`` that add up to 1 with ``util``: ``in-task`` (per-cell work around the mechanism:
  dataset, risk, the isolation child, serialisation), ``ramp`` (submission to a worker's first
  task), ``gaps`` (a worker idle between two tasks: the client or the scheduler too slow to hand
  out the next one), ``tail`` (a worker's last task to the end of the run; a worker that never got
  a task counts here entirely). ``pack`` is the best utilisation the tasks as packed allow on W
  workers, ``Σ cell / (W · max(Σ task / W, longest task))``.
* The client: tasks, cells per task, ``Store.write_many`` calls (count, Σ seconds, ms each, share
  of the wall), results per second it must absorb at ideal speed; CPU (CPU seconds / wall) of
  this process (client loop and zarr writes; also the scheduler when the LocalCluster runs in
  this process, as with ``dpbench run --workers N`` and dask-jobqueue), of a separate scheduler
  process, of the worker processes and of the whole machine (``others`` = the machine minus ours:
  other users of these 2 cores skew every figure, so they are printed); CPU ms per task and
  ``1-core cap``, the utilisation the client (and scheduler) would allow with a dedicated core
  each, ``mean task seconds / (W × CPU seconds per task)``.

Two mechanisms: ``bench_sleep`` with an honest ``cost()`` (the sleep in the engine's work units)
and ``bench_sleep_nocost``, the same cell declaring no ``cost()`` (the engine then assumes
``n·p``): what packing does to a plugin that declares none ("a plugin without cost() runs
serially" with pure estimate-based packing). With 10 seeds a chunk (one grid point) is 1 s of
sleep, above the packer's task target, so both get one chunk per task; ``--seeds 1`` (0.1-s chunks)
makes the packer group chunks.

``--dask lean`` (default) slows down dask's per-process housekeeping (:data:`LEAN_DASK`: the
10-ms statistical profiler off, event-loop tick 20 ms → 1 s, system monitor 0.5 s → 5 s, memory
monitor 0.1 s → 1 s). On a cluster each worker's ~2 % of a core of housekeeping runs on its own
core; here 32 idle workers take 0.72 of the 2 cores with dask's defaults (0.04 lean), which then
starves the client: ``--dask default`` shows that 2-core artefact.

How to run
----------
::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_scaleout.py            # 3,200 cells
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_scaleout.py --cells 10000 --repeats 3
    .venv/bin/python benchmarks/bench_scaleout.py --workers 32 --variants cost --cells 10000
    .venv/bin/python benchmarks/bench_scaleout.py --workers 32 --seeds 1    # 0.1-s chunks: packing
    .venv/bin/python benchmarks/bench_scaleout.py --cluster-in subprocess   # scheduler elsewhere
    scripts/slurm-local.sh start && .venv/bin/python benchmarks/bench_scaleout.py --slurm \\
        --no-local --cells 10000         # the same through dask-jobqueue on the local SLURM

``--slurm`` writes a profile in the style of ``cluster/slurm-local.yaml`` (printed) and runs
``run_suite(profile=...)``: ``--slurm-jobs`` jobs of ``--slurm-workers-per-job`` single-thread
worker processes (job name ``dpb-scaleout``). The local node (scripts/slurm-local.sh) has 2 CPUs
and ``SelectTypeParameters=CR_Core``, so SLURM runs at most 2 one-CPU jobs at a time: 32 jobs of
one worker cannot run there. Each job instead books one CPU (``job_cpu: 1``) and runs 16 sleeping
workers (``cores: 16, processes: 16``): 2 jobs × 16 = 32 workers by default. ``--json FILE``
saves every figure.

Acceptance target (issue 17): utilisation ≥ 0.9 with 32 workers on sleep cells of 100 ms
(10⁴ cells: ``--cells 10000``; ideal wall 10⁴ × 0.1 s / 32 ≈ 31 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Worker processes (LocalCluster's spawned workers, SLURM jobs) import the plugin by reference.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(HERE))

import _sleep_plugin
import numpy as np

from dpbench.config.suite import parse_suite
from dpbench.engine.runner import run_suite

# The scheduler's HTTP server (metrics) falls back to a free port when 8787 is taken.
warnings.filterwarnings("ignore", message="Port 8787 is already in use")
#: ``--dask lean`` (default): dask's per-process housekeeping slowed down or off. Every dask
#: process samples its own stack every 10 ms (statistical profiler), checks its event loop every
#: 20 ms, polls system metrics every 500 ms and memory every 100 ms. On a cluster each worker's
#: ~2 % of a core of that is on its own core; here 32 idle workers take 0.72 of the 2 cores
#: (and the scheduler 0.18) with the defaults, 0.04 (0.03) lean, CPU the client then lacks.
LEAN_DASK = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
}


def lean_env() -> dict[str, str]:
    """:data:`LEAN_DASK` as the DASK_* environment variables child processes read."""
    return {"DASK_" + k.upper().replace(".", "__").replace("-", "_"): str(v)
            for k, v in LEAN_DASK.items()}


VARIANTS = {"cost": _sleep_plugin.SleepCell.name, "nocost": _sleep_plugin.SleepCellNoCost.name}
TARGET = 0.9


def suite_text(algorithm: str, cells: int, seeds: int, sleep_s: float) -> str:
    """``cells`` sleep cells: ``seeds`` seeds × ``cells / seeds`` ε values on LB-Quad (n=10, p=2)."""
    points = max(1, math.ceil(cells / seeds))
    eps = [round(1.0 + 0.001 * i, 3) for i in range(points)]
    return f"""
name: scaleout
seeds: {seeds}
experiments:
  - name: sleep
    problems: [{{problem: lb_quad}}]
    algorithms:
      - {{label: sleep, algorithm: {algorithm}, params: {{seconds: {sleep_s!r}}}}}
    grid: {{n: [10], p: [2], epsilon: {eps}}}
"""


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far (/proc/stat; NaN elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:9]]   # up to steal (no guest)
    except OSError:
        return math.nan, math.nan
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)   # idle + iowait
    return (sum(fields) - idle) / hz, sum(fields) / hz


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) of these processes and all their descendants, alive now."""
    import psutil

    total = 0.0
    seen: set[int] = set()
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for pr in procs:
            if pr.pid in seen:
                continue
            seen.add(pr.pid)
            with contextlib.suppress(psutil.Error):
                t = pr.cpu_times()
                total += t.user + t.system
    return total


def own_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one process, without its children."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


@dataclass
class CpuProbe:
    """CPU seconds used between :meth:`start` and :meth:`stop`: this process (client; with an
    in-process LocalCluster also the scheduler), the worker processes, and the whole machine."""

    worker_pids: list[int] = field(default_factory=list)   # roots: nannies / cluster process
    sched_pid: int | None = None                             # a separate scheduler process
    start_vals: tuple[float, ...] = ()
    used: dict[str, float] = field(default_factory=dict)

    def _read(self) -> tuple[float, ...]:
        busy, total = machine_cpu()
        sched = own_cpu(self.sched_pid) if self.sched_pid else 0.0
        workers = tree_cpu(self.worker_pids) - sched if self.worker_pids else math.nan
        return time.process_time(), workers, sched, busy, total

    def start(self) -> None:
        self.start_vals = self._read()

    def stop(self, wall: float) -> None:
        if not self.start_vals:
            return
        d = [b - a for a, b in zip(self.start_vals, self._read())]
        ncpu = os.cpu_count() or 1
        self.used = {"client_cores": d[0] / wall, "workers_cores": d[1] / wall,
                     "scheduler_cores": d[2] / wall,
                     "machine_cores": ncpu * d[3] / d[4] if d[4] > 0 else math.nan}


@dataclass
class Recorder:
    """What the patched backend and store see during one ``run_suite``."""

    wait_workers: int = 0
    wait_timeout_s: float = 600.0
    backend: str = ""
    nthreads: int = 0
    startup_in_run_s: float = 0.0       # waiting for workers inside run_suite (SLURM)
    t_submit: float = math.nan          # perf_counter at the first submit
    t_submit_wall: float = math.nan     # time.time() at the same moment
    t_last: float = math.nan            # perf_counter when the last result was written
    t_last_wall: float = math.nan
    tasks: int = 0
    task_cells: list[int] = field(default_factory=list)
    writes: int = 0
    write_s: float = 0.0
    write_max_s: float = 0.0
    stream: list[dict[str, Any]] = field(default_factory=list)
    cpu: CpuProbe = field(default_factory=CpuProbe)


@contextlib.contextmanager
def instrumented(rec: Recorder):
    """Patch (in this process only) the dask backend's ``results`` to wait for the workers, time
    the first submission and record dask's task stream, and ``Store.write_many`` to time the
    client's writes."""
    from distributed import get_task_stream

    from dpbench.engine.backends import dask as dask_backend
    from dpbench.store import cube

    orig_results = dask_backend.DaskBackend.results
    orig_write = cube.Store.write_many

    def results(self: Any, run: Any, tasks: Any, window: Any = None):
        rec.backend = self.description
        t0 = time.perf_counter()
        if rec.wait_workers:
            self.client.wait_for_workers(rec.wait_workers, timeout=rec.wait_timeout_s)
        self.client.run(_sleep_plugin.warm)
        rec.startup_in_run_s = time.perf_counter() - t0
        rec.nthreads = sum(self.client.nthreads().values())
        with get_task_stream(self.client) as ts:
            rec.cpu.start()
            rec.t_submit, rec.t_submit_wall = time.perf_counter(), time.time()
            yield from orig_results(self, run, tasks, window)
            rec.cpu.stop(time.perf_counter() - rec.t_submit)
        rec.stream = list(ts.data)

    def write_many(self: Any, results: Any) -> None:
        t0 = time.perf_counter()
        orig_write(self, results)
        dt = time.perf_counter() - t0
        rec.writes += 1
        rec.write_s += dt
        rec.write_max_s = max(rec.write_max_s, dt)

    dask_backend.DaskBackend.results = results  # type: ignore[method-assign]
    cube.Store.write_many = write_many  # type: ignore[method-assign]
    try:
        yield rec
    finally:
        dask_backend.DaskBackend.results = orig_results  # type: ignore[method-assign]
        cube.Store.write_many = orig_write  # type: ignore[method-assign]


def stream_breakdown(stream: list[dict[str, Any]], t0: float, t1: float, workers: int,
                     ) -> dict[str, float]:
    """Worker-seconds of ``[t0, t1]`` (wall clock) spent in tasks, before the first task, between
    tasks and after the last one, from dask's task stream."""
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    durations = []
    for rec in stream:
        for ss in rec.get("startstops", ()):
            if ss.get("action") == "compute":
                per[rec["worker"]].append((float(ss["start"]), float(ss["stop"])))
                durations.append(float(ss["stop"]) - float(ss["start"]))
    busy = ramp = gaps = tail = 0.0
    for spans in per.values():
        spans.sort()
        busy += sum(b - a for a, b in spans)
        ramp += max(0.0, spans[0][0] - t0)
        gaps += sum(max(0.0, spans[i + 1][0] - spans[i][1]) for i in range(len(spans) - 1))
        tail += max(0.0, t1 - spans[-1][1])
    idle_workers = max(0, workers - len(per))
    tail += idle_workers * (t1 - t0)
    return {"task_s": busy, "ramp_s": ramp, "gaps_s": gaps, "tail_s": tail,
            "workers_used": len(per), "longest_task_s": max(durations, default=0.0),
            "compute_records": len(durations)}


def cube_cell_times(store: Path) -> tuple[int, float, int]:
    """(cells done, Σ wall_time_s over them, cells failed) from the store."""
    import xarray as xr

    from dpbench.core.schema import DONE, FAILED

    ds = xr.open_zarr(str(store), group="sleep", consolidated=False).load()
    status = ds["status"].values
    wall = ds["wall_time_s"].values
    done = status == DONE
    return int(done.sum()), float(np.nansum(wall[done])), int((status == FAILED).sum())


def measure(label: str, variant: str, workers: int, args: argparse.Namespace, *,
            scheduler: str | None = None, profile: Path | None = None,
            wait_workers: int = 0, startup_s: float = math.nan,
            cpu: CpuProbe | None = None) -> dict[str, Any]:
    text = suite_text(VARIANTS[variant], args.cells, args.seeds, args.sleep)
    suite = parse_suite(text)
    rec = Recorder(wait_workers=wait_workers, cpu=cpu or CpuProbe())

    def on_result(res: Any) -> None:
        rec.tasks += 1
        rec.task_cells.append(sum(len(c.seeds) for c in res.chunks))
        rec.t_last, rec.t_last_wall = time.perf_counter(), time.time()

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="dpb-scaleout-") as tmp:
        store = Path(tmp) / "s.zarr"
        with instrumented(rec):
            t0 = time.perf_counter()
            summary = run_suite(suite, store, scheduler=scheduler, profile=profile,
                                progress=False, on_result=on_result)
            run_s = time.perf_counter() - t0
        done, cell_s, failed = cube_cell_times(store)
    wall = rec.t_last - rec.t_submit
    br = stream_breakdown(rec.stream, rec.t_submit_wall, rec.t_last_wall, workers)
    cap = workers * wall
    if math.isnan(startup_s):
        startup_s = rec.startup_in_run_s
    pack_bound = cell_s / (workers * max(br["task_s"] / workers, br["longest_task_s"]))
    row = {
        "mode": label, "variant": variant, "workers": workers, "nthreads": rec.nthreads,
        "backend": rec.backend, "cells": done, "failed": failed, "tasks": rec.tasks,
        "cells_per_task_mean": float(np.mean(rec.task_cells)) if rec.task_cells else 0.0,
        "cells_per_task_max": max(rec.task_cells, default=0),
        "cell_s": cell_s, "wall_s": wall, "ideal_wall_s": cell_s / workers,
        "utilisation": cell_s / cap,
        "frac_in_task": (br["task_s"] - cell_s) / cap, "frac_ramp": br["ramp_s"] / cap,
        "frac_gaps": br["gaps_s"] / cap, "frac_tail": br["tail_s"] / cap,
        "task_s": br["task_s"], "longest_task_s": br["longest_task_s"],
        "workers_used": br["workers_used"], "pack_bound": pack_bound,
        "writes": rec.writes, "write_s": rec.write_s, "write_max_s": rec.write_max_s,
        "run_suite_s": run_s, "startup_s": startup_s, "computed": summary.computed,
        "loadavg_1m_before": load0, "loadavg_1m_after": os.getloadavg()[0],
        "writes_per_s_needed": rec.tasks / (cell_s / workers) if cell_s else math.nan,
        **{k: rec.cpu.used.get(k, math.nan) for k in ("client_cores", "workers_cores",
                                                      "scheduler_cores", "machine_cores")},
    }
    # CPU the client (and the scheduler) spend per task, and the utilisation one dedicated core
    # each would allow: workers hand in W / (mean task seconds) results per second.
    per_task = {k: row[f"{k}_cores"] * wall / max(rec.tasks, 1)
                for k in ("client", "scheduler")}
    row["client_cpu_ms_per_task"] = 1e3 * per_task["client"]
    row["scheduler_cpu_ms_per_task"] = 1e3 * per_task["scheduler"]
    mean_task = br["task_s"] / max(rec.tasks, 1)
    worst = max((v for v in per_task.values() if not math.isnan(v)), default=0.0)
    row["one_core_cap"] = min(1.0, mean_task / (workers * worst)) if worst > 0 else math.nan
    print(f"  {label:5s} W={workers:2d} {variant:6s}: {done} cells ({failed} failed) in "
          f"{rec.tasks} tasks, wall {wall:.2f} s (ideal {cell_s / workers:.2f} s), "
          f"utilisation {row['utilisation']:.3f}", flush=True)
    return row


CLUSTER_SCRIPT = """
import logging, sys, warnings, dask
warnings.filterwarnings("ignore", message="Port 8787 is already in use")
from distributed import Client, LocalCluster
dask.config.set({"distributed.scheduler.dashboard.tasks.task-stream-length": 10**6})
with LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1, processes=True,
                  dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()   # until the benchmark closes our stdin
"""


@contextlib.contextmanager
def local_cluster(workers: int, where: str):
    """(scheduler address, CpuProbe) of a LocalCluster of ``workers`` single-thread worker
    processes: in this process (``where="this"``: the scheduler shares this process, and its
    GIL, with the client, as with ``dpbench run --workers N``) or in a child process
    (``"subprocess"``: the client process only runs the client, as with a remote scheduler)."""
    import dask
    from distributed import Client, LocalCluster

    if where == "this":
        with dask.config.set({"distributed.scheduler.dashboard.tasks.task-stream-length": 10**6}),\
                LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                             dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
            import psutil

            pids = [c.pid for c in psutil.Process().children()]   # the worker processes
            yield cluster.scheduler_address, CpuProbe(worker_pids=pids)
        return
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER_SCRIPT, str(workers)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        address = proc.stdout.readline().strip() if proc.stdout else ""
        if not address:
            raise RuntimeError("the cluster process did not start")
        with Client(address) as c:
            c.wait_for_workers(workers, timeout=600)
        # the cluster process runs the scheduler; its descendants are the workers
        yield address, CpuProbe(worker_pids=[proc.pid], sched_pid=proc.pid)
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=30)


def local_runs(workers: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    from distributed import Client

    rows = []
    t0 = time.perf_counter()
    with local_cluster(workers, args.cluster_in) as (address, probe):
        t_up = time.perf_counter() - t0
        with Client(address) as client:
            client.run(_sleep_plugin.warm)   # workers import dpbench: start-up, not run time
        startup = time.perf_counter() - t0
        print(f"LocalCluster of {workers} workers x 1 thread ({args.cluster_in}): start-up "
              f"{t_up:.2f} s, + importing dpbench on the workers {startup - t_up:.2f} s",
              flush=True)
        mode = "local" if args.cluster_in == "this" else "local-sp"
        for _ in range(args.repeats):
            for variant in args.variants:
                rows.append(measure(mode, variant, workers, args, scheduler=address,
                                    startup_s=startup, cpu=probe))
    return rows


SLURM_PROFILE = """\
# Written by benchmarks/bench_scaleout.py --slurm: the local single-node SLURM of
# scripts/slurm-local.sh (2 CPUs, CR_Core: at most 2 one-CPU jobs at a time), {jobs} job(s) of
# {per_job} single-thread worker processes each; every job books one CPU (job_cpu: 1) because the
# cells sleep. Fixed scale, no adapt (cluster/slurm-local.yaml).
description: bench_scaleout on the local SLURM, {jobs} x {per_job} workers
cluster:
  module: dask_jobqueue
  class: SLURMCluster
  kwargs:
    queue: {queue}
    job_name: dpb-scaleout
    cores: {per_job}
    processes: {per_job}
    job_cpu: 1
    memory: {memory}
    walltime: "00:30:00"
    worker_extra_args: ["--lifetime", "25m", "--lifetime-stagger", "2m"]
    job_script_prologue: {prologue}
    log_directory: {logdir}{interface}
scale: {{jobs: {jobs}}}
dask_config: {{distributed.scheduler.dashboard.tasks.task-stream-length: 1000000}}
"""


def slurm_up(queue: str) -> str | None:
    """Why the local SLURM cannot be used, or None when it answers."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no sinfo/sbatch on PATH (scripts/slurm-local.sh start)"
    try:
        out = subprocess.run(["sinfo", "-h", "-p", queue, "-o", "%T"], capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo failed: {exc}"
    if out.returncode != 0 or not any(s in out.stdout for s in ("idle", "mixed", "alloc")):
        return f"partition {queue!r} not up: {out.stdout.strip() or out.stderr.strip()}"
    return None


def slurm_runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    why = slurm_up(args.slurm_queue)
    if why is not None:
        print(f"SLURM: skipped, {why}")
        return []
    workers = args.slurm_jobs * args.slurm_workers_per_job
    rows = []
    with tempfile.TemporaryDirectory(prefix="dpb-scaleout-slurm-") as tmp:
        profile = Path(tmp) / "slurm-scaleout.yaml"
        profile.write_text(SLURM_PROFILE.format(
            jobs=args.slurm_jobs, per_job=args.slurm_workers_per_job, queue=args.slurm_queue,
            memory=args.slurm_memory, logdir=Path(tmp) / "jobs",
            interface=f"\n    interface: {args.slurm_interface}" if args.slurm_interface else "",
            prologue=json.dumps([f"export PYTHONPATH={os.environ['PYTHONPATH']}",
                                 "export OPENBLAS_NUM_THREADS=1",
                                 *(f"export {k}={v}" for k, v in lean_env().items()
                                   if args.dask == "lean")])))
        print(f"SLURM profile {profile}:\n{profile.read_text()}", flush=True)
        for _ in range(args.repeats):
            for variant in args.variants:
                rows.append(measure("slurm", variant, workers, args, profile=profile,
                                    wait_workers=workers))
    return rows


def _f(v: float, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'mode':8s} {'W':>3s} {'variant':7s} {'cells':>6s} {'tasks':>5s} {'c/task':>6s} "
            f"{'Σcell s':>8s} {'wall s':>7s} {'ideal s':>7s} {'util':>6s} {'in-task':>7s} "
            f"{'ramp':>5s} {'gaps':>5s} {'tail':>5s} {'pack':>5s} {'start s':>7s} {'run s':>6s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['mode']:8s} {r['workers']:3d} {r['variant']:7s} {r['cells']:6d} "
              f"{r['tasks']:5d} {r['cells_per_task_mean']:6.1f} {r['cell_s']:8.1f} "
              f"{r['wall_s']:7.2f} {r['ideal_wall_s']:7.2f} {r['utilisation']:6.3f} "
              f"{r['frac_in_task']:7.3f} {r['frac_ramp']:5.3f} {r['frac_gaps']:5.3f} "
              f"{r['frac_tail']:5.3f} {r['pack_bound']:5.3f} {r['startup_s']:7.2f} "
              f"{r['run_suite_s']:6.1f}")
    print("util = Σcell / (W × wall); in-task + ramp + gaps + tail = 1 − util (fractions of "
          "W × wall);\npack = best utilisation the packed tasks allow on W workers; start = "
          "cluster start-up + workers importing dpbench (excluded from wall)")
    print()
    head = (f"{'mode':8s} {'W':>3s} {'variant':7s} {'writes':>6s} {'Σwrite s':>8s} "
            f"{'ms/write':>8s} {'write/wall':>10s} {'need/s':>6s} | CPU cores: {'client':>6s} "
            f"{'sched':>5s} {'workers':>7s} {'machine':>7s} {'others':>6s} {'load1':>5s} | "
            f"CPU ms/task: {'client':>6s} {'sched':>5s} {'1-core cap':>10s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        mine = sum(v for v in (r["client_cores"], r["scheduler_cores"], r["workers_cores"])
                   if not math.isnan(v))
        others = r["machine_cores"] - mine if not math.isnan(r["workers_cores"]) else math.nan
        print(f"{r['mode']:8s} {r['workers']:3d} {r['variant']:7s} {r['writes']:6d} "
              f"{r['write_s']:8.2f} {1e3 * r['write_s'] / max(r['writes'], 1):8.1f} "
              f"{r['write_s'] / r['wall_s']:10.3f} {r['writes_per_s_needed']:6.1f} |"
              f"{'':11s} {_f(r['client_cores'], '6.2f')} {_f(r['scheduler_cores'], '5.2f')} "
              f"{_f(r['workers_cores'], '7.2f')} {_f(r['machine_cores'], '7.2f')} "
              f"{_f(others, '6.2f')} {r['loadavg_1m_after']:5.1f} |{'':13s}"
              f"{_f(r['client_cpu_ms_per_task'], '6.1f')} "
              f"{_f(r['scheduler_cpu_ms_per_task'], '5.1f')} {_f(r['one_core_cap'], '10.2f')}")
    print("write/wall = share of the run the client spent in Store.write_many; need/s = task "
          "results per second the client must write at ideal speed;\nCPU cores = CPU seconds / "
          "wall: client (this process: client loop and zarr writes, plus the scheduler when it "
          "runs here),\nsched (a separate scheduler process), workers (worker processes and "
          "their cell children), machine (all of it, /proc/stat), others (machine − ours);\nCPU ms/task "
          "= CPU seconds per task result; 1-core cap = utilisation the client (with the "
          "scheduler, when it runs in the client's process) and the scheduler would allow with "
          "a dedicated core each: (mean task seconds) / (W × CPU per task), capped at 1")
    groups: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for r in rows:
        groups[(r["mode"], r["workers"], r["variant"])].append(r["utilisation"])
    if any(len(v) > 1 for v in groups.values()):
        print()
        print(f"{'mode':8s} {'W':>3s} {'variant':7s} {'runs':>4s} {'median util':>11s} "
              f"{'min':>6s} {'max':>6s}")
        for (mode, w, variant), us in groups.items():
            print(f"{mode:8s} {w:3d} {variant:7s} {len(us):4d} {float(np.median(us)):11.3f} "
                  f"{min(us):6.3f} {max(us):6.3f}")
    for (mode, w, variant), us in groups.items():
        if w == 32 and variant == "cost":
            u = float(np.median(us))
            verdict = "meets" if u >= TARGET else "misses"
            r0 = rows[0]
            print(f"acceptance ({mode}, 32 workers, {1e3 * r0['sleep_s']:g} ms cells, "
                  f"{r0['cells']} cells, {len(us)} run(s)): median utilisation {u:.3f} "
                  f"{verdict} the target {TARGET}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=3200, help="cells per run (10000: the issue's)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per grid point (cells per chunk)")
    ap.add_argument("--sleep", type=float, default=_sleep_plugin.SLEEP_S,
                    help="seconds each cell sleeps")
    ap.add_argument("--workers", type=int, nargs="+", default=[16, 32],
                    help="LocalCluster sizes (single-thread worker processes)")
    ap.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["cost", "nocost"])
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each variant (interleaved) on the same cluster")
    ap.add_argument("--cluster-in", choices=("this", "subprocess"), default="this",
                    help="run the LocalCluster (scheduler) in this process, as dpbench run "
                         "does, or in a child process, as a remote scheduler would be")
    ap.add_argument("--dask", choices=("lean", "default"), default="lean",
                    help="lean: dask's per-process profiler/monitors slowed down (LEAN_DASK), "
                         "so that 32 workers' housekeeping does not take the 2 cores")
    ap.add_argument("--slurm", action="store_true", help="also run through the local SLURM")
    ap.add_argument("--no-local", action="store_true", help="skip the LocalCluster runs")
    ap.add_argument("--slurm-jobs", type=int, default=2)
    ap.add_argument("--slurm-workers-per-job", type=int, default=16)
    ap.add_argument("--slurm-memory", default="8GB", help="dask memory per job (all its workers)")
    ap.add_argument("--slurm-queue", default=os.environ.get("DPBENCH_SLURM_PARTITION", "dpbench"))
    ap.add_argument("--slurm-interface", default=None,
                    help="the network interface the nodes share (dpb0 on the multi-node cluster "
                         "of scripts/cluster-local.sh; docs/clusters.md, 'Multi-node')")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    args = ap.parse_args()
    _sleep_plugin.register()
    if args.dask == "lean":   # this process (scheduler, client) and every child process
        import dask

        dask.config.set(LEAN_DASK)
        os.environ.update(lean_env())

    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"suite: {args.cells} cells of {1e3 * args.sleep:g} ms ({args.seeds} seeds x "
          f"{math.ceil(args.cells / args.seeds)} grid points), lb_quad n=10 p=2; "
          f"variants {', '.join(args.variants)}; dask config {args.dask}", flush=True)
    rows: list[dict[str, Any]] = []
    if not args.no_local:
        for w in args.workers:
            rows.extend(local_runs(w, args))
    if args.slurm:
        rows.extend(slurm_runs(args))
    for r in rows:
        r["sleep_s"], r["dask"], r["seeds"] = args.sleep, args.dask, args.seeds
    print()
    if rows:
        print_table(rows)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v)
                                                  for k, v in vars(args).items()},
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
