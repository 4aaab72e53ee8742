"""The audit of one point, as a sequence of decisions on stored results (docs/audit.md).

An audit point has a **budget** in seconds of worker time (or pinned run counts) and a list of
**configurations** — canaries, and the public parameters the suite leaves open — to search. Its
batches run in rounds; between rounds the client decides from what is stored so far, so the
same stored results always lead to the same decisions (a resume recomputes them):

1. **timing** — one small batch on the first configuration measures the seconds per run (not
   needed when the suite pins the run counts); the budget then resolves into run counts
   (:func:`plan_sizes`, recorded with the point);
2. **search** — successive halving over the configurations (Jamieson and Talwalkar 2016): every
   configuration gets a pilot batch, the better half by predicted tightness (the bound its best
   event would give on the planned confirmation runs, over the claim) goes on with twice the
   runs, until one is left; the pilot runs of the winner are the **selection** runs;
3. **selection** — on the selection runs, the public scores and the distinguishers fitted on half
   of them (:mod:`dpbench.audit.scores`) each propose their best events
   (:func:`dpbench.audit.events.select_events`); the best few by predicted tightness are fixed;
4. **confirmation** — fresh runs of the chosen configuration, counted in the fixed events on the
   workers (no per-run storage), then the bounds (:mod:`dpbench.audit.stats`). Its run count is
   re-planned at selection time from the search's measured seconds per release and the budget
   left (:func:`replan_confirmation`): a decision on timings only, never on releases.

The search and the selection look only at pilot runs; the confirmation runs are independent of
every choice, so the bounds hold whatever was searched, at the level of the E confirmed events
(:func:`dpbench.audit.stats.event_alpha`). This module holds the decisions only; running the
batches (:mod:`dpbench.audit.runs`), storing them (:mod:`dpbench.audit.store`) and distributing
them (:mod:`dpbench.audit.engine`, or in-process for the check harness) live elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .events import Choice, Event, select_events
from .scores import Scorer, apply, fit_histogram, fit_logistic, public_scorers
from .stats import event_alpha

__all__ = ["Claims", "ConfirmResult", "PilotResult", "Plan", "PointAuditor", "PointState",
           "ScoringContext", "Selection", "Work", "choose_events", "confirm_batches", "criterion",
           "plan_sizes", "replan_confirmation", "search_rounds"]

#: Runs per side of the timing batch.
TIMING_RUNS = 64
#: Share of the budget spent on the search and the selection (the rest confirms).
PILOT_SHARE = 0.3
#: Fewest runs per side a configuration gets in a search round.
MIN_PILOT_RUNS = 200
#: Most selection runs per side (they are stored: runs × p × 8 bytes × 2 sides).
MAX_SELECTION_RUNS = 200_000
#: Fewest and most confirmation runs per side.
MIN_CONFIRM_RUNS = 1_000
MAX_CONFIRM_RUNS = 200_000_000
#: Target seconds of work of one confirmation batch, and its bounds in runs per side.
CONFIRM_BATCH_SECONDS = 4.0
MIN_BATCH_RUNS = 500
MAX_BATCH_RUNS = 2_000_000
#: Largest pilot batch (runs per side); a larger round allotment is split.
MAX_PILOT_BATCH_RUNS = 50_000
#: Events confirmed: the best ones for the ε bound, and for the μ bound when μ is claimed.
EPSILON_EVENTS = 3
MU_EVENTS = 2


@dataclass(frozen=True)
class Claims:
    """What the ledgers of a batch claim (they agree: a ledger depends on public values only)."""

    epsilon: float
    delta: float
    mu: float          # NaN: no GDP claim
    certified: bool
    profile_delta: tuple[float, ...] = ()

    def to_list(self) -> list[Any]:
        return [json_number(self.epsilon), json_number(self.delta), json_number(self.mu),
                bool(self.certified), [json_number(x) for x in self.profile_delta]]

    @classmethod
    def from_list(cls, v: Sequence[Any]) -> Claims:
        return cls(number(v[0]), number(v[1]), number(v[2]), bool(v[3]),
                   tuple(number(x) for x in v[4]))


@dataclass
class PilotResult:
    """Releases of a pilot (or timing) batch: ``theta0`` on D, ``theta1`` on D′ (runs × p);
    ``score_seconds``: the part of ``seconds`` a timing batch spent scoring them."""

    theta0: np.ndarray
    theta1: np.ndarray
    claims: Claims
    seconds: float
    score_seconds: float = 0.0


@dataclass
class ConfirmResult:
    """Event counts of a confirmation batch on D (``counts0``) and D′ (``counts1``)."""

    counts0: np.ndarray
    counts1: np.ndarray
    runs: int
    claims: Claims
    seconds: float


@dataclass(frozen=True)
class Plan:
    """The budget resolved into run counts (recorded with the point)."""

    seconds_per_run: float       # per run on each side (NaN when the runs are pinned)
    search_runs: tuple[int, ...]  # runs per side per configuration in each search round
    confirm_batch: int            # runs per side of a confirmation batch
    confirm_batches: int

    @property
    def confirm_runs(self) -> int:
        return self.confirm_batch * self.confirm_batches

    def to_dict(self) -> dict[str, Any]:
        return {"seconds_per_run": json_number(self.seconds_per_run),
                "search_runs": list(self.search_runs),
                "confirm_batch": self.confirm_batch, "confirm_batches": self.confirm_batches}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        return cls(number(d["seconds_per_run"]), tuple(int(x) for x in d["search_runs"]),
                   int(d["confirm_batch"]), int(d["confirm_batches"]))


def search_rounds(n_configs: int) -> int:
    """Rounds of successive halving for ``n_configs`` configurations (1 with one)."""
    return 1 + max(0, math.ceil(math.log2(max(n_configs, 1))))


def _alive_count(n_configs: int, round_: int) -> int:
    return max(1, math.ceil(n_configs / 2 ** round_))


def plan_sizes(n_configs: int, *, budget_s: float, seconds_per_run: float | None,
               runs: int | None = None, selection_runs: int | None = None) -> Plan:
    """The run counts of a point: from the budget and the measured seconds per run, or from the
    pinned ``runs`` (confirmation runs per side) and ``selection_runs``.

    A share :data:`PILOT_SHARE` of the budget goes to the search (each round spends the same,
    split over the configurations still in it, at least :data:`MIN_PILOT_RUNS` each and at most
    :data:`MAX_SELECTION_RUNS` in all for the winner), the rest to confirmation batches of about
    :data:`CONFIRM_BATCH_SECONDS` each.
    """
    rounds = search_rounds(n_configs)
    if runs is not None:
        confirm = int(runs)
        pilot_total = int(selection_runs) if selection_runs is not None else max(
            MIN_PILOT_RUNS, confirm // 4)
        spr = math.nan
    else:
        if not (seconds_per_run and seconds_per_run > 0 and math.isfinite(seconds_per_run)):
            raise ValueError(f"seconds_per_run must be > 0, got {seconds_per_run!r}")
        spr = float(seconds_per_run)
        affordable = budget_s / spr
        confirm = int(min(MAX_CONFIRM_RUNS, max(MIN_CONFIRM_RUNS, (1 - PILOT_SHARE) * affordable)))
        pilot_total = int(PILOT_SHARE * affordable)
    # runs per configuration in round r: the round's share over the configurations alive then
    per_round = pilot_total / rounds
    search = [max(MIN_PILOT_RUNS, int(per_round / _alive_count(n_configs, r)))
              for r in range(rounds)]
    if runs is not None and selection_runs is not None and n_configs == 1:
        search = [int(selection_runs)]
    while sum(search) > MAX_SELECTION_RUNS and max(search) > MIN_PILOT_RUNS:
        search = [max(MIN_PILOT_RUNS, s // 2) for s in search]
    batch, n_batches = confirm_batches(confirm, None if runs is not None else spr)
    return Plan(spr, tuple(int(s) for s in search), int(batch), int(n_batches))


def confirm_batches(confirm: int, seconds_per_run: float | None) -> tuple[int, int]:
    """(runs per batch, batches) of ``confirm`` confirmation runs: batches of about
    :data:`CONFIRM_BATCH_SECONDS` at ``seconds_per_run``, or about 8 when the runs are pinned
    (``None``), equal and summing to the confirmation runs."""
    if seconds_per_run is None:
        batch = min(confirm, MAX_BATCH_RUNS, max(MIN_BATCH_RUNS, math.ceil(confirm / 8)))
    else:
        batch = int(min(MAX_BATCH_RUNS, max(MIN_BATCH_RUNS,
                                            CONFIRM_BATCH_SECONDS / seconds_per_run)))
        batch = min(batch, confirm)
    n_batches = max(1, round(confirm / batch))
    return math.ceil(confirm / n_batches), n_batches


def replan_confirmation(plan: Plan, state: PointState, budget_s: float) -> Plan:
    """The confirmation re-planned at selection time from what the search measured: the
    seconds per release from the pilot batches (many, long: the load the confirmation will
    meet, where the short timing batch can catch a lull), plus the scoring share the timing
    batch measured; the budget left after the timing and the search (at least half of the
    confirmation's planned share, whatever the search overspent)."""
    if state.timing is None or not state.pilots:
        return plan
    pilot_runs = sum(len(r.theta0) for r in state.pilots.values())
    pilot_s = math.fsum(r.seconds for r in state.pilots.values() if math.isfinite(r.seconds))
    t = state.timing
    t_runs = max(len(t.theta0), 1)
    t_score = t.score_seconds if math.isfinite(t.score_seconds) else 0.0
    t_release = max(t.seconds - t_score, 1e-12) / t_runs
    if pilot_runs <= 0 or not (pilot_s > 0 and math.isfinite(t.seconds)):
        return plan
    release = pilot_s / pilot_runs
    spr = release * (1.0 + max(t_score, 0.0) / t_runs / t_release)
    left = max(budget_s - t.seconds - pilot_s, 0.5 * (1 - PILOT_SHARE) * budget_s)
    confirm = int(min(MAX_CONFIRM_RUNS, max(MIN_CONFIRM_RUNS, left / spr)))
    batch, n_batches = confirm_batches(confirm, spr)
    return Plan(plan.seconds_per_run, plan.search_runs, int(batch), int(n_batches))


@dataclass(frozen=True)
class Work:
    """One batch to run: a ``timing``, ``pilot`` or ``confirm`` batch of configuration
    ``config`` (search round ``round``, part ``part``), ``runs`` per side; ``key`` names it in
    the store and seeds its generator."""

    kind: str
    config: int
    round: int
    part: int
    runs: int

    @property
    def key(self) -> str:
        if self.kind == "timing":
            return "timing"
        if self.kind == "pilot":
            return f"pilot/c{self.config}/r{self.round}/b{self.part}"
        return f"confirm/b{self.part}"


@dataclass
class PointState:
    """What is stored of one point: the plan, the batches done (by :attr:`Work.key`), failed
    batch keys, and whether a batch was attempted in this invocation (a failure is retried on
    the next one only)."""

    n_configs: int
    plan: Plan | None = None
    pilots: dict[str, PilotResult] = field(default_factory=dict)
    confirms: dict[str, ConfirmResult] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    timing: PilotResult | None = None
    attempted: set[str] = field(default_factory=set)
    selection: Selection | None = None
    #: The search's decisions so far: per round, the configurations kept and every score.
    rounds: list[tuple[tuple[int, ...], tuple[tuple[int, float], ...]]] = field(
        default_factory=list)


@dataclass(frozen=True)
class Selection:
    """The outcome of the search and the selection: the chosen configuration, the scorers and
    the events fixed for the confirmation (with their predicted bounds), the search record."""

    config: int
    scorers: tuple[Scorer, ...]
    events: tuple[Event, ...]
    predicted: tuple[tuple[float, float], ...]
    search: tuple[tuple[int, tuple[tuple[int, float], ...]], ...]  # (round, ((config, value),))
    selection_runs: int

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "scorers": [sc.to_dict() for sc in self.scorers],
                "events": [e.to_dict() for e in self.events],
                "predicted": [[json_number(a), json_number(b)] for a, b in self.predicted],
                "search": [[r, [[c, json_number(v)] for c, v in sc]] for r, sc in self.search],
                "selection_runs": self.selection_runs}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Selection:
        return cls(int(d["config"]), tuple(Scorer.from_dict(x) for x in d["scorers"]),
                   tuple(Event.from_dict(x) for x in d["events"]),
                   tuple((number(a), number(b)) for a, b in d["predicted"]),
                   tuple((int(r), tuple((int(c), number(v)) for c, v in sc))
                         for r, sc in d["search"]), int(d["selection_runs"]))


