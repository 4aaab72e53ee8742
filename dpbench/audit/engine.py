"""The audit engine: plan the points, run their batches in rounds on a backend, compute bounds.

An **audit point** is (audit, algorithm, problem, grid point, canary) of a suite's ``audits:``
(:class:`~dpbench.audit.points.AuditPoint`); its configurations are what its search tries. Its
batches run in rounds (:mod:`dpbench.audit.procedure`: timing, successive-halving search,
confirmation); between rounds the client records its decisions in the store and every point's
next batches are packed into tasks (:func:`dpbench.engine.plan.pack`) and sent through the same
client loop and execution backends as experiment cells (:func:`dpbench.engine.runner.drive_tasks`:
bounded window, retries, scheduler loss → :class:`~dpbench.core.errors.SchedulerLost`), under the
suite's per-cell time and memory limits (a batch of r runs on D and on D′ may take
2·r·``cell_timeout_s``). A failing batch is recorded with its error and the run goes on (a failed
batch is retried by the next invocation unless ``retry_failed`` is off); a resume computes only
the batches not done and reuses every recorded decision.

Multiplicity (Bonferroni): K is the number of applicable points of the run, decided at planning
time from the suite alone; every point is tested at ``per_audit_alpha(alpha, K)``, split over the
events it confirms (:func:`dpbench.audit.stats.event_alpha`). The bounds come from the
confirmation batches of the chosen configuration only, which no choice saw; a lost confirmation
batch only removes runs (the bound stays valid, weaker).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..config.audit import SEARCH, AuditSpec
from ..config.records import suite_record
from ..config.suite import Suite
from ..core.errors import CellTimeout, NotApplicable, UserInputError
from ..core.neighbours import canary_not_applicable_reason, search_canaries
from ..core.time_limit import time_limit
from ..engine.backends import Connection, open_backend
from ..engine.cells import _error_text
from ..engine.isolation import Killed, memory_message, run_isolated
from ..engine.plan import CELL_OVERHEAD_COST, TaskSpec, chunk_class, pack
from ..engine.runner import Progress, TaskKind, drive_tasks
from ..store.cube import Store, check_store_path
from ..store.lock import StoreLock
from .events import Event
from .points import AuditPoint, Config, expand_configs
from .procedure import ConfirmResult, PilotResult, PointAuditor, PointState, Work
from .runs import run_confirm, run_pilot, scoring_context
from .scores import Scorer
from .stats import bounds_from_counts, event_alpha, per_audit_alpha, resolution
from .store import POINT_FLOAT_VARS, POINT_INT_VARS, AuditStore
from .verdicts import point_verdict, tightness

#: Work units charged per run on top of the algorithm's estimate (spawning, validation, ledger,
#: scoring), like an experiment cell's fixed overhead (:data:`CELL_OVERHEAD_COST`).
RUN_OVERHEAD_COST = CELL_OVERHEAD_COST / 10


# --- planning -------------------------------------------------------------------------------------

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
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def n_points(self) -> int:
        return len(self.points)

    @property
    def alpha(self) -> float:
        """Per-point level (Bonferroni over the K applicable points of the run)."""
        return per_audit_alpha(self.alpha_total, max(self.n_points, 1))

    def flat(self, pt: AuditPoint) -> int:
        return int(np.ravel_multi_index(pt.index, self.shapes[pt.audit]))


def _grid_points(a: AuditSpec) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
    """(index, point) for every grid point of an audit, in C order over its grid axes."""
    ranges = [range(len(a.grid[ax])) for ax in a.axes]
    return [(idx, {ax: a.grid[ax][i] for ax, i in zip(a.axes, idx)})
            for idx in itertools.product(*ranges)]


def _config_reason(pt: AuditPoint, config: int) -> str | None:
    """Why a configuration cannot be audited, or None: the algorithm's requirements and
    parameters, the canary's scope, and whether the pair can be built (no mechanism run)."""
    try:
        algorithm = pt.algorithm(config)
    except UserInputError as exc:
        return str(exc)
    problem = pt.problem()
    c = pt.configs[config]
    reason = algorithm.not_applicable_reason(problem) or canary_not_applicable_reason(
        algorithm, c.canary)
    if reason is not None:
        return reason
    if algorithm.privacy == "pure" and c.delta != 0:
        return f"{algorithm.name} is pure ε-DP: its claim is tested at δ = 0, not {c.delta:g}"
    if algorithm.privacy == "approx" and c.delta == 0:
        return f"{algorithm.name} is (ε, δ)-DP: δ must be > 0"
    try:
        pt.make_pair(config)
    except NotApplicable as exc:
        return str(exc) or f"canary {c.canary!r} does not apply"
    return None


