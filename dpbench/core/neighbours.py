"""Worst-case neighbouring pairs (canaries) for the privacy audit.

A :class:`NeighbourPair` is two replace-one neighbours D, D′ (same n, exactly one row differs:
row 0, the *canary*) and a unit score direction fixed BEFORE any mechanism run. Everything here is
a function of the problem's generated data and its declared universe only (the auditor is not
private, so it may solve the non-private problem), never of mechanism outputs.

A canary is named ``kind[+background][@direction]`` (:class:`CanarySpec`; docs/audit.md,
"Universes and canaries"):

* **kind** — what D's row 0 and D′'s row 0 are. With u the canary's direction and the universe
  :meth:`dpbench.core.problem.Problem.universe` (a ball cut by a box, anywhere):

  - ``sphere``: D's canary c is the universe's farthest record along u (:meth:`Universe.extreme`:
    r·u on a ball of radius r, a vertex of a box) and D′'s its negation −c on a universe
    symmetric under negation (the replace-one worst case of a Lipschitz gradient bound,
    ‖c − c′‖ = 2r), the farthest record along −u on any other (the opposite vertex of a box such
    as [0, 1]^p, where a negation would leave the universe);
  - ``zero``: D′'s canary is the universe's record nearest the origin (the zero record when the
    universe holds it). For a margin loss φ(y⟨θ, x⟩) a negation or a label flip leaves the
    canary's Hessian φ''·xxᵀ unchanged (φ'' is even), so only this pair exercises the Jacobian
    term of objective perturbation's proof (Chaudhuri–Monteleoni–Sarwate 2011, Thm 9), the term
    diffprivlib mis-scales above data norm 1 (docs/diffprivlib.md);
  - ``label_flip``: D′ keeps the canary's features and flips its label (labelled problems);
  - ``lower_bound``: the problem's own generated data, D′ with row 0 negated (labels kept; the
    BST14 lower-bound instances and the check harness, :func:`negated_row_pair`); needs a
    universe symmetric under negation;
  - ``outlier``: like ``sphere`` at ``OUTLIER_FACTOR`` times the universe's largest norm, outside
    it: it applies only to mechanisms that enforce the bound themselves, by clipping per-example
    gradients or the records (``clips_gradients`` / ``clips_records``,
    :func:`canary_not_applicable_reason`), and catches a removed clipping step.

* **background** — the other n − 1 rows: ``data`` (default) the problem's generated rows;
  ``empty`` every other row at the origin record (label +1): the canary alone against a
  background that adds no curvature and no gradient (the pair on which diffprivlib's objective
  perturbation violates its claim); ``twin`` every other row equal to D′'s canary (the common rows
  agree with D′'s differing row: the configuration that attains noisy SGD's dominating pair,
  docs/bst14.md).

* **direction** — u: ``optimum`` (default) the direction of the non-private optimum of the other
  generated rows (e₁ when it is 0); ``axis`` e₁; ``diagonal`` (1, …, 1)/√p.

Score direction (the audit's projection score): the unit vector of θ̂*(D′) − θ̂*(D) (both
non-private optima, output independent); the canary's own direction when the optima coincide,
e₁ as a last resort.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .algorithm import Algorithm
from .errors import NotApplicable, UserInputError, did_you_mean
from .problem import Dataset, Problem
from .universe import Universe

__all__ = ["BACKGROUNDS", "CANARIES", "CANARY_KINDS", "DIRECTIONS", "OUTLIER_FACTOR",
           "CanarySpec", "NeighbourPair", "canary_not_applicable_reason", "extreme_record",
           "negated_row_pair", "neighbouring_pair", "search_canaries"]

CANARY_KINDS: tuple[str, ...] = ("sphere", "label_flip", "lower_bound", "outlier", "zero")
BACKGROUNDS: tuple[str, ...] = ("data", "empty", "twin")
DIRECTIONS: tuple[str, ...] = ("optimum", "axis", "diagonal")
#: The canary kinds (a kind alone means background ``data`` and direction ``optimum``).
CANARIES: tuple[str, ...] = CANARY_KINDS

#: Norm of the ``outlier`` canary, in multiples of the universe's largest norm.
OUTLIER_FACTOR = 1000.0


@dataclass(frozen=True)
class CanarySpec:
    """A canary: kind, background of the other rows, direction (module docstring)."""

    kind: str
    background: str = "data"
    direction: str = "optimum"

    @classmethod
    def parse(cls, key: str) -> CanarySpec:
        """``kind[+background][@direction]``; ``UserInputError`` naming what is wrong."""
        if not isinstance(key, str):
            raise UserInputError(f"a canary must be a string kind[+background][@direction], got "
                                 f"{key!r}")
        rest, _, direction = key.partition("@")
        kind, _, background = rest.partition("+")
        for value, allowed, what in ((kind, CANARY_KINDS, "kind"),
                                     (background or "data", BACKGROUNDS, "background"),
                                     (direction or "optimum", DIRECTIONS, "direction")):
            if value not in allowed:
                raise UserInputError(
                    f"canary {key!r}: unknown {what} {value!r}{did_you_mean(value, allowed)}; "
                    f"allowed: {', '.join(allowed)} (a canary is kind[+background][@direction])")
        spec = cls(kind, background or "data", direction or "optimum")
        if kind == "lower_bound" and spec.background != "data":
            raise UserInputError(f"canary {key!r}: lower_bound uses the problem's own data; its "
                                 "background can only be data")
        return spec

    @property
    def key(self) -> str:
        out = self.kind
        if self.background != "data":
            out += f"+{self.background}"
        if self.direction != "optimum":
            out += f"@{self.direction}"
        return out


def search_canaries() -> tuple[str, ...]:
    """The canaries the audit's default search tries (docs/audit.md, "The search"): every kind
    on the generated data, the edge and the zero canaries against an empty background and a
    twin one, and the edge canary along a fixed axis. Those that do not apply to a mechanism or
    problem are left out at planning time."""
    return ("sphere", "sphere+empty", "sphere+twin", "sphere+empty@axis", "zero", "zero+empty",
            "label_flip", "label_flip+empty", "lower_bound", "outlier")


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
    algorithm that enforces the data bound itself (``clips_gradients`` or ``clips_records``)."""
    spec = CanarySpec.parse(canary)
    if spec.kind == "outlier" and not (getattr(algorithm, "clips_gradients", False)
                                       or getattr(algorithm, "clips_records", False)):
        return (f"canary {canary!r} (a record at {OUTLIER_FACTOR:g}× the data norm) applies only "
                f"to algorithms that clip per-example gradients or the records themselves "
                f"(clips_gradients / clips_records); {algorithm.name!r} declares neither, so such "
                "a record is outside its privacy theorem")
    return None


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
    """The feature vector x maximising ⟨x, u⟩ over {‖x‖₂ ≤ radius, ‖x‖∞ ≤ cube}
    (:meth:`Universe.extreme` of that universe; ``u`` a unit vector)."""
    u = np.asarray(u, dtype=float)
    return Universe(u.size, radius=radius, low=-cube, high=cube).extreme(u)


