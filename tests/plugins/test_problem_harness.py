"""dpbench.testing.check_problem: run on every registered problem, and able to fail."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from dpbench.core import registry
from dpbench.core.problem import Dataset, Optimum
from dpbench.problems.hinge_svm import HingeSVM
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.problems.logistic import Logistic
from dpbench.testing import PROBLEM_CHECKS, check_problem


@pytest.mark.parametrize("name", sorted(registry.available("problems")))
def test_every_registered_problem_passes_the_harness(name: str) -> None:
    check_problem(registry.get_problem(name)())


# --- planted faults: each must be caught by the check that owns it ------------------------------

class LipschitzTooSmall(LBQuad):
    name: ClassVar[str] = "lipschitz_too_small"

    @property
    def lipschitz(self) -> float:
        return 0.5 * float(super().lipschitz)


class ConvexityOverclaimed(LBQuad):
    name: ClassVar[str] = "convexity_overclaimed"

    @property
    def strong_convexity(self) -> float:
        return 3.0 * float(super().strong_convexity)

    @property
    def smoothness(self) -> float:
        return max(float(super().smoothness), self.strong_convexity)


class SmoothnessUnderclaimed(Logistic):
    name: ClassVar[str] = "smoothness_underclaimed"

    @property
    def smoothness(self) -> float:
        return 0.02 * float(super().smoothness)


class WrongOptimum(LBQuad):
    name: ClassVar[str] = "wrong_optimum"

    def solve(self, data: Dataset) -> Optimum:
        theta = np.asarray(self.constraint.center(data.p), dtype=float)
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="planted")


class DataNormTooSmall(LBQuad):
    """Rows of norm 1 declared as bounded by 0.9."""

    name: ClassVar[str] = "data_norm_too_small"

    def data_bounds(self) -> dict[str, float]:
        return {"data_norm": 0.9 * self.data_norm}


class LabelBoundTooSmall(Logistic):
    name: ClassVar[str] = "label_bound_too_small"

    def data_bounds(self) -> dict[str, float]:
        return {**super().data_bounds(), "label_bound": 0.5}


class LabelBoundWithoutLabels(LBLin):
    name: ClassVar[str] = "label_bound_without_labels"

    def data_bounds(self) -> dict[str, float]:
        return {"data_norm": 1.0, "label_bound": 1.0}


class MisspelledBound(LBLin):
    name: ClassVar[str] = "misspelled_bound"

    def data_bounds(self) -> dict[str, float]:
        return {"data_nrom": 1.0}


class NegativeBound(LBLin):
    name: ClassVar[str] = "negative_bound"

    def data_bounds(self) -> dict[str, float]:
        return {"data_norm": -1.0}


@pytest.mark.parametrize("problem, check", [
    (LipschitzTooSmall(), "check_problem_lipschitz"),
    (DataNormTooSmall(), "check_problem_bounds"),
    (LabelBoundTooSmall(), "check_problem_bounds"),
    (LabelBoundWithoutLabels(), "check_problem_bounds"),
    (MisspelledBound(), "check_problem_bounds"),
    (NegativeBound(), "check_problem_bounds"),
    (ConvexityOverclaimed(), "check_problem_convexity"),
    (SmoothnessUnderclaimed(), "check_problem_convexity"),
    (WrongOptimum(), "check_problem_optimum"),
    (HingeSVM(radius=0.5), "check_problem_nonsmooth"),
])
def test_planted_fault_is_caught(problem, check: str) -> None:
    assert check in {c.__name__ for c in PROBLEM_CHECKS}
    with pytest.raises(AssertionError, match=f"^{check} failed"):
        check_problem(problem)


class NoBounds(LBQuad):
    """A third-party problem that declares no data bound: optional, so the harness passes."""

    name: ClassVar[str] = "no_bounds"

    def data_bounds(self) -> dict[str, float]:
        return {}


class ShadowsACoreConstant(LBQuad):
    name: ClassVar[str] = "shadows_a_core_constant"

    def data_bounds(self) -> dict[str, float]:
        return {"L": 0.1}


def test_data_bounds_are_optional_and_never_shadow_the_core_constants() -> None:
    check_problem(NoBounds())
    assert NoBounds().constants() == {"L": 2.0, "D": 2.0, "Delta": 1.0, "beta": 1.0}
    with pytest.raises(ValueError, match="declares 'L', which is one of the core constants"):
        ShadowsACoreConstant().constants()
