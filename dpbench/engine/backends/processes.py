"""The processes backend: a pool of local worker processes from the standard library, no dask.

Each worker process computes whole tasks; a task whose worker dies (the pool breaks) is retried
once in a fresh pool, then recorded as failed. Results come back as they complete, with at most
``window`` tasks in flight.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from .base import END, IDLE, IDLE_EVERY_S, Task, TaskFailed, next_task

T = TypeVar("T", bound=Task)


class ProcessesBackend:
    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1
        n = self.workers
        self.description = f"processes ({n} worker process{'es' if n != 1 else ''})"
        self._pool: ProcessPoolExecutor | None = None

    def capacity(self) -> int:
        return self.workers

    def __enter__(self) -> ProcessesBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _fresh_pool(self) -> ProcessPoolExecutor:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        # spawn: a clean interpreter per worker (no inherited threads or locks from this one).
        self._pool = ProcessPoolExecutor(self.workers,
                                         mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def results(self, run: Callable[[T], Any], tasks: Iterable[T | None],
                window: int | None = None) -> Iterator[tuple[T, Any] | Any]:
        window = window or 4 * self.workers
        fresh = iter(tasks)
        retry: list[T] = []  # tasks of a broken pool, re-submitted before fresh ones
        attempts: dict[str, int] = {}
        pool = self._pool or self._fresh_pool()
        running: dict[Future[Any], T] = {}
        while True:
            while len(running) < window:
                task = retry.pop() if retry else next_task(fresh, idle=not running)
                if task is None or task is END:
                    break
                running[pool.submit(run, task)] = task
            if not running:
                return
            done, _ = wait(running, timeout=0, return_when=FIRST_COMPLETED)
            while not done:
                yield IDLE
                done, _ = wait(running, timeout=IDLE_EVERY_S, return_when=FIRST_COMPLETED)
            broken = False
            for fut in done:
                task = running.pop(fut)
                exc = fut.exception()
                if exc is None:
                    yield task, fut.result()
                elif isinstance(exc, BrokenProcessPool):
                    broken = True
                    attempts[task.key] = attempts.get(task.key, 0) + 1
                    if attempts[task.key] > 1:
                        yield task, TaskFailed(f"worker process died twice: {exc}")
                    else:
                        retry.append(task)
                else:
                    yield task, TaskFailed(f"{type(exc).__name__}: {exc}")
            if broken:  # every future of a broken pool fails: resubmit the others in a new pool
                for fut, task in running.items():
                    retry.append(task)
                running.clear()
                pool = self._fresh_pool()


def open_backend(conn: Any) -> ProcessesBackend:
    return ProcessesBackend(conn.workers)
