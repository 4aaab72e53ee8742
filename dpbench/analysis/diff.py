"""The diff of two stores of the same benchmark: regressions and improvements between two versions
of the code (``dpbench diff A B``; docs/analysis.md, "Diffing two stores"). Not to be confused
with the comparisons of mechanisms within one cube (:mod:`dpbench.analysis.compare`).

Cells are deterministic and their data stream depends only on (problem, its identity parameters,
n, p, seed, root seed), so two stores of the same suite hold **paired** cells: the same dataset
at the same (experiment, problem label, grid point, seed). This module diffs them:

* :func:`pairing_differences`: why two experiments' cells cannot be paired (root seed, a problem
  label's definition, the extra axes routed to problems), and :func:`algorithm_changes`: what
  changed in a mechanism's definition (name, version, parameters) — reported, since that is
  what a diff is about.
* :func:`align`: the coordinates both cubes have (algorithm and problem labels, grid values,
  seeds), and what only one has.
* Per (mechanism, problem, grid point): the means, the change B − A with a **t interval on the
  paired per-seed differences**, and the relative change mean B / mean A − 1 with a first-order
  interval from the paired residuals b − R̂·a (:func:`t_interval`, :func:`ratio_interval`).
* Per family (experiment, mechanism, problem), pooled over its grid points: an exact (or, beyond
  ``exact_max_cells`` cells, Monte Carlo) **sign-flip permutation test** of the mean relative
  difference (:func:`sign_flip_test`), Holm-corrected across all families; a family is a
  regression or an improvement when it is Holm-significant *and* its pooled relative change
  exceeds ``min_change`` (:func:`diff_cubes`).
* The fitted slopes of both cubes side by side (:func:`rates.fit_rates` on the paired cells).

Everything is deterministic: the Monte Carlo flips are seeded from the family's identity. The
defaults (level, floor, flips, alpha, min-change) are :data:`dpbench.analysis.settings.DEFAULT`'s.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..core.errors import UserInputError
from ..core.schema import DONE, NOT_APPLICABLE, PENDING
from ..core.seeding import stable_hash
from ..store.cube import EXP_KEY
from .compare import holm
from .rates import RateFit, fit_rates
from .settings import DEFAULT

VERDICTS = ("regression", "improvement", "below min-change", "not significant", "no signal")
VERDICT_TEXT = {
    "regression": "B is worse (larger excess): Holm-significant and above min-change",
    "improvement": "B is better (smaller excess): Holm-significant and above min-change",
    "below min-change": "Holm-significant but the pooled relative change is within min-change",
    "not significant": "no significant change after Holm's correction",
    "no signal": "every paired point is at the optimisation floor or non-positive: not tested",
}
METHOD_TEXT = (
    "Cells are paired by (experiment, algorithm label, problem label, grid point, seed), done in "
    "both stores (same data by construction). Change B − A: mean of the per-seed differences with "
    "a t interval on them; relative change mean B / mean A − 1 with a first-order (delta-method) "
    "t interval from the paired residuals b − (mean B / mean A)·a. Family = (experiment, mechanism, problem) over its grid points: statistic "
    "T = mean over points of mean(b − a) / ((mean a + mean b)/2); p-value from a two-sided "
    "sign-flip permutation test (each cell's pair swapped independently; exact enumeration up to "
    f"{DEFAULT.exact_max_cells} non-zero differences, else {DEFAULT.n_flips} seeded random "
    "flips); Holm's "
    "correction across all families. Flagged when Holm-significant at alpha and the pooled "
    "relative change (geometric mean over points of mean B / mean A, minus 1) exceeds "
    "min-change in the same direction.")


class UnpairableStores(UserInputError):
    """The two stores' cells do not share their data (exit 2): the message says what differs."""


@dataclass
class PointChange:
    """One (mechanism, problem, grid point): the paired seeds of A and B."""

    experiment: str
    algorithm: str
    problem: str
    point: dict[str, Any]
    pairs: int
    mean_a: float
    mean_b: float
    change: float            # mean over seeds of b − a
    change_low: float        # t interval on the paired differences (NaN with one pair)
    change_high: float
    relative: float          # mean_b / mean_a − 1 (0 when every difference is 0)
    relative_low: float      # ratio_interval − 1 (NaN: a single pair or mean_a ≤ 0)
    relative_high: float
    excluded: str = ""       # why the point is not in its family's test ("" = used)


