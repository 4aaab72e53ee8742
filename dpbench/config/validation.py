"""One validation toolkit for every configuration file: suites (:mod:`dpbench.config.suite`), audit
specs (:mod:`dpbench.config.audit`) and cluster profiles (:mod:`dpbench.config.cluster`).

Each validator walks its input once, adds every problem it finds to one :class:`Errors`
collector (a path such as ``experiments[2].grid.n[0]`` and a message naming the allowed values),
and raises a single user-input error listing all of them at the end. The files themselves are
read by :mod:`dpbench.config.yaml_io`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import registry
from ..core.errors import UserInputError, did_you_mean
from ..core.schema import MAX_LABEL_CHARS

IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*\Z")  # \Z: no trailing newline (as $ allows)

#: Names that would collide with a store's own files, or with device names.
RESERVED_NAMES = frozenset({"zarr.json", "dpbench.lock", "con", "prn", "aux", "nul",
                            *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))})
#: Store groups dpbench itself uses (not allowed as experiment or audit names).
RESERVED_GROUPS = frozenset({"audit"})
MAX_NAME_CHARS = MAX_LABEL_CHARS


def check_name(errs: Errors, path: str, name: Any, group: bool = True) -> bool:
    """A suite, experiment or audit name: an identifier (letters, digits, ``_ . -``, starting
    with a letter) of at most 100 characters that is not reserved (:data:`RESERVED_NAMES`, also
    with an extension, e.g. ``nul.txt``; nothing ending in ``.json``; for a ``group`` name also
    :data:`RESERVED_GROUPS`): names become zarr groups and report files."""
    if not (isinstance(name, str) and IDENT.match(name) and len(name) <= MAX_NAME_CHARS):
        errs.add(path, f"required identifier (letters, digits, _ . -; at most {MAX_NAME_CHARS} "
                       f"characters), got {short(name)}")
        return False
    low = name.lower()
    reserved = RESERVED_NAMES | (RESERVED_GROUPS if group else frozenset())
    if low in reserved or low.split(".")[0] in reserved or low.endswith(".json"):
        errs.add(path, f"{name!r} is reserved (a store file, group or device name); not allowed: "
                       f"zarr.json, dpbench.lock, *.json{', audit' if group else ''}, CON, PRN, "
                       "AUX, NUL, COM0-9, LPT0-9")
        return False
    return True


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (error messages never echo huge values)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def canonical(value: Any) -> Any:
    """The value two grid entries are compared by: numbers (not bools) as floats, so 1 and 1.0
    are duplicates; anything else by its repr."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float is only equal to itself
            return value
    return repr(value)


def has_duplicates(values: list[Any]) -> bool:
    return len({canonical(v) for v in values}) != len(values)


@dataclass(frozen=True)
class PluginSpec:
    """A problem or algorithm variant of an experiment: coordinate label, registry name, class and
    fixed parameters (defaults filled in)."""

    label: str
    name: str
    params: dict[str, Any]
    cls: type[Any]

    def build(self, axis_values: Mapping[str, Any]) -> Any:
        """The instance at a grid point: fixed parameters plus the extra axes it declares."""
        own = {k: v for k, v in axis_values.items() if k in self.cls.params}
        return self.cls(**self.params, **own)


ProblemSpec = PluginSpec
AlgorithmSpec = PluginSpec


