"""``diffprivlib_logistic``: diffprivlib 0.6.6's ``LogisticRegression`` as a dpbench mechanism.

diffprivlib implements objective perturbation (Chaudhuri, Monteleoni, Sarwate, JMLR 2011 [CMS11],
Algorithm 2) with L-BFGS. This adapter maps a dpbench logistic problem onto its public arguments
from PUBLIC quantities only and releases its coefficients, projected onto the problem's ball.

**Objective correspondence.** With ``fit_intercept=False`` and labels ±1 (diffprivlib's positive
class is +1, so ``coef_`` is θ of log(1 + exp(−y⟨θ, x⟩))), diffprivlib minimises, on dpbench's
average scale,

    (1/n)·Σᵢ log(1 + exp(−yᵢ⟨w, xᵢ⟩)) + (1/(2Cn))·‖w‖² + ⟨b, w⟩/n [+ (Δ/2)‖w‖²]

(scikit-learn's ``LinearModelLoss`` averages and diffprivlib sets ``l2_reg_strength = 1/(C·n)``).
dpbench's logistic problem is (1/n)·Σᵢ log(1 + exp(−yᵢ⟨θ, xᵢ⟩)) + (ridge/2)‖θ‖², so ridge =
1/(C·n), i.e. **C = 1/(n·ridge)**: the non-private part of the objectives coincide. When the
problem has ridge 0 (C → ∞) diffprivlib cannot run without its own regulariser (α = 1/C > 0): the
adapter then uses C = 1.0 (diffprivlib's default) unless the suite sets ``C``, and the mechanism
minimises the logistic loss **plus (1/(2Cn))‖w‖²**, not the problem's objective; the excess risk
is measured against the problem's (unregularised) optimum, so it includes that bias. In the
fallback branch of diffprivlib's calibration (ε′ ≤ 0) it also adds (Δ/2)‖w‖² with
nΔ = c·q/(e^{ε/4} − 1) − α (``info["extra_ridge"]``).

**Public inputs.** ``data_norm`` = ``problem.constants()["data_norm"]`` (never from the data:
diffprivlib would compute it from X and warn ``PrivacyLeakWarning``; the adapter turns that
warning into an error), ε, C (from the public ridge and n), ``tol``/``max_iter``.

**Labels and one class.** diffprivlib raises ValueError when y has one class (likely at tiny n);
an exception on D but not on D′ would itself leak. With ``one_class="pad"`` (default) the adapter
appends two PUBLIC records (x = 0, y = +1) and (x = 0, y = −1) to every dataset: they add the
constant 2·log 2 to the sum loss and nothing to its gradient or Hessian, and since scikit-learn's
objective is C·Σℓ + ½‖w‖² and diffprivlib's noise term C·⟨b, w⟩ does not depend on n, the
perturbed objective's minimiser — the released law — is exactly that of diffprivlib on the n real
records (the zero rows have norm 0 ≤ data_norm, so D ∪ pad and D′ ∪ pad stay neighbours).
``one_class="not_applicable"`` instead raises :class:`~dpbench.NotApplicable` (status 3) —
data-dependent, so not for audits.

**Seeding.** diffprivlib draws from a legacy ``numpy.random.RandomState`` (never pass None: it then
uses ``secrets.SystemRandom``); the adapter builds one per run on a fresh MT19937 seeded with 128
bits drawn from the injected Generator (``RandomState(MT19937(SeedSequence(...)))``), so the run
is a function of the Generator and two runs practically never share a stream (a 32-bit integer
seed would collide ~100 times in 10⁶ audit runs and create spurious atoms).

**Release.** diffprivlib minimises without constraint; dpbench requires θ ∈ C. The adapter
releases Π_C(w) (post-processing: no privacy cost) and records ``info["raw_norm"]`` and
``info["projected"]``.

**Privacy claim and its caveats.** The ledger states diffprivlib's claim, pure ε-DP, marked
``certified=False``: (1) the CMS11 proof assumes the exact minimiser, diffprivlib stops L-BFGS at
a gradient tolerance (``tol``, default 1e-4, ``max_iter`` 100); (2) with ``scaling="shipped"``
(default, diffprivlib as users call it) the Jacobian correction is 2·log(1 + c·q/α), while the
Hessian φ''·xxᵀ reaches c·q² — for q > 1 the calibration under-corrects
(:mod:`dpbench_diffprivlib.calibration`, docs/diffprivlib.md). ``scaling="unit_norm"`` calls
diffprivlib on x/q with data_norm 1 and C·q² — the same non-private objective in w = w̃/q — so that
diffprivlib's own formula becomes CMS11's correction 2·log(1 + c·q²/α): a fix through the public
API.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np

from dpbench import (Algorithm, Charge, NotApplicable, Param, PrivacyLedger, RateCard, Release,
                     get_tags)

from .calibration import cms11_calibration, privacy_loss_bound, shipped_calibration

DIFFPRIVLIB_VERSION = "0.6.6"


def legacy_random_state(rng: np.random.Generator) -> np.random.RandomState:
    """A fresh legacy RandomState for diffprivlib, seeded with 128 bits from ``rng``."""
    entropy = rng.integers(0, 2**32, size=4, dtype=np.uint64)
    return np.random.RandomState(np.random.MT19937(np.random.SeedSequence(entropy.tolist())))


def public_data_norm(problem: Any, name: str) -> float:
    """The declared ``data_norm`` of the problem (never computed from data)."""
    q = problem.constants().get("data_norm")
    if q is None or not math.isfinite(q) or not q > 0:
        raise NotApplicable(f"{name} needs a finite positive public data_norm "
                            f"(problem.data_bounds()); {problem.name!r} declares {q!r}")
    return float(q)


class DiffprivlibLogistic(Algorithm):
    """diffprivlib.models.LogisticRegression (objective perturbation, CMS11), pure ε-DP claim."""

    name: ClassVar[str] = "diffprivlib_logistic"
    summary: ClassVar[str] = ("diffprivlib 0.6.6 LogisticRegression: objective perturbation "
                              "(CMS11 Alg. 2), L-BFGS, pure ε-DP as claimed by diffprivlib")
    citation: ClassVar[str] = ("Chaudhuri, Monteleoni, Sarwate (JMLR 2011), Algorithm 2 / Thm 9; "
                               "Holohan et al., diffprivlib (arXiv:1907.02444), v0.6.6")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "smooth")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "C": Param(None, kind="float", low=0.0, low_open=True,
                   none="1/(n·ridge) from the problem's public ridge; 1.0 (diffprivlib's "
                        "default) when the ridge is 0",
                   doc="diffprivlib's inverse regularisation C (α = 1/C on the sum scale)"),
        "scaling": Param("shipped", kind="str", choices=("shipped", "unit_norm"),
                         doc="shipped: diffprivlib as called by users (data_norm = q); "
                             "unit_norm: fit x/q with data_norm 1 and C·q² (CMS11's Jacobian "
                             "correction in c·q²)"),
        "one_class": Param("pad", kind="str", choices=("pad", "not_applicable"),
                           doc="pad: append public records (0, +1), (0, -1) (law unchanged); "
                               "not_applicable: NotApplicable when y has one class"),
        "tol": Param(1e-4, kind="float", low=0.0, low_open=True,
                     doc="diffprivlib's L-BFGS gradient tolerance (its default 1e-4)"),
        "max_iter": Param(100, kind="int", low=1, doc="diffprivlib's L-BFGS iteration cap"),
    }
    check_settings: ClassVar[dict[str, Any]] = {
        "problem": {"problem": "logistic", "params": {"ridge": 0.1}},
        "p": 3,
    }

    C: float | None
    scaling: str
    one_class: str
    tol: float
    max_iter: int

    # --- declarations -------------------------------------------------------------------------
    def rate_card(self) -> RateCard:
        """Derived (smooth, strongly convex, exact solve), average scale.

        With C = 1/(nΔ) the perturbed average objective is Δ-strongly convex, so the noisy
        minimiser moves by ‖b‖/(nΔ) from the regularised one; with θ* interior and β-smooth
        risk, excess ≤ (β/2)·E‖b‖²/(nΔ)², and E‖b‖² = p(p+1)·(2q/ε′)² ≤ 16·p(p+1)q²/ε² when
        ε′ ≥ ε/2.
        """
        return RateCard(
            expression="8*beta*p*(p+1)*data_norm**2/(n**2*Delta**2*epsilon**2)",
            exponents={"n": -2, "p": 2, "epsilon": -2},
            citation=("CMS11 Alg. 2 (Gamma-norm b, scale 2q/ε′) with the argmin moving by "
                      "‖b‖/(nΔ) [derived]: E ≤ (β/2)·E‖b‖²/(nΔ)²"),
            regime=("problem ridge Delta > 0 with C = 1/(n*Delta) (the default); unconstrained "
                    "minimiser inside C (data_norm/(2*Delta) <= radius); eps' >= eps/2, i.e. "
                    "n >= data_norm/(4*Delta*expm1(epsilon/4)) (shipped scaling) or "
                    "data_norm**2/(4*Delta*expm1(epsilon/4)) (unit_norm); exact solve. On "
                    "Delta = 0 problems the card is infinite: no theorem bounds the excess over "
                    "the unregularised ERM for a fixed C"),
            notes=("Same exponents as BST14 Thm E.2 (pure), L**2*p**2/(n**2*Delta*epsilon**2). "
                   "The Lipschitz form 4*L*p*data_norm/(n*Delta*epsilon) (E|b|/(n Delta) times L) "
                   "also holds; diffprivlib's L-BFGS tolerance adds an optimisation error the "
                   "card ignores."))

    def cost(self, n: int, p: int) -> float:
        return float(20 * n * p)

    def not_applicable_reason(self, problem: Any) -> str | None:
        if get_tags(problem).softplus_margin is None:
            return (f"{self.name} minimises the logistic loss log(1 + exp(-y<theta, x>)) + ridge; "
                    f"problem {problem.name!r} does not declare it (tag softplus_margin)")
        return super().not_applicable_reason(problem)

    # --- the public mapping -------------------------------------------------------------------
    def inverse_regularisation(self, problem: Any, n: int) -> float:
        """C: the suite's, else 1/(n·ridge) from the declared ridge, else diffprivlib's 1.0."""
        if self.C is not None:
            return float(self.C)
        ridge = float(get_tags(problem).softplus_margin or 0.0)
        return 1.0 / (n * ridge) if ridge > 0 else 1.0

    def calibration(self, problem: Any, n: int, epsilon: float):
        """The calibration diffprivlib applies (in the caller's w coordinates)."""
        q = public_data_norm(problem, self.name)
        alpha = 1.0 / self.inverse_regularisation(problem, n)
        if self.scaling == "shipped":
            return shipped_calibration(epsilon, q, alpha)
        return cms11_calibration(epsilon, q, alpha)

    def exact_epsilon(self, d0: Any, d1: Any, problem: Any, *, epsilon: float,
                      delta: float) -> float | None:
        """The audit's "true ε" (p = 1 only, else None): the ε of the exact-argmin release law
        (:mod:`dpbench_diffprivlib.exact`) on the pair, projected onto C = [−R, R] — the
        supremum of |log density ratio| over a grid of 20 001 interior points and the log
        ratios of the two end atoms. It is diffprivlib's mechanism with an exact solver; its
        L-BFGS stops at a gradient tolerance (``tol``), so the real release differs from it by
        about that much (docs/diffprivlib.md)."""
        from .exact import cdf, privacy_loss

        radius = getattr(problem.constraint, "radius", None)
        if d0.p != 1 or d0.y is None or d1.y is None or radius is None:
            return None
        cal = self.calibration(problem, d0.n, float(epsilon))
        a = (np.asarray(d0.X, float)[:, 0], np.asarray(d0.y, float))
        b = (np.asarray(d1.X, float)[:, 0], np.asarray(d1.y, float))
        R = float(radius)
        interior = float(np.max(np.abs(privacy_loss(np.linspace(-R, R, 20001), a, b, cal))))
        lo = cdf(np.array([-R]), *a, cal)[0], cdf(np.array([-R]), *b, cal)[0]
        hi = 1.0 - cdf(np.array([R]), *a, cal)[0], 1.0 - cdf(np.array([R]), *b, cal)[0]
        atoms = [abs(math.log(u / v)) for u, v in (lo, hi) if u > 0 and v > 0]
        return max([interior, *atoms])

    def run(self, data, problem, *, epsilon, delta, rng) -> Release:
        from diffprivlib.accountant import BudgetAccountant
        from diffprivlib.models import LogisticRegression
        from diffprivlib.utils import PrivacyLeakWarning
        from sklearn.exceptions import ConvergenceWarning

        n, p = data.n, data.p
        q = public_data_norm(problem, self.name)
        y = np.asarray(data.y, dtype=float)
        if data.y is None or not np.all(np.isin(y, (-1.0, 1.0))):
            raise NotApplicable(f"{self.name} needs labels in {{-1, +1}}")
        C = self.inverse_regularisation(problem, n)
        X = np.asarray(data.X, dtype=float)
        if self.scaling == "unit_norm":
            X, norm_arg, C_arg, back = X / q, 1.0, C * q * q, 1.0 / q
        else:
            norm_arg, C_arg, back = q, C, 1.0
        if self.one_class == "pad":
            X = np.vstack([X, np.zeros((2, p))])
            y = np.concatenate([y, [1.0, -1.0]])
        elif np.unique(y).size < 2:
            raise NotApplicable(f"{self.name}: diffprivlib's LogisticRegression raises on "
                                "one-class labels (one_class='not_applicable')")
        model = LogisticRegression(
            epsilon=float(epsilon), data_norm=norm_arg, C=C_arg, fit_intercept=False,
            tol=self.tol, max_iter=self.max_iter, random_state=legacy_random_state(rng),
            accountant=BudgetAccountant())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            warnings.simplefilter("error", PrivacyLeakWarning)
            model.fit(X, y)
        converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        w = np.asarray(model.coef_, dtype=float).reshape(-1) * back
        raw_norm = float(np.linalg.norm(w))
        theta = problem.constraint.project(w)
        projected = not np.array_equal(theta, w)
        cal = self.calibration(problem, n, float(epsilon))
        theorem = (f"CMS11 Alg. 2 as implemented by diffprivlib {DIFFPRIVLIB_VERSION} "
                   f"(scaling={self.scaling}); nominal: exact-argmin proof, L-BFGS solve "
                   f"(tol={self.tol:g}); Jacobian term {cal.jacobian_term:.4g} for data_norm "
                   f"{q:g}, alpha {1.0 / C:.4g}; exact-argmin privacy-loss bound "
                   f"{privacy_loss_bound(cal):.4g}")
        ledger = PrivacyLedger.from_charges(Charge(
            "diffprivlib LogisticRegression (Vector mechanism)", float(epsilon), 0.0, theorem,
            certified=False))
        info = {"C": C, "alpha": 1.0 / C, "objective_ridge": 1.0 / (C * n),
                "extra_ridge": cal.extra_ridge / n, "eps_noise": cal.eps_noise,
                "jacobian_term": cal.jacobian_term, "raw_norm": raw_norm,
                "projected": bool(projected), "lbfgs_converged": bool(converged)}
        return Release(theta=theta, ledger=ledger, iterations=int(np.max(model.n_iter_)),
                       info=info)