@dataclass
class FamilyChange:
    """One (experiment, mechanism, problem), pooled over its paired grid points."""

    experiment: str
    algorithm: str
    problem: str
    points: int              # grid points with at least one paired seed
    points_used: int         # of which in the test (not at the floor, positive mean)
    pairs: int               # paired cells of the used points
    relative_change: float   # geometric mean over used points of mean_b / mean_a, minus 1
    statistic: float         # T: mean over used points of the symmetric relative difference
    p_value: float           # two-sided sign-flip permutation p-value (NaN: not tested)
    p_holm: float = math.nan
    verdict: str = "not significant"
    method: str = ""         # "exact (2^N flips)" or "Monte Carlo (R flips)"
    definition_changes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return self.verdict in ("regression", "improvement")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.experiment, self.algorithm, self.problem


@dataclass
class SlopeChange:
    """One fitted curve (a mechanism on a problem along an axis, other axes fixed) in A and B."""

    experiment: str
    algorithm: str
    problem: str
    axis: str
    fixed: dict[str, Any]
    a: RateFit
    b: RateFit

    @property
    def change(self) -> float:
        return self.b.slope - self.a.slope


@dataclass
class ExperimentDiff:
    """What of one experiment was diffed, and what exists in one store only."""

    name: str
    axes: list[str]
    algorithms: list[str]                       # labels in both
    problems: list[str]
    seeds: int                                  # seed indices in both
    only_a: dict[str, list[Any]] = field(default_factory=dict)   # dim -> values only in A
    only_b: dict[str, list[Any]] = field(default_factory=dict)
    unpaired_cells: int = 0                     # common coordinates, not done in both
    paired_cells: int = 0
    note: str = ""                              # why nothing was diffed (axes differ)
    definition_changes: dict[str, list[str]] = field(default_factory=dict)
    points: list[PointChange] = field(default_factory=list)
    families: list[FamilyChange] = field(default_factory=list)
    slopes: list[SlopeChange] = field(default_factory=list)


@dataclass
class StoreDiff:
    """The diff of store B against store A (B − A: positive means B is worse)."""

    experiments: list[ExperimentDiff]
    experiments_only_a: list[str]
    experiments_only_b: list[str]
    alpha: float
    min_change: float
    level: float
    method: str = METHOD_TEXT

    @property
    def families(self) -> list[FamilyChange]:
        return [f for e in self.experiments for f in e.families]

    @property
    def points(self) -> list[PointChange]:
        return [p for e in self.experiments for p in e.points]

    @property
    def slopes(self) -> list[SlopeChange]:
        return [s for e in self.experiments for s in e.slopes]

    @property
    def regressions(self) -> list[FamilyChange]:
        return [f for f in self.families if f.verdict == "regression"]

    @property
    def improvements(self) -> list[FamilyChange]:
        return [f for f in self.families if f.verdict == "improvement"]

    @property
    def flagged(self) -> list[FamilyChange]:
        """Regressions first, then improvements, each by increasing Holm p-value."""
        return (sorted(self.regressions, key=lambda f: f.p_holm)
                + sorted(self.improvements, key=lambda f: f.p_holm))

    @property
    def paired_cells(self) -> int:
        return sum(e.paired_cells for e in self.experiments)

    def summary(self) -> str:
        """One line: how many families were tested and what was flagged."""
        tested = sum(1 for f in self.families if math.isfinite(f.p_value))
        return (f"{len(self.families)} families ({tested} tested, {self.paired_cells} paired "
                f"cells): {len(self.regressions)} regression(s), {len(self.improvements)} "
                f"improvement(s) at alpha = {self.alpha:g} (Holm), min-change "
                f"{self.min_change:.0%}")


# --- pairing ------------------------------------------------------------------------------------