def make_point(algorithm: Any, problem: Any, *, n: int, p: int, epsilon: float, delta: float,
               canary: str = SEARCH, budget_s: float = 60.0, runs: int | None = None,
               selection_runs: int | None = None, root_seed: int = 0,
               name: str = "point", search: dict[str, list[Any]] | None = None) -> AuditPoint:
    """One audit point of ``algorithm`` on ``problem`` outside a suite (the check harness, tests,
    scripts), with its applicable configurations; ``UserInputError`` when none applies."""
    point = {"n": int(n), "p": int(p), "epsilon": float(epsilon), "delta": float(delta)}
    base = AuditPoint(name, (0,), algorithm.name, type(algorithm), algorithm.name,
                      algorithm.get_params(), problem.name, type(problem), problem.name,
                      problem.get_params(), point, canary, (), float(budget_s), runs,
                      selection_runs, int(root_seed))
    canaries = search_canaries() if canary == SEARCH else (canary,)
    configs = expand_configs(canaries, point, dict(search or {}), base.identity(), root_seed)
    candidate = dataclasses.replace(base, configs=tuple(configs))
    reasons = [_config_reason(candidate, i) for i in range(len(configs))]
    kept = tuple(c for c, r in zip(configs, reasons) if r is None)
    if not kept:
        raise UserInputError(f"no canary applies to {algorithm.name} on {problem.name!r} at "
                             f"n={n}, p={p}: " + "; ".join(sorted({r for r in reasons if r})))
    return dataclasses.replace(base, configs=kept)


def plan_audits(suite: Suite) -> AuditPlan:
    """Every audit point of the suite with its applicable configurations (no store, no run)."""
    if not suite.audits:
        raise UserInputError(f"{suite.source}: the suite has no audits: section; dpbench audit "
                             "runs audits only (dpbench run runs experiments)")
    points: list[AuditPoint] = []
    not_applicable: list[NotApplicablePoint] = []
    shapes = {a.name: a.point_shape for a in suite.audits}
    for a in suite.audits:
        for gidx, point in _grid_points(a):
            for pi, pspec in enumerate(a.problems):
                problem = pspec.build({})
                for ai, aspec in enumerate(a.algorithms):
                    algorithm = aspec.build({})
                    for ci, canary in enumerate(a.canaries):
                        canaries = search_canaries() if canary == SEARCH else (canary,)
                        base = AuditPoint(
                            a.name, (ai, pi, *gidx, ci), aspec.label, aspec.cls, aspec.name,
                            algorithm.get_params(), pspec.label, pspec.cls, pspec.name,
                            problem.get_params(), point, canary, (), a.budget_s, a.runs,
                            a.selection_runs, suite.root_seed, a.expect)
                        configs = expand_configs(canaries, point, a.search, base.identity(),
                                                 suite.root_seed)
                        candidate = dataclasses.replace(base, configs=tuple(configs))
                        reasons = {i: _config_reason(candidate, i) for i in range(len(configs))}
                        kept = tuple(c for i, c in enumerate(configs) if reasons[i] is None)
                        pt = dataclasses.replace(base, configs=kept)
                        if kept:
                            points.append(pt)
                        else:
                            why = "; ".join(sorted({r for r in reasons.values() if r}))
                            not_applicable.append(NotApplicablePoint(pt, why or "no configuration"))
    return AuditPlan(points, not_applicable, float(suite.audit.alpha), shapes)


