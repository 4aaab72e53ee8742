"""BST14 Algorithm 2 (𝒜_exp-samp): the exponential mechanism, ε-DP for Lipschitz convex losses.

Bassily, Smith and Thakurta, "Private Empirical Risk Minimization: Efficient Algorithms and Tight
Error Bounds" (FOCS 2014; arXiv:1405.7085), Algorithm 2, Thm 3.1 (privacy), Thm 3.2 (utility).
Errata 1, the oracles O1/O7, the MCMC samplers and the cap thresholds are in docs/bst14.md
("Errata", "Oracle curves and reference runs", "Derived constants", "Where the cap binds").
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.tags import get_tags
from ..numerics.samplers.expmech import SAMPLERS, sample_expmech, sample_expmech_many
from ..numerics.samplers.mcmc import default_steps
from ..numerics.gibbs_law import gibbs_epsilon, gibbs_log_density_ratio
from ..privacy.ledger import Charge, PrivacyLedger


def expmech_temperature(epsilon: float, L: float, diameter: float) -> float:
    """k = ε/(2L‖C‖) with ‖C‖ the diameter (BST14 Algorithm 2)."""
    return epsilon / (2.0 * L * diameter)


class ExpMech(Algorithm):
    """Sample θ ∝ exp(−k·𝓛(θ; D)) on C with k = ε/(2L‖C‖), 𝓛 the sum loss (BST14 Algorithm 2).

    Privacy (Thm 3.1; docs/bst14.md Errata 1): the proof of Thm 3.1 uses
    exp(−ε(…)/(L‖C‖)) and a sensitivity of L‖C‖, which does not match Algorithm 2's constant, but
    Algorithm 2 *as stated* is ε-DP by the oscillation argument: for neighbours D, D′ the density
    ratio is E_{u∼π_D}[exp(k(g(u) − g(θ)))] with g = ℓ(·; d) − ℓ(·; d′), whose oscillation over C is
    at most 2L‖C‖, so the ratio is at most e^{2kL‖C‖} = e^ε.

    Samplers (``sampler``): ``"exact"`` uses the problem's exact ``"gibbs"`` sampler
    (:mod:`dpbench.core.exact_samplers`; cell not applicable without one) and is certified ε-DP;
    ``"rwm"`` / ``"mala"`` run a finite Metropolis chain from the data-independent centre of C (docs/bst14.md, "Derived constants": MCMC), which only approximates π_D: the run
    is **nominal ε-DP** (at best (ε, (1 + e^ε)·TV)-DP with an unknown TV) and the ledger says
    ``certified=False``.

    Utility (Thm 3.2): E[excess] = O(pL‖C‖/ε) on the sum scale, no log factor; the explicit tail of
    the proof gives ≈ 8.8(p+1)L‖C‖/ε, ~10× loose on LB-Lin where the exact value tends to
    (p+1)L‖C‖/ε (oracle O1, docs/bst14.md).
    """

    name: ClassVar[str] = "exp_mech"
    summary: ClassVar[str] = "Exponential mechanism exp(-k·sum loss), k = ε/(2L‖C‖) (BST14 Alg. 2)"
    citation: ClassVar[str] = "Bassily, Smith, Thakurta (FOCS 2014), Algorithm 2, Thm 3.1 and 3.2"
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "sampler": Param("exact", kind="str", choices=SAMPLERS,
                         doc="exact (problem's sampler, certified) or rwm/mala (MCMC, nominal ε-DP)"),
        "steps": Param(None, kind="int", low=1, none="the public default 8·p·max(k·n·L·D, p), "
                       "at least 2000", identity_of_none=0, doc="MCMC steps"),
        "step_scale": Param(1.0, low=0.0, low_open=True,
                            doc="multiplier of the MCMC step size min(c/(k·n·L), D/p), c = 0.5 "
                                "(rwm) or 0.3 (mala)"),
    }

    sampler: str
    steps: int | None
    step_scale: float

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """``k`` = ε/(2L‖C‖), the temperature on the sum loss, and ``beta`` = n·k on the average
        loss (:func:`expmech_temperature`)."""
        k = expmech_temperature(epsilon, float(problem.lipschitz),
                                float(problem.constraint.diameter))
        return {"k": k, "beta": n * k}

    def cost(self, n: int, p: int) -> float:
        """Exact ~ n·p (one pass over the data); MCMC ~ steps·n·p (default steps at ε = 1)."""
        if self.sampler == "exact":
            return float(n * p)
        steps = self.steps
        if steps is None:
            steps = default_steps(n, p, 0.5, 1.0, 1.0)  # k·L·D = ε/2 at ε = 1
        return float(steps) * n * p

    def oracle_excess(self, data: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float:
        """O1 (exact, docs/bst14.md) on LB-Lin: R·M·[1 − I_{p/2+1}(kRM)/I_{p/2}(kRM)] / n with
        M = ‖Σdᵢ‖; the MCMC samplers target the same law, so it is their reference too."""
        from ..theory.expected_excess import expmech_lblin

        if get_tags(problem).closed_form != "lb_lin":
            return math.nan
        M = float(np.linalg.norm(data.X.sum(axis=0)))
        R = float(problem.constraint.radius)  # type: ignore[attr-defined]
        return expmech_lblin(M, data.p, epsilon, R, float(problem.lipschitz),
                             n=data.n, average=True)

    def oracle_kind(self, problem: Problem) -> str:
        if get_tags(problem).closed_form != "lb_lin":
            return ""
        return "exact" if self.sampler == "exact" else "heuristic"  # a finite chain: approximate

    def rate_card(self) -> RateCard:
        """R1 on the average scale: Thm 3.2's sum-scale pL‖C‖/ε divided by n."""
        return RateCard(
            expression="p*L*D/(n*epsilon)",
            exponents={"n": -1, "p": 1, "epsilon": -1},
            citation="BST14 Thm 3.2 (E[excess] = O(pL‖C‖/ε), sum scale)",
            regime="cap L*D binds when n ≲ p/ε (docs/bst14.md, 'Where the cap binds')",
            notes=("LB-Lin plateau (oracle O1): sum-scale (p+1)L‖C‖/ε, i.e. (p+1)*L*D/(n*epsilon) "
                   "on the average scale; the explicit Thm 3.2 tail gives ≈ 8.8(p+1)L‖C‖/ε. "
                   "MCMC samplers are nominal ε-DP only (docs/bst14.md)."),
        )

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the exact sampler's law exp(−k·𝓛(θ; D)) on C against D′'s, k =
        ε/(2L‖C‖) (:func:`dpbench.numerics.gibbs_law.gibbs_epsilon`: closed form on LB-Lin and
        the isotropic quadratics — R‖B − B′‖ + |log Z − log Z′| at δ = 0, the sup of the linear log
        ratio on ∂C — and 1-D quadrature of ``problem.loss`` at p = 1). ``None`` for the MCMC
        samplers (the law of a finite chain is not available) and where no route applies."""
        if self.sampler != "exact":
            return None
        constraint = problem.constraint
        k = expmech_temperature(epsilon, float(problem.lipschitz), float(constraint.diameter))
        return gibbs_epsilon(problem, d0, d1, k, constraint, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log π_D(θ) − log π_D′(θ) = −k(ℓ(θ; z) − ℓ(θ; z′)) − log Z_D + log Z_D′ of the exact
        sampler's law (:func:`dpbench.numerics.gibbs_law.gibbs_log_density_ratio`); ``None`` as
        for :meth:`exact_epsilon`."""
        if self.sampler != "exact":
            return None
        constraint = problem.constraint
        k = expmech_temperature(epsilon, float(problem.lipschitz), float(constraint.diameter))
        return gibbs_log_density_ratio(problem, d0, d1, k, constraint, thetas)

    def _ledger(self, epsilon: float, certified: bool) -> PrivacyLedger:
        """The single ε charge of Thm 3.1 (certified only for the exact sampler)."""
        label = ("exponential mechanism, exact sampler" if certified else
                 f"exponential mechanism, {self.sampler.upper()} sampler (nominal ε-DP, "
                 "uncertified: at best (ε, (1+e^ε)·TV)-DP, docs/bst14.md)")
        charge = Charge(label, float(epsilon), 0.0,
                        "BST14 Thm 3.1 (oscillation argument, docs/bst14.md Errata 1)",
                        certified=certified)
        return PrivacyLedger.from_charges(charge)

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        n = data.n
        constraint = problem.constraint
        k = expmech_temperature(epsilon, float(problem.lipschitz), float(constraint.diameter))
        theta, info = sample_expmech(
            problem, data, k, constraint, rng, sampler=self.sampler,
            steps=self.steps, step_scale=self.step_scale)
        certified = bool(info["certified"])
        ledger = self._ledger(epsilon, certified)
        evaluations = n * (info["steps"] + 1) if not certified else n
        info = dict(info, k=k)
        if not certified:
            info["privacy_note"] = "nominal ε-DP: finite MCMC does not certify the Dist∞ bound"
        return Release(
            theta=theta, ledger=ledger, func_queries=evaluations,
            grad_queries=evaluations if self.sampler == "mala" else 0,
            iterations=int(info["steps"]), info=info)

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease | None:
        """``size`` draws of Algorithm 2's density at :meth:`run`'s k in one call of
        :func:`~dpbench.numerics.samplers.expmech.sample_expmech_many`: the exact sampler's
        vectorised form (exactly :meth:`run`'s law), or the same RWM/MALA chain per row (same
        start, steps, step size and accept rule). ``None`` for MCMC on a problem without a
        compiled kernel (the numpy chain runs one row at a time: the audit loops :meth:`run`)."""
        constraint = problem.constraint
        k = expmech_temperature(epsilon, float(problem.lipschitz), float(constraint.diameter))
        out = sample_expmech_many(problem, data, k, constraint, rng, size, sampler=self.sampler,
                                  steps=self.steps, step_scale=self.step_scale)
        if out is None:
            return None
        thetas, info = out
        return BatchRelease(thetas, self._ledger(epsilon, bool(info["certified"])))
