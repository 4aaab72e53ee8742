"""Least squares on the ℓ1 ball over TTZ15's universe ‖x‖∞ ≤ 1: a designated instance on which
private Frank–Wolfe's (nε)^{-2/3} is attained (docs/frank-wolfe.md, "The tight instance").

ℓ(θ; x, y) = ½(y − ⟨x, θ⟩)² over C = {‖θ‖₁ ≤ r} (:class:`dpbench.core.sets.L1Ball`), the
constrained LASSO of Talwar, Thakurta and Zhang (NeurIPS 2015) on their own universe: every
feature |xⱼ| ≤ 1 and |y| ≤ 1, in dimension p ≤ P (``max_dim``). Constants [derived]:

* ℓ∞ gradient bound (``L_inf``, what TTZ15 calibrate the scores with): ‖∇ℓ‖∞ =
  |⟨x, θ⟩ − y|·‖x‖∞ ≤ ‖x‖∞‖θ‖₁ + |y| ≤ r + 1, independent of p;
* smoothness w.r.t. ‖·‖₁ (``beta_1``): hᵀ∇²ℓh = ⟨x, h⟩² ≤ ‖x‖∞²‖h‖₁² = ‖h‖₁², so β₁ = 1 and the
  curvature constant Γ ≤ β₁·(2r)² (Jaggi 2013 in ‖·‖₁; 2r is the ℓ1 diameter of C);
* the Euclidean constants, for mechanisms of Euclidean geometry (NoisySGD): ‖x‖₂ ≤ √p ≤ √P, so
  L = (1 + r)·√P, β = P (‖x‖₂²), D = 2r, data_norm = √P. They are constant over p ≤ P (a p-sweep
  compares mechanisms at fixed declared constants); P bounds the grid's p.

Data law ("planted-label sign design", [derived]): y = ±1 with probability ½ each, xⱼ = y·ζⱼ with
independent ζⱼ ∈ {±1}, E[ζⱼ] = mⱼ. Coordinate 1 is the signal (m₁ = m_s = ``signal``), the p − 1
others are *weak*, with correlations spread evenly over (0, κ), κ = (m_s − r)/(1 − r·m_s):
|mⱼ| = κ·(i + ½)/(p − 1) for the i-th weak coordinate, signs alternating. Then, exactly,
E[xy] = m, Σ = E[xxᵀ] = I − diag(m²) + mmᵀ, and the population risk is the quadratic
R(θ) = ½ − mᵀθ + ½θᵀΣθ. Its minimiser over C is θ* = r·e₁ (r < m_s): ∇R(θ*) = Σθ* − m has
first coordinate r − m_s = −λ with λ = m_s − r > 0 (a positive multiplier: θ* on the sphere), and
weak coordinates −mⱼ(1 − r·m_s), of modulus < λ because |mⱼ| < κ. So R(θ*) = ½ − r·m_s + ½r²
and the population excess is a closed form.

Why it is tight (docs/frank-wolfe.md): Frank–Wolfe's score of the vertex ±r·eⱼ at θ* exceeds the
best score by r(λ ∓ ∇ⱼR(θ*)) — for the weak coordinates these 2(p − 1) gaps cover (0, 2rλ)
evenly, so the exponential mechanism's expected shortfall is ≈ its temperature 2Δ/ε₀ ∝
(nε)^{-2/3} (with T ∝ (nε)^{2/3}) as long as the spacing 2rλ/(2p − 2) is well below that
temperature and the width 2rλ well above it; the excess is linear in the mass put on those
vertices because λ > 0.

The empirical optimum is certified like ``lasso``'s (:func:`dpbench.problems.lasso.solve_lasso_l1`:
FISTA + active-set polish, Frank–Wolfe gap certificate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..core.errors import UserInputError
from ..core.params import Param
from ..core.problem import Dataset
from .lasso import L1LeastSquares

__all__ = ["LassoLinf"]


class LassoLinf(L1LeastSquares):
    """½(y − ⟨x, θ⟩)² on the ℓ1 ball, universe ‖x‖∞ ≤ 1, planted-label sign design (module
    docstring)."""

    name: ClassVar[str] = "lasso_linf"
    summary: ClassVar[str] = ("least squares on the l1 ball over the universe |x_j| <= 1 (TTZ15's), "
                              "score gaps spread evenly: private Frank-Wolfe's tight instance")
    citation: ClassVar[str] = ("Talwar, Thakurta, Zhang (NeurIPS 2015), Nearly optimal private "
                               "LASSO; instance: docs/frank-wolfe.md, 'The tight instance'")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(0.5, low=0.0, low_open=True, high=1.0, high_open=True,
                        doc="r: C = {‖θ‖₁ ≤ r}; must be < signal"),
        "signal": Param(1.0, low=0.0, low_open=True, high=1.0,
                        doc="m_s = E[x₁y]: the signal coordinate's correlation with the label"),
        "max_dim": Param(1024, kind="int", low=2,
                         doc="P: the largest p (the Euclidean constants L = (1 + r)√P, β = P)"),
    }

    radius: float
    signal: float
    max_dim: int

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if not self.radius < self.signal:
            raise UserInputError(
                f"problem {self.name!r}: the optimum is on the sphere only if radius < signal, got "
                f"radius = {self.radius}, signal = {self.signal}")

    # --- constants ----------------------------------------------------------------------------
    @property
    def lipschitz(self) -> float:
        """L = (1 + r)·√P: ‖∇ℓ‖₂ ≤ (‖x‖∞‖θ‖₁ + |y|)·‖x‖₂ with ‖x‖₂ ≤ √p ≤ √P."""
        return (1.0 + self.radius) * math.sqrt(self.max_dim)

    @property
    def smoothness(self) -> float:
        """β = sup ‖x‖₂² = P."""
        return float(self.max_dim)

    def data_bounds(self) -> dict[str, float]:
        """‖x‖∞ ≤ 1 (the cube L∞ is proved over), hence ‖x‖₂ ≤ √p ≤ √P; |y| ≤ 1."""
        return {"data_norm": math.sqrt(self.max_dim), "label_bound": 1.0, "data_norm_inf": 1.0}

    def norm_constants(self) -> dict[str, float]:
        """L∞ = 1 + r and β₁ = 1, independent of p (module docstring)."""
        return {"L_inf": 1.0 + self.radius, "beta_1": 1.0}

    def check_grid(self, grid: Mapping[str, Sequence[Any]]) -> dict[str, str]:
        out = super().check_grid(grid)
        bad = [v for v in grid.get("p", ()) if not 2 <= int(v) <= self.max_dim]
        if bad:
            out["p"] = (f"problem {self.name!r} is defined for 2 ≤ p ≤ max_dim = {self.max_dim} "
                        f"(its Euclidean constants are proved there), got {bad}")
        return out

    # --- the law ------------------------------------------------------------------------------
    def _kappa(self) -> float:
        return (self.signal - self.radius) / (1.0 - self.radius * self.signal)

    def correlations(self, p: int) -> np.ndarray:
        """m = E[xy] = E[ζ]: m₁ = m_s, the weak |mⱼ| = κ(i + ½)/(p − 1), signs alternating."""
        if not 2 <= p <= self.max_dim:
            raise UserInputError(f"problem {self.name!r}: p must be in [2, {self.max_dim}], "
                                 f"got {p}")
        weak = self._kappa() * (np.arange(p - 1) + 0.5) / (p - 1)
        sign = np.where(np.arange(p - 1) % 2 == 0, -1.0, 1.0)
        return np.concatenate([[self.signal], sign * weak])

    def theta_star(self, p: int) -> np.ndarray:
        """θ* = r·e₁, the population minimiser over C (module docstring)."""
        out = np.zeros(p)
        out[0] = self.radius
        return out

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        m = self.correlations(p)
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        zeta = np.where(rng.random((n, p)) < 0.5 * (1.0 + m), 1.0, -1.0)
        return Dataset(zeta * y[:, None], y, {})

    def population_risk(self, theta: np.ndarray, p: int) -> float:
        """R(θ) = ½ − mᵀθ + ½(‖θ‖² − Σⱼmⱼ²θⱼ² + (mᵀθ)²) (exact: Σ = I − diag(m²) + mmᵀ)."""
        m = self.correlations(p)
        t = np.asarray(theta, dtype=float)
        mt = float(m @ t)
        return 0.5 - mt + 0.5 * (float(t @ t) - float((m * m) @ (t * t)) + mt * mt)

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """R(θ) − R(θ*), R(θ*) = ½ − r·m_s + ½r² (closed form)."""
        r = self.radius
        return self.population_risk(theta, p) - (0.5 - r * self.signal + 0.5 * r * r)
