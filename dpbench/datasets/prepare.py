"""Preparing a parsed data set for a problem: the held-out split, labels, feature scaling and
the row-norm bound (docs/datasets.md, 'Preparation').

Everything here is a deterministic function of the table, its content digest and the problem's
parameters, and every step is recorded in :attr:`Prepared.meta`:

1. **Split.** A fixed fraction ``test_fraction`` of the rows (rounded, at least 1) is held out
   for the population risk; the permutation comes from a stream keyed by the content digest and
   the fraction (never by a cell's seed), so every cell, process and run sees the same split.
2. **Labels.** ``binary``: two classes map to ±1, the larger class (numeric or lexicographic
   order) to +1 (e.g. 0/1 → −1/+1, ``B``/``M`` → −1/+1); with ``positive`` the rows of that class
   are +1 and every other row −1 (one-vs-rest; required for more than two classes).
   ``regression``: y is centred at the midpoint of the pool's range and scaled by its half-range
   times ``label_bound``, so pool labels fill [−label_bound, label_bound]; held-out labels are
   clipped to it.
3. **Features.** Each column is centred at the midpoint of the pool's range and divided by its
   half-range (pool values in [−1, 1]; a constant column becomes 0); with ``intercept`` a column
   of ones is appended. Then each row is brought within the declared norm bound ``data_norm``:
   ``clip`` multiplies it by min(1, data_norm/‖x‖), ``unit`` by data_norm/‖x‖ (zero rows stay 0).

The pool's per-column ranges (and the label range) are treated as **public schema knowledge**,
as diffprivlib's ``bounds`` and ``data_norm`` are: a mechanism's privacy guarantee covers the
rows given these bounds, not the bounds themselves (docs/datasets.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.seeding import make_rng
from .files import DatasetError, Table

__all__ = ["Prepared", "binary_labels", "prepare", "regression_labels", "scale_features",
           "split_rows"]


@dataclass(frozen=True)
class Prepared:
    """A prepared data set: the training pool and the held-out split (read-only arrays) and the
    record of how they were made (``meta``)."""

    X_pool: np.ndarray
    y_pool: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    meta: dict[str, Any]


def split_rows(n_rows: int, test_fraction: float, digest: str) -> tuple[np.ndarray, np.ndarray]:
    """(pool rows, held-out rows), each sorted: ``round(test_fraction·n_rows)`` rows (at least 1)
    held out, drawn from a stream keyed by the content ``digest`` and the fraction."""
    n_test = max(1, int(round(test_fraction * n_rows)))
    if n_rows - n_test < 2:
        raise DatasetError("dataset", f"has {n_rows} rows: too few to hold out "
                                      f"{test_fraction:g} of them and keep a pool of 2 or more")
    rng = make_rng({"stream": "dataset_split", "sha256": digest,
                    "test_fraction": float(test_fraction)}, root_seed=0)
    order = rng.permutation(n_rows)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def _matches(y: np.ndarray, positive: Any) -> np.ndarray:
    """Rows whose label is ``positive`` (numbers compared as numbers, names as strings)."""
    if y.dtype.kind == "f":
        try:
            value = float(positive)
        except ValueError:
            return np.zeros(y.shape, dtype=bool)
        return y == value
    text = str(positive)
    if isinstance(positive, float) and positive.is_integer():
        return (y == text) | (y == str(int(positive)))
    return y == text


def _show(values: np.ndarray, limit: int = 12) -> str:
    shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in values[:limit].tolist()]
    return ", ".join(shown) + (" …" if len(values) > limit else "")


def binary_labels(y: np.ndarray, positive: Any = None,
                  param: str = "label_column") -> tuple[np.ndarray, dict[str, Any]]:
    """Labels ±1 and the rule used (module docstring, step 2)."""
    classes = np.unique(y)
    if len(classes) < 2:
        raise DatasetError(param, f"the labels have a single class ({_show(classes)}); a "
                                  "classification problem needs two")
    if positive is None:
        if len(classes) > 2:
            raise DatasetError("positive", f"the labels have {len(classes)} classes "
                                           f"({_show(classes)}): name the positive class "
                                           "(one-vs-rest), e.g. positive: "
                                           f"{_show(classes[:1])}")
        plus = y == classes[1]
        record = {"rule": "binary: the larger class is +1", "positive": classes[1].item(),
                  "negative": [classes[0].item()]}
    else:
        plus = _matches(y, positive)
        if not plus.any():
            raise DatasetError("positive", f"no label equals {positive!r}; classes: "
                                           f"{_show(classes)}")
        if plus.all():
            raise DatasetError("positive", f"every label equals {positive!r}: one-vs-rest needs "
                                           "another class")
        record = {"rule": "one-vs-rest: positive is +1, every other class -1",
                  "positive": positive,
                  "negative": [c.item() for c in classes if not _matches(np.array([c]),
                                                                         positive)[0]]}
    out = np.where(plus, 1.0, -1.0)
    record["count_positive"] = int(plus.sum())
    record["count_negative"] = int((~plus).sum())
    return out, record


def regression_labels(y_pool: np.ndarray, y_test: np.ndarray, label_bound: float,
                      param: str = "label_column") -> tuple[np.ndarray, np.ndarray,
                                                             dict[str, Any]]:
    """Labels scaled into [−label_bound, label_bound] by the pool's range (step 2)."""
    if y_pool.dtype.kind != "f":
        raise DatasetError(param, f"least squares needs numeric labels, got class names such "
                                  f"as {_show(np.unique(y_pool)[:3])}")
    lo, hi = float(y_pool.min()), float(y_pool.max())
    if hi == lo:
        raise DatasetError(param, f"the labels of the pool are constant ({lo:g})")
    mid, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
    pool = np.clip(label_bound * (y_pool - mid) / half, -label_bound, label_bound)
    test = np.clip(label_bound * (y_test - mid) / half, -label_bound, label_bound)
    record = {"rule": "y -> label_bound*(y - mid)/half, mid and half the pool's mid-range and "
                      "half-range, clipped to [-label_bound, label_bound]",
              "pool_range": [lo, hi], "label_bound": float(label_bound),
              "clipped_test_labels": int((np.abs(label_bound * (y_test - mid) / half)
                                          > label_bound).sum())}
    return pool, test, record


