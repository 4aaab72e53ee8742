"""The BST14 §4.4 "hard" data sets shared by LB-Lin and LB-Quad.

Lemma 5.1 (spec §4.1) builds its worst cases from k copies of one codeword μ ∈ {±1/√p}ᵖ padded with
±c pairs that cancel in Σdᵢ. Here:

* μ is a uniform random sign vector (the mechanisms benchmarked are equivariant under coordinate
  sign flips and permutations, so one random codeword is as hard as any, spec §4.4);
* k = round(signal·n) rows equal μ (half-up rounding, at least one row when signal > 0);
* the other n − k rows are ⌈(n − k)/2⌉ copies of a second random sign vector c and ⌊(n − k)/2⌋
  copies of −c, so they cancel exactly when n − k is even and leave one c otherwise;
* every row is scaled to Euclidean norm ``norm``, so the universe is {±norm/√p}ᵖ.

``signal`` plays the role of the spec's signal sweep: M = ‖Σdᵢ‖ is about k·norm, and signal = 1
gives M = n·norm (the E1 instance). Rows are stored in block order (codeword rows first); the
mechanisms sample rows uniformly, so the order carries no information.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..params import Param

__all__ = ["HardData", "hard_data", "signal_rows", "HARD_DATA_PARAMS"]

HARD_DATA_PARAMS: dict[str, Param] = {
    "signal": Param(1.0, low=0.0, high=1.0,
                    doc="fraction of rows equal to the codeword (1: M = n·‖d‖, BST14 §4.4)"),
}


@dataclass(frozen=True)
class HardData:
    """A hard data set: rows ``X`` (n, p) plus the codeword, the padding vector and k."""

    X: np.ndarray
    codeword: np.ndarray
    padding: np.ndarray
    k: int

    def meta(self) -> dict[str, Any]:
        """Dataset metadata: k, M = ‖Σdᵢ‖ and the two sign vectors.

        M is computed from the structure, Σdᵢ = k·μ + ((n − k) mod 2)·c, so that the cancelling
        padding contributes exactly zero (a floating-point row sum leaves ≈1e-15).
        """
        n = self.X.shape[0]
        total = self.k * self.codeword + ((n - self.k) % 2) * self.padding
        return {"k": self.k, "M": float(np.linalg.norm(total)),
                "codeword": self.codeword, "padding": self.padding}


def signal_rows(n: int, signal: float) -> int:
    """k = round(signal·n), rounding halves up, at least 1 when signal > 0, at most n."""
    if signal <= 0:
        return 0
    return min(n, max(1, math.floor(signal * n + 0.5)))


def _sign_vector(p: int, norm: float, rng: np.random.Generator) -> np.ndarray:
    """A uniform random vector of {±norm/√p}ᵖ."""
    return (2.0 * rng.integers(0, 2, size=p) - 1.0) * (norm / math.sqrt(p))


def hard_data(n: int, p: int, rng: np.random.Generator, norm: float, signal: float) -> HardData:
    """Draw the §4.4 hard data set: k codeword rows, then ±c padding (see the module docstring)."""
    codeword = _sign_vector(p, norm, rng)
    padding = _sign_vector(p, norm, rng)
    k = signal_rows(n, signal)
    plus = (n - k + 1) // 2
    X = np.empty((n, p))
    X[:k] = codeword
    X[k:k + plus] = padding
    X[k + plus:] = -padding
    return HardData(X=X, codeword=codeword, padding=padding, k=k)
