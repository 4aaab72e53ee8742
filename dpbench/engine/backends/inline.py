"""The inline backend: every task in this process, in plan order (no dask, no pool)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .base import IDLE, IDLE_EVERY_S

T = TypeVar("T")


class InlineBackend:
    description = "inline (no dask)"

    def capacity(self) -> int:
        return 1

    def results(self, run: Callable[[T], Any], tasks: Iterable[T | None],
                window: int | None = None) -> Iterator[tuple[T, Any] | Any]:
        last = time.monotonic()
        for task in tasks:
            if task is not None:  # None: "wait for a running task"; nothing runs here
                yield task, run(task)
                if time.monotonic() - last >= IDLE_EVERY_S:
                    yield IDLE  # computing the next task is this process's "wait"
                    last = time.monotonic()


def open_backend(conn: Any) -> contextlib.AbstractContextManager[InlineBackend]:
    return contextlib.nullcontext(InlineBackend())
