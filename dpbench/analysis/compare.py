"""Comparisons between algorithms on the same data, and DPBench-style consistency checks.

* :func:`paired_comparisons`: at every (problem, grid point), every pair of algorithms is compared
  on the **same data seeds** (datasets depend only on problem, n, p and seed, so cells are paired)
  with the Wilcoxon signed-rank test on the per-seed differences of excess risk; p-values are
  Holm-corrected across all comparisons of the experiment.
* :func:`crossovers`: along each swept axis, where the mean excess of one algorithm overtakes
  another's (log-log interpolation between the grid points where the sign flips).
* :func:`collapse_check`: DPBench's observation that many private risks depend on n and ε only
  through nε: fit log m = a + b·log n + c·log ε and test b = c (bootstrap CI of b − c).
* :func:`epsilon_convergence`: as ε grows, the excess should fall towards the non-private
  reference (whose excess is 0 against the certified optimum, up to its gap).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats

from ..core.schema import DONE
from .rates import cell_index
from .settings import DEFAULT
from .spent import NON_PRIVATE


@dataclass
class Comparison:
    problem: str
    point: dict[str, Any]
    a: str
    b: str
    n_pairs: int
    median_difference: float       # median over seeds of excess(a) − excess(b)
    p_value: float
    p_holm: float
    better: str                    # a, b, or "" when not significant at ``alpha`` after Holm
    alpha: float


@dataclass
class Crossover:
    problem: str
    axis: str
    fixed: dict[str, Any]
    a: str
    b: str
    at: float                      # axis value where mean(a) = mean(b), log-log interpolated
    below: str                     # the algorithm with lower mean excess below the crossover


@dataclass
class CollapseCheck:
    algorithm: str
    problem: str
    fixed: dict[str, Any]
    slope_n: float
    slope_epsilon: float
    difference: float
    difference_low: float
    difference_high: float
    collapses: bool                # the CI of b − c contains 0 widened by the tolerance
    tolerance: float


@dataclass
class EpsilonConvergence:
    algorithm: str
    problem: str
    fixed: dict[str, Any]
    epsilons: list[float]
    mean: list[float]
    monotone: bool                 # mean excess non-increasing in ε (within 2 standard errors)
    reduction: float               # mean at the largest ε / mean at the smallest ε


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (NaNs stay NaN and do not count)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _points(ds: xr.Dataset) -> list[dict[str, int]]:
    dims = [d for d in ds.excess_risk.dims if d not in ("algorithm", "problem", "seed")]
    return [dict(zip(dims, combo)) for combo in itertools.product(*(range(ds.sizes[d]) for d in dims))]


def _label(ds: xr.Dataset, idx: dict[str, int]) -> dict[str, Any]:
    return {d: ds[d].values[i].item() for d, i in idx.items()}


def paired_comparisons(ds: xr.Dataset, alpha: float = DEFAULT.alpha) -> list[Comparison]:
    """Wilcoxon signed-rank tests of every algorithm pair at every (problem, grid point)."""
    er = ds.excess_risk.values
    st = ds.status.values
    out: list[Comparison] = []
    algs = [str(a) for a in ds.algorithm.values]
    for pi, prob in enumerate(ds.problem.values):
        for idx in _points(ds):
            sel = tuple(idx[d] for d in idx)
            for (ia, a), (ib, b) in itertools.combinations(enumerate(algs), 2):
                xa, xb = er[(ia, pi, *sel)], er[(ib, pi, *sel)]
                ok = (st[(ia, pi, *sel)] == DONE) & (st[(ib, pi, *sel)] == DONE)
                d = xa[ok] - xb[ok]
                if d.size == 0:
                    continue
                if d.size < 5 or np.all(d == 0):
                    p = math.nan
                else:
                    p = float(stats.wilcoxon(d, zero_method="zsplit").pvalue)
                out.append(Comparison(str(prob), _label(ds, idx), a, b, int(d.size),
                                      float(np.median(d)), p, math.nan, "", alpha))
    adjusted = holm([c.p_value for c in out])
    for c, ph in zip(out, adjusted):
        c.p_holm = float(ph)
        if math.isfinite(ph) and ph < alpha:
            c.better = c.b if c.median_difference > 0 else c.a
    return out


def _mean_curve(ds: xr.Dataset, ai: int, pi: int, axis: str, fixed_idx: dict[str, int]) -> np.ndarray:
    dims = list(ds.excess_risk.dims)
    er, st = ds.excess_risk.values, ds.status.values
    out = []
    for j in range(ds.sizes[axis]):
        idx = cell_index(dims, {"algorithm": ai, "problem": pi, axis: j, **fixed_idx})
        v = er[idx][st[idx] == DONE]
        out.append(v.mean() if v.size else np.nan)
    return np.asarray(out)


def crossovers(ds: xr.Dataset) -> list[Crossover]:
    """Where one algorithm's mean excess overtakes another's along each swept axis."""
    out: list[Crossover] = []
    algs = [str(a) for a in ds.algorithm.values]
    axes = [d for d in ds.excess_risk.dims
            if d not in ("algorithm", "problem", "seed") and ds.sizes[d] >= 2]
    for axis in axes:
        others = [d for d in ds.excess_risk.dims if d not in ("algorithm", "problem", "seed", axis)]
        x = np.asarray(ds[axis].values, dtype=float)
        for pi, prob in enumerate(ds.problem.values):
            for combo in itertools.product(*(range(ds.sizes[d]) for d in others)):
                fixed_idx = dict(zip(others, combo))
                curves = {a: _mean_curve(ds, ai, pi, axis, fixed_idx) for ai, a in enumerate(algs)}
                for a, b in itertools.combinations(algs, 2):
                    ma, mb = curves[a], curves[b]
                    ok = (ma > 0) & (mb > 0) & np.isfinite(ma) & np.isfinite(mb)
                    if ok.sum() < 2 or np.any(x <= 0):
                        continue
                    xs, d = np.log(x[ok]), np.log(ma[ok]) - np.log(mb[ok])
                    for j in range(len(d) - 1):
                        if d[j] == 0 or np.sign(d[j]) == np.sign(d[j + 1]) or d[j + 1] == 0:
                            continue
                        t = d[j] / (d[j] - d[j + 1])
                        at = float(np.exp(xs[j] + t * (xs[j + 1] - xs[j])))
                        out.append(Crossover(str(prob), axis, _label(ds, fixed_idx), a, b, at,
                                             a if d[j] < 0 else b))
    return out


def collapse_check(ds: xr.Dataset, tolerance: float = DEFAULT.collapse_tolerance,
                   n_resamples: int = DEFAULT.collapse_resamples,
                   seed: int = DEFAULT.seed) -> list[CollapseCheck]:
    """Test whether mean excess depends on n and ε only through nε (needs ≥ 2 values of each)."""
    if ds.sizes.get("n", 0) < 2 or ds.sizes.get("epsilon", 0) < 2:
        return []
    out: list[CollapseCheck] = []
    rng = np.random.default_rng(seed)
    others = [d for d in ds.excess_risk.dims if d not in ("algorithm", "problem", "seed", "n", "epsilon")]
    dims = list(ds.excess_risk.dims)
    er, st = ds.excess_risk.values, ds.status.values
    ln, le = np.log(ds.n.values.astype(float)), np.log(ds.epsilon.values.astype(float))
    for ai, alg in enumerate(ds.algorithm.values):
        if not ds.attrs.get("algorithms", {}).get(str(alg), {}).get("rate_card"):
            continue
        for pi, prob in enumerate(ds.problem.values):
            for combo in itertools.product(*(range(ds.sizes[d]) for d in others)):
                samples, X = [], []
                for i, j in itertools.product(range(len(ln)), range(len(le))):
                    idx = cell_index(dims, {"algorithm": ai, "problem": pi, "n": i, "epsilon": j,
                                            **dict(zip(others, combo))})
                    v = er[idx][st[idx] == DONE]
                    if v.size >= 2 and v.mean() > 0:
                        samples.append(v)
                        X.append([1.0, ln[i], le[j]])
                if len(samples) < 4:
                    continue
                X = np.asarray(X)
                pinv = np.linalg.pinv(X)
                means = np.array([s.mean() for s in samples])
                coef = pinv @ np.log(means)
                boot = np.stack([s[rng.integers(0, s.size, (n_resamples, s.size))].mean(1)
                                 for s in samples], axis=1)
                ok = np.all(boot > 0, axis=1)
                bc = np.log(boot[ok]) @ pinv.T
                diff = bc[:, 1] - bc[:, 2]
                lo, hi = (np.quantile(diff, [0.025, 0.975]) if diff.size else (np.nan, np.nan))
                out.append(CollapseCheck(str(alg), str(prob), _label(ds, dict(zip(others, combo))),
                                         float(coef[1]), float(coef[2]), float(coef[1] - coef[2]),
                                         float(lo), float(hi),
                                         bool(lo - tolerance <= 0 <= hi + tolerance), tolerance))
    return out


def epsilon_convergence(ds: xr.Dataset) -> list[EpsilonConvergence]:
    """Mean excess vs ε for each curve: does it fall towards the non-private reference?"""
    if ds.sizes.get("epsilon", 0) < 2:
        return []
    out: list[EpsilonConvergence] = []
    dims = list(ds.excess_risk.dims)
    others = [d for d in dims if d not in ("algorithm", "problem", "seed", "epsilon")]
    er, st = ds.excess_risk.values, ds.status.values
    for ai, alg in enumerate(ds.algorithm.values):
        if ds.attrs.get("algorithms", {}).get(str(alg), {}).get("privacy") == NON_PRIVATE:
            continue
        for pi, prob in enumerate(ds.problem.values):
            for combo in itertools.product(*(range(ds.sizes[d]) for d in others)):
                means, ses = [], []
                for j in range(ds.sizes["epsilon"]):
                    idx = cell_index(dims, {"algorithm": ai, "problem": pi, "epsilon": j,
                                            **dict(zip(others, combo))})
                    v = er[idx][st[idx] == DONE]
                    means.append(v.mean() if v.size else np.nan)
                    ses.append(v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else np.nan)
                m, s = np.asarray(means), np.asarray(ses)
                if not np.all(np.isfinite(m)):
                    continue
                monotone = bool(np.all(np.diff(m) <= 2 * np.sqrt(s[1:] ** 2 + s[:-1] ** 2)))
                out.append(EpsilonConvergence(
                    str(alg), str(prob), _label(ds, dict(zip(others, combo))),
                    [float(e) for e in ds.epsilon.values], m.tolist(), monotone,
                    float(m[-1] / m[0]) if m[0] > 0 else math.nan))
    return out
