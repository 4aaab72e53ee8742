"""Exact law of an exponential-mechanism selection among k i.i.d. 1-D candidates (BST14 App. D).

BST14 Appendix D's wrapper (:mod:`dpbench.algorithms.high_prob`) draws k i.i.d. candidates
θ₁, …, θ_k from a base law μ_D and releases θ_J with Pr[J = j] = w_D(θ_j)/Σᵢ w_D(θᵢ),
w_D(θ) = exp(−c·𝓛(θ; D)). [derived] By symmetry over j and independence, the released law is

    P_D(dθ) = k·μ_D(dθ)·w_D(θ)·φ_D(w_D(θ)),   φ_D(w) = E[1/(w + W₂ + … + W_k)],

with W_i = w_D(θ_i), θ_i ~ μ_D independent, and 1/x = ∫₀^∞ e^{−tx} dt gives

    φ_D(w) = ∫₀^∞ e^{−tw}·M_D(t)^{k−1} dt,   M_D(t) = E[e^{−t·W}] = ∫ e^{−t·w_D(θ)} μ_D(dθ)

(k = 1: φ(w) = 1/w, the base law itself). Here μ_D is a projected location law on [−R, R]
(:class:`~dpbench.privacy.projected.ProjectedNoise`, p = 1: the base is output perturbation or
closed-form objective perturbation): a density on (−R, R) and atoms at ±R, so P_D has the same
structure and the log ratio log dP_D/dP_D′ is a function on (−R, R) plus the two atoms' values.

**Numerics.** M_D(t) is a quadrature over μ_D: composite Gauss–Legendre (:data:`PANELS` panels of
:data:`NODES` nodes) on (−R, a) and (a, R) (a the centre, the noise density's only kink) plus the
atoms. φ_D(w) is the trapezoid rule in u = log t on [−40, log(60/r)] (step :data:`LOG_STEP`, r the
smallest decay rate w + (k − 1)·min W): the integrand e^{u − w e^u}·M(e^u)^{k−1} is analytic in the
strip |Im u| < π/2, so the rule's error is ≈ e^{−π²/h} ≈ 1e-40 relative, and the truncations cost
< e^{−40} (below) and e^{−60} (above). The weights are normalised by exp(−c·min 𝓛) over the
nodes (w·φ(w) does not change with a common factor). The log ratio is then evaluated on a grid of
:data:`GRID` cells whose ends include both centres (so it is smooth on each cell); the pure ε
(δ = 0) is the largest |log ratio| over the atoms and the grid, refined by a bounded scalar search
on the cells of the best grid values; for δ > 0 the hockey-stick integrand (p₀ − γp₁)₊ is
integrated by Gauss–Legendre on each cell after splitting the cell at the sign changes of
log p₀ − log p₁ − log γ (found by Brent's method), so no kink is integrated, and ε(δ) is its root
(:func:`~dpbench.privacy.projected.epsilon_for_delta`). Smooth losses (LB-Quad, LB-Lin, linear +
ridge) give a smooth log weight on each cell; with a loss kink inside C the cell containing it
converges only algebraically (the grid is fine, :data:`GRID` cells, so the error stays small but
is not certified).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from .projected import ProjectedNoise, _log_pdf, _log_sf, epsilon_for_delta

__all__ = ["BestOfK", "RatioTable", "best_of_k_epsilon"]

PANELS = 64
NODES = 16
LOG_STEP = 0.1
GRID = 2000
TABLE = 20000
_CELL_NODES = 12


def _panel_nodes(lo: float, hi: float, panels: int, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss–Legendre nodes and weights on [lo, hi]."""
    if not hi > lo:
        return np.empty(0), np.empty(0)
    x, w = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(lo, hi, panels + 1)
    mid, half = 0.5 * (edges[1:] + edges[:-1]), 0.5 * (edges[1:] - edges[:-1])
    return ((mid[:, None] + half[:, None] * x[None, :]).reshape(-1),
            (half[:, None] * w[None, :]).reshape(-1))


