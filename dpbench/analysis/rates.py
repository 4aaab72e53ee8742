"""Empirical rates against theory: log-log slopes with bootstrap confidence intervals.

For every (algorithm, problem) and every swept axis (n, p, ε, δ, extras) with the other axes held at
each of their values, :func:`fit_rates` fits the slope of log(mean excess risk) against log(axis)
by least squares over the grid points kept, and

* a **percentile bootstrap** CI (seeds resampled with replacement *within* each grid point, the
  slope refitted on each resample; engineering spec §5.1: stratified bootstrap over seeds);
* the **predicted slope**: the rate card's local slope d log(bound)/d log(axis), evaluated at every
  grid point and averaged over the points kept (multi-term bounds bend; engineering §5.2);
* **exclusions**, shown never dropped silently: the capped regime (mean excess at or above
  ``cap_fraction`` × the trivial maximum L·D, or at or above ``trivial_fraction`` × the excess of
  the data-independent output (the centre of C, stored as ``trivial_excess_risk``), or a rate-card
  bound at or above L·D, where the theorem predicts nothing; BST14 §6.3), optimisation floors (mean excess below
  ``floor_factor`` × the certified optimum gap) and non-positive means;
* the **ratio** empirical / bound (geometric mean over the kept points, with a bootstrap CI) and
  its log-log slope, flat when theory holds up to a constant;
* a **verdict** with the tolerance stated (:func:`verdict`).

Mean excess is aggregated per grid point before taking logs (the estimand is E[excess]; a mean of
logs would be a different one and undefined for non-positive Monte Carlo excesses).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..errors import UserInputError
from ..execute import DONE, FAILED, NOT_APPLICABLE, PENDING
from ..ratecard import RateCard

#: Default slope tolerance (absolute, in exponent units): the spec's ±0.1 for clean cases.
DEFAULT_TOLERANCE = 0.1
#: A CI wider than this (in exponent units) cannot support a verdict.
MAX_CI_WIDTH = 0.6
MIN_POINTS = 3

#: Machine-readable exclusion codes ("" = point used), parallel to ``RateFit.excluded``.
EXCLUSION_CODES = ("", "few_seeds", "nonpositive", "capped", "capped_by_theory", "floor")

VERDICTS = ("consistent", "faster", "slower", "inconclusive")
VERDICT_TEXT = {
    "consistent": "consistent with theory",
    "faster": "faster than the bound (the bound may be loose or the instance benign)",
    "slower": "slower than the bound (a bug or a violated assumption)",
    "inconclusive": "inconclusive",
}


@dataclass
class RateFit:
    """One fitted curve: an algorithm on a problem along one axis, the other axes fixed."""

    experiment: str
    algorithm: str
    problem: str
    axis: str
    fixed: dict[str, Any]
    x: list[float]
    mean: list[float]
    mean_low: list[float]
    mean_high: list[float]
    n_seeds: list[int]
    excluded: list[str]            # "" when the point is used, else the reason (text)
    slope: float
    slope_low: float
    slope_high: float
    predicted_slope: float
    predicted_local: list[float]
    bound: list[float]
    cap: float
    ratio: float
    ratio_low: float
    ratio_high: float
    ratio_slope: float
    verdict: str
    tolerance: float
    reason: str
    rate_expression: str = ""
    rate_citation: str = ""
    rate_regime: str = ""
    level: float = 0.95
    method: str = ""
    missing: list[str] = field(default_factory=list)
    exclusion: list[str] = field(default_factory=list)  # codes: see EXCLUSION_CODES
    oracle: list[float] = field(default_factory=list)   # mean closed-form oracle per point (NaN: none)
    oracle_ratio: float = math.nan   # geometric mean of mean/oracle over kept points with an oracle
    variable: str = "excess_risk"    # the cube variable fitted (see fit_rates)

    @property
    def used(self) -> np.ndarray:
        return np.asarray([e == "" for e in self.excluded])

    def fixed_text(self) -> str:
        return ", ".join(f"{k}={_fmt(v)}" for k, v in self.fixed.items())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# --- the statistics ---------------------------------------------------------------------------

def _ols_slopes(logx: np.ndarray, logm: np.ndarray) -> np.ndarray:
    """Least-squares slopes of logm (..., k) against logx (k,), vectorised over leading dims."""
    xc = logx - logx.mean()
    return ((logm - logm.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc ** 2).sum()


def bootstrap_means(samples: Sequence[np.ndarray], n_resamples: int,
                    rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, k) bootstrap means, resampling seeds within each of the k grid points."""
    out = np.empty((n_resamples, len(samples)))
    for j, s in enumerate(samples):
        s = np.asarray(s, dtype=float)
        idx = rng.integers(0, s.size, size=(n_resamples, s.size))
        out[:, j] = s[idx].mean(axis=1)
    return out


