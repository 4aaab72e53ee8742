"""A2-net: the exponential mechanism on a data-independent grid of C (BST14 introduction).

An exactly ε-DP reference sampler for low dimension (p ≤ 2), used to validate the MCMC samplers.
Its audit path (``run_batch``) computes the net's law once and draws many releases from it.
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
from ..core.sets import ConstraintSet
from ..core.time_limit import checkpoint
from ..numerics.samplers.mcmc import region_balls
from ..privacy.exact_loss import digest, epsilon_pieces, memo
from ..privacy.ledger import Charge, PrivacyLedger
from .exp_mech import expmech_temperature

MAX_DIM = 2


def ball_grid(constraint: ConstraintSet, p: int, spacing: float) -> np.ndarray:
    """The cubic grid {c + γ·j : j ∈ ℤᵖ} ∩ C, γ = spacing·‖C‖, c the smallest ball's centre.

    Depends only on public quantities (C, p, the spacing), never on the data; it holds c when c
    lies in every ball (always for a single ball).
    """
    centers, radii = region_balls(constraint, p)
    gamma = spacing * float(constraint.diameter)
    j0 = int(np.argmin(radii))
    c, r = centers[j0], float(radii[j0])
    m = int(math.floor(r / gamma))
    axis = gamma * np.arange(-m, m + 1, dtype=float)
    mesh = np.meshgrid(*([axis] * p), indexing="ij")
    pts = c + np.stack([g.ravel() for g in mesh], axis=1)
    keep = np.ones(pts.shape[0], dtype=bool)
    for cj, rj in zip(centers, radii):
        d = pts - cj
        keep &= np.einsum("ij,ij->i", d, d) <= rj * rj
    return pts[keep]


def net_log_probs(problem: Problem, data: Dataset, k: float, grid: np.ndarray) -> np.ndarray:
    """log P(θ) for θ in the grid, P(θ) ∝ exp(−k·𝓛(θ; D)) (normalised in log space)."""
    total = np.empty(grid.shape[0])
    for i, theta in enumerate(grid):
        if i % 1024 == 0:
            checkpoint()
        total[i] = float(problem.loss(theta, data).sum())
    logw = -k * total
    top = float(logw.max())
    return logw - (top + math.log(float(np.exp(logw - top).sum())))


def categorical_draws(logp: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` independent indices i with P(i) ∝ exp(logp[i]): inverse CDF of ``size`` uniforms
    on the cumulative weights (exact up to the rounding of their sums)."""
    cdf = np.cumsum(np.exp(logp - float(logp.max())))
    idx = np.searchsorted(cdf, rng.random(int(size)) * cdf[-1], side="right")
    return np.minimum(idx, logp.shape[0] - 1)


