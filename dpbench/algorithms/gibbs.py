"""GTU A4: the (ε, δ) Gibbs sampler (final sample), with the A8 regularised wrapper.

Ganesh, Thakurta, Upadhyay, "Differentially Private Sampling from Rashomon Sets, and the
Universality of Langevin Diffusion for Convex Optimization" (GTU), Theorem 2.7 (isoperimetry
route), §4.3 and §4.4. The labels A3, A4, A8, the errata and pitfall numbers below refer to
docs/langevin.md ("Mechanism labels", "Errata", "Pitfalls").

The mechanism outputs one draw of π_β ∝ exp(−β𝓛(θ; D))·1_C (𝓛 the AVERAGE loss, ψ = 0). It is
the exponential-mechanism density with k = β/n on the sum loss, so it reuses the ε-DP Gibbs
sampler's machinery (:func:`dpbench.numerics.samplers.expmech.sample_expmech`: the problem's exact
``"gibbs"`` sampler of :mod:`dpbench.core.exact_samplers`, or the RWM/MALA chains).

β calibration (``calibration``; :mod:`dpbench.privacy.langevin`):

* ``literal``: T2.7 with the constants of its proof, β = min(ε²mn²/(72L² log 1/δ),
  εmn²/(72√2 L²)) (A4; the constants as they appear in the proof, Errata 12);
* ``tight``: the self-consistent LSI version ([derived], Errata 12): ε = 4ρ′ + 2√(2ρ′ log 1/δ),
  ρ′ = βL²/(mn²);
* ``gaussian``: the exact Gaussian-mechanism calibration β = μ(ε′, δ′)²/Δ² (A4, quadratic losses,
  [derived]). It applies **only** when the Gibbs law is a Gaussian with data-independent covariance
  restricted to C: isotropic quadratics ½‖θ − d‖² on a ball (problems declaring the
  ``isotropic_quadratic`` tag of :mod:`dpbench.core.tags`: ``mean_est``, ``lb_quad``), where
  π_D = N(d̄, I/β) conditioned on C and the mean is d̄ with ‖d̄ − d̄′‖ ≤ Δ = 2ρ/n (ρ the public bound
  on the row norms). Conditioning is not post-processing, so the truncation is accounted: if
  η ≥ Pr[N(d̄, I/β) ∉ C] for every admissible d̄ (η = Pr[χ²_p > β(R − ρ)²], public), then the
  truncated law is (ε′ + log 1/(1−η), δ′/(1−η))-DP. We take (ε′, δ′) = (ε + log(1 − η_max),
  δ(1 − η_max)) with η_max = δ/10 and declare the cell not applicable when η > η_max (the
  truncation is then not negligible and the law is not Gaussian enough). The charge carries
  ``gdp_mu`` = μ, exact up to that truncation slack.

A8 wrapper (``regularize``, for merely convex losses): the same data-independent quadratic
(λ_r/2)‖θ − θ₀‖² with θ₀ = 0 = the centre of C is added to every ℓ (the problem family's
``ridge`` parameter), so each loss is λ_r-strongly convex and L′ = L + λ_r‖C‖ Lipschitz on C;
λ_r = L√(p log 1/δ)/(‖C‖εn) (``erm``) or (L/‖C‖)·max{√(p log 1/δ)/(εn), 1/√n} (``sco``) per the
A8 table (GTU §4.4); the calibration uses (L′, m = λ_r). The regulariser cancels in sensitivities.

Samplers: ``exact`` (certified) or ``rwm``/``mala`` from the data-independent centre of C
(nominal: a chain at TV distance λ from π makes the mechanism only (ε, δ + (1 + e^ε)λ)-DP,
Pitfalls 9; the ledger says ``certified=False``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.exact_samplers import has_exact_sampler
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import Ball, Box
from ..core.tags import get_tags
from ..numerics.samplers.expmech import SAMPLERS, sample_expmech, sample_expmech_many
from ..privacy.gaussian import gdp_mu
from ..numerics.gibbs_law import gibbs_epsilon, gibbs_log_density_ratio
from ..privacy.langevin import beta_a4_literal, beta_a4_tight
from ..privacy.ledger import Charge, PrivacyLedger

__all__ = ["Gibbs", "a8_lambda", "regularized_problem", "gaussian_gibbs_constants",
           "has_exact_expmech", "mcmc_theorem_note"]

CALIBRATIONS = ("tight", "literal", "gaussian")
#: Cap of the default MCMC chain length of :func:`gibbs_mcmc_tuning`.
MAX_GIBBS_STEPS = 200_000
REGULARIZE = ("none", "erm", "sco")


def a8_lambda(goal: str, L: float, diameter: float, n: int, p: int, epsilon: float,
              delta: float) -> float:
    """λ_r of the A8 table (GTU §4.4; docs/langevin.md, A8): ``erm`` L√(p log 1/δ)/(‖C‖εn); ``sco``
    (L/‖C‖)·max{√(p log 1/δ)/(εn), 1/√n}."""
    priv = math.sqrt(p * math.log(1.0 / delta)) / (epsilon * n)
    if goal == "erm":
        return L * priv / diameter
    if goal == "sco":
        return L / diameter * max(priv, 1.0 / math.sqrt(n))
    raise ValueError(f"a8_lambda: unknown goal {goal!r}")


def regularized_problem(problem: Problem, lam: float) -> Problem:
    """The same family with (λ/2)‖θ‖² added to every loss (its ``ridge`` parameter); the
    regulariser is centred at 0, the data-independent centre of a ball or cube C (A8)."""
    if "ridge" not in problem.params or not isinstance(problem.constraint, (Ball, Box)):
        raise NotApplicable(
            f"the A8 wrapper needs a problem with a 'ridge' parameter on a centred ball or cube; "
            f"{problem.name!r} has none")
    params: dict[str, Any] = dict(problem.get_params())
    params["ridge"] = float(params["ridge"]) + lam
    return type(problem)(**params)


def gaussian_gibbs_constants(problem: Problem) -> tuple[float, float] | None:
    """(ρ, R) for the isotropic quadratics whose Gibbs law is N(d̄, I/β) on B(0, R) — ρ the
    public bound on the row norms — or None (the ``gaussian`` calibration does not apply): the
    problem's ``isotropic_quadratic`` tag (:func:`dpbench.core.tags.get_tags`)."""
    return get_tags(problem).isotropic_quadratic


