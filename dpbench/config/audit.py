"""The ``audit:`` and ``audits:`` sections of a suite: validation and the audit definitions.

An audit (``audits:`` entry) names algorithms and problems (same syntax as experiments), the
canaries and a grid over n, p, epsilon, delta; n defaults to the tiny sizes (2, 3, 5, 10) where
privacy bugs concentrate (opacus #571). Its points are (algorithm, problem, grid point, canary).
``expect`` says whether every point must pass (``private``) or every algorithm must be caught at
one point at least (``violation``, the broken zoo). docs/audit.md explains it all; in short:

* **Budget.** Each point gets ``budget_s`` seconds of worker time (default
  :data:`DEFAULT_BUDGET_S`, run-wide under ``audit:`` or per entry), spent through the
  mechanism's fastest path on all workers; ``runs`` (confirmation runs per side) and
  ``selection_runs`` pin the run counts instead (the store is then bit-identical across
  machines, not only across workers and backends).
* **Canaries** (``kind[+background][@direction]``, :mod:`dpbench.core.neighbours`) or
  ``search`` (the default): search every applicable canary of
  :func:`~dpbench.core.neighbours.search_canaries`.
* **Search** (``search:``): lists of values of the public parameters the audit leaves open — the
  grid axes n, p, epsilon, delta (then absent from ``grid``) and any parameter declared by every
  algorithm of the audit (e.g. a data norm, a ridge) — searched with the canaries.

The run-wide ``audit:`` mapping also sets the family-wise level ``alpha`` (Bonferroni over all
audit points of the run). Validation reports every error at once, naming the field and the
allowed values (see :mod:`dpbench.config.suite`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import UserInputError
from ..core.params import identity_params
from ..core.seeding import stable_hash
from .validation import (
    AlgorithmSpec,
    Errors,
    ProblemSpec,
    check_axis,
    check_keys,
    check_name,
    check_privacy_kind,
    is_int,
    is_real,
    labelled,
    privacy_of,
    problem_instance,
)

#: Default grid of dataset sizes: privacy bugs concentrate at tiny n.
DEFAULT_N = (2, 3, 5, 10)
EXPECT_VALUES = ("private", "violation")
AUDIT_AXES = ("n", "p", "epsilon", "delta")
#: The canary value that makes a point search the canaries (the default).
SEARCH = "search"
#: Default budget of a point, in seconds of worker time.
DEFAULT_BUDGET_S = 60.0
MAX_BUDGET_S = 24 * 3600.0
_SETTINGS_KEYS = ("alpha", "budget_s", "runs", "selection_runs")
_AUDIT_KEYS = ("name", "description", "algorithms", "problems", "canaries", "grid", "search",
               "budget_s", "runs", "selection_runs", "expect")
_PROB_KEYS = ("problem", "label", "params")
_ALGO_KEYS = ("algorithm", "label", "params")
#: 2: batch_seconds and seconds; 3: batch_profile_delta (claimed profile); 4: canaries at the
#: declared data norm and inside a declared cube; 5: time budgets, the search, scores and events
#: fixed before confirmation, pairs keyed by problem, (n, p) and canary (docs/audit.md).
AUDIT_SCHEMA = 5


@dataclass(frozen=True)
class AuditSettings:
    """Run-wide settings: the family-wise level, and the default budget (or pinned runs) of an
    audit that sets none."""

    alpha: float = 0.05
    budget_s: float = DEFAULT_BUDGET_S
    runs: int | None = None
    selection_runs: int | None = None


@dataclass(frozen=True)
class AuditSpec:
    """One ``audits:`` entry, validated; its points are (algorithm, problem, grid point, canary)
    over the grid axes it does not search."""

    name: str
    description: str
    algorithms: tuple[AlgorithmSpec, ...]
    problems: tuple[ProblemSpec, ...]
    canaries: tuple[str, ...]
    grid: dict[str, list[Any]]
    expect: str
    budget_s: float = DEFAULT_BUDGET_S
    runs: int | None = None
    selection_runs: int | None = None
    search: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def axes(self) -> tuple[str, ...]:
        """The grid axes of the points (those not searched)."""
        return tuple(a for a in AUDIT_AXES if a in self.grid)

    @property
    def point_dims(self) -> tuple[str, ...]:
        return ("algorithm", "problem", *self.axes, "canary")

    @property
    def point_shape(self) -> tuple[int, ...]:
        return (len(self.algorithms), len(self.problems), *(len(self.grid[a]) for a in self.axes),
                len(self.canaries))

    def definition(self, root_seed: int) -> dict[str, Any]:
        """Everything that determines the stored scores (for the store's fingerprint)."""
        return {
            "schema": AUDIT_SCHEMA, "root_seed": root_seed, "budget_s": self.budget_s,
            "runs": self.runs, "selection_runs": self.selection_runs,
            "canaries": list(self.canaries), "grid": self.grid, "search": self.search,
            "problems": [{"label": p.label, "name": p.name, "version": p.cls.version,
                          "params": identity_params(p.cls.params, p.params)}
                         for p in self.problems],
            "algorithms": [{"label": a.label, "name": a.name, "version": a.cls.version,
                            "params": identity_params(a.cls.params, a.params)}
                           for a in self.algorithms],
        }

    def fingerprint(self, root_seed: int) -> str:
        return stable_hash(self.definition(root_seed))


def _check_canary(key: Any) -> str | None:
    """Why ``key`` is not a canary (None when it is one, or ``search``)."""
    from ..core.neighbours import CanarySpec

    if key == SEARCH:
        return None
    try:
        CanarySpec.parse(key)
    except UserInputError as exc:
        return str(exc)
    return None


def _budget_fields(errs: Errors, path: str, raw: Mapping[str, Any], default: AuditSettings
                   ) -> tuple[float, int | None, int | None]:
    """``budget_s``, ``runs``, ``selection_runs`` of a mapping (the run-wide ``audit:`` or an
    entry), each falling back to ``default``."""
    budget = raw.get("budget_s", default.budget_s)
    if not (is_real(budget) and 0 < budget <= MAX_BUDGET_S):
        errs.add(f"{path}.budget_s", f"must be a number of seconds in (0, {MAX_BUDGET_S:g}], got "
                                     f"{budget!r}")
        budget = default.budget_s
    out: list[int | None] = []
    for key in ("runs", "selection_runs"):
        value = raw.get(key, getattr(default, key))
        if value is not None and not (is_int(value) and value >= 2):
            errs.add(f"{path}.{key}", f"must be an integer >= 2 (runs per side), got {value!r}")
            value = None
        out.append(None if value is None else int(value))
    if out[1] is not None and out[0] is None:
        errs.add(f"{path}.selection_runs", "needs runs (pinned confirmation runs per side) too")
    return float(budget), out[0], out[1]


def _settings(errs: Errors, raw: Any) -> AuditSettings:
    if raw is None:
        return AuditSettings()
    if not isinstance(raw, dict):
        errs.add("audit", f"must be a mapping with {', '.join(_SETTINGS_KEYS)}, got {raw!r}")
        return AuditSettings()
    check_keys(errs, "audit", raw, _SETTINGS_KEYS)
    default = AuditSettings()
    alpha = raw.get("alpha", default.alpha)
    if not (is_real(alpha) and 0 < alpha < 1):
        errs.add("audit.alpha", f"must be a number in (0, 1), got {alpha!r}")
        alpha = default.alpha
    budget, runs, selection = _budget_fields(errs, "audit", raw, default)
    return AuditSettings(float(alpha), budget, runs, selection)


def _canaries(errs: Errors, path: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return (SEARCH,)
    if not isinstance(raw, list) or not raw:
        errs.add(path, f"must be a non-empty list of canaries (kind[+background][@direction]) "
                       f"or [{SEARCH}]")
        return ()
    out: list[str] = []
    for i, c in enumerate(raw):
        why = _check_canary(c)
        if why is not None:
            errs.add(f"{path}[{i}]", f"{why}; or {SEARCH!r} to search them")
        elif c in out:
            errs.add(f"{path}[{i}]", f"duplicate canary {c!r}")
        else:
            out.append(str(c))
    return tuple(out)


def _search(errs: Errors, path: str, raw: Any, algos: list[tuple[str, str, dict[str, Any], type]]
            ) -> dict[str, list[Any]]:
    """``search:``: grid axes or parameters declared by every algorithm of the audit, each with a
    non-empty list of values (axes checked like a grid; parameters by instantiating)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        errs.add(path, "must be a mapping of grid axes (n, p, epsilon, delta) or algorithm "
                       "parameters to lists of values to search")
        return {}
    out: dict[str, list[Any]] = {}
    for key, values in raw.items():
        where = f"{path}.{key}"
        if key in AUDIT_AXES:
            vals = check_axis(errs, where, key, values)
            if vals is not None:
                out[key] = vals
            continue
        missing = [lab for lab, _, _, cls in algos if key not in cls.params]
        if missing:
            allowed = sorted(set(AUDIT_AXES) | set.intersection(
                *(set(cls.params) for _, _, _, cls in algos)) if algos else set(AUDIT_AXES))
            errs.add(where, f"{key!r} is neither a grid axis nor a parameter of every algorithm "
                            f"of the audit (not of {', '.join(missing)}); allowed: "
                            f"{', '.join(allowed)}")
            continue
        if not isinstance(values, list) or not values:
            errs.add(where, f"must be a non-empty list of values, got {values!r}")
            continue
        for lab, nm, params, cls in algos:
            for v in values:
                try:
                    cls(**{**params, key: v})
                except UserInputError as exc:
                    errs.add(f"{where}", f"{v!r} for {lab}: {exc}")
        out[key] = list(values)
    return out


def _grid(errs: Errors, path: str, raw: Any, kinds: set[str], searched: Any) -> dict[str, list[Any]]:
    """The grid over the axes the audit does not search (``searched``: the ``search:`` keys)."""
    if not isinstance(raw, dict):
        errs.add(path, "required mapping of axis names (n, p, epsilon, delta) to lists of values")
        return {}
    searched = set(searched) if isinstance(searched, dict) else set()
    for axis in raw:
        if axis not in AUDIT_AXES:
            errs.add(f"{path}.{axis}", f"unknown audit axis; allowed: {', '.join(AUDIT_AXES)}")
        elif axis in searched:
            errs.add(f"{path}.{axis}", "is searched (search:): it cannot also be a grid axis")
    raw = {**({"n": list(DEFAULT_N)} if "n" not in searched else {}), **raw}
    for axis in ("p", "epsilon"):
        if axis not in raw and axis not in searched:
            errs.add(f"{path}.{axis}", "required axis is missing (or search it)")
    if "delta" not in raw and "delta" not in searched:
        if "approx" in kinds:
            errs.add(f"{path}.delta", "required: the audit has (ε, δ) mechanisms")
        raw["delta"] = [0.0]
    grid: dict[str, list[Any]] = {}
    for axis in AUDIT_AXES:
        if axis in raw and axis not in searched:
            vals = check_axis(errs, f"{path}.{axis}", axis, raw[axis])
            if vals is not None:
                grid[axis] = vals
    return grid


def _resolved(errs: Errors, path: str, entries: list[tuple[str, str, dict[str, Any], type]],
              base: Path | None = None, grid: Mapping[str, list[Any]] | None = None,
              grid_path: str = "") -> list[Any]:
    """PluginSpecs with every default filled in (parameters checked by instantiating). For
    problems (``base`` and ``grid`` given): files resolved against ``base`` and the grid checked
    (:func:`~dpbench.config.validation.problem_instance`), as for experiments."""
    out = []
    for lab, nm, params, cls in entries:
        if base is not None and grid is not None:
            instance = problem_instance(errs, f"{path}[{lab}]", grid_path, cls, params, base, grid)
        else:
            try:
                instance = cls(**params)
            except UserInputError as exc:
                errs.add(f"{path}[{lab}].params", str(exc))
                instance = None
        if instance is not None:
            out.append(AlgorithmSpec(lab, nm, instance.get_params(), cls))
    return out


def _validate_audit(errs: Errors, path: str, raw: Any, settings: AuditSettings,
                    base: Path | None = None) -> AuditSpec | None:
    if not isinstance(raw, dict):
        errs.add(path, "must be a mapping with name, algorithms, problems, canaries and grid")
        return None
    n_before = len(errs.items)
    check_keys(errs, path, raw, _AUDIT_KEYS)
    name = raw.get("name")
    check_name(errs, f"{path}.name", name)
    algos = labelled(errs, f"{path}.algorithms", raw.get("algorithms"), "algorithms", "algorithm",
                      _ALGO_KEYS)
    probs = labelled(errs, f"{path}.problems", raw.get("problems"), "problems", "problem",
                      _PROB_KEYS)
    kinds = {privacy_of(cls, params) for _, _, params, cls in algos}
    search = _search(errs, f"{path}.search", raw.get("search"), algos)
    grid = _grid(errs, f"{path}.grid", raw.get("grid"), kinds, raw.get("search"))
    deltas = list(grid.get("delta", [])) + list(search.get("delta", []))
    for lab, nm, params, cls in algos:
        privacy = privacy_of(cls, params)
        if privacy == "none":
            errs.add(f"{path}.algorithms[{lab}]", f"{nm} is a non-private reference; there is no "
                     "privacy claim to audit (allowed: algorithms with privacy pure or approx)")
        check_privacy_kind(errs, f"{path}.algorithms[{lab}]", nm, privacy, deltas,
                           pure_at_any_delta=False)
    canaries = _canaries(errs, f"{path}.canaries", raw.get("canaries"))
    budget, runs, selection = _budget_fields(errs, path, raw, settings)
    expect = raw.get("expect", "private")
    if expect not in EXPECT_VALUES:
        errs.add(f"{path}.expect", f"got {expect!r}; allowed: {', '.join(EXPECT_VALUES)}")
    algo_specs = _resolved(errs, f"{path}.algorithms", algos)
    prob_grid = {**grid, **{a: v for a, v in search.items() if a in AUDIT_AXES}}
    prob_specs = _resolved(errs, f"{path}.problems", probs, base or Path.cwd(), prob_grid,
                           f"{path}.grid")
    if len(errs.items) > n_before:
        return None
    return AuditSpec(name, str(raw.get("description", "")), tuple(algo_specs), tuple(prob_specs),
                     canaries, {a: grid[a] for a in AUDIT_AXES if a in grid}, str(expect),
                     budget, runs, selection, search)


def validate_audits(errs: Errors, raw: Mapping[str, Any], base: Path | None = None,
                    ) -> tuple[AuditSettings | None, tuple[AuditSpec, ...]]:
    """Validate a suite's ``audit:`` and ``audits:``; errors go to ``errs`` (all of them).
    ``base``: the directory relative file names in problem parameters are resolved against."""
    if "audits" not in raw:
        if "audit" in raw:
            errs.add("audit", "settings without audits: add an audits: list or remove audit:")
        return None, ()
    settings = _settings(errs, raw.get("audit"))
    entries = raw.get("audits")
    if not isinstance(entries, list) or not entries:
        errs.add("audits", "must be a non-empty list of audits (name, algorithms, problems, "
                           "canaries, grid)")
        return settings, ()
    out: list[AuditSpec] = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        spec = _validate_audit(errs, f"audits[{i}]", entry, settings, base)
        if spec is None:
            continue
        if spec.name in names:
            errs.add(f"audits[{i}].name", f"duplicate audit name {spec.name!r}")
            continue
        names.add(spec.name)
        out.append(spec)
    return settings, tuple(out)


def n_audit_points(audits: tuple[AuditSpec, ...]) -> int:
    """Points of the audits before applicability (the upper bound of the multiplicity)."""
    return sum(math.prod(a.point_shape) for a in audits)
