"""The mechanism checks of the harness: contract, privacy audit, ε → ∞ limit, rate smoke test
(see :mod:`dpbench.testing`)."""


from __future__ import annotations

import math
import pickle
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.algorithm import PRIVACY_KINDS, REQUIREMENTS, Algorithm, Release
from ..core.errors import NotApplicable, UserInputError
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from .problem_checks import _data

_EPS = 1.0
#: The privacy audit's point: the smallest dataset (a record is half of it: leaks of one
#: record and data-dependent branches are most exposed) and the suites' δ.
_AUDIT_N = 2
#: The claim's δ the harness audits an (ε, δ) mechanism at: both are searched (the pilots choose),
#: since a noise-scale bug is far cheaper to see at δ = 1e-3, while a leak of probability q is
#: a violation only at δ < q (docs/audit.md, 'The check harness').
_AUDIT_DELTAS = (1e-5, 1e-3)
_AUDIT_DELTA = _AUDIT_DELTAS[0]
_DELTA_APPROX = 1e-6
#: The dimension p the algorithm checks run in (3 unless a mechanism's ``check_settings`` or
#: :func:`check_algorithm`'s ``p`` says otherwise).
_CHECK_P: ContextVar[int] = ContextVar("dpbench_check_p", default=3)


def _dim() -> int:
    return _CHECK_P.get()


# --- helpers ----------------------------------------------------------------------------------

def default_problem(algorithm: Algorithm) -> Problem:
    """``lb_quad()`` when the configuration requires strong convexity or smoothness, else
    ``lb_lin()`` (both BST14 lower-bound instances with closed-form optima); when the mechanism
    declares the preferred one not applicable (e.g. it needs the ``isotropic_quadratic`` tag),
    the other one if it accepts it."""
    from ..problems.lb_lin import LBLin
    from ..problems.lb_quad import LBQuad

    req = set(algorithm.requirements())
    order = [LBQuad(), LBLin()] if req & {"strongly_convex", "smooth"} else [LBLin(), LBQuad()]
    for prob in order:
        if algorithm.not_applicable_reason(prob) is None:
            return prob
    return order[0]


def _problem(algorithm: Algorithm, problem: Problem | None) -> Problem:
    prob = default_problem(algorithm) if problem is None else problem
    reason = algorithm.not_applicable_reason(prob)
    assert reason is None, f"{_label(algorithm)} cannot run on the check problem: {reason}"
    return prob


def _label(algorithm: Algorithm) -> str:
    return f"{type(algorithm).__name__} ({algorithm.name!r})"


def _budget(algorithm: Algorithm, epsilon: float = _EPS) -> tuple[float, float]:
    """(ε, δ) for a run of this privacy kind."""
    if algorithm.privacy == "approx":
        return epsilon, _DELTA_APPROX
    if algorithm.privacy == "pure":
        return epsilon, 0.0
    return math.inf, 0.0



def _run(algorithm: Algorithm, data: Dataset, problem: Problem, rng: np.random.Generator,
         epsilon: float = _EPS) -> Release:
    eps, delta = _budget(algorithm, epsilon)
    return algorithm.release(data, problem, epsilon=eps, delta=delta, rng=rng)


def _short_repr(algorithm: Algorithm) -> str:
    """``Cls(k=v)`` listing only the parameters that differ from their defaults."""
    args = ", ".join(f"{k}={v!r}" for k, v in algorithm.get_params().items()
                     if k in algorithm.params and v != algorithm.params[k].default)
    return f"{type(algorithm).__name__}({args})"


# --- 1. declarations --------------------------------------------------------------------------