# --- worker side ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class AuditChunk:
    """One batch of a point (packs like a :class:`dpbench.engine.plan.ChunkSpec`)."""

    point: AuditPoint
    flat: int
    work: Work
    scorers: tuple[Scorer, ...]
    events: tuple[Event, ...]
    cost: float

    @property
    def experiment(self) -> str:
        return f"audit.{self.point.audit}"

    @property
    def index(self) -> tuple[int, ...]:
        return (*self.point.index, self.work.config)


@dataclass
class BatchOutcome:
    """What a worker returns for one batch: the result, or the error."""

    audit: str
    flat: int
    work: Work
    result: PilotResult | ConfirmResult | None
    error: str = ""

    @property
    def seconds(self) -> float:
        return float(self.result.seconds) if self.result is not None else math.nan


@dataclass
class AuditTaskResult:
    key: str
    batches: list[BatchOutcome]
    host: str = ""


def _task_seconds(res: AuditTaskResult) -> float:
    return math.fsum(b.seconds for b in res.batches if math.isfinite(b.seconds))


def _batch_limit(runs: int, timeout_s: float | None) -> float | None:
    """A batch's time limit: the suite's per-cell limit for each of its runs on D and on D′."""
    return None if timeout_s is None else 2.0 * runs * timeout_s


def run_audit_cell(chunk: AuditChunk, timeout_s: float | None = None,
                   memory_mb: float | None = None) -> BatchOutcome:
    """Run one batch; never raises (a failure is an outcome)."""
    pt, w = chunk.point, chunk.work
    limit = _batch_limit(w.runs, timeout_s)
    try:
        t0 = time.perf_counter()
        with time_limit(limit):
            if w.kind == "confirm":
                out: PilotResult | ConfirmResult = run_confirm(pt, w, chunk.scorers, chunk.events)
            else:
                out = run_pilot(pt, w)
        wall = time.perf_counter() - t0
        if limit is not None and wall > limit:
            raise CellTimeout(f"batch took {wall:.3g} s, over its time limit of {limit:g} s")
        return BatchOutcome(pt.audit, chunk.flat, w, out)
    except MemoryError as exc:
        text = _error_text(exc)
        return BatchOutcome(pt.audit, chunk.flat, w, None, f"{memory_message(memory_mb)} ({text})"
                            if memory_mb is not None else text)
    except Exception as exc:  # recorded in the store; the audit goes on
        return BatchOutcome(pt.audit, chunk.flat, w, None, _error_text(exc))


def _batch_computer(job: tuple[tuple[AuditChunk, ...], float | None, float | None],
                    ) -> Callable[[int, Callable[[], None]], BatchOutcome]:
    chunks, timeout_s, memory_mb = job

    def compute(i: int, heartbeat: Callable[[], None]) -> BatchOutcome:
        return run_audit_cell(chunks[i], timeout_s, memory_mb)

    return compute


def run_audit_task(task: TaskSpec, memory_mb: float | None = None,
                   timeout_s: float | None = None) -> AuditTaskResult:
    """Run the batches of a task with single-threaded BLAS (the backend's task function); under
    the suite's per-cell limits in a forked child, like experiment cells
    (:mod:`dpbench.engine.isolation`)."""
    chunks: tuple[AuditChunk, ...] = tuple(task.chunks)  # type: ignore[arg-type]
    with threadpool_limits(1):
        if (memory_mb is not None or timeout_s is not None) and hasattr(os, "fork"):
            limits = [_batch_limit(c.work.runs, timeout_s) for c in chunks]
            limit = max((x for x in limits if x is not None), default=None)
            outcomes = run_isolated(_batch_computer, (chunks, timeout_s, memory_mb), len(chunks),
                                    limit, memory_mb)
            batches = [BatchOutcome(c.point.audit, c.flat, c.work, None, o.message)
                       if isinstance(o, Killed) else o for c, o in zip(chunks, outcomes)]
        else:
            batches = [run_audit_cell(c, timeout_s, memory_mb) for c in chunks]
    return AuditTaskResult(task.key, batches, socket.gethostname())