@dataclass
class BestOfK:
    """The released law of the selection among ``k`` i.i.d. candidates from ``base`` (1-D),
    with log weights ``log_weight(θ)`` = −c·𝓛(θ; D) (vectorised over θ)."""

    base: ProjectedNoise
    k: int
    log_weight: Callable[[np.ndarray], np.ndarray]
    _shift: float = field(init=False, repr=False)
    _u: np.ndarray = field(init=False, repr=False)
    _mk: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.base.p != 1:
            raise ValueError("BestOfK: the candidate law must be one-dimensional")
        if not (isinstance(self.k, (int, np.integer)) and self.k >= 1):
            raise ValueError(f"BestOfK: k must be an integer >= 1, got {self.k!r}")
        R, a = self.base.radius, float(self.base.center[0])
        knee = min(max(a, -R), R)
        xs, ws = zip(_panel_nodes(-R, knee, PANELS, NODES), _panel_nodes(knee, R, PANELS, NODES))
        x = np.concatenate(xs)
        log_mu = np.log(np.concatenate(ws)) + _log_pdf(self.base.noise, x - a, self.base.scale)
        lo_atom, hi_atom = self.log_atoms_base()
        x = np.concatenate([x, [-R, R]])
        log_mu = np.concatenate([log_mu, [lo_atom, hi_atom]])
        logw = np.asarray(self.log_weight(x), dtype=float)
        self._shift = float(np.max(logw))
        w = np.exp(logw - self._shift)
        mu = np.exp(log_mu)
        if self.k == 1:
            self._u, self._mk = np.empty(0), np.empty(0)
            return
        rate = float(self.k * np.min(w))
        self._u = np.arange(-40.0, math.log(60.0 / rate) + LOG_STEP, LOG_STEP)
        t = np.exp(self._u)
        m = np.exp(-t[:, None] * w[None, :]) @ mu
        self._mk = m ** (self.k - 1)

    def log_atoms_base(self) -> tuple[float, float]:
        """log μ_D(−R), log μ_D(R): the candidates' atoms."""
        R, a, s, noise = self.base.radius, float(self.base.center[0]), self.base.scale, self.base.noise
        return float(_log_sf(noise, R + a, s)), float(_log_sf(noise, R - a, s))

    def _log_select(self, theta: np.ndarray) -> np.ndarray:
        """log(k·w(θ)·φ(w(θ))): the selection factor of a candidate at θ."""
        w = np.exp(np.asarray(self.log_weight(theta), dtype=float) - self._shift)
        if self.k == 1:
            return np.zeros_like(w)
        t = np.exp(self._u)
        phi = LOG_STEP * (np.exp(-np.outer(w, t)) @ (t * self._mk))
        return math.log(self.k) + np.log(w) + np.log(phi)

    def log_density(self, theta: np.ndarray) -> np.ndarray:
        """log of the released density at interior points ``theta``."""
        theta = np.asarray(theta, dtype=float)
        a = float(self.base.center[0])
        return _log_pdf(self.base.noise, theta - a, self.base.scale) + self._log_select(theta)

    def log_atoms(self) -> tuple[float, float]:
        """log P_D(θ = −R), log P_D(θ = R)."""
        R = self.base.radius
        sel = self._log_select(np.array([-R, R]))
        lo, hi = self.log_atoms_base()
        return lo + float(sel[0]), hi + float(sel[1])

    def ratio_table(self, other: BestOfK) -> RatioTable:
        """The log ratio log dP_self/dP_other tabulated for :meth:`RatioTable.log_ratio`."""
        grid = _grid(self, other, TABLE)
        (s_lo, s_hi), (o_lo, o_hi) = self.log_atoms(), other.log_atoms()
        return RatioTable(grid, self.log_density(grid) - other.log_density(grid),
                          s_lo - o_lo, s_hi - o_hi, self.base.radius)

    def log_density_ratio(self, other: BestOfK, theta: np.ndarray) -> np.ndarray:
        """log dP_self/dP_other at ``theta`` (atoms at ±R, densities inside; interpolated,
        :class:`RatioTable`)."""
        return self.ratio_table(other).log_ratio(theta)


