"""Worker side: compute the cells of a task. Runs on dask workers (or in-process).

Every cell is deterministic given its identity (dataset stream and mechanism stream, see
:mod:`dpbench.core.seeding`), so a task that dask runs twice returns identical values. A cell that
raises, returns a non-finite value or exceeds its time or memory limit becomes a *failed* cell with
its error message; the other cells of the task are unaffected. With a per-cell time or memory limit
the cells run in a forked child process that is killed at the limit (:mod:`dpbench.engine.isolation`).
"""

from __future__ import annotations

import math
import os
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..core.errors import CellTimeout, NotApplicable
from ..core.params import identity_params
from ..core.problem import Dataset, Optimum, Problem
from ..core.schema import (
    DONE,
    FAILED,
    FLOAT_VARS,
    MAX_ERROR_CHARS,
    NOT_APPLICABLE,
    ChunkResult,
    make_row,
)
from ..core.seeding import SeedTemplate, data_identity, make_rng, mechanism_identity, stable_hash
from ..core.time_limit import time_limit
from .isolation import Killed, memory_message, run_isolated
from .plan import ChunkSpec, TaskSpec


@dataclass
class TaskResult:
    key: str
    chunks: list[ChunkResult]
    host: str = ""
    seconds: float = 0.0  # the worker's wall time for the whole task (0: not computed)
    #: The process that computed it (host and pid): its first task of a mechanism pays the
    #: one-off costs (imports, compilation) that the cost calibration keeps apart.
    worker: str = ""


_DATA_CACHE: OrderedDict[str, tuple[Dataset, Optimum]] = OrderedDict()
_DATA_CACHE_SIZE = 64


def dataset_and_optimum(problem: Problem, data_id: dict[str, Any], root_seed: int,
                        streams: CellStreams | None = None) -> tuple[Dataset, Optimum]:
    """The dataset of a cell and its certified optimum, cached per worker process.

    Every algorithm and every (ε, δ) at the same (problem, n, p, seed) share one dataset, so the
    cache avoids regenerating and re-solving it. ``streams`` (the cell's chunk) gives the same
    cache key and data stream without recomputing the canonical identity.
    """
    seed = int(data_id["seed"])
    key = streams.cache.hexdigest(seed) if streams is not None else \
        stable_hash([data_id, root_seed, problem.version])
    hit = _DATA_CACHE.get(key)
    if hit is not None:
        _DATA_CACHE.move_to_end(key)
        return hit
    rng = streams.data.rng(seed, root_seed) if streams is not None else \
        make_rng(data_id, root_seed)
    data = problem.generate(int(data_id["n"]), int(data_id["p"]), rng)
    opt = problem.solve(data)
    _DATA_CACHE[key] = (data, opt)
    if len(_DATA_CACHE) > _DATA_CACHE_SIZE:
        _DATA_CACHE.popitem(last=False)
    return data, opt


def _error_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"[:MAX_ERROR_CHARS]


#: The outcome of one cell: (status, result variables or None, error message).
CellOutcome = tuple[int, dict[str, float] | None, str]


def _empty_result(chunk: ChunkSpec) -> ChunkResult:
    k = len(chunk.seeds)
    return ChunkResult(chunk.experiment, chunk.index, chunk.seeds, chunk.fresh,
                       {v: np.full(k, np.nan) for v in FLOAT_VARS},
                       np.full(k, FAILED, dtype=np.uint8), [""] * k)


def _record(res: ChunkResult, j: int, outcome: CellOutcome) -> None:
    status, row, error = outcome
    res.status[j] = status
    res.errors[j] = error
    for name, value in (row or {}).items():
        res.values[name][j] = value


def _instances(chunk: ChunkSpec) -> tuple[Problem, Any]:
    return chunk.problem_cls(**chunk.problem_params), chunk.algorithm_cls(**chunk.algorithm_params)


