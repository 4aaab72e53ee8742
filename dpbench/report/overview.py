"""The data of the report's overview: every mechanism of a problem on one figure, what the
mechanisms cost, and the per-problem leaders of the summary table.

Computed from an experiment's cube (the variables the report loads,
:data:`dpbench.core.schema.REPORT_VARIABLES`) and its rate fits, so that nothing is fitted twice.
The comparison is made where the rate figures look: along the main axis (n when it is swept), the
other axes at their first combination in cube order. Missing data — pending or failed cells,
not-applicable mechanisms, an axis with a single value, costs that are zero or not recorded —
never raise: what cannot be drawn is left out with a short note saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ..analysis import RateFit, sweep_axes
from ..analysis.spent import NON_PRIVATE
from ..core.schema import COST_VARIABLES, DONE, NONDETERMINISTIC_VARS, OPTIONAL_COST_VARIABLES
from .figures import (
    PALETTE,
    SKEW_RATIO,
    CostMetric,
    CostPanel,
    OverlayPanel,
    Series,
    axis_symbol,
    fixed_text,
    has_signal,
    num,
)

#: The axes cost figures are drawn against (each only when it has at least two values).
COST_AXES = ("n", "p")
#: The preferred main axis of an experiment: the overlay's x axis and the "largest n" of the
#: summary.
MAIN_AXIS = "n"


@dataclass(frozen=True)
class Leader:
    """The mechanism ahead on one summary criterion, its value and where it was measured."""

    label: str
    value: float
    where: str = ""


@dataclass(frozen=True)
class ProblemLeaders:
    """A problem's row of the summary: the mechanism with the lowest mean excess at the largest n
    and the fastest one (median wall time per cell); None where no mechanism has data."""

    problem: str
    best: Leader | None
    fastest: Leader | None


def _labels(ds: xr.Dataset, dim: str) -> list[str]:
    return [str(v) for v in ds[dim].values]


def _grid_dims(ds: xr.Dataset) -> list[str]:
    return [d for d in ds.excess_risk.dims if d not in ("algorithm", "problem", "seed")]


def _py(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def colors(ds: xr.Dataset) -> dict[str, str]:
    """Colour by mechanism: its position in the experiment, as in the rate figures."""
    return {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(_labels(ds, "algorithm"))}


def main_axis(ds: xr.Dataset) -> str | None:
    """The axis mechanisms are compared along: n when swept, else the first swept axis in cube
    order; None when no axis has two values."""
    swept = sweep_axes(ds)
    if not swept:
        return None
    return MAIN_AXIS if MAIN_AXIS in swept else swept[0]


def combo_note(axis: str, combos: Sequence[dict[str, Any]]) -> str:
    """How many combinations of the other swept axes exist, and which one is plotted."""
    swept = [k for k in combos[0] if any(c[k] != combos[0][k] for c in combos)]
    return (f"{len(combos)} combinations of the other swept axes "
            f"({', '.join(axis_symbol(k) for k in swept)}) exist; only the first value of each "
            f"({fixed_text(combos[0])}) is plotted along {axis_symbol(axis)}. Every combination "
            "is fitted in the rate-card table.")


# --- the overlay ------------------------------------------------------------------------------

#: Why a mechanism has no line in an overlay.
NO_DONE_CELL = "no done cell yet"
NO_SIGNAL = ("mean excess ≤ 0 or below the optimisation floor (round-off of the certified "
             "optimum) at every point")


def _not_drawn_reason(fit: RateFit) -> str:
    return NO_DONE_CELL if not any(fit.n_seeds) else NO_SIGNAL


def _no_overlay_reason(chosen: Sequence[RateFit], drawn: Sequence[RateFit]) -> str:
    if len(chosen) == 1:
        return f"only {chosen[0].algorithm} is applicable"
    quiet = "; ".join(f"{f.algorithm}: {_not_drawn_reason(f)}" for f in chosen if f not in drawn)
    if drawn:
        return f"only {drawn[0].algorithm} can be drawn ({quiet})"
    return f"no mechanism can be drawn ({quiet})"


def overlay_panels(ds: xr.Dataset, fits: Sequence[RateFit], *, level: float,
                   ) -> tuple[list[OverlayPanel], list[str]]:
    """Per problem, every mechanism's mean excess (with its interval) along the main axis, and
    notes on the problems left without a figure: fewer than two mechanisms to draw there (their
    rate figure already shows the one), or no axis to draw along."""
    axis = main_axis(ds)
    if axis is None:
        return [], ["No grid axis has two or more values: there is no axis to compare along."]
    exp = str(ds.attrs.get("experiment", ""))
    normalisation = str(ds.attrs.get("normalisation", "average scale"))
    color = colors(ds)
    panels: list[OverlayPanel] = []
    notes: list[str] = []
    for prob in _labels(ds, "problem"):
        group = [f for f in fits if f.problem == prob and f.axis == axis]
        if not group:
            notes.append(f"{prob}: no mechanism is applicable.")
            continue
        combos: list[dict[str, Any]] = []
        for f in group:
            if f.fixed not in combos:
                combos.append(f.fixed)
        chosen = [f for f in group if f.fixed == combos[0]]
        drawn = [f for f in chosen if has_signal(f)]
        if len(drawn) < 2:
            notes.append(f"{prob}: {_no_overlay_reason(chosen, drawn)}; no comparison to draw.")
            continue
        series = [Series(f.algorithm, np.asarray(f.x, dtype=float),
                         np.asarray(f.mean, dtype=float), color[f.algorithm],
                         np.asarray(f.mean_low, dtype=float), np.asarray(f.mean_high, dtype=float))
                  for f in drawn]
        panels.append(OverlayPanel(
            exp, prob, axis, combos[0], series, normalisation, level,
            seeds=[k for f in drawn for k in f.n_seeds],
            not_drawn={f.algorithm: _not_drawn_reason(f) for f in chosen if f not in drawn},
            note=combo_note(axis, combos) if len(combos) > 1 else ""))
    return panels, notes


# --- cost -------------------------------------------------------------------------------------

def _pooled(ds: xr.Dataset, variable: str, axis: str) -> tuple[np.ndarray, np.ndarray]:
    """``variable`` as (algorithm, value of ``axis``, every other cell) and the mask of its done
    cells with a finite value."""
    da = ds[variable]
    keep = ["algorithm", axis]
    order = [*keep, *(d for d in da.dims if d not in keep)]
    values = da.transpose(*order).values.astype(float)
    ok = (ds.status.transpose(*order).values == DONE) & np.isfinite(values)
    shape = (*values.shape[:2], -1)
    return values.reshape(shape), ok.reshape(shape)


def marginal_means(ds: xr.Dataset, variable: str, axis: str) -> np.ndarray:
    """Mean of ``variable`` over the done cells with a finite value, per (algorithm, value of
    ``axis``), pooling problems, seeds and the other axes; NaN where there is no such cell."""
    values, ok = _pooled(ds, variable, axis)
    total = np.where(ok, values, 0.0).sum(axis=2)
    count = ok.sum(axis=2)
    return np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)


def marginal_medians(ds: xr.Dataset, variable: str, axis: str) -> np.ndarray:
    """Like :func:`marginal_means`, the median."""
    values, ok = _pooled(ds, variable, axis)
    out = np.full(values.shape[:2], np.nan)
    for i, j in np.ndindex(*out.shape):
        if ok[i, j].any():
            out[i, j] = float(np.median(values[i, j][ok[i, j]]))
    return out


def _skew_notes(ds: xr.Dataset, variable: str, axis: str, means: np.ndarray) -> list[str]:
    """Where a mechanism's mean is more than :data:`SKEW_RATIO` times its median."""
    ratio = means / marginal_medians(ds, variable, axis)
    out: list[str] = []
    for label, r in zip(_labels(ds, "algorithm"), ratio):
        high = np.flatnonzero(np.isfinite(r) & (r > SKEW_RATIO))
        if high.size:
            out.append(f"{label} at {axis_symbol(axis)}="
                       + ", ".join(num(_py(ds[axis].values[j]), 6) for j in high)
                       + f" ({num(r[high].min(), 2)}–{num(r[high].max(), 2)}× the median)")
    return out


