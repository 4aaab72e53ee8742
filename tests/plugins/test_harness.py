"""The public check harness: shipped mechanisms pass it, planted faults are caught."""

from __future__ import annotations

import threading
from typing import ClassVar

import numpy as np
import pytest

from dpbench.algorithms.noisy_sgd import NoisySGD
from dpbench.algorithms.nonprivate import NonPrivateERM
from dpbench.algorithms.objective_perturbation import ObjectivePerturbation
from dpbench.algorithms.output_perturbation import OutputPerturbation
from dpbench.core.algorithm import Algorithm, Release
from dpbench.core.errors import UserInputError
from dpbench.core.params import Param
from dpbench.core.ratecard import RateCard
from dpbench.privacy.ledger import Charge, PrivacyLedger
from dpbench.privacy.noise import gamma_norm_noise
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.testing import (
    ALGORITHM_CHECKS,
    audit_epsilon,
    check_algorithm,
    check_empirical_privacy,
    check_no_global_rng,
    check_picklable,
    check_rate_smoke,
    default_problem,
    parametrize_with_checks,
)


@parametrize_with_checks([  # default configurations run in tests/plugins/test_plugin_harness.py
    NoisySGD(sigma_mode="accountant"),
    NoisySGD(variant="strongly_convex", sigma_mode="accountant"),
    ObjectivePerturbation(noise="gaussian"),
])
def test_shipped_variants_pass(algorithm, problem, check):
    check(algorithm, problem)


# --- a small correct mechanism and planted faults ---------------------------------------------

class SimpleOutputPerturbation(Algorithm):
    """Closed-form ERM plus Gamma-norm noise of scale 2L/(nΔε): ε-DP (BST14 Alg. 3)."""

    name: ClassVar[str] = "simple_output_perturbation"
    summary: ClassVar[str] = "test mechanism"
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "strongly_convex")
    params: ClassVar[dict[str, Param]] = {
        "fault": Param("none", kind="str",
                       choices=("none", "global_rng", "underclaim", "flat_noise")),
    }

    def rate_card(self) -> RateCard:
        return RateCard(expression="2*L**2*p/(n*Delta*epsilon)",
                        exponents={"n": -1, "p": 1, "epsilon": -1}, citation="BST14 Alg. 3")

    def scale(self, n: int, L: float, Delta: float, epsilon: float) -> float:
        if self.fault == "underclaim":       # noise 10x too small for the claimed ε
            return 2.0 * L / (n * Delta * epsilon) / 10.0
        if self.fault == "flat_noise":       # calibrated for n = 50 whatever n is
            return 2.0 * L / (50 * Delta * epsilon)
        return 2.0 * L / (n * Delta * epsilon)

    def noise(self, p: int, scale: float, rng: np.random.Generator) -> np.ndarray:
        if self.fault == "global_rng":
            radius = np.random.gamma(shape=p, scale=scale)
            g = np.random.standard_normal(p)
            return g * (radius / np.linalg.norm(g))
        return gamma_norm_noise(p, scale, rng)

    def run(self, data, problem, *, epsilon, delta, rng) -> Release:
        opt = problem.solve(data)
        s = self.scale(data.n, float(problem.lipschitz), float(problem.strong_convexity), epsilon)
        theta = problem.constraint.project(opt.theta + self.noise(data.p, s, rng))
        ledger = PrivacyLedger.from_charges(Charge("output perturbation", float(epsilon), 0.0))
        return Release(theta=theta, ledger=ledger)


class UnpicklableOutputPerturbation(SimpleOutputPerturbation):
    """Stores a lock and a lambda as attributes: cannot be shipped to dask workers."""

    name: ClassVar[str] = "unpicklable_output_perturbation"
    params: ClassVar[dict[str, Param]] = {}
    fault = "none"

    def __init__(self, **params):
        super().__init__(**params)
        self._lock = threading.Lock()
        self._transform = lambda x: x


CORRECT = SimpleOutputPerturbation()
QUAD = LBQuad()


def test_correct_reference_passes_all_checks():
    check_algorithm(CORRECT, QUAD)


def test_global_rng_is_caught():
    check_no_global_rng(CORRECT, QUAD)
    with pytest.raises(AssertionError, match="injected rng"):
        check_no_global_rng(SimpleOutputPerturbation(fault="global_rng"), QUAD)


def test_underclaimed_epsilon_is_caught():
    check_empirical_privacy(CORRECT, QUAD)
    bad = SimpleOutputPerturbation(fault="underclaim")
    lb, claimed = audit_epsilon(bad, QUAD)
    assert claimed == 1.0 and lb > 2.0, (lb, claimed)
    with pytest.raises(AssertionError, match="empirical privacy audit"):
        check_empirical_privacy(bad, QUAD)


def test_unpicklable_is_caught():
    check_picklable(CORRECT, QUAD)
    with pytest.raises(AssertionError, match="not picklable"):
        check_picklable(UnpicklableOutputPerturbation(), QUAD)


def test_flat_noise_rate_is_caught():
    check_rate_smoke(CORRECT, QUAD)
    with pytest.raises(AssertionError, match="slower"):
        check_rate_smoke(SimpleOutputPerturbation(fault="flat_noise"), QUAD)


# --- API details ------------------------------------------------------------------------------

def test_default_problem():
    assert isinstance(default_problem(OutputPerturbation()), LBQuad)
    assert isinstance(default_problem(NoisySGD(variant="strongly_convex")), LBQuad)
    assert isinstance(default_problem(NoisySGD()), LBLin)
    assert isinstance(default_problem(NonPrivateERM()), LBLin)


def test_check_algorithm_skip_and_names():
    with pytest.raises(UserInputError, match="check_nonexistent"):
        check_algorithm(CORRECT, QUAD, skip=("check_nonexistent",))
    names = [c.__name__ for c in ALGORITHM_CHECKS]
    assert len(names) == 11 and all(n.startswith("check_") for n in names)
    bad = SimpleOutputPerturbation(fault="global_rng")
    with pytest.raises(AssertionError, match="check_no_global_rng"):
        check_algorithm(bad, QUAD, skip=("check_picklable", "check_empirical_privacy",
                                         "check_rate_smoke"))
    check_algorithm(bad, QUAD, skip=("check_no_global_rng", "check_release_many",
                                     "check_picklable", "check_empirical_privacy",
                                     "check_rate_smoke"))


def test_parametrize_ids():
    mark = parametrize_with_checks([OutputPerturbation(), NoisySGD(sigma_mode="accountant")])
    ids = [p.id for p in mark.args[1]]
    assert "OutputPerturbation()-check_picklable" in ids
    assert "NoisySGD(sigma_mode='accountant')-check_rate_smoke" in ids
    assert len(ids) == 2 * len(ALGORITHM_CHECKS)
    mark = parametrize_with_checks([OutputPerturbation()], problems=[LBLin(), LBQuad()])
    ids = [p.id for p in mark.args[1]]
    assert ids[0] == "OutputPerturbation()-lb_quad-check_declarations"  # lb_lin not applicable
    assert len(ids) == len(ALGORITHM_CHECKS)
