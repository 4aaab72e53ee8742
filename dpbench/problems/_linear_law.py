"""The synthetic linear-classification law shared by the hinge-SVM and logistic problems.

Law (docs/instances.md, 'Hinge SVM and logistic'): x is uniform on the sphere of radius ``x_norm``
in Rᵖ, y = sign⟨w*, x⟩ with w* = e₁, and each label is flipped independently with probability
``label_noise``. The law is rotation invariant, and so are the losses (they depend on θ only through
⟨θ, x⟩) and the ball C, so a fixed direction w* = e₁ is exactly as hard as any other.

Both problems are margin losses ℓ(θ; x, y) = φ(y⟨θ, x⟩) + (ridge/2)‖θ‖² with |φ'| ≤ 1 on the ball
of radius R. :class:`MarginLoss` implements what every margin loss shares whatever its data
(constants over the universe ‖x‖ ≤ ``feature_norm``, losses, gradients, kernel, tags);
:class:`MarginLossProblem` adds this law (parameters, data, population excess) and asks
subclasses for φ, φ' and ``solve``. The dataset-backed problems of
:mod:`dpbench.problems.real_data` reuse the same φ with another data source.

Population risk (BST14 Appendix F) has no closed form here, so it is a Monte Carlo estimate on a
fixed "population sample" of N = ``population_sample`` points drawn from
``make_rng({"stream": "population", "problem": name, "params": params, "p": p}, root_seed=0)``:
identical in every process, independent of every data set, cached per process with its certified
optimum.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np

from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.seeding import make_rng
from ..core.sets import Ball, ConstraintSet
from ..core.tags import ProblemTags

__all__ = ["LAW_PARAMS", "MarginLoss", "MarginLossProblem", "draw_linear_law",
           "population_optimum", "population_sample"]

LAW_PARAMS: dict[str, Param] = {
    "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
    "x_norm": Param(1.0, low=0.0, low_open=True, doc="norm of every feature vector x"),
    "label_noise": Param(0.1, low=0.0, high=0.5, high_open=True,
                         doc="probability that a label is flipped"),
    "ridge": Param(0.0, low=0.0, doc="ridge λ added to every example: Δ = λ, L += λR"),
    "population_sample": Param(20000, kind="int", low=1000,
                               doc="size N of the fixed Monte Carlo sample for population risk"),
}


def draw_linear_law(n: int, p: int, rng: np.random.Generator, x_norm: float,
                    label_noise: float) -> Dataset:
    """n i.i.d. draws (x, y) of the law: x uniform on the x_norm-sphere, y = ±sign(x₁)."""
    g = rng.standard_normal((n, p))
    norms = np.linalg.norm(g, axis=1, keepdims=True)
    X = g * (x_norm / np.maximum(norms, np.finfo(float).tiny))
    y = np.where(X[:, 0] >= 0, 1.0, -1.0)
    flips = rng.random(n) < label_noise
    y[flips] = -y[flips]
    return Dataset(X, y, {"w_star": "e1", "flipped": int(flips.sum())})


def _rows(data: Dataset, idx: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(X[idx], y[idx]) of a labelled data set (all rows when idx is None)."""
    if data.y is None:
        raise ValueError("margin losses need labels: Dataset.y is None")
    if idx is None:
        return data.X, data.y
    idx = np.atleast_1d(idx)
    return data.X[idx], data.y[idx]


