"""B3: regularised output perturbation for Lipschitz, non-smooth losses ([derived]; R12). Not in
BST14; a "previous-work-style" ε-DP baseline, derived in docs/bst14.md, "Derived constants".

1. Add a ridge (Λ/2)‖θ‖² to every example (a ridge on the average objective is per-example Δ = Λ; on
   the sum it would be Λ/n), building the problem with ``ridge`` raised by Λ; the folded constants
   are L′ = L + ΛR and Δ′ = ridge₀ + Λ (the problem's own constants after the change,
   R = radius = ‖C‖/2).
2. Run BST14 Algorithm 3 standalone (:class:`OutputPerturbation`, Gamma-norm noise of scale
   sensitivity/ε with sensitivity 2L′/(nΔ′) plus its solver-gap inflation) on that problem.

**Choice of Λ, with the scale conversion.** On the sum scale the regularised objective is
Σᵢℓ(θ; dᵢ) + n(Λ/2)‖θ‖², so the bias on the original objective is ≤ nΛR²/2, and the non-smooth
output-perturbation excess is ≤ nL′·E‖b‖ = nL′·p·2L′/(nΛε) ≈ 2pL²/(Λε) (BST14 Algorithm 3 on a
non-smooth loss). Balancing nR²/2 = 2pL²/(Λ²ε) gives the per-example (average-scale)
Λ = 2L·√(p/(nε))/R, and sum-scale excess ≈ 2·nΛR²/2 = 2LR√(pn/ε) = L‖C‖√(pn/ε) (R12), i.e.
``L*D*sqrt(p/(n*epsilon))`` on the average scale. ``lambda_scale`` multiplies Λ. The excess is
measured on the ORIGINAL problem (the engine evaluates the release on the problem it was given).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..privacy.projected import ProjectedNoise
from .output_perturbation import OutputPerturbation

__all__ = ["RegularizedOutputPerturbation", "regularized_problem"]


def regularized_problem(problem: Problem, extra_ridge: float) -> Problem:
    """The same problem with its ``ridge`` parameter raised by ``extra_ridge`` (per example)."""
    params = problem.get_params()
    return type(problem)(**{**params, "ridge": float(params["ridge"]) + extra_ridge})


class RegularizedOutputPerturbation(Algorithm):
    """Ridge Λ = 2L√(p/(nε))/R per example, then BST14 Alg. 3 ([derived], docs/bst14.md)."""

    name: ClassVar[str] = "regularized_output_perturbation"
    summary: ClassVar[str] = ("Ridge-regularised ERM plus Gamma-norm output noise for non-smooth "
                              "Lipschitz losses (derived baseline, docs/bst14.md)")
    citation: ClassVar[str] = ("[derived] baseline, docs/bst14.md 'Derived constants'; Chaudhuri, "
                               "Monteleoni, Sarwate (JMLR 2011); Bassily, Smith, Thakurta (FOCS "
                               "2014), Algorithm 3")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness (needs a problem with a 'ridge' parameter; the 1-median is R12's instance).
    check_settings: ClassVar[dict[str, Any]] = {"problem": "median"}
    params: ClassVar[dict[str, Param]] = {
        "lambda_scale": Param(1.0, low=0.0, low_open=True,
                              doc="multiplier c on the ridge Λ = c·2L√(p/(nε))/R"),
        "solver_gap": Param(1e-10, low=0.0, low_open=True,
                            doc="public bound on the inner solver's certified gap (average "
                                "scale); passed to output_perturbation"),
    }

    lambda_scale: float
    solver_gap: float

    def not_applicable_reason(self, problem: Problem) -> str | None:
        if "ridge" not in problem.params:
            return (f"{self.name} adds a ridge through the problem's 'ridge' parameter; problem "
                    f"{problem.name!r} has none")
        return super().not_applicable_reason(problem)

    def cost(self, n: int, p: int) -> float:
        return 20.0 * n * p

    def rate_card(self) -> RateCard:
        """R12 on the average scale: sum-scale L‖C‖√(pn/ε) divided by n."""
        return RateCard(
            expression="L*D*sqrt(p/(n*epsilon))",
            exponents={"n": -0.5, "p": 0.5, "epsilon": -0.5},
            citation="R12 [derived] (docs/bst14.md): bias nΛR²/2 + noise 2pL²/(Λε), optimised Λ",
            regime="Lipschitz, non-smooth convex losses with a ridge parameter",
            notes=("L is the problem's declared L before the extra ridge; the folded "
                   "L′ = L + ΛR → L as n grows. Constant 1 (balanced terms give exactly "
                   "L‖C‖√(pn/ε) on the sum scale when L′ ≈ L)."))

    def ridge_for(self, problem: Problem, n: int, p: int, epsilon: float) -> float:
        """Λ = c·2L√(p/(nε))/R per example (average scale), R = diameter/2."""
        radius = float(problem.constraint.diameter) / 2.0
        return self.lambda_scale * 2.0 * float(problem.lipschitz) * math.sqrt(
            p / (n * epsilon)) / radius

    def folded(self, problem: Problem, n: int, p: int,
               epsilon: float) -> tuple[float, Problem, OutputPerturbation]:
        """Λ, the problem with its ridge raised by Λ, and the inner BST14 Alg. 3 (all public)."""
        lam = self.ridge_for(problem, n, p, epsilon)
        try:
            folded = regularized_problem(problem, lam)
        except (TypeError, ValueError) as exc:
            raise NotApplicable(f"{self.name}: cannot raise the ridge of {problem.name!r}: {exc}")
        return lam, folded, OutputPerturbation(solver_gap=self.solver_gap)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        lam, folded, inner = self.folded(problem, data.n, data.p, epsilon)
        out = inner.run(data, folded, epsilon=epsilon, delta=0.0, rng=rng)
        return _wrapped(out, lam, folded, inner, data.n)

    def run_many(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                 rngs: Sequence[np.random.Generator]) -> list[Release]:
        """:meth:`run` for every generator with one solve of the folded problem (the inner
        :meth:`OutputPerturbation.run_many`, release i equal to :meth:`run` with ``rngs[i]``)."""
        lam, folded, inner = self.folded(problem, data.n, data.p, epsilon)
        outs = inner.run_many(data, folded, epsilon=epsilon, delta=0.0, rngs=rngs)
        return [_wrapped(out, lam, folded, inner, data.n) for out in outs]

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """``size`` releases of :meth:`run`: the inner output perturbation's vectorised path on
        the folded problem (one certified solve, then all rows' Gamma-norm noise at once; exact,
        :meth:`OutputPerturbation.run_batch`), validated by its ``release_batch``. ``None`` only
        if the inner mechanism has no vectorised path."""
        _, folded, inner = self.folded(problem, data.n, data.p, epsilon)
        return inner.release_batch(data, folded, epsilon=epsilon, delta=0.0, rng=rng, size=size)

    def output_law(self, data: Dataset, problem: Problem, *, epsilon: float,
                   delta: float = 0.0) -> ProjectedNoise | None:
        """The law of :meth:`run`'s θ: the inner output perturbation's on the folded problem
        (:meth:`OutputPerturbation.output_law`)."""
        _, folded, inner = self.folded(problem, data.n, data.p, epsilon)
        return inner.output_law(data, folded, epsilon=epsilon, delta=delta)

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the released law: :meth:`run` is the inner output perturbation on
        the folded problem (public Λ, so the same folded problem on D and D′), so this is
        :meth:`OutputPerturbation.exact_epsilon` there: ‖θ̂*_Λ(D) − θ̂*_Λ(D′)‖/s for δ = 0
        (any p), the closed form of :mod:`dpbench.privacy.projected` for δ > 0 and p = 1, with
        θ̂*_Λ the folded problem's certified minimisers and s = 2L′/(nΔ′)/ε (plus the solver-gap
        term) the folded calibration."""
        _, folded, inner = self.folded(problem, d0.n, d0.p, epsilon)
        return inner.exact_epsilon(d0, d1, folded, epsilon=epsilon, delta=delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """The inner output perturbation's log-density ratio on the folded problem
        (:meth:`OutputPerturbation.log_density_ratio`)."""
        _, folded, inner = self.folded(problem, d0.n, d0.p, epsilon)
        return inner.log_density_ratio(thetas, d0, d1, folded, epsilon=epsilon, delta=delta)


def _wrapped(out: Release, lam: float, folded: Problem, inner: OutputPerturbation,
             n: int) -> Release:
    """The inner release with the folded constants added to its info."""
    L_f, Delta_f = float(folded.lipschitz), float(folded.strong_convexity)
    info: dict[str, Any] = {**out.info, "lambda": lam, "L_folded": L_f, "Delta_folded": Delta_f,
                            "sensitivity": inner.sensitivity(n, L_f, Delta_f)}
    return Release(theta=out.theta, ledger=out.ledger, grad_queries=out.grad_queries,
                   func_queries=out.func_queries, iterations=out.iterations, info=info)
