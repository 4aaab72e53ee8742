"""The grid point: one (n, p, ε, δ, extra axes) of an experiment, typed, from the plan to the
cell, the mechanism call and the audit (docs/architecture.md, "The walk of ε").

A suite's grid (:class:`dpbench.config.suite.Experiment`) gives each axis a list of values; a
:class:`GridPoint` is one value of every axis. Its :meth:`~GridPoint.identity` is the mapping
that keys the cell's random streams (:func:`dpbench.core.seeding.mechanism_identity`): the same
keys and values the untyped point carried before it was typed, so stores written earlier resume
bit for bit (:func:`dpbench.core.seeding.canonical` hashes 1 and 1.0 alike and sorts keys).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CORE_AXES", "GridPoint"]

#: The axes every experiment has, in cube order (δ = 0 when a suite leaves it out).
CORE_AXES = ("n", "p", "epsilon", "delta")


@dataclass(frozen=True)
class GridPoint:
    """One grid point: the dataset size ``n``, dimension ``p``, the privacy budget (``epsilon``,
    ``delta``) and the values of the experiment's extra axes, each as the suite gave it, split by
    where they go: ``problem_axes`` are parameters of every problem, ``algorithm_axes`` of some
    mechanism ((axis, value) pairs in grid order; docs/suites.md, "Extra axes")."""

    n: int
    p: int
    epsilon: float
    delta: float = 0.0
    problem_axes: tuple[tuple[str, Any], ...] = ()
    algorithm_axes: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_values(cls, values: Mapping[str, Any],
                    routing: Mapping[str, str] | None = None) -> GridPoint:
        """The point of a mapping of every axis to its value (``delta`` defaults to 0);
        ``routing`` sends each extra axis to ``"problem"`` or ``"algorithm"`` (the default)."""
        route = routing or {}
        extra = [(str(k), v) for k, v in values.items() if k not in CORE_AXES]
        return cls(int(values["n"]), int(values["p"]), float(values["epsilon"]),
                   float(values.get("delta", 0.0)),
                   tuple((k, v) for k, v in extra if route.get(k) == "problem"),
                   tuple((k, v) for k, v in extra if route.get(k) != "problem"))

    def value(self, axis: str) -> Any:
        """The value of one axis, core or extra; ``KeyError`` naming it when absent."""
        if axis in CORE_AXES:
            return getattr(self, axis)
        for name, v in (*self.problem_axes, *self.algorithm_axes):
            if name == axis:
                return v
        raise KeyError(axis)

    def identity(self) -> dict[str, Any]:
        """Every axis and its value: the point's part of a cell's identity (module docstring)."""
        return {"n": self.n, "p": self.p, "epsilon": self.epsilon, "delta": self.delta,
                **dict(self.problem_axes), **dict(self.algorithm_axes)}

    def for_privacy(self, privacy: str) -> GridPoint:
        """The point as a mechanism of kind ``privacy`` runs at it: the one place where a grid
        point becomes a mechanism's budget and its randomness's identity.

        A pure ε-DP mechanism runs at δ = 0 whatever the grid's δ: ε-DP is (ε, 0)-DP, which
        implies (ε, δ)-DP for every δ ≥ 0 (Dwork and Roth 2014, *The Algorithmic Foundations of
        Differential Privacy*, Def. 2.4), so an experiment may hold pure and (ε, δ) mechanisms
        side by side over a δ axis that the pure ones ignore, and the comparison is fair to the
        (ε, δ) ones. The point returned, with δ = 0, also keys the cell's mechanism stream: a
        pure mechanism's values are identical at every δ of a grid and equal to those of a δ = 0
        experiment. Every other kind runs at the grid point itself: (ε, δ) mechanisms at its δ
        (validation refuses δ = 0 for them), non-private references receive it and ignore it
        (their identity keeps the grid's ε and δ).
        """
        if privacy == "pure" and self.delta != 0:
            return dataclasses.replace(self, delta=0.0)
        return self

    def describe(self) -> str:
        """``n=…, p=…, ε=…, δ=…`` and the extra axes, for messages."""
        extra = "".join(f", {k}={v!r}" for k, v in (*self.problem_axes, *self.algorithm_axes))
        return f"n={self.n}, p={self.p}, ε={self.epsilon:g}, δ={self.delta:g}{extra}"
