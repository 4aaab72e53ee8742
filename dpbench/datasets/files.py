"""Parsers of data files: CSV, NPZ and LIBSVM/svmlight text, written with numpy and the standard
library only (docs/datasets.md, 'Loaders').

Each parser takes the file's bytes (read once by :mod:`dpbench.datasets.source`, which also
digests them) and returns a :class:`Table`: float features, raw labels (numbers, or strings for
CSV/NPZ class names) and the column names. Every defect is a :class:`DatasetError` naming the
parameter to fix and, where there is one, the row (1-based line of the file) and the column.
"""

from __future__ import annotations

import csv
import io
import math
import zipfile
from dataclasses import dataclass

import numpy as np

from ..core.errors import UserInputError, did_you_mean

__all__ = ["DatasetError", "Table", "read_csv", "read_npz", "read_svmlight"]


class DatasetError(UserInputError):
    """A data set cannot be used as given; ``param`` names the problem parameter to fix."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        self.message = message
        super().__init__(f"parameter {param!r}: {message}")


@dataclass(frozen=True)
class Table:
    """A parsed data set: features ``X`` (rows, columns) as float64, labels ``y`` (rows,) as
    float64 or strings, the feature ``columns`` and the ``label`` column's name."""

    X: np.ndarray
    y: np.ndarray
    columns: tuple[str, ...]
    label: str


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError("dataset", f"{what} is not UTF-8 text (byte {data[exc.start]:#04x} at "
                                      f"offset {exc.start})") from None


def _finite_rows(X: np.ndarray, lines: list[int], columns: tuple[str, ...], what: str) -> None:
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = (int(v[0]) for v in np.nonzero(bad))
        raise DatasetError("dataset", f"{what}: row {lines[r]} has a missing or non-finite value "
                                      f"({X[r, c]!r}) in column {columns[c]!r}; remove or impute "
                                      "such rows first")


def _labels(raw: list[str]) -> np.ndarray:
    """Labels as float64 when every one is a finite number, else as stripped strings."""
    try:
        values = np.array([float(v) for v in raw], dtype=float)
    except ValueError:
        return np.array(raw, dtype=str)
    return values if np.isfinite(values).all() else np.array(raw, dtype=str)


def _column_index(spec: str | int, names: list[str], header: bool, param: str) -> int:
    if isinstance(spec, int):
        if not 0 <= spec < len(names):
            raise DatasetError(param, f"column index {spec} is out of range: the file has "
                                      f"{len(names)} columns (indices 0 to {len(names) - 1})")
        return spec
    if header and spec in names:
        return names.index(spec)
    if not header and spec.strip().isdigit():
        return _column_index(int(spec), names, header, param)
    if not header:
        raise DatasetError(param, f"column {spec!r} needs a header row (header: false): name "
                                  "columns by 0-based index")
    raise DatasetError(param, f"no column named {spec!r}{did_you_mean(spec, names)}; columns: "
                              f"{', '.join(names[:20])}{' …' if len(names) > 20 else ''}")


def read_csv(data: bytes, *, header: bool = True, label_column: str | int | None = None,
             feature_columns: str | None = None, what: str = "the CSV file") -> Table:
    """A comma-separated file: one row per record, the same number of fields in every row.

    ``header``: the first row names the columns (else they are named by 0-based index).
    ``label_column``: the label's name or 0-based index (default: the last column).
    ``feature_columns``: comma-separated names or indices (default: every other column).
    Blank lines are skipped; every feature cell must be a finite number, labels may be numbers
    or class names."""
    reader = csv.reader(io.StringIO(_text(data, what)))
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            rows.append([cell.strip() for cell in row])
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise DatasetError("dataset", f"{what} is not valid CSV (line {reader.line_num}): "
                                      f"{exc}") from None
    if header:
        if not rows:
            raise DatasetError("dataset", f"{what} is empty")
        names, rows, lines = rows[0], rows[1:], lines[1:]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise DatasetError("header", f"{what}: the header names column {dup!r} twice")
    else:
        names = [str(j) for j in range(len(rows[0]))] if rows else []
    if not rows:
        raise DatasetError("dataset", f"{what} has no data rows")
    width = len(names)
    if width < 2:
        raise DatasetError("dataset", f"{what} has {width} column(s); need at least one feature "
                                      "and a label (is it comma-separated?)")
    for row, line in zip(rows, lines):
        if len(row) != width:
            raise DatasetError("dataset", f"{what}: row {line} has {len(row)} fields, the "
                                          f"{'header' if header else 'first row'} {width}")
    label = width - 1 if label_column is None else _column_index(label_column, names, header,
                                                                 "label_column")
    if feature_columns is None:
        features = [j for j in range(width) if j != label]
    else:
        parts = [s.strip() for s in feature_columns.split(",") if s.strip()]
        if not parts:
            raise DatasetError("feature_columns", "names no column")
        features = [_column_index(int(s) if s.isdigit() and not (header and s in names) else s,
                                  names, header, "feature_columns") for s in parts]
        if label in features:
            raise DatasetError("feature_columns", f"includes the label column {names[label]!r}")
        if len(set(features)) != len(features):
            raise DatasetError("feature_columns", "names a column twice")
    X = np.empty((len(rows), len(features)))
    for i, (row, line) in enumerate(zip(rows, lines)):
        for k, j in enumerate(features):
            cell = row[j]
            try:
                X[i, k] = float(cell) if cell else math.nan
            except ValueError:
                raise DatasetError("dataset", f"{what}: row {line} column {names[j]!r} holds "
                                              f"{cell[:40]!r}, not a number (only the label "
                                              "column may hold class names)") from None
    columns = tuple(names[j] for j in features)
    _finite_rows(X, lines, columns, what)
    raw_labels = [row[label] for row in rows]
    empty = [line for row, line in zip(rows, lines) if not row[label]]
    if empty:
        raise DatasetError("label_column", f"{what}: row {empty[0]} has no label (column "
                                           f"{names[label]!r})")
    return Table(X, _labels(raw_labels), columns, names[label])


