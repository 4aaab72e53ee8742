"""GTU Algorithm 1: the iterated exponential mechanism for strongly convex losses (pure ε-DP).

Ganesh, Thakurta, Upadhyay (GTU), Algorithm 1, Theorems 4.2 (ERM, flag = 1) and 4.4 (SCO,
flag = 0), Lemmas 4.3 and 4.5. The labels A3/A9 and the erratum number refer to docs/langevin.md
("Mechanism labels", "Errata"); experiment E3 is in its "Derived exponents".

Each round samples the exponential mechanism (A3) on the current set and shrinks the set around
the sample:

1. k = 1 + ⌈log₂ ln(εn/(p + log n))⌉ (Errata 13: base 2 outside, natural log inside; k = 1 when
   the argument is ≤ e);
2. ε_i = ε/2^{k−i+1} (Σ ε_i = ε(1 − 2^{−k}) < ε);
3. θ_i ~ exp(−β_i𝓛) on C_{i−1}, β_i = ε_i n/(2L D_{i−1}) — the BST14/GTU Algorithm 2 density,
   k_i = ε_i/(2L D_{i−1}) on the sum loss, drawn by :func:`dpbench.numerics.samplers.expmech.sample_expmech`
   (the problem's exact ``"gibbs"`` sampler of :mod:`dpbench.core.exact_samplers` on the
   intersection of balls, or the MCMC fallback, nominal);
4. r_i = √(cL(p + 3 log₂ n)D_{i−1}/(mε_i n)) with c = 8 ln 2 ([derived] from the Gamma(p, 1)
   domination of A3, Lemma 4.3; "3 log n" must be log₂ so that 2^{−t} = n^{−3}, Errata 13); for
   ``target="sco"`` add (2L/m)·√(2 ln(2e²n³)/n) (Lemma 4.5 via Hayes' vector Azuma, [derived]);
5. C_i = C_{i−1} ∩ B(θ_i, r_i), D_i = min(D_{i−1}, 2r_i) — a public diameter bound.

Privacy: round i is ε_i-DP by the oscillation argument on C_{i−1} (diameter ≤ D_{i−1}); rounds
compose adaptively, total ε(1 − 2^{−k}). Utility: ERM O(L²(p² + p log n)/(mε²n²)) (Thm 4.2),
SCO O(L²p² log n/(mε²n²) + L²/(mn)) (Thm 4.4) — versus p·L‖C‖/(εn) for one-shot A3.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import BallAt, ConstraintSet, Intersection
from ..numerics.samplers.expmech import SAMPLERS, sample_expmech, sample_expmech_many
from ..numerics.samplers.mcmc import region_balls
from ..numerics.gibbs_law import gibbs_epsilon, gibbs_log_density_ratio
from ..privacy.ledger import Charge, PrivacyLedger
from .exp_mech import expmech_temperature
from .gibbs import has_exact_expmech, mcmc_theorem_note

__all__ = ["IteratedExpMech", "iteration_count", "round_epsilons", "round_radius", "schedule",
           "C_TAIL"]

#: c = 8 ln 2 of Lemma 4.3 ([derived], docs/langevin.md Errata 13).
C_TAIL = 8.0 * math.log(2.0)


def iteration_count(epsilon: float, n: int, p: int) -> int:
    """k = 1 + ⌈log₂ ln(εn/(p + ln n))⌉, or 1 when εn/(p + ln n) ≤ e (docs/langevin.md
    Errata 13)."""
    arg = epsilon * n / (p + math.log(n))
    if arg <= math.e:
        return 1
    return 1 + math.ceil(math.log2(math.log(arg)))


def round_epsilons(epsilon: float, k: int) -> list[float]:
    """ε_i = ε/2^{k−i+1}, i = 1..k (Algorithm 1 step 2)."""
    return [epsilon / 2.0 ** (k - i + 1) for i in range(1, k + 1)]


def round_radius(target: str, L: float, m: float, p: int, n: int, eps_i: float,
                 D_prev: float) -> float:
    """r_i = √(cL(p + 3 log₂ n)D_{i−1}/(mε_i n)) (+ (2L/m)√(2 ln(2e²n³)/n) for SCO); A9."""
    r = math.sqrt(C_TAIL * L * (p + 3.0 * math.log2(n)) * D_prev / (m * eps_i * n))
    if target == "sco":
        r += 2.0 * L / m * math.sqrt(2.0 * math.log(2.0 * math.e ** 2 * n ** 3) / n)
    return r


def schedule(target: str, L: float, m: float, p: int, n: int, epsilon: float,
             diameter: float) -> list[dict[str, float]]:
    """Algorithm 1's public schedule: per round i = 1..k its ε_i, the diameter bound D_{i−1} of
    the region it samples (D_0 = diam C, D_i = min(D_{i−1}, 2r_i)), its temperature
    k_i = ε_i/(2L·D_{i−1}) on the sum loss and the radius r_i of the next ball."""
    out, D = [], diameter
    for eps_i in round_epsilons(epsilon, iteration_count(epsilon, n, p)):
        r_i = round_radius(target, L, m, p, n, eps_i, D)
        out.append({"epsilon": eps_i, "diameter": D, "k": expmech_temperature(eps_i, L, D),
                    "radius": r_i})
        D = min(D, 2.0 * r_i)
    return out


class IteratedExpMech(Algorithm):
    """Algorithm 1 of GTU: k exponential mechanisms on shrinking balls (Thm 4.2 / 4.4)."""

    name: ClassVar[str] = "iterated_exp_mech"
    summary: ClassVar[str] = ("iterated exponential mechanism on shrinking balls, ε-DP, "
                              "strongly convex (GTU Algorithm 1)")
    citation: ClassVar[str] = ("Ganesh, Thakurta, Upadhyay (2023), Algorithm 1, Thm 4.2/4.4; "
                               "docs/langevin.md A9, Errata 13")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz", "strongly_convex")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "target": Param("erm", kind="str", choices=("erm", "sco"),
                        doc="erm (flag 1, Thm 4.2) or sco (flag 0: Lemma 4.5 radius, Thm 4.4)"),
        "sampler": Param("exact", kind="str", choices=SAMPLERS,
                         doc="exact (problem's sampler on C ∩ balls) or rwm/mala (nominal)"),
        "steps": Param(None, kind="int", low=1, none="the public default", identity_of_none=0,
                       doc="MCMC steps per round"),
    }

    target: str
    sampler: str
    steps: int | None

    def not_applicable_reason(self, problem: Problem) -> str | None:
        reason = super().not_applicable_reason(problem)
        if reason is None and self.sampler == "exact" and not has_exact_expmech(problem):
            reason = f"problem {problem.name!r} has no exact sampler; use sampler='mala'"
        return reason

    def rate_card(self) -> RateCard:
        """Thm 4.2: L²(p² + p log n)/(mε²n²); Thm 4.4 adds L²/(mn) (population)."""
        if self.target == "sco":
            return RateCard(
                expression="L**2*p**2*log(n)/(Delta*epsilon**2*n**2) + L**2/(Delta*n)",
                exponents={"n": -1, "p": 2, "epsilon": -2},
                citation="GTU Thm 4.4: O(L²p² log n/(mε²n²) + L²/(mn))",
                quantity="population_excess_risk",
                regime="n: −2 → −1 at n ≈ p² log n/ε²")
        return RateCard(
            expression="L**2*(p**2 + p*log(n))/(Delta*epsilon**2*n**2)",
            exponents={"n": -2, "p": 2, "epsilon": -2},
            citation="GTU Thm 4.2: O(L²(p² + p log n)/(mε²n²))",
            regime="εn ≫ p + log n (experiment E3); log factors bend the n-slope slightly",
            notes="Delta is the per-example strong convexity m.")

    def calibrated(self, problem: Problem, *, n: int, p: int, epsilon: float,
                    delta: float) -> dict[str, float]:
        """Algorithm 1's public schedule (:func:`schedule`): ``rounds`` k, the last round's
        inverse temperature on the average loss ``final_beta`` = n·ε_k/(2L·D_{k−1}) and the
        diameter ``final_diameter`` D_{k−1} of the region it samples."""
        plan = self._rounds(problem, n, p, epsilon)
        last = plan[-1]
        return {"rounds": float(len(plan)), "final_beta": n * last["k"],
                "final_diameter": last["diameter"]}

    def cost(self, n: int, p: int) -> float:
        k = iteration_count(1.0, n, p)
        return float(k * n * p) * (1.0 if self.sampler == "exact" else 4.0 * p * n)

    def _rounds(self, problem: Problem, n: int, p: int, epsilon: float
                ) -> list[dict[str, float]]:
        """This configuration's :func:`schedule` on ``problem`` (public; shared by :meth:`run`,
        :meth:`run_batch` and :meth:`calibrated`)."""
        return schedule(self.target, float(problem.lipschitz), float(problem.strong_convexity),
                        p, n, epsilon, float(problem.constraint.diameter))

    def _charge(self, i: int, k: int, rnd: dict[str, float], certified: bool) -> Charge:
        theorem = (f"round {i}/{k}: exponential mechanism on C_{i - 1} (diameter ≤ "
                   f"{rnd['diameter']:.3g}), oscillation argument (GTU Thm 2.1 / BST14 Thm 3.1)")
        if not certified:
            theorem += "; " + mcmc_theorem_note(self.sampler)
        return Charge(f"iterated exponential mechanism, round {i}", rnd["epsilon"], 0.0,
                      theorem, certified=certified)

    def _single_round(self, problem: Problem, data: Dataset, epsilon: float) -> float | None:
        """k₁ = (ε/2)/(2L‖C‖) when the schedule has one round and the sampler is exact: the
        release is then θ₁ itself, one exponential mechanism at ε₁ = ε/2 on C (εn/(p + ln n) ≤ e,
        e.g. every n ≤ 10 at ε = 1, p ≥ 2); ``None`` otherwise (k ≥ 2 rounds on random shrinking
        balls: no closed form; MCMC: no law)."""
        if self.sampler != "exact":
            return None
        rounds = self._rounds(problem, data.n, data.p, epsilon)
        return rounds[0]["k"] if len(rounds) == 1 else None

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of a one-round schedule: the exponential mechanism exp(−k₁·𝓛(θ; D)) on
        C with k₁ = ε₁/(2L‖C‖), ε₁ = ε/2 (:func:`dpbench.numerics.gibbs_law.gibbs_epsilon`; its
        claim is ε₁, not ε: Σεᵢ = ε(1 − 2^{−k})). ``None`` for two rounds or more, or MCMC."""
        k = self._single_round(problem, d0, epsilon)
        if k is None:
            return None
        return gibbs_epsilon(problem, d0, d1, k, problem.constraint, delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log π_D(θ) − log π_D′(θ) of a one-round schedule (:meth:`exact_epsilon`)."""
        k = self._single_round(problem, d0, epsilon)
        if k is None:
            return None
        return gibbs_log_density_ratio(problem, d0, d1, k, problem.constraint, thetas)

    @staticmethod
    def _shrink(region: ConstraintSet, theta: np.ndarray, radius: float) -> Intersection:
        """C_i = C_{i−1} ∩ B(θ_i, r_i) (step 5)."""
        return Intersection(*(region.sets if isinstance(region, Intersection) else (region,)),
                            BallAt(theta, radius))

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        n, p = data.n, data.p
        rounds = self._rounds(problem, n, p, epsilon)
        k = len(rounds)
        region: ConstraintSet = problem.constraint
        charges, steps = [], 0
        theta = np.asarray(region.center(p), dtype=float)
        for i, rnd in enumerate(rounds, start=1):
            theta, info = sample_expmech(problem, data, rnd["k"], region, rng,
                                         sampler=self.sampler, steps=self.steps)
            steps += int(info["steps"])
            charges.append(self._charge(i, k, rnd, bool(info["certified"])))
            region = self._shrink(region, theta, rnd["radius"])
        ledger = PrivacyLedger.from_charges(*charges)
        queries = n * (steps + k)
        plan = [{key: r[key] for key in ("epsilon", "diameter", "radius")} for r in rounds]
        D = min(rounds[-1]["diameter"], 2.0 * rounds[-1]["radius"])  # D_k
        info_out: dict[str, Any] = {"rounds": k, "schedule": plan, "final_diameter": D,
                                    "sampler": self.sampler, "certified": ledger.certified}
        return Release(theta=theta, ledger=ledger, func_queries=queries,
                       grad_queries=queries if self.sampler == "mala" else 0,
                       iterations=k, info=info_out)

    def run_batch(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
                  rng: np.random.Generator, size: int) -> BatchRelease | None:
        """:meth:`run`'s rounds for ``size`` rows at once, round after round: round 1 draws
        every row on C; round i + 1 draws row r on C_i of row r (its own earlier releases are the
        centres of its balls, the radii are public and shared), through
        :func:`~dpbench.numerics.samplers.expmech.sample_expmech_many` with per-row centres
        (the exact sampler's ``many_at``, exactly the law of :meth:`run`'s round; or the same
        RWM/MALA chain per row). ``None`` for MCMC on a problem without a compiled kernel."""
        rounds = self._rounds(problem, data.n, data.p, epsilon)
        region: ConstraintSet = problem.constraint
        centers: np.ndarray | None = None
        charges = []
        for i, rnd in enumerate(rounds, start=1):
            out = sample_expmech_many(problem, data, rnd["k"], region, rng, size,
                                      sampler=self.sampler, steps=self.steps,
                                      row_centers=centers)
            if out is None:
                return None
            thetas, info = out
            charges.append(self._charge(i, len(rounds), rnd, bool(info["certified"])))
            if centers is None:
                centers = np.tile(region_balls(region, data.p)[0], (size, 1, 1))
            centers = np.concatenate([centers, thetas[:, None, :]], axis=1)
            region = self._shrink(region, thetas[0], rnd["radius"])
        return BatchRelease(thetas, PrivacyLedger.from_charges(*charges))
