"""GTU A6: the differentially private uniform sampler from the Rashomon set (ψ > 0).

Ganesh, Thakurta, Upadhyay (GTU), Definition 1.4, Theorems 2.1, 2.4, 2.7, B.6. The labels A0.1–A6,
the errata and pitfall numbers below refer to docs/langevin.md ("Mechanism labels", "Errata",
"Pitfalls"); the exact radial law on F1 is in its section "The Rashomon law on F1".

Target: π_{β,ψ} ∝ exp(−β·max{𝓛(θ; D), 𝓛* + ψ})·1_C (𝓛 average loss, 𝓛* = min_C 𝓛 from the
problem's certified solver, A0.1). Conditioned on landing in the Rashomon set
G = {𝓛 ≤ 𝓛* + ψ} the draw is exactly uniform on G, and the density on G dominates the density
outside (Definition 1.4 items 1–2); E[𝓛] ≤ 𝓛* + ψ + p/β for convex losses (T2.4).

Regimes (``regime``):

* ``pure``: β = εn/(2L‖C‖) (Algorithm 2; Errata 20 — the exact constant), ε-DP for every ψ,
  without convexity (T2.1: 𝓛 and 𝓛* each move by ≤ L‖C‖/n, max is 1-Lipschitz).
* ``approx``: the A4 (T2.7) calibration with the thresholded gradient sensitivity
  Δ_ψ = 2L/n + √(2Mψ) (Errata 2 and 3: replace-one gives 2L/n, smoothness gives √(2Mψ) inside G —
  **only when θ* is a stationary point**, so a minimiser on ∂C makes the cell not applicable).
  The ψ = 0 calibrations of :mod:`dpbench.privacy.langevin` are written with Δ = 2L/n; the
  [derived] substitution L → nΔ_ψ/2 gives T2.7's max{L²/n², Mψ} dependence (Errata 21: regime
  restrictions apply; no hitting guarantee is known for (ε, δ) Rashomon samplers). The
  stationarity check reads the data (‖∇𝓛(θ*)‖ ≤ 1e-8·L): like any check that the minimiser is
  interior it is a precondition of the theorem, reported as not applicable, not a release.

``samples`` = k draws; privacy composes (k·(ε/k) pure, k·(ε/k, δ/k) approx: each draw is calibrated
at ε/k (δ/k), Pitfalls 11). The release is the first draw; all draws are in ``info``.

Samplers: ``exact`` — the problem's ``"rashomon"`` sampler of :mod:`dpbench.core.exact_samplers`
(F1 radial mixture, :mod:`dpbench.numerics.samplers.rashomon`), certified; ``rwm``/``mala`` — the
MCMC chains of :mod:`dpbench.numerics.samplers.mcmc` run on the thresholded loss (a problem view whose losses are
max{𝓛, 𝓛* + ψ}, A0.2), nominal only (``certified=False``).

``info`` exposes ``in_rashomon`` (0/1: 𝓛(θ) ≤ 𝓛* + ψ) and ``rashomon_radius`` (‖θ − θ*‖/√(2ψ/m),
whose p-th power is U[0, 1] given θ ∈ G for isotropic quadratics) for the hit-rate and uniformity
diagnostics (:func:`dpbench.numerics.samplers.rashomon.rashomon_diagnostics`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.exact_samplers import Draw, draw_many, exact_sampler, has_exact_sampler
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import Ball, ConstraintSet
from ..core.tags import get_tags
from ..numerics.samplers.expmech import SAMPLERS
from ..numerics.samplers.mcmc import run_chain, run_chains
from ..numerics.gibbs_law import RashomonBall, rashomon_epsilon
from ..privacy.langevin import beta_a4_literal, beta_a4_tight, pure_gibbs_beta
from ..privacy.ledger import Charge, PrivacyLedger
from .gibbs import mcmc_theorem_note

__all__ = ["Rashomon", "ThresholdedProblem", "rashomon_beta", "rashomon_sensitivity"]

REGIMES = ("pure", "approx")
#: ‖∇𝓛(θ*)‖ above this multiple of L means θ* is not a stationary point (approx regime).
STATIONARY_RTOL = 1e-8


def rashomon_sensitivity(L: float, M: float, n: int, psi: float) -> float:
    """Δ_ψ = 2L/n + √(2Mψ): gradient sensitivity of the thresholded loss (docs/langevin.md Errata
    2, 3; A0.3)."""
    return 2.0 * L / n + math.sqrt(2.0 * M * psi)


def rashomon_beta(regime: str, calibration: str, epsilon: float, delta: float, n: int,
                  L: float, diameter: float, m: float, M: float, psi: float) -> float:
    """β of A6: εn/(2L‖C‖) (pure) or the A4 β with L → nΔ_ψ/2 (approx, [derived])."""
    if regime == "pure":
        return pure_gibbs_beta(epsilon, n, L, diameter)
    L_eff = n * rashomon_sensitivity(L, M, n, psi) / 2.0
    calib = beta_a4_literal if calibration == "literal" else beta_a4_tight
    return calib(epsilon, delta, n, L_eff, m)


class ThresholdedProblem(Problem):
    """A view of ``base`` whose per-example losses are all max{𝓛(θ), 𝓛* + ψ} (so k·Σ = β·𝓛̃ with
    k = β/n) and whose gradients are ∇ℓᵢ·1[𝓛 > 𝓛* + ψ] (A0.2) — what the MCMC chains sample.

    Not registered; no compiled kernel (the numpy chain path is used)."""

    name: ClassVar[str] = "thresholded"

    def __init__(self, base: Problem, threshold: float) -> None:
        super().__init__()
        self.base = base
        self.threshold = float(threshold)

    @property
    def constraint(self) -> ConstraintSet:
        return self.base.constraint

    @property
    def lipschitz(self) -> float:
        return self.base.lipschitz

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        value = max(self.base.risk(theta, data), self.threshold)
        return np.full(data.n, value)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        g = self.base.grad(theta, data, idx)
        return g if self.base.risk(theta, data) > self.threshold else np.zeros_like(g)


def _has_exact(problem: Problem) -> bool:
    return has_exact_sampler("rashomon", problem)


class Rashomon(Algorithm):
    """k draws of the Rashomon Gibbs law π_{β,ψ} (GTU A6), pure or (ε, δ) calibration."""

    name: ClassVar[str] = "rashomon"
    summary: ClassVar[str] = ("DP uniform sampler from the Rashomon set {L <= L* + psi}: Gibbs law "
                              "of max(L, L* + psi), pure or (ε,δ) β (GTU A6)")
    citation: ClassVar[str] = ("Ganesh, Thakurta, Upadhyay (2023), Def. 1.4, Thm 2.1/2.4/2.7/B.6; "
                               "docs/langevin.md A6, Errata 2, 3, 20, 21")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness (the exact Rashomon sampler exists on mean_est).
    check_settings: ClassVar[dict[str, Any]] = {"problem": "mean_est"}
    params: ClassVar[dict[str, Param]] = {
        "psi": Param(0.05, low=0.0, low_open=True, doc="Rashomon threshold ψ > 0 (average scale)"),
        "regime": Param("pure", kind="str", choices=REGIMES,
                        doc="pure (β = εn/(2L‖C‖), any ψ) or approx (A4 β with Δ_ψ)"),
        "calibration": Param("tight", kind="str", choices=("tight", "literal"),
                             doc="A4 constants for regime='approx' (tight LSI or T2.7 literal)"),
        "samples": Param(1, kind="int", low=1, doc="k draws; privacy composes (ε/k each)"),
        "sampler": Param("exact", kind="str", choices=SAMPLERS,
                         doc="exact (problem's radial sampler, certified) or rwm/mala on the "
                             "thresholded loss (nominal)"),
        "steps": Param(None, kind="int", low=1, none="the public default", identity_of_none=0,
                       doc="MCMC steps"),
    }

    psi: float
    regime: str
    calibration: str
    samples: int
    sampler: str
    steps: int | None

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.privacy = "approx" if self.regime == "approx" else "pure"  # type: ignore[misc]

    def requirements(self) -> tuple[str, ...]:
        if self.regime == "approx":
            return ("convex", "lipschitz", "strongly_convex", "smooth")
        return self.requires

    def not_applicable_reason(self, problem: Problem) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason is None and self.sampler == "exact" and not _has_exact(problem):
            reason = (f"problem {problem.name!r} has no exact Rashomon sampler; use "
                      "sampler='rwm' or 'mala' (nominal)")
        return reason

    def rate_card(self) -> RateCard:
        """Pure: ψ + 2L‖C‖p·k/(εn) (T2.4 with β = εn/(2kL‖C‖)); approx: ψ + p/β with the A4 β
        (regime (ii), L²p log(1/δ)/(mε²n²) up to the Δ_ψ substitution)."""
        k, psi = self.samples, self.psi
        if self.regime == "approx":
            return RateCard(
                expression=(f"{psi!r} + {k * k}*p*(2*L/n + sqrt(2*beta*{psi!r}))**2"
                            f"*log({k}/delta)/(4*Delta*epsilon**2)"),
                exponents={"n": -2, "p": 1, "epsilon": -2},
                citation=("GTU Thm 2.7 + T2.4: ψ + p/β with Δ_ψ = 2L/n + √(2Mψ) "
                          "(docs/langevin.md Errata 2, 3)"),
                regime="regime (ii) ψ ≤ 2L²/(Mn²): n^−2; above, Δ_ψ ≈ √(2Mψ) and the bound is "
                       "flat in n (regime (i), docs/langevin.md Errata 21)",
                notes="psi is embedded as a number (sweep it with expect: entries); beta is the "
                      "smoothness M, Delta the strong convexity m")
        return RateCard(
            expression=f"{psi!r} + {2 * k}*L*D*p/(n*epsilon)",
            exponents={"n": -1, "p": 1, "epsilon": -1},
            citation="GTU Thm 2.1 + 2.4: ψ + p/β with β = εn/(2L‖C‖) (Table 1)",
            regime="p/β-dominated for ψ ≪ 2L‖C‖p/(εn); ψ-dominated above (excess ≈ ψp/(p+2) on "
                   "F1)",
            notes="psi is embedded as a number: sweep it with the expect: entries")

    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """E[𝓛 − 𝓛*] of the unconstrained radial law on ``mean_est`` (docs/langevin.md, "The
        Rashomon law on F1": :func:`dpbench.numerics.samplers.rashomon.expected_excess`; exact when the
        truncation to C is negligible); NaN elsewhere."""
        from ..numerics.samplers.rashomon import expected_excess

        if get_tags(problem).closed_form != "mean_est":
            return math.nan
        try:
            beta = self._beta(problem, data, problem.solve(data).theta, epsilon, delta)
        except NotApplicable:
            return math.nan
        return expected_excess(data.p, beta, self.psi)

    def oracle_kind(self, problem: Problem) -> str:
        if get_tags(problem).closed_form != "mean_est":
            return ""
        return "exact" if self.sampler == "exact" else "heuristic"  # a finite chain: approximate

    def cost(self, n: int, p: int) -> float:
        return float(self.samples * n * p) * (1.0 if self.sampler == "exact" else 4.0 * p * n)

    # --- running ------------------------------------------------------------------------------
    def _beta(self, problem: Problem, data: Dataset, theta_star: np.ndarray, epsilon: float,
              delta: float) -> float:
        n, k = data.n, self.samples
        L = float(problem.lipschitz)
        if self.regime == "approx":
            grad_norm = float(np.linalg.norm(problem.full_grad(theta_star, data)))
            if grad_norm > STATIONARY_RTOL * L:
                raise NotApplicable(
                    f"rashomon(regime='approx'): θ* is not a stationary point (‖∇𝓛(θ*)‖ = "
                    f"{grad_norm:.3g}, a minimiser on ∂C); the √(2Mψ) sensitivity bound needs an "
                    "interior minimiser (docs/langevin.md Errata 2, 3)")
        return rashomon_beta(self.regime, self.calibration, epsilon / k, delta / k, n, L,
                             float(problem.constraint.diameter), float(problem.strong_convexity),
                             float(problem.smoothness), self.psi)

    def _exact(self, problem: Problem, data: Dataset, beta: float) -> Draw:
        draw = exact_sampler("rashomon", problem, data, beta, self.psi)
        if draw is None:
            raise NotApplicable(f"problem {problem.name!r} has no exact Rashomon sampler for "
                                "this data")
        return draw

    def _draw(self, problem: Problem, data: Dataset, beta: float, threshold: float,
              rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
        if self.sampler == "exact":
            draw = self._exact(problem, data, beta)
            return np.asarray(draw(rng), dtype=float), {"steps": 0, "certified": True}
        view = ThresholdedProblem(problem, threshold)
        theta, info = run_chain(view, data, beta / data.n, problem.constraint, rng,
                                kind=self.sampler, steps=self.steps)
        return theta, info

    def _setup(self, problem: Problem, data: Dataset, epsilon: float, delta: float
               ) -> tuple[Any, float, float]:
        """(θ*'s optimum, the threshold 𝓛* + ψ, β): A6's public calibration at ε/k (δ/k)."""
        opt = problem.solve(data)
        return opt, opt.value + self.psi, self._beta(problem, data, opt.theta, epsilon, delta)

    def _charge(self, epsilon: float, delta: float, certified: bool) -> Charge:
        """The charge of one of the k draws: (ε/k, δ/k), or (ε/k, 0) in the pure regime."""
        k = self.samples
        eps_k, delta_k = epsilon / k, (delta / k if self.regime == "approx" else 0.0)
        theorem = ("GTU Thm 2.1 (ε-DP for every ψ, β = εn/(2L‖C‖))" if self.regime == "pure"
                   else f"GTU Thm 2.7 ({self.calibration}) with Δ_ψ = 2L/n + √(2Mψ) "
                        "(docs/langevin.md Errata 2, 3)")
        if not certified:
            theorem += "; " + mcmc_theorem_note(self.sampler)
        return Charge(f"Rashomon Gibbs draw (ψ={self.psi:g}, {self.sampler})",
                      eps_k, delta_k, theorem, certified=certified)

    # --- the exact output law (the audit) -----------------------------------------------------
    def _exact_law(self, problem: Problem, data: Dataset, epsilon: float,
                   delta: float) -> RashomonBall | None:
        """The law of the release (the first draw) on F1 mean estimation: ∝ exp(−β·max{½‖θ − d̄‖²,
        ψ}) on C = B(0, R) (𝓛 − 𝓛* = ½‖θ − d̄‖² there, d̄ ∈ C), β at ε/k as :meth:`run` has it.
        ``None`` elsewhere (no exact law), for MCMC, and where the calibration does not apply."""
        c = problem.constraint
        if (self.sampler != "exact" or get_tags(problem).closed_form != "mean_est"
                or not isinstance(c, Ball) or not _has_exact(problem)):
            return None
        try:
            _, _, beta = self._setup(problem, data, epsilon, delta)
        except NotApplicable:
            return None
        return RashomonBall(np.asarray(data.X, dtype=float).mean(axis=0), float(beta),
                            float(self.psi), float(c.radius))

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the release on F1 (:class:`dpbench.numerics.gibbs_law.RashomonBall`:
        quadrature at p = 1; at p = 2 and δ = 0 the supremum of the log ratio, searched on ∂C and
        on the two Rashomon spheres where it lies; ``None`` otherwise). Its claim is the first
        draw's ε/k."""
        P, Q = (self._exact_law(problem, d, epsilon, delta) for d in (d0, d1))
        if P is None or Q is None:
            return None
        return rashomon_epsilon(P, Q, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log π_D(θ) − log π_D′(θ) = β(f(θ − d̄′) − f(θ − d̄)) − log Z + log Z′, f(x) =
        max{½‖x‖², ψ}, on F1 (:meth:`exact_epsilon`)."""
        P, Q = (self._exact_law(problem, d, epsilon, delta) for d in (d0, d1))
        if P is None or Q is None:
            return None
        return P.log_density(thetas) - Q.log_density(thetas)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        opt, threshold, beta = self._setup(problem, data, epsilon, delta)
        k = self.samples
        m = float(problem.strong_convexity) or 1.0
        draws, flags, radii, charges, steps = [], [], [], [], 0
        for _ in range(k):
            theta, info = self._draw(problem, data, beta, threshold, rng)
            certified = bool(info["certified"])
            steps += int(info["steps"])
            draws.append(theta)
            flags.append(float(problem.risk(theta, data) <= threshold))
            radii.append(float(np.linalg.norm(theta - opt.theta)) / math.sqrt(2 * self.psi / m))
            charges.append(self._charge(epsilon, delta, certified))
        ledger = PrivacyLedger.from_charges(*charges)
        queries = data.n * (steps + k)
        out = {"beta": beta, "psi": self.psi, "threshold": threshold, "in_rashomon": flags[0],
               "rashomon_radius": radii[0], "samples": np.array(draws),
               "in_rashomon_all": np.array(flags), "rashomon_radius_all": np.array(radii),
               "hit_fraction": float(np.mean(flags)), "sampler": self.sampler,
               "certified": ledger.certified}
        return Release(theta=draws[0], ledger=ledger, func_queries=queries,
                       grad_queries=queries if self.sampler == "mala" else 0,
                       iterations=steps, info=out)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """``size`` releases: :meth:`run` releases its first draw, and the k − 1 later draws
        (independent, after it) do not change that draw's law, so each row is one draw of
        π_{β,ψ} at :meth:`run`'s β, with :meth:`run`'s ledger of k charges.

        ``exact``: the exact sampler's vectorised form (exactly :meth:`run`'s law). ``rwm`` /
        ``mala``: :meth:`run`'s chain per row (same start, steps, step size, accept rule) on the
        thresholded potential β·max{𝓛, 𝓛* + ψ}, compiled with the problem's kernel
        (:func:`~dpbench.numerics.samplers.mcmc.run_chains` with the floor n(𝓛* + ψ) on the
        sum; :meth:`run` runs the numpy chain of :class:`ThresholdedProblem`, the same chain up
        to floating-point rounding). ``None`` for MCMC on a problem without a compiled kernel."""
        _, threshold, beta = self._setup(problem, data, epsilon, delta)
        if self.sampler == "exact":
            thetas = draw_many(self._exact(problem, data, beta), rng, size)
        else:
            out = run_chains(problem, data, beta / data.n, problem.constraint, rng, size,
                             kind=self.sampler, steps=self.steps, floor=data.n * threshold)
            if out is None:
                return None
            thetas = out[0]
        certified = self.sampler == "exact"
        charges = [self._charge(epsilon, delta, certified) for _ in range(self.samples)]
        return BatchRelease(thetas, PrivacyLedger.from_charges(*charges))
