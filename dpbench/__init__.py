"""dpbench: distributed benchmarks of differentially private convex optimisation against theory.

**The public API** (docs/plugins.md, "Public API") is the names of ``__all__`` below, plus the
modules :mod:`dpbench.testing` (the check harness), :mod:`dpbench.analysis` (the analysis of a
results cube) and :mod:`dpbench.audit` (privacy audits), each with its own ``__all__``. Every
other module is internal and may move without notice; ``tests/unit/test_public_api.py`` checks
that the examples, the scaffold and the documentation import nothing else.

``import dpbench`` loads the plugin contracts only (numpy, no xarray, pandas, scipy, dask, zarr,
numba or yaml: ``tests/unit/test_layers.py``). The names whose modules need more (the Gaussian
calibrations, :class:`SquaredLoss`, the suite parsers, the exact-sampler registry) are imported
on first use.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .core.algorithm import Algorithm, BatchRelease, Release
from .core.errors import (
    CellTimeout,
    DpbenchError,
    NotApplicable,
    NoWorkers,
    PluginError,
    SchedulerLost,
    StoreError,
    SuiteError,
    UserInputError,
)
from .core.kernel import LossKernel
from .core.params import Param
from .core.problem import Dataset, Optimum, Problem
from .core.ratecard import RateCard
from .core.registry import get_algorithm, get_problem, register
from .core.sets import Ball, BallAt, Box, ConstraintSet, Intersection, L1Ball, Polytope
from .core.tags import ProblemTags, get_tags
from .core.time_limit import checkpoint
from .privacy.ledger import Charge, PrivacyLedger
from .privacy.profile import PrivacyProfile

if TYPE_CHECKING:
    from .config.suite import load_suite, parse_suite
    from .core.exact_samplers import (
        Draw,
        draw_many,
        exact_sampler,
        has_exact_sampler,
        register_exact_sampler,
    )
    from .privacy.gaussian import (
        analytic_gaussian_sigma,
        classical_gaussian_sigma,
        gdp_delta,
        gdp_epsilon,
        gdp_mu,
    )
    from .problems.least_squares import SquaredLoss

#: Public names imported on first use (PEP 562), by the internal module that defines them: their
#: modules import scipy, numba or yaml, or numpy.random (the exact samplers, 12 ms).
_LAZY: dict[str, str] = {
    **{name: "dpbench.core.exact_samplers" for name in (
        "Draw", "draw_many", "exact_sampler", "has_exact_sampler", "register_exact_sampler")},
    "analytic_gaussian_sigma": "dpbench.privacy.gaussian",
    "classical_gaussian_sigma": "dpbench.privacy.gaussian",
    "gdp_delta": "dpbench.privacy.gaussian",
    "gdp_epsilon": "dpbench.privacy.gaussian",
    "gdp_mu": "dpbench.privacy.gaussian",
    "SquaredLoss": "dpbench.problems.least_squares",
    "load_suite": "dpbench.config.suite",
    "parse_suite": "dpbench.config.suite",
}

__all__ = [
    # contracts: mechanisms, problems, their parameters and results
    "Algorithm", "BatchRelease", "Dataset", "LossKernel", "Optimum", "Param", "Problem",
    "RateCard", "Release",
    # constraint sets
    "Ball", "BallAt", "Box", "ConstraintSet", "Intersection", "L1Ball", "Polytope",
    # privacy ledgers and Gaussian calibrations
    "Charge", "PrivacyLedger", "PrivacyProfile", "analytic_gaussian_sigma",
    "classical_gaussian_sigma", "gdp_delta", "gdp_epsilon", "gdp_mu",
    # capabilities: tags and exact samplers
    "Draw", "ProblemTags", "draw_many", "exact_sampler", "get_tags", "has_exact_sampler",
    "register_exact_sampler",
    # a built-in loss to build on
    "SquaredLoss",
    # registry and suites
    "get_algorithm", "get_problem", "load_suite", "parse_suite", "register",
    # the cooperative time limit
    "checkpoint",
    # errors
    "CellTimeout", "DpbenchError", "NoWorkers", "NotApplicable", "PluginError", "SchedulerLost",
    "StoreError", "SuiteError", "UserInputError",
    "__version__",
]

#: The public modules besides this one (each defines ``__all__``).
_PUBLIC_MODULES: tuple[str, ...] = ("dpbench.testing", "dpbench.analysis", "dpbench.audit")

#: The release that removes the deprecated modules (``dpbench.algorithm``, ``dpbench.deadline``,
#: ``dpbench.errors``): a moved public name keeps working for one minor version.
_SHIMS_REMOVED_IN = "0.3"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _deprecated_module(shim: str, moved: Mapping[str, str]
                       ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` of the deprecated module ``shim``, whose names ``moved``
    maps to the module that now defines them: each access warns (``DeprecationWarning``, naming
    the import to use instead) and returns the object of the new home."""

    def message(name: str) -> str:
        home = moved[name]
        head = f"{shim} is deprecated and will be removed in dpbench {_SHIMS_REMOVED_IN}: "
        if home == "dpbench" or home in _PUBLIC_MODULES:
            return head + f"import {name} from {home}"
        return head + (f"{name} is internal (now in {home}, which may change without notice; "
                       "docs/plugins.md, 'Public API')")

    def getattr_(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {shim!r} has no attribute {name!r}")
        warnings.warn(message(name), DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(moved[name]), name)

    def dir_() -> list[str]:
        return sorted(moved)

    return getattr_, dir_
