"""The backend protocol: run a task function over tasks and yield results as they complete."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ...core.errors import UserInputError

#: The backends ``dpbench run --backend`` accepts: name -> module of this package. Each module has
#: ``open_backend(conn) -> ContextManager[Backend]``; adding a backend is one module and one entry.
BACKEND_MODULES = {"dask": "dask", "forked": "forked", "processes": "processes",
                   "inline": "inline"}
BACKENDS = tuple(BACKEND_MODULES)

T = TypeVar("T")


class Task(Protocol):
    """What a backend needs of a task: a unique ``key`` (cells are addressed by it)."""

    key: str


@dataclass(frozen=True)
class TaskFailed:
    """The outcome of a task the backend could not compute (e.g. its worker died twice)."""

    message: str


class Backend(Protocol):
    """Computes ``run(task)`` for every task, in any order, on some workers.

    ``results`` yields ``(task, run(task))`` as tasks complete, or ``(task, TaskFailed(...))``
    for a task that could not be computed after the backend's retries; it raises
    :class:`~dpbench.core.errors.SchedulerLost` when the backend itself is gone. ``run`` is a
    picklable module-level callable (or a ``functools.partial`` of one) that never raises for a
    failing cell: cell failures are part of its result. At most ``window`` tasks are in flight
    (``None``: the backend's default), submitted in the given order (most expensive first);
    ``tasks`` may be an iterator, pulled from only as the window frees up, and may yield
    ``None``: nothing to submit until a task in flight completes (:func:`next_task`).
    Between pairs, ``results`` yields :data:`IDLE` whenever it is about to wait.
    """

    description: str

    def capacity(self) -> int:
        """How many tasks can run at once right now (worker threads; changes as an adaptive
        cluster grows or shrinks)."""
        ...

    def results(self, run: Callable[[T], Any], tasks: Iterable[T | None],
                window: int | None = None) -> Iterator[tuple[T, Any] | Any]: ...


#: What :func:`next_task` returns when the tasks are exhausted.
END: Any = object()

#: What a backend yields, in place of a ``(task, result)`` pair, when it has handed over every
#: result that is ready: before it waits, and then every :data:`IDLE_EVERY_S` while it waits. The
#: client then decides whether to write what it has received (runner.drive_tasks: one write for
#: several tasks), so a received result is never kept unwritten for long while the client waits.
IDLE: Any = object()

#: While a backend waits for a task in flight, it yields :data:`IDLE` at least this often (s);
#: the inline backend, which never waits, yields it after a task once this much time has passed.
IDLE_EVERY_S = 0.1


def next_task(tasks: Iterator[Any], idle: bool) -> Any:
    """The next task to submit from ``tasks``; ``None`` to wait until a task in flight completes
    (skipped when ``idle``: with nothing in flight there is nothing to wait for); :data:`END`
    when there are no more."""
    while True:
        item = next(tasks, END)
        if item is None and idle:
            continue
        return item


def fork_available() -> bool:
    """Whether forked workers are safe here: Linux (macOS system libraries are not fork-safe
    after threads start, and Windows has no ``fork``)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


@dataclass(frozen=True)
class Connection:
    """Where a run computes: the command line's ``--backend``, ``--workers``, ``--scheduler``,
    ``--scheduler-file`` and ``--cluster`` (docs/clusters.md for the precedence)."""

    backend: str = "dask"
    workers: int | None = None
    scheduler: str | None = None
    scheduler_file: str | Path | None = None
    profile: str | Path | None = None

    def check(self) -> None:
        """A clear :class:`UserInputError` for a bad combination, before anything is written."""
        if self.backend not in BACKENDS:
            raise UserInputError(f"--backend must be one of {', '.join(BACKENDS)}, "
                                 f"got {self.backend!r}")
        if self.workers is not None and self.workers < 0:
            raise UserInputError(f"--workers must be >= 0, got {self.workers}")
        if self.backend == "forked" and not fork_available():
            raise UserInputError(f"--backend forked needs Linux's fork (this is {sys.platform}); "
                                 "use --backend processes")
        if self.backend != "dask":
            given = [flag for flag, v in (("--scheduler", self.scheduler),
                                          ("--scheduler-file", self.scheduler_file),
                                          ("--cluster", self.profile)) if v is not None]
            if given:
                raise UserInputError(f"{', '.join(given)} needs --backend dask "
                                     f"(got --backend {self.backend})")
            return
        from .cluster_class import cluster_class, load_profile
        from .job_checks import check_job_accepted, check_submit_command
        from .network import check_profile_network
        from .probes import check_cluster_source

        if self.profile is not None:
            prof = load_profile(self.profile)
            cluster_class(prof, self.profile)
            check_profile_network(prof, self.profile)
            check_submit_command(prof, self.profile)
            check_job_accepted(prof, self.profile)
        check_cluster_source(self.scheduler, self.scheduler_file)

    def check_data(self, paths: list[str]) -> None:
        """Every worker of a running scheduler can read the data files ``paths``
        (:func:`.probes.check_data_on_workers`); nothing for the other backends."""
        if self.backend != "dask":
            return
        from .probes import check_data_on_workers

        check_data_on_workers(self.scheduler, self.scheduler_file, paths)
