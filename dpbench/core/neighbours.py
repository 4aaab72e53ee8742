"""Worst-case neighbouring pairs (canaries) for the privacy audit.

A :class:`NeighbourPair` is two replace-one neighbours D, D′ (same n, exactly one row differs)
and a unit score direction fixed BEFORE any mechanism run; the audit scores a release θ by
⟨θ, direction⟩. Everything here is a function of the problem's generated data only (the auditor
is not private, so it may solve the non-private problem), never of mechanism outputs.

Canaries (docs/audit.md, 'How the auditor works'; Jagielski, Ullman, Oprea 2020 for
poisoning-style canaries; Nasr et al. 2021 for worst-case neighbours):

* ``sphere`` — D = the generated rows with row 0 replaced by the canary c = r·u, where r is the
  data norm (the declared ``data_norm``, the radius of the universe, when finite; else the max
  row norm of the generated data. A sample of n rows may fall well short of the declared radius,
  e.g. ``mean_est`` at n = 2, and a canary there could not reveal a noise scale calibrated for
  a smaller norm) and u the unit direction of the non-private optimum θ̂* of D's OTHER
  rows (``problem.solve``; e₁ when θ̂* = 0); labels: y = +1. D′ replaces the canary by its
  negation −c (same label). The negation, not a base row, is used: it maximises ‖c − c′‖ = 2r,
  the replace-one worst case of a Lipschitz gradient bound, and it pushes the optimum against the
  rest of the data. A problem whose universe is not a ball declares the cube it lies in
  (``data_norm_inf``, e.g. ``lasso_linf``'s ‖x‖∞ ≤ 1): c is then the universe's farthest record
  along u (:func:`extreme_record`; a vertex sign(u) of the cube there), never a record outside
  the universe that the problem's constants are proved over (which would let the audit flag a
  correct mechanism).
* ``label_flip`` — D as for ``sphere``; D′ keeps the canary's features and flips its label
  (needs a labelled problem). For margin losses φ(y⟨θ, x⟩) this pair has the same losses as
  ``sphere``'s (−x with y ≡ x with −y); it differs for other labelled losses.
* ``lower_bound`` — the problem's own generated data, D′ with row 0 negated (labels kept): the
  construction of the BST14 lower-bound instances and of the check harness
  (:func:`negated_row_pair`, shared with :mod:`dpbench.testing`).
* ``zero`` — D as for ``sphere``; D′ replaces the canary by the zero record (same label). For a
  margin loss φ(y⟨θ, x⟩) the negation and the label flip leave the canary's Hessian φ''·xxᵀ
  unchanged (φ'' is even), so those pairs never exercise the Jacobian (curvature) term of
  objective perturbation's privacy proof (Chaudhuri–Monteleoni–Sarwate 2011, Thm 9); this pair
  changes it by the whole rank-one term (docs/diffprivlib.md, where it is the pair that shows a
  mis-scaled correction). Applies to problems that declare a finite ``data_norm``: the ball
  ‖x‖ ≤ data_norm, zero included, is then the universe the constants are proved over.
* ``outlier`` — like ``sphere`` with the canary at norm ``OUTLIER_FACTOR``·r, far outside the
  declared data norm. No mechanism is private for such a record unless it enforces the bound
  itself, so the canary applies only to algorithms declaring ``clips_gradients = True``
  (:func:`canary_not_applicable_reason`); it catches a removed clipping step.

Score direction: the unit vector of θ̂*(D′) − θ̂*(D) (both non-private optima, output
independent); the canary's own direction when the optima coincide (e.g. both on the same
boundary point), e₁ as a last resort.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .algorithm import Algorithm
from .errors import NotApplicable
from .problem import Dataset, Problem

__all__ = ["CANARIES", "OUTLIER_FACTOR", "NeighbourPair", "canary_not_applicable_reason",
           "extreme_record", "negated_row_pair", "neighbouring_pair"]

CANARIES: tuple[str, ...] = ("sphere", "label_flip", "lower_bound", "outlier", "zero")

#: Norm of the ``outlier`` canary, in multiples of the data norm.
OUTLIER_FACTOR = 1000.0


@dataclass(frozen=True)
class NeighbourPair:
    """Replace-one neighbours D (``d0``), D′ (``d1``) and the fixed unit score direction."""

    d0: Dataset
    d1: Dataset
    direction: np.ndarray
    canary: str
    description: str


def _unit(v: np.ndarray) -> np.ndarray | None:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 1e-12 and np.isfinite(norm) else None


def negated_row_pair(data: Dataset, row: int = 0) -> tuple[Dataset, Dataset]:
    """(D, D′) with D′ = D with ``row`` replaced by its negation, labels kept.

    Raises :class:`NotApplicable` when the row is zero (its negation is the same point). Used by
    the ``lower_bound`` canary and by :func:`dpbench.testing.audit_epsilon`.
    """
    if not np.any(data.X[row] != 0):
        raise NotApplicable(
            f"row {row} of the audit dataset is zero, so its negation is not a different "
            "universe point; audit on another problem")
    y = None if data.y is None else data.y[row]
    return data, data.replace_row(row, -data.X[row], y)


def canary_not_applicable_reason(algorithm: Algorithm, canary: str) -> str | None:
    """Why ``canary`` cannot audit ``algorithm`` (None when it can): ``outlier`` needs an
    algorithm that declares it clips per-example gradients (``clips_gradients = True``)."""
    _check_canary(canary)
    if canary == "outlier" and not getattr(algorithm, "clips_gradients", False):
        return (f"canary 'outlier' (a record at {OUTLIER_FACTOR:g}× the data norm) applies only to "
                f"algorithms that clip per-example gradients (clips_gradients=True); "
                f"{algorithm.name!r} does not declare it, so such a record is outside its "
                "privacy theorem")
    return None


def _check_canary(canary: str) -> None:
    if canary not in CANARIES:
        from .errors import UserInputError, did_you_mean

        raise UserInputError(f"unknown canary {canary!r}{did_you_mean(canary, CANARIES)}; "
                             f"allowed: {', '.join(CANARIES)}")


def _optimum(problem: Problem, data: Dataset) -> np.ndarray:
    return np.asarray(problem.solve(data).theta, dtype=float)


def _direction(problem: Problem, d0: Dataset, d1: Dataset, fallback: np.ndarray) -> np.ndarray:
    u = _unit(_optimum(problem, d1) - _optimum(problem, d0))
    if u is None:
        u = _unit(fallback)
    if u is None:
        u = np.eye(d0.p)[0]
    return u


def extreme_record(u: np.ndarray, radius: float, cube: float = np.inf) -> np.ndarray:
    """The feature vector x maximising ⟨x, u⟩ over {‖x‖₂ ≤ radius, ‖x‖∞ ≤ cube}.

    ``u`` a unit vector. Without a cube it is radius·u (a point of the sphere); with one, each
    coordinate is sign(u_j)·min(cube, t·|u_j|) with t the largest value keeping ‖x‖₂ ≤ radius
    (the KKT conditions of the linear objective over the two norm balls). When the cube lies
    inside the ball it is the cube's vertex sign(u)·cube (sign(0) taken as +1).
    """
    u = np.asarray(u, dtype=float)
    if not np.isfinite(cube):
        return radius * u
    signs = np.where(u < 0, -1.0, 1.0)
    if cube * math.sqrt(u.size) <= radius:
        return cube * signs
    mags = np.abs(u)
    order = np.argsort(-mags, kind="stable")
    total = float(np.sum(mags * mags))
    x = np.empty_like(mags)
    capped = 0
    # The k largest |u_j| sit at the cube's face; the rest scale by t, found from the radius.
    for k in range(u.size + 1):
        rest = total - float(np.sum(mags[order[:k]] ** 2))
        room = radius * radius - k * cube * cube
        t = math.sqrt(room / rest) if rest > 0 and room > 0 else 0.0
        if k == u.size or t * mags[order[k]] <= cube:
            capped = k
            break
    x[order[:capped]] = cube
    x[order[capped:]] = np.minimum(cube, t * mags[order[capped:]])
    return signs * x


def _canary_row(problem: Problem, base: Dataset, norm_factor: float) -> tuple[np.ndarray, float]:
    """The canary features (the universe's farthest record along u, u along θ̂* of the other
    rows, times ``norm_factor``) and the data norm r: the declared ``data_norm`` when finite
    (the universe's radius), else the largest generated row norm."""
    bounds = problem.data_bounds()
    r = float(bounds.get("data_norm", np.inf))
    if not (np.isfinite(r) and r > 0):
        r = float(np.max(np.linalg.norm(base.X, axis=1)))
    if not r > 0:
        raise NotApplicable("every generated row is zero: there is no data norm to put a canary on")
    rest = Dataset(base.X[1:], None if base.y is None else base.y[1:], dict(base.meta))
    u = _unit(_optimum(problem, rest))
    if u is None:
        u = np.eye(base.p)[0]
    cube = float(bounds.get("data_norm_inf", np.inf))
    return norm_factor * extreme_record(u, r, cube), r


def neighbouring_pair(problem: Problem, n: int, p: int, canary: str,
                      rng: np.random.Generator) -> NeighbourPair:
    """The neighbouring pair of ``canary`` on ``problem`` at (n, p); data drawn from ``rng``.

    Raises :class:`NotApplicable` when the canary does not apply (``label_flip`` without labels,
    a zero row for ``lower_bound``) and ``UserInputError`` for an unknown canary or n < 2.
    """
    from .errors import UserInputError

    _check_canary(canary)
    if not (isinstance(n, (int, np.integer)) and n >= 2):
        raise UserInputError(f"audit grid: n must be an integer >= 2 (a canary plus at least one "
                             f"other row), got {n!r}")
    base = problem.generate(int(n), int(p), rng)
    if canary == "lower_bound":
        d0, d1 = negated_row_pair(base)
        return NeighbourPair(d0, d1, _direction(problem, d0, d1, d0.X[0]), canary,
                             f"generated data (n={n}, p={p}); D′ negates row 0")
    if canary == "label_flip" and base.y is None:
        raise NotApplicable(f"canary 'label_flip' needs a labelled problem; {problem.name!r} "
                            "generates no labels")
    if canary == "zero":
        bound = problem.data_bounds().get("data_norm")
        if bound is None or not np.isfinite(bound):
            raise NotApplicable(f"canary 'zero' needs a problem that declares a finite data_norm "
                                f"(the zero record is then in its universe); {problem.name!r} "
                                "declares none")
    factor = OUTLIER_FACTOR if canary == "outlier" else 1.0
    x, r = _canary_row(problem, base, factor)
    y = None if base.y is None else 1.0
    d0 = base.replace_row(0, x, y)
    if canary == "label_flip":
        d1 = base.replace_row(0, x, -1.0)
        what = "D′ flips the canary's label"
    elif canary == "zero":
        d1 = base.replace_row(0, np.zeros_like(x), y)
        what = "D′ replaces the canary by the zero record"
    else:
        d1 = base.replace_row(0, -x, y)
        what = "D′ negates the canary"
    desc = (f"canary row 0 at norm {factor * r:.4g} (data norm {r:.4g}) along the optimum of the "
            f"other rows; {what} (n={n}, p={p})")
    return NeighbourPair(d0, d1, _direction(problem, d0, d1, x), canary, desc)
