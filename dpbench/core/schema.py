"""The cube schema: the one place that owns the result variables and the status codes.

Every experiment group of a result store (:mod:`dpbench.store.cube`) holds, over the dimensions
``(algorithm, problem, <grid axes>, seed)``, one array per :data:`VARIABLES` entry. The worker
builds its row with :func:`make_row`, the store creates and writes the arrays from this table,
the analysis checks variable names against it, and the README's variable table is rendered from
it (``tests/unit/test_schema.py`` keeps the two equal).

:data:`SCHEMA_VERSION` is written into every store; :func:`check_version` refuses a store written
under another version before anything is computed (docs/architecture.md, "The cube schema").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._version import __version__
from .errors import StoreError

#: Bumped whenever a variable is added, removed, renamed or changes meaning or dtype.
SCHEMA_VERSION = 1

PENDING, DONE, FAILED, NOT_APPLICABLE = 0, 1, 2, 3
STATUS_NAMES = {PENDING: "pending", DONE: "done", FAILED: "failed",
                NOT_APPLICABLE: "not applicable"}

#: Longest error text kept per cell (the rest is cut).
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class Variable:
    """One data variable of the cube."""

    name: str
    dtype: str
    doc: str
    deterministic: bool = True
    fill: Any = None


VARIABLES: tuple[Variable, ...] = (
    Variable("excess_risk", "f8",
             "excess **average** empirical risk L̄(θ̂) − L̄(θ*) against a certified optimum "
             "(BST14 states sums: divide its bounds by n)"),
    Variable("population_excess_risk", "f8",
             "excess population risk where the problem defines a data law (NaN otherwise)"),
    Variable("optimum_gap", "f8",
             "the certified bound on L̄(θ*) − min L̄ of the reference optimum"),
    Variable("trivial_excess_risk", "f8",
             "excess of the data-independent centre of C (what ignoring the data achieves; the "
             "analysis uses it to mark the capped regime)"),
    Variable("oracle_excess_risk", "f8",
             "closed-form expected excess of the configuration on that dataset where one is "
             "known (`Algorithm.oracle_excess`; NaN otherwise): the report draws it and gives "
             "empirical/oracle ratios"),
    Variable("wall_time_s", "f8", "seconds of the mechanism's run (one BLAS thread)",
             deterministic=False),
    Variable("grad_queries", "f8", "per-example (sub)gradient evaluations"),
    Variable("func_queries", "f8", "per-example loss evaluations"),
    Variable("iterations", "f8", "iterations, steps or proposals of the mechanism"),
    Variable("epsilon_spent", "f8",
             "ε of the tightest certified account in the mechanism's ledger (for NoisySGD the "
             "RDP accountant's, e.g. ≈ 0.17 for the paper's σ at nominal ε = 1)"),
    Variable("delta_spent", "f8", "δ of that account"),
    Variable("status", "u1",
             "0 pending, 1 done, 2 failed, 3 not applicable; a cell is done only once all its "
             "values are written", fill=PENDING),
    Variable("error", "str",
             f"message of failed and not-applicable cells (at most {MAX_ERROR_CHARS} characters)",
             fill=""),
)

#: Float result variables, in order (NaN until written).
FLOAT_VARS: tuple[str, ...] = tuple(v.name for v in VARIABLES if v.dtype == "f8")
#: Variables whose values legitimately differ between two runs of the same suite.
NONDETERMINISTIC_VARS: tuple[str, ...] = tuple(v.name for v in VARIABLES if not v.deterministic)
VARIABLE_NAMES: tuple[str, ...] = tuple(v.name for v in VARIABLES)


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
    """Refuse a store whose schema version is not :data:`SCHEMA_VERSION`."""
    if found == SCHEMA_VERSION:
        return
    by = f" by dpbench {written_by}" if written_by else ""
    raise StoreError(
        f"{where} was written{by} with cube schema version {found!r}; this dpbench "
        f"({__version__}) reads schema version {SCHEMA_VERSION} only. Re-run its suite into a new "
        "--store (or with --restart), or open it with the dpbench version that wrote it")


def markdown_table() -> str:
    """The README's table of cube variables."""
    lines = ["| variable | dtype | meaning |", "|---|---|---|"]
    for v in VARIABLES:
        note = " (not deterministic)" if not v.deterministic else ""
        lines.append(f"| `{v.name}` | {v.dtype} | {v.doc}{note} |")
    return "\n".join(lines)
