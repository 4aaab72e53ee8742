"""``dpbench export STORE``: every cell of a store as one tidy table, CSV or Parquet (issue 18).

The table and its columns are :mod:`dpbench.analysis.export`'s (docs/analysis.md, "Export").
Bad input exits 2 before anything is written: a path that is not a dpbench store, an output
that exists (unless ``--overwrite``) or cannot be written, Parquet without pyarrow. This module
imports nothing heavy at import time: ``dpbench --help`` and the other commands do not pay for
pandas (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXIT_OK = 0


def add_parser(sub: Any) -> None:
    """Add the ``export`` subcommand to the ``dpbench`` subparsers ``sub``."""
    ex = sub.add_parser("export", help="write every cell of a store (all experiments, pending and "
                                       "failed cells included) as one tidy CSV or Parquet table")
    ex.add_argument("store", help="a dpbench store (the zarr directory of dpbench run --store)")
    # dpbench.analysis.export.FORMATS, not imported here: it would load xarray for every command.
    ex.add_argument("--format", default=None, choices=("csv", "parquet"),
                    help="file format (default: from the suffix of --output, else csv); parquet "
                         "needs pyarrow: pip install 'dp-ratebench[parquet]'")
    ex.add_argument("--output", default=None, metavar="PATH",
                    help="file to write (default: <store directory name>.csv or .parquet in the "
                         "current directory, without the store's .zarr suffix)")
    ex.add_argument("--overwrite", action="store_true", help="replace an existing output file "
                                                             "(refused otherwise)")
    ex.add_argument("--only", action="append", default=None, metavar="KEY=VALUE[,VALUE]",
                    help="export a slice: KEY is experiment, algorithm or problem (as for "
                         "dpbench run --only)")


def run(args: argparse.Namespace) -> int:
    """Check the input and the output, then build the table and write it; returns exit code 0
    (bad input raises :class:`~dpbench.core.errors.UserInputError`, which ``main`` turns into
    exit 2)."""
    from ..analysis.export import (
        check_output,
        default_output,
        format_of,
        require_parquet,
        store_frame,
        write_table,
    )
    from ..config.slice import Slice
    from ..core.schema import STATUS_NAMES
    from ..store.cube import Store

    fmt = args.format or (format_of(args.output) if args.output else None) or "csv"
    if fmt == "parquet":
        require_parquet()
    store = Store.open(args.store)
    only = Slice.parse(args.only)
    only.check(store.slice_index())
    target = Path(args.output) if args.output else default_output(store, fmt)
    check_output(target, args.overwrite)  # before the store is read: a refusal writes nothing
    frame = store_frame(store, only)
    write_table(frame, target, fmt, overwrite=args.overwrite)
    counts = frame["status"].value_counts() if len(frame) else {}
    by_status = ", ".join(f"{int(counts.get(code, 0))} {name}"
                          for code, name in STATUS_NAMES.items())
    print(f"export: {target} ({fmt}): {len(frame)} cells of "
          f"{len(only.experiments(store.experiments()))} experiment(s)"
          f"{f' ({only.describe()})' if only else ''}; {by_status}")
    if not store.experiments():
        print("note: the store holds no experiments (audits are not exported): the table has "
              "its header only")
    return EXIT_OK
