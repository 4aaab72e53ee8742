"""BST14 Algorithm 3 (𝒜^ε_out-pert) as a standalone ε-DP baseline: output perturbation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.ratecard import RateCard
from ..core.tags import get_tags
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.noise import gamma_norm_noise
from ..core.sets import centred_ball_radius
from ..privacy.projected import ProjectedNoise, projected_epsilon


class SolverGapExceeded(RuntimeError):
    """The solver's certified gap is above the public bound the noise was calibrated for."""


class OutputPerturbation(Algorithm):
    """Output perturbation: Π_C(θ* + b) with Gamma-norm noise b (BST14 Algorithm 3, standalone).

    θ* = argmin_C of the average loss, from ``problem.solve(data)``. On the average scale the
    objective is Δ-strongly convex and replacing one example moves its gradient by at most 2L/n, so
    ‖θ*(D) − θ*(D′)‖ ≤ 2L/(nΔ) (Chaudhuri–Monteleoni–Sarwate 2011; docs/bst14.md, "Derived
    constants"). The noise has density ∝ exp(−‖b‖/s) with s = sensitivity/ε, which gives ε-DP; the
    paper's density exp(−(nΔε/(2L))‖b‖) is the same thing (docs/bst14.md Errata 2: the conference
    version's "αΔε/(2L)" is a typo for nΔε/(2L)).

    Inexact solver ([derived], same docs section). The solver returns θ̂ with certified gap
    F(θ̂) − F(θ*) ≤ gap; Δ-strong convexity of the average objective F gives
    ‖θ̂ − θ*‖ ≤ tol_θ = √(2·gap/Δ), so the sensitivity of θ̂ is at most 2L/(nΔ) + 2·tol_θ. The gap
    actually achieved is data-dependent and must not set the noise: tol_θ is computed from the
    **public** bound ``solver_gap``, and a run whose certified gap exceeds it raises
    :class:`SolverGapExceeded` rather than releasing an under-noised estimate.

    Utility ([derived], R9 in docs/bst14.md; average scale): on non-smooth losses
    E[excess] ≤ L·E‖b‖ = L·p·s = 2L²p/(nΔε) (flat in n on the sum scale); on β-smooth losses
    (R9s) E ≤ (β/2)·E‖b‖² = 2βL²p(p+1)/(n²Δ²ε²).
    """

    name: ClassVar[str] = "output_perturbation"
    summary: ClassVar[str] = "Exact ERM plus Gamma-norm noise, pure ε-DP (BST14 Alg. 3 standalone)"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (FOCS 2014), Algorithm 3; "
                               "Chaudhuri, Monteleoni, Sarwate (JMLR 2011)")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "strongly_convex")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "solver_gap": Param(
            1e-10, kind="float", low=0.0, high=math.inf, high_open=True,
            doc="public bound on the solver's certified gap (average scale); inflates the noise "
                "by 2·√(2·solver_gap/Δ)"),
    }

    def rate_card(self) -> RateCard:
        """R9 on the average scale: the sum-scale 2L²p/(Δε) (flat in n) divided by n."""
        return RateCard(
            expression="2*L**2*p/(n*Delta*epsilon)",
            exponents={"n": -1, "p": 1, "epsilon": -1},
            citation="BST14 Alg. 3 with [derived] (docs/bst14.md): E ≤ L·E‖b‖, E‖b‖ = 2Lp/(nΔε)",
            regime=("non-smooth strongly convex losses (worst case, e.g. KINK-SC); "
                    "the constant 2 is explicit, not hidden"),
            notes=("On β-smooth losses the tighter R9s applies: 2*beta*L**2*p*(p+1)/"
                   "(n**2*Delta**2*epsilon**2) (average scale). Ignores the solver-gap inflation "
                   "2·√(2·solver_gap/Δ) of the sensitivity."),
        )

    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """Oracles of docs/bst14.md: O5 2pL/(nΔε) on KINK-SC (first-order, heuristic),
        O4 2βL²p(p+1)/(n²Δ²ε²) on LB-Quad (exact while the projection is inactive); both with the
        exact-solver noise."""
        from ..theory.expected_excess import outpert_kink, outpert_smooth_quadratic

        n, p = data.n, data.p
        L, Delta = float(problem.lipschitz), float(problem.strong_convexity)
        closed_form = get_tags(problem).closed_form
        if closed_form == "kink_sc":
            return outpert_kink(p, L, Delta, epsilon, n=n, average=True)
        if closed_form == "lb_quad":
            return outpert_smooth_quadratic(n, p, L, Delta, epsilon, float(problem.smoothness),
                                            average=True)
        return math.nan

    def oracle_kind(self, problem: Problem) -> str:
        closed_form = get_tags(problem).closed_form
        if closed_form == "kink_sc":
            return "heuristic"
        return "upper_bound" if closed_form == "lb_quad" else ""

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                   delta: float) -> dict[str, float]:
        """``noise_scale``: the Gamma-norm noise's scale, sensitivity/ε, as :meth:`run` uses it."""
        sens = self.sensitivity(n, float(problem.lipschitz), float(problem.strong_convexity))
        return {"noise_scale": sens / epsilon}

    def sensitivity(self, n: int, L: float, Delta: float) -> float:
        """Replace-one sensitivity of the released minimiser, inexact solver included."""
        return 2.0 * L / (n * Delta) + 2.0 * math.sqrt(2.0 * self.solver_gap / Delta)

    def _minimiser(self, data: Dataset, problem: Problem) -> Optimum:
        opt = problem.solve(data)
        if not opt.gap <= self.solver_gap:
            raise SolverGapExceeded(
                f"{self.name}: the solver certified a gap of {opt.gap:.3g}, above the public bound "
                f"solver_gap={self.solver_gap:.3g} the noise is calibrated for; raise solver_gap")
        return opt

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        return self._perturb(self._minimiser(data, problem), data, problem, epsilon, rng)

    def run_many(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rngs: Sequence[np.random.Generator],
    ) -> list[Release]:
        """:meth:`run` for every generator with one solve (θ* does not depend on the noise)."""
        opt = self._minimiser(data, problem)
        return [self._perturb(opt, data, problem, epsilon, g) for g in rngs]

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease:
        """``size`` releases from one solve and one vectorised draw of the Gamma-norm noise
        (each row has :meth:`run`'s law: θ* is noise-free, the rows' noises are i.i.d.)."""
        opt = self._minimiser(data, problem)
        scale = self.sensitivity(data.n, float(problem.lipschitz),
                                 float(problem.strong_convexity)) / epsilon
        b = gamma_norm_noise(data.p, scale, rng, size=int(size))
        thetas = problem.constraint.project(np.asarray(opt.theta, dtype=float)[None, :] + b)
        return BatchRelease(thetas, self._ledger(epsilon))

    # --- the output law (privacy audit) ------------------------------------------------------
    def output_law(self, data: Dataset, problem: Problem, *, epsilon: float,
                   delta: float = 0.0) -> ProjectedNoise | None:
        """The law of :meth:`run`'s θ on ``data``: Π_C(θ̂* + b), b with density ∝ exp(−‖b‖/s),
        s = sensitivity/ε, θ̂* the certified minimiser :meth:`run` perturbs (the solver is
        deterministic, so θ̂* is a fixed point). ``None`` unless C is a centred ball (or, for
        p = 1, an interval [−R, R]): :mod:`dpbench.privacy.projected` describes that law. ``delta``
        is accepted for a uniform signature (the mechanism is pure) and ignored."""
        radius = centred_ball_radius(problem.constraint, data.p)
        if radius is None:
            return None
        opt = self._minimiser(data, problem)
        scale = self.sensitivity(data.n, float(problem.lipschitz),
                                 float(problem.strong_convexity)) / epsilon
        return ProjectedNoise(np.asarray(opt.theta, dtype=float), scale, "gamma_norm", radius)

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the released Π_C(θ̂*(D) + b) against Π_C(θ̂*(D′) + b)
        (:func:`dpbench.privacy.projected.projected_epsilon`, derived there).

        For δ = 0 it is ‖θ̂*(D) − θ̂*(D′)‖/s in every dimension (the projection does not lower
        it: the centres lie in C). The calibration uses the worst case ‖θ*(D) − θ*(D′)‖ ≤ 2L/(nΔ)
        (CMS11), so the ratio to the claim is the pair's shift over 2L/(nΔ). On LB-Quad the
        canaries ±data_norm·u move the mean by 2·data_norm/n while L = R + data_norm, hence
        true ε = ε·data_norm/(R + data_norm) (ε/2 at the default R = data_norm), times
        2L/(nΔ)/(2L/(nΔ) + 2√(2·solver_gap/Δ)) for the solver-gap inflation. For δ > 0: exact
        for p = 1 (closed form), ``None`` for p ≥ 2. ``None`` also when C is not a centred
        ball."""
        law0 = self.output_law(d0, problem, epsilon=epsilon, delta=delta)
        law1 = self.output_law(d1, problem, epsilon=epsilon, delta=delta)
        if law0 is None or law1 is None:
            return None
        return projected_epsilon(law0, law1, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the released law
        (:meth:`dpbench.privacy.projected.ProjectedNoise.log_density_ratio`: the Gamma-norm
        densities inside C, the atoms (p = 1) or surface densities (p ≥ 2) on the sphere)."""
        law0 = self.output_law(d0, problem, epsilon=epsilon, delta=delta)
        law1 = self.output_law(d1, problem, epsilon=epsilon, delta=delta)
        if law0 is None or law1 is None:
            return None
        return law0.log_density_ratio(law1, thetas)

    def _ledger(self, epsilon: float) -> PrivacyLedger:
        return PrivacyLedger.from_charges(Charge(
            "output perturbation (Gamma-norm noise)", float(epsilon), 0.0,
            "BST14 Alg. 3 / CMS11: argmin sensitivity 2L/(nΔ)"))

    def _perturb(self, opt: Optimum, data: Dataset, problem: Problem, epsilon: float,
                 rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        Delta = float(problem.strong_convexity)
        scale = self.sensitivity(n, L, Delta) / epsilon
        b = gamma_norm_noise(p, scale, rng)
        theta = problem.constraint.project(np.asarray(opt.theta, dtype=float) + b)
        ledger = self._ledger(epsilon)
        info = {"noise_scale": scale, "noise_norm": float(np.linalg.norm(b)),
                "solver_gap": float(opt.gap), "solver_method": opt.method}
        return Release(theta=theta, ledger=ledger, iterations=int(opt.iterations), info=info)
