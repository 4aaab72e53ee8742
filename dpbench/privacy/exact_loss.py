"""The exact ε(δ) of a pair of output laws: the quantity ``Algorithm.exact_epsilon`` returns.

For two laws P = M(D) and Q = M(D′) of a released output, ε(δ) is the smallest ε ≥ 0 with
P(E) ≤ e^ε·Q(E) + δ and Q(E) ≤ e^ε·P(E) + δ for every event E. By the Neyman–Pearson lemma the
worst event of one order is {p > e^ε q}, so the condition is H_{e^ε}(P‖Q) ≤ δ and
H_{e^ε}(Q‖P) ≤ δ with the hockey-stick divergence H_γ(P‖Q) = ∫ (p − γq)₊ (Balle, Barthe and
Gaboardi 2018, Thm 1; Dong, Roth and Su 2022, §2). H_{e^ε} decreases continuously in ε, so ε(δ) is
a root found by Brent's method. For δ = 0 it is the supremum of |log p/q| over the union of the
supports (an atom on one side only, or a density positive on one side only, gives +∞).

Two kinds of laws, everything a mechanism of this package releases on the audited instances:

* :class:`Law1D` — a law on an interval [lo, hi] of the real line: a density (its normalised log,
  a vectorised function, −∞ where it vanishes) of total mass 1 − Σ atoms, plus atoms. Privacy
  losses of p ≥ 2 outputs reduce to it when the loss depends on one coordinate only (the
  exponential families of :mod:`dpbench.numerics.gibbs_law`). :func:`epsilon_1d`: the integral
  ∫(p − γq)₊ is split at the sign changes of p − γq (located on a grid of :data:`GRID` points
  and the law's breakpoints, then by Brent's method) and each positive piece is integrated by
  adaptive Gauss–Kronrod quadrature (QUADPACK through ``scipy.integrate.quad``, relative
  tolerance 1e-10); the δ = 0 supremum is the grid maximum refined by bounded scalar
  minimisation around it. A sign change or a local maximum of |log p/q| narrower than the grid
  (1/4096 of the interval) could be missed; the laws here are smooth or piecewise smooth with
  their kinks declared as breakpoints.
* finite laws (:func:`epsilon_pieces`): masses P_j, Q_j of pieces on each of which the density
  ratio is constant (the atoms of a net, the cells of a grid walk), where every sum is exact;
* products of two :class:`Law1D` pairs (:func:`epsilon_product_2`: a law whose coordinates are
  independent under both datasets, REM on SEP-ABS at p = 2).

``epsilon_from_delta_curve`` does the root-finding for any pair of hockey-stick curves.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from scipy import integrate, optimize

__all__ = ["GRID", "Law1D", "digest", "epsilon_1d", "epsilon_from_delta_curve", "epsilon_pieces",
           "epsilon_product_2", "memo",
           "hockey_stick_1d", "hockey_stick_pieces", "log_ratio_range_1d", "normalised_law_1d",
           "sup_log_ratio_1d"]

#: Grid points of [lo, hi] on which sign changes and maxima of the privacy loss are located.
GRID = 4097
_QUAD = {"epsabs": 0.0, "epsrel": 1e-10, "limit": 500}


T = TypeVar("T")
#: Laws kept by :func:`memo` (the oldest dropped beyond).
MEMO_SIZE = 32
_MEMO: OrderedDict[str, Any] = OrderedDict()


def digest(*parts: Any) -> str:
    """A key for everything a law depends on: plugins (class and parameters), datasets (shape
    and bytes of X and y), numbers and strings."""
    h = hashlib.sha256()
    for part in parts:
        X = getattr(part, "X", None)
        if X is not None:  # a dataset
            X = np.ascontiguousarray(X, dtype=float)
            h.update(repr(X.shape).encode() + X.tobytes())
            y = getattr(part, "y", None)
            if y is not None:
                h.update(np.ascontiguousarray(y, dtype=float).tobytes())
        elif hasattr(part, "get_params"):  # a problem or an algorithm
            h.update(f"{type(part).__module__}.{type(part).__qualname__}"
                     f"{sorted(part.get_params().items())!r}".encode())
        else:
            h.update(repr(part).encode())
        h.update(b"|")
    return h.hexdigest()


def memo(key: str, build: Callable[[], T]) -> T:
    """``build()``, kept under ``key`` for the next calls (:data:`MEMO_SIZE` entries, least
    recently used dropped): the audit scores its releases chunk by chunk, and a law that costs
    a quadrature or a transition-matrix run must not be rebuilt for every chunk (nor inflate the
    timing batch that sizes the audit's plan)."""
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]  # type: ignore[no-any-return]
    value = build()
    _MEMO[key] = value
    while len(_MEMO) > MEMO_SIZE:
        _MEMO.popitem(last=False)
    return value