def has_exact_expmech(problem: Problem) -> bool:
    """Whether an exact ``"gibbs"`` sampler is registered for the problem's loss
    (:func:`dpbench.core.exact_samplers.has_exact_sampler`; it may still decline some data)."""
    return has_exact_sampler("gibbs", problem)


def gibbs_mcmc_tuning(kind: str, beta: float, n: int, p: int, L: float, diameter: float,
                      m: float, M: float, step_scale: float,
                      steps: int | None) -> tuple[int | None, float]:
    """Public (steps, step_scale) for :func:`dpbench.numerics.samplers.mcmc.run_chain` on the Gibbs law
    exp(−β𝓛) of an m-strongly convex, M-smooth loss (our own public rule; what a finite chain
    certifies: docs/langevin.md Pitfalls 9).

    The chains' default step 0.3/(knL) (k = β/n) is sized for the exponential mechanism's linear
    potentials; a strongly log-concave target of curvature βM has width 1/√(βM), so the step is
    raised to h = c·p^{−1/6}/√(βM) (c = 0.5 for MALA, 1.0/√p for RWM; capped at D/p) and the default
    chain length is 2000 + 100·⌈(w/h)²⌉ steps, w = min(1/√(βm), D) the width of the target (a
    diffusive crossing takes ≈ (w/h)² steps), at most :data:`MAX_GIBBS_STEPS`. Non-smooth losses
    keep the chains' own defaults."""
    if not math.isfinite(M) or M <= 0 or m <= 0:
        return steps, step_scale
    from ..numerics.samplers.mcmc import default_step

    c = 0.5 if kind == "mala" else 1.0 / math.sqrt(p)
    base = default_step(kind, beta / n, n, L, diameter, p, 1.0)
    wanted = min(c * p ** (-1.0 / 6.0) / math.sqrt(beta * M), diameter / p)
    width = min(1.0 / math.sqrt(beta * m), diameter)
    n_steps = steps if steps is not None else min(MAX_GIBBS_STEPS, 2000 + 100 * math.ceil((width / wanted) ** 2))
    return n_steps, step_scale * wanted / base


def mcmc_theorem_note(sampler: str) -> str:
    """The caveat of a nominal (MCMC) Gibbs draw (docs/langevin.md, A3 and Pitfalls 9)."""
    return (f"{sampler.upper()} sampler: nominal only — a chain at TV λ from the target makes it "
            "(ε, δ + (1+e^ε)·λ)-DP with λ unknown (docs/langevin.md Pitfalls 9)")