def _averaged_text(ds: xr.Dataset, axis: str) -> str:
    probs = _labels(ds, "problem")
    parts = [f"problem{'s' if len(probs) > 1 else ''} {', '.join(probs)}"]
    parts += [f"{axis_symbol(d)}=" + ", ".join(num(_py(v), 6) for v in ds[d].values)
              for d in _grid_dims(ds) if d != axis and ds.sizes[d] > 1]
    parts.append(f"{ds.sizes['seed']} seeds")
    return "; ".join(parts) + " (not-applicable and unfinished cells are left out)"


def _cost_metric(ds: xr.Dataset, variable: str, axis: str, color: dict[str, str],
                 ) -> CostMetric | None:
    """The lines of one cost variable, or None when no mechanism has a positive mean."""
    means = marginal_means(ds, variable, axis)
    x = np.asarray(ds[axis].values, dtype=float)
    series: list[Series] = []
    absent: list[str] = []
    for label, m in zip(_labels(ds, "algorithm"), means):
        if not np.isfinite(m).any():
            continue        # no done cell: not applicable here, or not run yet
        if np.any(np.isfinite(m) & (m > 0)):
            series.append(Series(label, x, m, color[label]))
        else:
            absent.append(label)
    if not series:
        return None
    skewed = _skew_notes(ds, variable, axis, means) if variable in NONDETERMINISTIC_VARS else []
    return CostMetric(variable, series, absent, skewed)


