"""Client side: plan the pending cells of a suite, run them on dask, write the cube.

Tasks are submitted most-expensive-first with a bounded in-flight window and consumed as they
complete (``as_completed``); each completed task is written at once by this process, the store's
only writer. Dask re-runs tasks of lost workers; because tasks are deterministic and writes go to
fixed positions, a re-run cell can never be counted twice. A task that fails beyond dask's retries
(for example a worker killed repeatedly) marks its cells failed; the sweep goes on.
"""

from __future__ import annotations

import datetime as _dt
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config.cluster import check_cluster_source, cluster_class, connect, load_profile
from ..config.suite import Suite
from ..core.errors import SchedulerLost, UserInputError
from ..core.schema import DONE, FAILED, FLOAT_VARS, ChunkResult
from ..store.cube import Counts, Store, check_store_path
from .cells import TaskResult, run_task
from .plan import TaskSpec, count_cells, expand, pack


@dataclass
class RunSummary:
    store: Path
    backend: str
    computed: int = 0
    failed: int = 0
    not_applicable: int = 0
    seconds: float = 0.0
    counts: dict[str, Counts] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(c.pending == 0 and c.failed == 0 for c in self.counts.values())


class Progress:
    """Cells done / total / failed and an ETA (cost-weighted). A live bar on a terminal, a line
    every ``every`` seconds otherwise."""

    def __init__(self, total_cells: int, total_cost: float, enabled: bool = True,
                 every: float = 10.0):
        self.total, self.total_cost = total_cells, max(total_cost, 1e-12)
        self.done = self.failed = 0
        self.cost_done = 0.0
        self.enabled, self.every = enabled, every
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from rich.progress import BarColumn, TextColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]cells"), BarColumn(),
                TextColumn("{task.fields[text]}"), transient=False)
            self._bar.start()
            self._task = self._bar.add_task("run", total=self.total_cost, text=self._text())

    def _eta(self) -> str:
        elapsed = time.perf_counter() - self.t0
        if self.cost_done <= 0:
            return "ETA --"
        left = elapsed * (self.total_cost - self.cost_done) / self.cost_done
        return f"ETA {left:5.0f}s"

    def _text(self) -> str:
        return (f"{self.done}/{self.total} done, {self.failed} failed, "
                f"{time.perf_counter() - self.t0:.0f}s elapsed, {self._eta()}")

    def update(self, done: int, failed: int, cost: float) -> None:
        self.done += done
        self.failed += failed
        self.cost_done += cost
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.cost_done, text=self._text())
        elif time.perf_counter() - self._last >= self.every:
            self._print()

    def _print(self) -> None:
        self._last = time.perf_counter()
        self._printed = (self.done, self.failed)
        print(f"[dpbench] {self._text()}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and getattr(self, "_printed", None) != (self.done, self.failed):
            self._print()


def _failed_result(task: TaskSpec, message: str) -> TaskResult:
    chunks = []
    for c in task.chunks:
        k = len(c.seeds)
        chunks.append(ChunkResult(c.experiment, c.index, c.seeds, c.fresh,
                                  {v: np.full(k, np.nan) for v in FLOAT_VARS},
                                  np.full(k, FAILED, dtype=np.uint8), [message] * k))
    return TaskResult(task.key, chunks)


def _iter_results(client: Any, tasks: list[TaskSpec], window: int | None,
                  memory_mb: float | None = None, *, run: Callable[..., Any] = run_task,
                  failed: Callable[[Any, str], Any] = _failed_result,
                  result_type: type = TaskResult) -> Iterator[tuple[Any, Any]]:
    """(task, result) pairs as tasks complete: ``run(task, memory_mb)`` on the workers (inline
    without a client), ``failed(task, message)`` for a task that failed beyond dask's retries.

    The hooks let other kinds of cells (the privacy audit's batches, :mod:`dpbench.audit.engine`)
    share the window, retries and scheduler-loss handling; the defaults run suite cells.
    """
    if client is None:
        for t in tasks:
            yield t, run(t, memory_mb)
        return
    from distributed import as_completed

    nthreads = sum(client.nthreads().values()) or 1
    window = window or max(4 * nthreads, 64)
    queue = iter(enumerate(tasks))
    specs: dict[str, TaskSpec] = {}
    ac = as_completed(with_results=True, raise_errors=False)

    def launch() -> bool:
        nxt = next(queue, None)
        if nxt is None:
            return False
        rank, spec = nxt
        fut = client.submit(run, spec, memory_mb, key=spec.key, pure=False, retries=1,
                            priority=len(tasks) - rank)
        specs[fut.key] = spec
        ac.add(fut)
        return True

    for _ in range(window):
        if not launch():
            break
    for batch in ac.batches():
        for fut, res in batch:
            spec = specs.pop(fut.key)
            if fut.status == "cancelled":  # nobody else cancels: the scheduler connection is gone
                where = getattr(client.scheduler, "address", "") or "of the run"
                raise SchedulerLost(f"lost the scheduler {where} mid-run; the cells computed so "
                                    "far are saved: run the same command again to resume")
            if fut.status == "error" or not isinstance(res, result_type):
                exc = fut.exception() if fut.status == "error" else res
                yield spec, failed(spec, f"task failed: {type(exc).__name__}: {exc}")
            else:
                yield spec, res
            fut.release()
            launch()


def drive_tasks(tasks: list[TaskSpec], store: Store, summary: Any, bar: Progress, *,
                write: Callable[[Any], tuple[int, int]],
                connection: tuple[str | None, str | Path | None, int | None, str | Path | None],
                window: int | None, memory_mb: float | None = None,
                on_result: Callable[[Any], None] | None = None, command: str | None = None,
                **iter_kw: Any) -> None:
    """Run packed ``tasks`` on the cluster named by ``connection`` (scheduler, profile, workers,
    scheduler file), hand each completed task to ``write`` (which stores it and returns its
    (done, failed) cell counts), and record the run in the store's log, also when interrupted.

    The one client loop behind ``dpbench run`` and ``dpbench audit``; ``iter_kw`` passes the task
    function and result types of the audit cells to :func:`_iter_results`. ``summary`` needs
    ``backend``, ``computed``, ``failed`` and ``seconds`` attributes.
    """
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    interrupted = ""
    try:
        if tasks:
            with connect(*connection) as (client, backend):
                summary.backend = backend
                for spec, res in _iter_results(client, tasks, window, memory_mb, **iter_kw):
                    done, failed = write(res)
                    summary.computed += done
                    summary.failed += failed
                    bar.update(done, failed, spec.cost)
                    if on_result is not None:
                        on_result(res)
    except BaseException as exc:
        interrupted = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - t0
        store.record_run({**({"command": command} if command else {}),
                          "started_utc": started, "seconds": round(summary.seconds, 3),
                          "backend": summary.backend, "cells_computed": summary.computed,
                          "cells_failed": summary.failed,
                          **({"interrupted": interrupted} if interrupted else {})})


def check_connection_args(workers: int | None, profile: str | Path | None, scheduler: str | None,
                          scheduler_file: str | Path | None) -> None:
    """UserInputError for bad --workers / --cluster / --scheduler(-file), before any store write."""
    if workers is not None and workers < 0:
        raise UserInputError(f"--workers must be >= 0, got {workers}")
    if profile is not None:
        cluster_class(load_profile(profile), profile)
    check_cluster_source(scheduler, scheduler_file)


def run_suite(suite: Suite, store_path: str | Path, *, scheduler: str | None = None,
              scheduler_file: str | Path | None = None,
              profile: str | Path | None = None, workers: int | None = None,
              restart: bool = False, retry_failed: bool = True, window: int | None = None,
              progress: bool = True, on_result: Callable[[TaskResult], None] | None = None,
              ) -> RunSummary:
    """Run (or resume) ``suite`` into the store at ``store_path``.

    The suite is validated and planned before the store is touched. Only cells that are pending
    (and failed ones, unless ``retry_failed`` is False) are computed.
    """
    check_connection_args(workers, profile, scheduler, scheduler_file)
    # Instantiating every cell's problem and algorithm validates parameter combinations that only
    # occur at some grid points, before the store is touched.
    planned = {exp.name: expand(suite, exp) for exp in suite.experiments}
    resuming = check_store_path(Path(store_path)) and not restart
    store = Store.prepare(store_path, suite, restart=restart)
    chunks, not_applicable = [], []
    for exp in suite.experiments:
        if resuming:
            c, na = expand(suite, exp, store.pending_mask(exp.name, retry_failed))
        else:
            c, na = planned[exp.name]
        chunks += c
        not_applicable += na
    summary = RunSummary(Path(store_path), "none (nothing to compute)")
    summary.not_applicable = store.mark_not_applicable(not_applicable)
    tasks = pack(chunks)
    bar = Progress(count_cells(chunks), sum(t.cost for t in tasks), enabled=progress)

    def write(res: TaskResult) -> tuple[int, int]:
        store.write_many(res.chunks)
        done = sum(int(np.sum(c.status == DONE)) for c in res.chunks)
        failed = sum(int(np.sum(c.status == FAILED)) for c in res.chunks)
        return done, failed

    drive_tasks(tasks, store, summary, bar, write=write,
                connection=(scheduler, profile, workers, scheduler_file), window=window,
                memory_mb=suite.cell_memory_mb, on_result=on_result)
    summary.counts = {e.name: store.counts(e.name) for e in suite.experiments}
    return summary
