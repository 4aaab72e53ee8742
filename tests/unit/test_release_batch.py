"""The vectorised audit path ``run_batch``: validated like ``release``, checked in law by the
harness, used by the audit, and the default budget it buys (docs/plugins.md, 'Fast paths for
audits'; docs/audit.md, 'Budget')."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from dpbench.algorithms.output_perturbation import OutputPerturbation
from dpbench.audit.runs import run_audit_batch
from dpbench.config.audit import LOOPED_RUNS, VECTORISED_BATCH, VECTORISED_RUNS
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
    pair = neighbouring_pair(prob, 10, 2, "sphere", np.random.default_rng(0))
    a = run_audit_batch(alg, prob, pair, epsilon=1.0, delta=0.0, runs=500,
                        rng=np.random.default_rng(7))
    b = run_audit_batch(alg, prob, pair, epsilon=1.0, delta=0.0, runs=500,
                        rng=np.random.default_rng(7))
    assert np.array_equal(a.scores0, b.scores0) and np.array_equal(a.scores1, b.scores1)
    # the rows are the batch path's: D's side is child 0 of the batch generator
    c0, _ = np.random.default_rng(7).spawn(2)
    batch = alg.release_batch(pair.d0, prob, epsilon=1.0, delta=0.0, rng=c0, size=500)
    assert np.array_equal(a.scores0, batch.thetas @ pair.direction)
    assert a.profile_delta.shape == (201,) and a.epsilon_claimed == 1.0


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


def test_the_default_budget_follows_the_mechanisms_paths() -> None:
    vec = parse_suite(_suite("[{algorithm: output_perturbation}]")).audits[0]
    assert (vec.runs, vec.batch) == (VECTORISED_RUNS, VECTORISED_BATCH)
    looped = parse_suite(_suite("[{algorithm: output_perturbation}, {algorithm: exp_mech}]"))
    assert looped.audits[0].runs == LOOPED_RUNS
    explicit = parse_suite(_suite("[{algorithm: output_perturbation}]",
                                  "audit: {runs: 4000, batch: 1000}")).audits[0]
    assert (explicit.runs, explicit.batch) == (4000, 1000)


def test_an_entry_sets_its_own_batch_and_a_global_batch_keeps_the_vectorised_default() -> None:
    text = _suite("[{algorithm: output_perturbation}]", "audit: {batch: 500}")
    a = parse_suite(text).audits[0]
    assert (a.runs, a.batch) == (VECTORISED_RUNS, VECTORISED_BATCH)
    text = _suite("[{algorithm: exp_mech}]", "audit: {batch: 500}")
    assert (parse_suite(text).audits[0].runs, parse_suite(text).audits[0].batch) == (LOOPED_RUNS,
                                                                                      500)
    own = parse_suite(_suite("[{algorithm: output_perturbation}]").replace(
        "    canaries: [sphere]", "    canaries: [sphere]\n    runs: 4000\n    batch: 2000"))
    assert (own.audits[0].runs, own.audits[0].batch) == (4000, 2000)
    from dpbench.core.errors import SuiteError

    with pytest.raises(SuiteError, match=r"audits\[0\]\.batch"):
        parse_suite(_suite("[{algorithm: output_perturbation}]").replace(
            "    canaries: [sphere]", "    canaries: [sphere]\n    batch: 3"))


def test_the_vectorised_default_needs_cheap_runs() -> None:
    """noisy_sgd has run_batch, but a run at n = 100 costs T·p = 2·10⁴ gradient evaluations."""
    small = parse_suite(_suite("[{algorithm: noisy_sgd}]").replace(
        "delta: [0.0]", "delta: [1.0e-5]")).audits[0]
    assert small.runs == VECTORISED_RUNS
    large = parse_suite(_suite("[{algorithm: noisy_sgd}]").replace(
        "delta: [0.0]", "delta: [1.0e-5]").replace("n: [10]", "n: [10, 100]")).audits[0]
    assert large.runs == LOOPED_RUNS