class MarginLoss(Problem):
    """ℓ(θ; x, y) = φ(y⟨θ, x⟩) + (ridge/2)‖θ‖² on the ball of radius ``radius``, whatever the data.

    Subclasses define ``_phi`` (φ) and ``_dphi`` (φ', with |φ'| ≤ 1), ``solve``, the data
    (``generate``, ``params``) and ``feature_norm``, the bound on ‖x‖ over their data universe
    (labels are ±1). Constants over that universe and θ ∈ C: L = feature_norm + ridge·R,
    Δ = ridge.
    """

    radius: float
    ridge: float

    # --- to be provided by subclasses ---------------------------------------------------------
    @staticmethod
    def _phi(margins: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _dphi(margins: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def feature_norm(self) -> float:
        """A bound on ‖x‖ of every feature vector of the data universe (a public parameter)."""
        raise NotImplementedError

    # --- shared implementation ----------------------------------------------------------------
    @property
    def constraint(self) -> ConstraintSet:
        return Ball(self.radius)

    @property
    def lipschitz(self) -> float:
        """L = feature_norm + ridge·R: |φ'| ≤ 1, ‖x‖ ≤ feature_norm and ‖ridge·θ‖ ≤ ridge·R on C."""
        return self.feature_norm + self.ridge * self.radius

    @property
    def strong_convexity(self) -> float:
        return self.ridge

    def data_bounds(self) -> dict[str, float]:
        """‖x‖ ≤ feature_norm for every feature vector and labels y ∈ {−1, +1}: the universe L
        is proved over."""
        return {"data_norm": float(self.feature_norm), "label_bound": 1.0}

    def _ridge_term(self, theta: np.ndarray) -> float:
        return 0.5 * self.ridge * float(theta @ theta)

    def loss(self, theta: np.ndarray, data: Dataset) -> np.ndarray:
        X, y = _rows(data, None)
        return self._phi(y * (X @ theta)) + self._ridge_term(theta)

    def grad(self, theta: np.ndarray, data: Dataset, idx: np.ndarray | None = None) -> np.ndarray:
        """Rows φ'(y⟨θ, x⟩)·y·x + ridge·θ (X and y are indexed once)."""
        X, y = _rows(data, idx)
        coef = y * self._dphi(y * (X @ theta))
        out = coef[:, None] * X
        if self.ridge:
            out += self.ridge * theta
        return out

    def kernel(self) -> LossKernel | None:
        """The compiled margin kernel of this φ (:func:`dpbench.numerics.kernels.HINGE` / ``LOGISTIC``).

        Looked up by the functions that define φ and φ' (``_MARGIN_KERNELS``), so a subclass that
        redefines either gets ``None`` (the numpy path) instead of a kernel of another loss.
        """
        from ..numerics import kernels  # numba: only for the compiled paths

        cls = type(self)
        for (phi, dphi), name in _MARGIN_KERNELS.items():
            if _defined_as(cls, "_phi", phi) and _defined_as(cls, "_dphi", dphi):
                return getattr(kernels, name)(self.ridge)
        return None

    def __dpbench_tags__(self) -> ProblemTags:
        """Margin losses: ∇²ℓ − ridge·I = φ''·xxᵀ has rank 1 and a replaced example moves the
        gradient within span{x, x′} (dimension 2) — KST12's rank condition, used by objective
        perturbation's privacy calibration. Subclasses that define φ re-declare it (the claim
        does not survive an override of ``_phi``/``_dphi``, :func:`dpbench.core.tags.get_tags`)."""
        return ProblemTags(hessian_rank=1, gradient_shift_dim=2)


class MarginLossProblem(MarginLoss):
    """A margin loss (:class:`MarginLoss`) with data from the linear law.

    Subclasses define ``_phi``, ``_dphi`` and ``solve``. The universe: ‖x‖ = x_norm, so
    L = x_norm + ridge·R, Δ = ridge.
    """

    has_population: ClassVar[bool] = True
    params: ClassVar[dict[str, Param]] = LAW_PARAMS

    x_norm: float
    label_noise: float
    population_sample: int

    @property
    def feature_norm(self) -> float:
        """Every feature vector has norm exactly x_norm."""
        return self.x_norm

    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        return draw_linear_law(n, p, rng, self.x_norm, self.label_noise)

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """Monte Carlo excess population risk on the fixed sample of size N (module docstring).

        Mean loss at θ on the sample minus the certified minimum over C on the same sample. The
        difference is returned raw, not clipped: it can be negative only by the solver's
        certified gap (≤ 1e-8) plus rounding.
        """
        sample = population_sample(self, p)
        optimum = population_optimum(self, p)
        return self.risk(np.asarray(theta, dtype=float), sample) - optimum.value


#: Kernel factories of :mod:`dpbench.numerics.kernels`, by name, keyed by the qualified names of
#: the (φ, φ') static methods that they compile.
_MARGIN_KERNELS: dict[tuple[str, str], str] = {
    ("dpbench.problems.hinge_svm.HingeSVM._phi",
     "dpbench.problems.hinge_svm.HingeSVM._dphi"): "HINGE",
    ("dpbench.problems.logistic.Logistic._phi",
     "dpbench.problems.logistic.Logistic._dphi"): "LOGISTIC",
}


def _defined_as(cls: type, attribute: str, qualified_name: str) -> bool:
    """Whether ``cls.attribute`` is the function named ``module.qualname`` == ``qualified_name``."""
    function = getattr(cls, attribute, None)
    return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}" == \
        qualified_name


@functools.lru_cache(maxsize=16)
def population_sample(problem: MarginLossProblem, p: int) -> Dataset:
    """The fixed population sample of ``problem`` in dimension p (read-only, cached)."""
    identity = {"stream": "population", "problem": problem.name,
                "params": problem.get_params(), "p": p}
    data = draw_linear_law(problem.population_sample, p, make_rng(identity, root_seed=0),
                           problem.x_norm, problem.label_noise)
    for array in (data.X, data.y):
        if array is not None:
            array.flags.writeable = False
    return data


@functools.lru_cache(maxsize=16)
def population_optimum(problem: MarginLossProblem, p: int) -> Optimum:
    """The certified minimiser over C of the mean loss on :func:`population_sample` (cached)."""
    return problem.solve(population_sample(problem, p))
