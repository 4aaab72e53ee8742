"""Report figures: log-log excess risk against a swept axis, with theory drawn through the data.

Library code: ``matplotlib.figure.Figure`` objects on an Agg canvas, never pyplot (matplotlib's
documentation advises against pyplot in library and server code: its global figure registry leaks
memory). Every figure is drawn under a fixed :data:`RC` (``matplotlib.rc_context``) and saved
as PNG at a fixed dpi without the ``Software`` stamp, then reduced to an 8-bit palette with Pillow
(matplotlib's own image dependency), so the same data give the same bytes.
Captions are generated from the same metadata as the drawing, so a figure explains itself.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogFormatter, NullLocator
from PIL import Image

from ..analysis import VERDICT_TEXT, RateFit
from ..analysis.settings import DEFAULT
from ..core.schema import NONDETERMINISTIC_VARS, VARIABLES

#: PNG resolution; with :data:`FIGSIZE` a figure is 720 × 420 pixels, a cost figure 720 × 340.
DPI = 100
FIGSIZE = (7.2, 4.2)
COST_FIGSIZE = (7.2, 3.4)
#: rcParams every figure is drawn with (local to the drawing: ``matplotlib.rc_context``).
RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "legend.fontsize": 7.5,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.solid_capstyle": "round",
    "path.simplify": False,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}
#: Colours by algorithm position in the experiment (tab10, colour-blind friendly order).
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f")
#: Fixed margins (faster than a layout engine and identical for every figure): the legend
#: sits right of the axes, the title takes two lines.
MARGINS = {"left": 0.11, "right": 0.72, "bottom": 0.12, "top": 0.87}
#: Margins of a cost figure: its panels side by side, the legend in rows below them.
COST_MARGINS = {"left": 0.07, "right": 0.98, "top": 0.80, "wspace": 0.3}
#: Mechanisms per legend row of a cost figure.
COST_LEGEND_COLUMNS = 4
#: A cost mean above this multiple of its median is flagged in the caption (see
#: :func:`dpbench.report.overview.cost_panels`).
SKEW_RATIO = 3.0
#: Markers of the overlay and cost lines by mechanism position, drawn ever smaller, so that lines
#: that coincide (equal query counts, say) still show each mechanism.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
#: Minor y ticks only when the axis spans at most this many decades (they are slow to draw).
MINOR_TICK_DECADES = 3.0
AXIS_LABELS = {"n": "n (samples)", "p": "p (dimension)", "epsilon": "ε (privacy budget)",
               "delta": "δ"}
AXIS_SYMBOLS = {"epsilon": "ε", "delta": "δ"}
EXCESS_LABEL = "mean excess empirical risk (average scale)"
#: Panel titles of the cost variables; the caption adds the cube schema's description of each.
COST_LABELS = {"wall_time_s": "wall time per cell (s, this machine)",
               "grad_queries": "gradient queries per cell",
               "func_queries": "loss evaluations per cell"}
#: Exclusion codes (:attr:`RateFit.exclusion`) meaning "no signal above round-off": an algorithm
#: with only such points (the non-private reference) is named, not drawn.
NO_SIGNAL_CODES = ("nonpositive", "floor")


# --- formatting -------------------------------------------------------------------------------

def num(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` significant digits; "—" for a missing value."""
    if value is None:
        return "—"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "—" if not math.isfinite(v) else f"{v:.{digits}g}"


def slope_text(value: float) -> str:
    """A slope with two decimals ("—" when missing)."""
    return f"{value:.2f}" if math.isfinite(value) else "—"


def _formatter(fmt: str) -> Callable[[float], str]:
    return slope_text if fmt == "slope" else num


