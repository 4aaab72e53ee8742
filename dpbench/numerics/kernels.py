"""Compiled per-example losses and gradients: the fast path of iterative mechanisms and samplers.

NoisySGD's n² sequential steps and the MCMC samplers' per-step loss sums cannot be vectorised away,
so they run as numba-compiled loops. A problem opts in by returning a
:class:`~dpbench.core.kernel.LossKernel` from :meth:`dpbench.core.problem.Problem.kernel`: two
``numba.njit`` functions with the fixed signatures of :mod:`dpbench.core.kernel` (which owns the
type; it is re-exported here). The compiled mechanism loops call these functions (NoisySGD compiles
its loop once per kernel with the gradient inlined, :func:`dpbench.numerics.jit.specialise`; the
others take them as arguments), so a third-party problem gets the fast path by writing its own two
functions; a problem without a kernel falls back to the numpy implementation of each mechanism
(same law, a different random stream). The built-in kernels are cached on disk by
:func:`dpbench.numerics.jit.cached_njit` (numba's cache, safe under concurrent processes).

The kernels must agree with ``Problem.loss`` / ``Problem.grad``; :func:`check_kernel` checks it,
and mechanisms obtain a problem's kernel through :func:`resolve_kernel`, which ignores a kernel
inherited by a subclass that overrides ``loss`` or ``grad`` (it would silently disagree).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from ..core.kernel import LossKernel
from .jit import cached_njit

__all__ = ["LossKernel", "kernel_arrays", "sum_loss", "sum_grad", "LINEAR", "QUADRATIC", "HINGE",
           "LOGISTIC", "resolve_kernel", "check_kernel", "KERNEL_RTOL"]


if TYPE_CHECKING:
    from ..core.problem import Dataset, Problem


_NO_LABELS = np.empty(0)


def kernel_arrays(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a :class:`~dpbench.core.problem.Dataset` as contiguous float64 arrays for a kernel."""
    X = np.ascontiguousarray(data.X, dtype=np.float64)
    y = _NO_LABELS if data.y is None else np.ascontiguousarray(data.y, dtype=np.float64)
    return X, y


# ``sum_loss`` and ``sum_grad`` take a kernel function as an argument. numba keys such an argument
# by its address, so an on-disk cache never hits across processes and would only grow: they are
# compiled once per process and kernel instead.
@njit(cache=False)
def sum_loss(loss, theta, X, y, prm):  # type: ignore[no-untyped-def]
    """Σᵢ ℓ(θ; dᵢ) (the sum scale of BST14)."""
    total = 0.0
    for i in range(X.shape[0]):
        total += loss(theta, X, y, prm, i)
    return total


@njit(cache=False)
def _row_losses(loss, thetas, X, y, prm, out):  # type: ignore[no-untyped-def]
    for r in range(thetas.shape[0]):
        out[r] = loss(thetas[r], X, y, prm, 0)


def row_losses(kernel: LossKernel, thetas: np.ndarray, record: Any) -> np.ndarray:
    """ℓ(θ_r; d) for every row θ_r of ``thetas`` and the one record of the dataset ``record``
    (the privacy audit's loss-difference score, :mod:`dpbench.audit.scores`)."""
    X, y = kernel_arrays(record)
    thetas = np.ascontiguousarray(thetas, dtype=np.float64)
    out = np.empty(thetas.shape[0])
    _row_losses(kernel.loss, thetas, X, y, kernel.prm, out)
    return out


@njit(cache=False)
def sum_grad(grad, theta, X, y, prm, out, work):  # type: ignore[no-untyped-def]
    """Writes Σᵢ ∇ℓ(θ; dᵢ) into ``out``; ``work`` is a length-p scratch vector."""
    p = theta.shape[0]
    for j in range(p):
        out[j] = 0.0
    for i in range(X.shape[0]):
        grad(theta, X, y, prm, i, work)
        for j in range(p):
            out[j] += work[j]


