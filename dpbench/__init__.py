"""dpbench: distributed benchmarks of differentially private convex optimisation against theory."""

from ._version import __version__
from .algorithm import Algorithm, Release
from .constraints import Ball, ConstraintSet
from .params import Param
from .privacy.ledger import Charge, PrivacyLedger
from .problem import Dataset, Optimum, Problem
from .ratecard import RateCard

__all__ = [
    "Algorithm", "Ball", "Charge", "ConstraintSet", "Dataset", "Optimum", "Param",
    "PrivacyLedger", "Problem", "RateCard", "Release", "__version__",
]
