"""Tidy export of a store: one row per cell, for pandas, R, spreadsheets and databases (issue 18).

The cube is the right shape for computing on (xarray, dask), the wrong one for most other tools.
:func:`experiment_frame` flattens one experiment's cube into a table with one row per cell:
``experiment``, the coordinates in the cube's dimension order (``algorithm``, ``problem``, ``n``,
``p``, ``epsilon``, ``delta``, extra grid axes, ``seed``), then the cube variables in schema order
(:data:`~dpbench.core.schema.VARIABLE_NAMES`), with ``status_name`` next to the ``status`` code.
Every cell is a row, pending and failed ones included: their values are NaN and ``status`` /
``error`` say why, so that a filter on ``status_name == "done"`` is the reader's explicit choice.

:func:`store_frame` stacks the experiments of a store; experiments with different grid axes get
the union of the columns, a column an experiment lacks being missing (NA) in its rows.
:func:`write_table` writes a table as CSV or Parquet without ever leaving a partial file;
``dpbench export`` (:mod:`dpbench.cli.export`) is these three in a row.

pandas, pyarrow and xarray are imported inside the functions: the CLI imports this module only
when ``dpbench export`` runs, and ``import dpbench`` stays light (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.slice import Slice
from ..core.errors import UserInputError
from ..core.schema import FLOAT_VARS, STATUS_NAMES, VARIABLE_NAMES
from ..store.cube import Store
from ..store.writable import check_writable, write_all_or_nothing

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

__all__ = ["FORMATS", "PARQUET_INSTALL", "check_output", "default_output", "experiment_frame",
           "format_of", "require_parquet", "store_frame", "table_columns", "write_table"]

#: The file formats of :func:`write_table` (and ``dpbench export --format``).
FORMATS: tuple[str, ...] = ("csv", "parquet")
#: How to get Parquet support: the ``parquet`` extra of the distribution (``dp-ratebench``).
PARQUET_INSTALL = "pip install 'dp-ratebench[parquet]'"
_SUFFIX = {"csv": ".csv", "parquet": ".parquet"}


# --- building the table -----------------------------------------------------------------------

def _plain(values: np.ndarray) -> np.ndarray:
    """``values`` with numpy strings (zarr v3 reads them as ``StringDType``) as Python ``str``
    objects, which every pandas version and writer understands; other dtypes unchanged."""
    values = np.asarray(values)
    return values.astype(object) if values.dtype.kind in "TU" else values


def _status_names(codes: np.ndarray) -> np.ndarray:
    """The :data:`~dpbench.core.schema.STATUS_NAMES` of status codes (an unknown code keeps its
    number in the name rather than failing the whole export)."""
    unique, inverse = np.unique(codes, return_inverse=True)
    names = np.array([STATUS_NAMES.get(int(c), f"unknown ({int(c)})") for c in unique],
                     dtype=object)
    return names[inverse.reshape(-1)]


def experiment_frame(ds: xr.Dataset, experiment: str | None = None) -> pd.DataFrame:
    """One experiment's cube as a tidy table: one row per cell, in the cube's (C) order.

    Columns: ``experiment`` (``experiment``, else the cube's ``experiment`` attribute; no column
    when neither names one), the 0-d coordinates of a slice (e.g. ``algorithm`` after
    ``ds.sel(algorithm="sgd")``), the dimensions in cube order, then the cube variables of
    :data:`~dpbench.core.schema.VARIABLE_NAMES` that ``ds`` holds, in schema order, with
    ``status_name`` right after ``status``. Other data variables are left out. Values are
    exactly the cube's: NaN stays NaN, ``status`` keeps its uint8 code, ``error`` is ``""`` for
    cells without a message.
    """
    import pandas as pd

    present = [v for v in VARIABLE_NAMES if v in ds.data_vars]
    if not present:
        raise ValueError("the dataset holds none of the cube variables "
                         f"({', '.join(VARIABLE_NAMES)}): is it a dpbench experiment?")
    dims = ds[present[0]].dims
    uneven = [v for v in present if ds[v].dims != dims]
    if uneven:
        raise ValueError(f"cube variables {', '.join(uneven)} do not have the dimensions "
                         f"{dims} of {present[0]!r}")
    shape = tuple(int(ds.sizes[d]) for d in dims)
    size = int(np.prod(shape, dtype=np.int64))
    name = experiment if experiment is not None else ds.attrs.get("experiment")

    columns: dict[str, Any] = {}
    if name is not None:
        columns["experiment"] = np.full(size, str(name), dtype=object)
    for coord, var in ds.coords.items():
        if var.ndim == 0 and coord not in dims:
            columns[str(coord)] = np.repeat(_plain(var.values).reshape(1), size)
    for axis, dim in enumerate(dims):
        values = _plain(ds[dim].values) if dim in ds.coords else np.arange(shape[axis])
        # This dimension's value of every cell, in the same C order as the ravelled variables.
        along = [1] * len(dims)
        along[axis] = shape[axis]
        columns[str(dim)] = np.broadcast_to(values.reshape(along), shape).ravel()
    for var in present:
        values = _plain(ds[var].values).ravel()
        columns[var] = values
        if var == "status":
            columns["status_name"] = _status_names(values)
    return pd.DataFrame(columns)


def _merge_orders(orders: Iterable[Sequence[str]]) -> list[str]:
    """The union of several column orders, keeping each one's relative order where they agree:
    a name new to the union goes right after its nearest predecessor already in it (an extra
    grid axis of one experiment lands between ``delta`` and ``seed``, as in its cube)."""
    merged: list[str] = []
    for order in orders:
        for i, name in enumerate(order):
            if name in merged:
                continue
            pos = 0
            for prev in reversed(order[:i]):
                if prev in merged:
                    pos = merged.index(prev) + 1
                    break
            merged.insert(pos, name)
    return merged


def _common_dtype(dtypes: Sequence[Any], some_missing: bool) -> Any:
    """The dtype of a column stacked from frames with ``dtypes`` (and NA rows where some frames
    lack it): integers and booleans become pandas' nullable types only when NA rows are needed,
    since a NaN would otherwise turn them into floats (``n = 100.0``)."""
    import pandas as pd

    kinds = {d.kind if isinstance(d, np.dtype) else "x" for d in dtypes}  # "x": pandas' own
    if kinds <= {"i", "u"}:
        return pd.Int64Dtype() if some_missing else np.result_type(*dtypes)
    if kinds == {"b"}:
        return pd.BooleanDtype() if some_missing else np.dtype(bool)
    if kinds <= {"i", "u", "f"}:
        return np.dtype("f8")
    if len(set(map(str, dtypes))) == 1:
        return dtypes[0]
    return np.dtype(object)


def table_columns(frames: Sequence[pd.DataFrame]) -> list[str]:
    """The columns of the stacked table: ``experiment``, the coordinates (merged cube orders),
    then the variables in schema order with ``status_name`` after ``status``."""
    variables = [c for v in VARIABLE_NAMES for c in ((v, "status_name") if v == "status" else (v,))]
    coords = _merge_orders([c for c in f.columns if c not in variables and c != "experiment"]
                           for f in frames)
    return ["experiment", *coords,
            *[v for v in variables if not frames or any(v in f for f in frames)]]


def _stack(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate experiment frames over the union of their columns (see :func:`table_columns`)."""
    import pandas as pd

    columns = table_columns(frames)
    if not frames:  # a store without experiments: the header, with the schema's dtypes
        kinds = {**{v: np.dtype("f8") for v in FLOAT_VARS}, "status": np.dtype("u1")}
        return pd.DataFrame({c: pd.Series(dtype=kinds.get(c, object)) for c in columns})
    aligned: list[pd.DataFrame] = []
    dtypes: dict[str, Any] = {}
    for col in columns:
        have = [f[col].dtype for f in frames if col in f]
        dtypes[col] = _common_dtype(have, len(have) < len(frames))
    for f in frames:
        out: dict[str, pd.Series] = {}
        for col in columns:
            series = f[col] if col in f else pd.Series([None] * len(f), dtype=object)
            out[col] = series.astype(dtypes[col]).reset_index(drop=True)
        aligned.append(pd.DataFrame(out))
    return pd.concat(aligned, ignore_index=True)


