"""The audit engine: plan audit points and cells, run them on a backend, compute the bounds.

An **audit point** is (audit, algorithm, problem, grid point, canary). Its cells are its batches
b = 0…B−1 (B = runs / batch): cell b runs the mechanism ``batch`` times on D and on D′
(:func:`dpbench.audit.runs.run_audit_batch`) with the generator
``make_rng(identity ∪ {"batch": b}, root_seed)``; the neighbouring pair comes from
``make_rng(identity, root_seed)`` (no batch), so every batch audits the same pair. Results never
depend on the number of workers, on packing or on retries.

Cells are cost-packed into tasks (:func:`dpbench.engine.plan.pack`) and go through the same client
loop and execution backends as experiment cells (:func:`dpbench.engine.runner.drive_tasks`:
bounded window, retries, scheduler loss → :class:`~dpbench.core.errors.SchedulerLost`), under
the suite's per-cell time and memory limits (a batch of ``batch`` runs on D and on D′ may take
2 · batch · ``cell_timeout_s``). A failing cell is recorded with its error and the run goes on; a
resume computes only the batches not done.

Multiplicity (Bonferroni): K is the number of applicable points of the run, decided at planning
time from the suite alone (an algorithm's declared requirements, and whether the canary's pair
can be built — no mechanism output is involved); every point is tested at
``per_audit_alpha(alpha, K)``. Within every batch the first half of the runs selects the
threshold and the second half confirms: a Clopper–Pearson lower bound on ε (Jagielski, Ullman,
Oprea 2020) and a μ-GDP lower bound (Dong, Roth, Su 2022; Nasr et al. 2023), see
:mod:`dpbench.audit.stats`. A lost batch removes runs from both halves, independently of their
outcomes, so the bound on the completed runs stays valid (only weaker).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..config.audit import AUDIT_AXES, AuditSpec
from ..config.suite import Suite
from ..core.algorithm import Algorithm
from ..core.errors import CellTimeout, NotApplicable, UserInputError
from ..core.neighbours import NeighbourPair, canary_not_applicable_reason, neighbouring_pair
from ..core.params import identity_params
from ..core.problem import Problem
from ..core.schema import DONE, FAILED, NOT_APPLICABLE, PENDING
from ..core.seeding import make_rng, stable_hash
from ..core.time_limit import time_limit
from ..engine.backends import Connection
from ..engine.cells import _error_text
from ..engine.isolation import Killed, memory_message, run_isolated
from ..engine.plan import CELL_OVERHEAD_COST, TaskSpec, chunk_class, pack
from ..engine.runner import Progress, TaskKind, drive_tasks
from ..store.cube import Store, check_store_path
from ..store.lock import StoreLock
from .runs import run_audit_batch
from .stats import audit_bound, per_audit_alpha
from .store import BATCH_FLOAT_VARS, POINT_FLOAT_VARS, POINT_INT_VARS, AuditStore, BatchResult
from .verdicts import point_verdict, tightness

#: Work units charged per run on top of the algorithm's estimate (generator spawning, release
#: validation, ledger, scoring: ~0.3 ms, like an experiment cell's fixed overhead
#: :data:`dpbench.engine.plan.CELL_OVERHEAD_COST`), so a batch of 1000 runs fills a task on its own.
RUN_OVERHEAD_COST = CELL_OVERHEAD_COST


@dataclass(frozen=True)
class AuditPoint:
    """Everything a worker needs to run the batches of one audit point (small, picklable)."""

    audit: str
    index: tuple[int, ...]               # position along the point dims
    algorithm_label: str
    algorithm_cls: type[Algorithm]
    algorithm_name: str
    algorithm_params: dict[str, Any]
    problem_label: str
    problem_cls: type[Problem]
    problem_name: str
    problem_params: dict[str, Any]
    point: dict[str, Any]                # n, p, epsilon, delta
    canary: str
    batch_size: int
    n_batches: int
    root_seed: int
    expect: str = "private"

    def identity(self) -> dict[str, Any]:
        """The identity of the point (the pair's generator); a batch adds ``"batch"``."""
        return {"audit": self.audit, "algorithm": self.algorithm_name,
                "params": identity_params(self.algorithm_cls.params, self.algorithm_params),
                "problem": {"name": self.problem_name,
                            "params": identity_params(self.problem_cls.params, self.problem_params)},
                "point": self.point, "canary": self.canary}

    def batch_rng(self, batch: int) -> np.random.Generator:
        return make_rng({**self.identity(), "batch": batch}, self.root_seed)

    def pair_rng(self) -> np.random.Generator:
        return make_rng(self.identity(), self.root_seed)

    def instances(self) -> tuple[Problem, Algorithm]:
        return self.problem_cls(**self.problem_params), self.algorithm_cls(**self.algorithm_params)


@dataclass(frozen=True)
class AuditChunk:
    """One cell: batch ``batch`` of ``point``. Packs like a :class:`dpbench.engine.plan.ChunkSpec`
    (``experiment``, ``index``, ``cost``)."""

    point: AuditPoint
    batch: int
    cost: float

    @property
    def experiment(self) -> str:
        return f"audit.{self.point.audit}"

    @property
    def index(self) -> tuple[int, ...]:
        return (*self.point.index, self.batch)


@dataclass
class AuditTaskResult:
    key: str
    batches: list[BatchResult]
    host: str = ""


def _task_seconds(res: AuditTaskResult) -> float:
    """The worker seconds of an audit task: its batches' (NaN: not computed)."""
    return math.fsum(b.seconds for b in res.batches if math.isfinite(b.seconds))


@dataclass(frozen=True)
class NotApplicablePoint:
    point: AuditPoint
    reason: str


@dataclass
class AuditPlan:
    """Applicable points (K of them) and not-applicable ones, decided before any run."""

    points: list[AuditPoint]
    not_applicable: list[NotApplicablePoint]
    alpha_total: float

    @property
    def n_points(self) -> int:
        return len(self.points)

    @property
    def alpha(self) -> float:
        """Per-point level (Bonferroni over the K applicable points of the run)."""
        return per_audit_alpha(self.alpha_total, max(self.n_points, 1))


# --- planning -------------------------------------------------------------------------------------

def _grid_points(a: AuditSpec) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
    """(index, point) for every grid point of an audit, in C order over n, p, epsilon, delta."""
    ranges = [range(len(a.grid[ax])) for ax in AUDIT_AXES]
    return [(idx, {ax: a.grid[ax][i] for ax, i in zip(AUDIT_AXES, idx)})
            for idx in itertools.product(*ranges)]


def _applicability(pt: AuditPoint, problem: Problem, algorithm: Algorithm) -> str | None:
    """Why the point cannot be audited, or None: the algorithm's requirements, the canary's
    scope (:func:`~dpbench.core.neighbours.canary_not_applicable_reason`), and whether the pair
    can be built (no mechanism run)."""
    reason = algorithm.not_applicable_reason(problem) or canary_not_applicable_reason(
        algorithm, pt.canary)
    if reason is not None:
        return reason
    try:
        neighbouring_pair(problem, int(pt.point["n"]), int(pt.point["p"]), pt.canary,
                          pt.pair_rng())
    except NotApplicable as exc:
        return str(exc) or f"canary {pt.canary!r} does not apply"
    return None


def plan_audits(suite: Suite) -> AuditPlan:
    """Every audit point of the suite, applicable or not (no store, no mechanism run)."""
    if not suite.audits:
        raise UserInputError(f"{suite.source}: the suite has no audits: section; dpbench audit "
                             "runs audits only (dpbench run runs experiments)")
    points: list[AuditPoint] = []
    not_applicable: list[NotApplicablePoint] = []
    for a in suite.audits:
        for gidx, point in _grid_points(a):
            for pi, pspec in enumerate(a.problems):
                problem = pspec.build({})
                for ai, aspec in enumerate(a.algorithms):
                    algorithm = aspec.build({})
                    for ci, canary in enumerate(a.canaries):
                        pt = AuditPoint(
                            a.name, (ai, pi, *gidx, ci), aspec.label, aspec.cls, aspec.name,
                            algorithm.get_params(), pspec.label, pspec.cls, pspec.name,
                            problem.get_params(), point, canary, a.batch, a.n_batches,
                            suite.root_seed, a.expect)
                        reason = _applicability(pt, problem, algorithm)
                        if reason is None:
                            points.append(pt)
                        else:
                            not_applicable.append(NotApplicablePoint(pt, reason))
    settings = suite.audit
    return AuditPlan(points, not_applicable, float(settings.alpha))


def _chunks(points: Sequence[AuditPoint], pending: Callable[[AuditPoint], list[int]],
            ) -> list[AuditChunk]:
    out = []
    for pt in points:
        n, p = int(pt.point["n"]), int(pt.point["p"])
        per_run = pt.algorithm_cls(**pt.algorithm_params).cost(n, p) + RUN_OVERHEAD_COST
        cost = 2.0 * pt.batch_size * per_run
        out += [AuditChunk(pt, b, cost) for b in pending(pt)]
    return out


# --- worker side ----------------------------------------------------------------------------------

_PAIR_CACHE: OrderedDict[str, NeighbourPair] = OrderedDict()
_PAIR_CACHE_SIZE = 64


def _pair(pt: AuditPoint, problem: Problem) -> NeighbourPair:
    """The point's neighbouring pair, cached per worker process (deterministic in its identity)."""
    key = stable_hash([pt.identity(), pt.root_seed, pt.problem_cls.version])
    hit = _PAIR_CACHE.get(key)
    if hit is None:
        hit = neighbouring_pair(problem, int(pt.point["n"]), int(pt.point["p"]), pt.canary,
                                pt.pair_rng())
        _PAIR_CACHE[key] = hit
        if len(_PAIR_CACHE) > _PAIR_CACHE_SIZE:
            _PAIR_CACHE.popitem(last=False)
    else:
        _PAIR_CACHE.move_to_end(key)
    return hit


def _empty(pt: AuditPoint, batch: int, status: int, error: str) -> BatchResult:
    return BatchResult(pt.audit, pt.index, batch, status, error,
                       np.full((2, pt.batch_size), np.nan))


def _batch_limit(pt: AuditPoint, timeout_s: float | None) -> float | None:
    """A batch's time limit: the suite's per-cell limit for each of its runs on D and on D′."""
    return None if timeout_s is None else 2.0 * pt.batch_size * timeout_s


def run_audit_cell(chunk: AuditChunk, timeout_s: float | None = None,
                   memory_mb: float | None = None) -> BatchResult:
    """Run one batch (``batch`` runs on D and on D′); never raises (a failure is an outcome).

    With a per-cell time limit ``timeout_s`` the batch may take :func:`_batch_limit` (checked
    cooperatively inside the mechanisms and when the batch returns); ``memory_mb`` names the
    memory limit in the error of a batch that ran out of memory.
    """
    pt, b = chunk.point, chunk.batch
    limit = _batch_limit(pt, timeout_s)
    try:
        problem, algorithm = pt.instances()
        pair = _pair(pt, problem)
        t0 = time.perf_counter()
        with time_limit(limit):
            out = run_audit_batch(algorithm, problem, pair, epsilon=float(pt.point["epsilon"]),
                                  delta=float(pt.point["delta"]), runs=pt.batch_size,
                                  rng=pt.batch_rng(b))
        wall = time.perf_counter() - t0
        if limit is not None and wall > limit:
            raise CellTimeout(f"batch took {wall:.3g} s, over its time limit of {limit:g} s")
        scores = np.stack([np.asarray(out.scores0, dtype=np.float64),
                           np.asarray(out.scores1, dtype=np.float64)])
        if scores.shape != (2, pt.batch_size) or not np.all(np.isfinite(scores)):
            raise FloatingPointError(f"scores of shape {scores.shape} (expected "
                                     f"{(2, pt.batch_size)}) or not finite")
        return BatchResult(pt.audit, pt.index, b, DONE, "", scores, float(out.epsilon_claimed),
                           float(out.delta_claimed), float(out.mu_claimed), bool(out.certified),
                           wall, np.asarray(out.profile_delta, dtype=np.float64))
    except NotApplicable as exc:
        return _empty(pt, b, NOT_APPLICABLE, str(exc))
    except MemoryError as exc:
        text = _error_text(exc)
        return _empty(pt, b, FAILED, f"{memory_message(memory_mb)} ({text})"
                      if memory_mb is not None else text)
    except Exception as exc:  # recorded in the store; the audit goes on
        return _empty(pt, b, FAILED, _error_text(exc))


def _batch_computer(job: tuple[tuple[AuditChunk, ...], float | None, float | None],
                    ) -> Callable[[int, Callable[[], None]], BatchResult]:
    """``compute(i, heartbeat)`` for the i-th batch of ``job`` (runs in the isolated child)."""
    chunks, timeout_s, memory_mb = job

    def compute(i: int, heartbeat: Callable[[], None]) -> BatchResult:
        return run_audit_cell(chunks[i], timeout_s, memory_mb)

    return compute


def run_audit_task(task: TaskSpec, memory_mb: float | None = None,
                   timeout_s: float | None = None) -> AuditTaskResult:
    """Run the batches of a task with single-threaded BLAS (the backend's task function).

    Under the suite's per-cell limits (``cell_timeout_s``, ``cell_memory_mb``) the batches run in
    a forked child under hard limits, like experiment cells (:mod:`dpbench.engine.isolation`): a
    batch killed at its limit, or whose process died, is failed with the reason.
    """
    chunks: tuple[AuditChunk, ...] = tuple(task.chunks)  # type: ignore[arg-type]
    with threadpool_limits(1):
        if (memory_mb is not None or timeout_s is not None) and hasattr(os, "fork"):
            limits = [_batch_limit(c.point, timeout_s) for c in chunks]
            limit = max((x for x in limits if x is not None), default=None)
            outcomes = run_isolated(_batch_computer, (chunks, timeout_s, memory_mb), len(chunks),
                                    limit, memory_mb)
            batches = [_empty(c.point, c.batch, FAILED, o.message) if isinstance(o, Killed)
                       else o for c, o in zip(chunks, outcomes)]
        else:
            batches = [run_audit_cell(c, timeout_s, memory_mb) for c in chunks]
    return AuditTaskResult(task.key, batches, socket.gethostname())


def failed_audit_result(task: TaskSpec, message: str) -> AuditTaskResult:
    """Every batch of a task the backend could not compute (for example a killed worker)."""
    return AuditTaskResult(task.key, [_empty(c.point, c.batch, FAILED, message)  # type: ignore
                                      for c in task.chunks])


# --- bounds ---------------------------------------------------------------------------------------

@dataclass
class PointResult:
    """The verdict of one audit point, as written to the store and printed."""

    point: AuditPoint
    applicable: bool
    runs_planned: int
    runs_completed: int = 0
    epsilon_claimed: float = math.nan
    delta_claimed: float = math.nan
    mu_claimed: float = math.nan
    epsilon_lb: float = math.nan
    mu_lb: float = math.nan
    epsilon_lb_gdp: float = math.nan
    alpha: float = math.nan
    threshold: float = math.nan
    seconds: float = math.nan
    event: str = ""
    n_select: int = 0
    n_confirm: int = 0
    violation: bool = False
    note: str = ""

    @property
    def gap(self) -> float:
        """Audit gap: claimed ε − lower bound (negative: a proven violation of the claim)."""
        return self.epsilon_claimed - self.epsilon_lb

    @property
    def tightness(self) -> float:
        """How close the assumption-free bounds came to the claim (:func:`.verdicts.tightness`)."""
        return tightness(self.epsilon_lb, self.epsilon_claimed, self.mu_lb, self.mu_claimed)

    @property
    def verdict(self) -> str:
        return point_verdict(self.point.expect, self.applicable, self.runs_completed,
                             self.violation, self.tightness)


def _claim(values: np.ndarray) -> float:
    """The claim of the completed batches (they agree: the ledger is data-independent)."""
    finite = values[np.isfinite(values)]
    return float(np.max(finite)) if finite.size else math.nan


def point_result(astore: AuditStore, pt: AuditPoint, alpha: float) -> PointResult:
    """Bounds of one applicable point from its completed batches only (see the module doc)."""
    res = PointResult(pt, True, pt.batch_size * pt.n_batches, alpha=alpha)
    done, scores = astore.completed(pt.audit, pt.index)
    res.runs_completed = int(done.size) * pt.batch_size
    if done.size == 0:
        res.note = "no completed batch"
        return res
    per_batch = {var: np.asarray(astore.array(pt.audit, var).oindex[(*pt.index, done.tolist())])
                 for var in BATCH_FLOAT_VARS}
    res.seconds = float(np.nansum(per_batch["batch_seconds"]))
    res.epsilon_claimed = _claim(per_batch["batch_epsilon_claimed"])
    res.delta_claimed = _claim(per_batch["batch_delta_claimed"])
    res.mu_claimed = _claim(per_batch["batch_mu_claimed"])
    profile = np.asarray(astore.array(pt.audit, "batch_profile_delta").oindex[
        (*pt.index, done.tolist())]).reshape(done.size, -1)
    half = pt.batch_size // 2
    select = np.tile(np.arange(pt.batch_size) < half, done.size)
    bound = audit_bound(scores[:, 0, :].reshape(-1), scores[:, 1, :].reshape(-1), select,
                        epsilon_claimed=res.epsilon_claimed, delta_claimed=res.delta_claimed,
                        mu_claimed=res.mu_claimed, alpha=alpha,
                        profile_delta=np.nanmax(profile, axis=0))
    res.epsilon_lb, res.mu_lb = float(bound.epsilon_lb), float(bound.mu_lb)
    res.epsilon_lb_gdp, res.threshold = float(bound.epsilon_lb_gdp), float(bound.threshold)
    res.event, res.violation = str(bound.event), bool(bound.violation)
    res.n_select, res.n_confirm = int(bound.n_select), int(bound.n_confirm)
    return res


def _point_arrays(a: AuditSpec, results: Sequence[PointResult]) -> dict[str, np.ndarray]:
    shape = a.point_shape
    out: dict[str, np.ndarray] = {v: np.full(shape, np.nan) for v in POINT_FLOAT_VARS}
    out.update({v: np.zeros(shape, dtype=np.int64) for v in POINT_INT_VARS})
    out["violation"] = np.zeros(shape, dtype=bool)
    out["event"] = np.full(shape, "", dtype=object)
    out["note"] = np.full(shape, "", dtype=object)
    for r in results:
        i = r.point.index
        for var, value in (("epsilon_lower_bound", r.epsilon_lb), ("mu_lower_bound", r.mu_lb),
                           ("epsilon_claimed", r.epsilon_claimed),
                           ("delta_claimed", r.delta_claimed), ("mu_claimed", r.mu_claimed),
                           ("epsilon_lower_bound_gdp", r.epsilon_lb_gdp), ("audit_gap", r.gap),
                           ("alpha", r.alpha), ("threshold", r.threshold),
                           ("seconds", r.seconds),
                           ("runs_completed", r.runs_completed), ("runs_planned", r.runs_planned),
                           ("n_select", r.n_select), ("n_confirm", r.n_confirm),
                           ("violation", r.violation), ("event", r.event), ("note", r.note)):
            out[var][i] = value
    return out


def compute_bounds(astore: AuditStore, suite: Suite, plan: AuditPlan) -> list[PointResult]:
    """Recompute every point's bounds from the stored completed batches and write them."""
    results = [point_result(astore, pt, plan.alpha) for pt in plan.points]
    results += [PointResult(na.point, False, 0, note=na.reason) for na in plan.not_applicable]
    for a in suite.audits:
        mine = [r for r in results if r.point.audit == a.name]
        astore.write_points(a.name, _point_arrays(a, mine))
        astore.set_attrs(a.name, {"alpha_total": plan.alpha_total, "alpha_per_point": plan.alpha,
                                  "audit_points": plan.n_points})
    order = {a.name: i for i, a in enumerate(suite.audits)}
    return sorted(results, key=lambda r: (order[r.point.audit], r.point.index))


# --- running --------------------------------------------------------------------------------------

@dataclass
class AuditSummary:
    """What ``dpbench audit`` reports: per-point results and the run's verdict."""

    store: Path
    backend: str
    results: list[PointResult] = field(default_factory=list)
    computed: int = 0                     # batches computed by this run
    failed: int = 0                       # batches failed in this run
    seconds: float = 0.0
    alpha_total: float = math.nan
    alpha_per_point: float = math.nan
    n_points: int = 0

    @property
    def violations(self) -> list[PointResult]:
        """Points of ``expect: private`` audits whose claim was refuted."""
        return [r for r in self.results if r.point.expect == "private" and r.violation]

    @property
    def uninformative(self) -> list[PointResult]:
        """Clean points of ``expect: private`` audits whose bounds reach < 10 % of the claim."""
        return [r for r in self.results if r.point.expect == "private"
                and r.verdict == "uninformative"]

    @property
    def missed(self) -> list[tuple[str, str]]:
        """(audit, algorithm) of ``expect: violation`` audits flagged at no point."""
        flagged: dict[tuple[str, str], bool] = {}
        for r in self.results:
            if r.point.expect == "violation":
                key = (r.point.audit, r.point.algorithm_label)
                flagged[key] = flagged.get(key, False) or r.violation
        return [k for k, v in flagged.items() if not v]

    @property
    def ok(self) -> bool:
        return not self.violations and not self.missed


def _pending_batches(astore: AuditStore, retry_failed: bool) -> Callable[[AuditPoint], list[int]]:
    status: dict[str, np.ndarray] = {}

    def pending(pt: AuditPoint) -> list[int]:
        if pt.audit not in status:
            status[pt.audit] = astore.batch_status(pt.audit)
        st = status[pt.audit][pt.index]
        todo = (st != DONE) & (st != NOT_APPLICABLE) if retry_failed else (st == PENDING)
        return [int(b) for b in np.flatnonzero(todo)]

    return pending


def _mark_not_applicable(astore: AuditStore, plan: AuditPlan) -> None:
    results = [_empty(na.point, b, NOT_APPLICABLE, na.reason[:2000])
               for na in plan.not_applicable for b in range(na.point.n_batches)]
    if results:
        astore.write_batches(results)


def run_audits(suite: Suite, store_path: str | Path, *, scheduler: str | None = None,
               scheduler_file: str | Path | None = None, profile: str | Path | None = None,
               workers: int | None = None, backend: str = "dask", restart: bool = False,
               retry_failed: bool = True, window: int | None = None, progress: bool = True,
               on_result: Callable[[AuditTaskResult], None] | None = None,
               break_lock: bool = False) -> AuditSummary:
    """Run (or resume) the audits of ``suite`` into the store at ``store_path``.

    The suite is planned (applicability, K, per-point alpha) before the store is touched; only
    batches not done are computed (failed ones too unless ``retry_failed`` is False); the bounds
    are then recomputed from every completed batch. ``restart`` discards the audit groups whose
    definition changed (experiments of the same store are kept). The store's writer lock
    (:mod:`dpbench.store.lock`) is held throughout; ``break_lock`` breaks a stale one.
    """
    connection = Connection(backend, workers, scheduler, scheduler_file, profile)
    connection.check()
    plan = plan_audits(suite)
    with StoreLock(store_path, f"dpbench audit {suite.name}", break_stale=break_lock):
        return _audit_locked(suite, store_path, plan, connection, restart=restart,
                             retry_failed=retry_failed, window=window, progress=progress,
                             on_result=on_result)


def _audit_locked(suite: Suite, store_path: str | Path, plan: AuditPlan, connection: Connection,
                  *, restart: bool, retry_failed: bool, window: int | None, progress: bool,
                  on_result: Callable[[AuditTaskResult], None] | None) -> AuditSummary:
    if check_store_path(Path(store_path)) and not restart:  # refuse before writing anything
        AuditStore(Store.open(store_path)).check_matches(suite.audits, suite.root_seed)
    store = Store.prepare(store_path, dataclasses.replace(suite, experiments=()),
                          whole_suite=False)
    astore = AuditStore(store)
    astore.prepare(suite.audits, suite.root_seed, restart=restart)
    _mark_not_applicable(astore, plan)
    tasks = pack(_chunks(plan.points, _pending_batches(astore, retry_failed)))  # type: ignore
    summary = AuditSummary(Path(store_path), "none (nothing to compute)",
                           alpha_total=plan.alpha_total, alpha_per_point=plan.alpha,
                           n_points=plan.n_points)
    units: dict[tuple[str, int, int], float] = {}
    counts: dict[tuple[str, int, int], float] = {}
    for chunk in (c for t in tasks for c in t.chunks):
        key = chunk_class(chunk)
        units[key] = units.get(key, 0.0) + chunk.cost
        counts[key] = counts.get(key, 0.0) + 1
    bar = Progress(sum(len(t.chunks) for t in tasks), sum(t.cost for t in tasks),
                   enabled=progress, class_units=units, class_chunks=counts)

    def write(results: list[AuditTaskResult]) -> tuple[int, int]:
        batches = [b for res in results for b in res.batches]
        astore.write_batches(batches)
        return (sum(b.status == DONE for b in batches), sum(b.status == FAILED for b in batches))

    kind = TaskKind(partial(run_audit_task, memory_mb=suite.cell_memory_mb,
                            timeout_s=suite.effective_cell_timeout_s), failed_audit_result,
                    AuditTaskResult, seconds=_task_seconds)
    drive_tasks(tasks, store, summary, bar, kind=kind, write=write, connection=connection,
                window=window, on_result=on_result, command="audit")
    summary.results = compute_bounds(astore, suite, plan)
    return summary
