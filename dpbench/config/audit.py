"""The ``audit:`` and ``audits:`` sections of a suite: validation and the audit definitions.

An audit (``audits:`` entry) names algorithms and problems (same syntax as experiments), the
canaries (:data:`dpbench.core.neighbours.CANARIES`) and a grid over n, p, epsilon, delta; n
defaults to the tiny sizes (2, 3, 5, 10) where privacy bugs concentrate (opacus #571). ``expect``
says whether every point must pass (``private``) or every algorithm must be caught at one point
at least (``violation``, the broken zoo). The run-wide ``audit:`` mapping sets the family-wise
level ``alpha`` (Bonferroni over all audit points of the run), the default ``runs`` per side and
the ``batch`` (runs per cell, even, dividing ``runs``). Validation reports every error at once,
naming the field and the allowed values (see :mod:`dpbench.config.suite`).

An entry may set its own ``runs`` and ``batch``. The default budget (neither the ``audit:``
mapping nor the entry sets ``runs``) depends on the mechanisms: an audit whose algorithms all have
the vectorised path ``run_batch`` and cost at most :data:`VECTORISED_MAX_COST` gradient
evaluations per run at the grid's largest n and p (``Algorithm.cost``) gets :data:`VECTORISED_RUNS` runs per side in batches of
:data:`VECTORISED_BATCH` (about a second of compute per point; the entry's ``batch`` if it sets
one), any other audit :data:`LOOPED_RUNS` runs in batches of ``audit.batch`` (default
:data:`LOOPED_BATCH`) (docs/audit.md, 'Budget').
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
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
_SETTINGS_KEYS = ("alpha", "runs", "batch")
_AUDIT_KEYS = ("name", "description", "algorithms", "problems", "canaries", "grid", "runs", "batch",
               "expect")
_PROB_KEYS = ("problem", "label", "params")
_ALGO_KEYS = ("algorithm", "label", "params")
#: 2: batch_seconds and seconds; 3: batch_profile_delta (claimed profile); 4: canaries at the
#: declared data norm and inside a declared cube (other neighbouring pairs than before).
AUDIT_SCHEMA = 4


#: Default runs per side and per cell of an audit whose mechanisms all have ``run_batch``.
VECTORISED_RUNS = 1_000_000
VECTORISED_BATCH = 50_000
#: Largest per-run cost (``Algorithm.cost(n, p)``) for which the vectorised default applies: a
#: noisy-SGD run at n = 10 costs 2·10², at n = 100 2·10⁴ (10⁶ such runs would take hours).
VECTORISED_MAX_COST = 2_000.0
#: Default runs per side and per cell of any other audit.
LOOPED_RUNS = 20_000
LOOPED_BATCH = 1_000


@dataclass(frozen=True)
class AuditSettings:
    """Run-wide settings: family-wise level, default runs per side, runs per cell.

    ``explicit`` is False when the suite did not set ``runs``: each audit that does not set its
    own then gets the default budget of its mechanisms (module docstring)."""

    alpha: float = 0.05
    runs: int = LOOPED_RUNS
    batch: int = LOOPED_BATCH
    explicit: bool = False


@dataclass(frozen=True)
class AuditSpec:
    """One ``audits:`` entry, validated; its points are (algorithm, problem, grid point, canary)."""

    name: str
    description: str
    algorithms: tuple[AlgorithmSpec, ...]
    problems: tuple[ProblemSpec, ...]
    canaries: tuple[str, ...]
    grid: dict[str, list[Any]]
    runs: int
    batch: int
    expect: str

    @property
    def n_batches(self) -> int:
        return self.runs // self.batch

    @property
    def point_dims(self) -> tuple[str, ...]:
        return ("algorithm", "problem", *AUDIT_AXES, "canary")

    @property
    def point_shape(self) -> tuple[int, ...]:
        return (len(self.algorithms), len(self.problems), *(len(self.grid[a]) for a in AUDIT_AXES),
                len(self.canaries))

    def definition(self, root_seed: int) -> dict[str, Any]:
        """Everything that determines the stored scores (for the store's fingerprint)."""
        return {
            "schema": AUDIT_SCHEMA, "root_seed": root_seed, "runs": self.runs,
            "batch": self.batch, "canaries": list(self.canaries), "grid": self.grid,
            "problems": [{"label": p.label, "name": p.name, "version": p.cls.version,
                          "params": identity_params(p.cls.params, p.params)}
                         for p in self.problems],
            "algorithms": [{"label": a.label, "name": a.name, "version": a.cls.version,
                            "params": identity_params(a.cls.params, a.params)}
                           for a in self.algorithms],
        }

    def fingerprint(self, root_seed: int) -> str:
        return stable_hash(self.definition(root_seed))


def _allowed_canaries() -> tuple[str, ...]:
    from ..core.neighbours import CANARIES

    return tuple(CANARIES)


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
    runs = raw.get("runs", default.runs)
    if not (is_int(runs) and runs >= 2):
        errs.add("audit.runs", f"must be an integer >= 2, got {runs!r}")
        runs = default.runs
    batch = raw.get("batch", default.batch)
    if not (is_int(batch) and batch >= 2 and batch % 2 == 0):
        errs.add("audit.batch", f"must be an even integer >= 2, got {batch!r}")
        batch = default.batch
    elif "runs" in raw or "batch" in raw:
        _check_runs(errs, "audit.runs", runs, batch)
    return AuditSettings(float(alpha), int(runs), int(batch), "runs" in raw)


def _check_runs(errs: Errors, path: str, runs: Any, batch: int) -> int | None:
    if not (is_int(runs) and runs >= 2):
        errs.add(path, f"must be an integer >= 2, got {runs!r}")
        return None
    if batch > runs or runs % batch:
        errs.add(path, f"must be a multiple of audit.batch = {batch} (runs per cell, at most "
                       f"runs), got {runs!r}; allowed: {batch}, {2 * batch}, {3 * batch}, ...")
        return None
    return int(runs)


def _canaries(errs: Errors, path: str, raw: Any) -> tuple[str, ...]:
    allowed = _allowed_canaries()
    if raw is None:
        return allowed
    if not isinstance(raw, list) or not raw:
        errs.add(path, f"must be a non-empty list of canaries; allowed: {', '.join(allowed)}")
        return ()
    out: list[str] = []
    for i, c in enumerate(raw):
        if c not in allowed:
            errs.add(f"{path}[{i}]", f"unknown canary {c!r}; allowed: {', '.join(allowed)}")
        elif c in out:
            errs.add(f"{path}[{i}]", f"duplicate canary {c!r}")
        else:
            out.append(c)
    return tuple(out)


def _grid(errs: Errors, path: str, raw: Any, kinds: set[str]) -> dict[str, list[Any]]:
    if not isinstance(raw, dict):
        errs.add(path, "required mapping of axis names (n, p, epsilon, delta) to lists of values")
        return {}
    for axis in raw:
        if axis not in AUDIT_AXES:
            errs.add(f"{path}.{axis}", f"unknown audit axis; allowed: {', '.join(AUDIT_AXES)}")
    raw = {"n": list(DEFAULT_N), **raw}
    for axis in ("p", "epsilon"):
        if axis not in raw:
            errs.add(f"{path}.{axis}", "required axis is missing")
    if "delta" not in raw:
        if "approx" in kinds:
            errs.add(f"{path}.delta", "required: the audit has (ε, δ) mechanisms")
        raw["delta"] = [0.0]
    grid: dict[str, list[Any]] = {}
    for axis in AUDIT_AXES:
        if axis in raw:
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
    grid = _grid(errs, f"{path}.grid", raw.get("grid"), kinds)
    for lab, nm, params, cls in algos:
        privacy = privacy_of(cls, params)
        if privacy == "none":
            errs.add(f"{path}.algorithms[{lab}]", f"{nm} is a non-private reference; there is no "
                     "privacy claim to audit (allowed: algorithms with privacy pure or approx)")
        check_privacy_kind(errs, f"{path}.algorithms[{lab}]", nm, privacy, grid.get("delta", []),
                           pure_at_any_delta=False)
    canaries = _canaries(errs, f"{path}.canaries", raw.get("canaries"))
    runs: int | None = settings.runs
    batch: int = settings.batch
    if "batch" in raw:
        if is_int(raw["batch"]) and raw["batch"] >= 2 and raw["batch"] % 2 == 0:
            batch = int(raw["batch"])
        else:
            errs.add(f"{path}.batch", f"must be an even integer >= 2, got {raw['batch']!r}")
    if "runs" in raw:
        runs = _check_runs(errs, f"{path}.runs", raw["runs"], batch)
    elif settings.explicit:
        runs = _check_runs(errs, f"{path}.runs", settings.runs, batch)
    expect = raw.get("expect", "private")
    if expect not in EXPECT_VALUES:
        errs.add(f"{path}.expect", f"got {expect!r}; allowed: {', '.join(EXPECT_VALUES)}")
    algo_specs = _resolved(errs, f"{path}.algorithms", algos)
    prob_specs = _resolved(errs, f"{path}.problems", probs, base or Path.cwd(), grid,
                           f"{path}.grid")
    if len(errs.items) > n_before or runs is None:
        return None
    if not settings.explicit and "runs" not in raw:
        if _vectorised(algo_specs, grid):
            runs, batch = VECTORISED_RUNS, int(raw.get("batch", VECTORISED_BATCH))
        runs = _check_runs(errs, f"{path}.batch", runs, batch)
        if runs is None:
            return None
    return AuditSpec(name, str(raw.get("description", "")), tuple(algo_specs), tuple(prob_specs),
                     canaries, {a: grid[a] for a in AUDIT_AXES}, runs, batch, str(expect))


def _vectorised(algo_specs: list[AlgorithmSpec], grid: Mapping[str, list[Any]]) -> bool:
    """Every algorithm has ``run_batch`` and a per-run cost ≤ VECTORISED_MAX_COST on the grid."""
    n, p = max(grid["n"]), max(grid["p"])
    for s in algo_specs:
        if not s.cls._has_batch_path():
            return False
        try:
            cost = float(s.cls(**s.params).cost(int(n), int(p)))
        except Exception:  # a cost the plugin cannot state: not cheap enough to assume
            return False
        if not cost <= VECTORISED_MAX_COST:
            return False
    return True


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
