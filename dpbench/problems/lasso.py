"""LASSO-type least squares on the ℓ1 ball, with a certified optimum (docs/frank-wolfe.md).

ℓ(θ; x, y) = ½(y − ⟨x, θ⟩)² over C = {‖θ‖₁ ≤ r} (:class:`dpbench.core.sets.L1Ball`), the
constrained LASSO of Talwar, Thakurta and Zhang (NeurIPS 2015, "Nearly optimal private LASSO",
§1–2). The universe is ‖x‖₂ ≤ 1 (``data_norm``) and |y| ≤ 1 (``label_bound``), so that every
constant is independent of p and a p-sweep compares mechanisms at fixed L, D, β:

* L = 1 + r: ‖∇ℓ‖₂ = |⟨x, θ⟩ − y|·‖x‖₂ ≤ (‖x‖₂‖θ‖₂ + |y|)·‖x‖₂ ≤ r + 1, as ‖θ‖₂ ≤ ‖θ‖₁ ≤ r;
* the ℓ∞ bound TTZ15 calibrates with, ‖∇ℓ‖∞ ≤ ‖∇ℓ‖₂ ≤ L (no better public bound exists when
  ‖x‖₂ ≤ 1 is all that is known: x = e₁ attains it);
* β = 1 (∇²ℓ = xxᵀ ≼ ‖x‖₂²·I), Δ = 0, D = 2r (Euclidean diameter of the ℓ1 ball).

Data law ("spiked Rademacher design", [derived]): the support S = {1, …, k} of θ* (k =
``sparsity``, at most p) carries a fraction ρ = ``signal_energy`` of ‖x‖₂²: xⱼ = √(ρ/k)·σⱼ on S and
xⱼ = √((1 − ρ)/(p − k))·σⱼ off S, σ i.i.d. Rademacher (‖x‖₂ = 1 exactly; ρ = 1 when p = k). Hence
Σ = E[xxᵀ] = diag(ρ/k on S, (1 − ρ)/(p − k) off S) exactly, whatever p: the curvature along the
signal, the risk of the data-independent centre and the signal-to-sensitivity ratio of Frank–Wolfe's
scores do not move with p, while the p − k noise features add dimensions (where Euclidean noise
pays, docs/frank-wolfe.md, "The p-sweep"). θ* = (τr/k)·(+1, −1, +1, …) on S (τ = ``theta_scale``,
so ‖θ*‖₁ = τr < r: θ* is interior), y = ⟨x, θ*⟩ + ξ with ξ uniform on [−ν, ν] (ν =
``noise_level``). |⟨x, θ*⟩| ≤ √(ρ/k)·‖θ*‖₁, and the parameters are validated so that
τr + ν ≤ 1 (‖x‖∞ ≤ 1): |y| ≤ 1 holds without clipping (the clip in ``generate`` is a no-op
kept as a guard; a clip that acted would bend the closed form below).

Population risk in closed form: E ½(y − ⟨x, θ⟩)² = ½(θ − θ*)ᵀΣ(θ − θ*) + ν²/6, minimised over C at
θ* (interior), so the excess population risk is ½(θ − θ*)ᵀΣ(θ − θ*).

Certified optimum (:func:`solve_lasso_l1`): the average loss is the quadratic
F(θ) = ½θᵀAθ − bᵀθ + c with A = XᵀX/n, b = Xᵀy/n. FISTA with the exact ℓ1 projection, then an
active-set polish (the KKT system on the support with its signs), keeping the best point; the
certificate is the Frank–Wolfe gap ⟨∇F(θ), θ⟩ + r‖∇F(θ)‖∞ ≥ F(θ) − min_C F (convexity), plus a
rounding allowance — a proven bound whatever produced θ.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..core.errors import UserInputError
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.sets import ConstraintSet, L1Ball

__all__ = ["L1LeastSquares", "Lasso", "l1_frank_wolfe_gap", "solve_lasso_l1"]

_EPS = float(np.finfo(float).eps)


def l1_frank_wolfe_gap(grad: np.ndarray, theta: np.ndarray, radius: float,
                       scale: float = 0.0) -> float:
    """max_{‖u‖₁ ≤ r} ⟨∇F(θ), θ − u⟩ = ⟨∇F(θ), θ⟩ + r‖∇F(θ)‖∞ (+ a rounding allowance).

    For convex F and feasible θ this bounds F(θ) − min_C F (Jaggi 2013, §2). ``scale`` is the size
    of the terms ∇F was computed from (|A||θ| + |b|), for the rounding allowance.
    """
    inner = float(grad @ theta)
    top = float(np.max(np.abs(grad))) if grad.size else 0.0
    p = max(grad.size, 1)
    roundoff = 8.0 * _EPS * (abs(inner) + radius * top + p * scale * (1.0 + radius))
    return max(inner + radius * top, 0.0) + roundoff


def _face_solution(A: np.ndarray, b: np.ndarray, support: np.ndarray, sign: np.ndarray,
                   radius: float) -> np.ndarray:
    """The minimiser of F on span(support): unconstrained when its ℓ1 mass (with the given
    signs) stays ≤ r, else on the face σᵀθ_S = r (a bordered KKT system)."""
    Ass = A[np.ix_(support, support)]
    sol = np.linalg.lstsq(Ass, b[support], rcond=None)[0]
    if float(sign @ sol) <= radius and np.all(np.sign(sol) == sign):
        return sol
    k = support.size
    K = np.zeros((k + 1, k + 1))
    K[:k, :k] = Ass
    K[:k, k] = sign
    K[k, :k] = sign
    rhs = np.concatenate([b[support], [radius]])
    return np.linalg.lstsq(K, rhs, rcond=None)[0][:k]


def _polish(A: np.ndarray, b: np.ndarray, theta: np.ndarray, radius: float,
            rounds: int = 30) -> np.ndarray | None:
    """A support-refinement heuristic from ``theta`` (its output is only ever used through its
    certified Frank–Wolfe gap): solve on the support with its signs, drop coordinates whose sign
    flips, add the coordinate most violating the KKT conditions, repeat."""
    support = np.nonzero(np.abs(theta) > 1e-12 * max(radius, 1.0))[0]
    if support.size == 0:
        g = -b
        support = np.array([int(np.argmax(np.abs(g)))])
        sign = np.array([-np.sign(g[support[0]]) or 1.0])
    else:
        sign = np.sign(theta[support])
    best = None
    for _ in range(rounds):
        sol = _face_solution(A, b, support, sign, radius)
        bad = np.sign(sol) != sign
        if np.any(bad):
            if np.all(bad):
                return best
            support, sign = support[~bad], sign[~bad]
            continue
        out = np.zeros_like(theta)
        out[support] = sol
        if float(np.abs(out).sum()) > radius:
            out = L1Ball(radius).project(out)
        best = out
        g = A @ out - b
        lam = float(np.max(np.abs(g[support]))) if float(np.abs(out).sum()) >= radius * (
            1 - 1e-12) else 0.0
        viol = np.abs(g) - lam
        viol[support] = -np.inf
        j = int(np.argmax(viol))
        if viol[j] <= 1e-13 * (1.0 + float(np.max(np.abs(b)))):
            return best
        support = np.append(support, j)
        sign = np.append(sign, -np.sign(g[j]) or 1.0)
    return best


def solve_lasso_l1(A: np.ndarray, b: np.ndarray, radius: float, c: float = 0.0,
                   tol: float = 1e-12, max_iter: int = 20_000) -> Optimum:
    """Minimise F(θ) = ½θᵀAθ − bᵀθ + c over {‖θ‖₁ ≤ r}, A ≽ 0, with a certified gap.

    FISTA (Beck and Teboulle 2009) with step 1/λ_max(A) and the exact projection, with an
    active-set polish every 50 iterations; stops when the certified Frank–Wolfe gap of the best
    point is ≤ ``tol``·(1 + |F|). Returns the best certified point (``gap`` = its FW gap).
    """
    p = b.shape[0]
    ball = L1Ball(radius)
    lmax = float(np.linalg.eigvalsh(A)[-1]) if p else 0.0
    step = 1.0 / lmax if lmax > 0 else 1.0
    absA = np.abs(A)

    def value(t: np.ndarray) -> float:
        return 0.5 * float(t @ (A @ t)) - float(b @ t) + c

    def certify(t: np.ndarray) -> float:
        g = A @ t - b
        scale = float(np.max(absA @ np.abs(t) + np.abs(b))) if p else 0.0
        return l1_frank_wolfe_gap(g, t, radius, scale)

    x = np.zeros(p)
    best, best_gap = x.copy(), certify(x)
    z, tk = x.copy(), 1.0
    it = 0
    for it in range(1, max_iter + 1):
        x_new = ball.project(z - step * (A @ z - b))
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * tk * tk))
        z = x_new + ((tk - 1.0) / t_new) * (x_new - x)
        if value(x_new) > value(x):  # adaptive restart (O'Donoghue and Candès 2015)
            z, t_new = x_new.copy(), 1.0
        x, tk = x_new, t_new
        if it in (25, 100) or it % 400 == 0 or it == max_iter:
            for cand in (x, _polish(A, b, x, radius)):
                if cand is None:
                    continue
                gap = certify(cand)
                if gap < best_gap:
                    best, best_gap = cand.copy(), gap
            # stop at the target, or when only the rounding allowance is left
            floor = 8.0 * _EPS * p * (1.0 + radius) * float(np.max(absA @ np.abs(best) + np.abs(b)))
            if best_gap <= max(tol * (1.0 + abs(value(best))), 2.0 * floor):
                break
    return Optimum(theta=best, value=value(best), gap=best_gap,
                   method="FISTA + active-set polish; Frank–Wolfe gap on the ℓ1 ball",
                   iterations=it)


class L1LeastSquares(Problem):
    """½(y − ⟨x, θ⟩)² over the ℓ1 ball {‖θ‖₁ ≤ ``radius``}: the losses and the certified optimum
    (:func:`solve_lasso_l1`) shared by ``lasso`` and ``lasso_linf``, which differ in their data
    law and universe (hence in their declared constants)."""

    radius: float

    @property
    def constraint(self) -> ConstraintSet:
        return L1Ball(self.radius)

    def _rows(self, data: Dataset, idx: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if data.y is None:
            raise ValueError(f"{self.name} needs labels: Dataset.y is None")
        if idx is None:
            return data.X, data.y
        idx = np.atleast_1d(idx)
        return data.X[idx], data.y[idx]

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        X, y = self._rows(data, None)
        r = X @ np.asarray(theta, dtype=float) - y
        return 0.5 * r * r

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        X, y = self._rows(data, idx)
        r = X @ np.asarray(theta, dtype=float) - y
        return r[:, None] * X

    def full_grad(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        X, y = self._rows(data, None)
        return X.T @ (X @ np.asarray(theta, dtype=float) - y) / X.shape[0]

    def solve(self, data: Dataset) -> Optimum:
        X, y = self._rows(data, None)
        n = X.shape[0]
        opt = solve_lasso_l1(X.T @ X / n, X.T @ y / n, self.radius, 0.5 * float(y @ y) / n)
        # the value by the problem's own risk (the harness compares with it)
        return Optimum(theta=opt.theta, value=self.risk(opt.theta, data), gap=opt.gap,
                       method=opt.method, iterations=opt.iterations)


class Lasso(L1LeastSquares):
    """½(y − ⟨x, θ⟩)² on the ℓ1 ball, spiked Rademacher design (module docstring)."""

    name: ClassVar[str] = "lasso"
    summary: ClassVar[str] = ("least squares 1/2(y - <x, theta>)^2 on the l1 ball (constrained "
                              "LASSO), k-sparse truth, closed-form population risk")
    citation: ClassVar[str] = ("Talwar, Thakurta, Zhang (NeurIPS 2015), Nearly optimal private "
                               "LASSO; instance: docs/frank-wolfe.md, 'The instance'")
    version: ClassVar[str] = "1"
    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = {
        "radius": Param(1.0, low=0.0, low_open=True, doc="r: C = {‖θ‖₁ ≤ r} (diameter 2r)"),
        "sparsity": Param(2, kind="int", low=1, doc="k: the support {1..k} of the truth"),
        "signal_energy": Param(0.5, low=0.0, high=1.0, low_open=True,
                               doc="ρ: the share of ‖x‖₂² = 1 on the support (p > k)"),
        "theta_scale": Param(1.8, low=0.0, low_open=True,
                             doc="τ: ‖θ_ols‖₁ = τ·r; τ > 1 puts the constrained optimum on a face"),
        "noise_level": Param(0.1, low=0.0, high=1.0, doc="ν: label noise uniform on [−ν, ν]"),
    }

    radius: float
    sparsity: int
    signal_energy: float
    theta_scale: float
    noise_level: float

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        # every coordinate of x is ±√(ρ/k) on the support, and |⟨x, θ_ols⟩| ≤ √(ρ/k)·τr
        worst = math.sqrt(self.signal_energy / self.sparsity) * self.theta_scale * self.radius
        if worst + self.noise_level > 1.0 + 1e-12:
            raise UserInputError(
                f"problem {self.name!r}: labels could exceed 1: need √(signal_energy/sparsity)·"
                f"theta_scale·radius + noise_level ≤ 1, got {worst + self.noise_level:.4g}")

    # --- constants ----------------------------------------------------------------------------
    @property
    def lipschitz(self) -> float:
        """L = 1 + r over ‖x‖₂ ≤ 1, |y| ≤ 1, ‖θ‖₁ ≤ r (module docstring)."""
        return 1.0 + self.radius

    @property
    def smoothness(self) -> float:
        """β = sup ‖x‖₂² = 1."""
        return 1.0

    def data_bounds(self) -> dict[str, float]:
        return {"data_norm": 1.0, "label_bound": 1.0}

    # --- the law ------------------------------------------------------------------------------
    def _design(self, p: int) -> tuple[int, float, float]:
        """(k′, a, b): support size k′ = min(k, p) and the coordinate scales a = √(ρ/k) on the
        support, b = √((1 − ρ)/(p − k)) off it (b = 0 when p ≤ k; then ‖x‖₂² = ρp/k ≤ 1)."""
        k = min(self.sparsity, p)
        a = math.sqrt(self.signal_energy / self.sparsity)
        b = math.sqrt((1.0 - self.signal_energy) / (p - k)) if p > k else 0.0
        return k, a, b

    def theta_ols(self, p: int) -> np.ndarray:
        """θ_ols = (τr/k)·(+1, −1, +1, …) on the support: the unconstrained population
        minimiser (E[xy] = Σθ_ols)."""
        k, _, _ = self._design(p)
        out = np.zeros(p)
        out[:k] = (self.theta_scale * self.radius / self.sparsity) * np.where(
            np.arange(k) % 2 == 0, 1.0, -1.0)
        return out

    def theta_star(self, p: int) -> np.ndarray:
        """The population minimiser over C: the Σ-weighted projection of θ_ols, which is the
        Euclidean ℓ1 projection of θ_ols (Σ is a multiple of I on the support holding θ_ols, and
        mass off the support raises both the risk and ‖θ‖₁); = θ_ols when τ ≤ 1."""
        return self.constraint.project(self.theta_ols(p))

    def covariance_diag(self, p: int) -> np.ndarray:
        """diag(Σ), Σ = E[xxᵀ] (exactly diagonal: independent Rademacher coordinates)."""
        k, a, b = self._design(p)
        out = np.full(p, b * b)
        out[:k] = a * a
        return out

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        k, a, b = self._design(p)
        signs = np.where(rng.random((n, p)) < 0.5, -1.0, 1.0)
        scale = np.full(p, b)
        scale[:k] = a
        X = signs * scale
        xi = rng.uniform(-self.noise_level, self.noise_level, size=n)
        y = X @ self.theta_ols(p) + xi
        return Dataset(X, np.clip(y, -1.0, 1.0), {"sparsity": k})

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """R(θ) − R(θ*) with R(θ) − ν²/6 = ½(θ − θ_ols)ᵀΣ(θ − θ_ols) (closed form)."""
        w = self.covariance_diag(p)
        d = np.asarray(theta, dtype=float) - self.theta_ols(p)
        d0 = self.theta_star(p) - self.theta_ols(p)
        return 0.5 * float(d @ (w * d)) - 0.5 * float(d0 @ (w * d0))
