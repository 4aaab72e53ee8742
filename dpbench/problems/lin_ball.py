"""P2 linear-ball and P2h hard-SCO: ⟨θ, s⟩ on a ball (docs/instances.md, 'P2 and P2h ...').

ℓ(θ; s) = ⟨θ, s⟩ on C = B(0, R) (diameter 2R), rows s ∈ {±G/√p}^p (‖s‖ = G). P2h is a sign-data
version of the statistical hard instance behind GLL'22 Thm 31 / Cor. 36; population slopes of −1/2
need such n-scaled instances (docs/rem.md, pitfall P8; experiment E4 of suites/rem.yaml).

Constants: L = G (G_f), and |⟨θ, s − s'⟩| differences are 2G-Lipschitz (G_diff = 2G: REM uses 2L,
docs/rem.md, pitfall P5); Δ = 0; β = 0.

Data law: coordinate j is +G/√p with probability (1 + b·vⱼ)/2, else −G/√p, with v = (+1, −1, +1, …)
(a fixed public sign pattern), so E s = (G/√p)·b·v and ‖E s‖ = G·b. P2 uses a fixed b = ``bias``;
P2h (``hard_sco``) uses b = 1/(2√n): ‖E s‖ = G/(2√n), the statistical hard instance (GLL'22 Thm 31
with every sample fully observed), on which every algorithm has population excess ≳ GD/√n and
REM-SCO shows −1 → −1/2 at n* = d log(1/δ)/ε² (E4). ``population_excess(θ, p, n)`` uses the
cell's n for P2h.

Exact: θ* = −R s̄/‖s̄‖ (value −R‖s̄‖), population excess ⟨E s, θ⟩ + R‖E s‖, and REM's target
∝ exp(−k⟨x, s̄⟩ − (kμ/2)‖x − c‖²) = N(c − s̄/μ, I/(kμ)) truncated to the ball (docs/rem.md,
'Exact 𝒢_y draws (S2)'; :func:`dpbench.numerics.samplers.alternating.ball_gaussian_sampler`).
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import numpy as np
from numba import njit

from ..core.errors import UserInputError
from ..core.exact_samplers import register_exact_sampler
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import Ball, ConstraintSet

__all__ = ["LinBall", "lin_loss", "lin_grad"]


@njit(cache=True)
def lin_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = ⟨θ, xᵢ⟩."""
    dot = 0.0
    for j in range(theta.shape[0]):
        dot += theta[j] * X[i, j]
    return dot


@njit(cache=True)
def lin_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    for j in range(theta.shape[0]):
        out[j] = X[i, j]


class LinBall(Problem):
    """⟨θ, s⟩ on a ball, biased sign data; ``hard_sco``: mean G/(2√n) (P2/P2h)."""

    name: ClassVar[str] = "lin_ball"
    summary: ClassVar[str] = "linear loss <theta, s> on a ball; hard_sco: P2h, mean scales 1/sqrt(n)"
    citation: ClassVar[str] = ("Gopi, Lee, Liu (COLT 2022), Thm 31 / Cor. 36 hard instance; "
                               "docs/instances.md, 'P2 and P2h linear ball'")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "scale": Param(1.0, low=0.0, low_open=True, doc="G = |s| for every row"),
        "bias": Param(0.5, low=0.0, high=1.0, doc="b: |E s| = G b (ignored when hard_sco)"),
        "hard_sco": Param(False, kind="bool", doc="P2h: b = 1/(2 sqrt(n)), |E s| = G/(2 sqrt n)"),
    }

    radius: float
    scale: float
    bias: float
    hard_sco: bool

    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        return self.scale

    @property
    def smoothness(self) -> float:
        return 0.0

    def kernel(self) -> LossKernel:
        return LossKernel(lin_loss, lin_grad, np.zeros(1))

    def data_bounds(self) -> dict[str, float]:
        """Every row s ∈ {±G/√p}ᵖ has norm G (``scale``)."""
        return {"data_norm": float(self.scale)}

    def _b(self, n: int | None) -> float:
        if not self.hard_sco:
            return self.bias
        if n is None:
            raise UserInputError("lin_ball(hard_sco=True): the law depends on n; pass n")
        return 1.0 / (2.0 * math.sqrt(n))

    def mean(self, p: int, n: int | None = None) -> np.ndarray:
        """E s = (G/√p)·b·v, v = (+1, −1, …)."""
        v = np.where(np.arange(p) % 2 == 0, 1.0, -1.0)
        return (self.scale / math.sqrt(p)) * self._b(n) * v

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        prob_plus = 0.5 * (1.0 + self.mean(p, n) * math.sqrt(p) / self.scale)
        signs = np.where(rng.random((n, p)) < prob_plus, 1.0, -1.0)
        return Dataset(signs * (self.scale / math.sqrt(p)), None, {"b": self._b(n)})

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        return data.X @ np.asarray(theta, dtype=float)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        return (data.X if idx is None else data.X[np.atleast_1d(idx)]).copy()

    def solve(self, data: Dataset) -> Optimum:
        """θ* = −R s̄/‖s̄‖ (closed form; any point when s̄ = 0)."""
        sbar = data.X.mean(axis=0)
        norm = float(np.linalg.norm(sbar))
        theta = -sbar * (self.radius / norm) if norm > 0 else np.zeros(data.p)
        return Optimum(theta=theta, value=self.risk(theta, data), gap=0.0, method="closed form")

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """⟨E s, θ⟩ + R‖E s‖ (closed form)."""
        m = self.mean(p, n)
        return float(m @ np.asarray(theta, dtype=float) + self.radius * np.linalg.norm(m))


@register_exact_sampler("regularized_gibbs", LinBall)
def _lin_ball_rem(problem: LinBall, data: Dataset, k: float, mu: float, center: np.ndarray
                  ) -> Callable[[np.random.Generator], np.ndarray] | None:
    """N(c − s̄/μ, I/(kμ)) on the ball (exact up to the t-marginal's quadrature; docs/rem.md,
    'Exact 𝒢_y draws (S2)'). ``None`` when kμ = 0 (no μ = 0 fallback)."""
    if not k * mu > 0:
        return None
    from ..numerics.samplers.alternating import ball_gaussian_sampler

    q = np.asarray(center, dtype=float) - data.X.mean(axis=0) / mu
    return ball_gaussian_sampler(q, k * mu, problem.radius)
