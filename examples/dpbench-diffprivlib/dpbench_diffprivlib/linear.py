"""``diffprivlib_linear``: diffprivlib 0.6.6's ``LinearRegression`` (functional mechanism) as a
dpbench mechanism, for least-squares problems: dpbench's ``real_least_squares`` (any
``SquaredLoss``) and this package's synthetic ``dpl_least_squares``.

diffprivlib (Zhang, Zhang, Xiao, Yang, Winslett, VLDB 2012 [ZZX12]) writes the SUM objective
Σᵢ(yᵢ − ⟨w, xᵢ⟩)² as a polynomial in w, adds Laplace noise to each of its 1 + p + p(p+1)/2
coefficients (Σy², Σyxⱼ, Σxⱼxₖ), each at ε/(1 + p + p(p+1)/2) with the coefficient's range from
``bounds_X``/``bounds_y`` as sensitivity, and minimises the noisy quadratic with scipy's BFGS from
w = 0, without regulariser (``alpha=0``) and without constraint.

**Objective correspondence.** With ``fit_intercept=False`` (all of ε to the objective)
Σᵢ(yᵢ − ⟨w, xᵢ⟩)² = 2n·[(1/n)·Σᵢ ½(⟨w, xᵢ⟩ − yᵢ)²]: the same minimiser as dpbench's average least
squares with ridge 0. A problem ridge λ > 0 is NOT passed on (diffprivlib has no regulariser
argument here): the mechanism then targets the unregularised least squares
(``info["objective_ridge"] = 0``).

**Public inputs.** ``bounds_X = (−q, q)`` for every coordinate (‖x‖ ≤ q bounds every |xⱼ|),
``bounds_y = (−B, B)``, from ``problem.constants()`` (``data_norm``, ``label_bound``), never from
the data (diffprivlib would compute them from X and y with a ``PrivacyLeakWarning``; the adapter
turns that warning into an error). The bounds are symmetric on purpose: diffprivlib 0.6.6 takes
the sensitivity of the squared-coordinate coefficient Σxⱼ² as max(|lowerⱼ|, |lowerⱼ|)² — the
lower bound twice — which is right only when |lowerⱼ| ≥ |upperⱼ| (docs/diffprivlib.md).

**Release.** The noisy Gram matrix may be indefinite at small n; BFGS then runs off and the
coefficients are huge or not finite. The adapter releases Π_C(w), and the centre of C when w is
not finite — both post-processing of the noisy coefficients, so the privacy claim is unaffected
(unlike objective perturbation, the functional mechanism's proof does not need an exact solver).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from dpbench import Algorithm, Charge, NotApplicable, Param, PrivacyLedger, RateCard, Release

from .logistic import DIFFPRIVLIB_VERSION, legacy_random_state, public_data_norm


def _is_least_squares(problem: Any) -> bool:
    """dpbench's squared loss (``dpbench.SquaredLoss``: real_least_squares and this package's
    dpl_least_squares)."""
    from dpbench import SquaredLoss

    return isinstance(problem, SquaredLoss)


class DiffprivlibLinear(Algorithm):
    """diffprivlib.models.LinearRegression (functional mechanism, ZZX12), pure ε-DP."""

    name: ClassVar[str] = "diffprivlib_linear"
    summary: ClassVar[str] = ("diffprivlib 0.6.6 LinearRegression: functional mechanism (Laplace "
                              "on the least-squares polynomial's coefficients), pure ε-DP")
    citation: ClassVar[str] = ("Zhang, Zhang, Xiao, Yang, Winslett (VLDB 2012), functional "
                               "mechanism; Holohan et al., diffprivlib (arXiv:1907.02444), v0.6.6")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "smooth")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {}
    check_settings: ClassVar[dict[str, Any]] = {
        "problem": "dpl_least_squares",
        "p": 2,
        "rate_smoke_n": (1000, 2000, 4000, 8000),
    }

    def rate_card(self) -> RateCard:
        """Derived for an isotropic design, average scale (docs/diffprivlib.md).

        K = 1 + p + p(p+1)/2 coefficients at ε/K each: E‖e‖² ≤ 8p·q²B²K²/ε² (linear term),
        E‖E‖_F² ≤ 8p²q⁴K²/ε² (Gram). With λ_min(XᵀX/n) ≥ q²/(2p) and ‖E‖/n ≤ λ/2 the noisy
        minimiser moves by ≤ (4p/q²)(‖e‖ + R‖E‖)/n; excess ≤ (β/2)·that², β = q².
        """
        return RateCard(
            expression=("128*p**2*(1 + p + p*(p + 1)/2)**2*(p*label_bound**2 + "
                        "p**2*data_norm**2*(D/2)**2)/(n**2*epsilon**2)"),
            exponents={"n": -2, "p": 8, "epsilon": -2},
            citation=("ZZX12 functional mechanism with diffprivlib's per-coefficient ε/K split "
                      "[derived]: (β/2)·‖Ĝ⁻¹(e − E·w*)/n‖²"),
            regime=("ridge 0; isotropic design with lambda_min(X^T X/n) >= data_norm**2/(2p); n "
                    "large enough that the Gram noise is below lambda/2 (the noisy quadratic is "
                    "convex); unconstrained least-squares solution inside C"),
            notes="Loose in p (Frobenius bounds); the exponents in n and epsilon are the point.")

    def cost(self, n: int, p: int) -> float:
        return float(n * p * p)

    def not_applicable_reason(self, problem: Any) -> str | None:
        if not _is_least_squares(problem):
            return (f"{self.name} minimises the least-squares loss; problem {problem.name!r} is "
                    "not a dpbench SquaredLoss (real_least_squares, dpl_least_squares)")
        return super().not_applicable_reason(problem)

    def run(self, data, problem, *, epsilon, delta, rng) -> Release:
        from diffprivlib.accountant import BudgetAccountant
        from diffprivlib.models import LinearRegression
        from diffprivlib.utils import PrivacyLeakWarning

        q = public_data_norm(problem, self.name)
        B = problem.constants().get("label_bound")
        if B is None or not np.isfinite(B) or not B > 0:
            raise NotApplicable(f"{self.name} needs a finite public label_bound; "
                                f"{problem.name!r} declares {B!r}")
        model = LinearRegression(
            epsilon=float(epsilon), bounds_X=(-q, q), bounds_y=(-float(B), float(B)),
            fit_intercept=False, random_state=legacy_random_state(rng),
            accountant=BudgetAccountant())
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            warnings.simplefilter("ignore", RuntimeWarning)   # BFGS on an indefinite quadratic
            model.fit(np.asarray(data.X, dtype=float), np.asarray(data.y, dtype=float))
        w = np.asarray(model.coef_, dtype=float).reshape(-1)
        finite = bool(np.all(np.isfinite(w)))
        theta = problem.constraint.project(w) if finite else problem.constraint.center(data.p)
        K = 1 + data.p + data.p * (data.p + 1) // 2
        ledger = PrivacyLedger.from_charges(Charge(
            "diffprivlib LinearRegression (functional mechanism)", float(epsilon), 0.0,
            f"ZZX12 functional mechanism as implemented by diffprivlib {DIFFPRIVLIB_VERSION}: "
            f"{K} Laplace coefficients at epsilon/{K} each (basic composition), symmetric "
            "public bounds; the minimisation is post-processing"))
        info = {"raw_norm": float(np.linalg.norm(w)) if finite else float("inf"),
                "projected": bool(not finite or not np.array_equal(theta, w)),
                "finite": finite, "objective_ridge": 0.0}
        return Release(theta=theta, ledger=ledger, info=info)