def json_number(v: float) -> float | None:
    """A float as JSON metadata holds it: NaN as null, ±inf as ±1.7e308."""
    v = float(v)
    return None if math.isnan(v) else float(np.clip(v, -1.7e308, 1.7e308))


def number(v: Any) -> float:
    """The inverse of :func:`json_number` (±1.7e308 back to ±inf)."""
    if v is None:
        return math.nan
    v = float(v)
    return math.copysign(math.inf, v) if abs(v) >= 1.7e308 else v


def _pilot_parts(runs: int) -> list[int]:
    parts = max(1, math.ceil(runs / MAX_PILOT_BATCH_RUNS))
    base = runs // parts
    return [base + (1 if i < runs - base * parts else 0) for i in range(parts)]


def pilot_work(config: int, round_: int, runs: int) -> list[Work]:
    return [Work("pilot", config, round_, i, r) for i, r in enumerate(_pilot_parts(runs))]


def config_data(state: PointState, config: int, upto_round: int
                ) -> tuple[np.ndarray, np.ndarray, Claims] | None:
    """The pilot releases of ``config`` in rounds ≤ ``upto_round`` (in key order), or ``None``
    when one of its batches failed or is missing."""
    assert state.plan is not None
    t0, t1, claims = [], [], None
    for r in range(upto_round + 1):
        for w in pilot_work(config, r, state.plan.search_runs[r]):
            res = state.pilots.get(w.key)
            if res is None:
                return None
            t0.append(res.theta0)
            t1.append(res.theta1)
            claims = res.claims
    assert claims is not None
    return np.concatenate(t0), np.concatenate(t1), claims


