"""Private Frank–Wolfe over a polytope (Talwar, Thakurta and Zhang, NeurIPS 2015).

K. Talwar, A. Thakurta, L. Zhang, "Nearly optimal private LASSO", NeurIPS 2015 (TTZ15),
Algorithm 2 𝒜_Noise-FW(polytope) and its privacy and utility theorems (§2; the numbering of the
theorems was not checked against the paper's text and is not cited). docs/frank-wolfe.md has the
derivations referred to below.

Algorithm, on C = conv(S) (``constraint.vertices``, e.g. the ℓ1 ball, S = {±r·eⱼ}, |S| = 2p):

1. θ₁ = ``constraint.center(p)`` (data independent).
2. For t = 1, …, T − 1: gₜ = ∇F(θₜ) (the average loss's gradient, ``problem.full_grad``), scores
   u(s) = ⟨s, gₜ⟩ for every s ∈ S, a private choice s̃ₜ of an (approximately) minimising vertex,
   θₜ₊₁ = (1 − μₜ)θₜ + μₜs̃ₜ with μₜ = 2/(t + 2).
3. Output θ_T.

Sensitivity (replace-one neighbours, [derived], docs/frank-wolfe.md): replacing one record moves
gₜ by (∇ℓ(θₜ; d′) − ∇ℓ(θₜ; d))/n, so each score by at most
Δ = 2·L∞·‖C‖₁/n, where L∞ ≥ ‖∇ℓ(θ; d)‖∞ over C and the universe and ‖C‖₁ = max_{s∈S}‖s‖₁
(``constraint.l1_radius``). The public bound used for L∞ is the problem's declared ℓ∞ constant
``L_inf`` (:meth:`dpbench.core.problem.Problem.norm_constants`, a bound over C and the whole data
universe, e.g. (1 + r)·sup‖x‖∞² for least squares with |y| ≤ 1) when it declares one, else the
declared Euclidean Lipschitz constant L (‖·‖∞ ≤ ‖·‖₂, valid for every problem).

Selection (``selection``):

* ``"exponential"`` (default): the exponential mechanism P(s) ∝ exp(−ε₀u(s)/(2Δ)), sampled
  exactly by the Gumbel-max trick (argmax of −ε₀u(s)/(2Δ) + Gumbel noise; Gumbel 1954, Yellott
  1977). It is ε₀-DP and ε₀-bounded-range, hence ε₀²/8-zCDP (:mod:`dpbench.privacy.selection`).
* ``"laplace"``: TTZ15's report-noisy-min, argmin u(s) + Lap(b), with the **certified** scale
  b = 2Δ/ε₀: for scores that may move in either direction (non-monotone), fixing the other noises
  the winner's threshold moves by ≤ Δ and its own score by ≤ Δ, so b = 2Δ/ε₀ gives ε₀-DP (the
  monotone-query scale Δ/ε₀ of Dwork–Roth Claim 3.9 does not apply). TTZ15 write
  λ = L₁‖C‖₁√(8T log(1/δ))/(nε), i.e. b = (Δ/2)/ε₀′ with ε₀′ = ε/√(8T log(1/δ)): 4× below the
  certified scale at the same ε₀′; ``info["paper_laplace_scale"]`` records it beside ours. Pure
  DP, not known to be bounded-range: ε₀²/2-zCDP.

Privacy accounting (:func:`dpbench.privacy.selection.calibrate_step_epsilon`): ε₀ is the largest
per-step budget for which the best of zCDP (CKS20 conversion), advanced composition and basic
composition over the T − 1 steps certifies the target (ε, δ); the ledger records that (ε, δ), the
accounting that gave it, and the Rényi curve α·ρ_T as the claimed privacy profile (valid whatever
composition certified the point).

Number of steps (``steps``): TTZ15's T = (Γ·nε/(L∞‖C‖₁))^{2/3} (rounded up, at least 2) with the
curvature constant Γ ≤ β·D² (Jaggi 2013, Lemma 7: C_f ≤ diam(C)²·β for β-smooth F, Euclidean
norms), from the public constants β, D, L. The same argument in any norm gives C_f ≤ β₁·diam₁(C)²
with β₁ the smoothness w.r.t. ‖·‖₁ and diam₁(C) ≤ 2‖C‖₁ the ℓ1 diameter; when the problem declares
``beta_1``, Γ = min(β·D², β₁·(2‖C‖₁)²) (both are valid bounds; on the ℓ1 ball 2‖C‖₁ = D).

Utility (TTZ15): E[F(θ_T)] − min_C F = O(Γ^{1/3}(L∞‖C‖₁)^{2/3} log(n|S|) √log(1/δ)/(nε)^{2/3}),
average scale; the rate card writes it for the ℓ1 ball (|S| = 2p, ‖C‖₁ = D/2, Γ ≤ β₁D²) with
the constants ``L_inf`` and ``beta_1``, which default to L and β when the problem declares none.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.time_limit import checkpoint
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.profile import PrivacyProfile
from ..privacy.selection import (
    ACCOUNTINGS,
    PROFILE_ORDERS,
    calibrate_step_epsilon,
    composed_epsilon,
    step_rho,
)

__all__ = ["PrivateFrankWolfe", "theorem_steps"]

#: Largest number of distinct vertex paths (|S|^(T−1)) for which ``run_batch`` groups chains by
#: their state; above it the audit loops ``run``.
MAX_BATCH_STATES = 20_000


def theorem_steps(n: int, epsilon: float, curvature: float, linf: float, l1_radius: float) -> int:
    """TTZ15's T = (Γ·nε/(L∞‖C‖₁))^{2/3}, rounded up, at least 2."""
    if linf * l1_radius <= 0:
        return 2
    return max(2, math.ceil((curvature * n * epsilon / (linf * l1_radius)) ** (2.0 / 3.0) - 1e-9))