def read_npz(data: bytes, *, x_array: str = "X", y_array: str = "y",
             what: str = "the NPZ file") -> Table:
    """A numpy ``.npz`` archive holding a 2-D numeric array ``x_array`` (rows × features) and a
    1-D array ``y_array`` of labels (numbers or strings) with one entry per row; no pickles."""
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DatasetError("dataset", f"{what} is not a numpy .npz archive: {exc}") from None
    with archive:
        names = list(archive.files)
        arrays = {}
        for param, key in (("x_array", x_array), ("y_array", y_array)):
            if key not in names:
                raise DatasetError(param, f"{what} has no array {key!r}{did_you_mean(key, names)};"
                                          f" arrays: {', '.join(names) or '(none)'}")
            try:
                arrays[param] = archive[key]
            except ValueError as exc:  # an object array (needs pickles)
                raise DatasetError(param, f"{what}: array {key!r} cannot be read without "
                                          f"pickles ({exc}); store numbers or strings") from None
    X, y = arrays["x_array"], arrays["y_array"]
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise DatasetError("x_array", f"{what}: array {x_array!r} must be 2-D (rows × features), "
                                      f"got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise DatasetError("x_array", f"{what}: array {x_array!r} must be numeric, got dtype "
                                      f"{X.dtype}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise DatasetError("y_array", f"{what}: array {y_array!r} must be 1-D with one label per "
                                      f"row ({X.shape[0]}), got shape {y.shape}")
    X = X.astype(float)
    columns = tuple(str(j) for j in range(X.shape[1]))
    _finite_rows(X, list(range(X.shape[0])), columns, f"{what} (rows counted from 0)")
    if y.dtype.kind in "biuf":
        y = y.astype(float)
        if not np.isfinite(y).all():
            raise DatasetError("y_array", f"{what}: row {int(np.flatnonzero(~np.isfinite(y))[0])} "
                                          "has a non-finite label")
    elif y.dtype.kind == "U":
        y = np.char.strip(y)
    else:
        raise DatasetError("y_array", f"{what}: labels must be numbers or strings, got dtype "
                                      f"{y.dtype}")
    return Table(X, y, columns, y_array)


def read_svmlight(data: bytes, *, what: str = "the svmlight file") -> Table:
    """LIBSVM/svmlight text: ``label index:value index:value ...`` per line, ``#`` starts a
    comment. Indices are 1-based as LIBSVM writes them, unless some index is 0 (then the file is
    0-based); absent entries are 0; the dimension is the largest index seen."""
    labels: list[float] = []
    entries: list[dict[int, float]] = []
    lines: list[int] = []
    for number, raw in enumerate(_text(data, what).splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        try:
            label = float(tokens[0])
        except ValueError:
            raise DatasetError("dataset", f"{what}: line {number} starts with {tokens[0][:40]!r}, "
                                          "not a numeric label (multi-label files are not "
                                          "supported)") from None
        if not math.isfinite(label):
            raise DatasetError("dataset", f"{what}: line {number} has a non-finite label")
        row: dict[int, float] = {}
        for token in tokens[1:]:
            index, sep, value = token.partition(":")
            if index == "qid":
                raise DatasetError("dataset", f"{what}: line {number} has a qid (ranking files are "
                                              "not supported)")
            try:
                j, v = int(index), float(value)
            except ValueError:
                j, v = -1, math.nan
            if not sep or j < 0:
                raise DatasetError("dataset", f"{what}: line {number} has {token[:40]!r}, not "
                                              "index:value")
            if not math.isfinite(v):
                raise DatasetError("dataset", f"{what}: row {number} has a missing or non-finite "
                                              f"value ({value!r}) at index {j}")
            if j in row:
                raise DatasetError("dataset", f"{what}: line {number} gives index {j} twice")
            row[j] = v
        labels.append(label)
        entries.append(row)
        lines.append(number)
    if not labels:
        raise DatasetError("dataset", f"{what} has no data rows")
    indices = [j for row in entries for j in row]
    zero_based = 0 in indices
    width = (max(indices) + (1 if zero_based else 0)) if indices else 0
    if width == 0:
        raise DatasetError("dataset", f"{what} has no feature values")
    X = np.zeros((len(entries), width))
    shift = 0 if zero_based else 1
    for i, row in enumerate(entries):
        for j, v in row.items():
            X[i, j - shift] = v
    columns = tuple(str(j + shift) for j in range(width))
    return Table(X, np.array(labels, dtype=float), columns, "label")
