"""Empirical rates against theory: log-log slopes with bootstrap confidence intervals.

For every (algorithm, problem) and every swept axis (n, p, ε, δ, extras) with the other axes held at
each of their values, :func:`fit_rates` fits the slope of log(mean excess risk) against log(axis)
by least squares over the grid points kept, and

* a **percentile bootstrap** CI (seeds resampled with replacement *within* each grid point, the
  slope refitted on each resample: a stratified bootstrap over seeds, docs/analysis.md);
* the **predicted slope**: the rate card's local slope d log(bound)/d log(axis), evaluated at every
  grid point and averaged over the points kept (multi-term bounds bend; docs/analysis.md);
* **exclusions that cannot hide a failure** (docs/analysis.md, "What is excluded"; the thresholds
  are :data:`dpbench.analysis.settings.DEFAULT`'s): the capped
  regime (mean excess at or above ``cap_fraction`` × the trivial maximum L·D, or at or above
  ``trivial_fraction`` × the excess of the data-independent output, stored as
  ``trivial_excess_risk``, or a rate-card bound at or above L·D; BST14 §6.3) only as one
  contiguous run at the end of the axis where the rate card's bound is largest, and only where
  the other points' own power law, extended to the point, reaches it (else it is a *jump* to the
  trivial level: a blow-up); optimisation floors (mean excess below ``floor_factor`` × the
  certified optimum gap) only as a contiguous run at the other end. A capped point anywhere else
  is a *blow-up*, a floor point anywhere else a *collapse*, and a non-positive mean where a rate
  card predicts a positive one is *non-positive*: each is a failure of the fit (verdict
  ``invalid``), never an exclusion. Where the card gives no direction along the axis nothing is
  excluded as capped: such points stay in the fit and the verdict is at best inconclusive;
* the **ratio** empirical / bound (geometric mean over the kept points, with a bootstrap CI) and
  its log-log slope, flat when theory holds up to a constant;
* the **level** against a closed-form oracle where one exists: the geometric-mean ratio
  empirical / oracle over the kept points with its bootstrap CI (seeds resampled jointly);
* a **verdict** by an equivalence rule with its error rates and its resolution (:func:`verdict`).

Mean excess is aggregated per grid point before taking logs (the estimand is E[excess]; a mean of
logs would be a different one and undefined for non-positive Monte Carlo excesses).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, overload

import numpy as np
import xarray as xr

from ..core.errors import StoreError, UserInputError
from ..core.ratecard import RateCard
from ..core.schema import DONE, FAILED, NOT_APPLICABLE, PENDING
from .settings import DEFAULT

#: Machine-readable exclusion codes ("" = point used), parallel to ``RateFit.excluded``.
#: ``nonpositive``, ``blowup`` and ``collapse`` are failures, not exclusions: a fit with any of
#: them has the verdict ``invalid``. ``capped_undirected`` marks a point at the trivial level on
#: an axis along which the rate card predicts no direction: it is kept in the fit (no exclusion)
#: and bars the verdict ``consistent`` (``RateFit.blockers``).
EXCLUSION_CODES = ("", "few_seeds", "capped", "capped_by_theory", "floor", "nonpositive",
                   "blowup", "collapse", "capped_undirected")
#: Codes that invalidate a fit (see the module docstring).
FAILURE_CODES = ("blowup", "collapse", "nonpositive")
#: Codes that are legitimate exclusions of a point.
CAP_CODES = ("capped", "capped_by_theory")

VERDICTS = ("consistent", "faster", "slower", "inconclusive", "invalid")
VERDICT_TEXT = {
    "consistent": "consistent with theory",
    "faster": "faster than the bound (the bound may be loose or the instance benign)",
    "slower": "slower than the bound (a bug or a violated assumption)",
    "inconclusive": "inconclusive",
    "invalid": "invalid (a blow-up, collapse or non-positive mean where theory predicts a rate)",
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
    level: float = DEFAULT.level
    method: str = ""
    missing: list[str] = field(default_factory=list)
    exclusion: list[str] = field(default_factory=list)  # codes: see EXCLUSION_CODES
    oracle: list[float] = field(default_factory=list)   # mean closed-form oracle per point (NaN: none)
    oracle_ratio: float = math.nan   # geometric mean of mean/oracle over kept points with an oracle
    oracle_ratio_low: float = math.nan   # its bootstrap CI (seeds resampled jointly)
    oracle_ratio_high: float = math.nan
    variable: str = "excess_risk"    # the cube variable fitted (see fit_rates)
    resolution: float = math.nan     # tolerance + CI half-width: the smallest detectable error
    failures: list[str] = field(default_factory=list)  # blow-ups, collapses, non-positive means
    cap_end: str = "low"             # the end where capped points may be excluded ("": none)
    card_exponent: float = math.nan  # the rate card's leading exponent along the axis
    blockers: list[str] = field(default_factory=list)  # kept points that bar "consistent"
    oracle_kind: str = ""            # "exact", "upper_bound", "heuristic" or "" (Algorithm.oracle_kind)

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


@overload
def bootstrap_means(samples: Sequence[np.ndarray], n_resamples: int,
                    rng: np.random.Generator) -> np.ndarray: ...
@overload
def bootstrap_means(samples: Sequence[np.ndarray], n_resamples: int, rng: np.random.Generator,
                    paired: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]: ...
def bootstrap_means(samples: Sequence[np.ndarray], n_resamples: int,
                    rng: np.random.Generator, paired: Sequence[np.ndarray] | None = None,
                    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """(n_resamples, k) bootstrap means, resampling seeds within each of the k grid points.

    ``paired``: per-point arrays aligned with ``samples`` (same seeds), resampled with the same
    indices; their bootstrap means are returned too (NaN where a point has no paired values)."""
    out = np.empty((n_resamples, len(samples)))
    pout = np.full((n_resamples, len(samples)), math.nan)
    for j, s in enumerate(samples):
        s = np.asarray(s, dtype=float)
        idx = rng.integers(0, s.size, size=(n_resamples, s.size))
        out[:, j] = s[idx].mean(axis=1)
        if paired is not None and paired[j].size == s.size:
            pout[:, j] = np.asarray(paired[j], dtype=float)[idx].mean(axis=1)
    return out if paired is None else (out, pout)


def _oracle_samples(oracle: Sequence[Any] | None, samples: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per-point oracle values aligned with ``samples``: arrays as given, a scalar (a mean) repeated."""
    out = []
    for j, s in enumerate(samples):
        o = math.nan if oracle is None else oracle[j]
        arr = np.asarray(o, dtype=float)
        if arr.ndim == 0:
            arr = np.full(s.size, float(arr))
        if arr.size != s.size or not np.all(np.isfinite(arr)):
            arr = np.empty(0)
        out.append(arr)
    return out


