"""Client side: plan the pending cells of a suite, run them on a backend, write the cube.

Tasks go to an execution backend (:mod:`dpbench.engine.backends`: dask, local processes or
inline) most-expensive-first and come back as they complete; this process, the store's only
writer, writes the results it has received together whenever the backend has nothing more ready
(one zarr write for every task that completed during the previous one), and never keeps a
result unwritten while it waits. Backends re-run the tasks of lost workers; because
tasks are deterministic and writes go to fixed positions, a re-run cell can never be counted
twice. A task that fails beyond the backend's retries (for example a worker killed repeatedly)
marks its cells failed; the sweep goes on.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import math
import os
import sys
import threading
import time
from concurrent.futures import Future, wait
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..config.records import suite_record
from ..config.slice import Slice, suite_masks
from ..config.suite import Suite
from ..core.schema import DONE, FAILED, FLOAT_VARS, ChunkResult
from ..store.lock import StoreLock
from ..store.paths import check_store_path
from ..store.record import SuiteRecord
from ..store.summary import Counts, experiment_counts, finished, stored_expectations
from ..datasets.source import file_paths
from .backends import Connection, open_backend
from .backends.base import IDLE, TaskFailed
from .cells import TaskResult, run_task
from .plan import Packer, Plan, TaskSpec, chunk_class, plan_suite

_END = object()


@dataclass
class RunSummary:
    store: Path
    backend: str
    computed: int = 0
    failed: int = 0
    not_applicable: int = 0
    seconds: float = 0.0
    counts: dict[str, Counts] = field(default_factory=dict)
    #: Experiments grown in place before the run, with what was added.
    grown: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(c.pending == 0 and c.failed == 0 for c in self.counts.values())


class Progress:
    """Cells done / total / failed and an ETA. A live bar on a terminal, a line every ``every``
    seconds otherwise.

    The ETA comes from measured times, not from what plugins declare. Given the estimated work
    units and the number of chunks of each (experiment, algorithm, problem) class
    (``class_units``, ``class_chunks``), every completed task (:meth:`observe`) calibrates its
    classes. The work left is, per class, its units not yet completed at the class's measured
    seconds per unit; for a class not measured yet, its chunks left at the mean seconds per
    chunk of the measured classes (declared costs are not comparable across classes, so units
    do not carry over). The ETA divides that by the worker seconds the run has obtained per
    second so far. Until a task has been measured, or without class figures, the ETA is
    cost-weighted.
    """

    def __init__(self, total_cells: int, total_cost: float, enabled: bool = True,
                 every: float = 10.0,
                 class_units: Mapping[tuple[str, int, int], float] | None = None,
                 class_chunks: Mapping[tuple[str, int, int], float] | None = None):
        self.total, self.total_cost = total_cells, max(total_cost, 1e-12)
        self.done = self.failed = 0
        self.cost_done = 0.0
        self._left: dict[tuple[str, int, int], float] = dict(class_units or {})
        self._chunks_left: dict[tuple[str, int, int], float] = dict(class_chunks or {})
        self._units: dict[tuple[str, int, int], float] = {}
        self._chunks: dict[tuple[str, int, int], float] = {}
        self._seconds: dict[tuple[str, int, int], float] = {}
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

    def observe(self, chunks: Sequence[Any], seconds: float) -> None:
        """A completed task: its chunks (their class and estimated units) and the worker seconds
        it took (0 or NaN: not measured, e.g. a task the backend could not compute)."""
        units = [(chunk_class(c), float(c.cost)) for c in chunks]
        total = math.fsum(u for _, u in units)
        measured = math.isfinite(seconds) and seconds > 0 and total > 0
        for key, u in units:
            if key in self._left:
                self._left[key] = max(0.0, self._left[key] - u)
            if key in self._chunks_left:
                self._chunks_left[key] = max(0.0, self._chunks_left[key] - 1)
            if measured:
                self._units[key] = self._units.get(key, 0.0) + u
                self._chunks[key] = self._chunks.get(key, 0.0) + 1
                self._seconds[key] = self._seconds.get(key, 0.0) + seconds * u / total

    def eta_seconds(self, elapsed: float) -> float | None:
        """The measured ETA after ``elapsed`` seconds (class docstring); None before a task
        has been measured or without class figures."""
        spent = math.fsum(self._seconds.values())
        if not (self._left and spent > 0 and elapsed > 0):
            return None
        per_chunk = float(np.mean([self._seconds[k] / self._chunks[k] for k in self._seconds]))
        left = math.fsum(
            v * self._seconds[k] / self._units[k] if k in self._units
            else self._chunks_left.get(k, 0.0) * per_chunk
            for k, v in self._left.items())
        return left / (spent / elapsed)

    def _eta(self) -> str:
        elapsed = time.perf_counter() - self.t0
        measured = self.eta_seconds(elapsed)
        if measured is not None:
            return f"ETA {measured:5.0f}s"
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


def failed_task_result(task: TaskSpec, message: str) -> TaskResult:
    """Every cell of a task the backend could not compute, failed with ``message``."""
    chunks = []
    for c in task.chunks:
        k = len(c.seeds)
        chunks.append(ChunkResult(c.experiment, c.index, c.seeds, c.fresh,
                                  {v: np.full(k, np.nan) for v in FLOAT_VARS},
                                  np.full(k, FAILED, dtype=np.uint8), [message] * k))
    return TaskResult(task.key, chunks)


@dataclass(frozen=True)
class TaskKind:
    """What the client loop needs to run one kind of task (suite cells, audit batches).

    ``run`` is the picklable task function the backend calls on a worker (it applies the per-cell
    time and memory limits itself); ``failed(task, message)`` builds the result of a task the
    backend could not compute; ``result_type`` is what ``run`` returns.
    """

    run: Callable[[Any], Any]
    failed: Callable[[Any, str], Any]
    result_type: type
    #: The worker seconds a result took (the progress ETA's calibration; 0: not measured).
    seconds: Callable[[Any], float] = lambda res: 0.0


def suite_tasks(memory_mb: float | None) -> TaskKind:
    """Suite cells: :func:`~dpbench.engine.cells.run_task` under the suite's memory limit."""
    return TaskKind(partial(run_task, memory_mb=memory_mb), failed_task_result, TaskResult,
                    seconds=lambda res: res.seconds)