def ci_text(low: float, high: float, fmt: str = "slope") -> str:
    """A confidence interval "[low, high]" ("" when it could not be computed); ``fmt`` is
    "slope" (two decimals) or "num" (significant digits)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    f = _formatter(fmt)
    return f"[{f(low)},\u00a0{f(high)}]"     # a no-break space: an interval never wraps


def estimate_text(value: float, low: float, high: float, fmt: str = "slope") -> str:
    """"value [low, high]", or just "value" when the CI could not be computed."""
    ci = ci_text(low, high, fmt)
    shown = _formatter(fmt)(value)
    return f"{shown} {ci}" if ci else shown


def duration_text(seconds: float) -> str:
    """A duration with three significant digits in µs, ms or s ("—" when missing)."""
    if not math.isfinite(seconds):
        return "—"
    seconds = float(f"{seconds:.3g}")     # rounded first: 0.9999 ms reads "1 ms", not "1e+03 µs"
    for scale, unit in ((1e-3, "µs"), (1.0, "ms")):
        if abs(seconds) < scale:
            return f"{num(seconds / scale * 1e3)} {unit}"
    return f"{num(seconds)} s"


def axis_symbol(axis: str) -> str:
    return AXIS_SYMBOLS.get(axis, axis)


def fixed_text(fixed: dict[str, Any]) -> str:
    """Fixed axes as "p=5, ε=1, δ=1e-06"."""
    return ", ".join(f"{axis_symbol(k)}={num(v, 6)}" for k, v in fixed.items())


def _points_text(axis: str, xs: Iterable[float]) -> str:
    return f"{axis_symbol(axis)}=" + ", ".join(num(x, 6) for x in xs)


# --- panels -----------------------------------------------------------------------------------

class Panel(Protocol):
    """What the report embeds as a figure: a drawing and the text that explains it."""

    def title(self) -> str: ...

    def alt(self) -> str: ...

    def caption(self) -> list[str]: ...

    def figure(self) -> Figure: ...


# --- the rate panel ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Curve:
    """One algorithm in a panel: its fit, its seed-level values and how to describe it."""

    fit: RateFit
    seed_x: np.ndarray
    seed_y: np.ndarray
    color: str
    exponent: float | None = None      # the rate card's leading exponent along the axis


@dataclass
class RatePanel:
    """Mean excess risk of an experiment's algorithms on one problem along one axis."""

    experiment: str
    problem: str
    axis: str
    fixed: dict[str, Any]
    curves: list[Curve]
    normalisation: str
    not_drawn: list[str] = field(default_factory=list)   # "label: why" of algorithms left out
    note: str = ""                                        # e.g. which fixed combinations are shown

    # --- text ---
    def title(self) -> str:
        return f"{self.experiment} · {self.problem}: excess risk vs {axis_symbol(self.axis)}"

    def alt(self) -> str:
        """The image's alternative text: the title and the fixed axes."""
        return f"{self.title()} ({fixed_text(self.fixed)})" if self.fixed else self.title()

    def caption(self) -> list[str]:
        """The caption as sentences/paragraphs, generated from the fits' metadata."""
        algs = ", ".join(c.fit.algorithm for c in self.curves)
        lines = [
            f"Mean excess empirical risk of {algs} on {self.problem} against "
            f"{AXIS_LABELS.get(self.axis, self.axis)}, log-log, with "
            f"{fixed_text(self.fixed) or 'no other axis'} (experiment {self.experiment}). "
            f"Normalisation: {self.normalisation}.",
            self._estimator_sentence(),
        ]
        lines += self._theory_sentences()
        lines += [self._curve_sentence(c) for c in self.curves]
        if self.not_drawn:
            lines.append("Not drawn: " + "; ".join(self.not_drawn) + ".")
        if self.note:
            lines.append(self.note)
        return lines

    def _estimator_sentence(self) -> str:
        seed_txt = _seeds_text([k for c in self.curves for k in c.fit.n_seeds])
        level = self.curves[0].fit.level if self.curves else DEFAULT.level
        hidden = sum(int(np.sum(~(c.seed_y > 0))) for c in self.curves)
        out = (f"Lines: mean over {seed_txt} per point (filled markers: points used in the fit; "
               f"hollow: excluded). Bands: {level:.0%} percentile-bootstrap CI of the mean. "
               "Small dots: individual seeds")
        if hidden:
            out += f" ({hidden} non-positive seed value(s) cannot be shown on a log scale)"
        return out + "."

    def _theory_sentences(self) -> list[str]:
        out = []
        if any(math.isfinite(c.fit.ratio) for c in self.curves):
            out.append("Dashed: the rate-card bound times the fitted empirical/bound ratio — "
                       "theory rescaled by the fitted constant, anchored at the geometric mean of "
                       "the kept points; its local slope is the predicted one.")
        named = [c.fit.algorithm for c in self.curves if _has_oracle(c.fit)]
        if named:
            out.append("Dash-dotted: the closed-form oracle curve (dpbench.theory.expected_excess) of "
                       + ", ".join(named) + ", drawn at its own level, not fitted: "
                       + "; ".join(f"{c.fit.algorithm} empirical/oracle = "
                                   f"{num(c.fit.oracle_ratio)}" for c in self.curves
                                   if _has_oracle(c.fit) and math.isfinite(c.fit.oracle_ratio))
                       + ".")
        caps = sorted({c.fit.cap for c in self.curves if math.isfinite(c.fit.cap)})
        if caps:
            out.append("Dotted: the trivial maximum of the excess, L·D = "
                       + ", ".join(num(v) for v in caps) + ".")
        return out

    def _curve_sentence(self, c: Curve) -> str:
        f = c.fit
        used = int(f.used.sum())
        s = f"{f.algorithm}: "
        if math.isfinite(f.slope):
            s += f"fitted slope {estimate_text(f.slope, f.slope_low, f.slope_high)}"
        else:
            s += "no fitted slope (fewer than 2 points kept)"
        if math.isfinite(f.predicted_slope):
            s += f" vs predicted local slope {slope_text(f.predicted_slope)}"
        if c.exponent is not None:
            s += f" (rate-card exponent {axis_symbol(self.axis)}^{num(c.exponent)}"
            s += f"; {f.rate_citation})" if f.rate_citation else ")"
        elif not f.rate_expression:
            s += " (no rate card)"
        s += f"; {used}/{len(f.x)} points used; verdict: {VERDICT_TEXT[f.verdict]} ({f.reason})."
        excluded = _group_exclusions(self.axis, f)
        if excluded:
            s += " Excluded: " + "; ".join(excluded) + "."
        return s

    # --- drawing ---
    def figure(self) -> Figure:
        """The panel as a Figure (Agg canvas), drawn under :data:`RC`."""
        with matplotlib.rc_context(RC):
            fig, (ax,) = _log_log_figure(FIGSIZE, 1, MARGINS)
            for i, c in enumerate(self.curves):
                _draw_curve(ax, c, _jitter(i, len(self.curves)))
            caps = sorted({c.fit.cap for c in self.curves if math.isfinite(c.fit.cap)})
            for cap in caps:
                ax.axhline(cap, linestyle=":", color="0.35", linewidth=1.2)
            _set_xticks(ax, (x for c in self.curves for x in c.fit.x))
            _set_yticks(ax)
            ax.set_xlabel(AXIS_LABELS.get(self.axis, self.axis))
            ax.set_ylabel(EXCESS_LABEL)
            _set_title(ax, self.title(), self.fixed)
            _legend_right(ax, _legend_handles(self.curves, bool(caps)))
        return fig