def _quad(f: Callable[[float], float], a: float, b: float) -> float:
    """∫_a^b f by QUADPACK at relative tolerance 1e-10. Its "slowly convergent" warning is
    silenced: it fires on integrands that are 0 up to rounding (a plateau of the privacy loss at
    exactly ε, e.g. Laplace tails), where the value returned is that 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        return float(integrate.quad(f, a, b, **_QUAD)[0])


@dataclass(frozen=True)
class Law1D:
    """A law on [lo, hi] ⊂ ℝ: density exp(``logpdf``) (normalised: its integral is 1 − Σ atom
    masses; −∞ where it vanishes; vectorised) plus point masses ``atoms`` ((position, mass)
    pairs). ``breakpoints``: points of (lo, hi) where the density or its derivative may jump
    (quadrature panels and grids are split there)."""

    lo: float
    hi: float
    logpdf: Callable[[np.ndarray], np.ndarray]
    atoms: tuple[tuple[float, float], ...] = ()
    breakpoints: tuple[float, ...] = field(default=())

    def points(self) -> np.ndarray:
        """The breakpoints strictly inside (lo, hi), sorted."""
        b = np.asarray(self.breakpoints, dtype=float)
        return np.unique(b[(b > self.lo) & (b < self.hi)])


def normalised_law_1d(log_weight: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, *,
                      breakpoints: Sequence[float] = (), mass: float = 1.0) -> Law1D:
    """The law with density ∝ exp(``log_weight``) on [lo, hi] and total mass ``mass``: the
    normalising constant by adaptive quadrature of exp(log_weight − max) (the maximum taken on
    the grid, so nothing overflows), split at ``breakpoints``."""
    pts = np.unique(np.concatenate([[lo, hi], np.asarray(breakpoints, dtype=float)]))
    pts = pts[(pts >= lo) & (pts <= hi)]
    grid = np.unique(np.concatenate([np.linspace(lo, hi, GRID), pts]))
    top = float(np.max(log_weight(grid)))
    if not math.isfinite(top):
        raise ValueError("normalised_law_1d: the weight is not positive and finite anywhere")

    def shifted(x: float) -> float:
        return float(np.exp(log_weight(np.array([x]))[0] - top))

    total = sum(_quad(shifted, a, b) for a, b in zip(pts[:-1], pts[1:]))
    log_norm = top + math.log(total) - math.log(mass)

    def logpdf(x: np.ndarray) -> np.ndarray:
        return np.asarray(log_weight(np.asarray(x, dtype=float)), dtype=float) - log_norm

    return Law1D(lo, hi, logpdf, (), tuple(float(b) for b in pts[1:-1]))


def _grid(P: Law1D, Q: Law1D) -> tuple[float, float, np.ndarray, np.ndarray]:
    lo, hi = min(P.lo, Q.lo), max(P.hi, Q.hi)
    pts = np.unique(np.concatenate([[lo, hi], P.points(), Q.points(), [P.lo, P.hi, Q.lo, Q.hi]]))
    grid = np.unique(np.concatenate([np.linspace(lo, hi, GRID), pts]))
    return lo, hi, grid, pts


def _logpdf_on(law: Law1D, x: np.ndarray) -> np.ndarray:
    """The law's log density at x, −∞ outside [lo, hi]."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, -np.inf)
    inside = (x >= law.lo) & (x <= law.hi)
    if np.any(inside):
        out[inside] = law.logpdf(x[inside])
    return out


