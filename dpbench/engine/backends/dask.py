"""The dask backend: a ``LocalCluster`` (default), a cluster profile, a running scheduler or a
scheduler file (docs/clusters.md).

Tasks are submitted most-expensive-first with a bounded in-flight window (4 per worker thread,
at least :data:`MIN_WINDOW`, re-sized as workers join and leave) and consumed as they complete
(``as_completed``); a :class:`~.worker_watch.WorkerWatch` ends a run the cluster gives no
worker. Dask re-runs the tasks of lost workers (``retries=1``); a task that
fails beyond that is yielded as :class:`~dpbench.engine.backends.base.TaskFailed`. A cancelled
future means the scheduler connection is gone: :class:`~dpbench.core.errors.SchedulerLost`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ...config.cluster import DEFAULT_WORKER_TIMEOUT_S
from ...core.errors import NoWorkers, SchedulerLost
from ..isolation import prepare_child, reset_child
from .base import END, IDLE, IDLE_EVERY_S, TaskFailed, fork_available, next_task
from .cluster_class import cluster_class, load_profile
from .forked import ForkedWorkers
from .inline import InlineBackend
from .worker_log import WorkerLog
from .worker_watch import WorkerWatch

T = TypeVar("T")

#: Tasks in flight at least (4 per worker thread otherwise): enough to keep workers that join an
#: adaptive cluster busy before the next capacity check.
MIN_WINDOW = 64
#: How often a wait for the next completed task looks at its queue (seconds), where
#: ``as_completed`` has no condition to wait on.
_POLL_S = 0.005
#: After this long without a result (s), the backend asks the scheduler for the state of every
#: task it still waits for, and settles the ones the scheduler has finished: a result or error
#: whose report to this client was lost (seen once after workers were killed mid-run) would
#: otherwise leave the run waiting forever on idle workers.
STALL_CHECK_S = 30.0


def _local_cluster(workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=40)


#: The embedded default starts its LocalCluster only when the work left is worth it: at least
#: this many seconds per worker, estimated from the tasks measured so far (without an estimate:
#: once its forked workers have computed this long). Until then, and while it starts, forked
#: workers compute (docs/architecture.md, "Start-up and throughput").
CLUSTER_WORTH_S = 30.0


class _LocalStart:
    """The embedded default: forked workers (:mod:`.forked`) that compute at once, and the
    LocalCluster with its client, started in a thread when :meth:`begin` is called. A
    LocalCluster's start (the scheduler here, one spawned worker process per core importing
    distributed and the suite's plugins: about 1 s, and 0.6 s of CPU per worker) would
    otherwise delay every run, and costs more than a short sweep. Without ``fork`` (macOS,
    Windows) the cluster starts at once and the run computes in this process meanwhile."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.cluster: Any = None
        self.client: Any = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.pool: ForkedWorkers | None = None
        if fork_available():
            self.pool = ForkedWorkers(workers)  # before any thread of this run imports
        else:
            prepare_child()  # the fork for cells computed here, before the thread imports
            self.begin()

    @property
    def begun(self) -> bool:
        return self._thread is not None

    def begin(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._start, name="dpbench-cluster-start",
                                            daemon=True)
            self._thread.start()

    def _start(self) -> None:
        try:
            from distributed import Client

            self.cluster = _local_cluster(self.workers)
            self.client = Client(self.cluster)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the run's thread
            self.error = exc
        finally:
            self.ready.set()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self._thread is not None:
            self._thread.join()
        for part in (self.client, self.cluster):
            if part is not None:
                part.close()