# --- the overlay and cost panels ----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Series:
    """One mechanism's line in an overlay or cost panel: a mean per axis value and, for the
    excess risk, the interval of that mean (``low``/``high``; None when not estimated)."""

    label: str
    x: np.ndarray
    mean: np.ndarray
    color: str
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    def last(self) -> int | None:
        """Index of the largest axis value with a finite mean (None if there is none)."""
        finite = np.flatnonzero(np.isfinite(self.mean))
        return int(finite[-1]) if finite.size else None


@dataclass
class OverlayPanel:
    """Every mechanism of an experiment on one problem along the main axis: means and their
    intervals only, so that the mechanisms compare at a glance (the rate figures carry theory,
    seeds and exclusions)."""

    experiment: str
    problem: str
    axis: str
    fixed: dict[str, Any]
    series: list[Series]
    normalisation: str
    level: float
    seeds: list[int]                                      # seeds per point, over every series
    not_drawn: dict[str, str] = field(default_factory=dict)   # label -> why it has no line
    note: str = ""                                        # e.g. which fixed combination is shown

    def title(self) -> str:
        return (f"{self.experiment} · {self.problem}: mechanisms compared along "
                f"{axis_symbol(self.axis)}")

    def alt(self) -> str:
        labels = ", ".join(s.label for s in self.series)
        return f"{self.title()} ({labels}{'; ' + fixed_text(self.fixed) if self.fixed else ''})"

    def caption(self) -> list[str]:
        """The caption as sentences, generated from the series and their metadata."""
        lines = [
            f"Mean excess empirical risk of every mechanism of experiment {self.experiment} on "
            f"{self.problem} against {AXIS_LABELS.get(self.axis, self.axis)}, log-log, with "
            f"{fixed_text(self.fixed) or 'no other axis'}: "
            + ", ".join(s.label for s in self.series) + f". Normalisation: {self.normalisation}.",
            f"Lines: mean over {_seeds_text(self.seeds)} per point. Bands: {self.level:.0%} "
            "percentile-bootstrap CI of the mean (the intervals of the rate figures, which also "
            "show the theory, the seeds and the excluded points).",
        ]
        ends = self._ends()
        if ends:
            lines.append(ends)
        if self.not_drawn:
            lines.append("Not drawn: " + "; ".join(f"{label} ({why})"
                                                   for label, why in self.not_drawn.items()) + ".")
        if self.note:
            lines.append(self.note)
        return lines

    def _ends(self) -> str:
        """Each series' mean at its largest axis value with data, lowest first."""
        ends = []
        for s in self.series:
            i = s.last()
            if i is not None:
                low = s.low[i] if s.low is not None else math.nan
                high = s.high[i] if s.high is not None else math.nan
                ends.append((float(s.mean[i]), float(s.x[i]), s.label, low, high))
        if not ends:
            return ""
        ends.sort(key=lambda e: e[0])
        same_x = len({e[1] for e in ends}) == 1
        parts = [f"{label} {estimate_text(m, lo, hi, 'num')}"
                 + ("" if same_x else f" ({axis_symbol(self.axis)}={num(x, 6)})")
                 for m, x, label, lo, hi in ends]
        where = (f"At {axis_symbol(self.axis)}={num(ends[0][1], 6)}" if same_x
                 else "At the largest value with data")
        return f"{where}, lowest mean first: " + "; ".join(parts) + "."

    def _legend_handles(self) -> list[Any]:
        """Every mechanism of the panel, drawn or not, and the band."""
        handles: list[Any] = [_series_handle(s.label, s.color, i)
                              for i, s in enumerate(self.series)]
        handles += [Line2D([], [], linestyle="none", label=f"{label} (not drawn)")
                    for label in self.not_drawn]
        handles.append(Patch(facecolor="0.3", alpha=0.15, linewidth=0,
                             label=f"{self.level:.0%} CI of the mean"))
        return handles

    def figure(self) -> Figure:
        """The panel as a Figure (Agg canvas), drawn under :data:`RC`."""
        with matplotlib.rc_context(RC):
            fig, (ax,) = _log_log_figure(FIGSIZE, 1, MARGINS)
            for i, s in enumerate(self.series):
                _draw_series(ax, s, i)
            _set_xticks(ax, (x for s in self.series for x in s.x))
            _set_yticks(ax)
            ax.set_xlabel(AXIS_LABELS.get(self.axis, self.axis))
            ax.set_ylabel(EXCESS_LABEL)
            _set_title(ax, self.title(), self.fixed)
            _legend_right(ax, self._legend_handles())
        return fig