def failed_audit_result(task: TaskSpec, message: str) -> AuditTaskResult:
    """Every batch of a task the backend could not compute (for example a killed worker)."""
    return AuditTaskResult(task.key, [BatchOutcome(c.point.audit, c.flat, c.work, None, message)
                                      for c in task.chunks])  # type: ignore[attr-defined]


# --- bounds ---------------------------------------------------------------------------------------

@dataclass
class PointResult:
    """The verdict of one audit point, as written to the store and printed."""

    point: AuditPoint
    applicable: bool
    runs_planned: int = 0
    runs_completed: int = 0
    selection_runs: int = 0
    epsilon_claimed: float = math.nan
    delta_claimed: float = math.nan
    mu_claimed: float = math.nan
    epsilon_lb: float = math.nan
    mu_lb: float = math.nan
    epsilon_lb_gdp: float = math.nan
    alpha: float = math.nan
    resolution: float = math.nan
    true_epsilon: float = math.nan
    seconds: float = math.nan
    event: str = ""
    config: str = ""
    stage: str = ""
    n_events: int = 0
    violation: bool = False
    note: str = ""

    @property
    def gap(self) -> float:
        """Audit gap: claimed ε − lower bound (negative: a proven violation of the claim)."""
        return self.epsilon_claimed - self.epsilon_lb

    @property
    def tightness(self) -> float:
        return tightness(self.epsilon_lb, self.epsilon_claimed, self.mu_lb, self.mu_claimed)

    @property
    def verdict(self) -> str:
        return point_verdict(self.point.expect, self.applicable, self.runs_completed,
                             self.violation, self.tightness)


def point_result(pt: AuditPoint, state: PointState, alpha: float,
                 exact: Callable[[AuditPoint, int], float] | None = None) -> PointResult:
    """The bounds of one point from its completed confirmation batches (module docstring)."""
    from ..privacy.gaussian import gdp_epsilon

    res = PointResult(pt, True, alpha=alpha)
    seconds = [r.seconds for r in [*state.pilots.values(), *state.confirms.values()]
               + ([state.timing] if state.timing else []) if math.isfinite(r.seconds)]
    res.seconds = math.fsum(seconds) if seconds else math.nan
    if state.plan is not None:
        res.runs_planned = state.plan.confirm_runs
    sel = state.selection
    if sel is None:
        res.stage = "timing" if state.plan is None else "search"
        res.note = ("; ".join(sorted(set(state.failed.values())))[:500] if state.failed
                    else "no selection yet")
        return res
    res.config = pt.configs[sel.config].describe()
    res.selection_runs = sel.selection_runs
    res.n_events = len(sel.events)
    done = list(state.confirms.values())
    res.stage = "done" if state.plan and len(done) == state.plan.confirm_batches else "confirm"
    if not done:
        res.note = "no confirmation batch completed"
        return res
    claims = [r.claims for r in done]
    res.epsilon_claimed = max(c.epsilon for c in claims)
    res.delta_claimed = max(c.delta for c in claims)
    mus = [c.mu for c in claims]
    res.mu_claimed = math.nan if any(math.isnan(m) for m in mus) else max(mus)
    profile = np.nanmax(np.asarray([c.profile_delta for c in claims], dtype=float), axis=0)
    n = int(sum(r.runs for r in done))
    res.runs_completed = n
    k0 = np.sum([r.counts0 for r in done], axis=0)
    k1 = np.sum([r.counts1 for r in done], axis=0)
    k_num = np.where([e.numerator == 1 for e in sel.events], k1, k0)
    k_den = np.where([e.numerator == 1 for e in sel.events], k0, k1)
    a_each = event_alpha(alpha, len(sel.events))
    bounds = bounds_from_counts(k_num, k_den, n, delta=res.delta_claimed, alpha_each=a_each,
                                profile_delta=profile)
    best = int(np.argmax([b.epsilon_lb for b in bounds]))
    res.epsilon_lb = bounds[best].epsilon_lb
    res.mu_lb = max(b.mu_lb for b in bounds)
    text = sel.scorers[sel.events[best].scorer].describe()
    res.event = (f"{sel.events[best].describe('s')} with s = {text} "
                 f"({bounds[best].k_num} vs {bounds[best].k_den} of {n})")
    delta = res.delta_claimed
    res.epsilon_lb_gdp = (gdp_epsilon(res.mu_lb, delta) if res.mu_lb > 0 and 0 < delta < 1
                          else (0.0 if res.mu_lb == 0 else math.nan))
    profile_violation = max(b.profile_excess for b in bounds) > 0
    rtol = 1e-9
    res.violation = bool(res.epsilon_lb > res.epsilon_claimed * (1 + rtol) or (
        math.isfinite(res.mu_claimed) and res.mu_lb > res.mu_claimed * (1 + rtol))
        or profile_violation)
    res.resolution = resolution(n, a_each, res.epsilon_claimed, delta, res.mu_claimed)
    if res.violation and not all(c.certified for c in claims):
        res.note = ("the refuted claim is nominal: the ledger marks it not certified (a "
                    "paper's guarantee as printed, or a library's)")
    if exact is not None:
        res.true_epsilon = exact(pt, sel.config)
    return res