class Gibbs(Algorithm):
    """One draw of π_β ∝ exp(−β𝓛) on C with the T2.7 (ε, δ) calibration (GTU A4; A8 wrapper)."""

    name: ClassVar[str] = "gibbs"
    summary: ClassVar[str] = ("(ε,δ) Gibbs sampler exp(-β·avg loss), β from GTU Thm 2.7 "
                              "(literal / tight LSI / exact Gaussian); A8 regularised wrapper")
    citation: ClassVar[str] = ("Ganesh, Thakurta, Upadhyay (2023), Thm 2.7, §4.3–4.4; "
                               "docs/langevin.md A4, A8, Errata 2, 12")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "strongly_convex")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "calibration": Param("tight", kind="str", choices=CALIBRATIONS,
                             doc="tight (LSI, docs/langevin.md Errata 12), literal (T2.7 proof "
                                 "constants) or "
                                 "gaussian (exact GDP; isotropic quadratics only)"),
        "regularize": Param("none", kind="str", choices=REGULARIZE,
                            doc="A8 wrapper for merely convex losses: none, erm or sco λ_r"),
        "sampler": Param("exact", kind="str", choices=SAMPLERS,
                         doc="exact (certified) or rwm/mala (nominal, uncertified)"),
        "steps": Param(None, kind="int", low=1, none="the public default", identity_of_none=0,
                       doc="MCMC steps"),
        "step_scale": Param(1.0, low=0.0, low_open=True, doc="MCMC step-size multiplier"),
    }

    calibration: str
    regularize: str
    sampler: str
    steps: int | None
    step_scale: float

    def requirements(self) -> tuple[str, ...]:
        if self.regularize != "none":
            return ("convex", "lipschitz")
        return self.requires

    def not_applicable_reason(self, problem: Problem) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason:
            return reason
        if self.regularize != "none" and "ridge" not in problem.params:
            return f"gibbs(regularize={self.regularize!r}) needs a problem with a 'ridge' parameter"
        if self.sampler == "exact" and not has_exact_expmech(problem):
            return f"problem {problem.name!r} has no exact Gibbs sampler; use sampler='mala'"
        if self.calibration == "gaussian" and (
                self.regularize != "none" or gaussian_gibbs_constants(problem) is None):
            return ("calibration='gaussian' needs an isotropic quadratic (mean_est, lb_quad) "
                    "without the A8 wrapper: only there is the Gibbs law Gaussian")
        return None

    # --- calibration --------------------------------------------------------------------------
    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """``beta`` (the Gibbs law exp(−β·𝓛̄)'s inverse temperature) and ``lambda_r`` (the A8
        ridge, 0 without it), as :meth:`calibrate` gives them to :meth:`run`."""
        cal = self.calibrate(problem, n, p, epsilon, delta)
        return {"beta": float(cal["beta"]), "lambda_r": float(cal["lambda_r"])}

    def calibrate(self, problem: Problem, n: int, p: int, epsilon: float, delta: float
                  ) -> dict[str, Any]:
        """β and everything the ledger records, from public quantities only."""
        L = float(problem.lipschitz)
        D = float(problem.constraint.diameter)
        lam = 0.0
        if self.regularize != "none":
            lam = a8_lambda(self.regularize, L, D, n, p, epsilon, delta)
        L_cal = L + lam * D
        m = float(problem.strong_convexity) + lam
        out: dict[str, Any] = {"lambda_r": lam, "L_calibration": L_cal, "m": m}
        if self.calibration == "literal":
            out.update(beta=beta_a4_literal(epsilon, delta, n, L_cal, m), epsilon=epsilon,
                       delta=delta, gdp_mu=None,
                       theorem="GTU Thm 2.7, proof constants (A4, paper-literal; "
                               "docs/langevin.md Errata 12)")
        elif self.calibration == "tight":
            out.update(beta=beta_a4_tight(epsilon, delta, n, L_cal, m), epsilon=epsilon,
                       delta=delta, gdp_mu=None,
                       theorem="GTU Thm 2.7 tightened: ε = 4ρ′ + 2√(2ρ′ log 1/δ), ρ′ = βL²/(mn²) "
                               "([derived], docs/langevin.md Errata 12)")
        else:
            out.update(self._gaussian(problem, n, p, epsilon, delta))
        return out

    @staticmethod
    def _gaussian(problem: Problem, n: int, p: int, epsilon: float, delta: float
                  ) -> dict[str, Any]:
        consts = gaussian_gibbs_constants(problem)
        if consts is None:
            raise NotApplicable(f"calibration='gaussian' does not apply to {problem.name!r}")
        rho, R = consts
        Delta = 2.0 * rho / n
        eta_max = delta / 10.0
        eps_g, delta_g = epsilon + math.log1p(-eta_max), delta * (1.0 - eta_max)
        if eps_g <= 0:
            raise NotApplicable("calibration='gaussian': ε too small for the truncation slack")
        mu = gdp_mu(eps_g, delta_g)
        beta = (mu / Delta) ** 2
        eta = float(stats.chi2.sf(beta * (R - rho) ** 2, p)) if R > rho else 1.0
        if eta > eta_max:
            raise NotApplicable(
                f"calibration='gaussian': the Gibbs law N(d̄, I/β), β = {beta:.3g}, loses mass "
                f"η ≤ {eta:.3g} > δ/10 to the truncation to C (margin R − ρ = {R - rho:.3g}); it is "
                "not Gaussian enough for the exact Gaussian-mechanism calibration")
        return {"beta": beta, "epsilon": eps_g - math.log1p(-eta),
                "delta": delta_g / (1.0 - eta), "gdp_mu": mu, "truncation_mass": eta,
                "theorem": ("exact Gaussian mechanism: π_D = N(d̄, I/β) on C, μ = Δ√β, Δ = 2ρ/n "
                            "([derived], docs/langevin.md A4), truncation η accounted as "
                            "(ε′ + log 1/(1−η), δ′/(1−η))")}

    # --- declarations -------------------------------------------------------------------------
    def rate_card(self) -> RateCard:
        """GTU Table 2: ERM SC (ε,δ) L²p log(1/δ)/(mε²n²) (A4); A8 ERM L‖C‖√(p log 1/δ)/(εn);
        A8 SCO adds L‖C‖/√n."""
        if self.regularize == "erm":
            return RateCard(
                expression="L*D*sqrt(p*log(1/delta))/(n*epsilon)",
                exponents={"n": -1, "p": 0.5, "epsilon": -1},
                citation="GTU §4.4 (A8 + A4): O(L‖C‖√(p log 1/δ)/(εn))",
                regime="εn ≫ √(p log 1/δ) (experiment E7)")
        if self.regularize == "sco":
            return RateCard(
                expression="L*D*sqrt(p*log(1/delta))/(n*epsilon) + L*D/sqrt(n)",
                exponents={"n": -0.5, "p": 0.5, "epsilon": -1},
                citation="GTU §4.4 (A8 + A4, SCO): + L‖C‖/√n", quantity="population_excess_risk",
                regime="n: −1 (small n) → −½ (large n), experiment E8")
        return RateCard(
            expression="L**2*p*log(1/delta)/(Delta*n**2*epsilon**2)",
            exponents={"n": -2, "p": 1, "epsilon": -2},
            citation="GTU Thm 2.7 / §4.3: ERM O(L²p log(1/δ)/(mε²n²))",
            regime="ε ≤ 1 for the ε² law (β ∝ ε above: slope −1), experiment E5",
            notes="Delta is the per-example strong convexity m; the Gibbs law on a smooth "
                  "interior minimiser gives ≈ p/(2β).")

    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """p/(2β) on the isotropic quadratics (Gibbs N(d̄, I/β), truncation negligible; F1 in
        docs/langevin.md); NaN elsewhere."""
        if self.regularize != "none" or gaussian_gibbs_constants(problem) is None:
            return math.nan
        try:
            beta = self.calibrate(problem, data.n, data.p, epsilon, delta)["beta"]
        except NotApplicable:
            return math.nan
        return data.p / (2.0 * beta)

    def oracle_kind(self, problem: Problem) -> str:
        if self.regularize != "none" or gaussian_gibbs_constants(problem) is None:
            return ""
        return "exact" if self.sampler == "exact" else "heuristic"  # a finite chain: approximate

    def cost(self, n: int, p: int) -> float:
        return float(n * p) * (1.0 if self.sampler == "exact" else 8.0 * p * max(n, p))

    # --- the exact output law (the audit) -----------------------------------------------------
    def _exact_law(self, problem: Problem, data: Dataset, epsilon: float,
                   delta: float) -> tuple[Problem, float] | None:
        """(the problem sampled, k = β/n on its sum loss) of the exact sampler's law, or ``None``
        (MCMC samplers: a finite chain's law is not available; δ outside (0, 1), which the
        calibration needs; a calibration that does not apply here, e.g. ``gaussian`` with too
        much truncation, where the cell does not run)."""
        if self.sampler != "exact" or not 0 < delta < 1:
            return None
        try:
            cal, work, _ = self._setup(problem, data, epsilon, delta)
        except NotApplicable:
            return None
        return work, float(cal["beta"]) / data.n

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of π_β ∝ exp(−β𝓛̄) on C (β from this configuration's calibration, the A8
        problem when regularised) for D against D′ (:func:`dpbench.numerics.gibbs_law.
        gibbs_epsilon`: on the isotropic quadratics N(d̄, I/β) truncated to the ball, a tilted
        ball whose privacy loss is linear in ⟨θ, u⟩, u ∥ d̄ − d̄′, so ε(δ) is that of the laws of
        ⟨θ, u⟩ (p ≤ 2 for δ > 0); 1-D quadrature of the loss at p = 1). ``None`` for MCMC."""
        law = self._exact_law(problem, d0, epsilon, delta)
        if law is None:
            return None
        work, k = law
        return gibbs_epsilon(work, d0, d1, k, work.constraint, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log π_D(θ) − log π_D′(θ) of the exact sampler's law (:meth:`exact_epsilon`)."""
        law = self._exact_law(problem, d0, epsilon, delta)
        if law is None:
            return None
        work, k = law
        return gibbs_log_density_ratio(work, d0, d1, k, work.constraint, thetas)

    # --- running ------------------------------------------------------------------------------
    def _setup(self, problem: Problem, data: Dataset, epsilon: float, delta: float
               ) -> tuple[dict[str, Any], Problem, dict[str, Any]]:
        """(calibration, the problem sampled (A8-regularised or not), the arguments of
        :func:`sample_expmech` after the region: sampler, steps, step_scale), all public."""
        cal = self.calibrate(problem, data.n, data.p, epsilon, delta)
        work = problem if self.regularize == "none" else regularized_problem(problem, cal["lambda_r"])
        steps, scale = self.steps, self.step_scale
        if self.sampler != "exact":
            steps, scale = gibbs_mcmc_tuning(
                self.sampler, float(cal["beta"]), data.n, data.p, float(work.lipschitz),
                float(work.constraint.diameter), cal["m"], float(work.smoothness), scale, steps)
        return cal, work, {"sampler": self.sampler, "steps": steps, "step_scale": scale}

    def _ledger(self, cal: dict[str, Any], certified: bool) -> PrivacyLedger:
        theorem = cal["theorem"] + ("" if certified else "; " + mcmc_theorem_note(self.sampler))
        label = (f"Gibbs sampler (A4, {self.calibration} β, "
                 f"{'exact' if certified else self.sampler.upper() + ' (nominal)'})")
        charge = Charge(label, float(cal["epsilon"]), float(cal["delta"]), theorem,
                        certified=certified, gdp_mu=cal["gdp_mu"])
        return PrivacyLedger.from_charges(charge)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        cal, work, how = self._setup(problem, data, epsilon, delta)
        beta = float(cal["beta"])
        theta, info = sample_expmech(work, data, beta / data.n, work.constraint, rng, **how)
        certified = bool(info["certified"])
        ledger = self._ledger(cal, certified)
        steps = int(info["steps"])
        queries = data.n * (steps + 1)
        out_info = dict(info, beta=beta, calibration=self.calibration,
                        regularize=self.regularize, lambda_r=cal["lambda_r"],
                        L_calibration=cal["L_calibration"], m=cal["m"])
        return Release(theta=theta, ledger=ledger, func_queries=queries,
                       grad_queries=queries if self.sampler == "mala" else 0,
                       iterations=steps, info=out_info)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """``size`` draws of π_β with :meth:`run`'s calibration, problem (A8 wrapper included)
        and sampler settings, in one call of
        :func:`~dpbench.numerics.samplers.expmech.sample_expmech_many`: the exact sampler's
        vectorised form (exactly :meth:`run`'s law) or the same RWM/MALA chain per row. ``None``
        for MCMC on a problem without a compiled kernel (the audit then loops :meth:`run`)."""
        cal, work, how = self._setup(problem, data, epsilon, delta)
        out = sample_expmech_many(work, data, float(cal["beta"]) / data.n, work.constraint, rng,
                                  size, **how)
        if out is None:
            return None
        thetas, info = out
        return BatchRelease(thetas, self._ledger(cal, bool(info["certified"])))