class DaskBackend:
    def __init__(self, client: Any, description: str, cluster: Any = None,
                 worker_timeout_s: float = DEFAULT_WORKER_TIMEOUT_S,
                 starting: _LocalStart | None = None) -> None:
        self.client, self.description = client, description
        self.cluster, self.worker_timeout_s = cluster, worker_timeout_s
        self._threads, self._threads_at = 0, -1e9
        self._starting = starting
        #: Workers lost, retired and joined while the run was in flight (the run log's
        #: ``workers``: :meth:`.worker_log.WorkerLog.summary`).
        self.workers: dict[str, Any] = {}
        #: Worker seconds of work not yet submitted (set by the runner from its packer): whether
        #: the embedded default's LocalCluster is worth starting.
        self.work_left: Callable[[], float] | None = None

    def capacity(self) -> int:
        """Worker threads connected now (asked of the scheduler at most once a second); before
        the embedded default's cluster is up, its forked workers (or 1: this process)."""
        if self.client is None:
            pool = self._starting.pool if self._starting is not None else None
            return pool.workers if pool is not None else 1
        now = time.monotonic()
        if now - self._threads_at >= 1.0:
            try:
                self._threads = sum(self.client.nthreads().values())
            except Exception:  # noqa: BLE001 (a lost scheduler is the result loop's business)
                pass
            self._threads_at = now
        return self._threads

    @classmethod
    @contextlib.contextmanager
    def connect(cls, scheduler: str | None = None, profile: str | Path | None = None,
                workers: int | None = None, scheduler_file: str | Path | None = None,
                ) -> Iterator[DaskBackend]:
        """Open a client. Precedence: ``scheduler``, ``scheduler_file``, ``profile``, a
        LocalCluster of ``workers`` processes (one thread each)."""
        if scheduler is None and scheduler_file is None and profile is None:
            # The embedded default: distributed is imported in the starting thread, if ever.
            n = workers if workers is not None else (os.cpu_count() or 1)
            starting = _LocalStart(n)
            try:
                yield cls(None, _cluster_description(n) if starting.pool is None
                          else f"{starting.pool.description} (embedded default)",
                          starting=starting)
            finally:
                starting.close()
            return
        import dask
        from distributed import Client

        if scheduler is not None:
            with Client(scheduler, timeout="30s") as client:
                yield cls(client, f"scheduler {scheduler}")
            return
        if scheduler_file is not None:
            # DASK_SCHEDULER_ADDRESS is dask config "scheduler-address", which Client would prefer.
            with dask.config.set({"scheduler-address": None}), \
                    Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
                yield cls(client, f"scheduler {client.scheduler.address} (from {scheduler_file})")
            return
        if profile is not None:
            prof = load_profile(profile)
            with dask.config.set(prof.dask_config):
                manager = cluster_class(prof, profile)
                with manager(**prof.kwargs) as cluster:
                    if prof.scale:
                        cluster.scale(**prof.scale)
                    if prof.adapt:
                        cluster.adapt(**prof.adapt)
                    with Client(cluster) as client:
                        yield cls(client, f"{prof.module}.{prof.cls} from {profile}", cluster,
                                  prof.worker_timeout_s)

    def results(self, run: Callable[[T], Any], tasks: Iterable[T | None],
                window: int | None = None) -> Iterator[tuple[T, Any] | Any]:
        queue = iter(tasks)
        if self.client is None and self._starting is not None:
            if (yield from self._while_starting(run, queue)):
                return
        from distributed import as_completed

        client = self.client
        fixed = window

        def room() -> bool:  # the window follows the cluster as workers join and leave
            return len(futures) < (fixed or max(4 * self.capacity(), MIN_WINDOW))

        rank = 0
        specs: dict[str, T] = {}
        futures: dict[str, Any] = {}
        ac = as_completed(with_results=True, raise_errors=False)

        def give_up() -> None:  # from the watch thread: wake the loop below
            client.cancel(list(futures.values()))

        def launch() -> bool:
            nonlocal rank
            spec = next_task(queue, idle=not futures)
            if spec is None or spec is END:
                return False
            rank += 1
            fut = client.submit(run, spec, key=spec.key, pure=False,  # type: ignore[attr-defined]
                                retries=1, priority=-rank)
            specs[fut.key] = spec
            futures[fut.key] = fut
            ac.add(fut)
            return True

        def fill() -> None:
            while room() and launch():
                pass

        fill()
        log = WorkerLog(client)
        with contextlib.suppress(Exception):  # else the watch's first poll sets the start
            log.observe(set(client.nthreads()))
        with WorkerWatch(client, self.cluster, self.worker_timeout_s, give_up, log=log) as watch:
            try:
                yield from self._consume(ac, specs, futures, fill, watch)
            finally:
                self.workers = log.summary()
        self.description += log.describe()

    def _while_starting(self, run: Callable[[T], Any], queue: Iterator[T | None]
                        ) -> Generator[tuple[T, Any] | Any, None, bool]:
        """The embedded default before its LocalCluster is up: compute in the forked workers (in
        this process without ``fork``), start the cluster once the work left is worth it, and
        adopt it when it is up. Returns whether every task was computed before."""
        starting = self._starting
        assert starting is not None
        t0 = time.monotonic()

        def worth() -> bool:
            if self.work_left is not None:
                return self.work_left() >= CLUSTER_WORTH_S * max(starting.workers, 1)
            return time.monotonic() - t0 >= CLUSTER_WORTH_S

        def up() -> bool:  # asked before each submission
            if not starting.begun and worth():
                starting.begin()
            return starting.ready.is_set()

        taken = [0]

        def counted(items: Iterator[T | None]) -> Iterator[T | None]:
            for item in items:
                taken[0] += item is not None
                yield item

        pool = starting.pool
        if pool is not None:
            exhausted = yield from pool.results(run, counted(queue), stop=up)
            where = f"by {pool.description}"
        else:
            exhausted = yield from self._inline_until(run, counted(queue), up)
            where = "in this process"
        here = pool.description if pool is not None else "this process"
        if exhausted:
            self.description = (f"{here} (embedded default; " + (
                "the run ended while its LocalCluster started)" if starting.begun else
                f"its LocalCluster was not started: under {CLUSTER_WORTH_S:g} s of work per "
                "worker)"))
            return True
        self.description = _cluster_description(starting.workers) + (
            f"; {taken[0]} task{'s' if taken[0] != 1 else ''} computed {where} before it was up"
            if taken[0] else "")
        if pool is not None:
            pool.close()
        if starting.error is not None:
            raise starting.error
        self.client, self.cluster = starting.client, starting.cluster
        return False

    @staticmethod
    def _inline_until(run: Callable[[T], Any], queue: Iterator[T | None],
                      up: Callable[[], bool]) -> Generator[tuple[T, Any] | Any, None, bool]:
        """Compute tasks in this process until ``up()``; returns whether ``queue`` ran out."""
        exhausted = False

        def until_up() -> Iterator[T]:
            nonlocal exhausted
            while not up():
                spec = next_task(queue, idle=True)
                if spec is END:
                    exhausted = True
                    return
                yield spec

        try:
            yield from InlineBackend().results(run, until_up())
        finally:
            reset_child()  # this process's compute child, if the tasks forked one
        return exhausted

    def _consume(self, ac: Any, specs: dict[str, T], futures: dict[str, Any],
                 fill: Callable[[], None], watch: WorkerWatch) -> Iterator[tuple[T, Any] | Any]:
        client = self.client
        progress = checked = time.monotonic()
        for batch in _batches(ac, lambda: bool(futures)):
            if batch is IDLE:
                yield IDLE
                now = time.monotonic()
                if min(now - progress, now - checked) >= STALL_CHECK_S:
                    checked = now
                    for key, res in _settle_stalled(client, list(futures)):
                        progress = now
                        spec = specs.pop(key)
                        futures.pop(key).release()
                        yield spec, res
                    fill()
                continue
            progress = time.monotonic()
            for fut, res in batch:
                if fut.key not in specs:  # settled from the scheduler's state already
                    continue
                spec = specs.pop(fut.key)
                futures.pop(fut.key, None)
                if fut.status == "cancelled":
                    if watch.reason is not None:
                        raise NoWorkers(watch.reason)
                    # nobody else cancels: the connection is gone
                    where = getattr(client.scheduler, "address", "") or "of the run"
                    raise SchedulerLost(f"lost the scheduler {where} mid-run; the cells computed "
                                        "so far are saved: run the same command again to resume")
                if fut.status == "error":
                    exc = fut.exception()
                    yield spec, TaskFailed(f"task failed: {type(exc).__name__}: {exc}")
                else:
                    yield spec, res
                fut.release()
                fill()