def cost_panels(ds: xr.Dataset) -> tuple[list[CostPanel], list[str]]:
    """Per cost axis with at least two values, the mean wall time and query counts per cell of
    every mechanism; notes on the axes and variables left out."""
    exp = str(ds.attrs.get("experiment", ""))
    color = colors(ds)
    panels: list[CostPanel] = []
    notes: list[str] = []
    left_out: list[str] = []
    for axis in (a for a in COST_AXES if a in _grid_dims(ds)):
        if ds.sizes[axis] < 2:
            notes.append(f"{axis_symbol(axis)} has a single value "
                         f"({num(_py(ds[axis].values[0]), 6)}): no cost figure against it.")
            continue
        metrics: list[CostMetric] = []
        for var in (v for v in COST_VARIABLES if v in ds):
            metric = _cost_metric(ds, var, axis, color)
            if metric is not None:
                metrics.append(metric)
            elif var not in OPTIONAL_COST_VARIABLES and var not in left_out:
                left_out.append(var)
        if metrics:
            panels.append(CostPanel(exp, axis, metrics, _averaged_text(ds, axis)))
        else:
            notes.append(f"{axis_symbol(axis)}: no done cell records a cost yet.")
    if panels:
        notes += [f"No panel for {var}: no mechanism records a positive value." for var in left_out]
    missing = [v for v in COST_VARIABLES if v not in ds]
    if missing:
        notes.append(f"Not in this store: {', '.join(missing)}.")
    return panels, notes


# --- the summary's leaders ----------------------------------------------------------------------

def _ranked(ds: xr.Dataset) -> list[int]:
    """Positions of the mechanisms the summary ranks: the private ones when there are any (a
    non-private reference would always have the lowest excess)."""
    infos = ds.attrs.get("algorithms", {})
    labels = _labels(ds, "algorithm")
    private = [i for i, a in enumerate(labels)
               if dict(infos.get(a, {})).get("privacy") != NON_PRIVATE]
    return private or list(range(len(labels)))


def _best_point(ds: xr.Dataset) -> dict[str, int]:
    """Grid positions of the summary's comparison: the largest n (the largest value of the main
    axis without an n axis), every other axis at its first value as in the figures."""
    dims = _grid_dims(ds)
    last = MAIN_AXIS if MAIN_AXIS in dims else main_axis(ds)
    return {d: (ds.sizes[d] - 1 if d == last else 0) for d in dims}


def _mean_done(values: np.ndarray, status: np.ndarray) -> float:
    ok = (status == DONE) & np.isfinite(values)
    return float(values[ok].mean()) if ok.any() else float("nan")


def _median_done(values: np.ndarray, status: np.ndarray) -> float:
    """The median over done cells: a worker's first calls compile, so a few cells can take
    10–1000× the others and move a mean that the median ignores."""
    ok = (status == DONE) & np.isfinite(values)
    return float(np.median(values[ok])) if ok.any() else float("nan")


def _lowest(candidates: Sequence[tuple[str, float]], where: str = "") -> Leader | None:
    finite = [(label, v) for label, v in candidates if np.isfinite(v)]
    if not finite:
        return None
    label, value = min(finite, key=lambda c: c[1])
    return Leader(label, value, where)


def problem_leaders(ds: xr.Dataset) -> list[ProblemLeaders]:
    """Per problem: the ranked mechanism with the lowest mean excess at the largest n, and the one
    with the lowest median wall time per done cell over the whole grid."""
    positions = _ranked(ds)
    labels = _labels(ds, "algorithm")
    point = _best_point(ds)
    shown = {d: _py(ds[d].values[i]) for d, i in point.items()
             if d == MAIN_AXIS or ds.sizes[d] > 1}
    at = fixed_text(shown)
    status = ds.status
    out: list[ProblemLeaders] = []
    for pi, prob in enumerate(_labels(ds, "problem")):
        best: list[tuple[str, float]] = []
        fastest: list[tuple[str, float]] = []
        for ai in positions:
            sel = {"algorithm": ai, "problem": pi}
            cell = {**sel, **point}
            best.append((labels[ai], _mean_done(ds.excess_risk[cell].values,
                                                status[cell].values)))
            if "wall_time_s" in ds:
                fastest.append((labels[ai], _median_done(ds.wall_time_s[sel].values,
                                                         status[sel].values)))
        out.append(ProblemLeaders(prob, _lowest(best, at), _lowest(fastest)))
    return out