def _atom_table(P: Law1D, Q: Law1D) -> tuple[np.ndarray, np.ndarray]:
    """The atoms' masses under P and Q, aligned on the union of their positions."""
    where = sorted({float(a) for a, _ in P.atoms} | {float(a) for a, _ in Q.atoms})
    mp = np.array([sum(m for a, m in P.atoms if float(a) == w) for w in where])
    mq = np.array([sum(m for a, m in Q.atoms if float(a) == w) for w in where])
    return mp, mq


def log_ratio_range_1d(P: Law1D, Q: Law1D) -> tuple[float, float]:
    """(inf, sup) of log p/q over the union of the supports (atoms included; ±∞ where one side
    has mass, an atom or a positive density, and the other none).

    The continuous part: log p − log q on the grid (breakpoints and ends included), the best
    grid points refined by bounded minimisation between their neighbours."""
    lo_val, hi_val = math.inf, -math.inf
    mp, mq = _atom_table(P, Q)
    for a, b in zip(mp, mq):
        if a > 0 and b > 0:
            r = math.log(a / b)
            lo_val, hi_val = min(lo_val, r), max(hi_val, r)
        elif a > 0:
            hi_val = math.inf
        elif b > 0:
            lo_val = -math.inf
    lo, hi, grid, _ = _grid(P, Q)
    lp, lq = _logpdf_on(P, grid), _logpdf_on(Q, grid)
    fp, fq = np.isfinite(lp), np.isfinite(lq)
    if np.any(fp & ~fq):
        hi_val = math.inf
    if np.any(fq & ~fp):
        lo_val = -math.inf
    both = fp & fq
    if not np.any(both):
        return lo_val, hi_val
    ratio = np.where(both, lp - np.where(both, lq, 0.0), np.nan)

    def refine(i: int, sign: float) -> float:
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        value = sign * float(ratio[i])
        if b > a:
            def neg(x: float) -> float:
                r = float(_logpdf_on(P, np.array([x]))[0] - _logpdf_on(Q, np.array([x]))[0])
                return -sign * r if math.isfinite(r) else -value

            res = optimize.minimize_scalar(neg, bounds=(a, b), method="bounded",
                                           options={"xatol": 1e-13 * max(1.0, hi - lo)})
            value = max(value, -float(res.fun))
        return sign * value

    hi_val = max(hi_val, refine(int(np.nanargmax(ratio)), 1.0))
    lo_val = min(lo_val, refine(int(np.nanargmin(ratio)), -1.0))
    return lo_val, hi_val


def sup_log_ratio_1d(P: Law1D, Q: Law1D) -> float:
    """sup |log p/q| over the union of the supports (:func:`log_ratio_range_1d`): the ε of
    δ = 0."""
    lo_val, hi_val = log_ratio_range_1d(P, Q)
    return max(hi_val, -lo_val, 0.0)


