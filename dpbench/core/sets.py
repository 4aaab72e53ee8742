"""Constraint sets C with projection, membership and diameter.

BST14 §1.3: ‖C‖ is the **diameter** (not the radius); every privacy calibration that uses ‖C‖ must
read :attr:`ConstraintSet.diameter`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class ConstraintSet:
    """A closed bounded convex set in R^p. Subclasses implement the three oracles."""

    def project(self, theta: np.ndarray) -> np.ndarray:
        """Euclidean projection; ``theta`` may be (p,) or a batch (m, p)."""
        raise NotImplementedError

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        """Membership oracle (up to ``tol``)."""
        raise NotImplementedError

    @property
    def diameter(self) -> float:
        """‖C‖ = sup ‖x − y‖ over x, y in C."""
        raise NotImplementedError

    def center(self, p: int) -> np.ndarray:
        """A data-independent point of C, used as the start of iterative mechanisms."""
        raise NotImplementedError


@dataclass(frozen=True)
class Ball(ConstraintSet):
    """The Euclidean ball of ``radius`` centred at the origin."""

    radius: float = 1.0

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.ndim == 1:  # the hot path of iterative mechanisms: one vector per step
            norm1 = math.sqrt(float(theta.dot(theta)))
            return theta if norm1 <= self.radius else theta * (self.radius / norm1)
        norm = np.linalg.norm(theta, axis=-1, keepdims=True)
        scale = np.minimum(1.0, self.radius / np.maximum(norm, np.finfo(float).tiny))
        return theta * scale

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        return np.linalg.norm(np.asarray(theta, dtype=float), axis=-1) <= self.radius * (1 + tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return np.zeros(p)

    def sample_uniform(self, p: int, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of the ball: a data-independent start (docs/langevin.md)."""
        return _uniform_in_ball(p, self.radius, rng)


def _uniform_in_ball(p: int, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform in B(0, radius) ⊂ R^p: a uniform direction times radius·U^{1/p}."""
    g = rng.standard_normal(p)
    g /= max(math.sqrt(float(g @ g)), np.finfo(float).tiny)
    return g * (radius * rng.random() ** (1.0 / p))


@dataclass(frozen=True)
class Box(ConstraintSet):
    """The cube [−r/√p, r/√p]^p inscribed in the ball of radius ``radius`` r (GTU §5 F2).

    Scaling the half-width by 1/√p keeps the diameter 2r fixed in p-sweeps (our rule: a cube
    of fixed side has a diameter growing like √p, which would bend p-slopes). ``half_width(p)`` is
    the side half-length.
    """

    radius: float = 1.0

    def half_width(self, p: int) -> float:
        return self.radius / math.sqrt(p)

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        a = self.half_width(theta.shape[-1])
        return np.clip(theta, -a, a)

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        theta = np.asarray(theta, dtype=float)
        a = self.half_width(theta.shape[-1])
        return np.max(np.abs(theta), axis=-1) <= a * (1 + tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return np.zeros(p)

    def sample_uniform(self, p: int, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of the cube (a data-independent start, GTU Lemma B.5)."""
        a = self.half_width(p)
        return rng.uniform(-a, a, size=p)


class BallAt(ConstraintSet):
    """The Euclidean ball of ``radius`` centred at ``center`` (a fixed vector).

    Used for localisation (BST14 Algorithm 4): C₀ = C ∩ B(θ₀, r₀) with a *private* θ₀ and a
    data-independent r₀.
    """

    def __init__(self, center: np.ndarray, radius: float) -> None:
        self.center_point = np.array(center, dtype=float)
        self.center_point.flags.writeable = False
        self.radius = float(radius)

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return self.center_point + Ball(self.radius).project(theta - self.center_point)

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        return Ball(self.radius).contains(np.asarray(theta, dtype=float) - self.center_point, tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return self.center_point.copy()

    def sample_uniform(self, p: int, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of the ball (a data-independent start when the centre is public)."""
        return self.center_point + _uniform_in_ball(p, self.radius, rng)


class Intersection(ConstraintSet):
    """C₁ ∩ C₂ ∩ … of balls (``Ball`` or ``BallAt``), assumed non-empty.

    Projection by Dykstra's alternating projections (Boyle and Dykstra 1986), run to a fixed tolerance;
    membership is the conjunction; the diameter is bounded by the smallest member's diameter (the
    public bound ‖C₀‖ ≤ 2r₀ of BST14 Algorithm 4). ``center`` is the point where iterative
    mechanisms start: the projection of the last member's centre, a post-processing of whatever
    made the sets (for localisation: of the private θ₀).
    """

    def __init__(self, *sets: ConstraintSet, tol: float = 1e-12, max_iter: int = 10_000) -> None:
        if not sets:
            raise ValueError("Intersection needs at least one set")
        self.sets = tuple(sets)
        self.tol = tol
        self.max_iter = max_iter

    def balls(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Centres (m, p) and radii (m,) of the member balls (for compiled kernels)."""
        centers, radii = [], []
        for s in self.sets:
            if isinstance(s, Ball):
                centers.append(np.zeros(p))
            elif isinstance(s, BallAt):
                centers.append(s.center_point)
            else:
                raise TypeError(f"Intersection.balls: {type(s).__name__} is not a ball")
            radii.append(s.radius)
        return np.array(centers, dtype=float), np.array(radii, dtype=float)

    def _project_one(self, x: np.ndarray) -> np.ndarray:
        if all(s.contains(x, tol=0.0) for s in self.sets):
            return x
        y = x.copy()
        corrections = [np.zeros_like(x) for _ in self.sets]
        for _ in range(self.max_iter):
            prev = y
            for j, s in enumerate(self.sets):
                z = s.project(y + corrections[j])
                corrections[j] = y + corrections[j] - z
                y = z
            if float(np.linalg.norm(y - prev)) <= self.tol * (1.0 + float(np.linalg.norm(y))):
                break
        # Dykstra converges to the projection; finish with a feasibility-restoring pass so the
        # result is inside every set up to rounding.
        for s in self.sets:
            y = s.project(y)
        return y

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.ndim == 1:
            return self._project_one(theta)
        return np.stack([self._project_one(row) for row in theta])

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        theta = np.asarray(theta, dtype=float)
        out = self.sets[0].contains(theta, tol)
        for s in self.sets[1:]:
            out = np.logical_and(out, s.contains(theta, tol))
        return out if theta.ndim > 1 else bool(out)

    @property
    def diameter(self) -> float:
        return min(s.diameter for s in self.sets)

    def center(self, p: int) -> np.ndarray:
        return self.project(self.sets[-1].center(p))
