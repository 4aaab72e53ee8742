"""Console tables: store progress (``dpbench status``) and the end-of-run result summary."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.schema import DONE
from ..store.summary import STATUS_COLUMNS

if TYPE_CHECKING:
    from ..config.slice import Slice
    from ..store.cube import Store


#: Longest text read from a store that a command prints (a label, an error message).
MAX_SHOWN_CHARS = 500

#: Control characters (C0 but newline and tab, DEL, C1): escaped before a store's text reaches a
#: terminal, where an escape sequence could retitle or clear it.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}


def shown(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """Text read from a store, safe to print: control characters escaped (``\\x1b``) and cut to
    ``limit`` characters (saying how long it was)."""
    out = str(text)
    cut = f"… ({len(out)} characters)" if len(out) > limit else ""
    return out[:limit].translate(_CONTROL) + cut


def status_table(store: Store, only: Slice | None = None) -> Table:
    """Done / failed / not applicable / pending per experiment (and per algorithm), of the
    ``only``'s cells."""
    return rows_table(store.status_rows(only), store.path, only)


def rows_table(rows: list[Any], path: Any, only: Slice | None = None) -> Table:
    t = Table(title=f"dpbench store {path}"
              + (f" ({only.describe()})" if only else ""))
    for col in STATUS_COLUMNS:
        t.add_column(col, justify="left" if col in ("experiment", "algorithm") else "right")
    for name, label, *counts in rows:
        t.add_row(escape(shown(name)), escape(shown(label)), *(str(int(c)) for c in counts))
    return t


def results_table(store: str | os.PathLike[str], experiment: str) -> Table:
    """Mean excess risk (done cells) per algorithm and problem, at each n (other axes pooled
    over their first value)."""
    import xarray as xr  # not at module level: ``dpbench status`` needs no xarray (issue 17)

    ds = xr.open_zarr(os.fspath(store), group=experiment, consolidated=False)
    sel = {d: 0 for d in ds.excess_risk.dims if d not in ("algorithm", "problem", "n", "seed")}
    er = ds.excess_risk.isel(sel).where(ds.status.isel(sel) == DONE).load()
    t = Table(title=f"{experiment}: mean excess risk (average scale) at "
              + ", ".join(f"{d}={ds[d].values[0]}" for d in sel))
    t.add_column("algorithm")
    t.add_column("problem")
    for n in ds.n.values:
        t.add_column(f"n={n}", justify="right")
    for a in ds.algorithm.values:
        for p in ds.problem.values:
            vals = er.sel(algorithm=a, problem=p)
            cells = []
            for n in ds.n.values:
                v = vals.sel(n=n).values
                cells.append("n/a" if np.all(np.isnan(v)) else f"{np.nanmean(v):.3g}")
            t.add_row(str(a), str(p), *cells)
    return t


def print_tables(*tables: Table) -> None:
    console = Console(width=140)
    for t in tables:
        console.print(t)