#: Longest time a received result waits in the client before it is written (seconds; plus up to
#: :data:`~.backends.base.IDLE_EVERY_S` until the backend next yields IDLE). A SIGKILL of the
#: client loses at most this much work (recomputed on resume).
LINGER_S = 0.25
#: Received results that are written at once, whatever their age (bounds the client's memory).
MAX_BUFFERED = 1024


class _WriteBuffer:
    """Results received but not yet written. A write costs the client tens of milliseconds of
    zarr work whatever its size (read, decode, update, encode and write each zarr chunk it
    touches), and on a machine with as many workers as cores that time is taken from the
    workers; so the client writes, when the backend has nothing ready
    (:data:`~.backends.base.IDLE`), only once the oldest result has waited :data:`LINGER_S`:
    one write then serves every task that completed in the meantime."""

    def __init__(self, write: Callable[[list[Any]], tuple[int, int]], summary: Any,
                 bar: Progress, on_result: Callable[[Any], None] | None) -> None:
        self.write, self.summary, self.bar, self.on_result = write, summary, bar, on_result
        self.pending: list[tuple[Any, Any]] = []
        self.oldest = 0.0

    def add(self, spec: Any, res: Any) -> None:
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append((spec, res))
        if len(self.pending) >= MAX_BUFFERED:
            self.flush()

    def idle(self) -> None:
        """The backend has nothing ready: write if the oldest result has waited long enough."""
        if self.pending and time.monotonic() - self.oldest >= LINGER_S:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        done, failed = self.write([res for _, res in batch])
        self.summary.computed += done
        self.summary.failed += failed
        self.bar.update(done, failed, sum(spec.cost for spec, _ in batch))
        if self.on_result is not None:
            for _, res in batch:
                self.on_result(res)


