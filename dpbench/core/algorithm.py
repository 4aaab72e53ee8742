"""The algorithm (mechanism) contract.

A mechanism plugin declares, as class attributes: ``name``, ``summary``, ``citation``, ``privacy``
(``"pure"`` for ε-DP, ``"approx"`` for (ε, δ)-DP, ``"none"`` for non-private references),
``requires`` (problem properties among ``convex``, ``lipschitz``, ``strongly_convex``, ``smooth``),
keyword ``params`` and a ``version`` that changes whenever its output for a fixed seed changes.

It implements ``run(data, problem, *, epsilon, delta, rng) -> Release`` and ``rate_card()``.
The engine (and the public check harness) call :meth:`Algorithm.release`, which validates the
privacy arguments and applicability, calls ``run``, and checks what came back: a finite estimate
inside C and a ledger that fits in the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..privacy.ledger import PrivacyLedger
from .errors import NotApplicable, UserInputError
from .params import Param, Parametrized
from .problem import Dataset, Problem
from .ratecard import RateCard

PRIVACY_KINDS = ("pure", "approx", "none")
REQUIREMENTS = ("convex", "lipschitz", "strongly_convex", "smooth")


@dataclass
class Release:
    """What a mechanism returns: the private estimate, its counters and the privacy it spent."""

    theta: np.ndarray
    ledger: PrivacyLedger
    grad_queries: int = 0
    func_queries: int = 0
    iterations: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def check_privacy_args(name: str, privacy: str, epsilon: float, delta: float) -> None:
    """Validate (ε, δ) for a mechanism of the given privacy kind; raise ``UserInputError``."""
    if privacy == "none":
        return
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UserInputError(f"{name}: epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise UserInputError(f"{name}: delta must be in [0, 1), got {delta!r}")
    if privacy == "pure" and delta != 0:
        raise UserInputError(
            f"{name} is a pure ε-DP mechanism: delta must be 0, got {delta!r}"
        )
    if privacy == "approx" and delta == 0:
        raise UserInputError(f"{name} is an (ε, δ)-DP mechanism: delta must be in (0, 1), got 0")


class Algorithm(Parametrized):
    """Base class of mechanism plugins; see the module docstring for the contract."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {}
    _plugin_kind: ClassVar[str] = "algorithm"
    #: True when the mechanism clips every per-example gradient to the declared L itself, so its
    #: privacy holds even for records outside the declared data norm (the audit's ``outlier``
    #: canary applies only then; :mod:`dpbench.core.neighbours`).
    clips_gradients: ClassVar[bool] = False
    #: How dpbench's generic tests run this mechanism through :func:`dpbench.testing.check_algorithm`
    #: (:func:`dpbench.testing.check_case`): ``params``, ``problem`` (registry name or
    #: ``{"problem": name, "params": {...}}``), ``p`` and ``skip`` (check name → reason).
    check_settings: ClassVar[dict[str, Any]] = {}

    # --- declarations -------------------------------------------------------------------------
    def requirements(self) -> tuple[str, ...]:
        """Problem properties this configuration needs (may depend on parameters)."""
        return self.requires

    def rate_card(self) -> RateCard | None:
        """The theoretical bound for this configuration (``None`` for references)."""
        return None

    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """The closed-form expected excess (AVERAGE scale) of this configuration on ``data``.

        A reference line for the analysis (``oracle_excess_risk`` in the cube; the report draws it
        and gives empirical/oracle ratios): BST14 spec §4.7's oracle curves O1–O7 in
        :mod:`dpbench.theory.expected_excess`, exact or heuristic as each one's docstring says. NaN (the default)
        when no oracle is known for this problem. It is analysis, never part of a release.
        """
        return math.nan

    def oracle_kind(self, problem: Problem) -> str:
        """What :meth:`oracle_excess` is on ``problem``: ``"exact"`` (the expected excess itself:
        the analysis checks empirical/oracle ≈ 1 two-sided), ``"upper_bound"`` (checked one-sided:
        empirical/oracle ≤ 1), ``"heuristic"`` (reported, never enforced), or ``""`` (no oracle).
        Override together with :meth:`oracle_excess`; see docs/analysis.md, "Levels"."""
        return ""

    def cost(self, n: int, p: int) -> float:
        """Rough work estimate of one run, in per-example gradient evaluations (for packing)."""
        return float(n * p)

    def not_applicable_reason(self, problem: Problem) -> str | None:
        """Why this configuration cannot run on ``problem``, or ``None`` when it can."""
        props = problem.properties()
        missing = [r for r in self.requirements() if not props.get(r, False)]
        if missing:
            return (
                f"{self.name} requires {', '.join(missing)}; problem {problem.name!r} has "
                f"L={props['L']:g}, Delta={props['Delta']:g}, beta={props['beta']:g}"
            )
        return None

    # --- running ------------------------------------------------------------------------------
    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        raise NotImplementedError

    def release(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        """Validate, run, and check the release. This is what the engine calls."""
        check_privacy_args(self.name, self.privacy, epsilon, delta)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"{self.name}: rng must be a numpy.random.Generator, got {type(rng)}")
        reason = self.not_applicable_reason(problem)
        if reason:
            raise NotApplicable(reason)
        out = self.run(data, problem, epsilon=epsilon, delta=delta, rng=rng)
        if not isinstance(out, Release):
            raise TypeError(f"{self.name}.run must return a Release, got {type(out).__name__}")
        theta = np.asarray(out.theta, dtype=float)
        if theta.shape != (data.p,):
            raise ValueError(f"{self.name}: estimate has shape {theta.shape}, expected ({data.p},)")
        if not np.all(np.isfinite(theta)):
            raise FloatingPointError(f"{self.name}: estimate is not finite")
        if not problem.constraint.contains(theta, tol=1e-9):
            raise ValueError(f"{self.name}: estimate lies outside the constraint set")
        if self.privacy != "none" and not out.ledger.within(epsilon, delta):
            raise ValueError(
                f"{self.name}: ledger spent (ε={out.ledger.epsilon:g}, δ={out.ledger.delta:g}) "
                f"beyond the budget (ε={epsilon:g}, δ={delta:g})"
            )
        out.theta = theta
        return out