def tightness_of(predicted_eps: float, predicted_mu: float, claims: Claims) -> float:
    """How much of the claim a predicted bound reaches: max(ε/ε_claimed, μ/μ_claimed)."""
    parts = [predicted_eps / claims.epsilon if claims.epsilon > 0 else 0.0]
    if math.isfinite(claims.mu) and claims.mu > 0:
        parts.append(predicted_mu / claims.mu)
    return max(max(parts), 0.0)


@dataclass(frozen=True)
class ScoringContext:
    """What the scores of a configuration need beyond the releases (the pair, the problem, the
    mechanism, the budget): built by the caller, which knows the plugins."""

    problem: Any
    algorithm: Any
    d0: Any
    d1: Any
    direction: np.ndarray
    epsilon: float
    delta: float

    def score(self, scorer: Scorer, thetas: np.ndarray) -> np.ndarray:
        return apply(scorer, thetas, problem=self.problem, algorithm=self.algorithm, d0=self.d0,
                     d1=self.d1, epsilon=self.epsilon, delta=self.delta)

    def has_density(self) -> bool:
        return type(self.algorithm).log_density_ratio is not _base_density()

    def public(self) -> list[Scorer]:
        return public_scorers(self.direction, has_loss=True, has_density=self.has_density())


def _base_density() -> Any:
    from ..core.algorithm import Algorithm

    return Algorithm.log_density_ratio


