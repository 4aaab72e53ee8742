"""Rate cards: an algorithm's theoretical excess-risk bound, as data.

A rate card states the bound on the **average** scale (excess of the average loss; BST14 states
sums, so its n-exponents drop by one here). It carries

* ``expression``: the bound as an arithmetic expression in the grid axes (``n``, ``p``,
  ``epsilon``, ``delta``, any extra axis) and the problem's declared constants (``L`` Lipschitz,
  ``D`` diameter, ``Delta`` strong convexity, ``beta`` smoothness). Leading constants that the
  theorem hides in O(.) are set to 1 unless the card says otherwise; analysis compares **slopes**,
  never levels. Multi-term bounds are written as sums so that the local slope along an axis can be
  computed by differentiating the log of the expression.
* ``exponents``: the leading polynomial exponent per axis (logs ignored), for tables.
* ``cap``: the trivial maximum of the excess (``L*D`` on the average scale), used to mark the
  capped regime.
* ``regime``, ``citation``: where the bound holds and which theorem proves it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ALLOWED_FUNCS = {"log": np.log, "sqrt": np.sqrt, "exp": np.exp, "minimum": np.minimum,
                  "maximum": np.maximum, "log1p": np.log1p}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div,
                  ast.Pow, ast.USub, ast.UAdd, ast.Call, ast.Name, ast.Load, ast.Constant)


def _compile(expression: str) -> Any:
    tree = ast.parse(expression, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"rate expression {expression!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_FUNCS
        ):
            raise ValueError(f"rate expression {expression!r}: only {sorted(_ALLOWED_FUNCS)} may be called")
    return compile(tree, "<ratecard>", "eval")


@dataclass(frozen=True)
class RateCard:
    """A theoretical excess-risk bound (average scale), stored as data."""

    expression: str
    exponents: Mapping[str, float]
    citation: str
    regime: str = ""
    cap: str = "L*D"
    quantity: str = "excess_empirical_risk"
    scale: str = "average"
    notes: str = ""
    variables: tuple[str, ...] = field(default=("n", "p", "epsilon", "delta"))

    def __post_init__(self) -> None:
        _compile(self.expression)
        _compile(self.cap)

    def names(self) -> set[str]:
        """Names the expression and the cap refer to."""
        out: set[str] = set()
        for expr in (self.expression, self.cap):
            for node in ast.walk(ast.parse(expr, mode="eval")):
                if isinstance(node, ast.Name) and node.id not in _ALLOWED_FUNCS:
                    out.add(node.id)
        return out

    def _eval(self, expression: str, values: Mapping[str, Any]) -> Any:
        missing = self.names() - set(values)
        needed = {n for n in missing if n in expression}
        if needed:
            raise KeyError(f"rate card needs values for {sorted(needed)}")
        env = dict(_ALLOWED_FUNCS)
        env.update({k: np.asarray(v, dtype=float) for k, v in values.items()})
        with np.errstate(divide="ignore", invalid="ignore"):
            return eval(_compile(expression), {"__builtins__": {}}, env)  # noqa: S307 (AST-checked)

    def bound(self, **values: Any) -> Any:
        """The bound evaluated at the given axis values and constants (broadcasts over arrays)."""
        return self._eval(self.expression, values)

    def cap_value(self, **values: Any) -> Any:
        """The trivial maximum of the excess at the given constants."""
        return self._eval(self.cap, values)

    def local_slope(self, axis: str, rel_step: float = 1e-4, **values: Any) -> Any:
        """d log(bound) / d log(axis): the slope a log-log plot of the bound has at this point."""
        x = np.asarray(values[axis], dtype=float)
        up = dict(values, **{axis: x * math.exp(rel_step)})
        dn = dict(values, **{axis: x * math.exp(-rel_step)})
        return (np.log(self.bound(**up)) - np.log(self.bound(**dn))) / (2 * rel_step)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, stored in the cube's attributes."""
        return {
            "expression": self.expression,
            "exponents": dict(self.exponents),
            "citation": self.citation,
            "regime": self.regime,
            "cap": self.cap,
            "quantity": self.quantity,
            "scale": self.scale,
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RateCard:
        keys = ("expression", "exponents", "citation", "regime", "cap", "quantity", "scale", "notes")
        return cls(**{k: d[k] for k in keys if k in d})