def exact_epsilon(pt: AuditPoint, config: int) -> float:
    """The mechanism's exact ε of the configuration's pair when it can compute it (NaN else).
    Only an ``exact_epsilon`` written for the ``run`` the class releases counts: one inherited by
    a subclass that replaced ``run`` (a broken copy) describes another law."""
    from .runs import point_pair

    algorithm = pt.algorithm(config)
    if not type(algorithm)._defined_at_or_below_run("exact_epsilon"):
        return math.nan
    c = pt.configs[config]
    pair = point_pair(pt, config)
    try:
        value = algorithm.exact_epsilon(pair.d0, pair.d1, pt.problem(),
                                                   epsilon=c.epsilon, delta=c.delta)
    except (NotApplicable, ValueError, ArithmeticError):
        return math.nan
    return math.nan if value is None else float(value)


def _point_arrays(a: AuditSpec, results: Sequence[PointResult]) -> dict[str, np.ndarray]:
    shape = a.point_shape
    out: dict[str, np.ndarray] = {v: np.full(shape, np.nan) for v in POINT_FLOAT_VARS}
    out.update({v: np.zeros(shape, dtype=np.int64) for v in POINT_INT_VARS})
    out["violation"] = np.zeros(shape, dtype=bool)
    for var in ("event", "config", "stage", "note"):
        out[var] = np.full(shape, "", dtype=object)
    for r in results:
        i = r.point.index
        for var, value in (("epsilon_lower_bound", r.epsilon_lb), ("mu_lower_bound", r.mu_lb),
                           ("epsilon_claimed", r.epsilon_claimed),
                           ("delta_claimed", r.delta_claimed), ("mu_claimed", r.mu_claimed),
                           ("epsilon_lower_bound_gdp", r.epsilon_lb_gdp), ("audit_gap", r.gap),
                           ("alpha", r.alpha), ("resolution_epsilon", r.resolution),
                           ("true_epsilon", r.true_epsilon), ("seconds", r.seconds),
                           ("runs_completed", r.runs_completed), ("runs_planned", r.runs_planned),
                           ("selection_runs", r.selection_runs),
                           ("configurations", len(r.point.configs)), ("events", r.n_events),
                           ("violation", r.violation), ("event", r.event), ("config", r.config),
                           ("stage", r.stage), ("note", r.note[:2000])):
            out[var][i] = value
    return out


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


