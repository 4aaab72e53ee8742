"""Running audit batches on a worker: releases on D and D′, kept (pilots) or counted (confirms).

A batch of configuration c of a point uses the generator ``point.batch_rng(c, key)``: with the
mechanism's vectorised path (:meth:`~dpbench.core.algorithm.Algorithm.release_batch`) each side's
releases come from one child of it (child 0 for D, child 1 for D′); with ``run_many``
(:meth:`~dpbench.core.algorithm.Algorithm.release_many`) from one generator spawned per run; with
``run`` alone, from the side's child generator reused run after run (independent draws of one
stream: ``run`` takes all its randomness from the generator it is given, so successive calls are
independent releases). The arguments are validated once per batch and every release is checked
like :meth:`~dpbench.core.algorithm.Algorithm.release` (a finite θ inside C, a ledger within the
budget). A batch is a deterministic function of its generator.

A pilot batch returns its releases; a confirmation batch scores them with the point's fixed
scorers and returns how many fall in each fixed event (:func:`dpbench.audit.events.count_events`),
in chunks of :data:`CHUNK_RUNS` so that memory stays bounded whatever the batch size.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.algorithm import Algorithm
from ..core.errors import NotApplicable
from ..core.grid import GridPoint
from ..core.neighbours import NeighbourPair, canary_not_applicable_reason
from ..core.problem import Dataset, Problem
from ..privacy.ledger import PrivacyLedger
from ..privacy.profile import PROFILE_EPSILONS
from .events import Event, count_events
from .points import AuditPoint
from .procedure import Claims, ConfirmResult, PilotResult, ScoringContext, Work
from .scores import Scorer

__all__ = ["CHUNK_RUNS", "claims_of", "point_pair", "releases", "run_confirm", "run_pilot",
           "scoring_context"]

#: Releases scored at once in a confirmation batch (per side).
CHUNK_RUNS = 100_000

_PAIRS: OrderedDict[str, NeighbourPair] = OrderedDict()
_PAIR_CACHE_SIZE = 64


def point_pair(point: AuditPoint, config: int) -> NeighbourPair:
    """The configuration's neighbouring pair, cached per process (deterministic in its key)."""
    key = point.pair_key(config)
    hit = _PAIRS.get(key)
    if hit is None:
        hit = point.make_pair(config)
        _PAIRS[key] = hit
        if len(_PAIRS) > _PAIR_CACHE_SIZE:
            _PAIRS.popitem(last=False)
    else:
        _PAIRS.move_to_end(key)
    return hit


def claims_of(ledgers: Sequence[PrivacyLedger]) -> Claims:
    """The claims of a batch's ledgers: the largest ε, δ, μ (NaN when some ledger states none),
    certified only when all are, and the weakest claimed profile (they agree unless a ledger
    depends on the data, which would itself leak)."""
    distinct = {(led.epsilon, led.delta, led.gdp_mu, led.certified, led.profile): led
                for led in ledgers}.values()
    eps = max(float(led.epsilon) for led in distinct)
    delta = max(float(led.delta) for led in distinct)
    mus = [led.gdp_mu for led in distinct]
    mu = math.nan if any(m is None for m in mus) else max(float(m) for m in mus)  # type: ignore[arg-type]
    profile = np.max([led.claimed_profile.delta_at(PROFILE_EPSILONS) for led in distinct], axis=0)
    return Claims(eps, delta, mu, all(bool(led.certified) for led in distinct),
                  tuple(float(x) for x in profile))


def releases(algorithm: Algorithm, problem: Problem, data: Dataset, *, epsilon: float,
             delta: float, rng: np.random.Generator, runs: int
             ) -> tuple[np.ndarray, list[PrivacyLedger]]:
    """``runs`` releases (rows) on ``data`` and their ledgers, by the fastest path the mechanism
    has (module docstring)."""
    if type(algorithm)._has_batch_path():
        out = algorithm.release_batch(data, problem, epsilon=epsilon, delta=delta, rng=rng,
                                      size=runs)
        if out is not None:
            return np.asarray(out.thetas, dtype=np.float64), [out.ledger]
    if type(algorithm)._has_fast_path():
        rel = algorithm.release_many(data, problem, epsilon=epsilon, delta=delta,
                                     rngs=rng.spawn(runs))
        return np.stack([r.theta for r in rel]), [r.ledger for r in rel]
    algorithm._check_call(problem, epsilon, delta, (rng,))
    thetas = np.empty((runs, data.p))
    ledgers: list[PrivacyLedger] = []
    for i in range(runs):
        out = algorithm._checked(algorithm.run(data, problem, epsilon=epsilon, delta=delta,
                                               rng=rng), data, problem, epsilon, delta, "run")
        thetas[i] = out.theta
        if not ledgers or out.ledger != ledgers[-1]:
            ledgers.append(out.ledger)
    return thetas, ledgers


@dataclass(frozen=True)
class _Setup:
    algorithm: Algorithm
    problem: Problem
    pair: NeighbourPair
    point: GridPoint

    @property
    def epsilon(self) -> float:
        return self.point.epsilon

    @property
    def delta(self) -> float:
        return self.point.delta