def scale_features(X_pool: np.ndarray, X_test: np.ndarray, *, data_norm: float, rows: str,
                   intercept: bool) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Columns scaled by the pool's ranges, an optional intercept column, rows within
    ``data_norm`` (step 3)."""
    lo, hi = X_pool.min(axis=0), X_pool.max(axis=0)
    mid, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
    constant = half == 0
    scale = np.where(constant, 1.0, half)

    def columns(X: np.ndarray) -> np.ndarray:
        Z = (X - mid) / scale
        Z[:, constant] = 0.0
        if intercept:
            Z = np.hstack([Z, np.ones((Z.shape[0], 1))])
        return Z

    def bounded(Z: np.ndarray) -> tuple[np.ndarray, int]:
        norms = np.linalg.norm(Z, axis=1)
        if rows == "unit":
            factor = np.divide(data_norm, norms, out=np.ones_like(norms), where=norms > 0)
            changed = int((np.abs(norms - data_norm) > 1e-12 * data_norm).sum())
        else:
            factor = np.minimum(1.0, np.divide(data_norm, norms, out=np.ones_like(norms),
                                               where=norms > 0))
            changed = int((factor < 1.0).sum())
        out = Z * factor[:, None]
        # Rounding may leave a norm a few ulps above the bound: never above it.
        over = np.linalg.norm(out, axis=1) > data_norm
        out[over] *= (data_norm / np.linalg.norm(out[over], axis=1))[:, None] * (1 - 1e-15)
        return out, changed

    pool, changed_pool = bounded(columns(X_pool))
    test, changed_test = bounded(columns(X_test))
    record = {"columns": "x -> (x - mid)/half per column, mid and half the pool's mid-range and "
                         "half-range (a constant column -> 0)",
              "constant_columns": [int(j) for j in np.flatnonzero(constant)],
              "intercept": bool(intercept), "rows": rows, "data_norm": float(data_norm),
              ("clipped_pool_rows" if rows == "clip" else "rescaled_pool_rows"): changed_pool,
              ("clipped_test_rows" if rows == "clip" else "rescaled_test_rows"): changed_test}
    return pool, test, record


def prepare(table: Table, digest: str, *, task: str, test_fraction: float, data_norm: float,
            rows: str, intercept: bool, positive: Any = None, label_bound: float = 1.0,
            label_param: str = "label_column") -> Prepared:
    """The prepared pool and held-out split of ``table`` for a ``binary`` or ``regression`` task
    (the module docstring's steps, in order)."""
    n_rows = table.X.shape[0]
    pool_rows, test_rows = split_rows(n_rows, test_fraction, digest)
    if task == "binary":
        y, labels = binary_labels(table.y, positive, label_param)
        y_pool, y_test = y[pool_rows], y[test_rows]
        if len(np.unique(y_pool)) < 2:
            raise DatasetError(label_param, "the training pool has a single class after the "
                                            "split; use more rows or another test_fraction")
    elif task == "regression":
        y_pool, y_test, labels = regression_labels(table.y[pool_rows], table.y[test_rows],
                                                   label_bound, label_param)
    else:  # pragma: no cover (a programming error)
        raise ValueError(f"unknown task {task!r}")
    X_pool, X_test, features = scale_features(table.X[pool_rows], table.X[test_rows],
                                              data_norm=data_norm, rows=rows,
                                              intercept=intercept)
    arrays = [np.ascontiguousarray(a, dtype=float) for a in (X_pool, y_pool, X_test, y_test)]
    for array in arrays:
        array.flags.writeable = False
    meta = {"sha256": digest, "rows": int(n_rows), "features": list(table.columns),
            "label": table.label, "dimension": int(X_pool.shape[1]),
            "split": {"test_fraction": float(test_fraction), "pool": int(len(pool_rows)),
                      "test": int(len(test_rows)),
                      "stream": "make_rng({stream: dataset_split, sha256, test_fraction}, 0)"},
            "labels": labels, "features_scaling": features}
    return Prepared(*arrays, meta)
