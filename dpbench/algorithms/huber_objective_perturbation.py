"""B2 ``HuberObjPert``: Huberised objective perturbation on HUB-1D (BST14 Appendix A, eq. 9;
Thm A.1, Lemmas A.2/A.3). The predictions R11/R11′ and their reference run are in docs/bst14.md,
"Oracle curves and reference runs".

The smoothing counterexample. For the 1-D loss (y − xθ)₊ with x, y ∈ [−1, 1] and C = [−2, 2],
replace f(z) = z₊ by its Huberisation with parameter h > 0,

    f̂(z) = z (z > h),  0 (z < −h),  z²/(4h) + z/2 + h/4 (|z| ≤ h),

and release θ_priv = argmin_{θ∈[−2,2]} Σᵢ f̂(yᵢ − xᵢθ) + θ²/(8εh) + bθ (eq. 9).

**Erratum** (docs/bst14.md Errata 4): f̂ is only C^{1,1} (f̂″ jumps from 1/(2h) to 0 at ±h), not C²
as the paper says; the change-of-variables proof still goes through (f̂′ is Lipschitz and piecewise
C¹, so the output density exists almost everywhere), with per-example smoothness β = x²/(2h) ≤
1/(2h).

**Privacy calibration** (recorded in the ledger). Replacing one example moves the gradient of the
sum by v(θ) with |v| ≤ 2 (|x·f̂′| ≤ 1) — not eq. 9's shorthand σ² = 8 log(1/δ)/ε². The Jacobian
factor is (Λ + g′)/(Λ + g) ≤ 1 + β/Λ (p = 1, rank 1; CMS11 Thm 9, KST12), i.e. it costs
log(1 + β/Λ):

* ``regularizer="printed"`` (default, reproduces the paper's counterexample): Λ = 1/(4εh) = β/(2ε)
  as in eq. 9, and b ~ N(0, σ²) with the analytic Gaussian σ for sensitivity 2 at (ε, δ)
  (Balle & Wang 2018, Thm 8). Then log(1 + β/Λ) = log(1 + 2ε) is not paid, and the fixed-shift
  calibration does not cover the θ-dependent shift v(θ); the ledger is marked
  ``certified=False`` with the extra cost named.
* ``regularizer="private"``: Λ = β/expm1(ε/2) so the Jacobian costs exactly ε/2, and b gets
  (ε/2, δ) through :func:`~dpbench.privacy.gaussian.pointwise_gaussian_sigma` (d = 1): a
  certified (ε, δ)-DP variant with a ≈4× stronger regulariser.

``h_rule="sqrt_n"`` uses h/√n (the best order, Thm A.1). The minimiser is exact: the derivative of
the objective is continuous, nondecreasing and piecewise linear in θ, so its root is found by
bisection over the sorted breakpoints (yᵢ ± h)/xᵢ and linear interpolation on the final segment.
The breakpoints do not depend on b, so the audit's vectorised path runs that bisection for many b
at once (:func:`minimise_huber_objective_batch`, bit for bit the one-row minimiser).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..privacy.gaussian import analytic_gaussian_sigma, pointwise_gaussian_sigma
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.noise import gaussian_noise
from ..privacy.root_law import PiecewiseLinearRoot, root_law_epsilon

__all__ = ["HuberCalibration", "HuberObjectivePerturbation", "huber_loss",
           "huber_objective_derivative", "minimise_huber_objective",
           "minimise_huber_objective_batch"]

_HUB_RADIUS = 2.0  # C = [−2, 2] (BST14 Appendix A)


def huber_loss(z: np.ndarray, h: float) -> np.ndarray:
    """f̂(z) of BST14 Appendix A: the Huberisation of z₊ with parameter h."""
    z = np.asarray(z, dtype=float)
    inner = z * z / (4.0 * h) + z / 2.0 + h / 4.0
    return np.where(z > h, z, np.where(z < -h, 0.0, inner))


def _huber_slope(z: np.ndarray, h: float) -> np.ndarray:
    """f̂′(z) ∈ [0, 1]."""
    return np.clip(z / (2.0 * h) + 0.5, 0.0, 1.0)


def huber_objective(theta: float, x: np.ndarray, y: np.ndarray, h: float, lam: float,
                    b: float) -> float:
    """J(θ) = Σ f̂(yᵢ − xᵢθ) + (Λ/2)θ² + bθ (sum scale; eq. 9 has Λ = 1/(4εh))."""
    return float(np.sum(huber_loss(y - x * theta, h)) + 0.5 * lam * theta**2 + b * theta)


def huber_objective_derivative(theta: float, x: np.ndarray, y: np.ndarray, h: float, lam: float,
                               b: float) -> float:
    """J′(θ) = −Σ xᵢ f̂′(yᵢ − xᵢθ) + Λθ + b, continuous and nondecreasing."""
    return float(-np.sum(x * _huber_slope(y - x * theta, h)) + lam * theta + b)


def _huber_grid(x: np.ndarray, y: np.ndarray, h: float, radius: float) -> np.ndarray:
    """−R, the breakpoints (yᵢ ± h)/xᵢ inside (−R, R) (sorted, unique), and R: J′ is linear
    between consecutive points (the breakpoints do not depend on b)."""
    nz = x != 0
    knots = np.concatenate([(y[nz] - h) / x[nz], (y[nz] + h) / x[nz]])
    knots = np.unique(knots[(knots > -radius) & (knots < radius)])
    return np.concatenate([[-radius], knots, [radius]])


def minimise_huber_objective(x: np.ndarray, y: np.ndarray, h: float, lam: float, b: float,
                             radius: float = _HUB_RADIUS) -> tuple[float, float]:
    """Exact argmin of J on [−R, R] and a certified gap J(θ̂) − min J ≤ 2R·|J′(θ̂)|.

    J′ is linear between consecutive breakpoints (yᵢ ± h)/xᵢ, so bisection over the sorted
    breakpoints brackets the root in one linear piece, where it is solved exactly.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)

    def d(t: float) -> float:
        return huber_objective_derivative(t, x, y, h, lam, b)

    if d(-radius) >= 0:
        return -radius, 0.0
    if d(radius) <= 0:
        return radius, 0.0
    grid = _huber_grid(x, y, h, radius)
    lo, hi = 0, grid.size - 1  # invariant: d(grid[lo]) < 0 < d(grid[hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if d(float(grid[mid])) < 0:
            lo = mid
        else:
            hi = mid
    a, c = float(grid[lo]), float(grid[hi])
    da, dc = d(a), d(c)
    theta = min(max(a - da * (c - a) / (dc - da), a), c)
    return theta, 2.0 * radius * abs(d(theta))