def _setup(point: AuditPoint, config: int) -> _Setup:
    c = point.configs[config]
    algorithm = point.algorithm(config)
    reason = canary_not_applicable_reason(algorithm, c.canary)
    if reason is not None:
        raise NotApplicable(reason)
    problem = point.problem()
    return _Setup(algorithm, problem, point_pair(point, config), c.point)


def scoring_context(point: AuditPoint, config: int) -> ScoringContext:
    """What the scores of a configuration need (the client's side of the same pair)."""
    return _context(_setup(point, config))


def _sides(s: _Setup, rng: np.random.Generator, runs: int
           ) -> tuple[np.ndarray, np.ndarray, list[PrivacyLedger]]:
    g0, g1 = rng.spawn(2)
    t0, l0 = releases(s.algorithm, s.problem, s.pair.d0, epsilon=s.epsilon, delta=s.delta,
                      rng=g0, runs=runs)
    t1, l1 = releases(s.algorithm, s.problem, s.pair.d1, epsilon=s.epsilon, delta=s.delta,
                      rng=g1, runs=runs)
    return t0, t1, l0 + l1


#: The timing batch grows fourfold from ``work.runs`` until one size takes this long (or
#: reaches TIMING_MAX_RUNS): a vectorised path's fixed cost must not pass for a per-run cost.
TIMING_SECONDS = 0.3
#: Untimed releases per side before the timing batch.
TIMING_WARMUP_RUNS = 8
TIMING_MAX_RUNS = 1 << 18


def run_pilot(point: AuditPoint, work: Work) -> PilotResult:
    """A pilot batch: ``work.runs`` releases on each side, kept. A timing batch first warms up
    (first calls, caches, imports, and fitting the distinguishers a confirmation would apply:
    fixed costs, not per-run ones), then grows its size until it is long enough to time
    (:data:`TIMING_SECONDS`), scoring its releases as a confirmation does; it returns the last
    size's releases and seconds."""
    import time

    s = _setup(point, work.config)
    rng = point.batch_rng(work.config, work.key)
    runs = work.runs
    scorers: list[Scorer] = []
    if work.kind == "timing":
        w0, w1, _ = _sides(s, np.random.default_rng(0), TIMING_WARMUP_RUNS)
        scorers = _confirmation_scorers(s, w0, w1)
        _score(s, scorers, w0, w1)
    while True:
        t = time.perf_counter()
        t0, t1, ledgers = _sides(s, rng, runs)
        released = time.perf_counter()
        if work.kind == "timing":  # a confirmation also scores every release: time that too
            _score(s, scorers, t0, t1)
        took = time.perf_counter() - t
        if work.kind != "timing" or took >= TIMING_SECONDS or runs >= TIMING_MAX_RUNS:
            return PilotResult(t0, t1, claims_of(ledgers), took,
                               took - (released - t) if work.kind == "timing" else 0.0)
        runs *= 4


def _context(s: _Setup) -> ScoringContext:
    return ScoringContext(s.problem, s.algorithm, s.pair.d0, s.pair.d1,
                          np.asarray(s.pair.direction, dtype=float), s.epsilon, s.delta)


def _confirmation_scorers(s: _Setup, t0: np.ndarray, t1: np.ndarray) -> list[Scorer]:
    """Every public scorer and the distinguishers fitted on (a few) releases: what a
    confirmation may apply."""
    from .scores import fit_histogram, fit_logistic

    scorers = list(_context(s).public())
    for fit in (fit_logistic, fit_histogram):
        fitted = fit(t0[: len(t0) // 2], t1[: len(t1) // 2]) if len(t0) >= 4 else None
        if fitted is not None:
            scorers.append(fitted)
    return scorers


def _score(s: _Setup, scorers: Sequence[Scorer], t0: np.ndarray, t1: np.ndarray) -> None:
    ctx = _context(s)
    for sc in scorers:
        try:
            ctx.score(sc, t0)
            ctx.score(sc, t1)
        except (ValueError, ArithmeticError):
            pass


def run_confirm(point: AuditPoint, work: Work, scorers: Sequence[Scorer],
                events: Sequence[Event]) -> ConfirmResult:
    """A confirmation batch: ``work.runs`` releases on each side, counted in ``events`` (in
    chunks of :data:`CHUNK_RUNS` releases drawn in turn from the side's child generator)."""
    import time

    t = time.perf_counter()
    s = _setup(point, work.config)
    ctx = _context(s)
    g0, g1 = point.batch_rng(work.config, work.key).spawn(2)
    counts = np.zeros((2, len(events)), dtype=np.int64)
    ledgers: list[PrivacyLedger] = []
    left = work.runs
    while left > 0:
        size = min(left, CHUNK_RUNS)
        for side, (data, g) in enumerate(((s.pair.d0, g0), (s.pair.d1, g1))):
            thetas, led = releases(s.algorithm, s.problem, data, epsilon=s.epsilon,
                                   delta=s.delta, rng=g, runs=size)
            scores = [ctx.score(sc, thetas) for sc in scorers]
            counts[side] += count_events(list(events), scores)
            ledgers += led[:1] + led[-1:]
        left -= size
    return ConfirmResult(counts[0], counts[1], int(work.runs), claims_of(ledgers),
                         time.perf_counter() - t)