def _choices(ctx: ScoringContext, x0: np.ndarray, x1: np.ndarray, claims: Claims, *,
             n_confirm: int, alpha_each: float, fitted: bool) -> list[tuple[Scorer, Choice]]:
    """Each scorer's best events on the releases (x0 on D, x1 on D′). Fitted scorers are fitted
    on the first half and choose their events on the second."""
    want_mu = math.isfinite(claims.mu)
    out: list[tuple[Scorer, Choice]] = []
    scorers = ctx.public()
    for i, scorer in enumerate(scorers):
        try:
            s0, s1 = ctx.score(scorer, x0), ctx.score(scorer, x1)
        except (ValueError, ArithmeticError):
            continue  # a score that cannot be computed here proposes nothing
        out += [(scorer, c) for c in select_events(i, s0, s1, n_confirm=n_confirm,
                                                   delta=claims.delta, alpha_each=alpha_each,
                                                   want_mu=want_mu)]
    if fitted and len(x0) >= 2 * MIN_PILOT_RUNS:
        half = len(x0) // 2
        for fit in (fit_logistic, fit_histogram):
            scorer = fit(x0[:half], x1[:half])
            if scorer is None:
                continue
            s0, s1 = ctx.score(scorer, x0[half:]), ctx.score(scorer, x1[half:])
            out += [(scorer, c) for c in select_events(-1, s0, s1, n_confirm=n_confirm,
                                                       delta=claims.delta,
                                                       alpha_each=alpha_each, want_mu=want_mu)]
    return out