def slope_ci(x: Sequence[float], samples: Sequence[np.ndarray], *, level: float = DEFAULT.level,
             n_resamples: int = DEFAULT.n_resamples, rng: np.random.Generator | int = DEFAULT.seed,
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


def verdict(slope: float, slope_low: float, slope_high: float, predicted: float, *,
            n_used: int, n_points: int, tolerance: float = DEFAULT.tolerance,
            failures: Sequence[str] = (), seeds: int | None = None,
            blockers: Sequence[str] = ()) -> tuple[str, str, float]:
    """Verdict of a slope against a prediction: an equivalence rule with stated error rates.

    With the band B = [predicted − τ, predicted + τ] (τ = ``tolerance``) and the bootstrap CI
    [lo, hi] of the fitted slope:

    * *consistent* only when the whole CI lies inside B;
    * *faster* / *slower* when the whole CI lies below / above B;
    * *inconclusive* otherwise (the CI straddles an edge of B), or when fewer than ``min_points``
      points or fewer than half of the points are kept; the reason says what would decide it;
    * *invalid* when ``failures`` is not empty (a blow-up, a collapse to the floor or a
      non-positive mean inside the informative range: :func:`classify_points`);
    * never *consistent* while ``blockers`` is not empty (kept points at the trivial level on an
      axis where theory gives the cap no direction): *inconclusive* instead, saying why.

    Error rates (docs/analysis.md, "Verdicts"): if the CI covers the true finite-range slope s with
    probability c (the CI's level), then P(consistent | s outside B) ≤ (1 − c)/2 and
    P(faster or slower | s inside B) ≤ (1 − c)/2; with 95 % CIs, 2.5 % each way per row.
    The **resolution** returned is τ + (hi − lo)/2: the smallest |s − predicted| that this CI
    width would have reported as faster or slower.

    Returns (verdict, reason, resolution).
    """
    half = (slope_high - slope_low) / 2 if math.isfinite(slope_high - slope_low) else math.nan
    resolution = tolerance + half if math.isfinite(half) else math.nan
    if failures:
        return "invalid", "; ".join(failures), resolution
    need = max(DEFAULT.min_points, math.ceil(n_points / 2))
    if n_used < need:
        return "inconclusive", (f"{n_used} of {n_points} points kept; at least {need} needed "
                                "(at least 3 and half of the grid): extend the grid beyond the "
                                "excluded regime"), resolution
    if not math.isfinite(predicted):
        return "inconclusive", "no theoretical rate to compare with", resolution
    if not (math.isfinite(slope_low) and math.isfinite(slope_high)):
        return "inconclusive", "bootstrap failed (non-positive resampled means)", resolution
    lo_b, hi_b = predicted - tolerance, predicted + tolerance
    ci = f"CI [{slope_low:.2f}, {slope_high:.2f}]"
    band = f"{predicted:.2f} ± {tolerance:.2g}"
    if lo_b <= slope_low and slope_high <= hi_b:
        if blockers:
            return "inconclusive", f"{ci} inside {band}, but " + "; ".join(blockers), resolution
        return "consistent", f"{ci} inside {band}; resolution ±{resolution:.2f}", resolution
    if slope_high < lo_b:
        return "faster", f"{ci} below {band}", resolution
    if slope_low > hi_b:
        return "slower", f"{ci} above {band}", resolution
    return "inconclusive", f"{ci} straddles {band}: {_advice(slope, half, lo_b, hi_b, tolerance, seeds)}", resolution


def _advice(slope: float, half: float, lo_b: float, hi_b: float, tolerance: float,
            seeds: int | None) -> str:
    """What would make a straddling CI conclusive: the half-width it needs and the seeds that buys
    (the CI half-width shrinks like 1/√seeds)."""
    d = min(abs(slope - lo_b), abs(slope - hi_b))
    if lo_b <= slope <= hi_b:
        target, goal = min(d, tolerance), "agree"
    else:
        target, goal = d, "disagree"
    if not (math.isfinite(half) and half > 0) or target < 0.01:
        return "the estimate sits on the band's edge; more seeds and points will not settle it quickly"
    factor = 1.3 * max(1.0, (half / target) ** 2)  # 1.3: margin for the estimate moving
    more = f"about {factor:.1f}× the seeds" + (f" (≈ {math.ceil(factor * seeds)} per point)"
                                                 if seeds else "")
    return (f"to {goal} the CI half-width must fall from {half:.2f} to below {target:.2f}: "
            f"{more}, or more grid points over a longer range")


# --- fitting a cube ---------------------------------------------------------------------------

def cell_index(dims: Sequence[str], positions: Mapping[str, int]) -> tuple[Any, ...]:
    """Index selecting the seeds of one cube position (``positions`` maps dims to indices)."""
    return tuple(positions.get(d, slice(None)) for d in dims)


def _card(ds: xr.Dataset, algorithm: str) -> RateCard | None:
    info = ds.attrs.get("algorithms", {}).get(algorithm, {})
    card = info.get("rate_card")
    if not card:
        return None
    try:  # a stored card is data from a shared file: checked again on the way out
        return RateCard.from_dict(card)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreError(f"the stored rate card of {algorithm!r} is not a valid rate card "
                         f"({str(exc)[:200]}); the store was edited or damaged") from None


def _oracle_kind(ds: xr.Dataset, algorithm: str, problem: str) -> str:
    """The declared kind of the stored oracle (stores written before kinds were recorded: "")."""
    info = ds.attrs.get("algorithms", {}).get(algorithm, {})
    return str((info.get("oracle_kinds") or {}).get(problem, ""))


def _constants(ds: xr.Dataset, problem: str) -> dict[str, float]:
    return dict(ds.attrs.get("problems", {}).get(problem, {}).get("constants", {}))


def fit_curve(experiment: str, algorithm: str, problem: str, axis: str, fixed: dict[str, Any],
              x: Sequence[float], samples: Sequence[np.ndarray], *, gaps: Sequence[float] | None = None,
              trivial: Sequence[float] | None = None,
              trivial_fraction: float = DEFAULT.trivial_fraction,
              card: RateCard | None = None, constants: Mapping[str, float] | None = None,
              tolerance: float = DEFAULT.tolerance, level: float = DEFAULT.level,
              n_resamples: int = DEFAULT.n_resamples, cap_fraction: float = DEFAULT.cap_fraction,
              floor_factor: float = DEFAULT.floor_factor,
              rng: np.random.Generator | int = DEFAULT.seed, missing: list[str] | None = None,
              oracle: Sequence[Any] | None = None) -> RateFit:
    """Fit one curve (the building block of :func:`fit_rates`; usable on any samples).

    ``oracle``: the closed-form expected excess per point (``oracle_excess_risk``), either one
    array per point aligned with its seeds or one mean per point (NaN where none); reported as the
    geometric-mean ratio empirical / oracle over the kept points with a bootstrap CI.
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
    raw: list[tuple[str, str]] = []
    for i, smp in enumerate(samples):
        gap = gaps[i] if gaps is not None else 0.0
        if smp.size < 2:
            raw.append(("few_seeds", f"{smp.size} seed(s) done"))
        elif means[i] > 0 and math.isfinite(cap) and means[i] >= cap_fraction * cap:
            raw.append(("capped", f"capped (mean ≥ {cap_fraction:g}·L·D = {cap_fraction * cap:.3g})"))
        elif means[i] > 0 and trivial is not None and means[i] >= trivial_fraction * trivial[i] > 0:
            raw.append(("capped", f"capped (mean ≥ {trivial_fraction:g}× the excess "
                                  f"{trivial[i]:.3g} of the data-independent output)"))
        elif means[i] > 0 and math.isfinite(cap) and bound[i] >= cap:
            raw.append(("capped_by_theory", f"capped by theory (bound {bound[i]:.3g} ≥ trivial "
                                            f"maximum {cap:.3g})"))
        elif gap > 0 and means[i] < floor_factor * gap:
            raw.append(("floor", f"optimisation floor (mean < {floor_factor:g}× certified gap)"))
        elif not means[i] > 0:
            raw.append(("nonpositive", "mean ≤ 0"))
        else:
            raw.append(("", ""))
    cap_end = _cap_end(bound)
    codes, reasons = classify_points(raw, cap_end, positive_predicted=card is not None,
                                     axis=axis, x=x, larger_end=_larger_end(means))
    a = (1 - level) / 2
    orc_samples = _oracle_samples(oracle, samples)
    boot_all, boot_orc = bootstrap_means([s if s.size else np.array([math.nan]) for s in samples],
                                         n_resamples, rng, paired=orc_samples)
    codes, reasons = _jumps(codes, reasons, xs, means, boot_all, 1 - a, axis)
    used = [i for i, r in enumerate(reasons) if r == ""]
    failures = [reasons[i] for i, c in enumerate(codes)
                if c in ("blowup", "collapse") or (c == "nonpositive" and card is not None)]
    blockers = [f"{axis}={x[i]:g} is at the trivial level and the rate card gives the cap no "
                f"direction along {axis} (kept in the fit, not excluded)"
                for i, c in enumerate(codes) if c == "capped_undirected"]
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
    orc = np.array([o.mean() if o.size else math.nan for o in orc_samples])
    with_oracle = [i for i in used if math.isfinite(orc[i]) and orc[i] > 0 and means[i] > 0]
    oracle_ratio = o_lo = o_hi = math.nan
    if with_oracle:
        oracle_ratio = float(np.exp(np.mean(np.log(means[with_oracle]) - np.log(orc[with_oracle]))))
        bm, bo = boot_all[:, with_oracle], boot_orc[:, with_oracle]
        good = np.all((bm > 0) & (bo > 0), axis=1)
        if good.any():
            rr = np.exp(np.mean(np.log(bm[good]) - np.log(bo[good]), axis=1))
            o_lo, o_hi = (float(v) for v in np.quantile(rr, [a, 1 - a]))
    done = [int(s.size) for s in samples if s.size]
    v, why, resolution = verdict(slope, lo, hi, predicted, n_used=len(used), n_points=len(x),
                                 tolerance=tolerance, failures=failures,
                                 seeds=min(done) if done else None, blockers=blockers)
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
        oracle_ratio=oracle_ratio, oracle_ratio_low=o_lo, oracle_ratio_high=o_hi,
        resolution=resolution, failures=failures, cap_end=cap_end,
        card_exponent=(float(card.exponents.get(axis, math.nan)) if card else math.nan),
        blockers=blockers)


def sweep_axes(ds: xr.Dataset) -> list[str]:
    """Grid axes with at least two values."""
    return [d for d in ds.excess_risk.dims
            if d not in ("algorithm", "problem", "seed") and ds.sizes[d] >= 2]


def _cap_end(bound: np.ndarray) -> str:
    """The end of the axis where the capped regime may sit: where the rate card's bound is
    larger ("low" or "high"); "" when the card gives no direction (no card, no usable bound along
    the axis, or a flat one). The data never choose it: a curve that jumps to the trivial level
    at its far end would otherwise choose that end itself (docs/analysis.md)."""
    ok = np.isfinite(bound) & (bound > 0)
    if ok.sum() >= 2:
        b = bound[ok]
        if not math.isclose(b[0], b[-1], rel_tol=1e-9):
            return "low" if b[0] > b[-1] else "high"
    return ""


def _larger_end(means: np.ndarray) -> str:
    """The end of the axis where the mean is larger ("low" when undecided)."""
    pos = np.flatnonzero(np.isfinite(means) & (means > 0))
    if pos.size >= 2 and means[pos[0]] != means[pos[-1]]:
        return "low" if means[pos[0]] > means[pos[-1]] else "high"
    return "low"


def _jumps(codes: list[str], reasons: list[str], xs: np.ndarray, means: np.ndarray,
           boot: np.ndarray, upper: float, axis: str) -> tuple[list[str], list[str]]:
    """Capped points (excluded at the cap end, or kept on an axis without a cap direction) whose
    mean exceeds ``jump_factor`` (:data:`~dpbench.analysis.settings.DEFAULT`) × the ``upper``
    bootstrap quantile of the power law fitted to the other informative points, extended to
    them, become blow-ups: the curve jumped to the trivial level where its own law puts it far
    below (the capped regime bends it below the law, never above)."""
    base = [i for i, c in enumerate(codes) if c == "" and means[i] > 0]
    capped = [i for i, c in enumerate(codes)
              if c in (*CAP_CODES, "capped_undirected") and means[i] > 0]
    if len(base) < 2 or not capped:
        return codes, reasons
    logx = np.log(xs[base])
    sub = boot[:, base]
    ok = np.all(sub > 0, axis=1)
    if not ok.any():
        return codes, reasons
    logm = np.log(sub[ok])
    slopes = _ols_slopes(logx, logm)
    centre, level = logx.mean(), logm.mean(axis=1)
    codes, reasons = list(codes), list(reasons)
    for i in capped:
        top = float(np.quantile(np.exp(level + slopes * (math.log(xs[i]) - centre)), upper))
        if means[i] > DEFAULT.jump_factor * top:
            codes[i] = "blowup"
            reasons[i] = (f"jump to the trivial level at {axis}={xs[i]:g}: mean {means[i]:.3g} "
                          f"is {means[i] / top:.3g}× the upper {upper:.1%} bound {top:.3g} of "
                          "the other points' power law extended there (a capped regime stays "
                          "below it)")
    return codes, reasons


def classify_points(raw: Sequence[tuple[str, str]], cap_end: str, *, positive_predicted: bool,
                    axis: str = "x", x: Sequence[float] | None = None,
                    larger_end: str = "low") -> tuple[list[str], list[str]]:
    """Final exclusion codes and reasons from per-point candidates (code, reason).

    Capped points (``capped``, ``capped_by_theory``) are excluded only as one contiguous run from
    the ``cap_end`` of the axis, floor points only as a contiguous run from the other end (points
    with too few seeds neither break nor extend a run). A capped point past the first informative
    point is a ``blowup``, a floor point before the last informative one a ``collapse``, and a
    non-positive mean is a failure (``nonpositive``) when theory predicts a positive rate
    (``positive_predicted``); otherwise it is excluded. With ``cap_end == ""`` (no direction
    from theory) no point is excluded as capped: each becomes ``capped_undirected``, kept in the
    fit and barring a ``consistent`` verdict, and floors are taken from the end opposite
    ``larger_end`` (the end where the mean is larger).
    """
    k = len(raw)
    codes = [c for c, _ in raw]
    reasons = [r for _, r in raw]
    where = (lambda i: f"{axis}={x[i]:g}") if x is not None else (lambda i: f"point {i}")
    if not cap_end:
        for i, c in enumerate(codes):
            if c in CAP_CODES:
                codes[i], reasons[i] = "capped_undirected", ""
        cap_end = larger_end
    order = list(range(k)) if cap_end == "low" else list(range(k - 1, -1, -1))
    seen_informative = False
    for i in order:
        c = codes[i]
        if c in CAP_CODES and seen_informative:
            codes[i] = "blowup"
            reasons[i] = (f"blow-up at {where(i)}: {raw[i][1]} on the informative side of kept "
                          "points (a cap may only be excluded at the end where the bound is largest)")
        elif c not in ("few_seeds", *CAP_CODES):
            seen_informative = True
    seen_informative = False
    for i in reversed(order):
        c = codes[i]
        if c == "floor" and seen_informative:
            codes[i] = "collapse"
            reasons[i] = (f"collapse at {where(i)}: {raw[i][1]} before kept points (a floor may "
                          "only be excluded at the informative end)")
        elif c not in ("few_seeds", "floor"):
            seen_informative = True
    for i, c in enumerate(codes):
        if c == "nonpositive" and positive_predicted:
            reasons[i] = f"non-positive mean at {where(i)} where theory predicts a positive excess"
    return codes, reasons


def fit_rates(ds: xr.Dataset, *, axes: Iterable[str] | None = None, variable: str = "excess_risk",
              allow_incomplete: bool = False, tolerance: float = DEFAULT.tolerance,
              level: float = DEFAULT.level, n_resamples: int = DEFAULT.n_resamples,
              cap_fraction: float = DEFAULT.cap_fraction,
              floor_factor: float = DEFAULT.floor_factor, seed: int = DEFAULT.seed,
              ) -> list[RateFit]:
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
    # The oracle is the closed-form expected excess *empirical* risk: only that variable has one.
    oracles = (ds["oracle_excess_risk"].values
               if variable == "excess_risk" and "oracle_excess_risk" in ds else None)
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
                    orc: list[np.ndarray] = []
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
                        orc.append(oracles[idx][st == DONE] if oracles is not None
                                   else np.full(int(np.sum(st == DONE)), math.nan))
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
                    fits[-1].oracle_kind = _oracle_kind(ds, str(alg), str(prob))
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
                     "oracle_ratio": f.oracle_ratio, "resolution": f.resolution,
                     "verdict": f.verdict, "reason": f.reason, "citation": f.rate_citation})
    return pd.DataFrame(rows)
