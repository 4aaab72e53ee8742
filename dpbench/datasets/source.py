"""Naming, locating, reading and caching data sets (docs/datasets.md).

A data set is named by one string, ``<kind>:<target>``:

* ``sklearn:<name>``: a data set bundled with scikit-learn (:mod:`dpbench.datasets.bundled`);
* ``csv:<path>``, ``npz:<path>``, ``svmlight:<path>``: a file (:mod:`dpbench.datasets.files`).

A relative path is resolved against the suite file's directory when a suite is loaded
(:func:`locate`); the problem then holds the absolute path, which every worker reads.

**Identity.** The content, not the path, is what a data set *is*: files are digested (SHA-256 of
their bytes), bundled data sets by their arrays. Problems pin the digest in a parameter
(``sha256``), so seed streams and the store fingerprint see the content, and :func:`identity`
maps the name to its kind only (a moved file, or a suite moved with it, changes nothing).

**Caching.** A process reads each file once: tables are cached by (path, size, modification
time), so a changed file is read again, and the prepared pool and split by the table's digest
and the preparation's parameters.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import did_you_mean
from ..core.files import NotReadable, read_regular
from .bundled import load_bundled
from .files import DatasetError, Table, read_csv, read_npz, read_svmlight
from .prepare import Prepared, prepare

#: Largest dataset file read (a data file beyond it is refused, never read whole into memory).
MAX_DATASET_BYTES = 2 * 2**30

__all__ = ["FILE_KINDS", "KINDS", "Loaded", "Spec", "file_paths", "identity", "load",
           "load_prepared", "locate", "parse"]

FILE_KINDS: tuple[str, ...] = ("csv", "npz", "svmlight")
KINDS: tuple[str, ...] = ("sklearn", *FILE_KINDS)


@dataclass(frozen=True)
class Spec:
    """A parsed data set name: its ``kind`` and ``target`` (a bundled name or a path)."""

    kind: str
    target: str

    @property
    def is_file(self) -> bool:
        return self.kind in FILE_KINDS

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}"


def parse(value: str) -> Spec:
    """The :class:`Spec` of ``value``; a :class:`DatasetError` on ``dataset`` when malformed."""
    kind, sep, target = value.partition(":")
    if not sep or kind not in KINDS or not target.strip():
        hint = did_you_mean(kind, KINDS) if sep else ""
        raise DatasetError("dataset", f"{value!r} is not a data set name{hint}: write "
                                      "sklearn:<name>, csv:<path>, npz:<path> or svmlight:<path>")
    return Spec(kind, target.strip() if kind == "sklearn" else target)


def locate(value: Any, base: Path) -> Any:
    """``value`` with a relative file path made absolute against ``base`` (other values, and
    values that are not data set names, unchanged: validation reports those)."""
    if not isinstance(value, str):
        return value
    try:
        spec = parse(value)
    except DatasetError:
        return value
    if not spec.is_file:
        return value
    path = Path(spec.target).expanduser()
    if not path.is_absolute():
        path = Path(base) / path
    return f"{spec.kind}:{os.path.normpath(path)}"


def file_paths(values: Iterable[Any]) -> list[str]:
    """The paths of the data files named among ``values`` (sorted, each once)."""
    out = set()
    for value in values:
        if isinstance(value, str):
            try:
                spec = parse(value)
            except DatasetError:
                continue
            if spec.is_file:
                out.add(spec.target)
    return sorted(out)


def identity(value: Any) -> Any:
    """What seed streams and fingerprints see of a data set name: its kind for a file (the
    content enters through the pinned digest, never the path), the whole name for a bundled
    data set."""
    if not isinstance(value, str):
        return value
    kind = value.partition(":")[0]
    return kind if kind in FILE_KINDS else value


@dataclass(frozen=True, eq=False)
class Loaded:
    """A parsed data set and the SHA-256 ``digest`` of its content (compared and hashed by
    identity: each is made once per process by the cached readers)."""

    table: Table
    digest: str
    spec: Spec


def _array_digest(table: Table) -> str:
    h = hashlib.sha256()
    for array in (table.X, table.y):
        h.update(str((array.dtype.str, array.shape)).encode())
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _bundled(name: str) -> Loaded:
    table = load_bundled(name)
    return Loaded(table, _array_digest(table), Spec("sklearn", name))


@functools.lru_cache(maxsize=8)
def _file(kind: str, path: str, size: int, mtime_ns: int, options: tuple[Any, ...]) -> Loaded:
    """Read and parse a file (cached by path, size and modification time: a changed file is
    read again)."""
    try:
        data = read_regular(path, MAX_DATASET_BYTES, "dataset file")
    except OSError as exc:
        raise DatasetError("dataset", f"cannot read {path}: {exc.strerror or exc}") from None
    except NotReadable as exc:
        raise DatasetError("dataset", str(exc)) from None
    what = f"{kind} file {path}"
    header, label_column, feature_columns, x_array, y_array = options
    if kind == "csv":
        table = read_csv(data, header=header, label_column=label_column,
                         feature_columns=feature_columns, what=what)
    elif kind == "npz":
        table = read_npz(data, x_array=x_array, y_array=y_array, what=what)
    else:
        table = read_svmlight(data, what=what)
    return Loaded(table, hashlib.sha256(data).hexdigest(), Spec(kind, path))


#: The reading options and the kinds they apply to.
_OPTION_KINDS: dict[str, tuple[str, ...]] = {
    "header": ("csv",), "label_column": ("csv",), "feature_columns": ("csv",),
    "x_array": ("npz",), "y_array": ("npz",),
}
_OPTION_DEFAULTS: dict[str, Any] = {"header": True, "label_column": None,
                                    "feature_columns": None, "x_array": "X", "y_array": "y"}


#: Why data files are not read right now in this thread (:func:`files_refused`), or ``None``.
_FILES_REFUSED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dpbench_files_refused", default=None)


@contextlib.contextmanager
def files_refused(reason: str) -> Iterator[None]:
    """Within the block (in this thread), a data set named by a path is refused (a
    :class:`DatasetError` giving ``reason``) instead of read: for suites read back from a store,
    whose paths are data from the store and must not be followed (docs/reliability.md).
    Bundled data sets still load."""
    token = _FILES_REFUSED.set(reason)
    try:
        yield
    finally:
        _FILES_REFUSED.reset(token)


def load(value: str, **options: Any) -> Loaded:
    """The parsed data set named ``value`` (a cached read). ``options``: ``header``,
    ``label_column``, ``feature_columns`` (CSV), ``x_array``, ``y_array`` (NPZ); an option
    given away from its default for a kind that does not read it is an error naming it."""
    spec = parse(value)
    opts = {**_OPTION_DEFAULTS, **options}
    for name, kinds in _OPTION_KINDS.items():
        if spec.kind not in kinds and opts[name] != _OPTION_DEFAULTS[name]:
            raise DatasetError(name, f"applies to {' and '.join(kinds)} data sets only, not to "
                                     f"{spec.kind}: data")
    if spec.kind == "sklearn":
        return _bundled(spec.target)
    refused = _FILES_REFUSED.get()
    if refused is not None:
        raise DatasetError("dataset", f"{spec.kind}:{spec.target} is not read: {refused}")
    path = spec.target
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DatasetError("dataset", f"cannot read {path}: {exc.strerror or exc} (a relative "
                                      "path is resolved against the suite file's "
                                      "directory)") from None
    if not os.path.isfile(path):
        raise DatasetError("dataset", f"{path} is not a file")
    return _file(spec.kind, path, int(st.st_size), int(st.st_mtime_ns),
                 tuple(opts[k] for k in ("header", "label_column", "feature_columns", "x_array",
                                         "y_array")))


@functools.lru_cache(maxsize=16)
def _prepared(loaded: Loaded, task: str, test_fraction: float, data_norm: float, rows: str,
              intercept: bool, positive: Any, label_bound: float, label_param: str) -> Prepared:
    return prepare(loaded.table, loaded.digest, task=task, test_fraction=test_fraction,
                   data_norm=data_norm, rows=rows, intercept=intercept, positive=positive,
                   label_bound=label_bound, label_param=label_param)


def load_prepared(loaded: Loaded, *, task: str, test_fraction: float, data_norm: float,
                  rows: str, intercept: bool, positive: Any = None,
                  label_bound: float = 1.0) -> Prepared:
    """The prepared pool and held-out split of a loaded data set (:func:`prepare`, cached)."""
    label_param = {"csv": "label_column", "npz": "y_array"}.get(loaded.spec.kind, "dataset")
    return _prepared(loaded, task, float(test_fraction), float(data_norm), rows,
                     bool(intercept), positive, float(label_bound), label_param)
