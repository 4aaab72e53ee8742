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