class Errors:
    """Collects every problem of one input as ``path: message`` lines."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, msg: str) -> None:
        self.items.append(f"{path}: {msg}" if path else msg)

    def unknown_keys(self, path: str, obj: Mapping[str, Any], allowed: tuple[str, ...],
                     what: str = "unknown field") -> None:
        for k in obj:
            if k not in allowed:
                self.add(f"{path}.{k}" if path else str(k),
                         f"{what}{did_you_mean(str(k), allowed)}; allowed: {', '.join(allowed)}")


def check_keys(errs: Errors, path: str, obj: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    errs.unknown_keys(path, obj, allowed)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: The privacy budgets a grid may hold: beyond them ε² and 1/ε² under- or overflow the rate
#: formulas (an ε of 1e-300 made every cell of output perturbation fail), and no privacy claim
#: is meaningful anyway.
MIN_EPSILON, MAX_EPSILON = 1e-6, 1e6
#: The largest dataset sizes and dimensions a grid may hold: a larger value is a typo (a dataset
#: is 8·n·p bytes; an n of 2**63 does not fit the cube's int64 coordinate).
MAX_N, MAX_P = 10**9, 10**6


def check_axis(errs: Errors, path: str, axis: str, values: Any) -> list[Any] | None:
    if not isinstance(values, list):
        values = [values]
    if not values:
        errs.add(path, "empty grid; give at least one value")
        return None
    ok = True
    for i, v in enumerate(values):
        where = f"{path}[{i}]"
        if axis == "n" and not (is_int(v) and 2 <= v <= MAX_N):
            errs.add(where, f"n must be an integer >= 2, got {short(v)}; allowed: integers "
                            f"from 2 to {MAX_N:,}"); ok = False
        elif axis == "p" and not (is_int(v) and 1 <= v <= MAX_P):
            errs.add(where, f"p must be an integer >= 1, got {short(v)}; allowed: integers "
                            f"from 1 to {MAX_P:,}"); ok = False
        elif axis == "epsilon" and not (is_real(v) and MIN_EPSILON <= v <= MAX_EPSILON):
            errs.add(where, f"epsilon must be a finite number > 0, got {short(v)}; allowed: "
                            f"numbers from {MIN_EPSILON:g} to {MAX_EPSILON:g}"); ok = False
        elif axis == "delta" and not (is_real(v) and 0 <= v < 1):
            errs.add(where, f"delta must be a number in [0, 1), got {short(v)}"); ok = False
    if has_duplicates(values):
        errs.add(path, f"duplicate values in {short(values)} (compared as numbers: 1 and 1.0 "
                       "are the same value)"); ok = False
    if not ok:
        return None
    if axis in ("epsilon", "delta"):
        return [float(v) for v in values]
    return list(values)


def plugin_class(errs: Errors, path: str, kind: str, name: Any) -> type | None:
    if not isinstance(name, str):
        errs.add(path, f"must be the name of a registered {kind[:-1]}, got {name!r}")
        return None
    try:
        return registry.get(kind, name)
    except UserInputError as exc:
        errs.add(path, str(exc))
        return None


def labelled(errs: Errors, path: str, entries: Any, kind: str, key: str,
              keys: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any], type]]:
    out: list[tuple[str, str, dict[str, Any], type]] = []
    if not isinstance(entries, list) or not entries:
        errs.add(path, f"must be a non-empty list of {kind}")
        return out
    labels: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if isinstance(entry, str):
            entry = {key: entry}
        if not isinstance(entry, dict):
            errs.add(where, f"must be a mapping with '{key}', 'label' and 'params'")
            continue
        check_keys(errs, where, entry, keys)
        if key not in entry:
            errs.add(where, f"missing field '{key}'")
            continue
        cls = plugin_class(errs, f"{where}.{key}", kind, entry[key])
        label = entry.get("label", entry[key])
        if not (isinstance(label, str) and IDENT.match(label) and len(label) <= MAX_NAME_CHARS):
            errs.add(f"{where}.label", f"must be an identifier (letters, digits, _ . -; at most "
                                       f"{MAX_NAME_CHARS} characters), got {short(label)}")
            continue
        if label in labels:
            errs.add(f"{where}.label", f"duplicate label {label!r}; labels must be unique")
            continue
        labels.add(label)
        params = entry.get("params", {}) or {}
        if not isinstance(params, dict):
            errs.add(f"{where}.params", f"must be a mapping of parameter names to values, got "
                                        f"{short(params)}")
            continue
        names = [k for k in params if not isinstance(k, str)]
        if names:
            allowed = (", ".join(sorted(cls.params)) or "(none)") if cls is not None else "?"
            errs.add(f"{where}.params", f"parameter names must be strings, got {short(names[0])}; "
                                        f"allowed: {allowed}")
            continue
        if cls is not None:
            out.append((label, entry[key], params, cls))
    return out


def problem_instance(errs: Errors, where: str, grid_where: str, cls: type,
                     params: Mapping[str, Any], base: Path,
                     grid: Mapping[str, Sequence[Any]], extra: Mapping[str, Any] | None = None,
                     ) -> Any | None:
    """The problem ``cls(**params, **extra)`` of a suite or audit entry, or ``None``: the files
    its parameters name resolved against ``base`` (the suite's directory,
    :meth:`~dpbench.core.problem.Problem.locate`), bad parameters reported at
    ``<where>.params``, and the grid values it cannot run on (``check_grid``) at
    ``<grid_where>.<axis>`` — a ``check_grid`` that raises is reported, not raised (plugin
    code)."""
    try:
        instance = cls(**cls.locate(params, base), **(extra or {}))
    except UserInputError as exc:
        errs.add(f"{where}.params", str(exc))
        return None
    try:
        refused = dict(instance.check_grid(grid))
    except Exception as exc:  # noqa: BLE001 (plugin code: reported, not raised)
        refused = {"": f"{cls.name}.check_grid() fails: {type(exc).__name__}: {str(exc)[:300]}"}
    for axis, message in refused.items():
        errs.add(f"{grid_where}{'.' if axis else ''}{axis}", message)
    return instance


def privacy_of(cls: type, params: Mapping[str, Any]) -> str:
    """The privacy kind of a configured algorithm (class default if the parameters are invalid:
    that error is reported where the parameters are validated)."""
    try:
        return str(cls(**params).privacy)
    except Exception:
        return str(cls.privacy)


def check_privacy_kind(errs: Errors, path: str, name: str, privacy: str,
                       deltas: list[float], *, pure_at_any_delta: bool = True) -> None:
    """The rule of privacy kinds against the grid's ``delta`` axis.

    An (ε, δ)-DP mechanism needs δ > 0 at every grid point. A pure ε-DP mechanism runs at δ = 0
    whatever the grid's δ (:meth:`dpbench.core.grid.GridPoint.for_privacy`: ε-DP implies (ε, δ)-DP
    for every δ ≥ 0), so it may share an experiment, and its δ axis, with (ε, δ) mechanisms;
    ``pure_at_any_delta=False`` (privacy audits, which test the claim at the grid's own δ)
    requires δ = 0 for it. Non-private references ignore δ.
    """
    if privacy == "pure" and not pure_at_any_delta and any(d != 0 for d in deltas):
        errs.add(path, f"{name} is a pure ε-DP mechanism but grid.delta is {deltas}; allowed: "
                 "delta: [0] (an audit tests a pure mechanism's ε-DP claim at delta = 0; audit "
                 "pure and (ε, δ) mechanisms in separate audits)")
    if privacy == "approx" and any(d == 0 for d in deltas):
        errs.add(path, f"{name} is an (ε, δ)-DP mechanism but grid.delta contains 0 "
                 f"(grid.delta is {deltas}); allowed: delta values in (0, 1) (an (ε, δ) "
                 "mechanism needs delta > 0 at every grid point; pure ε-DP mechanisms may sit "
                 "at any delta, including 0, and run at delta = 0)")