def drive_tasks(tasks: Iterable[Any], record_run: Callable[[dict[str, Any]], None],
                summary: Any, bar: Progress, *,
                kind: TaskKind, write: Callable[[list[Any]], tuple[int, int]],
                connection: Connection, window: int | None = None,
                on_result: Callable[[Any], None] | None = None,
                command: str | None = None,
                packer: Packer | None = None, opened: Any = None) -> None:
    """Run packed ``tasks`` (a sequence, or an iterator the backend pulls from as its submission
    window frees up) of ``kind`` on the backend ``connection`` names, hand the completed tasks'
    results to ``write`` (which stores a list of them and returns their (done, failed) cell
    counts) in batches (:class:`_WriteBuffer`), and record the run in the store's log
    (``record_run``), also when interrupted (results received by then are written first).

    The one client loop behind ``dpbench run`` and ``dpbench audit``. ``summary`` needs
    ``backend``, ``computed``, ``failed`` and ``seconds`` attributes. A ``packer`` producing
    ``tasks`` learns the backend's capacity and every computed task's timing. ``on_result`` is
    called with each result once it is written. ``opened``: the backend, already open (the
    caller closes it); otherwise it is opened here, once there is a task.
    """
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    interrupted = ""
    hosts: dict[str, dict[str, float]] = {}
    stream = iter(tasks)
    first = next(stream, _END)
    buffer = _WriteBuffer(write, summary, bar, on_result)
    used: list[Any] = []  # the backend, once open: what it saw of its workers
    try:
        if first is not _END:
            with (contextlib.nullcontext(opened) if opened is not None
                  else open_backend(connection)) as backend:
                used.append(backend)
                summary.backend = backend.description
                if packer is not None:
                    packer.capacity = backend.capacity
                    if hasattr(backend, "work_left"):  # the embedded default: is dask worth it
                        backend.work_left = packer.work_left_s
                for item in backend.results(kind.run, itertools.chain([first], stream), window):
                    if item is IDLE:
                        buffer.idle()
                        continue
                    spec, res = item
                    if isinstance(res, TaskFailed):
                        res = kind.failed(spec, res.message)
                    elif not isinstance(res, kind.result_type):
                        res = kind.failed(spec, f"task failed: returned {type(res).__name__}")
                    if packer is not None:
                        packer.observe(spec, res)
                    bar.observe(spec.chunks, kind.seconds(res))
                    _count_host(hosts, getattr(res, "host", ""), kind.seconds(res))
                    buffer.add(spec, res)
                summary.backend = backend.description  # it may tell what happened meanwhile
                buffer.flush()  # before the cluster closes (which can take seconds)
    except BaseException as exc:
        interrupted = f"{type(exc).__name__}: {exc}"
        # Keep what was computed; a write that fails again (a full disk) must not hide the
        # interruption (its cells are computed again on resume).
        with contextlib.suppress(Exception):
            buffer.flush()
        raise
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - t0
        workers = getattr(used[0], "workers", None) if used else None
        record_run({**({"command": command} if command else {}),
                          "started_utc": started, "seconds": round(summary.seconds, 3),
                          "backend": summary.backend, "cells_computed": summary.computed,
                          "cells_failed": summary.failed,
                          **({"grown": summary.grown} if getattr(summary, "grown", None) else {}),
                          **({"timings": packer.timings()} if packer is not None else {}),
                          **({"hosts": hosts} if hosts else {}),
                          **({"workers": workers} if workers else {}),
                          **({"interrupted": interrupted} if interrupted else {})})


def _count_host(hosts: dict[str, dict[str, float]], host: str, seconds: float) -> None:
    """One more task computed on ``host`` (the worker's hostname) in ``seconds`` of worker time:
    the run log's ``hosts`` (docs/clusters.md, 'Multi-node'). Tasks the backend could not
    compute carry no host and are not counted."""
    if not host:
        return
    row = hosts.setdefault(host, {"tasks": 0, "worker_s": 0.0})
    row["tasks"] += 1
    row["worker_s"] = round(row["worker_s"] + seconds, 3)


