"""The vectorised audit path ``run_batch``: validated like ``release``, checked in law by the
harness, used by the audit; the audit's three paths (``run_batch``, ``run_many``, ``run``) and the
budget in seconds they turn into runs (docs/plugins.md, 'Fast paths for audits'; docs/audit.md,
'Budget')."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from dpbench.algorithms.output_perturbation import OutputPerturbation
from dpbench.audit.engine import make_point
from dpbench.audit.procedure import PILOT_SHARE, Work, plan_sizes
from dpbench.audit.runs import releases, run_pilot
from dpbench.config.audit import DEFAULT_BUDGET_S
from dpbench.config.suite import parse_suite
from dpbench.core.algorithm import Algorithm, BatchRelease, Release
from dpbench.core.neighbours import neighbouring_pair
from dpbench.core.problem import Dataset, Problem
from dpbench.privacy.ledger import Charge, PrivacyLedger
from dpbench.problems.lb_quad import LBQuad
from dpbench.testing import check_release_batch


class _Noisy(Algorithm):
    """Releases the projected noisy origin; ``fault`` breaks its run_batch in one way."""

    name: ClassVar[str] = "noisy_origin"
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ()
    fault: ClassVar[str] = ""
    scale: ClassVar[float] = 0.1

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        theta = problem.constraint.project(self.scale * rng.standard_normal(data.p))
        return Release(theta, PrivacyLedger.from_charges(Charge("noise", epsilon)))

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> Any:
        sd = self.scale * (1.25 if self.fault == "law" else 1.0)
        thetas = problem.constraint.project(sd * rng.standard_normal((size, data.p)))
        ledger = PrivacyLedger.from_charges(Charge("noise", 2 * epsilon if self.fault == "budget"
                                                   else epsilon))
        if self.fault == "shape":
            thetas = thetas[:-1]
        if self.fault == "outside":
            thetas = thetas + 1e3
        if self.fault == "nan":
            thetas[0, 0] = np.nan
        if self.fault == "type":
            return [thetas]
        if self.fault == "random":
            thetas = thetas + np.random.default_rng().standard_normal() * 1e-3
        return BatchRelease(thetas, ledger)


def _faulty(fault: str) -> _Noisy:
    return type(f"Noisy_{fault}", (_Noisy,), {"fault": fault})()


def _args() -> tuple[Dataset, Problem]:
    prob = LBQuad()
    return prob.generate(20, 3, np.random.default_rng(0)), prob


@pytest.mark.parametrize(("fault", "error"), [
    ("shape", ValueError), ("outside", ValueError), ("nan", FloatingPointError),
    ("type", TypeError), ("budget", ValueError)])
def test_release_batch_checks_every_row_like_release(fault: str, error: type) -> None:
    data, prob = _args()
    with pytest.raises(error):
        _faulty(fault).release_batch(data, prob, epsilon=1.0, delta=0.0,
                                     rng=np.random.default_rng(1), size=50)


def test_release_batch_validates_arguments_and_size() -> None:
    data, prob = _args()
    with pytest.raises(ValueError, match="size"):
        _Noisy().release_batch(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(1),
                               size=0)
    with pytest.raises(Exception, match="delta"):
        _Noisy().release_batch(data, prob, epsilon=1.0, delta=0.5, rng=np.random.default_rng(1),
                               size=5)


def test_a_subclass_overriding_run_does_not_inherit_the_batch_path() -> None:
    class NewRun(_Noisy):
        def run(self, data, problem, *, epsilon, delta, rng):  # type: ignore[no-untyped-def]
            return super().run(data, problem, epsilon=epsilon, delta=delta, rng=rng)

    assert _Noisy._has_batch_path() and not NewRun._has_batch_path()
    data, prob = _args()
    assert NewRun().release_batch(data, prob, epsilon=1.0, delta=0.0,
                                  rng=np.random.default_rng(1), size=5) is None


@pytest.mark.parametrize("fault", ["law", "budget", "random"])
def test_the_harness_catches_a_batch_path_that_breaks_its_contract(fault: str) -> None:
    with pytest.raises((AssertionError, ValueError)):
        check_release_batch(_faulty(fault), LBQuad())


def test_the_harness_passes_correct_batch_paths() -> None:
    check_release_batch(_Noisy(), LBQuad())
    check_release_batch(OutputPerturbation(), LBQuad())


def test_the_audit_uses_the_batch_path_deterministically() -> None:
    prob, alg = LBQuad(), OutputPerturbation()
    pt = make_point(alg, prob, n=10, p=2, epsilon=1.0, delta=0.0, canary="sphere", runs=500)
    w = Work("pilot", 0, 0, 0, 500)
    a, b = run_pilot(pt, w), run_pilot(pt, w)
    assert np.array_equal(a.theta0, b.theta0) and np.array_equal(a.theta1, b.theta1)
    # the rows are the batch path's: D's side is child 0 of the batch generator
    c0, _ = pt.batch_rng(0, w.key).spawn(2)
    pair = pt.make_pair(0)
    batch = alg.release_batch(pair.d0, prob, epsilon=1.0, delta=0.0, rng=c0, size=500)
    assert np.array_equal(a.theta0, batch.thetas)
    assert len(a.claims.profile_delta) == 201 and a.claims.epsilon == 1.0


class _RunOnly(_Noisy):
    """The same mechanism without its vectorised path (``run`` alone)."""

    run_batch = Algorithm.run_batch  # type: ignore[assignment]


def test_a_run_only_mechanism_is_looped_on_one_stream_and_checked_like_release() -> None:
    prob = LBQuad()
    pair = make_point(_RunOnly(), prob, n=4, p=2, epsilon=1.0, delta=0.0, canary="sphere",
                      runs=10).make_pair(0)
    a, _ = releases(_RunOnly(), prob, pair.d0, epsilon=1.0, delta=0.0,
                    rng=np.random.default_rng(3), runs=200)
    g = np.random.default_rng(3)
    expected = np.stack([_RunOnly().run(pair.d0, prob, epsilon=1.0, delta=0.0, rng=g).theta
                         for _ in range(200)])
    assert np.array_equal(a, expected)  # successive runs of one generator: independent draws
    assert len({tuple(r) for r in a}) == 200
    with pytest.raises(Exception, match="delta"):
        releases(_RunOnly(), prob, pair.d0, epsilon=1.0, delta=0.5,
                 rng=np.random.default_rng(3), runs=2)


def test_the_budget_turns_into_runs_from_the_measured_speed() -> None:
    """A point gets budget_s seconds of worker time: PILOT_SHARE for the search, the rest
    confirms, in batches of a few seconds; pinned runs override it (docs/audit.md, 'Budget')."""
    fast = plan_sizes(1, budget_s=60.0, seconds_per_run=1e-6)
    slow = plan_sizes(1, budget_s=60.0, seconds_per_run=1e-3)
    assert fast.confirm_runs >= 0.99 * (1 - PILOT_SHARE) * 60.0 / 1e-6
    assert slow.confirm_runs == pytest.approx((1 - PILOT_SHARE) * 60.0 / 1e-3, rel=0.02)
    assert sum(slow.search_runs) == pytest.approx(PILOT_SHARE * 60.0 / 1e-3, rel=0.02)
    assert 3.0 <= slow.confirm_batch * 1e-3 <= 5.0  # batches of about CONFIRM_BATCH_SECONDS
    searched = plan_sizes(10, budget_s=60.0, seconds_per_run=1e-4)  # successive halving
    assert len(searched.search_runs) == 5 and searched.search_runs[0] < searched.search_runs[-1]
    pinned = plan_sizes(3, budget_s=60.0, seconds_per_run=None, runs=4000, selection_runs=800)
    assert pinned.confirm_runs == 4000
    default = parse_suite(_suite("[{algorithm: output_perturbation}]")).audits[0]
    assert (default.budget_s, default.runs) == (DEFAULT_BUDGET_S, None)
    own = parse_suite(_suite("[{algorithm: output_perturbation}]", "audit: {budget_s: 5}"))
    assert own.audits[0].budget_s == 5.0


def _suite(algorithms: str, settings: str = "") -> str:
    return f"""
name: budget
root_seed: 1
{settings}
audits:
  - name: a
    algorithms: {algorithms}
    problems: [{{problem: lb_quad}}]
    canaries: [sphere]
    grid: {{n: [10], p: [2], epsilon: [1.0], delta: [0.0]}}
"""