class PointRunner:
    """The rounds of a set of points, whatever runs their batches (the engine's backends, or a
    local loop for the check harness): ``run_round(chunks) -> outcomes`` is the only
    dependency."""

    def __init__(self, points: Sequence[AuditPoint], alpha: float,
                 flat: Callable[[AuditPoint], int], states: dict[int, PointState],
                 save: Callable[[AuditPoint, PointState], None] | None = None):
        self.points = list(points)
        self.alpha = alpha
        self.flat = flat
        self.states = states
        self.save = save
        self.auditors = {id(pt): PointAuditor(len(pt.configs), partial(scoring_context, pt),
                                               alpha_point=alpha, budget_s=pt.budget_s,
                                               runs=pt.runs, selection_runs=pt.selection_runs)
                         for pt in self.points}

    def next_chunks(self) -> list[AuditChunk]:
        out = []
        for pt in self.points:
            state = self.states[id(pt)]
            work = self.auditors[id(pt)].next_work(state)
            if self.save is not None:
                self.save(pt, state)
            sel = state.selection
            n, p = pt.configs[0].n, pt.configs[0].p
            per_run = pt.algorithm_cls(**pt.algorithm_params).cost(n, p) + RUN_OVERHEAD_COST
            for w in work:
                state.attempted.add(w.key)
                confirm = w.kind == "confirm" and sel is not None
                out.append(AuditChunk(pt, self.flat(pt), w,
                                      sel.scorers if confirm else (),  # type: ignore[union-attr]
                                      sel.events if confirm else (),  # type: ignore[union-attr]
                                      2.0 * w.runs * per_run))
        return out

    def absorb(self, pt: AuditPoint, outcome: BatchOutcome) -> None:
        state = self.states[id(pt)]
        key = outcome.work.key
        if outcome.result is None:
            state.failed[key] = outcome.error
        elif isinstance(outcome.result, ConfirmResult):
            state.confirms[key] = outcome.result
            state.failed.pop(key, None)
        elif key == "timing":
            state.timing = outcome.result
            state.failed.pop(key, None)
        else:
            state.pilots[key] = outcome.result
            state.failed.pop(key, None)


def run_audits(suite: Suite, store: str | os.PathLike[str], *, scheduler: str | None = None,
               scheduler_file: str | Path | None = None, profile: str | Path | None = None,
               workers: int | None = None, backend: str = "dask", restart: bool = False,
               retry_failed: bool = True, window: int | None = None, progress: bool = True,
               on_result: Callable[[AuditTaskResult], None] | None = None,
               break_lock: bool = False) -> AuditSummary:
    """Run (or resume) the audits of ``suite`` into the store at path ``store``.

    The suite is planned (applicability, K, per-point alpha) before the store is touched; only
    batches not done are computed (failed ones too unless ``retry_failed`` is False); the bounds
    are then recomputed from every completed batch. ``restart`` discards the audit groups whose
    definition changed (experiments of the same store are kept). The store's writer lock
    (:mod:`dpbench.store.lock`) is held throughout; ``break_lock`` breaks a stale one.
    """
    connection = Connection(backend, workers, scheduler, scheduler_file, profile)
    connection.check()
    plan = plan_audits(suite)
    path = Path(store)
    with StoreLock(path, f"dpbench audit {suite.name}", break_stale=break_lock):
        return _audit_locked(suite, path, plan, connection, restart=restart,
                             retry_failed=retry_failed, window=window, progress=progress,
                             on_result=on_result)