def store_frame(store: Store, only: Slice | None = None) -> pd.DataFrame:
    """Every cell of every experiment of a store (of the slice ``only``), as one tidy
    table (:func:`experiment_frame` per experiment, stacked in the store's experiment order
    over the union of the columns).

    Pending and failed cells are included; audits (``audit/<name>``) are not experiments and are
    not exported.
    """
    only = only or Slice()
    index = store.slice_index()
    only.check(index)
    frames: list[pd.DataFrame] = []
    for name in only.experiments(index):
        ds = store.cube(name, VARIABLE_NAMES, only.positions(index[name]))
        frames.append(experiment_frame(ds, name))
    return _stack(frames)


# --- writing it -------------------------------------------------------------------------------

def format_of(path: str | Path) -> str | None:
    """The format a file name's suffix asks for (``.csv``, ``.parquet``), or None."""
    suffix = Path(path).suffix.lower()
    return next((fmt for fmt, s in _SUFFIX.items() if s == suffix), None)


def default_output(store: Store, fmt: str) -> Path:
    """``<store directory name>.csv`` / ``.parquet`` in the current directory (a ``.zarr``
    suffix is dropped: ``results/quickstart.zarr`` gives ``quickstart.csv``)."""
    name = store.path.resolve().name
    if name.lower().endswith(".zarr") and len(name) > len(".zarr"):
        name = name[:-len(".zarr")]
    return Path(name + _SUFFIX[fmt])