def hockey_stick_1d(P: Law1D, Q: Law1D, epsilon: float) -> float:
    """H_{e^ε}(P‖Q) = ∫ (p − e^ε q)₊ + Σ_atoms (P{a} − e^ε Q{a})₊ (module docstring)."""
    gamma_log = float(epsilon)
    mp, mq = _atom_table(P, Q)
    total = float(np.sum(np.maximum(mp - math.exp(gamma_log) * mq, 0.0)))
    lo, hi, grid, pts = _grid(P, Q)

    def h(x: np.ndarray) -> np.ndarray:
        lp, lq = _logpdf_on(P, x), _logpdf_on(Q, x)
        with np.errstate(invalid="ignore"):
            out = lp - (gamma_log + lq)
        return np.where(np.isneginf(lp), -np.inf, np.where(np.isneginf(lq), np.inf, out))

    def gpos(x: float) -> float:
        lp = float(_logpdf_on(P, np.array([x]))[0])
        lq = float(_logpdf_on(Q, np.array([x]))[0])
        return max(math.exp(lp) - math.exp(gamma_log + lq), 0.0) if math.isfinite(lp) else 0.0

    positive = h(grid) > 0
    if not np.any(positive):
        return total
    # pieces between the sign changes of p − e^ε q: located on the grid, then by Brent's method
    # where h is finite on both sides; a support edge (h = ±∞ on one side) keeps its grid cell
    # as a piece of its own, always integrated
    cuts, always = [lo], []
    for j in np.flatnonzero(np.diff(positive.astype(np.int8))):
        a, b = float(grid[j]), float(grid[j + 1])
        ha, hb = float(h(np.array([a]))[0]), float(h(np.array([b]))[0])
        if math.isfinite(ha) and math.isfinite(hb):
            cuts.append(optimize.brentq(lambda x: float(h(np.array([x]))[0]), a, b,
                                        xtol=1e-15 * max(1.0, abs(a)), rtol=1e-15))
        else:
            cuts += [a, b]
            always.append((a, b))
    cuts.append(hi)
    inner = np.asarray(pts[1:-1], dtype=float)
    for a, b in zip(cuts[:-1], cuts[1:]):
        if b <= a or ((a, b) not in always and not float(h(np.array([0.5 * (a + b)]))[0]) > 0):
            continue
        split = [a, *inner[(inner > a) & (inner < b)], b]
        for u, v in zip(split[:-1], split[1:]):
            total += _quad(gpos, u, v)
    return total


def epsilon_from_delta_curve(delta_of: Callable[[float], float], delta: float,
                             eps_max: float) -> float:
    """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for a continuous non-increasing curve δ(ε)
    (the larger of the two orders' hockey sticks), given an ε_max where it is ≤ ``delta``
    (the δ = 0 value; +∞ allowed: the bracket is then doubled until δ(ε) ≤ ``delta``, and +∞
    returned if that never happens below 1e3)."""
    if delta_of(0.0) <= delta:
        return 0.0
    hi = eps_max
    if not math.isfinite(hi):
        hi = 1.0
        while delta_of(hi) > delta:
            hi *= 2.0
            if hi > 1e3:
                return math.inf
    if delta_of(hi) > delta:  # rounding at the δ = 0 supremum
        return float(hi)
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def epsilon_1d(P: Law1D, Q: Law1D, delta: float) -> float:
    """ε(δ) of the pair (P, Q) of :class:`Law1D` laws (module docstring), both orders."""
    eps0 = sup_log_ratio_1d(P, Q)
    if delta <= 0:
        return eps0
    return epsilon_from_delta_curve(
        lambda e: max(hockey_stick_1d(P, Q, e), hockey_stick_1d(Q, P, e)), delta, eps0)