def _audit_locked(suite: Suite, path: Path, plan: AuditPlan, connection: Connection,
                  *, restart: bool, retry_failed: bool, window: int | None, progress: bool,
                  on_result: Callable[[AuditTaskResult], None] | None) -> AuditSummary:
    if check_store_path(path) and not restart:  # refuse before writing anything
        AuditStore(Store.open(path)).check_matches(suite.audits, suite.root_seed)
    store = Store.prepare(path, suite_record(suite, experiments=False), whole_suite=False)
    astore = AuditStore(store)
    astore.prepare(suite.audits, suite.root_seed, restart=restart)
    states: dict[int, PointState] = {}
    for pt in plan.points:
        state = astore.load_state(pt.audit, plan.flat(pt), pt.configs)
        if not retry_failed:
            state.attempted.update(state.failed)
        states[id(pt)] = state

    def save(pt: AuditPoint, state: PointState) -> None:
        astore.save_decisions(pt.audit, plan.flat(pt), pt.configs, state)

    runner = PointRunner(plan.points, plan.alpha, plan.flat, states, save)
    by_key = {(pt.audit, plan.flat(pt)): pt for pt in plan.points}
    summary = AuditSummary(path, "none (nothing to compute)",
                           alpha_total=plan.alpha_total, alpha_per_point=plan.alpha,
                           n_points=plan.n_points)

    def write(results: list[AuditTaskResult]) -> tuple[int, int]:
        done = failed = 0
        for res in results:
            for b in res.batches:
                astore.write_batch(b.audit, b.flat, b.work, b.result, b.error)
                runner.absorb(by_key[(b.audit, b.flat)], b)
                done += b.result is not None
                failed += b.result is None
        return done, failed

    kind = TaskKind(partial(run_audit_task, memory_mb=suite.cell_memory_mb,
                            timeout_s=suite.effective_cell_timeout_s), failed_audit_result,
                    AuditTaskResult, seconds=_task_seconds)
    chunks = runner.next_chunks()
    opened = None
    with _maybe_backend(connection, bool(chunks)) as opened:
        while chunks:
            tasks = pack(chunks)  # type: ignore[arg-type]
            units: dict[tuple[str, int, int], float] = {}
            counts: dict[tuple[str, int, int], float] = {}
            for chunk in chunks:
                key = chunk_class(chunk)
                units[key] = units.get(key, 0.0) + chunk.cost
                counts[key] = counts.get(key, 0.0) + 1
            bar = Progress(len(chunks), sum(t.cost for t in tasks), enabled=progress,
                           class_units=units, class_chunks=counts)
            drive_tasks(tasks, store.record_run, summary, bar, kind=kind, write=write,
                        connection=connection, window=window, on_result=on_result,
                        command="audit", opened=opened)
            chunks = runner.next_chunks()
    summary.results = compute_bounds(astore, suite, plan, states)
    return summary


class _maybe_backend:
    """The backend, opened once for every round (when there is work at all)."""

    def __init__(self, connection: Connection, needed: bool):
        self.connection, self.needed = connection, needed
        self._cm: Any = None

    def __enter__(self) -> Any:
        if not self.needed:
            return None
        self._cm = open_backend(self.connection)
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        if self._cm is not None:
            return self._cm.__exit__(*exc)
        return False


def compute_bounds(astore: AuditStore, suite: Suite, plan: AuditPlan,
                   states: dict[int, PointState]) -> list[PointResult]:
    """Every point's bounds from its stored batches, written to the store."""
    results = [point_result(pt, states[id(pt)], plan.alpha, exact_epsilon)
               for pt in plan.points]
    results += [PointResult(na.point, False, note=na.reason) for na in plan.not_applicable]
    for a in suite.audits:
        mine = [r for r in results if r.point.audit == a.name]
        astore.write_points(a.name, _point_arrays(a, mine))
        astore.set_attrs(a.name, {"alpha_total": plan.alpha_total, "alpha_per_point": plan.alpha,
                                  "audit_points": plan.n_points})
    order = {a.name: i for i, a in enumerate(suite.audits)}
    return sorted(results, key=lambda r: (order[r.point.audit], r.point.index))


def audit_in_process(points: Sequence[AuditPoint], alpha: float,
                     max_rounds: int = 64) -> list[PointResult]:
    """The audits of ``points`` run in this process, without a store (the check harness,
    :mod:`dpbench.testing`): the same rounds, decisions, scores and bounds as ``dpbench
    audit``."""
    states = {id(pt): PointState(len(pt.configs)) for pt in points}
    runner = PointRunner(points, alpha, lambda pt: 0, states)
    for _ in range(max_rounds):
        chunks = runner.next_chunks()
        if not chunks:
            break
        for chunk in chunks:
            runner.absorb(chunk.point, run_audit_cell(chunk))
    return [point_result(pt, states[id(pt)], alpha, exact_epsilon) for pt in points]