class ExpMechNet(Algorithm):
    """Exponential mechanism on a grid G ⊂ C: P(θ) ∝ exp(−k·𝓛(θ; D)), k = ε/(2L‖C‖).

    G is the cubic grid of spacing γ = ``spacing``·‖C‖ (a fraction of the diameter) intersected
    with C, built from public quantities only. Privacy: exactly ε-DP by the oscillation argument of
    docs/bst14.md Errata 1 (k·|g(u) − g(θ)| ≤ 2kL‖C‖ = ε for g = ℓ(·; d) − ℓ(·; d′)), now over the
    finite G. The draw is the Gumbel-max trick on the log-weights, so no normalisation overflows.
    Only for balls in p ≤ 2 (|G| ≈ (1/spacing)ᵖ).

    Utility [derived, docs/bst14.md "Derived constants"]: with probability 1 − e^{−t} the sum-scale
    excess is at most n·L·dist(θ*, G) + (2L‖C‖/ε)(ln|G| + t), with dist(θ*, G) ≤ γ√p (the grid
    covers the ball up to one cell) and ln|G| ≤ p·ln(1 + 1/spacing).
    """

    name: ClassVar[str] = "exp_mech_net"
    summary: ClassVar[str] = "Exponential mechanism on a data-independent grid of C (p <= 2), exact ε-DP"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (FOCS 2014), introduction (net version of "
                               "the exponential mechanism); [derived] utility, docs/bst14.md")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness: the net has ~(1/spacing)^p points, so p = 2, and a 5 % spacing keeps the
    #: 2000-run privacy audit at seconds (the privacy proof does not depend on the spacing).
    check_settings: ClassVar[dict[str, Any]] = {"p": 2, "params": {"spacing": 0.05}}
    params: ClassVar[dict[str, Param]] = {
        "spacing": Param(0.01, low=0.0, high=0.5, low_open=True,
                         doc="grid spacing as a fraction of the diameter ‖C‖"),
    }

    def cost(self, n: int, p: int) -> float:
        return float(n * p) * (1.0 / self.spacing + 1.0) ** p

    def rate_card(self) -> RateCard:
        """[derived] (docs/bst14.md) on the average scale: rounding L·D·spacing·√p plus the ln|G|
        term."""
        s = self.spacing
        return RateCard(
            expression=f"L*D*{s!r}*sqrt(p) + 2*L*D*p*log(1 + 1/{s!r})/(n*epsilon)",
            exponents={"n": -1, "p": 1, "epsilon": -1},
            citation="BST14 introduction (net exponential mechanism); [derived], docs/bst14.md",
            regime="p <= 2; the rounding term L*D*spacing*sqrt(p) is a floor in n",
            notes="log|G| ≈ p·log(1/spacing) replaces the log-free constant of Thm 3.2",
        )

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        grid, k, logp = self._net(data, problem, epsilon)
        idx = int(np.argmax(logp + rng.gumbel(size=logp.shape[0])))
        info = {"k": k, "grid_size": int(grid.shape[0]),
                "spacing": self.spacing * float(problem.constraint.diameter), "certified": True}
        return Release(theta=grid[idx].copy(), ledger=self._ledger(epsilon),
                       func_queries=data.n * int(grid.shape[0]), info=info)

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease:
        """``size`` independent draws of :meth:`run`'s categorical law P(θ) ∝ exp(−k·𝓛(θ; D))
        on the net, from one computation of the log-weights: inverse CDF of ``size`` uniforms
        (:func:`categorical_draws`) instead of :meth:`run`'s Gumbel-max, the same law."""
        grid, _, logp = self._net(data, problem, epsilon)
        return BatchRelease(grid[categorical_draws(logp, rng, size)], self._ledger(epsilon))

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the net's two categorical laws P(θ) ∝ exp(−k·𝓛(θ; D)) and D′'s on
        the same public grid G: max_{θ∈G} |log P(θ) − log P′(θ)| at δ = 0, else the root of
        max(Σ_θ (P − e^ε P′)₊, Σ_θ (P′ − e^ε P)₊) = δ (exact sums,
        :func:`dpbench.privacy.exact_loss.epsilon_pieces`)."""
        _, _, logp0 = self._net(d0, problem, epsilon)
        _, _, logp1 = self._net(d1, problem, epsilon)
        return epsilon_pieces(np.exp(logp0), np.exp(logp1), delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log P(θ) − log P′(θ) at each release θ (a grid point, located by its integer
        coordinates on the cubic grid); +∞/−∞ never occur (both laws charge every point), a row
        off the grid gets 0."""
        grid, _, logp0 = memo(digest("net", self, problem, d0, epsilon),
                              lambda: self._net(d0, problem, epsilon))
        _, _, logp1 = memo(digest("net", self, problem, d1, epsilon),
                           lambda: self._net(d1, problem, epsilon))
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        gamma = self.spacing * float(problem.constraint.diameter)
        origin = grid.min(axis=0)
        code_grid = np.rint((grid - origin) / gamma).astype(np.int64)
        code_rows = np.rint((thetas - origin) / gamma).astype(np.int64)
        width = int(code_grid.max()) + 1
        key_grid = code_grid @ (width ** np.arange(grid.shape[1]))
        key_rows = code_rows @ (width ** np.arange(grid.shape[1]))
        order = np.argsort(key_grid)
        pos = np.clip(np.searchsorted(key_grid[order], key_rows), 0, key_grid.size - 1)
        idx = order[pos]
        on_grid = (key_grid[idx] == key_rows) & np.all(
            np.abs(grid[idx] - thetas) <= 1e-9 * max(1.0, gamma), axis=1)
        return np.where(on_grid, (logp0 - logp1)[idx], 0.0)

    def _net(self, data: Dataset, problem: Problem,
             epsilon: float) -> tuple[np.ndarray, float, np.ndarray]:
        """(the grid G, the temperature k, the normalised log-probabilities on G): everything
        but the draw, from public quantities and the data."""
        p = data.p
        if p > MAX_DIM:
            raise NotApplicable(f"{self.name}: the grid has ~(1/spacing)^p points; only p <= "
                                f"{MAX_DIM} is supported, got p={p}")
        constraint = problem.constraint
        grid = ball_grid(constraint, p, self.spacing)
        k = expmech_temperature(epsilon, float(problem.lipschitz), float(constraint.diameter))
        return grid, k, net_log_probs(problem, data, k, grid)

    def _ledger(self, epsilon: float) -> PrivacyLedger:
        return PrivacyLedger.from_charges(Charge(
            "exponential mechanism on a data-independent grid", float(epsilon), 0.0,
            "BST14 §1 net mechanism; oscillation argument (docs/bst14.md Errata 1)"))
