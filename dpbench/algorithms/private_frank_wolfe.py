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
from ..numerics.line_law import cached, release_key
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.profile import PrivacyProfile
from ..privacy.selection import (
    ACCOUNTINGS,
    PROFILE_ORDERS,
    calibrate_step_epsilon,
    composed_epsilon,
    step_rho,
)

__all__ = ["PrivateFrankWolfe", "discrete_epsilon", "theorem_steps"]

#: Largest number of distinct vertex paths (|S|^(T−1)) for which ``run_batch`` groups chains by
#: their state; above it the audit loops ``run``.
MAX_BATCH_STATES = 20_000
#: Largest number of vertex paths (|S|^(T−1)) whose probabilities :meth:`PrivateFrankWolfe.exact_epsilon`
#: enumerates.
MAX_EXACT_PATHS = 1 << 16


def discrete_epsilon(P: np.ndarray, Q: np.ndarray, delta: float) -> float:
    """The smallest ε ≥ 0 with Σ_x (P(x) − e^ε·Q(x))₊ ≤ δ for two laws on the same finite set
    (inf when the mass P puts where Q has none exceeds δ). The sum is continuous and decreasing
    in ε; bisection on ε to 1e-12."""
    P, Q = np.asarray(P, dtype=float), np.asarray(Q, dtype=float)

    def excess(eps: float) -> float:
        return float(np.sum(np.maximum(P - math.exp(eps) * Q, 0.0)))

    if excess(0.0) <= delta:
        return 0.0
    if float(np.sum(P[Q <= 0])) > delta:
        return math.inf
    lo, hi = 0.0, 1.0
    while excess(hi) > delta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > delta else (lo, mid)
    return hi


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

    # --- the output law (the audit's true ε) --------------------------------------------------
    def selection_probabilities(self, scores: np.ndarray, eps0: float, sens: float) -> np.ndarray:
        """P[vertex j is chosen] for the scores u (|S|,) of one step, exactly: the exponential
        mechanism's softmax of −ε₀u/(2Δ) (the law of the Gumbel-max draw), or for report-noisy-min
        P[u_j + X_j < u_k + X_k ∀k ≠ j] = ∫ f_b(x − u_j) Π_{k≠j} S_b(x − u_k) dx with Laplace
        density f_b and survival S_b, b = 2Δ/ε₀ (adaptive quadrature, breakpoints at the u_k)."""
        u = np.asarray(scores, dtype=float)
        if self.selection == "exponential":
            logits = -(eps0 / (2.0 * sens)) * u
            w = np.exp(logits - logits.max())
            return w / w.sum()
        from scipy.integrate import quad

        b = 2.0 * sens / eps0

        def survival(y: float) -> float:  # P[X > y], X ~ Laplace(0, b)
            return 0.5 * math.exp(-y / b) if y >= 0 else 1.0 - 0.5 * math.exp(y / b)

        out = np.empty(u.size)
        for j in range(u.size):
            others = np.delete(u, j)

            def integrand(x: float) -> float:
                return math.exp(-abs(x - u[j]) / b) / (2.0 * b) * float(
                    np.prod([survival(x - v) for v in others]))

            lo, hi = float(u.min()) - 60.0 * b, float(u.max()) + 60.0 * b
            out[j] = quad(integrand, lo, hi, points=sorted(set(u.tolist())), limit=200,
                          epsabs=1e-15, epsrel=1e-12)[0]
        return out / out.sum()

    def output_law(self, data: Dataset, problem: Problem, *, epsilon: float,
                   delta: float) -> tuple[np.ndarray, np.ndarray] | None:
        """The exact law of :meth:`run`'s θ_T: (distinct released points (k, p), their
        probabilities (k,)), by enumerating the vertex paths ([derived]); ``None`` when there
        are more than :data:`MAX_EXACT_PATHS` of them.

        θ_T is a function of the chosen vertices, and each choice depends on the past only
        through θ_t, so the law is carried forward over the distinct iterates: from θ_t with
        probability π, vertex j leads to (1 − μ_t)θ_t + μ_t·s_j (the same floating-point
        operations as :meth:`run`, so equal paths give equal floats) with probability
        π·P_t(j) (:meth:`selection_probabilities` on the scores ⟨s, ∇F(θ_t)⟩). Released points
        are distinct floats; paths that meet in the same float are merged.
        """
        n, p = data.n, data.p
        T, eps0, sens, _, _ = self._calibration(n, problem, epsilon, delta)
        C = problem.constraint
        S = C.vertices(p)
        if float(S.shape[0]) ** (T - 1) > MAX_EXACT_PATHS:
            return None
        states: dict[bytes, tuple[np.ndarray, float]] = {}
        start = C.center(p)
        states[start.tobytes()] = (start, 1.0)
        for t in range(1, T):
            mu = 2.0 / (t + 2.0)
            nxt: dict[bytes, tuple[np.ndarray, float]] = {}
            for theta, prob in states.values():
                probs = self.selection_probabilities(S @ problem.full_grad(theta, data), eps0,
                                                     sens)
                for j in range(S.shape[0]):
                    new = (1.0 - mu) * theta + mu * S[j]
                    key = new.tobytes()
                    nxt[key] = (new, nxt[key][1] + prob * probs[j] if key in nxt
                                else prob * probs[j])
            states = nxt
        points = np.array([v[0] for v in states.values()])
        return points, np.array([v[1] for v in states.values()])

    def _laws(self, d0: Dataset, d1: Dataset, problem: Problem, epsilon: float, delta: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(points, probabilities on D, on D′) over the union of both laws' points; ``None``
        beyond :data:`MAX_EXACT_PATHS` or when a subclass replaced :meth:`run`."""
        if not type(self)._defined_at_or_below_run("_laws"):
            return None

        def build() -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
            laws = [self.output_law(d, problem, epsilon=epsilon, delta=delta) for d in (d0, d1)]
            if laws[0] is None or laws[1] is None:
                return None
            index: dict[bytes, int] = {}
            points: list[np.ndarray] = []
            masses = np.zeros((2, sum(len(m) for _, m in laws)))  # type: ignore[misc]
            for side, (pts, probs) in enumerate(laws):  # type: ignore[misc]
                for x, m in zip(pts, probs):
                    k = index.setdefault(x.tobytes(), len(points))
                    if k == len(points):
                        points.append(x)
                    masses[side, k] += m
            return np.array(points), masses[0, :len(points)], masses[1, :len(points)]

        return cached(release_key(self, problem, d0, d1, epsilon, delta), build)  # type: ignore[return-value]

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of θ_T on the pair: both laws enumerated (:meth:`output_law`), then
        the smallest ε with Σ_x (P(x) − e^ε Q(x))₊ ≤ δ in both orders (a discrete law: the
        hockey stick is a finite sum, solved by bisection to 1e-12). ``None`` beyond
        :data:`MAX_EXACT_PATHS` paths."""
        laws = self._laws(d0, d1, problem, epsilon, delta)
        if laws is None:
            return None
        _, P, Q = laws
        return max(discrete_epsilon(P, Q, delta), discrete_epsilon(Q, P, delta))

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log P_D(θ) − log P_D′(θ) at released points (a discrete law: the ratio of the point
        masses, ±inf at a point only one side releases, 0 at a point neither does)."""
        laws = self._laws(d0, d1, problem, epsilon, delta)
        if laws is None:
            return None
        points, P, Q = laws
        thetas = np.asarray(thetas, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((P > 0) | (Q > 0), np.log(P) - np.log(Q), 0.0)
        # nearest enumerated point (the releases are those floats exactly; the tolerance only
        # absorbs a row that went through a different summation order)
        d2 = ((thetas[:, None, :] - points[None, :, :]) ** 2).sum(axis=-1)
        k = np.argmin(d2, axis=1)
        scale = max(1.0, float(np.max(np.abs(points))))
        out = ratio[k]
        out[d2[np.arange(len(k)), k] > (1e-9 * scale) ** 2] = 0.0
        return out

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