def slope_ci(x: Sequence[float], samples: Sequence[np.ndarray], *, level: float = 0.95,
             n_resamples: int = 2000, rng: np.random.Generator | int = 0,
             ) -> tuple[float, float, float, np.ndarray]:
    """Slope of log(mean) vs log(x) with a percentile-bootstrap CI (seeds resampled within
    points). Returns (slope, low, high, bootstrap means). Resamples whose mean is not positive
    at some point are dropped from the interval (they have no log)."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    logx = np.log(np.asarray(x, dtype=float))
    means = np.array([np.mean(s) for s in samples])
    slope = float(_ols_slopes(logx, np.log(means)))
    boot = bootstrap_means(samples, n_resamples, rng)
    ok = np.all(boot > 0, axis=1)
    slopes = _ols_slopes(logx, np.log(boot[ok]))
    a = (1 - level) / 2
    lo, hi = (np.quantile(slopes, [a, 1 - a]) if slopes.size else (math.nan, math.nan))
    return slope, float(lo), float(hi), boot


def verdict(slope_low: float, slope_high: float, predicted: float, n_points: int,
            tolerance: float = DEFAULT_TOLERANCE) -> tuple[str, str]:
    """Verdict of a fit and its reason.

    *consistent*: the CI widened by ±``tolerance`` contains the predicted slope; *faster*: the
    whole CI lies more than ``tolerance`` below it (the excess falls faster, or grows slower,
    than the bound says); *slower*: more than ``tolerance`` above it; *inconclusive*: fewer than
    3 points kept, no prediction, or a CI wider than ``MAX_CI_WIDTH``.
    """
    if n_points < MIN_POINTS:
        return "inconclusive", f"{n_points} point(s) kept; at least {MIN_POINTS} needed"
    if not math.isfinite(predicted):
        return "inconclusive", "no theoretical rate to compare with"
    if not (math.isfinite(slope_low) and math.isfinite(slope_high)):
        return "inconclusive", "bootstrap failed (non-positive means)"
    if slope_high - slope_low > MAX_CI_WIDTH:
        return "inconclusive", (f"CI [{slope_low:.2f}, {slope_high:.2f}] wider than "
                                f"{MAX_CI_WIDTH}; add seeds or grid points")
    if slope_low - tolerance <= predicted <= slope_high + tolerance:
        return "consistent", (f"predicted {predicted:.2f} within CI [{slope_low:.2f}, "
                              f"{slope_high:.2f}] ± {tolerance}")
    if slope_high + tolerance < predicted:
        return "faster", f"CI [{slope_low:.2f}, {slope_high:.2f}] below predicted {predicted:.2f} − {tolerance}"
    return "slower", f"CI [{slope_low:.2f}, {slope_high:.2f}] above predicted {predicted:.2f} + {tolerance}"


# --- fitting a cube ---------------------------------------------------------------------------

def cell_index(dims: Sequence[str], positions: Mapping[str, int]) -> tuple[Any, ...]:
    """Index selecting the seeds of one cube position (``positions`` maps dims to indices)."""
    return tuple(positions.get(d, slice(None)) for d in dims)


def _card(ds: xr.Dataset, algorithm: str) -> RateCard | None:
    info = ds.attrs.get("algorithms", {}).get(algorithm, {})
    card = info.get("rate_card")
    return RateCard.from_dict(card) if card else None


def _constants(ds: xr.Dataset, problem: str) -> dict[str, float]:
    return dict(ds.attrs.get("problems", {}).get(problem, {}).get("constants", {}))


def fit_curve(experiment: str, algorithm: str, problem: str, axis: str, fixed: dict[str, Any],
              x: Sequence[float], samples: Sequence[np.ndarray], *, gaps: Sequence[float] | None = None,
              trivial: Sequence[float] | None = None, trivial_fraction: float = 0.5,
              card: RateCard | None = None, constants: Mapping[str, float] | None = None,
              tolerance: float = DEFAULT_TOLERANCE, level: float = 0.95,
              n_resamples: int = 2000, cap_fraction: float = 0.25, floor_factor: float = 10.0,
              rng: np.random.Generator | int = 0, missing: list[str] | None = None,
              oracle: Sequence[float] | None = None) -> RateFit:
    """Fit one curve (the building block of :func:`fit_rates`; usable on any samples).

    ``oracle``: the mean closed-form expected excess per point (``oracle_excess_risk``; NaN where
    none), reported with the geometric-mean ratio empirical/oracle over the kept points.
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    x = [float(v) for v in x]
    samples = [np.asarray(s, dtype=float) for s in samples]
    means = np.array([s.mean() if s.size else math.nan for s in samples])
    values = {**(constants or {}), **{k: float(v) for k, v in fixed.items()
                                      if isinstance(v, (int, float))}}
    xs = np.asarray(x)
    bound = local = np.full(len(x), math.nan)
    cap = math.nan
    if card is not None:
        try:
            bound = np.asarray(card.bound(**{**values, axis: xs}), dtype=float) * np.ones_like(xs)
            local = np.asarray(card.local_slope(axis, **{**values, axis: xs}), dtype=float) * np.ones_like(xs)
        except KeyError:  # the card names a constant or axis this cube does not have
            pass
        try:
            cap = float(card.cap_value(**values))
        except KeyError:
            pass
    reasons, codes = [], []
    for i, s in enumerate(samples):
        gap = gaps[i] if gaps is not None else 0.0
        if s.size < 2:
            code, why = "few_seeds", f"{s.size} seed(s) done"
        elif not means[i] > 0:
            code, why = "nonpositive", "mean excess ≤ 0"
        elif math.isfinite(cap) and means[i] >= cap_fraction * cap:
            code, why = "capped", f"capped (mean ≥ {cap_fraction:g}·L·D = {cap_fraction * cap:.3g})"
        elif trivial is not None and means[i] >= trivial_fraction * trivial[i] > 0:
            code, why = "capped", (f"capped (mean ≥ {trivial_fraction:g}× the excess "
                                   f"{trivial[i]:.3g} of the data-independent output)")
        elif math.isfinite(cap) and bound[i] >= cap:
            code, why = "capped_by_theory", (f"capped by theory (bound {bound[i]:.3g} ≥ trivial "
                                             f"maximum {cap:.3g})")
        elif means[i] < floor_factor * max(gap, 0.0):
            code, why = "floor", f"optimisation floor (mean < {floor_factor:g}× certified gap)"
        else:
            code, why = "", ""
        codes.append(code)
        reasons.append(why)
    used = [i for i, r in enumerate(reasons) if r == ""]
    a = (1 - level) / 2
    boot_all = bootstrap_means([s if s.size else np.array([math.nan]) for s in samples],
                               n_resamples, rng)
    mean_low = np.quantile(boot_all, a, axis=0)
    mean_high = np.quantile(boot_all, 1 - a, axis=0)
    slope = lo = hi = ratio = r_lo = r_hi = r_slope = math.nan
    predicted = float(np.mean(local[used])) if used else math.nan
    if len(used) >= 2:
        ux = xs[used]
        logx = np.log(ux)
        boot = boot_all[:, used]
        slope = float(_ols_slopes(logx, np.log(means[used])))
        ok = np.all(boot > 0, axis=1)
        slopes = _ols_slopes(logx, np.log(boot[ok]))
        if slopes.size:
            lo, hi = (float(v) for v in np.quantile(slopes, [a, 1 - a]))
        if np.all(np.isfinite(bound[used])) and np.all(bound[used] > 0):
            lr = np.log(means[used]) - np.log(bound[used])
            ratio = float(np.exp(lr.mean()))
            r_slope = float(_ols_slopes(logx, lr))
            rb = np.exp((np.log(boot[ok]) - np.log(bound[used])).mean(axis=1))
            if rb.size:
                r_lo, r_hi = (float(v) for v in np.quantile(rb, [a, 1 - a]))
    orc = np.full(len(x), math.nan) if oracle is None else np.asarray(oracle, dtype=float)
    with_oracle = [i for i in used if math.isfinite(orc[i]) and orc[i] > 0 and means[i] > 0]
    oracle_ratio = (float(np.exp(np.mean(np.log(means[with_oracle]) - np.log(orc[with_oracle]))))
                    if with_oracle else math.nan)
    v, why = verdict(lo, hi, predicted, len(used), tolerance)
    if missing:
        why += f"; incomplete sweep: {len(missing)} cell(s) missing"
    return RateFit(
        experiment=experiment, algorithm=algorithm, problem=problem, axis=axis, fixed=dict(fixed),
        x=x, mean=means.tolist(), mean_low=mean_low.tolist(), mean_high=mean_high.tolist(),
        n_seeds=[int(s.size) for s in samples], excluded=reasons, slope=slope, slope_low=lo,
        slope_high=hi, predicted_slope=predicted, predicted_local=local.tolist(),
        bound=bound.tolist(), cap=cap, ratio=ratio, ratio_low=r_lo, ratio_high=r_hi,
        ratio_slope=r_slope, verdict=v, tolerance=tolerance, reason=why,
        rate_expression=card.expression if card else "",
        rate_citation=card.citation if card else "", rate_regime=card.regime if card else "",
        level=level,
        method=(f"OLS slope of log mean excess vs log {axis}; {level:.0%} percentile bootstrap, "
                f"{n_resamples} resamples of seeds within each grid point"),
        missing=list(missing or []), exclusion=codes, oracle=orc.tolist(),
        oracle_ratio=oracle_ratio)