def _definition(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return dict((attrs.get(EXP_KEY) or {}).get("definition") or {})


def _entries(attrs: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """label -> {name, version, params} of the problems or algorithms: the definition's identity
    parameters where recorded, else the group's ``problems`` / ``algorithms`` attributes."""
    listed = _definition(attrs).get(kind)
    if listed:
        return {str(e["label"]): {"name": e.get("name"), "version": e.get("version"),
                                  "params": dict(e.get("params") or {})} for e in listed}
    key = "problem" if kind == "problems" else "algorithm"
    return {str(label): {"name": info.get(key), "version": info.get("version"),
                         "params": dict(info.get("params") or {})}
            for label, info in dict(attrs.get(kind) or {}).items()}


def root_seed(attrs: Mapping[str, Any]) -> Any:
    """The root seed an experiment was run with (``None`` if not recorded)."""
    return _definition(attrs).get("root_seed", attrs.get("root_seed"))


def _problem_axes(attrs: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in dict(attrs.get("extra_axes") or {}).items() if v == "problem")


def _entry_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two {name, version, params} entries, as "field: A → B" texts."""
    out = []
    for key in ("name", "version"):
        if a.get(key) != b.get(key):
            out.append(f"{key} {a.get(key)} → {b.get(key)}")
    pa, pb = dict(a.get("params") or {}), dict(b.get("params") or {})
    for k in sorted(set(pa) | set(pb)):
        if stable_hash(pa.get(k)) != stable_hash(pb.get(k)):  # 1 and 1.0 are the same value
            out.append(f"{k}: {pa.get(k, '(absent)')} → {pb.get(k, '(absent)')}")
    return out


def pairing_differences(attrs_a: Mapping[str, Any], attrs_b: Mapping[str, Any]) -> list[str]:
    """Why two experiments' cells (group attributes ``attrs_a``, ``attrs_b``) do not share their
    data: a different root seed, a problem label present in both with another definition (name,
    version or identity parameters), or other extra axes routed to the problems. Empty when they
    can be paired. Algorithms may differ: that is what is diffed (:func:`algorithm_changes`)."""
    out = []
    ra, rb = root_seed(attrs_a), root_seed(attrs_b)
    if ra != rb:
        out.append(f"root seed {ra} (A) vs {rb} (B)")
    pa, pb = _entries(attrs_a, "problems"), _entries(attrs_b, "problems")
    for label in (lbl for lbl in pa if lbl in pb):
        diff = _entry_diff(pa[label], pb[label])
        if diff:
            out.append(f"problem {label!r}: " + "; ".join(diff))
    xa, xb = _problem_axes(attrs_a), _problem_axes(attrs_b)
    if xa != xb:
        out.append(f"extra axes routed to the problems {xa} (A) vs {xb} (B)")
    return out


def algorithm_changes(attrs_a: Mapping[str, Any], attrs_b: Mapping[str, Any]) -> dict[str, list[str]]:
    """label -> what changed in that algorithm's definition (name, version, identity parameters)
    from A to B, for the labels present in both whose definition differs."""
    aa, ab = _entries(attrs_a, "algorithms"), _entries(attrs_b, "algorithms")
    out = {}
    for label in (lbl for lbl in aa if lbl in ab):
        diff = _entry_diff(aa[label], ab[label])
        if diff:
            out[label] = diff
    return out


def grid_axes(ds: xr.Dataset) -> list[str]:
    """The grid axes of a cube (every dimension but algorithm, problem and seed), in cube order."""
    return [str(d) for d in ds.excess_risk.dims if d not in ("algorithm", "problem", "seed")]


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def align(ds_a: xr.Dataset, ds_b: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset,
                                                       dict[str, list[Any]], dict[str, list[Any]]]:
    """The two cubes restricted to the coordinates both have (A's order, B transposed to A's
    dimension order), and per dimension the values only A and only B have.

    Raises ``ValueError`` when the grid axes differ (no grid point can be matched)."""
    axes_a, axes_b = grid_axes(ds_a), grid_axes(ds_b)
    if sorted(axes_a) != sorted(axes_b):
        raise ValueError(f"grid axes differ: {axes_a} (A) vs {axes_b} (B)")
    dims = ["algorithm", "problem", *axes_a, "seed"]
    idx_a: dict[str, list[int]] = {}
    idx_b: dict[str, list[int]] = {}
    only_a: dict[str, list[Any]] = {}
    only_b: dict[str, list[Any]] = {}
    for d in dims:
        va = [_py(v) for v in ds_a[d].values]
        vb = [_py(v) for v in ds_b[d].values]
        idx_a[d] = [i for i, v in enumerate(va) if v in vb]
        idx_b[d] = [vb.index(va[i]) for i in idx_a[d]]
        only_a[d] = [v for v in va if v not in vb]
        only_b[d] = [v for v in vb if v not in va]
    sub_a = ds_a.isel(idx_a).transpose(*dims, ...)
    sub_b = ds_b.isel(idx_b).transpose(*dims, ...)
    # The same values (1 == 1.0) may be spelled differently: B takes A's coordinates.
    sub_b = sub_b.assign_coords({d: sub_a[d].values for d in dims})
    return sub_a, sub_b, only_a, only_b


# --- statistics ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _t_quantile(level: float, df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf((1 + level) / 2, df))


def t_interval(d: np.ndarray, level: float = DEFAULT.level) -> tuple[float, float]:
    """Student-t interval for the mean of paired differences ``d`` (NaN with fewer than 2).

    Exact when the differences are normal; with 5–20 seeds it is preferred to a bootstrap, whose
    percentile intervals under-cover badly at such sizes (docs/analysis.md)."""
    d = np.asarray(d, dtype=float)
    k = d.size
    if k < 2:
        return math.nan, math.nan
    m = float(d.mean())
    half = _t_quantile(level, k - 1) * float(d.std(ddof=1)) / math.sqrt(k)
    return m - half, m + half


def ratio_interval(a: np.ndarray, b: np.ndarray, level: float = DEFAULT.level,
                   ) -> tuple[float, float]:
    """Interval for the ratio R = mean(b) / mean(a) of paired samples (first order, "delta
    method" of the ratio estimator): R̂ ± t·sd(b − R̂·a) / (√k·mean(a)), Student's t with k − 1
    degrees of freedom.

    The paired residuals b − R̂·a carry both stores' seed-to-seed variation and their
    correlation, so a change that scales every seed alike (b = c·a) gives the point (c, c).
    First order: too narrow when mean(a) is poorly determined (relative standard error above
    about 0.3). Fieller's exact interval is not used because it is unbounded whenever mean(a) is
    not significantly non-zero, which with 5 seeds of a skewed, positive excess is most points,
    even when every seed changed by the same factor. (NaN, NaN) with fewer than 2 pairs or
    mean(a) ≤ 0."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    k = a.size
    ma = float(a.mean()) if k else math.nan
    if k < 2 or not ma > 0:
        return math.nan, math.nan
    ratio = float(b.mean()) / ma
    half = _t_quantile(level, k - 1) * float((b - ratio * a).std(ddof=1)) / (math.sqrt(k) * ma)
    return ratio - half, ratio + half


@functools.lru_cache(maxsize=DEFAULT.exact_max_cells // 2 + 2)
def _all_signs(n: int) -> np.ndarray:
    """Every ±1 vector of length n, one per row (2**n rows; n ≤ 15 here: at most 4 MiB,
    cached)."""
    codes = np.arange(2 ** n, dtype=np.int64)[:, None]
    signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
    signs.flags.writeable = False
    return signs


def sign_flip_test(weights: np.ndarray, *, rng: np.random.Generator | None = None,
                   exact_max: int = DEFAULT.exact_max_cells, n_flips: int = DEFAULT.n_flips,
                   ) -> tuple[float, str]:
    """Two-sided sign-flip permutation p-value of T = Σ weights, and the method used.

    Under the null each weight's sign is +/− with probability ½ independently (each cell's pair
    (a, b) is exchangeable, and the weights' magnitudes are invariant to swapping a and b), so
    p = P(|Σ ε·w| ≥ |T|) over independent random signs ε is exact. Zero weights do not change T
    under any flip and are dropped. With at most ``exact_max`` non-zero weights every sign vector
    is enumerated (p ≥ 2/2**N: at least 6 non-zero differences are needed for p < 0.05);
    beyond, ``n_flips`` random ones drawn from ``rng`` give the valid p = (1 + #{|T*| ≥ |T|}) /
    (1 + n_flips). All weights zero (no difference at all): p = 1."""
    w = np.asarray(weights, dtype=float).ravel()
    w = w[w != 0]
    if w.size == 0:
        return 1.0, "no non-zero difference"
    observed = abs(float(w.sum()))
    if observed == 0:
        return 1.0, "statistic 0"
    # Sums of the same values in another order differ in the last bits: a flip whose |T*|
    # equals |T| up to round-off counts as "at least as extreme" (it is, exactly).
    threshold = observed * (1 - 1e-9)
    if w.size <= exact_max:
        # Meet in the middle: every flip's sum is s1 + s2, s1 over the first half's 2**h sign
        # vectors and s2 over the second's; count the pairs with |s1 + s2| ≥ |T| by bisection.
        h = w.size // 2
        s1 = _all_signs(h) @ w[:h]
        s2 = np.sort(_all_signs(w.size - h) @ w[h:])
        above = s2.size - np.searchsorted(s2, threshold - s1, side="left")
        below = np.searchsorted(s2, -threshold - s1, side="right")
        count = int(above.sum() + below.sum())  # disjoint: threshold > 0
        return count / 2 ** w.size, f"exact ({2 ** w.size} sign flips)"
    rng = rng if rng is not None else np.random.default_rng(0)
    count = 0
    for start in range(0, n_flips, 8192):
        size = min(8192, n_flips - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, w.size))
        count += int(np.sum(np.abs(signs @ w) >= threshold))
    return (1 + count) / (1 + n_flips), f"Monte Carlo ({n_flips} random sign flips)"


# --- one experiment -----------------------------------------------------------------------------

def _points(ds: xr.Dataset, axes: Sequence[str]) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """(coordinates, index) of every grid point, in cube order."""
    out = []
    for combo in itertools.product(*(range(ds.sizes[a]) for a in axes)):
        out.append(({a: _py(ds[a].values[i]) for a, i in zip(axes, combo)}, combo))
    return out


def _family_rng(experiment: str, algorithm: str, problem: str) -> np.random.Generator:
    """The Monte Carlo flips of a family, seeded from its identity (deterministic output; the tag
    "compare" is kept from before the rename to diff, so the flips, hence the p-values, are
    unchanged)."""
    return np.random.default_rng(int(stable_hash(["compare", experiment, algorithm, problem])[:16], 16))


def _pooled_ratio(means: Sequence[tuple[float, float]]) -> float:
    """Geometric mean of mean_b / mean_a over points, minus 1; +inf / −inf when A (B) is ≤ 0 at
    some point where the other is positive, NaN when both occur or there is no point."""
    logs = []
    for ma, mb in means:
        if ma > 0 and mb > 0:
            logs.append(math.log(mb / ma))
        elif mb > 0:
            logs.append(math.inf)
        elif ma > 0:
            logs.append(-math.inf)
    if not logs or (math.inf in logs and -math.inf in logs):
        return math.nan
    return math.exp(sum(logs) / len(logs)) - 1


def diff_experiment(name: str, ds_a: xr.Dataset, ds_b: xr.Dataset, *,
                    level: float = DEFAULT.level, floor_factor: float = DEFAULT.floor_factor,
                    slopes: bool = True, n_resamples: int = DEFAULT.n_resamples,
                    seed: int = DEFAULT.seed, n_flips: int = DEFAULT.n_flips) -> ExperimentDiff:
    """Point changes, families (p-values not yet corrected) and slopes of one experiment.

    ``ds_a`` and ``ds_b`` are the experiment's cubes in the two stores (at least ``excess_risk``,
    ``optimum_gap`` and ``status``); their pairing is not checked here
    (:func:`pairing_differences`). A grid point enters its family's test unless both means are
    below ``floor_factor`` × the largest certified optimum gap of its paired cells, or their
    average is ≤ 0 (no signal above round-off: the non-private reference). ``n_flips``: the
    random sign flips of families too large to enumerate (:func:`sign_flip_test`)."""
    try:
        sub_a, sub_b, only_a, only_b = align(ds_a, ds_b)
    except ValueError as exc:
        return ExperimentDiff(name, grid_axes(ds_a), [], [], 0, note=str(exc),
                              definition_changes=algorithm_changes(ds_a.attrs, ds_b.attrs))
    axes = grid_axes(sub_a)
    out = ExperimentDiff(
        name, axes, [str(v) for v in sub_a.algorithm.values], [str(v) for v in sub_a.problem.values],
        int(sub_a.sizes["seed"]), {d: v for d, v in only_a.items() if v},
        {d: v for d, v in only_b.items() if v},
        definition_changes=algorithm_changes(ds_a.attrs, ds_b.attrs))
    st_a, st_b = sub_a.status.values, sub_b.status.values
    paired = (st_a == DONE) & (st_b == DONE)
    either_applicable = (st_a != NOT_APPLICABLE) | (st_b != NOT_APPLICABLE)
    out.paired_cells = int(paired.sum())
    out.unpaired_cells = int(np.sum(~paired & either_applicable))
    er_a, er_b = sub_a.excess_risk.values, sub_b.excess_risk.values
    gap_a, gap_b = sub_a.optimum_gap.values, sub_b.optimum_gap.values
    grid = _points(sub_a, axes)
    for ai, alg in enumerate(out.algorithms):
        for pi, prob in enumerate(out.problems):
            used: list[tuple[float, float]] = []
            weights: list[np.ndarray] = []
            n_points = n_pairs = 0
            identical = True
            for point, combo in grid:
                idx = (ai, pi, *combo)
                ok = paired[idx]
                if not ok.any():
                    continue
                a, b = er_a[idx][ok], er_b[idx][ok]
                d = b - a
                ma, mb = float(a.mean()), float(b.mean())
                same = bool(np.all(d == 0))
                identical &= same
                lo, hi = t_interval(d, level)
                rlo, rhi = ratio_interval(a, b, level)
                gaps = np.concatenate([gap_a[idx][ok], gap_b[idx][ok]])
                floor = floor_factor * float(np.nanmax(gaps)) if np.any(np.isfinite(gaps)) else 0.0
                mid = (ma + mb) / 2
                excluded = ""
                if ma < floor and mb < floor:
                    excluded = f"both means below the optimisation floor ({floor_factor:g}× gap)"
                elif not mid > 0:
                    excluded = "non-positive mean (no signal above round-off)"
                relative = 0.0 if same else (mb / ma - 1 if ma > 0 else math.nan)
                out.points.append(PointChange(
                    name, alg, prob, point, int(ok.sum()), ma, mb, float(d.mean()), lo, hi,
                    relative, rlo - 1, rhi - 1, excluded))
                n_points += 1
                if not excluded:
                    used.append((ma, mb))
                    weights.append(d / (mid * d.size))
                    n_pairs += int(d.size)
            if n_points == 0:
                continue
            ratio = 0.0 if identical else _pooled_ratio(used)
            if used:
                w = np.concatenate(weights) / len(used)
                p, method = sign_flip_test(w, rng=_family_rng(name, alg, prob), n_flips=n_flips)
                stat = float(w.sum())
            else:
                p, method, stat = math.nan, "", math.nan
            out.families.append(FamilyChange(
                name, alg, prob, n_points, len(used), n_pairs, ratio, stat, p, method=method,
                definition_changes=list(out.definition_changes.get(alg, []))))
    if slopes and out.paired_cells:
        out.slopes = slope_changes(name, sub_a, sub_b, paired, level=level,
                                   n_resamples=n_resamples, seed=seed)
    return out


def _paired_only(ds: xr.Dataset, paired: np.ndarray) -> xr.Dataset:
    """The cube with every cell not done in both stores marked pending (not-applicable cells
    kept), so that a rate fit uses exactly the paired cells."""
    st = ds.status.values
    status = np.where(paired, DONE, np.where(st == NOT_APPLICABLE, NOT_APPLICABLE, PENDING))
    return ds.assign(status=(ds.status.dims, status.astype(st.dtype)))


def slope_changes(name: str, sub_a: xr.Dataset, sub_b: xr.Dataset, paired: np.ndarray, *,
                  level: float = DEFAULT.level, n_resamples: int = DEFAULT.n_resamples,
                  seed: int = DEFAULT.seed) -> list[SlopeChange]:
    """The fitted slopes (:func:`rates.fit_rates`, its other defaults) of both aligned cubes on
    their paired cells, matched curve by curve."""
    fa = fit_rates(_paired_only(sub_a, paired), allow_incomplete=True, level=level,
                   n_resamples=n_resamples, seed=seed)
    fb = fit_rates(_paired_only(sub_b, paired), allow_incomplete=True, level=level,
                   n_resamples=n_resamples, seed=seed)

    def key(f: RateFit) -> str:
        return stable_hash([f.algorithm, f.problem, f.axis, f.fixed])

    by_key = {key(f): f for f in fb}
    return [SlopeChange(name, f.algorithm, f.problem, f.axis, dict(f.fixed), f, by_key[key(f)])
            for f in fa if key(f) in by_key]


# --- all experiments ----------------------------------------------------------------------------

def verdict(family: FamilyChange, alpha: float, min_change: float) -> str:
    """A family's verdict from its Holm-adjusted p-value and pooled relative change."""
    if not math.isfinite(family.p_value):
        return "no signal"
    if not (math.isfinite(family.p_holm) and family.p_holm < alpha):
        return "not significant"
    r = family.relative_change
    if family.statistic > 0 and r > min_change:
        return "regression"
    if family.statistic < 0 and r < -min_change:
        return "improvement"
    return "below min-change"


def check_thresholds(alpha: float, min_change: float) -> None:
    """Refuse (:class:`UserInputError`, exit 2) an ``alpha`` outside (0, 1) or a ``min_change``
    that is not a finite fraction ≥ 0 (named by their ``dpbench diff`` options)."""
    if not 0 < alpha < 1:
        raise UserInputError(f"--alpha must lie in (0, 1), got {alpha:g}")
    if not (math.isfinite(min_change) and min_change >= 0):
        raise UserInputError(f"--min-change must be a finite fraction ≥ 0 (0.05 = 5%), got "
                             f"{min_change:g}")


def diff_cubes(pairs: Mapping[str, tuple[xr.Dataset, xr.Dataset]], *,
               experiments_only_a: Sequence[str] = (), experiments_only_b: Sequence[str] = (),
               alpha: float = DEFAULT.diff_alpha, min_change: float = DEFAULT.diff_min_change,
               level: float = DEFAULT.level, slopes: bool = True,
               n_resamples: int = DEFAULT.n_resamples) -> StoreDiff:
    """Diff the experiments present in both stores (``pairs``: name -> (cube A, cube B)).

    Refuses (:class:`UnpairableStores`) when some experiment's cells cannot be paired
    (:func:`pairing_differences`) or when no cell at all is paired; corrects the families'
    p-values with Holm's method across all experiments and sets their verdicts."""
    check_thresholds(alpha, min_change)
    problems = []
    for name, (ds_a, ds_b) in pairs.items():
        problems += [f"experiment {name!r}: {why}"
                     for why in pairing_differences(ds_a.attrs, ds_b.attrs)]
    if problems:
        raise UnpairableStores("the stores' cells cannot be paired (they do not share their data):"
                               "\n  - " + "\n  - ".join(problems))
    experiments = [diff_experiment(name, a, b, level=level, slopes=slopes,
                                      n_resamples=n_resamples) for name, (a, b) in pairs.items()]
    result = StoreDiff(experiments, list(experiments_only_a), list(experiments_only_b),
                               alpha, min_change, level)
    if result.paired_cells == 0:
        only = (f"; experiments only in A: {', '.join(experiments_only_a) or 'none'}, only in B: "
                f"{', '.join(experiments_only_b) or 'none'}")
        raise UnpairableStores("no cell is done in both stores: nothing to diff" + only)
    families = result.families
    for f, ph in zip(families, holm([f.p_value for f in families])):
        f.p_holm = float(ph)
        f.verdict = verdict(f, alpha, min_change)
    return result
