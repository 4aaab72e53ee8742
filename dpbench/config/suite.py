"""Suite files: YAML describing named experiments, validated in full before anything runs.

A suite::

    name: quickstart
    root_seed: 20261121        # integer >= 0
    seeds: 8                   # default number of seeds per grid point
    cell_timeout_s: 300        # optional hard per-cell time limit (seconds; the cell is killed)
    cell_memory_mb: 2000       # optional per-cell memory limit (MB; the cell fails, not the worker)
    experiments:
      - name: lipschitz        # becomes the zarr group of the cube
        problems:
          - problem: lb_lin    # registered problem name
            label: lb_lin      # optional; the coordinate label (default: the name)
            params: {radius: 1.0}
        algorithms:
          - label: noisy_sgd_acct
            algorithm: noisy_sgd
            params: {sigma_mode: accountant}
        grid:                  # n, p, epsilon are required; delta for (ε, δ) mechanisms
          n: [25, 50, 100, 200]
          p: [5]
          epsilon: [1.0]
          delta: [1.0e-6]      # default [0]; > 0 everywhere when an (ε, δ) mechanism is present
          # any other key is an extra axis: a declared parameter of every problem of the
          # experiment, or of at least one algorithm (algorithms that do not declare it ignore it)

Privacy kinds and the ``delta`` axis: an (ε, δ)-DP mechanism needs δ > 0 at every grid point; a
pure ε-DP mechanism may sit at any δ and runs at δ = 0 there (ε-DP implies (ε, δ)-DP for every
δ ≥ 0; :meth:`dpbench.core.grid.GridPoint.for_privacy`), so its values are the same at every δ and
one experiment can compare pure and (ε, δ) mechanisms on paired data; non-private references
ignore ε and δ.

Validation collects every error with the file, the field path and the allowed values; it never
touches a store.

A suite may also (or only) hold privacy audits, ``audit:`` and ``audits:`` (run by ``dpbench
audit``, ignored by ``dpbench run``); their format and validation are in
:mod:`dpbench.config.audit` and ``docs/audit.md``.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import SuiteError, UserInputError, did_you_mean
from ..core.grid import CORE_AXES, GridPoint
from ..core.params import identity_params
from ..core.schema import FLOAT_VARS
from ..core.seeding import stable_hash
from .audit import validate_audits
from .validation import (
    IDENT,
    AlgorithmSpec,
    Errors,
    ProblemSpec,
    check_axis,
    check_keys,
    check_name,
    check_privacy_kind,
    has_duplicates,
    is_int,
    is_real,
    labelled,
    privacy_of,
    problem_instance,
)
from .yaml_io import ConfigKind, ConfigTextError, SuiteLoader, load_yaml, read_config

#: The version of an experiment's definition format (not the cube's:
#: :data:`dpbench.core.schema.CUBE_SCHEMA_VERSION`). Stored under the key ``"schema"`` of the
#: definition, which the experiment's fingerprint hashes: the key stays as stored stores have it.
SUITE_SCHEMA_VERSION = 1
#: Upper bounds of the per-cell limits (a larger value is a typo, and overflows timers).
MAX_CELL_TIMEOUT_S = 7 * 24 * 3600.0
MAX_CELL_MEMORY_MB = 1e6

_TOP_KEYS = ("name", "description", "root_seed", "seeds", "cell_timeout_s", "cell_memory_mb",
             "max_cells", "experiments", "audit", "audits")
#: The per-cell time limit when a suite sets none: with a limit, cells run in a forked child
#: process (dpbench.engine.isolation), so a cell that crashes or hangs fails alone instead of
#: taking the worker, the cells packed with it, or an inline run down (docs/reliability.md,
#: 'Crash containment'; the isolation costs no measurable time on the quickstart).
DEFAULT_CELL_TIMEOUT_S = 3600.0

#: The largest suite (cells over all experiments) run without saying so: ``max_cells`` in the
#: suite raises it, up to :data:`MAX_CELLS_HARD` (docs/reliability.md, 'Size limits').
MAX_CELLS = 1_000_000
MAX_CELLS_HARD = 1_000_000_000
_EXP_KEYS = ("name", "description", "seeds", "problems", "algorithms", "grid", "expect")
_EXPECT_KEYS = ("id", "algorithm", "problem", "axis", "slope", "tolerance", "tolerance_reason",
                "level_tolerance", "level_reason", "at", "source", "variable", "derived")
#: ``derived:`` may name the closed-form oracle (the cube's ``oracle_excess_risk``) as a factor.
DERIVED_ORACLE = "oracle"
#: ``tolerance: card``: the band is derived from the algorithm's rate card (docs/analysis.md).
CARD_TOLERANCE = "card"
#: Tolerances above these need a written reason (``tolerance_reason`` / ``level_reason``).
DEFAULT_EXPECT_TOLERANCE = 0.1
DEFAULT_LEVEL_TOLERANCE = 0.1
#: The variable an expectation fits when it names none (``variable:``).
DEFAULT_EXPECT_VARIABLE = "excess_risk"
_PROB_KEYS = ("problem", "label", "params")
_ALGO_KEYS = ("algorithm", "label", "params")
RESERVED_AXES = ("algorithm", "problem", "seed")


#: How suite files are read (their bounds: :mod:`dpbench.config.yaml_io`).
SUITE_FILE = ConfigKind(
    title="suite file", noun="suite", loader=SuiteLoader,
    expansion_hint="(nested YAML aliases *name copy whole lists); write it out or use fewer "
                   "aliases")


@dataclass(frozen=True)
class Expectation:
    """A rate the suite author expects to see: a paper's exponent along one axis.

    ``slope`` is on the cube's **average** scale (BST14 states sum-scale rates: subtract 1 from the
    n-exponent). The check (:mod:`dpbench.analysis.expectations`) fits the log-log slope of the
    named algorithm on the named problem along ``axis`` and calls it in agreement only when the
    slope's whole CI lies within ``tolerance`` of ``slope``. ``tolerance`` is 0.1 by default,
    ``"card"`` to derive the band from the rate card, or a number whose excess over 0.1 is
    justified by ``tolerance_reason``; ``level_tolerance`` (default 0.1, above it
    ``level_reason``) bounds empirical/oracle where a closed-form oracle exists. ``at``
    fixes some of the other axes (default: every combination is checked). ``variable`` names the
    cube's float variable whose mean is fitted (default ``excess_risk``; e.g.
    ``population_excess_risk`` for DP-SCO rates, ``func_queries`` / ``grad_queries`` for query
    complexity). Expectations do not change what is computed, so editing them never invalidates a
    store.

    ``derived`` (docs/analysis.md, "Derived exponents"): when a quantity the paper treats as a
    power law varies otherwise on the grid (an accountant's noise multiplier, an inverse
    temperature, a number of steps), the expected exponent is computed, not typed: the
    expectation is ∏ q^a over the mapping {q: a}, q a public quantity of the mechanism's
    calibration (:meth:`dpbench.core.algorithm.Algorithm.calibrated`), a grid axis (its value)
    or ``oracle`` (the closed-form oracle's mean), and the band is centred on the least-squares
    log-log slope of that product over the fit's kept points. ``slope`` stays the paper's
    exponent, shown beside the derived one.
    """

    id: str
    algorithm: str
    problem: str
    axis: str
    slope: float
    tolerance: float | str = DEFAULT_EXPECT_TOLERANCE
    at: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    variable: str = DEFAULT_EXPECT_VARIABLE
    tolerance_reason: str = ""
    level_tolerance: float = DEFAULT_LEVEL_TOLERANCE
    level_reason: str = ""
    derived: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "algorithm": self.algorithm, "problem": self.problem,
               "axis": self.axis, "slope": self.slope, "tolerance": self.tolerance,
               "at": dict(self.at), "source": self.source, "variable": self.variable,
               "tolerance_reason": self.tolerance_reason,
               "level_tolerance": self.level_tolerance, "level_reason": self.level_reason}
        if self.derived:
            out["derived"] = dict(self.derived)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Expectation:
        tol = d.get("tolerance", DEFAULT_EXPECT_TOLERANCE)
        return cls(str(d["id"]), str(d["algorithm"]), str(d["problem"]), str(d["axis"]),
                   float(d["slope"]), tol if tol == CARD_TOLERANCE else float(tol),
                   dict(d.get("at") or {}), str(d.get("source", "")),
                   str(d.get("variable", DEFAULT_EXPECT_VARIABLE)),
                   str(d.get("tolerance_reason", "")),
                   float(d.get("level_tolerance", DEFAULT_LEVEL_TOLERANCE)),
                   str(d.get("level_reason", "")),
                   {str(k): float(v) for k, v in (d.get("derived") or {}).items()})


#: Readable aliases: an experiment's problems and algorithm variants.


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    seeds: int
    problems: tuple[ProblemSpec, ...]
    algorithms: tuple[AlgorithmSpec, ...]
    grid: dict[str, list[Any]]
    extra_routing: dict[str, str] = field(default_factory=dict)  # axis -> "problem" | "algorithm"
    expectations: tuple[Expectation, ...] = ()

    @property
    def axes(self) -> tuple[str, ...]:
        """Grid axes in cube order: n, p, epsilon, delta, then extras in suite order."""
        return tuple(self.grid)

    @property
    def dims(self) -> tuple[str, ...]:
        return ("algorithm", "problem", *self.axes, "seed")

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.algorithms), len(self.problems), *(len(v) for v in self.grid.values()),
                self.seeds)

    @functools.cached_property
    def _point_layout(self) -> tuple[list[list[Any]], list[int], tuple[tuple[int, str], ...],
                                     tuple[tuple[int, str], ...]]:
        """The grid's value lists, the positions of n, p, ε, δ among the axes, and the positions
        and names of the extra axes routed to the problems and to the mechanisms."""
        axes = self.axes
        extra = [(i, a) for i, a in enumerate(axes) if a not in CORE_AXES]
        return ([self.grid[a] for a in axes], [axes.index(a) for a in CORE_AXES],
                tuple((i, a) for i, a in extra if self.extra_routing.get(a) == "problem"),
                tuple((i, a) for i, a in extra if self.extra_routing.get(a) != "problem"))

    def point_at(self, gidx: Sequence[int]) -> GridPoint:
        """The grid point at position ``gidx`` along the grid axes, its extra axes routed (what
        :meth:`GridPoint.from_values` builds, without a mapping per point: plans call it once
        per grid point and per chunk)."""
        lists, (n, p, e, d), to_problem, to_algorithm = self._point_layout
        v = [values[i] for values, i in zip(lists, gidx)]
        return GridPoint(int(v[n]), int(v[p]), float(v[e]), float(v[d]),
                         tuple((a, v[i]) for i, a in to_problem),
                         tuple((a, v[i]) for i, a in to_algorithm))

    def points(self) -> Iterator[tuple[tuple[int, ...], GridPoint]]:
        """(index, point) for every grid point, in C order over the grid axes."""
        for idx in itertools.product(*(range(len(self.grid[a])) for a in self.axes)):
            yield idx, self.point_at(idx)

    @property
    def first_point(self) -> GridPoint:
        """The grid's first point (where rate cards and oracle kinds are read)."""
        return self.point_at([0] * len(self.axes))

    def definition(self, root_seed: int) -> dict[str, Any]:
        """Everything that determines the meaning of the experiment's cells (for fingerprints)."""
        return {
            "schema": SUITE_SCHEMA_VERSION,
            "root_seed": root_seed,
            "seeds": self.seeds,
            "problems": [{"label": p.label, "name": p.name, "version": p.cls.version,
                          "params": identity_params(p.cls.params, p.params)}
                         for p in self.problems],
            "algorithms": [{"label": a.label, "name": a.name, "version": a.cls.version,
                            "params": identity_params(a.cls.params, a.params)}
                           for a in self.algorithms],
            "grid": self.grid,
        }

    def fingerprint(self, root_seed: int) -> str:
        return stable_hash(self.definition(root_seed))


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    root_seed: int
    cell_timeout_s: float | None
    experiments: tuple[Experiment, ...]
    source: str
    text: str
    cell_memory_mb: float | None = None
    #: Privacy audits (``audits:``, run by ``dpbench audit``; ``dpbench run`` ignores them) and
    #: their run-wide settings (``audit:``); see :mod:`dpbench.config.audit`.
    audits: tuple[Any, ...] = ()
    audit: Any = None
    max_cells: int = MAX_CELLS

    @property
    def n_cells(self) -> int:
        return sum(math.prod(e.shape) for e in self.experiments)

    @property
    def effective_cell_timeout_s(self) -> float:
        """The per-cell time limit cells run under: ``cell_timeout_s``, else
        :data:`DEFAULT_CELL_TIMEOUT_S`."""
        return self.cell_timeout_s if self.cell_timeout_s is not None else DEFAULT_CELL_TIMEOUT_S

    def estimates(self) -> dict[str, float]:
        """Rough size of a run, for ``dpbench validate``: cells, the work (``Algorithm.cost``
        summed over every cell: per-example gradient evaluations, the unit of the packing), and
        the uncompressed size of the cube's values (8 bytes per float variable per cell plus the
        status byte; error texts excluded)."""
        from ..core.schema import FLOAT_VARS

        work = 0.0
        for e in self.experiments:
            for a in e.algorithms:
                algo = a.cls(**a.params)
                for n in e.grid["n"]:
                    for p in e.grid["p"]:
                        others = math.prod(len(v) for k, v in e.grid.items() if k not in ("n", "p"))
                        work += float(algo.cost(int(n), int(p))) * others * e.seeds * len(
                            e.problems)
        return {"cells": float(self.n_cells), "work": work,
                "store_bytes": float(self.n_cells) * (8 * len(FLOAT_VARS) + 1)}

    def experiment(self, name: str) -> Experiment:
        for e in self.experiments:
            if e.name == name:
                return e
        raise KeyError(name)


# --- validation -------------------------------------------------------------------------------

def _check_rate_card(errs: Errors, path: str, name: str, instance: Any) -> None:
    """A plugin's rate card must build (it is stored with the results and read back by the
    analysis): a card that raises, or is not a RateCard, is a bad plugin declaration — exit 2
    before the store exists, not a traceback after."""
    from ..core.ratecard import RateCard

    try:
        card = instance.rate_card()
    except Exception as exc:  # noqa: BLE001 (any failure of plugin code is reported, not raised)
        errs.add(path, f"{name}.rate_card() fails: {type(exc).__name__}: {str(exc)[:300]}")
        return
    if card is not None and not isinstance(card, RateCard):
        errs.add(path, f"{name}.rate_card() must return a RateCard or None, got "
                       f"{type(card).__name__}")


def _validate_experiment(errs: Errors, path: str, raw: Any, default_seeds: int,
                         base: Path | None = None) -> Experiment | None:
    if not isinstance(raw, dict):
        errs.add(path, "must be a mapping with name, problems, algorithms and grid")
        return None
    check_keys(errs, path, raw, _EXP_KEYS)
    n_before = len(errs.items)
    name = raw.get("name")
    check_name(errs, f"{path}.name", name)
    seeds = raw.get("seeds", default_seeds)
    if not (is_int(seeds) and seeds >= 1):
        errs.add(f"{path}.seeds", f"must be an integer >= 1, got {seeds!r}")
    probs = labelled(errs, f"{path}.problems", raw.get("problems"), "problems", "problem", _PROB_KEYS)
    algos = labelled(errs, f"{path}.algorithms", raw.get("algorithms"), "algorithms", "algorithm",
                      _ALGO_KEYS)
    grid_raw = raw.get("grid")
    grid: dict[str, list[Any]] = {}
    if not isinstance(grid_raw, dict):
        errs.add(f"{path}.grid", "required mapping of axis names to lists of values (n, p, epsilon, ...)")
        grid_raw = {}
    kinds = {privacy_of(cls, params) for _, _, params, cls in algos}
    for axis in ("n", "p", "epsilon"):
        if axis not in grid_raw:
            errs.add(f"{path}.grid.{axis}", "required axis is missing")
    if "delta" not in grid_raw:
        if "approx" in kinds:
            errs.add(f"{path}.grid.delta", "required: the experiment has (ε, δ) mechanisms")
        grid_raw = {**grid_raw, "delta": [0.0]}
    for axis in CORE_AXES:
        if axis in grid_raw:
            vals = check_axis(errs, f"{path}.grid.{axis}", axis, grid_raw[axis])
            if vals is not None:
                grid[axis] = vals
    routing: dict[str, str] = {}
    for axis, values in grid_raw.items():
        if axis in CORE_AXES:
            continue
        where = f"{path}.grid.{axis}"
        if axis in RESERVED_AXES or not isinstance(axis, str) or not IDENT.match(axis):
            errs.add(where, f"{axis!r} cannot be a grid axis (reserved or not an identifier)")
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            errs.add(where, "empty grid; give at least one value")
            continue
        if has_duplicates(values):
            errs.add(where, f"duplicate values in {values!r} (compared as numbers: 1 and 1.0 "
                            "are the same value)")
            continue
        if probs and all(axis in cls.params for _, _, _, cls in probs):
            routing[axis] = "problem"
            receivers = [(f"problem {lab!r}", cls, p) for lab, _, p, cls in probs]
        elif any(axis in cls.params for _, _, _, cls in algos):
            routing[axis] = "algorithm"
            receivers = [(f"algorithm {lab!r}", cls, p) for lab, _, p, cls in algos
                         if axis in cls.params]
        else:
            declared = sorted({k for _, _, _, c in probs + algos for k in c.params})
            errs.add(where, f"unknown axis{did_you_mean(axis, [*CORE_AXES, *declared])}: an extra "
                     "axis must be a parameter of every problem or of at least one algorithm; "
                     f"declared parameters: {', '.join(declared) or '(none)'}")
            continue
        ok = True
        for who, cls, fixed in receivers:
            if axis in fixed:
                errs.add(where, f"{who} also fixes {axis!r} in its params; give it in one place")
                ok = False
            for i, v in enumerate(values):
                try:
                    cls.params[axis].validate(who, axis, v)
                except UserInputError as exc:
                    errs.add(f"{where}[{i}]", str(exc)); ok = False
        if ok:
            grid[axis] = list(values)
    # parameters and privacy kinds
    problem_specs: list[ProblemSpec] = []
    for lab, nm, params, cls in probs:
        instance = problem_instance(
            errs, f"{path}.problems[{lab}]", f"{path}.grid", cls, params,
            base if base is not None else Path.cwd(), grid,
            {a: grid[a][0] for a, r in routing.items() if r == "problem" and a in grid})
        if instance is not None:
            resolved = instance.get_params()
            fixed = {k: resolved[k] for k in resolved if routing.get(k) != "problem"}
            problem_specs.append(ProblemSpec(lab, nm, fixed, cls))
    algo_specs: list[AlgorithmSpec] = []
    deltas = grid.get("delta", [])
    for lab, nm, params, cls in algos:
        privacy = cls.privacy
        try:
            own = {a: grid[a][0] for a, r in routing.items()
                   if r == "algorithm" and a in cls.params and a in grid}
            instance = cls(**params, **own)
            # The privacy kind may depend on parameters (e.g. Gamma vs Gaussian noise).
            privacy = instance.privacy
            resolved = instance.get_params()
            fixed = {k: resolved[k] for k in resolved if k not in own}
            algo_specs.append(AlgorithmSpec(lab, nm, fixed, cls))
            _check_rate_card(errs, f"{path}.algorithms[{lab}]", nm, instance)
        except UserInputError as exc:
            errs.add(f"{path}.algorithms[{lab}].params", str(exc))
        check_privacy_kind(errs, f"{path}.algorithms[{lab}]", nm, privacy, deltas)
    expectations = _expectations(errs, f"{path}.expect", raw.get("expect", []),
                                 [a.label for a in algo_specs], [p.label for p in problem_specs],
                                 grid)
    if len(errs.items) > n_before:
        return None
    ordered = {a: grid[a] for a in CORE_AXES}
    ordered.update({a: grid[a] for a in grid if a not in CORE_AXES})
    return Experiment(name, str(raw.get("description", "")), seeds, tuple(problem_specs),
                      tuple(algo_specs), ordered, routing, tuple(expectations))


def _expectations(errs: Errors, path: str, raw: Any, algorithms: list[str],
                  problems: list[str], grid: Mapping[str, list[Any]]) -> list[Expectation]:
    """Validate an experiment's ``expect`` list (labels, axes and ``at`` values must exist)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        errs.add(path, "must be a list of expected rates "
                       "({id, algorithm, problem, axis, slope, tolerance, at, source})")
        return []
    out: list[Expectation] = []
    for i, entry in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            errs.add(where, "must be a mapping with id, algorithm, problem, axis, slope (tolerance optional)")
            continue
        n_before = len(errs.items)
        check_keys(errs, where, entry, _EXPECT_KEYS)
        for key in ("id", "algorithm", "problem", "axis", "slope"):
            if key not in entry:
                errs.add(where, f"missing field '{key}'")
        if len(errs.items) > n_before:
            continue
        for key, labels, kind in (("algorithm", algorithms, "algorithm labels"),
                                  ("problem", problems, "problem labels")):
            if entry[key] not in labels:
                errs.add(f"{where}.{key}", f"{entry[key]!r} is not one of the experiment's "
                         f"{kind}{did_you_mean(str(entry[key]), labels)}; allowed: "
                         f"{', '.join(labels)}")
        axis = entry["axis"]
        swept = [a for a, v in grid.items() if len(v) >= 2]
        if axis not in swept:
            errs.add(f"{where}.axis", f"{axis!r} is not a swept axis of the experiment (an axis "
                     f"with at least 2 values){did_you_mean(str(axis), swept)}; allowed: "
                     f"{', '.join(swept) or '(none)'}")
        if not (is_real(entry["slope"]) and math.isfinite(entry["slope"])):
            errs.add(f"{where}.slope", f"must be a finite number, got {entry['slope']!r}")
        tol = entry.get("tolerance", DEFAULT_EXPECT_TOLERANCE)
        if tol != CARD_TOLERANCE and not (is_real(tol) and 0 < tol < 1):
            errs.add(f"{where}.tolerance", f"must be a number in (0, 1) or {CARD_TOLERANCE!r} "
                     f"(derived from the rate card), got {tol!r}")
        elif is_real(tol) and tol > DEFAULT_EXPECT_TOLERANCE and not str(
                entry.get("tolerance_reason") or "").strip():
            errs.add(f"{where}.tolerance_reason", f"a tolerance above the default "
                     f"{DEFAULT_EXPECT_TOLERANCE} needs a written reason (the report prints it); "
                     f"or use tolerance: {CARD_TOLERANCE} to derive it from the rate card")
        ltol = entry.get("level_tolerance", DEFAULT_LEVEL_TOLERANCE)
        if not (is_real(ltol) and ltol > 0):
            errs.add(f"{where}.level_tolerance", f"must be a number > 0, got {ltol!r}")
        elif ltol > DEFAULT_LEVEL_TOLERANCE and not str(entry.get("level_reason") or "").strip():
            errs.add(f"{where}.level_reason", f"a level tolerance above the default "
                     f"{DEFAULT_LEVEL_TOLERANCE} needs a written reason (the report prints it)")
        variable = entry.get("variable", DEFAULT_EXPECT_VARIABLE)
        allowed_vars = expect_variables()
        if variable not in allowed_vars:
            errs.add(f"{where}.variable", f"{variable!r} is not a float variable of the cube"
                     f"{did_you_mean(str(variable), allowed_vars)}; allowed: "
                     f"{', '.join(allowed_vars)}")
        derived = _derived(errs, f"{where}.derived", entry.get("derived"), tol, variable)
        at = entry.get("at") or {}
        if not isinstance(at, dict):
            errs.add(f"{where}.at", f"must be a mapping of axis names to grid values, got {at!r}")
            at = {}
        for k, v in at.items():
            if k == axis or k not in grid:
                errs.add(f"{where}.at.{k}", f"must name another axis of the grid; allowed: "
                         f"{', '.join(a for a in grid if a != axis)}")
            elif not any(v == g for g in grid[k]):
                errs.add(f"{where}.at.{k}", f"{v!r} is not a grid value; allowed: {grid[k]}")
        if len(errs.items) > n_before:
            continue
        if any(e.id == str(entry["id"]) for e in out):
            errs.add(f"{where}.id", f"duplicate expected-rate id {entry['id']!r} in this "
                     "experiment (each row needs its own id)")
            continue
        out.append(Expectation(str(entry["id"]), entry["algorithm"], entry["problem"], axis,
                               float(entry["slope"]),
                               tol if tol == CARD_TOLERANCE else float(tol), dict(at),
                               str(entry.get("source", "")), str(variable),
                               str(entry.get("tolerance_reason") or ""), float(ltol),
                               str(entry.get("level_reason") or ""), derived))
    return out


def _derived(errs: Errors, where: str, raw: Any, tolerance: Any, variable: Any
             ) -> dict[str, float]:
    """Validate an expectation's ``derived:`` mapping {quantity: power} (Expectation docstring).
    Which names the mechanism's calibration provides is checked when the store is prepared."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        errs.add(where, "must be a non-empty mapping {quantity: power}: a quantity of the "
                 "mechanism's calibration (e.g. noise_multiplier, beta, steps), a grid axis, or "
                 f"{DERIVED_ORACLE!r}; e.g. {{noise_multiplier: 2}}")
        return {}
    out: dict[str, float] = {}
    for key, power in raw.items():
        if not (isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", key)):
            errs.add(f"{where}.{key}", "must be an identifier (a calibration quantity, a grid "
                     f"axis or {DERIVED_ORACLE!r})")
        elif not (is_real(power) and math.isfinite(power) and power != 0):
            errs.add(f"{where}.{key}", f"must be a finite non-zero power, got {power!r}")
        else:
            out[key] = float(power)
    if tolerance == CARD_TOLERANCE:
        errs.add(where, f"cannot be combined with tolerance: {CARD_TOLERANCE} (the band is "
                 "centred on the derived slope; give a number as the tolerance)")
    if DERIVED_ORACLE in out and variable != DEFAULT_EXPECT_VARIABLE:
        errs.add(f"{where}.{DERIVED_ORACLE}", f"the closed-form oracle is of "
                 f"{DEFAULT_EXPECT_VARIABLE} only; this expectation fits {variable!r}")
    return out


def expect_variables() -> tuple[str, ...]:
    """The cube variables an ``expect:`` entry may fit (``variable:``): the float variables."""
    return FLOAT_VARS


def parse_suite(text: str, source: str = "<suite>", base: str | Path | None = None) -> Suite:
    """Parse and validate suite text; raise :class:`SuiteError` listing every problem found.

    ``base`` is the directory relative file names in problem parameters are resolved against
    (:meth:`dpbench.core.problem.Problem.locate`): the suite file's directory for
    :func:`load_suite`, else the working directory."""
    try:
        raw = load_yaml(text, SUITE_FILE)
    except ConfigTextError as exc:
        raise SuiteError(source, [str(exc)]) from None
    errs = Errors()
    if not isinstance(raw, dict):
        raise SuiteError(source, ["the suite must be a YAML mapping with name and experiments"])
    check_keys(errs, "", raw, _TOP_KEYS)
    name = raw.get("name")
    check_name(errs, "name", name, group=False)
    root_seed = raw.get("root_seed", 0)
    if not (is_int(root_seed) and root_seed >= 0):
        errs.add("root_seed", f"must be an integer >= 0, got {root_seed!r}")
        root_seed = 0
    seeds = raw.get("seeds", 10)
    if not (is_int(seeds) and seeds >= 1):
        errs.add("seeds", f"must be an integer >= 1, got {seeds!r}")
        seeds = 1
    timeout = raw.get("cell_timeout_s")
    if timeout is not None and not (is_real(timeout) and 0 < timeout <= MAX_CELL_TIMEOUT_S):
        errs.add("cell_timeout_s", f"must be a number of seconds in (0, {MAX_CELL_TIMEOUT_S:g}] "
                                   f"(7 days), got {timeout!r}")
    memory = raw.get("cell_memory_mb")
    if memory is not None and not (is_real(memory) and 0 < memory <= MAX_CELL_MEMORY_MB):
        errs.add("cell_memory_mb", f"must be a number of megabytes in (0, "
                                   f"{MAX_CELL_MEMORY_MB:g}] (1 TB), got {memory!r}")
    exps_raw = raw.get("experiments")
    experiments: list[Experiment] = []
    if "audits" in raw and exps_raw in (None, []):
        exps_raw = []  # an audit-only suite (dpbench audit)
    elif not isinstance(exps_raw, list) or not exps_raw:
        errs.add("experiments", "required non-empty list of experiments (or audits: for "
                                "dpbench audit)")
        exps_raw = []
    names: set[str] = set()
    for i, e in enumerate(exps_raw):
        exp = _validate_experiment(errs, f"experiments[{i}]", e, seeds,
                                   Path(base) if base is not None else None)
        if exp is None:
            continue
        if exp.name in names:
            errs.add(f"experiments[{i}].name", f"duplicate experiment name {exp.name!r}")
            continue
        names.add(exp.name)
        experiments.append(exp)

    max_cells = raw.get("max_cells", MAX_CELLS)
    if not (is_int(max_cells) and 1 <= max_cells <= MAX_CELLS_HARD):
        errs.add("max_cells", f"must be an integer in [1, {MAX_CELLS_HARD}], got {max_cells!r}")
        max_cells = MAX_CELLS
    total = sum(math.prod(e.shape) for e in experiments)
    if total > max_cells:
        errs.add("max_cells" if "max_cells" in raw else "experiments",
                 f"the suite has {total:,} cells, more than max_cells = {max_cells:,}; shrink the "
                 f"grids or seeds, or set max_cells (at most {MAX_CELLS_HARD:,}) to run it "
                 "(docs/reliability.md, 'Size limits')")
    settings, audits = validate_audits(errs, raw, Path(base) if base is not None else None)
    if errs.items:
        raise SuiteError(source, errs.items)
    return Suite(name, str(raw.get("description", "")), root_seed,
                 float(timeout) if timeout is not None else None, tuple(experiments), source, text,
                 float(memory) if memory is not None else None, tuple(audits), settings,
                 int(max_cells))


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file."""
    path = Path(path)
    try:
        text = read_config(path, SUITE_FILE)
    except ConfigTextError as exc:
        raise SuiteError(str(path), [str(exc)]) from None
    return parse_suite(text, str(path), path.resolve().parent)
