"""The broken zoo: DELIBERATELY WRONG mechanisms that measure the auditor's power.

Each member is a small subclass of a shipped mechanism with exactly ONE privacy bug and a ledger
that still claims the shipped mechanism's privacy: mutation testing for privacy, which measures the
auditor's power (docs/audit.md, 'Broken zoo and power'). They are registered as ``broken_*``
algorithms so that suites can audit them (``expect: violation``); NEVER use them for anything else.

How wrong each one is, at its designated audit point (``DESIGNATED``; p = 1, where the shipped
base is tight, so the bug is a genuine violation, not slack eaten by a loose analysis):

* ``broken_noise_halved`` — objective perturbation (Gamma-norm/Laplace linear term) with the
  noise scale halved. On LB-Lin (p = 1) the shipped calibration is exact (shift 2L, scale 2L/ε),
  so the privacy loss doubles: true ε = 2ε (attained on the tail event {θ = −R}).
* ``broken_one_sided_sensitivity`` — the diffprivlib #105 pattern: the gradient-shift bound is
  computed from one side, ‖∇ℓ(θ; d)‖ ≤ L, instead of ‖∇ℓ(θ; d) − ∇ℓ(θ; d′)‖ ≤ 2L: scale L/ε,
  true ε = 2ε (same point; the bug sits in the sensitivity, not in the noise draw).
* ``broken_add_remove_accounting`` — wrong neighbouring relation: the Gaussian linear term of
  objective perturbation calibrated for add/remove (one gradient, sensitivity L) while the ledger
  claims replace-one (sensitivity 2L). The release is (2L/σ)-GDP with σ = analytic σ(L, ε, δ):
  μ_true = 2·μ(ε, δ); at ε = 1, δ = 0.01 the true ε(δ) is ``gdp_epsilon(2·gdp_mu(1, 0.01), 0.01)``
  ≈ 2.52 (μ = 2·0.533).
* ``broken_warm_start_sampler`` — the exponential mechanism with an RWM chain started at the
  NON-PRIVATE optimum θ̂*(D) and only ``steps`` (default 3) steps: the output is essentially a
  function of θ̂*(D); at the designated sphere pair (θ̂*(D) = R, θ̂*(D′) = 0) the empirical ε
  already exceeds 3 at 2000 runs (pure claim ε = 1).
* ``broken_no_clipping`` — noisy SGD without per-example clipping (claims ``clips_gradients``).
  Only a record outside the data norm can see it (the ``outlier`` canary, 1000× the norm): one
  unclipped step moves θ by ≈ 1000·η·n ≈ 7.5 noise s.d. (n = 2, paper σ), to the boundary on the
  canary's side; true ε is unbounded (the gradient is), claimed ε ≈ 0.19.
* ``broken_data_dependent_step`` — noisy SGD whose step size scales with ‖∇ℒ(θ₁; D)‖/L (a
  data-dependent learning rate: a hyperparameter tuned on the private data, the pattern diffprivlib
  warns about with its ``PrivacyLeakWarning``). On the sphere pair ∇ℒ(θ₁; D′) = 0, so the run on D′
  never moves: a point mass against a continuous law, true ε infinite; claimed ε ≈ 0.19.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..algorithms.exp_mech import ExpMech, expmech_temperature
from ..algorithms.noisy_sgd import NoisySGD, noisy_sgd_path, paper_noise_multiplier
from ..algorithms.objective_perturbation import ObjectivePerturbation, _solve
from ..core.algorithm import Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.sets import Ball
from ..numerics.samplers.mcmc import run_chain
from ..privacy.accountant import ACCOUNTING, noisy_sgd_epsilon
from ..privacy.gaussian import analytic_gaussian_sigma
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.noise import gamma_norm_noise, gaussian_noise

__all__ = ["BROKEN", "DESIGNATED", "BrokenAddRemoveAccounting", "BrokenDataDependentStep",
           "BrokenNoClipping", "BrokenNoiseHalved", "BrokenOneSidedSensitivity",
           "BrokenWarmStartSampler", "correct_counterpart"]


# --- objective perturbation family -------------------------------------------------------------
class _BrokenObjPert(ObjectivePerturbation):
    """Objective perturbation with a wrong noise scale; the ledger is the shipped one."""

    broken: ClassVar[str] = ""
    #: the noise scale actually used, as a fraction of the correct (replace-one, 2L) scale
    _scale_factor: ClassVar[float] = 1.0
    #: the sensitivity the (buggy) calibration uses, in units of L
    _sensitivity_in_L: ClassVar[float] = 2.0

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        L = float(problem.lipschitz)
        cal = self.calibration(problem, n, p, epsilon, delta)
        if cal.eps_output > 0:
            raise NotApplicable(f"{self.name}: the zoo member runs on closed-form problems only "
                                f"(β = Δ, e.g. lb_lin); {problem.name!r} needs an iterative solve")
        sens = self._sensitivity_in_L * L
        if self.noise == "gaussian":
            sigma = analytic_gaussian_sigma(sens, cal.eps_noise, cal.delta_noise)
            b = gaussian_noise(p, sigma * self._scale_factor, rng)
        else:
            b = gamma_norm_noise(p, sens / cal.eps_noise * self._scale_factor, rng)
        opt = _solve(problem, data, cal.lam / n, b / n, self.solver_gap)
        charges = (
            Charge("objective perturbation: linear-term noise", cal.eps_noise, cal.delta_noise,
                   "CMS11 Thm 9 / KST12: gradient sensitivity 2L (claimed)"),
            Charge("objective perturbation: Jacobian ratio", cal.eps_jacobian, 0.0,
                   f"r·log(1+(β−Δ)/(Λ+nΔ)) with r={cal.rank}, Λ={cal.lam:.4g}"),
        )
        return Release(theta=problem.constraint.project(np.asarray(opt.theta, dtype=float)),
                       ledger=PrivacyLedger.from_charges(*charges),
                       info={"broken": self.broken, "lambda": cal.lam})


class BrokenNoiseHalved(_BrokenObjPert):
    """DELIBERATELY BROKEN objective perturbation: the Laplace/Gamma noise scale is halved."""

    name: ClassVar[str] = "broken_noise_halved"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: objective perturbation with half the noise; "
                              "claims ε, spends 2ε (audit power test only)")
    broken: ClassVar[str] = "noise scale halved (true ε = 2× claimed on LB-Lin, p = 1)"
    _scale_factor: ClassVar[float] = 0.5


class BrokenOneSidedSensitivity(_BrokenObjPert):
    """DELIBERATELY BROKEN objective perturbation: sensitivity L (one side) instead of 2L."""

    name: ClassVar[str] = "broken_one_sided_sensitivity"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: objective perturbation whose sensitivity is "
                              "computed from one side only (diffprivlib #105 pattern)")
    broken: ClassVar[str] = ("sensitivity from one side only: ‖∇ℓ(θ; d)‖ ≤ L instead of "
                             "‖∇ℓ(θ; d) − ∇ℓ(θ; d′)‖ ≤ 2L (true ε = 2× claimed)")
    _sensitivity_in_L: ClassVar[float] = 1.0


class BrokenAddRemoveAccounting(_BrokenObjPert):
    """DELIBERATELY BROKEN Gaussian objective perturbation: add/remove sensitivity L, while the
    ledger claims replace-one."""

    name: ClassVar[str] = "broken_add_remove_accounting"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: Gaussian objective perturbation calibrated "
                              "for add/remove neighbours but claimed for replace-one")
    broken: ClassVar[str] = ("wrong neighbouring relation: Gaussian σ for add/remove "
                             "sensitivity L, ledger claims replace-one (2L): μ doubled")
    _sensitivity_in_L: ClassVar[float] = 1.0
    params: ClassVar[dict[str, Param]] = {
        **ObjectivePerturbation.params,
        "noise": Param("gaussian", kind="str", choices=("gamma", "gaussian"),
                       doc="Gaussian b by default (the add/remove bug is in its σ)"),
    }


# --- exponential mechanism -----------------------------------------------------------------------
class _StartAt(Ball):
    """A centred ball whose ``center`` (the MCMC start) is a given point: the warm-start bug."""

    def __init__(self, radius: float, start: np.ndarray) -> None:
        super().__init__(radius)
        self._start = np.asarray(start, dtype=float)

    def center(self, p: int) -> np.ndarray:
        return self._start.copy()


class BrokenWarmStartSampler(ExpMech):
    """DELIBERATELY BROKEN exponential mechanism: RWM started at the non-private optimum θ̂*(D)
    with a few steps, claiming ε-DP."""

    name: ClassVar[str] = "broken_warm_start_sampler"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: exponential-mechanism RWM chain started at "
                              "the non-private optimum with a few steps")
    broken: ClassVar[str] = "MCMC sampler started at the non-private optimum θ̂*(D), 3 steps"
    params: ClassVar[dict[str, Param]] = {
        **ExpMech.params,
        "sampler": Param("rwm", kind="str", choices=("rwm", "mala"), doc="MCMC kernel"),
        "steps": Param(3, kind="int", low=1, doc="MCMC steps from θ̂*(D)"),
    }

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        constraint = problem.constraint
        if not isinstance(constraint, Ball):
            raise NotApplicable(f"{self.name} runs on centred balls only")
        k = expmech_temperature(epsilon, float(problem.lipschitz), float(constraint.diameter))
        start = np.asarray(problem.solve(data).theta, dtype=float)  # the bug: a data-dependent start
        theta, info = run_chain(problem, data, k, _StartAt(float(constraint.radius), start), rng,
                                kind=self.sampler, steps=self.steps, step_scale=self.step_scale)
        charge = Charge(f"exponential mechanism, {self.sampler.upper()} sampler (nominal ε-DP)",
                        float(epsilon), 0.0, "BST14 Thm 3.1 (claimed)", certified=False)
        return Release(theta=theta, ledger=PrivacyLedger.from_charges(charge),
                       iterations=int(info["steps"]), info={"broken": self.broken})


# --- noisy SGD family -----------------------------------------------------------------------------
class _BrokenNoisySGD(NoisySGD):
    """Noisy SGD (strongly convex steps η(t) = 1/(Δ'nt)) with a bug in the clip or in Δ'."""

    broken: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {
        **NoisySGD.params,
        "variant": Param("strongly_convex", kind="str", choices=("strongly_convex",),
                         doc="strongly convex steps η(t) = 1/(Δnt) (the bug needs them)"),
    }

    def _clip(self, L: float) -> float:
        return L

    def _step_curvature(self, data: Dataset, problem: Problem) -> float:
        return float(problem.strong_convexity)

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n = data.n
        T = self.n_steps(n)
        L = float(problem.lipschitz)
        z = self.noise_multiplier(n, epsilon, delta)
        eps_spent = noisy_sgd_epsilon(z, n, T, delta)
        if eps_spent > epsilon * (1 + 1e-9):
            raise NotApplicable(f"{self.name}: σ accounts to ε={eps_spent:.4g} > {epsilon:g}")
        theta = noisy_sgd_path(
            problem, data, constraint=problem.constraint, steps=T, sigma=2.0 * n * L * z,
            lipschitz=self._clip(L), variant="strongly_convex",
            strong_convexity=self._step_curvature(data, problem), output=self.output, rng=rng)
        ledger = PrivacyLedger(
            charges=(Charge(f"noisy_sgd: {T} sampled Gaussian steps (z={z:.6g})", eps_spent, delta,
                            "BST14 Thm 2.1 (claimed)"),),
            epsilon=eps_spent, delta=delta, accounting=ACCOUNTING)
        return Release(theta=theta, ledger=ledger, grad_queries=T, iterations=T,
                       info={"broken": self.broken, "z": z,
                             "paper_epsilon": paper_noise_multiplier(n, 1.0, delta) / z})


class BrokenNoClipping(_BrokenNoisySGD):
    """DELIBERATELY BROKEN noisy SGD: per-example gradients are not clipped (but it still
    declares ``clips_gradients``)."""

    name: ClassVar[str] = "broken_no_clipping"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: noisy SGD without per-example gradient "
                              "clipping (detectable with the outlier canary)")
    broken: ClassVar[str] = "per-example clipping removed (unbounded sensitivity on outliers)"

    def _clip(self, L: float) -> float:
        return math.inf


class BrokenDataDependentStep(_BrokenNoisySGD):
    """DELIBERATELY BROKEN noisy SGD: the step size scales with ‖∇ℒ(θ₁; D)‖/L."""

    name: ClassVar[str] = "broken_data_dependent_step"
    summary: ClassVar[str] = ("DELIBERATELY BROKEN: noisy SGD with a data-dependent step size "
                              "η ∝ ‖∇L(θ₁; D)‖")
    broken: ClassVar[str] = "data-dependent step size η(t) = ‖∇ℒ(θ₁; D)‖/(L·Δnt)"

    def _step_curvature(self, data: Dataset, problem: Problem) -> float:
        theta1 = problem.constraint.center(data.p)
        g = float(np.linalg.norm(problem.full_grad(theta1, data)))
        ratio = g / float(problem.lipschitz)
        return float(problem.strong_convexity) / ratio if ratio > 0 else math.inf


BROKEN: dict[str, type] = {cls.name: cls for cls in (
    BrokenNoiseHalved, BrokenOneSidedSensitivity, BrokenAddRemoveAccounting,
    BrokenWarmStartSampler, BrokenNoClipping, BrokenDataDependentStep)}

#: Each member's designated audit point: (algorithm params, correct counterpart (name, params),
#: problem (name, params), n, p, epsilon, delta, canary).
DESIGNATED: dict[str, dict[str, Any]] = {
    "broken_noise_halved": dict(
        params={}, correct=("objective_perturbation", {}), problem=("lb_lin", {}),
        n=2, p=1, epsilon=1.0, delta=0.0, canary="sphere"),
    "broken_one_sided_sensitivity": dict(
        params={}, correct=("objective_perturbation", {}), problem=("lb_lin", {}),
        n=2, p=1, epsilon=1.0, delta=0.0, canary="sphere"),
    "broken_add_remove_accounting": dict(
        params={}, correct=("objective_perturbation", {"noise": "gaussian"}),
        problem=("lb_lin", {}), n=2, p=1, epsilon=1.0, delta=0.01, canary="sphere"),
    "broken_warm_start_sampler": dict(
        params={}, correct=("exp_mech", {"sampler": "rwm", "steps": 200}), problem=("lb_lin", {}),
        n=2, p=1, epsilon=1.0, delta=0.0, canary="sphere"),
    "broken_no_clipping": dict(
        params={}, correct=("noisy_sgd", {"variant": "strongly_convex"}), problem=("lb_quad", {}),
        n=2, p=1, epsilon=1.0, delta=1e-5, canary="outlier"),
    "broken_data_dependent_step": dict(
        params={}, correct=("noisy_sgd", {"variant": "strongly_convex"}), problem=("lb_quad", {}),
        n=2, p=1, epsilon=1.0, delta=1e-5, canary="sphere"),
}


def correct_counterpart(name: str) -> tuple[str, dict[str, Any]]:
    """(registered name, params) of the shipped mechanism a zoo member breaks."""
    return DESIGNATED[name]["correct"]
