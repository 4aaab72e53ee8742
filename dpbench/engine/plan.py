"""Expansion of a suite into chunks and tasks.

A **chunk** is all seeds of one (algorithm, problem, grid point): one whole row of every cube
variable (a zarr chunk of the store holds one or several such rows, see
:func:`dpbench.store.cube.chunk_shape`; only the client writes them). A **task** packs one or more
whole chunks (cheap ones together, amortising dask's ~1–3 ms per-task overhead; neighbouring grid
points stay adjacent so that a task's rows mostly fill whole zarr chunks) and is the unit
submitted to dask. A :class:`Plan` keeps only compact per-chunk arrays (position, pending cells,
estimated cost) and a :class:`Packer` builds each task only when the backend's submission window
has room for it, so a sweep of 10⁶ cells takes about as much client memory as one of 10⁴. The
packer sizes tasks from *measured* cost (each mechanism × problem class is timed on its first
results; until then its chunks go one per task), so a plugin without an honest ``cost()`` is as
parallel as one with it. Estimates include a fixed per-cell overhead
(:data:`CELL_OVERHEAD_COST`). :func:`pack` is the static packer (estimates only; audits).
Results never depend on packing: every cell draws its randomness from its own identity.
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.suite import Experiment, Suite
from ..core.algorithm import Algorithm
from ..core.grid import GridPoint
from ..core.problem import Problem
from ..core.schema import NotApplicableChunk

#: Work units (per-example gradient evaluations) a packed task aims for: a few hundred ms.
TARGET_TASK_COST = 2.0e6
#: Wall seconds a task aims for (:data:`TARGET_TASK_COST` measured in time): long enough to
#: amortise dask's per-task overhead, short enough for progress and load balance.
TARGET_TASK_SECONDS = 0.3
#: Work units per second of one worker thread, the scale between estimates and measurements.
UNITS_PER_SECOND = TARGET_TASK_COST / TARGET_TASK_SECONDS
#: Near the end of a run a task takes at most 1/TAIL_SPLIT of the remaining work per worker
#: thread, so that the last tasks finish together instead of one worker running a long tail.
TAIL_SPLIT = 4
#: The tail split never makes a task smaller than this fraction of the target (about 50 ms):
#: below it, dask's and the client's per-task overhead would cost more than the balance gains.
MIN_TASK_FRACTION = 1 / 6
#: Upper bound on chunks per task, so that progress and resumption stay fine-grained.
MAX_CHUNKS_PER_TASK = 256
#: Fixed work units charged per cell on top of the algorithm's estimate: dataset lookup, seeding,
#: risk evaluation and result handling (~0.3 ms, i.e. ~2,000 units at the scale of
#: :data:`TARGET_TASK_COST`). Without it a sweep of trivial cells packs into a handful of huge
#: tasks (256 chunks each) and two workers sit idle while the last ones run.
CELL_OVERHEAD_COST = 2.0e3
#: The client's memory per planned chunk at its peak, while the submission order is sorted:
#: position and cost (4 + 4 bytes), the order (4) and the sort key (8) (docs/performance.md).
PLAN_BYTES_PER_CHUNK = 20


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
    point: GridPoint                       # n, p, epsilon, delta and extra axes
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


class _Instances:
    """The problem and algorithm instances of an experiment's grid points, built on demand.

    Only the extra axes routed to a plugin change its instance, so a few instances serve a whole
    grid; a small LRU bounds memory when an extra axis takes very many values.
    """

    SIZE = 256

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    def _get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        try:
            self._cache.move_to_end(key)
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = make()
            if len(self._cache) > self.SIZE:
                self._cache.popitem(last=False)
            return value

    def problem(self, pi: int, routed: Sequence[tuple[str, Any]]
                ) -> tuple[tuple[Any, ...], Problem]:
        """(key, instance) of problem ``pi`` with the extra axes ``routed`` to it (a grid point's
        ``problem_axes``); equal keys, equal instances."""
        key = ("p", pi, tuple(sorted(routed)))
        return key, self._get(key, lambda: self.exp.problems[pi].build(dict(routed)))

    def algorithm(self, ai: int, routed: Sequence[tuple[str, Any]]
                  ) -> tuple[tuple[Any, ...], Algorithm]:
        """(key, instance) of algorithm ``ai`` with the extra axes ``routed`` to it."""
        key = ("a", ai, tuple(sorted(routed)))
        return key, self._get(key, lambda: self.exp.algorithms[ai].build(dict(routed)))

    def derived(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """A value computed from instances (applicability, cost), cached under ``key``."""
        return self._get(("d", *key), make)


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        out.append(i)
    return tuple(reversed(out))


def _pending_seeds(pending: np.ndarray | None, index: tuple[int, ...], n_seeds: int,
                   ) -> tuple[int, ...]:
    if pending is None:
        return tuple(range(n_seeds))
    return tuple(int(s) for s in np.flatnonzero(pending[index]))


def _joined(buffers: Sequence[array], dtype: Any) -> np.ndarray:
    """The buffers as one array (the only buffer's memory itself, without a copy)."""
    parts = [np.frombuffer(b, dtype=dtype) for b in buffers if len(b)]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


class ExperimentPlan:
    """The chunks of one experiment that still have cells to compute, as compact arrays.

    Built by one pass over the grid that instantiates every (problem, algorithm) configuration
    (validating parameter combinations that only occur at some grid points), decides
    applicability from declared properties only, and records per chunk its position (``flat``,
    C order over ``shape``; 4 bytes when the cube has fewer than 2³² rows) and estimated cost
    (``cost``, float32: 4 bytes): 8 bytes per chunk, whatever the plugins' parameters. Chunks
    are kept in (problem, grid point, algorithm) order — the order that breaks ties between
    chunks of equal cost (:class:`Plan`), so that chunks sharing a dataset stay adjacent.
    :meth:`chunk` rebuilds the full :class:`ChunkSpec` of a position when it is submitted.
    """

    def __init__(self, suite: Suite, exp: Experiment, pending: np.ndarray | None = None) -> None:
        self.suite, self.exp, self.pending = suite, exp, pending
        self.shape = exp.shape[:-1]                      # (algorithm, problem, *grid)
        self._instances = _Instances(exp)
        small = math.prod(self.shape) < 2 ** 32
        n_alg, n_prob = self.shape[:2]
        code = "I" if small and array("I").itemsize == 4 else "q"
        # one buffer per problem, joined at the end: (problem, grid point, algorithm) order
        flats = [array(code) for _ in range(n_prob)]
        costs = [array("f") for _ in range(n_prob)]
        n_grid = math.prod(self.shape[2:])
        inst = self._instances
        self.not_applicable: list[NotApplicableChunk] = []
        self.n_cells = 0
        #: Pending applicable cells per (algorithm, problem) position.
        self.class_cells = np.zeros((n_alg, n_prob), dtype=np.int64)
        for g, (gidx, point) in enumerate(exp.points()):
            n, p = point.n, point.p
            for pi in range(n_prob):
                pkey, problem = inst.problem(pi, point.problem_axes)
                flat, cost = flats[pi], costs[pi]
                for ai in range(n_alg):
                    index = (ai, pi, *gidx)
                    k = exp.seeds if pending is None else int(np.count_nonzero(pending[index]))
                    if k == 0:
                        continue
                    akey, algorithm = inst.algorithm(ai, point.algorithm_axes)
                    reason = inst.derived((akey, pkey),
                                          lambda: algorithm.not_applicable_reason(problem))
                    if reason is not None:
                        self.not_applicable.append(NotApplicableChunk(exp.name, index, reason))
                        continue
                    unit = inst.derived((akey, n, p), lambda: algorithm.cost(n, p))
                    flat.append((ai * n_prob + pi) * n_grid + g)   # C order over self.shape
                    cost.append(float(k * (unit + n * p + CELL_OVERHEAD_COST)))
                    self.n_cells += k
                    self.class_cells[ai, pi] += k
        dtype = np.uint32 if code == "I" else np.int64
        self.flat = _joined(flats, dtype)
        self.cost = _joined(costs, np.float32)

    def __len__(self) -> int:
        return len(self.flat)

    def chunk_cells(self, part: slice = slice(None)) -> np.ndarray:
        """Pending cells per chunk (every seed when nothing was done), of the chunks ``part``."""
        flat = self.flat[part]
        if self.pending is None:
            return np.full(len(flat), self.exp.seeds, dtype=np.int64)
        per_row = self.pending.reshape(-1, self.pending.shape[-1]).sum(axis=1)
        return per_row[flat].astype(np.int64)

    def chunk_np(self, part: slice = slice(None)) -> np.ndarray:
        """n·p of each chunk's grid point (the data term of its cost), of the chunks ``part``."""
        flat = self.flat[part].astype(np.int64)
        out = np.ones(len(flat))
        for axis in ("n", "p"):
            ax = 2 + self.exp.axes.index(axis)
            position = flat // math.prod(self.shape[ax + 1:]) % self.shape[ax]
            out *= np.asarray(self.exp.grid[axis], dtype=np.float64)[position]
        return out

    def class_units(self, count: bool = False) -> np.ndarray:
        """Estimated work units per (algorithm, problem) position (the sum of its chunks');
        ``count``: the number of its chunks instead."""
        n_alg, n_prob = self.shape[:2]
        per_class = self.flat // math.prod(self.shape[2:])   # algorithm * n_prob + problem
        return np.bincount(per_class, weights=None if count else self.cost,
                           minlength=n_alg * n_prob).reshape(n_alg, n_prob)

    def chunk(self, i: int) -> ChunkSpec:
        """The :class:`ChunkSpec` of this plan's ``i``-th chunk (grid order)."""
        exp = self.exp
        index = _unravel(int(self.flat[i]), self.shape)
        ai, pi, *gidx = index
        point = exp.point_at(gidx)
        _, algorithm = self._instances.algorithm(ai, point.algorithm_axes)
        _, problem = self._instances.problem(pi, point.problem_axes)
        return ChunkSpec(
            experiment=exp.name, index=index, algorithm_cls=exp.algorithms[ai].cls,
            algorithm_name=exp.algorithms[ai].name, algorithm_params=algorithm.get_params(),
            problem_cls=exp.problems[pi].cls, problem_name=exp.problems[pi].name,
            problem_params=problem.get_params(), point=point,
            seeds=_pending_seeds(self.pending, index, exp.seeds), n_seeds=exp.seeds,
            root_seed=self.suite.root_seed, timeout_s=self.suite.effective_cell_timeout_s,
            cost=float(self.cost[i]))


def chunk_class(chunk: Any) -> tuple[str, int, int]:
    """The (experiment, algorithm, problem) class of a chunk (suite chunks, and audit batches,
    whose experiment is ``audit.<name>``): the unit of cost calibration."""
    return chunk.experiment, chunk.index[0], chunk.index[1]


class Plan:
    """The pending chunks of a whole suite, streamed as tasks in submission order.

    Submission order is longest-processing-time-first over the whole suite (ties: experiment
    name, then problem and grid point, then algorithm, so that chunks sharing a dataset stay
    adjacent), the same order :func:`pack` gives. :meth:`tasks` materialises each task only when
    the backend asks for it, so the client's memory does not grow with the suite (only the
    compact per-chunk arrays do: 12 bytes per chunk with the order, :data:`PLAN_BYTES_PER_CHUNK`
    at the peak while it is sorted);
    ``benchmarks/bench_client_memory.py`` measures it.
    """

    def __init__(self, experiments: Sequence[ExperimentPlan]) -> None:
        self.experiments = tuple(experiments)
        sizes = [len(ep) for ep in self.experiments]
        self.n_chunks = sum(sizes)
        self.n_cells = sum(ep.n_cells for ep in self.experiments)
        self.total_cost = math.fsum(math.fsum(ep.cost) for ep in self.experiments)
        self._by_name = sorted(range(len(self.experiments)),
                               key=lambda e: self.experiments[e].exp.name)
        self._name_starts = np.cumsum([0, *(sizes[e] for e in self._by_name)])
        self._order = self._submission_order()

    def _submission_order(self) -> np.ndarray:
        """Each chunk's position in name order (experiments by name, each in its own order),
        sorted by descending cost, ties by that position: one 64-bit key per chunk (the cost's
        float32 bits, complemented, above the position), sorted in place. The order costs 4
        bytes per chunk, its sorting 8 more while it runs."""
        if self.n_chunks >= 2 ** 32:
            raise ValueError(f"{self.n_chunks} chunks: at most 2**32 - 1 can be planned")
        key = np.empty(self.n_chunks, dtype=np.uint64)
        block = 2 ** 20
        for rank, e in enumerate(self._by_name):
            ep, start = self.experiments[e], int(self._name_starts[rank])
            for i in range(0, len(ep), block):
                # costs are positive: their float32 bits increase with them
                bits = ep.cost[i:i + block].view(np.uint32)
                part = key[start + i:start + i + len(bits)]
                part[:] = np.uint32(0xFFFFFFFF) - bits
                part <<= np.uint64(32)
                part |= np.arange(start + i, start + i + len(bits), dtype=np.uint64)
        key.sort()
        order = np.empty(self.n_chunks, dtype=np.uint32)
        for i in range(0, self.n_chunks, block):
            order[i:i + block] = key[i:i + block]   # the low 32 bits: the position
        return order

    @property
    def not_applicable(self) -> list[NotApplicableChunk]:
        return [na for ep in self.experiments for na in ep.not_applicable]

    def class_units(self, count: bool = False) -> dict[tuple[str, int, int], float]:
        """Estimated work units of each (experiment, algorithm, problem) class with pending
        chunks (:func:`chunk_class`): what :class:`Packer` scales by measured times, and the
        run's progress estimate too; ``count``: the number of its chunks instead."""
        out: dict[tuple[str, int, int], float] = {}
        for ep in self.experiments:
            sums = ep.class_units(count)
            for ai, pi in zip(*np.nonzero(sums)):
                out[(ep.exp.name, int(ai), int(pi))] = float(sums[ai, pi])
        return out

    def chunks(self) -> Iterator[ChunkSpec]:
        """Every pending chunk, most expensive first."""
        for k in self._order:
            rank = int(np.searchsorted(self._name_starts, k, side="right")) - 1
            ep = self.experiments[self._by_name[rank]]
            yield ep.chunk(int(k) - int(self._name_starts[rank]))

    def tasks(self, target: float = TARGET_TASK_COST,
              max_chunks: int = MAX_CHUNKS_PER_TASK) -> Iterator[TaskSpec]:
        """The chunks packed into tasks, in submission order, built one at a time."""
        return _group(self.chunks(), target, max_chunks)


#: Fractions of the task target for the first tasks of a run: the first results (and the
#: progress line, and a first look at the cube) come back after a few tens of milliseconds of
#: work instead of a full task's; three extra tasks cost a few milliseconds.
RAMP = (1 / 8, 1 / 4, 1 / 2)


class Packer:
    """Packs a :class:`Plan`'s chunks into tasks from *measured* cost, as results come back.

    The estimates of :meth:`Algorithm.cost <dpbench.core.algorithm.Algorithm.cost>` order the
    chunks (longest first) and give the relative cost of one mechanism × problem *class* across
    grid points; measurements give its scale: once a class has results, a chunk's cost is its
    estimate times the class's measured/estimated ratio (a ratio of sums over every result so
    far), and tasks are packed to :data:`TARGET_TASK_SECONDS`. A class whose algorithm declares
    no ``cost()`` is *probed* first: single-chunk tasks, at most one per worker thread, and
    nothing more of it until one comes back (:meth:`tasks` yields ``None``: "wait for a
    result"), so an estimate that calls its cells trivial cannot pack the sweep into one
    serial task. The first tasks are smaller (:data:`RAMP`). Towards the end, a task takes at
    most 1/:data:`TAIL_SPLIT` of the remaining work per worker thread (``capacity``, set by the
    runner from the backend), so the last tasks finish together. Packing then depends on
    timings; results never depend on packing (every cell draws its randomness from its own
    identity).
    """

    def __init__(self, plan: Plan, target: float = TARGET_TASK_COST,
                 max_chunks: int = MAX_CHUNKS_PER_TASK) -> None:
        self.plan, self.target, self.max_chunks = plan, target, max_chunks
        self.capacity: Callable[[], int] = lambda: 1
        self._measured: dict[tuple[str, int, int], float] = {}
        self._estimated: dict[tuple[str, int, int], float] = {}
        self._left: dict[tuple[str, int, int], float] = {}
        self._declares: dict[tuple[str, int, int], bool] = {}
        self._probes: dict[str, tuple[str, int, int]] = {}      # task key -> class, in flight
        self._probing: dict[tuple[str, int, int], int] = {}
        self._cells: dict[tuple[str, int, int], int] = {}
        #: Per class: seconds and units of each worker's first task of it, their count, and
        #: the workers seen (the rest is "warm": one-off costs paid).
        self._first: dict[tuple[str, int, int], list[float]] = {}
        self._seen: dict[tuple[str, int, int], set[str]] = {}
        self._left = plan.class_units()
        algorithms = {ep.exp.name: ep.exp.algorithms for ep in plan.experiments}
        for key in self._left:
            self._declares[key] = algorithms[key[0]][key[1]].cls.cost is not Algorithm.cost

    def _scale(self, cls: tuple[str, int, int]) -> float | None:
        est = self._estimated.get(cls)
        return None if not est else self._measured[cls] / est

    def work_left_s(self) -> float:
        """Worker seconds of the chunks not yet handed out as tasks: each class's estimate
        scaled by its measured/estimated ratio (an unmeasured class at its estimate)."""
        return math.fsum(v * (self._scale(c) or 1.0)
                         for c, v in self._left.items()) / UNITS_PER_SECOND

    def _tail_target(self) -> float:
        left = self.work_left_s() * UNITS_PER_SECOND
        split = left / (TAIL_SPLIT * max(self.capacity(), 1))
        return min(self.target, max(split, self.target * MIN_TASK_FRACTION))

    def tasks(self) -> Iterator[TaskSpec | None]:
        """The plan's chunks as tasks, in submission order, each built when it is asked for;
        ``None`` means: nothing until a task in flight comes back (:meth:`observe`)."""
        group: list[ChunkSpec] = []
        acc = target = 0.0
        ramp = iter(RAMP)
        for chunk in self.plan.chunks():
            cls = chunk_class(chunk)
            self._left[cls] -= chunk.cost
            if not self._declares[cls] and self._scale(cls) is None:
                if group:
                    yield _task(group)
                    group, acc = [], 0.0
                while self._scale(cls) is None and \
                        self._probing.get(cls, 0) >= max(self.capacity(), 1):
                    yield None
                if self._scale(cls) is None:
                    probe = _task([chunk])
                    self._probes[probe.key] = cls
                    self._probing[cls] = self._probing.get(cls, 0) + 1
                    yield probe
                    continue
            if not group:  # once per task: the remaining work sums over every class
                target = self._tail_target() * next(ramp, 1.0)
            group.append(chunk)
            acc += chunk.cost * (self._scale(cls) or 1.0)
            if acc >= target or len(group) >= self.max_chunks:
                yield _task(group)
                group, acc = [], 0.0
        if group:
            yield _task(group)

    def observe(self, task: TaskSpec, result: Any) -> None:
        """Learn from a finished task (failed ones too): its worker seconds, split over its
        chunks as their own mechanism time (``wall_time_s``) plus an equal share per cell of the
        rest (data, optimum, risk evaluation)."""
        cls = self._probes.pop(task.key, None)
        if cls is not None:
            self._probing[cls] -= 1
        seconds = float(getattr(result, "seconds", 0.0) or 0.0)
        chunks = getattr(result, "chunks", None)
        if seconds <= 0 or not chunks or len(chunks) != len(task.chunks):
            return
        own = [float(np.nansum(r.values.get("wall_time_s", np.zeros(0)))) for r in chunks]
        cells = sum(len(c.seeds) for c in task.chunks)
        rest = max(seconds - math.fsum(own), 0.0) / max(cells, 1)
        worker = str(getattr(result, "worker", "") or "")
        fresh = set()  # the classes of which this is the worker's first task
        for cls in {chunk_class(spec) for spec in task.chunks}:
            seen = self._seen.setdefault(cls, set())
            if worker not in seen:
                seen.add(worker)
                fresh.add(cls)
                self._first.setdefault(cls, [0.0, 0.0, 0])[2] += 1
        for spec, mech in zip(task.chunks, own):
            cls = chunk_class(spec)
            units = (mech + rest * len(spec.seeds)) * UNITS_PER_SECOND
            self._measured[cls] = self._measured.get(cls, 0.0) + units
            self._estimated[cls] = self._estimated.get(cls, 0.0) + spec.cost
            self._cells[cls] = self._cells.get(cls, 0) + len(spec.seeds)
            if cls in fresh:
                acc = self._first[cls]
                acc[0] += units / UNITS_PER_SECOND
                acc[1] += spec.cost

    def timings(self) -> dict[str, dict[str, float]]:
        """What this run measured per mechanism × problem class, keyed ``"algorithm|problem"``
        by registered names (so that another suite's plan can use it): worker seconds, the
        estimated work units they computed and cells, and apart the same for each worker
        process's first task of the class (which pays imports and compilation). Recorded in the
        store's run log; the cost calibration of ``dpbench plan``
        (:mod:`dpbench.engine.estimate`) reads it."""
        fields = ("seconds", "units", "cells", "first_seconds", "first_units", "first_tasks")
        out: dict[str, dict[str, float]] = {}
        by_name = {ep.exp.name: ep.exp for ep in self.plan.experiments}
        for (name, ai, pi), units in self._estimated.items():
            exp = by_name[name]
            key = f"{exp.algorithms[ai].name}|{exp.problems[pi].name}"
            row = out.setdefault(key, dict.fromkeys(fields, 0.0))
            first = self._first.get((name, ai, pi), [0.0, 0.0, 0])
            for f, v in zip(fields, (self._measured[(name, ai, pi)] / UNITS_PER_SECOND, units,
                                     self._cells[(name, ai, pi)], *first)):
                row[f] += v
        return {k: {f: (int(v[f]) if f in ("cells", "first_tasks") else round(v[f], 6))
                    for f in fields} for k, v in sorted(out.items())}


def plan_suite(suite: Suite, pending: Mapping[str, np.ndarray] | None = None) -> Plan:
    """The plan of ``suite``; ``pending`` maps an experiment to a boolean mask over its cube
    (absent or ``None``: every cell pending)."""
    pending = pending or {}
    return Plan([ExperimentPlan(suite, exp, pending.get(exp.name)) for exp in suite.experiments])


def expand(suite: Suite, exp: Experiment, pending: np.ndarray | None = None,
           ) -> tuple[list[ChunkSpec], list[NotApplicableChunk]]:
    """The chunks of ``exp`` that still have cells to compute (grid order), and the
    not-applicable chunks: one experiment's :class:`ExperimentPlan`, materialised."""
    ep = ExperimentPlan(suite, exp, pending)
    return [ep.chunk(i) for i in range(len(ep))], ep.not_applicable


def pack(chunks: Sequence[ChunkSpec], target: float = TARGET_TASK_COST,
         max_chunks: int = MAX_CHUNKS_PER_TASK) -> list[TaskSpec]:
    """Pack chunks into tasks, most expensive first (longest-processing-time-first).

    Chunks above ``target`` get a task of their own; cheaper ones are grouped until the group
    reaches ``target`` or ``max_chunks``. Chunks of the same problem and grid point stay adjacent,
    so a worker's dataset cache serves every algorithm packed with them.
    """
    order = sorted(chunks, key=lambda c: (-c.cost, c.experiment, c.index[1:], c.index[0]))
    return list(_group(order, target, max_chunks))


def _group(chunks: Iterable[ChunkSpec], target: float, max_chunks: int) -> Iterator[TaskSpec]:
    """Consecutive chunks grouped into tasks of about ``target`` cost (at most ``max_chunks``)."""
    group: list[ChunkSpec] = []
    acc = 0.0
    for c in chunks:
        group.append(c)
        acc += c.cost
        if acc >= target or len(group) >= max_chunks:
            yield _task(group)
            group, acc = [], 0.0
    if group:
        yield _task(group)


def _task(group: list[ChunkSpec]) -> TaskSpec:
    first = group[0]
    return TaskSpec(f"dpb-{first.experiment}-{'.'.join(map(str, first.index))}-{len(group)}",
                    tuple(group))
