"""BST14 Algorithm 4 (A4, pure localisation) and Appendix B (A4δ, Gaussian localisation).

Bassily, Smith and Thakurta, "Private Empirical Risk Minimization: Efficient Algorithms and Tight
Error Bounds" (FOCS 2014; arXiv:1405.7085): Algorithm 4 with Thm 4.1 (privacy), Lemma 4.2 and
Thm 4.3 (utility); Appendix B, Thm B.1/B.2. The radius rules, the output-perturbation constants,
the KINK-SC oracles O5/O6 with their reference run, and Errata 2 and 5 are in docs/bst14.md
("Derived constants", "Oracle curves and reference runs", "Errata").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.stats import chi2

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import BallAt, Intersection
from ..core.tags import get_tags
from ..numerics.kernels import resolve_kernel
from ..numerics.samplers.expmech import sample_expmech, sample_expmech_many
from ..numerics.samplers.mcmc import region_balls
from ..privacy.accountant import ACCOUNTING, calibrate_noisy_sgd, noisy_sgd_epsilon
from ..privacy.exact_loss import Law1D, digest, epsilon_1d, memo
from ..privacy.gaussian import analytic_gaussian_sigma, classical_gaussian_sigma
from ..numerics.gibbs_law import (
    gauss_legendre_panels,
    gibbs_epsilon,
    gibbs_log_density_ratio,
    gibbs_tilt,
    log_tilted_segment,
)
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.noise import gaussian_noise
from ..theory.expected_excess import localize_radius
from ..numerics.line_law import (
    GaussianStep,
    LineLaw,
    cached,
    line_epsilon,
    line_log_ratio,
    nodes_for,
    point_mass,
    propagate,
    release_key,
)
from .noisy_sgd import (
    compiled_projection,
    line_interval,
    noisy_sgd_chains,
    noisy_sgd_line_law,
    noisy_sgd_path,
)
from .output_perturbation import OutputPerturbation, SolverGapExceeded

_SOLVER_GAP = Param(
    1e-10, kind="float", low=0.0, high=math.inf, high_open=True,
    doc="public bound on the solver's certified gap (average scale); inflates the step-1 "
        "sensitivity by 2·√(2·solver_gap/Δ) (docs/bst14.md)")


@dataclass(frozen=True)
class _GaussianPlan:
    """What a Localize-δ run computes before its first draw (:meth:`LocalizeGaussian._plan`): the
    non-private optimum and the public calibration of both steps."""

    opt: Any
    sensitivity: float
    sigma0: float
    r0: float
    steps: int
    z: float
    sigma: float
    eps_sgd: float


def localization_region(problem: Problem, theta0: np.ndarray, r0: float) -> Intersection:
    """C₀ = C ∩ B(θ₀, r₀) (BST14 Algorithm 4 step 1, Appendix B step 1).

    Its ``diameter`` is the public bound min(‖C‖, 2r₀) (both terms data-independent).
    """
    return Intersection(problem.constraint, BallAt(theta0, r0))


class Localize(Algorithm):
    """Localised exponential mechanism, pure ε-DP for Lipschitz strongly convex losses (BST14 Alg. 4).

    1. **Output perturbation at ε/2** (Algorithm 3, reused from :class:`OutputPerturbation`):
       θ₀ = Π_C(θ̂ + b), b Gamma-norm with scale s = sensitivity/(ε/2), sensitivity
       2L/(nΔ) + 2√(2·solver_gap/Δ) (docs/bst14.md; the second term covers the inexact solver).
    2. **Radius** r₀, data-independent (``radius_rule``):
       ``"quantile"`` (default, [derived], docs/bst14.md) r₀ = Gamma.ppf(1 − n⁻³;
       shape p, scale s), so ‖b‖ ≤ r₀ with probability exactly 1 − n⁻³;
       ``"paper"`` r₀ = ζ·p·s with ζ = 3 log n, i.e. 12·L·p·log n/(Δεn) for an exact solver
       (Lemma 4.2; docs/bst14.md Errata 2: Algorithm 3 says "ζ < 1" but is used with ζ = 3 log n).
       Both come from :func:`dpbench.theory.expected_excess.localize_radius`, which uses the exact-solver scale
       s₀ = 4L/(Δεn). Both rules are linear in the noise scale, so r₀ is rescaled by s/s₀ to
       match the noise actually added in step 1 (otherwise the solver inflation would make the
       ball too small for its stated coverage). r₀ depends on n, p, L, Δ, ε and the public
       ``solver_gap`` only.
    3. C₀ = C ∩ B(θ₀, r₀), a post-processing of θ₀.
    4. **Exponential mechanism on C₀ at ε/2** (Algorithm 2): density ∝ exp(−k′·𝓛(θ; D)) with
       k′ = (ε/2)/(2L‖C₀‖) and the public diameter bound ‖C₀‖ ≤ min(2r₀, ‖C‖), drawn by
       :func:`dpbench.numerics.samplers.expmech.sample_expmech` (``sampler``: ``"exact"`` uses the
       problem's exact sampler, ``"rwm"``/``"mala"`` are MCMC with a nominal guarantee,
       docs/bst14.md).

    Privacy (Thm 4.1): basic composition ε/2 + ε/2. The second charge is ``certified=False`` when
    the sampler is MCMC.

    Utility (Lemma 4.2, Thm 4.3): θ* ∈ C₀ with probability ≥ 1 − n⁻³, then E[excess] =
    O(p²L² log n/(nΔε²)) on the sum scale. Oracle O6 (KINK-SC, docs/bst14.md): E ≈ p/k′ = 8pLr₀/ε.
    """

    name: ClassVar[str] = "localize"
    summary: ClassVar[str] = ("Output perturbation at ε/2 localises, then the exponential mechanism "
                              "on C ∩ B(θ₀, r₀) at ε/2 (BST14 Alg. 4)")
    citation: ClassVar[str] = "Bassily, Smith, Thakurta (FOCS 2014), Algorithm 4, Thm 4.1 and 4.3"
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "strongly_convex")
    # Still 1: an MCMC chain whose start θ₀ = Π_C(θ̂ + b) rounds an ulp outside C is now pulled
    # inside (numerics.samplers.mcmc.inward_start) instead of raising, and every run that
    # completed before releases the same θ, so no stored cell is stale (a failed cell is retried
    # on resume; docs/writing-a-plugin.md, 'version').
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "radius_rule": Param(
            "quantile", kind="str", choices=("quantile", "paper"),
            doc="r₀: exact Gamma quantile at 1 − n⁻³ (derived) or the paper's 12Lp·log n/(Δεn)"),
        "sampler": Param(
            "exact", kind="str", choices=("exact", "rwm", "mala"),
            doc="ExpMech sampler on C₀: the problem's exact sampler, or MCMC (nominal ε-DP)"),
        "steps": Param(None, kind="int", low=1, none="the sampler's default", identity_of_none=0,
                       doc="MCMC steps; ignored by the exact sampler"),
        "step_scale": Param(None, low=0.0, low_open=True, none="the sampler's default",
                            identity_of_none=0.0, doc="MCMC step-size multiplier"),
        "solver_gap": _SOLVER_GAP,
    }

    radius_rule: str
    sampler: str
    steps: int | None
    step_scale: float | None
    solver_gap: float

    # --- declarations -------------------------------------------------------------------------
    def cost(self, n: int, p: int) -> float:
        return float(n * p) * (2.0 if self.sampler == "exact" else 1.0 + max(self.steps or 0, 10_000))

    def rate_card(self) -> RateCard:
        """R3 on the average scale: Thm 4.3's p²L² log n/(nΔε²) divided by n."""
        return RateCard(
            expression="L**2*p**2*log(n)/(n**2*Delta*epsilon**2)",
            exponents={"n": -2, "p": 2, "epsilon": -2},
            citation="BST14 Thm 4.3 (Algorithm 4 with the exponential mechanism)",
            regime=("strongly convex Lipschitz losses; beats OutPert only on non-smooth losses "
                    "and large n (KINK-SC, p=5, ε=1: crossover n ≈ 2000, docs/bst14.md); log n "
                    "gives a local n-slope ≈ −2 + 1/ln n on the average scale"),
            notes=("Oracle O6 (KINK-SC, docs/bst14.md): sum-scale E ≈ p/k′ = 8pLr₀/ε, e.g. 5.65 at "
                   "n=1e4, p=5, ε=1, L=3 (quantile r₀). The [derived] explicit constant is "
                   "≈ 422·L²p(p+1)log n/(Δε²n) (sum scale). On smooth strongly convex losses "
                   "plain OutPert (R9s) is better by ~24·log n (docs/bst14.md): localisation is "
                   "unnecessary there."),
        )

    # --- pieces -------------------------------------------------------------------------------
    def outpert(self) -> OutputPerturbation:
        """Step 1's mechanism (Algorithm 3), with this configuration's public solver-gap bound."""
        return OutputPerturbation(solver_gap=self.solver_gap)

    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """O6 (heuristic, docs/bst14.md) on KINK-SC: p/k′ with k′ = (ε/2)/(2L·‖C₀‖) and the public
        ‖C₀‖ = min(2r₀, ‖C‖) this mechanism uses, i.e. 8pLr₀/ε while 2r₀ < ‖C‖."""
        from ..theory.expected_excess import localize_kink

        if get_tags(problem).closed_form != "kink_sc":
            return math.nan
        n, p = data.n, data.p
        L, Delta = float(problem.lipschitz), float(problem.strong_convexity)
        r0 = min(self.radius(n, p, L, Delta, epsilon), problem.constraint.diameter / 2.0)
        return localize_kink(n, p, L, Delta, epsilon, r0, average=True)

    def oracle_kind(self, problem: Problem) -> str:
        return "heuristic" if get_tags(problem).closed_form == "kink_sc" else ""

    def radius(self, n: int, p: int, L: float, Delta: float, epsilon: float) -> float:
        """r₀ for the total budget ε, matched to step 1's noise scale (data-independent)."""
        nominal_scale = 4.0 * L / (Delta * epsilon * n)
        scale = self.outpert().sensitivity(n, L, Delta) / (epsilon / 2.0)
        r0 = localize_radius(n, p, L, Delta, epsilon, rule=self.radius_rule)
        return float(r0) * scale / nominal_scale

    # --- running ------------------------------------------------------------------------------
    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        Delta = float(problem.strong_convexity)
        half = epsilon / 2.0
        first = self.outpert().run(data, problem, epsilon=half, delta=0.0, rng=rng)
        theta0 = np.asarray(first.theta, dtype=float)
        r0 = self.radius(n, p, L, Delta, epsilon)
        region = localization_region(problem, theta0, r0)
        k = half / (2.0 * L * region.diameter)
        theta, sinfo = sample_expmech(
            problem, data, k, region, rng, sampler=self.sampler,
            steps=self.steps, step_scale=self.step_scale)
        certified = bool(sinfo.get("certified", True))
        ledger = self._ledger(first.ledger.epsilon, half, certified)
        info: dict[str, Any] = {
            "theta0": theta0.tolist(), "r0": r0, "region_diameter": float(region.diameter),
            "k": k, "radius_rule": self.radius_rule, "sampler": self.sampler,
            "noise_scale": first.info["noise_scale"], "noise_norm": first.info["noise_norm"],
            "solver_gap": first.info["solver_gap"],
            "sampler_info": {key: v for key, v in sinfo.items() if np.isscalar(v)},
        }
        return Release(theta=np.asarray(theta, dtype=float), ledger=ledger,
                       iterations=first.iterations + int(sinfo.get("steps", 0) or 0),
                       func_queries=n * int(sinfo.get("steps", 0) or 0), info=info)

    # --- the exact output law (the audit) -----------------------------------------------------
    def _step2(self, problem: Problem, n: int, p: int, epsilon: float) -> tuple[float, float]:
        """(r₀, k′) of step 2, public (as :meth:`run` computes them)."""
        L = float(problem.lipschitz)
        r0 = self.radius(n, p, L, float(problem.strong_convexity), epsilon)
        diameter = min(float(problem.constraint.diameter), 2.0 * r0)  # ‖C ∩ B(θ₀, r₀)‖ bound
        return r0, (epsilon / 2.0) / (2.0 * L * diameter)

    def _covers(self, problem: Problem, n: int, p: int, epsilon: float) -> bool:
        """Whether B(θ₀, r₀) ⊇ C for every θ₀ ∈ C (r₀ ≥ ‖C‖): C ∩ B(θ₀, r₀) = C, step 2 does not
        depend on θ₀, and the release is the exponential mechanism at ε/2 on C (k′ with the
        diameter min(‖C‖, 2r₀) = ‖C‖) — e.g. every n ≤ 10 on LB-Quad at ε = 1."""
        r0, _ = self._step2(problem, n, p, epsilon)
        return r0 >= float(problem.constraint.diameter)

    def _mixture_law(self, problem: Problem, data: Dataset, epsilon: float) -> Law1D | None:
        """The release's law at p = 1 on a tilted-ball problem (LB-Quad, F1 mean estimation)
        when the localisation ball may cut C [derived]; ``None`` elsewhere.

        Step 1 releases θ₀ = Π_C(θ̂ + b), b ~ Laplace(s) (the Gamma-norm noise at p = 1), s =
        sensitivity/(ε/2): density f(θ₀) = e^{−|θ₀ − θ̂|/s}/(2s) on (−R, R) and atoms
        ½e^{−(R ∓ θ̂)/s} at ±R. Given θ₀, step 2 draws θ with density w(θ)/W(I(θ₀)) on
        I(θ₀) = [max(−R, θ₀ − r₀), min(R, θ₀ + r₀)], w(θ) = exp(−k′·Σℓ) = e^{−(A/2)θ² + Bθ}·const
        (:func:`dpbench.numerics.gibbs_law.gibbs_tilt`) and W(I) = ∫_I w in closed form
        (:func:`~dpbench.numerics.gibbs_law.log_tilted_segment`). So the release has the
        density w(θ)·H(θ), H(θ) = ∫_{|θ₀ − θ| ≤ r₀} f(θ₀)/W(I(θ₀)) dθ₀ + Σ_atoms P(a)/W(I(a))·
        1[|θ − a| ≤ r₀], normalised by construction. H(θ) = G(min(R, θ + r₀)) −
        G(max(−R, θ − r₀)) with G the cumulative integral of h = f/W(I(·)): composite
        Gauss–Legendre (64 panels × 16 nodes between consecutive kinks θ̂, −R + r₀, R − r₀ of h),
        the partial panel by its own 16-node rule (exact to rounding for these smooth pieces).
        """
        if data.p != 1:
            return None
        n = data.n
        r0, k = self._step2(problem, n, 1, epsilon)
        law = gibbs_tilt(problem, data, k, problem.constraint)
        if law is None or law.A <= 0:
            return None
        A, B, R = float(law.A), float(np.asarray(law.B)[0]), float(law.R)
        opt = self.outpert()._minimiser(data, problem)
        centre = float(np.asarray(opt.theta, dtype=float)[0])
        s = self.outpert().sensitivity(n, float(problem.lipschitz),
                                       float(problem.strong_convexity)) / (epsilon / 2.0)

        def log_w_interval(theta0: np.ndarray) -> np.ndarray:
            return log_tilted_segment(np.maximum(-R, theta0 - r0), np.minimum(R, theta0 + r0),
                                      A, B)

        def log_h(theta0: np.ndarray) -> np.ndarray:
            return -np.abs(theta0 - centre) / s - math.log(2.0 * s) - log_w_interval(theta0)

        kinks = np.unique(np.clip([-R, R, centre, -R + r0, R - r0], -R, R))
        x16, w16 = np.polynomial.legendre.leggauss(16)
        edges, cum = [kinks[0]], [0.0]
        for a, b in zip(kinks[:-1], kinks[1:]):
            nodes, weights = gauss_legendre_panels(float(a), float(b), 64, 16)
            part = np.exp(log_h(nodes)) * weights
            inner = np.linspace(a, b, 65)[1:]
            cum.extend(cum[-1] + np.cumsum(part.reshape(64, 16).sum(axis=1)))
            edges.extend(inner)
        edges_a, cum_a = np.asarray(edges), np.asarray(cum)
        atoms = [(R, 0.5 * math.exp(-(R - centre) / s)), (-R, 0.5 * math.exp(-(R + centre) / s))]
        atom_h = [(a, m * math.exp(-float(log_w_interval(np.array([a]))[0]))) for a, m in atoms]

        def G(x: np.ndarray) -> np.ndarray:
            i = np.clip(np.searchsorted(edges_a, x, side="right") - 1, 0, edges_a.size - 1)
            left = edges_a[i]
            half = 0.5 * (x - left)
            pts = left[:, None] + half[:, None] * (x16[None, :] + 1.0)
            return cum_a[i] + np.sum(np.exp(log_h(pts)) * w16[None, :], axis=1) * half

        def logpdf(theta: np.ndarray) -> np.ndarray:
            theta = np.asarray(theta, dtype=float).reshape(-1)
            H = G(np.minimum(R, theta + r0)) - G(np.maximum(-R, theta - r0))
            for a, m in atom_h:
                H = H + np.where(np.abs(theta - a) <= r0, m, 0.0)
            with np.errstate(divide="ignore"):
                return -0.5 * A * theta * theta + B * theta + np.log(H)

        breaks = np.unique(np.clip(np.concatenate([kinks + r0, kinks - r0]), -R, R))
        return Law1D(-R, R, logpdf, (), tuple(float(b) for b in breaks))

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the release [derived]. When B(θ₀, r₀) ⊇ C (:meth:`_covers`) it is
        the exponential mechanism at ε/2 on C whatever θ₀ is, so step 1 leaves no trace
        (:func:`dpbench.numerics.gibbs_law.gibbs_epsilon`, any p); otherwise, at p = 1 on
        LB-Quad/F1, the mixture over θ₀ of :meth:`_mixture_law` (its log density ratio's
        supremum on a grid refined locally, or its hockey sticks by quadrature). ``None``
        otherwise, and for the MCMC samplers (no law)."""
        if self.sampler != "exact":
            return None
        if self._covers(problem, d0.n, d0.p, epsilon):
            _, k = self._step2(problem, d0.n, d0.p, epsilon)
            return gibbs_epsilon(problem, d0, d1, k, problem.constraint, delta)
        P, Q = self._mixture_law(problem, d0, epsilon), self._mixture_law(problem, d1, epsilon)
        if P is None or Q is None:
            return None
        return epsilon_1d(P, Q, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the release (:meth:`exact_epsilon`'s two cases; the
        mixture's interpolated on a fine grid)."""
        if self.sampler != "exact":
            return None
        if self._covers(problem, d0.n, d0.p, epsilon):
            _, k = self._step2(problem, d0.n, d0.p, epsilon)
            return gibbs_log_density_ratio(problem, d0, d1, k, problem.constraint, thetas)

        def build() -> tuple[np.ndarray, np.ndarray] | None:
            P = self._mixture_law(problem, d0, epsilon)
            Q = self._mixture_law(problem, d1, epsilon)
            if P is None or Q is None:
                return None
            # the exact ratio on a grid of 2¹⁴ points (and the kinks), linearly interpolated:
            # an error ≤ h²·max|ℓ″|/8 ≈ 1e-7 (ℓ is smooth between kinks), for one evaluation
            # of the mixture per grid point instead of per release (millions in an audit)
            grid = np.unique(np.concatenate([np.linspace(P.lo, P.hi, 1 << 14), P.points(),
                                             Q.points()]))
            return grid, P.logpdf(grid) - Q.logpdf(grid)

        table = memo(digest("localize ratio", self, problem, d0, d1, epsilon), build)
        if table is None:
            return None
        t = np.atleast_2d(np.asarray(thetas, dtype=float))[:, 0]
        return np.interp(t, *table)

    def _ledger(self, eps_first: float, half: float, certified: bool) -> PrivacyLedger:
        """Thm 4.1's basic composition: step 1's charge and step 2's ε/2."""
        return PrivacyLedger.from_charges(
            Charge("localize step 1: output perturbation (Gamma-norm noise) at ε/2",
                   eps_first, 0.0, "BST14 Alg. 3 / Thm 4.1: argmin sensitivity 2L/(nΔ)"),
            Charge(f"localize step 2: exponential mechanism on C ∩ B(θ₀, r₀) ({self.sampler})",
                   half, 0.0, "BST14 Alg. 2, Thm 3.1 (oscillation 2L‖C₀‖) / Thm 4.1",
                   certified=certified))

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """``size`` releases: step 1 for every row (``OutputPerturbation.run_batch`` at ε/2: one
        solve, i.i.d. Gamma-norm noises), then step 2 on each row's own C ∩ B(θ₀ᵢ, r₀) (public
        r₀ and k′, the centre θ₀ᵢ per row) through
        :func:`~dpbench.numerics.samplers.expmech.sample_expmech_many` with per-row centres: the
        exact sampler's ``many_at`` (exactly :meth:`run`'s law) or the same RWM/MALA chain per
        row (start θ₀ᵢ). ``None`` for MCMC on a problem without a compiled kernel."""
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        half = epsilon / 2.0
        first = self.outpert().run_batch(data, problem, epsilon=half, delta=0.0, rng=rng,
                                         size=size)
        theta0 = np.asarray(first.thetas, dtype=float)
        r0 = self.radius(n, p, L, float(problem.strong_convexity), epsilon)
        region = localization_region(problem, theta0[0], r0)
        k = half / (2.0 * L * region.diameter)
        centers = np.tile(region_balls(region, p)[0], (size, 1, 1))
        centers[:, -1] = theta0  # the ball B(θ₀, r₀), re-centred row by row
        out = sample_expmech_many(problem, data, k, region, rng, size, sampler=self.sampler,
                                  steps=self.steps, step_scale=self.step_scale,
                                  row_centers=centers)
        if out is None:
            return None
        thetas, sinfo = out
        return BatchRelease(thetas, self._ledger(first.ledger.epsilon, half,
                                                 bool(sinfo.get("certified", True))))