@dataclass
class CostMetric:
    """One cost variable of a cost panel: a line per mechanism with a positive mean somewhere."""

    variable: str
    series: list[Series]
    absent: list[str] = field(default_factory=list)   # mechanisms with no positive mean
    skewed: list[str] = field(default_factory=list)   # "label at n=… (a–b× the median)"


@dataclass
class CostPanel:
    """What an experiment's mechanisms cost along one axis: mean wall time and query counts per
    cell, one small log-log panel per cost variable, one line per mechanism."""

    experiment: str
    axis: str
    metrics: list[CostMetric]
    averaged: str                           # what each point averages over (caption text)

    def title(self) -> str:
        return f"{self.experiment}: cost per cell vs {axis_symbol(self.axis)}"

    def alt(self) -> str:
        return (f"{self.title()} ("
                + ", ".join(COST_LABELS.get(m.variable, m.variable) for m in self.metrics) + ")")

    def colors(self) -> dict[str, str]:
        """Colour by mechanism drawn in some panel, in order of appearance (the legend)."""
        return {s.label: s.color for m in self.metrics for s in m.series}

    def caption(self) -> list[str]:
        """The caption as sentences, the variables described by the cube schema."""
        docs = {v.name: v.doc for v in VARIABLES}
        lines = [
            f"Mean cost per cell of the mechanisms of experiment {self.experiment} against "
            f"{AXIS_LABELS.get(self.axis, self.axis)}, log-log: "
            + "; ".join(f"{COST_LABELS.get(m.variable, m.variable)} "
                        f"({m.variable}: {docs.get(m.variable, '')})" for m in self.metrics)
            + f". Each point averages the done cells at that value of {axis_symbol(self.axis)}"
            f" over {self.averaged}.",
        ]
        measured = [m.variable for m in self.metrics if m.variable in NONDETERMINISTIC_VARS]
        if measured:
            lines.append(f"{', '.join(measured)} is measured on the machine that ran each cell "
                         "(see Environment) and is not deterministic: another run, load or "
                         "machine gives other values, so it compares mechanisms within this "
                         "store only"
                         + ("; the query counts are deterministic." if len(measured) < len(
                             self.metrics) else "."))
        for m in self.metrics:
            label = COST_LABELS.get(m.variable, m.variable)
            for same in _coinciding(m.series):
                lines.append(f"In {label}, the lines of {' and '.join(same)} coincide (equal "
                             "values at every point).")
            if m.absent:
                lines.append(f"Not drawn in {label} (mean 0 or not recorded at every point): "
                             + ", ".join(m.absent) + ".")
            if m.skewed:
                lines.append(f"In {label}, a few slow cells dominate the mean (for instance a "
                             "kernel compiled on a worker's first call); the mean is more than "
                             f"{num(SKEW_RATIO)}× the median for " + "; ".join(m.skewed) + ".")
        return lines

    def figure(self) -> Figure:
        """The panel as a Figure (Agg canvas), drawn under :data:`RC`."""
        order = {label: i for i, label in enumerate(self.colors())}
        handles = [_series_handle(label, color, i)
                   for i, (label, color) in enumerate(self.colors().items())]
        rows = max(1, math.ceil(len(handles) / COST_LEGEND_COLUMNS))
        margins = {**COST_MARGINS, "bottom": 0.22 + 0.06 * rows}
        with matplotlib.rc_context(RC):
            fig, axes = _log_log_figure(COST_FIGSIZE, len(self.metrics), margins)
            for ax, m in zip(axes, self.metrics):
                for s in m.series:
                    _draw_series(ax, s, order[s.label])
                _set_xticks(ax, (x for s in m.series for x in s.x))
                _set_yticks(ax)
                ax.set_xlabel(AXIS_LABELS.get(self.axis, self.axis))
                ax.set_title(COST_LABELS.get(m.variable, m.variable), y=1.0, pad=6.0)
            fig.suptitle(self.title(), y=0.97)
            fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0),
                       ncols=min(len(handles), COST_LEGEND_COLUMNS), frameon=False)
        return fig


