"""dpbench plugin: diffprivlib 0.6.6's LogisticRegression and LinearRegression as mechanisms."""

from .least_squares import LeastSquares
from .linear import DiffprivlibLinear
from .logistic import DiffprivlibLogistic

__all__ = ["DiffprivlibLinear", "DiffprivlibLogistic", "LeastSquares"]
