"""Scores of a release for the privacy audit: what the events threshold (docs/audit.md, "Scores").

A :class:`Scorer` maps releases θ (rows of an array) to numbers; the audit's events are sets of
scores (:mod:`dpbench.audit.events`). Any score gives valid bounds — the bounds hold for every
event fixed before the confirmation runs — so the scores differ only in power: the closer a
score is to the log-likelihood ratio log p_D(θ)/p_D′(θ), the closer its best threshold is to
the Neyman–Pearson most powerful event. The scorers, each public or fitted on the selection
runs only:

* ``projection`` — ⟨θ, u⟩ with u the pair's score direction (θ̂*(D′) − θ̂*(D)): the
  log-likelihood ratio of a location family along u;
* ``loss`` — ℓ(θ; z) − ℓ(θ; z′), the loss difference of the canary z in D and z′ in D′: for a
  Gibbs-type sampler p_D(θ) ∝ exp(−k·Σℓ(θ; dᵢ)) the log-likelihood ratio is exactly
  −k·(ℓ(θ; z) − ℓ(θ; z′)) + const, and close to it for mechanisms that minimise the loss;
* ``density`` — the mechanism's own log-density ratio, when it declares one
  (:meth:`dpbench.core.algorithm.Algorithm.log_density_ratio`): the exact likelihood ratio;
* ``logistic`` — a distinguisher in the manner of DP-Sniper (Bichsel, Steffen, Bogunovic and
  Vechev 2021): a logistic regression of "D′ or D" on the standardised release and its squares
  and cross products, fitted (ridge-penalised, Newton's method, deterministic) on a part of the
  selection runs; its log-odds is the score. It finds mean shifts in any direction, changes of
  spread and bumps, in any dimension;
* ``histogram`` — for p ≤ 2, the log ratio of smoothed counts of D′ and D in the cells of a
  grid of pooled-quantile bins, fitted like ``logistic``: any region of the plane, a violation
  confined to the middle of the output range included.

Scorers are small frozen dataclasses (picklable: the confirmation batches on the workers apply
the fitted ones); :func:`apply` evaluates one given the pair, the problem and the mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SCORER_KINDS", "Scorer", "apply", "fit_histogram", "fit_logistic",
           "public_scorers"]

SCORER_KINDS: tuple[str, ...] = ("projection", "loss", "density", "logistic", "histogram")

#: Scores are clipped to ±SCORE_CAP (a log-density ratio of ±inf marks a point mass on one
#: side; clipped, it stays the most extreme score and thresholds stay finite).
SCORE_CAP = 1e300
#: Ridge penalty of the logistic distinguisher (on standardised features) and its Newton steps.
LOGISTIC_RIDGE = 1e-3
LOGISTIC_STEPS = 50
#: Bins per dimension of the histogram distinguisher (at most; fewer with few fit runs).
HISTOGRAM_BINS = 40


@dataclass(frozen=True)
class Scorer:
    """One score function: ``kind`` (:data:`SCORER_KINDS`) and the parameters it was fitted or
    built with (tuples, so that it is hashable and picklable)."""

    kind: str
    direction: tuple[float, ...] = ()
    # logistic: standardisation and weights of the features (1, z, z_i z_j for i ≤ j)
    centre: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    # histogram: bin edges per dimension (flattened with their lengths) and the log-ratio table
    edges: tuple[tuple[float, ...], ...] = ()
    table: tuple[float, ...] = ()
    note: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (infinite edges as ±1.7e308)."""
        fin = lambda v: float(np.clip(v, -1.7e308, 1.7e308))  # noqa: E731
        return {"kind": self.kind, "direction": list(self.direction), "centre": list(self.centre),
                "scale": list(self.scale), "weights": list(self.weights),
                "edges": [[fin(v) for v in e] for e in self.edges], "table": list(self.table)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scorer:
        if d.get("kind") not in SCORER_KINDS:
            raise ValueError(f"unknown scorer kind {d.get('kind')!r}")
        edges = tuple(tuple(float(v) for v in e) for e in d.get("edges", []))
        edges = tuple((-np.inf, *e[1:-1], np.inf) if len(e) >= 2 else e for e in edges)
        return cls(str(d["kind"]), tuple(map(float, d.get("direction", []))),
                   tuple(map(float, d.get("centre", []))), tuple(map(float, d.get("scale", []))),
                   tuple(map(float, d.get("weights", []))), edges,
                   tuple(map(float, d.get("table", []))))

    def describe(self) -> str:
        if self.kind == "projection":
            return "⟨θ, u⟩ (u: θ̂*(D′) − θ̂*(D))"
        if self.kind == "loss":
            return "ℓ(θ; z) − ℓ(θ; z′) (the canary's loss difference)"
        if self.kind == "density":
            return "log p_D(θ) − log p_D′(θ) (the mechanism's declared density ratio)"
        if self.kind == "logistic":
            return "quadratic logistic distinguisher fitted on selection runs"
        return f"histogram log-ratio on {len(self.table)} cells fitted on selection runs"


def public_scorers(direction: np.ndarray, has_loss: bool, has_density: bool) -> list[Scorer]:
    """The scorers that need no fitting, in a fixed order."""
    out = [Scorer("projection", tuple(float(v) for v in direction))]
    if has_loss:
        out.append(Scorer("loss"))
    if has_density:
        out.append(Scorer("density"))
    return out


# --- evaluation ------------------------------------------------------------------------------

def _features(z: np.ndarray) -> np.ndarray:
    """(1, z, z_i·z_j for i ≤ j) of standardised releases ``z`` (rows)."""
    m, p = z.shape
    iu = np.triu_indices(p)
    quad = (z[:, :, None] * z[:, None, :])[:, iu[0], iu[1]]
    return np.concatenate([np.ones((m, 1)), z, quad], axis=1)


def _histogram_cells(thetas: np.ndarray, edges: Sequence[Sequence[float]]) -> np.ndarray:
    index = np.zeros(thetas.shape[0], dtype=np.int64)
    for j, e in enumerate(edges):
        e = np.asarray(e, dtype=float)
        b = np.clip(np.searchsorted(e, thetas[:, j], side="right") - 1, 0, e.size - 2)
        index = index * (e.size - 1) + b
    return index


def _loss_difference(thetas: np.ndarray, problem: Any, d0: Any, d1: Any) -> np.ndarray:
    """ℓ(θ; z) − ℓ(θ; z′) per row, z = row 0 of D, z′ = row 0 of D′ (compiled when the problem
    has a kernel)."""
    from ..core.problem import Dataset

    z = Dataset(d0.X[:1], None if d0.y is None else d0.y[:1], dict(d0.meta))
    z1 = Dataset(d1.X[:1], None if d1.y is None else d1.y[:1], dict(d1.meta))
    kernel = problem.kernel() if hasattr(problem, "kernel") else None
    if kernel is not None:
        from ..numerics.kernels import row_losses

        return (row_losses(kernel, thetas, z) - row_losses(kernel, thetas, z1))
    return np.array([float(problem.loss(t, z)[0]) - float(problem.loss(t, z1)[0])
                     for t in thetas])


def apply(scorer: Scorer, thetas: np.ndarray, *, problem: Any = None, algorithm: Any = None,
          d0: Any = None, d1: Any = None, epsilon: float = math.nan,
          delta: float = math.nan) -> np.ndarray:
    """The scores of the releases ``thetas`` (rows), finite (clipped to ±SCORE_CAP)."""
    thetas = np.asarray(thetas, dtype=np.float64)
    if thetas.ndim == 1:
        thetas = thetas[:, None]
    kind = scorer.kind
    if kind == "projection":
        out = thetas @ np.asarray(scorer.direction, dtype=float)
    elif kind == "loss":
        out = _loss_difference(thetas, problem, d0, d1)
    elif kind == "density":
        ratio = algorithm.log_density_ratio(thetas, d0, d1, problem, epsilon=epsilon,
                                            delta=delta)
        if ratio is None:
            raise ValueError(f"{algorithm.name}: log_density_ratio returned None on a pair it "
                             "was scored with")
        out = np.asarray(ratio, dtype=np.float64).reshape(-1)
    elif kind == "logistic":
        out = _logistic_score(scorer, thetas)
    elif kind == "histogram":
        out = np.asarray(scorer.table)[_histogram_cells(thetas, scorer.edges)]
    else:
        raise ValueError(f"unknown scorer kind {kind!r}; allowed: {', '.join(SCORER_KINDS)}")
    out = np.asarray(out, dtype=np.float64)
    if out.shape != (thetas.shape[0],):
        raise ValueError(f"scorer {kind!r} gave shape {out.shape} for {thetas.shape[0]} releases")
    if not np.all(np.isfinite(out)):
        out = np.nan_to_num(out, nan=0.0, posinf=SCORE_CAP, neginf=-SCORE_CAP)
    return out


def _logistic_score(scorer: Scorer, thetas: np.ndarray) -> np.ndarray:
    """w₀ + ⟨w, z⟩ + Σ_{i≤j} w_ij z_i z_j without building the feature matrix (the scores of
    millions of confirmation releases)."""
    p = thetas.shape[1]
    w = np.asarray(scorer.weights)
    z = np.clip((thetas - np.asarray(scorer.centre)) / np.asarray(scorer.scale), -50.0, 50.0)
    quad = np.zeros((p, p))
    quad[np.triu_indices(p)] = w[1 + p:]
    return w[0] + z @ w[1:1 + p] + np.einsum("ij,ij->i", z @ quad, z)


# --- fitting (selection runs only) -------------------------------------------------------------

def fit_logistic(x0: np.ndarray, x1: np.ndarray) -> Scorer | None:
    """A quadratic logistic regression of "released on D′" against "released on D", by Newton's
    method with a small ridge penalty on standardised features (deterministic); ``None`` when
    the releases do not vary (a point mass is then the atom events' business)."""
    x = np.concatenate([x0, x1]).astype(np.float64)
    if x.ndim == 1:
        x = x[:, None]
    centre = np.median(x, axis=0)
    spread = np.quantile(x, 0.75, axis=0) - np.quantile(x, 0.25, axis=0)
    scale = np.where(spread > 0, spread, np.std(x, axis=0))
    if not np.all(scale > 0):
        return None
    z = np.clip((x - centre) / scale, -50.0, 50.0)
    feats = _features(z)
    target = np.concatenate([np.zeros(len(x0)), np.ones(len(x1))])
    w = np.zeros(feats.shape[1])
    penalty = LOGISTIC_RIDGE * len(x) * np.eye(feats.shape[1])
    penalty[0, 0] = 0.0
    for _ in range(LOGISTIC_STEPS):
        eta = np.clip(feats @ w, -30.0, 30.0)
        prob = 1.0 / (1.0 + np.exp(-eta))
        grad = feats.T @ (prob - target) + penalty @ w
        hess = (feats * (prob * (1 - prob))[:, None]).T @ feats + penalty
        try:
            step = np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
        except np.linalg.LinAlgError:
            return None
        w -= step
        if float(np.max(np.abs(step))) < 1e-9:
            break
    if not np.all(np.isfinite(w)):
        return None
    return Scorer("logistic", centre=tuple(map(float, centre)), scale=tuple(map(float, scale)),
                  weights=tuple(map(float, w)))


def fit_histogram(x0: np.ndarray, x1: np.ndarray) -> Scorer | None:
    """Log ratio of smoothed counts of D′ and D in pooled-quantile cells (p ≤ 2); ``None`` for
    p > 2 or too few distinct values."""
    x0 = np.asarray(x0, dtype=np.float64).reshape(len(x0), -1)
    x1 = np.asarray(x1, dtype=np.float64).reshape(len(x1), -1)
    p = x0.shape[1]
    if p > 2:
        return None
    pooled = np.concatenate([x0, x1])
    per_dim = max(2, min(HISTOGRAM_BINS, int(round((len(pooled) / 50) ** (1.0 / p)))))
    edges = []
    for j in range(p):
        e = np.unique(np.quantile(pooled[:, j], np.linspace(0, 1, per_dim + 1)))
        if e.size < 2:
            return None
        e[0], e[-1] = -np.inf, np.inf
        edges.append(tuple(map(float, e)))
    cells = int(np.prod([len(e) - 1 for e in edges]))
    c0 = np.bincount(_histogram_cells(x0, edges), minlength=cells)
    c1 = np.bincount(_histogram_cells(x1, edges), minlength=cells)
    table = np.log((c1 + 0.5) / len(x1)) - np.log((c0 + 0.5) / len(x0))
    return Scorer("histogram", edges=tuple(edges), table=tuple(map(float, table)))
