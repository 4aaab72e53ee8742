"""Expansion of a suite into chunks and tasks.

A **chunk** is all seeds of one (algorithm, problem, grid point): one whole row of every cube
variable (a zarr chunk of the store holds one or several such rows, see
:func:`dpbench.store.cube.chunk_shape`; only the client writes them). A **task** packs one or more
whole chunks (cheap ones together, amortising dask's ~1–3 ms per-task overhead; neighbouring grid
points stay adjacent so that a task's rows mostly fill whole zarr chunks) and is the unit
submitted to dask. Cost estimates include a fixed per-cell overhead
(:data:`CELL_OVERHEAD_COST`), so sweeps of trivial cells still split into many tasks. Packing
depends only on the suite, never on the number of workers, and results never depend on packing:
every cell draws its randomness from its own identity.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.suite import Experiment, Suite
from ..core.algorithm import Algorithm
from ..core.problem import Problem
from ..core.schema import NotApplicableChunk

#: Work units (per-example gradient evaluations) a packed task aims for: a few hundred ms.
TARGET_TASK_COST = 2.0e6
#: Upper bound on chunks per task, so that progress and resumption stay fine-grained.
MAX_CHUNKS_PER_TASK = 256
#: Fixed work units charged per cell on top of the algorithm's estimate: dataset lookup, seeding,
#: risk evaluation and result handling (~0.3 ms, i.e. ~2,000 units at the scale of
#: :data:`TARGET_TASK_COST`). Without it a sweep of trivial cells packs into a handful of huge
#: tasks (256 chunks each) and two workers sit idle while the last ones run.
CELL_OVERHEAD_COST = 2.0e3


@dataclass(frozen=True)
class ChunkSpec:
    """Everything a worker needs to compute the cells of one chunk (small and picklable)."""

    experiment: str
    index: tuple[int, ...]                 # position in every dim but seed
    algorithm_cls: type[Algorithm]
    algorithm_name: str
    algorithm_params: dict[str, Any]       # fixed params plus routed extra axes
    problem_cls: type[Problem]
    problem_name: str
    problem_params: dict[str, Any]
    point: dict[str, Any]                  # n, p, epsilon, delta and extra axes
    seeds: tuple[int, ...]                 # seed indices to compute
    n_seeds: int                           # chunk length along seed
    root_seed: int
    timeout_s: float | None
    cost: float

    @property
    def fresh(self) -> bool:
        """True when every seed of the chunk is computed (nothing to merge with the store)."""
        return len(self.seeds) == self.n_seeds


@dataclass(frozen=True)
class TaskSpec:
    key: str
    chunks: tuple[ChunkSpec, ...]

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.chunks)

    @property
    def n_cells(self) -> int:
        return sum(len(c.seeds) for c in self.chunks)


def grid_points(exp: Experiment) -> Iterator[tuple[tuple[int, ...], dict[str, Any]]]:
    """(index, point) for every grid point, in C order over the grid axes."""
    axes = exp.axes
    ranges = [range(len(exp.grid[a])) for a in axes]
    for idx in itertools.product(*ranges):
        yield idx, {a: exp.grid[a][i] for a, i in zip(axes, idx)}


def expand(suite: Suite, exp: Experiment, pending: np.ndarray | None = None,
           ) -> tuple[list[ChunkSpec], list[NotApplicableChunk]]:
    """The chunks of ``exp`` that still have cells to compute, and the not-applicable chunks.

    ``pending`` is a boolean mask over the cube (``None``: everything pending). Applicability is
    decided here, from declared properties only, so not-applicable cells never reach a worker.
    """
    chunks: list[ChunkSpec] = []
    not_applicable: list[NotApplicableChunk] = []
    problems: dict[tuple[int, tuple[Any, ...]], Problem] = {}
    algorithms: dict[tuple[int, tuple[Any, ...]], Algorithm] = {}
    for gidx, point in grid_points(exp):
        prob_axes = exp.problem_axes(point)
        algo_axes = exp.algorithm_axes(point)
        for pi, pspec in enumerate(exp.problems):
            key = (pi, tuple(sorted(prob_axes.items())))
            if key not in problems:
                problems[key] = pspec.build(prob_axes)
            problem = problems[key]
            for ai, aspec in enumerate(exp.algorithms):
                index = (ai, pi, *gidx)
                if pending is not None:
                    mask = pending[index]
                    seeds = tuple(int(s) for s in np.flatnonzero(mask))
                    if not seeds:
                        continue
                else:
                    seeds = tuple(range(exp.seeds))
                akey = (ai, tuple(sorted(algo_axes.items())))
                if akey not in algorithms:
                    algorithms[akey] = aspec.build(algo_axes)
                algorithm = algorithms[akey]
                reason = algorithm.not_applicable_reason(problem)
                if reason is not None:
                    not_applicable.append(NotApplicableChunk(exp.name, index, reason))
                    continue
                n, p = int(point["n"]), int(point["p"])
                cost = len(seeds) * (algorithm.cost(n, p) + n * p + CELL_OVERHEAD_COST)
                chunks.append(ChunkSpec(
                    experiment=exp.name, index=index, algorithm_cls=aspec.cls,
                    algorithm_name=aspec.name, algorithm_params=algorithm.get_params(),
                    problem_cls=pspec.cls, problem_name=pspec.name,
                    problem_params=problem.get_params(), point=point, seeds=seeds,
                    n_seeds=exp.seeds, root_seed=suite.root_seed, timeout_s=suite.effective_cell_timeout_s,
                    cost=float(cost)))
    return chunks, not_applicable


def pack(chunks: Sequence[ChunkSpec], target: float = TARGET_TASK_COST,
         max_chunks: int = MAX_CHUNKS_PER_TASK) -> list[TaskSpec]:
    """Pack chunks into tasks, most expensive first (longest-processing-time-first).

    Chunks above ``target`` get a task of their own; cheaper ones are grouped until the group
    reaches ``target`` or ``max_chunks``. Chunks of the same problem and grid point stay adjacent,
    so a worker's dataset cache serves every algorithm packed with them.
    """
    order = sorted(chunks, key=lambda c: (-c.cost, c.experiment, c.index[1:], c.index[0]))
    tasks: list[TaskSpec] = []
    group: list[ChunkSpec] = []
    acc = 0.0

    def flush() -> None:
        nonlocal group, acc
        if group:
            first = group[0]
            key = f"dpb-{first.experiment}-{'.'.join(map(str, first.index))}-{len(group)}"
            tasks.append(TaskSpec(key, tuple(group)))
        group, acc = [], 0.0

    for c in order:
        group.append(c)
        acc += c.cost
        if acc >= target or len(group) >= max_chunks:
            flush()
    flush()
    return tasks


def count_cells(chunks: Iterable[ChunkSpec]) -> int:
    return sum(len(c.seeds) for c in chunks)


def total_cost(tasks: Iterable[TaskSpec]) -> float:
    return math.fsum(t.cost for t in tasks)
