"""Sleep-bound mechanisms for ``benchmarks/bench_scaleout.py``.

A cell of these mechanisms sleeps a fixed time (``seconds``, default 0.1 s) and releases the
centre of C: a valid, data-independent release (privacy ``none``, like the non-private reference).
Sleeping instead of computing lets a 2-core machine show what 16–32 workers of a real cluster
would see: the workers wait, the two cores stay free for the scheduler and the client.

This module must be importable by every worker process (the engine ships ``algorithm_cls`` inside
each :class:`~dpbench.engine.plan.ChunkSpec`, pickled *by reference*): the benchmark puts
``benchmarks/`` on ``PYTHONPATH`` before it starts a cluster or submits SLURM jobs.

* :class:`SleepCell` (``bench_sleep``) declares an honest :meth:`~SleepCell.cost`: its sleep time
  in the engine's work units (per-example gradient evaluations, at the rate the engine's own
  constants imply, :data:`UNITS_PER_SECOND`).
* :class:`SleepCellNoCost` (``bench_sleep_nocost``) is the same cell without ``cost()``: the
  engine then assumes the base-class estimate ``n·p`` (a few units for a small problem), i.e. what
  a third-party plugin that declares nothing gets.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from dpbench import Algorithm, Param, PrivacyLedger, Release
from dpbench.core import registry
from dpbench.engine import plan as _plan

#: Work units (per-example gradient evaluations) per second of one worker thread: the engine's
#: own scale (``plan.UNITS_PER_SECOND`` = TARGET_TASK_COST / TARGET_TASK_SECONDS, 2·10⁶ units in
#: 0.3 s), or, in an engine without it, the one ``CELL_OVERHEAD_COST`` implies (2,000 units for
#: ~0.3 ms of per-cell overhead); both about 6.7·10⁶ units/s.
UNITS_PER_SECOND = float(getattr(_plan, "UNITS_PER_SECOND",
                                 getattr(_plan, "CELL_OVERHEAD_COST", 2.0e3) / 0.3e-3))
SLEEP_S = 0.1


class SleepCell(Algorithm):
    """Sleeps ``seconds`` and releases the centre of C (a scale-out benchmark cell)."""

    name: ClassVar[str] = "bench_sleep"
    summary: ClassVar[str] = "sleeps a fixed time, releases the centre of C (benchmark only)"
    citation: ClassVar[str] = "benchmarks/bench_scaleout.py"
    privacy: ClassVar[str] = "none"
    requires: ClassVar[tuple[str, ...]] = ("convex",)
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "seconds": Param(SLEEP_S, kind="float", low=0.0, doc="how long each cell sleeps"),
    }

    seconds: float

    def cost(self, n: int, p: int) -> float:
        """Honest: the sleep time in work units (independent of n and p)."""
        return float(self.seconds) * UNITS_PER_SECOND

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        time.sleep(float(self.seconds))
        return Release(np.asarray(problem.constraint.center(data.p), dtype=float),
                       PrivacyLedger.non_private())


class SleepCellNoCost(SleepCell):
    """:class:`SleepCell` without ``cost()``: the engine's default estimate (``n·p``) applies."""

    name: ClassVar[str] = "bench_sleep_nocost"
    summary: ClassVar[str] = "sleeps a fixed time, declares no cost() (benchmark only)"

    cost = Algorithm.cost  # type: ignore[assignment]  # what a plugin that declares none gets


def suite_text(algorithm: str, cells: int, seconds: float, name: str = "sleep") -> str:
    """A one-seed suite of ``cells`` cells of ``algorithm`` on LB-Quad (n = 8, p = 2), one per ε
    value, each taking ``seconds``."""
    eps = ", ".join(str(round(0.01 * (i + 1), 4)) for i in range(cells))
    return f"""
name: {name}
seeds: 1
experiments:
  - name: e
    problems: [{{problem: lb_quad}}]
    algorithms: [{{algorithm: {algorithm}, params: {{seconds: {seconds}}}}}]
    grid: {{n: [8], p: [2], epsilon: [{eps}]}}
"""


def warm() -> int:
    """Import what a cell needs (run on every worker before timing: worker start-up)."""
    import os

    import dpbench.engine.cells
    import dpbench.problems.lb_quad  # noqa: F401

    return os.getpid()


def register() -> None:
    """Make both mechanisms known by name in this process (workers need only the import)."""
    for cls in (SleepCell, SleepCellNoCost, SpinCell):
        registry.register("algorithms", cls)


def spin(seconds: float) -> None:
    """Keep this thread's CPU busy for ``seconds`` of wall time (a CPU-bound cell)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class SpinCell(SleepCell):
    """:class:`SleepCell` that computes instead of sleeping: busy for ``seconds`` of CPU (the
    cold-start benchmark compares it with a process pool running :func:`spin`)."""

    name: ClassVar[str] = "bench_spin"
    summary: ClassVar[str] = ("keeps a core busy a fixed time, releases the centre of C "
                              "(benchmark only)")

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        spin(float(self.seconds))
        return Release(np.asarray(problem.constraint.center(data.p), dtype=float),
                       PrivacyLedger.non_private())


def noop_task(task: Any) -> int:
    """A task function that computes nothing: the chunks it was sent (benchmarks/
    bench_scheduler_cost.py: the cost of a task to the scheduler, not to the worker)."""
    return len(task.chunks)
