"""The ``release_many`` contract: the audit's fast path is checked like ``release`` and equals it.

A mechanism may implement ``run_many`` (the data-dependent work once, each run's noise from its
own generator); ``Algorithm.release_many`` applies every check of ``release`` to each release and
``dpbench.testing.check_release_many`` checks that the fast path returns exactly what ``run``
returns per generator (docs/plugins.md, 'Fast path for audits').
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from dpbench.algorithms.output_perturbation import OutputPerturbation
from dpbench.core.algorithm import Algorithm, Release
from dpbench.core.problem import Dataset, Problem
from dpbench.privacy.ledger import Charge, PrivacyLedger
from dpbench.problems.lb_quad import LBQuad
from dpbench.testing import check_release_many


def _data(problem: Problem, n: int = 20, p: int = 3) -> Dataset:
    return problem.generate(n, p, np.random.default_rng(0))


def _rngs(k: int = 4) -> list[np.random.Generator]:
    return [np.random.default_rng(100 + i) for i in range(k)]


def test_output_perturbation_fast_path_equals_run() -> None:
    prob, alg = LBQuad(), OutputPerturbation()
    data = _data(prob)
    many = alg.release_many(data, prob, epsilon=1.0, delta=0.0, rngs=_rngs())
    ones = [alg.release(data, prob, epsilon=1.0, delta=0.0, rng=g) for g in _rngs()]
    assert all(np.array_equal(a.theta, b.theta) for a, b in zip(many, ones))
    check_release_many(alg, prob)


class _Noisy(Algorithm):
    """Releases the projected noisy origin; ``fault`` breaks its run_many in one way."""

    name: ClassVar[str] = "noisy_origin"
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ()
    fault: ClassVar[str] = ""

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        theta = problem.constraint.project(0.1 * rng.standard_normal(data.p))
        return Release(theta, PrivacyLedger.from_charges(Charge("noise", epsilon)))

    def run_many(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                 rngs: Sequence[np.random.Generator]) -> Any:
        out = [self.run(data, problem, epsilon=epsilon, delta=delta, rng=g) for g in rngs]
        if self.fault == "count":
            return out[:-1]
        if self.fault == "outside":
            out[0] = Release(np.full(data.p, 1e3), out[0].ledger)
        if self.fault == "ledger":
            out[1] = Release(out[1].theta, PrivacyLedger.from_charges(Charge("noise", 2 * epsilon)))
        if self.fault == "type":
            out[2] = out[2].theta
        if self.fault == "different":  # a valid release, but not what run gives
            out[0] = Release(problem.constraint.project(np.zeros(data.p)), out[0].ledger)
        return out


@pytest.mark.parametrize("fault, error, message", [
    ("count", ValueError, "returned 3 releases for 4 generators"),
    ("outside", ValueError, "outside the constraint set"),
    ("ledger", ValueError, "beyond the budget"),
    ("type", TypeError, "run_many must return a Release"),
])
def test_every_fast_path_release_gets_the_checks_of_release(fault: str, error: type,
                                                            message: str) -> None:
    alg = type("Faulty", (_Noisy,), {"fault": fault})()
    prob = LBQuad()
    with pytest.raises(error, match=message):
        alg.release_many(_data(prob), prob, epsilon=1.0, delta=0.0, rngs=_rngs())


def test_arguments_are_checked_before_any_run() -> None:
    prob = LBQuad()
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        _Noisy().release_many(_data(prob), prob, epsilon=1.0, delta=0.0, rngs=[0, 1])
    with pytest.raises(Exception, match="delta"):
        _Noisy().release_many(_data(prob), prob, epsilon=1.0, delta=0.1, rngs=_rngs())


def test_the_harness_catches_a_fast_path_that_differs_from_run() -> None:
    check_release_many(_Noisy(), LBQuad())
    with pytest.raises(AssertionError, match="differs from run's"):
        check_release_many(type("Different", (_Noisy,), {"fault": "different"})(), LBQuad())


def test_a_subclass_that_overrides_run_does_not_inherit_the_fast_path() -> None:
    """A broken copy that changes ``run`` only (as the audit's zoo members do) must be audited
    through its own ``run``, not through the parent's ``run_many``."""

    class Louder(OutputPerturbation):
        def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                rng: np.random.Generator) -> Release:
            return super().run(data, problem, epsilon=epsilon, delta=delta, rng=rng)

    class Own(Louder):
        def run_many(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                     rngs: Sequence[np.random.Generator]) -> Any:
            raise AssertionError("own fast path used")

    assert OutputPerturbation._has_fast_path() and not Louder._has_fast_path()
    assert Own._has_fast_path() and not Algorithm._has_fast_path()
    prob = LBQuad()
    calls: list[int] = []
    original = Louder.run

    def counting(self: Louder, *args: Any, **kwargs: Any) -> Release:
        calls.append(1)
        return original(self, *args, **kwargs)

    Louder.run = counting  # type: ignore[method-assign]
    try:
        Louder().release_many(_data(prob), prob, epsilon=1.0, delta=0.0, rngs=_rngs())
    finally:
        Louder.run = original  # type: ignore[method-assign]
    assert len(calls) == 4
    with pytest.raises(AssertionError, match="own fast path"):
        Own().release_many(_data(prob), prob, epsilon=1.0, delta=0.0, rngs=_rngs())