def _loss_nodes(P: Law1D, Q: Law1D, panels: int = 4096,
                nodes: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The privacy loss ℓ = log p/q at the nodes of a composite Gauss–Legendre rule on [lo, hi]
    (panels split at the laws' breakpoints) and P's mass at each node (weight × density): a
    discretisation of the law of ℓ under P (continuous laws on one interval, no atoms)."""
    if P.atoms or Q.atoms or (P.lo, P.hi) != (Q.lo, Q.hi):
        raise ValueError("_loss_nodes: continuous laws on the same interval only")
    cuts = np.unique(np.concatenate([[P.lo, P.hi], P.points(), Q.points()]))
    x, w = np.polynomial.legendre.leggauss(nodes)
    per = max(1, panels // (cuts.size - 1))
    xs, ws = [], []
    for a, b in zip(cuts[:-1], cuts[1:]):
        edges = np.linspace(a, b, per + 1)
        half = 0.5 * np.diff(edges)
        mid = 0.5 * (edges[:-1] + edges[1:])
        xs.append((mid[:, None] + half[:, None] * x).ravel())
        ws.append((half[:, None] * w).ravel())
    t, wt = np.concatenate(xs), np.concatenate(ws)
    lp, lq = P.logpdf(t), Q.logpdf(t)
    return lp - lq, wt * np.exp(lp)


def _product_hockey(l1: np.ndarray, m1: np.ndarray, l2: np.ndarray, m2: np.ndarray,
                    epsilon: float) -> float:
    """E[(1 − e^{ε − ℓ₁ − ℓ₂})₊] for independent discrete ℓ₁ (masses m1) and ℓ₂ (m2):
    Σᵢ m1ᵢ·[M(> tᵢ) − e^{tᵢ}·E(> tᵢ)], tᵢ = ε − ℓ₁ᵢ, with M and E the upper cumulative sums of
    m2 and m2·e^{−ℓ₂} over ℓ₂ sorted (O(N log N))."""
    order = np.argsort(l2)
    ls, ms = l2[order], m2[order]
    upper_m = np.concatenate([np.cumsum(ms[::-1])[::-1], [0.0]])
    upper_e = np.concatenate([np.cumsum((ms * np.exp(-ls))[::-1])[::-1], [0.0]])
    t = epsilon - l1
    j = np.searchsorted(ls, t, side="right")
    return float(np.sum(m1 * np.maximum(upper_m[j] - np.exp(t) * upper_e[j], 0.0)))


def epsilon_product_2(P: Sequence[Law1D], Q: Sequence[Law1D], delta: float) -> float:
    """ε(δ) of two product laws P₁ ⊗ P₂ and Q₁ ⊗ Q₂ (continuous, each pair on one interval):
    the privacy loss is ℓ₁(x₁) + ℓ₂(x₂) with independent terms. δ = 0: the sums of the
    coordinates' suprema and infima (:func:`log_ratio_range_1d`). δ > 0: the law of each ℓⱼ
    under Pⱼ discretised on 16 384 Gauss–Legendre nodes (:func:`_loss_nodes`; Qⱼ's masses are
    Pⱼ's times e^{−ℓⱼ}), the two-term hockey sticks summed exactly over the node pairs
    (:func:`_product_hockey`); the nodes' quadrature error is O(h²) at the kink of (·)₊."""
    if len(P) != 2 or len(Q) != 2:
        raise ValueError("epsilon_product_2: two coordinates")
    ranges = [log_ratio_range_1d(a, b) for a, b in zip(P, Q, strict=True)]
    eps0 = max(sum(hi for _, hi in ranges), -sum(lo for lo, _ in ranges), 0.0)
    if delta <= 0:
        return eps0
    (l1, m1), (l2, m2) = (_loss_nodes(a, b) for a, b in zip(P, Q, strict=True))
    q1, q2 = m1 * np.exp(-l1), m2 * np.exp(-l2)

    def delta_of(e: float) -> float:
        return max(_product_hockey(l1, m1, l2, m2, e), _product_hockey(-l1, q1, -l2, q2, e))

    return epsilon_from_delta_curve(delta_of, delta, eps0)


def hockey_stick_pieces(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """H_{e^ε}(P‖Q) = Σⱼ (Pⱼ − e^ε Qⱼ)₊ for pieces of constant density ratio."""
    return float(np.sum(np.maximum(np.asarray(p) - math.exp(epsilon) * np.asarray(q), 0.0)))


def epsilon_pieces(p: np.ndarray, q: np.ndarray, delta: float, *, log: bool = False) -> float:
    """ε(δ) of two laws given by their masses on pieces where the density ratio is constant
    (atoms, or cells where both densities are constant): exact sums, Brent's method for δ > 0.
    With ``log`` the masses are given as logs (−∞ for none), so that pieces of masses far below
    the smallest float keep their exact ratio in the δ = 0 supremum. Pieces with no mass on
    either side are ignored; mass on one side only gives ε(0) = +∞."""
    lp = np.asarray(p, dtype=float) if log else _log(np.asarray(p, dtype=float))
    lq = np.asarray(q, dtype=float) if log else _log(np.asarray(q, dtype=float))
    has_p, has_q = lp > -np.inf, lq > -np.inf
    both = has_p & has_q
    eps0 = math.inf if np.any(has_p != has_q) else (
        float(np.max(np.abs(lp[both] - lq[both]))) if np.any(both) else 0.0)
    if delta <= 0:
        return eps0
    mp, mq = np.exp(lp), np.exp(lq)
    return epsilon_from_delta_curve(
        lambda e: max(hockey_stick_pieces(mp, mq, e), hockey_stick_pieces(mq, mp, e)), delta, eps0)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)