def sweep_axes(ds: xr.Dataset) -> list[str]:
    """Grid axes with at least two values."""
    return [d for d in ds.excess_risk.dims
            if d not in ("algorithm", "problem", "seed") and ds.sizes[d] >= 2]


def fit_rates(ds: xr.Dataset, *, axes: Iterable[str] | None = None, variable: str = "excess_risk",
              allow_incomplete: bool = False, tolerance: float = DEFAULT_TOLERANCE,
              level: float = 0.95, n_resamples: int = 2000, cap_fraction: float = 0.25,
              floor_factor: float = 10.0, seed: int = 0) -> list[RateFit]:
    """Fit every (algorithm, problem) curve along every swept axis of an experiment's cube.

    Refuses a cube with pending or failed cells (``UserInputError`` listing how many) unless
    ``allow_incomplete``; then each fit lists the cells it is missing. Not-applicable cells are
    skipped. Reference algorithms without a rate card get slopes but an *inconclusive* verdict.
    Deterministic: the bootstrap is seeded from ``seed`` and the curve's position.

    ``variable``: the cube variable fitted. The risk exclusions (cap, trivial output, optimisation
    floor) and the rate card apply to the ``*excess_risk`` variables only; any other (query
    counts, iterations, privacy spent) is fitted on every point with a positive mean.
    """
    risk = variable.endswith("excess_risk")
    status = ds.status.values
    incomplete = int(np.sum((status == PENDING) | (status == FAILED)))
    if incomplete and not allow_incomplete:
        raise UserInputError(
            f"experiment {ds.attrs.get('experiment', '?')!r} has {incomplete} pending or failed "
            "cell(s); finish the run (dpbench run resumes) or pass allow_incomplete=True")
    axes = list(axes) if axes is not None else sweep_axes(ds)
    for ax in axes:
        if ax not in ds.excess_risk.dims or ax in ("algorithm", "problem", "seed"):
            raise UserInputError(f"cannot fit along {ax!r}; grid axes: {sweep_axes(ds)}")
    exp = str(ds.attrs.get("experiment", ""))
    vals = ds[variable].values
    gaps = ds["optimum_gap"].values if risk else np.zeros_like(vals)
    trivials = ds["trivial_excess_risk"].values if "trivial_excess_risk" in ds and risk else None
    oracles = ds["oracle_excess_risk"].values if "oracle_excess_risk" in ds else None
    dims = list(ds[variable].dims)
    fits: list[RateFit] = []
    counter = itertools.count()
    for ai, alg in enumerate(ds.algorithm.values):
        card = _card(ds, str(alg)) if risk else None
        for pi, prob in enumerate(ds.problem.values):
            consts = _constants(ds, str(prob))
            for axis in axes:
                others = [d for d in dims if d not in ("algorithm", "problem", "seed", axis)]
                for combo in itertools.product(*(range(ds.sizes[d]) for d in others)):
                    fixed = {d: _py(ds[d].values[i]) for d, i in zip(others, combo)}
                    samples, gs, missing = [], [], []
                    triv: list[float] | None = [] if trivials is not None else None
                    orc: list[float] = []
                    applicable = False
                    for j in range(ds.sizes[axis]):
                        idx = cell_index(dims, {"algorithm": ai, "problem": pi, axis: j,
                                                **dict(zip(others, combo))})
                        st = status[idx]
                        v = vals[idx]
                        applicable |= bool(np.any(st != NOT_APPLICABLE))
                        samples.append(v[st == DONE])
                        g = gaps[idx][st == DONE]
                        gs.append(float(np.max(g)) if g.size else 0.0)
                        if triv is not None and trivials is not None:
                            tv = trivials[idx][st == DONE]
                            triv.append(float(tv.mean()) if tv.size else math.nan)
                        ov = oracles[idx][st == DONE] if oracles is not None else np.empty(0)
                        orc.append(float(ov.mean()) if ov.size else math.nan)
                        nmiss = int(np.sum((st == PENDING) | (st == FAILED)))
                        if nmiss:
                            missing.append(f"{axis}={_fmt(_py(ds[axis].values[j]))}: {nmiss} seed(s)")
                    if not applicable:
                        continue
                    fits.append(fit_curve(
                        exp, str(alg), str(prob), axis, fixed, [float(x) for x in ds[axis].values],
                        samples, gaps=gs, trivial=triv, card=card, constants=consts, tolerance=tolerance,
                        level=level, n_resamples=n_resamples, cap_fraction=cap_fraction,
                        floor_factor=floor_factor,
                        rng=np.random.default_rng([seed, next(counter)]), missing=missing,
                        oracle=orc))
                    fits[-1].variable = variable
    return fits


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def fits_frame(fits: Sequence[RateFit]) -> Any:
    """The fits as a pandas DataFrame (one row per curve, scalar columns)."""
    import pandas as pd

    rows = []
    for f in fits:
        rows.append({"experiment": f.experiment, "algorithm": f.algorithm, "problem": f.problem,
                     "axis": f.axis, "fixed": f.fixed_text(), "points_used": int(f.used.sum()),
                     "points": len(f.x), "slope": f.slope, "slope_low": f.slope_low,
                     "slope_high": f.slope_high, "predicted": f.predicted_slope,
                     "ratio": f.ratio, "ratio_low": f.ratio_low, "ratio_high": f.ratio_high,
                     "oracle_ratio": f.oracle_ratio,
                     "verdict": f.verdict, "reason": f.reason, "citation": f.rate_citation})
    return pd.DataFrame(rows)