# --- kernels of the built-in families --------------------------------------------------------
@cached_njit
def linear_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = −⟨θ, x⟩ + (prm[0]/2)‖θ‖² (LB-Lin when prm[0] = 0; linear + ridge otherwise)."""
    dot = 0.0
    sq = 0.0
    for j in range(theta.shape[0]):
        dot += theta[j] * X[i, j]
        sq += theta[j] * theta[j]
    return -dot + 0.5 * prm[0] * sq


@cached_njit
def linear_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    for j in range(theta.shape[0]):
        out[j] = -X[i, j] + prm[0] * theta[j]


@cached_njit
def quadratic_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = (prm[0]/2)‖θ − x‖² + prm[1]·‖θ − x‖ (LB-Quad: prm = (1, 0); KINK-SC: (Δ, 1))."""
    sq = 0.0
    for j in range(theta.shape[0]):
        d = theta[j] - X[i, j]
        sq += d * d
    return 0.5 * prm[0] * sq + prm[1] * math.sqrt(sq)


@cached_njit
def quadratic_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """(prm[0] + prm[1]/‖θ − x‖)(θ − x); the subgradient 0 is taken at the kink θ = x."""
    sq = 0.0
    for j in range(theta.shape[0]):
        d = theta[j] - X[i, j]
        out[j] = d
        sq += d * d
    norm = math.sqrt(sq)
    coef = prm[0] + (prm[1] / norm if norm > 0.0 else 0.0)
    for j in range(theta.shape[0]):
        out[j] *= coef


def LINEAR(ridge: float = 0.0) -> LossKernel:
    """Kernel of −⟨θ, x⟩ + (ridge/2)‖θ‖²."""
    return LossKernel(linear_loss, linear_grad, np.array([float(ridge)]))


def QUADRATIC(curvature: float = 1.0, kink: float = 0.0) -> LossKernel:
    """Kernel of (curvature/2)‖θ − x‖² + kink·‖θ − x‖."""
    return LossKernel(quadratic_loss, quadratic_grad, np.array([float(curvature), float(kink)]))


