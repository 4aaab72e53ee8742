"""The cube schema: the one place that owns the result variables and the status codes.

Every experiment group of a result store (:mod:`dpbench.store.cube`) holds, over the dimensions
``(algorithm, problem, <grid axes>, seed)``, one array per :data:`VARIABLES` entry. The worker
builds its row with :func:`make_row`, the store creates and writes the arrays from this table,
the analysis checks variable names against it, and the README's variable table is rendered from
it (``tests/unit/test_schema.py`` keeps the two equal).

:data:`CUBE_SCHEMA_VERSION` is written into every store (key ``"schema"`` of the root's and each
experiment's metadata); :func:`check_version` refuses a store written under another version before
anything is computed (docs/architecture.md, "The cube schema"). The suite's definition format has
its own version, :data:`dpbench.config.suite.SUITE_SCHEMA_VERSION`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._version import __version__
from .errors import StoreError

#: Bumped whenever a variable is added, removed, renamed or changes meaning or dtype (giving a
#: variable a role does not change the cube: no bump).
CUBE_SCHEMA_VERSION = 1

PENDING, DONE, FAILED, NOT_APPLICABLE = 0, 1, 2, 3
STATUS_NAMES = {PENDING: "pending", DONE: "done", FAILED: "failed",
                NOT_APPLICABLE: "not applicable"}
#: Longest name or label a suite may give (experiments, algorithms, problems); a store holding
#: a longer label is damaged (dpbench.store refuses it).
MAX_LABEL_CHARS = 100

#: Longest error text kept per cell (the rest is cut).
MAX_ERROR_CHARS = 2000

#: The roles a variable plays for its readers; a variable may have several, and a new cube
#: variable reaches a reader by declaring its role in :data:`VARIABLES`, nowhere else.
#: ``report``: the report loads it (the others are not read: a large cube loads faster).
REPORT = "report"
#: ``diff``: ``dpbench diff`` loads it (its slopes' exclusions need the gap and trivial excess).
DIFF = "diff"
#: ``cost``: the report draws a cost figure of it (in :data:`VARIABLES` order).
COST = "cost"
#: ``optional_cost``: a cost variable whose figure is drawn only when some mechanism records a
#: positive value; another cost variable gets a note instead when none does (a gradient-free
#: mechanism is worth saying, loss evaluations are routinely not counted).
OPTIONAL_COST = "optional_cost"
#: ``privacy``: the privacy a mechanism spent by its ledger, never above the nominal value on the
#: grid axis it names (``nominal_axis``); the report's privacy-spent table sets the two side by
#: side.
PRIVACY = "privacy"
ROLES = (REPORT, DIFF, COST, OPTIONAL_COST, PRIVACY)


@dataclass(frozen=True)
class Variable:
    """One data variable of the cube; ``roles`` (from :data:`ROLES`) say who reads it, and a
    ``privacy`` variable names the grid axis of its nominal value (``nominal_axis``)."""

    name: str
    dtype: str
    doc: str
    deterministic: bool = True
    fill: Any = None
    roles: frozenset[str] = frozenset()
    nominal_axis: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(self.roles - set(ROLES))
        if unknown:
            raise ValueError(f"cube variable {self.name!r}: unknown role(s) {unknown}; "
                             f"the roles are {ROLES}")
        if (PRIVACY in self.roles) != bool(self.nominal_axis):
            raise ValueError(f"cube variable {self.name!r}: a {PRIVACY!r} variable, and only "
                             "one, names the grid axis of its nominal value (nominal_axis)")


VARIABLES: tuple[Variable, ...] = (
    Variable("excess_risk", "f8",
             "excess **average** empirical risk L̄(θ̂) − L̄(θ*) against a certified optimum "
             "(BST14 states sums: divide its bounds by n)", roles=frozenset({REPORT, DIFF})),
    Variable("population_excess_risk", "f8",
             "excess population risk where the problem defines a data law (NaN otherwise)"),
    Variable("optimum_gap", "f8",
             "the certified bound on L̄(θ*) − min L̄ of the reference optimum",
             roles=frozenset({REPORT, DIFF})),
    Variable("trivial_excess_risk", "f8",
             "excess of the data-independent centre of C (what ignoring the data achieves; the "
             "analysis uses it to mark the capped regime)", roles=frozenset({REPORT, DIFF})),
    Variable("oracle_excess_risk", "f8",
             "closed-form expected excess of the configuration on that dataset where one is "
             "known (`Algorithm.oracle_excess`; NaN otherwise): the report draws it and gives "
             "empirical/oracle ratios", roles=frozenset({REPORT, DIFF})),
    Variable("wall_time_s", "f8", "seconds of the mechanism's run (one BLAS thread)",
             deterministic=False, roles=frozenset({REPORT, COST})),
    Variable("grad_queries", "f8", "per-example (sub)gradient evaluations",
             roles=frozenset({REPORT, COST})),
    Variable("func_queries", "f8", "per-example loss evaluations",
             roles=frozenset({REPORT, COST, OPTIONAL_COST})),
    Variable("iterations", "f8", "iterations, steps or proposals of the mechanism"),
    Variable("epsilon_spent", "f8",
             "ε of the tightest certified account in the mechanism's ledger (for NoisySGD the "
             "RDP accountant's, e.g. ≈ 0.17 for the paper's σ at nominal ε = 1)",
             roles=frozenset({REPORT, PRIVACY}), nominal_axis="epsilon"),
    Variable("delta_spent", "f8", "δ of that account", roles=frozenset({REPORT, PRIVACY}),
             nominal_axis="delta"),
    Variable("status", "u1",
             "0 pending, 1 done, 2 failed, 3 not applicable; a cell is done only once all its "
             "values are written", fill=PENDING, roles=frozenset({REPORT, DIFF})),
    Variable("error", "str",
             f"message of failed and not-applicable cells (at most {MAX_ERROR_CHARS} characters)",
             fill="", roles=frozenset({REPORT})),
)

#: Float result variables, in order (NaN until written).
FLOAT_VARS: tuple[str, ...] = tuple(v.name for v in VARIABLES if v.dtype == "f8")
#: Variables whose values legitimately differ between two runs of the same suite.
NONDETERMINISTIC_VARS: tuple[str, ...] = tuple(v.name for v in VARIABLES if not v.deterministic)
VARIABLE_NAMES: tuple[str, ...] = tuple(v.name for v in VARIABLES)


def with_role(role: str) -> tuple[str, ...]:
    """The names of the variables that have ``role`` (one of :data:`ROLES`), in cube order."""
    if role not in ROLES:
        raise ValueError(f"unknown variable role {role!r}; the roles are {ROLES}")
    return tuple(v.name for v in VARIABLES if role in v.roles)


#: The variables the report loads, in cube order.
REPORT_VARIABLES: tuple[str, ...] = with_role(REPORT)
#: The variables ``dpbench diff`` loads.
DIFF_VARIABLES: tuple[str, ...] = with_role(DIFF)
#: The variables of the report's cost figures, in panel order.
COST_VARIABLES: tuple[str, ...] = with_role(COST)
#: The cost variables drawn only when some mechanism records a positive value.
OPTIONAL_COST_VARIABLES: tuple[str, ...] = with_role(OPTIONAL_COST)
#: The privacy spent by the mechanism's ledger (each bounded by its ``nominal_axis``).
PRIVACY_VARIABLES: tuple[str, ...] = with_role(PRIVACY)


def variable(name: str) -> Variable:
    """The :data:`VARIABLES` entry called ``name`` (``KeyError`` if there is none)."""
    for v in VARIABLES:
        if v.name == name:
            return v
    raise KeyError(f"no cube variable {name!r}; the variables are {VARIABLE_NAMES}")


@dataclass
class ChunkResult:
    """What a worker returns for one chunk (the seeds of one cube row): per float variable an
    array over those seeds, their status codes and error texts."""

    experiment: str
    index: tuple[int, ...]
    seeds: tuple[int, ...]
    fresh: bool
    values: dict[str, np.ndarray]
    status: np.ndarray
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NotApplicableChunk:
    """A grid point where a mechanism declares itself not applicable: its cells get
    :data:`NOT_APPLICABLE` and the reason, without running anything."""

    experiment: str
    index: tuple[int, ...]
    reason: str


def make_row(**values: float) -> dict[str, float]:
    """A done cell's float values, in :data:`FLOAT_VARS` order; every variable exactly once."""
    missing = [v for v in FLOAT_VARS if v not in values]
    extra = [k for k in values if k not in FLOAT_VARS]
    if missing or extra:
        raise TypeError(f"a cube row needs exactly the variables {FLOAT_VARS}; "
                        f"missing {missing}, unknown {extra}")
    return {name: float(values[name]) for name in FLOAT_VARS}


def check_version(found: Any, where: str, written_by: str | None = None) -> None:
    """Refuse a store whose schema version is not :data:`CUBE_SCHEMA_VERSION`."""
    if found == CUBE_SCHEMA_VERSION:
        return
    by = f" by dpbench {written_by}" if written_by else ""
    raise StoreError(
        f"{where} was written{by} with cube schema version {found!r}; this dpbench "
        f"({__version__}) reads schema version {CUBE_SCHEMA_VERSION} only. Re-run its suite into a "
        "new --store (or with --restart), or open it with the dpbench version that wrote it")


def markdown_table() -> str:
    """The README's table of cube variables."""
    lines = ["| variable | dtype | meaning |", "|---|---|---|"]
    for v in VARIABLES:
        note = " (not deterministic)" if not v.deterministic else ""
        lines.append(f"| `{v.name}` | {v.dtype} | {v.doc}{note} |")
    return "\n".join(lines)