def planned_alpha_each(alpha_point: float, claims: Claims) -> float:
    """The interval level the confirmation will use (:data:`EPSILON_EVENTS` events, plus
    :data:`MU_EVENTS` when μ is claimed)."""
    return event_alpha(alpha_point, EPSILON_EVENTS + (MU_EVENTS if math.isfinite(claims.mu)
                                                       else 0))


def criterion(ctx: ScoringContext, x0: np.ndarray, x1: np.ndarray, claims: Claims, *,
              n_confirm: int, alpha_point: float) -> float:
    """A configuration's predicted tightness on its pilot runs (public scores only: cheap, and
    not fitted to few runs)."""
    alpha_each = planned_alpha_each(alpha_point, claims)
    best = 0.0
    for _, c in _choices(ctx, x0, x1, claims, n_confirm=n_confirm, alpha_each=alpha_each,
                         fitted=False):
        best = max(best, tightness_of(c.predicted_epsilon, c.predicted_mu, claims))
    return best


def choose_events(ctx: ScoringContext, x0: np.ndarray, x1: np.ndarray, claims: Claims, *,
                  n_confirm: int, alpha_point: float
                  ) -> tuple[list[Scorer], list[Event], list[tuple[float, float]]]:
    """The scorers and events to confirm: the :data:`EPSILON_EVENTS` best by predicted ε bound
    and, when μ is claimed, the :data:`MU_EVENTS` best by predicted μ bound (distinct events)."""
    alpha_each = planned_alpha_each(alpha_point, claims)
    proposals = _choices(ctx, x0, x1, claims, n_confirm=n_confirm, alpha_each=alpha_each,
                         fitted=True)
    picked: list[tuple[Scorer, Choice]] = []
    ranked_eps = sorted(proposals, key=lambda sc: -sc[1].predicted_epsilon)
    for sc in ranked_eps:
        if len(picked) >= EPSILON_EVENTS:
            break
        if not any(_same(sc, q) for q in picked):
            picked.append(sc)
    if math.isfinite(claims.mu):
        added = 0
        for sc in sorted(proposals, key=lambda sc: -sc[1].predicted_mu):
            if added >= MU_EVENTS:
                break
            if not any(_same(sc, q) for q in picked):
                picked.append(sc)
                added += 1
    scorers: list[Scorer] = []
    events: list[Event] = []
    predicted: list[tuple[float, float]] = []
    for scorer, choice in picked:
        if scorer not in scorers:
            scorers.append(scorer)
        e = choice.event
        events.append(Event(scorers.index(scorer), e.kind, e.lo, e.hi, e.numerator))
        predicted.append((choice.predicted_epsilon, choice.predicted_mu))
    return scorers, events, predicted


