"""The privacy each mechanism spent by its ledger, against the nominal budget of its grid.

Every done cell records the tightest certified account of the mechanism's privacy ledger (the
cube variables with the ``privacy`` role of :mod:`dpbench.core.schema`: ``epsilon_spent`` and
``delta_spent``), and each of them names the grid axis of its nominal value (``epsilon``,
``delta``). :func:`privacy_spent` summarises them per (algorithm label, problem): the nominal
values of the grid, the range of what was spent over the done cells, and how many done cells
spent more than their own nominal value — which must never happen for a private mechanism (its
calibration or its ledger is wrong; a run already fails a cell whose ledger exceeds its budget,
so the table re-checks what the store holds). A non-private reference (privacy ``none``) spends
ε = ∞ by construction: it is listed, never flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..core.schema import DONE, NOT_APPLICABLE, PRIVACY_VARIABLES, variable
from ..privacy.ledger import BUDGET_RTOL

#: The ``privacy`` of a non-private reference mechanism (``Algorithm.privacy``): the report's
#: summary ranks the private mechanisms only, and nothing here checks a reference's budget.
NON_PRIVATE = "none"


@dataclass(frozen=True)
class Spent:
    """One privacy variable of one (algorithm, problem) over its done cells."""

    variable: str            # the cube variable, e.g. "epsilon_spent"
    axis: str                # the grid axis of its nominal value, e.g. "epsilon"
    nominal: list[float]     # the axis' values on the grid, in cube order
    low: float               # the least spent over the done cells (NaN: none done)
    high: float              # the most spent
    over: int                # done cells that spent more than their nominal value
    ratio_low: float = math.nan   # the least spent / nominal over the done cells (nominal > 0)
    ratio_high: float = math.nan  # the most


@dataclass(frozen=True)
class PrivacySpent:
    """The privacy spent by one algorithm variant on one problem, per privacy variable."""

    algorithm: str
    problem: str
    private: bool            # False for a non-private reference: never flagged
    done: int                # done cells
    spent: list[Spent] = field(default_factory=list)

    @property
    def over(self) -> int:
        """Done cells that spent more than nominal on some privacy variable (0 for a reference)."""
        return sum(s.over for s in self.spent) if self.private else 0


def _py(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _exceeds(spent: np.ndarray, nominal: np.ndarray) -> np.ndarray:
    """Where ``spent`` exceeds ``nominal`` by more than the round-off a ledger's budget check
    allows (:data:`~dpbench.privacy.ledger.BUDGET_RTOL`)."""
    return spent > nominal * (1 + BUDGET_RTOL)


def _spent(name: str, axis: str, grid: list[float], spent: np.ndarray,
           nominal: np.ndarray) -> Spent:
    """One privacy variable's summary from the done cells' ``spent`` and ``nominal`` values."""
    if not spent.size:
        return Spent(name, axis, grid, math.nan, math.nan, 0)
    ratio = spent[nominal > 0] / nominal[nominal > 0]
    ratio = ratio[np.isfinite(ratio)]
    return Spent(name, axis, grid, float(spent.min()), float(spent.max()),
                 int(_exceeds(spent, nominal).sum()),
                 float(ratio.min()) if ratio.size else math.nan,
                 float(ratio.max()) if ratio.size else math.nan)


def privacy_spent(ds: xr.Dataset) -> list[PrivacySpent]:
    """Per (algorithm label, problem) with at least one applicable cell, in cube order, the
    privacy its ledger spent over the done cells against the grid's nominal values (see the
    module docstring). A privacy variable whose nominal axis the cube lacks is left out."""
    names = [v for v in PRIVACY_VARIABLES if v in ds and variable(v).nominal_axis in ds.dims]
    status = ds.status.transpose("algorithm", "problem", ...)
    algorithms = ds.attrs.get("algorithms", {})
    out = []
    for ai, alg in enumerate(str(a) for a in ds.algorithm.values):
        private = str(algorithms.get(alg, {}).get("privacy", "")) != NON_PRIVATE
        for pi, prob in enumerate(str(p) for p in ds.problem.values):
            st = status.isel(algorithm=ai, problem=pi)
            if bool((st == NOT_APPLICABLE).all()):
                continue
            done = (st == DONE).values
            row = PrivacySpent(alg, prob, private, int(done.sum()))
            for name in names:
                axis = variable(name).nominal_axis
                spent = ds[name].isel(algorithm=ai, problem=pi).transpose(*st.dims).values[done]
                nominal = ds[axis].broadcast_like(st).transpose(*st.dims).values[done]
                row.spent.append(_spent(name, axis, [float(_py(v)) for v in ds[axis].values],
                                        spent.astype(float), nominal.astype(float)))
            out.append(row)
    return out
