"""Exact samplers of the laws the sampling mechanisms draw from, registered per problem class.

A sampling mechanism is certified only when it draws exactly from its target law; a problem whose
law has a closed-form sampler registers a factory for it here, next to its class::

    @register_exact_sampler("gibbs", MyProblem)
    def _my_gibbs(problem: MyProblem, data: Dataset, k: float, region: ConstraintSet):
        ...                      # return draw(rng) -> θ, or None for this data / region
        return draw

and mechanisms ask :func:`exact_sampler` (a draw function or ``None``) or :func:`has_exact_sampler`.
The laws and the arguments after ``(problem, data)``:

* ``"gibbs"`` ``(k, region)``: the density ∝ exp(−k·Σᵢ ℓ(θ; dᵢ)) on ``region`` ⊆ C, k the
  temperature on the **sum** loss (BST14 Algorithm 2, k = ε/(2L‖C‖); ``region`` is C or a localised
  C ∩ B(θ₀, r₀), Algorithm 4). The exponential mechanism, the GTU Gibbs sampler (k = β/n) and the
  iterated exponential mechanism use it (docs/bst14.md, 'Exact samplers'; docs/langevin.md).
* ``"regularized_gibbs"`` ``(k, mu, center)``: ∝ exp(−k·F(θ; D) − (kμ/2)‖θ − center‖²) on C, F the
  **average** loss (the regularized exponential mechanism of Gopi–Lee–Liu 2022, Thm 25/28;
  docs/rem.md, 'The mechanism'). A problem without its own factory gets the ``"gibbs"`` sampler at
  temperature k/n on C when μ = 0 (the plain exponential mechanism on the average loss).
* ``"rashomon"`` ``(beta, psi)``: ∝ exp(−β·max{F(θ), F* + ψ}) on C, F* = min_C F (GTU Def. 1.4,
  Thm 2.1; docs/langevin.md, 'The Rashomon law on F1').

A factory returns ``None`` when no exact sampler exists for this data or region; the mechanism
then reports the cell not applicable or falls back to MCMC.

**Many draws at once.** A draw function may carry a vectorised form as its attribute ``many``:
``draw.many(rng, size)`` returns ``size`` independent exact samples as an array of shape
``(size, p)``, each row with the law of ``draw(rng)`` (not equal to any particular call: one
generator feeds them all). :func:`draw_many` uses it when present and loops ``draw`` otherwise;
the mechanisms' vectorised audit paths (``Algorithm.run_batch``) call it.

**A region per row.** A ``"gibbs"`` draw built for a ``region`` that is an intersection of m balls
(a :class:`~dpbench.core.sets.Ball` or an :class:`~dpbench.core.sets.Intersection` of balls) may
also carry ``draw.many_at(rng, centers)``: ``centers`` of shape ``(size, m, p)``, and row i drawn
exactly from the law the factory would give for the region whose j-th ball (in the order of
:func:`dpbench.numerics.samplers.mcmc.region_balls`) is re-centred at ``centers[i, j]``, radii
unchanged. It serves mechanisms whose region is localised around an earlier private release, one
per row (BST14 Algorithm 4, GTU Algorithm 1). :func:`draw_many_at` returns ``None`` when the draw
has no such form (the caller then builds each row's sampler).

**Lookup and the override rule.** The factory of the first class of ``type(problem).__mro__``
registered for the law is used, but only while ``type(problem)`` computes that class's loss
(:func:`dpbench.core.tags.claims_hold`, the rule of the capability tags): a subclass that
overrides ``loss``, ``grad``, the data law or C has another Gibbs law, and the parent's sampler
would draw from the wrong one — a certified release of an uncertified law. Such a subclass has no
exact sampler until it registers its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numpy as np

from .tags import claims_hold

if TYPE_CHECKING:
    from .problem import Dataset, Problem

__all__ = ["LAWS", "Draw", "draw_many", "draw_many_at", "exact_sampler", "has_exact_sampler",
           "register_exact_sampler"]

#: A draw function: one exact sample θ (shape (p,)) per call, from the injected generator.
Draw = Callable[[np.random.Generator], np.ndarray]

#: The laws and the names of their arguments after ``(problem, data)`` (module docstring).
LAWS: dict[str, tuple[str, ...]] = {
    "gibbs": ("k", "region"),
    "regularized_gibbs": ("k", "mu", "center"),
    "rashomon": ("beta", "psi"),
}

F = TypeVar("F", bound=Callable[..., Any])

_FACTORIES: dict[str, dict[type, Callable[..., Draw | None]]] = {law: {} for law in LAWS}


def _check_law(law: str) -> None:
    if law not in LAWS:
        raise ValueError(f"unknown exact-sampler law {law!r}; the laws are "
                         f"{', '.join(repr(k) for k in LAWS)}")


def register_exact_sampler(law: str, problem_cls: type) -> Callable[[F], F]:
    """Decorator: register ``factory(problem, data, *args) -> Draw | None`` as the exact sampler
    of ``law`` for ``problem_cls`` and the subclasses that keep its loss (module docstring).

    Registering again for the same (law, class) replaces the factory (a reloaded module).
    """
    _check_law(law)
    from .problem import Problem

    if not (isinstance(problem_cls, type) and issubclass(problem_cls, Problem)):
        raise TypeError(f"register_exact_sampler({law!r}, ...): {problem_cls!r} is not a Problem "
                        "subclass")

    def decorator(factory: F) -> F:
        _FACTORIES[law][problem_cls] = factory
        return factory

    return decorator


def _factory(law: str, cls: type) -> Callable[..., Draw | None] | None:
    """The factory registered for the first class of ``cls.__mro__``, if the override rule keeps
    it (else ``None``)."""
    registered = _FACTORIES[law]
    for owner in cls.__mro__:
        if owner in registered:
            return registered[owner] if claims_hold(cls, owner) else None
    return None


def has_exact_sampler(law: str, problem: Problem) -> bool:
    """Whether an exact sampler of ``law`` may exist for ``problem`` (a usable factory is
    registered; its factory may still return ``None`` for some data or region). For
    ``"regularized_gibbs"`` a usable ``"gibbs"`` factory counts too (the μ = 0 default)."""
    _check_law(law)
    if _factory(law, type(problem)) is not None:
        return True
    return law == "regularized_gibbs" and _factory("gibbs", type(problem)) is not None


def exact_sampler(law: str, problem: Problem, data: Dataset, *args: Any) -> Draw | None:
    """The exact sampler of ``law`` for ``problem`` on ``data`` (a draw function), or ``None``.

    ``args`` are the law's arguments after ``(problem, data)`` (:data:`LAWS`): ``(k, region)``,
    ``(k, mu, center)`` or ``(beta, psi)``. Raises ``ValueError`` for an unknown law and
    ``TypeError`` for a wrong number of arguments.
    """
    _check_law(law)
    if len(args) != len(LAWS[law]):
        raise TypeError(f"exact_sampler({law!r}, problem, data, ...) takes the arguments "
                        f"{LAWS[law]}, got {len(args)}")
    factory = _factory(law, type(problem))
    if factory is not None:
        return factory(problem, data, *args)
    if law == "regularized_gibbs":
        k, mu, _ = args
        if mu == 0:  # the plain exponential mechanism on the average loss: k/n on the sum
            return exact_sampler("gibbs", problem, data, k / data.n, problem.constraint)
    return None


def draw_many(draw: Draw, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` independent samples of an exact sampler as rows of a ``(size, p)`` array: its
    vectorised form ``draw.many(rng, size)`` when the factory attached one (module docstring),
    else ``size`` calls of ``draw(rng)``."""
    many = getattr(draw, "many", None)
    if many is not None:
        out = np.asarray(many(rng, int(size)), dtype=float)
        if out.ndim != 2 or out.shape[0] != int(size):
            raise ValueError(f"an exact sampler's many(rng, {size}) returned shape {out.shape}; "
                             f"expected ({size}, p)")
        return out
    return np.stack([np.asarray(draw(rng), dtype=float) for _ in range(int(size))])


def draw_many_at(draw: Draw, rng: np.random.Generator, centers: np.ndarray) -> np.ndarray | None:
    """One sample per row of ``centers`` (size, m, p) on the draw's region re-centred row by row,
    through ``draw.many_at`` (module docstring, 'A region per row'); ``None`` when the factory
    attached no such form."""
    many_at = getattr(draw, "many_at", None)
    if many_at is None:
        return None
    centers = np.asarray(centers, dtype=float)
    out = np.asarray(many_at(rng, centers), dtype=float)
    if out.shape != (centers.shape[0], centers.shape[2]):
        raise ValueError(f"an exact sampler's many_at(rng, centers of shape {centers.shape}) "
                         f"returned shape {out.shape}; expected ({centers.shape[0]}, "
                         f"{centers.shape[2]})")
    return out
