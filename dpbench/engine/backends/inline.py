"""The inline backend: every task in this process, in plan order (no dask, no pool)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class InlineBackend:
    description = "inline (no dask)"

    def results(self, run: Callable[[T], Any], tasks: Sequence[T],
                window: int | None = None) -> Iterator[tuple[T, Any]]:
        for task in tasks:
            yield task, run(task)


def open_backend(conn: Any) -> contextlib.AbstractContextManager[InlineBackend]:
    return contextlib.nullcontext(InlineBackend())
