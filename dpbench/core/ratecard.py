"""Rate cards: an algorithm's theoretical excess-risk bound, as data.

A rate card states the bound on the **average** scale (excess of the average loss; BST14 states
sums, so its n-exponents drop by one here). It carries

* ``expression``: the bound as an arithmetic expression in the grid axes (``n``, ``p``,
  ``epsilon``, ``delta``, any extra axis) and the problem's declared constants (``L`` Lipschitz,
  ``D`` diameter, ``Delta`` strong convexity, ``beta`` smoothness, and the data bounds
  ``data_norm``, ``label_bound`` a problem may declare:
  :meth:`dpbench.core.problem.Problem.constants`). Leading constants that the theorem hides in
  O(.) are set to 1 unless the card says otherwise; analysis compares **slopes**, never levels.
  Multi-term bounds are written as sums so that the local slope along an axis can be computed by
  differentiating the log of the expression.
* ``exponents``: the leading polynomial exponent per axis (logs ignored), for tables.
* ``cap``: the trivial maximum of the excess (``L*D`` on the average scale), used to mark the
  capped regime.
* ``regime``, ``citation``: where the bound holds and which theorem proves it.
* ``defaults``: optional constants (such as the ℓ∞ gradient bound ``L_inf`` of
  :data:`dpbench.core.problem.NORM_CONSTANTS`) with the expression each falls back to when a
  problem does not declare it.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ALLOWED_FUNCS = {"log": np.log, "sqrt": np.sqrt, "exp": np.exp, "minimum": np.minimum,
                  "maximum": np.maximum, "log1p": np.log1p}
_ARITY = {"minimum": 2, "maximum": 2}
_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide,
           ast.Pow: np.power}
_UNARY = {ast.USub: np.negative, ast.UAdd: np.positive}

#: Bounds of the expression grammar (rate cards are read back from stores, which are shared and
#: downloaded: an expression is data, parsed and interpreted, never compiled or eval'd).
MAX_EXPRESSION_CHARS = 2000
MAX_NODES = 400
MAX_DEPTH = 40
MAX_LITERAL = 1e12
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _depth(node: ast.AST) -> int:
    children = list(ast.iter_child_nodes(node))
    return 1 + (max(_depth(c) for c in children) if children else 0)


@functools.lru_cache(maxsize=1024)
def _parse(expression: str) -> ast.expr:
    """The checked syntax tree of a rate expression: arithmetic (+ − × ÷ and powers), the
    functions of ``_ALLOWED_FUNCS``, names, and finite numeric literals, within the size bounds
    above; :class:`ValueError` naming what is wrong otherwise."""
    if not isinstance(expression, str):
        raise ValueError(f"rate expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"rate expression of {len(expression)} characters; at most "
                         f"{MAX_EXPRESSION_CHARS} are allowed")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"rate expression {expression[:80]!r} is not an arithmetic "
                         f"expression: {exc}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES or _depth(tree) > MAX_DEPTH:
        raise ValueError(f"rate expression {expression[:80]!r} is too large (at most "
                         f"{MAX_NODES} nodes, nesting depth {MAX_DEPTH})")
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Load,
               ast.Constant, *_BINOPS, *_UNARY)
    for node in nodes:
        if not isinstance(node, allowed):
            raise ValueError(f"rate expression {expression[:80]!r}: {type(node).__name__} is "
                             "not allowed")
        if isinstance(node, ast.Constant) and not (
                type(node.value) in (int, float) and math.isfinite(node.value)
                and abs(node.value) <= MAX_LITERAL):
            raise ValueError(f"rate expression {expression[:80]!r}: literal {node.value!r:.40} "
                             f"is not a finite number of magnitude <= {MAX_LITERAL:g}")
        if isinstance(node, ast.Name) and not _NAME.fullmatch(node.id):
            raise ValueError(f"rate expression {expression[:80]!r}: bad name {node.id[:40]!r}")
        if isinstance(node, ast.Call):
            fn = node.func.id if isinstance(node.func, ast.Name) else None
            if fn not in _ALLOWED_FUNCS or node.keywords:
                raise ValueError(f"rate expression {expression[:80]!r}: only "
                                 f"{sorted(_ALLOWED_FUNCS)} may be called (positionally)")
            if len(node.args) != _ARITY.get(fn, 1):
                raise ValueError(f"rate expression {expression[:80]!r}: {fn} takes "
                                 f"{_ARITY.get(fn, 1)} argument(s), got {len(node.args)}")
    return tree.body


def _interpret(node: ast.expr, env: Mapping[str, np.ndarray]) -> Any:
    """Evaluate a checked tree on float arrays (numpy overflows to inf; nothing is compiled)."""
    if isinstance(node, ast.Constant):
        return np.float64(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_interpret(node.left, env), _interpret(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_interpret(node.operand, env))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return _ALLOWED_FUNCS[node.func.id](*(_interpret(a, env) for a in node.args))


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
    #: Optional constants and the expression each falls back to when a problem does not declare
    #: it (e.g. ``{"L_inf": "L"}``: :data:`dpbench.core.problem.NORM_DEFAULTS`).
    defaults: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _parse(self.expression)
        _parse(self.cap)
        if not isinstance(self.defaults, Mapping) or len(self.defaults) > 16:
            raise ValueError("rate card defaults must be a mapping of at most 16 names to "
                             "expressions")
        for name, expr in self.defaults.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ValueError(f"rate card default: bad name {str(name)[:40]!r}")
            _parse(expr)

    def names(self) -> set[str]:
        """Names the expression and the cap refer to."""
        out: set[str] = set()
        for expr in (self.expression, self.cap):
            for node in ast.walk(_parse(expr)):
                if isinstance(node, ast.Name) and node.id not in _ALLOWED_FUNCS:
                    out.add(node.id)
        return out

    def _eval(self, expression: str, values: Mapping[str, Any]) -> Any:
        if any(name not in values for name in self.defaults):
            values = dict(values)
            for name, expr in self.defaults.items():
                if name not in values:
                    node = _parse(expr)
                    used = {m.id for m in ast.walk(node) if isinstance(m, ast.Name)} - set(
                        _ALLOWED_FUNCS)
                    if used <= set(values):
                        env = {k: np.asarray(v, dtype=float) for k, v in values.items()}
                        values[name] = _interpret(node, env)
        missing = self.names() - set(values)
        needed = {n for n in missing if n in expression}
        if needed:
            raise KeyError(f"rate card needs values for {sorted(needed)}")
        env = {k: np.asarray(v, dtype=float) for k, v in values.items()}
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _interpret(_parse(expression), env)

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
            **({"defaults": dict(self.defaults)} if self.defaults else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RateCard:
        keys = ("expression", "exponents", "citation", "regime", "cap", "quantity", "scale", "notes",
                "defaults")
        return cls(**{k: d[k] for k in keys if k in d})