def run_suite(suite: Suite, store: str | os.PathLike[str], *, scheduler: str | None = None,
              scheduler_file: str | Path | None = None,
              profile: str | Path | None = None, workers: int | None = None,
              backend: str = "dask",
              restart: bool = False, retry_failed: bool = True, window: int | None = None,
              progress: bool = True, on_result: Callable[[TaskResult], None] | None = None,
              break_lock: bool = False, only: Slice | None = None) -> RunSummary:
    """Run (or resume) ``suite`` into the store at path ``store``.

    The suite is validated and planned before the store is touched; what the store records of
    it (identities, layout, rate cards, expected rates: :func:`~dpbench.config.records.suite_record`)
    is computed once, here. Only cells that are pending (and failed ones, unless
    ``retry_failed`` is False) are computed, and of those only the slice ``only``'s (the store is
    still prepared for the whole suite; the summary counts the selected cells). The store's
    writer lock (:mod:`dpbench.store.lock`) is held from before the store is created to the end;
    ``break_lock`` breaks a stale one.
    """
    path = Path(store)
    connection = Connection(backend, workers, scheduler, scheduler_file, profile)
    connection.check()
    connection.check_data(file_paths(v for e in suite.experiments for spec in e.problems
                                     for v in spec.params.values()))
    record = suite_record(suite, stored_expectations(path))
    if not restart and not only:
        rows = finished(path, record)
        if rows is not None:  # nothing to compute or refresh: a read-only resume
            return RunSummary(path, "none (nothing to compute)", counts=experiment_counts(rows))
    masks = suite_masks(only, suite) if only else None
    # Instantiating every cell's problem and algorithm validates parameter combinations that only
    # occur at some grid points, before the store is touched.
    planned = plan_suite(suite, masks)
    with StoreLock(path, f"dpbench run {suite.name}", break_stale=break_lock):
        return _run_locked(suite, record, path, planned, connection, restart=restart,
                           retry_failed=retry_failed, window=window, progress=progress,
                           on_result=on_result, masks=masks)


def _run_locked(suite: Suite, record: SuiteRecord, path: Path, planned: Plan,
                connection: Connection, *, restart: bool, retry_failed: bool,
                window: int | None, progress: bool,
                on_result: Callable[[TaskResult], None] | None,
                masks: dict[str, np.ndarray] | None) -> RunSummary:
    resuming = check_store_path(path) and not restart
    with contextlib.ExitStack() as stack:
        opened = None
        if not resuming and planned.n_cells > 0:
            # A new store has work: the backend starts (a LocalCluster takes about a second)
            # while the store is created.
            opened = stack.enter_context(open_backend(connection))
        return _run_prepared(suite, record, path, planned, connection, opened,
                             resuming=resuming, restart=restart, retry_failed=retry_failed,
                             window=window, progress=progress, on_result=on_result, masks=masks)


def _prepared(path: Path, record: SuiteRecord, restart: bool, plan: Plan | None
              ) -> tuple[Any, int]:
    """The store prepared for ``record``, and its count of cells marked not applicable (those
    of ``plan``; none without one)."""
    from ..store.cube import Store

    store = Store.prepare(path, record, restart=restart)
    return store, store.mark_not_applicable(plan.not_applicable) if plan is not None else 0


def _prepared_or_logged(path: Path, record: SuiteRecord, restart: bool, plan: Plan | None,
                        resuming: bool) -> tuple[Any, int]:
    """:func:`_prepared`; when preparing an existing store is interrupted (Ctrl-C or SIGTERM
    while an experiment grows: :mod:`dpbench.store.growth` has put the store back as it was),
    the interruption is recorded in the store's run log before it propagates."""
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        return _prepared(path, record, restart, plan)
    except BaseException as exc:
        if resuming and not isinstance(exc, Exception):  # Ctrl-C, SIGTERM (the CLI's Terminated)
            _log_interrupted(path, started, t0, exc)
        raise


