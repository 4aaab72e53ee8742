"""Example dpbench plugin: (ε, δ)-DP Gaussian output perturbation."""

from .mechanism import GaussianOutputPerturbation

__all__ = ["GaussianOutputPerturbation"]