def _same(a: tuple[Scorer, Choice], b: tuple[Scorer, Choice]) -> bool:
    ea, eb = a[1].event, b[1].event
    return a[0] == b[0] and (ea.kind, ea.lo, ea.hi, ea.numerator) == (eb.kind, eb.lo, eb.hi,
                                                                       eb.numerator)


class PointAuditor:
    """The decisions of one point (module docstring): what to run next, which configuration and
    events to confirm. ``context(config)`` builds the scoring context of a configuration (the
    caller knows the plugins and the pairs); ``alpha_point`` is the point's level."""

    def __init__(self, n_configs: int, context: Any, *, alpha_point: float, budget_s: float,
                 runs: int | None = None, selection_runs: int | None = None):
        self.n_configs = n_configs
        self.context = context
        self.alpha_point = alpha_point
        self.budget_s = budget_s
        self.runs = runs
        self.selection_runs = selection_runs

    def _plan(self, state: PointState) -> Plan | None:
        if state.plan is None:
            if self.runs is not None:
                state.plan = plan_sizes(self.n_configs, budget_s=self.budget_s,
                                        seconds_per_run=None, runs=self.runs,
                                        selection_runs=self.selection_runs)
            elif state.timing is not None:
                spr = state.timing.seconds / max(len(state.timing.theta0), 1)
                state.plan = plan_sizes(self.n_configs, budget_s=self.budget_s,
                                        seconds_per_run=max(spr, 1e-9))
        return state.plan

    def _runnable(self, state: PointState, todo: list[Work]) -> list[Work]:
        return [w for w in todo if not (w.key in state.failed and w.key in state.attempted)]

    def next_work(self, state: PointState) -> list[Work]:
        """The batches to run next; an empty list when the point is finished (or blocked by
        failures in this invocation)."""
        plan = self._plan(state)
        if plan is None:
            return self._runnable(state, [Work("timing", 0, -1, 0, TIMING_RUNS)])
        alive = list(range(self.n_configs))
        for r, runs in enumerate(plan.search_runs):
            todo = [w for c in alive for w in pilot_work(c, r, runs) if w.key not in state.pilots]
            if todo:
                return self._runnable(state, todo)
            if r >= len(state.rounds):  # decide once; a resume reuses the recorded decision
                scored = tuple((c, self._criterion(state, c, r)) for c in alive)
                keep = _alive_count(self.n_configs, r + 1)
                ranked = sorted((x for x in scored if math.isfinite(x[1])),
                                key=lambda x: (-x[1], x[0]))
                state.rounds.append((tuple(sorted(c for c, _ in ranked[:keep])), scored))
            alive = list(state.rounds[r][0])
            if not alive:
                return []
        if state.selection is None:
            if self.runs is None:
                state.plan = plan = replan_confirmation(plan, state, self.budget_s)
            state.selection = self._select(state, alive[0], len(plan.search_runs) - 1,
                                           tuple((r, sc) for r, (_, sc) in
                                                 enumerate(state.rounds)))
        todo = [Work("confirm", state.selection.config, -1, b, plan.confirm_batch)
                for b in range(plan.confirm_batches) if f"confirm/b{b}" not in state.confirms]
        return self._runnable(state, todo)

    def _criterion(self, state: PointState, config: int, round_: int) -> float:
        data = config_data(state, config, round_)
        if data is None:
            return -math.inf
        x0, x1, claims = data
        assert state.plan is not None
        return criterion(self.context(config), x0, x1, claims,
                         n_confirm=state.plan.confirm_runs, alpha_point=self.alpha_point)

    def _select(self, state: PointState, config: int, last_round: int,
                record: tuple[tuple[int, tuple[tuple[int, float], ...]], ...]) -> Selection:
        data = config_data(state, config, last_round)
        assert data is not None and state.plan is not None
        x0, x1, claims = data
        scorers, events, predicted = choose_events(
            self.context(config), x0, x1, claims, n_confirm=state.plan.confirm_runs,
            alpha_point=self.alpha_point)
        return Selection(config, tuple(scorers), tuple(events), tuple(predicted), record,
                         int(len(x0)))