def _marker(i: int) -> tuple[str, float]:
    """The marker and marker size of the i-th mechanism of an overlay or cost panel."""
    return MARKERS[i % len(MARKERS)], max(3.0, 6.5 - 0.8 * i)


def _draw_series(ax: Any, s: Series, i: int) -> None:
    """A mean line with its markers (and its band when the series has an interval)."""
    ok = _draw_mean(ax, s.x, s.mean, s.low, s.high, s.color)
    marker, size = _marker(i)
    ax.plot(s.x[ok], s.mean[ok], marker, color=s.color, markersize=size, zorder=4 + 0.01 * i)


def _series_handle(label: str, color: str, i: int) -> Line2D:
    marker, size = _marker(i)
    return Line2D([], [], color=color, marker=marker, markersize=size, linewidth=1.6, label=label)


def _coinciding(series: Sequence[Series]) -> list[list[str]]:
    """Labels of the series whose means are equal at every point, in groups of two or more."""
    groups: list[list[Series]] = []
    for s in series:
        for g in groups:
            if np.allclose(g[0].mean, s.mean, rtol=1e-9, atol=0.0, equal_nan=True):
                g.append(s)
                break
        else:
            groups.append([s])
    return [[s.label for s in g] for g in groups if len(g) > 1]


def _seeds_text(seeds: Sequence[int]) -> str:
    """"4 seeds" or "3–4 seeds" ("no seeds" when empty)."""
    k = sorted(set(seeds))
    if not k:
        return "no seeds"
    return f"{k[0]} seeds" if len(k) == 1 else f"{k[0]}–{k[-1]} seeds"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_label(value: float, _pos: int | None = None) -> str:
    """A log-axis tick label: "10⁻²" for powers of ten (plain text: no mathtext parsing)."""
    if value <= 0 or not math.isfinite(value):
        return ""
    exponent = round(math.log10(value))
    if math.isclose(value, 10.0 ** exponent, rel_tol=1e-9):
        return "1" if exponent == 0 else "10" + str(exponent).translate(_SUPERSCRIPT)
    return num(value, 2)