def _cluster_description(workers: int) -> str:
    return f"LocalCluster ({workers} worker process{'es' if workers != 1 else ''} x 1 thread)"


def _batches(ac: Any, waiting: Callable[[], bool]) -> Iterator[list[Any] | Any]:
    """The completed futures of ``ac`` batch by batch (all that are ready at once), and
    :data:`~.base.IDLE` before each wait and every :data:`~.base.IDLE_EVERY_S` while waiting
    (``as_completed`` cannot wait with a timeout: its queue is polled). Ends when nothing is
    ``waiting`` for (a future settled from the scheduler's state may stay in ``ac``)."""
    while True:
        if ac.has_ready():
            yield ac.next_batch(block=False)
            continue
        if not waiting():
            return
        yield IDLE
        deadline = time.monotonic() + IDLE_EVERY_S
        # as_completed has no wait with a timeout: wait on the condition it notifies at every
        # completion (checked under its lock, so none is missed); poll where it has none.
        condition = getattr(ac, "thread_condition", None)
        while not ac.has_ready() and waiting() and time.monotonic() < deadline:
            if condition is None:
                time.sleep(_POLL_S)
                continue
            with condition:
                if not ac.has_ready():
                    condition.wait(timeout=max(deadline - time.monotonic(), 0.0))


