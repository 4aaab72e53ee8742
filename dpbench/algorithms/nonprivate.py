"""The non-private reference: the problem's certified ERM solver."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..core.algorithm import Algorithm, Release
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..privacy.ledger import PrivacyLedger


class NonPrivateERM(Algorithm):
    """Non-private empirical risk minimisation: returns ``problem.solve(data).theta``.

    The reference every private mechanism is compared against: BST14's excess empirical risk is
    measured against θ* = argmin_C of the empirical loss, so the solver's gap must be far below the
    smallest excess measured. Its excess empirical risk (average scale) is at most the solver's
    certified gap ``Optimum.gap``, which is recorded in ``Release.info``. Privacy: none (ε = ∞).
    No rate card.
    """

    name: ClassVar[str] = "nonprivate_erm"
    summary: ClassVar[str] = "Non-private certified ERM solution (reference)"
    citation: ClassVar[str] = "BST14 §1: θ* = argmin over C of the empirical loss"
    privacy: ClassVar[str] = "none"
    requires: ClassVar[tuple[str, ...]] = ("convex",)
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {}

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        opt = problem.solve(data)
        return Release(
            theta=np.array(opt.theta, dtype=float),
            ledger=PrivacyLedger.non_private(),
            iterations=int(opt.iterations),
            info={"gap": float(opt.gap), "method": opt.method, "value": float(opt.value)},
        )