class LocalizeGaussian(Algorithm):
    """Gaussian localisation + noisy SGD on C₀, (ε, δ)-DP (BST14 Appendix B, A4δ; Thm B.1/B.2).

    1. **A3δ at (ε/2, δ/2)**: θ₀ = Π_C(θ̂ + b), b ~ N(0, σ₀²I), σ₀ the Gaussian-mechanism σ for the
       ℓ₂-sensitivity 2L/(nΔ) + 2√(2·solver_gap/Δ) (same sensitivity as Algorithm 3).
       **Erratum** (docs/bst14.md Errata 5): the paper's σ₀² = 4L²log(1/δ)/(Δ²ε²n²)
       omits the 2·ln(1.25/δ) factor (≈ 2× too small). ``calibration="analytic"`` (default) uses
       the analytic Gaussian mechanism (Balle–Wang 2018; valid for every ε);
       ``"classical"`` uses σ₀ = sens·√(2 ln(1.25/δ′))/ε′, which needs ε′ = ε/2 < 1 (otherwise
       ``NotApplicable``). Both from :mod:`dpbench.privacy.gaussian`.
    2. **Radius**, data-independent (``radius_rule``): ``"paper"`` r₀ = ζ·σ₀·√p with
       ζ = √(3 log n) (Appendix B); ``"quantile"`` (default, [derived]) r₀ = σ₀·√(χ²_p.ppf(1 − n⁻³)),
       so ‖b‖ ≤ r₀ with probability exactly 1 − n⁻³ (the paper's tail statement drops a √p,
       Errata 5). C₀ = C ∩ B(θ₀, r₀).
    3. **NoisySGD restricted to C₀ at (ε/2, δ/2)** (Algorithm 1 via
       :func:`~dpbench.algorithms.noisy_sgd.noisy_sgd_path`): T = n² − 1 steps from the
       post-processed start Π_{C₀}(θ₀) = θ₀, strongly convex step 1/(Δnt), per-example gradients
       clipped to L, σ = 2nL·z with z = ``calibrate_noisy_sgd(ε/2, δ/2, n, T)`` (RDP accountant,
       docs/bst14.md); output ``last`` (the paper's) or ``suffix`` average.

    Privacy (Thm B.1): basic composition of (ε/2, δ/2) (Gaussian) and the accounted (≤ ε/2, δ/2).

    Utility (Thm B.2): E = O(F(p, n, ε, δ, L, O(L√(p log(1/δ) log n)/(Δεn)))) with F the
    NoisySGD-SC bound, which does not depend on the diameter: the **same order as A1-SC** (R4).
    The paper itself says this algorithm is not needed; it is here for completeness and as a
    check that localisation does not hurt.

    Audit path (``run_batch``): one solve and one calibration (:meth:`_plan`, shared with
    ``run``), the step-1 noises of all rows in one draw, then the rows' NoisySGD runs in one
    compiled loop (:func:`~dpbench.algorithms.noisy_sgd.noisy_sgd_chains` with each row's ball
    B(θ₀, r₀) as its own centre, from Π_{C₀}(θ₀) as in ``run``), all from the one generator: each
    row has the law of ``run``'s θ. ``None`` when NoisySGD is not compiled on C₀ (no problem
    kernel, or C not a ball).
    """

    name: ClassVar[str] = "localize_gaussian"
    summary: ClassVar[str] = ("Gaussian output perturbation at (ε/2, δ/2) localises, then noisy SGD "
                              "on C ∩ B(θ₀, r₀) (BST14 App. B)")
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (FOCS 2014), Appendix B, Thm B.1 and B.2; "
                               "analytic Gaussian: Balle and Wang (ICML 2018)")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "strongly_convex")
    version: ClassVar[str] = "1"
    #: Generic harness: the noise at (ε/2, δ/2) keeps the excess near the cap for n ≤ 200 at p = 3
    #: (0.90 … 0.16), so the rate smoke test runs on n ∈ [100, 800].
    check_settings: ClassVar[dict[str, Any]] = {"rate_smoke_n": (100, 200, 400, 800)}
    params: ClassVar[dict[str, Param]] = {
        "radius_rule": Param(
            "quantile", kind="str", choices=("quantile", "paper"),
            doc="r₀: σ₀·χ_p quantile at 1 − n⁻³ (derived) or the paper's √(3 log n)·σ₀·√p"),
        "calibration": Param(
            "analytic", kind="str", choices=("analytic", "classical"),
            doc="σ₀ of step 1: analytic Gaussian (any ε) or classical √(2ln(1.25/δ)) (ε/2 < 1)"),
        "output": Param("last", kind="str", choices=("last", "suffix"),
                        doc="released NoisySGD point: last iterate (paper) or suffix average"),
        "solver_gap": _SOLVER_GAP,
    }

    radius_rule: str
    calibration: str
    output: str
    solver_gap: float

    # --- declarations -------------------------------------------------------------------------
    def cost(self, n: int, p: int) -> float:
        return float(n) * n * p

    def rate_card(self) -> RateCard:
        """R4 with the accountant σ (as ``noisy_sgd`` strongly convex, accountant σ).

        Sum scale (Thm B.2 with F = Thm 2.4(2)): L²·p·log(1/δ)·log n/(nΔε²) for the last iterate
        (log n from last-iterate SGD, log(1/δ) from z² at the halved budget), without the log n for
        the suffix average; divided by n for the average scale. The radius only restricts the
        domain, and the NoisySGD-SC bound does not depend on the diameter.
        """
        suffix = self.output == "suffix"
        expression = ("L**2*p*log(1/delta)/(n**2*Delta*epsilon**2)" if suffix else
                      "L**2*p*log(1/delta)*log(n)/(n**2*Delta*epsilon**2)")
        return RateCard(
            expression=expression,
            exponents={"n": -2, "p": 1, "epsilon": -2},
            citation=("BST14 Thm B.2 with NoisySGD-SC (Thm 2.4(2)) and the RDP-calibrated σ "
                      "[derived, docs/bst14.md]"),
            regime=("strongly convex Lipschitz losses; the cap L*D binds at small n as for "
                    "noisy_sgd strongly convex (docs/bst14.md)"),
            notes=("Same order as A1-SC (noisy_sgd variant=strongly_convex, accountant σ): the "
                   "paper says A4δ is not needed. The noise is z at (ε/2, δ/2), so the level is "
                   "≈ 4× that of A1-SC at (ε, δ). Oracle O3 applies with that z."),
        )

    # --- pieces -------------------------------------------------------------------------------
    def sigma0(self, sensitivity: float, epsilon: float, delta: float) -> float:
        """Step 1's Gaussian σ₀ at (ε, δ) (already halved by the caller)."""
        if self.calibration == "analytic":
            return analytic_gaussian_sigma(sensitivity, epsilon, delta)
        if epsilon >= 1.0:
            raise NotApplicable(
                f"{self.name}: the classical Gaussian calibration needs ε/2 < 1, got ε/2 = "
                f"{epsilon:g}; use calibration='analytic'")
        return classical_gaussian_sigma(sensitivity, epsilon, delta)

    def radius(self, n: int, p: int, sigma0: float) -> float:
        """r₀ for noise N(0, σ₀²I_p): data-independent (n, p and the public σ₀ only)."""
        if self.radius_rule == "paper":
            return math.sqrt(3.0 * math.log(n)) * sigma0 * math.sqrt(p)
        return sigma0 * math.sqrt(float(chi2.isf(float(n) ** -3, p)))

    # --- running ------------------------------------------------------------------------------
    def _plan(self, data: Dataset, problem: Problem, epsilon: float,
              delta: float) -> _GaussianPlan:
        """The solve (refused above the public ``solver_gap``) and both steps' calibration at
        (ε/2, δ/2) each: σ₀, r₀, T = n² − 1 and NoisySGD's σ, from public quantities only
        (shared by :meth:`run` and :meth:`run_batch`)."""
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        Delta = float(problem.strong_convexity)
        half_eps, half_delta = epsilon / 2.0, delta / 2.0
        opt = problem.solve(data)
        if not opt.gap <= self.solver_gap:
            raise SolverGapExceeded(
                f"{self.name}: the solver certified a gap of {opt.gap:.3g}, above the public bound "
                f"solver_gap={self.solver_gap:.3g} the noise is calibrated for; raise solver_gap")
        sensitivity = OutputPerturbation(solver_gap=self.solver_gap).sensitivity(n, L, Delta)
        sigma0 = self.sigma0(sensitivity, half_eps, half_delta)
        steps = n * n - 1
        z = calibrate_noisy_sgd(half_eps, half_delta, n, steps)
        return _GaussianPlan(opt=opt, sensitivity=sensitivity, sigma0=sigma0,
                             r0=self.radius(n, p, sigma0), steps=steps, z=z,
                             sigma=2.0 * n * L * z,
                             eps_sgd=noisy_sgd_epsilon(z, n, steps, half_delta))

    def _ledger(self, plan: _GaussianPlan, epsilon: float, delta: float) -> PrivacyLedger:
        """Basic composition of step 1 at (ε/2, δ/2) and NoisySGD's accounted (≤ ε/2, δ/2)."""
        return PrivacyLedger.from_charges(
            Charge(f"localize_gaussian step 1: Gaussian output perturbation ({self.calibration})",
                   epsilon / 2.0, delta / 2.0,
                   "BST14 App. B (A3δ) with the standard Gaussian calibration "
                   "(docs/bst14.md Errata 5)"),
            Charge(f"localize_gaussian step 2: noisy SGD on C ∩ B(θ₀, r₀), {plan.steps} steps "
                   f"(z={plan.z:.6g}, {ACCOUNTING})", plan.eps_sgd, delta / 2.0,
                   "BST14 Thm 2.1 / Thm B.1; RDP of the sampled Gaussian"))

    # --- the output law (the audit's true ε) --------------------------------------------------
    def _line_law(self, data: Dataset, problem: Problem, epsilon: float,
                  delta: float) -> LineLaw | None:
        """The exact law of the release on ``data`` at p = 1 ([derived]), or ``None``.

        θ₀ = Π_C(θ̂ + b) is the projected Gaussian N(θ̂, σ₀²) on C = [lo, hi] (atoms at the ends).
        When r₀ ≥ hi − lo, B(θ₀, r₀) ⊇ C for every θ₀ ∈ C, so C₀ = C whatever θ₀ (Dykstra's
        projection onto C ∩ B(θ₀, r₀) is then Π_C) and NoisySGD starts at Π_{C₀}(θ₀) = θ₀: its
        last iterate has the law :func:`~dpbench.algorithms.noisy_sgd.noisy_sgd_line_law` started
        from θ₀'s law (step 1 forgets the start unless a gradient is clipped). ``None`` when
        p > 1, C is not an interval, the output is the suffix average, or r₀ < hi − lo (the
        region then moves with θ₀: a two-dimensional integral not done here).
        """
        interval = line_interval(problem.constraint, data.p)
        if self.output != "last" or interval is None:
            return None
        lo, hi = interval
        plan = self._plan(data, problem, epsilon, delta)
        if plan.r0 < hi - lo:
            return None
        theta_hat = float(np.asarray(plan.opt.theta, dtype=float)[0])
        start = propagate(point_mass(theta_hat),
                          [GaussianStep(lambda x: x[None, :], np.ones(1), plan.sigma0)],
                          lo, hi, nodes_for(plan.sigma0, lo, hi))
        return noisy_sgd_line_law(
            problem, data, constraint=problem.constraint, steps=plan.steps, sigma=plan.sigma,
            lipschitz=float(problem.lipschitz), variant="strongly_convex",
            strong_convexity=float(problem.strong_convexity), start=start)

    def _line_laws(self, d0: Dataset, d1: Dataset, problem: Problem, epsilon: float,
                   delta: float) -> tuple[LineLaw, LineLaw] | None:
        """(:meth:`_line_law` on D, on D′), cached per pair; ``None`` when either is, or when a
        subclass replaced :meth:`run` (these laws describe this class's ``run``)."""
        if not type(self)._defined_at_or_below_run("_line_laws"):
            return None

        def build() -> tuple[LineLaw, LineLaw] | None:
            laws = (self._line_law(d0, problem, epsilon, delta),
                    self._line_law(d1, problem, epsilon, delta))
            return None if laws[0] is None or laws[1] is None else laws  # type: ignore[return-value]

        return cached(release_key(self, problem, d0, d1, epsilon, delta), build)  # type: ignore[return-value]

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the release at p = 1 when r₀ ≥ ‖C‖ (:meth:`_line_law`; hockey
        stick of the two laws in both orders, :func:`~dpbench.numerics.line_law.line_epsilon`).
        θ₀ is not released, so the output perturbation's (ε/2, δ/2) is spent only through the
        start of NoisySGD, which the strongly convex first step η₁ = 1/(Δn) forgets for
        unclipped gradients: the true ε is then NoisySGD's alone, well below the claim."""
        laws = self._line_laws(d0, d1, problem, epsilon, delta)
        return None if laws is None else line_epsilon(laws[0], laws[1], delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) from :meth:`exact_epsilon`'s laws (``None`` without them)."""
        laws = self._line_laws(d0, d1, problem, epsilon, delta)
        if laws is None:
            return None
        return line_log_ratio(laws[0], laws[1], np.asarray(thetas, dtype=float)[:, 0])

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        p = data.p
        L = float(problem.lipschitz)
        plan = self._plan(data, problem, epsilon, delta)
        opt, steps = plan.opt, plan.steps
        b = gaussian_noise(p, plan.sigma0, rng)
        theta0 = problem.constraint.project(np.asarray(opt.theta, dtype=float) + b)
        region = localization_region(problem, theta0, plan.r0)
        theta = noisy_sgd_path(
            problem, data, constraint=region, steps=steps, sigma=plan.sigma, lipschitz=L,
            variant="strongly_convex", strong_convexity=float(problem.strong_convexity),
            output=self.output, rng=rng)
        info: dict[str, Any] = {
            "theta0": theta0.tolist(), "r0": plan.r0, "sigma0": plan.sigma0,
            "sensitivity": plan.sensitivity, "radius_rule": self.radius_rule,
            "calibration": self.calibration, "output": self.output, "z": plan.z,
            "sigma": plan.sigma, "steps": steps, "accounted_epsilon_sgd": plan.eps_sgd,
            "solver_gap": float(opt.gap),
        }
        return Release(theta=np.asarray(theta, dtype=float),
                       ledger=self._ledger(plan, epsilon, delta), grad_queries=steps,
                       iterations=steps + int(opt.iterations), info=info)

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """``size`` independent runs of :meth:`run` (class docstring, 'Audit path'); ``None``
        when NoisySGD on C ∩ B(θ₀, r₀) is not compiled."""
        p = data.p
        plan = self._plan(data, problem, epsilon, delta)
        template = localization_region(problem, problem.constraint.center(p), plan.r0)
        projection = compiled_projection(template, p)
        if projection is None or resolve_kernel(problem) is None:
            return None
        b = gaussian_noise(p, plan.sigma0, rng, size=size)
        theta0 = problem.constraint.project(np.asarray(plan.opt.theta, dtype=float)[None, :] + b)
        # localization_region puts B(θ₀, r₀) last: each row's own centre replaces the template's.
        centers = np.repeat(projection[0][None], size, axis=0)
        centers[:, -1, :] = theta0
        thetas = noisy_sgd_chains(
            problem, data, constraint=template, steps=plan.steps, sigma=plan.sigma,
            lipschitz=float(problem.lipschitz), variant="strongly_convex",
            strong_convexity=float(problem.strong_convexity), output=self.output, rng=rng,
            size=size, centers=centers)
        if thetas is None:
            return None
        return BatchRelease(thetas, self._ledger(plan, epsilon, delta))
