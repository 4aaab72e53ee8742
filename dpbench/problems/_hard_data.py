"""The "hard" data sets shared by LB-Lin and LB-Quad (docs/instances.md, 'Hard data').

BST14 Lemma 5.1 (proof in its Appendix C) builds its worst cases from k copies of one codeword
μ ∈ {±1/√p}ᵖ padded with ±c pairs that cancel in Σdᵢ. Here:

* μ is a uniform random sign vector (the mechanisms benchmarked are equivariant under coordinate
  sign flips and permutations, so one random codeword is as hard as any [derived]);
* k = round(signal·n) rows equal μ (half-up rounding, at least one row when signal > 0), or
  k = min(n, signal_count) when ``signal_count`` is given: k of the order of the lemma's M ≈ p/ε, a
  signal M ≈ k that does not grow with n (the instance where the min(n, p/ε) bounds bind for
  every n);
* the other n − k rows are ⌈(n − k)/2⌉ copies of a second random sign vector c and ⌊(n − k)/2⌋
  copies of −c, so they cancel exactly when n − k is even and leave one c otherwise;
* every row is scaled to Euclidean norm ``norm``, so the universe is {±norm/√p}ᵖ.

``signal`` drives the signal sweep of docs/instances.md: M = ‖Σdᵢ‖ is about k·norm, and signal = 1
gives M = n·norm (the E1 instance). Rows are stored in block order (codeword rows first); the
mechanisms sample rows uniformly, so the order carries no information.

``data = "fingerprinting"`` ([derived] from Bun–Ullman–Vadhan's fingerprinting codes)
replaces the k codeword copies by k rows whose column j is +norm/√p with a Tardos
arcsine-distributed probability bⱼ, for the approximate-DP lower bounds (Thm 5.3/5.5); the
padding is the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.params import Param

__all__ = ["HardData", "hard_data", "signal_rows", "tardos_biases", "HARD_DATA_PARAMS"]

HARD_DATA_PARAMS: dict[str, Param] = {
    "signal": Param(1.0, low=0.0, high=1.0,
                    doc="fraction of rows equal to the codeword (1: M = n·‖d‖, BST14 Lemma 5.1)"),
    "signal_count": Param(None, kind="int", low=1, none="use the fraction 'signal'",
                          identity_of_none=0,
                          doc="exactly min(n, signal_count) codeword rows (M fixed as n grows, of "
                              "the order p/ε of BST14 Lemma 5.1)"),
    "data": Param("packing", kind="str", choices=("packing", "fingerprinting"),
                  doc="signal rows: copies of one codeword (pure DP) or Tardos-style biased "
                      "rows (approximate DP), BST14 Lemma 5.1; docs/instances.md"),
}


@dataclass(frozen=True)
class HardData:
    """A hard data set: rows ``X`` (n, p) plus the codeword, the padding vector and k."""

    X: np.ndarray
    codeword: np.ndarray
    padding: np.ndarray
    k: int
    signal_sum: np.ndarray | None = None

    def meta(self) -> dict[str, Any]:
        """Dataset metadata: k, M = ‖Σdᵢ‖ and the two sign vectors.

        M is computed from the structure, Σdᵢ = k·μ + ((n − k) mod 2)·c, so that the cancelling
        padding contributes exactly zero (a floating-point row sum leaves ≈1e-15).
        """
        n = self.X.shape[0]
        signal = self.k * self.codeword if self.signal_sum is None else self.signal_sum
        total = signal + ((n - self.k) % 2) * self.padding
        return {"k": self.k, "M": float(np.linalg.norm(total)),
                "codeword": self.codeword, "padding": self.padding}


def signal_rows(n: int, signal: float, count: int | None = None) -> int:
    """k = min(n, count) when count is given; else round(signal·n), rounding halves up, at least 1
    when signal > 0, at most n."""
    if count is not None:
        return min(n, count)
    if signal <= 0:
        return 0
    return min(n, max(1, math.floor(signal * n + 0.5)))


def _sign_vector(p: int, norm: float, rng: np.random.Generator) -> np.ndarray:
    """A uniform random vector of {±norm/√p}ᵖ."""
    return (2.0 * rng.integers(0, 2, size=p) - 1.0) * (norm / math.sqrt(p))


def tardos_biases(p: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Column biases from the arcsine density ∝ 1/√(b(1 − b)) on [t, 1 − t], t = 1/(10k).

    Tardos (2003) draws b = sin²(r), r uniform on [t′, π/2 − t′] with sin²(t′) = t; his cutoff is
    1/(300c) for c colluders, the milder 1/(10k) here is a choice of this benchmark ([derived];
    docs/instances.md, 'Hard data').
    """
    t = 1.0 / (10.0 * max(k, 1))
    lo = math.asin(math.sqrt(t))
    return np.sin(rng.uniform(lo, 0.5 * math.pi - lo, size=p)) ** 2


def _fingerprinting(n: int, p: int, rng: np.random.Generator, norm: float,
                    signal: float, count: int | None = None) -> HardData:
    """Fingerprinting-inspired instance [derived]: k = round(signal·n) rows with entry j
    equal to +norm/√p with probability bⱼ (Tardos biases) and −norm/√p otherwise, then ±c padding.

    Draws, in order: the biases, the padding vector, the k×p entry uniforms. ``codeword`` is the
    expected signal row (2b − 1)·norm/√p.
    """
    k = signal_rows(n, signal, count)
    biases = tardos_biases(p, k, rng)
    padding = _sign_vector(p, norm, rng)
    signs = np.where(rng.random((k, p)) < biases, 1.0, -1.0)
    rows = signs * (norm / math.sqrt(p))
    plus = (n - k + 1) // 2
    X = np.empty((n, p))
    X[:k] = rows
    X[k:k + plus] = padding
    X[k + plus:] = -padding
    codeword = (2.0 * biases - 1.0) * (norm / math.sqrt(p))
    return HardData(X=X, codeword=codeword, padding=padding, k=k, signal_sum=rows.sum(axis=0))


def hard_data(n: int, p: int, rng: np.random.Generator, norm: float, signal: float,
              data: str = "packing", count: int | None = None) -> HardData:
    """Draw the hard data set: k signal rows, then ±c padding (see the module docstring).

    ``data="packing"``: k copies of one random codeword; ``"fingerprinting"``: k Tardos-biased
    random rows (:func:`_fingerprinting`).
    """
    if data == "fingerprinting":
        return _fingerprinting(n, p, rng, norm, signal, count)
    if data != "packing":
        raise ValueError(f"hard_data: data must be 'packing' or 'fingerprinting', got {data!r}")
    codeword = _sign_vector(p, norm, rng)
    padding = _sign_vector(p, norm, rng)
    k = signal_rows(n, signal, count)
    plus = (n - k + 1) // 2
    X = np.empty((n, p))
    X[:k] = codeword
    X[k:k + plus] = padding
    X[k + plus:] = -padding
    return HardData(X=X, codeword=codeword, padding=padding, k=k)
