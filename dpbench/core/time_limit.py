"""Cooperative per-cell time limits: the check long-running mechanisms call in their loops.

Dask has no per-task timeout and a Python thread cannot be killed, so long-running mechanisms,
samplers and solvers call :func:`checkpoint` inside their loops (every few thousand iterations is
enough); it raises :class:`~dpbench.core.errors.CellTimeout` once the cell's limit has passed. The
engine also checks the limit when a cell returns, so a mechanism that never calls ``checkpoint``
is still recorded as failed if it overran. Hard limits (a killed child process, an address-space
cap) live in :mod:`dpbench.engine.isolation`.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

from .errors import CellTimeout

_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "dpbench_deadline", default=None
)


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Run the body under a cooperative limit of ``seconds`` (``None``: no limit)."""
    if seconds is None:
        yield
        return
    token = _deadline.set((time.perf_counter() + seconds, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def checkpoint() -> None:
    """Raise :class:`CellTimeout` if the current cell has exceeded its time limit."""
    state = _deadline.get()
    if state is not None and time.perf_counter() > state[0]:
        raise CellTimeout(f"cell exceeded its time limit of {state[1]:g} s")
