"""Forked local workers: compute processes forked from this one (POSIX ``fork``).

A forked worker starts in milliseconds with everything this process has imported (the suite's
plugins, numpy, numba), where a spawned one starts an interpreter and imports them again (about
0.6 s of CPU per worker; docs/architecture.md, "Start-up and throughput"). The embedded default
computes in them until its LocalCluster is worth starting (:mod:`.dask`), and ``--backend
forked`` computes a whole run in them.

Each worker computes one task at a time with the next one queued (:data:`DEPTH`), through the
request loop of :mod:`dpbench.engine.isolation` (the same child process, pipe and
fork-between-imports guard as the per-cell limits). A task whose worker dies is retried once in
a fresh worker, then recorded as failed, like the other backends. Results do not depend on which
worker computes a task.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from multiprocessing.connection import wait
from typing import Any, TypeVar

from ..isolation import _HEARTBEAT, _Child, how_it_ended
from .base import END, IDLE, IDLE_EVERY_S, Task, TaskFailed, next_task

T = TypeVar("T", bound=Task)

#: Tasks queued on a worker at once: the next one waits in its pipe while it computes, so it
#: never idles while this process is busy (writing the store, creating it).
DEPTH = 2


def _task_compute(payload: tuple[Callable[[Any], Any], Any]) -> Callable[[int, Any], Any]:
    """In a worker: ``compute(i, heartbeat)`` for the isolation request loop (one item: the
    task). ``run`` records failing cells itself; anything it raises fails the task."""
    run, task = payload

    def compute(i: int, heartbeat: Any) -> Any:
        try:
            return run(task)
        except Exception as exc:  # noqa: BLE001 - recorded as the task's failure
            return TaskFailed(f"task failed: {type(exc).__name__}: {exc}")

    return compute


class ForkedWorkers:
    """``workers`` compute processes forked now, from the calling thread."""

    def __init__(self, workers: int, depth: int = DEPTH) -> None:
        self.workers, self.depth = max(int(workers), 1), max(int(depth), 1)
        self.description = (f"{self.workers} forked worker process"
                            f"{'es' if self.workers != 1 else ''}")
        #: Each worker's tasks in flight, in the order it computes them.
        self._tasks: dict[_Child, deque[Any]] = {
            _Child.fork(detach_signals=True): deque() for _ in range(self.workers)}

    def capacity(self) -> int:
        return self.workers

    def __enter__(self) -> ForkedWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (a busy one is killed: its tasks are lost, as on an interrupt)."""
        for child in self._tasks:
            child.kill()
        self._tasks.clear()

    def _in_flight(self) -> int:
        return sum(len(q) for q in self._tasks.values())

    def _submit(self, run: Callable[[T], Any], task: T) -> _Child | None:
        """Queue ``task`` on the least busy worker; the worker if it turned out dead (its pipe
        closed: ``task`` is not queued), else ``None``."""
        while len(self._tasks) < self.workers:  # replace the workers that died
            self._tasks[_Child.fork(detach_signals=True)] = deque()
        child = min(self._tasks, key=lambda c: len(self._tasks[c]))
        try:
            child.conn.send((_task_compute, (run, task), 0, 1, None))
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            return child
        self._tasks[child].append(task)
        return None

    def results(self, run: Callable[[T], Any], tasks: Iterable[T | None],
                window: int | None = None, stop: Callable[[], bool] | None = None,
                ) -> Generator[tuple[T, Any] | Any, None, bool]:
        """As :meth:`Backend.results`; each worker holds at most ``depth`` tasks (the next one is
        queued while it computes; ``window`` is not used). Once ``stop()`` is true no further
        task is taken from ``tasks``; the tasks in flight are finished and the iterator ends,
        leaving the rest of ``tasks`` to the caller. Returns whether ``tasks`` ran out."""
        queue = iter(tasks)
        attempts: dict[str, int] = {}
        retry: list[T] = []
        exhausted = False
        while True:
            while self._in_flight() < self.workers * self.depth:
                if retry:  # taken already: finished even after stop()
                    task = retry.pop()
                elif exhausted or (stop is not None and stop()):
                    break
                else:
                    task = next_task(queue, idle=not self._in_flight())
                    if task is END:
                        exhausted = True
                        break
                    if task is None:
                        break
                dead = self._submit(run, task)
                if dead is not None:
                    retry.append(task)
                    yield from self._died(dead, retry, attempts)
            busy = {c.conn: c for c, q in self._tasks.items() if q}
            if not busy:
                return exhausted
            ready = wait(list(busy), timeout=0)
            while not ready:
                yield IDLE
                ready = wait(list(busy), timeout=IDLE_EVERY_S)
            for conn in ready:
                child = busy[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    yield from self._died(child, retry, attempts)
                    continue
                if msg == _HEARTBEAT:
                    continue
                yield self._tasks[child].popleft(), msg

    def _died(self, child: _Child, retry: list[Any], attempts: dict[str, int]
              ) -> Iterator[tuple[Any, TaskFailed]]:
        """A worker died: the task it was computing is retried once (then failed), the tasks
        queued behind it, which never started, are retried."""
        lost = self._tasks.pop(child)
        status = child.reap()
        if not lost:
            return
        task = lost.popleft()
        retry.extend(reversed(lost))
        attempts[task.key] = attempts.get(task.key, 0) + 1
        if attempts[task.key] > 1:
            yield task, TaskFailed(f"worker process died twice (last: {how_it_ended(status)})")
        else:
            retry.append(task)


def open_backend(conn: Any) -> ForkedWorkers:
    return ForkedWorkers(conn.workers or os.cpu_count() or 1)  # Connection.check: fork exists


