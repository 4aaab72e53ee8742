"""Where a store is: whether a path holds a dpbench store, without opening it with zarr (a run
checks its store path before it starts its workers; :mod:`.cube` imports zarr)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import StoreError

ROOT_KEY = "dpbench_store"


def is_store(path: Path) -> bool:
    """Whether ``path`` holds a dpbench store (its root metadata names one)."""
    meta = path / "zarr.json"
    if not meta.is_file():
        return False
    try:
        doc = json.loads(meta.read_text())
    except (OSError, ValueError):
        return False
    return ROOT_KEY in doc.get("attributes", {})


def check_store_path(path: Path) -> bool:
    """True if ``path`` is an existing dpbench store, False if it is free (absent or an empty
    directory); :class:`StoreError` if it holds anything else."""
    if not path.exists():
        return False
    if not path.is_dir():
        raise StoreError(f"store path {str(path)!r} is a file, not a dpbench store; "
                         "choose a new path or an existing store directory")
    if is_store(path):
        return True
    if any(path.iterdir()):
        raise StoreError(f"store path {str(path)!r} holds something else (a non-empty directory "
                         "that is not a dpbench store); choose a new path or an existing store")
    return False
