"""Samplers of the exponential mechanism density ∝ exp(−k·Σᵢ ℓ(θ; dᵢ)) (BST14 Algorithm 2).

* :func:`~dpbench.numerics.samplers.expmech.sample_expmech`: the single entry point (exact or MCMC);
* :mod:`~dpbench.numerics.samplers.ball`: exact samplers on balls (LB-Lin via von Mises–Fisher, oracle O1;
  LB-Quad via rejection, O7; docs/bst14.md, "Oracle curves and reference runs");
* :mod:`~dpbench.numerics.samplers.mcmc`: random-walk Metropolis and MALA restricted to a region
  (docs/bst14.md, "Derived constants").
"""

from .expmech import sample_expmech

__all__ = ["sample_expmech"]
