"""The algorithm (mechanism) contract.

A mechanism plugin declares, as class attributes: ``name``, ``summary``, ``citation``, ``privacy``
(``"pure"`` for ε-DP, ``"approx"`` for (ε, δ)-DP, ``"none"`` for non-private references),
``requires`` (problem properties among ``convex``, ``lipschitz``, ``strongly_convex``, ``smooth``),
keyword ``params`` and a ``version`` that changes whenever its output for a fixed seed changes.

It implements ``run(data, problem, *, epsilon, delta, rng) -> Release`` and ``rate_card()``.
The engine (and the public check harness) call :meth:`Algorithm.release`, which validates the
privacy arguments and applicability, calls ``run``, and checks what came back: a finite estimate
inside C and a ledger that fits in the budget. A cell calls it with the budget of
:meth:`dpbench.core.grid.GridPoint.for_privacy`: the grid point's (ε, δ), except δ = 0 for a pure ε-DP mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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


@dataclass
class BatchRelease:
    """What the vectorised audit path returns: ``size`` independent estimates (rows of
    ``thetas``, shape (size, p)) released on the same data, and the ledger each of them spent
    (the same for every row: a ledger depends on public quantities only)."""

    thetas: np.ndarray
    ledger: PrivacyLedger


def check_privacy_args(name: str, privacy: str, epsilon: float, delta: float) -> None:
    """Validate the (ε, δ) a mechanism of the given privacy kind is called with; raise
    ``UserInputError`` naming the argument, the rule and the allowed values.

    A mechanism is called with the budget it runs at: a pure ε-DP mechanism with δ = 0 (the engine
    maps every grid δ to 0 for it, :meth:`~dpbench.core.grid.GridPoint.for_privacy`), an (ε, δ)-DP one with δ in (0, 1).
    Non-private references (``"none"``) accept anything: they ignore the budget.
    """
    if privacy == "none":
        return
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UserInputError(f"{name}: epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise UserInputError(f"{name}: delta must be in [0, 1), got {delta!r}")
    if privacy == "pure" and delta != 0:
        raise UserInputError(
            f"{name} is a pure ε-DP mechanism: it runs at delta = 0, got delta={delta!r}; "
            "allowed: delta = 0 (in a suite a pure mechanism may sit at any grid delta: the "
            "engine runs it at delta = 0, since ε-DP implies (ε, δ)-DP for every δ ≥ 0)")
    if privacy == "approx" and delta == 0:
        raise UserInputError(
            f"{name} is an (ε, δ)-DP mechanism: delta must be in (0, 1), got delta=0 (an "
            "(ε, δ) guarantee with δ = 0 would be a pure ε-DP claim the mechanism does not make)")


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
    #: True when the mechanism maps every record into the problem's universe itself (clips the
    #: features to the data norm, the box, …) before using it, so its privacy holds for records
    #: outside the universe too (the ``outlier`` canary applies, like with ``clips_gradients``).
    clips_records: ClassVar[bool] = False
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
        and gives empirical/oracle ratios): the oracle curves O1–O7 of docs/bst14.md in
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

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """The public quantities this configuration calibrates at a grid point, by name (a noise
        multiplier, an inverse temperature, a number of steps): computed from declared
        constants, n, p, ε and δ only — no data — exactly as :meth:`run` computes them.

        A suite's derived expected exponents (``derived:`` in ``expect:``, docs/analysis.md,
        "Derived exponents") name these quantities, so an expectation follows the mechanism's
        calibration when it changes. ``delta`` is the one the mechanism runs at (0 for a pure
        ε-DP mechanism). Default: none.
        """
        return {}

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

    # --- the output law (optional; the privacy audit uses what is declared) --------------------
    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_{D}(θ) − log p_{D′}(θ) of this mechanism's output law at each row of ``thetas``
        for the neighbours ``d0`` = D and ``d1`` = D′, or ``None`` (the default: not declared).

        Optional, and used by the privacy audit only (docs/audit.md, "Scores"): thresholds of
        the exact log-likelihood ratio are the Neyman–Pearson most powerful events, so a
        mechanism that declares it is audited with the strongest test there is. It must be the
        ratio of the law :meth:`run` samples (computed from public quantities and the two
        datasets: the auditor knows both), with the same conventions for point masses: rows
        where only one side has mass give ±inf. A wrong ratio cannot make the audit flag a
        correct mechanism (it only chooses which events are tested; the bounds hold for any
        event), but it can make it weaker.
        """
        return None

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of this mechanism's output on the pair (``d0``, ``d1``): the smallest ε
        with P[M(D) ∈ E] ≤ e^ε·P[M(D′) ∈ E] + δ for every event E, both ways (a closed form or a
        numerical integration of the two output laws), or ``None`` when it is not computable
        (the default). The audit report gives it beside the empirical lower bound on the
        mechanism's designated instance, so that the reader sees how much of the true privacy
        loss the audit reached and how loose the claim is (docs/audit.md, "Designated
        instances")."""
        return None

    # --- running ------------------------------------------------------------------------------
    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        raise NotImplementedError

    def run_many(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rngs: Sequence[np.random.Generator],
    ) -> Sequence[Release] | None:
        """Optional fast path for many independent runs on the same data (the privacy audit).

        Return one :class:`Release` per generator, release ``i`` **equal** to what
        :meth:`run` returns with ``rngs[i]`` (so a mechanism can do the data-dependent but
        noise-free work, e.g. solving for θ*, once and draw each run's noise from its own
        generator), or ``None`` (the default: :meth:`release_many` loops over :meth:`run`).
        ``dpbench.testing.check_algorithm`` checks the equality. Never called directly: the
        engine calls :meth:`release_many`, which checks every release like :meth:`release`.
        A subclass that overrides :meth:`run` below the class defining ``run_many`` does not
        inherit the fast path (it would bypass the new ``run``): it is looped until it defines
        its own.
        """
        return None

    @classmethod
    def _defined_at_or_below_run(cls, method: str) -> bool:
        """Whether ``method`` is overridden at or below the class that defines ``run`` (a fast
        path written for one ``run`` must not serve a subclass that replaced it)."""
        owner = next(k for k in cls.__mro__ if method in vars(k))
        run = next(k for k in cls.__mro__ if "run" in vars(k))
        return owner is not Algorithm and issubclass(owner, run)

    @classmethod
    def _has_fast_path(cls) -> bool:
        """Whether ``run_many`` is defined at or below the class that defines ``run``."""
        return cls._defined_at_or_below_run("run_many")

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """Optional vectorised path for the privacy audit: ``size`` independent releases on the
        same data, every random draw taken from the one generator ``rng``.

        Contract (docs/plugins.md, 'Fast paths for audits'): each row of ``thetas`` has exactly
        the law of :meth:`run`'s θ, the rows are independent, and the ledger is the one
        :meth:`run` returns. Unlike :meth:`run_many` the rows are not equal to any particular
        :meth:`run` call (one generator feeds them all), so the harness checks the law
        (``dpbench.testing.check_release_batch``: same ledger, a two-sample test of the laws,
        determinism given the generator). Return ``None`` (the default) to use
        :meth:`release_many`. Never called directly: the audit calls :meth:`release_batch`,
        which gives the rows the checks of :meth:`release`. As for ``run_many``, a subclass that
        overrides :meth:`run` below the class defining ``run_batch`` does not inherit it.
        """
        return None

    @classmethod
    def _has_batch_path(cls) -> bool:
        """Whether ``run_batch`` is defined at or below the class that defines ``run``."""
        return cls._defined_at_or_below_run("run_batch")

    def release_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """:meth:`run_batch` validated like :meth:`release` (arguments, applicability, every
        row finite and inside C, the ledger within the budget); ``None`` when the mechanism has
        no vectorised path (the caller then uses :meth:`release_many`)."""
        if not (isinstance(size, (int, np.integer)) and size >= 1):
            raise ValueError(f"size must be an integer >= 1, got {size!r}")
        self._check_call(problem, epsilon, delta, (rng,))
        if not self._has_batch_path():
            return None
        out = self.run_batch(data, problem, epsilon=epsilon, delta=delta, rng=rng, size=int(size))
        if out is None:
            return None
        if not isinstance(out, BatchRelease):
            raise TypeError(f"{self.name}.run_batch must return a BatchRelease or None, got "
                            f"{type(out).__name__}")
        thetas = np.asarray(out.thetas, dtype=float)
        if thetas.shape != (int(size), data.p):
            raise ValueError(f"{self.name}.run_batch: estimates have shape {thetas.shape}, "
                             f"expected ({int(size)}, {data.p})")
        if not np.all(np.isfinite(thetas)):
            raise FloatingPointError(f"{self.name}.run_batch: an estimate is not finite")
        inside = np.asarray(problem.constraint.contains(thetas, tol=1e-9), dtype=bool)
        if not np.all(inside):
            raise ValueError(f"{self.name}.run_batch: {int((~inside).sum())} estimate(s) lie "
                             "outside the constraint set")
        self._check_ledger(out.ledger, epsilon, delta)
        return BatchRelease(thetas, out.ledger)

    def _check_ledger(self, ledger: PrivacyLedger, epsilon: float, delta: float) -> None:
        if self.privacy != "none" and not ledger.within(epsilon, delta):
            raise ValueError(
                f"{self.name}: ledger spent (ε={ledger.epsilon:g}, δ={ledger.delta:g}) "
                f"beyond the budget (ε={epsilon:g}, δ={delta:g})"
            )

    def _check_call(self, problem: Problem, epsilon: float, delta: float,
                    rngs: Sequence[object]) -> None:
        check_privacy_args(self.name, self.privacy, epsilon, delta)
        for rng in rngs:
            if not isinstance(rng, np.random.Generator):
                raise TypeError(f"{self.name}: rng must be a numpy.random.Generator, got "
                                f"{type(rng)}")
        reason = self.not_applicable_reason(problem)
        if reason:
            raise NotApplicable(reason)

    def release(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        """Validate, run, and check the release. This is what the engine calls."""
        self._check_call(problem, epsilon, delta, (rng,))
        out = self.run(data, problem, epsilon=epsilon, delta=delta, rng=rng)
        return self._checked(out, data, problem, epsilon, delta, "run")

    def release_many(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rngs: Sequence[np.random.Generator],
    ) -> list[Release]:
        """:meth:`release` once per generator, through :meth:`run_many` when the mechanism has
        it; every release gets the checks of :meth:`release`. This is what the audit calls."""
        self._check_call(problem, epsilon, delta, rngs)
        many = None
        if self._has_fast_path():
            many = self.run_many(data, problem, epsilon=epsilon, delta=delta, rngs=rngs)
        if many is None:
            return [self._checked(self.run(data, problem, epsilon=epsilon, delta=delta, rng=g),
                                  data, problem, epsilon, delta, "run") for g in rngs]
        many = list(many)
        if len(many) != len(rngs):
            raise ValueError(f"{self.name}.run_many returned {len(many)} releases for "
                             f"{len(rngs)} generators")
        return [self._checked(out, data, problem, epsilon, delta, "run_many") for out in many]

    def _checked(self, out: object, data: Dataset, problem: Problem, epsilon: float,
                 delta: float, method: str) -> Release:
        """The checks every release gets: a finite θ of shape (p,) inside C, and a ledger
        within the budget."""
        if not isinstance(out, Release):
            raise TypeError(f"{self.name}.{method} must return a Release, got "
                            f"{type(out).__name__}")
        theta = np.asarray(out.theta, dtype=float)
        if theta.shape != (data.p,):
            raise ValueError(f"{self.name}: estimate has shape {theta.shape}, expected ({data.p},)")
        if not np.all(np.isfinite(theta)):
            raise FloatingPointError(f"{self.name}: estimate is not finite")
        if not problem.constraint.contains(theta, tol=1e-9):
            raise ValueError(f"{self.name}: estimate lies outside the constraint set")
        self._check_ledger(out.ledger, epsilon, delta)
        out.theta = theta
        return out