def minimise_huber_objective_batch(x: np.ndarray, y: np.ndarray, h: float, lam: float,
                                   b: np.ndarray, radius: float = _HUB_RADIUS) -> np.ndarray:
    """:func:`minimise_huber_objective`'s θ̂ for every linear term of ``b`` (shape (S,)) at once.

    J′(t) = J′₀(t) + b with J′₀ the derivative at b = 0, so J′₀ is evaluated once on the grid
    of breakpoints (each value exactly as :func:`huber_objective_derivative` computes it, hence
    J′₀(t) + b is bit for bit the J′(t) of the one-row minimiser) and every row runs the same
    bisection and the same interpolation, vectorised: row s is exactly
    ``minimise_huber_objective(x, y, h, lam, b[s], radius)[0]``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    b = np.asarray(b, dtype=float)
    grid = _huber_grid(x, y, h, radius)
    d0 = np.array([huber_objective_derivative(float(t), x, y, h, lam, 0.0) for t in grid])
    lo = np.zeros(b.shape, dtype=np.intp)
    hi = np.full(b.shape, grid.size - 1, dtype=np.intp)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        below = d0[mid] + b < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    a, c = grid[lo], grid[hi]
    da, dc = d0[lo] + b, d0[hi] + b
    with np.errstate(divide="ignore", invalid="ignore"):  # rows at an endpoint, set below
        theta = np.minimum(np.maximum(a - da * (c - a) / (dc - da), a), c)
    theta = np.where(d0[-1] + b <= 0, radius, theta)
    return np.where(d0[0] + b >= 0, -radius, theta)


@dataclass(frozen=True)
class HuberCalibration:
    """The public calibration of one run at sample size n (h, β = 1/(2h), Λ, the ε split, σ)."""

    h: float
    beta: float
    lam: float
    eps_noise: float
    eps_jacobian: float
    sigma: float


class HuberObjectivePerturbation(Algorithm):
    """Huberised objective perturbation, eq. 9 of BST14 Appendix A; HUB-1D only."""

    name: ClassVar[str] = "huber_objective_perturbation"
    summary: ClassVar[str] = ("Huberised objective perturbation on HUB-1D (BST14 App. A eq. 9): "
                              "the smoothing counterexample, excess Ω(√n)")
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (FOCS 2014), Appendix A, eq. 9 and "
                               "Thm A.1; Balle & Wang (ICML 2018) for the Gaussian calibration")
    privacy: ClassVar[str] = "approx"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness (defined for the 1-D Huberised loss of BST14 Appendix D). The printed
    #: regulariser's claim is nominal and the audit refutes it (docs/audit.md, 'Designated
    #: instances'; suites/audit.yaml, nominal_huber_printed), so the privacy check is skipped here
    #: and audited as an expected violation there.
    check_settings: ClassVar[dict[str, Any]] = {
        "problem": "hub_1d", "p": 1,
        "skip": {"check_empirical_privacy": "the printed regulariser's claim is nominal (ledger "
                 "not certified) and refuted by the audit: docs/audit.md"}}
    params: ClassVar[dict[str, Param]] = {
        "h": Param(0.1, low=0.0, low_open=True, doc="Huberisation parameter h (or c in h = c/√n)"),
        "h_rule": Param("fixed", kind="str", choices=("fixed", "sqrt_n"),
                        doc="fixed: use h; sqrt_n: use h/√n (Thm A.1's best order)"),
        "regularizer": Param("printed", kind="str", choices=("printed", "private"),
                             doc="printed: θ²/(8εh) of eq. 9 (ledger not certified); private: "
                                 "Λ = β/expm1(ε/2), certified"),
    }

    h: float
    h_rule: str
    regularizer: str

    def not_applicable_reason(self, problem: Problem) -> str | None:
        if problem.name != "hub_1d":
            return (f"{self.name} is defined for the 1-D loss (y − xθ)₊ of HUB-1D only "
                    f"(BST14 Appendix A); got problem {problem.name!r}")
        return super().not_applicable_reason(problem)

    def cost(self, n: int, p: int) -> float:
        return 20.0 * n

    def huber_h(self, n: int) -> float:
        """The h used at sample size n."""
        return self.h / math.sqrt(n) if self.h_rule == "sqrt_n" else self.h

    def rate_card(self) -> RateCard:
        """R11 (fixed h) / R11′ (h = c/√n): LOWER bounds, average scale (sum divided by n)."""
        if self.h_rule == "fixed":
            expression = f"minimum(1, {self.h!r})/9"
            exponents = {"n": 0, "p": 0, "epsilon": 0}
            rid = "R11: sum-scale n·min(1, h)/9 (slope +1 in n on the sum scale, 0 on average)"
        else:
            expression = f"minimum(1, {self.h!r}/sqrt(n))/9"
            exponents = {"n": -0.5, "p": 0, "epsilon": 0}
            rid = "R11′: h = c/√n, sum-scale ≈ c√n/9 (slope +1/2 sum, −1/2 average)"
        return RateCard(
            expression=expression, exponents=exponents,
            citation=f"BST14 Thm A.1, Lemma A.2 (D1, [derived] constant 1/9, docs/bst14.md); {rid}",
            regime="HUB-1D, ε < 1 constant, δ = Ω(n⁻⁴)",
            notes=("A LOWER bound on the worst of D1/D2 (D1 gives n·h/9, D2 ≈ 1/(16h) on the sum "
                   "scale), not an upper bound; slopes are the test, docs/bst14.md."))

    def calibration(self, n: int, epsilon: float, delta: float) -> HuberCalibration:
        """The public calibration at sample size n (module docstring, 'Privacy calibration')."""
        h = self.huber_h(n)
        beta = 1.0 / (2.0 * h)
        if self.regularizer == "printed":
            lam, eps_noise, eps_jac = 1.0 / (4.0 * epsilon * h), float(epsilon), 0.0
            sigma = analytic_gaussian_sigma(2.0, eps_noise, delta)
        else:
            lam, eps_noise = beta / math.expm1(epsilon / 2.0), epsilon / 2.0
            eps_jac = epsilon / 2.0
            sigma = pointwise_gaussian_sigma(2.0, eps_noise, delta, 1)
        return HuberCalibration(h=h, beta=beta, lam=lam, eps_noise=eps_noise,
                                eps_jacobian=eps_jac, sigma=sigma)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        x, y = _hub_data(self.name, data)
        cal = self.calibration(data.n, epsilon, delta)
        b = float(gaussian_noise(1, cal.sigma, rng)[0])
        theta, gap = minimise_huber_objective(x, y, cal.h, cal.lam, b)
        ledger = PrivacyLedger.from_charges(*self._charges(epsilon, delta, cal))
        info: dict[str, Any] = {"h": cal.h, "lambda": cal.lam, "noise_scale": cal.sigma,
                                "noise": b, "solver_gap": gap,
                                "solver_method": "exact piecewise quadratic"}
        return Release(theta=problem.constraint.project(np.array([theta])), ledger=ledger,
                       info=info)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease:
        """``size`` releases of :meth:`run`, exact: the calibration once, all rows' b ~ N(0, σ²)
        at once, then every row's exact minimiser (:func:`minimise_huber_objective_batch`,
        bit for bit :meth:`run`'s for the same b)."""
        x, y = _hub_data(self.name, data)
        cal = self.calibration(data.n, epsilon, delta)
        b = gaussian_noise(1, cal.sigma, rng, size)[:, 0]
        thetas = minimise_huber_objective_batch(x, y, cal.h, cal.lam, b)
        ledger = PrivacyLedger.from_charges(*self._charges(epsilon, delta, cal))
        return BatchRelease(problem.constraint.project(thetas[:, None]), ledger)

    # --- the output law (privacy audit) ------------------------------------------------------
    def output_laws(self, d0: Dataset, d1: Dataset, *, epsilon: float,
                    delta: float) -> tuple[PiecewiseLinearRoot, PiecewiseLinearRoot]:
        """The laws of :meth:`run`'s θ on D = ``d0`` and D′ = ``d1``, on common knots.

        [derived] :meth:`run` releases the exact minimiser over [−2, 2] of
        J(θ) = Σ f̂(yᵢ − xᵢθ) + (Λ/2)θ² + bθ, b ~ N(0, σ²): with G_D = J′ at b = 0
        (:func:`huber_objective_derivative`, continuous, piecewise linear with knots
        (yᵢ ± h)/xᵢ, slope Λ + Σ xᵢ²f̂″ ≥ Λ > 0) the release is −2 when G_D(−2) + b ≥ 0, 2 when
        G_D(2) + b ≤ 0, and G_D⁻¹(−b) otherwise (:func:`minimise_huber_objective`), i.e. the
        :class:`~dpbench.privacy.root_law.PiecewiseLinearRoot` law of (knots, G_D at the knots,
        σ). Both laws are given on the union of the two data sets' knots (G is linear between
        its own knots, so its values there are exact)."""
        x0, y0 = _hub_data(self.name, d0)
        x1, y1 = _hub_data(self.name, d1)
        cal = self.calibration(d0.n, epsilon, delta)
        knots = np.union1d(_huber_grid(x0, y0, cal.h, _HUB_RADIUS),
                           _huber_grid(x1, y1, cal.h, _HUB_RADIUS))
        return tuple(PiecewiseLinearRoot(  # type: ignore[return-value]
            knots, np.array([huber_objective_derivative(float(t), x, y, cal.h, cal.lam, 0.0)
                             for t in knots]), cal.sigma) for x, y in ((x0, y0), (x1, y1)))

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the released law on the pair (:meth:`output_laws`;
        :func:`dpbench.privacy.root_law.root_law_epsilon`: exact Gaussian integrals on each
        piece, a root in ε). Unlike the ledger's bound it includes the Jacobian ratio
        G′_D/G′_D′ and the θ-dependent shift, so with ``regularizer="printed"`` (uncertified
        ledger) it may exceed the claimed ε."""
        law0, law1 = self.output_laws(d0, d1, epsilon=epsilon, delta=delta)
        return root_law_epsilon(law0, law1, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the released law (:meth:`output_laws`): the atoms' log
        ratio at ±2, the change-of-variables densities' inside."""
        law0, law1 = self.output_laws(d0, d1, epsilon=epsilon, delta=delta)
        return law0.log_density_ratio(law1, np.asarray(thetas, dtype=float)[:, 0])

    def _charges(self, epsilon: float, delta: float, cal: HuberCalibration) -> list[Charge]:
        eps_noise, eps_jac, lam, beta = cal.eps_noise, cal.eps_jacobian, cal.lam, cal.beta
        if self.regularizer == "printed":
            extra = math.log1p(beta / lam)
            return [Charge(
                "Huberised objective perturbation: Gaussian linear term", eps_noise, delta,
                "analytic Gaussian (Balle-Wang 2018 Thm 8), sensitivity 2; fixed-shift "
                "calibration, the shift v(θ) is not fixed", certified=False), Charge(
                "Jacobian ratio (printed regulariser)", 0.0, 0.0,
                f"eq. 9's Λ = β/(2ε) does not meet the CMS11/KST12 condition: the Jacobian adds "
                f"log(1+β/Λ) = {extra:.4g} to ε, not charged here", certified=False)]
        noise = Charge("Huberised objective perturbation: Gaussian linear term", eps_noise, delta,
                       "pointwise-loss tail bound, sensitivity 2, d = 1 (CMS11 Thm 9 / KST12)")
        return [noise, Charge("Jacobian ratio", eps_jac, 0.0,
                              f"log(1+β/Λ) with β = 1/(2h) = {beta:.4g}, Λ = {lam:.4g}")]


def _hub_data(name: str, data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of HUB-1D data; ``NotApplicable`` unless p = 1 and the data are labelled."""
    if data.p != 1 or data.y is None:
        raise NotApplicable(f"{name}: HUB-1D data must have p = 1 and labels")
    return data.X[:, 0], data.y
