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
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogFormatter, NullLocator
from PIL import Image

from ..analysis import VERDICT_TEXT, RateFit

#: PNG resolution; with :data:`FIGSIZE` a figure is 720 × 420 pixels.
DPI = 100
FIGSIZE = (7.2, 4.2)
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
#: Minor y ticks only when the axis spans at most this many decades (they are slow to draw).
MINOR_TICK_DECADES = 3.0
AXIS_LABELS = {"n": "n (samples)", "p": "p (dimension)", "epsilon": "ε (privacy budget)",
               "delta": "δ"}
AXIS_SYMBOLS = {"epsilon": "ε", "delta": "δ"}


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


def axis_symbol(axis: str) -> str:
    return AXIS_SYMBOLS.get(axis, axis)


def fixed_text(fixed: dict[str, Any]) -> str:
    """Fixed axes as "p=5, ε=1, δ=1e-06"."""
    return ", ".join(f"{axis_symbol(k)}={num(v, 6)}" for k, v in fixed.items())


def _points_text(axis: str, xs: Iterable[float]) -> str:
    return f"{axis_symbol(axis)}=" + ", ".join(num(x, 6) for x in xs)


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
        seeds = sorted({k for c in self.curves for k in c.fit.n_seeds})
        seed_txt = (f"{seeds[0]} seeds" if len(seeds) == 1
                    else f"{seeds[0]}–{seeds[-1]} seeds") if seeds else "no seeds"
        level = self.curves[0].fit.level if self.curves else 0.95
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
            fig = Figure(figsize=FIGSIZE, dpi=DPI)
            FigureCanvasAgg(fig)
            ax = fig.add_subplot()
            fig.subplots_adjust(**MARGINS)
            ax.set_xscale("log")
            ax.set_yscale("log")
            for i, c in enumerate(self.curves):
                _draw_curve(ax, c, _jitter(i, len(self.curves)))
            caps = sorted({c.fit.cap for c in self.curves if math.isfinite(c.fit.cap)})
            for cap in caps:
                ax.axhline(cap, linestyle=":", color="0.35", linewidth=1.2)
            _set_xticks(ax, self.curves)
            _set_yticks(ax)
            ax.set_xlabel(AXIS_LABELS.get(self.axis, self.axis))
            ax.set_ylabel("mean excess empirical risk (average scale)")
            ax.set_title(self.title() + (f"\n{fixed_text(self.fixed)}" if self.fixed else ""),
                         y=1.0, pad=8.0)  # an explicit y skips matplotlib's slow auto-placement
            ax.legend(handles=_legend_handles(self.curves, bool(caps)), loc="upper left",
                      bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)
        return fig


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


def _has_oracle(fit: RateFit) -> bool:
    return any(math.isfinite(v) and v > 0 for v in fit.oracle)


def _draw_curve(ax: Any, c: Curve, jitter: float) -> None:
    f = c.fit
    x = np.asarray(f.x, dtype=float)
    mean = np.asarray(f.mean, dtype=float)
    used = f.used
    ok = _positive(mean) & (x > 0)
    sy = np.asarray(c.seed_y, dtype=float)
    shown = _positive(sy)
    ax.scatter(np.asarray(c.seed_x)[shown] * jitter, sy[shown], s=7, alpha=0.35, color=c.color,
               linewidths=0, zorder=2)
    lo, hi = np.asarray(f.mean_low, dtype=float), np.asarray(f.mean_high, dtype=float)
    band = ok & _positive(lo) & _positive(hi)
    if band.any():
        ax.fill_between(x, np.where(band, lo, np.nan), np.where(band, hi, np.nan), color=c.color,
                        alpha=0.15, linewidth=0, zorder=1)
    ax.plot(x[ok], mean[ok], "-", color=c.color, linewidth=1.6, zorder=3)
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


def _set_xticks(ax: Any, curves: Sequence[Curve]) -> None:
    xs = sorted({x for c in curves for x in c.fit.x if x > 0})
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