def _log_interrupted(path: Path, started: str, t0: float, exc: BaseException) -> None:
    from ..store.cube import Store
    from ..store.writable import deferred_signals

    with deferred_signals(), contextlib.suppress(Exception):
        Store.open(path, mode="r+").record_run({
            "started_utc": started, "seconds": round(time.perf_counter() - t0, 3),
            "backend": "none (interrupted while preparing the store)", "cells_computed": 0,
            "cells_failed": 0, "interrupted": f"{type(exc).__name__}: {exc}"})


def _run_prepared(suite: Suite, record: SuiteRecord, path: Path, planned: Plan,
                  connection: Connection, opened: Any, *, resuming: bool, restart: bool,
                  retry_failed: bool, window: int | None, progress: bool,
                  on_result: Callable[[TaskResult], None] | None,
                  masks: dict[str, np.ndarray] | None) -> RunSummary:
    plan = planned
    creating: Future[tuple[Any, int]] | None = None
    if opened is None:
        store, not_applicable = _prepared_or_logged(path, record, restart,
                                                    None if resuming else plan, resuming)
        if resuming:
            plan = plan_suite(suite, {e.name: store.pending_mask(e.name, retry_failed)
                                      & (True if masks is None else masks[e.name])
                                      for e in suite.experiments})
            not_applicable = store.mark_not_applicable(plan.not_applicable)
        grown = store.grown
    else:
        # A new store (it grows nothing) is created in a thread while the first tasks compute
        # (the backend is up: forked workers start at once, and zarr alone takes 0.15 s to
        # import); writes wait for it, and a failed creation is raised at the first write.
        creating = Future()
        threading.Thread(target=_resolve, args=(creating, _prepared, path, record, restart, plan),
                         name="dpbench-store-create", daemon=True).start()
        grown = {}
    summary = RunSummary(path, "none (nothing to compute)", grown=grown)
    bar = Progress(plan.n_cells, plan.total_cost, enabled=progress,
                   class_units=plan.class_units(), class_chunks=plan.class_units(count=True))

    def the_store() -> Any:
        return creating.result()[0] if creating is not None else store

    def write(results: list[TaskResult]) -> tuple[int, int]:
        chunks = [c for res in results for c in res.chunks]
        the_store().write_many(chunks)
        done = sum(int(np.sum(c.status == DONE)) for c in chunks)
        failed = sum(int(np.sum(c.status == FAILED)) for c in chunks)
        return done, failed

    def record_run(info: dict[str, Any]) -> None:
        if creating is None or creating.exception() is None:  # a store never created has no log
            the_store().record_run(info)

    packer = Packer(plan)
    try:
        drive_tasks(packer.tasks(), record_run, summary, bar,
                    kind=suite_tasks(suite.cell_memory_mb), write=write, connection=connection,
                    window=window, on_result=on_result, packer=packer, opened=opened)
    finally:
        if creating is not None:
            wait([creating])  # never leave a store half-created behind the writer lock
    if creating is not None:
        store, not_applicable = creating.result()
    summary.not_applicable = not_applicable
    # The counts the run log's summary has just recorded, rather than reading the arrays again.
    rows = store.summary_rows() if masks is None else None
    recorded = experiment_counts(rows) if rows is not None else {}
    summary.counts = {e.name: recorded.get(e.name) or (
        store.counts(e.name) if masks is None
        else Counts.of(store.status(e.name)[masks[e.name]]))
        for e in suite.experiments if masks is None or masks[e.name].any()}
    return summary


def _resolve(future: Future[Any], make: Callable[..., Any], *args: Any) -> None:
    """Set ``future`` to ``make(*args)``, or to what it raised (a thread's body)."""
    try:
        future.set_result(make(*args))
    except BaseException as exc:  # noqa: BLE001 - raised where the result is needed
        future.set_exception(exc)