def _universe(problem: Problem, base: Dataset) -> Universe:
    """The problem's universe at the data's p; an unbounded one is bounded, for the canaries, by
    the largest generated row norm (the edge the data reach)."""
    uni = problem.universe(base.p)
    if uni.bounded:
        return uni
    r = float(np.max(np.linalg.norm(base.X, axis=1)))
    if not r > 0:
        raise NotApplicable("every generated row is zero: there is no data norm to put a canary on")
    return Universe(base.p, radius=r, low=uni.low, high=uni.high, label_bound=uni.label_bound)


def _canary_direction(problem: Problem, base: Dataset, spec: CanarySpec) -> np.ndarray:
    p = base.p
    if spec.direction == "axis":
        return np.eye(p)[0]
    if spec.direction == "diagonal":
        return np.full(p, 1.0 / math.sqrt(p))
    rest = Dataset(base.X[1:], None if base.y is None else base.y[1:], dict(base.meta))
    u = _unit(_optimum(problem, rest))
    return np.eye(p)[0] if u is None else u


def _with_background(base: Dataset, spec: CanarySpec, origin: np.ndarray,
                     twin: tuple[np.ndarray, float | None]) -> Dataset:
    """``base`` with rows 1… replaced as the background asks (row 0 is set by the caller)."""
    if spec.background == "data":
        return base
    n = base.n
    x, y = (origin, None if base.y is None else 1.0) if spec.background == "empty" else twin
    X = np.repeat(np.asarray(x, dtype=float)[None, :], n, axis=0)
    Y = None if base.y is None else np.full(n, 1.0 if y is None else float(y))
    return Dataset(X, Y, dict(base.meta))