class CellStreams:
    """The identities of a chunk's cells, which differ only in their seed, canonicalised once
    per chunk (:class:`~dpbench.core.seeding.SeedTemplate`): ``data_id(seed)``, the data cache
    key, the data stream and the mechanism stream, bit-identical to computing each per cell.

    ``point`` is the grid point as the chunk's mechanism (of privacy kind ``privacy``) runs at it
    (:meth:`~dpbench.core.grid.GridPoint.for_privacy`: δ = 0 for a pure ε-DP mechanism): it keys
    the mechanism stream and gives the (ε, δ) the mechanism is called with.
    """

    def __init__(self, chunk: ChunkSpec, privacy: str) -> None:
        n, p = chunk.point.n, chunk.point.p
        prob = identity_params(chunk.problem_cls.params, chunk.problem_params)
        algo = identity_params(chunk.algorithm_cls.params, chunk.algorithm_params)
        self._prob, self._n, self._p, self._name = prob, n, p, chunk.problem_name
        self.point = chunk.point.for_privacy(privacy)
        point_id = self.point.identity()
        self.data = SeedTemplate(self.data_id)
        self.cache = SeedTemplate(lambda s: [self.data_id(s), chunk.root_seed,
                                             chunk.problem_cls.version])
        self.mechanism = SeedTemplate(lambda s: mechanism_identity(
            chunk.algorithm_name, algo, self.data_id(s), point_id))

    def data_id(self, seed: int) -> dict[str, Any]:
        return data_identity(self._name, self._prob, self._n, self._p, seed)


def compute_cell(chunk: ChunkSpec, j: int, problem: Problem, algorithm: Any,
                 on_release: Callable[[], None] | None = None,
                 memory_mb: float | None = None,
                 streams: CellStreams | None = None) -> CellOutcome:
    """Compute seed ``chunk.seeds[j]``; never raises (a failure is an outcome).

    ``on_release`` is called when the mechanism starts (the hard time limit restarts there);
    ``memory_mb`` names the memory limit in the error of a cell that ran out of memory;
    ``streams`` is the chunk's :class:`CellStreams`, shared by its cells.
    """
    n, p = chunk.point.n, chunk.point.p
    try:
        streams = streams if streams is not None else CellStreams(chunk, algorithm.privacy)
        # The budget the mechanism runs at: the grid's, but δ = 0 for a pure mechanism.
        eps, delta = streams.point.epsilon, streams.point.delta
        seed = int(chunk.seeds[j])
        data, opt = dataset_and_optimum(problem, streams.data_id(seed), chunk.root_seed, streams)
        rng = streams.mechanism.rng(seed, chunk.root_seed)
        if on_release is not None:
            on_release()
        t0 = time.perf_counter()
        with time_limit(chunk.timeout_s):
            rel = algorithm.release(data, problem, epsilon=eps, delta=delta, rng=rng)
        wall = time.perf_counter() - t0
        if chunk.timeout_s is not None and wall > chunk.timeout_s:
            raise CellTimeout(f"cell took {wall:.3g} s, over its time limit of "
                              f"{chunk.timeout_s:g} s")
        excess = problem.risk(rel.theta, data) - opt.value
        pop = problem.population_excess(rel.theta, p, n) if problem.has_population else math.nan
        if not math.isfinite(excess) or (problem.has_population and not math.isfinite(pop)):
            raise FloatingPointError(f"non-finite result: excess={excess!r}, population={pop!r}")
        # The excess of the data-independent centre of C: what a release that ignores the data
        # achieves. Mechanisms at or near it are in the capped (uninformative) regime.
        trivial = problem.risk(problem.constraint.center(p), data) - opt.value
        # The closed-form expected excess of this configuration, where one is known.
        oracle = algorithm.oracle_excess(data, problem, epsilon=eps, delta=delta)
        row = make_row(
            excess_risk=excess, population_excess_risk=pop, optimum_gap=opt.gap,
            trivial_excess_risk=trivial, oracle_excess_risk=oracle,
            wall_time_s=wall, grad_queries=rel.grad_queries,
            func_queries=rel.func_queries, iterations=rel.iterations,
            epsilon_spent=rel.ledger.epsilon, delta_spent=rel.ledger.delta,
        )
        return DONE, row, ""
    except NotApplicable as exc:
        return NOT_APPLICABLE, None, str(exc)[:MAX_ERROR_CHARS]
    except MemoryError as exc:
        if memory_mb is not None:
            return FAILED, None, f"{memory_message(memory_mb)} ({_error_text(exc)})"[
                :MAX_ERROR_CHARS]
        return FAILED, None, _error_text(exc)
    except Exception as exc:  # recorded in the cube; the sweep goes on
        return FAILED, None, _error_text(exc)