# Margin losses φ(y⟨θ, x⟩) + (prm[0]/2)‖θ‖² (dpbench.problems._linear_law), one pair per φ.
@cached_njit
def _margin_and_ridge(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """(y_i⟨θ, x_i⟩, (prm[0]/2)‖θ‖²)."""
    dot = 0.0
    sq = 0.0
    for j in range(theta.shape[0]):
        dot += theta[j] * X[i, j]
        sq += theta[j] * theta[j]
    return y[i] * dot, 0.5 * prm[0] * sq


@cached_njit
def _margin_grad(theta, X, y, prm, i, out, dphi):  # type: ignore[no-untyped-def]
    """out = φ'(m)·y_i·x_i + prm[0]·θ, given dphi = φ'(m)."""
    coef = y[i] * dphi
    for j in range(theta.shape[0]):
        out[j] = coef * X[i, j] + prm[0] * theta[j]


@cached_njit
def _margin(theta, X, y, i):  # type: ignore[no-untyped-def]
    dot = 0.0
    for j in range(theta.shape[0]):
        dot += theta[j] * X[i, j]
    return y[i] * dot


@cached_njit
def hinge_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = (1 − y⟨θ, x⟩)₊ + (prm[0]/2)‖θ‖² (hinge SVM, optionally with a ridge)."""
    m, ridge = _margin_and_ridge(theta, X, y, prm, i)
    return max(0.0, 1.0 - m) + ridge


@cached_njit
def hinge_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """−y·x·1[y⟨θ, x⟩ < 1] + prm[0]·θ (the subgradient 0 of the hinge is taken at the kink)."""
    m = _margin(theta, X, y, i)
    _margin_grad(theta, X, y, prm, i, out, -1.0 if m < 1.0 else 0.0)


@cached_njit
def logistic_loss(theta, X, y, prm, i):  # type: ignore[no-untyped-def]
    """ℓ = log(1 + exp(−y⟨θ, x⟩)) + (prm[0]/2)‖θ‖², evaluated as ``np.logaddexp(0, −m)``."""
    m, ridge = _margin_and_ridge(theta, X, y, prm, i)
    return max(0.0, -m) + math.log1p(math.exp(-abs(m))) + ridge


@cached_njit
def logistic_grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
    """−expit(−m)·y·x + prm[0]·θ with m = y⟨θ, x⟩ (expit evaluated stably on both signs)."""
    m = _margin(theta, X, y, i)
    if m >= 0.0:
        e = math.exp(-m)
        s = e / (1.0 + e)
    else:
        s = 1.0 / (1.0 + math.exp(m))
    _margin_grad(theta, X, y, prm, i, out, -s)


def HINGE(ridge: float = 0.0) -> LossKernel:
    """Kernel of (1 − y⟨θ, x⟩)₊ + (ridge/2)‖θ‖²."""
    return LossKernel(hinge_loss, hinge_grad, np.array([float(ridge)]))


def LOGISTIC(ridge: float = 0.0) -> LossKernel:
    """Kernel of log(1 + exp(−y⟨θ, x⟩)) + (ridge/2)‖θ‖²."""
    return LossKernel(logistic_loss, logistic_grad, np.array([float(ridge)]))


# --- using and checking kernels ----------------------------------------------------------------
def _defining_class(cls: type, attribute: str) -> type:
    """The class of ``cls``'s MRO whose ``__dict__`` defines ``attribute``."""
    for klass in cls.__mro__:
        if attribute in vars(klass):
            return klass
    return object


def resolve_kernel(problem: Problem) -> LossKernel | None:
    """``problem.kernel()``, or ``None`` when the kernel cannot be trusted to match the loss.

    A kernel is used only if the class that defines ``kernel`` is the class (or a subclass of the
    class) that defines ``loss`` and ``grad``: a subclass that overrides ``grad`` (e.g. a test
    problem that lies about its Lipschitz constant) but inherits its parent's kernel falls back to
    the numpy path, so mechanisms always run the loss the problem actually declares.
    """
    cls = type(problem)
    owner = _defining_class(cls, "kernel")
    for method in ("loss", "grad"):
        if not issubclass(owner, _defining_class(cls, method)):
            return None
    return problem.kernel()


#: Relative agreement required between a kernel and ``Problem.loss`` / ``Problem.grad``.
KERNEL_RTOL = 1e-12


def check_kernel(problem: Problem, data: Dataset, thetas: np.ndarray,
                 rtol: float = KERNEL_RTOL) -> None:
    """Assert that ``problem``'s kernel reproduces ``problem.loss`` and ``problem.grad``.

    For every θ in ``thetas`` (shape (m, p)) and every row i, the kernel's loss and gradient must
    equal ``problem.loss(θ, data)[i]`` and ``problem.grad(θ, data)[i]`` to ``rtol`` relative to
    max(1, |reference|) (per row, in the Euclidean norm for gradients). Raises ``AssertionError``
    with the first offending (θ, i), or ``ValueError`` when the problem has no usable kernel.
    """
    kernel = resolve_kernel(problem)
    if kernel is None:
        raise ValueError(f"problem {problem.name!r} has no usable kernel")
    X, y = kernel_arrays(data)
    out = np.empty(data.p)
    for theta in np.atleast_2d(np.asarray(thetas, dtype=np.float64)):
        theta = np.ascontiguousarray(theta)
        losses = np.asarray(problem.loss(theta, data), dtype=float)
        grads = np.asarray(problem.grad(theta, data), dtype=float)
        for i in range(data.n):
            value = kernel.loss(theta, X, y, kernel.prm, i)
            if abs(value - losses[i]) > rtol * max(1.0, abs(losses[i])):
                raise AssertionError(
                    f"{problem.name}: kernel loss {value!r} != loss {losses[i]!r} at row {i}, "
                    f"theta={theta.tolist()}")
            kernel.grad(theta, X, y, kernel.prm, i, out)
            err = float(np.linalg.norm(out - grads[i]))
            if err > rtol * max(1.0, float(np.linalg.norm(grads[i]))):
                raise AssertionError(
                    f"{problem.name}: kernel gradient differs from grad by {err:.3g} at row {i}, "
                    f"theta={theta.tolist()}")
