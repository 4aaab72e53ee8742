"""The compiled-loss contract: the :class:`LossKernel` a problem may return from
:meth:`Problem.kernel <dpbench.core.problem.Problem.kernel>`.

A kernel is two ``numba.njit`` functions with fixed signatures and the problem's public
parameters:

* ``loss(theta, X, y, prm, i) -> float``: ℓ(θ; dᵢ) for row ``i``;
* ``grad(theta, X, y, prm, i, out) -> None``: writes a (sub)gradient of ℓ(·; dᵢ) at θ into ``out``;

where ``theta`` and ``out`` are float64 vectors of length p, ``X`` the (n, p) float64 rows, ``y``
the float64 labels (an empty array for unlabelled data) and ``prm`` a float64 vector of the
problem's public parameters. This module holds the type only, so that the contracts of ``core``
can name it without importing numba; the compiled loops that call kernels, the built-in kernels
and the agreement check live in :mod:`dpbench.numerics.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LossKernel"]


@dataclass(frozen=True)
class LossKernel:
    """A problem's compiled per-example loss and gradient (see the module docstring)."""

    loss: Any
    grad: Any
    prm: np.ndarray