def check_declarations(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """Class attributes are well formed and the rate card evaluates to a finite positive number
    with the problem's constants at n=100, p=3, ε=1, δ=1e-6."""
    who = _label(algorithm)
    name = algorithm.name
    assert isinstance(name, str) and name.isidentifier(), (
        f"{who}: `name` must be a non-empty Python identifier, got {name!r}")
    assert algorithm.privacy in PRIVACY_KINDS, (
        f"{who}: `privacy` must be one of {PRIVACY_KINDS}, got {algorithm.privacy!r}")
    req = tuple(algorithm.requirements())
    unknown = set(req) - set(REQUIREMENTS)
    assert not unknown, f"{who}: unknown requirements {sorted(unknown)}; allowed: {REQUIREMENTS}"
    unknown = set(algorithm.requires) - set(REQUIREMENTS)
    assert not unknown, f"{who}: `requires` has unknown entries {sorted(unknown)}"
    assert isinstance(algorithm.version, str), (
        f"{who}: `version` must be a str, got {type(algorithm.version).__name__}")
    assert isinstance(algorithm.params, dict), f"{who}: `params` must be a dict of Param"
    for key, spec in algorithm.params.items():
        assert isinstance(spec, Param), (
            f"{who}: params[{key!r}] must be a dpbench.core.params.Param, got {type(spec).__name__}")
        try:
            spec.validate(name, key, spec.default)
        except UserInputError as exc:
            raise AssertionError(f"{who}: the default of parameter {key!r} is invalid: {exc}") from exc
    card = algorithm.rate_card()
    if card is None:
        assert algorithm.privacy == "none", (
            f"{who}: rate_card() returned None; only non-private references (privacy='none') "
            "may omit a rate card")
        return
    assert isinstance(card, RateCard), (
        f"{who}: rate_card() must return a dpbench.core.ratecard.RateCard, got {type(card).__name__}")
    prob = _problem(algorithm, problem)
    values = {**prob.constants(), "n": 100, "p": 3, "epsilon": 1.0, "delta": 1e-6}
    try:
        value = float(np.asarray(card.bound(**values)))
    except Exception as exc:  # noqa: BLE001 - report any evaluation error as a failed check
        raise AssertionError(
            f"{who}: rate card {card.expression!r} does not evaluate at {values}: {exc!r}") from exc
    assert math.isfinite(value) and value > 0, (
        f"{who}: rate card {card.expression!r} evaluates to {value!r} at {values}; "
        "expected a finite positive number")


# --- 2. parameter validation ------------------------------------------------------------------

def _expect_user_error(who: str, what: str, call: Callable[[], Any],
                       must_mention: str | None = None) -> None:
    """Assert that ``call()`` raises ``UserInputError`` (naming ``must_mention`` if given)."""
    try:
        call()
    except UserInputError as exc:
        if must_mention is not None:
            assert must_mention in str(exc), (
                f"{who}: the error for {what} must name {must_mention!r}; got {str(exc)!r}")
        return
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{who}: {what} must raise dpbench.core.errors.UserInputError, got "
                             f"{type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"{who}: {what} was accepted")


def check_parameter_validation(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """Unknown keywords and invalid choices raise ``UserInputError``; ``get_params`` round-trips."""
    cls = type(algorithm)
    who = _label(algorithm)
    bogus = "not_a_parameter_xyz"
    _expect_user_error(who, f"unknown keyword {bogus!r}", lambda: cls(**{bogus: 1}), bogus)
    for key, spec in algorithm.params.items():
        if spec.kind == "str" and spec.choices is not None:
            bad = "not_a_valid_choice_xyz"
            _expect_user_error(who, f"{key}={bad!r} (choices are {spec.choices})",
                               lambda key=key, bad=bad: cls(**{key: bad}))
    params = algorithm.get_params()
    assert set(params) == set(algorithm.params), (
        f"{who}: get_params() keys {sorted(params)} differ from declared {sorted(algorithm.params)}")
    clone = cls(**params)
    assert clone.get_params() == params, (
        f"{who}: cls(**get_params()) does not round-trip: {clone.get_params()} != {params}")


# --- 3. privacy arguments ---------------------------------------------------------------------

def check_privacy_arguments(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """``release`` rejects a δ > 0 for pure mechanisms, δ = 0 for approximate ones and ε ≤ 0."""
    if algorithm.privacy == "none":
        return
    prob = _problem(algorithm, problem)
    data = _data(prob, 8, _dim())
    eps, delta = _budget(algorithm)
    cases = [(0.0, delta, "epsilon=0"), (-1.0, delta, "epsilon<0")]
    if algorithm.privacy == "pure":
        cases.append((eps, 1e-6, "delta>0 for a pure mechanism"))
    else:
        cases.append((eps, 0.0, "delta=0 for an approximate mechanism"))
    for e, d, what in cases:
        _expect_user_error(
            _label(algorithm), f"release() with {what} (ε={e}, δ={d})",
            lambda e=e, d=d: algorithm.release(data, prob, epsilon=e, delta=d,
                                               rng=np.random.default_rng(0)))


# --- 4. pickling ------------------------------------------------------------------------------

def check_picklable(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """The instance pickles (the engine ships it to dask workers) and the copy gives identical
    output for the same seed."""
    who = _label(algorithm)
    try:
        clone = pickle.loads(pickle.dumps(algorithm))
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{who} is not picklable: {type(exc).__name__}: {exc}") from exc
    prob = _problem(algorithm, problem)
    data = _data(prob, 50, _dim())
    a = _run(algorithm, data, prob, np.random.default_rng(123)).theta
    b = _run(clone, data, prob, np.random.default_rng(123)).theta
    assert np.array_equal(a, b), f"{who}: the unpickled copy gives a different output ({a} vs {b})"


# --- 5. no global RNG -------------------------------------------------------------------------

def check_no_global_rng(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """All randomness comes from the injected generator: reseeding ``np.random`` and ``random``
    between two runs with the same ``rng`` seed does not change the output; different ``rng``
    seeds change it (private mechanisms only)."""
    who = _label(algorithm)
    prob = _problem(algorithm, problem)
    data = _data(prob, 50, _dim())
    outs = []
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        for glob in (1, 2):
            np.random.seed(glob)
            random.seed(glob)
            outs.append(_run(algorithm, data, prob, np.random.default_rng(7)).theta)
    finally:  # leave the caller's global generators as they were
        np.random.set_state(np_state)
        random.setstate(py_state)
    assert np.array_equal(outs[0], outs[1]), (
        f"{who}: the same rng seed gave different outputs after reseeding np.random/random "
        f"({outs[0]} vs {outs[1]}); draw all randomness from the injected rng")
    if algorithm.privacy != "none":
        other = _run(algorithm, data, prob, np.random.default_rng(8)).theta
        assert not np.array_equal(outs[0], other), (
            f"{who}: different rng seeds gave the identical output {other}; a private mechanism "
            "must use the injected rng")


# --- 6. release and ledger --------------------------------------------------------------------

def check_release_and_ledger(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """The release is finite and inside C and its ledger fits the budget; basic-composition
    totals equal the sum of charges; a private mechanism spends ε > 0."""
    who = _label(algorithm)
    prob = _problem(algorithm, problem)
    data = _data(prob, 50, _dim())
    eps, delta = _budget(algorithm)
    try:
        out = algorithm.release(data, prob, epsilon=eps, delta=delta, rng=np.random.default_rng(0))
    except (ValueError, TypeError, FloatingPointError) as exc:
        raise AssertionError(f"{who}: release() rejected the output: {exc}") from exc
    theta, led = out.theta, out.ledger
    assert np.all(np.isfinite(theta)), f"{who}: estimate is not finite"
    assert prob.constraint.contains(theta, tol=1e-9), f"{who}: estimate lies outside C"
    if algorithm.privacy == "none":
        return
    assert led.within(eps, delta), (
        f"{who}: ledger (ε={led.epsilon}, δ={led.delta}) exceeds the budget (ε={eps}, δ={delta})")
    assert led.epsilon > 0, f"{who}: a private mechanism must record ε > 0, got {led.epsilon}"
    assert led.delta >= 0, f"{who}: ledger δ must be ≥ 0, got {led.delta}"
    assert len(led.charges) > 0, f"{who}: the ledger has no charges"
    if led.accounting == "basic composition":
        s_eps = math.fsum(c.epsilon for c in led.charges)
        s_delta = math.fsum(c.delta for c in led.charges)
        assert math.isclose(led.epsilon, s_eps, rel_tol=1e-9, abs_tol=1e-12) and math.isclose(
            led.delta, s_delta, rel_tol=1e-9, abs_tol=1e-15), (
            f"{who}: basic-composition ledger totals (ε={led.epsilon}, δ={led.delta}) differ from "
            f"the sum of its charges (ε={s_eps}, δ={s_delta})")
    if not all(c.certified for c in led.charges):
        assert not led.certified, (
            f"{who}: the ledger has non-certified charges but claims certified=True")
    assert isinstance(led.certified, bool), f"{who}: ledger.certified must be a bool"


def check_release_many(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """``release_many`` (what the audit calls) gives, release by release, what ``release`` gives
    with the same generators: the ``run_many`` fast path, when the mechanism has one, must equal
    ``run`` (same θ bit for bit, same ledger totals)."""
    who = _label(algorithm)
    prob = _problem(algorithm, problem)
    data = _data(prob, 50, _dim())
    eps, delta = _budget(algorithm, _EPS)
    seeds = (11, 12, 13)
    many = algorithm.release_many(data, prob, epsilon=eps, delta=delta,
                                  rngs=[np.random.default_rng(s) for s in seeds])
    assert len(many) == len(seeds), f"{who}: release_many returned {len(many)} releases for 3"
    fast = type(algorithm)._has_fast_path()
    for s, got in zip(seeds, many):
        one = _run(algorithm, data, prob, np.random.default_rng(s))
        assert np.array_equal(got.theta, one.theta), (
            f"{who}: run_many's release for generator {s} differs from run's ({got.theta} vs "
            f"{one.theta}); run_many must return exactly what run returns per generator"
            if fast else
            f"{who}: two runs with generators in the same state gave different releases "
            f"({got.theta} vs {one.theta}); the release must be a function of the generator")
        assert (got.ledger.epsilon, got.ledger.delta, got.ledger.gdp_mu) == (
            one.ledger.epsilon, one.ledger.delta, one.ledger.gdp_mu), (
            f"{who}: run_many's ledger differs from run's for generator {s}")


#: Runs per side of :func:`check_release_batch`'s two-sample comparison, and its level.
_BATCH_RUNS = 4000
_BATCH_ALPHA = 1e-3


def check_release_batch(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """The vectorised audit path ``run_batch``, when the mechanism has one, keeps its contract:
    a function of the generator (two calls with generators in the same state agree bit for
    bit), the ledger of ``run``, and rows with the law of ``run``'s θ.

    The law is compared on 4000 rows against 4000 releases of ``release_many`` (equal to ``run``
    by :func:`check_release_many`): a two-sample Kolmogorov–Smirnov test on every coordinate
    and on one fixed oblique direction, at a family-wise level of 1e-3 (Bonferroni), so a
    correct mechanism fails it with probability ≤ 1e-3 (the seeds are fixed, so a given
    mechanism passes or fails deterministically). Power, measured on the red team's Gaussian
    mechanism: a noise scale off by 1.25× or a mean shifted by 0.15 standard deviations fails
    it. Mechanisms without ``run_batch`` pass trivially."""
    from scipy.stats import ks_2samp

    if not type(algorithm)._has_batch_path():
        return
    who = _label(algorithm)
    prob = _problem(algorithm, problem)
    data = _data(prob, 50, _dim())
    eps, delta = _budget(algorithm, _EPS)
    first = algorithm.release_batch(data, prob, epsilon=eps, delta=delta,
                                    rng=np.random.default_rng(21), size=_BATCH_RUNS)
    again = algorithm.release_batch(data, prob, epsilon=eps, delta=delta,
                                    rng=np.random.default_rng(21), size=_BATCH_RUNS)
    if first is None:
        return
    assert again is not None and np.array_equal(first.thetas, again.thetas), (
        f"{who}: run_batch with generators in the same state gave different releases; the "
        "rows must be a function of the generator")
    loop = algorithm.release_many(
        data, prob, epsilon=eps, delta=delta,
        rngs=np.random.default_rng(22).spawn(_BATCH_RUNS))
    one = loop[0].ledger
    assert (first.ledger.epsilon, first.ledger.delta, first.ledger.gdp_mu) == (
        one.epsilon, one.delta, one.gdp_mu), (
        f"{who}: run_batch's ledger (ε={first.ledger.epsilon:g}, δ={first.ledger.delta:g}, "
        f"μ={first.ledger.gdp_mu}) differs from run's (ε={one.epsilon:g}, δ={one.delta:g}, "
        f"μ={one.gdp_mu})")
    ref = np.stack([r.theta for r in loop])
    p = data.p
    oblique = np.arange(1.0, p + 1.0) / np.linalg.norm(np.arange(1.0, p + 1.0))
    directions = [*np.eye(p), oblique]
    level = _BATCH_ALPHA / len(directions)
    for k, u in enumerate(directions):
        a, b = first.thetas @ u, ref @ u
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            assert a[0] == b[0], f"{who}: run_batch and run give different point masses"
            continue
        pval = float(ks_2samp(a, b).pvalue)
        what = f"coordinate {k}" if k < p else "an oblique direction"
        assert pval >= level, (
            f"{who}: run_batch's rows do not have run's law along {what} (two-sample KS "
            f"p = {pval:.2g} < {level:.2g}; means {a.mean():.4g} vs {b.mean():.4g}, sds "
            f"{a.std():.4g} vs {b.std():.4g}): run_batch must draw each row exactly as run does")


# --- 7. empirical privacy audit ---------------------------------------------------------------

#: The harness's privacy audit spends this many seconds of worker time by default: the default
#: budget of a ``dpbench audit`` point (docs/audit.md, 'Budget'), so that a plugin author sees the
#: verdict ``dpbench audit`` would give.
_AUDIT_BUDGET: ContextVar[float | None] = ContextVar("dpbench_check_audit_budget", default=None)


@contextmanager
def audit_budget(seconds: float) -> Iterator[None]:
    """Run the harness's privacy audit (:func:`check_empirical_privacy`, :func:`audit_epsilon`)
    with a budget of ``seconds`` of worker time inside this block (default: ``dpbench audit``'s,
    :data:`dpbench.config.audit.DEFAULT_BUDGET_S`)."""
    token = _AUDIT_BUDGET.set(float(seconds))
    try:
        yield
    finally:
        _AUDIT_BUDGET.reset(token)


def _harness_audit(algorithm: Algorithm, problem: Problem | None, *, runs: int | None, n: int,
                   p: int | None, epsilon: float, alpha: float) -> Any:
    from ..audit.engine import audit_in_process
    from ..config.audit import DEFAULT_BUDGET_S

    from ..audit.engine import make_point

    p = _dim() if p is None else p
    prob = _problem(algorithm, problem)
    eps, delta = _budget(algorithm, epsilon)
    search = None
    if delta > 0:
        delta, search = _AUDIT_DELTA, {"delta": list(_AUDIT_DELTAS)}
    budget = _AUDIT_BUDGET.get()
    try:
        pt = make_point(algorithm, prob, n=n, p=p, epsilon=eps, delta=delta, name="harness",
                        budget_s=DEFAULT_BUDGET_S if budget is None else budget, runs=runs,
                        search=search)
    except UserInputError as exc:
        raise AssertionError(f"{_label(algorithm)}: {exc}; audit it on another problem") from None
    [result] = audit_in_process([pt], alpha)
    return result


def privacy_audit(algorithm: Algorithm, problem: Problem | None = None, *,
                  runs: int | None = None, alpha: float = 0.01) -> Any:
    """The whole result of the audit :func:`check_empirical_privacy` runs (a
    :class:`dpbench.audit.engine.PointResult`: ``violation``, ``epsilon_lb``, ``mu_lb``, the
    configuration the search chose, the event, ``runs_completed``, ``seconds``,
    ``resolution``), without asserting anything."""
    return _harness_audit(algorithm, problem, runs=runs, n=_AUDIT_N, p=None, epsilon=_EPS,
                          alpha=alpha)


def audit_epsilon(algorithm: Algorithm, problem: Problem | None = None, *, runs: int | None = None,
                  n: int = 2, p: int | None = None, epsilon: float = _EPS,
                  alpha: float = 0.01) -> tuple[float, float]:
    """Empirical lower bound on the ε the mechanism spends, and the ε its ledger claims.

    Returns ``(epsilon_lower_bound, epsilon_claimed)``; see :func:`check_empirical_privacy`
    (``runs`` pins the confirmation runs per side instead of the time budget).
    """
    result = _harness_audit(algorithm, problem, runs=runs, n=n, p=p, epsilon=epsilon,
                            alpha=alpha)
    return result.epsilon_lb, result.epsilon_claimed


def check_empirical_privacy(algorithm: Algorithm, problem: Problem | None = None, *,
                            runs: int | None = None) -> None:
    """Statistical audit: does the mechanism spend more privacy than its ledger claims?

    The audit ``dpbench audit`` runs by default (docs/audit.md), in this process: one point at
    n = 2 (p of :func:`check_dimension`, ε = 1; when approximate, δ ∈ {1e-5, 1e-3} searched)
    searching every canary that applies to the mechanism and the problem, within the default budget of 60 seconds
    (:func:`audit_budget` sets another; ``runs`` pins the confirmation runs), through the
    mechanism's fastest path (``run_batch``, ``run_many``, else ``run``): pilot runs choose the
    canary and the events (thresholds, intervals and atoms of the projection, of the canary's
    loss difference, of a declared density ratio, of distinguishers fitted on the pilots), fresh
    runs confirm them with Clopper–Pearson bounds, tested against the ledger's (ε, δ), its μ when
    stated and its claimed privacy profile.

    False-alarm bound: a mechanism whose ledger is right fails this check with probability at
    most 0.01, whatever its output law (the audit's level α = 0.01). Power: the failure message and
    :func:`audit_epsilon` give the bound reached; docs/audit.md's red-team table gives what the
    default budget catches (every variant whose true ε is at least twice the claim, without a
    vectorised path, within the minute).
    """
    if algorithm.privacy == "none":
        return
    r = privacy_audit(algorithm, problem, runs=runs)
    assert not r.violation, (
        f"{_label(algorithm)}: empirical privacy audit found ε ≥ {r.epsilon_lb:.3f}, "
        f"μ ≥ {r.mu_lb:.3f} (99% confidence, {r.config}, {r.runs_completed} confirmation runs "
        f"per dataset; event {r.event}) but the ledger claims ε = {r.epsilon_claimed:.3f}; the "
        "mechanism spends more privacy than it records (noise too small, or a wrong "
        "sensitivity)")


# --- 8. ε → ∞ limit ---------------------------------------------------------------------------

def check_epsilon_limit(algorithm: Algorithm, problem: Problem | None = None) -> None:
    """At ε = 1e4 (δ = 1e-6 when approximate), n=50, p=3, the mean excess risk over 4 seeds is at
    most 0.05·L·D: with (almost) no noise the mechanism approaches the non-private optimum.

    A configuration that raises :class:`~dpbench.core.errors.NotApplicable` at ε = 1e4 (it declares it
    cannot run there, e.g. NoisySGD's paper σ outside Thm 2.1's regime ε ≤ 2√log(1/δ)) passes
    untested."""
    if algorithm.privacy == "none":
        return
    from ..core.seeding import data_identity, make_rng
    from ..engine.cells import dataset_and_optimum

    prob = _problem(algorithm, problem)
    consts = prob.constants()
    excess = []
    for seed in range(4):
        did = data_identity(prob.name, prob.identity_params(), 50, _dim(), seed)
        data, opt = dataset_and_optimum(prob, did, 0)
        try:
            out = _run(algorithm, data, prob,
                       make_rng({"check": "epsilon_limit", "seed": seed}, 0), epsilon=1e4)
        except NotApplicable:
            return
        excess.append(prob.risk(out.theta, data) - opt.value)
    mean = float(np.mean(excess))
    limit = 0.05 * consts["L"] * consts["D"]
    assert mean <= limit, (
        f"{_label(algorithm)}: at ε=1e4 the mean excess risk is {mean:.4g} > 0.05·L·D = {limit:.4g}; "
        "the mechanism does not approach the non-private optimum as ε grows")


# --- 9. rate smoke test -----------------------------------------------------------------------

def _default_n_grid(algorithm: Algorithm, p: int) -> tuple[int, ...]:
    # Keep the sweep cheap for mechanisms whose work grows quickly (NoisySGD does n² steps).
    if algorithm.cost(400, p) > 1e5:
        return (25, 50, 100, 200)
    return (50, 100, 200, 400)


def rate_fit(algorithm: Algorithm, problem: Problem | None = None, *,
             n_grid: Sequence[int] | None = None, p: int | None = None, seeds: int = 8,
             tolerance: float = 0.5) -> Any:
    """The :class:`~dpbench.analysis.RateFit` used by :func:`check_rate_smoke`."""
    p = _dim() if p is None else p
    from ..analysis import fit_curve
    from ..core.seeding import data_identity, make_rng, mechanism_identity
    from ..engine.cells import dataset_and_optimum

    prob = _problem(algorithm, problem)
    grid = tuple(n_grid) if n_grid is not None else _default_n_grid(algorithm, p)
    eps, delta = _budget(algorithm)
    samples, gaps = [], []
    for n in grid:
        vals, g = [], 0.0
        for seed in range(seeds):
            did = data_identity(prob.name, prob.identity_params(), n, p, seed)
            data, opt = dataset_and_optimum(prob, did, 0)
            mid = mechanism_identity(algorithm.name, algorithm.identity_params(), did,
                                     {"epsilon": eps, "delta": delta})
            out = algorithm.release(data, prob, epsilon=eps, delta=delta, rng=make_rng(mid, 0))
            vals.append(prob.risk(out.theta, data) - opt.value)
            g = max(g, float(opt.gap))
        samples.append(np.asarray(vals))
        gaps.append(g)
    return fit_curve("check_rate_smoke", algorithm.name, prob.name, "n",
                     {"p": p, "epsilon": eps, "delta": delta}, list(grid), samples, gaps=gaps,
                     card=algorithm.rate_card(), constants=prob.constants(), tolerance=tolerance,
                     rng=0)


def check_rate_smoke(algorithm: Algorithm, problem: Problem | None = None, *,
                     n_grid: Sequence[int] | None = None) -> None:
    """Smoke test of the rate card along n.

    Runs n ∈ {50, 100, 200, 400} (or {25, 50, 100, 200} when ``cost(400, 3) > 1e5``, e.g.
    NoisySGD's n² steps; override with ``n_grid``), p=3, ε=1 (δ=1e-6 when approximate), 8 seeds,
    and fits the slope of log mean excess vs log n against the card with tolerance 0.5. Fails only
    on the verdict "slower": the excess falls significantly slower than the card says, i.e. a wrong
    rate (e.g. noise that does not shrink with n), and on "invalid": a blow-up to the capped regime
    at large n or a non-positive mean excess. "faster", "consistent" and "inconclusive" pass:
    on benign instances (closed-form optima, smooth losses) a mechanism may legitimately beat its
    worst-case card, and 8 seeds on four points may be too few to decide — this is a smoke test,
    not the benchmark. Skipped when there is no rate card (``privacy="none"``).
    """
    if algorithm.rate_card() is None:
        return
    fit = rate_fit(algorithm, problem, n_grid=n_grid)
    used = int(np.sum(fit.used))
    assert fit.verdict != "invalid", (
        f"{_label(algorithm)}: {fit.reason} (n={fit.x}, mean excess="
        f"{[f'{m:.3g}' for m in fit.mean]})")
    slower = fit.verdict == "slower" or (
        used >= 3 and math.isfinite(fit.slope_low) and math.isfinite(fit.predicted_slope)
        and fit.slope_low > fit.predicted_slope + fit.tolerance)
    assert not slower, (
        f"{_label(algorithm)}: excess risk falls slower in n than the rate card "
        f"{fit.rate_expression!r} says: slope CI [{fit.slope_low:.2f}, {fit.slope_high:.2f}] "
        f"vs predicted {fit.predicted_slope:.2f} + tolerance {fit.tolerance} "
        f"({fit.reason}; n={fit.x}, mean excess="
        f"{[f'{m:.3g}' for m in fit.mean]})")


# --- running all checks -----------------------------------------------------------------------

ALGORITHM_CHECKS: tuple[Callable[..., None], ...] = (
    check_declarations,
    check_parameter_validation,
    check_privacy_arguments,
    check_picklable,
    check_no_global_rng,
    check_release_and_ledger,
    check_release_many,
    check_release_batch,
    check_empirical_privacy,
    check_epsilon_limit,
    check_rate_smoke,
)


@contextmanager
def check_dimension(p: int) -> Iterator[None]:
    """Run the algorithm checks in dimension ``p`` (default 3) inside this block."""
    token = _CHECK_P.set(int(p))
    try:
        yield
    finally:
        _CHECK_P.reset(token)


def check_algorithm(algorithm: Algorithm, problem: Problem | None = None,
                    skip: Iterable[str] = (), p: int = 3) -> None:
    """Run every check of :data:`ALGORITHM_CHECKS` (except those named in ``skip``) on the
    mechanism in dimension ``p``; raise the first ``AssertionError``, prefixed with the check's
    name."""
    skip = set(skip)
    unknown = skip - {c.__name__ for c in ALGORITHM_CHECKS}
    if unknown:
        raise UserInputError(f"check_algorithm: unknown checks in skip: {sorted(unknown)}")
    with check_dimension(p):
        for check in ALGORITHM_CHECKS:
            if check.__name__ in skip:
                continue
            try:
                check(algorithm, problem)
            except AssertionError as exc:
                raise AssertionError(f"{check.__name__} failed: {exc}") from exc


@dataclass(frozen=True)
class CheckCase:
    """How the generic plugin tests run one registered mechanism: from its ``check_settings``."""

    name: str
    algorithm: Algorithm
    problem: Problem
    p: int
    skip: dict[str, str]
    rate_smoke_n: tuple[int, ...] | None = None

    def run(self, check: Callable[..., None]) -> None:
        with check_dimension(self.p):
            if check is check_rate_smoke and self.rate_smoke_n:
                check_rate_smoke(self.algorithm, self.problem, n_grid=self.rate_smoke_n)
            else:
                check(self.algorithm, self.problem)


def check_case(cls: type[Algorithm]) -> CheckCase:
    """The :class:`CheckCase` of a mechanism class, from ``cls.check_settings``: ``params``
    (constructor parameters, default none), ``problem`` (a registry name, or a mapping with
    ``problem`` and ``params``; default :func:`default_problem`), ``p`` (default 3) and ``skip``
    (check name → the reason it cannot apply; each must name a check of
    :data:`ALGORITHM_CHECKS` and give a reason) and ``rate_smoke_n`` (the n grid of
    :func:`check_rate_smoke`, for mechanisms whose excess is still near the cap at n ≤ 400)."""
    from ..core import registry

    settings = dict(getattr(cls, "check_settings", {}) or {})
    unknown = set(settings) - {"params", "problem", "p", "skip", "rate_smoke_n"}
    if unknown:
        raise UserInputError(f"{cls.__name__}.check_settings: unknown keys {sorted(unknown)}; "
                             "allowed: params, problem, p, skip, rate_smoke_n")
    algorithm = cls(**dict(settings.get("params", {})))
    spec = settings.get("problem")
    if spec is None:
        problem = default_problem(algorithm)
    else:
        if isinstance(spec, str):
            spec = {"problem": spec}
        problem = registry.get_problem(spec["problem"])(**dict(spec.get("params", {})))
    skip = {str(k): str(v) for k, v in dict(settings.get("skip", {})).items()}
    names = {c.__name__ for c in ALGORITHM_CHECKS}
    bad = [k for k, v in skip.items() if k not in names or not v.strip()]
    if bad:
        raise UserInputError(f"{cls.__name__}.check_settings skip: {bad} must name checks of "
                             "ALGORITHM_CHECKS, each with a reason")
    grid = settings.get("rate_smoke_n")
    return CheckCase(str(cls.name), algorithm, problem, int(settings.get("p", 3)), skip,
                     tuple(int(n) for n in grid) if grid else None)


def parametrize_with_checks(algorithms: Sequence[Algorithm],
                            problems: Sequence[Problem] | None = None) -> Any:
    """A ``pytest.mark.parametrize("algorithm,problem,check", ...)`` over every algorithm, problem
    (the :func:`default_problem` when ``problems`` is None; otherwise each given problem the
    configuration can run on) and check, with ids like ``OutputPerturbation()-check_picklable``."""
    import pytest

    params = []
    for alg in algorithms:
        if problems is None:
            pairs = [(default_problem(alg), None)]
        else:
            pairs = [(pr, pr.name) for pr in problems if alg.not_applicable_reason(pr) is None]
        for prob, pname in pairs:
            for check in ALGORITHM_CHECKS:
                parts = [_short_repr(alg)] + ([pname] if pname else []) + [check.__name__]
                params.append(pytest.param(alg, prob, check, id="-".join(parts)))
    return pytest.mark.parametrize("algorithm,problem,check", params)
