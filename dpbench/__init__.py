"""dpbench: distributed benchmarks of differentially private convex optimisation against theory."""

from ._version import __version__
from .core.algorithm import Algorithm, BatchRelease, Release
from .core.errors import NotApplicable
from .core.params import Param
from .core.problem import Dataset, Optimum, Problem
from .core.ratecard import RateCard
from .core.registry import register
from .core.sets import Ball, ConstraintSet
from .core.time_limit import checkpoint
from .privacy.ledger import Charge, PrivacyLedger

__all__ = [
    "Algorithm", "Ball", "BatchRelease", "Charge", "ConstraintSet", "Dataset", "NotApplicable", "Optimum", "Param",
    "PrivacyLedger", "Problem", "RateCard", "Release", "__version__", "checkpoint", "register",
]