def require_parquet() -> None:
    """Refuse (:class:`UserInputError`, exit 2) Parquet without pyarrow, naming the extra."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UserInputError(
            "--format parquet needs pyarrow, which is not installed: install dpbench's parquet "
            f"extra ({PARQUET_INSTALL}, or pip install 'pyarrow>=15'), or use --format csv"
        ) from None


def check_output(path: Path, overwrite: bool = False, option: str = "--output") -> None:
    """Refuse (exit 2) a directory, an existing file unless ``overwrite``, and a directory that
    cannot be written (read-only, forbidden, full): called before any work, so a refusal writes
    nothing."""
    if path.is_dir():
        raise UserInputError(f"{option}: {str(path)!r} is a directory; name the file to write")
    if os.path.lexists(path) and not overwrite:
        raise UserInputError(f"{option}: {str(path)!r} exists; choose another {option}, or pass "
                             "--overwrite to replace it")
    check_writable(path, option)


def _csv_floats(values: np.ndarray) -> np.ndarray:
    """Float64 values as CSV text that reads back bit-identical: numpy's shortest round-trip
    representation (``0.1``, ``1e-05``, ``-0.0``, ``inf``), and ``""`` for NaN."""
    text = values.astype(str).astype(object)
    text[np.isnan(values)] = ""
    return text


def _write(frame: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        frame.to_parquet(path, index=False, engine="pyarrow")
        return
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == np.dtype("f8"):
            out[col] = _csv_floats(out[col].to_numpy())
    out.to_csv(path, index=False, na_rep="", lineterminator="\n")


def write_table(frame: pd.DataFrame, path: str | Path, fmt: str, *, overwrite: bool = False,
                option: str = "--output") -> Path:
    """Write ``frame`` as ``fmt`` (:data:`FORMATS`) to ``path``; returns the path.

    An existing file is refused unless ``overwrite`` (:func:`check_output`). The table goes to a
    temporary file beside ``path`` and is renamed into place, so a failure (a full disk, a
    missing pyarrow) leaves neither a partial file nor a changed one, and no directory created
    for it; a disk error is a :class:`UserInputError` naming ``option``.
    """
    if fmt not in FORMATS:
        raise UserInputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "parquet":
        require_parquet()
    path = Path(path)
    check_output(path, overwrite, option)
    write_all_or_nothing([(path, lambda tmp: _write(frame, tmp, fmt))], option)
    return path