def _task_states(keys: list[str], dask_scheduler: Any = None) -> dict[str, tuple[str, Any]]:
    """On the scheduler: each key's state, with its error text (erred) or a worker holding it
    (memory)."""
    out: dict[str, tuple[str, Any]] = {}
    for key in keys:
        ts = dask_scheduler.tasks.get(key)
        if ts is None:
            continue
        if ts.state == "erred":
            culprit = ts.exception_blame
            text = getattr(culprit, "exception_text", "") if culprit is not None else ""
            out[key] = ("erred", text or "error (its report to the client was lost)")
        elif ts.state == "memory" and ts.who_has:
            out[key] = ("memory", next(iter(ts.who_has)).address)
    return out


def _held_value(key: str, dask_worker: Any = None) -> Any:
    return dask_worker.data[key]


def _settle_stalled(client: Any, keys: list[str]) -> list[tuple[str, Any]]:
    """The tasks among ``keys`` that the scheduler has finished although this client was never
    told: ``(key, result)`` or ``(key, TaskFailed)``. Best effort: a scheduler that cannot be
    asked settles nothing (the worker watch still ends a run with no workers)."""
    try:
        states = client.run_on_scheduler(_task_states, keys)
    except Exception:
        return []
    settled: list[tuple[str, Any]] = []
    for key, (state, info) in states.items():
        if state == "erred":
            settled.append((key, TaskFailed(f"task failed: {info}")))
            continue
        try:
            settled.append((key, client.run(_held_value, key, workers=[info])[info]))
        except Exception:
            continue
    return settled


def open_backend(conn: Any) -> contextlib.AbstractContextManager[DaskBackend]:
    scheduler = conn.scheduler
    if scheduler is None and conn.scheduler_file is None:
        scheduler = os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    return DaskBackend.connect(scheduler, conn.profile, conn.workers, conn.scheduler_file)
