"""B1 ``ObjPert``: objective perturbation (BST14 Appendix E, Thm E.1/E.2).

θ_priv = argmin_{θ∈C} 𝓛(θ; D) + (Λ/2)‖θ‖² + ⟨b, θ⟩ on the SUM scale (Chaudhuri, Monteleoni,
Sarwate, JMLR 2011 [CMS11], Algorithm 2 / Thm 9; Kifer, Smith, Thakurta, COLT 2012 [KST12],
objective perturbation over a closed convex C). BST14 prints only the shorthand "Δ ≥ β/(2ε)"; the
precondition implemented here is derived from the CMS11/KST12 change-of-variables proof, stated
exactly below, and the Gaussian noise is calibrated by :mod:`dpbench.privacy.gaussian` instead of
the printed 8L²log(1/δ)/ε² (docs/bst14.md Errata 5 and 6).

**Privacy proof skeleton (CMS11 Thm 9, KST12).** For a smooth loss the output determines b
through the first-order condition, and the output density is the noise density at b(θ) times a
Jacobian |det(ΛI + Σᵢ∇²ℓ(θ; dᵢ))|. Replacing one example

* moves b(θ) by v(θ) = ∇ℓ(θ; d′) − ∇ℓ(θ; d), of norm ≤ 2L: Gamma-norm noise of scale
  2L/ε_noise (pure; the density ratio bound holds for any shift of norm ≤ 2L) pays ε_noise. For
  Gaussian b the shift depends on θ, so the fixed-shift analytic Gaussian calibration applies
  only when v is constant, i.e. when the Hessian is the constant ΔI (β = Δ: LB-Quad,
  linear + ridge, LB-Lin; then σ = analytic-Gaussian σ for sensitivity 2L at (ε_noise, δ_noise),
  Balle & Wang 2018). Otherwise σ = :func:`~dpbench.privacy.gaussian.pointwise_gaussian_sigma`
  for sensitivity 2L with v in span{x, x′} (d = 2) for margin losses and d = p in general (the
  problem's ``gradient_shift_dim`` tag, :mod:`dpbench.core.tags`): the pointwise loss is
  ≤ ε_noise except with probability δ_noise (the CMS11/KST12 argument, with the tail made
  explicit);
* changes the Jacobian. Write ∇²ℓ = ΔI + G with 0 ⪯ G ⪯ (β − Δ)I of rank ≤ r (r = 1 for margin
  losses φ(y⟨θ, x⟩) + ridge, KST12's rank condition; r = p in general: the ``hessian_rank``
  tag). All but the replaced G form A ⪰ (Λ + nΔ)I, and
  det(A + G′)/det(A + G) ≤ det(I + A⁻¹G′) ≤ (1 + (β − Δ)/(Λ + nΔ))^r, so the Jacobian costs
  ε_J = r·log(1 + (β − Δ)/(Λ + nΔ)).

**Choice of Λ** (CMS11 Algorithm 2, generalised; KST12's "Λ ≥ 2rβ/ε" is the linearised form of
ε_J ≤ ε/2, BST14's "Δ ≥ β/(2ε)" its shorthand). With ε_rest the budget left after the
approximate-minima slice: if the problem's own per-example Δ already gives ε_J ≤ ε_rest/2 with
Λ = 0 (Thm E.2: "no extra regulariser"), then Λ = 0 and ε_noise = ε_rest − ε_J; otherwise
Λ = (β − Δ)/expm1(ε_rest/(2r)) − nΔ, ε_J = ε_noise = ε_rest/2. When the problem has Δ = 0,
Λ is at least Thm E.1's utility choice Λ = Lp/(ε‖C‖) (pure) or L√(p ln(1/δ))/(ε‖C‖) (Gaussian),
which also makes the perturbed objective strongly convex (a unique, Lipschitz-in-b minimiser).

**Inexact solver: approximate-minima perturbation** (Iyengar, Near, Song, Thakkar, Thakurta,
Wang, IEEE S&P 2019, AMP). When the perturbed problem has no closed form, the solver must certify
a gap ≤ ``solver_gap`` (a public bound, average scale); strong convexity m = Δ + Λ/n of the
perturbed average objective gives ‖θ̂ − θ_priv‖ ≤ √(2·solver_gap/m), so θ̂ is released with
output noise of sensitivity 2√(2·solver_gap/m), paid from the slice ``apm_share``·(ε, δ). A run
whose certified gap exceeds ``solver_gap`` raises ``SolverGapExceeded``. When β = Δ the loss is
an isotropic quadratic (LB-Quad, LB-Lin), the minimiser is exact in closed form and no slice is
spent.

**Vectorised audit path** (:meth:`ObjectivePerturbation.run_batch`). Every row solves its own
perturbed problem: in closed form when β = Δ, else (softplus-margin losses, e.g. logistic) by
the Newton solver of :func:`_solve` run on all rows at once
(:mod:`dpbench.numerics.solvers.perturbed_batch`), each row certified to the same gap
≤ ``solver_gap`` that the approximate-minima noise is calibrated for, a row that misses it
re-solved by :func:`_solve`. Other problems (FISTA over a one-point gradient oracle) are looped.

Refuses non-smooth problems (β = ∞: hinge, 1-median, KINK-SC, HUB-1D) with ``NotApplicable``:
the change-of-variables proof needs a twice-differentiable loss (docs/bst14.md, "Derived
constants": objective perturbation is restricted to smooth losses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.ratecard import RateCard
from ..core.sets import Ball
from ..core.tags import get_tags
from ..core.time_limit import checkpoint
from ..numerics.solvers.ball import SoftplusMargin
from ..numerics.solvers.perturbed import (
    PerturbedObjective,
    solve_isotropic_quadratic,
    solve_perturbed_ball,
)
from ..numerics.solvers.perturbed_batch import (
    BatchSoftplusMargin,
    isotropic_quadratic_minimisers,
    solve_perturbed_ball_batch,
)
from ..privacy.gaussian import analytic_gaussian_sigma, pointwise_gaussian_sigma
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.noise import gamma_norm_noise, gaussian_noise
from ..core.sets import centred_ball_radius
from ..privacy.projected import ProjectedNoise, projected_epsilon
from .output_perturbation import SolverGapExceeded

__all__ = ["ObjPertCalibration", "ObjectivePerturbation", "calibrate_objective_perturbation",
           "gaussian_noise_sigma", "hessian_change_rank", "shift_dimension"]

_CARDS: dict[tuple[str, str], tuple[str, dict[str, float], str]] = {
    ("gamma", "lipschitz"): (
        "L*D*p/(n*epsilon)", {"n": -1, "p": 1, "epsilon": -1},
        "BST14 Thm E.1 (pure), R5: sum-scale L‖C‖p/ε divided by n"),
    ("gaussian", "lipschitz"): (
        "L*D*sqrt(p*log(1/delta))/(n*epsilon)", {"n": -1, "p": 0.5, "epsilon": -1},
        "BST14 Thm E.1 (Gaussian), R6: sum-scale L‖C‖√(p ln(1/δ))/ε divided by n"),
    ("gamma", "strongly_convex"): (
        "L**2*p**2/(n**2*Delta*epsilon**2)", {"n": -2, "p": 2, "epsilon": -2},
        "BST14 Thm E.2 (pure), R7: sum-scale L²p²/(nΔε²) divided by n"),
    ("gaussian", "strongly_convex"): (
        "L**2*p*log(1/delta)/(n**2*Delta*epsilon**2)", {"n": -2, "p": 1, "epsilon": -2},
        "BST14 Thm E.2 (Gaussian), R8: sum-scale L²p ln(1/δ)/(nΔε²) divided by n"),
}


@dataclass(frozen=True)
class ObjPertCalibration:
    """The public calibration of one ObjPert run (all from n, p, L, Δ, β, ‖C‖, ε, δ)."""

    lam: float          # Λ, extra ridge on the SUM objective
    eps_jacobian: float
    eps_noise: float
    delta_noise: float
    eps_output: float   # approximate-minima slice (0 when the solve is exact)
    delta_output: float
    rank: int


def hessian_change_rank(problem: Problem, p: int) -> int:
    """Rank bound r of the data-dependent Hessian part G = ∇²ℓ − ΔI (KST12's rank condition).

    min(p, the declared ``hessian_rank`` tag) (:func:`dpbench.core.tags.get_tags`; margin losses
    φ(y⟨θ, x⟩) + (ridge/2)‖θ‖² declare r = 1, G = φ''·xxᵀ); r = p without a claim (always valid).
    """
    rank = get_tags(problem).hessian_rank
    return p if rank is None else min(p, rank)


def shift_dimension(problem: Problem, p: int) -> int:
    """Dimension d of a fixed subspace holding every gradient shift v(θ) = ∇ℓ(θ; d′) − ∇ℓ(θ; d).

    min(p, the declared ``gradient_shift_dim`` tag) (margin losses: v ∈ span{x, x′}, 2);
    d = p without a claim.
    """
    dim = get_tags(problem).gradient_shift_dim
    return p if dim is None else min(p, dim)


def gaussian_noise_sigma(problem: Problem, p: int, L: float, epsilon: float,
                         delta: float) -> tuple[float, str]:
    """σ of the Gaussian linear term and the calibration used (module docstring)."""
    if _closed_form(problem):
        return (analytic_gaussian_sigma(2.0 * L, epsilon, delta),
                "constant shift (β = Δ): analytic Gaussian, Balle-Wang 2018 Thm 8")
    d = shift_dimension(problem, p)
    return (pointwise_gaussian_sigma(2.0 * L, epsilon, delta, d),
            f"θ-dependent shift in a {d}-dim subspace: pointwise-loss tail bound")


def calibrate_objective_perturbation(
    *, n: int, p: int, L: float, Delta: float, beta: float, diameter: float, epsilon: float,
    delta: float, rank: int, gaussian: bool, output_share: float,
) -> ObjPertCalibration:
    """Λ and the (ε, δ) split of the module docstring (CMS11 Alg. 2 rule, KST12 condition)."""
    if not math.isfinite(beta):
        raise NotApplicable(
            f"objective perturbation needs a smooth loss (CMS11/KST12 change of variables): "
            f"beta={beta:g}, Delta={Delta:g}, epsilon={epsilon:g}")
    eps_out, delta_out = epsilon * output_share, delta * output_share
    eps_rest, delta_rest = epsilon - eps_out, delta - delta_out
    excess_curv = max(beta - Delta, 0.0)
    lam_floor = 0.0
    if Delta <= 0:
        spread = math.sqrt(p * math.log(1.0 / delta)) if gaussian else float(p)
        lam_floor = L * spread / (epsilon * diameter)  # Thm E.1's regulariser
    lam, eps_j = lam_floor, 0.0
    if excess_curv > 0:
        cost = rank * math.log1p(excess_curv / (lam + n * Delta)) if lam + n * Delta > 0 else math.inf
        if cost <= eps_rest / 2:
            eps_j = cost
        else:
            lam = max(excess_curv / math.expm1(eps_rest / (2 * rank)) - n * Delta, lam_floor)
            eps_j = rank * math.log1p(excess_curv / (lam + n * Delta))
    return ObjPertCalibration(lam=lam, eps_jacobian=eps_j, eps_noise=eps_rest - eps_j,
                              delta_noise=delta_rest, eps_output=eps_out,
                              delta_output=delta_out, rank=rank)


class ObjectivePerturbation(Algorithm):
    """Objective perturbation, pure (Gamma-norm b) or (ε, δ) (Gaussian b); see the module doc."""

    name: ClassVar[str] = "objective_perturbation"
    summary: ClassVar[str] = ("argmin of loss + ridge + random linear term (CMS11/KST12; BST14 "
                              "App. E); pure with noise=gamma, (ε, δ) with noise=gaussian")
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (FOCS 2014), Appendix E, Thm E.1/E.2; "
                               "Chaudhuri, Monteleoni, Sarwate (JMLR 2011); Kifer, Smith, "
                               "Thakurta (COLT 2012); Iyengar et al. (S&P 2019) for AMP")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "smooth")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "noise": Param("gamma", kind="str", choices=("gamma", "gaussian"),
                       doc="Gamma-norm b (pure ε-DP) or Gaussian b ((ε, δ)-DP, analytic σ)"),
        "regime": Param("lipschitz", kind="str", choices=("lipschitz", "strongly_convex"),
                        doc="rate card: Thm E.1 (R5/R6) or Thm E.2 (R7/R8, needs Δ > 0)"),
        "solver_gap": Param(1e-12, low=0.0, low_open=True,
                            doc="public bound on the solver's certified gap (average scale); "
                                "sets the approximate-minima output noise"),
        "apm_share": Param(0.05, low=0.0, high=0.5, low_open=True,
                           doc="fraction of (ε, δ) paid for the approximate-minima output noise "
                               "(iterative solves only)"),
    }

    noise: str
    regime: str
    solver_gap: float
    apm_share: float

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        # The privacy kind follows the noise (instance attribute; the class default is "pure").
        self.privacy = "approx" if self.noise == "gaussian" else "pure"  # type: ignore[misc]

    def requirements(self) -> tuple[str, ...]:
        if self.regime == "strongly_convex":
            return (*self.requires, "strongly_convex")
        return self.requires

    def cost(self, n: int, p: int) -> float:
        return 50.0 * n * p * p

    def not_applicable_reason(self, problem: Problem) -> str | None:
        props = problem.properties()
        if not props["smooth"]:
            return (f"{self.name} needs a smooth (twice-differentiable) loss for the CMS11/KST12 "
                    f"privacy proof; problem {problem.name!r} has beta={props['beta']:g}, "
                    f"Delta={props['Delta']:g} (refused for every epsilon)")
        if not isinstance(problem.constraint, Ball):
            return f"{self.name} solves over a centred Ball only; {problem.name!r} has another C"
        return super().not_applicable_reason(problem)

    def rate_card(self) -> RateCard:
        """R5–R8 on the average scale (BST14's sums divided by n), chosen by ``regime``.

        ``regime="strongly_convex"`` also adds ``strongly_convex`` to :meth:`requirements`, so the
        Thm E.2 card is only attached to runs on Δ > 0 problems.
        """
        expression, exponents, citation = _CARDS[(self.noise, self.regime)]
        return RateCard(
            expression=expression, exponents=exponents, citation=citation,
            regime=("Lipschitz + smooth (Thm E.1)" if self.regime == "lipschitz" else
                    "Lipschitz + smooth + Δ-strongly convex (Thm E.2)"),
            notes=("Constants hidden by O(·) set to 1. Privacy: exact change-of-variables "
                   "condition (Λ from ε_J ≤ ε/2); Gaussian σ for sensitivity 2L (analytic when "
                   "the shift is constant, pointwise tail bound otherwise); "
                   f"{self.apm_share:g}·(ε, δ) reserved for approximate-minima output noise "
                   "when the solve is iterative."))

    # --- running ------------------------------------------------------------------------------
    def calibration(self, problem: Problem, n: int, p: int, epsilon: float,
                    delta: float) -> ObjPertCalibration:
        """The public calibration for this problem and grid point."""
        exact = _closed_form(problem)
        return calibrate_objective_perturbation(
            n=n, p=p, L=float(problem.lipschitz), Delta=float(problem.strong_convexity),
            beta=float(problem.smoothness), diameter=float(problem.constraint.diameter),
            epsilon=epsilon, delta=delta, rank=hessian_change_rank(problem, p),
            gaussian=self.noise == "gaussian", output_share=0.0 if exact else self.apm_share)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        cal = self.calibration(problem, n, p, epsilon, delta)
        sigma, how = self._linear_scale(problem, p, cal)
        b = self._draw(p, sigma, rng)
        opt = _solve(problem, data, cal.lam / n, b / n, self.solver_gap)
        theta = np.asarray(opt.theta, dtype=float)
        charges = self._charges(cal, how)
        info: dict[str, Any] = {"lambda": cal.lam, "noise_scale": sigma,
                                "noise_norm": float(np.linalg.norm(b)),
                                "solver_gap": float(opt.gap), "solver_method": opt.method}
        if cal.eps_output > 0:
            scale = self._amp_scale(problem, cal, n)
            theta = theta + self._draw(p, scale, rng)
            info["amp_noise_scale"] = scale
        ledger = PrivacyLedger.from_charges(*charges)
        return Release(theta=problem.constraint.project(theta), ledger=ledger,
                       iterations=int(opt.iterations), info=info)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """``size`` releases of :meth:`run` on the same data, every draw from ``rng``.

        The calibration (Λ, the (ε, δ) split, the noise scales) is public and computed once; the
        linear terms b of all rows are drawn at once from :meth:`run`'s law, then every row's
        perturbed problem is solved (:func:`_solve_batch`), then, when the solve is iterative,
        all rows' approximate-minima noise is drawn at once. A closed-form solve (β = Δ) gives
        each row :meth:`run`'s θ for its b (up to the rounding of a norm computed row-wise): the
        path is exact. An iterative solve (the logistic risk)
        runs :meth:`run`'s Newton solver on all rows at once, each row certified to the same
        Frank–Wolfe gap ≤ ``solver_gap`` (rows that miss it are re-solved by :meth:`run`'s
        solver, which raises ``SolverGapExceeded`` as :meth:`run` does): θ̂ may differ from
        :meth:`run`'s by rounding, but both lie within √(2·solver_gap/m) of the exact θ_priv,
        which is all the approximate-minima analysis (Iyengar et al. 2019) uses.

        ``None`` (the audit loops :meth:`run`) on problems whose risk has neither a closed form
        nor the softplus-margin tag (or lacks labels): :meth:`run` solves those by FISTA over the
        problem's one-point gradient oracle, which has no vectorised form.
        """
        n, p = data.n, data.p
        if not _batch_solvable(problem, data):
            return None
        cal = self.calibration(problem, n, p, epsilon, delta)
        sigma, how = self._linear_scale(problem, p, cal)
        b = self._draw(p, sigma, rng, size)
        thetas = _solve_batch(problem, data, cal.lam / n, b / n, self.solver_gap)
        charges = self._charges(cal, how)
        if cal.eps_output > 0:
            thetas = thetas + self._draw(p, self._amp_scale(problem, cal, n), rng, size)
        return BatchRelease(problem.constraint.project(thetas),
                            PrivacyLedger.from_charges(*charges))

    # --- the output law (privacy audit) ------------------------------------------------------
    def output_law(self, data: Dataset, problem: Problem, *, epsilon: float,
                   delta: float) -> ProjectedNoise | None:
        """The law of :meth:`run`'s θ on ``data`` when the solve is in closed form, else ``None``.

        [derived] With the constant Hessian κI (β = Δ = κ: LB-Quad, LB-Lin, linear + ridge) the
        perturbed average objective is ((κ + λ)/2)‖θ − u‖² + const, λ = Λ/n, so :meth:`run`
        releases Π_C(u) with u = −(g₀ + b/n)/(κ + λ), g₀ = ∇L̄(0; D)
        (:func:`~dpbench.numerics.solvers.perturbed.solve_isotropic_quadratic`), and no
        approximate-minima noise: a projected location family with centre −g₀/(κ + λ) and the
        noise b scaled by 1/(nκ + Λ) (b symmetric), Gamma-norm or Gaussian. The Jacobian of the
        change of variables is the constant (nκ + Λ)^p on both sides: it cancels, which is why
        the ledger's ε_J = 0 here. ``None`` for iterative solves (no closed-form law) and when C
        is not a centred ball."""
        radius = centred_ball_radius(problem.constraint, data.p)
        if radius is None or not _closed_form(problem):
            return None
        n, p = data.n, data.p
        cal = self.calibration(problem, n, p, epsilon, delta)
        sigma, _ = self._linear_scale(problem, p, cal)
        total = float(problem.strong_convexity) + cal.lam / n
        g0 = np.asarray(problem.full_grad(np.zeros(p), data), dtype=float)
        noise = "gaussian" if self.noise == "gaussian" else "gamma_norm"
        return ProjectedNoise(-g0 / total, sigma / (n * total), noise, radius)

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the released law on closed-form problems (:meth:`output_law`;
        :func:`dpbench.privacy.projected.projected_epsilon`): any δ for p = 1 (closed form),
        δ = 0 with Gamma-norm noise for p ≥ 2 when both centres lie in C (closed form) and for
        p = 2 otherwise (a search over the circle); ``None`` otherwise.

        The centres differ by (n/(nκ + Λ))·(∇L̄(0; D′) − ∇L̄(0; D)) = (∇ℓ(0; d′) − ∇ℓ(0; d))/(nκ + Λ)
        against the noise scale σ/(nκ + Λ): before the projection the pair is the noise's
        location pair with shift ‖∇ℓ(0; d) − ∇ℓ(0; d′)‖ ≤ 2L, which the calibration prices at
        exactly 2L. On LB-Lin's sphere pair (‖d − d′‖ = 2 = 2L) the claim is attained before the
        projection (Gamma-norm: ε; Gaussian: the analytic calibration's (ε, δ) exactly); the
        projection onto C can only lower it (for p = 1 it keeps the full pure ε when one
        centre's far side still has an atom, :func:`~dpbench.privacy.projected._pure_1d`)."""
        law0 = self.output_law(d0, problem, epsilon=epsilon, delta=delta)
        law1 = self.output_law(d1, problem, epsilon=epsilon, delta=delta)
        if law0 is None or law1 is None:
            return None
        return projected_epsilon(law0, law1, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the released law on closed-form problems
        (:meth:`output_law`, :meth:`dpbench.privacy.projected.ProjectedNoise.log_density_ratio`);
        ``None`` otherwise."""
        law0 = self.output_law(d0, problem, epsilon=epsilon, delta=delta)
        law1 = self.output_law(d1, problem, epsilon=epsilon, delta=delta)
        if law0 is None or law1 is None:
            return None
        return law0.log_density_ratio(law1, thetas)

    def _linear_scale(self, problem: Problem, p: int,
                      cal: ObjPertCalibration) -> tuple[float, str]:
        """The scale of the linear term b and how it was calibrated (module docstring)."""
        L = float(problem.lipschitz)
        if self.noise == "gaussian":
            return gaussian_noise_sigma(problem, p, L, cal.eps_noise, cal.delta_noise)
        return 2.0 * L / cal.eps_noise, "Gamma-norm noise"

    def _draw(self, p: int, scale: float, rng: np.random.Generator,
              size: int | None = None) -> np.ndarray:
        """Noise of this configuration's family (Gaussian σ = ``scale``, or Gamma-norm with
        density ∝ exp(−‖b‖/scale)): shape (p,), or (size, p)."""
        if self.noise == "gaussian":
            return gaussian_noise(p, scale, rng, size)
        return gamma_norm_noise(p, scale, rng, size)

    def _amp_scale(self, problem: Problem, cal: ObjPertCalibration, n: int) -> float:
        """Scale of the approximate-minima output noise (Iyengar et al. 2019): sensitivity
        2√(2·solver_gap/m), m = Δ + Λ/n the strong convexity of the perturbed average objective."""
        m = float(problem.strong_convexity) + cal.lam / n
        sens = 2.0 * math.sqrt(2.0 * self.solver_gap / m)
        if self.noise == "gaussian":
            return analytic_gaussian_sigma(sens, cal.eps_output, cal.delta_output)
        return sens / cal.eps_output

    @staticmethod
    def _charges(cal: ObjPertCalibration, how: str) -> list[Charge]:
        """The ledger's charges: linear term, Jacobian, and the approximate-minima slice when
        the solve is iterative."""
        charges = [
            Charge("objective perturbation: linear-term noise", cal.eps_noise, cal.delta_noise,
                   f"CMS11 Thm 9 / KST12: gradient sensitivity 2L; {how}"),
            Charge("objective perturbation: Jacobian ratio", cal.eps_jacobian, 0.0,
                   f"r·log(1+(β−Δ)/(Λ+nΔ)) with r={cal.rank}, Λ={cal.lam:.4g}"),
        ]
        if cal.eps_output > 0:
            charges.append(Charge("approximate-minima output noise", cal.eps_output,
                                  cal.delta_output,
                                  "Iyengar et al. 2019 (AMP): ‖θ̂ − θ_priv‖ ≤ √(2·gap/m)"))
        return charges


def _closed_form(problem: Problem) -> bool:
    """β = Δ: the risk is an isotropic quadratic (Hessian ΔI), solved exactly."""
    return float(problem.smoothness) == float(problem.strong_convexity)


def _solve(problem: Problem, data: Dataset, lam: float, lin: np.ndarray,
           solver_gap: float) -> Optimum:
    """argmin_C of the average perturbed objective risk + (lam/2)‖θ‖² + ⟨lin, θ⟩, certified."""
    radius = float(problem.constraint.radius)  # type: ignore[attr-defined]
    p = data.p
    if _closed_form(problem):
        g0 = problem.full_grad(np.zeros(p), data)
        return solve_isotropic_quadratic(float(problem.strong_convexity), g0, lam, lin, radius)
    ridge = get_tags(problem).softplus_margin
    if ridge is not None and data.y is not None:
        margin = SoftplusMargin(data.y[:, None] * data.X, ridge=ridge)
        obj = PerturbedObjective(margin.risk, margin.grad, margin.hess, lam, lin)
    else:
        obj = PerturbedObjective(lambda t: problem.risk(t, data),
                                 lambda t: problem.full_grad(t, data), None, lam, lin)
    opt = solve_perturbed_ball(obj, p, radius, smoothness=float(problem.smoothness),
                               tol=solver_gap)
    if not opt.gap <= solver_gap:
        raise SolverGapExceeded(
            f"objective_perturbation: the solver certified a gap of {opt.gap:.3g}, above the "
            f"public bound solver_gap={solver_gap:.3g} the output noise is calibrated for")
    return opt


#: Margins (rows × n) the batched Newton solver holds at once (each a few float64 temporaries).
_BATCH_MARGINS = 1 << 21


def _batch_solvable(problem: Problem, data: Dataset) -> bool:
    """Whether :func:`_solve_batch` can solve many perturbed problems on ``data`` at once."""
    return _closed_form(problem) or (get_tags(problem).softplus_margin is not None
                                     and data.y is not None)


def _solve_batch(problem: Problem, data: Dataset, lam: float, lins: np.ndarray,
                 solver_gap: float) -> np.ndarray:
    """Row s: :func:`_solve` with ``lin = lins[s]``, for every row at once (needs
    :func:`_batch_solvable`).

    Closed form: the same minimiser as :func:`_solve` (up to rounding). Softplus margin: the vectorised form of
    :func:`_solve`'s Newton solver (:func:`~dpbench.numerics.solvers.perturbed_batch.solve_perturbed_ball_batch`),
    every row certified to a Frank–Wolfe gap ≤ ``solver_gap``; a row that misses it is solved
    again by :func:`_solve` itself (which raises ``SolverGapExceeded`` when it misses too).
    """
    radius = float(problem.constraint.radius)  # type: ignore[attr-defined]
    size, p = lins.shape
    if _closed_form(problem):
        g0 = problem.full_grad(np.zeros(p), data)
        return isotropic_quadratic_minimisers(float(problem.strong_convexity), g0, lam, lins,
                                              radius)
    ridge = get_tags(problem).softplus_margin
    if ridge is None or data.y is None:
        raise ValueError(f"_solve_batch: {problem.name!r} has no vectorised solver on this data "
                         "(check _batch_solvable first)")
    margin = SoftplusMargin(data.y[:, None] * data.X, ridge=ridge)
    thetas = np.empty((size, p))
    chunk = max(1, _BATCH_MARGINS // data.n)  # rows per solve: bounds the (rows, n) margins
    for start in range(0, size, chunk):
        rows = slice(start, min(start + chunk, size))
        part = lins[rows]
        thetas[rows], gaps = solve_perturbed_ball_batch(
            BatchSoftplusMargin(margin, lam, part), part.shape[0], p, radius, tol=solver_gap)
        for s in start + np.flatnonzero(~(gaps <= solver_gap)):
            thetas[s] = _solve(problem, data, lam, lins[s], solver_gap).theta
        checkpoint()
    return thetas