def neighbouring_pair(problem: Problem, n: int, p: int, canary: str,
                      rng: np.random.Generator) -> NeighbourPair:
    """The neighbouring pair of ``canary`` (``kind[+background][@direction]``) on ``problem`` at
    (n, p); data drawn from ``rng``.

    Raises :class:`NotApplicable` when the canary does not apply (``label_flip`` without labels,
    a zero row for ``lower_bound``, ``lower_bound`` on a universe that negation leaves, ``zero``
    when its record equals the canary) and ``UserInputError`` for an unknown canary or n < 2.
    """
    spec = CanarySpec.parse(canary)
    if not (isinstance(n, (int, np.integer)) and n >= 2):
        raise UserInputError(f"audit grid: n must be an integer >= 2 (a canary plus at least one "
                             f"other row), got {n!r}")
    base = problem.generate(int(n), int(p), rng)
    if spec.kind == "lower_bound":
        if not problem.universe(int(p)).symmetric:
            raise NotApplicable(f"canary 'lower_bound' negates a row; the universe of "
                                f"{problem.name!r} is not symmetric under negation")
        d0, d1 = negated_row_pair(base)
        return NeighbourPair(d0, d1, _direction(problem, d0, d1, d0.X[0]), spec.key,
                             f"generated data (n={n}, p={p}); D′ negates row 0")
    if spec.kind == "label_flip" and base.y is None:
        raise NotApplicable(f"canary {spec.key!r} needs a labelled problem; {problem.name!r} "
                            "generates no labels")
    uni = _universe(problem, base)
    u = _canary_direction(problem, base, spec)
    x = uni.extreme(u)
    factor = 1.0
    if spec.kind == "outlier":
        factor = OUTLIER_FACTOR * uni.norm_bound / max(float(np.linalg.norm(x)), 1e-300)
        x = factor * x
    origin = uni.nearest(np.zeros(base.p))
    y = None if base.y is None else 1.0
    if spec.kind == "label_flip":
        x1, y1, what = x, -1.0, "D′ flips the canary's label"
    elif spec.kind == "zero":
        x1, y1, what = origin, y, "D′ replaces the canary by the universe's origin record"
        if np.allclose(x1, x, rtol=0, atol=1e-12):
            raise NotApplicable(f"canary {spec.key!r}: the origin record equals the canary")
    elif uni.symmetric:
        x1, y1, what = -x, y, "D′ negates the canary"
    else:
        x1 = factor * uni.extreme(-u)
        y1, what = y, "D′ puts the canary at the universe's far side along −u"
    background = _with_background(base, spec, origin, (x1, y1))
    d0 = background.replace_row(0, x, y)
    d1 = background.replace_row(0, x1, y1)
    desc = (f"canary row 0 at norm {float(np.linalg.norm(x)):.4g} along the "
            f"{spec.direction} direction, background {spec.background}; {what} (n={n}, p={p})")
    return NeighbourPair(d0, d1, _direction(problem, d0, d1, x - x1), spec.key, desc)
