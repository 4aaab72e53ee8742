"""Declared keyword parameters of plugins, in the style of scikit-learn's parameter constraints.

A plugin class lists its parameters as ``params = {"name": Param(default, ...)}``. Instances store
the values as given (after validation) as attributes of the same name, so ``repr``, pickling and
the suite fingerprint all see exactly what the user asked for.

Constraints compose: ``none="..."`` also allows ``None`` (YAML ``null``) with the stated meaning,
typically "the public default" of a quantity that depends on n and p, and ``alternatives`` makes a
union of constraints (the value must satisfy one of them)::

    "steps": Param(None, kind="int", low=1, none="the public default 8·p·max(k·n·L·D, p)")
    "h": Param("auto", kind="str", choices=("auto",), alternatives=(Param(0.1, low=0.0),))

A parameter whose default was once spelled with a sentinel (``0 = default``) keeps that sentinel
as its *identity* (``identity_of_none``): seed streams and suite fingerprints see the same value
as before, so earlier cubes stay reproducible bit for bit and earlier stores resume
(:func:`identity_params`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from .errors import UserInputError, did_you_mean


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    Parameters
    ----------
    default:
        Value used when the parameter is not given.
    kind:
        ``"float"``, ``"int"``, ``"str"`` or ``"bool"``.
    choices:
        Allowed values (for ``str`` parameters); ``None`` means any value of ``kind``.
    low, high:
        Inclusive numeric bounds (``None`` for unbounded); ``low_open``/``high_open`` make them strict.
    doc:
        One-line description shown by ``dpbench list``.
    """

    default: Any
    kind: str = "float"
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    doc: str = ""
    none: str | None = None
    alternatives: tuple[Param, ...] = ()
    identity_of_none: Any = None
    #: What seed streams and fingerprints see instead of the value, when it is not the value
    #: itself: a pure function of the value (e.g. a data file's path, which may move, mapped to
    #: its format only, the content entering the identity through a digest parameter).
    identity: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        """Human-readable description of the allowed values."""
        parts = [self._describe_own(), *(alt.describe() for alt in self.alternatives)]
        if self.none is not None:
            parts.append(f"null ({self.none})")
        return " or ".join(parts)

    def _describe_own(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind in ("float", "int"):
            lo = "-inf" if self.low is None else repr(self.low)
            hi = "inf" if self.high is None else repr(self.high)
            lb = "(" if (self.low is None or self.low_open) else "["
            rb = ")" if (self.high is None or self.high_open) else "]"
            return f"{'a number' if self.kind == 'float' else 'an integer'} in {lb}{lo}, {hi}{rb}"
        return f"a {self.kind}"

    def validate(self, owner: str, name: str, value: Any) -> Any:
        """Return the value converted to the declared kind, or raise a clear ``UserInputError``
        naming the parameter and every allowed form."""
        if value is None and self.none is not None:
            return None
        try:
            return self._validate_own(owner, name, value)
        except UserInputError:
            for alt in self.alternatives:
                try:
                    return alt.validate(owner, name, value)
                except UserInputError:
                    pass
            if not self.alternatives and self.none is None:
                raise
            raise UserInputError(f"{owner}: parameter {name!r} must be {self.describe()}, "
                                 f"got {value!r}") from None

    def _validate_own(self, owner: str, name: str, value: Any) -> Any:
        where = f"{owner}: parameter {name!r}"
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise UserInputError(f"{where} must be true or false, got {value!r}")
            return value
        if self.kind == "str":
            if not isinstance(value, str):
                raise UserInputError(f"{where} must be {self.describe()}, got {value!r}")
            if self.choices is not None and value not in self.choices:
                raise UserInputError(
                    f"{where} must be {self.describe()}, got {value!r}"
                    + did_you_mean(value, [str(c) for c in self.choices])
                )
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise UserInputError(f"{where} must be {self.describe()}, got {value!r}")
        try:
            as_float = float(value)
        except OverflowError:  # an integer beyond any float (1e400 written out)
            raise UserInputError(f"{where} must be {self.describe()}, got an integer of "
                                 f"{len(str(value))} digits") from None
        if self.kind == "int":
            if not math.isfinite(as_float) or as_float != int(value):
                raise UserInputError(f"{where} must be {self.describe()}, got {value!r}")
            value = int(value)
        else:
            value = float(value)
            if math.isnan(value):
                raise UserInputError(f"{where} must be {self.describe()}, got nan")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise UserInputError(f"{where} must be {self.describe()}, got {value!r}")
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise UserInputError(f"{where} must be {self.describe()}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise UserInputError(f"{where} must be {self.describe()}, got {value!r}")
        return value


def resolve_params(owner: str, declared: Mapping[str, Param], given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``given`` against ``declared`` and fill defaults; unknown names suggest the closest."""
    unknown = [k for k in given if k not in declared]
    if unknown:
        k = unknown[0]
        allowed = ", ".join(sorted(declared)) or "(none)"
        raise UserInputError(
            f"{owner}: unknown parameter {k!r}{did_you_mean(k, declared)}; allowed: {allowed}"
        )
    out: dict[str, Any] = {}
    for name, spec in declared.items():
        value = given[name] if name in given else spec.default
        out[name] = spec.validate(owner, name, value)
    return out


def identity_params(declared: Mapping[str, Param], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as seed streams and fingerprints see them: ``None`` of a parameter that declares
    ``identity_of_none`` is replaced by it (the sentinel that spelled its default before), and
    the value of a parameter that declares ``identity`` by ``identity(value)``."""
    out = dict(values)
    for name, spec in declared.items():
        if out.get(name, 0) is None and spec.identity_of_none is not None:
            out[name] = spec.identity_of_none
        elif spec.identity is not None and name in out:
            out[name] = spec.identity(out[name])
    return out


class Parametrized:
    """Base of plugins with declared keyword parameters (problems and algorithms).

    ``__init__`` validates the keywords against ``params`` and stores each value as an attribute
    of the same name, as given (scikit-learn style); ``get_params`` returns them.
    """

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    _plugin_kind: ClassVar[str] = "plugin"

    def __init__(self, **params: Any) -> None:
        values = resolve_params(f"{self._plugin_kind} {self.name!r}", self.params, params)
        for key, value in values.items():
            setattr(self, key, value)

    def get_params(self) -> dict[str, Any]:
        """The parameter values, as stored."""
        return {k: getattr(self, k) for k in self.params}

    def identity_params(self) -> dict[str, Any]:
        """The parameter values as seed streams and fingerprints see them (:func:`identity_params`)."""
        return identity_params(self.params, self.get_params())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
