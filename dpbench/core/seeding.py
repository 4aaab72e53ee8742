"""Deterministic seeding keyed by identity, never by execution order.

Every random stream comes from ``numpy.random.SeedSequence([*sha256_words(identity), root_seed])``
with an explicit ``PCG64`` bit generator (``default_rng`` may change its generator across numpy
versions). The identity is canonical JSON (sorted keys, no whitespace, floats by ``repr``), hashed
with SHA-256; Python's ``hash()`` (salted per process) and ``dask.base.tokenize`` (changed across
dask releases) are never used. Varying words come before the root seed, as numpy recommends.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np


def _to_builtin(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot canonicalise {type(obj).__name__}")


def _normalise(obj: Any) -> Any:
    """Make floats canonical (1 and 1.0 hash alike; inf/nan spelled out)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        if math.isfinite(f) and f == int(f) and abs(f) < 2**53:
            return int(f)
        return repr(f) if not math.isfinite(f) else f
    if isinstance(obj, dict):
        return {str(k): _normalise(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_normalise(v) for v in obj]
    return _normalise(_to_builtin(obj))


def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes of ``obj``: equal values give equal bytes on every platform."""
    return json.dumps(_normalise(obj), sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def stable_hash(obj: Any) -> str:
    """Hex SHA-256 of the canonical form."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def id_words(obj: Any) -> list[int]:
    """Eight little-endian uint32 words of the SHA-256 of the canonical form."""
    return np.frombuffer(hashlib.sha256(canonical(obj)).digest(), dtype="<u4").tolist()


def make_rng(identity: Any, root_seed: int) -> np.random.Generator:
    """A ``Generator(PCG64)`` determined only by ``identity`` and ``root_seed``."""
    seq = np.random.SeedSequence([*id_words(identity), int(root_seed)])
    return np.random.Generator(np.random.PCG64(seq))


class SeedTemplate:
    """The streams of an identity that varies only in one integer (a cell's ``seed``), with the
    canonical JSON computed once.

    ``make(seed)`` builds the identity. The canonical bytes are computed once for a sentinel
    seed and split around it; :meth:`words` then splices in a seed's decimal digits — exactly
    the bytes :func:`canonical` gives for that identity, since integers are written as their
    decimal digits — and hashes them. So ``rng(seed, root)`` equals
    ``make_rng(make(seed), root)`` bit for bit, at the cost of one SHA-256 per cell. If the
    sentinel does not occur exactly once (a parameter happens to hold it), every call falls
    back to the full computation.
    """

    _SENTINEL = -7_340_917_552_618_923_311

    def __init__(self, make: Callable[[int], Any]) -> None:
        self._make = make
        parts = canonical(make(self._SENTINEL)).split(str(self._SENTINEL).encode())
        self._parts: tuple[bytes, bytes] | None = (parts[0], parts[1]) if len(parts) == 2 \
            else None

    def _digest(self, seed: int) -> bytes:
        if self._parts is None:
            return hashlib.sha256(canonical(self._make(seed))).digest()
        head, tail = self._parts
        return hashlib.sha256(head + str(int(seed)).encode() + tail).digest()

    def hexdigest(self, seed: int) -> str:
        """:func:`stable_hash` of ``make(seed)``."""
        return self._digest(seed).hex()

    def words(self, seed: int) -> list[int]:
        """:func:`id_words` of ``make(seed)``."""
        return np.frombuffer(self._digest(seed), dtype="<u4").tolist()

    def rng(self, seed: int, root_seed: int) -> np.random.Generator:
        """:func:`make_rng` of ``make(seed)``."""
        seq = np.random.SeedSequence([*self.words(seed), int(root_seed)])
        return np.random.Generator(np.random.PCG64(seq))


def data_identity(problem: str, problem_params: dict[str, Any], n: int, p: int,
                  seed: int) -> dict[str, Any]:
    """Identity of a dataset. It omits the algorithm, ε, δ and the experiment, so every mechanism
    at the same (problem, n, p, seed) sees the same data: comparisons are paired."""
    return {"stream": "data", "problem": problem, "params": problem_params, "n": n, "p": p,
            "seed": seed}


def mechanism_identity(algorithm: str, algorithm_params: dict[str, Any], data_id: dict[str, Any],
                       point: dict[str, Any]) -> dict[str, Any]:
    """Identity of a mechanism's randomness at one cell (independent of labels and packing)."""
    return {"stream": "mechanism", "algorithm": algorithm, "params": algorithm_params,
            "data": data_id, "point": point}
