"""The audit's events: sets of scores, chosen on selection runs, counted on confirmation runs.

An (ε, δ)-DP mechanism satisfies P[M(D₁) ∈ E] ≤ e^ε·P[M(D₀) ∈ E] + δ for every event E and both
orders of a neighbouring pair. An :class:`Event` is a set of values of one score
(:mod:`dpbench.audit.scores`) with an orientation (which dataset is the numerator D₁):

* ``gt`` {s > a} and ``le`` {s ≤ a} — thresholds: the Neyman–Pearson events when the score is
  (monotone in) the likelihood ratio;
* ``in`` {a < s ≤ b} — intervals: a violation confined to the middle of the output range
  (diffprivlib's mis-scaled Jacobian correction lives on ≈ 4 % of the releases around one
  point, docs/diffprivlib.md) is invisible to thresholds;
* ``eq`` {s = a} — atoms: a value repeated among one side's selection runs is a point mass (a raw
  record released now and then, a deterministic branch), which {s = a} isolates even inside
  the bulk.

:func:`select_events` chooses, per score, the event whose **predicted confirmation bound** is
largest: the selection counts, made pessimistic by one standard deviation and scaled to the
confirmation runs, put into the Clopper–Pearson bound that the confirmation will compute. It is
a function of the selection runs only, so any choice is valid; the prediction only makes the
choice good. The candidates: thresholds at 199 interior quantiles of the pooled selection scores
and at tail order statistics (ranks 1, 2, 3, 5, 8, … up to the 0.5 % quantile), intervals
between any two of 64 cut points (quantiles and tails), and up to 64 atoms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from .joint import predicted_joint_epsilon


__all__ = ["EVENT_KINDS", "Event", "count_events", "predicted_bounds", "select_events"]

EVENT_KINDS: tuple[str, ...] = ("gt", "le", "in", "eq")

N_QUANTILES = 200
N_CUTS = 64
MAX_ATOMS = 64


@dataclass(frozen=True)
class Event:
    """{score ∈ set} of scorer ``scorer`` (an index into the point's scorers): ``kind`` gt/le
    (threshold ``lo``), in (lo, hi], eq (= lo); ``numerator`` 1 when D′ is the numerator
    dataset (P[E | D′] ≤ e^ε·P[E | D] + δ is tested), 0 when D is."""

    scorer: int
    kind: str
    lo: float
    hi: float
    numerator: int

    def contains(self, scores: np.ndarray) -> np.ndarray:
        if self.kind == "gt":
            return scores > self.lo
        if self.kind == "le":
            return scores <= self.lo
        if self.kind == "in":
            return (scores > self.lo) & (scores <= self.hi)
        return scores == self.lo

    def describe(self, scorer_text: str = "s") -> str:
        num, den = ("D′", "D") if self.numerator == 1 else ("D", "D′")
        what = {"gt": f"{scorer_text} > {self.lo:.6g}", "le": f"{scorer_text} ≤ {self.lo:.6g}",
                "in": f"{self.lo:.6g} < {scorer_text} ≤ {self.hi:.6g}",
                "eq": f"{scorer_text} = {self.lo:.6g}"}[self.kind]
        return f"P[{what} | {num}] vs P[· | {den}]"

    def to_dict(self) -> dict[str, float | int | str]:
        return {"scorer": self.scorer, "kind": self.kind, "lo": _finite(self.lo),
                "hi": _finite(self.hi), "numerator": self.numerator}

    @classmethod
    def from_dict(cls, d: dict) -> Event:  # type: ignore[type-arg]
        if d.get("kind") not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {d.get('kind')!r}")
        return cls(int(d["scorer"]), str(d["kind"]), float(d["lo"]), float(d["hi"]),
                   int(d["numerator"]))


def _finite(v: float) -> float:
    return float(np.clip(v, -1.7e308, 1.7e308))


def count_events(events: list[Event], scores: list[np.ndarray]) -> np.ndarray:
    """How many of the releases fall in each event: ``scores[k]`` are the releases' scores under
    scorer k (one side); returns int64 counts, one per event."""
    return np.array([int(np.count_nonzero(e.contains(scores[e.scorer]))) for e in events],
                    dtype=np.int64)


def predicted_bounds(k_num: np.ndarray, k_den: np.ndarray, n_select: int, n_confirm: int,
                     delta: float, alpha_each: float) -> tuple[np.ndarray, np.ndarray]:
    """(ε bound, μ bound) the confirmation would give for events with selection counts
    ``k_num``/``k_den`` out of ``n_select`` per side: the counts made pessimistic by one
    standard deviation (k − √k on the numerator, k + √k + 1 on the denominator), scaled to
    ``n_confirm`` runs, into the Clopper–Pearson bounds at ``alpha_each`` per side and, for ε,
    the joint test's normal approximation at twice that (:mod:`dpbench.audit.joint`)."""
    k_num = np.asarray(k_num, dtype=float)
    k_den = np.asarray(k_den, dtype=float)
    f = n_confirm / max(n_select, 1)
    num = np.clip((k_num - np.sqrt(k_num)) * f, 0, n_confirm)
    den = np.clip((k_den + np.sqrt(k_den) + 1.0) * f, 0, n_confirm)
    tpr, fpr = wilson_bounds(np.floor(num), np.ceil(den), n_confirm, alpha_each)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(tpr > delta, np.log((tpr - delta) / fpr), -np.inf)
        mu = ndtri(1.0 - fpr) - ndtri(1.0 - tpr)
    eps = np.maximum(eps, predicted_joint_epsilon(np.floor(num) / n_confirm,
                                                  np.ceil(den) / n_confirm, n_confirm, delta,
                                                  2 * alpha_each))
    return eps, np.where(np.isfinite(mu), mu, -np.inf)


def wilson_bounds(k_low: np.ndarray, k_high: np.ndarray, n: int, alpha: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Wilson score bounds (lower on ``k_low``/n, upper on ``k_high``/n) at level
    ``alpha``: a close, fast stand-in for Clopper–Pearson (within a few per cent of it), used
    only to *predict* bounds when choosing events (the confirmation uses Clopper–Pearson)."""
    z = float(ndtri(1.0 - alpha))
    z2 = z * z

    def bound(k: np.ndarray, sign: float) -> np.ndarray:
        phat = np.asarray(k, dtype=float) / n
        centre = phat + z2 / (2 * n)
        half = z * np.sqrt(np.maximum(phat * (1 - phat) / n + z2 / (4 * n * n), 0.0))
        return np.clip((centre + sign * half) / (1 + z2 / n), 0.0, 1.0)

    return bound(k_low, -1.0), bound(k_high, 1.0)


def _tail_ranks(n: int) -> np.ndarray:
    """0-based ranks 0, 1, 2, 4, 7, 12, … (Fibonacci-like) below the 0.5 % quantile of n."""
    ranks, a, b = [], 1, 2
    while a - 1 < max(1, n // N_QUANTILES):
        ranks.append(a - 1)
        a, b = b, a + b
    return np.asarray(ranks, dtype=int)


def _atoms(s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    found: dict[float, int] = {}
    for side in (s0, s1):
        values, counts = np.unique(side, return_counts=True)
        for v, c in zip(values[counts >= 2], counts[counts >= 2]):
            found[float(v)] = max(found.get(float(v), 0), int(c))
    ordered = sorted(found, key=lambda v: (-found[v], v))[:MAX_ATOMS]
    return np.asarray(sorted(ordered), dtype=float)


def _candidates(s0: np.ndarray, s1: np.ndarray
                ) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """(kind, lo, hi, count on D, count on D′) arrays of every candidate event of one score."""
    pooled = np.sort(np.concatenate([s0, s1]))
    a0, a1 = np.sort(s0), np.sort(s1)
    ranks = _tail_ranks(pooled.size)
    qs = np.linspace(0.0, 1.0, N_QUANTILES + 1)[1:-1]
    ts = np.unique(np.concatenate([np.quantile(pooled, qs), pooled[ranks],
                                   pooled[pooled.size - 1 - ranks]]))
    le0 = np.searchsorted(a0, ts, side="right").astype(float)
    le1 = np.searchsorted(a1, ts, side="right").astype(float)
    out = [("le", ts, ts, le0, le1), ("gt", ts, ts, a0.size - le0, a1.size - le1)]
    cuts = np.unique(np.concatenate([
        np.quantile(pooled, np.linspace(0.0, 1.0, N_CUTS - 2 * ranks.size)[1:-1]),
        pooled[ranks], pooled[pooled.size - 1 - ranks]]))
    c0 = np.searchsorted(a0, cuts, side="right").astype(float)
    c1 = np.searchsorted(a1, cuts, side="right").astype(float)
    i, j = np.triu_indices(cuts.size, k=1)
    if i.size:
        out.append(("in", cuts[i], cuts[j], c0[j] - c0[i], c1[j] - c1[i]))
    atoms = _atoms(s0, s1)
    if atoms.size:
        e0 = (np.searchsorted(a0, atoms, side="right") - np.searchsorted(a0, atoms, side="left"))
        e1 = (np.searchsorted(a1, atoms, side="right") - np.searchsorted(a1, atoms, side="left"))
        out.append(("eq", atoms, atoms, e0.astype(float), e1.astype(float)))
    return out


@dataclass(frozen=True)
class Choice:
    """A selected event and its predicted confirmation bound."""

    event: Event
    predicted_epsilon: float
    predicted_mu: float


def select_events(scorer: int, s0: np.ndarray, s1: np.ndarray, *, n_confirm: int, delta: float,
                  alpha_each: float, want_mu: bool) -> list[Choice]:
    """The event of scores ``s0`` (selection runs on D) and ``s1`` (on D′, same count) with the
    largest predicted ε bound, and, when ``want_mu``, the one with the largest predicted μ bound
    (if it differs). Both orientations of every candidate are considered."""
    s0 = np.asarray(s0, dtype=np.float64)
    s1 = np.asarray(s1, dtype=np.float64)
    n = int(s0.size)
    if n == 0 or s1.size != n:
        return []
    best: dict[str, tuple[float, float, Event]] = {}
    for kind, lo, hi, k0, k1 in _candidates(s0, s1):
        for numerator, (kn, kd) in ((1, (k1, k0)), (0, (k0, k1))):
            eps, mu = predicted_bounds(kn, kd, n, n_confirm, delta, alpha_each)
            for purpose, vals in (("epsilon", eps), ("mu", mu)):
                i = int(np.argmax(vals))
                if not math.isfinite(vals[i]):
                    continue
                if purpose not in best or vals[i] > best[purpose][0]:
                    event = Event(scorer, kind, float(lo[i]), float(hi[i]), numerator)
                    best[purpose] = (float(vals[i]), float(eps[i] if purpose == "mu" else mu[i]),
                                     event)
    out: list[Choice] = []
    if "epsilon" in best:
        v, other, ev = best["epsilon"]
        out.append(Choice(ev, v, other))
    if want_mu and "mu" in best and (not out or best["mu"][2] != out[0].event):
        v, other, ev = best["mu"]
        out.append(Choice(ev, other, v))
    return out
