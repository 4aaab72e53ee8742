"""Many exact rejection draws at once: the drivers of the exact samplers' vectorised forms.

An exact sampler's vectorised form (``draw.many`` / ``draw.many_at``,
:mod:`dpbench.core.exact_samplers`) draws ``size`` independent samples where the single draw
loops over proposals until one is accepted. Both drivers below keep that law exactly; only the
number of proposals drawn at once depends on the observed acceptance rate (the running time,
never the output law).

* :func:`fill_accepted`, one target law for every row: proposals are drawn in batches, and the
  accepted ones, in the order drawn, are the samples. The accepted proposals of an exact
  rejection sampler are i.i.d. from its target whatever the batch sizes, so the first ``size`` of
  them are ``size`` independent exact draws.
* :func:`first_accepted_rows`, a law per row (e.g. a localised region C ∩ B(θ₀ᵢ, r₀) whose centre
  θ₀ᵢ is row i's private first release, BST14 Algorithm 4): every row still pending gets ``t``
  fresh proposals of its own per round and keeps its first accepted one. Row i's sample is the
  first acceptance of its own i.i.d. proposal sequence, which is what the single draw returns on
  row i's law; the sequences of different rows are disjoint draws, so the rows are independent
  (``t`` adapts to the rows' acceptances, but every proposal is fresh when it is drawn).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["fill_accepted", "first_accepted_rows", "MAX_BATCH"]

#: Largest number of proposals drawn in one round (bounds the memory of a round).
MAX_BATCH = 1 << 20
_MIN_BATCH = 64


def fill_accepted(propose: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]],
                  rng: np.random.Generator, size: int, *, max_proposals: int,
                  what: str) -> np.ndarray:
    """The first ``size`` accepted proposals of ``propose(rng, m) -> (points, keep)`` (points of
    shape (m, ...), ``keep`` the (m,) acceptance flags), in the order drawn.

    Raises ``RuntimeError`` when ``max_proposals`` proposals in a row are all rejected (the
    single draw's guard: a region of negligible mass).
    """
    parts: list[np.ndarray] = []
    filled, proposed, accepted, since_last = 0, 0, 0, 0
    m = max(size, _MIN_BATCH)
    while filled < size:
        need = size - filled
        if proposed:  # about 1.2× the proposals the remaining draws need at the observed rate
            m = math.ceil(1.2 * need * proposed / accepted) + _MIN_BATCH if accepted else 4 * m
        m = min(m, MAX_BATCH)
        points, keep = propose(rng, m)
        hits = np.flatnonzero(keep)
        proposed += m
        accepted += hits.size
        since_last = 0 if hits.size else since_last + m
        if since_last >= max_proposals:
            raise RuntimeError(f"{what}: no acceptance in {since_last} proposals (the region "
                               "has negligible mass)")
        take = hits[:need]
        parts.append(points[take])
        filled += take.size
    return np.concatenate(parts, axis=0)


def first_accepted_rows(
        propose_rows: Callable[[np.random.Generator, np.ndarray, int],
                               tuple[np.ndarray, np.ndarray]],
        rng: np.random.Generator, size: int, p: int, *, max_proposals: int,
        what: str) -> np.ndarray:
    """``size`` rows, row i the first accepted proposal of its own sequence.

    ``propose_rows(rng, rows, t) -> (points, keep)`` draws ``t`` fresh proposals for each row of
    ``rows`` (points of shape (len(rows), t, p), ``keep`` of shape (len(rows), t)). Raises
    ``RuntimeError`` when a row has ``max_proposals`` proposals without an acceptance.
    """
    out = np.empty((size, p))
    pending = np.arange(size)
    t, tried = 1, 0
    while pending.size:
        points, keep = propose_rows(rng, pending, t)
        hit = keep.any(axis=1)
        first = np.argmax(keep, axis=1)
        done = np.flatnonzero(hit)
        out[pending[done]] = points[done, first[done]]
        tried += t
        rate = float(keep.sum()) / keep.size
        pending = pending[~hit]
        if not pending.size:
            break
        if tried >= max_proposals:
            raise RuntimeError(f"{what}: {pending.size} row(s) without an acceptance in {tried} "
                               "proposals (the region has negligible mass)")
        wanted = 4 * t if rate == 0 else math.ceil(1.0 / rate)
        t = int(max(1, min(wanted, MAX_BATCH // pending.size, max_proposals - tried)))
    return out