def _group_exclusions(axis: str, fit: RateFit) -> list[str]:
    """"x=a, b — reason" for each distinct exclusion reason, in order of first appearance."""
    groups: dict[str, list[float]] = {}
    for x, why in zip(fit.x, fit.excluded):
        if why:
            groups.setdefault(why, []).append(x)
    return [f"{_points_text(axis, xs)} — {why}" for why, xs in groups.items()]


def _jitter(i: int, k: int) -> float:
    """Multiplicative horizontal offset of algorithm i's seed dots (so they do not overlap)."""
    return math.exp(0.025 * (i - (k - 1) / 2))


def _positive(a: Sequence[float]) -> np.ndarray:
    arr = np.asarray(a, dtype=float)
    return np.isfinite(arr) & (arr > 0)


def has_signal(fit: RateFit) -> bool:
    """True if some point has a positive mean above the optimisation floor (worth a log plot)."""
    return any(m > 0 and code not in NO_SIGNAL_CODES for m, code in zip(fit.mean, fit.exclusion))


def _has_oracle(fit: RateFit) -> bool:
    return any(math.isfinite(v) and v > 0 for v in fit.oracle)


def _draw_mean(ax: Any, x: np.ndarray, mean: np.ndarray, low: np.ndarray | None,
               high: np.ndarray | None, color: str) -> np.ndarray:
    """The line through the positive means and, where both ends are positive, the band of their
    interval; returns the mask of the points drawn (a log axis cannot show the others)."""
    ok = _positive(mean) & (x > 0)
    if low is not None and high is not None:
        band = ok & _positive(low) & _positive(high)
        if band.any():
            ax.fill_between(x, np.where(band, low, np.nan), np.where(band, high, np.nan),
                            color=color, alpha=0.15, linewidth=0, zorder=1)
    ax.plot(x[ok], mean[ok], "-", color=color, linewidth=1.6, zorder=3)
    return ok


def _draw_curve(ax: Any, c: Curve, jitter: float) -> None:
    f = c.fit
    x = np.asarray(f.x, dtype=float)
    mean = np.asarray(f.mean, dtype=float)
    used = f.used
    sy = np.asarray(c.seed_y, dtype=float)
    shown = _positive(sy)
    ax.scatter(np.asarray(c.seed_x)[shown] * jitter, sy[shown], s=7, alpha=0.35, color=c.color,
               linewidths=0, zorder=2)
    ok = _draw_mean(ax, x, mean, np.asarray(f.mean_low, dtype=float),
                    np.asarray(f.mean_high, dtype=float), c.color)
    ax.plot(x[ok & used], mean[ok & used], "o", color=c.color, markersize=5, zorder=4)
    ax.plot(x[ok & ~used], mean[ok & ~used], "o", markerfacecolor="white",
            markeredgecolor=c.color, markeredgewidth=1.3, markersize=6, zorder=4)
    if math.isfinite(f.ratio):
        theory = np.asarray(f.bound, dtype=float) * f.ratio
        t_ok = _positive(theory) & (x > 0)
        ax.plot(x[t_ok], theory[t_ok], "--", color=c.color, linewidth=1.1, alpha=0.9, zorder=3)
    oracle = np.asarray(f.oracle, dtype=float) if f.oracle else np.full(len(x), np.nan)
    o_ok = _positive(oracle) & (x > 0)
    if o_ok.any():
        ax.plot(x[o_ok], oracle[o_ok], "-.", color=c.color, linewidth=1.2, alpha=0.9, zorder=3)


