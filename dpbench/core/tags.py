"""Capability tags: what a problem declares about its loss, for the mechanisms that can use it.

A mechanism that can do better on some losses (a tighter privacy calibration, a specialised
solver, a closed-form reference curve) asks :func:`get_tags` instead of testing the problem's
class: a problem states its capabilities in :meth:`Problem.__dpbench_tags__
<dpbench.core.problem.Problem.__dpbench_tags__>`, and mechanisms never import a concrete problem
(the pattern of scikit-learn's estimator tags). docs/writing-a-plugin.md, 'Declaring
capabilities', is the user guide.

Some tags calibrate privacy (``hessian_rank``, ``gradient_shift_dim``, ``isotropic_quadratic``):
a wrong claim breaks the guarantee. They are therefore **claims about one loss**, and
:func:`get_tags` drops all of them (returns ``ProblemTags()``) when the problem's class no longer
computes the loss of the class that made them — see :func:`claims_hold` for the rule. The exact
samplers of :mod:`dpbench.core.exact_samplers` follow the same rule.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .problem import Problem

__all__ = ["CLOSED_FORMS", "LOSS_DEFINING", "ProblemTags", "claims_hold", "get_tags"]

#: Attributes through which a problem defines its loss, its data law or its domain. A claim made
#: by class K (a tag or a registered exact sampler) holds for a problem only while the problem's
#: class resolves every one of them to K's own definition. ``_phi``, ``_dphi`` and ``_ridge_term``
#: are how :class:`dpbench.problems._linear_law.MarginLossProblem` builds ``loss`` and ``grad``;
#: ``kernel`` is the compiled copy of the loss; ``generate`` is the data law (the closed-form
#: curves and the row-norm bound ρ of ``isotropic_quadratic`` describe it); ``constraint`` is the
#: set C the samplers and the radius R of ``isotropic_quadratic`` refer to.
LOSS_DEFINING: tuple[str, ...] = (
    "loss", "grad", "risk", "full_grad", "kernel", "generate", "constraint",
    "_phi", "_dphi", "_ridge_term",
)

#: The families of closed-form expected-excess curves of :mod:`dpbench.theory.expected_excess`
#: (oracles O1–O7 of docs/bst14.md and the F1 curves of docs/langevin.md) a problem can declare.
CLOSED_FORMS: tuple[str, ...] = ("", "lb_lin", "lb_quad", "kink_sc", "mean_est")


@dataclass(frozen=True)
class ProblemTags:
    """Declared capabilities of a problem's loss. The defaults claim nothing.

    * ``hessian_rank``: a bound r on the rank of the data-dependent Hessian part
      ∇²ℓ(θ; d) − ΔI, for every d in the data universe and every θ in C (KST12's rank condition;
      r = 1 for margin losses φ(y⟨θ, x⟩) + (λ/2)‖θ‖²). ``None``: no claim, mechanisms use r = p.
      **Privacy-relevant**: objective perturbation's Jacobian charge is r·log(1 + (β − Δ)/(Λ + nΔ))
      (docs/bst14.md, Errata 5 and 6).
    * ``gradient_shift_dim``: the dimension d of a fixed subspace holding every gradient shift
      ∇ℓ(θ; d′) − ∇ℓ(θ; d) of one replaced example (span{x, x′}, d = 2, for margin losses;
      mechanisms use min(p, d)). ``None``: d = p. **Privacy-relevant**: it sets objective
      perturbation's pointwise Gaussian σ
      (:func:`dpbench.privacy.gaussian.pointwise_gaussian_sigma`).
    * ``isotropic_quadratic``: (ρ, R) when ℓ(θ; d) = ½‖θ − d‖² on C = B(0, R) with every row of
      norm ≤ ρ (a public bound). The Gibbs law is then N(d̄, I/β) truncated to C and the ``gibbs``
      mechanism's ``gaussian`` calibration applies (GTU A4, docs/langevin.md). **Privacy-relevant.**
    * ``softplus_margin``: the ridge λ when ℓ(θ; x, y) = log(1 + exp(−y⟨θ, x⟩)) + (λ/2)‖θ‖²
      (labelled data), so objective perturbation may solve with the Newton solver
      :class:`dpbench.numerics.solvers.ball.SoftplusMargin`; ``None`` otherwise (accuracy only).
    * ``closed_form``: the family of closed-form expected-excess curves of
      :mod:`dpbench.theory.expected_excess` that describes this loss *and* data law (one of
      :data:`CLOSED_FORMS`; mechanisms' ``oracle_excess`` / ``oracle_kind`` read it, and the curve
      reads the radius of the ball ``constraint``). Accuracy references only.
    """

    hessian_rank: int | None = None
    gradient_shift_dim: int | None = None
    isotropic_quadratic: tuple[float, float] | None = None
    softplus_margin: float | None = None
    closed_form: str = ""

    def __post_init__(self) -> None:
        for name in ("hessian_rank", "gradient_shift_dim"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"ProblemTags.{name} must be None or an int >= 1, got {value!r}")
        if self.closed_form not in CLOSED_FORMS:
            raise ValueError(f"ProblemTags.closed_form must be one of {CLOSED_FORMS}, got "
                             f"{self.closed_form!r}")


def _resolve(cls: type, attribute: str) -> object:
    """The object ``attribute`` resolves to on ``cls`` (the raw class-dict entry, so properties
    and static methods compare by identity), or ``None`` when no class of the MRO defines it."""
    for klass in cls.__mro__:
        if attribute in vars(klass):
            return vars(klass)[attribute]
    return None


def claims_hold(cls: type, owner: type) -> bool:
    """Whether claims made by class ``owner`` about its loss still describe class ``cls``.

    ``owner`` is a class of ``cls.__mro__`` (the one that declares ``__dpbench_tags__``, or the one
    an exact sampler is registered for). The claims hold when every attribute of
    :data:`LOSS_DEFINING` resolves on ``cls`` to the same definition as on ``owner``: in particular
    when no class of ``cls.__mro__`` below ``owner`` (from ``cls`` down to, not including,
    ``owner``) defines one of them. A subclass that overrides ``loss``, ``grad``, φ, the data law
    or C computes another loss, and a claim about the parent's loss — a rank-1 Hessian, an exact
    sampler of the parent's Gibbs law — would then calibrate privacy (or sample) for a loss that
    is no longer the one evaluated. Such a subclass starts with no claims and declares its own.
    """
    return _claims_hold(cls, owner)


@functools.lru_cache(maxsize=512)
def _claims_hold(cls: type, owner: type) -> bool:
    # Classes are not redefined once created, so the answer is cached per (class, owner): a
    # mechanism reads tags in every release, and resolving the MRO each time cost more than the
    # release of a simple mechanism.
    return all(_resolve(cls, name) is _resolve(owner, name) for name in LOSS_DEFINING)


def get_tags(problem: Problem) -> ProblemTags:
    """The capabilities ``problem`` declares, or ``ProblemTags()`` when the claim does not hold.

    The only way mechanisms read tags. The declaring class is the first class of
    ``type(problem).__mro__`` that defines ``__dpbench_tags__``; if a class between
    ``type(problem)`` and it redefines the loss (:func:`claims_hold`), the declaration is about
    another loss and nothing is claimed: a subclass that changes the loss must not inherit, e.g.,
    a rank-1 Hessian claim that calibrates objective perturbation's privacy.
    """
    cls = type(problem)
    for owner in cls.__mro__:
        if "__dpbench_tags__" in vars(owner):
            break
    else:  # not a Problem: nothing declared
        return ProblemTags()
    if not claims_hold(cls, owner):
        return ProblemTags()
    tags = problem.__dpbench_tags__()
    if not isinstance(tags, ProblemTags):
        raise TypeError(f"{cls.__name__}.__dpbench_tags__ must return a ProblemTags, got "
                        f"{type(tags).__name__}")
    return tags