class PrivateFrankWolfe(Algorithm):
    """TTZ15 Algorithm 2: Frank–Wolfe with a private vertex choice per step (module docstring)."""

    name: ClassVar[str] = "private_frank_wolfe"
    summary: ClassVar[str] = ("private Frank-Wolfe over a polytope: exponential-mechanism vertex "
                              "choice per step (TTZ15 Alg. 2)")
    citation: ClassVar[str] = ("Talwar, Thakurta, Zhang (NeurIPS 2015), Nearly optimal private "
                               "LASSO, Algorithm 2 and its privacy/utility theorems")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "smooth")
    version: ClassVar[str] = "1"
    #: The scores are calibrated to the declared L; gradients are not clipped (the sensitivity
    #: holds only over the declared universe).
    clips_gradients: ClassVar[bool] = False
    check_settings: ClassVar[dict[str, Any]] = {
        "problem": "lasso",
        "rate_smoke_n": (200, 400, 800, 1600),
    }
    params: ClassVar[dict[str, Param]] = {
        "selection": Param("exponential", kind="str", choices=("exponential", "laplace"),
                           doc="private vertex choice: exponential mechanism (Gumbel-max) or "
                               "Laplace report-noisy-min at the certified scale 2Δ/ε₀"),
        "steps": Param(None, kind="int", low=2, none="TTZ15's T = (Γ·nε/(L∞·‖C‖₁))^{2/3}",
                       identity_of_none=0, doc="T (T − 1 private selections)"),
    }

    # --- public quantities --------------------------------------------------------------------
    def not_applicable_reason(self, problem: Problem) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason:
            return reason
        if not getattr(problem.constraint, "has_vertices", False):
            return (f"{self.name}: the constraint set {type(problem.constraint).__name__} is not a "
                    "polytope with a vertex set and a linear-minimisation oracle")
        return None

    @staticmethod
    def _constants(problem: Problem) -> tuple[float, float, float]:
        """(L∞, ‖C‖₁, Γ) from public constants: L∞ = the declared ``L_inf`` (else L), ‖C‖₁ of the
        set, Γ ≤ β·D² (and ≤ β₁·(2‖C‖₁)² when ``beta_1`` is declared)."""
        c = problem.constants()
        linf, beta, D = c.get("L_inf", c["L"]), c["beta"], c["D"]
        if not (math.isfinite(linf) and linf > 0):
            raise NotApplicable(f"private_frank_wolfe: needs a finite Lipschitz bound L, got {linf}")
        if not math.isfinite(beta):
            raise NotApplicable("private_frank_wolfe: TTZ15's bound needs a finite curvature "
                                "constant Γ ≤ β·D² (β = ∞ declared)")
        try:
            l1 = float(problem.constraint.l1_radius)
        except NotImplementedError:
            raise NotApplicable("private_frank_wolfe: the constraint set declares no ‖C‖₁") from None
        gamma = float(beta) * float(D) ** 2
        if "beta_1" in c and math.isfinite(c["beta_1"]):
            gamma = min(gamma, float(c["beta_1"]) * (2.0 * l1) ** 2)
        return float(linf), l1, gamma

    def n_steps(self, n: int, epsilon: float, problem: Problem) -> int:
        if self.steps is not None:
            return int(self.steps)
        linf, l1, gamma = self._constants(problem)
        return theorem_steps(n, epsilon, gamma, linf, l1)

    def cost(self, n: int, p: int) -> float:
        T = self.steps if self.steps is not None else 2 * max(2.0, n ** (2.0 / 3.0))
        return float(T) * n * p

    def _calibration(self, n: int, problem: Problem, epsilon: float, delta: float
                     ) -> tuple[int, float, float, PrivacyLedger, dict[str, Any]]:
        """(T, ε₀, Δ, ledger, info) from public quantities only (shared by run and run_batch)."""
        linf, l1, gamma = self._constants(problem)
        T = self.n_steps(n, epsilon, problem)
        k = T - 1  # private selections
        bounded = self.selection == "exponential"
        eps0 = calibrate_step_epsilon(epsilon, delta, k, bounded_range=bounded)
        eps_spent, accounting = composed_epsilon(eps0, k, delta, bounded_range=bounded)
        sens = 2.0 * linf * l1 / n
        rho = k * step_rho(eps0, bounded)
        orders = PROFILE_ORDERS
        profile = PrivacyProfile.from_rdp(
            orders, [a * rho for a in orders],
            source=f"{rho:.6g}-zCDP: {k} selections of ρ = {step_rho(eps0, bounded):.6g} "
                   "(Cesar–Rogers 2021 / Bun–Steinke 2016), CKS20 conversion")
        ledger = PrivacyLedger(
            charges=(Charge(
                f"{self.name}: {k} {self.selection} selections, ε₀ = {eps0:.6g} each, "
                f"Δ = {sens:.6g}", eps_spent, delta,
                "TTZ15 Alg. 2; per step ε₀-DP (" + ("exponential mechanism, ε₀-BR" if bounded
                                                    else "Laplace report-noisy-min, b = 2Δ/ε₀")
                + "); composition: " + ACCOUNTINGS[accounting]),),
            epsilon=eps_spent, delta=delta, accounting=ACCOUNTINGS[accounting], profile=profile)
        info = {
            "selection": self.selection, "steps": T, "selections": k, "step_epsilon": eps0,
            "sensitivity": sens, "linf": linf, "l1_radius": l1, "curvature": gamma,
            "rho": rho, "accounting": accounting, "composed_epsilon": eps_spent,
        }
        if not bounded:
            info["laplace_scale"] = 2.0 * sens / eps0
            info["paper_laplace_scale"] = (linf * l1 * math.sqrt(8.0 * T * math.log(1.0 / delta))
                                           / (n * epsilon))
        return T, eps0, sens, ledger, info

    # --- running ------------------------------------------------------------------------------
    def _select(self, scores: np.ndarray, eps0: float, sens: float,
                rng: np.random.Generator) -> np.ndarray:
        """Indices of the privately chosen vertices, one per row of ``scores`` (m, |S|)."""
        if self.selection == "exponential":
            return np.argmax(-(eps0 / (2.0 * sens)) * scores + rng.gumbel(size=scores.shape),
                             axis=-1)
        return np.argmin(scores + rng.laplace(scale=2.0 * sens / eps0, size=scores.shape),
                         axis=-1)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        T, eps0, sens, ledger, info = self._calibration(n, problem, epsilon, delta)
        C = problem.constraint
        S = C.vertices(p)
        theta = C.center(p)
        for t in range(1, T):
            if t % 64 == 0:
                checkpoint()
            g = problem.full_grad(theta, data)
            j = int(self._select((S @ g)[None, :], eps0, sens, rng)[0])
            mu = 2.0 / (t + 2.0)
            theta = (1.0 - mu) * theta + mu * S[j]
        return Release(theta=theta, ledger=ledger, grad_queries=(T - 1) * n, iterations=T - 1,
                       info=info)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """``size`` independent runs with :meth:`run`'s law: the chains are grouped by their
        current iterate (a deterministic function of the vertex path, so equal paths give equal
        floats), ∇F is computed once per distinct iterate, and every chain draws its own
        selection noise. Only when |S|^(T−1) ≤ :data:`MAX_BATCH_STATES` (small T, as in the
        audit at small n); otherwise ``None``."""
        n, p = data.n, data.p
        T, eps0, sens, ledger, _ = self._calibration(n, problem, epsilon, delta)
        C = problem.constraint
        S = C.vertices(p)
        if float(S.shape[0]) ** (T - 1) > MAX_BATCH_STATES:
            return None
        thetas = np.tile(C.center(p), (size, 1))
        for t in range(1, T):
            checkpoint()
            uniq, inverse = np.unique(thetas, axis=0, return_inverse=True)
            grads = np.stack([problem.full_grad(u, data) for u in uniq])
            scores = (grads @ S.T)[inverse.reshape(-1)]
            j = self._select(scores, eps0, sens, rng)
            mu = 2.0 / (t + 2.0)
            thetas = (1.0 - mu) * thetas + mu * S[j]
        return BatchRelease(thetas=thetas, ledger=ledger)

    # --- theory -------------------------------------------------------------------------------
    def rate_card(self) -> RateCard:
        """TTZ15's utility bound on the ℓ1 ball, average scale: Γ^{1/3}(L∞‖C‖₁)^{2/3}·log(n|S|)·
        √log(1/δ)/(nε)^{2/3} with Γ = β₁D², ‖C‖₁ = D/2, |S| = 2p, L∞ = ``L_inf`` and β₁ =
        ``beta_1`` (defaults L and β when the problem declares none: then Γ = βD², L∞ = L)."""
        return RateCard(
            expression=("(beta_1*D**2)**(1/3)*(L_inf*D/2)**(2/3)*log(2*n*p)*sqrt(log(1/delta))"
                        "/(n*epsilon)**(2/3)"),
            defaults={"L_inf": "L", "beta_1": "beta"},
            exponents={"n": -2 / 3, "p": 0, "epsilon": -2 / 3},
            citation=("TTZ15 (Talwar, Thakurta, Zhang, NeurIPS 2015) utility theorem of "
                      "Algorithm 2 with T = (Γnε/(L∞‖C‖₁))^{2/3}; written for the ℓ1 ball"),
            regime=("the ℓ1 ball (‖C‖₁ = D/2, |S| = 2p); the bound ≥ the cap L·D at small nε; "
                    "on other polytopes log(2np) becomes log(n|S|) and D/2 becomes ‖C‖₁"),
            notes=("Γ ≤ β₁D² (Jaggi 2013, in ‖·‖₁) and L∞ are the public bounds the mechanism "
                   "calibrates with (L∞ = L and β₁ = β unless declared); the log(n|S|) is the high-probability union bound of the "
                   "selection errors (an expectation carries log|S|)."),
        )
