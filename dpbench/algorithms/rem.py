"""The regularized exponential mechanism (REM) of Gopi, Lee and Liu, COLT 2022.

S. Gopi, Y. T. Lee, D. Liu, "Private Convex Optimization via Exponential Mechanism" (COLT 2022):
Theorems 4/13 and Cor. 14 (GDP of strongly log-concave Lipschitz perturbations), Theorems 25/27
(DP-ERM), 28/29 (DP-SCO), the "moreover" parts (already strongly convex losses), Theorems 16/17
and Algorithms 1–2 (the sampler). The mode labels A1–A3, the sampler labels S1/S2 and the errata
and pitfall numbers below refer to docs/rem.md ("The mechanism", "Samplers and what is certified",
"Exact 𝒢_y draws (S2)", "Errata", "Pitfalls").

The release is x ~ π ∝ exp(−k·F(x; D) − (kμ/2)‖x − c‖²) on C, F the average loss, c the public
centre of C (Errata 5). It is γ-GDP with γ = G_diff·√k/(n·√μ) (Thm 25/28), G_diff = 2L from the
declared Lipschitz constant L (pitfall P5: f(x; s) − f(x; s') differences are 2L-Lipschitz; the
sampler uses G_f = L). (μ, k) come from
:func:`dpbench.privacy.gdp_calibration.rem_calibration`:

* ``mode``: ``erm`` (A1), ``sco`` (A2, population rate; the bound is Theorem 28 with the G² of
  Errata 1) or ``strongly_convex`` (A3: no regulariser, k = s²n²λ/G², λ the problem's
  declared per-example Δ);
* ``calibration``: ``exact`` (s* by root-finding on the Gaussian curve) or ``paper`` (the Lemma 26
  closed forms with corrected parentheses, Errata 2; pitfall P6).

Samplers (``sampler``):

* ``exact``: the problem's ``"regularized_gibbs"`` sampler (:mod:`dpbench.core.exact_samplers`;
  μ = 0 falls back to its ``"gibbs"`` sampler; cell not applicable without one). Certified: the
  ledger charges (ε, δ_Gauss(ε, γ)) with ``gdp_mu`` = γ.
* ``alternating``: S1 + Algorithm 2 (:mod:`dpbench.numerics.samplers.alternating`) from the centre of C,
  with η and the theory T of Theorem 17 computed from public quantities (c_η, C_T; pitfall P2),
  the TV budget τ = δ/(3(1 + e^ε)) and the mechanism's δ_mech = 2δ/3. At ``steps_scale`` = 1 the
  ledger pays δ_mech' + (1 + e^ε)τ (Errata 3, pitfall P1) and is certified in (ε, δ)
  only (TV gives no GDP); ``steps_scale`` < 1 runs a fraction of T (theory T is ~1e8–1e9 at
  εn ~ 10³, pitfall P10): the output is NOT within τ of π, so the ledger says
  ``certified=False`` with the reason. ``func_queries`` counts the sampler's value queries.

The audit's vectorised path :meth:`REM.run_batch` draws many releases at once: the exact sampler's
``draw.many`` (:func:`dpbench.core.exact_samplers.draw_many`), or blocks of compiled alternating
chains.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.exact_samplers import Draw, draw_many, exact_sampler
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..numerics.kernels import resolve_kernel
from ..numerics.samplers.alternating import (
    SamplerPlan,
    alternating_sample,
    alternating_sample_numpy,
    domain_code,
    theory_parameters,
)
from ..privacy.exact_loss import Law1D, epsilon_1d, epsilon_product_2, normalised_law_1d
from ..privacy.gdp_calibration import (
    CALIBRATIONS,
    MODES,
    RemCalibration,
    rem_calibration,
    tv_budget,
    tv_to_dp,
)
from ..numerics.gibbs_law import interval_of_region, sum_losses
from ..privacy.ledger import Charge, PrivacyLedger

SAMPLERS = ("exact", "alternating")

_CARDS = {
    "erm": RateCard(
        expression=("2*L*D*sqrt(p)/(n*(sqrt(log(3/(4*delta))+epsilon)"
                    "-sqrt(log(3/(4*delta)))))"),
        exponents={"n": -1, "p": 0.5, "epsilon": -1},
        citation="GLL'22 Thm 27 (A1): GD√d/(nA), A = √(log(3/(4δ))+ε) − √log(3/(4δ)), G = 2L",
        regime="ε-slope −1 for ε ≪ log(1/δ), → −1/2 for ε ≳ log(1/δ); cap L·D when n ≲ √p/ε",
        notes="G_diff = 2L (docs/rem.md); exact calibration improves the constant (s* vs √2·A)."),
    "sco": RateCard(
        expression="2*L*D*(2*sqrt(p*log(1/delta))/(epsilon*n) + 2/sqrt(n))",
        exponents={"n": -1, "p": 0.5, "epsilon": -1},
        citation="GLL'22 Thm 29 (A2): GD(2√(d log(1/δ))/(εn) + 2/√n), ε, δ < 1/10, G = 2L",
        regime="population excess; n-slope −1 for n ≪ n* = d log(1/δ)/ε², then −1/2 (hard P2h)",
        quantity="excess_population_risk",
        notes="Bound of Thm 28 with the G²/(μn) of docs/rem.md Errata 1."),
    "strongly_convex": RateCard(
        expression="8*L**2*p*log(1/delta)/(Delta*n**2*epsilon**2)",
        exponents={"n": -2, "p": 1, "epsilon": -2},
        citation="GLL'22 Thm 25 'moreover' (A3): d/k with k = s²n²λ/G², ≈ 2G²d log(1/δ)/(λn²ε²)",
        regime="strongly convex ERM; cap L·D when n ≲ G√(p log(1/δ)/(λ L D))/ε",
        notes="G = 2L; no regulariser (λ = the problem's per-example Δ)."),
}


class REM(Algorithm):
    """Regularized exponential mechanism (GLL'22 A1/A2/A3) with exact or alternating sampler."""

    name: ClassVar[str] = "rem"
    summary: ClassVar[str] = ("Regularized exponential mechanism exp(-k F - k mu |x-c|^2/2), "
                              "GDP-calibrated (Gopi-Lee-Liu 2022)")
    citation: ClassVar[str] = ("Gopi, Lee, Liu (COLT 2022), Private Convex Optimization via "
                               "Exponential Mechanism, Thm 25/27/28/29, Alg. 1-2")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness (the exact REM sampler exists on sep_abs).
    check_settings: ClassVar[dict[str, Any]] = {"problem": "sep_abs"}
    params: ClassVar[dict[str, Param]] = {
        "mode": Param("erm", kind="str", choices=MODES,
                      doc="erm (A1), sco (A2) or strongly_convex (A3, no regulariser)"),
        "calibration": Param("exact", kind="str", choices=CALIBRATIONS,
                             doc="exact (root-finding on the Gaussian curve) or paper (Lemma 26)"),
        "sampler": Param("exact", kind="str", choices=SAMPLERS,
                         doc="exact (problem's regularized_gibbs sampler) or alternating "
                             "(S1 + Alg. 2)"),
        "c_eta": Param(64.0, low=0.0, low_open=True,
                       doc="eta = 1/(c_eta G_s^2 log(400/delta_in)) (Thm 17 rule)"),
        "C_T": Param(1.0, low=0.0, low_open=True, doc="T = C_T/(eta mu_s) log(...) (Thm 17 rule)"),
        "steps_scale": Param(1.0, low=0.0, low_open=True, high=1.0,
                             doc="fraction of the theory T run (< 1: not certified)"),
    }

    mode: str
    calibration: str
    sampler: str
    c_eta: float
    C_T: float
    steps_scale: float

    def requirements(self) -> tuple[str, ...]:
        if self.mode == "strongly_convex":
            return ("convex", "lipschitz", "strongly_convex")
        return self.requires

    def rate_card(self) -> RateCard:
        return _CARDS[self.mode]

    # --- calibration --------------------------------------------------------------------------
    def delta_mech(self, delta: float) -> float:
        """δ of the exact mechanism: all of δ for the exact sampler in exact mode; 2δ/3 for the
        paper's closed forms (the calibration of Thms 27/29) and for the alternating sampler, whose
        TV budget τ = δ/(3(1 + e^ε)) costs the remaining δ/3 (docs/rem.md Errata 3)."""
        if self.sampler == "exact" and self.calibration == "exact":
            return delta
        return 2.0 * delta / 3.0

    def calibrate(self, n: int, p: int, problem: Problem, epsilon: float,
                  delta: float) -> RemCalibration:
        """(μ, k) from public quantities: n, p, ε, δ, L (G_f = L, G_diff = 2L), diam C, Δ."""
        lipschitz = float(problem.lipschitz)
        delta_mech = self.delta_mech(delta)
        lam = float(problem.strong_convexity) if self.mode == "strongly_convex" else 0.0
        return rem_calibration(self.mode, self.calibration, n=n, d=p, epsilon=epsilon,
                               delta_mech=delta_mech, g_diff=2.0 * lipschitz, g_f=lipschitz,
                               diameter=float(problem.constraint.diameter), lam=lam,
                               delta_total=delta)

    def plan(self, cal: RemCalibration, problem: Problem, p: int, epsilon: float,
             delta: float) -> SamplerPlan:
        """The alternating sampler's η and theory T (Theorem 17 rule; G_s = kG_f, μ_s = k(μ+λ))."""
        g_s = cal.k * float(problem.lipschitz)
        mu_s = cal.k * (cal.mu + cal.lam)
        return theory_parameters(g_s, mu_s, p, float(problem.constraint.diameter),
                                 tv_budget(epsilon, delta), c_eta=self.c_eta, c_t=self.C_T)

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """``k`` and ``mu`` of the law exp(−kF − kμ‖θ − c‖²/2), ``gdp_mu`` γ (its GDP
        parameter) and, for the alternating sampler, ``steps`` (the steps run: ``steps_scale`` ×
        the theory T) and ``steps_theory`` — as :meth:`calibrate` and :meth:`plan` give them to
        :meth:`run`."""
        cal = self.calibrate(n, p, problem, epsilon, delta)
        out = {"k": float(cal.k), "mu": float(cal.mu), "gdp_mu": float(cal.gamma)}
        if self.sampler == "alternating":
            plan = self.plan(cal, problem, p, epsilon, delta)
            out.update(steps=float(self.steps(plan)), steps_theory=float(plan.steps_theory))
        return out

    def steps(self, plan: SamplerPlan) -> int:
        return max(1, math.ceil(self.steps_scale * plan.steps_theory))

    def cost(self, n: int, p: int) -> float:
        """Exact: ~ n·p; alternating: ~ 11 queries × p per step, T at ε = 1, δ = 1e-5, L = 1,
        diameter 2 (λ = 1 for the strongly convex mode)."""
        if self.sampler == "exact":
            return float(n * p)
        delta = 1e-5
        cal = rem_calibration(self.mode, self.calibration, n=n, d=p, epsilon=1.0,
                              delta_mech=self.delta_mech(delta), g_diff=2.0, g_f=1.0,
                              diameter=2.0, lam=1.0 if self.mode == "strongly_convex" else 0.0,
                              delta_total=delta)
        plan = theory_parameters(cal.k, cal.k * (cal.mu + cal.lam), p, 2.0,
                                 tv_budget(1.0, delta), c_eta=self.c_eta, c_t=self.C_T)
        return 11.0 * p * self.steps(plan)

    def not_applicable_reason(self, problem: Problem) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason:
            return reason
        if self.sampler == "alternating":
            p = 2
            if domain_code(problem.constraint, p) is None:
                return (f"rem: the alternating sampler needs a box or ball constraint for exact "
                        f"𝒢_y draws (S2), got {type(problem.constraint).__name__}")
        return None

    # --- running ------------------------------------------------------------------------------
    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        cal = self.calibrate(n, p, problem, epsilon, delta)
        center = problem.constraint.center(p)
        info: dict[str, Any] = {"calibration": cal.to_dict(), "gamma": cal.gamma,
                                "bound": cal.bound, "mode": self.mode}
        if self.sampler == "exact":
            return self._run_exact(data, problem, cal, center, epsilon, rng, info)
        return self._run_alternating(data, problem, cal, center, epsilon, delta, rng, info)

    def _run_exact(self, data: Dataset, problem: Problem, cal: RemCalibration,
                   center: np.ndarray, epsilon: float, rng: np.random.Generator,
                   info: dict[str, Any]) -> Release:
        draw = self._exact_draw(data, problem, cal, center)
        theta = problem.constraint.project(np.asarray(draw(rng), dtype=float))
        return Release(theta=theta, ledger=self._exact_ledger(epsilon, cal), func_queries=0,
                       iterations=0, info=info)

    def _exact_draw(self, data: Dataset, problem: Problem, cal: RemCalibration,
                    center: np.ndarray) -> Draw:
        """The problem's exact sampler of π (``"regularized_gibbs"``); not applicable without."""
        draw = exact_sampler("regularized_gibbs", problem, data, cal.k, cal.mu, center)
        if draw is None:
            raise NotApplicable(f"rem: problem {problem.name!r} has no exact REM sampler "
                                "(law 'regularized_gibbs'); use sampler='alternating'")
        return draw

    # --- the exact output law (the audit) -----------------------------------------------------
    def _exact_laws(self, data: Dataset, problem: Problem, epsilon: float,
                    delta: float) -> list[Law1D] | None:
        """The release's law as independent 1-D laws, one per coordinate, or ``None`` [derived].

        π ∝ exp(−k·F(θ; D) − (kμ/2)‖θ − c‖²) on C, the law the exact sampler draws (the
        projection on C after it changes nothing: its draws lie in C). At p = 1 on an interval
        C: that density, normalised by quadrature of ``problem.loss`` (the data points as
        breakpoints). On SEP-ABS at any p it factorises over the coordinates (the problem's
        :meth:`~dpbench.problems.sep_abs.SepAbs.rem_factors`, each an exact mixture of truncated
        normals with a closed-form normaliser). ``None`` for the alternating sampler (a finite
        chain) and where neither form applies."""
        if self.sampler != "exact" or not 0 < delta < 1:
            return None
        cal = self.calibrate(data.n, data.p, problem, epsilon, delta)
        center = problem.constraint.center(data.p)
        factors = getattr(problem, "rem_factors", None)
        if factors is not None and cal.k * (float(problem.strong_convexity) + cal.mu) > 0:
            return [Law1D(float(f.edges[0]), float(f.edges[-1]), f.logpdf, (),
                          tuple(float(x) for x in f.edges[1:-1]))
                    for f in factors(data, cal.k, cal.mu, center)]
        ends = interval_of_region(problem.constraint)
        if data.p != 1 or ends is None:
            return None
        k, mu, c = cal.k, cal.mu, float(center[0])

        def log_weight(t: np.ndarray) -> np.ndarray:
            t = np.asarray(t, dtype=float).reshape(-1)
            return (-k * sum_losses(problem, data, t[:, None]) / data.n
                    - 0.5 * k * mu * (t - c) ** 2)

        return [normalised_law_1d(log_weight, ends[0], ends[1],
                                  breakpoints=np.asarray(data.X, dtype=float).ravel())]

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the exact sampler's release (:meth:`_exact_laws`): one coordinate
        (:func:`dpbench.privacy.exact_loss.epsilon_1d`), or the product of two on SEP-ABS at
        p = 2, whose log ratio is a sum of independent terms
        (:func:`~dpbench.privacy.exact_loss.epsilon_product_2`); ``None`` for p ≥ 3. The claim
        it compares with is (ε, δ_Gauss(ε, γ)) of the γ-GDP theorem."""
        P, Q = self._exact_laws(d0, problem, epsilon, delta), self._exact_laws(
            d1, problem, epsilon, delta)
        if P is None or Q is None:
            return None
        if len(P) == 1:
            return epsilon_1d(P[0], Q[0], delta)
        if len(P) == 2:
            return epsilon_product_2(P, Q, delta)
        return None

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log π_D(θ) − log π_D′(θ), summed over the coordinates' laws (:meth:`_exact_laws`)."""
        P, Q = self._exact_laws(d0, problem, epsilon, delta), self._exact_laws(
            d1, problem, epsilon, delta)
        if P is None or Q is None:
            return None
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        return np.sum([a.logpdf(thetas[:, j]) - b.logpdf(thetas[:, j])
                       for j, (a, b) in enumerate(zip(P, Q, strict=True))], axis=0)

    def _exact_ledger(self, epsilon: float, cal: RemCalibration) -> PrivacyLedger:
        return PrivacyLedger.from_charges(Charge(
            f"REM ({self.mode}, {self.calibration} calibration, exact sampler)", float(epsilon),
            float(cal.delta_mech),
            "GLL'22 Thm 4/13, Cor. 14, Thm 25/28: γ-GDP, γ = G_diff√k/(n√μ); δ = δ_Gauss(ε, γ)",
            certified=True, gdp_mu=float(cal.gamma)))

    def _run_alternating(self, data: Dataset, problem: Problem, cal: RemCalibration,
                         center: np.ndarray, epsilon: float, delta: float,
                         rng: np.random.Generator, info: dict[str, Any]) -> Release:
        plan = self.plan(cal, problem, data.p, epsilon, delta)
        steps = self.steps(plan)
        constraint = problem.constraint
        lam = cal.k * cal.mu
        kernel = resolve_kernel(problem)
        if kernel is not None:
            xs, stats = alternating_sample(kernel, data, k=cal.k, lam=lam, center=center,
                                           constraint=constraint, eta=plan.eta, steps=steps,
                                           x0=center, rng=rng)
            theta = xs[0]
        else:
            def loss_row(x: np.ndarray, i: int) -> float:
                return float(problem.loss(x, Dataset(data.X[i:i + 1],
                                                     None if data.y is None else data.y[i:i + 1]))[0])

            theta, stats = alternating_sample_numpy(loss_row, data.n, k=cal.k, lam=lam,
                                                    center=center, constraint=constraint,
                                                    eta=plan.eta, steps=steps, x0=center,
                                                    rng=rng)
        if steps < plan.steps_theory:
            info["privacy_note"] = "nominal (ε, δ): scaled-down T does not certify TV ≤ τ"
        info.update(stats.as_info())
        info.update({"eta": plan.eta, "eta_g2": plan.eta_g2, "steps_theory": plan.steps_theory,
                     "tau": plan.tau, "compiled": kernel is not None})
        return Release(theta=constraint.project(theta),
                       ledger=self._alternating_ledger(epsilon, cal, plan, steps),
                       func_queries=stats.queries, iterations=steps, info=info)

    def _alternating_ledger(self, epsilon: float, cal: RemCalibration, plan: SamplerPlan,
                            steps: int) -> PrivacyLedger:
        """δ_mech + (1 + e^ε)τ, certified only when the chain runs the theory T (Errata 3)."""
        certified = steps >= plan.steps_theory
        delta_spent = tv_to_dp(epsilon, cal.delta_mech, plan.tau)
        theorem = ("GLL'22 Thm 25/28 (γ-GDP target) + Thm 17 sampler (TV ≤ τ); "
                   "δ = δ_Gauss(ε, γ) + (1 + e^ε)τ (docs/rem.md Errata 3)")
        label = f"REM ({self.mode}, {self.calibration} calibration, alternating sampler)"
        if not certified:
            label += (f" — NOT certified: {steps} of the theory T = {plan.steps_theory} steps "
                      f"(steps_scale = {self.steps_scale:g}); TV to the target unknown")
        return PrivacyLedger.from_charges(Charge(label, float(epsilon), float(delta_spent),
                                                 theorem, certified=certified))

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """``size`` independent releases from one calibration (public quantities, as in
        :meth:`run`).

        * ``exact``: ``size`` draws of the problem's exact sampler of π at once
          (:func:`~dpbench.core.exact_samplers.draw_many`: its vectorised ``draw.many`` where the
          factory attaches one, e.g. sep_abs, lin_ball, flat_1d; else a loop of draws), each
          projected on C as :meth:`run` does: exactly :meth:`run`'s law.
        * ``alternating``: ``size`` independent chains of :meth:`run`'s compiled chain (same η,
          same T·``steps_scale`` steps, same start at the centre of C, same RGO accept rule),
          advanced by compiled calls over blocks of chains
          (:func:`~dpbench.numerics.samplers.alternating.alternating_sample` with ``chains``).
          ``None`` (the audit then loops :meth:`run`) for a problem without a compiled kernel:
          the numpy chain evaluates ``problem.loss`` at one point per query, which cannot be
          batched across chains.
        """
        n, p = data.n, data.p
        cal = self.calibrate(n, p, problem, epsilon, delta)
        center = problem.constraint.center(p)
        if self.sampler == "exact":
            draw = self._exact_draw(data, problem, cal, center)
            thetas = problem.constraint.project(draw_many(draw, rng, size))
            return BatchRelease(thetas, self._exact_ledger(epsilon, cal))
        kernel = resolve_kernel(problem)
        if kernel is None:
            return None
        plan = self.plan(cal, problem, p, epsilon, delta)
        steps = self.steps(plan)
        xs, _ = alternating_sample(kernel, data, k=cal.k, lam=cal.k * cal.mu, center=center,
                                   constraint=problem.constraint, eta=plan.eta, steps=steps,
                                   x0=center, rng=rng, chains=size)
        return BatchRelease(problem.constraint.project(xs),
                            self._alternating_ledger(epsilon, cal, plan, steps))
