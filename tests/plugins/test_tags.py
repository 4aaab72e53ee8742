"""Capability tags and the exact-sampler registry (dpbench.core.tags, dpbench.core.exact_samplers).

Mechanisms learn what a problem's loss allows (a rank-1 Hessian, an isotropic quadratic, a
closed-form reference curve, an exact sampler of its Gibbs law) from declarations, never from its
class; a declaration is a claim about one loss and does not survive a subclass that redefines it
(docs/writing-a-plugin.md, 'Declaring capabilities').
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from dpbench.algorithms.exp_mech import ExpMech
from dpbench.algorithms.gibbs import Gibbs, gaussian_gibbs_constants, has_exact_expmech
from dpbench.algorithms.objective_perturbation import (
    ObjectivePerturbation,
    gaussian_noise_sigma,
    hessian_change_rank,
    shift_dimension,
)
from dpbench.algorithms.rashomon import Rashomon
from dpbench.core import registry
from dpbench.core.errors import NotApplicable
from dpbench.core.exact_samplers import (
    LAWS,
    exact_sampler,
    has_exact_sampler,
    register_exact_sampler,
)
from dpbench.core.problem import Dataset, Optimum, Problem
from dpbench.core.sets import Ball, BallAt, Intersection
from dpbench.core.tags import LOSS_DEFINING, ProblemTags, get_tags
from dpbench.problems.hinge_svm import HingeSVM
from dpbench.problems.kink_sc import KinkSC
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.lb_quad import LBQuad
from dpbench.problems.lin_ball import LinBall
from dpbench.problems.logistic import Logistic
from dpbench.problems.mean_est import MeanEst
from dpbench.problems.real_data import RealHinge, RealLeastSquares, RealLogistic

ALGORITHMS = Path(__file__).resolve().parents[2] / "dpbench" / "algorithms"


def _draws(draw, seed: int = 3, k: int = 5) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return np.array([draw(rng) for _ in range(k)])


# --- (1) what the built-in problems declare -------------------------------------------------------
@pytest.mark.parametrize("problem, expected", [
    (Logistic(), ProblemTags(hessian_rank=1, gradient_shift_dim=2, softplus_margin=0.0)),
    (Logistic(ridge=0.3), ProblemTags(hessian_rank=1, gradient_shift_dim=2, softplus_margin=0.3)),
    (HingeSVM(), ProblemTags(hessian_rank=1, gradient_shift_dim=2)),
    (HingeSVM(ridge=0.1), ProblemTags(hessian_rank=1, gradient_shift_dim=2)),
    (LBLin(), ProblemTags(closed_form="lb_lin")),
    (LBQuad(), ProblemTags(isotropic_quadratic=(1.0, 1.0), closed_form="lb_quad")),
    (LBQuad(radius=2.0, data_norm=0.5),
     ProblemTags(isotropic_quadratic=(0.5, 2.0), closed_form="lb_quad")),
    (MeanEst(), ProblemTags(isotropic_quadratic=(0.75, 1.0), closed_form="mean_est")),
    (MeanEst(radius=3.0, mean_norm=1.0, spread=0.5),
     ProblemTags(isotropic_quadratic=(1.5, 3.0), closed_form="mean_est")),
    (KinkSC(), ProblemTags(closed_form="kink_sc")),
    (RealLogistic(ridge=0.2),
     ProblemTags(hessian_rank=1, gradient_shift_dim=2, softplus_margin=0.2)),
    (RealHinge(), ProblemTags(hessian_rank=1, gradient_shift_dim=2)),
    (RealLeastSquares(), ProblemTags(hessian_rank=1, gradient_shift_dim=2)),
], ids=lambda v: getattr(v, "name", "") if isinstance(v, Problem) else "")
def test_builtin_tags(problem: Problem, expected: ProblemTags) -> None:
    assert get_tags(problem) == expected


def test_other_builtins_claim_nothing() -> None:
    tagged = {"logistic", "hinge_svm", "lb_lin", "lb_quad", "mean_est", "kink_sc",
              "real_logistic", "real_hinge", "real_least_squares"}
    for name, cls in registry.available("problems").items():
        if name not in tagged:
            assert get_tags(cls()) == ProblemTags(), name


def test_margin_losses_calibrate_with_rank_one() -> None:
    for problem in (Logistic(), HingeSVM(ridge=0.2)):
        assert (hessian_change_rank(problem, 10), shift_dimension(problem, 10)) == (1, 2)
        assert (hessian_change_rank(problem, 1), shift_dimension(problem, 1)) == (1, 1)
    assert (hessian_change_rank(LBQuad(), 10), shift_dimension(LBQuad(), 10)) == (10, 10)
    assert gaussian_gibbs_constants(MeanEst()) == (0.75, 1.0)
    assert gaussian_gibbs_constants(Logistic()) is None


def test_tags_validate_their_values() -> None:
    with pytest.raises(ValueError, match="hessian_rank"):
        ProblemTags(hessian_rank=0)
    with pytest.raises(ValueError, match="closed_form"):
        ProblemTags(closed_form="not_a_curve")

    class Wrong(LBLin):
        def __dpbench_tags__(self):  # type: ignore[no-untyped-def]
            return {"hessian_rank": 1}

    with pytest.raises(TypeError, match="ProblemTags"):
        get_tags(Wrong())


# --- (2) a subclass that redefines the loss has no claims -----------------------------------------
class CubedLogistic(Logistic):
    """Logistic plus (1/6)Σⱼθⱼ⁴: still smooth and convex, but its Hessian adds diag(2θⱼ²), so the
    inherited rank-1 claim would be false (any override of the loss drops the claims)."""

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        return super().loss(theta, data) + float(np.sum(np.asarray(theta) ** 4)) / 6.0

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        return super().grad(theta, data, idx) + (2.0 / 3.0) * np.asarray(theta) ** 3


class OtherPhiLogistic(Logistic):
    """Only φ changes (the way MarginLossProblem defines the loss)."""

    @staticmethod
    def _phi(margins: np.ndarray) -> np.ndarray:
        return 2.0 * np.logaddexp(0.0, -margins)


def test_overriding_the_loss_drops_every_claim() -> None:
    assert get_tags(CubedLogistic()) == ProblemTags()
    assert get_tags(OtherPhiLogistic()) == ProblemTags()


@pytest.mark.parametrize("attribute", LOSS_DEFINING)
def test_each_loss_defining_attribute_drops_the_claims(attribute: str) -> None:
    base = inspect.getattr_static(Logistic, attribute)
    sub = type("Sub", (Logistic,), {attribute: base})  # the same object: the loss is unchanged
    assert get_tags(sub()) == get_tags(Logistic())
    sub = type("Sub", (Logistic,), {attribute: lambda self, *a, **k: None})
    assert get_tags(sub()) == ProblemTags()


def test_objective_perturbation_calibrates_with_rank_p_after_an_override() -> None:
    n, p, eps, delta = 100, 10, 1.0, 1e-6
    alg = ObjectivePerturbation()
    base = alg.calibration(Logistic(), n, p, eps, 0.0)
    sub = alg.calibration(CubedLogistic(), n, p, eps, 0.0)
    assert (base.rank, sub.rank) == (1, p)
    # The Jacobian charge r·log(1 + (β − Δ)/Λ) grows with r: Λ must grow to keep ε_J ≤ ε/2.
    assert sub.lam > base.lam
    assert sub.eps_jacobian > base.eps_jacobian
    # The Gaussian linear term: the gradient shift lives in p dimensions, not 2.
    sigma_base, _ = gaussian_noise_sigma(Logistic(), p, 1.0, eps, delta)
    sigma_sub, how = gaussian_noise_sigma(CubedLogistic(), p, 1.0, eps, delta)
    assert sigma_sub > sigma_base and f"{p}-dim" in how


def test_an_overriding_subclass_may_declare_its_own_claims() -> None:
    class Redeclared(OtherPhiLogistic):
        def __dpbench_tags__(self) -> ProblemTags:  # 2·softplus is still a margin loss
            return ProblemTags(hessian_rank=1, gradient_shift_dim=2)

    assert get_tags(Redeclared()) == ProblemTags(hessian_rank=1, gradient_shift_dim=2)


def test_the_rule_follows_method_resolution_not_class_order() -> None:
    class LossMixin:
        def loss(self, theta, data):  # type: ignore[no-untyped-def]
            return -2.0 * (data.X @ theta)

    class MixinFirst(LossMixin, LBLin):  # LossMixin.loss is the loss evaluated
        pass

    class MixinLast(LBLin, LossMixin):  # LBLin.loss wins: the claim still describes the loss
        pass

    assert get_tags(MixinFirst()) == ProblemTags()
    assert not has_exact_sampler("gibbs", MixinFirst())
    assert get_tags(MixinLast()) == get_tags(LBLin())
    assert has_exact_sampler("gibbs", MixinLast())


# --- (3) a subclass that keeps the loss keeps the tags and the samplers ----------------------------
class RenamedMeanEst(MeanEst):
    name = "renamed_mean_est"

    def solve(self, data: Dataset) -> Optimum:
        opt = super().solve(data)
        return Optimum(opt.theta, opt.value, opt.gap, "renamed")


def test_subclass_without_a_new_loss_keeps_tags_and_samplers() -> None:
    prob, base = RenamedMeanEst(), MeanEst()
    assert get_tags(prob) == get_tags(base)
    data = base.generate(50, 3, np.random.default_rng(0))
    for law, args in (("gibbs", (0.5, base.constraint)), ("rashomon", (60.0, 0.01))):
        assert has_exact_sampler(law, prob)
        np.testing.assert_array_equal(_draws(exact_sampler(law, prob, data, *args)),
                                      _draws(exact_sampler(law, base, data, *args)))
    assert Gibbs().not_applicable_reason(prob) is None
    assert Gibbs(calibration="gaussian").not_applicable_reason(prob) is None
    assert Rashomon().not_applicable_reason(prob) is None


# --- (4) the exact-sampler registry -----------------------------------------------------------------
class LyingMeanEst(MeanEst):
    def grad(self, theta, data, idx=None):  # type: ignore[no-untyped-def]
        return 2.0 * super().grad(theta, data, idx)


def test_overriding_the_loss_drops_the_samplers() -> None:
    prob = LyingMeanEst()
    data = prob.generate(50, 3, np.random.default_rng(0))
    for law in LAWS:
        assert not has_exact_sampler(law, prob)
    assert exact_sampler("gibbs", prob, data, 0.5, prob.constraint) is None
    assert exact_sampler("rashomon", prob, data, 60.0, 0.01) is None
    assert exact_sampler("regularized_gibbs", prob, data, 5.0, 0.0, np.zeros(3)) is None
    assert not has_exact_expmech(prob)
    assert "no exact Gibbs sampler" in (Gibbs().not_applicable_reason(prob) or "")
    assert "no exact Rashomon sampler" in (Rashomon().not_applicable_reason(prob) or "")
    assert "isotropic quadratic" in (Gibbs(calibration="gaussian", sampler="mala")
                                     .not_applicable_reason(prob) or "")
    with pytest.raises(NotApplicable, match="no exact exponential-mechanism sampler"):
        ExpMech().release(data, prob, epsilon=1.0, delta=0.0, rng=np.random.default_rng(0))


def test_regularized_gibbs_defaults_to_gibbs_at_mu_zero() -> None:
    prob = MeanEst()
    data = prob.generate(40, 2, np.random.default_rng(1))
    assert has_exact_sampler("regularized_gibbs", prob)
    rem = exact_sampler("regularized_gibbs", prob, data, 8.0, 0.0, np.zeros(2))
    gibbs = exact_sampler("gibbs", prob, data, 8.0 / data.n, prob.constraint)
    np.testing.assert_array_equal(_draws(rem), _draws(gibbs))
    assert exact_sampler("regularized_gibbs", prob, data, 8.0, 0.5, np.zeros(2)) is None
    # A problem with its own factory gets no fallback: LinBall declines μ = 0.
    ball = LinBall()
    bdata = ball.generate(40, 2, np.random.default_rng(1))
    assert exact_sampler("regularized_gibbs", ball, bdata, 8.0, 0.0, np.zeros(2)) is None
    assert exact_sampler("regularized_gibbs", ball, bdata, 8.0, 0.5, np.zeros(2)) is not None


def test_factories_may_decline_a_region() -> None:
    prob = LBLin()
    data = prob.generate(30, 3, np.random.default_rng(2))
    local = Intersection(prob.constraint, BallAt(np.zeros(3), 0.5))
    assert exact_sampler("gibbs", prob, data, 1.0, prob.constraint) is not None
    assert exact_sampler("gibbs", prob, data, 1.0, local) is None
    assert exact_sampler("gibbs", LBQuad(), data, 1.0, local) is not None


def test_unknown_law_and_wrong_arguments_are_clear_errors() -> None:
    prob = MeanEst()
    data = prob.generate(10, 2, np.random.default_rng(0))
    for call in (lambda: exact_sampler("langevin", prob, data, 1.0),
                 lambda: has_exact_sampler("langevin", prob),
                 lambda: register_exact_sampler("langevin", MeanEst)):
        with pytest.raises(ValueError, match="'gibbs', 'regularized_gibbs', 'rashomon'"):
            call()
    with pytest.raises(TypeError, match=r"\('k', 'region'\)"):
        exact_sampler("gibbs", prob, data, 1.0)
    with pytest.raises(TypeError, match="not a Problem subclass"):
        register_exact_sampler("gibbs", dict)


# --- a third-party problem registers its own sampler --------------------------------------------
class Plateau(Problem):
    """A third-party problem: ℓ(θ; d) = ⟨θ, d⟩ on the unit ball (declared here, not built in)."""

    name = "plateau_test_only"

    @property
    def constraint(self) -> Ball:
        return Ball(1.0)

    @property
    def lipschitz(self) -> float:
        return 1.0

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        g = rng.standard_normal((n, p))
        return Dataset(g / np.linalg.norm(g, axis=1, keepdims=True))

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        return data.X @ theta

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        return (data.X if idx is None else data.X[np.atleast_1d(idx)]).copy()

    def solve(self, data: Dataset) -> Optimum:
        s = data.X.mean(axis=0)
        theta = -s / max(float(np.linalg.norm(s)), 1e-300)
        return Optimum(theta, self.risk(theta, data), 0.0, "closed form")


@register_exact_sampler("gibbs", Plateau)
def _plateau_gibbs(problem: Plateau, data: Dataset, k: float, region):  # type: ignore[no-untyped-def]
    """∝ exp(−k⟨θ, s⟩) on the ball: the tilted-ball sampler with s → −s."""
    if region != problem.constraint:
        return None
    from dpbench.numerics.samplers.ball import tilted_ball_sampler

    return tilted_ball_sampler(-data.X.sum(axis=0), k, 1.0)


def test_a_third_party_problem_registers_its_own_sampler() -> None:
    prob = Plateau()
    data = prob.generate(200, 3, np.random.default_rng(4))
    assert get_tags(prob) == ProblemTags()
    assert has_exact_sampler("gibbs", prob) and not has_exact_sampler("rashomon", prob)
    release = ExpMech().release(data, prob, epsilon=5.0, delta=0.0, rng=np.random.default_rng(0))
    assert release.ledger.certified and release.info["certified"]
    # The exact sampler of ∝ exp(−k⟨θ, s⟩) concentrates opposite to s = Σdᵢ.
    assert float(release.theta @ data.X.sum(axis=0)) < 0

    class Steeper(Plateau):  # another loss: the parent's sampler no longer applies …
        def loss(self, theta, data):  # type: ignore[no-untyped-def]
            return 2.0 * super().loss(theta, data)

    assert not has_exact_sampler("gibbs", Steeper())

    @register_exact_sampler("gibbs", Steeper)  # … until it registers its own
    def _steeper(problem, data, k, region):  # type: ignore[no-untyped-def]
        return _plateau_gibbs(problem, data, 2.0 * k, region)

    assert has_exact_sampler("gibbs", Steeper())
    np.testing.assert_array_equal(
        _draws(exact_sampler("gibbs", Steeper(), data, 1.0, prob.constraint)),
        _draws(exact_sampler("gibbs", prob, data, 2.0, prob.constraint)))


# --- (5) mechanisms never dispatch on concrete problem classes ------------------------------------
def _imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved in dpbench)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["dpbench", "algorithms"][:2 - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def test_algorithms_never_import_problems() -> None:
    files = sorted(ALGORITHMS.glob("*.py"))
    assert len(files) > 10
    offenders = {path.name: sorted(m for m in _imported_modules(path)
                                   if m == "dpbench.problems" or m.startswith("dpbench.problems."))
                 for path in files}
    assert {k: v for k, v in offenders.items() if v} == {}, (
        "a mechanism imports a concrete problem: declare the capability as a tag "
        "(dpbench.core.tags) or an exact sampler (dpbench.core.exact_samplers) instead")


def test_the_import_scan_sees_relative_and_absolute_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from ..problems.lb_lin import LBLin\nimport dpbench.problems.logistic\n"
                     "from ..core.tags import get_tags\n")
    found = _imported_modules(probe)
    assert {"dpbench.problems.lb_lin", "dpbench.problems.logistic", "dpbench.core.tags"} <= found