def run_chunk(chunk: ChunkSpec) -> ChunkResult:
    """Compute the requested seeds of one chunk (in this process)."""
    res = _empty_result(chunk)
    problem, algorithm = _instances(chunk)
    streams = CellStreams(chunk, algorithm.privacy)
    for j in range(len(chunk.seeds)):
        _record(res, j, compute_cell(chunk, j, problem, algorithm, streams=streams))
    return res


def _cell_computer(job: tuple[tuple[ChunkSpec, ...], float | None],
                   ) -> Callable[[int, Callable[[], None]], CellOutcome]:
    """``compute(i, heartbeat)`` for the i-th cell of ``job`` (runs in the isolated child)."""
    chunks, memory_mb = job
    cells = [(c, j) for c in chunks for j in range(len(c.seeds))]
    instances: dict[int, tuple[Problem, Any, CellStreams]] = {}

    def compute(i: int, heartbeat: Callable[[], None]) -> CellOutcome:
        chunk, j = cells[i]
        try:
            if id(chunk) not in instances:
                problem, algorithm = _instances(chunk)
                instances[id(chunk)] = (problem, algorithm,
                                        CellStreams(chunk, algorithm.privacy))
        except Exception as exc:
            return FAILED, None, _error_text(exc)
        problem, algorithm, streams = instances[id(chunk)]
        return compute_cell(chunk, j, problem, algorithm, heartbeat, memory_mb, streams)

    return compute


def run_chunks_isolated(chunks: Sequence[ChunkSpec], memory_mb: float | None) -> list[ChunkResult]:
    """Compute ``chunks`` in a forked child under hard per-cell time and memory limits.

    Every cell computes exactly what :func:`run_chunk` would; a cell killed at its limit (or whose
    process died) is failed with the reason, and the cells after it run in a fresh child.
    """
    chunks = tuple(chunks)
    n = sum(len(c.seeds) for c in chunks)
    limit = next((c.timeout_s for c in chunks if c.timeout_s is not None), None)
    outcomes = iter(run_isolated(_cell_computer, (chunks, memory_mb), n, limit, memory_mb))
    results = []
    for chunk in chunks:
        res = _empty_result(chunk)
        for j in range(len(chunk.seeds)):
            outcome = next(outcomes)
            _record(res, j, (FAILED, None, outcome.message) if isinstance(outcome, Killed)
                    else outcome)
        results.append(res)
    return results


def needs_isolation(task: TaskSpec, memory_mb: float | None) -> bool:
    """True when a hard limit applies (and the platform can fork)."""
    limited = memory_mb is not None or any(c.timeout_s is not None for c in task.chunks)
    return limited and hasattr(os, "fork")


def run_task(task: TaskSpec, memory_mb: float | None = None) -> TaskResult:
    """Compute a task (one or more whole chunks) with single-threaded BLAS.

    One BLAS thread per task keeps wall times comparable across backends and makes floating-point
    reductions independent of the machine's core count. With a per-cell time limit (the chunks'
    ``timeout_s``) or a memory limit (``memory_mb``) the cells run in a forked child under hard
    limits (:func:`run_chunks_isolated`); otherwise in this process.
    """
    import socket
    import time

    t0 = time.perf_counter()
    with threadpool_limits(1):
        if needs_isolation(task, memory_mb):
            chunks = run_chunks_isolated(task.chunks, memory_mb)
        else:
            chunks = [run_chunk(c) for c in task.chunks]
    host = socket.gethostname()
    return TaskResult(task.key, chunks, host, time.perf_counter() - t0, f"{host}:{os.getpid()}")