@dataclass(frozen=True)
class RatioTable:
    """A log-density ratio of two :class:`BestOfK` laws: exact values on ``grid`` (:data:`TABLE`
    cells whose ends include both centres) and the atoms' log ratios at ±R."""

    grid: np.ndarray
    values: np.ndarray
    lower_atom: float
    upper_atom: float
    radius: float

    def log_ratio(self, theta: np.ndarray) -> np.ndarray:
        """The ratio at ``theta``: the atoms' at ±R, inside the table linearly interpolated (the
        ratio is smooth on each cell: error ≲ h²/8·max|ℓ″| ≈ 1e-9 for h = 2R/TABLE), so a
        million rows cost one table."""
        theta = np.asarray(theta, dtype=float).reshape(-1)
        edge = np.abs(theta) >= self.radius * (1.0 - 1e-9)
        out = np.interp(theta, self.grid, self.values)
        out[edge] = np.where(theta[edge] > 0, self.upper_atom, self.lower_atom)
        return out


def _grid(b0: BestOfK, b1: BestOfK, cells: int = GRID) -> np.ndarray:
    """[−R, R] cut into ``cells`` equal cells, plus both centres (the noise densities' kinks)."""
    R = b0.base.radius
    kinks = [float(b.base.center[0]) for b in (b0, b1)]
    inner = [x for x in kinks if -R < x < R]
    return np.unique(np.concatenate([np.linspace(-R, R, cells + 1), inner]))


def _pure(b0: BestOfK, b1: BestOfK, grid: np.ndarray) -> float:
    """sup |log dP₀/dP₁| (module docstring: atoms, grid, refinement on the best cells)."""
    (l0, h0), (l1, h1) = b0.log_atoms(), b1.log_atoms()
    best = max(abs(l0 - l1), abs(h0 - h1))
    mids = 0.5 * (grid[1:] + grid[:-1])
    pts = np.concatenate([grid[1:-1], mids])
    vals = np.abs(b0.log_density(pts) - b1.log_density(pts))
    best = max(best, float(vals.max()))
    for idx in np.argsort(vals)[-4:]:
        x = pts[idx]
        j = int(np.clip(np.searchsorted(grid, x) - 1, 0, grid.size - 2))
        for lo, hi in ((grid[max(j - 1, 0)], grid[j + 1]), (grid[j], grid[min(j + 2, grid.size - 1)])):
            res = minimize_scalar(
                lambda t: -abs(float(b0.log_density(np.array([t]))[0]
                                     - b1.log_density(np.array([t]))[0])),
                bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
            best = max(best, -float(res.fun))
    return best


def _hockey(b0: BestOfK, b1: BestOfK, grid: np.ndarray, epsilon: float) -> float:
    """H_{e^ε}(P₀‖P₁) (module docstring)."""
    gamma = math.exp(epsilon)

    def excess(t: np.ndarray) -> np.ndarray:
        return b0.log_density(t) - b1.log_density(t) - epsilon

    x, w = np.polynomial.legendre.leggauss(_CELL_NODES)
    ex = excess(grid)
    cuts = list(grid)
    for j in np.flatnonzero(np.sign(ex[:-1]) * np.sign(ex[1:]) < 0):
        cuts.append(brentq(lambda t: float(excess(np.array([t]))[0]), grid[j], grid[j + 1],
                           xtol=1e-15, rtol=1e-15))
    cuts = np.unique(cuts)
    mid, half = 0.5 * (cuts[1:] + cuts[:-1]), 0.5 * (cuts[1:] - cuts[:-1])
    keep = excess(mid) > 0
    total = 0.0
    if np.any(keep):
        t = (mid[keep, None] + half[keep, None] * x[None, :]).reshape(-1)
        p0, p1 = np.exp(b0.log_density(t)), np.exp(b1.log_density(t))
        total = float(np.sum((half[keep, None] * w[None, :]).reshape(-1) * (p0 - gamma * p1)))
    for lp, lq in zip(b0.log_atoms(), b1.log_atoms()):
        total += max(math.exp(lp) - gamma * math.exp(lq), 0.0)
    return max(total, 0.0)


def best_of_k_epsilon(b0: BestOfK, b1: BestOfK, delta: float) -> float:
    """The ε(δ) of the pair of selection laws, both orders (module docstring)."""
    grid = _grid(b0, b1)
    eps0 = _pure(b0, b1, grid)
    if delta == 0.0 or eps0 == 0.0:
        return eps0
    return epsilon_for_delta(lambda e: max(_hockey(b0, b1, grid, e), _hockey(b1, b0, grid, e)),
                             delta, eps0 * (1.0 + 1e-9) + 1e-12)
