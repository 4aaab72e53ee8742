"""The problem contract: a convex ERM instance family with certified optima.

A problem plugin declares (as class attributes, benchopt-style) its ``name``, ``summary``,
``citation``, keyword ``params`` and a ``version`` that changes whenever generated data or losses
change. It implements:

* ``generate(n, p, rng) -> Dataset``: draw a dataset of n records in dimension p from the injected
  ``numpy.random.Generator`` (never the global RNG);
* ``loss(theta, data)``: per-example losses, shape (n,);
* ``grad(theta, data, idx)``: per-example (sub)gradients of the rows ``idx``, shape (len(idx), p);
* ``solve(data) -> Optimum``: the constrained minimiser of the **average** loss with a certified
  optimality gap;
* the declared constants ``lipschitz`` (over the whole data universe, never computed from the data
  set: that would leak), ``strong_convexity`` (per example), ``smoothness`` (``inf`` when non-smooth)
  and the ``constraint`` set (projection, membership, **diameter**);
* optionally ``data_bounds()``: public bounds on the data universe (:data:`DATA_BOUNDS`: the norm
  of every feature vector, a box of its coordinates, the size of every label) that mechanisms may
  calibrate with; :meth:`Problem.constants` publishes them beside L, D, Delta and beta; and
  ``universe(p)`` (:class:`dpbench.core.universe.Universe`) when the universe has per-coordinate
  bounds or depends on p (the privacy audit puts its canaries at its edge);
* optionally ``norm_constants()``: constants of the ℓ1/ℓ∞ geometry (:data:`NORM_CONSTANTS`: an
  ℓ∞ bound on the gradients, the smoothness with respect to ‖·‖₁) for mechanisms that work in
  that geometry (private Frank–Wolfe on the ℓ1 ball, docs/frank-wolfe.md); also published by
  :meth:`Problem.constants` when declared;
* optionally ``population_excess(theta, p, n)`` when a data law is defined
  (``has_population = True``);
* optionally ``kernel()`` (compiled loss and gradient), ``__dpbench_tags__()`` (declared
  capabilities, :mod:`dpbench.core.tags`) and exact samplers registered in
  :mod:`dpbench.core.exact_samplers`;
* optionally, for problems backed by a data set (docs/datasets.md): ``dimension`` (the one p its
  data have), ``check_grid(grid)`` (the grid values it cannot run on, reported by suite
  validation) and ``locate(params, base)`` (file parameters resolved against the suite's
  directory).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .kernel import LossKernel
from .params import Param, Parametrized
from .sets import ConstraintSet
from .tags import ProblemTags

if TYPE_CHECKING:
    from .universe import Universe


#: The constants every problem declares (:meth:`Problem.constants`): L (Lipschitz), D
#: (diameter of C), Delta (per-example strong convexity), beta (per-example smoothness).
CORE_CONSTANTS: tuple[str, ...] = ("L", "D", "Delta", "beta")

#: The public bounds on the data universe a problem may declare (:meth:`Problem.data_bounds`),
#: by name, with their meaning (docs/plugins.md, 'Public constants'). A bound holds for every
#: record of the universe the declared constants are proved over, hence for every generated row.
DATA_BOUNDS: dict[str, str] = {
    "data_norm": "a bound on the Euclidean norm ‖x‖₂ of every feature vector (data row) x; "
                 "math.inf when the universe is unbounded",
    "label_bound": "a bound on |y| of every label y (labelled problems only)",
    "data_norm_inf": "a bound on ‖x‖∞ (the largest |coordinate|) of every feature vector, for a "
                     "universe that is not a Euclidean ball (e.g. the cube ‖x‖∞ ≤ 1 of sign "
                     "designs); the universe is then the ball of data_norm cut by this cube",
    "feature_low": "a lower bound on every coordinate of every feature vector (a box that need "
                   "not be centred, e.g. 0 for features in [0, 1]^p); per-coordinate or "
                   "p-dependent bounds: override Problem.universe(p)",
    "feature_high": "an upper bound on every coordinate of every feature vector (with "
                    "feature_low: the box low ≤ x ≤ high, cut by the ball of data_norm)",
}

#: Optional constants of the ℓ1/ℓ∞ geometry a problem may declare (:meth:`Problem.norm_constants`),
#: by name, with their meaning and the default a consumer falls back to when one is not declared
#: (both defaults are valid bounds: ‖g‖∞ ≤ ‖g‖₂ and ‖h‖₂ ≤ ‖h‖₁).
NORM_CONSTANTS: dict[str, str] = {
    "L_inf": "a bound on ‖∇ℓ(θ; d)‖∞ for every θ in C and every d in the data universe "
             "(default: L)",
    "beta_1": "per-example smoothness with respect to ‖·‖₁: hᵀ∇²ℓ(θ; d)h ≤ beta_1·‖h‖₁² for every "
              "θ in C, d in the universe and h (default: beta)",
}

#: The default of each :data:`NORM_CONSTANTS` entry, as the name of the core constant it falls
#: back to.
NORM_DEFAULTS: dict[str, str] = {"L_inf": "L", "beta_1": "beta"}


@dataclass(frozen=True)
class Dataset:
    """A dataset: features ``X`` (n, p) and optional labels ``y`` (n,)."""

    X: np.ndarray
    y: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def p(self) -> int:
        return int(self.X.shape[1])

    def replace_row(self, i: int, x: np.ndarray, y: float | None = None) -> Dataset:
        """A replace-one neighbour of this dataset (same n, row ``i`` replaced)."""
        X = self.X.copy()
        X[i] = x
        Y = None
        if self.y is not None:
            Y = self.y.copy()
            Y[i] = y
        return Dataset(X, Y, dict(self.meta))


@dataclass(frozen=True)
class Optimum:
    """A certified constrained minimiser of the average loss.

    ``gap`` is a proven upper bound on ``value - min``, on the average scale; ``method`` says how it
    was certified (closed form, duality gap, Frank–Wolfe gap, LP relaxation).
    """

    theta: np.ndarray
    value: float
    gap: float
    method: str
    iterations: int = 0


class Problem(Parametrized):
    """Base class of problem plugins; see the module docstring for the contract."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {}
    _plugin_kind: ClassVar[str] = "problem"
    has_population: ClassVar[bool] = False

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.get_params().items()))))

    # --- declared constants -------------------------------------------------------------------
    @property
    def constraint(self) -> ConstraintSet:
        raise NotImplementedError

    @property
    def lipschitz(self) -> float:
        """L: a bound on ‖∇ℓ(θ; d)‖ for every θ in C and every d in the data universe."""
        raise NotImplementedError

    @property
    def strong_convexity(self) -> float:
        """Δ: per-example strong convexity (0 when merely convex)."""
        return 0.0

    @property
    def smoothness(self) -> float:
        """β: per-example smoothness (``inf`` for non-smooth losses)."""
        return math.inf

    def properties(self) -> dict[str, Any]:
        """Declared properties, matched against an algorithm's requirements."""
        return {
            "convex": True,
            "lipschitz": math.isfinite(self.lipschitz),
            "strongly_convex": self.strong_convexity > 0,
            "smooth": math.isfinite(self.smoothness),
            "L": float(self.lipschitz),
            "Delta": float(self.strong_convexity),
            "beta": float(self.smoothness),
            "D": float(self.constraint.diameter),
        }

    def data_bounds(self) -> dict[str, float]:
        """Public bounds on the data universe, by name (a subset of :data:`DATA_BOUNDS`).

        ``data_norm`` bounds ‖x‖₂ of every feature vector and ``label_bound`` bounds |y| of every
        label, over the whole data universe the declared constants are proved over (never
        computed from a data set: a mechanism may calibrate its noise with them, e.g. the
        sensitivity 2·data_norm/n of a clipped mean, or diffprivlib's ``data_norm`` for logistic
        regression, Chaudhuri–Monteleoni–Sarwate 2011, Alg. 1). A name that is absent is not
        declared (the default declares nothing); ``math.inf`` declares the universe unbounded.
        :func:`dpbench.testing.check_problem` checks the names, the values and that generated
        data respect them.
        """
        return {}

    def universe(self, p: int) -> Universe:
        """The data universe at dimension ``p`` (:class:`dpbench.core.universe.Universe`): the
        records the declared constants are proved over, where the privacy audit puts its
        canaries. The default is the ball of ``data_norm`` cut by the cube of ``data_norm_inf``
        and the box [``feature_low``, ``feature_high``] of :meth:`data_bounds` (each optional).
        Override it when the universe has per-coordinate bounds or depends on p (features in
        [0, 1]^p have the radius √p)."""
        from .universe import Universe

        b = self.data_bounds()
        cube = float(b.get("data_norm_inf", math.inf))
        low = max(-cube, float(b.get("feature_low", -math.inf)))
        high = min(cube, float(b.get("feature_high", math.inf)))
        return Universe(int(p), radius=float(b.get("data_norm", math.inf)), low=low, high=high,
                        label_bound=float(b.get("label_bound", math.inf)))

    def norm_constants(self) -> dict[str, float]:
        """Declared constants of the ℓ1/ℓ∞ geometry, by name (a subset of :data:`NORM_CONSTANTS`;
        the default declares nothing, and a consumer then uses :data:`NORM_DEFAULTS`). Like L,
        they hold over C and the whole data universe, never computed from a data set."""
        return {}

    def constants(self) -> dict[str, float]:
        """The public constants: L, D (diameter), Delta, beta (:data:`CORE_CONSTANTS`), then
        the declared :meth:`data_bounds`, then the declared :meth:`norm_constants`. A rate card
        may refer to any of them by name."""
        props = self.properties()
        out = {k: float(props[k]) for k in CORE_CONSTANTS}
        for name, value in self.data_bounds().items():
            if name in out:
                raise ValueError(f"problem {self.name!r}: data_bounds() declares {name!r}, which "
                                 f"is one of the core constants {CORE_CONSTANTS}")
            out[name] = float(value)
        for name, value in self.norm_constants().items():
            if name not in NORM_CONSTANTS:
                raise ValueError(f"problem {self.name!r}: norm_constants() declares {name!r}; "
                                 f"allowed names: {', '.join(NORM_CONSTANTS)}")
            out[name] = float(value)
        return out

    # --- what the data allow (problems backed by a data set) ---------------------------------
    @property
    def dimension(self) -> int | None:
        """The one dimension p this problem's data have (a data set's number of columns), or
        ``None`` when :meth:`generate` accepts any p (the synthetic laws)."""
        return None

    def check_grid(self, grid: Mapping[str, Sequence[Any]]) -> dict[str, str]:
        """The grid values this problem cannot run on: axis name → message (default: only a
        ``p`` other than :attr:`dimension`). Suite validation reports each message at
        ``experiments[i].grid.<axis>`` before anything is created."""
        dim = self.dimension
        if dim is None:
            return {}
        bad = [v for v in grid.get("p", ()) if int(v) != dim]
        if not bad:
            return {}
        return {"p": f"problem {self.name!r} has data of dimension {dim}: p must be [{dim}], "
                     f"got {list(grid['p'])}"}

    @classmethod
    def locate(cls, params: Mapping[str, Any], base: Path) -> dict[str, Any]:
        """The given parameters with every file they name resolved against ``base`` (the
        directory of the suite file), before the problem is instantiated; default unchanged."""
        return dict(params)

    # --- data and losses ----------------------------------------------------------------------
    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        raise NotImplementedError

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        raise NotImplementedError

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def risk(self, theta: np.ndarray, data: Dataset) -> float:
        """Average empirical loss L̄(θ) = (1/n) Σ ℓ(θ; d_i)."""
        return float(np.mean(self.loss(np.asarray(theta, dtype=float), data)))

    def full_grad(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        """Gradient of the average loss."""
        return np.mean(self.grad(theta, data), axis=0)

    def solve(self, data: Dataset) -> Optimum:
        raise NotImplementedError

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """Excess population risk of θ; NaN when the problem defines no data law.

        ``n`` is the sample size of the cell; only laws that scale with n (hard DP-SCO instances
        whose mean shrinks like 1/√n) use it."""
        return math.nan

    # --- optional fast paths ------------------------------------------------------------------
    def kernel(self) -> LossKernel | None:
        """Compiled per-example loss and gradient (:mod:`dpbench.core.kernel`), or ``None``.

        Mechanisms with compiled inner loops (NoisySGD, the MCMC samplers) use it when present and
        fall back to :meth:`loss` / :meth:`grad` otherwise.
        """
        return None

    # --- declared capabilities ----------------------------------------------------------------
    def __dpbench_tags__(self) -> ProblemTags:
        """What this problem claims about its loss (:class:`~dpbench.core.tags.ProblemTags`).

        The default claims nothing. Mechanisms read the tags only through
        :func:`dpbench.core.tags.get_tags`, which ignores them for a subclass that redefines the
        loss below the declaring class (docs/writing-a-plugin.md, 'Declaring capabilities').
        Exact samplers are registered separately (:mod:`dpbench.core.exact_samplers`).
        """
        return ProblemTags()