def _log_log_figure(figsize: tuple[float, float], ncols: int, margins: dict[str, float],
                    ) -> tuple[Figure, list[Any]]:
    """A figure on an Agg canvas with ``ncols`` log-log axes side by side, at fixed margins
    (call under :data:`RC`)."""
    fig = Figure(figsize=figsize, dpi=DPI)
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    fig.subplots_adjust(**margins)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
    return fig, axes


def _set_title(ax: Any, title: str, fixed: dict[str, Any]) -> None:
    """The title, with the fixed axes on a second line when there are any."""
    ax.set_title(title + (f"\n{fixed_text(fixed)}" if fixed else ""),
                 y=1.0, pad=8.0)  # an explicit y skips matplotlib's slow auto-placement


def _legend_right(ax: Any, handles: Sequence[Line2D]) -> None:
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              borderaxespad=0.0)


def _set_xticks(ax: Any, values: Iterable[float]) -> None:
    xs = sorted({float(x) for x in values if x > 0})
    if xs and len(xs) <= 12:
        ax.set_xticks(xs, [num(x, 6) for x in xs])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(xs[0] / 1.15, xs[-1] * 1.15)


def _set_yticks(ax: Any) -> None:
    """Plain-text power-of-ten labels; minor ticks (labelled) only over a few decades."""
    ax.yaxis.set_major_formatter(FuncFormatter(power_label))
    low, high = ax.get_ylim()
    if low > 0 and math.log10(high / low) <= MINOR_TICK_DECADES:
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    else:
        ax.yaxis.set_minor_locator(NullLocator())


def _legend_handles(curves: Sequence[Curve], with_cap: bool) -> list[Line2D]:
    handles = [Line2D([], [], color=c.color, marker="o", markersize=5, linewidth=1.6,
                      label=c.fit.algorithm) for c in curves]
    handles.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="white",
                          markeredgecolor="0.3", markersize=6, label="excluded point"))
    handles.append(Line2D([], [], linestyle="none", marker="o", color="0.3", alpha=0.4,
                          markersize=3, label="seed"))
    if any(math.isfinite(c.fit.ratio) for c in curves):
        handles.append(Line2D([], [], linestyle="--", color="0.3", linewidth=1.1,
                              label="theory × fitted ratio"))
    if any(_has_oracle(c.fit) for c in curves):
        handles.append(Line2D([], [], linestyle="-.", color="0.3", linewidth=1.2,
                              label="closed-form oracle"))
    if with_cap:
        handles.append(Line2D([], [], linestyle=":", color="0.35", linewidth=1.2,
                              label="cap L·D"))
    return handles


# --- output -----------------------------------------------------------------------------------

def png_bytes(fig: Figure, dpi: int = DPI, palette: bool = True) -> bytes:
    """The figure as PNG bytes, without the Software stamp (deterministic).

    With ``palette`` the Agg rendering is reduced to an 8-bit palette (Pillow's maximum-coverage
    quantizer, no dithering; white stays exactly white): visually the same for these line plots,
    about a third of the bytes, and still deterministic.
    """
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    if not palette:
        return buf.getvalue()
    buf.seek(0)
    with Image.open(buf) as img:
        small = img.convert("RGB").quantize(256, method=Image.Quantize.MAXCOVERAGE,
                                            dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="png")
    return out.getvalue()


def data_uri(png: bytes) -> str:
    """A ``data:image/png;base64,...`` URI embedding the PNG."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
