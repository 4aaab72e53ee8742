"""The data universe of a problem at dimension p: the records its constants are proved over.

A problem's declared constants (L, the data norm a mechanism calibrates with, …) hold for every
record of its *universe*; a privacy claim covers neighbouring datasets whose records lie in it.
The audit must therefore build its neighbouring pairs inside the universe, and at its edge
(docs/audit.md, "Universes and canaries"). :class:`Universe` describes the universes dpbench
knows: a Euclidean ball ‖x‖₂ ≤ ``radius`` (``data_norm``) intersected with a box
``low ≤ x ≤ high`` (per coordinate, anywhere: ``[0, 1]^p`` as well as the centred cube
``‖x‖∞ ≤ c`` of ``data_norm_inf``), either part possibly absent, and a label bound.

:meth:`dpbench.core.problem.Problem.universe` returns it; the default builds it from
:meth:`~dpbench.core.problem.Problem.data_bounds` (``data_norm``, ``data_norm_inf``, and the
scalar box bounds ``feature_low`` / ``feature_high``); a problem whose universe depends on p
(a radius √p for features in [0, 1]^p) or has per-coordinate bounds overrides ``universe(p)``.

The operations the canaries need, each exact for ball ∩ box:

* :meth:`Universe.extreme` — the record farthest along a direction u, argmax ⟨x, u⟩: by the KKT
  conditions x = clip(t·u, low, high) with t ∈ (0, ∞] the largest value keeping ‖x‖₂ ≤ radius
  (t = ∞: the box's vertex along u, when it lies in the ball);
* :meth:`Universe.nearest` — the record nearest a point (for the "origin" record of the ``zero``
  canary: 0 itself when the universe holds it);
* :meth:`Universe.contains`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Universe"]

_TOL = 1e-12


def _as_bound(value: float | np.ndarray | None, p: int, default: float) -> np.ndarray:
    if value is None:
        return np.full(p, default)
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return np.full(p, float(arr))
    if arr.shape != (p,):
        raise ValueError(f"a box bound must be a number or {p} numbers, got shape {arr.shape}")
    return arr.copy()


@dataclass(frozen=True)
class Universe:
    """The data universe at dimension ``p``: {x : ‖x‖₂ ≤ radius, low ≤ x ≤ high}, labels in
    [−label_bound, label_bound]. ``radius`` is ``inf`` without a ball; ``low``/``high`` are
    ``-inf``/``inf`` without a box."""

    p: int
    radius: float = math.inf
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    label_bound: float = math.inf

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", _as_bound(self.low, self.p, -math.inf))
        object.__setattr__(self, "high", _as_bound(self.high, self.p, math.inf))
        if not (self.radius > 0):
            raise ValueError(f"the universe's radius must be > 0, got {self.radius!r}")
        if np.any(self.low > self.high):
            raise ValueError("the universe's box is empty (some low > high)")
        if float(np.linalg.norm(self.nearest_box(np.zeros(self.p)))) > self.radius * (1 + 1e-9):
            raise ValueError("the universe is empty: its box lies outside its ball")

    # --- properties ------------------------------------------------------------------------
    @property
    def bounded(self) -> bool:
        """Whether every record has a finite norm (a finite ball, or a finite box)."""
        return math.isfinite(self.radius) or bool(np.all(np.isfinite(self.low))
                                                   and np.all(np.isfinite(self.high)))

    @property
    def has_box(self) -> bool:
        return bool(np.any(np.isfinite(self.low)) or np.any(np.isfinite(self.high)))

    @property
    def symmetric(self) -> bool:
        """Whether x ↦ −x maps the universe onto itself (a centred ball and box)."""
        return bool(np.allclose(self.low, -self.high, rtol=0, atol=_TOL)
                    or not self.has_box)

    @property
    def norm_bound(self) -> float:
        """The largest norm of a record (the radius, or the box's farthest vertex inside it)."""
        corner = np.maximum(np.abs(self.low), np.abs(self.high))
        return float(min(self.radius, np.linalg.norm(corner)))

    # --- operations ------------------------------------------------------------------------
    def nearest_box(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(x, dtype=float), self.low, self.high)

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(np.all(x >= self.low - tol) and np.all(x <= self.high + tol)
                    and float(np.linalg.norm(x)) <= self.radius * (1 + tol) + tol)

    def nearest(self, x: np.ndarray) -> np.ndarray:
        """The record of the universe nearest ``x`` (Euclidean), found by Dykstra's alternating
        projections onto the box and the ball (exact when ``x`` is already inside either)."""
        x = np.asarray(x, dtype=float)
        if self.contains(x, tol=0.0):
            return x.copy()
        y, p_box, q_ball = x.copy(), np.zeros_like(x), np.zeros_like(x)
        for _ in range(10_000):
            z = self.nearest_box(y + p_box)
            p_box = y + p_box - z
            w = z + q_ball
            norm = float(np.linalg.norm(w))
            y_new = w if norm <= self.radius else w * (self.radius / norm)
            q_ball = w - y_new
            if float(np.linalg.norm(y_new - y)) <= 1e-14 * max(1.0, float(np.linalg.norm(y))):
                y = y_new
                break
            y = y_new
        return y

    def extreme(self, u: np.ndarray) -> np.ndarray:
        """argmax ⟨x, u⟩ over the universe (module docstring): the record farthest along u.
        Raises ``ValueError`` when the universe is unbounded along u."""
        u = np.asarray(u, dtype=float)
        # along a coordinate with u_j = 0 every value is optimal: the upper face (as sign(0) = +1)
        # when it is finite, so that the record stays at the universe's edge
        flat = np.where(np.isfinite(self.high), self.high, self.nearest_box(0 * u))
        vertex = np.where(u > 0, self.high, np.where(u < 0, self.low, flat))
        if np.all(np.isfinite(vertex)) and float(np.linalg.norm(vertex)) <= self.radius:
            return vertex
        if not math.isfinite(self.radius):
            raise ValueError("the universe is unbounded along the canary's direction")
        if not self.has_box:
            return self.radius * u / float(np.linalg.norm(u))

        def norm_at(t: float) -> float:
            return float(np.linalg.norm(self.nearest_box(t * u)))

        lo, hi = 0.0, 1.0
        while norm_at(hi) < self.radius:
            hi *= 2.0
            if hi > 1e300:
                break
        for _ in range(200):  # ‖clip(t·u)‖ is nondecreasing in t: bisection to the ball
            mid = 0.5 * (lo + hi)
            if norm_at(mid) <= self.radius:
                lo = mid
            else:
                hi = mid
        return self.nearest_box(lo * u)
